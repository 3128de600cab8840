/* runtime/conv/conv.h: what the conv family's files share: the row table, the call a row runs, epilogue and im2col helpers. */
#ifndef PRIMC_CONV_INTERNAL_H
#define PRIMC_CONV_INTERNAL_H

#include "runtime/primc_rt.h"
#include "runtime/kernels.h"

#if PRIMC_X86
#include "runtime/avx2.h"
#include "runtime/avx512.h"

#include <immintrin.h>
#endif
#include <math.h>
#include <stdint.h>

/* ---------------------------------------------------------------- shapes */

static inline int cv_is_depthwise(const primc_conv2d *p) { return p->groups == p->c && p->o == p->c; }

/* weights plain or in GEMM strips (primc_sgemm_pack_a's), the layouts the GEMM rows read */
static inline int cv_w_strips_or_plain(const primc_conv2d *p) {
  return !p->w_packed_panels && !p->w_winograd && !p->w_lanes && !p->w_bf16;
}

/* a depthwise conv whose weights are plain (the depthwise rows' layout) */
static inline int cv_dw_plain(const primc_conv2d *p) {
  return cv_is_depthwise(p) && !p->w_packed_mr && cv_w_strips_or_plain(p);
}

/* the activations the AVX2 epilogues compute in ymm (cv_act256; the others in plain C) */
static inline int cv_act_ymm(int act) {
#if PRIMC_X86
  return act != PRIMC_ACT_F16 || primc_cpu_f16c();
#else
  return act == PRIMC_ACT_NONE;
#endif
}

static inline int cv_is_pointwise(const primc_conv2d *p) {
  return p->kh == 1 && p->kw == 1 && p->stride_h == 1 && p->stride_w == 1 && !p->pad_t && !p->pad_l && !p->pad_b &&
         !p->pad_r;
}

int primc_cv_valid(const primc_conv2d *p);

static inline int cv_overlaps(const float *a, int64_t na, const float *b, int64_t nb) {
  return a && b && (uintptr_t)a < (uintptr_t)(b + nb) && (uintptr_t)b < (uintptr_t)(a + na);
}

static inline int cv_use_avx512(void) { return primc_sgemm_isa() == PRIMC_ISA_AVX512; }


/* ---------------------------------------------------------------- the rows */

/* COL: the col scratch; BF16: planned only when the plan options ask for bf16 operands; EPI_RQ: the row's
 * epilogues run act RQ (for the others the executor requantizes y after the row). Every row may write y while it
 * reads x and a residual: the executor keeps y apart from both (but a residual that is y exactly) */
enum { CV_NEED_COL = 1, CV_NEED_BF16 = 4, CV_EPI_RQ = 8 };

/* one call of a row: p with its w_* fields set from the plan; e never NULL; the sums go to acc (y, or the
 * spare when y is the residual); y is apart from x; next, w2, e2: a PAIR row's depthwise conv */
typedef struct cv_call {
  const primc_conv2d *p;
  int64_t oh, ow;
  const float *x;
  const void *w;
  const primc_conv_epi *e;
  float *y, *acc, *col;
  const primc_conv2d *next;
  const float *w2;
  const primc_conv_epi *e2;
} cv_call;

typedef struct cv_row {
  const char *name;
  int cls, isa, layout, needs, fallback;
  int (*fits)(const primc_conv2d *p, const primc_conv2d *next);
  int64_t (*scratch)(const primc_conv2d *p);
  int (*run)(const cv_call *c);
} cv_row;

extern const cv_row primc_cv_rows[PRIMC_CONV_ROW_COUNT];

#define PRIMC_CONV_ROW(id, name, cls, isa, layout, needs, fallback, fits, scratch, run) \
  int fits(const primc_conv2d *p, const primc_conv2d *next);                             \
  int64_t scratch(const primc_conv2d *p);                                                \
  int run(const cv_call *c);
