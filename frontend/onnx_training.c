/* frontend/onnx_training.c: decompositions of the ONNX ops of training into prims: Dropout (an identity at
 * inference, a seeded mask drawn at import in training mode). */
#include "frontend/onnx_internal.h"

#include <stdlib.h>

#define G (c->g)

/* ---------------------------------------------------------------- Dropout */

/* Training-mode Dropout as ONNX's reference runs it: mask = RandomState(seed).uniform(0, 1, shape) >= ratio
 * (numpy's legacy MT19937), y = mask * x * (1 / (1 - ratio)). The mask depends on the shape, the ratio and the seed
 * only, so it is drawn here into a constant; r is the ratio input (NULL: the default 0.5). */
static pc_status dropout_seeded(ox_ctx *c, pc_value *x, pc_value *r, double ratio) {
  if (!ox_require_float(c, x)) return ox_status(c);
  if (!(ratio > 0 && ratio < 1)) return ox_fail(c, PC_ERR_ATTR, "training-mode ratio %g is outside [0, 1)", ratio);
  int64_t seed = ox_attr_int(c, "seed", 0);
  if (seed < 0 || seed > (int64_t)UINT32_MAX)
    return ox_fail(c, PC_ERR_UNSUPPORTED, "seed %lld is outside [0, 2^32 - 1], where numpy's RandomState (ONNX's reference) takes it", (long long)seed);
  if (!pc_type_is_static(&x->type))
    return ox_fail(c, PC_ERR_UNSUPPORTED, "training-mode Dropout draws its mask at compile time and needs a static input shape");
  pc_type mt = pc_type_make(PC_bool, x->type.rank, x->type.dims);
  int64_t n = pc_type_numel(&mt);
  uint8_t *bits = malloc(n > 0 ? (size_t)n : 1);
  if (!bits) return ox_fail(c, PC_ERR_NOMEM, "no memory for a mask of %lld elements", (long long)n);
  pc_mt19937 rng;
  pc_mt19937_seed(&rng, (uint32_t)seed);
  for (int64_t i = 0; i < n; i++) bits[i] = pc_mt19937_double(&rng) >= ratio; /* numpy compares in double */
  pc_value *mask = pc_const(G, mt, bits);
  free(bits);
  /* the scale is computed in the ratio's dtype, as numpy does for mask * X * scale */
  pc_value *scale = r ? pc_div(G, ox_like(c, 1, r), pc_sub(G, ox_like(c, 1, r), r)) : pc_scalar(G, x->type.dtype, 1 / (1 - ratio));
  if (scale && scale->type.dtype != x->type.dtype) scale = pc_convert(G, scale, x->type.dtype);
  if (scale && scale->type.rank) scale = ox_reshape(c, scale, 0, NULL);
  /* x * (mask * scale) rounds like numpy's (mask * x) * scale (x * 1 and x * 0 are exact, and 0 * scale is 0), and
   * mask * scale folds into one constant */
  ox_out(c, 0, ox_binary(c, PC_OP_mul, x, ox_binary(c, PC_OP_mul, pc_convert(G, mask, x->type.dtype), scale)));
  if (ox_has_out(c, 1)) ox_out(c, 1, mask);
  return ox_status(c);
}

pc_status ox_op_Dropout(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0);
  if (!x) return ox_status(c);
  double ratio = ox_attr_float(c, "ratio", 0.5);
  int64_t training = 0;
  if (c->opset >= 12) {
    double rv;
    int64_t tv;
    /* the ratio matters only in training mode: read it only then */
    int nt = ox_has_in(c, 2) ? ox_const_ints(c, 2, &tv, 1) : -1;
    if (nt == -2) return ox_status(c);
    training = nt == 1 ? tv : 0;
    int nr = training && ox_has_in(c, 1) ? ox_const_floats(c, 1, &rv, 1) : -1;
    if (nr == -2) return ox_status(c);
    ratio = nr == 1 ? rv : 0.5;
  } else if (c->opset < 7) {
    training = !ox_attr_int(c, "is_test", 0);
  }
  if (training && ratio != 0) {
    /* the seed attribute exists from opset 12, where the ratio is input 1 */
    if (c->opset >= 12 && ox_has_attr(c, "seed")) return dropout_seeded(c, x, ox_has_in(c, 1) ? ox_in(c, 1) : NULL, ratio);
    return ox_fail(c, PC_ERR_UNSUPPORTED,
                   "training-mode Dropout (ratio %g) without a seed attribute draws a fresh random mask on every run, "
                   "which no compiled model can reproduce; only seeded training-mode Dropout is supported", ratio);
  }
  ox_out(c, 0, x);
  if (ox_has_out(c, 1))
    ox_out(c, 1, c->opset >= 10 ? pc_full(G, PC_bool, 1, x->type.rank, x->type.dims) : ox_like(c, 1, x));
  return ox_status(c);
}
