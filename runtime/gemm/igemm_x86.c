/* runtime/gemm/igemm_x86.c: the int8 GEMM's x86 rows: AMX-INT8 tiles (tdpbusd), AVX512-VNNI and AVX-VNNI (vpdpbusd), and the CPU checks. */
#include "runtime/gemm/igemm.h"

#if PRIMC_X86

#include "runtime/gemm/gemm.h"
#include "runtime/avx2.h"
#include "runtime/avx512.h"
#include "runtime/gemm/amx.h"
#include "runtime/gemm/bgemm_zmm.h"

#include <cpuid.h>
#include <immintrin.h>
#include <pthread.h>
#include <stdlib.h>
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
    __mmask16 m = primc_low_mask16(K - k);
    __m512i v = _mm512_maskz_loadu_epi32(m, x + k);
    vlo = _mm512_mask_min_epi32(vlo, m, vlo, v);
    vhi = _mm512_mask_max_epi32(vhi, m, vhi, v);
  }
  int32_t l = _mm512_reduce_min_epi32(vlo), h = _mm512_reduce_max_epi32(vhi);
  __m512i off = _mm512_set1_epi32(l), sum = _mm512_setzero_si512();
  for (int64_t k = 0; k < Kp; k += 16) {
    __mmask16 m = primc_low_mask16(K - k);
    __m512i v = _mm512_maskz_sub_epi32(m, _mm512_maskz_loadu_epi32(m, x + k), off);
    sum = _mm512_add_epi32(sum, v);
    _mm_storeu_si128((__m128i *)(strip + (k / IG_KSTEP) * 16 * IG_KSTEP + r * IG_KSTEP + k % IG_KSTEP),
                     _mm512_cvtepi32_epi8(v));
  }
  *lo = l;
  *ra = (uint32_t)_mm512_reduce_add_epi32(sum);
  return (int64_t)h - l > 255;
}

/* the same on ymm (quantize_dynamic's MatMulInteger rows on AVX2 CPUs: the plain loop took 9% of such a BERT-width
 * encoder's run); the bytes past K zero, so the strip is written whole */
