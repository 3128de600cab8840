/* passes/explain.c: --explain-fusion: one line per producer/consumer pair the fuser kept in different kernels, with why. */
#include "passes/passes.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

typedef struct sbuf {
  char *s;
  size_t len, cap;
} sbuf;

static void sb_fmt(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_fmt(sbuf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0 || !b->s) return;
  if (b->len + (size_t)n + 1 > b->cap) {
    size_t nc = (b->cap + (size_t)n + 1) * 2;
    char *p = realloc(b->s, nc);
    if (!p) {
      free(b->s), b->s = NULL;
      return;
    }
    b->s = p, b->cap = nc;
  }
  va_start(ap, fmt);
  vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

/* "%name = prim (origin)" */
static void put_node(sbuf *b, const pc_value *v, const pc_node *n, int with_origin) {
  if (v->name) sb_fmt(b, "%%%s = %s", v->name, pc_prim(n->op)->name);
  else sb_fmt(b, "%%%d = %s", v->id, pc_prim(n->op)->name);
  if (with_origin && n->origin) sb_fmt(b, " (%s)", n->origin);
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
  sbuf b = {malloc(256), 0, 256};
  if (!b.s) return NULL;
  b.s[0] = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    const pc_node *c = g->nodes[i];
    if (c->dead || !c->unfused_reason) continue;
    for (int k = 0; k < c->n_in; k++) {
      size_t len = 0;
      const char *why = line_of(c->unfused_reason, k, &len);
      const pc_node *p = c->in[k]->producer;
      if (!why || !len || !p) continue;
      put_node(&b, c->in[k], p, 1);
      sb_fmt(&b, " not fused into ");
      int other = c->origin && (!p->origin || strcmp(c->origin, p->origin) != 0);
      put_node(&b, c->out[0], c, other);
      sb_fmt(&b, ": %.*s\n", (int)len, why);
    }
  }
  return b.s;
}
