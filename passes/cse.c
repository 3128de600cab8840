/* passes/cse.c: common subexpression elimination: merges nodes with the same prim, operands, attributes (and constant data). */
#include "passes/passes.h"
#include "passes/rewrite.h"

#include <stdlib.h>
#include <string.h>

/* random with the same attributes (seed included) draws the same numbers, so
 * it merges like any other prim. */

static uint64_t attr_hash(uint64_t h, const pc_attr *a) {
  h = pc_hash_bytes(h, a->name, strlen(a->name));
  h = pc_hash_bytes(h, &a->kind, sizeof a->kind);
  switch (a->kind) { /* one line per attribute kind */
  case PC_ATTR_INT: case PC_ATTR_DTYPE: return pc_hash_bytes(h, &a->i, sizeof a->i);
  case PC_ATTR_FLOAT: return pc_hash_bytes(h, &a->f, sizeof a->f);
  case PC_ATTR_STRING: return pc_hash_bytes(h, a->s, a->s ? strlen(a->s) : 0);
  case PC_ATTR_INTS: return pc_hash_bytes(h, a->ints, sizeof *a->ints * (size_t)a->n);
  }
  return h;
}

/* order-insensitive over attributes: builders may list them in any order */
static uint64_t node_hash(const pc_node *n) {
  uint64_t h = pc_hash_bytes(PC_HASH_SEED, &n->op, sizeof n->op);
  for (int k = 0; k < n->n_in; k++) h = pc_hash_bytes(h, &n->in[k]->id, sizeof n->in[k]->id);
  uint64_t ah = 0;
  for (int k = 0; k < n->n_attrs; k++) ah += attr_hash(PC_HASH_SEED, &n->attrs[k]);
  h = pc_hash_bytes(h, &ah, sizeof ah);
  const pc_type *t = &n->out[0]->type;
  h = pc_hash_bytes(h, &t->dtype, sizeof t->dtype);
  h = pc_hash_bytes(h, t->dims, sizeof *t->dims * (size_t)t->rank);
  if (n->data) h = pc_hash_bytes(h, n->data, n->nbytes);
  return h;
}

static int attr_equal(const pc_attr *a, const pc_attr *b) {
  if (a->kind != b->kind) return 0;
  switch (a->kind) { /* one line per attribute kind */
  case PC_ATTR_INT: case PC_ATTR_DTYPE: return a->i == b->i;
  case PC_ATTR_FLOAT: return memcmp(&a->f, &b->f, sizeof a->f) == 0;
  case PC_ATTR_STRING: return strcmp(a->s ? a->s : "", b->s ? b->s : "") == 0;
  case PC_ATTR_INTS: return a->n == b->n && (a->n == 0 || memcmp(a->ints, b->ints, sizeof *a->ints * (size_t)a->n) == 0);
  }
  return 0;
}

static int node_equal(const pc_node *a, const pc_node *b) {
  if (a->op != b->op || a->n_in != b->n_in || a->n_out != b->n_out || a->n_attrs != b->n_attrs) return 0;
  for (int k = 0; k < a->n_in; k++)
    if (a->in[k] != b->in[k]) return 0;
  for (int k = 0; k < a->n_out; k++)
    if (!pc_type_equal(&a->out[k]->type, &b->out[k]->type)) return 0;
  for (int k = 0; k < a->n_attrs; k++) {
    const pc_attr *o = pc_attr_find(b, a->attrs[k].name);
    if (!o || !attr_equal(&a->attrs[k], o)) return 0;
  }
  if (a->op == PC_OP_constant) {
    if (!a->data || !b->data) return 0; /* unbound weights are equal only by key, and keys are unique */
    return a->nbytes == b->nbytes && memcmp(a->data, b->data, a->nbytes) == 0;
  }
  return 1;
}

/* merges n into m (an equal earlier node): every use of n's results goes to m's */
static void merge(pcp_sweep *s, pc_node *n, pc_node *m) {
  int all = 1;
  for (int k = 0; k < n->n_out; k++) all &= pcp_sweep_replace(s, n->out[k], m->out[k]);
  if (all) n->dead = 1;
}

pc_status pc_pass_cse(pc_graph *g) {
  if (g->status != PC_OK) return g->status;
  size_t cap = 64;
  while (cap < (size_t)g->n_nodes * 2) cap *= 2;
  pc_node **slot = calloc(cap, sizeof *slot);
  pcp_sweep s;
  if (!slot) return pc_fail(g, PC_ERR_NOMEM, "out of memory");
  if (pcp_sweep_begin(g, &s) != PC_OK) return free(slot), g->status;
  /* topological order: a node's operands are already merged when it is hashed */
  for (int i = 0; i < s.n0; i++) {
    pc_node *n = pcp_sweep_visit(&s, i);
    if (n->dead || n->n_out == 0) continue;
    size_t j = (size_t)node_hash(n) & (cap - 1);
    for (; slot[j]; j = (j + 1) & (cap - 1))
      if (node_equal(slot[j], n)) break;
    if (slot[j]) merge(&s, n, slot[j]);
    else slot[j] = n;
  }
  free(slot);
  if (pcp_sweep_end(&s) != PC_OK) return g->status;
  pc_graph_compact(g);
  return g->status;
}
