/* passes/ad_shift.c: a softmax's max shift passes no gradient, and a closed softmax's gradient is one row sum. */
#include "passes/autodiff.h"
#include "passes/rewrite.h"

/*
 * The softmax composite (frontend/composite.c) subtracts each row's max before exp, for range: z = x - max(x),
 * e = exp(z), y = e / sum(e), or z - log(sum(e)) for log-softmax. y does not change when a row's z all shift
 * alike, so the max's cotangent, -sum(gz) over the row, is zero but for rounding. Taking it anyway costs each
 * softmax's backward two row reductions (that sum, and reduce_max's count of ties) and a term in x's
 * cotangent, and leaves rounding noise that PyTorch's softmax backward does not have. The shift is recognized
 * when the rows' function is that closed pattern: every reader of z, e and sum(e) is one of its nodes, and
 * none of them is a graph output.
 */

typedef struct shift_ctx {
  const pc_graph *g;
  const pcp_users *u;
} shift_ctx;

/* v's one reader, of op; NULL when v has other readers or is an output */
static pc_node *sole(const shift_ctx *c, const pc_value *v, pc_op op) {
  if (pcp_users_count(c->u, v) != 1 || pc_value_is_output(c->g, v)) return NULL;
  pc_node *r = c->u->list[c->u->start[v->id]];
  return r->op == op && r->n_out == 1 ? r : NULL;
}

/* r, reduced from x over axes (n of them), broadcast back: reshape to the kept dims, then broadcast_in_dim onto
 * x's shape dim for dim. The broadcast's result, or NULL. */
static const pc_value *kept_back(const shift_ctx *c, const pc_value *r, const pc_value *x, const int64_t *axes, int n) {
  const pc_node *rs = sole(c, r, PC_OP_reshape), *bc = rs ? sole(c, rs->out[0], PC_OP_broadcast_in_dim) : NULL;
  if (!bc || !pc_type_equal(&bc->out[0]->type, &x->type)) return NULL;
  const pc_type *kt = &rs->out[0]->type;
  int nd = 0;
  const int64_t *dims = pc_attr_ints(bc, "dims", &nd);
  if (kt->rank != x->type.rank || nd != kt->rank) return NULL;
  for (int d = 0; d < kt->rank; d++) {
    int red = 0;
    for (int j = 0; j < n; j++) red |= axes[j] == d;
    if (dims[d] != d || kt->dims[d] != (red ? 1 : x->type.dims[d])) return NULL;
  }
  return bc->out[0];
}

static int same_axes(const pc_node *a, const pc_node *b) {
  int na = 0, nb = 0;
  const int64_t *xa = pc_attr_ints(a, "axes", &na), *xb = pc_attr_ints(b, "axes", &nb);
  if (na != nb || !xa || !xb) return 0;
  for (int i = 0; i < na; i++)
    if (xa[i] != xb[i]) return 0;
  return 1;
}

/* each reader of the row sum s is the softmax's division of e or log-softmax's subtraction from z */
static int sum_readers_closed(const shift_ctx *c, const pc_node *sum, const pc_value *z, const pc_value *e) {
  const pc_value *s = sum->out[0], *x = z;
  int n = 0;
  const int64_t *axes = pc_attr_ints(sum, "axes", &n);
  if (pc_value_is_output(c->g, s) || pcp_users_count(c->u, s) == 0) return 0;
  for (int k = c->u->start[s->id]; k < c->u->start[s->id + 1]; k++) {
    const pc_node *r = c->u->list[k];
    if (r->op == PC_OP_reshape) {
      const pc_value *b = kept_back(c, s, x, axes, n);
      const pc_node *div = b ? sole(c, b, PC_OP_div) : NULL;
      if (!div || div->in[0] != e || div->in[1] != b) return 0;
    } else if (r->op == PC_OP_log && r->n_out == 1 && !pc_value_is_output(c->g, r->out[0])) {
      const pc_value *b = kept_back(c, r->out[0], x, axes, n);
      const pc_node *sub = b ? sole(c, b, PC_OP_sub) : NULL;
      if (!sub || sub->in[0] != z || sub->in[1] != b) return 0;
    } else {
      return 0;
    }
  }
  return 1;
}

