/* frontend/onnx_quant.c: quantized ops decomposed into prims: ai.onnx's QuantizeLinear, DequantizeLinear,
 * DynamicQuantizeLinear, MatMulInteger, ConvInteger, QLinearConv and QLinearMatMul, and com.microsoft's (ONNX
 * Runtime's contrib ops, as its CPU kernels compute them) QLinearAdd, QLinearMul, QLinearConcat,
 * QLinearGlobalAveragePool, QLinearAveragePool, QLinearSigmoid, QLinearLeakyRelu, QLinearSoftmax, QGemm, QLinearConv,
 * QuantizeLinear and DequantizeLinear. */
#include "frontend/onnx_internal.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define G (c->g)

static pc_value *scalar(ox_ctx *c, pc_dtype dt, double v) { return pc_scalar(G, dt, v); }

static int check_static(ox_ctx *c, const pc_value *x) {
  if (!x) return 0;
  if (pc_type_is_static(&x->type)) return 1;
  ox_fail(c, PC_ERR_UNSUPPORTED, "needs a static input shape, the input has a symbolic dim");
  return 0;
}

/* ---------------------------------------------------------------- ai.onnx */

/* runs another op's decomposition on substitute inputs (same node attributes); its output 0 */
static pc_value *call_op(ox_ctx *c, ox_fn fn, pc_value **in, int n_in) {
  pc_value *out[1] = {NULL};
  ox_ctx sub = *c;
  sub.in = in, sub.n_in = n_in, sub.out = out, sub.n_out = 1;
  return fn(&sub) == PC_OK ? out[0] : NULL;
}

/* a scale or zero point made broadcastable to x: scalar, per-axis vector, or blocks along axis */
static pc_value *qparam(ox_ctx *c, pc_value *v, const pc_value *x, int axis, int64_t block) {
  if (!v || !x) return NULL;
  int r = x->type.rank;
  const int64_t *xd = x->type.dims;
  if (pc_type_numel(&v->type) == 1) return ox_reshape(c, v, 0, NULL);
  if (block <= 0) {
    if (v->type.rank != 1 || v->type.dims[0] != xd[axis])
      return ox_fail(c, PC_ERR_SHAPE, "a per-axis scale/zero point must have %lld entries", (long long)xd[axis]), NULL;
    int64_t ax = axis;
    return pc_broadcast_in_dim(G, v, r, xd, &ax);
  }
  /* a block past the axis is one block of the whole axis (block_size near 2^63 overflowed the division's
   * rounding: fuzz_mutate) */
  if (block > xd[axis]) block = xd[axis] > 0 ? xd[axis] : 1;
  int64_t nb = (xd[axis] + block - 1) / block, e[PC_MAX_RANK + 1], dims[PC_MAX_RANK], s[PC_MAX_RANK];
  if (v->type.rank != r || r + 1 > PC_MAX_RANK) return ox_fail(c, PC_ERR_SHAPE, "a blocked scale/zero point must have the input's rank"), NULL;
  for (int i = 0; i < r; i++)
    if (v->type.dims[i] != (i == axis ? nb : xd[i])) return ox_fail(c, PC_ERR_SHAPE, "blocked scale/zero point shape does not fit block_size %lld", (long long)block), NULL;
  for (int i = 0, k = 0; i <= r; i++) e[i] = i == axis + 1 ? block : v->type.dims[k++];
  for (int i = 0; i < r; i++) dims[i] = i <= axis ? i : i + 1, s[i] = i == axis ? nb * block : xd[i];
  pc_value *rep = ox_reshape(c, pc_broadcast_in_dim(G, v, r + 1, e, dims), r, s);
  int64_t st[PC_MAX_RANK] = {0}, one[PC_MAX_RANK];
  for (int i = 0; i < r; i++) one[i] = 1;
  return nb * block == xd[axis] ? rep : pc_slice(G, rep, st, xd, one);
}

typedef struct q_range {
  pc_dtype dt;
  double lo, hi;
} q_range;

static const q_range q_ranges[] = {{PC_u8, 0, 255}, {PC_u16, 0, 65535}, {PC_i4, -8, 7}, {PC_u4, 0, 15}, {PC_i2, -2, 1},
                                    {PC_u2, 0, 3}, {PC_i8, -128, 127}, {PC_i16, -32768, 32767}, {PC_i32, -2147483648.0, 2147483647.0}};

static const q_range *q_range_of(ox_ctx *c, pc_dtype dt) {
  for (size_t i = 0; i < sizeof q_ranges / sizeof *q_ranges; i++)
    if (q_ranges[i].dt == dt) return &q_ranges[i];
  ox_fail(c, PC_ERR_UNSUPPORTED, "quantized type %s is not supported", pc_dtype_name(dt));
  return NULL;
}

/* round-half-even(v) + zp, saturated to the range and converted; v and zp broadcastable */
static pc_value *q_saturate(ox_ctx *c, pc_value *v, pc_value *zp, const q_range *q) {
  if (!v || !q) return NULL;
  pc_value *r = pc_round(G, v);
  if (zp) r = ox_binary(c, PC_OP_add, r, pc_convert(G, zp, r->type.dtype));
  pc_value *lo = pc_full_like(G, q->lo, r), *hi = pc_full_like(G, q->hi, r);
  return pc_convert(G, r ? pc_clamp(G, r, lo, hi) : NULL, q->dt);
}

