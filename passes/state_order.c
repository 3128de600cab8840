/* passes/state_order.c: a training step's state updated in place. Each state's next value may be written
 * over its current one when every other kernel reading the state runs before the kernel writing it, and that
 * kernel reads the state only element for element: its nodes that depend on the state are elementwise over
 * the state's shape, so element e of the next value is computed from element e alone (codegen emits a loop
 * kernel's loads before its stores). Kernels are reordered (topologically, otherwise keeping their order)
 * when a reader of a state came after its writer, and an update fused into a kernel that reads its state
 * otherwise is split off first (split_update). When any state cannot be updated so, the kernels keep their
 * order (splits stay: kernels as valid as before) and g->state_note says why. */
#include "passes/passes.h"
#include "passes/rewrite.h"

#include <stdlib.h>
#include <string.h>

static int same_dims(const pc_type *a, const pc_type *b) {
  if (a->rank != b->rank) return 0;
  for (int k = 0; k < a->rank; k++)
    if (a->dims[k] != b->dims[k]) return 0;
  return 1;
}

static const char *state_name(const pc_value *v) { return v->name ? v->name : "?"; }

typedef struct order_ctx {
  pc_graph *g;
  unsigned char *dep; /* by value id: depends on the state being checked, inside its writer's kernel */
  int *edge;          /* pairs (reader group, writer group) */
  int n_edge, cap_edge;
} order_ctx;

static int add_edge(order_ctx *c, int from, int to) {
  if (!pc_array_grow((void **)&c->edge, &c->cap_edge, 2 * (c->n_edge + 1), sizeof *c->edge)) return 0;
  c->edge[2 * c->n_edge] = from, c->edge[2 * c->n_edge + 1] = to;
  c->n_edge++;
  return 1;
}

/* the node of group w that reads state `in` (directly or through the group's nodes depending on it) other
 * than elementwise over its shape, or NULL; dep is scratch by value id */
static const pc_node *odd_reader(const pc_graph *g, unsigned char *dep, const pc_value *in, int w) {
  memset(dep, 0, (size_t)g->n_values);
  dep[in->id] = 1;
  for (int i = 0; i < g->n_nodes; i++) {
    const pc_node *n = g->nodes[i];
    int reads = 0;
    for (int k = 0; !n->dead && n->group == w && k < n->n_in; k++) reads |= dep[n->in[k]->id];
    for (int k = 0; reads && k < n->n_out; k++) {
      if (pc_op_fuse_kind(n->op) != PC_FUSE_ELEM || !same_dims(&n->out[k]->type, &in->type)) return n;
      dep[n->out[k]->id] = 1;
    }
  }
  return NULL;
}

/* A kernel that also reads a state otherwise (a conv bias's gradient, summed from a map that reads the bias
 * broadcast) has its update, the elementwise prims that feed only states' next values, split off into a kernel
 * of its own right after it, which then reads the state element for element; 0 when there is no such tail */
