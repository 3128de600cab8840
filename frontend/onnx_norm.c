/* frontend/onnx_norm.c: decompositions of the ONNX normalizations into prims: BatchNormalization (training mode
 * too), InstanceNormalization, LayerNormalization, RMSNormalization, GroupNormalization, LRN,
 * MeanVarianceNormalization and LpNormalization. */
#include "frontend/onnx_internal.h"

#define G (c->g)

/* ---------------------------------------------------------------- normalization */

/* mean and population variance of x over axes (kept as size-1 dims); *xc = x - mean; x's shape must be static */
static int moments(ox_ctx *c, pc_value *x, int n, const int64_t *axes, pc_value **mean, pc_value **var,
                   pc_value **xc) {
  return ox_check_static_input(c, x) && fc_moments(G, x, n, axes, mean, var, xc);
}

static pc_value *rsqrt_eps(ox_ctx *c, pc_value *var, double eps) { return var ? pc_rsqrt(G, ox_add_s(c, var, eps)) : NULL; }

/* running statistic update: old * momentum + cur * (1 - momentum) */
static pc_value *running(ox_ctx *c, pc_value *old, pc_value *cur, double momentum) {
  if (!old || !cur) return NULL;
  return pc_add(G, ox_mul_s(c, pc_convert(G, old, cur->type.dtype), momentum), ox_mul_s(c, cur, 1.0 - momentum));
}

static pc_status batchnorm_training(ox_ctx *c, pc_value *x, pc_value *sc, pc_value *b, double eps) {
  int64_t axes[PC_MAX_RANK], n = 0, C = x->type.dims[1];
  for (int i = 0; i < x->type.rank; i++)
    if (i != 1) axes[n++] = i;
  pc_value *mean, *var, *xc;
  if (!moments(c, x, (int)n, axes, &mean, &var, &xc)) return ox_status(c);
  pc_value *y = ox_binary(c, PC_OP_mul, xc, rsqrt_eps(c, var, eps));
  y = pc_add(G, pc_mul(G, y, ox_per_channel(c, sc, x, "scale")), ox_per_channel(c, b, x, "B"));
  double m = ox_attr_float(c, "momentum", 0.9);
  pc_value *mv = ox_reshape(c, mean, 1, &C), *vv = ox_reshape(c, var, 1, &C);
  if (ox_out(c, 0, y) != PC_OK) return ox_status(c);
  if (ox_has_out(c, 1)) ox_out(c, 1, running(c, ox_in(c, 3), mv, m));
  if (ox_has_out(c, 2)) ox_out(c, 2, running(c, ox_in(c, 4), vv, m));
  return ox_status(c);
}

pc_status ox_op_BatchNormalization(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0), *sc = ox_in_req(c, 1), *b = ox_in_req(c, 2), *mean = ox_in_req(c, 3),
           *var = ox_in_req(c, 4);
  if (!x || !sc || !b || !mean || !var || !ox_check_rank(c, x, 2, PC_MAX_RANK) || !ox_require_float(c, x))
    return ox_status(c);
  double eps = ox_attr_float(c, "epsilon", 1e-5);
  if (c->opset < 9 && ox_attr_int(c, "spatial", 1) == 0)
    return ox_fail(c, PC_ERR_UNSUPPORTED, "spatial=0 (per-activation statistics) is not supported");
  if (c->opset >= 14 && ox_attr_int(c, "training_mode", 0)) return batchnorm_training(c, x, sc, b, eps);
  if (ox_has_out(c, 1) || ox_has_out(c, 2))
    return ox_fail(c, PC_ERR_UNSUPPORTED, "running statistics outputs are only produced in training mode");
  /* fold the statistics into one scale and shift per channel (constants when the parameters are) */
  pc_dtype dt = x->type.dtype;
  pc_value *inv = pc_mul(G, pc_convert(G, sc, dt), rsqrt_eps(c, pc_convert(G, var, dt), eps));
  pc_value *shift = inv ? pc_sub(G, pc_convert(G, b, dt), pc_mul(G, pc_convert(G, mean, dt), inv)) : NULL;
  pc_value *y = pc_add(G, pc_mul(G, x, ox_per_channel(c, inv, x, "scale")), ox_per_channel(c, shift, x, "B"));
  return ox_out(c, 0, y);
}

/* the dtype statistics are computed in: f32 for half types, unless stash_type says otherwise where the op has it */
static pc_dtype f32_for_half(pc_dtype dt) { return dt == PC_f16 || dt == PC_bf16 ? PC_f32 : dt; }
static pc_dtype stash_dtype(ox_ctx *c, pc_dtype dt) { return ox_attr_int(c, "stash_type", 1) == 1 ? f32_for_half(dt) : dt; }

