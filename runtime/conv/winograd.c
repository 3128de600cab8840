/* runtime/conv/winograd.c: the Winograd F(2x2, 3x3) row: 3x3 stride-1 convs as 16 GEMMs on transformed tiles. */
#include "runtime/conv/conv.h"
#include "runtime/gemm/gemm.h"

#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- Winograd F(2x2, 3x3) */

/*
 * Stride-1 3x3 convs as Winograd F(2x2, 3x3) (Lavin and Gray): each 2x2 output tile is A^T [(G g G^T)
 * . (B^T d B)] A for its 4x4 input patch d, so the 36 multiply-adds per tile and channel pair become
 * 16, done as 16 GEMMs (one per position xi of the 4x4 transform): M_xi[o][t] = U_xi[o][c] V_xi[c][t].
 * U (the transformed weights) is made at compile time, packed as A strips; V and M live in the
 * scratch. The transforms only add, subtract and halve, so the result stays within a few ulps of
 * the direct sum (tested against a double-precision reference). Worth it once the GEMMs are big
 * enough to run near peak: the planner (plan.c) sets how big. Small maps take several images' tiles as the
 * GEMMs' columns (a 7x7 map has 16 tiles: a batch of 8 through a 512-channel 3x3, 29.1 -> 21.4 ms on Zen 3 with
 * all 8 images' tiles in each GEMM).
 */
#define WINO_MAX_TX 512 /* tiles across: the transforms' row buffers are on the stack */
#define WINO_MIN_COLS 128 /* GEMM columns (tiles) that small maps gather from several images */

typedef struct wino_geo {
  int64_t ty, tx, t; /* tiles down, across, all */
} wino_geo;

static wino_geo wino_geometry(int64_t oh, int64_t ow) {
  wino_geo g = {(oh + 1) / 2, (ow + 1) / 2, 0};
  g.t = g.ty * g.tx;
  return g;
}

/* what the Winograd path can run */
static int wino_shape(const primc_conv2d *p, int64_t oh, int64_t ow) {
  return p->kh == 3 && p->kw == 3 && p->stride_h == 1 && p->stride_w == 1 && p->dil_h == 1 && p->dil_w == 1 &&
         p->groups == 1 && wino_geometry(oh, ow).tx <= WINO_MAX_TX;
}

/* images whose tiles one round of GEMMs takes: enough for WINO_MIN_COLS columns, the batch split evenly */
static int64_t wino_images(const primc_conv2d *p, int64_t oh, int64_t ow) {
  int64_t t = wino_geometry(oh, ow).t, most = (WINO_MIN_COLS + t - 1) / t;
  if (most >= p->n) return p->n;
  int64_t rounds = (p->n + most - 1) / most;
  return (p->n + rounds - 1) / rounds;
}

static int64_t wino_floats(const primc_conv2d *p, int64_t oh, int64_t ow) {
  return 16 * (p->c + p->o) * wino_geometry(oh, ow).t * wino_images(p, oh, ow);
}

/* u = G g G^T for a vector type T of 3x3 kernels at once, g[k] holding tap k of each (a vector type, so that any
 * target's compiler emits its vector ops) */
#define WINO_KERNELS(T, g, u)                                                                                        \
  do {                                                                                                               \
    T t_[4][3];                                                                                                      \
    for (int j = 0; j < 3; j++) {                                                                                    \
      T a = g[j], b = g[3 + j], c = g[6 + j];                                                                        \
      t_[0][j] = a, t_[1][j] = 0.5f * (a + b + c), t_[2][j] = 0.5f * (a - b + c), t_[3][j] = c;                      \
    }                                                                                                                \
    for (int i = 0; i < 4; i++) {                                                                                    \
      T a = t_[i][0], b = t_[i][1], c = t_[i][2];                                                                    \
      u[i * 4 + 0] = a, u[i * 4 + 1] = 0.5f * (a + b + c), u[i * 4 + 2] = 0.5f * (a - b + c), u[i * 4 + 3] = c;     \
    }                                                                                                                \
  } while (0)
typedef float wino_v8 __attribute__((vector_size(32)));
static void wino_kernels8(const wino_v8 g[9], wino_v8 u[16]) { WINO_KERNELS(wino_v8, g, u); }

size_t primc_conv2d_winograd_bytes(const primc_conv2d *p) { return (size_t)(16 * p->o * p->c) * sizeof(float); }

/* U_xi packed as primc_sgemm_pack_a's strips (strip s: rows [m0, m0 + h), (row r, k) at m0 K + k h + r), made
 * straight from the kernels: a training step packs its computed weights at every call, where a 16 O C float
 * temporary (16 MB at 512 channels, fresh pages each time) and 16 packing passes over it cost as much as the
 * 7x7 conv's GEMMs */
typedef struct wino_pack_job {
  const float *w;
  float *dst;
  int64_t O, C, strips;
  int flipped; /* w is the weights of the conv whose input gradient this is: [C][O][3][3], each kernel reversed */
} wino_pack_job;

#if PRIMC_X86
/* WINO_KERNELS for 16 kernels at once, on zmm */
typedef float wino_v16 __attribute__((vector_size(64)));
__attribute__((target("avx512f"))) static inline void wino_kernels16(const wino_v16 g[9], wino_v16 u[16]) {
  WINO_KERNELS(wino_v16, g, u);
}

/* wino_pack_strips on zmm: per strip row, 16 channels' kernels gathered tap by tap (9 contiguous floats each, or
 * the flipped conv's reversed and O kernels apart), transformed, then each xi's rows x channels block transposed
 * into the strip's channel-major order (the scalar gathers were 3 of the 3.05 ms that 512 x 512 took a call) */
