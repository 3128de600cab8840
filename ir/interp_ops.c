/* ir/interp_ops.c: the reference interpreter's non-elementwise prims, one plain-loop function each (the semantic definition). */
#include "ir/interp_impl.h"
#include "runtime/primc_philox.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define FAIL(code, ...) pc_node_fail(c->g, n, code, __VA_ARGS__)

/* ---------------------------------------------------------------- helpers */

static void strides_of(const pc_tensor *t, int64_t *st) {
  int64_t s = 1;
  for (int i = t->rank - 1; i >= 0; i--) {
    st[i] = s;
    s *= t->dims[i];
  }
}

/* odometer step over dims; 0 after the last index */
static int next_index(int64_t *idx, const int64_t *dims, int rank) {
  for (int i = rank - 1; i >= 0; i--) {
    if (++idx[i] < dims[i]) return 1;
    idx[i] = 0;
  }
  return 0;
}

static void copy_elem(void *dst, int64_t di, const void *src, int64_t si, size_t es) {
  memcpy((char *)dst + (size_t)di * es, (const char *)src + (size_t)si * es, es);
}

/* an INTS attribute of exactly `want` entries (any count when want < 0); NULL after failing */
static const int64_t *ints_attr(pc_ictx *c, const pc_node *n, const char *name, int want, int *len) {
  int l = 0;
  const int64_t *v = pc_attr_ints(n, name, &l);
  if (!v) return FAIL(PC_ERR_ATTR, "missing attribute %s", name), NULL;
  if (want >= 0 && l != want) return FAIL(PC_ERR_ATTR, "%s has %d entries, expected %d", name, l, want), NULL;
  if (len) *len = l;
  return v;
}

/* an optional INTS attribute of `want` entries, defaulting every entry to dflt */
static int ints_or(pc_ictx *c, const pc_node *n, const char *name, int want, int64_t dflt, int64_t *out) {
  int l = 0;
  const int64_t *v = pc_attr_ints(n, name, &l);
  if (v && l != want) return FAIL(PC_ERR_ATTR, "%s has %d entries, expected %d", name, l, want), 0;
  for (int i = 0; i < want; i++) out[i] = v ? v[i] : dflt;
  return 1;
}

/* axis attribute, negative counting from the end; -1 after failing */
static int axis_attr(pc_ictx *c, const pc_node *n, const char *name, int rank) {
  const pc_attr *a = pc_attr_find(n, name);
  if (!a || a->kind != PC_ATTR_INT) return FAIL(PC_ERR_ATTR, "missing attribute %s", name), -1;
  int64_t ax = a->i < 0 ? a->i + rank : a->i;
  if (ax < 0 || ax >= rank) return FAIL(PC_ERR_ATTR, "%s %lld out of range for rank %d", name, (long long)a->i, rank), -1;
  return (int)ax;
}

/* splits shape around axis: outer * len * inner elements */
static void split_axis(const pc_tensor *t, int axis, int64_t *outer, int64_t *len, int64_t *inner) {
  *outer = *inner = 1;
  for (int i = 0; i < axis; i++) *outer *= t->dims[i];
  *len = t->dims[axis];
  for (int i = axis + 1; i < t->rank; i++) *inner *= t->dims[i];
}

static int same_dtype(pc_ictx *c, const pc_node *n, const pc_tensor *a, const pc_tensor *b) {
  if (a->dtype == b->dtype) return 1;
  FAIL(PC_ERR_TYPE, "operands are %s and %s", pc_dtype_name(a->dtype), pc_dtype_name(b->dtype));
  return 0;
}

/* ---------------------------------------------------------------- where, types */

pc_status pc_iop_where(pc_ictx *c, const pc_node *n, const pc_tensor *in, pc_tensor *out) {
  int64_t numel = pc_tensor_numel(&out[0]);
  for (int k = 0; k < 3; k++)
    if (pc_tensor_numel(&in[k]) != numel) return FAIL(PC_ERR_SHAPE, "operand %d differs in shape", k);
  if (in[0].dtype != PC_bool) return FAIL(PC_ERR_TYPE, "condition is %s, not bool", pc_dtype_name(in[0].dtype));
  if (!same_dtype(c, n, &in[1], &in[2])) return c->g->status;
  size_t es = pc_dtype_size(out[0].dtype);
  for (int64_t i = 0; i < numel; i++)
    copy_elem(out[0].data, i, ((const uint8_t *)in[0].data)[i] ? in[1].data : in[2].data, i, es);
  return PC_OK;
}

pc_status pc_iop_convert_element_type(pc_ictx *c, const pc_node *n, const pc_tensor *in, pc_tensor *out) {
  pc_dtype from = in[0].dtype, to = out[0].dtype;
  int64_t numel = pc_tensor_numel(&in[0]);
  if (from == PC_c64 && to == PC_c64) {
    memcpy(out[0].data, in[0].data, pc_tensor_nbytes(&in[0]));
    return PC_OK;
  }
  for (int64_t i = 0; i < numel; i++) {
    /* u64 above 2^63 reads as a negative int64: to a float it goes by its double value */
    if (pc_idomain_float(from) || (from == PC_u64 && pc_idomain_float(to)))
      pc_ist_d(to, out[0].data, i, pc_ild_d(from, in[0].data, i));
    else pc_ist_i(to, out[0].data, i, pc_ild_i(from, in[0].data, i));
  }
  return PC_OK;
}

pc_status pc_iop_bitcast(pc_ictx *c, const pc_node *n, const pc_tensor *in, pc_tensor *out) {
  size_t nb = pc_tensor_nbytes(&in[0]);
  if (nb != pc_tensor_nbytes(&out[0])) return FAIL(PC_ERR_SHAPE, "operand and result differ in byte size");
  if (nb) memcpy(out[0].data, in[0].data, nb);
  return PC_OK;
}

/* ---------------------------------------------------------------- movement */

