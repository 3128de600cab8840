/* frontend/onnx_basic.c: decompositions of the basic ONNX ops (math, logic, shapes, reductions, matmul) into prims. */
#include "frontend/onnx_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define G (c->g)
#define X0 ox_in_req(c, 0)

/* ---------------------------------------------------------------- small builders */

static pc_value *mul_s(ox_ctx *c, pc_value *x, double s) { return x ? pc_mul(G, x, ox_like(c, s, x)) : NULL; }
static pc_value *add_s(ox_ctx *c, pc_value *x, double s) { return x ? pc_add(G, x, ox_like(c, s, x)) : NULL; }
static pc_value *rsub_s(ox_ctx *c, double s, pc_value *x) { return x ? pc_sub(G, ox_like(c, s, x), x) : NULL; }

static pc_value *iota(ox_ctx *c, pc_dtype dt, int rank, const int64_t *shape, int axis) {
  pc_attr a[3] = {pc_a_dtype("dtype", dt), pc_a_ints("shape", shape, rank), pc_a_int("axis", axis)};
  return pc_build(G, PC_OP_iota, NULL, 0, a, 3);
}

/* normalizes negative indices of idx into [0, n) by adding n where idx < 0 */
static pc_value *wrap_index(ox_ctx *c, pc_value *idx, pc_value *n_like) {
  if (!idx) return NULL;
  pc_value *zero = ox_like(c, 0, idx);
  return pc_where(G, pc_lt(G, idx, zero), pc_add(G, idx, n_like), idx);
}

static pc_value *wrap_index_n(ox_ctx *c, pc_value *idx, int64_t n) {
  return idx ? wrap_index(c, idx, ox_like(c, (double)n, idx)) : NULL;
}

static pc_value *to_i64(ox_ctx *c, pc_value *x) { return x ? pc_convert(G, x, PC_i64) : NULL; }

/* reads the axes of a reduction-like op: an attribute before `input_from`, input 1 from then on */
static int read_axes(ox_ctx *c, int input_from, int64_t *axes) {
  if (c->opset >= input_from) return ox_const_ints(c, 1, axes, PC_MAX_RANK);
  return ox_attr_ints(c, "axes", axes, PC_MAX_RANK);
}

static int64_t shape_numel(int n, const int64_t *d) {
  int64_t p = 1;
  for (int i = 0; i < n; i++) p *= d[i];
  return p;
}

static int check_static(ox_ctx *c, const pc_value *x) {
  if (!x) return 0;
  if (pc_type_is_static(&x->type)) return 1;
  ox_fail(c, PC_ERR_UNSUPPORTED, "needs a static shape, the input has a symbolic dim");
  return 0;
}

/* ---------------------------------------------------------------- elementwise unary */

#define OX_UNARY(Name, prim) \
  pc_status ox_op_##Name(ox_ctx *c) { return ox_out(c, 0, pc_##prim(G, X0)); }
OX_UNARY(Neg, neg)
OX_UNARY(Abs, abs)
OX_UNARY(Exp, exp)
OX_UNARY(Log, log)
OX_UNARY(Sqrt, sqrt)
OX_UNARY(Reciprocal, reciprocal)
OX_UNARY(Sin, sin)
OX_UNARY(Cos, cos)
OX_UNARY(Tan, tan)
OX_UNARY(Tanh, tanh)
OX_UNARY(Erf, erf)
OX_UNARY(Sigmoid, sigmoid)
OX_UNARY(Floor, floor)
OX_UNARY(Ceil, ceil)
OX_UNARY(Round, round)
OX_UNARY(Sign, sign)
OX_UNARY(IsNaN, isnan)
OX_UNARY(Not, not)
OX_UNARY(BitwiseNot, not)
#undef OX_UNARY

/* sqrt(1 - x^2), shared by Asin and Acos */
static pc_value *cofactor(ox_ctx *c, pc_value *x) { return x ? pc_sqrt(G, rsub_s(c, 1, pc_mul(G, x, x))) : NULL; }

pc_status ox_op_Asin(ox_ctx *c) {
  pc_value *x = X0;
  return ox_out(c, 0, pc_atan2(G, x, cofactor(c, x)));
}
pc_status ox_op_Acos(ox_ctx *c) {
  pc_value *x = X0;
  return ox_out(c, 0, pc_atan2(G, cofactor(c, x), x));
}
pc_status ox_op_Atan(ox_ctx *c) {
  pc_value *x = X0;
  return ox_out(c, 0, pc_atan2(G, x, ox_like(c, 1, x)));
}
pc_status ox_op_Sinh(ox_ctx *c) {
  pc_value *x = X0;
  return ox_out(c, 0, mul_s(c, pc_sub(G, pc_exp(G, x), pc_exp(G, pc_neg(G, x))), 0.5));
}
pc_status ox_op_Cosh(ox_ctx *c) {
  pc_value *x = X0;
  return ox_out(c, 0, mul_s(c, pc_add(G, pc_exp(G, x), pc_exp(G, pc_neg(G, x))), 0.5));
}
pc_status ox_op_Asinh(ox_ctx *c) {
  pc_value *x = X0;
  return ox_out(c, 0, pc_log(G, pc_add(G, x, pc_sqrt(G, add_s(c, pc_mul(G, x, x), 1)))));
}
pc_status ox_op_Acosh(ox_ctx *c) {
  pc_value *x = X0;
  return ox_out(c, 0, pc_log(G, pc_add(G, x, pc_sqrt(G, add_s(c, pc_mul(G, x, x), -1)))));
}
pc_status ox_op_Atanh(ox_ctx *c) {
  pc_value *x = X0;
  return ox_out(c, 0, mul_s(c, pc_log(G, pc_div(G, add_s(c, x, 1), rsub_s(c, 1, x))), 0.5));
}

static pc_value *relu(ox_ctx *c, pc_value *x) { return x ? pc_max(G, x, ox_like(c, 0, x)) : NULL; }
static pc_value *clamp_s(ox_ctx *c, pc_value *x, double lo, double hi) {
  return x ? pc_clamp(G, x, ox_like(c, lo, x), ox_like(c, hi, x)) : NULL;
}
/* where(x < 0, neg_branch, x) */
static pc_value *where_neg(ox_ctx *c, pc_value *x, pc_value *neg_branch) {
  return x ? pc_where(G, pc_lt(G, x, ox_like(c, 0, x)), neg_branch, x) : NULL;
}

pc_status ox_op_Relu(ox_ctx *c) { return ox_out(c, 0, relu(c, X0)); }
pc_status ox_op_HardSigmoid(ox_ctx *c) {
  double a = ox_attr_float(c, "alpha", 0.2), b = ox_attr_float(c, "beta", 0.5);
  return ox_out(c, 0, clamp_s(c, add_s(c, mul_s(c, X0, a), b), 0, 1));
}
pc_status ox_op_HardSwish(ox_ctx *c) {
  pc_value *x = X0;
  return ox_out(c, 0, pc_mul(G, x, clamp_s(c, add_s(c, mul_s(c, x, 1.0 / 6), 0.5), 0, 1)));
}
pc_status ox_op_LeakyRelu(ox_ctx *c) {
  pc_value *x = X0;
  return ox_out(c, 0, where_neg(c, x, mul_s(c, x, ox_attr_float(c, "alpha", 0.01))));
}
pc_status ox_op_PRelu(ox_ctx *c) {
  pc_value *x = X0, *slope = ox_in_req(c, 1);
  pc_value *ax = ox_binary(c, PC_OP_mul, x, slope);
  if (ax && x && !pc_type_equal(&ax->type, &x->type))
    return ox_fail(c, PC_ERR_SHAPE, "slope does not broadcast to the input's shape");
  return ox_out(c, 0, where_neg(c, x, ax));
}
pc_status ox_op_Elu(ox_ctx *c) {
  pc_value *x = X0;
  return ox_out(c, 0, where_neg(c, x, mul_s(c, pc_expm1(G, x), ox_attr_float(c, "alpha", 1.0))));
}
pc_status ox_op_Selu(ox_ctx *c) {
  pc_value *x = X0;
  double a = ox_attr_float(c, "alpha", 1.67326319217681884765625), gm = ox_attr_float(c, "gamma", 1.05070102214813232421875);
  pc_value *neg = mul_s(c, pc_expm1(G, x), a);
  pc_value *y = x ? pc_where(G, pc_le(G, x, ox_like(c, 0, x)), neg, x) : NULL;
  return ox_out(c, 0, mul_s(c, y, gm));
}
pc_status ox_op_Celu(ox_ctx *c) {
  pc_value *x = X0;
  double a = ox_attr_float(c, "alpha", 1.0);
  pc_value *neg = mul_s(c, pc_expm1(G, mul_s(c, x, 1.0 / a)), a);
  pc_value *y = neg ? pc_add(G, relu(c, x), pc_min(G, ox_like(c, 0, x), neg)) : NULL;
  return ox_out(c, 0, y);
}
pc_status ox_op_Gelu(ox_ctx *c) {
  pc_value *x = X0;
  const char *approx = ox_attr_str(c, "approximate", "none");
  if (strcmp(approx, "tanh") != 0 && strcmp(approx, "none") != 0)
    return ox_fail(c, PC_ERR_ATTR, "approximate='%s' is not 'none' or 'tanh'", approx);
  return ox_out(c, 0, fc_gelu(G, x, strcmp(approx, "tanh") == 0));
}
/* log(1 + exp(x)) without overflow: max(x, 0) + log1p(exp(-|x|)) */
static pc_value *softplus(ox_ctx *c, pc_value *x) {
  return x ? pc_add(G, relu(c, x), pc_log1p(G, pc_exp(G, pc_neg(G, pc_abs(G, x))))) : NULL;
}
pc_status ox_op_Softplus(ox_ctx *c) { return ox_out(c, 0, softplus(c, X0)); }
pc_status ox_op_Mish(ox_ctx *c) {
  pc_value *x = X0;
  return ox_out(c, 0, x ? pc_mul(G, x, pc_tanh(G, softplus(c, x))) : NULL);
}
pc_status ox_op_Softsign(ox_ctx *c) {
  pc_value *x = X0;
  return ox_out(c, 0, x ? pc_div(G, x, add_s(c, pc_abs(G, x), 1)) : NULL);
}
pc_status ox_op_ThresholdedRelu(ox_ctx *c) {
  pc_value *x = X0;
  double a = ox_attr_float(c, "alpha", 1.0);
  return ox_out(c, 0, x ? pc_where(G, pc_gt(G, x, ox_like(c, a, x)), x, ox_like(c, 0, x)) : NULL);
}
pc_status ox_op_Shrink(ox_ctx *c) {
  pc_value *x = X0;
  double l = ox_attr_float(c, "lambd", 0.5), b = ox_attr_float(c, "bias", 0.0);
  if (!x) return ox_status(c);
  pc_value *hi = pc_where(G, pc_gt(G, x, ox_like(c, l, x)), add_s(c, x, -b), ox_like(c, 0, x));
  return ox_out(c, 0, pc_where(G, pc_lt(G, x, ox_like(c, -l, x)), add_s(c, x, b), hi));
}
pc_status ox_op_IsInf(ox_ctx *c) {
  pc_value *x = X0;
  int pos = ox_attr_flag(c, "detect_positive", 1), neg = ox_attr_flag(c, "detect_negative", 1);
  pc_value *inf = pc_isinf(G, x);
  if (!inf || (pos && neg)) return ox_out(c, 0, inf);
  if (!pos && !neg) return ox_out(c, 0, ox_like(c, 0, inf));
  pc_value *side = pos ? pc_gt(G, x, ox_like(c, 0, x)) : pc_lt(G, x, ox_like(c, 0, x));
  return ox_out(c, 0, pc_and(G, inf, side));
}

