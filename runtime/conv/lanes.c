/* runtime/conv/lanes.c: the direct lanes row (32 output channels in the vector lanes, x read in place; AVX-512 or AVX2) and its plain-loop fallback. */
#include "runtime/conv/conv.h"

#include <string.h>

/* ---------------------------------------------------------------- direct, output channels in the lanes */

/*
 * Each sum is one pixel's 32 output channels in two vectors, each tap one broadcast input value and two
 * weight vectors (PRIMC_CONV_W_LANES: [o / 32][c kh kw][32]): x is read where it lies, at any stride,
 * with no im2col, phase copy or padding. An output row goes in tiles of up to DL_R pixels, 2 DL_R sums
 * in registers; a tile at the row's end, some of whose taps fall left or right of x, runs once per run
 * of kernel columns that lie inside x for the same pixels, and kernel rows above or below x are skipped
 * for the whole row. The channels are taken in chunks whose weights stay in L1 while every tile of a
 * band of rows reads them. The band's [pixels][32] sums go to y's rows through primc_cv_ct_store (16x16
 * transposes, the epilogue in registers), as the transposed GEMM's do.
 * This is the register tile of MLAS's NCHWc convs, on NCHW maps.
 */
#define DL_R 14                /* pixels per tile: 28 sums, 14 broadcasts and 2 weight loads per tap */
/* AVX2: 12 sums in registers, in one of two tiles. Tiles of up to DL3_R pixels for all 32 channels (four ymm): per
 * tap 3 broadcasts, 4 weight loads (each used by 3 FMAs at once: 16 registers in all) and 12 FMAs, as MLAS's
 * NCHWc kernel. Tiles of up to DL2_R pixels for half the channels at a time (two ymm), as the GEMM row's 6 x 16:
 * 6 broadcasts and 2 loads per 12 FMAs, x read twice. The first ran 3x3s 4-20% faster (bench/conv_rows.md; most
 * on small maps, whose rows it cuts better: 7 = 3 + 2 + 2 pixels, not 4 + 3); the second, with half as many
 * calls, is kept for few input channels (stems), where a call's setup weighs more. */
#define DL2_R 6
#define DL3_R 3
#define DL_NR 32               /* output channels per sum: two vectors */
#define DL_BAND_FLOATS 4096    /* the sums of a band of output rows, on the stack: at least a row */
#define DL_W_BYTES (16 << 10)  /* weights of a chunk of channels: L1 keeps them (24 and 32 KB were slower) */
#define DL_MAX_KW 16            /* kernel columns: a tile's runs of them are planned on the stack */
#define DL_AVX __attribute__((target("avx512f")))

#if PRIMC_X86
typedef struct dl_src {
  const float *x;     /* the tile's pixel 0 at its first tap: first channel, kernel row and column read */
  int64_t cs, rs, js; /* pitch of a channel, a kernel row and a kernel column in x (dilation included) */
  int64_t c, ni, nj;  /* channels, kernel rows and kernel columns read */
  const float *w;     /* the weights of that tap, [c][kh][kw][32] */
  int64_t wcs, wrs;   /* weight floats per channel and per kernel row */
} dl_src;

/* R pixels S apart: sums in dst[pixel][32], added to what is there when acc */
static inline __attribute__((always_inline)) DL_AVX void dl_tile(const dl_src *s, float *dst, int acc, const int R,
                                                                  const int S) {
  __m512 a[DL_R][2];
#pragma GCC unroll 14
  for (int r = 0; r < R; r++) {
    a[r][0] = acc ? _mm512_loadu_ps(dst + r * DL_NR) : _mm512_setzero_ps();
    a[r][1] = acc ? _mm512_loadu_ps(dst + r * DL_NR + 16) : _mm512_setzero_ps();
  }
  const float *xc = s->x, *wc = s->w;
  for (int64_t c = 0; c < s->c; c++, xc += s->cs, wc += s->wcs) {
    const float *xr = xc, *wr = wc;
    for (int64_t i = 0; i < s->ni; i++, xr += s->rs, wr += s->wrs) {
      const float *xj = xr, *wj = wr;
      for (int64_t j = 0; j < s->nj; j++, xj += s->js, wj += DL_NR) {
        __m512 w0 = _mm512_load_ps(wj), w1 = _mm512_load_ps(wj + 16);
#pragma GCC unroll 14
        for (int r = 0; r < R; r++) {
          __m512 b = _mm512_set1_ps(xj[r * S]);
          a[r][0] = _mm512_fmadd_ps(b, w0, a[r][0]);
          a[r][1] = _mm512_fmadd_ps(b, w1, a[r][1]);
        }
      }
    }
  }
#pragma GCC unroll 14
  for (int r = 0; r < R; r++) {
    _mm512_storeu_ps(dst + r * DL_NR, a[r][0]);
    _mm512_storeu_ps(dst + r * DL_NR + 16, a[r][1]);
  }
}

