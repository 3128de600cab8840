/* runtime/gemm/avx2.c: the AVX2 row: 6 x 16 register tiles on ymm with FMA, and its dot product. */
#include "runtime/gemm/gemm.h"

#if PRIMC_X86

#include "runtime/avx2.h"

#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,fma")))
#define X2_MR GM_MR_AVX2

/* One k step of the tile; the pointers then move to the next. The empty asm hides the pointers' values, else GCC
 * kept a register per unrolled address. */
static inline __attribute__((always_inline)) AVX2 void step256(const kargs *g, int64_t k, __m256 acc[X2_MR][2],
                                                                const float **a0, const float **a1, const float **bb,
                                                                const int R, const int V, const int FULL,
                                                                const int UNIT, const int OFF, __m256i lm) {
  const int64_t ars = UNIT ? 1 : g->ars;
  const float *b = OFF ? g->b + g->koff[k] : *bb;
  __m256 b0, b1 = _mm256_setzero_ps();
  if (V == 1) {
    b0 = FULL ? _mm256_loadu_ps(b) : _mm256_maskload_ps(b, lm);
  } else {
    b0 = _mm256_loadu_ps(b);
    b1 = FULL ? _mm256_loadu_ps(b + 8) : _mm256_maskload_ps(b + 8, lm);
  }
#pragma GCC unroll 6
  for (int r = 0; r < R; r++) {
    __m256 av = _mm256_broadcast_ss(UNIT ? *a0 + r : (r < 3 ? *a0 : *a1) + (r % 3) * ars);
    primc_fma231(&acc[r][0], b0, av);
    if (V == 2) primc_fma231(&acc[r][1], b1, av);
  }
  *a0 += g->aks;
  if (!UNIT && R > 3) *a1 += g->aks;
  *bb += g->bks;
  __asm__("" : "+r"(*a0), "+r"(*a1), "+r"(*bb));
}

/* same shape as loop512, on ymm, k unrolled by 4: a core shared with another thread (these VMs' vCPUs) issues
 * fewer instructions a cycle, and the loop's own then cost 10-15% (bench/gemm_rows.md) */
static inline __attribute__((always_inline)) AVX2 void loop256(const kargs *g, __m256 acc[X2_MR][2], const int R,
                                                               const int V, const int FULL, const int UNIT,
                                                               const int OFF, __m256i lm) {
  const float *a0 = g->a, *a1 = g->a + 3 * (UNIT ? 1 : g->ars), *bb = g->b;
  int64_t k = 0;
  for (; k + 4 <= g->kc; k += 4)
#pragma GCC unroll 4
    for (int u = 0; u < 4; u++) step256(g, k + u, acc, &a0, &a1, &bb, R, V, FULL, UNIT, OFF, lm);
  for (; k < g->kc; k++) step256(g, k, acc, &a0, &a1, &bb, R, V, FULL, UNIT, OFF, lm);
}

/* one k step: B's two vectors, A's 6 values at byte offset O (the strip's step is 24 bytes) broadcast in turn */
#define K6X16_STEP(O)                                                                                             \
  "vmovups (%[b]), %%ymm12\n\t vmovups 32(%[b]), %%ymm13\n\t"                                                \
  "vbroadcastss " #O "+0(%[a]), %%ymm14\n\t vfmadd231ps %%ymm12, %%ymm14, %[c0]\n\t"                          \
  "vfmadd231ps %%ymm13, %%ymm14, %[c1]\n\t"                                                                    \
  "vbroadcastss " #O "+4(%[a]), %%ymm15\n\t vfmadd231ps %%ymm12, %%ymm15, %[c2]\n\t"                          \
  "vfmadd231ps %%ymm13, %%ymm15, %[c3]\n\t"                                                                    \
  "vbroadcastss " #O "+8(%[a]), %%ymm14\n\t vfmadd231ps %%ymm12, %%ymm14, %[c4]\n\t"                          \
  "vfmadd231ps %%ymm13, %%ymm14, %[c5]\n\t"                                                                    \
  "vbroadcastss " #O "+12(%[a]), %%ymm15\n\t vfmadd231ps %%ymm12, %%ymm15, %[c6]\n\t"                         \
  "vfmadd231ps %%ymm13, %%ymm15, %[c7]\n\t"                                                                    \
  "vbroadcastss " #O "+16(%[a]), %%ymm14\n\t vfmadd231ps %%ymm12, %%ymm14, %[c8]\n\t"                         \
  "vfmadd231ps %%ymm13, %%ymm14, %[c9]\n\t"                                                                    \
  "vbroadcastss " #O "+20(%[a]), %%ymm15\n\t vfmadd231ps %%ymm12, %%ymm15, %[c10]\n\t"                        \
  "vfmadd231ps %%ymm13, %%ymm15, %[c11]\n\t add %[bks], %[b]\n\t"