/* ---------------------------------------------------------------- elementwise binary */

#define OX_BINARY(Name, prim) \
  pc_status ox_op_##Name(ox_ctx *c) { return ox_out(c, 0, ox_binary(c, PC_OP_##prim, X0, ox_in_req(c, 1))); }
OX_BINARY(Add, add)
OX_BINARY(Sub, sub)
OX_BINARY(Mul, mul)
OX_BINARY(Div, div)
OX_BINARY(Equal, eq)
OX_BINARY(Less, lt)
OX_BINARY(LessOrEqual, le)
OX_BINARY(Greater, gt)
OX_BINARY(GreaterOrEqual, ge)
OX_BINARY(And, and)
OX_BINARY(Or, or)
OX_BINARY(Xor, xor)
OX_BINARY(BitwiseAnd, bitwise_and)
OX_BINARY(BitwiseOr, bitwise_or)
OX_BINARY(BitwiseXor, bitwise_xor)
#undef OX_BINARY

pc_status ox_op_Pow(ox_ctx *c) {
  pc_value *x = X0, *y = ox_in_req(c, 1);
  /* Pow lets the exponent have its own type; the prim wants one type */
  if (x && y) y = pc_convert(G, y, x->type.dtype);
  return ox_out(c, 0, ox_binary(c, PC_OP_pow, x, y));
}

pc_status ox_op_Mod(ox_ctx *c) {
  pc_value *a = X0, *b = ox_in_req(c, 1);
  if (!a || !b || !ox_broadcast2(c, &a, &b)) return ox_status(c);
  pc_value *r = ox_binary(c, PC_OP_rem, a, b);
  if (ox_attr_int(c, "fmod", 0)) return ox_out(c, 0, r);
  /* numpy-style modulo: a non-zero result takes the divisor's sign */
  pc_value *zero = ox_like(c, 0, r);
  pc_value *fix = pc_and(G, pc_ne(G, r, zero), pc_ne(G, pc_lt(G, r, zero), pc_lt(G, b, zero)));
  return ox_out(c, 0, pc_where(G, fix, pc_add(G, r, b), r));
}

pc_status ox_op_BitShift(ox_ctx *c) {
  const char *dir = ox_attr_str(c, "direction", "");
  pc_op op = strcmp(dir, "LEFT") == 0 ? PC_OP_shift_left : PC_OP_shift_right;
  if (strcmp(dir, "LEFT") != 0 && strcmp(dir, "RIGHT") != 0)
    return ox_fail(c, PC_ERR_ATTR, "direction '%s' is not LEFT or RIGHT", dir);
  return ox_out(c, 0, ox_binary(c, op, X0, ox_in_req(c, 1)));
}

/* folds a variadic op over its inputs with numpy broadcasting */
static pc_value *fold_inputs(ox_ctx *c, pc_op op) {
  pc_value *acc = X0;
  for (int i = 1; i < c->n_in && acc; i++) acc = ox_binary(c, op, acc, ox_in_req(c, i));
  return acc;
}
pc_status ox_op_Max(ox_ctx *c) { return ox_out(c, 0, fold_inputs(c, PC_OP_max)); }
pc_status ox_op_Min(ox_ctx *c) { return ox_out(c, 0, fold_inputs(c, PC_OP_min)); }
pc_status ox_op_Sum(ox_ctx *c) { return ox_out(c, 0, fold_inputs(c, PC_OP_add)); }
pc_status ox_op_Mean(ox_ctx *c) {
  pc_value *s = fold_inputs(c, PC_OP_add);
  return ox_out(c, 0, s ? pc_div(G, s, ox_like(c, c->n_in, s)) : NULL);
}

pc_status ox_op_Clip(ox_ctx *c) {
  pc_value *x = X0, *lo, *hi;
  if (!x) return ox_status(c);
  if (c->opset < 11) {
    lo = ox_has_attr(c, "min") ? ox_like(c, ox_attr_float(c, "min", 0), x) : NULL;
    hi = ox_has_attr(c, "max") ? ox_like(c, ox_attr_float(c, "max", 0), x) : NULL;
  } else {
    lo = ox_in(c, 1);
    hi = ox_in(c, 2);
  }
  pc_value *y = x;
  if (lo) y = ox_binary(c, PC_OP_max, y, lo);
  if (hi) y = ox_binary(c, PC_OP_min, y, hi);
  return ox_out(c, 0, y);
}

pc_status ox_op_Where(ox_ctx *c) {
  pc_value *cond = X0, *a = ox_in_req(c, 1), *b = ox_in_req(c, 2);
  if (!cond || !a || !b) return ox_status(c);
  if (a->type.dtype != b->type.dtype) return ox_fail(c, PC_ERR_TYPE, "branches have different types");
  if (!ox_broadcast3(c, &cond, &a, &b)) return ox_status(c);
  return ox_out(c, 0, pc_where(G, cond, a, b));
}

/* ---------------------------------------------------------------- types, identity, constants */

pc_status ox_op_Cast(ox_ctx *c) {
  pc_dtype to;
  if (!ox_has_attr(c, "to")) return ox_fail(c, PC_ERR_ATTR, "attribute to is required");
  if (!ox_attr_dtype(c, "to", PC_f32, &to)) return ox_status(c);
  return ox_out(c, 0, ox_convert_rounded(c, X0, to, ox_attr_flag(c, "saturate", 1), ox_attr_str(c, "round_mode", "up")));
}
pc_status ox_op_CastLike(ox_ctx *c) {
  pc_value *x = X0, *like = ox_in_req(c, 1);
  return ox_out(c, 0, like ? ox_convert_rounded(c, x, like->type.dtype, ox_attr_flag(c, "saturate", 1),
                                                ox_attr_str(c, "round_mode", "up"))
                           : NULL);
}
/* sequences and optionals pass through as the import-time lists they are */
pc_status ox_op_Identity(ox_ctx *c) { return !ox_in(c, 0) && ox_seq_in(c, 0) ? ox_op_SequenceIdentity(c) : ox_out(c, 0, X0); }

pc_status ox_op_Constant(ox_ctx *c) {
  if (ox_has_attr(c, "value")) return ox_out(c, 0, ox_attr_tensor(c, "value"));
  if (ox_has_attr(c, "value_float")) return ox_out(c, 0, pc_scalar(G, PC_f32, ox_attr_float(c, "value_float", 0)));
  if (ox_has_attr(c, "value_int")) {
    int64_t v = ox_attr_int(c, "value_int", 0);
    return ox_out(c, 0, pc_const(G, pc_type_make(PC_i64, 0, NULL), &v));
  }
  if (ox_has_attr(c, "value_floats") || ox_has_attr(c, "value_ints")) {
    int is_f = ox_has_attr(c, "value_floats");
    const Onnx__AttributeProto *a = NULL;
    for (size_t i = 0; i < c->node->n_attribute; i++)
      if (c->node->attribute[i]->name && strcmp(c->node->attribute[i]->name, is_f ? "value_floats" : "value_ints") == 0)
        a = c->node->attribute[i];
    int64_t n = is_f ? (int64_t)a->n_floats : (int64_t)a->n_ints;
    pc_type t = pc_type_make(is_f ? PC_f32 : PC_i64, 1, &n);
    return ox_out(c, 0, pc_const(G, t, is_f ? (const void *)a->floats : (const void *)a->ints));
  }
  return ox_fail(c, PC_ERR_UNSUPPORTED, "only tensor, float(s) and int(s) values are supported");
}

/* ---------------------------------------------------------------- shapes */

pc_status ox_op_Shape(ox_ctx *c) {
  pc_value *x = X0;
  if (!check_static(c, x)) return ox_status(c);
  int r = x->type.rank;
  int64_t start = ox_attr_int(c, "start", 0), end = ox_attr_int(c, "end", r);
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = start < 0 ? 0 : start > r ? r : start;
  end = end < start ? start : end > r ? r : end;
  int64_t n = end - start;
  return ox_out(c, 0, pc_const(G, pc_type_make(PC_i64, 1, &n), x->type.dims + start));
}

pc_status ox_op_Size(ox_ctx *c) {
  pc_value *x = X0;
  if (!check_static(c, x)) return ox_status(c);
  int64_t n = pc_type_numel(&x->type);
  return ox_out(c, 0, pc_const(G, pc_type_make(PC_i64, 0, NULL), &n));
}

pc_status ox_op_Reshape(ox_ctx *c) {
  pc_value *x = X0;
  int64_t s[PC_MAX_RANK];
  int n = ox_const_ints(c, 1, s, PC_MAX_RANK);
  if (!x || n < 0) return n == -1 ? ox_fail(c, PC_ERR_ATTR, "shape input is required") : ox_status(c);
  if (!check_static(c, x)) return ox_status(c);
  int allowzero = ox_attr_flag(c, "allowzero", 0), infer = -1;
  int64_t known = 1;
  for (int i = 0; i < n; i++) {
    if (s[i] == 0 && !allowzero) {
      if (i >= x->type.rank) return ox_fail(c, PC_ERR_SHAPE, "shape[%d] = 0 copies a dim the input lacks", i);
      s[i] = x->type.dims[i];
    }
    if (s[i] == -1) {
      if (infer >= 0) return ox_fail(c, PC_ERR_SHAPE, "more than one -1 in the shape");
      infer = i;
    } else if (s[i] < 0) {
      return ox_fail(c, PC_ERR_SHAPE, "shape[%d] = %lld", i, (long long)s[i]);
    } else if (s[i] > 0 && known > ((int64_t)1 << 40) / s[i]) {
      return ox_fail(c, PC_ERR_RANGE, "shape has absurdly many elements");
    } else {
      known *= s[i];
    }
  }
  int64_t numel = pc_type_numel(&x->type);
  if (infer >= 0) {
    if (known == 0 || numel % known) return ox_fail(c, PC_ERR_SHAPE, "cannot infer the -1 dim");
    s[infer] = numel / known;
  } else if (known != numel) {
    return ox_fail(c, PC_ERR_SHAPE, "shape has %lld elements, the input %lld", (long long)known, (long long)numel);
  }
  return ox_out(c, 0, ox_reshape(c, x, n, s));
}

