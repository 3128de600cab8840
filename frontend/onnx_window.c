/* frontend/onnx_window.c: the sliding-window geometry of Conv and the pools: kernel, strides, dilations, pads
 * and auto_pad read into output sizes and paddings (ox_geom). */
#include "frontend/onnx_internal.h"

#include <string.h>

/* ---------------------------------------------------------------- window geometry (conv, pools) */

int64_t ox_span_of(const ox_geom *g, int i) { return (g->k[i] - 1) * g->d[i] + 1; }

/* padding and output size of one spatial dim under auto_pad ap; 0 on failure */
static int geom_dim(ox_ctx *c, ox_geom *g, int i, const char *ap, const int64_t *pads, int ceil_mode) {
  int64_t in = g->in[i], s = g->s[i], span = ox_span_of(g, i);
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
int ox_geom_read(ox_ctx *c, const pc_value *x, const int64_t *kernel, int ceil_mode, ox_geom *g) {
  if (!ox_check_static_input(c, x) || !ox_check_rank(c, x, 3, PC_MAX_RANK)) return 0;
  int ns = g->ns = x->type.rank - 2;
  int64_t pads[2 * OX_NS_MAX];
  for (int i = 0; i < ns; i++) g->in[i] = x->type.dims[2 + i];
  if (kernel) {
    memcpy(g->k, kernel, sizeof *kernel * (size_t)ns);
    int64_t ks[OX_NS_MAX];
    int nk = ox_attr_ints(c, "kernel_shape", ks, OX_NS_MAX);
    for (int i = 0; nk == ns && i < ns; i++)
      if (ks[i] != kernel[i]) return ox_fail(c, PC_ERR_SHAPE, "kernel_shape does not match the weight's shape"), 0;
  } else {
    int nk = ox_attr_ints(c, "kernel_shape", g->k, OX_NS_MAX);
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