/* steps until b reaches END, A moving AS bytes after the steps in BODY */
#define LOOP6X16(BODY, AS, END)                                                                                   \
  __asm__("1:\n\t" BODY "add $" #AS ", %[a]\n\t cmp %[bend], %[b]\n\t jne 1b\n\t"                             \
          : [c0] "+x"(acc[0][0]), [c1] "+x"(acc[0][1]), [c2] "+x"(acc[1][0]), [c3] "+x"(acc[1][1]),             \
            [c4] "+x"(acc[2][0]), [c5] "+x"(acc[2][1]), [c6] "+x"(acc[3][0]), [c7] "+x"(acc[3][1]),             \
            [c8] "+x"(acc[4][0]), [c9] "+x"(acc[4][1]), [c10] "+x"(acc[5][0]), [c11] "+x"(acc[5][1]),           \
            [a] "+r"(a), [b] "+r"(b)                                                                             \
          : [bend] "r"(END), [bks] "r"(bks)                                                                      \
          : "cc", "xmm12", "xmm13", "xmm14", "xmm15")
/* The full 6 x 16 tile's k loop on A strips packed 6 floats a k step and whole B rows, as asm: the 12 sums, 2 B
 * vectors and 2 broadcasts pinned to the 16 ymm. GCC's allocation of loop256 for it kept 9 register moves in 4 steps
 * (101 instructions per 48 FMAs against 83 here), and the count matters on a core whose issue slots a sibling
 * thread takes (bench/gemm_rows.md). Steps of 4, then of 1, each until b reaches its end. */
static inline __attribute__((always_inline)) AVX2 void loop6x16(const kargs *g, __m256 acc[X2_MR][2]) {
  const float *a = g->a, *b = g->b, *bend4 = b + g->kc / 4 * 4 * g->bks, *bend = b + g->kc * g->bks;
  const int64_t bks = g->bks * (int64_t)sizeof(float);
  if (b != bend4) LOOP6X16(K6X16_STEP(0) K6X16_STEP(24) K6X16_STEP(48) K6X16_STEP(72), 96, bend4);
  if (b != bend) LOOP6X16(K6X16_STEP(0), 24, bend);
}

/* The compacting fused store of an R x V tile (see primc_gemm_store): the lanes of a run of outputs within one
 * vector go to y at the run's columns, one store with the vector's base moved back by the run's first lane; masked
 * only where a run does not fill its vector (vmaskmovps, microcoded on AMD's cores, at rows' ends only). The plain C
 * store after the tile was 60% of a 16 -> 64 3x3 conv's time on the padded-row GEMM. */
static inline __attribute__((always_inline)) AVX2 void store_compact256(const kargs *g, __m256 acc[X2_MR][2],
                                                                        const int R, const int V, __m256i lm) {
  const primc_gemm_store *s = g->st;
  int64_t run[GM_STORE_RUNS][3], yb[GM_STORE_RUNS + 2];
  int n = primc_gm_compact_runs(s, g->st_n0, g->nr, run), np = 0, pv[GM_STORE_RUNS + 2], full[GM_STORE_RUNS + 2];
  __m256i pm[GM_STORE_RUNS + 2];
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int i = 0; i < n; i++) /* the run's part in each vector: lanes [l0, l1), lane l to y column yb + l */
    for (int v = 0; v < V && np < GM_STORE_RUNS + 2; v++) {
      int64_t l0 = run[i][0] - 8 * v, l1 = l0 + run[i][2];
      l0 = l0 < 0 ? 0 : l0, l1 = l1 > 8 ? 8 : l1;
      if (l0 >= l1) continue;
      pv[np] = v, yb[np] = run[i][1] - run[i][0] + 8 * v, full[np] = l0 == 0 && l1 == 8;
      pm[np++] = _mm256_and_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32((int)l1), lane),
                                  _mm256_cmpgt_epi32(lane, _mm256_set1_epi32((int)l0 - 1)));
    }
  __m256 va = _mm256_set1_ps(g->alpha), vb = _mm256_set1_ps(g->beta), lo = _mm256_set1_ps(s->lo),
         hi = _mm256_set1_ps(s->hi);
