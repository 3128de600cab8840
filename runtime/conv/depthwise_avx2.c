/* runtime/conv/depthwise_avx2.c: the depthwise row with 8 channels in the lanes of a ymm (AVX2), and the 8-lane band tiles it shares with the grouped row. */
#include "runtime/conv/conv.h"

#include <string.h>

/*
 * dw_lanes' scheme on ymm: a band of 8 channels' input rows is transposed into a zero-bordered
 * [row][col][8] tile, each output pixel is then one full-width FMA per tap at any stride, with no masks
 * and no row tails (a 7-wide output row is 7 full vectors, not 7 scalar tails), and the [pixel][8] sums
 * are transposed back (8 x 8 in registers) into the output planes, whose rows the AVX2 epilogue row
 * then finishes.
 */
int primc_cv_dwl8_fits(const primc_conv2d *p, const primc_conv2d *next) {
  int64_t oh, ow;
  return cv_dw_plain(p) && primc_conv2d_out_hw(p, &oh, &ow) && p->kh * p->kw <= DWL_MAX_TAPS &&
         primc_cv_dwl_geometry(p, oh, ow, 8).band > 0;
}

#if PRIMC_X86
#define AVX2 __attribute__((target("avx2,fma")))
#define INLINE static inline __attribute__((always_inline))

/* dst row k (k < cols) = column k of the rows x cols block at src (rows ld apart): all 8 lanes (those past rows
 * 0) when full or rows is 8, else its first rows. Whole rows and columns move unmasked: a masked store
 * (vmaskmovps) is microcoded on AMD's cores, many cycles each. */
AVX2 static void tr8_part(const float *src, int64_t ld, int rows, int cols, float *dst, int64_t ldd, int full) {
  const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  __m256i cm = _mm256_cmpgt_epi32(_mm256_set1_epi32(cols), iota), rm = _mm256_cmpgt_epi32(_mm256_set1_epi32(rows), iota);
  __m256 r[8];
  full |= rows == 8;
  for (int i = 0; i < 8; i++)
    r[i] = i >= rows ? _mm256_setzero_ps() : cols == 8 ? _mm256_loadu_ps(src + i * ld) : _mm256_maskload_ps(src + i * ld, cm);
  primc_tr8(r);
  for (int k = 0; k < cols; k++) {
    if (full) _mm256_storeu_ps(dst + k * ldd, r[k]);
    else _mm256_maskstore_ps(dst + k * ldd, rm, r[k]);
  }
}

/* NB output pixels from (oy, ox) of the band (oy relative to its first row) into out[pixel][8] */
INLINE AVX2 void dw8_pixels(const t8_ctx *d, const float *tile, int64_t oy, int64_t ox, float *out, const int NB) {
  const primc_conv2d *p = d->p;
  __m256 a[8];
#pragma GCC unroll 8
  for (int b = 0; b < NB; b++) a[b] = _mm256_setzero_ps();
  int64_t sw = p->stride_w * 8;
  for (int64_t i = 0; i < p->kh; i++) {
    const float *row = tile + ((oy * p->stride_h + i * p->dil_h) * d->pw + ox * p->stride_w) * 8;
    for (int64_t jx = 0; jx < p->kw; jx++) {
      __m256 wv = _mm256_load_ps(d->wt + (i * p->kw + jx) * 8);
      const float *src = row + jx * p->dil_w * 8;
#pragma GCC unroll 8
      for (int b = 0; b < NB; b++) a[b] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(src + b * sw), a[b]);
    }
  }
  cv_t8_epi(d, a, NB);
#pragma GCC unroll 8
  for (int b = 0; b < NB; b++) _mm256_store_ps(out + b * 8, a[b]);
}

AVX2 static void dw8_band(const t8_ctx *d, const float *tile, int64_t rows, float *out) {
  for (int64_t oy = 0; oy < rows; oy++) {
    float *o = out + oy * d->ow * 8;
    int64_t ox = 0;
    for (; ox + 8 <= d->ow; ox += 8) dw8_pixels(d, tile, oy, ox, o + ox * 8, 8);
    switch (d->ow - ox) { /* the rest as one block: independent sums, not a chain per pixel */
    case 7: dw8_pixels(d, tile, oy, ox, o + ox * 8, 7); break;
    case 6: dw8_pixels(d, tile, oy, ox, o + ox * 8, 6); break;
    case 5: dw8_pixels(d, tile, oy, ox, o + ox * 8, 5); break;
    case 4: dw8_pixels(d, tile, oy, ox, o + ox * 8, 4); break;
    case 3: dw8_pixels(d, tile, oy, ox, o + ox * 8, 3); break;
    case 2: dw8_pixels(d, tile, oy, ox, o + ox * 8, 2); break;
    case 1: dw8_pixels(d, tile, oy, ox, o + ox * 8, 1); break;
    }
  }
}

/* tile rows [r0, rows) of the band whose first output row is oy0, channels [0, nch) of the planes at x: zeros
 * outside the input */
