/* frontend/onnx_nn.c: decompositions of the ONNX neural-network ops (conv, pooling, normalization, resize, DFT) into prims. */
#include "frontend/onnx_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define G (c->g)
#define NS_MAX (PC_MAX_RANK - 2) /* spatial dims after N and C */

/* ---------------------------------------------------------------- small builders */

static pc_value *mul_s(ox_ctx *c, pc_value *x, double s) { return x ? pc_mul(G, x, ox_like(c, s, x)) : NULL; }
static pc_value *add_s(ox_ctx *c, pc_value *x, double s) { return x ? pc_add(G, x, ox_like(c, s, x)) : NULL; }

static pc_value *binop(ox_ctx *c, pc_op op, pc_value *a, pc_value *b) {
  if (!a || !b) return NULL;
  pc_value *in[2] = {a, b};
  return pc_build(G, op, in, 2, NULL, 0);
}

/* a constant of dtype dt from doubles: built as f64 and converted, so every float dtype works */
static pc_value *const_of(ox_ctx *c, pc_dtype dt, int rank, const int64_t *dims, const double *v) {
  return pc_convert(G, pc_const(G, pc_type_make(PC_f64, rank, dims), v), dt);
}

/* v, a vector, broadcast along dim `axis` of a tensor of the given shape */
static pc_value *along(ox_ctx *c, pc_value *v, int rank, const int64_t *dims, int64_t axis) {
  return v ? pc_broadcast_in_dim(G, v, rank, dims, &axis) : NULL;
}

/* per-channel parameter p ([C]) broadcast to x's shape on dim 1, checked */
static pc_value *per_channel(ox_ctx *c, pc_value *p, const pc_value *x, const char *what) {
  if (!p || !x) return NULL;
  if (p->type.rank != 1 || p->type.dims[0] != x->type.dims[1])
    return ox_fail(c, PC_ERR_SHAPE, "%s must have shape [%lld]", what, (long long)x->type.dims[1]), NULL;
  if (p->type.dtype != x->type.dtype) p = pc_convert(G, p, x->type.dtype);
  return along(c, p, x->type.rank, x->type.dims, 1);
}

static int check_static(ox_ctx *c, const pc_value *x) {
  if (!x) return 0;
  if (pc_type_is_static(&x->type)) return 1;
  ox_fail(c, PC_ERR_UNSUPPORTED, "needs a static input shape, the input has a symbolic dim");
  return 0;
}

static int check_rank(ox_ctx *c, const pc_value *x, int lo, int hi) {
  if (!x) return 0;
  if (x->type.rank >= lo && x->type.rank <= hi) return 1;
  ox_fail(c, PC_ERR_SHAPE, "input has rank %d, expected %d to %d", x->type.rank, lo, hi);
  return 0;
}

/* product of n dims; OX_MAX_NUMEL + 1 when it is larger (or overflows) */
static int64_t prod(const int64_t *d, int n) {
  int64_t p = 1;
  for (int i = 0; i < n; i++)
    if (__builtin_mul_overflow(p, d[i], &p) || p > OX_MAX_NUMEL) return OX_MAX_NUMEL + 1;
  return p;
}

/* ---------------------------------------------------------------- window geometry (conv, pools) */

typedef struct geom {
  int ns;
  int64_t in[NS_MAX], k[NS_MAX], s[NS_MAX], d[NS_MAX], lo[NS_MAX], hi[NS_MAX], out[NS_MAX];
} geom;

static int64_t span_of(const geom *g, int i) { return (g->k[i] - 1) * g->d[i] + 1; }

/* padding and output size of one spatial dim under auto_pad ap; 0 on failure */
static int geom_dim(ox_ctx *c, geom *g, int i, const char *ap, const int64_t *pads, int ceil_mode) {
  int64_t in = g->in[i], s = g->s[i], span = span_of(g, i);
  if (strcmp(ap, "SAME_UPPER") == 0 || strcmp(ap, "SAME_LOWER") == 0) {
    g->out[i] = (in + s - 1) / s;
    int64_t total = (g->out[i] - 1) * s + span - in;
    if (total < 0) total = 0;
    g->lo[i] = ap[5] == 'U' ? total / 2 : total - total / 2;
    g->hi[i] = total - g->lo[i];
    return 1;
  }
  if (strcmp(ap, "VALID") == 0) g->lo[i] = g->hi[i] = 0;
  else if (strcmp(ap, "NOTSET") == 0 || !*ap) g->lo[i] = pads[i], g->hi[i] = pads[g->ns + i];
  else return ox_fail(c, PC_ERR_ATTR, "auto_pad '%s' is not NOTSET, VALID, SAME_UPPER or SAME_LOWER", ap), 0;
  int64_t num = in + g->lo[i] + g->hi[i] - span;
  if (num < 0 || g->lo[i] < 0 || g->hi[i] < 0)
    return ox_fail(c, PC_ERR_SHAPE, "spatial dim %d: window %lld does not fit input %lld with pads %lld+%lld", i,
                   (long long)span, (long long)in, (long long)g->lo[i], (long long)g->hi[i]), 0;
  g->out[i] = (ceil_mode ? (num + s - 1) / s : num / s) + 1;
  /* the last window must start inside the input or its begin padding */
  if (ceil_mode && (g->out[i] - 1) * s >= in + g->lo[i]) g->out[i]--;
  return 1;
}

/* reads kernel (given, or the kernel_shape attribute), strides, dilations, pads, auto_pad */
static int geom_read(ox_ctx *c, const pc_value *x, const int64_t *kernel, int ceil_mode, geom *g) {
  if (!check_static(c, x) || !check_rank(c, x, 3, PC_MAX_RANK)) return 0;
  int ns = g->ns = x->type.rank - 2;
  int64_t pads[2 * NS_MAX];
  for (int i = 0; i < ns; i++) g->in[i] = x->type.dims[2 + i];
  if (kernel) {
    memcpy(g->k, kernel, sizeof *kernel * (size_t)ns);
    int64_t ks[NS_MAX];
    int nk = ox_attr_ints(c, "kernel_shape", ks, NS_MAX);
    for (int i = 0; nk == ns && i < ns; i++)
      if (ks[i] != kernel[i]) return ox_fail(c, PC_ERR_SHAPE, "kernel_shape does not match the weight's shape"), 0;
  } else {
    int nk = ox_attr_ints(c, "kernel_shape", g->k, NS_MAX);
    if (nk == -2) return 0;
    if (nk != ns) return ox_fail(c, PC_ERR_ATTR, "kernel_shape has %d entries, the input has %d spatial dims", nk, ns), 0;
  }
  if (!ox_attr_ints_n(c, "strides", g->s, ns, ns, 1) || !ox_attr_ints_n(c, "dilations", g->d, ns, ns, 1) ||
      !ox_attr_ints_n(c, "pads", pads, 2 * ns, 2 * ns, 0))
    return 0;
  const char *ap = ox_attr_str(c, "auto_pad", "NOTSET");
  for (int i = 0; i < ns; i++) {
    if (g->k[i] < 1 || g->s[i] < 1 || g->d[i] < 1)
      return ox_fail(c, PC_ERR_ATTR, "kernel, strides and dilations must be >= 1"), 0;
    /* bounded before any product: (kernel - 1) * dilation overflowed int64 (found by fuzz_mutate) */
    const int64_t lim = (int64_t)1 << 31;
    if (g->k[i] >= lim || g->s[i] >= lim || g->d[i] >= lim || pads[i] <= -lim || pads[i] >= lim ||
        pads[ns + i] <= -lim || pads[ns + i] >= lim)
      return ox_fail(c, PC_ERR_ATTR, "kernel, strides, dilations and pads must be below 2^31 in size"), 0;
    if (!geom_dim(c, g, i, ap, pads, ceil_mode)) return 0;
  }
  return 1;
}

/* ---------------------------------------------------------------- Conv, ConvTranspose */

static pc_value *add_bias(ox_ctx *c, pc_value *y, pc_value *b) {
  if (!y || !b) return y;
  return pc_add(G, y, per_channel(c, b, y, "bias"));
}

pc_status ox_op_Conv(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0), *w = ox_in_req(c, 1), *b = ox_in(c, 2);
  if (!x || !w) return ox_status(c);
  if (w->type.rank != x->type.rank)
    return ox_fail(c, PC_ERR_SHAPE, "weight has rank %d, input has rank %d", w->type.rank, x->type.rank);
  geom g;
  if (!check_static(c, w) || !geom_read(c, x, w->type.dims + 2, 0, &g)) return ox_status(c);
  int64_t groups = ox_attr_int(c, "group", 1), C = x->type.dims[1], O = w->type.dims[0];
  if (groups < 1 || C % groups || O % groups || w->type.dims[1] * groups != C)
    return ox_fail(c, PC_ERR_SHAPE, "input has %lld channels, weight [%lld, %lld, ...] does not fit group=%lld",
                   (long long)C, (long long)O, (long long)w->type.dims[1], (long long)groups);
  if (w->type.dtype != x->type.dtype) return ox_fail(c, PC_ERR_TYPE, "input and weight dtypes differ");
  int64_t ones[NS_MAX] = {1, 1, 1, 1, 1, 1};
  pc_value *y = pc_conv(G, x, w, g.ns, g.s, g.lo, g.hi, g.d, ones, groups);
  return ox_out(c, 0, add_bias(c, y, b));
}