#pragma GCC unroll 6
  for (int r = 0; r < R; r++) {
    const float *c = g->c + r * g->ldc;
    __m256 b = _mm256_set1_ps(g->st_bias ? g->st_bias[r * s->bias_stride] : 0.0f), x[2];
#pragma GCC unroll 2
    for (int v = 0; v < V; v++) {
      x[v] = _mm256_mul_ps(acc[r][v], va);
      if (g->beta != 0)
        x[v] = _mm256_fmadd_ps(v < V - 1 ? _mm256_loadu_ps(c + 8 * v) : _mm256_maskload_ps(c + 8 * v, lm), vb, x[v]);
      x[v] = _mm256_add_ps(x[v], b);
    }
    for (int i = 0; i < np; i++) {
      float *y = g->st_y + r * s->ldy + yb[i];
      __m256 t = x[pv[i]];
      if (g->st_res) {
        const float *res = g->st_res + r * s->ldy + yb[i];
        t = _mm256_add_ps(t, full[i] ? _mm256_loadu_ps(res) : _mm256_maskload_ps(res, pm[i]));
      }
      t = _mm256_min_ps(hi, _mm256_max_ps(lo, t)); /* t second: NaN stays */
      if (full[i]) _mm256_storeu_ps(y, t);
      else _mm256_maskstore_ps(y, pm[i], t);
    }
  }
}

