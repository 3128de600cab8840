/* runtime/kernels_pool.c: the 2-D max pool over a padded map read unpadded: f32 (3x3/2 windows in registers with AVX-512 or AVX2, AVX2 rows and windows elsewhere) and u8 (AVX512-BW, AVX2). */
#include "runtime/kernels.h"

#if PRIMC_X86
#include "runtime/avx2.h"

#include <immintrin.h>
#endif

/* ---------------------------------------------------------------- max pooling */

/*
 * A 2-D max pool over a -inf padded map, read from the unpadded map: codegen turns the pad kernels
 * and the max tree over the padded buffer into this call (see kir_pool_calls). Per output row: the
 * max of its valid input rows into a row buffer with -inf borders, then each output's kw window
 * along that row. A NaN wins, as in the max prim.
 */
#define POOL_ROW_MAX 4096 /* floats of the row buffer, on the stack */
#define POOL_ROW_PAD 16   /* floats past a row that vector loads may read (set to -inf, never stored) */

typedef struct pool_job {
  const float *x;
  float *y;
  int64_t h, w, oh, ow, kh, kw, sh, sw, pt, pl, row, fast;
} pool_job;

static inline float max_nan(float a, float b) { return a > b || a != a ? a : b; }

#if PRIMC_X86
/* lanes i of a 16-float load at x[p + i] that lie inside [0, w) */
static inline __mmask16 in_row(int64_t p, int64_t w) {
  int64_t lo = p < 0 ? -p : 0, hi = w - p < 16 ? w - p : 16;
  return lo >= hi ? 0 : (__mmask16)(((1u << hi) - 1) & ~((1u << lo) - 1));
}

/* x[p .. p + 16) with -inf outside the row */
__attribute__((target("avx512f"))) static inline __m512 row_load(const float *x, int64_t p, int64_t w) {
  return _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), in_row(p, w), x + p);
}

/* NaN-keeping max of two vectors: vmaxps returns its second operand when either is NaN */
__attribute__((target("avx512f"))) static inline __m512 vmax_nan(__m512 a, __m512 b) {
  return _mm512_mask_mov_ps(_mm512_max_ps(a, b), _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q), a);
}
#define VMAX(a, b) vmax_nan(a, b)

/* 3-wide windows at stride 2 from column -1 (one column of left padding, ResNet's stem pool): per 16
 * outputs the max over the kh rows of 32 input floats read at aligned offsets, whose even lanes are
 * the windows' centres, odd lanes their right taps, and odd lanes one lane later (the previous block's
 * last carried in) their left taps: no unaligned loads, which cost twice as much. From column 0 (no left
 * padding, SqueezeNet's ceil-mode pools) even lanes are the left taps, odd the centres, and even lanes one
 * lane on (the column past the block broadcast in) the right taps (0.097 -> 0.091 ms on 64 x 111 x 111, Zen 5,
 * the AVX2 kernel before: the pool reads from L3 at about 50 GB/s, each row 1.5 times) */
__attribute__((target("avx512f"))) static void pool_k3s2_512(const pool_job *j, const float *x, float *y,
                                                         int64_t oy) {
  const __m512i ev = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i od = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  const __m512 ninf = _mm512_set1_ps(-INFINITY);
  int64_t y0 = oy * j->sh - j->pt, w = j->w;
  __m512 prev = ninf;
  for (int64_t o = 0; o < j->ow; o += 16) {
    int64_t p = 2 * o;
    int inner = p + 32 <= w;
    __m512 a = ninf, b = ninf, c = ninf; /* c (no left pad): the column past the block, the last window's third */
    for (int64_t dy = 0; dy < j->kh; dy++) {
      int64_t iy = y0 + dy;
      if (iy < 0 || iy >= j->h) continue;
      const float *r = x + iy * w;
      a = VMAX(a, inner ? _mm512_loadu_ps(r + p) : row_load(r, p, w));
      b = VMAX(b, inner ? _mm512_loadu_ps(r + p + 16) : row_load(r, p + 16, w));
      if (!j->pl && p + 32 < w) c = VMAX(c, _mm512_set1_ps(r[p + 32]));
    }
    __m512 e = _mm512_permutex2var_ps(a, ev, b), d = _mm512_permutex2var_ps(a, od, b), side;
    if (j->pl) { /* windows 2o - 1 .. 2o + 1: the odd column before each even one */
      side = _mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512(d), _mm512_castps_si512(prev), 15));
      prev = d;
    } else { /* windows 2o .. 2o + 2: the even column after */
      side = _mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512(c), _mm512_castps_si512(e), 1));
    }
    __mmask16 k = (__mmask16)(j->ow - o >= 16 ? 0xFFFF : (1u << (j->ow - o)) - 1);
    _mm512_mask_storeu_ps(y + o, k, VMAX(VMAX(side, e), d));
  }
}

