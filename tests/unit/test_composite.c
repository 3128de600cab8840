/* tests/unit/test_composite.c: the composites both frontends share (frontend/composite.c), run by the interpreter
 * against formulas in double. */
#include "frontend/composite.h"
#include "tests/test.h"

#include <math.h>
#include <string.h>

/* y = build(x) for f32 x of shape dims, interpreted; fills out (n floats); 0 on failure */
static int run1(pc_value *(*build)(pc_graph *, pc_value *, int), int arg, int rank, const int64_t *dims,
                const float *x, float *out, int64_t n) {
  pc_graph *g = pc_graph_new();
  pc_value *in = pc_input_add(g, "x", pc_type_make(PC_f32, rank, dims));
  pc_value *y = build(g, in, arg);
  if (y) pc_output_add(g, y);
  pc_tensor t = {.dtype = PC_f32, .rank = rank, .data = (void *)x}, o;
  memcpy(t.dims, dims, sizeof *dims * (size_t)rank);
  memset(&o, 0, sizeof o);
  int ok = CHECK_MSG(y && pc_interp(g, &t, 1, &o, 1) == PC_OK, "%s", pc_error(g));
  if (ok) memcpy(out, o.data, sizeof *out * (size_t)n);
  pc_tensor_free(&o);
  pc_graph_free(g);
  return ok;
}

static pc_value *softmax_last(pc_graph *g, pc_value *x, int log) { return fc_softmax(g, x, x->type.rank - 1, log); }

static pc_value *layer_norm_last(pc_graph *g, pc_value *x, int unused) {
  int64_t ax = x->type.rank - 1;
  return fc_layer_norm(g, x, 1, &ax, 1e-5, NULL, NULL);
}

/* GELU halves first (PyTorch's and ONNX's reference order), so a value near the float max does not overflow */
PC_TEST(composite_gelu) {
  static const float x[5] = {3e38f, -3e38f, 0.5f, -1.0f, 2.0f};
  int64_t d = 5;
  for (int tanh_form = 0; tanh_form < 2; tanh_form++) {
    float y[5];
    if (!run1(fc_gelu, tanh_form, 1, &d, x, y, 5)) return;
    CHECK_MSG(y[0] == 3e38f && y[1] == 0, "tanh=%d: gelu(+-3e38) = %g, %g", tanh_form, y[0], y[1]);
    for (int i = 2; i < 5; i++) {
      double v = x[i], inner = tanh_form ? tanh(sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)) : erf(v / sqrt(2));
      double want = 0.5 * v * (1 + inner);
      CHECK_MSG(fabs(y[i] - want) <= 1e-6, "tanh=%d: gelu(%g) = %.9g, want %.9g", tanh_form, v, y[i], want);
    }
  }
}

PC_TEST(composite_softmax_and_layer_norm) {
  static const float x[6] = {1, 2, 3, -1000, 0, 1000};
  int64_t d[2] = {2, 3};
  float sm[6], lsm[6], ln[6];
  if (!run1(softmax_last, 0, 2, d, x, sm, 6) || !run1(softmax_last, 1, 2, d, x, lsm, 6) ||
      !run1(layer_norm_last, 0, 2, d, x, ln, 6))
    return;
  for (int r = 0; r < 2; r++) {
    const float *row = x + 3 * r;
    double m = fmax(row[0], fmax(row[1], row[2])), s = 0, mean = 0, var = 0;
    for (int i = 0; i < 3; i++) s += exp(row[i] - m), mean += row[i] / 3.0;
    for (int i = 0; i < 3; i++) var += (row[i] - mean) * (row[i] - mean) / 3.0;
    for (int i = 0; i < 3; i++) {
      double p = exp(row[i] - m) / s, lp = row[i] - m - log(s), n = (row[i] - mean) / sqrt(var + 1e-5);
      CHECK_MSG(fabs(sm[3 * r + i] - p) <= 1e-6, "softmax[%d][%d] = %.9g, want %.9g", r, i, sm[3 * r + i], p);
      CHECK_MSG(fabs(lsm[3 * r + i] - lp) <= 1e-4 * fmax(1, fabs(lp)), "log_softmax[%d][%d] = %.9g, want %.9g", r, i,
                lsm[3 * r + i], lp);
      CHECK_MSG(fabs(ln[3 * r + i] - n) <= 1e-5, "layer_norm[%d][%d] = %.9g, want %.9g", r, i, ln[3 * r + i], n);
    }
  }
}
