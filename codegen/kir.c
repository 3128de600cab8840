/* codegen/kir.c: builds kernel IR (loop nests over affine loads) from the fused groups of a prim graph. */
#include "codegen/kir.h"
#include "runtime/primc_rt.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A multi-dim affine map: index of dim d = off[d] + sum_k coef[d][k] * i_k. */
typedef struct amap {
  int rank;
  int64_t off[PC_MAX_RANK];
  int64_t coef[PC_MAX_RANK][KIR_MAX_LOOPS];
} amap;

static const int64_t ALIGN = 64;

static int64_t align_up(int64_t x) { return (x + ALIGN - 1) / ALIGN * ALIGN; }

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
static pc_type bound_type(const pc_graph *g, const pc_type *t) {
  pc_type b = *t;
  for (int d = 0; d < t->rank; d++)
    if (PC_DIM_IS_SYM(t->dims[d]) && g->syms[PC_DIM_SYM_ID(t->dims[d])].hi != INT64_MAX)
      b.dims[d] = g->syms[PC_DIM_SYM_ID(t->dims[d])].hi;
  return b;
}

static int64_t value_bytes(const pc_graph *g, const pc_value *v) {
  pc_type b = bound_type(g, &v->type);
  return pc_type_numel(&b) * (int64_t)pc_dtype_size(v->type.dtype);
}

