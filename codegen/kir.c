/* codegen/kir.c: builds kernel IR (loop nests over affine loads) from the fused groups of a prim graph:
 * buffers, loop kernels, groups and kir_build; runtime calls are kir_calls.c's, expressions kir_expr.c's,
 * the rewrites that follow lowering kir_rewrites.c's. */
#include "codegen/kir_internal.h"
#include "runtime/primc_rt.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>


kir_expr *kir_expr_new(kir_program *p, kir_ekind kind, pc_dtype dt) {
  kir_expr *e = pc_alloc(p->g, sizeof *e);
  if (!e) return NULL;
  e->kind = kind;
  e->dtype = dt;
  return e;
}

const char *kir_red_name(kir_red r) {
  static const char *const names[] = {"none", "sum", "prod", "max", "min", "argmax", "argmin"};
  return names[r];
}

/* ---------------------------------------------------------------- buffers */

/* t with its symbolic dims at their bound: the only symbols codegen lets through are nonzero's
 * counts (check_dynamic), whose buffers are sized for the bound */
pc_type kir_bound_type(const pc_graph *g, const pc_type *t) {
  pc_type b = *t;
  for (int d = 0; d < t->rank; d++)
    if (PC_DIM_IS_SYM(t->dims[d]) && g->syms[PC_DIM_SYM_ID(t->dims[d])].hi != INT64_MAX)
      b.dims[d] = g->syms[PC_DIM_SYM_ID(t->dims[d])].hi;
  return b;
}

int64_t kir_value_bytes(const pc_graph *g, const pc_value *v) {
  pc_type b = kir_bound_type(g, &v->type);
  return pc_type_numel(&b) * (int64_t)pc_dtype_size(v->type.dtype);
}

int kir_buf_add(kir_program *p, kir_buf b) {
  if (p->n_bufs == p->cap_bufs) {
    int cap = p->cap_bufs ? p->cap_bufs * 2 : 64;
    kir_buf *nb = pc_alloc(p->g, sizeof *nb * (size_t)cap);
    if (!nb) return -1;
    if (p->n_bufs) memcpy(nb, p->bufs, sizeof *nb * (size_t)p->n_bufs);
    p->bufs = nb;
    p->cap_bufs = cap;
  }
  p->bufs[p->n_bufs] = b;
  return p->n_bufs++;
}

/* scratch space in the workspace past the planned part */
int kir_scratch_buf(kir_program *p, pc_dtype dt, int64_t nbytes, const pc_value *v) {
  kir_buf b = {KP_WORKSPACE, -1, kir_align_up(p->workspace_size), nbytes, dt, v};
  p->workspace_size = b.offset + kir_align_up(nbytes > 0 ? nbytes : 1);
  return kir_buf_add(p, b);
}

#define CALL_SCRATCH (-2) /* kir_buf.index of a call's scratch until the region is placed */

int kir_call_scratch_buf(kir_program *p, pc_dtype dt, int64_t nbytes) {
  kir_buf b = {KP_WORKSPACE, CALL_SCRATCH, 0, nbytes, dt, NULL};
  if (nbytes > p->call_scratch) p->call_scratch = nbytes;
  return kir_buf_add(p, b);
}

int kir_bufs_overlap(const kir_program *p, int a, int b) {
  const kir_buf *x = &p->bufs[a], *y = &p->bufs[b];
  if (a == b) return 1;
  if (x->place != y->place) return 0;
  if (x->place == KP_INPUT || x->place == KP_OUTPUT) return x->index == y->index;
  return x->offset < y->offset + y->nbytes && y->offset < x->offset + x->nbytes;
}

/* the calls' scratch region after everything the kernels placed: each call's scratch is dead outside its
 * call, so one region serves them all and stays in cache from call to call (MnasNet's convs had 14.5 MB
 * of regions of their own, each touched once a run) */
/* the workspace offset past the region placed at `at` */
static int64_t call_scratch_end(const kir_program *p, int64_t at) {
  return at + kir_align_up(p->call_scratch > 0 ? p->call_scratch : 1);
}

static void place_call_scratch(kir_program *p) {
  int64_t at = kir_align_up(p->workspace_size);
  int any = 0;
  for (int i = 0; i < p->n_bufs; i++)
    if (p->bufs[i].place == KP_WORKSPACE && p->bufs[i].index == CALL_SCRATCH) p->bufs[i].offset = at, p->bufs[i].index = -1, any = 1;
  if (any) p->call_scratch_at = at, p->workspace_size = call_scratch_end(p, at);
}

/* a call's scratch once the region is placed: in the region, grown when nothing was placed after it, else a
 * scratch of its own */
int kir_call_scratch_grown(kir_program *p, pc_dtype dt, int64_t nbytes) {
  int64_t at = p->call_scratch_at;
  if (at <= 0 || kir_align_up(p->workspace_size) != call_scratch_end(p, at)) return kir_scratch_buf(p, dt, nbytes, NULL);
  if (nbytes > p->call_scratch) p->call_scratch = nbytes;
  p->workspace_size = call_scratch_end(p, at);
  return kir_buf_add(p, (kir_buf){KP_WORKSPACE, -1, at, nbytes, dt, NULL});
}

static int output_index(const pc_graph *g, const pc_value *v) {
  for (int i = 0; i < g->n_outputs; i++)
    if (g->outputs[i] == v) return i;
  return -1;
}

static int graph_is_planned(const pc_graph *g) {
  for (int i = 0; i < g->n_nodes; i++) {
    const pc_node *n = g->nodes[i];
    if (n->dead || n->op == PC_OP_constant) continue;
    for (int k = 0; k < n->n_out; k++)
      if (n->out[k]->storage == PC_STORE_UNPLANNED) return 0;
  }
  return 1;
}

