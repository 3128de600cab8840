/* runtime/gemm/avx512.c: the AVX512 row: 14 x 32 register tiles on zmm, the fused (and compacting) store, dot, transposes for packing. */
#include "runtime/gemm/gemm.h"

#if PRIMC_X86
#include "runtime/avx512.h"

#include <immintrin.h>

#define AVX512 __attribute__((target("avx512f,avx512vl,fma")))
#define X5_MR GM_MR_AVX512

/* V vectors of 16 across, R rows; FULL: every lane of the last vector is inside nr. UNIT: a(r, k) at
 * a[r + k * aks] (A^T or packed); else rows are ars apart and read through one pointer per three rows,
 * which keeps every address a base plus a scaled index and the loop free of spills. */
static inline __attribute__((always_inline)) AVX512 void loop512(const kargs *g, __m512 acc[X5_MR][2], const int R,
                                                                 const int V, const int FULL, const int UNIT,
                                                                 const int OFF, __mmask16 lm) {
  const int64_t ars = UNIT ? 1 : g->ars, aks = g->aks, bks = g->bks;
  const float *ab[5], *bb = g->b;
  for (int q = 0; q < 5; q++) ab[q] = g->a + 3 * q * ars;
  for (int64_t k = 0; k < g->kc; k++) {
    if (k < g->pf_n) _mm_prefetch(g->pf + 64 * k, _MM_HINT_T1);
    if (g->pfd) {
      _mm_prefetch((const char *)bb + g->pfd, _MM_HINT_T0);
      _mm_prefetch((const char *)bb + g->pfd + 64, _MM_HINT_T0);
    }
    const float *b = OFF ? g->b + g->koff[k] : bb;
    __m512 b0, b1 = _mm512_setzero_ps();
    if (V == 1) {
      b0 = FULL ? _mm512_loadu_ps(b) : _mm512_maskz_loadu_ps(lm, b);
    } else {
      b0 = _mm512_loadu_ps(b);
      b1 = FULL ? _mm512_loadu_ps(b + 16) : _mm512_maskz_loadu_ps(lm, b + 16);
    }
#pragma GCC unroll 14
    for (int r = 0; r < R; r++) {
      __m512 av = _mm512_set1_ps(UNIT ? ab[0][r] : ab[r / 3][(r % 3) * ars]);
      acc[r][0] = _mm512_fmadd_ps(av, b0, acc[r][0]);
      if (V == 2) acc[r][1] = _mm512_fmadd_ps(av, b1, acc[r][1]);
    }
#pragma GCC unroll 5
    for (int q = 0; q < 5; q++)
      if (q == 0 || (!UNIT && q < (R + 2) / 3)) ab[q] += aks;
    bb += bks;
  }
}

/* alpha acc + beta C (C is not read when beta is 0): a tile vector's value before any fused store */
static inline __attribute__((always_inline)) AVX512 __m512 tile_value512(const kargs *g, __m512 acc, const float *c,
                                                                         __mmask16 m) {
  __m512 x = _mm512_mul_ps(acc, _mm512_set1_ps(g->alpha));
  return g->beta != 0 ? _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, c), _mm512_set1_ps(g->beta), x) : x;
}

/* the compacting store's view of C columns [n0, n0 + 32): per vector, the lanes that are outputs and the
 * y column the first of them goes to (the outputs before column n: (n / row) * keep + min(n % row, keep)) */
static void compact_lanes(const primc_gemm_store *s, int64_t n0, int nr, __mmask16 keep[2], int64_t ybase[2]) {
  int64_t col = n0 % s->row;
  for (int v = 0; v < 2; v++) {
    int64_t n = n0 + 16 * v, cv = n % s->row;
    ybase[v] = n / s->row * s->keep + (cv < s->keep ? cv : s->keep);
    unsigned bits = 0;
    for (int l = 0; l < 16; l++, col = col + 1 == s->row ? 0 : col + 1)
      if (16 * v + l < nr && col < s->keep) bits |= 1u << l;
    keep[v] = (__mmask16)bits;
  }
}

/* the compacting fused store of an R x V tile in acc (see primc_gemm_store) */
static inline __attribute__((always_inline)) AVX512 void store_compact512(const kargs *g, __m512 acc[X5_MR][2],
                                                                          const int R, const int V, __mmask16 lm) {
  const primc_gemm_store *s = g->st;
  __mmask16 keep[2];
  int64_t yb[2];
  compact_lanes(s, g->st_n0, g->nr, keep, yb);
  __m512 lo = _mm512_set1_ps(s->lo), hi = _mm512_set1_ps(s->hi);
#pragma GCC unroll 14
  for (int r = 0; r < R; r++) {
    const float *c = g->c + r * g->ldc;
    __m512 b = _mm512_set1_ps(g->st_bias ? g->st_bias[r * s->bias_stride] : 0.0f);
#pragma GCC unroll 2
    for (int v = 0; v < V; v++) {
      __m512 x = _mm512_add_ps(tile_value512(g, acc[r][v], c + 16 * v, v == V - 1 ? lm : 0xFFFF), b);
      if (g->st_res) x = _mm512_add_ps(x, _mm512_maskz_expandloadu_ps(keep[v], g->st_res + r * s->ldy + yb[v]));
      x = _mm512_maskz_compress_ps(keep[v], _mm512_min_ps(hi, _mm512_max_ps(lo, x)));
      _mm512_mask_storeu_ps(g->st_y + r * s->ldy + yb[v], (__mmask16)((1u << __builtin_popcount(keep[v])) - 1), x);
    }
  }
}

