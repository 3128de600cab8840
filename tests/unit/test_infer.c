/* tests/unit/test_infer.c: shape/dtype inference of every prim family (accepted and rejected) and the verifier. */
#include "ir/ir.h"
#include "tests/test.h"

#include <stdio.h>
#include <stdlib.h>

#define D(...) ((const int64_t[]){__VA_ARGS__})
#define T(dt, r, ...) pc_type_make(PC_##dt, r, D(__VA_ARGS__))
#define NA(a) ((int)(sizeof(a) / sizeof *(a)))

/* "f32[3,batch]" with symbols by name */
static const char *tstr(const pc_graph *g, const pc_value *v, char *buf, size_t n) {
  if (!v) return "(null)";
  size_t o = (size_t)snprintf(buf, n, "%s[", pc_dtype_name(v->type.dtype));
  for (int i = 0; i < v->type.rank && o < n; i++) {
    int64_t d = v->type.dims[i];
    if (d >= 0)
      o += (size_t)snprintf(buf + o, n - o, "%s%lld", i ? "," : "", (long long)d);
    else
      o += (size_t)snprintf(buf + o, n - o, "%s%s", i ? "," : "", g->syms[PC_DIM_SYM_ID(d)].name);
  }
  if (o < n) snprintf(buf + o, n - o, "]");
  return buf;
}

#define CHECK_TYPE(g, v, want)                                                                          \
  do {                                                                                                  \
    char tb_[128];                                                                                      \
    const char *got_ = tstr((g), (v), tb_, sizeof tb_); /* (v) builds nodes: evaluate it once */       \
    CHECK_STR(got_, (want));                                                                            \
  } while (0)

/* the graph is in error with this status and a message containing text */
#define CHECK_FAIL(g, code, text)    \
  do {                               \
    CHECK_INT((g)->status, (code));  \
    CHECK_CONTAINS(pc_error(g), (text)); \
  } while (0)

static pc_value *x_of(pc_graph *g, pc_type t) { return pc_input_add(g, NULL, t); }

static pc_value *op1(pc_graph *g, pc_op op, pc_value *x, const pc_attr *a, int na) { return pc_build(g, op, &x, 1, a, na); }

static pc_value *op2(pc_graph *g, pc_op op, pc_value *x, pc_value *y, const pc_attr *a, int na) {
  pc_value *in[2] = {x, y};
  return pc_build(g, op, in, 2, a, na);
}

/* ---------------------------------------------------------------- elementwise */

PC_TEST(infer_elementwise_ok) {
  pc_graph *g = pc_graph_new();
  int b = pc_sym_add(g, "batch", 1, 64);
  pc_value *x = x_of(g, T(f32, 2, 3, 4)), *y = x_of(g, T(f32, 2, 3, 4));
  CHECK_TYPE(g, pc_add(g, x, y), "f32[3,4]");
  CHECK_TYPE(g, pc_lt(g, x, y), "bool[3,4]");
  CHECK_TYPE(g, pc_isnan(g, x), "bool[3,4]");
  CHECK_TYPE(g, pc_clamp(g, x, x, y), "f32[3,4]");
  pc_value *s = x_of(g, pc_type_make(PC_f32, 2, D(PC_SYM(b), 4)));
  CHECK_TYPE(g, pc_exp(g, pc_mul(g, s, s)), "f32[batch,4]");
  pc_value *i = x_of(g, T(i32, 1, 5));
  CHECK_TYPE(g, pc_shift_left(g, i, i), "i32[5]");
  CHECK_TYPE(g, pc_not(g, pc_eq(g, i, i)), "bool[5]");
  CHECK_INT(pc_verify(g), PC_OK);
  pc_graph_free(g);
}

PC_TEST(infer_elementwise_shape_mismatch) {
  pc_graph *g = pc_graph_new();
  CHECK(pc_add(g, x_of(g, T(f32, 2, 3, 4)), x_of(g, T(f32, 2, 3, 5))) == NULL);
  CHECK_FAIL(g, PC_ERR_SHAPE, "add: operand 1 has shape f32[3,5], expected f32[3,4]");
  pc_graph_free(g);
}

PC_TEST(infer_elementwise_dtype_mismatch) {
  pc_graph *g = pc_graph_new();
  pc_set_origin(g, "Add \"a1\"");
  CHECK(pc_add(g, x_of(g, T(f32, 1, 3)), x_of(g, T(i32, 1, 3))) == NULL);
  CHECK_FAIL(g, PC_ERR_TYPE, "Add \"a1\": add: operand 1 has dtype i32[3], expected f32[3]");
  pc_graph_free(g);
}

PC_TEST(infer_elementwise_symbols_differ) {
  pc_graph *g = pc_graph_new();
  int b = pc_sym_add(g, "batch", 1, 8), s = pc_sym_add(g, "seq", 1, 8);
  pc_value *x = x_of(g, pc_type_make(PC_f32, 1, D(PC_SYM(b)))), *y = x_of(g, pc_type_make(PC_f32, 1, D(PC_SYM(s))));
  CHECK(pc_sub(g, x, y) == NULL);
  CHECK_FAIL(g, PC_ERR_SHAPE, "operand 1 has shape f32[seq], expected f32[batch]");
  pc_graph_free(g);
}

