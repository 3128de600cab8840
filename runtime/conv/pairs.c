/* runtime/conv/pairs.c: maps held as bf16 channel pairs between --autocast bf16 convs: their size, conversions, which convs read and write them in place, and the f32 run around any other. */
#include "runtime/conv/conv.h"
#include "runtime/gemm/bgemm.h"

#include <stdlib.h>
#include <string.h>

/* words of one image's map */
static int64_t image_words(int64_t c, int64_t hw) { return (hw + 31) / 32 * 32 * ((c + 31) / 32 * 16); }

int64_t primc_conv_pairs_bytes(int64_t n, int64_t c, int64_t h, int64_t w) {
  if (n < 0 || c < 0 || h < 0 || w < 0) return -1;
  return n * image_words(c, h * w) * 4;
}

void primc_conv_pairs_from_f32(const float *x, int64_t n, int64_t c, int64_t hw, uint32_t *d) {
  int64_t iw = image_words(c, hw);
  memset(d, 0, sizeof *d * (size_t)(n * iw)); /* the pairs past c and the pixels past hw */
  for (int64_t i = 0; i < n; i++)
    for (int64_t ch = 0; ch < c; ch++)
      for (int64_t q = 0; q < hw; q++)
        d[i * iw + primc_conv_pair_at(c, ch / 2, q)] |= (uint32_t)primc_f32_to_bf16(x[(i * c + ch) * hw + q]) << (ch % 2 * 16);
}

void primc_conv_pairs_to_f32(const uint32_t *s, int64_t n, int64_t c, int64_t hw, float *x) {
  int64_t iw = image_words(c, hw);
  for (int64_t i = 0; i < n; i++)
    for (int64_t ch = 0; ch < c; ch++)
      for (int64_t q = 0; q < hw; q++) {
        uint32_t v = s[i * iw + primc_conv_pair_at(c, ch / 2, q)];
        x[(i * c + ch) * hw + q] = primc_bf16_to_f32((uint16_t)(ch % 2 ? v >> 16 : v));
      }
}

int primc_conv_pairs_in_place(const primc_conv2d *p) {
  if (!p || !primc_cv_valid(p) || p->groups != 1 || p->c % 32 || p->o % 2) return 0;
  /* a 1x1 on the bf16 GEMM (any of its rows); its y pairs only where its sums stay in the GEMM's thread buffers (K
   * one block), else they pass through y */
  int one = p->kh == 1 && p->kw == 1 && p->stride_h == 1 && p->stride_w == 1 && p->dil_h == 1 && p->dil_w == 1 &&
            !p->pad_t && !p->pad_l && !p->pad_b && !p->pad_r && (p->c <= primc_bg_epi_k() || !(p->store & PRIMC_CONV_Y_PAIRS));
  return one || (primc_cv_bf16_taps_major(p) && primc_cv_bf16_direct_runs());
}

/* the conv on f32 copies of whatever p holds as pairs, its f32 result made pairs into y */
int primc_cv_run_unpaired(const primc_conv2d *p, const primc_conv_plan *plan, const void *x, const void *w,
                          const primc_conv_epi *e, void *y, float *spare, float *col) {
  int64_t oh, ow;
  if (!primc_conv2d_out_hw(p, &oh, &ow)) return PRIMC_ERR_ARG;
  int64_t nx = p->n * p->c * p->h * p->w, ny = p->n * p->o * oh * ow;
  int xs = p->store & PRIMC_CONV_X_PAIRS, ys = p->store & PRIMC_CONV_Y_PAIRS, rs = e && e->res && (p->store & PRIMC_CONV_RES_PAIRS);
  float *xf = xs ? malloc(sizeof *xf * (size_t)nx) : NULL, *rf = rs ? malloc(sizeof *rf * (size_t)ny) : NULL;
  float *yf = ys ? malloc(sizeof *yf * (size_t)ny) : NULL;
  int st = PRIMC_ERR_RUNTIME;
  if ((xs && !xf) || (rs && !rf) || (ys && !yf)) goto done;
  /* x and the residual are read whole before y is written: y may lie over either */
  if (xs) primc_conv_pairs_to_f32(x, p->n, p->c, p->h * p->w, xf);
  if (rs) primc_conv_pairs_to_f32((const uint32_t *)e->res, p->n, p->o, oh * ow, rf);
  primc_conv2d f = *p;
  f.store = 0;
  primc_conv_epi ef;
  if (e) ef = *e, ef.res = rs ? rf : e->res;
  st = primc_conv_run(&f, plan, xs ? xf : x, w, e ? &ef : NULL, ys ? yf : y, ys ? NULL : spare, col);
  if (st == PRIMC_OK && ys) primc_conv_pairs_from_f32(yf, p->n, p->o, oh * ow, y);
done:
  free(xf);
  free(rf);
  free(yf);
  return st;
}

