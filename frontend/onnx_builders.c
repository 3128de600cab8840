/* frontend/onnx_builders.c: small prim builders the ONNX op files share: arithmetic with a scalar, iota,
 * reading axes, shape checks. */
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
