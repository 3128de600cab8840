/* tests/unit/test_cuda.c: renders small prim graphs (every prim) as CUDA C, NVRTC-compiles them for sm_90, runs them on a GPU when there is one. */
#include "codegen/codegen.h"
#include "codegen/cuda_internal.h"
#include "codegen/kir.h"
#include "frontend/composite.h"
#include "ir/ir.h"
#include "runtime/primc_rt.h"
#include "tests/test.h"
#include "tests/unit/cuda_emu.h"
#include "tests/unit/helpers.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define MAXT 64 /* inputs, and outputs, per graph: the GPU harness checks each case fits */

/* ---------------------------------------------------------------- graph building */

static pc_value *in(pc_graph *g, pc_dtype dt, int rank, const int64_t *dims) {
  return pc_input_add(g, NULL, pc_type_make(dt, rank, dims));
}

static void out(pc_graph *g, pc_value *v) {
  if (v) pc_output_add(g, v);
}

static pc_value *un(pc_graph *g, pc_op op, pc_value *x) { return pc_build(g, op, &x, 1, NULL, 0); }
static pc_value *bin(pc_graph *g, pc_op op, pc_value *a, pc_value *b) {
  pc_value *xs[2] = {a, b};
  return pc_build(g, op, xs, 2, NULL, 0);
}
static pc_value *cvt(pc_graph *g, pc_value *x, pc_dtype to) {
  pc_attr a = pc_a_dtype("dtype", to);
  return pc_build(g, PC_OP_convert_element_type, &x, 1, &a, 1);
}

#define I64S(...) ((const int64_t[]){__VA_ARGS__})
#define NI64(...) ((int)(sizeof(I64S(__VA_ARGS__)) / sizeof(int64_t)))
#define INTS(name, ...) pc_a_ints(name, I64S(__VA_ARGS__), NI64(__VA_ARGS__))

static void build_unary_float(pc_graph *g) {
  static const pc_op ops[] = {PC_OP_exp,   PC_OP_log,   PC_OP_log1p, PC_OP_expm1,   PC_OP_sqrt,  PC_OP_rsqrt,
                              PC_OP_reciprocal, PC_OP_sin, PC_OP_cos, PC_OP_tan,   PC_OP_tanh,  PC_OP_erf,
                              PC_OP_sigmoid, PC_OP_floor, PC_OP_ceil, PC_OP_round, PC_OP_isnan, PC_OP_isinf};
  pc_value *x = in(g, PC_f32, 2, I64S(3, 5));
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) out(g, un(g, ops[i], x));
}

static void build_unary_num(pc_graph *g) {
  pc_value *x = in(g, PC_f32, 2, I64S(4, 6)), *i = in(g, PC_i32, 1, I64S(17)), *b = in(g, PC_bool, 1, I64S(9));
  static const pc_op ops[] = {PC_OP_neg, PC_OP_abs, PC_OP_sign};
  for (int k = 0; k < 3; k++) {
    out(g, un(g, ops[k], x));
    out(g, un(g, ops[k], i));
  }
  out(g, un(g, PC_OP_not, i));
  out(g, un(g, PC_OP_not, b));
}

static const pc_op arith_ops[] = {PC_OP_add, PC_OP_sub, PC_OP_mul, PC_OP_div, PC_OP_pow, PC_OP_rem,
                                  PC_OP_max, PC_OP_min, PC_OP_eq,  PC_OP_ne,  PC_OP_lt,  PC_OP_le,
                                  PC_OP_gt,  PC_OP_ge};

static void build_binary_float(pc_graph *g) {
  pc_value *a = in(g, PC_f32, 2, I64S(4, 6)), *b = in(g, PC_f32, 2, I64S(4, 6));
  for (size_t k = 0; k < sizeof arith_ops / sizeof arith_ops[0]; k++) out(g, bin(g, arith_ops[k], a, b));
  out(g, bin(g, PC_OP_atan2, a, b));
}

static void build_binary_int(pc_graph *g) {
  pc_value *a = in(g, PC_i32, 2, I64S(5, 7)), *b = in(g, PC_i32, 2, I64S(5, 7));
  for (size_t k = 0; k < sizeof arith_ops / sizeof arith_ops[0]; k++)
    if (arith_ops[k] != PC_OP_pow) out(g, bin(g, arith_ops[k], a, b));
  static const pc_op bits[] = {PC_OP_bitwise_and, PC_OP_bitwise_or, PC_OP_bitwise_xor, PC_OP_and, PC_OP_or, PC_OP_xor};
  for (int k = 0; k < 6; k++) out(g, bin(g, bits[k], a, b));
}

/* shifts and pow with small non-negative right operands, on i32, i8 and u8 */
static void build_shift_pow(pc_graph *g) {
  static const pc_dtype dts[] = {PC_i32, PC_i8, PC_u8};
  for (int d = 0; d < 3; d++) {
    pc_value *a = in(g, dts[d], 1, I64S(11)), *s = in(g, dts[d], 1, I64S(11));
    out(g, bin(g, PC_OP_shift_left, a, s));
    out(g, bin(g, PC_OP_shift_right, a, s));
    out(g, bin(g, PC_OP_pow, a, s));
  }
}

static void build_logic(pc_graph *g) {
  pc_value *a = in(g, PC_bool, 2, I64S(3, 4)), *b = in(g, PC_bool, 2, I64S(3, 4));
  out(g, bin(g, PC_OP_and, a, b));
  out(g, bin(g, PC_OP_or, a, b));
  out(g, bin(g, PC_OP_xor, a, b));
  out(g, bin(g, PC_OP_eq, a, b));
}

static void build_where_clamp(pc_graph *g) {
  pc_value *c = in(g, PC_bool, 2, I64S(4, 5)), *a = in(g, PC_f32, 2, I64S(4, 5)), *b = in(g, PC_f32, 2, I64S(4, 5));
  out(g, pc_where(g, c, a, b));
  pc_value *lo = pc_full(g, PC_f32, -0.5, 2, I64S(4, 5)), *hi = pc_full(g, PC_f32, 0.25, 2, I64S(4, 5));
  pc_value *xs[3] = {a, lo, b};
  out(g, pc_build(g, PC_OP_clamp, xs, 3, NULL, 0));
  xs[1] = lo, xs[2] = hi;
  out(g, pc_build(g, PC_OP_clamp, xs, 3, NULL, 0));
}

static void build_convert(pc_graph *g) {
  static const pc_dtype to[] = {PC_f16, PC_bf16, PC_f64, PC_i32, PC_i8, PC_u8, PC_bool, PC_i64,
                                PC_u32, PC_f8e4m3fn, PC_f8e5m2, PC_f4e2m1, PC_f8e8m0};
  pc_value *x = in(g, PC_f32, 2, I64S(3, 7)), *i = in(g, PC_i32, 1, I64S(10)), *b = in(g, PC_bool, 1, I64S(10));
  for (size_t k = 0; k < sizeof to / sizeof *to; k++) out(g, cvt(g, x, to[k]));
  out(g, cvt(g, i, PC_i4));
  out(g, cvt(g, i, PC_u64));
  out(g, cvt(g, i, PC_f32));
  out(g, cvt(g, i, PC_f16));
  out(g, cvt(g, b, PC_f32));
  out(g, cvt(g, cvt(g, x, PC_f16), PC_f32));
}

static void build_dtypes(pc_graph *g) {
  static const pc_dtype dts[] = {PC_f16, PC_bf16, PC_f64, PC_i64, PC_i8, PC_u8, PC_i16, PC_u16, PC_u32, PC_u64,
                                 PC_f8e4m3fn, PC_f8e5m2fnuz, PC_f4e2m1, PC_i4, PC_u2, PC_f8e8m0};
  for (size_t d = 0; d < sizeof dts / sizeof *dts; d++) {
    pc_value *a = in(g, dts[d], 2, I64S(3, 9)), *b = in(g, dts[d], 2, I64S(3, 9));
    out(g, bin(g, PC_OP_add, a, b));
    out(g, bin(g, PC_OP_mul, a, b));
    out(g, bin(g, PC_OP_max, a, b));
    if (pc_dtype_is_float(dts[d])) out(g, un(g, PC_OP_exp, a));
  }
}

static void build_bitcast(pc_graph *g) {
  pc_value *x = in(g, PC_f32, 2, I64S(3, 4));
  pc_attr a = pc_a_dtype("dtype", PC_i32), b = pc_a_dtype("dtype", PC_u8);
  out(g, pc_build(g, PC_OP_bitcast, &x, 1, &a, 1));
  out(g, pc_build(g, PC_OP_bitcast, &x, 1, &b, 1));
}

static void build_movement(pc_graph *g) {
  pc_value *x = in(g, PC_f32, 3, I64S(2, 3, 4)), *v = in(g, PC_f32, 1, I64S(3));
  out(g, pc_broadcast_in_dim(g, v, 3, I64S(2, 3, 5), I64S(1)));
  out(g, pc_reshape(g, x, 2, I64S(6, 4)));
  out(g, pc_transpose(g, x, I64S(2, 0, 1)));
  out(g, pc_slice(g, x, I64S(0, 1, 1), I64S(2, 3, 4), I64S(1, 1, 2)));
  pc_attr pa[4] = {INTS("low", 1, -1, 0), INTS("high", 0, 2, 1), INTS("interior", 0, 1, 1), pc_a_float("value", 7.5)};
  out(g, pc_build(g, PC_OP_pad, &x, 1, pa, 4));
  pc_value *cs[2] = {x, x};
  out(g, pc_concatenate(g, cs, 2, 1));
  pc_attr ra = INTS("dims", 0, 2);
  out(g, pc_build(g, PC_OP_rev, &x, 1, &ra, 1));
  pc_attr ia[3] = {pc_a_dtype("dtype", PC_i32), INTS("shape", 3, 5), pc_a_int("axis", 1)};
  out(g, pc_build(g, PC_OP_iota, NULL, 0, ia, 3));
}

