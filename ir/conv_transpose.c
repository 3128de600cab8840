/* ir/conv_transpose.c: the transposed convolution as prims, written once for ONNX's ConvTranspose and for the
 * gradient of a conv with respect to its input (passes/vjp_rules.c). */
#include "ir/ir.h"

#include <stdlib.h>

#define NS_MAX (PC_MAX_RANK - 2)

/* b [O] broadcast along dim 1 of a value shaped like y, added */
static pc_value *add_bias(pc_graph *g, pc_value *y, pc_value *b) {
  if (!y || !b) return y;
  int64_t one = 1;
  return pc_add(g, y, pc_broadcast_in_dim(g, b, y->type.rank, y->type.dims, &one));
}

/* the transposed conv's weight [C, O/g, k...] as a conv weight [O, C/g, k...], spatially flipped */
static pc_value *conv_weight(pc_graph *g, pc_value *w, int64_t groups) {
  int r = w->type.rank, ns = r - 2;
  int64_t C = w->type.dims[0], Og = w->type.dims[1], d5[PC_MAX_RANK + 1], perm[PC_MAX_RANK + 1], flip[NS_MAX];
  if (r + 1 > PC_MAX_RANK) return pc_fail(g, PC_ERR_UNSUPPORTED, "a transposed conv of %d spatial dims", ns), NULL;
  d5[0] = groups, d5[1] = C / groups, d5[2] = Og;
  for (int i = 0; i < ns; i++) d5[3 + i] = w->type.dims[2 + i], flip[i] = 2 + i;
  for (int i = 0; i < r + 1; i++) perm[i] = i;
  perm[1] = 2, perm[2] = 1;
  pc_value *t = pc_transpose(g, pc_reshape(g, w, r + 1, d5), perm);
  int64_t d4[PC_MAX_RANK];
  d4[0] = Og * groups, d4[1] = C / groups;
  for (int i = 0; i < ns; i++) d4[2 + i] = w->type.dims[2 + i];
  t = pc_reshape(g, t, r, d4);
  pc_attr a = pc_a_ints("dims", flip, ns);
  return t ? pc_build(g, PC_OP_rev, &t, 1, &a, 1) : NULL;
}

/* k = s with no padding, dilation or groups (the upsampling heads of U-Nets and text detectors): each input
 * pixel writes its own k-sized output tile, so the transposed conv is one GEMM [O k.., C] x [C, pixels] (the
 * weight as A, the input's maps as they lie as B) and one loop that interleaves the k-sized tiles into the
 * output with the bias added, instead of a conv over a zero-stuffed input */
static pc_value *tiles(pc_graph *g, pc_value *x, pc_value *w, pc_value *b) {
  int r = x->type.rank, ns = r - 2;
  int64_t lc = 0, rc = 1, perm[PC_MAX_RANK], shape[PC_MAX_RANK];
  pc_value *y = pc_dot_general(g, w, x, 1, &lc, &rc, 0, NULL, NULL); /* [O, k.., N, H..] */
  perm[0] = 1 + ns, perm[1] = 0;
  shape[0] = x->type.dims[0], shape[1] = w->type.dims[1];
  for (int i = 0; i < ns; i++) {
    perm[2 + 2 * i] = 2 + ns + i, perm[3 + 2 * i] = 1 + i; /* [N, O, H1, k1, H2, k2, ..] */
    shape[2 + i] = x->type.dims[2 + i] * w->type.dims[2 + i];
  }
  return pc_reshape(g, add_bias(g, pc_transpose(g, y, perm), b), r, shape);
}

/* Strided, without dilation, by stride phases: output position o (offset by the begin padding lo) with
 * (o + lo) mod s = r only meets kernel taps r, r + s, ..; so each phase is a plain conv of x with every s-th
 * tap of the flipped kernel (padded by its tap count - 1, the full correlation), and the phases interleave into
 * the output: [N, O, Q0, s0, Q1, s1, ..] reshaped to [N, O, Q0*s0, ..] and cut at lo. The conv over a
 * zero-stuffed input did s^ns times the work. wc: the weight as a conv's (conv_weight). */
