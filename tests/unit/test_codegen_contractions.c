/* tests/unit/test_codegen_contractions.c: dot_general and conv compiled and compared with pc_interp: GEMM and conv
 * epilogues run inside the call, weights packed at compile time, a small conv paired with a depthwise one,
 * int32 convs, the conv scratch all calls share, 1-D convs as 2-D rows. */
#include "codegen/kir.h"
#include "frontend/frontend.h"
#include "ir/ir.h"
#include "passes/passes.h"
#include "runtime/primc_rt.h"
#include "tests/test.h"
#include "tests/unit/codegen_check.h"
#include "tests/unit/helpers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- contractions */

PC_TEST(codegen_dot_general) {
  static const pc_dtype types[] = {PC_f32, PC_f64, PC_i32, PC_f16};
  for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
    pc_dtype dt = types[t];
    pc_graph *g = pc_graph_new();
    pc_value *a = pc_input_add(g, "a", cg_ty(dt, 2, (int64_t[]){17, 33}));
    pc_value *b = pc_input_add(g, "b", cg_ty(dt, 2, (int64_t[]){33, 9}));
    pc_value *bt = pc_input_add(g, "bt", cg_ty(dt, 2, (int64_t[]){9, 33}));
    pc_value *x = pc_input_add(g, "x", cg_ty(dt, 4, (int64_t[]){2, 5, 3, 7}));
    pc_value *w = pc_input_add(g, "w", cg_ty(dt, 3, (int64_t[]){7, 2, 4}));
    /* plain, transposed rhs, transposed lhs */
    pc_output_add(g, pc_dot_general(g, a, b, 1, (int64_t[]){1}, (int64_t[]){0}, 0, NULL, NULL));
    pc_output_add(g, pc_dot_general(g, a, bt, 1, (int64_t[]){1}, (int64_t[]){1}, 0, NULL, NULL));
    pc_output_add(g, pc_dot_general(g, b, a, 1, (int64_t[]){0}, (int64_t[]){1}, 0, NULL, NULL));
    /* batch dim 0 of x with dim 1 of w, contract x dim 3 with w dim 0: needs a copy of w */
    pc_output_add(g, pc_dot_general(g, x, w, 1, (int64_t[]){3}, (int64_t[]){0}, 1, (int64_t[]){0}, (int64_t[]){1}));
    char tag[64];
    snprintf(tag, sizeof tag, "dot/%s", pc_dtype_name(dt));
    cg_check_graph(g, pc_dtype_is_float(dt) ? (cg_range){-1, 1} : (cg_range){-5, 6}, tag);
    pc_graph_free(g);
  }
}

static void conv_case(pc_dtype dt, int64_t groups, const int64_t *stride, const int64_t *pad, const int64_t *dil) {
  pc_graph *g = pc_graph_new();
  pc_value *x = pc_input_add(g, "x", cg_ty(dt, 4, (int64_t[]){2, 4, 9, 8}));
  pc_value *w = pc_input_add(g, "w", cg_ty(dt, 4, (int64_t[]){6, 4 / groups, 3, 2}));
  pc_attr a[6] = {pc_a_ints("stride", stride, 2), pc_a_ints("pad_lo", pad, 2), pc_a_ints("pad_hi", pad, 2),
                  pc_a_ints("dilation", dil, 2), pc_a_ints("lhs_dilation", (int64_t[]){1, 1}, 2),
                  pc_a_int("groups", groups)};
  pc_value *in[2] = {x, w};
  pc_value *y = pc_build(g, PC_OP_conv, in, 2, a, 6);
  if (y) pc_output_add(g, y);
  char tag[64];
  snprintf(tag, sizeof tag, "conv/%s/g%lld", pc_dtype_name(dt), (long long)groups);
  cg_check_graph(g, pc_dtype_is_float(dt) ? (cg_range){-1, 1} : (cg_range){-3, 4}, tag);
  pc_graph_free(g);
}

PC_TEST(codegen_conv) {
  conv_case(PC_f32, 1, (int64_t[]){1, 1}, (int64_t[]){1, 1}, (int64_t[]){1, 1});
  conv_case(PC_f32, 2, (int64_t[]){2, 1}, (int64_t[]){1, 0}, (int64_t[]){1, 2});
  conv_case(PC_f64, 1, (int64_t[]){1, 2}, (int64_t[]){0, 1}, (int64_t[]){1, 1});
  conv_case(PC_i32, 2, (int64_t[]){1, 1}, (int64_t[]){1, 1}, (int64_t[]){1, 1});
}

/* convs whose weights the program computes (inputs here, a training step's state) pack them in each call, for the
 * rows packed weights plan (direct lanes, Winograd, strips, the batch row: which ones this CPU's planner picks),
 * bias and ReLU fused; against the interpreter, and the listing says so */
PC_TEST(codegen_conv_computed_weights_packed_per_call) {
  static const int64_t shapes[][6] = {
      /* n, c, hw, o, k, stride */
      {2, 16, 12, 32, 3, 1}, {1, 128, 10, 128, 3, 1}, {2, 8, 11, 12, 3, 2}, {3, 64, 7, 256, 3, 1}, {2, 24, 9, 40, 1, 1},
  };
  pc_graph *g = pc_graph_new();
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    const int64_t *s = shapes[i], pad = s[4] / 2;
    pc_value *x = pc_input_add(g, NULL, cg_ty(PC_f32, 4, (int64_t[]){s[0], s[1], s[2], s[2]}));
    pc_value *w = pc_input_add(g, NULL, cg_ty(PC_f32, 4, (int64_t[]){s[3], s[1], s[4], s[4]}));
    pc_value *b = pc_input_add(g, NULL, cg_ty(PC_f32, 1, (int64_t[]){s[3]}));
    pc_attr a[6] = {pc_a_ints("stride", (int64_t[]){s[5], s[5]}, 2), pc_a_ints("pad_lo", (int64_t[]){pad, pad}, 2),
                    pc_a_ints("pad_hi", (int64_t[]){pad, pad}, 2), pc_a_ints("dilation", (int64_t[]){1, 1}, 2),
                    pc_a_ints("lhs_dilation", (int64_t[]){1, 1}, 2), pc_a_int("groups", 1)};
    pc_value *in[2] = {x, w};
    pc_value *y = pc_build(g, PC_OP_conv, in, 2, a, 6);
    int64_t oh = y ? y->type.dims[2] : 0;
    pc_value *bb = pc_broadcast_in_dim(g, b, 4, (int64_t[]){s[0], s[3], oh, oh}, (int64_t[]){1});
    if (y && bb) pc_output_add(g, pc_max(g, pc_add(g, y, bb), pc_full_like(g, 0, y)));
  }
  char *text = pc_test_kernels_text(g);
  int per_call = 0;
  for (const char *t = text; t && (t = strstr(t, "packed by each call")); t++) per_call++;
  CHECK_MSG(per_call >= 2, "%d convs pack their computed weights per call:\n%s", per_call, text ? text : "");
  free(text);
  cg_check_graph(g, (cg_range){-1, 1}, "conv/computed weights");
  pc_graph_free(g);
}

/* A batch of 4 128-channel 7x7 maps (16 tiles an image, 64 a round): Winograd for constant weights, packed once;
 * for the same weights computed (packed at every call) only where that packing runs on zmm (AVX-512) */
