/* tests/unit/test_conv_rq.c: an int32 conv with few taps runs as an exact f32 conv (passes/widen.c); the loop kernel
 * requantizing its sums becomes the conv call's epilogue, act RQ (codegen/kir_requant.c's conv-requant rewrite,
 * runtime/conv's epilogues): the listing says so, and the compiled bytes equal the interpreter's on this CPU's
 * rows, on the plain C rows, with the executor requantizing after the row (the rows without CV_EPI_RQ), and as the
 * CUDA renderer writes it, on the CUDA emulator. A 1x1 conv and the depthwise conv reading its requantized map run
 * as one call (the pair row) where its 8-lane code requantizes. */
#include "codegen/codegen.h"
#include "ir/ir.h"
#include "passes/passes.h"
#include "runtime/primc_rt.h"
#include "tests/test.h"
#include "tests/unit/cuda_emu.h"
#include "tests/unit/helpers.h"

#include <stdlib.h>
#include <string.h>

/* what the loop kernel stores of the requantized q: f32(i32(q)), f32(i32(q) - zsub), or (f32(q) - 3) * 0.125 (a
 * dequantization, which stays a loop kernel) */
enum { OUT_Q, OUT_Q_LESS_ZP, OUT_DEQ };

typedef struct rq_case {
  int64_t n, c, o, h, w, k, stride, groups;
  int then_dw; /* then a depthwise 3x3 conv of the requantized map (less its zero point), requantized alike */
  int per_chan; /* scale and bias per output channel; else one scale and no bias */
  int s8;       /* q in s8 (else u8) */
  double zp;
  int out;
  const char *tag;
} rq_case;

static uint32_t lcg(uint32_t *s) { return *s = *s * 1664525u + 1013904223u, *s >> 24; }

static pc_value *chan(pc_graph *g, const float *data, int64_t o, const pc_type *like) {
  int64_t axis = 1;
  return pc_broadcast_in_dim(g, pc_const(g, pc_type_make(PC_f32, 1, &o), data), like->rank, like->dims, &axis);
}

/* the conv of xi (i32) with weights w, requantized: q (u8 or s8) */
static pc_value *conv_q(pc_graph *g, const rq_case *t, pc_value *xi, int64_t o, int64_t k, int64_t stride,
                        int64_t groups, const int32_t *w, const float *s, const float *b) {
  int64_t wd[4] = {o, xi->type.dims[1] / groups, k, k};
  int64_t st[2] = {stride, stride}, one[2] = {1, 1}, pad[2] = {k / 2, k / 2};
  pc_value *y = pc_conv(g, xi, pc_const(g, pc_type_make(PC_i32, 4, wd), w), 2, st, pad, pad, one, one, groups);
  pc_value *f = pc_convert(g, y, PC_f32);
  f = pc_mul(g, f, t->per_chan ? chan(g, s, t->o, &y->type) : pc_full_like(g, s[0], f));
  if (t->per_chan) f = pc_add(g, f, chan(g, b, t->o, &y->type));
  f = pc_build(g, PC_OP_div, (pc_value *[]){f, pc_full_like(g, 0.5, f)}, 2, NULL, 0);
  pc_value *r = pc_build(g, PC_OP_round, &f, 1, NULL, 0);
  r = pc_add(g, r, pc_full_like(g, t->zp, r));
  double lo = t->s8 ? -128 : 0, hi = t->s8 ? 127 : 255;
  r = pc_build(g, PC_OP_clamp, (pc_value *[]){r, pc_full_like(g, lo, r), pc_full_like(g, hi, r)}, 3, NULL, 0);
  return pc_convert(g, r, t->s8 ? PC_i8 : PC_u8);
}

static pc_graph *build(const rq_case *t, const int32_t *w, const float *s, const float *b) {
  pc_graph *g = pc_graph_new();
  int64_t xd[4] = {t->n, t->c, t->h, t->w};
  pc_value *x = pc_input_add(g, "x", pc_type_make(PC_u8, 4, xd));
  int32_t zx = 100;
  pc_value *xi = pc_sub(g, pc_convert(g, x, PC_i32),
                        pc_broadcast_in_dim(g, pc_const(g, pc_type_make(PC_i32, 0, NULL), &zx), 4, xd, NULL));
  pc_value *q = conv_q(g, t, xi, t->o, t->k, t->stride, t->groups, w, s, b), *qi = pc_convert(g, q, PC_i32), *out;
  if (t->then_dw) { /* the depthwise conv's weights and scales: the first conv's, from their start */
    qi = pc_sub(g, qi, pc_full_like(g, t->zp, qi));
    q = conv_q(g, t, qi, t->o, 3, 1, t->o, w, s, b);
    qi = pc_convert(g, q, PC_i32);
  }
  if (t->out == OUT_Q) {
    out = pc_convert(g, qi, PC_f32);
  } else if (t->out == OUT_Q_LESS_ZP) {
    out = pc_convert(g, pc_sub(g, qi, pc_full_like(g, t->zp, qi)), PC_f32);
  } else {
    pc_value *qf = pc_convert(g, q, PC_f32);
    out = pc_mul(g, pc_sub(g, qf, pc_full_like(g, 3, qf)), pc_full_like(g, 0.125, qf));
  }
  pc_output_add(g, out);
  return g;
}

/* mode 0: this CPU's rows; 1: the plain C ISA; 2: requantized by the executor after the row; 3: the CUDA renderer's
 * kernels on the emulator */