static pc_status place_const(kir_program *p, const pc_node *n) {
  const pc_value *v = n->out[0];
  if (!n->data && kir_value_bytes(p->g, v) > 0)
    return pc_node_fail(p->g, n, PC_ERR_UNSUPPORTED, "constant has no data (unbound weight key)");
  kir_buf b = {KP_CONST, p->n_consts, p->weights_size, kir_value_bytes(p->g, v), v->type.dtype, v};
  p->weights_size = kir_align_up(p->weights_size + b.nbytes);
  p->consts[p->n_consts++] = v;
  int id = kir_buf_add(p, b);
  if (id < 0) return PC_ERR_NOMEM;
  p->buf_of_value[v->id] = id;
  return PC_OK;
}

/* one value produced by a node: its storage, from the planner or our own plan */
static pc_status place_value(kir_program *p, const pc_value *v, int planned) {
  kir_buf b = {KP_WORKSPACE, -1, 0, kir_value_bytes(p->g, v), v->type.dtype, v};
  int oi = output_index(p->g, v);
  if (planned) {
    if (v->storage == PC_STORE_FUSED) return PC_OK;
    if (v->storage == PC_STORE_OUTPUT && oi >= 0) {
      b.place = KP_OUTPUT;
      b.index = oi;
    } else if (v->storage == PC_STORE_WORKSPACE) {
      b.offset = v->offset;
    } else {
      int id = kir_scratch_buf(p, v->type.dtype, b.nbytes, v);
      if (id < 0) return PC_ERR_NOMEM;
      p->buf_of_value[v->id] = id;
      return PC_OK;
    }
  } else if (oi >= 0) {
    b.place = KP_OUTPUT;
    b.index = oi;
  } else if (v->producer && v->producer->group >= 0 && !p->escapes[v->id]) {
    return PC_OK; /* lives inside its fused group only */
  } else {
    int id = kir_scratch_buf(p, v->type.dtype, b.nbytes, v);
    if (id < 0) return PC_ERR_NOMEM;
    p->buf_of_value[v->id] = id;
    return PC_OK;
  }
  int id = kir_buf_add(p, b);
  if (id < 0) return PC_ERR_NOMEM;
  p->buf_of_value[v->id] = id;
  return PC_OK;
}

/* escapes[v] = v is read outside its producer's group (or its producer is unfused) */
static pc_status find_escapes(kir_program *p) {
  pc_graph *g = p->g;
  p->escapes = pc_alloc(g, (size_t)g->n_values + 1);
  if (!p->escapes) return PC_ERR_NOMEM;
  for (int i = 0; i < g->n_nodes; i++) {
    const pc_node *n = g->nodes[i];
    for (int k = 0; !n->dead && k < n->n_in; k++) {
      const pc_node *pr = n->in[k]->producer;
      if (!pr || pr->group < 0 || pr->group != n->group) p->escapes[n->in[k]->id] = 1;
    }
  }
  return PC_OK;
}

/* Compiled code has static shapes, save one case: a nonzero whose result is only a graph output.
 * Its buffer is sized at the bound, the run writes the count it found beside it and
 * NAME_output_dims reports it; anything reading the result would need its size at compile time. */
static pc_status check_dynamic(kir_program *p, const pc_node *n) {
  pc_graph *g = p->g;
  int dynamic = 0;
  for (int k = 0; k < n->n_out; k++) dynamic |= !pc_type_is_static(&n->out[k]->type);
  if (!dynamic) return PC_OK;
  if (n->op != PC_OP_nonzero)
    return pc_node_fail(g, n, PC_ERR_UNSUPPORTED, "symbolic dims are not supported by codegen (use --dim)");
  for (int i = 0; i < g->n_nodes; i++) {
    const pc_node *u = g->nodes[i];
    for (int k = 0; !u->dead && k < u->n_in; k++)
      if (u->in[k] == n->out[0])
        return pc_node_fail(g, n, PC_ERR_UNSUPPORTED,
                            "its data-dependent result feeds %s; compiled code supports a nonzero result only as a "
                            "graph output",
                            u->origin && (!n->origin || strcmp(u->origin, n->origin)) ? u->origin : pc_prim(u->op)->name);
  }
  return PC_OK;
}

static pc_status place_all(kir_program *p) {
  pc_graph *g = p->g;
  int planned = graph_is_planned(g);
  if (find_escapes(p) != PC_OK) return PC_ERR_NOMEM;
  p->workspace_size = planned ? g->workspace_size : 0;
  for (int i = 0; i < g->n_inputs; i++) {
    const pc_value *v = g->inputs[i];
    if (!pc_type_is_static(&v->type))
      return pc_fail(g, PC_ERR_UNSUPPORTED, "input \"%s\": symbolic dims are not supported by codegen (use --dim)",
                     v->name ? v->name : "?");
    kir_buf b = {KP_INPUT, i, 0, kir_value_bytes(p->g, v), v->type.dtype, v};
    if (g->state_in_place && i >= g->n_inputs - g->n_state) /* read where its next value is written */
      b.place = KP_OUTPUT, b.index = g->n_outputs - g->n_inputs + i;
    int id = kir_buf_add(p, b);
    if (id < 0) return PC_ERR_NOMEM;
    p->buf_of_value[v->id] = id;
  }
  for (int i = 0; i < g->n_nodes; i++) {
    const pc_node *n = g->nodes[i];
    if (n->dead) continue;
    pc_status s = check_dynamic(p, n);
    if (s != PC_OK) return s;
    s = n->op == PC_OP_constant ? place_const(p, n) : PC_OK;
    for (int k = 0; s == PC_OK && n->op != PC_OP_constant && k < n->n_out; k++) s = place_value(p, n->out[k], planned);
    if (s != PC_OK) return s;
  }
  return PC_OK;
}

/* ---------------------------------------------------------------- kernels */

kir_kernel *kir_kernel_new(kir_program *p, kir_kkind kind) {
  if (p->n_kernels == p->cap_kernels) {
    int cap = p->cap_kernels ? p->cap_kernels * 2 : 64;
    kir_kernel *nk = pc_alloc(p->g, sizeof *nk * (size_t)cap);
    if (!nk) return NULL;
    if (p->n_kernels) memcpy(nk, p->kernels, sizeof *nk * (size_t)p->n_kernels);
    p->kernels = nk;
    p->cap_kernels = cap;
  }
  kir_kernel *k = &p->kernels[p->n_kernels++];
  memset(k, 0, sizeof *k);
  k->kind = kind;
  return k;
}

