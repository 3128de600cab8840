/* tests/unit/test_codegen.c: compiles small prim graphs to objects, links and dlopens them, and compares with pc_interp. */
#include "codegen/codegen.h"
#include "codegen/kir.h"
#include "frontend/frontend.h"
#include "ir/ir.h"
#include "passes/passes.h"
#include "runtime/primc_rt.h"
#include "tests/test.h"
#include "tests/unit/helpers.h"

#include <dlfcn.h>
#include <elf.h>
#include <fenv.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---------------------------------------------------------------- data */

static uint64_t rng_state = 88172645463325252ull;
static uint64_t rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}
static double urand(double lo, double hi) { return lo + (hi - lo) * (double)(rnd() >> 11) / 9007199254740992.0; }

/* value ranges of generated inputs */
typedef struct range {
  double lo, hi;
} range;

static pc_tensor make_input(const pc_value *v, range r) {
  pc_tensor t = {v->type.dtype, v->type.rank, {0}, NULL};
  memcpy(t.dims, v->type.dims, sizeof t.dims);
  int64_t n = pc_tensor_numel(&t);
  t.data = calloc((size_t)n + 1, pc_dtype_size(t.dtype) + 8);
  for (int64_t i = 0; i < n; i++) {
    double x = urand(r.lo, r.hi);
    if (!pc_dtype_is_float(t.dtype)) x = (double)(int64_t)x;
    if (t.dtype == PC_bool) x = rnd() & 1;
    pc_test_put(t.dtype, t.data, i, x);
  }
  return t;
}

/* ---------------------------------------------------------------- compile, load, run */

/* compiles g to an object at -O2, links a shared library, runs it on ins into outs (malloc'ed) */
static int run_compiled(pc_graph *g, const pc_tensor *ins, pc_tensor *outs, const char *tag) {
  return pc_test_run_compiled(g, 2, ins, outs, tag);
}

static int close_enough(pc_dtype dt, double a, double b) {
  if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
  if (isinf(a) || isinf(b)) return a == b;
  double tol = dt == PC_f16 ? 2e-3 : dt == PC_bf16 ? 1e-2 : dt == PC_f32 || dt == PC_c64 ? 2e-5 : dt == PC_f64 ? 1e-12 : 0;
  return fabs(a - b) <= tol * (1 + fabs(b));
}

/* a is a value of f16 (11 significant bits, or a multiple of 2^-24 below 2^-14), found by frexp */
static int is_f16_value(double a) {
  int e;
  double m = frexp(a, &e);
  return a == 0 || isinf(a) || isnan(a) || (e <= 16 && ldexp(m, e < -13 ? 24 + e : 11) == nearbyint(ldexp(m, e < -13 ? 24 + e : 11)));
}

/* interpreter vs compiled code on random inputs in range r, outputs compared within the tolerance of dtype tol_as
 * (theirs when PC_DTYPE_COUNT); with tol_as f16, f32 outputs must also hold f16 values */
static int check_graph_as(pc_graph *g, range r, const char *tag, pc_dtype tol_as) {
  if (!CHECK_MSG(g->status == PC_OK, "%s: build: %s", tag, pc_error(g))) return 0;
  pc_tensor ins[16], ref[16], got[16];
  for (int i = 0; i < g->n_inputs; i++) ins[i] = make_input(g->inputs[i], r);
  memset(ref, 0, sizeof ref);
  memset(got, 0, sizeof got);
  int ok = CHECK_MSG(pc_interp(g, ins, g->n_inputs, ref, g->n_outputs) == PC_OK, "%s: interp: %s", tag, pc_error(g));
  ok = ok && run_compiled(g, ins, got, tag);
  for (int o = 0; ok && o < g->n_outputs; o++) {
    pc_dtype dt = ref[o].dtype, lane = dt == PC_c64 ? PC_f32 : dt; /* complex: both halves */
    int64_t n = pc_tensor_numel(&ref[o]) * (dt == PC_c64 ? 2 : 1);
    for (int64_t i = 0; i < n; i++) {
      double a = pc_elem_f64(lane, got[o].data, i), b = pc_elem_f64(lane, ref[o].data, i);
      if (!close_enough(tol_as == PC_DTYPE_COUNT ? ref[o].dtype : tol_as, a, b) || (tol_as == PC_f16 && !is_f16_value(a))) {
        CHECK_MSG(0, "%s: out%d[%lld] = %.9g, interpreter %.9g", tag, o, (long long)i, a, b);
        ok = 0;
        break;
      }
    }
  }
  for (int i = 0; i < g->n_inputs; i++) free(ins[i].data);
  for (int o = 0; o < g->n_outputs; o++) {
    pc_tensor_free(&ref[o]);
    free(got[o].data);
  }
  return ok;
}

static int check_graph(pc_graph *g, range r, const char *tag) { return check_graph_as(g, r, tag, PC_DTYPE_COUNT); }

/* g compiled to LLVM IR text at opt level `opt` (caller frees); NULL on failure */
static char *llvm_text(pc_graph *g, int opt) {
  char dir[] = "/tmp/primc-cg-XXXXXX", path[256];
  if (!CHECK(mkdtemp(dir) != NULL)) return NULL;
  snprintf(path, sizeof path, "%s/m.ll", dir);
  pc_codegen_opts o = {0};
  o.emit = PC_EMIT_LLVM;
  o.output = path;
  o.name = "m";
  o.opt_level = opt;
  char *buf = NULL;
  if (CHECK_MSG(pc_codegen(g, &o) == PC_OK, "%s", pc_error(g))) {
    FILE *f = fopen(path, "r");
    buf = calloc(1, 1 << 22);
    size_t n = f && buf ? fread(buf, 1, (1 << 22) - 1, f) : 0;
    if (f) fclose(f);
    if (!CHECK(n > 0)) free(buf), buf = NULL;
  }
  unlink(path);
  rmdir(dir);
  return buf;
}

/* the kernel listing of g shows `want`; then g compiled agrees with the interpreter; g is freed */
static void listing_has_then_run(pc_graph *g, const char *want, range r, const char *tag) {
  char *buf = pc_test_kernels_text(g);
  CHECK_CONTAINS(buf, want);
  free(buf);
  check_graph(g, r, tag);
  pc_graph_free(g);
}

static pc_type ty(pc_dtype dt, int rank, const int64_t *dims) { return pc_type_make(dt, rank, dims); }

/* ---------------------------------------------------------------- elementwise */

static const pc_dtype num_types[] = {PC_f32, PC_f64, PC_i32, PC_i64, PC_i8, PC_u8, PC_f16};

static int accepts(pc_op op, pc_dtype dt) {
  switch (pc_prim(op)->operands) { /* operand classes of prims.def */
  case PC_CLS_ANY: return 1;
  case PC_CLS_NUM: return dt != PC_bool;
  case PC_CLS_FLOAT: return pc_dtype_is_float(dt);
  case PC_CLS_INT: return pc_dtype_is_int(dt);
  case PC_CLS_LOGIC: return dt == PC_bool || pc_dtype_is_int(dt);
  }
  return 0;
}

/* inputs that keep each op in its domain */
static range op_range(pc_op op, pc_dtype dt) {
  if (op == PC_OP_log || op == PC_OP_sqrt || op == PC_OP_rsqrt) return (range){0.1, 4};
  if (op == PC_OP_shift_left || op == PC_OP_shift_right) return (range){0, 7};
  if (op == PC_OP_pow) return pc_dtype_is_float(dt) ? (range){0.1, 2} : (range){0, 4};
  if (op == PC_OP_div || op == PC_OP_rem) return pc_dtype_is_float(dt) ? (range){0.5, 4} : (range){1, 9};
  if (pc_dtype_is_int(dt) && !pc_dtype_is_signed(dt)) return (range){0, 15};
  return pc_dtype_is_float(dt) ? (range){-3, 3} : (range){-9, 10};
}

static void check_elementwise(pc_op op, pc_dtype dt) {
  static const int64_t dims[2] = {37, 53};
  pc_graph *g = pc_graph_new();
  pc_value *in[3];
  int n = pc_prim(op)->n_in;
  for (int i = 0; i < n; i++) in[i] = pc_input_add(g, NULL, ty(dt, 2, dims));
  pc_value *y = pc_build(g, op, in, n, NULL, 0);
  if (y) pc_output_add(g, y);
  char tag[64];
  snprintf(tag, sizeof tag, "%s/%s", pc_prim(op)->name, pc_dtype_name(dt));
  check_graph(g, op_range(op, dt), tag);
  pc_graph_free(g);
}

