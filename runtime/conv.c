/* runtime/conv.c: fp32 2-D convolution (NCHW, OIHW) on primc_sgemm: implicit im2col, 1x1 as plain GEMM, direct depthwise. */
#include "runtime/primc_rt.h"

#include <immintrin.h>
#include <string.h>

/*
 * One GEMM per (image, group): Y_g[Og][OH*OW] = W_g[Og][Cg*KH*KW] * X_col[Cg*KH*KW][OH*OW].
 * X_col is never stored: primc_sgemm_gen_b asks for it row by row while packing a B block, so the
 * only memory is primc_sgemm's per-thread buffer. Bias and ReLU run in the GEMM epilogue on each
 * finished tile. Depthwise convs have no reduction across channels worth a GEMM: direct loops,
 * one output plane per work item, the stride-1 inner loop as a vector axpy.
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

/* ---------------------------------------------------------------- epilogue: bias, relu */

typedef struct epi_ctx {
  const float *bias; /* indexed by GEMM row, already offset to the group */
  int relu;
} epi_ctx;

static void epi_bias_relu(void *ctx, float *C, int64_t ldc, int64_t m0, int64_t n0, int64_t mb, int64_t nb) {
  const epi_ctx *e = ctx;
  for (int64_t m = 0; m < mb; m++) {
    float *row = C + m * ldc, b = e->bias ? e->bias[m0 + m] : 0.0f;
    if (e->relu)
      for (int64_t n = 0; n < nb; n++) row[n] = row[n] + b > 0 ? row[n] + b : 0.0f;
    else
      for (int64_t n = 0; n < nb; n++) row[n] += b;
  }
}

/* ---------------------------------------------------------------- implicit im2col */

typedef struct col_src {
  const primc_conv2d *p;
  const float *x; /* the group's first input channel */
  int64_t oh, ow;
} col_src;

/* row k = (c, i, j) of the column matrix, output positions [n0, n0 + nc) */
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
    memset(d, 0, (size_t)lo * sizeof(float));
    if (hi > lo) {
      const float *src = row + off + (x + lo) * sw;
      if (sw == 1)
        memcpy(d + lo, src, (size_t)(hi - lo) * sizeof(float));
      else
        for (int64_t t = lo; t < hi; t++) d[t] = src[(t - lo) * sw];
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
  const float *x, *w, *bias;
  float *y;
  int64_t oh, ow;
  int vec;
} dw_job;

/* one output plane: for each output row, every tap adds a shifted input row */
static void dw_plane(const dw_job *j, int64_t plane) {
  const primc_conv2d *p = j->p;
  int64_t c = plane % p->c;
  const float *x = j->x + plane * p->h * p->w, *w = j->w + c * p->kh * p->kw;
  float *y = j->y + plane * j->oh * j->ow, b = j->bias ? j->bias[c] : 0.0f;
  for (int64_t oy = 0; oy < j->oh; oy++) {
    float *yr = y + oy * j->ow;
    for (int64_t t = 0; t < j->ow; t++) yr[t] = b;
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
    if (p->relu)
      for (int64_t t = 0; t < j->ow; t++) yr[t] = yr[t] > 0 ? yr[t] : 0.0f;
  }
}

static void dw_range(void *ctx, int64_t b, int64_t e) {
  for (int64_t i = b; i < e; i++) dw_plane(ctx, i);
}

static int is_depthwise(const primc_conv2d *p) { return p->groups == p->c && p->o == p->c; }

static int is_pointwise(const primc_conv2d *p) {
  return p->kh == 1 && p->kw == 1 && p->stride_h == 1 && p->stride_w == 1 && !p->pad_t && !p->pad_l && !p->pad_b &&
         !p->pad_r;
}

/* ---------------------------------------------------------------- entry */

int primc_conv2d_f32(const primc_conv2d *p, const float *x, const float *w, const float *bias, float *y) {
  if (!p || !conv_valid(p)) return PRIMC_ERR_ARG;
  int64_t oh, ow;
  primc_conv2d_out_hw(p, &oh, &ow);
  if (is_depthwise(p)) {
    dw_job j = {p, x, w, bias, y, oh, ow, primc_sgemm_isa() == PRIMC_ISA_AVX512};
    primc_parallel_for(p->n * p->c, dw_range, &j);
    return PRIMC_OK;
  }
  int64_t cg = p->c / p->groups, og = p->o / p->groups, kk = cg * p->kh * p->kw, P = oh * ow;
  for (int64_t n = 0; n < p->n; n++)
    for (int64_t g = 0; g < p->groups; g++) {
      const float *xg = x + (n * p->c + g * cg) * p->h * p->w, *wg = w + g * og * kk;
      float *yg = y + (n * p->o + g * og) * P;
      epi_ctx e = {bias ? bias + g * og : NULL, p->relu};
      primc_epilogue epi = bias || p->relu ? epi_bias_relu : NULL;
      int st;
      if (is_pointwise(p)) {
        st = primc_sgemm_epi(0, 0, og, P, kk, 1.0f, wg, kk, xg, P, 0.0f, yg, P, epi, &e);
      } else {
        col_src s = {p, xg, oh, ow};
        st = primc_sgemm_gen_b(0, og, P, kk, 1.0f, wg, kk, col_row, &s, 0.0f, yg, P, epi, &e);
      }
      if (st != PRIMC_OK) return st;
    }
  return PRIMC_OK;
}
