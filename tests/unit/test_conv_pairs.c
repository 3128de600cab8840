/* tests/unit/test_conv_pairs.c: convs on the bf16 row whose x, y and residual are held as bf16 channel pairs, against an f64 conv of the rounded operands, in place and through the f32 conversions. */
#include "runtime/primc_rt.h"
#include "tests/test.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 0x9e3779b97f4a7c15ull;

/* x rounded to bf16 (8 significant bits, ties to even) by frexp/ldexp, not by the runtime's bit trick */
static float to_bf16(double x) {
  int e;
  double m = frexp(x, &e);
  return (float)ldexp(nearbyint(ldexp(m, 8)), e - 8);
}

static float *rand_bf16(int64_t n) {
  float *p = malloc(sizeof *p * (size_t)(n > 0 ? n : 1));
  for (int64_t i = 0; i < n; i++) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    p[i] = to_bf16((double)((rng >> 40) & 0xFFFFFF) / (double)0x800000 - 1.0);
  }
  return p;
}

static uint16_t bits_hi(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)(u >> 16);
}

/* where primc_rt.h puts pair i at pixel q of an image of c channels, and an image's words: written out here */
static int64_t pair_word(int64_t c, int64_t i, int64_t q) {
  int64_t cp = (c + 31) / 32 * 16; /* pairs a block of 32 pixels holds */
  return q / 32 * 32 * cp + (i / 16 * 2 + q % 32 / 16) * 256 + i % 16 * 16 + q % 16;
}
static int64_t image_words(int64_t c, int64_t hw) { return (hw + 31) / 32 * 32 * ((c + 31) / 32 * 16); }

/* [n][c][hw] f32 values that are bf16 already, as pairs, written here bit by bit (not by the runtime) */
static uint32_t *to_pairs(const float *x, int64_t n, int64_t c, int64_t hw) {
  uint32_t *d = calloc(1, (size_t)primc_conv_pairs_bytes(n, c, 1, hw));
  for (int64_t i = 0; i < n; i++)
    for (int64_t ch = 0; ch < c; ch++)
      for (int64_t q = 0; q < hw; q++)
        d[i * image_words(c, hw) + pair_word(c, ch / 2, q)] |= (uint32_t)bits_hi(x[(i * c + ch) * hw + q])
                                                               << (ch % 2 ? 16 : 0);
  return d;
}

