/* tests/unit/test_api.c: the public C API (include/primc.h): loading, queries, options, compiling, and the
 * message every failure leaves in its handle. */
#include "include/primc.h"
#include "tests/test.h"
#include "tests/unit/helpers.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static const char *src_path(const char *rel, char *buf, size_t n) {
  snprintf(buf, n, "%s/%s", pc_test_srcdir(), rel);
  return buf;
}

/* a text graph in a temporary file; the path in buf */
static int write_graph(const char *text, char *buf, size_t n) {
  snprintf(buf, n, "/tmp/primc_api_%d.txt", (int)getpid());
  FILE *f = fopen(buf, "w");
  if (!f) return 0;
  fputs(text, f);
  return fclose(f) == 0;
}

PC_TEST(api_load_and_query) {
  char path[4096];
  primc_model *m = primc_model_new();
  CHECK_INT(primc_model_count(m, PRIMC_INPUT), -1); /* nothing loaded yet */
  CHECK_INT(primc_model_load_file(m, src_path("models/mlp/model.onnx", path, sizeof path)), PRIMC_STATUS_OK);
  CHECK_INT(primc_model_count(m, PRIMC_INPUT), 1);
  CHECK_INT(primc_model_count(m, PRIMC_OUTPUT), 1);
  CHECK_STR(primc_model_tensor_name(m, PRIMC_INPUT, 0), "input");
  CHECK_STR(primc_dtype_name(primc_model_tensor_dtype(m, PRIMC_INPUT, 0)), "f32");
  CHECK_INT(primc_model_tensor_rank(m, PRIMC_OUTPUT, 0), 2);
  CHECK_INT(primc_model_tensor_dim(m, PRIMC_OUTPUT, 0, 1), 10);
  CHECK(primc_model_tensor_dim_name(m, PRIMC_INPUT, 0, 0) == NULL);
  CHECK(primc_model_tensor_name(m, PRIMC_INPUT, 1) == NULL); /* out of range */
  CHECK_INT(primc_model_tensor_dim(m, PRIMC_INPUT, 0, 2), -1);
  CHECK_STR(primc_model_error(m), "");
  /* a second load into one handle is a usage error */
  CHECK_INT(primc_model_load_file(m, path), PRIMC_STATUS_USAGE);
  CHECK_CONTAINS(primc_model_error(m), "already loaded");
  CHECK_INT(primc_model_set_dim(m, "batch", 2), PRIMC_STATUS_USAGE);
  CHECK_CONTAINS(primc_model_error(m), "before the model is loaded");
  primc_model_free(m);
  primc_model_free(NULL);
}

PC_TEST(api_symbolic_dims) {
  char path[256];
  if (!CHECK(write_graph("graph(%x : f32[batch, 4]):\n  %y = neg(%x)\n  return (%y)\n", path, sizeof path))) return;
  primc_model *m = primc_model_new();
  CHECK_INT(primc_model_set_dim_spec(m, "batch=1..8"), PRIMC_STATUS_OK);
  CHECK_INT(primc_model_load_file(m, path), PRIMC_STATUS_OK);
  CHECK_INT(primc_model_tensor_dim(m, PRIMC_INPUT, 0, 0), -1);
  CHECK_STR(primc_model_tensor_dim_name(m, PRIMC_INPUT, 0, 0), "batch");
  int64_t lo = 0, hi = 0;
  CHECK_INT(primc_model_tensor_dim_range(m, PRIMC_INPUT, 0, 0, &lo, &hi), PRIMC_STATUS_OK);
  CHECK_INT(lo, 1);
  CHECK_INT(hi, 8);
  CHECK_INT(primc_model_tensor_dim_range(m, PRIMC_INPUT, 0, 1, &lo, &hi), PRIMC_STATUS_OK);
  CHECK_INT(lo, 4);
  CHECK_INT(hi, 4);
  primc_model_free(m);
  m = primc_model_new(); /* a binding to one value reads as a fixed dim */
  CHECK_INT(primc_model_set_dim(m, "batch", 3), PRIMC_STATUS_OK);
  CHECK_INT(primc_model_load_file(m, path), PRIMC_STATUS_OK);
  CHECK_INT(primc_model_tensor_dim(m, PRIMC_OUTPUT, 0, 0), 3);
  primc_model_free(m);
  unlink(path);
}

/* --const through the API: the mode input leaves the inputs, set twice the last value counts, a bad spelling
 * is a usage error and a value the input cannot hold fails the load naming it */
