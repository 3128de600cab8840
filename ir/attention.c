/* ir/attention.c: recognizes softmax(Q K^T * scale + mask) V in the prims, for the fuser (one attention
 * call, passes/fuse.c) and codegen (its operands, codegen/kir_calls.c). */
#include "ir/ir.h"

#include <math.h>
#include <string.h>

int pc_reshape_splits(const pc_node *n) {
  const pc_type *a = &n->in[0]->type, *b = &n->out[0]->type;
  int j = 0;
  for (int i = 0; i < a->rank; i++) {
    if (a->dims[i] == 1) continue;
    while (j < b->rank && b->dims[j] == 1) j++;
    int64_t prod = 1;
    while (j < b->rank && prod < a->dims[i]) prod *= b->dims[j++];
    if (prod != a->dims[i]) return 0;
  }
  return 1;
}

typedef struct matcher {
  const int *uses; /* by value id; NULL: roles only, uses unchecked */
  pc_attention *a;
  int ok;
  /* values read only inside the chain, and how many reads of each the chain made */
  int n_vals;
  const pc_value *vals[PC_ATTENTION_MAX_NODES];
  int reads[PC_ATTENTION_MAX_NODES];
} matcher;

static const pc_node *prod(const pc_value *v, pc_op op) {
  return v && v->producer && v->producer->op == op && !v->producer->dead ? v->producer : NULL;
}

static void add_node(matcher *M, const pc_node *n) {
  pc_attention *a = M->a;
  for (int i = 0; i < a->n_nodes; i++)
    if (a->nodes[i] == n) return;
  if (a->n_nodes >= PC_ATTENTION_MAX_NODES) M->ok = 0;
  else a->nodes[a->n_nodes++] = n;
}

/* v, produced by a node of the chain, is read once more by the chain */
static void internal(matcher *M, const pc_value *v) {
  for (int i = 0; i < M->n_vals; i++)
    if (M->vals[i] == v) {
      M->reads[i]++;
      return;
    }
  if (M->n_vals >= PC_ATTENTION_MAX_NODES) {
    M->ok = 0;
    return;
  }
  M->vals[M->n_vals] = v;
  M->reads[M->n_vals++] = 1;
  add_node(M, v->producer);
}

static int axes_are(const pc_node *n, const char *name, int len, int64_t first) {
  int l = 0;
  const int64_t *x = pc_attr_ints(n, name, &l);
  if (l != len) return 0;
  for (int i = 0; i < len; i++)
    if (x[i] != first + i) return 0;
  return 1;
}

static int is_f32(const pc_value *v) { return v->type.dtype == PC_f32 && pc_type_is_static(&v->type); }

/* v = f32(half(u)) with u f32: an f16 or bf16 model's op boundary inside the chain (a MatMul's result, the softmax
 * composite's, rounded to the model's type, then widened for the next op: frontend/composite.c, passes/widen.c).
 * The call computes in f32 throughout and skips the rounding; u, else v when v is no such pair */
static const pc_value *through_rounding(matcher *M, const pc_value *v) {
  const pc_node *up = prod(v, PC_OP_convert_element_type), *down;
  if (!up || !is_f32(v) || !pc_dtype_is_narrow_float(up->in[0]->type.dtype)) return v;
  if (!(down = prod(up->in[0], PC_OP_convert_element_type)) || !is_f32(down->in[0])) return v;
  internal(M, v);
  internal(M, up->in[0]);
  return down->in[0];
}

/* v = reduce_op(x) over x's last axis, broadcast back over it (a reshape keeping the dim, then
 * broadcast_in_dim, or broadcast_in_dim alone) */
static int row_stat(matcher *M, const pc_value *v, const pc_value *x, pc_op op) {
  int r = x->type.rank;
  const pc_node *b = prod(v, PC_OP_broadcast_in_dim), *red;
  if (!b || !axes_are(b, "dims", b->in[0]->type.rank, 0)) return 0;
  internal(M, v);
  const pc_value *u = b->in[0];
  const pc_node *rs = prod(u, PC_OP_reshape);
  if (rs) {
    if (u->type.rank != r || u->type.dims[r - 1] != 1) return 0;
    internal(M, u);
    u = rs->in[0];
  } else if (u->type.rank != r - 1) {
    return 0;
  }
  red = prod(u, op);
  if (!red || red->in[0] != x || !axes_are(red, "axes", 1, r - 1)) return 0;
  for (int d = 0; d < r - 1; d++)
    if (u->type.dims[d] != x->type.dims[d]) return 0;
  internal(M, u);
  return 1;
}

/* v is one value c everywhere: a constant (through broadcasts and reshapes) whose elements all equal */
static int uniform_const(matcher *M, const pc_value *v, double *c) {
  const pc_value *w = v;
  while (prod(w, PC_OP_broadcast_in_dim) || prod(w, PC_OP_reshape)) w = w->producer->in[0];
  const pc_node *k = prod(w, PC_OP_constant);
  pc_dtype t = w->type.dtype;
  const void *d = k && (t == PC_f32 || pc_dtype_is_narrow_float(t)) ? pc_const_data(w) : NULL;
  int64_t n = pc_type_numel(&w->type);
  if (!d || n < 1 || n > 4096) return 0;
  double c0 = pc_elem_f64(t, d, 0);
  for (int64_t i = 1; i < n; i++) {
    double ci = pc_elem_f64(t, d, i);
    if (memcmp(&ci, &c0, sizeof ci)) return 0;
  }
  *c = c0;
  for (w = v; w->producer && w->producer->op != PC_OP_constant; w = w->producer->in[0]) internal(M, w);
  return 1;
}