void kir_kernel_origin(kir_program *p, kir_kernel *k, const pc_node *const *nodes, int n) {
  k->nodes = pc_alloc(p->g, sizeof *k->nodes * (size_t)(n ? n : 1));
  if (!k->nodes) return;
  for (int i = 0; i < n; i++) k->nodes[i] = nodes[i];
  k->n_nodes = n;
}

static void mark_expr_bufs(const kir_expr *e, char *used) {
  if (e->kind == KE_LOAD) used[e->buf] = 1;
  for (int i = 0; i < e->n_args; i++) mark_expr_bufs(e->args[i], used);
}

void kir_mark_kernel_bufs(const kir_kernel *k, char *used) {
  for (int i = 0; k->kind == KK_CALL && i < k->n_args; i++)
    if (k->args[i] >= 0) used[k->args[i]] = 1;
  for (int s = 0; k->kind == KK_LOOP && s < k->n_stores; s++) {
    used[k->stores[s].buf] = 1;
    mark_expr_bufs(k->stores[s].value, used);
  }
}

/* row-major element strides of a type */
void kir_row_strides(const pc_type *t, int64_t *s) {
  int64_t acc = 1;
  for (int d = t->rank - 1; d >= 0; d--) {
    s[d] = acc;
    acc *= t->dims[d];
  }
}

kir_map kir_linearize(const amap *m, const pc_type *t) {
  int64_t s[PC_MAX_RANK];
  kir_row_strides(t, s);
  kir_map r;
  memset(&r, 0, sizeof r);
  for (int d = 0; d < m->rank; d++) {
    r.offset += m->off[d] * s[d];
    for (int k = 0; k < KIR_MAX_LOOPS; k++) r.stride[k] += m->coef[d][k] * s[d];
  }
  return r;
}

/* identity map of a type's dims onto loops first..first+rank-1 */
amap kir_amap_identity(int rank, int first) {
  amap m;
  memset(&m, 0, sizeof m);
  m.rank = rank;
  for (int d = 0; d < rank; d++) m.coef[d][first + d] = 1;
  return m;
}


/* ---------------------------------------------------------------- loop kernels */

static void store_init(kir_store *s, int buf, kir_map map, kir_expr *e) {
  memset(s, 0, sizeof *s);
  s->buf = buf;
  s->map = map;
  s->value = e;
}

/* gives a kernel with no parallel loop a leading one of extent 1 */
void kir_map_drop_loop(kir_map *m, int l) {
  for (int k = l; k + 1 < KIR_MAX_LOOPS; k++) m->stride[k] = m->stride[k + 1];
  m->stride[KIR_MAX_LOOPS - 1] = 0;
}

static void expr_drop_loop(kir_expr *e, int l) {
  if (e->kind == KE_LOAD || e->kind == KE_INDEX) kir_map_drop_loop(&e->map, l);
  for (int i = 0; i < e->n_args; i++) expr_drop_loop(e->args[i], l);
}

/* Loops of extent 1 (batch dims of 1, kept dims) are dropped so that loop 0, the one
 * split across threads, has work; a kernel keeps at least one parallel loop. */
static void kernel_squeeze(kir_kernel *k) {
  for (int l = k->n_loops - 1; l >= 0; l--) {
    int is_arg = 0;
    for (int s = 0; s < k->n_stores; s++) is_arg |= k->stores[s].red >= KR_ARGMAX && k->stores[s].arg_loop == l;
    if (k->extent[l] != 1 || is_arg || (l < k->n_par && k->n_par == 1)) continue;
    for (int j = l; j + 1 < k->n_loops; j++) k->extent[j] = k->extent[j + 1];
    k->n_loops--;
    if (l < k->n_par) k->n_par--;
    for (int s = 0; s < k->n_stores; s++) {
      kir_map_drop_loop(&k->stores[s].map, l);
      expr_drop_loop(k->stores[s].value, l);
      if (k->stores[s].arg_loop > l) k->stores[s].arg_loop--;
    }
  }
}

#define CHAIN_MAX 64

/* the operands of a chain of one associative op, left to right, and the chain's own nodes; a chain
 * has one leaf more than nodes, so at most CHAIN_MAX - 1 nodes keep the leaves within CHAIN_MAX */
static void chain_collect(kir_expr *e, pc_op op, kir_expr **leaf, int *nl, kir_expr **node, int *nn) {
  if (e->kind == KE_PRIM && e->op == op && *nn + 1 < CHAIN_MAX) {
    node[(*nn)++] = e;
    chain_collect(e->args[0], op, leaf, nl, node, nn);
    chain_collect(e->args[1], op, leaf, nl, node, nn);
    return;
  }
  leaf[(*nl)++] = e;
}

/* leaves [lo, hi) as a balanced tree built from the chain's nodes, taken from *next on */
static kir_expr *chain_build(kir_expr **leaf, int lo, int hi, kir_expr **node, int *next) {
  if (hi - lo == 1) return leaf[lo];
  kir_expr *e = node[(*next)++];
  int mid = lo + (hi - lo) / 2;
  e->args[0] = chain_build(leaf, lo, mid, node, next);
  e->args[1] = chain_build(leaf, mid, hi, node, next);
  return e;
}

/* max(max(max(a, b), c), d) (a MaxPool window) as max(max(a, b), max(c, d)): the same value, since a
 * NaN anywhere wins and else the largest does (only which of +0 and -0 a tie returns may differ), in
 * log2 instead of linear dependent steps: a 3x3/2 MaxPool over 64x112x112 0.47 -> 0.31 ms */
static kir_expr *expr_balance(kir_expr *e) {
  if (e->kind == KE_PRIM && (e->op == PC_OP_max || e->op == PC_OP_min)) {
    kir_expr *leaf[CHAIN_MAX], *node[CHAIN_MAX];
    int nl = 0, nn = 0, next = 0;
    chain_collect(e, e->op, leaf, &nl, node, &nn);
    for (int i = 0; i < nl; i++) leaf[i] = expr_balance(leaf[i]);
    return chain_build(leaf, 0, nl, node, &next);
  }
  for (int i = 0; i < e->n_args; i++) e->args[i] = expr_balance(e->args[i]);
  return e;
}

