/* ir/infer.c: shape and dtype inference for every prim, dispatched through the prims.def table. */
#include "ir/ir.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define MAX_OUT 2
#define MAX_NUMEL PC_MAX_NUMEL /* output sizes above this are absurd (ir/ir.h) */

typedef struct ictx {
  pc_graph *g;
  pc_node *n;
  pc_type out[MAX_OUT];
} ictx;

typedef pc_status (*infer_fn)(ictx *c);

#define IN(c, i) (&(c)->n->in[i]->type)
#define FAIL(c, code, ...) pc_node_fail((c)->g, (c)->n, (code), __VA_ARGS__)

/* ---------------------------------------------------------------- message formatting */

typedef struct sbuf {
  char s[200];
} sbuf;

static void sb_add(sbuf *b, const char *fmt, ...) {
  size_t o = strlen(b->s);
  if (o + 1 >= sizeof b->s) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(b->s + o, sizeof b->s - o, fmt, ap);
  va_end(ap);
}

static int dim_known(const pc_graph *g, int64_t d) { return d >= -(int64_t)g->n_syms; }

static void sb_dim(sbuf *b, const pc_graph *g, int64_t d) {
  if (d >= 0)
    sb_add(b, "%lld", (long long)d);
  else if (dim_known(g, d))
    sb_add(b, "%s", g->syms[PC_DIM_SYM_ID(d)].name);
  else
    sb_add(b, "?%lld", (long long)d);
}

/* "[3,batch]": dims, symbols by name */
static sbuf shape_str(const pc_graph *g, const int64_t *dims, int n) {
  sbuf b = {{0}};
  sb_add(&b, "[");
  for (int i = 0; i < n; i++) {
    if (i) sb_add(&b, ",");
    sb_dim(&b, g, dims[i]);
  }
  sb_add(&b, "]");
  return b;
}

/* "f32[3,batch]" */
static sbuf type_str(const pc_graph *g, const pc_type *t) {
  sbuf b = {{0}};
  sb_add(&b, "%s%s", pc_dtype_name(t->dtype), shape_str(g, t->dims, t->rank).s);
  return b;
}

/* "[0,0]": plain integer lists (perm, axes) */
static sbuf ints_str(const int64_t *v, int n) {
  sbuf b = {{0}};
  sb_add(&b, "[");
  for (int i = 0; i < n; i++) sb_add(&b, i ? ",%lld" : "%lld", (long long)v[i]);
  sb_add(&b, "]");
  return b;
}

static sbuf dim_str(const pc_graph *g, int64_t d) {
  sbuf b = {{0}};
  sb_dim(&b, g, d);
  return b;
}

/* ---------------------------------------------------------------- dtype classes */

static const char *const class_names[] = {
    [PC_CLS_ANY] = "any dtype",        [PC_CLS_NUM] = "a numeric dtype",
    [PC_CLS_FLOAT] = "a float dtype",  [PC_CLS_INT] = "an int dtype",
    [PC_CLS_LOGIC] = "bool or an int dtype",
};

/* prims.def's FLOAT admits c64 only where its row says so: fft */
static int class_ok(pc_operand_class cls, pc_dtype t, pc_op op) {
  int fl = pc_dtype_is_float(t), in = pc_dtype_is_int(t);
  switch (cls) { /* one line per class of the prims.def column */
  case PC_CLS_ANY: return 1;
  case PC_CLS_NUM: return fl || in;
  case PC_CLS_FLOAT: return fl || (t == PC_c64 && op == PC_OP_fft);
  case PC_CLS_INT: return in;
  case PC_CLS_LOGIC: return in || t == PC_bool;
  }
  return 0;
}

/* ---------------------------------------------------------------- attributes */

static const char *const attr_kind_names[] = {
    [PC_ATTR_INT] = "an int", [PC_ATTR_INTS] = "a list of ints", [PC_ATTR_FLOAT] = "a float",
    [PC_ATTR_STRING] = "a string", [PC_ATTR_DTYPE] = "a dtype",
};

/* required attribute of the given kind; ints are accepted where a float is asked */
static const pc_attr *attr_get(ictx *c, const char *name, pc_attr_kind kind) {
  const pc_attr *a = pc_attr_find(c->n, name);
  if (!a) {
    FAIL(c, PC_ERR_ATTR, "missing attribute %s", name);
    return NULL;
  }
  if (a->kind != kind && !(kind == PC_ATTR_FLOAT && a->kind == PC_ATTR_INT)) {
    const char *got = (unsigned)a->kind <= PC_ATTR_DTYPE ? attr_kind_names[a->kind] : "an unknown kind";
    FAIL(c, PC_ERR_ATTR, "attribute %s must be %s, got %s", name, attr_kind_names[kind], got);
    return NULL;
  }
  return a;
}

/* an int in [lo, hi] */
static int attr_int(ictx *c, const char *name, int64_t lo, int64_t hi, int64_t *v) {
  const pc_attr *a = attr_get(c, name, PC_ATTR_INT);
  if (!a) return 0;
  if (a->i < lo || a->i > hi) {
    FAIL(c, PC_ERR_ATTR, "attribute %s = %lld is out of range [%lld, %lld]", name, (long long)a->i, (long long)lo,
         (long long)hi);
    return 0;
  }
  *v = a->i;
  return 1;
}

static int attr_flag(ictx *c, const char *name, int64_t *v) { return attr_int(c, name, 0, 1, v); }

/* an axis of a rank-`rank` operand */
static int attr_axis(ictx *c, const char *name, int rank, int *axis) {
  const pc_attr *a = attr_get(c, name, PC_ATTR_INT);
  if (!a) return 0;
  if (a->i < 0 || a->i >= rank) {
    FAIL(c, PC_ERR_ATTR, "%s %lld is out of range for rank %d", name, (long long)a->i, rank);
    return 0;
  }
  *axis = (int)a->i;
  return 1;
}

/* a list of ints; len >= 0 demands that length */
static int attr_ints(ictx *c, const char *name, int len, const int64_t **v, int *n) {
  const pc_attr *a = attr_get(c, name, PC_ATTR_INTS);
  if (!a) return 0;
  if (a->n < 0 || (a->n > 0 && !a->ints)) {
    FAIL(c, PC_ERR_ATTR, "attribute %s is malformed", name);
    return 0;
  }
  if (len >= 0 && a->n != len) {
    FAIL(c, PC_ERR_ATTR, "attribute %s has %d entries, expected %d", name, a->n, len);
    return 0;
  }
  *v = a->ints;
  if (n) *n = a->n;
  return 1;
}

