/* tests/unit/test_int_dot.c: integer dots with a constant B through the -O2 pipeline and codegen: the int8 GEMM call when B's columns each span at most 256 values, the exact bf16 path when one does not, results equal to int64 sums reduced mod 2^32. */
#include "codegen/codegen.h"
#include "ir/ir.h"
#include "passes/passes.h"
#include "tests/test.h"
#include "tests/unit/helpers.h"

#include <stdlib.h>
#include <string.h>

enum { M = 40, K = 300, N = 70, ZA = 131 };

/* y = (i32(x) - ZA) . w for x u8 [M, K] and a constant i32 w [K, N]; the listing must name call, the result be exact */
static void check_route(const int32_t *w, const char *call, const char *not_call, const char *tag) {
  pc_graph *g = pc_graph_new();
  pc_value *x = pc_input_add(g, "x", pc_type_make(PC_u8, 2, (int64_t[]){M, K}));
  int32_t za = ZA;
  pc_value *zb = pc_broadcast_in_dim(g, pc_const(g, pc_type_make(PC_i32, 0, NULL), &za), 2, (int64_t[]){M, K}, NULL);
  pc_value *a = pc_sub(g, pc_convert(g, x, PC_i32), zb);
  pc_value *wc = pc_const(g, pc_type_make(PC_i32, 2, (int64_t[]){K, N}), w);
  pc_output_add(g, pc_dot_general(g, a, wc, 1, (int64_t[]){1}, (int64_t[]){0}, 0, NULL, NULL));
  pc_pipeline_opts po = {.opt_level = 2};
  if (!CHECK_MSG(g->status == PC_OK && pc_pipeline_run(g, &po) == PC_OK, "%s: %s", tag, pc_error(g))) {
    pc_graph_free(g);
    return;
  }
  char *text = pc_test_kernels_text(g);
  CHECK_CONTAINS(text ? text : "", call);
  CHECK_MSG(text && !strstr(text, not_call), "%s: %s in the listing", tag, not_call);
  free(text);
  static uint8_t xs[M * K];
  uint32_t s = 7;
  for (int i = 0; i < M * K; i++) s = s * 1664525u + 1013904223u, xs[i] = (uint8_t)(s >> 24);
  pc_tensor in = {PC_u8, 2, {M, K}, xs}, out;
  if (pc_test_run_compiled(g, 2, &in, &out, tag)) {
    const int32_t *y = out.data;
    int bad = 0;
    for (int m = 0; m < M && !bad; m++)
      for (int n = 0; n < N && !bad; n++) {
        int64_t want = 0;
        for (int k = 0; k < K; k++) want += (int64_t)(xs[m * K + k] - ZA) * w[k * N + n];
        bad = !CHECK_MSG(y[m * N + n] == (int32_t)(uint32_t)(uint64_t)want, "%s: y[%d][%d] = %d, want %lld", tag, m, n,
                         y[m * N + n], (long long)want);
      }
    free(out.data);
  }
  pc_graph_free(g);
}

/* u8 weights less a zero point per column (columns together spanning 511 values): the int8 GEMM */
PC_TEST(int_dot_per_column_zero_points_take_int8_gemm) {
  static int32_t w[K * N];
  uint32_t s = 3;
  for (int i = 0; i < K * N; i++) s = s * 1664525u + 1013904223u, w[i] = (int32_t)(s >> 24) - (i % N) * 255 / (N - 1);
  check_route(w, "call primc_k_dot_i8(", "primc_k_dot_int(", "per-column zero points");
}

/* a column spanning 301 values (within [-256, 256], so exact in bf16): not s8 less an offset, the bf16 path */
PC_TEST(int_dot_wide_column_stays_on_bf16_path) {
  static int32_t w[K * N];
  for (int i = 0; i < K * N; i++) w[i] = i % 251 - 125;
  w[5] = 150, w[N + 5] = -150;
  check_route(w, "call primc_k_dot_int(", "primc_k_dot_i8(", "a wide column");
}