static pc_value *phases(pc_graph *g, pc_value *x, pc_value *wc, int64_t groups, const int64_t *s, const int64_t *lo,
                        const int64_t *out) {
  int r = x->type.rank, ns = r - 2;
  int64_t n_ph = 1, Q[NS_MAX], ph[NS_MAX] = {0};
  for (int i = 0; i < ns; i++) n_ph *= s[i], Q[i] = (out[i] + lo[i] + s[i] - 1) / s[i];
  pc_value **parts = malloc(sizeof *parts * (size_t)n_ph);
  if (!parts) return pc_fail(g, PC_ERR_NOMEM, "out of memory"), NULL;
  int64_t N = x->type.dims[0], O = wc->type.dims[0], one[NS_MAX], z[PC_MAX_RANK], split[PC_MAX_RANK];
  for (int64_t p = 0; p < n_ph; p++) { /* phases in row-major order of (r0, r1, ..) */
    int64_t kr[NS_MAX], st[PC_MAX_RANK] = {0}, lim[PC_MAX_RANK], str[PC_MAX_RANK], plo[NS_MAX], phi[NS_MAX];
    int empty = 0;
    for (int d = 0; d < r; d++) lim[d] = wc->type.dims[d], str[d] = 1;
    for (int i = 0; i < ns; i++) {
      int64_t k = wc->type.dims[2 + i];
      kr[i] = k > ph[i] ? (k - ph[i] + s[i] - 1) / s[i] : 0;
      empty |= kr[i] == 0;
      st[2 + i] = (k - 1 - ph[i]) % s[i];
      lim[2 + i] = st[2 + i] + (kr[i] ? (kr[i] - 1) * s[i] + 1 : 0);
      str[2 + i] = s[i];
      int64_t len = x->type.dims[2 + i] + kr[i] - 1; /* the full correlation's length */
      plo[i] = kr[i] - 1, phi[i] = kr[i] - 1 + (Q[i] > len ? Q[i] - len : 0), one[i] = 1;
    }
    pc_value *y;
    z[0] = N, z[1] = O;
    for (int i = 0; i < ns; i++) z[2 + i] = Q[i];
    if (empty) {
      y = pc_broadcast_in_dim(g, pc_scalar(g, x->type.dtype, 0), r, z, NULL);
    } else {
      y = pc_conv(g, x, pc_slice(g, wc, st, lim, str), ns, one, plo, phi, one, one, groups);
      int64_t s0[PC_MAX_RANK] = {0}, ones[PC_MAX_RANK] = {1, 1, 1, 1, 1, 1, 1, 1};
      y = y ? pc_slice(g, y, s0, z, ones) : NULL; /* the first Q of each spatial dim */
    }
    split[0] = N, split[1] = O; /* [N, O, Q0, 1, Q1, 1, ..] */
    for (int i = 0; i < ns; i++) split[2 + 2 * i] = Q[i], split[3 + 2 * i] = 1;
    parts[p] = y ? pc_reshape(g, y, 2 + 2 * ns, split) : NULL;
    if (!parts[p]) return free(parts), NULL;
    for (int i = ns - 1; i >= 0 && ++ph[i] == s[i]; i--) ph[i] = 0;
  }
  /* the last phase dim varies fastest: concatenate runs of s[i] along that dim's phase axis, innermost first */
  int64_t n = n_ph;
  for (int i = ns - 1; i >= 0; i--) {
    for (int64_t j = 0; j < n / s[i]; j++) parts[j] = pc_concatenate(g, parts + j * s[i], (int)s[i], 3 + 2 * i);
    n /= s[i];
  }
  pc_value *y = parts[0];
  free(parts);
  int64_t full[PC_MAX_RANK], st[PC_MAX_RANK] = {0}, lim[PC_MAX_RANK], str[PC_MAX_RANK];
  full[0] = N, full[1] = O, lim[0] = N, lim[1] = O, str[0] = str[1] = 1;
  for (int i = 0; i < ns; i++) full[2 + i] = Q[i] * s[i], st[2 + i] = lo[i], lim[2 + i] = lo[i] + out[i], str[2 + i] = 1;
  return y ? pc_slice(g, pc_reshape(g, y, r, full), st, lim, str) : NULL;
}

pc_value *pc_conv_transpose(pc_graph *g, pc_value *x, pc_value *w, pc_value *b, int64_t groups, const int64_t *s,
                            const int64_t *d, const int64_t *lo, const int64_t *out) {
  if (!x || !w || g->status) return NULL;
  int r = x->type.rank, ns = r - 2;
  if (ns < 1 || ns > NS_MAX || w->type.rank != r)
    return pc_fail(g, PC_ERR_SHAPE, "a transposed conv needs input and weight of one rank >= 3"), NULL;
  int use_tiles = groups == 1 && 2 + 2 * ns <= PC_MAX_RANK;
  int use_phases = 2 + 2 * ns <= PC_MAX_RANK, strided = 0;
  int64_t n_ph = 1;
  for (int i = 0; i < ns; i++) {
    int64_t k = w->type.dims[2 + i];
    use_tiles &= s[i] == k && d[i] == 1 && lo[i] == 0 && out[i] == x->type.dims[2 + i] * k;
    use_phases &= d[i] == 1 && lo[i] >= 0;
    strided |= s[i] > 1;
    n_ph *= s[i];
  }
  if (use_tiles) return tiles(g, x, w, b);
  if (use_phases && strided && n_ph <= 64) return add_bias(g, phases(g, x, conv_weight(g, w, groups), groups, s, lo, out), b);
  /* a conv of the stride-dilated input with the flipped kernel; negative pads crop the result */
  int64_t clo[NS_MAX], chi[NS_MAX], ones[NS_MAX], crop_lo[PC_MAX_RANK] = {0}, lim[PC_MAX_RANK], one_r[PC_MAX_RANK];
  int crop = 0;
  for (int i = 0; i < ns; i++) {
    int64_t span = (w->type.dims[2 + i] - 1) * d[i] + 1;
    clo[i] = span - 1 - lo[i];
    chi[i] = out[i] + lo[i] - 1 - s[i] * (x->type.dims[2 + i] - 1);
    crop_lo[2 + i] = clo[i] < 0 ? -clo[i] : 0;
    lim[2 + i] = crop_lo[2 + i] + out[i];
    crop |= clo[i] < 0 || chi[i] < 0;
    clo[i] = clo[i] < 0 ? 0 : clo[i], chi[i] = chi[i] < 0 ? 0 : chi[i];
    ones[i] = 1;
  }
  pc_value *y = pc_conv(g, x, conv_weight(g, w, groups), ns, ones, clo, chi, d, s, groups);
  if (y && crop) {
    lim[0] = y->type.dims[0], lim[1] = y->type.dims[1];
    for (int i = 0; i < r; i++) one_r[i] = 1;
    y = pc_slice(g, y, crop_lo, lim, one_r);
  }
  return add_bias(g, y, b);
}
