/* tests/unit/helpers.c: helpers shared by the unit test files (declared in tests/unit/helpers.h). */
#include "tests/unit/helpers.h"

#include "codegen/codegen.h"
#include "frontend/onnx_internal.h"
#include "passes/passes.h"
#include "tests/test.h"

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

char *pc_test_slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc(n > 0 ? (size_t)n + 1 : 1);
  if (s && (n < 0 || fread(s, 1, (size_t)n, f) != (size_t)n)) n = 0;
  if (s) s[n] = 0;
  fclose(f);
  if (len) *len = s ? (size_t)n : 0;
  return s;
}

int pc_test_read_pb(const char *path, pc_tensor *t) {
  size_t len;
  char *buf = pc_test_slurp(path, &len);
  if (!buf) return 0;
  Onnx__TensorProto *tp = onnx__tensor_proto__unpack(NULL, len, (const uint8_t *)buf);
  free(buf);
  if (!tp) return 0;
  pc_graph *g = pc_graph_new();
  int ok = ox_tensor_decode(g, tp, NULL, t) == PC_OK;
  pc_graph_free(g);
  onnx__tensor_proto__free_unpacked(tp, NULL);
  return ok;
}

void pc_test_put(pc_dtype dt, void *p, int64_t i, double v) {
  switch (dt) { /* test data writer, one case per storage type */
  case PC_f16: ((uint16_t *)p)[i] = pc_f32_to_f16((float)v); break;
  case PC_bf16: ((uint16_t *)p)[i] = pc_f32_to_bf16((float)v); break;
  case PC_f32: ((float *)p)[i] = (float)v; break;
  case PC_f64: ((double *)p)[i] = v; break;
  case PC_i8: ((int8_t *)p)[i] = (int8_t)v; break;
  case PC_i16: ((int16_t *)p)[i] = (int16_t)v; break;
  case PC_i32: ((int32_t *)p)[i] = (int32_t)v; break;
  case PC_i64: ((int64_t *)p)[i] = (int64_t)v; break;
  case PC_u8: ((uint8_t *)p)[i] = (uint8_t)v; break;
  case PC_bool: ((uint8_t *)p)[i] = v != 0; break;
  case PC_c64: ((float *)p)[2 * i] = (float)v, ((float *)p)[2 * i + 1] = (float)-v; break;
  case PC_u16: ((uint16_t *)p)[i] = (uint16_t)v; break;
  case PC_u32: ((uint32_t *)p)[i] = (uint32_t)v; break;
  case PC_u64: ((uint64_t *)p)[i] = (uint64_t)v; break;
  case PC_f8e4m3fn: case PC_f8e4m3fnuz: case PC_f8e5m2: case PC_f8e5m2fnuz: case PC_f4e2m1: case PC_f8e8m0:
    ((uint8_t *)p)[i] = pc_f32_to_f8(dt, (float)v, 0);
    break;
  case PC_i4: case PC_i2: { /* held sign-extended: wrap to the width */
    int s = 1 << (pc_dtype_subbyte_bits(dt) - 1);
    ((int8_t *)p)[i] = (int8_t)((((int)v & (2 * s - 1)) ^ s) - s);
    break;
  }
  case PC_u4: case PC_u2: ((uint8_t *)p)[i] = (uint8_t)((int)v & ((1 << pc_dtype_subbyte_bits(dt)) - 1)); break;
  case PC_DTYPE_COUNT: break;
  }
}

void *pc_test_link_open(const char *obj, const char *so, const char *libs, const char *tag) {
  char rt[1024], cmd[4096];
  pc_codegen_opts none = {0};
  pc_runtime_dir(&none, rt, sizeof rt);
  snprintf(cmd, sizeof cmd, "cc -shared -o %s %s %s/libprimc_rt.a %s", so, obj, rt, libs);
  if (!CHECK_MSG(system(cmd) == 0, "%s: link failed: %s", tag, cmd)) return NULL;
  void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
  CHECK_MSG(h != NULL, "%s: dlopen: %s", tag, dlerror());
  return h;
}

typedef int (*run_fn)(const void *const *, void *const *, void *);

int pc_test_ref_and_plan(pc_graph *r, pc_graph *g, const pc_tensor *ins, int n_in, pc_tensor *ref, int n_ref,
                         const char *tag) {
  memset(ref, 0, sizeof *ref * (size_t)n_ref);
  int ok = CHECK_MSG(pc_interp(r, ins, n_in, ref, n_ref) == PC_OK, "%s: interp: %s", tag, pc_error(r));
  pc_pipeline_opts po = {.opt_level = 2};
  return ok && CHECK_MSG(pc_pipeline_run(g, &po) == PC_OK, "%s: %s", tag, pc_error(g));
}

void (*pc_test_before_run)(void *so);

