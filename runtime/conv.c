/* runtime/conv.c: fp32 2-D convolution (NCHW, OIHW) on primc_sgemm: direct (taps read in place), transposed for small maps, im2col, direct depthwise. */
#include "runtime/primc_rt.h"
#include "runtime/avx512.h"

#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/*
 * One GEMM per (image, group): Y_g[Og][OH*OW] = W_g[Og][Cg*KH*KW] * X_col[Cg*KH*KW][OH*OW], with the
 * weights as A (packed into row strips at compile time when the caller can) and the epilogue (bias,
 * residual, activation) on each finished tile. X_col is never stored when it can be avoided: 1x1
 * convs read the image as B; "direct" convs read each tap's row of B in place from a padded copy of
 * the input (see below); small maps swap the operands so output channels fill the vector lanes; the
 * rest materialize im2col in the scratch or generate its rows while B is packed. Depthwise convs have
 * no reduction across channels worth a GEMM: direct loops, one output plane per work item.
 */

static int64_t conv_out(int64_t in, int64_t k, int64_t s, int64_t d, int64_t p0, int64_t p1) {
  int64_t span = d * (k - 1) + 1, room = in + p0 + p1 - span;
  return s > 0 && d > 0 && k > 0 && room >= 0 ? room / s + 1 : 0;
}

int primc_conv2d_out_hw(const primc_conv2d *p, int64_t *oh, int64_t *ow) {
  *oh = conv_out(p->h, p->kh, p->stride_h, p->dil_h, p->pad_t, p->pad_b);
  *ow = conv_out(p->w, p->kw, p->stride_w, p->dil_w, p->pad_l, p->pad_r);
  return *oh > 0 && *ow > 0;
}

static int conv_valid(const primc_conv2d *p) {
  int64_t oh, ow;
  return p->n >= 0 && p->c > 0 && p->o > 0 && p->groups > 0 && p->c % p->groups == 0 && p->o % p->groups == 0 &&
         p->pad_t >= 0 && p->pad_l >= 0 && p->pad_b >= 0 && p->pad_r >= 0 && primc_conv2d_out_hw(p, &oh, &ow);
}

/* ---------------------------------------------------------------- epilogue: bias, residual, clamp */

typedef struct epi_ctx {
  const float *bias; /* bias of GEMM row m at bias[m * bias_stride], already offset to the group */
  int64_t bias_stride;
  const float *res; /* residual with C's layout (ldc), already offset to the group */
  float *y;         /* where the result goes, C's layout; may be C itself */
  float lo, hi;
  int silu;
} epi_ctx;

static float clampf(float v, float lo, float hi) { return v < lo ? lo : v > hi ? hi : v; }

/* v * sigmoid(v) */
static float siluf(float v) { return v / (1.0f + expf(-v)); }

/* y[n] = clamp(act(c[n] + b + res[n])); NaN stays NaN */
static void epi_row_scalar(const epi_ctx *e, float *y, const float *c, const float *res, float b, int64_t nb) {
  for (int64_t n = 0; n < nb; n++) {
    float v = c[n] + b + (res ? res[n] : 0.0f);
    y[n] = clampf(e->silu ? siluf(v) : v, e->lo, e->hi);
  }
}

/* e^x to about 2e-7 relative: x = n ln2 + r, |r| <= ln2 / 2, a degree-6 polynomial for e^r, scaled by 2^n */
__attribute__((target("avx512f"))) static inline __m512 exp512(__m512 x) {
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-104.0f)), _mm512_set1_ps(89.0f));
  __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145752f), x); /* ln2 in two parts: exact n * hi */
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.42860677e-6f), r);
  __m512 p = _mm512_set1_ps(1.0f / 720);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

/* v * sigmoid(v) = v / (1 + e^-v); e^-v overflows to inf for v < -89, giving -0 as it should */
__attribute__((target("avx512f"))) static inline __m512 silu512(__m512 v) {
  return _mm512_div_ps(v, _mm512_add_ps(_mm512_set1_ps(1.0f), exp512(_mm512_sub_ps(_mm512_setzero_ps(), v))));
}

__attribute__((target("avx512f"))) static void epi_row512(const epi_ctx *e, float *y, const float *c, const float *res,
                                                          float b, int64_t nb) {
  __m512 vb = _mm512_set1_ps(b), lo = _mm512_set1_ps(e->lo), hi = _mm512_set1_ps(e->hi);
  int64_t n = 0;
  for (; n < nb; n += 16) {
    __mmask16 m = nb - n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (nb - n)) - 1);
    __m512 v = _mm512_add_ps(_mm512_maskz_loadu_ps(m, c + n), vb);
    if (res) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, res + n));
    if (e->silu) v = silu512(v);
    /* max/min return their second operand when one is NaN: v second keeps NaN */
    _mm512_mask_storeu_ps(y + n, m, _mm512_min_ps(hi, _mm512_max_ps(lo, v)));
  }
}

static int use_avx512(void) { return primc_sgemm_isa() == PRIMC_ISA_AVX512; }

static void epi_rows(void *ctx, float *C, int64_t ldc, int64_t m0, int64_t n0, int64_t mb, int64_t nb) {
  const epi_ctx *e = ctx;
  int vec = use_avx512();
  for (int64_t m = 0; m < mb; m++) {
    int64_t off = (m0 + m) * ldc + n0;
    float *row = C + m * ldc, *y = e->y + off, b = e->bias ? e->bias[(m0 + m) * e->bias_stride] : 0.0f;
    const float *res = e->res ? e->res + off : NULL;
    if (vec) epi_row512(e, y, row, res, b, nb);
    else epi_row_scalar(e, y, row, res, b, nb);
  }
}

static int epi_needed(const primc_conv_epi *e) {
  return e && (e->bias || e->res || e->silu || e->lo > -__builtin_inff() || e->hi < __builtin_inff());
}

/* ---------------------------------------------------------------- strided copies */

static __mmask16 low_mask(int64_t n) { return n >= 16 ? (__mmask16)0xffff : n <= 0 ? 0 : (__mmask16)((1u << n) - 1); }

/* dst[t] = src[2 t], t < n: 16 outputs from two loads and a permute instead of 16 scalar moves (stride-2
 * convs spend most of their im2col here); reads no element past src[2 n - 2] */
__attribute__((target("avx512f"))) static void copy_stride2_512(float *dst, const float *src, int64_t n) {
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  for (int64_t t = 0; t < n; t += 16, src += 32) {
    int64_t r = n - t, last = 2 * r - 1;
    __m512 a = _mm512_maskz_loadu_ps(low_mask(last), src), b = _mm512_maskz_loadu_ps(low_mask(last - 16), src + 16);
    _mm512_mask_storeu_ps(dst + t, low_mask(r), _mm512_permutex2var_ps(a, even, b));
  }
}

static void copy_strided(float *dst, const float *src, int64_t n, int64_t s) {
  if (s == 1) {
    memcpy(dst, src, (size_t)n * sizeof(float));
  } else if (s == 2 && n >= 8 && primc_sgemm_isa() == PRIMC_ISA_AVX512) {
    copy_stride2_512(dst, src, n);
  } else {
    for (int64_t t = 0; t < n; t++) dst[t] = src[t * s];
  }
}

/* ---------------------------------------------------------------- implicit im2col */

typedef struct col_src {
  const primc_conv2d *p;
  const float *x; /* the group's first input channel */
  int64_t oh, ow;
  int vec; /* AVX-512 rows (stride 1 or 2) */
} col_src;

/* row k = (c, i, j) of the column matrix, output positions [n0, n0 + nc) */
__attribute__((target("avx512f,bmi2"))) static void im2col_row512(float *dst, const float *src, int64_t ow, int64_t lo,
                                                                  int64_t hi, int64_t sw);

static void col_row(void *ctx, int64_t k, int64_t n0, int64_t nc, float *dst) {
  const col_src *s = ctx;
  const primc_conv2d *p = s->p;
  int64_t taps = p->kh * p->kw, c = k / taps, i = k % taps / p->kw, j = k % p->kw;
  const float *plane = s->x + c * p->h * p->w;
  int64_t y = n0 / s->ow, x = n0 % s->ow;
  int64_t off = j * p->dil_w - p->pad_l; /* input column of output column 0 */
  for (int64_t done = 0; done < nc; y++, x = 0) {
    int64_t run = s->ow - x < nc - done ? s->ow - x : nc - done;
    float *d = dst + done;
    int64_t ih = y * p->stride_h - p->pad_t + i * p->dil_h;
    done += run;
    if (ih < 0 || ih >= p->h) {
      memset(d, 0, (size_t)run * sizeof(float));
      continue;
    }
    const float *row = plane + ih * p->w;
    int64_t sw = p->stride_w;
    /* output columns x + t with 0 <= off + (x + t) * sw < w */
    int64_t lo = off + x * sw >= 0 ? 0 : (-(off + x * sw) + sw - 1) / sw;
    int64_t hi = off + x * sw > p->w - 1 ? 0 : (p->w - 1 - (off + x * sw)) / sw + 1;
    if (lo > run) lo = run;
    if (hi > run) hi = run;
    if (hi < lo) hi = lo;
    if (s->vec) { /* masked vector loads: no libc call per output row */
      im2col_row512(d, row + off + x * sw, run, lo, hi, sw);
      continue;
    }
    memset(d, 0, (size_t)lo * sizeof(float));
    if (hi > lo) {
      copy_strided(d + lo, row + off + (x + lo) * sw, hi - lo, sw);
    }
    memset(d + hi, 0, (size_t)(run - hi) * sizeof(float));
  }
}

/* ---------------------------------------------------------------- depthwise */

__attribute__((target("avx512f"))) static void axpy512(float *y, const float *x, float a, int64_t n) {
  __m512 va = _mm512_set1_ps(a);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, _mm512_fmadd_ps(va, _mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
  if (i < n) {
    __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(y + i, m, _mm512_fmadd_ps(va, _mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, y + i)));
  }
}

static void axpy_strided(float *y, const float *x, int64_t sx, float a, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] += a * x[i * sx];
}

typedef struct dw_job {
  const primc_conv2d *p;
  const float *x, *w;
  const primc_conv_epi *e;
  float *acc, *y; /* the sums go to acc, the epilogue's results to y (may be acc) */
  int64_t oh, ow;
  int vec;
} dw_job;

/* one output plane: for each output row, every tap adds a shifted input row */
static void dw_plane(const dw_job *j, int64_t plane) {
  const primc_conv2d *p = j->p;
  int64_t c = plane % p->c;
  const float *x = j->x + plane * p->h * p->w, *w = j->w + c * p->kh * p->kw;
  float *y = j->acc + plane * j->oh * j->ow, *out = j->y + plane * j->oh * j->ow;
  const float *res = j->e->res ? j->e->res + plane * j->oh * j->ow : NULL;
  float b = j->e->bias ? j->e->bias[c * j->e->bias_stride] : 0.0f;
  for (int64_t oy = 0; oy < j->oh; oy++) {
    float *yr = y + oy * j->ow;
    for (int64_t t = 0; t < j->ow; t++) yr[t] = 0.0f;
    for (int64_t i = 0; i < p->kh; i++) {
      int64_t ih = oy * p->stride_h - p->pad_t + i * p->dil_h;
      if (ih < 0 || ih >= p->h) continue;
      for (int64_t jx = 0; jx < p->kw; jx++) {
        int64_t off = jx * p->dil_w - p->pad_l, sw = p->stride_w;
        int64_t lo = off >= 0 ? 0 : (-off + sw - 1) / sw;
        int64_t hi = off > p->w - 1 ? 0 : (p->w - 1 - off) / sw + 1;
        if (hi > j->ow) hi = j->ow;
        if (hi <= lo) continue;
        const float *xr = x + ih * p->w + off + lo * sw;
        float wv = w[i * p->kw + jx];
        if (sw == 1 && j->vec)
          axpy512(yr + lo, xr, wv, hi - lo);
        else
          axpy_strided(yr + lo, xr, sw, wv, hi - lo);
      }
    }
    epi_ctx e = {.lo = j->e->lo, .hi = j->e->hi, .silu = j->e->silu};
    float *dst = out + oy * j->ow;
    if (j->vec) epi_row512(&e, dst, yr, res ? res + oy * j->ow : NULL, b, j->ow);
    else epi_row_scalar(&e, dst, yr, res ? res + oy * j->ow : NULL, b, j->ow);
  }
}

#define DW_MAX_KW 8

/* which loaded elements of a 64-column block lie inside the input row, per tap column jx and vector c
 * (a: elements 0..15 of a load, b: 16..31 for stride 2), which outputs exist (st), and where tap jx's
 * first load starts in a source row (col): the borders run the same vector code as the interior,
 * padding read as zeros */
typedef struct dw_masks {
  __mmask16 a[DW_MAX_KW][4], b[DW_MAX_KW][4], st[4];
  int64_t col[DW_MAX_KW];
} dw_masks;

/* lanes of a unit-stride load from column base of a row of width w, at most cnt of them */
static __mmask16 dw_lanes(int64_t base, int64_t cnt, int64_t w) {
  int64_t lim = cnt < w - base ? cnt : w - base;
  return (__mmask16)(low_mask(lim) & ~low_mask(-base));
}

static void dw_masks_make(const primc_conv2d *p, int64_t ox, int64_t n, dw_masks *m) {
  int64_t S = p->stride_w;
  for (int64_t jx = 0; jx < p->kw; jx++) m->col[jx] = ox * S - p->pad_l + jx * p->dil_w;
  for (int c = 0; c < 4; c++) {
    int64_t r = n - 16 * c, cnt = S == 1 ? r : 2 * r - 1; /* outputs left; elements they read */
    m->st[c] = low_mask(r);
    for (int64_t jx = 0; jx < p->kw; jx++) {
      int64_t base = m->col[jx] + 16 * c * S; /* input column of element 0 */
      m->a[jx][c] = dw_lanes(base, cnt, p->w);
      m->b[jx][c] = S == 1 ? 0 : dw_lanes(base + 16, cnt - 16, p->w);
    }
  }
}

/* Stride 2 reads every other column: each input row is first split into its even columns, then its
 * odd ones (a source row of 2 wp floats), so that tap jx, whose column 2 ox + d has the parity of d,
 * reads unit-stride from one half: one load per vector and tap instead of two loads and a permute. */
static void dw_masks_make_s2(const primc_conv2d *p, int64_t ox, int64_t n, int64_t wp, dw_masks *m) {
  int64_t we = (p->w + 1) / 2, wo = p->w / 2;
  for (int c = 0; c < 4; c++) m->st[c] = low_mask(n - 16 * c);
  for (int64_t jx = 0; jx < p->kw; jx++) {
    int64_t d = jx * p->dil_w - p->pad_l, odd = d & 1, off = (d - odd) / 2; /* column 2 (ox + off) + odd */
    m->col[jx] = ox + off + odd * wp;
    for (int c = 0; c < 4; c++) {
      m->a[jx][c] = dw_lanes(ox + off + 16 * c, n - 16 * c, odd ? wo : we);
      m->b[jx][c] = 0;
    }
  }
}

/* 16 inputs x[0], x[S], .. x[15 S] (S = 1 or 2) under masks: masked-off elements are never read */
__attribute__((target("avx512f"))) static inline __attribute__((always_inline)) __m512 dw_load(const float *x, const int S,
                                                                                               __mmask16 ma, __mmask16 mb) {
  if (S == 1) return _mm512_maskz_loadu_ps(ma, x);
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  return _mm512_permutex2var_ps(_mm512_maskz_loadu_ps(ma, x), even, _mm512_maskz_loadu_ps(mb, x + 16));
}