PC_TEST(codegen_unary_binary_all_dtypes) {
  static const pc_dtype types[] = {PC_f32, PC_f64, PC_f16, PC_i32, PC_i64, PC_i8, PC_u8, PC_bool, PC_u16, PC_u32, PC_u64};
  for (int op = 0; op < PC_OP_COUNT; op++) {
    const pc_prim_info *pi = pc_prim((pc_op)op);
    if (pi->kind != PC_KIND_UNARY && pi->kind != PC_KIND_BINARY && pi->kind != PC_KIND_TERNARY) continue;
    for (size_t t = 0; t < sizeof types / sizeof *types; t++)
      if (accepts((pc_op)op, types[t])) check_elementwise((pc_op)op, types[t]);
  }
}

PC_TEST(codegen_where) {
  for (size_t t = 0; t < sizeof num_types / sizeof *num_types; t++) {
    pc_graph *g = pc_graph_new();
    int64_t d[1] = {100};
    pc_value *c = pc_input_add(g, "c", ty(PC_bool, 1, d));
    pc_value *a = pc_input_add(g, "a", ty(num_types[t], 1, d)), *b = pc_input_add(g, "b", ty(num_types[t], 1, d));
    pc_output_add(g, pc_where(g, c, a, b));
    check_graph(g, (range){-5, 5}, "where");
    pc_graph_free(g);
  }
}

PC_TEST(codegen_convert_all_pairs) {
  static const pc_dtype types[] = {PC_f32, PC_f64, PC_f16, PC_bf16, PC_i32, PC_i64, PC_i8, PC_u8, PC_bool,
                                   PC_u16, PC_u32, PC_u64};
  int nt = (int)(sizeof types / sizeof *types);
  for (int a = 0; a < nt; a++)
    for (int b = 0; b < nt; b++) {
      pc_graph *g = pc_graph_new();
      int64_t d[1] = {64};
      pc_value *x = pc_input_add(g, "x", ty(types[a], 1, d));
      pc_output_add(g, pc_convert(g, x, types[b]));
      char tag[64];
      snprintf(tag, sizeof tag, "convert %s->%s", pc_dtype_name(types[a]), pc_dtype_name(types[b]));
      int to_unsigned = pc_dtype_is_int(types[b]) && !pc_dtype_is_signed(types[b]);
      int from_unsigned = pc_dtype_is_int(types[a]) && !pc_dtype_is_signed(types[a]);
      check_graph(g, to_unsigned || from_unsigned ? (range){0, 100} : (range){-100, 100}, tag);
      pc_graph_free(g);
    }
}

/* u64 values at and above 2^63, where signed instructions would give other results: the compiled code
 * must agree bit for bit with the interpreter (which tests/data/prims checks against numpy) */
PC_TEST(codegen_u64_above_2_63) {
  static const uint64_t xs[8] = {0, 1, 7, 9223372036854775807ull, 9223372036854775808ull, 9223372036854775813ull,
                                 18446744073709551615ull, 12345678901234567890ull};
  static const uint64_t ys[8] = {3, 1, 2, 9223372036854775808ull, 5, 4611686018427387904ull, 18446744073709551615ull, 63};
  int64_t d[1] = {8};
  pc_graph *g = pc_graph_new();
  pc_value *x = pc_input_add(g, "x", ty(PC_u64, 1, d)), *y = pc_input_add(g, "y", ty(PC_u64, 1, d));
  pc_output_add(g, pc_div(g, x, y));
  pc_output_add(g, pc_rem(g, x, y));
  pc_output_add(g, pc_max(g, x, y));
  pc_output_add(g, pc_lt(g, x, y));
  pc_output_add(g, pc_shift_right(g, x, y));
  pc_output_add(g, pc_convert(g, x, PC_f64));
  int64_t ax[1] = {0};
  pc_output_add(g, pc_reduce(g, PC_OP_reduce_max, x, 1, ax));
  pc_tensor ins[2] = {{PC_u64, 1, {8}, (void *)xs}, {PC_u64, 1, {8}, (void *)ys}}, ref[8], got[8];
  memset(ref, 0, sizeof ref);
  memset(got, 0, sizeof got);
  int ok = CHECK_MSG(g->status == PC_OK, "build: %s", pc_error(g)) &&
           CHECK_MSG(pc_interp(g, ins, 2, ref, g->n_outputs) == PC_OK, "interp: %s", pc_error(g)) &&
           run_compiled(g, ins, got, "u64");
  for (int o = 0; ok && o < g->n_outputs; o++)
    CHECK_MSG(memcmp(got[o].data, ref[o].data, pc_tensor_nbytes(&ref[o])) == 0, "u64 output %d differs", o);
  CHECK_MSG(!ok || ((const double *)ref[5].data)[6] == 18446744073709551616.0, "u64 max as f64");
  CHECK_MSG(!ok || (((const uint64_t *)ref[0].data)[6] == 1 && ((const uint64_t *)ref[0].data)[4] == 1844674407370955161ull),
            "u64 division");
  for (int o = 0; o < g->n_outputs; o++) {
    pc_tensor_free(&ref[o]);
    free(got[o].data);
  }
  pc_graph_free(g);
}

/* the f8 formats: LLVM's table decode and integer-IR encode (and the runtime's scatter path) agree bit for
 * bit with the interpreter, whose conversions tests/unit/test_f8.c checks against ml_dtypes. Inputs: every
 * f32 whose low 16 bits are zero (every exponent, every f8 rounding tie and the bits around it), every byte. */
PC_TEST(codegen_f8_bitwise) {
  static const pc_dtype f8s[] = {PC_f8e4m3fn, PC_f8e4m3fnuz, PC_f8e5m2, PC_f8e5m2fnuz, PC_f4e2m1, PC_f8e8m0};
  enum { N = 65536 };
  float *xs = malloc(sizeof *xs * N);
  uint8_t bytes[256], upd[8] = {0x36, 0x35, 0x33, 0x31, 0x2e, 0x37, 0x3a, 0xbd}; /* fractions: subnormal products round */
  for (uint32_t i = 0; i < N; i++) {
    uint32_t u = i << 16;
    memcpy(&xs[i], &u, 4);
  }
  for (int b = 0; b < 256; b++) bytes[b] = (uint8_t)b;
  for (size_t k = 0; k < sizeof f8s / sizeof *f8s; k++) {
    pc_dtype t = f8s[k];
    pc_graph *g = pc_graph_new();
    pc_value *x = pc_input_add(g, "x", ty(PC_f32, 1, (int64_t[]){N}));
    pc_value *b = pc_input_add(g, "b", ty(t, 1, (int64_t[]){256}));
    pc_value *u = pc_input_add(g, "u", ty(t, 1, (int64_t[]){8}));
    pc_output_add(g, pc_convert(g, x, t));                      /* encode */
    pc_output_add(g, pc_convert(g, b, PC_f32));                 /* decode */
    pc_output_add(g, pc_mul(g, b, b));                          /* computed in f32, rounded once */
    int64_t idx[8] = {0, 5, 2, 2, 1, 3, 4, 0};
    pc_value *ix = pc_const(g, ty(PC_i64, 1, (int64_t[]){8}), idx);
    pc_attr sa[2] = {pc_a_int("axis", 0), pc_a_str("reduce", "mul")};
    pc_output_add(g, pc_build(g, PC_OP_scatter, (pc_value *[]){b, ix, u}, 3, sa, 2));
    pc_tensor ins[3] = {{PC_f32, 1, {N}, xs}, {t, 1, {256}, bytes}, {t, 1, {8}, upd}}, ref[4], got[4];
    memset(ref, 0, sizeof ref);
    memset(got, 0, sizeof got);
    char tag[64];
    snprintf(tag, sizeof tag, "f8 %s", pc_dtype_name(t));
    int ok = CHECK_MSG(g->status == PC_OK, "%s: build: %s", tag, pc_error(g)) &&
             CHECK_MSG(pc_interp(g, ins, 3, ref, g->n_outputs) == PC_OK, "%s: interp: %s", tag, pc_error(g)) &&
             run_compiled(g, ins, got, tag);
    for (int o = 0; ok && o < g->n_outputs; o++) {
      int64_t n = pc_tensor_numel(&ref[o]), bad = -1;
      size_t es = pc_dtype_size(ref[o].dtype);
      for (int64_t i = 0; i < n && bad < 0; i++) {
        const unsigned char *p = (const unsigned char *)got[o].data + i * es, *q = (const unsigned char *)ref[o].data + i * es;
        int both_nan = ref[o].dtype == PC_f32 && isnan(*(const float *)p) && isnan(*(const float *)q);
        if (memcmp(p, q, es) != 0 && !both_nan) bad = i;
      }
      CHECK_MSG(bad < 0, "%s output %d differs at %lld", tag, o, (long long)bad);
    }
    for (int o = 0; o < g->n_outputs; o++) {
      pc_tensor_free(&ref[o]);
      free(got[o].data);
    }
    pc_graph_free(g);
  }
  free(xs);
}

