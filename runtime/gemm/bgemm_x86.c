/* runtime/gemm/bgemm_x86.c: the bf16 GEMM's x86 rows: AMX tiles, AVX512-BF16 (vdpbf16ps), the CPU checks and AMX permission, and f32 -> bf16 rounding on AVX-512. */
#include "runtime/gemm/bgemm.h"
#if PRIMC_X86
#include "runtime/avx512.h"
#include "runtime/gemm/amx.h"
#include "runtime/gemm/bgemm_zmm.h"
#endif
#include "runtime/gemm/gemm.h"

#if PRIMC_X86
#include <cpuid.h>
#include <immintrin.h>
#endif
#include <pthread.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ---------------------------------------------------------------- what the CPU (and kernel) allow */

#if PRIMC_X86
static uint64_t xcr0(void) {
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t)hi << 32 | lo;
}
#endif

static int amx_ok, bf16_ok;
static pthread_once_t feat_once = PTHREAD_ONCE_INIT;
#if !PRIMC_X86
static void feat_detect(void) {}
#endif

#if PRIMC_X86
#define ARCH_REQ_XCOMP_PERM 0x1023 /* Linux: ask for an XSAVE feature's state in this process */
#define XFEATURE_XTILEDATA 18

static void feat_detect(void) {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c >> 27 & 1)) return; /* OSXSAVE: xgetbv is there */
  uint64_t x = xcr0();
  int zmm_state = (x & 0xe6) == 0xe6; /* SSE, AVX, opmask, ZMM halves */
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return;
  int avx512f = b >> 16 & 1, amx_bf16 = d >> 22 & 1, amx_tile = d >> 24 & 1;
  unsigned a1 = 0, b1, c1, d1;
  if (__get_cpuid_count(7, 1, &a1, &b1, &c1, &d1)) bf16_ok = zmm_state && avx512f && (a1 >> 5 & 1);
  /* tile data is off for a process until it asks; a kernel that refuses leaves AMX unusable */
  if (amx_tile && amx_bf16 && (x >> 17 & 3) == 3)
    amx_ok = syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
}
#endif

int primc_bg_has_amx(void) {
  pthread_once(&feat_once, feat_detect);
  return amx_ok;
}

int primc_bg_has_avx512bf16(void) {
  pthread_once(&feat_once, feat_detect);
  return bf16_ok;
}

/* ---------------------------------------------------------------- rounding */

#if PRIMC_X86
#define X512 __attribute__((target("avx512f,avx512bw,avx512vl")))

/* the bf16 of x - hi (hi: x's bf16, widened back): the lo part of a split */
static inline X512 __m256i lo16(__m512 x, __m256i hi) {
  return primc_bf16_round16(_mm512_sub_ps(x, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(hi), 16))));
}

/* 16 values rounded into a tiled strip at element at of segment hi_seg (and hi_seg2), their lo parts at lo_seg
 * (a segment is skipped when < 0; segment s starts Kp * 16 elements after the last) */
static inline X512 void store16(uint16_t *strip, int64_t Kp, int64_t at, __m512 v, int hi_seg, int hi_seg2,
                                int lo_seg) {
  __m256i h = primc_bf16_round16(v);
  _mm256_storeu_si256((__m256i *)(strip + hi_seg * Kp * 16 + at), h);
  if (hi_seg2 >= 0) _mm256_storeu_si256((__m256i *)(strip + hi_seg2 * Kp * 16 + at), h);
  if (lo_seg >= 0) _mm256_storeu_si256((__m256i *)(strip + lo_seg * Kp * 16 + at), lo16(v, h));
}
#endif

/* store16's one-value form, for CPUs without AVX-512: x at row r, column k of the strip's segments */
static void put1(uint16_t *strip, int64_t Kp, int r, int64_t k, float x, int hi_seg, int hi_seg2, int lo_seg) {
  uint16_t h = primc_f32_to_bf16(x);
  strip[bg_a_at(0, r, hi_seg * Kp + k)] = h;
  if (hi_seg2 >= 0) strip[bg_a_at(0, r, hi_seg2 * Kp + k)] = h;
  if (lo_seg >= 0) strip[bg_a_at(0, r, lo_seg * Kp + k)] = primc_f32_to_bf16(x - primc_bf16_to_f32(h));
}

