/* frontend/onnx_more.c: decompositions of further ONNX ops (attention, losses, windows, sampling) into prims. */
#include "frontend/onnx_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define G (c->g)

/* ---------------------------------------------------------------- small builders */

static pc_value *iota(ox_ctx *c, pc_dtype dt, int rank, const int64_t *shape, int axis) {
  pc_attr a[3] = {pc_a_dtype("dtype", dt), pc_a_ints("shape", shape, rank), pc_a_int("axis", axis)};
  return pc_build(G, PC_OP_iota, NULL, 0, a, 3);
}

static pc_value *scalar(ox_ctx *c, pc_dtype dt, double v) { return pc_scalar(G, dt, v); }

/* numpy-broadcast binary op where the second operand is a scalar of a's dtype */
static pc_value *op_s(ox_ctx *c, pc_op op, pc_value *a, double s) {
  return a ? ox_binary(c, op, a, scalar(c, a->type.dtype, s)) : NULL;
}

/* where(cond, a, b) with numpy broadcasting of all three */
static pc_value *bwhere(ox_ctx *c, pc_value *cond, pc_value *a, pc_value *b) {
  if (!ox_broadcast3(c, &cond, &a, &b)) return NULL;
  return pc_where(G, cond, a, b);
}

/* where(cond, 0, -inf) in dtype dt: an additive mask */
static pc_value *additive(ox_ctx *c, pc_value *cond, pc_dtype dt) {
  return cond ? bwhere(c, cond, scalar(c, dt, 0), scalar(c, dt, -INFINITY)) : NULL;
}

static int check_static(ox_ctx *c, const pc_value *x) {
  if (!x) return 0;
  if (pc_type_is_static(&x->type)) return 1;
  ox_fail(c, PC_ERR_UNSUPPORTED, "needs a static input shape, the input has a symbolic dim");
  return 0;
}

/* The ONNX reference sums bf16 with numpy (ml_dtypes), one bf16 rounding per added element; a
 * short bf16 row is summed that way, in order, so results match it bit for bit. Longer rows
 * (and other dtypes) accumulate in the reduction's wider precision. */
#define SEQ_SUM_MAX 32

static pc_value *sum_last(ox_ctx *c, pc_value *x) {
  int r = x ? x->type.rank : 0;
  int64_t ax = r - 1, n = x ? x->type.dims[r - 1] : 0;
  if (!x || x->type.dtype != PC_bf16 || n < 2 || n > SEQ_SUM_MAX) return ox_reduce(c, PC_OP_reduce_sum, x, 1, &ax, 1);
  int64_t st[PC_MAX_RANK] = {0}, lim[PC_MAX_RANK], one[PC_MAX_RANK];
  for (int i = 0; i < r; i++) lim[i] = x->type.dims[i], one[i] = 1;
  pc_value *acc = NULL;
  for (int64_t k = 0; k < n; k++) {
    st[r - 1] = k, lim[r - 1] = k + 1;
    pc_value *col = pc_slice(G, x, st, lim, one);
    acc = acc ? pc_add(G, acc, col) : col;
  }
  return acc;
}

/* softmax over the last axis; a row that is all -inf gives zeros and bf16 rows are summed in order
 * (ONNX Attention reference), which is why this is not fc_softmax */
static pc_value *safe_softmax(ox_ctx *c, pc_value *x) {
  if (!x) return NULL;
  int64_t ax = x->type.rank - 1;
  pc_dtype dt = x->type.dtype;
  pc_value *m = ox_reduce(c, PC_OP_reduce_max, x, 1, &ax, 1);
  pc_value *dead = op_s(c, PC_OP_eq, m, -INFINITY);
  pc_value *safe = bwhere(c, dead, scalar(c, dt, 0), m);
  pc_value *e = pc_exp(G, ox_binary(c, PC_OP_sub, x, safe));
  pc_value *s = sum_last(c, e);
  s = bwhere(c, op_s(c, PC_OP_eq, s, 0), scalar(c, dt, 1), s);
  return ox_binary(c, PC_OP_div, e, s);
}

/* ---------------------------------------------------------------- Attention (opset 23+) */

typedef struct att {
  pc_dtype T;
  int64_t B, Hq, Hk, Sq, Skv, past;
  int rank3;
} att;

/* [B, S, H*D] -> [B, H, S, D] */
static pc_value *att_heads(ox_ctx *c, pc_value *x, int64_t h, const char *what) {
  if (!x) return NULL;
  const int64_t *d = x->type.dims;
  if (h <= 0 || d[2] % h) return ox_fail(c, PC_ERR_SHAPE, "%s hidden size %lld is not a multiple of %lld heads", what, (long long)d[2], (long long)h), NULL;
  int64_t s4[4] = {d[0], d[1], h, d[2] / h}, perm[4] = {0, 2, 1, 3};
  return pc_transpose(G, ox_reshape(c, x, 4, s4), perm);
}

/* i + offset - j over [Sq, Skv] as i64, offset a scalar or per batch ([B] -> result [B, 1, Sq, Skv]) */
static pc_value *att_diff(ox_ctx *c, const att *a, int64_t off, pc_value *offv) {
  int64_t s[2] = {a->Sq, a->Skv};
  pc_value *i = iota(c, PC_i64, 2, s, 0), *j = iota(c, PC_i64, 2, s, 1);
  if (!offv) return ox_binary(c, PC_OP_sub, op_s(c, PC_OP_add, i, (double)off), j);
  pc_value *ob = ox_reshape(c, offv, 4, (int64_t[]){a->B, 1, 1, 1});
  return ox_binary(c, PC_OP_sub, ox_binary(c, PC_OP_add, ob, i), j);
}

/* additive bias of attn_mask, is_causal, the sliding window and nonpad_kv_seqlen; NULL when none */
static pc_value *att_bias(ox_ctx *c, const att *a, pc_value *mask, pc_value *nonpad) {
  pc_dtype T = a->T;
  int causal = ox_attr_int(c, "is_causal", 0) != 0;
  int64_t left = ox_attr_int(c, "left_window_size", -1), right = ox_attr_int(c, "right_window_size", -1);
  pc_value *offv = nonpad ? op_s(c, PC_OP_sub, pc_convert(G, nonpad, PC_i64), (double)a->Sq) : NULL;
  int64_t off = a->past;
  pc_value *qk0 = pc_full(G, T, 0, 2, (int64_t[]){a->Sq, a->Skv}), *bias = NULL;
  if (mask) {
    int r = mask->type.rank;
    int64_t last = r ? mask->type.dims[r - 1] : 0;
    if (r == 0 || last > a->Skv) return ox_fail(c, PC_ERR_SHAPE, "attn_mask's last dim %lld exceeds the %lld keys", (long long)last, (long long)a->Skv), NULL;
    int is_bool = mask->type.dtype == PC_bool;
    if (last < a->Skv) { /* a shorter mask leaves the remaining keys masked */
      int64_t lo[PC_MAX_RANK] = {0}, hi[PC_MAX_RANK] = {0}, in[PC_MAX_RANK] = {0};
      hi[r - 1] = a->Skv - last;
      pc_attr pa[4] = {pc_a_ints("low", lo, r), pc_a_ints("high", hi, r), pc_a_ints("interior", in, r),
                       pc_a_float("value", is_bool ? 0 : -INFINITY)};
      mask = pc_build(G, PC_OP_pad, &mask, 1, pa, 4);
    }
    bias = is_bool ? additive(c, mask, T) : pc_convert(G, mask, T);
  }
  int window = left >= 0 || right >= 0;
  if (causal || window || bias) bias = ox_binary(c, PC_OP_add, qk0, bias ? bias : qk0);
  if (causal) {
    pc_value *d = att_diff(c, a, off, offv);
    bias = ox_binary(c, PC_OP_add, bias, additive(c, op_s(c, PC_OP_ge, d, 0), T));
  }
  if (window) {
    pc_value *d = att_diff(c, a, off, offv), *ok = NULL;
    if (left >= 0) ok = op_s(c, PC_OP_le, d, (double)left);
    if (right >= 0) {
      pc_value *r = op_s(c, PC_OP_ge, d, (double)-right);
      ok = ok ? ox_binary(c, PC_OP_and, ok, r) : r;
    }
    bias = ox_binary(c, PC_OP_add, bias, additive(c, ok, T));
  }
  if (nonpad) {
    pc_value *j = iota(c, PC_i64, 2, (int64_t[]){a->B, a->Skv}, 1);
    pc_value *n = ox_reshape(c, pc_convert(G, nonpad, PC_i64), 2, (int64_t[]){a->B, 1});
    pc_value *pm = additive(c, ox_binary(c, PC_OP_lt, j, n), T);
    pm = ox_reshape(c, pm, 4, (int64_t[]){a->B, 1, 1, a->Skv});
    bias = ox_binary(c, PC_OP_add, bias ? bias : qk0, pm);
  }
  return bias;
}

/* [B, Hk, S, D] -> [B, Hk*rep, S, D], each head repeated rep times in place (h0 h0 h1 h1 ...) */
static pc_value *att_repeat(ox_ctx *c, pc_value *x, int64_t rep) {
  if (!x || rep == 1) return x;
  const int64_t *d = x->type.dims;
  int64_t s5[5] = {d[0], d[1], rep, d[2], d[3]}, dims[4] = {0, 1, 3, 4};
  pc_value *b = pc_broadcast_in_dim(G, x, 5, s5, dims);
  return ox_reshape(c, b, 4, (int64_t[]){d[0], d[1] * rep, d[2], d[3]});
}

