/* frontend/onnx_pool.c: decompositions of the ONNX pooling ops into prims: MaxPool (with Indices), AveragePool,
 * LpPool, the global pools and MaxUnpool. */
#include "frontend/onnx_internal.h"

#include <math.h>
#include <stdlib.h>

#define G (c->g)

/* ---------------------------------------------------------------- pooling */

static pc_value *binop(ox_ctx *c, pc_op op, pc_value *a, pc_value *b) {
  if (!a || !b) return NULL;
  pc_value *in[2] = {a, b};
  return pc_build(G, op, in, 2, NULL, 0);
}

/* pads x by the window padding, at the end by what the last window needs (cropping when it needs less) */
static pc_value *pool_pad(ox_ctx *c, pc_value *x, const ox_geom *g, double value) {
  if (!x) return NULL; /* an earlier step failed: the graph holds the error */
  int r = x->type.rank, any = 0;
  int64_t lo[PC_MAX_RANK] = {0}, hi[PC_MAX_RANK] = {0}, inter[PC_MAX_RANK] = {0};
  for (int i = 0; i < g->ns; i++) {
    lo[2 + i] = g->lo[i];
    hi[2 + i] = (g->out[i] - 1) * g->s[i] + ox_span_of(g, i) - g->in[i] - g->lo[i];
    any |= lo[2 + i] != 0 || hi[2 + i] != 0;
  }
  if (!any) return x;
  pc_attr a[4] = {pc_a_ints("low", lo, r), pc_a_ints("high", hi, r), pc_a_ints("interior", inter, r),
                  pc_a_float("value", value)};
  return pc_build(G, PC_OP_pad, &x, 1, a, 4);
}

/* combines with op the strided slices of the padded input xp, one slice per kernel tap */
#define POOL_TAPS_LIMIT 65536 /* a 256x256 window: each tap is a slice and an op in the graph */
/* Windows up to this many taps are one slice per tap, combined in row-major tap order (the
 * small windows of CNNs: one fused expression); larger ones go axis by axis. */
#define POOL_SEPARABLE_TAPS 64

/* combines with op the k strided slices of x along spatial axis i (the other axes whole) */
static pc_value *pool_axis(ox_ctx *c, pc_value *x, const ox_geom *g, int i, pc_op op) {
  int64_t st[PC_MAX_RANK] = {0}, lim[PC_MAX_RANK], str[PC_MAX_RANK];
  for (int a = 0; a < x->type.rank; a++) lim[a] = x->type.dims[a], str[a] = 1;
  pc_value *acc = NULL;
  for (int64_t t = 0; t < g->k[i]; t++) {
    st[2 + i] = t * g->d[i];
    lim[2 + i] = st[2 + i] + (g->out[i] - 1) * g->s[i] + 1;
    str[2 + i] = g->s[i];
    pc_value *sl = pc_slice(G, x, st, lim, str);
    acc = acc ? binop(c, op, acc, sl) : sl;
    if (!acc) return NULL;
  }
  return acc;
}

static pc_value *pool_taps(ox_ctx *c, pc_value *xp, const ox_geom *g, pc_op op) {
  if (!xp) return NULL;
  double taps = 1; /* bounded: a kernel_shape of 2^31 with pads to fit once built nodes until memory ran out (fuzz_mutate) */
  for (int i = 0; i < g->ns; i++) taps *= (double)g->k[i];
  if (taps > POOL_TAPS_LIMIT)
    return ox_fail(c, PC_ERR_UNSUPPORTED, "pool window of %.0f taps: more than %d are not supported", taps, POOL_TAPS_LIMIT),
           NULL;
  /* max and sum over a box are separable: one axis after the other takes k1+k2+.. slices, not k1*k2*.. */
  if (taps > POOL_SEPARABLE_TAPS) {
    for (int i = 0; i < g->ns && xp; i++) xp = pool_axis(c, xp, g, i, op);
    return xp;
  }
  int64_t t[OX_NS_MAX] = {0}, st[PC_MAX_RANK], lim[PC_MAX_RANK], str[PC_MAX_RANK];
  pc_value *acc = NULL;
  for (;;) {
    for (int i = 0; i < 2; i++) st[i] = 0, lim[i] = xp->type.dims[i], str[i] = 1;
    for (int i = 0; i < g->ns; i++) {
      st[2 + i] = t[i] * g->d[i];
      lim[2 + i] = st[2 + i] + (g->out[i] - 1) * g->s[i] + 1;
      str[2 + i] = g->s[i];
    }
    pc_value *sl = pc_slice(G, xp, st, lim, str);
    acc = acc ? binop(c, op, acc, sl) : sl;
    if (!acc) return NULL;
    int i = g->ns - 1;
    while (i >= 0 && ++t[i] == g->k[i]) t[i--] = 0;
    if (i < 0) return acc;
  }
}