#define SHARED_MAX_NODES 512

static void minmax_nodes(const kir_expr *e, int s, const kir_expr **node, int *store, int *n) {
  if (e->kind == KE_PRIM && (e->op == PC_OP_max || e->op == PC_OP_min) && *n < SHARED_MAX_NODES)
    node[*n] = e, store[(*n)++] = s;
  for (int i = 0; i < e->n_args; i++) minmax_nodes(e->args[i], s, node, store, n);
}

/* shared[s]: a max or min in store s's value equals one in another store's. A MaxPool's backward stores a mask per
 * tap, each reading the window's max over the taps before it: as written those are one chain's prefixes, which the
 * kernel computes once (LLVM merges equal expressions of a loop body); balanced apart, each store's tree is another
 * (ResNet-18's 3x3 pool: 28 maxes an element for 8 masks instead of 8). More nodes than counted: all shared. */
static void stores_sharing_minmax(const kir_kernel *k, char *shared) {
  const kir_expr *node[SHARED_MAX_NODES];
  int store[SHARED_MAX_NODES], n = 0;
  memset(shared, 0, (size_t)k->n_stores);
  if (k->n_stores < 2) return;
  for (int s = 0; s < k->n_stores; s++)
    if (k->stores[s].value) minmax_nodes(k->stores[s].value, s, node, store, &n);
  if (n == SHARED_MAX_NODES) {
    memset(shared, 1, (size_t)k->n_stores);
    return;
  }
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++)
      if (store[j] != store[i] && !(shared[store[i]] && shared[store[j]]) && kir_expr_equal(node[i], node[j]))
        shared[store[i]] = shared[store[j]] = 1;
}

/* gives a kernel with no parallel loop a leading one of extent 1, then squeezes */
static void kernel_normalize(kir_kernel *k) {
  char shared[KIR_MAX_ARGS + 1];
  stores_sharing_minmax(k, shared);
  for (int s = 0; s < k->n_stores; s++)
    if (k->stores[s].value && !shared[s]) k->stores[s].value = expr_balance(k->stores[s].value);
  if (k->n_par == 0) {
    for (int l = k->n_loops; l > 0; l--) k->extent[l] = k->extent[l - 1];
    k->extent[0] = 1;
    k->n_loops++;
    k->n_par = 1;
    /* maps were built against loops shifted by one already (first = 1) */
  }
  kernel_squeeze(k);
}

static pc_status fail_unfusable(kir_program *p, const pc_node *n) {
  return pc_node_fail(p->g, n, PC_ERR_UNSUPPORTED, "%s cannot be expressed as a loop kernel", pc_prim(n->op)->name);
}

static int copy_onto_itself(const kir_program *p, int rank, const int64_t *ext, int dst, const kir_map *dm, int src,
                            const kir_map *sm, pc_dtype dt);

/* A loop kernel over shape's index space with t's stores, from nodes; none when every store copies bytes onto
 * themselves (a reshape the memory plan put over its operand: passes/memplan.c, inplace_ok). */
static pc_status emit_loop_kernel(kir_program *p, const pc_type *shape, const kir_kernel *t,
                                  const pc_node *const *nodes, int n) {
  int moves = 0;
  for (int st = 0; pc_type_is_static(shape) && st < t->n_stores; st++) {
    const kir_store *q = &t->stores[st];
    moves += q->value->kind == KE_LOAD && q->value->dtype == p->bufs[q->buf].dtype &&
             copy_onto_itself(p, shape->rank, shape->dims, q->buf, &q->map, q->value->buf, &q->value->map,
                              q->value->dtype);
  }
  if (moves == t->n_stores) return PC_OK;
  kir_kernel *k = kir_kernel_new(p, KK_LOOP);
  if (!k) return PC_ERR_NOMEM;
  k->n_loops = k->n_par = shape->rank;
  for (int d = 0; d < shape->rank; d++) k->extent[d] = shape->dims[d];
  k->n_stores = t->n_stores;
  memcpy(k->stores, t->stores, sizeof t->stores);
  kernel_normalize(k);
  kir_kernel_origin(p, k, nodes, n);
  return PC_OK;
}

/* out[i] = expr(n)(i) over the output's shape */
pc_status kir_build_pointwise(kir_program *p, const pc_node *n) {
  const pc_value *out = n->out[0];
  amap m = kir_amap_identity(out->type.rank, out->type.rank == 0 ? 1 : 0);
  kir_expr_fn f = kir_expr_rule(n->op);
  kir_expr *e = f ? f(p, n, &m) : NULL;
  if (!e) return p->g->status ? p->g->status : fail_unfusable(p, n);
  kir_kernel t;
  memset(&t, 0, sizeof t);
  t.n_stores = 1;
  store_init(&t.stores[0], p->buf_of_value[out->id], kir_linearize(&m, &out->type), e);
  return emit_loop_kernel(p, &out->type, &t, &n, 1);
}