static inline __attribute__((always_inline)) AVX2 void body256(const kargs *g, const int R, const int V) {
  __m256 acc[X2_MR][2];
  int rem = g->nr - 8 * (V - 1);
  __m256i lm = _mm256_cmpgt_epi32(_mm256_set1_epi32(rem), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  __m256i all = _mm256_set1_epi32(-1);
#pragma GCC unroll 6
  for (int r = 0; r < R; r++) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  /* B loaded whole where its rows hold the vectors (vmaskmovps loads made a 14x14 map's 4-column tile cost
   * most of a full one) */
  int whole_b = rem == 8 || g->b_full;
  if (g->koff && rem == 8)
    loop256(g, acc, R, V, 1, 1, 1, lm);
  else if (g->koff)
    loop256(g, acc, R, V, 0, 1, 1, lm);
  else if (g->ars == 1 && whole_b && R == 6 && V == 2 && g->aks == 6 && g->bks > 0)
    loop6x16(g, acc);
  else if (g->ars == 1 && whole_b)
    loop256(g, acc, R, V, 1, 1, 0, lm);
  else if (g->ars == 1)
    loop256(g, acc, R, V, 0, 1, 0, lm);
  else if (whole_b)
    loop256(g, acc, R, V, 1, 0, 0, lm);
  else
    loop256(g, acc, R, V, 0, 0, 0, lm);
  if (g->st && g->st->row) {
    store_compact256(g, acc, R, V, lm);
    return;
  }
  __m256 va = _mm256_set1_ps(g->alpha), vb = _mm256_set1_ps(g->beta);
  int read_c = g->beta != 0, fuse = g->st != NULL;
  /* the fused store: bias, residual and clamp while the tile is in registers, in store_tile's order */
  __m256 lo = _mm256_set1_ps(fuse ? g->st->lo : 0.0f), hi = _mm256_set1_ps(fuse ? g->st->hi : 0.0f);
#pragma GCC unroll 6
  for (int r = 0; r < R; r++) {
    float *c = g->c + r * g->ldc;
    __m256 b = _mm256_set1_ps(fuse && g->st_bias ? g->st_bias[r * g->st->bias_stride] : 0.0f);
#pragma GCC unroll 2
    for (int v = 0; v < V; v++) {
      /* whole vectors move unmasked: vmaskmovps is microcoded on AMD's cores, a store of it many cycles */
      int whole = v < V - 1 || rem == 8;
      __m256i m = whole ? all : lm;
      __m256 x = _mm256_mul_ps(acc[r][v], va);
      if (read_c) x = _mm256_fmadd_ps(whole ? _mm256_loadu_ps(c + 8 * v) : _mm256_maskload_ps(c + 8 * v, m), vb, x);
      if (fuse) {
        x = _mm256_add_ps(x, b);
        if (g->st_res) {
          const float *res = g->st_res + r * g->ldc + 8 * v;
          x = _mm256_add_ps(x, whole ? _mm256_loadu_ps(res) : _mm256_maskload_ps(res, m));
        }
        x = _mm256_min_ps(hi, _mm256_max_ps(lo, x)); /* x second: NaN stays */
      }
      if (whole) _mm256_storeu_ps(c + 8 * v, x);
      else _mm256_maskstore_ps(c + 8 * v, m, x);
    }
  }
}

#define DEF256(R)                                                              \
  static AVX2 void k256_##R##_1(const kargs *g) { body256(g, R, 1); }         \
  static AVX2 void k256_##R##_2(const kargs *g) { body256(g, R, 2); }
DEF256(1) DEF256(2) DEF256(3) DEF256(4) DEF256(5) DEF256(6)
_Static_assert(X2_MR == 6 && GM_NR_AVX2 == 16, "a kernel per tile height, one or two ymm wide");
#define ROW256(R) {k256_##R##_1, k256_##R##_2}

static void (*const tab256[X2_MR][2])(const kargs *) = {ROW256(1), ROW256(2), ROW256(3),
                                                         ROW256(4), ROW256(5), ROW256(6)};

/* A tile of one or two columns from a packed A strip (a 7x7 map's N = 49 leaves one): the strip's rows in the lanes,
 * one FMA per column a k step where the 6 x 16 tile spends one per row (that tile ran a 7x7 1x1 conv 24-31% slower
 * than the same conv on 48 pixels), k in 4 interleaved chains; the store in plain C, as rare as it is small. */
static inline __attribute__((always_inline)) AVX2 void narrow_loop(const kargs *g, int R, __m256 acc[2][4], const int TWO,
                                                                   const int OFF) {
  const float *a = g->a, *bb = g->b;
  const int64_t aks = g->aks, bks = g->bks;
  /* whole loads while 8 floats from row k stay in the strip (vmaskmovps loads held the loop to one a few cycles) */
  int64_t k = 0, whole = g->kc - (8 + R - 1) / R;
  for (; k + 4 <= whole; k += 4, a += 4 * aks, bb += 4 * bks) {
#pragma GCC unroll 4
    for (int u = 0; u < 4; u++) {
      const float *b = OFF ? g->b + g->koff[k + u] : bb + u * bks;
      __m256 av = _mm256_loadu_ps(a + u * aks);
      primc_fma231(&acc[0][u], av, _mm256_broadcast_ss(b));
      if (TWO) primc_fma231(&acc[1][u], av, _mm256_broadcast_ss(b + 1));
    }
    __asm__("" : "+r"(a), "+r"(bb));
  }
  __m256i rm = _mm256_cmpgt_epi32(_mm256_set1_epi32(R), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  for (; k < g->kc; k++, a += g->aks, bb += g->bks) {
    const float *b = OFF ? g->b + g->koff[k] : bb;
    __m256 av = _mm256_maskload_ps(a, rm);
    acc[0][0] = _mm256_fmadd_ps(av, _mm256_broadcast_ss(b), acc[0][0]);
    if (TWO) acc[1][0] = _mm256_fmadd_ps(av, _mm256_broadcast_ss(b + 1), acc[1][0]);
  }
}

static AVX2 void narrow256(const kargs *g, int R) {
  __m256 acc[2][4];
  for (int c = 0; c < 2; c++)
    for (int u = 0; u < 4; u++) acc[c][u] = _mm256_setzero_ps();
  if (g->nr > 1)
    g->koff ? narrow_loop(g, R, acc, 1, 1) : narrow_loop(g, R, acc, 1, 0);
  else
    g->koff ? narrow_loop(g, R, acc, 0, 1) : narrow_loop(g, R, acc, 0, 0);
  float t[2][8];
  for (int c = 0; c < 2; c++)
    _mm256_storeu_ps(t[c], _mm256_add_ps(_mm256_add_ps(acc[c][0], acc[c][1]), _mm256_add_ps(acc[c][2], acc[c][3])));
  for (int r = 0; r < R; r++)
    for (int c = 0; c < g->nr; c++) {
      float *cp = g->c + r * g->ldc + c;
      *cp = g->alpha * t[c][r] + (g->beta != 0 ? g->beta * *cp : 0.0f);
    }
  if (g->st) primc_gm_store_tile(g, R);
}

void primc_gm_kern_avx2(const kargs *g, int mr) {
  if (g->nr <= 2 && g->ars == 1) {
    narrow256(g, mr);
    return;
  }
  tab256[mr - 1][(g->nr + 7) / 8 - 1](g);
}

AVX2 float primc_gm_dot_avx2(const float *x, const float *y, int64_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), a0);
    a1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(y + i + 8), a1);
  }
  __m256 s = _mm256_add_ps(a0, a1);
  __m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
  h = _mm_add_ps(h, _mm_movehl_ps(h, h));
  h = _mm_add_ss(h, _mm_movehdup_ps(h));
  float acc = _mm_cvtss_f32(h);
  for (; i < n; i++) acc += x[i] * y[i];
  return acc;
}

