/* passes/vmap.c: batching (pc_vmap, passes/passes.h) and its rules: chosen inputs get a leading batch dim, and
 * every prim that reads a batched value is rebuilt to carry it, by the vmap column of passes/transforms.def.
 * Values that no batched input reaches stay as they are, computed once. */
#include "passes/autodiff.h"

#include <stdlib.h>
#include <string.h>

/* v with a leading batch dim of size b: itself when batched, else broadcast along it */
static pc_value *batch_of(pc_graph *g, pc_value *v, int batched, int64_t b) {
  if (!v || batched) return v;
  int r = v->type.rank;
  if (r + 1 > PC_MAX_RANK) return pc_fail(g, PC_ERR_UNSUPPORTED, "vmap: a batched value would exceed rank %d", PC_MAX_RANK), NULL;
  int64_t shape[PC_MAX_RANK], dims[PC_MAX_RANK];
  shape[0] = b;
  for (int i = 0; i < r; i++) shape[1 + i] = v->type.dims[i], dims[i] = 1 + i;
  return pc_broadcast_in_dim(g, v, r + 1, shape, dims);
}

/* out[0] = first, out[1 + i] = v[i] + add */
static void shifted(const int64_t *v, int n, int64_t first, int64_t add, int64_t *out) {
  out[0] = first;
  for (int i = 0; i < n; i++) out[1 + i] = v[i] + add;
}

/* every operand batched, the node rebuilt with its int-list attributes named in names[k] given a leading
 * entry first[k] and the rest raised by add[k] (positions move past the batch dim; sizes and steps do not), and
 * its int attributes named in axes raised by one */
static pc_status all_batched(pc_graph *g, const pc_node *n, pc_value *const *in, const int *batched, int64_t b,
                             pc_value **out, int *out_batched, const char *const *names, const int64_t *first,
                             const int64_t *add, int n_names, const char *const *axes, int n_axes) {
  pc_value *small[8], **bi = n->n_in <= 8 ? small : malloc(sizeof *bi * (size_t)n->n_in);
  if (!bi) return pc_fail(g, PC_ERR_NOMEM, "out of memory");
  for (int i = 0; i < n->n_in; i++) bi[i] = batch_of(g, in[i], batched[i], b);
  int64_t vals[4][PC_MAX_RANK + 1];
  pc_attr repl[8];
  int nr = 0;
  for (int k = 0; k < n_names && k < 4; k++) {
    int len;
    const int64_t *v = pc_attr_ints(n, names[k], &len);
    if (!v) continue;
    if (len + 1 > PC_MAX_RANK) {
      if (bi != small) free(bi);
      return pc_fail(g, PC_ERR_UNSUPPORTED, "vmap: a batched value would exceed rank %d", PC_MAX_RANK);
    }
    shifted(v, len, first[k], add[k], vals[nr]);
    repl[nr] = pc_a_ints(names[k], vals[nr], len + 1);
    nr++;
  }
  for (int k = 0; k < n_axes && nr < 8; k++) repl[nr] = pc_a_int(axes[k], pc_attr_int(n, axes[k], 0) + 1), nr++;
  pc_node *m = ad_rebuild(g, n, bi, n->n_in, repl, nr);
  if (bi != small) free(bi);
  for (int i = 0; m && i < n->n_out; i++) out[i] = m->out[i], out_batched[i] = 1;
  return g->status;
}

#define RULE(name) \
  pc_status ad_vmap_##name(pc_graph *g, const pc_node *n, pc_value *const *in, const int *batched, int64_t b, \
                           pc_value **out, int *out_batched)
#define ALL(names, first, add, nn, axes, na) all_batched(g, n, in, batched, b, out, out_batched, names, first, add, nn, axes, na)

static const char *const k_perm[] = {"perm"};
static const int64_t zero1[] = {0}, one1[] = {1};