pc_status pc_iop_broadcast_in_dim(pc_ictx *c, const pc_node *n, const pc_tensor *in, pc_tensor *out) {
  const int64_t *dims = ints_attr(c, n, "dims", in[0].rank, NULL);
  if (!dims) return c->g->status;
  int64_t ist[PC_MAX_RANK], step[PC_MAX_RANK] = {0}, idx[PC_MAX_RANK] = {0};
  strides_of(&in[0], ist);
  for (int i = 0; i < in[0].rank; i++) {
    if (dims[i] < 0 || dims[i] >= out[0].rank) return FAIL(PC_ERR_ATTR, "dims[%d] = %lld out of range", i, (long long)dims[i]);
    int64_t d = in[0].dims[i], od = out[0].dims[dims[i]];
    if (d != 1 && d != od) return FAIL(PC_ERR_SHAPE, "operand dim %d is %lld, result dim %lld", i, (long long)d, (long long)od);
    step[dims[i]] = d == 1 ? 0 : ist[i];
  }
  size_t es = pc_dtype_size(out[0].dtype);
  int64_t numel = pc_tensor_numel(&out[0]);
  for (int64_t k = 0; k < numel; k++, next_index(idx, out[0].dims, out[0].rank)) {
    int64_t off = 0;
    for (int i = 0; i < out[0].rank; i++) off += idx[i] * step[i];
    copy_elem(out[0].data, k, in[0].data, off, es);
  }
  return PC_OK;
}

pc_status pc_iop_reshape(pc_ictx *c, const pc_node *n, const pc_tensor *in, pc_tensor *out) {
  if (pc_tensor_numel(&in[0]) != pc_tensor_numel(&out[0])) return FAIL(PC_ERR_SHAPE, "element counts differ");
  size_t nb = pc_tensor_nbytes(&in[0]);
  if (nb) memcpy(out[0].data, in[0].data, nb);
  return PC_OK;
}

/* out[idx] = in[sum idx[i] * step[i] + base]: the shared loop of transpose, slice and rev */
static void strided_copy(const pc_tensor *in, pc_tensor *out, const int64_t *step, int64_t base) {
  int64_t idx[PC_MAX_RANK] = {0}, numel = pc_tensor_numel(out);
  size_t es = pc_dtype_size(out->dtype);
  for (int64_t k = 0; k < numel; k++, next_index(idx, out->dims, out->rank)) {
    int64_t off = base;
    for (int i = 0; i < out->rank; i++) off += idx[i] * step[i];
    copy_elem(out->data, k, in->data, off, es);
  }
}

pc_status pc_iop_transpose(pc_ictx *c, const pc_node *n, const pc_tensor *in, pc_tensor *out) {
  const int64_t *perm = ints_attr(c, n, "perm", in[0].rank, NULL);
  if (!perm) return c->g->status;
  int64_t ist[PC_MAX_RANK], step[PC_MAX_RANK];
  strides_of(&in[0], ist);
  for (int i = 0; i < in[0].rank; i++) {
    if (perm[i] < 0 || perm[i] >= in[0].rank || in[0].dims[perm[i]] != out[0].dims[i])
      return FAIL(PC_ERR_ATTR, "perm[%d] = %lld does not fit", i, (long long)perm[i]);
    step[i] = ist[perm[i]];
  }
  strided_copy(&in[0], &out[0], step, 0);
  return PC_OK;
}

pc_status pc_iop_slice(pc_ictx *c, const pc_node *n, const pc_tensor *in, pc_tensor *out) {
  int r = in[0].rank;
  const int64_t *start = ints_attr(c, n, "start", r, NULL), *limit = ints_attr(c, n, "limit", r, NULL);
  int64_t stride[PC_MAX_RANK], ist[PC_MAX_RANK], step[PC_MAX_RANK], base = 0;
  if (!start || !limit || !ints_or(c, n, "stride", r, 1, stride)) return c->g->status;
  strides_of(&in[0], ist);
  for (int i = 0; i < r; i++) {
    if (start[i] < 0 || stride[i] < 1 || limit[i] > in[0].dims[i] ||
        (out[0].dims[i] > 0 && start[i] + (out[0].dims[i] - 1) * stride[i] >= in[0].dims[i]))
      return FAIL(PC_ERR_ATTR, "dim %d: start %lld limit %lld stride %lld do not fit %lld", i, (long long)start[i],
                  (long long)limit[i], (long long)stride[i], (long long)in[0].dims[i]);
    base += start[i] * ist[i];
    step[i] = stride[i] * ist[i];
  }
  strided_copy(&in[0], &out[0], step, base);
  return PC_OK;
}

pc_status pc_iop_rev(pc_ictx *c, const pc_node *n, const pc_tensor *in, pc_tensor *out) {
  int nd = 0, r = in[0].rank;
  const int64_t *dims = ints_attr(c, n, "dims", -1, &nd);
  int64_t ist[PC_MAX_RANK], step[PC_MAX_RANK], base = 0;
  if (!dims) return c->g->status;
  strides_of(&in[0], ist);
  for (int i = 0; i < r; i++) step[i] = ist[i];
  for (int j = 0; j < nd; j++) {
    int64_t d = dims[j] < 0 ? dims[j] + r : dims[j];
    if (d < 0 || d >= r) return FAIL(PC_ERR_ATTR, "dims[%d] = %lld out of range", j, (long long)dims[j]);
    if (step[d] < 0) continue; /* listed twice: reversing once is what is meant */
    if (in[0].dims[d] > 0) base += (in[0].dims[d] - 1) * ist[d];
    step[d] = -ist[d];
  }
  strided_copy(&in[0], &out[0], step, base);
  return PC_OK;
}

pc_status pc_iop_pad(pc_ictx *c, const pc_node *n, const pc_tensor *in, pc_tensor *out) {
  int r = in[0].rank;
  const int64_t *lo = ints_attr(c, n, "low", r, NULL), *hi = ints_attr(c, n, "high", r, NULL);
  int64_t interior[PC_MAX_RANK], ost[PC_MAX_RANK], idx[PC_MAX_RANK] = {0};
  if (!lo || !hi || !ints_or(c, n, "interior", r, 0, interior)) return c->g->status;
  for (int i = 0; i < r; i++) {
    int64_t d = in[0].dims[i], want = lo[i] + hi[i] + d + (d > 0 ? (d - 1) * interior[i] : 0);
    if (interior[i] < 0 || want != out[0].dims[i])
      return FAIL(PC_ERR_ATTR, "dim %d: padding gives %lld, result has %lld", i, (long long)want, (long long)out[0].dims[i]);
  }
  double value = pc_attr_float(n, "value", 0.0);
  int64_t onum = pc_tensor_numel(&out[0]), inum = pc_tensor_numel(&in[0]);
  for (int64_t k = 0; k < onum; k++) pc_ist_d(out[0].dtype, out[0].data, k, value);
  strides_of(&out[0], ost);
  size_t es = pc_dtype_size(out[0].dtype);
  for (int64_t k = 0; k < inum; k++, next_index(idx, in[0].dims, r)) {
    int64_t off = 0;
    int inside = 1;
    for (int i = 0; i < r && inside; i++) {
      int64_t p = lo[i] + idx[i] * (interior[i] + 1);
      inside = p >= 0 && p < out[0].dims[i]; /* negative padding crops */
      off += p * ost[i];
    }
    if (inside) copy_elem(out[0].data, off, in[0].data, k, es);
  }
  return PC_OK;
}

