/* passes/simplify.c: algebraic simplification: exact identities only (x*1, x+(-0.0), movement no-ops and chains, weight layout). */
#include "passes/passes.h"
#include "passes/rewrite.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Floating-point care: x*1 and x/1 are exact for every x. x+0.0 is NOT: it
 * turns -0.0 into +0.0; so `add` drops only an operand that is all -0.0
 * (x + -0.0 == x for every x), and `sub` only a subtrahend that is all +0.0
 * (x - +0.0 == x + -0.0). Integers have one zero and drop either. */

/* element i of constant data as double; *neg_zero set for a float -0.0 */
static double elem(pc_dtype dt, const void *p, int64_t i, int *neg_zero) {
  double v = 0;
  switch (dt) { /* one read per storage type */
  case PC_f16: v = pc_f16_to_f32(((const uint16_t *)p)[i]); break;
  case PC_bf16: v = pc_bf16_to_f32(((const uint16_t *)p)[i]); break;
  case PC_f32: v = ((const float *)p)[i]; break;
  case PC_f64: v = ((const double *)p)[i]; break;
  case PC_i8: v = ((const int8_t *)p)[i]; break;
  case PC_i16: v = ((const int16_t *)p)[i]; break;
  case PC_i32: v = ((const int32_t *)p)[i]; break;
  case PC_i64: v = (double)((const int64_t *)p)[i]; break;
  case PC_u8: case PC_bool: v = ((const uint8_t *)p)[i]; break;
  case PC_u16: v = ((const uint16_t *)p)[i]; break;
  case PC_u32: v = ((const uint32_t *)p)[i]; break;
  case PC_u64: v = (double)((const uint64_t *)p)[i]; break;
  case PC_i4: case PC_i2: v = ((const int8_t *)p)[i]; break;
  case PC_u4: case PC_u2: v = ((const uint8_t *)p)[i]; break;
  case PC_f8e4m3fn: case PC_f8e4m3fnuz: case PC_f8e5m2: case PC_f8e5m2fnuz: case PC_f4e2m1: case PC_f8e8m0: v = pc_f8_to_f32(dt, ((const uint8_t *)p)[i]); break;
  case PC_c64: v = ((const float *)p)[2 * i + 1] != 0 ? NAN : ((const float *)p)[2 * i]; break;
  case PC_DTYPE_COUNT: v = NAN; break;
  }
  *neg_zero = v == 0 && signbit(v);
  return v;
}

/* 1 when every element of v is c; sign: +1 requires +0.0, -1 requires -0.0 (floats).
 * Sees through broadcast_in_dim and reshape of a constant. */
static int all_equal(const pc_value *v, double c, int sign) {
  while (v->producer && (v->producer->op == PC_OP_broadcast_in_dim || v->producer->op == PC_OP_reshape))
    v = v->producer->in[0];
  const void *data = pc_const_data(v);
  int64_t numel = pc_type_numel(&v->type);
  if (!data || numel < 0) return 0;
  int fl = pc_dtype_is_float(v->type.dtype);
  for (int64_t i = 0; i < numel; i++) {
    int nz;
    double e = elem(v->type.dtype, data, i, &nz);
    if (e != c) return 0;
    if (fl && sign && nz != (sign < 0)) return 0;
  }
  return 1;
}

static int is_float(const pc_value *v) { return pc_dtype_is_float(v->type.dtype); }

static int same_shape(const pc_type *a, const pc_type *b) {
  return a->rank == b->rank && memcmp(a->dims, b->dims, sizeof(int64_t) * (size_t)a->rank) == 0;
}

static int is_iota(const int64_t *v, int n) {
  for (int i = 0; i < n; i++)
    if (v[i] != i) return 0;
  return 1;
}

static int all_are(const int64_t *v, int n, int64_t x) {
  for (int i = 0; v && i < n; i++)
    if (v[i] != x) return 0;
  return 1;
}

/* ---- one rule per prim: the simpler value, an existing one or a new node (appended), or NULL */

/* what one run of the pass remembers: each shared weight transposed once for all the dots that read it
 * (an unrolled RNN's 3,000 dots on one R each counted its uses over the whole graph and copied it) */