/* axis (normalized; only checked when the scale is not a scalar, as it is unused then) and block_size */
static int q_geometry(ox_ctx *c, const pc_value *x, const pc_value *scale, int *axis, int64_t *block) {
  *block = ox_attr_int(c, "block_size", 0);
  int64_t a = ox_attr_int(c, "axis", 1);
  *axis = 0;
  if (*block < 0) return ox_fail(c, PC_ERR_ATTR, "block_size must be >= 0"), 0;
  if (pc_type_numel(&scale->type) == 1) return 1;
  *axis = ox_axis(c, a, x->type.rank);
  return *axis >= 0;
}

pc_status ox_op_QuantizeLinear(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0), *sc = ox_in_req(c, 1), *zp = ox_in(c, 2);
  int axis;
  int64_t block;
  if (!check_static(c, x) || !sc || !ox_require_float(c, x) || !q_geometry(c, x, sc, &axis, &block)) return ox_status(c);
  pc_dtype out = PC_u8, prec = x->type.dtype;
  if (!ox_attr_dtype(c, "output_dtype", PC_u8, &out) || !ox_attr_dtype(c, "precision", x->type.dtype, &prec)) return ox_status(c);
  if (zp && ox_has_attr(c, "output_dtype") && zp->type.dtype != out) return ox_fail(c, PC_ERR_TYPE, "output_dtype and the zero point's type differ");
  if (zp) out = zp->type.dtype;
  pc_value *s = pc_convert(G, qparam(c, sc, x, axis, block), prec);
  pc_value *v = ox_binary(c, PC_OP_div, pc_convert(G, x, prec), s);
  if (pc_dtype_is_f8(out)) { /* no integer rounding: x / scale + zp rounded to the f8 type, saturate by default */
    if (zp) v = ox_binary(c, PC_OP_add, v, pc_convert(G, qparam(c, zp, x, axis, block), v ? v->type.dtype : prec));
    return ox_out(c, 0, ox_convert(c, v, out, ox_attr_flag(c, "saturate", 1)));
  }
  const q_range *q = q_range_of(c, out);
  if (!q) return ox_status(c);
  return ox_out(c, 0, q_saturate(c, v, qparam(c, zp, x, axis, block), q));
}

pc_status ox_op_DequantizeLinear(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0), *sc = ox_in_req(c, 1), *zp = ox_in(c, 2);
  int axis;
  int64_t block;
  if (!check_static(c, x) || !sc || !q_geometry(c, x, sc, &axis, &block)) return ox_status(c);
  if (!pc_dtype_is_int(x->type.dtype) && !pc_dtype_is_f8(x->type.dtype)) return ox_fail(c, PC_ERR_TYPE, "quantized type %s is not supported", pc_dtype_name(x->type.dtype));
  if (zp && zp->type.dtype != x->type.dtype) return ox_fail(c, PC_ERR_TYPE, "x and its zero point have different types");
  if (!ox_require_float(c, sc)) return ox_status(c);
  pc_dtype out = sc->type.dtype;
  if (!ox_attr_dtype(c, "output_dtype", sc->type.dtype, &out)) return ox_status(c);
  /* the reference works in float32 (float64 for a float64 scale) and rounds once to the output type */
  pc_dtype w = sc->type.dtype == PC_f64 ? PC_f64 : PC_f32;
  pc_value *d = pc_convert(G, x, w);
  if (zp) d = ox_binary(c, PC_OP_sub, d, pc_convert(G, qparam(c, zp, x, axis, block), w));
  pc_value *y = ox_binary(c, PC_OP_mul, d, pc_convert(G, qparam(c, sc, x, axis, block), w));
  return ox_out(c, 0, pc_convert(G, y, out));
}

/* x (f32) as u8 with the scale and zero point that map [min(x, 0), max(x, 0)] onto [0, 255] (DynamicQuantizeLinear) */
static pc_value *dyn_quant(ox_ctx *c, pc_value *x, pc_value **scale_out, pc_value **zp_out) {
  int r = x->type.rank;
  int64_t all[PC_MAX_RANK];
  for (int i = 0; i < r; i++) all[i] = i;
  pc_value *zero = scalar(c, PC_f32, 0);
  pc_value *mx = pc_max(G, pc_reduce(G, PC_OP_reduce_max, x, r, all), zero);
  pc_value *mn = pc_min(G, pc_reduce(G, PC_OP_reduce_min, x, r, all), zero);
  pc_value *span = pc_where(G, pc_eq(G, mx, mn), scalar(c, PC_f32, 1), pc_sub(G, mx, mn));
  pc_value *scale = pc_div(G, span, scalar(c, PC_f32, 255));
  pc_value *zp = pc_sub(G, zero, pc_div(G, mn, scale));
  zp = pc_round(G, pc_clamp(G, zp, zero, scalar(c, PC_f32, 255)));
  pc_value *y = ox_binary(c, PC_OP_add, pc_round(G, ox_binary(c, PC_OP_div, x, scale)), zp);
  *scale_out = scale, *zp_out = zp;
  return pc_convert(G, y ? pc_clamp(G, y, pc_full_like(G, 0, y), pc_full_like(G, 255, y)) : NULL, PC_u8);
}

