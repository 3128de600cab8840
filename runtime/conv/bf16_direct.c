/* runtime/conv/bf16_direct.c: the bf16 row's convs of stride 1 and 2 on AVX512-BF16 as an implicit GEMM, every tap's B read in place from x made into channel pairs once per call. */
#include "runtime/conv/conv.h"
#include "runtime/gemm/bgemm.h"

#include <string.h>

/*
 * Such a conv's weights are packed with K tap-major (k = tap * C/groups + c), so that a k pair is two channels at
 * one tap. x becomes xi[c / 2][phase][plane] of 32-bit pairs (channel 2i in the low half, 2i + 1 in the high): the
 * zero-padded map (Hp x Wp) split into s x s phase planes for stride s (phase (a, b) holds the padded positions
 * (s i + a, s j + b); one plane at stride 1), each Hph x Wph row-major with a zero tail. The outputs are computed
 * on the planes' width: column q = oy * Wph + ox of tap (ky, kx) reads phase (ky % s, kx % s) at q + ky / s * Wph +
 * kx / s, so each tap's B rows are a plane shifted, read as it lies; the columns past each output row are computed
 * and dropped when the sums are copied out. A tile is 8 output channels x 32 columns over the whole K, as the bf16
 * GEMM's AVX512-BF16 row's. (The GEMM path made and packed B per call: a third of a 3x3's time at 14x14 on Zen 5.)
 */

#define MAX_TAPS 64
/* a group of at most this many channels (an image's 1, 3 or 4) pads them to an even count: then a k pair is a tap's
 * two channels or its last one and a zero, and K = taps x the padded count, on a list of each pair's offset in xi */
#define FEW_CH 4

int primc_cv_bf16_taps_major(const primc_conv2d *p) {
  int64_t cg = p->c / p->groups, taps = p->kh * p->kw;
  return taps <= MAX_TAPS && p->stride_h == p->stride_w && (p->stride_h == 2 || (p->stride_h == 1 && taps > 1)) &&
         p->dil_h == 1 && p->dil_w == 1 && (cg % 32 == 0 || cg <= FEW_CH);
}

int primc_cv_bf16_few(const primc_conv2d *p) { return (p->c / p->groups) % 32 && primc_cv_bf16_taps_major(p); }

/* channels a group as the weights are packed: a few padded to an even count where tap-major */
static int64_t packed_ch(const primc_conv2d *p) {
  int64_t cg = p->c / p->groups;
  return primc_cv_bf16_few(p) ? (cg + 1) / 2 * 2 : cg;
}

int64_t primc_cv_bf16_k(const primc_conv2d *p) { return packed_ch(p) * p->kh * p->kw; }

/* A 1x1's weights are the same tap-major or not. In place, each block of 8 output channels pulls the next one's
 * weights into L2 while it runs; the GEMM path keeps a block of B in L1 for many rows of weights instead, which
 * wins while the weights stay in cache. In a program whose weights outgrow the last-level cache (w_bf16 ==
 * PRIMC_CONV_BF16_STREAM: ResNet-50's 51 MB of bf16 against Zen 5's 32 MB L3), those of 256 KiB and more come from
 * memory on every call: 512 -> 2048 at 7x7 0.44 ms on the GEMM path against 0.31 in place (Zen 5, 1 thread); with
 * the weights in cache the GEMM path is faster (0.29 against 0.32; MobileNetV2's 1x1s of 256-820 KiB: the model
 * 2.78 ms against 2.85 in place). */
#define IN_PLACE_1X1_BYTES (256 << 10)

int primc_cv_bf16_in_place(const primc_conv2d *p) {
  int64_t cg = p->c / p->groups, og = p->o / p->groups;
  if (primc_cv_bf16_taps_major(p)) return 1;
  return p->w_bf16 == PRIMC_CONV_BF16_STREAM && p->kh == 1 && p->kw == 1 && p->stride_h == 1 && p->stride_w == 1 &&
         cg % 32 == 0 && og * cg * 2 >= IN_PLACE_1X1_BYTES;
}

