/* frontend/onnx_quant.c: quantized ops decomposed into prims: ai.onnx's QuantizeLinear, DequantizeLinear,
 * DynamicQuantizeLinear, MatMulInteger, ConvInteger, QLinearConv and QLinearMatMul, and com.microsoft's (ONNX
 * Runtime's contrib ops, as its CPU kernels compute them) QLinearAdd, QLinearMul, QLinearConcat,
 * QLinearGlobalAveragePool, QLinearAveragePool, QLinearSigmoid, QLinearLeakyRelu, QGemm, QLinearConv,
 * QuantizeLinear and DequantizeLinear. */
#include "frontend/onnx_internal.h"

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

pc_status ox_op_DynamicQuantizeLinear(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0);
  if (!check_static(c, x)) return ox_status(c);
  if (x->type.dtype != PC_f32) return ox_fail(c, PC_ERR_TYPE, "input must be float32");
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
  y = pc_convert(G, y ? pc_clamp(G, y, pc_full_like(G, 0, y), pc_full_like(G, 255, y)) : NULL, PC_u8);
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
