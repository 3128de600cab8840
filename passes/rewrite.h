/* passes/rewrite.h: helpers the passes share for rewriting a graph in place (private to passes/). */
#ifndef PRIMC_PASSES_REWRITE_H
#define PRIMC_PASSES_REWRITE_H

#include "ir/ir.h"

/* A forward sweep that rewrites a graph in place in time linear in its size.
 * Replacements are recorded, not searched for: a node's operands are brought up
 * to date when the sweep visits it, the rest (outputs, nodes built during the
 * sweep) when it ends. Nodes built while node i is visited are placed just
 * before i, in build order, and take i's node->backward. Only the nodes present at the start are visited.
 *   pcp_sweep s; pcp_sweep_begin(g, &s);
 *   for (int i = 0; i < s.n0; i++) { pc_node *n = pcp_sweep_visit(&s, i); ... }
 *   pcp_sweep_end(&s);   (then pc_graph_compact when nodes died)
 * Visits go in order, each node at most once. */
typedef struct pcp_sweep {
  pc_graph *g;
  int n0;               /* nodes at the start: the ones visited */
  int cap;              /* entries of fwd and iface */
  pc_value **fwd;       /* by value id: what replaced it, or NULL */
  unsigned char *iface; /* by value id: PCP_IN, PCP_OUT bits */
  pc_node **order;      /* the node order being built */
  int n_order, cap_order;
  int cur;              /* the node being visited, -1 before the first */
  int mark;             /* g->n_nodes when the current visit began */
  int oom;
  int backward0;        /* g->backward before the sweep: a visit stamps the visited node's on what it builds */
} pcp_sweep;

enum { PCP_IN = 1, PCP_OUT = 2 };

pc_status pcp_sweep_begin(pc_graph *g, pcp_sweep *s);
/* brings node i's operands up to date and returns it */
pc_node *pcp_sweep_visit(pcp_sweep *s, int i);
/* Replaces every use of `from` by `to`, moving from's name onto an unnamed `to`
 * (onto any `to` when `from` is a named graph output: the model's interface
 * keeps its output names). Refuses (returns 0, changes nothing) when `from` is
 * a named graph output and `to` is a graph input or another graph output. */
int pcp_sweep_replace(pcp_sweep *s, pc_value *from, pc_value *to);
/* applies what is left, sets the new node order and frees the sweep */
pc_status pcp_sweep_end(pcp_sweep *s);

/* Consumers of every value, by value id (CSR): users of value v are
 * list[start[v] .. start[v+1]), one entry per operand slot, dead nodes skipped. */
typedef struct pcp_users {
  int *start;
  pc_node **list;
} pcp_users;

pc_status pcp_users_build(pc_graph *g, pcp_users *u);
void pcp_users_free(pcp_users *u);
static inline int pcp_users_count(const pcp_users *u, const pc_value *v) { return u->start[v->id + 1] - u->start[v->id]; }

/* a binary min-heap of ids by key[id] (h holds at most the number of ids) */
static inline void pcp_heap_push(int *h, int *n, const int *key, int x) {
  int i = (*n)++;
  for (; i > 0 && key[h[(i - 1) / 2]] > key[x]; i = (i - 1) / 2) h[i] = h[(i - 1) / 2];
  h[i] = x;
}

static inline int pcp_heap_pop(int *h, int *n, const int *key) {
  int top = h[0], x = h[--(*n)], i = 0;
  for (;;) {
    int c = 2 * i + 1;
    if (c >= *n) break;
    if (c + 1 < *n && key[h[c + 1]] < key[h[c]]) c++;
    if (key[h[c]] >= key[x]) break;
    h[i] = h[c];
    i = c;
  }
  if (*n > 0) h[i] = x;
  return top;
}

#endif