static inline __attribute__((always_inline)) AVX512 void body512(const kargs *g, const int R, const int V) {
  __m512 acc[X5_MR][2];
  int rem = g->nr - 16 * (V - 1);
  __mmask16 lm = (__mmask16)(rem >= 16 ? 0xFFFF : (1u << rem) - 1);
#pragma GCC unroll 14
  for (int r = 0; r < R; r++) {
    acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    _mm_prefetch((const char *)(g->c + r * g->ldc), _MM_HINT_T0);
    _mm_prefetch((const char *)(g->c + r * g->ldc + 16 * V - 1), _MM_HINT_T0);
  }
  if (g->koff && rem == 16)
    loop512(g, acc, R, V, 1, 1, 1, lm);
  else if (g->koff)
    loop512(g, acc, R, V, 0, 1, 1, lm);
  else if (g->ars == 1 && rem == 16)
    loop512(g, acc, R, V, 1, 1, 0, lm);
  else if (g->ars == 1)
    loop512(g, acc, R, V, 0, 1, 0, lm);
  else if (rem == 16)
    loop512(g, acc, R, V, 1, 0, 0, lm);
  else
    loop512(g, acc, R, V, 0, 0, 0, lm);
  if (g->st && g->st->row) {
    store_compact512(g, acc, R, V, lm);
    return;
  }
  if (g->st) { /* the fused store: bias, residual and clamp while the tile is in registers */
    __m512 lo = _mm512_set1_ps(g->st->lo), hi = _mm512_set1_ps(g->st->hi);
#pragma GCC unroll 14
    for (int r = 0; r < R; r++) {
      float *c = g->c + r * g->ldc;
      __m512 b = _mm512_set1_ps(g->st_bias ? g->st_bias[r * g->st->bias_stride] : 0.0f);
#pragma GCC unroll 2
      for (int v = 0; v < V; v++) {
        __mmask16 m = v == V - 1 ? lm : 0xFFFF;
        __m512 x = _mm512_add_ps(tile_value512(g, acc[r][v], c + 16 * v, m), b);
        if (g->st_res) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(m, g->st_res + r * g->ldc + 16 * v));
        _mm512_mask_storeu_ps(c + 16 * v, m, _mm512_min_ps(hi, _mm512_max_ps(lo, x))); /* x second: NaN stays */
      }
    }
    return;
  }
#pragma GCC unroll 14
  for (int r = 0; r < R; r++) {
    float *c = g->c + r * g->ldc;
#pragma GCC unroll 2
    for (int v = 0; v < V; v++) {
      __mmask16 m = v == V - 1 ? lm : 0xFFFF;
      _mm512_mask_storeu_ps(c + 16 * v, m, tile_value512(g, acc[r][v], c + 16 * v, m));
    }
  }
}

#define DEF512(R)                                                                \
  static AVX512 void k512_##R##_1(const kargs *g) { body512(g, R, 1); }         \
  static AVX512 void k512_##R##_2(const kargs *g) { body512(g, R, 2); }
DEF512(1) DEF512(2) DEF512(3) DEF512(4) DEF512(5) DEF512(6) DEF512(7)
DEF512(8) DEF512(9) DEF512(10) DEF512(11) DEF512(12) DEF512(13) DEF512(14)
_Static_assert(X5_MR == 14 && GM_NR_AVX512 == 32, "a kernel per tile height, one or two zmm wide");
#define ROW512(R) {k512_##R##_1, k512_##R##_2}

static void (*const tab512[X5_MR][2])(const kargs *) = {
    ROW512(1), ROW512(2), ROW512(3),  ROW512(4),  ROW512(5),  ROW512(6),  ROW512(7),
    ROW512(8), ROW512(9), ROW512(10), ROW512(11), ROW512(12), ROW512(13), ROW512(14)};

void primc_gm_kern_avx512(const kargs *g, int mr) { tab512[mr - 1][(g->nr + 15) / 16 - 1](g); }

AVX512 float primc_gm_dot_avx512(const float *x, const float *y, int64_t n) {
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i), a0);
    a1 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(y + i + 16), a1);
  }
  for (; i < n; i += 16) {
    __mmask16 m = (__mmask16)(n - i >= 16 ? 0xFFFF : (1u << (n - i)) - 1);
    a0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, y + i), a0);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
}

/* B^T's 16 x 16 blocks into packed panels */
AVX512 void primc_gm_trans16_avx512(const float *src, int64_t ld, float *dst, int64_t ldd) {
  primc_tr16_part(src, ld, 16, 16, dst, ldd);
}

/* rows of A (unit k stride) into [k][mr], 16 k at a time through an in-register transpose (the scalar
 * copy cost a 512^3 GEMM much of its time: bench/gemm_rows.md) */
AVX512 void primc_gm_pack_a_avx512(const float *a, int64_t ars, int64_t mr, int64_t kc, float *dst) {
  for (int64_t k = 0; k < kc; k += 16)
    primc_tr16_part(a + k, ars, (int)mr, (int)min64(16, kc - k), dst + k * mr, mr);
}

#else
/* not x86: the AVX512 row never runs here (its ISA is never covered), but the row table names it */
void primc_gm_kern_avx512(const kargs *g, int mr) { __builtin_trap(); }
float primc_gm_dot_avx512(const float *x, const float *y, int64_t n) { __builtin_trap(); }
void primc_gm_trans16_avx512(const float *src, int64_t ld, float *dst, int64_t ldd) { __builtin_trap(); }
void primc_gm_pack_a_avx512(const float *a, int64_t ars, int64_t mr, int64_t kc, float *dst) { __builtin_trap(); }
#endif
