/* passes/vjp_rules.c: each prim's vector-Jacobian product, built from prims (the vjp RULE rows of
 * passes/transforms.def).
 *
 * Conventions follow torch.autograd where a derivative is a choice: max/min split a tie's gradient in
 * halves (against a constant, as relu, the tie gets none), reduce_max/min share it among the tied elements,
 * clamp passes it to x on the closed range, pow's exponent gets no gradient where the base is 0 and the
 * exponent >= 0. */
#include "passes/autodiff.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* kernel taps up to which a conv's weight gradient is one GEMM over gathered columns (dw_by_columns): their
 * copy of the input grows with the taps (where the columns are read in place, ir/columns.c, it does not, but a
 * host compile alone reads them so) */
#define PC_DW_COLUMNS_MAX_TAPS PC_COLUMNS_MAX_TAPS

pc_value *ad_zeros(pc_graph *g, const pc_value *like) { return pc_full_like(g, 0, like); }
pc_value *ad_scalar(pc_graph *g, double v, const pc_value *like) { return pc_full_like(g, v, like); }
pc_value *ad_select(pc_graph *g, pc_value *cond, pc_value *v) { return pc_where(g, cond, v, ad_zeros(g, v)); }

#define X(i) (n->in[i])
#define Y (n->out[0])
#define GY (ct_out[0])
/* a rule's local: the graph and the constant v shaped like x */
#define K(v, like) ad_scalar(g, (v), (like))


/* ---------------------------------------------------------------- elementwise unary */

pc_status ad_vjp_neg(pc_graph *g, const pc_node *n, pc_value *const *ct_out, const int *need, pc_value **ct_in) {
  ct_in[0] = pc_neg(g, GY);
  return g->status;
}
pc_status ad_vjp_abs(pc_graph *g, const pc_node *n, pc_value *const *ct_out, const int *need, pc_value **ct_in) {
  ct_in[0] = pc_mul(g, GY, pc_sign(g, X(0)));
  return g->status;
}
pc_status ad_vjp_exp(pc_graph *g, const pc_node *n, pc_value *const *ct_out, const int *need, pc_value **ct_in) {
  ct_in[0] = pc_mul(g, GY, Y);
  return g->status;
}
pc_status ad_vjp_log(pc_graph *g, const pc_node *n, pc_value *const *ct_out, const int *need, pc_value **ct_in) {
  ct_in[0] = pc_div(g, GY, X(0));
  return g->status;
}
pc_status ad_vjp_log1p(pc_graph *g, const pc_node *n, pc_value *const *ct_out, const int *need, pc_value **ct_in) {
  ct_in[0] = pc_div(g, GY, pc_add(g, X(0), K(1, X(0))));
  return g->status;
}
pc_status ad_vjp_expm1(pc_graph *g, const pc_node *n, pc_value *const *ct_out, const int *need, pc_value **ct_in) {
  ct_in[0] = pc_mul(g, GY, pc_add(g, Y, K(1, Y)));
  return g->status;
}
pc_status ad_vjp_sqrt(pc_graph *g, const pc_node *n, pc_value *const *ct_out, const int *need, pc_value **ct_in) {
  ct_in[0] = pc_div(g, GY, pc_mul(g, Y, K(2, Y)));
  return g->status;
}
/* d x^-1/2 = -1/2 x^-3/2 = -1/2 y / x */
pc_status ad_vjp_rsqrt(pc_graph *g, const pc_node *n, pc_value *const *ct_out, const int *need, pc_value **ct_in) {
  ct_in[0] = pc_mul(g, GY, pc_mul(g, K(-0.5, Y), pc_div(g, Y, X(0))));
  return g->status;
}
pc_status ad_vjp_reciprocal(pc_graph *g, const pc_node *n, pc_value *const *ct_out, const int *need,
                                pc_value **ct_in) {
  ct_in[0] = pc_neg(g, pc_mul(g, GY, pc_mul(g, Y, Y)));
  return g->status;
}
pc_status ad_vjp_sin(pc_graph *g, const pc_node *n, pc_value *const *ct_out, const int *need, pc_value **ct_in) {
  ct_in[0] = pc_mul(g, GY, pc_cos(g, X(0)));
  return g->status;
}
pc_status ad_vjp_cos(pc_graph *g, const pc_node *n, pc_value *const *ct_out, const int *need, pc_value **ct_in) {
  ct_in[0] = pc_neg(g, pc_mul(g, GY, pc_sin(g, X(0))));
  return g->status;
}
pc_status ad_vjp_tan(pc_graph *g, const pc_node *n, pc_value *const *ct_out, const int *need, pc_value **ct_in) {
  ct_in[0] = pc_mul(g, GY, pc_add(g, K(1, Y), pc_mul(g, Y, Y)));
  return g->status;
}
pc_status ad_vjp_tanh(pc_graph *g, const pc_node *n, pc_value *const *ct_out, const int *need, pc_value **ct_in) {
  ct_in[0] = pc_mul(g, GY, pc_sub(g, K(1, Y), pc_mul(g, Y, Y)));
  return g->status;
}
pc_status ad_vjp_erf(pc_graph *g, const pc_node *n, pc_value *const *ct_out, const int *need, pc_value **ct_in) {
  pc_value *x = X(0);
  pc_value *e = pc_exp(g, pc_neg(g, pc_mul(g, x, x)));
  ct_in[0] = pc_mul(g, GY, pc_mul(g, K(1.1283791670955126, x), e)); /* 2 / sqrt(pi) */
  return g->status;
}
pc_status ad_vjp_sigmoid(pc_graph *g, const pc_node *n, pc_value *const *ct_out, const int *need, pc_value **ct_in) {
  ct_in[0] = pc_mul(g, GY, pc_mul(g, Y, pc_sub(g, K(1, Y), Y)));
  return g->status;
}

