/* api/dyn_source.h: a model with dims given as ranges (--dim NAME=LO..HI), compiled again at other values of
 * them: the build behind codegen's run-time dims (pc_dyn_spec), shared by the C API and the CLI. */
#ifndef PRIMC_DYN_SOURCE_H
#define PRIMC_DYN_SOURCE_H

#include "codegen/codegen.h"
#include "frontend/frontend.h"
#include "passes/passes.h"

#define PC_DYN_MAX_BINDINGS 64

typedef struct pc_dyn_source {
  const char *path;                 /* the model file, or */
  const void *bytes;                /* its ONNX bytes */
  size_t n_bytes;
  const char *dir;                  /* where external data of bytes lives */
  pc_import_opts io;                /* its dims point at dims below */
  pc_dim_binding dims[PC_DYN_MAX_BINDINGS];
  int n_syms, sym_binding[PC_DYN_MAX_SYMS]; /* the binding each symbol of the spec is */
  pc_pipeline_opts po;
  int matmul_precision, autocast;   /* set on each graph before the passes */
  int foreign_cpu;                  /* likewise: a --triple target */
  int gpu;                          /* likewise: --target cuda */
  pc_transforms tr;                 /* applied to each graph first (its strings outlive the source) */
  int64_t mem_limit;
} pc_dyn_source;

/* Takes io's bindings; those given as ranges become spec's symbols (at most PC_DYN_MAX_SYMS: more is -1, as is
 * more than PC_DYN_MAX_BINDINGS bindings), fixed at their hi in src->io for the import of the program that runs.
 * Returns the number of symbols; spec->build builds the model with them at other values. */
int pc_dyn_source_init(pc_dyn_source *src, pc_dyn_spec *spec, const pc_import_opts *io);
/* the model imported, its options set and the pipeline run with symbol s at values[s] (spec->build) */
pc_graph *pc_dyn_source_build(void *ctx, const int64_t *values);

#endif