static float from_pair(const uint32_t *d, int64_t c, int64_t hw, int64_t i, int64_t ch, int64_t q) {
  uint32_t u = d[i * image_words(c, hw) + pair_word(c, ch / 2, q)];
  u = ch % 2 ? u & 0xffff0000u : u << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* y = min(max(act(conv + bias + res), lo), 6) in f64: act none and lo 0 (a ReLU6), or SiLU and lo -0.25 */
static void ref(const primc_conv2d *p, const float *x, const float *w, const float *bias, const float *res,
                int64_t oh, int64_t ow, int silu, double *y) {
  for (int64_t n = 0; n < p->n; n++)
    for (int64_t o = 0; o < p->o; o++)
      for (int64_t a = 0; a < oh; a++)
        for (int64_t b = 0; b < ow; b++) {
          double s = 0;
          for (int64_t c = 0; c < p->c; c++)
            for (int64_t i = 0; i < p->kh; i++)
              for (int64_t j = 0; j < p->kw; j++) {
                int64_t ih = a * p->stride_h - p->pad_t + i, iw = b * p->stride_w - p->pad_l + j;
                if (ih >= 0 && ih < p->h && iw >= 0 && iw < p->w)
                  s += (double)x[((n * p->c + c) * p->h + ih) * p->w + iw] * w[((o * p->c + c) * p->kh + i) * p->kw + j];
              }
          int64_t at = ((n * p->o + o) * oh + a) * ow + b;
          double v = s + bias[o] + (res ? res[at] : 0.0);
          y[at] = silu ? fmin(fmax(v / (1.0 + exp(-v)), -0.25), 6.0) : fmin(fmax(v, 0.0), 6.0);
        }
}

/* conv p with the maps store names held as pairs (y over the residual when res_is_y: the same map, or pairs over
 * the f32 residual's first bytes), the epilogue a ReLU6 or SiLU; 1 when it matched */
static int run(const primc_conv2d *shape, int store, int res_is_y, int silu, const char *how) {
  primc_conv2d p = *shape;
  p.store = store;
  int64_t oh, ow;
  primc_conv2d_out_hw(&p, &oh, &ow);
  int64_t hw = p.h * p.w, P = oh * ow, nx = p.n * p.c * hw, ny = p.n * p.o * P, nw = p.o * p.c * p.kh * p.kw;
  /* an f32 map that y may lie over, and the spare, hold y's pairs too (codegen gives pairs only such buffers) */
  int64_t ny_room = primc_conv_pairs_bytes(p.n, p.o, oh, ow) / 4 > ny ? primc_conv_pairs_bytes(p.n, p.o, oh, ow) / 4 : ny;
  float *x = rand_bf16(nx), *w = rand_bf16(nw), *bias = rand_bf16(p.o), *res = rand_bf16(ny_room);
  double *r = malloc(sizeof *r * (size_t)ny);
  ref(&p, x, w, bias, res, oh, ow, silu, r);
  primc_conv_plan plan = {PRIMC_CONV_ROW_BF16, PRIMC_CONV_W_BF16, 0};
  void *wp = aligned_alloc(64, (primc_conv_plan_weight_bytes(&p, &plan) + 63) / 64 * 64);
  int ys = store & PRIMC_CONV_Y_PAIRS, rs = store & PRIMC_CONV_RES_PAIRS;
  uint32_t *xp = store & PRIMC_CONV_X_PAIRS ? to_pairs(x, p.n, p.c, hw) : NULL, *rp = rs ? to_pairs(res, p.n, p.o, P) : NULL;
  /* y: pairs (the residual's own buffer when res_is_y) or f32, NaN where never written */
  void *y = res_is_y ? (rs ? (void *)rp : (void *)res)
                     : ys ? malloc((size_t)primc_conv_pairs_bytes(p.n, p.o, oh, ow)) : malloc(sizeof(float) * (size_t)ny);
  if (!res_is_y) memset(y, 0xff, ys ? (size_t)primc_conv_pairs_bytes(p.n, p.o, oh, ow) : sizeof(float) * (size_t)ny);
  float *spare = malloc(sizeof(float) * (size_t)ny_room);
  primc_conv_epi e = {.bias = bias, .bias_stride = 1, .res = rs ? (const float *)rp : res, .lo = silu ? -0.25f : 0.0f,
                      .hi = 6.0f, .act = silu ? PRIMC_ACT_SILU : PRIMC_ACT_NONE};
  int ok = CHECK_INT(primc_conv_plan_pack(&p, &plan, w, wp), PRIMC_OK);
  int st = primc_conv_run(&p, &plan, xp ? (const float *)xp : x, wp, &e, y, spare, NULL);
  ok = ok && CHECK_MSG(st == PRIMC_OK, "%s, store %d: status %d", how, store, st);
  /* f32 sums of exact products against the f64 ones, then y rounded to bf16 where it is pairs */
  double tol = (ys ? 1.0 / 256 : 0.0) + 2.0 * (double)(p.c * p.kh * p.kw + 3) * FLT_EPSILON;
  for (int64_t n = 0; n < p.n && ok; n++)
    for (int64_t o = 0; o < p.o && ok; o++)
      for (int64_t q = 0; q < P && ok; q++) {
        int64_t at = (n * p.o + o) * P + q;
        double got = ys ? from_pair(y, p.o, P, n, o, q) : ((float *)y)[at];
        ok = CHECK_MSG(fabs(got - r[at]) <= tol * fmax(1.0, fabs(r[at])),
                       "%s: %lldx%lld/%lld %lld -> %lld, store %d%s%s: y[%lld][%lld][%lld] = %g, want %g", how,
                       (long long)p.kh, (long long)p.kw, (long long)p.stride_h, (long long)p.c, (long long)p.o, store,
                       res_is_y ? " (y over the residual)" : "", silu ? ", SiLU" : "", (long long)n, (long long)o, (long long)q, got, r[at]);
      }
  if (!res_is_y) free(y);
  free(x), free(w), free(bias), free(res), free(r), free(wp), free(xp), free(rp), free(spare);
  return ok;
}

/* n c h w  o kh kw  groups sh sw dh dw  pt pl pb pr */
static const primc_conv2d shapes[] = {
    {2, 64, 7, 9, 32, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},   /* 1x1: x read as it lies */
    {1, 32, 9, 11, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0},  /* 3x3 same: x copied onto padded planes */
    {2, 64, 10, 9, 32, 3, 3, 1, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0},  /* 3x3/2: x split into phases */
    {1, 32, 8, 8, 64, 1, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},   /* 1x1/2: a downsample */
    {1, 64, 20, 21, 64, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, /* 1x1 over rows past 256 pixels */
    {1, 2048, 2, 3, 64, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, /* K past one block: y pairs converted */
};

static void each(const char *how) {
  static const int stores[] = {PRIMC_CONV_X_PAIRS, PRIMC_CONV_Y_PAIRS, PRIMC_CONV_RES_PAIRS,
                               PRIMC_CONV_Y_PAIRS | PRIMC_CONV_RES_PAIRS, PRIMC_CONV_X_PAIRS | PRIMC_CONV_RES_PAIRS,
                               PRIMC_CONV_X_PAIRS | PRIMC_CONV_Y_PAIRS | PRIMC_CONV_RES_PAIRS};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    const int all = PRIMC_CONV_X_PAIRS | PRIMC_CONV_Y_PAIRS | PRIMC_CONV_RES_PAIRS;
    for (size_t k = 0; k < sizeof stores / sizeof stores[0]; k++)
      if (!run(&shapes[s], stores[k], 0, 0, how)) return;
    if (!run(&shapes[s], all, 1, 0, how) || !run(&shapes[s], PRIMC_CONV_Y_PAIRS, 1, 0, how) ||
        !run(&shapes[s], all, 0, 1, how))
      return;
  }
}

/* On this CPU's bf16 GEMM row (AMX or AVX512-BF16: the 1x1s read pairs as panel rows, the others as the in-place
 * path's planes), and on the generic row, where only the 1x1s read them in place and the executor converts the
 * rest to f32 around the conv. */
PC_TEST(conv_pairs) {
  CHECK_INT(primc_conv_pairs_in_place(&shapes[0]), 1);
  primc_conv2d deep = shapes[5]; /* K past one block: its sums pass through y, which cannot be pairs then */
  deep.store = PRIMC_CONV_X_PAIRS;
  CHECK_INT(primc_conv_pairs_in_place(&deep), 1);
  deep.store = PRIMC_CONV_X_PAIRS | PRIMC_CONV_Y_PAIRS;
  CHECK_INT(primc_conv_pairs_in_place(&deep), 0);
  int direct = primc_conv_pairs_in_place(&shapes[1]);
  each(direct ? "this CPU's bf16 row" : "this CPU's bf16 row, 3x3s converted");
  if (primc_bgemm_force_row(PRIMC_BGEMM_ROW_GENERIC) == 0) {
    CHECK_INT(primc_conv_pairs_in_place(&shapes[1]), 0);
    CHECK_INT(primc_conv_pairs_in_place(&shapes[0]), 1);
    each("the generic bf16 row");
    /* epilogues in plain C: the pairs widened and rounded one value at a time */
    if (primc_sgemm_force_isa(PRIMC_ISA_SCALAR) == 0) each("the generic bf16 row, scalar epilogues");
    primc_sgemm_force_isa(PRIMC_ISA_AUTO);
    primc_bgemm_force_row(-1);
  }
  if (!direct) SKIP("no AVX512-BF16 here: the 3x3s' pairs were only checked converted");
}

/* The size a map of pairs takes (whole blocks of 32 pixels and of 16 pairs), and the converters' layout. */
PC_TEST(conv_pairs_bytes) {
  CHECK_INT(primc_conv_pairs_bytes(2, 64, 7, 9), 2 * 2 * 32 * 32 * 4); /* 2 images of 2 blocks of 32 pairs */
  CHECK_INT(primc_conv_pairs_bytes(1, 3, 2, 2), 32 * 16 * 4);
  CHECK_INT(primc_conv_pairs_bytes(1, -1, 2, 2), -1);
  CHECK_INT(primc_conv_pairs_bytes(1, 32, 0, 5), 0);
  float x[3 * 17];
  for (int i = 0; i < 3 * 17; i++) x[i] = (float)(i + 1);
  uint32_t d[32 * 16];
  primc_conv_pairs_from_f32(x, 1, 3, 17, d);
  CHECK_INT(d[0], 0x41903f80u);        /* pixel 0: 18.0 (channel 1) high, 1.0 low */
  CHECK_INT(d[256 + 0], 0x42084188u);  /* pixel 16, in the second panel: 34.0 high, 17.0 low */
  CHECK_INT(d[16 + 5], 0x00004220u);   /* pair 1 (channel 2 and a zero) at pixel 5: 40.0 */
  CHECK_INT(d[256 + 1], 0u);           /* pixel 17 lies past the map */
  float back[3 * 17];
  primc_conv_pairs_to_f32(d, 1, 3, 17, back);
  CHECK(memcmp(back, x, sizeof x) == 0);
}
