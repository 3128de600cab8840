/* tests/unit/test_cuda_pkg.c: --target cuda packaging: embedded cubin/PTX/weights, descriptor, header, executable; runs on a GPU when there is one. */
#include "api/dyn_source.h"
#include "codegen/codegen.h"
#include "ir/ir.h"
#include "passes/passes.h"
#include "runtime/primc_rt.h"
#include "tests/test.h"
#include "tests/unit/helpers.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define ROWS 4
#define COLS 8

static const float scale[COLS] = {0.5f, -1, 2, 0.25f, -0.75f, 1.5f, 3, -2};

static pc_type ty(pc_dtype dt, int rank, const int64_t *dims) { return pc_type_make(dt, rank, dims); }

/* y = max(x * scale + 0.5, 0), z = sum over the rows of x: one fused elementwise kernel and a reduction */
static pc_graph *small_graph(void) {
  pc_graph *g = pc_graph_new();
  const int64_t shape[2] = {ROWS, COLS};
  pc_value *x = pc_input_add(g, "x", ty(PC_f32, 2, shape));
  pc_value *w = pc_broadcast_to(g, pc_const(g, ty(PC_f32, 1, (int64_t[]){COLS}), scale), 2, shape);
  pc_value *y = pc_add(g, pc_mul(g, x, w), pc_full(g, PC_f32, 0.5, 2, shape));
  pc_output_add(g, pc_max(g, y, pc_full(g, PC_f32, 0, 2, shape)));
  pc_output_add(g, pc_reduce(g, PC_OP_reduce_sum, x, 1, (int64_t[]){1}));
  pc_pipeline_opts po = {0};
  po.opt_level = 2;
  if (!g->status) pc_pipeline_run(g, &po);
  return g;
}

/* 1 with NVRTC; without, the test is skipped when the library is absent, and fails on any other error */
static int have_nvrtc(void) {
  char err[512] = "";
  pc_nvrtc *nv = pc_nvrtc_open(err, sizeof err);
  if (!nv && CHECK_MSG(strstr(err, "NVRTC not found") != NULL, "NVRTC: %s", err)) SKIP("%s", err);
  pc_nvrtc_close(nv);
  return nv != NULL;
}

static pc_status compile_to(pc_graph *g, pc_emit emit, const char *out, const char *arch, int graphs) {
  pc_codegen_opts o = {0};
  o.emit = emit;
  o.output = out;
  o.name = "m";
  o.target = PC_TARGET_CUDA;
  o.gpu_arch = arch;
  o.cuda_graphs = graphs;
  return pc_codegen(g, &o);
}

/* ---------------------------------------------------------------- the object */

static void check_descriptor(const primc_cuda_model_desc *m) {
  CHECK_STR(m->name, "m");
  CHECK_STR(m->gpu_arch, "sm_80");
  CHECK_INT(m->n_inputs, 1);
  CHECK_INT(m->n_outputs, 2);
  CHECK_STR(m->inputs[0].name, "x");
  CHECK_INT(m->inputs[0].dtype, PRIMC_F32);
  CHECK_INT(m->inputs[0].rank, 2);
  CHECK_INT(m->inputs[0].dims[1], COLS);
  CHECK_INT(m->outputs[1].rank, 1);
  CHECK_INT(m->outputs[1].dims[0], ROWS);
  CHECK(m->n_kernels >= 2);
  CHECK_INT(m->cuda_graphs, 1);
  CHECK(m->run && m->status && m->error);
}

/* without a driver the entry point fails cleanly with PRIMC_ERR_NODEVICE and says why */
static void check_no_device(const primc_cuda_model_desc *m) {
  const void *in[1] = {(const void *)(uintptr_t)64};
  void *out[2] = {(void *)(uintptr_t)128, (void *)(uintptr_t)192};
  CHECK_INT(m->run(NULL, out, (void *)(uintptr_t)256, NULL), PRIMC_ERR_ARG);
  CHECK_INT(m->run(in, out, (void *)(uintptr_t)256, NULL), PRIMC_ERR_NODEVICE);
  CHECK_CONTAINS(m->error(), "libcuda.so.1");
}

