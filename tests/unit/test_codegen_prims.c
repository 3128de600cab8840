/* tests/unit/test_codegen_prims.c: every prim class compiled and compared with pc_interp: the elementwise ops in
 * every dtype (conversions, u64, f8, sub-byte ints, NaN-propagating max and min), movement, reductions,
 * gather/scatter/cumsum/sort/topk, random and fft, bitcast and scatter modes; the vectorized exp, tanh, erf and
 * log in ulps. */
#include "ir/ir.h"
#include "tests/test.h"
#include "tests/unit/codegen_check.h"
#include "tests/unit/helpers.h"

#include <fenv.h>
#include <stdio.h>
#include <stdlib.h>

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
static cg_range op_range(pc_op op, pc_dtype dt) {
  if (op == PC_OP_log || op == PC_OP_sqrt || op == PC_OP_rsqrt) return (cg_range){0.1, 4};
  if (op == PC_OP_shift_left || op == PC_OP_shift_right) return (cg_range){0, 7};
  if (op == PC_OP_pow) return pc_dtype_is_float(dt) ? (cg_range){0.1, 2} : (cg_range){0, 4};
  if (op == PC_OP_div || op == PC_OP_rem) return pc_dtype_is_float(dt) ? (cg_range){0.5, 4} : (cg_range){1, 9};
  if (pc_dtype_is_int(dt) && !pc_dtype_is_signed(dt)) return (cg_range){0, 15};
  return pc_dtype_is_float(dt) ? (cg_range){-3, 3} : (cg_range){-9, 10};
}

static void check_elementwise(pc_op op, pc_dtype dt) {
  static const int64_t dims[2] = {37, 53};
  pc_graph *g = pc_graph_new();
  pc_value *in[3];
  int n = pc_prim(op)->n_in;
  for (int i = 0; i < n; i++) in[i] = pc_input_add(g, NULL, cg_ty(dt, 2, dims));
  pc_value *y = pc_build(g, op, in, n, NULL, 0);
  if (y) pc_output_add(g, y);
  char tag[64];
  snprintf(tag, sizeof tag, "%s/%s", pc_prim(op)->name, pc_dtype_name(dt));
  cg_check_graph(g, op_range(op, dt), tag);
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
    pc_value *c = pc_input_add(g, "c", cg_ty(PC_bool, 1, d));
    pc_value *a = pc_input_add(g, "a", cg_ty(num_types[t], 1, d)), *b = pc_input_add(g, "b", cg_ty(num_types[t], 1, d));
    pc_output_add(g, pc_where(g, c, a, b));
    cg_check_graph(g, (cg_range){-5, 5}, "where");
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
      pc_value *x = pc_input_add(g, "x", cg_ty(types[a], 1, d));
      pc_output_add(g, pc_convert(g, x, types[b]));
      char tag[64];
      snprintf(tag, sizeof tag, "convert %s->%s", pc_dtype_name(types[a]), pc_dtype_name(types[b]));
      int to_unsigned = pc_dtype_is_int(types[b]) && !pc_dtype_is_signed(types[b]);
      int from_unsigned = pc_dtype_is_int(types[a]) && !pc_dtype_is_signed(types[a]);
      cg_check_graph(g, to_unsigned || from_unsigned ? (cg_range){0, 100} : (cg_range){-100, 100}, tag);
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
  pc_value *x = pc_input_add(g, "x", cg_ty(PC_u64, 1, d)), *y = pc_input_add(g, "y", cg_ty(PC_u64, 1, d));
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
           cg_run_compiled(g, ins, got, "u64");
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
    pc_value *x = pc_input_add(g, "x", cg_ty(PC_f32, 1, (int64_t[]){N}));
    pc_value *b = pc_input_add(g, "b", cg_ty(t, 1, (int64_t[]){256}));
    pc_value *u = pc_input_add(g, "u", cg_ty(t, 1, (int64_t[]){8}));
    pc_output_add(g, pc_convert(g, x, t));                      /* encode */
    pc_output_add(g, pc_convert(g, b, PC_f32));                 /* decode */
    pc_output_add(g, pc_mul(g, b, b));                          /* computed in f32, rounded once */
    int64_t idx[8] = {0, 5, 2, 2, 1, 3, 4, 0};
    pc_value *ix = pc_const(g, cg_ty(PC_i64, 1, (int64_t[]){8}), idx);
    pc_attr sa[2] = {pc_a_int("axis", 0), pc_a_str("reduce", "mul")};
    pc_output_add(g, pc_build(g, PC_OP_scatter, (pc_value *[]){b, ix, u}, 3, sa, 2));
    pc_tensor ins[3] = {{PC_f32, 1, {N}, xs}, {t, 1, {256}, bytes}, {t, 1, {8}, upd}}, ref[4], got[4];
    memset(ref, 0, sizeof ref);
    memset(got, 0, sizeof got);
    char tag[64];
    snprintf(tag, sizeof tag, "f8 %s", pc_dtype_name(t));
    int ok = CHECK_MSG(g->status == PC_OK, "%s: build: %s", tag, pc_error(g)) &&
             CHECK_MSG(pc_interp(g, ins, 3, ref, g->n_outputs) == PC_OK, "%s: interp: %s", tag, pc_error(g)) &&
             cg_run_compiled(g, ins, got, tag);
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
    pc_value *x = pc_input_add(g, "a", cg_ty(t, 1, d)), *y = pc_input_add(g, "b", cg_ty(t, 1, d));
    pc_value *wi = pc_input_add(g, "w", cg_ty(PC_i32, 1, d));
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
    ok = ok && cg_run_compiled(g, ins, got, tag);
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
    pc_value *x = pc_input_add(g, "x", cg_ty(dt, 3, d));
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
    cg_check_graph(g, (cg_range){-9, 9}, "movement");
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
    pc_value *x = pc_input_add(g, "x", cg_ty(types[t], 3, d));
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
    cg_check_graph(g, pc_dtype_is_float(types[t]) ? (cg_range){0.5, 1.5} : (cg_range){-3, 4}, tag);
    pc_graph_free(g);
  }
}