static pc_value *att_cache(ox_ctx *c, pc_value *past, pc_value *x) {
  if (!past || !x) return x;
  if (past->type.dtype != x->type.dtype || past->type.rank != 4)
    return ox_fail(c, PC_ERR_SHAPE, "past_key/past_value must be 4-D of the inputs' type"), NULL;
  pc_value *xs[2] = {past, x};
  return pc_concatenate(G, xs, 2, 2);
}

/* the scores, softmax and weighted sum; sets outputs 0 and 3 */
static pc_status att_core(ox_ctx *c, att *a, pc_value *q, pc_value *k, pc_value *v, pc_value *bias) {
  pc_dtype T = a->T;
  double scale = ox_has_attr(c, "scale") ? ox_attr_float(c, "scale", 1) : 1 / sqrt((double)q->type.dims[3]);
  pc_value *s = scalar(c, T, sqrt(scale)); /* both sides scaled by sqrt(scale), as the reference does */
  q = ox_binary(c, PC_OP_mul, q, s), k = ox_binary(c, PC_OP_mul, k, s);
  int64_t c3 = 3, c2 = 2, bt[2] = {0, 1};
  pc_value *qk = pc_dot_general(G, q, k, 1, &c3, &c3, 2, bt, bt);
  double cap = ox_attr_float(c, "softcap", 0);
  if (cap > 0) qk = op_s(c, PC_OP_mul, pc_tanh(G, op_s(c, PC_OP_div, qk, cap)), cap);
  pc_value *with_bias = bias ? ox_binary(c, PC_OP_add, qk, bias) : qk;
  int64_t mode = ox_attr_int(c, "qk_matmul_output_mode", 0);
  pc_value *qk_out = mode == 2 ? with_bias : qk;
  pc_dtype prec;
  if (!ox_attr_dtype(c, "softmax_precision", T, &prec)) return ox_status(c);
  if (!pc_dtype_is_float(prec)) return ox_fail(c, PC_ERR_TYPE, "softmax_precision must be a float type");
  pc_value *p = safe_softmax(c, pc_convert(G, with_bias, prec));
  if (bias) { /* rows with no attendable key give zeros, decided on the bias alone */
    int64_t ax = bias->type.rank - 1;
    pc_value *bm = ox_reduce(c, PC_OP_reduce_max, bias, 1, &ax, 1);
    p = bwhere(c, op_s(c, PC_OP_eq, bm, -INFINITY), scalar(c, prec, 0), p);
  }
  if (mode == 3) qk_out = p;
  if (mode < 0 || mode > 3) return ox_fail(c, PC_ERR_ATTR, "qk_matmul_output_mode %lld is not 0..3", (long long)mode);
  p = pc_convert(G, p, T);
  pc_value *y = pc_dot_general(G, p, v, 1, &c3, &c2, 2, bt, bt);
  if (a->rank3 && y) {
    const int64_t *d = y->type.dims;
    int64_t perm[4] = {0, 2, 1, 3};
    y = ox_reshape(c, pc_transpose(G, y, perm), 3, (int64_t[]){d[0], d[2], d[1] * d[3]});
  }
  if (ox_out(c, 0, y) != PC_OK) return ox_status(c);
  return ox_has_out(c, 3) ? ox_out(c, 3, pc_convert(G, qk_out, T)) : ox_status(c);
}

pc_status ox_op_Attention(ox_ctx *c) {
  pc_value *q = ox_in_req(c, 0), *k = ox_in_req(c, 1), *v = ox_in_req(c, 2);
  if (!check_static(c, q) || !check_static(c, k) || !check_static(c, v)) return ox_status(c);
  att a = {q->type.dtype, 0, 0, 0, 0, 0, 0, 0};
  if (!ox_require_float(c, q)) return ox_status(c);
  if (k->type.dtype != a.T || v->type.dtype != a.T) return ox_fail(c, PC_ERR_TYPE, "Q, K and V must have one type");
  int r = q->type.rank;
  if (r != k->type.rank || r != v->type.rank || (r != 3 && r != 4)) return ox_fail(c, PC_ERR_SHAPE, "Q, K and V must all be 3-D or all 4-D");
  a.rank3 = r == 3;
  if (a.rank3) {
    if (!ox_has_attr(c, "q_num_heads") || !ox_has_attr(c, "kv_num_heads")) return ox_fail(c, PC_ERR_ATTR, "3-D inputs need q_num_heads and kv_num_heads");
    int64_t hq = ox_attr_int(c, "q_num_heads", 0), hk = ox_attr_int(c, "kv_num_heads", 0);
    q = att_heads(c, q, hq, "Q"), k = att_heads(c, k, hk, "K"), v = att_heads(c, v, hk, "V");
    if (!q || !k || !v) return ox_status(c);
  }
  pc_value *pk = ox_in(c, 4), *pv = ox_in(c, 5);
  if (!pk != !pv) return ox_fail(c, PC_ERR_ATTR, "past_key and past_value must be given together");
  if (pk && !check_static(c, pk)) return ox_status(c);
  a.past = pk ? pk->type.dims[2] : 0;
  k = att_cache(c, pk, k), v = att_cache(c, pv, v);
  if (!k || !v) return ox_status(c);
  a.B = q->type.dims[0], a.Hq = q->type.dims[1], a.Sq = q->type.dims[2];
  a.Hk = k->type.dims[1], a.Skv = k->type.dims[2];
  if (k->type.dims[3] != q->type.dims[3] || v->type.dims[1] != a.Hk || v->type.dims[2] != a.Skv)
    return ox_fail(c, PC_ERR_SHAPE, "K and V shapes do not match Q");
  if (a.Hq % a.Hk) return ox_fail(c, PC_ERR_SHAPE, "%lld query heads are not a multiple of %lld key heads", (long long)a.Hq, (long long)a.Hk);
  if (ox_has_out(c, 1) && ox_out(c, 1, k) != PC_OK) return ox_status(c);
  if (ox_has_out(c, 2) && ox_out(c, 2, v) != PC_OK) return ox_status(c);
  pc_value *mask = ox_in(c, 3), *nonpad = ox_in(c, 6);
  if (nonpad && pk) return ox_fail(c, PC_ERR_ATTR, "nonpad_kv_seqlen cannot be combined with past_key");
  if (nonpad && pc_type_numel(&nonpad->type) != a.B) return ox_fail(c, PC_ERR_SHAPE, "nonpad_kv_seqlen must have one entry per batch");
  pc_value *bias = att_bias(c, &a, mask, nonpad);
  if (ox_status(c) != PC_OK) return ox_status(c);
  int64_t rep = a.Hq / a.Hk;
  return att_core(c, &a, q, att_repeat(c, k, rep), att_repeat(c, v, rep), bias);
}

/* ---------------------------------------------------------------- FlexAttention (ai.onnx.preview) */

/* runs a one-input, one-output graph attribute (score_mod, prob_mod) on x; x when absent */
static pc_value *flex_mod(ox_ctx *c, const char *attr, pc_value *x) {
  const Onnx__GraphProto *b = ox_attr_graph(c, attr);
  if (!b || !x) return x;
  if (b->n_input != 1 || b->n_output != 1 || !b->input[0]->name || !b->output[0]->name)
    return ox_fail(c, PC_ERR_ATTR, "%s must take one input and yield one output", attr), NULL;
  if (ox_name_put(c, b->input[0]->name, x) != PC_OK || ox_import_body(c, b, attr) != PC_OK) return NULL;
  pc_value *y = ox_name_get(c, b->output[0]->name);
  if (!y) return ox_fail(c, PC_ERR_UNSUPPORTED, "%s yields no tensor", attr), NULL;
  if (!pc_type_equal(&y->type, &x->type)) return ox_fail(c, PC_ERR_SHAPE, "%s changes the scores' type or shape", attr), NULL;
  return y;
}