#define DL_DEF(R)                                                                                     \
  static DL_AVX void dl_##R##_1(const dl_src *s, float *d, int acc) { dl_tile(s, d, acc, R, 1); }      \
  static DL_AVX void dl_##R##_2(const dl_src *s, float *d, int acc) { dl_tile(s, d, acc, R, 2); }
DL_DEF(1) DL_DEF(2) DL_DEF(3) DL_DEF(4) DL_DEF(5) DL_DEF(6) DL_DEF(7)
DL_DEF(8) DL_DEF(9) DL_DEF(10) DL_DEF(11) DL_DEF(12) DL_DEF(13) DL_DEF(14)
#define DL_ROW(R) {dl_##R##_1, dl_##R##_2}
static void (*const dl_tab[DL_R][2])(const dl_src *, float *, int) = {
    DL_ROW(1), DL_ROW(2), DL_ROW(3),  DL_ROW(4),  DL_ROW(5),  DL_ROW(6),  DL_ROW(7),
    DL_ROW(8), DL_ROW(9), DL_ROW(10), DL_ROW(11), DL_ROW(12), DL_ROW(13), DL_ROW(14)};

/* AVX2: half the 32 channels a call (16: two ymm), up to DL2_R pixels */
#define DL2_AVX __attribute__((target("avx2,fma")))

/* one kernel column's tap, the pointers then at the next column's. Three columns are unrolled (3x3 convs ran 5-9%
 * faster on a shared core, where the loop's own instructions cost issue slots: bench/gemm_rows.md); the empty asm
 * hides the pointers' values, else GCC kept each unrolled tap's broadcast addresses in registers of their own. */
static inline __attribute__((always_inline)) DL2_AVX void dl_tap256(__m256 a[DL2_R][2], const float **xj,
                                                                    const float **wj, int64_t js, const int R,
                                                                    const int S) {
  __m256 w0 = _mm256_load_ps(*wj), w1 = _mm256_load_ps(*wj + 8);
#pragma GCC unroll 6
  for (int r = 0; r < R; r++) {
    __m256 b = _mm256_broadcast_ss(*xj + r * S);
    primc_fma231(&a[r][0], w0, b);
    primc_fma231(&a[r][1], w1, b);
  }
  *xj += js, *wj += DL_NR;
  __asm__("" : "+r"(*xj), "+r"(*wj));
}

/* TAP once per tap of the tile's channels and kernel rows (xj, wj at its x and weights; three kernel columns
 * unrolled), the weights from w0 */
#define DL_EACH_TAP(s, w0, TAP)                                                                  \
  do {                                                                                           \
    const float *xc_ = (s)->x, *wc_ = (w0);                                                      \
    for (int64_t c_ = 0; c_ < (s)->c; c_++, xc_ += (s)->cs, wc_ += (s)->wcs) {                  \
      const float *xr_ = xc_, *wr_ = wc_;                                                        \
      for (int64_t i_ = 0; i_ < (s)->ni; i_++, xr_ += (s)->rs, wr_ += (s)->wrs) {               \
        const float *xj = xr_, *wj = wr_;                                                        \
        if ((s)->nj == 3) {                                                                      \
          TAP;                                                                                   \
          TAP;                                                                                   \
          TAP;                                                                                   \
        } else {                                                                                 \
          for (int64_t j_ = 0; j_ < (s)->nj; j_++) TAP;                                          \
        }                                                                                        \
      }                                                                                          \
    }                                                                                            \
  } while (0)

static inline __attribute__((always_inline)) DL2_AVX void dl_tile256(const dl_src *s, float *dst, int acc, int half,
                                                                     const int R, const int S) {
  __m256 a[DL2_R][2];
  float *d = dst + 16 * half;
#pragma GCC unroll 6
  for (int r = 0; r < R; r++) {
    a[r][0] = acc ? _mm256_loadu_ps(d + r * DL_NR) : _mm256_setzero_ps();
    a[r][1] = acc ? _mm256_loadu_ps(d + r * DL_NR + 8) : _mm256_setzero_ps();
  }
  DL_EACH_TAP(s, s->w + 16 * half, dl_tap256(a, &xj, &wj, s->js, R, S));
#pragma GCC unroll 6
  for (int r = 0; r < R; r++) {
    _mm256_storeu_ps(d + r * DL_NR, a[r][0]);
    _mm256_storeu_ps(d + r * DL_NR + 8, a[r][1]);
  }
}

#define DL2_DEF(R)                                                                                              \
  static DL2_AVX void dl2_##R##_1(const dl_src *s, float *d, int acc, int h) { dl_tile256(s, d, acc, h, R, 1); } \
  static DL2_AVX void dl2_##R##_2(const dl_src *s, float *d, int acc, int h) { dl_tile256(s, d, acc, h, R, 2); }
DL2_DEF(1) DL2_DEF(2) DL2_DEF(3) DL2_DEF(4) DL2_DEF(5) DL2_DEF(6)
#define DL2_ROW(R) {dl2_##R##_1, dl2_##R##_2}
static void (*const dl2_tab[DL2_R][2])(const dl_src *, float *, int, int) = {DL2_ROW(1), DL2_ROW(2), DL2_ROW(3),
                                                                           DL2_ROW(4), DL2_ROW(5), DL2_ROW(6)};

