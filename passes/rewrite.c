/* passes/rewrite.c: helpers the passes share for rewriting a graph in place. */
#include "passes/rewrite.h"

#include <stdlib.h>
#include <string.h>

int pcp_is_output(const pc_graph *g, const pc_value *v) {
  for (int i = 0; i < g->n_outputs; i++)
    if (g->outputs[i] == v) return 1;
  return 0;
}

static int is_input(const pc_graph *g, const pc_value *v) {
  for (int i = 0; i < g->n_inputs; i++)
    if (g->inputs[i] == v) return 1;
  return 0;
}

int pcp_replace_value(pc_graph *g, pc_value *from, pc_value *to) {
  if (from == to) return 0;
  int interface = from->name && pcp_is_output(g, from);
  if (interface && (is_input(g, to) || pcp_is_output(g, to)) && (!to->name || strcmp(to->name, from->name) != 0))
    return 0;
  if (from->name && (interface || !to->name)) {
    to->name = from->name;
    from->name = NULL;
  }
  pc_value_replace_uses(g, from, to);
  return 1;
}

void pcp_move_last_to(pc_graph *g, int idx) {
  int last = g->n_nodes - 1;
  if (idx >= last) return;
  pc_node *n = g->nodes[last];
  memmove(&g->nodes[idx + 1], &g->nodes[idx], sizeof *g->nodes * (size_t)(last - idx));
  g->nodes[idx] = n;
  for (int i = idx; i <= last; i++) g->nodes[i]->id = i;
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
