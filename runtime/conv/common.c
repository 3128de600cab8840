/* runtime/conv/common.c: what every conv row shares: output geometry, validation, the fused epilogue, strided copies, im2col. */
#include "runtime/conv/conv.h"

#include <stdlib.h>
#include <string.h>

static int64_t conv_out(int64_t in, int64_t k, int64_t s, int64_t d, int64_t p0, int64_t p1) {
  int64_t span = d * (k - 1) + 1, room = in + p0 + p1 - span;
  return s > 0 && d > 0 && k > 0 && room >= 0 ? room / s + 1 : 0;
}

int primc_conv2d_out_hw(const primc_conv2d *p, int64_t *oh, int64_t *ow) {
  *oh = conv_out(p->h, p->kh, p->stride_h, p->dil_h, p->pad_t, p->pad_b);
  *ow = conv_out(p->w, p->kw, p->stride_w, p->dil_w, p->pad_l, p->pad_r);
  return *oh > 0 && *ow > 0;
}

int primc_cv_valid(const primc_conv2d *p) {
  int64_t oh, ow;
  return p->n >= 0 && p->c > 0 && p->o > 0 && p->groups > 0 && p->c % p->groups == 0 && p->o % p->groups == 0 &&
         p->pad_t >= 0 && p->pad_l >= 0 && p->pad_b >= 0 && p->pad_r >= 0 && primc_conv2d_out_hw(p, &oh, &ow);
}

/* ---------------------------------------------------------------- epilogue: bias, residual, clamp */


void primc_cv_epi_row_scalar(const epi_ctx *e, float *y, const float *c, const float *res, float b, float s,
                             int64_t nb) {
  if (e->act == PRIMC_ACT_RQ) {
    for (int64_t n = 0; n < nb; n++) y[n] = cv_clampf(cv_rqf(e, c[n], b, s), e->lo, e->hi);
    return;
  }
  for (int64_t n = 0; n < nb; n++) {
    float v = c[n] + b + (res ? res[n] : 0.0f);
    y[n] = cv_clampf(cv_actf(e->act, v), e->lo, e->hi);
  }
}

#if PRIMC_X86
__attribute__((target("avx512f"))) void primc_cv_epi_row512(const epi_ctx *e, float *y, const float *c, const float *res,
                                                          float b, float s, int64_t nb) {
  __m512 vb = _mm512_set1_ps(b), vs = _mm512_set1_ps(s), lo = _mm512_set1_ps(e->lo), hi = _mm512_set1_ps(e->hi);
  int64_t n = 0;
  for (; n < nb; n += 16) {
    __mmask16 m = nb - n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (nb - n)) - 1);
    __m512 v;
    if (e->act == PRIMC_ACT_RQ) {
      v = cv_rq512(_mm512_maskz_loadu_ps(m, c + n), vb, vs, e->rq_div, e->rq_zp);
    } else {
      v = _mm512_add_ps(_mm512_maskz_loadu_ps(m, c + n), vb);
      if (res) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, res + n));
      if (e->act) v = cv_act512(e->act, v);
    }
    /* max/min return their second operand when one is NaN: v second keeps NaN */
    _mm512_mask_storeu_ps(y + n, m, _mm512_min_ps(hi, _mm512_max_ps(lo, v)));
  }
}

__attribute__((target("avx2,fma,f16c"))) void primc_cv_epi_row256(const epi_ctx *e, float *y, const float *c,
                                                                  const float *res, float b, float s, int64_t nb) {
  __m256 vb = _mm256_set1_ps(b), vs = _mm256_set1_ps(s), lo = _mm256_set1_ps(e->lo), hi = _mm256_set1_ps(e->hi);
  int64_t n = 0;
  for (; n + 8 <= nb; n += 8) {
    __m256 v;
    if (e->act == PRIMC_ACT_RQ) {
      v = cv_rq256(_mm256_loadu_ps(c + n), vb, vs, e->rq_div, e->rq_zp);
    } else {
      v = _mm256_add_ps(_mm256_loadu_ps(c + n), vb);
      if (res) v = _mm256_add_ps(v, _mm256_loadu_ps(res + n));
      if (e->act) v = cv_act256(e->act, v);
    }
    _mm256_storeu_ps(y + n, _mm256_min_ps(hi, _mm256_max_ps(lo, v))); /* v second: NaN stays */
  }
  if (n < nb) primc_cv_epi_row_scalar(e, y + n, c + n, res ? res + n : NULL, b, s, nb - n);
}
#endif