/* B^T's 16 x 16 blocks into packed panels: four 8 x 8 transposes in registers (the scalar copy ran a per-call
 * packed B^T GEMM at 0.6-0.7x of the same GEMM on prepacked B) */
AVX2 void primc_gm_trans16_avx2(const float *src, int64_t ld, float *dst, int64_t ldd) {
  for (int jb = 0; jb < 16; jb += 8)
    for (int kb = 0; kb < 16; kb += 8) {
      __m256 r[8];
#pragma GCC unroll 8
      for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_ps(src + (jb + i) * ld + kb);
      primc_tr8(r);
#pragma GCC unroll 8
      for (int i = 0; i < 8; i++) _mm256_storeu_ps(dst + (kb + i) * ldd + jb, r[i]);
    }
}

/* rows of A (unit k stride) into [k][mr], 8 k at a time through an 8 x 8 transpose (the scalar copy was 15% of
 * a 1024^3 GEMM's time). Each k's mr floats are stored as 8, the next k's store overwriting the extra: dst has
 * room for 8 - mr floats past kc * mr (the driver's A buffer holds MR_MAX rows). */
AVX2 void primc_gm_pack_a_avx2(const float *a, int64_t ars, int64_t mr, int64_t kc, float *dst) {
  int64_t k = 0;
  for (; mr <= 8 && k + 8 <= kc; k += 8) {
    __m256 r[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) r[i] = i < mr ? _mm256_loadu_ps(a + i * ars + k) : _mm256_setzero_ps();
    primc_tr8(r);
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) _mm256_storeu_ps(dst + (k + i) * mr, r[i]);
  }
  for (; k < kc; k++)
    for (int64_t i = 0; i < mr; i++) dst[k * mr + i] = a[i * ars + k];
}

/* 8 floats st apart from p (st 1 or 2; the two loads of st 2 end at p[14], the last one read) */
static inline __attribute__((always_inline)) AVX2 __m256 load8_st(const float *p, int64_t st) {
  if (st == 1) return _mm256_loadu_ps(p);
  /* p0 .. p7 and p7 .. p14: the even ones of each 128-bit half, then the halves' 64-bit pairs in order */
  __m256 lo = _mm256_loadu_ps(p), hi = _mm256_loadu_ps(p + 7);
  __m256 ev = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 2, 0)); /* p0 p2 p8 p10 | p4 p6 p12 p14 */
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(ev), _MM_SHUFFLE(3, 1, 2, 0)));
}

AVX2 void primc_gm_gather8_avx2(const float *const *rows, int n, int64_t off, int64_t st, float *dst, int64_t ldd) {
  __m256 r[8];
#pragma GCC unroll 8
  for (int i = 0; i < 8; i++) r[i] = i < n ? load8_st(rows[i] + off, st) : _mm256_setzero_ps();
  primc_tr8(r);
#pragma GCC unroll 8
  for (int i = 0; i < 8; i++) _mm256_storeu_ps(dst + i * ldd, r[i]);
}

#else
/* not x86: the AVX2 row never runs here (its ISA is never covered), but the row table names it */
void primc_gm_kern_avx2(const kargs *g, int mr) { __builtin_trap(); }
float primc_gm_dot_avx2(const float *x, const float *y, int64_t n) { __builtin_trap(); }
void primc_gm_trans16_avx2(const float *src, int64_t ld, float *dst, int64_t ldd) { __builtin_trap(); }
void primc_gm_pack_a_avx2(const float *a, int64_t ars, int64_t mr, int64_t kc, float *dst) { __builtin_trap(); }
void primc_gm_gather8_avx2(const float *const *rows, int n, int64_t off, int64_t st, float *dst, int64_t ldd) {
  __builtin_trap();
}
#endif
