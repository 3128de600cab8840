/* frontend/aten.c: decomposes the aten:: ops of text graphs (frontend/aten_ops.def) into prims. */
#include "frontend/composite.h"
#include "frontend/frontend.h"

#include <math.h>
#include <stdarg.h>
#include <string.h>

/* The state of one aten op while it is decomposed: operands, keyword attributes, results. */
typedef struct at_ctx {
  pc_graph *g;
  const char *op; /* "aten::linear" */
  pc_value *const *in;
  int n_in;
  const pc_attr *attrs;
  int n_attrs;
  pc_value **out;
} at_ctx;

typedef pc_status (*at_fn)(at_ctx *c);

#define ATEN_OP(name, min_in, max_in, n_out, fn) static pc_status fn(at_ctx *c);
#include "frontend/aten_ops.def"
#undef ATEN_OP

typedef struct at_row {
  const char *name;
  int min_in, max_in, n_out;
  at_fn fn;
} at_row;

static const at_row at_rows[] = {
#define ATEN_OP(name, min_in, max_in, n_out, fn) {#name, min_in, max_in, n_out, fn},
#include "frontend/aten_ops.def"
#undef ATEN_OP
};

/* ---------------------------------------------------------------- helpers */

static pc_status at_fail(at_ctx *c, pc_status code, const char *fmt, ...) {
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return pc_fail(c->g, code, "%s: %s", c->op, msg);
}

static pc_status at_set(at_ctx *c, pc_value *v) {
  c->out[0] = v;
  if (!v && c->g->status == PC_OK) return at_fail(c, PC_ERR_INTERNAL, "no result");
  return c->g->status;
}

static const pc_attr *at_attr(const at_ctx *c, const char *name) {
  for (int i = 0; i < c->n_attrs; i++)
    if (!strcmp(c->attrs[i].name, name)) return &c->attrs[i];
  return NULL;
}

static int64_t at_int(at_ctx *c, const char *name, int64_t dflt) {
  const pc_attr *a = at_attr(c, name);
  if (!a) return dflt;
  if (a->kind == PC_ATTR_INT) return a->i;
  at_fail(c, PC_ERR_ATTR, "attribute %s must be an integer", name);
  return dflt;
}

static double at_float(at_ctx *c, const char *name, double dflt) {
  const pc_attr *a = at_attr(c, name);
  if (!a) return dflt;
  if (a->kind == PC_ATTR_FLOAT) return a->f;
  if (a->kind == PC_ATTR_INT) return (double)a->i;
  at_fail(c, PC_ERR_ATTR, "attribute %s must be a number", name);
  return dflt;
}

static const char *at_str(at_ctx *c, const char *name, const char *dflt) {
  const pc_attr *a = at_attr(c, name);
  if (!a) return dflt;
  if (a->kind == PC_ATTR_STRING) return a->s;
  at_fail(c, PC_ERR_ATTR, "attribute %s must be a string", name);
  return dflt;
}

/* an int list attribute (an int counts as a list of one); count, -1 when absent, -2 on error */
static int at_ints(at_ctx *c, const char *name, int64_t *out, int max) {
  const pc_attr *a = at_attr(c, name);
  if (!a) return -1;
  if (a->kind == PC_ATTR_INT) return out[0] = a->i, 1;
  if (a->kind != PC_ATTR_INTS) return at_fail(c, PC_ERR_ATTR, "attribute %s must be integers", name), -2;
  if (a->n > max) return at_fail(c, PC_ERR_ATTR, "attribute %s has %d values, at most %d", name, a->n, max), -2;
  memcpy(out, a->ints, sizeof *out * (size_t)a->n);
  return a->n;
}

/* exactly n ints; one value stands for all n (PyTorch's stride=2), absent means dflt */
static int at_ints_n(at_ctx *c, const char *name, int n, int64_t dflt, int64_t *out) {
  int k = at_ints(c, name, out, n);
  if (k == -2) return 0;
  if (k == -1 || k == 1) {
    int64_t v = k == 1 ? out[0] : dflt;
    for (int i = 0; i < n; i++) out[i] = v;
    return 1;
  }
  if (k != n) return at_fail(c, PC_ERR_ATTR, "attribute %s needs %d values, got %d", name, n, k), 0;
  return 1;
}

/* normalizes a possibly negative axis; -1 (and the graph failed) when out of range */
static int at_axis(at_ctx *c, int64_t axis, int rank) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= (rank ? rank : 1)) {
    at_fail(c, PC_ERR_ATTR, "dim %lld is out of range for rank %d", (long long)axis, rank);
    return -1;
  }
  return (int)a;
}