PC_TEST(infer_operand_class) {
  struct { pc_op op; pc_dtype dt; const char *msg; } rows[] = {
      {PC_OP_exp, PC_i32, "operand 0 has dtype i32, expected a float dtype"},
      {PC_OP_not, PC_f32, "expected bool or an int dtype"},
      {PC_OP_neg, PC_bool, "expected a numeric dtype"},
      {PC_OP_neg, PC_c64, "expected a numeric dtype"},
  };
  for (int i = 0; i < NA(rows); i++) {
    pc_graph *g = pc_graph_new();
    CHECK(op1(g, rows[i].op, x_of(g, pc_type_make(rows[i].dt, 1, D(2))), NULL, 0) == NULL);
    CHECK_FAIL(g, PC_ERR_TYPE, rows[i].msg);
    pc_graph_free(g);
  }
  pc_graph *g = pc_graph_new();
  pc_value *b = x_of(g, T(bool, 1, 2));
  CHECK(pc_bitwise_and(g, b, b) == NULL);
  CHECK_FAIL(g, PC_ERR_TYPE, "expected an int dtype");
  pc_graph_free(g);
}

/* arity is checked by pc_infer itself too (verify re-runs it on edited nodes) */
PC_TEST(infer_arity) {
  pc_graph *g = pc_graph_new();
  pc_value *x = x_of(g, T(f32, 1, 2));
  pc_node *n = pc_node_add(g, PC_OP_add, (pc_value *[]){x, x}, 2, NULL, 0);
  CHECK(n != NULL);
  n->n_in = 1;
  CHECK(pc_infer(g, n) != PC_OK);
  CHECK_FAIL(g, PC_ERR_ATTR, "add: takes 2 operands, got 1");
  pc_graph_free(g);
}

PC_TEST(infer_where) {
  pc_graph *g = pc_graph_new();
  pc_value *c = x_of(g, T(bool, 2, 2, 3)), *a = x_of(g, T(i64, 2, 2, 3));
  CHECK_TYPE(g, pc_where(g, c, a, a), "i64[2,3]");
  CHECK(pc_where(g, a, a, a) == NULL);
  CHECK_FAIL(g, PC_ERR_TYPE, "operand 0 (condition) has dtype i64, expected bool");
  pc_graph_free(g);
  g = pc_graph_new();
  CHECK(pc_where(g, x_of(g, T(bool, 1, 3)), x_of(g, T(f32, 1, 2)), x_of(g, T(f32, 1, 2))) == NULL);
  CHECK_FAIL(g, PC_ERR_SHAPE, "operand 0 has shape bool[3], expected bool[2]");
  pc_graph_free(g);
}

/* ---------------------------------------------------------------- type */

PC_TEST(infer_convert_bitcast) {
  pc_graph *g = pc_graph_new();
  pc_value *x = x_of(g, T(f32, 2, 2, 3));
  CHECK_TYPE(g, pc_convert(g, x, PC_f16), "f16[2,3]");
  pc_attr to_i8 = pc_a_dtype("dtype", PC_i8), to_f32 = pc_a_dtype("dtype", PC_f32), to_i64 = pc_a_dtype("dtype", PC_i64);
  pc_value *b = op1(g, PC_OP_bitcast, x, &to_i8, 1);
  CHECK_TYPE(g, b, "i8[2,3,4]");
  CHECK_TYPE(g, op1(g, PC_OP_bitcast, b, &to_f32, 1), "f32[2,3]");
  CHECK_TYPE(g, op1(g, PC_OP_bitcast, x, &to_f32, 1), "f32[2,3]");
  CHECK(op1(g, PC_OP_bitcast, x, &to_i64, 1) == NULL);
  CHECK_FAIL(g, PC_ERR_SHAPE, "bitcast f32[2,3] to i64 needs a last dim of 2");
  pc_graph_free(g);
  g = pc_graph_new();
  CHECK(op1(g, PC_OP_convert_element_type, x_of(g, T(f32, 1, 2)), NULL, 0) == NULL);
  CHECK_FAIL(g, PC_ERR_ATTR, "missing attribute dtype");
  pc_graph_free(g);
  g = pc_graph_new();
  pc_attr bad = pc_a_int("dtype", PC_f16);
  CHECK(op1(g, PC_OP_convert_element_type, x_of(g, T(f32, 1, 2)), &bad, 1) == NULL);
  CHECK_FAIL(g, PC_ERR_ATTR, "attribute dtype must be a dtype, got an int");
  pc_graph_free(g);
}

/* ---------------------------------------------------------------- shape and movement */

PC_TEST(infer_broadcast_in_dim) {
  pc_graph *g = pc_graph_new();
  int b = pc_sym_add(g, "batch", 1, 64);
  pc_value *x = x_of(g, T(f32, 2, 1, 3));
  CHECK_TYPE(g, pc_broadcast_in_dim(g, x, 3, D(5, 4, 3), D(0, 2)), "f32[5,4,3]");
  CHECK_TYPE(g, pc_broadcast_in_dim(g, x, 2, D(PC_SYM(b), 3), D(0, 1)), "f32[batch,3]");
  CHECK_TYPE(g, pc_full(g, PC_f32, 1.0, 2, D(2, 2)), "f32[2,2]");
  CHECK(pc_broadcast_in_dim(g, x, 2, D(2, 4), D(0, 1)) == NULL);
  CHECK_FAIL(g, PC_ERR_SHAPE, "operand f32[1,3] dim 1 (3) cannot broadcast to result dim 1 (4) of [2,4]");
  pc_graph_free(g);
  g = pc_graph_new();
  CHECK(pc_broadcast_in_dim(g, x_of(g, T(f32, 2, 1, 3)), 3, D(5, 4, 3), D(2, 0)) == NULL);
  CHECK_FAIL(g, PC_ERR_ATTR, "dims [2,0] must be increasing");
  pc_graph_free(g);
}