/* softmax(score_mod(Q K^T * scale)) -> prob_mod -> V, in f32 for 16-bit inputs (or softmax_precision) */
pc_status ox_op_FlexAttention(ox_ctx *c) {
  pc_value *q = ox_in_req(c, 0), *k = ox_in_req(c, 1), *v = ox_in_req(c, 2);
  if (!q || !k || !v || !ox_require_float(c, q)) return ox_status(c);
  if (q->type.rank != 4 || k->type.rank != 4 || v->type.rank != 4 || !pc_type_is_static(&q->type) ||
      !pc_type_is_static(&k->type) || !pc_type_is_static(&v->type))
    return ox_fail(c, PC_ERR_SHAPE, "Q, K and V must be static rank-4 tensors");
  int64_t hq = q->type.dims[1], hkv = k->type.dims[1], E = q->type.dims[3];
  if (hkv < 1 || hq % hkv || v->type.dims[1] != hkv || k->type.dims[3] != E || v->type.dims[2] != k->type.dims[2])
    return ox_fail(c, PC_ERR_SHAPE, "Q, K and V heads or dims do not fit");
  pc_dtype dt = q->type.dtype, cdt = dt == PC_f16 || dt == PC_bf16 ? PC_f32 : dt;
  if (!ox_attr_dtype(c, "softmax_precision", cdt, &cdt)) return ox_status(c);
  double scale = ox_attr_float(c, "scale", 1 / sqrt((double)E));
  /* both sides scaled by sqrt(scale), as the reference does, to keep 16-bit products in range */
  pc_value *ss = pc_scalar(G, dt, sqrt((double)(float)scale));
  pc_value *qs = ox_binary(c, PC_OP_mul, q, ss), *ks = ox_binary(c, PC_OP_mul, att_repeat(c, k, hq / hkv), ss);
  int64_t c3 = 3, b01[2] = {0, 1}, c2 = 2;
  pc_value *scores = pc_convert(G, pc_dot_general(G, qs, ks, 1, &c3, &c3, 2, b01, b01), cdt);
  pc_value *p = flex_mod(c, "prob_mod", safe_softmax(c, flex_mod(c, "score_mod", scores)));
  pc_value *vv = pc_convert(G, att_repeat(c, v, hq / hkv), cdt);
  pc_value *y = p && vv ? pc_dot_general(G, p, vv, 1, &c3, &c2, 2, b01, b01) : NULL;
  return ox_out(c, 0, y ? pc_convert(G, y, v->type.dtype) : NULL);
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
  pc_value *valid = has_ii ? op_s(c, PC_OP_ne, t, (double)ii) : NULL;
  /* targets out of [0, C) only occur where ignored: clip them so the gathers stay in range */
  pc_value *tc = pc_clamp(G, t, pc_full_like(G, 0, t), pc_full_like(G, (double)(xd[1] - 1), t));
  int64_t s1[PC_MAX_RANK];
  for (int i = 0; i < r; i++) s1[i] = i == 1 ? 1 : xd[i];
  pc_value *idx = ox_reshape(c, tc, r, s1);
  pc_attr ax = pc_a_int("axis", 1);
  pc_value *gin[2] = {lp, idx};
  pc_value *loss = pc_neg(G, ox_reshape(c, pc_build(G, PC_OP_gather, gin, 2, &ax, 1), r - 1, t ? t->type.dims : NULL));
  if (valid) loss = bwhere(c, valid, loss, scalar(c, T, 0));
  pc_value *gw = NULL; /* per-element weight of the reference */
  if (weight) {
    if (weight->type.rank != 1 || weight->type.dims[0] != xd[1] || weight->type.dtype != T)
      return ox_fail(c, PC_ERR_SHAPE, "weight must be [C] of the input's type"), NULL;
    int64_t one = 1, full[PC_MAX_RANK]; /* weight along C, gathered like the input */
    memcpy(full, xd, sizeof *xd * (size_t)r);
    pc_value *win[2] = {pc_broadcast_in_dim(G, weight, r, full, &one), idx};
    gw = ox_reshape(c, pc_build(G, PC_OP_gather, win, 2, &ax, 1), r - 1, t ? t->type.dims : NULL);
    if (valid) gw = bwhere(c, valid, gw, scalar(c, T, 0));
  } else if (sce ? has_ii : !(has_ii && ii == -1)) {
    gw = valid ? bwhere(c, valid, scalar(c, T, 1), scalar(c, T, 0)) : pc_full_like(G, 1, loss);
  }
  if (gw) loss = pc_mul(G, gw, loss);
  if (!strcmp(red, "none") || !loss) return loss;
  int64_t all[PC_MAX_RANK];
  for (int i = 0; i < r - 1; i++) all[i] = i;
  pc_value *sum = pc_reduce(G, PC_OP_reduce_sum, loss, r - 1, all);
  if (!strcmp(red, "sum")) return sum;
  if (gw) return pc_div(G, sum, pc_reduce(G, PC_OP_reduce_sum, gw, r - 1, all));
  return pc_div(G, sum, scalar(c, T, (double)pc_type_numel(&loss->type)));
}

pc_status ox_op_NegativeLogLikelihoodLoss(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0), *t = ox_in_req(c, 1);
  if (!check_static(c, x) || !check_static(c, t) || !ox_require_float(c, x)) return ox_status(c);
  return ox_out(c, 0, nll_loss(c, x, t, ox_in(c, 2), 0));
}

pc_status ox_op_SoftmaxCrossEntropyLoss(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0), *t = ox_in_req(c, 1);
  if (!check_static(c, x) || !check_static(c, t) || !ox_require_float(c, x)) return ox_status(c);
  if (x->type.rank < 2) return ox_fail(c, PC_ERR_SHAPE, "input must be [N, C, d...]");
  pc_value *lp = fc_softmax(G, x, 1, 1);
  if (ox_out(c, 0, nll_loss(c, lp, t, ox_in(c, 2), 1)) != PC_OK) return ox_status(c);
  return ox_has_out(c, 1) ? ox_out(c, 1, lp) : ox_status(c);
}

/* ---------------------------------------------------------------- activations */

/* x * sigmoid(alpha * x) */
static pc_value *swish(ox_ctx *c, pc_value *x, double alpha) {
  if (!ox_require_float(c, x)) return NULL;
  return pc_mul(G, x, pc_sigmoid(G, alpha == 1 ? x : op_s(c, PC_OP_mul, x, alpha)));
}

pc_status ox_op_Swish(ox_ctx *c) { return ox_out(c, 0, swish(c, ox_in_req(c, 0), ox_attr_float(c, "alpha", 1))); }

pc_status ox_op_SwiGLU(ox_ctx *c) {
  pc_value *a = ox_in_req(c, 0), *b = ox_in_req(c, 1);
  if (!a || !b) return ox_status(c);
  if (!pc_type_equal(&a->type, &b->type)) return ox_fail(c, PC_ERR_SHAPE, "A and B must have one shape and type");
  return ox_out(c, 0, pc_mul(G, swish(c, a, ox_attr_float(c, "alpha", 1)), b));
}

/* ---------------------------------------------------------------- types */

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

/* ---------------------------------------------------------------- scans and movement */

/* CumProd: y[i] = prod of x[j] over the j a triangular mask keeps, as reduce_prod over a new axis */
pc_status ox_op_CumProd(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0);
  int64_t axis;
  if (!check_static(c, x)) return ox_status(c);
  if (ox_const_ints(c, 1, &axis, 1) != 1) return ox_status(c) ? ox_status(c) : ox_fail(c, PC_ERR_ATTR, "axis must be a scalar");
  int r = x->type.rank, a = ox_axis(c, axis, r);
  if (a < 0) return ox_status(c);
  if (r + 1 > PC_MAX_RANK) return ox_fail(c, PC_ERR_RANGE, "rank %d is too large", r);
  int64_t e[PC_MAX_RANK], dims[PC_MAX_RANK];
  for (int i = 0, k = 0; i <= r; i++) e[i] = i == a ? x->type.dims[a] : x->type.dims[k++];
  for (int i = 0; i < r; i++) dims[i] = i < a ? i : i + 1; /* x's axis becomes the source index j at a + 1 */
  pc_value *xb = pc_broadcast_in_dim(G, x, r + 1, e, dims);
  pc_value *ii = iota(c, PC_i64, r + 1, e, a), *jj = iota(c, PC_i64, r + 1, e, a + 1);
  int excl = ox_attr_int(c, "exclusive", 0) != 0, rev = ox_attr_int(c, "reverse", 0) != 0;
  static const pc_op masks[2][2] = {{PC_OP_le, PC_OP_lt}, {PC_OP_ge, PC_OP_gt}}; /* [reverse][exclusive]: j vs i */
  pc_value *keep = ox_binary(c, masks[rev][excl], jj, ii);
  pc_value *v = xb ? pc_where(G, keep, xb, pc_full_like(G, 1, xb)) : NULL;
  int64_t red = a + 1;
  return ox_out(c, 0, pc_reduce(G, PC_OP_reduce_prod, v, 1, &red));
}

/* out[t, b] = x[L[b] - 1 - t, b] for t < L[b], else x[t, b] (time and batch axes 0/1 either way) */
pc_status ox_op_ReverseSequence(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0), *len = ox_in_req(c, 1);
  if (!check_static(c, x) || !len) return ox_status(c);
  int r = x->type.rank;
  int64_t ba = ox_attr_int(c, "batch_axis", 1), ta = ox_attr_int(c, "time_axis", 0);
  if (r < 2 || !((ba == 0 && ta == 1) || (ba == 1 && ta == 0))) return ox_fail(c, PC_ERR_ATTR, "batch_axis and time_axis must be 0 and 1");
  if (len->type.rank != 1 || len->type.dims[0] != x->type.dims[ba]) return ox_fail(c, PC_ERR_SHAPE, "sequence_lens must be [batch]");
  pc_value *t = iota(c, PC_i64, r, x->type.dims, (int)ta);
  pc_value *lb = pc_broadcast_in_dim(G, pc_convert(G, len, PC_i64), r, x->type.dims, &ba);
  pc_value *rt = ox_binary(c, PC_OP_sub, op_s(c, PC_OP_sub, lb, 1), t);
  pc_value *idx = bwhere(c, ox_binary(c, PC_OP_lt, t, lb), rt, t);
  pc_value *in[2] = {x, idx};
  pc_attr a = pc_a_int("axis", ta);
  return ox_out(c, 0, idx ? pc_build(G, PC_OP_gather, in, 2, &a, 1) : NULL);
}

/* Scatter (opset 9-10) is ScatterElements under its old name */
pc_status ox_op_Scatter(ox_ctx *c) { return ox_op_ScatterElements(c); }

