/* frontend/onnx_training.c: decompositions of the ONNX ops of training into prims: Dropout (an identity at
 * inference, a seeded mask drawn at import in training mode), the losses NegativeLogLikelihoodLoss and
 * SoftmaxCrossEntropyLoss, and ai.onnx.preview.training's optimizer steps (Adagrad, Momentum, Adam) and
 * Gradient. */
#include "frontend/onnx_internal.h"
#include "runtime/primc_mt19937.h"

#include <stdlib.h>
#include <string.h>

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
  primc_mt19937 rng;
  primc_mt19937_seed(&rng, (uint32_t)seed);
  for (int64_t i = 0; i < n; i++) bits[i] = primc_mt19937_double(&rng) >= ratio; /* numpy compares in double */
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

/* ---------------------------------------------------------------- losses */

/* the loss of NegativeLogLikelihoodLoss on log-probabilities lp [N, C, d...] and targets [N, d...];
 * `sce` selects SoftmaxCrossEntropyLoss's (slightly different) reference rules for the mean */
static pc_value *nll_loss(ox_ctx *c, pc_value *lp, pc_value *target, pc_value *weight, int sce) {
  if (!lp || !target) return NULL;
  int r = lp->type.rank;
  const int64_t *xd = lp->type.dims;
  if (r < 2 || target->type.rank != r - 1) return ox_fail(c, PC_ERR_SHAPE, "input must be [N, C, d...] and target [N, d...]"), NULL;
  for (int i = 0; i < r - 1; i++)
    if (target->type.dims[i] != xd[i ? i + 1 : 0]) return ox_fail(c, PC_ERR_SHAPE, "target's shape does not match the input's"), NULL;
  if (!pc_dtype_is_int(target->type.dtype)) return ox_fail(c, PC_ERR_TYPE, "target must be an integer tensor"), NULL;
  pc_dtype T = lp->type.dtype;
  const char *red = ox_attr_str(c, "reduction", "mean");
  int has_ii = ox_has_attr(c, "ignore_index");
  int64_t ii = ox_attr_int(c, "ignore_index", 0);
  if (strcmp(red, "mean") && strcmp(red, "sum") && strcmp(red, "none")) return ox_fail(c, PC_ERR_ATTR, "reduction '%s' is not mean, sum or none", red), NULL;
  pc_value *t = pc_convert(G, target, PC_i64);
  pc_value *valid = has_ii ? ox_binary_s(c, PC_OP_ne, t, (double)ii) : NULL;
  /* targets out of [0, C) only occur where ignored: clip them so the gathers stay in range */
  pc_value *tc = pc_clamp(G, t, pc_full_like(G, 0, t), pc_full_like(G, (double)(xd[1] - 1), t));
  int64_t s1[PC_MAX_RANK];
  for (int i = 0; i < r; i++) s1[i] = i == 1 ? 1 : xd[i];
  pc_value *idx = ox_reshape(c, tc, r, s1);
  pc_attr ax = pc_a_int("axis", 1);
  pc_value *gin[2] = {lp, idx};
  pc_value *loss = pc_neg(G, ox_reshape(c, pc_build(G, PC_OP_gather, gin, 2, &ax, 1), r - 1, t ? t->type.dims : NULL));
  if (valid) loss = ox_where(c, valid, loss, ox_scalar(c, T, 0));
  pc_value *gw = NULL; /* per-element weight of the reference */
  if (weight) {
    if (weight->type.rank != 1 || weight->type.dims[0] != xd[1] || weight->type.dtype != T)
      return ox_fail(c, PC_ERR_SHAPE, "weight must be [C] of the input's type"), NULL;
    int64_t one = 1, full[PC_MAX_RANK]; /* weight along C, gathered like the input */
    memcpy(full, xd, sizeof *xd * (size_t)r);
    pc_value *win[2] = {pc_broadcast_in_dim(G, weight, r, full, &one), idx};
    gw = ox_reshape(c, pc_build(G, PC_OP_gather, win, 2, &ax, 1), r - 1, t ? t->type.dims : NULL);
    if (valid) gw = ox_where(c, valid, gw, ox_scalar(c, T, 0));
  } else if (sce ? has_ii : !(has_ii && ii == -1)) {
    gw = valid ? ox_where(c, valid, ox_scalar(c, T, 1), ox_scalar(c, T, 0)) : pc_full_like(G, 1, loss);
  }
  if (gw) loss = pc_mul(G, gw, loss);
  if (!strcmp(red, "none") || !loss) return loss;
  int64_t all[PC_MAX_RANK];
  for (int i = 0; i < r - 1; i++) all[i] = i;
  pc_value *sum = pc_reduce(G, PC_OP_reduce_sum, loss, r - 1, all);
  if (!strcmp(red, "sum")) return sum;
  if (gw) return pc_div(G, sum, pc_reduce(G, PC_OP_reduce_sum, gw, r - 1, all));
  return pc_div(G, sum, ox_scalar(c, T, (double)pc_type_numel(&loss->type)));
}

