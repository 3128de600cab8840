/* frontend/onnx_shape.c: decompositions of the ONNX shape and movement ops into prims: Shape, Size, Reshape,
 * Flatten, Squeeze, Unsqueeze, Transpose, Concat, Split, Slice, Expand, Tile, Pad, DepthToSpace and
 * SpaceToDepth, CenterCropPad, and the generators Range, ConstantOfShape, EyeLike and Trilu. */
#include "frontend/onnx_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define G (c->g)
#define X0 ox_in_req(c, 0)

/* ---------------------------------------------------------------- shapes */

pc_status ox_op_Shape(ox_ctx *c) {
  pc_value *x = X0;
  if (!ox_check_static(c, x)) return ox_status(c);
  int r = x->type.rank;
  int64_t start = ox_attr_int(c, "start", 0), end = ox_attr_int(c, "end", r);
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = start < 0 ? 0 : start > r ? r : start;
  end = end < start ? start : end > r ? r : end;
  int64_t n = end - start;
  return ox_out(c, 0, pc_const(G, pc_type_make(PC_i64, 1, &n), x->type.dims + start));
}

pc_status ox_op_Size(ox_ctx *c) {
  pc_value *x = X0;
  if (!ox_check_static(c, x)) return ox_status(c);
  int64_t n = pc_type_numel(&x->type);
  return ox_out(c, 0, pc_const(G, pc_type_make(PC_i64, 0, NULL), &n));
}

pc_status ox_op_Reshape(ox_ctx *c) {
  pc_value *x = X0;
  int64_t s[PC_MAX_RANK];
  int n = ox_const_ints(c, 1, s, PC_MAX_RANK);
  if (!x || n < 0) return n == -1 ? ox_fail(c, PC_ERR_ATTR, "shape input is required") : ox_status(c);
  if (!ox_check_static(c, x)) return ox_status(c);
  int allowzero = ox_attr_flag(c, "allowzero", 0), infer = -1;
  int64_t known = 1;
  for (int i = 0; i < n; i++) {
    if (s[i] == 0 && !allowzero) {
      if (i >= x->type.rank) return ox_fail(c, PC_ERR_SHAPE, "shape[%d] = 0 copies a dim the input lacks", i);
      s[i] = x->type.dims[i];
    }
    if (s[i] == -1) {
      if (infer >= 0) return ox_fail(c, PC_ERR_SHAPE, "more than one -1 in the shape");
      infer = i;
    } else if (s[i] < 0) {
      return ox_fail(c, PC_ERR_SHAPE, "shape[%d] = %lld", i, (long long)s[i]);
    } else if (s[i] > 0 && known > ((int64_t)1 << 40) / s[i]) {
      return ox_fail(c, PC_ERR_RANGE, "shape has absurdly many elements");
    } else {
      known *= s[i];
    }
  }
  int64_t numel = pc_type_numel(&x->type);
  if (infer >= 0) {
    if (known == 0 || numel % known) return ox_fail(c, PC_ERR_SHAPE, "cannot infer the -1 dim");
    s[infer] = numel / known;
  } else if (known != numel) {
    return ox_fail(c, PC_ERR_SHAPE, "shape has %lld elements, the input %lld", (long long)known, (long long)numel);
  }
  return ox_out(c, 0, ox_reshape(c, x, n, s));
}

pc_status ox_op_Flatten(ox_ctx *c) {
  pc_value *x = X0;
  if (!ox_check_static(c, x)) return ox_status(c);
  int r = x->type.rank;
  int64_t axis = ox_attr_int(c, "axis", 1);
  if (axis < 0) axis += r;
  if (axis < 0 || axis > r) return ox_fail(c, PC_ERR_ATTR, "axis is out of range for rank %d", r);
  int64_t s[2] = {ox_shape_numel((int)axis, x->type.dims), ox_shape_numel(r - (int)axis, x->type.dims + axis)};
  return ox_out(c, 0, ox_reshape(c, x, 2, s));
}