static void round_scalar(const float *x, int64_t n, uint16_t *hi, uint16_t *lo) {
  for (int64_t i = 0; i < n; i++) {
    hi[i] = primc_f32_to_bf16(x[i]);
    if (lo) lo[i] = primc_f32_to_bf16(x[i] - primc_bf16_to_f32(hi[i]));
  }
}

#if PRIMC_X86
static X512 void round_avx512(const float *x, int64_t n, uint16_t *hi, uint16_t *lo) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 v = _mm512_loadu_ps(x + i);
    __m256i h = primc_bf16_round16(v);
    _mm256_storeu_si256((__m256i *)(hi + i), h);
    if (lo) _mm256_storeu_si256((__m256i *)(lo + i), lo16(v, h));
  }
  round_scalar(x + i, n - i, hi + i, lo ? lo + i : NULL);
}
#endif

void primc_bg_round(const float *x, int64_t n, uint16_t *hi, uint16_t *lo) {
#if PRIMC_X86
  if (primc_sgemm_isa() == PRIMC_ISA_AVX512) {
    round_avx512(x, n, hi, lo);
    return;
  }
#endif
  round_scalar(x, n, hi, lo);
}

#if PRIMC_X86
static X512 void round_row_avx512(const float *x, int64_t K, int64_t Kp, uint16_t *strip, int r, int hi_seg,
                                   int hi_seg2, int lo_seg) {
  for (int64_t k = 0; k < Kp; k += 16) {
    int64_t c = K - k;
    __mmask16 m = primc_low_mask16(c);
    store16(strip, Kp, bg_a_at(0, r, k), _mm512_maskz_loadu_ps(m, x + k), hi_seg, hi_seg2, lo_seg);
  }
}
#endif

#if PRIMC_X86
/* the hi parts alone (split 1) by vcvtneps2bf16, one instruction where primc_bf16_round16 takes nine (subnormal
 * inputs flush to zero, as in pack_pair_avx512bf16): rounding A was 12% of a 128 x 768 x 768 bf16 GEMM */
static __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) void round_row_avx512bf16(
    const float *x, int64_t K, int64_t Kp, uint16_t *strip, int r, int hi_seg, int hi_seg2) {
  for (int64_t k = 0; k < Kp; k += 16) {
    int64_t c = K - k, at = bg_a_at(0, r, k);
    __mmask16 m = primc_low_mask16(c);
    __m256i h = (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, x + k));
    _mm256_storeu_si256((__m256i *)(strip + hi_seg * Kp * 16 + at), h);
    if (hi_seg2 >= 0) _mm256_storeu_si256((__m256i *)(strip + hi_seg2 * Kp * 16 + at), h);
  }
}
#endif

void primc_bg_round_row(const float *x, int64_t K, int64_t Kp, uint16_t *strip, int r, int hi_seg, int hi_seg2,
                        int lo_seg) {
#if PRIMC_X86
  if (lo_seg < 0 && primc_bg_has_avx512bf16() && primc_sgemm_isa() == PRIMC_ISA_AVX512) {
    round_row_avx512bf16(x, K, Kp, strip, r, hi_seg, hi_seg2);
    return;
  }
  if (primc_sgemm_isa() == PRIMC_ISA_AVX512) {
    round_row_avx512(x, K, Kp, strip, r, hi_seg, hi_seg2, lo_seg);
    return;
  }
#endif
  for (int64_t k = 0; k < Kp; k++) {
    put1(strip, Kp, r, k, k < K ? x[k] : 0.0f, hi_seg, hi_seg2, lo_seg);
  }
}

