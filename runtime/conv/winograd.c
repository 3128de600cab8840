/* runtime/conv/winograd.c: the Winograd F(2x2, 3x3) row: 3x3 stride-1 convs as 16 GEMMs on transformed tiles. */
#include "runtime/conv/conv.h"

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
 * enough to run near peak: the planner (plan.c) sets how big.
 */
#define WINO_MAX_TX 512 /* tiles across: the transforms' row buffers are on the stack */

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

static int64_t wino_floats(const primc_conv2d *p, int64_t oh, int64_t ow) {
  return 16 * (p->c + p->o) * wino_geometry(oh, ow).t;
}

/* u = G g G^T for one 3x3 kernel g (row-major), into u[16] */
static void wino_kernel(const float *g, float *u) {
  float t[4][3];
  for (int j = 0; j < 3; j++) {
    float a = g[j], b = g[3 + j], c = g[6 + j];
    t[0][j] = a, t[1][j] = 0.5f * (a + b + c), t[2][j] = 0.5f * (a - b + c), t[3][j] = c;
  }
  for (int i = 0; i < 4; i++) {
    float a = t[i][0], b = t[i][1], c = t[i][2];
    u[i * 4 + 0] = a, u[i * 4 + 1] = 0.5f * (a + b + c), u[i * 4 + 2] = 0.5f * (a - b + c), u[i * 4 + 3] = c;
  }
}

size_t primc_conv2d_winograd_bytes(const primc_conv2d *p) { return (size_t)(16 * p->o * p->c) * sizeof(float); }

int primc_conv2d_pack_winograd(const primc_conv2d *p, const float *w, int mr, float *dst) {
  int64_t oh, ow;
  if (!p || !w || !dst || !primc_cv_valid(p) || !primc_conv2d_out_hw(p, &oh, &ow) || !wino_shape(p, oh, ow) || mr < 1) return PRIMC_ERR_ARG;
  int64_t O = p->o, C = p->c;
  float *u = malloc(sizeof(float) * (size_t)(16 * O * C));
  if (!u) return PRIMC_ERR_RUNTIME;
  float t[16];
  for (int64_t o = 0; o < O; o++)
    for (int64_t c = 0; c < C; c++) {
      wino_kernel(w + (o * C + c) * 9, t);
      for (int xi = 0; xi < 16; xi++) u[(xi * O + o) * C + c] = t[xi];
    }
  int st = PRIMC_OK;
  for (int xi = 0; xi < 16 && st == PRIMC_OK; xi++) st = primc_sgemm_pack_a(O, C, u + xi * O * C, C, mr, dst + xi * O * C);
  free(u);
  return st;
}

typedef struct wino_job {
  const primc_conv2d *p;
  wino_geo g;
  int64_t oh, ow;
  const float *x, *w;
  float *v, *m; /* [16][C][T], [16][O][T] */
  const epi_ctx *e;
  int status;
} wino_job;

/* the 4 input rows of tile row ty of channel c, from column -pad_l on, zero outside x; ROW_PAD floats of
 * zeros after the 2 TX + 2 the tiles read, so 16-tile vector loads stay inside */
#define WINO_ROW (2 * WINO_MAX_TX + 2 + 32)
static void wino_rows(const wino_job *j, int64_t c, int64_t ty, float rows[4][WINO_ROW]) {
  const primc_conv2d *p = j->p;
  int64_t width = 2 * j->g.tx + 2 + 32;
  for (int i = 0; i < 4; i++) {
    int64_t ih = 2 * ty - p->pad_t + i;
    memset(rows[i], 0, (size_t)width * sizeof(float));
    if (ih < 0 || ih >= p->h) continue;
    int64_t n = p->w < width - p->pad_l ? p->w : width - p->pad_l;
    if (n > 0) memcpy(rows[i] + p->pad_l, j->x + (c * p->h + ih) * p->w, (size_t)n * sizeof(float));
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

/* V[xi][c][t] = (B^T d B)[xi] for every tile t of channels [c0, c1) */
static void wino_input(void *ctx, int64_t c0, int64_t c1) {
  const wino_job *j = ctx;
  int64_t T = j->g.t, xs = j->p->c * T; /* floats from one xi's matrix to the next */
#if PRIMC_X86
  int vec = cv_use_avx512(), v8 = primc_sgemm_isa() == PRIMC_ISA_AVX2;
#endif
  float rows[4][WINO_ROW];
  for (int64_t c = c0; c < c1; c++)
    for (int64_t ty = 0; ty < j->g.ty; ty++) {
      wino_rows(j, c, ty, rows);
      float *v = j->v + c * T + ty * j->g.tx;
      int64_t tx = 0;
#if PRIMC_X86
      for (; vec && tx < j->g.tx; tx += 16) wino_in16(rows, tx, v + tx, xs, cv_low_mask(j->g.tx - tx));
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
  int64_t O = j->p->o, C = j->p->c, T = j->g.t;
  for (int64_t xi = x0; xi < x1; xi++) {
    primc_gemm g = {.M = O, .N = T, .K = C, .a = j->w + xi * O * C, .lda = C, .a_packed_mr = j->p->w_packed_mr,
                    .b = j->v + xi * C * T, .ldb = T, .c = j->m + xi * O * T, .ldc = T};
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

/* y tiles of channels [o0, o1) = A^T M A, then the epilogue on each output row */
static void wino_output(void *ctx, int64_t o0, int64_t o1) {
  const wino_job *j = ctx;
  const epi_ctx *e = j->e;
  int64_t T = j->g.t, xs = j->p->o * T, ow = j->ow;
  int isa = primc_sgemm_isa();
  float out[2][2 * WINO_MAX_TX + 32];
  for (int64_t o = o0; o < o1; o++) {
    float b = e->bias ? e->bias[o * e->bias_stride] : 0.0f;
    for (int64_t ty = 0; ty < j->g.ty; ty++) {
      const float *mt = j->m + o * T + ty * j->g.tx;
      int64_t tx = 0;
#if PRIMC_X86
      for (; isa == PRIMC_ISA_AVX512 && tx < j->g.tx; tx += 16)
        wino_out16(mt + tx, xs, cv_low_mask(j->g.tx - tx), out[0] + 2 * tx, out[1] + 2 * tx);
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
      for (int i = 0; i < 2 && 2 * ty + i < j->oh; i++) {
        int64_t off = (o * j->oh + 2 * ty + i) * ow;
        const float *res = e->res ? e->res + off : NULL;
        cv_epi_row(isa, e, e->y + off, out[i], res, b, ow);
      }
    }
  }
}

/* one image: x, y and the residual at the image's start */
static int wino_conv(const primc_conv2d *p, int64_t oh, int64_t ow, const float *x, const float *w, const epi_ctx *c,
                     float *col) {
  wino_job j = {p, wino_geometry(oh, ow), oh, ow, x, w, col, NULL, c, PRIMC_OK};
  j.m = col + 16 * p->c * j.g.t;
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

int64_t primc_cv_wino_scratch(const primc_conv2d *p) {
  int64_t oh, ow;
  primc_conv2d_out_hw(p, &oh, &ow);
  return wino_floats(p, oh, ow);
}

/* writes y in its last step, after reading the whole image */
int primc_cv_wino_run(const cv_call *k) {
  for (int64_t n = 0; n < k->p->n; n++) {
    epi_ctx c = cv_image_epi(k, n);
    int st = wino_conv(k->p, k->oh, k->ow, cv_image_x(k, n), k->w, &c, k->col);
    if (st != PRIMC_OK) return st;
  }
  return PRIMC_OK;
}
