/* frontend/onnx_helpers.c: the ox_ helpers decompositions are written against: errors naming the node, inputs and
 * outputs, attributes with defaults, compile-time constant inputs, axes, broadcasting and conversions. */
#include "frontend/onnx_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---------------------------------------------------------------- helper API for decompositions */

pc_status ox_fail(ox_ctx *c, pc_status code, const char *fmt, ...) {
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return pc_fail(c->g, code, "%s: %s", c->g->origin ? c->g->origin : c->op_type, msg);
}

pc_status ox_status(ox_ctx *c) { return c->g->status; }

pc_value *ox_in(ox_ctx *c, int i) { return i >= 0 && i < c->n_in ? c->in[i] : NULL; }
int ox_has_in(ox_ctx *c, int i) { return ox_in(c, i) != NULL; }

pc_value *ox_in_req(ox_ctx *c, int i) {
  pc_value *v = ox_in(c, i);
  if (!v && c->g->status == PC_OK) ox_fail(c, PC_ERR_ATTR, "input %d is required", i);
  return v;
}

pc_status ox_out(ox_ctx *c, int i, pc_value *v) {
  if (i >= 0 && i < c->n_out) c->out[i] = v;
  if (!v && c->g->status == PC_OK) ox_fail(c, PC_ERR_INTERNAL, "output %d was not built", i);
  return c->g->status;
}

int ox_has_out(ox_ctx *c, int i) {
  return i >= 0 && i < c->n_out && c->node->output[i] && *c->node->output[i];
}

static const Onnx__AttributeProto *find_attr(ox_ctx *c, const char *name) {
  for (size_t i = 0; i < c->node->n_attribute; i++) {
    const Onnx__AttributeProto *a = c->node->attribute[i];
    if (a && a->name && strcmp(a->name, name) == 0) return a;
  }
  return NULL;
}

int ox_has_attr(ox_ctx *c, const char *name) { return find_attr(c, name) != NULL; }

int64_t ox_attr_int(ox_ctx *c, const char *name, int64_t dflt) {
  const Onnx__AttributeProto *a = find_attr(c, name);
  return a ? a->i : dflt;
}

int ox_attr_flag(ox_ctx *c, const char *name, int dflt) {
  int64_t v = ox_attr_int(c, name, dflt);
  if (v == 0 || v == 1) return (int)v;
  ox_fail(c, PC_ERR_ATTR, "attribute %s is %lld; it must be 0 or 1", name, (long long)v);
  return dflt;
}

int ox_attr_dtype(ox_ctx *c, const char *name, pc_dtype dflt, pc_dtype *out) {
  *out = dflt;
  if (!ox_has_attr(c, name)) return 1;
  int64_t t = ox_attr_int(c, name, 0);
  if (ox_dtype_from_onnx(t, out)) return 1;
  ox_fail(c, PC_ERR_UNSUPPORTED, "attribute %s: ONNX type %lld (%s) is not supported", name, (long long)t,
          t == (int)t ? ox_onnx_type_name((int)t) : "?");
  return 0;
}

double ox_attr_float(ox_ctx *c, const char *name, double dflt) {
  const Onnx__AttributeProto *a = find_attr(c, name);
  return a ? (double)a->f : dflt;
}

const char *ox_attr_str(ox_ctx *c, const char *name, const char *dflt) {
  const Onnx__AttributeProto *a = find_attr(c, name);
  if (!a) return dflt;
  char *s = pc_alloc(c->g, a->s.len + 1);
  if (!s) return dflt;
  if (a->s.len) memcpy(s, a->s.data, a->s.len);
  return s;
}

int ox_attr_ints(ox_ctx *c, const char *name, int64_t *out, int max) {
  const Onnx__AttributeProto *a = find_attr(c, name);
  if (!a) return -1;
  if (a->n_ints > (size_t)max) return ox_fail(c, PC_ERR_RANGE, "attribute %s has %zu entries (at most %d)", name, a->n_ints, max), -2;
  for (size_t i = 0; i < a->n_ints; i++) out[i] = a->ints[i];
  return (int)a->n_ints;
}

