/* passes/autocast.c: --autocast fp16, torch.autocast's contraction policy at float16 (g->autocast).
 *
 * Every f32 dot_general and conv with a weight operand (one that no graph input reaches: a Linear's, Gemm's,
 * MatMul's or Conv's parameter) reads both operands rounded to f16 and sums in f32: each operand becomes
 * convert(convert(x, f16), f32). Weights round once at constant folding; an activation's rounding fuses into
 * the kernel that produces it. The contraction then runs on the f32 GEMM and conv rows: no x86 CPU these
 * machines have multiplies f16 with f32 sums faster than it multiplies f32 (AVX512-FP16 sums in f16; AMX-FP16
 * is not here), so the f32 rows on rounded operands are the fast path and give exactly fp16 operands' products.
 *
 * Products of two activations (attention's Q K^T and P V) stay f32, as under --autocast bf16: more precise
 * than torch's, never less, and the attention call still recognizes them. Results stay f32, so everything
 * after a contraction runs in f32 as torch's promotion of a Linear's f16 output with an f32 tensor would. */
#include "passes/passes.h"
#include "passes/rewrite.h"

#include <stdlib.h>

static pc_value *rounded(pc_graph *g, pc_value *x) {
  pc_value *h = pc_convert(g, x, PC_f16);
  return h ? pc_convert(g, h, PC_f32) : NULL;
}

/* a contraction the pass rounds: an f32 dot_general or conv of which some operand no graph input reaches */
static int wanted(const pc_node *n, const unsigned char *act) {
  if (n->dead || n->n_in != 2 || n->n_out != 1 || (n->op != PC_OP_dot_general && n->op != PC_OP_conv)) return 0;
  if (n->out[0]->type.dtype != PC_f32 || n->in[0]->type.dtype != PC_f32 || n->in[1]->type.dtype != PC_f32) return 0;
  return !act[n->in[0]->id] || !act[n->in[1]->id];
}

pc_status pc_pass_autocast(pc_graph *g) {
  if (g->status != PC_OK || g->autocast != PC_AUTOCAST_FP16) return g->status;
  /* a training step's weights are state inputs: by the rule above it would round nothing, silently */
  if (g->n_state)
    return pc_fail(g, PC_ERR_UNSUPPORTED, "--autocast fp16: a training step's weights are inputs of the step, which "
                                          "the pass does not round yet; train without it");
  /* by value id: reached from a graph input (an activation), the nodes being in topological order; then by node
   * index: the contractions to round, decided before the sweep replaces any operand */
  unsigned char *act = calloc((size_t)g->n_values + (size_t)g->n_nodes + 1, 1), *want = act + g->n_values;
  if (!act) return pc_fail(g, PC_ERR_NOMEM, "autocast: out of memory");
  for (int i = 0; i < g->n_inputs; i++) act[g->inputs[i]->id] = 1;
  for (int i = 0; i < g->n_nodes; i++) {
    const pc_node *n = g->nodes[i];
    int a = 0;
    for (int k = 0; k < n->n_in && !a; k++) a = act[n->in[k]->id];
    for (int k = 0; k < n->n_out; k++) act[n->out[k]->id] = (unsigned char)a;
    want[i] = (unsigned char)wanted(n, act);
  }
  pcp_sweep s;
  if (pcp_sweep_begin(g, &s) != PC_OK) return free(act), g->status;
  for (int i = 0; i < s.n0 && g->status == PC_OK; i++) {
    pc_node *n = pcp_sweep_visit(&s, i);
    if (!want[i]) continue;
    pc_value *in[2] = {rounded(g, n->in[0]), rounded(g, n->in[1])};
    pc_value *y = in[0] && in[1] ? pc_build(g, n->op, in, 2, n->attrs, n->n_attrs) : NULL;
    if (!y) break;
    for (int k = 0; k < 2; k++) in[k]->producer->origin = in[k]->producer->in[0]->producer->origin = n->origin;
    y->producer->origin = n->origin;
    if (pcp_sweep_replace(&s, n->out[0], y)) n->dead = 1;
  }
  free(act);
  if (pcp_sweep_end(&s) != PC_OK) return g->status;
  pc_graph_compact(g);
  return g->status;
}