PC_TEST(api_const_spec) {
  char path[4096];
  src_path("tests/data/inputs/switch.onnx", path, sizeof path);
  primc_model *m = primc_model_new();
  CHECK_INT(primc_model_set_const_spec(m, "mode=7"), PRIMC_STATUS_OK);
  CHECK_INT(primc_model_set_const_spec(m, "mode=1"), PRIMC_STATUS_OK);
  CHECK_INT(primc_model_set_dim_spec(m, "x.dim3=5"), PRIMC_STATUS_OK);
  CHECK_INT(primc_model_set_dim_spec(m, "bias.dim0=5"), PRIMC_STATUS_OK);
  if (!CHECK_INT(primc_model_load_file(m, path), PRIMC_STATUS_OK)) printf("  %s\n", primc_model_error(m));
  CHECK_INT(primc_model_count(m, PRIMC_INPUT), 2);
  CHECK_STR(primc_model_tensor_name(m, PRIMC_INPUT, 1), "bias");
  CHECK_INT(primc_model_tensor_rank(m, PRIMC_OUTPUT, 0), 3); /* mode 1: the ReduceSum branch */
  primc_model_free(m);
  m = primc_model_new();
  CHECK_INT(primc_model_set_const_spec(m, "mode"), PRIMC_STATUS_USAGE);
  CHECK_INT(primc_model_set_const_spec(m, "mode=2.5"), PRIMC_STATUS_OK);
  CHECK(primc_model_load_file(m, path) != PRIMC_STATUS_OK);
  CHECK_CONTAINS(primc_model_error(m), "input 'mode'");
  primc_model_free(m);
}

PC_TEST(api_errors_carry_messages) {
  char path[4096];
  primc_model *m = primc_model_new();
  CHECK_INT(primc_model_load_file(m, "/nonexistent/model.onnx"), PRIMC_STATUS_IO);
  CHECK_CONTAINS(primc_model_error(m), "/nonexistent/model.onnx");
  CHECK_INT(primc_model_compile(m, PRIMC_EMIT_LIB, "/tmp/x.so"), PRIMC_STATUS_USAGE); /* the load failed */
  CHECK_CONTAINS(primc_model_error(m), "no model loaded");
  /* a failed load leaves the handle empty: another load may follow */
  CHECK_INT(primc_model_load_onnx(m, "\x08\x07garbage", 9, NULL), PRIMC_STATUS_PARSE);
  CHECK(*primc_model_error(m));
  CHECK_INT(primc_model_load_file(m, src_path("models/mlp/model.onnx", path, sizeof path)), PRIMC_STATUS_OK);
  CHECK_INT(primc_model_set_name(m, "9lives"), PRIMC_STATUS_USAGE);
  CHECK_CONTAINS(primc_model_error(m), "C identifier");
  CHECK_INT(primc_model_set_opt_level(m, 7), PRIMC_STATUS_USAGE);
  CHECK_INT(primc_model_set_target(m, (primc_target)9), PRIMC_STATUS_USAGE);
  CHECK_INT(primc_model_compile(m, (primc_emit)42, "/tmp/x.so"), PRIMC_STATUS_USAGE);
  CHECK_INT(primc_model_compile(m, PRIMC_EMIT_LIB, "/nonexistent-dir/m.so"), PRIMC_STATUS_IO);
  CHECK_CONTAINS(primc_model_error(m), "/nonexistent-dir/m");
  CHECK_INT(primc_model_set_dim_spec(m, "batch"), PRIMC_STATUS_USAGE);
  CHECK_INT(primc_model_set_matmul_precision(m, "low"), PRIMC_STATUS_USAGE);
  CHECK_CONTAINS(primc_model_error(m), "not highest, high or medium");
  CHECK_INT(primc_model_set_matmul_precision(m, NULL), PRIMC_STATUS_USAGE);
  CHECK_INT(primc_model_set_autocast(m, "fp32"), PRIMC_STATUS_USAGE);
  CHECK_CONTAINS(primc_model_error(m), "not bf16, fp16 or none");
  /* bf16 contractions are host CPU and CUDA code: a cross CPU target with medium is refused, naming it */
  CHECK_INT(primc_model_set_matmul_precision(m, "medium"), PRIMC_STATUS_OK);
  CHECK_INT(primc_model_set_triple(m, "aarch64-linux-gnu"), PRIMC_STATUS_OK);
  CHECK_INT(primc_model_compile(m, PRIMC_EMIT_OBJ, "/tmp/primc_api_mp.o"), PRIMC_STATUS_UNSUPPORTED);
  CHECK_CONTAINS(primc_model_error(m), "matmul precision medium");
  CHECK_STR(primc_status_name(PRIMC_STATUS_UNSUPPORTED), "unsupported");
  CHECK(primc_dtype_name(-1) == NULL && primc_dtype_name(99) == NULL);
  primc_model_free(m);
  CHECK_INT(primc_model_load_file(NULL, path), PRIMC_STATUS_USAGE);
}

