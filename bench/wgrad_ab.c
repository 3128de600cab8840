/* bench/wgrad_ab.c: a 3x3 stride-1 conv's weight gradient by primc_k_dot_cols's two rows, the GEMM over the
 * columns (packed from the padded input) and Winograd F(2x2, 3x3) (reading the unpadded input where it lies, as a
 * training step's call does), alternated call by call in one process: the least and the median time of each and
 * the ratio of the medians (for tuning pc_columns_winograd on machines whose speed moves between minutes).
 *
 * Usage: wgrad_ab [--batch N] M C H W [REPS]
 *   M output channels, C input channels, an H x W map padded 1 each side, gy read in place [N, M, H, W]; N images
 *   (default 8, as the training benchmarks run); REPS rounds (default 20) of one call per row.
 *   Threads: PRIMC_NUM_THREADS (pin with taskset). */
#include "bench/ab_util.h"
#include "runtime/primc_rt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
  int64_t N = 8;
  if (argc > 2 && !strcmp(argv[1], "--batch")) N = atoll(argv[2]), argc -= 2, argv += 2;
  if (argc < 5 || argc > 6 || N < 1) {
    fprintf(stderr, "usage: wgrad_ab [--batch N] M C H W [REPS]\n");
    return 2;
  }
  int64_t M = atoll(argv[1]), C = atoll(argv[2]), H = atoll(argv[3]), W = atoll(argv[4]);
  int reps = argc == 6 ? atoi(argv[5]) : 20;
  if (M < 1 || C < 1 || H < 2 || W < 2 || reps < 1) {
    fprintf(stderr, "wgrad_ab: not a weight-gradient shape\n");
    return 2;
  }
  int wino = primc_wgrad_wino_fits(M, C, N, H, W);
  if (!wino) fprintf(stderr, "wgrad_ab: Winograd does not take %lld x %lld at %lld x %lld; the columns alone\n",
                     (long long)M, (long long)C, (long long)H, (long long)W);
  int64_t Hp = H + 2, Wp = W + 2, K = N * H * W;
  float *xp = ab_buf(C * N * Hp * Wp), *x = ab_buf(N * C * H * W), *gy = ab_buf(N * M * H * W), *out = ab_buf(M * C * 9);
  size_t cols = sizeof(int64_t) * (size_t)(C * 9 + 2 * K);
  size_t wb = wino ? sizeof(float) * (size_t)primc_wgrad_wino_floats(M, C, N, H, W) : 0;
  void *scratch = malloc(cols > wb ? cols : wb);
  if (!xp || !x || !gy || !out || !scratch) {
    fprintf(stderr, "wgrad_ab: out of memory\n");
    return 1;
  }
  /* the columns: xp [C, N, Hp, Wp]; Winograd: x [N, C, H, W], its window grid's origin a row and a column before it */
  int64_t q[2][PRIMC_DOT_COLS_PARAMS] = {
      {M, K, H * W, 1, C, N * Hp * Wp, N, Hp * Wp, 2, H, W, 1, Wp, 1, 0, 3, 3, 1, Wp, 1, 0, 0, 1, M * H * W, W, 1, 0,
       0, 0, 0, H + 2, 0, W + 2},
      {M, K, H * W, 1, C, H * W, N, C * H * W, 2, H, W, 1, W, 1, 0, 3, 3, 1, W, 1, 0, -(W + 1), 1, M * H * W, W, 1, 0,
       0, 1, 1, H + 1, 1, W + 1}};
  void *bufs[2][4] = {{out, gy, xp, scratch}, {out, gy, x, scratch}};
  int rows = 1 + wino;
  double *times[2] = {malloc(sizeof(double) * (size_t)reps), malloc(sizeof(double) * (size_t)reps)};
  for (int r = -1; r < reps; r++) /* round -1 warms up */
    for (int i = 0; i < rows; i++) {
      double t0 = ab_now();
      if (primc_k_dot_cols(q[i], bufs[i]) != PRIMC_OK) {
        fprintf(stderr, "wgrad_ab: row %d failed\n", i);
        return 1;
      }
      if (r >= 0) times[i][r] = ab_now() - t0;
    }
  static const char *name[2] = {"columns", "winograd"};
  printf("dW %lld x %lld x 3x3 at %lldx%lld, batch %lld, %d thread(s), ms:", (long long)M, (long long)C, (long long)H,
         (long long)W, (long long)N, primc_num_threads());
  for (int i = 0; i < rows; i++) {
    qsort(times[i], (size_t)reps, sizeof(double), ab_by_value);
    printf("  %s %.3f (median %.3f)", name[i], times[i][0] * 1e3, times[i][reps / 2] * 1e3);
  }
  if (wino) printf("  winograd/columns %.3f", times[1][reps / 2] / times[0][reps / 2]);
  printf("\n");
  return 0;
}