/* NaN-keeping max on ymm: vmaxps returns its second operand when either is NaN */
__attribute__((target("avx2"))) static inline __m256 vmax8(__m256 a, __m256 b) {
  return _mm256_blendv_ps(_mm256_max_ps(a, b), a, _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
}

/* tr[0 .. w) = row (first) or max(tr, row), 8 lanes at a time */
__attribute__((target("avx2"))) static void row_max_avx2(float *tr, const float *row, int64_t w, int first) {
  int64_t i = 0;
  for (; i < w; i += 8) {
    if (i + 8 > w) {
      if (w < 8) break;
      i = w - 8; /* the last vector again over the tail: max(max(t, r), r) = max(t, r) */
    }
    _mm256_storeu_ps(tr + i, first ? _mm256_loadu_ps(row + i) : vmax8(_mm256_loadu_ps(tr + i), _mm256_loadu_ps(row + i)));
  }
  for (; i < w; i++) tr[i] = first ? row[i] : max_nan(tr[i], row[i]);
}

/* y[ox] = max over dx < kw of t[ox * sw + dx], 8 outputs at a time for strides 1 and 2 (stride 2: two loads
 * deinterleaved to their even lanes); t holds POOL_ROW_PAD readable floats past the last window */
__attribute__((target("avx2"))) static int64_t windows_avx2(const float *t, float *y, int64_t ow, int64_t kw, int64_t sw) {
  if (sw != 1 && sw != 2) return 0;
  int64_t ox = 0;
  for (; ox < ow; ox += 8) {
    if (ox + 8 > ow) {
      if (ow < 8) break;
      ox = ow - 8; /* the last 8 outputs again: the same values */
    }
    __m256 m = _mm256_set1_ps(-INFINITY);
    for (int64_t dx = 0; dx < kw; dx++) {
      const float *r = t + ox * sw + dx;
      __m256 v = sw == 1 ? _mm256_loadu_ps(r) : primc_even8(_mm256_loadu_ps(r), _mm256_loadu_ps(r + 8));
      m = dx ? vmax8(m, v) : v;
    }
    _mm256_storeu_ps(y + ox, m);
  }
  return ox;
}

/* 3-wide windows at stride 2 on ymm, any left padding: per 8 outputs from input column p = 2 o - pl, the max
 * over the kh rows of x[p, p + 16) and x[p + 16]; the even lanes of the first 16 are the windows' left taps,
 * the odd lanes their centres, the even lanes moved down one (x[p + 16] last) their right taps. Blocks that
 * reach past the row read a -inf bordered copy of it. The rows and windows pass through a row buffer was
 * twice ONNX Runtime's time for SqueezeNet's pools on Zen 3. 0 when ow < 8 (the caller's general path). */
__attribute__((target("avx2"))) static int pool_k3s2_256(const pool_job *j, const float *x, float *y, int64_t oy) {
  if (j->ow < 8) return 0;
  const __m256i down = _mm256_setr_epi32(1, 2, 3, 4, 5, 6, 7, 0);
  int64_t y0 = oy * j->sh - j->pt, w = j->w;
  for (int64_t o = 0; o < j->ow; o += 8) {
    if (o + 8 > j->ow) o = j->ow - 8; /* the last 8 outputs again: the same values */
    int64_t p = 2 * o - j->pl;
    int inner = p >= 0 && p + 17 <= w;
    __m256 a = _mm256_set1_ps(-INFINITY), b = a, c = a;
    for (int64_t dy = 0; dy < j->kh; dy++) {
      int64_t iy = y0 + dy;
      if (iy < 0 || iy >= j->h) continue;
      const float *row = x + iy * w, *r = inner ? row + p : NULL;
      float seg[17];
      if (!inner) {
        for (int64_t i = 0; i < 17; i++) seg[i] = p + i >= 0 && p + i < w ? row[p + i] : -INFINITY;
        r = seg;
      }
      a = vmax8(a, _mm256_loadu_ps(r));
      b = vmax8(b, _mm256_loadu_ps(r + 8));
      c = vmax8(c, _mm256_broadcast_ss(r + 16));
    }
    __m256 left = primc_even8(a, b), mid = primc_odd8(a, b);
    __m256 right = _mm256_blend_ps(_mm256_permutevar8x32_ps(left, down), c, 0x80);
    _mm256_storeu_ps(y + o, vmax8(vmax8(left, mid), right));
  }
  return 1;
}

#endif

static void pool_planes(void *ctx, int64_t c0, int64_t c1) {
  const pool_job *j = ctx;
  float t[POOL_ROW_MAX + POOL_ROW_PAD];
  for (int64_t i = 0; i < j->row + POOL_ROW_PAD; i++) t[i] = -INFINITY;
  for (int64_t c = c0; c < c1; c++)
    for (int64_t oy = 0; oy < j->oh; oy++) {
      const float *x = j->x + c * j->h * j->w;
      float *y = j->y + (c * j->oh + oy) * j->ow, *tr = t + j->pl;
#if PRIMC_X86
      if (j->fast == 2) {
        pool_k3s2_512(j, x, y, oy);
        continue;
      }
      if (j->fast == 3 && pool_k3s2_256(j, x, y, oy)) continue;
#endif
      int64_t y0 = oy * j->sh - j->pt, n = 0;
      for (int64_t dy = 0; dy < j->kh; dy++) {
        int64_t iy = y0 + dy;
        if (iy < 0 || iy >= j->h) continue;
#if PRIMC_X86
        if (j->fast == 1) {
          row_max_avx2(tr, x + iy * j->w, j->w, n == 0);
          n++;
          continue;
        }
#endif
        for (int64_t i = 0; i < j->w; i++) tr[i] = n == 0 ? x[iy * j->w + i] : max_nan(tr[i], x[iy * j->w + i]);
        n++;
      }
      if (n == 0)
        for (int64_t i = 0; i < j->w; i++) tr[i] = -INFINITY; /* a window wholly in the padding */
      int64_t ox = 0;
#if PRIMC_X86
      if (j->fast == 1) ox = windows_avx2(t, y, j->ow, j->kw, j->sw);
#endif
      for (; ox < j->ow; ox++) {
        const float *r = t + ox * j->sw;
        float m = r[0];
        for (int64_t dx = 1; dx < j->kw; dx++) m = max_nan(m, r[dx]);
        y[ox] = m;
      }
    }
}

/* floats of the row buffer a pool needs (0: too wide for it) */
int64_t primc_maxpool_row(int64_t w, int64_t ow, int64_t kw, int64_t sw, int64_t pl) {
  int64_t need = (ow - 1) * sw + kw;
  if (pl + w > need) need = pl + w;
  return need <= POOL_ROW_MAX ? need : 0;
}

/* params: planes, h, w, oh, ow, kh, kw, sh, sw, pt, pl; bufs (y, x), f32 */
int primc_k_maxpool(const int64_t *q, void *const *bufs) {
  pool_job j = {bufs[1], bufs[0], q[1], q[2], q[3], q[4], q[5], q[6], q[7], q[8], q[9], q[10], 0, 0};
  j.row = primc_maxpool_row(j.w, j.ow, j.kw, j.sw, j.pl);
  if (!j.row || j.kh < 1 || j.kw < 1 || j.sh < 1 || j.sw < 1) return PRIMC_ERR_ARG;
  /* 2: the AVX-512 3x3/2 kernel; 3: the AVX2 one; 1: AVX2 rows and windows; 0: scalar */
#if PRIMC_X86
  int k3s2 = j.kw == 3 && j.sw == 2;
  j.fast = k3s2 && j.pl <= 1 && __builtin_cpu_supports("avx512f") ? 2
           : k3s2 && __builtin_cpu_supports("avx2")                  ? 3
           : __builtin_cpu_supports("avx2")                          ? 1
                                                                     : 0;
#endif
  primc_parallel_for(q[0], pool_planes, &j);
  return PRIMC_OK;
}

/* ---------------------------------------------------------------- u8 max pooling */

/*
 * The same pool over a u8 map padded with 0 (the u8 minimum, so a pad never wins): a QDQ model's max pool between
 * its dequantize and quantize, which the qdq pass leaves on the u8 values. Optionally also the pooled values
 * dequantized, (float)y * scale in f32, as the loop kernel it replaces computes them. Per output row: the max of
 * its valid input rows into a zeroed row buffer, then the kw windows; AVX512-BW takes 64 bytes at a time and 3x3/2
 * windows 32 outputs at a time (even and odd bytes split by narrowing 16-bit lanes), AVX2 32 bytes and 32 outputs
 * (the split by masking and shifting 16-bit lanes, the last 32 of a row overlapping the ones before: max is
 * idempotent and the windows a function of the row buffer alone).
 */
typedef struct pool8_job {
  const uint8_t *x;
  uint8_t *y;
  float *yf;
  float scale;
  int64_t h, w, oh, ow, kh, kw, sh, sw, pt, pl, row;
  const struct pool8_row *vec; /* the vector rows the run takes, NULL: the plain C loops */
} pool8_job;

/* a set of vector rows: a row's max into the row buffer, the 3x3/2 windows, the dequantized copy */
typedef struct pool8_row {
  void (*row_max)(uint8_t *t, const uint8_t *r, int64_t w, int first);
  void (*win_k3s2)(const uint8_t *t, uint8_t *y, int64_t ow);
  void (*dequant)(const uint8_t *y, float *yf, int64_t n, float s);
} pool8_row;

enum { POOL8_PLAIN, POOL8_AVX2, POOL8_BW };

#if PRIMC_X86
#define BW __attribute__((target("avx512f,avx512bw,avx512vl")))
static inline __mmask64 bytes_below(int64_t n) { return n >= 64 ? ~(__mmask64)0 : ((__mmask64)1 << n) - 1; }

/* t[0 .. w) = r (first) or max(t, r) */
BW static void row_max_u8(uint8_t *t, const uint8_t *r, int64_t w, int first) {
  for (int64_t i = 0; i < w; i += 64) {
    __mmask64 m = bytes_below(w - i);
    __m512i v = _mm512_maskz_loadu_epi8(m, r + i);
    _mm512_mask_storeu_epi8(t + i, m, first ? v : _mm512_max_epu8(_mm512_maskz_loadu_epi8(m, t + i), v));
  }
}

/* y[o] = max(t[2o], t[2o + 1], t[2o + 2]) for o < ow, 32 at a time (t readable 66 bytes past 2 (ow - 1) + 2) */
BW static void win_k3s2_u8(const uint8_t *t, uint8_t *y, int64_t ow) {
  for (int64_t o = 0; o < ow; o += 32) {
    __m512i a = _mm512_loadu_si512(t + 2 * o), b = _mm512_loadu_si512(t + 2 * o + 2);
    __m256i e = _mm512_cvtepi16_epi8(a), d = _mm512_cvtepi16_epi8(_mm512_srli_epi16(a, 8));
    __m256i m = _mm256_max_epu8(_mm256_max_epu8(e, d), _mm512_cvtepi16_epi8(b));
    _mm256_mask_storeu_epi8(y + o, (__mmask32)(ow - o >= 32 ? 0xFFFFFFFFu : (1u << (ow - o)) - 1), m);
  }
}

/* yf[i] = (float)y[i] * s */
BW static void dequant_u8(const uint8_t *y, float *yf, int64_t n, float s) {
  __m512 vs = _mm512_set1_ps(s);
  for (int64_t i = 0; i < n; i += 16) {
    __mmask16 m = (__mmask16)(n - i >= 16 ? 0xFFFF : (1u << (n - i)) - 1);
    __m512 v = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, y + i)));
    _mm512_mask_storeu_ps(yf + i, m, _mm512_mul_ps(v, vs));
  }
}