PC_TEST(infer_reshape) {
  pc_graph *g = pc_graph_new();
  int b = pc_sym_add(g, "batch", 1, 64);
  CHECK_TYPE(g, pc_reshape(g, x_of(g, T(f32, 2, 3, 4)), 3, D(2, 1, 6)), "f32[2,1,6]");
  pc_value *s = x_of(g, pc_type_make(PC_f32, 3, D(PC_SYM(b), 3, 4)));
  CHECK_TYPE(g, pc_reshape(g, s, 2, D(PC_SYM(b), 12)), "f32[batch,12]");
  CHECK_TYPE(g, pc_reshape(g, s, 3, D(12, 1, PC_SYM(b))), "f32[12,1,batch]");
  CHECK(pc_reshape(g, x_of(g, T(f32, 2, 3, 4)), 2, D(5, 2)) == NULL);
  CHECK_FAIL(g, PC_ERR_SHAPE, "cannot reshape f32[3,4] (12 elements) to [5,2] (10 elements)");
  pc_graph_free(g);
  g = pc_graph_new();
  b = pc_sym_add(g, "batch", 1, 64);
  CHECK(pc_reshape(g, x_of(g, pc_type_make(PC_f32, 2, D(PC_SYM(b), 4))), 1, D(8)) == NULL);
  CHECK_FAIL(g, PC_ERR_UNSUPPORTED, "symbolic dim batch is not kept");
  pc_graph_free(g);
  g = pc_graph_new();
  b = pc_sym_add(g, "batch", 1, 64);
  CHECK(pc_reshape(g, x_of(g, pc_type_make(PC_f32, 2, D(PC_SYM(b), 4))), 2, D(PC_SYM(b), 2)) == NULL);
  CHECK_FAIL(g, PC_ERR_SHAPE, "(4 elements) to [batch,2] (2 elements)");
  pc_graph_free(g);
}

PC_TEST(infer_transpose) {
  pc_graph *g = pc_graph_new();
  int b = pc_sym_add(g, "batch", 1, 64);
  CHECK_TYPE(g, pc_transpose(g, x_of(g, pc_type_make(PC_f32, 3, D(PC_SYM(b), 3, 4))), D(2, 0, 1)), "f32[4,batch,3]");
  CHECK(pc_transpose(g, x_of(g, T(f32, 2, 3, 4)), D(0, 0)) == NULL);
  CHECK_FAIL(g, PC_ERR_ATTR, "perm [0,0] is not a permutation of 2 dims");
  pc_graph_free(g);
}

PC_TEST(infer_slice) {
  pc_graph *g = pc_graph_new();
  int b = pc_sym_add(g, "batch", 1, 64);
  CHECK_TYPE(g, pc_slice(g, x_of(g, T(f32, 2, 10, 8)), D(1, 0), D(9, 8), D(2, 3)), "f32[4,3]");
  pc_value *s = x_of(g, pc_type_make(PC_f32, 2, D(PC_SYM(b), 8)));
  CHECK_TYPE(g, pc_slice(g, s, D(0, 2), D(PC_SYM(b), 4), NULL), "f32[batch,2]");
  CHECK(pc_slice(g, s, D(1, 2), D(PC_SYM(b), 4), NULL) == NULL);
  CHECK_FAIL(g, PC_ERR_UNSUPPORTED, "slicing symbolic dim 0 (batch) of f32[batch,8] is not supported");
  pc_graph_free(g);
  g = pc_graph_new();
  CHECK(pc_slice(g, x_of(g, T(f32, 2, 10, 8)), D(0, 0), D(11, 8), NULL) == NULL);
  CHECK_FAIL(g, PC_ERR_ATTR, "dim 0 of f32[10,8]: start 0, limit 11, stride 1 do not fit size 10");
  pc_graph_free(g);
  g = pc_graph_new();
  pc_attr a[2] = {pc_a_ints("start", D(0), 1), pc_a_ints("limit", D(1), 1)};
  CHECK(op1(g, PC_OP_slice, x_of(g, T(f32, 1, 4)), a, 2) == NULL);
  CHECK_FAIL(g, PC_ERR_ATTR, "missing attribute stride");
  pc_graph_free(g);
}

static pc_value *pad(pc_graph *g, pc_value *x, const int64_t *lo, const int64_t *hi, const int64_t *in) {
  int r = x->type.rank;
  pc_attr a[4] = {pc_a_ints("low", lo, r), pc_a_ints("high", hi, r), pc_a_ints("interior", in, r),
                  pc_a_float("value", 0.0)};
  return op1(g, PC_OP_pad, x, a, 4);
}

PC_TEST(infer_pad) {
  pc_graph *g = pc_graph_new();
  CHECK_TYPE(g, pad(g, x_of(g, T(f32, 2, 3, 4)), D(1, -1), D(2, 0), D(1, 0)), "f32[8,3]");
  CHECK(pad(g, x_of(g, T(f32, 1, 3)), D(0), D(0), D(-1)) == NULL);
  CHECK_FAIL(g, PC_ERR_ATTR, "interior [-1] must not be negative");
  pc_graph_free(g);
  g = pc_graph_new();
  CHECK(pad(g, x_of(g, T(f32, 1, 3)), D(-2), D(-2), D(0)) == NULL);
  CHECK_FAIL(g, PC_ERR_SHAPE, "leave a negative size");
  pc_graph_free(g);
}