pc_status ox_op_DynamicQuantizeLinear(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0), *scale, *zp;
  if (!check_static(c, x)) return ox_status(c);
  if (x->type.dtype != PC_f32) return ox_fail(c, PC_ERR_TYPE, "input must be float32");
  pc_value *y = dyn_quant(c, x, &scale, &zp);
  if (ox_out(c, 0, y) != PC_OK || ox_out(c, 1, scale) != PC_OK) return ox_status(c);
  return ox_out(c, 2, pc_convert(G, zp, PC_u8));
}

/* v - zp in int32, zp a scalar or (per row of a / per column of b) vector */
static pc_value *int_shift(ox_ctx *c, pc_value *v, pc_value *zp, int zp_axis_from_end) {
  if (!v) return NULL;
  pc_value *vi = pc_convert(G, v, PC_i32);
  if (!zp) return vi;
  pc_value *z = pc_convert(G, zp, PC_i32);
  int r = v->type.rank;
  if (pc_type_numel(&zp->type) == 1) z = ox_reshape(c, z, 0, NULL);
  else if (zp->type.rank == 1 && r >= 2 && zp->type.dims[0] == v->type.dims[r - zp_axis_from_end]) {
    int64_t ax = r - zp_axis_from_end;
    z = pc_broadcast_in_dim(G, z, r, v->type.dims, &ax);
  } else return ox_fail(c, PC_ERR_SHAPE, "zero point shape does not fit its operand"), NULL;
  return ox_binary(c, PC_OP_sub, vi, z);
}

pc_value *ox_dyn_qmatmul(ox_ctx *c, pc_value *a, pc_value *wq, pc_value *ws, pc_value *wz) {
  if (!a || !wq || !ws || !check_static(c, a)) return NULL;
  int64_t n = wq->type.dims[1];
  pc_value *as, *az, *aq = dyn_quant(c, a, &as, &az);
  pc_value *ai = aq ? int_shift(c, aq, az, 2) : NULL, *wi = int_shift(c, wq, wz, 1);
  int64_t lc = a->type.rank - 1, rc = 0;
  pc_value *acc = ai && wi ? pc_dot_general(G, ai, wi, 1, &lc, &rc, 0, NULL, NULL) : NULL;
  pc_value *s = ox_binary(c, PC_OP_mul, as, pc_type_numel(&ws->type) == 1 ? ox_reshape(c, ws, 0, NULL) : ws);
  if (s && s->type.rank == 1 && s->type.dims[0] != n)
    return ox_fail(c, PC_ERR_SHAPE, "a per-column scale must have %lld entries", (long long)n), NULL;
  return acc ? ox_binary(c, PC_OP_mul, pc_convert(G, acc, PC_f32), s) : NULL;
}

pc_status ox_op_MatMulInteger(ox_ctx *c) {
  pc_value *a = ox_in_req(c, 0), *b = ox_in_req(c, 1);
  if (!check_static(c, a) || !check_static(c, b)) return ox_status(c);
  pc_value *in[2] = {int_shift(c, a, ox_in(c, 2), 2), int_shift(c, b, ox_in(c, 3), 1)};
  if (!in[0] || !in[1]) return ox_status(c);
  return ox_out(c, 0, call_op(c, ox_op_MatMul, in, 2));
}

/* the int32 convolution of (x - x_zero_point) and (w - w_zero_point) with the node's Conv attributes */
static pc_value *conv_integer(ox_ctx *c, pc_value *x, pc_value *w, pc_value *xz, pc_value *wz) {
  if (!check_static(c, x) || !check_static(c, w)) return NULL;
  if (xz && pc_type_numel(&xz->type) != 1) return ox_fail(c, PC_ERR_SHAPE, "x_zero_point must be a scalar"), NULL;
  pc_value *xi = int_shift(c, x, xz, 0), *wi = pc_convert(G, w, PC_i32);
  if (wz && pc_type_numel(&wz->type) == 1) wi = ox_binary(c, PC_OP_sub, wi, ox_reshape(c, pc_convert(G, wz, PC_i32), 0, NULL));
  else if (wz) {
    if (wz->type.rank != 1 || wz->type.dims[0] != w->type.dims[0])
      return ox_fail(c, PC_ERR_SHAPE, "w_zero_point must have one entry per output channel"), NULL;
    int64_t zero = 0;
    wi = ox_binary(c, PC_OP_sub, wi, pc_broadcast_in_dim(G, pc_convert(G, wz, PC_i32), w->type.rank, w->type.dims, &zero));
  }
  pc_value *in[2] = {xi, wi};
  if (!xi || !wi) return NULL;
  return call_op(c, ox_op_Conv, in, 2);
}

pc_status ox_op_ConvInteger(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0), *w = ox_in_req(c, 1);
  return ox_out(c, 0, conv_integer(c, x, w, ox_in(c, 2), ox_in(c, 3)));
}

/* v (a scalar or one entry per output channel) shaped to broadcast over a conv output of rank r */
static pc_value *per_out_channel(ox_ctx *c, pc_value *v, int r) {
  if (!v || pc_type_numel(&v->type) == 1) return v ? ox_reshape(c, v, 0, NULL) : NULL;
  int64_t d[PC_MAX_RANK];
  d[0] = pc_type_numel(&v->type);
  for (int i = 1; i < r - 1; i++) d[i] = 1;
  return ox_reshape(c, v, r - 1, d);
}

