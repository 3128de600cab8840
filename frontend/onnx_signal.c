/* frontend/onnx_signal.c: decompositions of the ONNX signal ops into prims: DFT, STFT, the windows (Hann,
 * Hamming, Blackman) and MelWeightMatrix. */
#include "frontend/onnx_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define G (c->g)

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
  if (!ox_check_rank(c, x, 2, PC_MAX_RANK) || !ox_check_static_input(c, x) || !ox_require_float(c, x)) return ox_status(c);
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
  if (!ox_check_rank(c, x, 3, 3) || !ox_check_static_input(c, x) || !ox_require_float(c, x)) return ox_status(c);
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
  pc_value *ix = ox_along(c, pc_const(G, pc_type_make(PC_i64, 1, &n), idx), 3, gshape, 1);
  free(idx);
  pc_attr a = pc_a_int("axis", 1);
  pc_value *xf = pc_convert(G, x, PC_f32), *gin[2] = {xf, ix};
  pc_value *frames = xf && ix ? pc_reshape(G, pc_build(G, PC_OP_gather, gin, 2, &a, 1), 4, fshape) : NULL;
  if (win && frames) frames = pc_mul(G, frames, ox_along(c, pc_convert(G, win, PC_f32), 4, fshape, 2));
  int onesided = ox_attr_flag(c, "onesided", 1);
  return ox_out(c, 0, pc_convert(G, dft_core(c, frames, fl, 0, onesided), x->type.dtype));
}

/* ---------------------------------------------------------------- windows (opset 17) */

typedef enum { WIN_HANN, WIN_HAMMING, WIN_BLACKMAN } win_kind;

static double win_value(win_kind k, double n, double N) {
  const double pi = 3.14159265358979323846;
  switch (k) { /* the three cosine-sum windows of the spec */
  case WIN_HANN: return sin(pi * n / N) * sin(pi * n / N);
  case WIN_HAMMING: return 25.0 / 46.0 - (21.0 / 46.0) * cos(2 * pi * n / N);
  case WIN_BLACKMAN: return 0.42 - 0.5 * cos(2 * pi * n / N) + 0.08 * cos(4 * pi * n / N);
  }
  return 0;
}

static pc_status window_op(ox_ctx *c, win_kind k) {
  int64_t size;
  if (ox_const_ints(c, 0, &size, 1) != 1) return ox_status(c) ? ox_status(c) : ox_fail(c, PC_ERR_ATTR, "size must be a scalar");
  if (size < 0 || size > ((int64_t)1 << 24)) return ox_fail(c, PC_ERR_RANGE, "window size %lld is out of range", (long long)size);
  pc_dtype dt;
  if (!ox_attr_dtype(c, "output_datatype", PC_f32, &dt)) return ox_status(c);
  double N = ox_attr_int(c, "periodic", 1) ? (double)size : (double)(size - 1);
  double *v = malloc(sizeof *v * (size_t)(size ? size : 1));
  if (!v) return ox_fail(c, PC_ERR_NOMEM, "out of memory");
  for (int64_t i = 0; i < size; i++) v[i] = win_value(k, (double)i, N);
  pc_value *w = pc_convert(G, pc_const(G, pc_type_make(PC_f64, 1, &size), v), dt);
  free(v);
  return ox_out(c, 0, w);
}

pc_status ox_op_HannWindow(ox_ctx *c) { return window_op(c, WIN_HANN); }
pc_status ox_op_HammingWindow(ox_ctx *c) { return window_op(c, WIN_HAMMING); }
pc_status ox_op_BlackmanWindow(ox_ctx *c) { return window_op(c, WIN_BLACKMAN); }

/* ---------------------------------------------------------------- MelWeightMatrix */

#define MEL_MAX_ELEMS ((int64_t)1 << 22)

/* a frequency in hertz on the mel scale, in float32 like the reference's float inputs */
static float hz_to_mel(float hz) { return 2595.0f * (float)log1p(hz / 700.0f) / (float)log(10.0); }

/* the triangular filter bank [dft_length / 2 + 1, num_mel_bins]: a constant of the (compile-time) inputs */
pc_status ox_op_MelWeightMatrix(ox_ctx *c) {
  int64_t bins, dft, rate;
  double lo_hz, hi_hz;
  if (ox_const_ints(c, 0, &bins, 1) != 1 || ox_const_ints(c, 1, &dft, 1) != 1 || ox_const_ints(c, 2, &rate, 1) != 1 ||
      ox_const_floats(c, 3, &lo_hz, 1) != 1 || ox_const_floats(c, 4, &hi_hz, 1) != 1)
    return ox_status(c) != PC_OK ? ox_status(c) : ox_fail(c, PC_ERR_ATTR, "all five inputs are required scalars");
  int64_t rows = dft / 2 + 1;
  if (bins < 1 || dft < 1 || rate < 1 || rows * bins > MEL_MAX_ELEMS) return ox_fail(c, PC_ERR_ATTR, "bad sizes");
  pc_dtype dt;
  if (!ox_attr_dtype(c, "output_datatype", PC_f32, &dt)) return ox_status(c);
  float lo_mel = hz_to_mel((float)lo_hz), hi_mel = hz_to_mel((float)hi_hz), step = (hi_mel - lo_mel) / (float)(bins + 2);
  int64_t *f = pc_alloc(G, sizeof *f * (size_t)(bins + 2));
  double *w = pc_alloc(G, sizeof *w * (size_t)(rows * bins));
  if (!f || !w) return ox_status(c);
  for (int64_t i = 0; i < bins + 2; i++) { /* bin edges in DFT bins */
    double hz = 700.0 * expm1(((double)i * step + lo_mel) / 2595.0 * log(10.0));
    f[i] = (int64_t)floor((double)(dft + 1) * hz / (double)rate);
  }
  for (int64_t i = 0; i < bins; i++) {
    int64_t l = f[i], m = f[i + 1], h = f[i + 2];
    if (l < 0 || h >= rows || m < l || h < m) return ox_fail(c, PC_ERR_RANGE, "mel band %lld falls outside the DFT bins", (long long)i);
    if (m == l) w[m * bins + i] = 1;
    for (int64_t j = l; m > l && j <= m; j++) w[j * bins + i] = (double)(j - l) / (double)(m - l);
    for (int64_t j = m; h > m && j < h; j++) w[j * bins + i] = (double)(h - j) / (double)(h - m);
  }
  int64_t shape[2] = {rows, bins};
  return ox_out(c, 0, pc_convert(G, pc_const(G, pc_type_make(PC_f64, 2, shape), w), dt));
}
