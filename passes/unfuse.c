/* passes/unfuse.c: one kernel per prim (--unfused), the baseline the fused build is compared with. */
#include "passes/passes.h"

#include <string.h>

/* the reason line for each operand with a producer that is a kernel */
static const char *reasons(pc_graph *g, const pc_node *n) {
  size_t len = 0;
  for (int k = 0; k < n->n_in; k++) len += 32;
  char *s = pc_alloc(g, len + 1), *p = s;
  if (!s) return NULL;
  for (int k = 0; k < n->n_in; k++) {
    const pc_node *pr = n->in[k]->producer;
    if (k) *p++ = '\n';
    if (pr && pr->op != PC_OP_constant) p += strlen(strcpy(p, "--unfused: one kernel per prim"));
  }
  *p = 0;
  return s;
}

pc_status pc_pass_unfuse(pc_graph *g) {
  if (g->status != PC_OK) return g->status;
  int ng = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    pc_node *n = g->nodes[i];
    n->group = n->op == PC_OP_constant || n->dead ? -1 : ng++;
    n->unfused_reason = n->group >= 0 ? reasons(g, n) : NULL;
  }
  g->n_groups = ng;
  return g->status;
}
