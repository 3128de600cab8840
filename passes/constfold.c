/* passes/constfold.c: constant folding: nodes whose operands are all constants become constants, via the interpreter. */
#include "passes/passes.h"
#include "passes/rewrite.h"

#include <string.h>

/* Largest result we fold; bigger ones would bloat the weights for little gain. */
#define FOLD_MAX_NUMEL (1 << 20)
/* Results growing past their operands (broadcast_in_dim, iota, random, big pads)
 * are folded only up to this many elements: they cost nothing to compute inline,
 * and a broadcast constant stays recognizable to the simplifier and the fuser. */
#define FOLD_GROW_NUMEL 64

static int64_t type_bytes(const pc_type *t) {
  int64_t n = pc_type_numel(t);
  return n < 0 ? -1 : n * (int64_t)pc_dtype_size(t->dtype);
}

/* a broadcast_in_dim of a constant, which stays unfolded (FOLD_GROW_NUMEL) but which an elementwise node may
 * fold with: a weight minus a broadcast zero point (quantized models) is one constant the size of the weight */
static int broadcast_const(const pc_value *v) {
  return v->producer && v->producer->op == PC_OP_broadcast_in_dim && pc_const_data(v->producer->in[0]);
}

static int foldable(const pc_graph *g, const pc_node *n) {
  /* a program with run-time dims folds no growing result: whether it fits would depend on the dims */
  int64_t grow_max = g->run_time_dims ? 0 : FOLD_GROW_NUMEL;
  if (n->dead || n->op == PC_OP_constant) return 0;
  int64_t in_bytes = 0, out_bytes = 0, bcast = 0;
  for (int k = 0; k < n->n_in; k++) {
    if (pc_op_is_elementwise(n->op) && broadcast_const(n->in[k])) {
      bcast++; /* materialized for the fold only: not counted as an operand's bytes */
      continue;
    }
    if (!pc_const_data(n->in[k])) return 0; /* not a constant, or a weight not bound yet */
    in_bytes += type_bytes(&n->in[k]->type);
  }
  if (bcast == n->n_in) return 0; /* broadcasts alone: a broadcast still, left to the fuser */
  if (g->run_time_dims && (n->n_in == 0 || bcast)) return 0; /* an iota or a broadcast: its size follows the dims */
  for (int k = 0; k < n->n_out; k++) {
    int64_t numel = pc_type_numel(&n->out[k]->type);
    if (numel < 0) return 0; /* symbolic (nonzero) */
    /* a converted weight is folded at any size: it runs on every call otherwise (f16 weights widened for
     * the f32 GEMM, passes/widen.c), and it is at most a few times its operand */
    /* a result no larger than its operands (a weight transposed, sliced or offset by a zero point) too: it
     * replaces them, and left unfolded it runs on every call (a QGemm's 1000 x 1280 weight, transposed and
     * widened per run, cost as much as the dot) */
    if (n->op != PC_OP_convert_element_type && numel > FOLD_MAX_NUMEL && type_bytes(&n->out[k]->type) > in_bytes)
      return 0;
    if (n->op != PC_OP_convert_element_type && numel > grow_max && type_bytes(&n->out[k]->type) > in_bytes)
      return 0;
    out_bytes += type_bytes(&n->out[k]->type);
  }
  return out_bytes >= 0;
}

static pc_tensor tensor_of(const pc_value *v) {
  pc_tensor t;
  memset(&t, 0, sizeof t);
  t.dtype = v->type.dtype;
  t.rank = v->type.rank;
  memcpy(t.dims, v->type.dims, sizeof t.dims);
  t.data = (void *)pc_const_data(v);
  return t;
}

/* evaluates n and puts one constant per result at n's place; n becomes dead */
static pc_status fold_node(pcp_sweep *sw, pc_node *n) {
  pc_graph *g = sw->g;
  pc_tensor in[8], out[4], wide[8];
  if (n->n_in > 8 || n->n_out > 4) return PC_OK;
  memset(wide, 0, sizeof wide);
  pc_status s = PC_OK;
  for (int k = 0; k < n->n_in && s == PC_OK; k++) {
    if (pc_const_data(n->in[k])) {
      in[k] = tensor_of(n->in[k]);
      continue;
    }
    pc_tensor b = tensor_of(n->in[k]->producer->in[0]); /* a broadcast constant, materialized */
    s = pc_interp_node(g, n->in[k]->producer, &b, &wide[k]);
    in[k] = wide[k];
  }
  memset(out, 0, sizeof out);
  if (s == PC_OK) s = pc_interp_node(g, n, in, out);
  for (int k = 0; k < n->n_in; k++) pc_tensor_free(&wide[k]);
  if (s != PC_OK) {
    for (int k = 0; k < n->n_out; k++) pc_tensor_free(&out[k]);
    if (g->status == PC_OK) pc_node_fail(g, n, s, "constant folding failed");
    return g->status;
  }
  pc_value *c[4] = {0};
  for (int k = 0; k < n->n_out && g->status == PC_OK; k++) {
    c[k] = pc_const(g, n->out[k]->type, out[k].data);
    if (c[k]) c[k]->producer->origin = n->origin; /* the sweep places it before n */
  }
  for (int k = 0; k < n->n_out; k++) pc_tensor_free(&out[k]);
  if (g->status != PC_OK) return g->status;
  int replaced = 1;
  for (int k = 0; k < n->n_out; k++) replaced &= pcp_sweep_replace(sw, n->out[k], c[k]);
  if (replaced) n->dead = 1;
  return g->status;
}

pc_status pc_pass_constfold(pc_graph *g) {
  if (g->status != PC_OK) return g->status;
  pcp_sweep s;
  if (pcp_sweep_begin(g, &s) != PC_OK) return g->status;
  for (int i = 0; i < s.n0 && g->status == PC_OK; i++) {
    pc_node *n = pcp_sweep_visit(&s, i);
    if (foldable(g, n)) fold_node(&s, n);
  }
  if (pcp_sweep_end(&s) != PC_OK) return g->status;
  pc_graph_compact(g);
  return g->status;
}
