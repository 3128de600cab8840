/* tools/cli.h: option parsing, model loading and .npy input/output shared by the primc subcommands. */
#ifndef PRIMC_CLI_H
#define PRIMC_CLI_H

#include "frontend/frontend.h"
#include "passes/passes.h"

#include <stdio.h>

#define PC_CLI_MAX 64

/* the options that say how a model is read, shared by the subcommands: --dim and --const */
typedef struct pc_cli_model {
  pc_dim_binding dims[PC_CLI_MAX];
  char dim_names[PC_CLI_MAX][64];
  int n_dims;
  pc_const_input consts[PC_CLI_MAX]; /* values malloc'ed: pc_cli_model_free */
  char const_names[PC_CLI_MAX][64];
  int n_consts;
  int matmul_precision; /* --matmul-precision: a pc_matmul_precision, set on the graph once loaded */
  int autocast;         /* --autocast: a pc_autocast, likewise */
  int grad;             /* --grad: the model's vector-Jacobian product (pc_grad) is compiled */
  int jvp;              /* --jvp: its Jacobian-vector product (pc_jvp), after pc_grad when both */
  char vmap_names[512]; /* --vmap NAME[,NAME]=B: those inputs batched (pc_vmap), before --grad and --jvp */
  int64_t vmap_batch;   /* B; 0: no --vmap */
  int train;            /* --train: a training step (pc_train) with train_opts */
  int train_opts_set;   /* train_opts holds its defaults or more (any of the options below was given) */
  pc_train_opts train_opts; /* --loss, --label, --optimizer, --lr, --weight-decay, --momentum, --eps */
} pc_cli_model;

/* option a with its value v (NULL when a was the last argument): 1 when a is --dim, --const,
 * --matmul-precision, --autocast or a training option and v is good, 0 when a is none of them, -1 when v
 * is bad (the error printed) */
int pc_cli_model_option(pc_cli_model *m, const char *a, const char *v);
/* whether a is one of those options (each takes a value) */
int pc_cli_model_takes(const char *a);
/* 1 when a is a model option without a value (--grad, --jvp, --train), now set in m; else 0 */
int pc_cli_model_flag(pc_cli_model *m, const char *a);
/* the options that apply to the loaded graph (matmul precision, autocast) set on g, and --grad's or
 * --train's transform applied; g's status (the error printed) */
pc_status pc_cli_model_apply(const pc_cli_model *m, pc_graph *g);
/* the transforms the options ask for (pc_apply_transforms), pointing into m */
pc_transforms pc_cli_transforms(const pc_cli_model *m);
void pc_cli_model_free(pc_cli_model *m);
pc_import_opts pc_cli_import_opts(const pc_cli_model *m, const char *weights, int64_t mem_limit);

typedef struct pc_cli {
  char *pos[PC_CLI_MAX]; /* positional arguments */
  int n_pos;
  const char *out_dir;      /* -o */
  const char *weights;      /* --weights */
  const char *save_weights; /* --save-weights */
  int random_inputs;        /* --random-inputs */
  uint64_t seed;            /* --seed */
  pc_cli_model model;       /* --dim, --const */
  int64_t mem_limit;        /* --mem-limit (default: pc_cli_default_mem_limit), 0: none */
  int exit_code;            /* when pc_cli_parse returns non-zero: 0 for --help, 2 for bad usage */
} pc_cli;

/* Parses the common options; prints help and returns 1 for --help, prints an
 * error and returns 1 for anything unknown (cli->exit_code says which). */
int pc_cli_parse(pc_cli *cli, int argc, char **argv, const char *help);
int pc_cli_usage_error(const char *help, const char *msg);
/* "--mem-limit" values: bytes with an optional K, M or G suffix (powers of 1024), 0 for no limit;
 * 0 when s is not one */
int pc_cli_parse_size(const char *s, int64_t *out);
/* the memory run and compile may plan for unless told: MemAvailable of /proc/meminfo (0: unknown) */
int64_t pc_cli_default_mem_limit(void);
void pc_cli_free(pc_cli *cli);
/* compile progress on stderr when it is a terminal and the compile has taken a second
 * ($PRIMC_PROGRESS_AFTER seconds): the phase, kernel N of M, the time, redrawn five times a second by a
 * thread of its own (LLVM's passes report nothing for seconds); quiet: never */
typedef struct pc_cli_progress {
  int on, printed, stop;
  double t0, after;
  const char *phase;
  int64_t done, total;
  void *impl; /* the thread and its lock */
} pc_cli_progress;
void pc_cli_progress_init(pc_cli_progress *p, int quiet, double t0); /* t0: when the compile began (wall seconds, as pc_cli_now) */
double pc_cli_now(void);
void pc_cli_progress_fn(void *ctx, const char *phase, int64_t done, int64_t total); /* a pc_progress_fn */
void pc_cli_progress_end(pc_cli_progress *p, int ok);

/* report's lines, indented, to f */
void pc_cli_print_report(FILE *f, const char *report);
/* after an import of path failed: when more nodes than the one named would fail too, lists them on stderr
 * (primc check's report) so a user does not fix one op to meet the next */
void pc_cli_more_problems(const char *path, const pc_import_opts *io);
/* loads pos[0]; prints the error and returns NULL on failure */
pc_graph *pc_cli_load_model(const pc_cli *cli);
/* fills one tensor per graph input from n .npy paths, or random data */
int pc_cli_inputs(const pc_cli *cli, const pc_graph *g, int n, const char *const *paths, pc_tensor *ins);
int pc_cli_write_outputs(const char *dir, const pc_graph *g, const pc_tensor *outs);

#endif