void primc_cv_epi_rows(void *ctx, float *C, int64_t ldc, int64_t m0, int64_t n0, int64_t mb, int64_t nb) {
  const epi_ctx *e = ctx;
  int isa = primc_sgemm_isa();
  int64_t ly = e->ldy ? e->ldy : ldc;
  if (e->y_pairs || e->res_pairs) { /* blocks start at even rows; the output channels are even */
    primc_cv_epi_pairs(isa, e, m0, mb, n0, C, ldc, nb);
    return;
  }
  for (int64_t m = 0; m < mb; m++) {
    int64_t off = (m0 + m) * ly + n0;
    float *row = C + m * ldc, *y = e->y + off;
    const float *res = e->res ? e->res + off : NULL;
    cv_epi_row(isa, e, y, row, res, cv_bias_at(e, m0 + m), cv_scale_at(e, m0 + m), nb);
  }
}

typedef struct planes_job {
  const primc_conv_epi *e;
  const float *acc;
  float *y;
  int64_t o, P;
  int isa;
} planes_job;

/* planes [b, e) (image i / o, channel i % o) */
static void epi_planes(void *ctx, int64_t b, int64_t e) {
  const planes_job *j = ctx;
  epi_ctx c = cv_epi_of(j->e, 0, NULL, NULL);
  for (int64_t i = b; i < e; i++) {
    int64_t off = i * j->P, ch = i % j->o;
    cv_epi_row(j->isa, &c, j->y + off, j->acc + off, j->e->res ? j->e->res + off : NULL, cv_bias_at(&c, ch),
               cv_scale_at(&c, ch), j->P);
  }
}

void primc_conv_epi_apply(const primc_conv_epi *e, int64_t n, int64_t o, int64_t P, const float *acc, float *y,
                          int vector) {
  planes_job j = {e, acc, y, o, P, vector ? primc_sgemm_isa() : PRIMC_ISA_SCALAR};
  if (n * o * P >= (1 << 15)) primc_parallel_for(n * o, epi_planes, &j);
  else epi_planes(&j, 0, n * o);
}

int primc_cv_epi_needed(const primc_conv_epi *e) {
  return e && (e->bias || e->res || e->act || e->lo > -__builtin_inff() || e->hi < __builtin_inff());
}

/* ---------------------------------------------------------------- strided copies */

/* dst[t] = src[2 t], t < n: 16 outputs from two loads and a permute instead of 16 scalar moves (stride-2
 * convs spend most of their im2col here); reads no element past src[2 n - 2] */
#if PRIMC_X86
__attribute__((target("avx512f"))) void primc_cv_copy_stride2_512(float *dst, const float *src, int64_t n) {
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  for (int64_t t = 0; t < n; t += 16, src += 32) {
    int64_t r = n - t, last = 2 * r - 1;
    __m512 a = _mm512_maskz_loadu_ps(primc_low_mask16(last), src), b = _mm512_maskz_loadu_ps(primc_low_mask16(last - 16), src + 16);
    _mm512_mask_storeu_ps(dst + t, primc_low_mask16(r), _mm512_permutex2var_ps(a, even, b));
  }
}

/* the same on ymm, 8 outputs from two loads while they stay before src[2 n - 1]; the rest one by one (the scalar
 * copy was a quarter of an im2col GEMM stem's time on Zen 3) */
__attribute__((target("avx2"))) static void copy_stride2_256(float *dst, const float *src, int64_t n) {
  int64_t t = 0;
  for (; t + 9 <= n; t += 8) _mm256_storeu_ps(dst + t, primc_even8(_mm256_loadu_ps(src + 2 * t), _mm256_loadu_ps(src + 2 * t + 8)));
  for (; t < n; t++) dst[t] = src[2 * t];
}
#endif

void primc_cv_copy_strided(float *dst, const float *src, int64_t n, int64_t s) {
  if (s == 1) {
    memcpy(dst, src, (size_t)n * sizeof(float));
#if PRIMC_X86
  } else if (s == 2 && n >= 8 && primc_sgemm_isa() == PRIMC_ISA_AVX512) {
    primc_cv_copy_stride2_512(dst, src, n);
  } else if (s == 2 && n >= 9 && primc_sgemm_isa() == PRIMC_ISA_AVX2) {
    copy_stride2_256(dst, src, n);
#endif
  } else {
    for (int64_t t = 0; t < n; t++) dst[t] = src[t * s];
  }
}

/* ---------------------------------------------------------------- implicit im2col */

#if PRIMC_X86
__attribute__((target("avx512f,bmi2"))) static void im2col_row512(float *dst, const float *src, int64_t ow, int64_t lo,
                                                                  int64_t hi, int64_t sw);
#endif

/* row k = (c, i, j) of the column matrix, output positions [n0, n0 + nc) */

void primc_cv_col_row(void *ctx, int64_t k, int64_t n0, int64_t nc, float *dst) {
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
#if PRIMC_X86
    if (s->vec) { /* masked vector loads: no libc call per output row */
      im2col_row512(d, row + off + x * sw, run, lo, hi, sw);
      continue;
    }
#endif
    memset(d, 0, (size_t)lo * sizeof(float));
    if (hi > lo) {
      primc_cv_copy_strided(d + lo, row + off + (x + lo) * sw, hi - lo, sw);
    }
    memset(d + hi, 0, (size_t)(run - hi) * sizeof(float));
  }
}