/* what a depthwise row block writes: the sums, or (fused) clamp(sum + bias + res) */
typedef struct dw_out {
  float *dst;
  const float *res;
  float b, lo, hi;
  int fused, silu;
} dw_out;

__attribute__((target("avx512f"))) static inline __attribute__((always_inline)) void dw_store(const dw_out *o, int c,
                                                                                              __mmask16 m, __m512 v) {
  if (o->fused) {
    v = _mm512_add_ps(v, _mm512_set1_ps(o->b));
    if (o->res) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, o->res + 16 * c));
    if (o->silu) v = silu512(v);
    v = _mm512_min_ps(_mm512_set1_ps(o->hi), _mm512_max_ps(_mm512_set1_ps(o->lo), v)); /* NaN stays */
  }
  _mm512_mask_storeu_ps(o->dst + 16 * c, m, v);
}

/* rows of zeros that taps above or below the input read instead of branching per row: only lanes whose
 * column exists are loaded, so DW_ZERO_ROW floats serve any input up to that width */
#define DW_ZERO_ROW 4096
#define DW_SPLIT_FLOATS 32768 /* stride 2: a plane split into even and odd columns, on the stack */
static const float dw_zero_row[DW_ZERO_ROW] __attribute__((aligned(64)));

/* outputs [ox, ox + 16 CH) (those in m->st) of R rows from oy, R * CH <= 8 vectors side by side in
 * registers so the FMAs of a tap do not wait on each other (one vector alone is a latency-bound chain,
 * and narrow planes, 7 or 14 columns, have one vector per row) */
__attribute__((target("avx512f"))) static inline __attribute__((always_inline)) void
dw_rows512(const primc_conv2d *p, const float *x, int64_t pitch, const float *w, int64_t oy, const dw_masks *m,
           const dw_out *o, int64_t ow, const int CH, const int R, const int S) {
  __m512 a[8];
#pragma GCC unroll 8
  for (int k = 0; k < R * CH; k++) a[k] = _mm512_setzero_ps();
  for (int64_t i = 0; i < p->kh; i++) {
    const float *xr[8];
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) {
      int64_t ih = (oy + r) * p->stride_h - p->pad_t + i * p->dil_h;
      xr[r] = ih >= 0 && ih < p->h ? x + ih * pitch : dw_zero_row;
    }
    for (int64_t jx = 0; jx < p->kw; jx++) {
      __m512 wv = _mm512_set1_ps(w[i * p->kw + jx]);
      int64_t dx = m->col[jx];
#pragma GCC unroll 8
      for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int c = 0; c < CH; c++)
          a[r * CH + c] =
              _mm512_fmadd_ps(wv, dw_load(xr[r] + dx + 16 * c * S, S, m->a[jx][c], m->b[jx][c]), a[r * CH + c]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; r++) {
    dw_out q = *o;
    q.dst += r * ow;
    if (q.res) q.res += r * ow;
#pragma GCC unroll 4
    for (int c = 0; c < CH; c++) dw_store(&q, c, m->st[c], a[r * CH + c]);
  }
}

/* rows (<= 8 / CH) rows from oy, CH = the vectors n columns need */
__attribute__((target("avx512f"))) static void dw_block512(const primc_conv2d *p, const float *x, int64_t pitch,
                                                           int S, const float *w, int64_t oy, int64_t n, int rows,
                                                           const dw_masks *m, const dw_out *o, int64_t ow) {
  int k = (n > 32 ? 4 : n > 16 ? 2 : 1) * 16 + rows * 2 + (S == 2);
  switch (k) {
#define DW_CASE(CH, R)                                                                      \
  case CH * 16 + R * 2: dw_rows512(p, x, pitch, w, oy, m, o, ow, CH, R, 1); break;     \
  case CH * 16 + R * 2 + 1: dw_rows512(p, x, pitch, w, oy, m, o, ow, CH, R, 2); break;
    DW_CASE(1, 1) DW_CASE(1, 2) DW_CASE(1, 3) DW_CASE(1, 4) DW_CASE(1, 5) DW_CASE(1, 6) DW_CASE(1, 7) DW_CASE(1, 8)
    DW_CASE(2, 1) DW_CASE(2, 2) DW_CASE(2, 3) DW_CASE(2, 4)
    DW_CASE(4, 1) DW_CASE(4, 2)
#undef DW_CASE
    default: break;
  }
}

/* stride 1 or 2, kw <= DW_MAX_KW: 64-column blocks, each with its masks made once for all rows; the
 * epilogue is applied in registers unless the sums must go to a separate buffer first */
__attribute__((target("avx512f"))) static void dw_plane512(const dw_job *j, int64_t plane, const dw_masks *ms,
                                                           float *split, int64_t wp) {
  const primc_conv2d *p = j->p;
  int64_t c = plane % p->c, ow = j->ow, pitch = p->w;
  const float *x = j->x + plane * p->h * p->w, *w = j->w + c * p->kh * p->kw;
  int S = (int)p->stride_w;
  if (split) { /* stride 2: even columns, then odd ones, per row */
    for (int64_t r = 0; r < p->h; r++) {
      copy_stride2_512(split + r * 2 * wp, x + r * p->w, (p->w + 1) / 2);
      copy_stride2_512(split + r * 2 * wp + wp, x + r * p->w + 1, p->w / 2);
    }
    x = split, pitch = 2 * wp, S = 1;
  }
  float *acc = j->acc + plane * j->oh * ow, *out = j->y + plane * j->oh * ow;
  const float *res = j->e->res ? j->e->res + plane * j->oh * ow : NULL;
  float b = j->e->bias ? j->e->bias[c * j->e->bias_stride] : 0.0f;
  int fused = acc == out;
  for (int64_t ox = 0; ox < ow; ox += 64) {
    int64_t n = ow - ox < 64 ? ow - ox : 64;
    const dw_masks *m = &ms[ox / 64];
    int64_t rmax = n > 32 ? 2 : n > 16 ? 4 : 8;
    for (int64_t oy = 0; oy < j->oh; oy += rmax) {
      int rows = (int)(j->oh - oy < rmax ? j->oh - oy : rmax);
      dw_out o = {acc + oy * ow + ox, res ? res + oy * ow + ox : NULL, b, j->e->lo, j->e->hi, fused, j->e->silu};
      dw_block512(p, x, pitch, S, w, oy, n, rows, m, &o, ow);
    }
  }
  epi_ctx e = {.lo = j->e->lo, .hi = j->e->hi, .silu = j->e->silu};
  for (int64_t oy = 0; !fused && oy < j->oh; oy++)
    epi_row512(&e, out + oy * ow, acc + oy * ow, res ? res + oy * ow : NULL, b, ow);
}

/* Stride 1 with ow == w: output element p = oy*w + ox reads input p + (i dil_h - pad_t) w + (j dil_w - pad_l),
 * so a plane is one flat row of vectors, none wasted at row ends (a 7x7 plane is 4 vectors, not 7 rows of
 * 16 lanes each), and blocks of vectors give independent FMA chains. A lane is read when its input row and
 * column exist: those masks depend on the vector and tap only, so they are made once per chunk of vectors
 * and serve every plane of the range. */
#define DW_FLAT_MASKS 2048
#define DW_FLAT_TAPS 64

typedef struct dw_flat {
  const dw_job *j;
  int64_t off[DW_FLAT_TAPS];     /* input offset of each tap */
  __mmask16 m[DW_FLAT_MASKS];    /* [vector - v0][tap] */
  int64_t v0, nv, taps, nvalid; /* nvalid: output elements of a plane */
} dw_flat;

static int dw_flat_ok(const primc_conv2d *p, int64_t ow) {
  int64_t lim = 1 << 24; /* the masks compute rows and columns in 32-bit lanes */
  return p->stride_h == 1 && p->stride_w == 1 && ow == p->w && p->kh * p->kw <= DW_FLAT_TAPS && p->h < lim &&
         p->w < lim && p->pad_t < lim && p->pad_l < lim && p->kh * p->dil_h < lim && p->kw * p->dil_w < lim;
}

/* bit l of row[i] / col[jx]: lane l of vector v reads an existing input row / column at that tap
 * (lanes' output rows and columns in vectors, one division per vector: this runs for every vector of
 * a plane once per conv, as much work as the conv itself when it has few channels) */
__attribute__((target("avx512f"))) static void dw_flat_masks(const primc_conv2d *p, dw_flat *f) {
  const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  const __m512i W = _mm512_set1_epi32((int)p->w), one = _mm512_set1_epi32(1);
  for (int64_t v = 0; v < f->nv; v++) {
    int64_t q = (f->v0 + v) * 16;
    __m512i ox = _mm512_add_epi32(_mm512_set1_epi32((int)(q % p->w)), lane), oy = _mm512_set1_epi32((int)(q / p->w));
    for (__mmask16 wrap = _mm512_cmpge_epi32_mask(ox, W); wrap; wrap = _mm512_cmpge_epi32_mask(ox, W)) {
      ox = _mm512_mask_sub_epi32(ox, wrap, ox, W);
      oy = _mm512_mask_add_epi32(oy, wrap, oy, one);
    }
    __mmask16 row[DW_FLAT_TAPS], col[DW_FLAT_TAPS];
    for (int64_t i = 0; i < p->kh; i++) {
      int d = (int)(i * p->dil_h - p->pad_t); /* rows oy + d in [0, h) */
      row[i] = _mm512_cmpge_epi32_mask(oy, _mm512_set1_epi32(-d)) & _mm512_cmplt_epi32_mask(oy, _mm512_set1_epi32((int)p->h - d));
    }
    for (int64_t jx = 0; jx < p->kw; jx++) {
      int d = (int)(jx * p->dil_w - p->pad_l);
      col[jx] = _mm512_cmpge_epi32_mask(ox, _mm512_set1_epi32(-d)) & _mm512_cmplt_epi32_mask(ox, _mm512_set1_epi32((int)p->w - d));
    }
    for (int64_t i = 0; i < p->kh; i++)
      for (int64_t jx = 0; jx < p->kw; jx++) f->m[v * f->taps + i * p->kw + jx] = row[i] & col[jx];
  }
}

/* NV vectors from v (relative to the chunk) of one plane, NV accumulators in registers */
__attribute__((target("avx512f"))) static inline __attribute__((always_inline)) void
dw_flat_block(const dw_flat *f, const float *x, const float *w, int64_t v, const dw_out *o, const int NV) {
  __m512 a[8];
#pragma GCC unroll 8
  for (int b = 0; b < NV; b++) a[b] = _mm512_setzero_ps();
  const float *xv = x + (f->v0 + v) * 16;
  const __mmask16 *m = f->m + v * f->taps;
  for (int64_t t = 0; t < f->taps; t++) {
    __m512 wv = _mm512_set1_ps(w[t]);
    const float *src = xv + f->off[t];
#pragma GCC unroll 8
    for (int b = 0; b < NV; b++) a[b] = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(m[b * f->taps + t], src + 16 * b), a[b]);
  }
#pragma GCC unroll 8
  for (int b = 0; b < NV; b++) dw_store(o, b, low_mask(f->nvalid - (f->v0 + v + b) * 16), a[b]);
}

__attribute__((target("avx512f"))) static void dw_flat_plane(const dw_flat *f, int64_t plane) {
  const dw_job *j = f->j;
  const primc_conv2d *p = j->p;
  int64_t c = plane % p->c, np = f->nvalid;
  const float *x = j->x + plane * p->h * p->w, *w = j->w + c * f->taps;
  float *acc = j->acc + plane * np, *out = j->y + plane * np;
  const float *res = j->e->res ? j->e->res + plane * np : NULL;
  float b = j->e->bias ? j->e->bias[c * j->e->bias_stride] : 0.0f;
  int fused = acc == out;
  for (int64_t v = 0; v < f->nv;) {
    int64_t e0 = (f->v0 + v) * 16;
    dw_out o = {acc + e0, res ? res + e0 : NULL, b, j->e->lo, j->e->hi, fused, j->e->silu};
    int64_t left = f->nv - v;
    if (left >= 8) dw_flat_block(f, x, w, v, &o, 8), v += 8;
    else if (left >= 4) dw_flat_block(f, x, w, v, &o, 4), v += 4;
    else if (left >= 2) dw_flat_block(f, x, w, v, &o, 2), v += 2;
    else dw_flat_block(f, x, w, v, &o, 1), v += 1;
  }
}

__attribute__((target("avx512f"))) static void dw_flat_range(const dw_job *j, int64_t b, int64_t e) {
  const primc_conv2d *p = j->p;
  dw_flat f;
  f.j = j;
  f.taps = p->kh * p->kw;
  f.nvalid = j->oh * j->ow;
  for (int64_t i = 0; i < p->kh; i++)
    for (int64_t jx = 0; jx < p->kw; jx++)
      f.off[i * p->kw + jx] = (i * p->dil_h - p->pad_t) * p->w + jx * p->dil_w - p->pad_l;
  int64_t nvec = (f.nvalid + 15) / 16, chunk = DW_FLAT_MASKS / f.taps;
  for (f.v0 = 0; f.v0 < nvec; f.v0 += chunk) {
    f.nv = nvec - f.v0 < chunk ? nvec - f.v0 : chunk;
    dw_flat_masks(p, &f);
    for (int64_t i = b; i < e; i++) dw_flat_plane(&f, i);
  }
  if (j->acc == j->y) return;
  epi_ctx ec = {.lo = j->e->lo, .hi = j->e->hi, .silu = j->e->silu};
  for (int64_t i = b; i < e; i++) {
    int64_t c = i % p->c, off = i * f.nvalid;
    float bias = j->e->bias ? j->e->bias[c * j->e->bias_stride] : 0.0f;
    epi_row512(&ec, j->y + off, j->acc + off, j->e->res ? j->e->res + off : NULL, bias, f.nvalid);
  }
}

/* Depthwise convs with 16 channels in the vector lanes, for planes whose rows fill vectors poorly: a
 * 7-wide output row fills 7 of 16 lanes, and at stride 2 each of its taps costs two loads and a
 * permute. A band of 16 channels' input rows is transposed into a zero-bordered [row][col][16] tile;
 * each output pixel is then one full-width FMA per tap, with no masks and at any stride; the
 * [pixel][16] sums are transposed back. The transposes are 16x16 in registers. */
#define DWL_TILE_FLOATS 16384 /* a band's input tile, on the stack (64 KiB) */
#define DWL_OUT_FLOATS 4096   /* its sums: 256 pixels x 16 channels */
#define DWL_MAX_TAPS 49

typedef struct dwl_geo {
  int64_t pw;   /* tile columns: padded input columns the outputs read */
  int64_t band; /* output rows per band */
  int64_t taps;
} dwl_geo;

/* the band: the most output rows, up to oh, whose tile rows ((band - 1) stride_h + reach of them) and
 * sums fit their buffers; 0 when not even one row's do */
static dwl_geo dwl_geometry(const primc_conv2d *p, int64_t oh, int64_t ow) {
  dwl_geo g = {(ow - 1) * p->stride_w + (p->kw - 1) * p->dil_w + 1, 0, p->kh * p->kw};
  int64_t reach = (p->kh - 1) * p->dil_h + 1, tile_rows = DWL_TILE_FLOATS / (g.pw * 16);
  if (tile_rows < reach) return g;
  int64_t band = (tile_rows - reach) / p->stride_h + 1, out_rows = DWL_OUT_FLOATS / (ow * 16);
  g.band = band < out_rows ? band : out_rows;
  if (g.band > oh) g.band = oh;
  return g;
}