/* pixels from at on (at most left) within one 16-word panel row */
static inline int64_t run_of(int64_t at, int64_t left) { return 16 - at % 16 < left ? 16 - at % 16 : left; }

/* Pixels [q, q + n) of pair kp of a map of pc channels held as pairs, widened into lo (the low halves) and hi, or
 * narrowed from them: a 16-word panel row at a time */
#if PRIMC_X86
#include <immintrin.h>

#define PAIRS512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

static PAIRS512 void widen512(const uint32_t *s, int64_t pc, int64_t kp, int64_t q, int64_t n, float *lo, float *hi) {
  const __m512i top = _mm512_set1_epi32((int)0xffff0000u);
  for (int64_t x = 0, run; x < n; x += run) {
    run = run_of(q + x, n - x);
    __mmask16 m = primc_low_mask16(run);
    __m512i v = _mm512_maskz_loadu_epi32(m, s + primc_conv_pair_at(pc, kp, q + x));
    _mm512_mask_storeu_ps(lo + x, m, _mm512_castsi512_ps(_mm512_slli_epi32(v, 16)));
    _mm512_mask_storeu_ps(hi + x, m, _mm512_castsi512_ps(_mm512_and_si512(v, top)));
  }
}

/* vcvtneps2bf16 rounds to nearest even as primc_f32_to_bf16 does (subnormals flushed to zero) */
static PAIRS512 void narrow512(const float *lo, const float *hi, int64_t pc, int64_t kp, int64_t q, int64_t n, uint32_t *d) {
  for (int64_t x = 0, run; x < n; x += run) {
    run = run_of(q + x, n - x);
    __mmask16 m = primc_low_mask16(run);
    __m256i a = (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, lo + x));
    __m256i b = (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, hi + x));
    __m512i v = _mm512_or_si512(_mm512_cvtepu16_epi32(a), _mm512_slli_epi32(_mm512_cvtepu16_epi32(b), 16));
    _mm512_mask_storeu_epi32(d + primc_conv_pair_at(pc, kp, q + x), m, v);
  }
}

/* primc_cv_epi_pairs on AVX-512 with bf16 conversions for the epilogues without an activation, on channels m and
 * m + 1 at pixels [q, q + run) (one panel row's; RES 0 none, 1 f32, 2 pairs; YP: y is pairs), the sums at c0 and
 * c0 + ldc */
static inline __attribute__((always_inline)) PAIRS512 void pair_run(const epi_ctx *e, int64_t m, int64_t q, int64_t run,
                                                                      const float *c0, int64_t ldc, const int RES,
                                                                      const int YP) {
  const __m512 lo = _mm512_set1_ps(e->lo), hi = _mm512_set1_ps(e->hi);
  const __mmask16 k = primc_low_mask16(run);
  const int64_t ld = e->ldy, w = primc_conv_pair_at(e->pairs_c, m / 2, q), off = m * ld + q;
  __m512 v0 = _mm512_add_ps(_mm512_maskz_loadu_ps(k, c0), _mm512_set1_ps(cv_bias_at(e, m)));
  __m512 v1 = _mm512_add_ps(_mm512_maskz_loadu_ps(k, c0 + ldc), _mm512_set1_ps(cv_bias_at(e, m + 1)));
  if (RES == 2) {
    __m512i r = _mm512_maskz_loadu_epi32(k, e->res_pairs + w);
    v0 = _mm512_add_ps(v0, _mm512_castsi512_ps(_mm512_slli_epi32(r, 16)));
    v1 = _mm512_add_ps(v1, _mm512_castsi512_ps(_mm512_and_si512(r, _mm512_set1_epi32((int)0xffff0000u))));
  } else if (RES == 1) {
    v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(k, e->res + off));
    v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(k, e->res + off + ld));
  }
  v0 = _mm512_min_ps(hi, _mm512_max_ps(lo, v0)); /* NaN kept, as primc_cv_epi_row512 */
  v1 = _mm512_min_ps(hi, _mm512_max_ps(lo, v1));
  if (!YP) {
    _mm512_mask_storeu_ps(e->y + off, k, v0);
    _mm512_mask_storeu_ps(e->y + off + ld, k, v1);
    return;
  }
  __m256i a = (__m256i)_mm512_cvtneps_pbh(v0), b = (__m256i)_mm512_cvtneps_pbh(v1);
  _mm512_mask_storeu_epi32(e->y_pairs + w, k,
                           _mm512_or_si512(_mm512_cvtepu16_epi32(a), _mm512_slli_epi32(_mm512_cvtepu16_epi32(b), 16)));
}

