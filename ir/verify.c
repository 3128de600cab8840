/* ir/verify.c: whole-graph checks: dense ids, topological order, re-inferred types, outputs and constants. */
#include "ir/ir.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* what the walk knows about each value id */
enum { V_UNSEEN = 0, V_INPUT, V_PENDING, V_DEFINED };

#define MAX_OUTS 8

typedef struct vctx {
  pc_graph *g;
  unsigned char *state; /* per value id */
} vctx;

typedef struct tbuf {
  char s[160];
} tbuf;

static tbuf type_str(const pc_graph *g, const pc_type *t) {
  tbuf b = {{0}};
  size_t o = (size_t)snprintf(b.s, sizeof b.s, "%s[", pc_dtype_name(t->dtype));
  for (int i = 0; i < t->rank && i < PC_MAX_RANK && o < sizeof b.s; i++) {
    int64_t d = t->dims[i];
    const char *sep = i ? "," : "";
    if (d >= 0)
      o += (size_t)snprintf(b.s + o, sizeof b.s - o, "%s%lld", sep, (long long)d);
    else if (d >= -(int64_t)g->n_syms)
      o += (size_t)snprintf(b.s + o, sizeof b.s - o, "%s%s", sep, g->syms[PC_DIM_SYM_ID(d)].name);
    else
      o += (size_t)snprintf(b.s + o, sizeof b.s - o, "%s?%lld", sep, (long long)d);
  }
  if (o < sizeof b.s) snprintf(b.s + o, sizeof b.s - o, "]");
  return b;
}

static int type_ok(const pc_graph *g, const pc_type *t) {
  if (t->rank < 0 || t->rank > PC_MAX_RANK || (unsigned)t->dtype >= PC_DTYPE_COUNT) return 0;
  for (int i = 0; i < t->rank; i++)
    if (t->dims[i] < -(int64_t)g->n_syms) return 0;
  return 1;
}

/* v is a registered value of the graph */
static int registered(const pc_graph *g, const pc_value *v) {
  return v && v->id >= 0 && v->id < g->n_values && g->values[v->id] == v;
}

/* fails naming node n (its origin and prim, then its index) */
static pc_status node_fail(vctx *c, const pc_node *n, const char *fmt, ...) {
  char msg[360];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return pc_node_fail(c->g, n, PC_ERR_INTERNAL, "node %d: %s", n->id, msg);
}

static pc_status check_values(vctx *c) {
  pc_graph *g = c->g;
  for (int i = 0; i < g->n_values; i++) {
    const pc_value *v = g->values[i];
    if (!v) return pc_fail(g, PC_ERR_INTERNAL, "value slot %d is empty", i);
    if (v->id != i) return pc_fail(g, PC_ERR_INTERNAL, "value in slot %d has id %d", i, v->id);
    if (!type_ok(g, &v->type)) return pc_fail(g, PC_ERR_INTERNAL, "value %d has an invalid type", i);
    if (v->producer && (v->out_index < 0 || v->out_index >= v->producer->n_out || v->producer->out[v->out_index] != v))
      return pc_fail(g, PC_ERR_INTERNAL, "value %d is not output %d of its producer", i, v->out_index);
  }
  for (int i = 0; i < g->n_inputs; i++) {
    const pc_value *v = g->inputs[i];
    if (!registered(g, v)) return pc_fail(g, PC_ERR_INTERNAL, "graph input %d is not a value of the graph", i);
    if (v->producer) return pc_fail(g, PC_ERR_INTERNAL, "graph input %d (value %d) has a producer", i, v->id);
    if (c->state[v->id] != V_UNSEEN) return pc_fail(g, PC_ERR_INTERNAL, "value %d is listed twice as an input", v->id);
    c->state[v->id] = V_INPUT;
  }
  for (int i = 0; i < g->n_values; i++)
    if (!g->values[i]->producer && c->state[i] != V_INPUT)
      return pc_fail(g, PC_ERR_INTERNAL, "value %d has no producer and is not a graph input", i);
  return PC_OK;
}