/* one kernel column's tap for all 32 channels of R <= 3 pixels, the pointers then at the next column's */
static inline __attribute__((always_inline)) DL2_AVX void dl_tap3(__m256 a[DL3_R][4], const float **xj,
                                                                  const float **wj, int64_t js, const int R,
                                                                  const int S) {
  __m256 b[DL3_R];
#pragma GCC unroll 3
  for (int r = 0; r < R; r++) b[r] = _mm256_broadcast_ss(*xj + r * S);
#pragma GCC unroll 4
  for (int v = 0; v < 4; v++) {
    __m256 w = _mm256_load_ps(*wj + 8 * v);
#pragma GCC unroll 3
    for (int r = 0; r < R; r++) primc_fma231(&a[r][v], w, b[r]);
  }
  *xj += js, *wj += DL_NR;
  __asm__("" : "+r"(*xj), "+r"(*wj));
}

static inline __attribute__((always_inline)) DL2_AVX void dl_tile3(const dl_src *s, float *d, int acc, const int R,
                                                                   const int S) {
  __m256 a[DL3_R][4];
#pragma GCC unroll 3
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int v = 0; v < 4; v++) a[r][v] = acc ? _mm256_loadu_ps(d + r * DL_NR + 8 * v) : _mm256_setzero_ps();
  DL_EACH_TAP(s, s->w, dl_tap3(a, &xj, &wj, s->js, R, S));
#pragma GCC unroll 3
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int v = 0; v < 4; v++) _mm256_storeu_ps(d + r * DL_NR + 8 * v, a[r][v]);
}
#define DL3_DEF(R)                                                                                          \
  static DL2_AVX void dl3_##R##_1(const dl_src *s, float *d, int acc) { dl_tile3(s, d, acc, R, 1); }        \
  static DL2_AVX void dl3_##R##_2(const dl_src *s, float *d, int acc) { dl_tile3(s, d, acc, R, 2); }
DL3_DEF(1) DL3_DEF(2) DL3_DEF(3)
static void (*const dl3_tab[DL3_R][2])(const dl_src *, float *, int) = {
    {dl3_1_1, dl3_1_2}, {dl3_2_1, dl3_2_2}, {dl3_3_1, dl3_3_2}};

/* one kernel column's tap: pixels 0, 1, 2 of x at address X (o1, o2: the pixels' offsets) broadcast, the 32
 * channels' weights at byte W of w in four vectors */
#define DL3_TAP(X, W)                                                                                             \
  "vbroadcastss " X ", %%ymm12\n\t vbroadcastss %c[o1]" X ", %%ymm13\n\t vbroadcastss %c[o2]" X ", %%ymm14\n\t"  \
  "vmovaps " #W "+0(%[w]), %%ymm15\n\t vfmadd231ps %%ymm15, %%ymm12, %[a0]\n\t"                               \
  "vfmadd231ps %%ymm15, %%ymm13, %[a4]\n\t vfmadd231ps %%ymm15, %%ymm14, %[a8]\n\t"                            \
  "vmovaps " #W "+32(%[w]), %%ymm15\n\t vfmadd231ps %%ymm15, %%ymm12, %[a1]\n\t"                              \
  "vfmadd231ps %%ymm15, %%ymm13, %[a5]\n\t vfmadd231ps %%ymm15, %%ymm14, %[a9]\n\t"                            \
  "vmovaps " #W "+64(%[w]), %%ymm15\n\t vfmadd231ps %%ymm15, %%ymm12, %[a2]\n\t"                              \
  "vfmadd231ps %%ymm15, %%ymm13, %[a6]\n\t vfmadd231ps %%ymm15, %%ymm14, %[a10]\n\t"                           \
  "vmovaps " #W "+96(%[w]), %%ymm15\n\t vfmadd231ps %%ymm15, %%ymm12, %[a3]\n\t"                              \
  "vfmadd231ps %%ymm15, %%ymm13, %[a7]\n\t vfmadd231ps %%ymm15, %%ymm14, %[a11]\n\t"

/* 3 pixels x 32 channels of a kernel three columns wide: each kernel row's three taps as one asm block, the 12 sums,
 * 3 broadcasts and the weight vector pinned to the 16 ymm. GCC's allocation of dl_tile3 for the same taps kept
 * register moves and reloads of the column pitch: 73 instructions a kernel row (36 FMAs) against 62 with this one,
 * which counts on a core whose issue slots a sibling thread takes (bench/conv_rows.md). */