typedef struct simp_ctx {
  pc_value **transposed; /* by value id of a constant [N, K] operand: its [K, N] copy, or NULL */
  int *uses;             /* by value id: reads when the pass began */
  unsigned char *gained; /* by value id: a reader added since */
  int cap;               /* values when the pass began */
  int backward;          /* the graph has a reverse mode's prims (a gradient, a training step) */
} simp_ctx;

typedef pc_value *(*rule_fn)(pc_graph *g, pc_node *n, simp_ctx *cx);

static pc_value *r_mul(pc_graph *g, pc_node *n, simp_ctx *cx) {
  (void)g;
  if (all_equal(n->in[1], 1, 0)) return n->in[0];
  return all_equal(n->in[0], 1, 0) ? n->in[1] : NULL;
}

static pc_value *r_div(pc_graph *g, pc_node *n, simp_ctx *cx) {
  (void)g;
  return all_equal(n->in[1], 1, 0) ? n->in[0] : NULL;
}

static pc_value *r_add(pc_graph *g, pc_node *n, simp_ctx *cx) {
  (void)g;
  int sign = is_float(n->in[0]) ? -1 : 0;
  if (all_equal(n->in[1], 0, sign)) return n->in[0];
  return all_equal(n->in[0], 0, sign) ? n->in[1] : NULL;
}

static pc_value *r_sub(pc_graph *g, pc_node *n, simp_ctx *cx) {
  (void)g;
  return all_equal(n->in[1], 0, is_float(n->in[0]) ? 1 : 0) ? n->in[0] : NULL;
}

static pc_value *r_neg(pc_graph *g, pc_node *n, simp_ctx *cx) {
  (void)g;
  const pc_node *p = n->in[0]->producer;
  return p && p->op == PC_OP_neg ? p->in[0] : NULL;
}

static pc_value *r_transpose(pc_graph *g, pc_node *n, simp_ctx *cx) {
  int r = n->out[0]->type.rank, len = 0;
  const int64_t *perm = pc_attr_ints(n, "perm", &len);
  if (!perm || len != r) return NULL;
  if (is_iota(perm, r)) return n->in[0];
  /* moving only dims of 1 keeps every element where it is: a reshape, which views and buffer reuse take as it
   * is (a conv's weight gradient transposed [1, C, H, W] into [C, 1, H, W], a copy each step) */
  const pc_type *xt = &n->in[0]->type;
  int64_t last = -1, known = 1;
  for (int i = 0; i < r && known; i++) {
    known = xt->dims[perm[i]] >= 0;
    if (xt->dims[perm[i]] != 1 && perm[i] < last) break;
    if (xt->dims[perm[i]] != 1) last = perm[i];
    if (i == r - 1 && known) return pc_reshape(g, n->in[0], r, n->out[0]->type.dims);
  }
  const pc_node *p = n->in[0]->producer;
  const int64_t *inner = p && p->op == PC_OP_transpose ? pc_attr_ints(p, "perm", &len) : NULL;
  if (!inner || len != r) return NULL;
  int64_t q[PC_MAX_RANK];
  for (int i = 0; i < r; i++) q[i] = inner[perm[i]];
  return is_iota(q, r) ? p->in[0] : pc_transpose(g, p->in[0], q);
}

static pc_value *r_reshape(pc_graph *g, pc_node *n, simp_ctx *cx) {
  const pc_type *t = &n->out[0]->type;
  if (same_shape(t, &n->in[0]->type)) return n->in[0];
  const pc_node *p = n->in[0]->producer;
  if (!p || p->op != PC_OP_reshape) return NULL;
  if (same_shape(t, &p->in[0]->type)) return p->in[0];
  return pc_reshape(g, p->in[0], t->rank, t->dims);
}

static pc_value *r_broadcast(pc_graph *g, pc_node *n, simp_ctx *cx) {
  int len = 0;
  const int64_t *dims = pc_attr_ints(n, "dims", &len);
  const pc_value *x = n->in[0];
  if (same_shape(&n->out[0]->type, &x->type) && (x->type.rank == 0 || (dims && is_iota(dims, len))))
    return n->in[0];
  /* broadcast of a broadcast: operand dim i goes to dims[inner[i]] */
  const pc_node *p = x->producer;
  int ilen = 0;
  const int64_t *inner = p && p->op == PC_OP_broadcast_in_dim ? pc_attr_ints(p, "dims", &ilen) : NULL;
  if (!p || p->op != PC_OP_broadcast_in_dim || (ilen && !inner) || (x->type.rank && !dims)) return NULL;
  int64_t d[PC_MAX_RANK];
  for (int i = 0; i < ilen; i++) d[i] = dims[inner[i]];
  const pc_type *t = &n->out[0]->type;
  return pc_broadcast_in_dim(g, p->in[0], t->rank, t->dims, d);
}