__attribute__((target("avx512f"))) static void wino_pack_strips512(const wino_pack_job *j, int64_t s0, int64_t s1) {
  int64_t O = j->O, C = j->C;
  float tmp[16][MR_MAX][16];
  for (int64_t s = s0; s < s1; s++) {
    int64_t h, m0 = gm_strip(O, j->strips, s, &h);
    for (int64_t c0 = 0; c0 < C; c0 += 16) {
      int cb = C - c0 < 16 ? (int)(C - c0) : 16;
      __mmask16 m = primc_low_mask16(cb);
      __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
      __m512i step = _mm512_mullo_epi32(lane, _mm512_set1_epi32(j->flipped ? (int)(O * 9) : 9));
      for (int64_t r = 0; r < h; r++) {
        const float *base = j->flipped ? j->w + (c0 * O + m0 + r) * 9 : j->w + ((m0 + r) * C + c0) * 9;
        wino_v16 g[9], u[16];
        for (int k = 0; k < 9; k++) {
          __m512i at = _mm512_add_epi32(step, _mm512_set1_epi32(j->flipped ? 8 - k : k));
          g[k] = (wino_v16)_mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, at, base, 4);
        }
        wino_kernels16(g, u);
        for (int xi = 0; xi < 16; xi++) _mm512_storeu_ps(tmp[xi][r], (__m512)u[xi]);
      }
      for (int xi = 0; xi < 16; xi++)
        primc_tr16_part(tmp[xi][0], 16, (int)h, cb, j->dst + xi * O * C + m0 * C + c0 * h, h);
    }
  }
}
#endif

static void wino_pack_strips(void *ctx, int64_t s0, int64_t s1) {
  const wino_pack_job *j = ctx;
  int64_t O = j->O, C = j->C;
#if PRIMC_X86
  if (cv_use_avx512() && O * C * 9 < INT32_MAX) {
    wino_pack_strips512(j, s0, s1);
    return;
  }
#endif
  /* a block of channels' kernels, tap-major in the strip's order, transformed 8 at a time, then each xi's part
   * of the strip stored in one run (each kernel's 16 values stored straight away were 16 streams a power of two
   * apart, one L1 set: 5x slower) */
  enum { CB = 32, NB = (CB * MR_MAX + 7) / 8 };
  wino_v8 g[9][NB], t[16][NB];
  for (int64_t s = s0; s < s1; s++) {
    int64_t h, m0 = gm_strip(O, j->strips, s, &h);
    for (int64_t c0 = 0; c0 < C; c0 += CB) {
      int64_t cb = C - c0 < CB ? C - c0 : CB, n = cb * h;
      memset(g, 0, sizeof g);
      for (int64_t c = 0; c < cb; c++)
        for (int64_t r = 0; r < h; r++)
          for (int k = 0; k < 9; k++)
            g[k][(c * h + r) / 8][(c * h + r) % 8] = j->flipped ? j->w[((c0 + c) * O + m0 + r) * 9 + 8 - k]
                                                                : j->w[((m0 + r) * C + c0 + c) * 9 + k];
      for (int64_t v = 0; v < (n + 7) / 8; v++) {
        wino_v8 gi[9], u[16];
        for (int k = 0; k < 9; k++) gi[k] = g[k][v];
        wino_kernels8(gi, u);
        for (int xi = 0; xi < 16; xi++) t[xi][v] = u[xi];
      }
      for (int xi = 0; xi < 16; xi++)
        memcpy(j->dst + xi * O * C + m0 * C + c0 * h, t[xi], (size_t)n * sizeof(float));
    }
  }
}

static int pack_winograd_by(const primc_conv2d *p, const float *w, int mr, float *dst, int flipped) {
  int64_t oh, ow;
  if (!p || !w || !dst || !primc_cv_valid(p) || !primc_conv2d_out_hw(p, &oh, &ow) || !wino_shape(p, oh, ow) || mr < 1 ||
      mr > MR_MAX)
    return PRIMC_ERR_ARG;
  wino_pack_job j = {w, dst, p->o, p->c, cdiv(p->o, mr), flipped};
  primc_parallel_for(j.strips, wino_pack_strips, &j);
  return PRIMC_OK;
}

int primc_conv2d_pack_winograd(const primc_conv2d *p, const float *w, int mr, float *dst) {
  return pack_winograd_by(p, w, mr, dst, 0);
}

int primc_conv2d_pack_winograd_flipped(const primc_conv2d *p, const float *wf, int mr, float *dst) {
  return pack_winograd_by(p, wf, mr, dst, 1);
}

typedef struct wino_job {
  const cv_call *k; /* the call: its conv, output size, weights (U) */
  wino_geo g;
  int64_t n0, nb, cols; /* images [n0, n0 + nb); their tiles, nb T, are the GEMMs' columns */
  float *v, *m; /* [16][C][cols], [16][O][cols]: image b's tiles at b T */
  int status;
} wino_job;

/* the 4 input rows of tile row ty of channel c of image x, from column -pad_l on, zero outside x; ROW_PAD
 * floats of zeros after the 2 TX + 2 the tiles read, so 16-tile vector loads stay inside */
#define WINO_ROW (2 * WINO_MAX_TX + 2 + 32)
static void wino_rows(const wino_job *j, const float *x, int64_t c, int64_t ty, float rows[4][WINO_ROW]) {
  const primc_conv2d *p = j->k->p;
  int64_t width = 2 * j->g.tx + 2 + 32;
  for (int i = 0; i < 4; i++) {
    int64_t ih = 2 * ty - p->pad_t + i, l = p->pad_l < width ? p->pad_l : width;
    int64_t n = ih < 0 || ih >= p->h ? 0 : p->w < width - l ? p->w : width - l;
    if (n <= 0) { /* the whole row is padding (a memset of every row, then the copy: 1.5% of a training step) */
      memset(rows[i], 0, (size_t)width * sizeof(float));
      continue;
    }
    memset(rows[i], 0, (size_t)l * sizeof(float));
    memcpy(rows[i] + l, x + (c * p->h + ih) * p->w, (size_t)n * sizeof(float));
    memset(rows[i] + l + n, 0, (size_t)(width - l - n) * sizeof(float));
  }
}