static inline __attribute__((always_inline)) DL2_AVX void dl3_cols3(const dl_src *s, float *d, int acc, const int S) {
  __m256 a[12];
#pragma GCC unroll 12
  for (int k = 0; k < 12; k++) a[k] = acc ? _mm256_loadu_ps(d + k * 8) : _mm256_setzero_ps();
  const int64_t js = s->js * (int64_t)sizeof(float), js2 = 2 * js;
  const float *xc = s->x, *wc = s->w;
  for (int64_t c = 0; c < s->c; c++, xc += s->cs, wc += s->wcs) {
    const float *x = xc, *w = wc;
    for (int64_t i = 0; i < s->ni; i++, x += s->rs, w += s->wrs)
      __asm__(DL3_TAP("(%[x])", 0) DL3_TAP("(%[x],%[js],1)", 128) DL3_TAP("(%[x],%[js2],1)", 256)
          : [a0] "+x"(a[0]), [a1] "+x"(a[1]), [a2] "+x"(a[2]), [a3] "+x"(a[3]), [a4] "+x"(a[4]), [a5] "+x"(a[5]),
            [a6] "+x"(a[6]), [a7] "+x"(a[7]), [a8] "+x"(a[8]), [a9] "+x"(a[9]), [a10] "+x"(a[10]), [a11] "+x"(a[11])
          : [x] "r"(x), [w] "r"(w), [js] "r"(js), [js2] "r"(js2), [o1] "i"(4 * S), [o2] "i"(8 * S)
          : "xmm12", "xmm13", "xmm14", "xmm15");
  }
#pragma GCC unroll 12
  for (int k = 0; k < 12; k++) _mm256_storeu_ps(d + k * 8, a[k]);
}
static DL2_AVX void dl3c_1(const dl_src *s, float *d, int acc) { dl3_cols3(s, d, acc, 1); }
static DL2_AVX void dl3c_2(const dl_src *s, float *d, int acc) { dl3_cols3(s, d, acc, 2); }
static void (*const dl3c_tab[2])(const dl_src *, float *, int) = {dl3c_1, dl3c_2};

enum { DL_TILE_AVX512, DL_TILE_AVX2_3, DL_TILE_AVX2_6 };
static const int dl_tile_px[] = {DL_R, DL3_R, DL2_R}; /* pixels per tile, by tile kind */

/* n pixels of the tile at s (sums at d) in the tile kind's kernel (the 6-pixel one for each half of the channels) */
static void dl_call(const dl_src *s, float *d, int acc, int64_t n, int64_t S, int tile) {
  if (tile == DL_TILE_AVX512) dl_tab[n - 1][S - 1](s, d, acc);
  else if (tile == DL_TILE_AVX2_3 && n == DL3_R && s->nj == 3) dl3c_tab[S - 1](s, d, acc);
  else if (tile == DL_TILE_AVX2_3) dl3_tab[n - 1][S - 1](s, d, acc);
  else
    for (int h = 0; h < 2; h++) dl2_tab[n - 1][S - 1](s, d, acc, h);
}
#endif

static int dl_shape(const primc_conv2d *p, int64_t ow) {
  return p->groups == 1 && !cv_is_depthwise(p) && (p->stride_w == 1 || p->stride_w == 2) && ow * DL_NR <= DL_BAND_FLOATS &&
         p->kw <= DL_MAX_KW;
}

size_t primc_conv2d_lanes_bytes(const primc_conv2d *p) {
  return (size_t)((p->o + DL_NR - 1) / DL_NR * DL_NR * p->c * p->kh * p->kw) * sizeof(float);
}

typedef struct pack_lanes_job {
  const primc_conv2d *p;
  const float *w;
  float *dst;
} pack_lanes_job;

/* blocks [b, e) of DL_NR output channels: block ob is its DL_NR rows of w transposed, zeros past the last channel */
static void pack_lanes_blocks(void *ctx, int64_t b, int64_t e) {
  const pack_lanes_job *j = ctx;
  int64_t kk = j->p->c * j->p->kh * j->p->kw, O = j->p->o;
  for (int64_t ob = b; ob < e; ob++)
    for (int64_t k = 0; k < kk; k++)
      for (int64_t l = 0; l < DL_NR; l++) {
        int64_t o = ob * DL_NR + l;
        j->dst[(ob * kk + k) * DL_NR + l] = o < O ? j->w[o * kk + k] : 0.0f;
      }
}

#if PRIMC_X86
/* the same as 16 x 16 transposes in registers: value by value, each read 32 rows kk apart (a 512-channel 3x3's rows
 * 18 KB apart, two L1 sets), the packing took about 0.7 ns a weight, 11 ms of a ResNet-18 training step, whose
 * convs pack their computed weights at every call */