static int attr_float(ictx *c, const char *name, double *v) {
  const pc_attr *a = attr_get(c, name, PC_ATTR_FLOAT);
  if (!a) return 0;
  *v = a->kind == PC_ATTR_INT ? (double)a->i : a->f;
  return 1;
}

/* a string among the NULL-terminated choices */
static int attr_choice(ictx *c, const char *name, const char *const *choices, const char **v) {
  const pc_attr *a = attr_get(c, name, PC_ATTR_STRING);
  if (!a) return 0;
  for (int i = 0; choices[i]; i++)
    if (a->s && strcmp(a->s, choices[i]) == 0) {
      *v = choices[i];
      return 1;
    }
  sbuf b = {{0}};
  for (int i = 0; choices[i]; i++) sb_add(&b, "%s\"%s\"", i ? ", " : "", choices[i]);
  FAIL(c, PC_ERR_ATTR, "attribute %s = \"%s\" is not one of %s", name, a->s ? a->s : "", b.s);
  return 0;
}

static int attr_dtype(ictx *c, const char *name, pc_dtype *v) {
  const pc_attr *a = attr_get(c, name, PC_ATTR_DTYPE);
  if (!a) return 0;
  if (a->i < 0 || a->i >= PC_DTYPE_COUNT) {
    FAIL(c, PC_ERR_ATTR, "attribute %s holds no dtype (%lld)", name, (long long)a->i);
    return 0;
  }
  *v = (pc_dtype)a->i;
  return 1;
}

/* a result shape given as an attribute: concrete dims or known symbols */
static int attr_shape(ictx *c, const char *name, const int64_t **v, int *n) {
  if (!attr_ints(c, name, -1, v, n)) return 0;
  if (*n > PC_MAX_RANK) {
    FAIL(c, PC_ERR_RANGE, "%s has %d dims, more than %d", name, *n, PC_MAX_RANK);
    return 0;
  }
  for (int i = 0; i < *n; i++)
    if (!dim_known(c->g, (*v)[i])) {
      FAIL(c, PC_ERR_ATTR, "%s %s: dim %d (%lld) is no symbol of the graph", name, ints_str(*v, *n).s, i,
           (long long)(*v)[i]);
      return 0;
    }
  return 1;
}

/* axes of a rank-`rank` operand, each in range and none twice; *mask gets them as bits */
static int check_axes(ictx *c, const char *name, const int64_t *v, int n, int rank, unsigned *mask) {
  for (int i = 0; i < n; i++) {
    if (v[i] < 0 || v[i] >= rank) {
      FAIL(c, PC_ERR_ATTR, "%s %s: axis %lld is out of range for rank %d", name, ints_str(v, n).s, (long long)v[i],
           rank);
      return 0;
    }
    if (*mask & (1u << v[i])) {
      FAIL(c, PC_ERR_ATTR, "%s %s: axis %lld appears twice", name, ints_str(v, n).s, (long long)v[i]);
      return 0;
    }
    *mask |= 1u << v[i];
  }
  return 1;
}

/* ---------------------------------------------------------------- small helpers */

static void set_shape(ictx *c, int i, int rank, const int64_t *dims) {
  c->out[i].rank = rank;
  memset(c->out[i].dims, 0, sizeof c->out[i].dims);
  for (int d = 0; d < rank; d++) c->out[i].dims[d] = dims[d];
}

static void set_type(ictx *c, int i, pc_dtype dt, int rank, const int64_t *dims) {
  c->out[i].dtype = dt;
  set_shape(c, i, rank, dims);
}

/* an operand that must carry operand 0's dtype */
static pc_status same_dtype(ictx *c, int i, const char *what) {
  if (IN(c, i)->dtype == IN(c, 0)->dtype) return PC_OK;
  return FAIL(c, PC_ERR_TYPE, "operand %d (%s) has dtype %s, expected %s like operand 0", i, what,
              pc_dtype_name(IN(c, i)->dtype), pc_dtype_name(IN(c, 0)->dtype));
}

static pc_status int_operand(ictx *c, int i, const char *what) {
  if (pc_dtype_is_int(IN(c, i)->dtype)) return PC_OK;
  return FAIL(c, PC_ERR_TYPE, "operand %d (%s) has dtype %s, expected an int dtype", i, what,
              pc_dtype_name(IN(c, i)->dtype));
}

static pc_status sym_unsupported(ictx *c, const char *what, int dim) {
  const pc_type *t = IN(c, 0);
  return FAIL(c, PC_ERR_UNSUPPORTED, "%s symbolic dim %d (%s) of %s is not supported", what, dim,
              dim_str(c->g, t->dims[dim]).s, type_str(c->g, t).s);
}

static int mul_ok(int64_t a, int64_t b, int64_t *r) { return !__builtin_mul_overflow(a, b, r); }
static int add_ok(int64_t a, int64_t b, int64_t *r) { return !__builtin_add_overflow(a, b, r); }

/* ---------------------------------------------------------------- elementwise */

/* UNARY/BINARY/TERNARY rows: operands of one shape and dtype */
static pc_status infer_elementwise(ictx *c) {
  const pc_type *t0 = IN(c, 0);
  for (int i = 1; i < c->n->n_in; i++) {
    const pc_type *t = IN(c, i);
    if (pc_type_equal(t, t0)) continue;
    int dt = t->dtype != t0->dtype;
    return FAIL(c, dt ? PC_ERR_TYPE : PC_ERR_SHAPE, "operand %d has %s %s, expected %s", i, dt ? "dtype" : "shape",
                type_str(c->g, t).s, type_str(c->g, t0).s);
  }
  set_shape(c, 0, t0->rank, t0->dims);
  return PC_OK;
}

static pc_status infer_where(ictx *c) {
  const pc_type *cond = IN(c, 0), *a = IN(c, 1), *b = IN(c, 2);
  if (cond->dtype != PC_bool)
    return FAIL(c, PC_ERR_TYPE, "operand 0 (condition) has dtype %s, expected bool", pc_dtype_name(cond->dtype));
  if (b->dtype != a->dtype)
    return FAIL(c, PC_ERR_TYPE, "operand 2 has dtype %s, expected %s", type_str(c->g, b).s, type_str(c->g, a).s);
  for (int i = 0; i < 3; i += 2) {
    const pc_type *t = IN(c, i);
    pc_type want = *a;
    want.dtype = t->dtype;
    if (!pc_type_equal(t, &want))
      return FAIL(c, PC_ERR_SHAPE, "operand %d has shape %s, expected %s", i, type_str(c->g, t).s,
                  type_str(c->g, &want).s);
  }
  set_type(c, 0, a->dtype, a->rank, a->dims);
  return PC_OK;
}

