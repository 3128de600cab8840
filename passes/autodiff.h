/* passes/autodiff.h: what the reverse-mode transform (autodiff.c) and the per-prim rules (vjp_rules.c)
 * share; private to passes/. */
#ifndef PRIMC_PASSES_AUTODIFF_H
#define PRIMC_PASSES_AUTODIFF_H

#include "passes/passes.h"

/* A rule reads node n (its operands and results are the forward values), the cotangent of each result
 * (ct_out[i], NULL where zero) and which operands want one (need[i]), and sets ct_in[i] for those it can
 * (NULL: zero). Cotangents have their value's type. It builds prims into the graph with the ad_* helpers
 * and returns PC_OK, or fails the graph naming the node. */
typedef pc_status (*ad_vjp_fn)(pc_graph *g, const pc_node *n, pc_value *const *ct_out, const int *need,
                               pc_value **ct_in);

/* A forward-mode rule reads node n and its operands' tangents (t_in[i], NULL where zero or not float) and sets
 * the tangent of each float result (t_out[i]; NULL: zero), built with prims. */
typedef pc_status (*ad_jvp_fn)(pc_graph *g, const pc_node *n, pc_value *const *t_in, pc_value **t_out);

/* A batching rule reads node n whose operands in[i] are the batched graph's values (batched[i]: with a leading
 * batch dim of size b) and sets out[i] to each result's value in the batched graph, out_batched[i] whether
 * it has the batch dim. */
typedef pc_status (*ad_vmap_fn)(pc_graph *g, const pc_node *n, pc_value *const *in, const int *batched, int64_t b,
                                pc_value **out, int *out_batched);

/* transforms.def's columns */
typedef enum ad_how { AD_RULE, AD_ZERO, AD_INT, AD_NONE, AD_ELEM, AD_LINEAR, AD_BILINEAR } ad_how;

typedef struct ad_row {
  ad_how vjp_how, jvp_how, vmap_how;
  ad_vjp_fn vjp;   /* vjp_how AD_RULE only */
  ad_jvp_fn jvp;   /* jvp_how AD_RULE only */
  ad_vmap_fn vmap; /* vmap_how AD_RULE only */
} ad_row;

/* the row of op (ad_table.c, generated from transforms.def) */
const ad_row *pc_ad_row(pc_op op);

/* the rules transforms.def names: ad_vjp_<prim> (vjp_rules.c), ad_jvp_<prim> (jvp.c), ad_vmap_<prim> (vmap.c) */
#define AD_VJP_DECL_RULE(name) \
  pc_status ad_vjp_##name(pc_graph *g, const pc_node *n, pc_value *const *ct_out, const int *need, pc_value **ct_in);
#define AD_JVP_DECL_RULE(name) pc_status ad_jvp_##name(pc_graph *g, const pc_node *n, pc_value *const *t_in, pc_value **t_out);
#define AD_VJP_DECL_ZERO(name)
#define AD_VJP_DECL_INT(name)
#define AD_VJP_DECL_NONE(name)
#define AD_JVP_DECL_ZERO(name)
#define AD_JVP_DECL_INT(name)
#define AD_JVP_DECL_NONE(name)
#define AD_JVP_DECL_ELEM(name)
#define AD_JVP_DECL_LINEAR(name)
#define AD_JVP_DECL_BILINEAR(name)
#define AD_VMAP_DECL_RULE(name)                                                                                   \
  pc_status ad_vmap_##name(pc_graph *g, const pc_node *n, pc_value *const *in, const int *batched, int64_t b, \
                           pc_value **out, int *out_batched);
#define AD_VMAP_DECL_ELEM(name)
#define AD_VMAP_DECL_INT(name)
#define AD_VMAP_DECL_NONE(name)
#define TR(name, vjp, jvp, vmap) AD_VJP_DECL_##vjp(name) AD_JVP_DECL_##jvp(name) AD_VMAP_DECL_##vmap(name)
#include "passes/transforms.def"
#undef TR

/* Builds the backward of g's nodes so far: the gradient of sum_j <cts[j], ys[j]> with respect to each of
 * wrt[0..nw) into grads[i] (zeros where none reaches it). Appends nodes; fails the graph naming a node
 * with no rule on the way. */
