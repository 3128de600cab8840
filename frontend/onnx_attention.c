/* frontend/onnx_attention.c: decompositions of the ONNX attention ops into prims: Attention (opset 23+),
 * FlexAttention (ai.onnx.preview) and RotaryEmbedding. */
#include "frontend/onnx_internal.h"

#include <math.h>
#include <string.h>

#define G (c->g)

/* ---------------------------------------------------------------- small builders */

/* where(cond, 0, -inf) in dtype dt: an additive mask */
static pc_value *additive(ox_ctx *c, pc_value *cond, pc_dtype dt) {
  return cond ? ox_where(c, cond, ox_scalar(c, dt, 0), ox_scalar(c, dt, -INFINITY)) : NULL;
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
  pc_value *dead = ox_binary_s(c, PC_OP_eq, m, -INFINITY);
  pc_value *safe = ox_where(c, dead, ox_scalar(c, dt, 0), m);
  pc_value *e = pc_exp(G, ox_binary(c, PC_OP_sub, x, safe));
  pc_value *s = sum_last(c, e);
  s = ox_where(c, ox_binary_s(c, PC_OP_eq, s, 0), ox_scalar(c, dt, 1), s);
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
  pc_value *i = ox_iota(c, PC_i64, 2, s, 0), *j = ox_iota(c, PC_i64, 2, s, 1);
  if (!offv) return ox_binary(c, PC_OP_sub, ox_binary_s(c, PC_OP_add, i, (double)off), j);
  pc_value *ob = ox_reshape(c, offv, 4, (int64_t[]){a->B, 1, 1, 1});
  return ox_binary(c, PC_OP_sub, ox_binary(c, PC_OP_add, ob, i), j);
}

/* additive bias of attn_mask, is_causal, the sliding window and nonpad_kv_seqlen; NULL when none */
static pc_value *att_bias(ox_ctx *c, const att *a, pc_value *mask, pc_value *nonpad) {
  pc_dtype T = a->T;
  int causal = ox_attr_int(c, "is_causal", 0) != 0;
  int64_t left = ox_attr_int(c, "left_window_size", -1), right = ox_attr_int(c, "right_window_size", -1);
  pc_value *offv = nonpad ? ox_binary_s(c, PC_OP_sub, pc_convert(G, nonpad, PC_i64), (double)a->Sq) : NULL;
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
    bias = ox_binary(c, PC_OP_add, bias, additive(c, ox_binary_s(c, PC_OP_ge, d, 0), T));
  }
  if (window) {
    pc_value *d = att_diff(c, a, off, offv), *ok = NULL;
    if (left >= 0) ok = ox_binary_s(c, PC_OP_le, d, (double)left);
    if (right >= 0) {
      pc_value *r = ox_binary_s(c, PC_OP_ge, d, (double)-right);
      ok = ok ? ox_binary(c, PC_OP_and, ok, r) : r;
    }
    bias = ox_binary(c, PC_OP_add, bias, additive(c, ok, T));
  }
  if (nonpad) {
    pc_value *j = ox_iota(c, PC_i64, 2, (int64_t[]){a->B, a->Skv}, 1);
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
  pc_value *s = ox_scalar(c, T, sqrt(scale)); /* both sides scaled by sqrt(scale), as the reference does */
  q = ox_binary(c, PC_OP_mul, q, s), k = ox_binary(c, PC_OP_mul, k, s);
  int64_t c3 = 3, c2 = 2, bt[2] = {0, 1};
  pc_value *qk = pc_dot_general(G, q, k, 1, &c3, &c3, 2, bt, bt);
  double cap = ox_attr_float(c, "softcap", 0);
  if (cap > 0) qk = ox_binary_s(c, PC_OP_mul, pc_tanh(G, ox_binary_s(c, PC_OP_div, qk, cap)), cap);
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
    p = ox_where(c, ox_binary_s(c, PC_OP_eq, bm, -INFINITY), ox_scalar(c, prec, 0), p);
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
  if (!ox_check_static_input(c, q) || !ox_check_static_input(c, k) || !ox_check_static_input(c, v)) return ox_status(c);
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
  if (pk && !ox_check_static_input(c, pk)) return ox_status(c);
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
  if (!ox_check_static_input(c, x) || !cs || !sn || !ox_require_float(c, x)) return ox_status(c);
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