/* ---------------------------------------------------------------- type */

static pc_status infer_convert_element_type(ictx *c) {
  pc_dtype to;
  if (!attr_dtype(c, "dtype", &to)) return c->g->status;
  set_type(c, 0, to, IN(c, 0)->rank, IN(c, 0)->dims);
  return PC_OK;
}

/* same bytes reread: a wider dtype consumes the last dim (== ratio), a narrower one adds it */
static pc_status infer_bitcast(ictx *c) {
  const pc_type *x = IN(c, 0);
  pc_dtype to;
  if (!attr_dtype(c, "dtype", &to)) return c->g->status;
  size_t from_sz = pc_dtype_size(x->dtype), to_sz = pc_dtype_size(to);
  int64_t dims[PC_MAX_RANK + 1];
  memcpy(dims, x->dims, sizeof x->dims);
  int rank = x->rank;
  if (to_sz > from_sz) {
    int64_t ratio = (int64_t)(to_sz / from_sz);
    if (rank == 0 || x->dims[rank - 1] != ratio)
      return FAIL(c, PC_ERR_SHAPE, "bitcast %s to %s needs a last dim of %lld", type_str(c->g, x).s,
                  pc_dtype_name(to), (long long)ratio);
    rank--;
  } else if (to_sz < from_sz) {
    if (rank == PC_MAX_RANK)
      return FAIL(c, PC_ERR_RANGE, "bitcast %s to %s would exceed rank %d", type_str(c->g, x).s, pc_dtype_name(to),
                  PC_MAX_RANK);
    dims[rank++] = (int64_t)(from_sz / to_sz);
  }
  set_type(c, 0, to, rank, dims);
  return PC_OK;
}

/* ---------------------------------------------------------------- shape and movement */

static pc_status infer_broadcast_in_dim(ictx *c) {
  const pc_type *x = IN(c, 0);
  const int64_t *shape, *dims;
  int r;
  if (!attr_shape(c, "shape", &shape, &r) || !attr_ints(c, "dims", x->rank, &dims, NULL)) return c->g->status;
  for (int i = 0; i < x->rank; i++) {
    if (dims[i] < 0 || dims[i] >= r || (i > 0 && dims[i] <= dims[i - 1]))
      return FAIL(c, PC_ERR_ATTR, "dims %s must be increasing and below the result rank %d",
                  ints_str(dims, x->rank).s, r);
    int64_t d = x->dims[i], o = shape[dims[i]];
    if (d != 1 && d != o)
      return FAIL(c, PC_ERR_SHAPE, "operand %s dim %d (%s) cannot broadcast to result dim %lld (%s) of %s",
                  type_str(c->g, x).s, i, dim_str(c->g, d).s, (long long)dims[i], dim_str(c->g, o).s,
                  shape_str(c->g, shape, r).s);
  }
  set_shape(c, 0, r, shape);
  return PC_OK;
}

/* product of the concrete dims; 0 on overflow */
static int concrete_product(const int64_t *dims, int n, int64_t *p) {
  *p = 1;
  for (int i = 0; i < n; i++)
    if (dims[i] >= 0 && !mul_ok(*p, dims[i], p)) return 0;
  return 1;
}

/* symbolic dims survive a reshape only when the target names each of them again */
static pc_status reshape_symbols(ictx *c, const int64_t *shape, int r) {
  const pc_type *x = IN(c, 0);
  unsigned used = 0;
  for (int i = 0; i < x->rank; i++) {
    if (!PC_DIM_IS_SYM(x->dims[i])) continue;
    int j = 0;
    while (j < r && (shape[j] != x->dims[i] || (used & (1u << j)))) j++;
    if (j == r)
      return FAIL(c, PC_ERR_UNSUPPORTED, "reshape of %s to %s: symbolic dim %s is not kept",
                  type_str(c->g, x).s, shape_str(c->g, shape, r).s, dim_str(c->g, x->dims[i]).s);
    used |= 1u << j;
  }
  for (int j = 0; j < r; j++)
    if (PC_DIM_IS_SYM(shape[j]) && !(used & (1u << j)))
      return FAIL(c, PC_ERR_UNSUPPORTED, "reshape of %s to %s: symbolic dim %s does not come from the operand",
                  type_str(c->g, x).s, shape_str(c->g, shape, r).s, dim_str(c->g, shape[j]).s);
  return PC_OK;
}

static pc_status infer_reshape(ictx *c) {
  const pc_type *x = IN(c, 0);
  const int64_t *shape;
  int r;
  if (!attr_shape(c, "shape", &shape, &r)) return c->g->status;
  if (reshape_symbols(c, shape, r) != PC_OK) return c->g->status;
  int64_t a, b;
  if (!concrete_product(x->dims, x->rank, &a) || !concrete_product(shape, r, &b))
    return FAIL(c, PC_ERR_RANGE, "reshape of %s to %s: element count overflows", type_str(c->g, x).s,
                shape_str(c->g, shape, r).s);
  if (a != b)
    return FAIL(c, PC_ERR_SHAPE, "cannot reshape %s (%lld elements) to %s (%lld elements)", type_str(c->g, x).s,
                (long long)a, shape_str(c->g, shape, r).s, (long long)b);
  set_shape(c, 0, r, shape);
  return PC_OK;
}

static pc_status infer_transpose(ictx *c) {
  const pc_type *x = IN(c, 0);
  const int64_t *perm;
  int n;
  if (!attr_ints(c, "perm", -1, &perm, &n)) return c->g->status;
  unsigned seen = 0;
  int ok = n == x->rank;
  for (int i = 0; ok && i < n; i++) {
    ok = perm[i] >= 0 && perm[i] < n && !(seen & (1u << perm[i]));
    if (ok) seen |= 1u << perm[i];
  }
  if (!ok)
    return FAIL(c, PC_ERR_ATTR, "perm %s is not a permutation of %d dims", ints_str(perm, n).s, x->rank);
  int64_t dims[PC_MAX_RANK];
  for (int i = 0; i < n; i++) dims[i] = x->dims[perm[i]];
  set_shape(c, 0, n, dims);
  return PC_OK;
}

