/* frontend/onnx_gather.c: decompositions of the ONNX indexing ops into the gather and scatter prims: Gather,
 * Compress, GatherElements, GatherND, ScatterElements, ScatterND, OneHot, ReverseSequence, Scatter and
 * TensorScatter. */
#include "frontend/onnx_internal.h"

#include <string.h>

#define G (c->g)
#define X0 ox_in_req(c, 0)

/* normalizes negative indices of idx into [0, n) by adding n where idx < 0 */
static pc_value *wrap_index(ox_ctx *c, pc_value *idx, pc_value *n_like) {
  if (!idx) return NULL;
  pc_value *zero = ox_like(c, 0, idx);
  return pc_where(G, pc_lt(G, idx, zero), pc_add(G, idx, n_like), idx);
}

static pc_value *wrap_index_n(ox_ctx *c, pc_value *idx, int64_t n) {
  return idx ? wrap_index(c, idx, ox_like(c, (double)n, idx)) : NULL;
}

static pc_value *to_i64(ox_ctx *c, pc_value *x) { return x ? pc_convert(G, x, PC_i64) : NULL; }

/* broadcasts x to out shape, mapping x's dims to the given output dims */
static pc_value *bcast_dims(ox_ctx *c, pc_value *x, int rank, const int64_t *shape, const int64_t *dims) {
  if (!x) return NULL;
  int same = x->type.rank == rank;
  for (int i = 0; same && i < rank; i++) same = x->type.dims[i] == shape[i] && dims[i] == i;
  return same ? x : pc_broadcast_in_dim(G, x, rank, shape, dims);
}

/* numpy take along axis: out = x.shape[:axis] + idx.shape + x.shape[axis+1:] */
static pc_value *take_nd(ox_ctx *c, pc_value *x, pc_value *idx, int axis);

static pc_value *take(ox_ctx *c, pc_value *x, pc_value *idx, int axis) {
  if (!x || !idx) return NULL;
  if (idx->type.rank > 0) return take_nd(c, x, idx, axis);
  /* a scalar index: take with a [1] index, then drop that dim */
  int64_t one = 1, s[PC_MAX_RANK];
  pc_value *y = take_nd(c, x, ox_reshape(c, idx, 1, &one), axis);
  if (!y || y->type.rank != x->type.rank) return y ? ox_fail(c, PC_ERR_INTERNAL, "take: bad rank"), NULL : NULL;
  int k = 0;
  for (int i = 0; i < y->type.rank; i++)
    if (i != axis) s[k++] = y->type.dims[i];
  return ox_reshape(c, y, k, s);
}

static pc_value *take_nd(ox_ctx *c, pc_value *x, pc_value *idx, int axis) {
  if (!x || !idx) return NULL;
  int r = x->type.rank, q = idx->type.rank;
  if (q < 1) return ox_fail(c, PC_ERR_INTERNAL, "take: scalar index"), NULL;
  int orank = r - 1 + q;
  if (orank > PC_MAX_RANK) return ox_fail(c, PC_ERR_RANGE, "result rank %d exceeds %d", orank, PC_MAX_RANK), NULL;
  int64_t oshape[PC_MAX_RANK], xshape[PC_MAX_RANK], xdims[PC_MAX_RANK], idims[PC_MAX_RANK];
  for (int i = 0; i < orank; i++) {
    oshape[i] = i < axis ? x->type.dims[i] : i < axis + q ? idx->type.dims[i - axis] : x->type.dims[i - q + 1];
    xshape[i] = i == axis ? x->type.dims[axis] : oshape[i];
  }
  for (int i = 0; i < r; i++) xdims[i] = i <= axis ? i : i + q - 1;
  for (int i = 0; i < q; i++) idims[i] = axis + i;
  pc_value *xi = to_i64(c, idx);
  xi = wrap_index_n(c, xi, x->type.dims[axis]);
  if (xi && pc_type_is_static(&xi->type) && pc_type_is_static(&x->type)) {
    /* the indices flattened into the axis and spread over the other dims: the gather reads x itself, not x
     * broadcast over the index dims, so the gradient (a scatter-add) goes into x's shape, not that broadcast's
     * (an embedding table times the tokens) */
    int64_t nq = pc_type_numel(&xi->type), ishape[PC_MAX_RANK], ax = axis;
    for (int i = 0; i < r; i++) ishape[i] = i == axis ? nq : x->type.dims[i];
    pc_value *ib = pc_broadcast_in_dim(G, ox_reshape(c, xi, 1, &nq), r, ishape, &ax);
    pc_value *in[2] = {x, ib};
    pc_attr a = pc_a_int("axis", axis);
    pc_value *y = ib ? pc_build(G, PC_OP_gather, in, 2, &a, 1) : NULL;
    return ox_reshape(c, y, orank, oshape);
  }
  pc_value *xb = bcast_dims(c, x, orank, xshape, xdims), *ib = bcast_dims(c, xi, orank, oshape, idims);
  pc_value *in[2] = {xb, ib};
  pc_attr a = pc_a_int("axis", axis);
  return xb && ib ? pc_build(G, PC_OP_gather, in, 2, &a, 1) : NULL;
}

