/* runtime/gemm/igemm_x86.c: the int8 GEMM's x86 rows: AMX-INT8 tiles (tdpbusd), AVX512-VNNI and AVX-VNNI (vpdpbusd), and the CPU checks. */
#include "runtime/gemm/igemm.h"

#if PRIMC_X86

#include "runtime/gemm/gemm.h"
#include "runtime/gemm/amx.h"
#include "runtime/gemm/bgemm_zmm.h"

#include <cpuid.h>
#include <immintrin.h>
#include <pthread.h>
#include <string.h>

/* ---------------------------------------------------------------- what the CPU allows */

static int amx_ok, vnni512_ok, vnni256_ok;
static pthread_once_t feat_once = PTHREAD_ONCE_INIT;

static void feat_detect(void) {
  unsigned a, b, c, d, a1 = 0, b1, c1, d1;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return;
  /* the bf16 family's check holds the tile state and Linux's permission for tile data; AMX-INT8 is its own bit */
  amx_ok = (d >> 25 & 1) && primc_bg_has_amx();
  vnni512_ok = (c >> 11 & 1) && primc_isa_covers(primc_sgemm_isa(), PRIMC_ISA_AVX512); /* the ISA check holds the zmm state */
  if (__get_cpuid_count(7, 1, &a1, &b1, &c1, &d1)) vnni256_ok = (a1 >> 4 & 1) && primc_isa_covers(primc_sgemm_isa(), PRIMC_ISA_AVX2);
}

int primc_ig_has_amx_int8(void) {
  pthread_once(&feat_once, feat_detect);
  return amx_ok;
}

int primc_ig_has_avx512vnni(void) {
  pthread_once(&feat_once, feat_detect);
  return vnni512_ok;
}

int primc_ig_has_avxvnni(void) {
  pthread_once(&feat_once, feat_detect);
  return vnni256_ok;
}

/* ---------------------------------------------------------------- A's rows to u8 */

#define BW512 __attribute__((target("avx512f,avx512bw")))

BW512 int primc_ig_pack_row_avx512(const int32_t *x, int64_t K, int64_t Kp, uint8_t *strip, int r, int32_t *lo,
                                   uint32_t *ra) {
  __m512i vlo = _mm512_set1_epi32(INT32_MAX), vhi = _mm512_set1_epi32(INT32_MIN);
  for (int64_t k = 0; k < K; k += 16) {
    __mmask16 m = (__mmask16)(K - k >= 16 ? 0xffff : (1u << (K - k)) - 1);
    __m512i v = _mm512_maskz_loadu_epi32(m, x + k);
    vlo = _mm512_mask_min_epi32(vlo, m, vlo, v);
    vhi = _mm512_mask_max_epi32(vhi, m, vhi, v);
  }
  int32_t l = _mm512_reduce_min_epi32(vlo), h = _mm512_reduce_max_epi32(vhi);
  __m512i off = _mm512_set1_epi32(l), sum = _mm512_setzero_si512();
  for (int64_t k = 0; k < Kp; k += 16) {
    __mmask16 m = (__mmask16)(K - k >= 16 ? 0xffff : K - k <= 0 ? 0 : (1u << (K - k)) - 1);
    __m512i v = _mm512_maskz_sub_epi32(m, _mm512_maskz_loadu_epi32(m, x + k), off);
    sum = _mm512_add_epi32(sum, v);
    _mm_storeu_si128((__m128i *)(strip + (k / IG_KSTEP) * 16 * IG_KSTEP + r * IG_KSTEP + k % IG_KSTEP),
                     _mm512_cvtepi32_epi8(v));
  }
  *lo = l;
  *ra = (uint32_t)_mm512_reduce_add_epi32(sum);
  return (int64_t)h - l > 255;
}

/* ---------------------------------------------------------------- storing with the fold */

#define Z512 __attribute__((target("avx512f")))