/* keep = key index <= query index over the last two dims (the lower triangle): ge(iota, iota) or a bool
 * constant with that data, broadcast over the batch dims */
static int causal_cond(matcher *M, const pc_value *v, int64_t sq, int64_t sk) {
  const pc_value *w = v;
  while (prod(w, PC_OP_broadcast_in_dim) || prod(w, PC_OP_reshape)) w = w->producer->in[0];
  int r = w->type.rank;
  if (w->type.dtype != PC_bool || r < 2 || w->type.dims[r - 2] != sq || w->type.dims[r - 1] != sk ||
      pc_type_numel(&w->type) != sq * sk)
    return 0;
  const pc_node *ge = prod(w, PC_OP_ge);
  if (ge) {
    const pc_node *i0 = prod(ge->in[0], PC_OP_iota), *i1 = prod(ge->in[1], PC_OP_iota);
    if (!i0 || !i1 || pc_attr_int(i0, "axis", -1) != r - 2 || pc_attr_int(i1, "axis", -1) != r - 1) return 0;
  } else {
    const unsigned char *d = prod(w, PC_OP_constant) ? pc_const_data(w) : NULL;
    if (!d) return 0;
    for (int64_t i = 0; i < sq; i++)
      for (int64_t j = 0; j < sk; j++)
        if (!!d[i * sk + j] != (j <= i)) return 0;
  }
  /* the broadcasts must put the triangle on the last two dims */
  for (const pc_value *x = v; x != w; x = x->producer->in[0]) {
    const pc_node *n = x->producer;
    int rin = n->in[0]->type.rank, l = 0;
    const int64_t *dims = n->op == PC_OP_broadcast_in_dim ? pc_attr_ints(n, "dims", &l) : NULL;
    if (x->type.dims[x->type.rank - 2] != sq || x->type.dims[x->type.rank - 1] != sk) return 0;
    if (n->op == PC_OP_reshape) {
      const pc_type *t = &n->in[0]->type;
      if (t->dims[t->rank - 1] != sk || t->dims[t->rank - 2] != sq) return 0;
    } else if (l != rin || dims[rin - 1] != x->type.rank - 1 || dims[rin - 2] != x->type.rank - 2) {
      return 0;
    }
  }
  if (ge) {
    internal(M, ge->in[0]), internal(M, ge->in[1]);
    internal(M, w);
  }
  for (const pc_value *x = v; x != w; x = x->producer->in[0]) internal(M, x);
  return 1;
}

/* the scores' dot: S = Q K^T over batch dims 0..r-3, K as [.., Sk, D] or [.., D, Sk] */
static int scores_dot(matcher *M, const pc_value *s) {
  const pc_node *d = prod(s, PC_OP_dot_general);
  int r = s->type.rank;
  if (!d || !is_f32(d->in[0]) || !is_f32(d->in[1]) || d->in[0]->type.rank != r || d->in[1]->type.rank != r) return 0;
  if (!axes_are(d, "lhs_batch", r - 2, 0) || !axes_are(d, "rhs_batch", r - 2, 0) || !axes_are(d, "lhs_contract", 1, r - 1))
    return 0;
  if (axes_are(d, "rhs_contract", 1, r - 1)) M->a->k_trans = 0;
  else if (axes_are(d, "rhs_contract", 1, r - 2)) M->a->k_trans = 1;
  else return 0;
  M->a->qk = d;
  internal(M, s);
  return 1;
}

/* x, the scores softmax reads: [mask +] [causal where] [scale *] Q K^T, outermost first. In an f16 or bf16 model
 * the scores are rounded to its type after the dot, maybe scaled or masked there (a where, a uniform constant), and
 * widened for the softmax: the call, in f32 throughout, skips both converts (an additive mask there is of the
 * model's type: codegen widens it for the call) */
