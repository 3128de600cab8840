/* passes/autodiff.c: reverse mode on the prim graph (pc_grad, passes/passes.h).
 *
 * The forward graph stays as it is; the backward nodes are appended after it, so the combined graph is
 * still in topological order and goes through the passes, fusion and the memory plan like any other.
 * Cotangents are accumulated per forward value by adding; a value that no differentiated value reaches
 * (integer and boolean paths, shape math, constants) never gets one, so its producer's rule is not
 * asked. */
#include "passes/autodiff.h"
#include "passes/rewrite.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int names_put(ad_names *s, const char *name) {
  size_t i = pc_str_hash(name) & (s->cap - 1);
  while (s->slot[i]) {
    if (!strcmp(s->slot[i], name)) return 0;
    i = (i + 1) & (s->cap - 1);
  }
  s->slot[i] = name;
  return 1;
}

int ad_names_init(ad_names *s, const pc_graph *g, int extra) {
  s->cap = 16;
  while (s->cap < 2 * ((size_t)g->n_values + (size_t)extra)) s->cap *= 2;
  if (!(s->slot = calloc(s->cap, sizeof *s->slot))) return 0;
  for (int i = 0; i < g->n_values; i++)
    if (g->values[i]->name) names_put(s, g->values[i]->name);
  return 1;
}

void ad_names_free(ad_names *s) { free(s->slot), s->slot = NULL; }

const char *ad_fresh_name(pc_graph *g, ad_names *s, const char *prefix, const char *base) {
  char *name = pc_strfmt(g, "%s%s", prefix, base);
  for (int k = 2; name && !names_put(s, name); k++) name = pc_strfmt(g, "%s%s_%d", prefix, base, k);
  return name;
}

pc_status ad_add_output(pc_graph *g, ad_names *s, pc_value *v, const char *prefix, const char *base) {
  /* an interface value (named, or an input) keeps its name: the output is a new value */
  if (v && (v->name || !v->producer)) {
    pc_attr a = pc_a_ints("shape", v->type.dims, v->type.rank);
    v = pc_build(g, PC_OP_reshape, &v, 1, &a, 1);
  }
  if (!v) return g->status ? g->status : pc_fail(g, PC_ERR_INTERNAL, "no value for output %s%s", prefix, base);
  pc_value_set_name(g, v, ad_fresh_name(g, s, prefix, base));
  return pc_output_add(g, v);
}

pc_value *ad_input_named(const pc_graph *g, const char *name) {
  for (int i = 0; i < g->n_inputs; i++)
    if (g->inputs[i]->name && !strcmp(g->inputs[i]->name, name)) return g->inputs[i];
  return NULL;
}

pc_node *ad_rebuild(pc_graph *g, const pc_node *n, pc_value *const *in, int n_in, const pc_attr *repl, int n_repl) {
  for (int i = 0; i < n_in; i++)
    if (!in[i]) return NULL; /* an operand failed to build: the graph holds the error */
  pc_attr small[8] = {{0}}, *a = n->n_attrs <= 8 ? small : malloc(sizeof *a * (size_t)n->n_attrs);
  if (!a) return pc_fail(g, PC_ERR_NOMEM, "out of memory"), NULL;
  for (int i = 0; i < n->n_attrs; i++) {
    a[i] = n->attrs[i];
    for (int k = 0; k < n_repl; k++)
      if (!strcmp(a[i].name, repl[k].name)) a[i] = repl[k];
  }
  pc_node *m = pc_node_add(g, n->op, in, n_in, a, n->n_attrs);
  if (a != small) free(a);
  return m;
}

const char *ad_weight_key(const pc_node *n) {
  return n->op == PC_OP_constant ? pc_attr_str(n, "key", NULL) : NULL;
}

static pc_value *find_named(const pc_graph *g, const char *name) {
  pc_value *x = ad_input_named(g, name);
  if (x) return x;
  for (int i = 0; i < g->n_nodes; i++) {
    const char *k = ad_weight_key(g->nodes[i]);
    if (k && !strcmp(k, name)) return g->nodes[i]->out[0];
  }
  return NULL;
}

static int is_float(const pc_value *v) { return pc_dtype_is_float(v->type.dtype); }

/* the values to differentiate, in the order their gradients are returned */
static int pick_wrt(pc_graph *g, const pc_grad_opts *o, pc_value **wrt) {
  int n = 0;
  if (o && o->n_wrt > 0) {
    for (int i = 0; i < o->n_wrt; i++) {
      pc_value *v = find_named(g, o->wrt[i]);
      if (!v) return pc_fail(g, PC_ERR_ATTR, "grad: no input or weight (keyed constant) is named '%s'", o->wrt[i]), -1;
      if (!is_float(v))
        return pc_fail(g, PC_ERR_TYPE, "grad: '%s' is %s; only float values have gradients", o->wrt[i],
                       pc_dtype_name(v->type.dtype)), -1;
      for (int j = 0; j < n; j++)
        if (wrt[j] == v) return pc_fail(g, PC_ERR_ATTR, "grad: '%s' is named twice", o->wrt[i]), -1;
      wrt[n++] = v;
    }
    return n;
  }
  for (int i = 0; i < g->n_inputs; i++)
    if (is_float(g->inputs[i])) wrt[n++] = g->inputs[i];
  for (int i = 0; i < g->n_nodes; i++) {
    pc_value *v = g->nodes[i]->out[0];
    if (ad_weight_key(g->nodes[i]) && is_float(v)) wrt[n++] = v;
  }
  return n;
}