#define P8X2 __attribute__((target("avx2")))

/* row_max_u8 on ymm: rows under 32 bytes in plain C */
P8X2 static void row_max_u8_avx2(uint8_t *t, const uint8_t *r, int64_t w, int first) {
  if (w < 32) {
    for (int64_t i = 0; i < w; i++) t[i] = first || r[i] > t[i] ? r[i] : t[i];
    return;
  }
  for (int64_t i = 0;; i += 32) {
    if (i > w - 32) i = w - 32;
    __m256i v = _mm256_loadu_si256((const __m256i *)(r + i));
    if (!first) v = _mm256_max_epu8(v, _mm256_loadu_si256((const __m256i *)(t + i)));
    _mm256_storeu_si256((__m256i *)(t + i), v);
    if (i == w - 32) break;
  }
}

/* outputs o .. o + 32 of win_k3s2_u8 (t readable 66 bytes from 2o) */
P8X2 static inline __m256i win32_k3s2_avx2(const uint8_t *t, int64_t o) {
  const __m256i lo = _mm256_set1_epi16(0xFF);
  __m256i m[2];
  for (int h = 0; h < 2; h++) {
    __m256i a = _mm256_loadu_si256((const __m256i *)(t + 2 * o + 32 * h));
    __m256i b = _mm256_loadu_si256((const __m256i *)(t + 2 * o + 32 * h + 2));
    m[h] = _mm256_max_epu16(_mm256_max_epu16(_mm256_and_si256(a, lo), _mm256_srli_epi16(a, 8)), _mm256_and_si256(b, lo));
  }
  return _mm256_permute4x64_epi64(_mm256_packus_epi16(m[0], m[1]), 0xD8);
}