static void build_gather_scatter(pc_graph *g) {
  pc_value *x = in(g, PC_f32, 2, I64S(4, 6)), *idx = in(g, PC_i64, 2, I64S(4, 3)), *upd = in(g, PC_f32, 2, I64S(4, 3));
  pc_value *gi[2] = {x, idx}, *si[3] = {x, idx, upd};
  pc_attr ga = pc_a_int("axis", 1);
  out(g, pc_build(g, PC_OP_gather, gi, 2, &ga, 1));
  pc_attr sa[2] = {pc_a_int("axis", 1), pc_a_str("reduce", "add")}, sn[2] = {pc_a_int("axis", 1), pc_a_str("reduce", "none")};
  out(g, pc_build(g, PC_OP_scatter, si, 3, sa, 2));
  out(g, pc_build(g, PC_OP_scatter, si, 3, sn, 2));
}

/* an embedding lookup as ONNX Gather imports it: the table's broadcast is read in place
 * (primc_k_gather_strided) when it shares the gather's group */
static void build_gather_broadcast(pc_graph *g) {
  pc_value *tab = in(g, PC_f32, 2, I64S(10, 4)), *idx = in(g, PC_i64, 2, I64S(2, 3));
  pc_value *ib = pc_broadcast_in_dim(g, idx, 3, (int64_t[]){2, 3, 4}, (int64_t[]){0, 1});
  pc_value *tb = pc_broadcast_in_dim(g, tab, 3, (int64_t[]){10, 3, 4}, (int64_t[]){0, 2});
  pc_attr ga = pc_a_int("axis", 0);
  out(g, pc_build(g, PC_OP_gather, (pc_value *[]){tb, ib}, 2, &ga, 1));
}

static void build_reduce(pc_graph *g) {
  pc_value *x = in(g, PC_f32, 3, I64S(4, 7, 5)), *i = in(g, PC_i32, 2, I64S(6, 9));
  static const pc_op ops[] = {PC_OP_reduce_sum, PC_OP_reduce_prod, PC_OP_reduce_max, PC_OP_reduce_min};
  for (int k = 0; k < 4; k++) {
    out(g, pc_reduce(g, ops[k], x, 1, I64S(1)));
    out(g, pc_reduce(g, ops[k], x, 2, I64S(0, 2)));
    out(g, pc_reduce(g, ops[k], i, 1, I64S(1)));
  }
  pc_attr aa[2] = {pc_a_int("axis", 1), pc_a_int("last", 0)}, al[2] = {pc_a_int("axis", 0), pc_a_int("last", 1)};
  out(g, pc_build(g, PC_OP_argmax, &x, 1, aa, 2));
  out(g, pc_build(g, PC_OP_argmin, &x, 1, aa, 2));
  out(g, pc_build(g, PC_OP_argmax, &i, 1, al, 2));
  pc_attr c1[3] = {pc_a_int("axis", 1), pc_a_int("exclusive", 0), pc_a_int("reverse", 0)};
  pc_attr c2[3] = {pc_a_int("axis", 2), pc_a_int("exclusive", 1), pc_a_int("reverse", 1)};
  out(g, pc_build(g, PC_OP_cumsum, &x, 1, c1, 3));
  out(g, pc_build(g, PC_OP_cumsum, &x, 1, c2, 3));
  out(g, pc_build(g, PC_OP_cumsum, &i, 1, c1, 3));
}

/* rows longer than a block and a whole-tensor reduction */
static void build_reduce_big(pc_graph *g) {
  pc_value *x = in(g, PC_f32, 2, I64S(33, 1000));
  out(g, pc_reduce(g, PC_OP_reduce_sum, x, 1, I64S(1)));
  out(g, pc_reduce(g, PC_OP_reduce_max, x, 2, I64S(0, 1)));
  pc_attr aa[2] = {pc_a_int("axis", 1), pc_a_int("last", 0)};
  out(g, pc_build(g, PC_OP_argmax, &x, 1, aa, 2));
  pc_value *h = in(g, PC_f16, 2, I64S(5, 300));
  out(g, pc_reduce(g, PC_OP_reduce_sum, h, 1, I64S(1)));
}

static void build_dot(pc_graph *g) {
  pc_value *a = in(g, PC_f32, 3, I64S(2, 3, 4)), *b = in(g, PC_f32, 3, I64S(2, 4, 5));
  out(g, pc_dot_general(g, a, b, 1, I64S(2), I64S(1), 1, I64S(0), I64S(0)));
  pc_value *m = in(g, PC_f32, 2, I64S(37, 19)), *n = in(g, PC_f32, 2, I64S(23, 19));
  out(g, pc_dot_general(g, m, n, 1, I64S(1), I64S(1), 0, NULL, NULL)); /* m . n^T */
  pc_value *p = in(g, PC_i32, 2, I64S(5, 6)), *q = in(g, PC_i32, 2, I64S(6, 3));
  out(g, pc_dot_general(g, p, q, 1, I64S(1), I64S(0), 0, NULL, NULL));
  pc_value *h = in(g, PC_f16, 2, I64S(8, 40)), *k = in(g, PC_f16, 2, I64S(40, 9));
  out(g, pc_dot_general(g, h, k, 1, I64S(1), I64S(0), 0, NULL, NULL));
}

/* heads split off [B, S, H, D] read in place: batch dims (0, 2), two strided levels (dot_b2) */
static void build_dot_b2(pc_graph *g) {
  pc_value *q = in(g, PC_f32, 4, I64S(2, 5, 3, 4)), *k = in(g, PC_f32, 4, I64S(2, 6, 3, 4));
  out(g, pc_dot_general(g, q, k, 1, I64S(3), I64S(3), 2, I64S(0, 2), I64S(0, 2)));
}

static void build_conv(pc_graph *g) {
  pc_value *x = in(g, PC_f32, 4, I64S(2, 4, 9, 9)), *w = in(g, PC_f32, 4, I64S(6, 2, 3, 3));
  pc_value *xs[2] = {x, w};
  pc_attr a[6] = {INTS("stride", 2, 1), INTS("pad_lo", 1, 0), INTS("pad_hi", 1, 2), INTS("dilation", 1, 2),
                  INTS("lhs_dilation", 1, 1), pc_a_int("groups", 2)};
  out(g, pc_build(g, PC_OP_conv, xs, 2, a, 6));
  pc_value *y = in(g, PC_f32, 3, I64S(1, 3, 10)), *v = in(g, PC_f32, 3, I64S(2, 3, 4));
  pc_value *ys[2] = {y, v};
  pc_attr b[6] = {INTS("stride", 1), INTS("pad_lo", 2), INTS("pad_hi", 2), INTS("dilation", 1),
                  INTS("lhs_dilation", 2), pc_a_int("groups", 1)};
  out(g, pc_build(g, PC_OP_conv, ys, 2, b, 6));
  /* 3-D, as ConvTranspose imports (lhs dilation) and with strides: row-major offsets over three axes */
  pc_value *z = in(g, PC_f32, 5, I64S(1, 2, 3, 4, 5)), *u = in(g, PC_f32, 5, I64S(3, 2, 2, 3, 2));
  pc_value *zs[2] = {z, u};
  pc_attr c[6] = {INTS("stride", 1, 2, 1), INTS("pad_lo", 1, 2, 0), INTS("pad_hi", 1, 2, 1), INTS("dilation", 1, 1, 2),
                  INTS("lhs_dilation", 2, 1, 1), pc_a_int("groups", 1)};
  out(g, pc_build(g, PC_OP_conv, zs, 2, c, 6));
}

/* f32 dots as tiled GEMMs (cuda_gemm.c): several tiles with ragged edges, A and B read k-fast or m/n-fast, batched */
static void build_gemm_dot(pc_graph *g) {
  pc_value *a = in(g, PC_f32, 2, I64S(300, 257)), *b = in(g, PC_f32, 2, I64S(257, 130));
  out(g, pc_dot_general(g, a, b, 1, I64S(1), I64S(0), 0, NULL, NULL));
  pc_value *at = in(g, PC_f32, 2, I64S(61, 70)), *bt = in(g, PC_f32, 2, I64S(45, 61)); /* a^T . b^T */
  out(g, pc_dot_general(g, at, bt, 1, I64S(0), I64S(1), 0, NULL, NULL));
  pc_value *x = in(g, PC_f32, 3, I64S(3, 70, 45)), *y = in(g, PC_f32, 3, I64S(3, 45, 33));
  out(g, pc_dot_general(g, x, y, 1, I64S(2), I64S(1), 1, I64S(0), I64S(0)));
}

/* a dot + bias, then GELU (erf form): the loop kernel runs at the GEMM's store (one group) */
static void build_dot_bias_gelu(pc_graph *g) {
  pc_value *x = in(g, PC_f32, 2, I64S(70, 96)), *w = in(g, PC_f32, 2, I64S(96, 80)), *b = in(g, PC_f32, 1, I64S(80));
  pc_value *d = pc_dot_general(g, x, w, 1, I64S(1), I64S(0), 0, NULL, NULL);
  pc_value *s = bin(g, PC_OP_add, d, pc_broadcast_in_dim(g, b, 2, I64S(70, 80), I64S(1)));
  pc_value *e = un(g, PC_OP_erf, bin(g, PC_OP_mul, s, pc_full(g, PC_f32, 0.70710678118654752, 2, I64S(70, 80))));
  pc_value *h = bin(g, PC_OP_add, e, pc_full(g, PC_f32, 1.0, 2, I64S(70, 80)));
  out(g, bin(g, PC_OP_mul, bin(g, PC_OP_mul, s, pc_full(g, PC_f32, 0.5, 2, I64S(70, 80))), h));
}