pc_status ox_op_Squeeze(ox_ctx *c) {
  pc_value *x = X0;
  int64_t axes[PC_MAX_RANK];
  int n = ox_read_axes(c, 13, axes);
  if (!x || n < -1) return ox_status(c);
  int r = x->type.rank, drop[PC_MAX_RANK] = {0};
  if (n > 0 && !ox_axes(c, axes, n, r)) return ox_status(c);
  for (int i = 0; i < n; i++) {
    if (x->type.dims[axes[i]] != 1) return ox_fail(c, PC_ERR_SHAPE, "dim %lld is not 1", (long long)axes[i]);
    drop[axes[i]] = 1;
  }
  for (int i = 0; n <= 0 && i < r; i++) drop[i] = x->type.dims[i] == 1;
  int64_t s[PC_MAX_RANK];
  int k = 0;
  for (int i = 0; i < r; i++)
    if (!drop[i]) s[k++] = x->type.dims[i];
  return ox_out(c, 0, ox_reshape(c, x, k, s));
}

pc_status ox_op_Unsqueeze(ox_ctx *c) {
  pc_value *x = X0;
  int64_t axes[PC_MAX_RANK];
  int n = ox_read_axes(c, 13, axes);
  if (!x || n < -1) return ox_status(c);
  if (n < 0) return ox_fail(c, PC_ERR_ATTR, "axes are required");
  if (!ox_axes(c, axes, n, x->type.rank + n)) return ox_status(c);
  return ox_out(c, 0, ox_unsqueeze(c, x, n, axes));
}

pc_status ox_op_Transpose(ox_ctx *c) {
  pc_value *x = X0;
  if (!x) return ox_status(c);
  int64_t perm[PC_MAX_RANK];
  int r = x->type.rank, n = ox_attr_ints(c, "perm", perm, PC_MAX_RANK);
  if (n < -1) return ox_status(c);
  if (n < 0)
    for (int i = 0; i < r; i++) perm[i] = r - 1 - i;
  else if (n != r)
    return ox_fail(c, PC_ERR_ATTR, "perm has %d entries for rank %d", n, r);
  return ox_out(c, 0, pc_transpose(G, x, perm));
}

pc_status ox_op_Concat(ox_ctx *c) {
  pc_value *x = X0;
  if (!x) return ox_status(c);
  int axis = ox_axis(c, ox_attr_int(c, "axis", 0), x->type.rank);
  if (axis < 0) return ox_status(c);
  pc_value **xs = calloc((size_t)c->n_in, sizeof *xs);
  if (!xs) return ox_fail(c, PC_ERR_NOMEM, "out of memory");
  int n = 0;
  for (int i = 0; i < c->n_in; i++) {
    pc_value *v = ox_in_req(c, i);
    if (v && !(v->type.rank == x->type.rank && v->type.dims[axis] == 0)) xs[n++] = v; /* empty parts add nothing */
  }
  pc_value *y = ox_status(c) != PC_OK ? NULL : n ? pc_concatenate(G, xs, n, axis) : x;
  free(xs);
  return ox_out(c, 0, y);
}

/* slice of x along one axis: [start, start + len) */
static pc_value *slice_axis(ox_ctx *c, pc_value *x, int axis, int64_t start, int64_t len) {
  if (!x) return NULL;
  int64_t s[PC_MAX_RANK] = {0}, l[PC_MAX_RANK];
  memcpy(l, x->type.dims, sizeof l);
  s[axis] = start;
  l[axis] = start + len;
  if (start == 0 && len == x->type.dims[axis]) return x;
  return pc_slice(G, x, s, l, NULL);
}

pc_status ox_op_Split(ox_ctx *c) {
  pc_value *x = X0;
  if (!ox_check_static(c, x)) return ox_status(c);
  if (c->n_out < 1) return ox_fail(c, PC_ERR_ATTR, "has no outputs");
  int axis = ox_axis(c, ox_attr_int(c, "axis", 0), x->type.rank);
  if (axis < 0) return ox_status(c);
  int64_t dim = x->type.dims[axis], *sizes = calloc((size_t)c->n_out + 1, sizeof *sizes);
  if (!sizes) return ox_fail(c, PC_ERR_NOMEM, "out of memory");
  int n = c->opset >= 13 ? ox_const_ints(c, 1, sizes, c->n_out) : ox_attr_ints(c, "split", sizes, c->n_out);
  if (n == -1) { /* equal parts; the last one smaller when dim does not divide (opset 18 num_outputs) */
    int64_t part = (dim + c->n_out - 1) / c->n_out;
    for (int i = 0; i < c->n_out; i++) sizes[i] = part < dim - part * i ? part : (dim - part * i > 0 ? dim - part * i : 0);
    if (c->opset < 18 && dim % c->n_out) ox_fail(c, PC_ERR_SHAPE, "dim %lld does not split into %d parts", (long long)dim, c->n_out);
    n = c->n_out;
  }
  int64_t total = 0;
  for (int i = 0; i < n; i++) {
    if (sizes[i] < 0 || sizes[i] > dim) n = -2;
    else total += sizes[i];
  }
  if (ox_status(c) == PC_OK && (n != c->n_out || total != dim))
    ox_fail(c, PC_ERR_SHAPE, "split sizes do not add up to dim %lld over %d outputs", (long long)dim, c->n_out);
  int64_t at = 0;
  for (int i = 0; i < c->n_out && ox_status(c) == PC_OK; i++) {
    ox_out(c, i, slice_axis(c, x, axis, at, sizes[i]));
    at += sizes[i];
  }
  free(sizes);
  return ox_status(c);
}