static int require_float(at_ctx *c, const pc_value *x) {
  if (pc_dtype_is_float(x->type.dtype)) return 1;
  at_fail(c, PC_ERR_TYPE, "needs a float tensor, got %s", pc_dtype_name(x->type.dtype));
  return 0;
}

static int require_static(at_ctx *c, const pc_value *x, const char *why) {
  if (pc_type_is_static(&x->type)) return 1;
  at_fail(c, PC_ERR_UNSUPPORTED, "%s needs static dims", why);
  return 0;
}

static pc_value *like(at_ctx *c, double v, const pc_value *x) { return pc_full_like(c->g, v, x); }

/* reduction keeping reduced axes as size 1 when keep */
static pc_value *reduce_keep(at_ctx *c, pc_op op, pc_value *x, int n_axes, const int64_t *axes, int keep) {
  pc_value *y = pc_reduce(c->g, op, x, n_axes, axes);
  if (!y || !keep) return y;
  int64_t shape[PC_MAX_RANK], dims[PC_MAX_RANK];
  int k = 0;
  for (int i = 0, j = 0; i < x->type.rank; i++) {
    if (j < n_axes && axes[j] == i) {
      shape[i] = 1;
      j++;
    } else {
      shape[i] = x->type.dims[i];
      dims[k++] = i;
    }
  }
  return pc_broadcast_in_dim(c->g, y, x->type.rank, shape, dims);
}

/* sorts and normalizes axes in place; 0 on failure (out of range or repeated) */
static int norm_axes(at_ctx *c, int64_t *axes, int n, int rank) {
  for (int i = 0; i < n; i++)
    if ((axes[i] = at_axis(c, axes[i], rank)) < 0) return 0;
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && axes[j - 1] > axes[j]; j--) {
      int64_t t = axes[j];
      axes[j] = axes[j - 1];
      axes[j - 1] = t;
    }
  for (int i = 1; i < n; i++)
    if (axes[i] == axes[i - 1]) return at_fail(c, PC_ERR_ATTR, "dim %lld repeated", (long long)axes[i]), 0;
  return 1;
}

/* product of x's dims over axes; -1 when one is symbolic */
static int64_t count_over(const pc_value *x, int n, const int64_t *axes) {
  int64_t p = 1;
  for (int i = 0; i < n; i++) {
    int64_t d = x->type.dims[axes[i]];
    if (PC_DIM_IS_SYM(d)) return -1;
    p *= d;
  }
  return p;
}

/* ---------------------------------------------------------------- elementwise */