pc_status ox_op_QLinearConv(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0), *xs = ox_in_req(c, 1), *xz = ox_in(c, 2), *w = ox_in_req(c, 3), *ws = ox_in_req(c, 4),
           *wz = ox_in(c, 5), *ys = ox_in_req(c, 6), *yz = ox_in(c, 7), *b = ox_in(c, 8);
  if (!x || !xs || !w || !ws || !ys || !ox_require_float(c, xs)) return ox_status(c);
  const q_range *q = q_range_of(c, yz ? yz->type.dtype : x->type.dtype);
  pc_value *acc = conv_integer(c, x, w, xz, wz);
  if (!acc || !q) return ox_status(c);
  int r = acc->type.rank;
  if (b) acc = ox_binary(c, PC_OP_add, acc, per_out_channel(c, pc_convert(G, b, PC_i32), r));
  /* the scales combine in their own type; the int32 sum then promotes to float64, as in QLinearMatMul */
  pc_value *s = ox_binary(c, PC_OP_div, ox_binary(c, PC_OP_mul, ox_reshape(c, xs, 0, NULL), per_out_channel(c, ws, r)),
                          pc_convert(G, ox_reshape(c, ys, 0, NULL), xs->type.dtype));
  pc_value *d = ox_binary(c, PC_OP_mul, pc_convert(G, acc, PC_f64), pc_convert(G, s, PC_f64));
  return ox_out(c, 0, q_saturate(c, d, yz ? ox_reshape(c, yz, 0, NULL) : NULL, q));
}

pc_status ox_op_QLinearMatMul(ox_ctx *c) {
  pc_value *a = ox_in_req(c, 0), *as = ox_in_req(c, 1), *az = ox_in(c, 2), *b = ox_in_req(c, 3), *bs = ox_in_req(c, 4),
           *bz = ox_in(c, 5), *ys = ox_in_req(c, 6), *yz = ox_in(c, 7);
  if (!check_static(c, a) || !check_static(c, b) || !as || !bs || !ys) return ox_status(c);
  const q_range *q = q_range_of(c, yz ? yz->type.dtype : a->type.dtype);
  if (!q || !ox_require_float(c, as)) return ox_status(c);
  pc_value *in[2] = {int_shift(c, a, az, 2), int_shift(c, b, bz, 1)};
  if (!in[0] || !in[1]) return ox_status(c);
  pc_value *acc = call_op(c, ox_op_MatMul, in, 2);
  /* numpy: the scales combine in their own type, the int32 product then promotes to float64 */
  pc_value *s = ox_binary(c, PC_OP_div, ox_binary(c, PC_OP_mul, as, bs), pc_convert(G, ys, as->type.dtype));
  pc_value *d = ox_binary(c, PC_OP_mul, pc_convert(G, acc, PC_f64), pc_convert(G, s, PC_f64));
  return ox_out(c, 0, q_saturate(c, d, yz, q));
}

/* ---------------------------------------------------------------- com.microsoft
 * ONNX Runtime's contrib ops, as its CPU kernels compute them: the quantized inputs dequantized to float32
 * (scale * (q - zero point)), the op in float32, the result quantized (round half to even of y / y_scale, plus
 * the zero point, saturated to the zero point's type). Scales and zero points are per tensor (one element),
 * except QGemm's b_scale and b_zero_point, which may have one entry per output column. */

/* input i, required: named in the error */
static pc_value *ms_req(ox_ctx *c, int i, const char *name) {
  pc_value *v = ox_in(c, i);
  if (!v && c->g->status == PC_OK) ox_fail(c, PC_ERR_ATTR, "input %d (%s) is required", i, name);
  return v;
}

static int ms_one(const pc_value *v) { return pc_type_is_static(&v->type) && pc_type_numel(&v->type) == 1; }

/* a per-tensor float32 scale (input i, required) as a rank-0 value */
static pc_value *ms_scale(ox_ctx *c, int i, const char *name) {
  pc_value *s = ms_req(c, i, name);
  if (!s) return NULL;
  if (s->type.dtype != PC_f32) return ox_fail(c, PC_ERR_TYPE, "%s must be float32, not %s", name, pc_dtype_name(s->type.dtype)), NULL;
  if (!ms_one(s)) return ox_fail(c, PC_ERR_SHAPE, "%s must be a scalar or a 1-element tensor", name), NULL;
  return ox_reshape(c, s, 0, NULL);
}

/* a per-tensor zero point of type dt (input i, optional) as a rank-0 value; NULL when absent or failed */
static pc_value *ms_zp(ox_ctx *c, int i, const char *name, pc_dtype dt) {
  pc_value *z = ox_in(c, i);
  if (!z || c->g->status != PC_OK) return NULL;
  if (z->type.dtype != dt)
    return ox_fail(c, PC_ERR_TYPE, "%s is %s, the quantized data %s", name, pc_dtype_name(z->type.dtype), pc_dtype_name(dt)), NULL;
  if (!ms_one(z)) return ox_fail(c, PC_ERR_SHAPE, "%s must be a scalar or a 1-element tensor", name), NULL;
  return ox_reshape(c, z, 0, NULL);
}