/* the numpy slice of one axis, as rev (for negative steps) plus a forward start/limit/stride */
static void slice_bounds(int64_t d, int64_t st, int64_t en, int64_t step, int *rev, int64_t *s, int64_t *l, int64_t *k) {
  *rev = step < 0;
  if (step > 0) {
    st = st < 0 ? st + d : st, en = en < 0 ? en + d : en;
    st = st < 0 ? 0 : st > d ? d : st;
    en = en < 0 ? 0 : en > d ? d : en;
  } else {
    st = st < 0 ? st + d : st, en = en < 0 ? en + d : en;
    st = st < 0 ? -1 : st > d - 1 ? d - 1 : st;
    en = en < -1 ? -1 : en > d - 1 ? d - 1 : en;
    st = d - 1 - st, en = d - 1 - en, step = -step; /* positions in the reversed axis */
  }
  if (en <= st) st = en = 0;
  *s = st, *l = en, *k = step;
}

pc_status ox_op_Slice(ox_ctx *c) {
  pc_value *x = X0;
  if (!ox_check_static(c, x)) return ox_status(c);
  int r = x->type.rank;
  int64_t st[PC_MAX_RANK], en[PC_MAX_RANK], ax[PC_MAX_RANK], sp[PC_MAX_RANK];
  int ns, ne, na, nk = -1;
  if (c->opset < 10) {
    ns = ox_attr_ints(c, "starts", st, r), ne = ox_attr_ints(c, "ends", en, r), na = ox_attr_ints(c, "axes", ax, r);
  } else {
    ns = ox_const_ints(c, 1, st, r), ne = ox_const_ints(c, 2, en, r), na = ox_const_ints(c, 3, ax, r);
    nk = ox_const_ints(c, 4, sp, r);
  }
  if (ox_status(c) != PC_OK) return ox_status(c);
  if (ns < 0 || ns != ne || (na >= 0 && na != ns) || (nk >= 0 && nk != ns))
    return ox_fail(c, PC_ERR_ATTR, "starts, ends, axes and steps must have the same length");
  for (int i = 0; na < 0 && i < ns; i++) ax[i] = i;
  if (!ox_axes(c, ax, ns, r)) return ox_status(c);
  int64_t s[PC_MAX_RANK] = {0}, l[PC_MAX_RANK], k[PC_MAX_RANK], revs[PC_MAX_RANK];
  int n_rev = 0;
  for (int i = 0; i < r; i++) l[i] = x->type.dims[i], k[i] = 1;
  for (int i = 0; i < ns; i++) {
    int64_t step = nk >= 0 ? sp[i] : 1;
    if (step == 0) return ox_fail(c, PC_ERR_ATTR, "step 0");
    int rv, a = (int)ax[i];
    slice_bounds(x->type.dims[a], st[i], en[i], step, &rv, &s[a], &l[a], &k[a]);
    if (rv) revs[n_rev++] = a;
  }
  if (n_rev) {
    pc_attr at = pc_a_ints("dims", revs, n_rev);
    x = pc_build(G, PC_OP_rev, &x, 1, &at, 1);
  }
  return ox_out(c, 0, pc_slice(G, x, s, l, k));
}