/* ---------------------------------------------------------------- explicit im2col */

/* col[(c * kh + i) * kw + j][oy * ow + ox] = x[c][oy * sh - pt + i * dh][ox * sw - pl + j * dw], 0 outside */
#if PRIMC_X86
/* one im2col row of ow outputs, stride 1 or 2: dst[t] = src[t * sw] for lo <= t < hi, else 0; 16 outputs
 * per masked load (two and a permute for stride 2) and store; no element outside [lo, hi) is read */
__attribute__((target("avx512f,bmi2"))) static void im2col_row512(float *dst, const float *src, int64_t ow, int64_t lo,
                                                                  int64_t hi, int64_t sw) {
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  for (int64_t t = 0; t < ow; t += 16) {
    __mmask16 valid = (__mmask16)(primc_low_mask16(hi - t) & ~primc_low_mask16(lo - t)), out = primc_low_mask16(ow - t);
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
        _mm512_mask_storeu_ps(row + q, primc_low_mask16(P - q), v);
      }
    }
  }
}
#endif

static void im2col_rows(const primc_conv2d *p, const float *x, int64_t cg, int64_t oh, int64_t ow, float *col) {
  int64_t sw = p->stride_w;
#if PRIMC_X86
  if (cv_use_avx512() && gather_fits(p, oh, ow)) {
    im2col_gather512(p, x, cg, oh, ow, col);
    return;
  }
  int vec = cv_use_avx512() && (sw == 1 || sw == 2);
#endif
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
#if PRIMC_X86
          if (vec) {
            im2col_row512(col, src, ow, ih >= 0 && ih < p->h ? lo : 0, ih >= 0 && ih < p->h ? hi : 0, sw);
            continue;
          }
#endif
          if (ih >= 0 && ih < p->h) {
            for (; t < lo; t++) col[t] = 0.0f;
            if (sw == 1) {
              for (; t < hi; t++) col[t] = src[t];
            } else {
              primc_cv_copy_strided(col + t, src + t * sw, hi - t, sw);
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
void primc_cv_im2col_par(const primc_conv2d *p, const float *x, int64_t cg, int64_t oh, int64_t ow, float *col) {
  im2col_job j = {p, x, oh, ow, col};
  if (cg > 1 && cg * p->kh * p->kw * oh * ow >= IM2COL_SPLIT_FLOATS) primc_parallel_for(cg, im2col_range, &j);
  else im2col_rows(p, x, cg, oh, ow, col);
}

/* ---------------------------------------------------------------- C^T tiles back to channel rows */

#if PRIMC_X86
/* Pixels [0, mb) x channels [0, nb) of a C^T tile (rows ldc apart) into y's channel rows from pixel m0
 * on (e at the tile's first channel): 16 x 16 blocks through one in-register transpose, each channel's
 * 16 pixels then one vector for bias, residual, SiLU and clamp and one store. A scalar gather down C^T's
 * columns read one cache line per element (a third of MobileNetV2's 7x7 1x1 convs), and the transposes
 * through a buffer and a second pass for the epilogue took a fifth of a 3-channel 7x7 stem's time in
 * the direct lanes conv. */
__attribute__((target("avx512f"))) void primc_cv_ct_store(const epi_ctx *e, int64_t P, const float *ct, int64_t ldc,
                                                        int64_t m0, int64_t mb, int64_t nb) {
  __m512 lo = _mm512_set1_ps(e->lo), hi = _mm512_set1_ps(e->hi);
  for (int64_t c0 = 0; c0 < nb; c0 += 16) {
    int64_t nc = nb - c0 < 16 ? nb - c0 : 16;
    __mmask16 cm = primc_low_mask16(nc); /* C^T's columns past the tile are not read */
    for (int64_t q = 0; q < mb; q += 16) {
      int rows = mb - q < 16 ? (int)(mb - q) : 16;
      __mmask16 m = primc_low_mask16(rows);
      __m512 r[16];
#pragma GCC unroll 16
      for (int i = 0; i < 16; i++) r[i] = i < rows ? _mm512_maskz_loadu_ps(cm, ct + (q + i) * ldc + c0) : _mm512_setzero_ps();
      primc_tr16(r);
      for (int64_t c = 0; c < nc; c++) {
        int64_t ch = c0 + c, off = ch * P + m0 + q;
        __m512 vb = _mm512_set1_ps(cv_bias_at(e, ch)), v;
        if (e->act == PRIMC_ACT_RQ) {
          v = cv_rq512(r[c], vb, _mm512_set1_ps(cv_scale_at(e, ch)), e->rq_div, e->rq_zp);
        } else {
          v = _mm512_add_ps(r[c], vb);
          if (e->res) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, e->res + off));
          if (e->act) v = cv_act512(e->act, v);
        }
        _mm512_mask_storeu_ps(e->y + off, m, _mm512_min_ps(hi, _mm512_max_ps(lo, v))); /* v second: NaN stays */
      }
    }
  }
}

/* The same on ymm for channels [0, nb) (a multiple of 8), in blocks of 8 channels x 8 pixels transposed in
 * registers (the gather per channel and the second pass were 53% of a 3 -> 32 3x3/2 stem's time in the AVX2
 * direct lanes row on Zen 3); a last block of fewer pixels zero-filled and its rows stored through a buffer
 * (masked moves are microcoded on AMD's cores; the plain C path for a band's last pixels was a quarter of
 * SqueezeNet's 3 -> 64 stem, 111 pixels a row) */
__attribute__((target("avx2,fma,f16c"))) static void ct_store256(const epi_ctx *e, int64_t P, const float *ct,
                                                                int64_t ldc, int64_t m0, int64_t mb, int64_t nb) {
  __m256 lo = _mm256_set1_ps(e->lo), hi = _mm256_set1_ps(e->hi);
  for (int64_t c0 = 0; c0 < nb; c0 += 8)
    for (int64_t q = 0; q < mb; q += 8) {
      int64_t n = mb - q < 8 ? mb - q : 8;
      __m256 r[8];
#pragma GCC unroll 8
      for (int i = 0; i < 8; i++) r[i] = i < n ? _mm256_loadu_ps(ct + (q + i) * ldc + c0) : _mm256_setzero_ps();
      primc_tr8(r);
      for (int c = 0; c < 8; c++) {
        int64_t ch = c0 + c, off = ch * P + m0 + q;
        __m256 vb = _mm256_set1_ps(cv_bias_at(e, ch)), v;
        float part[8]; /* the last block's rows: its n residuals in, its n results out */
        if (e->act == PRIMC_ACT_RQ) {
          v = cv_rq256(r[c], vb, _mm256_set1_ps(cv_scale_at(e, ch)), e->rq_div, e->rq_zp);
        } else {
          v = _mm256_add_ps(r[c], vb);
          if (e->res && n < 8) {
            memset(part, 0, sizeof part);
            memcpy(part, e->res + off, (size_t)n * sizeof(float));
          }
          if (e->res) v = _mm256_add_ps(v, _mm256_loadu_ps(n < 8 ? part : e->res + off));
          if (e->act) v = cv_act256(e->act, v);
        }
        v = _mm256_min_ps(hi, _mm256_max_ps(lo, v)); /* v second: NaN stays */
        if (n == 8) {
          _mm256_storeu_ps(e->y + off, v);
        } else {
          _mm256_storeu_ps(part, v);
          memcpy(e->y + off, part, (size_t)n * sizeof(float));
        }
      }
    }
}
#endif

#if PRIMC_X86
__attribute__((target("prfchw"))) void primc_cv_prefetch_out(const epi_ctx *e, int64_t P, int64_t m0, int64_t mb,
                                                           int64_t nb) {
  for (int64_t o = 0; o < nb; o++) {
    const char *a = (const char *)(e->y + o * P + m0), *end = (const char *)(e->y + o * P + m0 + mb);
    for (a = (const char *)((uintptr_t)a & ~(uintptr_t)63); a < end; a += 64) __builtin_prefetch(a, 1, 3);
  }
}
#endif

void cv_ct_store(const epi_ctx *e, int64_t P, const float *ct, int64_t ldc, int64_t m0, int64_t mb, int64_t nb) {
  int isa = primc_sgemm_isa();
  int64_t nb8 = 0; /* channels [0, nb8) stored by ct_store256 */
#if PRIMC_X86
  if (cv_use_avx512()) {
    primc_cv_ct_store(e, P, ct, ldc, m0, mb, nb);
    return;
  }
  if (isa == PRIMC_ISA_AVX2 && cv_act_ymm(e->act)) {
    nb8 = nb / 8 * 8;
    ct_store256(e, P, ct, ldc, m0, mb, nb8);
  }
#endif
  float tmp[64];
  for (int64_t o = nb8; o < nb; o++) {
    epi_ctx eo = cv_epi_at(e, o, P);
    for (int64_t p0 = 0; p0 < mb; p0 += 64) {
      int64_t n = mb - p0 < 64 ? mb - p0 : 64, off = m0 + p0;
      for (int64_t i = 0; i < n; i++) tmp[i] = ct[(p0 + i) * ldc + o];
      cv_epi_row(isa, &eo, eo.y + off, tmp, eo.res ? eo.res + off : NULL, cv_bias_at(&eo, 0), cv_scale_at(&eo, 0), n);
    }
  }
}
