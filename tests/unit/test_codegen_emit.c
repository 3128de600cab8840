/* tests/unit/test_codegen_emit.c: what codegen writes: weights in rodata or appended to the object, LLVM IR,
 * assembly and aarch64 objects, standalone executables, and nonzero's output sized by the data (descriptor,
 * header, executable, the uses it does not support). */
#include "codegen/codegen.h"
#include "ir/ir.h"
#include "passes/passes.h"
#include "runtime/primc_rt.h"
#include "tests/test.h"
#include "tests/unit/codegen_check.h"
#include "tests/unit/helpers.h"

#include <dlfcn.h>
#include <elf.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---------------------------------------------------------------- weights, targets, files */

PC_TEST(codegen_weights_in_rodata) {
  pc_graph *g = pc_graph_new();
  float w[12];
  for (int i = 0; i < 12; i++) w[i] = (float)i * 0.5f - 2;
  pc_value *x = pc_input_add(g, "x", cg_ty(PC_f32, 2, (int64_t[]){5, 4}));
  pc_value *c = pc_const(g, cg_ty(PC_f32, 2, (int64_t[]){4, 3}), w);
  pc_value *y = pc_dot_general(g, x, c, 1, (int64_t[]){1}, (int64_t[]){0}, 0, NULL, NULL);
  pc_output_add(g, pc_add(g, y, pc_broadcast_to(g, pc_scalar(g, PC_f32, 1.5), 2, (int64_t[]){5, 3})));
  pc_output_add(g, c);
  cg_check_graph(g, (cg_range){-1, 1}, "weights");
  pc_graph_free(g);
}

static long file_size(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 ? (long)st.st_size : -1;
}

PC_TEST(codegen_emit_kinds_and_aarch64) {
  pc_graph *g = pc_graph_new();
  pc_value *x = pc_input_add(g, "x", cg_ty(PC_f32, 1, (int64_t[]){1024}));
  pc_output_add(g, pc_exp(g, pc_mul(g, x, x)));
  char dir[] = "/tmp/primc-cg-XXXXXX", path[256];
  CHECK(mkdtemp(dir) != NULL);
  static const struct {
    pc_emit emit;
    const char *file, *triple, *must;
  } cases[] = {
      {PC_EMIT_LLVM, "m.ll", NULL, "@m_run("},
      {PC_EMIT_ASM, "m.s", NULL, "m_run"},
      {PC_EMIT_OBJ, "a64.o", "aarch64-linux-gnu", NULL},
      {PC_EMIT_ASM, "a64.s", "aarch64-linux-gnu", "fmul"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, cases[i].file);
    pc_codegen_opts o = {0};
    o.emit = cases[i].emit;
    o.output = path;
    o.name = "m";
    o.triple = cases[i].triple;
    o.opt_level = 3;
    CHECK_MSG(pc_codegen(g, &o) == PC_OK, "%s: %s", cases[i].file, pc_error(g));
    CHECK(file_size(path) > 0);
    if (cases[i].must) {
      FILE *f = fopen(path, "r");
      char *buf = calloc(1, 1 << 20);
      size_t n = f ? fread(buf, 1, (1 << 20) - 1, f) : 0;
      buf[n] = 0;
      if (f) fclose(f);
      CHECK_CONTAINS(buf, cases[i].must);
      free(buf);
    }
    unlink(path);
  }
  snprintf(path, sizeof path, "%s/a64.h", dir);
  unlink(path);
  rmdir(dir);
  pc_graph_free(g);
}

/* f16 compares (max, min, the comparisons, isnan, sign, clamp) on every pair of special values: NaNs, signed zeros,
 * subnormals, infinities, the largest finite values, against the interpreter bit for bit (NaNs as NaNs); then the
 * same kinds compiled for Zen 3 (F16C, no AVX512-FP16) stay vector compares: an fpext'd half let InstCombine narrow
 * them to half compares, which that target lowered one element at a time (a ReLU 8 ns an element); and 8 wide */