/* a value's cotangents that are strided zero pads, summed by stride phases once all have come (ad_pads.c) */
typedef struct ad_pending {
  pc_value **pads;
  int n, cap;
} ad_pending;

static void accumulate(pc_graph *g, pc_value **ct, ad_pending *pend, const pc_value *v, pc_value *c) {
  if (!c) return;
  ad_pending *p = pend ? &pend[v->id] : NULL;
  if (p && ad_strided_pad(c)) {
    if (p->n == p->cap) {
      int cap = p->cap ? 2 * p->cap : 8;
      pc_value **grown = realloc(p->pads, sizeof *grown * (size_t)cap);
      if (!grown) {
        pc_fail(g, PC_ERR_NOMEM, "out of memory");
        return;
      }
      p->pads = grown, p->cap = cap;
    }
    p->pads[p->n++] = c;
    return;
  }
  ct[v->id] = ct[v->id] ? pc_add(g, ct[v->id], c) : c;
}

/* v's pending pads into its cotangent: those that step alike summed together by phases */
static void settle(pc_graph *g, pc_value **ct, ad_pending *pend, const pc_value *v) {
  ad_pending *p = &pend[v->id];
  pc_value **same = p->n ? malloc(sizeof *same * (size_t)p->n) : NULL;
  if (p->n && !same) {
    pc_fail(g, PC_ERR_NOMEM, "out of memory");
    return;
  }
  while (p->n > 0 && g->status == PC_OK) {
    int k = 0, rest = 0;
    pc_value *lead = p->pads[0];
    for (int i = 0; i < p->n; i++) { /* those stepping as the first to same, the others kept in order */
      if (ad_same_steps(lead, p->pads[i])) same[k++] = p->pads[i];
      else p->pads[rest++] = p->pads[i];
    }
    pc_value *sum = k == 1 ? same[0] : ad_sum_strided_pads(g, same, k);
    ct[v->id] = ct[v->id] ? pc_add(g, ct[v->id], sum) : sum;
    p->n = rest;
  }
  free(same);
}

/* the node's operands' cotangents from its results' */
static pc_status backprop(pc_graph *g, pc_node *n, pc_value **ct, ad_pending *pend, const unsigned char *active,
                          const pcp_users *u) {
  pc_value *ct_out[8] = {0}, *ct_in_small[8] = {0}, **ct_in = ct_in_small;
  int need_small[8], *need = need_small, any_out = 0, any_in = 0;
  /* the backward's nodes name the model node they differentiate (profiles, errors) */
  const char *saved = g->origin;
  g->origin = n->origin ? pc_strfmt(g, "%s (backward)", n->origin) : NULL;
  g->backward = 1;
  for (int i = 0; i < n->n_out; i++) settle(g, ct, pend, n->out[i]);
  for (int i = 0; i < n->n_out && i < 8; i++) any_out |= (ct_out[i] = ct[n->out[i]->id]) != NULL;
  if (!any_out) {
    g->origin = saved, g->backward = 0;
    return PC_OK;
  }
  if (n->n_in > 8) { /* concatenate */
    ct_in = calloc((size_t)n->n_in, sizeof *ct_in);
    need = calloc((size_t)n->n_in, sizeof *need);
    if (!ct_in || !need) {
      free(ct_in), free(need);
      return pc_fail(g, PC_ERR_NOMEM, "out of memory");
    }
  }
  for (int i = 0; i < n->n_in; i++) any_in |= need[i] = active[n->in[i]->id];
  const ad_row *row = pc_ad_row(n->op);
  ad_pool pool;
  pc_value *sx = NULL, *sct = any_in ? ad_softmax_backward(g, u, n, ct_out[0], &sx) : NULL;
  if (sct) {
    accumulate(g, ct, pend, sx, sct); /* the softmax whole: exp, its sum and the shift get no cotangent */
  } else if (any_in && n->op == PC_OP_max && ad_pool_match(g, u, n, &pool)) {
    /* the whole chain at once: its inner maxes and slices get no cotangent, so they are skipped */
    if (active[pool.xp->id]) accumulate(g, ct, pend, pool.xp, ad_pool_backward(g, &pool, n->out[0], ct_out[0]));
  } else if (any_in && row->vjp_how == AD_NONE)
    pc_node_fail(g, n, PC_ERR_UNSUPPORTED, "%s has no gradient rule, and a differentiated value reaches it",
                 pc_prim(n->op)->name);
  else if (any_in && row->vjp_how == AD_RULE && row->vjp(g, n, ct_out, need, ct_in) == PC_OK) {
    for (int i = 0; i < n->n_in && g->status == PC_OK; i++) {
      if (!need[i] || !ct_in[i]) continue;
      if (!pc_type_equal(&ct_in[i]->type, &n->in[i]->type))
        pc_node_fail(g, n, PC_ERR_INTERNAL, "the gradient rule of %s gave operand %d a cotangent of another type",
                     pc_prim(n->op)->name, i);
      else accumulate(g, ct, pend, n->in[i], ct_in[i]);
    }
  }
  g->origin = saved, g->backward = 0;
  if (ct_in != ct_in_small) free(ct_in), free(need);
  return g->status;
}

