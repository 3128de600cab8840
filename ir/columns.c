/* ir/columns.c: recognizes a conv's weight gradient taken as one GEMM over gathered columns (passes/vjp_rules.c's
 * dw_by_columns), for the fuser (one call that reads the columns in place, passes/fuse.c) and codegen (its
 * operands, codegen/kir_calls.c). */
#include "ir/ir.h"
#include "runtime/primc_rt.h"

#include <string.h>

static const pc_node *prod(const pc_value *v, pc_op op) {
  return v && v->producer && v->producer->op == op && !v->producer->dead ? v->producer : NULL;
}

/* n's result is read by the chain alone (unchecked without uses) */
static int chain_only(const pc_graph *g, const pc_node *n, const int *uses) {
  if (!uses) return 1;
  if (uses[n->out[0]->id] != 1) return 0;
  for (int i = 0; i < g->n_outputs; i++)
    if (g->outputs[i] == n->out[0]) return 0;
  return 1;
}

static int add(pc_columns *m, const pc_node *n, const int *uses, const pc_graph *g) {
  if (m->n_nodes >= PC_COLUMNS_MAX_NODES || !chain_only(g, n, uses)) return 0;
  m->nodes[m->n_nodes++] = n;
  return 1;
}

/* a = reshape(transpose(gy, [1, 0, 2..])) with gy [images, M, od..]: m->gy and its two nodes, else none */
static void output_gradient(const pc_graph *g, const pc_value *a, const int *uses, pc_columns *m) {
  const pc_node *ra = prod(a, PC_OP_reshape), *ta = ra ? prod(ra->in[0], PC_OP_transpose) : NULL;
  if (!ta || !chain_only(g, ra, uses) || !chain_only(g, ta, uses)) return;
  const pc_type *t = &ta->in[0]->type;
  int np = 0;
  const int64_t *perm = pc_attr_ints(ta, "perm", &np);
  if (t->rank != m->ns + 2 || np != t->rank || perm[0] != 1 || perm[1] != 0 || t->dims[0] != m->images ||
      t->dims[1] != a->type.dims[0])
    return;
  for (int d = 0; d < m->ns; d++)
    if (perm[2 + d] != 2 + d || t->dims[2 + d] != m->od[d]) return;
  m->gy = ta->in[0], m->a_nodes[0] = ra, m->a_nodes[1] = ta;
}

/* xp = pad(transpose(x, [1, 0, 2..]), lo >= 0, hi, no interior, 0) (at one image the transpose a reshape of x [1,
 * C, sp..]), xp read by the taps' slices alone, the transpose by the pad alone: m->x, its two nodes and lo, else
 * none */
static void unpadded_input(const pc_graph *g, const int *uses, int taps, pc_columns *m) {
  const pc_node *pd = prod(m->xp, PC_OP_pad), *tr = pd ? prod(pd->in[0], PC_OP_transpose) : NULL;
  if (!tr && pd && m->images == 1) tr = prod(pd->in[0], PC_OP_reshape);
  if (!tr || (uses && (uses[m->xp->id] != taps || uses[tr->out[0]->id] != 1))) return;
  for (int i = 0; uses && i < g->n_outputs; i++)
    if (g->outputs[i] == m->xp || g->outputs[i] == tr->out[0]) return;
  int nl = 0, nh = 0, ni = 0, np = 0;
  const int64_t *lo = pc_attr_ints(pd, "low", &nl), *hi = pc_attr_ints(pd, "high", &nh);
  const int64_t *in = pc_attr_ints(pd, "interior", &ni), *perm = tr->op == PC_OP_transpose ? pc_attr_ints(tr, "perm", &np) : NULL;
  const pc_type *t = &tr->in[0]->type;
  static const int64_t swap[2] = {1, 0};
  if (!perm) perm = swap, np = t->rank; /* the reshape [1, C, sp..] -> [C, 1, sp..]: dims checked below */
  if (pc_attr_float(pd, "value", 1) != 0 || nl != t->rank || nh != t->rank || ni != t->rank || np != t->rank ||
      t->rank != m->ns + 2 || perm[0] != 1 || perm[1] != 0 || lo[0] || lo[1] || hi[0] || hi[1] || in[0] || in[1] ||
      t->dims[0] != m->images || t->dims[1] != m->C)
    return;
  for (int d = 0; d < m->ns; d++)
    if ((tr->op == PC_OP_transpose && perm[2 + d] != 2 + d) || t->dims[2 + d] != pd->in[0]->type.dims[2 + d] ||
        lo[2 + d] < 0 || in[2 + d])
      return;
  m->x = tr->in[0], m->x_nodes[0] = pd, m->x_nodes[1] = tr;
  for (int d = 0; d < m->ns; d++) m->x_lo[d] = lo[2 + d];
}

int pc_columns_winograd(const pc_columns *m) {
  return m->dot && m->ns == 2 && m->kd[0] == 3 && m->kd[1] == 3 && m->st[0] == m->dil[0] && m->st[1] == m->dil[1] &&
         primc_wgrad_wino_fits(m->dot->in[0]->type.dims[0], m->C, m->images, m->od[0], m->od[1]);
}