int ox_attr_ints_n(ox_ctx *c, const char *name, int64_t *out, int n, int cap, int64_t dflt) {
  int got = ox_attr_ints(c, name, out, cap);
  if (got == -2) return 0;
  if (got == -1) {
    for (int i = 0; i < n; i++) out[i] = dflt;
    return 1;
  }
  if (got != n) return ox_fail(c, PC_ERR_ATTR, "attribute %s has %d entries, expected %d", name, got, n), 0;
  return 1;
}

int ox_attr_floats(ox_ctx *c, const char *name, double *out, int max) {
  const Onnx__AttributeProto *a = find_attr(c, name);
  if (!a) return -1;
  if (a->n_floats > (size_t)max) return ox_fail(c, PC_ERR_RANGE, "attribute %s has %zu entries (at most %d)", name, a->n_floats, max), -2;
  for (size_t i = 0; i < a->n_floats; i++) out[i] = a->floats[i];
  return (int)a->n_floats;
}

pc_value *ox_attr_tensor(ox_ctx *c, const char *name) {
  const Onnx__AttributeProto *a = find_attr(c, name);
  if (!a || !a->t) return NULL;
  pc_tensor t;
  if (ox_tensor_decode(c->g, a->t, c->dir, &t) != PC_OK) return NULL;
  pc_value *v = pc_const(c->g, pc_type_make(t.dtype, t.rank, t.dims), t.data);
  pc_tensor_free(&t);
  return v;
}

/* element k of a buffer of dtype dt as int64, saturating */
static int64_t elem_i(pc_dtype dt, const void *p, int64_t k) {
  if (dt == PC_i64) return ((const int64_t *)p)[k];
  double v = pc_elem_f64(dt, p, k);
  if (v != v) return 0;
  if (v >= 9.2e18) return INT64_MAX;
  if (v <= -9.2e18) return INT64_MIN;
  return (int64_t)v;
}

int ox_value_ints(ox_ctx *c, const pc_value *v, int64_t *out, int max) {
  const void *d = pc_const_data(v);
  if (!d) return ox_fail(c, PC_ERR_UNSUPPORTED, "an input that must be known at compile time is computed at run time"), -2;
  int64_t n = pc_type_numel(&v->type);
  if (n < 0 || n > max) return ox_fail(c, PC_ERR_RANGE, "constant input has %lld elements (at most %d)", (long long)n, max), -2;
  for (int64_t k = 0; k < n; k++) out[k] = elem_i(v->type.dtype, d, k);
  return (int)n;
}

static const pc_value *const_input(ox_ctx *c, int i) {
  const pc_value *v = ox_in(c, i);
  if (v && !pc_const_data(v))
    ox_fail(c, PC_ERR_UNSUPPORTED, "input %d ('%s') must be a compile-time constant", i,
            c->node->input[i] ? c->node->input[i] : "");
  return v;
}

int ox_const_ints(ox_ctx *c, int i, int64_t *out, int max) {
  const pc_value *v = const_input(c, i);
  if (!v) return c->g->status == PC_OK ? -1 : -2;
  if (c->g->status != PC_OK) return -2;
  return ox_value_ints(c, v, out, max);
}

int ox_const_floats(ox_ctx *c, int i, double *out, int max) {
  const pc_value *v = const_input(c, i);
  if (!v) return c->g->status == PC_OK ? -1 : -2;
  if (c->g->status != PC_OK) return -2;
  int64_t n = pc_type_numel(&v->type);
  if (n < 0 || n > max) return ox_fail(c, PC_ERR_RANGE, "input %d has %lld elements (at most %d)", i, (long long)n, max), -2;
  const void *d = pc_const_data(v);
  for (int64_t k = 0; k < n; k++) out[k] = pc_elem_f64(v->type.dtype, d, k);
  return (int)n;
}

int ox_axis(ox_ctx *c, int64_t axis, int rank) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank) {
    ox_fail(c, PC_ERR_ATTR, "axis %lld is out of range for rank %d", (long long)axis, rank);
    return -1;
  }
  return (int)a;
}

