/* passes/qdq.c: convs and dots of dequantized integers (the QDQ format: Conv, MatMul or Gemm of DequantizeLinear(x)
 * and DequantizeLinear(w)) computed on the integers.
 *
 * A QDQ model's conv reads x_f = (f32(qx) - zx) * sx and w_f = (wq - zw[o]) * sw[o]; run as written it is an f32
 * conv on fake-quantized values, slower than the fp32 model (it also pays the dequantization). The same sum is
 * sx * sw[o] * conv(qx - zx, wq - zw) with an exact int32 conv, which codegen runs on the int8 GEMM (conv_i8):
 * the conv becomes that, its i32 result scaled per output channel; a dot_general of a dequantized activation
 * and a dequantized constant likewise (dot_i8), scaled along the weight's free dim its scales follow. Only a per-tensor activation scale and zero
 * point, per-tensor or per-output-channel weight scales and zero points, 8-bit integers and sums that cannot
 * overflow int32 qualify; anything else stays as it is. */
#include "passes/passes.h"
#include "passes/rewrite.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define QDQ_MAX_CH 65536

/* a scale or zero point: a constant read in place, one value per index along axis of the value it feeds (-1: one
 * value for all; c NULL: none, 0) */
typedef struct qparam {
  const pc_value *c;
  int axis;
  int64_t n;
} qparam;

/* the value of index i along the parameter's axis */
static double qp_at(const qparam *q, int64_t i) {
  return q->c ? pc_elem_f64(q->c->type.dtype, pc_const_data(q->c), q->axis < 0 ? 0 : i) : 0;
}

/* v is a constant holding one value, or a broadcast of a constant of rank 0 or 1 (of at most QDQ_MAX_CH values),
 * through converts: it as *q. 0 otherwise. */
static int axis_const(const pc_value *v, qparam *q) {
  const pc_node *p = v->producer;
  if (p && p->op == PC_OP_convert_element_type && p->n_in == 1) {
    pc_dtype from = p->in[0]->type.dtype;
    if (!pc_dtype_is_int(from) && !pc_dtype_is_float(from)) return 0;
    return axis_const(p->in[0], q);
  }
  const void *d = pc_const_data(v);
  if (d) { /* a constant: one value repeated (a folded broadcast of a scalar) */
    int64_t total = pc_type_numel(&v->type);
    if (total < 1) return 0;
    double first = pc_elem_f64(v->type.dtype, d, 0);
    for (int64_t i = 1; i < total; i++)
      if (pc_elem_f64(v->type.dtype, d, i) != first) return 0;
    return *q = (qparam){v, -1, 1}, 1;
  }
  if (!p || p->op != PC_OP_broadcast_in_dim || p->n_in != 1) return 0;
  const pc_value *c = p->in[0];
  int len = 0;
  const int64_t *dims = pc_attr_ints(p, "dims", &len);
  if (!pc_const_data(c) || c->type.rank > 1 || len != c->type.rank || pc_type_numel(&c->type) > QDQ_MAX_CH) return 0;
  return *q = (qparam){c, c->type.rank ? (int)dims[0] : -1, pc_type_numel(&c->type)}, 1;
}

/* a dequantized value: (q - z) * s, z and s constant along their axes; q an 8-bit integer value, or (qc) a constant
 * of integers in [-128, 255] */
typedef struct dq {
  pc_value *q;        /* the integer value (NULL for a constant q) */
  const pc_value *qc; /* the constant q, f32 or integer typed */
  qparam z, s;
} dq;

/* c holds integers of 8 bits: a convert of a u8/i8 value, or an integral constant within [-128, 255] */
static int int_source(pc_value *c, dq *d) {
  const pc_node *p = c->producer;
  if (p && p->op == PC_OP_convert_element_type && p->n_in == 1 &&
      (p->in[0]->type.dtype == PC_u8 || p->in[0]->type.dtype == PC_i8)) {
    if (pc_const_data(p->in[0])) return d->qc = p->in[0], 1; /* a weight not folded yet */
    return d->q = p->in[0], 1;
  }
  const void *data = pc_const_data(c);
  if (!data) return 0;
  for (int64_t i = 0, n = pc_type_numel(&c->type); i < n; i++) {
    double v = pc_elem_f64(c->type.dtype, data, i);
    if (v != floor(v) || v < -128 || v > 255) return 0;
  }
  return d->qc = c, 1;
}

