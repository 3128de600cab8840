/* passes/jvp.c: forward mode on the prim graph (pc_jvp, passes/passes.h) and its rules.
 *
 * Tangents go along with the forward values, node by node, by the jvp column of passes/transforms.def. Most
 * prims need no rule of their own: an elementwise prim's Jacobian is diagonal, so its VJP rule applied to a
 * tangent is the JVP; a linear prim is applied to the tangents; dot_general and conv are bilinear. */
#include "passes/autodiff.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int is_float(const pc_value *v) { return pc_dtype_is_float(v->type.dtype); }

/* ---------------------------------------------------------------- rules */

/* reduce_max, reduce_min, reduce_prod: d y = sum over the reduced axes of t * dy/dx, whose values the VJP rule
 * gives for a cotangent of ones */
static pc_status weighted_reduction(pc_graph *g, const pc_node *n, pc_value *const *t_in, pc_value **t_out) {
  pc_value *ones = pc_full_like(g, 1, n->out[0]), *w = NULL;
  int need = 1;
  if (!ones || pc_ad_row(n->op)->vjp(g, n, &ones, &need, &w) != PC_OK || !w) return g->status;
  int na;
  const int64_t *axes = pc_attr_ints(n, "axes", &na);
  t_out[0] = pc_reduce(g, PC_OP_reduce_sum, pc_mul(g, t_in[0], w), na, axes);
  return g->status;
}
pc_status ad_jvp_reduce_max(pc_graph *g, const pc_node *n, pc_value *const *t_in, pc_value **t_out) {
  return weighted_reduction(g, n, t_in, t_out);
}
pc_status ad_jvp_reduce_min(pc_graph *g, const pc_node *n, pc_value *const *t_in, pc_value **t_out) {
  return weighted_reduction(g, n, t_in, t_out);
}
pc_status ad_jvp_reduce_prod(pc_graph *g, const pc_node *n, pc_value *const *t_in, pc_value **t_out) {
  return weighted_reduction(g, n, t_in, t_out);
}
/* the values' tangents come from where the values came from */
pc_status ad_jvp_sort(pc_graph *g, const pc_node *n, pc_value *const *t_in, pc_value **t_out) {
  pc_value *in[2] = {t_in[0], n->out[1]};
  pc_attr a = pc_a_int("axis", pc_attr_int(n, "axis", 0));
  t_out[0] = pc_build(g, PC_OP_gather, in, 2, &a, 1);
  return g->status;
}
pc_status ad_jvp_topk(pc_graph *g, const pc_node *n, pc_value *const *t_in, pc_value **t_out) {
  return ad_jvp_sort(g, n, t_in, t_out);
}

/* ---------------------------------------------------------------- the kinds without rules */

static pc_status jvp_elem(pc_graph *g, const pc_node *n, pc_value *const *t_in, pc_value **t_out) {
  int need[3] = {0};
  for (int i = 0; i < n->n_in && i < 3 && g->status == PC_OK; i++) {
    if (!t_in[i]) continue;
    pc_value *ct[3] = {0}, *gy = t_in[i];
    need[i] = 1;
    if (pc_ad_row(n->op)->vjp(g, n, &gy, need, ct) == PC_OK && ct[i])
      t_out[0] = t_out[0] ? pc_add(g, t_out[0], ct[i]) : ct[i];
    need[i] = 0;
  }
  return g->status;
}

/* the node again on tangents: linear in them (a pad pads with 0) */
static pc_value *apply_to(pc_graph *g, const pc_node *n, pc_value *const *in) {
  pc_attr zero = pc_a_float("value", 0);
  pc_node *m = ad_rebuild(g, n, in, n->n_in, &zero, n->op == PC_OP_pad);
  return m ? m->out[0] : NULL;
}

static pc_status jvp_linear(pc_graph *g, const pc_node *n, pc_value *const *t_in, pc_value **t_out) {
  if (n->op == PC_OP_convert_element_type) {
    if (is_float(n->out[0])) t_out[0] = pc_convert(g, t_in[0], n->out[0]->type.dtype);
    return g->status;
  }
  if (n->op == PC_OP_scatter) {
    const char *red = pc_attr_str(n, "reduce", "none");
    if (strcmp(red, "none") && strcmp(red, "add"))
      return pc_node_fail(g, n, PC_ERR_UNSUPPORTED, "no forward-mode rule for scatter with reduce \"%s\"", red);
  }
  pc_value *small[8], **in = n->n_in <= 8 ? small : malloc(sizeof *in * (size_t)n->n_in);
  if (!in) return pc_fail(g, PC_ERR_NOMEM, "out of memory");
  for (int i = 0; i < n->n_in; i++)
    in[i] = t_in[i] ? t_in[i] : is_float(n->in[i]) ? pc_full_like(g, 0, n->in[i]) : n->in[i];
  t_out[0] = apply_to(g, n, in);
  if (in != small) free(in);
  return g->status;
}