pc_status ox_op_Gather(ox_ctx *c) {
  pc_value *x = X0, *idx = ox_in_req(c, 1);
  if (!ox_check_static(c, x) || !idx) return ox_status(c);
  int axis = ox_axis(c, ox_attr_int(c, "axis", 0), x->type.rank);
  return axis < 0 ? ox_status(c) : ox_out(c, 0, take(c, x, idx, axis));
}

#define COMPRESS_MAX 65536

/* Compress: the slices along axis (of the flattened input when no axis) whose condition entry is
 * true; the condition decides the output's shape, so it must be known at compile time */
pc_status ox_op_Compress(ox_ctx *c) {
  pc_value *x = X0;
  if (!ox_check_static(c, x)) return ox_status(c);
  int64_t *cond = pc_alloc(G, sizeof *cond * COMPRESS_MAX), *keep = pc_alloc(G, sizeof *keep * COMPRESS_MAX);
  int n = cond && keep ? ox_const_ints(c, 1, cond, COMPRESS_MAX) : -2;
  if (n < 0) return n == -1 ? ox_fail(c, PC_ERR_ATTR, "input 1 (condition) is required") : ox_status(c);
  int axis = 0;
  if (ox_has_attr(c, "axis")) {
    if ((axis = ox_axis(c, ox_attr_int(c, "axis", 0), x->type.rank)) < 0) return ox_status(c);
  } else {
    int64_t all = pc_type_numel(&x->type);
    x = ox_reshape(c, x, 1, &all);
  }
  int64_t dim = x ? x->type.dims[axis] : 0, k = 0;
  if (n > dim) return ox_fail(c, PC_ERR_SHAPE, "condition has %d entries, the axis %lld", n, (long long)dim);
  for (int i = 0; i < n; i++)
    if (cond[i]) keep[k++] = i;
  if (!k) return ox_fail(c, PC_ERR_UNSUPPORTED, "a condition selecting nothing gives an empty result");
  return ox_out(c, 0, take(c, x, pc_const(G, pc_type_make(PC_i64, 1, &k), keep), axis));
}

pc_status ox_op_GatherElements(ox_ctx *c) {
  pc_value *x = X0, *idx = ox_in_req(c, 1);
  if (!ox_check_static(c, x) || !idx) return ox_status(c);
  int axis = ox_axis(c, ox_attr_int(c, "axis", 0), x->type.rank);
  if (axis < 0) return ox_status(c);
  pc_value *in[2] = {x, wrap_index_n(c, to_i64(c, idx), x->type.dims[axis])};
  pc_attr a = pc_a_int("axis", axis);
  return ox_out(c, 0, in[1] ? pc_build(G, PC_OP_gather, in, 2, &a, 1) : NULL);
}

