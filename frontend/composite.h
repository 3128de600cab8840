/* frontend/composite.h: composites that more than one frontend decomposes into prims, written once
 * so that an ONNX op and its aten:: twin build the same prims and compute the same numbers. */
#ifndef PRIMC_FRONTEND_COMPOSITE_H
#define PRIMC_FRONTEND_COMPOSITE_H

#include "ir/ir.h"

/* Each builds into g and returns NULL once g has failed (or x is NULL), like the ir/ builders;
 * callers check operand dtypes and axes first, so the messages name their op's attributes. */

/* softmax (log = 0) or log-softmax (log = 1) of float x along axis: x - max is exponentiated once */
pc_value *fc_softmax(pc_graph *g, pc_value *x, int64_t axis, int log);

/* GELU of float x: x * (1 + erf(x / sqrt 2)) / 2, or with tanh_approx the tanh form */
pc_value *fc_gelu(pc_graph *g, pc_value *x, int tanh_approx);

/* mean and (biased) variance of float x over n axes whose dims are static, the reduced dims kept as 1,
 * and xc = x - mean; 0 once g has failed */
int fc_moments(pc_graph *g, pc_value *x, int n, const int64_t *axes, pc_value **mean, pc_value **var,
               pc_value **xc);

/* layer normalization without scale and bias: (x - mean) * rsqrt(var + eps) over n static axes;
 * mean and inv = rsqrt(var + eps) (reduced dims kept as 1) are returned where asked */
pc_value *fc_layer_norm(pc_graph *g, pc_value *x, int n, const int64_t *axes, double eps, pc_value **mean,
                        pc_value **inv);

#endif