/* the value of `#define NAME value` in a generated header; -1 when absent */
static long long header_define(const char *path, const char *name) {
  FILE *f = fopen(path, "r");
  char line[512], want[128];
  long long v = -1;
  snprintf(want, sizeof want, "#define %s %%lld", name);
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, want, &v) == 1) break;
  if (f) fclose(f);
  return v;
}

PC_TEST(cuda_pkg_object_embeds_cubin_ptx_weights) {
  if (!have_nvrtc()) return;
  pc_graph *g = small_graph();
  char dir[] = "/tmp/primc-cudapkg-XXXXXX", obj[256], so[256], hdr[256], cmd[2048];
  CHECK(mkdtemp(dir) != NULL);
  snprintf(obj, sizeof obj, "%s/m.o", dir);
  snprintf(so, sizeof so, "%s/m.so", dir);
  snprintf(hdr, sizeof hdr, "%s/m.h", dir);
  CHECK_MSG(compile_to(g, PC_EMIT_OBJ, obj, "sm_80", 1) == PC_OK, "%s", pc_error(g));
  void *h = pc_test_link_open(obj, so, "-ldl -lm -lpthread", "cuda object");
  if (h) {
    const unsigned char *cubin = dlsym(h, "m_cubin");
    const char *ptx = dlsym(h, "m_ptx");
    const unsigned char *weights = dlsym(h, "m_weights");
    const primc_cuda_model_desc *m = dlsym(h, "m_model");
    CHECK(cubin && !memcmp(cubin, "\177ELF", 4));
    CHECK(ptx && strstr(ptx, ".entry k0_") && strstr(ptx, ".target sm_80"));
    long long wsize = header_define(hdr, "m_WEIGHTS_SIZE");
    CHECK(wsize >= (long long)sizeof scale);
    CHECK(weights && wsize > 0 && memmem(weights, (size_t)wsize, scale, sizeof scale)); /* the constant, byte for byte */
    if (CHECK(m != NULL)) {
      check_descriptor(m);
      void *cu = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
      if (!cu) check_no_device(m);
      else dlclose(cu);
    }
    dlclose(h);
  }
  char *text = pc_test_slurp(hdr, NULL);
  CHECK(text != NULL);
  if (text) {
    CHECK_CONTAINS(text, "#define m_TARGET \"cuda\"");
    CHECK_CONTAINS(text, "#define m_GPU_ARCH \"sm_80\"");
    CHECK_CONTAINS(text, "int m_run(const void *const *inputs, void *const *outputs, void *workspace, void *stream);");
    CHECK_CONTAINS(text, "CUDA stream");
    CHECK_CONTAINS(text, "#define m_INPUT0_SHAPE {4, 8}");
  }
  free(text);
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0);
  pc_graph_free(g);
}

/* compute_NN: no cubin, the PTX only; --emit cuda: the CUDA C text */
PC_TEST(cuda_pkg_ptx_only_and_emit_cuda) {
  if (!have_nvrtc()) return;
  pc_graph *g = small_graph();
  char dir[] = "/tmp/primc-cudapkg-XXXXXX", path[256], cmd[512];
  CHECK(mkdtemp(dir) != NULL);
  snprintf(path, sizeof path, "%s/m.o", dir);
  CHECK_MSG(compile_to(g, PC_EMIT_OBJ, path, "compute_90", 0) == PC_OK, "%s", pc_error(g));
  snprintf(path, sizeof path, "%s/m.h", dir);
  char *text = pc_test_slurp(path, NULL);
  CHECK(text && strstr(text, "(no cubin + PTX"));
  free(text);
  snprintf(path, sizeof path, "%s/m.cu", dir);
  CHECK_MSG(compile_to(g, PC_EMIT_CUDA, path, NULL, 0) == PC_OK, "%s", pc_error(g));
  text = pc_test_slurp(path, NULL);
  CHECK(text && strstr(text, "extern \"C\" __global__") && strstr(text, "primc_status"));
  free(text);
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0);
  pc_graph_free(g);
}