/* present = past with update written at write_indices[b] + s along axis (mod its length when circular) */
pc_status ox_op_TensorScatter(ox_ctx *c) {
  pc_value *past = ox_in_req(c, 0), *upd = ox_in_req(c, 1), *wi = ox_in(c, 2);
  if (!check_static(c, past) || !check_static(c, upd)) return ox_status(c);
  int r = past->type.rank, a = ox_axis(c, ox_attr_int(c, "axis", -2), r);
  if (a < 0) return ox_status(c);
  if (a == 0) return ox_fail(c, PC_ERR_ATTR, "axis must not be the batch axis");
  const char *mode = ox_attr_str(c, "mode", "linear");
  int circ = strcmp(mode, "circular") == 0;
  if (!circ && strcmp(mode, "linear")) return ox_fail(c, PC_ERR_ATTR, "mode '%s' is not linear or circular", mode);
  if (upd->type.rank != r || upd->type.dtype != past->type.dtype) return ox_fail(c, PC_ERR_SHAPE, "update must match past_cache's rank and type");
  for (int i = 0; i < r; i++)
    if (i != a ? upd->type.dims[i] != past->type.dims[i] : upd->type.dims[i] > past->type.dims[i])
      return ox_fail(c, PC_ERR_SHAPE, "update's dim %d does not fit past_cache", i);
  const int64_t *us = upd->type.dims;
  pc_value *idx = iota(c, PC_i64, r, us, a);
  if (wi) {
    if (wi->type.rank != 1 || wi->type.dims[0] != us[0]) return ox_fail(c, PC_ERR_SHAPE, "write_indices must be [batch]");
    int64_t zero = 0;
    idx = ox_binary(c, PC_OP_add, idx, pc_broadcast_in_dim(G, pc_convert(G, wi, PC_i64), r, us, &zero));
  }
  if (circ) idx = op_s(c, PC_OP_rem, idx, (double)past->type.dims[a]);
  pc_value *in[3] = {past, idx, upd};
  pc_attr at[2] = {pc_a_int("axis", a), pc_a_str("reduce", "none")};
  return ox_out(c, 0, idx ? pc_build(G, PC_OP_scatter, in, 3, at, 2) : NULL);
}

/* crop (centered, extra element dropped at the end) or zero-pad (extra at the end) each axis to shape */
pc_status ox_op_CenterCropPad(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0);
  if (!check_static(c, x)) return ox_status(c);
  int r = x->type.rank;
  int64_t shape[PC_MAX_RANK], axes[PC_MAX_RANK];
  int n = ox_const_ints(c, 1, shape, PC_MAX_RANK);
  if (n < 0) return ox_status(c) ? ox_status(c) : ox_fail(c, PC_ERR_ATTR, "input shape is required");
  int na = ox_attr_ints(c, "axes", axes, PC_MAX_RANK);
  if (na == -2) return ox_status(c);
  if (na < 0)
    for (na = 0; na < r; na++) axes[na] = na;
  if (na != n) return ox_fail(c, PC_ERR_SHAPE, "shape has %d entries for %d axes", n, na);
  if (!ox_axes(c, axes, na, r)) return ox_status(c);
  int64_t st[PC_MAX_RANK] = {0}, lim[PC_MAX_RANK], one[PC_MAX_RANK], lo[PC_MAX_RANK] = {0}, hi[PC_MAX_RANK] = {0}, in[PC_MAX_RANK] = {0};
  for (int i = 0; i < r; i++) lim[i] = x->type.dims[i], one[i] = 1;
  for (int k = 0; k < na; k++) {
    int64_t ax = axes[k], dim = x->type.dims[ax], sh = shape[k];
    if (sh < 0) return ox_fail(c, PC_ERR_SHAPE, "shape entry %lld is negative", (long long)sh);
    if (sh < dim) st[ax] = (dim - sh) / 2, lim[ax] = st[ax] + sh;
    else lo[ax] = (sh - dim) / 2, hi[ax] = sh - dim - lo[ax];
  }
  pc_value *y = pc_slice(G, x, st, lim, one);
  pc_attr pa[4] = {pc_a_ints("low", lo, r), pc_a_ints("high", hi, r), pc_a_ints("interior", in, r), pc_a_float("value", 0)};
  return ox_out(c, 0, y ? pc_build(G, PC_OP_pad, &y, 1, pa, 4) : NULL);
}

/* ---------------------------------------------------------------- RotaryEmbedding (opset 23) */

/* rows of a [P, R] cache picked by integer positions [B, S] -> [B, S, R] */
static pc_value *rope_rows(ox_ctx *c, pc_value *cache, pc_value *pos) {
  if (!cache || !pos) return NULL;
  if (cache->type.rank != 2) return ox_fail(c, PC_ERR_SHAPE, "with position_ids, the caches must be 2-D"), NULL;
  int64_t bs = pc_type_numel(&pos->type), R = cache->type.dims[1], zero = 0;
  int64_t s2[2] = {bs, R};
  pc_value *p = pc_broadcast_in_dim(G, ox_reshape(c, pc_convert(G, pos, PC_i64), 1, &bs), 2, s2, &zero);
  pc_value *in[2] = {cache, p};
  pc_attr a = pc_a_int("axis", 0);
  pc_value *g = p ? pc_build(G, PC_OP_gather, in, 2, &a, 1) : NULL;
  return ox_reshape(c, g, 3, (int64_t[]){pos->type.dims[0], pos->type.dims[1], R});
}

/* last-dim slice [from, to) with a stride */
static pc_value *last_slice(ox_ctx *c, pc_value *x, int64_t from, int64_t to, int64_t step) {
  int r = x ? x->type.rank : 0;
  int64_t st[PC_MAX_RANK] = {0}, lim[PC_MAX_RANK], one[PC_MAX_RANK];
  for (int i = 0; i < r; i++) lim[i] = x->type.dims[i], one[i] = 1;
  if (!x) return NULL;
  st[r - 1] = from, lim[r - 1] = to, one[r - 1] = step;
  return pc_slice(G, x, st, lim, one);
}

pc_status ox_op_RotaryEmbedding(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0), *cs = ox_in_req(c, 1), *sn = ox_in_req(c, 2), *pos = ox_in(c, 3);
  if (!check_static(c, x) || !cs || !sn || !ox_require_float(c, x)) return ox_status(c);
  int r = x->type.rank;
  int64_t perm[4] = {0, 2, 1, 3}, s4[4];
  if (r == 4) {
    x = pc_transpose(G, x, perm); /* [B, S, H, D] */
  } else if (r == 3) {
    int64_t h = ox_attr_int(c, "num_heads", 0), hid = x->type.dims[2];
    if (h <= 0 || hid % h) return ox_fail(c, PC_ERR_ATTR, "3-D input needs num_heads dividing the hidden size");
    x = ox_reshape(c, x, 4, (int64_t[]){x->type.dims[0], x->type.dims[1], h, hid / h});
  } else {
    return ox_fail(c, PC_ERR_SHAPE, "input must be 3-D or 4-D");
  }
  if (!x) return ox_status(c);
  memcpy(s4, x->type.dims, sizeof s4);
  int64_t D = s4[3], rd = ox_attr_int(c, "rotary_embedding_dim", 0);
  if (rd == 0) rd = D;
  if (rd < 2 || rd > D || rd % 2) return ox_fail(c, PC_ERR_ATTR, "rotary_embedding_dim %lld does not fit head size %lld", (long long)rd, (long long)D);
  int64_t R = rd / 2;
  if (pos) cs = rope_rows(c, cs, pos), sn = rope_rows(c, sn, pos);
  if (!cs || !sn) return ox_status(c);
  if (cs->type.rank != 3 || cs->type.dims[0] != s4[0] || cs->type.dims[1] != s4[1] || cs->type.dims[2] != R || !pc_type_equal(&cs->type, &sn->type))
    return ox_fail(c, PC_ERR_SHAPE, "cos/sin caches must give [batch, seq, %lld]", (long long)R);
  int64_t rs[4] = {s4[0], s4[1], s4[2], R}, cd[3] = {0, 1, 3};
  cs = pc_broadcast_in_dim(G, pc_convert(G, cs, x->type.dtype), 4, rs, cd);
  sn = pc_broadcast_in_dim(G, pc_convert(G, sn, x->type.dtype), 4, rs, cd);
  int inter = ox_attr_int(c, "interleaved", 0) != 0;
  pc_value *x1 = inter ? last_slice(c, x, 0, rd, 2) : last_slice(c, x, 0, R, 1);
  pc_value *x2 = inter ? last_slice(c, x, 1, rd, 2) : last_slice(c, x, R, rd, 1);
  pc_value *re = pc_sub(G, pc_mul(G, cs, x1), pc_mul(G, sn, x2));
  pc_value *im = pc_add(G, pc_mul(G, sn, x1), pc_mul(G, cs, x2));
  pc_value *rot;
  if (inter) {
    int64_t s5[5] = {s4[0], s4[1], s4[2], R, 1};
    pc_value *pair[2] = {ox_reshape(c, re, 5, s5), ox_reshape(c, im, 5, s5)};
    rot = pair[0] && pair[1] ? ox_reshape(c, pc_concatenate(G, pair, 2, 4), 4, (int64_t[]){s4[0], s4[1], s4[2], rd}) : NULL;
  } else {
    pc_value *pair[2] = {re, im};
    rot = re && im ? pc_concatenate(G, pair, 2, 3) : NULL;
  }
  if (rd < D && rot) {
    pc_value *parts[2] = {rot, last_slice(c, x, rd, D, 1)};
    rot = parts[1] ? pc_concatenate(G, parts, 2, 3) : NULL;
  }
  pc_value *y = r == 4 ? pc_transpose(G, rot, perm) : ox_reshape(c, rot, 3, ox_in(c, 0)->type.dims);
  return ox_out(c, 0, y);
}