/* ---------------------------------------------------------------- elementwise binary, ternary */

pc_status ad_vjp_add(pc_graph *g, const pc_node *n, pc_value *const *ct_out, const int *need, pc_value **ct_in) {
  ct_in[0] = ct_in[1] = GY;
  return g->status;
}
pc_status ad_vjp_sub(pc_graph *g, const pc_node *n, pc_value *const *ct_out, const int *need, pc_value **ct_in) {
  ct_in[0] = GY;
  if (need[1]) ct_in[1] = pc_neg(g, GY);
  return g->status;
}
pc_status ad_vjp_mul(pc_graph *g, const pc_node *n, pc_value *const *ct_out, const int *need, pc_value **ct_in) {
  if (need[0]) ct_in[0] = pc_mul(g, GY, X(1));
  if (need[1]) ct_in[1] = pc_mul(g, GY, X(0));
  return g->status;
}
/* y = a / b: da = gy / b, db = -gy a / b^2 = -da y */
pc_status ad_vjp_div(pc_graph *g, const pc_node *n, pc_value *const *ct_out, const int *need, pc_value **ct_in) {
  pc_value *ga = pc_div(g, GY, X(1));
  if (need[0]) ct_in[0] = ga;
  if (need[1]) ct_in[1] = pc_neg(g, pc_mul(g, ga, Y));
  return g->status;
}
pc_status ad_vjp_pow(pc_graph *g, const pc_node *n, pc_value *const *ct_out, const int *need, pc_value **ct_in) {
  pc_value *a = X(0), *b = X(1);
  if (need[0]) {
    pc_value *d = pc_mul(g, b, pc_pow(g, a, pc_sub(g, b, K(1, b))));
    ct_in[0] = pc_where(g, pc_eq(g, b, K(0, b)), K(0, a), pc_mul(g, GY, d));
  }
  if (need[1]) {
    pc_value *flat = pc_and(g, pc_eq(g, a, K(0, a)), pc_ge(g, b, K(0, b)));
    ct_in[1] = pc_where(g, flat, K(0, b), pc_mul(g, GY, pc_mul(g, Y, pc_log(g, a))));
  }
  return g->status;
}
/* fmod: y = a - trunc(a / b) b */
pc_status ad_vjp_rem(pc_graph *g, const pc_node *n, pc_value *const *ct_out, const int *need, pc_value **ct_in) {
  ct_in[0] = GY;
  if (need[1]) {
    pc_value *q = pc_div(g, X(0), X(1));
    pc_value *t = pc_where(g, pc_lt(g, q, K(0, q)), pc_ceil(g, q), pc_floor(g, q));
    ct_in[1] = pc_neg(g, pc_mul(g, GY, t));
  }
  return g->status;
}
/* a constant, or a broadcast of one */
static int constant_value(const pc_value *v) {
  const pc_node *p = v->producer;
  if (p && p->op == PC_OP_broadcast_in_dim) p = p->in[0]->producer;
  return p && p->op == PC_OP_constant;
}

/* max and min: the chosen operand takes the gradient, a tie gives each half; one weight for a, the rest to b
 * (fewer masks: a max pool's backward is a chain of these). Against a constant (ReLU, max(x, 0)) x takes it
 * where the result passes the constant, none on a tie, as torch's relu does: the mask is then read off the
 * result, which the backward keeps anyway (the next layer's input), not stored beside it. */