/* the quantized type of x (u8 or i8; u16 too when wide) */
static int ms_qtype(ox_ctx *c, const pc_value *x, const char *name, int wide) {
  if (!x) return 0;
  pc_dtype dt = x->type.dtype;
  if (dt == PC_u8 || dt == PC_i8 || (wide && dt == PC_u16)) return 1;
  ox_fail(c, PC_ERR_TYPE, "%s must be uint8 or int8%s, not %s", name, wide ? " (or uint16)" : "", pc_dtype_name(dt));
  return 0;
}

/* scale * (x - zp) in float32 (zp NULL: 0) */
static pc_value *ms_deq(ox_ctx *c, pc_value *x, pc_value *s, pc_value *zp) {
  if (!x || !s) return NULL;
  pc_value *d = zp ? ox_binary(c, PC_OP_sub, pc_convert(G, x, PC_i32), pc_convert(G, zp, PC_i32)) : x;
  return ox_binary(c, PC_OP_mul, pc_convert(G, d, PC_f32), s);
}

/* round-half-even(v / s) + zp, saturated to dt */
static pc_value *ms_quant(ox_ctx *c, pc_value *v, pc_value *s, pc_value *zp, pc_dtype dt) {
  const q_range *q = q_range_of(c, dt);
  return v && s && q ? q_saturate(c, ox_binary(c, PC_OP_div, v, s), zp, q) : NULL;
}

/* QLinearAdd, QLinearMul: (A, A_scale, A_zero_point, B, B_scale, B_zero_point, C_scale, C_zero_point), numpy
 * broadcasting; (dequant(A) op dequant(B)) / C_scale rounded (MLAS's QLinearAdd/QLinearMul) */
static pc_status ms_binary(ox_ctx *c, pc_op op) {
  pc_value *a = ms_req(c, 0, "A"), *as = ms_scale(c, 1, "A_scale"), *b = ms_req(c, 3, "B"),
           *bs = ms_scale(c, 4, "B_scale"), *cs = ms_scale(c, 6, "C_scale");
  if (!a || !as || !b || !bs || !cs || !ms_qtype(c, a, "A", op == PC_OP_add)) return ox_status(c);
  pc_dtype dt = a->type.dtype;
  if (b->type.dtype != dt) return ox_fail(c, PC_ERR_TYPE, "A is %s, B %s", pc_dtype_name(dt), pc_dtype_name(b->type.dtype));
  pc_value *az = ms_zp(c, 2, "A_zero_point", dt), *bz = ms_zp(c, 5, "B_zero_point", dt), *cz = ms_zp(c, 7, "C_zero_point", dt);
  if (ox_status(c) != PC_OK) return ox_status(c);
  pc_value *v = ox_binary(c, op, ms_deq(c, a, as, az), ms_deq(c, b, bs, bz));
  return ox_out(c, 0, ms_quant(c, v, cs, cz, dt));
}

pc_status ox_op_ms_QLinearAdd(ox_ctx *c) { return ms_binary(c, PC_OP_add); }
pc_status ox_op_ms_QLinearMul(ox_ctx *c) { return ms_binary(c, PC_OP_mul); }

/* QLinearConcat: (Y_scale, Y_zero_point, then (X, X_scale, X_zero_point) per input), axis: each input requantized
 * to Y's scale and zero point (ONNX Runtime's lookup table of the same float32 arithmetic), then concatenated */
pc_status ox_op_ms_QLinearConcat(ox_ctx *c) {
  pc_value *ys = ms_scale(c, 0, "Y_scale"), *yzr = ms_req(c, 1, "Y_zero_point");
  if (!ys || !yzr || !ms_qtype(c, yzr, "Y_zero_point", 0)) return ox_status(c);
  if (c->n_in < 5 || (c->n_in - 2) % 3)
    return ox_fail(c, PC_ERR_ATTR, "inputs must be Y_scale, Y_zero_point, then (X, X_scale, X_zero_point) triples; the node has %d", c->n_in);
  if (!ox_has_attr(c, "axis")) return ox_fail(c, PC_ERR_ATTR, "attribute axis is required");
  pc_dtype dt = yzr->type.dtype;
  pc_value *yz = ms_zp(c, 1, "Y_zero_point", dt);
  int n = (c->n_in - 2) / 3;
  pc_value **parts = calloc((size_t)n, sizeof *parts);
  if (!parts) return ox_fail(c, PC_ERR_NOMEM, "out of memory");
  for (int k = 0; k < n && ox_status(c) == PC_OK; k++) {
    int i = 2 + 3 * k;
    pc_value *x = ms_req(c, i, "X"), *xs = ms_scale(c, i + 1, "X_scale"), *xz = ms_zp(c, i + 2, "X_zero_point", dt);
    if (!x || !xs || ox_status(c) != PC_OK) break;
    if (x->type.dtype != dt) {
      ox_fail(c, PC_ERR_TYPE, "input %d is %s, Y_zero_point %s", i, pc_dtype_name(x->type.dtype), pc_dtype_name(dt));
      break;
    }
    /* the same scale and zero point as Y's: a copy (requantizing would give the same values) */
    int same = ox_in(c, i + 1) == ox_in(c, 0) && ox_in(c, i + 2) == ox_in(c, 1);
    parts[k] = same ? x : ms_quant(c, ms_deq(c, x, xs, xz), ys, yz, dt);
  }
  pc_value *y = ox_status(c) == PC_OK ? call_op(c, ox_op_Concat, parts, n) : NULL;
  free(parts);
  return y ? ox_out(c, 0, y) : ox_status(c);
}