PC_TEST(codegen_conv_winograd_over_a_batch_of_small_maps) {
  const int64_t N = 4, C = 128, H = 7;
  float *w = malloc(sizeof(float) * (size_t)(C * C * 9));
  for (int64_t i = 0; i < C * C * 9; i++) w[i] = (float)(i * 7919 % 1000 - 500) * 1e-4f;
  for (int computed = 0; computed < 2; computed++) {
    pc_graph *g = pc_graph_new();
    pc_value *x = pc_input_add(g, "x", cg_ty(PC_f32, 4, (int64_t[]){N, C, H, H}));
    pc_type wt = cg_ty(PC_f32, 4, (int64_t[]){C, C, 3, 3});
    pc_value *in[2] = {x, computed ? pc_input_add(g, "w", wt) : pc_const(g, wt, w)};
    pc_attr a[6] = {pc_a_ints("stride", (int64_t[]){1, 1}, 2), pc_a_ints("pad_lo", (int64_t[]){1, 1}, 2),
                    pc_a_ints("pad_hi", (int64_t[]){1, 1}, 2), pc_a_ints("dilation", (int64_t[]){1, 1}, 2),
                    pc_a_ints("lhs_dilation", (int64_t[]){1, 1}, 2), pc_a_int("groups", 1)};
    pc_output_add(g, pc_build(g, PC_OP_conv, in, 2, a, 6));
    char *text = pc_test_kernels_text(g);
    int wino = text && strstr(text, "conv row winograd_f2x3") != NULL;
    if (strcmp(primc_conv_tuning_name(), "AVX2")) /* AVX2's fill rule leaves 7x7 maps alone */
      CHECK_MSG(wino == (!computed || primc_sgemm_isa() == PRIMC_ISA_AVX512), "%s weights: %s",
                computed ? "computed" : "constant", text ? text : "");
    free(text);
    cg_check_graph(g, (cg_range){-1, 1}, computed ? "conv/winograd over a batch, computed weights" : "conv/winograd over a batch");
    pc_graph_free(g);
  }
  free(w);
}

/* An --autocast bf16 program whose weights outgrow the last-level cache plans its bf16 convs as streamed (its large
 * 1x1s then read x in place, runtime/conv/bf16_direct.c): with the cache forced small the listing says so and the
 * compiled result matches the interpreter within bf16's rounding; with it large, not streamed */
PC_TEST(codegen_bf16_weights_streamed_past_the_cache) {
  const int64_t C = 512, O = 1024, H = 7;
  pc_graph *g = pc_graph_new();
  g->autocast = PC_AUTOCAST_BF16;
  float *w = malloc(sizeof(float) * (size_t)(O * C)), *xd = malloc(sizeof(float) * (size_t)(C * H * H));
  for (int64_t i = 0; i < O * C; i++) w[i] = (float)(i * 7919 % 1000) * 1e-5f; /* positive: no sum near 0 */
  for (int64_t i = 0; i < C * H * H; i++) xd[i] = (float)(i % 97) / 97.0f;
  pc_value *x = pc_input_add(g, "x", cg_ty(PC_f32, 4, (int64_t[]){1, C, H, H}));
  pc_value *wc = pc_const(g, cg_ty(PC_f32, 4, (int64_t[]){O, C, 1, 1}), w);
  pc_attr a[6] = {pc_a_ints("stride", (int64_t[]){1, 1}, 2), pc_a_ints("pad_lo", (int64_t[]){0, 0}, 2),
                  pc_a_ints("pad_hi", (int64_t[]){0, 0}, 2), pc_a_ints("dilation", (int64_t[]){1, 1}, 2),
                  pc_a_ints("lhs_dilation", (int64_t[]){1, 1}, 2), pc_a_int("groups", 1)};
  pc_output_add(g, pc_build(g, PC_OP_conv, (pc_value *[]){x, wc}, 2, a, 6));
  const char *note = "streamed from memory each run";
  kir_force_llc_bytes(256 << 10);
  char *text = pc_test_kernels_text(g);
  CHECK_MSG(text && strstr(text, "conv row bf16_tiles") && strstr(text, note), "streamed:\n%s", text ? text : "");
  free(text);
  pc_tensor in = {PC_f32, 4, {1, C, H, H}, xd};
  pc_test_compiled_matches_interp(g, &in, 1, 2e-2f, "bf16 weights streamed");
  kir_force_llc_bytes(1ll << 40);
  text = pc_test_kernels_text(g);
  CHECK_MSG(text && !strstr(text, note), "not streamed:\n%s", text ? text : "");
  free(text);
  kir_force_llc_bytes(0);
  pc_graph_free(g);
  free(w), free(xd);
}

PC_TEST(codegen_gemm_epilogue) {
  pc_graph *g = pc_graph_new();
  pc_value *x = pc_input_add(g, "x", cg_ty(PC_f32, 2, (int64_t[]){70, 24}));
  pc_value *w = pc_input_add(g, "w", cg_ty(PC_f32, 2, (int64_t[]){24, 600}));
  pc_value *b = pc_input_add(g, "b", cg_ty(PC_f32, 1, (int64_t[]){600}));
  int n0 = g->n_nodes;
  pc_value *y = pc_dot_general(g, x, w, 1, (int64_t[]){1}, (int64_t[]){0}, 0, NULL, NULL);
  y = pc_add(g, y, pc_broadcast_in_dim(g, b, 2, (int64_t[]){70, 600}, (int64_t[]){1}));
  y = pc_max(g, y, pc_broadcast_to(g, pc_scalar(g, PC_f32, 0), 2, (int64_t[]){70, 600}));
  cg_group_from(g, n0, 0);
  pc_output_add(g, y);
  cg_listing_has_then_run(g, "with epilogue k1 per row block", (cg_range){-1, 1}, "gemm+bias+relu");
}

/* a [2, 35, 24] x [24, 600] dot's bias and residual adds over [2, 35, 600]: their loops merge into the GEMM's 70
 * rows and run as its epilogue (a transformer's projection: before, only consumers of exactly two loops joined) */
PC_TEST(codegen_gemm_epilogue_rows_merged) {
  pc_graph *g = pc_graph_new();
  int64_t yd[3] = {2, 35, 600};
  pc_value *x = pc_input_add(g, "x", cg_ty(PC_f32, 3, (int64_t[]){2, 35, 24}));
  pc_value *w = pc_input_add(g, "w", cg_ty(PC_f32, 2, (int64_t[]){24, 600}));
  pc_value *b = pc_input_add(g, "b", cg_ty(PC_f32, 1, (int64_t[]){600}));
  pc_value *r = pc_input_add(g, "r", cg_ty(PC_f32, 3, yd));
  int n0 = g->n_nodes;
  pc_value *y = pc_dot_general(g, x, w, 1, (int64_t[]){2}, (int64_t[]){0}, 0, NULL, NULL);
  y = pc_add(g, r, pc_add(g, y, pc_broadcast_in_dim(g, b, 3, yd, (int64_t[]){2})));
  cg_group_from(g, n0, 0);
  pc_output_add(g, y);
  cg_listing_has_then_run(g, "with epilogue k1 per row block", (cg_range){-1, 1}, "gemm+bias+residual over 3 dims");
}

/* dots with constant B (plain and transposed, with an epilogue) read GEMM panels packed at
 * compile time; results match the interpreter */
PC_TEST(codegen_dot_constant_weights_packed) {
  pc_graph *g = pc_graph_new();
  static float w[24 * 70], wt[70 * 24], bias[70];
  for (int i = 0; i < 24 * 70; i++) w[i] = (float)cg_urand(-1, 1), wt[i] = (float)cg_urand(-1, 1);
  for (int i = 0; i < 70; i++) bias[i] = (float)cg_urand(-1, 1);
  pc_value *x = pc_input_add(g, "x", cg_ty(PC_f32, 2, (int64_t[]){40, 24}));
  pc_value *wc = pc_const(g, cg_ty(PC_f32, 2, (int64_t[]){24, 70}), w);
  pc_value *wtc = pc_const(g, cg_ty(PC_f32, 2, (int64_t[]){70, 24}), wt);
  pc_value *bc = pc_const(g, cg_ty(PC_f32, 1, (int64_t[]){70}), bias);
  int n0 = g->n_nodes;
  pc_value *y = pc_dot_general(g, x, wc, 1, (int64_t[]){1}, (int64_t[]){0}, 0, NULL, NULL);
  y = pc_add(g, y, pc_broadcast_in_dim(g, bc, 2, (int64_t[]){40, 70}, (int64_t[]){1}));
  cg_group_from(g, n0, 0);
  pc_output_add(g, y);
  pc_output_add(g, pc_dot_general(g, x, wtc, 1, (int64_t[]){1}, (int64_t[]){1}, 0, NULL, NULL));
  char *buf = cg_llvm_text(g, 0);
  CHECK_CONTAINS(buf ? buf : "", "@primc_k_dot_packed_epi(");
  CHECK_CONTAINS(buf ? buf : "", "@primc_k_dot_packed(");
  free(buf);
  cg_check_graph(g, (cg_range){-1, 1}, "packed weights");
  pc_graph_free(g);
}

