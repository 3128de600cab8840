/* runtime/conv/depthwise_avx2.c: the AVX2 depthwise rows (8 channels in the lanes of a ymm; 8 columns of a plane), and the 8-lane band tiles the first shares with the grouped row. */
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
#define AVX2 __attribute__((target("avx2,fma,f16c"))) /* f16c: cv_t8_epi inlines the epilogue, f16 rounding included */
#define INLINE static inline __attribute__((always_inline))

/* dst row k (k < cols) = column k of the rows x cols block at src (rows ld apart): all 8 lanes (those past rows
 * 0) when full or rows is 8, else its first rows. Whole rows and columns move unmasked: a masked store
 * (vmaskmovps) is microcoded on AMD's cores, many cycles each. */
INLINE AVX2 void tr8_part(const float *src, int64_t ld, int rows, int cols, float *dst, int64_t ldd, int full) {
  const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  __m256i cm = _mm256_cmpgt_epi32(_mm256_set1_epi32(cols), iota), rm = _mm256_cmpgt_epi32(_mm256_set1_epi32(rows), iota);
  __m256 r[8];
  full |= rows == 8;
  /* unrolled and inlined, r stays in registers (a loop kept it on the stack: this was 54% of a 14x14 dw conv) */
#pragma GCC unroll 8
  for (int i = 0; i < 8; i++)
    r[i] = i >= rows ? _mm256_setzero_ps() : cols == 8 ? _mm256_loadu_ps(src + i * ld) : _mm256_maskload_ps(src + i * ld, cm);
  primc_tr8(r);
#pragma GCC unroll 8
  for (int k = 0; k < 8; k++) {
    if (k >= cols) break;
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
AVX2 static void dw8_fill(const primc_conv2d *p, const float *x, int nch, const t8_src *src, int64_t oy0, int64_t r0,
                          int64_t rows, int64_t pw, float *tile) {
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
    if (src) {
      src->make(src, ih, n, t + p->pad_l * 8);
      continue;
    }
    for (int64_t q = 0; q < n; q += 8)
      tr8_part(x + ih * p->w + q, hw, nch, (int)(n - q < 8 ? n - q : 8), t + (p->pad_l + q) * 8, 8, 1);
  }
}

/* Input channels [ci0, ci0 + nci) of image n as band tiles, band(d, tile, rows, out) making each band's [pixel][8]
 * sums, which go to output channels [co0, co0 + nco): the item of the 8-lane rows. d->wt is the row's; the
 * epilogue runs in the lanes (d->fused, set here) unless it needs the residual, laid out per plane */
AVX2 void primc_cv_t8_item(const dw_job *j, t8_ctx *d, int64_t n, int64_t ci0, int nci, int64_t co0, int nco,
                           t8_band_fn band, const t8_src *src, int64_t oy_b, int64_t oy_e) {
  const primc_conv2d *p = j->p;
  const primc_conv_epi *ep = j->e;
  dwl_geo g = primc_cv_dwl_geometry(p, j->oh, j->ow, 8);
  int64_t P = j->oh * j->ow, reach = (p->kh - 1) * p->dil_h + 1;
  float tile[DWL_TILE_FLOATS] __attribute__((aligned(32)));
  float out[DWL_OUT_FLOATS] __attribute__((aligned(32)));
  float bias[8] __attribute__((aligned(32))), scale[8] __attribute__((aligned(32)));
  epi_ctx ec = cv_epi_of(ep, co0, NULL, NULL);
  cv_lanes8_epi(ep, co0, nco, bias, scale);
  d->p = p, d->pw = g.pw, d->ow = j->ow, d->bias = bias, d->lo = ep->lo, d->hi = ep->hi, d->act = ep->act;
  d->scale = scale, d->div = ep->rq_div, d->zp = ep->rq_zp;
  d->fused = !ep->res && cv_act_ymm(ep->act);
  const float *x = j->x + (n * p->c + ci0) * p->h * p->w;
  float *acc = (d->fused ? j->y : j->acc) + (n * p->o + co0) * P;
  int64_t have0 = 0, have = 0; /* the tile holds input rows [have0, have0 + have) */
  for (int64_t oy0 = oy_b; oy0 < oy_e; oy0 += g.band) {
    int64_t rows = oy_e - oy0 < g.band ? oy_e - oy0 : g.band, need = (rows - 1) * p->stride_h + reach;
    int64_t ih0 = oy0 * p->stride_h - p->pad_t, keep = 0;
    /* rows the last band read too move up, not remade */
    if (have > 0 && ih0 >= have0 && ih0 < have0 + have) {
      keep = have0 + have - ih0 < need ? have0 + have - ih0 : need;
      memmove(tile, tile + (ih0 - have0) * g.pw * 8, (size_t)(keep * g.pw * 8) * sizeof(float));
    }
    dw8_fill(p, x, nci, src, oy0, keep, need, g.pw, tile);
    have0 = ih0, have = need;
    band(d, tile, rows, out);
    for (int64_t q = 0; q < rows * j->ow; q += 8)
      tr8_part(out + q * 8, 8, (int)(rows * j->ow - q < 8 ? rows * j->ow - q : 8), nco, acc + oy0 * j->ow + q, P, 0);
  }
  if (d->fused) return;
  for (int l = 0; l < nco; l++) {
    int64_t off = (n * p->o + co0 + l) * P + oy_b * j->ow;
    cv_epi_row(PRIMC_ISA_AVX2, &ec, j->y + off, j->acc + off, ep->res ? ep->res + off : NULL, bias[l], scale[l],
               (oy_e - oy_b) * j->ow);
  }
}

/* 8 taps at a time through an in-register transpose: the scalar copy, a strided read per float, was 2% of MnasNet's
 * run (the pair row's 1x1 weights, K x 8 for every block of 8 channels) */
AVX2 void primc_cv_lanes8_weights(const float *w, int64_t k, int nch, float *wt) {
  int64_t t = 0;
  for (; t + 8 <= k; t += 8) {
    __m256 r[8];
#pragma GCC unroll 8
    for (int l = 0; l < 8; l++) r[l] = l < nch ? _mm256_loadu_ps(w + l * k + t) : _mm256_setzero_ps();
    primc_tr8(r);
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) _mm256_storeu_ps(wt + (t + i) * 8, r[i]);
  }
  for (; t < k; t++)
    for (int l = 0; l < 8; l++) wt[t * 8 + l] = l < nch ? w[l * k + t] : 0.0f;
}

