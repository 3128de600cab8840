/* passes/widen.c: contractions (dot_general, conv) on floats narrower than f32 computed in f32.
 *
 * The f32 GEMM and conv rows are the fast kernels; an f16, bf16 or f8 contraction lowered as it is runs
 * one element at a time (an f16 MatMul 256^3 took over a second). So each gets its operands converted to
 * f32, the contraction in f32 and its result converted back: constant weights convert once at constant
 * folding, an activation's convert fuses into its producer and the result's into the contraction's
 * epilogue. The prims accumulate wider than their operands anyway (ir/prims.def), so the value is the one
 * rounding of the f32 sum to the narrow type. */
#include "passes/passes.h"
#include "passes/rewrite.h"

static int narrow_float(pc_dtype t) { return pc_dtype_is_float(t) && pc_dtype_size(t) < 4; }

static pc_value *widened(pc_graph *g, pc_node *n) {
  pc_dtype dt = n->out[0]->type.dtype;
  if (!narrow_float(dt)) return NULL;
  pc_value *in[2];
  for (int k = 0; k < 2; k++)
    if (!(in[k] = pc_convert(g, n->in[k], PC_f32))) return NULL;
  pc_value *r = pc_build(g, n->op, in, 2, n->attrs, n->n_attrs);
  pc_value *y = r ? pc_convert(g, r, dt) : NULL;
  for (int k = 0; y && k < 2; k++) in[k]->producer->origin = n->origin;
  if (y) r->producer->origin = y->producer->origin = n->origin;
  return y;
}

pc_status pc_pass_widen(pc_graph *g) {
  if (g->status != PC_OK) return g->status;
  pcp_sweep s;
  if (pcp_sweep_begin(g, &s) != PC_OK) return g->status;
  for (int i = 0; i < s.n0 && g->status == PC_OK; i++) {
    pc_node *n = pcp_sweep_visit(&s, i);
    if (n->dead || n->n_in != 2 || n->n_out != 1 || (n->op != PC_OP_dot_general && n->op != PC_OP_conv)) continue;
    pc_value *y = widened(g, n); /* nodes it builds are placed before n */
    if (y && g->status == PC_OK && pcp_sweep_replace(&s, n->out[0], y)) n->dead = 1;
  }
  if (pcp_sweep_end(&s) != PC_OK) return g->status;
  pc_graph_compact(g);
  return g->status;
}