/* sub-byte ints held one per byte: arithmetic wraps at their width. Every pair of values: the interpreter
 * against two's complement arithmetic written out here, the compiled code against the interpreter */
static int wrap_to(int64_t v, int bits, int is_signed) {
  int64_t m = ((int64_t)1 << bits) - 1, s = (int64_t)1 << (bits - 1);
  return (int)(is_signed ? ((v & m) ^ s) - s : v & m);
}

PC_TEST(codegen_subbyte_ints_wrap) {
  static const pc_dtype types[] = {PC_i4, PC_u4, PC_i2, PC_u2};
  for (size_t k = 0; k < sizeof types / sizeof *types; k++) {
    pc_dtype t = types[k];
    int bits = pc_dtype_subbyte_bits(t), sg = pc_dtype_is_signed(t), lo = sg ? -(1 << (bits - 1)) : 0;
    int n = 1 << bits, nn = n * n;
    int8_t *a = malloc((size_t)nn), *b = malloc((size_t)nn);
    int32_t *w = malloc(sizeof *w * (size_t)nn);
    for (int i = 0; i < nn; i++) a[i] = (int8_t)(lo + i / n), b[i] = (int8_t)(lo + i % n), w[i] = 37 * i - 500;
    int64_t d[1] = {nn};
    pc_graph *g = pc_graph_new();
    pc_value *x = pc_input_add(g, "a", ty(t, 1, d)), *y = pc_input_add(g, "b", ty(t, 1, d));
    pc_value *wi = pc_input_add(g, "w", ty(PC_i32, 1, d));
    pc_output_add(g, pc_add(g, x, y));
    pc_output_add(g, pc_mul(g, x, y));
    pc_output_add(g, pc_sub(g, x, y));
    pc_output_add(g, pc_convert(g, wi, t));
    pc_output_add(g, pc_convert(g, x, PC_f32));
    pc_tensor ins[3] = {{t, 1, {nn}, a}, {t, 1, {nn}, b}, {PC_i32, 1, {nn}, w}}, ref[5], got[5];
    memset(ref, 0, sizeof ref);
    memset(got, 0, sizeof got);
    char tag[32];
    snprintf(tag, sizeof tag, "%s", pc_dtype_name(t));
    int ok = CHECK_MSG(g->status == PC_OK, "%s: build: %s", tag, pc_error(g)) &&
             CHECK_MSG(pc_interp(g, ins, 3, ref, g->n_outputs) == PC_OK, "%s: interp: %s", tag, pc_error(g));
    int bad = 0;
    for (int i = 0; ok && i < nn; i++) {
      int va = a[i], vb = b[i];
      int want[4] = {wrap_to(va + vb, bits, sg), wrap_to(va * vb, bits, sg), wrap_to(va - vb, bits, sg), wrap_to(w[i], bits, sg)};
      for (int o = 0; o < 4; o++) {
        int gotv = sg ? ((const int8_t *)ref[o].data)[i] : ((const uint8_t *)ref[o].data)[i];
        if (gotv != want[o] && bad++ < 3) CHECK_MSG(0, "%s out%d[%d] = %d, want %d", tag, o, i, gotv, want[o]);
      }
      bad += ((const float *)ref[4].data)[i] != (float)va;
    }
    CHECK_MSG(ok && bad == 0, "%s: %d interpreter results differ", tag, bad);
    ok = ok && run_compiled(g, ins, got, tag);
    for (int o = 0; ok && o < g->n_outputs; o++)
      CHECK_MSG(memcmp(got[o].data, ref[o].data, pc_tensor_nbytes(&ref[o])) == 0, "%s: compiled output %d differs", tag, o);
    for (int o = 0; o < g->n_outputs; o++) {
      pc_tensor_free(&ref[o]);
      free(got[o].data);
    }
    pc_graph_free(g);
    free(a);
    free(b);
    free(w);
  }
}

/* ---------------------------------------------------------------- movement */

PC_TEST(codegen_movement) {
  for (size_t t = 0; t < 3; t++) {
    pc_dtype dt = (pc_dtype[]){PC_f32, PC_i64, PC_u8}[t];
    pc_graph *g = pc_graph_new();
    int64_t d[3] = {4, 5, 6};
    pc_value *x = pc_input_add(g, "x", ty(dt, 3, d));
    pc_output_add(g, pc_transpose(g, x, (int64_t[]){2, 0, 1}));
    pc_output_add(g, pc_reshape(g, x, 2, (int64_t[]){10, 12}));
    pc_output_add(g, pc_slice(g, x, (int64_t[]){1, 0, 1}, (int64_t[]){4, 5, 6}, (int64_t[]){2, 2, 3}));
    pc_output_add(g, pc_broadcast_in_dim(g, pc_slice(g, x, (int64_t[]){0, 0, 0}, (int64_t[]){4, 1, 6}, (int64_t[]){1, 1, 1}),
                                         4, (int64_t[]){3, 4, 7, 6}, (int64_t[]){1, 2, 3}));
    pc_output_add(g, pc_concatenate(g, (pc_value *[]){x, x}, 2, 1));
    pc_attr rev = pc_a_ints("dims", (int64_t[]){0, 2}, 2);
    pc_output_add(g, pc_build(g, PC_OP_rev, &x, 1, &rev, 1));
    pc_attr pad[4] = {pc_a_ints("low", (int64_t[]){1, -1, 0}, 3), pc_a_ints("high", (int64_t[]){2, 0, -2}, 3),
                      pc_a_ints("interior", (int64_t[]){1, 0, 2}, 3), pc_a_float("value", 7)};
    pc_output_add(g, pc_build(g, PC_OP_pad, &x, 1, pad, 4));
    pc_attr iota[3] = {pc_a_dtype("dtype", dt), pc_a_ints("shape", (int64_t[]){3, 4}, 2), pc_a_int("axis", 1)};
    pc_output_add(g, pc_build(g, PC_OP_iota, NULL, 0, iota, 3));
    pc_output_add(g, x); /* an input as an output: copied */
    check_graph(g, (range){-9, 9}, "movement");
    pc_graph_free(g);
  }
}

/* ---------------------------------------------------------------- reductions */

PC_TEST(codegen_reductions) {
  static const pc_op reds[] = {PC_OP_reduce_sum, PC_OP_reduce_prod, PC_OP_reduce_max, PC_OP_reduce_min};
  static const pc_dtype types[] = {PC_f32, PC_f64, PC_i32, PC_i64, PC_f16};
  for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
    pc_graph *g = pc_graph_new();
    int64_t d[3] = {3, 4, 5};
    pc_value *x = pc_input_add(g, "x", ty(types[t], 3, d));
    for (size_t r = 0; r < 4; r++) {
      pc_output_add(g, pc_reduce(g, reds[r], x, 1, (int64_t[]){1}));
      pc_output_add(g, pc_reduce(g, reds[r], x, 2, (int64_t[]){0, 2}));
      pc_output_add(g, pc_reduce(g, reds[r], x, 3, (int64_t[]){0, 1, 2}));
    }
    for (int last = 0; last < 2; last++)
      for (int op = 0; op < 2; op++) {
        pc_attr a[2] = {pc_a_int("axis", 1 + op), pc_a_int("last", last)};
        pc_output_add(g, pc_build(g, op ? PC_OP_argmin : PC_OP_argmax, &x, 1, a, 2));
      }
    char tag[64];
    snprintf(tag, sizeof tag, "reductions/%s", pc_dtype_name(types[t]));
    check_graph(g, pc_dtype_is_float(types[t]) ? (range){0.5, 1.5} : (range){-3, 4}, tag);
    pc_graph_free(g);
  }
}

/* ---------------------------------------------------------------- contractions */