/* begin/end padding of one ConvTranspose dim from output_shape or auto_pad */
static void ct_pads(const char *ap, int64_t total, int64_t *lo, int64_t *hi) {
  int64_t half = total >= 0 ? total / 2 : -((1 - total) / 2); /* floor: a negative total means output padding */
  if (strcmp(ap, "SAME_UPPER") == 0) *lo = half, *hi = total - half;
  else *lo = total - half, *hi = half;
}

pc_status ox_op_ConvTranspose(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0), *w = ox_in_req(c, 1), *b = ox_in(c, 2);
  if (!x || !w || !check_static(c, x) || !check_static(c, w) || !check_rank(c, x, 3, PC_MAX_RANK - 1))
    return ox_status(c);
  int r = x->type.rank, ns = r - 2;
  if (w->type.rank != r) return ox_fail(c, PC_ERR_SHAPE, "weight has rank %d, input has rank %d", w->type.rank, r);
  int64_t groups = ox_attr_int(c, "group", 1), C = x->type.dims[1];
  if (groups < 1 || C % groups || w->type.dims[0] != C)
    return ox_fail(c, PC_ERR_SHAPE, "input has %lld channels, weight's first dim is %lld (group=%lld)", (long long)C,
                   (long long)w->type.dims[0], (long long)groups);
  int64_t s[NS_MAX], d[NS_MAX], op[NS_MAX], pads[2 * NS_MAX], oshape[PC_MAX_RANK], ks[NS_MAX];
  if (!ox_attr_ints_n(c, "strides", s, ns, ns, 1) || !ox_attr_ints_n(c, "dilations", d, ns, ns, 1) ||
      !ox_attr_ints_n(c, "output_padding", op, ns, ns, 0) || !ox_attr_ints_n(c, "pads", pads, 2 * ns, 2 * ns, 0))
    return ox_status(c);
  int nk = ox_attr_ints(c, "kernel_shape", ks, NS_MAX);
  for (int i = 0; nk == ns && i < ns; i++)
    if (ks[i] != w->type.dims[2 + i]) return ox_fail(c, PC_ERR_SHAPE, "kernel_shape does not match the weight's shape");
  int no = ox_attr_ints(c, "output_shape", oshape, PC_MAX_RANK);
  if (no == -2) return ox_status(c);
  const int64_t *os = no == ns ? oshape : no == ns + 2 ? oshape + 2 : NULL;
  if (no >= 0 && !os) return ox_fail(c, PC_ERR_ATTR, "output_shape has %d entries for %d spatial dims", no, ns);
  const char *ap = ox_attr_str(c, "auto_pad", "NOTSET");
  int same = strncmp(ap, "SAME_", 5) == 0;
  int64_t lo[NS_MAX], hi[NS_MAX], out[NS_MAX];
  const int64_t lim = (int64_t)1 << 31; /* bounded before the products below (found by fuzz_mutate) */
  for (int i = 0; i < ns; i++)
    if (s[i] >= lim || d[i] >= lim || op[i] <= -lim || op[i] >= lim || pads[i] <= -lim || pads[i] >= lim ||
        pads[ns + i] <= -lim || pads[ns + i] >= lim || (os && (os[i] <= -lim || os[i] >= lim)))
      return ox_fail(c, PC_ERR_ATTR, "strides, dilations, pads, output_padding and output_shape must be below 2^31 in size");
  for (int i = 0; i < ns; i++) {
    if (s[i] < 1 || d[i] < 1) return ox_fail(c, PC_ERR_ATTR, "strides and dilations must be >= 1");
    int64_t in = x->type.dims[2 + i], span = (w->type.dims[2 + i] - 1) * d[i] + 1;
    int64_t full = s[i] * (in - 1) + op[i] + span;
    if (os) ct_pads(ap, full - os[i], &lo[i], &hi[i]);
    else if (same) ct_pads(ap, full - in * s[i], &lo[i], &hi[i]);
    else lo[i] = pads[i], hi[i] = pads[ns + i];
    out[i] = full - lo[i] - hi[i];
    if (out[i] < 0) return ox_fail(c, PC_ERR_SHAPE, "spatial dim %d: the pads leave a negative output size", i);
  }
  if (w->type.dtype != x->type.dtype) return ox_fail(c, PC_ERR_TYPE, "input and weight dtypes differ");
  int64_t O = w->type.dims[1] * groups;
  if (b && (b->type.rank != 1 || b->type.dims[0] != O))
    return ox_fail(c, PC_ERR_SHAPE, "bias must have shape [%lld]", (long long)O);
  if (b && b->type.dtype != x->type.dtype) b = pc_convert(G, b, x->type.dtype);
  return ox_out(c, 0, pc_conv_transpose(G, x, w, b, groups, s, d, lo, out));
}

/* ---------------------------------------------------------------- pooling */

/* pads x by the window padding, at the end by what the last window needs (cropping when it needs less) */
static pc_value *pool_pad(ox_ctx *c, pc_value *x, const geom *g, double value) {
  if (!x) return NULL; /* an earlier step failed: the graph holds the error */
  int r = x->type.rank, any = 0;
  int64_t lo[PC_MAX_RANK] = {0}, hi[PC_MAX_RANK] = {0}, inter[PC_MAX_RANK] = {0};
  for (int i = 0; i < g->ns; i++) {
    lo[2 + i] = g->lo[i];
    hi[2 + i] = (g->out[i] - 1) * g->s[i] + span_of(g, i) - g->in[i] - g->lo[i];
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
static pc_value *pool_axis(ox_ctx *c, pc_value *x, const geom *g, int i, pc_op op) {
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

static pc_value *pool_taps(ox_ctx *c, pc_value *xp, const geom *g, pc_op op) {
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
  int64_t t[NS_MAX] = {0}, st[PC_MAX_RANK], lim[PC_MAX_RANK], str[PC_MAX_RANK];
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
static pc_status max_pool_indexed(ox_ctx *c, pc_value *x, const geom *g) {
  pc_value *xp = pool_pad(c, x, g, lowest(x->type.dtype));
  pc_value *ip = pool_pad(c, flat_positions(c, x, ox_attr_int(c, "storage_order", 0) == 1), g, -1);
  pc_value *best = pool_taps(c, xp, g, PC_OP_max);
  if (!xp || !ip || !best) return ox_status(c);
  pc_value **vs = pc_alloc(G, sizeof *vs * POOL_MAX_TAPS), **ps = pc_alloc(G, sizeof *ps * POOL_MAX_TAPS);
  int64_t t[NS_MAX] = {0}, st[PC_MAX_RANK], lim[PC_MAX_RANK], str[PC_MAX_RANK];
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
static pc_value *max_pool_by_axis(ox_ctx *c, pc_value *x, const geom *g) {
  double low = lowest(x->type.dtype);
  for (int i = 0; i < g->ns && x; i++) {
    if (g->k[i] == 1) continue;
    geom a = *g;
    for (int j = 0; j < g->ns; j++)
      if (j != i) a.k[j] = 1, a.lo[j] = a.hi[j] = 0;
    x = pool_axis(c, pool_pad(c, x, &a, low), &a, i, PC_OP_max);
  }
  return x;
}

/* stride 1, no dilation, an odd kernel centred by its padding: the output is the input's size */
static int same_stride1(const geom *g) {
  int ok = 1;
  for (int i = 0; i < g->ns; i++)
    ok &= g->s[i] == 1 && g->d[i] == 1 && g->k[i] % 2 == 1 && g->lo[i] == g->k[i] / 2 && g->hi[i] == g->k[i] / 2;
  return ok;
}

pc_status ox_op_MaxPool(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0);
  geom g;
  if (!x || !geom_read(c, x, NULL, ox_attr_flag(c, "ceil_mode", 0), &g)) return ox_status(c);
  if (ox_has_out(c, 1)) return max_pool_indexed(c, x, &g);
  if (!same_stride1(&g)) return ox_out(c, 0, pool_taps(c, pool_pad(c, x, &g, lowest(x->type.dtype)), &g, PC_OP_max));
  /* a smaller pool of x imported before: this one is the rest of the window over its result (ox_pool_memo) */
  ox_pool_memo prev;
  pc_value *from = x;
  geom h = g;
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
static int64_t window_count(const geom *g, int i, int64_t o, int64_t lo_edge, int64_t hi_edge) {
  int64_t n = 0;
  for (int64_t t = 0; t < g->k[i]; t++) {
    int64_t p = o * g->s[i] - g->lo[i] + t * g->d[i];
    n += p >= lo_edge && p < hi_edge;
  }
  return n;
}

/* divisor of every window, [1, 1, out...]: taps inside the input, or inside input + pads */
static pc_value *pool_counts(ox_ctx *c, const geom *g, int include_pad, pc_dtype dt) {
  int64_t n = prod(g->out, g->ns), dims[PC_MAX_RANK] = {1, 1}, idx[NS_MAX] = {0};
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
  pc_value *r = const_of(c, dt, g->ns + 2, dims, v);
  free(v);
  return r;
}

static pc_value *div_counts(ox_ctx *c, pc_value *sum, const geom *g, int include_pad) {
  if (!sum) return NULL;
  pc_value *cnt = pool_counts(c, g, include_pad, sum->type.dtype);
  return pc_div(G, sum, pc_broadcast_to(G, cnt, sum->type.rank, sum->type.dims));
}

pc_status ox_op_AveragePool(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0);
  geom g;
  if (!ox_require_float(c, x) || !geom_read(c, x, NULL, ox_attr_flag(c, "ceil_mode", 0), &g)) return ox_status(c);
  pc_value *sum = pool_taps(c, pool_pad(c, x, &g, 0.0), &g, PC_OP_add);
  return ox_out(c, 0, div_counts(c, sum, &g, ox_attr_flag(c, "count_include_pad", 0)));
}

static pc_value *abs_pow(ox_ctx *c, pc_value *x, int64_t p) {
  if (!x) return NULL;
  if (p == 1) return pc_abs(G, x);
  if (p == 2) return pc_mul(G, x, x);
  return pc_pow(G, pc_abs(G, x), ox_like(c, (double)p, x));
}

static pc_value *root(ox_ctx *c, pc_value *x, int64_t p) {
  if (!x || p == 1) return x;
  if (p == 2) return pc_sqrt(G, x);
  return pc_pow(G, x, ox_like(c, 1.0 / (double)p, x));
}

pc_status ox_op_LpPool(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0);
  int64_t p = ox_attr_int(c, "p", 2);
  geom g;
  if (!ox_require_float(c, x) || !geom_read(c, x, NULL, ox_attr_flag(c, "ceil_mode", 0), &g)) return ox_status(c);
  if (p < 1) return ox_fail(c, PC_ERR_ATTR, "p=%lld must be >= 1", (long long)p);
  return ox_out(c, 0, root(c, pool_taps(c, pool_pad(c, abs_pow(c, x, p), &g, 0.0), &g, PC_OP_add), p));
}

static int spatial_axes(ox_ctx *c, const pc_value *x, int64_t *axes) {
  if (!check_rank(c, x, 2, PC_MAX_RANK)) return -1;
  for (int i = 2; i < x->type.rank; i++) axes[i - 2] = i;
  return x->type.rank - 2;
}

pc_status ox_op_GlobalAveragePool(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0);
  int64_t axes[PC_MAX_RANK];
  int n = spatial_axes(c, x, axes);
  if (n < 0 || !check_static(c, x) || !ox_require_float(c, x)) return ox_status(c);
  double cnt = (double)prod(x->type.dims + 2, n);
  return ox_out(c, 0, mul_s(c, ox_reduce(c, PC_OP_reduce_sum, x, n, axes, 1), cnt > 0 ? 1.0 / cnt : 0));
}

pc_status ox_op_GlobalMaxPool(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0);
  int64_t axes[PC_MAX_RANK];
  int n = spatial_axes(c, x, axes);
  if (n < 0) return ox_status(c);
  return ox_out(c, 0, ox_reduce(c, PC_OP_reduce_max, x, n, axes, 1));
}

pc_status ox_op_GlobalLpPool(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0);
  int64_t axes[PC_MAX_RANK], p = ox_attr_int(c, "p", 2);
  int n = spatial_axes(c, x, axes);
  if (n < 0 || !ox_require_float(c, x)) return ox_status(c);
  return ox_out(c, 0, root(c, ox_reduce(c, PC_OP_reduce_sum, abs_pow(c, x, p), n, axes, 1), p));
}