/* a GEMV (x of one row, a classifier's input) reads packed panels too: x's row stride is never
 * stepped, so it qualifies whatever it says (it was 0 and sent MobileNetV2's classifier down the
 * unpacked path, reading B's rows 4 KB apart: 0.57 -> 0.17 ms) */
PC_TEST(codegen_gemv_constant_weights_packed) {
  pc_graph *g = pc_graph_new();
  static float w[200 * 70];
  for (int i = 0; i < 200 * 70; i++) w[i] = (float)cg_urand(-1, 1);
  pc_value *x = pc_input_add(g, "x", cg_ty(PC_f32, 2, (int64_t[]){1, 200}));
  pc_value *wc = pc_const(g, cg_ty(PC_f32, 2, (int64_t[]){200, 70}), w);
  pc_output_add(g, pc_dot_general(g, x, wc, 1, (int64_t[]){1}, (int64_t[]){0}, 0, NULL, NULL));
  char *buf = cg_llvm_text(g, 0);
  CHECK_CONTAINS(buf ? buf : "", "@primc_k_dot_packed(");
  free(buf);
  cg_check_graph(g, (cg_range){-1, 1}, "packed GEMV");
  pc_graph_free(g);
}

/* conv (+ per-channel bias) (+ residual) (+ act) + ReLU6 in one group: the conv call runs the epilogue itself.
 * const_w: the weights are constants, packed at compile time (128 channels: Winograd, strips or panels).
 * act: ACT_SILU, ACT_GELU (the ONNX composite's form), ACT_GELU_DIV (PyTorch's export), ACT_NEAR_GELU (erf of
 * s * 0.7: not GELU, not fused). f16 (conv_epilogue_f16_case): the result rounded to f16 and back (--autocast
 * fp16's rounded activation) after a clamp to [0, hi] */
enum { ACT_NONE, ACT_SILU, ACT_GELU, ACT_GELU_DIV, ACT_NEAR_GELU };
typedef struct conv_epi_case {
  int64_t n, groups, ch;
  int act, bias, res, const_w;
  const char *want;
} conv_epi_case;

static pc_value *mul_c(pc_graph *g, pc_value *y, double c) {
  return pc_mul(g, y, pc_broadcast_to(g, pc_scalar(g, PC_f32, c), y->type.rank, y->type.dims));
}

static void conv_epilogue_rounded(conv_epi_case t, int f16, double hi) {
  pc_graph *g = pc_graph_new();
  int64_t C = t.ch, od[4] = {t.n, C, 12, 12};
  pc_value *x = pc_input_add(g, "x", cg_ty(PC_f32, 4, (int64_t[]){t.n, C, 12, 12}));
  pc_type wt = cg_ty(PC_f32, 4, (int64_t[]){C, C / t.groups, 3, 3});
  pc_value *w;
  if (t.const_w) {
    int64_t nw = pc_type_numel(&wt);
    float *wd = malloc(sizeof(float) * (size_t)nw);
    for (int64_t i = 0; i < nw; i++) wd[i] = (float)((i * 37 % 101) - 50) / 400.0f;
    w = pc_const(g, wt, wd);
    free(wd);
  } else {
    w = pc_input_add(g, "w", wt);
  }
  pc_value *b = t.bias == 1 ? pc_input_add(g, "b", cg_ty(PC_f32, 1, (int64_t[]){C})) : NULL;
  pc_value *r = t.res ? pc_input_add(g, "r", cg_ty(PC_f32, 4, od)) : NULL;
  int n0 = g->n_nodes;
  pc_attr a[6] = {pc_a_ints("stride", (int64_t[]){1, 1}, 2), pc_a_ints("pad_lo", (int64_t[]){1, 1}, 2),
                  pc_a_ints("pad_hi", (int64_t[]){1, 1}, 2), pc_a_ints("dilation", (int64_t[]){1, 1}, 2),
                  pc_a_ints("lhs_dilation", (int64_t[]){1, 1}, 2), pc_a_int("groups", t.groups)};
  pc_value *y = pc_build(g, PC_OP_conv, (pc_value *[]){x, w}, 2, a, 6);
  if (b) y = pc_add(g, y, pc_broadcast_in_dim(g, b, 4, od, (int64_t[]){1}));
  if (t.bias == 2) y = pc_add(g, y, pc_broadcast_to(g, pc_scalar(g, PC_f32, 0), 4, od)); /* a bias of zeros */
  if (r) y = pc_add(g, r, y);
  if (t.act == ACT_SILU) y = pc_mul(g, y, pc_sigmoid(g, y)); /* EfficientNet's SiLU */
  pc_value *one = pc_broadcast_to(g, pc_scalar(g, PC_f32, 1), 4, od);
  if (t.act == ACT_GELU || t.act == ACT_NEAR_GELU)
    y = pc_mul(g, mul_c(g, y, 0.5), pc_add(g, pc_erf(g, mul_c(g, y, t.act == ACT_GELU ? M_SQRT1_2 : 0.7)), one));
  if (t.act == ACT_GELU_DIV) {
    pc_value *q = pc_div(g, y, pc_broadcast_to(g, pc_scalar(g, PC_f32, M_SQRT2), 4, od));
    y = mul_c(g, pc_mul(g, y, pc_add(g, one, pc_erf(g, q))), 0.5);
  }
  y = pc_max(g, y, pc_broadcast_to(g, pc_scalar(g, PC_f32, 0), 4, od));
  y = pc_min(g, pc_broadcast_to(g, pc_scalar(g, PC_f32, hi), 4, od), y);
  if (f16) y = pc_convert(g, pc_convert(g, y, PC_f16), PC_f32);
  cg_group_from(g, n0, 0);
  pc_output_add(g, y);
  char *buf = pc_test_kernels_text(g);
  CHECK_MSG((strstr(buf, "in the call") != NULL) == (t.want != NULL), "n=%lld groups=%lld act %d:\n%s", (long long)t.n,
            (long long)t.groups, t.act, buf);
  free(buf);
  /* rounded to f16: the f32 sum and the interpreter's may round to neighbouring f16 values */
  cg_check_graph_as(g, (cg_range){-1, 1}, "conv epilogue", f16 ? PC_f16 : PC_DTYPE_COUNT);
  pc_graph_free(g);
}

static void conv_epilogue_case(conv_epi_case t) { conv_epilogue_rounded(t, 0, 0.5); }