static pc_status jvp_bilinear(pc_graph *g, const pc_node *n, pc_value *const *t_in, pc_value **t_out) {
  for (int i = 0; i < 2; i++) {
    if (!t_in[i]) continue;
    pc_value *in[2] = {n->in[0], n->in[1]};
    in[i] = t_in[i];
    pc_value *part = apply_to(g, n, in);
    t_out[0] = t_out[0] ? pc_add(g, t_out[0], part) : part;
  }
  return g->status;
}

/* ---------------------------------------------------------------- the transform */

static pc_status push(pc_graph *g, pc_node *n, pc_value **t) {
  pc_value *small_in[8] = {0}, *t_out[8] = {0}, **t_in = small_in;
  if (n->n_in > 8 && !(t_in = calloc((size_t)n->n_in, sizeof *t_in))) return pc_fail(g, PC_ERR_NOMEM, "out of memory");
  int any = 0, float_out = 0;
  for (int i = 0; i < n->n_in; i++) any |= (t_in[i] = is_float(n->in[i]) ? t[n->in[i]->id] : NULL) != NULL;
  for (int i = 0; i < n->n_out; i++) float_out |= is_float(n->out[i]);
  const ad_row *row = pc_ad_row(n->op);
  if (any && float_out) {
    const char *saved = g->origin;
    g->origin = n->origin ? pc_strfmt(g, "%s (jvp)", n->origin) : NULL;
    switch (row->jvp_how) { /* transforms.def's jvp column */
    case AD_NONE: pc_node_fail(g, n, PC_ERR_UNSUPPORTED, "%s has no forward-mode rule, and a tangent reaches it",
                               pc_prim(n->op)->name); break;
    case AD_ELEM: jvp_elem(g, n, t_in, t_out); break;
    case AD_LINEAR: jvp_linear(g, n, t_in, t_out); break;
    case AD_BILINEAR: jvp_bilinear(g, n, t_in, t_out); break;
    case AD_RULE: row->jvp(g, n, t_in, t_out); break;
    case AD_ZERO: case AD_INT: break;
    }
    g->origin = saved;
    for (int i = 0; i < n->n_out && i < 8 && g->status == PC_OK; i++) {
      if (!t_out[i]) continue;
      if (!pc_type_equal(&t_out[i]->type, &n->out[i]->type))
        pc_node_fail(g, n, PC_ERR_INTERNAL, "the forward-mode rule of %s gave result %d a tangent of another type",
                     pc_prim(n->op)->name, i);
      else t[n->out[i]->id] = t_out[i];
    }
  }
  if (t_in != small_in) free(t_in);
  return g->status;
}

pc_status pc_jvp(pc_graph *g, const pc_grad_opts *opts) {
  if (g->status) return g->status;
  int n0 = g->n_nodes, n_out0 = g->n_outputs, n_in0 = g->n_inputs;
  pc_value **t = calloc((size_t)g->n_values + 1, sizeof *t);
  if (!t) return pc_fail(g, PC_ERR_NOMEM, "out of memory");
  int nv = g->n_values;
  ad_names names = {0};
  if (!ad_names_init(&names, g, n_in0 + n_out0)) {
    free(t);
    return pc_fail(g, PC_ERR_NOMEM, "out of memory");
  }
  /* the primals given tangents: the named inputs, or every float input */
  for (int i = 0; i < n_in0 && g->status == PC_OK; i++) {
    pc_value *x = g->inputs[i];
    int want = is_float(x) && (!opts || !opts->n_wrt);
    for (int k = 0; opts && k < opts->n_wrt; k++) want |= x->name && !strcmp(x->name, opts->wrt[k]);
    if (want && !is_float(x)) pc_fail(g, PC_ERR_TYPE, "jvp: input '%s' is %s; only float values have tangents",
                                      x->name, pc_dtype_name(x->type.dtype));
    else if (want) t[x->id] = pc_input_add(g, ad_fresh_name(g, &names, "tangent_", x->name ? x->name : "input"), x->type);
  }
  for (int k = 0; opts && k < opts->n_wrt && g->status == PC_OK; k++)
    if (!ad_input_named(g, opts->wrt[k])) pc_fail(g, PC_ERR_ATTR, "jvp: no input is named '%s'", opts->wrt[k]);
  for (int i = 0; i < n0 && g->status == PC_OK; i++) push(g, g->nodes[i], t);
  for (int j = 0; j < n_out0 && g->status == PC_OK; j++) {
    pc_value *y = g->outputs[j];
    if (!is_float(y)) continue;
    char base[32];
    snprintf(base, sizeof base, "output%d", j);
    ad_add_output(g, &names, y->id < nv && t[y->id] ? t[y->id] : pc_full_like(g, 0, y), "tangent_", y->name ? y->name : base);
  }
  free(t);
  ad_names_free(&names);
  return g->status;
}
