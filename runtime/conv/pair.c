/* runtime/conv/pair.c: the PAIR_DW row: a small conv (1x1 widening or stem) whose result only a depthwise conv reads, run as one (AVX-512, AVX2). */
#include "runtime/conv/conv.h"

#include <string.h>

/* ---------------------------------------------------------------- a small conv then depthwise, fused */

/*
 * MobileNet's inverted residual widens a map with a 1x1 conv and filters it with a depthwise one.
 * The widened map is the largest tensor of the model (96x112x112, 4.8 MB), written once and read
 * once, and the depthwise conv in the lanes spends most of its time transposing it into its tiles.
 * Fused, the first conv writes the tile rows itself, 16 channels in the lanes: each pixel's 16 sums
 * are one FMA per input channel and tap, and the widened map never goes to memory. The same holds
 * for a stem (3 channels, 3x3/2) feeding a depthwise conv.
 */
#define PWL_MAX_K 256 /* taps x input channels: a block's first-conv weights are [k][16] on the stack */
/* pixels per 1x1 call: 16 independent FMA chains, not 8, hide the FMA latency over a K of 16-24 (cl_pixels,
 * whose inner loop is the taps, stays at 8) */
#define PWL_NB 16

#if PRIMC_X86
__attribute__((target("avx512f"))) static inline __attribute__((always_inline)) void
pwl_store(const dwl_src *s, __m512 *a, float *dst, const int NB) {
#pragma GCC unroll 16
  for (int b = 0; b < NB; b++) {
    __m512 v = s->act ? cv_act512(s->act, a[b]) : a[b];
    _mm512_storeu_ps(dst + b * 16, _mm512_min_ps(s->hi, _mm512_max_ps(s->lo, v)));
  }
}

/* 1x1: NB pixels from xr (a row of the first input plane), 16 channels each, to dst[pixel][16] */
__attribute__((target("avx512f"))) static inline __attribute__((always_inline)) void
pwl_pixels(const dwl_src *s, const float *xr, float *dst, const int NB) {
  __m512 a[PWL_NB];
#pragma GCC unroll 16
  for (int b = 0; b < NB; b++) a[b] = s->bias;
  for (int64_t k = 0; k < s->k; k++) {
    __m512 wv = _mm512_load_ps(s->wt + k * 16);
    const float *xk = xr + k * s->hw;
#pragma GCC unroll 16
    for (int b = 0; b < NB; b++) a[b] = _mm512_fmadd_ps(_mm512_set1_ps(xk[b]), wv, a[b]);
  }
  pwl_store(s, a, dst, NB);
}

__attribute__((target("avx512f"))) static void pwl_row(const dwl_src *s, int64_t ih, int64_t n, float *dst) {
  const float *xr = s->x + ih * s->w;
  int64_t c = 0;
  for (; c + PWL_NB <= n; c += PWL_NB) pwl_pixels(s, xr + c, dst + c * 16, PWL_NB);
  if (n - c >= 8) pwl_pixels(s, xr + c, dst + c * 16, 8), c += 8;
  if (n - c >= 4) pwl_pixels(s, xr + c, dst + c * 16, 4), c += 4;
  for (; c < n; c++) pwl_pixels(s, xr + c, dst + c * 16, 1);
}

/* the input rows a first-conv output row reads: for each (channel, kernel row) inside the input, where
 * that row starts and its taps' weights */
typedef struct cl_rows {
  int n;
  const float *x[PWL_MAX_K];
  const float *wt[PWL_MAX_K];
} cl_rows;

/* any kh x kw conv: NB pixels from column ox (input column col0 = ox stride - pad); taps whose
 * column is outside are skipped (border pixels, NB = 1), ALL: none is */
__attribute__((target("avx512f"))) static inline __attribute__((always_inline)) void
cl_pixels(const dwl_src *s, const cl_rows *r, int64_t col0, float *dst, const int NB, const int ALL) {
  const primc_conv2d *p = s->first;
  const int64_t sw = p->stride_w, kw = p->kw, dil = p->dil_w, w = p->w;
  __m512 a[8];
#pragma GCC unroll 8
  for (int b = 0; b < NB; b++) a[b] = s->bias;
  for (int q = 0; q < r->n; q++) {
    const float *xr = r->x[q] + col0, *wt = r->wt[q];
    for (int64_t jx = 0; jx < kw; jx++) {
      int64_t at = jx * dil;
      if (!ALL && (col0 + at < 0 || col0 + at >= w)) continue;
      __m512 wv = _mm512_load_ps(wt + jx * 16);
#pragma GCC unroll 8
      for (int b = 0; b < NB; b++) a[b] = _mm512_fmadd_ps(_mm512_set1_ps(xr[at + b * sw]), wv, a[b]);
    }
  }
  pwl_store(s, a, dst, NB);
}