/* a dot deep enough to split K in 4 on every row (1100 >= 4 splits x 4 slices x 32), its bias and GELU at the
 * store of the split that finishes a tile */
static void build_dot_long_k_gelu(pc_graph *g) {
  pc_value *x = in(g, PC_f32, 2, I64S(40, 1100)), *w = in(g, PC_f32, 2, I64S(1100, 48)), *b = in(g, PC_f32, 1, I64S(48));
  pc_value *d = pc_dot_general(g, x, w, 1, I64S(1), I64S(0), 0, NULL, NULL);
  pc_value *s = bin(g, PC_OP_add, d, pc_broadcast_in_dim(g, b, 2, I64S(40, 48), I64S(1)));
  pc_value *e = un(g, PC_OP_erf, bin(g, PC_OP_mul, s, pc_full(g, PC_f32, 0.70710678118654752, 2, I64S(40, 48))));
  out(g, bin(g, PC_OP_mul, s, bin(g, PC_OP_add, e, pc_full(g, PC_f32, 1.0, 2, I64S(40, 48)))));
}

/* x (an input of dtype dt widened to f32, as passes/widen.c leaves a narrow model) times a constant whose values
 * f16, bf16 and TF32 all hold */
static void dot_narrow_const(pc_graph *g, pc_dtype dt) {
  static float w[90 * 40];
  for (int i = 0; i < 90 * 40; i++) w[i] = (float)((i * 37 % 41) - 20) / 16.0f;
  pc_value *x = cvt(g, in(g, dt, 2, I64S(50, 90)), PC_f32);
  pc_value *c = pc_const(g, pc_type_make(PC_f32, 2, I64S(90, 40)), w);
  out(g, pc_dot_general(g, x, c, 1, I64S(1), I64S(0), 0, NULL, NULL));
}

/* operands exact in a tensor core's type, at matmul precision highest: exact products, f32 sums. f16 values: the
 * f16 rows; bf16 values: the bf16 rows; an f16 by a bf16 operand: only TF32 holds both */
static void build_dot_f16_operands(pc_graph *g) { dot_narrow_const(g, PC_f16); }
static void build_dot_bf16_operands(pc_graph *g) { dot_narrow_const(g, PC_bf16); }
static void build_dot_mixed_operands(pc_graph *g) {
  pc_value *x = cvt(g, in(g, PC_f16, 2, I64S(40, 72)), PC_f32), *y = cvt(g, in(g, PC_bf16, 2, I64S(72, 24)), PC_f32);
  out(g, pc_dot_general(g, x, y, 1, I64S(1), I64S(0), 0, NULL, NULL));
}

static pc_value *conv(pc_graph *g, pc_value *x, pc_value *w, int s, const int64_t *stride, const int64_t *pad,
                      const int64_t *dil, int64_t groups) {
  pc_value *xs[2] = {x, w};
  static const int64_t ones[3] = {1, 1, 1};
  pc_attr a[6] = {pc_a_ints("stride", stride, s), pc_a_ints("pad_lo", pad, s), pc_a_ints("pad_hi", pad, s),
                  pc_a_ints("dilation", dil, s), pc_a_ints("lhs_dilation", ones, s), pc_a_int("groups", groups)};
  return pc_build(g, PC_OP_conv, xs, 2, a, 6);
}

/* relu(conv(x, w) + b) of a 3x3 conv, stride and padding 1, over an input of dims xd */
static void conv3_bias_relu(pc_graph *g, const int64_t *xd, int64_t o, int64_t groups) {
  pc_value *x = in(g, PC_f32, 4, xd), *w = in(g, PC_f32, 4, I64S(o, xd[1] / groups, 3, 3)), *b = in(g, PC_f32, 1, &o);
  pc_value *c = conv(g, x, w, 2, I64S(1, 1), I64S(1, 1), I64S(1, 1), groups);
  const int64_t *od = c->type.dims;
  pc_value *s = bin(g, PC_OP_add, c, pc_broadcast_in_dim(g, b, 4, od, I64S(1)));
  out(g, bin(g, PC_OP_max, s, pc_full(g, PC_f32, 0.0, 4, od)));
}

/* conv + bias, then relu: the epilogue runs in the implicit-GEMM conv (run as one group) */
static void build_conv_bias_relu(pc_graph *g) { conv3_bias_relu(g, I64S(2, 16, 13, 11), 24, 1); }

/* a strided conv with a long K (split across blocks), a residual and a clamp in its epilogue */
static void build_conv_split_res(pc_graph *g) {
  pc_value *x = in(g, PC_f32, 4, I64S(1, 64, 14, 14)), *w = in(g, PC_f32, 4, I64S(48, 64, 3, 3));
  pc_value *r = in(g, PC_f32, 4, I64S(1, 48, 7, 7));
  pc_value *c = conv(g, x, w, 2, I64S(2, 2), I64S(1, 1), I64S(1, 1), 1);
  pc_value *s = bin(g, PC_OP_add, c, r);
  out(g, bin(g, PC_OP_min, bin(g, PC_OP_max, s, pc_full(g, PC_f32, 0.0, 4, I64S(1, 48, 7, 7))),
             pc_full(g, PC_f32, 6.0, 4, I64S(1, 48, 7, 7))));
}

/* conv_split_res's conv on f16 operands widened to f32: the f16 rows, split K, the residual and clamp at the store */
static void build_conv_f16_split_res(pc_graph *g) {
  pc_value *x = cvt(g, in(g, PC_f16, 4, I64S(1, 64, 14, 14)), PC_f32), *w = cvt(g, in(g, PC_f16, 4, I64S(48, 64, 3, 3)), PC_f32);
  pc_value *r = in(g, PC_f32, 4, I64S(1, 48, 7, 7));
  pc_value *c = conv(g, x, w, 2, I64S(2, 2), I64S(1, 1), I64S(1, 1), 1);
  pc_value *s = bin(g, PC_OP_add, c, r);
  out(g, bin(g, PC_OP_min, bin(g, PC_OP_max, s, pc_full(g, PC_f32, 0.0, 4, I64S(1, 48, 7, 7))),
             pc_full(g, PC_f32, 6.0, 4, I64S(1, 48, 7, 7))));
}

/* grouped (8 channels a group) and dilated 2-D, and 1-D strided: the implicit GEMM without an epilogue */
static void build_conv_gemm_shapes(pc_graph *g) {
  pc_value *x = in(g, PC_f32, 4, I64S(1, 32, 9, 10)), *w = in(g, PC_f32, 4, I64S(32, 8, 3, 3));
  out(g, conv(g, x, w, 2, I64S(1, 1), I64S(2, 1), I64S(2, 1), 4));
  pc_value *y = in(g, PC_f32, 3, I64S(2, 8, 50)), *v = in(g, PC_f32, 3, I64S(16, 8, 5));
  out(g, conv(g, y, v, 1, I64S(2), I64S(1), I64S(1), 1));
}

/* a depthwise conv + bias + relu: the direct kernel with the fused epilogue */
static void build_conv_dw_relu(pc_graph *g) { conv3_bias_relu(g, I64S(1, 16, 10, 10), 16, 16); }

static void build_fft(pc_graph *g) {
  pc_value *x = in(g, PC_f32, 2, I64S(3, 8));
  pc_attr r[2] = {pc_a_str("type", "rfft"), pc_a_int("length", 8)};
  pc_value *X = pc_build(g, PC_OP_fft, &x, 1, r, 2);
  pc_attr f[2] = {pc_a_str("type", "fft"), pc_a_int("length", 5)}, i[2] = {pc_a_str("type", "ifft"), pc_a_int("length", 5)};
  pc_attr ir[2] = {pc_a_str("type", "irfft"), pc_a_int("length", 8)};
  pc_value *F = pc_build(g, PC_OP_fft, &X, 1, f, 2);
  out(g, pc_build(g, PC_OP_fft, &F, 1, i, 2));
  out(g, pc_build(g, PC_OP_fft, &X, 1, ir, 2));
  out(g, pc_build(g, PC_OP_fft, &F, 1, ir, 2));
  pc_attr r7[2] = {pc_a_str("type", "rfft"), pc_a_int("length", 7)}, ir7[2] = {pc_a_str("type", "irfft"), pc_a_int("length", 7)};
  pc_value *y = in(g, PC_f32, 1, I64S(7));
  pc_value *Y = pc_build(g, PC_OP_fft, &y, 1, r7, 2);
  out(g, pc_build(g, PC_OP_fft, &Y, 1, ir7, 2));
}

static void build_sort(pc_graph *g) {
  pc_value *x = in(g, PC_f32, 2, I64S(4, 9)), *i = in(g, PC_i32, 2, I64S(7, 3));
  pc_attr s[2] = {pc_a_int("axis", 1), pc_a_int("descending", 0)}, d[2] = {pc_a_int("axis", 0), pc_a_int("descending", 1)};
  pc_node *n = pc_node_add(g, PC_OP_sort, &x, 1, s, 2);
  if (n) out(g, n->out[0]), out(g, n->out[1]);
  n = pc_node_add(g, PC_OP_sort, &i, 1, d, 2);
  if (n) out(g, n->out[0]), out(g, n->out[1]);
  pc_attr t[3] = {pc_a_int("k", 3), pc_a_int("axis", 1), pc_a_int("largest", 1)};
  n = pc_node_add(g, PC_OP_topk, &x, 1, t, 3);
  if (n) out(g, n->out[0]), out(g, n->out[1]);
}