/* a half-type x computes in f32 and rounds once, as the normalizations with a stash_type do by default */
pc_status ox_op_InstanceNormalization(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0), *sc = ox_in_req(c, 1), *b = ox_in_req(c, 2), *mean, *var, *xc;
  int64_t axes[PC_MAX_RANK];
  int n = ox_spatial_axes(c, x, axes);
  if (n < 0 || !sc || !b || !ox_require_float(c, x)) return ox_status(c);
  pc_value *xs = pc_convert(G, x, f32_for_half(x->type.dtype));
  if (!moments(c, xs, n, axes, &mean, &var, &xc)) return ox_status(c);
  pc_value *y = ox_binary(c, PC_OP_mul, xc, rsqrt_eps(c, var, ox_attr_float(c, "epsilon", 1e-5)));
  y = y ? pc_add(G, pc_mul(G, y, ox_per_channel(c, sc, xs, "scale")), ox_per_channel(c, b, xs, "B")) : NULL;
  return ox_out(c, 0, pc_convert(G, y, x->type.dtype));
}

/* scale and bias (numpy-broadcast) applied to y; either may be NULL */
static pc_value *affine(ox_ctx *c, pc_value *y, pc_value *scale, pc_value *bias) {
  if (y && scale) y = ox_binary(c, PC_OP_mul, y, pc_convert(G, scale, y->type.dtype));
  if (y && bias) y = ox_binary(c, PC_OP_add, y, pc_convert(G, bias, y->type.dtype));
  return y;
}

pc_status ox_op_LayerNormalization(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0), *mean = NULL;
  if (!ox_require_float(c, x)) return ox_status(c);
  int r = x->type.rank, ax = ox_axis(c, ox_attr_int(c, "axis", -1), r);
  if (ax < 0) return ox_status(c);
  int64_t axes[PC_MAX_RANK];
  for (int i = ax; i < r; i++) axes[i - ax] = i;
  pc_value *xs = pc_convert(G, x, stash_dtype(c, x->type.dtype)), *inv = NULL;
  if (!ox_check_static_input(c, xs)) return ox_status(c);
  pc_value *y = pc_convert(G, fc_layer_norm(G, xs, r - ax, axes, ox_attr_float(c, "epsilon", 1e-5), &mean, &inv),
                           x->type.dtype);
  ox_out(c, 0, affine(c, y, ox_in(c, 1), ox_in(c, 2)));
  if (ox_has_out(c, 1)) ox_out(c, 1, mean);
  if (ox_has_out(c, 2)) ox_out(c, 2, inv);
  return ox_status(c);
}

pc_status ox_op_RMSNormalization(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0);
  if (!ox_require_float(c, x) || !ox_check_static_input(c, x)) return ox_status(c);
  int r = x->type.rank, ax = ox_axis(c, ox_attr_int(c, "axis", -1), r);
  if (ax < 0) return ox_status(c);
  int64_t axes[PC_MAX_RANK];
  for (int i = ax; i < r; i++) axes[i - ax] = i;
  pc_value *xs = pc_convert(G, x, stash_dtype(c, x->type.dtype));
  double cnt = (double)ox_dims_prod(x->type.dims + ax, r - ax);
  pc_value *ms = ox_mul_s(c, ox_reduce(c, PC_OP_reduce_sum, pc_mul(G, xs, xs), r - ax, axes, 1), 1.0 / cnt);
  pc_value *y = ox_binary(c, PC_OP_mul, xs, rsqrt_eps(c, ms, ox_attr_float(c, "epsilon", 1e-5)));
  return ox_out(c, 0, affine(c, pc_convert(G, y, x->type.dtype), ox_in(c, 1), NULL));
}

/* GroupNormalization-18 gives scale/bias per group: repeat each entry C/G times */
static pc_value *group_param(ox_ctx *c, pc_value *p, const pc_value *x, int64_t groups) {
  int64_t C = x->type.dims[1];
  if (!p || p->type.rank != 1 || p->type.dims[0] == C || p->type.dims[0] != groups) return ox_per_channel(c, p, x, "scale and bias");
  int64_t d2[2] = {groups, C / groups}, zero = 0;
  return ox_per_channel(c, pc_reshape(G, pc_broadcast_in_dim(G, p, 2, d2, &zero), 1, &C), x, "scale and bias");
}

