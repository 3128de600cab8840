/* frontend/onnx_builders.c: small prim builders the ONNX op files share: arithmetic with a scalar, iota,
 * constants, broadcasts along an axis, per-channel parameters, a broadcasting where, reading axes, shape
 * and rank checks. */
#include "frontend/onnx_internal.h"

#define G (c->g)

/* ---------------------------------------------------------------- small builders */

pc_value *ox_mul_s(ox_ctx *c, pc_value *x, double s) { return x ? pc_mul(G, x, ox_like(c, s, x)) : NULL; }
pc_value *ox_add_s(ox_ctx *c, pc_value *x, double s) { return x ? pc_add(G, x, ox_like(c, s, x)) : NULL; }

pc_value *ox_iota(ox_ctx *c, pc_dtype dt, int rank, const int64_t *shape, int axis) {
  pc_attr a[3] = {pc_a_dtype("dtype", dt), pc_a_ints("shape", shape, rank), pc_a_int("axis", axis)};
  return pc_build(G, PC_OP_iota, NULL, 0, a, 3);
}

/* reads the axes of a reduction-like op: an attribute before `input_from`, input 1 from then on */
int ox_read_axes(ox_ctx *c, int input_from, int64_t *axes) {
  if (c->opset >= input_from) return ox_const_ints(c, 1, axes, PC_MAX_RANK);
  return ox_attr_ints(c, "axes", axes, PC_MAX_RANK);
}

int64_t ox_shape_numel(int n, const int64_t *d) {
  int64_t p = 1;
  for (int i = 0; i < n; i++) p *= d[i];
  return p;
}

int ox_check_static(ox_ctx *c, const pc_value *x) {
  if (!x) return 0;
  if (pc_type_is_static(&x->type)) return 1;
  ox_fail(c, PC_ERR_UNSUPPORTED, "needs a static shape, the input has a symbolic dim");
  return 0;
}

/* a constant of dtype dt from doubles: built as f64 and converted, so every float dtype works */
pc_value *ox_const_of(ox_ctx *c, pc_dtype dt, int rank, const int64_t *dims, const double *v) {
  return pc_convert(G, pc_const(G, pc_type_make(PC_f64, rank, dims), v), dt);
}

/* v, a vector, broadcast along dim `axis` of a tensor of the given shape */
pc_value *ox_along(ox_ctx *c, pc_value *v, int rank, const int64_t *dims, int64_t axis) {
  return v ? pc_broadcast_in_dim(G, v, rank, dims, &axis) : NULL;
}

/* per-channel parameter p ([C]) broadcast to x's shape on dim 1, checked */
pc_value *ox_per_channel(ox_ctx *c, pc_value *p, const pc_value *x, const char *what) {
  if (!p || !x) return NULL;
  if (p->type.rank != 1 || p->type.dims[0] != x->type.dims[1])
    return ox_fail(c, PC_ERR_SHAPE, "%s must have shape [%lld]", what, (long long)x->type.dims[1]), NULL;
  if (p->type.dtype != x->type.dtype) p = pc_convert(G, p, x->type.dtype);
  return ox_along(c, p, x->type.rank, x->type.dims, 1);
}

int ox_check_static_input(ox_ctx *c, const pc_value *x) {
  if (!x) return 0;
  if (pc_type_is_static(&x->type)) return 1;
  ox_fail(c, PC_ERR_UNSUPPORTED, "needs a static input shape, the input has a symbolic dim");
  return 0;
}

int ox_check_rank(ox_ctx *c, const pc_value *x, int lo, int hi) {
  if (!x) return 0;
  if (x->type.rank >= lo && x->type.rank <= hi) return 1;
  ox_fail(c, PC_ERR_SHAPE, "input has rank %d, expected %d to %d", x->type.rank, lo, hi);
  return 0;
}

/* product of n dims; OX_MAX_NUMEL + 1 when it is larger (or overflows) */
int64_t ox_dims_prod(const int64_t *d, int n) {
  int64_t p = 1;
  for (int i = 0; i < n; i++)
    if (__builtin_mul_overflow(p, d[i], &p) || p > OX_MAX_NUMEL) return OX_MAX_NUMEL + 1;
  return p;
}

pc_value *ox_scalar(ox_ctx *c, pc_dtype dt, double v) { return pc_scalar(G, dt, v); }

/* numpy-broadcast binary op where the second operand is a scalar of a's dtype */
pc_value *ox_binary_s(ox_ctx *c, pc_op op, pc_value *a, double s) {
  return a ? ox_binary(c, op, a, ox_scalar(c, a->type.dtype, s)) : NULL;
}

/* where(cond, a, b) with numpy broadcasting of all three */
pc_value *ox_where(ox_ctx *c, pc_value *cond, pc_value *a, pc_value *b) {
  if (!ox_broadcast3(c, &cond, &a, &b)) return NULL;
  return pc_where(G, cond, a, b);
}