PC_TEST(infer_concatenate) {
  pc_graph *g = pc_graph_new();
  int b = pc_sym_add(g, "batch", 1, 64);
  pc_value *xs[3] = {x_of(g, T(f32, 2, 2, 3)), x_of(g, T(f32, 2, 4, 3)), x_of(g, T(f32, 2, 1, 3))};
  CHECK_TYPE(g, pc_concatenate(g, xs, 3, 0), "f32[7,3]");
  pc_value *ys[2] = {x_of(g, pc_type_make(PC_i8, 2, D(PC_SYM(b), 2))), x_of(g, pc_type_make(PC_i8, 2, D(PC_SYM(b), 3)))};
  CHECK_TYPE(g, pc_concatenate(g, ys, 2, 1), "i8[batch,5]");
  CHECK(pc_concatenate(g, ys, 2, 0) == NULL);
  CHECK_FAIL(g, PC_ERR_SHAPE, "operand 1 has shape i8[batch,3], expected i8[batch,2] except on axis 0");
  pc_graph_free(g);
  g = pc_graph_new();
  b = pc_sym_add(g, "batch", 1, 64);
  pc_value *zs[2] = {x_of(g, pc_type_make(PC_i8, 1, D(PC_SYM(b)))), x_of(g, T(i8, 1, 2))};
  CHECK(pc_concatenate(g, zs, 2, 0) == NULL);
  CHECK_FAIL(g, PC_ERR_UNSUPPORTED, "concatenating symbolic dims along axis 0");
  pc_graph_free(g);
  g = pc_graph_new();
  pc_value *ws[2] = {x_of(g, T(f32, 1, 2)), x_of(g, T(f16, 1, 2))};
  CHECK(pc_concatenate(g, ws, 2, 1) == NULL);
  CHECK_FAIL(g, PC_ERR_ATTR, "axis 1 is out of range for rank 1");
  pc_graph_free(g);
}

PC_TEST(infer_rev_iota) {
  pc_graph *g = pc_graph_new();
  pc_attr r = pc_a_ints("dims", D(1, 0), 2);
  CHECK_TYPE(g, op1(g, PC_OP_rev, x_of(g, T(u8, 2, 2, 3)), &r, 1), "u8[2,3]");
  pc_attr io[3] = {pc_a_dtype("dtype", PC_i64), pc_a_ints("shape", D(2, 5), 2), pc_a_int("axis", 1)};
  CHECK_TYPE(g, pc_build(g, PC_OP_iota, NULL, 0, io, 3), "i64[2,5]");
  pc_attr rr = pc_a_ints("dims", D(1, 1), 2);
  CHECK(op1(g, PC_OP_rev, x_of(g, T(u8, 2, 2, 3)), &rr, 1) == NULL);
  CHECK_FAIL(g, PC_ERR_ATTR, "dims [1,1]: axis 1 appears twice");
  pc_graph_free(g);
  g = pc_graph_new();
  io[2] = pc_a_int("axis", 2);
  CHECK(pc_build(g, PC_OP_iota, NULL, 0, io, 3) == NULL);
  CHECK_FAIL(g, PC_ERR_ATTR, "axis 2 is out of range for rank 2");
  pc_graph_free(g);
}

PC_TEST(infer_gather_scatter) {
  pc_graph *g = pc_graph_new();
  pc_value *x = x_of(g, T(f32, 2, 5, 4)), *idx = x_of(g, T(i64, 2, 7, 3)), *upd = x_of(g, T(f32, 2, 7, 3));
  pc_attr ax = pc_a_int("axis", 0);
  CHECK_TYPE(g, op2(g, PC_OP_gather, x, idx, &ax, 1), "f32[7,3]");
  pc_attr sa[2] = {pc_a_int("axis", 0), pc_a_str("reduce", "add")};
  CHECK_TYPE(g, pc_build(g, PC_OP_scatter, (pc_value *[]){x, idx, upd}, 3, sa, 2), "f32[5,4]");
  CHECK(op2(g, PC_OP_gather, x, upd, &ax, 1) == NULL);
  CHECK_FAIL(g, PC_ERR_TYPE, "operand 1 (indices) has dtype f32, expected an int dtype");
  pc_graph_free(g);
  g = pc_graph_new();
  x = x_of(g, T(f32, 2, 5, 4)), idx = x_of(g, T(i32, 2, 2, 6));
  CHECK(op2(g, PC_OP_gather, x, idx, &ax, 1) == NULL);
  CHECK_FAIL(g, PC_ERR_SHAPE, "indices i32[2,6] exceed f32[5,4] on dim 1");
  pc_graph_free(g);
  g = pc_graph_new();
  x = x_of(g, T(f32, 2, 5, 4)), idx = x_of(g, T(i64, 2, 7, 3)), upd = x_of(g, T(f32, 2, 7, 3));
  sa[1] = pc_a_str("reduce", "avg");
  CHECK(pc_build(g, PC_OP_scatter, (pc_value *[]){x, idx, upd}, 3, sa, 2) == NULL);
  CHECK_FAIL(g, PC_ERR_ATTR, "attribute reduce = \"avg\" is not one of \"none\", \"add\"");
  pc_graph_free(g);
}

/* ---------------------------------------------------------------- reductions */