__attribute__((target("avx512f"))) static void pack_lanes_blocks16(void *ctx, int64_t b, int64_t e) {
  const pack_lanes_job *j = ctx;
  int64_t kk = j->p->c * j->p->kh * j->p->kw, O = j->p->o;
  for (int64_t ob = b; ob < e; ob++)
    for (int h = 0; h < DL_NR / 16; h++) {
      int64_t o0 = ob * DL_NR + h * 16, rows = O - o0 < 16 ? O - o0 : 16;
      for (int64_t k0 = 0; k0 < kk; k0 += 16) {
        int64_t cols = kk - k0 < 16 ? kk - k0 : 16;
        __mmask16 mc = primc_low_mask16(cols);
        __m512 r[16];
        for (int i = 0; i < 16; i++)
          r[i] = i < rows ? _mm512_maskz_loadu_ps(mc, j->w + (o0 + i) * kk + k0) : _mm512_setzero_ps();
        primc_tr16(r);
        for (int64_t c = 0; c < cols; c++) _mm512_storeu_ps(j->dst + (ob * kk + k0 + c) * DL_NR + h * 16, r[c]);
      }
    }
}
#endif

/* the same blocks from the weights of the conv whose input gradient p is (j->w: [c][o][T], each kernel's T taps
 * reversed): block ob's rows at channel c are 32 rows of T taps one after another */
static void pack_flipped_blocks(void *ctx, int64_t b, int64_t e) {
  const pack_lanes_job *j = ctx;
  int64_t T = j->p->kh * j->p->kw, kk = j->p->c * T, O = j->p->o;
  for (int64_t ob = b; ob < e; ob++)
    for (int64_t c = 0; c < j->p->c; c++)
      for (int64_t t = 0; t < T; t++)
        for (int64_t l = 0; l < DL_NR; l++) {
          int64_t o = ob * DL_NR + l;
          j->dst[(ob * kk + c * T + t) * DL_NR + l] = o < O ? j->w[(c * O + o) * T + T - 1 - t] : 0.0f;
        }
}

#if PRIMC_X86
/* as 16 x 16 transposes of 16 rows of up to 16 taps each */
__attribute__((target("avx512f"))) static void pack_flipped_blocks16(void *ctx, int64_t b, int64_t e) {
  const pack_lanes_job *j = ctx;
  int64_t T = j->p->kh * j->p->kw, kk = j->p->c * T, O = j->p->o;
  for (int64_t ob = b; ob < e; ob++)
    for (int h = 0; h < DL_NR / 16; h++) {
      int64_t o0 = ob * DL_NR + h * 16, rows = O - o0 < 16 ? O - o0 : 16;
      for (int64_t c = 0; c < j->p->c; c++)
        for (int64_t t0 = 0; t0 < T; t0 += 16) {
          int64_t cols = T - t0 < 16 ? T - t0 : 16;
          __mmask16 mc = primc_low_mask16(cols);
          __m512 r[16];
          for (int i = 0; i < 16; i++)
            r[i] = i < rows ? _mm512_maskz_loadu_ps(mc, j->w + (c * O + o0 + i) * T + t0) : _mm512_setzero_ps();
          primc_tr16(r);
          for (int64_t q = 0; q < cols; q++)
            _mm512_storeu_ps(j->dst + (ob * kk + c * T + T - 1 - t0 - q) * DL_NR + h * 16, r[q]);
        }
    }
}
#endif

#define PACK_SPLIT_FLOATS (1 << 16) /* weights from which the packing is split over the threads */
static int pack_lanes_by(const primc_conv2d *p, const float *w, float *dst, int flipped) {
  if (!p || !primc_cv_valid(p) || p->groups != 1 || !w || !dst) return PRIMC_ERR_ARG;
  int64_t nob = (p->o + DL_NR - 1) / DL_NR;
  pack_lanes_job j = {p, w, dst};
  void (*fn)(void *, int64_t, int64_t) = flipped ? pack_flipped_blocks : pack_lanes_blocks;
#if PRIMC_X86
  if (cv_use_avx512()) fn = flipped ? pack_flipped_blocks16 : pack_lanes_blocks16;
#endif
  if (p->o * p->c * p->kh * p->kw >= PACK_SPLIT_FLOATS)
    primc_parallel_for(nob, fn, &j);
  else
    fn(&j, 0, nob);
  return PRIMC_OK;
}

int primc_conv2d_pack_lanes(const primc_conv2d *p, const float *w, float *dst) { return pack_lanes_by(p, w, dst, 0); }

int primc_conv2d_pack_lanes_flipped(const primc_conv2d *p, const float *wf, float *dst) {
  return pack_lanes_by(p, wf, dst, 1);
}

#if PRIMC_X86
typedef struct dl_job {
  const primc_conv2d *p;
  int64_t oh, ow, nob, bands; /* bands: of output rows, each with its sums on the stack */
  int band_major;             /* items band by band: each thread on its own rows of x and y */
  const float *x, *w;
  epi_ctx e; /* at the image's start */
  int64_t P;
  int tile;   /* DL_TILE_*: the ISA's, and on AVX2 by the input channels */
  int pf_out; /* the band's output lines prefetched for writing first (cv_pf_out) */
} dl_job;