#if defined(__x86_64__)
#include "runtime/gemm/bgemm_zmm.h"

#include <immintrin.h>

#define BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

/* the AVX512-BF16 and AMX rows (AMX's xi made by the same AVX512-BF16 conversions) */
int primc_cv_bf16_direct_runs(void) {
  int row = primc_bgemm_row_active();
  return row == PRIMC_BGEMM_ROW_AVX512BF16 || (row == PRIMC_BGEMM_ROW_AMX && primc_bg_has_avx512bf16());
}

typedef struct dtile {
  const uint16_t *a; /* the tile's first row at k = 0, within its strip (bg_a_at's layout) */
  const uint32_t *x; /* xi at the tile's first column */
  int64_t cstride;   /* pairs from one channel pair's planes to the next */
  const int64_t *tap; /* each tap's offset in a pair's planes: its phase's plane, then ky / s * Wph + kx / s */
  int taps;
  int64_t kb; /* k blocks of 32 (16 pairs) per tap */
  const int64_t *poff; /* or, for a few channels: each k pair's offset in xi, kb blocks in all (taps 1) */
  const uint16_t *pf; /* the next 8 rows' A, whose k blocks [pf_lo, pf_hi) this tile pulls into L2, or NULL */
  int64_t pf_lo, pf_hi;
  int mr, nr;
  float *c;
  int64_t ldc;
} dtile;

/* the tile's sums over the whole K into acc: tap by tap, 16 channel pairs a k block; FEW: each pair at its offset */
static inline __attribute__((always_inline)) BF16 void d_sums(const dtile *g, __m512 (*acc)[2], const int R,
                                                              const int V, const int FEW) {
  const uint16_t *a = g->a;
  for (int t = 0; t < g->taps; t++) {
    const uint32_t *xt = g->x + (FEW ? 0 : g->tap[t]);
    for (int64_t b = 0; b < g->kb; b++, a += 16 * BG_KSTEP) {
      int64_t kg = t * g->kb + b;
      if (g->pf && kg >= g->pf_lo && kg < g->pf_hi)
        for (int l = 0; l < 8; l++) _mm_prefetch((const char *)(g->pf + kg * 16 * BG_KSTEP + l * 32), _MM_HINT_T1);
      const uint32_t *xb = xt + b * 16 * g->cstride;
      for (int j = 0; j < 16; j++) {
        const uint32_t *xp = FEW ? xt + g->poff[b * 16 + j] : xb + j * g->cstride;
        __m512bh v0 = (__m512bh)_mm512_loadu_si512(xp), v1 = v0;
        if (V == 2) v1 = (__m512bh)_mm512_loadu_si512(xp + 16);
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
          int32_t pair;
          memcpy(&pair, a + r * BG_KSTEP + 2 * j, sizeof pair);
          __m512bh w = (__m512bh)_mm512_set1_epi32(pair);
          acc[r][0] = _mm512_dpbf16_ps(acc[r][0], w, v0);
          if (V == 2) acc[r][1] = _mm512_dpbf16_ps(acc[r][1], w, v1);
        }
      }
    }
  }
}

static inline __attribute__((always_inline)) BF16 void d_tile(const dtile *g, const int R, const int V) {
  __m512 acc[8][2];
#pragma GCC unroll 8
  for (int r = 0; r < R; r++) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  if (g->poff) d_sums(g, acc, R, V, 1);
  else d_sums(g, acc, R, V, 0);
  const int n0 = V == 2 ? 16 : g->nr, n1 = V == 2 ? g->nr - 16 : 0;
  const __mmask16 m0 = (__mmask16)((1u << n0) - 1), m1 = (__mmask16)((1u << n1) - 1);
#pragma GCC unroll 8
  for (int r = 0; r < R; r++) {
    _mm512_mask_storeu_ps(g->c + r * g->ldc, m0, acc[r][0]);
    if (V == 2) _mm512_mask_storeu_ps(g->c + r * g->ldc + 16, m1, acc[r][1]);
  }
}