PC_TEST(codegen_conv_epilogue) {
  conv_epilogue_case((conv_epi_case){1, 1, 6, 0, 1, 1, 0, "in the call"});
  conv_epilogue_case((conv_epi_case){1, 6, 6, 0, 1, 1, 0, "in the call"}); /* depthwise */
  conv_epilogue_case((conv_epi_case){1, 1, 6, 1, 1, 1, 0, "in the call"}); /* SiLU */
  conv_epilogue_case((conv_epi_case){1, 6, 6, 1, 1, 1, 0, "in the call"});
  /* depthwise with 16+ channels: in the lanes on AVX-512, residual and SiLU after the transposes */
  conv_epilogue_case((conv_epi_case){1, 20, 20, 0, 1, 1, 0, "in the call"});
  conv_epilogue_case((conv_epi_case){1, 32, 32, 1, 1, 0, 0, "in the call"});
  /* two images: the bias repeats per image (the loop over images steps it by 0), every row that runs them */
  conv_epilogue_case((conv_epi_case){2, 1, 6, 0, 1, 1, 0, "in the call"});
  conv_epilogue_case((conv_epi_case){2, 6, 6, 1, 1, 1, 0, "in the call"});
  conv_epilogue_case((conv_epi_case){2, 32, 32, 1, 1, 0, 0, "in the call"});
  conv_epilogue_case((conv_epi_case){2, 1, 128, 1, 1, 1, 1, "in the call"});
  conv_epilogue_case((conv_epi_case){2, 2, 64, 0, 1, 0, 1, "in the call"});
  /* no bias: the epilogue must not read one (its argument slot then holds y) */
  conv_epilogue_case((conv_epi_case){1, 1, 6, 0, 0, 0, 0, "in the call"});
  conv_epilogue_case((conv_epi_case){1, 6, 6, 0, 0, 1, 0, "in the call"});
  /* a bias of zeros (exporters share one zero initializer among fresh layers): as no bias */
  conv_epilogue_case((conv_epi_case){1, 1, 6, 0, 2, 0, 0, "in the call"});
  conv_epilogue_case((conv_epi_case){2, 1, 32, 1, 2, 1, 1, "in the call"});
  /* constant weights packed at compile time: Winograd (128 channels, 3x3, 6x6 tiles), with and without bias */
  conv_epilogue_case((conv_epi_case){1, 1, 128, 0, 0, 0, 1, "in the call"});
  conv_epilogue_case((conv_epi_case){1, 1, 128, 1, 1, 1, 1, "in the call"});
  conv_epilogue_case((conv_epi_case){1, 2, 64, 0, 1, 0, 1, "in the call"}); /* grouped: strips */
  /* GELU (erf) as ONNX's composite and as PyTorch's export write it; erf of s * 0.7 stays a loop of its own */
  conv_epilogue_case((conv_epi_case){1, 1, 6, ACT_GELU, 1, 1, 0, "in the call"});
  conv_epilogue_case((conv_epi_case){2, 1, 6, ACT_GELU_DIV, 1, 0, 0, "in the call"});
  conv_epilogue_case((conv_epi_case){1, 20, 20, ACT_GELU, 1, 1, 0, "in the call"}); /* depthwise in the lanes */
  conv_epilogue_case((conv_epi_case){1, 1, 128, ACT_GELU_DIV, 1, 1, 1, "in the call"});
  conv_epilogue_case((conv_epi_case){1, 1, 6, ACT_NEAR_GELU, 1, 0, 0, NULL});
  /* rounded to f16 after the clamp (--autocast fp16): in the call where no other activation is and the bounds are
   * f16 values (rounding then commutes with the clamp); 0.1 is no f16 value, and SiLU takes the activation's slot */
  conv_epilogue_rounded((conv_epi_case){1, 1, 6, 0, 1, 1, 0, "in the call"}, 1, 0.5);
  conv_epilogue_rounded((conv_epi_case){2, 20, 20, 0, 1, 1, 0, "in the call"}, 1, 6);
  conv_epilogue_rounded((conv_epi_case){1, 1, 128, 0, 1, 0, 1, "in the call"}, 1, 0.5);
  conv_epilogue_rounded((conv_epi_case){1, 1, 6, 0, 1, 1, 0, NULL}, 1, 0.1);
  conv_epilogue_rounded((conv_epi_case){1, 1, 6, ACT_SILU, 1, 1, 0, NULL}, 1, 0.5);
}

/* conv (fk x fk / fs, constant weights) + bias + ReLU6, then a depthwise conv of its result + bias +
 * ReLU6, in two groups: with few taps x input channels (a 1x1 widening, a 3-channel stem) the two
 * calls run as one where the CPU has AVX-512, the first conv's weights staying plain; with many
 * they stay two calls */
/* clamp(conv(x, w) + b, 0, hi) in fused group grp: a kh x kw conv of w's shape, this stride and padding
 * on each side */
static pc_value *conv_bias_clamp(pc_graph *g, pc_value *x, pc_value *w, pc_value *b, int64_t stride, int64_t pad,
                                 int64_t groups, double hi, int grp) {
  int n0 = g->n_nodes;
  pc_attr a[6] = {pc_a_ints("stride", (int64_t[]){stride, stride}, 2), pc_a_ints("pad_lo", (int64_t[]){pad, pad}, 2),
                  pc_a_ints("pad_hi", (int64_t[]){pad, pad}, 2), pc_a_ints("dilation", (int64_t[]){1, 1}, 2),
                  pc_a_ints("lhs_dilation", (int64_t[]){1, 1}, 2), pc_a_int("groups", groups)};
  pc_value *y = pc_build(g, PC_OP_conv, (pc_value *[]){x, w}, 2, a, 6);
  if (!y) return NULL;
  const int64_t *d = y->type.dims;
  y = pc_add(g, y, pc_broadcast_in_dim(g, b, 4, d, (int64_t[]){1}));
  y = pc_max(g, y, pc_broadcast_to(g, pc_scalar(g, PC_f32, 0), 4, d));
  y = pc_min(g, pc_broadcast_to(g, pc_scalar(g, PC_f32, hi), 4, d), y);
  cg_group_from(g, n0, grp);
  return y;
}

static void small_conv_depthwise_case(int64_t k, int64_t fk, int64_t fs, int64_t stride, int want_pair) {
  pc_graph *g = pc_graph_new();
  int64_t C = 24, H = 14, W = 29; /* rows of 16 + 8 + 4 + 1 pixels */
  pc_value *x = pc_input_add(g, "x", cg_ty(PC_f32, 4, (int64_t[]){1, k, H, W}));
  int64_t nw = C * k * fk * fk;
  float *wd = malloc(sizeof(float) * (size_t)nw);
  for (int64_t i = 0; i < nw; i++) wd[i] = (float)((i * 37 % 101) - 50) / 200.0f;
  pc_value *w1 = pc_const(g, cg_ty(PC_f32, 4, (int64_t[]){C, k, fk, fk}), wd);
  free(wd);
  pc_value *b1 = pc_input_add(g, "b1", cg_ty(PC_f32, 1, (int64_t[]){C}));
  pc_value *w2 = pc_input_add(g, "w2", cg_ty(PC_f32, 4, (int64_t[]){C, 1, 3, 3}));
  pc_value *b2 = pc_input_add(g, "b2", cg_ty(PC_f32, 1, (int64_t[]){C}));
  pc_value *m = conv_bias_clamp(g, x, w1, b1, fs, fk / 2, 1, 6, 0);
  pc_value *y = conv_bias_clamp(g, m, w2, b2, stride, 1, C, 0.5, 1);
  if (y) pc_output_add(g, y);
  char *buf = pc_test_kernels_text(g);
  int paired = strstr(buf, "in the same call") != NULL;
  int here = primc_isa_covers(primc_sgemm_isa(), PRIMC_ISA_AVX2); /* the pair's AVX-512 or AVX2 code */
  CHECK_MSG(paired == (want_pair && here), "k=%lld %lldx%lld/%lld, stride %lld:\n%s",
            (long long)k, (long long)fk, (long long)fk, (long long)fs, (long long)stride, buf);
  free(buf);
  cg_check_graph(g, (cg_range){-1, 1}, "small conv then depthwise");
  pc_graph_free(g);
}