/* ---------------------------------------------------------------- windows (opset 17) */

typedef enum { WIN_HANN, WIN_HAMMING, WIN_BLACKMAN } win_kind;

static double win_value(win_kind k, double n, double N) {
  const double pi = 3.14159265358979323846;
  switch (k) { /* the three cosine-sum windows of the spec */
  case WIN_HANN: return sin(pi * n / N) * sin(pi * n / N);
  case WIN_HAMMING: return 25.0 / 46.0 - (21.0 / 46.0) * cos(2 * pi * n / N);
  case WIN_BLACKMAN: return 0.42 - 0.5 * cos(2 * pi * n / N) + 0.08 * cos(4 * pi * n / N);
  }
  return 0;
}

static pc_status window_op(ox_ctx *c, win_kind k) {
  int64_t size;
  if (ox_const_ints(c, 0, &size, 1) != 1) return ox_status(c) ? ox_status(c) : ox_fail(c, PC_ERR_ATTR, "size must be a scalar");
  if (size < 0 || size > ((int64_t)1 << 24)) return ox_fail(c, PC_ERR_RANGE, "window size %lld is out of range", (long long)size);
  pc_dtype dt;
  if (!ox_attr_dtype(c, "output_datatype", PC_f32, &dt)) return ox_status(c);
  double N = ox_attr_int(c, "periodic", 1) ? (double)size : (double)(size - 1);
  double *v = malloc(sizeof *v * (size_t)(size ? size : 1));
  if (!v) return ox_fail(c, PC_ERR_NOMEM, "out of memory");
  for (int64_t i = 0; i < size; i++) v[i] = win_value(k, (double)i, N);
  pc_value *w = pc_convert(G, pc_const(G, pc_type_make(PC_f64, 1, &size), v), dt);
  free(v);
  return ox_out(c, 0, w);
}

pc_status ox_op_HannWindow(ox_ctx *c) { return window_op(c, WIN_HANN); }
pc_status ox_op_HammingWindow(ox_ctx *c) { return window_op(c, WIN_HAMMING); }
pc_status ox_op_BlackmanWindow(ox_ctx *c) { return window_op(c, WIN_BLACKMAN); }

/* ---------------------------------------------------------------- GridSample (opset 16+) */

enum { GS_ZEROS, GS_BORDER, GS_REFLECT };
enum { GS_MAX_DIMS = 3, GS_MAX_TAPS = 4 };

/* folds v into [lo, hi] by reflecting at the borders (the reference's _gs_reflect) */
static pc_value *gs_reflect(ox_ctx *c, pc_value *v, double lo, double hi) {
  double rng = hi - lo;
  pc_value *dlo = op_s(c, PC_OP_sub, pc_neg(G, v), -lo), *dhi = op_s(c, PC_OP_sub, v, hi);
  pc_value *nlo = pc_floor(G, op_s(c, PC_OP_div, dlo, rng)), *nhi = pc_floor(G, op_s(c, PC_OP_div, dhi, rng));
  pc_value *rlo = ox_binary(c, PC_OP_sub, dlo, op_s(c, PC_OP_mul, nlo, rng));
  pc_value *rhi = ox_binary(c, PC_OP_sub, dhi, op_s(c, PC_OP_mul, nhi, rng));
  pc_value *elo = op_s(c, PC_OP_eq, op_s(c, PC_OP_rem, nlo, 2), 0), *ehi = op_s(c, PC_OP_eq, op_s(c, PC_OP_rem, nhi, 2), 0);
  pc_value *below = bwhere(c, elo, op_s(c, PC_OP_add, rlo, lo), pc_neg(G, op_s(c, PC_OP_sub, rlo, hi)));
  pc_value *above = bwhere(c, ehi, pc_neg(G, op_s(c, PC_OP_sub, rhi, hi)), op_s(c, PC_OP_add, rhi, lo));
  return bwhere(c, op_s(c, PC_OP_lt, v, lo), below, bwhere(c, op_s(c, PC_OP_gt, v, hi), above, v));
}

/* Keys cubic weight k (0..3) of the tap at offset k-1 from floor, t the fraction */
static pc_value *gs_cubic(ox_ctx *c, pc_value *t, int k) {
  const double A = -0.75;
  pc_value *u = k == 0 ? op_s(c, PC_OP_add, t, 1) : k == 1 ? t : k == 2 ? pc_neg(G, op_s(c, PC_OP_sub, t, 1)) : pc_neg(G, op_s(c, PC_OP_sub, t, 2));
  if (k == 1 || k == 2) /* ((A+2)u - (A+3)) u^2 + 1 */
    return op_s(c, PC_OP_add, pc_mul(G, op_s(c, PC_OP_sub, op_s(c, PC_OP_mul, u, A + 2), A + 3), pc_mul(G, u, u)), 1);
  /* ((A u - 5A) u + 8A) u - 4A */
  pc_value *p = op_s(c, PC_OP_add, pc_mul(G, op_s(c, PC_OP_sub, op_s(c, PC_OP_mul, u, A), 5 * A), u), 8 * A);
  return op_s(c, PC_OP_sub, pc_mul(G, p, u), 4 * A);
}

typedef struct gs_dim {
  int64_t L;
  double lo, hi;               /* the border of the coordinate range */
  pc_value *idx[GS_MAX_TAPS];  /* i64 tap index, in range */
  pc_value *ok[GS_MAX_TAPS];   /* bool: the tap is inside (zeros padding), else NULL */
  pc_value *w[GS_MAX_TAPS];    /* tap weight, NULL for nearest */
} gs_dim;

/* a tap at float position p resolved by the padding mode into an index and a validity mask */
static void gs_tap(ox_ctx *c, gs_dim *d, int k, pc_value *p, int pad) {
  if (pad == GS_REFLECT) p = gs_reflect(c, p, d->lo, d->hi);
  d->ok[k] = pad == GS_ZEROS ? ox_binary(c, PC_OP_and, op_s(c, PC_OP_ge, p, 0), op_s(c, PC_OP_lt, p, (double)d->L)) : NULL;
  pc_value *i = pc_convert(G, p, PC_i64); /* truncates, as the reference's int() */
  d->idx[k] = i ? pc_clamp(G, i, pc_full_like(G, 0, i), pc_full_like(G, (double)(d->L - 1), i)) : NULL;
}