AVX2 static void dw8_fill(const primc_conv2d *p, const float *x, int nch, int64_t oy0, int64_t r0, int64_t rows,
                          int64_t pw, float *tile) {
  int64_t in_end = p->pad_l + p->w < pw ? p->pad_l + p->w : pw, hw = p->h * p->w;
  for (int64_t r = r0; r < rows; r++) {
    int64_t ih = oy0 * p->stride_h - p->pad_t + r;
    float *t = tile + r * pw * 8;
    if (ih < 0 || ih >= p->h || in_end <= p->pad_l) {
      memset(t, 0, (size_t)(pw * 8) * sizeof(float));
      continue;
    }
    memset(t, 0, (size_t)(p->pad_l * 8) * sizeof(float));
    if (in_end < pw) memset(t + in_end * 8, 0, (size_t)((pw - in_end) * 8) * sizeof(float));
    int64_t n = in_end - p->pad_l;
    for (int64_t q = 0; q < n; q += 8)
      tr8_part(x + ih * p->w + q, hw, nch, (int)(n - q < 8 ? n - q : 8), t + (p->pad_l + q) * 8, 8, 1);
  }
}

/* Input channels [ci0, ci0 + nci) of image n as band tiles, band(d, tile, rows, out) making each band's [pixel][8]
 * sums, which go to output channels [co0, co0 + nco): the item of the 8-lane rows. d->wt is the row's; the
 * epilogue runs in the lanes (d->fused, set here) unless it needs the residual, laid out per plane */
AVX2 void primc_cv_t8_item(const dw_job *j, t8_ctx *d, int64_t n, int64_t ci0, int nci, int64_t co0, int nco,
                           t8_band_fn band) {
  const primc_conv2d *p = j->p;
  const primc_conv_epi *ep = j->e;
  dwl_geo g = primc_cv_dwl_geometry(p, j->oh, j->ow, 8);
  int64_t P = j->oh * j->ow, reach = (p->kh - 1) * p->dil_h + 1;
  float tile[DWL_TILE_FLOATS] __attribute__((aligned(32)));
  float out[DWL_OUT_FLOATS] __attribute__((aligned(32)));
  float bias[8] __attribute__((aligned(32)));
  for (int l = 0; l < 8; l++) bias[l] = l < nco && ep->bias ? ep->bias[(co0 + l) * ep->bias_stride] : 0.0f;
  d->p = p, d->pw = g.pw, d->ow = j->ow, d->bias = bias, d->lo = ep->lo, d->hi = ep->hi, d->act = ep->act;
  d->fused = !ep->res && cv_act_ymm(ep->act);
  const float *x = j->x + (n * p->c + ci0) * p->h * p->w;
  float *acc = (d->fused ? j->y : j->acc) + (n * p->o + co0) * P;
  int64_t have0 = 0, have = 0; /* the tile holds input rows [have0, have0 + have) */
  for (int64_t oy0 = 0; oy0 < j->oh; oy0 += g.band) {
    int64_t rows = j->oh - oy0 < g.band ? j->oh - oy0 : g.band, need = (rows - 1) * p->stride_h + reach;
    int64_t ih0 = oy0 * p->stride_h - p->pad_t, keep = 0;
    /* rows the last band read too move up, not remade */
    if (have > 0 && ih0 >= have0 && ih0 < have0 + have) {
      keep = have0 + have - ih0 < need ? have0 + have - ih0 : need;
      memmove(tile, tile + (ih0 - have0) * g.pw * 8, (size_t)(keep * g.pw * 8) * sizeof(float));
    }
    dw8_fill(p, x, nci, oy0, keep, need, g.pw, tile);
    have0 = ih0, have = need;
    band(d, tile, rows, out);
    for (int64_t q = 0; q < rows * j->ow; q += 8)
      tr8_part(out + q * 8, 8, (int)(rows * j->ow - q < 8 ? rows * j->ow - q : 8), nco, acc + oy0 * j->ow + q, P, 0);
  }
  if (d->fused) return;
  epi_ctx ec = {.lo = ep->lo, .hi = ep->hi, .act = ep->act};
  for (int l = 0; l < nco; l++) {
    int64_t off = (n * p->o + co0 + l) * P, c = co0 + l;
    cv_epi_row(PRIMC_ISA_AVX2, &ec, j->y + off, j->acc + off, ep->res ? ep->res + off : NULL,
               ep->bias ? ep->bias[c * ep->bias_stride] : 0.0f, P);
  }
}

/* the depthwise conv of channels [c0, c0 + nch) of image n: per-lane weights [tap][8] */
AVX2 static void dw8_item(const dw_job *j, int64_t n, int64_t c0, int nch) {
  int64_t taps = j->p->kh * j->p->kw;
  float wt[DWL_MAX_TAPS * 8] __attribute__((aligned(32)));
  for (int64_t t = 0; t < taps; t++)
    for (int l = 0; l < 8; l++) wt[t * 8 + l] = l < nch ? j->w[(c0 + l) * taps + t] : 0.0f;
  t8_ctx d = {.wt = wt};
  primc_cv_t8_item(j, &d, n, c0, nch, c0, nch, dw8_band);
}

/* items (image, block of 8 channels) [b, e) of the dw_job in ctx */
static void dw8_range(void *ctx, int64_t b, int64_t e) {
  const dw_job *j = ctx;
  int64_t nblk = (j->p->c + 7) / 8;
  for (int64_t it = b; it < e; it++) {
    int64_t c0 = it % nblk * 8;
    dw8_item(j, it / nblk, c0, (int)(j->p->c - c0 < 8 ? j->p->c - c0 : 8));
  }
}
#endif

int primc_cv_dwl8_run(const cv_call *c) {
#if PRIMC_X86
  dw_job j = {c->p, c->x, c->w, c->e, c->acc, c->y, c->oh, c->ow, PRIMC_ISA_AVX2};
  primc_parallel_for(c->p->n * ((c->p->c + 7) / 8), dw8_range, &j);
  return PRIMC_OK;
#else
  return PRIMC_ERR_ARG; /* an x86 row: never planned here */
#endif
}