static int match_dq(pc_value *v, dq *d) {
  memset(d, 0, sizeof *d);
  const pc_node *m = v->producer;
  if (!m || m->op != PC_OP_mul || m->n_in != 2 || v->type.dtype != PC_f32) return 0;
  for (int k = 0; k < 2; k++) {
    if (!axis_const(m->in[1 - k], &d->s)) continue;
    pc_value *r = m->in[k];
    const pc_node *sb = r->producer;
    if (sb && sb->op == PC_OP_sub && sb->n_in == 2 && axis_const(sb->in[1], &d->z) && int_source(sb->in[0], d))
      return 1;
    d->q = NULL, d->qc = NULL;
    if (int_source(r, d)) return d->z = (qparam){NULL, -1, 1}, 1;
  }
  return 0;
}

/* n (a conv or a dot_general of dequantized x and w) as op(i32(qx) - zx, wq - zw) * sx * sw: the int32 op, its result
 * scaled along out_axis by w's scales, which lie along w's dim axis (-1: one scale); NULL when a zero point is not a
 * small integer */
static pc_value *scaled_integer(pc_graph *g, const pc_node *n, const dq *x, const dq *w, int axis, int out_axis) {
  const pc_type *wt = &n->in[1]->type;
  int64_t total = pc_type_numel(wt), inner = 1, len = axis >= 0 ? wt->dims[axis] : 1, oa = out_axis;
  for (int d = axis + 1; axis >= 0 && d < wt->rank; d++) inner *= wt->dims[d];
  int32_t *wi = malloc(sizeof *wi * (size_t)total);
  float *sc = malloc(sizeof *sc * (size_t)len);
  double zx = qp_at(&x->z, 0);
  int ok = wi && sc && zx == floor(zx) && fabs(zx) <= 255;
  const void *wd = pc_const_data(w->qc);
  for (int64_t i = 0; ok && i < total; i++) {
    double z = qp_at(&w->z, axis >= 0 ? i / inner % len : 0);
    ok = z == floor(z) && fabs(z) <= 255;
    wi[i] = (int32_t)(pc_elem_f64(w->qc->type.dtype, wd, i) - z);
  }
  for (int64_t c = 0; ok && c < len; c++) sc[c] = (float)(qp_at(&x->s, 0) * qp_at(&w->s, c));
  pc_value *y = NULL;
  if (ok) {
    pc_value *q32 = pc_convert(g, x->q, PC_i32);
    pc_value *xi = q32 ? pc_sub(g, q32, pc_full_like(g, zx, q32)) : NULL;
    pc_value *wc = pc_const(g, pc_type_make(PC_i32, wt->rank, wt->dims), wi);
    pc_value *r = xi && wc ? pc_build(g, n->op, (pc_value *[]){xi, wc}, 2, n->attrs, n->n_attrs) : NULL;
    const pc_type *ot = &n->out[0]->type;
    pc_value *s = pc_const(g, pc_type_make(PC_f32, axis >= 0 ? 1 : 0, &len), sc);
    pc_value *sb = s ? pc_broadcast_in_dim(g, s, ot->rank, ot->dims, axis >= 0 ? &oa : NULL) : NULL;
    y = r && sb ? pc_mul(g, pc_convert(g, r, PC_f32), sb) : NULL;
  }
  free(wi);
  free(sc);
  return y;
}