static void build_constant(pc_graph *g) {
  float w[12];
  for (int k = 0; k < 12; k++) w[k] = 0.25f * (float)k - 1.0f;
  pc_value *x = in(g, PC_f32, 2, I64S(3, 4));
  pc_value *c = pc_const(g, pc_type_make(PC_f32, 2, I64S(3, 4)), w);
  out(g, bin(g, PC_OP_mul, bin(g, PC_OP_add, x, c), pc_full(g, PC_f32, 3.0, 2, I64S(3, 4))));
  out(g, x); /* an input as an output: a copy kernel */
}

/* softmax and a fused elementwise chain: one group each (fusion by hand) */
static void build_fused(pc_graph *g) {
  pc_value *x = in(g, PC_f32, 2, I64S(5, 37));
  pc_value *m = pc_reduce(g, PC_OP_reduce_max, x, 1, I64S(1));
  pc_value *mb = pc_broadcast_in_dim(g, m, 2, I64S(5, 37), I64S(0));
  pc_value *e = un(g, PC_OP_exp, bin(g, PC_OP_sub, x, mb));
  pc_value *s = pc_reduce(g, PC_OP_reduce_sum, e, 1, I64S(1));
  out(g, bin(g, PC_OP_div, e, pc_broadcast_in_dim(g, s, 2, I64S(5, 37), I64S(0))));
  pc_value *t = un(g, PC_OP_tanh, pc_transpose(g, x, I64S(1, 0)));
  out(g, t);
  out(g, bin(g, PC_OP_mul, t, t));
}

/* a layer norm over rows of 300 (gamma, beta) and a softmax over rows of 37, each one group: reductions over the
 * same rows then the pointwise kernel, rendered as one row-chain kernel each */
static void build_row_chains(pc_graph *g) {
  pc_value *x = in(g, PC_f32, 3, I64S(2, 5, 300)), *gm = in(g, PC_f32, 1, I64S(300)), *bt = in(g, PC_f32, 1, I64S(300));
  pc_value *n = fc_layer_norm(g, x, 1, I64S(2), 1e-5, NULL, NULL);
  n = bin(g, PC_OP_add, bin(g, PC_OP_mul, n, pc_broadcast_in_dim(g, gm, 3, I64S(2, 5, 300), I64S(2))),
          pc_broadcast_in_dim(g, bt, 3, I64S(2, 5, 300), I64S(2)));
  out(g, n);
  out(g, fc_softmax(g, in(g, PC_f32, 2, I64S(9, 37)), 1, 0));
}

static void build_random(pc_graph *g) {
  static const struct {
    pc_dtype dt;
    const char *dist;
    double a, b;
  } rows[] = {{PC_f32, "uniform", 0, 1}, {PC_f32, "normal", 1, 2}, {PC_f64, "uniform", -5, 5}, {PC_f16, "uniform", -1, 1},
              {PC_f64, "normal", 0, 1}};
  for (int r = 0; r < 5; r++) {
    pc_attr a[6] = {pc_a_dtype("dtype", rows[r].dt), INTS("shape", 40, 33), pc_a_str("dist", rows[r].dist),
                    pc_a_float("a", rows[r].a), pc_a_float("b", rows[r].b), pc_a_int("seed", 7 + 0x100000000ll * r)};
    out(g, pc_build(g, PC_OP_random, NULL, 0, a, 6));
  }
}

static void build_nonzero(pc_graph *g) {
  pc_value *x = in(g, PC_f32, 1, I64S(6));
  out(g, un(g, PC_OP_nonzero, x));
}

typedef struct gcase {
  const char *name;
  void (*build)(pc_graph *g);
  double lo, hi;    /* input range */
  int fused;        /* 1: every node in one group; 2: a group per output's nodes; 0: one group per node */
  const char *fails;/* NULL: must compile; else the error must contain this */
  int nonzero;      /* integer inputs avoid 0 (the interpreter rejects x / 0) */
  int mp;           /* the graph's matmul precision (high: TF32 tensor cores; medium: bf16) */
  double tol;       /* f32 relative tolerance when not the default */
  int cast;         /* the graph's autocast (bf16: bf16 tensor cores) */
} gcase;

static const gcase cases[] = {
    {"unary_float", build_unary_float, 0.1, 1.4, 0, NULL, 0, 0, 0, 0},
    {"unary_num", build_unary_num, -9, 9, 0, NULL, 0, 0, 0, 0},
    {"binary_float", build_binary_float, 0.5, 3, 0, NULL, 0, 0, 0, 0},
    {"binary_int", build_binary_int, -20, 20, 0, NULL, 1, 0, 0, 0},
    {"shift_pow", build_shift_pow, 0, 7, 0, NULL, 0, 0, 0, 0},
    {"logic", build_logic, 0, 1, 0, NULL, 0, 0, 0, 0},
    {"where_clamp", build_where_clamp, -2, 2, 0, NULL, 0, 0, 0, 0},
    {"convert", build_convert, 0.5, 100, 0, NULL, 0, 0, 0, 0},
    {"dtypes", build_dtypes, 0, 9, 0, NULL, 0, 0, 0, 0},
    {"bitcast", build_bitcast, -3, 3, 0, NULL, 0, 0, 0, 0},
    {"movement", build_movement, -3, 3, 0, NULL, 0, 0, 0, 0},
    {"gather_scatter", build_gather_scatter, 0, 5.99, 0, NULL, 0, 0, 0, 0},
    {"gather_broadcast", build_gather_broadcast, 0, 9.99, 1, NULL, 0, 0, 0, 0},
    {"reduce", build_reduce, 0.5, 1.5, 0, NULL, 0, 0, 0, 0},
    {"reduce_big", build_reduce_big, -1, 1, 0, NULL, 0, 0, 0, 0},
    {"dot", build_dot, -2, 2, 0, NULL, 0, 0, 0, 0},
    {"dot_b2", build_dot_b2, -2, 2, 0, NULL, 0, 0, 0, 0},
    {"conv", build_conv, -1, 1, 0, NULL, 0, 0, 0, 0},
    {"fft", build_fft, -1, 1, 0, NULL, 0, 0, 0, 0},
    {"sort", build_sort, -5, 5, 0, NULL, 0, 0, 0, 0},
    {"constant", build_constant, -1, 1, 0, NULL, 0, 0, 0, 0},
    {"fused", build_fused, -3, 3, 1, NULL, 0, 0, 0, 0},
    {"random", build_random, 0, 1, 0, NULL, 0, 0, 0, 0},
    {"nonzero", build_nonzero, -1, 1, 0, "nonzero", 0, 0, 0, 0},
    {"conv_dw_relu", build_conv_dw_relu, -1, 1, 1, NULL, 0, 0, 0, 0},
    {"row_chains", build_row_chains, -2, 2, 2, NULL, 0, 0, 0, 0},
    {"gemm_dot", build_gemm_dot, -1, 1, 0, NULL, 0, 0, 0, 0},
    {"gemm_dot_bias_gelu", build_dot_bias_gelu, -1, 1, 1, NULL, 0, 0, 0, 0},
    {"gemm_dot_k_gelu", build_dot_long_k_gelu, -1, 1, 1, NULL, 0, 0, 0, 0},
    {"gemm_conv_bias_relu", build_conv_bias_relu, -1, 1, 1, NULL, 0, 0, 0, 0},
    {"gemm_conv_split_res", build_conv_split_res, -1, 1, 1, NULL, 0, 0, 0, 0},
    {"gemm_conv_shapes", build_conv_gemm_shapes, -1, 1, 0, NULL, 0, 0, 0, 0},
    /* operands exact in the row's type: exact products, so f32's tolerance */
    {"exact_dot_f16", build_dot_f16_operands, -1, 1, 0, NULL, 0, 0, 0, 0},
    {"exact_dot_bf16", build_dot_bf16_operands, -1, 1, 0, NULL, 0, 0, 0, 0},
    {"exact_dot_mixed", build_dot_mixed_operands, -1, 1, 0, NULL, 0, 0, 0, 0},
    {"exact_conv_f16_split_res", build_conv_f16_split_res, -1, 1, 1, NULL, 0, 0, 0, 0},
    /* TF32 keeps 10 of f32's 23 mantissa bits: a sum of a few hundred products of numbers in [-1, 1] is within
     * 1e-2 (|sum| + 1); a misplaced fragment is off by the size of a product */
    {"tf32_dot", build_gemm_dot, -1, 1, 0, NULL, 0, PC_MATMUL_HIGH, 1e-2, 0},
    {"tf32_dot_bias_gelu", build_dot_bias_gelu, -1, 1, 1, NULL, 0, PC_MATMUL_HIGH, 1e-2, 0},
    {"tf32_dot_k_gelu", build_dot_long_k_gelu, -1, 1, 1, NULL, 0, PC_MATMUL_HIGH, 1e-2, 0},
    {"tf32_conv_bias_relu", build_conv_bias_relu, -1, 1, 1, NULL, 0, PC_MATMUL_HIGH, 1e-2, 0},
    {"tf32_conv_split_res", build_conv_split_res, -1, 1, 1, NULL, 0, PC_MATMUL_HIGH, 1e-2, 0},
    {"tf32_conv_shapes", build_conv_gemm_shapes, -1, 1, 0, NULL, 0, PC_MATMUL_HIGH, 1e-2, 0},
    /* bf16 asked for (--autocast bf16, --matmul-precision medium): checked against the interpreter on operands the
     * test rounds to bf16 itself (bf16_round), inputs on a 2^-9 grid (bf16_case) so that a quarter of them are ties
     * and every product and partial sum below 64 is exact in f32: f32's tolerance holds, and one operand rounded
     * the wrong way or a misplaced fragment is off by 2^-9 of a product or more */
    {"bf16_dot", build_gemm_dot, -1, 1, 0, NULL, 0, 0, 0, PC_AUTOCAST_BF16},
    {"bf16_dot_bias_gelu", build_dot_bias_gelu, -1, 1, 1, NULL, 0, PC_MATMUL_MEDIUM, 0, 0},
    {"bf16_conv_bias_relu", build_conv_bias_relu, -1, 1, 1, NULL, 0, 0, 0, PC_AUTOCAST_BF16},
    {"bf16_conv_split_res", build_conv_split_res, -1, 1, 1, NULL, 0, 0, 0, PC_AUTOCAST_BF16},
    {"bf16_conv_shapes", build_conv_gemm_shapes, -1, 1, 0, NULL, 0, PC_MATMUL_MEDIUM, 0, 0},
};
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