__attribute__((target("avx2"))) int primc_ig_pack_row_avx2(const int32_t *x, int64_t K, int64_t Kp, uint8_t *strip,
                                                           int r, int32_t *lo, uint32_t *ra) {
  int32_t l = INT32_MAX, h = INT32_MIN;
  int64_t k = primc_range_i32_avx2(x, K, &l, &h);
  for (; k < K; k++) l = x[k] < l ? x[k] : l, h = x[k] > h ? x[k] : h;
  const __m256i off = _mm256_set1_epi32(l);
  __m256i sum = _mm256_setzero_si256();
  for (k = 0; k < Kp; k += 16) {
    __m256i v0, v1;
    if (k + 16 <= K) {
      v0 = _mm256_sub_epi32(_mm256_loadu_si256((const __m256i *)(x + k)), off);
      v1 = _mm256_sub_epi32(_mm256_loadu_si256((const __m256i *)(x + k + 8)), off);
    } else { /* the row's end: zero past K */
      int32_t t[16];
      for (int i = 0; i < 16; i++) t[i] = k + i < K ? (int32_t)((uint32_t)x[k + i] - (uint32_t)l) : 0;
      v0 = _mm256_loadu_si256((const __m256i *)t), v1 = _mm256_loadu_si256((const __m256i *)(t + 8));
    }
    sum = _mm256_add_epi32(sum, _mm256_add_epi32(v0, v1));
    /* 0 .. 255 each where the row is not wide: the saturating packs keep them */
    _mm_storeu_si128((__m128i *)(strip + (k / IG_KSTEP) * 16 * IG_KSTEP + r * IG_KSTEP + k % IG_KSTEP),
                     primc_u8_of_i32x16(v0, v1));
  }
  uint32_t sums[8], s = 0;
  _mm256_storeu_si256((__m256i *)sums, sum);
  for (int i = 0; i < 8; i++) s += sums[i];
  *lo = l;
  *ra = s;
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
  const __mmask16 mk = primc_low_mask16(cols);
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

/* A read in place (kern_ip): a strip's 16 rows as one tile load where they lie equally far apart (a run of pixels
 * of one output row), else copied into stage first (a run across two rows; rows past the call's repeat its first) */
typedef struct ip_strip {
  const uint8_t *p;
  int64_t ld; /* 0: staged */
} ip_strip;

static ip_strip ip_strip_of(const ikargs *g, int r0, int rows) {
  int64_t ld = rows == 16 ? g->arow[r0 + 1] - g->arow[r0] : 0;
  for (int r = 2; r < rows && ld > 0; r++)
    if (g->arow[r0 + r] - g->arow[r0 + r - 1] != ld) ld = 0;
  return (ip_strip){g->arow[r0], ld > 0 ? ld : 0};
}

static inline __attribute__((always_inline)) AMX const void *ip_a(const ikargs *g, ip_strip s, int r0, int rows,
                                                                 int64_t b, uint8_t (*stage)[64], int64_t *ld) {
  if (s.ld) {
    *ld = s.ld;
    return s.p + g->boff[b];
  }
  for (int r = 0; r < 16; r++) memcpy(stage[r], g->arow[r0 + (r < rows ? r : 0)] + g->boff[b], 64);
  *ld = 64;
  return stage;
}

static inline __attribute__((always_inline)) AMX void amx_loop_ip(const ikargs *g, const int M2, const int N2) {
  uint8_t stage[2][16][64] __attribute__((aligned(64)));
  const int r0 = M2 ? 16 : g->mr, r1 = M2 ? g->mr - 16 : 0;
  ip_strip s0 = ip_strip_of(g, 0, r0), s1 = M2 ? ip_strip_of(g, 16, r1) : s0;
  for (int64_t k = 0, b = 0; k < g->kc; k += IG_KSTEP, b++) {
    int64_t ld;
    const void *a0 = ip_a(g, s0, 0, r0, b, stage[0], &ld);
    _tile_loadd(4, a0, ld);
    _tile_loadd(6, g->b + k * 2 * IG_PANEL, 64);
    if (N2) _tile_loadd(7, g->b + k * 2 * IG_PANEL + 16 * IG_KSTEP, 64);
    _tile_dpbusd(0, 4, 6);
    if (N2) _tile_dpbusd(1, 4, 7);
    if (M2) {
      const void *a1 = ip_a(g, s1, 16, r1, b, stage[1], &ld);
      _tile_loadd(5, a1, ld);
      _tile_dpbusd(2, 5, 6);
      if (N2) _tile_dpbusd(3, 5, 7);
    }
  }
}

static inline __attribute__((always_inline)) AMX void amx_kern(const ikargs *g, const int IP) {
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
  if (IP) {
    if (M2 && N2) amx_loop_ip(g, 1, 1);
    else if (M2) amx_loop_ip(g, 1, 0);
    else if (N2) amx_loop_ip(g, 0, 1);
    else amx_loop_ip(g, 0, 0);
  } else if (M2 && N2)
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

AMX void primc_ig_kern_amx(const ikargs *g) { amx_kern(g, 0); }

AMX void primc_ig_kern_amx_ip(const ikargs *g) { amx_kern(g, 1); }

/* ---------------------------------------------------------------- AVX512-VNNI: up to 8 rows x 2 zmm */

#define VNNI __attribute__((target("avx512f,avx512vnni")))
#define VN_MR IG_MR_AVX512VNNI

/* IP: A in place (ikargs.arow, boff), else tiled */
static inline __attribute__((always_inline)) VNNI void vn_tile_a(const ikargs *g, const int R, const int V,
                                                                 const int IP) {
  __m512i acc[VN_MR][2];
#pragma GCC unroll 8
  for (int r = 0; r < R; r++) acc[r][0] = acc[r][1] = _mm512_setzero_si512();
  const int64_t per = g->pf ? (g->pf_lines + g->kc / 64 - 1) / (g->kc / 64) : 0; /* lines per 64 k */
  for (int64_t kb = 0; kb < g->kc / 64; kb++) {
    for (int64_t l = kb * per; l < (kb + 1) * per && l < g->pf_lines; l++) _mm_prefetch(g->pf + 64 * l, _MM_HINT_T1);
    const uint8_t *ar[VN_MR]; /* each row's 64 bytes of this block of k */
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) ar[r] = IP ? g->arow[r] + g->boff[kb] : g->a + ig_a_at(g->lda, r, 64 * kb);
    for (int j = 0; j < 16; j++) {
      int64_t kq = kb * 16 + j;
      __m512i b0 = _mm512_loadu_si512(g->b + ig_b_at(kq, 0)), b1 = b0;
      if (V == 2) b1 = _mm512_loadu_si512(g->b + ig_b_at(kq, 1));
#pragma GCC unroll 8
      for (int r = 0; r < R; r++) {
        int32_t quad;
        memcpy(&quad, ar[r] + 4 * j, sizeof quad);
        __m512i x = _mm512_set1_epi32(quad);
        acc[r][0] = _mm512_dpbusd_epi32(acc[r][0], x, b0);
        if (V == 2) acc[r][1] = _mm512_dpbusd_epi32(acc[r][1], x, b1);
      }
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

static inline __attribute__((always_inline)) VNNI void vn_tile(const ikargs *g, const int R, const int V) {
  vn_tile_a(g, R, V, 0);
}

static inline __attribute__((always_inline)) VNNI void vn_tile_ip(const ikargs *g, const int R, const int V) {
  vn_tile_a(g, R, V, 1);
}

VNNI void primc_ig_kern_avx512vnni(const ikargs *g) {
  BG_DISPATCH512(vn_tile) /* bgemm_zmm.h's: the call's rows as a constant, one or two zmm of columns */
}

VNNI void primc_ig_kern_avx512vnni_ip(const ikargs *g) { BG_DISPATCH512(vn_tile_ip) }

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

/* ---------------------------------------------------------------- AVX2: vpmaddubsw on a split B, no VNNI */

/* vpmaddubsw adds two u8 x s8 products (k 2i, 2i + 1) in int16 and saturates past the int16 range. For u8 a, a pair
 * of B whose signs differ never reaches it (255 x 128 at most), nor one of the same sign with |b0| + |b1| <= 128.
 * So each block of B is split, when packed (the row's prep records, where a run would split it more than once) or
 * by a task's first call on it (into wb): a copy in which every pair of one
 * sign with |b0| + |b1| > 128 keeps its larger value and gives the smaller one's excess over 128 - |larger| to a
 * list (1-2% of the pairs of quantize_static's per-channel weights). The copy goes through vpmaddubsw + vpmaddwd
 * by ones (32 products in three operations, half the bytes of the int16 form), the list's products are added to
 * the sums before the store: exact. A block whose list would cost more than vpmaddubsw saves (more than 3 kc / 8
 * excesses: uniform weights, 1x1s and stems of wide range) takes the int16 form instead: both operands widened,
 * one vpmaddwd per 16 products. */
#define X2 __attribute__((target("avx2")))
enum { A2_ROWS = 4 };
_Static_assert((int)IG_MR_AVX2 == (int)A2_ROWS, "the AVX2 row's table entry and its kernel agree on the rows of a call");

/* one excess as found: add a(r, k) v to column j's sums; off: where the call's 4 rows' a(., k) sit in u2_rows's form */
typedef struct u2fix {
  int32_t off, j, v;
} u2fix;

/* two excesses of one column (the second may be v 0), as the list holds them: vv their v as two int16 */
typedef struct u2two {
  int32_t off0, off1, vv;
} u2two;

enum { U2_CAP_8THS = 3 }; /* a block's list holds at most kc U2_CAP_8THS / 8 excesses */

/* wb's notes after its IG_KC * 32 int16: the block's form */
typedef struct u2note {
  int64_t ntwo;               /* the list's pairs after the copy (0: none), or -1: the int16 form */
  uint16_t end[2 * IG_PANEL]; /* the list by column: column j's pairs end at end[j] */
} u2note;
_Static_assert(sizeof(u2note) <= IG_WB_NOTES, "the AVX2 row's notes fit the room after wb's block");
_Static_assert(IG_KC * U2_CAP_8THS / 8 * sizeof(u2fix) + (IG_KC * U2_CAP_8THS / 8 + 2 * IG_PANEL) * sizeof(u2two) <= (size_t)IG_KC * 32,
               "the list and its first form fit beside the copy");

static u2note *u2_note(const ikargs *g) { return (u2note *)((char *)g->wb + IG_KC * 2 * 2 * IG_PANEL); }

/* where u2_rows puts k's 4 bytes (the call's 4 rows'): byte 4 ((k % 16 / 4) 8 + k % 32 / 16 4 + k % 4) of its 32
 * k, in 16-byte halves as its unpacks leave them */
static int32_t u2_rows_at(int64_t k) {
  int64_t kk = k % 32;
  return (int32_t)(k - kk + kk % 16 / 4 * 8 + kk / 16 * 4 + kk % 4) * 4;
}

/* the block's pairs split into the copy at sb and the list at two (by column, in pairs); the list's pairs, or -1
 * past cap excesses (tmp: room for cap as found) */
static X2 int64_t u2_split(const ikargs *g, int8_t *sb, u2two *two, u2fix *tmp, int64_t cap, u2note *note) {
  const __m256i one = _mm256_set1_epi8(1), lim = _mm256_set1_epi16(128);
  /* first the copy and each 32 bytes' pairs to split, counted: a block past cap (uniform weights) stops early */
  uint32_t bads[IG_KC];
  int64_t n = 0;
  for (int64_t o = 0; o < g->kc * 2 * IG_PANEL; o += 32) {
    __m256i b = _mm256_loadu_si256((const __m256i *)(g->b + o));
    _mm256_store_si256((__m256i *)(sb + o), b);
    /* per pair: |b0| + |b1| (|-128| is 128 as u8), and whether the signs agree (the int16's top bit of b1 ^ b0) */
    __m256i mag = _mm256_maddubs_epi16(_mm256_abs_epi8(b), one);
    __m256i differ = _mm256_srai_epi16(_mm256_xor_si256(b, _mm256_slli_epi16(b, 8)), 15);
    bads[o / 32] = (uint32_t)_mm256_movemask_epi8(_mm256_andnot_si256(differ, _mm256_cmpgt_epi16(mag, lim)));
    if ((n += __builtin_popcount(bads[o / 32]) / 2) > cap) return -1;
  }
  n = 0;
  for (int64_t o = 0; o < g->kc * 2 * IG_PANEL; o += 32)
    for (uint32_t bad = bads[o / 32]; bad; bad &= bad - 1, bad &= bad - 1) {
      int64_t at = o + __builtin_ctz(bad); /* the pair's first byte */
      int big = abs(sb[at]) >= abs(sb[at + 1]) ? 0 : 1;
      int keep = sb[at + big], give = sb[at + 1 - big];
      int rest = keep < 0 ? -(128 + keep) : 128 - keep; /* what the smaller may keep: same sign, |keep| + |rest| = 128 */
      int64_t in = at + 1 - big, blk = in / (16 * IG_KSTEP), r = in % (16 * IG_KSTEP); /* ig_b_at's inverse */
      tmp[n++] = (u2fix){.off = u2_rows_at((blk / 2 * 16 + r / 64) * 4 + r % 4), .j = (int32_t)(blk % 2 * 16 + r % 64 / 4),
                        .v = give - rest};
      sb[in] = (int8_t)rest;
    }
  /* by column, each column's in the order found, two at a time (an odd one out with v 0) */
  int64_t ends[2 * IG_PANEL + 1] = {0}, fill[2 * IG_PANEL];
  for (int64_t e = 0; e < n; e++) ends[tmp[e].j + 1]++;
  for (int c = 0; c < 2 * IG_PANEL; c++) ends[c + 1] = ends[c] + (ends[c + 1] + 1) / 2, note->end[c] = (uint16_t)ends[c + 1];
  for (int c = 0; c < 2 * IG_PANEL; c++) fill[c] = 2 * ends[c];
  for (int64_t i = 0; i < ends[2 * IG_PANEL]; i++) two[i] = (u2two){0, 0, 0};
  for (int64_t e = 0; e < n; e++) {
    int64_t f = fill[tmp[e].j]++;
    u2two *t = &two[f / 2];
    if (f % 2) t->off1 = tmp[e].off, t->vv |= (int32_t)((uint32_t)tmp[e].v << 16);
    else t->off0 = tmp[e].off, t->vv |= tmp[e].v & 0xffff;
  }
  return ends[2 * IG_PANEL];
}

/* the call's 4 rows of A over kc, k's 4 bytes side by side (as one int32) at u2_rows_at(k) */
static X2 void u2_rows(const ikargs *g, uint8_t *rows) {
  for (int64_t k = 0; k < g->kc; k += 32) {
    const uint8_t *a = g->a + ig_a_at(g->lda, 0, k);
    __m256i r0 = _mm256_loadu_si256((const __m256i *)a), r1 = _mm256_loadu_si256((const __m256i *)(a + IG_KSTEP));
    __m256i r2 = _mm256_loadu_si256((const __m256i *)(a + 2 * IG_KSTEP)), r3 = _mm256_loadu_si256((const __m256i *)(a + 3 * IG_KSTEP));
    __m256i lo01 = _mm256_unpacklo_epi8(r0, r1), hi01 = _mm256_unpackhi_epi8(r0, r1);
    __m256i lo23 = _mm256_unpacklo_epi8(r2, r3), hi23 = _mm256_unpackhi_epi8(r2, r3);
    __m256i *o = (__m256i *)(rows + 4 * k);
    _mm256_store_si256(o, _mm256_unpacklo_epi16(lo01, lo23));
    _mm256_store_si256(o + 1, _mm256_unpackhi_epi16(lo01, lo23));
    _mm256_store_si256(o + 2, _mm256_unpacklo_epi16(hi01, hi23));
    _mm256_store_si256(o + 3, _mm256_unpackhi_epi16(hi01, hi23));
  }
}

/* B's block widened to int16 for the exact vpmaddwd form: chunk u of k quad kq (columns 4u .. 4u + 3) at
 * wb[((u / 2 * nq + kq) * 2 + u % 2) * 16], a pass's two chunks one after the other along k */
static X2 void a2_widen(const ikargs *g) {
  int64_t nq = g->kc / 4;
  for (int64_t kq = 0; kq < nq; kq++)
    for (int u = 0; u < 8; u++)
      _mm256_store_si256((__m256i *)(g->wb + ((u / 2 * nq + kq) * 2 + u % 2) * 16),
                         _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(g->b + ig_b_at(kq, u / 4) + 16 * (u % 4)))));
}

/* the 4 rows' sums of columns 8p .. 8p + 7 into C (rows below mr, columns below nr) */
static inline __attribute__((always_inline)) X2 void a2_store(const ikargs *g, const __m256i *v, int p) {
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

/* the int16 form: columns 8p .. 8p + 7 of the call's 4 rows over its kc; wa: the rows widened, kc apart */
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

static X2 void a2_wide(const ikargs *g) {
  /* the call's rows (those past mr are zero rows of the strip) widened, row r at wa[r * kc] */
  int16_t wa[A2_ROWS * IG_KC] __attribute__((aligned(32)));
  for (int r = 0; r < A2_ROWS; r++)
    for (int64_t k = 0; k < g->kc; k += 16)
      _mm256_store_si256((__m256i *)(wa + r * g->kc + k),
                         _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(g->a + ig_a_at(g->lda, r, k)))));
  for (int p = 0; 8 * p < g->nr; p++) a2_pass(g, wa, p);
}

/* the split form: columns 16h .. 16h + 15 (panel h of the copy) of the call's 4 rows, the list's sums fx added
 * (none when NULL). The sums are named values, not an array: GCC kept an array of them in memory */
static inline __attribute__((always_inline)) X2 void u2_pass(const ikargs *g, const int8_t *sb, int h,
                                                             int32_t fx[A2_ROWS][2 * IG_PANEL]) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i s00 = _mm256_setzero_si256(), s01 = s00, s10 = s00, s11 = s00, s20 = s00, s21 = s00, s30 = s00, s31 = s00;
  for (int64_t k0 = 0; k0 < g->kc; k0 += IG_KSTEP) {
    const int8_t *w = sb + ig_b_at(k0 / 4, h);
    const uint8_t *a = g->a + ig_a_at(g->lda, 0, k0);
    for (int q = 0; q < IG_KSTEP / 4; q++, w += 4 * IG_PANEL, a += 4) {
      __m256i b0 = _mm256_load_si256((const __m256i *)w), b1 = _mm256_load_si256((const __m256i *)(w + 32));
#define U2_ROW(r)                                                                                                      \
  {                                                                                                                    \
    int32_t quad;                                                                                                      \
    memcpy(&quad, a + (r) * IG_KSTEP, sizeof quad);                                                                    \
    __m256i x = _mm256_set1_epi32(quad);                                                                               \
    s##r##0 = _mm256_add_epi32(s##r##0, _mm256_madd_epi16(_mm256_maddubs_epi16(x, b0), ones));                         \
    s##r##1 = _mm256_add_epi32(s##r##1, _mm256_madd_epi16(_mm256_maddubs_epi16(x, b1), ones));                         \
  }
      U2_ROW(0) U2_ROW(1) U2_ROW(2) U2_ROW(3)
#undef U2_ROW
    }
  }
  const __m256i sums[A2_ROWS][2] = {{s00, s01}, {s10, s11}, {s20, s21}, {s30, s31}};
  for (int q = 0; q < 2; q++) {
    __m256i v[A2_ROWS];
    for (int r = 0; r < A2_ROWS; r++)
      v[r] = fx ? _mm256_add_epi32(sums[r][q], _mm256_loadu_si256((const __m256i *)(fx[r] + 16 * h + 8 * q))) : sums[r][q];
    if (16 * h + 8 * q < g->nr) a2_store(g, v, 2 * h + q);
  }
}