/* conv n of QDQ operands as the scaled int32 conv; NULL when it does not qualify */
static pc_value *integer_conv(pc_graph *g, pc_node *n) {
  const pc_type *wt = &n->in[1]->type;
  int len = 0;
  const int64_t *ld = pc_attr_ints(n, "lhs_dilation", &len);
  for (int i = 0; ld && i < len; i++)
    if (ld[i] != 1) return NULL;
  int64_t o = wt->dims[0], k = pc_type_numel(wt) / (o > 0 ? o : 1);
  if (n->out[0]->type.dtype != PC_f32 || o < 1 || o > QDQ_MAX_CH || k > 33000) return NULL; /* 255 * 255 * k < 2^31 */
  dq x, w;
  pc_value *y = NULL;
  if (match_dq(n->in[0], &x) && x.q && x.s.axis < 0 && x.z.axis < 0 && match_dq(n->in[1], &w) && w.qc &&
      (w.s.axis < 0 || (w.s.axis == 0 && w.s.n == o)) && (w.z.axis < 0 || (w.z.axis == 0 && w.z.n == o)))
    y = scaled_integer(g, n, &x, &w, w.s.axis >= 0 || w.z.axis >= 0 ? 0 : -1, 1); /* channels: w's dim 0, y's dim 1 */
  return y;
}

/* the output axis of b's dim `axis` in dot_general n (batch dims, a's free dims, b's free dims); -1 when it is a
 * batch or contracting dim of b */
static int dot_out_axis(const pc_node *n, int axis) {
  int nb = 0, nc = 0, nlb = 0;
  const int64_t *rb = pc_attr_ints(n, "rhs_batch", &nb), *rc = pc_attr_ints(n, "rhs_contract", &nc);
  pc_attr_ints(n, "lhs_batch", &nlb);
  int free_before = 0;
  for (int d = 0; d < n->in[1]->type.rank; d++) {
    int taken = 0;
    for (int i = 0; i < nb; i++) taken |= rb[i] == d;
    for (int i = 0; i < nc; i++) taken |= rc[i] == d;
    if (d == axis) return taken ? -1 : nlb + (n->in[0]->type.rank - nlb - nc) + free_before;
    free_before += !taken;
  }
  return -1;
}

/* dot_general n of a dequantized activation and a dequantized constant (a QDQ MatMul or Gemm) as the scaled int32
 * dot, which codegen runs on the int8 GEMM (dot_i8); NULL when it does not qualify */
static pc_value *integer_dot(pc_graph *g, pc_node *n) {
  const pc_type *bt = &n->in[1]->type;
  int nc = 0;
  const int64_t *rc = pc_attr_ints(n, "rhs_contract", &nc);
  int64_t k = 1;
  for (int i = 0; rc && i < nc; i++) k *= bt->dims[rc[i]];
  if (n->out[0]->type.dtype != PC_f32 || k > 33000) return NULL; /* 255 * 255 * k < 2^31 */
  dq x, w;
  pc_value *y = NULL;
  if (match_dq(n->in[0], &x) && x.q && x.s.axis < 0 && x.z.axis < 0 && match_dq(n->in[1], &w) && w.qc &&
      (w.s.axis < 0 || w.z.axis < 0 || w.s.axis == w.z.axis)) {
    int axis = w.s.axis >= 0 ? w.s.axis : w.z.axis, out_axis = axis >= 0 ? dot_out_axis(n, axis) : -1;
    if (axis < 0 || (out_axis >= 0 && (w.s.axis < 0 || w.s.n == bt->dims[axis]) && (w.z.axis < 0 || w.z.n == bt->dims[axis])))
      y = scaled_integer(g, n, &x, &w, axis, out_axis);
  }
  return y;
}

/* ---------------------------------------------------------------- max pools of dequantized values
 *
 * DequantizeLinear with one scale s > 0 and one zero point z is increasing, so a max pool of it (MaxPool imports as a
 * pad with -inf, strided slices and a tree of max) is the dequantization of the max pool of the 8-bit values, with
 * the pad value the type's least (every window holds a real element, which is never below it); and QuantizeLinear
 * with the same s and z gives the 8-bit values back exactly: round(((q - z) s) / s) + z = q, as (q - z) s / s is
 * within 2^-22 |q - z| of q - z. A QDQ ResNet's stem pool then runs on u8, a quarter of the bytes, with no f32
 * map padded and requantized around it. */

