/* tools/conformance_compiled.h: `primc conformance --compiled`: runs a node test's model as compiled code instead of the interpreter. */
#ifndef PRIMC_CONFORMANCE_COMPILED_H
#define PRIMC_CONFORMANCE_COMPILED_H

#include "frontend/frontend.h"

typedef struct pc_conf_compiled {
  int on;        /* --compiled */
  int opt_level; /* -O0..-O3: graph passes and LLVM (default 2) */
  int unfused;   /* --unfused: one kernel per prim */
  int cuda;      /* --target cuda: NVRTC-compiled kernels run on the GPU (device 0) */
  const char *gpu_arch; /* --gpu-arch (default sm_90) */
  const char *triple;   /* --triple T: an executable for T (a cross runtime), run by runner on .npy files */
  const char *runner;   /* --runner CMD: what runs it (qemu-aarch64; NULL: itself) */
} pc_conf_compiled;

/* Takes the compiled-mode flag at argv[*i] (--compiled, -O0..-O3, --unfused, --target cpu|cuda,
 * --gpu-arch A, --triple T, --runner CMD) into m, advancing *i past a flag's value; 0 when it is none of them. */
int pc_conf_compiled_flag(int argc, char **argv, int *i, pc_conf_compiled *m);

/* The compiled counterpart of pc_interp for the data set folder ds (its model is ds/../model.onnx):
 * imports the model again with the options o of g's import (specialized inputs) and g's symbolic
 * input dims fixed to the shapes of ins, runs the pass pipeline, emits a shared library into a
 * temporary folder (with m->cuda, a CUDA one whose kernels run on the GPU, the data copied
 * there and back), loads it and runs it on ins; with m->triple it emits an executable for that target
 * instead and runs it (through m->runner) on the inputs written as .npy files, reading its .npy outputs. outs (one per graph output) get malloc'ed data.
 * On failure err says which step failed and why. */
pc_status pc_conf_compiled_run(const pc_conf_compiled *m, const pc_graph *g, const char *ds, const pc_import_opts *o,
                               const pc_tensor *ins, pc_tensor *outs, char *err, size_t errlen);

#endif