PC_TEST(codegen_f16_compares) {
  static const uint16_t sv[] = {0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x0400, 0x3c00, 0xbc00, 0x7bff,
                                0xfbff, 0x7c00, 0xfc00, 0x7e00, 0xfe00, 0x7c01, 0x3555, 0xb555, 0x3c01};
  enum { NV = sizeof sv / sizeof *sv, N = NV * NV };
  uint16_t a[N], b[N];
  for (int i = 0; i < N; i++) a[i] = sv[i / NV], b[i] = sv[i % NV];
  pc_graph *g = pc_graph_new();
  int64_t d[1] = {N};
  pc_value *x = pc_input_add(g, "a", cg_ty(PC_f16, 1, d)), *y = pc_input_add(g, "b", cg_ty(PC_f16, 1, d));
  pc_value *zero = pc_broadcast_to(g, pc_scalar(g, PC_f16, 0), 1, d), *one = pc_broadcast_to(g, pc_scalar(g, PC_f16, 1), 1, d);
  pc_value *outs[] = {pc_max(g, x, y), pc_min(g, x, y), pc_lt(g, x, y),  pc_le(g, x, y),   pc_gt(g, x, y),
                      pc_ge(g, x, y),  pc_eq(g, x, y),  pc_ne(g, x, y),  pc_isnan(g, x),   pc_isinf(g, x),
                      pc_sign(g, x),   pc_max(g, x, zero), pc_clamp(g, x, pc_neg(g, one), one),
                      pc_where(g, pc_lt(g, x, y), x, y)};
  enum { NO = sizeof outs / sizeof *outs };
  for (int o = 0; o < NO; o++) pc_output_add(g, outs[o]);
  pc_tensor ins[2] = {{PC_f16, 1, {N}, a}, {PC_f16, 1, {N}, b}}, ref[NO], got[NO];
  memset(ref, 0, sizeof ref);
  memset(got, 0, sizeof got);
  int ok = CHECK_MSG(g->status == PC_OK, "build: %s", pc_error(g)) &&
           CHECK_MSG(pc_interp(g, ins, 2, ref, NO) == PC_OK, "interp: %s", pc_error(g)) &&
           cg_run_compiled(g, ins, got, "f16 compares");
  for (int o = 0; ok && o < NO; o++) {
    size_t es = pc_dtype_size(ref[o].dtype);
    int bad = -1;
    for (int i = 0; i < N && bad < 0; i++) {
      const unsigned char *p = (const unsigned char *)got[o].data + i * es, *q = (const unsigned char *)ref[o].data + i * es;
      int both_nan = ref[o].dtype == PC_f16 && isnan(pc_f16_to_f32(*(const uint16_t *)p)) &&
                     isnan(pc_f16_to_f32(*(const uint16_t *)q));
      if (memcmp(p, q, es) != 0 && !both_nan) bad = i;
    }
    CHECK_MSG(bad < 0, "output %d differs at a = 0x%04x, b = 0x%04x", o, bad < 0 ? 0 : a[bad], bad < 0 ? 0 : b[bad]);
  }
  for (int o = 0; o < NO; o++) {
    pc_tensor_free(&ref[o]);
    free(got[o].data);
  }
  pc_graph_free(g);

  g = pc_graph_new();
  int64_t big[1] = {4096};
  x = pc_input_add(g, "a", cg_ty(PC_f16, 1, big)), y = pc_input_add(g, "b", cg_ty(PC_f16, 1, big));
  pc_output_add(g, pc_max(g, pc_max(g, x, pc_broadcast_to(g, pc_scalar(g, PC_f16, 0), 1, big)), y));
  char dir[] = "/tmp/primc-f16-XXXXXX", path[256];
  CHECK(mkdtemp(dir) != NULL);
  snprintf(path, sizeof path, "%s/m.s", dir);
  pc_codegen_opts co = {0};
  co.emit = PC_EMIT_ASM, co.output = path, co.name = "m", co.triple = "x86_64-linux-gnu", co.cpu = "znver3";
  co.opt_level = 3;
  if (CHECK_MSG(pc_codegen(g, &co) == PC_OK, "asm: %s", pc_error(g))) {
    size_t n;
    char *s = pc_test_slurp(path, &n);
    int packed = 0;
    for (const char *q = s ? strstr(s, "\tvcmp") : NULL; q; q = strstr(q + 1, "\tvcmp")) {
      size_t len = strcspn(q + 1, " \t\n");
      packed |= len > 2 && q[len - 1] == 'p' && q[len] == 's';
    }
    CHECK_MSG(s && !strstr(s, "ucomiss"), "scalar compares of f16 values in the kernel");
    CHECK_MSG(packed, "no packed compare in the kernel");
    /* and its loop runs 8 lanes of ymm: LLVM's cost model, left to itself, picks 4 for f16 (llvm_kernel.c's f16_width) */
    int ymm = 0;
    for (const char *q = s ? strstr(s, "\tvcvtph2ps") : NULL; q; q = strstr(q + 1, "\tvcvtph2ps")) {
      size_t len = strcspn(q, "\n");
      for (size_t i = 0; i + 4 <= len; i++) ymm |= !strncmp(q + i, "%ymm", 4);
    }
    CHECK_MSG(ymm, "f16 loads widened 4 at a time (xmm), not 8 (ymm)");
    free(s);
  }
  unlink(path);
  snprintf(path, sizeof path, "%s/m.h", dir);
  unlink(path);
  rmdir(dir);
  pc_graph_free(g);
}