/* puts "node N: " before the message pc_infer left, truncating its end */
static void prefix_error(pc_graph *g, int id) {
  char pre[32];
  size_t p = (size_t)snprintf(pre, sizeof pre, "node %d: ", id), len = strlen(g->error);
  if (len + p >= sizeof g->error) len = sizeof g->error - p - 1;
  memmove(g->error + p, g->error, len);
  memcpy(g->error, pre, p);
  g->error[p + len] = 0;
}

/* pc_infer on the node must give back the types it carries */
static pc_status reinfer(vctx *c, pc_node *n) {
  pc_type saved[MAX_OUTS], got;
  for (int k = 0; k < n->n_out; k++) saved[k] = n->out[k]->type;
  if (pc_infer(c->g, n) != PC_OK) {
    prefix_error(c->g, n->id);
    return c->g->status;
  }
  for (int k = 0; k < n->n_out; k++) {
    if (pc_type_equal(&n->out[k]->type, &saved[k])) continue;
    got = n->out[k]->type;
    for (int j = 0; j < n->n_out; j++) n->out[j]->type = saved[j];
    return node_fail(c, n, "output %d has type %s but its operands give %s", k, type_str(c->g, &saved[k]).s,
                     type_str(c->g, &got).s);
  }
  for (int k = 0; k < n->n_out; k++) n->out[k]->type = saved[k];
  return PC_OK;
}

static pc_status check_node(vctx *c, pc_node *n, int i) {
  pc_graph *g = c->g;
  if (!n) return pc_fail(g, PC_ERR_INTERNAL, "node slot %d is empty", i);
  if (n->id != i) return node_fail(c, n, "sits in slot %d", i);
  if (!pc_prim(n->op)) return pc_fail(g, PC_ERR_INTERNAL, "node %d has unknown prim %d", i, (int)n->op);
  if (n->n_out < 0 || n->n_out > MAX_OUTS || n->n_in < 0) return node_fail(c, n, "has %d outputs", n->n_out);
  if (n->dead) return PC_OK; /* its outputs stay undefined, so any use of them fails below */
  for (int j = 0; j < n->n_in; j++) {
    const pc_value *v = n->in[j];
    if (!registered(g, v)) return node_fail(c, n, "operand %d is not a value of the graph", j);
    if (c->state[v->id] != V_INPUT && c->state[v->id] != V_DEFINED)
      return node_fail(c, n, "operand %d (value %d) is not defined before it: not topological, or its producer is dead", j,
                       v->id);
  }
  for (int k = 0; k < n->n_out; k++) {
    pc_value *v = n->out[k];
    if (!registered(g, v) || v->producer != n || v->out_index != k)
      return node_fail(c, n, "output %d is not a value of the graph produced by it", k);
    if (c->state[v->id] != V_UNSEEN) return node_fail(c, n, "output %d (value %d) is defined twice", k, v->id);
    c->state[v->id] = V_PENDING;
  }
  if (reinfer(c, n) != PC_OK) return g->status;
  for (int k = 0; k < n->n_out; k++) c->state[n->out[k]->id] = V_DEFINED;
  return PC_OK;
}

static pc_status check_outputs(vctx *c) {
  pc_graph *g = c->g;
  for (int i = 0; i < g->n_outputs; i++) {
    const pc_value *v = g->outputs[i];
    if (!registered(g, v)) return pc_fail(g, PC_ERR_INTERNAL, "graph output %d is not a value of the graph", i);
    if (c->state[v->id] != V_INPUT && c->state[v->id] != V_DEFINED)
      return pc_fail(g, PC_ERR_INTERNAL, "graph output %d (value %d) is produced by no live node", i, v->id);
  }
  return PC_OK;
}

pc_status pc_verify(pc_graph *g) {
  if (g->status != PC_OK) return g->status;
  vctx c = {g, calloc((size_t)g->n_values + 1, 1)};
  if (!c.state) return pc_fail(g, PC_ERR_NOMEM, "out of memory");
  pc_status s = check_values(&c);
  for (int i = 0; s == PC_OK && i < g->n_nodes; i++) s = check_node(&c, g->nodes[i], i);
  if (s == PC_OK) s = check_outputs(&c);
  free(c.state);
  return s;
}