PC_TEST(cuda_pkg_rejects_cpu_only_options) {
  pc_graph *g = small_graph();
  pc_codegen_opts o = {0};
  o.output = "/tmp/primc-cudapkg-never.ll";
  o.target = PC_TARGET_CUDA;
  o.emit = PC_EMIT_LLVM;
  CHECK_INT(pc_codegen(g, &o), PC_ERR_UNSUPPORTED);
  CHECK_CONTAINS(pc_error(g), "--target cuda writes exe, obj or lib");
  pc_graph_free(g);
  g = small_graph();
  o.emit = PC_EMIT_OBJ;
  o.weights_external = 1;
  CHECK_INT(pc_codegen(g, &o), PC_ERR_UNSUPPORTED);
  CHECK(access(o.output, F_OK) != 0);
  pc_graph_free(g);
}

/* ---------------------------------------------------------------- batched NVRTC checks */

/* complex values computed in a loop kernel have no CUDA rendering (yet) */
static pc_graph *unsupported_graph(void) {
  pc_graph *g = pc_graph_new();
  pc_value *x = pc_input_add(g, "x", ty(PC_f32, 1, (int64_t[]){6}));
  pc_output_add(g, pc_convert(g, pc_exp(g, x), PC_c64));
  return g;
}

PC_TEST(cuda_pkg_check_many) {
  if (!have_nvrtc()) return;
  char err[512];
  pc_nvrtc *nv = pc_nvrtc_open(err, sizeof err);
  pc_graph *gs[4] = {small_graph(), unsupported_graph(), small_graph(), small_graph()};
  pc_status res[4];
  pc_cuda_check_many(gs, 4, nv, "sm_90", res);
  CHECK_INT(res[0], PC_OK);
  CHECK_INT(res[1], PC_ERR_UNSUPPORTED);
  CHECK_CONTAINS(pc_error(gs[1]), "not supported by the CUDA renderer");
  CHECK_INT(res[2], PC_OK);
  CHECK_INT(res[3], PC_OK);
  for (int i = 0; i < 4; i++) pc_graph_free(gs[i]);
  pc_nvrtc_close(nv);
}

/* ---------------------------------------------------------------- the executable */

static int write_input(const char *path) {
  float x[ROWS * COLS];
  for (int i = 0; i < ROWS * COLS; i++) x[i] = (float)(i % 7) - 2.5f;
  primc_array a = {PRIMC_F32, 2, {ROWS, COLS}, x};
  char err[256];
  return primc_npy_write(path, &a, err, sizeof err) == 0;
}

/* the outputs against the formula computed here in plain C */
static void check_outputs(const char *dir) {
  char path[512], err[256];
  primc_array y = {0}, z = {0};
  snprintf(path, sizeof path, "%s/out0.npy", dir);
  int ok = CHECK_MSG(primc_npy_read(path, &y, err, sizeof err) == 0, "%s", err);
  snprintf(path, sizeof path, "%s/out1.npy", dir);
  ok &= CHECK_MSG(primc_npy_read(path, &z, err, sizeof err) == 0, "%s", err);
  for (int r = 0; ok && r < ROWS; r++) {
    double sum = 0;
    for (int c = 0; c < COLS; c++) {
      float x = (float)((r * COLS + c) % 7) - 2.5f, want = x * scale[c] + 0.5f;
      sum += x;
      CHECK_NEAR(((float *)y.data)[r * COLS + c], want > 0 ? want : 0, 1e-6);
    }
    CHECK_NEAR(((float *)z.data)[r], sum, 1e-5);
  }
  free(y.data);
  free(z.data);
}

