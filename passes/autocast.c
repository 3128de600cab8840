/* passes/autocast.c: --autocast fp16, torch.autocast's contraction policy at float16 (g->autocast), and bf16
 * operands on a host CPU without bf16 dot products.
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
 * after a contraction runs in f32 as torch's promotion of a Linear's f16 output with an f32 tensor would.
 *
 * --autocast bf16 and --matmul-precision high and medium run on the bf16 rows (codegen) where the host CPU
 * multiplies bf16 in hardware (AMX, AVX512-BF16). Elsewhere those rows widen bf16 to f32 in registers and run at a
 * third of the f32 GEMM's rate (an AVX2 Zen 3: ResNet-18 under --autocast bf16 took 95.8 ms against 36.9 in f32).
 * There g->bf16_f32_rows tells codegen to make no bf16 calls: --autocast bf16 rounds the operands to bf16 by the
 * same rule as fp16 (a product of two bf16 values is exact in f32, so the f32 rows give bf16 operands' products),
 * and --matmul-precision high and medium run in f32, as torch.set_float32_matmul_precision has them do where no
 * fast bf16 algorithm exists. Not for a training step (its weights are inputs: the rule would round nothing),
 * nor for code of another CPU or a GPU. */
#include "passes/passes.h"
#include "passes/rewrite.h"
#include "runtime/primc_rt.h"

#include <stdlib.h>

static pc_value *rounded(pc_graph *g, pc_value *x, pc_dtype to) {
  pc_value *h = pc_convert(g, x, to);
  return h ? pc_convert(g, h, PC_f32) : NULL;
}

/* a contraction the pass rounds: an f32 dot_general or conv of which some operand no graph input reaches */
static int wanted(const pc_node *n, const unsigned char *act) {
  if (n->dead || n->n_in != 2 || n->n_out != 1 || (n->op != PC_OP_dot_general && n->op != PC_OP_conv)) return 0;
  if (n->out[0]->type.dtype != PC_f32 || n->in[0]->type.dtype != PC_f32 || n->in[1]->type.dtype != PC_f32) return 0;
  return !act[n->in[0]->id] || !act[n->in[1]->id];
}

/* bf16 operands asked for (--autocast bf16, --matmul-precision high or medium) of host code on a CPU whose bf16
 * row converts */
static int bf16_on_f32_rows(const pc_graph *g) {
  if ((g->autocast != PC_AUTOCAST_BF16 && g->matmul_precision == PC_MATMUL_HIGHEST) || g->gpu || g->foreign_cpu ||
      g->n_state)
    return 0;
  int r = primc_bgemm_row_active(); /* asked only then: the first ask reads the CPU's features */
  return r != PRIMC_BGEMM_ROW_AMX && r != PRIMC_BGEMM_ROW_AVX512BF16;
}

pc_status pc_pass_autocast(pc_graph *g) {
  if (g->status != PC_OK) return g->status;
  pc_dtype to = PC_f16;
  if (g->autocast != PC_AUTOCAST_FP16) {
    if (!bf16_on_f32_rows(g)) return g->status;
    g->bf16_f32_rows = 1;
    if (g->autocast != PC_AUTOCAST_BF16) return g->status; /* --matmul-precision high or medium: f32 */
    to = PC_bf16;
  }
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
    pc_value *in[2] = {rounded(g, n->in[0], to), rounded(g, n->in[1], to)};
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