/* reduce_* and argmax/argmin: output dims are the parallel loops, reduced axes the inner ones */
static pc_status build_reduce(kir_program *p, const pc_node *n) {
  PC_PRIMS_CHECKED(74); /* a combiner per RED prim */
  static const kir_red reds[PC_OP_COUNT] = {
      [PC_OP_reduce_sum] = KR_SUM, [PC_OP_reduce_prod] = KR_PROD, [PC_OP_reduce_max] = KR_MAX,
      [PC_OP_reduce_min] = KR_MIN, [PC_OP_argmax] = KR_ARGMAX,     [PC_OP_argmin] = KR_ARGMIN,
  };
  const pc_value *x = n->in[0], *out = n->out[0];
  int reduced[PC_MAX_RANK] = {0};
  int n_axes = 0;
  const int64_t *axes = pc_attr_ints(n, "axes", &n_axes);
  int64_t axis = pc_attr_int(n, "axis", 0);
  if (!axes) axes = &axis, n_axes = 1;
  for (int i = 0; i < n_axes; i++) reduced[axes[i]] = 1;
  kir_kernel *k = kir_kernel_new(p, KK_LOOP);
  if (!k) return PC_ERR_NOMEM;
  int first = out->type.rank == 0 ? 1 : 0;
  k->n_par = out->type.rank;
  amap m;
  memset(&m, 0, sizeof m);
  m.rank = x->type.rank;
  int par = first, red = first + out->type.rank, arg_loop = 0;
  for (int d = 0; d < x->type.rank; d++) {
    int l = reduced[d] ? red++ : par++;
    if (reduced[d]) arg_loop = l;
    m.coef[d][l] = 1;
    k->extent[l - first] = x->type.dims[d];
  }
  k->n_loops = x->type.rank;
  kir_expr *e = kir_expr_value(p, x, &m);
  if (!e) return p->g->status ? p->g->status : fail_unfusable(p, n);
  amap om = kir_amap_identity(out->type.rank, first);
  k->n_stores = 1;
  kir_store *s = &k->stores[0];
  store_init(s, p->buf_of_value[out->id], kir_linearize(&om, &out->type), e);
  s->red = reds[n->op];
  s->arg_loop = arg_loop;
  s->arg_last = (int)pc_attr_int(n, "last", 0);
  kernel_normalize(k);
  kir_kernel_origin(p, k, &n, 1);
  return PC_OK;
}

/* a plain copy loop kernel: dst[dmap(i)] = src[smap(i)] over extents */
kir_kernel *kir_copy_kernel(kir_program *p, const pc_node *n, int rank, const int64_t *ext, int dst, kir_map dmap,
                               int src, kir_map smap, pc_dtype dt) {
  kir_kernel *k = kir_kernel_new(p, KK_LOOP);
  kir_expr *e = k ? kir_expr_new(p, KE_LOAD, dt) : NULL;
  if (!e) return NULL;
  e->buf = src;
  e->map = smap;
  k->n_loops = k->n_par = rank;
  for (int d = 0; d < rank; d++) k->extent[d] = ext[d];
  k->n_stores = 1;
  store_init(&k->stores[0], dst, dmap, e);
  kernel_normalize(k);
  if (n) kir_kernel_origin(p, k, &n, 1);
  return k;
}

/* maps over loops first.. of a tensor's index space: off + scale*i per dim */
kir_map kir_map_scaled(const pc_type *t, int first, const int64_t *off, const int64_t *scale) {
  amap m;
  memset(&m, 0, sizeof m);
  m.rank = t->rank;
  for (int d = 0; d < t->rank; d++) {
    m.off[d] = off ? off[d] : 0;
    m.coef[d][first + d] = scale ? scale[d] : 1;
  }
  return kir_linearize(&m, t);
}

/* whether the copy dst[dm(i)] = src[sm(i)] over ext reads and writes the same bytes: a part of a
 * concatenate that the memory plan put in place inside it (passes/memplan.c) */
static int copy_onto_itself(const kir_program *p, int rank, const int64_t *ext, int dst, const kir_map *dm, int src,
                            const kir_map *sm, pc_dtype dt) {
  const kir_buf *d = &p->bufs[dst], *s = &p->bufs[src];
  int64_t es = (int64_t)pc_dtype_size(dt);
  if (d->place != KP_WORKSPACE || s->place != KP_WORKSPACE || s->offset + sm->offset * es != d->offset + dm->offset * es)
    return 0;
  for (int l = 0; l < rank; l++)
    if (ext[l] > 1 && dm->stride[l] != sm->stride[l]) return 0;
  return 1;
}

/* A part with no buffer (computed inline where read: an index map or elementwise prim of its group) is computed by
 * a kernel of its own straight into the result, parts of one shape by one kernel: a conv's weight gradient gathers
 * its columns so, a strided slice per kernel tap, which were stored apart and then copied (ResNet-tiny's training
 * step: 250 of its kernels). parts[i] is written at dm[i]. */
static pc_status parts_inline(kir_program *p, const pc_node *n, const pc_value **parts, const kir_map *dm, int np) {
  int dst = p->buf_of_value[n->out[0]->id];
  char *done = pc_alloc(p->g, (size_t)np + 1);
  if (!done) return PC_ERR_NOMEM;
  for (int lead = 0; lead < np; lead++) {
    if (done[lead]) continue;
    const pc_type *t = &parts[lead]->type;
    kir_kernel k;
    memset(&k, 0, sizeof k);
    for (int i = lead; i < np && k.n_stores < KIR_MAX_ARGS; i++) {
      const pc_type *u = &parts[i]->type;
      if (done[i] || u->rank != t->rank || memcmp(u->dims, t->dims, sizeof(int64_t) * (size_t)t->rank)) continue;
      amap m = kir_amap_identity(t->rank, t->rank == 0 ? 1 : 0);
      kir_expr *e = kir_expr_value(p, parts[i], &m);
      if (!e) return p->g->status ? p->g->status : fail_unfusable(p, parts[i]->producer ? parts[i]->producer : n);
      store_init(&k.stores[k.n_stores++], dst, dm[i], e);
      done[i] = 1;
    }
    pc_status s = emit_loop_kernel(p, t, &k, &n, 1);
    if (s != PC_OK) return s;
  }
  return PC_OK;
}

