/* tests/unit/test_cuda_emu.c: the zoo's CUDA programs, as `primc compile --target cuda` renders them, run on the CPU
 * emulator of rendered CUDA C (tests/unit/cuda_emu.h) and checked against ONNX Runtime's outputs (expected.npy). */
#include "codegen/codegen.h"
#include "codegen/kir.h"
#include "frontend/composite.h"
#include "frontend/frontend.h"
#include "ir/ir.h"
#include "passes/passes.h"
#include "runtime/primc_rt.h"
#include "tests/test.h"
#include "tests/unit/cuda_emu.h"
#include "api/dyn_source.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the model's CUDA program (at that matmul precision and autocast) run on input.npy; 1 when output 0 is within tol
 * of max |expected| of expected.npy (bench/gpu.py's 1e-4 against ONNX Runtime for f32), -1 when there is no
 * compiler for the emulator */
static int emulate_model(const char *name, int precision, int autocast, double tol) {
  char path[512], err[512] = "";
  snprintf(path, sizeof path, "%s/models/%s/model.onnx", pc_test_srcdir(), name);
  pc_import_opts io = {0};
  pc_graph *g = pc_model_load(path, &io);
  if (!CHECK_MSG(g && !g->status, "%s: %s", name, g ? pc_error(g) : "load failed")) return pc_graph_free(g), 0;
  g->matmul_precision = precision;
  g->autocast = autocast;
  pc_pipeline_opts po = {.opt_level = 2};
  int ok = CHECK_MSG(pc_pipeline_run(g, &po) == PC_OK, "%s: %s", name, pc_error(g));
  primc_array in = {0}, want = {0};
  char ip[512], ep[512];
  snprintf(ip, sizeof ip, "%s/models/%s/input.npy", pc_test_srcdir(), name);
  snprintf(ep, sizeof ep, "%s/models/%s/expected.npy", pc_test_srcdir(), name);
  ok = ok && CHECK_MSG(g->n_outputs <= 8, "%s: %d outputs, room for 8", name, g->n_outputs);
  ok = ok && CHECK_MSG(g->n_inputs == 1 && primc_npy_read(ip, &in, err, sizeof err) == 0, "%s: input: %s", name, err);
  ok = ok && CHECK_MSG(primc_npy_read(ep, &want, err, sizeof err) == 0, "%s: expected: %s", name, err);
  void *outs[8] = {0};
  for (int i = 0; ok && i < g->n_outputs && i < 8; i++) {
    pc_tensor t = {g->outputs[i]->type.dtype, g->outputs[i]->type.rank, {0}, NULL};
    memcpy(t.dims, g->outputs[i]->type.dims, sizeof t.dims);
    outs[i] = calloc(1, pc_tensor_nbytes(&t) + 1);
  }
  int n_kernels = 0, r = ok ? pc_emu_graph(g, &in.data, outs, &n_kernels, err, sizeof err) : 0;
  if (r >= 0) ok = CHECK_MSG(r == 1, "%s: %s", name, err);
  int64_t n = primc_array_numel(&want);
  ok = ok && CHECK_MSG(want.dtype == PRIMC_F32 && g->outputs[0]->type.dtype == PC_f32 &&
                           n == pc_type_numel(&g->outputs[0]->type), "%s: expected.npy is not output 0's f32 shape", name);
  double max_ref = 0, max_err = 0;
  for (int64_t i = 0; ok && i < n; i++) {
    double e = ((const float *)want.data)[i], v = ((const float *)outs[0])[i];
    if (fabs(e) > max_ref) max_ref = fabs(e);
    if (!(fabs(v - e) <= max_err)) max_err = isnan(v) ? INFINITY : fabs(v - e);
  }
  ok = ok && CHECK_MSG(max_err <= tol * max_ref, "%s: max error %.3g against ONNX Runtime, max |ref| %.3g", name, max_err,
                       max_ref);
  if (ok) fprintf(stderr, "  cuda emulator: %s (%s%s%s) within %.1e of max |ref| (%d kernels)\n", name,
                  pc_matmul_precision_name(precision), autocast ? ", autocast " : "", autocast ? pc_autocast_name(autocast) : "",
                  max_err / (max_ref > 0 ? max_ref : 1), n_kernels);
  for (int i = 0; i < 8; i++) free(outs[i]);
  free(in.data);
  free(want.data);
  pc_graph_free(g);
  return r < 0 ? -1 : ok;
}

/* the zoo's small models end to end: tiled GEMM convs and dots with their epilogues, reductions (warp shuffles),
 * attention, gathers, the LSTM's loop; resnet_tiny again on TF32 tensor cores (matmul precision high), and the
 * models under --autocast bf16 (bf16 tensor cores: operands rounded to bf16, 8 significant bits, so a layer's
 * relative error is about 2^-9 sqrt(depth): 2e-2 of max |ref| leaves room for ten times that, and a wrong fragment
 * or rounding is off by the size of a product) and two under --autocast fp16 (f16 tensor cores on f16-exact
 * operands, within 1e-2). PRIMC_EMU_MODELS="large/resnet50 ..." (folders under models/ with expected.npy) adds
 * more, in fp32: a minute or more each, so not in make test (the emulated mma.sync switches fibers twice a call:
 * TF32 would take hours) */
PC_TEST(cuda_emu_zoo) {
  static const char *const zoo[] = {"mlp", "resnet_tiny", "yolo_tiny", "encoder_tiny", "gpt_block_tiny", "lstm"};
  for (size_t i = 0; i < sizeof zoo / sizeof *zoo; i++)
    if (emulate_model(zoo[i], PC_MATMUL_HIGHEST, PC_AUTOCAST_NONE, 1e-4) < 0) {
      SKIP("no g++ for the CUDA emulator");
      return;
    }
  emulate_model("resnet_tiny", PC_MATMUL_HIGH, PC_AUTOCAST_NONE, 1e-2);
  static const char *const bf16[] = {"mlp", "resnet_tiny", "yolo_tiny", "encoder_tiny", "gpt_block_tiny", "lstm"};
  for (size_t i = 0; i < sizeof bf16 / sizeof *bf16; i++) emulate_model(bf16[i], PC_MATMUL_HIGHEST, PC_AUTOCAST_BF16, 2e-2);
  /* --autocast fp16 leaves f16-exact operands: the f16 rows (exact products), f16's rounding of the operands only */
  emulate_model("resnet_tiny", PC_MATMUL_HIGHEST, PC_AUTOCAST_FP16, 1e-2);
  emulate_model("encoder_tiny", PC_MATMUL_HIGHEST, PC_AUTOCAST_FP16, 1e-2);
  const char *more = getenv("PRIMC_EMU_MODELS");
  char name[256];
  for (int n = 0; more && sscanf(more, " %255s%n", name, &n) == 1; more += n) {
    emulate_model(name, PC_MATMUL_HIGHEST, PC_AUTOCAST_NONE, 1e-4);
  }
}

/* An f16 model's attention as BERT exports it (scores scaled by a Div and masked by an f16 padding mask between the
 * MatMuls, softmax in f32 by the composite): the pipeline makes it one attention call reading the mask widened to
 * f32 (codegen/kir_calls.c), rendered for CUDA and run on the emulator, against the interpreter's op-by-op f16 run
 * of the same graph (its scores and probabilities rounded to f16: a few units of f16, within 3e-3 (1 + |ref|)) */
PC_TEST(cuda_emu_f16_attention) {
  pc_graph *g = pc_graph_new();
  int64_t qs[4] = {2, 3, 40, 16}, ms[4] = {2, 1, 1, 40}, ss[4] = {2, 3, 40, 40}, perm[4] = {0, 1, 3, 2};
  int64_t c3[1] = {3}, c2[1] = {2}, b01[2] = {0, 1}, all[4] = {0, 1, 2, 3};
  pc_value *q = pc_input_add(g, "q", pc_type_make(PC_f16, 4, qs)), *k = pc_input_add(g, "k", pc_type_make(PC_f16, 4, qs));
  pc_value *v = pc_input_add(g, "v", pc_type_make(PC_f16, 4, qs)), *m = pc_input_add(g, "m", pc_type_make(PC_f16, 4, ms));
  pc_value *s = pc_dot_general(g, q, pc_transpose(g, k, perm), 1, c3, c2, 2, b01, b01);
  s = pc_div(g, s, pc_full_like(g, 4, s));
  s = pc_add(g, s, pc_broadcast_in_dim(g, m, 4, ss, all));
  pc_output_add(g, pc_dot_general(g, fc_softmax(g, s, 3, 0), v, 1, c3, c2, 2, b01, b01));
  if (!CHECK_MSG(g->status == PC_OK, "%s", pc_error(g))) return pc_graph_free(g);
  enum { NQ = 2 * 3 * 40 * 16, NM = 2 * 40 };
  static uint16_t in[3][NQ], mask[NM], got[NQ];
  uint64_t r = 88172645463325252ull;
  for (int t = 0; t < 3; t++)
    for (int i = 0; i < NQ; i++) {
      r ^= r << 13, r ^= r >> 7, r ^= r << 17;
      in[t][i] = pc_f32_to_f16((float)((double)(r % 20001) / 10000.0 - 1.0) * 1.5f);
    }
  for (int i = 0; i < NM; i++) mask[i] = pc_f32_to_f16(i % 40 >= 30 ? -10000.0f : 0.0f);
  pc_tensor ti[4] = {{PC_f16, 4, {2, 3, 40, 16}, in[0]}, {PC_f16, 4, {2, 3, 40, 16}, in[1]},
                     {PC_f16, 4, {2, 3, 40, 16}, in[2]}, {PC_f16, 4, {2, 1, 1, 40}, mask}}, ref;
  memset(&ref, 0, sizeof ref);
  int ok = CHECK_MSG(pc_interp(g, ti, 4, &ref, 1) == PC_OK, "interp: %s", pc_error(g));
  pc_pipeline_opts po = {.opt_level = 2};
  ok = ok && CHECK_MSG(pc_pipeline_run(g, &po) == PC_OK, "%s", pc_error(g));
  kir_program kp;
  int calls = 0;
  if (ok && CHECK_MSG(kir_build(g, &kp) == PC_OK, "kir: %s", pc_error(g)))
    for (int i = 0; i < kp.n_kernels; i++) calls += kp.kernels[i].kind == KK_CALL && kp.kernels[i].call == KC_attention;
  ok = ok && CHECK_MSG(calls == 1, "%d attention calls, wanted the chain as one", calls);
  void *ins[4] = {in[0], in[1], in[2], mask}, *outs[1] = {got};
  char err[512] = "";
  int n_kernels = 0, rc = ok ? pc_emu_graph(g, ins, outs, &n_kernels, err, sizeof err) : 0;
  if (rc < 0) {
    SKIP("no g++ for the CUDA emulator");
  } else if (ok && CHECK_MSG(rc == 1, "%s", err)) {
    double worst = 0;
    for (int i = 0; i < NQ; i++) {
      double a = pc_f16_to_f32(got[i]), b = pc_f16_to_f32(((uint16_t *)ref.data)[i]), e = fabs(a - b) / (1 + fabs(b));
      if (!(e <= worst)) worst = isnan(e) ? INFINITY : e;
    }
    CHECK_MSG(worst <= 3e-3, "emulated f16 attention off the interpreter by %.3g (1 + |ref|)", worst);
  }
  pc_tensor_free(&ref);
  pc_graph_free(g);
}

/* ---------------------------------------------------------------- run-time dims */

/* One compile of models/dynamic/NAME with its ranges (kir_cuda_dynamic: the kernels take the dims as arguments),
 * run on the emulator at each size it has a case for (in_CASE_k.npy, expected_CASE.npy, from ONNX Runtime), each
 * grid made from the fitted factors and each output's dims from the fitted polynomials, as the host side does;
 * within 1e-4 of max |expected|. -1 when there is no g++ */
static int emulate_dynamic(const char *name, const pc_dim_binding *dims, int n_dims, const char *const *cases, int n_cases) {
  char path[512], err[512] = "";
  snprintf(path, sizeof path, "%s/models/dynamic/%s/model.onnx", pc_test_srcdir(), name);
  pc_import_opts io = {0};
  io.dims = dims, io.n_dims = n_dims;
  pc_dyn_source src;
  pc_dyn_spec spec;
  memset(&src, 0, sizeof src);
  if (!CHECK_MSG(pc_dyn_source_init(&src, &spec, &io) == n_dims, "%s: %d ranges", name, n_dims)) return 0;
  src.path = path;
  src.po = (pc_pipeline_opts){.opt_level = 2};
  pc_graph *g = pc_dyn_source_build(&src, NULL);
  pc_codegen_opts o = {.emit = PC_EMIT_CUDA, .output = "unused", .dyn = &spec};
  kir_program p;
  pc_cuda_launch *L = NULL;
  kir_cuda_dyn *d = NULL;
  char *cu = NULL;
  int ok = CHECK_MSG(g && !g->status, "%s: %s", name, g ? pc_error(g) : "load failed");
  pc_status cs = ok ? kir_cuda_dynamic(g, &o, &p, &cu, &L, &d) : PC_OK; /* before pc_error(g) is read */
  ok = ok && CHECK_MSG(cs == PC_OK, "%s: %s", name, pc_error(g));
  ok = ok && CHECK_MSG(d->n_syms == n_dims && d->n_sizes > 0 && strstr(cu, "const long long pc_s0"),
                       "%s: %d symbols, %d sizes follow them", name, d->n_syms, d->n_sizes);
  int no_cc = 0;
  pc_emu *e = ok ? pc_emu_compile(cu, err, sizeof err, &no_cc) : NULL;
  free(cu);
  if (ok && !e) {
    pc_graph_free(g);
    return no_cc ? -1 : CHECK_MSG(0, "%s: %s", name, err);
  }
  unsigned char *wt = ok ? kir_weights_blob(&p) : NULL;
  for (int c = 0; ok && c < n_cases; c++) {
    primc_array in[4] = {{0}}, want = {0};
    void *ins[4] = {0}, *outs[1] = {0};
    int64_t v[KIR_DYN_MAX_SYMS] = {0};
    for (int s = 0; s < d->n_syms; s++) v[s] = d->hi[s] / d->mult[s];
    for (int i = 0; ok && i < g->n_inputs && i < 4; i++) {
      snprintf(path, sizeof path, "%s/models/dynamic/%s/in_%s_%d.npy", pc_test_srcdir(), name, cases[c], i);
      ok = CHECK_MSG(primc_npy_read(path, &in[i], err, sizeof err) == 0, "%s: %s", path, err);
      for (int r = 0; ok && r < in[i].rank; r++)
        if (d->in_sym[i * PC_MAX_RANK + r] >= 0) /* the symbol: the dim over its multiple */
          v[d->in_sym[i * PC_MAX_RANK + r]] = in[i].dims[r] / d->mult[d->in_sym[i * PC_MAX_RANK + r]];
      ins[i] = in[i].data;
    }
    snprintf(path, sizeof path, "%s/models/dynamic/%s/expected_%s.npy", pc_test_srcdir(), name, cases[c]);
    ok = ok && CHECK_MSG(primc_npy_read(path, &want, err, sizeof err) == 0, "%s: %s", path, err);
    int64_t n = 1;
    for (int r = 0; ok && r < g->outputs[0]->type.rank; r++) {
      int64_t dim = kir_poly_eval(&d->out_dim[r], d->n_syms, v);
      ok = CHECK_MSG(r < want.rank && dim == want.dims[r], "%s at %s: output dim %d is %lld", name, cases[c], r, (long long)dim);
      n *= dim;
    }
    ok = ok && CHECK_MSG(n == primc_array_numel(&want), "%s at %s: output size", name, cases[c]);
    unsigned char *ws = calloc(1, (size_t)p.workspace_size + 1);
    outs[0] = ok ? calloc((size_t)n + 1, sizeof(float)) : NULL;
    ok = ok && CHECK_MSG(ws && pc_emu_run(e, &p, L, d, v, ins, outs, wt, ws, err, sizeof err), "%s at %s: %s", name,
                         cases[c], err);
    double max_ref = 0, max_err = 0;
    for (int64_t i = 0; ok && i < n; i++) {
      double x = ((const float *)want.data)[i], y = ((const float *)outs[0])[i];
      if (fabs(x) > max_ref) max_ref = fabs(x);
      if (!(fabs(y - x) <= max_err)) max_err = isnan(y) ? INFINITY : fabs(y - x);
    }
    ok = ok && CHECK_MSG(max_err <= 1e-4 * max_ref, "%s at %s: max error %.3g against ONNX Runtime, max |ref| %.3g", name,
                         cases[c], max_err, max_ref);
    if (ok) fprintf(stderr, "  cuda emulator, run-time dims: %s at %s within %.1e of max |ref|\n", name, cases[c],
                    max_err / (max_ref > 0 ? max_ref : 1));
    for (int i = 0; i < 4; i++) free(in[i].data);
    free(want.data);
    free(outs[0]);
    free(ws);
  }
  free(wt);
  pc_emu_close(e);
  pc_graph_free(g);
  return ok;
}

/* One CUDA program for a range of dims (issue 21, item 5): a CNN over batch 1..8 (its convs as tiled GEMMs whose tile
 * counts follow the batch), an encoder over batch 1..4 and sequence 1..32 (gathers, layer norms as row chains,
 * attention, dots), a CNN over H, W = 4..32 (means: a division by H, a scale by 1/(H W)) and one of strided convs
 * and a max pool over H, W in multiples of 16, each at its cases' sizes, against ONNX Runtime */
PC_TEST(cuda_emu_run_time_dims) {
  const pc_dim_binding cnn[] = {{"N", 1, 8, 0, 0}}, enc[] = {{"batch", 1, 4, 0, 0}, {"seq", 1, 32, 0, 0}};
  static const char *const cnn_cases[] = {"1x3x64x64", "3x3x64x64", "8x3x64x64"};
  static const char *const enc_cases[] = {"1x1", "1x7", "2x13", "3x32", "4x32"};
  if (emulate_dynamic("batch_cnn", cnn, 1, cnn_cases, 3) < 0) {
    SKIP("no g++ for the CUDA emulator");
    return;
  }
  emulate_dynamic("seq_encoder", enc, 2, enc_cases, 5);
  const pc_dim_binding img[] = {{"H", 4, 32, 0, 0}, {"W", 4, 32, 0, 0}};
  static const char *const img_cases[] = {"1x3x4x4", "1x3x7x19", "1x3x13x5", "1x3x32x32"};
  emulate_dynamic("image_cnn", img, 2, img_cases, 4);
  const pc_dim_binding strided[] = {{"H", 16, 96, 0, 16}, {"W", 16, 96, 0, 16}};
  static const char *const strided_cases[] = {"1x3x16x16", "1x3x32x80", "1x3x96x48", "1x3x96x96"};
  emulate_dynamic("strided_cnn", strided, 2, strided_cases, 4);
}

/* dot_b2 (a dot whose batch dims collapse into two levels: heads split off [B, S, H, D] read in place) rendered for
 * CUDA and run on the emulator, against the interpreter */
PC_TEST(cuda_emu_dot_two_batch_levels) {
  pc_graph *g = pc_graph_new();
  int64_t qs[4] = {2, 5, 3, 4}, ks[4] = {2, 6, 3, 4};
  pc_value *q = pc_input_add(g, "q", pc_type_make(PC_f32, 4, qs)), *k = pc_input_add(g, "k", pc_type_make(PC_f32, 4, ks));
  pc_output_add(g, pc_dot_general(g, q, k, 1, (int64_t[]){3}, (int64_t[]){3}, 2, (int64_t[]){0, 2}, (int64_t[]){0, 2}));
  static float qd[120], kd[144], got[180];
  for (int i = 0; i < 120; i++) qd[i] = (float)((i * 37) % 19) / 9.0f - 1.0f;
  for (int i = 0; i < 144; i++) kd[i] = (float)((i * 23) % 17) / 8.0f - 1.0f;
  pc_tensor ti[2] = {{PC_f32, 4, {2, 5, 3, 4}, qd}, {PC_f32, 4, {2, 6, 3, 4}, kd}}, ref;
  memset(&ref, 0, sizeof ref);
  int ok = CHECK_MSG(pc_interp(g, ti, 2, &ref, 1) == PC_OK, "interp: %s", pc_error(g));
  kir_program kp;
  int b2 = 0;
  if (ok && CHECK_MSG(kir_build(g, &kp) == PC_OK, "kir: %s", pc_error(g)))
    for (int i = 0; i < kp.n_kernels; i++) b2 += kp.kernels[i].kind == KK_CALL && kp.kernels[i].call == KC_dot_b2;
  ok = ok && CHECK_MSG(b2 == 1, "%d dot_b2 calls", b2);
  void *ins[2] = {qd, kd}, *outs[1] = {got};
  char err[512] = "";
  int rc = ok ? pc_emu_graph(g, ins, outs, NULL, err, sizeof err) : 0;
  if (rc < 0) {
    SKIP("no g++ for the CUDA emulator");
  } else if (ok && CHECK_MSG(rc == 1, "%s", err)) {
    for (int i = 0; i < 180; i++) CHECK_NEAR(got[i], ((const float *)ref.data)[i], 1e-5);
  }
  pc_tensor_free(&ref);
  pc_graph_free(g);
}

/* A CUDA program plans nothing for the compiling machine's CPU: a 1x1 conv + ReLU feeding a depthwise conv (a
 * pair_dw on an AVX2 host) stays two launches, each conv's scratch the im2col's size that CUDA's split-K uses, not
 * a CPU row's (which differed between sizes on an AVX-512 host and split --dim buckets), and the program is the same whichever CPU
 * row PRIMC_CONV_ROW forces; the emulator's result matches the interpreter's. */
PC_TEST(cuda_program_plans_no_cpu_row) {
  static float xd[16 * 12 * 12], w1[32 * 16], w2[32 * 9], got[32 * 12 * 12];
  for (int i = 0; i < 16 * 12 * 12; i++) xd[i] = (float)((i * 37) % 23) / 11.0f - 1.0f;
  for (int i = 0; i < 32 * 16; i++) w1[i] = (float)((i * 13) % 17) / 16.0f - 0.5f;
  for (int i = 0; i < 32 * 9; i++) w2[i] = (float)((i * 7) % 11) / 10.0f - 0.5f;
  const int64_t one[2] = {1, 1}, zero[2] = {0, 0};
  int64_t workspace[2] = {0};
  const char *rows[2] = {NULL, "gemm_t_panels"}; /* NULL: the planner's rows, pair_dw among them */
  for (int r = 0; r < 2; r++) {
    pc_graph *g = pc_graph_new();
    pc_value *x = pc_input_add(g, "x", pc_type_make(PC_f32, 4, (int64_t[]){1, 16, 12, 12}));
    pc_value *y = pc_conv(g, x, pc_const(g, pc_type_make(PC_f32, 4, (int64_t[]){32, 16, 1, 1}), w1), 2, one, zero,
                          zero, one, one, 1);
    y = pc_max(g, y, pc_full_like(g, 0, y));
    pc_output_add(g, pc_conv(g, y, pc_const(g, pc_type_make(PC_f32, 4, (int64_t[]){32, 1, 3, 3}), w2), 2, one, one,
                             one, one, one, 32));
    pc_tensor ti[1] = {{PC_f32, 4, {1, 16, 12, 12}, xd}}, ref;
    memset(&ref, 0, sizeof ref);
    int ok = CHECK_MSG(g->status == PC_OK && pc_interp(g, ti, 1, &ref, 1) == PC_OK, "interp: %s", pc_error(g));
    pc_pipeline_opts po = {.opt_level = 2};
    ok = ok && CHECK_MSG(pc_pipeline_run(g, &po) == PC_OK, "%s", pc_error(g));
    if (rows[r]) setenv("PRIMC_CONV_ROW", rows[r], 1);
    kir_program kp;
    ok = ok && CHECK_MSG(kir_build_cuda(g, &kp, 90) == PC_OK, "kir: %s", pc_error(g));
    unsetenv("PRIMC_CONV_ROW");
    int convs = 0;
    for (int i = 0; ok && i < kp.n_kernels; i++) {
      const kir_kernel *k = &kp.kernels[i];
      if (k->kind != KK_CALL || k->call != KC_conv) continue;
      convs++;
      CHECK_MSG(!k->pair && !k->absorbed, "conv kernel %d paired for a CPU row", i);
      int64_t col = 4 * (i ? 9 : 16) * 12 * 12; /* the im2col's floats: K (C/groups x taps) by the output pixels */
      CHECK_MSG(kp.bufs[k->args[3]].nbytes == col, "conv kernel %d: %lld bytes of scratch, not the col's %lld", i,
                (long long)kp.bufs[k->args[3]].nbytes, (long long)col);
    }
    if (ok) CHECK_INT(convs, 2), workspace[r] = kp.workspace_size;
    void *ins[1] = {xd}, *outs[1] = {got};
    char err[512] = "";
    int rc = ok ? pc_emu_graph(g, ins, outs, NULL, err, sizeof err) : 0;
    if (rc < 0) {
      SKIP("no g++ for the CUDA emulator");
    } else if (ok && CHECK_MSG(rc == 1, "%s", err)) {
      for (int i = 0; i < 32 * 12 * 12; i++) CHECK_NEAR(got[i], ((const float *)ref.data)[i], 1e-4);
    }
    pc_tensor_free(&ref);
    pc_graph_free(g);
  }
  CHECK_INT(workspace[0], workspace[1]);
}