PC_TEST(infer_reductions) {
  pc_graph *g = pc_graph_new();
  int b = pc_sym_add(g, "batch", 1, 64);
  CHECK_TYPE(g, pc_reduce(g, PC_OP_reduce_sum, x_of(g, T(f32, 3, 2, 3, 4)), 2, D(2, 0)), "f32[3]");
  pc_value *s = x_of(g, pc_type_make(PC_i32, 2, D(PC_SYM(b), 3)));
  CHECK_TYPE(g, pc_reduce(g, PC_OP_reduce_max, s, 1, D(1)), "i32[batch]");
  pc_attr am[2] = {pc_a_int("axis", 1), pc_a_int("last", 0)};
  CHECK_TYPE(g, op1(g, PC_OP_argmax, s, am, 2), "i64[batch]");
  pc_attr cs[3] = {pc_a_int("axis", 0), pc_a_int("exclusive", 1), pc_a_int("reverse", 0)};
  CHECK_TYPE(g, op1(g, PC_OP_cumsum, s, cs, 3), "i32[batch,3]");
  CHECK(pc_reduce(g, PC_OP_reduce_min, s, 2, D(1, 1)) == NULL);
  CHECK_FAIL(g, PC_ERR_ATTR, "axes [1,1]: axis 1 appears twice");
  pc_graph_free(g);
  g = pc_graph_new();
  CHECK(pc_reduce(g, PC_OP_reduce_prod, x_of(g, T(f32, 1, 3)), 1, D(1)) == NULL);
  CHECK_FAIL(g, PC_ERR_ATTR, "axes [1]: axis 1 is out of range for rank 1");
  pc_graph_free(g);
  g = pc_graph_new();
  CHECK(op1(g, PC_OP_argmin, x_of(g, T(f32, 1, 3)), am, 1) == NULL);
  CHECK_FAIL(g, PC_ERR_ATTR, "axis 1 is out of range for rank 1");
  pc_graph_free(g);
  g = pc_graph_new();
  am[0] = pc_a_int("axis", 0);
  CHECK(op1(g, PC_OP_argmin, x_of(g, T(f32, 1, 3)), am, 1) == NULL);
  CHECK_FAIL(g, PC_ERR_ATTR, "missing attribute last");
  pc_graph_free(g);
  g = pc_graph_new();
  cs[2] = pc_a_int("reverse", 2);
  CHECK(op1(g, PC_OP_cumsum, x_of(g, T(f32, 1, 3)), cs, 3) == NULL);
  CHECK_FAIL(g, PC_ERR_ATTR, "attribute reverse = 2 is out of range [0, 1]");
  pc_graph_free(g);
}

/* ---------------------------------------------------------------- contractions */

PC_TEST(infer_dot_general) {
  pc_graph *g = pc_graph_new();
  int b = pc_sym_add(g, "batch", 1, 64);
  pc_value *x = x_of(g, pc_type_make(PC_f32, 3, D(PC_SYM(b), 5, 7))), *w = x_of(g, pc_type_make(PC_f32, 3, D(PC_SYM(b), 7, 2)));
  CHECK_TYPE(g, pc_dot_general(g, x, w, 1, D(2), D(1), 1, D(0), D(0)), "f32[batch,5,2]");
  pc_value *m = x_of(g, T(f32, 2, 7, 3));
  CHECK_TYPE(g, pc_dot_general(g, x, m, 1, D(2), D(0), 0, NULL, NULL), "f32[batch,5,3]");
  CHECK(pc_dot_general(g, x, m, 1, D(1), D(0), 0, NULL, NULL) == NULL);
  CHECK_FAIL(g, PC_ERR_SHAPE, "contracting dim pair 0: lhs f32[batch,5,7] dim 1 is 5, rhs f32[7,3] dim 0 is 7");
  pc_graph_free(g);
  g = pc_graph_new();
  x = x_of(g, T(f32, 3, 2, 5, 7)), w = x_of(g, T(f32, 3, 2, 7, 2));
  CHECK(pc_dot_general(g, x, w, 1, D(0), D(0), 1, D(0), D(0)) == NULL);
  CHECK_FAIL(g, PC_ERR_ATTR, "lhs_batch [0] and lhs_contract [0] share dim 0");
  pc_graph_free(g);
  g = pc_graph_new();
  x = x_of(g, T(f32, 2, 2, 5)), w = x_of(g, T(f16, 2, 5, 2));
  CHECK(pc_dot_general(g, x, w, 1, D(1), D(0), 0, NULL, NULL) == NULL);
  CHECK_FAIL(g, PC_ERR_TYPE, "operand 1 (rhs) has dtype f16, expected f32");
  pc_graph_free(g);
}

static pc_value *conv(pc_graph *g, pc_value *x, pc_value *w, int ns, const int64_t *stride, const int64_t *lo,
                      const int64_t *hi, const int64_t *dil, const int64_t *ldil, int64_t groups) {
  pc_attr a[6] = {pc_a_ints("stride", stride, ns), pc_a_ints("pad_lo", lo, ns), pc_a_ints("pad_hi", hi, ns),
                  pc_a_ints("dilation", dil, ns), pc_a_ints("lhs_dilation", ldil, ns), pc_a_int("groups", groups)};
  return op2(g, PC_OP_conv, x, w, a, 6);
}

