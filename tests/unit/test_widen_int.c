/* tests/unit/test_widen_int.c: the widen pass's small int32 convs: a depthwise conv and one of fewer taps x
 * channels than the int8 row's conv_k, on u8 activations less a zero point and s8 weights (a quantized MobileNet's),
 * run as f32 convs on an f32 row and stay equal to the interpreter's int32 sums; at the tile's depth of 64 a 3x3 of
 * 12 channels (108 taps) stays on the int8 GEMM, at AVX2's 160 it and a 7x7 stem of 3 channels (147) do not, and
 * this CPU's row decides a stem's; a depthwise conv whose sums could pass 2^24 stays off the f32 rows (and exact). */
#include "codegen/codegen.h"
#include "ir/ir.h"
#include "passes/passes.h"
#include "runtime/primc_rt.h"
#include "tests/test.h"
#include "tests/unit/helpers.h"

#include <stdlib.h>
#include <string.h>

/* how the conv runs: an f32 row, the int8 GEMM, or (NOT_F32) either of the int32 paths but no f32 row */
enum { SMALL_F32 = 0, INT8_GEMM = 1, NOT_F32 = 2 };

/* conv(i32(x) - 128, w) on x u8 [1, c, h, w], w s8 [o, c/groups, k, k] widened to i32, stride 1, padding k/2 */
static pc_graph *int_conv(int64_t c, int64_t o, int64_t groups, int64_t k, int64_t h, int64_t wd, const int8_t *wq) {
  pc_graph *g = pc_graph_new();
  int64_t xd[4] = {1, c, h, wd}, wdims[4] = {o, c / groups, k, k}, one[2] = {1, 1}, pad[2] = {k / 2, k / 2};
  pc_value *x = pc_input_add(g, "x", pc_type_make(PC_u8, 4, xd));
  pc_value *xi = pc_convert(g, x, PC_i32);
  xi = pc_sub(g, xi, pc_full_like(g, 128, xi));
  pc_value *w = pc_convert(g, pc_const(g, pc_type_make(PC_i8, 4, wdims), wq), PC_i32);
  pc_output_add(g, pc_conv(g, xi, w, 2, one, pad, pad, one, one, groups));
  return g;
}

static void check(int64_t c, int64_t o, int64_t groups, int64_t k, int64_t h, int want, const char *tag) {
  int64_t nw = o * (c / groups) * k * k, nx = c * h * h;
  int8_t *wq = malloc((size_t)nw);
  uint8_t *xs = malloc((size_t)nx);
  uint32_t s = 11;
  /* the exact-bound case needs its extremes: weights of -128 and inputs of 0 (x - 128 = -128) everywhere */
  for (int64_t i = 0; i < nw; i++) s = s * 1664525u + 1013904223u, wq[i] = want == NOT_F32 ? -128 : (int8_t)(s >> 24);
  for (int64_t i = 0; i < nx; i++) s = s * 1664525u + 1013904223u, xs[i] = want == NOT_F32 ? 0 : (uint8_t)(s >> 24);
  pc_tensor in = {PC_u8, 4, {1, c, h, h}, xs}, ref, got;
  pc_graph *r = int_conv(c, o, groups, k, h, h, wq), *g = int_conv(c, o, groups, k, h, h, wq);
  int ok = pc_test_ref_and_plan(r, g, &in, 1, &ref, 1, tag);
  if (ok) {
    char *text = pc_test_kernels_text(g);
    const char *call = text ? strstr(text, "call primc_k_conv") : NULL;
    int f32_row = call && !strncmp(call, "call primc_k_conv(", 18) && strstr(call, " conv row ") &&
                  strstr(call, " conv row ") < strchr(call, '\n');
    int i8 = call && !strncmp(call, "call primc_k_conv_i8(", 21);
    int got_kind = f32_row ? SMALL_F32 : i8 ? INT8_GEMM : NOT_F32;
    if (want == NOT_F32 && got_kind == INT8_GEMM) got_kind = NOT_F32;
    CHECK_MSG(got_kind == want, "%s: the conv ran as kind %d, not %d: %.120s", tag, got_kind, want,
              call ? call : "(no conv call)");
    free(text);
  }
  if (ok && pc_test_run_compiled(g, 2, &in, &got, tag)) {
    const int32_t *a = got.data, *b = ref.data;
    int64_t n = pc_tensor_numel(&ref), bad = 0, big = 0;
    for (int64_t i = 0; i < n; i++) bad += a[i] != b[i], big += b[i] > (1 << 24);
    CHECK_MSG(got.dtype == PC_i32 && bad == 0, "%s: %lld of %lld sums differ from the interpreter's", tag,
              (long long)bad, (long long)n);
    if (want == NOT_F32) CHECK_MSG(big > 0, "%s: no sum past 2^24: the case does not test the bound", tag);
    free(got.data);
  }
  pc_tensor_free(&ref);
  pc_graph_free(r);
  pc_graph_free(g);
  free(wq);
  free(xs);
}

PC_TEST(widen_small_int_convs_exact_in_f32) {
  primc_igemm_force_conv_min_k(64); /* the rows with int8 dot products */
  check(24, 24, 24, 3, 15, SMALL_F32, "depthwise 3x3");
  check(16, 40, 1, 1, 14, SMALL_F32, "1x1 of 16 channels");
  check(3, 16, 1, 3, 20, SMALL_F32, "3x3 stem of 3 channels (27 taps)");
  check(12, 20, 1, 3, 9, INT8_GEMM, "3x3 of 12 channels (108 taps)");
  /* 33 x 33 taps of 128 * 128: 17.8M, past 2^24 */
  check(2, 2, 2, 33, 34, NOT_F32, "depthwise 33x33 past the bound");
  primc_igemm_force_conv_min_k(-1);
}

/* the AVX2 row's conv_k: 108 and 147 taps as f32 convs, exact; and whatever this CPU's row is, a 7x7 stem of 3
 * channels goes where its conv_k says */
PC_TEST(widen_follows_int8_row_conv_k) {
  primc_igemm_force_conv_min_k(160);
  check(12, 20, 1, 3, 9, SMALL_F32, "3x3 of 12 channels (108 taps), conv_k 160");
  check(3, 24, 1, 7, 23, SMALL_F32, "7x7 stem of 3 channels (147 taps), conv_k 160");
  check(4, 24, 1, 7, 23, INT8_GEMM, "7x7 stem of 4 channels (196 taps), conv_k 160");
  primc_igemm_force_conv_min_k(-1);
#if PRIMC_X86
  CHECK_INT(primc_igemm_conv_min_k(PRIMC_IGEMM_ROW_AVX2), 160);
#endif
  int here = primc_igemm_conv_min_k(primc_igemm_row_active()) > 147 ? SMALL_F32 : INT8_GEMM;
  check(3, 24, 1, 7, 23, here, "7x7 stem of 3 channels (147 taps), this CPU's int8 row");
}