/* output row oy of the first conv p: the rows it reads in *r (weights wt[k][lanes]), and the columns [*lo, *hi)
 * of the n made whose taps all lie inside the row */
static void cl_rows_of(const primc_conv2d *p, const float *x, int64_t hw, const float *wt, int lanes, int64_t oy,
                       int64_t n, cl_rows *r, int64_t *lo, int64_t *hi) {
  r->n = 0;
  for (int64_t c = 0; c < p->c; c++)
    for (int64_t i = 0; i < p->kh; i++) {
      int64_t ih = oy * p->stride_h - p->pad_t + i * p->dil_h;
      if (ih < 0 || ih >= p->h) continue;
      r->x[r->n] = x + c * hw + ih * p->w;
      r->wt[r->n++] = wt + (c * p->kh + i) * p->kw * lanes;
    }
  int64_t sw = p->stride_w, reach = (p->kw - 1) * p->dil_w;
  *lo = (p->pad_l + sw - 1) / sw, *hi = p->w - 1 - reach + p->pad_l < 0 ? 0 : (p->w - 1 - reach + p->pad_l) / sw + 1;
  if (*hi > n) *hi = n;
  if (*lo > *hi) *lo = *hi;
}

__attribute__((target("avx512f"))) static void cl_row(const dwl_src *s, int64_t oy, int64_t n, float *dst) {
  const primc_conv2d *p = s->first;
  cl_rows r;
  int64_t lo, hi, sw = p->stride_w, c = 0;
  cl_rows_of(p, s->x, s->hw, s->wt, 16, oy, n, &r, &lo, &hi);
  for (; c < lo; c++) cl_pixels(s, &r, c * sw - p->pad_l, dst + c * 16, 1, 0);
  for (; c + 8 <= hi; c += 8) cl_pixels(s, &r, c * sw - p->pad_l, dst + c * 16, 8, 1);
  if (hi - c >= 4) cl_pixels(s, &r, c * sw - p->pad_l, dst + c * 16, 4, 1), c += 4;
  if (hi - c >= 2) cl_pixels(s, &r, c * sw - p->pad_l, dst + c * 16, 2, 1), c += 2;
  for (; c < hi; c++) cl_pixels(s, &r, c * sw - p->pad_l, dst + c * 16, 1, 1);
  for (; c < n; c++) cl_pixels(s, &r, c * sw - p->pad_l, dst + c * 16, 1, 0);
}

/*
 * On AVX2 the same with 8 channels in the lanes: the first conv makes dw_lanes8's tile rows, and the
 * widened map (MobileNet's expand convs: a small K, a large map written at memory speed, which a second thread
 * hardly sped up) never goes to memory.
 */
#define PW8_NB 12 /* pixels per 1x1 call: 12 sums, a weight vector and a broadcast fill 14 of the 16 ymm */
#define AVX2P __attribute__((target("avx2,fma,f16c")))

/* NB pixels' sums (plus the bias, but under act RQ) through the first conv's act and clamp, to dst[pixel][8] */
static inline __attribute__((always_inline)) AVX2P void pw8_store(const t8_src *s, const __m256 *a, float *dst,
                                                                 const int NB) {
  __m256 lo = _mm256_set1_ps(s->lo), hi = _mm256_set1_ps(s->hi);
  if (s->act == PRIMC_ACT_RQ) { /* the exact sums, then the f32 steps of cv_rqf */
    __m256 bias = _mm256_load_ps(s->bias), sc = _mm256_load_ps(s->scale);
#pragma GCC unroll 12
    for (int b = 0; b < NB; b++)
      _mm256_store_ps(dst + b * 8, _mm256_min_ps(hi, _mm256_max_ps(lo, cv_rq256(a[b], bias, sc, s->div, s->zp))));
    return;
  }
#pragma GCC unroll 12
  for (int b = 0; b < NB; b++) {
    __m256 v = s->act ? cv_act256(s->act, a[b]) : a[b];
    _mm256_store_ps(dst + b * 8, _mm256_min_ps(hi, _mm256_max_ps(lo, v)));
  }
}