static pc_value *r_convert(pc_graph *g, pc_node *n, simp_ctx *cx) {
  (void)g;
  return n->in[0]->type.dtype == n->out[0]->type.dtype ? n->in[0] : NULL;
}

static pc_value *r_slice(pc_graph *g, pc_node *n, simp_ctx *cx) {
  (void)g;
  int r = n->in[0]->type.rank, ls = 0, ll = 0, lt = 0;
  const int64_t *start = pc_attr_ints(n, "start", &ls), *stride = pc_attr_ints(n, "stride", &lt);
  pc_attr_ints(n, "limit", &ll);
  if (!start || ls != r || (stride && lt != r)) return NULL;
  return all_are(start, r, 0) && all_are(stride, r, 1) && same_shape(&n->out[0]->type, &n->in[0]->type)
             ? n->in[0]
             : NULL;
}

/* a pad of nothing is its operand; one that only crops (no edge above 0, no interior) is a slice, which fuses
 * into its readers where a pad is stored (the gradient of a forward pad: a copy of the whole cotangent) */
static pc_value *r_pad(pc_graph *g, pc_node *n, simp_ctx *cx) {
  int r = n->in[0]->type.rank, a = 0, b = 0, c = 0;
  const int64_t *lo = pc_attr_ints(n, "low", &a), *hi = pc_attr_ints(n, "high", &b), *in = pc_attr_ints(n, "interior", &c);
  if (a != r || b != r || (in && c != r)) return NULL;
  if (!all_are(in, r, 0)) return NULL;
  if (all_are(lo, r, 0) && all_are(hi, r, 0)) return n->in[0];
  int64_t start[PC_MAX_RANK], limit[PC_MAX_RANK], one[PC_MAX_RANK];
  for (int d = 0; d < r; d++) {
    if (lo[d] > 0 || hi[d] > 0) return NULL;
    start[d] = -lo[d], limit[d] = n->in[0]->type.dims[d] + hi[d], one[d] = 1;
  }
  return pc_slice(g, n->in[0], start, limit, one);
}

static pc_value *r_rev(pc_graph *g, pc_node *n, simp_ctx *cx) {
  (void)g;
  int len = 0;
  const int64_t *dims = pc_attr_ints(n, "dims", &len);
  for (int i = 0; dims && i < len; i++)
    if (n->in[0]->type.dims[dims[i]] != 1) return NULL;
  return n->in[0];
}

static pc_value *r_concatenate(pc_graph *g, pc_node *n, simp_ctx *cx) {
  (void)g;
  return n->n_in == 1 ? n->in[0] : NULL;
}

/* whether n is v's only reader: v was read once (by a live node or as a graph output) when the pass began
 * and has gained no reader since (a replacement by v, a node built on it); counting the graph per dot was
 * quadratic in an unrolled RNN */
static int sole_reader(const simp_ctx *cx, const pc_value *v) {
  return v->id < cx->cap && cx->uses[v->id] == 1 && !cx->gained[v->id];
}

/* transposes the row-major [n, k] matrix a into [k, n] in place: swaps when square, else follows each
 * cycle of the permutation i -> (i % k) * n + i / k once (a bit per element marks the visited) */
static int transpose_in_place(float *a, int64_t n, int64_t k) {
  if (n == k) {
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = i + 1; j < n; j++) {
        float t = a[i * n + j];
        a[i * n + j] = a[j * n + i], a[j * n + i] = t;
      }
    return 1;
  }
  int64_t total = n * k;
  uint8_t *seen = calloc((size_t)(total + 7) / 8, 1);
  if (!seen) return 0;
  for (int64_t start = 1; start < total - 1; start++) {
    if (seen[start >> 3] >> (start & 7) & 1) continue;
    float carry = a[start];
    int64_t i = start;
    do { /* the element at i (row i / k, column i % k) goes to i' = (i % k) * n + i / k */
      int64_t to = (i % k) * n + i / k;
      float t = a[to];
      a[to] = carry, carry = t;
      seen[to >> 3] |= (uint8_t)(1u << (to & 7));
      i = to;
    } while (i != start);
  }
  free(seen);
  return 1;
}