/* the bytes of the defined symbol sym in the ELF64 object at path (malloc'ed, *n of them), NULL when absent */
static unsigned char *elf_symbol_bytes(const char *path, const char *sym, size_t *n) {
  size_t len;
  unsigned char *b = (unsigned char *)pc_test_slurp(path, &len), *out = NULL;
  if (!b || len < sizeof(Elf64_Ehdr)) return free(b), NULL;
  const Elf64_Ehdr *eh = (const Elf64_Ehdr *)(void *)b;
  const Elf64_Shdr *sh = (const Elf64_Shdr *)(void *)(b + eh->e_shoff);
  for (int i = 0; i < eh->e_shnum && !out; i++) {
    if (sh[i].sh_type != SHT_SYMTAB) continue;
    const Elf64_Sym *sy = (const Elf64_Sym *)(void *)(b + sh[i].sh_offset);
    const char *names = (const char *)b + sh[sh[i].sh_link].sh_offset;
    for (size_t k = 0; k < sh[i].sh_size / sizeof *sy && !out; k++) {
      if (strcmp(names + sy[k].st_name, sym) != 0 || sy[k].st_shndx == SHN_UNDEF || sy[k].st_shndx >= eh->e_shnum)
        continue;
      const Elf64_Shdr *sec = &sh[sy[k].st_shndx];
      if (sec->sh_type != SHT_PROGBITS || !(sec->sh_flags & SHF_ALLOC) || sy[k].st_value + sy[k].st_size > sec->sh_size)
        continue;
      *n = sy[k].st_size;
      out = malloc(*n + 1);
      if (out) memcpy(out, b + sec->sh_offset + sy[k].st_value, *n);
    }
  }
  free(b);
  return out;
}

/* the weights never go through LLVM: they are appended to the object it wrote, as a section of their own
 * defining NAME_weights (codegen/elf_weights.c); the symbol's bytes are the constant's, on both targets */