pc_status pc_iop_concatenate(pc_ictx *c, const pc_node *n, const pc_tensor *in, pc_tensor *out) {
  int ax = axis_attr(c, n, "axis", out[0].rank);
  if (ax < 0) return c->g->status;
  int64_t outer, olen, inner, pos = 0;
  split_axis(&out[0], ax, &outer, &olen, &inner);
  size_t es = pc_dtype_size(out[0].dtype);
  for (int j = 0; j < n->n_in; j++) {
    if (!same_dtype(c, n, &in[j], &out[0])) return c->g->status;
    int64_t len = in[j].rank == out[0].rank ? in[j].dims[ax] : -1;
    if (len < 0 || pos + len > olen || pc_tensor_numel(&in[j]) != outer * len * inner)
      return FAIL(PC_ERR_SHAPE, "operand %d does not fit the result", j);
    for (int64_t o = 0; o < outer; o++)
      memcpy((char *)out[0].data + (size_t)((o * olen + pos) * inner) * es,
             (const char *)in[j].data + (size_t)(o * len * inner) * es, (size_t)(len * inner) * es);
    pos += len;
  }
  if (pos != olen) return FAIL(PC_ERR_SHAPE, "operands fill %lld of %lld along axis %d", (long long)pos, (long long)olen, ax);
  return PC_OK;
}

pc_status pc_iop_iota(pc_ictx *c, const pc_node *n, const pc_tensor *in, pc_tensor *out) {
  int ax = axis_attr(c, n, "axis", out[0].rank);
  if (ax < 0) return c->g->status;
  int64_t idx[PC_MAX_RANK] = {0}, numel = pc_tensor_numel(&out[0]);
  for (int64_t k = 0; k < numel; k++, next_index(idx, out[0].dims, out[0].rank))
    pc_ist_i(out[0].dtype, out[0].data, k, idx[ax]);
  return PC_OK;
}

/* gather's and scatter's shared walk: for every position of idx, the offset in x
 * (position with its axis coordinate replaced by the index) and in idx/upd; fails
 * on an index outside [0, x.dims[axis]) */
typedef struct index_walk {
  const pc_tensor *x, *idx;
  int axis;
  int64_t xst[PC_MAX_RANK], pos[PC_MAX_RANK], k;
} index_walk;

static int walk_check(pc_ictx *c, const pc_node *n, const pc_tensor *x, const pc_tensor *idx, int axis) {
  if (!pc_dtype_is_int(idx->dtype)) return FAIL(PC_ERR_TYPE, "indices are %s, not an integer type", pc_dtype_name(idx->dtype)), 0;
  if (idx->rank != x->rank) return FAIL(PC_ERR_SHAPE, "indices have rank %d, operand %d", idx->rank, x->rank), 0;
  for (int i = 0; i < x->rank; i++)
    if (i != axis && idx->dims[i] > x->dims[i])
      return FAIL(PC_ERR_SHAPE, "indices dim %d (%lld) exceeds the operand's (%lld)", i, (long long)idx->dims[i],
                  (long long)x->dims[i]), 0;
  return 1;
}

/* offset in x of walk position w->pos, or -1 after failing */
static int64_t walk_target(pc_ictx *c, const pc_node *n, const index_walk *w) {
  int64_t j = pc_ild_i(w->idx->dtype, w->idx->data, w->k), off = 0;
  if (j < 0 || j >= w->x->dims[w->axis])
    return FAIL(PC_ERR_RANGE, "index %lld out of range [0, %lld) on axis %d", (long long)j,
                (long long)w->x->dims[w->axis], w->axis), -1;
  for (int i = 0; i < w->x->rank; i++) off += (i == w->axis ? j : w->pos[i]) * w->xst[i];
  return off;
}

pc_status pc_iop_gather(pc_ictx *c, const pc_node *n, const pc_tensor *in, pc_tensor *out) {
  int ax = axis_attr(c, n, "axis", in[0].rank);
  if (ax < 0 || !walk_check(c, n, &in[0], &in[1], ax)) return c->g->status;
  index_walk w = {.x = &in[0], .idx = &in[1], .axis = ax};
  strides_of(&in[0], w.xst);
  size_t es = pc_dtype_size(in[0].dtype);
  int64_t numel = pc_tensor_numel(&in[1]);
  for (w.k = 0; w.k < numel; w.k++, next_index(w.pos, in[1].dims, in[1].rank)) {
    int64_t off = walk_target(c, n, &w);
    if (off < 0) return c->g->status;
    copy_elem(out[0].data, w.k, in[0].data, off, es);
  }
  return PC_OK;
}

typedef struct scatter_row {
  const char *name;
  double (*f)(double, double);
  int64_t (*i)(int64_t, int64_t);
  int64_t (*u)(int64_t, int64_t); /* u64 (held as int64 bits) where it differs from i */
} scatter_row;