RULE(convert_element_type) { return ALL(NULL, NULL, NULL, 0, NULL, 0); }
RULE(bitcast) { return ALL(NULL, NULL, NULL, 0, NULL, 0); }
RULE(where) { return ALL(NULL, NULL, NULL, 0, NULL, 0); }
RULE(fft) { return ALL(NULL, NULL, NULL, 0, NULL, 0); }
RULE(broadcast_in_dim) {
  static const char *const names[] = {"shape", "dims"};
  const int64_t first[] = {b, 0}, add[] = {0, 1};
  return ALL(names, first, add, 2, NULL, 0);
}
RULE(reshape) {
  static const char *const names[] = {"shape"};
  const int64_t first[] = {b}, add[] = {0};
  return ALL(names, first, add, 1, NULL, 0);
}
RULE(transpose) { return ALL(k_perm, zero1, one1, 1, NULL, 0); }
/* the node on its batched operand with the positions of its int-list attribute name moved past the batch dim */
static pc_status raised(pc_graph *g, const pc_node *n, pc_value *const *in, const char *name, pc_value **out,
                        int *out_batched) {
  int k;
  const int64_t *v = pc_attr_ints(n, name, &k);
  int64_t d[PC_MAX_RANK + 1];
  for (int i = 0; i < k; i++) d[i] = v[i] + 1;
  pc_attr repl = pc_a_ints(name, d, k);
  pc_node *m = ad_rebuild(g, n, in, 1, &repl, 1);
  if (m) out[0] = m->out[0], out_batched[0] = 1;
  return g->status;
}
RULE(rev) { return raised(g, n, in, "dims", out, out_batched); }
RULE(slice) {
  static const char *const names[] = {"start", "limit", "stride"};
  const int64_t first[] = {0, b, 1}, add[] = {0, 0, 0};
  return ALL(names, first, add, 3, NULL, 0);
}
RULE(pad) {
  static const char *const names[] = {"low", "high", "interior"};
  static const int64_t first[] = {0, 0, 0}, add[] = {0, 0, 0};
  return ALL(names, first, add, 3, NULL, 0);
}
static const char *const k_axis[] = {"axis"};
RULE(concatenate) { return ALL(NULL, NULL, NULL, 0, k_axis, 1); }
RULE(gather) { return ALL(NULL, NULL, NULL, 0, k_axis, 1); }
RULE(scatter) { return ALL(NULL, NULL, NULL, 0, k_axis, 1); }
RULE(argmax) { return ALL(NULL, NULL, NULL, 0, k_axis, 1); }
RULE(argmin) { return ALL(NULL, NULL, NULL, 0, k_axis, 1); }
RULE(cumsum) { return ALL(NULL, NULL, NULL, 0, k_axis, 1); }
RULE(sort) { return ALL(NULL, NULL, NULL, 0, k_axis, 1); }
RULE(topk) { return ALL(NULL, NULL, NULL, 0, k_axis, 1); }

/* reductions: the reduced axes move past the batch dim (which is never reduced) */
RULE(reduce_sum) { return raised(g, n, in, "axes", out, out_batched); }
RULE(reduce_prod) { return raised(g, n, in, "axes", out, out_batched); }
RULE(reduce_max) { return raised(g, n, in, "axes", out, out_batched); }
RULE(reduce_min) { return raised(g, n, in, "axes", out, out_batched); }

/* out = [batch, lhs free, rhs free]. Both batched: the batch dim is one more batch pair. One batched: it is
 * that side's first free dim, moved to the front after. */