/* ---------------------------------------------------------------- normalization */

/* mean and population variance of x over axes (kept as size-1 dims); *xc = x - mean; x's shape must be static */
static int moments(ox_ctx *c, pc_value *x, int n, const int64_t *axes, pc_value **mean, pc_value **var,
                   pc_value **xc) {
  return check_static(c, x) && fc_moments(G, x, n, axes, mean, var, xc);
}

static pc_value *rsqrt_eps(ox_ctx *c, pc_value *var, double eps) { return var ? pc_rsqrt(G, add_s(c, var, eps)) : NULL; }

/* running statistic update: old * momentum + cur * (1 - momentum) */
static pc_value *running(ox_ctx *c, pc_value *old, pc_value *cur, double momentum) {
  if (!old || !cur) return NULL;
  return pc_add(G, mul_s(c, pc_convert(G, old, cur->type.dtype), momentum), mul_s(c, cur, 1.0 - momentum));
}

static pc_status batchnorm_training(ox_ctx *c, pc_value *x, pc_value *sc, pc_value *b, double eps) {
  int64_t axes[PC_MAX_RANK], n = 0, C = x->type.dims[1];
  for (int i = 0; i < x->type.rank; i++)
    if (i != 1) axes[n++] = i;
  pc_value *mean, *var, *xc;
  if (!moments(c, x, (int)n, axes, &mean, &var, &xc)) return ox_status(c);
  pc_value *y = ox_binary(c, PC_OP_mul, xc, rsqrt_eps(c, var, eps));
  y = pc_add(G, pc_mul(G, y, per_channel(c, sc, x, "scale")), per_channel(c, b, x, "B"));
  double m = ox_attr_float(c, "momentum", 0.9);
  pc_value *mv = ox_reshape(c, mean, 1, &C), *vv = ox_reshape(c, var, 1, &C);
  if (ox_out(c, 0, y) != PC_OK) return ox_status(c);
  if (ox_has_out(c, 1)) ox_out(c, 1, running(c, ox_in(c, 3), mv, m));
  if (ox_has_out(c, 2)) ox_out(c, 2, running(c, ox_in(c, 4), vv, m));
  return ox_status(c);
}

pc_status ox_op_BatchNormalization(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0), *sc = ox_in_req(c, 1), *b = ox_in_req(c, 2), *mean = ox_in_req(c, 3),
           *var = ox_in_req(c, 4);
  if (!x || !sc || !b || !mean || !var || !check_rank(c, x, 2, PC_MAX_RANK) || !ox_require_float(c, x))
    return ox_status(c);
  double eps = ox_attr_float(c, "epsilon", 1e-5);
  if (c->opset < 9 && ox_attr_int(c, "spatial", 1) == 0)
    return ox_fail(c, PC_ERR_UNSUPPORTED, "spatial=0 (per-activation statistics) is not supported");
  if (c->opset >= 14 && ox_attr_int(c, "training_mode", 0)) return batchnorm_training(c, x, sc, b, eps);
  if (ox_has_out(c, 1) || ox_has_out(c, 2))
    return ox_fail(c, PC_ERR_UNSUPPORTED, "running statistics outputs are only produced in training mode");
  /* fold the statistics into one scale and shift per channel (constants when the parameters are) */
  pc_dtype dt = x->type.dtype;
  pc_value *inv = pc_mul(G, pc_convert(G, sc, dt), rsqrt_eps(c, pc_convert(G, var, dt), eps));
  pc_value *shift = inv ? pc_sub(G, pc_convert(G, b, dt), pc_mul(G, pc_convert(G, mean, dt), inv)) : NULL;
  pc_value *y = pc_add(G, pc_mul(G, x, per_channel(c, inv, x, "scale")), per_channel(c, shift, x, "B"));
  return ox_out(c, 0, y);
}

pc_status ox_op_InstanceNormalization(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0), *sc = ox_in_req(c, 1), *b = ox_in_req(c, 2), *mean, *var, *xc;
  int64_t axes[PC_MAX_RANK];
  int n = spatial_axes(c, x, axes);
  if (n < 0 || !sc || !b || !ox_require_float(c, x) || !moments(c, x, n, axes, &mean, &var, &xc)) return ox_status(c);
  pc_value *y = ox_binary(c, PC_OP_mul, xc, rsqrt_eps(c, var, ox_attr_float(c, "epsilon", 1e-5)));
  y = y ? pc_add(G, pc_mul(G, y, per_channel(c, sc, x, "scale")), per_channel(c, b, x, "B")) : NULL;
  return ox_out(c, 0, y);
}

/* the dtype statistics are computed in: f32 for half types unless stash_type says otherwise */
static pc_dtype stash_dtype(ox_ctx *c, pc_dtype dt) {
  int64_t st = ox_attr_int(c, "stash_type", 1);
  if (st == 1 && (dt == PC_f16 || dt == PC_bf16)) return PC_f32;
  return dt;
}

/* scale and bias (numpy-broadcast) applied to y; either may be NULL */
static pc_value *affine(ox_ctx *c, pc_value *y, pc_value *scale, pc_value *bias) {
  if (y && scale) y = ox_binary(c, PC_OP_mul, y, pc_convert(G, scale, y->type.dtype));
  if (y && bias) y = ox_binary(c, PC_OP_add, y, pc_convert(G, bias, y->type.dtype));
  return y;
}

