/* passes/rewrite.h: helpers the passes share for rewriting a graph in place (private to passes/). */
#ifndef PRIMC_PASSES_REWRITE_H
#define PRIMC_PASSES_REWRITE_H

#include "ir/ir.h"

/* 1 when v is one of the graph's outputs */
int pcp_is_output(const pc_graph *g, const pc_value *v);

/* Replaces every use of `from` by `to`, moving from's name onto an unnamed `to`
 * (onto any `to` when `from` is a named graph output: the model's interface
 * keeps its output names). Refuses (returns 0, changes nothing) when `from` is
 * a named graph output and `to` is a graph input or another graph output. */
int pcp_replace_value(pc_graph *g, pc_value *from, pc_value *to);

/* Moves the last node of g->nodes to position idx (shifting the rest up) and
 * renumbers node ids; builders append, rewrites want the node where it belongs. */
void pcp_move_last_to(pc_graph *g, int idx);

/* Consumers of every value, by value id (CSR): users of value v are
 * list[start[v] .. start[v+1]), one entry per operand slot, dead nodes skipped. */
typedef struct pcp_users {
  int *start;
  pc_node **list;
} pcp_users;

pc_status pcp_users_build(pc_graph *g, pcp_users *u);
void pcp_users_free(pcp_users *u);
static inline int pcp_users_count(const pcp_users *u, const pc_value *v) { return u->start[v->id + 1] - u->start[v->id]; }

#endif
