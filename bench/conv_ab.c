/* bench/conv_ab.c: conv rows on one shape, alternated call by call in one process: the least and the median time
 * of each (for tuning the planner on machines whose speed moves between minutes, where timing builds or models in
 * turn does not resolve 10%; the median shows which row loses more in the slow minutes).
 *
 * Usage: conv_ab [--batch N] [--plain] [--cold] ROWS C H W O K STRIDE GROUPS [REPS]
 *   ROWS: row names joined by commas (`primc dump --kernels` prints them; bf16_tiles with bf16 weights, as
 *   --autocast bf16 plans it, bf16_stream as it plans them where the weights outgrow the last-level cache), "plan"
 *   for the planner's choice; N
 *   images (default 1), a K x K kernel padded K/2 each side, bias + ReLU as the epilogue, weights packed as each
 *   row reads them (--plain: as they arrive, unpacked, as a training step's weights do); REPS rounds (default
 *   50) of 3 calls per row (--cold: of one call after 64 MB were written, so that x and the weights come from
 *   memory, as in a model whose kernels before moved other data). Threads: PRIMC_NUM_THREADS (pin with taskset). */
#include "bench/ab_util.h"
#include "runtime/primc_rt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ROWS 8

int main(int argc, char **argv) {
  int64_t batch = 1;
  int plain = 0, cold = 0;
  for (;;) {
    if (argc > 2 && !strcmp(argv[1], "--batch")) batch = atoll(argv[2]), argc -= 2, argv += 2;
    else if (argc > 1 && !strcmp(argv[1], "--plain")) plain = 1, argc--, argv++;
    else if (argc > 1 && !strcmp(argv[1], "--cold")) cold = 1, argc--, argv++;
    else break;
  }
  if (argc < 9 || argc > 10 || batch < 1) {
    fprintf(stderr, "usage: conv_ab [--batch N] [--plain] [--cold] ROWS C H W O K STRIDE GROUPS [REPS]\n");
    return 2;
  }
  int64_t v[7];
  for (int i = 0; i < 7; i++) v[i] = atoll(argv[2 + i]);
  int reps = argc == 10 ? atoi(argv[9]) : 50;
  int64_t c = v[0], h = v[1], w = v[2], o = v[3], k = v[4], s = v[5], g = v[6], pad = k / 2;
  primc_conv2d p = {batch, c, h, w, o, k, k, g, s, s, 1, 1, pad, pad, pad, pad, 0, 0, 0, 0, 0, 0, 0};
  int64_t oh, ow;
  if (c < 1 || h < 1 || w < 1 || o < 1 || k < 1 || s < 1 || g < 1 || c % g || o % g || reps < 1 ||
      !primc_conv2d_out_hw(&p, &oh, &ow)) {
    fprintf(stderr, "conv_ab: not a conv shape\n");
    return 2;
  }
  float *x = ab_buf(batch * c * h * w), *wt = ab_buf(o * c / g * k * k), *bias = ab_buf(o), *y = ab_buf(batch * o * oh * ow),
        *spare = ab_buf(batch * o * oh * ow);
  primc_conv_epi e = {.bias = bias, .bias_stride = 1, .lo = 0.0f, .hi = __builtin_inff()};
  char names[256];
  snprintf(names, sizeof names, "%s", argv[1]);
  const char *row[MAX_ROWS];
  int n = 0;
  for (char *t = strtok(names, ","); t && n < MAX_ROWS; t = strtok(NULL, ",")) row[n++] = t;
  primc_conv_plan plan[MAX_ROWS];
  void *packed[MAX_ROWS];
  float *col[MAX_ROWS];
  double best[MAX_ROWS], *times[MAX_ROWS];
  for (int i = 0; i < n; i++) {
    /* bf16_tiles: the row --autocast bf16 plans, its weights rounded to bf16; bf16_stream: the same planned as for
     * weights outgrowing the last-level cache (a 1x1 of 256 KiB or more then reads x in place) */
    int stream = !strcmp(row[i], "bf16_stream");
    primc_conv_plan_opts op = {.packable = !plain, .tile_mr = primc_sgemm_mr(), .has_scratch = 1,
                               .force = stream ? "bf16_tiles" : strcmp(row[i], "plan") ? row[i] : NULL,
                               .threads = primc_num_threads(), .bf16 = stream || !strcmp(row[i], "bf16_tiles"),
                               .weights_stream = stream, .weights_once = !plain};
    if (primc_conv_plan_make(&p, &op, &plan[i]) != PRIMC_OK) {
      fprintf(stderr, "conv_ab: no plan for %s\n", row[i]);
      return 1;
    }
    if (op.force && strcmp(primc_conv_row_name(plan[i].row), op.force))
      fprintf(stderr, "conv_ab: %s does not fit: the planner's %s runs\n", row[i], primc_conv_row_name(plan[i].row));
    size_t wb = primc_conv_plan_weight_bytes(&p, &plan[i]);
    col[i] = ab_buf(primc_conv_plan_scratch_floats(&p, &plan[i]));
    packed[i] = aligned_alloc(64, (wb + 63) / 64 * 64 + 64);
    if (!packed[i] || primc_conv_plan_pack(&p, &plan[i], wt, packed[i]) != PRIMC_OK) {
      fprintf(stderr, "conv_ab: packing for %s failed\n", row[i]);
      return 1;
    }
    best[i] = 1e30;
    if (!(times[i] = malloc(sizeof(double) * (size_t)reps))) {
      fprintf(stderr, "conv_ab: out of memory\n");
      return 1;
    }
  }
  enum { FLUSH = 64 << 20 };
  char *flush = cold ? malloc(FLUSH) : NULL;
  int calls = cold ? 1 : 3;
  for (int r = 0; r < reps; r++)
    for (int i = 0; i < n; i++) {
      if (flush) memset(flush, r + i, FLUSH);
      double t0 = ab_now();
      for (int q = 0; q < calls; q++)
        if (primc_conv_run(&p, &plan[i], x, packed[i], &e, y, spare, col[i]) != PRIMC_OK) {
          fprintf(stderr, "conv_ab: %s failed\n", row[i]);
          return 1;
        }
      double t = (ab_now() - t0) / calls;
      if (t < best[i]) best[i] = t;
      times[i][r] = t;
    }
  printf("%lld->%lld k%lld s%lld g%lld %lldx%lld%s%s, batch %lld, %d thread(s), ms:", (long long)c, (long long)o,
         (long long)k, (long long)s, (long long)g, (long long)h, (long long)w, plain ? " plain weights" : "",
         cold ? " cold" : "",
         (long long)batch, primc_num_threads());
  for (int i = 0; i < n; i++) {
    qsort(times[i], (size_t)reps, sizeof(double), ab_by_value);
    printf("  %s(%s) %.3f (median %.3f)", row[i], primc_conv_row_name(plan[i].row), best[i] * 1e3, times[i][reps / 2] * 1e3);
  }
  printf("\n");
  return 0;
}