pc_status ox_op_LayerNormalization(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0), *mean = NULL;
  if (!ox_require_float(c, x)) return ox_status(c);
  int r = x->type.rank, ax = ox_axis(c, ox_attr_int(c, "axis", -1), r);
  if (ax < 0) return ox_status(c);
  int64_t axes[PC_MAX_RANK];
  for (int i = ax; i < r; i++) axes[i - ax] = i;
  pc_value *xs = pc_convert(G, x, stash_dtype(c, x->type.dtype)), *inv = NULL;
  if (!check_static(c, xs)) return ox_status(c);
  pc_value *y = pc_convert(G, fc_layer_norm(G, xs, r - ax, axes, ox_attr_float(c, "epsilon", 1e-5), &mean, &inv),
                           x->type.dtype);
  ox_out(c, 0, affine(c, y, ox_in(c, 1), ox_in(c, 2)));
  if (ox_has_out(c, 1)) ox_out(c, 1, mean);
  if (ox_has_out(c, 2)) ox_out(c, 2, inv);
  return ox_status(c);
}

pc_status ox_op_RMSNormalization(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0);
  if (!ox_require_float(c, x) || !check_static(c, x)) return ox_status(c);
  int r = x->type.rank, ax = ox_axis(c, ox_attr_int(c, "axis", -1), r);
  if (ax < 0) return ox_status(c);
  int64_t axes[PC_MAX_RANK];
  for (int i = ax; i < r; i++) axes[i - ax] = i;
  pc_value *xs = pc_convert(G, x, stash_dtype(c, x->type.dtype));
  double cnt = (double)prod(x->type.dims + ax, r - ax);
  pc_value *ms = mul_s(c, ox_reduce(c, PC_OP_reduce_sum, pc_mul(G, xs, xs), r - ax, axes, 1), 1.0 / cnt);
  pc_value *y = ox_binary(c, PC_OP_mul, xs, rsqrt_eps(c, ms, ox_attr_float(c, "epsilon", 1e-5)));
  return ox_out(c, 0, affine(c, pc_convert(G, y, x->type.dtype), ox_in(c, 1), NULL));
}

/* GroupNormalization-18 gives scale/bias per group: repeat each entry C/G times */
static pc_value *group_param(ox_ctx *c, pc_value *p, const pc_value *x, int64_t groups) {
  int64_t C = x->type.dims[1];
  if (!p || p->type.rank != 1 || p->type.dims[0] == C || p->type.dims[0] != groups) return per_channel(c, p, x, "scale and bias");
  int64_t d2[2] = {groups, C / groups}, zero = 0;
  return per_channel(c, pc_reshape(G, pc_broadcast_in_dim(G, p, 2, d2, &zero), 1, &C), x, "scale and bias");
}

pc_status ox_op_GroupNormalization(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0), *sc = ox_in_req(c, 1), *b = ox_in_req(c, 2), *mean, *var, *xc;
  int64_t groups = ox_attr_int(c, "num_groups", 0);
  if (!sc || !b || !check_rank(c, x, 2, PC_MAX_RANK) || !check_static(c, x) || !ox_require_float(c, x))
    return ox_status(c);
  int64_t C = x->type.dims[1], N = x->type.dims[0];
  if (groups < 1 || C % groups) return ox_fail(c, PC_ERR_ATTR, "num_groups=%lld does not divide %lld channels", (long long)groups, (long long)C);
  int64_t d3[3] = {N, groups, pc_type_numel(&x->type) / (N ? N : 1) / groups}, ax = 2;
  pc_value *xs = pc_reshape(G, pc_convert(G, x, stash_dtype(c, x->type.dtype)), 3, d3);
  if (!moments(c, xs, 1, &ax, &mean, &var, &xc)) return ox_status(c);
  pc_value *y = ox_binary(c, PC_OP_mul, xc, rsqrt_eps(c, var, ox_attr_float(c, "epsilon", 1e-5)));
  y = pc_convert(G, pc_reshape(G, y, x->type.rank, x->type.dims), x->type.dtype);
  y = y ? pc_add(G, pc_mul(G, y, group_param(c, sc, x, groups)), group_param(c, b, x, groups)) : NULL;
  return ox_out(c, 0, y);
}

pc_status ox_op_LRN(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0);
  int64_t size = ox_attr_int(c, "size", 0);
  if (!check_rank(c, x, 2, PC_MAX_RANK) || !check_static(c, x) || !ox_require_float(c, x)) return ox_status(c);
  if (size < 1) return ox_fail(c, PC_ERR_ATTR, "size must be >= 1");
  double alpha = ox_attr_float(c, "alpha", 1e-4), beta = ox_attr_float(c, "beta", 0.75), bias = ox_attr_float(c, "bias", 1.0);
  int r = x->type.rank;
  int64_t lo[PC_MAX_RANK] = {0}, hi[PC_MAX_RANK] = {0}, inter[PC_MAX_RANK] = {0}, st[PC_MAX_RANK] = {0}, lim[PC_MAX_RANK],
          one[PC_MAX_RANK];
  /* a window reaching more than C-1 channels away only adds padding zeros: clamp it, so that a huge `size`
   * costs no more than 2C-1 slices (the average still divides by `size`) */
  int64_t C = x->type.dims[1], reach = C > 0 ? C - 1 : 0;
  lo[1] = (size - 1) / 2, hi[1] = size - 1 - lo[1];
  lo[1] = lo[1] < reach ? lo[1] : reach, hi[1] = hi[1] < reach ? hi[1] : reach;
  int64_t window = lo[1] + hi[1] + 1;
  pc_value *sq = pc_mul(G, x, x);
  pc_attr a[4] = {pc_a_ints("low", lo, r), pc_a_ints("high", hi, r), pc_a_ints("interior", inter, r), pc_a_float("value", 0)};
  pc_value *p = sq ? pc_build(G, PC_OP_pad, &sq, 1, a, 4) : NULL, *sum = NULL;
  for (int i = 0; i < r; i++) lim[i] = x->type.dims[i], one[i] = 1;
  for (int64_t j = 0; p && j < window; j++) {
    st[1] = j, lim[1] = j + x->type.dims[1];
    pc_value *sl = pc_slice(G, p, st, lim, one);
    sum = sum ? pc_add(G, sum, sl) : sl;
  }
  pc_value *den = add_s(c, mul_s(c, sum, alpha / (double)size), bias);
  return ox_out(c, 0, den ? pc_div(G, x, pc_pow(G, den, ox_like(c, beta, den))) : NULL);
}

pc_status ox_op_MeanVarianceNormalization(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0), *mean, *var, *xc;
  int64_t axes[PC_MAX_RANK] = {0, 2, 3};
  int n = ox_attr_ints(c, "axes", axes, PC_MAX_RANK);
  if (n == -2 || !ox_require_float(c, x)) return ox_status(c);
  if (n == -1) n = 3;
  if (!ox_axes(c, axes, n, x->type.rank) || !moments(c, x, n, axes, &mean, &var, &xc)) return ox_status(c);
  return ox_out(c, 0, ox_binary(c, PC_OP_div, xc, add_s(c, pc_sqrt(G, var), 1e-9)));
}

pc_status ox_op_LpNormalization(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0);
  int64_t p = ox_attr_int(c, "p", 2);
  if (!ox_require_float(c, x)) return ox_status(c);
  int64_t ax = ox_axis(c, ox_attr_int(c, "axis", -1), x->type.rank);
  if (ax < 0) return ox_status(c);
  if (p != 1 && p != 2) return ox_fail(c, PC_ERR_ATTR, "p=%lld is not 1 or 2", (long long)p);
  pc_value *norm = root(c, ox_reduce(c, PC_OP_reduce_sum, abs_pow(c, x, p), 1, &ax, 1), p);
  /* an all-zero row stays zero instead of 0/0 */
  norm = norm ? pc_where(G, pc_eq(G, norm, ox_like(c, 0, norm)), ox_like(c, 1, norm), norm) : NULL;
  return ox_out(c, 0, ox_binary(c, PC_OP_div, x, norm));
}

/* ---------------------------------------------------------------- Dropout */

/* Training-mode Dropout as ONNX's reference runs it: mask = RandomState(seed).uniform(0, 1, shape) >= ratio
 * (numpy's legacy MT19937), y = mask * x * (1 / (1 - ratio)). The mask depends on the shape, the ratio and the seed
 * only, so it is drawn here into a constant; r is the ratio input (NULL: the default 0.5). */