PC_TEST(cuda_pkg_executable) {
  if (!have_nvrtc()) return;
  pc_graph *g = small_graph();
  char dir[] = "/tmp/primc-cudapkg-XXXXXX", exe[256], in[256], cmd[2048];
  CHECK(mkdtemp(dir) != NULL);
  snprintf(exe, sizeof exe, "%s/m", dir);
  snprintf(in, sizeof in, "%s/x.npy", dir);
  CHECK(write_input(in));
  CHECK_MSG(compile_to(g, PC_EMIT_EXE, exe, NULL, 0) == PC_OK, "%s", pc_error(g));
  void *cu = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (!cu) {
    /* no driver: a clear message and exit status 1 */
    snprintf(cmd, sizeof cmd, "%s %s -o %s > %s/log 2>&1", exe, in, dir, dir);
    int rc = system(cmd);
    CHECK_INT(WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, 1);
    snprintf(cmd, sizeof cmd, "%s/log", dir);
    char *log = pc_test_slurp(cmd, NULL);
    CHECK(log && strstr(log, "needs a CUDA GPU") && strstr(log, "libcuda.so.1"));
    free(log);
    SKIP("no CUDA driver: checked the executable's error, not its results");
  } else {
    dlclose(cu);
    for (int graphs = 0; graphs < 2; graphs++) {
      snprintf(cmd, sizeof cmd, "%s %s -o %s --bench 5 %s > %s/log 2>&1", exe, in, dir, graphs ? "" : "--no-cuda-graphs",
               dir);
      if (CHECK_MSG(system(cmd) == 0, "running %s (see %s/log)", cmd, dir)) check_outputs(dir);
    }
  }
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0);
  pc_graph_free(g);
}

/* ---------------------------------------------------------------- run-time dims */

/* a model of models/dynamic compiled with dims as an object m for CUDA, linked into a shared library and opened:
 * its descriptor m, its header's text and the expected output of case `expected` (ONNX Runtime's) */
typedef struct dyn_pkg {
  char dir[32];
  pc_dyn_source src;
  pc_dyn_spec spec;
  pc_graph *g;
  void *h;
  const primc_cuda_model_desc *m;
  char *header;
  primc_array want;
} dyn_pkg;

static int dyn_pkg_open(dyn_pkg *d, const char *model, const pc_dim_binding *dims, int n_dims, const char *expected) {
  char path[512], obj[256], so[256], hdr[256], err[256];
  memset(d, 0, sizeof *d);
  snprintf(d->dir, sizeof d->dir, "/tmp/primc-cudapkg-XXXXXX");
  snprintf(path, sizeof path, "%s/models/dynamic/%s/model.onnx", pc_test_srcdir(), model);
  pc_import_opts io = {0};
  io.dims = dims, io.n_dims = n_dims;
  CHECK_INT(pc_dyn_source_init(&d->src, &d->spec, &io), n_dims);
  d->src.path = path;
  d->src.po = (pc_pipeline_opts){.opt_level = 2};
  d->g = pc_dyn_source_build(&d->src, NULL);
  if (!CHECK(mkdtemp(d->dir) != NULL)) return 0;
  snprintf(obj, sizeof obj, "%s/m.o", d->dir);
  snprintf(so, sizeof so, "%s/m.so", d->dir);
  snprintf(hdr, sizeof hdr, "%s/m.h", d->dir);
  pc_codegen_opts o = {.emit = PC_EMIT_OBJ, .output = obj, .name = "m", .target = PC_TARGET_CUDA, .dyn = &d->spec};
  int ok = CHECK_MSG(d->g && !d->g->status && pc_codegen(d->g, &o) == PC_OK, "%s", d->g ? pc_error(d->g) : "load failed");
  d->h = ok ? pc_test_link_open(obj, so, "-ldl -lm -lpthread", "cuda object") : NULL;
  d->m = d->h ? dlsym(d->h, "m_model") : NULL;
  d->header = ok ? pc_test_slurp(hdr, NULL) : NULL;
  snprintf(path, sizeof path, "%s/models/dynamic/%s/%s", pc_test_srcdir(), model, expected);
  return ok && CHECK(d->m && d->m->dims && d->m->run_dims && d->m->output_dims) && CHECK(d->header != NULL) &&
         CHECK_MSG(primc_npy_read(path, &d->want, err, sizeof err) == 0, "%s", err);
}