/* flat index over x dims [b, b+k) from the last dim of idx (len k): sum idx[..., j] * stride_j */
static pc_value *flat_index(ox_ctx *c, pc_value *x, pc_value *idx, int b) {
  if (idx->type.rank < 1) return ox_fail(c, PC_ERR_SHAPE, "indices must have rank >= 1"), NULL;
  int q = idx->type.rank, k = (int)idx->type.dims[q - 1];
  if (k < 1 || b + k > x->type.rank) return ox_fail(c, PC_ERR_SHAPE, "index depth %d does not fit rank %d", k, x->type.rank), NULL;
  int64_t dims[PC_MAX_RANK], strides[PC_MAX_RANK], stride = 1;
  for (int j = k - 1; j >= 0; j--) dims[j] = x->type.dims[b + j], strides[j] = stride, stride *= dims[j];
  pc_value *i64 = to_i64(c, idx);
  pc_value *n = pc_const(G, pc_type_make(PC_i64, 1, (int64_t[]){k}), dims);
  pc_value *s = pc_const(G, pc_type_make(PC_i64, 1, (int64_t[]){k}), strides);
  pc_value *w = wrap_index(c, i64, pc_broadcast_to(G, n, q, idx->type.dims));
  pc_value *m = ox_binary(c, PC_OP_mul, w, s);
  int64_t last = q - 1;
  return pc_reduce(G, PC_OP_reduce_sum, m, 1, &last);
}

pc_status ox_op_GatherND(ox_ctx *c) {
  pc_value *x = X0, *idx = ox_in_req(c, 1);
  if (!ox_check_static(c, x) || !ox_check_static(c, idx)) return ox_status(c);
  int64_t b64 = ox_attr_int(c, "batch_dims", 0);
  int r = x->type.rank, q = idx->type.rank, b = b64 >= 0 && b64 < PC_MAX_RANK ? (int)b64 : -1;
  if (q < 1 || b < 0 || b >= q || b >= r) return ox_fail(c, PC_ERR_ATTR, "batch_dims %lld does not fit", (long long)b64);
  int k = (int)idx->type.dims[q - 1];
  pc_value *flat = flat_index(c, x, idx, b); /* idx.shape[:-1] */
  if (!flat) return ox_status(c);
  int64_t B = ox_shape_numel(b, x->type.dims), P = ox_shape_numel(k, x->type.dims + b);
  int64_t M = ox_shape_numel(q - 1 - b, idx->type.dims + b), rest_n = r - b - k;
  int64_t xs[PC_MAX_RANK] = {B, P}, is[PC_MAX_RANK] = {B, M}, os[PC_MAX_RANK];
  for (int i = 0; i < rest_n; i++) xs[2 + i] = is[2 + i] = x->type.dims[b + k + i];
  pc_value *x3 = ox_reshape(c, x, 2 + (int)rest_n, xs);
  pc_value *f2 = ox_reshape(c, flat, 2, is);
  int64_t idims[2] = {0, 1};
  pc_value *fb = f2 ? pc_broadcast_in_dim(G, f2, 2 + (int)rest_n, is, idims) : NULL;
  if (rest_n == 0) fb = f2;
  pc_value *in[2] = {x3, fb};
  pc_attr a = pc_a_int("axis", 1);
  pc_value *y = x3 && fb ? pc_build(G, PC_OP_gather, in, 2, &a, 1) : NULL;
  int on = 0;
  for (int i = 0; i < q - 1; i++) os[on++] = idx->type.dims[i];
  for (int i = 0; i < rest_n; i++) os[on++] = x->type.dims[b + k + i];
  if (on > PC_MAX_RANK) return ox_fail(c, PC_ERR_RANGE, "result rank exceeds %d", PC_MAX_RANK);
  return ox_out(c, 0, ox_reshape(c, y, on, os));
}

static const char *scatter_reduce(ox_ctx *c) {
  const char *r = ox_attr_str(c, "reduction", "none");
  static const char *const ok[] = {"none", "add", "mul", "max", "min"};
  for (int i = 0; i < 5; i++)
    if (strcmp(r, ok[i]) == 0) return ok[i];
  ox_fail(c, PC_ERR_ATTR, "reduction '%s' is not supported", r);
  return NULL;
}

pc_status ox_op_ScatterElements(ox_ctx *c) {
  pc_value *x = X0, *idx = ox_in_req(c, 1), *upd = ox_in_req(c, 2);
  const char *red = scatter_reduce(c);
  if (!ox_check_static(c, x) || !idx || !upd || !red) return ox_status(c);
  int axis = ox_axis(c, ox_attr_int(c, "axis", 0), x->type.rank);
  if (axis < 0) return ox_status(c);
  pc_value *in[3] = {x, wrap_index_n(c, to_i64(c, idx), x->type.dims[axis]), upd};
  pc_attr a[2] = {pc_a_int("axis", axis), pc_a_str("reduce", red)};
  return ox_out(c, 0, in[1] ? pc_build(G, PC_OP_scatter, in, 3, a, 2) : NULL);
}