static pc_status dropout_seeded(ox_ctx *c, pc_value *x, pc_value *r, double ratio) {
  if (!ox_require_float(c, x)) return ox_status(c);
  if (!(ratio > 0 && ratio < 1)) return ox_fail(c, PC_ERR_ATTR, "training-mode ratio %g is outside [0, 1)", ratio);
  int64_t seed = ox_attr_int(c, "seed", 0);
  if (seed < 0 || seed > (int64_t)UINT32_MAX)
    return ox_fail(c, PC_ERR_UNSUPPORTED, "seed %lld is outside [0, 2^32 - 1], where numpy's RandomState (ONNX's reference) takes it", (long long)seed);
  if (!pc_type_is_static(&x->type))
    return ox_fail(c, PC_ERR_UNSUPPORTED, "training-mode Dropout draws its mask at compile time and needs a static input shape");
  pc_type mt = pc_type_make(PC_bool, x->type.rank, x->type.dims);
  int64_t n = pc_type_numel(&mt);
  uint8_t *bits = malloc(n > 0 ? (size_t)n : 1);
  if (!bits) return ox_fail(c, PC_ERR_NOMEM, "no memory for a mask of %lld elements", (long long)n);
  pc_mt19937 rng;
  pc_mt19937_seed(&rng, (uint32_t)seed);
  for (int64_t i = 0; i < n; i++) bits[i] = pc_mt19937_double(&rng) >= ratio; /* numpy compares in double */
  pc_value *mask = pc_const(G, mt, bits);
  free(bits);
  /* the scale is computed in the ratio's dtype, as numpy does for mask * X * scale */
  pc_value *scale = r ? pc_div(G, ox_like(c, 1, r), pc_sub(G, ox_like(c, 1, r), r)) : pc_scalar(G, x->type.dtype, 1 / (1 - ratio));
  if (scale && scale->type.dtype != x->type.dtype) scale = pc_convert(G, scale, x->type.dtype);
  if (scale && scale->type.rank) scale = ox_reshape(c, scale, 0, NULL);
  /* x * (mask * scale) rounds like numpy's (mask * x) * scale (x * 1 and x * 0 are exact, and 0 * scale is 0), and
   * mask * scale folds into one constant */
  ox_out(c, 0, ox_binary(c, PC_OP_mul, x, ox_binary(c, PC_OP_mul, pc_convert(G, mask, x->type.dtype), scale)));
  if (ox_has_out(c, 1)) ox_out(c, 1, mask);
  return ox_status(c);
}

pc_status ox_op_Dropout(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0);
  if (!x) return ox_status(c);
  double ratio = ox_attr_float(c, "ratio", 0.5);
  int64_t training = 0;
  if (c->opset >= 12) {
    double rv;
    int64_t tv;
    /* the ratio matters only in training mode: read it only then */
    int nt = ox_has_in(c, 2) ? ox_const_ints(c, 2, &tv, 1) : -1;
    if (nt == -2) return ox_status(c);
    training = nt == 1 ? tv : 0;
    int nr = training && ox_has_in(c, 1) ? ox_const_floats(c, 1, &rv, 1) : -1;
    if (nr == -2) return ox_status(c);
    ratio = nr == 1 ? rv : 0.5;
  } else if (c->opset < 7) {
    training = !ox_attr_int(c, "is_test", 0);
  }
  if (training && ratio != 0) {
    /* the seed attribute exists from opset 12, where the ratio is input 1 */
    if (c->opset >= 12 && ox_has_attr(c, "seed")) return dropout_seeded(c, x, ox_has_in(c, 1) ? ox_in(c, 1) : NULL, ratio);
    return ox_fail(c, PC_ERR_UNSUPPORTED,
                   "training-mode Dropout (ratio %g) without a seed attribute draws a fresh random mask on every run, "
                   "which no compiled model can reproduce; only seeded training-mode Dropout is supported", ratio);
  }
  ox_out(c, 0, x);
  if (ox_has_out(c, 1))
    ox_out(c, 1, c->opset >= 10 ? pc_full(G, PC_bool, 1, x->type.rank, x->type.dims) : ox_like(c, 1, x));
  return ox_status(c);
}

/* ---------------------------------------------------------------- DepthToSpace, SpaceToDepth */

static pc_value *shuffle(ox_ctx *c, pc_value *x, int n6, const int64_t *d6, const int64_t *perm, const int64_t *d4) {
  return pc_reshape(G, pc_transpose(G, pc_reshape(G, x, n6, d6), perm), 4, d4);
}

pc_status ox_op_DepthToSpace(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0);
  int64_t b = ox_attr_int(c, "blocksize", 0);
  if (!check_rank(c, x, 4, 4) || !check_static(c, x)) return ox_status(c);
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
  if (!check_rank(c, x, 4, 4) || !check_static(c, x)) return ox_status(c);
  int64_t N = x->type.dims[0], C = x->type.dims[1], H = x->type.dims[2], W = x->type.dims[3];
  if (b < 1 || H % b || W % b) return ox_fail(c, PC_ERR_ATTR, "blocksize %lld does not divide %lldx%lld", (long long)b, (long long)H, (long long)W);
  const char *mode = ox_attr_str(c, "mode", "DCR");
  int64_t d6[6] = {N, C, H / b, b, W / b, b}, dcr[6] = {0, 3, 5, 1, 2, 4}, crd[6] = {0, 1, 3, 5, 2, 4},
          d4[4] = {N, C * b * b, H / b, W / b};
  if (strcmp(mode, "DCR") && strcmp(mode, "CRD")) return ox_fail(c, PC_ERR_ATTR, "mode '%s' is not DCR or CRD", mode);
  return ox_out(c, 0, shuffle(c, x, 6, d6, mode[0] == 'D' ? dcr : crd, d4));
}

/* ---------------------------------------------------------------- Resize, Upsample */

typedef enum { RS_NEAREST, RS_LINEAR, RS_CUBIC } rs_mode;

typedef struct rs_opts {
  rs_mode mode;
  const char *ctm, *nearest; /* coordinate_transformation_mode, nearest_mode */
  double a, extrap;          /* cubic_coeff_a, extrapolation_value */
  int exclude, antialias;
} rs_opts;

/* source coordinate of output index i (ONNX Resize formulas); *outside for tf_crop_and_resize */
static int rs_origin(ox_ctx *c, const rs_opts *o, int64_t i, double scale, int64_t in, int64_t out, double rlo,
                     double rhi, double *x, int *outside) {
  double ow = scale * (double)in, y = (double)i;
  const char *m = o->ctm;
  *outside = 0;
  if (!strcmp(m, "half_pixel")) *x = (y + 0.5) / scale - 0.5;
  else if (!strcmp(m, "asymmetric")) *x = y / scale;
  else if (!strcmp(m, "pytorch_half_pixel")) *x = ow == 1 ? -0.5 : (y + 0.5) / scale - 0.5;
  else if (!strcmp(m, "align_corners")) *x = ow == 1 ? 0 : y * (double)(in - 1) / (ow - 1);
  else if (!strcmp(m, "half_pixel_symmetric"))
    *x = (double)in / 2 * (1 - (double)out / ow) + (y + 0.5) / scale - 0.5;
  else if (!strcmp(m, "tf_crop_and_resize")) {
    *x = ow == 1 ? (rhi - rlo) * (double)(in - 1) / 2 : y * (rhi - rlo) * (double)(in - 1) / (ow - 1);
    *x += rlo * (double)(in - 1);
    *outside = *x < 0 || *x > (double)(in - 1);
  } else
    return ox_fail(c, PC_ERR_ATTR, "coordinate_transformation_mode '%s' is not supported", m), 0;
  return 1;
}

static double cubic_w(double x, double A) {
  x = fabs(x);
  if (x <= 1) return ((A + 2) * x - (A + 3)) * x * x + 1;
  if (x < 2) return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
  return 0;
}

/* taps of one output position: n weights for indices base - n/2 + 1 + j (ratio in (0, 1]) */
static int rs_coeffs(const rs_opts *o, double ratio, double scale, double *w) {
  int n;
  double s = scale < 1 && o->antialias ? scale : 1, sum = 0;
  if (o->mode == RS_NEAREST) {
    int up = !strcmp(o->nearest, "round_prefer_ceil") ? ratio >= 0.5
             : !strcmp(o->nearest, "floor")           ? ratio == 1
             : !strcmp(o->nearest, "ceil")            ? 1
                                                      : ratio > 0.5;
    w[0] = !up, w[1] = up;
    return 2;
  }
  /* linear and cubic kernels widened by 1/scale when antialiasing a downscale */
  double support = o->mode == RS_LINEAR ? 1 : 2;
  int start = (int)floor(-support / s) + 1;
  n = 2 - 2 * start;
  for (int j = 0; j < n; j++) {
    double t = ((double)(start + j) - ratio) * s;
    w[j] = o->mode == RS_LINEAR ? fmax(0, 1 - fabs(t)) : cubic_w(t, o->a);
    sum += w[j];
  }
  for (int j = 0; s < 1 && j < n; j++) w[j] /= sum;
  return n;
}

#define RS_MAX_TAPS 64

/* x[..., idx[i], ...] along `axis` for the `out` constant indices idx, into `shape` */
static pc_value *gather_along(ox_ctx *c, pc_value *x, int axis, int64_t out, const int64_t *idx, const int64_t *shape) {
  pc_value *ix = pc_const(G, pc_type_make(PC_i64, 1, &out), idx);
  pc_value *gin[2] = {x, along(c, ix, x->type.rank, shape, axis)};
  pc_attr a = pc_a_int("axis", axis);
  return gin[1] ? pc_build(G, PC_OP_gather, gin, 2, &a, 1) : NULL;
}

/* nearest along `axis`: one source index per output, sel; an integer upsample whose source of output i
 * is i / s repeats each element s times, a broadcast and a reshape that fuse into one copy kernel
 * (a gather per tap, weighted 0 or 1 and summed, cost YOLO's 2x upsample four gather kernels) */