static void dyn_pkg_close(dyn_pkg *d) {
  char cmd[128];
  if (d->h) dlclose(d->h);
  free(d->header);
  free(d->want.data);
  snprintf(cmd, sizeof cmd, "rm -rf %s", d->dir);
  CHECK(system(cmd) == 0);
  pc_graph_free(d->g);
}

/* without a driver, a run whose dims are in range fails for want of one; err_has: what its error must say */
static void runs_without_driver(const primc_cuda_model_desc *m, const int64_t *const *dims, const char *err_has) {
  const void *ins[2] = {(const void *)(uintptr_t)64, (const void *)(uintptr_t)128};
  void *outs[1] = {(void *)(uintptr_t)192};
  void *cu = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (cu) {
    dlclose(cu);
    return;
  }
  CHECK_INT(m->run_dims(ins, dims, outs, (void *)(uintptr_t)256, NULL), PRIMC_ERR_NODEVICE);
  CHECK_CONTAINS(m->error(), err_has);
}

/* The encoder of models/dynamic compiled once for batch 1..4 and seq 1..32 (codegen/cuda_dynamic.c) as an object:
 * its descriptor carries the ranges, NAME_output_dims gives ONNX Runtime's output dims at a size inside them, and
 * NAME_run_dims refuses a size outside (naming the input, the dim, the value and the range) or inputs that disagree
 * before it asks for a GPU; without a driver a size in range then fails for want of one. The header says the same. */
PC_TEST(cuda_pkg_run_time_dims) {
  if (!have_nvrtc()) return;
  const pc_dim_binding dims[] = {{"batch", 1, 4, 0, 0}, {"seq", 1, 32, 0, 0}};
  dyn_pkg d;
  if (dyn_pkg_open(&d, "seq_encoder", dims, 2, "expected_2x13.npy")) {
    const primc_cuda_model_desc *m = d.m;
    CHECK_INT(m->dims->n_syms, 2);
    CHECK_STR(m->dims->syms[1].name, "seq");
    CHECK_INT(m->dims->syms[1].lo, 1);
    CHECK_INT(m->dims->syms[1].hi, 32);
    const int64_t d213[2] = {2, 13}, d233[2] = {2, 33}, d212[2] = {2, 12};
    const int64_t *in[2] = {d213, d213}, *far[2] = {d233, d233}, *odd[2] = {d213, d212};
    int64_t out[8] = {0};
    CHECK_INT(m->output_dims(in, 0, out), PRIMC_OK);
    for (int r = 0; r < d.want.rank; r++) CHECK_INT(out[r], d.want.dims[r]);
    CHECK_INT(m->output_dims(in, 1, out), PRIMC_ERR_ARG);
    const void *ins[2] = {(const void *)(uintptr_t)64, (const void *)(uintptr_t)128};
    void *outs[1] = {(void *)(uintptr_t)192};
    CHECK_INT(m->run_dims(ins, far, outs, (void *)(uintptr_t)256, NULL), PRIMC_ERR_SHAPE);
    CHECK_CONTAINS(m->error(), "dim 1 (seq) is 33, outside the range 1..32");
    CHECK_INT(m->run_dims(ins, odd, outs, (void *)(uintptr_t)256, NULL), PRIMC_ERR_SHAPE);
    CHECK_CONTAINS(m->error(), "input \"attention_mask\" dim 1 is 12, but input \"input_ids\" made seq 13");
    runs_without_driver(m, in, "libcuda.so.1");
    CHECK_CONTAINS(d.header, "#define m_NUM_DIMS 2");
    CHECK_CONTAINS(d.header, "#define m_DIM1_NAME \"seq\"");
    CHECK_CONTAINS(d.header, "#define m_DIM1_MAX 32LL");
    CHECK_CONTAINS(d.header, "#define m_INPUT0_DIM_SYMS {0, 1}");
    CHECK_CONTAINS(d.header, "int m_run_dims(const void *const *inputs, const int64_t *const *input_dims");
    CHECK_CONTAINS(d.header, "int m_output_dims(const int64_t *const *input_dims, int32_t output, int64_t *dims);");
  }
  dyn_pkg_close(&d);
}

