/* tools/cmds.h: the subcommands of primc that live in their own files under tools/. */
#ifndef PRIMC_CMDS_H
#define PRIMC_CMDS_H

int pc_cmd_compile(int argc, char **argv);     /* tools/compile.c */
int pc_cmd_conformance(int argc, char **argv); /* tools/conformance.c */
int pc_cmd_bench(int argc, char **argv);       /* tools/bench.c */

#endif