/* win_k3s2_u8 on ymm */
P8X2 static void win_k3s2_u8_avx2(const uint8_t *t, uint8_t *y, int64_t ow) {
  if (ow < 32) {
    uint8_t s[32];
    _mm256_storeu_si256((__m256i *)s, win32_k3s2_avx2(t, 0));
    memcpy(y, s, (size_t)ow);
    return;
  }
  for (int64_t o = 0;; o += 32) {
    if (o > ow - 32) o = ow - 32;
    _mm256_storeu_si256((__m256i *)(y + o), win32_k3s2_avx2(t, o));
    if (o == ow - 32) break;
  }
}

/* dequant_u8 on ymm */
P8X2 static void dequant_u8_avx2(const uint8_t *y, float *yf, int64_t n, float s) {
  __m256 vs = _mm256_set1_ps(s);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    int64_t q;
    memcpy(&q, y + i, sizeof q);
    _mm256_storeu_ps(yf + i, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(q))), vs));
  }
  for (; i < n; i++) yf[i] = (float)y[i] * s;
}

static const pool8_row pool8_rows[] = {[POOL8_AVX2] = {row_max_u8_avx2, win_k3s2_u8_avx2, dequant_u8_avx2},
                                       [POOL8_BW] = {row_max_u8, win_k3s2_u8, dequant_u8}};