static pc_status build_concatenate(kir_program *p, const pc_node *n) {
  const pc_value *out = n->out[0];
  int axis = (int)pc_attr_int(n, "axis", 0);
  int64_t off[PC_MAX_RANK] = {0};
  int first = out->type.rank == 0 ? 1 : 0, np = 0;
  const pc_value **parts = pc_alloc(p->g, sizeof *parts * (size_t)(n->n_in + 1));
  kir_map *pm = pc_alloc(p->g, sizeof *pm * (size_t)(n->n_in + 1));
  if (!parts || !pm) return PC_ERR_NOMEM;
  for (int i = 0; i < n->n_in; i++) {
    const pc_value *x = n->in[i];
    kir_map dm = kir_map_scaled(&out->type, first, off, NULL), sm = kir_map_scaled(&x->type, first, NULL, NULL);
    int dst = p->buf_of_value[out->id], src = p->buf_of_value[x->id];
    off[axis] += x->type.dims[axis];
    if (src < 0) {
      parts[np] = x, pm[np++] = dm;
      continue;
    }
    if (!first && copy_onto_itself(p, x->type.rank, x->type.dims, dst, &dm, src, &sm, x->type.dtype)) continue;
    if (!kir_copy_kernel(p, n, x->type.rank, x->type.dims, dst, dm, src, sm, x->type.dtype)) return PC_ERR_NOMEM;
  }
  return parts_inline(p, n, parts, pm, np);
}

static int64_t ceil_div(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }

/* out[box + i] = value over the box [off, off + ext) of out (a loop kernel) */
static pc_status fill_box(kir_program *p, const pc_node *n, const int64_t *off, const int64_t *ext) {
  const pc_value *out = n->out[0];
  int r = out->type.rank, first = r == 0 ? 1 : 0;
  for (int d = 0; d < r; d++)
    if (ext[d] <= 0) return PC_OK;
  kir_kernel *k = kir_kernel_new(p, KK_LOOP);
  kir_expr *c = k ? kir_expr_new(p, KE_CONST, out->type.dtype) : NULL;
  if (!c) return PC_ERR_NOMEM;
  c->c = pc_attr_float(n, "value", 0);
  /* ci is read for int dtypes only; a float pad's value may be -inf (MaxPool) or NaN, which converted
   * to int64 is undefined behaviour (UBSan, found by tests/fuzz/fuzz_mutate.c): saturate */
  c->ci = c->c != c->c ? 0 : c->c <= -0x1p63 ? INT64_MIN : c->c >= 0x1p63 ? INT64_MAX : (int64_t)c->c;
  k->n_loops = k->n_par = r;
  for (int d = 0; d < r; d++) k->extent[d] = ext[d];
  k->n_stores = 1;
  store_init(&k->stores[0], p->buf_of_value[out->id], kir_map_scaled(&out->type, first, off, NULL), c);
  kernel_normalize(k);
  kir_kernel_origin(p, k, &n, 1);
  return PC_OK;
}

/* pad: fill with the value, then copy the operand's surviving elements to lo + i*(interior+1). Without
 * interior padding the copy covers a box and only the frame around it is filled (one slab below and one
 * above the box per dim): a MaxPool's -inf pad no longer writes the whole padded tensor twice. */
static pc_status build_pad(kir_program *p, const pc_node *n) {
  const pc_value *x = n->in[0], *out = n->out[0];
  int r = x->type.rank, n0 = 0, n1 = 0, n2 = 0, first = r == 0 ? 1 : 0, strided = 0;
  const int64_t *lo = pc_attr_ints(n, "low", &n0), *hi = pc_attr_ints(n, "high", &n1);
  const int64_t *in = pc_attr_ints(n, "interior", &n2);
  (void)hi;
  int64_t ext[PC_MAX_RANK], soff[PC_MAX_RANK], doff[PC_MAX_RANK], dsc[PC_MAX_RANK];
  for (int d = 0; d < r; d++) {
    int64_t step = (in && d < n2 ? in[d] : 0) + 1, l = lo && d < n0 ? lo[d] : 0;
    int64_t i0 = l < 0 ? ceil_div(-l, step) : 0;
    int64_t i1 = ceil_div(out->type.dims[d] - l, step); /* first i past the end */
    if (i1 > x->type.dims[d]) i1 = x->type.dims[d];
    ext[d] = i1 > i0 ? i1 - i0 : 0;
    soff[d] = i0;
    doff[d] = l + i0 * step;
    dsc[d] = step;
    strided |= step != 1 || ext[d] == 0;
  }
  pc_status st = PC_OK;
  if (strided || r == 0) {
    int64_t zero[PC_MAX_RANK] = {0};
    st = fill_box(p, n, zero, out->type.dims);
  } else {
    for (int d = 0; st == PC_OK && d < r; d++)
      for (int side = 0; st == PC_OK && side < 2; side++) {
        int64_t o[PC_MAX_RANK], e[PC_MAX_RANK];
        for (int k = 0; k < r; k++) {
          o[k] = k < d ? doff[k] : 0;
          e[k] = k < d ? ext[k] : out->type.dims[k];
        }
        o[d] = side ? doff[d] + ext[d] : 0;
        e[d] = side ? out->type.dims[d] - o[d] : doff[d];
        st = fill_box(p, n, o, e);
      }
  }
  if (st != PC_OK) return st;
  if (!kir_copy_kernel(p, n, r, ext, p->buf_of_value[out->id], kir_map_scaled(&out->type, first, doff, dsc),
                   p->buf_of_value[x->id], kir_map_scaled(&x->type, first, soff, NULL), x->type.dtype))
    return PC_ERR_NOMEM;
  return PC_OK;
}


static pc_status build_unsupported(kir_program *p, const pc_node *n) {
  return pc_node_fail(p->g, n, PC_ERR_UNSUPPORTED, "%s has a data-dependent shape, not supported by codegen",
                      pc_prim(n->op)->name);
}

/* a prim's kernel builder: loop kernels here, runtime calls from kir_calls.c's table, pointwise prims
 * (kir_expr.c's inline ones) as one loop nest */
static kir_build_fn build_rule(pc_op op) {
  PC_PRIMS_CHECKED(74); /* a builder per STORED prim but constant, here or in kir_call_builder */
  static const kir_build_fn rules[PC_OP_COUNT] = {
      [PC_OP_reduce_sum] = build_reduce, [PC_OP_reduce_prod] = build_reduce, [PC_OP_reduce_max] = build_reduce,
      [PC_OP_reduce_min] = build_reduce, [PC_OP_argmax] = build_reduce,      [PC_OP_argmin] = build_reduce,
      [PC_OP_concatenate] = build_concatenate, [PC_OP_pad] = build_pad,
  };
  if (rules[op]) return rules[op];
  if (kir_call_builder(op)) return kir_call_builder(op);
  return kir_expr_rule(op) ? kir_build_pointwise : build_unsupported;
}