#if PRIMC_X86
static X512 void pack_pair_avx512(const float *r0, const float *r1, int n, uint16_t *dst0, uint16_t *dst1) {
  for (int h = 0; h < 2; h++) {
    int c = n - 16 * h;
    __mmask16 m = primc_low_mask16(c);
    __m512i lo = _mm512_cvtepu16_epi32(primc_bf16_round16(_mm512_maskz_loadu_ps(m, r0 + 16 * h)));
    __m512i hi = r1 ? _mm512_cvtepu16_epi32(primc_bf16_round16(_mm512_maskz_loadu_ps(m, r1 + 16 * h))) : _mm512_setzero_si512();
    _mm512_storeu_si512(h ? dst1 : dst0, _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
  }
}
#endif

#if PRIMC_X86
/* the same by vcvtne2ps2bf16 (round to nearest even as primc_bf16_round16, but subnormal inputs and results flushed
 * to zero), then one permute pairing the two rows' columns: a 256 -> 64 1x1 at 56x56 spent half its time in
 * pack_pair_avx512 */
static __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) void pack_pair_avx512bf16(
    const float *r0, const float *r1, int n, uint16_t *dst0, uint16_t *dst1) {
  const __m512i pairs = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6, 21,
                                         5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  for (int h = 0; h < 2; h++) {
    int c = n - 16 * h;
    __mmask16 m = primc_low_mask16(c);
    __m512 a = _mm512_maskz_loadu_ps(m, r0 + 16 * h), b = r1 ? _mm512_maskz_loadu_ps(m, r1 + 16 * h) : _mm512_setzero_ps();
    __m512i v = (__m512i)_mm512_cvtne2ps_pbh(b, a); /* a's 16 in the low half, b's in the high */
    _mm512_storeu_si512(h ? dst1 : dst0, _mm512_permutexvar_epi16(pairs, v));
  }
}
#endif

void primc_bg_pack_pair(const float *r0, const float *r1, int n, uint16_t *dst0, uint16_t *dst1) {
#if PRIMC_X86
  if (primc_bg_has_avx512bf16() && primc_sgemm_isa() == PRIMC_ISA_AVX512) {
    pack_pair_avx512bf16(r0, r1, n, dst0, dst1);
    return;
  }
  if (primc_sgemm_isa() == PRIMC_ISA_AVX512) {
    pack_pair_avx512(r0, r1, n, dst0, dst1);
    return;
  }
#endif
  for (int j = 0; j < 2 * BG_PANEL; j++) {
    uint16_t *d = (j < BG_PANEL ? dst0 : dst1) + j % BG_PANEL * 2;
    d[0] = j < n ? primc_f32_to_bf16(r0[j]) : 0;
    d[1] = j < n && r1 ? primc_f32_to_bf16(r1[j]) : 0;
  }
}

#if PRIMC_X86
static X512 void strip_t_avx512(const float *a, int64_t lda, int rows, int64_t K, int64_t Kp, uint16_t *strip,
                                 int hi_seg, int hi_seg2, int lo_seg) {
  const __mmask16 m = (__mmask16)((1u << rows) - 1);
  uint16_t th[BG_KSTEP][16], tl[BG_KSTEP][16];
  int64_t k0 = 0;
  if (rows == 16) /* whole 16 x 16 blocks: transposed as floats in registers, then rounded row by row */
    for (; k0 + 16 <= K; k0 += 16) {
      float t[16][16] __attribute__((aligned(64)));
      primc_gm_trans16_avx512(a + k0 * lda, lda, &t[0][0], 16);
      for (int r = 0; r < 16; r++) store16(strip, Kp, bg_a_at(0, r, k0), _mm512_load_ps(t[r]), hi_seg, hi_seg2, lo_seg);
    }
  for (int kn; k0 < K; k0 += kn) {
    kn = K - k0 < BG_KSTEP - k0 % BG_KSTEP ? (int)(K - k0) : BG_KSTEP - (int)(k0 % BG_KSTEP);
    for (int k = 0; k < kn; k++) {
      __m512 v = _mm512_maskz_loadu_ps(m, a + (k0 + k) * lda);
      __m256i h = primc_bf16_round16(v);
      _mm256_storeu_si256((__m256i *)th[k], h);
      if (lo_seg >= 0) _mm256_storeu_si256((__m256i *)tl[k], lo16(v, h));
    }
    /* [k][row] to the tile's [row][k] */
    for (int s = 0; s < 3; s++) {
      int seg = s == 0 ? hi_seg : s == 1 ? hi_seg2 : lo_seg;
      if (seg < 0) continue;
      uint16_t(*t)[16] = s == 2 ? tl : th;
      uint16_t *tile = strip + bg_a_at(0, 0, seg * Kp + k0); /* k0 may sit inside a tile (after whole blocks) */
      for (int r = 0; r < rows; r++)
        for (int k = 0; k < kn; k++) tile[r * BG_KSTEP + k] = t[k][r];
    }
  }
}
#endif