PC_TEST(codegen_dot_general) {
  static const pc_dtype types[] = {PC_f32, PC_f64, PC_i32, PC_f16};
  for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
    pc_dtype dt = types[t];
    pc_graph *g = pc_graph_new();
    pc_value *a = pc_input_add(g, "a", ty(dt, 2, (int64_t[]){17, 33}));
    pc_value *b = pc_input_add(g, "b", ty(dt, 2, (int64_t[]){33, 9}));
    pc_value *bt = pc_input_add(g, "bt", ty(dt, 2, (int64_t[]){9, 33}));
    pc_value *x = pc_input_add(g, "x", ty(dt, 4, (int64_t[]){2, 5, 3, 7}));
    pc_value *w = pc_input_add(g, "w", ty(dt, 3, (int64_t[]){7, 2, 4}));
    /* plain, transposed rhs, transposed lhs */
    pc_output_add(g, pc_dot_general(g, a, b, 1, (int64_t[]){1}, (int64_t[]){0}, 0, NULL, NULL));
    pc_output_add(g, pc_dot_general(g, a, bt, 1, (int64_t[]){1}, (int64_t[]){1}, 0, NULL, NULL));
    pc_output_add(g, pc_dot_general(g, b, a, 1, (int64_t[]){0}, (int64_t[]){1}, 0, NULL, NULL));
    /* batch dim 0 of x with dim 1 of w, contract x dim 3 with w dim 0: needs a copy of w */
    pc_output_add(g, pc_dot_general(g, x, w, 1, (int64_t[]){3}, (int64_t[]){0}, 1, (int64_t[]){0}, (int64_t[]){1}));
    char tag[64];
    snprintf(tag, sizeof tag, "dot/%s", pc_dtype_name(dt));
    check_graph(g, pc_dtype_is_float(dt) ? (range){-1, 1} : (range){-5, 6}, tag);
    pc_graph_free(g);
  }
}

static void conv_case(pc_dtype dt, int64_t groups, const int64_t *stride, const int64_t *pad, const int64_t *dil) {
  pc_graph *g = pc_graph_new();
  pc_value *x = pc_input_add(g, "x", ty(dt, 4, (int64_t[]){2, 4, 9, 8}));
  pc_value *w = pc_input_add(g, "w", ty(dt, 4, (int64_t[]){6, 4 / groups, 3, 2}));
  pc_attr a[6] = {pc_a_ints("stride", stride, 2), pc_a_ints("pad_lo", pad, 2), pc_a_ints("pad_hi", pad, 2),
                  pc_a_ints("dilation", dil, 2), pc_a_ints("lhs_dilation", (int64_t[]){1, 1}, 2),
                  pc_a_int("groups", groups)};
  pc_value *in[2] = {x, w};
  pc_value *y = pc_build(g, PC_OP_conv, in, 2, a, 6);
  if (y) pc_output_add(g, y);
  char tag[64];
  snprintf(tag, sizeof tag, "conv/%s/g%lld", pc_dtype_name(dt), (long long)groups);
  check_graph(g, pc_dtype_is_float(dt) ? (range){-1, 1} : (range){-3, 4}, tag);
  pc_graph_free(g);
}

PC_TEST(codegen_conv) {
  conv_case(PC_f32, 1, (int64_t[]){1, 1}, (int64_t[]){1, 1}, (int64_t[]){1, 1});
  conv_case(PC_f32, 2, (int64_t[]){2, 1}, (int64_t[]){1, 0}, (int64_t[]){1, 2});
  conv_case(PC_f64, 1, (int64_t[]){1, 2}, (int64_t[]){0, 1}, (int64_t[]){1, 1});
  conv_case(PC_i32, 2, (int64_t[]){1, 1}, (int64_t[]){1, 1}, (int64_t[]){1, 1});
}

/* ---------------------------------------------------------------- others kept whole */

PC_TEST(codegen_gather_scatter_cumsum_sort) {
  pc_graph *g = pc_graph_new();
  pc_value *x = pc_input_add(g, "x", ty(PC_f32, 2, (int64_t[]){6, 5}));
  int64_t idx[8] = {0, 5, 2, 2, 1, 3, 4, 0};
  pc_value *ix = pc_const(g, ty(PC_i64, 2, (int64_t[]){4, 2}), idx);
  pc_attr ga = pc_a_int("axis", 0);
  pc_output_add(g, pc_build(g, PC_OP_gather, (pc_value *[]){x, ix}, 2, &ga, 1));
  pc_value *upd = pc_input_add(g, "u", ty(PC_f32, 2, (int64_t[]){4, 2}));
  pc_attr sa[2] = {pc_a_int("axis", 0), pc_a_str("reduce", "add")};
  pc_output_add(g, pc_build(g, PC_OP_scatter, (pc_value *[]){x, ix, upd}, 3, sa, 2));
  pc_attr ca[3] = {pc_a_int("axis", 1), pc_a_int("exclusive", 1), pc_a_int("reverse", 1)};
  pc_output_add(g, pc_build(g, PC_OP_cumsum, &x, 1, ca, 3));
  pc_attr so[2] = {pc_a_int("axis", 1), pc_a_int("descending", 1)};
  pc_node *s = pc_node_add(g, PC_OP_sort, &x, 1, so, 2);
  pc_attr tk[3] = {pc_a_int("k", 2), pc_a_int("axis", 0), pc_a_int("largest", 0)};
  pc_node *t = pc_node_add(g, PC_OP_topk, &x, 1, tk, 3);
  if (s && t) {
    pc_output_add(g, s->out[0]);
    pc_output_add(g, s->out[1]);
    pc_output_add(g, t->out[0]);
    pc_output_add(g, t->out[1]);
  }
  check_graph(g, (range){-4, 4}, "gather/scatter/cumsum/sort/topk");
  pc_graph_free(g);
}

/* ---------------------------------------------------------------- weights, targets, files */

PC_TEST(codegen_weights_in_rodata) {
  pc_graph *g = pc_graph_new();
  float w[12];
  for (int i = 0; i < 12; i++) w[i] = (float)i * 0.5f - 2;
  pc_value *x = pc_input_add(g, "x", ty(PC_f32, 2, (int64_t[]){5, 4}));
  pc_value *c = pc_const(g, ty(PC_f32, 2, (int64_t[]){4, 3}), w);
  pc_value *y = pc_dot_general(g, x, c, 1, (int64_t[]){1}, (int64_t[]){0}, 0, NULL, NULL);
  pc_output_add(g, pc_add(g, y, pc_broadcast_to(g, pc_scalar(g, PC_f32, 1.5), 2, (int64_t[]){5, 3})));
  pc_output_add(g, c);
  check_graph(g, (range){-1, 1}, "weights");
  pc_graph_free(g);
}

static long file_size(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 ? (long)st.st_size : -1;
}