static pc_status infer_slice(ictx *c) {
  const pc_type *x = IN(c, 0);
  const int64_t *st, *li, *sd;
  if (!attr_ints(c, "start", x->rank, &st, NULL) || !attr_ints(c, "limit", x->rank, &li, NULL) ||
      !attr_ints(c, "stride", x->rank, &sd, NULL))
    return c->g->status;
  int64_t dims[PC_MAX_RANK];
  for (int i = 0; i < x->rank; i++) {
    int64_t d = x->dims[i];
    if (PC_DIM_IS_SYM(d)) {
      /* the whole symbolic dim: start 0, stride 1, limit naming the symbol itself */
      if (st[i] != 0 || sd[i] != 1 || li[i] != d) return sym_unsupported(c, "slicing", i);
      dims[i] = d;
      continue;
    }
    if (st[i] < 0 || sd[i] < 1 || li[i] < st[i] || li[i] > d)
      return FAIL(c, PC_ERR_ATTR, "dim %d of %s: start %lld, limit %lld, stride %lld do not fit size %lld", i,
                  type_str(c->g, x).s, (long long)st[i], (long long)li[i], (long long)sd[i], (long long)d);
    dims[i] = (li[i] - st[i] + sd[i] - 1) / sd[i];
  }
  set_shape(c, 0, x->rank, dims);
  return PC_OK;
}

static pc_status infer_pad(ictx *c) {
  const pc_type *x = IN(c, 0);
  const int64_t *lo, *hi, *in;
  double value;
  if (!attr_ints(c, "low", x->rank, &lo, NULL) || !attr_ints(c, "high", x->rank, &hi, NULL) ||
      !attr_ints(c, "interior", x->rank, &in, NULL) || !attr_float(c, "value", &value))
    return c->g->status;
  int64_t dims[PC_MAX_RANK];
  for (int i = 0; i < x->rank; i++) {
    int64_t d = x->dims[i];
    if (in[i] < 0)
      return FAIL(c, PC_ERR_ATTR, "interior %s must not be negative", ints_str(in, x->rank).s);
    if (PC_DIM_IS_SYM(d)) {
      if (lo[i] || hi[i] || in[i]) return sym_unsupported(c, "padding", i);
      dims[i] = d;
      continue;
    }
    int64_t gaps = d > 0 ? d - 1 : 0, o;
    if (!mul_ok(gaps, in[i], &o) || !add_ok(o, d, &o) || !add_ok(o, lo[i], &o) || !add_ok(o, hi[i], &o))
      return FAIL(c, PC_ERR_RANGE, "padding dim %d overflows", i);
    if (o < 0)
      return FAIL(c, PC_ERR_SHAPE, "dim %d of %s: low %lld, high %lld leave a negative size", i,
                  type_str(c->g, x).s, (long long)lo[i], (long long)hi[i]);
    dims[i] = o;
  }
  set_shape(c, 0, x->rank, dims);
  return PC_OK;
}

static pc_status infer_concatenate(ictx *c) {
  const pc_type *t0 = IN(c, 0);
  int axis;
  if (!attr_axis(c, "axis", t0->rank, &axis)) return c->g->status;
  int64_t dims[PC_MAX_RANK];
  memcpy(dims, t0->dims, sizeof dims);
  for (int i = 1; i < c->n->n_in; i++) {
    const pc_type *t = IN(c, i);
    if (t->dtype != t0->dtype)
      return FAIL(c, PC_ERR_TYPE, "operand %d has dtype %s, expected %s", i, type_str(c->g, t).s,
                  type_str(c->g, t0).s);
    int ok = t->rank == t0->rank;
    for (int d = 0; ok && d < t->rank; d++) ok = d == axis || t->dims[d] == t0->dims[d];
    if (!ok)
      return FAIL(c, PC_ERR_SHAPE, "operand %d has shape %s, expected %s except on axis %d", i,
                  type_str(c->g, t).s, type_str(c->g, t0).s, axis);
    if (PC_DIM_IS_SYM(t->dims[axis]) || PC_DIM_IS_SYM(dims[axis]))
      return FAIL(c, PC_ERR_UNSUPPORTED, "concatenating symbolic dims along axis %d (%s and %s) is not supported",
                  axis, type_str(c->g, t0).s, type_str(c->g, t).s);
    if (!add_ok(dims[axis], t->dims[axis], &dims[axis]))
      return FAIL(c, PC_ERR_RANGE, "concatenated size overflows");
  }
  set_shape(c, 0, t0->rank, dims);
  return PC_OK;
}

static pc_status infer_rev(ictx *c) {
  const pc_type *x = IN(c, 0);
  const int64_t *dims;
  int n;
  unsigned mask = 0;
  if (!attr_ints(c, "dims", -1, &dims, &n) || !check_axes(c, "dims", dims, n, x->rank, &mask))
    return c->g->status;
  set_shape(c, 0, x->rank, x->dims);
  return PC_OK;
}

static pc_status infer_iota(ictx *c) {
  pc_dtype dt;
  const int64_t *shape;
  int r, axis;
  if (!attr_dtype(c, "dtype", &dt) || !attr_shape(c, "shape", &shape, &r) || !attr_axis(c, "axis", r, &axis))
    return c->g->status;
  if (!pc_dtype_is_int(dt) && !pc_dtype_is_float(dt))
    return FAIL(c, PC_ERR_TYPE, "iota of dtype %s: expected an int or float dtype", pc_dtype_name(dt));
  set_type(c, 0, dt, r, shape);
  return PC_OK;
}

/* gather/scatter: indices of the operand's rank, no larger than it off the axis */
static pc_status index_fits(ictx *c, int idx_i, int axis) {
  const pc_type *x = IN(c, 0), *idx = IN(c, idx_i);
  if (idx->rank != x->rank)
    return FAIL(c, PC_ERR_SHAPE, "operand %d (indices) has shape %s, expected rank %d like %s", idx_i,
                type_str(c->g, idx).s, x->rank, type_str(c->g, x).s);
  for (int d = 0; d < x->rank; d++) {
    int64_t a = idx->dims[d], b = x->dims[d];
    if (d == axis || a == b) continue;
    if (PC_DIM_IS_SYM(a) || PC_DIM_IS_SYM(b))
      return FAIL(c, PC_ERR_UNSUPPORTED, "indices %s against %s: symbolic dim %d cannot be compared",
                  type_str(c->g, idx).s, type_str(c->g, x).s, d);
    if (a > b)
      return FAIL(c, PC_ERR_SHAPE, "indices %s exceed %s on dim %d", type_str(c->g, idx).s, type_str(c->g, x).s,
                  d);
  }
  return PC_OK;
}

