/* codegen/codegen.h: kernel IR construction from fused groups, LLVM and CUDA C renderers, packaging. */
#ifndef PRIMC_CODEGEN_H
#define PRIMC_CODEGEN_H

#include "ir/ir.h"

typedef enum pc_emit {
  PC_EMIT_EXE,  /* standalone executable: .npy in/out, --bench N */
  PC_EMIT_OBJ,  /* NAME.o + NAME.h */
  PC_EMIT_LIB,  /* shared library + NAME.h */
  PC_EMIT_LLVM, /* .ll text */
  PC_EMIT_ASM,  /* assembly text */
  PC_EMIT_CUDA  /* .cu text */
} pc_emit;

typedef struct pc_codegen_opts {
  pc_emit emit;
  const char *output;       /* path of the main output */
  const char *name;         /* C identifier prefix of the entry points (default: from output) */
  const char *triple;       /* NULL: host */
  const char *cpu;          /* NULL: host cpu ("native"), e.g. "znver4", "generic" */
  const char *features;     /* NULL: host features */
  int weights_external;     /* weights in NAME.weights, mmapped, instead of .rodata */
  int deterministic;
  const char *runtime_dir;  /* where libprimc_rt.a and runtime/primc_rt.h are (default: beside primc) */
} pc_codegen_opts;

/* Lowers every fused group of g (after pc_pipeline_run) to kernel IR and
 * renders it to the requested output. */
pc_status pc_codegen(pc_graph *g, const pc_codegen_opts *opts);

#endif