static double sf_add(double a, double b) { return a + b; }
static double sf_mul(double a, double b) { return a * b; }
static int64_t si_max(int64_t a, int64_t b) { return a > b ? a : b; }
static int64_t si_min(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t su_max(int64_t a, int64_t b) { return (uint64_t)a > (uint64_t)b ? a : b; }
static int64_t su_min(int64_t a, int64_t b) { return (uint64_t)a < (uint64_t)b ? a : b; }

/* "none" has no combine functions: the update replaces (the last one in row-major order wins) */
static const scatter_row scatter_rows[] = {
    {"none", NULL, NULL, NULL}, {"add", sf_add, pc_iadd_wrap, pc_iadd_wrap}, {"mul", sf_mul, pc_imul_wrap, pc_imul_wrap},
    {"max", pc_fmax_nan, si_max, su_max}, {"min", pc_fmin_nan, si_min, su_min},
};

pc_status pc_iop_scatter(pc_ictx *c, const pc_node *n, const pc_tensor *in, pc_tensor *out) {
  int ax = axis_attr(c, n, "axis", in[0].rank);
  if (ax < 0 || !walk_check(c, n, &in[0], &in[1], ax) || !same_dtype(c, n, &in[0], &in[2])) return c->g->status;
  const char *red = pc_attr_str(n, "reduce", "none");
  const scatter_row *row = NULL;
  for (size_t i = 0; i < sizeof scatter_rows / sizeof *scatter_rows; i++)
    if (strcmp(scatter_rows[i].name, red) == 0) row = &scatter_rows[i];
  if (!row) return FAIL(PC_ERR_ATTR, "unknown reduce \"%s\"", red);
  if (in[2].rank != in[1].rank) return FAIL(PC_ERR_SHAPE, "updates have rank %d, indices %d", in[2].rank, in[1].rank);
  for (int i = 0; i < in[1].rank; i++)
    if (in[2].dims[i] < in[1].dims[i]) return FAIL(PC_ERR_SHAPE, "updates dim %d is smaller than the indices'", i);
  pc_dtype dt = in[0].dtype;
  size_t es = pc_dtype_size(dt);
  memcpy(out[0].data, in[0].data, pc_tensor_nbytes(&in[0]));
  index_walk w = {.x = &in[0], .idx = &in[1], .axis = ax};
  int64_t ust[PC_MAX_RANK], numel = pc_tensor_numel(&in[1]);
  strides_of(&in[0], w.xst);
  strides_of(&in[2], ust);
  for (w.k = 0; w.k < numel; w.k++, next_index(w.pos, in[1].dims, in[1].rank)) {
    int64_t off = walk_target(c, n, &w), u = 0;
    if (off < 0) return c->g->status;
    for (int i = 0; i < in[2].rank; i++) u += w.pos[i] * ust[i];
    if (!row->f) copy_elem(out[0].data, off, in[2].data, u, es);
    else if (pc_idomain_float(dt))
      pc_ist_d(dt, out[0].data, off, row->f(pc_ild_d(dt, out[0].data, off), pc_ild_d(dt, in[2].data, u)));
    else
      pc_ist_i(dt, out[0].data, off, (dt == PC_u64 ? row->u : row->i)(pc_ild_i(dt, out[0].data, off), pc_ild_i(dt, in[2].data, u)));
  }
  return PC_OK;
}

/* ---------------------------------------------------------------- reductions */

typedef struct reduce_row {
  double init_f;
  int64_t init_i;
  double (*f)(double, double);
  int64_t (*i)(int64_t, int64_t);
  int needs_elements; /* max/min of nothing is undefined */
  int64_t init_u;                   /* u64 (held as int64 bits): */
  int64_t (*u)(int64_t, int64_t);
} reduce_row;

PC_PRIMS_CHECKED(74); /* a row per reduce_* prim */
static const reduce_row reduce_rows[PC_OP_COUNT] = {
    [PC_OP_reduce_sum] = {0.0, 0, sf_add, pc_iadd_wrap, 0, 0, pc_iadd_wrap},
    [PC_OP_reduce_prod] = {1.0, 1, sf_mul, pc_imul_wrap, 0, 1, pc_imul_wrap},
    [PC_OP_reduce_max] = {-INFINITY, INT64_MIN, pc_fmax_nan, si_max, 1, 0, su_max},
    [PC_OP_reduce_min] = {INFINITY, INT64_MAX, pc_fmin_nan, si_min, 1, -1, su_min},
};

/* marks reduced axes; 0 after failing */
static int reduced_axes(pc_ictx *c, const pc_node *n, int rank, int *red) {
  int na = 0;
  const int64_t *axes = ints_attr(c, n, "axes", -1, &na);
  if (!axes) return 0;
  for (int i = 0; i < rank; i++) red[i] = 0;
  for (int j = 0; j < na; j++) {
    int64_t a = axes[j] < 0 ? axes[j] + rank : axes[j];
    if (a < 0 || a >= rank) return FAIL(PC_ERR_ATTR, "axes[%d] = %lld out of range", j, (long long)axes[j]), 0;
    red[a] = 1;
  }
  return 1;
}

/* Accumulates in double for floats and in wrapping int64 for ints, in row-major
 * order of the operand, then rounds once into the result. */
static pc_status run_reduce(pc_ictx *c, const pc_node *n, const pc_tensor *in, pc_tensor *out) {
  const reduce_row *row = &reduce_rows[n->op];
  int r = in[0].rank, red[PC_MAX_RANK];
  if (!reduced_axes(c, n, r, red)) return c->g->status;
  int64_t kept_st[PC_MAX_RANK], s = 1, idx[PC_MAX_RANK] = {0};
  for (int i = r - 1; i >= 0; i--) {
    kept_st[i] = red[i] ? 0 : s;
    s *= red[i] ? 1 : in[0].dims[i];
  }
  int64_t onum = pc_tensor_numel(&out[0]), inum = pc_tensor_numel(&in[0]);
  if (s != onum) return FAIL(PC_ERR_SHAPE, "result has %lld elements, expected %lld", (long long)onum, (long long)s);
  if (row->needs_elements && inum == 0 && onum > 0) return FAIL(PC_ERR_SHAPE, "reducing an empty axis");
  pc_dtype dt = in[0].dtype;
  int fl = pc_idomain_float(dt);
  if (dt == PC_c64 || dt == PC_bool) return FAIL(PC_ERR_TYPE, "not defined on %s", pc_dtype_name(dt));
  double *af = fl ? malloc(sizeof *af * (size_t)(onum ? onum : 1)) : NULL;
  int64_t *ai = fl ? NULL : malloc(sizeof *ai * (size_t)(onum ? onum : 1));
  if (!af && !ai) return FAIL(PC_ERR_NOMEM, "out of memory");
  int64_t (*fi)(int64_t, int64_t) = dt == PC_u64 ? row->u : row->i;
  for (int64_t k = 0; k < onum; k++) fl ? (af[k] = row->init_f) : (ai[k] = dt == PC_u64 ? row->init_u : row->init_i);
  for (int64_t k = 0; k < inum; k++, next_index(idx, in[0].dims, r)) {
    int64_t o = 0;
    for (int i = 0; i < r; i++) o += idx[i] * kept_st[i];
    if (fl) af[o] = row->f(af[o], pc_ild_d(dt, in[0].data, k));
    else ai[o] = fi(ai[o], pc_ild_i(dt, in[0].data, k));
  }
  for (int64_t k = 0; k < onum; k++) fl ? pc_ist_d(dt, out[0].data, k, af[k]) : pc_ist_i(dt, out[0].data, k, ai[k]);
  free(af);
  free(ai);
  return PC_OK;
}

pc_status pc_iop_reduce_sum(pc_ictx *c, const pc_node *n, const pc_tensor *in, pc_tensor *out) { return run_reduce(c, n, in, out); }
pc_status pc_iop_reduce_prod(pc_ictx *c, const pc_node *n, const pc_tensor *in, pc_tensor *out) { return run_reduce(c, n, in, out); }
pc_status pc_iop_reduce_max(pc_ictx *c, const pc_node *n, const pc_tensor *in, pc_tensor *out) { return run_reduce(c, n, in, out); }
pc_status pc_iop_reduce_min(pc_ictx *c, const pc_node *n, const pc_tensor *in, pc_tensor *out) { return run_reduce(c, n, in, out); }

/* -1, 0, 1 ordering of elements i and j of x; NaN orders above every number (and equal to NaN) */
static int cmp_elems(pc_dtype dt, const void *x, int64_t i, int64_t j) {
  if (pc_idomain_float(dt)) {
    double a = pc_ild_d(dt, x, i), b = pc_ild_d(dt, x, j);
    if (isnan(a) || isnan(b)) return isnan(a) - isnan(b);
    return (a > b) - (a < b);
  }
  int64_t a = pc_ild_i(dt, x, i), b = pc_ild_i(dt, x, j);
  if (dt == PC_u64) return ((uint64_t)a > (uint64_t)b) - ((uint64_t)a < (uint64_t)b);
  return (a > b) - (a < b);
}

/* argmax/argmin: first index of the extreme (last=1: last index); NaN wins as numpy's does */
static pc_status run_arg(pc_ictx *c, const pc_node *n, const pc_tensor *in, pc_tensor *out, int sign) {
  int ax = axis_attr(c, n, "axis", in[0].rank);
  if (ax < 0) return c->g->status;
  int last = (int)pc_attr_int(n, "last", 0);
  int64_t outer, len, inner;
  split_axis(&in[0], ax, &outer, &len, &inner);
  if (len == 0 && outer * inner > 0) return FAIL(PC_ERR_SHAPE, "arg-reduction over an empty axis");
  pc_dtype dt = in[0].dtype;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      int64_t base = o * len * inner + i, best = 0;
      for (int64_t j = 1; j < len; j++) {
        int64_t bi = base + best * inner, ji = base + j * inner;
        int d = cmp_elems(dt, in[0].data, ji, bi);
        int jn = pc_idomain_float(dt) && isnan(pc_ild_d(dt, in[0].data, ji));
        int bn = pc_idomain_float(dt) && isnan(pc_ild_d(dt, in[0].data, bi));
        if (jn || bn) d = jn - bn; /* NaN is the winner for argmin too */
        else d *= sign;
        if (d > 0 || (d == 0 && last)) best = j;
      }
      ((int64_t *)out[0].data)[o * inner + i] = best;
    }
  return PC_OK;
}