pc_status ox_op_Flatten(ox_ctx *c) {
  pc_value *x = X0;
  if (!check_static(c, x)) return ox_status(c);
  int r = x->type.rank;
  int64_t axis = ox_attr_int(c, "axis", 1);
  if (axis < 0) axis += r;
  if (axis < 0 || axis > r) return ox_fail(c, PC_ERR_ATTR, "axis is out of range for rank %d", r);
  int64_t s[2] = {shape_numel((int)axis, x->type.dims), shape_numel(r - (int)axis, x->type.dims + axis)};
  return ox_out(c, 0, ox_reshape(c, x, 2, s));
}

pc_status ox_op_Squeeze(ox_ctx *c) {
  pc_value *x = X0;
  int64_t axes[PC_MAX_RANK];
  int n = read_axes(c, 13, axes);
  if (!x || n < -1) return ox_status(c);
  int r = x->type.rank, drop[PC_MAX_RANK] = {0};
  if (n > 0 && !ox_axes(c, axes, n, r)) return ox_status(c);
  for (int i = 0; i < n; i++) {
    if (x->type.dims[axes[i]] != 1) return ox_fail(c, PC_ERR_SHAPE, "dim %lld is not 1", (long long)axes[i]);
    drop[axes[i]] = 1;
  }
  for (int i = 0; n <= 0 && i < r; i++) drop[i] = x->type.dims[i] == 1;
  int64_t s[PC_MAX_RANK];
  int k = 0;
  for (int i = 0; i < r; i++)
    if (!drop[i]) s[k++] = x->type.dims[i];
  return ox_out(c, 0, ox_reshape(c, x, k, s));
}

pc_status ox_op_Unsqueeze(ox_ctx *c) {
  pc_value *x = X0;
  int64_t axes[PC_MAX_RANK];
  int n = read_axes(c, 13, axes);
  if (!x || n < -1) return ox_status(c);
  if (n < 0) return ox_fail(c, PC_ERR_ATTR, "axes are required");
  if (!ox_axes(c, axes, n, x->type.rank + n)) return ox_status(c);
  return ox_out(c, 0, ox_unsqueeze(c, x, n, axes));
}

pc_status ox_op_Transpose(ox_ctx *c) {
  pc_value *x = X0;
  if (!x) return ox_status(c);
  int64_t perm[PC_MAX_RANK];
  int r = x->type.rank, n = ox_attr_ints(c, "perm", perm, PC_MAX_RANK);
  if (n < -1) return ox_status(c);
  if (n < 0)
    for (int i = 0; i < r; i++) perm[i] = r - 1 - i;
  else if (n != r)
    return ox_fail(c, PC_ERR_ATTR, "perm has %d entries for rank %d", n, r);
  return ox_out(c, 0, pc_transpose(G, x, perm));
}

pc_status ox_op_Concat(ox_ctx *c) {
  pc_value *x = X0;
  if (!x) return ox_status(c);
  int axis = ox_axis(c, ox_attr_int(c, "axis", 0), x->type.rank);
  if (axis < 0) return ox_status(c);
  pc_value **xs = calloc((size_t)c->n_in, sizeof *xs);
  if (!xs) return ox_fail(c, PC_ERR_NOMEM, "out of memory");
  int n = 0;
  for (int i = 0; i < c->n_in; i++) {
    pc_value *v = ox_in_req(c, i);
    if (v && !(v->type.rank == x->type.rank && v->type.dims[axis] == 0)) xs[n++] = v; /* empty parts add nothing */
  }
  pc_value *y = ox_status(c) != PC_OK ? NULL : n ? pc_concatenate(G, xs, n, axis) : x;
  free(xs);
  return ox_out(c, 0, y);
}

/* slice of x along one axis: [start, start + len) */
static pc_value *slice_axis(ox_ctx *c, pc_value *x, int axis, int64_t start, int64_t len) {
  if (!x) return NULL;
  int64_t s[PC_MAX_RANK] = {0}, l[PC_MAX_RANK];
  memcpy(l, x->type.dims, sizeof l);
  s[axis] = start;
  l[axis] = start + len;
  if (start == 0 && len == x->type.dims[axis]) return x;
  return pc_slice(G, x, s, l, NULL);
}

pc_status ox_op_Split(ox_ctx *c) {
  pc_value *x = X0;
  if (!check_static(c, x)) return ox_status(c);
  if (c->n_out < 1) return ox_fail(c, PC_ERR_ATTR, "has no outputs");
  int axis = ox_axis(c, ox_attr_int(c, "axis", 0), x->type.rank);
  if (axis < 0) return ox_status(c);
  int64_t dim = x->type.dims[axis], *sizes = calloc((size_t)c->n_out + 1, sizeof *sizes);
  if (!sizes) return ox_fail(c, PC_ERR_NOMEM, "out of memory");
  int n = c->opset >= 13 ? ox_const_ints(c, 1, sizes, c->n_out) : ox_attr_ints(c, "split", sizes, c->n_out);
  if (n == -1) { /* equal parts; the last one smaller when dim does not divide (opset 18 num_outputs) */
    int64_t part = (dim + c->n_out - 1) / c->n_out;
    for (int i = 0; i < c->n_out; i++) sizes[i] = part < dim - part * i ? part : (dim - part * i > 0 ? dim - part * i : 0);
    if (c->opset < 18 && dim % c->n_out) ox_fail(c, PC_ERR_SHAPE, "dim %lld does not split into %d parts", (long long)dim, c->n_out);
    n = c->n_out;
  }
  int64_t total = 0;
  for (int i = 0; i < n; i++) {
    if (sizes[i] < 0 || sizes[i] > dim) n = -2;
    else total += sizes[i];
  }
  if (ox_status(c) == PC_OK && (n != c->n_out || total != dim))
    ox_fail(c, PC_ERR_SHAPE, "split sizes do not add up to dim %lld over %d outputs", (long long)dim, c->n_out);
  int64_t at = 0;
  for (int i = 0; i < c->n_out && ox_status(c) == PC_OK; i++) {
    ox_out(c, i, slice_axis(c, x, axis, at, sizes[i]));
    at += sizes[i];
  }
  free(sizes);
  return ox_status(c);
}

/* the numpy slice of one axis, as rev (for negative steps) plus a forward start/limit/stride */
static void slice_bounds(int64_t d, int64_t st, int64_t en, int64_t step, int *rev, int64_t *s, int64_t *l, int64_t *k) {
  *rev = step < 0;
  if (step > 0) {
    st = st < 0 ? st + d : st, en = en < 0 ? en + d : en;
    st = st < 0 ? 0 : st > d ? d : st;
    en = en < 0 ? 0 : en > d ? d : en;
  } else {
    st = st < 0 ? st + d : st, en = en < 0 ? en + d : en;
    st = st < 0 ? -1 : st > d - 1 ? d - 1 : st;
    en = en < -1 ? -1 : en > d - 1 ? d - 1 : en;
    st = d - 1 - st, en = d - 1 - en, step = -step; /* positions in the reversed axis */
  }
  if (en <= st) st = en = 0;
  *s = st, *l = en, *k = step;
}

pc_status ox_op_Slice(ox_ctx *c) {
  pc_value *x = X0;
  if (!check_static(c, x)) return ox_status(c);
  int r = x->type.rank;
  int64_t st[PC_MAX_RANK], en[PC_MAX_RANK], ax[PC_MAX_RANK], sp[PC_MAX_RANK];
  int ns, ne, na, nk = -1;
  if (c->opset < 10) {
    ns = ox_attr_ints(c, "starts", st, r), ne = ox_attr_ints(c, "ends", en, r), na = ox_attr_ints(c, "axes", ax, r);
  } else {
    ns = ox_const_ints(c, 1, st, r), ne = ox_const_ints(c, 2, en, r), na = ox_const_ints(c, 3, ax, r);
    nk = ox_const_ints(c, 4, sp, r);
  }
  if (ox_status(c) != PC_OK) return ox_status(c);
  if (ns < 0 || ns != ne || (na >= 0 && na != ns) || (nk >= 0 && nk != ns))
    return ox_fail(c, PC_ERR_ATTR, "starts, ends, axes and steps must have the same length");
  for (int i = 0; na < 0 && i < ns; i++) ax[i] = i;
  if (!ox_axes(c, ax, ns, r)) return ox_status(c);
  int64_t s[PC_MAX_RANK] = {0}, l[PC_MAX_RANK], k[PC_MAX_RANK], revs[PC_MAX_RANK];
  int n_rev = 0;
  for (int i = 0; i < r; i++) l[i] = x->type.dims[i], k[i] = 1;
  for (int i = 0; i < ns; i++) {
    int64_t step = nk >= 0 ? sp[i] : 1;
    if (step == 0) return ox_fail(c, PC_ERR_ATTR, "step 0");
    int rv, a = (int)ax[i];
    slice_bounds(x->type.dims[a], st[i], en[i], step, &rv, &s[a], &l[a], &k[a]);
    if (rv) revs[n_rev++] = a;
  }
  if (n_rev) {
    pc_attr at = pc_a_ints("dims", revs, n_rev);
    x = pc_build(G, PC_OP_rev, &x, 1, &at, 1);
  }
  return ox_out(c, 0, pc_slice(G, x, s, l, k));
}

/* broadcasts x to out shape, mapping x's dims to the given output dims */
static pc_value *bcast_dims(ox_ctx *c, pc_value *x, int rank, const int64_t *shape, const int64_t *dims) {
  if (!x) return NULL;
  int same = x->type.rank == rank;
  for (int i = 0; same && i < rank; i++) same = x->type.dims[i] == shape[i] && dims[i] == i;
  return same ? x : pc_broadcast_in_dim(G, x, rank, shape, dims);
}

/* numpy take along axis: out = x.shape[:axis] + idx.shape + x.shape[axis+1:] */
static pc_value *take_nd(ox_ctx *c, pc_value *x, pc_value *idx, int axis);

static pc_value *take(ox_ctx *c, pc_value *x, pc_value *idx, int axis) {
  if (!x || !idx) return NULL;
  if (idx->type.rank > 0) return take_nd(c, x, idx, axis);
  /* a scalar index: take with a [1] index, then drop that dim */
  int64_t one = 1, s[PC_MAX_RANK];
  pc_value *y = take_nd(c, x, ox_reshape(c, idx, 1, &one), axis);
  if (!y || y->type.rank != x->type.rank) return y ? ox_fail(c, PC_ERR_INTERNAL, "take: bad rank"), NULL : NULL;
  int k = 0;
  for (int i = 0; i < y->type.rank; i++)
    if (i != axis) s[k++] = y->type.dims[i];
  return ox_reshape(c, y, k, s);
}