static pc_value *nearest_axis(ox_ctx *c, pc_value *x, int axis, int64_t out, const int64_t *sel, const int64_t *shape) {
  int64_t in = x->type.dims[axis], s = out / in;
  int r = x->type.rank, repeat = out % in == 0 && r < PC_MAX_RANK;
  for (int64_t i = 0; repeat && i < out; i++) repeat = sel[i] == i / s;
  if (repeat) {
    int64_t wide[PC_MAX_RANK], map[PC_MAX_RANK];
    for (int d = 0, k = 0; d <= r; d++) {
      if (d == axis + 1) {
        wide[d] = s;
        continue;
      }
      wide[d] = x->type.dims[k], map[k] = d, k++;
    }
    return pc_reshape(G, pc_broadcast_in_dim(G, x, r + 1, wide, map), r, shape);
  }
  return gather_along(c, x, axis, out, sel, shape);
}

/* resizes dim `axis` of x to `out`: a gather per tap with constant indices, weighted by constant weights */
static pc_value *resize_axis(ox_ctx *c, pc_value *x, int axis, int64_t out, double scale, const rs_opts *o,
                             double rlo, double rhi) {
  int64_t in = x->type.dims[axis], shape[PC_MAX_RANK];
  int r = x->type.rank, n = 0, any_out = 0;
  memcpy(shape, x->type.dims, sizeof shape);
  shape[axis] = out;
  int64_t *idx = calloc((size_t)(out * RS_MAX_TAPS + 1), sizeof *idx);
  double *w = calloc((size_t)(out * RS_MAX_TAPS + 1), sizeof *w), *mask = calloc((size_t)out + 1, sizeof *mask);
  pc_value *y = NULL;
  if (!idx || !w || !mask) goto done;
  for (int64_t i = 0; i < out; i++) {
    double xo, cw[RS_MAX_TAPS];
    int outside;
    if (!rs_origin(c, o, i, scale, in, out, rlo, rhi, &xo, &outside)) goto done;
    double fl = floor(xo), ratio = xo == fl ? 1 : xo - fl;
    int64_t base = xo == fl ? (int64_t)fl - 1 : (int64_t)fl;
    if (o->antialias && scale < 1 && 4 / scale + 2 > RS_MAX_TAPS) {
      ox_fail(c, PC_ERR_UNSUPPORTED, "antialiased downscale by %g needs too many taps", scale);
      goto done;
    }
    n = rs_coeffs(o, ratio, scale, cw);
    double sum = 0;
    for (int j = 0; j < n; j++) {
      int64_t p = base - n / 2 + 1 + j;
      if (o->exclude && (p < 0 || p >= in)) cw[j] = 0;
      sum += cw[j];
      idx[j * out + i] = p < 0 ? 0 : p >= in ? in - 1 : p;
    }
    for (int j = 0; j < n; j++) w[j * out + i] = o->exclude && sum != 0 ? cw[j] / sum : cw[j];
    mask[i] = outside;
    any_out |= outside;
  }
  if (o->mode == RS_NEAREST) { /* tap 0 or tap 1, whichever has the weight */
    for (int64_t i = 0; i < out; i++) idx[i] = w[i] != 0 ? idx[i] : idx[out + i];
    y = nearest_axis(c, x, axis, out, idx, shape);
    n = 0;
  }
  for (int j = 0; j < n; j++) {
    int used = 0, unit = 1;
    for (int64_t i = 0; i < out; i++) used |= w[j * out + i] != 0, unit &= w[j * out + i] == 1;
    if (!used) continue;
    pc_value *t = gather_along(c, x, axis, out, idx + j * out, shape);
    if (!unit) t = pc_mul(G, t, along(c, const_of(c, x->type.dtype, 1, &out, w + j * out), r, shape, axis));
    y = y ? pc_add(G, y, t) : t;
  }
  if (y && any_out) {
    pc_value *m = pc_convert(G, const_of(c, PC_f32, 1, &out, mask), PC_bool);
    y = pc_where(G, along(c, m, r, shape, axis), ox_like(c, o->extrap, y), y);
  }
done:
  if (!y && c->g->status == PC_OK) ox_fail(c, PC_ERR_NOMEM, "out of memory");
  free(idx);
  free(w);
  free(mask);
  return y;
}

static int rs_mode_of(ox_ctx *c, const char *m, rs_mode *out) {
  if (!strcmp(m, "nearest")) *out = RS_NEAREST;
  else if (!strcmp(m, "linear") || !strcmp(m, "bilinear")) *out = RS_LINEAR;
  else if (!strcmp(m, "cubic")) *out = RS_CUBIC;
  else return ox_fail(c, PC_ERR_ATTR, "mode '%s' is not nearest, linear or cubic", m), 0;
  return 1;
}

/* output sizes and scales of every dim from scales or sizes over `axes` */
typedef struct rs_plan {
  int64_t out[PC_MAX_RANK];
  double scale[PC_MAX_RANK], roi[2 * PC_MAX_RANK];
} rs_plan;

static int rs_sizes(ox_ctx *c, const pc_value *x, const int64_t *axes, int na, const double *scales, int nsc,
                    const int64_t *sizes, int nsz, rs_plan *p) {
  int r = x->type.rank;
  for (int i = 0; i < r; i++) p->out[i] = x->type.dims[i], p->scale[i] = 1;
  if (nsc > 0) {
    if (nsc != na) return ox_fail(c, PC_ERR_SHAPE, "scales has %d entries for %d axes", nsc, na), 0;
    for (int i = 0; i < na; i++) {
      if (!(scales[i] > 0)) return ox_fail(c, PC_ERR_ATTR, "scale %g must be positive", scales[i]), 0;
      double o = floor(scales[i] * (double)x->type.dims[axes[i]]);
      if (!(o <= (double)OX_MAX_NUMEL)) return ox_fail(c, PC_ERR_RANGE, "scale %g makes dim %lld absurd", scales[i], (long long)axes[i]), 0;
      p->scale[axes[i]] = scales[i];
      p->out[axes[i]] = (int64_t)o;
    }
    return 1;
  }
  if (nsz != na) return ox_fail(c, PC_ERR_SHAPE, "sizes has %d entries for %d axes (or give scales)", nsz, na), 0;
  const char *pol = ox_attr_str(c, "keep_aspect_ratio_policy", "stretch");
  double pick = 0;
  for (int i = 0; i < na; i++) {
    double s = (double)sizes[i] / (double)x->type.dims[axes[i]];
    if (sizes[i] < 1) return ox_fail(c, PC_ERR_ATTR, "size %lld must be positive", (long long)sizes[i]), 0;
    p->scale[axes[i]] = s, p->out[axes[i]] = sizes[i];
    pick = i == 0 ? s : !strcmp(pol, "not_larger") ? fmin(pick, s) : fmax(pick, s);
  }
  if (!strcmp(pol, "stretch")) return 1;
  if (strcmp(pol, "not_larger") && strcmp(pol, "not_smaller"))
    return ox_fail(c, PC_ERR_ATTR, "keep_aspect_ratio_policy '%s' is not supported", pol), 0;
  for (int i = 0; i < na; i++) {
    double o = pick * (double)x->type.dims[axes[i]] + 0.5;
    if (!(o <= (double)OX_MAX_NUMEL)) return ox_fail(c, PC_ERR_RANGE, "sizes make dim %lld absurd", (long long)axes[i]), 0;
    p->scale[axes[i]] = pick, p->out[axes[i]] = (int64_t)o;
  }
  return 1;
}

static pc_status resize_run(ox_ctx *c, pc_value *x, const rs_opts *o, const rs_plan *p) {
  int r = x->type.rank;
  int64_t numel = 1; /* before any per-axis table of out entries is allocated */
  for (int i = 0; i < r; i++)
    if (p->out[i] > 0 && (__builtin_mul_overflow(numel, p->out[i], &numel) || numel > OX_MAX_NUMEL))
      return ox_fail(c, PC_ERR_RANGE, "the result would have more than %lld elements", (long long)OX_MAX_NUMEL);
  for (int i = 0; i < r && x; i++) {
    double rlo = p->roi[i], rhi = p->roi[r + i];
    int identity = fabs(p->scale[i] - 1) < 1e-9 && p->out[i] == x->type.dims[i] &&
                   (strcmp(o->ctm, "tf_crop_and_resize") || (rlo == 0 && rhi == 1));
    if (identity) continue;
    if (p->out[i] < 1) return ox_fail(c, PC_ERR_SHAPE, "dim %d resizes to %lld", i, (long long)p->out[i]);
    x = resize_axis(c, x, i, p->out[i], p->scale[i], o, rlo, rhi);
  }
  return ox_out(c, 0, x);
}

static int rs_check_input(ox_ctx *c, const pc_value *x, const rs_opts *o) {
  if (!check_static(c, x)) return 0;
  if (o->mode != RS_NEAREST && !ox_require_float(c, x)) return 0;
  return 1;
}