pc_status pc_iop_argmax(pc_ictx *c, const pc_node *n, const pc_tensor *in, pc_tensor *out) { return run_arg(c, n, in, out, 1); }
pc_status pc_iop_argmin(pc_ictx *c, const pc_node *n, const pc_tensor *in, pc_tensor *out) { return run_arg(c, n, in, out, -1); }

pc_status pc_iop_cumsum(pc_ictx *c, const pc_node *n, const pc_tensor *in, pc_tensor *out) {
  int ax = axis_attr(c, n, "axis", in[0].rank);
  if (ax < 0) return c->g->status;
  int excl = (int)pc_attr_int(n, "exclusive", 0), rev = (int)pc_attr_int(n, "reverse", 0);
  int64_t outer, len, inner;
  split_axis(&in[0], ax, &outer, &len, &inner);
  pc_dtype dt = in[0].dtype;
  int fl = pc_idomain_float(dt);
  if (dt == PC_c64 || dt == PC_bool) return FAIL(PC_ERR_TYPE, "not defined on %s", pc_dtype_name(dt));
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      double sf = 0;
      int64_t si = 0;
      for (int64_t t = 0; t < len; t++) {
        int64_t e = o * len * inner + (rev ? len - 1 - t : t) * inner + i;
        if (excl) fl ? pc_ist_d(dt, out[0].data, e, sf) : pc_ist_i(dt, out[0].data, e, si);
        if (fl) sf += pc_ild_d(dt, in[0].data, e);
        else si = pc_iadd_wrap(si, pc_ild_i(dt, in[0].data, e));
        if (!excl) fl ? pc_ist_d(dt, out[0].data, e, sf) : pc_ist_i(dt, out[0].data, e, si);
      }
    }
  return PC_OK;
}

/* ---------------------------------------------------------------- contractions */

/* marks the dims of an operand listed in an attribute; 0 after failing */
static int mark_dims(pc_ictx *c, const pc_node *n, const int64_t *v, int nv, int rank, int *mark, int tag) {
  for (int j = 0; j < nv; j++) {
    if (v[j] < 0 || v[j] >= rank || mark[v[j]]) return FAIL(PC_ERR_ATTR, "dim %lld listed twice or out of range", (long long)v[j]), 0;
    mark[v[j]] = tag;
  }
  return 1;
}

