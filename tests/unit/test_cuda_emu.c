/* tests/unit/test_cuda_emu.c: the zoo's CUDA programs, as `primc compile --target cuda` renders them, run on the CPU
 * emulator of rendered CUDA C (tests/unit/cuda_emu.h) and checked against ONNX Runtime's outputs (expected.npy). */
#include "codegen/codegen.h"
#include "codegen/kir.h"
#include "frontend/frontend.h"
#include "ir/ir.h"
#include "passes/passes.h"
#include "runtime/primc_rt.h"
#include "tests/test.h"
#include "tests/unit/cuda_emu.h"

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