static int split_update(pc_graph *g, int w) {
  int n_user_max = g->n_values + 1, ok = 0;
  int *users = calloc((size_t)n_user_max, sizeof *users), *tail_users = calloc((size_t)n_user_max, sizeof *tail_users);
  unsigned char *tail = calloc((size_t)g->n_nodes + 1, 1), *next = calloc((size_t)g->n_values + 1, 1);
  if (!users || !tail_users || !tail || !next) goto done;
  for (int o = g->n_outputs - g->n_state; o < g->n_outputs; o++) next[g->outputs[o]->id] = 1;
  for (int o = 0; o < g->n_outputs; o++) users[g->outputs[o]->id]++;
  for (int i = 0; i < g->n_nodes; i++)
    for (int k = 0; !g->nodes[i]->dead && k < g->nodes[i]->n_in; k++) users[g->nodes[i]->in[k]->id]++;
  int n_tail = 0, n_w = 0;
  for (int i = g->n_nodes - 1; i >= 0; i--) { /* users come after: a node's tail users are known at its turn */
    const pc_node *n = g->nodes[i];
    if (n->dead || n->group != w) continue;
    n_w++;
    int t = pc_op_fuse_kind(n->op) == PC_FUSE_ELEM || n->op == PC_OP_broadcast_in_dim;
    for (int k = 0; t && k < n->n_out; k++) {
      const pc_value *v = n->out[k];
      t = users[v->id] > 0 && users[v->id] == tail_users[v->id] + (next[v->id] ? 1 : 0);
    }
    if (!t) continue;
    tail[i] = 1, n_tail++;
    for (int k = 0; k < n->n_in; k++) tail_users[n->in[k]->id]++;
  }
  if (!n_tail || n_tail == n_w) goto done;
  /* group w + 1 for the tail, after w's other nodes; later groups move up one */
  pc_node **order = malloc(sizeof *order * (size_t)(g->n_nodes + 1));
  if (!order) goto done;
  int no = 0, last_w = -1;
  for (int i = 0; i < g->n_nodes; i++)
    if (g->nodes[i]->group == w && !g->nodes[i]->dead) last_w = i;
  for (int i = 0; i <= last_w; i++)
    if (!tail[i]) order[no++] = g->nodes[i];
  for (int i = 0; i <= last_w; i++)
    if (tail[i]) order[no++] = g->nodes[i], g->nodes[i]->group = w + 1;
  for (int i = last_w + 1; i < g->n_nodes; i++) order[no++] = g->nodes[i];
  for (int i = last_w + 1; i < g->n_nodes; i++)
    if (g->nodes[i]->group > w) g->nodes[i]->group++;
  memcpy(g->nodes, order, sizeof *order * (size_t)g->n_nodes);
  for (int i = 0; i < g->n_nodes; i++) g->nodes[i]->id = i;
  free(order);
  g->n_groups++;
  ok = 1;
done:
  free(users), free(tail_users), free(tail), free(next);
  return ok;
}

/* why state s cannot be updated in place, NULL when it can; its ordering edges added */
static const char *check_state(order_ctx *c, int s) {
  pc_graph *g = c->g;
  int ii = g->n_inputs - g->n_state + s, oi = g->n_outputs - g->n_state + s;
  const pc_value *in = g->inputs[ii], *out = g->outputs[oi];
  for (int o = 0; o < g->n_outputs; o++) {
    if (o != oi && g->outputs[o] == in) return pc_strfmt(g, "state %s is also output %d", state_name(in), o);
    if (o != oi && g->outputs[o] == out) return pc_strfmt(g, "the next %s is also output %d", state_name(in), o);
  }
  if (out == in) return NULL; /* kept as it is */
  const pc_node *p = out->producer;
  if (!p || p->op == PC_OP_constant || p->group < 0)
    return pc_strfmt(g, "the next %s is not computed by a kernel", state_name(in));
  int w = p->group;
  const pc_node *odd = odd_reader(g, c->dep, in, w);
  if (odd) return pc_strfmt(g, "the kernel writing the next %s reads it through %s", state_name(in), pc_prim(odd->op)->name);
  for (int i = 0; i < g->n_nodes; i++) {
    const pc_node *n = g->nodes[i];
    for (int k = 0; !n->dead && n->group >= 0 && n->group != w && k < n->n_in; k++)
      if (n->in[k] == in) {
        if (!add_edge(c, n->group, w)) return "out of memory";
        break;
      }
  }
  return NULL;
}

/* Kahn over groups with the reader-before-writer edges, earliest group first: new_pos[group]; 0 on a cycle */
static int order_groups(order_ctx *c, int *new_pos) {
  pc_graph *g = c->g;
  int G = g->n_groups, n_e = c->n_edge;
  /* successors in CSR: data edges (producer group -> reader group) and the state edges */
  int *cnt = calloc((size_t)G + 1, sizeof *cnt), *indeg = calloc((size_t)G + 1, sizeof *indeg);
  int *key = malloc(sizeof *key * (size_t)(G + 1)), *heap = malloc(sizeof *heap * (size_t)(G + 1));
  int total = n_e, ok = 0;
  for (int i = 0; i < g->n_nodes; i++)
    for (int k = 0; !g->nodes[i]->dead && k < g->nodes[i]->n_in; k++) total++;
  int *from = malloc(sizeof *from * (size_t)(total + 1)), *to = malloc(sizeof *to * (size_t)(total + 1));
  int *succ = malloc(sizeof *succ * (size_t)(total + 1)), ne = 0;
  if (!cnt || !indeg || !key || !heap || !from || !to || !succ) goto done;
  for (int i = 0; i < g->n_nodes; i++) {
    const pc_node *n = g->nodes[i];
    for (int k = 0; !n->dead && n->group >= 0 && k < n->n_in; k++) {
      const pc_node *p = n->in[k]->producer;
      if (p && p->group >= 0 && p->group != n->group) from[ne] = p->group, to[ne++] = n->group;
    }
  }
  for (int e = 0; e < n_e; e++) from[ne] = c->edge[2 * e], to[ne++] = c->edge[2 * e + 1];
  for (int e = 0; e < ne; e++) cnt[from[e] + 1]++, indeg[to[e]]++;
  for (int q = 0; q < G; q++) cnt[q + 1] += cnt[q], key[q] = q;
  for (int e = 0; e < ne; e++) succ[cnt[from[e]]++] = to[e];
  for (int q = G; q > 0; q--) cnt[q] = cnt[q - 1];
  cnt[0] = 0;
  int nh = 0, placed = 0;
  for (int q = 0; q < G; q++)
    if (!indeg[q]) pcp_heap_push(heap, &nh, key, q);
  while (nh > 0) {
    int q = pcp_heap_pop(heap, &nh, key);
    new_pos[q] = placed++;
    for (int e = cnt[q]; e < cnt[q + 1]; e++)
      if (--indeg[succ[e]] == 0) pcp_heap_push(heap, &nh, key, succ[e]);
  }
  ok = placed == G ? 1 : -1;
done:
  free(cnt), free(indeg), free(key), free(heap), free(from), free(to), free(succ);
  return ok;
}