PC_TEST(infer_conv) {
  pc_graph *g = pc_graph_new();
  int b = pc_sym_add(g, "batch", 1, 64);
  pc_value *x = x_of(g, pc_type_make(PC_f32, 4, D(PC_SYM(b), 3, 32, 32))), *w = x_of(g, T(f32, 4, 8, 3, 3, 3));
  /* (32 + 1 + 1 - 3) / 2 + 1 = 16 */
  CHECK_TYPE(g, conv(g, x, w, 2, D(2, 2), D(1, 1), D(1, 1), D(1, 1), D(1, 1), 1), "f32[batch,8,16,16]");
  /* dilation 2: span 5, (32 - 5) / 1 + 1 = 28 */
  CHECK_TYPE(g, conv(g, x, w, 2, D(1, 1), D(0, 0), D(0, 0), D(2, 2), D(1, 1), 1), "f32[batch,8,28,28]");
  /* grouped: 4 channels in 2 groups, 6 outputs */
  pc_value *xg = x_of(g, T(f32, 4, 1, 4, 5, 5)), *wg = x_of(g, T(f32, 4, 6, 2, 3, 3));
  CHECK_TYPE(g, conv(g, xg, wg, 2, D(1, 1), D(0, 0), D(0, 0), D(1, 1), D(1, 1), 2), "f32[1,6,3,3]");
  /* transposed-conv form: lhs_dilation 2 on 4 -> 7, pads 2+2 -> 11, kernel 3 -> 9 */
  pc_value *x1 = x_of(g, T(f32, 3, 1, 1, 4)), *w1 = x_of(g, T(f32, 3, 1, 1, 3));
  CHECK_TYPE(g, conv(g, x1, w1, 1, D(1), D(2), D(2), D(1), D(2), 1), "f32[1,1,9]");
  CHECK(conv(g, xg, wg, 2, D(1, 1), D(0, 0), D(0, 0), D(1, 1), D(1, 1), 3) == NULL);
  CHECK_FAIL(g, PC_ERR_ATTR, "groups 3 does not divide 4 input and 6 output channels");
  pc_graph_free(g);

  g = pc_graph_new();
  x = x_of(g, T(f32, 4, 1, 3, 8, 8)), w = x_of(g, T(f32, 3, 8, 3, 3));
  CHECK(conv(g, x, w, 2, D(1, 1), D(0, 0), D(0, 0), D(1, 1), D(1, 1), 1) == NULL);
  CHECK_FAIL(g, PC_ERR_SHAPE, "kernel has 3 dims, input has 4");
  pc_graph_free(g);

  g = pc_graph_new();
  x = x_of(g, T(f32, 4, 1, 3, 8, 8)), w = x_of(g, T(f32, 4, 8, 3, 3, 3));
  CHECK(conv(g, x, w, 1, D(1), D(0), D(0), D(1), D(1), 1) == NULL);
  CHECK_FAIL(g, PC_ERR_ATTR, "attribute stride has 1 entries, expected 2");
  pc_graph_free(g);

  g = pc_graph_new();
  x = x_of(g, T(f32, 4, 1, 4, 8, 8)), w = x_of(g, T(f32, 4, 8, 3, 3, 3));
  CHECK(conv(g, x, w, 2, D(1, 1), D(0, 0), D(0, 0), D(1, 1), D(1, 1), 1) == NULL);
  CHECK_FAIL(g, PC_ERR_SHAPE, "kernel f32[8,3,3,3] has 3 input channels, input f32[1,4,8,8] has 4");
  pc_graph_free(g);

  g = pc_graph_new();
  x = x_of(g, T(f32, 3, 1, 1, 2)), w = x_of(g, T(f32, 3, 1, 1, 3));
  CHECK(conv(g, x, w, 1, D(1), D(0), D(0), D(1), D(1), 1) == NULL);
  CHECK_FAIL(g, PC_ERR_SHAPE, "padded input size 2 is smaller than the dilated kernel 3");
  pc_graph_free(g);

  g = pc_graph_new();
  b = pc_sym_add(g, "h", 1, 64);
  x = x_of(g, pc_type_make(PC_f32, 3, D(1, 1, PC_SYM(b)))), w = x_of(g, T(f32, 3, 1, 1, 3));
  CHECK(conv(g, x, w, 1, D(1), D(0), D(0), D(1), D(1), 1) == NULL);
  CHECK_FAIL(g, PC_ERR_UNSUPPORTED, "convolving over symbolic dim 2 (h) of f32[1,1,h]");
  pc_graph_free(g);
}

/* ---------------------------------------------------------------- others kept whole */

static pc_value *fft(pc_graph *g, pc_value *x, const char *type, int64_t len) {
  pc_attr a[2] = {pc_a_str("type", type), pc_a_int("length", len)};
  return op1(g, PC_OP_fft, x, a, 2);
}

PC_TEST(infer_fft) {
  pc_graph *g = pc_graph_new();
  pc_value *r = x_of(g, T(f32, 2, 4, 8));
  pc_value *c = fft(g, r, "rfft", 8);
  CHECK_TYPE(g, c, "c64[4,5]");
  CHECK_TYPE(g, fft(g, c, "irfft", 8), "f32[4,8]");
  CHECK_TYPE(g, fft(g, c, "fft", 16), "c64[4,16]");
  CHECK_TYPE(g, fft(g, c, "ifft", 5), "c64[4,5]");
  CHECK(fft(g, c, "rfft", 8) == NULL);
  CHECK_FAIL(g, PC_ERR_TYPE, "rfft takes f32, got c64[4,5]");
  pc_graph_free(g);
  g = pc_graph_new();
  CHECK(fft(g, x_of(g, T(f32, 1, 8)), "dct", 8) == NULL);
  CHECK_FAIL(g, PC_ERR_ATTR, "attribute type = \"dct\" is not one of");
  pc_graph_free(g);
  g = pc_graph_new();
  CHECK(fft(g, x_of(g, T(i32, 1, 8)), "rfft", 8) == NULL);
  CHECK_FAIL(g, PC_ERR_TYPE, "operand 0 has dtype i32, expected a float dtype");
  pc_graph_free(g);
}