static pc_status infer_gather(ictx *c) {
  const pc_type *x = IN(c, 0), *idx = IN(c, 1);
  int axis;
  if (int_operand(c, 1, "indices") || !attr_axis(c, "axis", x->rank, &axis) || index_fits(c, 1, axis))
    return c->g->status;
  set_shape(c, 0, idx->rank, idx->dims);
  return PC_OK;
}

static pc_status infer_scatter(ictx *c) {
  static const char *const reduces[] = {"none", "add", "mul", "max", "min", NULL};
  const pc_type *x = IN(c, 0), *idx = IN(c, 1), *upd = IN(c, 2);
  const char *red;
  int axis;
  if (int_operand(c, 1, "indices") || same_dtype(c, 2, "updates") || !attr_axis(c, "axis", x->rank, &axis) ||
      !attr_choice(c, "reduce", reduces, &red) || index_fits(c, 1, axis))
    return c->g->status;
  pc_type want = *idx;
  want.dtype = upd->dtype;
  if (!pc_type_equal(upd, &want))
    return FAIL(c, PC_ERR_SHAPE, "operand 2 (updates) has shape %s, expected %s like the indices",
                type_str(c->g, upd).s, type_str(c->g, &want).s);
  set_shape(c, 0, x->rank, x->dims);
  return PC_OK;
}

/* ---------------------------------------------------------------- reductions */

/* the operand's shape without the axes in mask */
static void drop_axes(ictx *c, unsigned mask) {
  const pc_type *x = IN(c, 0);
  int64_t dims[PC_MAX_RANK];
  int r = 0;
  for (int d = 0; d < x->rank; d++)
    if (!(mask & (1u << d))) dims[r++] = x->dims[d];
  set_shape(c, 0, r, dims);
}

static pc_status infer_reduce(ictx *c) {
  const int64_t *axes;
  int n;
  unsigned mask = 0;
  if (!attr_ints(c, "axes", -1, &axes, &n) || !check_axes(c, "axes", axes, n, IN(c, 0)->rank, &mask))
    return c->g->status;
  drop_axes(c, mask);
  return PC_OK;
}
#define infer_reduce_sum infer_reduce
#define infer_reduce_prod infer_reduce
#define infer_reduce_max infer_reduce
#define infer_reduce_min infer_reduce

static pc_status infer_arg(ictx *c) {
  const pc_type *x = IN(c, 0);
  int axis;
  int64_t last;
  if (!attr_axis(c, "axis", x->rank, &axis) || !attr_flag(c, "last", &last)) return c->g->status;
  if (x->dims[axis] == 0)
    return FAIL(c, PC_ERR_SHAPE, "axis %d of %s is empty: no index to return", axis, type_str(c->g, x).s);
  c->out[0].dtype = PC_i64;
  drop_axes(c, 1u << axis);
  return PC_OK;
}
#define infer_argmax infer_arg
#define infer_argmin infer_arg

static pc_status infer_cumsum(ictx *c) {
  const pc_type *x = IN(c, 0);
  int axis;
  int64_t ex, rev;
  if (!attr_axis(c, "axis", x->rank, &axis) || !attr_flag(c, "exclusive", &ex) || !attr_flag(c, "reverse", &rev))
    return c->g->status;
  set_shape(c, 0, x->rank, x->dims);
  return PC_OK;
}

/* ---------------------------------------------------------------- contractions */

typedef struct dims_attr {
  const int64_t *v;
  int n;
} dims_attr;

/* one side of dot_general: its batch and contracting dims in range and disjoint */
static int dot_side(ictx *c, const char *side, int rank, dims_attr batch, dims_attr con, unsigned *mask) {
  char bn[32], cn[32];
  snprintf(bn, sizeof bn, "%s_batch", side);
  snprintf(cn, sizeof cn, "%s_contract", side);
  if (!check_axes(c, bn, batch.v, batch.n, rank, mask)) return 0;
  for (int i = 0; i < con.n; i++)
    if (con.v[i] >= 0 && con.v[i] < rank && (*mask & (1u << con.v[i]))) {
      int in_batch = 0;
      for (int j = 0; j < batch.n; j++) in_batch |= batch.v[j] == con.v[i];
      if (in_batch) {
        FAIL(c, PC_ERR_ATTR, "%s %s and %s %s share dim %lld", bn, ints_str(batch.v, batch.n).s, cn,
             ints_str(con.v, con.n).s, (long long)con.v[i]);
        return 0;
      }
    }
  return check_axes(c, cn, con.v, con.n, rank, mask);
}

/* paired dims of lhs and rhs must have one size */
static int dot_sizes(ictx *c, const char *what, dims_attr l, dims_attr r) {
  const pc_type *a = IN(c, 0), *b = IN(c, 1);
  for (int i = 0; i < l.n; i++)
    if (a->dims[l.v[i]] != b->dims[r.v[i]]) {
      FAIL(c, PC_ERR_SHAPE, "%s dim pair %d: lhs %s dim %lld is %s, rhs %s dim %lld is %s", what, i,
           type_str(c->g, a).s, (long long)l.v[i], dim_str(c->g, a->dims[l.v[i]]).s, type_str(c->g, b).s,
           (long long)r.v[i], dim_str(c->g, b->dims[r.v[i]]).s);
      return 0;
    }
  return 1;
}