/* the smallest value of dtype dt, the padding that never wins a max */
static double lowest(pc_dtype dt) {
  static const struct { pc_dtype dt; double v; } rows[] = {
      {PC_i8, -128.0}, {PC_i16, -32768.0}, {PC_i32, -2147483648.0}, {PC_i64, -9223372036854775808.0}, {PC_u8, 0},
      {PC_u16, 0}, {PC_u32, 0}, {PC_u64, 0}};
  for (size_t i = 0; i < sizeof rows / sizeof *rows; i++)
    if (rows[i].dt == dt) return rows[i].v;
  return -INFINITY;
}

#define POOL_MAX_INDEXED ((int64_t)1 << 20) /* inputs whose flat positions are a constant of that size at most */

/* the flat position of every element of x (row-major, or column-major over the spatial dims when
 * storage_order is 1), as MaxPool's Indices count them */
static pc_value *flat_positions(ox_ctx *c, const pc_value *x, int col_major) {
  int r = x->type.rank;
  int64_t n = pc_type_numel(&x->type);
  if (n > POOL_MAX_INDEXED) return ox_fail(c, PC_ERR_UNSUPPORTED, "Indices of an input this large"), NULL;
  int64_t *v = malloc(sizeof *v * (size_t)(n ? n : 1)), stride[PC_MAX_RANK];
  if (!v) return ox_fail(c, PC_ERR_NOMEM, "out of memory"), NULL;
  int64_t acc = 1;
  for (int i = r - 1; i >= 2; i--) stride[i] = acc, acc *= x->type.dims[i];
  if (col_major) { /* spatial dims reversed: the first varies fastest */
    acc = 1;
    for (int i = 2; i < r; i++) stride[i] = acc, acc *= x->type.dims[i];
  }
  stride[1] = acc, stride[0] = acc * x->type.dims[1];
  for (int64_t k = 0; k < n; k++) {
    int64_t rem = k, pos = 0;
    for (int i = r - 1; i >= 0; i--) pos += rem % x->type.dims[i] * stride[i], rem /= x->type.dims[i];
    v[k] = pos;
  }
  pc_value *p = pc_const(G, pc_type_make(PC_i64, r, x->type.dims), v);
  free(v);
  return p;
}

#define POOL_MAX_TAPS 1024

/* max over the windows with the position of the first maximum of each: the max first, then the
 * taps matching it, last to first so that the first wins (a chain of selects on the running max
 * would make every step use the previous one twice, which fusion would inline exponentially) */
static pc_status max_pool_indexed(ox_ctx *c, pc_value *x, const ox_geom *g) {
  pc_value *xp = pool_pad(c, x, g, lowest(x->type.dtype));
  pc_value *ip = pool_pad(c, flat_positions(c, x, ox_attr_int(c, "storage_order", 0) == 1), g, -1);
  pc_value *best = pool_taps(c, xp, g, PC_OP_max);
  if (!xp || !ip || !best) return ox_status(c);
  pc_value **vs = pc_alloc(G, sizeof *vs * POOL_MAX_TAPS), **ps = pc_alloc(G, sizeof *ps * POOL_MAX_TAPS);
  int64_t t[OX_NS_MAX] = {0}, st[PC_MAX_RANK], lim[PC_MAX_RANK], str[PC_MAX_RANK];
  int n = 0;
  for (int done = 0; vs && ps && !done;) {
    if (n == POOL_MAX_TAPS) return ox_fail(c, PC_ERR_UNSUPPORTED, "Indices of windows over %d taps", POOL_MAX_TAPS);
    for (int i = 0; i < 2; i++) st[i] = 0, lim[i] = xp->type.dims[i], str[i] = 1;
    for (int i = 0; i < g->ns; i++) {
      st[2 + i] = t[i] * g->d[i];
      lim[2 + i] = st[2 + i] + (g->out[i] - 1) * g->s[i] + 1;
      str[2 + i] = g->s[i];
    }
    vs[n] = pc_slice(G, xp, st, lim, str), ps[n++] = pc_slice(G, ip, st, lim, str);
    int i = g->ns - 1;
    while (i >= 0 && ++t[i] == g->k[i]) t[i--] = 0;
    done = i < 0;
  }
  pc_value *at = n ? ps[n - 1] : NULL;
  for (int k = n - 2; k >= 0 && at; k--) at = pc_where(G, pc_eq(G, vs[k], best), ps[k], at);
  ox_out(c, 0, best);
  return ox_out(c, 1, at);
}

