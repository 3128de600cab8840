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

/* vjp.def's `how` column */
typedef enum ad_how { AD_RULE, AD_ZERO, AD_INT, AD_NONE } ad_how;

typedef struct ad_row {
  ad_how how;
  ad_vjp_fn vjp; /* AD_RULE only */
} ad_row;

/* the row of op (vjp_rules.c, generated from vjp.def) */
const ad_row *pc_ad_row(pc_op op);

/* Builds the backward of g's nodes so far: the gradient of sum_j <cts[j], ys[j]> with respect to each of
 * wrt[0..nw) into grads[i] (zeros where none reaches it). Appends nodes; fails the graph naming a node
 * with no rule on the way. */
pc_status ad_backward(pc_graph *g, pc_value *const *wrt, int nw, pc_value *const *ys, pc_value *const *cts, int ny,
                      pc_value **grads);
/* the key of a weight (a constant with a key: an ONNX initializer imported with keep_weights, a text graph's
 * key=), else NULL */
const char *ad_weight_key(const pc_node *n);

/* helpers the rules build with (vjp_rules.c) */
pc_value *ad_zeros(pc_graph *g, const pc_value *like);        /* zeros of like's type */
pc_value *ad_scalar(pc_graph *g, double v, const pc_value *like); /* v broadcast to like's type */
/* where(cond, v, 0) */
pc_value *ad_select(pc_graph *g, pc_value *cond, pc_value *v);

#endif