PC_TEST(codegen_object_weights_appended) {
  float w[1000];
  for (int i = 0; i < 1000; i++) w[i] = (float)i * 0.5f + 1.0f;
  char dir[] = "/tmp/primc-cgw-XXXXXX", path[256];
  CHECK(mkdtemp(dir) != NULL);
  const char *triples[] = {NULL, "aarch64-linux-gnu"};
  for (int t = 0; t < 2; t++) {
    pc_graph *g = pc_graph_new();
    pc_value *x = pc_input_add(g, "x", cg_ty(PC_f32, 1, (int64_t[]){1000}));
    pc_output_add(g, pc_add(g, x, pc_const(g, cg_ty(PC_f32, 1, (int64_t[]){1000}), w)));
    snprintf(path, sizeof path, "%s/m.o", dir);
    pc_codegen_opts o = {0};
    o.emit = PC_EMIT_OBJ, o.output = path, o.name = "m", o.triple = triples[t], o.opt_level = 2;
    CHECK_MSG(pc_codegen(g, &o) == PC_OK, "%s: %s", triples[t] ? triples[t] : "host", pc_error(g));
    size_t n = 0;
    unsigned char *got = elf_symbol_bytes(path, "m_weights", &n);
    CHECK_MSG(got != NULL, "%s: m_weights defined in an allocated section", triples[t] ? triples[t] : "host");
    CHECK(got && n >= sizeof w && memcmp(got, w, sizeof w) == 0);
    free(got);
    unlink(path);
    snprintf(path, sizeof path, "%s/m.h", dir);
    unlink(path);
    pc_graph_free(g);
  }
  rmdir(dir);
}

PC_TEST(codegen_executable_runs) {
  pc_graph *g = pc_graph_new();
  pc_value *x = pc_input_add(g, "x", cg_ty(PC_f32, 2, (int64_t[]){8, 8}));
  pc_output_add(g, pc_tanh(g, pc_dot_general(g, x, x, 1, (int64_t[]){1}, (int64_t[]){0}, 0, NULL, NULL)));
  char dir[] = "/tmp/primc-cg-XXXXXX", exe[256], cmd[1024];
  CHECK(mkdtemp(dir) != NULL);
  snprintf(exe, sizeof exe, "%s/m", dir);
  for (int external = 0; external < 2; external++) {
    pc_codegen_opts o = {0};
    o.emit = PC_EMIT_EXE;
    o.output = exe;
    o.opt_level = 3;
    o.weights_external = external;
    CHECK_MSG(pc_codegen(g, &o) == PC_OK, "exe: %s", pc_error(g));
    snprintf(cmd, sizeof cmd, "%s --random-inputs --bench 3 -o %s > %s/log 2>&1", exe, dir, dir);
    CHECK_MSG(system(cmd) == 0, "running %s", cmd);
    snprintf(cmd, sizeof cmd, "%s/out0.npy", dir);
    CHECK(file_size(cmd) > 128);
    unlink(cmd);
  }
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0);
  pc_graph_free(g);
}

/* ---------------------------------------------------------------- nonzero: an output sized by the data */

/* x and its nonzeros' indices, [rank, n] row-major, worked out by hand (numpy.nonzero's order) */
typedef struct nz_case {
  const char *tag;
  pc_dtype dt;
  int rank;
  int64_t dims[3];
  double x[12];
  int64_t n, want[36];
} nz_case;

static const nz_case nz_cases[] = {
    {"f32 with NaN and -0", PC_f32, 2, {2, 3}, {0, 1.5, 0, NAN, 0, -0.0}, 2, {0, 1, 1, 0}},
    {"all zero", PC_f32, 2, {2, 3}, {0, 0, 0, 0, 0, 0}, 0, {0}},
    {"rank 3 i32", PC_i32, 3, {2, 2, 3}, {0, 3, 0, 0, 0, 0, -1, 0, 0, 0, 0, 7}, 3, {0, 1, 1, 0, 0, 1, 1, 0, 2}},
    {"f16 -0", PC_f16, 1, {5}, {0.5, -0.0, 0, 2, 0}, 2, {0, 3}},
    {"bool", PC_bool, 1, {4}, {1, 0, 1, 1}, 3, {0, 2, 3}},
};