/* the pixels [*a, *b) of [t0, t1) whose kernel column j lies inside x's row */
static void dl_cols(const primc_conv2d *p, int64_t j, int64_t t0, int64_t t1, int64_t *a, int64_t *b) {
  int64_t off = j * p->dil_w - p->pad_l, S = p->stride_w; /* pixel ox reads column ox S + off */
  int64_t lo = off >= 0 ? 0 : (-off + S - 1) / S, hi = p->w - 1 - off < 0 ? 0 : (p->w - 1 - off) / S + 1;
  *a = lo > t0 ? lo : t0;
  *b = hi < t1 ? hi : t1;
  if (*b < *a) *b = *a;
}

/* A tile's kernel calls: one when every tap of it lies inside x, else one per run of kernel columns
 * inside x for the same pixels (at the row's ends: the same FMAs as a full tile). Made once per conv
 * call, not per row and chunk: the divisions cost a third of a 7-wide row's FMA time. */
#define DL_MAX_TILES ((DL_BAND_FLOATS / DL_NR + DL3_R - 1) / DL3_R)
typedef struct dl_run {
  int64_t a, b, j0, j1; /* pixels [a, b) over kernel columns [j0, j1) */
} dl_run;
typedef struct dl_plan {
  int64_t tiles, t0[DL_MAX_TILES + 1];
  int full[DL_MAX_TILES], n[DL_MAX_TILES];
  dl_run run[DL_MAX_TILES][DL_MAX_KW];
} dl_plan;

/* rows of ow pixels in tiles of at most tw */
static void dl_plan_make(const primc_conv2d *p, int64_t ow, int64_t tw, dl_plan *pl) {
  pl->tiles = (ow + tw - 1) / tw;
  for (int64_t t = 0; t <= pl->tiles; t++) pl->t0[t] = ow * t / pl->tiles;
  for (int64_t t = 0; t < pl->tiles; t++) {
    int64_t t0 = pl->t0[t], t1 = pl->t0[t + 1], a, b, a1, b1;
    dl_cols(p, 0, t0, t1, &a, &b);
    dl_cols(p, p->kw - 1, t0, t1, &a1, &b1);
    pl->full[t] = a == t0 && b == t1 && a1 == t0 && b1 == t1; /* columns are monotonic in j: the ends decide */
    pl->n[t] = 0;
    for (int64_t j0 = 0, j1; j0 < p->kw && !pl->full[t]; j0 = j1) {
      dl_cols(p, j0, t0, t1, &a, &b);
      for (j1 = j0 + 1; j1 < p->kw; j1++) {
        dl_cols(p, j1, t0, t1, &a1, &b1);
        if (a1 != a || b1 != b) break;
      }
      if (a < b) pl->run[t][pl->n[t]++] = (dl_run){a, b, j0, j1};
    }
  }
}

/* tile t of a row (sums at the row's) */
static void dl_tile_at(const dl_job *j, const dl_plan *pl, const dl_src *row, int64_t t, float *sums, int acc) {
  const primc_conv2d *p = j->p;
  int64_t S = p->stride_w, t0 = pl->t0[t], t1 = pl->t0[t + 1];
  if (pl->full[t]) {
    dl_src s = *row;
    s.x += t0 * S - p->pad_l;
    dl_call(&s, sums + t0 * DL_NR, acc, t1 - t0, S, j->tile);
    return;
  }
  if (!acc) memset(sums + t0 * DL_NR, 0, (size_t)((t1 - t0) * DL_NR) * sizeof(float));
  for (int q = 0; q < pl->n[t]; q++) {
    const dl_run *r = &pl->run[t][q];
    dl_src s = *row;
    s.x += r->a * S - p->pad_l + r->j0 * p->dil_w, s.w += r->j0 * DL_NR, s.nj = r->j1 - r->j0;
    dl_call(&s, sums + r->a * DL_NR, 1, r->b - r->a, S, j->tile);
  }
}

/* the source of output row oy's taps for channels [c0, c0 + nc), kernel rows inside x; ni = 0 if none */
static dl_src dl_row(const dl_job *j, int64_t ob, int64_t oy, int64_t c0, int64_t nc) {
  const primc_conv2d *p = j->p;
  int64_t top = oy * p->stride_h - p->pad_t, i0 = 0, i1 = p->kh, wcs = p->kh * p->kw * DL_NR;
  while (i0 < i1 && top + i0 * p->dil_h < 0) i0++;
  while (i1 > i0 && top + (i1 - 1) * p->dil_h >= p->h) i1--;
  dl_src s = {.x = j->x + (c0 * p->h + top + i0 * p->dil_h) * p->w, .cs = p->h * p->w, .rs = p->dil_h * p->w,
              .js = p->dil_w, .c = nc, .ni = i1 - i0, .nj = p->kw,
              .w = j->w + (ob * p->c * p->kh * p->kw) * DL_NR + c0 * wcs + i0 * p->kw * DL_NR, .wcs = wcs,
              .wrs = p->kw * DL_NR};
  return s;
}

/* the output rows [*r0, *r1) of band */
static void dl_band(const dl_job *j, int64_t band, int64_t *r0, int64_t *r1) {
  *r0 = j->oh * band / j->bands;
  *r1 = j->oh * (band + 1) / j->bands;
}