pc_status ox_op_NegativeLogLikelihoodLoss(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0), *t = ox_in_req(c, 1);
  if (!ox_check_static_input(c, x) || !ox_check_static_input(c, t) || !ox_require_float(c, x)) return ox_status(c);
  return ox_out(c, 0, nll_loss(c, x, t, ox_in(c, 2), 0));
}

pc_status ox_op_SoftmaxCrossEntropyLoss(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0), *t = ox_in_req(c, 1);
  if (!ox_check_static_input(c, x) || !ox_check_static_input(c, t) || !ox_require_float(c, x)) return ox_status(c);
  if (x->type.rank < 2) return ox_fail(c, PC_ERR_SHAPE, "input must be [N, C, d...]");
  pc_value *lp = fc_softmax(G, x, 1, 1);
  if (ox_out(c, 0, nll_loss(c, lp, t, ox_in(c, 2), 1)) != PC_OK) return ox_status(c);
  return ox_has_out(c, 1) ? ox_out(c, 1, lp) : ox_status(c);
}

/* ---------------------------------------------------------------- optimizers (ai.onnx.preview.training) */

/* inputs R (learning rate), T (update count), then `groups` lists of n tensors each; n, or 0 on failure */
static int optim_count(ox_ctx *c, int groups) {
  int n = (c->n_in - 2) / groups;
  if (n < 1 || c->n_in != 2 + groups * n || c->n_out > groups * n)
    return ox_fail(c, PC_ERR_ATTR, "%d inputs do not form R, T and %d lists of tensors", c->n_in, groups), 0;
  for (int i = 0; i < c->n_in; i++)
    if (!ox_in_req(c, i)) return 0;
  if (!ox_require_float(c, ox_in(c, 0))) return 0;
  return n;
}

static pc_value *op2(ox_ctx *c, pc_op op, pc_value *a, pc_value *b) { return ox_binary(c, op, a, b); }
static pc_value *scaled(ox_ctx *c, double k, pc_value *x) { return op2(c, PC_OP_mul, ox_like(c, k, x), x); }

/* the update count as a float scalar of r's dtype, and whether it is positive */
static pc_value *optim_t(ox_ctx *c, pc_value **positive) {
  pc_value *t = ox_in(c, 1), *r = ox_in(c, 0);
  *positive = pc_gt(G, t, ox_like(c, 0, t));
  return pc_convert(G, t, r->type.dtype);
}

/* norm_coefficient * X + G */
static pc_value *optim_grad(ox_ctx *c, pc_value *x, pc_value *g) {
  return op2(c, PC_OP_add, scaled(c, ox_attr_float(c, "norm_coefficient", 0), x), g);
}

pc_status ox_op_Adagrad(ox_ctx *c) {
  int n = optim_count(c, 3);
  if (!n) return ox_status(c);
  pc_value *pos, *t = optim_t(c, &pos), *r = ox_in(c, 0);
  /* r = R / (1 + T * decay_factor) */
  r = op2(c, PC_OP_div, r, pc_add(G, scaled(c, ox_attr_float(c, "decay_factor", 0), t), ox_like(c, 1, t)));
  double eps = ox_attr_float(c, "epsilon", 1e-6);
  for (int i = 0; i < n && ox_status(c) == PC_OK; i++) {
    pc_value *x = ox_in(c, 2 + i), *g = optim_grad(c, x, ox_in(c, 2 + n + i)), *h = ox_in(c, 2 + 2 * n + i);
    pc_value *hn = op2(c, PC_OP_add, h, op2(c, PC_OP_mul, g, g));
    pc_value *den = hn ? pc_add(G, pc_sqrt(G, hn), ox_like(c, eps, hn)) : NULL;
    ox_out(c, i, op2(c, PC_OP_sub, x, op2(c, PC_OP_div, op2(c, PC_OP_mul, r, g), den)));
    if (ox_has_out(c, n + i)) ox_out(c, n + i, hn);
  }
  return ox_status(c);
}

/* Gradient (ai.onnx.preview.training): the gradient of the sum of y's elements with respect to each input named
 * in xs (the node's first inputs; those in zs follow and only feed y), by the caller's reverse mode */