static inline __attribute__((always_inline)) AVX2P void pw8_pixels(const t8_src *s, const float *xr, float *dst,
                                                                  const int NB) {
  __m256 a[PW8_NB], bias = _mm256_load_ps(s->bias), init = s->act == PRIMC_ACT_RQ ? _mm256_setzero_ps() : bias;
#pragma GCC unroll 12
  for (int b = 0; b < NB; b++) a[b] = init;
  const float *xk = xr, *wk = s->wt;
  for (int64_t k = 0; k < s->k; k++, xk += s->hw, wk += 8) {
    __m256 wv = _mm256_load_ps(wk);
#pragma GCC unroll 12
    for (int b = 0; b < NB; b++) a[b] = _mm256_fmadd_ps(_mm256_broadcast_ss(xk + b), wv, a[b]);
    __asm__("" : "+r"(xk)); /* the pixels at immediate offsets from one pointer: GCC kept an index per pixel */
  }
  pw8_store(s, a, dst, NB);
}

AVX2P static void pw8_row(const t8_src *s, int64_t ih, int64_t n, float *dst) {
  const float *xr = s->x + ih * s->w;
  int64_t c = 0;
  for (; c + PW8_NB <= n; c += PW8_NB) pw8_pixels(s, xr + c, dst + c * 8, PW8_NB);
  if (n - c >= 8) pw8_pixels(s, xr + c, dst + c * 8, 8), c += 8;
  if (n - c >= 4) pw8_pixels(s, xr + c, dst + c * 8, 4), c += 4;
  for (; c < n; c++) pw8_pixels(s, xr + c, dst + c * 8, 1);
}

/* any kh x kw first conv on 8 lanes, as cl_pixels; SW: the stride when constant (the pixels' taps then at
 * immediate offsets), 0 when read from p */
static inline __attribute__((always_inline)) AVX2P void cl8_pixels(const t8_src *s, const cl_rows *r, int64_t col0,
                                                                  float *dst, const int NB, const int ALL,
                                                                  const int SW) {
  const primc_conv2d *p = s->first;
  const int64_t sw = SW ? SW : p->stride_w, kw = p->kw, dil = p->dil_w, w = p->w;
  __m256 a[8], bias = _mm256_load_ps(s->bias), init = s->act == PRIMC_ACT_RQ ? _mm256_setzero_ps() : bias;
#pragma GCC unroll 8
  for (int b = 0; b < NB; b++) a[b] = init;
  for (int q = 0; q < r->n; q++) {
    const float *xr = r->x[q] + col0, *wt = r->wt[q];
    for (int64_t jx = 0; jx < kw; jx++) {
      int64_t at = jx * dil;
      if (!ALL && (col0 + at < 0 || col0 + at >= w)) continue;
      __m256 wv = _mm256_load_ps(wt + jx * 8);
#pragma GCC unroll 8
      for (int b = 0; b < NB; b++) a[b] = _mm256_fmadd_ps(_mm256_broadcast_ss(xr + at + b * sw), wv, a[b]);
    }
  }
  pw8_store(s, a, dst, NB);
}

static inline __attribute__((always_inline)) AVX2P void cl8_row_s(const t8_src *s, int64_t oy, int64_t n, float *dst,
                                                                 const int SW) {
  const primc_conv2d *p = s->first;
  cl_rows r;
  int64_t lo, hi, sw = p->stride_w, c = 0;
  cl_rows_of(p, s->x, s->hw, s->wt, 8, oy, n, &r, &lo, &hi);
  for (; c < lo; c++) cl8_pixels(s, &r, c * sw - p->pad_l, dst + c * 8, 1, 0, SW);
  for (; c + 8 <= hi; c += 8) cl8_pixels(s, &r, c * sw - p->pad_l, dst + c * 8, 8, 1, SW);
  if (hi - c >= 4) cl8_pixels(s, &r, c * sw - p->pad_l, dst + c * 8, 4, 1, SW), c += 4;
  for (; c < hi; c++) cl8_pixels(s, &r, c * sw - p->pad_l, dst + c * 8, 1, 1, SW);
  for (; c < n; c++) cl8_pixels(s, &r, c * sw - p->pad_l, dst + c * 8, 1, 0, SW);
}