/* two compiles from one handle (the second imports again): a library that runs and matches the reference, and
 * an object with its header */
PC_TEST(api_compile_twice_and_run) {
  char path[4096], so[256], obj[256], hdr[256], ip[4096], ep[4096];
  snprintf(so, sizeof so, "/tmp/primc_api_%d.so", (int)getpid());
  snprintf(obj, sizeof obj, "/tmp/primc_api_%d.o", (int)getpid());
  snprintf(hdr, sizeof hdr, "/tmp/primc_api_%d.h", (int)getpid());
  primc_model *m = primc_model_new();
  CHECK_INT(primc_model_load_file(m, src_path("tests/data/onnx_good/mlp.onnx", path, sizeof path)), PRIMC_STATUS_OK);
  CHECK_INT(primc_model_set_name(m, "apimlp"), PRIMC_STATUS_OK);
  CHECK_INT(primc_model_set_opt_level(m, 2), PRIMC_STATUS_OK);
  if (!CHECK_INT(primc_model_compile(m, PRIMC_EMIT_LIB, so), PRIMC_STATUS_OK)) printf("  %s\n", primc_model_error(m));
  if (!CHECK_INT(primc_model_compile(m, PRIMC_EMIT_OBJ, obj), PRIMC_STATUS_OK)) printf("  %s\n", primc_model_error(m));
  CHECK(access(obj, R_OK) == 0 && access(hdr, R_OK) == 0);
  primc_model_free(m);
  pc_tensor in = {0}, want = {0};
  void *lib = dlopen(so, RTLD_NOW | RTLD_LOCAL), *ws = NULL;
  int (*run)(const void *const *, void *const *, void *) =
      lib ? (int (*)(const void *const *, void *const *, void *))dlsym(lib, "apimlp_run") : NULL;
  const int64_t *ws_size = lib ? (const int64_t *)dlsym(lib, "apimlp_workspace_size") : NULL;
  if (CHECK_MSG(run && ws_size, "dlopen %s: %s", so, lib ? "no apimlp_run" : dlerror()) &&
      CHECK(pc_test_read_pb(src_path("tests/data/onnx_good/mlp.input_0.pb", ip, sizeof ip), &in)) &&
      CHECK(pc_test_read_pb(src_path("tests/data/onnx_good/mlp.output_0.pb", ep, sizeof ep), &want)) &&
      CHECK(want.dtype == PC_f32 && posix_memalign(&ws, 64, (size_t)*ws_size + 64) == 0)) {
    int64_t n = 1;
    for (int d = 0; d < want.rank; d++) n *= want.dims[d];
    float *y = calloc((size_t)n, sizeof *y);
    const void *ins[1] = {in.data};
    void *outs[1] = {y};
    CHECK_INT(run(ins, outs, ws), 0);
    for (int64_t i = 0; i < n; i++) CHECK_NEAR(y[i], ((const float *)want.data)[i], 1e-4);
    free(y);
  }
  pc_tensor_free(&in);
  pc_tensor_free(&want);
  free(ws);
  if (lib) dlclose(lib);
  unlink(so), unlink(obj), unlink(hdr);
}

PC_TEST(api_compile_to_memory) {
  char path[4096];
  primc_model *m = primc_model_new();
  CHECK_INT(primc_model_load_file(m, src_path("models/mlp/model.onnx", path, sizeof path)), PRIMC_STATUS_OK);
  void *data = NULL;
  size_t size = 0;
  if (!CHECK_INT(primc_model_compile_to_memory(m, PRIMC_EMIT_OBJ, &data, &size), PRIMC_STATUS_OK))
    printf("  %s\n", primc_model_error(m));
  CHECK(size > 100000 && data && !memcmp(data, "\177ELF", 4)); /* an ELF object with the weights inside */
  primc_free(data);
  CHECK_INT(primc_model_set_name(m, "memmlp"), PRIMC_STATUS_OK);
  CHECK_INT(primc_model_compile_to_memory(m, PRIMC_EMIT_LLVM, &data, &size), PRIMC_STATUS_OK);
  CHECK(data && strstr((const char *)data, "memmlp_run") && strlen((const char *)data) == size);
  primc_free(data);
  CHECK_INT(primc_model_set_weights_external(m, 1), PRIMC_STATUS_OK);
  CHECK_INT(primc_model_compile_to_memory(m, PRIMC_EMIT_OBJ, &data, &size), PRIMC_STATUS_USAGE);
  CHECK(data == NULL && size == 0);
  primc_model_free(m);
}