/* the depthwise conv of channels [c0, c0 + nch) of image n: per-lane weights [tap][8] */
AVX2 void primc_cv_dw8_item(const dw_job *j, int64_t n, int64_t c0, int nch, const t8_src *src, int64_t oy_b,
                            int64_t oy_e) {
  int64_t taps = j->p->kh * j->p->kw;
  float wt[DWL_MAX_TAPS * 8] __attribute__((aligned(32)));
  primc_cv_lanes8_weights(j->w + c0 * taps, taps, nch, wt);
  t8_ctx d = {.wt = wt};
  primc_cv_t8_item(j, &d, n, c0, nch, c0, nch, dw8_band, src, oy_b, oy_e);
}

/* items (image, block of 8 channels) [b, e) of the dw_job in ctx */
static void dw8_range(void *ctx, int64_t b, int64_t e) {
  const dw_job *j = ctx;
  int64_t nblk = (j->p->c + 7) / 8;
  for (int64_t it = b; it < e; it++) {
    int64_t c0 = it % nblk * 8;
    primc_cv_dw8_item(j, it / nblk, c0, (int)(j->p->c - c0 < 8 ? j->p->c - c0 : 8), NULL, 0, j->oh);
  }
}
#endif

/*
 * dw_rows8: depthwise on the planes themselves, 8 output columns a ymm and no transposes (dw_lanes8 spent half
 * its time moving channels into and out of the lanes). A band of one plane's input rows is copied into a
 * zero-bordered tile (at stride 2 each row as its even columns, then its odd ones, so that every tap reads 8
 * neighbours), blocks of up to 12 vectors (output rows x columns) take every tap in registers, and each band's
 * sums go through the AVX2 epilogue row into y.
 */
#define DR8_TILE 6144 /* floats of a band's input tile, on the stack */
#define DR8_OUT 4096  /* floats of a band's sums */
#define DR8_MAX_KW 16

typedef struct dr8_geo {
  int64_t pw;   /* a tile row's floats: padded columns (stride 2: even ones, then as many odd ones) */
  int64_t half; /* stride 2: where a tile row's odd columns start */
  int64_t owr;  /* output columns rounded up to whole vectors */
  int64_t band; /* output rows per band (0: does not fit) */
} dr8_geo;

static dr8_geo dr8_geometry(const primc_conv2d *p, int64_t oh, int64_t ow) {
  dr8_geo g = {0, 0, (ow + 7) / 8 * 8, 0};
  int64_t reach = (p->kw - 1) * p->dil_w, in = p->pad_l + p->w;
  if (p->stride_w == 1) {
    g.pw = (in > g.owr + reach ? in : g.owr + reach) + 7;
    g.pw -= g.pw % 8;
  } else {
    int64_t need = g.owr + reach / 2 + 1, have = (in + 1) / 2;
    g.half = ((need > have ? need : have) + 7) / 8 * 8;
    g.pw = 2 * g.half;
  }
  /* the most rows r whose input rows, (r - 1) stride_h + reach_h, fit the tile and whose sums, (r - 1) ow + owr
   * (the last row's spill), fit theirs */
  int64_t tile_rows = DR8_TILE / g.pw, reach_h = (p->kh - 1) * p->dil_h + 1;
  int64_t by_tile = tile_rows >= reach_h ? (tile_rows - reach_h) / p->stride_h + 1 : 0;
  int64_t by_out = DR8_OUT >= g.owr ? (DR8_OUT - g.owr) / ow + 1 : 0;
  g.band = by_tile < by_out ? by_tile : by_out;
  if (g.band > oh) g.band = oh;
  return g;
}