AVX2P static void cl8_row(const t8_src *s, int64_t oy, int64_t n, float *dst) {
  if (s->first->stride_w == 2) cl8_row_s(s, oy, n, dst, 2); /* the stems' */
  else cl8_row_s(s, oy, n, dst, 0);
}
#endif

/* channels in the lanes of the pair's code on this CPU: 16 (AVX-512), 8 (AVX2), 0 (none) */
static int pair_lanes(void) {
  if (!PRIMC_X86) return 0;
  if (cv_use_avx512()) return 16;
  return primc_sgemm_isa() == PRIMC_ISA_AVX2 ? 8 : 0;
}

static int pair_can(const primc_conv2d *pw, const primc_conv_epi *e1, const primc_conv2d *dw) {
  int64_t oh, ow;
  if (!pw || !dw || !primc_cv_valid(pw) || !primc_cv_valid(dw) || pw->groups != 1 || !cv_is_depthwise(dw)) return 0;
  int lanes = pair_lanes();
  if (!lanes) return 0;
  if (pw->w_packed_mr || pw->w_packed_panels || pw->w_winograd || pw->w_lanes || dw->w_packed_mr ||
      dw->w_packed_panels || dw->w_winograd || dw->w_lanes || pw->w_bf16 || dw->w_bf16 || (e1 && e1->res) ||
      pw->c * pw->kh * pw->kw > PWL_MAX_K)
    return 0;
  primc_conv2d_out_hw(pw, &oh, &ow);
  if (dw->n != pw->n || dw->c != pw->o || dw->h != oh || dw->w != ow) return 0;
  primc_conv2d_out_hw(dw, &oh, &ow);
  return dw->kh * dw->kw <= DWL_MAX_TAPS && dw->stride_h <= 4 && primc_cv_dwl_geometry(dw, oh, ow, lanes).band > 0;
}

#define PWL_PART_ROWS 14 /* output rows from which threads split every block by rows (see below) */

typedef struct then_dw_job {
  dw_job d;
  const primc_conv2d *pw;
  const float *x, *w1;
  const primc_conv_epi *e1;
  int64_t parts;  /* each block's output rows are cut into this many items */
  int part_major; /* items part by part: each thread on its own rows of every block */
} then_dw_job;

#if PRIMC_X86
__attribute__((target("avx512f"))) static void then_dw_range(void *ctx, int64_t b, int64_t e) {
  const then_dw_job *j = ctx;
  const primc_conv2d *pw = j->pw;
  const primc_conv_epi *e1 = j->e1;
  int64_t nblk = (pw->o + 15) / 16, blocks = pw->n * nblk, P = pw->h * pw->w, K = pw->c * pw->kh * pw->kw;
  float wt[PWL_MAX_K * 16] __attribute__((aligned(64)));
  for (int64_t it = b; it < e; it++) {
    int64_t blk = j->part_major ? it % blocks : it / j->parts, part = j->part_major ? it / blocks : it % j->parts;
    int64_t n = blk / nblk, c0 = blk % nblk * 16;
    int nch = (int)(pw->o - c0 < 16 ? pw->o - c0 : 16);
    float bias[16] = {0};
    for (int l = 0; l < nch && e1->bias; l++) bias[l] = e1->bias[(c0 + l) * e1->bias_stride];
    primc_cv_lanes_weights(j->w1 + c0 * K, K, nch, wt);
    dwl_src src = {.make = cv_is_pointwise(pw) ? pwl_row : cl_row, .x = j->x + n * pw->c * P, .hw = P, .w = pw->w,
                   .nch = nch, .first = pw, .k = K, .wt = wt,
                   .bias = _mm512_loadu_ps(bias), .lo = _mm512_set1_ps(e1->lo), .hi = _mm512_set1_ps(e1->hi),
                   .act = e1->act};
    primc_cv_dwl_item(&j->d, n, c0, nch, &src, j->d.oh * part / j->parts, j->d.oh * (part + 1) / j->parts);
  }
}