static pc_status minmax(pc_graph *g, const pc_node *n, pc_value *gy, int is_max, const int *need, pc_value **ct_in) {
  pc_value *a = X(0), *b = X(1);
  for (int k = 0; k < 2; k++) {
    pc_value *c = X(1 - k);
    if (need[1 - k] || !constant_value(c)) continue;
    if (need[k]) ct_in[k] = ad_select(g, is_max ? pc_gt(g, Y, c) : pc_lt(g, Y, c), gy);
    return g->status;
  }
  pc_value *a_wins = is_max ? pc_gt(g, a, b) : pc_lt(g, a, b);
  pc_value *wa = pc_where(g, a_wins, K(1, gy), pc_where(g, pc_eq(g, a, b), K(0.5, gy), K(0, gy)));
  pc_value *ga = pc_mul(g, gy, wa);
  if (need[0]) ct_in[0] = ga;
  /* where either is NaN the result is NaN and neither wins: b's share is 0 too */
  if (need[1]) ct_in[1] = pc_where(g, pc_or(g, pc_ne(g, a, a), pc_ne(g, b, b)), K(0, gy), pc_sub(g, gy, ga));
  return g->status;
}
pc_status ad_vjp_max(pc_graph *g, const pc_node *n, pc_value *const *ct_out, const int *need, pc_value **ct_in) {
  return minmax(g, n, GY, 1, need, ct_in);
}
pc_status ad_vjp_min(pc_graph *g, const pc_node *n, pc_value *const *ct_out, const int *need, pc_value **ct_in) {
  return minmax(g, n, GY, 0, need, ct_in);
}
pc_status ad_vjp_atan2(pc_graph *g, const pc_node *n, pc_value *const *ct_out, const int *need, pc_value **ct_in) {
  pc_value *a = X(0), *b = X(1);
  pc_value *s = pc_div(g, GY, pc_add(g, pc_mul(g, a, a), pc_mul(g, b, b)));
  if (need[0]) ct_in[0] = pc_mul(g, s, b);
  if (need[1]) ct_in[1] = pc_neg(g, pc_mul(g, s, a));
  return g->status;
}
pc_status ad_vjp_where(pc_graph *g, const pc_node *n, pc_value *const *ct_out, const int *need, pc_value **ct_in) {
  if (need[1]) ct_in[1] = ad_select(g, X(0), GY);
  if (need[2]) ct_in[2] = pc_where(g, X(0), ad_zeros(g, GY), GY);
  return g->status;
}
/* y = min(max(x, lo), hi) */
pc_status ad_vjp_clamp(pc_graph *g, const pc_node *n, pc_value *const *ct_out, const int *need, pc_value **ct_in) {
  pc_value *x = X(0), *lo = X(1), *hi = X(2);
  if (need[0]) ct_in[0] = ad_select(g, pc_and(g, pc_ge(g, x, lo), pc_le(g, x, hi)), GY);
  if (need[1]) ct_in[1] = ad_select(g, pc_and(g, pc_lt(g, x, lo), pc_le(g, lo, hi)), GY);
  if (need[2]) ct_in[2] = ad_select(g, pc_lt(g, hi, pc_max(g, x, lo)), GY);
  return g->status;
}

/* ---------------------------------------------------------------- type */

pc_status ad_vjp_convert_element_type(pc_graph *g, const pc_node *n, pc_value *const *ct_out, const int *need,
                                          pc_value **ct_in) {
  /* a float cast to an integer is piecewise constant: no gradient */
  if (pc_dtype_is_float(Y->type.dtype)) ct_in[0] = pc_convert(g, GY, X(0)->type.dtype);
  return g->status;
}

/* ---------------------------------------------------------------- movement */