/* A stride-1 max pool one spatial axis at a time, each over its own -inf padding: the padded copies are stored,
 * so the kernel padding axis i + 1 computes axis i's maxima once per element, and a window costs k1 + k2 + ..
 * loads instead of k1 * k2 * .. (a fused max tree of all taps) */
static pc_value *max_pool_by_axis(ox_ctx *c, pc_value *x, const ox_geom *g) {
  double low = lowest(x->type.dtype);
  for (int i = 0; i < g->ns && x; i++) {
    if (g->k[i] == 1) continue;
    ox_geom a = *g;
    for (int j = 0; j < g->ns; j++)
      if (j != i) a.k[j] = 1, a.lo[j] = a.hi[j] = 0;
    x = pool_axis(c, pool_pad(c, x, &a, low), &a, i, PC_OP_max);
  }
  return x;
}

/* stride 1, no dilation, an odd kernel centred by its padding: the output is the input's size */
static int same_stride1(const ox_geom *g) {
  int ok = 1;
  for (int i = 0; i < g->ns; i++)
    ok &= g->s[i] == 1 && g->d[i] == 1 && g->k[i] % 2 == 1 && g->lo[i] == g->k[i] / 2 && g->hi[i] == g->k[i] / 2;
  return ok;
}

pc_status ox_op_MaxPool(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0);
  ox_geom g;
  if (!x || !ox_geom_read(c, x, NULL, ox_attr_flag(c, "ceil_mode", 0), &g)) return ox_status(c);
  if (ox_has_out(c, 1)) return max_pool_indexed(c, x, &g);
  if (!same_stride1(&g)) return ox_out(c, 0, pool_taps(c, pool_pad(c, x, &g, lowest(x->type.dtype)), &g, PC_OP_max));
  /* a smaller pool of x imported before: this one is the rest of the window over its result (ox_pool_memo) */
  ox_pool_memo prev;
  pc_value *from = x;
  ox_geom h = g;
  if (ox_pool_find(c, x, g.ns, g.k, &prev)) {
    from = prev.y;
    for (int i = 0; i < g.ns; i++) h.k[i] = g.k[i] - prev.k[i] + 1, h.lo[i] = h.hi[i] = h.k[i] / 2;
  }
  int rest = 0;
  for (int i = 0; i < g.ns; i++) rest |= h.k[i] > 1;
  pc_value *y = rest ? max_pool_by_axis(c, from, &h) : from;
  ox_pool_note(c, x, g.ns, g.k, y);
  return ox_out(c, 0, y);
}

/* taps of window o of dim i that land in [lo_edge, hi_edge) of the unpadded coordinates */
static int64_t window_count(const ox_geom *g, int i, int64_t o, int64_t lo_edge, int64_t hi_edge) {
  int64_t n = 0;
  for (int64_t t = 0; t < g->k[i]; t++) {
    int64_t p = o * g->s[i] - g->lo[i] + t * g->d[i];
    n += p >= lo_edge && p < hi_edge;
  }
  return n;
}