PC_TEST(codegen_small_conv_depthwise_pair) {
  small_conv_depthwise_case(16, 1, 1, 2, 1);
  small_conv_depthwise_case(8, 1, 1, 1, 1);
  small_conv_depthwise_case(3, 3, 2, 1, 1);  /* a stem: 27 taps x channels */
  small_conv_depthwise_case(64, 1, 1, 2, 0); /* 64 input channels: the GEMM's register tile wins */
  small_conv_depthwise_case(8, 3, 1, 1, 0);  /* 72 taps x channels */
}

/* int32 convs: operands of quantized models (|x| <= 255) run as f32 GEMMs over chunks of K (two chunks at 32 x 3 x 3
 * taps), exact; larger ones (|x| <= 5000) as one f64 GEMM, exact; huge ones (sums past 2^53) take the integer
 * loop, which wraps; all equal the interpreter's int64 sums wrapped to int32. Strided, padded, dilated, grouped
 * and 1-D shapes. */
PC_TEST(codegen_int32_conv_exact_and_wrapping) {
  static const struct {
    int s;
    int64_t c, o, h, w, kh, kw, stride, pad, dil, groups;
  } cases[] = {{2, 6, 4, 9, 11, 3, 3, 1, 1, 1, 1}, {2, 8, 6, 10, 7, 3, 2, 2, 1, 1, 2}, {2, 4, 4, 8, 8, 3, 3, 1, 2, 2, 4},
               {1, 5, 3, 1, 17, 1, 5, 3, 2, 1, 1}, {2, 32, 4, 6, 6, 3, 3, 1, 1, 1, 1}};
  static const cg_range ranges[3] = {{-255, 255}, {-5000, 5000}, {-2e9, 2e9}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
    for (int huge = 0; huge < 3; huge++) {
      pc_graph *g = pc_graph_new();
      int s = cases[i].s;
      int64_t xd[4] = {2, cases[i].c, cases[i].h, cases[i].w}, wd[4] = {cases[i].o, cases[i].c / cases[i].groups,
                                                                        cases[i].kh, cases[i].kw};
      if (s == 1) xd[2] = cases[i].w, wd[2] = cases[i].kw;
      pc_value *x = pc_input_add(g, "x", cg_ty(PC_i32, 2 + s, xd)), *w = pc_input_add(g, "w", cg_ty(PC_i32, 2 + s, wd));
      int64_t st[2] = {cases[i].stride, cases[i].stride}, pd[2] = {cases[i].pad, cases[i].pad},
              dl[2] = {cases[i].dil, cases[i].dil}, one[2] = {1, 1};
      pc_attr a[6] = {pc_a_ints("stride", st, s), pc_a_ints("pad_lo", pd, s), pc_a_ints("pad_hi", pd, s),
                      pc_a_ints("dilation", dl, s), pc_a_ints("lhs_dilation", one, s), pc_a_int("groups", cases[i].groups)};
      pc_output_add(g, pc_build(g, PC_OP_conv, (pc_value *[]){x, w}, 2, a, 6));
      char tag[64];
      snprintf(tag, sizeof tag, "int32 conv case %zu, |x| <= %.0f", i, ranges[huge].hi);
      cg_check_graph(g, ranges[huge], tag);
      pc_graph_free(g);
    }
}

/* Every conv call's scratch (im2col, phase images, the transposed GEMM's sums) is dead outside the call: all
 * of them share one region past the planned workspace, sized for the largest (ResNet-18's workspace was 67 MB,
 * 52 of them a region per conv touched once a run; now 14.7 MB) */
PC_TEST(codegen_conv_scratch_shared) {
  char path[1024];
  snprintf(path, sizeof path, "%s/models/resnet_tiny/model.onnx", pc_test_srcdir());
  pc_graph *g = pc_onnx_load(path, NULL);
  if (!CHECK_MSG(g && g->status == PC_OK, "resnet_tiny: %s", g ? pc_error(g) : "out of memory")) {
    pc_graph_free(g);
    return;
  }
  pc_pipeline_run(g, &(pc_pipeline_opts){.opt_level = 2});
  kir_program p;
  int convs = 0;
  int64_t at = -1, most = 0;
  if (CHECK(kir_build(g, &p) == PC_OK))
    for (int k = 0; k < p.n_kernels; k++) {
      const kir_kernel *c = &p.kernels[k];
      if (c->kind != KK_CALL || c->call != KC_conv) continue;
      const kir_buf *b = &p.bufs[c->args[3]];
      convs++;
      if (at < 0) at = b->offset;
      CHECK_MSG(b->place == KP_WORKSPACE && b->offset == at, "conv %d's scratch at %lld, the first's at %lld", k,
                (long long)b->offset, (long long)at);
      CHECK(b->offset >= g->workspace_size && b->offset + b->nbytes <= p.workspace_size);
      if (b->nbytes > most) most = b->nbytes;
    }
  CHECK_MSG(convs >= 5, "%d conv calls", convs);
  CHECK(p.workspace_size <= at + most + 128);
  pc_graph_free(g);
}

/* f32 1-D convs run as 2-D ones of height 1 through the planned conv rows (and their packed weights): a 512-tap
 * kernel at stride 160 (a mel front end), a padded dilated one, a grouped one; against the interpreter */
PC_TEST(codegen_conv1d_as_2d_rows) {
  static const struct {
    int64_t c, o, l, k, stride, pad, dil, groups;
  } cases[] = {{1, 24, 4000, 512, 160, 0, 1, 1}, {8, 16, 301, 5, 2, 3, 2, 1}, {12, 12, 97, 3, 1, 1, 1, 4}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    pc_graph *g = pc_graph_new();
    int64_t wd[3] = {cases[i].o, cases[i].c / cases[i].groups, cases[i].k};
    int64_t nw = wd[0] * wd[1] * wd[2];
    float *wv = malloc(sizeof(float) * (size_t)nw);
    for (int64_t j = 0; j < nw; j++) wv[j] = (float)((j * 37 % 101) - 50) / 400.0f;
    pc_value *x = pc_input_add(g, "x", cg_ty(PC_f32, 3, (int64_t[]){2, cases[i].c, cases[i].l}));
    pc_value *w = pc_const(g, cg_ty(PC_f32, 3, wd), wv);
    free(wv);
    pc_attr a[6] = {pc_a_ints("stride", &cases[i].stride, 1), pc_a_ints("pad_lo", &cases[i].pad, 1),
                    pc_a_ints("pad_hi", &cases[i].pad, 1), pc_a_ints("dilation", &cases[i].dil, 1),
                    pc_a_ints("lhs_dilation", (int64_t[]){1}, 1), pc_a_int("groups", cases[i].groups)};
    int n0 = g->n_nodes;
    pc_value *y = pc_build(g, PC_OP_conv, (pc_value *[]){x, w}, 2, a, 6);
    if (i == 1) { /* clamp(conv + bias, 0, 6) in one group runs inside the conv call */
      const int64_t *d = y->type.dims;
      pc_value *b = pc_input_add(g, "b", cg_ty(PC_f32, 1, (int64_t[]){cases[i].o}));
      y = pc_add(g, y, pc_broadcast_in_dim(g, b, 3, d, (int64_t[]){1}));
      y = pc_max(g, y, pc_broadcast_to(g, pc_scalar(g, PC_f32, 0), 3, d));
      y = pc_min(g, pc_broadcast_to(g, pc_scalar(g, PC_f32, 6), 3, d), y);
      cg_group_from(g, n0, 0);
    }
    pc_output_add(g, y);
    char tag[64];
    snprintf(tag, sizeof tag, "conv1d case %zu", i);
    cg_check_graph(g, (cg_range){-1, 1}, tag);
    if (i == 1) {
      char *listing = pc_test_kernels_text(g);
      CHECK_MSG(listing && strstr(listing, "epilogue") , "conv1d epilogue not fused:\n%s", listing ? listing : "");
      free(listing);
    }
    pc_graph_free(g);
  }
}

/* A per-row value computed from saved statistics and broadcast into a dot's epilogue (a layer norm's sigma,
 * recomputed for its backward, dividing a weight-gradient GEMM's result): the fuser puts the row chain and its
 * broadcast in the dot's group, computed inline in the epilogue's loop. Before, the chain could not join (its
 * values are not over the dot's result shape) and went to a kernel of its own that stored the broadcast at the
 * dot's full size for the epilogue to read back (the encoder's training step: 1 MB a layer norm, ~4 ms a step) */
PC_TEST(fuse_row_values_into_dot_epilogue) {
  pc_graph *g = pc_graph_new();
  pc_value *x = pc_input_add(g, "x", cg_ty(PC_f32, 2, (int64_t[]){64, 32}));
  pc_value *w = pc_input_add(g, "w", cg_ty(PC_f32, 2, (int64_t[]){32, 48}));
  pc_value *v = pc_input_add(g, "v", cg_ty(PC_f32, 2, (int64_t[]){64, 1}));
  pc_value *t = pc_sqrt(g, pc_add(g, pc_div(g, v, pc_full_like(g, 48.0, v)), pc_full_like(g, 1e-5, v)));
  pc_value *bt = pc_broadcast_in_dim(g, t, 2, (int64_t[]){64, 48}, (int64_t[]){0, 1});
  pc_value *d = pc_dot_general(g, x, w, 1, (int64_t[]){1}, (int64_t[]){0}, 0, NULL, NULL);
  pc_output_add(g, pc_div(g, d, bt));
  CHECK_MSG(g->status == PC_OK, "%s", pc_error(g));
  CHECK(pc_pass_fuse(g) == PC_OK);
  CHECK_MSG(t->producer->group >= 0 && t->producer->group == d->producer->group && bt->producer->group == d->producer->group,
            "sqrt in group %d, broadcast in %d, dot in %d", t->producer->group, bt->producer->group, d->producer->group);
  CHECK_INT(g->n_groups, 1);
  cg_check_graph(g, (cg_range){0.5, 2}, "row values in a dot's epilogue");
  pc_graph_free(g);
}

/* The same per-row value broadcast to two kernels of a training step (remat's sigma: a column sum over normalized x
 * in one, the weight-gradient GEMM's epilogue in the other): the fuser's copy of the broadcast for the second reader
 * gets its own copy of the small chain, so that it joins the GEMM's group instead of the first kernel's, which
 * would store it broadcast at full size for the epilogue to read back */
PC_TEST(fuse_row_chain_copied_into_dot_epilogue) {
  pc_graph *g = pc_graph_new();
  g->remat_prims = 1; /* a graph with recomputed prims, as a training step's */
  pc_value *x = pc_input_add(g, "x", cg_ty(PC_f32, 2, (int64_t[]){64, 32}));
  pc_value *w = pc_input_add(g, "w", cg_ty(PC_f32, 2, (int64_t[]){32, 48}));
  pc_value *h = pc_input_add(g, "h", cg_ty(PC_f32, 2, (int64_t[]){64, 48}));
  pc_value *v = pc_input_add(g, "v", cg_ty(PC_f32, 2, (int64_t[]){64, 1}));
  pc_value *t = pc_sqrt(g, pc_add(g, pc_div(g, v, pc_full_like(g, 48.0, v)), pc_full_like(g, 1e-5, v)));
  pc_value *b = pc_broadcast_in_dim(g, t, 2, (int64_t[]){64, 48}, (int64_t[]){0, 1}); /* one node, two readers */
  pc_output_add(g, pc_reduce(g, PC_OP_reduce_sum, pc_div(g, h, b), 1, (int64_t[]){0})); /* a column sum: its own kernel */
  pc_value *d = pc_dot_general(g, x, w, 1, (int64_t[]){1}, (int64_t[]){0}, 0, NULL, NULL);
  pc_output_add(g, pc_div(g, d, b));
  CHECK_MSG(g->status == PC_OK, "%s", pc_error(g));
  CHECK(pc_pass_fuse(g) == PC_OK);
  const pc_node *div2 = g->outputs[1]->producer, *bc = div2->in[1]->producer;
  CHECK_MSG(bc->op == PC_OP_broadcast_in_dim && bc->group == d->producer->group && bc->in[0] != t,
            "the epilogue's broadcast in group %d (the dot's %d), reading %s", bc->group, d->producer->group,
            bc->in[0] == t ? "the shared sigma" : "its own copy");
  cg_check_graph(g, (cg_range){0.5, 2}, "a row chain copied into a dot's epilogue");
  pc_graph_free(g);
}

/* Attention's scores over heads split off [B, S, H, D] without a transpose: the dot's batch dims (0, 2) collapse
 * into two levels, not one, and the call reads both operands in place (primc_k_dot_b2) rather than a copy of each
 * into [B, H, S, D]; compiled against the interpreter. */
PC_TEST(codegen_dot_two_batch_levels) {
  pc_graph *g = pc_graph_new();
  pc_value *q = pc_input_add(g, "q", cg_ty(PC_f32, 4, (int64_t[]){2, 5, 3, 4}));
  pc_value *k = pc_input_add(g, "k", cg_ty(PC_f32, 4, (int64_t[]){2, 6, 3, 4}));
  pc_output_add(g, pc_dot_general(g, q, k, 1, (int64_t[]){3}, (int64_t[]){3}, 2, (int64_t[]){0, 2}, (int64_t[]){0, 2}));
  char *buf = cg_llvm_text(g, 0);
  CHECK_CONTAINS(buf ? buf : "", "@primc_k_dot_b2(");
  CHECK(buf && !strstr(buf, "@primc_k_dot("));
  free(buf);
  cg_check_graph(g, (cg_range){-1, 1}, "dot over two batch levels");
  pc_graph_free(g);
}

/* In a graph with a reverse mode, a transpose feeding a dot folds into the dot's dim numbers (simplify): the head
 * split [B, S, H, D] -> [B, H, S, D] of attention's Q is no kernel any more, and the result is the same */
PC_TEST(simplify_folds_transposes_into_dots) {
  pc_graph *g = pc_graph_new();
  pc_value *q = pc_input_add(g, "q", cg_ty(PC_f32, 4, (int64_t[]){2, 5, 3, 4}));
  pc_value *k = pc_input_add(g, "k", cg_ty(PC_f32, 4, (int64_t[]){2, 3, 6, 4}));
  pc_value *qt = pc_transpose(g, q, (int64_t[]){0, 2, 1, 3}); /* [2, 3, 5, 4] */
  pc_value *s = pc_dot_general(g, qt, k, 1, (int64_t[]){3}, (int64_t[]){3}, 2, (int64_t[]){0, 1}, (int64_t[]){0, 1});
  s->producer->backward = 1; /* a gradient prim, as autodiff stamps them */
  pc_output_add(g, s);
  pc_tensor in[2] = {cg_make_input(q, (cg_range){-1, 1}), cg_make_input(k, (cg_range){-1, 1})}, before, after;
  memset(&before, 0, sizeof before), memset(&after, 0, sizeof after);
  CHECK(pc_interp(g, in, 2, &before, 1) == PC_OK);
  CHECK(pc_pass_simplify(g) == PC_OK && pc_pass_dce(g) == PC_OK);
  int transposes = 0;
  for (int i = 0; i < g->n_nodes; i++) transposes += g->nodes[i]->op == PC_OP_transpose;
  CHECK_INT(transposes, 0);
  const pc_node *d = g->outputs[0]->producer;
  int nb = 0;
  const int64_t *lb = pc_attr_ints(d, "lhs_batch", &nb);
  CHECK(d->op == PC_OP_dot_general && d->in[0] == q && nb == 2 && lb[0] == 0 && lb[1] == 2);
  CHECK(pc_interp(g, in, 2, &after, 1) == PC_OK);
  CHECK(before.data && after.data && !memcmp(before.data, after.data, pc_tensor_nbytes(&before)));
  cg_check_graph(g, (cg_range){-1, 1}, "a folded head split");
  pc_tensor_free(&before), pc_tensor_free(&after), free(in[0].data), free(in[1].data);
  pc_graph_free(g);
}

/* A conv's weight gradient (pc_grad of a conv over its input and weight): one primc_k_dot_cols call per conv,
 * reading the padded input in place, where the columns were one strided slice per tap concatenated (stride 1 and
 * 2 take the gather8 transposes, 3 and the rows' ends the element-by-element walk; 1-D and 2-D, dilated, an image
 * past the first). Compiled against the interpreter, which gathers the columns; for a GPU build (g->gpu) the
 * columns stay stored, and that program agrees too. */
PC_TEST(codegen_weight_gradient_reads_columns_in_place) {
  static const char *const convs[] = {
      "graph(%x : f32[2,3,9,11], %w : f32[4,3,3,3]):\n"
      "  %y : f32[2,4,9,11] = conv(%x, %w, stride=[1,1], pad_lo=[1,1], pad_hi=[1,1], dilation=[1,1], lhs_dilation=[1,1], groups=1)\n"
      "  return (%y)\n",
      "graph(%x : f32[1,2,20,23], %w : f32[5,2,3,2]):\n"
      "  %y : f32[1,5,8,11] = conv(%x, %w, stride=[2,2], pad_lo=[0,1], pad_hi=[0,0], dilation=[2,3], lhs_dilation=[1,1], groups=1)\n"
      "  return (%y)\n",
      "graph(%x : f32[3,4,40], %w : f32[6,4,5]):\n"
      "  %y : f32[3,6,13] = conv(%x, %w, stride=[3], pad_lo=[2], pad_hi=[1], dilation=[1], lhs_dilation=[1], groups=1)\n"
      "  return (%y)\n",
  };
  for (size_t i = 0; i < sizeof convs / sizeof *convs; i++)
    for (int gpu = 0; gpu < 2; gpu++) {
      pc_graph *g = pc_graph_parse(convs[i], strlen(convs[i]), "wgrad", NULL);
      if (!CHECK_MSG(g && g->status == PC_OK, "case %zu: %s", i, g ? pc_error(g) : "")) {
        pc_graph_free(g);
        continue;
      }
      g->gpu = gpu;
      CHECK_MSG(pc_grad(g, NULL) == PC_OK && pc_pipeline_run(g, &(pc_pipeline_opts){.opt_level = 2}) == PC_OK,
                "case %zu: %s", i, pc_error(g));
      char *text = pc_test_kernels_text(g), tag[64];
      int calls = 0;
      for (const char *s = text; s && (s = strstr(s, "call primc_k_dot_cols(")); s++) calls++;
      CHECK_MSG(calls == !gpu, "case %zu, gpu %d: %d primc_k_dot_cols calls:\n%s", i, gpu, calls, text ? text : "");
      free(text);
      snprintf(tag, sizeof tag, "weight gradient case %zu, gpu %d", i, gpu);
      cg_check_graph(g, (cg_range){-1, 1}, tag);
      pc_graph_free(g);
    }
}

/* A 3x3 weight gradient whose stride equals its dilation runs as Winograd F(2x2, 3x3) (runtime/conv/winograd.c):
 * odd maps (partial tiles), a 2x2 map, stride and dilation 2, more tiles than one chunk (the GEMMs adding to their
 * sums), a wide output; at stride 1 reading the input unpadded where it lies, its transpose and pad in the call. Checked against the interpreter on the same graph in f64 (which gathers the columns):
 * every output within 1e-5 of its largest magnitude, as the forward Winograd row is tested. */
PC_TEST(codegen_weight_gradient_winograd) {
  static const char *const convs[] = {
      "graph(%x : T[2,64,9,11], %w : T[65,64,3,3]):\n"
      "  %y : T[2,65,9,11] = conv(%x, %w, stride=[1,1], pad_lo=[1,1], pad_hi=[1,1], dilation=[1,1], lhs_dilation=[1,1], groups=1)\n"
      "  return (%y)\n",
      "graph(%x : T[3,70,2,2], %w : T[64,70,3,3]):\n"
      "  %y : T[3,64,2,2] = conv(%x, %w, stride=[1,1], pad_lo=[1,1], pad_hi=[1,1], dilation=[1,1], lhs_dilation=[1,1], groups=1)\n"
      "  return (%y)\n",
      "graph(%x : T[2,64,20,23], %w : T[66,64,3,3]):\n"
      "  %y : T[2,66,10,12] = conv(%x, %w, stride=[2,2], pad_lo=[2,2], pad_hi=[2,2], dilation=[2,2], lhs_dilation=[1,1], groups=1)\n"
      "  return (%y)\n",
      "graph(%x : T[1,64,40,40], %w : T[64,64,3,3]):\n"
      "  %y : T[1,64,40,40] = conv(%x, %w, stride=[1,1], pad_lo=[1,1], pad_hi=[1,1], dilation=[1,1], lhs_dilation=[1,1], groups=1)\n"
      "  return (%y)\n",
      "graph(%x : T[1,64,6,70], %w : T[72,64,3,3]):\n"
      "  %y : T[1,72,6,70] = conv(%x, %w, stride=[1,1], pad_lo=[1,1], pad_hi=[1,1], dilation=[1,1], lhs_dilation=[1,1], groups=1)\n"
      "  return (%y)\n",
  };
  for (size_t i = 0; i < sizeof convs / sizeof *convs; i++) {
    pc_graph *gs[2] = {NULL, NULL};
    for (int d = 0; d < 2; d++) { /* f32, then f64 */
      char text[1024];
      size_t n = 0;
      for (const char *c = convs[i]; *c && n + 4 < sizeof text; c++)
        if (*c == 'T' && c[1] == '[') memcpy(text + n, d ? "f64" : "f32", 3), n += 3;
        else text[n++] = *c;
      text[n] = 0;
      gs[d] = pc_graph_parse(text, n, "wgrad", NULL);
      CHECK_MSG(gs[d] && gs[d]->status == PC_OK && pc_grad(gs[d], NULL) == PC_OK, "case %zu: %s", i,
                gs[d] ? pc_error(gs[d]) : "");
    }
    pc_graph *g = gs[0];
    if (!CHECK_MSG(g->status == PC_OK && gs[1]->status == PC_OK &&
                       pc_pipeline_run(g, &(pc_pipeline_opts){.opt_level = 2}) == PC_OK,
                   "case %zu: %s", i, pc_error(g))) {
      pc_graph_free(gs[0]), pc_graph_free(gs[1]);
      continue;
    }
    char *text = pc_test_kernels_text(g), tag[64];
    CHECK_MSG(text && strstr(text, "weight gradient as Winograd F(2x2, 3x3)"), "case %zu:\n%s", i, text ? text : "");
    /* stride 1: the input's transpose and pad joined the call, which reads the input unpadded (fuse.c) */
    CHECK_MSG(text && !strstr(text, "the input read unpadded where it lies") == (i == 2), "case %zu:\n%s", i,
              text ? text : "");
    free(text);
    snprintf(tag, sizeof tag, "Winograd weight gradient case %zu", i);
    pc_tensor in[8], in64[8], got[8], ref[8];
    memset(got, 0, sizeof got), memset(ref, 0, sizeof ref);
    for (int k = 0; k < g->n_inputs; k++) {
      in[k] = cg_make_input(g->inputs[k], (cg_range){-1, 1});
      in64[k] = in[k], in64[k].dtype = PC_f64;
      int64_t n = pc_tensor_numel(&in[k]);
      double *v = malloc(sizeof(double) * (size_t)n);
      for (int64_t e = 0; v && e < n; e++) v[e] = ((const float *)in[k].data)[e];
      in64[k].data = v;
    }
    if (CHECK_MSG(pc_interp(gs[1], in64, g->n_inputs, ref, g->n_outputs) == PC_OK, "%s: %s", tag, pc_error(gs[1])) &&
        cg_run_compiled(g, in, got, tag))
      for (int o = 0; o < g->n_outputs; o++) {
        int64_t n = pc_tensor_numel(&ref[o]), worst = 0;
        double top = 0, err = 0;
        for (int64_t e = 0; e < n; e++) top = fmax(top, fabs(((const double *)ref[o].data)[e]));
        for (int64_t e = 0; e < n; e++) {
          double d = fabs(((const float *)got[o].data)[e] - ((const double *)ref[o].data)[e]);
          if (!(d <= err)) err = d, worst = e;
        }
        CHECK_MSG(top > 0 && err <= 1e-5 * top, "%s: out%d[%lld] off by %.3g, largest |ref| %.3g", tag, o,
                  (long long)worst, err, top);
      }
    for (int k = 0; k < g->n_inputs; k++) free(in[k].data), free(in64[k].data);
    for (int o = 0; o < g->n_outputs; o++) pc_tensor_free(&got[o]), pc_tensor_free(&ref[o]);
    pc_graph_free(gs[0]), pc_graph_free(gs[1]);
  }
}

/* bf16's rounding of an f32 (to nearest, ties to even), as the pass's converts round */
static float bf16_round(float v) {
  uint32_t u;
  memcpy(&u, &v, sizeof u);
  u = (u + 0x7fffu + (u >> 16 & 1u)) & 0xffff0000u;
  memcpy(&v, &u, sizeof v);
  return v;
}

/* --autocast bf16 on a host CPU whose bf16 row only converts (forced here) rounds a contraction's operands to bf16
 * and keeps it on the f32 rows: no bf16 call, the listing's head says so, and the result is the bf16 roundings of x
 * and w multiplied in double within f32's summation error, off the f32 product by bf16's rounding. There
 * --matmul-precision medium is f32 itself (torch's matmul precision where no fast bf16 algorithm exists) */
PC_TEST(autocast_bf16_rounds_operands_without_bf16_dot_products) {
  if (primc_bgemm_force_row(PRIMC_BGEMM_ROW_AVX2) < 0) {
    SKIP("no AVX2: the converting bf16 row cannot be forced");
    return;
  }
  enum { M = 16, K = 96, N = 40 };
  float *w = malloc(sizeof(float) * K * N);
  for (int i = 0; i < K * N; i++) w[i] = (float)((i * 7919) % 211 - 105) / 97.0f;
  pc_tensor x = pc_test_pattern_f32(2, (int64_t[]){M, K});
  for (int mode = 0; mode < 2; mode++) {
    const char *tag = mode ? "matmul precision medium" : "autocast bf16";
    pc_graph *g = pc_graph_new();
    if (mode) g->matmul_precision = PC_MATMUL_MEDIUM;
    else g->autocast = PC_AUTOCAST_BF16;
    pc_value *xv = pc_input_add(g, "x", cg_ty(PC_f32, 2, (int64_t[]){M, K}));
    pc_value *wv = pc_const(g, cg_ty(PC_f32, 2, (int64_t[]){K, N}), w);
    pc_output_add(g, pc_dot_general(g, xv, wv, 1, (int64_t[]){1}, (int64_t[]){0}, 0, NULL, NULL));
    pc_pipeline_opts po = {.opt_level = 2};
    CHECK_INT(pc_pipeline_run(g, &po), PC_OK);
    CHECK_MSG(g->bf16_f32_rows, "%s: not marked for the f32 rows", tag);
    char *text = pc_test_kernels_text(g);
    CHECK_MSG(text && strstr(text, "no bf16 dot products on this CPU: contractions on the f32 rows") &&
                  !strstr(text, "dot_bf16") && (!strstr(text, "rounded to bf16")) == mode,
              "%s:\n%s", tag, text ? text : "");
    free(text);
    pc_tensor out[1];
    if (pc_test_run_compiled(g, 2, &x, out, tag)) {
      double worst_r = 0, worst_f = 0, top = 0;
      for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
          double r = 0, f = 0;
          for (int k = 0; k < K; k++) {
            float a = ((float *)x.data)[m * K + k], b = w[k * N + n];
            r += (double)bf16_round(a) * bf16_round(b), f += (double)a * b;
          }
          double got = ((float *)out[0].data)[m * N + n];
          worst_r = fmax(worst_r, fabs(got - r)), worst_f = fmax(worst_f, fabs(got - f)), top = fmax(top, fabs(f));
        }
      /* f32 sums of 96 products: within 1e-5 of the largest; bf16's rounding: 2^-9 relative on each operand */
      if (mode) CHECK_MSG(worst_f <= 1e-5 * top, "%s: off the f32 product by %g of %g", tag, worst_f, top);
      else CHECK_MSG(worst_r <= 1e-5 * top && worst_f > 1e-4 * top, "%s: off the rounded product by %g, the f32 one by %g "
                     "(largest %g)", tag, worst_r, worst_f, top);
      free(out[0].data);
    }
    pc_graph_free(g);
  }
  /* a conv's bias + ReLU6, rounded to bf16 for the next conv, in the conv's epilogue (act BF16), as fp16's is */
  pc_graph *g = pc_graph_new();
  g->autocast = PC_AUTOCAST_BF16;
  pc_value *xv = pc_input_add(g, "x", cg_ty(PC_f32, 4, (int64_t[]){1, 16, 9, 9}));
  pc_value *y = xv;
  for (int l = 0; l < 2; l++) {
    pc_value *wc = pc_const(g, cg_ty(PC_f32, 4, (int64_t[]){16, 16, 1, 1}), w + 256 * l);
    pc_value *bc = pc_const(g, cg_ty(PC_f32, 1, (int64_t[]){16}), w + 600);
    pc_attr a[6] = {pc_a_ints("stride", (int64_t[]){1, 1}, 2), pc_a_ints("pad_lo", (int64_t[]){0, 0}, 2),
                    pc_a_ints("pad_hi", (int64_t[]){0, 0}, 2), pc_a_ints("dilation", (int64_t[]){1, 1}, 2),
                    pc_a_ints("lhs_dilation", (int64_t[]){1, 1}, 2), pc_a_int("groups", 1)};
    y = pc_build(g, PC_OP_conv, (pc_value *[]){y, wc}, 2, a, 6);
    y = pc_add(g, y, pc_broadcast_in_dim(g, bc, 4, (int64_t[]){1, 16, 9, 9}, (int64_t[]){1}));
    y = pc_max(g, y, pc_broadcast_to(g, pc_scalar(g, PC_f32, 0), 4, (int64_t[]){1, 16, 9, 9}));
    y = pc_min(g, y, pc_broadcast_to(g, pc_scalar(g, PC_f32, 6), 4, (int64_t[]){1, 16, 9, 9}));
  }
  pc_output_add(g, y);
  pc_pipeline_opts po = {.opt_level = 2};
  CHECK_INT(pc_pipeline_run(g, &po), PC_OK);
  char *text = pc_test_kernels_text(g);
  /* x's rounding, then each conv with its epilogue: the first's rounding is no kernel of its own */
  CHECK_MSG(text && strstr(text, "kernel k1 = call primc_k_conv(") && strstr(text, "with epilogue k2 in the call") &&
                strstr(text, "kernel k3 = call primc_k_conv(") && !strstr(text, "kernel k5"),
            "the first conv's epilogue:\n%s", text ? text : "");
  free(text);
  pc_tensor xin = pc_test_pattern_f32(4, (int64_t[]){1, 16, 9, 9});
  pc_test_compiled_matches_interp(g, &xin, 1, 1e-5f, "two 1x1 convs under autocast bf16, the f32 rows");
  free(xin.data);
  pc_graph_free(g);
  primc_bgemm_force_row(-1);
  free(w), free(x.data);
}