PC_TEST(infer_sort_topk) {
  pc_graph *g = pc_graph_new();
  int b = pc_sym_add(g, "n", 4, 64);
  pc_value *x = x_of(g, pc_type_make(PC_f32, 2, D(3, PC_SYM(b))));
  pc_attr sa[2] = {pc_a_int("axis", 1), pc_a_int("descending", 1)};
  pc_node *s = pc_node_add(g, PC_OP_sort, &x, 1, sa, 2);
  CHECK(s != NULL && s->n_out == 2);
  if (s) {
    CHECK_TYPE(g, s->out[0], "f32[3,n]");
    CHECK_TYPE(g, s->out[1], "i64[3,n]");
  }
  pc_attr ta[3] = {pc_a_int("k", 2), pc_a_int("axis", 1), pc_a_int("largest", 1)};
  pc_node *t = pc_node_add(g, PC_OP_topk, &x, 1, ta, 3);
  CHECK(t != NULL);
  if (t) {
    CHECK_TYPE(g, t->out[0], "f32[3,2]");
    CHECK_TYPE(g, t->out[1], "i64[3,2]");
  }
  ta[0] = pc_a_int("k", 5); /* the symbol may be as small as 4 */
  CHECK(pc_node_add(g, PC_OP_topk, &x, 1, ta, 3) == NULL);
  CHECK_FAIL(g, PC_ERR_UNSUPPORTED, "k 5 may exceed symbolic axis n of f32[3,n] (at least 4)");
  pc_graph_free(g);
  g = pc_graph_new();
  x = x_of(g, T(f32, 2, 3, 4));
  ta[1] = pc_a_int("axis", 0);
  CHECK(pc_node_add(g, PC_OP_topk, &x, 1, ta, 3) == NULL);
  CHECK_FAIL(g, PC_ERR_ATTR, "k 5 exceeds axis 0 of f32[3,4]");
  pc_graph_free(g);
}

PC_TEST(infer_random) {
  pc_graph *g = pc_graph_new();
  pc_attr a[6] = {pc_a_dtype("dtype", PC_f16), pc_a_ints("shape", D(2, 3), 2), pc_a_str("dist", "normal"),
                  pc_a_float("a", 0), pc_a_float("b", 1), pc_a_int("seed", 42)};
  CHECK_TYPE(g, pc_build(g, PC_OP_random, NULL, 0, a, 6), "f16[2,3]");
  a[2] = pc_a_str("dist", "cauchy");
  CHECK(pc_build(g, PC_OP_random, NULL, 0, a, 6) == NULL);
  CHECK_FAIL(g, PC_ERR_ATTR, "attribute dist = \"cauchy\" is not one of \"uniform\", \"normal\"");
  pc_graph_free(g);
  g = pc_graph_new();
  a[2] = pc_a_str("dist", "uniform");
  a[3] = pc_a_float("a", 2);
  CHECK(pc_build(g, PC_OP_random, NULL, 0, a, 6) == NULL);
  CHECK_FAIL(g, PC_ERR_ATTR, "uniform a = 2 exceeds b = 1");
  pc_graph_free(g);
}

PC_TEST(infer_nonzero) {
  pc_graph *g = pc_graph_new();
  pc_value *x = x_of(g, T(f32, 2, 3, 4));
  pc_value *e = pc_exp(g, x);
  pc_value *nz = pc_build(g, PC_OP_nonzero, &e, 1, NULL, 0);
  CHECK_TYPE(g, nz, "i64[2,nonzero_1]");
  int s = pc_sym_find(g, "nonzero_1");
  CHECK(s >= 0);
  if (s >= 0) {
    CHECK_INT(g->syms[s].lo, 0);
    CHECK_INT(g->syms[s].hi, 12);
  }
  /* the count flows on like any symbol */
  pc_value *y = pc_convert(g, nz, PC_f32);
  CHECK_TYPE(g, pc_reduce(g, PC_OP_reduce_sum, y, 1, D(0)), "f32[nonzero_1]");
  pc_output_add(g, y);
  int n_syms = g->n_syms;
  CHECK_INT(pc_verify(g), PC_OK);
  CHECK_INT(g->n_syms, n_syms); /* re-inference keeps the symbol */
  /* a second nonzero gets its own symbol */
  CHECK_TYPE(g, pc_build(g, PC_OP_nonzero, &x, 1, NULL, 0), "i64[2,nonzero_4]");
  pc_graph_free(g);
}

PC_TEST(infer_constant) {
  pc_graph *g = pc_graph_new();
  float v[6] = {1, 2, 3, 4, 5, 6};
  pc_value *c = pc_const(g, T(f32, 2, 2, 3), v);
  CHECK_TYPE(g, c, "f32[2,3]");
  CHECK_TYPE(g, pc_const_keyed(g, T(bf16, 1, 7), "w0"), "bf16[7]");
  CHECK_TYPE(g, pc_scalar(g, PC_i32, 3), "i32[]");
  CHECK_INT(pc_verify(g), PC_OK);
  c->producer->nbytes = 20;
  CHECK_INT(pc_verify(g), PC_ERR_SHAPE);
  CHECK_CONTAINS(pc_error(g), "node 0: constant: constant f32[2,3] holds 20 bytes, expected 24");
  pc_graph_free(g);
}