pc_status ox_op_GridSample(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0), *grid = ox_in_req(c, 1);
  if (!check_static(c, x) || !check_static(c, grid) || !ox_require_float(c, x)) return ox_status(c);
  int r = x->type.rank, k = r - 2;
  if (k < 1 || k > GS_MAX_DIMS || grid->type.rank != r || grid->type.dims[r - 1] != k || grid->type.dims[0] != x->type.dims[0])
    return ox_fail(c, PC_ERR_SHAPE, "X must be [N, C, D1..Dk] (k <= %d) and grid [N, O1..Ok, k]", GS_MAX_DIMS);
  const char *mode = ox_attr_str(c, "mode", c->opset >= 20 ? "linear" : "bilinear"), *pm = ox_attr_str(c, "padding_mode", "zeros");
  int taps = !strcmp(mode, "nearest") ? 1 : (!strcmp(mode, "linear") || !strcmp(mode, "bilinear")) ? 2 : (!strcmp(mode, "cubic") || !strcmp(mode, "bicubic")) ? 4 : 0;
  int pad = !strcmp(pm, "zeros") ? GS_ZEROS : !strcmp(pm, "border") ? GS_BORDER : !strcmp(pm, "reflection") ? GS_REFLECT : -1;
  if (!taps || pad < 0) return ox_fail(c, PC_ERR_ATTR, "mode '%s' / padding_mode '%s' is not supported", mode, pm);
  int align = ox_attr_int(c, "align_corners", 0) != 0;
  pc_dtype T = x->type.dtype;
  grid = pc_convert(G, grid, T);
  const int64_t *gd = grid->type.dims;
  int64_t N = x->type.dims[0], C = x->type.dims[1], Q = 1, P = 1;
  for (int i = 1; i < r - 1; i++) Q *= gd[i];
  for (int i = 0; i < k; i++) P *= x->type.dims[2 + i];
  gs_dim dims[GS_MAX_DIMS];
  for (int i = 0; i < k; i++) {
    gs_dim *d = &dims[i];
    d->L = x->type.dims[2 + i];
    d->lo = align ? 0 : -0.5, d->hi = align ? (double)d->L - 1 : (double)d->L - 0.5;
    int64_t st[PC_MAX_RANK] = {0}, lim[PC_MAX_RANK], one[PC_MAX_RANK];
    for (int j = 0; j < r; j++) lim[j] = gd[j], one[j] = 1;
    st[r - 1] = k - 1 - i, lim[r - 1] = k - i; /* grid's last dim lists the coordinates innermost first */
    pc_value *u = ox_reshape(c, pc_slice(G, grid, st, lim, one), 2, (int64_t[]){N, Q});
    pc_value *v = align ? op_s(c, PC_OP_mul, op_s(c, PC_OP_add, u, 1), ((double)d->L - 1) / 2)
                        : op_s(c, PC_OP_div, op_s(c, PC_OP_sub, op_s(c, PC_OP_mul, op_s(c, PC_OP_add, u, 1), (double)d->L), 1), 2);
    if (taps == 1) v = pc_round(G, v);
    if (pad == GS_BORDER) v = pc_clamp(G, v, pc_full_like(G, 0, v), pc_full_like(G, (double)d->L - 1, v));
    else if (pad == GS_REFLECT) v = gs_reflect(c, v, d->lo, d->hi);
    if (taps == 1) {
      gs_tap(c, d, 0, v, pad);
      d->w[0] = NULL;
      continue;
    }
    pc_value *f = pc_floor(G, v), *t = ox_binary(c, PC_OP_sub, v, f);
    for (int j = 0; j < taps; j++) {
      int off = taps == 2 ? j : j - 1;
      gs_tap(c, d, j, op_s(c, PC_OP_add, f, off), pad);
      d->w[j] = taps == 2 ? (j ? t : pc_neg(G, op_s(c, PC_OP_sub, t, 1))) : gs_cubic(c, t, j);
    }
  }
  if (ox_status(c) != PC_OK) return ox_status(c);
  pc_value *xf = ox_reshape(c, x, 3, (int64_t[]){N, C, P}), *acc = NULL;
  int64_t s3[3] = {N, C, Q}, bd[2] = {0, 2};
  int combos = 1;
  for (int i = 0; i < k; i++) combos *= taps;
  for (int m = 0; m < combos; m++) {
    pc_value *flat = NULL, *ok = NULL, *w = NULL;
    for (int i = 0, rest = m; i < k; i++, rest /= taps) {
      gs_dim *d = &dims[k - 1 - i];
      int j = rest % taps;
      int64_t stride = 1;
      for (int q = k - i; q < k; q++) stride *= dims[q].L;
      pc_value *term = op_s(c, PC_OP_mul, d->idx[j], (double)stride);
      flat = flat ? pc_add(G, flat, term) : term;
      if (d->ok[j]) ok = ok ? pc_and(G, ok, d->ok[j]) : d->ok[j];
      if (d->w[j]) w = w ? pc_mul(G, w, d->w[j]) : d->w[j];
    }
    pc_value *gin[2] = {xf, pc_broadcast_in_dim(G, flat, 3, s3, bd)};
    pc_attr ax = pc_a_int("axis", 2);
    pc_value *val = gin[1] ? pc_build(G, PC_OP_gather, gin, 2, &ax, 1) : NULL;
    if (ok) val = bwhere(c, pc_broadcast_in_dim(G, ok, 3, s3, bd), val, scalar(c, T, 0));
    if (w) val = pc_mul(G, val, pc_broadcast_in_dim(G, w, 3, s3, bd));
    acc = acc ? pc_add(G, acc, val) : val;
  }
  int64_t ys[PC_MAX_RANK] = {N, C};
  for (int i = 1; i < r - 1; i++) ys[1 + i] = gd[i];
  return ox_out(c, 0, ox_reshape(c, acc, r, ys));
}

/* ---------------------------------------------------------------- AffineGrid (opset 20) */

/* normalized coordinate i of a dim of length L, in [-1, 1] */
static double ag_coord(int64_t i, int64_t L, int align) {
  if (align) return L > 1 ? -1 + 2.0 * (double)i / (double)(L - 1) : -1;
  return -1 + (2.0 * (double)i + 1) / (double)L;
}

pc_status ox_op_AffineGrid(ox_ctx *c) {
  pc_value *theta = ox_in_req(c, 0);
  int64_t size[5];
  int n = ox_const_ints(c, 1, size, 5);
  if (!check_static(c, theta) || n < 0 || !ox_require_float(c, theta)) return ox_status(c);
  int k = n - 2;
  if (k != 2 && k != 3) return ox_fail(c, PC_ERR_SHAPE, "size must be [N, C, H, W] or [N, C, D, H, W]");
  const int64_t *td = theta->type.dims;
  if (theta->type.rank != 3 || td[0] != size[0] || td[1] != k || td[2] != k + 1)
    return ox_fail(c, PC_ERR_SHAPE, "theta must be [%lld, %d, %d]", (long long)size[0], k, k + 1);
  int64_t P = 1;
  for (int i = 0; i < k; i++) {
    if (size[2 + i] < 1 || size[2 + i] > (1 << 20)) return ox_fail(c, PC_ERR_RANGE, "size entries must be in 1..2^20");
    P *= size[2 + i];
  }
  if (P > ((int64_t)1 << 24)) return ox_fail(c, PC_ERR_RANGE, "the grid has more than 2^24 points");
  /* homogeneous base grid [P, k+1]: (x, y[, z], 1) with x along the last spatial dim */
  int align = ox_attr_int(c, "align_corners", 0) != 0;
  double *base = malloc(sizeof *base * (size_t)(P * (k + 1)));
  if (!base) return ox_fail(c, PC_ERR_NOMEM, "out of memory");
  for (int64_t p = 0; p < P; p++) {
    int64_t rest = p;
    for (int j = 0; j < k; j++) { /* j = 0 is x, the fastest-varying dim */
      int64_t L = size[1 + k - j];
      base[p * (k + 1) + j] = ag_coord(rest % L, L, align);
      rest /= L;
    }
    base[p * (k + 1) + k] = 1;
  }
  pc_value *b = pc_const(G, pc_type_make(PC_f64, 2, (int64_t[]){P, k + 1}), base);
  free(base);
  int64_t lc = 2, rc = 1, perm[3] = {0, 2, 1}, ys[5] = {size[0]};
  pc_value *g = pc_dot_general(G, pc_convert(G, theta, PC_f64), b, 1, &lc, &rc, 0, NULL, NULL); /* [N, k, P] */
  for (int i = 0; i < k; i++) ys[1 + i] = size[2 + i];
  ys[1 + k] = k;
  return ox_out(c, 0, pc_convert(G, ox_reshape(c, pc_transpose(G, g, perm), k + 2, ys), theta->type.dtype));
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

/* ---------------------------------------------------------------- Det */

#define DET_MAX_N 5 /* cofactor expansion: n! products */

/* determinant of the rows from `row` on and the columns in `cols` (bit set) by cofactor expansion */
static pc_value *det_minor(ox_ctx *c, pc_value *const *e, int n, int row, unsigned cols) {
  if (row == n) return NULL;
  pc_value *sum = NULL;
  int sign = 1;
  for (int j = 0; j < n; j++) {
    if (!(cols & (1u << j))) continue;
    pc_value *rest = det_minor(c, e, n, row + 1, cols & ~(1u << j));
    pc_value *t = rest ? pc_mul(G, e[row * n + j], rest) : e[row * n + j];
    sum = !sum ? t : sign > 0 ? pc_add(G, sum, t) : pc_sub(G, sum, t);
    sign = -sign;
  }
  return sum;
}

pc_status ox_op_Det(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0);
  if (!x || !check_static(c, x) || !ox_require_float(c, x)) return ox_status(c);
  int r = x->type.rank;
  if (r < 2 || x->type.dims[r - 1] != x->type.dims[r - 2]) return ox_fail(c, PC_ERR_SHAPE, "needs [..., n, n] matrices");
  int64_t n = x->type.dims[r - 1];
  if (n < 1 || n > DET_MAX_N) return ox_fail(c, PC_ERR_UNSUPPORTED, "determinants of %lld x %lld matrices (at most %d)", (long long)n, (long long)n, DET_MAX_N);
  pc_value *e[DET_MAX_N * DET_MAX_N];
  int64_t start[PC_MAX_RANK] = {0}, limit[PC_MAX_RANK], one[PC_MAX_RANK];
  for (int i = 0; i < r; i++) limit[i] = x->type.dims[i], one[i] = 1;
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < n; j++) {
      start[r - 2] = i, limit[r - 2] = i + 1, start[r - 1] = j, limit[r - 1] = j + 1;
      e[i * n + j] = ox_reshape(c, pc_slice(G, x, start, limit, one), r - 2, x->type.dims);
    }
  return ox_out(c, 0, det_minor(c, e, (int)n, 0, (1u << n) - 1));
}

/* ---------------------------------------------------------------- ai.onnx.ml */

pc_status ox_op_Binarizer(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0);
  if (!x) return ox_status(c);
  pc_value *above = op_s(c, PC_OP_gt, x, ox_attr_float(c, "threshold", 0));
  return ox_out(c, 0, pc_where(G, above, ox_like(c, 1, x), ox_like(c, 0, x)));
}

/* the entries Y of the last axis of X; a 1-D X reads as one row */
pc_status ox_op_ArrayFeatureExtractor(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0), *y = ox_in_req(c, 1);
  if (!x || !y || !check_static(c, x)) return ox_status(c);
  if (x->type.rank == 1) x = ox_reshape(c, x, 2, (int64_t[]){1, x->type.dims[0]});
  int r = x->type.rank;
  int64_t n = pc_type_numel(&y->type), shape[PC_MAX_RANK], last = r - 1;
  for (int i = 0; i < r; i++) shape[i] = i == last ? n : x->type.dims[i];
  pc_value *idx = pc_convert(G, ox_reshape(c, y, 1, &n), PC_i64); /* the gather prim takes one index per output */
  idx = idx ? pc_broadcast_in_dim(G, idx, r, shape, &last) : NULL;
  pc_attr a = pc_a_int("axis", last);
  pc_value *in[2] = {x, idx};
  return ox_out(c, 0, idx ? pc_build(G, PC_OP_gather, in, 2, &a, 1) : NULL);
}