/* v (16 columns' sums of row r) with the fold when the call is the last K block's: v + rsum cob + roff csum */
static inline __attribute__((always_inline)) Z512 __m512i fold16(const ikargs *g, int r, __m512i v, __m512i cob,
                                                                 __m512i csum) {
  if (!g->last) return v;
  v = _mm512_add_epi32(v, _mm512_mullo_epi32(_mm512_set1_epi32(g->rsum[r]), cob));
  return _mm512_add_epi32(v, _mm512_mullo_epi32(_mm512_set1_epi32(g->roff[r]), csum));
}

/* rows r0 .. r0 + rows of a 16 x 16 int32 tile (t, 16 apart) into C's columns j0 .. j0 + cols, folded at the last
 * K block (the tile already holds the earlier blocks' sums) */
static inline __attribute__((always_inline)) Z512 void tile_out(const ikargs *g, const int32_t *t, int r0, int rows,
                                                                 int j0, int cols) {
  const __mmask16 mk = (__mmask16)(cols >= 16 ? 0xffff : (1u << cols) - 1);
  const __m512i cob = _mm512_maskz_loadu_epi32(mk, g->cob + j0), cs = _mm512_maskz_loadu_epi32(mk, g->csum + j0);
  for (int r = 0; r < rows; r++)
    _mm512_mask_storeu_epi32(g->c + (r0 + r) * g->ldc + j0, mk, fold16(g, r0 + r, _mm512_load_si512(t + 16 * r), cob, cs));
}

/* C's raw sums (rows x cols from c) into a zero-padded 16 x 16 tile buffer */
static void tile_in(int32_t *t, const int32_t *c, int64_t ldc, int rows, int cols) {
  memset(t, 0, 16 * 16 * sizeof *t);
  for (int r = 0; r < rows; r++) memcpy(t + 16 * r, c + r * ldc, (size_t)cols * sizeof *t);
}

/* ---------------------------------------------------------------- AMX-INT8: 2 x 2 tiles of 16 x 16 */

#define AMX __attribute__((target("amx-tile,amx-int8,avx512f")))

/* tmm0-3 the C tiles, tmm4-5 A (16 rows x 64 k), tmm6-7 B (16 k quads x 16 columns); bgemm_x86.c's configuration */
static inline __attribute__((always_inline)) AMX void amx_loop(const ikargs *g, const int M2, const int N2) {
  PRIMC_AMX_LOOP(g, M2, N2, IG_KSTEP, IG_PANEL, _tile_dpbusd);
}

/* tile numbers are immediates, so each C tile's load and store is spelled out: whole tiles straight from and to C,
 * edge tiles through a zero-padded buffer; after the last K block every tile goes through the fold */
#define C_IN(T, cp, rows, cols, buf)                                                                                   \
  do {                                                                                                                 \
    if ((rows) == 16 && (cols) == 16)                                                                                  \
      _tile_loadd(T, cp, g->ldc * 4);                                                                                  \
    else {                                                                                                             \
      tile_in(buf, cp, g->ldc, rows, cols);                                                                            \
      _tile_loadd(T, buf, 64);                                                                                         \
    }                                                                                                                  \
  } while (0)

#define C_OUT(T, cp, rows, cols, buf, r0, j0)                                                                          \
  do {                                                                                                                 \
    if (!g->last && (rows) == 16 && (cols) == 16)                                                                      \
      _tile_stored(T, cp, g->ldc * 4);                                                                                 \
    else {                                                                                                             \
      _tile_stored(T, buf, 64);                                                                                        \
      tile_out(g, buf, r0, rows, j0, cols);                                                                            \
    }                                                                                                                  \
  } while (0)