static pc_value *take_nd(ox_ctx *c, pc_value *x, pc_value *idx, int axis) {
  if (!x || !idx) return NULL;
  int r = x->type.rank, q = idx->type.rank;
  if (q < 1) return ox_fail(c, PC_ERR_INTERNAL, "take: scalar index"), NULL;
  int orank = r - 1 + q;
  if (orank > PC_MAX_RANK) return ox_fail(c, PC_ERR_RANGE, "result rank %d exceeds %d", orank, PC_MAX_RANK), NULL;
  int64_t oshape[PC_MAX_RANK], xshape[PC_MAX_RANK], xdims[PC_MAX_RANK], idims[PC_MAX_RANK];
  for (int i = 0; i < orank; i++) {
    oshape[i] = i < axis ? x->type.dims[i] : i < axis + q ? idx->type.dims[i - axis] : x->type.dims[i - q + 1];
    xshape[i] = i == axis ? x->type.dims[axis] : oshape[i];
  }
  for (int i = 0; i < r; i++) xdims[i] = i <= axis ? i : i + q - 1;
  for (int i = 0; i < q; i++) idims[i] = axis + i;
  pc_value *xi = to_i64(c, idx);
  xi = wrap_index_n(c, xi, x->type.dims[axis]);
  if (xi && pc_type_is_static(&xi->type) && pc_type_is_static(&x->type)) {
    /* the indices flattened into the axis and spread over the other dims: the gather reads x itself, not x
     * broadcast over the index dims, so the gradient (a scatter-add) goes into x's shape, not that broadcast's
     * (an embedding table times the tokens) */
    int64_t nq = pc_type_numel(&xi->type), ishape[PC_MAX_RANK], ax = axis;
    for (int i = 0; i < r; i++) ishape[i] = i == axis ? nq : x->type.dims[i];
    pc_value *ib = pc_broadcast_in_dim(G, ox_reshape(c, xi, 1, &nq), r, ishape, &ax);
    pc_value *in[2] = {x, ib};
    pc_attr a = pc_a_int("axis", axis);
    pc_value *y = ib ? pc_build(G, PC_OP_gather, in, 2, &a, 1) : NULL;
    return ox_reshape(c, y, orank, oshape);
  }
  pc_value *xb = bcast_dims(c, x, orank, xshape, xdims), *ib = bcast_dims(c, xi, orank, oshape, idims);
  pc_value *in[2] = {xb, ib};
  pc_attr a = pc_a_int("axis", axis);
  return xb && ib ? pc_build(G, PC_OP_gather, in, 2, &a, 1) : NULL;
}

pc_status ox_op_Gather(ox_ctx *c) {
  pc_value *x = X0, *idx = ox_in_req(c, 1);
  if (!check_static(c, x) || !idx) return ox_status(c);
  int axis = ox_axis(c, ox_attr_int(c, "axis", 0), x->type.rank);
  return axis < 0 ? ox_status(c) : ox_out(c, 0, take(c, x, idx, axis));
}

#define COMPRESS_MAX 65536

/* Compress: the slices along axis (of the flattened input when no axis) whose condition entry is
 * true; the condition decides the output's shape, so it must be known at compile time */
pc_status ox_op_Compress(ox_ctx *c) {
  pc_value *x = X0;
  if (!check_static(c, x)) return ox_status(c);
  int64_t *cond = pc_alloc(G, sizeof *cond * COMPRESS_MAX), *keep = pc_alloc(G, sizeof *keep * COMPRESS_MAX);
  int n = cond && keep ? ox_const_ints(c, 1, cond, COMPRESS_MAX) : -2;
  if (n < 0) return n == -1 ? ox_fail(c, PC_ERR_ATTR, "input 1 (condition) is required") : ox_status(c);
  int axis = 0;
  if (ox_has_attr(c, "axis")) {
    if ((axis = ox_axis(c, ox_attr_int(c, "axis", 0), x->type.rank)) < 0) return ox_status(c);
  } else {
    int64_t all = pc_type_numel(&x->type);
    x = ox_reshape(c, x, 1, &all);
  }
  int64_t dim = x ? x->type.dims[axis] : 0, k = 0;
  if (n > dim) return ox_fail(c, PC_ERR_SHAPE, "condition has %d entries, the axis %lld", n, (long long)dim);
  for (int i = 0; i < n; i++)
    if (cond[i]) keep[k++] = i;
  if (!k) return ox_fail(c, PC_ERR_UNSUPPORTED, "a condition selecting nothing gives an empty result");
  return ox_out(c, 0, take(c, x, pc_const(G, pc_type_make(PC_i64, 1, &k), keep), axis));
}

pc_status ox_op_GatherElements(ox_ctx *c) {
  pc_value *x = X0, *idx = ox_in_req(c, 1);
  if (!check_static(c, x) || !idx) return ox_status(c);
  int axis = ox_axis(c, ox_attr_int(c, "axis", 0), x->type.rank);
  if (axis < 0) return ox_status(c);
  pc_value *in[2] = {x, wrap_index_n(c, to_i64(c, idx), x->type.dims[axis])};
  pc_attr a = pc_a_int("axis", axis);
  return ox_out(c, 0, in[1] ? pc_build(G, PC_OP_gather, in, 2, &a, 1) : NULL);
}

/* flat index over x dims [b, b+k) from the last dim of idx (len k): sum idx[..., j] * stride_j */
static pc_value *flat_index(ox_ctx *c, pc_value *x, pc_value *idx, int b) {
  if (idx->type.rank < 1) return ox_fail(c, PC_ERR_SHAPE, "indices must have rank >= 1"), NULL;
  int q = idx->type.rank, k = (int)idx->type.dims[q - 1];
  if (k < 1 || b + k > x->type.rank) return ox_fail(c, PC_ERR_SHAPE, "index depth %d does not fit rank %d", k, x->type.rank), NULL;
  int64_t dims[PC_MAX_RANK], strides[PC_MAX_RANK], stride = 1;
  for (int j = k - 1; j >= 0; j--) dims[j] = x->type.dims[b + j], strides[j] = stride, stride *= dims[j];
  pc_value *i64 = to_i64(c, idx);
  pc_value *n = pc_const(G, pc_type_make(PC_i64, 1, (int64_t[]){k}), dims);
  pc_value *s = pc_const(G, pc_type_make(PC_i64, 1, (int64_t[]){k}), strides);
  pc_value *w = wrap_index(c, i64, pc_broadcast_to(G, n, q, idx->type.dims));
  pc_value *m = ox_binary(c, PC_OP_mul, w, s);
  int64_t last = q - 1;
  return pc_reduce(G, PC_OP_reduce_sum, m, 1, &last);
}

pc_status ox_op_GatherND(ox_ctx *c) {
  pc_value *x = X0, *idx = ox_in_req(c, 1);
  if (!check_static(c, x) || !check_static(c, idx)) return ox_status(c);
  int64_t b64 = ox_attr_int(c, "batch_dims", 0);
  int r = x->type.rank, q = idx->type.rank, b = b64 >= 0 && b64 < PC_MAX_RANK ? (int)b64 : -1;
  if (q < 1 || b < 0 || b >= q || b >= r) return ox_fail(c, PC_ERR_ATTR, "batch_dims %lld does not fit", (long long)b64);
  int k = (int)idx->type.dims[q - 1];
  pc_value *flat = flat_index(c, x, idx, b); /* idx.shape[:-1] */
  if (!flat) return ox_status(c);
  int64_t B = shape_numel(b, x->type.dims), P = shape_numel(k, x->type.dims + b);
  int64_t M = shape_numel(q - 1 - b, idx->type.dims + b), rest_n = r - b - k;
  int64_t xs[PC_MAX_RANK] = {B, P}, is[PC_MAX_RANK] = {B, M}, os[PC_MAX_RANK];
  for (int i = 0; i < rest_n; i++) xs[2 + i] = is[2 + i] = x->type.dims[b + k + i];
  pc_value *x3 = ox_reshape(c, x, 2 + (int)rest_n, xs);
  pc_value *f2 = ox_reshape(c, flat, 2, is);
  int64_t idims[2] = {0, 1};
  pc_value *fb = f2 ? pc_broadcast_in_dim(G, f2, 2 + (int)rest_n, is, idims) : NULL;
  if (rest_n == 0) fb = f2;
  pc_value *in[2] = {x3, fb};
  pc_attr a = pc_a_int("axis", 1);
  pc_value *y = x3 && fb ? pc_build(G, PC_OP_gather, in, 2, &a, 1) : NULL;
  int on = 0;
  for (int i = 0; i < q - 1; i++) os[on++] = idx->type.dims[i];
  for (int i = 0; i < rest_n; i++) os[on++] = x->type.dims[b + k + i];
  if (on > PC_MAX_RANK) return ox_fail(c, PC_ERR_RANGE, "result rank exceeds %d", PC_MAX_RANK);
  return ox_out(c, 0, ox_reshape(c, y, on, os));
}

static const char *scatter_reduce(ox_ctx *c) {
  const char *r = ox_attr_str(c, "reduction", "none");
  static const char *const ok[] = {"none", "add", "mul", "max", "min"};
  for (int i = 0; i < 5; i++)
    if (strcmp(r, ok[i]) == 0) return ok[i];
  ox_fail(c, PC_ERR_ATTR, "reduction '%s' is not supported", r);
  return NULL;
}

pc_status ox_op_ScatterElements(ox_ctx *c) {
  pc_value *x = X0, *idx = ox_in_req(c, 1), *upd = ox_in_req(c, 2);
  const char *red = scatter_reduce(c);
  if (!check_static(c, x) || !idx || !upd || !red) return ox_status(c);
  int axis = ox_axis(c, ox_attr_int(c, "axis", 0), x->type.rank);
  if (axis < 0) return ox_status(c);
  pc_value *in[3] = {x, wrap_index_n(c, to_i64(c, idx), x->type.dims[axis]), upd};
  pc_attr a[2] = {pc_a_int("axis", axis), pc_a_str("reduce", red)};
  return ox_out(c, 0, in[1] ? pc_build(G, PC_OP_scatter, in, 3, a, 2) : NULL);
}

pc_status ox_op_ScatterND(ox_ctx *c) {
  pc_value *x = X0, *idx = ox_in_req(c, 1), *upd = ox_in_req(c, 2);
  const char *red = scatter_reduce(c);
  if (!check_static(c, x) || !check_static(c, idx) || !upd || !red) return ox_status(c);
  if (idx->type.rank < 1) return ox_fail(c, PC_ERR_SHAPE, "indices must have rank >= 1");
  int r = x->type.rank, q = idx->type.rank, k = (int)idx->type.dims[q - 1];
  pc_value *flat = flat_index(c, x, idx, 0);
  if (!flat) return ox_status(c);
  int64_t P = shape_numel(k, x->type.dims), M = shape_numel(q - 1, idx->type.dims);
  int rest_n = r - k;
  int64_t xs[PC_MAX_RANK] = {P}, us[PC_MAX_RANK] = {M}, zero = 0;
  for (int i = 0; i < rest_n; i++) xs[1 + i] = us[1 + i] = x->type.dims[k + i];
  if (pc_type_numel(&upd->type) != shape_numel(1 + rest_n, us)) return ox_fail(c, PC_ERR_SHAPE, "updates have the wrong shape");
  pc_value *x2 = ox_reshape(c, x, 1 + rest_n, xs), *u2 = ox_reshape(c, upd, 1 + rest_n, us);
  pc_value *f1 = ox_reshape(c, flat, 1, &M);
  pc_value *fb = rest_n ? (f1 ? pc_broadcast_in_dim(G, f1, 1 + rest_n, us, &zero) : NULL) : f1;
  pc_value *in[3] = {x2, fb, u2};
  pc_attr a[2] = {pc_a_int("axis", 0), pc_a_str("reduce", red)};
  pc_value *y = x2 && fb && u2 ? pc_build(G, PC_OP_scatter, in, 3, a, 2) : NULL;
  return ox_out(c, 0, ox_reshape(c, y, r, x->type.dims));
}