/* sums over the result dims the operand was broadcast along, then takes the operand's shape */
pc_status ad_vjp_broadcast_in_dim(pc_graph *g, const pc_node *n, pc_value *const *ct_out, const int *need,
                                      pc_value **ct_in) {
  const pc_type *x = &X(0)->type, *y = &Y->type;
  int nd;
  const int64_t *dims = pc_attr_ints(n, "dims", &nd);
  int kept[PC_MAX_RANK] = {0};
  for (int i = 0; i < x->rank; i++) kept[dims[i]] = x->dims[i] == y->dims[dims[i]] ? 1 : 0;
  int64_t axes[PC_MAX_RANK];
  int na = 0;
  for (int d = 0; d < y->rank; d++)
    if (!kept[d]) axes[na++] = d;
  pc_value *s = na ? pc_reduce(g, PC_OP_reduce_sum, GY, na, axes) : GY;
  ct_in[0] = pc_reshape(g, s, x->rank, x->dims);
  return g->status;
}
pc_status ad_vjp_reshape(pc_graph *g, const pc_node *n, pc_value *const *ct_out, const int *need,
                             pc_value **ct_in) {
  ct_in[0] = pc_reshape(g, GY, X(0)->type.rank, X(0)->type.dims);
  return g->status;
}
pc_status ad_vjp_transpose(pc_graph *g, const pc_node *n, pc_value *const *ct_out, const int *need,
                               pc_value **ct_in) {
  int r;
  const int64_t *perm = pc_attr_ints(n, "perm", &r);
  int64_t inv[PC_MAX_RANK];
  for (int i = 0; i < r; i++) inv[perm[i]] = i;
  ct_in[0] = pc_transpose(g, GY, inv);
  return g->status;
}
static pc_value *pad_zero(pc_graph *g, pc_value *x, const int64_t *lo, const int64_t *hi, const int64_t *in) {
  int r = x->type.rank;
  pc_attr a[4] = {pc_a_ints("low", lo, r), pc_a_ints("high", hi, r), pc_a_ints("interior", in, r),
                  pc_a_float("value", 0)};
  return pc_build(g, PC_OP_pad, &x, 1, a, 4);
}
/* the sliced elements' gradients put back in place: a zero pad with stride - 1 between them */
pc_status ad_vjp_slice(pc_graph *g, const pc_node *n, pc_value *const *ct_out, const int *need,
                           pc_value **ct_in) {
  const pc_type *x = &X(0)->type, *y = &Y->type;
  const int64_t *st = pc_attr_ints(n, "start", NULL), *sd = pc_attr_ints(n, "stride", NULL);
  int64_t lo[PC_MAX_RANK], hi[PC_MAX_RANK], in[PC_MAX_RANK];
  for (int i = 0; i < x->rank; i++) {
    if (y->dims[i] == 0) {
      ct_in[0] = ad_zeros(g, X(0));
      return g->status;
    }
    lo[i] = st[i], in[i] = sd[i] - 1;
    hi[i] = x->dims[i] - (st[i] + (y->dims[i] - 1) * sd[i] + 1);
  }
  ct_in[0] = pad_zero(g, GY, lo, hi, in);
  return g->status;
}
/* undo the edges (a negative pad crops, a crop pads zeros back), then step over the interior */
pc_status ad_vjp_pad(pc_graph *g, const pc_node *n, pc_value *const *ct_out, const int *need, pc_value **ct_in) {
  const pc_type *x = &X(0)->type;
  const int64_t *lo = pc_attr_ints(n, "low", NULL), *hi = pc_attr_ints(n, "high", NULL);
  const int64_t *in = pc_attr_ints(n, "interior", NULL);
  int64_t nlo[PC_MAX_RANK], nhi[PC_MAX_RANK], zero[PC_MAX_RANK] = {0}, lim[PC_MAX_RANK], step[PC_MAX_RANK];
  int strided = 0;
  for (int i = 0; i < x->rank; i++) {
    if (x->dims[i] == 0) {
      ct_in[0] = ad_zeros(g, X(0));
      return g->status;
    }
    nlo[i] = -lo[i], nhi[i] = -hi[i], step[i] = in[i] + 1;
    lim[i] = x->dims[i] + (x->dims[i] - 1) * in[i];
    strided |= in[i] != 0;
  }
  pc_value *core = pad_zero(g, GY, nlo, nhi, zero);
  ct_in[0] = strided ? pc_slice(g, core, zero, lim, step) : core;
  return g->status;
}
pc_status ad_vjp_concatenate(pc_graph *g, const pc_node *n, pc_value *const *ct_out, const int *need,
                                 pc_value **ct_in) {
  const pc_type *y = &Y->type;
  int axis = (int)pc_attr_int(n, "axis", 0);
  int64_t st[PC_MAX_RANK] = {0}, lim[PC_MAX_RANK], one[PC_MAX_RANK];
  for (int d = 0; d < y->rank; d++) lim[d] = y->dims[d], one[d] = 1;
  int64_t at = 0;
  for (int i = 0; i < n->n_in; i++) {
    int64_t len = X(i)->type.dims[axis];
    st[axis] = at, lim[axis] = at + len;
    if (need[i]) ct_in[i] = pc_slice(g, GY, st, lim, one);
    at += len;
  }
  return g->status;
}
pc_status ad_vjp_rev(pc_graph *g, const pc_node *n, pc_value *const *ct_out, const int *need, pc_value **ct_in) {
  pc_node *m = ad_rebuild(g, n, &GY, 1, NULL, 0);
  ct_in[0] = m ? m->out[0] : NULL;
  return g->status;
}

pc_value *ad_scatter_add(pc_graph *g, pc_value *into, pc_value *idx, pc_value *upd, int64_t axis) {
  pc_value *in[3] = {into, idx, upd};
  pc_attr a[2] = {pc_a_int("axis", axis), pc_a_str("reduce", "add")};
  return pc_build(g, PC_OP_scatter, in, 3, a, 2);
}
static pc_value *gather(pc_graph *g, pc_value *x, pc_value *idx, int64_t axis) {
  pc_value *in[2] = {x, idx};
  pc_attr a = pc_a_int("axis", axis);
  return pc_build(g, PC_OP_gather, in, 2, &a, 1);
}
pc_status ad_vjp_gather(pc_graph *g, const pc_node *n, pc_value *const *ct_out, const int *need,
                            pc_value **ct_in) {
  if (need[0]) ct_in[0] = ad_scatter_add(g, ad_zeros(g, X(0)), X(1), GY, pc_attr_int(n, "axis", 0));
  return g->status;
}
/* "none": the written places lose the operand's gradient, the updates gather it (with repeated indices
 * every copy gets it, as in torch); "add": the operand keeps all of it */