/* pairs y a panel row at a time down the channel pairs (each pair's words 64 bytes after the last one's); f32 y a
 * channel pair at a time along its rows */
static inline __attribute__((always_inline)) PAIRS512 void epi_pairs512(const epi_ctx *e, int64_t m0, int64_t mb,
                                                                          int64_t q, const float *c, int64_t ldc,
                                                                          int64_t n, const int RES, const int YP) {
  if (YP) {
    for (int64_t x = 0, run; x < n; x += run) {
      run = run_of(q + x, n - x);
      for (int64_t m = m0; m < m0 + mb; m += 2) pair_run(e, m, q + x, run, c + (m - m0) * ldc + x, ldc, RES, 1);
    }
    return;
  }
  for (int64_t m = m0; m < m0 + mb; m += 2)
    for (int64_t x = 0, run; x < n; x += run) {
      run = run_of(q + x, n - x);
      pair_run(e, m, q + x, run, c + (m - m0) * ldc + x, ldc, RES, 0);
    }
}

static PAIRS512 void epi_pairs512_any(const epi_ctx *e, int64_t m0, int64_t mb, int64_t q, const float *c, int64_t ldc,
                                      int64_t n) {
  int res = e->res_pairs ? 2 : e->res ? 1 : 0;
  if (e->y_pairs) {
    if (res == 2) epi_pairs512(e, m0, mb, q, c, ldc, n, 2, 1);
    else if (res == 1) epi_pairs512(e, m0, mb, q, c, ldc, n, 1, 1);
    else epi_pairs512(e, m0, mb, q, c, ldc, n, 0, 1);
  } else {
    if (res == 2) epi_pairs512(e, m0, mb, q, c, ldc, n, 2, 0);
    else if (res == 1) epi_pairs512(e, m0, mb, q, c, ldc, n, 1, 0);
    else epi_pairs512(e, m0, mb, q, c, ldc, n, 0, 0);
  }
}
#endif

static void widen(const uint32_t *s, int64_t pc, int64_t kp, int64_t q, int64_t n, float *lo, float *hi, int v512) {
#if PRIMC_X86
  if (v512) {
    widen512(s, pc, kp, q, n, lo, hi);
    return;
  }
#endif
  for (int64_t i = 0; i < n; i++) {
    uint32_t v = s[primc_conv_pair_at(pc, kp, q + i)];
    lo[i] = primc_bf16_to_f32((uint16_t)v), hi[i] = primc_bf16_to_f32((uint16_t)(v >> 16));
  }
}

static void narrow(const float *lo, const float *hi, int64_t pc, int64_t kp, int64_t q, int64_t n, uint32_t *d, int v512) {
#if PRIMC_X86
  if (v512) {
    narrow512(lo, hi, pc, kp, q, n, d);
    return;
  }
#endif
  for (int64_t i = 0; i < n; i++)
    d[primc_conv_pair_at(pc, kp, q + i)] = primc_f32_to_bf16(lo[i]) | (uint32_t)primc_f32_to_bf16(hi[i]) << 16;
}

void primc_cv_epi_pairs(int isa, const epi_ctx *e, int64_t m0, int64_t mb, int64_t q, const float *c, int64_t ldc,
                        int64_t n) {
  const int v512 = isa == PRIMC_ISA_AVX512 && primc_bg_has_avx512bf16();
#if PRIMC_X86
  if (v512 && e->act == PRIMC_ACT_NONE) {
    epi_pairs512_any(e, m0, mb, q, c, ldc, n);
    return;
  }
#endif
  float t[2][16] __attribute__((aligned(64))), r[2][16] __attribute__((aligned(64)));
  const int64_t ld = e->ldy, pc = e->pairs_c;
  /* a panel row's pixels down the pairs: each pair's words lie 64 bytes after the last one's */
  for (int64_t x = 0, run; x < n; x += run) {
    run = run_of(q + x, n - x);
    for (int64_t m = m0; m < m0 + mb; m += 2) {
      if (e->res_pairs) widen(e->res_pairs, pc, m / 2, q + x, run, r[0], r[1], v512);
      for (int h = 0; h < 2; h++) {
        int64_t off = (m + h) * ld + q + x;
        const float *res = e->res_pairs ? r[h] : e->res ? e->res + off : NULL;
        cv_epi_row(isa, e, e->y_pairs ? t[h] : e->y + off, c + (m + h - m0) * ldc + x, res, cv_bias_at(e, m + h),
                   cv_scale_at(e, m + h), run);
      }
      if (e->y_pairs) narrow(t[0], t[1], pc, m / 2, q + x, run, e->y_pairs, v512);
    }
  }
}