pc_status ox_op_Expand(ox_ctx *c) {
  pc_value *x = X0;
  int64_t s[PC_MAX_RANK], out[PC_MAX_RANK];
  int n = ox_const_ints(c, 1, s, PC_MAX_RANK);
  if (!x || n < 0) return ox_status(c);
  int r = x->type.rank > n ? x->type.rank : n;
  for (int i = 0; i < r; i++) {
    int ix = i - (r - x->type.rank), is = i - (r - n);
    int64_t a = ix >= 0 ? x->type.dims[ix] : 1, b = is >= 0 ? s[is] : 1;
    if (a != b && a != 1 && b != 1) return ox_fail(c, PC_ERR_SHAPE, "cannot expand dim %lld to %lld", (long long)a, (long long)b);
    out[i] = a == 1 ? b : a;
  }
  return ox_out(c, 0, pc_broadcast_to(G, x, r, out));
}

pc_status ox_op_Tile(ox_ctx *c) {
  pc_value *x = X0;
  int64_t rep[PC_MAX_RANK];
  if (!ox_check_static(c, x)) return ox_status(c);
  int r = x->type.rank, n = ox_const_ints(c, 1, rep, PC_MAX_RANK);
  if (n < 0) return ox_status(c);
  if (n != r) return ox_fail(c, PC_ERR_ATTR, "repeats has %d entries for rank %d", n, r);
  if (r == PC_MAX_RANK) return ox_fail(c, PC_ERR_UNSUPPORTED, "rank %d is too large to tile", r);
  for (int a = 0; a < r && x; a++) {
    if (rep[a] < 0) return ox_fail(c, PC_ERR_ATTR, "negative repeat");
    if (rep[a] == 1) continue;
    /* [.., d, ..] -> [.., rep, d, ..] -> [.., rep * d, ..] */
    int64_t shape[PC_MAX_RANK], dims[PC_MAX_RANK], out[PC_MAX_RANK];
    for (int i = 0, k = 0; i < r; i++) {
      if (i == a) shape[k++] = rep[a];
      dims[i] = k;
      shape[k++] = x->type.dims[i];
      out[i] = x->type.dims[i] * (i == a ? rep[a] : 1);
    }
    x = ox_reshape(c, pc_broadcast_in_dim(G, x, r + 1, shape, dims), r, out);
  }
  return ox_out(c, 0, x);
}

pc_status ox_op_Range(ox_ctx *c) {
  double v[3][1];
  for (int i = 0; i < 3; i++)
    if (ox_const_floats(c, i, v[i], 1) != 1) return ox_status(c) ? ox_status(c) : ox_fail(c, PC_ERR_ATTR, "input %d must be a scalar", i);
  pc_dtype dt = c->in[0]->type.dtype;
  double start = v[0][0], limit = v[1][0], delta = v[2][0];
  if (delta == 0) return ox_fail(c, PC_ERR_ATTR, "delta is 0");
  double nf = ceil((limit - start) / delta);
  int64_t n = nf > 0 ? (int64_t)nf : 0;
  if (nf > (double)((int64_t)1 << 31)) return ox_fail(c, PC_ERR_RANGE, "range has %g elements", nf);
  pc_value *idx = ox_iota(c, pc_dtype_is_float(dt) ? dt : PC_i64, 1, &n, 0);
  pc_value *y = ox_add_s(c, ox_mul_s(c, idx, delta), start);
  return ox_out(c, 0, pc_convert(G, y, dt));
}

pc_status ox_op_ConstantOfShape(ox_ctx *c) {
  int64_t s[PC_MAX_RANK];
  int n = ox_const_ints(c, 0, s, PC_MAX_RANK);
  if (n < 0) return ox_status(c) ? ox_status(c) : ox_fail(c, PC_ERR_ATTR, "shape input is required");
  for (int i = 0; i < n; i++)
    if (s[i] < 0) return ox_fail(c, PC_ERR_SHAPE, "negative dim %lld", (long long)s[i]);
  pc_value *val = ox_has_attr(c, "value") ? ox_attr_tensor(c, "value") : pc_scalar(G, PC_f32, 0);
  if (!val) return ox_status(c);
  if (pc_type_numel(&val->type) != 1) return ox_fail(c, PC_ERR_ATTR, "value must have one element");
  pc_value *sc = ox_reshape(c, val, 0, NULL);
  return ox_out(c, 0, n ? pc_broadcast_in_dim(G, sc, n, s, NULL) : sc);
}