PC_TEST(codegen_emit_kinds_and_aarch64) {
  pc_graph *g = pc_graph_new();
  pc_value *x = pc_input_add(g, "x", ty(PC_f32, 1, (int64_t[]){1024}));
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
    pc_value *x = pc_input_add(g, "x", ty(PC_f32, 1, (int64_t[]){1000}));
    pc_output_add(g, pc_add(g, x, pc_const(g, ty(PC_f32, 1, (int64_t[]){1000}), w)));
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

PC_TEST(codegen_kernel_listing_names_origin) {
  pc_graph *g = pc_graph_new();
  pc_value *x = pc_input_add(g, "x", ty(PC_f32, 2, (int64_t[]){2, 3}));
  pc_set_origin(g, "Relu \"act1\"");
  pc_output_add(g, pc_max(g, x, pc_broadcast_to(g, pc_scalar(g, PC_f32, 0), 2, (int64_t[]){2, 3})));
  char *buf = pc_test_kernels_text(g);
  CHECK_CONTAINS(buf, "loops(i0<6)"); /* [2, 3] walked contiguously: one loop */
  CHECK_CONTAINS(buf, "max(");
  CHECK_CONTAINS(buf, "Relu \"act1\"");
  free(buf);
  pc_graph_free(g);
}

/* ---------------------------------------------------------------- fused groups */

/* every node of g created from index `from` on is put in group `grp` */
static void group_from(pc_graph *g, int from, int grp) {
  for (int i = from; i < g->n_nodes; i++) g->nodes[i]->group = grp;
  if (g->n_groups < grp + 1) g->n_groups = grp + 1;
}

PC_TEST(codegen_fused_groups) {
  pc_graph *g = pc_graph_new();
  int64_t d[2] = {33, 65};
  pc_value *x = pc_input_add(g, "x", ty(PC_f32, 2, d)), *y = pc_input_add(g, "y", ty(PC_f32, 2, d));
  /* pointwise chain with a transposed, broadcast operand: one loop nest */
  int n0 = g->n_nodes;
  pc_value *row = pc_reduce(g, PC_OP_reduce_max, x, 1, (int64_t[]){1});
  group_from(g, n0, 0);
  n0 = g->n_nodes;
  pc_value *sh = pc_sub(g, x, pc_broadcast_in_dim(g, row, 2, d, (int64_t[]){0}));
  pc_value *e = pc_exp(g, sh);
  pc_value *z = pc_mul(g, e, pc_transpose(g, pc_transpose(g, y, (int64_t[]){1, 0}), (int64_t[]){1, 0}));
  group_from(g, n0, 1);
  /* reduction with an elementwise prologue */
  n0 = g->n_nodes;
  pc_value *s = pc_reduce(g, PC_OP_reduce_sum, pc_mul(g, z, z), 1, (int64_t[]){0});
  group_from(g, n0, 2);
  /* a group that is not one loop nest (reshape of an inner value): split back into prims */
  n0 = g->n_nodes;
  pc_value *r = pc_reshape(g, pc_neg(g, z), 2, (int64_t[]){65, 33});
  group_from(g, n0, 3);
  pc_output_add(g, e);
  pc_output_add(g, z);
  pc_output_add(g, s);
  pc_output_add(g, r);
  char *buf = pc_test_kernels_text(g);
  CHECK_CONTAINS(buf, "sum mul(");                /* the prologue is inside the reduction */
  CHECK_CONTAINS(buf, "= exp(sub(");              /* the broadcast is a stride-0 load */
  free(buf);
  check_graph(g, (range){-2, 2}, "fused");
  pc_graph_free(g);
}

static int count_lines_starting(const char *buf, const char *prefix) {
  int n = 0;
  for (const char *l = buf; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) n += !strncmp(l, prefix, strlen(prefix));
  return n;
}

/* attention's head split (slice, reshape that splits a dim, transpose, scale) is one loop kernel,
 * and so is a transpose stored through a reshape that merges dims (looped over the operand) */
PC_TEST(codegen_reshape_split_and_merge_fuse) {
  pc_graph *g = pc_graph_new();
  pc_value *qkv = pc_input_add(g, "qkv", ty(PC_f32, 2, (int64_t[]){7, 24}));
  int n0 = g->n_nodes;
  pc_value *q = pc_slice(g, qkv, (int64_t[]){0, 8}, (int64_t[]){7, 16}, (int64_t[]){1, 1});
  pc_value *heads = pc_reshape(g, q, 3, (int64_t[]){7, 2, 4});
  pc_value *t = pc_transpose(g, heads, (int64_t[]){1, 0, 2});
  pc_value *scaled = pc_div(g, t, pc_broadcast_to(g, pc_scalar(g, PC_f32, 2), 3, (int64_t[]){2, 7, 4}));
  group_from(g, n0, 0);
  pc_value *e = pc_exp(g, scaled); /* materializes the scaled heads: the group's result */
  group_from(g, g->n_nodes - 1, 1);
  n0 = g->n_nodes;
  pc_value *back = pc_reshape(g, pc_transpose(g, e, (int64_t[]){1, 0, 2}), 2, (int64_t[]){7, 8});
  group_from(g, n0, 2);
  pc_output_add(g, back);
  char *buf = pc_test_kernels_text(g);
  CHECK_INT(count_lines_starting(buf, "kernel "), 3); /* one per group, no copy in between */
  CHECK_CONTAINS(buf, "= div(b");               /* the slice and split reshape are the load's map */
  free(buf);
  check_graph(g, (range){-2, 2}, "reshapes");
  pc_graph_free(g);
}

/* loops every access walks contiguously become one, so 14x14 planes fill whole vectors: a per-channel
 * scale collapses the plane, a global average pool's reduced axes too; a transpose keeps its loops */
PC_TEST(codegen_collapses_contiguous_loops) {
  pc_graph *g = pc_graph_new();
  int64_t d[3] = {4, 14, 14};
  pc_value *x = pc_input_add(g, "x", ty(PC_f32, 3, d)), *c = pc_input_add(g, "c", ty(PC_f32, 1, d));
  int n0 = g->n_nodes;
  pc_value *y = pc_mul(g, x, pc_broadcast_in_dim(g, c, 3, d, (int64_t[]){0}));
  group_from(g, n0, 0);
  pc_output_add(g, y);
  pc_output_add(g, pc_reduce(g, PC_OP_reduce_sum, x, 2, (int64_t[]){1, 2}));
  pc_output_add(g, pc_transpose(g, x, (int64_t[]){0, 2, 1}));
  char *buf = pc_test_kernels_text(g);
  CHECK_CONTAINS(buf, "loops(i0<4, i1<196)\n  b2[0 +196*i0 +1*i1] = mul(");
  CHECK_CONTAINS(buf, "loops(i0<4, i1<196 reduce)");
  CHECK_CONTAINS(buf, "loops(i0<4, i1<14, i2<14)");
  free(buf);
  check_graph(g, (range){-9, 9}, "collapsed");
  pc_graph_free(g);
}

/* elementwise max/min: a NaN in either operand wins (prims.def), written as compare + select so x86
 * gets vmaxps/vminps and a blend instead of llvm.maximum's expansion; reductions keep the intrinsic */
PC_TEST(codegen_max_min_nan_select) {
  pc_graph *g = pc_graph_new();
  int64_t d[1] = {40};
  pc_value *x = pc_input_add(g, "x", ty(PC_f32, 1, d)), *y = pc_input_add(g, "y", ty(PC_f32, 1, d));
  pc_output_add(g, pc_max(g, x, y));
  pc_output_add(g, pc_min(g, x, y));
  char *buf = llvm_text(g, 0);
  CHECK_MSG(buf && !strstr(buf, "llvm.maximum") && !strstr(buf, "llvm.minimum"), "elementwise max/min call intrinsics");
  CHECK_CONTAINS(buf ? buf : "", "fcmp uno");
  free(buf);
  pc_tensor in[2], out[2];
  for (int i = 0; i < 2; i++) in[i] = make_input(g->inputs[i], (range){-3, 3});
  float *a = in[0].data, *b = in[1].data;
  a[3] = NAN, b[7] = NAN, a[11] = b[11] = NAN, a[13] = INFINITY, b[17] = -INFINITY, a[19] = 2, b[19] = 2;
  if (run_compiled(g, in, out, "max/min")) {
    const float *mx = out[0].data, *mn = out[1].data;
    for (int i = 0; i < 40; i++) {
      int nan = isnan(a[i]) || isnan(b[i]);
      CHECK_MSG(nan ? isnan(mx[i]) && isnan(mn[i]) : mx[i] == (a[i] > b[i] ? a[i] : b[i]) && mn[i] == (a[i] < b[i] ? a[i] : b[i]),
                "i=%d: max(%g, %g)=%g, min=%g", i, a[i], b[i], mx[i], mn[i]);
    }
    free(out[0].data), free(out[1].data);
  }
  free(in[0].data), free(in[1].data);
  pc_graph_free(g);
}

/* a chain of max (a MaxPool window) is rebalanced into a tree: max(max(a, b), max(c, d)); a NaN in
 * any operand still wins, else the largest does */
PC_TEST(codegen_max_chain_balanced) {
  pc_graph *g = pc_graph_new();
  int64_t d[1] = {40};
  pc_value *x[5];
  for (int i = 0; i < 5; i++) {
    char name[16];
    snprintf(name, sizeof name, "x%d", i);
    x[i] = pc_input_add(g, name, ty(PC_f32, 1, d));
  }
  pc_value *m = x[0];
  int n0 = g->n_nodes;
  for (int i = 1; i < 5; i++) m = pc_max(g, m, x[i]);
  group_from(g, n0, 0);
  pc_output_add(g, m);
  char *buf = pc_test_kernels_text(g);
  CHECK_CONTAINS(buf, "= max(max(b0[0 +1*i0], b1[0 +1*i0]), max(b2[0 +1*i0], max(b3[0 +1*i0], b4[0 +1*i0])))");
  free(buf);
  pc_tensor in[5], out[1];
  for (int i = 0; i < 5; i++) in[i] = make_input(g->inputs[i], (range){-3, 3});
  for (int i = 0; i < 5; i++) ((float *)in[i].data)[3 + 7 * i] = NAN; /* a NaN in each position of the chain */
  ((float *)in[4].data)[30] = INFINITY, ((float *)in[0].data)[31] = -INFINITY;
  if (run_compiled(g, in, out, "max chain")) {
    const float *y = out[0].data;
    for (int e = 0; e < 40; e++) {
      float want = -INFINITY;
      int nan = 0;
      for (int i = 0; i < 5; i++) {
        float v = ((float *)in[i].data)[e];
        nan |= isnan(v);
        if (v > want) want = v;
      }
      CHECK_MSG(nan ? isnan(y[e]) : y[e] == want, "e=%d: %g, want %g", e, y[e], nan ? NAN : want);
    }
    free(out[0].data);
  }
  for (int i = 0; i < 5; i++) free(in[i].data);
  pc_graph_free(g);
}

/* a pad without interior padding fills only the frame around the copied box, never the whole
 * result first: here the row above, the column before and the two after */
PC_TEST(codegen_pad_fills_only_the_frame) {
  pc_graph *g = pc_graph_new();
  pc_value *x = pc_input_add(g, "x", ty(PC_f32, 3, (int64_t[]){2, 5, 6}));
  pc_attr pad[4] = {pc_a_ints("low", (int64_t[]){0, 1, 1}, 3), pc_a_ints("high", (int64_t[]){0, 0, 2}, 3),
                    pc_a_ints("interior", (int64_t[]){0, 0, 0}, 3), pc_a_float("value", -INFINITY)};
  pc_output_add(g, pc_build(g, PC_OP_pad, &x, 1, pad, 4));
  char *buf = pc_test_kernels_text(g);
  CHECK_CONTAINS(buf, "loops(i0<2, i1<9)\n  b1[0 +54*i0 +1*i1] = -inf");           /* row 0 */
  CHECK_CONTAINS(buf, "loops(i0<2, i1<5)\n  b1[9 +54*i0 +9*i1] = -inf");           /* column 0 */
  CHECK_CONTAINS(buf, "loops(i0<2, i1<5, i2<2)\n  b1[16 +54*i0 +9*i1 +1*i2] = -inf"); /* columns 7, 8 */
  CHECK_MSG(!strstr(buf, "i1<6, i2<9)"), "the whole result is filled:\n%s", buf);
  free(buf);
  check_graph(g, (range){-9, 9}, "pad frame");
  pc_graph_free(g);
}

PC_TEST(codegen_executable_runs) {
  pc_graph *g = pc_graph_new();
  pc_value *x = pc_input_add(g, "x", ty(PC_f32, 2, (int64_t[]){8, 8}));
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

PC_TEST(codegen_gemm_epilogue) {
  pc_graph *g = pc_graph_new();
  pc_value *x = pc_input_add(g, "x", ty(PC_f32, 2, (int64_t[]){70, 24}));
  pc_value *w = pc_input_add(g, "w", ty(PC_f32, 2, (int64_t[]){24, 600}));
  pc_value *b = pc_input_add(g, "b", ty(PC_f32, 1, (int64_t[]){600}));
  int n0 = g->n_nodes;
  pc_value *y = pc_dot_general(g, x, w, 1, (int64_t[]){1}, (int64_t[]){0}, 0, NULL, NULL);
  y = pc_add(g, y, pc_broadcast_in_dim(g, b, 2, (int64_t[]){70, 600}, (int64_t[]){1}));
  y = pc_max(g, y, pc_broadcast_to(g, pc_scalar(g, PC_f32, 0), 2, (int64_t[]){70, 600}));
  group_from(g, n0, 0);
  pc_output_add(g, y);
  listing_has_then_run(g, "with epilogue k1 per row block", (range){-1, 1}, "gemm+bias+relu");
}

/* dots with constant B (plain and transposed, with an epilogue) read GEMM panels packed at
 * compile time; results match the interpreter */
PC_TEST(codegen_dot_constant_weights_packed) {
  pc_graph *g = pc_graph_new();
  static float w[24 * 70], wt[70 * 24], bias[70];
  for (int i = 0; i < 24 * 70; i++) w[i] = (float)urand(-1, 1), wt[i] = (float)urand(-1, 1);
  for (int i = 0; i < 70; i++) bias[i] = (float)urand(-1, 1);
  pc_value *x = pc_input_add(g, "x", ty(PC_f32, 2, (int64_t[]){40, 24}));
  pc_value *wc = pc_const(g, ty(PC_f32, 2, (int64_t[]){24, 70}), w);
  pc_value *wtc = pc_const(g, ty(PC_f32, 2, (int64_t[]){70, 24}), wt);
  pc_value *bc = pc_const(g, ty(PC_f32, 1, (int64_t[]){70}), bias);
  int n0 = g->n_nodes;
  pc_value *y = pc_dot_general(g, x, wc, 1, (int64_t[]){1}, (int64_t[]){0}, 0, NULL, NULL);
  y = pc_add(g, y, pc_broadcast_in_dim(g, bc, 2, (int64_t[]){40, 70}, (int64_t[]){1}));
  group_from(g, n0, 0);
  pc_output_add(g, y);
  pc_output_add(g, pc_dot_general(g, x, wtc, 1, (int64_t[]){1}, (int64_t[]){1}, 0, NULL, NULL));
  char *buf = llvm_text(g, 0);
  CHECK_CONTAINS(buf ? buf : "", "@primc_k_dot_packed_epi(");
  CHECK_CONTAINS(buf ? buf : "", "@primc_k_dot_packed(");
  free(buf);
  check_graph(g, (range){-1, 1}, "packed weights");
  pc_graph_free(g);
}

/* a GEMV (x of one row, a classifier's input) reads packed panels too: x's row stride is never
 * stepped, so it qualifies whatever it says (it was 0 and sent MobileNetV2's classifier down the
 * unpacked path, reading B's rows 4 KB apart: 0.57 -> 0.17 ms) */
PC_TEST(codegen_gemv_constant_weights_packed) {
  pc_graph *g = pc_graph_new();
  static float w[200 * 70];
  for (int i = 0; i < 200 * 70; i++) w[i] = (float)urand(-1, 1);
  pc_value *x = pc_input_add(g, "x", ty(PC_f32, 2, (int64_t[]){1, 200}));
  pc_value *wc = pc_const(g, ty(PC_f32, 2, (int64_t[]){200, 70}), w);
  pc_output_add(g, pc_dot_general(g, x, wc, 1, (int64_t[]){1}, (int64_t[]){0}, 0, NULL, NULL));
  char *buf = llvm_text(g, 0);
  CHECK_CONTAINS(buf ? buf : "", "@primc_k_dot_packed(");
  free(buf);
  check_graph(g, (range){-1, 1}, "packed GEMV");
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
  pc_value *x = pc_input_add(g, "x", ty(PC_f32, 4, (int64_t[]){t.n, C, 12, 12}));
  pc_type wt = ty(PC_f32, 4, (int64_t[]){C, C / t.groups, 3, 3});
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
  pc_value *b = t.bias == 1 ? pc_input_add(g, "b", ty(PC_f32, 1, (int64_t[]){C})) : NULL;
  pc_value *r = t.res ? pc_input_add(g, "r", ty(PC_f32, 4, od)) : NULL;
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
  group_from(g, n0, 0);
  pc_output_add(g, y);
  char *buf = pc_test_kernels_text(g);
  CHECK_MSG((strstr(buf, "in the call") != NULL) == (t.want != NULL), "n=%lld groups=%lld act %d:\n%s", (long long)t.n,
            (long long)t.groups, t.act, buf);
  free(buf);
  /* rounded to f16: the f32 sum and the interpreter's may round to neighbouring f16 values */
  check_graph_as(g, (range){-1, 1}, "conv epilogue", f16 ? PC_f16 : PC_DTYPE_COUNT);
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
  group_from(g, n0, grp);
  return y;
}

static void small_conv_depthwise_case(int64_t k, int64_t fk, int64_t fs, int64_t stride, int want_pair) {
  pc_graph *g = pc_graph_new();
  int64_t C = 24, H = 14, W = 29; /* rows of 16 + 8 + 4 + 1 pixels */
  pc_value *x = pc_input_add(g, "x", ty(PC_f32, 4, (int64_t[]){1, k, H, W}));
  int64_t nw = C * k * fk * fk;
  float *wd = malloc(sizeof(float) * (size_t)nw);
  for (int64_t i = 0; i < nw; i++) wd[i] = (float)((i * 37 % 101) - 50) / 200.0f;
  pc_value *w1 = pc_const(g, ty(PC_f32, 4, (int64_t[]){C, k, fk, fk}), wd);
  free(wd);
  pc_value *b1 = pc_input_add(g, "b1", ty(PC_f32, 1, (int64_t[]){C}));
  pc_value *w2 = pc_input_add(g, "w2", ty(PC_f32, 4, (int64_t[]){C, 1, 3, 3}));
  pc_value *b2 = pc_input_add(g, "b2", ty(PC_f32, 1, (int64_t[]){C}));
  pc_value *m = conv_bias_clamp(g, x, w1, b1, fs, fk / 2, 1, 6, 0);
  pc_value *y = conv_bias_clamp(g, m, w2, b2, stride, 1, C, 0.5, 1);
  if (y) pc_output_add(g, y);
  char *buf = pc_test_kernels_text(g);
  int paired = strstr(buf, "in the same call") != NULL;
  int here = primc_isa_covers(primc_sgemm_isa(), PRIMC_ISA_AVX2); /* the pair's AVX-512 or AVX2 code */
  CHECK_MSG(paired == (want_pair && here), "k=%lld %lldx%lld/%lld, stride %lld:\n%s",
            (long long)k, (long long)fk, (long long)fk, (long long)fs, (long long)stride, buf);
  free(buf);
  check_graph(g, (range){-1, 1}, "small conv then depthwise");
  pc_graph_free(g);
}

PC_TEST(codegen_small_conv_depthwise_pair) {
  small_conv_depthwise_case(16, 1, 1, 2, 1);
  small_conv_depthwise_case(8, 1, 1, 1, 1);
  small_conv_depthwise_case(3, 3, 2, 1, 1);  /* a stem: 27 taps x channels */
  small_conv_depthwise_case(64, 1, 1, 2, 0); /* 64 input channels: the GEMM's register tile wins */
  small_conv_depthwise_case(8, 3, 1, 1, 0);  /* 72 taps x channels */
}

PC_TEST(codegen_random_fft) {
  pc_graph *g = pc_graph_new();
  for (int normal = 0; normal < 2; normal++) {
    pc_attr ra[6] = {pc_a_dtype("dtype", PC_f32), pc_a_ints("shape", (int64_t[]){5, 7}, 2),
                     pc_a_str("dist", normal ? "normal" : "uniform"), pc_a_float("a", normal ? 1 : -2),
                     pc_a_float("b", 3), pc_a_int("seed", 1234567)};
    pc_output_add(g, pc_build(g, PC_OP_random, NULL, 0, ra, 6));
  }
  pc_value *x = pc_input_add(g, "x", ty(PC_f32, 2, (int64_t[]){3, 8}));
  pc_attr fa[2] = {pc_a_str("type", "rfft"), pc_a_int("length", 8)};
  pc_value *spec = pc_build(g, PC_OP_fft, &x, 1, fa, 2);
  pc_attr ia[2] = {pc_a_str("type", "irfft"), pc_a_int("length", 8)};
  pc_attr ca[2] = {pc_a_str("type", "fft"), pc_a_int("length", 5)};
  pc_attr ba[2] = {pc_a_str("type", "ifft"), pc_a_int("length", 5)};
  pc_value *back = pc_build(g, PC_OP_fft, &spec, 1, ia, 2);
  pc_value *c = pc_build(g, PC_OP_fft, &spec, 1, ca, 2);
  pc_output_add(g, back);
  pc_output_add(g, pc_build(g, PC_OP_fft, &c, 1, ba, 2));
  check_graph(g, (range){-1, 1}, "random/fft");
  pc_graph_free(g);
}

PC_TEST(codegen_parallel_loops) {
  pc_graph *g = pc_graph_new();
  int64_t d[3] = {1, 513, 301};
  pc_value *x = pc_input_add(g, "x", ty(PC_f32, 3, d)), *y = pc_input_add(g, "y", ty(PC_f32, 3, d));
  pc_value *z = pc_add(g, pc_exp(g, x), y);
  pc_output_add(g, z);
  pc_output_add(g, pc_reduce(g, PC_OP_reduce_sum, z, 1, (int64_t[]){2}));
  pc_output_add(g, pc_reduce(g, PC_OP_reduce_max, z, 2, (int64_t[]){0, 1}));
  pc_attr a[2] = {pc_a_int("axis", 1), pc_a_int("last", 0)};
  pc_output_add(g, pc_build(g, PC_OP_argmax, &z, 1, a, 2));
  check_graph(g, (range){-2, 2}, "parallel");
  pc_graph_free(g);
}

PC_TEST(codegen_gather_reads_broadcast_in_place) {
  pc_graph *g = pc_graph_new();
  pc_value *tab = pc_input_add(g, "tab", ty(PC_f32, 2, (int64_t[]){10, 4}));
  int64_t idx[6] = {3, 9, 0, 0, 7, 1};
  pc_value *ix = pc_const(g, ty(PC_i64, 2, (int64_t[]){2, 3}), idx);
  pc_value *ib = pc_broadcast_in_dim(g, ix, 3, (int64_t[]){2, 3, 4}, (int64_t[]){0, 1});
  int n0 = g->n_nodes;
  pc_value *tb = pc_broadcast_in_dim(g, tab, 3, (int64_t[]){10, 3, 4}, (int64_t[]){0, 2});
  pc_attr ga = pc_a_int("axis", 0);
  pc_value *out = pc_build(g, PC_OP_gather, (pc_value *[]){tb, ib}, 2, &ga, 1);
  group_from(g, n0, 0);
  pc_output_add(g, out);
  listing_has_then_run(g, "primc_k_gather_strided(", (range){-3, 3}, "gather of a broadcast");
}

/* the vectorized exp, tanh and erf against the interpreter's double-precision libm, in ulps */
PC_TEST(codegen_fast_exp_tanh_ulps) {
  static const pc_op ops[] = {PC_OP_exp, PC_OP_tanh, PC_OP_sigmoid, PC_OP_erf};
  static const range ranges[] = {{-0.4, 0.4}, {-12, 12}, {-100, 100}, {-1e-3, 1e-3}, {-4.5, 4.5}, {-1.2, 1.2}};
  for (size_t o = 0; o < 4; o++)
    for (size_t r = 0; r < 6; r++) {
      pc_graph *g = pc_graph_new();
      pc_value *x = pc_input_add(g, "x", ty(PC_f32, 1, (int64_t[]){4096}));
      pc_output_add(g, pc_build(g, ops[o], &x, 1, NULL, 0));
      pc_tensor in = make_input(x, ranges[r]), ref = {0}, got = {0};
      CHECK(pc_interp(g, &in, 1, &ref, 1) == PC_OK);
      if (run_compiled(g, &in, &got, "fast math")) {
        double worst = 0;
        for (int i = 0; i < 4096; i++) {
          float a = ((float *)got.data)[i], b = ((float *)ref.data)[i];
          double ulp = b == 0 ? 1e-45 : fabs(nextafterf(b, INFINITY) - b);
          if (!(isinf(a) && a == b)) worst = fmax(worst, fabs((double)a - b) / ulp);
        }
        CHECK_MSG(worst <= 4, "%s on [%g, %g]: %.1f ulp", pc_prim(ops[o])->name, ranges[r].lo, ranges[r].hi, worst);
      }
      free(in.data);
      free(got.data);
      pc_tensor_free(&ref);
      pc_graph_free(g);
    }
}

/* the vectorized log over every binade (subnormals too), around 1, and at 0, -0, negatives, inf and NaN,
 * against the interpreter's double-precision libm */
static void clear_fp_flags(void *so) {
  (void)so;
  feclearexcept(FE_ALL_EXCEPT);
}

/* exp of scores far below its range (a causal softmax's -inf, an additive mask's -1e4) is 0 without a subnormal
 * on the way: on x86 each subnormal product is a microcode assist (such a softmax ran 4-5x slower), and the
 * underflow flag shows one was made */
PC_TEST(codegen_fast_exp_no_subnormal_below_range) {
  enum { N = 64 };
  pc_graph *g = pc_graph_new();
  pc_value *x = pc_input_add(g, "x", ty(PC_f32, 1, (int64_t[]){N}));
  pc_output_add(g, pc_build(g, PC_OP_exp, &x, 1, NULL, 0));
  pc_tensor in = make_input(x, (range){-1, 1}), got = {0};
  for (int i = 0; i < N; i++) ((float *)in.data)[i] = i % 4 == 0 ? -INFINITY : i % 4 == 1 ? -1e4f : i % 4 == 2 ? -200.0f : -104.5f;
  pc_test_before_run = clear_fp_flags;
  int ran = run_compiled(g, &in, &got, "exp below range");
  int under = fetestexcept(FE_UNDERFLOW);
  pc_test_before_run = NULL;
  if (ran) {
    CHECK_MSG(!under, "exp of inputs below -104 raised underflow (a subnormal intermediate)");
    for (int i = 0; i < N; i++)
      if (!CHECK_MSG(((float *)got.data)[i] == 0.0f, "exp(%g) = %g", ((float *)in.data)[i], ((float *)got.data)[i])) break;
  }
  free(in.data);
  free(got.data);
  pc_graph_free(g);
}

PC_TEST(codegen_fast_log_ulps) {
  enum { N = 2560 };
  static const float m[6] = {1.0f, 1.1f, 1.37f, 1.4142135f, 1.4142137f, 1.99f};
  float v[N];
  int n = 0;
  for (int e = -149; e <= 127; e++)
    for (int j = 0; j < 6; j++) v[n++] = ldexpf(m[j], e);
  for (int j = 1; j <= 200; j++) v[n++] = 1.0f + (float)j * 0x1p-23f, v[n++] = 1.0f - (float)j * 0x1p-24f;
  static const float special[] = {0.0f, -0.0f, -1.0f, -1e-40f, INFINITY, -INFINITY, NAN, 0x1p-149f, 3.4028235e38f};
  for (size_t j = 0; j < sizeof special / sizeof special[0]; j++) v[n++] = special[j];
  while (n < N) v[n] = (float)urand(1e-3, 1e3), n++;
  pc_graph *g = pc_graph_new();
  pc_value *x = pc_input_add(g, "x", ty(PC_f32, 1, (int64_t[]){N}));
  pc_output_add(g, pc_build(g, PC_OP_log, &x, 1, NULL, 0));
  pc_tensor in = make_input(x, (range){1, 2}), ref = {0}, got = {0};
  memcpy(in.data, v, sizeof v);
  CHECK(pc_interp(g, &in, 1, &ref, 1) == PC_OK);
  if (run_compiled(g, &in, &got, "fast log")) {
    double worst = 0;
    for (int i = 0; i < N; i++) {
      float a = ((float *)got.data)[i], b = ((float *)ref.data)[i];
      if (isnan(b) || isinf(b)) {
        if (!CHECK_MSG(isnan(b) ? isnan(a) : a == b, "log(%g) = %g, want %g", v[i], a, b)) break;
        continue;
      }
      double ulp = b == 0 ? 1e-45 : fabs(nextafterf(b, INFINITY) - b), d = fabs((double)a - b) / ulp;
      if (d > worst) worst = d;
      if (!CHECK_MSG(d <= 2, "log(%a) = %a, want %a", v[i], a, b)) break;
    }
    CHECK(worst <= 2);
  }
  free(in.data);
  free(got.data);
  pc_tensor_free(&ref);
  pc_graph_free(g);
}

PC_TEST(codegen_bitcast_scatter_modes_bf16) {
  pc_graph *g = pc_graph_new();
  pc_value *x = pc_input_add(g, "x", ty(PC_f32, 2, (int64_t[]){3, 4}));
  pc_attr b1 = pc_a_dtype("dtype", PC_i32), b2 = pc_a_dtype("dtype", PC_u8);
  pc_output_add(g, pc_build(g, PC_OP_bitcast, &x, 1, &b1, 1));
  pc_output_add(g, pc_build(g, PC_OP_bitcast, &x, 1, &b2, 1));
  int32_t idx[4] = {2, 0, 1, 2};
  pc_value *ix = pc_const(g, ty(PC_i32, 2, (int64_t[]){1, 4}), idx);
  pc_value *upd = pc_input_add(g, "u", ty(PC_f32, 2, (int64_t[]){1, 4}));
  static const char *const modes[] = {"none", "mul", "max", "min"};
  for (int m = 0; m < 4; m++) {
    pc_attr sa[2] = {pc_a_int("axis", 0), pc_a_str("reduce", modes[m])};
    pc_output_add(g, pc_build(g, PC_OP_scatter, (pc_value *[]){x, ix, upd}, 3, sa, 2));
  }
  pc_value *h = pc_input_add(g, "h", ty(PC_bf16, 2, (int64_t[]){3, 4}));
  pc_output_add(g, pc_mul(g, pc_exp(g, h), h));
  pc_output_add(g, pc_reduce(g, PC_OP_reduce_sum, h, 1, (int64_t[]){1}));
  check_graph(g, (range){-2, 2}, "bitcast/scatter/bf16");
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
  pc_value *x = pc_input_add(g, "x", ty(c->dt, c->rank, c->dims));
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
  pc_value *x = pc_input_add(g, "x", ty(PC_f32, 2, (int64_t[]){2, 3}));
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
  static const range ranges[3] = {{-255, 255}, {-5000, 5000}, {-2e9, 2e9}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
    for (int huge = 0; huge < 3; huge++) {
      pc_graph *g = pc_graph_new();
      int s = cases[i].s;
      int64_t xd[4] = {2, cases[i].c, cases[i].h, cases[i].w}, wd[4] = {cases[i].o, cases[i].c / cases[i].groups,
                                                                        cases[i].kh, cases[i].kw};
      if (s == 1) xd[2] = cases[i].w, wd[2] = cases[i].kw;
      pc_value *x = pc_input_add(g, "x", ty(PC_i32, 2 + s, xd)), *w = pc_input_add(g, "w", ty(PC_i32, 2 + s, wd));
      int64_t st[2] = {cases[i].stride, cases[i].stride}, pd[2] = {cases[i].pad, cases[i].pad},
              dl[2] = {cases[i].dil, cases[i].dil}, one[2] = {1, 1};
      pc_attr a[6] = {pc_a_ints("stride", st, s), pc_a_ints("pad_lo", pd, s), pc_a_ints("pad_hi", pd, s),
                      pc_a_ints("dilation", dl, s), pc_a_ints("lhs_dilation", one, s), pc_a_int("groups", cases[i].groups)};
      pc_output_add(g, pc_build(g, PC_OP_conv, (pc_value *[]){x, w}, 2, a, 6));
      char tag[64];
      snprintf(tag, sizeof tag, "int32 conv case %zu, |x| <= %.0f", i, ranges[huge].hi);
      check_graph(g, ranges[huge], tag);
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

/* Each materialized result is stored by one kernel: no two stores anywhere in the program write the same buffer
 * through the same index map (a fused group's pointwise results were stored again at every later flush: YOLO's
 * SPP pools were recomputed in the next pool's kernel and after the concat). Pad kernels write one buffer in
 * pieces, through different maps, and pass. */
PC_TEST(codegen_no_result_stored_twice) {
  static const char *const models[] = {"tests/data/onnx_edge/maxpool_spp_5_9_13/model.onnx",
                                       "models/yolo_tiny/model.onnx"};
  for (size_t m = 0; m < sizeof models / sizeof *models; m++) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", pc_test_srcdir(), models[m]);
    pc_graph *g = pc_onnx_load(path, NULL);
    if (!CHECK_MSG(g && g->status == PC_OK, "%s: %s", models[m], g ? pc_error(g) : "out of memory")) {
      pc_graph_free(g);
      continue;
    }
    pc_pipeline_run(g, &(pc_pipeline_opts){.opt_level = 2});
    kir_program p;
    int twice = 0, stores = 0;
    if (CHECK(kir_build(g, &p) == PC_OK))
      for (int a = 0; a < p.n_kernels; a++)
        for (int sa = 0; p.kernels[a].kind == KK_LOOP && sa < p.kernels[a].n_stores; sa++, stores++)
          for (int b = a + 1; b < p.n_kernels; b++)
            for (int sb = 0; p.kernels[b].kind == KK_LOOP && sb < p.kernels[b].n_stores; sb++) {
              const kir_store *x = &p.kernels[a].stores[sa], *y = &p.kernels[b].stores[sb];
              if (x->buf == y->buf && !memcmp(&x->map, &y->map, sizeof x->map))
                CHECK_MSG(twice++ < 0, "%s: kernels %d and %d both store buffer %d", models[m], a, b, x->buf);
            }
    CHECK_MSG(stores > 10 && !twice, "%s: %d stores, %d twice", models[m], stores, twice);
    pc_graph_free(g);
  }
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
    pc_value *x = pc_input_add(g, "x", ty(PC_f32, 3, (int64_t[]){2, cases[i].c, cases[i].l}));
    pc_value *w = pc_const(g, ty(PC_f32, 3, wd), wv);
    free(wv);
    pc_attr a[6] = {pc_a_ints("stride", &cases[i].stride, 1), pc_a_ints("pad_lo", &cases[i].pad, 1),
                    pc_a_ints("pad_hi", &cases[i].pad, 1), pc_a_ints("dilation", &cases[i].dil, 1),
                    pc_a_ints("lhs_dilation", (int64_t[]){1}, 1), pc_a_int("groups", cases[i].groups)};
    int n0 = g->n_nodes;
    pc_value *y = pc_build(g, PC_OP_conv, (pc_value *[]){x, w}, 2, a, 6);
    if (i == 1) { /* clamp(conv + bias, 0, 6) in one group runs inside the conv call */
      const int64_t *d = y->type.dims;
      pc_value *b = pc_input_add(g, "b", ty(PC_f32, 1, (int64_t[]){cases[i].o}));
      y = pc_add(g, y, pc_broadcast_in_dim(g, b, 3, d, (int64_t[]){1}));
      y = pc_max(g, y, pc_broadcast_to(g, pc_scalar(g, PC_f32, 0), 3, d));
      y = pc_min(g, pc_broadcast_to(g, pc_scalar(g, PC_f32, 6), 3, d), y);
      group_from(g, n0, 0);
    }
    pc_output_add(g, y);
    char tag[64];
    snprintf(tag, sizeof tag, "conv1d case %zu", i);
    check_graph(g, (range){-1, 1}, tag);
    if (i == 1) {
      char *listing = pc_test_kernels_text(g);
      CHECK_MSG(listing && strstr(listing, "epilogue") , "conv1d epilogue not fused:\n%s", listing ? listing : "");
      free(listing);
    }
    pc_graph_free(g);
  }
}