pc_status ad_backward(pc_graph *g, pc_value *const *wrt, int nw, pc_value *const *ys, pc_value *const *cts, int ny,
                      pc_value **grads) {
  if (g->status) return g->status;
  int n0 = g->n_nodes, nv = g->n_values;
  pc_value **ct = calloc((size_t)nv + 1, sizeof *ct);
  unsigned char *active = calloc((size_t)nv + 1, 1);
  ad_pending *pend = calloc((size_t)nv + 1, sizeof *pend);
  if (!ct || !active || !pend) {
    free(ct), free(active), free(pend);
    return pc_fail(g, PC_ERR_NOMEM, "out of memory");
  }
  /* active: float values that depend on a differentiated one (a softmax's max shift: none, ad_shift.c) */
  pcp_users u = {0};
  if (pcp_users_build(g, &u) != PC_OK) {
    free(ct), free(active), free(pend);
    return g->status;
  }
  for (int i = 0; i < nw; i++) active[wrt[i]->id] = 1;
  for (int i = 0; i < n0; i++) {
    pc_node *n = g->nodes[i];
    int dep = 0;
    for (int k = 0; k < n->n_in; k++) dep |= active[n->in[k]->id];
    if (dep && n->op == PC_OP_reduce_max && ad_shift_free_max(g, &u, n)) dep = 0;
    for (int k = 0; dep && k < n->n_out; k++) active[n->out[k]->id] = is_float(n->out[k]);
  }
  for (int j = 0; j < ny; j++)
    if (ys[j]->id < nv) accumulate(g, ct, NULL, ys[j], cts[j]);
  for (int i = n0 - 1; i >= 0 && g->status == PC_OK; i--) backprop(g, g->nodes[i], ct, pend, active, &u);
  pcp_users_free(&u);
  for (int i = 0; i < nw && g->status == PC_OK; i++) {
    settle(g, ct, pend, wrt[i]);
    grads[i] = ct[wrt[i]->id] ? ct[wrt[i]->id] : ad_zeros(g, wrt[i]);
  }
  for (int i = 0; i < nv; i++) free(pend[i].pads);
  free(ct), free(active), free(pend);
  return g->status;
}

pc_status pc_grad(pc_graph *g, const pc_grad_opts *opts) {
  if (g->status) return g->status;
  int n0 = g->n_nodes, n_out0 = g->n_outputs;
  pc_value **wrt = malloc(sizeof *wrt * (size_t)(g->n_inputs + n0 + 1));
  pc_value **grads = calloc((size_t)(g->n_inputs + n0 + 1), sizeof *grads);
  pc_value **ys = calloc((size_t)n_out0 + 1, sizeof *ys), **cts = calloc((size_t)n_out0 + 1, sizeof *cts);
  ad_names names = {0};
  int ny = 0;
  if (!wrt || !grads || !ys || !cts || !ad_names_init(&names, g, n_out0 + g->n_inputs + n0)) {
    pc_fail(g, PC_ERR_NOMEM, "out of memory");
    goto done;
  }
  int nw = pick_wrt(g, opts, wrt);
  if (nw < 0) goto done;
  for (int j = 0; j < n_out0 && g->status == PC_OK; j++) {
    pc_value *y = g->outputs[j];
    if (!is_float(y)) continue;
    char base[32];
    snprintf(base, sizeof base, "output%d", j);
    ys[ny] = y;
    cts[ny++] = pc_input_add(g, ad_fresh_name(g, &names, "grad_", y->name ? y->name : base), y->type);
  }
  if (ad_backward(g, wrt, nw, ys, cts, ny, grads) != PC_OK) goto done;
  for (int i = 0; i < nw && g->status == PC_OK; i++) {
    pc_value *v = wrt[i];
    char base[32];
    snprintf(base, sizeof base, "value%d", v->id);
    const char *k = v->producer ? ad_weight_key(v->producer) : NULL;
    ad_add_output(g, &names, grads[i], "grad_", k ? k : v->name ? v->name : base);
  }
done:
  free(wrt), free(grads), free(ys), free(cts);
  ad_names_free(&names);
  return g->status;
}

pc_status pc_grad_values(pc_graph *g, pc_value *const *wrt, int nw, pc_value *y, pc_value **grads) {
  pc_value *ones = y ? pc_full_like(g, 1, y) : NULL;
  if (!ones) return g->status ? g->status : pc_fail(g, PC_ERR_INTERNAL, "no y to differentiate");
  return ad_backward(g, wrt, nw, &y, &ones, 1, grads);
}