static pc_status infer_dot_general(ictx *c) {
  const pc_type *a = IN(c, 0), *b = IN(c, 1);
  dims_attr lc, rc, lb, rb;
  if (same_dtype(c, 1, "rhs") || !attr_ints(c, "lhs_contract", -1, &lc.v, &lc.n) ||
      !attr_ints(c, "rhs_contract", -1, &rc.v, &rc.n) || !attr_ints(c, "lhs_batch", -1, &lb.v, &lb.n) ||
      !attr_ints(c, "rhs_batch", -1, &rb.v, &rb.n))
    return c->g->status;
  if (lc.n != rc.n)
    return FAIL(c, PC_ERR_ATTR, "lhs_contract %s and rhs_contract %s differ in length", ints_str(lc.v, lc.n).s,
                ints_str(rc.v, rc.n).s);
  if (lb.n != rb.n)
    return FAIL(c, PC_ERR_ATTR, "lhs_batch %s and rhs_batch %s differ in length", ints_str(lb.v, lb.n).s,
                ints_str(rb.v, rb.n).s);
  unsigned lm = 0, rm = 0;
  if (!dot_side(c, "lhs", a->rank, lb, lc, &lm) || !dot_side(c, "rhs", b->rank, rb, rc, &rm) ||
      !dot_sizes(c, "batch", lb, rb) || !dot_sizes(c, "contracting", lc, rc))
    return c->g->status;
  int r = lb.n + (a->rank - lb.n - lc.n) + (b->rank - rb.n - rc.n);
  if (r > PC_MAX_RANK)
    return FAIL(c, PC_ERR_RANGE, "result of %s and %s has rank %d, more than %d", type_str(c->g, a).s,
                type_str(c->g, b).s, r, PC_MAX_RANK);
  int64_t dims[PC_MAX_RANK];
  int o = 0;
  for (int i = 0; i < lb.n; i++) dims[o++] = a->dims[lb.v[i]];
  for (int d = 0; d < a->rank; d++)
    if (!(lm & (1u << d))) dims[o++] = a->dims[d];
  for (int d = 0; d < b->rank; d++)
    if (!(rm & (1u << d))) dims[o++] = b->dims[d];
  set_type(c, 0, a->dtype, r, dims);
  return PC_OK;
}

typedef struct conv_attrs {
  const int64_t *stride, *pad_lo, *pad_hi, *dil, *lhs_dil;
  int64_t groups;
} conv_attrs;

static int conv_get_attrs(ictx *c, int ns, conv_attrs *k) {
  if (!attr_ints(c, "stride", ns, &k->stride, NULL) || !attr_ints(c, "pad_lo", ns, &k->pad_lo, NULL) ||
      !attr_ints(c, "pad_hi", ns, &k->pad_hi, NULL) || !attr_ints(c, "dilation", ns, &k->dil, NULL) ||
      !attr_ints(c, "lhs_dilation", ns, &k->lhs_dil, NULL) || !attr_int(c, "groups", 1, INT32_MAX, &k->groups))
    return 0;
  const char *names[3] = {"stride", "dilation", "lhs_dilation"};
  const int64_t *lists[3] = {k->stride, k->dil, k->lhs_dil};
  for (int j = 0; j < 3; j++)
    for (int i = 0; i < ns; i++)
      if (lists[j][i] < 1) {
        FAIL(c, PC_ERR_ATTR, "%s %s must be positive", names[j], ints_str(lists[j], ns).s);
        return 0;
      }
  return 1;
}

/* input channels C against kernel [O, C/groups, ...] */
static pc_status conv_channels(ictx *c, int64_t groups) {
  const pc_type *x = IN(c, 0), *w = IN(c, 1);
  int64_t ch = x->dims[1], o = w->dims[0], cg = w->dims[1];
  if (groups == 1) {
    if (ch == cg) return PC_OK;
    return FAIL(c, PC_ERR_SHAPE, "kernel %s has %s input channels, input %s has %s", type_str(c->g, w).s,
                dim_str(c->g, cg).s, type_str(c->g, x).s, dim_str(c->g, ch).s);
  }
  if (PC_DIM_IS_SYM(ch) || PC_DIM_IS_SYM(o) || PC_DIM_IS_SYM(cg))
    return FAIL(c, PC_ERR_UNSUPPORTED, "grouped conv of %s with kernel %s needs concrete channel counts",
                type_str(c->g, x).s, type_str(c->g, w).s);
  if (ch % groups || o % groups)
    return FAIL(c, PC_ERR_ATTR, "groups %lld does not divide %lld input and %lld output channels", (long long)groups,
                (long long)ch, (long long)o);
  if (cg != ch / groups)
    return FAIL(c, PC_ERR_SHAPE, "kernel %s has %lld input channels per group, expected %lld / %lld groups = %lld",
                type_str(c->g, w).s, (long long)cg, (long long)ch, (long long)groups, (long long)(ch / groups));
  return PC_OK;
}

/* one spatial dim: floor((in_dilated + pads - dilated kernel) / stride) + 1 */
static pc_status conv_spatial(ictx *c, const conv_attrs *k, int s, int64_t *out) {
  const pc_type *x = IN(c, 0), *w = IN(c, 1);
  int64_t in = x->dims[2 + s], kd = w->dims[2 + s];
  if (PC_DIM_IS_SYM(in)) return sym_unsupported(c, "convolving over", 2 + s);
  if (PC_DIM_IS_SYM(kd))
    return FAIL(c, PC_ERR_UNSUPPORTED, "kernel %s has a symbolic spatial dim", type_str(c->g, w).s);
  if (kd == 0) return FAIL(c, PC_ERR_SHAPE, "kernel %s has an empty spatial dim", type_str(c->g, w).s);
  int64_t in_d = 0, span, eff;
  if (in > 0 && (!mul_ok(in - 1, k->lhs_dil[s], &in_d) || !add_ok(in_d, 1, &in_d)))
    return FAIL(c, PC_ERR_RANGE, "dilated input overflows");
  if (!add_ok(in_d, k->pad_lo[s], &eff) || !add_ok(eff, k->pad_hi[s], &eff) || !mul_ok(k->dil[s], kd - 1, &span) ||
      !add_ok(span, 1, &span))
    return FAIL(c, PC_ERR_RANGE, "conv window arithmetic overflows on spatial dim %d", s);
  if (eff < span)
    return FAIL(c, PC_ERR_SHAPE, "spatial dim %d: padded input size %lld is smaller than the dilated kernel %lld", s,
                (long long)eff, (long long)span);
  *out = (eff - span) / k->stride[s] + 1;
  return PC_OK;
}

static pc_status infer_conv(ictx *c) {
  const pc_type *x = IN(c, 0), *w = IN(c, 1);
  if (same_dtype(c, 1, "kernel")) return c->g->status;
  if (x->rank < 3)
    return FAIL(c, PC_ERR_SHAPE, "input %s must be [N,C,spatial...] with at least one spatial dim",
                type_str(c->g, x).s);
  if (w->rank != x->rank)
    return FAIL(c, PC_ERR_SHAPE, "kernel has %d dims, input has %d", w->rank, x->rank);
  int ns = x->rank - 2;
  conv_attrs k;
  if (!conv_get_attrs(c, ns, &k) || conv_channels(c, k.groups)) return c->g->status;
  int64_t dims[PC_MAX_RANK] = {x->dims[0], w->dims[0]};
  for (int s = 0; s < ns; s++)
    if (conv_spatial(c, &k, s, &dims[2 + s])) return c->g->status;
  set_type(c, 0, x->dtype, x->rank, dims);
  return PC_OK;
}