pc_status ox_op_GroupNormalization(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0), *sc = ox_in_req(c, 1), *b = ox_in_req(c, 2), *mean, *var, *xc;
  int64_t groups = ox_attr_int(c, "num_groups", 0);
  if (!sc || !b || !ox_check_rank(c, x, 2, PC_MAX_RANK) || !ox_check_static_input(c, x) || !ox_require_float(c, x))
    return ox_status(c);
  int64_t C = x->type.dims[1], N = x->type.dims[0];
  if (groups < 1 || C % groups) return ox_fail(c, PC_ERR_ATTR, "num_groups=%lld does not divide %lld channels", (long long)groups, (long long)C);
  int64_t d3[3] = {N, groups, pc_type_numel(&x->type) / (N ? N : 1) / groups}, ax = 2;
  pc_value *xs = pc_reshape(G, pc_convert(G, x, stash_dtype(c, x->type.dtype)), 3, d3);
  if (!moments(c, xs, 1, &ax, &mean, &var, &xc)) return ox_status(c);
  pc_value *y = ox_binary(c, PC_OP_mul, xc, rsqrt_eps(c, var, ox_attr_float(c, "epsilon", 1e-5)));
  y = pc_convert(G, pc_reshape(G, y, x->type.rank, x->type.dims), x->type.dtype);
  y = y ? pc_add(G, pc_mul(G, y, group_param(c, sc, x, groups)), group_param(c, b, x, groups)) : NULL;
  return ox_out(c, 0, y);
}

pc_status ox_op_LRN(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0);
  int64_t size = ox_attr_int(c, "size", 0);
  if (!ox_check_rank(c, x, 2, PC_MAX_RANK) || !ox_check_static_input(c, x) || !ox_require_float(c, x)) return ox_status(c);
  if (size < 1) return ox_fail(c, PC_ERR_ATTR, "size must be >= 1");
  double alpha = ox_attr_float(c, "alpha", 1e-4), beta = ox_attr_float(c, "beta", 0.75), bias = ox_attr_float(c, "bias", 1.0);
  int r = x->type.rank;
  int64_t lo[PC_MAX_RANK] = {0}, hi[PC_MAX_RANK] = {0}, inter[PC_MAX_RANK] = {0}, st[PC_MAX_RANK] = {0}, lim[PC_MAX_RANK],
          one[PC_MAX_RANK];
  /* a window reaching more than C-1 channels away only adds padding zeros: clamp it, so that a huge `size`
   * costs no more than 2C-1 slices (the average still divides by `size`) */
  int64_t C = x->type.dims[1], reach = C > 0 ? C - 1 : 0;
  lo[1] = (size - 1) / 2, hi[1] = size - 1 - lo[1];
  lo[1] = lo[1] < reach ? lo[1] : reach, hi[1] = hi[1] < reach ? hi[1] : reach;
  int64_t window = lo[1] + hi[1] + 1;
  pc_value *sq = pc_mul(G, x, x);
  pc_attr a[4] = {pc_a_ints("low", lo, r), pc_a_ints("high", hi, r), pc_a_ints("interior", inter, r), pc_a_float("value", 0)};
  pc_value *p = sq ? pc_build(G, PC_OP_pad, &sq, 1, a, 4) : NULL, *sum = NULL;
  for (int i = 0; i < r; i++) lim[i] = x->type.dims[i], one[i] = 1;
  for (int64_t j = 0; p && j < window; j++) {
    st[1] = j, lim[1] = j + x->type.dims[1];
    pc_value *sl = pc_slice(G, p, st, lim, one);
    sum = sum ? pc_add(G, sum, sl) : sl;
  }
  pc_value *den = ox_add_s(c, ox_mul_s(c, sum, alpha / (double)size), bias);
  return ox_out(c, 0, den ? pc_div(G, x, pc_pow(G, den, ox_like(c, beta, den))) : NULL);
}

pc_status ox_op_MeanVarianceNormalization(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0), *mean, *var, *xc;
  int64_t axes[PC_MAX_RANK] = {0, 2, 3};
  int n = ox_attr_ints(c, "axes", axes, PC_MAX_RANK);
  if (n == -2 || !ox_require_float(c, x)) return ox_status(c);
  if (n == -1) n = 3;
  if (!ox_axes(c, axes, n, x->type.rank) || !moments(c, x, n, axes, &mean, &var, &xc)) return ox_status(c);
  return ox_out(c, 0, ox_binary(c, PC_OP_div, xc, ox_add_s(c, pc_sqrt(G, var), 1e-9)));
}

pc_status ox_op_LpNormalization(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0);
  int64_t p = ox_attr_int(c, "p", 2);
  if (!ox_require_float(c, x)) return ox_status(c);
  int64_t ax = ox_axis(c, ox_attr_int(c, "axis", -1), x->type.rank);
  if (ax < 0) return ox_status(c);
  if (p != 1 && p != 2) return ox_fail(c, PC_ERR_ATTR, "p=%lld is not 1 or 2", (long long)p);
  pc_value *norm = ox_root(c, ox_reduce(c, PC_OP_reduce_sum, ox_abs_pow(c, x, p), 1, &ax, 1), p);
  /* an all-zero row stays zero instead of 0/0 */
  norm = norm ? pc_where(G, pc_eq(G, norm, ox_like(c, 0, norm)), ox_like(c, 1, norm), norm) : NULL;
  return ox_out(c, 0, ox_binary(c, PC_OP_div, x, norm));
}
