/* tests/unit/test_wgrad.c: primc_k_dot_cols's two rows for a 3x3 weight gradient, the columns' GEMM and Winograd
 * F(2x2, 3x3) (runtime/conv/winograd.c), against the sum dW[o][c][r][s] = sum gy[o][n][h][w] xp[c][n][h s + r d]
 * [w s + s' d] in double, under every ISA this CPU runs (the transforms' AVX-512 and AVX2 paths and the scalar
 * ones): odd and even maps, a gradient read in place or stored as [M, K], stride = dilation 2, several chunks, an
 * unpadded input read where it lies (its pad only in the rows and columns the call zeroes). */
#include "runtime/primc_rt.h"
#include "tests/test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct wg_case {
  int64_t M, C, N, H, W, step; /* step: the conv's stride and dilation */
  int in_place;                /* gy [N, M, H, W] read in place (a_mode 1), else stored [M, N H W] */
  int unpadded;                /* x [N, C, H, W] read where it lies, the pad of 1 zeros outside it (step 1) */
} wg_case;

static float rnd(uint64_t *s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return (float)((*s >> 40) & 0xffff) / 32768.0f - 1.0f;
}

static void run_case(const wg_case *c, int isa) {
  int64_t M = c->M, C = c->C, N = c->N, H = c->H, W = c->W, d = c->step;
  int64_t Hp = (H - 1) * d + 2 * d + 1, Wp = (W - 1) * d + 2 * d + 1, K = N * H * W; /* the taps' grid */
  float *xp = malloc(sizeof(float) * (size_t)(C * N * Hp * Wp)), *gy = malloc(sizeof(float) * (size_t)(M * K));
  float *out[2] = {malloc(sizeof(float) * (size_t)(M * C * 9)), malloc(sizeof(float) * (size_t)(M * C * 9))};
  double *ref = calloc((size_t)(M * C * 9), sizeof(double));
  uint64_t s = 7;
  for (int64_t i = 0; i < C * N * Hp * Wp; i++) xp[i] = rnd(&s);
  float *x = NULL; /* with unpadded: x [N, C, H, W] and xp its copy padded by 1 */
  if (c->unpadded) {
    x = malloc(sizeof(float) * (size_t)(N * C * H * W));
    for (int64_t i = 0; i < C * N * Hp * Wp; i++) {
      int64_t col = i % Wp, row = i / Wp % Hp, n = i / (Wp * Hp) % N, ch = i / (Wp * Hp * N);
      if (row < 1 || row > H || col < 1 || col > W) xp[i] = 0;
      else x[((n * C + ch) * H + row - 1) * W + col - 1] = xp[i];
    }
  }
  for (int64_t i = 0; i < M * K; i++) gy[i] = rnd(&s);
  /* gy(m, n, h, w): in place [N, M, H, W], else [M, N H W] */
  int64_t a_sm = c->in_place ? H * W : K, a_sn = c->in_place ? M * H * W : H * W;
  for (int64_t m = 0; m < M; m++)
    for (int64_t ch = 0; ch < C; ch++)
      for (int t = 0; t < 9; t++) {
        double acc = 0;
        for (int64_t n = 0; n < N; n++)
          for (int64_t h = 0; h < H; h++)
            for (int64_t w = 0; w < W; w++)
              acc += (double)gy[m * a_sm + n * a_sn + h * W + w] *
                     xp[((ch * N + n) * Hp + (h + t / 3) * d) * Wp + (w + t % 3) * d];
        ref[(m * C + ch) * 9 + t] = acc;
      }
  int64_t q[PRIMC_DOT_COLS_PARAMS] = {M, K, a_sm, 1, C, N * Hp * Wp, N, Hp * Wp, 2, H, W, 1, d * Wp, d, 0, 3, 3, 1,
                                      d * Wp, d, 0, 0};
  if (c->in_place) q[22] = 1, q[23] = a_sn, q[24] = W, q[25] = 1, q[27] = 0;
  q[29] = 0, q[30] = H + 2, q[31] = 0, q[32] = W + 2;
  if (c->unpadded) /* the grid's rows and columns 1 .. H, 1 .. W hold x, its origin one row and column before x's */
    q[5] = H * W, q[7] = C * H * W, q[12] = q[18] = W, q[21] = -(W + 1), q[29] = 1, q[30] = H + 1, q[31] = 1, q[32] = W + 1;
  size_t cols = sizeof(int64_t) * (size_t)(C * 9 + 2 * K), wino = sizeof(float) * (size_t)primc_wgrad_wino_floats(M, C, N, H, W);
  void *scratch = malloc(cols > wino ? cols : wino);
  for (int row = c->unpadded; row < 2; row++) { /* the columns' GEMM reads only a padded xp */
    q[28] = row;
    void *bufs[4] = {out[row], gy, c->unpadded ? x : xp, scratch};
    if (!CHECK_MSG(primc_k_dot_cols(q, bufs) == PRIMC_OK, "%lldx%lld at %lldx%lld, row %d, isa %d: status",
                   (long long)M, (long long)C, (long long)H, (long long)W, row, isa))
      continue;
    double top = 0, err = 0;
    for (int64_t i = 0; i < M * C * 9; i++) top = fmax(top, fabs(ref[i]));
    for (int64_t i = 0; i < M * C * 9; i++) err = fmax(err, fabs(out[row][i] - ref[i]));
    CHECK_MSG(top > 0 && err <= 1e-5 * top, "%lldx%lld at %lldx%lld (step %lld, in place %d), row %d, isa %d: off by %.3g of %.3g",
              (long long)M, (long long)C, (long long)H, (long long)W, (long long)d, c->in_place, row, isa, err, top);
  }
  free(xp), free(x), free(gy), free(out[0]), free(out[1]), free(ref), free(scratch);
}

PC_TEST(wgrad_winograd_rows) {
  static const wg_case cases[] = {
      {64, 64, 2, 9, 11, 1, 1, 0}, {65, 70, 1, 2, 2, 1, 0, 0}, {64, 66, 2, 10, 12, 2, 1, 0},
      {64, 64, 1, 40, 40, 1, 0, 0}, /* 400 tiles: chunks of 140 */
      {72, 64, 1, 6, 37, 1, 1, 0},
      {128, 160, 2, 7, 7, 1, 1, 0},
      {96, 80, 3, 5, 6, 1, 0, 0},
      {64, 64, 2, 9, 11, 1, 1, 1}, {64, 72, 1, 40, 40, 1, 0, 1}, {66, 64, 3, 7, 6, 1, 1, 1},
  };
  CHECK(primc_wgrad_wino_fits(64, 64, 1, 8, 8) && !primc_wgrad_wino_fits(32, 64, 1, 8, 8) &&
        !primc_wgrad_wino_fits(512, 512, 8, 7, 7));
  int best = primc_sgemm_isa();
  for (int isa = PRIMC_ISA_SCALAR; isa < PRIMC_ISA_COUNT; isa++) {
    if (!primc_isa_covers(best, isa) || primc_sgemm_force_isa(isa) != 0) continue;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) run_case(&cases[i], isa);
  }
  primc_sgemm_force_isa(PRIMC_ISA_AUTO);
}