#endif

static void pool8_planes(void *ctx, int64_t c0, int64_t c1) {
  const pool8_job *j = ctx;
  uint8_t t[POOL_ROW_MAX + 128];
  for (int64_t c = c0; c < c1; c++)
    for (int64_t oy = 0; oy < j->oh; oy++) {
      const uint8_t *x = j->x + c * j->h * j->w;
      int64_t at = (c * j->oh + oy) * j->ow, y0 = oy * j->sh - j->pt, n = 0;
      uint8_t *y = j->y + at, *tr = t + j->pl;
      for (int64_t dy = 0; dy < j->kh; dy++) {
        int64_t iy = y0 + dy;
        if (iy < 0 || iy >= j->h) continue;
        const uint8_t *r = x + iy * j->w;
#if PRIMC_X86
        if (j->vec) {
          j->vec->row_max(tr, r, j->w, n++ == 0);
          continue;
        }
#endif
        for (int64_t i = 0; i < j->w; i++) tr[i] = n == 0 || r[i] > tr[i] ? r[i] : tr[i];
        n++;
      }
      if (n == 0) memset(tr, 0, (size_t)j->w); /* a window wholly in the padding */
      memset(t, 0, (size_t)j->pl); /* the pads either side, and what the vector windows read past them */
      memset(tr + j->w, 0, (size_t)(j->row + 128 - j->pl - j->w));
      int64_t ox = 0;
#if PRIMC_X86
      if (j->vec && j->kw == 3 && j->sw == 2) j->vec->win_k3s2(t, y, j->ow), ox = j->ow;
#endif
      for (; ox < j->ow; ox++) {
        const uint8_t *r = t + ox * j->sw;
        uint8_t m = r[0];
        for (int64_t dx = 1; dx < j->kw; dx++) m = r[dx] > m ? r[dx] : m;
        y[ox] = m;
      }
      if (!j->yf) continue;
#if PRIMC_X86
      if (j->vec) {
        j->vec->dequant(y, j->yf + at, j->ow, j->scale);
        continue;
      }
#endif
      for (int64_t i = 0; i < j->ow; i++) j->yf[at + i] = (float)y[i] * j->scale;
    }
}