/* t = B^T d B of one tile, d[i][k] = rows[i][2 tx + k] */
static void wino_in_tile(float rows[4][WINO_ROW], int64_t tx, float v[16]) {
  float d[4][4], t[4][4];
  for (int i = 0; i < 4; i++)
    for (int k = 0; k < 4; k++) d[i][k] = rows[i][2 * tx + k];
  for (int k = 0; k < 4; k++) {
    t[0][k] = d[0][k] - d[2][k], t[1][k] = d[1][k] + d[2][k];
    t[2][k] = d[2][k] - d[1][k], t[3][k] = d[1][k] - d[3][k];
  }
  for (int i = 0; i < 4; i++) {
    v[i * 4 + 0] = t[i][0] - t[i][2], v[i * 4 + 1] = t[i][1] + t[i][2];
    v[i * 4 + 2] = t[i][2] - t[i][1], v[i * 4 + 3] = t[i][1] - t[i][3];
  }
}

/* the same for 16 tiles [tx0, tx0 + 16) at once: even and odd columns split by permutes */
#if PRIMC_X86
__attribute__((target("avx512f"))) static void wino_in16(float rows[4][WINO_ROW], int64_t tx0, float *v, int64_t xs,
                                                         __mmask16 m) {
  __m512 d[4][4], t[4][4];
  for (int i = 0; i < 4; i++) {
    const float *r = rows[i] + 2 * tx0;
    __m512 a = _mm512_loadu_ps(r), b = _mm512_loadu_ps(r + 16), a2 = _mm512_loadu_ps(r + 2), b2 = _mm512_loadu_ps(r + 18);
    d[i][0] = primc_even16(a, b), d[i][1] = primc_odd16(a, b), d[i][2] = primc_even16(a2, b2), d[i][3] = primc_odd16(a2, b2);
  }
  for (int k = 0; k < 4; k++) {
    t[0][k] = _mm512_sub_ps(d[0][k], d[2][k]), t[1][k] = _mm512_add_ps(d[1][k], d[2][k]);
    t[2][k] = _mm512_sub_ps(d[2][k], d[1][k]), t[3][k] = _mm512_sub_ps(d[1][k], d[3][k]);
  }
  for (int i = 0; i < 4; i++) {
    _mm512_mask_storeu_ps(v + (i * 4 + 0) * xs, m, _mm512_sub_ps(t[i][0], t[i][2]));
    _mm512_mask_storeu_ps(v + (i * 4 + 1) * xs, m, _mm512_add_ps(t[i][1], t[i][2]));
    _mm512_mask_storeu_ps(v + (i * 4 + 2) * xs, m, _mm512_sub_ps(t[i][2], t[i][1]));
    _mm512_mask_storeu_ps(v + (i * 4 + 3) * xs, m, _mm512_sub_ps(t[i][1], t[i][3]));
  }
}

/* wino_in16 on ymm for 8 tiles [tx0, tx0 + 8) (the scalar transforms were 41-56% of a 128-channel conv's time at
 * 28x28 and 40x56 on Zen 3) */
__attribute__((target("avx2"))) static void wino_in8(float rows[4][WINO_ROW], int64_t tx0, float *v, int64_t xs) {
  __m256 d[4][4], t[4][4];
  for (int i = 0; i < 4; i++) {
    const float *r = rows[i] + 2 * tx0;
    __m256 a = _mm256_loadu_ps(r), b = _mm256_loadu_ps(r + 8), a2 = _mm256_loadu_ps(r + 2), b2 = _mm256_loadu_ps(r + 10);
    d[i][0] = primc_even8(a, b), d[i][1] = primc_odd8(a, b), d[i][2] = primc_even8(a2, b2), d[i][3] = primc_odd8(a2, b2);
  }
  for (int k = 0; k < 4; k++) {
    t[0][k] = _mm256_sub_ps(d[0][k], d[2][k]), t[1][k] = _mm256_add_ps(d[1][k], d[2][k]);
    t[2][k] = _mm256_sub_ps(d[2][k], d[1][k]), t[3][k] = _mm256_sub_ps(d[1][k], d[3][k]);
  }
  for (int i = 0; i < 4; i++) {
    _mm256_storeu_ps(v + (i * 4 + 0) * xs, _mm256_sub_ps(t[i][0], t[i][2]));
    _mm256_storeu_ps(v + (i * 4 + 1) * xs, _mm256_add_ps(t[i][1], t[i][2]));
    _mm256_storeu_ps(v + (i * 4 + 2) * xs, _mm256_sub_ps(t[i][2], t[i][1]));
    _mm256_storeu_ps(v + (i * 4 + 3) * xs, _mm256_sub_ps(t[i][1], t[i][3]));
  }
}

/* a row's tx tiles through wino_in8, the last 8 overlapping the 8 before where 8 does not divide them; a row of
 * fewer than 8 tiles stores 8 where `room` says the next rows' tiles of its block follow (the caller writes them
 * next). Masked ymm stores cost tens of cycles on Zen 3 (a 64-channel weight gradient's input transform 2.4 -> 4.3%
 * of its samples with them). The tiles done: tx, or 0 for the scalar transform */
__attribute__((target("avx2"))) static int64_t wino_in8_row(float rows[4][WINO_ROW], int64_t tx, float *v, int64_t xs,
                                                            int room) {
  if (tx < 8) {
    if (!room) return 0;
    wino_in8(rows, 0, v, xs);
    return tx;
  }
  for (int64_t t = 0; t < tx; t += 8) {
    int64_t t0 = t + 8 <= tx ? t : tx - 8;
    wino_in8(rows, t0, v + t0, xs);
  }
  return tx;
}

#endif