pc_status ox_op_Expand(ox_ctx *c) {
  pc_value *x = X0;
  int64_t s[PC_MAX_RANK], out[PC_MAX_RANK];
  int n = ox_const_ints(c, 1, s, PC_MAX_RANK);
  if (!x || n < 0) return ox_status(c);
  int r = x->type.rank > n ? x->type.rank : n;
  for (int i = 0; i < r; i++) {
    int ix = i - (r - x->type.rank), is = i - (r - n);
    int64_t a = ix >= 0 ? x->type.dims[ix] : 1, b = is >= 0 ? s[is] : 1;
    if (a != b && a != 1 && b != 1) return ox_fail(c, PC_ERR_SHAPE, "cannot expand dim %lld to %lld", (long long)a, (long long)b);
    out[i] = a == 1 ? b : a;
  }
  return ox_out(c, 0, pc_broadcast_to(G, x, r, out));
}

pc_status ox_op_Tile(ox_ctx *c) {
  pc_value *x = X0;
  int64_t rep[PC_MAX_RANK];
  if (!check_static(c, x)) return ox_status(c);
  int r = x->type.rank, n = ox_const_ints(c, 1, rep, PC_MAX_RANK);
  if (n < 0) return ox_status(c);
  if (n != r) return ox_fail(c, PC_ERR_ATTR, "repeats has %d entries for rank %d", n, r);
  if (r == PC_MAX_RANK) return ox_fail(c, PC_ERR_UNSUPPORTED, "rank %d is too large to tile", r);
  for (int a = 0; a < r && x; a++) {
    if (rep[a] < 0) return ox_fail(c, PC_ERR_ATTR, "negative repeat");
    if (rep[a] == 1) continue;
    /* [.., d, ..] -> [.., rep, d, ..] -> [.., rep * d, ..] */
    int64_t shape[PC_MAX_RANK], dims[PC_MAX_RANK], out[PC_MAX_RANK];
    for (int i = 0, k = 0; i < r; i++) {
      if (i == a) shape[k++] = rep[a];
      dims[i] = k;
      shape[k++] = x->type.dims[i];
      out[i] = x->type.dims[i] * (i == a ? rep[a] : 1);
    }
    x = ox_reshape(c, pc_broadcast_in_dim(G, x, r + 1, shape, dims), r, out);
  }
  return ox_out(c, 0, x);
}

pc_status ox_op_Range(ox_ctx *c) {
  double v[3][1];
  for (int i = 0; i < 3; i++)
    if (ox_const_floats(c, i, v[i], 1) != 1) return ox_status(c) ? ox_status(c) : ox_fail(c, PC_ERR_ATTR, "input %d must be a scalar", i);
  pc_dtype dt = c->in[0]->type.dtype;
  double start = v[0][0], limit = v[1][0], delta = v[2][0];
  if (delta == 0) return ox_fail(c, PC_ERR_ATTR, "delta is 0");
  double nf = ceil((limit - start) / delta);
  int64_t n = nf > 0 ? (int64_t)nf : 0;
  if (nf > (double)((int64_t)1 << 31)) return ox_fail(c, PC_ERR_RANGE, "range has %g elements", nf);
  pc_value *idx = iota(c, pc_dtype_is_float(dt) ? dt : PC_i64, 1, &n, 0);
  pc_value *y = add_s(c, mul_s(c, idx, delta), start);
  return ox_out(c, 0, pc_convert(G, y, dt));
}

pc_status ox_op_ConstantOfShape(ox_ctx *c) {
  int64_t s[PC_MAX_RANK];
  int n = ox_const_ints(c, 0, s, PC_MAX_RANK);
  if (n < 0) return ox_status(c) ? ox_status(c) : ox_fail(c, PC_ERR_ATTR, "shape input is required");
  for (int i = 0; i < n; i++)
    if (s[i] < 0) return ox_fail(c, PC_ERR_SHAPE, "negative dim %lld", (long long)s[i]);
  pc_value *val = ox_has_attr(c, "value") ? ox_attr_tensor(c, "value") : pc_scalar(G, PC_f32, 0);
  if (!val) return ox_status(c);
  if (pc_type_numel(&val->type) != 1) return ox_fail(c, PC_ERR_ATTR, "value must have one element");
  pc_value *sc = ox_reshape(c, val, 0, NULL);
  return ox_out(c, 0, n ? pc_broadcast_in_dim(G, sc, n, s, NULL) : sc);
}

/* bool mask of shape [rows, cols]: col - row compared with k by op */
static pc_value *diag_mask(ox_ctx *c, int64_t rows, int64_t cols, int64_t k, pc_op op) {
  int64_t s[2] = {rows, cols};
  pc_value *d = pc_sub(G, iota(c, PC_i64, 2, s, 1), iota(c, PC_i64, 2, s, 0));
  pc_value *in[2] = {d, d ? ox_like(c, (double)k, d) : NULL};
  return d ? pc_build(G, op, in, 2, NULL, 0) : NULL;
}

pc_status ox_op_EyeLike(ox_ctx *c) {
  pc_value *x = X0;
  if (!check_static(c, x)) return ox_status(c);
  if (x->type.rank != 2) return ox_fail(c, PC_ERR_SHAPE, "input must be 2-D");
  pc_dtype dt;
  if (!ox_attr_dtype(c, "dtype", x->type.dtype, &dt)) return ox_status(c);
  pc_value *m = diag_mask(c, x->type.dims[0], x->type.dims[1], ox_attr_int(c, "k", 0), PC_OP_eq);
  return ox_out(c, 0, pc_convert(G, m, dt));
}

pc_status ox_op_Trilu(ox_ctx *c) {
  pc_value *x = X0;
  if (!check_static(c, x)) return ox_status(c);
  int r = x->type.rank;
  if (r < 2) return ox_fail(c, PC_ERR_SHAPE, "input must have rank >= 2");
  int64_t k = 0;
  if (ox_has_in(c, 1) && ox_const_ints(c, 1, &k, 1) != 1) return ox_status(c) ? ox_status(c) : ox_fail(c, PC_ERR_ATTR, "k must be a scalar");
  int upper = ox_attr_flag(c, "upper", 1);
  pc_value *m = diag_mask(c, x->type.dims[r - 2], x->type.dims[r - 1], k, upper ? PC_OP_ge : PC_OP_le);
  int64_t dims[2] = {r - 2, r - 1};
  m = m ? pc_broadcast_in_dim(G, m, r, x->type.dims, dims) : NULL;
  return ox_out(c, 0, pc_where(G, m, x, ox_like(c, 0, x)));
}

pc_status ox_op_OneHot(ox_ctx *c) {
  pc_value *idx = X0, *vals = ox_in_req(c, 2);
  double depth_f;
  if (!check_static(c, idx) || !vals) return ox_status(c);
  if (ox_const_floats(c, 1, &depth_f, 1) != 1) return ox_status(c) ? ox_status(c) : ox_fail(c, PC_ERR_ATTR, "depth must be a scalar");
  int64_t depth = (int64_t)depth_f;
  int r = idx->type.rank + 1;
  if (r > PC_MAX_RANK) return ox_fail(c, PC_ERR_RANGE, "rank exceeds %d", PC_MAX_RANK);
  int axis = ox_axis(c, ox_attr_int(c, "axis", -1), r);
  if (axis < 0 || depth < 1 || pc_type_numel(&vals->type) != 2) return ox_status(c) ? ox_status(c) : ox_fail(c, PC_ERR_ATTR, "bad depth or values");
  int64_t shape[PC_MAX_RANK], idims[PC_MAX_RANK], ax = axis;
  for (int i = 0, k = 0; i < r; i++) {
    shape[i] = i == axis ? depth : idx->type.dims[k];
    if (i != axis) idims[k++] = i;
  }
  pc_value *ii = wrap_index_n(c, to_i64(c, idx), depth);
  pc_value *ib = ii ? pc_broadcast_in_dim(G, ii, r, shape, idims) : NULL;
  pc_value *hit = ib ? pc_eq(G, ib, iota(c, PC_i64, r, shape, axis)) : NULL;
  int64_t one = 1, z = 0, l1 = 1, l2 = 2;
  pc_value *v1 = ox_reshape(c, vals, 1, (int64_t[]){2});
  pc_value *off = ox_reshape(c, pc_slice(G, v1, &z, &l1, &one), 0, NULL);
  pc_value *on = ox_reshape(c, pc_slice(G, v1, &l1, &l2, &one), 0, NULL);
  (void)ax;
  pc_value *onb = on ? pc_broadcast_in_dim(G, on, r, shape, NULL) : NULL;
  pc_value *offb = off ? pc_broadcast_in_dim(G, off, r, shape, NULL) : NULL;
  return ox_out(c, 0, pc_where(G, hit, onb, offb));
}

typedef enum { PAD_EDGE, PAD_REFLECT, PAD_WRAP } pad_mode;

/* one side of an edge/reflect/wrap pad along axis: `p` elements before (low) or after the data */
static pc_value *pad_side(ox_ctx *c, pc_value *x, int axis, int64_t p, int low, pad_mode mode) {
  int64_t d = x->type.dims[axis];
  if (mode == PAD_WRAP) { /* the other end of the data comes around */
    if (p > d) return ox_fail(c, PC_ERR_UNSUPPORTED, "wrap pad %lld exceeds the dim (%lld)", (long long)p, (long long)d), NULL;
    return slice_axis(c, x, axis, low ? d - p : 0, p);
  }
  if (mode == PAD_REFLECT) {
    if (p > d - 1) return ox_fail(c, PC_ERR_SHAPE, "reflect pad %lld exceeds dim - 1", (long long)p), NULL;
    pc_value *s = slice_axis(c, x, axis, low ? 1 : d - 1 - p, p);
    int64_t ax = axis;
    pc_attr a = pc_a_ints("dims", &ax, 1);
    return s ? pc_build(G, PC_OP_rev, &s, 1, &a, 1) : NULL;
  }
  pc_value *s = slice_axis(c, x, axis, low ? 0 : d - 1, 1);
  int64_t shape[PC_MAX_RANK], dims[PC_MAX_RANK];
  for (int i = 0; i < x->type.rank; i++) shape[i] = i == axis ? p : x->type.dims[i], dims[i] = i;
  return s ? pc_broadcast_in_dim(G, s, x->type.rank, shape, dims) : NULL;
}