/* the permutation taking channels-last [N, d..., C] to [N, C, d...] (to_first) or back */
static pc_value *ms_channels(ox_ctx *c, pc_value *x, int to_first) {
  if (!x) return NULL;
  int r = x->type.rank;
  int64_t perm[PC_MAX_RANK];
  perm[0] = 0;
  for (int i = 1; i < r; i++) perm[i] = to_first ? (i == 1 ? r - 1 : i - 1) : (i == r - 1 ? 1 : i + 1);
  return pc_transpose(G, x, perm);
}

/* the (X, x_scale, x_zero_point, y_scale, y_zero_point) inputs of the quantized pools, X of rank >= 3; 0 after a
 * failure named on the node */
typedef struct ms_pool_in {
  pc_value *x, *xs, *xz, *ys, *yz;
} ms_pool_in;

static int ms_pool_inputs(ox_ctx *c, ms_pool_in *in) {
  in->x = ms_req(c, 0, "X"), in->xs = ms_scale(c, 1, "x_scale"), in->ys = ms_scale(c, 3, "y_scale");
  if (!in->x || !in->xs || !in->ys || !check_static(c, in->x) || !ms_qtype(c, in->x, "X", 0)) return 0;
  in->xz = ms_zp(c, 2, "x_zero_point", in->x->type.dtype), in->yz = ms_zp(c, 4, "y_zero_point", in->x->type.dtype);
  if (ox_status(c) != PC_OK) return 0;
  if (in->x->type.rank < 3)
    return ox_fail(c, PC_ERR_SHAPE, "X has rank %d, needs [N, C, spatial...] (rank >= 3)", in->x->type.rank), 0;
  return 1;
}

/* QLinearGlobalAveragePool: (X, x_scale, x_zero_point, y_scale, y_zero_point), channels_last. MLAS sums the
 * integers of each channel's map exactly, less x_zero_point * size, and requantizes the sum by
 * x_scale / (y_scale * size) */
pc_status ox_op_ms_QLinearGlobalAveragePool(ox_ctx *c) {
  ms_pool_in in;
  int cl = ox_attr_flag(c, "channels_last", 0);
  if (!ms_pool_inputs(c, &in)) return ox_status(c);
  pc_value *x = in.x, *xs = in.xs, *ys = in.ys, *xz = in.xz, *yz = in.yz;
  pc_dtype dt = x->type.dtype;
  int r = x->type.rank;
  int64_t axes[PC_MAX_RANK], size = 1;
  for (int i = 0; i < r - 2; i++) axes[i] = cl ? i + 1 : i + 2, size *= x->type.dims[axes[i]];
  if (size <= 0 || size >= (1 << 24)) return ox_fail(c, PC_ERR_SHAPE, "the pooled map has %lld elements (1..2^24)", (long long)size);
  pc_value *acc = ox_reduce(c, PC_OP_reduce_sum, pc_convert(G, x, PC_i32), r - 2, axes, 1);
  if (xz) acc = ox_binary(c, PC_OP_sub, acc, ox_binary(c, PC_OP_mul, pc_convert(G, xz, PC_i32), scalar(c, PC_i32, (double)size)));
  pc_value *s = ox_binary(c, PC_OP_div, xs, ox_binary(c, PC_OP_mul, ys, scalar(c, PC_f32, (double)size)));
  pc_value *v = ox_binary(c, PC_OP_mul, pc_convert(G, acc, PC_f32), s);
  return ox_out(c, 0, q_saturate(c, v, yz, q_range_of(c, dt)));
}

/* QLinearAveragePool: (X, x_scale, x_zero_point, y_scale, y_zero_point), AveragePool's attributes and
 * channels_last: the float32 average pool of the dequantized input, quantized as ONNX Runtime's kernel does
 * (the zero point added before rounding: round-half-even(y / y_scale + y_zero_point), saturated) */
pc_status ox_op_ms_QLinearAveragePool(ox_ctx *c) {
  ms_pool_in q;
  int cl = ox_attr_flag(c, "channels_last", 0);
  if (!ms_pool_inputs(c, &q)) return ox_status(c);
  pc_dtype dt = q.x->type.dtype;
  pc_value *ys = q.ys, *yz = q.yz, *in[1] = {ms_deq(c, q.x, q.xs, q.xz)};
  if (cl) in[0] = ms_channels(c, in[0], 1);
  pc_value *p = in[0] ? call_op(c, ox_op_AveragePool, in, 1) : NULL;
  if (cl) p = ms_channels(c, p, 0);
  pc_value *v = p ? ox_binary(c, PC_OP_div, p, ys) : NULL;
  if (v && yz) v = ox_binary(c, PC_OP_add, v, pc_convert(G, yz, PC_f32));
  return ox_out(c, 0, v ? q_saturate(c, v, NULL, q_range_of(c, dt)) : NULL);
}

/* QLinearSigmoid, QLinearLeakyRelu: (X, X_scale, X_zero_point, Y_scale, Y_zero_point); ONNX Runtime builds a
 * table of the 256 inputs' results with the same float32 arithmetic, so elementwise gives the same values */