pc_status ox_op_Resize(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0);
  rs_opts o = {RS_NEAREST, "half_pixel", "round_prefer_floor", -0.75, 0, 0, 0};
  if (!x || !rs_mode_of(c, ox_attr_str(c, "mode", "nearest"), &o.mode)) return ox_status(c);
  o.ctm = ox_attr_str(c, "coordinate_transformation_mode", c->opset < 11 ? "asymmetric" : "half_pixel");
  o.nearest = ox_attr_str(c, "nearest_mode", c->opset < 11 ? "floor" : "round_prefer_floor");
  o.a = ox_attr_float(c, "cubic_coeff_a", -0.75);
  o.extrap = ox_attr_float(c, "extrapolation_value", 0);
  o.exclude = ox_attr_flag(c, "exclude_outside", 0);
  o.antialias = ox_attr_flag(c, "antialias", 0);
  if (!rs_check_input(c, x, &o)) return ox_status(c);
  int r = x->type.rank, si = c->opset < 11 ? 1 : 2;
  int64_t axes[PC_MAX_RANK] = {0}, sizes[PC_MAX_RANK] = {0};
  double scales[PC_MAX_RANK], roi[2 * PC_MAX_RANK];
  int na = ox_attr_ints(c, "axes", axes, PC_MAX_RANK);
  if (na == -2) return ox_status(c);
  if (na == -1) {
    na = r;
    for (int i = 0; i < r; i++) axes[i] = i;
  } else if (!ox_axes(c, axes, na, r)) {
    return ox_status(c);
  }
  int nsc = ox_has_in(c, si) ? ox_const_floats(c, si, scales, PC_MAX_RANK) : -1;
  int nsz = c->opset >= 11 && ox_has_in(c, 3) ? ox_const_ints(c, 3, sizes, PC_MAX_RANK) : -1;
  int nroi = c->opset >= 11 && ox_has_in(c, 1) && !strcmp(o.ctm, "tf_crop_and_resize")
                 ? ox_const_floats(c, 1, roi, 2 * PC_MAX_RANK)
                 : -1;
  if (nsc == -2 || nsz == -2 || nroi == -2) return ox_status(c);
  rs_plan p;
  if (!rs_sizes(c, x, axes, na, scales, nsc, sizes, nsz, &p)) return ox_status(c);
  for (int i = 0; i < r; i++) p.roi[i] = 0, p.roi[r + i] = 1;
  if (nroi > 0 && nroi != 2 * na) return ox_fail(c, PC_ERR_SHAPE, "roi has %d entries for %d axes", nroi, na);
  for (int i = 0; nroi > 0 && i < na; i++) p.roi[axes[i]] = roi[i], p.roi[r + axes[i]] = roi[na + i];
  return resize_run(c, x, &o, &p);
}

pc_status ox_op_Upsample(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0);
  rs_opts o = {RS_NEAREST, "asymmetric", "floor", -0.75, 0, 0, 0};
  if (!x || !rs_mode_of(c, ox_attr_str(c, "mode", "nearest"), &o.mode) || !rs_check_input(c, x, &o)) return ox_status(c);
  int r = x->type.rank;
  double scales[PC_MAX_RANK] = {0};
  int64_t axes[PC_MAX_RANK] = {0};
  int nsc = c->opset >= 9 ? ox_const_floats(c, 1, scales, PC_MAX_RANK) : ox_attr_floats(c, "scales", scales, PC_MAX_RANK);
  if (nsc == -2) return ox_status(c);
  for (int i = 0; i < r; i++) axes[i] = i;
  rs_plan p;
  if (!rs_sizes(c, x, axes, r, scales, nsc < 0 ? 0 : nsc, NULL, 0, &p)) return ox_status(c);
  for (int i = 0; i < r; i++) p.roi[i] = 0, p.roi[r + i] = 1;
  return resize_run(c, x, &o, &p);
}

/* ---------------------------------------------------------------- DFT, STFT */

static pc_value *bitcast(ox_ctx *c, pc_value *x, pc_dtype dt) {
  pc_attr a = pc_a_dtype("dtype", dt);
  return x ? pc_build(G, PC_OP_bitcast, &x, 1, &a, 1) : NULL;
}

static pc_value *fft_prim(ox_ctx *c, pc_value *x, const char *type, int64_t n) {
  pc_attr a[2] = {pc_a_str("type", type), pc_a_int("length", n)};
  return x ? pc_build(G, PC_OP_fft, &x, 1, a, 2) : NULL;
}

static pc_value *drop_last(ox_ctx *c, pc_value *x) { return x ? pc_reshape(G, x, x->type.rank - 1, x->type.dims) : NULL; }

/* DFT over dim r-2 of t, f32 [..., L, 1|2] (ONNX complex layout), length n -> f32 [..., m, 1|2] */
static pc_value *dft_core(ox_ctx *c, pc_value *t, int64_t n, int inverse, int onesided) {
  if (!t) return NULL;
  int r = t->type.rank;
  int cplx = t->type.dims[r - 1] == 2;
  if (n < 1) return ox_fail(c, PC_ERR_ATTR, "dft_length %lld must be >= 1", (long long)n), NULL;
  if (inverse && onesided) { /* half spectrum in, real signal out */
    if (!cplx) return ox_fail(c, PC_ERR_SHAPE, "an inverse one-sided DFT needs complex input"), NULL;
    pc_value *y = fft_prim(c, bitcast(c, t, PC_c64), "irfft", n);
    int64_t dims[PC_MAX_RANK];
    if (!y) return NULL;
    memcpy(dims, y->type.dims, sizeof dims);
    dims[r - 1] = 1;
    return pc_reshape(G, y, r, dims);
  }
  pc_value *z;
  if (!cplx && onesided && !inverse) {
    z = fft_prim(c, drop_last(c, t), "rfft", n);
  } else {
    if (!cplx) {
      pc_value *parts[2] = {t, ox_like(c, 0, t)};
      t = pc_concatenate(G, parts, 2, r - 1);
    }
    z = fft_prim(c, bitcast(c, t, PC_c64), inverse ? "ifft" : "fft", n);
    if (z && onesided) {
      int64_t st[PC_MAX_RANK] = {0}, lim[PC_MAX_RANK], one[PC_MAX_RANK];
      for (int i = 0; i < r - 1; i++) lim[i] = z->type.dims[i], one[i] = 1;
      lim[r - 2] = n / 2 + 1;
      z = pc_slice(G, z, st, lim, one);
    }
  }
  return bitcast(c, z, PC_f32);
}

/* permutation moving dim ax of a rank-r tensor to r-2 (keeping the complex dim last), and its inverse */
static void dft_perm(int r, int ax, int64_t *perm, int64_t *inv) {
  int k = 0;
  for (int i = 0; i < r - 1; i++)
    if (i != ax) perm[k++] = i;
  perm[k++] = ax, perm[k] = r - 1;
  for (int i = 0; i < r; i++) inv[perm[i]] = i;
}

pc_status ox_op_DFT(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0);
  if (!check_rank(c, x, 2, PC_MAX_RANK) || !check_static(c, x) || !ox_require_float(c, x)) return ox_status(c);
  int r = x->type.rank;
  int64_t comp = x->type.dims[r - 1], axis = c->opset < 20 ? ox_attr_int(c, "axis", 1) : -2, n = 0;
  if (comp != 1 && comp != 2) return ox_fail(c, PC_ERR_SHAPE, "the last dim must be 1 (real) or 2 (complex), not %lld", (long long)comp);
  if (c->opset >= 20 && ox_has_in(c, 2) && ox_const_ints(c, 2, &axis, 1) == -2) return ox_status(c);
  int ax = (int)(axis < 0 ? axis + r : axis);
  if (ax < 0 || ax >= r - 1) return ox_fail(c, PC_ERR_ATTR, "axis %lld is not a signal dim of rank %d", (long long)axis, r);
  int inverse = ox_attr_flag(c, "inverse", 0), onesided = ox_attr_flag(c, "onesided", 0);
  int nl = ox_has_in(c, 1) ? ox_const_ints(c, 1, &n, 1) : -1;
  if (nl == -2) return ox_status(c);
  if (nl != 1) n = inverse && onesided ? 2 * (x->type.dims[ax] - 1) : x->type.dims[ax];
  int64_t perm[PC_MAX_RANK], inv[PC_MAX_RANK];
  dft_perm(r, ax, perm, inv);
  pc_value *t = pc_transpose(G, pc_convert(G, x, PC_f32), perm);
  pc_value *y = pc_transpose(G, dft_core(c, t, n, inverse, onesided), inv);
  return ox_out(c, 0, pc_convert(G, y, x->type.dtype));
}