#define AT_UNARY(fn, prim, float_only)                        \
  static pc_status fn(at_ctx *c) {                            \
    if ((float_only) && !require_float(c, c->in[0])) return c->g->status; \
    return at_set(c, pc_##prim(c->g, c->in[0]));              \
  }
AT_UNARY(at_sigmoid, sigmoid, 1)
AT_UNARY(at_tanh, tanh, 1)
AT_UNARY(at_exp, exp, 1)
AT_UNARY(at_log, log, 1)
AT_UNARY(at_sqrt, sqrt, 1)
AT_UNARY(at_rsqrt, rsqrt, 1)
AT_UNARY(at_erf, erf, 1)
AT_UNARY(at_neg, neg, 0)
AT_UNARY(at_abs, abs, 0)
#undef AT_UNARY

static pc_status at_identity(at_ctx *c) { return at_set(c, c->in[0]); }

static pc_status at_relu(at_ctx *c) { return at_set(c, pc_max(c->g, c->in[0], like(c, 0, c->in[0]))); }

static pc_status at_silu(at_ctx *c) {
  pc_value *x = c->in[0];
  if (!require_float(c, x)) return c->g->status;
  return at_set(c, pc_mul(c->g, x, pc_sigmoid(c->g, x)));
}

static pc_status at_gelu(at_ctx *c) {
  pc_graph *g = c->g;
  pc_value *x = c->in[0];
  const char *approx = at_str(c, "approximate", "none");
  if (!require_float(c, x)) return g->status;
  if (strcmp(approx, "none") && strcmp(approx, "tanh"))
    return at_fail(c, PC_ERR_ATTR, "approximate=\"%s\" is not \"none\" or \"tanh\"", approx);
  return at_set(c, fc_gelu(g, x, !strcmp(approx, "tanh")));
}

static int dtype_rank(pc_dtype t) { return pc_dtype_is_float(t) ? 100 + (int)pc_dtype_size(t) : (int)pc_dtype_size(t); }

/* PyTorch-like promotion for two operands: a float beats an int, a rank-0 operand takes the other's
 * dtype, otherwise the wider type wins */
static int promote(at_ctx *c, pc_value **a, pc_value **b) {
  pc_dtype ta = (*a)->type.dtype, tb = (*b)->type.dtype;
  if (ta == tb) return 1;
  int fa = pc_dtype_is_float(ta), fb = pc_dtype_is_float(tb);
  pc_dtype to;
  if (fa != fb) to = fa ? ta : tb;
  else if ((*a)->type.rank == 0 && (*b)->type.rank) to = tb;
  else if ((*b)->type.rank == 0 && (*a)->type.rank) to = ta;
  else to = dtype_rank(ta) >= dtype_rank(tb) ? ta : tb;
  *a = pc_convert(c->g, *a, to);
  *b = pc_convert(c->g, *b, to);
  return *a && *b;
}

/* add/sub/mul/div: tensor-tensor with numpy broadcasting, or tensor with other=<number> */
static pc_status binary(at_ctx *c, pc_op op) {
  pc_graph *g = c->g;
  pc_value *a = c->in[0], *b = c->n_in > 1 ? c->in[1] : NULL;
  if (!b) {
    if (!at_attr(c, "other")) return at_fail(c, PC_ERR_ATTR, "needs a second operand or other=");
    const pc_attr *o = at_attr(c, "other");
    pc_dtype dt = o->kind == PC_ATTR_FLOAT && !pc_dtype_is_float(a->type.dtype) ? PC_f32 : a->type.dtype;
    b = pc_scalar(g, dt, at_float(c, "other", 0));
  }
  double alpha = at_float(c, "alpha", 1.0);
  if (alpha != 1.0 && b) b = pc_mul(g, b, like(c, alpha, b));
  if (!b || !promote(c, &a, &b)) return g->status;
  if (op == PC_OP_div && !pc_dtype_is_float(a->type.dtype)) { /* true division, as in PyTorch */
    a = pc_convert(g, a, PC_f32);
    b = pc_convert(g, b, PC_f32);
  }
  if (!pc_broadcast_pair(g, &a, &b)) return g->status ? g->status : at_fail(c, PC_ERR_SHAPE, "cannot broadcast");
  pc_value *in[2] = {a, b};
  return at_set(c, pc_build(g, op, in, 2, NULL, 0));
}

static pc_status at_add(at_ctx *c) { return binary(c, PC_OP_add); }
static pc_status at_sub(at_ctx *c) { return binary(c, PC_OP_sub); }
static pc_status at_mul(at_ctx *c) { return binary(c, PC_OP_mul); }
static pc_status at_div(at_ctx *c) { return binary(c, PC_OP_div); }

/* ---------------------------------------------------------------- softmax, normalization */

static pc_status softmax(at_ctx *c, int log) {
  pc_graph *g = c->g;
  pc_value *x = c->in[0];
  if (!require_float(c, x)) return g->status;
  int64_t ax = at_axis(c, at_int(c, "dim", -1), x->type.rank);
  if (ax < 0 || x->type.rank == 0) return g->status ? g->status : at_fail(c, PC_ERR_SHAPE, "needs rank >= 1");
  return at_set(c, fc_softmax(g, x, ax, log));
}

static pc_status at_softmax(at_ctx *c) { return softmax(c, 0); }
static pc_status at_log_softmax(at_ctx *c) { return softmax(c, 1); }

static pc_status at_layer_norm(at_ctx *c) {
  pc_graph *g = c->g;
  pc_value *x = c->in[0], *w = c->n_in > 1 ? c->in[1] : NULL, *b = c->n_in > 2 ? c->in[2] : NULL;
  int64_t ns[PC_MAX_RANK];
  int k = at_ints(c, "normalized_shape", ns, PC_MAX_RANK);
  if (k == -2 || !require_float(c, x)) return g->status;
  if (k == -1 && !w) return at_fail(c, PC_ERR_ATTR, "needs normalized_shape= or a weight");
  if (k == -1) {
    k = w->type.rank;
    memcpy(ns, w->type.dims, sizeof *ns * (size_t)k);
  }
  int r = x->type.rank;
  if (k < 1 || k > r) return at_fail(c, PC_ERR_SHAPE, "normalized_shape has %d dims, input has %d", k, r);
  int64_t axes[PC_MAX_RANK];
  for (int i = 0; i < k; i++) {
    axes[i] = r - k + i;
    if (x->type.dims[axes[i]] != ns[i])
      return at_fail(c, PC_ERR_SHAPE, "input dim %d is %lld, normalized_shape says %lld", (int)axes[i],
                     (long long)x->type.dims[axes[i]], (long long)ns[i]);
  }
  int64_t n = count_over(x, k, axes);
  if (n <= 0) return at_fail(c, PC_ERR_UNSUPPORTED, "normalized dims must be static and non-empty");
  pc_value *y = fc_layer_norm(g, x, k, axes, at_float(c, "eps", 1e-5), NULL, NULL);
  if (w) y = pc_mul(g, y, pc_broadcast_to(g, pc_convert(g, w, x->type.dtype), r, x->type.dims));
  if (b) y = pc_add(g, y, pc_broadcast_to(g, pc_convert(g, b, x->type.dtype), r, x->type.dims));
  return at_set(c, y);
}

/* ---------------------------------------------------------------- contractions */

/* numpy broadcast of two batch shapes; 0 on mismatch */
static int batch_shape(at_ctx *c, int ra, const int64_t *da, int rb, const int64_t *db, int64_t *out, int *rank) {
  int r = ra > rb ? ra : rb;
  for (int i = 0; i < r; i++) {
    int64_t x = i - (r - ra) >= 0 ? da[i - (r - ra)] : 1, y = i - (r - rb) >= 0 ? db[i - (r - rb)] : 1;
    if (x != y && x != 1 && y != 1)
      return at_fail(c, PC_ERR_SHAPE, "batch dims %lld and %lld do not broadcast", (long long)x, (long long)y), 0;
    out[i] = x == 1 ? y : x;
  }
  *rank = r;
  return 1;
}

/* numpy matmul semantics: 1-D operands, a 2-D right operand, or broadcast batch dims */
static pc_value *matmul(at_ctx *c, pc_value *a, pc_value *b) {
  pc_graph *g = c->g;
  int ra = a->type.rank, rb = b->type.rank;
  if (!ra || !rb) return at_fail(c, PC_ERR_SHAPE, "operands must have rank >= 1"), NULL;
  if (a->type.dtype != b->type.dtype)
    return at_fail(c, PC_ERR_TYPE, "operand dtypes differ (%s, %s)", pc_dtype_name(a->type.dtype),
                   pc_dtype_name(b->type.dtype)), NULL;
  int64_t ca = ra - 1, cb = rb >= 2 ? rb - 2 : 0;
  if (rb <= 2) return pc_dot_general(g, a, b, 1, &ca, &cb, 0, NULL, NULL);
  if (ra == 1) { /* [k] x [..., k, m]: contract with b's operand order, result [..., m] */
    int64_t z = 0;
    return pc_dot_general(g, b, a, 1, &cb, &z, 0, NULL, NULL);
  }
  int64_t batch[PC_MAX_RANK], sa[PC_MAX_RANK], sb[PC_MAX_RANK], bd[PC_MAX_RANK];
  int nb;
  if (!batch_shape(c, ra - 2, a->type.dims, rb - 2, b->type.dims, batch, &nb)) return NULL;
  memcpy(sa, batch, sizeof *sa * (size_t)nb);
  memcpy(sb, batch, sizeof *sb * (size_t)nb);
  memcpy(sa + nb, a->type.dims + ra - 2, 2 * sizeof *sa);
  memcpy(sb + nb, b->type.dims + rb - 2, 2 * sizeof *sb);
  a = pc_broadcast_to(g, a, nb + 2, sa);
  b = pc_broadcast_to(g, b, nb + 2, sb);
  for (int i = 0; i < nb; i++) bd[i] = i;
  ca = nb + 1;
  cb = nb;
  return pc_dot_general(g, a, b, 1, &ca, &cb, nb, bd, bd);
}

static pc_status at_matmul(at_ctx *c) { return at_set(c, matmul(c, c->in[0], c->in[1])); }

static pc_status at_linear(at_ctx *c) {
  pc_graph *g = c->g;
  pc_value *x = c->in[0], *w = c->in[1], *b = c->n_in > 2 ? c->in[2] : NULL;
  if (w->type.rank != 2 || x->type.rank < 1)
    return at_fail(c, PC_ERR_SHAPE, "weight must be 2-D [out, in] and input at least 1-D");
  int64_t cx = x->type.rank - 1, cw = 1;
  pc_value *y = pc_dot_general(g, x, w, 1, &cx, &cw, 0, NULL, NULL);
  if (b && y) y = pc_add(g, y, pc_broadcast_to(g, b, y->type.rank, y->type.dims));
  return at_set(c, y);
}

/* PyTorch's padding="same" for one spatial dim: the extra element goes on the high side */
static pc_status conv_padding(at_ctx *c, const pc_value *w, const int64_t *dil, int64_t *lo, int64_t *hi) {
  const char *mode = at_attr(c, "padding") && at_attr(c, "padding")->kind == PC_ATTR_STRING ? at_str(c, "padding", "") : NULL;
  if (!mode) {
    if (!at_ints_n(c, "padding", 2, 0, lo)) return c->g->status;
    memcpy(hi, lo, 2 * sizeof *hi);
    return PC_OK;
  }
  for (int i = 0; i < 2; i++) {
    int64_t total = !strcmp(mode, "same") ? dil[i] * (w->type.dims[2 + i] - 1) : 0;
    if (strcmp(mode, "same") && strcmp(mode, "valid"))
      return at_fail(c, PC_ERR_ATTR, "padding=\"%s\" is not \"same\" or \"valid\"", mode);
    lo[i] = total / 2;
    hi[i] = total - lo[i];
  }
  return PC_OK;
}

static pc_status at_conv2d(at_ctx *c) {
  pc_graph *g = c->g;
  pc_value *x = c->in[0], *w = c->in[1], *b = c->n_in > 2 ? c->in[2] : NULL;
  if (x->type.rank != 4 || w->type.rank != 4) return at_fail(c, PC_ERR_SHAPE, "input and weight must be 4-D");
  int64_t stride[2], dil[2], lo[2], hi[2], one[2] = {1, 1};
  if (!at_ints_n(c, "stride", 2, 1, stride) || !at_ints_n(c, "dilation", 2, 1, dil) ||
      conv_padding(c, w, dil, lo, hi) != PC_OK)
    return g->status;
  pc_attr at[6] = {pc_a_ints("stride", stride, 2), pc_a_ints("pad_lo", lo, 2),        pc_a_ints("pad_hi", hi, 2),
                   pc_a_ints("dilation", dil, 2),  pc_a_ints("lhs_dilation", one, 2), pc_a_int("groups", at_int(c, "groups", 1))};
  pc_value *in[2] = {x, w};
  pc_value *y = pc_build(g, PC_OP_conv, in, 2, at, 6);
  if (b && y) {
    int64_t d1 = 1;
    y = pc_add(g, y, pc_broadcast_in_dim(g, b, 4, y->type.dims, &d1));
  }
  return at_set(c, y);
}

static pc_status at_sdpa(at_ctx *c) {
  pc_graph *g = c->g;
  pc_value *q = c->in[0], *k = c->in[1], *v = c->in[2], *mask = c->n_in > 3 ? c->in[3] : NULL;
  int r = q->type.rank;
  if (r < 2 || k->type.rank != r || v->type.rank != r) return at_fail(c, PC_ERR_SHAPE, "q, k, v must share a rank >= 2");
  if (!require_float(c, q)) return g->status;
  int64_t bd[PC_MAX_RANK], cq = r - 1, ck = r - 1, cp = r - 1, cv = r - 2;
  for (int i = 0; i < r - 2; i++) bd[i] = i;
  pc_value *s = pc_dot_general(g, q, k, 1, &cq, &ck, r - 2, bd, bd);
  if (!s) return g->status;
  int64_t e = q->type.dims[r - 1];
  if (PC_DIM_IS_SYM(e)) return at_fail(c, PC_ERR_UNSUPPORTED, "head dim must be static");
  s = pc_mul(g, s, like(c, at_float(c, "scale", 1.0 / sqrt((double)e)), s));
  if (s && at_int(c, "is_causal", 0)) {
    int64_t ls[2] = {s->type.dims[r - 2], s->type.dims[r - 1]};
    pc_attr ra[3] = {pc_a_dtype("dtype", PC_i64), pc_a_ints("shape", ls, 2), pc_a_int("axis", 0)};
    pc_attr ca[3] = {pc_a_dtype("dtype", PC_i64), pc_a_ints("shape", ls, 2), pc_a_int("axis", 1)};
    pc_value *keep = pc_ge(g, pc_build(g, PC_OP_iota, NULL, 0, ra, 3), pc_build(g, PC_OP_iota, NULL, 0, ca, 3));
    s = pc_where(g, pc_broadcast_to(g, keep, r, s->type.dims), s, like(c, -INFINITY, s));
  }
  if (mask && s) {
    pc_value *m = pc_broadcast_to(g, mask, r, s->type.dims);
    s = mask->type.dtype == PC_bool ? pc_where(g, m, s, like(c, -INFINITY, s)) : pc_add(g, s, pc_convert(g, m, s->type.dtype));
  }
  if (!s) return g->status;
  return at_set(c, pc_dot_general(g, fc_softmax(g, s, cp, 0), v, 1, &cp, &cv, r - 2, bd, bd));
}

/* ---------------------------------------------------------------- shapes */

static pc_status at_reshape(at_ctx *c) {
  pc_value *x = c->in[0];
  int64_t shape[PC_MAX_RANK];
  int n = at_ints(c, "shape", shape, PC_MAX_RANK);
  if (n == -2) return c->g->status;
  if (n == -1) return at_fail(c, PC_ERR_ATTR, "needs shape=");
  int infer = -1;
  int64_t known = 1;
  for (int i = 0; i < n; i++) {
    if (shape[i] == -1 && infer < 0) infer = i;
    else if (shape[i] < 0) return at_fail(c, PC_ERR_ATTR, "bad shape entry %lld", (long long)shape[i]);
    else known *= shape[i];
  }
  if (infer >= 0) {
    if (!require_static(c, x, "shape=-1")) return c->g->status;
    int64_t total = pc_type_numel(&x->type);
    if (known == 0 || total % known) return at_fail(c, PC_ERR_SHAPE, "cannot infer -1 for %lld elements", (long long)total);
    shape[infer] = total / known;
  }
  return at_set(c, pc_reshape(c->g, x, n, shape));
}

static pc_status at_permute(at_ctx *c) {
  pc_value *x = c->in[0];
  int64_t perm[PC_MAX_RANK];
  int n = at_ints(c, "dims", perm, PC_MAX_RANK);
  if (n == -2) return c->g->status;
  if (n != x->type.rank) return at_fail(c, PC_ERR_ATTR, "dims= must list %d dims", x->type.rank);
  for (int i = 0; i < n; i++)
    if ((perm[i] = at_axis(c, perm[i], n)) < 0) return c->g->status;
  return at_set(c, pc_transpose(c->g, x, perm));
}

static pc_status at_transpose(at_ctx *c) {
  pc_value *x = c->in[0];
  int r = x->type.rank;
  int a = at_axis(c, at_int(c, "dim0", 0), r), b = at_axis(c, at_int(c, "dim1", 1), r);
  if (a < 0 || b < 0) return c->g->status;
  if (a == b) return at_set(c, x);
  int64_t perm[PC_MAX_RANK];
  for (int i = 0; i < r; i++) perm[i] = i;
  perm[a] = b;
  perm[b] = a;
  return at_set(c, pc_transpose(c->g, x, perm));
}

static pc_status at_flatten(at_ctx *c) {
  pc_value *x = c->in[0];
  int r = x->type.rank;
  if (r == 0) return at_set(c, pc_reshape(c->g, x, 1, (int64_t[]){1}));
  int s = at_axis(c, at_int(c, "start_dim", 0), r), e = at_axis(c, at_int(c, "end_dim", -1), r);
  if (s < 0 || e < 0) return c->g->status;
  if (s > e) return at_fail(c, PC_ERR_ATTR, "start_dim after end_dim");
  int64_t shape[PC_MAX_RANK], axes[PC_MAX_RANK];
  int n = 0;
  for (int i = s; i <= e; i++) axes[i - s] = i;
  int64_t p = count_over(x, e - s + 1, axes);
  if (p < 0 && e > s) return at_fail(c, PC_ERR_UNSUPPORTED, "flattened dims must be static");
  for (int i = 0; i < s; i++) shape[n++] = x->type.dims[i];
  shape[n++] = e > s ? p : x->type.dims[s];
  for (int i = e + 1; i < r; i++) shape[n++] = x->type.dims[i];
  return at_set(c, pc_reshape(c->g, x, n, shape));
}

static pc_status at_cat(at_ctx *c) {
  int r = c->in[0]->type.rank;
  int ax = at_axis(c, at_int(c, "dim", 0), r);
  if (ax < 0) return c->g->status;
  return at_set(c, pc_concatenate(c->g, c->in, c->n_in, ax));
}

/* embedding(weight [V, D], indices [...]) -> [..., D] as a gather along V */
static pc_status at_embedding(at_ctx *c) {
  pc_graph *g = c->g;
  pc_value *w = c->in[0], *idx = c->in[1];
  if (w->type.rank != 2) return at_fail(c, PC_ERR_SHAPE, "weight must be 2-D");
  if (!pc_dtype_is_int(idx->type.dtype)) return at_fail(c, PC_ERR_TYPE, "indices must be integers");
  if (!require_static(c, idx, "indices")) return g->status;
  int64_t n = pc_type_numel(&idx->type), d = w->type.dims[1], flat[2] = {n, d}, d0 = 0;
  pc_value *i2 = pc_broadcast_in_dim(g, pc_reshape(g, idx, 1, &n), 2, flat, &d0);
  pc_attr ax = pc_a_int("axis", 0);
  pc_value *in[2] = {w, i2};
  pc_value *y = pc_build(g, PC_OP_gather, in, 2, &ax, 1);
  int64_t shape[PC_MAX_RANK];
  int r = idx->type.rank;
  if (r + 1 > PC_MAX_RANK) return at_fail(c, PC_ERR_RANGE, "indices rank too large");
  memcpy(shape, idx->type.dims, sizeof *shape * (size_t)r);
  shape[r] = d;
  return at_set(c, pc_reshape(g, y, r + 1, shape));
}

/* ---------------------------------------------------------------- reductions and pooling */

static pc_status reduce_mean(at_ctx *c, int mean) {
  pc_value *x = c->in[0];
  int r = x->type.rank;
  int64_t axes[PC_MAX_RANK];
  int n = at_ints(c, "dim", axes, PC_MAX_RANK);
  if (n == -2) return c->g->status;
  if (n == -1) {
    n = r;
    for (int i = 0; i < r; i++) axes[i] = i;
  }
  if (!norm_axes(c, axes, n, r)) return c->g->status;
  if (mean && !require_float(c, x)) return c->g->status;
  pc_value *y = reduce_keep(c, PC_OP_reduce_sum, x, n, axes, (int)at_int(c, "keepdim", 0));
  if (mean && y) {
    int64_t cnt = count_over(x, n, axes);
    if (cnt < 0) return at_fail(c, PC_ERR_UNSUPPORTED, "mean over a symbolic dim");
    y = pc_mul(c->g, y, like(c, 1.0 / (double)cnt, y));
  }
  return at_set(c, y);
}

static pc_status at_mean(at_ctx *c) { return reduce_mean(c, 1); }
static pc_status at_sum(at_ctx *c) { return reduce_mean(c, 0); }

static pc_status at_adaptive_avg_pool2d(at_ctx *c) {
  pc_graph *g = c->g;
  pc_value *x = c->in[0];
  int64_t os[2];
  if (x->type.rank != 4) return at_fail(c, PC_ERR_SHAPE, "input must be 4-D");
  if (!require_float(c, x) || !at_ints_n(c, "output_size", 2, 1, os)) return g->status;
  int64_t h = x->type.dims[2], w = x->type.dims[3];
  if (PC_DIM_IS_SYM(h) || PC_DIM_IS_SYM(w) || os[0] < 1 || os[1] < 1 || h % os[0] || w % os[1])
    return at_fail(c, PC_ERR_UNSUPPORTED, "output size must divide a static input size");
  int64_t axes[2] = {2, 3}, inv = (h / os[0]) * (w / os[1]);
  if (os[0] == 1 && os[1] == 1) {
    pc_value *y = reduce_keep(c, PC_OP_reduce_sum, x, 2, axes, 1);
    return at_set(c, pc_mul(g, y, like(c, 1.0 / (double)inv, y)));
  }
  int64_t split[6] = {x->type.dims[0], x->type.dims[1], os[0], h / os[0], os[1], w / os[1]}, sa[2] = {3, 5};
  pc_value *y = pc_reduce(g, PC_OP_reduce_sum, pc_reshape(g, x, 6, split), 2, sa);
  return at_set(c, y ? pc_mul(g, y, like(c, 1.0 / (double)inv, y)) : NULL);
}

/* max of strided slices of the -inf padded input, one slice per kernel tap */
static pc_status at_max_pool2d(at_ctx *c) {
  pc_graph *g = c->g;
  pc_value *x = c->in[0];
  int64_t k[2], s[2], p[2], d[2];
  if (x->type.rank != 4) return at_fail(c, PC_ERR_SHAPE, "input must be 4-D");
  if (!require_float(c, x) || !require_static(c, x, "max_pool2d") || !at_ints_n(c, "kernel_size", 2, 0, k) ||
      !at_ints_n(c, "padding", 2, 0, p) || !at_ints_n(c, "dilation", 2, 1, d))
    return g->status;
  if (at_attr(c, "stride") && !at_ints_n(c, "stride", 2, 1, s)) return g->status;
  if (!at_attr(c, "stride") || (at_attr(c, "stride")->kind == PC_ATTR_INTS && at_attr(c, "stride")->n == 0))
    memcpy(s, k, sizeof s);
  int ceil_mode = (int)at_int(c, "ceil_mode", 0);
  int64_t out[2], lo[4] = {0, 0, p[0], p[1]}, hi[4] = {0, 0, 0, 0}, zero[4] = {0};
  for (int i = 0; i < 2; i++) {
    if (k[i] < 1 || s[i] < 1 || d[i] < 1 || p[i] < 0 || 2 * p[i] > k[i])
      return at_fail(c, PC_ERR_ATTR, "bad kernel_size/stride/padding/dilation");
    int64_t span = x->type.dims[2 + i] + 2 * p[i] - d[i] * (k[i] - 1) - 1;
    if (span < 0) return at_fail(c, PC_ERR_SHAPE, "kernel larger than the padded input");
    out[i] = (ceil_mode ? (span + s[i] - 1) / s[i] : span / s[i]) + 1;
    if (ceil_mode && (out[i] - 1) * s[i] >= x->type.dims[2 + i] + p[i]) out[i]--; /* last window must start inside */
    int64_t need = (out[i] - 1) * s[i] + d[i] * (k[i] - 1) + 1 - x->type.dims[2 + i] - p[i];
    hi[2 + i] = need > 0 ? need : 0;
  }
  pc_attr pa[4] = {pc_a_ints("low", lo, 4), pc_a_ints("high", hi, 4), pc_a_ints("interior", zero, 4),
                   pc_a_float("value", -INFINITY)};
  pc_value *xp = pc_build(g, PC_OP_pad, &x, 1, pa, 4), *y = NULL;
  for (int64_t a = 0; a < k[0] && xp; a++)
    for (int64_t b = 0; b < k[1]; b++) {
      int64_t st[4] = {0, 0, a * d[0], b * d[1]}, str[4] = {1, 1, s[0], s[1]};
      int64_t lim[4] = {x->type.dims[0], x->type.dims[1], st[2] + (out[0] - 1) * s[0] + 1, st[3] + (out[1] - 1) * s[1] + 1};
      pc_value *t = pc_slice(g, xp, st, lim, str);
      y = y ? pc_max(g, y, t) : t;
    }
  return at_set(c, y);
}

/* ---------------------------------------------------------------- the hook */

pc_status pc_aten_hook(void *ctx, pc_graph *g, const char *op, pc_value *const *in, int n_in, const pc_attr *attrs,
                       int n_attrs, pc_value **out, int n_out) {
  (void)ctx;
  const char *name = strncmp(op, "aten::", 6) == 0 ? op + 6 : NULL;
  const at_row *row = NULL;
  for (size_t i = 0; name && i < sizeof at_rows / sizeof *at_rows && !row; i++)
    if (!strcmp(at_rows[i].name, name)) row = &at_rows[i];
  if (!row) return pc_fail(g, PC_ERR_UNSUPPORTED, "unknown op '%s'", op);
  at_ctx c = {g, op, in, n_in, attrs, n_attrs, out};
  if (n_in < row->min_in || (row->max_in >= 0 && n_in > row->max_in)) {
    if (row->min_in == row->max_in)
      return at_fail(&c, PC_ERR_ATTR, "takes %d operand%s, got %d", row->min_in, row->min_in == 1 ? "" : "s", n_in);
    if (row->max_in < 0) return at_fail(&c, PC_ERR_ATTR, "takes at least %d operands, got %d", row->min_in, n_in);
    return at_fail(&c, PC_ERR_ATTR, "takes %d to %d operands, got %d", row->min_in, row->max_in, n_in);
  }
  if (n_out != row->n_out) return at_fail(&c, PC_ERR_ATTR, "has %d result%s, %d named", row->n_out, row->n_out == 1 ? "" : "s", n_out);
  for (int i = 0; i < n_in; i++)
    if (!in[i]) return at_fail(&c, PC_ERR_INTERNAL, "operand %d is missing", i);
  return row->fn(&c);
}