typedef struct djob {
  const primc_conv2d *p;
  const float *x; /* the group's first input channel */
  uint32_t *xi;
  int s;
  int64_t plane, wph, oh, ow, og, kt, nq, nblocks; /* kt: K padded to whole k blocks, the weights' row length */
  const uint16_t *a;
  int64_t tap[MAX_TAPS];
  int64_t pairs; /* channel pairs made; a few channels' xi also has a zeroed pair past them, for K's padding */
  int few;
  int64_t poff[MAX_TAPS * FEW_CH / 2]; /* few: each k pair's offset in xi */
  float *cq, *acc; /* the sums on the padded width (og x nq, rows ldq apart); acc in y's layout (og x oh * ow) */
  int64_t ldq;      /* nq padded to whole 32-column tiles: AMX stores whole 16 x 16 tiles */
  const epi_ctx *e; /* the epilogue into e->y (y's layout) as the sums are copied out, or NULL: into acc */
  const uint32_t *xp; /* x held as channel pairs (the image's first), or NULL */
  unsigned char used[4]; /* phase a * s + b is some tap's (a 1x1 of stride 2 reads one of its four) */
  int isa;
} djob;

/* n pairs of channels c0, c1 (x[i], i < n <= 16) rounded to bf16 (nearest even) into d */
static inline __attribute__((always_inline)) BF16 void put_pairs(uint32_t *d, __m512 c0, __m512 c1, int n) {
  __m256i lo = (__m256i)_mm512_cvtneps_pbh(c0), hi = (__m256i)_mm512_cvtneps_pbh(c1);
  __m512i v = _mm512_or_si512(_mm512_cvtepu16_epi32(lo), _mm512_slli_epi32(_mm512_cvtepu16_epi32(hi), 16));
  _mm512_mask_storeu_epi32(d, (__mmask16)((1u << n) - 1), v);
}

/* channel pair i's phase planes zeroed, those no tap reads left as they are */
static void planes_zero(const djob *j, int64_t i) {
  uint32_t *d = j->xi + i * j->s * j->s * j->plane;
  for (int ph = 0; ph < j->s * j->s; ph++)
    if (j->used[ph]) memset(d + ph * j->plane, 0, sizeof *d * (size_t)j->plane);
}

/* where input row y of channel pair i goes: its phase row (py % s, 0), or NULL when no tap reads that row's phases;
 * *u the row's phases' used flags */
static uint32_t *phase_row(const djob *j, int64_t i, int64_t y, const unsigned char **u) {
  const int s = j->s;
  int64_t py = y + j->p->pad_t;
  *u = j->used + py % s * s;
  if (s == 2 && !(*u)[0] && !(*u)[1]) return NULL;
  return j->xi + i * s * s * j->plane + py % s * s * j->plane + py / s * j->wph;
}