int primc_cv_dr8_fits(const primc_conv2d *p, const primc_conv2d *next) {
  int64_t oh, ow;
  return cv_dw_plain(p) && primc_conv2d_out_hw(p, &oh, &ow) && (p->stride_w == 1 || p->stride_w == 2) &&
         p->kw <= DR8_MAX_KW && dr8_geometry(p, oh, ow).band > 0;
}

#if PRIMC_X86
/* padded columns 2k and 2k + 1 of the row xr into ev[k] and od[k], zeros outside it */
static inline void dr8_split_col(const primc_conv2d *p, const float *xr, int64_t k, float *ev, float *od) {
  int64_t q = 2 * k - p->pad_l;
  ev[k] = q >= 0 && q < p->w ? xr[q] : 0.0f;
  od[k] = q + 1 >= 0 && q + 1 < p->w ? xr[q + 1] : 0.0f;
}

/* input row ih of the plane x into a tile row of g->pw floats: zeros outside the input; stride 2 split into even
 * and odd padded columns (column q of the padded row is x[q - pad_l]) */
AVX2 static void dr8_fill_row(const primc_conv2d *p, const dr8_geo *g, const float *x, int64_t ih, float *t) {
  if (ih < 0 || ih >= p->h) {
    memset(t, 0, (size_t)g->pw * sizeof(float));
    return;
  }
  const float *xr = x + ih * p->w;
  if (p->stride_w == 1) {
    memset(t, 0, (size_t)p->pad_l * sizeof(float));
    memcpy(t + p->pad_l, xr, (size_t)p->w * sizeof(float));
    memset(t + p->pad_l + p->w, 0, (size_t)(g->pw - p->pad_l - p->w) * sizeof(float));
    return;
  }
  float *ev = t, *od = t + g->half;
  int64_t k = 0;
  for (; k < g->half && !(2 * k - p->pad_l >= 0 && 2 * k - p->pad_l + 16 <= p->w); k++) /* up to the first whole block */
    dr8_split_col(p, xr, k, ev, od);
  for (; k + 8 <= g->half && 2 * k - p->pad_l + 16 <= p->w; k += 8) {
    __m256 a = _mm256_loadu_ps(xr + 2 * k - p->pad_l), b = _mm256_loadu_ps(xr + 2 * k - p->pad_l + 8);
    _mm256_storeu_ps(ev + k, primc_even8(a, b));
    _mm256_storeu_ps(od + k, primc_odd8(a, b));
  }
  int64_t kend = (p->pad_l + p->w + 1) / 2 < g->half ? (p->pad_l + p->w + 1) / 2 : g->half; /* then zeros only */
  for (; k < kend; k++) dr8_split_col(p, xr, k, ev, od);
  memset(ev + kend, 0, (size_t)(g->half - kend) * sizeof(float));
  memset(od + kend, 0, (size_t)(g->half - kend) * sizeof(float));
}

typedef struct dr8_ctx {
  const primc_conv2d *p;
  const float *w;            /* the plane's taps [kh][kw] */
  int64_t rs, ts;            /* tile floats from one output row's taps to the next row's, and per kernel row */
  int64_t col[DR8_MAX_KW];   /* tile column of tap jx for output column 0 */
} dr8_ctx;

/* R output rows x CH vectors from the tile at t (output row 0, column 0 of the block) into sums (rows ow apart) */
INLINE AVX2 void dr8_block(const dr8_ctx *d, const float *t, float *sums, int64_t ow, const int R, const int CH) {
  __m256 a[12];
#pragma GCC unroll 12
  for (int k = 0; k < R * CH; k++) a[k] = _mm256_setzero_ps();
  for (int64_t i = 0; i < d->p->kh; i++, t += d->ts) {
    const float *wr = d->w + i * d->p->kw;
    for (int64_t jx = 0; jx < d->p->kw; jx++) {
      __m256 wv = _mm256_broadcast_ss(wr + jx);
      const float *src = t + d->col[jx];
#pragma GCC unroll 8
      for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int c = 0; c < CH; c++)
          a[r * CH + c] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(src + r * d->rs + 8 * c), a[r * CH + c]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int c = 0; c < CH; c++) _mm256_storeu_ps(sums + r * ow + 8 * c, a[r * CH + c]);
}

