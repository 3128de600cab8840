/* frontend/onnx_reduce.c: decompositions of the ONNX reductions into prims: the Reduce ops, ArgMax and ArgMin,
 * CumSum and CumProd, TopK, NonZero, and the softmax family (Softmax, LogSoftmax, Hardmax). */
#include "frontend/onnx_internal.h"

#include <math.h>

#define G (c->g)
#define X0 ox_in_req(c, 0)

/* ---------------------------------------------------------------- reductions */

typedef enum { RED_SUM, RED_MEAN, RED_MAX, RED_MIN, RED_PROD, RED_L1, RED_L2, RED_LOGSUM, RED_LOGSUMEXP, RED_SUMSQ } red_kind;

/* reads axes and keepdims; returns the number of axes (all when empty), -1 for a no-op, -2 on failure */
static int reduce_axes(ox_ctx *c, pc_value *x, int input_from, int64_t *axes) {
  int n = ox_read_axes(c, input_from, axes);
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

/* CumProd: y[i] = prod of x[j] over the j a triangular mask keeps, as reduce_prod over a new axis */
pc_status ox_op_CumProd(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0);
  int64_t axis;
  if (!ox_check_static_input(c, x)) return ox_status(c);
  if (ox_const_ints(c, 1, &axis, 1) != 1) return ox_status(c) ? ox_status(c) : ox_fail(c, PC_ERR_ATTR, "axis must be a scalar");
  int r = x->type.rank, a = ox_axis(c, axis, r);
  if (a < 0) return ox_status(c);
  if (r + 1 > PC_MAX_RANK) return ox_fail(c, PC_ERR_RANGE, "rank %d is too large", r);
  int64_t e[PC_MAX_RANK], dims[PC_MAX_RANK];
  for (int i = 0, k = 0; i <= r; i++) e[i] = i == a ? x->type.dims[a] : x->type.dims[k++];
  for (int i = 0; i < r; i++) dims[i] = i < a ? i : i + 1; /* x's axis becomes the source index j at a + 1 */
  pc_value *xb = pc_broadcast_in_dim(G, x, r + 1, e, dims);
  pc_value *ii = ox_iota(c, PC_i64, r + 1, e, a), *jj = ox_iota(c, PC_i64, r + 1, e, a + 1);
  int excl = ox_attr_int(c, "exclusive", 0) != 0, rev = ox_attr_int(c, "reverse", 0) != 0;
  static const pc_op masks[2][2] = {{PC_OP_le, PC_OP_lt}, {PC_OP_ge, PC_OP_gt}}; /* [reverse][exclusive]: j vs i */
  pc_value *keep = ox_binary(c, masks[rev][excl], jj, ii);
  pc_value *v = xb ? pc_where(G, keep, xb, pc_full_like(G, 1, xb)) : NULL;
  int64_t red = a + 1;
  return ox_out(c, 0, pc_reduce(G, PC_OP_reduce_prod, v, 1, &red));
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

/* ---------------------------------------------------------------- softmax family */

typedef enum { SM_SOFT, SM_LOG, SM_HARD } sm_kind;

/* softmax over one axis of x (any rank) */
static pc_value *softmax_axis(ox_ctx *c, pc_value *x, int axis, sm_kind kind) {
  int64_t ax = axis;
  if (kind == SM_HARD) {
    pc_attr a[2] = {pc_a_int("axis", axis), pc_a_int("last", 0)};
    pc_value *am = ox_unsqueeze(c, pc_build(G, PC_OP_argmax, &x, 1, a, 2), 1, &ax);
    pc_value *io = ox_iota(c, PC_i64, x->type.rank, x->type.dims, axis);
    return pc_convert(G, ox_binary(c, PC_OP_eq, io, am), x->type.dtype);
  }
  return fc_softmax(G, x, ax, kind == SM_LOG);
}

static pc_status softmax_op(ox_ctx *c, sm_kind kind) {
  pc_value *x = X0;
  if (!ox_check_static(c, x)) return ox_status(c);
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
  int64_t s2[2] = {ox_shape_numel((int)axis, x->type.dims), ox_shape_numel(r - (int)axis, x->type.dims + axis)};
  pc_value *y = softmax_axis(c, ox_reshape(c, x, 2, s2), 1, kind);
  return ox_out(c, 0, ox_reshape(c, y, r, x->type.dims));
}

pc_status ox_op_Softmax(ox_ctx *c) { return softmax_op(c, SM_SOFT); }
pc_status ox_op_LogSoftmax(ox_ctx *c) { return softmax_op(c, SM_LOG); }
pc_status ox_op_Hardmax(ox_ctx *c) { return softmax_op(c, SM_HARD); }