/* V[xi][c][b T + t] = (B^T d B)[xi] for every tile t of the job's images b, channels [c0, c1) */
static void wino_input(void *ctx, int64_t c0, int64_t c1) {
  const wino_job *j = ctx;
  int64_t T = j->g.t, xs = j->k->p->c * j->cols; /* floats from one xi's matrix to the next */
#if PRIMC_X86
  int vec = cv_use_avx512(), v8 = primc_sgemm_isa() == PRIMC_ISA_AVX2;
#endif
  float rows[4][WINO_ROW];
  for (int64_t c = c0; c < c1; c++)
    for (int64_t r = 0; r < j->nb * j->g.ty; r++) { /* tile row r % ty of image r / ty */
      int64_t b = r / j->g.ty, ty = r % j->g.ty;
      wino_rows(j, cv_image_x(j->k, j->n0 + b), c, ty, rows);
      float *v = j->v + c * j->cols + b * T + ty * j->g.tx;
      int64_t tx = 0;
#if PRIMC_X86
      for (; vec && tx < j->g.tx; tx += 16) wino_in16(rows, tx, v + tx, xs, primc_low_mask16(j->g.tx - tx));
      if (v8) tx = wino_in8_row(rows, j->g.tx, v, xs, r * j->g.tx + 8 <= j->cols); /* the channel's block */
#endif
      for (; tx < j->g.tx; tx++) {
        float t[16];
        wino_in_tile(rows, tx, t);
        for (int xi = 0; xi < 16; xi++) v[xi * xs + tx] = t[xi];
      }
    }
}

/* M_xi = U_xi V_xi, one GEMM per xi on its thread */
static void wino_gemms(void *ctx, int64_t x0, int64_t x1) {
  wino_job *j = ctx;
  const primc_conv2d *p = j->k->p;
  int64_t O = p->o, C = p->c, T = j->cols;
  for (int64_t xi = x0; xi < x1; xi++) {
    primc_gemm g = {.M = O, .N = T, .K = C, .a = (const float *)j->k->w + xi * O * C, .lda = C,
                    .a_packed_mr = p->w_packed_mr, .b = j->v + xi * C * T, .ldb = T, .c = j->m + xi * O * T, .ldc = T};
    if (primc_sgemm_run(&g) != PRIMC_OK) __atomic_store_n(&j->status, PRIMC_ERR_RUNTIME, __ATOMIC_RELAXED);
  }
}

/* the 2x2 outputs A^T m A of 16 tiles [tx0, tx0 + 16), interleaved into two output rows */
#if PRIMC_X86
__attribute__((target("avx512f"))) static void wino_out16(const float *mt, int64_t xs, __mmask16 msk, float *row0,
                                                          float *row1) {
  const __m512i lo = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  const __m512i hi = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
  __m512 m[4][4], s[2][4];
  for (int xi = 0; xi < 16; xi++) m[xi / 4][xi % 4] = _mm512_maskz_loadu_ps(msk, mt + xi * xs);
  for (int k = 0; k < 4; k++) {
    s[0][k] = _mm512_add_ps(_mm512_add_ps(m[0][k], m[1][k]), m[2][k]);
    s[1][k] = _mm512_sub_ps(_mm512_sub_ps(m[1][k], m[2][k]), m[3][k]);
  }
  float *out[2] = {row0, row1};
  for (int i = 0; i < 2; i++) {
    __m512 y0 = _mm512_add_ps(_mm512_add_ps(s[i][0], s[i][1]), s[i][2]);
    __m512 y1 = _mm512_sub_ps(_mm512_sub_ps(s[i][1], s[i][2]), s[i][3]);
    _mm512_storeu_ps(out[i], _mm512_permutex2var_ps(y0, lo, y1));
    _mm512_storeu_ps(out[i] + 16, _mm512_permutex2var_ps(y0, hi, y1));
  }
}

/* wino_out16 on ymm for tiles [0, n) of mt (8 stored, those past n from zeros) */
__attribute__((target("avx2"))) static void wino_out8(const float *mt, int64_t xs, int64_t n, float *row0, float *row1) {
  __m256 m[4][4], s[2][4];
  __m256i lm = primc_low_mask8(n);
  for (int xi = 0; xi < 16; xi++)
    m[xi / 4][xi % 4] = n >= 8 ? _mm256_loadu_ps(mt + xi * xs) : _mm256_maskload_ps(mt + xi * xs, lm);
  for (int k = 0; k < 4; k++) {
    s[0][k] = _mm256_add_ps(_mm256_add_ps(m[0][k], m[1][k]), m[2][k]);
    s[1][k] = _mm256_sub_ps(_mm256_sub_ps(m[1][k], m[2][k]), m[3][k]);
  }
  float *out[2] = {row0, row1};
  for (int i = 0; i < 2; i++) {
    __m256 y0 = _mm256_add_ps(_mm256_add_ps(s[i][0], s[i][1]), s[i][2]);
    __m256 y1 = _mm256_sub_ps(_mm256_sub_ps(s[i][1], s[i][2]), s[i][3]);
    __m256 lo = _mm256_unpacklo_ps(y0, y1), hi = _mm256_unpackhi_ps(y0, y1); /* tiles 0 1 4 5, 2 3 6 7 */
    _mm256_storeu_ps(out[i], _mm256_permute2f128_ps(lo, hi, 0x20));
    _mm256_storeu_ps(out[i] + 8, _mm256_permute2f128_ps(lo, hi, 0x31));
  }
}

#endif