/* Where a band's tile rows come from: the input planes, transposed (dwl_plain_row), or made by the
 * first conv of a fused pair from its own input (pwl_row for a 1x1, cl_row for any other,
 * primc_conv2d_then_dw_f32). make writes input row ih's columns [0, n) of the source's 16 channels
 * at dst[column][16]. */
typedef struct dwl_src {
  void (*make)(const struct dwl_src *s, int64_t ih, int64_t n, float *dst);
  const float *x; /* the 16 channels' planes (plain), or all of the first conv's input planes */
  int64_t hw, w;  /* plane size and row width of x */
  int nch;
  /* the first conv (k taps x input channels), weights [k][16], its epilogue in lanes */
  const primc_conv2d *first;
  int64_t k;
  const float *wt;
  __m512 bias, lo, hi;
  int silu;
} dwl_src;

__attribute__((target("avx512f"))) static void dwl_plain_row(const dwl_src *s, int64_t ih, int64_t n, float *dst) {
  for (int64_t q = 0; q < n; q += 16)
    primc_tr16_part(s->x + ih * s->w + q, s->hw, s->nch, (int)(n - q < 16 ? n - q : 16), dst + q * 16, 16);
}

/* tile rows [r0, rows) of the band from input row (oy0 stride_h - pad_t) on: zeros outside the input */
__attribute__((target("avx512f"))) static void dwl_fill(const primc_conv2d *p, const dwl_src *src, int64_t oy0,
                                                        int64_t r0, int64_t rows, int64_t pw, float *tile) {
  int64_t in_end = p->pad_l + p->w < pw ? p->pad_l + p->w : pw;
  for (int64_t r = r0; r < rows; r++) {
    int64_t ih = oy0 * p->stride_h - p->pad_t + r;
    float *t = tile + r * pw * 16;
    if (ih < 0 || ih >= p->h || in_end <= p->pad_l) {
      memset(t, 0, (size_t)(pw * 16) * sizeof(float));
      continue;
    }
    memset(t, 0, (size_t)(p->pad_l * 16) * sizeof(float));
    if (in_end < pw) memset(t + in_end * 16, 0, (size_t)((pw - in_end) * 16) * sizeof(float));
    src->make(src, ih, in_end - p->pad_l, t + p->pad_l * 16);
  }
}

typedef struct dwl_ctx {
  const primc_conv2d *p;
  const float *wt;   /* [tap][16] */
  __m512 b, lo, hi;  /* the epilogue in lanes */
  int64_t pw, ow;
  int lanes_epi, silu;
} dwl_ctx;

/* NB sums of a[] to out[pixel][16], through the epilogue when it runs in the lanes */
__attribute__((target("avx512f"))) static inline __attribute__((always_inline)) void
dwl_out(const dwl_ctx *d, const __m512 *a, float *out, const int NB) {
#pragma GCC unroll 8
  for (int b = 0; b < NB; b++) {
    __m512 v = a[b];
    if (d->lanes_epi) {
      v = _mm512_add_ps(v, d->b);
      if (d->silu) v = silu512(v);
      v = _mm512_min_ps(d->hi, _mm512_max_ps(d->lo, v));
    }
    _mm512_storeu_ps(out + b * 16, v);
  }
}

/* NB output pixels from (oy, ox) of the band (oy relative to its first row) into out[pixel][16] */
__attribute__((target("avx512f"))) static inline __attribute__((always_inline)) void
dwl_pixels(const dwl_ctx *d, const float *tile, int64_t oy, int64_t ox, float *out, const int NB) {
  const primc_conv2d *p = d->p;
  __m512 a[8];
#pragma GCC unroll 8
  for (int b = 0; b < NB; b++) a[b] = _mm512_setzero_ps();
  for (int64_t i = 0; i < p->kh; i++) {
    const float *row = tile + ((oy * p->stride_h + i * p->dil_h) * d->pw + ox * p->stride_w) * 16;
    for (int64_t jx = 0; jx < p->kw; jx++) {
      __m512 wv = _mm512_loadu_ps(d->wt + (i * p->kw + jx) * 16);
      const float *src = row + jx * p->dil_w * 16;
#pragma GCC unroll 8
      for (int b = 0; b < NB; b++) a[b] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(src + b * p->stride_w * 16), a[b]);
    }
  }
  dwl_out(d, a, out, NB);
}

/* the kernels dwl_band_cols runs: 3 or 5 taps across, dilation 1 across, stride 1 or 2 across */
static int dwl_cols_ok(const primc_conv2d *p) {
  return (p->kw == 3 || p->kw == 5) && p->dil_w == 1 && (p->stride_w == 1 || p->stride_w == 2);
}

/* Stride S across, dilation 1, KW taps across: each input column of a tile row is loaded once for the
 * outputs that read it (10 loads for 8 stride-1 outputs of a 3x3 row, where dwl_pixels loads 24).
 * With HOIST (3x3, the same stride down) all 9 weights stay in registers for the band, else a row's
 * KW (up to 5) for the row. Each output still sums its taps row by row, left to right: the same
 * result. Zen 5, 1 thread, the conv as a one-node model: 16->96 at 112x112 then 3x3/2 fused 0.295 ->
 * 0.282 ms, 24->144 at 56x56 then 3x3/1 0.207 -> 0.176, 24->144 then 3x3/2 0.143 -> 0.134,
 * 144x56x56 5x5/2 0.090 -> 0.070, 672x14x14 5x5/2 0.038 -> 0.031, 576x14x14 3x3/2 0.019 -> 0.015;
 * loading the 3x3 weights per row gave back half of the 3x3 gain. */
__attribute__((target("avx512f"))) static inline __attribute__((always_inline)) void
dwl_pixels_cols(const dwl_ctx *d, const __m512 *w9, const float *tile, int64_t oy, int64_t ox, float *out,
                const int NB, const int S, const int KW, const int HOIST) {
  const primc_conv2d *p = d->p;
  __m512 a[8], wr[5];
#pragma GCC unroll 8
  for (int b = 0; b < NB; b++) a[b] = _mm512_setzero_ps();
  const int64_t kh = HOIST ? 3 : p->kh;
#pragma GCC unroll 3
  for (int64_t i = 0; i < kh; i++) {
    int64_t ty = HOIST ? oy * S + i : oy * p->stride_h + i * p->dil_h;
    const float *row = tile + (ty * d->pw + ox * S) * 16;
    const __m512 *w = HOIST ? w9 + i * 3 : wr;
#pragma GCC unroll 5
    for (int jx = 0; jx < KW && !HOIST; jx++) wr[jx] = _mm512_loadu_ps(d->wt + (i * KW + jx) * 16);
#pragma GCC unroll 19
    for (int c = 0; c < (NB - 1) * S + KW; c++) {
      __m512 v = _mm512_loadu_ps(row + c * 16);
#pragma GCC unroll 5
      for (int jx = 0; jx < KW; jx++) {
        int b = c - jx;
        if (b >= 0 && b % S == 0 && b / S < NB) a[b / S] = _mm512_fmadd_ps(w[jx], v, a[b / S]);
      }
    }
  }
  dwl_out(d, a, out, NB);
}

/* NB outputs from (oy, ox): through dwl_pixels_cols for a KW-wide kernel, dwl_pixels for KW = 0 (any) */
__attribute__((target("avx512f"))) static inline __attribute__((always_inline)) void
dwl_block(const dwl_ctx *d, const __m512 *w9, const float *tile, int64_t oy, int64_t ox, float *out, const int NB,
          const int S, const int KW, const int HOIST) {
  if (KW) dwl_pixels_cols(d, w9, tile, oy, ox, out, NB, S, KW, HOIST);
  else dwl_pixels(d, tile, oy, ox, out, NB);
}

/* the band's output rows in blocks of 8, 4 and 1 pixels */
__attribute__((target("avx512f"))) static inline __attribute__((always_inline)) void
dwl_band_of(const dwl_ctx *d, const float *tile, int64_t rows, float *out, const int S, const int KW,
            const int HOIST) {
  __m512 w9[9];
#pragma GCC unroll 9
  for (int t = 0; t < 9 && HOIST; t++) w9[t] = _mm512_loadu_ps(d->wt + t * 16);
  for (int64_t oy = 0; oy < rows; oy++) {
    float *o = out + oy * d->ow * 16;
    int64_t ox = 0;
    for (; ox + 8 <= d->ow; ox += 8) dwl_block(d, w9, tile, oy, ox, o + ox * 16, 8, S, KW, HOIST);
    if (d->ow - ox >= 4) dwl_block(d, w9, tile, oy, ox, o + ox * 16, 4, S, KW, HOIST), ox += 4;
    for (; ox < d->ow; ox++) dwl_block(d, w9, tile, oy, ox, o + ox * 16, 1, S, KW, HOIST);
  }
}

__attribute__((target("avx512f"))) static void dwl_band(const dwl_ctx *d, const float *tile, int64_t rows, float *out) {
  const primc_conv2d *p = d->p;
  int s = (int)p->stride_w, k3 = p->kw == 3, hoist = k3 && p->kh == 3 && p->dil_h == 1 && p->stride_h == s;
  if (!dwl_cols_ok(p)) dwl_band_of(d, tile, rows, out, 0, 0, 0);
  else if (hoist) s == 1 ? dwl_band_of(d, tile, rows, out, 1, 3, 1) : dwl_band_of(d, tile, rows, out, 2, 3, 1);
  else if (k3) s == 1 ? dwl_band_of(d, tile, rows, out, 1, 3, 0) : dwl_band_of(d, tile, rows, out, 2, 3, 0);
  else s == 1 ? dwl_band_of(d, tile, rows, out, 1, 5, 0) : dwl_band_of(d, tile, rows, out, 2, 5, 0);
}

/* the depthwise conv of 16 channels [c0, c0 + nch) of image n, output rows [oy_b, oy_e), their input
 * rows made by src */
__attribute__((target("avx512f"))) static void dwl_item(const dw_job *j, int64_t n, int64_t c0, int nch,
                                                        const dwl_src *src, int64_t oy_b, int64_t oy_e) {
  const primc_conv2d *p = j->p;
  const primc_conv_epi *ep = j->e;
  dwl_geo g = dwl_geometry(p, j->oh, j->ow);
  int64_t P = j->oh * j->ow, reach = (p->kh - 1) * p->dil_h + 1;
  float tile[DWL_TILE_FLOATS] __attribute__((aligned(64)));
  float out[DWL_OUT_FLOATS] __attribute__((aligned(64)));
  float wt[DWL_MAX_TAPS * 16] __attribute__((aligned(64)));
  float bias[16] = {0};
  for (int l = 0; l < 16; l++) {
    if (l < nch && ep->bias) bias[l] = ep->bias[(c0 + l) * ep->bias_stride];
    for (int64_t t = 0; t < g.taps; t++) wt[t * 16 + l] = l < nch ? j->w[(c0 + l) * g.taps + t] : 0.0f;
  }
  /* the epilogue runs in the lanes unless it needs the residual, which is laid out per plane */
  int lanes_epi = j->acc == j->y && !ep->res;
  dwl_ctx d = {p, wt, _mm512_loadu_ps(bias), _mm512_set1_ps(ep->lo), _mm512_set1_ps(ep->hi), g.pw, j->ow,
               lanes_epi, ep->silu};
  float *acc = j->acc + (n * p->c + c0) * P;
  int64_t have0 = 0, have = 0; /* the tile holds input rows [have0, have0 + have) */
  for (int64_t oy0 = oy_b; oy0 < oy_e; oy0 += g.band) {
    int64_t rows = oy_e - oy0 < g.band ? oy_e - oy0 : g.band, need = (rows - 1) * p->stride_h + reach;
    int64_t ih0 = oy0 * p->stride_h - p->pad_t, keep = 0;
    /* rows the last band read too (a 3x3/2 band's first row is the last one's last) move up, not remade */
    if (have > 0 && ih0 >= have0 && ih0 < have0 + have) {
      keep = have0 + have - ih0 < need ? have0 + have - ih0 : need;
      memmove(tile, tile + (ih0 - have0) * g.pw * 16, (size_t)(keep * g.pw * 16) * sizeof(float));
    }
    dwl_fill(p, src, oy0, keep, need, g.pw, tile);
    have0 = ih0, have = need;
    dwl_band(&d, tile, rows, out);
    for (int64_t q = 0; q < rows * j->ow; q += 16) {
      int px = (int)(rows * j->ow - q < 16 ? rows * j->ow - q : 16);
      primc_tr16_part(out + q * 16, 16, px, nch, acc + oy0 * j->ow + q, P);
    }
  }
  if (lanes_epi) return;
  epi_ctx ec = {.lo = ep->lo, .hi = ep->hi, .silu = ep->silu};
  for (int l = 0; l < nch; l++) {
    int64_t off = (n * p->c + c0 + l) * P + oy_b * j->ow;
    epi_row512(&ec, j->y + off, j->acc + off, ep->res ? ep->res + off : NULL, bias[l], (oy_e - oy_b) * j->ow);
  }
}

/* dwl_range's items: (image, block of 16 channels) */
static int64_t dwl_items(const primc_conv2d *p) { return p->n * ((p->c + 15) / 16); }

/* items (image, block of 16 channels) [b, e) of the dw_job in ctx */
__attribute__((target("avx512f"))) static void dwl_range(void *ctx, int64_t b, int64_t e) {
  const dw_job *j = ctx;
  const primc_conv2d *p = j->p;
  int64_t nblk = (p->c + 15) / 16;
  for (int64_t it = b; it < e; it++) {
    int64_t n = it / nblk, c0 = it % nblk * 16;
    dwl_src src = {.make = dwl_plain_row, .x = j->x + (n * p->c + c0) * p->h * p->w, .hw = p->h * p->w, .w = p->w,
                   .nch = (int)(p->c - c0 < 16 ? p->c - c0 : 16)};
    dwl_item(j, n, c0, src.nch, &src, 0, j->oh);
  }
}

/* Channels in lanes. With the band loading each tile column once (dwl_band_cols) it beats the row
 * loop at any width, stride 1 too, given a full vector of channels and a block per thread, except
 * 3x3/1 on 7x7 planes, which the row loop runs as one flat row (Zen 5, 1 thread, in the model:
 * MobileNetV2 384x14x14 3x3 29 -> 19 us, 576x14x14 44 -> 30, 960x7x7 24 -> 27 (so not taken);
 * EfficientNet-B0 480x14x14 5x5 142 -> 95, 1152x7x7 5x5 76 -> 68; alone: 192x28x28 3x3 56 -> 33,
 * 144x56x56 164 -> 95, 32x112x112 149 -> 89, 3x3/2: 96x112x112 236 -> 158, 32x224x224 338 -> 229).
 * Other kernels take it for stride-2 outputs up to 32 wide, where it wins even with its two
 * transposes (MobileNetV2 576x14x14 3x3: 61 -> 27 us before the column sharing); wider stride-2
 * outputs, where rows fill the vectors, differed by CPU: on a Xeon with two zmm FMA pipes the rows
 * won (96x112x112 3x3: 270 -> 344 us in lanes, before the column sharing), on Zen 4, whose row loop
 * is bound by its masked loads and permutes, the lanes won up to 64 wide given a full vector of
 * channels (292 -> 231 us) */