static pc_graph *case_graph(const gcase *c) {
  pc_graph *g = pc_graph_new();
  c->build(g);
  for (int i = 0; i < g->n_nodes; i++) g->nodes[i]->group = c->fused == 1 ? 0 : i;
  g->n_groups = c->fused == 1 ? 1 : g->n_nodes;
  if (c->fused == 2) { /* each output's producers (not yet in a group of an earlier output) its own group */
    for (int i = 0; i < g->n_nodes; i++) g->nodes[i]->group = -2;
    for (int o = 0; o < g->n_outputs; o++)
      for (int i = g->n_nodes - 1; i >= 0; i--) {
        pc_node *nd = g->nodes[i];
        int feeds = nd->out[0] == g->outputs[o];
        for (int u = i + 1; !feeds && u < g->n_nodes; u++)
          for (int a = 0; a < g->nodes[u]->n_in && !feeds; a++)
            feeds = g->nodes[u]->group == o && g->nodes[u]->in[a] == nd->out[0];
        if (nd->group == -2 && feeds) nd->group = o;
      }
    g->n_groups = g->n_outputs;
  }
  g->matmul_precision = c->mp;
  g->autocast = c->cast;
  return g;
}

/* the case named name */
static const gcase *case_named(const char *name) {
  for (int i = 0; i < N_CASES; i++)
    if (!strcmp(cases[i].name, name)) return &cases[i];
  return NULL;
}

/* the GEMM cases by the kind of tile row they render as on sm_80 and later (CU_GEMM_*), -1 for the others */
static int case_kind(const gcase *c) {
  static const struct {
    const char *prefix;
    int kind;
  } kinds[] = {{"gemm_", CU_GEMM_SIMT},          {"tf32_", CU_GEMM_TF32},           {"bf16_", CU_GEMM_BF16},
               {"exact_dot_f16", CU_GEMM_F16},  {"exact_conv_f16", CU_GEMM_F16},   {"exact_dot_bf16", CU_GEMM_BF16},
               {"exact_dot_mixed", CU_GEMM_TF32}};
  for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++)
    if (!strncmp(c->name, kinds[i].prefix, strlen(kinds[i].prefix))) return kinds[i].kind;
  return -1;
}

/* the kernel comment's row prefix of each kind */
static const char *const kind_rows[CU_GEMM_KINDS] = {"/* gemm simt_", "/* gemm tf32_", "/* gemm bf16_", "/* gemm f16_"};

/* each kind's cases for its forced rows: a dot, then forced to split K in 4: a conv, a dot (where K is deep enough
 * for the row's slices: dots split only when forced) */
static const char *const kind_cases[CU_GEMM_KINDS][3] = {
    {"gemm_dot", "gemm_conv_split_res", "gemm_dot_k_gelu"},
    {"tf32_dot", "tf32_conv_split_res", "tf32_dot_k_gelu"},
    {"bf16_dot", "bf16_conv_split_res", "bf16_dot"},
    {"exact_dot_f16", "exact_conv_f16_split_res", "exact_dot_f16"}};

/* bf16 contractions asked for: the reference rounds the operands itself */
static int bf16_case(const gcase *c) { return c->cast == PC_AUTOCAST_BF16 || c->mp == PC_MATMUL_MEDIUM; }

/* ---------------------------------------------------------------- NVRTC compile of every case */

typedef struct compiled {
  kir_program p;
  pc_cuda_launch *launches;
  pc_cuda_binary bin;
} compiled;

/* kernel IR -> CUDA C (*src, malloc'ed); 1 when it rendered */
static int render_graph(pc_graph *g, compiled *c, char **src) {
  memset(c, 0, sizeof *c);
  return (*src = pc_emu_render(g, &c->p, &c->launches)) != NULL;
}

/* kernel IR -> CUDA C -> cubin; 1 when it compiled */
static int compile_graph(pc_graph *g, pc_nvrtc *nv, compiled *c) {
  char *src;
  int ok = render_graph(g, c, &src) && pc_nvrtc_compile(g, nv, src, "sm_90", &c->bin) == PC_OK;
  free(src);
  return ok;
}

static pc_nvrtc *open_nvrtc(void) {
  char err[512] = "";
  pc_nvrtc *nv = pc_nvrtc_open(err, sizeof err);
  /* no libnvrtc here: skipped; NVRTC present but failing: failed */
  if (!nv && CHECK_MSG(strstr(err, "NVRTC not found") != NULL, "NVRTC: %s", err)) SKIP("%s", err);
  return nv;
}

PC_TEST(cuda_nvrtc_every_prim) {
  pc_nvrtc *nv = open_nvrtc();
  if (!nv) return;
  char ok_list[1024] = "", bad_list[1024] = "";
  for (int i = 0; i < N_CASES; i++) {
    const gcase *c = &cases[i];
    pc_graph *g = case_graph(c);
    compiled cc;
    int ok = compile_graph(g, nv, &cc);
    if (c->fails) {
      CHECK_MSG(!ok && strstr(pc_error(g), c->fails), "%s: expected a clean error naming %s, got: %s", c->name,
                c->fails, ok ? "success" : pc_error(g));
    } else {
      CHECK_MSG(ok, "%s: %s", c->name, pc_error(g));
      CHECK_MSG(!ok || (cc.bin.cubin_size > 0 && cc.bin.ptx_size > 0), "%s: empty cubin or PTX", c->name);
    }
    char *list = ok ? ok_list : bad_list;
    snprintf(list + strlen(list), 1024 - strlen(list), " %s", c->name);
    pc_cuda_binary_free(&cc.bin);
    pc_graph_free(g);
  }
  fprintf(stderr, "  cuda: compiled for sm_90:%s\n  cuda: not compiled:%s\n", ok_list, bad_list);
  pc_nvrtc_close(nv);
}

/* the first NVRTC error becomes a message naming the kernel */
PC_TEST(cuda_nvrtc_error_names_kernel) {
  pc_nvrtc *nv = open_nvrtc();
  if (!nv) return;
  pc_graph *g = pc_graph_new();
  const char *src = "extern \"C\" __global__ void __launch_bounds__(256) k0_add(float *b0) {\n"
                    "  b0[0] = 1;\n}\n"
                    "extern \"C\" __global__ void __launch_bounds__(256) k1_exp(float *b0) {\n"
                    "  b0[0] = undefined_thing;\n}\n";
  pc_cuda_binary b;
  CHECK(pc_nvrtc_compile(g, nv, src, NULL, &b) != PC_OK);
  CHECK_CONTAINS(pc_error(g), "k1_exp");
  CHECK_CONTAINS(pc_error(g), "undefined_thing");
  pc_cuda_binary_free(&b);
  pc_graph_free(g);
  g = pc_graph_new();
  CHECK(pc_nvrtc_compile(g, nv, "", "gfx90a", &b) == PC_ERR_ATTR);
  pc_graph_free(g);
  pc_nvrtc_close(nv);
}

/* the renderer names kernels k<N>_<prim> and quotes their origin nodes */
PC_TEST(cuda_render_names_and_origins) {
  pc_graph *g = pc_graph_new();
  pc_set_origin(g, "Add \"block1/add*/x\"");
  pc_value *a = in(g, PC_f32, 1, I64S(8)), *b = in(g, PC_f32, 1, I64S(8));
  out(g, bin(g, PC_OP_add, a, b));
  pc_set_origin(g, NULL);
  out(g, pc_reduce(g, PC_OP_reduce_sum, a, 1, I64S(0)));
  char *src = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&src, &len);
  CHECK(pc_cuda_render(g, f) == PC_OK);
  fclose(f);
  CHECK_CONTAINS(src, "extern \"C\" __global__ void __launch_bounds__(256) k0_add(");
  CHECK_CONTAINS(src, "k1_reduce_sum(");
  CHECK_CONTAINS(src, "Add \"block1/add*|x\""); /* a comment-closing origin is defused */
  CHECK_CONTAINS(src, "__shfl_down_sync");
  free(src);
  pc_graph_free(g);
}

/* the tile rows fit their kernel's thread maps and shared memory, 3 or more of each kind */
PC_TEST(cuda_gemm_tile_rows_valid) {
  for (int kind = 0; kind < CU_GEMM_KINDS; kind++) {
    int n = 0;
    for (const char *bad; (bad = cu_gemm_tiles_invalid(kind, n)); n++)
      CHECK_MSG(!*bad, "tile row %s does not fit its kernel", bad);
    CHECK_MSG(n >= 3, "%d rows of kind %d", n, kind);
  }
}

/* f32 dots and convs render as tiled GEMMs of the case's kind, its precision in the kernel's comment; a fused conv
 * or dot epilogue runs in the call's kernel, its loop kernel rendered empty and not launched (grid 0); the long
 * strided convs on SIMT and TF32 rows split K */