#include "runtime/conv/conv_rows.def"
#undef PRIMC_CONV_ROW

/* ---------------------------------------------------------------- epilogue: bias, residual, clamp */

typedef struct epi_ctx {
  const float *bias; /* bias of GEMM row m at bias[m * bias_stride], already offset to the group */
  int64_t bias_stride;
  const float *res; /* residual with C's layout (ldc), already offset to the group */
  float *y;         /* where the result goes, C's layout; may be C itself */
  float lo, hi;
  int act;
  const float *rq_scale; /* act RQ: row m's scale at rq_scale[m * rq_stride] as the bias; NULL: rq_c for all */
  int64_t rq_stride;
  float rq_c, rq_div, rq_zp;
  int64_t ldy; /* y's and the residual's row stride where it is not C's (C a buffer of the block's sums), else 0 */
  /* y and the residual held as bf16 channel pairs (primc_rt.h's PRIMC_CONV_*_PAIRS: the image's, of pairs_c
   * channels; then y, res NULL), NULL where f32 */
  uint32_t *y_pairs;
  const uint32_t *res_pairs;
  int64_t pairs_c;
} epi_ctx;

/* e's epilogue with the bias and scales moved to channel ch, y and the residual as given */
static inline epi_ctx cv_epi_of(const primc_conv_epi *e, int64_t ch, float *y, const float *res) {
  return (epi_ctx){e->bias ? e->bias + ch * e->bias_stride : NULL, e->bias_stride, res, y, e->lo, e->hi, e->act,
                   e->rq_scale ? e->rq_scale + ch * e->rq_scale_stride : NULL, e->rq_scale_stride, e->rq_scale_c,
                   e->rq_div, e->rq_zp, 0, NULL, NULL, 0};
}

/* row m's bias, and its scale under act RQ (1 otherwise) */
static inline float cv_bias_at(const epi_ctx *e, int64_t m) { return e->bias ? e->bias[m * e->bias_stride] : 0.0f; }
static inline float cv_scale_at(const epi_ctx *e, int64_t m) {
  return e->act != PRIMC_ACT_RQ ? 1.0f : e->rq_scale ? e->rq_scale[m * e->rq_stride] : e->rq_c;
}

/* channels [c0, c0 + n) of e's bias and act RQ scale in 8 lanes (0 and 1 past n) */
static inline void cv_lanes8_epi(const primc_conv_epi *e, int64_t c0, int n, float *bias, float *scale) {
  epi_ctx c = cv_epi_of(e, c0, NULL, NULL);
  for (int l = 0; l < 8; l++) bias[l] = l < n ? cv_bias_at(&c, l) : 0.0f, scale[l] = l < n ? cv_scale_at(&c, l) : 1.0f;
}

static inline float cv_clampf(float v, float lo, float hi) { return v < lo ? lo : v > hi ? hi : v; }

/* act RQ before the clamp: roundeven((trunc(c) * s + b) / div) + zp, one f32 operation at a time (-std=c11
 * contracts no multiply-add into an FMA) */
static inline float cv_rqf(const epi_ctx *e, float c, float b, float s) {
  return nearbyintf((truncf(c) * s + b) / e->rq_div) + e->rq_zp;
}

/* v * sigmoid(v); v itself above 87, where 1 + e^-v is 1 in f32 and e^-v would underflow (libm raises the flag,
 * the hardware may take an assist) */
static inline float cv_siluf(float v) { return v > 87.0f ? v : v / (1.0f + expf(-v)); }
/* the activation act (PRIMC_ACT_*) of v */
static inline float cv_actf(int act, float v) {
  return act == PRIMC_ACT_SILU   ? cv_siluf(v)
         : act == PRIMC_ACT_GELU ? 0.5f * v * (1.0f + erff(v * 0.70710678f))
         : act == PRIMC_ACT_F16  ? f16_to_f32(f32_to_f16(v))
         : act == PRIMC_ACT_BF16 ? primc_bf16_to_f32(primc_f32_to_bf16(v))
                                 : v;
}

