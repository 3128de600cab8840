/* frontend/onnx_resample.c: decompositions of the ONNX resampling ops into prims: Resize, Upsample, GridSample
 * and AffineGrid. */
#include "frontend/onnx_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define G (c->g)

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
  pc_value *gin[2] = {x, ox_along(c, ix, x->type.rank, shape, axis)};
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
    if (!unit) t = pc_mul(G, t, ox_along(c, ox_const_of(c, x->type.dtype, 1, &out, w + j * out), r, shape, axis));
    y = y ? pc_add(G, y, t) : t;
  }
  if (y && any_out) {
    pc_value *m = pc_convert(G, ox_const_of(c, PC_f32, 1, &out, mask), PC_bool);
    y = pc_where(G, ox_along(c, m, r, shape, axis), ox_like(c, o->extrap, y), y);
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
  if (!ox_check_static_input(c, x)) return 0;
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

/* ---------------------------------------------------------------- GridSample (opset 16+) */

enum { GS_ZEROS, GS_BORDER, GS_REFLECT };
enum { GS_MAX_DIMS = 3, GS_MAX_TAPS = 4 };

/* folds v into [lo, hi] by reflecting at the borders (the reference's _gs_reflect) */
static pc_value *gs_reflect(ox_ctx *c, pc_value *v, double lo, double hi) {
  double rng = hi - lo;
  pc_value *dlo = ox_binary_s(c, PC_OP_sub, pc_neg(G, v), -lo), *dhi = ox_binary_s(c, PC_OP_sub, v, hi);
  pc_value *nlo = pc_floor(G, ox_binary_s(c, PC_OP_div, dlo, rng)), *nhi = pc_floor(G, ox_binary_s(c, PC_OP_div, dhi, rng));
  pc_value *rlo = ox_binary(c, PC_OP_sub, dlo, ox_binary_s(c, PC_OP_mul, nlo, rng));
  pc_value *rhi = ox_binary(c, PC_OP_sub, dhi, ox_binary_s(c, PC_OP_mul, nhi, rng));
  pc_value *elo = ox_binary_s(c, PC_OP_eq, ox_binary_s(c, PC_OP_rem, nlo, 2), 0), *ehi = ox_binary_s(c, PC_OP_eq, ox_binary_s(c, PC_OP_rem, nhi, 2), 0);
  pc_value *below = ox_where(c, elo, ox_binary_s(c, PC_OP_add, rlo, lo), pc_neg(G, ox_binary_s(c, PC_OP_sub, rlo, hi)));
  pc_value *above = ox_where(c, ehi, pc_neg(G, ox_binary_s(c, PC_OP_sub, rhi, hi)), ox_binary_s(c, PC_OP_add, rhi, lo));
  return ox_where(c, ox_binary_s(c, PC_OP_lt, v, lo), below, ox_where(c, ox_binary_s(c, PC_OP_gt, v, hi), above, v));
}

/* Keys cubic weight k (0..3) of the tap at offset k-1 from floor, t the fraction */
static pc_value *gs_cubic(ox_ctx *c, pc_value *t, int k) {
  const double A = -0.75;
  pc_value *u = k == 0 ? ox_binary_s(c, PC_OP_add, t, 1) : k == 1 ? t : k == 2 ? pc_neg(G, ox_binary_s(c, PC_OP_sub, t, 1)) : pc_neg(G, ox_binary_s(c, PC_OP_sub, t, 2));
  if (k == 1 || k == 2) /* ((A+2)u - (A+3)) u^2 + 1 */
    return ox_binary_s(c, PC_OP_add, pc_mul(G, ox_binary_s(c, PC_OP_sub, ox_binary_s(c, PC_OP_mul, u, A + 2), A + 3), pc_mul(G, u, u)), 1);
  /* ((A u - 5A) u + 8A) u - 4A */
  pc_value *p = ox_binary_s(c, PC_OP_add, pc_mul(G, ox_binary_s(c, PC_OP_sub, ox_binary_s(c, PC_OP_mul, u, A), 5 * A), u), 8 * A);
  return ox_binary_s(c, PC_OP_sub, pc_mul(G, p, u), 4 * A);
}

typedef struct gs_dim {
  int64_t L;
  double lo, hi;               /* the border of the coordinate range */
  pc_value *idx[GS_MAX_TAPS];  /* i64 tap index, in range */
  pc_value *ok[GS_MAX_TAPS];   /* bool: the tap is inside (zeros padding), else NULL */
  pc_value *w[GS_MAX_TAPS];    /* tap weight, NULL for nearest */
} gs_dim;

/* a tap at float position p resolved by the padding mode into an index and a validity mask */
static void gs_tap(ox_ctx *c, gs_dim *d, int k, pc_value *p, int pad) {
  if (pad == GS_REFLECT) p = gs_reflect(c, p, d->lo, d->hi);
  d->ok[k] = pad == GS_ZEROS ? ox_binary(c, PC_OP_and, ox_binary_s(c, PC_OP_ge, p, 0), ox_binary_s(c, PC_OP_lt, p, (double)d->L)) : NULL;
  pc_value *i = pc_convert(G, p, PC_i64); /* truncates, as the reference's int() */
  d->idx[k] = i ? pc_clamp(G, i, pc_full_like(G, 0, i), pc_full_like(G, (double)(d->L - 1), i)) : NULL;
}

pc_status ox_op_GridSample(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0), *grid = ox_in_req(c, 1);
  if (!ox_check_static_input(c, x) || !ox_check_static_input(c, grid) || !ox_require_float(c, x)) return ox_status(c);
  int r = x->type.rank, k = r - 2;
  if (k < 1 || k > GS_MAX_DIMS || grid->type.rank != r || grid->type.dims[r - 1] != k || grid->type.dims[0] != x->type.dims[0])
    return ox_fail(c, PC_ERR_SHAPE, "X must be [N, C, D1..Dk] (k <= %d) and grid [N, O1..Ok, k]", GS_MAX_DIMS);
  const char *mode = ox_attr_str(c, "mode", c->opset >= 20 ? "linear" : "bilinear"), *pm = ox_attr_str(c, "padding_mode", "zeros");
  int taps = !strcmp(mode, "nearest") ? 1 : (!strcmp(mode, "linear") || !strcmp(mode, "bilinear")) ? 2 : (!strcmp(mode, "cubic") || !strcmp(mode, "bicubic")) ? 4 : 0;
  int pad = !strcmp(pm, "zeros") ? GS_ZEROS : !strcmp(pm, "border") ? GS_BORDER : !strcmp(pm, "reflection") ? GS_REFLECT : -1;
  if (!taps || pad < 0) return ox_fail(c, PC_ERR_ATTR, "mode '%s' / padding_mode '%s' is not supported", mode, pm);
  int align = ox_attr_int(c, "align_corners", 0) != 0;
  pc_dtype T = x->type.dtype;
  grid = pc_convert(G, grid, T);
  const int64_t *gd = grid->type.dims;
  int64_t N = x->type.dims[0], C = x->type.dims[1], Q = 1, P = 1;
  for (int i = 1; i < r - 1; i++) Q *= gd[i];
  for (int i = 0; i < k; i++) P *= x->type.dims[2 + i];
  gs_dim dims[GS_MAX_DIMS];
  for (int i = 0; i < k; i++) {
    gs_dim *d = &dims[i];
    d->L = x->type.dims[2 + i];
    d->lo = align ? 0 : -0.5, d->hi = align ? (double)d->L - 1 : (double)d->L - 0.5;
    int64_t st[PC_MAX_RANK] = {0}, lim[PC_MAX_RANK], one[PC_MAX_RANK];
    for (int j = 0; j < r; j++) lim[j] = gd[j], one[j] = 1;
    st[r - 1] = k - 1 - i, lim[r - 1] = k - i; /* grid's last dim lists the coordinates innermost first */
    pc_value *u = ox_reshape(c, pc_slice(G, grid, st, lim, one), 2, (int64_t[]){N, Q});
    pc_value *v = align ? ox_binary_s(c, PC_OP_mul, ox_binary_s(c, PC_OP_add, u, 1), ((double)d->L - 1) / 2)
                        : ox_binary_s(c, PC_OP_div, ox_binary_s(c, PC_OP_sub, ox_binary_s(c, PC_OP_mul, ox_binary_s(c, PC_OP_add, u, 1), (double)d->L), 1), 2);
    if (taps == 1) v = pc_round(G, v);
    if (pad == GS_BORDER) v = pc_clamp(G, v, pc_full_like(G, 0, v), pc_full_like(G, (double)d->L - 1, v));
    else if (pad == GS_REFLECT) v = gs_reflect(c, v, d->lo, d->hi);
    if (taps == 1) {
      gs_tap(c, d, 0, v, pad);
      d->w[0] = NULL;
      continue;
    }
    pc_value *f = pc_floor(G, v), *t = ox_binary(c, PC_OP_sub, v, f);
    for (int j = 0; j < taps; j++) {
      int off = taps == 2 ? j : j - 1;
      gs_tap(c, d, j, ox_binary_s(c, PC_OP_add, f, off), pad);
      d->w[j] = taps == 2 ? (j ? t : pc_neg(G, ox_binary_s(c, PC_OP_sub, t, 1))) : gs_cubic(c, t, j);
    }
  }
  if (ox_status(c) != PC_OK) return ox_status(c);
  pc_value *xf = ox_reshape(c, x, 3, (int64_t[]){N, C, P}), *acc = NULL;
  int64_t s3[3] = {N, C, Q}, bd[2] = {0, 2};
  int combos = 1;
  for (int i = 0; i < k; i++) combos *= taps;
  for (int m = 0; m < combos; m++) {
    pc_value *flat = NULL, *ok = NULL, *w = NULL;
    for (int i = 0, rest = m; i < k; i++, rest /= taps) {
      gs_dim *d = &dims[k - 1 - i];
      int j = rest % taps;
      int64_t stride = 1;
      for (int q = k - i; q < k; q++) stride *= dims[q].L;
      pc_value *term = ox_binary_s(c, PC_OP_mul, d->idx[j], (double)stride);
      flat = flat ? pc_add(G, flat, term) : term;
      if (d->ok[j]) ok = ok ? pc_and(G, ok, d->ok[j]) : d->ok[j];
      if (d->w[j]) w = w ? pc_mul(G, w, d->w[j]) : d->w[j];
    }
    pc_value *gin[2] = {xf, pc_broadcast_in_dim(G, flat, 3, s3, bd)};
    pc_attr ax = pc_a_int("axis", 2);
    pc_value *val = gin[1] ? pc_build(G, PC_OP_gather, gin, 2, &ax, 1) : NULL;
    if (ok) val = ox_where(c, pc_broadcast_in_dim(G, ok, 3, s3, bd), val, ox_scalar(c, T, 0));
    if (w) val = pc_mul(G, val, pc_broadcast_in_dim(G, w, 3, s3, bd));
    acc = acc ? pc_add(G, acc, val) : val;
  }
  int64_t ys[PC_MAX_RANK] = {N, C};
  for (int i = 1; i < r - 1; i++) ys[1 + i] = gd[i];
  return ox_out(c, 0, ox_reshape(c, acc, r, ys));
}