/* divisor of every window, [1, 1, out...]: taps inside the input, or inside input + pads */
static pc_value *pool_counts(ox_ctx *c, const ox_geom *g, int include_pad, pc_dtype dt) {
  int64_t n = ox_dims_prod(g->out, g->ns), dims[PC_MAX_RANK] = {1, 1}, idx[OX_NS_MAX] = {0};
  if (n > OX_MAX_NUMEL) return ox_fail(c, PC_ERR_RANGE, "the pooled map has more than %lld elements", (long long)OX_MAX_NUMEL), NULL;
  double *v = malloc(sizeof *v * (size_t)(n ? n : 1));
  if (!v) return ox_fail(c, PC_ERR_NOMEM, "out of memory"), NULL;
  for (int64_t k = 0; k < n; k++) {
    double cnt = 1;
    for (int i = 0; i < g->ns; i++)
      cnt *= (double)window_count(g, i, idx[i], include_pad ? -g->lo[i] : 0, g->in[i] + (include_pad ? g->hi[i] : 0));
    v[k] = cnt > 0 ? cnt : 1;
    for (int i = g->ns - 1; i >= 0 && ++idx[i] == g->out[i]; i--) idx[i] = 0;
  }
  for (int i = 0; i < g->ns; i++) dims[2 + i] = g->out[i];
  pc_value *r = ox_const_of(c, dt, g->ns + 2, dims, v);
  free(v);
  return r;
}

static pc_value *div_counts(ox_ctx *c, pc_value *sum, const ox_geom *g, int include_pad) {
  if (!sum) return NULL;
  pc_value *cnt = pool_counts(c, g, include_pad, sum->type.dtype);
  return pc_div(G, sum, pc_broadcast_to(G, cnt, sum->type.rank, sum->type.dims));
}

pc_status ox_op_AveragePool(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0);
  ox_geom g;
  if (!ox_require_float(c, x) || !ox_geom_read(c, x, NULL, ox_attr_flag(c, "ceil_mode", 0), &g)) return ox_status(c);
  pc_value *sum = pool_taps(c, pool_pad(c, x, &g, 0.0), &g, PC_OP_add);
  return ox_out(c, 0, div_counts(c, sum, &g, ox_attr_flag(c, "count_include_pad", 0)));
}

pc_value *ox_abs_pow(ox_ctx *c, pc_value *x, int64_t p) {
  if (!x) return NULL;
  if (p == 1) return pc_abs(G, x);
  if (p == 2) return pc_mul(G, x, x);
  return pc_pow(G, pc_abs(G, x), ox_like(c, (double)p, x));
}

pc_value *ox_root(ox_ctx *c, pc_value *x, int64_t p) {
  if (!x || p == 1) return x;
  if (p == 2) return pc_sqrt(G, x);
  return pc_pow(G, x, ox_like(c, 1.0 / (double)p, x));
}

pc_status ox_op_LpPool(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0);
  int64_t p = ox_attr_int(c, "p", 2);
  ox_geom g;
  if (!ox_require_float(c, x) || !ox_geom_read(c, x, NULL, ox_attr_flag(c, "ceil_mode", 0), &g)) return ox_status(c);
  if (p < 1) return ox_fail(c, PC_ERR_ATTR, "p=%lld must be >= 1", (long long)p);
  return ox_out(c, 0, ox_root(c, pool_taps(c, pool_pad(c, ox_abs_pow(c, x, p), &g, 0.0), &g, PC_OP_add), p));
}

int ox_spatial_axes(ox_ctx *c, const pc_value *x, int64_t *axes) {
  if (!ox_check_rank(c, x, 2, PC_MAX_RANK)) return -1;
  for (int i = 2; i < x->type.rank; i++) axes[i - 2] = i;
  return x->type.rank - 2;
}

pc_status ox_op_GlobalAveragePool(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0);
  int64_t axes[PC_MAX_RANK];
  int n = ox_spatial_axes(c, x, axes);
  if (n < 0 || !ox_check_static_input(c, x) || !ox_require_float(c, x)) return ox_status(c);
  double cnt = (double)ox_dims_prod(x->type.dims + 2, n);
  return ox_out(c, 0, ox_mul_s(c, ox_reduce(c, PC_OP_reduce_sum, x, n, axes, 1), cnt > 0 ? 1.0 / cnt : 0));
}

pc_status ox_op_GlobalMaxPool(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0);
  int64_t axes[PC_MAX_RANK];
  int n = ox_spatial_axes(c, x, axes);
  if (n < 0) return ox_status(c);
  return ox_out(c, 0, ox_reduce(c, PC_OP_reduce_max, x, n, axes, 1));
}

pc_status ox_op_GlobalLpPool(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0);
  int64_t axes[PC_MAX_RANK], p = ox_attr_int(c, "p", 2);
  int n = ox_spatial_axes(c, x, axes);
  if (n < 0 || !ox_require_float(c, x)) return ox_status(c);
  return ox_out(c, 0, ox_root(c, ox_reduce(c, PC_OP_reduce_sum, ox_abs_pow(c, x, p), n, axes, 1), p));
}

