/* passes/explain.c: --explain-fusion: one line per producer/consumer pair the fuser kept in different kernels, with why. */
#include "passes/passes.h"

#include <stdlib.h>
#include <string.h>

/* "%name = prim (origin)" */
static void put_node(pc_strbuf *b, const pc_value *v, const pc_node *n, int with_origin) {
  if (v->name) pc_strbuf_fmt(b, "%%%s = %s", v->name, pc_prim(n->op)->name);
  else pc_strbuf_fmt(b, "%%%d = %s", v->id, pc_prim(n->op)->name);
  if (with_origin && n->origin) pc_strbuf_fmt(b, " (%s)", n->origin);
}

/* the k-th line of s (lines separated by '\n'), as pointer and length */
static const char *line_of(const char *s, int k, size_t *len) {
  for (; k > 0 && s; k--) {
    s = strchr(s, '\n');
    if (s) s++;
  }
  if (!s) return NULL;
  const char *e = strchr(s, '\n');
  *len = e ? (size_t)(e - s) : strlen(s);
  return s;
}

char *pc_explain_fusion(const pc_graph *g) {
  pc_strbuf b = {0};
  for (int i = 0; i < g->n_nodes; i++) {
    const pc_node *c = g->nodes[i];
    if (c->dead || !c->unfused_reason) continue;
    for (int k = 0; k < c->n_in; k++) {
      size_t len = 0;
      const char *why = line_of(c->unfused_reason, k, &len);
      const pc_node *p = c->in[k]->producer;
      if (!why || !len || !p) continue;
      put_node(&b, c->in[k], p, 1);
      pc_strbuf_fmt(&b, " not fused into ");
      int other = c->origin && (!p->origin || strcmp(c->origin, p->origin) != 0);
      put_node(&b, c->out[0], c, other);
      pc_strbuf_fmt(&b, ": %.*s\n", (int)len, why);
    }
  }
  return pc_strbuf_done(&b);
}