/* y[n] = clamp(act(c[n] + b + res[n])), or clamp(cv_rqf(c[n], b, s)) under act RQ; NaN stays NaN (one
 * out-of-line copy: inlined into its callers' loops it ran slower) */
void primc_cv_epi_row_scalar(const epi_ctx *e, float *y, const float *c, const float *res, float b, float s,
                             int64_t nb);

#if PRIMC_X86
/* e^x to about 2e-7 relative: x = n ln2 + r, |r| <= ln2 / 2, a degree-6 polynomial for e^r, scaled by 2^n; 0
 * below -87.3, where e^x is subnormal: making one is a microcode assist on x86, and SiLU's v / (1 + e^-v) is
 * the same without it */
__attribute__((target("avx512f"))) static inline __m512 cv_exp512(__m512 x) {
  __mmask16 live = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.3f), _CMP_GE_OQ);
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.3f)), _mm512_set1_ps(89.0f));
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
  return _mm512_maskz_mov_ps(live, _mm512_scalef_ps(p, n));
}

/* v * sigmoid(v) = v / (1 + e^-v); e^-v overflows to inf for v < -89, giving -0 as it should */
__attribute__((target("avx512f"))) static inline __m512 cv_silu512(__m512 v) {
  return _mm512_div_ps(v, _mm512_add_ps(_mm512_set1_ps(1.0f), cv_exp512(_mm512_sub_ps(_mm512_setzero_ps(), v))));
}

/* erf to a few ulp, as codegen's vectorized erf computes it (primc_rt.h's PRIMC_ERF_P and PRIMC_ERFC_R) */
__attribute__((target("avx512f"))) static inline __m512 cv_erf512(__m512 x) {
  static const float p[7] = {PRIMC_ERF_P}, r[PRIMC_ERFC_R_N] = {PRIMC_ERFC_R};
  __m512 ax = _mm512_abs_ps(x), one = _mm512_set1_ps(1.0f), x2 = _mm512_mul_ps(ax, ax);
  __m512 ps = _mm512_set1_ps(p[0]);
  for (int i = 1; i < 7; i++) ps = _mm512_fmadd_ps(ps, x2, _mm512_set1_ps(p[i]));
  __m512 u = _mm512_sub_ps(_mm512_min_ps(_mm512_max_ps(ax, one), _mm512_set1_ps(PRIMC_ERFC_TO)), _mm512_set1_ps(PRIMC_ERFC_AT));
  __m512 rs = _mm512_set1_ps(r[0]);
  for (int i = 1; i < PRIMC_ERFC_R_N; i++) rs = _mm512_fmadd_ps(rs, u, _mm512_set1_ps(r[i]));
  __m512 y = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(ax, one, _CMP_LT_OQ), _mm512_sub_ps(one, rs), _mm512_mul_ps(ax, ps));
  /* the sign back; NaN stays NaN */
  __m512i sign = _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32((int)0x80000000u));
  y = _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(y), sign));
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), y, x);
}

/* the activation act (PRIMC_ACT_*) of v */
__attribute__((target("avx512f"))) static inline __m512 cv_act512(int act, __m512 v) {
  if (act == PRIMC_ACT_SILU) return cv_silu512(v);
  if (act == PRIMC_ACT_F16) return _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  if (act == PRIMC_ACT_BF16) return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(primc_bf16_round16(v)), 16));
  if (act != PRIMC_ACT_GELU) return v;
  __m512 h = _mm512_mul_ps(v, _mm512_set1_ps(0.5f));
  return _mm512_fmadd_ps(h, cv_erf512(_mm512_mul_ps(v, _mm512_set1_ps(0.70710678f))), h);
}