void primc_bg_round_strip_t(const float *a, int64_t lda, int rows, int64_t K, int64_t Kp, uint16_t *strip, int hi_seg,
                            int hi_seg2, int lo_seg) {
#if PRIMC_X86
  if (primc_sgemm_isa() == PRIMC_ISA_AVX512) {
    strip_t_avx512(a, lda, rows, K, Kp, strip, hi_seg, hi_seg2, lo_seg);
    return;
  }
#endif
  for (int64_t k = 0; k < K; k++)
    for (int r = 0; r < rows; r++) put1(strip, Kp, r, k, a[k * lda + r], hi_seg, hi_seg2, lo_seg);
}

#if PRIMC_X86
/* ---------------------------------------------------------------- C tiles at the edges */

/* rows x cols of C into a zero-padded 16 x 16 tile, and back */
static void edge_in(float *t, const float *c, int64_t ldc, int rows, int cols, int accumulate) {
  memset(t, 0, 16 * 16 * sizeof *t);
  for (int r = 0; accumulate && r < rows; r++) memcpy(t + 16 * r, c + r * ldc, (size_t)cols * sizeof *t);
}

static void edge_out(const float *t, float *c, int64_t ldc, int rows, int cols) {
  for (int r = 0; r < rows; r++) memcpy(c + r * ldc, t + 16 * r, (size_t)cols * sizeof *t);
}

/* ---------------------------------------------------------------- AMX: 2 x 2 tiles of 16 x 16 */

#define AMX __attribute__((target("amx-tile,amx-bf16")))

/* every tile 16 rows of 64 bytes: tmm0-3 the C tiles, tmm4-5 A (16 rows x 32 k), tmm6-7 B (16 k pairs x 16 columns) */
typedef struct {
  uint8_t palette, start_row, reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
} tile_config;

/* a constant: GCC 12 drops stores to a local config before ldtilecfg as dead */
static const tile_config amx_cfg __attribute__((aligned(64))) = {
    .palette = 1,
    .colsb = {64, 64, 64, 64, 64, 64, 64, 64},
    .rows = {16, 16, 16, 16, 16, 16, 16, 16},
};

AMX void primc_bg_setup_amx(int on) {
  if (on)
    _tile_loadconfig(&amx_cfg);
  else
    _tile_release();
}

/* tile numbers are immediates, so each C tile's load and store is spelled out */
#define C_LOAD(T, c, ldc, rows, cols, acc, buf)                                                                         \
  do {                                                                                                                 \
    if (!(acc))                                                                                                        \
      _tile_zero(T);                                                                                                   \
    else if ((rows) == 16 && (cols) == 16)                                                                             \
      _tile_loadd(T, c, (ldc) * 4);                                                                                    \
    else {                                                                                                             \
      edge_in(buf, c, ldc, rows, cols, 1);                                                                             \
      _tile_loadd(T, buf, 64);                                                                                         \
    }                                                                                                                  \
  } while (0)

#define C_STORE(T, c, ldc, rows, cols, buf)                                                                            \
  do {                                                                                                                 \
    if ((rows) == 16 && (cols) == 16)                                                                                  \
      _tile_stored(T, c, (ldc) * 4);                                                                                   \
    else {                                                                                                             \
      _tile_stored(T, buf, 64);                                                                                        \
      edge_out(buf, c, ldc, rows, cols);                                                                           \
    }                                                                                                                  \
  } while (0)