pc_status ad_vjp_scatter(pc_graph *g, const pc_node *n, pc_value *const *ct_out, const int *need,
                             pc_value **ct_in) {
  const char *red = pc_attr_str(n, "reduce", "none");
  int64_t axis = pc_attr_int(n, "axis", 0);
  int add = !strcmp(red, "add");
  if (!add && strcmp(red, "none"))
    return pc_node_fail(g, n, PC_ERR_UNSUPPORTED, "no gradient rule for scatter with reduce \"%s\"", red);
  if (need[0]) {
    if (add) ct_in[0] = GY;
    else {
      pc_value *in[3] = {GY, X(1), ad_zeros(g, X(2))};
      ct_in[0] = pc_build(g, PC_OP_scatter, in, 3, n->attrs, n->n_attrs);
    }
  }
  if (need[2]) ct_in[2] = gather(g, GY, X(1), axis);
  return g->status;
}

/* ---------------------------------------------------------------- reductions */

pc_value *ad_unreduce(pc_graph *g, const pc_type *x, const int64_t *axes, int na, pc_value *v) {
  unsigned mask = 0;
  for (int i = 0; i < na; i++) mask |= 1u << axes[i];
  int64_t dims[PC_MAX_RANK];
  int r = 0;
  for (int d = 0; d < x->rank; d++)
    if (!(mask & (1u << d))) dims[r++] = d;
  return pc_broadcast_in_dim(g, v, x->rank, x->dims, dims);
}
/* a reduction's result (or its cotangent) broadcast back over the reduced axes */
static pc_value *unreduce(pc_graph *g, const pc_node *n, pc_value *v) {
  int na;
  const int64_t *axes = pc_attr_ints(n, "axes", &na);
  return ad_unreduce(g, &X(0)->type, axes, na, v);
}
pc_status ad_vjp_reduce_sum(pc_graph *g, const pc_node *n, pc_value *const *ct_out, const int *need,
                                pc_value **ct_in) {
  ct_in[0] = unreduce(g, n, GY);
  return g->status;
}
/* the product of the others, exact with zeros: one zero gets the product of the rest, the rest get 0;
 * two zeros or more give 0 everywhere */
pc_status ad_vjp_reduce_prod(pc_graph *g, const pc_node *n, pc_value *const *ct_out, const int *need,
                                 pc_value **ct_in) {
  pc_value *x = X(0);
  int na;
  const int64_t *axes = pc_attr_ints(n, "axes", &na);
  pc_value *zero = pc_eq(g, x, K(0, x));
  pc_value *nz = pc_where(g, zero, K(1, x), x);
  pc_value *p = unreduce(g, n, pc_reduce(g, PC_OP_reduce_prod, nz, na, axes));
  pc_value *cnt = unreduce(g, n, pc_reduce(g, PC_OP_reduce_sum, pc_convert(g, zero, x->type.dtype), na, axes));
  pc_value *at_zero = ad_select(g, pc_eq(g, cnt, K(1, cnt)), p);
  pc_value *elsewhere = ad_select(g, pc_eq(g, cnt, K(0, cnt)), pc_div(g, p, nz));
  ct_in[0] = pc_mul(g, unreduce(g, n, GY), pc_where(g, zero, at_zero, elsewhere));
  return g->status;
}
static pc_status reduce_extreme(pc_graph *g, const pc_node *n, pc_value *gy, pc_value **ct_in) {
  pc_value *x = X(0);
  int na;
  const int64_t *axes = pc_attr_ints(n, "axes", &na);
  pc_value *hit = pc_convert(g, pc_eq(g, x, unreduce(g, n, Y)), x->type.dtype);
  pc_value *cnt = pc_reduce(g, PC_OP_reduce_sum, hit, na, axes);
  ct_in[0] = pc_mul(g, hit, unreduce(g, n, pc_div(g, gy, cnt)));
  return g->status;
}
pc_status ad_vjp_reduce_max(pc_graph *g, const pc_node *n, pc_value *const *ct_out, const int *need,
                                pc_value **ct_in) {
  return reduce_extreme(g, n, GY, ct_in);
}
pc_status ad_vjp_reduce_min(pc_graph *g, const pc_node *n, pc_value *const *ct_out, const int *need,
                                pc_value **ct_in) {
  return reduce_extreme(g, n, GY, ct_in);
}
pc_status ad_vjp_cumsum(pc_graph *g, const pc_node *n, pc_value *const *ct_out, const int *need,
                            pc_value **ct_in) {
  pc_attr a[3] = {pc_a_int("axis", pc_attr_int(n, "axis", 0)), pc_a_int("exclusive", pc_attr_int(n, "exclusive", 0)),
                  pc_a_int("reverse", !pc_attr_int(n, "reverse", 0))};
  pc_node *m = ad_rebuild(g, n, &GY, 1, a, 3);
  ct_in[0] = m ? m->out[0] : NULL;
  return g->status;
}