/* TreeEnsemble: every tree becomes nested selects over its decisions, each leaf a one-hot row of
 * its weight at its target; the trees' rows add up (aggregate SUM or AVERAGE, no post transform) */
#define TE_MAX_NODES 4096
#define TE_MAX_DEPTH 64

typedef struct te_model {
  int64_t n_nodes, n_leaves, n_targets, n_members, cursor;
  int64_t feat[TE_MAX_NODES], tnode[TE_MAX_NODES], fnode[TE_MAX_NODES], tleaf[TE_MAX_NODES], fleaf[TE_MAX_NODES];
  int64_t mode[TE_MAX_NODES], missing[TE_MAX_NODES], target[TE_MAX_NODES];
  double split[TE_MAX_NODES], weight[TE_MAX_NODES], members[TE_MAX_NODES];
  pc_value *memo[TE_MAX_NODES]; /* each inner node's value once: children shared by several parents (a DAG) would
                                 * otherwise be rebuilt once per path, 2^depth times */
  pc_value *x;
} te_model;

/* a TENSOR attribute's values as doubles; the count, -1 when absent */
static int te_floats(ox_ctx *c, const char *name, double *out, int max) {
  pc_value *v = ox_attr_tensor(c, name);
  if (!v) return -1;
  const void *d = pc_const_data(v);
  int64_t n = pc_type_numel(&v->type);
  if (n > max || (v->type.dtype != PC_f32 && v->type.dtype != PC_f64 && v->type.dtype != PC_u8))
    return ox_fail(c, PC_ERR_ATTR, "attribute %s: too long or of an unexpected type", name), -2;
  for (int64_t k = 0; k < n; k++)
    out[k] = v->type.dtype == PC_f32 ? ((const float *)d)[k] : v->type.dtype == PC_f64 ? ((const double *)d)[k] : ((const uint8_t *)d)[k];
  return (int)n;
}

/* the [N, 1] decision of node i on the rows of X */
static pc_value *te_decide(ox_ctx *c, te_model *m, int64_t i) {
  pc_value *x = m->x;
  int64_t N = x->type.dims[0], st[2] = {0, m->feat[i]}, lim[2] = {N, m->feat[i] + 1}, one[2] = {1, 1};
  pc_value *f = pc_slice(G, x, st, lim, one), *d = NULL;
  static const pc_op cmp[] = {PC_OP_le, PC_OP_lt, PC_OP_ge, PC_OP_gt, PC_OP_eq, PC_OP_ne};
  if (m->mode[i] >= 0 && m->mode[i] < 6) d = op_s(c, cmp[m->mode[i]], f, m->split[i]);
  else if (m->mode[i] == 6) { /* membership: the next NaN-terminated run of members */
    for (; m->cursor < m->n_members && m->members[m->cursor] == m->members[m->cursor]; m->cursor++) {
      pc_value *e = op_s(c, PC_OP_eq, f, m->members[m->cursor]);
      d = d ? pc_or(G, d, e) : e;
    }
    m->cursor++;
    if (!d && f) d = pc_full(G, PC_bool, 0, 2, f->type.dims); /* an empty set: never */
  } else return ox_fail(c, PC_ERR_ATTR, "node %lld has mode %lld", (long long)i, (long long)m->mode[i]), NULL;
  if (d && m->missing[i]) d = pc_or(G, d, pc_isnan(G, f));
  return d;
}

static pc_value *te_leaf(ox_ctx *c, te_model *m, int64_t i) {
  if (i < 0 || i >= m->n_leaves || m->target[i] < 0 || m->target[i] >= m->n_targets)
    return ox_fail(c, PC_ERR_ATTR, "leaf %lld is out of range", (long long)i), NULL;
  int64_t shape[2] = {m->x->type.dims[0], m->n_targets}, t = m->target[i], one = 1;
  pc_value *row = pc_full(G, m->x->type.dtype, 0, 1, &m->n_targets);
  pc_value *w = pc_full(G, m->x->type.dtype, m->weight[i], 1, &one);
  int64_t lo = t, hi = m->n_targets - t - 1, in = 0;
  pc_attr a[4] = {pc_a_ints("low", &lo, 1), pc_a_ints("high", &hi, 1), pc_a_ints("interior", &in, 1), pc_a_float("value", 0)};
  pc_value *hot = w ? pc_build(G, PC_OP_pad, &w, 1, a, 4) : row;
  return hot ? pc_broadcast_to(G, hot, 2, shape) : NULL;
}

static pc_value *te_node(ox_ctx *c, te_model *m, int64_t i, int is_leaf, int depth) {
  if (ox_status(c) != PC_OK) return NULL; /* a failed subtree: stop, do not retry it on every path */
  if (is_leaf) return te_leaf(c, m, i);
  if (i < 0 || i >= m->n_nodes || depth > TE_MAX_DEPTH) return ox_fail(c, PC_ERR_ATTR, "bad tree node %lld", (long long)i), NULL;
  if (m->memo[i]) return m->memo[i];
  pc_value *d = te_decide(c, m, i);
  pc_value *t = te_node(c, m, m->tnode[i], m->tleaf[i] != 0, depth + 1), *f = te_node(c, m, m->fnode[i], m->fleaf[i] != 0, depth + 1);
  if (!d || !t || !f) return NULL;
  return m->memo[i] = pc_where(G, pc_broadcast_to(G, d, 2, t->type.dims), t, f);
}

static int te_ints(ox_ctx *c, const char *name, int64_t *out, int64_t n, int required) {
  int got = ox_attr_ints(c, name, out, TE_MAX_NODES);
  if (got == -1 && !required) {
    for (int64_t i = 0; i < n; i++) out[i] = 0;
    return 1;
  }
  if (got < 0 || (n >= 0 && got != n)) return got == -2 ? 0 : (ox_fail(c, PC_ERR_ATTR, "attribute %s is missing or of the wrong length", name), 0);
  return 1;
}

pc_status ox_op_TreeEnsemble(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0);
  if (!x || !check_static(c, x) || !ox_require_float(c, x)) return ox_status(c);
  if (x->type.rank != 2) return ox_fail(c, PC_ERR_SHAPE, "X must be [N, features]");
  int64_t agg = ox_attr_int(c, "aggregate_function", 1), post = ox_attr_int(c, "post_transform", 0);
  if ((agg != 0 && agg != 1) || post != 0)
    return ox_fail(c, PC_ERR_UNSUPPORTED, "aggregate_function %lld / post_transform %lld (SUM or AVERAGE, no transform)", (long long)agg, (long long)post);
  te_model *m = pc_alloc(G, sizeof *m);
  int64_t roots[TE_MAX_NODES];
  if (!m) return ox_status(c);
  memset(m->memo, 0, sizeof m->memo);
  m->x = x;
  m->n_targets = ox_attr_int(c, "n_targets", 0);
  double modes[TE_MAX_NODES];
  int nm = te_floats(c, "nodes_modes", modes, TE_MAX_NODES), ns = te_floats(c, "nodes_splits", m->split, TE_MAX_NODES);
  int nw = te_floats(c, "leaf_weights", m->weight, TE_MAX_NODES), nmem = te_floats(c, "membership_values", m->members, TE_MAX_NODES);
  int nr = ox_attr_ints(c, "tree_roots", roots, TE_MAX_NODES);
  if (nm < 0 || ns != nm || nw < 0 || nmem == -2 || nr < 1 || m->n_targets < 1)
    return ox_status(c) != PC_OK ? ox_status(c) : ox_fail(c, PC_ERR_ATTR, "incomplete tree ensemble attributes");
  m->n_nodes = nm, m->n_leaves = nw, m->n_members = nmem < 0 ? 0 : nmem;
  for (int i = 0; i < nm; i++) m->mode[i] = (int64_t)modes[i];
  if (!te_ints(c, "nodes_featureids", m->feat, nm, 1) || !te_ints(c, "nodes_truenodeids", m->tnode, nm, 1) ||
      !te_ints(c, "nodes_falsenodeids", m->fnode, nm, 1) || !te_ints(c, "nodes_trueleafs", m->tleaf, nm, 1) ||
      !te_ints(c, "nodes_falseleafs", m->fleaf, nm, 1) || !te_ints(c, "nodes_missing_value_tracks_true", m->missing, nm, 0) ||
      !te_ints(c, "leaf_targetids", m->target, nw, 1))
    return ox_status(c);
  for (int i = 0; i < nm; i++)
    if (m->feat[i] < 0 || m->feat[i] >= x->type.dims[1]) return ox_fail(c, PC_ERR_ATTR, "node %d reads feature %lld", i, (long long)m->feat[i]);
  pc_value *sum = NULL;
  for (int r = 0; r < nr && ox_status(c) == PC_OK; r++) {
    int64_t i = roots[r];
    int leaf = i >= 0 && i < nm && m->tleaf[i] && m->fleaf[i] && m->tnode[i] == m->fnode[i];
    pc_value *t = te_node(c, m, i, leaf, 0);
    sum = sum && t ? pc_add(G, sum, t) : t;
  }
  if (sum && agg == 0) sum = op_s(c, PC_OP_div, sum, (double)nr);
  return ox_out(c, 0, sum);
}