/* channel pairs [b, e) of x onto their zeroed phase planes; at stride 2 each 32 columns split into even and odd */
static BF16 void pairs_make(void *ctx, int64_t b, int64_t e) {
  const djob *j = ctx;
  const primc_conv2d *p = j->p;
  const int s = j->s;
  int64_t hw = p->h * p->w;
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  for (int64_t i = b; i < e; i++) {
    planes_zero(j, i);
    if (i >= j->pairs) continue; /* the zero pair */
    /* an odd count's last pair: the channel and zeros (x0 itself, then a zero mask) */
    int two = 2 * i + 1 < p->c / p->groups;
    const float *x0 = j->x + 2 * i * hw, *x1 = two ? x0 + hw : x0;
    for (int64_t y = 0; y < p->h; y++) {
      const unsigned char *u;
      uint32_t *row = phase_row(j, i, y, &u);
      if (!row) continue;
      const float *r0 = x0 + y * p->w, *r1 = x1 + y * p->w;
      if (s == 1) {
        for (int64_t c = 0; c < p->w; c += 16) {
          __mmask16 m = primc_low_mask16(p->w - c);
          put_pairs(row + p->pad_l + c, _mm512_maskz_loadu_ps(m, r0 + c), _mm512_maskz_loadu_ps(two ? m : 0, r1 + c),
                    p->w - c < 16 ? (int)(p->w - c) : 16);
        }
        continue;
      }
      for (int64_t c = 0; c < p->w; c += 32) {
        __mmask16 m0 = primc_low_mask16(p->w - c), m1 = primc_low_mask16(p->w - c - 16);
        __m512 a0 = _mm512_maskz_loadu_ps(m0, r0 + c), a1 = _mm512_maskz_loadu_ps(m1, r0 + c + 16);
        __m512 b0 = _mm512_maskz_loadu_ps(two ? m0 : 0, r1 + c), b1 = _mm512_maskz_loadu_ps(two ? m1 : 0, r1 + c + 16);
        int n = p->w - c < 32 ? (int)(p->w - c) : 32;
        int64_t pe = p->pad_l + c, po = pe + 1; /* padded columns of the even and the odd inputs */
        if (u[pe % 2])
          put_pairs(row + pe % 2 * j->plane + pe / 2, _mm512_permutex2var_ps(a0, even, a1),
                    _mm512_permutex2var_ps(b0, even, b1), (n + 1) / 2);
        if (n > 1 && u[po % 2])
          put_pairs(row + po % 2 * j->plane + po / 2, _mm512_permutex2var_ps(a0, odd, a1),
                    _mm512_permutex2var_ps(b0, odd, b1), n / 2);
      }
    }
  }
}

/* pixels [q, q + n) of channel pair i of x held as pairs (xp) into d, a 16-word panel row at a time */
static inline __attribute__((always_inline)) BF16 void pair_pixels(const djob *j, int64_t i, int64_t q, int64_t n, uint32_t *d) {
  for (int64_t x = 0, run; x < n; x += run) {
    run = 16 - (q + x) % 16 < n - x ? 16 - (q + x) % 16 : n - x;
    __mmask16 m = primc_low_mask16(run);
    _mm512_mask_storeu_epi32(d + x, m, _mm512_maskz_loadu_epi32(m, j->xp + primc_conv_pair_at(j->p->c, i, q + x)));
  }
}

/* the same from x held as channel pairs (xp): each pair's rows copied onto its zeroed phase planes */
static BF16 void pairs_copy(void *ctx, int64_t b, int64_t e) {
  const djob *j = ctx;
  const primc_conv2d *p = j->p;
  const int s = j->s;
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  uint32_t seg[32];
  for (int64_t i = b; i < e; i++) {
    planes_zero(j, i);
    for (int64_t y = 0; y < p->h; y++) {
      const unsigned char *u;
      uint32_t *row = phase_row(j, i, y, &u);
      if (!row) continue;
      if (s == 1) {
        pair_pixels(j, i, y * p->w, p->w, row + p->pad_l);
        continue;
      }
      for (int64_t c = 0; c < p->w; c += 32) {
        int n = p->w - c < 32 ? (int)(p->w - c) : 32;
        pair_pixels(j, i, y * p->w + c, n, seg);
        __m512i a0 = _mm512_maskz_loadu_epi32(primc_low_mask16(n), seg);
        __m512i a1 = _mm512_maskz_loadu_epi32(primc_low_mask16(n - 16), seg + 16);
        int64_t pe = p->pad_l + c, po = pe + 1;
        if (u[pe % 2])
          _mm512_mask_storeu_epi32(row + pe % 2 * j->plane + pe / 2, primc_low_mask16((n + 1) / 2),
                                   _mm512_permutex2var_epi32(a0, even, a1));
        if (n > 1 && u[po % 2])
          _mm512_mask_storeu_epi32(row + po % 2 * j->plane + po / 2, primc_low_mask16(n / 2),
                                   _mm512_permutex2var_epi32(a0, odd, a1));
      }
    }
  }
}