static int dwl_fits(const primc_conv2d *p, int64_t oh, int64_t ow) {
  if (p->kh * p->kw > DWL_MAX_TAPS || p->stride_h > 4 || dwl_geometry(p, oh, ow).band <= 0) return 0;
  int wide = ow >= 8 || p->stride_w == 2 || p->kw == 5; /* a 7-wide 3x3/1 plane is one flat row loop */
  if (dwl_cols_ok(p) && wide && p->c >= 16 && dwl_items(p) >= primc_num_threads()) return 1;
  int64_t max_ow = primc_cpu_zmm_fmas() == 1 && p->c >= 16 ? 64 : 32;
  return p->stride_w == 2 && ow <= max_ow;
}

static void dw_range(void *ctx, int64_t b, int64_t e) {
  const dw_job *j = ctx;
  if (j->vec && dw_flat_ok(j->p, j->ow)) {
    dw_flat_range(j, b, e);
    return;
  }
  const primc_conv2d *p = j->p;
  if (!(j->vec && (p->stride_w == 1 || p->stride_w == 2) && p->kw <= DW_MAX_KW && p->w <= DW_ZERO_ROW &&
        j->ow <= DW_ZERO_ROW)) {
    for (int64_t i = b; i < e; i++) dw_plane(j, i);
    return;
  }
  /* the masks of each 64-column block are the same for every plane: made once here (a 14x14 plane
   * has only 7 rows of work to spread their cost over) */
  dw_masks ms[DW_ZERO_ROW / 64];
  int64_t wp = ((p->w + 1) / 2 + 15) / 16 * 16;
  float split[DW_SPLIT_FLOATS] __attribute__((aligned(64)));
  /* splitting costs a pass over the plane (whose stores the loads then wait on): it pays from 5 taps a
   * row (144x56x56 5x5: 260 -> 204 us), not with 3 (576x14x14 3x3: 62 -> 92 us) */
  int s2 = p->stride_w == 2 && p->kw >= 5 && p->h * 2 * wp <= DW_SPLIT_FLOATS;
  for (int64_t ox = 0; ox < j->ow; ox += 64) {
    int64_t n = j->ow - ox < 64 ? j->ow - ox : 64;
    if (s2) dw_masks_make_s2(p, ox, n, wp, &ms[ox / 64]);
    else dw_masks_make(p, ox, n, &ms[ox / 64]);
  }
  for (int64_t i = b; i < e; i++) dw_plane512(j, i, ms, s2 ? split : NULL, wp);
}

static int is_depthwise(const primc_conv2d *p) { return p->groups == p->c && p->o == p->c; }

static int is_pointwise(const primc_conv2d *p) {
  return p->kh == 1 && p->kw == 1 && p->stride_h == 1 && p->stride_w == 1 && !p->pad_t && !p->pad_l && !p->pad_b &&
         !p->pad_r;
}

/* ---------------------------------------------------------------- explicit im2col */

/* Below this output width the rows primc_sgemm_gen_b asks for are too short: the per-row setup of
 * col_row (divisions, three libc calls per output row) costs more than the copies, so a conv with a
 * col buffer materializes the column matrix once with plain loops and runs an ordinary GEMM on it. */
#define IM2COL_MAX_OW 24
/* ... and convs with few output channels whose column matrix fits in L2: primc_sgemm then reads it in
 * place without packing (resnet_tiny's 7x7/2 stem, 16 channels: 36 -> 48 GFLOP/s) */
#define IM2COL_DIRECT_M 28
#define IM2COL_DIRECT_BYTES (1 << 20)

static int explicit_im2col(int64_t ow, int64_t og, int64_t kk, int64_t P) {
  return ow < IM2COL_MAX_OW || (og <= IM2COL_DIRECT_M && kk * P * (int64_t)sizeof(float) <= IM2COL_DIRECT_BYTES);
}

/* col[(c * kh + i) * kw + j][oy * ow + ox] = x[c][oy * sh - pt + i * dh][ox * sw - pl + j * dw], 0 outside */
/* one im2col row of ow outputs, stride 1 or 2: dst[t] = src[t * sw] for lo <= t < hi, else 0; 16 outputs
 * per masked load (two and a permute for stride 2) and store; no element outside [lo, hi) is read */
__attribute__((target("avx512f,bmi2"))) static void im2col_row512(float *dst, const float *src, int64_t ow, int64_t lo,
                                                                  int64_t hi, int64_t sw) {
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  for (int64_t t = 0; t < ow; t += 16) {
    __mmask16 valid = (__mmask16)(low_mask(hi - t) & ~low_mask(lo - t)), out = low_mask(ow - t);
    __m512 v;
    if (sw == 1) {
      v = _mm512_maskz_loadu_ps(valid, src + t);
    } else {
      uint32_t e = _pdep_u32(valid, 0x55555555u); /* output lane l reads element 2 l */
      v = _mm512_permutex2var_ps(_mm512_maskz_loadu_ps((__mmask16)e, src + 2 * t), even,
                                 _mm512_maskz_loadu_ps((__mmask16)(e >> 16), src + 2 * t + 16));
    }
    _mm512_mask_storeu_ps(dst + t, out, v);
  }
}

/* Below 16 output columns a row call writes a handful of floats: tiny planes are gathered instead, 16
 * outputs (across output rows) per masked gather, with the indices of each tap computed once for all
 * channels. GATHER_MAX_IDX bounds taps * P rounded up to 16 (the index table is on the stack). */
#define GATHER_MAX_OW 16
#define GATHER_MAX_IDX 8192

static int gather_fits(const primc_conv2d *p, int64_t oh, int64_t ow) {
  return ow < GATHER_MAX_OW && p->kh * p->kw * ((oh * ow + 15) / 16 * 16) <= GATHER_MAX_IDX;
}

__attribute__((target("avx512f"))) static void im2col_gather512(const primc_conv2d *p, const float *x, int64_t cg,
                                                                int64_t oh, int64_t ow, float *col) {
  int32_t idx[GATHER_MAX_IDX];
  __mmask16 valid[GATHER_MAX_IDX / 16];
  int64_t P = oh * ow, taps = p->kh * p->kw, np = (P + 15) / 16 * 16;
  for (int64_t t = 0; t < taps; t++) {
    int64_t i = t / p->kw, jx = t % p->kw;
    for (int64_t q = 0; q < np; q++) {
      int64_t oy = q / ow, ox = q % ow;
      int64_t ih = oy * p->stride_h - p->pad_t + i * p->dil_h, iw = ox * p->stride_w - p->pad_l + jx * p->dil_w;
      int ok = q < P && ih >= 0 && ih < p->h && iw >= 0 && iw < p->w;
      idx[t * np + q] = ok ? (int32_t)(ih * p->w + iw) : 0;
      if (q % 16 == 0) valid[(t * np + q) / 16] = 0;
      if (ok) valid[(t * np + q) / 16] |= (__mmask16)(1u << (q % 16));
    }
  }
  for (int64_t c = 0; c < cg; c++) {
    const float *plane = x + c * p->h * p->w;
    for (int64_t t = 0; t < taps; t++) {
      float *row = col + (c * taps + t) * P;
      for (int64_t q = 0; q < np; q += 16) {
        __m512i vi = _mm512_loadu_si512((const void *)(idx + t * np + q));
        __m512 v = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), valid[(t * np + q) / 16], vi, plane, 4);
        _mm512_mask_storeu_ps(row + q, low_mask(P - q), v);
      }
    }
  }
}

static void im2col_rows(const primc_conv2d *p, const float *x, int64_t cg, int64_t oh, int64_t ow, float *col) {
  if (use_avx512() && gather_fits(p, oh, ow)) {
    im2col_gather512(p, x, cg, oh, ow, col);
    return;
  }
  int64_t sw = p->stride_w;
  int vec = use_avx512() && (sw == 1 || sw == 2);
  for (int64_t c = 0; c < cg; c++)
    for (int64_t i = 0; i < p->kh; i++)
      for (int64_t jx = 0; jx < p->kw; jx++) {
        int64_t off = jx * p->dil_w - p->pad_l; /* input column of output column 0 */
        int64_t lo = off >= 0 ? 0 : (-off + sw - 1) / sw, hi = off > p->w - 1 ? 0 : (p->w - 1 - off) / sw + 1;
        if (hi > ow) hi = ow;
        if (lo > hi) lo = hi;
        for (int64_t oy = 0; oy < oh; oy++, col += ow) {
          int64_t ih = oy * p->stride_h - p->pad_t + i * p->dil_h;
          const float *src = x + (c * p->h + ih) * p->w + off;
          int64_t t = 0;
          if (vec) {
            im2col_row512(col, src, ow, ih >= 0 && ih < p->h ? lo : 0, ih >= 0 && ih < p->h ? hi : 0, sw);
            continue;
          }
          if (ih >= 0 && ih < p->h) {
            for (; t < lo; t++) col[t] = 0.0f;
            if (sw == 1) {
              for (; t < hi; t++) col[t] = src[t];
            } else {
              copy_strided(col + t, src + t * sw, hi - t, sw);
              t = hi;
            }
          }
          for (; t < ow; t++) col[t] = 0.0f;
        }
      }
}

typedef struct im2col_job {
  const primc_conv2d *p;
  const float *x;
  int64_t oh, ow;
  float *col;
} im2col_job;

static void im2col_range(void *ctx, int64_t c0, int64_t c1) {
  const im2col_job *j = ctx;
  const primc_conv2d *p = j->p;
  im2col_rows(p, j->x + c0 * p->h * p->w, c1 - c0, j->oh, j->ow, j->col + c0 * p->kh * p->kw * j->oh * j->ow);
}

/* im2col split over the threads by channel when there is enough of it (a 7x7 map's 512-channel 3x3
 * conv writes 900 KB of it before its GEMM, which otherwise runs on one thread while the other waits) */
#define IM2COL_SPLIT_FLOATS (1 << 15)
static void im2col_par(const primc_conv2d *p, const float *x, int64_t cg, int64_t oh, int64_t ow, float *col) {
  im2col_job j = {p, x, oh, ow, col};
  if (cg > 1 && cg * p->kh * p->kw * oh * ow >= IM2COL_SPLIT_FLOATS) primc_parallel_for(cg, im2col_range, &j);
  else im2col_rows(p, x, cg, oh, ow, col);
}

/* ---------------------------------------------------------------- direct convs */

/*
 * A stride-1 conv over an input padded to Hp x Wp is a GEMM whose B needs no copy at all: with the
 * outputs numbered q = oy * Wp + ox over padded-width rows, tap k = (c, i, j) reads B[k][q] =
 * xp[c][i * dh][j * dw + q], consecutive in q. So the micro-kernel loads B straight from the padded
 * image at koff[k] + q (no im2col, no packing), and the Wp - OW columns of each row that fall on
 * padding are computed and dropped by the epilogue, which writes y's compact rows.
 *
 * Stride s becomes stride 1 on phase images: xph[a][b][c][yy][xx] = xp[c][s yy + a][s xx + b]. Tap
 * (i, j) with i dh = s qi + a, j dw = s qj + b reads phase (a, b) at (oy + qi, ox + qj), so every tap is
 * again one offset into one of the phase images, all Hph x Wph. Building the phases is one strided
 * copy of the input, the cost the padding copy has anyway.
 *
 * Worth it while the dropped columns are few; past DIRECT_WASTE (1/8 of the row) im2col costs less
 * than the wasted FMAs.
 */
#define DIRECT_WASTE_DEN 8
#define DIRECT_MAX_STRIDE 4
#define DIRECT_SLACK 64 /* floats past the phase images a masked tail can reach by address */

typedef struct direct_geo {
  int64_t hph, wph, oh, ow, taps_floats, xp_floats, phase_floats;
  int64_t phase_base[DIRECT_MAX_STRIDE][DIRECT_MAX_STRIDE]; /* -1: no tap reads the phase */
} direct_geo;

static direct_geo direct_geometry(const primc_conv2d *p, int64_t oh, int64_t ow) {
  direct_geo d = {.oh = oh, .ow = ow};
  int64_t cg = p->c / p->groups, n = 0;
  d.hph = oh + (p->kh - 1) * p->dil_h / p->stride_h;
  d.wph = ow + (p->kw - 1) * p->dil_w / p->stride_w;
  d.phase_floats = cg * d.hph * d.wph;
  for (int a = 0; a < DIRECT_MAX_STRIDE; a++)
    for (int b = 0; b < DIRECT_MAX_STRIDE; b++) d.phase_base[a][b] = -1;
  for (int64_t i = 0; i < p->kh; i++)
    for (int64_t j = 0; j < p->kw; j++) {
      int64_t *base = &d.phase_base[i * p->dil_h % p->stride_h][j * p->dil_w % p->stride_w];
      if (*base < 0) *base = n++ * d.phase_floats;
    }
  d.taps_floats = 2 * cg * p->kh * p->kw; /* koff: one int64 per tap */
  d.xp_floats = n * d.phase_floats + p->kw * p->dil_w + DIRECT_SLACK;
  return d;
}

/* below this many taps x channels (a 3-channel stem's 27) the direct conv's phase copies and short
 * kernel calls cost more than generating im2col rows while B is packed: MobileNetV2's 3x3/2 stem
 * 0.30 -> 0.27 ms on 1 thread, 0.18 -> 0.15 ms on 2 */
#define DIRECT_MIN_K 32

static int direct_fits(const primc_conv2d *p, int64_t ow) {
  if (p->stride_h > DIRECT_MAX_STRIDE || p->stride_w > DIRECT_MAX_STRIDE || is_pointwise(p) ||
      (p->c / p->groups) * p->kh * p->kw < DIRECT_MIN_K)
    return 0;
  int64_t wph = ow + (p->kw - 1) * p->dil_w / p->stride_w;
  return (wph - ow) * DIRECT_WASTE_DEN <= wph;
}

static int64_t direct_floats(const primc_conv2d *p, int64_t oh, int64_t ow) {
  direct_geo d = direct_geometry(p, oh, ow);
  return d.taps_floats + d.xp_floats + (p->o / p->groups) * oh * d.wph;
}

/* phase (a, b) of channels [c0, c1): xph[c][yy][xx] = x[c][s yy + a - pad_t][s xx + b - pad_l] inside x, else 0 */
static void build_phase(const primc_conv2d *p, const direct_geo *d, const float *x, int64_t a, int64_t b, float *xph,
                        int64_t c0, int64_t c1) {
  int64_t sh = p->stride_h, sw = p->stride_w;
  int64_t col0 = b - p->pad_l; /* input column of phase column 0 */
  int64_t lo = col0 >= 0 ? 0 : (-col0 + sw - 1) / sw, hi = col0 > p->w - 1 ? 0 : (p->w - 1 - col0) / sw + 1;
  if (hi > d->wph) hi = d->wph;
  if (lo > hi) lo = hi;
  for (int64_t c = c0; c < c1; c++)
    for (int64_t yy = 0; yy < d->hph; yy++) {
      float *row = xph + (c * d->hph + yy) * d->wph;
      int64_t ih = sh * yy + a - p->pad_t;
      if (ih < 0 || ih >= p->h || hi == lo) {
        memset(row, 0, (size_t)d->wph * sizeof(float));
        continue;
      }
      memset(row, 0, (size_t)lo * sizeof(float));
      copy_strided(row + lo, x + (c * p->h + ih) * p->w + col0 + lo * sw, hi - lo, sw);
      memset(row + hi, 0, (size_t)(d->wph - hi) * sizeof(float));
    }
}