int pc_test_run_compiled(pc_graph *g, int opt_level, const pc_tensor *ins, pc_tensor *outs, const char *tag) {
  if (!CHECK_MSG(g->n_inputs <= PC_TEST_MAX_IO && g->n_outputs <= PC_TEST_MAX_IO, "%s: too many inputs/outputs", tag))
    return 0;
  char dir[] = "/tmp/primc-cg-XXXXXX", obj[256], so[256], hdr[256];
  if (!CHECK(mkdtemp(dir) != NULL)) return 0;
  snprintf(obj, sizeof obj, "%s/m.o", dir);
  snprintf(so, sizeof so, "%s/m.so", dir);
  snprintf(hdr, sizeof hdr, "%s/m.h", dir);
  pc_codegen_opts o = {0};
  o.emit = PC_EMIT_OBJ;
  o.output = obj;
  o.name = "m";
  o.opt_level = opt_level;
  pc_status cs = pc_codegen(g, &o); /* before pc_error: arguments are evaluated in no set order */
  int ok = CHECK_MSG(cs == PC_OK, "%s: codegen: %s", tag, pc_error(g));
  void *h = ok ? pc_test_link_open(obj, so, "-lm -lpthread", tag) : NULL;
  run_fn run = h ? (run_fn)dlsym(h, "m_run") : NULL;
  const int64_t *ws_size = h ? dlsym(h, "m_workspace_size") : NULL;
  ok = ok && h && CHECK_MSG(run && ws_size, "%s: entry points missing", tag);
  const void *in[PC_TEST_MAX_IO];
  void *out[PC_TEST_MAX_IO];
  for (int i = 0; i < g->n_inputs; i++) in[i] = ins[i].data;
  memset(outs, 0, sizeof *outs * (size_t)g->n_outputs);
  for (int i = 0; ok && i < g->n_outputs; i++) {
    const pc_value *v = g->outputs[i];
    outs[i] = (pc_tensor){v->type.dtype, v->type.rank, {0}, NULL};
    memcpy(outs[i].dims, v->type.dims, sizeof outs[i].dims);
    outs[i].data = calloc((size_t)pc_tensor_numel(&outs[i]) + 1, pc_dtype_size(v->type.dtype));
    out[i] = outs[i].data;
  }
  void *ws = ok ? aligned_alloc(64, (size_t)(*ws_size + 64)) : NULL;
  if (ok && pc_test_before_run) pc_test_before_run(h);
  if (ok) ok = CHECK_MSG(run(in, out, ws) == 0, "%s: run failed", tag);
  free(ws);
  if (h) dlclose(h);
  unlink(obj), unlink(so), unlink(hdr), rmdir(dir);
  return ok;
}

char *pc_test_kernels_text(pc_graph *g) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  CHECK(f && pc_kernels_print(g, f) == PC_OK);
  if (f) fclose(f);
  return buf;
}

int pc_test_compiled_matches_interp(pc_graph *g, const pc_tensor *in, int n_out, float rtol, const char *tag) {
  pc_tensor got[PC_TEST_MAX_IO], ref[PC_TEST_MAX_IO];
  if (!CHECK(n_out > 0 && n_out <= PC_TEST_MAX_IO)) return 0;
  memset(ref, 0, sizeof ref);
  int ok = CHECK(pc_interp(g, in, 1, ref, n_out) == PC_OK) && pc_test_run_compiled(g, 2, in, got, tag), ran = ok;
  for (int o = 0; ok && o < n_out; o++)
    for (int64_t i = 0; ok && i < pc_tensor_numel(&ref[o]); i++) {
      float r = ((float *)ref[o].data)[i], c = ((float *)got[o].data)[i];
      ok = CHECK_MSG(fabsf(r - c) <= rtol * fabsf(r), "%s: out%d[%lld] = %g, interpreter %g", tag, o, (long long)i, c,
                     r);
    }
  for (int o = 0; ran && o < n_out; o++) free(got[o].data);
  for (int o = 0; o < n_out; o++) pc_tensor_free(&ref[o]);
  return ok;
}

int pc_test_kernels_count_is(pc_graph *g, int want, const char *tag) {
  char *text = pc_test_kernels_text(g);
  int n = 0;
  for (const char *s = text; s && (s = strstr(s, "kernel k")); s++) n++;
  int ok = CHECK_MSG(n == want, "%s: %d kernels, want %d:\n%s", tag, n, want, text ? text : "");
  free(text);
  return ok;
}

pc_tensor pc_test_pattern_f32(int rank, const int64_t *dims) {
  pc_tensor t = {PC_f32, rank, {0}, NULL};
  int64_t n = 1;
  for (int d = 0; d < rank; d++) t.dims[d] = dims[d], n *= dims[d];
  t.data = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
  for (int64_t i = 0; t.data && i < n; i++) ((float *)t.data)[i] = (float)((i * 37 % 101) - 50) / 25.0f;
  return t;
}