static const uint16_t *rows_at(const djob *j, int64_t m) { return j->a + m / 16 * 16 * j->kt + m % 16 * BG_KSTEP; }

/* tiles [b, e): 8-channel blocks major, 32-column blocks minor, so a thread's tiles share their weights; the
 * block's tiles pull the next block's weights into L2 a share each (weights streamed from memory ran 1.3x slower:
 * ResNet-50's 512 -> 512 3x3 at 7x7 0.82 ms against 0.63 with them in L3, Zen 5) */
static BF16 void tiles_run(void *ctx, int64_t b, int64_t e) {
  const djob *j = ctx;
  int64_t blocks = j->kt / BG_KSTEP, share = (blocks + j->nblocks - 1) / j->nblocks;
  for (int64_t t = b; t < e; t++) {
    int64_t m0 = t / j->nblocks * 8, q0 = t % j->nblocks * 32, i = t % j->nblocks;
    dtile tile = {.a = rows_at(j, m0),
                  .pf = m0 + 8 < j->og ? rows_at(j, m0 + 8) : NULL,
                  .pf_lo = i * share,
                  .pf_hi = (i + 1) * share,
                  .x = j->xi + q0,
                  .cstride = j->s * j->s * j->plane,
                  .tap = j->tap,
                  .taps = j->few ? 1 : (int)(j->p->kh * j->p->kw),
                  .kb = j->few ? j->kt / BG_KSTEP : j->p->c / j->p->groups / 32,
                  .poff = j->few ? j->poff : NULL,
                  .mr = (int)(j->og - m0 < 8 ? j->og - m0 : 8),
                  .nr = (int)(j->nq - q0 < 32 ? j->nq - q0 : 32),
                  .c = j->cq + m0 * j->ldq + q0,
                  .ldc = j->ldq};
    const dtile *g = &tile;
    BG_DISPATCH512(d_tile)
  }
}

#define AMX __attribute__((target("amx-tile,amx-bf16")))

/* a few channels' B tiles for k block kg (16 k pairs, each at its own offset in xi) by the 16 or 32 columns from q0,
 * copied into st[half]; the tiles load them a k block later, by when the stores are done (loaded right after them,
 * each load waited on the stores: most of a 7x7 stem's tile time) */
static inline __attribute__((always_inline)) AMX void few_stage(const djob *j, int64_t kg, int64_t q0, const int N2,
                                                                uint32_t (*st)[16][16]) {
  for (int h = 0; h <= N2; h++)
    for (int r = 0; r < 16; r++) memcpy(st[h][r], j->xi + j->poff[kg * 16 + r] + q0 + 16 * h, 64);
}

/* C tiles tmm0-3 over every tap's k blocks: output channels m0 .. m0 + 31 by columns q0 .. q0 + 31 (M2: the second
 * 16 rows, N2: the second 16 columns), A tiles tmm4-5 the packed weights' [16 rows][32 k] blocks, B tiles tmm6-7.
 * (16 channels by 64 columns, B tiles tmm5-7, so that a 7x7 map reads the weights once, ran slower: 256 at 7x7
 * 0.105 ms against 0.077, its B tiles loaded twice as often.) */