/* the [rows, cols] mask of `col - row OP k`; k a compile-time constant, or kv (a one-element value) read at run time */
static pc_value *diag_mask(ox_ctx *c, int64_t rows, int64_t cols, int64_t k, pc_value *kv, pc_op op) {
  int64_t s[2] = {rows, cols};
  pc_value *d = pc_sub(G, ox_iota(c, PC_i64, 2, s, 1), ox_iota(c, PC_i64, 2, s, 0));
  if (kv) kv = pc_broadcast_in_dim(G, pc_reshape(G, pc_convert(G, kv, PC_i64), 0, NULL), 2, s, NULL);
  pc_value *in[2] = {d, kv ? kv : d ? ox_like(c, (double)k, d) : NULL};
  return d && in[1] ? pc_build(G, op, in, 2, NULL, 0) : NULL;
}

pc_status ox_op_EyeLike(ox_ctx *c) {
  pc_value *x = X0;
  if (!ox_check_static(c, x)) return ox_status(c);
  if (x->type.rank != 2) return ox_fail(c, PC_ERR_SHAPE, "input must be 2-D");
  pc_dtype dt;
  if (!ox_attr_dtype(c, "dtype", x->type.dtype, &dt)) return ox_status(c);
  pc_value *m = diag_mask(c, x->type.dims[0], x->type.dims[1], ox_attr_int(c, "k", 0), NULL, PC_OP_eq);
  return ox_out(c, 0, pc_convert(G, m, dt));
}

pc_status ox_op_Trilu(ox_ctx *c) {
  pc_value *x = X0;
  if (!ox_check_static(c, x)) return ox_status(c);
  int r = x->type.rank;
  if (r < 2) return ox_fail(c, PC_ERR_SHAPE, "input must have rank >= 2");
  /* k only moves the mask, so a k computed at run time (or a graph input) is read at run time */
  int64_t k = 0;
  pc_value *kv = ox_in(c, 1);
  if (kv && (pc_type_numel(&kv->type) != 1 || !pc_dtype_is_int(kv->type.dtype)))
    return ox_fail(c, PC_ERR_ATTR, "k must be one integer");
  if (kv && pc_const_data(kv)) {
    if (ox_value_ints(c, kv, &k, 1) != 1) return ox_status(c);
    kv = NULL;
  }
  int upper = ox_attr_flag(c, "upper", 1);
  pc_value *m = diag_mask(c, x->type.dims[r - 2], x->type.dims[r - 1], k, kv, upper ? PC_OP_ge : PC_OP_le);
  int64_t dims[2] = {r - 2, r - 1};
  m = m ? pc_broadcast_in_dim(G, m, r, x->type.dims, dims) : NULL;
  return ox_out(c, 0, pc_where(G, m, x, ox_like(c, 0, x)));
}

typedef enum { PAD_EDGE, PAD_REFLECT, PAD_WRAP } pad_mode;

/* one side of an edge/reflect/wrap pad along axis: `p` elements before (low) or after the data */
static pc_value *pad_side(ox_ctx *c, pc_value *x, int axis, int64_t p, int low, pad_mode mode) {
  int64_t d = x->type.dims[axis];
  if (mode == PAD_WRAP) { /* the other end of the data comes around */
    if (p > d) return ox_fail(c, PC_ERR_UNSUPPORTED, "wrap pad %lld exceeds the dim (%lld)", (long long)p, (long long)d), NULL;
    return slice_axis(c, x, axis, low ? d - p : 0, p);
  }
  if (mode == PAD_REFLECT) {
    if (p > d - 1) return ox_fail(c, PC_ERR_SHAPE, "reflect pad %lld exceeds dim - 1", (long long)p), NULL;
    pc_value *s = slice_axis(c, x, axis, low ? 1 : d - 1 - p, p);
    int64_t ax = axis;
    pc_attr a = pc_a_ints("dims", &ax, 1);
    return s ? pc_build(G, PC_OP_rev, &s, 1, &a, 1) : NULL;
  }
  pc_value *s = slice_axis(c, x, axis, low ? 0 : d - 1, 1);
  int64_t shape[PC_MAX_RANK], dims[PC_MAX_RANK];
  for (int i = 0; i < x->type.rank; i++) shape[i] = i == axis ? p : x->type.dims[i], dims[i] = i;
  return s ? pc_broadcast_in_dim(G, s, x->type.rank, shape, dims) : NULL;
}