PC_TEST(cuda_gemm_render) {
  static const char *const what[CU_GEMM_KINDS] = {"(f32 FMA", "(TF32 mma", "(bf16 mma", "(f16 mma"};
  for (int i = 0; i < N_CASES; i++) {
    const gcase *c = &cases[i];
    int kind = case_kind(c);
    if (kind < 0) continue;
    pc_graph *g = case_graph(c);
    compiled cc;
    char *src;
    if (CHECK_MSG(render_graph(g, &cc, &src), "%s: %s", c->name, pc_error(g))) {
      CHECK_CONTAINS(src, kind_rows[kind]);
      CHECK_CONTAINS(src, what[kind]);
      for (int o = 0; o < CU_GEMM_KINDS; o++)
        if (o != kind) CHECK_MSG(!strstr(src, kind_rows[o]), "%s: a row of another kind (%s)", c->name, kind_rows[o]);
      if (!strncmp(c->name, "exact", 5)) CHECK_CONTAINS(src, "-exact operands)");
      if (bf16_case(c)) CHECK_CONTAINS(src, "(bf16 mma): ");
      int skipped = 0;
      for (int k = 0; k < cc.p.n_kernels; k++) skipped += cc.launches[k].grid == 0;
      int epi = strstr(c->name, "relu") || strstr(c->name, "res") || strstr(c->name, "gelu");
      CHECK_MSG(skipped == epi, "%s: %d kernels not launched, want %d", c->name, skipped, epi);
      if (epi) CHECK_CONTAINS(src, "/* run by an earlier kernel (a call's epilogue, a row chain) */");
      /* the bf16 and f16 rows run a K of 576 fast enough that the wave model keeps it whole (cuda_emu_gemm_rows
       * forces their splits) */
      int split = strstr(c->name, "split") && (kind == CU_GEMM_SIMT || kind == CU_GEMM_TF32);
      if (split) CHECK_MSG(!strstr(src, ", split 1 */"), "%s: K not split", c->name);
      if (split) CHECK_CONTAINS(src, "_conv_count[tmn], 1u)");
    }
    free(src);
    pc_graph_free(g);
  }
}

/* candidates run only when forced: a dot deep enough to split keeps K whole and no candidate row renders unless
 * PRIMC_CUDA_GEMM names it; forced, the dot splits K in 4 into its module's array of partial tiles, its epilogue
 * still in the kernel */
PC_TEST(cuda_gemm_candidates_forced_only) {
  static const char *const names[] = {"gemm_dot_k_gelu", "tf32_dot_k_gelu"};
  static const char *const force[] = {"simt_32x32_cp4:4", "tf32_32x32:4"};
  for (int i = 0; i < 2; i++) {
    const gcase *c = case_named(names[i]);
    for (int forced = 0; c && forced < 2; forced++) {
      if (forced) setenv("PRIMC_CUDA_GEMM", force[i], 1);
      pc_graph *g = case_graph(c);
      compiled cc;
      char *src = NULL;
      if (CHECK_MSG(render_graph(g, &cc, &src), "%s: %s", c->name, pc_error(g))) {
        CHECK_MSG((strstr(src, ", split 1 */") == NULL) == forced, "%s forced %d: split", c->name, forced);
        CHECK_MSG(!strstr(src, "_part[") == !forced, "%s forced %d: partial tiles", c->name, forced);
        CHECK_MSG(!strstr(src, "/* gemm simt_32x32_cp4 ") == !(forced && i == 0), "%s forced %d: candidate row", c->name, forced);
        CHECK_CONTAINS(src, "/* run by an earlier kernel (a call's epilogue, a row chain) */");
      }
      unsetenv("PRIMC_CUDA_GEMM");
      free(src);
      pc_graph_free(g);
    }
  }
}

/* NVRTC's PTX for sm_90 multiplies on the tensor core instruction of the case's kind, and on no other (the prelude's
 * mma functions are templates: only the ones a kernel calls reach the PTX) */
PC_TEST(cuda_gemm_mma_ptx) {
  static const char *const insn[CU_GEMM_KINDS] = {NULL, "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32",
                                                  "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
                                                  "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"};
  static const char *const names[] = {"gemm_dot", "tf32_dot", "bf16_dot", "bf16_conv_split_res", "exact_dot_f16",
                                      "exact_dot_bf16", "exact_dot_mixed"};
  pc_nvrtc *nv = open_nvrtc();
  for (int i = 0; nv && i < N_CASES; i++) {
    const gcase *c = &cases[i];
    int mine = 0, kind = case_kind(c);
    for (size_t j = 0; j < sizeof names / sizeof *names; j++) mine |= !strcmp(c->name, names[j]);
    if (!mine) continue;
    pc_graph *g = case_graph(c);
    compiled cc;
    if (CHECK_MSG(compile_graph(g, nv, &cc), "%s: %s", c->name, pc_error(g))) {
      char *ptx = strndup(cc.bin.ptx, cc.bin.ptx_size);
      for (int o = 1; ptx && o < CU_GEMM_KINDS; o++)
        CHECK_MSG(!strstr(ptx, insn[o]) == (o != kind), "%s: %s %s in the PTX", c->name, insn[o], o == kind ? "not" : "");
      free(ptx);
    }
    pc_cuda_binary_free(&cc.bin);
    pc_graph_free(g);
  }
  pc_nvrtc_close(nv);
}

/* a layer norm's and a softmax's reductions and their pointwise kernel render as one kernel each (a block per row),
 * the kernels they absorbed empty and not launched */
PC_TEST(cuda_row_chains_render) {
  for (int i = 0; i < N_CASES; i++) {
    const gcase *c = &cases[i];
    if (strcmp(c->name, "row_chains") && strcmp(c->name, "fused")) continue;
    pc_graph *g = case_graph(c);
    compiled cc;
    char *src;
    if (CHECK_MSG(render_graph(g, &cc, &src), "%s: %s", c->name, pc_error(g))) {
      int chains = 0, idle = 0;
      for (const char *q = src; (q = strstr(q, "/* row chain: kernels ")); q++) chains++;
      for (int k = 0; k < cc.p.n_kernels; k++) idle += cc.launches[k].grid == 0;
      int want = strcmp(c->name, "fused") ? 2 : 1;
      CHECK_MSG(chains == want, "%s: %d row chains, want %d", c->name, chains, want);
      CHECK_MSG(idle >= 2 * want, "%s: %d kernels not launched", c->name, idle);
    }
    free(src);
    pc_graph_free(g);
  }
}

/* tensor cores need sm_80: for an older target the same options render the SIMT rows (TF32: as exact or more;
 * bf16: the operands rounded to bf16 as they are staged, the same products in f32 FMAs) */
PC_TEST(cuda_gemm_mma_needs_sm80) {
  CHECK_INT(pc_cuda_sm("sm_90a"), 90);
  CHECK_INT(pc_cuda_sm("compute_80"), 80);
  CHECK_INT(pc_cuda_sm("sm_75"), 75);
  CHECK_INT(pc_cuda_sm(NULL), 90);
  CHECK_INT(pc_cuda_sm("bogus"), 90);
  static const char *const names[] = {"tf32_dot", "exact_dot_f16", "exact_dot_bf16", "bf16_dot", "bf16_conv_split_res"};
  for (int sm = 75; sm <= 80; sm += 5)
    for (int i = 0; i < N_CASES; i++) {
      const gcase *c = &cases[i];
      int mine = 0, kind = sm < 80 ? CU_GEMM_SIMT : case_kind(c);
      for (size_t j = 0; j < sizeof names / sizeof *names; j++) mine |= !strcmp(c->name, names[j]);
      if (!mine) continue;
      pc_graph *g = case_graph(c);
      kir_program p;
      char *src = pc_emu_render_sm(g, sm, &p, NULL);
      if (CHECK_MSG(src, "%s at sm_%d: %s", c->name, sm, pc_error(g))) {
        CHECK_CONTAINS(src, kind_rows[kind]);
        for (int o = 0; o < CU_GEMM_KINDS; o++)
          if (o != kind) CHECK_MSG(!strstr(src, kind_rows[o]), "%s at sm_%d: %s", c->name, sm, kind_rows[o]);
        if (sm < 80) CHECK_MSG(!strstr(src, "<0>(acc[i][j]"), "%s at sm_%d: an mma call", c->name, sm);
        int rounded = sm < 80 && bf16_case(c);
        CHECK_MSG(!strstr(src, "operands rounded to bf16") == !rounded, "%s at sm_%d: rounded %d", c->name, sm, rounded);
        CHECK_MSG(!strstr(src, "= pc_rbf(ra[i]);") == !rounded, "%s at sm_%d: pc_rbf staging %d", c->name, sm, rounded);
      }
      free(src);
      pc_graph_free(g);
    }
}

/* --emit cuda writes the text; .cubin / .ptx outputs get NVRTC's binaries */
PC_TEST(cuda_codegen_emit) {
  pc_graph *g = pc_graph_new();
  pc_value *a = in(g, PC_f32, 1, I64S(8));
  out(g, un(g, PC_OP_exp, a));
  char path[] = "/tmp/primc-cuda-XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  close(fd);
  pc_codegen_opts o = {0};
  o.emit = PC_EMIT_CUDA;
  o.output = path;
  CHECK_MSG(pc_codegen_cuda(g, &o) == PC_OK, "%s", pc_error(g));
  FILE *f = fopen(path, "r");
  char buf[256] = "";
  CHECK(f && fgets(buf, sizeof buf, f));
  CHECK(strstr(buf, "CUDA C generated by primc") != NULL);
  if (f) fclose(f);
  unlink(path);
  char ptx[64];
  snprintf(ptx, sizeof ptx, "%s.ptx", path);
  o.output = ptx;
  CHECK_MSG(pc_codegen_cuda(g, &o) == PC_OK, "%s", pc_error(g));
  f = fopen(ptx, "r");
  char *text = calloc(1, 1 << 16);
  CHECK(f && text && fread(text, 1, (1 << 16) - 1, f) > 0);
  CHECK_CONTAINS(text, ".entry k0_exp");
  if (f) fclose(f);
  free(text);
  unlink(ptx);
  pc_graph_free(g);
}