/* y tiles of channels [o0, o1) of the job's images = A^T M A, then the epilogue on each output row */
static void wino_output(void *ctx, int64_t o0, int64_t o1) {
  const wino_job *j = ctx;
  int64_t xs = j->k->p->o * j->cols, oh = j->k->oh, ow = j->k->ow;
  int isa = primc_sgemm_isa();
  float out[2][2 * WINO_MAX_TX + 32];
  for (int64_t oi = o0 * j->nb; oi < o1 * j->nb; oi++) { /* channel oi / nb of image oi % nb */
    int64_t o = oi / j->nb, im = oi % j->nb;
    epi_ctx ec = cv_image_epi(j->k, j->n0 + im);
    const epi_ctx *e = &ec;
    float b = cv_bias_at(e, o), s = cv_scale_at(e, o);
    for (int64_t ty = 0; ty < j->g.ty; ty++) {
      const float *mt = j->m + o * j->cols + im * j->g.t + ty * j->g.tx;
      int64_t tx = 0;
#if PRIMC_X86
      for (; isa == PRIMC_ISA_AVX512 && tx < j->g.tx; tx += 16)
        wino_out16(mt + tx, xs, primc_low_mask16(j->g.tx - tx), out[0] + 2 * tx, out[1] + 2 * tx);
      /* a row's last 8 overlapping the 8 before; rows of fewer than 8 tiles loaded masked (out has the room) */
      for (; isa == PRIMC_ISA_AVX2 && tx < j->g.tx; tx += 8) {
        int64_t t0 = tx + 8 <= j->g.tx || j->g.tx < 8 ? tx : j->g.tx - 8;
        wino_out8(mt + t0, xs, j->g.tx - t0, out[0] + 2 * t0, out[1] + 2 * t0);
      }
#endif
      for (; tx < j->g.tx; tx++) {
        float m[4][4], s2[2][4];
        for (int xi = 0; xi < 16; xi++) m[xi / 4][xi % 4] = mt[xi * xs + tx];
        for (int k = 0; k < 4; k++) s2[0][k] = m[0][k] + m[1][k] + m[2][k], s2[1][k] = m[1][k] - m[2][k] - m[3][k];
        for (int i = 0; i < 2; i++) {
          out[i][2 * tx] = s2[i][0] + s2[i][1] + s2[i][2];
          out[i][2 * tx + 1] = s2[i][1] - s2[i][2] - s2[i][3];
        }
      }
      for (int i = 0; i < 2 && 2 * ty + i < oh; i++) {
        int64_t off = (o * oh + 2 * ty + i) * ow;
        const float *res = e->res ? e->res + off : NULL;
        cv_epi_row(isa, e, e->y + off, out[i], res, b, s, ow);
      }
    }
  }
}

/* images [n0, n0 + nb) */
static int wino_conv(const cv_call *k, int64_t n0, int64_t nb) {
  const primc_conv2d *p = k->p;
  wino_job j = {k, wino_geometry(k->oh, k->ow), n0, nb, 0, k->col, NULL, PRIMC_OK};
  j.cols = nb * j.g.t;
  j.m = k->col + 16 * p->c * j.cols;
  primc_parallel_for(p->c, wino_input, &j);
  primc_parallel_for(16, wino_gemms, &j);
  if (j.status != PRIMC_OK) return j.status;
  primc_parallel_for(p->o, wino_output, &j);
  return PRIMC_OK;
}

/* ---------------------------------------------------------------- the row */

int primc_cv_wino_fits(const primc_conv2d *p, const primc_conv2d *next) {
  int64_t oh, ow;
  return p->w_winograd && p->w_packed_mr > 0 && !p->w_packed_panels && !p->w_lanes && !p->w_bf16 &&
         primc_conv2d_out_hw(p, &oh, &ow) &&
         wino_shape(p, oh, ow);
}

int64_t primc_cv_wino_round_tiles(const primc_conv2d *p, int64_t oh, int64_t ow) {
  return wino_geometry(oh, ow).t * wino_images(p, oh, ow);
}

int64_t primc_cv_wino_scratch(const primc_conv2d *p) {
  int64_t oh, ow;
  primc_conv2d_out_hw(p, &oh, &ow);
  return wino_floats(p, oh, ow);
}

/* each round of images writes y in its last step, after reading those images whole */
int primc_cv_wino_run(const cv_call *k) {
  int64_t nb = wino_images(k->p, k->oh, k->ow);
  for (int64_t n = 0; n < k->p->n; n += nb) {
    int st = wino_conv(k, n, nb < k->p->n - n ? nb : k->p->n - n);
    if (st != PRIMC_OK) return st;
  }
  return PRIMC_OK;
}

/* ---------------------------------------------------------------- weight gradients */

/*
 * A stride-1 3x3 conv's weight gradient dW[o][c][r][s] = sum over images and output pixels p of dy[o][p]
 * x[c][p + (r, s)] is the forward tile transposed: the forward y = A^T [(G g G^T) . (B^T d B)] A is linear in
 * g, so each 2x2 tile of dy and the 4x4 patch d under it add G^T [(A dy A^T) . (B^T d B)] G to g. Over all tiles
 * that is 16 GEMMs P_xi[o][c] = sum_t Dy_xi[o][t] X_xi[c][t], the tiles as K (16 multiply-adds per tile and
 * channel pair where the columns' GEMM does 36), then G^T P G per (o, c). The tiles go in chunks whose two
 * transforms stay in L2 beside P; each chunk's GEMMs add to P.
 */
#define WG_CHUNK_BYTES (1 << 20) /* the chunk's transforms (16 (O + C) floats a tile), L2's half */
#define WG_MIN_TILES 128         /* below this each chunk's GEMMs would reload P for too little work */
#define WG_SKEW 16               /* floats past each xi's matrix: the 16 start a cache line apart */

typedef struct wg_geo {
  int64_t ty, tx, rows, chunk_rows; /* tiles down and across an image, tile rows of all images, of one chunk */
} wg_geo;

