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

/* u = G g G^T for 8 3x3 kernels at once, g[k] holding tap k of each (a vector type, so that any target's
 * compiler emits its vector ops) */
typedef float wino_v8 __attribute__((vector_size(32)));
static void wino_kernels8(const wino_v8 g[9], wino_v8 u[16]) {
  wino_v8 t[4][3];
  for (int j = 0; j < 3; j++) {
    wino_v8 a = g[j], b = g[3 + j], c = g[6 + j];
    t[0][j] = a, t[1][j] = 0.5f * (a + b + c), t[2][j] = 0.5f * (a - b + c), t[3][j] = c;
  }
  for (int i = 0; i < 4; i++) {
    wino_v8 a = t[i][0], b = t[i][1], c = t[i][2];
    u[i * 4 + 0] = a, u[i * 4 + 1] = 0.5f * (a + b + c), u[i * 4 + 2] = 0.5f * (a - b + c), u[i * 4 + 3] = c;
  }
}

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

static void wino_pack_strips(void *ctx, int64_t s0, int64_t s1) {
  const wino_pack_job *j = ctx;
  int64_t O = j->O, C = j->C;
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
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  __m512 d[4][4], t[4][4];
  for (int i = 0; i < 4; i++) {
    const float *r = rows[i] + 2 * tx0;
    __m512 a = _mm512_loadu_ps(r), b = _mm512_loadu_ps(r + 16), a2 = _mm512_loadu_ps(r + 2), b2 = _mm512_loadu_ps(r + 18);
    d[i][0] = _mm512_permutex2var_ps(a, even, b), d[i][1] = _mm512_permutex2var_ps(a, odd, b);
    d[i][2] = _mm512_permutex2var_ps(a2, even, b2), d[i][3] = _mm512_permutex2var_ps(a2, odd, b2);
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
      for (; v8 && tx + 8 <= j->g.tx; tx += 8) wino_in8(rows, tx, v + tx, xs);
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

/* wino_out16 on ymm for 8 tiles */
__attribute__((target("avx2"))) static void wino_out8(const float *mt, int64_t xs, float *row0, float *row1) {
  __m256 m[4][4], s[2][4];
  for (int xi = 0; xi < 16; xi++) m[xi / 4][xi % 4] = _mm256_loadu_ps(mt + xi * xs);
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
      for (; isa == PRIMC_ISA_AVX2 && tx + 8 <= j->g.tx; tx += 8) wino_out8(mt + tx, xs, out[0] + 2 * tx, out[1] + 2 * tx);
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