static pc_graph *nz_graph(const nz_case *c, int opt_level, int unfused) {
  pc_graph *g = pc_graph_new();
  pc_value *x = pc_input_add(g, "x", cg_ty(c->dt, c->rank, c->dims));
  pc_output_add(g, pc_build(g, PC_OP_nonzero, &x, 1, NULL, 0));
  pc_pipeline_opts po = {.opt_level = opt_level, .unfused = unfused};
  pc_pipeline_run(g, &po);
  return g;
}

static int64_t nz_numel(const nz_case *c) {
  int64_t n = 1;
  for (int d = 0; d < c->rank; d++) n *= c->dims[d];
  return n;
}

/* the library's output buffer is the bound [rank, numel]; m_output_dims gives [rank, n] after the run */
static void nz_check_library(const nz_case *c, void *h, const char *tag) {
  const primc_model_desc *m = dlsym(h, "m_model");
  int64_t numel = nz_numel(c), bound = c->rank * numel;
  if (!CHECK_MSG(m && m->output_dims, "%s: m_model", tag)) return;
  CHECK_MSG(m->outputs[0].rank == 2 && m->outputs[0].dims[0] == c->rank && m->outputs[0].dims[1] == numel,
            "%s: the descriptor holds the bound", tag);
  unsigned char xb[12 * 8];
  for (int64_t i = 0; i < numel; i++) pc_test_put(c->dt, xb, i, c->x[i]);
  int64_t out[36 + 1], dims[PRIMC_MAX_RANK];
  for (int64_t i = 0; i <= bound; i++) out[i] = -7; /* untouched past rank * n */
  void *ws = aligned_alloc(64, (size_t)(m->workspace_size + 64) / 64 * 64);
  const void *in[1] = {xb};
  void *outs[1] = {out};
  CHECK_MSG(m->run(in, outs, ws) == 0, "%s: run", tag);
  CHECK_INT(m->output_dims(ws, 0, dims), PRIMC_OK);
  CHECK_MSG(dims[0] == c->rank && dims[1] == c->n, "%s: dims [%lld, %lld], want [%d, %lld]", tag, (long long)dims[0],
            (long long)dims[1], c->rank, (long long)c->n);
  for (int64_t i = 0; i < c->rank * c->n; i++)
    CHECK_MSG(out[i] == c->want[i], "%s: out[%lld] = %lld, want %lld", tag, (long long)i, (long long)out[i],
              (long long)c->want[i]);
  CHECK_MSG(out[bound] == -7, "%s: wrote past the bound", tag);
  CHECK_INT(m->output_dims(ws, 1, dims), PRIMC_ERR_ARG);
  free(ws);
}

PC_TEST(codegen_nonzero_output_sized_by_data) {
  for (size_t k = 0; k < sizeof nz_cases / sizeof nz_cases[0]; k++)
    for (int opt = 0; opt <= 2; opt += 2) {
      const nz_case *c = &nz_cases[k];
      char tag[96], dir[] = "/tmp/primc-cg-XXXXXX", obj[256], so[256], cmd[512];
      snprintf(tag, sizeof tag, "nonzero %s -O%d", c->tag, opt);
      pc_graph *g = nz_graph(c, opt, opt == 0);
      CHECK(mkdtemp(dir) != NULL);
      snprintf(obj, sizeof obj, "%s/m.o", dir);
      snprintf(so, sizeof so, "%s/m.so", dir);
      pc_codegen_opts o = {.emit = PC_EMIT_OBJ, .output = obj, .name = "m", .opt_level = opt};
      if (CHECK_MSG(pc_codegen(g, &o) == PC_OK, "%s: codegen: %s", tag, pc_error(g))) {
        snprintf(cmd, sizeof cmd, "%s/m.h", dir);
        char *hdr = pc_test_slurp(cmd, NULL);
        CHECK_CONTAINS(hdr, "#define m_OUTPUT0_DATA_DEPENDENT_DIMS 0x2");
        CHECK_CONTAINS(hdr, "int m_output_dims(const void *workspace, int32_t output, int64_t *dims);");
        free(hdr);
        void *h = pc_test_link_open(obj, so, "-lm -lpthread", tag);
        if (h) nz_check_library(c, h, tag);
        if (h) dlclose(h);
      }
      snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
      CHECK(system(cmd) == 0);
      pc_graph_free(g);
    }
}