/* a prep record (igemm_rows.def): the block's note, its list (room for the most excesses a block of kc keeps), the
 * split copy */
enum { PREP_NOTE = 128 };
_Static_assert(sizeof(u2note) <= PREP_NOTE, "a record's note fits its first bytes");
/* the most pairs a block of kc keeps on its list: its excesses two a pair, and an odd one out per column */
static int64_t list_room(int64_t kc) { return kc * U2_CAP_8THS / 8 + 2 * IG_PANEL; }
static size_t prep_list_bytes(int64_t kc) { return ((size_t)list_room(kc) * sizeof(u2two) + 63) / 64 * 64; }

size_t primc_ig_prep_bytes_avx2(int64_t kc) { return PREP_NOTE + prep_list_bytes(kc) + (size_t)kc * 2 * IG_PANEL; }

X2 void primc_ig_prep_avx2(const int8_t *b, int64_t kc, char *rec) {
  ikargs g = {.b = b, .kc = kc};
  u2fix tmp[IG_KC * U2_CAP_8THS / 8];
  u2note *note = (u2note *)rec;
  note->ntwo = u2_split(&g, (int8_t *)(rec + PREP_NOTE + prep_list_bytes(kc)), (u2two *)(rec + PREP_NOTE), tmp,
                        kc * U2_CAP_8THS / 8, note);
}