AMX void primc_ig_kern_amx(const ikargs *g) {
  int32_t t[4][16 * 16] __attribute__((aligned(64)));
  const int M2 = g->mr > 16, N2 = g->nr > 16;
  const int r0 = M2 ? 16 : g->mr, r1 = M2 ? g->mr - 16 : 0, c0 = N2 ? 16 : g->nr, c1 = N2 ? g->nr - 16 : 0;
  int32_t *c = g->c, *cr = g->c + 16 * g->ldc;
  if (g->first) {
    _tile_zero(0);
    if (N2) _tile_zero(1);
    if (M2) _tile_zero(2);
    if (M2 && N2) _tile_zero(3);
  } else { /* the earlier K blocks' raw sums */
    C_IN(0, c, r0, c0, t[0]);
    if (N2) C_IN(1, c + 16, r0, c1, t[1]);
    if (M2) C_IN(2, cr, r1, c0, t[2]);
    if (M2 && N2) C_IN(3, cr + 16, r1, c1, t[3]);
  }
  if (M2 && N2)
    amx_loop(g, 1, 1);
  else if (M2)
    amx_loop(g, 1, 0);
  else if (N2)
    amx_loop(g, 0, 1);
  else
    amx_loop(g, 0, 0);
  C_OUT(0, c, r0, c0, t[0], 0, 0);
  if (N2) C_OUT(1, c + 16, r0, c1, t[1], 0, 16);
  if (M2) C_OUT(2, cr, r1, c0, t[2], 16, 0);
  if (M2 && N2) C_OUT(3, cr + 16, r1, c1, t[3], 16, 16);
}

/* ---------------------------------------------------------------- AVX512-VNNI: up to 8 rows x 2 zmm */

#define VNNI __attribute__((target("avx512f,avx512vnni")))
#define VN_MR IG_MR_AVX512VNNI

static inline __attribute__((always_inline)) VNNI void vn_tile(const ikargs *g, const int R, const int V) {
  __m512i acc[VN_MR][2];
#pragma GCC unroll 8
  for (int r = 0; r < R; r++) acc[r][0] = acc[r][1] = _mm512_setzero_si512();
  const int64_t per = g->pf ? (g->pf_lines + g->kc / 64 - 1) / (g->kc / 64) : 0; /* lines per 64 k */
  for (int64_t kq = 0; kq < g->kc / 4; kq++) {
    if (per && kq % 16 == 0)
      for (int64_t l = kq / 16 * per; l < (kq / 16 + 1) * per && l < g->pf_lines; l++) _mm_prefetch(g->pf + 64 * l, _MM_HINT_T1);
    __m512i b0 = _mm512_loadu_si512(g->b + ig_b_at(kq, 0)), b1 = b0;
    if (V == 2) b1 = _mm512_loadu_si512(g->b + ig_b_at(kq, 1));
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) {
      int32_t quad;
      memcpy(&quad, g->a + ig_a_at(g->lda, r, 4 * kq), sizeof quad);
      __m512i x = _mm512_set1_epi32(quad);
      acc[r][0] = _mm512_dpbusd_epi32(acc[r][0], x, b0);
      if (V == 2) acc[r][1] = _mm512_dpbusd_epi32(acc[r][1], x, b1);
    }
  }
  const int n0 = V == 2 ? 16 : g->nr, n1 = V == 2 ? g->nr - 16 : 0;
  const __mmask16 m0 = (__mmask16)((1u << n0) - 1), m1 = (__mmask16)((1u << n1) - 1);
  const __m512i ob0 = _mm512_maskz_loadu_epi32(m0, g->cob), ob1 = _mm512_maskz_loadu_epi32(m1, g->cob + 16);
  const __m512i cs0 = _mm512_maskz_loadu_epi32(m0, g->csum), cs1 = _mm512_maskz_loadu_epi32(m1, g->csum + 16);
#pragma GCC unroll 8
  for (int r = 0; r < R; r++) {
    int32_t *c = g->c + r * g->ldc;
    if (!g->first) {
      acc[r][0] = _mm512_add_epi32(acc[r][0], _mm512_maskz_loadu_epi32(m0, c));
      if (V == 2) acc[r][1] = _mm512_add_epi32(acc[r][1], _mm512_maskz_loadu_epi32(m1, c + 16));
    }
    _mm512_mask_storeu_epi32(c, m0, fold16(g, r, acc[r][0], ob0, cs0));
    if (V == 2) _mm512_mask_storeu_epi32(c + 16, m1, fold16(g, r, acc[r][1], ob1, cs1));
  }
}