/* the standalone executable writes the .npy in the actual shape */
PC_TEST(codegen_nonzero_executable_writes_actual_shape) {
  const nz_case *c = &nz_cases[2];
  pc_graph *g = nz_graph(c, 2, 0);
  char dir[] = "/tmp/primc-cg-XXXXXX", exe[256], path[256], cmd[1024], err[256];
  CHECK(mkdtemp(dir) != NULL);
  snprintf(exe, sizeof exe, "%s/m", dir);
  pc_codegen_opts o = {.emit = PC_EMIT_EXE, .output = exe, .opt_level = 2};
  CHECK_MSG(pc_codegen(g, &o) == PC_OK, "exe: %s", pc_error(g));
  int32_t xs[12];
  for (int i = 0; i < 12; i++) xs[i] = (int32_t)c->x[i];
  primc_array x = {PRIMC_I32, 3, {2, 2, 3}, xs}, y = {0};
  snprintf(path, sizeof path, "%s/x.npy", dir);
  CHECK(primc_npy_write(path, &x, err, sizeof err) == 0);
  snprintf(cmd, sizeof cmd, "%s %s -o %s > %s/log 2>&1", exe, path, dir, dir);
  CHECK_MSG(system(cmd) == 0, "running %s", cmd);
  snprintf(path, sizeof path, "%s/out0.npy", dir);
  if (CHECK_MSG(primc_npy_read(path, &y, err, sizeof err) == 0, "%s: %s", path, err)) {
    CHECK(y.dtype == PRIMC_I64 && y.rank == 2 && y.dims[0] == 3 && y.dims[1] == 3);
    for (int i = 0; i < 9 && y.rank == 2 && y.dims[0] * y.dims[1] == 9; i++) CHECK_INT(((int64_t *)y.data)[i], c->want[i]);
    free(y.data);
  }
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0);
  pc_graph_free(g);
}

/* anything reading a nonzero result would need its size at compile time: the error names both model nodes;
 * CUDA (whose host side cannot report the size yet) says it is CPU only */
PC_TEST(codegen_nonzero_unsupported_uses) {
  pc_graph *g = pc_graph_new();
  pc_value *x = pc_input_add(g, "x", cg_ty(PC_f32, 2, (int64_t[]){2, 3}));
  pc_set_origin(g, "NonZero \"nz\"");
  pc_value *n = pc_build(g, PC_OP_nonzero, &x, 1, NULL, 0);
  pc_set_origin(g, "Transpose \"t\"");
  pc_attr perm = pc_a_ints("perm", (int64_t[]){1, 0}, 2);
  pc_output_add(g, pc_build(g, PC_OP_transpose, &n, 1, &perm, 1));
  pc_set_origin(g, NULL);
  pc_pipeline_run(g, &(pc_pipeline_opts){.opt_level = 2});
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  CHECK(f && pc_kernels_print(g, f) == PC_ERR_UNSUPPORTED);
  if (f) fclose(f);
  free(buf);
  CHECK_CONTAINS(pc_error(g), "NonZero \"nz\": ");
  CHECK_CONTAINS(pc_error(g), "its data-dependent result feeds Transpose \"t\"; compiled code supports a nonzero result only "
                              "as a graph output");
  pc_graph_free(g);

  g = nz_graph(&nz_cases[0], 2, 0);
  f = open_memstream(&buf, &len);
  CHECK(f && pc_cuda_render(g, f) == PC_ERR_UNSUPPORTED);
  if (f) fclose(f);
  free(buf);
  CHECK_CONTAINS(pc_error(g), "the size of its result depends on the data: nonzero compiles for the CPU only");
  pc_graph_free(g);
}