/* ---------------------------------------------------------------- others kept whole */

PC_TEST(codegen_gather_scatter_cumsum_sort) {
  pc_graph *g = pc_graph_new();
  pc_value *x = pc_input_add(g, "x", cg_ty(PC_f32, 2, (int64_t[]){6, 5}));
  int64_t idx[8] = {0, 5, 2, 2, 1, 3, 4, 0};
  pc_value *ix = pc_const(g, cg_ty(PC_i64, 2, (int64_t[]){4, 2}), idx);
  pc_attr ga = pc_a_int("axis", 0);
  pc_output_add(g, pc_build(g, PC_OP_gather, (pc_value *[]){x, ix}, 2, &ga, 1));
  pc_value *upd = pc_input_add(g, "u", cg_ty(PC_f32, 2, (int64_t[]){4, 2}));
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
  cg_check_graph(g, (cg_range){-4, 4}, "gather/scatter/cumsum/sort/topk");
  pc_graph_free(g);
}

/* f32 scatters walk rows of the last dim (runtime/kernels_index.c's scatter_rows_f32): along a middle axis and the
 * last, repeated indices, set and add, i64 and i32 indices, against the interpreter */
PC_TEST(codegen_scatter_rows) {
  pc_graph *g = pc_graph_new();
  pc_value *x = pc_input_add(g, "x", cg_ty(PC_f32, 3, (int64_t[]){2, 5, 4}));
  int64_t i64[24];
  int32_t i32[24];
  for (int i = 0; i < 24; i++) i64[i] = (i * 7) % 5, i32[i] = (int32_t)((i * 5) % 4); /* repeats within rows */
  pc_value *ia = pc_const(g, cg_ty(PC_i64, 3, (int64_t[]){2, 3, 4}), i64);
  pc_value *ib = pc_const(g, cg_ty(PC_i32, 3, (int64_t[]){2, 5, 2}), i32);
  pc_value *ua = pc_input_add(g, "ua", cg_ty(PC_f32, 3, (int64_t[]){2, 3, 4}));
  pc_value *ub = pc_input_add(g, "ub", cg_ty(PC_f32, 3, (int64_t[]){2, 5, 2}));
  static const char *const modes[] = {"none", "add"};
  for (int m = 0; m < 2; m++) {
    pc_attr a1[2] = {pc_a_int("axis", 1), pc_a_str("reduce", modes[m])};
    pc_output_add(g, pc_build(g, PC_OP_scatter, (pc_value *[]){x, ia, ua}, 3, a1, 2));
    pc_attr a2[2] = {pc_a_int("axis", 2), pc_a_str("reduce", modes[m])};
    pc_output_add(g, pc_build(g, PC_OP_scatter, (pc_value *[]){x, ib, ub}, 3, a2, 2));
  }
  cg_check_graph(g, (cg_range){-3, 3}, "scatter rows");
  pc_graph_free(g);
}