static wg_geo wg_geometry(int64_t M, int64_t C, int64_t images, int64_t oh, int64_t ow) {
  wino_geo t = wino_geometry(oh, ow);
  wg_geo g = {t.ty, t.tx, images * t.ty, 1};
  int64_t tiles = WG_CHUNK_BYTES / (64 * (M + C));
  if (tiles < WG_MIN_TILES) tiles = WG_MIN_TILES;
  g.chunk_rows = cdiv(tiles, g.tx);
  if (g.chunk_rows > g.rows) g.chunk_rows = g.rows;
  return g;
}

int64_t primc_wgrad_wino_floats(int64_t M, int64_t C, int64_t images, int64_t oh, int64_t ow) {
  wg_geo g = wg_geometry(M, C, images, oh, ow);
  int64_t tc = g.chunk_rows * g.tx;
  return 16 * (tc * (M + C) + M * C + 3 * WG_SKEW);
}

/* From 64 channels each side, P's 16 M C floats within WG_MAX_P; against the columns' GEMM (batch 8, `/tmp` harness
 * over primc_k_dot_cols, AMX Xeon, 1 / 2 threads): 64 x 64 at 56x56 0.67 / 0.78, 256 x 256 at 14x14 0.63 / 0.63;
 * 32 x 32 at 32x32 1.25 / 1.45, 48 x 48 0.91 / 1.02. 512 x 512 at 7x7 (16 MB of P, G^T P G reading it back from
 * L3) 0.96-1.04 at 1 thread; its GEMMs by blocks of P's columns, each block's G^T P G while it was in L2, 1.3-1.5
 * (each block streamed all of Dy through L2, evicting its P). */
#define WG_MAX_P (4 << 20)
int primc_wgrad_wino_fits(int64_t M, int64_t C, int64_t images, int64_t oh, int64_t ow) {
  return M >= 64 && C >= 64 && images >= 1 && oh >= 2 && ow >= 2 && wino_geometry(oh, ow).tx <= WINO_MAX_TX &&
         16 * M * C * (int64_t)sizeof(float) <= WG_MAX_P;
}

typedef struct wg_job {
  const primc_wgrad *w;
  wg_geo g;
  int64_t r0, nr, tc; /* the chunk: tile rows [r0, r0 + nr), tc = nr tx tiles */
  float *xt, *dt, *p; /* X [16][C][tc], Dy [16][M][tc], P [16][M][C] */
  int64_t sx, sd, sp; /* floats from one xi's X, Dy, P to the next: a multiple of 4 KB apart, 16 of them share an L1 set */
  int first, status;
} wg_job;

/* rows 2 ty .. 2 ty + 3 of channel c's window grid (rows [0, oh + 2), columns [0, ow + 2)), x where the grid holds
 * it, zero elsewhere */
static void wg_x_rows(const primc_wgrad *w, int64_t c, int64_t n, int64_t ty, int64_t tx, float rows[4][WINO_ROW]) {
  int64_t width = 2 * tx + 2 + 32, c0 = w->x_clo > 0 ? w->x_clo : 0, c1 = w->ow + 2 < width ? w->ow + 2 : width;
  if (w->x_chi < c1) c1 = w->x_chi;
  for (int i = 0; i < 4; i++) {
    int64_t r = 2 * ty + i;
    if (r >= w->oh + 2 || r < w->x_rlo || r >= w->x_rhi || c1 <= c0) {
      memset(rows[i], 0, (size_t)width * sizeof(float));
      continue;
    }
    const float *s = w->x + (w->x_off + c * w->xs_c + n * w->xs_n + r * w->xs_h + c0 * w->xs_w);
    memset(rows[i], 0, (size_t)c0 * sizeof(float));
    if (w->xs_w == 1)
      memcpy(rows[i] + c0, s, (size_t)(c1 - c0) * sizeof(float));
    else
      for (int64_t k = 0; k < c1 - c0; k++) rows[i][c0 + k] = s[k * w->xs_w];
    memset(rows[i] + c1, 0, (size_t)(width - c1) * sizeof(float));
  }
}

/* X's rows of channels [c0, c1) for the chunk's tiles */
static void wg_input(void *ctx, int64_t c0, int64_t c1) {
  const wg_job *j = ctx;
  int64_t tx = j->g.tx, xs = j->sx;
#if PRIMC_X86
  int vec = cv_use_avx512(), v8 = primc_sgemm_isa() == PRIMC_ISA_AVX2;
#endif
  float rows[4][WINO_ROW];
  for (int64_t c = c0; c < c1; c++)
    for (int64_t r = 0; r < j->nr; r++) {
      int64_t n = (j->r0 + r) / j->g.ty, ty = (j->r0 + r) % j->g.ty, t = 0;
      wg_x_rows(j->w, c, n, ty, tx, rows);
      float *v = j->xt + c * j->tc + r * tx;
#if PRIMC_X86
      for (; vec && t < tx; t += 16) wino_in16(rows, t, v + t, xs, primc_low_mask16(tx - t));
      if (v8) t = wino_in8_row(rows, tx, v, xs, r * tx + 8 <= j->tc); /* the channel's chunk */
#endif
      for (; t < tx; t++) {
        float u[16];
        wino_in_tile(rows, t, u);
        for (int xi = 0; xi < 16; xi++) v[xi * xs + t] = u[xi];
      }
    }
}

/* dy's output rows 2 ty, 2 ty + 1 of channel o of image n (NULL past oh) */
static void wg_dy_src(const wg_job *j, int64_t o, int64_t r, const float *src[2]) {
  const primc_wgrad *w = j->w;
  int64_t n = (j->r0 + r) / j->g.ty, ty = (j->r0 + r) % j->g.ty;
  for (int i = 0; i < 2; i++)
    src[i] = 2 * ty + i < w->oh ? w->a + w->a_off + o * w->a_sm + n * w->a_sn + (2 * ty + i) * w->a_sh : NULL;
}

#if PRIMC_X86
/* one tile row's Dy on zmm, 16 tiles at a time: each dy row's 32 columns split into even and odd ones by permutes
 * (dy's columns contiguous) */