/* ---------------------------------------------------------------- contractions */

/* out = [batch, lhs free, rhs free]. The operand's cotangent contracts gy's free dims of the other
 * operand with that operand's free dims; its result is [batch, own free, own contracted dims in the
 * order of the other's contracted dims], transposed back to the operand's order. Where the operand
 * holds its contracted dims before its free ones (a linear layer's [in, out] weight), the other operand
 * goes first instead, making [batch, own contracted, own free]: the operand's order, no transpose (its
 * optimizer update read the transposed gradient a column at a time). */
static pc_value *dot_operand_ct(pc_graph *g, pc_value *gy, pc_value *other, int rank, const int64_t *batch,
                                const int64_t *contract, const int64_t *other_batch, const int64_t *other_contract,
                                int nb, int nc, int other_rank, int gy_free_at) {
  /* the operand's and the other's free dims, in order */
  int64_t free_own[PC_MAX_RANK], free_oth[PC_MAX_RANK];
  int nfo = 0, nfx = 0;
  for (int d = 0; d < rank; d++) {
    int used = 0;
    for (int i = 0; i < nb; i++) used |= batch[i] == d;
    for (int i = 0; i < nc; i++) used |= contract[i] == d;
    if (!used) free_own[nfo++] = d;
  }
  for (int d = 0; d < other_rank; d++) {
    int used = 0;
    for (int i = 0; i < nb; i++) used |= other_batch[i] == d;
    for (int i = 0; i < nc; i++) used |= other_contract[i] == d;
    if (!used) free_oth[nfx++] = d;
  }
  /* gy dims of the other's free dims: after batch and the lhs free dims */
  int64_t gy_c[PC_MAX_RANK] = {0}, gy_b[PC_MAX_RANK] = {0};
  for (int i = 0; i < nfx; i++) gy_c[i] = gy_free_at + i;
  for (int i = 0; i < nb; i++) gy_b[i] = i;
  /* result axes as operand dims: batch, own free, then own contracted dims ordered by the other's
   * contracted dim (the other's dims left over come in increasing order); other first: the two swapped */
  int64_t axis_dim[PC_MAX_RANK], swapped[PC_MAX_RANK];
  int k = nb, ks = nb, same = 1;
  for (int i = 0; i < nb; i++) axis_dim[i] = swapped[i] = batch[i];
  for (int i = 0; i < nfo; i++) axis_dim[k++] = free_own[i];
  for (int d = 0; d < other_rank; d++)
    for (int i = 0; i < nc; i++)
      if (other_contract[i] == d) axis_dim[k++] = swapped[ks++] = contract[i];
  for (int i = 0; i < nfo; i++) swapped[ks++] = free_own[i];
  int64_t perm[PC_MAX_RANK];
  int id = 1;
  for (int a = 0; a < rank; a++) perm[axis_dim[a]] = a, id &= axis_dim[a] == a, same &= swapped[a] == a;
  if (!id && same) return pc_dot_general(g, other, gy, nfx, free_oth, gy_c, nb, other_batch, gy_b);
  pc_value *r = pc_dot_general(g, gy, other, nfx, gy_c, free_oth, nb, gy_b, other_batch);
  return id ? r : pc_transpose(g, r, perm);
}
pc_status ad_vjp_dot_general(pc_graph *g, const pc_node *n, pc_value *const *ct_out, const int *need,
                                 pc_value **ct_in) {
  int nc, nb;
  const int64_t *lc = pc_attr_ints(n, "lhs_contract", &nc), *rc = pc_attr_ints(n, "rhs_contract", NULL);
  const int64_t *lb = pc_attr_ints(n, "lhs_batch", &nb), *rb = pc_attr_ints(n, "rhs_batch", NULL);
  int rl = X(0)->type.rank, rr = X(1)->type.rank;
  int lfree = rl - nb - nc;
  if (need[0]) ct_in[0] = dot_operand_ct(g, GY, X(1), rl, lb, lc, rb, rc, nb, nc, rr, nb + lfree);
  if (need[1]) ct_in[1] = dot_operand_ct(g, GY, X(0), rr, rb, rc, lb, lc, nb, nc, rl, nb);
  return g->status;
}