static pc_value *pad_copy_mode(ox_ctx *c, pc_value *x, const int64_t *lo, const int64_t *hi, pad_mode mode) {
  int r = x->type.rank;
  for (int a = 0; a < r && x; a++) {
    if (lo[a] < 0 || hi[a] < 0) { /* negative pads crop */
      int64_t s = lo[a] < 0 ? -lo[a] : 0, e = x->type.dims[a] - (hi[a] < 0 ? -hi[a] : 0);
      if (e < s) return ox_fail(c, PC_ERR_SHAPE, "pads crop more than the dim"), NULL;
      x = slice_axis(c, x, a, s, e - s);
    }
    pc_value *parts[3];
    int n = 0;
    if (x && lo[a] > 0) parts[n++] = pad_side(c, x, a, lo[a], 1, mode);
    parts[n++] = x;
    if (x && hi[a] > 0) parts[n++] = pad_side(c, x, a, hi[a], 0, mode);
    for (int i = 0; i < n; i++)
      if (!parts[i]) return NULL;
    if (n > 1) {
      if (x->type.dims[a] == 0) return ox_fail(c, PC_ERR_SHAPE, "cannot pad an empty dim by copying"), NULL;
      x = pc_concatenate(G, parts, n, a);
    }
  }
  return x;
}

pc_status ox_op_Pad(ox_ctx *c) {
  pc_value *x = X0;
  if (!ox_check_static(c, x)) return ox_status(c);
  int r = x->type.rank;
  int64_t pads[2 * PC_MAX_RANK], axes[PC_MAX_RANK], lo[PC_MAX_RANK] = {0}, hi[PC_MAX_RANK] = {0};
  double value = 0;
  int np, na = -1;
  if (c->opset < 11) {
    np = ox_attr_ints(c, "pads", pads, 2 * r);
    value = ox_attr_float(c, "value", 0);
  } else {
    np = ox_const_ints(c, 1, pads, 2 * r);
    if (ox_has_in(c, 2) && ox_const_floats(c, 2, &value, 1) < 0) return ox_status(c);
    na = ox_const_ints(c, 3, axes, r);
  }
  if (ox_status(c) != PC_OK) return ox_status(c);
  for (int i = 0; na < 0 && i < r; i++) axes[i] = i;
  if (na < 0) na = r;
  if (!ox_axes(c, axes, na, r)) return ox_status(c);
  if (np != 2 * na) return ox_fail(c, PC_ERR_ATTR, "pads has %d entries, expected %d", np, 2 * na);
  for (int i = 0; i < na; i++) lo[axes[i]] = pads[i], hi[axes[i]] = pads[na + i];
  const char *mode = ox_attr_str(c, "mode", "constant");
  if (strcmp(mode, "constant") == 0) {
    int64_t interior[PC_MAX_RANK] = {0};
    pc_attr a[4] = {pc_a_ints("low", lo, r), pc_a_ints("high", hi, r), pc_a_ints("interior", interior, r),
                    pc_a_float("value", value)};
    return ox_out(c, 0, pc_build(G, PC_OP_pad, &x, 1, a, 4));
  }
  pad_mode pm = !strcmp(mode, "edge") ? PAD_EDGE : !strcmp(mode, "reflect") ? PAD_REFLECT : PAD_WRAP;
  if (pm == PAD_WRAP && strcmp(mode, "wrap") != 0) return ox_fail(c, PC_ERR_UNSUPPORTED, "mode '%s' is not supported", mode);
  return ox_out(c, 0, pad_copy_mode(c, x, lo, hi, pm));
}

/* ---------------------------------------------------------------- DepthToSpace, SpaceToDepth */

static pc_value *shuffle(ox_ctx *c, pc_value *x, int n6, const int64_t *d6, const int64_t *perm, const int64_t *d4) {
  return pc_reshape(G, pc_transpose(G, pc_reshape(G, x, n6, d6), perm), 4, d4);
}