pc_status ox_op_ScatterND(ox_ctx *c) {
  pc_value *x = X0, *idx = ox_in_req(c, 1), *upd = ox_in_req(c, 2);
  const char *red = scatter_reduce(c);
  if (!ox_check_static(c, x) || !ox_check_static(c, idx) || !upd || !red) return ox_status(c);
  if (idx->type.rank < 1) return ox_fail(c, PC_ERR_SHAPE, "indices must have rank >= 1");
  int r = x->type.rank, q = idx->type.rank, k = (int)idx->type.dims[q - 1];
  pc_value *flat = flat_index(c, x, idx, 0);
  if (!flat) return ox_status(c);
  int64_t P = ox_shape_numel(k, x->type.dims), M = ox_shape_numel(q - 1, idx->type.dims);
  int rest_n = r - k;
  int64_t xs[PC_MAX_RANK] = {P}, us[PC_MAX_RANK] = {M}, zero = 0;
  for (int i = 0; i < rest_n; i++) xs[1 + i] = us[1 + i] = x->type.dims[k + i];
  if (pc_type_numel(&upd->type) != ox_shape_numel(1 + rest_n, us)) return ox_fail(c, PC_ERR_SHAPE, "updates have the wrong shape");
  pc_value *x2 = ox_reshape(c, x, 1 + rest_n, xs), *u2 = ox_reshape(c, upd, 1 + rest_n, us);
  pc_value *f1 = ox_reshape(c, flat, 1, &M);
  pc_value *fb = rest_n ? (f1 ? pc_broadcast_in_dim(G, f1, 1 + rest_n, us, &zero) : NULL) : f1;
  pc_value *in[3] = {x2, fb, u2};
  pc_attr a[2] = {pc_a_int("axis", 0), pc_a_str("reduce", red)};
  pc_value *y = x2 && fb && u2 ? pc_build(G, PC_OP_scatter, in, 3, a, 2) : NULL;
  return ox_out(c, 0, ox_reshape(c, y, r, x->type.dims));
}

pc_status ox_op_OneHot(ox_ctx *c) {
  pc_value *idx = X0, *vals = ox_in_req(c, 2);
  double depth_f;
  if (!ox_check_static(c, idx) || !vals) return ox_status(c);
  if (ox_const_floats(c, 1, &depth_f, 1) != 1) return ox_status(c) ? ox_status(c) : ox_fail(c, PC_ERR_ATTR, "depth must be a scalar");
  int64_t depth = (int64_t)depth_f;
  int r = idx->type.rank + 1;
  if (r > PC_MAX_RANK) return ox_fail(c, PC_ERR_RANGE, "rank exceeds %d", PC_MAX_RANK);
  int axis = ox_axis(c, ox_attr_int(c, "axis", -1), r);
  if (axis < 0 || depth < 1 || pc_type_numel(&vals->type) != 2) return ox_status(c) ? ox_status(c) : ox_fail(c, PC_ERR_ATTR, "bad depth or values");
  int64_t shape[PC_MAX_RANK], idims[PC_MAX_RANK], ax = axis;
  for (int i = 0, k = 0; i < r; i++) {
    shape[i] = i == axis ? depth : idx->type.dims[k];
    if (i != axis) idims[k++] = i;
  }
  pc_value *ii = wrap_index_n(c, to_i64(c, idx), depth);
  pc_value *ib = ii ? pc_broadcast_in_dim(G, ii, r, shape, idims) : NULL;
  pc_value *hit = ib ? pc_eq(G, ib, ox_iota(c, PC_i64, r, shape, axis)) : NULL;
  int64_t one = 1, z = 0, l1 = 1, l2 = 2;
  pc_value *v1 = ox_reshape(c, vals, 1, (int64_t[]){2});
  pc_value *off = ox_reshape(c, pc_slice(G, v1, &z, &l1, &one), 0, NULL);
  pc_value *on = ox_reshape(c, pc_slice(G, v1, &l1, &l2, &one), 0, NULL);
  (void)ax;
  pc_value *onb = on ? pc_broadcast_in_dim(G, on, r, shape, NULL) : NULL;
  pc_value *offb = off ? pc_broadcast_in_dim(G, off, r, shape, NULL) : NULL;
  return ox_out(c, 0, pc_where(G, hit, onb, offb));
}