static int pool8_cap = POOL8_BW; /* tests: the best set of rows a run may take (primc_maxpool_u8_force) */
void primc_maxpool_u8_force(int level) {
  __atomic_store_n(&pool8_cap, level == 1 ? POOL8_AVX2 : level == 2 ? POOL8_PLAIN : POOL8_BW, __ATOMIC_RELAXED);
}

/* params: maxpool's, then 1 when the dequantized copy is written and its scale (an f32's bits); bufs (y, x[, yf]) */
int primc_k_maxpool_u8(const int64_t *q, void *const *bufs) {
  pool8_job j = {bufs[1], bufs[0], q[11] ? bufs[2] : NULL, 0, q[1], q[2], q[3], q[4], q[5], q[6], q[7], q[8], q[9], q[10],
                 0, NULL};
  uint32_t bits = (uint32_t)q[12];
  memcpy(&j.scale, &bits, sizeof bits);
  j.row = primc_maxpool_row(j.w, j.ow, j.kw, j.sw, j.pl);
  if (!j.row || j.kh < 1 || j.kw < 1 || j.sh < 1 || j.sw < 1 || (q[11] && !j.yf)) return PRIMC_ERR_ARG;
#if PRIMC_X86
  int cap = __atomic_load_n(&pool8_cap, __ATOMIC_RELAXED);
  int bw = __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"), avx2 = __builtin_cpu_supports("avx2");
  j.vec = bw && cap >= POOL8_BW ? &pool8_rows[POOL8_BW] : avx2 && cap >= POOL8_AVX2 ? &pool8_rows[POOL8_AVX2] : NULL;
#endif
  primc_parallel_for(q[0], pool8_planes, &j);
  return PRIMC_OK;
}