pc_status pc_iop_dot_general(pc_ictx *c, const pc_node *n, const pc_tensor *in, pc_tensor *out) {
  const pc_tensor *l = &in[0], *r = &in[1];
  int nc = 0, nb = 0, lm[PC_MAX_RANK] = {0}, rm[PC_MAX_RANK] = {0};
  const int64_t *lc = ints_attr(c, n, "lhs_contract", -1, &nc), *rc = ints_attr(c, n, "rhs_contract", nc, NULL);
  const int64_t *lb = lc && rc ? ints_attr(c, n, "lhs_batch", -1, &nb) : NULL;
  const int64_t *rb = lb ? ints_attr(c, n, "rhs_batch", nb, NULL) : NULL;
  if (!rb || !same_dtype(c, n, l, r)) return c->g->status;
  if (!mark_dims(c, n, lc, nc, l->rank, lm, 1) || !mark_dims(c, n, lb, nb, l->rank, lm, 2) ||
      !mark_dims(c, n, rc, nc, r->rank, rm, 1) || !mark_dims(c, n, rb, nb, r->rank, rm, 2))
    return c->g->status;
  int64_t lst[PC_MAX_RANK], rst[PC_MAX_RANK], ol[PC_MAX_RANK] = {0}, orr[PC_MAX_RANK] = {0};
  int64_t cd[PC_MAX_RANK], cl[PC_MAX_RANK], cr[PC_MAX_RANK];
  strides_of(l, lst);
  strides_of(r, rst);
  int o = 0;
  for (int j = 0; j < nb; j++, o++) {
    if (l->dims[lb[j]] != r->dims[rb[j]]) return FAIL(PC_ERR_SHAPE, "batch dims %d differ", j);
    ol[o] = lst[lb[j]], orr[o] = rst[rb[j]];
  }
  for (int i = 0; i < l->rank; i++)
    if (!lm[i]) ol[o++] = lst[i];
  for (int i = 0; i < r->rank; i++)
    if (!rm[i]) orr[o++] = rst[i];
  if (o != out[0].rank) return FAIL(PC_ERR_SHAPE, "result rank %d, expected %d", out[0].rank, o);
  for (int j = 0; j < nc; j++) {
    if (l->dims[lc[j]] != r->dims[rc[j]]) return FAIL(PC_ERR_SHAPE, "contracting dims %d differ", j);
    cd[j] = l->dims[lc[j]], cl[j] = lst[lc[j]], cr[j] = rst[rc[j]];
  }
  pc_dtype dt = l->dtype;
  if (dt == PC_c64 || dt == PC_bool) return FAIL(PC_ERR_TYPE, "not defined on %s", pc_dtype_name(dt));
  int fl = pc_idomain_float(dt);
  int64_t csize = 1, idx[PC_MAX_RANK] = {0}, onum = pc_tensor_numel(&out[0]);
  for (int j = 0; j < nc; j++) csize *= cd[j];
  for (int64_t k = 0; k < onum; k++, next_index(idx, out[0].dims, out[0].rank)) {
    int64_t lo = 0, ro = 0, ci[PC_MAX_RANK] = {0};
    for (int i = 0; i < out[0].rank; i++) lo += idx[i] * ol[i], ro += idx[i] * orr[i];
    double sf = 0;
    int64_t si = 0;
    for (int64_t t = 0; t < csize; t++, next_index(ci, cd, nc)) {
      int64_t a = lo, b = ro;
      for (int j = 0; j < nc; j++) a += ci[j] * cl[j], b += ci[j] * cr[j];
      if (fl) sf += pc_ild_d(dt, l->data, a) * pc_ild_d(dt, r->data, b);
      else si = pc_iadd_wrap(si, pc_imul_wrap(pc_ild_i(dt, l->data, a), pc_ild_i(dt, r->data, b)));
    }
    fl ? pc_ist_d(dt, out[0].data, k, sf) : pc_ist_i(dt, out[0].data, k, si);
  }
  return PC_OK;
}

typedef struct conv_geom {
  int ns; /* spatial dims */
  int64_t stride[PC_MAX_RANK], lo[PC_MAX_RANK], dil[PC_MAX_RANK], ldil[PC_MAX_RANK];
} conv_geom;

/* input offset (spatial part) read by output position os and kernel position ks, or -1 for padding/holes */
static int64_t conv_src(const conv_geom *cg, const pc_tensor *x, const int64_t *xst, const int64_t *os, const int64_t *ks) {
  int64_t off = 0;
  for (int d = 0; d < cg->ns; d++) {
    int64_t p = os[d] * cg->stride[d] + ks[d] * cg->dil[d] - cg->lo[d];
    if (p < 0 || p % cg->ldil[d]) return -1;
    p /= cg->ldil[d];
    if (p >= x->dims[2 + d]) return -1;
    off += p * xst[2 + d];
  }
  return off;
}

pc_status pc_iop_conv(pc_ictx *c, const pc_node *n, const pc_tensor *in, pc_tensor *out) {
  const pc_tensor *x = &in[0], *w = &in[1];
  conv_geom cg = {.ns = x->rank - 2};
  int64_t hi[PC_MAX_RANK];
  if (cg.ns < 0 || w->rank != x->rank || out[0].rank != x->rank) return FAIL(PC_ERR_SHAPE, "operand ranks do not agree");
  if (!same_dtype(c, n, x, w) || !ints_or(c, n, "stride", cg.ns, 1, cg.stride) || !ints_or(c, n, "pad_lo", cg.ns, 0, cg.lo) ||
      !ints_or(c, n, "pad_hi", cg.ns, 0, hi) || !ints_or(c, n, "dilation", cg.ns, 1, cg.dil) ||
      !ints_or(c, n, "lhs_dilation", cg.ns, 1, cg.ldil))
    return c->g->status;
  int64_t groups = pc_attr_int(n, "groups", 1), N = x->dims[0], C = x->dims[1], O = w->dims[0];
  for (int d = 0; d < cg.ns; d++)
    if (cg.stride[d] < 1 || cg.dil[d] < 1 || cg.ldil[d] < 1) return FAIL(PC_ERR_ATTR, "stride and dilations must be >= 1");
  if (groups < 1 || C % groups || O % groups || w->dims[1] != C / groups || out[0].dims[1] != O || out[0].dims[0] != N)
    return FAIL(PC_ERR_SHAPE, "channels %lld, filters %lld x %lld do not fit %lld groups", (long long)C, (long long)O,
                (long long)w->dims[1], (long long)groups);
  pc_dtype dt = x->dtype;
  if (dt == PC_c64 || dt == PC_bool) return FAIL(PC_ERR_TYPE, "not defined on %s", pc_dtype_name(dt));
  int fl = pc_idomain_float(dt);
  int64_t xst[PC_MAX_RANK], wst[PC_MAX_RANK], cg_in = C / groups, og = O / groups;
  strides_of(x, xst);
  strides_of(w, wst);
  int64_t ksp = 1, idx[PC_MAX_RANK] = {0};
  for (int d = 0; d < cg.ns; d++) ksp *= w->dims[2 + d];
  int64_t onum = pc_tensor_numel(&out[0]);
  for (int64_t k = 0; k < onum; k++, next_index(idx, out[0].dims, out[0].rank)) {
    int64_t b = idx[0], o = idx[1], g0 = o / og * cg_in, ks[PC_MAX_RANK] = {0};
    double sf = 0;
    int64_t si = 0;
    for (int64_t t = 0; t < ksp; t++, next_index(ks, w->dims + 2, cg.ns)) {
      int64_t src = conv_src(&cg, x, xst, idx + 2, ks), woff = o * wst[0];
      if (src < 0) continue;
      for (int d = 0; d < cg.ns; d++) woff += ks[d] * wst[2 + d];
      for (int64_t ci = 0; ci < cg_in; ci++) {
        int64_t xa = b * xst[0] + (g0 + ci) * xst[1] + src, wa = woff + ci * wst[1];
        if (fl) sf += pc_ild_d(dt, x->data, xa) * pc_ild_d(dt, w->data, wa);
        else si = pc_iadd_wrap(si, pc_imul_wrap(pc_ild_i(dt, x->data, xa), pc_ild_i(dt, w->data, wa)));
      }
    }
    fl ? pc_ist_d(dt, out[0].data, k, sf) : pc_ist_i(dt, out[0].data, k, si);
  }
  return PC_OK;
}