int ox_axes(ox_ctx *c, int64_t *axes, int n, int rank) {
  for (int i = 0; i < n; i++) {
    int a = ox_axis(c, axes[i], rank);
    if (a < 0) return 0;
    axes[i] = a;
    for (int j = 0; j < i; j++)
      if (axes[j] == a) return ox_fail(c, PC_ERR_ATTR, "axis %d is repeated", a), 0;
  }
  return 1;
}

int ox_broadcast2(ox_ctx *c, pc_value **a, pc_value **b) {
  if (!*a || !*b) return 0;
  return pc_broadcast_pair(c->g, a, b);
}

int ox_broadcast3(ox_ctx *c, pc_value **a, pc_value **b, pc_value **d) {
  if (!ox_broadcast2(c, a, b) || !ox_broadcast2(c, a, d)) return 0;
  return ox_broadcast2(c, b, d);
}

pc_value *ox_binary(ox_ctx *c, pc_op op, pc_value *a, pc_value *b) {
  if (!a || !b) return NULL;
  if (a->type.dtype != b->type.dtype) {
    ox_fail(c, PC_ERR_TYPE, "operands have different types %s and %s", pc_dtype_name(a->type.dtype),
            pc_dtype_name(b->type.dtype));
    return NULL;
  }
  if (!ox_broadcast2(c, &a, &b)) return NULL;
  pc_value *in[2] = {a, b};
  return pc_build(c->g, op, in, 2, NULL, 0);
}

/* v clamped into an integer dtype's range (a float attribute applied to an int tensor), so that
 * the conversion to the dtype is defined */
static double fit_dtype(pc_dtype dt, double v) {
  static const struct { pc_dtype dt; double lo, hi; } lim[] = {
      {PC_i8, -128, 127}, {PC_i16, -32768, 32767}, {PC_i32, -2147483648.0, 2147483647.0},
      {PC_i64, -9223372036854775808.0, 9223372036854774784.0}, {PC_u8, 0, 255}, {PC_bool, 0, 1},
      {PC_u16, 0, 65535}, {PC_u32, 0, 4294967295.0}, {PC_u64, 0, 18446744073709549568.0},
      {PC_i4, -8, 7}, {PC_u4, 0, 15}, {PC_i2, -2, 1}, {PC_u2, 0, 3}};
  for (size_t i = 0; i < sizeof lim / sizeof *lim; i++)
    if (lim[i].dt == dt) return v != v ? 0 : v < lim[i].lo ? lim[i].lo : v > lim[i].hi ? lim[i].hi : v;
  return v;
}

/* convert_element_type to an f8 type does not saturate (ir/prims.def): ONNX's saturate=1 is a clamp to
 * [-max, max] before it (NaN passes through the clamp; inf becomes max). The clamp is done in the operand's
 * type when that holds the bound exactly (f16 bf16 f32 f64: max is 448, 240 or 57344), else in f32. */
pc_value *ox_convert(ox_ctx *c, pc_value *x, pc_dtype to, int saturate) {
  return ox_convert_rounded(c, x, to, saturate, "up");
}

/* f8e8m0 keeps the f32 exponent field (ir/prims.def), i.e. rounds down. ONNX's "up" and "nearest" add to the
 * f32 bits (sign cleared) what carries into the exponent exactly when that mode rounds up: 2^23 - 1 for "up";
 * for "nearest" 2^22 (a half), less one when the exponent field is 0, whose tie the ONNX reference keeps down.
 * Exponents that must not move are left alone: 0xff (inf, NaN), and 0xfe when saturating. */