/* a conv whose pads may be negative (which crop): then the input is padded, dilated and cropped by a pad
 * prim first and convolved without padding */
static pc_value *conv_any_pad(pc_graph *g, pc_value *x, pc_value *w, int ns, const int64_t *stride,
                              const int64_t *lo, const int64_t *hi, const int64_t *dil, const int64_t *ldil,
                              int64_t groups) {
  int neg = 0;
  for (int s = 0; s < ns; s++) neg |= lo[s] < 0 || hi[s] < 0;
  if (!neg) return pc_conv(g, x, w, ns, stride, lo, hi, dil, ldil, groups);
  int64_t pl[PC_MAX_RANK] = {0}, ph[PC_MAX_RANK] = {0}, pi[PC_MAX_RANK] = {0}, z[PC_MAX_RANK] = {0}, one[PC_MAX_RANK];
  for (int s = 0; s < ns; s++) pl[2 + s] = lo[s], ph[2 + s] = hi[s], pi[2 + s] = ldil[s] - 1, one[s] = 1;
  return pc_conv(g, pad_zero(g, x, pl, ph, pi), w, ns, stride, z, z, dil, one, groups);
}
/* The weight gradient of an ungrouped conv as one GEMM: dw [O, C k..] = gy [O, N o..] x cols [C k.., N o..]^T,
 * cols holding for each kernel tap the input pixels that tap met (x padded, then one strided slice per tap).
 * whi: the far pad that ends the windows exactly (negative where the forward's stopped short of its input). */
static pc_value *dw_by_columns(pc_graph *g, pc_value *x, pc_value *gy, int ns, const int64_t *st, const int64_t *lo,
                               const int64_t *whi, const int64_t *dil, const int64_t *kd, const int64_t *od) {
  int r = x->type.rank;
  int64_t N = x->type.dims[0], C = x->type.dims[1], O = gy->type.dims[1], taps = 1, pix = 1;
  int64_t perm[PC_MAX_RANK] = {1, 0}, plo[PC_MAX_RANK] = {0}, phi[PC_MAX_RANK] = {0}, pin[PC_MAX_RANK] = {0};
  for (int s = 0; s < ns; s++) perm[2 + s] = 2 + s, plo[2 + s] = lo[s], phi[2 + s] = whi[s], taps *= kd[s], pix *= od[s];
  pc_value *xp = pad_zero(g, pc_transpose(g, x, perm), plo, phi, pin); /* [C, N, padded sp] */
  pc_value **cols = calloc((size_t)taps, sizeof *cols);
  if (!cols || !xp) return free(cols), pc_fail(g, PC_ERR_NOMEM, "out of memory"), NULL;
  int64_t tap[PC_MAX_RANK] = {0}, one_shape[PC_MAX_RANK + 1];
  one_shape[0] = C, one_shape[1] = 1, one_shape[2] = N;
  for (int s = 0; s < ns; s++) one_shape[3 + s] = od[s];
  for (int64_t t = 0; t < taps && g->status == PC_OK; t++) { /* taps in row-major order, as w stores them */
    int64_t start[PC_MAX_RANK] = {0}, lim[PC_MAX_RANK] = {C, N}, step[PC_MAX_RANK] = {1, 1};
    for (int s = 0; s < ns; s++) {
      start[2 + s] = tap[s] * dil[s], lim[2 + s] = start[2 + s] + (od[s] - 1) * st[s] + 1, step[2 + s] = st[s];
    }
    cols[t] = pc_reshape(g, pc_slice(g, xp, start, lim, step), r + 1, one_shape);
    for (int s = ns - 1; s >= 0 && ++tap[s] == kd[s]; s--) tap[s] = 0;
  }
  pc_value *cat = g->status ? NULL : pc_concatenate(g, cols, (int)taps, 1); /* [C, taps, N, o..] */
  free(cols);
  int64_t cs[2] = {C * taps, N * pix}, gs[2] = {O, N * pix}, c1 = 1;
  pc_value *gt = pc_reshape(g, pc_transpose(g, gy, perm), 2, gs);
  pc_value *dw = pc_dot_general(g, gt, pc_reshape(g, cat, 2, cs), 1, &c1, &c1, 0, NULL, NULL); /* [O, C taps] */
  int64_t ws[PC_MAX_RANK] = {O, C};
  for (int s = 0; s < ns; s++) ws[2 + s] = kd[s];
  return pc_reshape(g, dw, r, ws);
}

/* x [N, C, sp], w [O, C/G, k], y [N, O, o]. dx: the transposed conv of gy (pc_conv_transpose: stride phases,
 * in and out channels swapped per group). dw: per group, the conv of x's channels (as the batch) with gy's
 * channels (as kernels), the batch summed as the channels, stride and dilation swapped. */