static inline __attribute__((always_inline)) AMX void amx_loop(const bkargs *g, const int M2, const int N2) {
  PRIMC_AMX_LOOP(g, M2, N2, BG_KSTEP, BG_PANEL, _tile_dpbf16ps);
}

AMX void primc_bg_kern_amx(const bkargs *g) {
  float buf[16 * 16] __attribute__((aligned(64)));
  const int M2 = g->mr > 16, N2 = g->nr > 16;
  const int r0 = M2 ? 16 : g->mr, r1 = M2 ? g->mr - 16 : 0, c0 = N2 ? 16 : g->nr, c1 = N2 ? g->nr - 16 : 0;
  float *c = g->c, *cr = g->c + 16 * g->ldc;
  const int64_t ldc = g->ldc;
  C_LOAD(0, c, ldc, r0, c0, g->accumulate, buf);
  if (N2) C_LOAD(1, c + 16, ldc, r0, c1, g->accumulate, buf);
  if (M2) C_LOAD(2, cr, ldc, r1, c0, g->accumulate, buf);
  if (M2 && N2) C_LOAD(3, cr + 16, ldc, r1, c1, g->accumulate, buf);
  if (M2 && N2)
    amx_loop(g, 1, 1);
  else if (M2)
    amx_loop(g, 1, 0);
  else if (N2)
    amx_loop(g, 0, 1);
  else
    amx_loop(g, 0, 0);
  C_STORE(0, c, ldc, r0, c0, buf);
  if (N2) C_STORE(1, c + 16, ldc, r0, c1, buf);
  if (M2) C_STORE(2, cr, ldc, r1, c0, buf);
  if (M2 && N2) C_STORE(3, cr + 16, ldc, r1, c1, buf);
}

/* ---------------------------------------------------------------- AVX512-BF16: up to 8 rows x 2 zmm */

#define BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
#define BF_MR BG_MR_AVX512BF16

static inline __attribute__((always_inline)) BF16 void bf_tile(const bkargs *g, const int R, const int V) {
  __m512 acc[BF_MR][2];
#pragma GCC unroll 8
  for (int r = 0; r < R; r++) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  const uint16_t *a = g->a, *b = g->b;
  for (int64_t kp = 0; kp < g->kc / 2; kp++) {
    if (g->pf && kp % 16 == 0 && kp * 4 < g->pf_lines) /* 4 lines per 32 k: the next pair's lines, spread */
      for (int l = 0; l < 4 && (kp / 16 * 4 + l) < g->pf_lines; l++) _mm_prefetch(g->pf + 64 * (kp / 16 * 4 + l), _MM_HINT_T1);
    __m512bh v0 = (__m512bh)_mm512_loadu_si512(b + bg_b_at(kp, 0)), v1 = v0;
    if (V == 2) v1 = (__m512bh)_mm512_loadu_si512(b + bg_b_at(kp, 1));
  #pragma GCC unroll 8
  for (int r = 0; r < R; r++) {
      int32_t pair;
      memcpy(&pair, a + bg_a_at(g->lda, r, 2 * kp), sizeof pair);
      __m512bh x = (__m512bh)_mm512_set1_epi32(pair);
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], x, v0);
      if (V == 2) acc[r][1] = _mm512_dpbf16_ps(acc[r][1], x, v1);
    }
  }
  bg_store512(g, acc, R, V);
}

BF16 void primc_bg_kern_avx512bf16(const bkargs *g) { BG_DISPATCH512(bf_tile) }
#else
/* not x86: the AMX and AVX512-BF16 rows never run (their needs fail), but the table names them */
void primc_bg_setup_amx(int on) { __builtin_trap(); }
void primc_bg_kern_amx(const bkargs *g) { __builtin_trap(); }
void primc_bg_kern_avx512bf16(const bkargs *g) { __builtin_trap(); }
#endif