/* act RQ on 16 sums: the f32 steps of cv_rqf */
__attribute__((target("avx512f"))) static inline __m512 cv_rq512(__m512 c, __m512 b, __m512 s, float div, float zp) {
  __m512 v = _mm512_add_ps(_mm512_mul_ps(_mm512_roundscale_ps(c, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC), s), b);
  v = _mm512_roundscale_ps(_mm512_div_ps(v, _mm512_set1_ps(div)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  return _mm512_add_ps(v, _mm512_set1_ps(zp));
}

void primc_cv_epi_row512(const epi_ctx *e, float *y, const float *c, const float *res, float b, float s, int64_t nb);

/* cv_exp512 on ymm: the same steps, 2^n made in the exponent bits (n in [-126, 128] after the clamps: a normal
 * float, or inf at 128 as scalef gives) */
__attribute__((target("avx2,fma"))) static inline __m256 cv_exp256(__m256 x) {
  __m256 live = _mm256_cmp_ps(x, _mm256_set1_ps(-87.3f), _CMP_GE_OQ);
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(89.0f));
  __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145752f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.42860677e-6f), r);
  __m256 p = _mm256_set1_ps(1.0f / 720);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_and_ps(live, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
}

/* cv_erf512 on ymm (GELU's erf ran as a libm call per element on AVX2: an audio front end's 80 -> 384 conv with
 * GELU took 9.2 ms in its epilogue-fused call against 2.7 ms without the GELU) */
__attribute__((target("avx2,fma"))) static inline __m256 cv_erf256(__m256 x) {
  static const float p[7] = {PRIMC_ERF_P}, r[PRIMC_ERFC_R_N] = {PRIMC_ERFC_R};
  __m256 sm = _mm256_set1_ps(-0.0f), ax = _mm256_andnot_ps(sm, x), one = _mm256_set1_ps(1.0f), x2 = _mm256_mul_ps(ax, ax);
  __m256 ps = _mm256_set1_ps(p[0]);
  for (int i = 1; i < 7; i++) ps = _mm256_fmadd_ps(ps, x2, _mm256_set1_ps(p[i]));
  __m256 u = _mm256_sub_ps(_mm256_min_ps(_mm256_max_ps(ax, one), _mm256_set1_ps(PRIMC_ERFC_TO)), _mm256_set1_ps(PRIMC_ERFC_AT));
  __m256 rs = _mm256_set1_ps(r[0]);
  for (int i = 1; i < PRIMC_ERFC_R_N; i++) rs = _mm256_fmadd_ps(rs, u, _mm256_set1_ps(r[i]));
  __m256 y = _mm256_blendv_ps(_mm256_sub_ps(one, rs), _mm256_mul_ps(ax, ps), _mm256_cmp_ps(ax, one, _CMP_LT_OQ));
  y = _mm256_or_ps(y, _mm256_and_ps(x, sm)); /* the sign back; NaN stays NaN */
  return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

/* the activation act (PRIMC_ACT_*) of v on ymm; F16 (rounding through half) where the CPU has F16C */
__attribute__((target("avx2,fma,f16c"))) static inline __m256 cv_act256(int act, __m256 v) {
  if (act == PRIMC_ACT_SILU) /* v / (1 + e^-v); e^-v is inf below -89, giving -0 */
    return _mm256_div_ps(v, _mm256_add_ps(_mm256_set1_ps(1.0f), cv_exp256(_mm256_sub_ps(_mm256_setzero_ps(), v))));
  if (act == PRIMC_ACT_F16) return _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  if (act == PRIMC_ACT_BF16) { /* primc_f32_to_bf16's integer steps, widened back */
    __m256i u = _mm256_castps_si256(v);
    __m256i r = _mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1))));
    r = _mm256_blendv_epi8(r, _mm256_or_si256(u, _mm256_set1_epi32(0x400000)), _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)));
    return _mm256_castsi256_ps(_mm256_and_si256(r, _mm256_set1_epi32((int)0xffff0000u)));
  }
  if (act != PRIMC_ACT_GELU) return v;
  __m256 h = _mm256_mul_ps(v, _mm256_set1_ps(0.5f));
  return _mm256_fmadd_ps(h, cv_erf256(_mm256_mul_ps(v, _mm256_set1_ps(0.70710678f))), h);
}