pc_status ox_op_Gradient(ox_ctx *c) {
  const pc_import_opts *o = ox_import_opts(c);
  const char *yname = ox_attr_str(c, "y", NULL);
  const Onnx__AttributeProto *xs = NULL;
  for (size_t i = 0; i < c->node->n_attribute; i++)
    if (c->node->attribute[i]->name && !strcmp(c->node->attribute[i]->name, "xs")) xs = c->node->attribute[i];
  if (!yname || !xs || !xs->n_strings) return ox_fail(c, PC_ERR_ATTR, "needs attributes xs and y");
  int nx = (int)xs->n_strings;
  if (nx > c->n_in || nx != c->n_out)
    return ox_fail(c, PC_ERR_SHAPE, "%d xs, %d inputs and %d outputs: every x is an input and has an output", nx,
                   c->n_in, c->n_out);
  if (!o || !o->gradient)
    return ox_fail(c, PC_ERR_UNSUPPORTED, "the importer was called without a gradient transform (pc_grad_values)");
  pc_value *y = ox_name_get(c, yname);
  if (!y) return ox_fail(c, PC_ERR_ATTR, "y names '%s', which no earlier node computes", yname);
  pc_value *wrt[64], *grads[64];
  if (nx > 64) return ox_fail(c, PC_ERR_UNSUPPORTED, "more than 64 xs");
  for (int i = 0; i < nx; i++)
    if (!(wrt[i] = ox_in_req(c, i)) || !ox_require_float(c, wrt[i])) return ox_status(c);
  if (!ox_require_float(c, y) || o->gradient(c->g, wrt, nx, y, grads) != PC_OK) return ox_status(c);
  for (int i = 0; i < nx; i++) ox_out(c, i, grads[i]);
  return ox_status(c);
}

pc_status ox_op_Momentum(ox_ctx *c) {
  int n = optim_count(c, 3);
  if (!n) return ox_status(c);
  const char *mode = ox_attr_str(c, "mode", "standard");
  int nesterov = strcmp(mode, "nesterov") == 0;
  if (!nesterov && strcmp(mode, "standard") != 0) return ox_fail(c, PC_ERR_ATTR, "mode '%s' is not supported", mode);
  double alpha = ox_attr_float(c, "alpha", 0), beta = ox_attr_float(c, "beta", 0);
  pc_value *pos, *t = optim_t(c, &pos), *r = ox_in(c, 0);
  /* the first update (T == 0) takes the gradient whole */
  pc_value *beta_t = pc_where(G, pos, ox_like(c, beta, t), ox_like(c, 1, t));
  for (int i = 0; i < n && ox_status(c) == PC_OK; i++) {
    pc_value *x = ox_in(c, 2 + i), *g = optim_grad(c, x, ox_in(c, 2 + n + i)), *v = ox_in(c, 2 + 2 * n + i);
    pc_value *vn = op2(c, PC_OP_add, scaled(c, alpha, v), op2(c, PC_OP_mul, beta_t, g));
    pc_value *step = nesterov ? op2(c, PC_OP_add, g, scaled(c, alpha, vn)) : vn;
    ox_out(c, i, op2(c, PC_OP_sub, x, op2(c, PC_OP_mul, r, step)));
    if (ox_has_out(c, n + i)) ox_out(c, n + i, vn);
  }
  return ox_status(c);
}

pc_status ox_op_Adam(ox_ctx *c) {
  int n = optim_count(c, 4);
  if (!n) return ox_status(c);
  double alpha = ox_attr_float(c, "alpha", 0.9), beta = ox_attr_float(c, "beta", 0.999);
  double eps = ox_attr_float(c, "epsilon", 1e-6), post = ox_attr_float(c, "norm_coefficient_post", 0);
  pc_value *pos, *t = optim_t(c, &pos), *r = ox_in(c, 0);
  /* bias correction R * sqrt(1 - beta^T) / (1 - alpha^T) from the second update on */
  pc_value *one = ox_like(c, 1, t);
  pc_value *num = pc_sqrt(G, pc_sub(G, one, pc_pow(G, ox_like(c, beta, t), t)));
  pc_value *den = pc_sub(G, one, pc_pow(G, ox_like(c, alpha, t), t));
  pc_value *r_adj = pc_where(G, pos, op2(c, PC_OP_mul, r, pc_div(G, num, den)), r);
  for (int i = 0; i < n && ox_status(c) == PC_OK; i++) {
    pc_value *x = ox_in(c, 2 + i), *g = optim_grad(c, x, ox_in(c, 2 + n + i));
    pc_value *v = ox_in(c, 2 + 2 * n + i), *h = ox_in(c, 2 + 3 * n + i);
    pc_value *vn = op2(c, PC_OP_add, scaled(c, alpha, v), scaled(c, 1 - alpha, g));
    pc_value *hn = op2(c, PC_OP_add, scaled(c, beta, h), scaled(c, 1 - beta, op2(c, PC_OP_mul, g, g)));
    pc_value *hs = hn ? pc_add(G, pc_sqrt(G, hn), ox_like(c, eps, hn)) : NULL;
    pc_value *xn = op2(c, PC_OP_sub, x, op2(c, PC_OP_mul, r_adj, op2(c, PC_OP_div, vn, hs)));
    ox_out(c, i, scaled(c, 1 - post, xn));
    if (ox_has_out(c, n + i)) ox_out(c, n + i, vn);
    if (ox_has_out(c, 2 * n + i)) ox_out(c, 2 * n + i, hn);
  }
  return ox_status(c);
}
