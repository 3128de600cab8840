/* runtime/gemm.c: our fp32 GEMM: packed B blocks, register-tiled AVX-512 / AVX2 / scalar micro-kernels, thread pool. */
#include "runtime/primc_rt.h"
#include "runtime/avx512.h"

#include <cpuid.h>
#include <immintrin.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/*
 * Shape of the computation (row-major C[M][N] = alpha * op(A)[M][K] * op(B)[K][N] + beta * C):
 *
 *   items (m-chunk x n-block) split over the pool
 *     for each K block of KC rows
 *       B block (KC x n-block) packed into NR-wide panels [panel][k][NR] in a per-thread buffer (L2)
 *       for each strip of <= MR rows of A (read in place through strides, stays in L1)
 *         for each B panel: micro-kernel, an MR x NR register tile of FMAs
 *       after the last K block: the epilogue on each finished strip x n-block, while hot
 *
 * A is never packed: the micro-kernel broadcasts A[r][k] through (row stride, k stride), which covers
 * both op(A) = A and op(A) = A^T. B is read in place (no packing) when M is small and B is not
 * transposed, since a packed block would then be used only once or twice.
 *
 * Strips have heights that differ by at most one (M split evenly into ceil(M/MR) strips), and each
 * (rows, vectors) pair has its own fully unrolled kernel, so no FMA is spent on padding rows.
 *
 * Each C element is summed in the same order whatever the thread count (K blocks in order, one
 * thread per element): results are bitwise identical across thread counts for a given ISA.
 *
 * Memory: one B buffer per thread (KC x NC floats, 512 KiB), allocated at the thread's first call and
 * kept until it exits; primc_sgemm_reserve() makes the pool threads allocate theirs up front, so the
 * inference path itself never allocates.
 */

#ifndef KC_MAX /* overridable for tuning runs: cc -DKC_MAX=384 */
#define KC_MAX 256
#endif
#ifndef NC_MAX
#define NC_MAX 512
#endif
#define BUF_FLOATS (KC_MAX * NC_MAX)
#define MR_MAX 14
#define STRIP_SPLIT_ROWS 8 /* tiles of rows from which threads may split M even when each packs all of B */
#define PACK_A_PANELS 4 /* pack an A strip when this many B panels reuse it */
#define SERIAL_FLOPS (1 << 21) /* below this many multiply-adds (~10 us) a GEMM runs on the calling thread: waking the pool costs more */
#define SERIAL_B_FLOATS (1 << 17) /* ... unless B is larger than this (512 KiB): then reading it takes longer */

/* what one micro-kernel call computes: C[mr][nr] = alpha * sum_k a(r,k) b(k,j) + beta * C */
typedef struct kargs {
  int64_t kc;
  const float *a;
  int64_t ars, aks; /* a(r, k) = a[r * ars + k * aks] */
  const float *b;
  int64_t bks; /* b(k, j) = b[k * bks + j], j < nr; reading past nr is never done */
  const int64_t *koff; /* when set, b(k, j) = b[koff[k] + j] instead (a conv's taps read in place); A is UNIT */
  float *c;
  int64_t ldc;
  float alpha, beta; /* beta == 0: C is not read */
  int nr;
  const primc_gemm_store *st; /* last K block only: applied at the store; bias and res already at row 0 */
  const float *st_bias, *st_res;
  float *st_y;     /* compacting store: y at this call's first row */
  int64_t st_n0;   /* compacting store: C column of this call's first lane */
  const char *pf; /* prefetch pf_n cache lines from pf into L2, one per k step (the next B block) */
  int64_t pf_n;
  int64_t pfd; /* B read in place (AVX-512): each k step prefetches its row's 2 lines pfd bytes on */
} kargs;

typedef void (*ukernel)(const kargs *g, int mr);
typedef float (*dotfn)(const float *x, const float *y, int64_t n);
/* 16 x 16 block of B^T rows (16 floats each, ld apart) into dst[k * ldd + j] */
typedef void (*transfn)(const float *src, int64_t ld, float *dst, int64_t ldd);

typedef struct isa_row {
  const char *name;
  int mr, nr;     /* register tile */
  int kc, nc;     /* K block, n-block width (multiple of nr) */
  int direct_max; /* read B in place when M <= this (and B is not transposed) */
  ukernel kern;
  dotfn dot;
  transfn trans16; /* NULL: scalar transposition */
  int (*supported)(void);
  int fused_store; /* the kernel applies kargs.st itself */
} isa_row;

/* ---------------------------------------------------------------- scalar kernel */

#define SC_MR 4
#define SC_NR 8

static void ukr_scalar(const kargs *g, int mr) {
  float acc[SC_MR][SC_NR] = {{0}};
  for (int64_t k = 0; k < g->kc; k++) {
    const float *b = g->b + (g->koff ? g->koff[k] : k * g->bks);
    for (int r = 0; r < mr; r++) {
      float av = g->a[r * g->ars + k * g->aks];
      for (int j = 0; j < g->nr; j++) acc[r][j] += av * b[j];
    }
  }
  for (int r = 0; r < mr; r++)
    for (int j = 0; j < g->nr; j++) {
      float *c = g->c + r * g->ldc + j;
      *c = g->beta == 0 ? g->alpha * acc[r][j] : g->alpha * acc[r][j] + g->beta * *c;
    }
}

static float dot_scalar(const float *x, const float *y, int64_t n) {
  float acc = 0;
  for (int64_t i = 0; i < n; i++) acc += x[i] * y[i];
  return acc;
}

static int always(void) { return 1; }

/* ---------------------------------------------------------------- AVX-512 kernel: up to 14 x 32 */