/* ---------------------------------------------------------------- others kept whole */

typedef struct fft_row {
  const char *type;
  pc_dtype in, out;
  int half; /* result last dim length/2+1 */
} fft_row;

static const fft_row fft_rows[] = {
    {"fft", PC_c64, PC_c64, 0},
    {"ifft", PC_c64, PC_c64, 0},
    {"rfft", PC_f32, PC_c64, 1},
    {"irfft", PC_c64, PC_f32, 0},
};

static pc_status infer_fft(ictx *c) {
  static const char *const types[] = {"fft", "ifft", "rfft", "irfft", NULL};
  const pc_type *x = IN(c, 0);
  const char *type;
  int64_t len;
  if (!attr_choice(c, "type", types, &type) || !attr_int(c, "length", 1, INT64_MAX / 2, &len)) return c->g->status;
  const fft_row *row = fft_rows;
  while (strcmp(row->type, type) != 0) row++;
  if (x->dtype != row->in)
    return FAIL(c, PC_ERR_TYPE, "%s takes %s, got %s", type, pc_dtype_name(row->in), type_str(c->g, x).s);
  if (x->rank < 1) return FAIL(c, PC_ERR_SHAPE, "%s needs rank >= 1, got %s", type, type_str(c->g, x).s);
  int64_t dims[PC_MAX_RANK];
  memcpy(dims, x->dims, sizeof dims);
  dims[x->rank - 1] = row->half ? len / 2 + 1 : len;
  set_type(c, 0, row->out, x->rank, dims);
  return PC_OK;
}

/* values and i64 indices of the operand's shape, with axis size replaced by k */
static void values_indices(ictx *c, int axis, int64_t k) {
  const pc_type *x = IN(c, 0);
  int64_t dims[PC_MAX_RANK];
  memcpy(dims, x->dims, sizeof dims);
  dims[axis] = k;
  set_type(c, 0, x->dtype, x->rank, dims);
  set_type(c, 1, PC_i64, x->rank, dims);
}

static pc_status infer_sort(ictx *c) {
  const pc_type *x = IN(c, 0);
  int axis;
  int64_t desc;
  if (!attr_axis(c, "axis", x->rank, &axis) || !attr_flag(c, "descending", &desc)) return c->g->status;
  values_indices(c, axis, x->dims[axis]);
  return PC_OK;
}

static pc_status infer_topk(ictx *c) {
  const pc_type *x = IN(c, 0);
  int axis;
  int64_t k, largest;
  if (!attr_axis(c, "axis", x->rank, &axis) || !attr_int(c, "k", 0, INT64_MAX, &k) ||
      !attr_flag(c, "largest", &largest))
    return c->g->status;
  int64_t d = x->dims[axis];
  /* a symbolic axis is fine when its lower bound already holds k elements */
  int64_t avail = PC_DIM_IS_SYM(d) ? c->g->syms[PC_DIM_SYM_ID(d)].lo : d;
  if (k > avail) {
    if (PC_DIM_IS_SYM(d))
      return FAIL(c, PC_ERR_UNSUPPORTED, "k %lld may exceed symbolic axis %s of %s (at least %lld)", (long long)k,
                  dim_str(c->g, d).s, type_str(c->g, x).s, (long long)avail);
    return FAIL(c, PC_ERR_ATTR, "k %lld exceeds axis %d of %s", (long long)k, axis, type_str(c->g, x).s);
  }
  values_indices(c, axis, k);
  return PC_OK;
}

static pc_status infer_random(ictx *c) {
  static const char *const dists[] = {"uniform", "normal", NULL};
  pc_dtype dt;
  const int64_t *shape;
  int r;
  const char *dist;
  double a, b;
  int64_t seed;
  if (!attr_dtype(c, "dtype", &dt) || !attr_shape(c, "shape", &shape, &r) || !attr_choice(c, "dist", dists, &dist) ||
      !attr_float(c, "a", &a) || !attr_float(c, "b", &b) || !attr_int(c, "seed", INT64_MIN, INT64_MAX, &seed))
    return c->g->status;
  if (!pc_dtype_is_float(dt))
    return FAIL(c, PC_ERR_TYPE, "random of dtype %s: expected a float dtype", pc_dtype_name(dt));
  int normal = strcmp(dist, "normal") == 0;
  if (normal && !(b >= 0)) return FAIL(c, PC_ERR_ATTR, "normal stddev b = %g must not be negative", b);
  if (!normal && !(a <= b)) return FAIL(c, PC_ERR_ATTR, "uniform a = %g exceeds b = %g", a, b);
  set_type(c, 0, dt, r, shape);
  return PC_OK;
}

/* upper bound of the element count, symbols at their upper bounds, saturating */
static int64_t numel_bound(const pc_graph *g, const pc_type *t) {
  int64_t n = 1;
  for (int i = 0; i < t->rank; i++) {
    int64_t d = PC_DIM_IS_SYM(t->dims[i]) ? g->syms[PC_DIM_SYM_ID(t->dims[i])].hi : t->dims[i];
    if (d == 0) return 0;
    if (!mul_ok(n, d, &n)) n = INT64_MAX;
  }
  return n;
}

static int sym_in_use(const pc_graph *g, int s) {
  for (int i = 0; i < g->n_values; i++) {
    const pc_type *t = &g->values[i]->type;
    for (int d = 0; d < t->rank; d++)
      if (t->dims[d] == PC_SYM(s)) return 1;
  }
  return 0;
}

/* "nonzero_<node id>" (the id the node has, or will get from pc_node_add) so that printed text
 * parses back to the same symbol; suffixed when another value already counts with that name */
static int nonzero_sym(ictx *c, int64_t bound) {
  pc_graph *g = c->g;
  int id = c->n->id < g->n_nodes && g->nodes[c->n->id] == c->n ? c->n->id : g->n_nodes;
  char name[64];
  snprintf(name, sizeof name, "nonzero_%d", id);
  for (int k = 1; pc_sym_find(g, name) >= 0 && sym_in_use(g, pc_sym_find(g, name)); k++)
    snprintf(name, sizeof name, "nonzero_%d_%d", id, k);
  int s = pc_sym_add(g, name, 0, bound);
  if (s >= 0 && g->syms[s].hi > bound) g->syms[s].hi = bound;
  return s;
}

