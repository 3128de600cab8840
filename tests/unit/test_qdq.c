/* tests/unit/test_qdq.c: the qdq pass: a conv of dequantized u8 activations and s8 weights (QDQ) compiled as an int32
 * conv on the int8 GEMM scaled per output channel, its result within f32 rounding of the interpreter running the
 * f32 graph as written; dequantizations the pass must not take (a per-channel activation scale, a weight scale
 * along the input channels) stay f32 convs. */
#include "codegen/codegen.h"
#include "ir/ir.h"
#include "passes/passes.h"
#include "runtime/primc_rt.h"
#include "tests/test.h"
#include "tests/unit/helpers.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { C = 12, O = 20, H = 9, W = 10, KS = 3 };

/* (f32(q) - z) * s with z and s constants broadcast along axis of q's shape (-1: scalars), as ONNX's
 * DequantizeLinear imports */
static pc_value *dequant(pc_graph *g, pc_value *q, int axis, const float *z, const float *s, int64_t n) {
  const pc_type *t = &q->type;
  int64_t ax = axis, len = axis < 0 ? 0 : n;
  pc_value *zc = pc_const(g, pc_type_make(PC_f32, axis < 0 ? 0 : 1, &len), z);
  pc_value *sc = pc_const(g, pc_type_make(PC_f32, axis < 0 ? 0 : 1, &len), s);
  pc_value *zb = pc_broadcast_in_dim(g, zc, t->rank, t->dims, axis < 0 ? NULL : &ax);
  pc_value *sb = pc_broadcast_in_dim(g, sc, t->rank, t->dims, axis < 0 ? NULL : &ax);
  return pc_mul(g, pc_sub(g, pc_convert(g, q, PC_f32), zb), sb);
}

/* conv(dequant(x), dequant(w)) with the activation's scale along x_axis and the weight's along w_axis */
static pc_graph *qdq_conv(int x_axis, int w_axis, const int8_t *wq) {
  static float xz[C], xs[C], wz[O > C ? O : C], ws[O > C ? O : C];
  for (int i = 0; i < C; i++) xz[i] = 128, xs[i] = 0.02f + 0.001f * (float)i;
  for (int i = 0; i < (O > C ? O : C); i++) wz[i] = (float)(i % 3) - 1, ws[i] = 0.003f + 0.0005f * (float)i;
  pc_graph *g = pc_graph_new();
  int64_t xd[4] = {1, C, H, W}, wd[4] = {O, C, KS, KS};
  pc_value *x = pc_input_add(g, "x", pc_type_make(PC_u8, 4, xd));
  pc_value *w = pc_const(g, pc_type_make(PC_i8, 4, wd), wq);
  pc_value *xf = dequant(g, x, x_axis, xz, xs, C), *wf = dequant(g, w, w_axis, wz, ws, w_axis == 1 ? C : O);
  int64_t one[2] = {1, 1}, pad[2] = {1, 1};
  pc_output_add(g, pc_conv(g, xf, wf, 2, one, pad, pad, one, one, 1));
  return g;
}

static void check(int x_axis, int w_axis, int want_int8, const char *tag) {
  static int8_t wq[O * C * KS * KS];
  static uint8_t xs[C * H * W];
  uint32_t s = 5;
  for (size_t i = 0; i < sizeof wq; i++) s = s * 1664525u + 1013904223u, wq[i] = (int8_t)(s >> 24);
  for (size_t i = 0; i < sizeof xs; i++) s = s * 1664525u + 1013904223u, xs[i] = (uint8_t)(s >> 24);
  pc_tensor in = {PC_u8, 4, {1, C, H, W}, xs}, ref, got;
  pc_graph *r = qdq_conv(x_axis, w_axis, wq), *g = qdq_conv(x_axis, w_axis, wq);
  primc_igemm_force_conv_min_k(64); /* the int8 GEMM's path at this small shape, whichever int8 row this CPU has */
  int ok = pc_test_ref_and_plan(r, g, &in, 1, &ref, 1, tag);
  primc_igemm_force_conv_min_k(-1);
  if (ok) {
    char *text = pc_test_kernels_text(g);
    int has = text && strstr(text, "call primc_k_conv_i8(") != NULL;
    CHECK_MSG(has == want_int8, "%s: conv_i8 %s in the listing", tag, has ? "" : "not");
    free(text);
  }
  if (ok && pc_test_run_compiled(g, 2, &in, &got, tag)) {
    const float *a = got.data, *b = ref.data;
    int64_t n = pc_tensor_numel(&ref);
    double mx = 0, err = 0;
    for (int64_t i = 0; i < n; i++) mx = fmax(mx, fabs(b[i])), err = fmax(err, fabs(a[i] - b[i]));
    CHECK_MSG(mx > 0 && err <= 2e-6 * mx, "%s: max error %g of max |ref| %g", tag, err, mx);
    free(got.data);
  }
  pc_tensor_free(&ref);
  pc_graph_free(r);
  pc_graph_free(g);
}