typedef struct phases_job {
  const primc_conv2d *p;
  const direct_geo *d;
  const float *x;
  float *xp;
} phases_job;

static void phases_range(void *ctx, int64_t c0, int64_t c1) {
  const phases_job *j = ctx;
  for (int64_t a = 0; a < j->p->stride_h; a++)
    for (int64_t b = 0; b < j->p->stride_w; b++)
      if (j->d->phase_base[a][b] >= 0) build_phase(j->p, j->d, j->x, a, b, j->xp + j->d->phase_base[a][b], c0, c1);
}

/* the used phases, split over the threads by channel when there is enough to copy (the copy would
 * otherwise be the serial part of the conv: 1x1/2 downsamples scaled 0.8x on 2 threads) */
#define PHASES_SPLIT_FLOATS (1 << 15)
static void build_phases(const primc_conv2d *p, const direct_geo *d, const float *x, float *xp) {
  int64_t used = 0, cg = p->c / p->groups;
  for (int64_t a = 0; a < p->stride_h; a++)
    for (int64_t b = 0; b < p->stride_w; b++) used += d->phase_base[a][b] >= 0;
  phases_job j = {p, d, x, xp};
  if (used * d->phase_floats >= PHASES_SPLIT_FLOATS && cg > 1)
    primc_parallel_for(cg, phases_range, &j);
  else
    phases_range(&j, 0, cg);
  memset(xp + used * d->phase_floats, 0, (size_t)(d->xp_floats - used * d->phase_floats) * sizeof(float));
}

typedef struct direct_epi {
  epi_ctx e; /* y and res in y's compact layout */
  int64_t wp, oh, ow;
} direct_epi;

/* the padded-width tile [m0, m0+mb) x [n0, n0+nb) of sums: each output row's valid part to y */
static void direct_rows(void *ctx, float *C, int64_t ldc, int64_t m0, int64_t n0, int64_t mb, int64_t nb) {
  const direct_epi *d = ctx;
  const epi_ctx *e = &d->e;
  int vec = use_avx512();
  for (int64_t oy = n0 / d->wp; oy < d->oh && oy * d->wp < n0 + nb; oy++) {
    int64_t q0 = oy * d->wp > n0 ? oy * d->wp : n0, q1 = oy * d->wp + d->ow < n0 + nb ? oy * d->wp + d->ow : n0 + nb;
    if (q1 <= q0) continue;
    for (int64_t m = 0; m < mb; m++) {
      int64_t off = (m0 + m) * d->oh * d->ow + oy * d->ow + (q0 - oy * d->wp);
      const float *c = C + m * ldc + (q0 - n0), *res = e->res ? e->res + off : NULL;
      float b = e->bias ? e->bias[(m0 + m) * e->bias_stride] : 0.0f;
      if (vec) epi_row512(e, e->y + off, c, res, b, q1 - q0);
      else epi_row_scalar(e, e->y + off, c, res, b, q1 - q0);
    }
  }
}

/* one (image, group): x and w at the group's start, c the epilogue with y and res there */
static int direct_conv(const primc_conv2d *p, int64_t oh, int64_t ow, const float *x, const float *w,
                       const epi_ctx *c, float *col) {
  direct_geo d = direct_geometry(p, oh, ow);
  int64_t *koff = (int64_t *)(void *)col, cg = p->c / p->groups, taps = p->kh * p->kw;
  float *xp = col + d.taps_floats, *sums = xp + d.xp_floats;
  for (int64_t t = 0; t < taps; t++) {
    int64_t vi = t / p->kw * p->dil_h, vj = t % p->kw * p->dil_w;
    int64_t base = d.phase_base[vi % p->stride_h][vj % p->stride_w];
    int64_t at = vi / p->stride_h * d.wph + vj / p->stride_w;
    for (int64_t ch = 0; ch < cg; ch++) koff[ch * taps + t] = base + ch * d.hph * d.wph + at;
  }
  build_phases(p, &d, x, xp);
  direct_epi de = {*c, d.wph, oh, ow};
  int64_t og = p->o / p->groups, kk = cg * taps;
  primc_gemm g = {.M = og, .N = oh * d.wph, .K = kk, .a = w, .lda = kk, .a_packed_mr = p->w_packed_mr, .b = xp,
                  .koff = koff, .c = sums, .ldc = oh * d.wph, .epi = direct_rows, .epi_ctx = &de};
  /* the micro-kernel drops the padding columns as it stores the outputs: no second pass over the sums */
  primc_gemm_store gs = {c->bias, c->bias_stride, c->res, c->lo, c->hi, d.wph, ow, c->y, oh * ow};
  if (!c->silu) g.store = &gs, g.epi = NULL;
  return primc_sgemm_run(&g);
}

/* ---------------------------------------------------------------- output channels in the lanes */

/*
 * With few output pixels (7x7 maps: 49 = 32 + 17 lanes, a quarter of the FMAs on padding) the GEMM
 * runs transposed: C^T[P][Og] = X_col^T[P][K] W^T[K][Og], pixels as the broadcast rows and output
 * channels in the lanes, W^T packed once as B panels. The epilogue turns each finished tile back.
 */
#define LANES 16

/* the share of the vector lanes that hold real columns when n columns are cut into vectors */
static double lane_use(int64_t n) { return (double)n / (double)(LANES * ((n + LANES - 1) / LANES)); }

static int channels_in_lanes(const primc_conv2d *p, int64_t oh, int64_t ow) {
  int64_t og = p->o / p->groups;
  int64_t wph = ow + (p->kw - 1) * p->dil_w / p->stride_w;
  double pix = direct_fits(p, ow) ? lane_use(oh * wph) * (double)ow / (double)wph : lane_use(oh * ow);
  if (is_depthwise(p)) return 0;
  /* a 1x1 conv narrowing many channels into few (MobileNetV2's projections): as a GEMM over og weight
   * rows it packs its whole K x P input for only og multiply-adds per element, and cuts og into
   * 14-row strips that fit it poorly (32 = 11 + 11 + 10); in the lanes it reads the input in place and
   * og fills whole vectors (Zen 4, 1 thread: 192->32 at 28x28 0.112 -> 0.095 ms, 576->96 at 14x14
   * 0.217 -> 0.198, 384->64 at 14x14 0.100 -> 0.089; 32->16 at 112x112, a wide one, went 0.14 -> 0.22
   * and 512->128 at 28x28 0.98 -> 1.04, so neither takes it) */
  if (is_pointwise(p) && p->groups == 1 && og % LANES == 0 && og <= 96 && p->c >= 4 * og) return 1;
  return lane_use(og) >= pix + 0.2;
}

typedef struct lanes_epi {
  epi_ctx e; /* y and res in y's layout */
  int64_t P;
} lanes_epi;

/* e with y, res and bias moved to channel ch of planes of P pixels */
static epi_ctx epi_at(const epi_ctx *e, int64_t ch, int64_t P) {
  epi_ctx c = *e;
  c.y += ch * P;
  c.res = e->res ? e->res + ch * P : NULL;
  c.bias = e->bias ? e->bias + ch * e->bias_stride : NULL;
  return c;
}

/* Pixels [0, mb) x channels [0, nb) of a C^T tile (rows ldc apart) into y's channel rows from pixel m0
 * on (e at the tile's first channel): 16 x 16 blocks through one in-register transpose, each channel's
 * 16 pixels then one vector for bias, residual, SiLU and clamp and one store. A scalar gather down C^T's
 * columns read one cache line per element (a third of MobileNetV2's 7x7 1x1 convs), and the transposes
 * through a buffer and a second pass for the epilogue took a fifth of a 3-channel 7x7 stem's time in
 * the direct lanes conv. */
__attribute__((target("avx512f"))) static void ct_store(const epi_ctx *e, int64_t P, const float *ct, int64_t ldc,
                                                        int64_t m0, int64_t mb, int64_t nb) {
  __m512 lo = _mm512_set1_ps(e->lo), hi = _mm512_set1_ps(e->hi);
  for (int64_t c0 = 0; c0 < nb; c0 += 16) {
    int64_t nc = nb - c0 < 16 ? nb - c0 : 16;
    __mmask16 cm = low_mask(nc); /* C^T's columns past the tile are not read */
    for (int64_t q = 0; q < mb; q += 16) {
      int rows = mb - q < 16 ? (int)(mb - q) : 16;
      __mmask16 m = low_mask(rows);
      __m512 r[16];
#pragma GCC unroll 16
      for (int i = 0; i < 16; i++) r[i] = i < rows ? _mm512_maskz_loadu_ps(cm, ct + (q + i) * ldc + c0) : _mm512_setzero_ps();
      primc_tr16(r);
      for (int64_t c = 0; c < nc; c++) {
        int64_t ch = c0 + c, off = ch * P + m0 + q;
        __m512 v = _mm512_add_ps(r[c], _mm512_set1_ps(e->bias ? e->bias[ch * e->bias_stride] : 0.0f));
        if (e->res) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, e->res + off));
        if (e->silu) v = silu512(v);
        _mm512_mask_storeu_ps(e->y + off, m, _mm512_min_ps(hi, _mm512_max_ps(lo, v))); /* v second: NaN stays */
      }
    }
  }
}

/* the tile of C^T (pixels [m0, m0+mb) x channels [n0, n0+nb)) into y[channel][pixel] */
static void lanes_rows(void *ctx, float *C, int64_t ldc, int64_t m0, int64_t n0, int64_t mb, int64_t nb) {
  const lanes_epi *d = ctx;
  const epi_ctx *e = &d->e;
  if (use_avx512()) {
    epi_ctx en = epi_at(e, n0, d->P);
    ct_store(&en, d->P, C, ldc, m0, mb, nb);
    return;
  }
  float tmp[64];
  for (int64_t o = 0; o < nb; o++)
    for (int64_t p0 = 0; p0 < mb; p0 += 64) {
      int64_t n = mb - p0 < 64 ? mb - p0 : 64, off = (n0 + o) * d->P + m0 + p0;
      for (int64_t i = 0; i < n; i++) tmp[i] = C[(p0 + i) * ldc + o];
      const float *res = e->res ? e->res + off : NULL;
      epi_row_scalar(e, e->y + off, tmp, res, e->bias ? e->bias[(n0 + o) * e->bias_stride] : 0.0f, n);
    }
}

/* bytes from one group's W^T panels to the next: 64-aligned, as primc_sgemm_pack_b wants */
static size_t panels_stride(int64_t og, int64_t kk) { return (primc_sgemm_packed_b_size(og, kk) + 63) / 64 * 64; }

/* each group's W^T panels' header checked, the stride from one group's to the next's in *stride:
 * that of the ISA that packed them, as the first header names it */
static int panels_check(const primc_conv2d *p, const void *w, size_t avail, size_t *stride) {
  int64_t og = p->o / p->groups, kk = (p->c / p->groups) * p->kh * p->kw;
  size_t used;
  if (primc_sgemm_packed_check(w, avail, og, kk, &used) != PRIMC_OK) return PRIMC_ERR_WEIGHTS;
  size_t s = (used + 63) / 64 * 64;
  for (int64_t g = 1; g < p->groups; g++)
    if ((size_t)g > avail / s ||
        primc_sgemm_packed_check((const char *)w + g * s, avail - (size_t)g * s, og, kk, &used) != PRIMC_OK ||
        (used + 63) / 64 * 64 != s)
      return PRIMC_ERR_WEIGHTS;
  *stride = s;
  return PRIMC_OK;
}

int primc_conv2d_check_weights(const primc_conv2d *p, const void *w, size_t bytes) {
  if (!p || !conv_valid(p) || !w) return PRIMC_ERR_WEIGHTS;
  size_t stride;
  if (p->w_packed_panels) return panels_check(p, w, bytes, &stride);
  int layout = p->w_winograd ? PRIMC_CONV_W_WINOGRAD : p->w_lanes ? PRIMC_CONV_W_LANES
             : p->w_packed_mr ? PRIMC_CONV_W_STRIPS : PRIMC_CONV_W_PLAIN;
  return primc_conv2d_packed_weight_bytes(p, layout) <= bytes ? PRIMC_OK : PRIMC_ERR_WEIGHTS;
}

/* one (image, group): X_col^T from x (1x1) or im2col in col, C^T after it in col */
static int lanes_conv(const primc_conv2d *p, int64_t oh, int64_t ow, const float *x, const void *w, const epi_ctx *c,
                      float *col) {
  int64_t og = p->o / p->groups, kk = (p->c / p->groups) * p->kh * p->kw, P = oh * ow;
  const float *a = x;
  if (!is_pointwise(p)) {
    im2col_par(p, x, p->c / p->groups, oh, ow, col);
    a = col;
  }
  lanes_epi le = {*c, P};
  primc_gemm g = {.M = P, .N = og, .K = kk, .a = a, .lda = P, .trans_a = 1, .b_packed = w, .c = col + kk * P,
                  .ldc = og, .epi = lanes_rows, .epi_ctx = &le};
  return primc_sgemm_run(&g);
}

static int64_t lanes_floats(const primc_conv2d *p, int64_t oh, int64_t ow) {
  int64_t og = p->o / p->groups, kk = (p->c / p->groups) * p->kh * p->kw, P = oh * ow;
  return kk * P + P * og;
}

/* ---------------------------------------------------------------- Winograd F(2x2, 3x3) */

/*
 * Stride-1 3x3 convs as Winograd F(2x2, 3x3) (Lavin and Gray): each 2x2 output tile is A^T [(G g G^T)
 * . (B^T d B)] A for its 4x4 input patch d, so the 36 multiply-adds per tile and channel pair become
 * 16, done as 16 GEMMs (one per position xi of the 4x4 transform): M_xi[o][t] = U_xi[o][c] V_xi[c][t].
 * U (the transformed weights) is made at compile time, packed as A strips; V and M live in the
 * scratch. The transforms only add, subtract and halve, so the result stays within a few ulps of
 * the direct sum (tested against a double-precision reference). Worth it once the GEMMs are big
 * enough to run near peak: WINO_MIN_TILES tiles and wino_min_ch() channels on each side.
 */
#define WINO_MIN_TILES 36
#define WINO_MAX_TX 512 /* tiles across: the transforms' row buffers are on the stack */

typedef struct wino_geo {
  int64_t ty, tx, t; /* tiles down, across, all */
} wino_geo;

static wino_geo wino_geometry(int64_t oh, int64_t ow) {
  wino_geo g = {(oh + 1) / 2, (ow + 1) / 2, 0};
  g.t = g.ty * g.tx;
  return g;
}

/* what the Winograd path can run */
static int wino_shape(const primc_conv2d *p, int64_t oh, int64_t ow) {
  return p->kh == 3 && p->kw == 3 && p->stride_h == 1 && p->stride_w == 1 && p->dil_h == 1 && p->dil_w == 1 &&
         p->groups == 1 && wino_geometry(oh, ow).tx <= WINO_MAX_TX;
}

/* channels from which Winograd's 16 multiply-adds per tile, where the GEMM does 36, beat the GEMM's
 * better use of the FMAs: 128 where zmm FMAs issue two per cycle (measured on a Xeon: at 64 channels
 * Winograd lost), 64 where they issue one (AMD Zen 4: ResNet-18's 64-channel convs 2.4 -> 2.0 ms) */