pc_status ad_backward(pc_graph *g, pc_value *const *wrt, int nw, pc_value *const *ys, pc_value *const *cts, int ny,
                      pc_value **grads);
/* Strided slices' cotangents (ad_pads.c): whether c is a zero pad with interior steps (and no negative edge);
 * whether two such step alike (same type and steps); the sum of n >= 1 pads that step alike, made by stride
 * phases on their lattice instead of one full-size buffer each. */
int ad_strided_pad(const pc_value *c);
int ad_same_steps(const pc_value *a, const pc_value *b);
pc_value *ad_sum_strided_pads(pc_graph *g, pc_value *const *pads, int n);
/* A max pool's chain of max over strided slices of one value xp, one per window tap (ad_pool.c): whether the
 * chain ending at max node root is one (its inner maxes read by the chain alone), and the cotangent of xp
 * from the root's gy: gy added at each window's first maximum, y being root's result. */
struct pcp_users;
#define AD_POOL_MAX_TAPS 64
typedef struct ad_pool {
  const pc_value *xp;
  const pc_node *first, *taps[AD_POOL_MAX_TAPS];
  int n_taps;
} ad_pool;
int ad_pool_match(const pc_graph *g, const struct pcp_users *u, const pc_node *root, ad_pool *m);
pc_value *ad_pool_backward(pc_graph *g, const ad_pool *m, pc_value *y, pc_value *gy);
/* whether reduce_max node n is a softmax's shift (ad_shift.c): its result passes no gradient. u: g's readers. */
int ad_shift_free_max(const pc_graph *g, const struct pcp_users *u, const pc_node *n);
/* n, a closed softmax's division or log-softmax's subtraction (ad_shift.c) with gy its result's cotangent: the
 * cotangent of the softmax's input, set in *x, as torch's softmax backward makes it (one row sum), the pattern's
 * other nodes then getting none; NULL when n is not one. */
pc_value *ad_softmax_backward(pc_graph *g, const struct pcp_users *u, const pc_node *n, pc_value *gy, pc_value **x);

/* the key of a weight (a constant with a key: an ONNX initializer imported with keep_weights, a text graph's
 * key=), else NULL */
const char *ad_weight_key(const pc_node *n);

/* What the transforms share for their interfaces: the graph's value names, to give new inputs and outputs
 * names that do not clash ("<prefix><base>", then "<prefix><base>_2", ...; owned by g) */
typedef struct ad_names {
  const char **slot;
  size_t cap;
} ad_names;
int ad_names_init(ad_names *s, const pc_graph *g, int extra); /* 0 when out of memory; extra: names to come */
void ad_names_free(ad_names *s);
const char *ad_fresh_name(pc_graph *g, ad_names *s, const char *prefix, const char *base);
/* v as a new graph output named "<prefix><base>" (a copy when v is named or an input, which keep theirs) */
pc_status ad_add_output(pc_graph *g, ad_names *s, pc_value *v, const char *prefix, const char *base);
/* the graph input named name, else NULL */
pc_value *ad_input_named(const pc_graph *g, const char *name);
/* node n built again on operands in, its attributes kept but for those named in repl, replaced; NULL (the
 * graph failed) when an operand is NULL */
pc_node *ad_rebuild(pc_graph *g, const pc_node *n, pc_value *const *in, int n_in, const pc_attr *repl, int n_repl);

/* helpers the rules build with (vjp_rules.c) */
pc_value *ad_zeros(pc_graph *g, const pc_value *like);        /* zeros of like's type */
pc_value *ad_scalar(pc_graph *g, double v, const pc_value *like); /* v broadcast to like's type */
/* where(cond, v, 0) */
pc_value *ad_select(pc_graph *g, pc_value *cond, pc_value *v);
/* v, a reduction over axes (na of them) of a value of type x, broadcast back to x's shape (vjp_rules.c) */
pc_value *ad_unreduce(pc_graph *g, const pc_type *x, const int64_t *axes, int na, pc_value *v);
/* into with upd added at idx along axis: scatter, reduce "add" (vjp_rules.c) */
pc_value *ad_scatter_add(pc_graph *g, pc_value *into, pc_value *idx, pc_value *upd, int64_t axis);

#endif