/* g->nodes: constants first as they were, then the groups at their new positions, each group's nodes in order */
static int apply_order(pc_graph *g, const int *new_pos) {
  int G = g->n_groups, changed = 0;
  for (int q = 0; q < G; q++) changed |= new_pos[q] != q;
  if (!changed) return 1;
  int *start = calloc((size_t)G + 2, sizeof *start);
  pc_node **order = malloc(sizeof *order * (size_t)(g->n_nodes + 1));
  if (!start || !order) return free(start), free(order), 0;
  int no = 0;
  for (int i = 0; i < g->n_nodes; i++)
    if (g->nodes[i]->group < 0) order[no++] = g->nodes[i];
  for (int i = 0; i < g->n_nodes; i++)
    if (g->nodes[i]->group >= 0) start[new_pos[g->nodes[i]->group] + 1]++;
  for (int q = 0; q < G; q++) start[q + 1] += start[q];
  for (int i = 0; i < g->n_nodes; i++) {
    pc_node *n = g->nodes[i];
    if (n->group >= 0) n->group = new_pos[n->group], order[no + start[n->group]++] = n;
  }
  memcpy(g->nodes, order, sizeof *order * (size_t)g->n_nodes);
  for (int i = 0; i < g->n_nodes; i++) g->nodes[i]->id = i;
  free(start), free(order);
  return 1;
}

pc_status pc_pass_state_order(pc_graph *g) {
  g->state_in_place = 0;
  g->state_note = NULL;
  if (g->status != PC_OK || !g->n_state) return g->status;
  for (int i = 0; i < g->n_nodes; i++)
    if (!g->nodes[i]->dead && g->nodes[i]->group < 0 && g->nodes[i]->op != PC_OP_constant) {
      g->state_note = "a node outside every kernel (an unfused graph)";
      return PC_OK;
    }
  order_ctx c = {g, calloc((size_t)g->n_values + 1, 1), NULL, 0, 0};
  const char *why = c.dep ? NULL : "out of memory";
  for (int s = 0; !why && s < g->n_state; s++) { /* first split updates off kernels that read a state otherwise */
    const pc_value *in = g->inputs[g->n_inputs - g->n_state + s], *out = g->outputs[g->n_outputs - g->n_state + s];
    const pc_node *p = out->producer;
    if (p && p->group >= 0 && odd_reader(g, c.dep, in, p->group) && !split_update(g, p->group)) break;
  }
  int *new_pos = malloc(sizeof *new_pos * (size_t)(g->n_groups + 1));
  if (!new_pos) why = "out of memory";
  for (int s = 0; !why && s < g->n_state; s++) why = check_state(&c, s);
  int sorted = why ? 0 : order_groups(&c, new_pos);
  if (!why && sorted < 0) why = "the kernels reading a state cannot all run before the one writing its next value";
  else if (!why && (!sorted || !apply_order(g, new_pos))) why = "out of memory";
  free(c.dep), free(c.edge), free(new_pos);
  if (why) g->state_note = why;
  else g->state_in_place = 1;
  return g->status;
}