/* ---------------------------------------------------------------- groups */

static int is_pointwise(const pc_node *n) { return kir_expr_rule(n->op) && n->n_out == 1; }

/* the loop shape of a pointwise root's kernel: a reshape that merges dims, stored from an unmaterialized operand,
 * loops over the operand's shape (row-major order is the same, so the store's linear map is too) */
static const pc_type *root_loops(const kir_program *p, const pc_node *nd, int *via_operand) {
  *via_operand = nd->op == PC_OP_reshape && p->buf_of_value[nd->in[0]->id] < 0;
  return *via_operand ? &nd->in[0]->type : &nd->out[0]->type;
}

/* A group's pending pointwise prims whose results are materialized (roots): one loop kernel per loop shape, with a
 * store per root of that shape. Roots not stored yet are recomputed inline where read; those stored by an earlier
 * shape's kernel are loaded. (All or nothing across shapes had made a training step's max-pool masks, in a group
 * with the conv gradients' gathers, sixteen kernels each recomputing its prefix of the window's maxima.) */
static int try_fused_pointwise(kir_program *p, const pc_node *const *nodes, int n) {
  int *root_buf = pc_alloc(p->g, sizeof(int) * (size_t)n);
  char *done = pc_alloc(p->g, (size_t)n + 1), *took = pc_alloc(p->g, (size_t)n + 1);
  if (!root_buf || !done || !took) return 0;
  for (int i = 0; i < n; i++) {
    if (!is_pointwise(nodes[i])) return 0;
    root_buf[i] = p->buf_of_value[nodes[i]->out[0]->id];
    done[i] = root_buf[i] < 0;
  }
  int before = p->n_kernels, ok = 1;
  for (int lead = 0; ok && lead < n;) {
    if (done[lead]) {
      lead++;
      continue;
    }
    for (int i = 0; i < n; i++)
      if (!done[i]) p->buf_of_value[nodes[i]->out[0]->id] = -1;
    int via;
    const pc_type *shape = root_loops(p, nodes[lead], &via);
    kir_kernel tmp;
    memset(&tmp, 0, sizeof tmp);
    memset(took, 0, (size_t)n);
    for (int i = lead; i < n && tmp.n_stores < KIR_MAX_ARGS; i++) {
      const pc_type *lt = done[i] ? NULL : root_loops(p, nodes[i], &via);
      if (!lt || lt->rank != shape->rank || memcmp(lt->dims, shape->dims, sizeof(int64_t) * (size_t)lt->rank)) continue;
      amap m = kir_amap_identity(lt->rank, lt->rank == 0 ? 1 : 0);
      kir_expr *e = via ? kir_expr_value(p, nodes[i]->in[0], &m) : kir_expr_rule(nodes[i]->op)(p, nodes[i], &m);
      if (!(ok = e != NULL)) break;
      store_init(&tmp.stores[tmp.n_stores++], root_buf[i], kir_linearize(&m, lt), e);
      took[i] = 1;
    }
    for (int i = 0; i < n; i++) { /* the roots stored now are read from memory from here on */
      done[i] |= ok && took[i];
      if (root_buf[i] >= 0) p->buf_of_value[nodes[i]->out[0]->id] = root_buf[i];
    }
    if (ok) ok = emit_loop_kernel(p, shape, &tmp, nodes, n) == PC_OK;
  }
  if (!ok) p->n_kernels = before;
  return ok;
}

void kir_materialize(kir_program *p, const pc_value *v) {
  if (p->buf_of_value[v->id] < 0) p->buf_of_value[v->id] = kir_scratch_buf(p, v->type.dtype, kir_value_bytes(p->g, v), v);
}


/* Emits the pending pointwise prims' materialized results: one loop nest per shape they are computed over, else
 * one per result (inner values recomputed inline), else prim by prim. */
static pc_status flush_pointwise(kir_program *p, const pc_node **pend, int n) {
  int roots = 0;
  for (int i = 0; i < n; i++) roots += p->buf_of_value[pend[i]->out[0]->id] >= 0;
  if (!roots) return PC_OK;
  pc_status saved = p->g->status;
  if (try_fused_pointwise(p, pend, n)) return PC_OK;
  int before = p->n_kernels, ok = 1;
  for (int i = 0; ok && i < n; i++)
    if (p->buf_of_value[pend[i]->out[0]->id] >= 0) ok = kir_build_pointwise(p, pend[i]) == PC_OK;
  if (ok) return PC_OK;
  if (p->g->status != saved) p->g->status = saved; /* retried below, prim by prim */
  p->n_kernels = before;
  for (int i = 0; i < n; i++) kir_materialize(p, pend[i]->out[0]);
  for (int i = 0; i < n; i++) {
    pc_status s = kir_build_pointwise(p, pend[i]);
    if (s != PC_OK) return s;
  }
  return PC_OK;
}

/* A group in topological order: pointwise prims wait in `pend` and are inlined into
 * whatever reads them (a reduction takes them as its prologue); other prims (calls,
 * reductions, pad, concatenate) get their own kernels, their results materialized. */
/* A gather table computed in the group by index remapping only (ONNX Gather's broadcast)
 * is read in place by primc_k_gather_strided even where the plan gave it a buffer. */
static void unmaterialize_gather_tables(kir_program *p, const pc_node *const *nodes, int n) {
  for (int i = 0; i < n; i++) {
    if (nodes[i]->op != PC_OP_gather) continue;
    const pc_value *x = nodes[i]->in[0];
    int inside = 0, gathers = 0;
    for (int j = 0; j < n; j++) {
      inside |= nodes[j] == x->producer;
      gathers += nodes[j]->op == PC_OP_gather && nodes[j]->in[0] == x && nodes[j]->in[1] != x;
    }
    if (!inside || output_index(p->g, x) >= 0 || pc_value_use_count(p->g, x) != gathers) continue;
    int saved = p->buf_of_value[x->id];
    p->buf_of_value[x->id] = -1;
    amap m = kir_amap_identity(x->type.rank, 0);
    kir_expr *e = kir_expr_value(p, x, &m);
    if (!e || e->kind != KE_LOAD) p->buf_of_value[x->id] = saved;
  }
}