/* ---------------------------------------------------------------- fft */

typedef struct fft_row {
  const char *name;
  int cin, cout, inverse;
} fft_row;

static const fft_row fft_rows[] = {
    {"fft", 1, 1, 0}, {"ifft", 1, 1, 1}, {"rfft", 0, 1, 0}, {"irfft", 1, 0, 1},
};

/* e^(sign 2 pi i k t / len), the angle reduced mod len first so large k*t stay accurate */
static void twiddle(int64_t k, int64_t t, int64_t len, int sign, double *re, double *im) {
  double a = sign * 2.0 * M_PI * (double)((k * t) % len) / (double)len;
  *re = cos(a);
  *im = sin(a);
}

/* Naive DFT in double over the last dim, numpy's conventions: the input is cut or
 * zero-padded to `length` (irfft: to length/2+1 bins, imaginary parts of bin 0 and
 * the Nyquist bin ignored); inverses scale by 1/length. */
pc_status pc_iop_fft(pc_ictx *c, const pc_node *n, const pc_tensor *in, pc_tensor *out) {
  const char *type = pc_attr_str(n, "type", "");
  const fft_row *row = NULL;
  for (size_t i = 0; i < sizeof fft_rows / sizeof *fft_rows; i++)
    if (strcmp(fft_rows[i].name, type) == 0) row = &fft_rows[i];
  if (!row) return FAIL(PC_ERR_ATTR, "unknown fft type \"%s\"", type);
  int64_t len = pc_attr_int(n, "length", -1);
  if (in[0].rank < 1 || len < 1) return FAIL(PC_ERR_ATTR, "fft needs rank >= 1 and length >= 1");
  if ((in[0].dtype == PC_c64) != row->cin || (out[0].dtype == PC_c64) != row->cout)
    return FAIL(PC_ERR_TYPE, "%s does not map %s to %s", type, pc_dtype_name(in[0].dtype), pc_dtype_name(out[0].dtype));
  int64_t mi = in[0].dims[in[0].rank - 1], mo = out[0].dims[out[0].rank - 1];
  int64_t rows = mi ? pc_tensor_numel(&in[0]) / mi : 0;
  int64_t use = row->cout ? len : len / 2 + 1; /* input bins or samples read */
  if (!row->cin) use = len;
  double scale = row->inverse ? 1.0 / (double)len : 1.0;
  const float *cx = in[0].data;
  float *co = out[0].data;
  for (int64_t rw = 0; rw < rows; rw++)
    for (int64_t k = 0; k < mo; k++) {
      double sr = 0, si = 0, wr, wi;
      for (int64_t t = 0; t < use && t < mi; t++) {
        double xr = row->cin ? cx[2 * (rw * mi + t)] : pc_ild_d(in[0].dtype, in[0].data, rw * mi + t);
        double xi = row->cin ? cx[2 * (rw * mi + t) + 1] : 0;
        twiddle(k, t, len, row->inverse ? 1 : -1, &wr, &wi);
        if (row->cout) {
          sr += xr * wr - xi * wi;
          si += xr * wi + xi * wr;
          continue;
        }
        /* irfft: bin t stands for itself and its conjugate mirror len - t */
        int mirrored = t > 0 && 2 * t != len;
        if (t == 0 || 2 * t == len) xi = 0;
        sr += (mirrored ? 2.0 : 1.0) * (xr * wr - xi * wi);
      }
      if (row->cout) {
        co[2 * (rw * mo + k)] = (float)(sr * scale);
        co[2 * (rw * mo + k) + 1] = (float)(si * scale);
      } else {
        pc_ist_d(out[0].dtype, out[0].data, rw * mo + k, sr * scale);
      }
    }
  return PC_OK;
}

/* ---------------------------------------------------------------- sort, topk */

typedef struct sort_line {
  pc_dtype dt;
  const void *x;
  int64_t base, inner;
  int desc;
} sort_line;

/* ascending or descending by value; NaN after every number either way (as runtime/kernels_axis.c) */
static int sort_before(const sort_line *s, int64_t a, int64_t b) {
  int64_t ia = s->base + a * s->inner, ib = s->base + b * s->inner;
  if (pc_idomain_float(s->dt)) {
    int na = isnan(pc_ild_d(s->dt, s->x, ia)), nb = isnan(pc_ild_d(s->dt, s->x, ib));
    if (na || nb) return nb && !na;
  }
  int d = cmp_elems(s->dt, s->x, ia, ib);
  return s->desc ? d > 0 : d < 0;
}

/* stable: an element moves ahead of an earlier one only when strictly before it */
static void merge_sort(const sort_line *s, int64_t *v, int64_t *tmp, int64_t len) {
  if (len < 2) return;
  int64_t h = len / 2, i = 0, j = h, k = 0;
  merge_sort(s, v, tmp, h);
  merge_sort(s, v + h, tmp, len - h);
  while (i < h || j < len) tmp[k++] = j >= len || (i < h && !sort_before(s, v[j], v[i])) ? v[i++] : v[j++];
  memcpy(v, tmp, sizeof *v * (size_t)len);
}