static int64_t wino_min_ch(void) { return primc_cpu_zmm_fmas() == 1 ? 64 : 128; }

/* where the Winograd path is the fastest on this CPU */
static int wino_pays(const primc_conv2d *p, int64_t oh, int64_t ow) {
  int64_t ch = wino_min_ch();
  return wino_shape(p, oh, ow) && p->c >= ch && p->o >= ch && wino_geometry(oh, ow).t >= WINO_MIN_TILES;
}

static int64_t wino_floats(const primc_conv2d *p, int64_t oh, int64_t ow) {
  return 16 * (p->c + p->o) * wino_geometry(oh, ow).t;
}

/* u = G g G^T for one 3x3 kernel g (row-major), into u[16] */
static void wino_kernel(const float *g, float *u) {
  float t[4][3];
  for (int j = 0; j < 3; j++) {
    float a = g[j], b = g[3 + j], c = g[6 + j];
    t[0][j] = a, t[1][j] = 0.5f * (a + b + c), t[2][j] = 0.5f * (a - b + c), t[3][j] = c;
  }
  for (int i = 0; i < 4; i++) {
    float a = t[i][0], b = t[i][1], c = t[i][2];
    u[i * 4 + 0] = a, u[i * 4 + 1] = 0.5f * (a + b + c), u[i * 4 + 2] = 0.5f * (a - b + c), u[i * 4 + 3] = c;
  }
}

size_t primc_conv2d_winograd_bytes(const primc_conv2d *p) { return (size_t)(16 * p->o * p->c) * sizeof(float); }

int primc_conv2d_pack_winograd(const primc_conv2d *p, const float *w, int mr, float *dst) {
  int64_t oh, ow;
  if (!p || !w || !dst || !conv_valid(p) || !primc_conv2d_out_hw(p, &oh, &ow) || !wino_shape(p, oh, ow)) return PRIMC_ERR_ARG;
  int64_t O = p->o, C = p->c;
  float *u = malloc(sizeof(float) * (size_t)(16 * O * C));
  if (!u) return PRIMC_ERR_RUNTIME;
  float t[16];
  for (int64_t o = 0; o < O; o++)
    for (int64_t c = 0; c < C; c++) {
      wino_kernel(w + (o * C + c) * 9, t);
      for (int xi = 0; xi < 16; xi++) u[(xi * O + o) * C + c] = t[xi];
    }
  int st = PRIMC_OK;
  for (int xi = 0; xi < 16 && st == PRIMC_OK; xi++) st = primc_sgemm_pack_a(O, C, u + xi * O * C, C, mr, dst + xi * O * C);
  free(u);
  return st;
}

typedef struct wino_job {
  const primc_conv2d *p;
  wino_geo g;
  int64_t oh, ow;
  const float *x, *w;
  float *v, *m; /* [16][C][T], [16][O][T] */
  const epi_ctx *e;
  int status;
} wino_job;

/* the 4 input rows of tile row ty of channel c, from column -pad_l on, zero outside x; ROW_PAD floats of
 * zeros after the 2 TX + 2 the tiles read, so 16-tile vector loads stay inside */
#define WINO_ROW (2 * WINO_MAX_TX + 2 + 32)
static void wino_rows(const wino_job *j, int64_t c, int64_t ty, float rows[4][WINO_ROW]) {
  const primc_conv2d *p = j->p;
  int64_t width = 2 * j->g.tx + 2 + 32;
  for (int i = 0; i < 4; i++) {
    int64_t ih = 2 * ty - p->pad_t + i;
    memset(rows[i], 0, (size_t)width * sizeof(float));
    if (ih < 0 || ih >= p->h) continue;
    int64_t n = p->w < width - p->pad_l ? p->w : width - p->pad_l;
    if (n > 0) memcpy(rows[i] + p->pad_l, j->x + (c * p->h + ih) * p->w, (size_t)n * sizeof(float));
  }
}

/* t = B^T d B of one tile, d[i][k] = rows[i][2 tx + k] */
static void wino_in_tile(float rows[4][WINO_ROW], int64_t tx, float v[16]) {
  float d[4][4], t[4][4];
  for (int i = 0; i < 4; i++)
    for (int k = 0; k < 4; k++) d[i][k] = rows[i][2 * tx + k];
  for (int k = 0; k < 4; k++) {
    t[0][k] = d[0][k] - d[2][k], t[1][k] = d[1][k] + d[2][k];
    t[2][k] = d[2][k] - d[1][k], t[3][k] = d[1][k] - d[3][k];
  }
  for (int i = 0; i < 4; i++) {
    v[i * 4 + 0] = t[i][0] - t[i][2], v[i * 4 + 1] = t[i][1] + t[i][2];
    v[i * 4 + 2] = t[i][2] - t[i][1], v[i * 4 + 3] = t[i][1] - t[i][3];
  }
}

/* the same for 16 tiles [tx0, tx0 + 16) at once: even and odd columns split by permutes */
__attribute__((target("avx512f"))) static void wino_in16(float rows[4][WINO_ROW], int64_t tx0, float *v, int64_t xs,
                                                         __mmask16 m) {
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  __m512 d[4][4], t[4][4];
  for (int i = 0; i < 4; i++) {
    const float *r = rows[i] + 2 * tx0;
    __m512 a = _mm512_loadu_ps(r), b = _mm512_loadu_ps(r + 16), a2 = _mm512_loadu_ps(r + 2), b2 = _mm512_loadu_ps(r + 18);
    d[i][0] = _mm512_permutex2var_ps(a, even, b), d[i][1] = _mm512_permutex2var_ps(a, odd, b);
    d[i][2] = _mm512_permutex2var_ps(a2, even, b2), d[i][3] = _mm512_permutex2var_ps(a2, odd, b2);
  }
  for (int k = 0; k < 4; k++) {
    t[0][k] = _mm512_sub_ps(d[0][k], d[2][k]), t[1][k] = _mm512_add_ps(d[1][k], d[2][k]);
    t[2][k] = _mm512_sub_ps(d[2][k], d[1][k]), t[3][k] = _mm512_sub_ps(d[1][k], d[3][k]);
  }
  for (int i = 0; i < 4; i++) {
    _mm512_mask_storeu_ps(v + (i * 4 + 0) * xs, m, _mm512_sub_ps(t[i][0], t[i][2]));
    _mm512_mask_storeu_ps(v + (i * 4 + 1) * xs, m, _mm512_add_ps(t[i][1], t[i][2]));
    _mm512_mask_storeu_ps(v + (i * 4 + 2) * xs, m, _mm512_sub_ps(t[i][2], t[i][1]));
    _mm512_mask_storeu_ps(v + (i * 4 + 3) * xs, m, _mm512_sub_ps(t[i][1], t[i][3]));
  }
}

/* V[xi][c][t] = (B^T d B)[xi] for every tile t of channels [c0, c1) */
static void wino_input(void *ctx, int64_t c0, int64_t c1) {
  const wino_job *j = ctx;
  int64_t T = j->g.t, xs = j->p->c * T; /* floats from one xi's matrix to the next */
  int vec = use_avx512();
  float rows[4][WINO_ROW];
  for (int64_t c = c0; c < c1; c++)
    for (int64_t ty = 0; ty < j->g.ty; ty++) {
      wino_rows(j, c, ty, rows);
      float *v = j->v + c * T + ty * j->g.tx;
      int64_t tx = 0;
      for (; vec && tx < j->g.tx; tx += 16) wino_in16(rows, tx, v + tx, xs, low_mask(j->g.tx - tx));
      for (; tx < j->g.tx; tx++) {
        float t[16];
        wino_in_tile(rows, tx, t);
        for (int xi = 0; xi < 16; xi++) v[xi * xs + tx] = t[xi];
      }
    }
}

/* M_xi = U_xi V_xi, one GEMM per xi on its thread */
static void wino_gemms(void *ctx, int64_t x0, int64_t x1) {
  wino_job *j = ctx;
  int64_t O = j->p->o, C = j->p->c, T = j->g.t;
  for (int64_t xi = x0; xi < x1; xi++) {
    primc_gemm g = {.M = O, .N = T, .K = C, .a = j->w + xi * O * C, .lda = C, .a_packed_mr = j->p->w_packed_mr,
                    .b = j->v + xi * C * T, .ldb = T, .c = j->m + xi * O * T, .ldc = T};
    if (primc_sgemm_run(&g) != PRIMC_OK) __atomic_store_n(&j->status, PRIMC_ERR_RUNTIME, __ATOMIC_RELAXED);
  }
}

/* the 2x2 outputs A^T m A of 16 tiles [tx0, tx0 + 16), interleaved into two output rows */
__attribute__((target("avx512f"))) static void wino_out16(const float *mt, int64_t xs, __mmask16 msk, float *row0,
                                                          float *row1) {
  const __m512i lo = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  const __m512i hi = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
  __m512 m[4][4], s[2][4];
  for (int xi = 0; xi < 16; xi++) m[xi / 4][xi % 4] = _mm512_maskz_loadu_ps(msk, mt + xi * xs);
  for (int k = 0; k < 4; k++) {
    s[0][k] = _mm512_add_ps(_mm512_add_ps(m[0][k], m[1][k]), m[2][k]);
    s[1][k] = _mm512_sub_ps(_mm512_sub_ps(m[1][k], m[2][k]), m[3][k]);
  }
  float *out[2] = {row0, row1};
  for (int i = 0; i < 2; i++) {
    __m512 y0 = _mm512_add_ps(_mm512_add_ps(s[i][0], s[i][1]), s[i][2]);
    __m512 y1 = _mm512_sub_ps(_mm512_sub_ps(s[i][1], s[i][2]), s[i][3]);
    _mm512_storeu_ps(out[i], _mm512_permutex2var_ps(y0, lo, y1));
    _mm512_storeu_ps(out[i] + 16, _mm512_permutex2var_ps(y0, hi, y1));
  }
}

/* y tiles of channels [o0, o1) = A^T M A, then the epilogue on each output row */
static void wino_output(void *ctx, int64_t o0, int64_t o1) {
  const wino_job *j = ctx;
  const epi_ctx *e = j->e;
  int64_t T = j->g.t, xs = j->p->o * T, ow = j->ow;
  int vec = use_avx512();
  float out[2][2 * WINO_MAX_TX + 32];
  for (int64_t o = o0; o < o1; o++) {
    float b = e->bias ? e->bias[o * e->bias_stride] : 0.0f;
    for (int64_t ty = 0; ty < j->g.ty; ty++) {
      const float *mt = j->m + o * T + ty * j->g.tx;
      int64_t tx = 0;
      for (; vec && tx < j->g.tx; tx += 16)
        wino_out16(mt + tx, xs, low_mask(j->g.tx - tx), out[0] + 2 * tx, out[1] + 2 * tx);
      for (; tx < j->g.tx; tx++) {
        float m[4][4], s2[2][4];
        for (int xi = 0; xi < 16; xi++) m[xi / 4][xi % 4] = mt[xi * xs + tx];
        for (int k = 0; k < 4; k++) s2[0][k] = m[0][k] + m[1][k] + m[2][k], s2[1][k] = m[1][k] - m[2][k] - m[3][k];
        for (int i = 0; i < 2; i++) {
          out[i][2 * tx] = s2[i][0] + s2[i][1] + s2[i][2];
          out[i][2 * tx + 1] = s2[i][1] - s2[i][2] - s2[i][3];
        }
      }
      for (int i = 0; i < 2 && 2 * ty + i < j->oh; i++) {
        int64_t off = (o * j->oh + 2 * ty + i) * ow;
        const float *res = e->res ? e->res + off : NULL;
        if (vec) epi_row512(e, e->y + off, out[i], res, b, ow);
        else epi_row_scalar(e, e->y + off, out[i], res, b, ow);
      }
    }
  }
}

/* one image: x, y and the residual at the image's start */
static int wino_conv(const primc_conv2d *p, int64_t oh, int64_t ow, const float *x, const float *w, const epi_ctx *c,
                     float *col) {
  wino_job j = {p, wino_geometry(oh, ow), oh, ow, x, w, col, NULL, c, PRIMC_OK};
  j.m = col + 16 * p->c * j.g.t;
  primc_parallel_for(p->c, wino_input, &j);
  primc_parallel_for(16, wino_gemms, &j);
  if (j.status != PRIMC_OK) return j.status;
  primc_parallel_for(p->o, wino_output, &j);
  return PRIMC_OK;
}

/* ---------------------------------------------------------------- direct, output channels in the lanes */

/*
 * Each sum is one pixel's 32 output channels in two vectors, each tap one broadcast input value and two
 * weight vectors (PRIMC_CONV_W_LANES: [o / 32][c kh kw][32]): x is read where it lies, at any stride,
 * with no im2col, phase copy or padding. An output row goes in tiles of up to DL_R pixels, 2 DL_R sums
 * in registers; a tile at the row's end, some of whose taps fall left or right of x, runs once per run
 * of kernel columns that lie inside x for the same pixels, and kernel rows above or below x are skipped
 * for the whole row. The channels are taken in chunks whose weights stay in L1 while every tile of a
 * band of rows reads them. The band's [pixels][32] sums go to y's rows through ct_store (16x16
 * transposes, the epilogue in registers), as the transposed GEMM's do. This is the register tile of MLAS's NCHWc convs, on NCHW maps.
 */
#define DL_R 14                /* pixels per tile: 28 sums, 14 broadcasts and 2 weight loads per tap */
#define DL_NR 32               /* output channels per sum: two vectors */
#define DL_BAND_FLOATS 4096    /* the sums of a band of output rows, on the stack: at least a row */
#define DL_W_BYTES (16 << 10)  /* weights of a chunk of channels: L1 keeps them (24 and 32 KB were slower) */
#define DL_MAX_KW 16            /* kernel columns: a tile's runs of them are planned on the stack */
#define DL_AVX __attribute__((target("avx512f")))

typedef struct dl_src {
  const float *x;     /* the tile's pixel 0 at its first tap: first channel, kernel row and column read */
  int64_t cs, rs, js; /* pitch of a channel, a kernel row and a kernel column in x (dilation included) */
  int64_t c, ni, nj;  /* channels, kernel rows and kernel columns read */
  const float *w;     /* the weights of that tap, [c][kh][kw][32] */
  int64_t wcs, wrs;   /* weight floats per channel and per kernel row */
} dl_src;

/* R pixels S apart: sums in dst[pixel][32], added to what is there when acc */
static inline __attribute__((always_inline)) DL_AVX void dl_tile(const dl_src *s, float *dst, int acc, const int R,
                                                                  const int S) {
  __m512 a[DL_R][2];
#pragma GCC unroll 14
  for (int r = 0; r < R; r++) {
    a[r][0] = acc ? _mm512_loadu_ps(dst + r * DL_NR) : _mm512_setzero_ps();
    a[r][1] = acc ? _mm512_loadu_ps(dst + r * DL_NR + 16) : _mm512_setzero_ps();
  }
  const float *xc = s->x, *wc = s->w;
  for (int64_t c = 0; c < s->c; c++, xc += s->cs, wc += s->wcs) {
    const float *xr = xc, *wr = wc;
    for (int64_t i = 0; i < s->ni; i++, xr += s->rs, wr += s->wrs) {
      const float *xj = xr, *wj = wr;
      for (int64_t j = 0; j < s->nj; j++, xj += s->js, wj += DL_NR) {
        __m512 w0 = _mm512_load_ps(wj), w1 = _mm512_load_ps(wj + 16);
#pragma GCC unroll 14
        for (int r = 0; r < R; r++) {
          __m512 b = _mm512_set1_ps(xj[r * S]);
          a[r][0] = _mm512_fmadd_ps(b, w0, a[r][0]);
          a[r][1] = _mm512_fmadd_ps(b, w1, a[r][1]);
        }
      }
    }
  }
#pragma GCC unroll 14
  for (int r = 0; r < R; r++) {
    _mm512_storeu_ps(dst + r * DL_NR, a[r][0]);
    _mm512_storeu_ps(dst + r * DL_NR + 16, a[r][1]);
  }
}