/* ---------------------------------------------------------------- AffineGrid (opset 20) */

/* normalized coordinate i of a dim of length L, in [-1, 1] */
static double ag_coord(int64_t i, int64_t L, int align) {
  if (align) return L > 1 ? -1 + 2.0 * (double)i / (double)(L - 1) : -1;
  return -1 + (2.0 * (double)i + 1) / (double)L;
}

pc_status ox_op_AffineGrid(ox_ctx *c) {
  pc_value *theta = ox_in_req(c, 0);
  int64_t size[5];
  int n = ox_const_ints(c, 1, size, 5);
  if (!ox_check_static_input(c, theta) || n < 0 || !ox_require_float(c, theta)) return ox_status(c);
  int k = n - 2;
  if (k != 2 && k != 3) return ox_fail(c, PC_ERR_SHAPE, "size must be [N, C, H, W] or [N, C, D, H, W]");
  const int64_t *td = theta->type.dims;
  if (theta->type.rank != 3 || td[0] != size[0] || td[1] != k || td[2] != k + 1)
    return ox_fail(c, PC_ERR_SHAPE, "theta must be [%lld, %d, %d]", (long long)size[0], k, k + 1);
  int64_t P = 1;
  for (int i = 0; i < k; i++) {
    if (size[2 + i] < 1 || size[2 + i] > (1 << 20)) return ox_fail(c, PC_ERR_RANGE, "size entries must be in 1..2^20");
    P *= size[2 + i];
  }
  if (P > ((int64_t)1 << 24)) return ox_fail(c, PC_ERR_RANGE, "the grid has more than 2^24 points");
  /* homogeneous base grid [P, k+1]: (x, y[, z], 1) with x along the last spatial dim */
  int align = ox_attr_int(c, "align_corners", 0) != 0;
  double *base = malloc(sizeof *base * (size_t)(P * (k + 1)));
  if (!base) return ox_fail(c, PC_ERR_NOMEM, "out of memory");
  for (int64_t p = 0; p < P; p++) {
    int64_t rest = p;
    for (int j = 0; j < k; j++) { /* j = 0 is x, the fastest-varying dim */
      int64_t L = size[1 + k - j];
      base[p * (k + 1) + j] = ag_coord(rest % L, L, align);
      rest /= L;
    }
    base[p * (k + 1) + k] = 1;
  }
  pc_value *b = pc_const(G, pc_type_make(PC_f64, 2, (int64_t[]){P, k + 1}), base);
  free(base);
  int64_t lc = 2, rc = 1, perm[3] = {0, 2, 1}, ys[5] = {size[0]};
  pc_value *g = pc_dot_general(G, pc_convert(G, theta, PC_f64), b, 1, &lc, &rc, 0, NULL, NULL); /* [N, k, P] */
  for (int i = 0; i < k; i++) ys[1 + i] = size[2 + i];
  ys[1 + k] = k;
  return ox_out(c, 0, pc_convert(G, ox_reshape(c, pc_transpose(G, g, perm), k + 2, ys), theta->type.dtype));
}