__attribute__((target("avx512f"))) static void wg_dy_row512(const float *src[2], int64_t ow, int64_t tx, float *v,
                                                             int64_t xs) {
  for (int64_t t = 0; t < tx; t += 16) {
    __m512 d[2][2], s[4][2];
    for (int i = 0; i < 2; i++) {
      __m512 lo = _mm512_setzero_ps(), hi = _mm512_setzero_ps();
      if (src[i]) {
        int64_t left = ow - 2 * t;
        lo = _mm512_maskz_loadu_ps(primc_low_mask16(left), src[i] + 2 * t);
        hi = _mm512_maskz_loadu_ps(primc_low_mask16(left - 16), src[i] + 2 * t + 16);
      }
      d[i][0] = primc_even16(lo, hi), d[i][1] = primc_odd16(lo, hi);
    }
    for (int b = 0; b < 2; b++) {
      s[0][b] = d[0][b], s[1][b] = _mm512_add_ps(d[0][b], d[1][b]);
      s[2][b] = _mm512_sub_ps(d[0][b], d[1][b]), s[3][b] = _mm512_sub_ps(_mm512_setzero_ps(), d[1][b]);
    }
    __mmask16 m = primc_low_mask16(tx - t);
    for (int i = 0; i < 4; i++) {
      float *o = v + i * 4 * xs + t;
      _mm512_mask_storeu_ps(o, m, s[i][0]);
      _mm512_mask_storeu_ps(o + xs, m, _mm512_add_ps(s[i][0], s[i][1]));
      _mm512_mask_storeu_ps(o + 2 * xs, m, _mm512_sub_ps(s[i][0], s[i][1]));
      _mm512_mask_storeu_ps(o + 3 * xs, m, _mm512_sub_ps(_mm512_setzero_ps(), s[i][1]));
    }
  }
}
/* wg_dy_row512 on ymm, 8 tiles at a time, the last 8 overlapping as in wino_in8; under 8 tiles, 8 stored, the
 * caller's next row written after (the scalar row was a quarter of a 64-channel call on Zen 3) */
__attribute__((target("avx2"))) static void wg_dy_row256(const float *src[2], int64_t ow, int64_t tx, float *v,
                                                          int64_t xs) {
  for (int64_t t8 = 0; t8 < tx; t8 += 8) {
    int64_t t = t8 + 8 <= tx || tx < 8 ? t8 : tx - 8;
    __m256 d[2][2], s[4][2];
    for (int i = 0; i < 2; i++) {
      __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
      if (src[i]) {
        int64_t left = ow - 2 * t;
        lo = _mm256_maskload_ps(src[i] + 2 * t, primc_low_mask8(left));
        hi = _mm256_maskload_ps(src[i] + 2 * t + 8, primc_low_mask8(left - 8));
      }
      d[i][0] = primc_even8(lo, hi), d[i][1] = primc_odd8(lo, hi);
    }
    for (int b = 0; b < 2; b++) {
      s[0][b] = d[0][b], s[1][b] = _mm256_add_ps(d[0][b], d[1][b]);
      s[2][b] = _mm256_sub_ps(d[0][b], d[1][b]), s[3][b] = _mm256_sub_ps(_mm256_setzero_ps(), d[1][b]);
    }
    for (int i = 0; i < 4; i++) {
      float *o = v + i * 4 * xs + t;
      _mm256_storeu_ps(o, s[i][0]);
      _mm256_storeu_ps(o + xs, _mm256_add_ps(s[i][0], s[i][1]));
      _mm256_storeu_ps(o + 2 * xs, _mm256_sub_ps(s[i][0], s[i][1]));
      _mm256_storeu_ps(o + 3 * xs, _mm256_sub_ps(_mm256_setzero_ps(), s[i][1]));
    }
  }
}
#endif

/* one tile row's Dy, a tile at a time: A dy A^T with A = [1 0; 1 1; 1 -1; 0 -1] */
static void wg_dy_row(const float *src[2], int64_t ow, int64_t sw, int64_t tx, float *v, int64_t xs) {
  for (int64_t t = 0; t < tx; t++) {
    float d[2][2], s[4][2];
    for (int i = 0; i < 2; i++)
      for (int b = 0; b < 2; b++) d[i][b] = src[i] && 2 * t + b < ow ? src[i][(2 * t + b) * sw] : 0.0f;
    for (int b = 0; b < 2; b++) s[0][b] = d[0][b], s[1][b] = d[0][b] + d[1][b], s[2][b] = d[0][b] - d[1][b], s[3][b] = -d[1][b];
    for (int i = 0; i < 4; i++) {
      float *o = v + i * 4 * xs + t;
      o[0] = s[i][0], o[xs] = s[i][0] + s[i][1], o[2 * xs] = s[i][0] - s[i][1], o[3 * xs] = -s[i][1];
    }
  }
}

/* Dy's rows of output channels [o0, o1) for the chunk's tiles */
static void wg_dy(void *ctx, int64_t o0, int64_t o1) {
  const wg_job *j = ctx;
  const primc_wgrad *w = j->w;
  int64_t tx = j->g.tx, xs = j->sd;
#if PRIMC_X86
  int vec = cv_use_avx512() && w->a_sw == 1, v8 = primc_sgemm_isa() == PRIMC_ISA_AVX2 && w->a_sw == 1;
#endif
  for (int64_t o = o0; o < o1; o++)
    for (int64_t r = 0; r < j->nr; r++) {
      const float *src[2];
      wg_dy_src(j, o, r, src);
      float *v = j->dt + o * j->tc + r * tx;
#if PRIMC_X86
      if (vec || (v8 && (tx >= 8 || r * tx + 8 <= j->tc))) {
        (vec ? wg_dy_row512 : wg_dy_row256)(src, w->ow, tx, v, xs);
        continue;
      }
#endif
      wg_dy_row(src, w->ow, w->a_sw, tx, v, xs);
    }
}

