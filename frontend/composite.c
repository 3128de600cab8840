/* frontend/composite.c: softmax, log-softmax, GELU and normalization, shared by the ONNX and aten:: frontends. */
#include "frontend/composite.h"

#include <math.h>

/* op over a and b with numpy broadcasting */
static pc_value *bin(pc_graph *g, pc_op op, pc_value *a, pc_value *b) {
  if (!pc_broadcast_pair(g, &a, &b)) return NULL;
  pc_value *in[2] = {a, b};
  return pc_build(g, op, in, 2, NULL, 0);
}

static pc_value *mul_s(pc_graph *g, pc_value *x, double s) { return x ? pc_mul(g, x, pc_full_like(g, s, x)) : NULL; }
static pc_value *add_s(pc_graph *g, pc_value *x, double s) { return x ? pc_add(g, x, pc_full_like(g, s, x)) : NULL; }

/* x reduced over axes, the reduced dims kept as 1 (ONNX's keepdims), so the result broadcasts back */
static pc_value *reduce_keep(pc_graph *g, pc_op op, pc_value *x, int n, const int64_t *axes) {
  pc_value *y = x ? pc_reduce(g, op, x, n, axes) : NULL;
  if (!y) return NULL;
  int64_t dims[PC_MAX_RANK];
  for (int i = 0; i < x->type.rank; i++) {
    int red = 0;
    for (int j = 0; j < n; j++) red |= axes[j] == i;
    dims[i] = red ? 1 : x->type.dims[i];
  }
  return pc_reshape(g, y, x->type.rank, dims);
}

/* A half-type x (f16, bf16, f8) goes in as f32 and the result comes back rounded once: the composite is one op
 * of the model, and rounding each of its prims to the narrow type would only lose precision (and cost a convert
 * per prim), as torch's CPU kernels and ONNX's LayerNormalization (stash_type) compute in f32 too */

pc_value *fc_softmax(pc_graph *g, pc_value *x, int64_t axis, int log) {
  if (x && pc_dtype_is_narrow_float(x->type.dtype)) return pc_convert(g, fc_softmax(g, pc_convert(g, x, PC_f32), axis, log), x->type.dtype);
  pc_value *m = reduce_keep(g, PC_OP_reduce_max, x, 1, &axis);
  pc_value *z = m ? bin(g, PC_OP_sub, x, m) : NULL;
  pc_value *e = z ? pc_exp(g, z) : NULL;
  pc_value *s = reduce_keep(g, PC_OP_reduce_sum, e, 1, &axis);
  if (!s) return NULL;
  return log ? bin(g, PC_OP_sub, z, pc_log(g, s)) : bin(g, PC_OP_div, e, s);
}

pc_value *fc_gelu(pc_graph *g, pc_value *x, int tanh_approx) {
  if (!x) return NULL;
  if (pc_dtype_is_narrow_float(x->type.dtype)) return pc_convert(g, fc_gelu(g, pc_convert(g, x, PC_f32), tanh_approx), x->type.dtype);
  pc_value *inner;
  if (tanh_approx) {
    pc_value *x3 = pc_mul(g, pc_mul(g, x, x), x);
    inner = pc_tanh(g, mul_s(g, pc_add(g, x, mul_s(g, x3, 0.044715)), sqrt(2.0 / M_PI)));
  } else {
    inner = pc_erf(g, mul_s(g, x, M_SQRT1_2));
  }
  /* (x / 2) * (1 + inner), as PyTorch and ONNX's reference order it: x * (1 + inner) overflows near the
   * float max; otherwise halving is exact and the two orders round alike */
  return pc_mul(g, mul_s(g, x, 0.5), add_s(g, inner, 1));
}

int fc_moments(pc_graph *g, pc_value *x, int n, const int64_t *axes, pc_value **mean, pc_value **var,
               pc_value **xc) {
  *mean = *var = *xc = NULL;
  if (!x) return 0;
  double cnt = 1;
  for (int i = 0; i < n; i++) cnt *= (double)x->type.dims[axes[i]];
  double inv = cnt > 0 ? 1.0 / cnt : 0;
  *mean = mul_s(g, reduce_keep(g, PC_OP_reduce_sum, x, n, axes), inv);
  *xc = *mean ? bin(g, PC_OP_sub, x, *mean) : NULL;
  *var = *xc ? mul_s(g, reduce_keep(g, PC_OP_reduce_sum, pc_mul(g, *xc, *xc), n, axes), inv) : NULL;
  return *var != NULL;
}

pc_value *fc_layer_norm(pc_graph *g, pc_value *x, int n, const int64_t *axes, double eps, pc_value **mean,
                        pc_value **inv) {
  pc_value *m, *var, *xc;
  if (!fc_moments(g, x, n, axes, &m, &var, &xc)) return NULL;
  pc_value *r = pc_rsqrt(g, add_s(g, var, eps));
  if (mean) *mean = m;
  if (inv) *inv = r;
  return r ? bin(g, PC_OP_mul, xc, r) : NULL;
}