static int scores(matcher *M, const pc_value *x, int stage) {
  pc_attention *a = M->a;
  const pc_node *n = x->producer;
  if (!n || n->dead || !pc_type_is_static(&x->type) || !(is_f32(x) || pc_dtype_is_narrow_float(x->type.dtype))) return 0;
  int r = x->type.rank;
  if (n->op == PC_OP_convert_element_type) {
    const pc_value *u = n->in[0];
    if (is_f32(x) ? !pc_dtype_is_narrow_float(u->type.dtype) : !is_f32(u)) return 0;
    internal(M, x);
    return scores(M, u, stage);
  }
  if (n->op == PC_OP_add && stage < 1) {
    for (int side = 0; side < 2; side++) {
      int saved_n = a->n_nodes, saved_v = M->n_vals;
      double saved_scale = a->scale;
      int saved_causal = a->causal;
      const pc_value *mask = n->in[1 - side];
      int mask_ok = is_f32(x) ? is_f32(mask) : mask->type.dtype == x->type.dtype && pc_type_is_static(&mask->type);
      if (mask_ok && scores(M, n->in[side], 1)) {
        a->mask = n->in[1 - side];
        internal(M, x);
        return 1;
      }
      a->n_nodes = saved_n, M->n_vals = saved_v, a->scale = saved_scale, a->causal = saved_causal;
      memset(M->reads + saved_v, 0, sizeof *M->reads * (size_t)(PC_ATTENTION_MAX_NODES - saved_v));
    }
    return 0;
  }
  double c;
  if (n->op == PC_OP_where && stage < 2 && uniform_const(M, n->in[2], &c) && isinf(c) && c < 0 &&
      causal_cond(M, n->in[0], x->type.dims[r - 2], x->type.dims[r - 1])) {
    a->causal = 1;
    internal(M, x);
    return scores(M, n->in[1], 2);
  }
  if ((n->op == PC_OP_mul || n->op == PC_OP_div) && stage < 3) {
    for (int side = 0; side < 2; side++) {
      if (n->op == PC_OP_div && side == 0) continue; /* c / S is no scale */
      if (!uniform_const(M, n->in[side], &c) || c == 0 || !isfinite(c)) continue;
      a->scale = n->op == PC_OP_mul ? c : 1.0 / c;
      internal(M, x);
      return scores(M, n->in[1 - side], 3);
    }
    return 0;
  }
  return scores_dot(M, x);
}

/* an operand read through index maps only (transpose, a reshape that splits dims, broadcast_in_dim):
 * those maps join the chain while nothing else reads them, so the call reads the operand in place */
static void operand_maps(matcher *M, const pc_value *v) {
  for (;;) {
    const pc_node *n = v->producer;
    if (!n || n->dead || n->n_in != 1 ||
        !(n->op == PC_OP_transpose || n->op == PC_OP_broadcast_in_dim || (n->op == PC_OP_reshape && pc_reshape_splits(n))))
      return;
    if (M->uses && M->uses[v->id] != 1) return;
    internal(M, v);
    v = n->in[0];
  }
}

int pc_attention_match(const pc_graph *g, const pc_node *pv, const int *uses, pc_attention *a) {
  memset(a, 0, sizeof *a);
  a->scale = 1;
  matcher M = {.uses = uses, .a = a, .ok = 1};
  int r = pv->out[0]->type.rank;
  if (pv->op != PC_OP_dot_general || pv->dead || r < 2 || r > 4 || !is_f32(pv->in[0]) || !is_f32(pv->in[1]) ||
      pv->in[0]->type.rank != r || pv->in[1]->type.rank != r)
    return 0;
  if (!axes_are(pv, "lhs_batch", r - 2, 0) || !axes_are(pv, "rhs_batch", r - 2, 0) ||
      !axes_are(pv, "lhs_contract", 1, r - 1) || !axes_are(pv, "rhs_contract", 1, r - 2))
    return 0;
  a->pv = pv;
  add_node(&M, pv);
  /* P = E / rowsum(E), E = exp(X - rowmax(X)) */
  const pc_value *p = through_rounding(&M, pv->in[0]);
  const pc_node *div = prod(p, PC_OP_div), *ex, *sub;
  if (!div) return 0;
  internal(&M, p);
  const pc_value *e = div->in[0];
  if (!(ex = prod(e, PC_OP_exp)) || !row_stat(&M, div->in[1], e, PC_OP_reduce_sum)) return 0;
  internal(&M, e), internal(&M, e); /* read by the div and the sum */
  const pc_value *z = ex->in[0];
  if (!(sub = prod(z, PC_OP_sub))) return 0;
  internal(&M, z);
  const pc_value *x = sub->in[0];
  if (!row_stat(&M, sub->in[1], x, PC_OP_reduce_max) || !scores(&M, x, 0)) return 0;
  internal(&M, x); /* read by the sub and the max; scores() counted one */
  /* the internal values must have no reader outside the chain and be no graph output */
  for (int i = 0; i < M.n_vals; i++) {
    if (uses && uses[M.vals[i]->id] != M.reads[i]) return 0;
    for (int o = 0; o < g->n_outputs; o++)
      if (g->outputs[o] == M.vals[i]) return 0;
  }
  if (a->mask && (a->mask->type.rank != r || !(is_f32(a->mask) || pc_dtype_is_narrow_float(a->mask->type.dtype)))) return 0;
  int64_t d = a->qk->in[0]->type.dims[r - 1], dv = pv->in[1]->type.dims[r - 1];
  if (d < 1 || d > PC_ATTENTION_MAX_DIM || dv < 1 || dv > PC_ATTENTION_MAX_DIM) return 0;
  operand_maps(&M, a->qk->in[0]);
  operand_maps(&M, a->qk->in[1]);
  operand_maps(&M, pv->in[1]);
  if (a->mask) operand_maps(&M, a->mask);
  return M.ok;
}