int pc_columns_reads_x(const pc_columns *m) {
  return m->x && m->st[0] == 1 && m->st[1] == 1 && m->dil[0] == 1 && m->dil[1] == 1 && pc_columns_winograd(m);
}

int pc_columns_match(const pc_graph *g, const pc_node *n, const int *uses, pc_columns *m) {
  memset(m, 0, sizeof *m);
  int nlc = 0, nrc = 0, nlb = 0;
  if (n->op != PC_OP_dot_general || n->out[0]->type.dtype != PC_f32) return 0;
  const int64_t *lc = pc_attr_ints(n, "lhs_contract", &nlc), *rc = pc_attr_ints(n, "rhs_contract", &nrc);
  pc_attr_ints(n, "lhs_batch", &nlb);
  const pc_value *a = n->in[0], *b = n->in[1];
  if (nlc != 1 || nrc != 1 || nlb || lc[0] != 1 || rc[0] != 1 || a->type.rank != 2 || b->type.rank != 2) return 0;
  const pc_node *r1 = prod(b, PC_OP_reshape), *cc = r1 ? prod(r1->in[0], PC_OP_concatenate) : NULL;
  if (!cc || pc_attr_int(cc, "axis", -1) != 1 || cc->n_in < 2 || cc->n_in > PC_COLUMNS_MAX_TAPS) return 0;
  const pc_type *ct = &cc->out[0]->type; /* [C, taps, N, o..] */
  int ns = ct->rank - 3;
  if (ns < 1 || ns > 3 || !add(m, r1, uses, g) || !add(m, cc, uses, g)) return 0;
  m->ns = ns, m->C = ct->dims[0], m->images = ct->dims[2];
  int64_t starts[PC_COLUMNS_MAX_TAPS][3];
  for (int t = 0; t < cc->n_in; t++) {
    const pc_node *r = prod(cc->in[t], PC_OP_reshape), *s = r ? prod(r->in[0], PC_OP_slice) : NULL;
    if (!s || !add(m, r, uses, g) || !add(m, s, uses, g)) return 0;
    const pc_value *x = s->in[0];
    const pc_type *xt = &x->type, *st = &s->out[0]->type;
    if (t == 0) m->xp = x;
    if (x != m->xp || xt->rank != ns + 2 || xt->dims[0] != m->C || xt->dims[1] != m->images || st->rank != ns + 2 ||
        cc->in[t]->type.dims[1] != 1)
      return 0;
    const int64_t *lo = pc_attr_ints(s, "start", NULL), *step = pc_attr_ints(s, "stride", NULL);
    if (!lo || !step || lo[0] || lo[1] || step[0] != 1 || step[1] != 1 || st->dims[0] != m->C || st->dims[1] != m->images)
      return 0;
    for (int d = 0; d < ns; d++) {
      if (t == 0) m->od[d] = st->dims[2 + d], m->st[d] = step[2 + d];
      if (st->dims[2 + d] != m->od[d] || step[2 + d] != m->st[d] || ct->dims[3 + d] != m->od[d]) return 0;
      starts[t][d] = lo[2 + d];
    }
  }
  /* the taps row-major over kernel dims kd, tap (t_0 ..) at t_d dil_d: the dilation is the least nonzero start */
  int64_t taps = 1;
  for (int d = 0; d < ns; d++) {
    int64_t dil = 0, top = 0;
    for (int t = 0; t < cc->n_in; t++) {
      if (starts[t][d] > 0 && (!dil || starts[t][d] < dil)) dil = starts[t][d];
      if (starts[t][d] > top) top = starts[t][d];
    }
    m->dil[d] = dil ? dil : 1;
    m->kd[d] = top / m->dil[d] + 1;
    taps *= m->kd[d];
  }
  if (taps != cc->n_in) return 0;
  int64_t at[3] = {0, 0, 0};
  for (int t = 0; t < cc->n_in; t++) {
    for (int d = 0; d < ns; d++)
      if (starts[t][d] != at[d] * m->dil[d]) return 0;
    for (int d = ns - 1; d >= 0 && ++at[d] == m->kd[d]; d--) at[d] = 0;
  }
  int64_t pix = 1;
  for (int d = 0; d < ns; d++) pix *= m->od[d];
  if (b->type.dims[0] != m->C * taps || b->type.dims[1] != m->images * pix || a->type.dims[1] != m->images * pix)
    return 0;
  m->dot = n;
  output_gradient(g, a, uses, m);
  unpadded_input(g, uses, cc->n_in, m);
  return 1;
}

int pc_columns_grouped(const pc_graph *g, const pc_node *n, pc_columns *m) {
  if (n->group < 0 || !pc_columns_match(g, n, NULL, m)) return 0;
  for (int j = 0; j < m->n_nodes; j++)
    if (m->nodes[j]->group != n->group) return 0;
  if (m->gy && (m->a_nodes[0]->group != n->group || m->a_nodes[1]->group != n->group)) m->gy = NULL;
  if (m->x && (m->x_nodes[0]->group != n->group || m->x_nodes[1]->group != n->group)) m->x = NULL;
  return 1;
}
