/* passes/widen.c: contractions (dot_general, conv) on floats narrower than f32, and small int32 convs, computed
 * in f32.
 *
 * The f32 GEMM and conv rows are the fast kernels; an f16, bf16 or f8 contraction lowered as it is runs
 * one element at a time (an f16 MatMul 256^3 took over a second). So each gets its operands converted to
 * f32, the contraction in f32 and its result converted back: constant weights convert once at constant
 * folding, an activation's convert fuses into its producer and the result's into the contraction's
 * epilogue. The prims accumulate wider than their operands anyway (ir/prims.def), so the value is the one
 * rounding of the f32 sum to the narrow type.
 *
 * An int32 conv (a quantized CNN's) runs on the int8 GEMM (codegen's conv_i8) unless it has few taps x input
 * channels per group: a depthwise one (a GEMM of one column per group: 30-40 ms for one of MobileNetV2's layers),
 * or fewer than the int8 row's conv_k (runtime/gemm/igemm_rows.def): the tile's depth of 64 where the row has int8
 * dot products (the stem's 27, 1x1s of 16 or 32 channels: the tile is mostly padding and the layout changes
 * around the GEMM cost 2-3x the f32 conv at 112 x 112), more on AVX2 (its int8 row takes more operations per
 * product). When the operands' ranges bound every sum by 2^24, the f32 conv of those is exact, and runs on the
 * f32 rows. */
#include "passes/passes.h"
#include "passes/rewrite.h"
#include "runtime/primc_rt.h"

#define F32_EXACT ((int64_t)1 << 24)

static int64_t max_abs(int64_t lo, int64_t hi) { return lo < 0 && -lo > hi ? -lo : hi; }

/* an int32 conv with one input channel per group, or fewer taps x input channels per group than the int8 row's
 * conv_k (the generic row's for another CPU), whose sums of |x| |w| over one output's taps stay within 2^24 */
static int exact_small_conv(const pc_graph *g, const pc_node *n) {
  const pc_type *xt = &n->in[0]->type, *wt = &n->in[1]->type;
  int64_t groups = pc_attr_int(n, "groups", 1), xlo, xhi, wlo, whi, taps = 1;
  if (n->op != PC_OP_conv || n->out[0]->type.dtype != PC_i32 || xt->rank < 3 || wt->rank != xt->rank) return 0;
  for (int d = 1; d < wt->rank; d++) taps *= wt->dims[d];
  int64_t min_k = primc_igemm_conv_min_k(g->foreign_cpu ? PRIMC_IGEMM_ROW_GENERIC : primc_igemm_row_active());
  if ((wt->dims[1] != 1 || groups < 2) && taps >= min_k) return 0;
  if (!pc_value_int_range(n->in[0], &xlo, &xhi) || !pc_value_int_range(n->in[1], &wlo, &whi)) return 0;
  int64_t mx = max_abs(xlo, xhi), mw = max_abs(wlo, whi);
  return taps > 0 && mx <= F32_EXACT && mw <= F32_EXACT && (mx == 0 || mw <= F32_EXACT / mx / taps);
}

static pc_value *widened(pc_graph *g, pc_node *n) {
  pc_dtype dt = n->out[0]->type.dtype;
  if (!pc_dtype_is_narrow_float(dt) && !exact_small_conv(g, n)) return NULL;
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