/* --dim H=16..96%16:32 --dim W=16..96%16 for CUDA: buckets of multiples (H=16..32, 48..64, 80..96), their symbols
 * dim / 16. Without a GPU: the output dims, H = 40 refused, runs reaching the bucket that holds H. */
PC_TEST(cuda_pkg_buckets_of_multiples) {
  if (!have_nvrtc()) return;
  const pc_dim_binding dims[] = {{"H", 16, 96, 32, 16}, {"W", 16, 96, 0, 16}};
  dyn_pkg d;
  if (dyn_pkg_open(&d, "strided_cnn", dims, 2, "expected_1x3x32x80.npy")) {
    const primc_cuda_model_desc *m = d.m;
    CHECK_CONTAINS(d.spec.buckets, "buckets of H: 3 CUDA programs (STEP 32)");
    CHECK_INT(m->dims->syms[0].multiple, 16);
    const int64_t d32[4] = {1, 3, 32, 80}, d48[4] = {1, 3, 48, 16}, d96[4] = {1, 3, 96, 96}, d40[4] = {1, 3, 40, 80};
    const int64_t *in32[1] = {d32}, *in48[1] = {d48}, *in96[1] = {d96}, *in40[1] = {d40};
    int64_t out[8] = {0};
    CHECK_INT(m->output_dims(in32, 0, out), PRIMC_OK);
    for (int r = 0; r < d.want.rank; r++) CHECK_INT(out[r], d.want.dims[r]);
    const void *ins[1] = {(const void *)(uintptr_t)64};
    void *outs[1] = {(void *)(uintptr_t)192};
    CHECK_INT(m->run_dims(ins, in40, outs, (void *)(uintptr_t)256, NULL), PRIMC_ERR_SHAPE);
    CHECK_CONTAINS(m->error(), "dim 2 (H) is 40, not a multiple of 16");
    runs_without_driver(m, in32, "bucket H=16..32: ");
    runs_without_driver(m, in48, "bucket H=48..64: ");
    runs_without_driver(m, in96, "bucket H=80..96: ");
    CHECK_CONTAINS(d.header, "#define m_DIM0_MULTIPLE 16LL");
  }
  dyn_pkg_close(&d);
}

/* --dim N=1..8:4 for CUDA (codegen/cuda_buckets.c): two bucket programs behind one model m. Without a GPU: the
 * descriptor's ranges, the output dims (the batch CNN's at N=3, from ONNX Runtime), N=9 refused before any device
 * call, and runs at N=3 and N=6 reaching the bucket that holds each (its error, naming it, says there is no driver). */
