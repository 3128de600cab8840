/* passes/dce.c: dead code elimination: drops nodes none of whose results reach a graph output. */
#include "passes/passes.h"

#include <stdlib.h>

pc_status pc_pass_dce(pc_graph *g) {
  if (g->status != PC_OK) return g->status;
  char *live = calloc((size_t)g->n_values + 1, 1);
  if (!live) return pc_fail(g, PC_ERR_NOMEM, "out of memory");
  for (int i = 0; i < g->n_outputs; i++) live[g->outputs[i]->id] = 1;
  /* reverse topological order: a node's users are decided before the node */
  for (int i = g->n_nodes - 1; i >= 0; i--) {
    pc_node *n = g->nodes[i];
    int used = 0;
    for (int k = 0; k < n->n_out; k++) used |= live[n->out[k]->id];
    if (!used || n->dead) {
      n->dead = 1;
      continue;
    }
    for (int k = 0; k < n->n_in; k++) live[n->in[k]->id] = 1;
  }
  free(live);
  pc_graph_compact(g);
  return g->status;
}