static pc_status build_group(kir_program *p, const pc_node *const *nodes, int n) {
  int dots = 0; /* two contractions in one group: only fuse.c's attention rule makes such a group */
  for (int i = 0; i < n; i++) dots += pc_op_fuse_kind(nodes[i]->op) == PC_FUSE_CONTRACT;
  if (dots > 1) return kir_build_attention(p, nodes, n);
  pc_columns cm;
  for (int i = 0; i < n; i++)
    if (pc_columns_grouped(p->g, nodes[i], &cm)) return kir_build_dot_cols(p, &cm, nodes, n);
  const pc_node **pend = pc_alloc(p->g, sizeof *pend * (size_t)n);
  if (!pend) return PC_ERR_NOMEM;
  unmaterialize_gather_tables(p, nodes, n);
  int np = 0;
  for (int i = 0; i < n; i++) {
    const pc_node *nd = nodes[i];
    if (is_pointwise(nd)) {
      pend[np++] = nd;
      continue;
    }
    int red = build_rule(nd->op) == build_reduce, gather = nd->op == PC_OP_gather;
    for (int k = 0; !red && k < nd->n_in; k++) {
      const pc_value *x = nd->in[k];
      /* build_gather decides for its table; a concatenate's part inline in the group is computed into the result */
      int part = nd->op == PC_OP_concatenate && p->buf_of_value[x->id] < 0 && x->producer &&
                 is_pointwise(x->producer) && x->producer->group == nd->group && nd->group >= 0;
      if (!(gather && k == 0) && !part) kir_materialize(p, x);
    }
    for (int k = 0; k < nd->n_out; k++) kir_materialize(p, nd->out[k]);
    pc_status s = flush_pointwise(p, pend, np);
    if (s != PC_OK) return s;
    /* the results just stored are not stored again by a later flush (YOLO's SPP recomputed each pool in the
     * next pool's kernel); the others stay pending, to be inlined or stored once something materializes them */
    int kept = 0;
    for (int j = 0; j < np; j++)
      if (p->buf_of_value[pend[j]->out[0]->id] < 0) pend[kept++] = pend[j];
    np = kept;
    int before = p->n_kernels;
    pc_status saved = p->g->status;
    s = build_rule(nd->op)(p, nd);
    if (s != PC_OK && red) { /* the prologue was not affine: materialize it first */
      p->g->status = saved;
      p->n_kernels = before;
      kir_materialize(p, nd->in[0]);
      if ((s = flush_pointwise(p, pend, np)) == PC_OK) s = build_reduce(p, nd);
    }
    if (s != PC_OK) return s;
  }
  return flush_pointwise(p, pend, np);
}

static pc_status build_program(pc_graph *g, kir_program *p, struct pc_autotune *tune, const kir_conv_pin *pins,
                               int n_pins, int gpu_sm);

pc_status kir_build(pc_graph *g, kir_program *p) { return build_program(g, p, NULL, NULL, 0, 0); }

pc_status kir_build_cuda(pc_graph *g, kir_program *p, int sm) { return build_program(g, p, NULL, NULL, 0, sm); }

pc_status kir_build_tuned(pc_graph *g, kir_program *p, struct pc_autotune *tune, const kir_conv_pin *pins, int n_pins) {
  return build_program(g, p, tune, pins, n_pins, 0);
}

static pc_status build_program(pc_graph *g, kir_program *p, struct pc_autotune *tune, const kir_conv_pin *pins,
                               int n_pins, int gpu_sm) {
  memset(p, 0, sizeof *p);
  p->g = g;
  p->gpu_sm = gpu_sm;
  p->tune = tune;
  p->pins = pins, p->n_pins = n_pins;
  if (g->status) return g->status;
  p->buf_of_value = pc_alloc(g, sizeof(int) * (size_t)(g->n_values + 1));
  p->consts = pc_alloc(g, sizeof *p->consts * (size_t)(g->n_nodes + 1));
  p->repeat_mask = pc_alloc(g, sizeof(int) * (size_t)(g->n_values + 1));
  p->sym_slot = pc_alloc(g, sizeof(int64_t) * (size_t)(g->n_syms + 1));
  if (!p->buf_of_value || !p->consts || !p->repeat_mask || !p->sym_slot) return pc_fail(g, PC_ERR_NOMEM, "out of memory");
  for (int i = 0; i < g->n_values; i++) p->buf_of_value[i] = p->repeat_mask[i] = -1;
  for (int i = 0; i < g->n_syms; i++) p->sym_slot[i] = -1;
  pc_status s = place_all(p);
  const pc_node **grp = pc_alloc(g, sizeof *grp * (size_t)(g->n_nodes + 1));
  if (s == PC_OK && !grp) s = pc_fail(g, PC_ERR_NOMEM, "out of memory");
  for (int i = 0; s == PC_OK && i < g->n_nodes;) {
    const pc_node *n = g->nodes[i];
    if (n->dead || n->op == PC_OP_constant) {
      i++;
      continue;
    }
    int cnt = 0;
    grp[cnt++] = n;
    for (i++; n->group >= 0 && i < g->n_nodes && g->nodes[i]->group == n->group; i++)
      if (!g->nodes[i]->dead && g->nodes[i]->op != PC_OP_constant) grp[cnt++] = g->nodes[i];
    s = build_group(p, grp, cnt);
  }
  if (s == PC_OK) s = kir_copy_outputs(p);
  if (s == PC_OK) place_call_scratch(p);
  if (s == PC_OK) s = kir_rewrites_run(p, KIR_STAGE_BUILD);
  if (s == PC_OK) s = kir_check_state_in_place(p);
  p->workspace_size = kir_align_up(p->workspace_size);
  if (s != PC_OK && !g->status) pc_fail(g, s, "codegen: %s", pc_status_name(s));
  return s;
}