RULE(dot_general) {
  int nc, nb;
  const int64_t *lc = pc_attr_ints(n, "lhs_contract", &nc), *rc = pc_attr_ints(n, "rhs_contract", NULL);
  const int64_t *lb = pc_attr_ints(n, "lhs_batch", &nb), *rb = pc_attr_ints(n, "rhs_batch", NULL);
  int64_t l_c[PC_MAX_RANK], r_c[PC_MAX_RANK], l_b[PC_MAX_RANK + 1], r_b[PC_MAX_RANK + 1];
  int both = batched[0] && batched[1], sl = batched[0] ? 1 : 0, sr = batched[1] ? 1 : 0;
  for (int i = 0; i < nc; i++) l_c[i] = lc[i] + sl, r_c[i] = rc[i] + sr;
  int nb2 = both ? nb + 1 : nb;
  if (both) shifted(lb, nb, 0, 1, l_b), shifted(rb, nb, 0, 1, r_b);
  else
    for (int i = 0; i < nb; i++) l_b[i] = lb[i] + sl, r_b[i] = rb[i] + sr;
  pc_value *y = pc_dot_general(g, in[0], in[1], nc, l_c, r_c, nb2, l_b, r_b);
  if (!y) return g->status;
  if (!both) { /* the batch dim sits after the batch dims (lhs) or after the lhs free dims too (rhs) */
    int at = batched[0] ? nb : nb + (n->in[0]->type.rank - nb - nc);
    int64_t perm[PC_MAX_RANK];
    perm[0] = at;
    for (int i = 0, k = 1; i < y->type.rank; i++)
      if (i != at) perm[k++] = i;
    if (at) y = pc_transpose(g, y, perm);
  }
  out[0] = y, out_batched[0] = 1;
  return g->status;
}

static pc_value *conv_build(pc_graph *g, const pc_node *n, pc_value *x, pc_value *w, int64_t groups) {
  pc_value *in[2] = {x, w};
  pc_attr repl = pc_a_int("groups", groups);
  pc_node *m = ad_rebuild(g, n, in, 2, &repl, 1);
  return m ? m->out[0] : NULL;
}

/* x batched, w not: the batch folds into N. w batched: each batch entry is a group of its own, x's batch
 * folded into its channels */
RULE(conv) {
  pc_value *x = in[0], *w = in[1];
  int r = n->in[0]->type.rank;
  int64_t G = pc_attr_int(n, "groups", 1), N = n->in[0]->type.dims[0], C = n->in[0]->type.dims[1];
  int64_t O = n->out[0]->type.dims[1];
  const int64_t *yd = n->out[0]->type.dims;
  int64_t s[PC_MAX_RANK + 1], perm[PC_MAX_RANK + 1];
  if (!batched[1]) {
    s[0] = b * N;
    for (int i = 1; i < r; i++) s[i] = x->type.dims[1 + i];
    pc_value *y = conv_build(g, n, pc_reshape(g, x, r, s), w, G);
    s[0] = b, s[1] = N;
    for (int i = 1; i < r; i++) s[1 + i] = yd[i];
    out[0] = pc_reshape(g, y, r + 1, s), out_batched[0] = 1;
    return g->status;
  }
  x = batch_of(g, x, batched[0], b);
  if (!x) return g->status;
  /* x [b, N, C, sp] -> [N, b, C, sp] -> [N, b*C, sp]; w [b, O, C/G, k] -> [b*O, C/G, k]; groups b*G */
  for (int i = 0; i < r + 1; i++) perm[i] = i;
  perm[0] = 1, perm[1] = 0;
  s[0] = N, s[1] = b * C;
  for (int i = 2; i < r; i++) s[i] = x->type.dims[1 + i];
  pc_value *xt = pc_reshape(g, pc_transpose(g, x, perm), r, s);
  s[0] = b * O;
  for (int i = 1; i < r; i++) s[i] = w->type.dims[1 + i];
  pc_value *y = conv_build(g, n, xt, pc_reshape(g, w, r, s), b * G);
  s[0] = N, s[1] = b, s[2] = O;
  for (int i = 2; i < r; i++) s[1 + i] = yd[i];
  out[0] = pc_transpose(g, pc_reshape(g, y, r + 1, s), perm), out_batched[0] = 1;
  return g->status;
}

/* ---------------------------------------------------------------- the transform */

static pc_status elem(pc_graph *g, const pc_node *n, pc_value *const *in, const int *batched, int64_t b,
                      pc_value **out, int *out_batched) {
  return all_batched(g, n, in, batched, b, out, out_batched, NULL, NULL, NULL, 0, NULL, 0);
}