static pc_status ms_activation(ox_ctx *c, int leaky) {
  pc_value *x = ms_req(c, 0, "X"), *xs = ms_scale(c, 1, "X_scale"), *ys = ms_scale(c, 3, "Y_scale");
  if (!x || !xs || !ys || !ms_qtype(c, x, "X", 0)) return ox_status(c);
  pc_dtype dt = x->type.dtype;
  pc_value *xz = ms_zp(c, 2, "X_zero_point", dt), *yz = ms_zp(c, 4, "Y_zero_point", dt);
  if (ox_status(c) != PC_OK) return ox_status(c);
  pc_value *v = ms_deq(c, x, xs, xz);
  if (leaky && v) {
    float alpha = (float)ox_attr_float(c, "alpha", 0.01);
    pc_value *zero = pc_full_like(G, 0, v), *neg = ox_binary(c, PC_OP_mul, v, scalar(c, PC_f32, alpha));
    v = neg ? pc_where(G, pc_ge(G, v, zero), v, neg) : NULL;
  } else if (v) {
    v = pc_sigmoid(G, v);
  }
  return ox_out(c, 0, ms_quant(c, v, ys, yz, dt));
}

pc_status ox_op_ms_QLinearSigmoid(ox_ctx *c) { return ms_activation(c, 0); }
pc_status ox_op_ms_QLinearLeakyRelu(ox_ctx *c) { return ms_activation(c, 1); }

/* QLinearSoftmax: (X, X_scale, X_zero_point, Y_scale, Y_zero_point), axis, opset (below 13: over the dims from axis
 * on, as Softmax-1 flattens them; from 13 over axis alone). As ONNX Runtime's CPU kernel: with D the reduced
 * length, shift = max(0, ln(FLT_MAX / D) - 5) / X_scale; each x's term is the float32 of
 * exp((x - max + shift) X_scale) (its table, in double); the row's sum of them in float32; y = round half even of
 * term * floor(1 / Y_scale) / sum, in float32, plus Y_zero_point, saturated. X_zero_point cancels out. */
pc_status ox_op_ms_QLinearSoftmax(ox_ctx *c) {
  pc_value *x = ms_req(c, 0, "X"), *xs = ms_scale(c, 1, "X_scale"), *ys = ms_scale(c, 3, "Y_scale");
  if (!x || !xs || !ys || !ms_qtype(c, x, "X", 0) || !check_static(c, x)) return ox_status(c);
  pc_dtype dt = x->type.dtype;
  pc_value *yz = ms_zp(c, 4, "Y_zero_point", dt);
  int64_t opset = ox_attr_int(c, "opset", -1), rank = x->type.rank;
  if (opset < 1) return ox_fail(c, PC_ERR_ATTR, "attribute opset is required");
  int64_t axis = ox_axis(c, ox_attr_int(c, "axis", opset < 13 ? 1 : -1), (int)rank), axes[PC_MAX_RANK];
  if (axis < 0 || ox_status(c) != PC_OK) return ox_status(c);
  int n = 0;
  double d_len = 1;
  for (int64_t a = axis; a < (opset < 13 ? rank : axis + 1); a++) axes[n++] = a, d_len *= (double)x->type.dims[a];
  if (d_len < 1) return ox_out(c, 0, x);
  /* as ONNX Runtime computes it: FLT_MAX / D in float32, its log in double */
  double shift = fmax(0.0, log((double)(FLT_MAX / (float)d_len)) - 5);
  pc_value *xi = pc_convert(G, x, PC_i32);
  pc_value *mx = ox_reduce(c, PC_OP_reduce_max, xi, n, axes, 1);
  pc_value *d = pc_convert(G, ox_binary(c, PC_OP_sub, xi, mx), PC_f64), *s64 = pc_convert(G, xs, PC_f64);
  pc_value *t = ox_binary(c, PC_OP_add, d, ox_binary(c, PC_OP_div, scalar(c, PC_f64, shift), s64));
  pc_value *e = pc_convert(G, pc_exp(G, ox_binary(c, PC_OP_mul, t, s64)), PC_f32);
  pc_value *sum = ox_reduce(c, PC_OP_reduce_sum, e, n, axes, 1);
  pc_value *inv = pc_floor(G, ox_binary(c, PC_OP_div, scalar(c, PC_f32, 1), ys));
  pc_value *v = ox_binary(c, PC_OP_div, ox_binary(c, PC_OP_mul, e, inv), sum);
  v = v ? pc_round(G, v) : NULL;
  if (v && yz) v = ox_binary(c, PC_OP_add, v, pc_convert(G, yz, PC_f32));
  return ox_out(c, 0, v ? q_saturate(c, v, NULL, q_range_of(c, dt)) : NULL);
}

/* QGemm: (A, a_scale, a_zero_point, B, b_scale, b_zero_point, C, y_scale, y_zero_point), transA, transB, alpha.
 * The int32 product of (A - a_zero_point) and (B - b_zero_point) plus C (int32), scaled by
 * alpha * a_scale * b_scale (per column when b_scale is) / y_scale in float32: quantized to y_zero_point's type,
 * or float32 when y_scale is absent */