/* ---------------------------------------------------------------- MelWeightMatrix */

#define MEL_MAX_ELEMS ((int64_t)1 << 22)

/* a frequency in hertz on the mel scale, in float32 like the reference's float inputs */
static float hz_to_mel(float hz) { return 2595.0f * (float)log1p(hz / 700.0f) / (float)log(10.0); }

/* the triangular filter bank [dft_length / 2 + 1, num_mel_bins]: a constant of the (compile-time) inputs */
pc_status ox_op_MelWeightMatrix(ox_ctx *c) {
  int64_t bins, dft, rate;
  double lo_hz, hi_hz;
  if (ox_const_ints(c, 0, &bins, 1) != 1 || ox_const_ints(c, 1, &dft, 1) != 1 || ox_const_ints(c, 2, &rate, 1) != 1 ||
      ox_const_floats(c, 3, &lo_hz, 1) != 1 || ox_const_floats(c, 4, &hi_hz, 1) != 1)
    return ox_status(c) != PC_OK ? ox_status(c) : ox_fail(c, PC_ERR_ATTR, "all five inputs are required scalars");
  int64_t rows = dft / 2 + 1;
  if (bins < 1 || dft < 1 || rate < 1 || rows * bins > MEL_MAX_ELEMS) return ox_fail(c, PC_ERR_ATTR, "bad sizes");
  pc_dtype dt;
  if (!ox_attr_dtype(c, "output_datatype", PC_f32, &dt)) return ox_status(c);
  float lo_mel = hz_to_mel((float)lo_hz), hi_mel = hz_to_mel((float)hi_hz), step = (hi_mel - lo_mel) / (float)(bins + 2);
  int64_t *f = pc_alloc(G, sizeof *f * (size_t)(bins + 2));
  double *w = pc_alloc(G, sizeof *w * (size_t)(rows * bins));
  if (!f || !w) return ox_status(c);
  for (int64_t i = 0; i < bins + 2; i++) { /* bin edges in DFT bins */
    double hz = 700.0 * expm1(((double)i * step + lo_mel) / 2595.0 * log(10.0));
    f[i] = (int64_t)floor((double)(dft + 1) * hz / (double)rate);
  }
  for (int64_t i = 0; i < bins; i++) {
    int64_t l = f[i], m = f[i + 1], h = f[i + 2];
    if (l < 0 || h >= rows || m < l || h < m) return ox_fail(c, PC_ERR_RANGE, "mel band %lld falls outside the DFT bins", (long long)i);
    if (m == l) w[m * bins + i] = 1;
    for (int64_t j = l; m > l && j <= m; j++) w[j * bins + i] = (double)(j - l) / (double)(m - l);
    for (int64_t j = m; h > m && j < h; j++) w[j * bins + i] = (double)(h - j) / (double)(h - m);
  }
  int64_t shape[2] = {rows, bins};
  return ox_out(c, 0, pc_convert(G, pc_const(G, pc_type_make(PC_f64, 2, shape), w), dt));
}

/* ---------------------------------------------------------------- TfIdfVectorizer */

#define TFIDF_MAX_POOL 4096

/* occurrences in each row of X (last axis) of the n-gram g whose items lie d apart */
static pc_value *tfidf_count(ox_ctx *c, pc_value *x, const int64_t *g, int n, int64_t d) {
  int r = x->type.rank;
  int64_t C = x->type.dims[r - 1], P = C - (int64_t)(n - 1) * d, ax = r - 1;
  if (P <= 0) return NULL;
  int64_t st[2] = {0, 0}, lim[2], one[2] = {1, 1};
  pc_value *hit = NULL;
  for (int k = 0; k < n; k++) {
    for (int i = 0; i < r; i++) lim[i] = x->type.dims[i];
    st[r - 1] = k * d, lim[r - 1] = k * d + P;
    pc_value *e = op_s(c, PC_OP_eq, pc_slice(G, x, st, lim, one), (double)g[k]);
    hit = hit ? pc_and(G, hit, e) : e;
  }
  return ox_reduce(c, PC_OP_reduce_sum, pc_convert(G, hit, PC_f32), 1, &ax, 0);
}

/* counts of the pool's n-grams in each row of X, with skips, weighted (TF, IDF, TFIDF) */
pc_status ox_op_TfIdfVectorizer(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0);
  if (!x || !check_static(c, x)) return ox_status(c);
  if ((x->type.rank != 1 && x->type.rank != 2) || !pc_dtype_is_int(x->type.dtype))
    return ox_fail(c, PC_ERR_UNSUPPORTED, "needs int tokens of rank 1 or 2 (string pools are not supported)");
  int64_t *pool = pc_alloc(G, sizeof *pool * TFIDF_MAX_POOL), counts[64], *index = pc_alloc(G, sizeof *index * TFIDF_MAX_POOL);
  double *w = pc_alloc(G, sizeof *w * TFIDF_MAX_POOL);
  int64_t lo = ox_attr_int(c, "min_gram_length", 1), hi = ox_attr_int(c, "max_gram_length", 1), skip = ox_attr_int(c, "max_skip_count", 0);
  int np = pool ? ox_attr_ints(c, "pool_int64s", pool, TFIDF_MAX_POOL) : -2, nc = ox_attr_ints(c, "ngram_counts", counts, 64);
  int ni = index ? ox_attr_ints(c, "ngram_indexes", index, TFIDF_MAX_POOL) : -2, nw = w ? ox_attr_floats(c, "weights", w, TFIDF_MAX_POOL) : -2;
  const char *mode = ox_attr_str(c, "mode", "TF");
  int tf = !strcmp(mode, "TF"), idf = !strcmp(mode, "IDF");
  if (np < 0 || nc < 1 || ni < 0 || nw == -2 || lo < 1 || hi < lo || skip < 0 || (!tf && !idf && strcmp(mode, "TFIDF")))
    return ox_status(c) != PC_OK ? ox_status(c) : ox_fail(c, PC_ERR_ATTR, "bad or missing pool_int64s, ngram_counts, ngram_indexes, gram lengths or mode");
  for (int L = 0; L < nc; L++)
    if (counts[L] < 0 || counts[L] > np || (L && counts[L] < counts[L - 1]))
      return ox_fail(c, PC_ERR_ATTR, "ngram_counts must rise from 0 within the %d pool entries", np);
  int64_t out_n = 0;
  for (int i = 0; i < ni; i++) {
    if (index[i] < 0 || index[i] >= TFIDF_MAX_POOL)
      return ox_fail(c, PC_ERR_ATTR, "ngram_indexes[%d] = %lld is outside [0, %d)", i, (long long)index[i], TFIDF_MAX_POOL);
    out_n = index[i] + 1 > out_n ? index[i] + 1 : out_n;
  }
  pc_value **col = pc_alloc(G, sizeof *col * (size_t)(out_n + 1));
  int g_id = 0; /* the pool's n-grams, level by level: level L holds (L+1)-grams */
  for (int L = 0; col && L < nc && ox_status(c) == PC_OK; L++) {
    int64_t n = L + 1, end = L + 1 < nc ? counts[L + 1] : np;
    for (int64_t at = counts[L]; at + n <= end && g_id < ni; at += n, g_id++) {
      if (n < lo || n > hi || index[g_id] < 0) continue;
      pc_value *sum = NULL;
      /* unigrams do not skip; an n-gram's items d apart fit a row of C tokens only while (n - 1) d < C,
       * so larger skips add nothing (a max_skip_count near 2^63 once looped that many times: fuzz_mutate) */
      int64_t C = x->type.dims[x->type.rank - 1], dmax = n == 1 ? 1 : (C > 1 ? (C - 1) / (n - 1) : 1);
      if (n > 1 && skip < dmax) dmax = skip + 1;
      for (int64_t d = 1; d <= dmax; d++) {
        pc_value *k = tfidf_count(c, x, pool + at, (int)n, d);
        sum = sum && k ? pc_add(G, sum, k) : k ? k : sum;
      }
      if (sum) col[index[g_id]] = col[index[g_id]] ? pc_add(G, col[index[g_id]], sum) : sum;
    }
  }
  if (!col || ox_status(c) != PC_OK) return ox_status(c);
  int r = x->type.rank;
  int64_t one_shape[2] = {x->type.dims[0], 1};
  for (int64_t i = 0; i < out_n; i++) {
    pc_value *v = col[i] ? ox_reshape(c, col[i], r, r == 2 ? one_shape : (int64_t[]){1}) : pc_full(G, PC_f32, 0, r, r == 2 ? one_shape : (int64_t[]){1});
    if (v && !tf) { /* IDF: the weight where present; TFIDF: weight * count (weights default to 1) */
      double wi = i < nw ? w[i] : 1;
      v = idf ? pc_where(G, op_s(c, PC_OP_gt, v, 0), ox_like(c, wi, v), ox_like(c, 0, v)) : op_s(c, PC_OP_mul, v, wi);
    }
    col[i] = v;
  }
  return ox_out(c, 0, pc_concatenate(G, col, (int)out_n, r - 1));
}