#define MEMO_MAX 512

/* values already rebuilt on the integers, and the one dequantization they share */
typedef struct pool_int {
  pc_value *from[MEMO_MAX], *to[MEMO_MAX];
  dq under[MEMO_MAX]; /* the dequantization of each to */
  int n, have;
  dq p;
  const pcp_users *users;
  int n_values0; /* values the users index covers (those present when it was built) */
} pool_int;

/* v = (f32(q) - z) * s with one s > 0 and one integer z, q 8-bit: *d */
static int dq_tensor(pc_value *v, dq *d) {
  if (!match_dq(v, d) || !d->q || d->s.axis >= 0 || d->z.axis >= 0 || d->q->type.rank != v->type.rank) return 0;
  double z = qp_at(&d->z, 0);
  return qp_at(&d->s, 0) > 0 && z == floor(z) && fabs(z) <= 255;
}

static int same_dq(const dq *a, const dq *b) {
  return qp_at(&a->s, 0) == qp_at(&b->s, 0) && qp_at(&a->z, 0) == qp_at(&b->z, 0) && a->q->type.dtype == b->q->type.dtype;
}

/* every user of v is a slice, and every user of those a max */
static int feeds_max_only(const pcp_users *u, const pc_value *v) {
  for (int i = u->start[v->id]; i < u->start[v->id + 1]; i++) {
    const pc_node *sl = u->list[i];
    if (sl->op != PC_OP_slice) return 0;
    for (int j = u->start[sl->out[0]->id]; j < u->start[sl->out[0]->id + 1]; j++)
      if (u->list[j]->op != PC_OP_max) return 0;
  }
  return u->start[v->id + 1] > u->start[v->id];
}

/* the integer value w with v = DQ(w) under the dequantization every leaf shares (built before the node visited),
 * through slices, pads of -inf that only a max reads and max; NULL when v is not such a value */
static pc_value *int_of(pc_graph *g, pc_value *v, pool_int *m, int depth) {
  for (int i = 0; i < m->n; i++)
    if (m->from[i] == v) {
      if (m->have && !same_dq(&m->p, &m->under[i])) return NULL;
      m->p = m->under[i], m->have = 1;
      return m->to[i];
    }
  const pc_node *n = v->producer;
  pc_value *w = NULL, *a, *b;
  dq d;
  if (depth > 32 || !n) return NULL;
  if (dq_tensor(v, &d)) {
    if (m->have && !same_dq(&m->p, &d)) return NULL;
    m->p = d, m->have = 1;
    w = d.q;
  } else if (n->op == PC_OP_slice && n->n_in == 1 && (a = int_of(g, n->in[0], m, depth + 1))) {
    w = pc_build(g, PC_OP_slice, &a, 1, n->attrs, n->n_attrs);
  } else if (n->op == PC_OP_pad && n->n_in == 1 && isinf(pc_attr_float(n, "value", 0)) &&
             pc_attr_float(n, "value", 0) < 0 && v->id < m->n_values0 && feeds_max_only(m->users, v) &&
             (a = int_of(g, n->in[0], m, depth + 1))) {
    pc_attr at[4];
    int k = 0;
    for (int i = 0; i < n->n_attrs && k < 3; i++)
      if (strcmp(n->attrs[i].name, "value")) at[k++] = n->attrs[i];
    at[k++] = pc_a_float("value", a->type.dtype == PC_u8 ? 0 : -128);
    w = pc_build(g, PC_OP_pad, &a, 1, at, k);
  } else if (n->op == PC_OP_max && n->n_in == 2 && (a = int_of(g, n->in[0], m, depth + 1)) &&
             (b = int_of(g, n->in[1], m, depth + 1))) {
    w = pc_max(g, a, b);
  }
  if (w && m->n < MEMO_MAX) m->from[m->n] = v, m->under[m->n] = m->p, m->to[m->n++] = w;
  return w;
}

