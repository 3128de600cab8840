/* runtime/conv/grouped_avx2.c: the grouped conv row for groups of up to 8 input and 8 output channels (RegNet's, ResNeXt's), in the lanes of a ymm (AVX2). */
#include "runtime/conv/conv.h"

/*
 * A group's input channels as dw_lanes8's band tiles ([row][col][8], zero-bordered, any stride and dilation),
 * its output channels in the lanes of the sums: each output pixel takes one FMA per tap and input channel, the
 * tile's value broadcast against that tap and channel's 8 output weights. The GEMM rows ran such a group as a
 * GEMM of 8 rows per group (im2col or phase images), whose register tiles it fills poorly.
 */
#define G8_MAX_K (DWL_MAX_TAPS * 8) /* taps x input channels of a group */

int primc_cv_g8_fits(const primc_conv2d *p, const primc_conv2d *next) {
  int64_t oh, ow;
  return p->groups > 1 && !cv_is_depthwise(p) && p->c / p->groups <= 8 && p->o / p->groups <= 8 &&
         cv_w_strips_or_plain(p) && primc_conv2d_out_hw(p, &oh, &ow) && p->kh * p->kw <= DWL_MAX_TAPS &&
         primc_cv_dwl_geometry(p, oh, ow, 8).band > 0;
}

#if PRIMC_X86
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,fma,f16c"))) /* f16c: cv_t8_epi inlines the epilogue, f16 rounding included */
#define INLINE static inline __attribute__((always_inline))

/* NB output pixels from (oy, ox) of the band into out[pixel][8]; d->wt is [tap][c][8], cg input channels */
INLINE AVX2 void g8_pixels(const t8_ctx *d, int64_t cg, const float *tile, int64_t oy, int64_t ox, float *out,
                           const int NB) {
  const primc_conv2d *p = d->p;
  __m256 a[8];
#pragma GCC unroll 8
  for (int b = 0; b < NB; b++) a[b] = _mm256_setzero_ps();
  int64_t sw = p->stride_w * 8;
  const float *w = d->wt;
  for (int64_t i = 0; i < p->kh; i++) {
    const float *row = tile + ((oy * p->stride_h + i * p->dil_h) * d->pw + ox * p->stride_w) * 8;
    for (int64_t jx = 0; jx < p->kw; jx++) {
      const float *src = row + jx * p->dil_w * 8;
      for (int64_t c = 0; c < cg; c++, w += 8) {
        __m256 wv = _mm256_load_ps(w);
#pragma GCC unroll 8
        for (int b = 0; b < NB; b++) a[b] = _mm256_fmadd_ps(wv, _mm256_broadcast_ss(src + b * sw + c), a[b]);
      }
    }
  }
  cv_t8_epi(d, a, NB);
#pragma GCC unroll 8
  for (int b = 0; b < NB; b++) _mm256_store_ps(out + b * 8, a[b]);
}

#define G8_PIX(NB)                                                                                       \
  static AVX2 void g8_pix##NB(const t8_ctx *d, int64_t cg, const float *t, int64_t oy, int64_t ox, float *o) { \
    g8_pixels(d, cg, t, oy, ox, o, NB);                                                                  \
  }
G8_PIX(1) G8_PIX(2) G8_PIX(3) G8_PIX(4) G8_PIX(5) G8_PIX(6) G8_PIX(7) G8_PIX(8)
static void (*const g8_pix[9])(const t8_ctx *, int64_t, const float *, int64_t, int64_t, float *) = {
    NULL, g8_pix1, g8_pix2, g8_pix3, g8_pix4, g8_pix5, g8_pix6, g8_pix7, g8_pix8};

/* the band's rows in blocks of 8 pixels, the rest of a row as one block: independent sums */
static void g8_band(const t8_ctx *d, const float *tile, int64_t rows, float *out) {
  int64_t cg = d->p->c / d->p->groups;
  for (int64_t oy = 0; oy < rows; oy++)
    for (int64_t ox = 0; ox < d->ow; ox += 8) {
      int64_t nb = d->ow - ox < 8 ? d->ow - ox : 8;
      g8_pix[nb](d, cg, tile, oy, ox, out + (oy * d->ow + ox) * 8);
    }
}

/* group g of image n: the group's weights as [tap][c][8] (output channels in the lanes, zero past og), read
 * plain or packed in strips of at most w_packed_mr rows at the group's plain offset (primc_sgemm_pack_a's) */
AVX2 static void g8_item(const dw_job *j, int64_t n, int64_t g) {
  const primc_conv2d *p = j->p;
  int64_t cg = p->c / p->groups, og = p->o / p->groups, taps = p->kh * p->kw, kk = cg * taps;
  const float *blk = j->w + g * og * kk;
  float wt[G8_MAX_K * 8] __attribute__((aligned(32)));
  int64_t strips = p->w_packed_mr ? (og + p->w_packed_mr - 1) / p->w_packed_mr : og;
  for (int64_t l = 0; l < 8; l++) {
    /* output channel l's weight k at src[k * ks]: its strip's [k][h] panel, or its plain row */
    const float *src = blk;
    int64_t ks = 1;
    if (l < og && p->w_packed_mr) {
      int64_t s = l * strips / og;
      while (og * (s + 1) / strips <= l) s++;
      while (og * s / strips > l) s--;
      int64_t m0 = og * s / strips;
      src = blk + m0 * kk + (l - m0), ks = og * (s + 1) / strips - m0;
    } else if (l < og) {
      src = blk + l * kk;
    }
    for (int64_t c = 0; c < cg; c++)
      for (int64_t t = 0; t < taps; t++) wt[(t * cg + c) * 8 + l] = l < og ? src[(c * taps + t) * ks] : 0.0f;
  }
  t8_ctx d = {.wt = wt};
  primc_cv_t8_item(j, &d, n, g * cg, (int)cg, g * og, (int)og, g8_band, NULL, 0, j->oh);
}

static void g8_range(void *ctx, int64_t b, int64_t e) {
  const dw_job *j = ctx;
  for (int64_t it = b; it < e; it++) g8_item(j, it / j->p->groups, it % j->p->groups);
}
#endif

int primc_cv_g8_run(const cv_call *c) {
#if PRIMC_X86
  return cv_run_avx2(c, c->p->n * c->p->groups, g8_range);
#else
  return PRIMC_ERR_ARG; /* an x86 row: never planned here */
#endif
}