VNNI void primc_ig_kern_avx512vnni(const ikargs *g) {
  BG_DISPATCH512(vn_tile) /* bgemm_zmm.h's: the call's rows as a constant, one or two zmm of columns */
}

/* ---------------------------------------------------------------- AVX-VNNI: up to 4 rows x 4 ymm */

#define AVNNI __attribute__((target("avx2,avxvnni")))
#define AV_MR IG_MR_AVXVNNI

static inline __attribute__((always_inline)) AVNNI void av_tile(const ikargs *g, const int R, const int V) {
  __m256i acc[AV_MR][4];
#pragma GCC unroll 4
  for (int r = 0; r < R; r++) acc[r][0] = acc[r][1] = acc[r][2] = acc[r][3] = _mm256_setzero_si256();
  for (int64_t kq = 0; kq < g->kc / 4; kq++) {
    __m256i b[4];
#pragma GCC unroll 4
    for (int v = 0; v < V; v++) b[v] = _mm256_loadu_si256((const __m256i *)(g->b + ig_b_at(kq, v / 2) + 32 * (v % 2)));
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
      int32_t quad;
      memcpy(&quad, g->a + ig_a_at(g->lda, r, 4 * kq), sizeof quad);
      __m256i x = _mm256_set1_epi32(quad);
#pragma GCC unroll 4
      for (int v = 0; v < V; v++) acc[r][v] = _mm256_dpbusd_avx_epi32(acc[r][v], x, b[v]);
    }
  }
  for (int r = 0; r < R; r++) {
    int32_t s[32];
    for (int v = 0; v < V; v++) _mm256_storeu_si256((__m256i *)(s + 8 * v), acc[r][v]);
    for (int jn = 0; jn < g->nr; jn++) ig_store(g, r, jn, s[jn]);
  }
}

/* V: ymm of columns holding any (2: the first panel only) */
#define AV_CASE(R)                                                                                                     \
  case R:                                                                                                              \
    if (g->nr > 16)                                                                                                    \
      av_tile(g, R, 4);                                                                                                \
    else                                                                                                               \
      av_tile(g, R, 2);                                                                                                \
    break;

AVNNI void primc_ig_kern_avxvnni(const ikargs *g) {
  switch (g->mr) {
    AV_CASE(1) AV_CASE(2) AV_CASE(3) AV_CASE(4)
  default: break;
  }
}

/* ---------------------------------------------------------------- AVX2: 4 rows x 8 columns a pass, no VNNI */

/* vpmaddubsw would add two u8 x s8 products in int16 and saturate past 32767 (255 * 127 * 2 can reach 64770).
 * So both operands go to int16 and vpmaddwd adds each pair into int32, exactly: 4 columns x 4 k of B's quads,
 * widened once per block of B into the thread's wb (a ymm each), against a row's 4 k of A widened and repeated,
 * give each column's two half sums (k 0-1, k 2-3) side by side; they are added at the store. One multiply per
 * 16 products, two a cycle on Zen 3. A pass keeps 4 rows x 2 chunks of sums in registers, so each chunk of B is
 * loaded once per k quad for 4 rows (one row a pass read B's 64-byte quads from L2 for every row: 12 products a
 * cycle where the multiplies allow 32), and the call's rows of A are widened first, so that a row's quad is one
 * vpbroadcastq from memory. */
#define X2 __attribute__((target("avx2")))
enum { A2_ROWS = 4 };
_Static_assert((int)IG_MR_AVX2 == (int)A2_ROWS, "the AVX2 row's table entry and its kernel agree on the rows of a call");