int ad_shift_free_max(const pc_graph *g, const pcp_users *u, const pc_node *n) {
  shift_ctx c = {g, u};
  int na = 0;
  const int64_t *axes = pc_attr_ints(n, "axes", &na);
  if (n->op != PC_OP_reduce_max || n->n_out != 1 || !axes || !na) return 0;
  const pc_value *x = n->in[0];
  const pc_value *b = kept_back(&c, n->out[0], x, axes, na);
  const pc_node *sub = b ? sole(&c, b, PC_OP_sub) : NULL;
  if (!sub || sub->in[0] != x || sub->in[1] != b) return 0;
  const pc_value *z = sub->out[0], *e = NULL;
  const pc_node *sum = NULL;
  if (pc_value_is_output(g, z)) return 0;
  /* z's readers: one exp, and log-softmax's subtractions (checked from the sum's side) */
  for (int k = u->start[z->id]; k < u->start[z->id + 1]; k++) {
    const pc_node *r = u->list[k];
    if (r->op == PC_OP_exp && !e) e = r->out[0];
    else if (r->op != PC_OP_sub || r->in[0] != z || r->in[1] == z) return 0;
  }
  if (!e || pc_value_is_output(g, e)) return 0;
  /* e's readers: its one row sum over the max's axes, and the softmax's divisions (checked from the sum) */
  for (int k = u->start[e->id]; k < u->start[e->id + 1]; k++) {
    const pc_node *r = u->list[k];
    if (r->op == PC_OP_reduce_sum && !sum && same_axes(r, n)) sum = r;
    else if (r->op != PC_OP_div || r->in[0] != e) return 0;
  }
  if (!sum || !sum_readers_closed(&c, sum, z, e)) return 0;
  /* every subtraction from z and division of e is one the sum's readers reached */
  int subs = 0, divs = 0, reached = 0;
  for (int k = u->start[z->id]; k < u->start[z->id + 1]; k++) subs += u->list[k]->op == PC_OP_sub;
  for (int k = u->start[e->id]; k < u->start[e->id + 1]; k++) divs += u->list[k]->op == PC_OP_div;
  reached = pcp_users_count(u, sum->out[0]);
  return subs + divs == reached;
}

/* x's producer chain as the composite builds it: z = sub(x, broadcast(reshape(reduce_max(x)))); the max node */
static const pc_node *shift_of(const pc_value *z) {
  const pc_node *sub = z->producer, *bc = sub && sub->op == PC_OP_sub ? sub->in[1]->producer : NULL;
  const pc_node *rs = bc && bc->op == PC_OP_broadcast_in_dim ? bc->in[0]->producer : NULL;
  const pc_node *m = rs && rs->op == PC_OP_reshape ? rs->in[0]->producer : NULL;
  return m && m->op == PC_OP_reduce_max && m->in[0] == sub->in[0] ? m : NULL;
}

/* v summed over axes (n of them) and broadcast back to v's shape */
static pc_value *row_sum_back(pc_graph *g, pc_value *v, const int64_t *axes, int n) {
  return ad_unreduce(g, &v->type, axes, n, pc_reduce(g, PC_OP_reduce_sum, v, n, axes));
}

pc_value *ad_softmax_backward(pc_graph *g, const pcp_users *u, const pc_node *n, pc_value *gy, pc_value **x) {
  /* y = e / s (n a division of e = exp(z)) or y = z - log(s) (n a subtraction from z), the pattern's only one */
  int log = n->op == PC_OP_sub;
  if (n->op != PC_OP_div && !log) return NULL;
  const pc_value *z = log ? n->in[0] : NULL, *e = log ? NULL : n->in[0];
  if (!log) {
    const pc_node *ex = e->producer;
    if (!ex || ex->op != PC_OP_exp) return NULL;
    z = ex->in[0];
  }
  const pc_node *m = shift_of(z);
  if (!m || !ad_shift_free_max(g, u, m)) return NULL;
  /* closed: z read by its exp (and the one subtraction), e by its sum (and the one division) */
  for (int k = u->start[z->id]; !e && k < u->start[z->id + 1]; k++)
    if (u->list[k]->op == PC_OP_exp) e = u->list[k]->out[0];
  if (!e || pcp_users_count(u, z) != 1 + log || pcp_users_count(u, e) != 2 - log) return NULL;
  int na = 0;
  const int64_t *axes = pc_attr_ints(m, "axes", &na);
  pc_value *y = n->out[0];
  *x = m->in[0];
  /* torch's softmax backward: y (gy - sum(gy y)); log-softmax's: gy - exp(y) sum(gy) */
  if (log) return pc_sub(g, gy, pc_mul(g, pc_exp(g, y), row_sum_back(g, gy, axes, na)));
  return pc_mul(g, y, pc_sub(g, gy, row_sum_back(g, pc_mul(g, gy, y), axes, na)));
}

