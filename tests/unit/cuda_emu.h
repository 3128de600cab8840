/* tests/unit/cuda_emu.h: runs rendered CUDA C on the CPU, for tests on machines without a GPU. The source is
 * compiled as C++ by g++ with a shim (the block's threads as fibers on one host thread that switch at __syncthreads,
 * __shared__ as a function's statics, the TF32, bf16 and f16 mma.sync of a warp by its fragment layout in the PTX
 * ISA); blocks run one after another. What it checks is the kernels' indexing,
 * tiling, staging and epilogues against the interpreter; timing and the memory model across blocks are the GPU's. */
#ifndef PRIMC_TESTS_CUDA_EMU_H
#define PRIMC_TESTS_CUDA_EMU_H

#include <stddef.h>
#include <stdint.h>

typedef struct pc_emu pc_emu;

/* compiles src (a rendered CUDA C program) for the emulator in a temporary directory; NULL with the reason in
 * err (*no_compiler set when there is no g++ to do it) */
pc_emu *pc_emu_compile(const char *src, char *err, size_t errlen, int *no_compiler);
/* runs kernel `name` over grid blocks of block threads with its pointer arguments; 0 with the reason in err */
int pc_emu_launch(pc_emu *e, const char *name, int64_t grid, int block, void **args, int nargs, char *err, size_t errlen);
/* the program's primc_status (3 once a kernel found bad data) */
int pc_emu_status(pc_emu *e);
void pc_emu_close(pc_emu *e);

struct pc_graph;
struct kir_program;
struct pc_cuda_launch;
struct kir_cuda_dyn;
/* runs program p's launches L in order over host buffers laid out as on the GPU (ins, outs, the weights blob wt, the
 * workspace ws); with dyn, at the run-time dims' values syms: each grid made from dyn's factors and the values
 * passed where the launch says. 1 when every launch ran and no kernel found bad data, else 0 with the reason */
int pc_emu_run(pc_emu *e, const struct kir_program *p, const struct pc_cuda_launch *L, const struct kir_cuda_dyn *dyn,
               const int64_t *syms, void *const *ins, void *const *outs, unsigned char *wt, unsigned char *ws, char *err,
               size_t errlen);
/* g's kernel IR into *p and its CUDA C (malloc'ed; NULL when either failed, the reason on g), with the launches;
 * PRIMC_CUDA_DUMP=1 prints the source to stderr */
char *pc_emu_render(struct pc_graph *g, struct kir_program *p, struct pc_cuda_launch **launches);
/* the same for a GPU of compute capability sm (0: sm_90) */
char *pc_emu_render_sm(struct pc_graph *g, int sm, struct kir_program *p, struct pc_cuda_launch **launches);
/* g (its groups set: after pc_pipeline_run, or by hand) built to kernel IR, rendered as CUDA and run on the
 * emulator over host buffers laid out as on the GPU: ins[i] holds input i, outs[i] receives output i (the
 * caller's, in its type). 1 when it ran (and no kernel found bad data), 0 with the reason in err, -1 when there
 * is no g++; *n_kernels (may be NULL) gets the program's kernel count */
int pc_emu_graph(struct pc_graph *g, void *const *ins, void *const *outs, int *n_kernels, char *err, size_t errlen);
/* the same for a GPU of compute capability sm (75: sm_75; 0: sm_90), whose kernels the renderer picks for it */
int pc_emu_graph_sm(struct pc_graph *g, int sm, void *const *ins, void *const *outs, int *n_kernels, char *err, size_t errlen);

#endif
