/* frontend/onnx_conv.c: decompositions of the ONNX convolutions into prims: Conv, ConvTranspose,
 * CausalConvWithState and Col2Im. */
#include "frontend/onnx_internal.h"

#include <string.h>

#define G (c->g)

/* ---------------------------------------------------------------- Conv, ConvTranspose */

static pc_value *add_bias(ox_ctx *c, pc_value *y, pc_value *b) {
  if (!y || !b) return y;
  return pc_add(G, y, ox_per_channel(c, b, y, "bias"));
}

pc_status ox_op_Conv(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0), *w = ox_in_req(c, 1), *b = ox_in(c, 2);
  if (!x || !w) return ox_status(c);
  if (w->type.rank != x->type.rank)
    return ox_fail(c, PC_ERR_SHAPE, "weight has rank %d, input has rank %d", w->type.rank, x->type.rank);
  ox_geom g;
  if (!ox_check_static_input(c, w) || !ox_geom_read(c, x, w->type.dims + 2, 0, &g)) return ox_status(c);
  int64_t groups = ox_attr_int(c, "group", 1), C = x->type.dims[1], O = w->type.dims[0];
  if (groups < 1 || C % groups || O % groups || w->type.dims[1] * groups != C)
    return ox_fail(c, PC_ERR_SHAPE, "input has %lld channels, weight [%lld, %lld, ...] does not fit group=%lld",
                   (long long)C, (long long)O, (long long)w->type.dims[1], (long long)groups);
  if (w->type.dtype != x->type.dtype) return ox_fail(c, PC_ERR_TYPE, "input and weight dtypes differ");
  int64_t ones[OX_NS_MAX] = {1, 1, 1, 1, 1, 1};
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
  if (!x || !w || !ox_check_static_input(c, x) || !ox_check_static_input(c, w) || !ox_check_rank(c, x, 3, PC_MAX_RANK - 1))
    return ox_status(c);
  int r = x->type.rank, ns = r - 2;
  if (w->type.rank != r) return ox_fail(c, PC_ERR_SHAPE, "weight has rank %d, input has rank %d", w->type.rank, r);
  int64_t groups = ox_attr_int(c, "group", 1), C = x->type.dims[1];
  if (groups < 1 || C % groups || w->type.dims[0] != C)
    return ox_fail(c, PC_ERR_SHAPE, "input has %lld channels, weight's first dim is %lld (group=%lld)", (long long)C,
                   (long long)w->type.dims[0], (long long)groups);
  int64_t s[OX_NS_MAX], d[OX_NS_MAX], op[OX_NS_MAX], pads[2 * OX_NS_MAX], oshape[PC_MAX_RANK], ks[OX_NS_MAX];
  if (!ox_attr_ints_n(c, "strides", s, ns, ns, 1) || !ox_attr_ints_n(c, "dilations", d, ns, ns, 1) ||
      !ox_attr_ints_n(c, "output_padding", op, ns, ns, 0) || !ox_attr_ints_n(c, "pads", pads, 2 * ns, 2 * ns, 0))
    return ox_status(c);
  int nk = ox_attr_ints(c, "kernel_shape", ks, OX_NS_MAX);
  for (int i = 0; nk == ns && i < ns; i++)
    if (ks[i] != w->type.dims[2 + i]) return ox_fail(c, PC_ERR_SHAPE, "kernel_shape does not match the weight's shape");
  int no = ox_attr_ints(c, "output_shape", oshape, PC_MAX_RANK);
  if (no == -2) return ox_status(c);
  const int64_t *os = no == ns ? oshape : no == ns + 2 ? oshape + 2 : NULL;
  if (no >= 0 && !os) return ox_fail(c, PC_ERR_ATTR, "output_shape has %d entries for %d spatial dims", no, ns);
  const char *ap = ox_attr_str(c, "auto_pad", "NOTSET");
  int same = strncmp(ap, "SAME_", 5) == 0;
  int64_t lo[OX_NS_MAX], hi[OX_NS_MAX], out[OX_NS_MAX];
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

/* ---------------------------------------------------------------- CausalConvWithState */

/* a depthwise causal conv1d over [past_state (zeros when absent), input]: output, and the last k-1
 * positions of that concatenation as the present state */
pc_status ox_op_CausalConvWithState(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0), *w = ox_in_req(c, 1), *b = ox_in(c, 2), *past = ox_in(c, 3);
  if (!x || !w || !ox_check_static_input(c, x) || !ox_check_static_input(c, w)) return ox_status(c);
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
  int64_t img[OX_NS_MAX], blk[OX_NS_MAX], dil[OX_NS_MAX], str[OX_NS_MAX], pads[2 * OX_NS_MAX];
  int ns = ox_const_ints(c, 1, img, OX_NS_MAX), nb = ox_const_ints(c, 2, blk, OX_NS_MAX);
  if (!x || ns < 0 || nb < 0 || !ox_check_static_input(c, x)) return ox_status(c);
  if (ns != nb || ns < 1 || x->type.rank != 3 || ns + 2 > PC_MAX_RANK)
    return ox_fail(c, PC_ERR_SHAPE, "needs input [N, C*prod(block), L] and image / block shapes of one length");
  if (!ox_attr_ints_n(c, "dilations", dil, ns, ns, 1) || !ox_attr_ints_n(c, "strides", str, ns, ns, 1) || !ox_attr_ints_n(c, "pads", pads, 2 * ns, 2 * ns, 0))
    return ox_status(c);
  int64_t K = 1, L = 1, N = x->type.dims[0], out_n[OX_NS_MAX];
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