/* the input rows that output rows [r0, r1) read, inside x */
static void dl_band_in_rows(const primc_conv2d *p, int64_t r0, int64_t r1, int64_t *i0, int64_t *i1) {
  int64_t a = r0 * p->stride_h - p->pad_t, b = (r1 - 1) * p->stride_h - p->pad_t + (p->kh - 1) * p->dil_h + 1;
  *i0 = a < 0 ? 0 : a;
  *i1 = b > p->h ? p->h : b;
  if (*i1 < *i0) *i1 = *i0;
}

/* The band's x is every channel's few rows, a map apart: more streams than the prefetchers follow, so
 * each tile would wait on lines of x from L3. Taking bands in turn (band-major items), a thread's next
 * band is pulled into L2 meanwhile, channel by channel, a share before each tile. (Block-major items
 * read the whole of x once per block: there it is in L2 or too large for it, and prefetching it
 * again cost 40% on a 512 -> 1024 1x1 downsample.) */
typedef struct dl_xpf {
  const char *row; /* the current channel's rows */
  int64_t c, cs, bytes, at, per;
} dl_xpf;

static dl_xpf dl_xpf_make(const dl_job *j, int64_t band, int64_t calls) {
  const primc_conv2d *p = j->p;
  int64_t r0, r1, i0, i1;
  dl_band(j, band, &r0, &r1);
  dl_band_in_rows(p, r0, r1, &i0, &i1);
  dl_xpf f = {(const char *)(j->x + i0 * p->w), p->c, p->h * p->w * (int64_t)sizeof(float),
              (i1 - i0) * p->w * (int64_t)sizeof(float), 0, 0};
  int64_t lines = p->c * ((f.bytes + 63) / 64);
  f.per = calls > 0 ? (lines + calls - 1) / calls : lines;
  if (f.bytes == 0) f.c = 0;
  return f;
}

static void dl_xpf_step(dl_xpf *f) {
  for (int64_t l = 0; l < f->per && f->c > 0; l++) {
    _mm_prefetch(f->row + f->at, _MM_HINT_T1);
    if ((f->at += 64) >= f->bytes) f->at = 0, f->row += f->cs, f->c--;
  }
}

/* items (output-channel block, band of output rows) [b, e), block-major so threads split the blocks
 * first. Each chunk of weights is read by every tile of the band before the next: a deep conv's weights
 * come from memory once per block, not once per row (bench/conv_rows.md). */
static void dl_range(void *ctx, int64_t b, int64_t e) {
  const dl_job *j = ctx;
  const primc_conv2d *p = j->p;
  float sums[DL_BAND_FLOATS] __attribute__((aligned(64)));
  dl_plan pl;
  dl_plan_make(p, j->ow, dl_tile_px[j->tile], &pl);
  int64_t wcs = p->kh * p->kw * DL_NR, tiles = pl.tiles, row_f = j->ow * DL_NR;
  int64_t chunk = DL_W_BYTES / (wcs * (int64_t)sizeof(float));
  if (chunk < 1) chunk = 1;
  for (int64_t it = b; it < e; it++) {
    int64_t ob = j->band_major ? it % j->nob : it / j->bands, band = j->band_major ? it / j->nob : it % j->bands;
    int64_t r0, r1;
    dl_band(j, band, &r0, &r1);
    int64_t nb = p->o - ob * DL_NR < DL_NR ? p->o - ob * DL_NR : DL_NR;
    epi_ctx eb = cv_epi_at(&j->e, ob * DL_NR, j->P);
    if (j->pf_out) primc_cv_prefetch_out(&eb, j->P, r0 * j->ow, (r1 - r0) * j->ow, nb);
    dl_xpf xpf = {0};
    if (j->band_major && it + 1 < e && (it + 1) / j->nob != band)
      xpf = dl_xpf_make(j, (it + 1) / j->nob, (p->c + chunk - 1) / chunk * (r1 - r0) * tiles);
    for (int64_t c0 = 0; c0 < p->c; c0 += chunk) {
      int64_t nc = p->c - c0 < chunk ? p->c - c0 : chunk;
      /* the next chunk's weights (the next block's first, past the last) into L2 meanwhile, a share
       * before each tile: their first reading comes from memory */
      const char *pf = (const char *)(j->w + (ob * p->c + c0 + nc) * wcs);
      int64_t lines = nc * wcs * (int64_t)sizeof(float) / 64, per = (lines + (r1 - r0) * tiles - 1) / ((r1 - r0) * tiles);
      for (int64_t oy = r0; oy < r1; oy++) {
        dl_src row = dl_row(j, ob, oy, c0, nc);
        float *rs = sums + (oy - r0) * row_f;
        if (!row.ni && c0 == 0) memset(rs, 0, (size_t)row_f * sizeof(float));
        for (int64_t t = 0; t < tiles; t++) {
          for (int64_t l = 0; l < per && lines > 0; l++, lines--, pf += 64) _mm_prefetch(pf, _MM_HINT_T1);
          dl_xpf_step(&xpf);
          if (row.ni) dl_tile_at(j, &pl, &row, t, rs, c0 > 0);
        }
      }
    }
    cv_ct_store(&eb, j->P, sums, DL_NR, r0 * j->ow, (r1 - r0) * j->ow, nb);
  }
}