/* [rank, count] with count a new symbol bounded by numel; re-inference keeps the symbol it made */
static pc_status infer_nonzero(ictx *c) {
  const pc_type *x = IN(c, 0), *old = &c->n->out[0]->type;
  int64_t count = old->dims[1];
  int keep = old->dtype == PC_i64 && old->rank == 2 && old->dims[0] == x->rank && PC_DIM_IS_SYM(count) &&
             dim_known(c->g, count);
  if (!keep) {
    int s = nonzero_sym(c, numel_bound(c->g, x));
    if (s < 0) return c->g->status;
    count = PC_SYM(s);
  }
  int64_t dims[2] = {x->rank, count};
  set_type(c, 0, PC_i64, 2, dims);
  return PC_OK;
}

/* the builder sets the type; check it and the payload agree */
static pc_status infer_constant(ictx *c) {
  const pc_node *n = c->n;
  const pc_type *t = &c->out[0];
  int64_t numel = pc_type_numel(t);
  if (t->rank < 0 || t->rank > PC_MAX_RANK || (unsigned)t->dtype >= PC_DTYPE_COUNT)
    return FAIL(c, PC_ERR_INTERNAL, "constant has no valid type");
  if (numel < 0) return FAIL(c, PC_ERR_SHAPE, "constant %s has a symbolic dim", type_str(c->g, t).s);
  if (n->data) {
    int64_t want;
    if (!mul_ok(numel, (int64_t)pc_dtype_size(t->dtype), &want) || (uint64_t)want != (uint64_t)n->nbytes)
      return FAIL(c, PC_ERR_SHAPE, "constant %s holds %zu bytes, expected %lld", type_str(c->g, t).s, n->nbytes,
                  (long long)want);
  } else if (!pc_attr_str(n, "key", NULL)) {
    return FAIL(c, PC_ERR_ATTR, "constant %s has neither data nor a key", type_str(c->g, t).s);
  }
  return PC_OK;
}

/* ---------------------------------------------------------------- dispatch */

#define INFER_UNARY(name) infer_elementwise
#define INFER_BINARY(name) infer_elementwise
#define INFER_TERNARY(name) infer_elementwise
#define INFER_OTHER(name) infer_##name

static const infer_fn infer_table[PC_OP_COUNT] = {
#define PRIM(name, n_in, n_out, kind, operands, result, fuse, inl) [PC_OP_##name] = INFER_##kind(name),
#include "ir/prims.def"
#undef PRIM
};

static int type_valid(const pc_graph *g, const pc_type *t) {
  if (t->rank < 0 || t->rank > PC_MAX_RANK || (unsigned)t->dtype >= PC_DTYPE_COUNT) return 0;
  for (int i = 0; i < t->rank; i++)
    if (!dim_known(g, t->dims[i])) return 0;
  return 1;
}

/* arity, operand presence and validity, and the row's operand dtype class */
static pc_status check_operands(ictx *c, const pc_prim_info *p) {
  pc_node *n = c->n;
  if (p->n_in >= 0 ? n->n_in != p->n_in : n->n_in < 1)
    return p->n_in >= 0 ? FAIL(c, PC_ERR_ATTR, "takes %d operand%s, got %d", p->n_in, p->n_in == 1 ? "" : "s", n->n_in)
                        : FAIL(c, PC_ERR_ATTR, "takes at least one operand, got %d", n->n_in);
  if (n->n_out != p->n_out || n->n_out > MAX_OUT) return FAIL(c, PC_ERR_INTERNAL, "has %d outputs, expected %d", n->n_out, p->n_out);
  for (int i = 0; i < n->n_out; i++)
    if (!n->out[i]) return FAIL(c, PC_ERR_INTERNAL, "output %d is missing", i);
  for (int i = 0; i < n->n_in; i++) {
    if (!n->in[i]) return FAIL(c, PC_ERR_INTERNAL, "operand %d is missing", i);
    if (!type_valid(c->g, IN(c, i))) return FAIL(c, PC_ERR_INTERNAL, "operand %d has an invalid type", i);
  }
  if (n->n_in > 0 && !class_ok(p->operands, IN(c, 0)->dtype, n->op))
    return FAIL(c, PC_ERR_TYPE, "operand 0 has dtype %s, expected %s", pc_dtype_name(IN(c, 0)->dtype),
                class_names[p->operands]);
  return PC_OK;
}

/* the row's result column gives the dtype; SPECIAL rows start from the current type */
static void init_outputs(ictx *c, const pc_prim_info *p) {
  for (int i = 0; i < c->n->n_out; i++) {
    if (p->result == PC_RES_SPECIAL) {
      c->out[i] = c->n->out[i]->type;
      continue;
    }
    memset(&c->out[i], 0, sizeof c->out[i]);
    c->out[i].dtype = p->result == PC_RES_BOOL ? PC_bool : IN(c, 0)->dtype;
  }
}

/* results must be valid types of a sane size */
static pc_status check_results(ictx *c) {
  for (int i = 0; i < c->n->n_out; i++) {
    const pc_type *t = &c->out[i];
    if (!type_valid(c->g, t)) return FAIL(c, PC_ERR_INTERNAL, "inferred an invalid type for output %d", i);
    int64_t n;
    if (!concrete_product(t->dims, t->rank, &n) || n > MAX_NUMEL || !pc_type_size_ok(t))
      return FAIL(c, PC_ERR_RANGE, "result %s has too many elements", type_str(c->g, t).s);
  }
  return PC_OK;
}

pc_status pc_infer(pc_graph *g, pc_node *n) {
  if (g->status != PC_OK) return g->status;
  const pc_prim_info *p = pc_prim(n->op);
  if (!p) return pc_fail(g, PC_ERR_INTERNAL, "node %d has unknown prim %d", n->id, (int)n->op);
  ictx c = {.g = g, .n = n};
  if (check_operands(&c, p) != PC_OK) return g->status;
  init_outputs(&c, p);
  if (infer_table[n->op](&c) != PC_OK || check_results(&c) != PC_OK) return g->status;
  for (int i = 0; i < n->n_out; i++) n->out[i]->type = c.out[i];
  return PC_OK;
}