/* ---------------------------------------------------------------- MaxUnpool */

/* MaxUnpool: zeros of the unpooled shape with X scattered to the flat positions I (MaxPool's Indices) */
pc_status ox_op_MaxUnpool(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0), *idx = ox_in_req(c, 1);
  if (!x || !idx || !ox_check_static_input(c, x) || !ox_check_rank(c, x, 3, PC_MAX_RANK)) return ox_status(c);
  if (idx->type.dtype != PC_i64 || idx->type.rank != x->type.rank || pc_type_numel(&idx->type) != pc_type_numel(&x->type))
    return ox_fail(c, PC_ERR_SHAPE, "indices must be int64 of the input's shape");
  int r = x->type.rank, ns = r - 2;
  int64_t out[PC_MAX_RANK], k[OX_NS_MAX], st[OX_NS_MAX], pads[2 * OX_NS_MAX];
  int n_out = ox_const_ints(c, 2, out, PC_MAX_RANK);
  if (n_out == -2) return ox_status(c);
  if (n_out >= 0 && n_out != r) return ox_fail(c, PC_ERR_SHAPE, "output_shape has %d entries for rank %d", n_out, r);
  if (ox_attr_ints(c, "kernel_shape", k, OX_NS_MAX) != ns || !ox_attr_ints_n(c, "strides", st, ns, ns, 1) ||
      !ox_attr_ints_n(c, "pads", pads, 2 * ns, 2 * ns, 0))
    return ox_status(c) != PC_OK ? ox_status(c) : ox_fail(c, PC_ERR_ATTR, "kernel_shape must have %d entries", ns);
  /* the indices count positions in the shape MaxPool came from (without its padding); a larger
   * output_shape extends it with zeros at the end */
  int64_t shape[PC_MAX_RANK] = {x->type.dims[0], x->type.dims[1]}, total = 1, n = pc_type_numel(&x->type);
  const int64_t lim = (int64_t)1 << 31; /* bounded before the products below (found by fuzz_mutate) */
  for (int i = 0; i < ns; i++)
    if (k[i] < 1 || k[i] >= lim || st[i] < 1 || st[i] >= lim || pads[i] < 0 || pads[i] >= lim || pads[ns + i] < 0 ||
        pads[ns + i] >= lim)
      return ox_fail(c, PC_ERR_ATTR, "kernel_shape and strides must be in [1, 2^31), pads in [0, 2^31)");
  for (int i = 0; i < ns; i++) shape[2 + i] = (x->type.dims[2 + i] - 1) * st[i] - pads[i] - pads[ns + i] + k[i];
  for (int i = 0; i < r; i++)
    if (shape[i] < 1 || __builtin_mul_overflow(total, shape[i], &total) || total > OX_MAX_NUMEL)
      return ox_fail(c, PC_ERR_RANGE, "the unpooled shape is empty or has more than %lld elements", (long long)OX_MAX_NUMEL);
  pc_value *flat_x = ox_reshape(c, x, 1, &n), *flat_i = ox_reshape(c, idx, 1, &n);
  pc_value *in[3] = {pc_full(G, x->type.dtype, 0, 1, &total), flat_i, flat_x};
  pc_attr a[2] = {pc_a_int("axis", 0), pc_a_str("reduce", "none")};
  pc_value *y = in[1] && in[2] ? pc_build(G, PC_OP_scatter, in, 3, a, 2) : NULL;
  y = y ? ox_reshape(c, y, r, shape) : NULL;
  if (n_out < 0 || !y) return ox_out(c, 0, y);
  int64_t lo[PC_MAX_RANK] = {0}, hi[PC_MAX_RANK], in0[PC_MAX_RANK] = {0};
  for (int i = 0; i < r; i++)
    if ((hi[i] = out[i] - shape[i]) < 0) return ox_fail(c, PC_ERR_SHAPE, "output_shape is smaller than the unpooled shape");
  pc_attr pa[4] = {pc_a_ints("low", lo, r), pc_a_ints("high", hi, r), pc_a_ints("interior", in0, r), pc_a_float("value", 0)};
  return ox_out(c, 0, pc_build(G, PC_OP_pad, &y, 1, pa, 4));
}