static pc_status run_sort(pc_ictx *c, const pc_node *n, const pc_tensor *in, pc_tensor *out, int64_t k, int desc) {
  int ax = axis_attr(c, n, "axis", in[0].rank);
  if (ax < 0) return c->g->status;
  int64_t outer, len, inner;
  split_axis(&in[0], ax, &outer, &len, &inner);
  if (k < 0 || k > len || out[0].dims[ax] != k) return FAIL(PC_ERR_ATTR, "k = %lld does not fit a dim of %lld", (long long)k, (long long)len);
  int64_t *perm = malloc(sizeof *perm * (size_t)(2 * len + 1));
  if (!perm) return FAIL(PC_ERR_NOMEM, "out of memory");
  size_t es = pc_dtype_size(in[0].dtype);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      sort_line s = {in[0].dtype, in[0].data, o * len * inner + i, inner, desc};
      for (int64_t t = 0; t < len; t++) perm[t] = t;
      merge_sort(&s, perm, perm + len, len);
      for (int64_t t = 0; t < k; t++) {
        int64_t e = (o * k + t) * inner + i;
        copy_elem(out[0].data, e, in[0].data, s.base + perm[t] * inner, es);
        ((int64_t *)out[1].data)[e] = perm[t];
      }
    }
  free(perm);
  return PC_OK;
}

pc_status pc_iop_sort(pc_ictx *c, const pc_node *n, const pc_tensor *in, pc_tensor *out) {
  int ax = axis_attr(c, n, "axis", in[0].rank);
  if (ax < 0) return c->g->status;
  return run_sort(c, n, in, out, in[0].dims[ax], (int)pc_attr_int(n, "descending", 0));
}

pc_status pc_iop_topk(pc_ictx *c, const pc_node *n, const pc_tensor *in, pc_tensor *out) {
  return run_sort(c, n, in, out, pc_attr_int(n, "k", -1), (int)pc_attr_int(n, "largest", 1));
}

/* ---------------------------------------------------------------- random */

/* Element i draws primc_philox_draw (runtime/primc_philox.h, the compiled kernel's stream too); a uniform float
 * is kept below b after rounding; int dtypes (which pc_infer rejects today) take its floor. */
pc_status pc_iop_random(pc_ictx *c, const pc_node *n, const pc_tensor *in, pc_tensor *out) {
  const char *dist = pc_attr_str(n, "dist", "uniform");
  int normal = strcmp(dist, "normal") == 0;
  if (!normal && strcmp(dist, "uniform") != 0) return FAIL(PC_ERR_ATTR, "unknown dist \"%s\"", dist);
  double a = pc_attr_float(n, "a", 0.0), b = pc_attr_float(n, "b", 1.0);
  uint64_t seed = (uint64_t)pc_attr_int(n, "seed", 0);
  pc_dtype dt = out[0].dtype;
  if (dt == PC_c64) return FAIL(PC_ERR_TYPE, "not defined on c64");
  int fl = pc_dtype_is_float(dt);
  if (!normal && !(b >= a)) return FAIL(PC_ERR_ATTR, "uniform needs a <= b (a = %g, b = %g)", a, b);
  int64_t numel = pc_tensor_numel(&out[0]);
  for (int64_t i = 0; i < numel; i++) {
    double v = primc_philox_draw(seed, i, normal, a, b);
    if (fl || normal) {
      pc_ist_d(dt, out[0].data, i, v);
      if (fl && !normal && b > a && pc_ild_d(dt, out[0].data, i) >= b) primc_philox_below(pc_dtype_size(dt), out[0].data, i);
    } else {
      double f = floor(v);
      pc_ist_d(dt, out[0].data, i, f >= b ? ceil(b) - 1 : f);
    }
  }
  return PC_OK;
}

/* ---------------------------------------------------------------- nonzero, constant */

pc_status pc_iop_nonzero(pc_ictx *c, const pc_node *n, const pc_tensor *in, pc_tensor *out) {
  const pc_tensor *x = &in[0];
  int64_t numel = pc_tensor_numel(x), count = 0, idx[PC_MAX_RANK] = {0};
  int cplx = x->dtype == PC_c64;
  for (int64_t k = 0; k < numel; k++) {
    int nz = cplx ? ((const float *)x->data)[2 * k] != 0 || ((const float *)x->data)[2 * k + 1] != 0
                  : pc_ild_d(x->dtype, x->data, k) != 0;
    count += nz;
  }
  if (out[0].data && out[0].dims[1] != count)
    return FAIL(PC_ERR_SHAPE, "%lld nonzeros, but the result's dim is bound to %lld", (long long)count, (long long)out[0].dims[1]);
  if (!out[0].data) {
    out[0].dims[0] = x->rank;
    out[0].dims[1] = count;
    out[0].data = calloc((size_t)(x->rank * count) + 1, sizeof(int64_t));
    if (!out[0].data) return FAIL(PC_ERR_NOMEM, "out of memory");
  }
  int64_t *o = out[0].data, j = 0;
  for (int64_t k = 0; k < numel; k++, next_index(idx, x->dims, x->rank)) {
    int nz = cplx ? ((const float *)x->data)[2 * k] != 0 || ((const float *)x->data)[2 * k + 1] != 0
                  : pc_ild_d(x->dtype, x->data, k) != 0;
    if (!nz) continue;
    for (int d = 0; d < x->rank; d++) o[d * count + j] = idx[d];
    j++;
  }
  return PC_OK;
}

pc_status pc_iop_constant(pc_ictx *c, const pc_node *n, const pc_tensor *in, pc_tensor *out) {
  size_t nb = pc_tensor_nbytes(&out[0]);
  if (!n->data && nb) return FAIL(PC_ERR_UNSUPPORTED, "constant \"%s\" has no data bound", pc_attr_str(n, "key", "?"));
  if (n->nbytes != nb) return FAIL(PC_ERR_INTERNAL, "constant holds %zu bytes, its type needs %zu", n->nbytes, nb);
  if (nb) memcpy(out[0].data, n->data, nb);
  return PC_OK;
}