/* ---------------------------------------------------------------- GPU execution */

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double urand(double lo, double hi) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return lo + (hi - lo) * (double)(rng >> 11) / 9007199254740992.0;
}

static pc_tensor make_input(const pc_value *v, double lo, double hi, int nonzero) {
  pc_tensor t = {v->type.dtype, v->type.rank, {0}, NULL};
  memcpy(t.dims, v->type.dims, sizeof t.dims);
  int64_t n = pc_tensor_numel(&t);
  t.data = calloc((size_t)n + 1, pc_dtype_size(t.dtype));
  for (int64_t i = 0; i < n; i++) {
    double x = urand(lo, hi);
    if (!pc_dtype_is_float(t.dtype) && t.dtype != PC_c64) x = floor(x);
    if (nonzero && x == 0) x = 1;
    if (t.dtype == PC_bool) x = urand(0, 1) < 0.5;
    pc_test_put(t.dtype, t.data, i, x);
  }
  return t;
}

static int close_enough(pc_dtype dt, double a, double b, double f32_tol) {
  if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
  if (isinf(a) || isinf(b)) return a == b;
  double tol = dt == PC_f16 ? 3e-3 : dt == PC_bf16 ? 1.6e-2 : dt == PC_f32 || dt == PC_c64 ? f32_tol : dt == PC_f64 ? 1e-12 : 0;
  return fabs(a - b) <= tol * (1 + fabs(b));
}

typedef struct gpu {
  primc_cuda *cu;
  primc_devptr din[MAXT], dout[MAXT], ws, weights;
} gpu;

static primc_devptr buf_ptr(const gpu *d, const kir_buf *b) {
  switch (b->place) { /* the four places of kir.h */
  case KP_INPUT: return d->din[b->index];
  case KP_OUTPUT: return d->dout[b->index];
  case KP_CONST: return d->weights + (primc_devptr)b->offset;
  case KP_WORKSPACE: return d->ws + (primc_devptr)b->offset;
  }
  return 0;
}

/* got[i]: output i's type, its data zeroed (malloc'ed) */
static void alloc_outputs(const pc_graph *g, pc_tensor *got) {
  for (int i = 0; i < g->n_outputs; i++) {
    const pc_value *v = g->outputs[i];
    got[i] = (pc_tensor){v->type.dtype, v->type.rank, {0}, NULL};
    memcpy(got[i].dims, v->type.dims, sizeof got[i].dims);
    got[i].data = calloc(1, pc_tensor_nbytes(&got[i]) + 1);
  }
}

/* uploads, launches every kernel in order, downloads the outputs into got (alloc_outputs') */
static int run_on_gpu(gpu *d, pc_graph *g, compiled *c, const pc_tensor *ins, pc_tensor *got, int *status,
                      const char *tag) {
  primc_cuda *cu = d->cu;
  primc_cuda_module *m = NULL;
  int ok = CHECK_MSG(primc_cuda_module_load(cu, c->bin.cubin, &m) == PRIMC_OK, "%s: %s", tag, primc_cuda_error(cu));
  void *blob = kir_weights_blob(&c->p);
  ok = ok && primc_cuda_alloc(cu, (size_t)c->p.workspace_size, &d->ws) == PRIMC_OK &&
       primc_cuda_alloc(cu, (size_t)c->p.weights_size, &d->weights) == PRIMC_OK &&
       primc_cuda_upload(cu, d->weights, blob, (size_t)c->p.weights_size) == PRIMC_OK;
  for (int i = 0; ok && i < g->n_inputs; i++) {
    size_t n = pc_tensor_nbytes(&ins[i]);
    ok = primc_cuda_alloc(cu, n, &d->din[i]) == PRIMC_OK && primc_cuda_upload(cu, d->din[i], ins[i].data, n) == PRIMC_OK;
  }
  for (int i = 0; ok && i < g->n_outputs; i++) ok = primc_cuda_alloc(cu, pc_tensor_nbytes(&got[i]), &d->dout[i]) == PRIMC_OK;
  for (int k = 0; ok && k < c->p.n_kernels; k++) {
    const pc_cuda_launch *L = &c->launches[k];
    if (!L->grid) continue; /* run by the kernel before it */
    primc_devptr vals[64];
    void *args[64], *fn = NULL;
    for (int a = 0; a < L->n_args && a < 64; a++) {
      vals[a] = buf_ptr(d, &c->p.bufs[L->args[a]]);
      args[a] = &vals[a];
    }
    ok = primc_cuda_function(cu, m, L->name, &fn) == PRIMC_OK &&
         primc_cuda_launch(cu, fn, L->name, (unsigned)L->grid, (unsigned)L->block, 0, args) == PRIMC_OK;
  }
  *status = -1;
  ok = ok && primc_cuda_sync(cu) == PRIMC_OK && primc_cuda_module_status(cu, m, status) == PRIMC_OK;
  CHECK_MSG(ok, "%s: %s", tag, primc_cuda_error(cu));
  for (int i = 0; ok && i < g->n_outputs; i++)
    ok = primc_cuda_download(cu, got[i].data, d->dout[i], pc_tensor_nbytes(&got[i])) == PRIMC_OK;
  for (int i = 0; i < g->n_inputs; i++) primc_cuda_free(cu, d->din[i]), d->din[i] = 0;
  for (int i = 0; i < g->n_outputs; i++) primc_cuda_free(cu, d->dout[i]), d->dout[i] = 0;
  primc_cuda_free(cu, d->ws);
  primc_cuda_free(cu, d->weights);
  d->ws = d->weights = 0;
  primc_cuda_module_unload(cu, m);
  free(blob);
  return ok;
}

static int compare(pc_graph *g, const pc_tensor *ref, const pc_tensor *got, const char *tag, double f32_tol) {
  for (int o = 0; o < g->n_outputs; o++) {
    pc_dtype dt = ref[o].dtype, lane = dt == PC_c64 ? PC_f32 : dt; /* complex: both halves */
    int64_t n = pc_tensor_numel(&ref[o]) * (dt == PC_c64 ? 2 : 1);
    for (int64_t i = 0; i < n; i++) {
      double a = pc_elem_f64(lane, got[o].data, i), b = pc_elem_f64(lane, ref[o].data, i);
      if (!close_enough(dt, a, b, f32_tol))
        return CHECK_MSG(0, "%s: out%d (%s) [%lld] = %.9g on the GPU, interpreter %.9g", tag, o, pc_dtype_name(dt),
                         (long long)i, a, b);
    }
  }
  return CHECK_MSG(1, "%s", tag);
}

/* a case's outputs from somewhere other than the interpreter into got: 1 when it ran, 0 when it failed (checked),
 * -1 when it cannot run here */
typedef int (*case_runner)(void *ctx, pc_graph *g, const pc_tensor *ins, pc_tensor *got, const char *tag);

typedef struct gpu_run {
  gpu *d;
  pc_nvrtc *nv;
} gpu_run;

/* compiled by NVRTC, run on the GPU */
static int on_gpu(void *ctx, pc_graph *g, const pc_tensor *ins, pc_tensor *got, const char *tag) {
  gpu_run *r = ctx;
  compiled cc;
  int ok = CHECK_MSG(compile_graph(g, r->nv, &cc), "%s: %s", tag, pc_error(g)), status = -1;
  ok = ok && run_on_gpu(r->d, g, &cc, ins, got, &status, tag);
  ok = ok && CHECK_MSG(status == 0, "%s: a kernel reported bad data (%d)", tag, status);
  pc_cuda_binary_free(&cc.bin);
  return ok;
}

/* run on the CPU emulator of rendered CUDA C (tests/unit/cuda_emu.h); ctx: NULL, or the int compute capability
 * the kernels are rendered for */
static int on_emulator(void *ctx, pc_graph *g, const pc_tensor *ins, pc_tensor *got, const char *tag) {
  char err[512] = "";
  void *in[MAXT], *out[MAXT];
  for (int k = 0; k < g->n_inputs; k++) in[k] = ins[k].data;
  for (int k = 0; k < g->n_outputs; k++) out[k] = got[k].data;
  int r = pc_emu_graph_sm(g, ctx ? *(const int *)ctx : 0, in, out, NULL, err, sizeof err);
  return r < 0 ? -1 : CHECK_MSG(r == 1, "%s: %s", tag, err);
}

/* x rounded to bf16's 8 significant bits, to nearest, ties to even: written apart from the renderer's bit
 * arithmetic (pc_f2bf), through frexp and the FPU's default rounding (finite x, bf16's normal range) */
static float bf16_round(float x) {
  int e;
  double m = frexp(x, &e); /* |m| in [0.5, 1): 8 significant bits are m * 2^8 rounded to an integer */
  return (float)ldexp(nearbyint(ldexp(m, 8)), e - 8);
}

/* input v is an operand of a dot or conv of g */
static int contraction_operand(const pc_graph *g, const pc_value *v) {
  for (int i = 0; i < g->n_nodes; i++) {
    const pc_node *n = g->nodes[i];
    if ((n->op == PC_OP_dot_general || n->op == PC_OP_conv) && (n->in[0] == v || n->in[1] == v)) return 1;
  }
  return 0;
}