static pc_value *pad_copy_mode(ox_ctx *c, pc_value *x, const int64_t *lo, const int64_t *hi, pad_mode mode) {
  int r = x->type.rank;
  for (int a = 0; a < r && x; a++) {
    if (lo[a] < 0 || hi[a] < 0) { /* negative pads crop */
      int64_t s = lo[a] < 0 ? -lo[a] : 0, e = x->type.dims[a] - (hi[a] < 0 ? -hi[a] : 0);
      if (e < s) return ox_fail(c, PC_ERR_SHAPE, "pads crop more than the dim"), NULL;
      x = slice_axis(c, x, a, s, e - s);
    }
    pc_value *parts[3];
    int n = 0;
    if (x && lo[a] > 0) parts[n++] = pad_side(c, x, a, lo[a], 1, mode);
    parts[n++] = x;
    if (x && hi[a] > 0) parts[n++] = pad_side(c, x, a, hi[a], 0, mode);
    for (int i = 0; i < n; i++)
      if (!parts[i]) return NULL;
    if (n > 1) {
      if (x->type.dims[a] == 0) return ox_fail(c, PC_ERR_SHAPE, "cannot pad an empty dim by copying"), NULL;
      x = pc_concatenate(G, parts, n, a);
    }
  }
  return x;
}

pc_status ox_op_Pad(ox_ctx *c) {
  pc_value *x = X0;
  if (!check_static(c, x)) return ox_status(c);
  int r = x->type.rank;
  int64_t pads[2 * PC_MAX_RANK], axes[PC_MAX_RANK], lo[PC_MAX_RANK] = {0}, hi[PC_MAX_RANK] = {0};
  double value = 0;
  int np, na = -1;
  if (c->opset < 11) {
    np = ox_attr_ints(c, "pads", pads, 2 * r);
    value = ox_attr_float(c, "value", 0);
  } else {
    np = ox_const_ints(c, 1, pads, 2 * r);
    if (ox_has_in(c, 2) && ox_const_floats(c, 2, &value, 1) < 0) return ox_status(c);
    na = ox_const_ints(c, 3, axes, r);
  }
  if (ox_status(c) != PC_OK) return ox_status(c);
  for (int i = 0; na < 0 && i < r; i++) axes[i] = i;
  if (na < 0) na = r;
  if (!ox_axes(c, axes, na, r)) return ox_status(c);
  if (np != 2 * na) return ox_fail(c, PC_ERR_ATTR, "pads has %d entries, expected %d", np, 2 * na);
  for (int i = 0; i < na; i++) lo[axes[i]] = pads[i], hi[axes[i]] = pads[na + i];
  const char *mode = ox_attr_str(c, "mode", "constant");
  if (strcmp(mode, "constant") == 0) {
    int64_t interior[PC_MAX_RANK] = {0};
    pc_attr a[4] = {pc_a_ints("low", lo, r), pc_a_ints("high", hi, r), pc_a_ints("interior", interior, r),
                    pc_a_float("value", value)};
    return ox_out(c, 0, pc_build(G, PC_OP_pad, &x, 1, a, 4));
  }
  pad_mode pm = !strcmp(mode, "edge") ? PAD_EDGE : !strcmp(mode, "reflect") ? PAD_REFLECT : PAD_WRAP;
  if (pm == PAD_WRAP && strcmp(mode, "wrap") != 0) return ox_fail(c, PC_ERR_UNSUPPORTED, "mode '%s' is not supported", mode);
  return ox_out(c, 0, pad_copy_mode(c, x, lo, hi, pm));
}

/* ---------------------------------------------------------------- reductions */

typedef enum { RED_SUM, RED_MEAN, RED_MAX, RED_MIN, RED_PROD, RED_L1, RED_L2, RED_LOGSUM, RED_LOGSUMEXP, RED_SUMSQ } red_kind;

/* reads axes and keepdims; returns the number of axes (all when empty), -1 for a no-op, -2 on failure */
static int reduce_axes(ox_ctx *c, pc_value *x, int input_from, int64_t *axes) {
  int n = read_axes(c, input_from, axes);
  if (n < -1) return -2;
  if (n <= 0) {
    if (c->opset >= input_from && ox_attr_int(c, "noop_with_empty_axes", 0)) return -1;
    for (int i = 0; i < x->type.rank; i++) axes[i] = i;
    return x->type.rank;
  }
  return ox_axes(c, axes, n, x->type.rank) ? n : -2;
}

/* the value max (or min) takes over an empty set: ONNX says -inf (+inf), else the dtype's lowest (highest) */
static double empty_extreme(pc_dtype dt, int is_max) {
  static const struct { pc_dtype dt; double lo, hi; } lim[] = {
      {PC_i8, -128, 127}, {PC_i16, -32768, 32767}, {PC_i32, -2147483648.0, 2147483647.0},
      {PC_i64, -9223372036854775808.0, 9223372036854774784.0}, {PC_u8, 0, 255}, {PC_bool, 0, 1}};
  for (size_t i = 0; i < sizeof lim / sizeof *lim; i++)
    if (lim[i].dt == dt) return is_max ? lim[i].lo : lim[i].hi;
  return is_max ? -INFINITY : INFINITY;
}

/* a max, min or log-sum-exp over reduced axes holding no element: a constant of the result's shape */
static pc_value *reduce_empty(ox_ctx *c, red_kind kind, pc_value *x, int n, const int64_t *axes, int keep) {
  int64_t sh[PC_MAX_RANK];
  int k = 0, empty = 0;
  for (int i = 0; i < x->type.rank; i++) {
    int red = 0;
    for (int j = 0; j < n; j++) red |= axes[j] == i;
    empty |= red && x->type.dims[i] == 0;
    if (!red || keep) sh[k++] = red ? 1 : x->type.dims[i];
  }
  if (!empty || (kind != RED_MAX && kind != RED_MIN && kind != RED_LOGSUMEXP)) return NULL;
  return pc_full(G, x->type.dtype, empty_extreme(x->type.dtype, kind != RED_MIN), k, sh);
}

/* max / min of bools (opset 20): any / all, reduced as u8 */
static pc_value *reduce_bool(ox_ctx *c, pc_op op, pc_value *x, int n, const int64_t *axes, int keep) {
  pc_value *y = ox_reduce(c, op, pc_convert(G, x, PC_u8), n, axes, keep);
  return y ? pc_convert(G, y, PC_bool) : NULL;
}

static pc_status reduce_op(ox_ctx *c, red_kind kind) {
  pc_value *x = X0;
  int64_t axes[PC_MAX_RANK];
  if (!x) return ox_status(c);
  int n = reduce_axes(c, x, kind == RED_SUM ? 13 : 18, axes), keep = ox_attr_flag(c, "keepdims", 1);
  if (n == -2) return ox_status(c);
  if (n == -1) return ox_out(c, 0, x);
  pc_value *y = reduce_empty(c, kind, x, n, axes, keep);
  if (y) return ox_out(c, 0, y);
  if (x->type.dtype == PC_bool && (kind == RED_MAX || kind == RED_MIN))
    return ox_out(c, 0, reduce_bool(c, kind == RED_MAX ? PC_OP_reduce_max : PC_OP_reduce_min, x, n, axes, keep));
  switch (kind) { /* each reduction is a short prim recipe */
  case RED_SUM: y = ox_reduce(c, PC_OP_reduce_sum, x, n, axes, keep); break;
  case RED_MAX: y = ox_reduce(c, PC_OP_reduce_max, x, n, axes, keep); break;
  case RED_MIN: y = ox_reduce(c, PC_OP_reduce_min, x, n, axes, keep); break;
  case RED_PROD: y = ox_reduce(c, PC_OP_reduce_prod, x, n, axes, keep); break;
  case RED_L1: y = ox_reduce(c, PC_OP_reduce_sum, pc_abs(G, x), n, axes, keep); break;
  case RED_SUMSQ: y = ox_reduce(c, PC_OP_reduce_sum, pc_mul(G, x, x), n, axes, keep); break;
  case RED_L2: y = pc_sqrt(G, ox_reduce(c, PC_OP_reduce_sum, pc_mul(G, x, x), n, axes, keep)); break;
  case RED_LOGSUM: y = pc_log(G, ox_reduce(c, PC_OP_reduce_sum, x, n, axes, keep)); break;
  case RED_MEAN: {
    int64_t cnt = 1;
    for (int i = 0; i < n; i++) cnt *= x->type.dims[axes[i]];
    y = ox_reduce(c, PC_OP_reduce_sum, x, n, axes, keep);
    y = y ? pc_div(G, y, ox_like(c, (double)cnt, y)) : NULL;
    break;
  }
  case RED_LOGSUMEXP: { /* m + log(sum(exp(x - m))), with m the max, finite-guarded */
    pc_value *m = ox_reduce(c, PC_OP_reduce_max, x, n, axes, 1);
    m = m ? pc_where(G, pc_isinf(G, m), ox_like(c, 0, m), m) : NULL;
    pc_value *s = ox_reduce(c, PC_OP_reduce_sum, pc_exp(G, ox_binary(c, PC_OP_sub, x, m)), n, axes, 1);
    y = s ? pc_add(G, pc_log(G, s), m) : NULL;
    if (y && !keep) {
      int64_t sh[PC_MAX_RANK];
      int k = 0;
      for (int i = 0; i < x->type.rank; i++) {
        int red = 0;
        for (int j = 0; j < n; j++) red |= axes[j] == i;
        if (!red) sh[k++] = x->type.dims[i];
      }
      y = ox_reshape(c, y, k, sh);
    }
    break;
  }
  }
  return ox_out(c, 0, y);
}

pc_status ox_op_ReduceSum(ox_ctx *c) { return reduce_op(c, RED_SUM); }
pc_status ox_op_ReduceMean(ox_ctx *c) { return reduce_op(c, RED_MEAN); }
pc_status ox_op_ReduceMax(ox_ctx *c) { return reduce_op(c, RED_MAX); }
pc_status ox_op_ReduceMin(ox_ctx *c) { return reduce_op(c, RED_MIN); }
pc_status ox_op_ReduceProd(ox_ctx *c) { return reduce_op(c, RED_PROD); }
pc_status ox_op_ReduceL1(ox_ctx *c) { return reduce_op(c, RED_L1); }
pc_status ox_op_ReduceL2(ox_ctx *c) { return reduce_op(c, RED_L2); }
pc_status ox_op_ReduceLogSum(ox_ctx *c) { return reduce_op(c, RED_LOGSUM); }
pc_status ox_op_ReduceLogSumExp(ox_ctx *c) { return reduce_op(c, RED_LOGSUMEXP); }
pc_status ox_op_ReduceSumSquare(ox_ctx *c) { return reduce_op(c, RED_SUMSQ); }