#define DL_DEF(R)                                                                                     \
  static DL_AVX void dl_##R##_1(const dl_src *s, float *d, int acc) { dl_tile(s, d, acc, R, 1); }      \
  static DL_AVX void dl_##R##_2(const dl_src *s, float *d, int acc) { dl_tile(s, d, acc, R, 2); }
DL_DEF(1) DL_DEF(2) DL_DEF(3) DL_DEF(4) DL_DEF(5) DL_DEF(6) DL_DEF(7)
DL_DEF(8) DL_DEF(9) DL_DEF(10) DL_DEF(11) DL_DEF(12) DL_DEF(13) DL_DEF(14)
#define DL_ROW(R) {dl_##R##_1, dl_##R##_2}
static void (*const dl_tab[DL_R][2])(const dl_src *, float *, int) = {
    DL_ROW(1), DL_ROW(2), DL_ROW(3),  DL_ROW(4),  DL_ROW(5),  DL_ROW(6),  DL_ROW(7),
    DL_ROW(8), DL_ROW(9), DL_ROW(10), DL_ROW(11), DL_ROW(12), DL_ROW(13), DL_ROW(14)};

static int dl_shape(const primc_conv2d *p, int64_t ow) {
  return use_avx512() && p->groups == 1 && !is_depthwise(p) && (p->stride_w == 1 || p->stride_w == 2) &&
         ow * DL_NR <= DL_BAND_FLOATS && p->kw <= DL_MAX_KW;
}

/* Where the direct lanes conv is the fastest on this CPU (Zen 5, 1 thread, against the GEMM paths as
 * compiled, in ResNet-18: 3x3/2 64->128 at 28x28 0.65 -> 0.49 ms, 128->256 at 14x14 0.65 -> 0.50,
 * 3x3 512->512 at 7x7 1.18 -> 0.99, 64->64 at 56x56 1.05 -> 0.98). Not: Winograd's convs, output
 * channels that leave lanes empty, a stem of few channels, whose rows of few taps make its sums go
 * through memory more often than the GEMM's (7x7/2 3->64 1.19 -> 1.30 ms in the model), and 1x1s onto
 * rows of fewer than a tile's pixels, which the transposed GEMM's 14 x 32 tiles fill better (ResNet-50's
 * 1x1/2 1024->2048 at 7x7 0.94 -> 1.16). Of the 1x1 stride-1 convs, one GEMM reading x in place, only
 * those narrowing 4x or more gain, and not into 97-128 channels, where the GEMM reads x in place too
 * (weights cold, 1 and 2 threads: 256->64 at 56x56 0.95 and 0.97, 1024->256 at 14x14 0.93 and 0.87,
 * 192->32 at 28x28 0.88 and 0.98; 512->128 at 28x28 1.03-1.05 on 1 thread; widening ones 1.04-1.16). */
#define DL_MIN_C 8
static int dl_pays(const primc_conv2d *p, int64_t oh, int64_t ow) {
  if (p->kh * p->kw == 1 && ow < DL_R) return 0;
  if (is_pointwise(p) && (p->c < 4 * p->o || (p->o > 96 && p->o <= 128))) return 0;
  return dl_shape(p, ow) && p->o % DL_NR == 0 && p->c >= DL_MIN_C && !wino_pays(p, oh, ow);
}

size_t primc_conv2d_lanes_bytes(const primc_conv2d *p) {
  return (size_t)((p->o + DL_NR - 1) / DL_NR * DL_NR * p->c * p->kh * p->kw) * sizeof(float);
}

int primc_conv2d_pack_lanes(const primc_conv2d *p, const float *w, float *dst) {
  if (!p || !conv_valid(p) || p->groups != 1 || !w || !dst) return PRIMC_ERR_ARG;
  int64_t kk = p->c * p->kh * p->kw, nob = (p->o + DL_NR - 1) / DL_NR;
  for (int64_t ob = 0; ob < nob; ob++)
    for (int64_t k = 0; k < kk; k++)
      for (int64_t l = 0; l < DL_NR; l++) {
        int64_t o = ob * DL_NR + l;
        dst[(ob * kk + k) * DL_NR + l] = o < p->o ? w[o * kk + k] : 0.0f;
      }
  return PRIMC_OK;
}

typedef struct dl_job {
  const primc_conv2d *p;
  int64_t oh, ow, nob, bands; /* bands: of output rows, each with its sums on the stack */
  int band_major;             /* items band by band: each thread on its own rows of x and y */
  const float *x, *w;
  lanes_epi le;
} dl_job;

/* the pixels [*a, *b) of [t0, t1) whose kernel column j lies inside x's row */
static void dl_cols(const primc_conv2d *p, int64_t j, int64_t t0, int64_t t1, int64_t *a, int64_t *b) {
  int64_t off = j * p->dil_w - p->pad_l, S = p->stride_w; /* pixel ox reads column ox S + off */
  int64_t lo = off >= 0 ? 0 : (-off + S - 1) / S, hi = p->w - 1 - off < 0 ? 0 : (p->w - 1 - off) / S + 1;
  *a = lo > t0 ? lo : t0;
  *b = hi < t1 ? hi : t1;
  if (*b < *a) *b = *a;
}

/* A tile's kernel calls: one when every tap of it lies inside x, else one per run of kernel columns
 * inside x for the same pixels (at the row's ends: the same FMAs as a full tile). Made once per conv
 * call, not per row and chunk: the divisions cost a third of a 7-wide row's FMA time. */
#define DL_MAX_TILES ((DL_BAND_FLOATS / DL_NR + DL_R - 1) / DL_R)
typedef struct dl_run {
  int64_t a, b, j0, j1; /* pixels [a, b) over kernel columns [j0, j1) */
} dl_run;
typedef struct dl_plan {
  int64_t tiles, t0[DL_MAX_TILES + 1];
  int full[DL_MAX_TILES], n[DL_MAX_TILES];
  dl_run run[DL_MAX_TILES][DL_MAX_KW];
} dl_plan;

static void dl_plan_make(const primc_conv2d *p, int64_t ow, dl_plan *pl) {
  pl->tiles = (ow + DL_R - 1) / DL_R;
  for (int64_t t = 0; t <= pl->tiles; t++) pl->t0[t] = ow * t / pl->tiles;
  for (int64_t t = 0; t < pl->tiles; t++) {
    int64_t t0 = pl->t0[t], t1 = pl->t0[t + 1], a, b, a1, b1;
    dl_cols(p, 0, t0, t1, &a, &b);
    dl_cols(p, p->kw - 1, t0, t1, &a1, &b1);
    pl->full[t] = a == t0 && b == t1 && a1 == t0 && b1 == t1; /* columns are monotonic in j: the ends decide */
    pl->n[t] = 0;
    for (int64_t j0 = 0, j1; j0 < p->kw && !pl->full[t]; j0 = j1) {
      dl_cols(p, j0, t0, t1, &a, &b);
      for (j1 = j0 + 1; j1 < p->kw; j1++) {
        dl_cols(p, j1, t0, t1, &a1, &b1);
        if (a1 != a || b1 != b) break;
      }
      if (a < b) pl->run[t][pl->n[t]++] = (dl_run){a, b, j0, j1};
    }
  }
}

/* tile t of a row (sums at the row's) */
static void dl_tile_at(const dl_job *j, const dl_plan *pl, const dl_src *row, int64_t t, float *sums, int acc) {
  const primc_conv2d *p = j->p;
  int64_t S = p->stride_w, t0 = pl->t0[t], t1 = pl->t0[t + 1];
  if (pl->full[t]) {
    dl_src s = *row;
    s.x += t0 * S - p->pad_l;
    dl_tab[t1 - t0 - 1][S - 1](&s, sums + t0 * DL_NR, acc);
    return;
  }
  if (!acc) memset(sums + t0 * DL_NR, 0, (size_t)((t1 - t0) * DL_NR) * sizeof(float));
  for (int q = 0; q < pl->n[t]; q++) {
    const dl_run *r = &pl->run[t][q];
    dl_src s = *row;
    s.x += r->a * S - p->pad_l + r->j0 * p->dil_w, s.w += r->j0 * DL_NR, s.nj = r->j1 - r->j0;
    dl_tab[r->b - r->a - 1][S - 1](&s, sums + r->a * DL_NR, 1);
  }
}

/* the source of output row oy's taps for channels [c0, c0 + nc), kernel rows inside x; ni = 0 if none */
static dl_src dl_row(const dl_job *j, int64_t ob, int64_t oy, int64_t c0, int64_t nc) {
  const primc_conv2d *p = j->p;
  int64_t top = oy * p->stride_h - p->pad_t, i0 = 0, i1 = p->kh, wcs = p->kh * p->kw * DL_NR;
  while (i0 < i1 && top + i0 * p->dil_h < 0) i0++;
  while (i1 > i0 && top + (i1 - 1) * p->dil_h >= p->h) i1--;
  dl_src s = {.x = j->x + (c0 * p->h + top + i0 * p->dil_h) * p->w, .cs = p->h * p->w, .rs = p->dil_h * p->w,
              .js = p->dil_w, .c = nc, .ni = i1 - i0, .nj = p->kw,
              .w = j->w + (ob * p->c * p->kh * p->kw) * DL_NR + c0 * wcs + i0 * p->kw * DL_NR, .wcs = wcs,
              .wrs = p->kw * DL_NR};
  return s;
}

/* items (output-channel block, band of output rows) [b, e), block-major so threads split the blocks
 * first. Each chunk of weights is read by every tile of the band before the next: a deep conv's weights
 * come from memory once per block (ResNet-18's 7x7 layer4, 9 MB of them: row by row, each block's were
 * read 7 times, and 1.2 -> 2.0 ms). */
static void dl_range(void *ctx, int64_t b, int64_t e) {
  const dl_job *j = ctx;
  const primc_conv2d *p = j->p;
  float sums[DL_BAND_FLOATS] __attribute__((aligned(64)));
  dl_plan pl;
  dl_plan_make(p, j->ow, &pl);
  int64_t wcs = p->kh * p->kw * DL_NR, tiles = pl.tiles, row_f = j->ow * DL_NR;
  int64_t chunk = DL_W_BYTES / (wcs * (int64_t)sizeof(float));
  if (chunk < 1) chunk = 1;
  for (int64_t it = b; it < e; it++) {
    int64_t ob = j->band_major ? it % j->nob : it / j->bands, band = j->band_major ? it / j->nob : it % j->bands;
    int64_t r0 = j->oh * band / j->bands, r1 = j->oh * (band + 1) / j->bands;
    for (int64_t c0 = 0; c0 < p->c; c0 += chunk) {
      int64_t nc = p->c - c0 < chunk ? p->c - c0 : chunk;
      /* the next chunk's weights (the next block's first, past the last) into L2 meanwhile, a share
       * before each tile: their first reading comes from memory */
      const char *pf = (const char *)(j->w + (ob * p->c + c0 + nc) * wcs);
      int64_t lines = nc * wcs * (int64_t)sizeof(float) / 64, per = (lines + (r1 - r0) * tiles - 1) / ((r1 - r0) * tiles);
      for (int64_t oy = r0; oy < r1; oy++) {
        dl_src row = dl_row(j, ob, oy, c0, nc);
        float *rs = sums + (oy - r0) * row_f;
        if (!row.ni && c0 == 0) memset(rs, 0, (size_t)row_f * sizeof(float));
        for (int64_t t = 0; t < tiles; t++) {
          for (int64_t l = 0; l < per && lines > 0; l++, lines--, pf += 64) _mm_prefetch(pf, _MM_HINT_T1);
          if (row.ni) dl_tile_at(j, &pl, &row, t, rs, c0 > 0);
        }
      }
    }
    int64_t nb = p->o - ob * DL_NR < DL_NR ? p->o - ob * DL_NR : DL_NR;
    epi_ctx eb = epi_at(&j->le.e, ob * DL_NR, j->le.P);
    ct_store(&eb, j->le.P, sums, DL_NR, r0 * j->ow, (r1 - r0) * j->ow, nb);
  }
}

/* Threads take bands of rows, not blocks of output channels, when every thread can hold all the
 * weights in its L2 and they are fewer bytes than x: each core then reads the rows of x its own core
 * wrote in the conv before (which splits rows too) and writes the rows the next one reads. Split by
 * blocks, each core reads every row of x, half of them from the other core's cache, and on this VM
 * two vCPUs are at times placed where that round trip takes 400 ns instead of 100: ResNet-18's
 * 64-channel 3x3s then ran 0.68-0.74 ms on 2 threads instead of 0.50-0.53. */
#define DL_BAND_W_BYTES (512 << 10)
static int dl_band_major(const primc_conv2d *p, int64_t nob) {
  int64_t wb = nob * DL_NR * p->c * p->kh * p->kw * (int64_t)sizeof(float);
  return wb <= DL_BAND_W_BYTES && wb <= p->c * p->h * p->w * (int64_t)sizeof(float);
}

/* one image: x, y and the residual at the image's start */
static void dl_conv(const primc_conv2d *p, int64_t oh, int64_t ow, const float *x, const float *w, const epi_ctx *c) {
  int64_t rows = DL_BAND_FLOATS / (ow * DL_NR);
  int64_t nob = (p->o + DL_NR - 1) / DL_NR;
  dl_job j = {p, oh, ow, nob, (oh + rows - 1) / rows, dl_band_major(p, nob), x, w, {*c, oh * ow}};
  primc_parallel_for(j.nob * j.bands, dl_range, &j);
}

/* ---------------------------------------------------------------- entry */

int primc_conv2d_weight_layout(const primc_conv2d *p) {
  int64_t oh, ow;
  if (!p || !conv_valid(p) || is_depthwise(p)) return PRIMC_CONV_W_PLAIN;
  primc_conv2d_out_hw(p, &oh, &ow);
  if (wino_pays(p, oh, ow)) return PRIMC_CONV_W_WINOGRAD;
  if (dl_pays(p, oh, ow)) return PRIMC_CONV_W_LANES;
  return channels_in_lanes(p, oh, ow) ? PRIMC_CONV_W_PANELS : PRIMC_CONV_W_STRIPS;
}

size_t primc_conv2d_packed_weight_bytes(const primc_conv2d *p, int layout) {
  if (!p || !conv_valid(p)) return 0;
  int64_t og = p->o / p->groups, kk = (p->c / p->groups) * p->kh * p->kw;
  if (layout == PRIMC_CONV_W_PANELS) return (size_t)p->groups * panels_stride(og, kk);
  if (layout == PRIMC_CONV_W_WINOGRAD) return primc_conv2d_winograd_bytes(p);
  if (layout == PRIMC_CONV_W_LANES) return primc_conv2d_lanes_bytes(p);
  return (size_t)(p->o * kk) * sizeof(float);
}