static inline __attribute__((always_inline)) AMX void amx_tile(const djob *j, int64_t m0, int64_t q0, const int M2,
                                                               const int N2, const int FEW) {
  const int64_t kb = FEW ? j->kt / BG_KSTEP : j->p->c / j->p->groups / 32;
  const int taps = FEW ? 1 : (int)(j->p->kh * j->p->kw);
  const uint16_t *a0 = rows_at(j, m0), *a1 = a0 + 16 * j->kt;
  const int64_t cs = j->s * j->s * j->plane;
  uint32_t stage[2][2][16][16] __attribute__((aligned(64))); /* FEW: k blocks kg and kg + 1 */
  if (FEW) few_stage(j, 0, q0, N2, stage[0]);
  _tile_zero(0);
  if (N2) _tile_zero(1);
  if (M2) _tile_zero(2);
  if (M2 && N2) _tile_zero(3);
  for (int t = 0; t < taps; t++) {
    const uint32_t *xt = j->xi + (FEW ? 0 : j->tap[t]);
    for (int64_t b = 0; b < kb; b++) {
      int64_t kg = t * kb + b;
      if (FEW && kg + 1 < kb) few_stage(j, kg + 1, q0, N2, stage[(kg + 1) & 1]);
      _tile_loadd(4, a0 + kg * 16 * BG_KSTEP, 64);
      if (FEW) _tile_loadd(6, stage[kg & 1][0], 64);
      else _tile_loadd(6, xt + b * 16 * cs + q0, cs * 4);
      _tile_dpbf16ps(0, 4, 6);
      if (N2) {
        if (FEW) _tile_loadd(7, stage[kg & 1][1], 64);
        else _tile_loadd(7, xt + b * 16 * cs + q0 + 16, cs * 4);
        _tile_dpbf16ps(1, 4, 7);
      }
      if (M2) {
        _tile_loadd(5, a1 + kg * 16 * BG_KSTEP, 64);
        _tile_dpbf16ps(2, 5, 6);
        if (N2) _tile_dpbf16ps(3, 5, 7);
      }
    }
  }
  float *c = j->cq + m0 * j->ldq + q0;
  const int64_t ldc = j->ldq * 4;
  _tile_stored(0, c, ldc);
  if (N2) _tile_stored(1, c + 16, ldc);
  if (M2) _tile_stored(2, c + 16 * j->ldq, ldc);
  if (M2 && N2) _tile_stored(3, c + 16 * j->ldq + 16, ldc);
}

static inline __attribute__((always_inline)) AMX void amx_tiles(const djob *j, int64_t b, int64_t e, const int FEW) {
  for (int64_t t = b; t < e; t++) {
    int64_t m0 = t / j->nblocks * 32, q0 = t % j->nblocks * 32;
    int M2 = j->og - m0 > 16, N2 = j->nq - q0 > 16;
    if (M2 && N2) amx_tile(j, m0, q0, 1, 1, FEW);
    else if (M2) amx_tile(j, m0, q0, 1, 0, FEW);
    else if (N2) amx_tile(j, m0, q0, 0, 1, FEW);
    else amx_tile(j, m0, q0, 0, 0, FEW);
  }
}

/* tiles [b, e) of 32 output channels x 32 columns, channel blocks major so that a thread's tiles share weights;
 * cq has whole tiles (ldq columns, og padded to 32 rows) */
static AMX void tiles_run_amx(void *ctx, int64_t b, int64_t e) {
  const djob *j = ctx;
  primc_bg_setup_amx(1);
  if (j->few) amx_tiles(j, b, e, 1);
  else amx_tiles(j, b, e, 0);
  primc_bg_setup_amx(0);
}

/* output channels [b, e): the output rows' columns of the padded width copied to acc, or through the epilogue */
static void rows_out(void *ctx, int64_t b, int64_t e) {
  const djob *j = ctx;
  const epi_ctx *ep = j->e;
  for (int64_t o = b; o < e; o++)
    for (int64_t y = 0; y < j->oh; y++) {
      int64_t at = (o * j->oh + y) * j->ow;
      const float *c = j->cq + o * j->ldq + y * j->wph;
      if (ep)
        cv_epi_row(j->isa, ep, ep->y + at, c, ep->res ? ep->res + at : NULL, cv_bias_at(ep, o), cv_scale_at(ep, o),
                   j->ow);
      else
        memcpy(j->acc + at, c, sizeof(float) * (size_t)j->ow);
    }
}

/* output rows [b, e): as rows_out, where y or the residual are channel pairs */
static void rows_out_pairs(void *ctx, int64_t b, int64_t e) {
  const djob *j = ctx;
  for (int64_t y = b; y < e; y++) primc_cv_epi_pairs(j->isa, j->e, 0, j->og, y * j->ow, j->cq + y * j->wph, j->ldq, j->ow);
}