/* case c's outputs from run against the interpreter's; 1 when every output matched, -1 when run cannot run here.
 * A bf16 case's inputs lie on a 2^-9 grid, and the interpreter reads its contraction operands rounded to bf16 */
static int check_case(const gcase *c, const char *tag, case_runner run, void *ctx) {
  pc_graph *g = case_graph(c);
  if (!CHECK_MSG(g->n_inputs <= MAXT && g->n_outputs <= MAXT, "%s: %d inputs, %d outputs: raise MAXT", tag, g->n_inputs,
                 g->n_outputs)) {
    pc_graph_free(g);
    return 0;
  }
  pc_tensor ins[MAXT], ref[MAXT], got[MAXT];
  memset(ref, 0, sizeof ref);
  pc_tensor rin[MAXT]; /* the interpreter's inputs */
  int bf16 = bf16_case(c);
  for (int k = 0; k < g->n_inputs; k++) {
    ins[k] = rin[k] = make_input(g->inputs[k], c->lo, c->hi, c->nonzero);
    if (!bf16 || ins[k].dtype != PC_f32) continue;
    int64_t n = pc_tensor_numel(&ins[k]);
    float *x = ins[k].data;
    for (int64_t i = 0; i < n; i++) x[i] = (float)(nearbyint(x[i] * 512.0) / 512.0);
    if (!contraction_operand(g, g->inputs[k])) continue;
    rin[k].data = malloc((size_t)n * sizeof(float) + 1);
    for (int64_t i = 0; i < n; i++) ((float *)rin[k].data)[i] = bf16_round(x[i]);
  }
  alloc_outputs(g, got);
  int ok = CHECK_MSG(pc_interp(g, rin, g->n_inputs, ref, g->n_outputs) == PC_OK, "%s: interp: %s", tag, pc_error(g));
  int r = ok ? run(ctx, g, ins, got, tag) : 0;
  ok = r > 0 && compare(g, ref, got, tag, c->tol ? c->tol : 2e-5);
  for (int k = 0; k < g->n_inputs; k++) {
    if (rin[k].data != ins[k].data) free(rin[k].data);
    free(ins[k].data);
  }
  for (int k = 0; k < g->n_outputs; k++) pc_tensor_free(&ref[k]), free(got[k].data);
  pc_graph_free(g);
  return r < 0 ? -1 : ok;
}

/* case c run on the GPU; how: the forced tile row, if any */
static int run_case(gpu *d, pc_nvrtc *nv, const gcase *c, const char *how) {
  char tag[160];
  snprintf(tag, sizeof tag, "%s%s%s", c->name, *how ? " " : "", how);
  gpu_run r = {d, nv};
  return check_case(c, tag, on_gpu, &r) > 0;
}

PC_TEST(cuda_gpu_matches_interpreter) {
  char err[512] = "";
  gpu d;
  memset(&d, 0, sizeof d);
  int rc = primc_cuda_open(0, &d.cu, err, sizeof err);
  if (rc != PRIMC_OK) {
    /* no GPU here: the skip must come from the driver's own answer, not a guess */
    SKIP("GPU execution: %s", err);
    CHECK_INT(rc, PRIMC_ERR_NODEVICE);
    CHECK(d.cu == NULL);
    CHECK_MSG(strstr(err, "cuInit") || strstr(err, "libcuda.so.1"), "skip reason names cuInit or libcuda: %s", err);
    return;
  }
  pc_nvrtc *nv = open_nvrtc();
  int ran = 0;
  for (int i = 0; nv && i < N_CASES; i++)
    if (!cases[i].fails) ran += run_case(&d, nv, &cases[i], "");
  fprintf(stderr, "  cuda: %d graphs ran on the GPU and matched the interpreter\n", ran);
  pc_nvrtc_close(nv);
  primc_cuda_close(d.cu);
}

/* every tile row of cuda_gemm.c's table, forced (PRIMC_CUDA_GEMM), on the cases of its kind (kind_cases) */
PC_TEST(cuda_gpu_gemm_rows) {
  char err[512] = "";
  gpu d;
  memset(&d, 0, sizeof d);
  if (primc_cuda_open(0, &d.cu, err, sizeof err) != PRIMC_OK) {
    SKIP("GPU execution: %s", err);
    CHECK_MSG(strstr(err, "cuInit") || strstr(err, "libcuda.so.1"), "skip reason names cuInit or libcuda: %s", err);
    return;
  }
  pc_nvrtc *nv = open_nvrtc();
  int ran = 0, rows = 0;
  for (int kind = 0; nv && kind < CU_GEMM_KINDS; kind++)
    for (int r = 0; cu_gemm_tile_name(kind, r); r++, rows++)
      for (int j = 0; j < 3; j++) {
        const gcase *c = case_named(kind_cases[kind][j]);
        char force[64];
        snprintf(force, sizeof force, "%s%s", cu_gemm_tile_name(kind, r), j ? ":4" : "");
        setenv("PRIMC_CUDA_GEMM", force, 1);
        ran += CHECK_MSG(c, "no case %s", kind_cases[kind][j]) && run_case(&d, nv, c, force);
      }
  unsetenv("PRIMC_CUDA_GEMM");
  fprintf(stderr, "  cuda: %d graphs on %d forced tile rows matched the interpreter\n", ran, rows);
  pc_nvrtc_close(nv);
  primc_cuda_close(d.cu);
}

/* ---------------------------------------------------------------- the same kernels on the CPU emulator */

/* case c on the CPU emulator, its kernels rendered for sm (0: sm_90); 1 when it matched the interpreter, -1 when
 * there is no compiler for it */
static int run_case_emu(const gcase *c, const char *how, int sm) {
  char tag[160];
  snprintf(tag, sizeof tag, "%s%s%s (emulated)", c->name, *how ? " " : "", how);
  return check_case(c, tag, on_emulator, &sm);
}

/* the contraction kernels run on the CPU emulator against the interpreter: every case of cuda_gemm.c's paths as
 * the wave model picks, every tile row forced on a dot and a split conv of its kind, and the bf16 cases on sm_75's
 * SIMT rows (operands rounded as staged); with the direct dot and conv and the depthwise conv's fused epilogue */
PC_TEST(cuda_emu_gemm_rows) {
  static const char *const picked[] = {"dot", "conv", "conv_dw_relu", "row_chains", "fused"};
  int ran = 0, rows = 0;
  for (int i = 0; i < N_CASES; i++) {
    const gcase *c = &cases[i];
    int mine = case_kind(c) >= 0;
    for (size_t j = 0; j < sizeof picked / sizeof *picked; j++) mine |= !strcmp(c->name, picked[j]);
    if (!mine) continue;
    int r = run_case_emu(c, "", 0);
    if (r < 0) {
      SKIP("no g++ for the CUDA emulator");
      return;
    }
    ran += r;
    if (bf16_case(c)) ran += run_case_emu(c, "sm_75", 75) > 0;
  }
  for (int kind = 0; kind < CU_GEMM_KINDS; kind++)
    for (int r = 0; cu_gemm_tile_name(kind, r); r++, rows++)
      for (int j = 0; j < 3; j++) {
        const gcase *c = case_named(kind_cases[kind][j]);
        char force[64];
        snprintf(force, sizeof force, "%s%s", cu_gemm_tile_name(kind, r), j ? ":4" : "");
        setenv("PRIMC_CUDA_GEMM", force, 1);
        ran += CHECK_MSG(c, "no case %s", kind_cases[kind][j]) && run_case_emu(c, force, 0) > 0;
      }
  unsetenv("PRIMC_CUDA_GEMM");
  fprintf(stderr, "  cuda emulator: %d graphs matched the interpreter (%d tile rows forced)\n", ran, rows);
}

/* an out-of-range gather index is reported through primc_status, not a crash */
PC_TEST(cuda_gpu_bad_index_status) {
  char err[512] = "";
  primc_cuda *cu = NULL;
  int rc = primc_cuda_open(0, &cu, err, sizeof err);
  if (rc != PRIMC_OK) {
    SKIP("GPU status test: %s", err);
    CHECK_INT(rc, PRIMC_ERR_NODEVICE);
    CHECK_MSG(strstr(err, "cuInit") || strstr(err, "libcuda.so.1"), "skip reason names cuInit or libcuda: %s", err);
    return;
  }
  pc_nvrtc *nv = open_nvrtc();
  pc_graph *g = pc_graph_new();
  pc_value *x = in(g, PC_f32, 1, I64S(4)), *idx = in(g, PC_i32, 1, I64S(2));
  pc_value *gi[2] = {x, idx};
  pc_attr ga = pc_a_int("axis", 0);
  out(g, pc_build(g, PC_OP_gather, gi, 2, &ga, 1));
  compiled cc;
  gpu d = {.cu = cu};
  float xv[4] = {1, 2, 3, 4};
  int32_t iv[2] = {1, 9};
  pc_tensor ins[2] = {{PC_f32, 1, {4}, xv}, {PC_i32, 1, {2}, iv}}, got[1];
  alloc_outputs(g, got);
  if (CHECK_MSG(nv && compile_graph(g, nv, &cc), "%s", pc_error(g))) {
    int status = -1;
    CHECK(run_on_gpu(&d, g, &cc, ins, got, &status, "bad_index"));
    CHECK_INT(status, PRIMC_ERR_RUNTIME);
  }
  pc_cuda_binary_free(&cc.bin);
  free(got[0].data);
  pc_graph_free(g);
  pc_nvrtc_close(nv);
  primc_cuda_close(cu);
}