static pc_status arg_op(ox_ctx *c, pc_op op) {
  pc_value *x = X0;
  if (!x) return ox_status(c);
  int axis = ox_axis(c, ox_attr_int(c, "axis", 0), x->type.rank);
  if (axis < 0) return ox_status(c);
  pc_attr a[2] = {pc_a_int("axis", axis), pc_a_int("last", ox_attr_int(c, "select_last_index", 0))};
  pc_value *y = pc_build(G, op, &x, 1, a, 2);
  int64_t ax = axis;
  if (y && ox_attr_int(c, "keepdims", 1)) y = ox_unsqueeze(c, y, 1, &ax);
  return ox_out(c, 0, y);
}
pc_status ox_op_ArgMax(ox_ctx *c) { return arg_op(c, PC_OP_argmax); }
pc_status ox_op_ArgMin(ox_ctx *c) { return arg_op(c, PC_OP_argmin); }

pc_status ox_op_CumSum(ox_ctx *c) {
  pc_value *x = X0;
  int64_t axis;
  if (!x) return ox_status(c);
  if (ox_const_ints(c, 1, &axis, 1) != 1) return ox_status(c) ? ox_status(c) : ox_fail(c, PC_ERR_ATTR, "axis must be a scalar");
  int a = ox_axis(c, axis, x->type.rank);
  if (a < 0) return ox_status(c);
  pc_attr at[3] = {pc_a_int("axis", a), pc_a_int("exclusive", ox_attr_int(c, "exclusive", 0) != 0),
                   pc_a_int("reverse", ox_attr_int(c, "reverse", 0) != 0)};
  return ox_out(c, 0, pc_build(G, PC_OP_cumsum, &x, 1, at, 3));
}

pc_status ox_op_TopK(ox_ctx *c) {
  pc_value *x = X0;
  int64_t k = 0;
  if (!x) return ox_status(c);
  if (c->opset < 10) k = ox_attr_int(c, "k", 0);
  else if (ox_const_ints(c, 1, &k, 1) != 1) return ox_status(c) ? ox_status(c) : ox_fail(c, PC_ERR_ATTR, "k must have one element");
  int axis = ox_axis(c, ox_attr_int(c, "axis", -1), x->type.rank);
  if (axis < 0) return ox_status(c);
  if (k < 0 || k > x->type.dims[axis]) return ox_fail(c, PC_ERR_ATTR, "k = %lld is out of range", (long long)k);
  pc_attr a[3] = {pc_a_int("k", k), pc_a_int("axis", axis), pc_a_int("largest", ox_attr_int(c, "largest", 1) != 0)};
  pc_node *n = pc_node_add(G, PC_OP_topk, &x, 1, a, 3);
  if (!n) return ox_status(c);
  ox_out(c, 0, n->out[0]);
  return ox_out(c, 1, n->out[1]);
}

pc_status ox_op_NonZero(ox_ctx *c) {
  pc_value *x = X0;
  return ox_out(c, 0, x ? pc_build(G, PC_OP_nonzero, &x, 1, NULL, 0) : NULL);
}

/* ---------------------------------------------------------------- contractions */

static pc_value *matmul(ox_ctx *c, pc_value *a, pc_value *b) {
  if (!a || !b) return NULL;
  if (a->type.dtype != b->type.dtype) return ox_fail(c, PC_ERR_TYPE, "operands have different types"), NULL;
  int ra = a->type.rank, rb = b->type.rank;
  if (ra == 0 || rb == 0) return ox_fail(c, PC_ERR_SHAPE, "MatMul of a scalar"), NULL;
  int64_t one = 1;
  int a1 = ra == 1, b1 = rb == 1;
  if (a1) a = ox_reshape(c, a, 2, (int64_t[]){1, a->type.dims[0]}), ra = 2;
  if (b1) b = ox_reshape(c, b, 2, (int64_t[]){b->type.dims[0], 1}), rb = 2;
  if (!a || !b) return NULL;
  pc_value *y;
  if (rb == 2) { /* contract a's last dim with b's rows: no batch broadcast of b needed */
    int64_t lc = ra - 1, rc = 0;
    y = pc_dot_general(G, a, b, 1, &lc, &rc, 0, NULL, NULL);
  } else {
    int nb = (ra > rb ? ra : rb) - 2;
    int64_t bs[PC_MAX_RANK], sa[PC_MAX_RANK], sb[PC_MAX_RANK], batch[PC_MAX_RANK];
    for (int i = 0; i < nb; i++) {
      int ia = i - (nb - (ra - 2)), ib = i - (nb - (rb - 2));
      int64_t da = ia >= 0 ? a->type.dims[ia] : 1, db = ib >= 0 ? b->type.dims[ib] : 1;
      if (da != db && da != 1 && db != 1) return ox_fail(c, PC_ERR_SHAPE, "batch dims %lld and %lld do not broadcast", (long long)da, (long long)db), NULL;
      bs[i] = da == 1 ? db : da;
      batch[i] = i;
    }
    memcpy(sa, bs, sizeof bs), memcpy(sb, bs, sizeof bs);
    sa[nb] = a->type.dims[ra - 2], sa[nb + 1] = a->type.dims[ra - 1];
    sb[nb] = b->type.dims[rb - 2], sb[nb + 1] = b->type.dims[rb - 1];
    a = pc_broadcast_to(G, a, nb + 2, sa), b = pc_broadcast_to(G, b, nb + 2, sb);
    int64_t lc = nb + 1, rc = nb;
    y = pc_dot_general(G, a, b, 1, &lc, &rc, nb, batch, batch);
  }
  if (!y || (!a1 && !b1)) return y;
  int64_t s[PC_MAX_RANK];
  int k = 0, r = y->type.rank;
  for (int i = 0; i < r; i++)
    if (!((a1 && i == r - 2) || (b1 && i == r - 1))) s[k++] = y->type.dims[i];
  (void)one;
  return ox_reshape(c, y, k, s);
}

pc_status ox_op_MatMul(ox_ctx *c) { return ox_out(c, 0, matmul(c, X0, ox_in_req(c, 1))); }

pc_status ox_op_Gemm(ox_ctx *c) {
  pc_value *a = X0, *b = ox_in_req(c, 1), *cc = ox_in(c, 2);
  if (!a || !b) return ox_status(c);
  if (a->type.rank != 2 || b->type.rank != 2) return ox_fail(c, PC_ERR_SHAPE, "A and B must be 2-D");
  int64_t lc = ox_attr_int(c, "transA", 0) ? 0 : 1, rc = ox_attr_int(c, "transB", 0) ? 1 : 0;
  double alpha = ox_attr_float(c, "alpha", 1.0), beta = ox_attr_float(c, "beta", 1.0);
  pc_value *y = pc_dot_general(G, a, b, 1, &lc, &rc, 0, NULL, NULL);
  if (y && alpha != 1.0) y = mul_s(c, y, alpha);
  if (y && cc && beta != 0.0) {
    if (beta != 1.0) cc = mul_s(c, cc, beta);
    pc_value *yb = ox_binary(c, PC_OP_add, y, cc);
    if (yb && !pc_type_equal(&yb->type, &y->type)) return ox_fail(c, PC_ERR_SHAPE, "C does not broadcast to [M, N]");
    y = yb;
  }
  return ox_out(c, 0, y);
}

/* ---- Einsum: "..." becomes letters the equation does not use, repeated letters in a term take the diagonal,
 * size-1 dims that broadcast are dropped; then operands are reduced over letters nobody needs and contracted
 * pairwise */

typedef struct ein_term {
  pc_value *v;
  char idx[PC_MAX_RANK + 1];
} ein_term;