static pc_value *to_e8m0(ox_ctx *c, pc_value *x, int saturate, const char *round_mode) {
  int up = strcmp(round_mode, "up") == 0, nearest = strcmp(round_mode, "nearest") == 0;
  if (!up && !nearest && strcmp(round_mode, "down") != 0)
    return ox_fail(c, PC_ERR_ATTR, "round_mode '%s' is not up, down or nearest", round_mode), NULL;
  x = pc_convert(c->g, x, PC_f32); /* the reference rounds every input to float32 first */
  if (!up && !nearest) return pc_convert(c->g, x, PC_f8e8m0);
  pc_graph *g = c->g;
  pc_attr as_i32 = pc_a_dtype("dtype", PC_i32), as_f32 = pc_a_dtype("dtype", PC_f32);
  pc_value *a = pc_build(g, PC_OP_bitcast, &x, 1, &as_i32, 1);
  a = pc_bitwise_and(g, a, ox_like(c, 0x7fffffff, a));
  pc_value *add = ox_like(c, up ? 0x7fffff : 0x3fffff, a);
  if (nearest) add = pc_add(g, add, pc_convert(g, pc_ge(g, a, ox_like(c, 0x800000, a)), PC_i32));
  pc_value *fixed = pc_ge(g, a, ox_like(c, saturate ? 0x7f000000 : 0x7f800000, a));
  pc_value *r = pc_where(g, fixed, a, pc_add(g, a, add));
  return pc_convert(g, pc_build(g, PC_OP_bitcast, &r, 1, &as_f32, 1), PC_f8e8m0);
}

pc_value *ox_convert_rounded(ox_ctx *c, pc_value *x, pc_dtype to, int saturate, const char *round_mode) {
  if (!x) return NULL;
  pc_dtype from = x->type.dtype;
  if (to == PC_f8e8m0 && from != to) return to_e8m0(c, x, saturate, round_mode);
  /* the ONNX reference casts floats to the sub-byte ints through a wide int, wrapping to the width */
  if (pc_dtype_subbyte_bits(to) && pc_dtype_is_float(from)) return pc_convert(c->g, pc_convert(c->g, x, PC_i64), to);
  /* f4e2m1 saturates by itself: it has no inf or NaN */
  if (!saturate || !pc_dtype_is_f8(to) || to == PC_f4e2m1 || from == PC_bool || from == to) return pc_convert(c->g, x, to);
  if (pc_dtype_is_f8(from) || !pc_dtype_is_float(from)) x = pc_convert(c->g, x, PC_f32);
  double mx = to == PC_f8e4m3fn ? 448.0 : to == PC_f8e4m3fnuz ? 240.0 : 57344.0;
  return pc_convert(c->g, pc_clamp(c->g, x, ox_like(c, -mx, x), ox_like(c, mx, x)), to);
}

pc_value *ox_like(ox_ctx *c, double v, const pc_value *x) {
  return x ? pc_full_like(c->g, fit_dtype(x->type.dtype, v), x) : NULL;
}

pc_value *ox_reshape(ox_ctx *c, pc_value *x, int n, const int64_t *dims) { return pc_reshape(c->g, x, n, dims); }

pc_value *ox_unsqueeze(ox_ctx *c, pc_value *x, int n_axes, const int64_t *axes) {
  if (!x) return NULL;
  int r = x->type.rank + n_axes;
  if (r > PC_MAX_RANK) return ox_fail(c, PC_ERR_RANGE, "rank %d exceeds %d", r, PC_MAX_RANK), NULL;
  int64_t dims[PC_MAX_RANK];
  int src = 0;
  for (int i = 0; i < r; i++) {
    int ins = 0;
    for (int j = 0; j < n_axes; j++) ins |= axes[j] == i;
    dims[i] = ins ? 1 : x->type.dims[src++];
  }
  return pc_reshape(c->g, x, r, dims);
}

pc_value *ox_reduce(ox_ctx *c, pc_op op, pc_value *x, int n_axes, const int64_t *axes, int keepdims) {
  pc_value *y = pc_reduce(c->g, op, x, n_axes, axes);
  if (!y || !keepdims) return y;
  int64_t sorted[PC_MAX_RANK];
  memcpy(sorted, axes, sizeof *axes * (size_t)n_axes);
  return ox_unsqueeze(c, y, n_axes, sorted);
}

int ox_require_float(ox_ctx *c, const pc_value *x) {
  if (!x) return 0;
  if (pc_dtype_is_float(x->type.dtype)) return 1;
  ox_fail(c, PC_ERR_TYPE, "needs a float tensor, got %s", pc_dtype_name(x->type.dtype));
  return 0;
}