int64_t primc_conv2d_scratch_floats(const primc_conv2d *p) {
  int64_t oh, ow;
  if (!p || !conv_valid(p) || is_depthwise(p)) return 0;
  primc_conv2d_out_hw(p, &oh, &ow);
  int64_t cols = is_pointwise(p) ? 0 : (p->c / p->groups) * p->kh * p->kw * oh * ow, need = cols;
  if (direct_fits(p, ow) && direct_floats(p, oh, ow) > need) need = direct_floats(p, oh, ow);
  if (channels_in_lanes(p, oh, ow) && lanes_floats(p, oh, ow) > need) need = lanes_floats(p, oh, ow);
  if ((p->w_winograd ? wino_shape(p, oh, ow) : wino_pays(p, oh, ow)) && wino_floats(p, oh, ow) > need) need = wino_floats(p, oh, ow);
  return need;
}

static int overlaps(const float *a, int64_t na, const float *b, int64_t nb) {
  return a && b && (uintptr_t)a < (uintptr_t)(b + nb) && (uintptr_t)b < (uintptr_t)(a + na);
}

int primc_conv2d_f32_epi(const primc_conv2d *p, const float *x, const float *w, const primc_conv_epi *e, float *y,
                         float *spare, float *col) {
  if (!p || !conv_valid(p)) return PRIMC_ERR_ARG;
  primc_conv_epi none = {NULL, 0, NULL, -__builtin_inff(), __builtin_inff(), 0};
  if (!e) e = &none;
  int64_t oh, ow;
  primc_conv2d_out_hw(p, &oh, &ow);
  int64_t ny = p->n * p->o * oh * ow, nx = p->n * p->c * p->h * p->w;
  float *acc = y; /* the sums: y itself unless writing y early would clobber x or the residual */
  if (overlaps(y, ny, x, nx) || (e->res && e->res != y && overlaps(y, ny, e->res, ny)) || (e->res == y && y)) acc = spare;
  if (!acc || overlaps(acc, ny, x, nx) || (e->res && overlaps(acc, ny, e->res, ny))) return PRIMC_ERR_ARG;
  if (is_depthwise(p)) {
    if (p->w_packed_mr || p->w_packed_panels || p->w_winograd || p->w_lanes) return PRIMC_ERR_ARG;
    dw_job j = {p, x, w, e, acc, y, oh, ow, use_avx512()};
    if (j.vec && dwl_fits(p, oh, ow)) primc_parallel_for(dwl_items(p), dwl_range, &j);
    else primc_parallel_for(p->n * p->c, dw_range, &j);
    return PRIMC_OK;
  }
  int64_t cg = p->c / p->groups, og = p->o / p->groups, kk = cg * p->kh * p->kw, P = oh * ow;
  primc_epilogue epi = epi_needed(e) || acc != y ? epi_rows : NULL;
  /* the paths that write y only from their epilogue, at the index they read the residual at: y must
   * not overlap x (read by later tiles and groups) or a residual it is not exactly */
  int y_apart = col && !overlaps(y, ny, x, nx) && !(e->res && e->res != y && overlaps(y, ny, e->res, ny));
  if (p->w_packed_panels && (!y_apart || p->w_packed_mr || p->w_winograd)) return PRIMC_ERR_ARG;
  /* each group's panels as their header says they were packed (by the ISA of the machine that packed
   * them, whose panel width gives the stride from one group to the next); every header's fields are
   * checked before a read (their size too, where the caller knows it: primc_conv2d_check_weights) */
  size_t wstride = 0;
  if (p->w_packed_panels && panels_check(p, w, SIZE_MAX / 2, &wstride) != PRIMC_OK) return PRIMC_ERR_WEIGHTS;
  if (p->w_lanes) { /* writes y row by row from its epilogue, reading x throughout */
    if (!y_apart || p->w_packed_mr || p->w_packed_panels || p->w_winograd || !dl_shape(p, ow)) return PRIMC_ERR_ARG;
    for (int64_t n = 0; n < p->n; n++) {
      int64_t yoff = n * p->o * P;
      epi_ctx c = {e->bias, e->bias_stride, e->res ? e->res + yoff : NULL, y + yoff, e->lo, e->hi, e->silu};
      dl_conv(p, oh, ow, x + n * p->c * p->h * p->w, w, &c);
    }
    return PRIMC_OK;
  }
  if (p->w_winograd) { /* writes y in its last step, after reading the whole image */
    if (!y_apart || !wino_shape(p, oh, ow) || !p->w_packed_mr) return PRIMC_ERR_ARG;
    for (int64_t n = 0; n < p->n; n++) {
      int64_t yoff = n * p->o * P;
      epi_ctx c = {e->bias, e->bias_stride, e->res ? e->res + yoff : NULL, y + yoff, e->lo, e->hi, e->silu};
      int st = wino_conv(p, oh, ow, x + n * p->c * p->h * p->w, w, &c, col);
      if (st != PRIMC_OK) return st;
    }
    return PRIMC_OK;
  }
  for (int64_t n = 0; n < p->n; n++)
    for (int64_t g = 0; g < p->groups; g++) {
      const float *xg = x + (n * p->c + g * cg) * p->h * p->w, *wg = w + g * og * kk;
      int64_t yoff = (n * p->o + g * og) * P;
      float *ag = acc + yoff;
      epi_ctx c = {e->bias ? e->bias + g * og * e->bias_stride : NULL, e->bias_stride, e->res ? e->res + yoff : NULL,
                   y + yoff, e->lo, e->hi, e->silu};
      primc_gemm gm = {.M = og, .N = P, .K = kk, .a = wg, .lda = kk, .a_packed_mr = p->w_packed_mr, .c = ag,
                       .ldc = P, .epi = epi, .epi_ctx = &c};
      /* the micro-kernel adds bias and residual and clamps as it stores, when the sums go to y itself */
      primc_gemm_store gs = {c.bias, c.bias_stride, c.res, e->lo, e->hi, 0, 0, NULL, 0};
      if (epi && acc == y && !e->silu) gm.store = &gs, gm.epi = NULL;
      col_src s = {p, xg, oh, ow, use_avx512() && (p->stride_w == 1 || p->stride_w == 2)};
      int st;
      if (p->w_packed_panels) {
        c.y = y + yoff; /* the epilogue writes y from C^T in col */
        st = lanes_conv(p, oh, ow, xg, (const char *)w + g * wstride, &c, col);
      } else if (is_pointwise(p)) {
        gm.b = xg, gm.ldb = P;
        st = primc_sgemm_run(&gm);
      } else if (y_apart && direct_fits(p, ow)) {
        c.y = y + yoff; /* the epilogue writes y from the padded sums: acc is not used */
        st = direct_conv(p, oh, ow, xg, wg, &c, col);
      } else if (col && explicit_im2col(ow, og, kk, P)) {
        im2col_par(p, xg, cg, oh, ow, col);
        gm.b = col, gm.ldb = P;
        st = primc_sgemm_run(&gm);
      } else {
        gm.brow = col_row, gm.brow_ctx = &s;
        st = primc_sgemm_run(&gm);
      }
      if (st != PRIMC_OK) return st;
    }
  return PRIMC_OK;
}

int primc_conv2d_f32(const primc_conv2d *p, const float *x, const float *w, const float *bias, float *y) {
  primc_conv_epi e = {bias, 1, NULL, p && p->relu ? 0.0f : -__builtin_inff(), __builtin_inff(), 0};
  return primc_conv2d_f32_epi(p, x, w, &e, y, NULL, NULL);
}

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
/* pixels per 1x1 call: 16 independent FMA chains, not 8, hide the FMA latency over a K of 16-24 (1
 * thread, fused pair alone: 16->96 at 112x112 + 3x3/2 0.289 -> 0.265 ms, 24->144 at 56x56 + 3x3/1
 * 0.180 -> 0.173; cl_pixels, whose inner loop is the taps, lost with 16: 3x3/2 stem pair 0.208 -> 0.218) */
#define PWL_NB 16

__attribute__((target("avx512f"))) static inline __attribute__((always_inline)) void
pwl_store(const dwl_src *s, __m512 *a, float *dst, const int NB) {
#pragma GCC unroll 16
  for (int b = 0; b < NB; b++) {
    __m512 v = s->silu ? silu512(a[b]) : a[b];
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

__attribute__((target("avx512f"))) static void cl_row(const dwl_src *s, int64_t oy, int64_t n, float *dst) {
  const primc_conv2d *p = s->first;
  cl_rows r;
  r.n = 0;
  for (int64_t c = 0; c < p->c; c++)
    for (int64_t i = 0; i < p->kh; i++) {
      int64_t ih = oy * p->stride_h - p->pad_t + i * p->dil_h;
      if (ih < 0 || ih >= p->h) continue;
      r.x[r.n] = s->x + c * s->hw + ih * p->w;
      r.wt[r.n++] = s->wt + (c * p->kh + i) * p->kw * 16;
    }
  int64_t sw = p->stride_w, reach = (p->kw - 1) * p->dil_w;
  /* the columns [lo, hi) whose taps all lie inside the row */
  int64_t lo = (p->pad_l + sw - 1) / sw, hi = p->w - 1 - reach + p->pad_l < 0 ? 0 : (p->w - 1 - reach + p->pad_l) / sw + 1;
  if (hi > n) hi = n;
  if (lo > hi) lo = hi;
  int64_t c = 0;
  for (; c < lo; c++) cl_pixels(s, &r, c * sw - p->pad_l, dst + c * 16, 1, 0);
  for (; c + 8 <= hi; c += 8) cl_pixels(s, &r, c * sw - p->pad_l, dst + c * 16, 8, 1);
  if (hi - c >= 4) cl_pixels(s, &r, c * sw - p->pad_l, dst + c * 16, 4, 1), c += 4;
  if (hi - c >= 2) cl_pixels(s, &r, c * sw - p->pad_l, dst + c * 16, 2, 1), c += 2;
  for (; c < hi; c++) cl_pixels(s, &r, c * sw - p->pad_l, dst + c * 16, 1, 1);
  for (; c < n; c++) cl_pixels(s, &r, c * sw - p->pad_l, dst + c * 16, 1, 0);
}

static int then_dw_can(const primc_conv2d *pw, const primc_conv_epi *e1, const primc_conv2d *dw) {
  int64_t oh, ow;
  if (!pw || !dw || !conv_valid(pw) || !conv_valid(dw) || pw->groups != 1 || !is_depthwise(dw)) return 0;
  if (pw->w_packed_mr || pw->w_packed_panels || pw->w_winograd || pw->w_lanes || dw->w_packed_mr ||
      dw->w_packed_panels || dw->w_winograd || dw->w_lanes || (e1 && e1->res) || pw->c * pw->kh * pw->kw > PWL_MAX_K || !use_avx512())
    return 0;
  primc_conv2d_out_hw(pw, &oh, &ow);
  if (dw->n != pw->n || dw->c != pw->o || dw->h != oh || dw->w != ow) return 0;
  primc_conv2d_out_hw(dw, &oh, &ow);
  return dw->kh * dw->kw <= DWL_MAX_TAPS && dw->stride_h <= 4 && dwl_geometry(dw, oh, ow).band > 0;
}

/* Each pixel's 16 sums take a broadcast per multiply-add, where the GEMM's 14 x 32 tile takes one per
 * two: past a few dozen input channels the unfused pair is faster (Zen 4, 1 thread, fused vs not:
 * 16->96 at 112x112 then 3x3/2 0.71 -> 0.45 ms, 24->144 at 56x56 0.32 -> 0.23, 40->240 at 28x28
 * 0.19 -> 0.16, but 64->384 at 14x14 0.119 -> 0.130 and 96->576 at 14x14 0.25 -> 0.29). A 3x3/2
 * stem's 27 taps x channels pay too: 3->32 at 224x224 then 3x3/1 0.50 -> 0.38 ms (0.31 -> 0.22 on 2
 * threads). */
#define PWL_PAYS_K 48

int primc_conv2d_then_dw_pays(const primc_conv2d *pw, const primc_conv2d *dw) {
  return then_dw_can(pw, NULL, dw) && pw->c * pw->kh * pw->kw <= PWL_PAYS_K;
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
    for (int l = 0; l < 16; l++) {
      if (l < nch && e1->bias) bias[l] = e1->bias[(c0 + l) * e1->bias_stride];
      for (int64_t k = 0; k < K; k++) wt[k * 16 + l] = l < nch ? j->w1[(c0 + l) * K + k] : 0.0f;
    }
    dwl_src src = {.make = is_pointwise(pw) ? pwl_row : cl_row, .x = j->x + n * pw->c * P, .hw = P, .w = pw->w,
                   .nch = nch, .first = pw, .k = K, .wt = wt,
                   .bias = _mm512_loadu_ps(bias), .lo = _mm512_set1_ps(e1->lo), .hi = _mm512_set1_ps(e1->hi),
                   .silu = e1->silu};
    dwl_item(&j->d, n, c0, nch, &src, j->d.oh * part / j->parts, j->d.oh * (part + 1) / j->parts);
  }
}

int primc_conv2d_then_dw_f32(const primc_conv2d *pw, const float *x, const float *w1, const primc_conv_epi *e1,
                             const primc_conv2d *dw, const float *w2, const primc_conv_epi *e2, float *y) {
  primc_conv_epi none = {NULL, 0, NULL, -__builtin_inff(), __builtin_inff(), 0};
  if (!then_dw_can(pw, e1, dw) || !x || !w1 || !w2 || !y) return PRIMC_ERR_ARG;
  int64_t oh, ow;
  primc_conv2d_out_hw(dw, &oh, &ow);
  int64_t nx = pw->n * pw->c * pw->h * pw->w, ny = dw->n * dw->o * oh * ow;
  if (!e1) e1 = &none;
  if (!e2) e2 = &none;
  /* the sums go to y before the residual is added: a residual in y's place would be overwritten first */
  if (overlaps(y, ny, x, nx) || (e2->res && overlaps(y, ny, e2->res, ny))) return PRIMC_ERR_ARG;
  /* as many items as make whole rounds of the threads (9 blocks of 144 channels on 2 threads would be
   * 5 + 4): a block's row parts share their edge rows, remade by each. From PWL_PART_ROWS output rows
   * each thread takes one part of the rows of every block: it then reads the rows of x that the conv
   * before (a GEMM splitting pixels) made on its core, and writes the rows the GEMM after reads there.
   * By blocks, every core read all of x and wrote all rows, half of them the other core's; while this
   * VM's two vCPUs are far apart MobileNetV2's pairs ran 0.064-0.069 ms slower each than when they are
   * near, and the whole model on 2 threads (far, runs in ABBA order) 2.65-2.76 ms by blocks, 2.59-2.79
   * (mostly 2.59-2.65) by parts. Near, the remade edge rows cost about 1% (1.82-1.84 -> 1.83-1.85). */
  int64_t blocks = dw->n * ((dw->c + 15) / 16), t = primc_num_threads(), parts = 1;
  int part_major = t > 1 && oh >= PWL_PART_ROWS;
  if (part_major) {
    parts = t;
  } else {
    while (parts < t && parts < oh && blocks * parts % t) parts++;
    if (blocks * parts % t) parts = 1;
  }
  then_dw_job j = {{dw, NULL, w2, e2, y, y, oh, ow, 1}, pw, x, w1, e1, parts, part_major};
  primc_parallel_for(blocks * parts, then_dw_range, &j);
  return PRIMC_OK;
}
