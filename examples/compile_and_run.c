/* examples/compile_and_run.c: compiles an ONNX model to a shared library through libprimc (include/primc.h),
 * loads it and runs it on one input, all in one program.
 *
 *   cc -Iinclude examples/compile_and_run.c -Lbuild -lprimc -ldl -Wl,-rpath,$PWD/build -o compile_and_run
 *   ./compile_and_run models/mlp/model.onnx /tmp/mlp.so [input.npy [expected.npy]]
 *
 * Without input.npy the input is a fixed ramp. With expected.npy the output is compared with it (1e-4
 * relative) and the exit status says whether it matched. The model must have one f32 input and one f32
 * output with static dims (the bundled models/mlp does); the compiled library's own contract is in the
 * header primc writes beside it. */
#define _POSIX_C_SOURCE 200809L /* posix_memalign, dlopen */
#include <primc.h>

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define F32 2 /* the f32 dtype code of primc.h */

/* the float32 payload of a little-endian .npy file of n elements (version 1 to 3 headers) */
static int read_npy_f32(const char *path, float *out, int64_t n) {
  FILE *f = fopen(path, "rb");
  if (!f) return 0;
  unsigned char pre[12];
  int ok = fread(pre, 1, 10, f) == 10 && !memcmp(pre, "\x93NUMPY", 6);
  long header = ok ? (pre[6] == 1 ? 10L + (pre[8] | pre[9] << 8) : 0) : 0;
  if (ok && pre[6] >= 2) ok = fread(pre + 10, 1, 2, f) == 2, header = 12L + (pre[8] | pre[9] << 8 | pre[10] << 16 | (long)pre[11] << 24);
  ok = ok && header && fseek(f, header, SEEK_SET) == 0 && fread(out, sizeof *out, (size_t)n, f) == (size_t)n;
  fclose(f);
  return ok;
}

static int64_t numel(primc_model *m, primc_io io) {
  int64_t n = 1;
  for (int d = 0; d < primc_model_tensor_rank(m, io, 0); d++) n *= primc_model_tensor_dim(m, io, 0, d);
  return n;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s MODEL.onnx OUT.so [INPUT.npy [EXPECTED.npy]]\n", argv[0]);
    return 2;
  }
  printf("primc %s\n", primc_version());

  /* 1. load the model and say what it takes */
  primc_model *m = primc_model_new();
  if (!m) return 1;
  if (primc_model_load_file(m, argv[1]) != PRIMC_STATUS_OK) {
    fprintf(stderr, "error: %s\n", primc_model_error(m));
    primc_model_free(m);
    return 1;
  }
  for (int io = 0; io < 2; io++)
    for (int i = 0; i < primc_model_count(m, (primc_io)io); i++) {
      printf("%s %d: %s %s[", io ? "output" : "input", i, primc_model_tensor_name(m, (primc_io)io, i),
             primc_dtype_name(primc_model_tensor_dtype(m, (primc_io)io, i)));
      for (int d = 0; d < primc_model_tensor_rank(m, (primc_io)io, i); d++)
        printf("%s%lld", d ? "," : "", (long long)primc_model_tensor_dim(m, (primc_io)io, i, d));
      printf("]\n");
    }
  if (primc_model_count(m, PRIMC_INPUT) != 1 || primc_model_count(m, PRIMC_OUTPUT) != 1 ||
      primc_model_tensor_dtype(m, PRIMC_INPUT, 0) != F32 || primc_model_tensor_dtype(m, PRIMC_OUTPUT, 0) != F32 ||
      numel(m, PRIMC_INPUT) <= 0 || numel(m, PRIMC_OUTPUT) <= 0) {
    fprintf(stderr, "error: this example takes one f32 input and one f32 output of static dims\n");
    primc_model_free(m);
    return 1;
  }
  int64_t n_in = numel(m, PRIMC_INPUT), n_out = numel(m, PRIMC_OUTPUT);

  /* 2. compile it to a shared library whose entry points are model_run, model_workspace_size, ... */
  if (primc_model_set_name(m, "model") || primc_model_compile(m, PRIMC_EMIT_LIB, argv[2])) {
    fprintf(stderr, "error: %s\n", primc_model_error(m));
    primc_model_free(m);
    return 1;
  }
  primc_model_free(m);

  /* 3. load the library and run it: inputs and outputs are the caller's, and so is the workspace */
  void *lib = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "error: %s\n", dlerror());
    return 1;
  }
  int (*run)(const void *const *, void *const *, void *) = (int (*)(const void *const *, void *const *, void *))dlsym(lib, "model_run");
  const int64_t *ws_size = (const int64_t *)dlsym(lib, "model_workspace_size");
  float *x = malloc((size_t)n_in * sizeof *x), *y = calloc((size_t)n_out, sizeof *y), *want = malloc((size_t)n_out * sizeof *want);
  void *ws = NULL;
  int rc = 1;
  if (!run || !ws_size || !x || !y || !want || posix_memalign(&ws, 64, (size_t)*ws_size + 64)) {
    fprintf(stderr, "error: the library lacks model_run / model_workspace_size, or out of memory\n");
    goto done;
  }
  if (argc > 3 && !read_npy_f32(argv[3], x, n_in)) {
    fprintf(stderr, "error: %s is not a float32 .npy of %lld elements\n", argv[3], (long long)n_in);
    goto done;
  }
  for (int64_t i = 0; argc <= 3 && i < n_in; i++) x[i] = (float)(i % 17) / 17.0f - 0.5f;
  const void *ins[1] = {x};
  void *outs[1] = {y};
  int st = run(ins, outs, ws);
  if (st != 0) {
    fprintf(stderr, "error: model_run returned %d\n", st);
    goto done;
  }
  printf("output[0..3]: %g %g %g %g\n", y[0], n_out > 1 ? y[1] : 0.0, n_out > 2 ? y[2] : 0.0, n_out > 3 ? y[3] : 0.0);
  rc = 0;
  if (argc > 4) {
    if (!read_npy_f32(argv[4], want, n_out)) {
      fprintf(stderr, "error: %s is not a float32 .npy of %lld elements\n", argv[4], (long long)n_out);
      rc = 1;
      goto done;
    }
    double worst = 0;
    for (int64_t i = 0; i < n_out; i++) {
      double err = fabs((double)y[i] - want[i]) / (1e-4 * fabs((double)want[i]) + 1e-5);
      if (!(err <= worst)) worst = err; /* a NaN is the worst */
    }
    printf("matches %s: %s (worst error %.3g of the tolerance)\n", argv[4], worst <= 1 ? "yes" : "no", worst);
    rc = worst <= 1 ? 0 : 1;
  }
done:
  free(x);
  free(y);
  free(want);
  free(ws);
  dlclose(lib);
  return rc;
}