pc_status ox_op_STFT(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0), *win = ox_in(c, 2);
  if (!check_rank(c, x, 3, 3) || !check_static(c, x) || !ox_require_float(c, x)) return ox_status(c);
  int64_t B = x->type.dims[0], L = x->type.dims[1], comp = x->type.dims[2], step = 0, fl = 0;
  if (comp != 1 && comp != 2) return ox_fail(c, PC_ERR_SHAPE, "the last dim must be 1 (real) or 2 (complex)");
  if (ox_const_ints(c, 1, &step, 1) != 1) return ox_status(c) ? ox_status(c) : ox_fail(c, PC_ERR_ATTR, "frame_step is required");
  int nf = ox_has_in(c, 3) ? ox_const_ints(c, 3, &fl, 1) : -1;
  if (nf == -2) return ox_status(c);
  if (nf != 1) fl = win && win->type.rank == 1 ? win->type.dims[0] : 0;
  if (step < 1 || fl < 1 || fl > L) return ox_fail(c, PC_ERR_ATTR, "frame_step %lld, frame_length %lld do not fit a signal of %lld", (long long)step, (long long)fl, (long long)L);
  if (win && (win->type.rank != 1 || win->type.dims[0] != fl)) return ox_fail(c, PC_ERR_SHAPE, "window must have shape [%lld]", (long long)fl);
  int64_t F = (L - fl) / step + 1, n = F * fl;
  int64_t *idx = malloc(sizeof *idx * (size_t)n);
  if (!idx) return ox_fail(c, PC_ERR_NOMEM, "out of memory");
  for (int64_t f = 0; f < F; f++)
    for (int64_t l = 0; l < fl; l++) idx[f * fl + l] = f * step + l;
  /* every frame at once: one gather with a constant index, then [B, F, fl, comp] */
  int64_t gshape[3] = {B, n, comp}, fshape[4] = {B, F, fl, comp};
  pc_value *ix = along(c, pc_const(G, pc_type_make(PC_i64, 1, &n), idx), 3, gshape, 1);
  free(idx);
  pc_attr a = pc_a_int("axis", 1);
  pc_value *xf = pc_convert(G, x, PC_f32), *gin[2] = {xf, ix};
  pc_value *frames = xf && ix ? pc_reshape(G, pc_build(G, PC_OP_gather, gin, 2, &a, 1), 4, fshape) : NULL;
  if (win && frames) frames = pc_mul(G, frames, along(c, pc_convert(G, win, PC_f32), 4, fshape, 2));
  int onesided = ox_attr_flag(c, "onesided", 1);
  return ox_out(c, 0, pc_convert(G, dft_core(c, frames, fl, 0, onesided), x->type.dtype));
}

/* ---------------------------------------------------------------- CausalConvWithState */

/* a depthwise causal conv1d over [past_state (zeros when absent), input]: output, and the last k-1
 * positions of that concatenation as the present state */
pc_status ox_op_CausalConvWithState(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0), *w = ox_in_req(c, 1), *b = ox_in(c, 2), *past = ox_in(c, 3);
  if (!x || !w || !check_static(c, x) || !check_static(c, w)) return ox_status(c);
  if (x->type.rank != 3 || w->type.rank != 3 || w->type.dims[0] != x->type.dims[1] || w->type.dims[1] != 1)
    return ox_fail(c, PC_ERR_SHAPE, "needs input [batch, channels, length] and weight [channels, 1, k]");
  if (w->type.dtype != x->type.dtype) return ox_fail(c, PC_ERR_TYPE, "input and weight dtypes differ");
  const char *act = ox_attr_str(c, "activation", "none");
  int silu = strcmp(act, "silu") == 0 || strcmp(act, "swish") == 0;
  if (!silu && strcmp(act, "none") != 0) return ox_fail(c, PC_ERR_ATTR, "activation '%s' is not supported", act);
  int64_t B = x->type.dims[0], C = x->type.dims[1], L = x->type.dims[2], k = w->type.dims[2];
  int64_t sd[3] = {B, C, k - 1};
  if (!past) past = pc_full(G, x->type.dtype, 0, 3, sd);
  if (past && (past->type.rank != 3 || past->type.dims[2] != k - 1))
    return ox_fail(c, PC_ERR_SHAPE, "past_state must be [batch, channels, k - 1]");
  pc_value *parts[2] = {past, x};
  pc_value *padded = k > 1 ? pc_concatenate(G, parts, 2, 2) : x;
  int64_t one[1] = {1}, zero[1] = {0};
  pc_value *y = add_bias(c, pc_conv(G, padded, w, 1, one, zero, zero, one, one, C), b);
  if (silu && y) y = pc_mul(G, y, pc_sigmoid(G, y));
  ox_out(c, 0, y);
  if (!ox_has_out(c, 1) || !padded) return ox_status(c);
  int64_t start[3] = {0, 0, L}, limit[3] = {B, C, L + k - 1}, stride[3] = {1, 1, 1};
  return ox_out(c, 1, pc_slice(G, padded, start, limit, stride));
}

/* ---------------------------------------------------------------- Col2Im */

/* Col2Im: each kernel offset's column block, spread over the image by a pad with interior
 * (stride - 1) and offset (k * dilation - pad), summed over the offsets */
pc_status ox_op_Col2Im(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0);
  int64_t img[NS_MAX], blk[NS_MAX], dil[NS_MAX], str[NS_MAX], pads[2 * NS_MAX];
  int ns = ox_const_ints(c, 1, img, NS_MAX), nb = ox_const_ints(c, 2, blk, NS_MAX);
  if (!x || ns < 0 || nb < 0 || !check_static(c, x)) return ox_status(c);
  if (ns != nb || ns < 1 || x->type.rank != 3 || ns + 2 > PC_MAX_RANK)
    return ox_fail(c, PC_ERR_SHAPE, "needs input [N, C*prod(block), L] and image / block shapes of one length");
  if (!ox_attr_ints_n(c, "dilations", dil, ns, ns, 1) || !ox_attr_ints_n(c, "strides", str, ns, ns, 1) || !ox_attr_ints_n(c, "pads", pads, 2 * ns, 2 * ns, 0))
    return ox_status(c);
  int64_t K = 1, L = 1, N = x->type.dims[0], out_n[NS_MAX];
  for (int i = 0; i < ns; i++) {
    K *= blk[i];
    out_n[i] = (img[i] + pads[i] + pads[ns + i] - (dil[i] * (blk[i] - 1) + 1)) / str[i] + 1;
    L *= out_n[i];
    if (blk[i] < 1 || str[i] < 1 || dil[i] < 1 || out_n[i] < 1) return ox_fail(c, PC_ERR_ATTR, "bad block, strides or dilations");
  }
  if (x->type.dims[1] % K || x->type.dims[2] != L)
    return ox_fail(c, PC_ERR_SHAPE, "input [%lld, %lld, %lld] does not fit the blocks", (long long)N,
                   (long long)x->type.dims[1], (long long)x->type.dims[2]);
  int64_t C = x->type.dims[1] / K, d4[4] = {N, C, K, L}, blk_shape[PC_MAX_RANK] = {N, C};
  for (int i = 0; i < ns; i++) blk_shape[2 + i] = out_n[i];
  pc_value *x4 = pc_reshape(G, x, 4, d4), *sum = NULL;
  for (int64_t k = 0; k < K && ox_status(c) == PC_OK; k++) {
    int64_t start[4] = {0, 0, k, 0}, limit[4] = {N, C, k + 1, L}, one[4] = {1, 1, 1, 1};
    pc_value *b = pc_reshape(G, pc_slice(G, x4, start, limit, one), ns + 2, blk_shape);
    int64_t lo[PC_MAX_RANK] = {0}, hi[PC_MAX_RANK] = {0}, in[PC_MAX_RANK] = {0}, rem = k;
    for (int i = ns - 1; i >= 0; i--) { /* offset k's position in the block, last dim fastest */
      int64_t ki = rem % blk[i];
      rem /= blk[i];
      lo[2 + i] = ki * dil[i] - pads[i];
      in[2 + i] = str[i] - 1;
      hi[2 + i] = img[i] - (lo[2 + i] + (out_n[i] - 1) * str[i] + 1);
    }
    pc_attr a[4] = {pc_a_ints("low", lo, ns + 2), pc_a_ints("high", hi, ns + 2), pc_a_ints("interior", in, ns + 2),
                    pc_a_float("value", 0)};
    pc_value *p = b ? pc_build(G, PC_OP_pad, &b, 1, a, 4) : NULL;
    sum = sum ? pc_add(G, sum, p) : p;
  }
  return ox_out(c, 0, sum);
}

/* ---------------------------------------------------------------- MaxUnpool */

/* MaxUnpool: zeros of the unpooled shape with X scattered to the flat positions I (MaxPool's Indices) */
pc_status ox_op_MaxUnpool(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0), *idx = ox_in_req(c, 1);
  if (!x || !idx || !check_static(c, x) || !check_rank(c, x, 3, PC_MAX_RANK)) return ox_status(c);
  if (idx->type.dtype != PC_i64 || idx->type.rank != x->type.rank || pc_type_numel(&idx->type) != pc_type_numel(&x->type))
    return ox_fail(c, PC_ERR_SHAPE, "indices must be int64 of the input's shape");
  int r = x->type.rank, ns = r - 2;
  int64_t out[PC_MAX_RANK], k[NS_MAX], st[NS_MAX], pads[2 * NS_MAX];
  int n_out = ox_const_ints(c, 2, out, PC_MAX_RANK);
  if (n_out == -2) return ox_status(c);
  if (n_out >= 0 && n_out != r) return ox_fail(c, PC_ERR_SHAPE, "output_shape has %d entries for rank %d", n_out, r);
  if (ox_attr_ints(c, "kernel_shape", k, NS_MAX) != ns || !ox_attr_ints_n(c, "strides", st, ns, ns, 1) ||
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