static int ein_letter(char ch) { return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z'); }

/* letters of a term of len chars, and whether it holds "..." (at most once, the only '.' allowed); -1 if bad */
static int ein_count_letters(ox_ctx *c, const char *s, size_t len, int *has_ellipsis) {
  int n = 0;
  *has_ellipsis = 0;
  for (size_t i = 0; i < len; i++) {
    if (ein_letter(s[i])) {
      n++;
    } else if (s[i] == '.' && !*has_ellipsis && i + 2 < len && s[i + 1] == '.' && s[i + 2] == '.') {
      *has_ellipsis = 1;
      i += 2;
    } else {
      return ox_fail(c, PC_ERR_ATTR, "einsum term '%.*s': unexpected '%c'", (int)len, s, s[i]), -1;
    }
  }
  return n;
}

/* term s (len chars) with its "..." replaced by ell into out; 0 when too long */
static int ein_expand(ox_ctx *c, const char *s, size_t len, const char *ell, char *out) {
  size_t k = 0, n_ell = strlen(ell);
  for (size_t i = 0; i < len; i++) {
    size_t add = s[i] == '.' ? n_ell : 1;
    if (k + add > PC_MAX_RANK) return ox_fail(c, PC_ERR_UNSUPPORTED, "einsum term of rank above %d", PC_MAX_RANK), 0;
    if (s[i] == '.') memcpy(out + k, ell, n_ell), i += 2;
    else out[k] = s[i];
    k += add;
  }
  out[k] = 0;
  return 1;
}

/* drops letter position i of t: a size-1 dim (reshape) */
static void ein_drop_dim(ox_ctx *c, ein_term *t, int i) {
  int64_t dims[PC_MAX_RANK];
  int r = t->v->type.rank, k = 0;
  for (int d = 0; d < r; d++)
    if (d != i) dims[k++] = t->v->type.dims[d];
  t->v = pc_reshape(G, t->v, k, dims);
  memmove(t->idx + i, t->idx + i + 1, strlen(t->idx + i));
}

/* a letter repeated in one term (positions p < q) keeps the diagonal: zero off it, then sum over q */
static void ein_diagonal(ox_ctx *c, ein_term *t, int p, int q) {
  pc_value *x = t->v;
  const int64_t *d = x->type.dims;
  if (d[p] != d[q]) {
    ox_fail(c, PC_ERR_SHAPE, "einsum letter '%c' has sizes %lld and %lld in one term", t->idx[p], (long long)d[p], (long long)d[q]);
    return;
  }
  int r = x->type.rank;
  pc_value *on = ox_binary(c, PC_OP_eq, iota(c, PC_i64, r, d, p), iota(c, PC_i64, r, d, q));
  int64_t ax = q;
  t->v = pc_reduce(G, PC_OP_reduce_sum, pc_where(G, on, x, ox_like(c, 0, x)), 1, &ax);
  memmove(t->idx + q, t->idx + q + 1, strlen(t->idx + q));
}

static void ein_diagonals(ox_ctx *c, ein_term *t) {
  for (int q = 1; t->idx[q] && ox_status(c) == PC_OK; q++) {
    const char *p = memchr(t->idx, t->idx[q], (size_t)q);
    if (p) ein_diagonal(c, t, (int)(p - t->idx), q--);
  }
}

/* numpy broadcasting per letter: a size-1 dim where another operand has the letter larger is dropped (the
 * letter then lives in the other operands only); other differing sizes are an error */
static void ein_broadcast(ox_ctx *c, ein_term *t, int n) {
  for (int ch = 0; ch < 128 && ox_status(c) == PC_OK; ch++) {
    int64_t size = 1;
    for (int i = 0; i < n; i++) {
      const char *p = ein_letter((char)ch) ? strchr(t[i].idx, ch) : NULL;
      int64_t d = p ? t[i].v->type.dims[p - t[i].idx] : 1;
      if (d == 1) continue;
      if (size != 1 && d != size) {
        ox_fail(c, PC_ERR_SHAPE, "einsum letter '%c' has sizes %lld and %lld", ch, (long long)size, (long long)d);
        return;
      }
      size = d;
    }
    for (int i = 0; i < n && size != 1; i++) {
      const char *p = ein_letter((char)ch) ? strchr(t[i].idx, ch) : NULL;
      if (p && t[i].v->type.dims[p - t[i].idx] == 1) ein_drop_dim(c, &t[i], (int)(p - t[i].idx));
    }
  }
}

/* sums t over its letters absent from `keep` */
static void ein_reduce(ox_ctx *c, ein_term *t, const char *keep) {
  int64_t axes[PC_MAX_RANK];
  char rest[PC_MAX_RANK + 1];
  int n = 0, k = 0;
  for (int i = 0; t->idx[i]; i++) {
    if (strchr(keep, t->idx[i])) rest[k++] = t->idx[i];
    else axes[n++] = i;
  }
  rest[k] = 0;
  if (!n) return;
  t->v = pc_reduce(G, PC_OP_reduce_sum, t->v, n, axes);
  strcpy(t->idx, rest);
}

/* a · b over shared letters: batch when kept, contracted otherwise */
static void ein_pair(ox_ctx *c, ein_term *a, const ein_term *b, const char *keep) {
  int64_t lc[PC_MAX_RANK], rc[PC_MAX_RANK], lb[PC_MAX_RANK], rb[PC_MAX_RANK];
  int nc = 0, nb = 0;
  char bat[PC_MAX_RANK + 1], out[3 * PC_MAX_RANK + 1];
  for (int i = 0; a->idx[i]; i++) {
    const char *p = strchr(b->idx, a->idx[i]);
    if (!p) continue;
    if (strchr(keep, a->idx[i])) lb[nb] = i, rb[nb] = p - b->idx, bat[nb++] = a->idx[i];
    else lc[nc] = i, rc[nc++] = p - b->idx;
  }
  int k = 0;
  for (int i = 0; i < nb; i++) out[k++] = bat[i];
  for (int i = 0; a->idx[i]; i++)
    if (!strchr(b->idx, a->idx[i])) out[k++] = a->idx[i];
  for (int i = 0; b->idx[i]; i++)
    if (!strchr(a->idx, b->idx[i])) out[k++] = b->idx[i];
  out[k] = 0;
  if (k > PC_MAX_RANK) {
    ox_fail(c, PC_ERR_UNSUPPORTED, "einsum intermediate rank %d exceeds %d", k, PC_MAX_RANK);
    return;
  }
  a->v = pc_dot_general(G, a->v, b->v, nc, lc, rc, nb, lb, rb);
  strcpy(a->idx, out);
}

/* an equation without "->" outputs "..." (when used) then the letters that occur once, in alphabetical order */
static void ein_implicit_output(char *buf, size_t cap) {
  int count[256] = {0};
  for (const char *p = buf; *p; p++) count[(unsigned char)*p]++;
  size_t k = strlen(buf);
  int ell = strstr(buf, "...") != NULL;
  if (k + 5 > cap) return;
  buf[k++] = '-', buf[k++] = '>';
  if (ell) buf[k++] = '.', buf[k++] = '.', buf[k++] = '.';
  for (int ch = 'A'; ch <= 'z' && k + 1 < cap; ch++)
    if (ein_letter((char)ch) && count[ch] == 1) buf[k++] = (char)ch;
  buf[k] = 0;
}

/* the inputs' terms with "..." spelled as unused letters (right-aligned: an operand with fewer ellipsis dims
 * takes the last ones), the output likewise with all of them */
static int ein_terms(ox_ctx *c, const char *lhs, const char *rhs, ein_term *t, char *outidx) {
  const char *s = lhs, *start[6];
  size_t len[6];
  int ell_rank[6], n_ell = 0, has;
  for (int i = 0; i < c->n_in; i++) {
    const char *comma = strchr(s, ',');
    start[i] = s, len[i] = comma ? (size_t)(comma - s) : strlen(s);
    s = comma ? comma + 1 : s + len[i];
    t[i].v = ox_in_req(c, i);
    int n = ein_count_letters(c, start[i], len[i], &has);
    if (!t[i].v || n < 0) return 0;
    ell_rank[i] = t[i].v->type.rank - n;
    if (ell_rank[i] < 0 || (!has && ell_rank[i] != 0))
      return ox_fail(c, PC_ERR_SHAPE, "einsum term %d '%.*s' does not match rank %d", i, (int)len[i], start[i], t[i].v->type.rank), 0;
    if (ell_rank[i] > n_ell) n_ell = ell_rank[i];
  }
  char fresh[PC_MAX_RANK + 1];
  int k = 0;
  for (int ch = 'A'; ch <= 'z' && k < n_ell; ch++)
    if (ein_letter((char)ch) && !strchr(lhs, ch) && !strchr(rhs, ch)) fresh[k++] = (char)ch;
  fresh[k] = 0;
  for (int i = 0; i < c->n_in; i++)
    if (!ein_expand(c, start[i], len[i], fresh + n_ell - ell_rank[i], t[i].idx)) return 0;
  if (ein_count_letters(c, rhs, strlen(rhs), &has) < 0) return 0;
  if (n_ell && !has) return ox_fail(c, PC_ERR_ATTR, "einsum output has no '...' for the inputs' %d ellipsis dims", n_ell), 0;
  if (!ein_expand(c, rhs, strlen(rhs), fresh, outidx)) return 0;
  for (int i = 0; outidx[i]; i++)
    if (strchr(outidx + i + 1, outidx[i])) return ox_fail(c, PC_ERR_ATTR, "einsum output repeats '%c'", outidx[i]), 0;
  return 1;
}

pc_status ox_op_Einsum(ox_ctx *c) {
  const char *eq = ox_attr_str(c, "equation", "");
  char buf[256];
  size_t k = 0;
  for (const char *p = eq; *p && k < sizeof buf - 1; p++)
    if (*p != ' ') buf[k++] = *p;
  buf[k] = 0;
  if (c->n_in > 6) return ox_fail(c, PC_ERR_UNSUPPORTED, "einsum of %d operands (at most 6)", c->n_in);
  if (!strstr(buf, "->")) ein_implicit_output(buf, sizeof buf);
  char *arrow = strstr(buf, "->");
  if (!arrow) return ox_fail(c, PC_ERR_UNSUPPORTED, "einsum equation '%s' is too long", eq);
  *arrow = 0;
  char outidx[PC_MAX_RANK + 1];
  ein_term *t = calloc((size_t)c->n_in + 1, sizeof *t);
  if (!t) return ox_fail(c, PC_ERR_NOMEM, "out of memory");
  if (ein_terms(c, buf, arrow + 2, t, outidx)) {
    for (int i = 0; i < c->n_in && ox_status(c) == PC_OK; i++) ein_diagonals(c, &t[i]);
    if (ox_status(c) == PC_OK) ein_broadcast(c, t, c->n_in);
  }
  for (int i = 0; i < c->n_in && ox_status(c) == PC_OK; i++) {
    char keep[8 * PC_MAX_RANK + 1];
    strcpy(keep, outidx); /* letters needed later: the output and every later operand */
    for (int j = i + 1; j < c->n_in; j++) strcat(keep, t[j].idx);
    if (i > 0) {
      ein_reduce(c, &t[i], strcat(strcpy((char[8 * PC_MAX_RANK + 1]){0}, keep), t[0].idx));
      ein_pair(c, &t[0], &t[i], keep);
    }
    ein_reduce(c, &t[0], keep);
  }
  pc_value *y = ox_status(c) == PC_OK ? t[0].v : NULL;
  if (y) {
    int64_t perm[PC_MAX_RANK];
    int r = (int)strlen(outidx), id = 1;
    for (int i = 0; i < r; i++) {
      const char *p = strchr(t[0].idx, outidx[i]);
      if (!p) { free(t); return ox_fail(c, PC_ERR_ATTR, "output letter '%c' is in no input", outidx[i]); }
      perm[i] = p - t[0].idx;
      id &= perm[i] == i;
    }
    if (!id) y = pc_transpose(G, y, perm);
  }
  free(t);
  return ox_out(c, 0, y);
}

/* ---------------------------------------------------------------- softmax family */

typedef enum { SM_SOFT, SM_LOG, SM_HARD } sm_kind;

/* softmax over one axis of x (any rank) */
static pc_value *softmax_axis(ox_ctx *c, pc_value *x, int axis, sm_kind kind) {
  int64_t ax = axis;
  if (kind == SM_HARD) {
    pc_attr a[2] = {pc_a_int("axis", axis), pc_a_int("last", 0)};
    pc_value *am = ox_unsqueeze(c, pc_build(G, PC_OP_argmax, &x, 1, a, 2), 1, &ax);
    pc_value *io = iota(c, PC_i64, x->type.rank, x->type.dims, axis);
    return pc_convert(G, ox_binary(c, PC_OP_eq, io, am), x->type.dtype);
  }
  return fc_softmax(G, x, ax, kind == SM_LOG);
}

static pc_status softmax_op(ox_ctx *c, sm_kind kind) {
  pc_value *x = X0;
  if (!check_static(c, x)) return ox_status(c);
  int r = x->type.rank;
  if (kind != SM_HARD && !ox_require_float(c, x)) return ox_status(c);
  if (c->opset >= 13) {
    int axis = ox_axis(c, ox_attr_int(c, "axis", -1), r);
    return axis < 0 ? ox_status(c) : ox_out(c, 0, softmax_axis(c, x, axis, kind));
  }
  /* before opset 13: the input is seen as 2-D [prod(dims[:axis]), prod(dims[axis:])] */
  int64_t axis = ox_attr_int(c, "axis", 1);
  if (axis < 0) axis += r;
  if (axis < 0 || axis > r) return ox_fail(c, PC_ERR_ATTR, "axis is out of range for rank %d", r);
  int64_t s2[2] = {shape_numel((int)axis, x->type.dims), shape_numel(r - (int)axis, x->type.dims + axis)};
  pc_value *y = softmax_axis(c, ox_reshape(c, x, 2, s2), 1, kind);
  return ox_out(c, 0, ox_reshape(c, y, r, x->type.dims));
}

pc_status ox_op_Softmax(ox_ctx *c) { return softmax_op(c, SM_SOFT); }
pc_status ox_op_LogSoftmax(ox_ctx *c) { return softmax_op(c, SM_LOG); }
pc_status ox_op_Hardmax(ox_ctx *c) { return softmax_op(c, SM_HARD); }