/* rows [0, rows) x vectors [v, v + CH) of a band: blocks of as many rows as the registers hold */
AVX2 static void dr8_cols(const dr8_ctx *d, const float *tile, float *sums, int64_t rows, int64_t v, int64_t ow, int CH) {
  static const int rmax[5] = {0, 8, 6, 4, 3};
  for (int64_t r0 = 0; r0 < rows;) {
    int R = rows - r0 < rmax[CH] ? (int)(rows - r0) : rmax[CH];
    const float *t = tile + r0 * d->rs + 8 * v;
    float *s = sums + r0 * ow + 8 * v;
    switch (CH * 16 + R) {
#define DR8_CASE(C, N) \
  case C * 16 + N: dr8_block(d, t, s, ow, N, C); break;
      DR8_CASE(1, 1) DR8_CASE(1, 2) DR8_CASE(1, 3) DR8_CASE(1, 4) DR8_CASE(1, 5) DR8_CASE(1, 6) DR8_CASE(1, 7)
      DR8_CASE(1, 8) DR8_CASE(2, 1) DR8_CASE(2, 2) DR8_CASE(2, 3) DR8_CASE(2, 4) DR8_CASE(2, 5) DR8_CASE(2, 6)
      DR8_CASE(3, 1) DR8_CASE(3, 2) DR8_CASE(3, 3) DR8_CASE(3, 4) DR8_CASE(4, 1) DR8_CASE(4, 2) DR8_CASE(4, 3)
#undef DR8_CASE
    }
    r0 += R;
  }
}

/* one plane (image n's channel c), the tile's geometry g and tap columns d (every plane's) made by the caller */
AVX2 static void dr8_plane(const dw_job *j, const dr8_geo *gp, dr8_ctx d, int64_t plane) {
  const primc_conv2d *p = j->p;
  const dr8_geo g = *gp;
  int64_t c = plane % p->c, P = j->oh * j->ow;
  float tile[DR8_TILE] __attribute__((aligned(32)));
  float sums[DR8_OUT + 8] __attribute__((aligned(32)));
  d.w = j->w + c * p->kh * p->kw;
  const float *x = j->x + plane * p->h * p->w, *res = j->e->res ? j->e->res + plane * P : NULL;
  epi_ctx e = cv_epi_of(j->e, 0, NULL, NULL);
  float *y = j->y + plane * P, b = cv_bias_at(&e, c), s = cv_scale_at(&e, c);
  int64_t nv = g.owr / 8;
  for (int64_t oy0 = 0; oy0 < j->oh; oy0 += g.band) {
    int64_t rows = j->oh - oy0 < g.band ? j->oh - oy0 : g.band, need = (rows - 1) * p->stride_h + (p->kh - 1) * p->dil_h + 1;
    for (int64_t r = 0; r < need; r++) dr8_fill_row(p, &g, x, oy0 * p->stride_h - p->pad_t + r, tile + r * g.pw);
    /* the sums rows ow apart, blocks right to left: a row's last vector spills into the next row's first
     * columns, which the blocks after it then write; one epilogue call for the band */
    if (nv % 4) dr8_cols(&d, tile, sums, rows, nv / 4 * 4, j->ow, (int)(nv % 4));
    for (int64_t v = nv / 4 * 4 - 4; v >= 0; v -= 4) dr8_cols(&d, tile, sums, rows, v, j->ow, 4);
    int64_t o = oy0 * j->ow;
    cv_epi_row(PRIMC_ISA_AVX2, &e, y + o, sums, res ? res + o : NULL, b, s, rows * j->ow);
  }
}

static void dr8_range(void *ctx, int64_t b, int64_t e) {
  const dw_job *j = ctx;
  const primc_conv2d *p = j->p;
  dr8_geo g = dr8_geometry(p, j->oh, j->ow);
  dr8_ctx d = {.p = p, .rs = p->stride_h * g.pw, .ts = p->dil_h * g.pw};
  for (int64_t jx = 0; jx < p->kw; jx++) {
    int64_t q = jx * p->dil_w; /* padded column of output 0's tap jx */
    d.col[jx] = p->stride_w == 1 ? q : (q & 1) * g.half + q / 2;
  }
  for (int64_t i = b; i < e; i++) dr8_plane(j, &g, d, i);
}
#endif

int primc_cv_dr8_run(const cv_call *c) {
#if PRIMC_X86
  return cv_run_avx2(c, c->p->n * c->p->c, dr8_range);
#else
  return PRIMC_ERR_ARG; /* an x86 row: never planned here */
#endif
}

int primc_cv_dwl8_run(const cv_call *c) {
#if PRIMC_X86
  return cv_run_avx2(c, c->p->n * ((c->p->c + 7) / 8), dw8_range);
#else
  return PRIMC_ERR_ARG; /* an x86 row: never planned here */
#endif
}