pc_status ox_op_DepthToSpace(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0);
  int64_t b = ox_attr_int(c, "blocksize", 0);
  if (!ox_check_rank(c, x, 4, 4) || !ox_check_static_input(c, x)) return ox_status(c);
  int64_t N = x->type.dims[0], C = x->type.dims[1], H = x->type.dims[2], W = x->type.dims[3];
  if (b < 1 || C / b < b || C % (b * b)) return ox_fail(c, PC_ERR_ATTR, "blocksize %lld does not divide %lld channels", (long long)b, (long long)C);
  const char *mode = ox_attr_str(c, "mode", "DCR");
  int64_t d4[4] = {N, C / (b * b), H * b, W * b};
  if (strcmp(mode, "DCR") == 0) {
    int64_t d6[6] = {N, b, b, C / (b * b), H, W}, perm[6] = {0, 3, 4, 1, 5, 2};
    return ox_out(c, 0, shuffle(c, x, 6, d6, perm, d4));
  }
  if (strcmp(mode, "CRD") == 0) {
    int64_t d6[6] = {N, C / (b * b), b, b, H, W}, perm[6] = {0, 1, 4, 2, 5, 3};
    return ox_out(c, 0, shuffle(c, x, 6, d6, perm, d4));
  }
  return ox_fail(c, PC_ERR_ATTR, "mode '%s' is not DCR or CRD", mode);
}

pc_status ox_op_SpaceToDepth(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0);
  int64_t b = ox_attr_int(c, "blocksize", 0);
  if (!ox_check_rank(c, x, 4, 4) || !ox_check_static_input(c, x)) return ox_status(c);
  int64_t N = x->type.dims[0], C = x->type.dims[1], H = x->type.dims[2], W = x->type.dims[3];
  if (b < 1 || H % b || W % b) return ox_fail(c, PC_ERR_ATTR, "blocksize %lld does not divide %lldx%lld", (long long)b, (long long)H, (long long)W);
  const char *mode = ox_attr_str(c, "mode", "DCR");
  int64_t d6[6] = {N, C, H / b, b, W / b, b}, dcr[6] = {0, 3, 5, 1, 2, 4}, crd[6] = {0, 1, 3, 5, 2, 4},
          d4[4] = {N, C * b * b, H / b, W / b};
  if (strcmp(mode, "DCR") && strcmp(mode, "CRD")) return ox_fail(c, PC_ERR_ATTR, "mode '%s' is not DCR or CRD", mode);
  return ox_out(c, 0, shuffle(c, x, 6, d6, mode[0] == 'D' ? dcr : crd, d4));
}

/* ---------------------------------------------------------------- CenterCropPad */

/* crop (centered, extra element dropped at the end) or zero-pad (extra at the end) each axis to shape */
pc_status ox_op_CenterCropPad(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0);
  if (!ox_check_static_input(c, x)) return ox_status(c);
  int r = x->type.rank;
  int64_t shape[PC_MAX_RANK], axes[PC_MAX_RANK];
  int n = ox_const_ints(c, 1, shape, PC_MAX_RANK);
  if (n < 0) return ox_status(c) ? ox_status(c) : ox_fail(c, PC_ERR_ATTR, "input shape is required");
  int na = ox_attr_ints(c, "axes", axes, PC_MAX_RANK);
  if (na == -2) return ox_status(c);
  if (na < 0)
    for (na = 0; na < r; na++) axes[na] = na;
  if (na != n) return ox_fail(c, PC_ERR_SHAPE, "shape has %d entries for %d axes", n, na);
  if (!ox_axes(c, axes, na, r)) return ox_status(c);
  int64_t st[PC_MAX_RANK] = {0}, lim[PC_MAX_RANK], one[PC_MAX_RANK], lo[PC_MAX_RANK] = {0}, hi[PC_MAX_RANK] = {0}, in[PC_MAX_RANK] = {0};
  for (int i = 0; i < r; i++) lim[i] = x->type.dims[i], one[i] = 1;
  for (int k = 0; k < na; k++) {
    int64_t ax = axes[k], dim = x->type.dims[ax], sh = shape[k];
    if (sh < 0) return ox_fail(c, PC_ERR_SHAPE, "shape entry %lld is negative", (long long)sh);
    if (sh < dim) st[ax] = (dim - sh) / 2, lim[ax] = st[ax] + sh;
    else lo[ax] = (sh - dim) / 2, hi[ax] = sh - dim - lo[ax];
  }
  pc_value *y = pc_slice(G, x, st, lim, one);
  pc_attr pa[4] = {pc_a_ints("low", lo, r), pc_a_ints("high", hi, r), pc_a_ints("interior", in, r), pc_a_float("value", 0)};
  return ox_out(c, 0, y ? pc_build(G, PC_OP_pad, &y, 1, pa, 4) : NULL);
}