int primc_cv_bf16_direct(const primc_conv2d *p, const float *xg, const void *wg, int64_t oh, int64_t ow, float *acc,
                         const epi_ctx *e, const uint32_t *xp) {
  int64_t cg = p->c / p->groups, og = p->o / p->groups, taps = p->kh * p->kw, s = p->stride_h;
  int64_t hp = p->h + p->pad_t + p->pad_b, wp = p->w + p->pad_l + p->pad_r;
  int64_t hph = (hp + s - 1) / s, wph = (wp + s - 1) / s;
  if ((hp - p->kh) / s + 1 != oh || (wp - p->kw) / s + 1 != ow || og < 1 || oh < 1 || ow < 1) return PRIMC_ERR_ARG;
  int64_t K = primc_cv_bf16_k(p);
  int paired = e && (e->y_pairs || e->res_pairs);
  if ((xp || paired) && (cg % 32 || og % 2)) return PRIMC_ERR_ARG;
  djob j = {.p = p, .x = xg, .s = (int)s, .wph = wph, .oh = oh, .ow = ow, .og = og,
            .kt = (K + BG_KSTEP - 1) / BG_KSTEP * BG_KSTEP, .nq = oh * wph, .acc = acc, .e = e, .xp = xp,
            .isa = primc_sgemm_isa(), .pairs = (cg + 1) / 2, .few = primc_cv_bf16_few(p)};
  j.a = primc_bg_packed_a_tiles(wg, og, K);
  if (!j.a) return PRIMC_ERR_WEIGHTS;
  j.nblocks = (j.nq + 31) / 32;
  /* the last tile's reads reach 31 columns past nq, then the last tap's shift (kh - 1) / s * wph + (kw - 1) / s */
  j.plane = (hph * wph + p->kw + 32 + 15) / 16 * 16;
  for (int64_t t = 0; t < taps; t++) {
    int64_t ky = t / p->kw, kx = t % p->kw;
    j.tap[t] = (ky % s * s + kx % s) * j.plane + ky / s * wph + kx / s;
    j.used[ky % s * s + kx % s] = 1;
  }
  for (int64_t kp = 0; j.few && kp < j.kt / 2; kp++) { /* k = tap x the padded count + channel, two a pair */
    int64_t per = j.pairs, t = kp / per;
    j.poff[kp] = kp < taps * per ? j.tap[t] + kp % per * s * s * j.plane : per * s * s * j.plane;
  }
  j.xi = primc_bg_thread_scratch(0, sizeof *j.xi * (size_t)((j.pairs + j.few) * s * s * j.plane));
  int amx = primc_bgemm_row_active() == PRIMC_BGEMM_ROW_AMX;
  j.ldq = (j.nq + 31) / 32 * 32;
  j.cq = primc_bg_thread_scratch(1, sizeof *j.cq * (size_t)((og + 31) / 32 * 32 * j.ldq));
  if (!j.xi || !j.cq) return PRIMC_ERR_RUNTIME;
  primc_parallel_for(j.pairs + j.few, xp ? pairs_copy : pairs_make, &j);
  if (amx) primc_parallel_for((og + 31) / 32 * j.nblocks, tiles_run_amx, &j);
  else primc_parallel_for((og + 7) / 8 * j.nblocks, tiles_run, &j);
  if (paired) primc_parallel_for(oh, rows_out_pairs, &j);
  else primc_parallel_for(og, rows_out, &j);
  return PRIMC_OK;
}
#else
int primc_cv_bf16_direct_runs(void) { return 0; }

int primc_cv_bf16_direct(const primc_conv2d *p, const float *xg, const void *wg, int64_t oh, int64_t ow, float *acc,
                         const epi_ctx *e, const uint32_t *xp) {
  return PRIMC_ERR_RUNTIME;
}
#endif
