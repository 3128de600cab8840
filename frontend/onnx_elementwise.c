/* frontend/onnx_elementwise.c: decompositions of the elementwise ONNX ops into prims: unary math, activations
 * (Swish and SwiGLU too), arithmetic, comparisons, logic and bitwise ops, variadic Max/Min/Sum/Mean, Clip,
 * Where, Cast, CastLike and BitCast, Identity and Constant. */
#include "frontend/onnx_internal.h"

#include <math.h>
#include <string.h>

#define G (c->g)
#define X0 ox_in_req(c, 0)

static pc_value *rsub_s(ox_ctx *c, double s, pc_value *x) { return x ? pc_sub(G, ox_like(c, s, x), x) : NULL; }

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
  return ox_out(c, 0, ox_mul_s(c, pc_sub(G, pc_exp(G, x), pc_exp(G, pc_neg(G, x))), 0.5));
}
pc_status ox_op_Cosh(ox_ctx *c) {
  pc_value *x = X0;
  return ox_out(c, 0, ox_mul_s(c, pc_add(G, pc_exp(G, x), pc_exp(G, pc_neg(G, x))), 0.5));
}
pc_status ox_op_Asinh(ox_ctx *c) {
  pc_value *x = X0;
  return ox_out(c, 0, pc_log(G, pc_add(G, x, pc_sqrt(G, ox_add_s(c, pc_mul(G, x, x), 1)))));
}
pc_status ox_op_Acosh(ox_ctx *c) {
  pc_value *x = X0;
  return ox_out(c, 0, pc_log(G, pc_add(G, x, pc_sqrt(G, ox_add_s(c, pc_mul(G, x, x), -1)))));
}
pc_status ox_op_Atanh(ox_ctx *c) {
  pc_value *x = X0;
  return ox_out(c, 0, ox_mul_s(c, pc_log(G, pc_div(G, ox_add_s(c, x, 1), rsub_s(c, 1, x))), 0.5));
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
  return ox_out(c, 0, clamp_s(c, ox_add_s(c, ox_mul_s(c, X0, a), b), 0, 1));
}
pc_status ox_op_HardSwish(ox_ctx *c) {
  pc_value *x = X0;
  return ox_out(c, 0, pc_mul(G, x, clamp_s(c, ox_add_s(c, ox_mul_s(c, x, 1.0 / 6), 0.5), 0, 1)));
}
pc_status ox_op_LeakyRelu(ox_ctx *c) {
  pc_value *x = X0;
  return ox_out(c, 0, where_neg(c, x, ox_mul_s(c, x, ox_attr_float(c, "alpha", 0.01))));
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
  return ox_out(c, 0, where_neg(c, x, ox_mul_s(c, pc_expm1(G, x), ox_attr_float(c, "alpha", 1.0))));
}
pc_status ox_op_Selu(ox_ctx *c) {
  pc_value *x = X0;
  double a = ox_attr_float(c, "alpha", 1.67326319217681884765625), gm = ox_attr_float(c, "gamma", 1.05070102214813232421875);
  pc_value *neg = ox_mul_s(c, pc_expm1(G, x), a);
  pc_value *y = x ? pc_where(G, pc_le(G, x, ox_like(c, 0, x)), neg, x) : NULL;
  return ox_out(c, 0, ox_mul_s(c, y, gm));
}
pc_status ox_op_Celu(ox_ctx *c) {
  pc_value *x = X0;
  double a = ox_attr_float(c, "alpha", 1.0);
  pc_value *neg = ox_mul_s(c, pc_expm1(G, ox_mul_s(c, x, 1.0 / a)), a);
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
  return ox_out(c, 0, x ? pc_div(G, x, ox_add_s(c, pc_abs(G, x), 1)) : NULL);
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
  pc_value *hi = pc_where(G, pc_gt(G, x, ox_like(c, l, x)), ox_add_s(c, x, -b), ox_like(c, 0, x));
  return ox_out(c, 0, pc_where(G, pc_lt(G, x, ox_like(c, -l, x)), ox_add_s(c, x, b), hi));
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

/* x * sigmoid(alpha * x) */
static pc_value *swish(ox_ctx *c, pc_value *x, double alpha) {
  if (!ox_require_float(c, x)) return NULL;
  return pc_mul(G, x, pc_sigmoid(G, alpha == 1 ? x : ox_binary_s(c, PC_OP_mul, x, alpha)));
}

pc_status ox_op_Swish(ox_ctx *c) { return ox_out(c, 0, swish(c, ox_in_req(c, 0), ox_attr_float(c, "alpha", 1))); }

pc_status ox_op_SwiGLU(ox_ctx *c) {
  pc_value *a = ox_in_req(c, 0), *b = ox_in_req(c, 1);
  if (!a || !b) return ox_status(c);
  if (!pc_type_equal(&a->type, &b->type)) return ox_fail(c, PC_ERR_SHAPE, "A and B must have one shape and type");
  return ox_out(c, 0, pc_mul(G, swish(c, a, ox_attr_float(c, "alpha", 1)), b));
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

pc_status ox_op_BitCast(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0);
  pc_dtype to;
  if (!x || !ox_attr_dtype(c, "to", x ? x->type.dtype : PC_f32, &to)) return ox_status(c);
  if (!ox_has_attr(c, "to")) return ox_fail(c, PC_ERR_ATTR, "attribute to is required");
  if (pc_dtype_size(to) != pc_dtype_size(x->type.dtype) || to == PC_bool)
    return ox_fail(c, PC_ERR_TYPE, "cannot reinterpret %s as %s", pc_dtype_name(x->type.dtype), pc_dtype_name(to));
  pc_attr a = pc_a_dtype("dtype", to);
  return ox_out(c, 0, pc_build(G, PC_OP_bitcast, &x, 1, &a, 1));
}