pc_status ox_op_ms_QGemm(ox_ctx *c) {
  pc_value *a = ms_req(c, 0, "A"), *as = ms_scale(c, 1, "a_scale"), *b = ms_req(c, 3, "B"), *bs = ms_req(c, 4, "b_scale"),
           *cc = ox_in(c, 6), *ys = ox_in(c, 7) ? ms_scale(c, 7, "y_scale") : NULL;
  if (!a || !as || !b || !bs || ox_status(c) != PC_OK || !check_static(c, a) || !check_static(c, b) ||
      !ms_qtype(c, a, "A", 0) || !ms_qtype(c, b, "B", 0))
    return ox_status(c);
  if (a->type.rank != 2 || b->type.rank != 2) return ox_fail(c, PC_ERR_SHAPE, "A and B must be 2-D");
  int64_t t[2] = {1, 0};
  if (ox_attr_flag(c, "transA", 0)) a = pc_transpose(G, a, t);
  if (ox_attr_flag(c, "transB", 0)) b = pc_transpose(G, b, t);
  if (!a || !b) return ox_status(c);
  int64_t M = a->type.dims[0], K = a->type.dims[1], N = b->type.dims[1];
  if (b->type.dims[0] != K)
    return ox_fail(c, PC_ERR_SHAPE, "A is [%lld, %lld], B [%lld, %lld]: inner dims differ", (long long)M, (long long)K,
                   (long long)b->type.dims[0], (long long)N);
  pc_value *az = ms_zp(c, 2, "a_zero_point", a->type.dtype), *bz = ox_in(c, 5), *yz = ox_in(c, 8);
  if (ox_status(c) != PC_OK) return ox_status(c);
  int per_col = !ms_one(bs);
  if (bs->type.dtype != PC_f32) return ox_fail(c, PC_ERR_TYPE, "b_scale must be float32, not %s", pc_dtype_name(bs->type.dtype));
  if (per_col && (bs->type.rank != 1 || bs->type.dims[0] != N))
    return ox_fail(c, PC_ERR_SHAPE, "b_scale must be a scalar or have N = %lld entries", (long long)N);
  if (bz && (bz->type.dtype != b->type.dtype || !(ms_one(bz) || (bz->type.rank == 1 && bz->type.dims[0] == N))))
    return ox_fail(c, PC_ERR_SHAPE, "b_zero_point must be a scalar or have N = %lld entries of B's type", (long long)N);
  if (cc && cc->type.dtype != PC_i32) return ox_fail(c, PC_ERR_TYPE, "C must be int32, not %s", pc_dtype_name(cc->type.dtype));
  if (yz && !ys) return ox_fail(c, PC_ERR_ATTR, "y_zero_point is given without y_scale");
  pc_dtype ydt = yz ? yz->type.dtype : a->type.dtype;
  if (yz && !ms_qtype(c, yz, "y_zero_point", 0)) return ox_status(c);
  if (yz && !ms_one(yz)) return ox_fail(c, PC_ERR_SHAPE, "y_zero_point must be a scalar or a 1-element tensor");
  pc_value *in[2] = {int_shift(c, a, az, 2), int_shift(c, b, bz && ms_one(bz) ? ox_reshape(c, bz, 0, NULL) : bz, 1)};
  if (!in[0] || !in[1]) return ox_status(c);
  pc_value *acc = call_op(c, ox_op_MatMul, in, 2);
  if (acc && cc) {
    pc_value *sum = ox_binary(c, PC_OP_add, acc, cc);
    if (sum && !pc_type_equal(&sum->type, &acc->type)) return ox_fail(c, PC_ERR_SHAPE, "C does not broadcast to [M, N] = [%lld, %lld]", (long long)M, (long long)N);
    acc = sum;
  }
  pc_value *s = ox_binary(c, PC_OP_mul, ox_binary(c, PC_OP_mul, scalar(c, PC_f32, (float)ox_attr_float(c, "alpha", 1.0)), as),
                          per_col ? bs : ox_reshape(c, bs, 0, NULL));
  if (ys) s = ox_binary(c, PC_OP_div, s, ys);
  pc_value *v = acc ? ox_binary(c, PC_OP_mul, pc_convert(G, acc, PC_f32), s) : NULL;
  if (!ys) return ox_out(c, 0, v);
  return ox_out(c, 0, q_saturate(c, v, yz ? ox_reshape(c, yz, 0, NULL) : NULL, q_range_of(c, ydt)));
}

/* QLinearConv of com.microsoft (ONNX Runtime's NHWC transformer writes it): ai.onnx's QLinearConv, on a
 * channels-last X and Y when channels_last = 1 (W stays [M, C/group, k...]) */
pc_status ox_op_ms_QLinearConv(ox_ctx *c) {
  if (!ox_attr_flag(c, "channels_last", 0)) return ox_status(c) != PC_OK ? ox_status(c) : ox_op_QLinearConv(c);
  pc_value *x = ms_req(c, 0, "X");
  if (!x || !check_static(c, x)) return ox_status(c);
  if (x->type.rank < 3) return ox_fail(c, PC_ERR_SHAPE, "X has rank %d, needs [N, spatial..., C] (rank >= 3)", x->type.rank);
  pc_value **in = calloc((size_t)c->n_in, sizeof *in);
  if (!in) return ox_fail(c, PC_ERR_NOMEM, "out of memory");
  for (int i = 0; i < c->n_in; i++) in[i] = c->in[i];
  in[0] = ms_channels(c, x, 1);
  pc_value *y = in[0] ? call_op(c, ox_op_QLinearConv, in, c->n_in) : NULL;
  free(in);
  return y ? ox_out(c, 0, ms_channels(c, y, 0)) : ox_status(c);
}