/* ---------------------------------------------------------------- ReverseSequence, Scatter, TensorScatter */

/* out[t, b] = x[L[b] - 1 - t, b] for t < L[b], else x[t, b] (time and batch axes 0/1 either way) */
pc_status ox_op_ReverseSequence(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0), *len = ox_in_req(c, 1);
  if (!ox_check_static_input(c, x) || !len) return ox_status(c);
  int r = x->type.rank;
  int64_t ba = ox_attr_int(c, "batch_axis", 1), ta = ox_attr_int(c, "time_axis", 0);
  if (r < 2 || !((ba == 0 && ta == 1) || (ba == 1 && ta == 0))) return ox_fail(c, PC_ERR_ATTR, "batch_axis and time_axis must be 0 and 1");
  if (len->type.rank != 1 || len->type.dims[0] != x->type.dims[ba]) return ox_fail(c, PC_ERR_SHAPE, "sequence_lens must be [batch]");
  pc_value *t = ox_iota(c, PC_i64, r, x->type.dims, (int)ta);
  pc_value *lb = pc_broadcast_in_dim(G, pc_convert(G, len, PC_i64), r, x->type.dims, &ba);
  pc_value *rt = ox_binary(c, PC_OP_sub, ox_binary_s(c, PC_OP_sub, lb, 1), t);
  pc_value *idx = ox_where(c, ox_binary(c, PC_OP_lt, t, lb), rt, t);
  pc_value *in[2] = {x, idx};
  pc_attr a = pc_a_int("axis", ta);
  return ox_out(c, 0, idx ? pc_build(G, PC_OP_gather, in, 2, &a, 1) : NULL);
}

/* Scatter (opset 9-10) is ScatterElements under its old name */
pc_status ox_op_Scatter(ox_ctx *c) { return ox_op_ScatterElements(c); }

/* present = past with update written at write_indices[b] + s along axis (mod its length when circular) */
pc_status ox_op_TensorScatter(ox_ctx *c) {
  pc_value *past = ox_in_req(c, 0), *upd = ox_in_req(c, 1), *wi = ox_in(c, 2);
  if (!ox_check_static_input(c, past) || !ox_check_static_input(c, upd)) return ox_status(c);
  int r = past->type.rank, a = ox_axis(c, ox_attr_int(c, "axis", -2), r);
  if (a < 0) return ox_status(c);
  if (a == 0) return ox_fail(c, PC_ERR_ATTR, "axis must not be the batch axis");
  const char *mode = ox_attr_str(c, "mode", "linear");
  int circ = strcmp(mode, "circular") == 0;
  if (!circ && strcmp(mode, "linear")) return ox_fail(c, PC_ERR_ATTR, "mode '%s' is not linear or circular", mode);
  if (upd->type.rank != r || upd->type.dtype != past->type.dtype) return ox_fail(c, PC_ERR_SHAPE, "update must match past_cache's rank and type");
  for (int i = 0; i < r; i++)
    if (i != a ? upd->type.dims[i] != past->type.dims[i] : upd->type.dims[i] > past->type.dims[i])
      return ox_fail(c, PC_ERR_SHAPE, "update's dim %d does not fit past_cache", i);
  const int64_t *us = upd->type.dims;
  pc_value *idx = ox_iota(c, PC_i64, r, us, a);
  if (wi) {
    if (wi->type.rank != 1 || wi->type.dims[0] != us[0]) return ox_fail(c, PC_ERR_SHAPE, "write_indices must be [batch]");
    int64_t zero = 0;
    idx = ox_binary(c, PC_OP_add, idx, pc_broadcast_in_dim(G, pc_convert(G, wi, PC_i64), r, us, &zero));
  }
  if (circ) idx = ox_binary_s(c, PC_OP_rem, idx, (double)past->type.dims[a]);
  pc_value *in[3] = {past, idx, upd};
  pc_attr at[2] = {pc_a_int("axis", a), pc_a_str("reduce", "none")};
  return ox_out(c, 0, idx ? pc_build(G, PC_OP_scatter, in, 3, at, 2) : NULL);
}