PC_TEST(cuda_pkg_buckets) {
  if (!have_nvrtc()) return;
  const pc_dim_binding dims[] = {{"N", 1, 8, 4, 0}};
  dyn_pkg d;
  if (dyn_pkg_open(&d, "batch_cnn", dims, 1, "expected_3x3x64x64.npy")) {
    const primc_cuda_model_desc *m = d.m;
    CHECK_CONTAINS(d.spec.buckets, "buckets of N: 2 CUDA programs (STEP 4)");
    /* N=5..8 packs the same weight bytes: it reads bucket 0's device copy, which bucket 0 exports */
    CHECK_CONTAINS(d.spec.buckets, "N=5..8: 26 kernels");
    CHECK_CONTAINS(d.spec.buckets, "(the weights of N=1..4)");
    CHECK(dlsym(d.h, "m__b0_weights_device") != NULL);
    CHECK(dlsym(d.h, "m__b1_weights") == NULL); /* no second host copy either */
    CHECK_INT(m->dims->n_syms, 1);
    CHECK_STR(m->dims->syms[0].name, "N");
    CHECK_INT(m->dims->syms[0].lo, 1);
    CHECK_INT(m->dims->syms[0].hi, 8);
    const int64_t d3[4] = {3, 3, 64, 64}, d6[4] = {6, 3, 64, 64}, d9[4] = {9, 3, 64, 64};
    const int64_t *in3[1] = {d3}, *in6[1] = {d6}, *in9[1] = {d9};
    int64_t out[8] = {0};
    CHECK_INT(m->output_dims(in3, 0, out), PRIMC_OK);
    for (int r = 0; r < d.want.rank; r++) CHECK_INT(out[r], d.want.dims[r]);
    const void *ins[1] = {(const void *)(uintptr_t)64};
    void *outs[1] = {(void *)(uintptr_t)192};
    CHECK_INT(m->run_dims(ins, in9, outs, (void *)(uintptr_t)256, NULL), PRIMC_ERR_SHAPE);
    CHECK_CONTAINS(m->error(), "dim 0 (N) is 9, outside the range 1..8");
    CHECK_INT(m->output_dims(in9, 0, out), PRIMC_ERR_SHAPE);
    runs_without_driver(m, in3, "bucket N=1..4: ");
    runs_without_driver(m, in6, "bucket N=5..8: ");
    CHECK_CONTAINS(d.header, "#define m_NUM_BUCKETS 2");
    CHECK_CONTAINS(d.header, "#define m_BUCKET_MAX {4, 8}");
    CHECK_CONTAINS(d.header, "#define m_DIM0_MAX 8LL");
    CHECK_CONTAINS(d.header, "#define m_INPUT0_DIM_SYMS {0, -1, -1, -1}");
    CHECK_CONTAINS(d.header, "int m_run_dims(const void *const *inputs, const int64_t *const *input_dims");
    CHECK(!strstr(d.header, "m_cubin")); /* each bucket's binaries are its own */
  }
  dyn_pkg_close(&d);
}

/* buckets on two dims for CUDA (strided_cnn, H and W in 16..96 multiples of 16, boxes of 48 by 48): the host side
 * picks the box that holds both (its error names it), and the header declares the boxes */
PC_TEST(cuda_pkg_buckets_on_two_dims) {
  if (!have_nvrtc()) return;
  const pc_dim_binding dims[] = {{"H", 16, 96, 48, 16}, {"W", 16, 96, 48, 16}};
  dyn_pkg d;
  if (dyn_pkg_open(&d, "strided_cnn", dims, 2, "expected_1x3x32x80.npy")) {
    const primc_cuda_model_desc *m = d.m;
    CHECK_CONTAINS(d.spec.buckets, "buckets of H and W: 4 CUDA programs (STEP 48 and 48)");
    CHECK_CONTAINS(d.spec.buckets, "H=64..96, W=16..48: ");
    const int64_t a[4] = {1, 3, 32, 80}, b[4] = {1, 3, 96, 48}, c[4] = {1, 3, 40, 48};
    const int64_t *in_a[1] = {a}, *in_b[1] = {b}, *in_c[1] = {c};
    int64_t out[8] = {0};
    CHECK_INT(m->output_dims(in_a, 0, out), PRIMC_OK);
    for (int r = 0; r < d.want.rank; r++) CHECK_INT(out[r], d.want.dims[r]);
    runs_without_driver(m, in_a, "bucket H=16..48, W=64..96: ");
    runs_without_driver(m, in_b, "bucket H=64..96, W=16..48: ");
    CHECK_INT(m->output_dims(in_c, 0, out), PRIMC_ERR_SHAPE); /* 40: no multiple of 16 */
    CHECK_CONTAINS(d.header, "#define m_NUM_BUCKETS 4");
    CHECK_CONTAINS(d.header, "#define m_BUCKET_MIN {{16, 16}, {16, 64}, {64, 16}, {64, 64}}");
    CHECK_CONTAINS(d.header, "#define m_BUCKET_MAX {{48, 48}, {48, 96}, {96, 48}, {96, 96}}");
  }
  dyn_pkg_close(&d);
}