#define AVX512 __attribute__((target("avx512f,avx512vl,fma")))
#define X5_MR 14
#define X5_NR 32
#ifndef X5_DIRECT /* read B in place up to this M (tuning knob like KC_MAX) */
#define X5_DIRECT (2 * X5_MR)
#endif
/* B read in place is K rows a map apart (a 1x1 conv's input channels, 32 of them at 112x112 in
 * MobileNetV2), more streams than the hardware prefetchers follow: the first strip over a panel pulls
 * each row's lines this many panels ahead (1 thread, --profile: 32->16 at 112x112 0.103 -> 0.076 ms,
 * 144->24 at 56x56 0.132 -> 0.102; 1 and 4 panels ahead within noise of 2) */
#define DIRECT_PF_PANELS 2

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
#define ROW512(R) {k512_##R##_1, k512_##R##_2}

static void (*const tab512[X5_MR][2])(const kargs *) = {
    ROW512(1), ROW512(2), ROW512(3),  ROW512(4),  ROW512(5),  ROW512(6),  ROW512(7),
    ROW512(8), ROW512(9), ROW512(10), ROW512(11), ROW512(12), ROW512(13), ROW512(14)};

static void ukr_avx512(const kargs *g, int mr) { tab512[mr - 1][(g->nr + 15) / 16 - 1](g); }