/* Threads take bands of rows, not blocks of output channels, when every thread can hold all the
 * weights in its L2 and they are fewer bytes than x: each core then reads the rows of x its own core
 * wrote in the conv before (which splits rows too) and writes the rows the next one reads. Split by
 * blocks, each core reads every row of x, half of them from the other core's cache, slow where two
 * vCPUs sit far apart (bench/conv_rows.md). */
#define DL_BAND_W_BYTES (512 << 10)
static int dl_band_major(const primc_conv2d *p, int64_t nob) {
  int64_t wb = nob * DL_NR * p->c * p->kh * p->kw * (int64_t)sizeof(float);
  return wb <= DL_BAND_W_BYTES && wb <= p->c * p->h * p->w * (int64_t)sizeof(float);
}

/* one image: x, y and the residual at the image's start */
static void dl_conv(const primc_conv2d *p, int64_t oh, int64_t ow, const float *x, const float *w, const epi_ctx *c) {
  int64_t rows = DL_BAND_FLOATS / (ow * DL_NR);
  int64_t nob = (p->o + DL_NR - 1) / DL_NR;
  int tile = cv_use_avx512() ? DL_TILE_AVX512 : p->c >= CV_DL_TILE3_MIN_C ? DL_TILE_AVX2_3 : DL_TILE_AVX2_6;
  dl_job j = {p, oh, ow, nob, (oh + rows - 1) / rows, dl_band_major(p, nob), x, w, *c, oh * ow, tile, cv_pf_out()};
  primc_parallel_for(j.nob * j.bands, dl_range, &j);
}
#endif

/* ---------------------------------------------------------------- the rows */

static int lanes_weights(const primc_conv2d *p) {
  return p->w_lanes && !p->w_packed_mr && !p->w_packed_panels && !p->w_winograd && !p->w_bf16;
}

int primc_cv_dl_fits(const primc_conv2d *p, const primc_conv2d *next) {
  int64_t oh, ow;
  return lanes_weights(p) && primc_conv2d_out_hw(p, &oh, &ow) && dl_shape(p, ow);
}

/* writes y row by row from its epilogue, reading x throughout */
int primc_cv_dl_run(const cv_call *k) {
#if PRIMC_X86
  for (int64_t n = 0; n < k->p->n; n++) {
    epi_ctx c = cv_image_epi(k, n);
    dl_conv(k->p, k->oh, k->ow, cv_image_x(k, n), k->w, &c);
  }
  return PRIMC_OK;
#else
  return PRIMC_ERR_ARG; /* an x86 row: never planned here */
#endif
}

/* The lanes layout on any CPU: a plain loop over [o / 32][c kh kw][32], so that weights packed for the
 * direct lanes row run where AVX2 is missing. The sums go to acc, then the epilogue to y. */
int primc_cv_lanes_loop_fits(const primc_conv2d *p, const primc_conv2d *next) {
  return lanes_weights(p) && p->groups == 1 && !cv_is_depthwise(p);
}

int primc_cv_lanes_loop_run(const cv_call *k) {
  const primc_conv2d *p = k->p;
  const primc_conv_epi *e = k->e;
  const float *w = k->w;
  int64_t oh = k->oh, ow = k->ow, P = oh * ow, kk = p->c * p->kh * p->kw;
  epi_ctx ec = cv_epi_of(e, 0, NULL, NULL);
  for (int64_t n = 0; n < p->n; n++)
    for (int64_t o = 0; o < p->o; o++) {
      const float *wo = w + (o / DL_NR) * kk * DL_NR + o % DL_NR;
      float *acc = k->acc + (n * p->o + o) * P;
      for (int64_t oy = 0; oy < oh; oy++)
        for (int64_t ox = 0; ox < ow; ox++) {
          float s = 0.0f;
          for (int64_t c = 0; c < p->c; c++)
            for (int64_t i = 0; i < p->kh; i++) {
              int64_t ih = oy * p->stride_h - p->pad_t + i * p->dil_h;
              if (ih < 0 || ih >= p->h) continue;
              const float *xr = k->x + ((n * p->c + c) * p->h + ih) * p->w;
              for (int64_t j = 0; j < p->kw; j++) {
                int64_t iw = ox * p->stride_w - p->pad_l + j * p->dil_w;
                if (iw >= 0 && iw < p->w) s += xr[iw] * wo[((c * p->kh + i) * p->kw + j) * DL_NR];
              }
            }
          acc[oy * ow + ox] = s;
        }
      int64_t off = (n * p->o + o) * P;
      primc_cv_epi_row_scalar(&ec, k->y + off, acc, e->res ? e->res + off : NULL, cv_bias_at(&ec, o), cv_scale_at(&ec, o), P);
    }
  return PRIMC_OK;
}
