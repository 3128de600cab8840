/* runtime/conv/bf16.c: the bf16 row: Y_g = W_g X_col on the bf16 GEMM, W_g packed to bf16 tiles at compile time, X_col's rows made from x and rounded per call, f32 sums and epilogue. */
#include "runtime/conv/conv.h"
#include "runtime/gemm/bgemm.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/*
 * Y_g[og][P] = W_g[og][kk] X_col[kk][P] per (image, group), as the f32 GEMM rows do: the weights are the bf16
 * GEMM's A, rounded and tiled once (primc_bgemm_pack_a), and X_col is its B, whose rows the implicit im2col
 * makes (a 1x1 stride-1 conv reads x as it is) and the GEMM packs per call into bf16 panels, two rows at a
 * time, with no transpose. The sums go to the call's acc in y's layout; the epilogue (bias, residual, clamp,
 * SiLU) runs on each of the GEMM's blocks as its sums are whole, on the thread that made it. --autocast bf16's
 * convs: operands rounded once, sums in f32.
 */

size_t primc_cv_bf16_stride(int64_t og, int64_t kk) { return (primc_bgemm_packed_a_size(og, kk) + 63) / 64 * 64; }

int primc_cv_bf16_check(const primc_conv2d *p, const void *w, size_t bytes) {
  int64_t og = p->o / p->groups, kk = primc_cv_bf16_k(p);
  size_t s = primc_cv_bf16_stride(og, kk);
  if (!s || (size_t)p->groups > bytes / s) return PRIMC_ERR_WEIGHTS;
  for (int64_t g = 0; g < p->groups; g++)
    if (primc_bgemm_packed_a_check((const char *)w + g * s, s, og, kk) != PRIMC_OK) return PRIMC_ERR_WEIGHTS;
  return PRIMC_OK;
}

int primc_cv_bf16_pack(const primc_conv2d *p, const float *w, void *dst) {
  int64_t cg = p->c / p->groups, og = p->o / p->groups, taps = p->kh * p->kw, kk = primc_cv_bf16_k(p);
  int64_t cp = kk / taps; /* cg, or a few channels padded to an even count */
  int tm = primc_cv_bf16_taps_major(p);
  float *t = tm ? calloc((size_t)(og * kk), sizeof *t) : NULL;
  if (tm && !t) return PRIMC_ERR_RUNTIME;
  int st = PRIMC_OK;
  for (int64_t g = 0; g < p->groups && st == PRIMC_OK; g++) {
    const float *wg = w + g * og * cg * taps;
    for (int64_t o = 0; tm && o < og; o++) /* [o][c][tap] -> [o][tap][c], the padding channel 0 */
      for (int64_t c = 0; c < cg; c++)
        for (int64_t k = 0; k < taps; k++) t[o * kk + k * cp + c] = wg[(o * cg + c) * taps + k];
    st = primc_bgemm_pack_a(og, kk, tm ? t : wg, kk, (char *)dst + g * primc_cv_bf16_stride(og, kk));
  }
  free(t);
  return st;
}

/* primc_brow_fn over tap-major weights: row k = tap * cp + c is the column matrix's row c * taps + tap (cp: the
 * channels a group, a few padded to an even count, whose rows are zero) */
static void col_row_taps(void *ctx, int64_t k, int64_t n0, int64_t nc, float *dst) {
  const col_src *s = ctx;
  int64_t cg = s->p->c / s->p->groups, taps = s->p->kh * s->p->kw, cp = primc_cv_bf16_k(s->p) / taps;
  if (k % cp >= cg) memset(dst, 0, sizeof *dst * (size_t)nc);
  else primc_cv_col_row(ctx, k % cp * taps + k / cp, n0, nc, dst);
}

int primc_cv_bf16_fits(const primc_conv2d *p, const primc_conv2d *next) {
  return !cv_is_depthwise(p) && p->w_bf16 && !p->w_packed_mr && !p->w_packed_panels && !p->w_winograd && !p->w_lanes;
}

int primc_cv_bf16_run(const cv_call *k) {
  const primc_conv2d *p = k->p;
  const primc_conv_epi *e = k->e;
  int64_t cg = p->c / p->groups, og = p->o / p->groups, kk = primc_cv_bf16_k(p), P = k->oh * k->ow;
  size_t stride = primc_cv_bf16_stride(og, kk);
  /* maps of channel pairs (p->store: one group; the executor runs them here only in place, primc_conv_pairs_in_place)
   * always take the epilogue, which reads and writes them; a 1x1 of them runs on the GEMM */
  int epi = primc_cv_epi_needed(e) || k->acc != k->y || p->store;
  int rs = e->res && (p->store & PRIMC_CONV_RES_PAIRS), ys = p->store & PRIMC_CONV_Y_PAIRS;
  int64_t xw = primc_conv_pairs_bytes(1, p->c, p->h, p->w) / 4, yw = primc_conv_pairs_bytes(1, p->o, k->oh, k->ow) / 4;
  for (int64_t n = 0; n < p->n; n++)
    for (int64_t g = 0; g < p->groups; g++) {
      const float *xg = k->x + (n * p->c + g * cg) * p->h * p->w;
      const uint32_t *xp = p->store & PRIMC_CONV_X_PAIRS ? (const uint32_t *)k->x + n * xw : NULL;
      int64_t yoff = (n * p->o + g * og) * P;
      col_src s = {p, xg, k->oh, k->ow, cv_use_avx512() && (p->stride_w == 1 || p->stride_w == 2)};
      int pw = cv_is_pointwise(p), tm = primc_cv_bf16_taps_major(p);
      const char *wg = (const char *)k->w + g * stride;
      epi_ctx ec = cv_epi_of(e, g * og, ys ? NULL : k->y + yoff, e->res && !rs ? e->res + yoff : NULL);
      ec.ldy = P; /* the bf16 GEMM hands the epilogue a buffer of each block's sums */
      ec.y_pairs = ys ? (uint32_t *)k->y + n * yw : NULL;
      ec.res_pairs = rs ? (const uint32_t *)e->res + n * yw : NULL;
      ec.pairs_c = p->o;
      if (primc_cv_bf16_in_place(p) && primc_cv_bf16_direct_runs() && (tm || !p->store)) {
        /* the epilogue as the sums are copied out */
        int st = primc_cv_bf16_direct(p, xg, wg, k->oh, k->ow, k->acc + yoff, epi ? &ec : NULL, xp);
        if (st != PRIMC_OK) return st;
        continue;
      }
      /* the epilogue on each block of sums as the GEMM finishes it */
      primc_brow_fn row = pw ? NULL : tm ? col_row_taps : primc_cv_col_row;
      int st = xp ? primc_bg_packed_a_run_panels(wg, og, P, kk, (const uint16_t *)xp, k->acc + yoff, P, primc_cv_epi_rows, &ec)
                  : primc_bg_packed_a_run_epi(wg, og, P, kk, pw ? xg : NULL, P, row, &s, k->acc + yoff, P,
                                              epi ? primc_cv_epi_rows : NULL, &ec);
      if (st != PRIMC_OK) return st;
    }
  return PRIMC_OK;
}