X2 void primc_ig_kern_avx2(const ikargs *g) {
  /* the block's split in wb (this thread's, made by its first call), or in the record packed beside B */
  int8_t *wsb = (int8_t *)g->wb;
  u2two *wlist = (u2two *)(wsb + g->kc * 2 * IG_PANEL);
  u2note *wnote = u2_note(g);
  const int8_t *sb = wsb;
  const u2two *list = wlist;
  const u2note *note = wnote;
  if (g->pre) { /* split when B was packed */
    note = (const u2note *)g->pre;
    list = (const u2two *)(g->pre + PREP_NOTE);
    sb = (const int8_t *)(g->pre + PREP_NOTE + prep_list_bytes(g->kc));
    if (note->ntwo < 0 && g->fresh) a2_widen(g);
  } else if (g->fresh &&
             (wnote->ntwo = u2_split(g, wsb, wlist, (u2fix *)(wlist + list_room(IG_KC)), g->kc * U2_CAP_8THS / 8, wnote)) < 0) {
    a2_widen(g);
  }
  if (note->ntwo < 0) {
    a2_wide(g);
    return;
  }
  /* the excesses' products two at a time (one vpmaddwd), the 4 rows' side by side, summed along the list (by
   * column): a column's sums are the difference of two of these running sums (no branch per column, no chain
   * through memory); then turned into rows */
  int32_t fx[A2_ROWS][2 * IG_PANEL] __attribute__((aligned(32)));
  /* records may come from a weights file: every index is held inside the arrays it reads (a bad record gives wrong
   * sums, never a read out of bounds; the split here never needs the holding) */
  int64_t ntwo = note->ntwo < list_room(g->kc) ? note->ntwo : list_room(g->kc);
  uint32_t last = (uint32_t)(4 * g->kc - 4);
  if (ntwo) {
    uint8_t rows[4 * IG_KC] __attribute__((aligned(32)));
    __m128i run[IG_KC * U2_CAP_8THS / 8 + 2 * IG_PANEL + 1], col[2 * IG_PANEL];
    u2_rows(g, rows);
    __m128i sum = run[0] = _mm_setzero_si128();
    for (int64_t e = 0; e < ntwo; e++) {
      int32_t f0, f1;
      uint32_t o0 = (uint32_t)list[e].off0, o1 = (uint32_t)list[e].off1;
      memcpy(&f0, rows + (o0 < last ? o0 : last), sizeof f0);
      memcpy(&f1, rows + (o1 < last ? o1 : last), sizeof f1);
      __m128i x = _mm_cvtepu8_epi16(_mm_unpacklo_epi8(_mm_cvtsi32_si128(f0), _mm_cvtsi32_si128(f1)));
      sum = _mm_add_epi32(sum, _mm_madd_epi16(x, _mm_set1_epi32(list[e].vv)));
      run[e + 1] = sum;
    }
    for (int j = 0; j < 2 * IG_PANEL; j++) {
      int64_t e1 = note->end[j] < ntwo ? note->end[j] : ntwo, e0 = !j ? 0 : note->end[j - 1] < ntwo ? note->end[j - 1] : ntwo;
      col[j] = _mm_sub_epi32(run[e1], run[e0]);
    }
    for (int j = 0; j < 2 * IG_PANEL; j += 4) { /* 4 columns x 4 rows transposed */
      __m128i t0 = _mm_unpacklo_epi32(col[j], col[j + 1]), t1 = _mm_unpackhi_epi32(col[j], col[j + 1]);
      __m128i t2 = _mm_unpacklo_epi32(col[j + 2], col[j + 3]), t3 = _mm_unpackhi_epi32(col[j + 2], col[j + 3]);
      _mm_store_si128((__m128i *)(fx[0] + j), _mm_unpacklo_epi64(t0, t2));
      _mm_store_si128((__m128i *)(fx[1] + j), _mm_unpackhi_epi64(t0, t2));
      _mm_store_si128((__m128i *)(fx[2] + j), _mm_unpacklo_epi64(t1, t3));
      _mm_store_si128((__m128i *)(fx[3] + j), _mm_unpackhi_epi64(t1, t3));
    }
  }
  u2_pass(g, sb, 0, ntwo ? fx : NULL);
  if (g->nr > IG_PANEL) u2_pass(g, sb, 1, ntwo ? fx : NULL);
}

#endif