static int buf_add(kir_program *p, kir_buf b) {
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
static int scratch_buf(kir_program *p, pc_dtype dt, int64_t nbytes, const pc_value *v) {
  kir_buf b = {KP_WORKSPACE, -1, align_up(p->workspace_size), nbytes, dt, v};
  p->workspace_size = b.offset + align_up(nbytes > 0 ? nbytes : 1);
  return buf_add(p, b);
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
  if (!n->data && value_bytes(p->g, v) > 0)
    return pc_node_fail(p->g, n, PC_ERR_UNSUPPORTED, "constant has no data (unbound weight key)");
  kir_buf b = {KP_CONST, p->n_consts, p->weights_size, value_bytes(p->g, v), v->type.dtype, v};
  p->weights_size = align_up(p->weights_size + b.nbytes);
  p->consts[p->n_consts++] = v;
  int id = buf_add(p, b);
  if (id < 0) return PC_ERR_NOMEM;
  p->buf_of_value[v->id] = id;
  return PC_OK;
}

/* one value produced by a node: its storage, from the planner or our own plan */
static pc_status place_value(kir_program *p, const pc_value *v, int planned) {
  kir_buf b = {KP_WORKSPACE, -1, 0, value_bytes(p->g, v), v->type.dtype, v};
  int oi = output_index(p->g, v);
  if (planned) {
    if (v->storage == PC_STORE_FUSED) return PC_OK;
    if (v->storage == PC_STORE_OUTPUT && oi >= 0) {
      b.place = KP_OUTPUT;
      b.index = oi;
    } else if (v->storage == PC_STORE_WORKSPACE) {
      b.offset = v->offset;
    } else {
      int id = scratch_buf(p, v->type.dtype, b.nbytes, v);
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
    int id = scratch_buf(p, v->type.dtype, b.nbytes, v);
    if (id < 0) return PC_ERR_NOMEM;
    p->buf_of_value[v->id] = id;
    return PC_OK;
  }
  int id = buf_add(p, b);
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
    kir_buf b = {KP_INPUT, i, 0, value_bytes(p->g, v), v->type.dtype, v};
    int id = buf_add(p, b);
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

static kir_kernel *kernel_new(kir_program *p, kir_kkind kind) {
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

static void kernel_origin(kir_program *p, kir_kernel *k, const pc_node *const *nodes, int n) {
  k->nodes = pc_alloc(p->g, sizeof *k->nodes * (size_t)(n ? n : 1));
  if (!k->nodes) return;
  for (int i = 0; i < n; i++) k->nodes[i] = nodes[i];
  k->n_nodes = n;
}

/* row-major element strides of a type */
static void row_strides(const pc_type *t, int64_t *s) {
  int64_t acc = 1;
  for (int d = t->rank - 1; d >= 0; d--) {
    s[d] = acc;
    acc *= t->dims[d];
  }
}

static kir_map linearize(const amap *m, const pc_type *t) {
  int64_t s[PC_MAX_RANK];
  row_strides(t, s);
  kir_map r;
  memset(&r, 0, sizeof r);
  for (int d = 0; d < m->rank; d++) {
    r.offset += m->off[d] * s[d];
    for (int k = 0; k < KIR_MAX_LOOPS; k++) r.stride[k] += m->coef[d][k] * s[d];
  }
  return r;
}

/* identity map of a type's dims onto loops first..first+rank-1 */
static amap amap_identity(int rank, int first) {
  amap m;
  memset(&m, 0, sizeof m);
  m.rank = rank;
  for (int d = 0; d < rank; d++) m.coef[d][first + d] = 1;
  return m;
}

/* ---------------------------------------------------------------- expressions */

static kir_expr *expr_value(kir_program *p, const pc_value *v, const amap *m);

/* dims along which a constant's data repeats (a folded broadcast): bit d set when every
 * element equals its predecessor along d; cached per value (-1: not computed yet) */
static int const_repeat_mask(kir_program *p, const pc_value *v) {
  if (p->repeat_mask[v->id] >= 0) return p->repeat_mask[v->id];
  const unsigned char *d = pc_const_data(v);
  int64_t s[PC_MAX_RANK], n = pc_type_numel(&v->type);
  size_t es = pc_dtype_size(v->type.dtype);
  int mask = 0;
  row_strides(&v->type, s);
  for (int dim = 0; d && dim < v->type.rank; dim++) {
    if (v->type.dims[dim] <= 1) continue;
    int same = 1;
    for (int64_t i = 0; same && i < n; i++)
      if ((i / s[dim]) % v->type.dims[dim] != 0) same = !memcmp(d + (size_t)i * es, d + (size_t)(i - s[dim]) * es, es);
    if (same) mask |= 1 << dim;
  }
  p->repeat_mask[v->id] = mask;
  return mask;
}

/* every element equal: its value */
static int scalar_const(kir_program *p, const pc_value *v, double *f, int64_t *i) {
  const void *d = pc_const_data(v);
  if (!d) return 0;
  for (int dim = 0; dim < v->type.rank; dim++)
    if (v->type.dims[dim] > 1 && !(const_repeat_mask(p, v) >> dim & 1)) return 0;
  if (pc_type_numel(&v->type) < 1) return 0;
  switch (v->type.dtype) { /* one read per storage type; c64 stays a load */
  case PC_f16: *f = pc_f16_to_f32(*(const uint16_t *)d); break;
  case PC_bf16: *f = pc_bf16_to_f32(*(const uint16_t *)d); break;
  case PC_f32: *f = *(const float *)d; break;
  case PC_f64: *f = *(const double *)d; break;
  case PC_i8: *i = *(const int8_t *)d; break;
  case PC_i16: *i = *(const int16_t *)d; break;
  case PC_i32: *i = *(const int32_t *)d; break;
  case PC_i64: *i = *(const int64_t *)d; break;
  case PC_u8: case PC_bool: *i = *(const uint8_t *)d; break;
  case PC_u16: *i = *(const uint16_t *)d; break;
  case PC_i4: case PC_i2: *i = *(const int8_t *)d; break;
  case PC_u4: case PC_u2: *i = *(const uint8_t *)d; break;
  case PC_u32: *i = *(const uint32_t *)d; break;
  case PC_u64: *i = (int64_t)*(const uint64_t *)d; break; /* the bits: LLVMConstInt truncates to the width */
  case PC_f8e4m3fn: case PC_f8e4m3fnuz: case PC_f8e5m2: case PC_f8e5m2fnuz: case PC_f4e2m1: case PC_f8e8m0: *f = pc_f8_to_f32(v->type.dtype, *(const uint8_t *)d); break;
  default: return 0;
  }
  return 1;
}

/* v read at m, m indexing v's dims, or (flat) the row-major elements of v as one dim */
static kir_expr *load_expr_as(kir_program *p, const pc_value *v, const amap *m, int flat) {
  kir_expr *e;
  double f = 0;
  int64_t i = 0;
  if (scalar_const(p, v, &f, &i)) {
    e = kir_expr_new(p, KE_CONST, v->type.dtype);
    if (e) e->c = f, e->ci = i;
    return e;
  }
  e = kir_expr_new(p, KE_LOAD, v->type.dtype);
  if (!e) return NULL;
  e->buf = p->buf_of_value[v->id];
  amap r = *m;
  int rep = pc_const_data(v) && !flat ? const_repeat_mask(p, v) : 0;
  for (int dim = 0; dim < r.rank; dim++) /* read the first slice of a folded broadcast */
    if (rep >> dim & 1) {
      r.off[dim] = 0;
      memset(r.coef[dim], 0, sizeof r.coef[dim]);
    }
  pc_type as = flat ? pc_type_make(v->type.dtype, 1, (int64_t[]){pc_type_numel(&v->type)}) : v->type;
  e->map = linearize(&r, &as);
  return e;
}

static kir_expr *load_expr(kir_program *p, const pc_value *v, const amap *m) { return load_expr_as(p, v, m, 0); }

static kir_expr *expr_elementwise(kir_program *p, const pc_node *n, const amap *m) {
  kir_expr *e = kir_expr_new(p, KE_PRIM, n->out[0]->type.dtype);
  if (!e) return NULL;
  e->op = n->op;
  e->n_args = n->n_in;
  for (int i = 0; i < n->n_in; i++)
    if (!(e->args[i] = expr_value(p, n->in[i], m))) return NULL;
  return e;
}

static kir_expr *expr_convert(kir_program *p, const pc_node *n, const amap *m) {
  kir_expr *e = kir_expr_new(p, KE_CONVERT, n->out[0]->type.dtype);
  if (!e) return NULL;
  e->n_args = 1;
  e->args[0] = expr_value(p, n->in[0], m);
  return e->args[0] ? e : NULL;
}

static kir_expr *expr_broadcast(kir_program *p, const pc_node *n, const amap *m) {
  int len = 0;
  const int64_t *dims = pc_attr_ints(n, "dims", &len);
  const pc_type *t = &n->in[0]->type;
  amap o;
  memset(&o, 0, sizeof o);
  o.rank = t->rank;
  for (int i = 0; i < t->rank && i < len; i++) {
    if (t->dims[i] == 1) continue; /* stride 0: the broadcast */
    o.off[i] = m->off[dims[i]];
    memcpy(o.coef[i], m->coef[dims[i]], sizeof o.coef[i]);
  }
  return expr_value(p, n->in[0], &o);
}

static kir_expr *expr_transpose(kir_program *p, const pc_node *n, const amap *m) {
  int len = 0;
  const int64_t *perm = pc_attr_ints(n, "perm", &len);
  amap o;
  memset(&o, 0, sizeof o);
  o.rank = n->in[0]->type.rank;
  for (int i = 0; i < len; i++) {
    o.off[perm[i]] = m->off[i];
    memcpy(o.coef[perm[i]], m->coef[i], sizeof o.coef[i]);
  }
  return expr_value(p, n->in[0], &o);
}

static kir_expr *expr_slice(kir_program *p, const pc_node *n, const amap *m) {
  int ls = 0, lt = 0;
  const int64_t *start = pc_attr_ints(n, "start", &ls);
  const int64_t *stride = pc_attr_ints(n, "stride", &lt);
  amap o = *m;
  for (int d = 0; d < o.rank; d++) {
    int64_t st = stride && d < lt ? stride[d] : 1;
    o.off[d] = (start && d < ls ? start[d] : 0) + st * m->off[d];
    for (int k = 0; k < KIR_MAX_LOOPS; k++) o.coef[d][k] = st * m->coef[d][k];
  }
  return expr_value(p, n->in[0], &o);
}

static kir_expr *expr_rev(kir_program *p, const pc_node *n, const amap *m) {
  int len = 0;
  const int64_t *dims = pc_attr_ints(n, "dims", &len);
  amap o = *m;
  for (int i = 0; i < len; i++) {
    int d = (int)dims[i];
    o.off[d] = n->in[0]->type.dims[d] - 1 - m->off[d];
    for (int k = 0; k < KIR_MAX_LOOPS; k++) o.coef[d][k] = -m->coef[d][k];
  }
  return expr_value(p, n->in[0], &o);
}

/* A reshape that only splits operand dims (each operand dim a run of result dims; 1s come and go)
 * is an affine map of the result's indices: operand index = sum over the run of index * inner size.
 * 0 when some result dim merges operand dims (div/mod: not affine). */
static int reshape_split_map(const pc_type *a, const pc_type *b, const amap *m, amap *o) {
  memset(o, 0, sizeof *o);
  o->rank = a->rank;
  int j = 0;
  for (int i = 0; i < a->rank; i++) {
    if (a->dims[i] == 1) continue; /* index 0 */
    while (j < b->rank && b->dims[j] == 1) j++;
    int start = j;
    int64_t prod = 1;
    while (j < b->rank && prod < a->dims[i]) prod *= b->dims[j++];
    if (prod != a->dims[i]) return 0;
    int64_t inner = 1;
    for (int r = j - 1; r >= start; r--) {
      o->off[i] += m->off[r] * inner;
      for (int k = 0; k < KIR_MAX_LOOPS; k++) o->coef[i][k] += m->coef[r][k] * inner;
      inner *= b->dims[r];
    }
  }
  return 1;
}

/* reshape keeps the row-major order: a split composes with the operand's own map; anything else
 * is affine only through a materialized operand */
static kir_expr *expr_reshape(kir_program *p, const pc_node *n, const amap *m) {
  const pc_value *x = n->in[0];
  amap split;
  if (p->buf_of_value[x->id] < 0)
    return reshape_split_map(&x->type, &n->out[0]->type, m, &split) ? expr_value(p, x, &split) : NULL;
  amap lin;
  memset(&lin, 0, sizeof lin);
  lin.rank = 1;
  kir_map l = linearize(m, &n->out[0]->type);
  lin.off[0] = l.offset;
  memcpy(lin.coef[0], l.stride, sizeof l.stride);
  return load_expr_as(p, x, &lin, 1);
}

static kir_expr *expr_iota(kir_program *p, const pc_node *n, const amap *m) {
  int axis = (int)pc_attr_int(n, "axis", 0);
  kir_expr *e = kir_expr_new(p, KE_INDEX, n->out[0]->type.dtype);
  if (!e) return NULL;
  e->map.offset = m->off[axis];
  memcpy(e->map.stride, m->coef[axis], sizeof e->map.stride);
  return e;
}

typedef kir_expr *(*expr_fn)(kir_program *p, const pc_node *n, const amap *m);

/* the prims of prims.def's inline column: inlinable into any loop kernel; NULL for the others */
static expr_fn expr_rule(pc_op op) {
  PC_PRIMS_CHECKED(74); /* a rule per INLINE prim that is not elementwise */
  static const expr_fn rules[PC_OP_COUNT] = {
      [PC_OP_convert_element_type] = expr_convert, [PC_OP_broadcast_in_dim] = expr_broadcast,
      [PC_OP_transpose] = expr_transpose,           [PC_OP_slice] = expr_slice,
      [PC_OP_rev] = expr_rev,                       [PC_OP_reshape] = expr_reshape,
      [PC_OP_iota] = expr_iota,
  };
  if (!pc_op_is_inline(op)) return NULL;
  return pc_op_is_elementwise(op) ? expr_elementwise : rules[op];
}

static kir_expr *expr_value(kir_program *p, const pc_value *v, const amap *m) {
  if (p->buf_of_value[v->id] >= 0) return load_expr(p, v, m);
  expr_fn f = v->producer ? expr_rule(v->producer->op) : NULL;
  return f ? f(p, v->producer, m) : NULL;
}

/* ---------------------------------------------------------------- loop kernels */

static void store_init(kir_store *s, int buf, kir_map map, kir_expr *e) {
  memset(s, 0, sizeof *s);
  s->buf = buf;
  s->map = map;
  s->value = e;
}

/* gives a kernel with no parallel loop a leading one of extent 1 */
static void map_drop_loop(kir_map *m, int l) {
  for (int k = l; k + 1 < KIR_MAX_LOOPS; k++) m->stride[k] = m->stride[k + 1];
  m->stride[KIR_MAX_LOOPS - 1] = 0;
}

static void expr_drop_loop(kir_expr *e, int l) {
  if (e->kind == KE_LOAD || e->kind == KE_INDEX) map_drop_loop(&e->map, l);
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
      map_drop_loop(&k->stores[s].map, l);
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

/* gives a kernel with no parallel loop a leading one of extent 1, then squeezes */
static void kernel_normalize(kir_kernel *k) {
  for (int s = 0; s < k->n_stores; s++)
    if (k->stores[s].value) k->stores[s].value = expr_balance(k->stores[s].value);
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

/* out[i] = expr(n)(i) over the output's shape */
static pc_status build_pointwise(kir_program *p, const pc_node *n) {
  const pc_value *out = n->out[0];
  kir_kernel *k = kernel_new(p, KK_LOOP);
  if (!k) return PC_ERR_NOMEM;
  int first = out->type.rank == 0 ? 1 : 0;
  k->n_loops = out->type.rank;
  for (int d = 0; d < out->type.rank; d++) k->extent[d] = out->type.dims[d];
  k->n_par = out->type.rank;
  amap m = amap_identity(out->type.rank, first);
  expr_fn f = expr_rule(n->op);
  kir_expr *e = f ? f(p, n, &m) : NULL;
  if (!e) return p->g->status ? p->g->status : fail_unfusable(p, n);
  k->n_stores = 1;
  store_init(&k->stores[0], p->buf_of_value[out->id], linearize(&m, &out->type), e);
  kernel_normalize(k);
  kernel_origin(p, k, &n, 1);
  return PC_OK;
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
  kir_kernel *k = kernel_new(p, KK_LOOP);
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
  kir_expr *e = expr_value(p, x, &m);
  if (!e) return p->g->status ? p->g->status : fail_unfusable(p, n);
  amap om = amap_identity(out->type.rank, first);
  k->n_stores = 1;
  kir_store *s = &k->stores[0];
  store_init(s, p->buf_of_value[out->id], linearize(&om, &out->type), e);
  s->red = reds[n->op];
  s->arg_loop = arg_loop;
  s->arg_last = (int)pc_attr_int(n, "last", 0);
  kernel_normalize(k);
  kernel_origin(p, k, &n, 1);
  return PC_OK;
}

/* a plain copy loop kernel: dst[dmap(i)] = src[smap(i)] over extents */
static kir_kernel *copy_kernel(kir_program *p, const pc_node *n, int rank, const int64_t *ext, int dst, kir_map dmap,
                               int src, kir_map smap, pc_dtype dt) {
  kir_kernel *k = kernel_new(p, KK_LOOP);
  kir_expr *e = k ? kir_expr_new(p, KE_LOAD, dt) : NULL;
  if (!e) return NULL;
  e->buf = src;
  e->map = smap;
  k->n_loops = k->n_par = rank;
  for (int d = 0; d < rank; d++) k->extent[d] = ext[d];
  k->n_stores = 1;
  store_init(&k->stores[0], dst, dmap, e);
  kernel_normalize(k);
  if (n) kernel_origin(p, k, &n, 1);
  return k;
}

/* maps over loops first.. of a tensor's index space: off + scale*i per dim */
static kir_map map_scaled(const pc_type *t, int first, const int64_t *off, const int64_t *scale) {
  amap m;
  memset(&m, 0, sizeof m);
  m.rank = t->rank;
  for (int d = 0; d < t->rank; d++) {
    m.off[d] = off ? off[d] : 0;
    m.coef[d][first + d] = scale ? scale[d] : 1;
  }
  return linearize(&m, t);
}

static pc_status build_concatenate(kir_program *p, const pc_node *n) {
  const pc_value *out = n->out[0];
  int axis = (int)pc_attr_int(n, "axis", 0);
  int64_t off[PC_MAX_RANK] = {0};
  int first = out->type.rank == 0 ? 1 : 0;
  for (int i = 0; i < n->n_in; i++) {
    const pc_value *x = n->in[i];
    kir_map dm = map_scaled(&out->type, first, off, NULL), sm = map_scaled(&x->type, first, NULL, NULL);
    if (!copy_kernel(p, n, x->type.rank, x->type.dims, p->buf_of_value[out->id], dm, p->buf_of_value[x->id], sm,
                     x->type.dtype))
      return PC_ERR_NOMEM;
    off[axis] += x->type.dims[axis];
  }
  return PC_OK;
}

static int64_t ceil_div(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }

/* out[box + i] = value over the box [off, off + ext) of out (a loop kernel) */
static pc_status fill_box(kir_program *p, const pc_node *n, const int64_t *off, const int64_t *ext) {
  const pc_value *out = n->out[0];
  int r = out->type.rank, first = r == 0 ? 1 : 0;
  for (int d = 0; d < r; d++)
    if (ext[d] <= 0) return PC_OK;
  kir_kernel *k = kernel_new(p, KK_LOOP);
  kir_expr *c = k ? kir_expr_new(p, KE_CONST, out->type.dtype) : NULL;
  if (!c) return PC_ERR_NOMEM;
  c->c = pc_attr_float(n, "value", 0);
  /* ci is read for int dtypes only; a float pad's value may be -inf (MaxPool) or NaN, which converted
   * to int64 is undefined behaviour (UBSan, found by tests/fuzz/fuzz_mutate.c): saturate */
  c->ci = c->c != c->c ? 0 : c->c <= -0x1p63 ? INT64_MIN : c->c >= 0x1p63 ? INT64_MAX : (int64_t)c->c;
  k->n_loops = k->n_par = r;
  for (int d = 0; d < r; d++) k->extent[d] = ext[d];
  k->n_stores = 1;
  store_init(&k->stores[0], p->buf_of_value[out->id], map_scaled(&out->type, first, off, NULL), c);
  kernel_normalize(k);
  kernel_origin(p, k, &n, 1);
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
  if (!copy_kernel(p, n, r, ext, p->buf_of_value[out->id], map_scaled(&out->type, first, doff, dsc),
                   p->buf_of_value[x->id], map_scaled(&x->type, first, soff, NULL), x->type.dtype))
    return PC_ERR_NOMEM;
  return PC_OK;
}

/* ---------------------------------------------------------------- runtime-call kernels */

static const kir_call_row call_rows[KC_COUNT] = {
#define KIR_CALL(name, n_params, epi, params, args) \
  [KC_##name] = {#name, "primc_k_" #name, (epi) ? "primc_k_" #name "_epi" : NULL, n_params, params, args},
#include "codegen/calls.def"
#undef KIR_CALL
};

const kir_call_row *kir_call_info(kir_call c) { return &call_rows[c]; }

const char *kir_call_name(kir_call c) { return call_rows[c].name; }

/* a call kernel with its row's params (n_params of them where the row's count varies); NULL with
 * g's status set when out of memory or when n_params disagrees with the row */
static kir_kernel *call_kernel(kir_program *p, const pc_node *n, kir_call call, int n_params) {
  if (call_rows[call].n_params >= 0 && n_params != call_rows[call].n_params) {
    pc_fail(p->g, PC_ERR_INTERNAL, "codegen: a %s call built with %d params, calls.def says %d", call_rows[call].name,
            n_params, call_rows[call].n_params);
    return NULL;
  }
  kir_kernel *k = kernel_new(p, KK_CALL);
  if (!k) return NULL;
  k->call = call;
  k->params = pc_alloc(p->g, sizeof(int64_t) * (size_t)(n_params ? n_params : 1));
  k->n_params = n_params;
  if (!k->params) return NULL;
  if (n) kernel_origin(p, k, &n, 1);
  return k;
}

static void call_arg(kir_kernel *k, int buf) { k->args[k->n_args++] = buf; }

/* shape params: rank then dims */
static int64_t *put_shape(int64_t *q, const pc_type *t) {
  *q++ = t->rank;
  for (int d = 0; d < PC_MAX_RANK; d++) *q++ = d < t->rank ? t->dims[d] : 1;
  return q;
}

/* an operand collapsed to [B, R, C] with element strides, or a transposed copy of it */
typedef struct mat3 {
  int64_t B, R, C, sb, sr, sc;
} mat3;

/* collapses the axes list (in the given order) to one extent and stride; 0 when not expressible */
static int collapse(const pc_type *t, const int64_t *axes, int n, int64_t *ext, int64_t *stride) {
  int64_t s[PC_MAX_RANK], prev = -1, e = 1, st = 0;
  row_strides(t, s);
  for (int i = 0; i < n; i++) {
    int64_t a = axes[i];
    if (t->dims[a] == 1) continue;
    if (prev >= 0 && s[prev] != s[a] * t->dims[a]) return 0;
    prev = a;
    e *= t->dims[a];
    st = s[a];
  }
  *ext = e;
  *stride = e == 1 ? 0 : st;
  return 1;
}

/* operand x seen as [batch axes, row axes, col axes]; copies it to scratch when strides do not collapse */
static int operand_mat(kir_program *p, const pc_node *n, const pc_value *x, const int64_t *bax, int nb,
                       const int64_t *rax, int nr, const int64_t *cax, int nc, mat3 *m) {
  int buf = p->buf_of_value[x->id];
  if (collapse(&x->type, bax, nb, &m->B, &m->sb) && collapse(&x->type, rax, nr, &m->R, &m->sr) &&
      collapse(&x->type, cax, nc, &m->C, &m->sc) && (m->sc <= 1 || m->sr <= 1))
    return buf;
  int64_t perm[PC_MAX_RANK], ext[PC_MAX_RANK];
  int r = 0;
  for (int i = 0; i < nb; i++) perm[r++] = bax[i];
  for (int i = 0; i < nr; i++) perm[r++] = rax[i];
  for (int i = 0; i < nc; i++) perm[r++] = cax[i];
  amap src;
  memset(&src, 0, sizeof src);
  src.rank = x->type.rank;
  for (int i = 0; i < r; i++) {
    ext[i] = x->type.dims[perm[i]];
    src.coef[perm[i]][i + (r == 0)] = 1;
  }
  pc_type pt = pc_type_make(x->type.dtype, r, ext);
  int dst = scratch_buf(p, x->type.dtype, value_bytes(p->g, x), NULL);
  if (dst < 0 || !copy_kernel(p, n, r, ext, dst, map_scaled(&pt, r == 0, NULL, NULL), buf, linearize(&src, &x->type),
                              x->type.dtype))
    return -1;
  collapse(&pt, (int64_t[]){0, 1, 2, 3, 4, 5, 6, 7}, nb, &m->B, &m->sb);
  collapse(&pt, (int64_t[]){0, 1, 2, 3, 4, 5, 6, 7} + nb, nr, &m->R, &m->sr);
  collapse(&pt, (int64_t[]){0, 1, 2, 3, 4, 5, 6, 7} + nb + nr, nc, &m->C, &m->sc);
  return dst;
}

static int free_axes(const pc_type *t, const int64_t *a, int na, const int64_t *b, int nb, int64_t *out) {
  int used[PC_MAX_RANK] = {0}, n = 0;
  for (int i = 0; i < na; i++) used[a[i]] = 1;
  for (int i = 0; i < nb; i++) used[b[i]] = 1;
  for (int d = 0; d < t->rank; d++)
    if (!used[d]) out[n++] = d;
  return n;
}

/* dot_general -> primc_k_dot: [dtype, B, M, N, K, a_sb, a_sm, a_sk, b_sb, b_sk, b_sn], out contiguous [B,M,N] */
static pc_status build_dot(kir_program *p, const pc_node *n) {
  int nlc = 0, nrc = 0, nlb = 0, nrb = 0;
  const int64_t *lc = pc_attr_ints(n, "lhs_contract", &nlc), *rc = pc_attr_ints(n, "rhs_contract", &nrc);
  const int64_t *lb = pc_attr_ints(n, "lhs_batch", &nlb), *rb = pc_attr_ints(n, "rhs_batch", &nrb);
  const pc_value *a = n->in[0], *b = n->in[1];
  int64_t lf[PC_MAX_RANK], rf[PC_MAX_RANK];
  int nlf = free_axes(&a->type, lc, nlc, lb, nlb, lf), nrf = free_axes(&b->type, rc, nrc, rb, nrb, rf);
  mat3 ma, mb;
  int ba = operand_mat(p, n, a, lb, nlb, lf, nlf, lc, nlc, &ma);
  int bb = operand_mat(p, n, b, rb, nrb, rc, nrc, rf, nrf, &mb);
  if (ba < 0 || bb < 0) return PC_ERR_NOMEM;
  kir_kernel *k = call_kernel(p, n, KC_dot, 11);
  if (!k) return PC_ERR_NOMEM;
  int64_t prm[11] = {a->type.dtype, ma.B, ma.R, mb.C, ma.C, ma.sb, ma.sr, ma.sc, mb.sb, mb.sr, mb.sc};
  memcpy(k->params, prm, sizeof prm);
  call_arg(k, p->buf_of_value[n->out[0]->id]);
  call_arg(k, ba);
  call_arg(k, bb);
  return PC_OK;
}

#define CONV_EPI_ROW (CONV_EPI_WORDS - 1) /* the planned row + 1, among the epilogue words */

/* A 2-D f32 conv call's row (runtime/conv/plan.c): for plain weights, or for constant weights packed as
 * the plan wants (kir_pack_weights); PRIMC_CONV_ROW=NAME in the environment forces a row where it fits. */
static int conv_plan(const primc_conv2d *c, int packable, primc_conv_plan *plan) {
  primc_conv_plan_opts o = {.packable = packable, .layout = PRIMC_CONV_W_PLAIN, .tile_mr = packable ? primc_sgemm_mr() : 0,
                            .has_scratch = 1, .force = getenv("PRIMC_CONV_ROW")};
  return primc_conv_plan_make(c, &o, plan) == PRIMC_OK;
}

/* conv -> primc_k_conv: [dtype, x shape(9), w shape(9), out shape(9), groups, stride, pad_lo, dilation,
 * lhs_dilation (8 each), fused epilogue (CONV_EPI_WORDS, zero until fuse_conv_epilogues fills it)] */
static pc_status build_conv(kir_program *p, const pc_node *n) {
  kir_kernel *k = call_kernel(p, n, KC_conv, CONV_EPI_AT + CONV_EPI_WORDS);
  if (!k) return PC_ERR_NOMEM;
  int64_t *q = k->params;
  *q++ = n->in[0]->type.dtype;
  q = put_shape(q, &n->in[0]->type);
  q = put_shape(q, &n->in[1]->type);
  q = put_shape(q, &n->out[0]->type);
  *q++ = pc_attr_int(n, "groups", 1);
  static const char *const lists[4] = {"stride", "pad_lo", "dilation", "lhs_dilation"};
  static const int64_t dflt[4] = {1, 0, 1, 1};
  for (int l = 0; l < 4; l++) {
    int len = 0;
    const int64_t *v = pc_attr_ints(n, lists[l], &len);
    for (int i = 0; i < 8; i++) *q++ = v && i < len ? v[i] : dflt[l];
  }
  memset(q, 0, sizeof *q * CONV_EPI_WORDS);
  call_arg(k, p->buf_of_value[n->out[0]->id]);
  call_arg(k, p->buf_of_value[n->in[0]->id]);
  call_arg(k, p->buf_of_value[n->in[1]->id]);
  /* scratch for the f32 GEMM paths: im2col, C/groups * prod(kernel) * prod(out spatial) floats, or what
   * the 2-D runtime conv asks for (a padded copy of the input for stride-1 convs) */
  const pc_type *w = &n->in[1]->type, *o = &n->out[0]->type;
  int64_t cols = w->dims[1];
  for (int d = 2; d < w->rank; d++) cols *= w->dims[d] * o->dims[d];
  primc_conv2d c2;
  primc_conv_plan plain, packed;
  if (primc_conv2d_of_params(k->params, &c2) && conv_plan(&c2, 0, &plain)) {
    /* the row for plain weights until kir_pack_weights packs them for its own plan: room for either */
    k->params[CONV_EPI_AT + CONV_EPI_ROW] = plain.row + 1;
    int64_t need = primc_conv_plan_scratch_floats(&c2, &plain);
    if (conv_plan(&c2, 1, &packed) && primc_conv_plan_scratch_floats(&c2, &packed) > need)
      need = primc_conv_plan_scratch_floats(&c2, &packed);
    if (need > cols) cols = need;
  }
  call_arg(k, scratch_buf(p, PC_f32, cols * 4, NULL));
  return PC_OK;
}

/* generic runtime call: [dtype, in shape, out shape, attrs...]; outputs then inputs as args */
static pc_status build_generic_call(kir_program *p, const pc_node *n, kir_call call, const int64_t *extra, int n_extra) {
  int np = 1 + 9 * (n->n_in + n->n_out) + n_extra;
  kir_kernel *k = call_kernel(p, n, call, np);
  if (!k) return p->g->status ? p->g->status : PC_ERR_NOMEM;
  int64_t *q = k->params;
  *q++ = n->n_in ? n->in[0]->type.dtype : n->out[0]->type.dtype;
  for (int i = 0; i < n->n_in; i++) q = put_shape(q, &n->in[i]->type);
  for (int i = 0; i < n->n_out; i++) q = put_shape(q, &n->out[i]->type);
  for (int i = 0; i < n_extra; i++) *q++ = extra[i];
  for (int i = 0; i < n->n_out; i++) call_arg(k, p->buf_of_value[n->out[i]->id]);
  for (int i = 0; i < n->n_in; i++) call_arg(k, p->buf_of_value[n->in[i]->id]);
  return PC_OK;
}

static int64_t scatter_mode(const char *s) {
  static const char *const modes[] = {"none", "add", "mul", "max", "min"};
  for (int i = 0; i < 5; i++)
    if (!strcmp(s, modes[i])) return i;
  return -1;
}

static pc_status build_pointwise(kir_program *p, const pc_node *n);
static void materialize(kir_program *p, const pc_value *v);

/* gather; when its table is an unmaterialized pure index remapping of a buffer (the
 * broadcast ONNX Gather decomposes into), primc_k_gather_strided reads that buffer
 * through [offset, strides] appended to the params instead of a materialized copy */
static pc_status build_gather(kir_program *p, const pc_node *n) {
  const pc_value *x = n->in[0];
  int64_t e[2 + 1 + PC_MAX_RANK] = {pc_attr_int(n, "axis", 0), n->in[1]->type.dtype};
  if (p->buf_of_value[x->id] >= 0) return build_generic_call(p, n, KC_gather, e, 2);
  amap m = amap_identity(x->type.rank, 0);
  kir_expr *ld = expr_value(p, x, &m);
  if (!ld || ld->kind != KE_LOAD) { /* computed: materialize it first */
    materialize(p, x);
    pc_status s = x->producer ? build_pointwise(p, x->producer) : PC_ERR_INTERNAL;
    return s != PC_OK ? s : build_generic_call(p, n, KC_gather, e, 2);
  }
  e[2] = ld->map.offset;
  for (int d = 0; d < PC_MAX_RANK; d++) e[3 + d] = d < x->type.rank ? ld->map.stride[d] : 0;
  pc_status s = build_generic_call(p, n, KC_gather_strided, e, 2 + 1 + PC_MAX_RANK);
  if (s == PC_OK) p->kernels[p->n_kernels - 1].args[1] = ld->buf; /* the underlying buffer */
  return s;
}

static pc_status build_scatter(kir_program *p, const pc_node *n) {
  int64_t e[3] = {pc_attr_int(n, "axis", 0), n->in[1]->type.dtype, scatter_mode(pc_attr_str(n, "reduce", "none"))};
  if (e[2] < 0) return pc_node_fail(p->g, n, PC_ERR_ATTR, "unknown scatter reduce");
  return build_generic_call(p, n, KC_scatter, e, 3);
}

static pc_status build_cumsum(kir_program *p, const pc_node *n) {
  int64_t e[3] = {pc_attr_int(n, "axis", 0), pc_attr_int(n, "exclusive", 0), pc_attr_int(n, "reverse", 0)};
  return build_generic_call(p, n, KC_cumsum, e, 3);
}

/* sort and topk share primc_k_sort; its permutation scratch (2 * axis length i64) is in the workspace */
static pc_status sort_call(kir_program *p, const pc_node *n, const int64_t *e) {
  pc_status s = build_generic_call(p, n, KC_sort, e, 3);
  const pc_type *t = &n->in[0]->type;
  int64_t axis = e[0] < 0 ? e[0] + t->rank : e[0];
  int64_t len = t->rank && axis >= 0 && axis < t->rank ? t->dims[axis] : 1;
  if (s == PC_OK) call_arg(&p->kernels[p->n_kernels - 1], scratch_buf(p, PC_i64, 16 * (len + 1), NULL));
  return s;
}

static pc_status build_sort(kir_program *p, const pc_node *n) {
  int64_t e[3] = {pc_attr_int(n, "axis", -1), pc_attr_int(n, "descending", 0), -1};
  return sort_call(p, n, e);
}

static pc_status build_topk(kir_program *p, const pc_node *n) {
  int64_t e[3] = {pc_attr_int(n, "axis", -1), pc_attr_int(n, "largest", 1), pc_attr_int(n, "k", 1)};
  return sort_call(p, n, e);
}

static pc_status build_bitcast(kir_program *p, const pc_node *n) {
  return build_generic_call(p, n, KC_copy, NULL, 0);
}

static pc_status build_random(kir_program *p, const pc_node *n) {
  const char *dist = pc_attr_str(n, "dist", "uniform");
  double a = pc_attr_float(n, "a", 0), b = pc_attr_float(n, "b", 1);
  int64_t e[4] = {!strcmp(dist, "normal"), pc_attr_int(n, "seed", 0), 0, 0};
  memcpy(&e[2], &a, 8);
  memcpy(&e[3], &b, 8);
  return build_generic_call(p, n, KC_random, e, 4);
}

static pc_status build_fft(kir_program *p, const pc_node *n) {
  static const char *const types[] = {"fft", "ifft", "rfft", "irfft"};
  const char *t = pc_attr_str(n, "type", "fft");
  int64_t e[2] = {-1, pc_attr_int(n, "length", 0)};
  for (int i = 0; i < 4; i++)
    if (!strcmp(t, types[i])) e[0] = i;
  if (e[0] < 0) return pc_node_fail(p->g, n, PC_ERR_ATTR, "unknown fft type \"%s\"", t);
  pc_status s = build_generic_call(p, n, KC_fft, e, 2);
  const pc_type *a = &n->in[0]->type, *b = &n->out[0]->type;
  int64_t w = a->dims[a->rank - 1] > b->dims[b->rank - 1] ? a->dims[a->rank - 1] : b->dims[b->rank - 1];
  if (w < e[1]) w = e[1];
  if (s == PC_OK) call_arg(&p->kernels[p->n_kernels - 1], scratch_buf(p, PC_f64, 32 * (w + 1), NULL));
  return s;
}

/* nonzero -> primc_k_nonzero (out, x, count): check_dynamic let it through as a graph output only;
 * the count goes to an i64 in the workspace that NAME_output_dims reads after the run */
static pc_status build_nonzero(kir_program *p, const pc_node *n) {
  kir_kernel *k = call_kernel(p, n, KC_nonzero, 1 + 9);
  if (!k) return PC_ERR_NOMEM;
  k->params[0] = n->in[0]->type.dtype;
  put_shape(k->params + 1, &n->in[0]->type);
  int slot = scratch_buf(p, PC_i64, 8, NULL);
  if (slot < 0) return PC_ERR_NOMEM;
  p->sym_slot[PC_DIM_SYM_ID(n->out[0]->type.dims[1])] = p->bufs[slot].offset;
  call_arg(k, p->buf_of_value[n->out[0]->id]);
  call_arg(k, p->buf_of_value[n->in[0]->id]);
  call_arg(k, slot);
  return PC_OK;
}

static pc_status build_unsupported(kir_program *p, const pc_node *n) {
  return pc_node_fail(p->g, n, PC_ERR_UNSUPPORTED, "%s has a data-dependent shape, not supported by codegen",
                      pc_prim(n->op)->name);
}

typedef pc_status (*build_fn)(kir_program *p, const pc_node *n);

static build_fn build_rule(pc_op op) {
  PC_PRIMS_CHECKED(74); /* a builder per STORED prim but constant */
  static const build_fn rules[PC_OP_COUNT] = {
      [PC_OP_reduce_sum] = build_reduce, [PC_OP_reduce_prod] = build_reduce, [PC_OP_reduce_max] = build_reduce,
      [PC_OP_reduce_min] = build_reduce, [PC_OP_argmax] = build_reduce,      [PC_OP_argmin] = build_reduce,
      [PC_OP_concatenate] = build_concatenate, [PC_OP_pad] = build_pad,     [PC_OP_dot_general] = build_dot,
      [PC_OP_conv] = build_conv,         [PC_OP_gather] = build_gather,      [PC_OP_scatter] = build_scatter,
      [PC_OP_cumsum] = build_cumsum,     [PC_OP_sort] = build_sort,          [PC_OP_topk] = build_topk,
      [PC_OP_bitcast] = build_bitcast,   [PC_OP_random] = build_random,      [PC_OP_fft] = build_fft,
      [PC_OP_nonzero] = build_nonzero,
  };
  if (rules[op]) return rules[op];
  return expr_rule(op) ? build_pointwise : build_unsupported;
}

/* ---------------------------------------------------------------- groups */

/* A group of pointwise prims whose materialized results share one shape: one loop kernel with a store each. */
static int fused_pointwise_stores(kir_program *p, const pc_node *const *nodes, int n, int *root_buf, kir_kernel *tmp,
                                  const pc_type **shape);

static int try_fused_pointwise(kir_program *p, const pc_node *const *nodes, int n) {
  int *root_buf = pc_alloc(p->g, sizeof(int) * (size_t)n);
  if (!root_buf) return 0;
  for (int i = 0; i < n; i++) {
    root_buf[i] = nodes[i]->n_out == 1 ? p->buf_of_value[nodes[i]->out[0]->id] : -1;
    if (nodes[i]->n_out == 1) p->buf_of_value[nodes[i]->out[0]->id] = -1;
  }
  const pc_type *shape = NULL;
  kir_kernel tmp;
  memset(&tmp, 0, sizeof tmp);
  int ok = fused_pointwise_stores(p, nodes, n, root_buf, &tmp, &shape);
  for (int i = 0; i < n; i++)
    if (nodes[i]->n_out == 1) p->buf_of_value[nodes[i]->out[0]->id] = root_buf[i];
  if (!ok || !shape) return 0;
  kir_kernel *k = kernel_new(p, KK_LOOP);
  if (!k) return 0;
  k->n_loops = k->n_par = shape->rank;
  for (int d = 0; d < shape->rank; d++) k->extent[d] = shape->dims[d];
  k->n_stores = tmp.n_stores;
  memcpy(k->stores, tmp.stores, sizeof tmp.stores);
  kernel_normalize(k);
  kernel_origin(p, k, nodes, n);
  return 1;
}

static int fused_pointwise_stores(kir_program *p, const pc_node *const *nodes, int n, int *root_buf, kir_kernel *tmp,
                                  const pc_type **shape_out) {
  const pc_type *shape = NULL;
  kir_kernel *t = tmp;
  for (int i = 0; i < n; i++) {
    const pc_node *nd = nodes[i];
    if (!expr_rule(nd->op) || nd->n_out != 1) return 0;
    if (root_buf[i] < 0) continue;
    /* a reshape that merges dims, stored from an unmaterialized operand: loop over the operand's
     * shape instead; row-major order is the same, so the store's linear map is too */
    int via_operand = nd->op == PC_OP_reshape && p->buf_of_value[nd->in[0]->id] < 0;
    const pc_type *lt = via_operand ? &nd->in[0]->type : &nd->out[0]->type;
    if (shape && (shape->rank != lt->rank || memcmp(shape->dims, lt->dims, sizeof(int64_t) * (size_t)shape->rank)))
      return 0;
    shape = lt;
    if (t->n_stores == KIR_MAX_ARGS) return 0;
    int first = lt->rank == 0 ? 1 : 0;
    amap m = amap_identity(lt->rank, first);
    kir_expr *e = via_operand ? expr_value(p, nd->in[0], &m) : expr_rule(nd->op)(p, nd, &m);
    if (!e) return 0;
    store_init(&t->stores[t->n_stores++], root_buf[i], linearize(&m, lt), e);
  }
  *shape_out = shape;
  return 1;
}

static void materialize(kir_program *p, const pc_value *v) {
  if (p->buf_of_value[v->id] < 0) p->buf_of_value[v->id] = scratch_buf(p, v->type.dtype, value_bytes(p->g, v), v);
}

static int is_pointwise(const pc_node *n) { return expr_rule(n->op) && n->n_out == 1; }

/* Emits the pending pointwise prims' materialized results: one loop nest when they
 * share a shape, else one per result (inner values recomputed inline), else prim by prim. */
static pc_status flush_pointwise(kir_program *p, const pc_node **pend, int n) {
  int roots = 0;
  for (int i = 0; i < n; i++) roots += p->buf_of_value[pend[i]->out[0]->id] >= 0;
  if (!roots) return PC_OK;
  pc_status saved = p->g->status;
  if (try_fused_pointwise(p, pend, n)) return PC_OK;
  int before = p->n_kernels, ok = 1;
  for (int i = 0; ok && i < n; i++)
    if (p->buf_of_value[pend[i]->out[0]->id] >= 0) ok = build_pointwise(p, pend[i]) == PC_OK;
  if (ok) return PC_OK;
  if (p->g->status != saved) p->g->status = saved; /* retried below, prim by prim */
  p->n_kernels = before;
  for (int i = 0; i < n; i++) materialize(p, pend[i]->out[0]);
  for (int i = 0; i < n; i++) {
    pc_status s = build_pointwise(p, pend[i]);
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
    amap m = amap_identity(x->type.rank, 0);
    kir_expr *e = expr_value(p, x, &m);
    if (!e || e->kind != KE_LOAD) p->buf_of_value[x->id] = saved;
  }
}

static pc_status build_group(kir_program *p, const pc_node *const *nodes, int n) {
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
    for (int k = 0; !red && k < nd->n_in; k++)
      if (!(gather && k == 0)) materialize(p, nd->in[k]); /* build_gather decides for its table */
    for (int k = 0; k < nd->n_out; k++) materialize(p, nd->out[k]);
    pc_status s = flush_pointwise(p, pend, np);
    if (s != PC_OK) return s;
    int before = p->n_kernels;
    pc_status saved = p->g->status;
    s = build_rule(nd->op)(p, nd);
    if (s != PC_OK && red) { /* the prologue was not affine: materialize it first */
      p->g->status = saved;
      p->n_kernels = before;
      materialize(p, nd->in[0]);
      if ((s = flush_pointwise(p, pend, np)) == PC_OK) s = build_reduce(p, nd);
    }
    if (s != PC_OK) return s;
  }
  return flush_pointwise(p, pend, np);
}

/* graph outputs not written in place (inputs, constants, repeated values) get a copy */
static pc_status copy_outputs(kir_program *p) {
  pc_graph *g = p->g;
  for (int i = 0; i < g->n_outputs; i++) {
    const pc_value *v = g->outputs[i];
    int src = p->buf_of_value[v->id];
    if (src < 0) return pc_fail(g, PC_ERR_INTERNAL, "output %d is not materialized", i);
    if (p->bufs[src].place == KP_OUTPUT && p->bufs[src].index == i) continue;
    kir_buf b = {KP_OUTPUT, i, 0, value_bytes(p->g, v), v->type.dtype, v};
    int dst = buf_add(p, b);
    kir_kernel *k = dst < 0 ? NULL : call_kernel(p, NULL, KC_copy, 1 + 18);
    if (!k) return PC_ERR_NOMEM;
    pc_type t = bound_type(g, &v->type); /* a nonzero result listed twice: copied whole */
    k->params[0] = v->type.dtype;
    put_shape(put_shape(k->params + 1, &t), &t);
    call_arg(k, dst);
    call_arg(k, src);
  }
  return PC_OK;
}

static int expr_reads(const kir_expr *e, int buf, int64_t n_cols, int *other_map) {
  int r = 0;
  if (e->kind == KE_LOAD && e->buf == buf) {
    r = 1;
    for (int k = 2; k < KIR_MAX_LOOPS; k++) *other_map |= e->map.stride[k] != 0;
    *other_map |= e->map.offset != 0 || e->map.stride[0] != n_cols || e->map.stride[1] != 1;
  }
  for (int i = 0; i < e->n_args; i++) r |= expr_reads(e->args[i], buf, n_cols, other_map);
  return r;
}

static int kernel_touches(const kir_kernel *k, int buf) {
  int dummy = 0;
  for (int i = 0; k->kind == KK_CALL && i < k->n_args; i++)
    if (k->args[i] == buf) return 1;
  for (int s = 0; k->kind == KK_LOOP && s < k->n_stores; s++)
    if (k->stores[s].buf == buf || expr_reads(k->stores[s].value, buf, 0, &dummy)) return 1;
  return 0;
}

/* whether a kernel outside [first, last] reads or writes buf */
static int touched_outside(const kir_program *p, int buf, int first, int last) {
  for (int j = 0; j < p->n_kernels; j++)
    if ((j < first || j > last) && kernel_touches(&p->kernels[j], buf)) return 1;
  return 0;
}

/* A [M, N] dot whose result only the next kernel reads, element for element over the
 * same [M, N] loops: that kernel becomes the GEMM's epilogue. */
static void fuse_epilogues(kir_program *p) {
  for (int i = 0; i + 1 < p->n_kernels; i++) {
    kir_kernel *c = &p->kernels[i], *k = &p->kernels[i + 1];
    if (c->kind != KK_CALL || c->call != KC_dot || k->kind != KK_LOOP || c->params[1] != 1) continue;
    if (!c->n_nodes || !k->n_nodes || c->nodes[0]->group < 0 || c->nodes[0]->group != k->nodes[0]->group)
      continue; /* only inside a fused group: --unfused stays one launch per prim */
    int64_t M = c->params[2], N = c->params[3];
    int s = c->args[0], other = 0, reads = 0;
    if (p->bufs[s].place != KP_WORKSPACE || k->n_loops != 2 || k->n_par != 2 || k->extent[0] != M || k->extent[1] != N)
      continue;
    for (int j = 0; j < k->n_stores; j++) {
      reads |= expr_reads(k->stores[j].value, s, N, &other);
      other |= k->stores[j].buf == s;
    }
    if (!reads || other || touched_outside(p, s, i, i + 1)) continue;
    c->has_epilogue = 1;
    c->epilogue = i + 1;
    k->absorbed = 1;
  }
}

/* ---------------------------------------------------------------- packed GEMM weights */

static void mark_kernel_bufs(const kir_kernel *k, char *used);

/* a [R, C] operand with strides (sr, sc) read as a BLAS matrix: row-major or transposed */
static int gemm_layout(int64_t R, int64_t C, int64_t sr, int64_t sc, int *trans, int64_t *ld) {
  if (R == 1 && sc == 1) return *trans = 0, *ld = C, 1; /* one row (a GEMV's x): its stride is never stepped */
  if (sc == 1 && sr >= C) return *trans = 0, *ld = sr, 1;
  if (sr == 1 && sc >= R) return *trans = 1, *ld = sc, 1;
  return 0;
}

/* the dot's constant B as a new packed constant buffer; -1 when it does not qualify */
static int packed_operand(kir_program *p, const kir_kernel *k) {
  const int64_t *q = k->params;
  int64_t M = q[2], N = q[3], K = q[4], lda, ldb;
  int ta, tb;
  const kir_buf *b = &p->bufs[k->args[2]];
  if (q[0] != PC_f32 || q[1] != 1 || M < 1 || N < 1 || K < 1 || b->place != KP_CONST || !b->v ||
      !pc_const_data(b->v) || !gemm_layout(M, K, q[6], q[7], &ta, &lda) || !gemm_layout(K, N, q[9], q[10], &tb, &ldb))
    return -1;
  if (tb ? ldb != K : ldb != N) return -1; /* the constant is exactly B (no slice of a bigger one) */
  for (int i = 0; i < p->n_packed; i++) /* one packed copy per weight */
    if (p->bufs[p->packed[i].buf].v == b->v && !p->packed[i].groups && p->packed[i].trans == tb) return p->packed[i].buf;
  kir_packed *np = pc_alloc(p->g, sizeof *np * (size_t)(p->n_packed + 1));
  kir_buf nb = {KP_CONST, -1, 0, (int64_t)primc_sgemm_packed_b_size(N, K), PC_f32, b->v};
  int id = np ? buf_add(p, nb) : -1;
  if (id < 0) return -1;
  if (p->n_packed) memcpy(np, p->packed, sizeof *np * (size_t)p->n_packed);
  np[p->n_packed++] = (kir_packed){id, tb, N, K, 0, 0, 0, NULL};
  p->packed = np;
  return id;
}

static void place_weights(kir_program *p) {
  char *used = pc_alloc(p->g, (size_t)p->n_bufs + 1);
  if (!used) return;
  memset(used, 0, (size_t)p->n_bufs + 1);
  for (int i = 0; i < p->n_kernels; i++) mark_kernel_bufs(&p->kernels[i], used);
  p->weights_size = 0;
  for (int i = 0; i < p->n_bufs; i++) {
    kir_buf *b = &p->bufs[i];
    if (b->place != KP_CONST) continue;
    if (!used[i]) b->nbytes = 0; /* its only reader now reads the packed copy */
    b->offset = p->weights_size;
    p->weights_size = align_up(p->weights_size + b->nbytes);
  }
}

/* a 2-D f32 conv's constant weights packed as its plan wants (conv_plan): A strips for this machine's
 * tile, W^T panels, Winograd's transform or the lanes layout; -1 when the plan reads plain weights or
 * the weights are not a constant */
static int packed_conv_weights(kir_program *p, const kir_kernel *k, primc_conv_plan *plan) {
  primc_conv2d c;
  const kir_buf *w = &p->bufs[k->args[2]];
  if (!primc_conv2d_of_params(k->params, &c) || !conv_plan(&c, 1, plan) || plan->layout == PRIMC_CONV_W_PLAIN ||
      w->place != KP_CONST || !w->v || !pc_const_data(w->v) || w->dtype != PC_f32)
    return -1;
  int layout = plan->layout;
  int64_t og = c.o / c.groups, kk = c.c / c.groups * c.kh * c.kw;
  int mr = plan->tile_mr;
  int xform = layout == PRIMC_CONV_W_WINOGRAD || layout == PRIMC_CONV_W_LANES ? layout : 0;
  if (w->nbytes != c.o * kk * 4) return -1;
  for (int i = 0; i < p->n_packed; i++) { /* one packed copy per weight and layout */
    const kir_packed *q = &p->packed[i];
    if (p->bufs[q->buf].v == w->v && q->groups == c.groups && q->a_mr == mr && q->n == og && q->xform == xform)
      return q->buf;
  }
  kir_packed *np = pc_alloc(p->g, sizeof *np * (size_t)(p->n_packed + 1));
  kir_buf nb = {KP_CONST, -1, 0, (int64_t)primc_conv2d_packed_weight_bytes(&c, layout), PC_f32, w->v};
  int id = np ? buf_add(p, nb) : -1;
  if (id < 0) return -1;
  if (p->n_packed) memcpy(np, p->packed, sizeof *np * (size_t)p->n_packed);
  np[p->n_packed++] = (kir_packed){id, !mr, og, kk, mr, (int)c.groups, xform, k->params};
  p->packed = np;
  return id;
}

/* ---------------------------------------------------------------- max pools as calls */

static int bufs_overlap(const kir_program *p, int a, int b);

/* the loads of a tree of f32 max prims, in *n (at most cap); 0 when anything else is in it */
static int max_tree_loads(const kir_expr *e, const kir_expr **ld, int *n, int cap) {
  if (e->kind == KE_LOAD) {
    if (*n >= cap) return 0;
    ld[(*n)++] = e;
    return 1;
  }
  return e->kind == KE_PRIM && e->op == PC_OP_max && e->n_args == 2 && max_tree_loads(e->args[0], ld, n, cap) &&
         max_tree_loads(e->args[1], ld, n, cap);
}

/* kernel k stores -inf into buf and nothing else; its element count in *n */
static int stores_neg_inf(const kir_kernel *k, int buf, int64_t *n) {
  if (k->kind != KK_LOOP || k->n_stores != 1 || k->stores[0].buf != buf || k->stores[0].red != KR_NONE) return 0;
  const kir_expr *v = k->stores[0].value;
  if (v->kind != KE_CONST || !(isinf(v->c) && v->c < 0)) return 0;
  *n = 1;
  for (int l = 0; l < k->n_loops; l++) *n *= k->extent[l];
  return 1;
}

/* Loop kernel i as a max pool: the max of kh x kw loads at strides (sh, sw) over a buffer that
 * kernels [first, i) fill with -inf around a copy of an unpadded map (the pad prim of ONNX MaxPool).
 * The call reads the map itself: the stride-2 loads of the tree and the padded copy (ResNet-18's
 * stem pool: 0.43 ms of kernels on 1 thread, where ONNX Runtime takes 0.085) are gone. */
static int pool_call(kir_program *p, int i) {
  kir_kernel *k = &p->kernels[i];
  const kir_expr *ld[64];
  int n = 0;
  if (k->kind != KK_LOOP || k->absorbed || k->n_loops != 3 || k->n_par != 3 || k->n_stores != 1 ||
      k->stores[0].red != KR_NONE || p->bufs[k->stores[0].buf].dtype != PC_f32 ||
      !max_tree_loads(k->stores[0].value, ld, &n, 64) || n < 2)
    return 0;
  int pb = ld[0]->buf;
  if (p->bufs[pb].place != KP_WORKSPACE || p->bufs[pb].dtype != PC_f32) return 0;
  /* the kernels before i that write the padded buffer: -inf frames and one copy of the map */
  int first = i, copy = -1;
  int64_t frame = 0, cnt;
  while (first > 0 && p->kernels[first - 1].kind == KK_LOOP && p->kernels[first - 1].n_stores == 1 &&
         p->kernels[first - 1].stores[0].buf == pb) {
    const kir_kernel *q = &p->kernels[first - 1];
    if (stores_neg_inf(q, pb, &cnt)) frame += cnt;
    else if (copy < 0 && q->n_loops == 3 && q->stores[0].red == KR_NONE && q->stores[0].value->kind == KE_LOAD) copy = first - 1;
    else return 0;
    first--;
  }
  if (copy < 0) return 0;
  const kir_kernel *cp = &p->kernels[copy];
  const kir_map *dst = &cp->stores[0].map, *src = &cp->stores[0].value->map;
  int sb = cp->stores[0].value->buf;
  int64_t C = cp->extent[0], H = cp->extent[1], W = cp->extent[2], PW = dst->stride[1];
  if (p->bufs[sb].dtype != PC_f32 || dst->stride[2] != 1 || PW < W || dst->stride[0] % PW || src->offset ||
      src->stride[2] != 1 || src->stride[1] != W || src->stride[0] != H * W)
    return 0;
  int64_t PH = dst->stride[0] / PW, pt = dst->offset / PW, pl = dst->offset % PW;
  if (PH < H + pt || pl + W > PW || frame + C * H * W != C * PH * PW) return 0;
  /* the tree: loads over the padded map at (c, oy * sh + dy, ox * sw + dx), every (dy, dx) once */
  const kir_map *sm = &k->stores[0].map;
  int64_t OH = k->extent[1], OW = k->extent[2], kh = 0, kw = 0;
  if (k->extent[0] != C || sm->offset || sm->stride[2] != 1 || sm->stride[1] != OW || sm->stride[0] != OH * OW) return 0;
  int64_t sh = ld[0]->map.stride[1] / PW, sw = ld[0]->map.stride[2];
  if (ld[0]->map.stride[1] % PW || sh < 1 || sw < 1) return 0;
  for (int t = 0; t < n; t++) {
    const kir_map *m = &ld[t]->map;
    if (ld[t]->buf != pb || m->stride[0] != PH * PW || m->stride[1] != sh * PW || m->stride[2] != sw || m->offset < 0)
      return 0;
    if (m->offset / PW + 1 > kh) kh = m->offset / PW + 1;
    if (m->offset % PW + 1 > kw) kw = m->offset % PW + 1;
  }
  if (kh * kw != n || (OH - 1) * sh + kh > PH || (OW - 1) * sw + kw > PW) return 0;
  unsigned char seen[64] = {0};
  for (int t = 0; t < n; t++) {
    int64_t o = ld[t]->map.offset, at = o / PW * kw + o % PW;
    if (seen[at]++) return 0;
  }
  if (!primc_maxpool_row(W, OW, kw, sw, pl)) return 0;
  /* the map must still hold its values at i, and nothing else may read the padded buffer */
  int out = k->stores[0].buf;
  if (touched_outside(p, pb, first, i) || bufs_overlap(p, out, sb) || bufs_overlap(p, pb, sb)) return 0;
  int64_t *q = pc_alloc(p->g, sizeof(int64_t) * 11);
  if (!q) return 0;
  int64_t v[11] = {C, H, W, OH, OW, kh, kw, sh, sw, pt, pl};
  memcpy(q, v, sizeof v);
  for (int j = first; j < i; j++) p->kernels[j].absorbed = 1;
  k->kind = KK_CALL;
  k->call = KC_maxpool;
  k->params = q;
  k->n_params = kir_call_info(KC_maxpool)->n_params;
  k->n_args = 2;
  k->args[0] = out;
  k->args[1] = sb;
  return 1;
}

void kir_pool_calls(kir_program *p) {
  for (int i = 0; i < p->n_kernels; i++) pool_call(p, i);
}

pc_status kir_pack_weights(kir_program *p) {
  int packed = 0;
  for (int i = 0; i < p->n_kernels; i++) {
    kir_kernel *k = &p->kernels[i];
    if (k->kind != KK_CALL) continue;
    if (k->call == KC_conv) {
      primc_conv_plan plan;
      if (k->pair) continue; /* the pair reads plain weights, and so does its first conv's own row */
      int nb = packed_conv_weights(p, k, &plan);
      if (nb < 0) continue;
      k->args[2] = nb;
      k->params[CONV_EPI_AT + CONV_EPI_ROW - 3] = plan.layout;
      k->params[CONV_EPI_AT + CONV_EPI_ROW - 2] = plan.tile_mr;
      k->params[CONV_EPI_AT + CONV_EPI_ROW - 1] = p->bufs[nb].nbytes; /* the runtime checks packed headers against it */
      k->params[CONV_EPI_AT + CONV_EPI_ROW] = plan.row + 1;
      packed++;
      continue;
    }
    if (k->call != KC_dot) continue;
    int nb = packed_operand(p, k);
    if (nb < 0) continue;
    int64_t *q = pc_alloc(p->g, sizeof(int64_t) * 12); /* dot's params, then the packed B's bytes */
    if (!q) return p->g->status;
    memcpy(q, k->params, sizeof(int64_t) * 11);
    q[11] = p->bufs[nb].nbytes; /* the runtime checks the packed header against it */
    k->params = q;
    k->n_params = 12;
    k->args[2] = nb;
    k->call = KC_dot_packed;
    packed++;
  }
  if (packed) place_weights(p);
  return p->g->status;
}

/* ---------------------------------------------------------------- conv epilogues */

/* what a conv's epilogue kernel was recognized as: y = clamp(conv + bias + res, lo, hi) */
typedef struct conv_epi {
  const kir_kernel *k;
  int conv_buf, bias, res; /* buffer ids; -1 when absent */
  int64_t bias_off, bias_stride, plane;
  int64_t cstride[KIR_MAX_LOOPS]; /* row-major element strides of k's loops */
  double lo, hi;
  int silu;
} conv_epi;

static int map_is(const kir_map *m, const int64_t *strides, int n, int64_t offset) {
  if (m->offset != offset) return 0;
  for (int l = 0; l < KIR_MAX_LOOPS; l++)
    if (m->stride[l] != (l < n ? strides[l] : 0)) return 0;
  return 1;
}

/* a load that depends on the output channel only: offset + bias_stride * channel */
static int bias_map(conv_epi *e, const kir_map *m) {
  int64_t bs = -1;
  for (int l = 0; l < e->k->n_loops; l++) {
    int64_t cs = e->cstride[l], st = m->stride[l];
    if (cs >= e->plane) {
      if (cs % e->plane) return 0;
      int64_t per = cs / e->plane; /* channels per step of this loop */
      if (st % per || (bs >= 0 && st / per != bs)) return 0;
      bs = st / per;
    } else if (cs * e->k->extent[l] > e->plane || st != 0) {
      return 0; /* the loop straddles channels, or the value varies inside a plane */
    }
  }
  e->bias_off = m->offset;
  e->bias_stride = bs < 0 ? 0 : bs;
  return 1;
}

/* sum of the conv result, at most one per-channel bias and at most one residual, all f32 loads */
static int match_sum(conv_epi *e, const kir_expr *x) {
  if (x->dtype != PC_f32) return 0;
  if (x->kind == KE_PRIM && x->op == PC_OP_add) return match_sum(e, x->args[0]) && match_sum(e, x->args[1]);
  if (x->kind != KE_LOAD) return 0;
  int n = e->k->n_loops;
  if (x->buf == e->conv_buf) {
    if (!map_is(&x->map, e->cstride, n, 0) || e->conv_buf < 0) return 0;
    e->conv_buf = -1 - e->conv_buf; /* seen once */
    return 1;
  }
  if (map_is(&x->map, e->cstride, n, 0) && e->res < 0) return (e->res = x->buf), 1;
  if (e->bias < 0 && bias_map(e, &x->map)) return (e->bias = x->buf), 1;
  return 0;
}

static int is_const(const kir_expr *x, double *v) {
  if (x->kind != KE_CONST) return 0;
  *v = x->c;
  return 1;
}

static int expr_equal(const kir_expr *a, const kir_expr *b) {
  if (a->kind != b->kind || a->dtype != b->dtype || a->n_args != b->n_args) return 0;
  if (a->kind == KE_LOAD) return a->buf == b->buf && !memcmp(&a->map, &b->map, sizeof a->map);
  if (a->kind == KE_CONST) return a->c == b->c && a->ci == b->ci;
  if (a->kind == KE_INDEX) return a->loop == b->loop;
  if (a->kind == KE_PRIM && a->op != b->op) return 0;
  for (int i = 0; i < a->n_args; i++)
    if (!expr_equal(a->args[i], b->args[i])) return 0;
  return 1;
}

/* the sum, or SiLU of it: mul(s, sigmoid(s)) either way round */
static int match_act(conv_epi *e, const kir_expr *x) {
  if (x->kind == KE_PRIM && x->op == PC_OP_mul && x->dtype == PC_f32 && !e->silu)
    for (int i = 0; i < 2; i++) {
      const kir_expr *s = x->args[i], *g = x->args[1 - i];
      if (g->kind == KE_PRIM && g->op == PC_OP_sigmoid && expr_equal(g->args[0], s)) {
        e->silu = 1;
        return match_sum(e, s);
      }
    }
  return match_sum(e, x);
}

/* clamp(x, lo, hi), max(x, lo), min(x, hi) with constant bounds, nested, around the sum */
static int match_clamp(conv_epi *e, const kir_expr *x) {
  double c, c2;
  if (x->kind == KE_PRIM && (x->op == PC_OP_max || x->op == PC_OP_min) && x->dtype == PC_f32) {
    int ci = is_const(x->args[1], &c) ? 1 : is_const(x->args[0], &c) ? 0 : -1;
    if (ci < 0) return match_act(e, x);
    if (x->op == PC_OP_max && c > e->lo) e->lo = c;
    if (x->op == PC_OP_min && c < e->hi) e->hi = c;
    return match_clamp(e, x->args[1 - ci]);
  }
  if (x->kind == KE_PRIM && x->op == PC_OP_clamp && is_const(x->args[1], &c) && is_const(x->args[2], &c2)) {
    if (c > e->lo) e->lo = c;
    if (c2 < e->hi) e->hi = c2;
    return match_clamp(e, x->args[0]);
  }
  return match_act(e, x);
}

/* workspace buffers a and b share bytes (inputs, outputs and weights are distinct buffers) */
static int bufs_overlap(const kir_program *p, int a, int b) {
  const kir_buf *x = &p->bufs[a], *y = &p->bufs[b];
  if (a == b) return 1;
  if (x->place != y->place) return 0;
  if (x->place == KP_INPUT || x->place == KP_OUTPUT) return x->index == y->index;
  return x->offset < y->offset + y->nbytes && y->offset < x->offset + x->nbytes;
}

/* k (the loop kernel right after conv call c) as clamp(conv + bias + res); 0 when it is anything else */
static int match_conv_epilogue(const kir_program *p, const kir_kernel *c, const kir_kernel *k, conv_epi *e) {
  const int64_t *q = c->params;
  /* f32, 2 spatial dims (rank 4), no input dilation: what primc_conv2d_f32_epi runs */
  if (q[0] != PC_f32 || q[1] != 4 || q[1 + 27 + 1 + 24] != 1 || q[1 + 27 + 1 + 25] != 1) return 0;
  if (k->n_stores != 1 || k->n_par != k->n_loops || k->stores[0].red != KR_NONE) return 0;
  const int64_t *od = q + 1 + 18 + 1; /* out dims */
  *e = (conv_epi){.k = k, .conv_buf = c->args[0], .bias = -1, .res = -1, .plane = od[2] * od[3], .lo = -INFINITY,
                  .hi = INFINITY};
  int64_t total = 1, n = 1;
  for (int l = k->n_loops - 1; l >= 0; l--) {
    e->cstride[l] = n;
    n *= k->extent[l];
  }
  for (int d = 0; d < 4; d++) total *= od[d];
  if (n != total || !map_is(&k->stores[0].map, e->cstride, k->n_loops, 0)) return 0;
  if (!match_clamp(e, k->stores[0].value) || e->conv_buf >= 0) return 0;
  int y = k->stores[0].buf, x = c->args[1];
  /* y must not be written over the conv's input while the conv reads it; the bias is read throughout */
  return !bufs_overlap(p, y, x) && !(e->bias >= 0 && bufs_overlap(p, y, e->bias));
}

/* A 2-D f32 conv whose result only the next kernel reads, as clamp(conv + bias + residual): the
 * conv call applies it on each output tile (primc_conv2d_f32_epi), no second pass over memory. */
static void fuse_conv_epilogues(kir_program *p) {
  for (int i = 0; i + 1 < p->n_kernels; i++) {
    kir_kernel *c = &p->kernels[i], *k = &p->kernels[i + 1];
    if (c->kind != KK_CALL || c->call != KC_conv || k->kind != KK_LOOP || c->n_args + 3 > KIR_MAX_ARGS) continue;
    if (!c->n_nodes || !k->n_nodes || c->nodes[0]->group < 0 || c->nodes[0]->group != k->nodes[0]->group) continue;
    int s = c->args[0], other = 0;
    if (p->bufs[s].place != KP_WORKSPACE) continue;
    for (int j = 0; j < k->n_stores; j++) other |= k->stores[j].buf == s;
    conv_epi e;
    if (other || touched_outside(p, s, i, i + 1) || !match_conv_epilogue(p, c, k, &e)) continue;
    int64_t *w = c->params + CONV_EPI_AT;
    w[0] = 1, w[1] = e.bias_off, w[2] = e.bias >= 0 ? e.bias_stride : -1, w[3] = e.res >= 0; /* -1: no bias */
    memcpy(&w[4], &e.lo, 8);
    memcpy(&w[5], &e.hi, 8);
    w[6] = e.silu;
    c->args[c->n_args++] = k->stores[0].buf;
    c->args[c->n_args++] = e.bias >= 0 ? e.bias : k->stores[0].buf;
    c->args[c->n_args++] = e.res >= 0 ? e.res : k->stores[0].buf;
    c->has_epilogue = c->epi_in_call = 1;
    c->epilogue = i + 1;
    k->absorbed = 1;
  }
}

/* A small conv (a 1x1 widening, a stem) whose fused result only a depthwise conv reads (MobileNet)
 * runs with it in one call, which makes the widened map 16 channels at a time while they are in
 * cache. Its weights then stay plain: the call takes a block of weight rows at a time. */
static void pair_small_conv_depthwise(kir_program *p) {
  const char *force = getenv("PRIMC_CONV_ROW"); /* a forced row other than the pair's keeps convs apart */
  if (force && *force && strcmp(force, primc_conv_row_name(PRIMC_CONV_ROW_PAIR_DW))) return;
  for (int i = 0; i + 2 < p->n_kernels; i++) {
    kir_kernel *a = &p->kernels[i], *b = &p->kernels[i + 2];
    if (a->kind != KK_CALL || a->call != KC_conv || !a->epi_in_call || a->epilogue != i + 1) continue;
    if (b->kind != KK_CALL || b->call != KC_conv || b->pair || b->absorbed) continue;
    int mid = a->args[4];
    if (b->args[1] != mid || p->bufs[mid].place != KP_WORKSPACE || a->params[CONV_EPI_AT + 3]) continue;
    primc_conv2d pw, dw;
    if (touched_outside(p, mid, i, i + 2) || !primc_conv2d_of_params(a->params, &pw) ||
        !primc_conv2d_of_params(b->params, &dw) || !primc_conv_plan_pair(&pw, &dw))
      continue;
    /* nor may the second conv's other buffers (its scratch aside) share the map's memory */
    int other = 0;
    for (int j = 0; j < b->n_args; j++) other |= j != 3 && b->args[j] != mid && bufs_overlap(p, b->args[j], mid);
    if (other) continue;
    a->pair = i + 2;
    b->absorbed = 1;
  }
}

/* ---------------------------------------------------------------- loop collapsing */

/* loops l and l + 1 walk every map as one loop of extent[l] * extent[l + 1] */
static int map_collapses(const kir_map *m, const kir_kernel *k, int l) {
  return m->stride[l] == m->stride[l + 1] * k->extent[l + 1];
}

static int expr_collapses(const kir_expr *e, const kir_kernel *k, int l) {
  if ((e->kind == KE_LOAD || e->kind == KE_INDEX) && !map_collapses(&e->map, k, l)) return 0;
  for (int i = 0; i < e->n_args; i++)
    if (!expr_collapses(e->args[i], k, l)) return 0;
  return 1;
}

static void map_merge(kir_map *m, int l) {
  m->stride[l] = m->stride[l + 1];
  map_drop_loop(m, l + 1);
}

static void expr_merge(kir_expr *e, int l) {
  if (e->kind == KE_LOAD || e->kind == KE_INDEX) map_merge(&e->map, l);
  for (int i = 0; i < e->n_args; i++) expr_merge(e->args[i], l);
}

/* Adjacent loops of the same kind that every load, index and store walks contiguously become
 * one: a [C, 14, 14] elementwise kernel is one loop of C * 196 the vectorizer fills with full
 * vectors, where 14-element inner loops ran scalar, and a global average pool reduces 196
 * elements per channel in one vector loop. Epilogues a call runs on its own row blocks and
 * argmax/argmin (which store a loop's index) keep their loops. */
static void kernel_collapse(kir_kernel *k) {
  if (k->kind != KK_LOOP || k->absorbed) return;
  for (int s = 0; s < k->n_stores; s++)
    if (k->stores[s].red >= KR_ARGMAX) return;
  for (int l = k->n_loops - 2; l >= 0; l--) {
    int ok = l + 1 != k->n_par;
    for (int s = 0; ok && s < k->n_stores; s++)
      ok = map_collapses(&k->stores[s].map, k, l) && expr_collapses(k->stores[s].value, k, l);
    if (!ok) continue;
    for (int s = 0; s < k->n_stores; s++) {
      map_merge(&k->stores[s].map, l);
      expr_merge(k->stores[s].value, l);
    }
    k->extent[l] *= k->extent[l + 1];
    for (int j = l + 1; j + 1 < k->n_loops; j++) k->extent[j] = k->extent[j + 1];
    k->n_loops--;
    if (l + 1 < k->n_par) k->n_par--;
  }
}

pc_status kir_build(pc_graph *g, kir_program *p) {
  memset(p, 0, sizeof *p);
  p->g = g;
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
  if (s == PC_OK) s = copy_outputs(p);
  if (s == PC_OK) fuse_epilogues(p);
  if (s == PC_OK) fuse_conv_epilogues(p);
  if (s == PC_OK) pair_small_conv_depthwise(p);
  for (int i = 0; s == PC_OK && i < p->n_kernels; i++) kernel_collapse(&p->kernels[i]);
  p->workspace_size = align_up(p->workspace_size);
  if (s != PC_OK && !g->status) pc_fail(g, s, "codegen: %s", pc_status_name(s));
  return s;
}

/* ---------------------------------------------------------------- profiler labels */

/* constants, conversions and index maps: not what a kernel is named after */
static int is_movement(pc_op op) {
  return pc_op_fuse_kind(op) == PC_FUSE_CONST || (pc_op_is_inline(op) && !pc_op_is_elementwise(op));
}

static void append_word(char *dst, size_t n, const char *w) {
  size_t len = strlen(dst);
  for (; *w && len + 1 < n; w++)
    if (*w != '"') dst[len++] = (*w == ' ' || *w == '\t' || *w == '\n') ? ':' : *w;
  dst[len] = 0;
}

static void label_prims(const kir_kernel *k, char *name, size_t n) {
  for (int i = 0; i < k->n_nodes; i++) {
    const char *pn = pc_prim(k->nodes[i]->op)->name;
    int seen = 0;
    for (int j = 0; j < i && !seen; j++) seen = k->nodes[j]->op == k->nodes[i]->op;
    if (seen) continue;
    if (*name) append_word(name, n, "+");
    append_word(name, n, pn);
  }
}

void kir_kernel_label(const kir_program *p, int idx, char *name, size_t name_len, char *origin, size_t origin_len) {
  const kir_kernel *k = &p->kernels[idx];
  name[0] = origin[0] = 0;
  if (k->kind == KK_CALL && !k->n_nodes) append_word(name, name_len, kir_call_name(k->call));
  label_prims(k, name, name_len);
  if (k->has_epilogue) label_prims(&p->kernels[k->epilogue], name, name_len);
  if (k->pair) append_word(name, name_len, "+depthwise"); /* the pair's second conv, timed with it */
  const pc_node *main = NULL;
  for (int i = 0; i < k->n_nodes && !main; i++)
    if (!is_movement(k->nodes[i]->op) && k->nodes[i]->origin) main = k->nodes[i];
  for (int i = 0; i < k->n_nodes && !main; i++)
    if (k->nodes[i]->origin) main = k->nodes[i];
  append_word(origin, origin_len, main && *main->origin ? main->origin : "-");
  if (!*name) append_word(name, name_len, "-");
}

static void mark_expr_bufs(const kir_expr *e, char *used) {
  if (e->kind == KE_LOAD) used[e->buf] = 1;
  for (int i = 0; i < e->n_args; i++) mark_expr_bufs(e->args[i], used);
}

static void mark_kernel_bufs(const kir_kernel *k, char *used) {
  for (int i = 0; k->kind == KK_CALL && i < k->n_args; i++)
    if (k->args[i] >= 0) used[k->args[i]] = 1;
  for (int s = 0; k->kind == KK_LOOP && s < k->n_stores; s++) {
    used[k->stores[s].buf] = 1;
    mark_expr_bufs(k->stores[s].value, used);
  }
}

int64_t kir_kernel_bytes(const kir_program *p, int idx) {
  char *used = pc_alloc(p->g, (size_t)p->n_bufs + 1);
  if (!used) return 0;
  memset(used, 0, (size_t)p->n_bufs + 1);
  const kir_kernel *k = &p->kernels[idx];
  mark_kernel_bufs(k, used);
  if (k->has_epilogue) mark_kernel_bufs(&p->kernels[k->epilogue], used);
  if (k->pair) { /* the second conv's buffers, not the map between them, which the pair never writes */
    const kir_kernel *b = &p->kernels[k->pair];
    mark_kernel_bufs(b, used);
    if (b->has_epilogue) mark_kernel_bufs(&p->kernels[b->epilogue], used);
    used[k->args[0]] = used[k->args[4]] = 0;
  }
  int64_t bytes = 0;
  for (int b = 0; b < p->n_bufs; b++)
    if (used[b]) bytes += p->bufs[b].nbytes;
  return bytes;
}

/* ---------------------------------------------------------------- printer */

static const char *place_names[] = {"input", "output", "const", "workspace"};

static void print_map(const kir_map *m, int n_loops, FILE *f) {
  fprintf(f, "[%lld", (long long)m->offset);
  for (int k = 0; k < n_loops; k++)
    if (m->stride[k]) fprintf(f, " %+lld*i%d", (long long)m->stride[k], k);
  fprintf(f, "]");
}

static void print_expr(const kir_expr *e, int n_loops, FILE *f) {
  switch (e->kind) { /* printing is the one place that walks every expression kind */
  case KE_LOAD: fprintf(f, "b%d", e->buf); print_map(&e->map, n_loops, f); break;
  case KE_CONST:
    if (pc_dtype_is_float(e->dtype)) fprintf(f, "%g", e->c);
    else fprintf(f, "%lld", (long long)e->ci);
    break;
  case KE_INDEX: fprintf(f, "index"); print_map(&e->map, n_loops, f); break;
  case KE_CONVERT:
    fprintf(f, "%s(", pc_dtype_name(e->dtype));
    print_expr(e->args[0], n_loops, f);
    fprintf(f, ")");
    break;
  case KE_PRIM:
    fprintf(f, "%s(", pc_prim(e->op)->name);
    for (int i = 0; i < e->n_args; i++) {
      if (i) fprintf(f, ", ");
      print_expr(e->args[i], n_loops, f);
    }
    fprintf(f, ")");
    break;
  }
}

static void print_kernel(const kir_program *p, int idx, FILE *f) {
  const kir_kernel *k = &p->kernels[idx];
  fprintf(f, "kernel k%d", idx);
  if (k->kind == KK_CALL) {
    fprintf(f, " = call %s(", kir_call_info(k->call)->symbol);
    for (int i = 0; i < k->n_args; i++) fprintf(f, "%sb%d", i ? ", " : "", k->args[i]);
    fprintf(f, ")");
    if (k->call == KC_conv && k->params[CONV_EPI_AT + CONV_EPI_ROW] > 0)
      fprintf(f, " conv row %s", primc_conv_row_name((int)k->params[CONV_EPI_AT + CONV_EPI_ROW] - 1));
    if (k->has_epilogue) fprintf(f, " with epilogue k%d %s", k->epilogue, k->epi_in_call ? "in the call" : "per row block");
    if (k->pair) fprintf(f, ", then k%d in the same call (conv row %s)", k->pair, primc_conv_row_name(PRIMC_CONV_ROW_PAIR_DW));
    if (k->absorbed) fprintf(f, " (in k%d's call)", idx - 2);
    fprintf(f, "\n");
  } else {
    fprintf(f, "%s loops(", k->absorbed ? " (epilogue)" : "");
    for (int l = 0; l < k->n_loops; l++)
      fprintf(f, "%si%d<%lld%s", l ? ", " : "", l, (long long)k->extent[l], l < k->n_par ? "" : " reduce");
    fprintf(f, ")\n");
    for (int s = 0; s < k->n_stores; s++) {
      const kir_store *st = &k->stores[s];
      fprintf(f, "  b%d", st->buf);
      print_map(&st->map, k->n_loops, f);
      fprintf(f, " %s ", st->red == KR_NONE ? "=" : kir_red_name(st->red));
      print_expr(st->value, k->n_loops, f);
      fprintf(f, "\n");
    }
  }
  for (int i = 0; i < k->n_nodes; i++) {
    const pc_node *n = k->nodes[i];
    fprintf(f, "  from %%%d %s", n->out[0]->id, pc_prim(n->op)->name);
    if (n->group >= 0) fprintf(f, " (group %d)", n->group);
    fprintf(f, "%s%s\n", n->origin ? " <- " : "", n->origin ? n->origin : "");
  }
}

void kir_print(const kir_program *p, FILE *f) {
  fprintf(f, "workspace %lld bytes, weights %lld bytes\n", (long long)p->workspace_size, (long long)p->weights_size);
  for (int i = 0; i < p->n_bufs; i++) {
    const kir_buf *b = &p->bufs[i];
    fprintf(f, "buf b%d: %s %s", i, place_names[b->place], pc_dtype_name(b->dtype));
    if (b->v) {
      fprintf(f, "[");
      for (int d = 0; d < b->v->type.rank; d++) fprintf(f, "%s%lld", d ? "," : "", (long long)b->v->type.dims[d]);
      fprintf(f, "] %%%d", b->v->id);
    }
    if (b->place == KP_INPUT || b->place == KP_OUTPUT) fprintf(f, " #%d", b->index);
    else fprintf(f, " @%lld", (long long)b->offset);
    fprintf(f, " (%lld bytes)\n", (long long)b->nbytes);
  }
  for (int i = 0; i < p->n_kernels; i++) print_kernel(p, i, f);
}