/* P_xi (+)= Dy_xi X_xi^T, one GEMM per xi on its thread */
static void wg_gemms(void *ctx, int64_t x0, int64_t x1) {
  wg_job *j = ctx;
  int64_t M = j->w->M, C = j->w->C, T = j->tc;
  for (int64_t xi = x0; xi < x1; xi++)
    if (primc_sgemm(0, 1, M, C, T, 1.0f, j->dt + xi * j->sd, T, j->xt + xi * j->sx, T, j->first ? 0.0f : 1.0f,
                    j->p + xi * j->sp, C) != PRIMC_OK)
      __atomic_store_n(&j->status, PRIMC_ERR_RUNTIME, __ATOMIC_RELAXED);
}

/* g = G^T m G with G = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1], m[xi] = P_xi[o][c] */
#define WG_OUT(T, m, g)                                                                                              \
  do {                                                                                                               \
    T t_[3][4];                                                                                                      \
    for (int k = 0; k < 4; k++) {                                                                                    \
      T h = 0.5f * (m[4 + k] + m[8 + k]);                                                                            \
      t_[0][k] = m[k] + h, t_[1][k] = 0.5f * (m[4 + k] - m[8 + k]), t_[2][k] = h + m[12 + k];                        \
    }                                                                                                                \
    for (int r = 0; r < 3; r++) {                                                                                    \
      T h = 0.5f * (t_[r][1] + t_[r][2]);                                                                            \
      g[3 * r] = t_[r][0] + h, g[3 * r + 1] = 0.5f * (t_[r][1] - t_[r][2]), g[3 * r + 2] = h + t_[r][3];             \
    }                                                                                                                \
  } while (0)

/* dW[o][c] = G^T P G for output channels [o0, o1) */
#if PRIMC_X86
/* 16 input channels at a time; their 9 taps each, 144 floats in a row, gathered from the 9 tap vectors: out[16 v +
 * l] is tap (16 v + l) % 9 of channel (16 v + l) / 9, at float (16 v + l) % 9 16 + (16 v + l) / 9 of them */
typedef float wg_v16 __attribute__((vector_size(64)));
__attribute__((target("avx512f"))) static void wg_output512(const wg_job *j, int64_t o0, int64_t o1) {
  int64_t C = j->w->C;
  __m512i idx[9];
  for (int v = 0; v < 9; v++) {
    __m512i at = _mm512_add_epi32(_mm512_set1_epi32(16 * v), _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0));
    __m512i ch = _mm512_srli_epi32(_mm512_mullo_epi32(at, _mm512_set1_epi32(57)), 9); /* at / 9 for at < 144 */
    idx[v] = _mm512_add_epi32(_mm512_mullo_epi32(_mm512_sub_epi32(at, _mm512_mullo_epi32(ch, _mm512_set1_epi32(9))),
                                                 _mm512_set1_epi32(16)), ch);
  }
  for (int64_t o = o0; o < o1; o++)
    for (int64_t c0 = 0; c0 < C; c0 += 16) {
      int64_t n = C - c0 < 16 ? C - c0 : 16;
      __mmask16 msk = primc_low_mask16(n);
      wg_v16 m[16], g[9];
      for (int xi = 0; xi < 16; xi++) m[xi] = (wg_v16)_mm512_maskz_loadu_ps(msk, j->p + xi * j->sp + o * C + c0);
      WG_OUT(wg_v16, m, g);
      float *out = j->w->out + (o * C + c0) * 9;
      for (int v = 0; v < 9; v++) {
        __mmask16 keep = primc_low_mask16(9 * n - 16 * v);
        _mm512_mask_storeu_ps(out + 16 * v, keep, _mm512_mask_i32gather_ps(_mm512_setzero_ps(), keep, idx[v], (const float *)g, 4));
      }
    }
}
#endif

static void wg_output(void *ctx, int64_t o0, int64_t o1) {
  const wg_job *j = ctx;
  int64_t C = j->w->C;
#if PRIMC_X86
  if (cv_use_avx512()) {
    wg_output512(j, o0, o1);
    return;
  }
#endif
  for (int64_t o = o0; o < o1; o++)
    for (int64_t c = 0; c < C; c++) {
      float m[16], *g = j->w->out + (o * C + c) * 9;
      for (int xi = 0; xi < 16; xi++) m[xi] = j->p[xi * j->sp + o * C + c];
      WG_OUT(float, m, g);
    }
}

int primc_wgrad_wino_run(const primc_wgrad *w) {
  if (!primc_wgrad_wino_fits(w->M, w->C, w->images, w->oh, w->ow)) return PRIMC_ERR_RUNTIME;
  wg_job j = {w, wg_geometry(w->M, w->C, w->images, w->oh, w->ow), 0, 0, 0, NULL, NULL, NULL, 0, 0, 0, 1, PRIMC_OK};
  int64_t chunk = j.g.chunk_rows * j.g.tx;
  j.sx = w->C * chunk + WG_SKEW, j.sd = w->M * chunk + WG_SKEW, j.sp = w->M * w->C + WG_SKEW;
  j.xt = w->scratch, j.dt = j.xt + 16 * j.sx, j.p = j.dt + 16 * j.sd;
  for (j.r0 = 0; j.r0 < j.g.rows; j.r0 += j.nr, j.first = 0) {
    j.nr = j.g.rows - j.r0 < j.g.chunk_rows ? j.g.rows - j.r0 : j.g.chunk_rows;
    j.tc = j.nr * j.g.tx;
    primc_parallel_for(w->C, wg_input, &j);
    primc_parallel_for(w->M, wg_dy, &j);
    primc_parallel_for(16, wg_gemms, &j);
    if (j.status != PRIMC_OK) return j.status;
  }
  primc_parallel_for(w->M, wg_output, &j);
  return PRIMC_OK;
}