PC_TEST(qdq_conv_per_tensor_activation_per_channel_weights_on_int8_gemm) {
  check(-1, 0, 1, "per-channel weights");
  check(-1, -1, 1, "per-tensor weights");
}

PC_TEST(qdq_conv_other_scales_stay_f32) {
  check(1, 0, 0, "per-channel activation scale");
  check(-1, 1, 0, "weight scale along the input channels");
}

/* dot_general(dequant(a), dequant(b)) with b [K, N] (scale per column: axis 1) or [N, K] (contracting its dim 1, a
 * Gemm with transB: axis 0); per-tensor; and a scale along the contracting dim, which must stay f32 */
static void check_dot(int trans_b, int w_axis, int want_int8, const char *tag) {
  enum { M = 7, K = 40, N = 24 };
  static int8_t wq[K * N];
  static uint8_t xs[M * K];
  static float xz = 120, xsc = 0.05f, wz[K > N ? K : N], ws[K > N ? K : N];
  uint32_t s = 3;
  for (int i = 0; i < K * N; i++) s = s * 1664525u + 1013904223u, wq[i] = (int8_t)(s >> 24);
  for (int i = 0; i < M * K; i++) s = s * 1664525u + 1013904223u, xs[i] = (uint8_t)(s >> 24);
  for (int i = 0; i < (K > N ? K : N); i++) wz[i] = (float)(i % 5) - 2, ws[i] = 0.002f + 0.0003f * (float)i;
  pc_tensor in = {PC_u8, 2, {M, K}, xs}, ref, got;
  pc_graph *gs[2];
  for (int v = 0; v < 2; v++) {
    pc_graph *g = gs[v] = pc_graph_new();
    int64_t bd[2] = {trans_b ? N : K, trans_b ? K : N};
    pc_value *x = pc_input_add(g, "x", pc_type_make(PC_u8, 2, (int64_t[]){M, K}));
    pc_value *w = pc_const(g, pc_type_make(PC_i8, 2, bd), wq);
    pc_value *xf = dequant(g, x, -1, &xz, &xsc, 1), *wf = dequant(g, w, w_axis, wz, ws, w_axis >= 0 ? bd[w_axis] : 1);
    int64_t lc = 1, rc = trans_b ? 1 : 0;
    pc_output_add(g, pc_dot_general(g, xf, wf, 1, &lc, &rc, 0, NULL, NULL));
  }
  int ok = pc_test_ref_and_plan(gs[0], gs[1], &in, 1, &ref, 1, tag);
  if (ok) {
    char *text = pc_test_kernels_text(gs[1]);
    int has = text && strstr(text, "call primc_k_dot_i8(") != NULL;
    CHECK_MSG(has == want_int8, "%s: dot_i8 %s in the listing", tag, has ? "" : "not");
    free(text);
  }
  if (ok && pc_test_run_compiled(gs[1], 2, &in, &got, tag)) {
    const float *a = got.data, *b = ref.data;
    double mx = 0, err = 0;
    for (int64_t i = 0; i < pc_tensor_numel(&ref); i++) mx = fmax(mx, fabs(b[i])), err = fmax(err, fabs(a[i] - b[i]));
    CHECK_MSG(mx > 0 && err <= 2e-6 * mx, "%s: max error %g of max |ref| %g", tag, err, mx);
    free(got.data);
  }
  pc_tensor_free(&ref);
  pc_graph_free(gs[0]);
  pc_graph_free(gs[1]);
}

PC_TEST(qdq_dot_on_int8_gemm) {
  check_dot(0, 1, 1, "MatMul, per-column weights");
  check_dot(1, 0, 1, "Gemm transB, per-row weights");
  check_dot(0, -1, 1, "per-tensor weights");
  check_dot(0, 0, 0, "a scale along the contracting dim");
}

