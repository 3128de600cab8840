/* passes/rewrite.c: helpers the passes share for rewriting a graph in place. */
#include "passes/rewrite.h"

#include <stdlib.h>
#include <string.h>

/* fwd and iface cover every value id, growing as the sweep builds values */
static int cover(pcp_sweep *s) {
  int need = s->g->n_values;
  if (need <= s->cap) return 1;
  int cap = s->cap ? s->cap : 64;
  while (cap < need) cap *= 2;
  pc_value **f = realloc(s->fwd, sizeof *f * (size_t)cap);
  if (f) s->fwd = f;
  unsigned char *m = realloc(s->iface, (size_t)cap);
  if (m) s->iface = m;
  if (!f || !m) return 0;
  memset(f + s->cap, 0, sizeof *f * (size_t)(cap - s->cap));
  memset(m + s->cap, 0, (size_t)(cap - s->cap));
  s->cap = cap;
  return 1;
}

pc_status pcp_sweep_begin(pc_graph *g, pcp_sweep *s) {
  memset(s, 0, sizeof *s);
  s->g = g;
  s->n0 = s->mark = g->n_nodes;
  s->cur = -1;
  s->backward0 = g->backward;
  if (!cover(s)) return pc_fail(g, PC_ERR_NOMEM, "out of memory");
  for (int i = 0; i < g->n_inputs; i++) s->iface[g->inputs[i]->id] |= PCP_IN;
  for (int i = 0; i < g->n_outputs; i++) s->iface[g->outputs[i]->id] |= PCP_OUT;
  return PC_OK;
}

/* v with the replacements recorded so far applied */
static pc_value *resolve(pcp_sweep *s, pc_value *v) {
  pc_value *r = v;
  while (r->id < s->cap && s->fwd[r->id]) r = s->fwd[r->id];
  while (v != r) { /* path compression: chains stay short */
    pc_value *next = s->fwd[v->id];
    s->fwd[v->id] = r;
    v = next;
  }
  return r;
}

static int order_push(pcp_sweep *s, pc_node *n) {
  if (s->n_order == s->cap_order) {
    int cap = s->cap_order ? 2 * s->cap_order : s->n0 + 16;
    pc_node **o = realloc(s->order, sizeof *o * (size_t)cap);
    if (!o) return 0;
    s->order = o, s->cap_order = cap;
  }
  s->order[s->n_order++] = n;
  return 1;
}

/* the nodes built while `cur` was visited, then `cur`, take the next places */
static void flush(pcp_sweep *s) {
  pc_graph *g = s->g;
  if (s->cur < 0) return;
  for (int k = s->mark; k < g->n_nodes; k++)
    if (!order_push(s, g->nodes[k])) s->oom = 1;
  if (!order_push(s, g->nodes[s->cur])) s->oom = 1;
  s->mark = g->n_nodes;
}

pc_node *pcp_sweep_visit(pcp_sweep *s, int i) {
  flush(s);
  s->cur = i;
  pc_node *n = s->g->nodes[i];
  s->g->backward = n->backward; /* a gradient's prim rewritten is still one */
  for (int j = 0; j < n->n_in; j++) n->in[j] = resolve(s, n->in[j]);
  return n;
}

int pcp_sweep_replace(pcp_sweep *s, pc_value *from, pc_value *to) {
  pc_graph *g = s->g;
  to = resolve(s, to);
  if (from == to) return 0;
  if (!cover(s)) return pc_fail(g, PC_ERR_NOMEM, "out of memory"), 0;
  int is_out = s->iface[from->id] & PCP_OUT;
  int interface = from->name && is_out;
  if (interface && s->iface[to->id] && (!to->name || strcmp(to->name, from->name) != 0)) return 0;
  if (from->name && (interface || !to->name)) {
    to->name = from->name;
    from->name = NULL;
  }
  s->fwd[from->id] = to;
  if (is_out) { /* outputs are few next to uses: rewriting them now keeps is_output exact */
    for (int i = 0; i < g->n_outputs; i++)
      if (g->outputs[i] == from) g->outputs[i] = to;
    s->iface[from->id] &= (unsigned char)~PCP_OUT;
    s->iface[to->id] |= PCP_OUT;
  }
  return 1;
}

pc_status pcp_sweep_end(pcp_sweep *s) {
  pc_graph *g = s->g;
  flush(s);
  g->backward = s->backward0;
  for (int i = s->cur + 1; i < s->n0; i++) /* not visited: the loop stopped early */
    if (!order_push(s, g->nodes[i])) s->oom = 1;
  if (s->oom) pc_fail(g, PC_ERR_NOMEM, "out of memory");
  else if (s->n_order == g->n_nodes && g->n_nodes > 0) { /* an empty graph has no arrays */
    memcpy(g->nodes, s->order, sizeof *g->nodes * (size_t)g->n_nodes);
    for (int i = 0; i < g->n_nodes; i++) g->nodes[i]->id = i;
  }
  for (int i = 0; i < g->n_nodes; i++) {
    pc_node *n = g->nodes[i];
    for (int j = 0; j < n->n_in; j++) n->in[j] = resolve(s, n->in[j]);
  }
  free(s->fwd);
  free(s->iface);
  free(s->order);
  memset(s, 0, sizeof *s);
  return g->status;
}

pc_status pcp_users_build(pc_graph *g, pcp_users *u) {
  int nv = g->n_values, total = 0;
  u->start = calloc((size_t)nv + 2, sizeof *u->start);
  for (int i = 0; u->start && i < g->n_nodes; i++)
    for (int j = 0; !g->nodes[i]->dead && j < g->nodes[i]->n_in; j++) {
      u->start[g->nodes[i]->in[j]->id + 1]++;
      total++;
    }
  u->list = malloc(sizeof *u->list * (size_t)(total + 1));
  int *fill = calloc((size_t)nv + 1, sizeof *fill);
  if (!u->start || !u->list || !fill) {
    free(fill);
    pcp_users_free(u);
    return pc_fail(g, PC_ERR_NOMEM, "out of memory");
  }
  for (int v = 0; v < nv; v++) u->start[v + 1] += u->start[v];
  for (int i = 0; i < g->n_nodes; i++)
    for (int j = 0; !g->nodes[i]->dead && j < g->nodes[i]->n_in; j++) {
      int v = g->nodes[i]->in[j]->id;
      u->list[u->start[v] + fill[v]++] = g->nodes[i];
    }
  free(fill);
  return PC_OK;
}

void pcp_users_free(pcp_users *u) {
  free(u->start);
  free(u->list);
  u->start = NULL;
  u->list = NULL;
}