/* ---------------------------------------------------------------- verifier */

static pc_graph *small_graph(pc_value **x, pc_value **y, pc_value **z) {
  pc_graph *g = pc_graph_new();
  *x = x_of(g, T(f32, 2, 2, 3));
  *y = pc_exp(g, *x);
  *z = pc_reduce(g, PC_OP_reduce_sum, *y, 1, D(1));
  pc_output_add(g, *z);
  return g;
}

PC_TEST(verify_ok) {
  pc_value *x, *y, *z;
  pc_graph *g = small_graph(&x, &y, &z);
  CHECK_INT(pc_verify(g), PC_OK);
  CHECK_STR(pc_error(g), "");
  pc_graph_free(g);
}

PC_TEST(verify_type_drift) {
  pc_value *x, *y, *z;
  pc_graph *g = small_graph(&x, &y, &z);
  z->type.dims[0] = 3;
  CHECK_INT(pc_verify(g), PC_ERR_INTERNAL);
  CHECK_CONTAINS(pc_error(g), "reduce_sum: node 1: output 0 has type f32[3] but its operands give f32[2]");
  CHECK_INT(z->type.dims[0], 3); /* the verifier restores what it found */
  pc_graph_free(g);
}

PC_TEST(verify_reinfer_error_names_node) {
  pc_value *x, *y, *z;
  pc_graph *g = small_graph(&x, &y, &z);
  y->type.dtype = PC_i32; /* exp of i32 was never valid */
  y->producer->in[0] = y; /* and uses itself */
  CHECK(pc_verify(g) != PC_OK);
  CHECK_CONTAINS(pc_error(g), "node 0: operand 0 (value 1) is not defined before it");
  pc_graph_free(g);
  g = small_graph(&x, &y, &z);
  x->type.dtype = PC_i32;
  CHECK_INT(pc_verify(g), PC_ERR_TYPE);
  CHECK_CONTAINS(pc_error(g), "node 0: exp: operand 0 has dtype i32, expected a float dtype");
  pc_graph_free(g);
}

PC_TEST(verify_order_and_outputs) {
  pc_value *x, *y, *z;
  pc_graph *g = small_graph(&x, &y, &z);
  pc_node *a = g->nodes[0];
  g->nodes[0] = g->nodes[1], g->nodes[1] = a;
  g->nodes[0]->id = 0, g->nodes[1]->id = 1;
  CHECK_INT(pc_verify(g), PC_ERR_INTERNAL);
  CHECK_CONTAINS(pc_error(g), "node 0: operand 0 (value 1) is not defined before it");
  pc_graph_free(g);

  g = small_graph(&x, &y, &z);
  z->producer->dead = 1;
  CHECK_INT(pc_verify(g), PC_ERR_INTERNAL);
  CHECK_CONTAINS(pc_error(g), "graph output 0 (value 2) is produced by no live node");
  pc_graph_free(g);

  g = small_graph(&x, &y, &z);
  g->values[1]->id = 5;
  CHECK_INT(pc_verify(g), PC_ERR_INTERNAL);
  CHECK_CONTAINS(pc_error(g), "value in slot 1 has id 5");
  pc_graph_free(g);

  g = small_graph(&x, &y, &z);
  g->nodes[1]->id = 7;
  CHECK_INT(pc_verify(g), PC_ERR_INTERNAL);
  CHECK_CONTAINS(pc_error(g), "node 7: sits in slot 1");
  pc_graph_free(g);
}

PC_TEST(verify_after_compact) {
  pc_value *x, *y, *z;
  pc_graph *g = small_graph(&x, &y, &z);
  pc_value *dead = pc_neg(g, x);
  pc_value *nz = pc_build(g, PC_OP_nonzero, &x, 1, NULL, 0);
  pc_output_add(g, nz);
  dead->producer->dead = 1;
  pc_graph_compact(g);
  CHECK_INT(g->n_nodes, 3);
  CHECK_INT(pc_verify(g), PC_OK);
  CHECK_TYPE(g, nz, "i64[2,nonzero_3]");
  /* the next node is number 3 again, but nonzero_3 already counts nz's elements */
  CHECK_TYPE(g, pc_build(g, PC_OP_nonzero, &x, 1, NULL, 0), "i64[2,nonzero_3_1]");
  CHECK_INT(pc_verify(g), PC_OK);
  pc_graph_free(g);
}

/* printed text declares the count symbol; parsing it back infers the same one */
PC_TEST(verify_nonzero_text_round_trip) {
  pc_graph *g = pc_graph_new();
  pc_value *x = x_of(g, T(f32, 2, 3, 4));
  pc_value_set_name(g, x, "x");
  pc_value *nz = pc_build(g, PC_OP_nonzero, &x, 1, NULL, 0);
  pc_output_add(g, nz);
  char *text = pc_graph_to_string(g);
  CHECK(text != NULL);
  if (text) {
    pc_graph *h = pc_graph_parse(text, strlen(text), "round_trip", NULL);
    CHECK_MSG(h && h->status == PC_OK, "%s\n%s", pc_error(h), text);
    if (h && h->status == PC_OK) {
      CHECK_INT(pc_verify(h), PC_OK);
      CHECK_TYPE(h, h->outputs[0], "i64[2,nonzero_0]");
    }
    pc_graph_free(h);
  }
  free(text);
  pc_graph_free(g);
}