/* elementwise max/min: a NaN in either operand wins (prims.def), written as compare + select so x86
 * gets vmaxps/vminps and a blend instead of llvm.maximum's expansion; reductions keep the intrinsic */
PC_TEST(codegen_max_min_nan_select) {
  pc_graph *g = pc_graph_new();
  int64_t d[1] = {40};
  pc_value *x = pc_input_add(g, "x", cg_ty(PC_f32, 1, d)), *y = pc_input_add(g, "y", cg_ty(PC_f32, 1, d));
  pc_output_add(g, pc_max(g, x, y));
  pc_output_add(g, pc_min(g, x, y));
  char *buf = cg_llvm_text(g, 0);
  CHECK_MSG(buf && !strstr(buf, "llvm.maximum") && !strstr(buf, "llvm.minimum"), "elementwise max/min call intrinsics");
  CHECK_CONTAINS(buf ? buf : "", "fcmp uno");
  free(buf);
  pc_tensor in[2], out[2];
  for (int i = 0; i < 2; i++) in[i] = cg_make_input(g->inputs[i], (cg_range){-3, 3});
  float *a = in[0].data, *b = in[1].data;
  a[3] = NAN, b[7] = NAN, a[11] = b[11] = NAN, a[13] = INFINITY, b[17] = -INFINITY, a[19] = 2, b[19] = 2;
  if (cg_run_compiled(g, in, out, "max/min")) {
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

PC_TEST(codegen_random_fft) {
  pc_graph *g = pc_graph_new();
  for (int normal = 0; normal < 2; normal++) {
    pc_attr ra[6] = {pc_a_dtype("dtype", PC_f32), pc_a_ints("shape", (int64_t[]){5, 7}, 2),
                     pc_a_str("dist", normal ? "normal" : "uniform"), pc_a_float("a", normal ? 1 : -2),
                     pc_a_float("b", 3), pc_a_int("seed", 1234567)};
    pc_output_add(g, pc_build(g, PC_OP_random, NULL, 0, ra, 6));
  }
  pc_value *x = pc_input_add(g, "x", cg_ty(PC_f32, 2, (int64_t[]){3, 8}));
  pc_attr fa[2] = {pc_a_str("type", "rfft"), pc_a_int("length", 8)};
  pc_value *spec = pc_build(g, PC_OP_fft, &x, 1, fa, 2);
  pc_attr ia[2] = {pc_a_str("type", "irfft"), pc_a_int("length", 8)};
  pc_attr ca[2] = {pc_a_str("type", "fft"), pc_a_int("length", 5)};
  pc_attr ba[2] = {pc_a_str("type", "ifft"), pc_a_int("length", 5)};
  pc_value *back = pc_build(g, PC_OP_fft, &spec, 1, ia, 2);
  pc_value *c = pc_build(g, PC_OP_fft, &spec, 1, ca, 2);
  pc_output_add(g, back);
  pc_output_add(g, pc_build(g, PC_OP_fft, &c, 1, ba, 2));
  cg_check_graph(g, (cg_range){-1, 1}, "random/fft");
  pc_graph_free(g);
}

/* the vectorized exp, tanh and erf against the interpreter's double-precision libm, in ulps */
PC_TEST(codegen_fast_exp_tanh_ulps) {
  static const pc_op ops[] = {PC_OP_exp, PC_OP_tanh, PC_OP_sigmoid, PC_OP_erf};
  static const cg_range ranges[] = {{-0.4, 0.4}, {-12, 12}, {-100, 100}, {-1e-3, 1e-3}, {-4.5, 4.5}, {-1.2, 1.2}};
  for (size_t o = 0; o < 4; o++)
    for (size_t r = 0; r < 6; r++) {
      pc_graph *g = pc_graph_new();
      pc_value *x = pc_input_add(g, "x", cg_ty(PC_f32, 1, (int64_t[]){4096}));
      pc_output_add(g, pc_build(g, ops[o], &x, 1, NULL, 0));
      pc_tensor in = cg_make_input(x, ranges[r]), ref = {0}, got = {0};
      CHECK(pc_interp(g, &in, 1, &ref, 1) == PC_OK);
      if (cg_run_compiled(g, &in, &got, "fast math")) {
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
  pc_value *x = pc_input_add(g, "x", cg_ty(PC_f32, 1, (int64_t[]){N}));
  pc_output_add(g, pc_build(g, PC_OP_exp, &x, 1, NULL, 0));
  pc_tensor in = cg_make_input(x, (cg_range){-1, 1}), got = {0};
  for (int i = 0; i < N; i++) ((float *)in.data)[i] = i % 4 == 0 ? -INFINITY : i % 4 == 1 ? -1e4f : i % 4 == 2 ? -200.0f : -104.5f;
  pc_test_before_run = clear_fp_flags;
  int ran = cg_run_compiled(g, &in, &got, "exp below range");
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
  while (n < N) v[n] = (float)cg_urand(1e-3, 1e3), n++;
  pc_graph *g = pc_graph_new();
  pc_value *x = pc_input_add(g, "x", cg_ty(PC_f32, 1, (int64_t[]){N}));
  pc_output_add(g, pc_build(g, PC_OP_log, &x, 1, NULL, 0));
  pc_tensor in = cg_make_input(x, (cg_range){1, 2}), ref = {0}, got = {0};
  memcpy(in.data, v, sizeof v);
  CHECK(pc_interp(g, &in, 1, &ref, 1) == PC_OK);
  if (cg_run_compiled(g, &in, &got, "fast log")) {
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
  pc_value *x = pc_input_add(g, "x", cg_ty(PC_f32, 2, (int64_t[]){3, 4}));
  pc_attr b1 = pc_a_dtype("dtype", PC_i32), b2 = pc_a_dtype("dtype", PC_u8);
  pc_output_add(g, pc_build(g, PC_OP_bitcast, &x, 1, &b1, 1));
  pc_output_add(g, pc_build(g, PC_OP_bitcast, &x, 1, &b2, 1));
  int32_t idx[4] = {2, 0, 1, 2};
  pc_value *ix = pc_const(g, cg_ty(PC_i32, 2, (int64_t[]){1, 4}), idx);
  pc_value *upd = pc_input_add(g, "u", cg_ty(PC_f32, 2, (int64_t[]){1, 4}));
  static const char *const modes[] = {"none", "mul", "max", "min"};
  for (int m = 0; m < 4; m++) {
    pc_attr sa[2] = {pc_a_int("axis", 0), pc_a_str("reduce", modes[m])};
    pc_output_add(g, pc_build(g, PC_OP_scatter, (pc_value *[]){x, ix, upd}, 3, sa, 2));
  }
  pc_value *h = pc_input_add(g, "h", cg_ty(PC_bf16, 2, (int64_t[]){3, 4}));
  pc_output_add(g, pc_mul(g, pc_exp(g, h), h));
  pc_output_add(g, pc_reduce(g, PC_OP_reduce_sum, h, 1, (int64_t[]){1}));
  cg_check_graph(g, (cg_range){-2, 2}, "bitcast/scatter/bf16");
  pc_graph_free(g);
}