/* dot_general(transpose(x), ...) as a dot of x itself, its dim numbers renumbered, where the transpose keeps the
 * order of the operand's free dims (the order the result takes them in): attention's heads split off [B, S, H, D]
 * become batch dims (0, 2) of x, which codegen reads in place (kir_calls.c's dot_b2) instead of a transposed copy
 * per operand. f32 dots of graphs with a reverse mode only: in inference the transposes are what
 * pc_attention_match looks for, and the fused attention call reads them as index maps anyway. */
static pc_value *fold_transposes(pc_graph *g, pc_node *n) {
  int nc = 0, nc2 = 0, nb = 0, nb2 = 0;
  const int64_t *c0 = pc_attr_ints(n, "lhs_contract", &nc), *c1 = pc_attr_ints(n, "rhs_contract", &nc2);
  const int64_t *b0 = pc_attr_ints(n, "lhs_batch", &nb), *b1 = pc_attr_ints(n, "rhs_batch", &nb2);
  if (n->out[0]->type.dtype != PC_f32 || nc != nc2 || nb != nb2 || nc > PC_MAX_RANK || nb > PC_MAX_RANK) return NULL;
  int64_t con[2][PC_MAX_RANK], bat[2][PC_MAX_RANK];
  for (int i = 0; i < nc; i++) con[0][i] = c0[i], con[1][i] = c1[i];
  for (int i = 0; i < nb; i++) bat[0][i] = b0[i], bat[1][i] = b1[i];
  pc_value *ops[2] = {n->in[0], n->in[1]};
  int changed = 0;
  for (int side = 0; side < 2; side++) {
    const pc_node *t = ops[side]->producer;
    int np = 0;
    const int64_t *perm = t && t->op == PC_OP_transpose ? pc_attr_ints(t, "perm", &np) : NULL;
    if (!perm || np != ops[side]->type.rank) continue;
    char used[PC_MAX_RANK] = {0};
    for (int i = 0; i < nc; i++) used[con[side][i]] = 1;
    for (int i = 0; i < nb; i++) used[bat[side][i]] = 1;
    int64_t last = -1, ok = 1;
    for (int d = 0; d < np && ok; d++) /* the free dims, in the result's order, must stay in order in x */
      if (!used[d]) ok = perm[d] > last, last = perm[d];
    if (!ok) continue;
    for (int i = 0; i < nc; i++) con[side][i] = perm[con[side][i]];
    for (int i = 0; i < nb; i++) bat[side][i] = perm[bat[side][i]];
    ops[side] = t->in[0];
    changed = 1;
  }
  if (!changed) return NULL;
  pc_value *d = pc_dot_general(g, ops[0], ops[1], nc, con[0], con[1], nb, bat[0], bat[1]);
  if (d) d->producer->origin = n->origin;
  return d;
}

/* A constant matrix operand [N, K] contracted over its last dim (nn.Linear's weight,
 * ONNX Gemm transB): stored transposed once here, so the GEMM reads B's rows in place
 * instead of transposing the weight on every call. Exact: the same numbers, moved.
 * A weight only this dot reads is transposed where it is, the old constant then dead:
 * a large model's weights are not held twice (compile memory, issue 26). */