/* act RQ on 8 sums: the f32 steps of cv_rqf */
__attribute__((target("avx2,fma"))) static inline __m256 cv_rq256(__m256 c, __m256 b, __m256 s, float div, float zp) {
  __m256 v = _mm256_add_ps(_mm256_mul_ps(_mm256_round_ps(c, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC), s), b);
  v = _mm256_round_ps(_mm256_div_ps(v, _mm256_set1_ps(div)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  return _mm256_add_ps(v, _mm256_set1_ps(zp));
}

/* the AVX2 epilogue row: any activation cv_act_ymm takes (the caller runs others in plain C) */
void primc_cv_epi_row256(const epi_ctx *e, float *y, const float *c, const float *res, float b, float s, int64_t nb);

/* The 8-lane rows (dw_lanes8, group_lanes8: depthwise_avx2.c, grouped_avx2.c): an item's input channels as
 * zero-bordered [row][col][8] band tiles, a band's sums as [pixel][8] for up to 8 output channels */
typedef struct t8_ctx {
  const primc_conv2d *p;
  const float *wt; /* the row's weights for the item */
  int64_t pw, ow;  /* tile columns, output row width */
  int fused;       /* the epilogue in the lanes: bias (a lane per output channel), act, clamp */
  const float *bias;
  float lo, hi;
  int act;
  const float *scale; /* act RQ: a lane per output channel, as the bias */
  float div, zp;
} t8_ctx;
typedef void (*t8_band_fn)(const t8_ctx *d, const float *tile, int64_t rows, float *out);
/* Where an 8-lane item's tile rows come from when not from its input planes: the first conv of a fused pair
 * (pair.c), which makes input row ih's columns [0, n) of the item's 8 channels at dst[column][8] from its own
 * input x (hw, w: its planes' size and row width), k taps x input channels, weights wt[k][8], bias[8] and clamp
 * [lo, hi] after act in the lanes */
typedef struct t8_src {
  void (*make)(const struct t8_src *s, int64_t ih, int64_t n, float *dst);
  const float *x;
  const primc_conv2d *first; /* the first conv */
  int64_t hw, w, k;
  const float *wt, *bias;
  float lo, hi;
  int act;
  const float *scale; /* act RQ: 8 lanes, as the bias */
  float div, zp;
} t8_src;
struct dw_job;
/* output rows [oy_b, oy_e) of an item; src NULL: tiles from channels [ci0, ci0 + nci) of image n's planes */
void primc_cv_t8_item(const struct dw_job *j, t8_ctx *d, int64_t n, int64_t ci0, int nci, int64_t co0, int nco,
                      t8_band_fn band, const t8_src *src, int64_t oy_b, int64_t oy_e);
/* weights of nch <= 8 channels, rows of k floats from w, as wt[k][8] (lanes past nch zero): primc_cv_lanes_weights'
 * 8-lane form */
void primc_cv_lanes8_weights(const float *w, int64_t k, int nch, float *wt);
/* dw_lanes8's item: the depthwise conv of channels [c0, c0 + nch) of image n, output rows [oy_b, oy_e) */
void primc_cv_dw8_item(const struct dw_job *j, int64_t n, int64_t c0, int nch, const t8_src *src, int64_t oy_b,
                       int64_t oy_e);

/* the fused epilogue on NB pixels' sums, as primc_cv_epi_row256: clamp(act(sum + bias)) or act RQ's, NaN kept */
__attribute__((target("avx2,fma,f16c"))) static inline void cv_t8_epi(const t8_ctx *d, __m256 *a, const int NB) {
  if (!d->fused) return;
  __m256 vb = _mm256_load_ps(d->bias), lo = _mm256_set1_ps(d->lo), hi = _mm256_set1_ps(d->hi);
  if (d->act == PRIMC_ACT_RQ) {
    __m256 vs = _mm256_load_ps(d->scale);
#pragma GCC unroll 8
    for (int b = 0; b < NB; b++) a[b] = _mm256_min_ps(hi, _mm256_max_ps(lo, cv_rq256(a[b], vb, vs, d->div, d->zp)));
    return;
  }
#pragma GCC unroll 8
  for (int b = 0; b < NB; b++) {
    __m256 v = _mm256_add_ps(a[b], vb);
    if (d->act) v = cv_act256(d->act, v);
    a[b] = _mm256_min_ps(hi, _mm256_max_ps(lo, v));
  }
}
#endif

/* one row of the epilogue on isa (PRIMC_ISA_*, the caller's primc_sgemm_isa() read once, or the ISA its row runs
 * on): AVX-512, AVX2 when the activation is none or SiLU, else plain C */
static inline void cv_epi_row(int isa, const epi_ctx *e, float *y, const float *c, const float *res, float b,
                              float s, int64_t nb) {
#if PRIMC_X86
  if (isa == PRIMC_ISA_AVX512) {
    primc_cv_epi_row512(e, y, c, res, b, s, nb);
    return;
  }
  if (cv_act_ymm(e->act) && isa == PRIMC_ISA_AVX2) {
    primc_cv_epi_row256(e, y, c, res, b, s, nb);
    return;
  }
#endif
  (void)isa;
  primc_cv_epi_row_scalar(e, y, c, res, b, s, nb);
}
/* pairs.c: the epilogue of channels [m0, m0 + mb) (m0 and mb even) over pixels [q, q + n), their sums from c (rows
 * ldc apart), where e's y or residual are channel pairs */
void primc_cv_epi_pairs(int isa, const epi_ctx *e, int64_t m0, int64_t mb, int64_t q, const float *c, int64_t ldc,
                        int64_t n);
/* primc_epilogue over a tile of C (rows are output channels, columns pixels) */
void primc_cv_epi_rows(void *ctx, float *C, int64_t ldc, int64_t m0, int64_t n0, int64_t mb, int64_t nb);
int primc_cv_epi_needed(const primc_conv_epi *e);
/* bf16_direct.c: whether the conv's bf16 weights are packed with K tap-major (k = tap * C/groups + c: convs of
 * stride 1 and several taps or of stride 2, over whole blocks of 32 channels); whether this CPU runs such a conv in
 * place (primc_cv_bf16_direct: the bf16 GEMM's AVX512-BF16 or AMX row is the active one); one group's conv that way, its
 * weights wg tap-major: into acc (og x oh * ow), or through the epilogue e (the group's) when e is not NULL */
int primc_cv_bf16_taps_major(const primc_conv2d *p);
/* the K of the conv's packed bf16 weights: C/groups x taps, a few channels padded to an even count where tap-major */
int64_t primc_cv_bf16_k(const primc_conv2d *p);
/* whether the conv is tap-major on a few channels padded to an even count (an image's 1, 3 or 4) */
int primc_cv_bf16_few(const primc_conv2d *p);
/* whether the bf16 row runs the conv in place where primc_cv_bf16_direct_runs(): the tap-major ones, and 1x1s of
 * stride 1 over blocks of 32 channels whose weights are too large to stay in cache between calls */
int primc_cv_bf16_in_place(const primc_conv2d *p);
int primc_cv_bf16_direct_runs(void);
/* xp: x held as bf16 channel pairs (the image's; xg then unused), or NULL; y and the residual as e says */
int primc_cv_bf16_direct(const primc_conv2d *p, const float *xg, const void *wg, int64_t oh, int64_t ow, float *acc,
                         const epi_ctx *e, const uint32_t *xp);
/* pairs.c: the conv run on f32 copies of the maps p->store says are pairs, the result made pairs where y is */
int primc_cv_run_unpaired(const primc_conv2d *p, const primc_conv_plan *plan, const void *x, const void *w,
                          const primc_conv_epi *e, void *y, float *spare, float *col);

/* e with y, res and bias moved to channel ch of planes of P pixels */
/* the epilogue of image n of a call: its residual and output offset to that image */
static inline epi_ctx cv_image_epi(const cv_call *k, int64_t n) {
  const primc_conv_epi *e = k->e;
  int64_t yoff = n * k->p->o * k->oh * k->ow;
  return cv_epi_of(e, 0, k->y + yoff, e->res ? e->res + yoff : NULL);
}
/* image n of a call's input */
static inline const float *cv_image_x(const cv_call *k, int64_t n) { return k->x + n * k->p->c * k->p->h * k->p->w; }

static inline epi_ctx cv_epi_at(const epi_ctx *e, int64_t ch, int64_t P) {
  epi_ctx c = *e;
  c.y += ch * P;
  c.res = e->res ? e->res + ch * P : NULL;
  c.bias = e->bias ? e->bias + ch * e->bias_stride : NULL;
  c.rq_scale = e->rq_scale ? e->rq_scale + ch * e->rq_stride : NULL;
  return c;
}

#if PRIMC_X86
/* pixels [0, mb) x channels [0, nb) of a C^T tile (rows ldc apart) into y's channel rows from pixel m0 on,
 * through the epilogue (AVX-512) */
void primc_cv_ct_store(const epi_ctx *e, int64_t P, const float *ct, int64_t ldc, int64_t m0, int64_t mb, int64_t nb);
#endif
/* prefetches for writing the pixels [m0, m0 + mb) of nb channels P apart that cv_ct_store will write: their lines
 * become this core's before the stores reach them */
void primc_cv_prefetch_out(const epi_ctx *e, int64_t P, int64_t m0, int64_t mb, int64_t nb);
/* On more than one thread a kernel's output lines were mostly last held by another core (the kernels of the run
 * before, which reused the workspace, split their work differently), and each store first waits for the line to
 * come over: SqueezeNet's 3 -> 64 stem, 3 MB of output, took 0.28 ms on 1 thread and on 2, where alone it takes
 * 0.145 on 2. Prefetched for writing at the start of each band it takes 0.25. On one thread they are this core's
 * already, and the prefetches cost 3%. The depthwise lanes row does the same per band (MnasNet's 480-channel 5x5 at
 * 14x14: 0.067 -> 0.048 ms on 2 threads in the model); the GEMM rows' tiles gained nothing from it, nor did the pair */
static inline int cv_pf_out(void) { return PRIMC_X86 && primc_num_threads() > 1; }
/* the same on any CPU: primc_cv_ct_store with AVX-512, else each channel's pixels gathered, then cv_epi_row */
void cv_ct_store(const epi_ctx *e, int64_t P, const float *ct, int64_t ldc, int64_t m0, int64_t mb, int64_t nb);
#if PRIMC_X86

/* ---------------------------------------------------------------- copies and im2col */

void primc_cv_copy_stride2_512(float *dst, const float *src, int64_t n);
#endif
void primc_cv_copy_strided(float *dst, const float *src, int64_t n, int64_t s);

typedef struct col_src {
  const primc_conv2d *p;
  const float *x; /* the group's first input channel */
  int64_t oh, ow;
  int vec; /* AVX-512 rows (stride 1 or 2) */
} col_src;
/* primc_brow_fn: row k = (c, i, j) of the column matrix, output positions [n0, n0 + nc) */
void primc_cv_col_row(void *ctx, int64_t k, int64_t n0, int64_t nc, float *dst);
/* the column matrix of cg channels from x into col, split over the threads when large */
void primc_cv_im2col_par(const primc_conv2d *p, const float *x, int64_t cg, int64_t oh, int64_t ow, float *col);

/* ---------------------------------------------------------------- what the planner and the pair read */

int64_t primc_cv_direct_wph(const primc_conv2d *p, int64_t ow);
int primc_cv_direct_can(const primc_conv2d *p);
/* the 2x2 tiles one round of the Winograd row's GEMMs takes: an image's, times the images a round gathers */
int64_t primc_cv_wino_round_tiles(const primc_conv2d *p, int64_t oh, int64_t ow);
int primc_cv_dwl_cols_ok(const primc_conv2d *p);
/* the bf16 row (bf16.c): bytes from one group's bf16 weight tiles to the next, the packing, and their check */
size_t primc_cv_bf16_stride(int64_t og, int64_t kk);
int primc_cv_bf16_pack(const primc_conv2d *p, const float *w, void *dst);
int primc_cv_bf16_check(const primc_conv2d *p, const void *w, size_t bytes);

/* bytes from one group's W^T panels to the next, as packed on this machine; and the check of packed ones */
size_t primc_cv_panels_stride(int64_t og, int64_t kk);
int primc_cv_panels_check(const primc_conv2d *p, const void *w, size_t avail, size_t *stride);

/* a depthwise conv's job, shared by its rows and the pair's second half (and the grouped 8-lane row) */
typedef struct dw_job {
  const primc_conv2d *p;
  const float *x, *w;
  const primc_conv_epi *e;
  float *acc, *y; /* the sums go to acc, the epilogue's results to y (may be acc) */
  int64_t oh, ow;
  int isa;    /* PRIMC_ISA_*: what the row's code and epilogue may use */
  int pf_out; /* each band's output lines prefetched for writing first (cv_pf_out) */
} dw_job;

#if PRIMC_X86
/* an AVX2 row's run: items [0, items) of the call's dw_job over the pool */
static inline int cv_run_avx2(const cv_call *c, int64_t items, void (*range)(void *ctx, int64_t b, int64_t e)) {
  dw_job j = {c->p, c->x, c->w, c->e, c->acc, c->y, c->oh, c->ow, PRIMC_ISA_AVX2, 0};
  primc_parallel_for(items, range, &j);
  return PRIMC_OK;
}
#endif

/* input channels from which the AVX2 direct lanes run their 3-pixel x 32-channel tile (lanes.c); the AVX2 tuning
 * lets widening convs into the lanes from there (plan.c) */
#define CV_DL_TILE3_MIN_C 16

#define DWL_MAX_TAPS 49

typedef struct dwl_geo {
  int64_t pw;   /* tile columns: padded input columns the outputs read */
  int64_t band; /* output rows per band */
  int64_t taps;
} dwl_geo;
#define DWL_TILE_FLOATS 16384 /* a band's input tile, on the stack (64 KiB) */
#define DWL_OUT_FLOATS 4096   /* its sums: 4096 / lanes pixels */
/* for channels in `lanes` lanes (16: dw_lanes, 8: dw_lanes8) */
dwl_geo primc_cv_dwl_geometry(const primc_conv2d *p, int64_t oh, int64_t ow, int lanes);

#if PRIMC_X86
/* Where a band's tile rows come from: the input planes, transposed (plain), or made by the first conv of
 * a fused pair from its own input (pair.c). make writes input row ih's columns [0, n) of the source's 16
 * channels at dst[column][16]. */
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
  int act;
} dwl_src;
/* weights of nch <= 16 channels, rows of k floats from w, as wt[k][16] (lanes past nch zero), by register
 * transposes: a scalar copy was a quarter of a 5x5 depthwise conv on 7x7 planes */
void primc_cv_lanes_weights(const float *w, int64_t k, int nch, float *wt);
/* the depthwise conv of 16 channels [c0, c0 + nch) of image n, output rows [oy_b, oy_e), input rows by src */
void primc_cv_dwl_item(const dw_job *j, int64_t n, int64_t c0, int nch, const dwl_src *src, int64_t oy_b,
                       int64_t oy_e);
#endif

#endif