static void check(const rq_case *t, int mode) {
  int64_t nx = t->n * t->c * t->h * t->w, nw = t->o * (t->c / t->groups) * t->k * t->k;
  if (nw < t->o * 9) nw = t->o * 9; /* then_dw reads the first o * 9 */
  uint8_t *xs = malloc((size_t)nx);
  int32_t *w = malloc(sizeof *w * (size_t)nw);
  float *s = malloc(sizeof *s * (size_t)t->o), *b = malloc(sizeof *b * (size_t)t->o);
  uint32_t seed = 11;
  for (int64_t i = 0; i < nx; i++) xs[i] = (uint8_t)lcg(&seed);
  for (int64_t i = 0; i < nw; i++) w[i] = (int32_t)(lcg(&seed) % 61) - 30;
  /* sums of a few thousand into the output range; quarters and halves among them (ties that round to even) */
  for (int64_t o = 0; o < t->o; o++) s[o] = 0.25f / (float)(4 + o % 5), b[o] = (float)(o % 7) - 3.5f;
  static const char *const modes[4] = {"", ", plain C", ", requantized after the row", ", CUDA emulator"};
  char tag[200];
  snprintf(tag, sizeof tag, "%s%s", t->tag, modes[mode]);
  pc_graph *r = build(t, w, s, b), *g = build(t, w, s, b);
  pc_tensor in[1] = {{PC_u8, 4, {t->n, t->c, t->h, t->w}, xs}}, ref[1], got[1];
  int ok = pc_test_ref_and_plan(r, g, in, 1, ref, 1, tag);
  if (ok) {
    char *text = pc_test_kernels_text(g);
    int fused = text && strstr(text, "call primc_k_conv(") && strstr(text, "requantized in its epilogue");
    CHECK_MSG(fused == (t->out != OUT_DEQ), "%s: the requantization %s the conv call's epilogue", tag,
              fused ? "is in" : "is not in");
    int paired = text && strstr(text, "in the same call (conv row pair_dw)");
    if (t->then_dw && mode == 0)
      CHECK_MSG(paired == primc_conv_pair_requantizes(), "%s: the two convs %s one call", tag, paired ? "are" : "are not");
    free(text);
  }
  if (mode == 1) primc_sgemm_force_isa(PRIMC_ISA_SCALAR);
  if (mode == 2) primc_conv_rq_force_after(1);
  int ran = 0;
  if (ok && mode == 3) {
    char err[512] = "";
    got[0] = ref[0];
    got[0].data = calloc(1, pc_tensor_nbytes(&ref[0]));
    void *ins[1] = {xs}, *outs[1] = {got[0].data};
    int rc = pc_emu_graph(g, ins, outs, NULL, err, sizeof err);
    if (rc < 0) SKIP("no g++ for the CUDA emulator");
    ran = rc > 0 || !CHECK_MSG(rc > 0, "%s: %s", tag, err);
    if (rc <= 0) free(got[0].data);
  } else if (ok) {
    ran = pc_test_run_compiled(g, 2, in, got, tag);
  }
  if (ran) {
    /* byte for byte: the same operations in the same types */
    int64_t n = pc_tensor_numel(&ref[0]), bad = -1, spread = 0;
    const float *a = got[0].data, *e = ref[0].data;
    for (int64_t i = 0; i < n && bad < 0; i++) bad = memcmp(&a[i], &e[i], sizeof *a) ? i : -1;
    for (int64_t i = 1; i < n; i++) spread += e[i] != e[0];
    CHECK_MSG(bad < 0, "%s: y[%lld] = %g differs from the interpreter's %g", tag, (long long)bad,
              bad < 0 ? 0.0 : a[bad], bad < 0 ? 0.0 : e[bad]);
    CHECK_MSG(spread > n / 4, "%s: the output barely varies (%lld of %lld differ from the first)", tag,
              (long long)spread, (long long)n);
    free(got[0].data);
  }
  primc_sgemm_force_isa(PRIMC_ISA_AUTO);
  primc_conv_rq_force_after(0);
  if (ok) pc_tensor_free(&ref[0]);
  pc_graph_free(r);
  pc_graph_free(g);
  free(xs), free(w), free(s), free(b);
}

static const rq_case cases[] = {
    /* n, c, o, h, w, k, stride, groups, then_dw, per_chan, s8, zp */
    {1, 20, 20, 13, 11, 3, 1, 20, 0, 1, 0, 0, OUT_Q, "depthwise 3x3, u8, per-channel scale and bias"},
    {2, 12, 12, 14, 15, 3, 2, 12, 0, 0, 1, 3, OUT_Q, "depthwise 3x3/2, s8, one scale, two images"},
    {1, 16, 36, 9, 10, 1, 1, 1, 0, 1, 0, 125, OUT_Q_LESS_ZP, "1x1 of 16 channels, u8 less its zero point"},
    {1, 3, 16, 17, 16, 3, 2, 1, 0, 1, 0, 0, OUT_Q, "stem 3 -> 16 3x3/2"},
    {1, 16, 24, 8, 9, 1, 1, 1, 0, 1, 1, -4, OUT_Q_LESS_ZP, "1x1, s8 less its zero point"},
    {1, 16, 24, 8, 9, 1, 1, 1, 0, 1, 0, 0, OUT_DEQ, "dequantized f32: a loop kernel still"},
    {1, 16, 24, 12, 13, 1, 1, 1, 1, 1, 0, 2, OUT_Q, "1x1 then depthwise 3x3, u8: one call"},
    {1, 3, 16, 15, 14, 3, 2, 1, 1, 0, 1, 0, OUT_Q_LESS_ZP, "stem then depthwise 3x3, s8: one call"},
};

PC_TEST(conv_requantizes_in_its_epilogue) {
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
    for (int mode = 0; mode < 4; mode++) check(&cases[i], mode);
}
