/* api/dyn_source.c: the model compiled again at other values of its range dims (api/dyn_source.h). */
#include "api/dyn_source.h"

#include <string.h>

int pc_dyn_source_init(pc_dyn_source *src, pc_dyn_spec *spec, const pc_import_opts *io) {
  memset(spec, 0, sizeof *spec);
  spec->fit_sym = -1;
  src->n_syms = 0;
  if (io->n_dims > PC_DYN_MAX_BINDINGS) return -1;
  src->io = *io;
  memcpy(src->dims, io->dims, sizeof *src->dims * (size_t)io->n_dims);
  src->io.dims = src->dims;
  for (int i = 0; i < io->n_dims; i++) {
    if (src->dims[i].lo == src->dims[i].hi) continue;
    if (spec->n_syms == PC_DYN_MAX_SYMS) return -1;
    int s = spec->n_syms++;
    spec->name[s] = src->dims[i].name, spec->lo[s] = src->dims[i].lo, spec->hi[s] = src->dims[i].hi;
    spec->mult[s] = src->dims[i].multiple; /* read through kir_dyn_mult */
    spec->bucket_step[s] = src->dims[i].step > 0 ? src->dims[i].step : 0;
    src->sym_binding[s] = i;
    src->n_syms = spec->n_syms;
    src->dims[i].lo = src->dims[i].hi; /* the program that runs is built at the bounds */
  }
  src->io.run_time_dims = spec->n_syms > 0;
  spec->build = pc_dyn_source_build;
  spec->ctx = src;
  return spec->n_syms;
}

pc_graph *pc_dyn_source_build(void *ctx, const int64_t *values) {
  pc_dyn_source *src = ctx;
  pc_dyn_source at = *src;
  at.io.dims = at.dims;
  for (int s = 0; s < src->n_syms && values; s++) {
    int b = src->sym_binding[s];
    at.dims[b].lo = at.dims[b].hi = values[s];
  }
  pc_graph *g = src->path ? pc_model_load(src->path, &at.io) : pc_onnx_load_buffer(src->bytes, src->n_bytes, src->dir, &at.io);
  if (!g || g->status) return g;
  g->mem_limit = src->mem_limit;
  g->run_time_dims = 1;
  g->matmul_precision = src->matmul_precision;
  g->autocast = src->autocast;
  g->foreign_cpu = src->foreign_cpu;
  g->gpu = src->gpu;
  pc_apply_transforms(g, &src->tr);
  if (g->status == PC_OK) pc_pipeline_run(g, &src->po);
  return g;
}
