/* passes/remat.c: the backward recomputes cheap forward values instead of keeping them. A gradient prim
 * (node->backward) reading a forward value that an inline chain of prims (elementwise and index maps) computes
 * from values stored anyway (inputs, constants, results of contractions, reductions and the other stored
 * prims, values a contraction or a pad reads) gets a copy of that chain, built where the backward runs: the forward
 * then stores none of the chain for the backward (GELU's erf and exp terms, softmax's exponentials, a mask),
 * while the stored values it starts from are kept as they were. Runs after the cleanup passes (CSE would
 * merge the copies back) and before fusion; chains longer than REMAT_MAX_PRIMS are kept. */
#include "passes/passes.h"
#include "passes/rewrite.h"

#include <stdlib.h>

#define REMAT_MAX_PRIMS 24

typedef struct remat {
  pc_graph *g;
  pcp_users users;
  const pcp_sweep *s;     /* its iface bits say which values are graph outputs */
  pc_value **copy;        /* by value id: its recomputed copy, once built */
  int n_copied;           /* prims built */
} remat;

/* v is materialized whatever the backward does (a pad's copy reads it from memory: recomputing a ReLU before a max
 * pool from the conv's raw result kept that stored too, and the conv's bias and ReLU out of its call). So is a
 * value that a reduction and another forward prim read (a layer norm's input: fusion gives each reduction its own
 * kernel and copies no elementwise prim into two): recomputing it from a contraction's raw result kept that stored
 * as well, and the bias and residual adds out of the contraction's epilogue. */
static int stored_anyway(const remat *R, const pc_value *v) {
  const pc_node *p = v->producer;
  if (!p || p->op == PC_OP_constant || !pc_op_is_inline(p->op) || (R->s->iface[v->id] & PCP_OUT) ||
      p->n_out != 1)
    return 1;
  int forward = 0, reduced = 0;
  for (int u = R->users.start[v->id]; u < R->users.start[v->id + 1]; u++) {
    const pc_node *n = R->users.list[u];
    if (pc_op_fuse_kind(n->op) == PC_FUSE_CONTRACT || n->op == PC_OP_pad) return 1;
    if (!n->backward) forward++, reduced |= pc_op_fuse_kind(n->op) == PC_FUSE_RED;
  }
  return reduced && forward >= 2;
}

/* prims of the inline chain computing v down to stored values; past `budget`, budget + 1 */
static int chain_size(const remat *R, const pc_value *v, int budget) {
  if (stored_anyway(R, v) || R->copy[v->id] || v->producer->backward) return 0;
  int n = 1;
  for (int k = 0; k < v->producer->n_in && n <= budget; k++) n += chain_size(R, v->producer->in[k], budget - n);
  return n;
}

/* v's copy: its chain built again, each prim once (values already copied are reused) */
static pc_value *build_copy(remat *R, pc_value *v) {
  if (stored_anyway(R, v) || v->producer->backward) return v;
  if (R->copy[v->id]) return R->copy[v->id];
  const pc_node *p = v->producer;
  pc_value *in[8];
  if (p->n_in > 8) return v;
  for (int k = 0; k < p->n_in; k++) in[k] = build_copy(R, p->in[k]);
  pc_node *c = pc_node_add(R->g, p->op, in, p->n_in, p->attrs, p->n_attrs);
  if (!c) return v;
  c->origin = p->origin ? pc_strfmt(R->g, "%s (recomputed)", p->origin) : NULL; /* built backward: the sweep */
  R->n_copied++;
  return R->copy[v->id] = c->out[0];
}

pc_status pc_pass_remat(pc_graph *g) {
  int any = 0;
  for (int i = 0; i < g->n_nodes && !any; i++) any = g->nodes[i]->backward && !g->nodes[i]->dead;
  if (!any || g->status != PC_OK) return g->status;
  pcp_sweep s;
  remat R = {g, {0}, &s, calloc((size_t)g->n_values + 1, sizeof(pc_value *)), 0};
  if (!R.copy || pcp_users_build(g, &R.users) != PC_OK) {
    free(R.copy);
    return g->status ? g->status : pc_fail(g, PC_ERR_NOMEM, "out of memory");
  }
  int n_values0 = g->n_values;
  if (pcp_sweep_begin(g, &s) == PC_OK) {
    for (int j = 0; j < s.n0 && g->status == PC_OK; j++) {
      pc_node *b = pcp_sweep_visit(&s, j);
      if (b->dead || !b->backward) continue;
      for (int k = 0; k < b->n_in; k++) {
        pc_value *v = b->in[k];
        /* copies are built before b (the sweep's place for nodes built during a visit) */
        if (v->id < n_values0 && v->producer && !v->producer->backward && chain_size(&R, v, REMAT_MAX_PRIMS) <= REMAT_MAX_PRIMS)
          b->in[k] = build_copy(&R, v);
      }
    }
    pcp_sweep_end(&s);
  }
  g->remat_prims = R.n_copied;
  pcp_users_free(&R.users);
  free(R.copy);
  return g->status;
}