pc_status ad_vjp_conv(pc_graph *g, const pc_node *n, pc_value *const *ct_out, const int *need, pc_value **ct_in) {
  pc_value *x = X(0), *w = X(1), *gy = GY;
  int r = x->type.rank, ns = r - 2;
  const int64_t *st = pc_attr_ints(n, "stride", NULL), *lo = pc_attr_ints(n, "pad_lo", NULL);
  const int64_t *dil = pc_attr_ints(n, "dilation", NULL);
  const int64_t *ld = pc_attr_ints(n, "lhs_dilation", NULL);
  int64_t G = pc_attr_int(n, "groups", 1);
  int64_t N = x->type.dims[0], C = x->type.dims[1], O = w->type.dims[0], Cg = C / G, Og = O / G;
  int64_t nd[PC_MAX_RANK], kd[PC_MAX_RANK], od[PC_MAX_RANK];
  for (int s = 0; s < ns; s++) {
    nd[s] = (x->type.dims[2 + s] - 1) * ld[s] + 1; /* the lhs-dilated input */
    kd[s] = w->type.dims[2 + s];
    od[s] = gy->type.dims[2 + s];
  }
  if (need[0]) {
    /* the transposed conv of gy with w read as ConvTranspose's weight [O, C/G, k] gives the gradient of the
     * lhs-dilated input; its every ld-th element is x's */
    pc_value *dxd = pc_conv_transpose(g, gy, w, NULL, G, st, dil, lo, nd);
    int stepped = 0;
    int64_t z[PC_MAX_RANK] = {0}, lim[PC_MAX_RANK], step[PC_MAX_RANK];
    lim[0] = N, lim[1] = C, step[0] = step[1] = 1;
    for (int s = 0; s < ns; s++) lim[2 + s] = nd[s], step[2 + s] = ld[s], stepped |= ld[s] != 1;
    ct_in[0] = stepped ? pc_slice(g, dxd, z, lim, step) : dxd;
  }
  /* the far pad that makes the windows end exactly (negative where the forward's stopped short of its input) */
  int64_t whi[PC_MAX_RANK], taps = 1;
  int plain = G == 1;
  for (int s = 0; s < ns; s++) {
    whi[s] = (kd[s] - 1) * dil[s] + (od[s] - 1) * st[s] + 1 - nd[s] - lo[s];
    taps *= kd[s], plain &= ld[s] == 1;
  }
  if (need[1] && plain && taps <= PC_DW_COLUMNS_MAX_TAPS) {
    ct_in[1] = dw_by_columns(g, x, gy, ns, st, lo, whi, dil, kd, od);
  } else if (need[1]) {
    /* x [N, G, Cg, sp] -> [Cg, G, N, sp] -> [Cg, G*N, sp]; gy [N, G, Og, o] -> [G, Og, N, o] -> [O, N, o] */
    int64_t xs[PC_MAX_RANK + 1] = {N, G, Cg}, xp[PC_MAX_RANK + 1] = {2, 1, 0}, x3[PC_MAX_RANK] = {Cg, G * N};
    int64_t gs[PC_MAX_RANK + 1] = {N, G, Og}, gp[PC_MAX_RANK + 1] = {1, 2, 0}, g3[PC_MAX_RANK] = {O, N};
    for (int s = 0; s < ns; s++) {
      xs[3 + s] = x->type.dims[2 + s], xp[3 + s] = 3 + s, x3[2 + s] = x->type.dims[2 + s];
      gs[3 + s] = od[s], gp[3 + s] = 3 + s, g3[2 + s] = od[s];
    }
    pc_value *xt = pc_reshape(g, pc_transpose(g, pc_reshape(g, x, r + 1, xs), xp), r, x3);
    pc_value *gt = pc_reshape(g, pc_transpose(g, pc_reshape(g, gy, r + 1, gs), gp), r, g3);
    pc_value *dw = conv_any_pad(g, xt, gt, ns, dil, lo, whi, st, ld, G); /* [Cg, O, k] */
    int64_t tp[PC_MAX_RANK] = {1, 0};
    for (int s = 0; s < ns; s++) tp[2 + s] = 2 + s;
    ct_in[1] = pc_transpose(g, dw, tp);
  }
  return g->status;
}

/* ---------------------------------------------------------------- others */

/* the values' gradient goes back to where each value came from: the indices result says where */
pc_status ad_vjp_sort(pc_graph *g, const pc_node *n, pc_value *const *ct_out, const int *need,
                          pc_value **ct_in) {
  if (GY) ct_in[0] = ad_scatter_add(g, ad_zeros(g, X(0)), n->out[1], GY, pc_attr_int(n, "axis", 0));
  return g->status;
}
pc_status ad_vjp_topk(pc_graph *g, const pc_node *n, pc_value *const *ct_out, const int *need, pc_value **ct_in) {
  return ad_vjp_sort(g, n, ct_out, need, ct_in);
}
