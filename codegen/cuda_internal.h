/* codegen/cuda_internal.h: what the CUDA renderer's files share (cuda.c: dtypes, render context, expressions,
 * loop kernels, program; cuda_calls.c: the runtime-call kernels; cuda_prelude.c: the device prelude). */
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
} cctx;

/* one line of the kernel at indent ind */
void cu_line(cctx *C, int ind, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* blocks for work items at per_block each, at least 1, at most the grid-stride cap */
int64_t cu_clamp_grid(int64_t work, int64_t per_block);
/* PC_ERR_UNSUPPORTED for the kernel being rendered, at its first node where it has one */
pc_status cu_fail_kernel(cctx *C, const char *fmt, const char *what);

/* ---------------------------------------------------------------- runtime-call kernels (cuda_calls.c) */

/* a call kernel by its calls.def row, or the error saying why it has no CUDA kernel */
pc_status cu_render_call(cctx *C, const kir_kernel *k);

/* ---------------------------------------------------------------- the device prelude (cuda_prelude.c) */

/* the prelude's lines, each followed by a newline */
void cu_put_prelude(FILE *f);

#endif
