/* codegen/kir_expr.c: the expressions of loop kernels: a value read at an affine map, as a load of its
 * buffer or its producer's inline prim (elementwise, or one index map: broadcast, transpose, slice, ...). */
#include "codegen/kir_internal.h"

#include <string.h>

/* dims along which a constant's data repeats (a folded broadcast): bit d set when every
 * element equals its predecessor along d; cached per value (-1: not computed yet) */
static int const_repeat_mask(kir_program *p, const pc_value *v) {
  if (p->repeat_mask[v->id] >= 0) return p->repeat_mask[v->id];
  const unsigned char *d = pc_const_data(v);
  int64_t s[PC_MAX_RANK], n = pc_type_numel(&v->type);
  size_t es = pc_dtype_size(v->type.dtype);
  int mask = 0;
  kir_row_strides(&v->type, s);
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
  e->map = kir_linearize(&r, &as);
  return e;
}

static kir_expr *load_expr(kir_program *p, const pc_value *v, const amap *m) { return load_expr_as(p, v, m, 0); }

static kir_expr *expr_elementwise(kir_program *p, const pc_node *n, const amap *m) {
  kir_expr *e = kir_expr_new(p, KE_PRIM, n->out[0]->type.dtype);
  if (!e) return NULL;
  e->op = n->op;
  e->n_args = n->n_in;
  for (int i = 0; i < n->n_in; i++)
    if (!(e->args[i] = kir_expr_value(p, n->in[i], m))) return NULL;
  return e;
}

static kir_expr *expr_convert(kir_program *p, const pc_node *n, const amap *m) {
  kir_expr *e = kir_expr_new(p, KE_CONVERT, n->out[0]->type.dtype);
  if (!e) return NULL;
  e->n_args = 1;
  e->args[0] = kir_expr_value(p, n->in[0], m);
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
  return kir_expr_value(p, n->in[0], &o);
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
  return kir_expr_value(p, n->in[0], &o);
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
  return kir_expr_value(p, n->in[0], &o);
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
  return kir_expr_value(p, n->in[0], &o);
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
    return reshape_split_map(&x->type, &n->out[0]->type, m, &split) ? kir_expr_value(p, x, &split) : NULL;
  amap lin;
  memset(&lin, 0, sizeof lin);
  lin.rank = 1;
  kir_map l = kir_linearize(m, &n->out[0]->type);
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

/* the prims of prims.def's inline column: inlinable into any loop kernel; NULL for the others */
kir_expr_fn kir_expr_rule(pc_op op) {
  PC_PRIMS_CHECKED(74); /* a rule per INLINE prim that is not elementwise */
  static const kir_expr_fn rules[PC_OP_COUNT] = {
      [PC_OP_convert_element_type] = expr_convert, [PC_OP_broadcast_in_dim] = expr_broadcast,
      [PC_OP_transpose] = expr_transpose,           [PC_OP_slice] = expr_slice,
      [PC_OP_rev] = expr_rev,                       [PC_OP_reshape] = expr_reshape,
      [PC_OP_iota] = expr_iota,
  };
  if (!pc_op_is_inline(op)) return NULL;
  return pc_op_is_elementwise(op) ? expr_elementwise : rules[op];
}

kir_expr *kir_expr_value(kir_program *p, const pc_value *v, const amap *m) {
  if (p->buf_of_value[v->id] >= 0) return load_expr(p, v, m);
  kir_expr_fn f = v->producer ? kir_expr_rule(v->producer->op) : NULL;
  return f ? f(p, v->producer, m) : NULL;
}

int kir_map_is(const kir_map *m, const int64_t *strides, int n, int64_t offset) {
  if (m->offset != offset) return 0;
  for (int l = 0; l < KIR_MAX_LOOPS; l++)
    if (m->stride[l] != (l < n ? strides[l] : 0)) return 0;
  return 1;
}

int kir_expr_equal(const kir_expr *a, const kir_expr *b) {
  if (a == b) return 1;
  if (a->kind != b->kind || a->dtype != b->dtype || a->n_args != b->n_args) return 0;
  if (a->kind == KE_LOAD) return a->buf == b->buf && !memcmp(&a->map, &b->map, sizeof a->map);
  if (a->kind == KE_CONST) return a->c == b->c && a->ci == b->ci;
  if (a->kind == KE_INDEX) return a->loop == b->loop;
  if (a->kind == KE_PRIM && a->op != b->op) return 0;
  for (int i = 0; i < a->n_args; i++)
    if (!kir_expr_equal(a->args[i], b->args[i])) return 0;
  return 1;
}
