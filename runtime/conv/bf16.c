/* runtime/conv/bf16.c: the bf16 row: the transposed GEMM (output channels as columns) on the bf16 GEMM, W^T packed to bf16 at compile time, f32 sums and epilogue. */
#include "runtime/conv/conv.h"

#include <stdint.h>

/*
 * C^T[P][og] = X_col^T[P][kk] W^T[kk][og] per (image, group), as the f32 transposed GEMM row does, with
 * X_col rounded to bf16 by the GEMM as it reads it and W^T packed once (primc_bgemm_pack_b). C^T goes to
 * col after X_col; the epilogue (bias, residual, clamp, SiLU) turns it back into y's channel planes, split
 * over the threads by pixel blocks. --autocast bf16's convs: operands rounded to bf16 once, sums in f32.
 */

size_t primc_cv_bf16_stride(int64_t og, int64_t kk) { return (primc_bgemm_packed_b_size(og, kk, 1) + 63) / 64 * 64; }

int primc_cv_bf16_check(const primc_conv2d *p, const void *w, size_t bytes) {
  int64_t og = p->o / p->groups, kk = (p->c / p->groups) * p->kh * p->kw;
  size_t s = primc_cv_bf16_stride(og, kk);
  if (!s || (size_t)p->groups > bytes / s) return PRIMC_ERR_WEIGHTS;
  for (int64_t g = 0; g < p->groups; g++)
    if (primc_bgemm_packed_check((const char *)w + g * s, s, og, kk, 1) != PRIMC_OK) return PRIMC_ERR_WEIGHTS;
  return PRIMC_OK;
}

int primc_cv_bf16_fits(const primc_conv2d *p, const primc_conv2d *next) {
  return !cv_is_depthwise(p) && p->w_bf16 && !p->w_packed_mr && !p->w_packed_panels && !p->w_winograd && !p->w_lanes;
}

int64_t primc_cv_bf16_scratch(const primc_conv2d *p) {
  int64_t oh, ow;
  primc_conv2d_out_hw(p, &oh, &ow);
  return primc_cv_lanes_floats(p, oh, ow);
}

typedef struct bf16_epi {
  cv_lanes_epi le;
  const float *ct;
  int64_t og;
} bf16_epi;

#define EPI_PIXELS 64 /* pixels of C^T per epilogue item */

static void epi_blocks(void *ctx, int64_t b, int64_t e) {
  const bf16_epi *j = ctx;
  for (int64_t i = b; i < e; i++) {
    int64_t m0 = i * EPI_PIXELS, mb = j->le.P - m0 < EPI_PIXELS ? j->le.P - m0 : EPI_PIXELS;
    primc_cv_lanes_rows((void *)&j->le, (float *)j->ct + m0 * j->og, j->og, m0, 0, mb, j->og);
  }
}

int primc_cv_bf16_run(const cv_call *k) {
  const primc_conv2d *p = k->p;
  const primc_conv_epi *e = k->e;
  int64_t cg = p->c / p->groups, og = p->o / p->groups, kk = cg * p->kh * p->kw, P = k->oh * k->ow;
  size_t stride = primc_cv_bf16_stride(og, kk);
  for (int64_t n = 0; n < p->n; n++)
    for (int64_t g = 0; g < p->groups; g++) {
      const float *xg = k->x + (n * p->c + g * cg) * p->h * p->w, *a = xg;
      int64_t yoff = (n * p->o + g * og) * P;
      if (!cv_is_pointwise(p)) {
        primc_cv_im2col_par(p, xg, cg, k->oh, k->ow, k->col);
        a = k->col;
      }
      float *ct = k->col + kk * P;
      int st = primc_bgemm_prepacked(1, P, og, kk, a, P, (const char *)k->w + g * stride, ct, og);
      if (st != PRIMC_OK) return st;
      epi_ctx c = {e->bias ? e->bias + g * og * e->bias_stride : NULL, e->bias_stride, e->res ? e->res + yoff : NULL,
                   k->y + yoff, e->lo, e->hi, e->silu};
      bf16_epi j = {{c, P}, ct, og};
      int64_t items = (P + EPI_PIXELS - 1) / EPI_PIXELS;
      if (P * og >= (1 << 15)) primc_parallel_for(items, epi_blocks, &j);
      else epi_blocks(&j, 0, items);
    }
  return PRIMC_OK;
}