static pc_value *r_dot(pc_graph *g, pc_node *n, simp_ctx *cx) {
  pc_value *folded = cx->backward ? fold_transposes(g, n) : NULL;
  if (folded) return folded;
  int nrc = 0, nlc = 0, nrb = 0;
  const int64_t *rc = pc_attr_ints(n, "rhs_contract", &nrc), *lc = pc_attr_ints(n, "lhs_contract", &nlc);
  pc_attr_ints(n, "rhs_batch", &nrb);
  pc_value *w = n->in[1];
  const float *src = pc_const_data(w);
  if (!src || w->type.dtype != PC_f32 || w->type.rank != 2 || nrc != 1 || nlc != 1 || rc[0] != 1 || nrb) return NULL;
  int64_t N = w->type.dims[0], K = w->type.dims[1];
  if (N < 2 || K < 2) return NULL;
  pc_type tt = pc_type_make(PC_f32, 2, (int64_t[]){K, N});
  pc_value *wt = w->id < cx->cap ? cx->transposed[w->id] : NULL;
  if (wt) {
    /* transposed for an earlier dot: shared */
  } else if (sole_reader(cx, w) && transpose_in_place((float *)(void *)w->producer->data, N, K)) {
    wt = pc_const_view(g, tt, w->producer->data);
    if (wt) w->producer->dead = 1, wt->name = w->name, w->name = NULL; /* its data is wt's now */
  } else {
    float *t = pc_alloc(g, sizeof(float) * (size_t)(N * K));
    wt = t ? pc_const_view(g, tt, t) : NULL;
    for (int64_t j0 = 0; wt && j0 < N; j0 += 16) /* blocks of 16 rows: both sides stay in cache */
      for (int64_t k = 0; k < K; k++)
        for (int64_t j = j0; j < N && j < j0 + 16; j++) t[k * N + j] = src[j * K + k];
  }
  if (!wt) return NULL;
  if (w->id < cx->cap) cx->transposed[w->id] = wt;
  wt->producer->origin = w->producer->origin;
  int64_t zero = 0;
  pc_value *d = pc_dot_general(g, n->in[0], wt, 1, lc, &zero, 0, NULL, NULL);
  if (d) d->producer->origin = n->origin;
  return d;
}

/* sparse on purpose: NULL means no rewrite for that prim, so a new prim needs nothing here */
static const rule_fn rules[PC_OP_COUNT] = {
    [PC_OP_mul] = r_mul,           [PC_OP_div] = r_div,         [PC_OP_add] = r_add,
    [PC_OP_sub] = r_sub,           [PC_OP_neg] = r_neg,         [PC_OP_transpose] = r_transpose,
    [PC_OP_reshape] = r_reshape,   [PC_OP_broadcast_in_dim] = r_broadcast,
    [PC_OP_convert_element_type] = r_convert, [PC_OP_slice] = r_slice, [PC_OP_pad] = r_pad,
    [PC_OP_rev] = r_rev,           [PC_OP_concatenate] = r_concatenate, [PC_OP_dot_general] = r_dot,
};

pc_status pc_pass_simplify(pc_graph *g) {
  if (g->status != PC_OK) return g->status;
  size_t nv = (size_t)g->n_values + 1;
  simp_ctx cx = {calloc(nv, sizeof(pc_value *)), calloc(nv, sizeof(int)), calloc(nv, 1), g->n_values, 0};
  pcp_sweep s;
  if (!cx.transposed || !cx.uses || !cx.gained || pcp_sweep_begin(g, &s) != PC_OK) {
    free(cx.transposed), free(cx.uses), free(cx.gained);
    return g->status != PC_OK ? g->status : pc_fail(g, PC_ERR_NOMEM, "out of memory");
  }
  for (int i = 0; i < g->n_nodes; i++)
    for (int k = 0; !g->nodes[i]->dead && k < g->nodes[i]->n_in; k++) cx.uses[g->nodes[i]->in[k]->id]++;
  for (int i = 0; i < g->n_outputs; i++) cx.uses[g->outputs[i]->id]++;
  for (int i = 0; i < g->n_nodes && !cx.backward; i++) cx.backward = g->nodes[i]->backward && !g->nodes[i]->dead;
  for (int i = 0; i < s.n0 && g->status == PC_OK; i++) {
    pc_node *n = pcp_sweep_visit(&s, i);
    if (n->dead || n->n_out != 1 || !rules[n->op]) continue;
    int built = g->n_nodes;
    pc_value *r = rules[n->op](g, n, &cx); /* nodes it builds are placed before n */
    for (int j = built; j < g->n_nodes; j++)
      for (int k = 0; k < g->nodes[j]->n_in; k++)
        if (g->nodes[j]->in[k]->id < cx.cap) cx.gained[g->nodes[j]->in[k]->id] = 1;
    if (r && g->status == PC_OK && pcp_sweep_replace(&s, n->out[0], r)) {
      n->dead = 1;
      if (r->id < cx.cap) cx.gained[r->id] = 1;
    }
  }
  free(cx.transposed), free(cx.uses), free(cx.gained);
  if (pcp_sweep_end(&s) != PC_OK) return g->status;
  pc_graph_compact(g);
  return g->status;
}