/* a max of dequantized values as the dequantization of the max of their integers; NULL when it is not one */
static pc_value *integer_max(pc_graph *g, pc_node *n, pool_int *m) {
  m->have = 0;
  pc_value *w = int_of(g, n->out[0], m, 0);
  if (!w || w == m->p.q) return NULL;
  pc_value *f = pc_convert(g, w, PC_f32);
  double z = qp_at(&m->p.z, 0);
  if (z != 0) f = pc_sub(g, f, pc_full_like(g, z, f));
  return pc_mul(g, f, pc_full_like(g, qp_at(&m->p.s, 0), f));
}

/* x with a constant operand of one value: the other operand, the value in *c */
static pc_value *with_const(const pc_node *x, pc_op op, double *c) {
  qparam q;
  if (!x || x->op != op || x->n_in != 2 || !axis_const(x->in[1], &q) || q.axis >= 0) return NULL;
  *c = qp_at(&q, 0);
  return x->in[0];
}

/* n = QuantizeLinear(DQ(q)) with DQ's s and z, to q's type (convert(clamp(round(x / s) + z, lo, hi))): q */
static pc_value *requantized(pc_node *n) {
  const pc_node *cl = n->in[0]->producer;
  double s, z = 0, lo, hi;
  qparam ql, qh;
  if (n->op != PC_OP_convert_element_type || !cl || cl->op != PC_OP_clamp || cl->n_in != 3 ||
      !axis_const(cl->in[1], &ql) || !axis_const(cl->in[2], &qh) || ql.axis >= 0 || qh.axis >= 0)
    return NULL;
  lo = qp_at(&ql, 0), hi = qp_at(&qh, 0);
  const pc_node *r = cl->in[0]->producer;
  pc_value *added = r && r->op == PC_OP_add ? with_const(r, PC_OP_add, &z) : NULL;
  if (added) r = added->producer;
  pc_value *x = r && r->op == PC_OP_round && r->n_in == 1 ? with_const(r->in[0]->producer, PC_OP_div, &s) : NULL;
  dq d;
  if (!x || !dq_tensor(x, &d) || d.q->type.dtype != n->out[0]->type.dtype || qp_at(&d.s, 0) != s ||
      qp_at(&d.z, 0) != z || lo != (d.q->type.dtype == PC_u8 ? 0 : -128) || hi != (d.q->type.dtype == PC_u8 ? 255 : 127))
    return NULL;
  return d.q;
}

pc_status pc_pass_qdq(pc_graph *g) {
  if (g->status != PC_OK) return g->status;
  pcp_users users;
  if (pcp_users_build(g, &users) != PC_OK) return g->status;
  pool_int *m = calloc(1, sizeof *m);
  pcp_sweep s;
  if (!m || pcp_sweep_begin(g, &s) != PC_OK) {
    free(m);
    pcp_users_free(&users);
    return g->status ? g->status : (g->status = PC_ERR_NOMEM);
  }
  m->users = &users, m->n_values0 = g->n_values;
  for (int i = 0; i < s.n0 && g->status == PC_OK; i++) {
    pc_node *n = pcp_sweep_visit(&s, i);
    if (n->dead || n->n_out != 1) continue;
    int first = g->n_nodes;
    pc_value *y = NULL;
    if ((n->op == PC_OP_conv || n->op == PC_OP_dot_general) && n->n_in == 2)
      y = n->op == PC_OP_conv ? integer_conv(g, n) : integer_dot(g, n); /* built before n */
    else if (n->op == PC_OP_max && n->n_in == 2 && n->out[0]->type.dtype == PC_f32)
      y = integer_max(g, n, m);
    else if (n->op == PC_OP_convert_element_type && n->n_in == 1)
      y = requantized(n);
    for (int j = first; y && j < g->n_nodes; j++) g->nodes[j]->origin = n->origin;
    if (y && g->status == PC_OK && pcp_sweep_replace(&s, n->out[0], y)) n->dead = 1;
  }
  free(m);
  pcp_users_free(&users);
  if (pcp_sweep_end(&s) != PC_OK) return g->status;
  pc_graph_compact(g);
  return g->status;
}