/* QuantizeLinear(MaxPool(DequantizeLinear(x))) as ONNX imports it (a pad of -inf, strided slices, a tree of max),
 * with the pool's dequantized value also an output: with one scale and zero point the pool runs on the u8 values
 * (its padded map u8, not f32), requantized with the same ones or others; both outputs equal the interpreter's on the
 * graph as written. A per-channel dequantization keeps the pool f32. */
static pc_graph *qdq_pool(float requant_scale, float requant_z, int per_channel) {
  enum { PC = 4, PH = 9 };
  static float z = 100, s = 0.05f, zc[PC] = {100, 90, 80, 70}, sc[PC] = {0.05f, 0.04f, 0.03f, 0.02f};
  pc_graph *g = pc_graph_new();
  int64_t xd[4] = {1, PC, PH, PH};
  pc_value *x = pc_input_add(g, "x", pc_type_make(PC_u8, 4, xd));
  pc_value *f = per_channel ? dequant(g, x, 1, zc, sc, PC) : dequant(g, x, -1, &z, &s, 1);
  int64_t lo[4] = {0, 0, 1, 1}, hi[4] = {0, 0, 1, 1}, in[4] = {0, 0, 0, 0};
  pc_attr pa[4] = {pc_a_ints("low", lo, 4), pc_a_ints("high", hi, 4), pc_a_ints("interior", in, 4),
                   pc_a_float("value", -INFINITY)};
  pc_value *p = pc_build(g, PC_OP_pad, &f, 1, pa, 4), *m = NULL;
  for (int dy = 0; dy < 3; dy++)
    for (int dx = 0; dx < 3; dx++) {
      int64_t st[4] = {0, 0, dy, dx}, li[4] = {1, PC, dy + 9, dx + 9}, sd[4] = {1, 1, 2, 2};
      pc_value *sl = pc_slice(g, p, st, li, sd);
      m = m ? pc_max(g, m, sl) : sl;
    }
  pc_value *q = pc_div(g, m, pc_full_like(g, requant_scale, m));
  q = pc_add(g, pc_round(g, q), pc_full_like(g, requant_z, m));
  q = pc_convert(g, pc_clamp(g, q, pc_full_like(g, 0, m), pc_full_like(g, 255, m)), PC_u8);
  pc_output_add(g, q);
  pc_output_add(g, m);
  return g;
}

static void check_pool(float requant_scale, float requant_z, int per_channel, const char *tag) {
  int want_u8 = !per_channel;
  static uint8_t xs[4 * 9 * 9];
  uint32_t s = 9;
  for (size_t i = 0; i < sizeof xs; i++) s = s * 1664525u + 1013904223u, xs[i] = (uint8_t)(s >> 24);
  for (int c = 0; c < 4; c++) /* a corner window of zeros: only the type's least pads it */
    xs[c * 81] = xs[c * 81 + 1] = xs[c * 81 + 9] = xs[c * 81 + 10] = 0;
  pc_tensor in = {PC_u8, 4, {1, 4, 9, 9}, xs}, ref[2], got[2];
  pc_graph *r = qdq_pool(requant_scale, requant_z, per_channel), *g = qdq_pool(requant_scale, requant_z, per_channel);
  int ok = pc_test_ref_and_plan(r, g, &in, 1, ref, 2, tag);
  if (ok) {
    char *text = pc_test_kernels_text(g);
    int u8 = text && strstr(text, "u8[1,4,11,11]") != NULL, f32 = text && strstr(text, "f32[1,4,11,11]") != NULL;
    CHECK_MSG(u8 == want_u8 && f32 == !want_u8, "%s: the padded map is %s", tag, u8 ? "u8" : f32 ? "f32" : "absent");
    free(text);
  }
  if (ok && pc_test_run_compiled(g, 2, &in, got, tag)) {
    CHECK_MSG(!memcmp(got[0].data, ref[0].data, 4 * 5 * 5), "%s: the requantized pool differs", tag);
    CHECK_MSG(!memcmp(got[1].data, ref[1].data, 4 * 5 * 5 * sizeof(float)), "%s: the dequantized pool differs", tag);
    free(got[0].data);
    free(got[1].data);
  }
  pc_tensor_free(&ref[0]);
  pc_tensor_free(&ref[1]);
  pc_graph_free(r);
  pc_graph_free(g);
}

PC_TEST(qdq_max_pool_on_u8) {
  check_pool(0.05f, 100, 0, "requantized with the same scale and zero point");
  check_pool(0.07f, 100, 0, "requantized with another scale");
  check_pool(0.05f, 90, 0, "requantized with another zero point");
  check_pool(0.05f, 100, 1, "dequantized per channel");
}