static AVX512 float dot_avx512(const float *x, const float *y, int64_t n) {
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
static AVX512 void trans16_avx512(const float *src, int64_t ld, float *dst, int64_t ldd) {
  primc_tr16_part(src, ld, 16, 16, dst, ldd);
}

static int has_avx512(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("fma");
}

/* ---------------------------------------------------------------- AVX2 kernel: up to 6 x 16 */

#define AVX2 __attribute__((target("avx2,fma")))
#define X2_MR 6
#define X2_NR 16

/* same shape as loop512, on ymm */
static inline __attribute__((always_inline)) AVX2 void loop256(const kargs *g, __m256 acc[X2_MR][2], const int R,
                                                               const int V, const int FULL, const int UNIT,
                                                               const int OFF, __m256i lm) {
  const int64_t ars = UNIT ? 1 : g->ars, aks = g->aks, bks = g->bks;
  const float *ab[2] = {g->a, g->a + 3 * ars}, *bb = g->b;
  for (int64_t k = 0; k < g->kc; k++) {
    const float *b = OFF ? g->b + g->koff[k] : bb;
    __m256 b0, b1 = _mm256_setzero_ps();
    if (V == 1) {
      b0 = FULL ? _mm256_loadu_ps(b) : _mm256_maskload_ps(b, lm);
    } else {
      b0 = _mm256_loadu_ps(b);
      b1 = FULL ? _mm256_loadu_ps(b + 8) : _mm256_maskload_ps(b + 8, lm);
    }
#pragma GCC unroll 6
    for (int r = 0; r < R; r++) {
      __m256 av = _mm256_broadcast_ss(UNIT ? ab[0] + r : ab[r / 3] + (r % 3) * ars);
      acc[r][0] = _mm256_fmadd_ps(av, b0, acc[r][0]);
      if (V == 2) acc[r][1] = _mm256_fmadd_ps(av, b1, acc[r][1]);
    }
    ab[0] += aks;
    if (!UNIT && R > 3) ab[1] += aks;
    bb += bks;
  }
}

static inline __attribute__((always_inline)) AVX2 void body256(const kargs *g, const int R, const int V) {
  __m256 acc[X2_MR][2];
  int rem = g->nr - 8 * (V - 1);
  __m256i lm = _mm256_cmpgt_epi32(_mm256_set1_epi32(rem), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  __m256i all = _mm256_set1_epi32(-1);
#pragma GCC unroll 6
  for (int r = 0; r < R; r++) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  if (g->koff)
    loop256(g, acc, R, V, rem == 8, 1, 1, lm);
  else if (g->ars == 1 && rem == 8)
    loop256(g, acc, R, V, 1, 1, 0, lm);
  else if (g->ars == 1)
    loop256(g, acc, R, V, 0, 1, 0, lm);
  else if (rem == 8)
    loop256(g, acc, R, V, 1, 0, 0, lm);
  else
    loop256(g, acc, R, V, 0, 0, 0, lm);
  __m256 va = _mm256_set1_ps(g->alpha), vb = _mm256_set1_ps(g->beta);
  int read_c = g->beta != 0;
#pragma GCC unroll 6
  for (int r = 0; r < R; r++) {
    float *c = g->c + r * g->ldc;
#pragma GCC unroll 2
    for (int v = 0; v < V; v++) {
      __m256i m = v == V - 1 ? lm : all;
      __m256 x = _mm256_mul_ps(acc[r][v], va);
      if (read_c) x = _mm256_fmadd_ps(_mm256_maskload_ps(c + 8 * v, m), vb, x);
      _mm256_maskstore_ps(c + 8 * v, m, x);
    }
  }
}

#define DEF256(R)                                                              \
  static AVX2 void k256_##R##_1(const kargs *g) { body256(g, R, 1); }         \
  static AVX2 void k256_##R##_2(const kargs *g) { body256(g, R, 2); }
DEF256(1) DEF256(2) DEF256(3) DEF256(4) DEF256(5) DEF256(6)
#define ROW256(R) {k256_##R##_1, k256_##R##_2}

static void (*const tab256[X2_MR][2])(const kargs *) = {ROW256(1), ROW256(2), ROW256(3),
                                                         ROW256(4), ROW256(5), ROW256(6)};

static void ukr_avx2(const kargs *g, int mr) { tab256[mr - 1][(g->nr + 7) / 8 - 1](g); }

static AVX2 float dot_avx2(const float *x, const float *y, int64_t n) {
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

static int has_avx2(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

/* ---------------------------------------------------------------- ISA table and choice */

static const isa_row isa_table[] = {
    [PRIMC_ISA_SCALAR] = {"scalar", SC_MR, SC_NR, KC_MAX, NC_MAX, SC_MR, ukr_scalar, dot_scalar, NULL, always},
    [PRIMC_ISA_AVX2] = {"avx2", X2_MR, X2_NR, KC_MAX, NC_MAX, 4 * X2_MR, ukr_avx2, dot_avx2, NULL, has_avx2},
    [PRIMC_ISA_AVX512] = {"avx512", X5_MR, X5_NR, KC_MAX, NC_MAX, X5_DIRECT, ukr_avx512, dot_avx512,
                          trans16_avx512, has_avx512, 1},
};
#define N_ISA ((int)(sizeof isa_table / sizeof isa_table[0]))

static int auto_isa = -1, forced_isa = -1;
static pthread_once_t isa_once = PTHREAD_ONCE_INIT;

static void isa_detect(void) {
  auto_isa = PRIMC_ISA_SCALAR;
  for (int i = 0; i < N_ISA; i++)
    if (isa_table[i].supported()) auto_isa = i;
}

int primc_sgemm_isa(void) {
  pthread_once(&isa_once, isa_detect);
  int f = __atomic_load_n(&forced_isa, __ATOMIC_RELAXED);
  return f >= 0 ? f : auto_isa;
}

int primc_sgemm_force_isa(int isa) {
  if (isa == PRIMC_ISA_AUTO) {
    __atomic_store_n(&forced_isa, -1, __ATOMIC_RELAXED);
    return 0;
  }
  if (isa < 0 || isa >= N_ISA || !isa_table[isa].supported()) return -1;
  __atomic_store_n(&forced_isa, isa, __ATOMIC_RELAXED);
  return 0;
}

const char *primc_sgemm_isa_name(int isa) { return isa >= 0 && isa < N_ISA ? isa_table[isa].name : "?"; }

/* the CPU family of an AMD CPU (Zen 4 is 19h, Zen 5 1Ah), 0 on any other vendor; read once: CPUID in a
 * VM traps to the hypervisor, microseconds a call */
static int amd_fam;
static pthread_once_t fam_once = PTHREAD_ONCE_INIT;
static void fam_detect(void) {
  unsigned a, b, c, d;
  if (!__get_cpuid(0, &a, &b, &c, &d) || b != 0x68747541u || d != 0x69746e65u || c != 0x444d4163u) return;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return;
  unsigned base = (a >> 8) & 0xf;
  amd_fam = (int)(base == 0xf ? base + ((a >> 20) & 0xff) : base);
}
static int cpu_amd_family(void) {
  pthread_once(&fam_once, fam_detect);
  return amd_fam;
}

/* AMD family 19h with AVX-512 is Zen 4, whose FMA pipes are 256 bits wide: a zmm FMA takes both */
static int cpu_splits_zmm(void) { return cpu_amd_family() == 0x19; }

static int zmm_fmas;
static pthread_once_t zmm_once = PTHREAD_ONCE_INIT;
static void zmm_detect(void) { zmm_fmas = !has_avx512() ? 0 : cpu_splits_zmm() ? 1 : 2; }

/* read once: CPUID in a VM traps to the hypervisor, microseconds a call */
int primc_cpu_zmm_fmas(void) {
  pthread_once(&zmm_once, zmm_detect);
  return zmm_fmas;
}

/* ---------------------------------------------------------------- per-thread B buffer */

static pthread_key_t buf_key;
static int buf_key_ok;
static pthread_once_t buf_once = PTHREAD_ONCE_INIT;

static void buf_key_make(void) { buf_key_ok = pthread_key_create(&buf_key, free) == 0; }

static float *thread_buf(void) {
  pthread_once(&buf_once, buf_key_make);
  if (!buf_key_ok) return NULL;
  float *p = pthread_getspecific(buf_key);
  if (!p) {
    p = aligned_alloc(64, BUF_FLOATS * sizeof(float));
    if (p && pthread_setspecific(buf_key, p) != 0) {
      free(p);
      p = NULL;
    }
  }
  return p;
}

static void reserve_fn(void *ctx, int64_t b, int64_t e) { (void)thread_buf(); }

void primc_sgemm_reserve(void) { primc_parallel_for(primc_num_threads(), reserve_fn, NULL); }

/* ---------------------------------------------------------------- B sources and packing */

typedef struct bsrc {
  const float *b; /* plain: b(k, n) = trans ? b[n * ldb + k] : b[k * ldb + n] */
  int64_t ldb;
  int trans;
  primc_brow_fn row; /* generated: row(ctx, k, n0, nc, dst) writes b(k, n0 .. n0+nc) */
  void *row_ctx;
  const float *packed; /* prepacked panels, see primc_sgemm_pack_b */
} bsrc;

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* columns [p0*NR, n1) of rows [k0, k0+kc) into panels dst[p - p0][k][NR], zero-padded to NR */
static void pack_b(const bsrc *s, const isa_row *isa, int64_t k0, int64_t kc, int64_t p0, int64_t n1, float *dst) {
  const int NR = isa->nr;
  int64_t n0 = p0 * NR, np = cdiv(n1 - n0, NR);
  if (s->trans) {
    for (int64_t p = 0; p < np; p++) {
      float *d = dst + p * kc * NR;
      int64_t nr = min64(NR, n1 - n0 - p * NR), j = 0, kt = isa->trans16 ? kc / 16 * 16 : 0;
      const float *src = s->b + (n0 + p * NR) * s->ldb + k0;
      for (; j + 16 <= nr && kt; j += 16)
        for (int64_t k = 0; k < kt; k += 16) isa->trans16(src + j * s->ldb + k, s->ldb, d + k * NR + j, NR);
      for (int64_t jj = 0; jj < NR; jj++)
        for (int64_t k = jj < j ? kt : 0; k < kc; k++) d[k * NR + jj] = jj < nr ? src[jj * s->ldb + k] : 0.0f;
    }
    return;
  }
  float tmp[NC_MAX];
  for (int64_t k = 0; k < kc; k++) {
    const float *src = s->b + (k0 + k) * s->ldb + n0;
    if (s->row) {
      s->row(s->row_ctx, k0 + k, n0, n1 - n0, tmp);
      src = tmp;
    }
    for (int64_t p = 0; p < np; p++) {
      int64_t nr = min64(NR, n1 - n0 - p * NR);
      float *d = dst + p * kc * NR + k * NR;
      memcpy(d, src + p * NR, (size_t)nr * sizeof(float));
      if (nr < NR) memset(d + nr, 0, (size_t)(NR - nr) * sizeof(float));
    }
  }
}

/* ---------------------------------------------------------------- the driver */

typedef struct job {
  const isa_row *isa;
  int64_t M, N, K;
  float alpha, beta;
  const float *a;
  int64_t ars, aks;
  bsrc bs;
  float *c;
  int64_t ldc;
  primc_epilogue epi;
  void *epi_ctx;
  const int64_t *koff; /* B's rows at b + koff[k] (read in place) */
  const primc_gemm_store *st;
  int a_mr;            /* > 0: A packed by primc_sgemm_pack_a in strips of at most a_mr rows */
  int kc, direct;
  int64_t n_strips, n_panels, nI, nJ;
  int status;
} job;

/* the fused store's clamp in scalar code, as the vector code does it: NaN stays NaN */
static float store_clamp(const primc_gemm_store *s, float v) { return v < s->lo ? s->lo : v > s->hi ? s->hi : v; }

/* kargs.st on a stored tile, for kernels that do not apply it themselves */
static void store_tile(const kargs *h, int rows) {
  const primc_gemm_store *s = h->st;
  for (int r = 0; s->row && r < rows; r++) {
    float b = h->st_bias ? h->st_bias[r * s->bias_stride] : 0.0f;
    for (int n = 0; n < h->nr; n++) {
      int64_t col = h->st_n0 + n, yc = col / s->row * s->keep + col % s->row;
      if (col % s->row >= s->keep) continue;
      float v = h->c[r * h->ldc + n] + b + (h->st_res ? h->st_res[r * s->ldy + yc] : 0.0f);
      h->st_y[r * s->ldy + yc] = store_clamp(s, v);
    }
  }
  for (int r = 0; !s->row && r < rows; r++) {
    float b = h->st_bias ? h->st_bias[r * s->bias_stride] : 0.0f, *c = h->c + r * h->ldc;
    for (int n = 0; n < h->nr; n++) c[n] = store_clamp(s, c[n] + b + (h->st_res ? h->st_res[r * h->ldc + n] : 0.0f));
  }
}

/* K blocks of even length (a multiple of 16 up to the ISA's kc): 320 as 160 + 160, not 256 + 64, whose
 * short block would spill and reload every C tile for a quarter of the work, and in whose few k steps
 * the strips cannot prefetch the next block (one line a k step). Packed B records the value. */
static int64_t k_block(const isa_row *isa, int64_t K) {
  if (K <= isa->kc) return isa->kc;
  int64_t kc = (cdiv(K, cdiv(K, isa->kc)) + 15) / 16 * 16;
  return kc < isa->kc ? kc : isa->kc;
}

/* rows of strip s: M split evenly into n_strips strips of at most MR rows */
static int64_t strip_row(const job *j, int64_t s) { return j->M * s / j->n_strips; }

/* the strip's a(r, k) into dst[k * mr + r]: one contiguous stream for the kernel, free of the cache-set
 * conflicts that rows a power-of-two apart (or A^T's columns) cause */
/* rows of A (unit k stride) into [k][mr], 16 k at a time through an in-register transpose (the
 * scalar copy was 9% of a 512^3 GEMM's time) */
static AVX512 void pack_a_rows512(const float *a, int64_t ars, int64_t mr, int64_t kc, float *dst) {
  for (int64_t k = 0; k < kc; k += 16)
    primc_tr16_part(a + k, ars, (int)mr, (int)min64(16, kc - k), dst + k * mr, mr);
}

static void pack_a(const float *a, int64_t ars, int64_t aks, int64_t mr, int64_t kc, float *dst, int vec) {
  if (aks == 1 && vec && mr <= 16) {
    pack_a_rows512(a, ars, mr, kc, dst);
  } else if (aks == 1) {
    for (int64_t r = 0; r < mr; r++)
      for (int64_t k = 0; k < kc; k++) dst[k * mr + r] = a[r * ars + k];
  } else {
    for (int64_t k = 0; k < kc; k++) memcpy(dst + k * mr, a + k * aks, (size_t)mr * sizeof(float));
  }
}

/* Prepacked weights come from memory the first time a block of them is read (BERT-base streams 340 MB
 * a run), and the kernels that read them first would wait on it. So each strip prefetches, one cache
 * line per k step inside its kernels (a burst at the strip's start did not help), what comes next:
 * with prepacked B, the strips after the first pull a share each of the next K block (or of the
 * thread's next item); with prepacked A (conv weights), each strip pulls the next strip's A panel.
 * Sets g->pf, g->pf_n for strip s of [s0, s1) at K block k0. */
static void next_share(const job *j, int64_t item, int64_t last_item, int64_t s, int64_t s0, int64_t s1, int64_t k0,
                       kargs *g) {
  g->pf = NULL, g->pf_n = 0;
  int64_t k1 = k0 + min64(j->kc, j->K - k0);
  if (j->bs.packed) {
    int64_t i = s - s0, n = s1 - s0;
    if (n < 2 || i == 0) return;
    if (k1 >= j->K) {
      if (++item > last_item) return;
      k1 = 0;
    }
    int64_t jj = item % j->nJ, p0 = j->n_panels * jj / j->nJ, p1 = j->n_panels * (jj + 1) / j->nJ;
    int64_t kc = min64(j->kc, j->K - k1), NR = j->isa->nr, lines = kc * (p1 - p0) * NR * (int64_t)sizeof(float) / 64;
    int64_t l0 = lines * (i - 1) / (n - 1), l1 = lines * i / (n - 1);
    g->pf = (const char *)(j->bs.packed + k1 * j->n_panels * NR + p0 * kc * NR) + 64 * l0;
    g->pf_n = l1 - l0;
  } else if (j->a_mr) {
    int64_t ns = s + 1, kn = k0;
    if (ns >= s1) {
      if (k1 >= j->K) return;
      ns = s0, kn = k1;
    }
    int64_t m0 = strip_row(j, ns), mr = strip_row(j, ns + 1) - m0, kc = min64(j->kc, j->K - kn);
    g->pf = (const char *)(j->a + m0 * j->K + kn * mr);
    g->pf_n = (mr * kc * (int64_t)sizeof(float) + 63) / 64;
  }
}

/* the rows [r0, r0 + rows) of strip (m0, ..) x panel p: one kernel call, g pointing at its A rows */
static void run_part(const job *j, kargs *g, int64_t row, int rows, int64_t p, int last) {
  const isa_row *isa = j->isa;
  g->c = j->c + row * j->ldc + p * isa->nr;
  g->st = last ? j->st : NULL;
  if (g->st) {
    g->st_bias = j->st->bias ? j->st->bias + row * j->st->bias_stride : NULL;
    g->st_res = j->st->res ? j->st->res + row * (j->st->row ? j->st->ldy : j->ldc) + (j->st->row ? 0 : p * isa->nr) : NULL;
    g->st_y = j->st->y ? j->st->y + row * j->st->ldy : NULL;
    g->st_n0 = p * isa->nr;
  }
  if (g->st && !isa->fused_store) {
    g->st = NULL;
    isa->kern(g, rows);
    g->st = j->st;
    store_tile(g, rows);
  } else {
    isa->kern(g, rows);
  }
}

/* the kernel calls of strip (m0, mr) x panel p: one, or several when the strip is packed for a taller
 * register tile than this ISA's (the per-call work is small when K is: no division on the usual path) */
static void run_tile(const job *j, kargs *g, int64_t m0, int64_t mr, int64_t p, int last) {
  if (mr <= j->isa->mr) {
    run_part(j, g, m0, (int)mr, p, last);
    return;
  }
  int64_t parts = cdiv(mr, j->isa->mr);
  for (int64_t q = 0; q < parts; q++) {
    int64_t r0 = mr * q / parts, r1 = mr * (q + 1) / parts;
    kargs h = *g;
    h.a = g->a + r0 * g->ars;
    run_part(j, &h, m0 + r0, (int)(r1 - r0), p, last);
  }
}

/* g's A for the strip of rows [m0, m0 + mr) at k0: the prepacked panel, a packed copy in abuf, or A in place */
static void strip_a(const job *j, int64_t m0, int64_t mr, int64_t k0, int64_t kc, int pack, kargs *g, float *abuf) {
  if (j->a_mr) { /* the strip's panel [k][mr] starts at row m0 of a [M][K] block */
    g->a = j->a + m0 * j->K + k0 * mr;
    g->ars = 1, g->aks = mr;
    return;
  }
  g->a = j->a + m0 * j->ars + k0 * j->aks;
  g->ars = j->ars, g->aks = j->aks;
  if (pack) {
    pack_a(g->a, j->ars, j->aks, mr, kc, abuf, j->isa->trans16 != NULL);
    g->a = abuf, g->ars = 1, g->aks = mr;
  }
}

static void run_item(job *j, int64_t item, int64_t last_item, float *buf) {
  float abuf[MR_MAX * KC_MAX] __attribute__((aligned(64)));
  const isa_row *isa = j->isa;
  const int NR = isa->nr;
  int64_t ii = item / j->nJ, jj = item % j->nJ;
  int64_t s0 = j->n_strips * ii / j->nI, s1 = j->n_strips * (ii + 1) / j->nI;
  int64_t p0 = j->n_panels * jj / j->nJ, p1 = j->n_panels * (jj + 1) / j->nJ;
  int64_t n0 = p0 * NR, n1 = min64(j->N, p1 * NR);
  if (s0 >= s1 || n0 >= n1) return;
  for (int64_t k0 = 0; k0 < j->K; k0 += j->kc) {
    int64_t kc = min64(j->kc, j->K - k0);
    const float *bb;
    int64_t bks, pstep;
    if (j->bs.packed) {
      bb = j->bs.packed + k0 * j->n_panels * NR + p0 * kc * NR;
      bks = NR, pstep = kc * NR;
    } else if (j->koff) {
      bb = j->bs.b + n0;
      bks = 0, pstep = NR;
    } else if (j->direct) {
      bb = j->bs.b + k0 * j->bs.ldb + n0;
      bks = j->bs.ldb, pstep = NR;
    } else {
      pack_b(&j->bs, isa, k0, kc, p0, n1, buf);
      bb = buf;
      bks = NR, pstep = kc * NR;
    }
    kargs g = {.kc = kc, .ars = j->ars, .aks = j->aks, .bks = bks, .koff = j->koff ? j->koff + k0 : NULL,
               .ldc = j->ldc, .alpha = j->alpha, .beta = k0 == 0 ? j->beta : 1.0f};
    int last = k0 + kc >= j->K;
    for (int64_t s = s0; s < s1; s++) {
      kargs share;
      next_share(j, item, last_item, s, s0, s1, k0, &share);
      int64_t m0 = strip_row(j, s), mr = strip_row(j, s + 1) - m0, per = cdiv(share.pf_n, p1 - p0);
      strip_a(j, m0, mr, k0, kc, p1 - p0 >= PACK_A_PANELS || j->koff, &g, abuf);
      g.pfd = j->direct && s == s0 ? DIRECT_PF_PANELS * NR * (int64_t)sizeof(float) : 0;
      for (int64_t p = p0; p < p1; p++) {
        g.b = bb + (p - p0) * pstep;
        g.nr = (int)min64(NR, j->N - p * NR);
        int64_t done = min64(share.pf_n, (p - p0) * per); /* this call's lines */
        g.pf = share.pf ? share.pf + 64 * done : NULL, g.pf_n = min64(per, share.pf_n - done);
        run_tile(j, &g, m0, mr, p, last);
      }
      g.pf = NULL, g.pf_n = 0;
      if (last && j->epi) j->epi(j->epi_ctx, j->c + m0 * j->ldc + n0, j->ldc, m0, n0, mr, n1 - n0);
    }
  }
}

static void run_items(void *ctx, int64_t begin, int64_t end) {
  job *j = ctx;
  float *buf = NULL;
  if (!j->bs.packed && !j->direct && !j->koff && !(buf = thread_buf())) {
    __atomic_store_n(&j->status, PRIMC_ERR_RUNTIME, __ATOMIC_RELAXED);
    return;
  }
  for (int64_t i = begin; i < end; i++) run_item(j, i, end - 1, buf);
}

/* n-blocks of at most nc columns, as many as the threads when they would be fewer, a multiple of
 * the threads when that is cheap; M is split only when the n-blocks cannot feed every thread */
static void plan(job *j, int threads) {
  const isa_row *isa = j->isa;
  j->n_strips = cdiv(j->M, j->a_mr ? j->a_mr : isa->mr);
  j->n_panels = cdiv(j->N, isa->nr);
  j->nI = 1;
  j->nJ = cdiv(j->n_panels, isa->nc / isa->nr);
  if (threads <= 1) return;
  if (j->nJ >= threads) {
    j->nJ = min64(j->n_panels, cdiv(j->nJ, threads) * threads);
    return;
  }
  int64_t blocks = j->nJ;
  j->nJ = min64(j->n_panels, threads);
  j->nI = min64(j->n_strips, cdiv(threads, j->nJ));
  /* splitting the strips instead can even out the work: 7 panels on 2 threads is 4 + 3, 19 strips
   * 10 + 9. It costs nothing when no thread packs B (it is read in place or prepacked), and little
   * when every thread packing all of B is small next to its rows' product (MobileNetV2's 1x1
   * expansions at 14x14, 196 pixels in 7 panels: 64->384 went 0.060 -> 0.050 ms on 2 threads) */
  if (j->bs.packed || j->direct || j->koff || j->M >= STRIP_SPLIT_ROWS * isa->mr) {
    int64_t pj = min64(j->n_panels, threads), si = min64(j->n_strips, cdiv(threads, blocks));
    double panels_even = (double)j->n_panels / (double)(cdiv(j->n_panels, pj) * pj);
    double strips_even = (double)j->n_strips / (double)(cdiv(j->n_strips, si) * si);
    if (strips_even > panels_even) j->nJ = blocks, j->nI = si;
  }
}

static void scale_c(job *j) {
  for (int64_t m = 0; m < j->M; m++) {
    for (int64_t n = 0; n < j->N; n++) {
      float *c = j->c + m * j->ldc + n;
      *c = j->beta == 0 ? 0.0f : j->beta * *c;
    }
    for (int64_t n = 0; j->st && n < j->N; n++) {
      const primc_gemm_store *s = j->st;
      float *c = j->c + m * j->ldc + n, v = *c + (s->bias ? s->bias[m * s->bias_stride] : 0.0f);
      *c = store_clamp(s, v + (s->res ? s->res[m * j->ldc + n] : 0.0f));
    }
  }
  if (j->epi) j->epi(j->epi_ctx, j->c, j->ldc, 0, 0, j->M, j->N);
}

static int run_job(job *j) {
  if (j->M <= 0 || j->N <= 0) return PRIMC_OK;
  if (j->K <= 0 || j->alpha == 0) {
    scale_c(j);
    return PRIMC_OK;
  }
  if (!j->kc) j->kc = (int)k_block(j->isa, j->K);
  /* few flops but a large B (a classifier's GEMV over 5 MB of weights) is memory-bound: split it too */
  int small = (double)j->M * (double)j->N * (double)j->K < SERIAL_FLOPS && (double)j->N * (double)j->K < SERIAL_B_FLOATS;
  int threads = small ? 1 : primc_num_threads();
  plan(j, threads);
  int64_t items = j->nI * j->nJ;
  if (threads <= 1 || items <= 1)
    run_items(j, 0, items);
  else
    primc_parallel_for(items, run_items, j);
  return j->status;
}

static job job_make(int trans_a, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda, float beta,
                    float *C, int64_t ldc, primc_epilogue epi, void *epi_ctx) {
  job j = {.isa = &isa_table[primc_sgemm_isa()], .M = M, .N = N, .K = K, .alpha = alpha, .beta = beta, .a = A,
           .ars = trans_a ? 1 : lda, .aks = trans_a ? lda : 1, .c = C, .ldc = ldc, .epi = epi, .epi_ctx = epi_ctx};
  return j;
}

/* M <= DOT_M_MAX rows against B^T: each C element is the dot product of two contiguous rows, and
 * packing B would cost more than the product itself */
#define DOT_M_MAX 4
#define DOT_NB 64 /* columns per work item */

static void dot_items(void *ctx, int64_t b, int64_t e) {
  job *j = ctx;
  for (int64_t i = b; i < e; i++) {
    int64_t n0 = i * DOT_NB, n1 = min64(j->N, n0 + DOT_NB);
    for (int64_t m = 0; m < j->M; m++)
      for (int64_t n = n0; n < n1; n++) {
        float v = j->alpha * j->isa->dot(j->a + m * j->ars, j->bs.b + n * j->bs.ldb, j->K);
        float *c = j->c + m * j->ldc + n;
        *c = j->beta == 0 ? v : v + j->beta * *c;
      }
    if (j->epi) j->epi(j->epi_ctx, j->c + n0, j->ldc, 0, n0, j->M, n1 - n0);
  }
}

static int run_dot(job *j) {
  int64_t items = cdiv(j->N, DOT_NB);
  if ((double)j->M * (double)j->N * (double)j->K < SERIAL_FLOPS)
    dot_items(j, 0, items);
  else
    primc_parallel_for(items, dot_items, j);
  return PRIMC_OK;
}

/* leading dimensions cover the rows they step over; pointers are there when something is read */
static int args_ok(int trans_a, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, float *C, int64_t ldc) {
  if (M < 0 || N < 0 || K < 0) return 0;
  if (M == 0 || N == 0) return 1;
  return C && ldc >= N && (K == 0 || (A && lda >= (trans_a ? M : K)));
}

/* rows of A up to which B is read in place rather than packed. AMD Zen 5 (family 1Ah) runs zmm FMAs at
 * full width, twice Zen 4's rate, so there packing B costs relatively more and B is read in place up to
 * 128 rows (1 thread: a 64x3136x576 GEMM 202 -> 250 GFLOP/s, ResNet-18's 128-channel Winograd conv 375 ->
 * 410 effective GFLOP/s, BERT-base 102 -> 98 ms; 256 rows gained nothing more); elsewhere the ISA's
 * value, tuned on Zen 4 and a Xeon */
#define ZEN5_DIRECT 128
static int64_t direct_rows(const isa_row *isa) {
  return isa == &isa_table[PRIMC_ISA_AVX512] && cpu_amd_family() >= 0x1a && ZEN5_DIRECT > isa->direct_max ? ZEN5_DIRECT
                                                                                                          : isa->direct_max;
}

int primc_sgemm_epi(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                    int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc, primc_epilogue epi,
                    void *epi_ctx) {
  if (!args_ok(trans_a, M, N, K, A, lda, C, ldc) || (M && N && K && (!B || ldb < (trans_b ? K : N))))
    return PRIMC_ERR_ARG;
  job j = job_make(trans_a, M, N, K, alpha, A, lda, beta, C, ldc, epi, epi_ctx);
  j.bs = (bsrc){.b = B, .ldb = ldb, .trans = trans_b};
  j.direct = !trans_b && M <= direct_rows(j.isa);
  if (trans_b && !trans_a && M <= DOT_M_MAX && M > 0 && N > 0 && K > 0 && alpha != 0) return run_dot(&j);
  return run_job(&j);
}

int primc_sgemm(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
  return primc_sgemm_epi(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, NULL, NULL);
}

int primc_sgemm_gen_b(int trans_a, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                      primc_brow_fn brow, void *brow_ctx, float beta, float *C, int64_t ldc, primc_epilogue epi,
                      void *epi_ctx) {
  if (!args_ok(trans_a, M, N, K, A, lda, C, ldc) || !brow) return PRIMC_ERR_ARG;
  job j = job_make(trans_a, M, N, K, alpha, A, lda, beta, C, ldc, epi, epi_ctx);
  j.bs = (bsrc){.row = brow, .row_ctx = brow_ctx};
  return run_job(&j);
}

/* ---------------------------------------------------------------- prepacked B */

/* header in front of the panels; the panel layout depends on the ISA, so it is checked at use */
typedef struct packed_hdr {
  uint32_t magic;
  int32_t isa, nr, kc;
  int64_t n, k;
  char pad[64 - 32];
} packed_hdr;

#define PACKED_MAGIC 0x42504d47u /* "GMPB" */

/* bytes of an N x K B packed in panels nr wide, header included */
static size_t packed_bytes(int64_t nr, int64_t N, int64_t K) {
  return sizeof(packed_hdr) + (size_t)(cdiv(N, nr) * nr * K) * sizeof(float);
}

size_t primc_sgemm_packed_b_size(int64_t N, int64_t K) { return packed_bytes(isa_table[primc_sgemm_isa()].nr, N, K); }

/* whether h is a header primc_sgemm_pack_b writes for an N x K B on some ISA: a weights file may have
 * been altered, and the ISA, panel width and K block decide where every later read goes */
static int hdr_valid(const packed_hdr *h, int64_t N, int64_t K) {
  if (h->magic != PACKED_MAGIC || h->isa < 0 || h->isa >= N_ISA || h->n != N || h->k != K || N < 0 || K < 0 ||
      N > ((int64_t)1 << 40) || K > ((int64_t)1 << 40))
    return 0;
  const isa_row *isa = &isa_table[h->isa];
  return h->nr == isa->nr && (K == 0 || h->kc == k_block(isa, K));
}

int primc_sgemm_packed_check(const void *packed_b, size_t avail, int64_t N, int64_t K, size_t *bytes) {
  packed_hdr h;
  if (!packed_b || ((uintptr_t)packed_b & 63) || avail < sizeof h) return PRIMC_ERR_WEIGHTS;
  memcpy(&h, packed_b, sizeof h);
  if (!hdr_valid(&h, N, K)) return PRIMC_ERR_WEIGHTS;
  if (N && K && (double)N * (double)K > (double)avail) return PRIMC_ERR_WEIGHTS; /* before the product can overflow */
  size_t need = packed_bytes(h.nr, N, K);
  if (need > avail) return PRIMC_ERR_WEIGHTS;
  if (bytes) *bytes = need;
  return PRIMC_OK;
}

/* for each K block at k0: panels of the whole width, panel p at [k0 * n_panels * NR + p * kc * NR] */
int primc_sgemm_pack_b(int trans_b, int64_t N, int64_t K, const float *B, int64_t ldb, void *packed) {
  if (!packed || ((uintptr_t)packed & 63) || N < 0 || K < 0 || (N && K && (!B || ldb < (trans_b ? K : N))))
    return PRIMC_ERR_ARG;
  int isa_id = primc_sgemm_isa();
  const isa_row *isa = &isa_table[isa_id];
  int64_t kcb = k_block(isa, K);
  packed_hdr h = {.magic = PACKED_MAGIC, .isa = isa_id, .nr = isa->nr, .kc = (int32_t)kcb, .n = N, .k = K};
  memcpy(packed, &h, sizeof h);
  float *dst = (float *)((char *)packed + sizeof h);
  bsrc s = {.b = B, .ldb = ldb, .trans = trans_b};
  int64_t np = cdiv(N, isa->nr);
  for (int64_t k0 = 0; k0 < K; k0 += kcb) {
    int64_t kc = min64(kcb, K - k0);
    for (int64_t p0 = 0; p0 < np; p0 += NC_MAX / isa->nr) {
      int64_t p1 = min64(np, p0 + NC_MAX / isa->nr);
      pack_b(&s, isa, k0, kc, p0, min64(N, p1 * isa->nr), dst + k0 * np * isa->nr + p0 * kc * isa->nr);
    }
  }
  return PRIMC_OK;
}

int primc_sgemm_prepacked(int trans_a, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                          const void *packed_b, float beta, float *C, int64_t ldc, primc_epilogue epi,
                          void *epi_ctx) {
  packed_hdr h;
  if (!packed_b || !args_ok(trans_a, M, N, K, A, lda, C, ldc)) return PRIMC_ERR_ARG;
  memcpy(&h, packed_b, sizeof h);
  job j = job_make(trans_a, M, N, K, alpha, A, lda, beta, C, ldc, epi, epi_ctx);
  if (!hdr_valid(&h, N, K) || h.isa != primc_sgemm_isa()) return PRIMC_ERR_ARG;
  j.bs = (bsrc){.packed = (const float *)((const char *)packed_b + sizeof h)};
  j.kc = h.kc;
  return run_job(&j);
}

/* ---------------------------------------------------------------- prepacked B of any ISA */

typedef struct packed_reader {
  const float *data;
  int64_t nr, kc, np, k;
} packed_reader;

/* b(k, n0 .. n0+nc) out of panels laid out by primc_sgemm_pack_b with the reader's nr and kc */
static void packed_row(void *ctx, int64_t k, int64_t n0, int64_t nc, float *dst) {
  const packed_reader *r = ctx;
  int64_t k0 = k / r->kc * r->kc, kcb = min64(r->kc, r->k - k0);
  const float *base = r->data + k0 * r->np * r->nr + (k - k0) * r->nr;
  for (int64_t j = 0; j < nc; j++) {
    int64_t n = n0 + j;
    dst[j] = base[(n / r->nr) * kcb * r->nr + n % r->nr];
  }
}

int primc_sgemm_prepacked_any(int trans_a, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                              const void *packed_b, float beta, float *C, int64_t ldc, primc_epilogue epi,
                              void *epi_ctx) {
  packed_hdr h;
  if (!packed_b || ((uintptr_t)packed_b & 63)) return PRIMC_ERR_ARG;
  memcpy(&h, packed_b, sizeof h);
  if (!hdr_valid(&h, N, K)) return PRIMC_ERR_ARG;
  if (h.isa == primc_sgemm_isa())
    return primc_sgemm_prepacked(trans_a, M, N, K, alpha, A, lda, packed_b, beta, C, ldc, epi, epi_ctx);
  packed_reader r = {(const float *)((const char *)packed_b + sizeof h), h.nr, h.kc, cdiv(N, h.nr), K};
  return primc_sgemm_gen_b(trans_a, M, N, K, alpha, A, lda, packed_row, &r, beta, C, ldc, epi, epi_ctx);
}

/* ---------------------------------------------------------------- packed A, B rows at offsets */

int primc_sgemm_mr(void) { return isa_table[primc_sgemm_isa()].mr; }

/* strips as the driver splits M for a tile of mr rows; strip s holds rows [m0, m1) as [k][m1 - m0] at
 * dst + m0 * K, so the whole is M * K floats whatever mr is */
int primc_sgemm_pack_a(int64_t M, int64_t K, const float *A, int64_t lda, int mr, float *dst) {
  if (M < 0 || K < 0 || mr < 1 || mr > MR_MAX || (M && K && (!A || !dst || lda < K))) return PRIMC_ERR_ARG;
  int64_t strips = cdiv(M, mr);
  for (int64_t s = 0; s < strips; s++) {
    int64_t m0 = M * s / strips, h = M * (s + 1) / strips - m0;
    for (int64_t r = 0; r < h; r++)
      for (int64_t k = 0; k < K; k++) dst[m0 * K + k * h + r] = A[(m0 + r) * lda + k];
  }
  return PRIMC_OK;
}

int primc_sgemm_run(const primc_gemm *g) {
  if (!g || g->M < 0 || g->N < 0 || g->K < 0) return PRIMC_ERR_ARG;
  if (!g->M || !g->N) return PRIMC_OK;
  int sources = !!g->b + !!g->brow + !!g->b_packed;
  if (!g->c || g->ldc < g->N || sources != 1 || (g->koff && !g->b) || g->a_packed_mr < 0 ||
      g->a_packed_mr > MR_MAX || (g->a_packed_mr && g->trans_a) || (g->K && !g->a) ||
      (!g->a_packed_mr && g->lda < (g->trans_a ? g->M : g->K)) || (g->b && !g->koff && g->K && g->ldb < g->N))
    return PRIMC_ERR_ARG;
  if (g->store && (g->b_packed || (g->store->row && (g->K < 1 || !g->store->y || g->store->keep < 1 ||
                                                       g->store->keep > g->store->row || g->N % g->store->row))))
    return PRIMC_ERR_ARG;
  if (g->b_packed)
    return primc_sgemm_prepacked_any(g->trans_a, g->M, g->N, g->K, 1.0f, g->a, g->lda, g->b_packed, 0.0f, g->c,
                                     g->ldc, g->epi, g->epi_ctx);
  job j = job_make(g->trans_a, g->M, g->N, g->K, 1.0f, g->a, g->lda, 0.0f, g->c, g->ldc, g->epi, g->epi_ctx);
  j.bs = g->brow ? (bsrc){.row = g->brow, .row_ctx = g->brow_ctx} : (bsrc){.b = g->b, .ldb = g->ldb};
  j.koff = g->koff;
  j.st = g->store;
  j.a_mr = g->a_packed_mr;
  j.direct = g->b && !g->koff && g->M <= direct_rows(j.isa);
  return run_job(&j);
}