pc_status pc_vmap(pc_graph *g, const pc_vmap_opts *o) {
  if (g->status) return g->status;
  if (!o || o->n_inputs < 1 || o->batch < 1) return pc_fail(g, PC_ERR_ATTR, "vmap: name inputs and a batch size >= 1");
  int n0 = g->n_nodes, nv = g->n_values;
  pc_value **map = calloc((size_t)nv + 1, sizeof *map);
  unsigned char *bat = calloc((size_t)nv + 1, 1);
  if (!map || !bat) {
    free(map), free(bat);
    return pc_fail(g, PC_ERR_NOMEM, "out of memory");
  }
  for (int i = 0; i < nv; i++) map[i] = g->values[i];
  for (int k = 0; k < o->n_inputs && g->status == PC_OK; k++) {
    pc_value *x = ad_input_named(g, o->inputs[k]);
    if (!x) {
      pc_fail(g, PC_ERR_ATTR, "vmap: no input is named '%s'", o->inputs[k]);
      break;
    }
    if (bat[x->id]) continue;
    if (x->type.rank + 1 > PC_MAX_RANK) {
      pc_fail(g, PC_ERR_UNSUPPORTED, "vmap: input '%s' has rank %d already", x->name, x->type.rank);
      break;
    }
    /* a batched input takes x's place (x goes with the nodes reading it, which are rebuilt below) */
    pc_type t = x->type;
    memmove(t.dims + 1, t.dims, sizeof t.dims[0] * (size_t)t.rank);
    t.dims[0] = o->batch, t.rank++;
    pc_value *y = pc_input_add(g, NULL, t);
    if (!y) break;
    g->n_inputs--;
    for (int i = 0; i < g->n_inputs; i++)
      if (g->inputs[i] == x) g->inputs[i] = y;
    y->name = x->name, x->name = NULL;
    map[x->id] = y, bat[x->id] = 1;
  }
  for (int i = 0; i < n0 && g->status == PC_OK; i++) {
    pc_node *n = g->nodes[i];
    int any = 0, small_b[8], *ib = n->n_in <= 8 ? small_b : calloc((size_t)n->n_in, sizeof *ib);
    pc_value *small_in[8], **in = n->n_in <= 8 ? small_in : calloc((size_t)n->n_in, sizeof *in);
    if (!ib || !in) {
      pc_fail(g, PC_ERR_NOMEM, "out of memory");
      break;
    }
    for (int k = 0; k < n->n_in; k++) any |= ib[k] = bat[n->in[k]->id], in[k] = map[n->in[k]->id];
    if (any) {
      const ad_row *row = pc_ad_row(n->op);
      pc_value *out[8] = {0};
      int ob[8] = {0};
      const char *saved = g->origin;
      g->origin = n->origin;
      if (row->vmap_how == AD_ELEM) elem(g, n, in, ib, o->batch, out, ob);
      else if (row->vmap_how == AD_RULE) row->vmap(g, n, in, ib, o->batch, out, ob);
      else pc_node_fail(g, n, PC_ERR_UNSUPPORTED, "%s has no batching rule, and a batched input reaches it", pc_prim(n->op)->name);
      g->origin = saved;
      for (int k = 0; k < n->n_out && k < 8 && g->status == PC_OK; k++) {
        if (!out[k]) {
          pc_node_fail(g, n, PC_ERR_INTERNAL, "the batching rule of %s gave no result %d", pc_prim(n->op)->name, k);
          break;
        }
        map[n->out[k]->id] = out[k], bat[n->out[k]->id] = (unsigned char)ob[k];
        if (n->out[k]->name && !out[k]->name) out[k]->name = n->out[k]->name;
        n->out[k]->name = NULL;
      }
      n->dead = 1;
    }
    if (ib != small_b) free(ib);
    if (in != small_in) free(in);
  }
  /* every output batched (vmap's out_axes = 0) */
  for (int j = 0; j < g->n_outputs && g->status == PC_OK; j++) {
    pc_value *y = g->outputs[j];
    if (y->id >= nv) continue;
    pc_value *v = batch_of(g, map[y->id], bat[y->id], o->batch);
    if (v && !bat[y->id] && y->name) v->name = y->name, y->name = NULL;
    if (v) g->outputs[j] = v;
  }
  free(map), free(bat);
  if (g->status == PC_OK) pc_graph_compact(g);
  return g->status;
}
