/* codegen/cuda_internal.h: what the CUDA renderer's files share (cuda.c: dtypes, render context, expressions,
 * loop kernels, program; cuda_calls.c: the runtime-call kernels; cuda_gemm.c: f32 dots and convs as tiled GEMMs;
 * cuda_prelude.c: the device prelude). */
#ifndef PRIMC_CUDA_INTERNAL_H
#define PRIMC_CUDA_INTERNAL_H

#include "codegen/codegen.h"
#include "codegen/kir.h"

#include <stdio.h>

#define CU_BLOCK 256 /* threads per block of every kernel */

/* ---------------------------------------------------------------- dtypes (cuda.c) */

typedef struct cu_dtype {
  const char *mem;    /* storage element type */
  const char *reg;    /* register type: f16/bf16 computed in float */
  const char *acc;    /* reduction accumulator (small ints widened: sums wrap the same way) */
  const char *lo, *hi;/* the dtype's range, in the accumulator type */
} cu_dtype;

extern const cu_dtype cu_types[PC_DTYPE_COUNT];

/* floats stored narrower than computed: the prelude's load (bits -> float), store (float -> bits) and
 * round (float -> nearest storable float) functions */
typedef struct cu_narrow {
  const char *load, *store, *round;
} cu_narrow;

extern const cu_narrow cu_narrows[PC_DTYPE_COUNT];

int cu_is_half(pc_dtype t);
/* the prelude's wrap of a sub-byte int type (applied to every result and store), else NULL */
const char *cu_wrap_fn(pc_dtype t);
/* an unsigned type of an element's byte size, for copies that move bits */
const char *cu_bits_type(size_t size);

/* ---------------------------------------------------------------- render context (cuda.c) */

typedef struct cctx {
  const kir_program *p;
  pc_graph *g;
  FILE *f;
  int tmp;                /* next temporary */
  int idx;                /* kernel being rendered */
  char name[96];          /* its symbol */
  pc_cuda_launch *launch; /* its launch */
  unsigned char *skip;    /* per kernel: run by an earlier kernel (a call's epilogue, a row chain): rendered empty,
                           * not launched */
  const char *subst;      /* while set, loads of buffer subst_buf read this variable instead (a call's epilogue) */
  int subst_buf;
} cctx;

/* one line of the kernel at indent ind */
void cu_line(cctx *C, int ind, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* the launch's grid from factors (pc_cuda_grid), recorded in C->launch so that a run with other dims computes it
 * again; cu_grid1: one factor, work items at per_block each */
int64_t cu_grid(cctx *C, int n, const int64_t *work, const int64_t *per);
int64_t cu_grid1(cctx *C, int64_t work, int64_t per_block);
/* the run-time dims' parameters (const long long pc_s0, ...) that lead every kernel's signature; their count */
int cu_put_sym_params(cctx *C);
/* PC_ERR_UNSUPPORTED for the kernel being rendered, at its first node where it has one */
pc_status cu_fail_kernel(cctx *C, const char *fmt, const char *what);

/* ---------------------------------------------------------------- loop kernels inside others (cuda.c) */

/* loop kernel k's values and stores at its loop indices i0.. (defined by the caller), at indent ind */
void cu_emit_stores(cctx *C, const kir_kernel *k, int ind);
/* 0 when k computes what the renderer has no CUDA for (c64 arithmetic) */
int cu_loop_supported(const kir_kernel *k);
/* typed parameters ("const float *b7") for the buffers k reads and writes but skip (-1: none), printed after the
 * n_before a0.. parameters of a call; the launch's arguments become before[] then those buffers. The count, or
 * -1 (out of memory, failed on C->g) */
int cu_put_loop_params(cctx *C, const kir_kernel *k, int skip, const int *before, int n_before);

/* ---------------------------------------------------------------- runtime-call kernels (cuda_calls.c) */

/* a call kernel by its calls.def row, or the error saying why it has no CUDA kernel */
pc_status cu_render_call(cctx *C, const kir_kernel *k);
/* the call's buffers as byte pointers a0.. (outputs first) in the kernel's signature, and its launch */
void cu_call_signature(cctx *C, const kir_kernel *k, int block, int64_t grid);
/* the same, then the typed parameters of loop kernel `loop`'s buffers but skip (an epilogue run in the call's
 * kernel), which the launch passes after the call's */
void cu_call_signature_with(cctx *C, const kir_kernel *k, int block, int64_t grid, const kir_kernel *loop, int skip);

/* ---------------------------------------------------------------- contraction kernels (cuda_gemm.c) */

/* f32 dot_general / conv as a tiled GEMM (tensor cores: TF32 under --matmul-precision high, bf16 under medium and
 * --autocast bf16, f16 / bf16 / TF32 where the operands are exact in that type); 0 when the call is not one (other
 * dtypes, depthwise and transposed convs keep cuda_calls.c's direct kernels). epi: apply the conv's fused epilogue
 * (stored to a4) */
int cu_gemm_dot(cctx *C, const kir_kernel *k);
int cu_gemm_conv(cctx *C, const kir_kernel *k, int epi);
/* how a tile row multiplies: f32 FMAs on the SIMT cores, or mma.sync on TF32, bf16 or f16 operands */
enum { CU_GEMM_SIMT, CU_GEMM_TF32, CU_GEMM_BF16, CU_GEMM_F16, CU_GEMM_KINDS };
/* the i-th tile row of a kind (CU_GEMM_*): its name, or NULL past the last */
const char *cu_gemm_tile_name(int kind, int i);
/* "" when row i's sizes fit the kernel's thread maps and shared memory, else its name; NULL past the last row */
const char *cu_gemm_tiles_invalid(int kind, int i);
/* a conv's fused epilogue words applied to float s_ of channel oc, stored to ((float *)a4)[idx] */
void cu_put_conv_epi(cctx *C, const int64_t *w, int ind);

/* ---------------------------------------------------------------- the device prelude (cuda_prelude.c) */

/* the prelude's lines, each followed by a newline */
void cu_put_prelude(FILE *f);

#endif