AVX2P static void then_dw_range8(void *ctx, int64_t b, int64_t e) {
  const then_dw_job *j = ctx;
  const primc_conv2d *pw = j->pw;
  const primc_conv_epi *e1 = j->e1;
  int64_t nblk = (pw->o + 7) / 8, blocks = pw->n * nblk, P = pw->h * pw->w, K = pw->c * pw->kh * pw->kw;
  float wt[PWL_MAX_K * 8] __attribute__((aligned(32)));
  float bias[8] __attribute__((aligned(32))), scale[8] __attribute__((aligned(32)));
  for (int64_t it = b; it < e; it++) {
    int64_t blk = j->part_major ? it % blocks : it / j->parts, part = j->part_major ? it / blocks : it % j->parts;
    int64_t n = blk / nblk, c0 = blk % nblk * 8;
    int nch = (int)(pw->o - c0 < 8 ? pw->o - c0 : 8);
    cv_lanes8_epi(e1, c0, nch, bias, scale);
    primc_cv_lanes8_weights(j->w1 + c0 * K, K, nch, wt);
    t8_src src = {.make = cv_is_pointwise(pw) ? pw8_row : cl8_row, .x = j->x + n * pw->c * P, .hw = P, .w = pw->w,
                  .first = pw, .k = K, .wt = wt, .bias = bias, .lo = e1->lo, .hi = e1->hi, .act = e1->act,
                  .scale = scale, .div = e1->rq_div, .zp = e1->rq_zp};
    primc_cv_dw8_item(&j->d, n, c0, nch, &src, j->d.oh * part / j->parts, j->d.oh * (part + 1) / j->parts);
  }
}
#endif

int primc_conv2d_then_dw_f32(const primc_conv2d *pw, const float *x, const float *w1, const primc_conv_epi *e1,
                             const primc_conv2d *dw, const float *w2, const primc_conv_epi *e2, float *y) {
  /* pair_can holds the ISA check: without AVX2 the caller runs the two convs by their own rows */
  if (!pair_can(pw, e1, dw) || !x || !w1 || !w2 || !y) return PRIMC_ERR_ARG;
  /* only the 8-lane code applies act RQ: elsewhere the two convs run by their rows */
  if (((e1 && e1->act == PRIMC_ACT_RQ) || (e2 && e2->act == PRIMC_ACT_RQ)) && !primc_conv_pair_requantizes())
    return PRIMC_ERR_ARG;
#if PRIMC_X86
  primc_conv_epi none = {.lo = -__builtin_inff(), .hi = __builtin_inff()};
  int64_t oh, ow;
  primc_conv2d_out_hw(dw, &oh, &ow);
  int64_t nx = pw->n * pw->c * pw->h * pw->w, ny = dw->n * dw->o * oh * ow;
  if (!e1) e1 = &none;
  if (!e2) e2 = &none;
  /* the sums go to y before the residual is added: a residual in y's place would be overwritten first */
  if (cv_overlaps(y, ny, x, nx) || (e2->res && cv_overlaps(y, ny, e2->res, ny))) return PRIMC_ERR_ARG;
  /* as many items as make whole rounds of the threads (9 blocks of 144 channels on 2 threads would be
   * 5 + 4): a block's row parts share their edge rows, remade by each. From PWL_PART_ROWS output rows
   * each thread takes one part of the rows of every block: it then reads the rows of x that the conv
   * before (a GEMM splitting pixels) made on its core, and writes the rows the GEMM after reads there.
   * By blocks every core reads all of x and writes rows the other core reads (bench/conv_rows.md). */
  int lanes = pair_lanes();
  int64_t blocks = dw->n * ((dw->c + lanes - 1) / lanes), t = primc_num_threads(), parts = 1;
  int part_major = t > 1 && oh >= PWL_PART_ROWS;
  if (part_major) {
    parts = t;
  } else {
    while (parts < t && parts < oh && blocks * parts % t) parts++;
    if (blocks * parts % t) parts = 1;
  }
  then_dw_job j = {{dw, NULL, w2, e2, y, y, oh, ow, lanes == 16 ? PRIMC_ISA_AVX512 : PRIMC_ISA_AVX2, 0}, pw, x, w1, e1,
                   parts, part_major};
  primc_parallel_for(blocks * parts, lanes == 16 ? then_dw_range : then_dw_range8, &j);
  return PRIMC_OK;
#else
  return PRIMC_ERR_ARG;
#endif
}

int primc_conv_pair_requantizes(void) { return pair_lanes() == 8; }

/* ---------------------------------------------------------------- the row */

int primc_cv_pair_fits(const primc_conv2d *p, const primc_conv2d *next) { return pair_can(p, NULL, next); }

int primc_cv_pair_run(const cv_call *c) {
  return primc_conv2d_then_dw_f32(c->p, c->x, c->w, c->e, c->next, c->w2, c->e2, c->y);
}