/* the 4 rows' sums of columns 8p .. 8p + 7 into C (rows below mr, columns below nr) */
static X2 void a2_store(const ikargs *g, const __m256i *v, int p) {
  int n = g->nr - 8 * p < 8 ? g->nr - 8 * p : 8;
  for (int r = 0; r < g->mr; r++) {
    int32_t *c = g->c + r * g->ldc + 8 * p;
    __m256i x = v[r];
    if (n < 8) {
      int32_t s[8];
      _mm256_storeu_si256((__m256i *)s, x);
      for (int jn = 0; jn < n; jn++) ig_store(g, r, 8 * p + jn, s[jn]);
      continue;
    }
    if (!g->first) x = _mm256_add_epi32(x, _mm256_loadu_si256((const __m256i *)c));
    if (g->last) { /* ig_fix on 8 columns: the products wrap in int32 as the scalar's uint32 ones */
      __m256i cob = _mm256_loadu_si256((const __m256i *)(g->cob + 8 * p)), csum = _mm256_loadu_si256((const __m256i *)(g->csum + 8 * p));
      x = _mm256_add_epi32(x, _mm256_mullo_epi32(_mm256_set1_epi32(g->rsum[r]), cob));
      x = _mm256_add_epi32(x, _mm256_mullo_epi32(_mm256_set1_epi32(g->roff[r]), csum));
    }
    _mm256_storeu_si256((__m256i *)c, x);
  }
}

/* columns 8p .. 8p + 7 of the call's 4 rows over its kc; wa: the rows widened, kc apart */
static inline __attribute__((always_inline)) X2 void a2_pass(const ikargs *g, const int16_t *wa, int p) {
  __m256i acc[A2_ROWS][2];
#pragma GCC unroll 4
  for (int r = 0; r < A2_ROWS; r++) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
  const __m256i *w = (const __m256i *)g->wb + 2 * p * (g->kc / 4);
  for (int64_t kq = 0; kq < g->kc / 4; kq++, w += 2) {
    __m256i b0 = _mm256_load_si256(w), b1 = _mm256_load_si256(w + 1);
#pragma GCC unroll 4
    for (int r = 0; r < A2_ROWS; r++) { /* the adds as asm: GCC otherwise rotated the sums through moves */
      int64_t quad;
      memcpy(&quad, wa + r * g->kc + 4 * kq, sizeof quad);
      __m256i x = _mm256_set1_epi64x(quad), t0 = _mm256_madd_epi16(x, b0), t1 = _mm256_madd_epi16(x, b1);
      __asm__("vpaddd %1, %0, %0" : "+x"(acc[r][0]) : "x"(t0));
      __asm__("vpaddd %1, %0, %0" : "+x"(acc[r][1]) : "x"(t1));
    }
  }
  __m256i v[A2_ROWS];
#pragma GCC unroll 4
  for (int r = 0; r < A2_ROWS; r++) /* [c0 c0' c1 c1' | c2 c2' c3 c3'] pairs added: c0 c1 c4 c5 | c2 c3 c6 c7 */
    v[r] = _mm256_permute4x64_epi64(_mm256_hadd_epi32(acc[r][0], acc[r][1]), 0xD8);
  a2_store(g, v, p);
}

X2 void primc_ig_kern_avx2(const ikargs *g) {
  int ch = g->nr > 16 ? 8 : 4;
  int64_t nq = g->kc / 4;
  if (g->fresh) /* chunk u of k quad kq (columns 4u .. 4u + 3) at wb[((u / 2 * nq + kq) * 2 + u % 2) * 16]: a pass's
                 * two chunks one after the other along k */
    for (int64_t kq = 0; kq < nq; kq++)
      for (int u = 0; u < ch; u++)
        _mm256_store_si256((__m256i *)(g->wb + ((u / 2 * nq + kq) * 2 + u % 2) * 16),
                           _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(g->b + ig_b_at(kq, u / 4) + 16 * (u % 4)))));
  /* the call's rows (those past mr are zero rows of the strip) widened, row r at wa[r * kc] */
  int16_t wa[A2_ROWS * IG_KC] __attribute__((aligned(32)));
  for (int r = 0; r < A2_ROWS; r++)
    for (int64_t k = 0; k < g->kc; k += 16)
      _mm256_store_si256((__m256i *)(wa + r * g->kc + k),
                         _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(g->a + ig_a_at(g->lda, r, k)))));
  for (int p = 0; 8 * p < g->nr; p++) a2_pass(g, wa, p);
}

#endif
