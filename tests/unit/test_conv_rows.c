/* tests/unit/test_conv_rows.c: every row of runtime/conv/conv_rows.def against a plain reference conv on the shapes it claims to fit, the table's fallbacks, the planner. */
#include "runtime/primc_rt.h"
#include "tests/test.h"

#include <fenv.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 0x2545f4914f6cdd1dull;

static float *rand_floats(int64_t n) {
  float *p = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
  for (int64_t i = 0; i < n; i++) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    p[i] = (float)((rng >> 40) & 0xFFFFFF) / (float)0x800000 - 1.0f; /* [-1, 1) */
  }
  return p;
}

/* the epilogues a shape is run with (by its index): none; bias, residual and ReLU6; bias, SiLU, clamp; bias,
 * residual, GELU (erf), clamp; bias, residual, ReLU6 rounded to f16, or to bf16 */
enum { EPI_NONE, EPI_RES_RELU6, EPI_SILU, EPI_RES_GELU, EPI_RES_F16, EPI_RES_BF16, EPI_KINDS };

/* y = epilogue(sum over the taps inside x), in double, by the definition: no code under test */
static void ref_conv(const primc_conv2d *p, const float *x, const float *w, const float *bias, const float *res,
                     int epi, double *y) {
  int64_t oh, ow;
  primc_conv2d_out_hw(p, &oh, &ow);
  int64_t cg = p->c / p->groups, og = p->o / p->groups;
  for (int64_t n = 0; n < p->n; n++)
    for (int64_t o = 0; o < p->o; o++)
      for (int64_t yy = 0; yy < oh; yy++)
        for (int64_t xx = 0; xx < ow; xx++) {
          int64_t g = o / og;
          double acc = 0;
          for (int64_t c = 0; c < cg; c++)
            for (int64_t i = 0; i < p->kh; i++)
              for (int64_t j = 0; j < p->kw; j++) {
                int64_t ih = yy * p->stride_h - p->pad_t + i * p->dil_h, iw = xx * p->stride_w - p->pad_l + j * p->dil_w;
                if (ih < 0 || ih >= p->h || iw < 0 || iw >= p->w) continue;
                acc += (double)x[((n * p->c + g * cg + c) * p->h + ih) * p->w + iw] * w[((o * cg + c) * p->kh + i) * p->kw + j];
              }
          int64_t at = ((n * p->o + o) * oh + yy) * ow + xx;
          if (epi == EPI_RES_RELU6) acc = fmin(fmax(acc + bias[o] + res[at], 0.0), 6.0);
          if (epi == EPI_SILU) {
            double v = acc + bias[o];
            acc = fmin(fmax(v / (1.0 + exp(-v)), -0.25), 6.0);
          }
          if (epi == EPI_RES_GELU) {
            double v = acc + bias[o] + res[at];
            acc = fmin(fmax(0.5 * v * (1.0 + erf(v / sqrt(2.0))), -0.1), 5.0);
          }
          if (epi == EPI_RES_F16 || epi == EPI_RES_BF16) acc = fmin(fmax(acc + bias[o] + res[at], 0.0), 6.0);
          y[at] = acc;
        }
}

/* x rounded to f16 (11 significant bits, ties to even; 2^-24 steps below 2^-14) by frexp/ldexp, not by the
 * runtime's bit trick or instruction */
static double to_f16(double x) {
  int e;
  double m = frexp(x, &e);
  int bits = e < -13 ? 24 + e : 11;
  return ldexp(nearbyint(ldexp(m, bits)), e - bits);
}

/* x to bf16 (8 significant bits, ties to even) by frexp/ldexp, not by the runtime's bit trick: the bf16 row's
 * operands, so its reference is the f64 conv of exactly what it multiplies */
static float to_bf16(float x) {
  int e;
  double m = frexp(x, &e);
  return (float)ldexp(nearbyint(ldexp(m, 8)), e - 8);
}

/* n c h w  o kh kw  groups sh sw dh dw  pt pl pb pr */
static const primc_conv2d shapes[] = {
    {1, 3, 9, 11, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0},          /* 3x3 same */
    {2, 4, 10, 9, 6, 3, 3, 1, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0},          /* stride 2, two images */
    {1, 5, 12, 12, 7, 3, 2, 1, 1, 2, 2, 3, 2, 0, 1, 3, 0, 0, 0, 0, 0, 0, 0},         /* dilation, uneven pads */
    {1, 6, 8, 8, 9, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0},           /* three groups */
    {2, 16, 7, 5, 24, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},         /* 1x1 */
    {1, 16, 7, 5, 8, 1, 1, 2, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},          /* 1x1, two groups */
    {1, 8, 9, 9, 8, 1, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},           /* 1x1 stride 2 */
    {1, 1, 1, 1, 4, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},           /* 1x1 map, one channel */
    {1, 7, 1, 1, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0},           /* 1x1 map, 3x3 padded */
    {1, 11, 3, 2, 13, 3, 3, 1, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0},         /* odd channels, 2x1 outputs */
    {1, 32, 4, 4, 64, 1, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},         /* 1x1/2 onto 2x2 */
    {1, 4, 5, 6, 8, 3, 3, 1, 1, 1, 1, 1, 4, 4, 3, 5, 0, 0, 0, 0, 0, 0, 0},           /* pads past the kernel */
    {1, 3, 13, 100, 9, 7, 7, 1, 2, 2, 1, 1, 3, 3, 3, 3, 0, 0, 0, 0, 0, 0, 0},        /* 7x7/2 stem */
    {1, 2, 10, 90, 3, 4, 4, 1, 3, 3, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0},         /* stride 3, even kernel */
    {1, 40, 23, 29, 33, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0},       /* K = 360 */
    {1, 24, 7, 7, 48, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0},         /* 7x7 map */
    {1, 96, 6, 9, 32, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},         /* narrowing 1x1 */
    {2, 20, 9, 40, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0},        /* 40 channels: 32 + 8 */
    {1, 9, 6, 128, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0},        /* rows of 128 */
    {1, 16, 15, 29, 64, 3, 3, 1, 2, 2, 1, 1, 1, 0, 1, 2, 0, 0, 0, 0, 0, 0, 0},       /* stride 2, uneven pads */
    {1, 128, 11, 13, 130, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0},     /* wide 3x3, partial tiles */
    {2, 12, 11, 13, 12, 3, 3, 12, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0},      /* depthwise */
    {1, 8, 12, 10, 8, 5, 3, 8, 2, 1, 1, 2, 2, 1, 2, 2, 0, 0, 0, 0, 0, 0, 0},         /* depthwise stride, dilation */
    {1, 5, 7, 7, 5, 3, 3, 5, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0},           /* depthwise 7x7 plane */
    {1, 20, 14, 14, 20, 3, 3, 20, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0},      /* depthwise stride 2, 16 + 4 */
    {1, 33, 20, 21, 33, 5, 5, 33, 2, 2, 2, 2, 3, 2, 1, 4, 0, 0, 0, 0, 0, 0, 0},      /* depthwise 5x5 dilated */
    {1, 17, 9, 30, 17, 5, 5, 17, 1, 1, 1, 1, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0, 0},       /* depthwise 5x5/1 */
    {1, 32, 8, 400, 32, 3, 3, 32, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0},      /* depthwise rows of 400 */
    {1, 2, 6, 40, 2, 5, 5, 2, 2, 2, 1, 1, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0, 0},          /* depthwise 5x5/2, split columns */
    {1, 3, 5, 60, 3, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0},          /* depthwise rows of 7.5 vectors */
    {1, 1, 9, 9, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0},           /* one channel: depthwise */
    {1, 256, 7, 7, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0},        /* deep sums on a 7x7 map */
    {2, 1, 1, 700, 20, 1, 33, 1, 1, 7, 1, 1, 0, 16, 0, 16, 0, 0, 0, 0, 0, 0, 0},     /* 1-D, 33 taps at stride 7 */
    {1, 3, 1, 300, 6, 1, 40, 3, 1, 10, 1, 1, 0, 5, 0, 3, 0, 0, 0, 0, 0, 0, 0},       /* 1-D, a channel per group */
    {1, 1, 1, 90, 17, 1, 5, 1, 1, 12, 1, 1, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0},        /* 1-D, gaps between windows */
    {1, 16, 13, 11, 16, 3, 3, 2, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0},       /* groups of 8, stride 2 */
    {2, 24, 9, 10, 24, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0},        /* groups of 8, two images */
    {1, 12, 8, 9, 18, 3, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0, 0},         /* groups of 4 -> 6, dilated */
    {1, 40, 7, 7, 40, 3, 3, 5, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0},         /* groups of 8 on a 7x7 map */
    {3, 24, 7, 7, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0},         /* three images of 49: tiles across them */
    {2, 64, 9, 17, 24, 3, 3, 2, 1, 1, 1, 1, 0, 2, 1, 1, 0, 0, 0, 0, 0, 0, 0},        /* groups of 32, uneven pads: bf16 taps */
    {1, 32, 5, 6, 16, 5, 5, 1, 1, 1, 1, 1, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0, 0},         /* 5x5 on a map smaller than its pads */
    {1, 32, 11, 13, 24, 3, 3, 1, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0},       /* 3x3/2 from 32 channels: bf16 phases */
    {1, 32, 9, 40, 8, 3, 3, 1, 2, 2, 1, 1, 0, 2, 1, 1, 0, 0, 0, 0, 0, 0, 0},         /* 3x3/2, rows past 32, even left pad */
    {2, 64, 10, 37, 16, 1, 1, 2, 2, 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},       /* 1x1/2, groups of 32, odd width */
    {1, 20, 11, 13, 40, 3, 3, 1, 1, 1, 2, 2, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0, 0},       /* 20 channels dilated: 3 x 32 tiles */
    {1, 24, 12, 15, 33, 3, 3, 1, 2, 2, 2, 3, 2, 3, 1, 2, 0, 0, 0, 0, 0, 0, 0},       /* the same at stride 2 */
    {2, 16, 5, 6, 12, 1, 1, 2, 2, 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},         /* two images, 1x1/2, two groups */
    {5, 9, 9, 11, 21, 3, 3, 1, 2, 2, 1, 1, 1, 0, 1, 2, 0, 0, 0, 0, 0, 0, 0},         /* five images, stride 2, uneven pads */
    {5, 4, 19, 20, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0},        /* Winograd's images in rounds of 2, 2, 1 */
    {1, 512, 3, 5, 260, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},      /* 1x1 of 260 KiB of bf16: in place */
};
#define N_SHAPES (int)(sizeof shapes / sizeof shapes[0])

/* what a run of one row needs beside its operands: y, a spare, the plan's col scratch, its weights, the reference */
typedef struct run_bufs {
  float *y, *spare, *col;
  void *wp;
  double *r;
} run_bufs;

static run_bufs bufs_alloc(const primc_conv2d *p, const primc_conv_plan *plan, int64_t ny) {
  int64_t nc = primc_conv_plan_scratch_floats(p, plan);
  size_t wb = primc_conv_plan_weight_bytes(p, plan);
  return (run_bufs){malloc(sizeof(float) * (size_t)ny), malloc(sizeof(float) * (size_t)ny),
                    malloc(sizeof(float) * (size_t)(nc > 0 ? nc : 1)), aligned_alloc(64, (wb + 63) / 64 * 64),
                    malloc(sizeof(double) * (size_t)ny)};
}

static void bufs_free(run_bufs *b) { free(b->y), free(b->spare), free(b->col), free(b->wp), free(b->r); }

/* a plan's tile word for shape s: STRIPS and WINOGRAD weights' tile height; bf16 weights on every other shape as
 * a program's that outgrow the cache (whose large 1x1s then read x in place) */
static int32_t plan_tile(int layout, int s) {
  if (layout == PRIMC_CONV_W_STRIPS || layout == PRIMC_CONV_W_WINOGRAD) return primc_sgemm_mr();
  return layout == PRIMC_CONV_W_BF16 && s % 2 == 0 ? PRIMC_CONV_BF16_STREAM : 0;
}

/* act RQ (an exact conv's integer sums requantized) of row on shape s, in the row's epilogues or (after) by the
 * executor after it: small integers in, so every row's f32 sums are exact (bf16 and Winograd's too), and the
 * output bit for bit the definition's f32 steps on the exact sums */
static void run_rq(int row, int s, int want_row, int after) {
  const primc_conv2d *p = &shapes[s];
  int64_t oh, ow;
  primc_conv2d_out_hw(p, &oh, &ow);
  int64_t nx = p->n * p->c * p->h * p->w, kk = (p->c / p->groups) * p->kh * p->kw, nw = p->o * kk;
  int64_t ny = p->n * p->o * oh * ow;
  int layout = primc_conv_row_layout(row);
  primc_conv_plan plan = {row, layout, plan_tile(layout, s)};
  float *x = rand_floats(nx), *w = rand_floats(nw), *bias = rand_floats(p->o), *scale = rand_floats(p->o);
  for (int64_t i = 0; i < nx; i++) x[i] = nearbyintf(x[i] * 12);
  for (int64_t i = 0; i < nw; i++) w[i] = nearbyintf(w[i] * 6);
  for (int64_t o = 0; o < p->o; o++) bias[o] = nearbyintf(bias[o] * 8) / 2, scale[o] = 0.25f + fabsf(scale[o]);
  run_bufs b = bufs_alloc(p, &plan, ny);
  float *y = b.y, *spare = b.spare, *col = b.col;
  void *wp = b.wp;
  double *r = b.r;
  ref_conv(p, x, w, NULL, NULL, EPI_NONE, r);
  int per_chan = s % 2; /* else one scale for all and no bias */
  primc_conv_epi e = {.bias = per_chan ? bias : NULL, .bias_stride = 1, .lo = -20.0f, .hi = 300.0f,
                      .act = PRIMC_ACT_RQ, .rq_scale = per_chan ? scale : NULL, .rq_scale_stride = 1,
                      .rq_scale_c = 0.75f, .rq_div = 2.5f, .rq_zp = 7.0f};
  for (int64_t i = 0; i < ny; i++) y[i] = NAN;
  primc_conv_rq_force_after(after);
  int ok = CHECK_INT(primc_conv_plan_pack(p, &plan, w, wp), PRIMC_OK);
  ok = ok && CHECK_INT(primc_conv_run(p, &plan, x, wp, &e, y, spare, col), PRIMC_OK);
  ok = ok && CHECK_INT(primc_conv_last_row(), want_row);
  primc_conv_rq_force_after(0);
  int64_t P = oh * ow, spread = 0;
  for (int64_t i = 0; i < ny && ok; i++) {
    int64_t o = i / P % p->o;
    float sc = per_chan ? scale[o] : 0.75f, b = per_chan ? bias[o] : 0.0f, sum = (float)r[i], t = sum * sc;
    t = t + b;
    t = t / 2.5f;
    float want = fminf(fmaxf(nearbyintf(t) + 7.0f, -20.0f), 300.0f);
    spread += want != y[0];
    ok = CHECK_MSG(memcmp(&y[i], &want, sizeof want) == 0, "%s%s on shape %d, act RQ: y[%lld] = %g, want %g",
                   primc_conv_row_name(row), after ? " (requantized after it)" : "", s, (long long)i, y[i], want);
  }
  if (ok && ny > 8) CHECK_MSG(spread > ny / 8, "%s on shape %d, act RQ: the output barely varies", primc_conv_row_name(row), s);
  free(x), free(w), free(bias), free(scale);
  bufs_free(&b);
}

/* row on shape s with epilogue epi, weights packed as the row reads them; 1 when it fits (and was checked) */
static int run_one(int row, int s, int want_row) {
  const primc_conv2d *p = &shapes[s];
  if (!primc_conv_row_fits(row, p, NULL)) return 0;
  int64_t oh, ow;
  primc_conv2d_out_hw(p, &oh, &ow);
  int64_t nx = p->n * p->c * p->h * p->w, kk = (p->c / p->groups) * p->kh * p->kw, nw = p->o * kk;
  int64_t ny = p->n * p->o * oh * ow;
  int epi = s % EPI_KINDS;
  int layout = primc_conv_row_layout(row);
  /* STRIPS rows read plain weights too: every other shape runs them plain */
  if (layout == PRIMC_CONV_W_STRIPS && s % 2) layout = PRIMC_CONV_W_PLAIN;
  primc_conv_plan plan = {row, layout, plan_tile(layout, s)};
  float *x = rand_floats(nx), *w = rand_floats(nw), *bias = rand_floats(p->o), *res = rand_floats(ny);
  run_bufs b = bufs_alloc(p, &plan, ny);
  float *y = b.y, *spare = b.spare, *col = b.col;
  void *wp = b.wp;
  double *r = b.r;
  if (layout == PRIMC_CONV_W_BF16) { /* the reference on the operands rounded as the row rounds them */
    float *xr = malloc(sizeof(float) * (size_t)nx), *wr = malloc(sizeof(float) * (size_t)nw);
    for (int64_t i = 0; i < nx; i++) xr[i] = to_bf16(x[i]);
    for (int64_t i = 0; i < nw; i++) wr[i] = to_bf16(w[i]);
    ref_conv(p, xr, wr, bias, res, epi, r);
    free(xr), free(wr);
  } else {
    ref_conv(p, x, w, bias, res, epi, r);
  }
  primc_conv_epi e = {.lo = -INFINITY, .hi = INFINITY};
  if (epi == EPI_RES_RELU6) e = (primc_conv_epi){.bias = bias, .bias_stride = 1, .res = res, .lo = 0.0f, .hi = 6.0f};
  if (epi == EPI_SILU) e = (primc_conv_epi){.bias = bias, .bias_stride = 1, .lo = -0.25f, .hi = 6.0f, .act = PRIMC_ACT_SILU};
  if (epi == EPI_RES_GELU) e = (primc_conv_epi){.bias = bias, .bias_stride = 1, .res = res, .lo = -0.1f, .hi = 5.0f, .act = PRIMC_ACT_GELU};
  if (epi == EPI_RES_F16) e = (primc_conv_epi){.bias = bias, .bias_stride = 1, .res = res, .lo = 0.0f, .hi = 6.0f, .act = PRIMC_ACT_F16};
  if (epi == EPI_RES_BF16) e = (primc_conv_epi){.bias = bias, .bias_stride = 1, .res = res, .lo = 0.0f, .hi = 6.0f, .act = PRIMC_ACT_BF16};
  for (int64_t i = 0; i < ny; i++) y[i] = NAN; /* an output the row leaves unwritten fails */
  int ok = CHECK_INT(primc_conv_plan_pack(p, &plan, w, wp), PRIMC_OK);
  int st = primc_conv_run(p, &plan, x, wp, &e, y, spare, col);
  ok = ok && CHECK_MSG(st == PRIMC_OK, "%s on shape %d: status %d", primc_conv_row_name(row), s, st);
  ok = ok && CHECK_MSG(primc_conv_last_row() == want_row, "%s on shape %d ran %s", primc_conv_row_name(row), s,
                       primc_conv_row_name(primc_conv_last_row()));
  double tol = 4.0 * (double)(kk + 3) * FLT_EPSILON;
  /* rounded to f16: an f16 value, the reference's or a neighbour (the f32 sum and the f64 one may straddle a
   * rounding boundary) */
  if (epi == EPI_RES_F16) tol += 1.0 / 1024;
  if (epi == EPI_RES_BF16) tol += 1.0 / 128;
  for (int64_t i = 0; i < ny && ok; i++)
    ok = CHECK_MSG(fabs(y[i] - r[i]) <= tol * fmax(1.0, fabs(r[i])) && (epi != EPI_RES_F16 || to_f16(y[i]) == y[i]) &&
                       (epi != EPI_RES_BF16 || to_bf16((float)y[i]) == y[i]),
                   "%s (%s ISA) on shape %d, epilogue %d: y[%lld] = %g, want %g", primc_conv_row_name(row),
                   primc_sgemm_isa_name(primc_sgemm_isa()), s, epi, (long long)i, y[i], r[i]);
  free(x), free(w), free(bias), free(res);
  bufs_free(&b);
  run_rq(row, s, want_row, 0);
  run_rq(row, s, want_row, 1);
  return 1;
}

/* the row where the running CPU lacks what the row needs: its fallback chain's end */
static int fallback_of(int row) {
  while (!primc_isa_covers(primc_sgemm_isa(), primc_conv_row_isa(row)) && primc_conv_row_fallback(row) != row)
    row = primc_conv_row_fallback(row);
  return row;
}

/* A small conv then a depthwise conv, as the PAIR row runs them, against the reference of the two. */
static void check_pair(void) {
  primc_conv2d pw = {1, 8, 12, 14, 24, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  primc_conv2d dw = {1, 24, 12, 14, 24, 3, 3, 24, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0};
  int64_t oh, ow, P1 = 12 * 14;
  primc_conv2d_out_hw(&dw, &oh, &ow);
  float *x = rand_floats(8 * P1), *w1 = rand_floats(24 * 8), *w2 = rand_floats(24 * 9), *b1 = rand_floats(24);
  float *b2 = rand_floats(24), *res = rand_floats(24 * oh * ow), *y = malloc(sizeof(float) * (size_t)(24 * oh * ow));
  float *mid = malloc(sizeof(float) * (size_t)(24 * P1));
  double *m = malloc(sizeof(double) * (size_t)(24 * P1)), *r = malloc(sizeof(double) * (size_t)(24 * oh * ow));
  ref_conv(&pw, x, w1, b1, NULL, EPI_SILU, m);
  for (int64_t i = 0; i < 24 * P1; i++) mid[i] = (float)m[i];
  ref_conv(&dw, mid, w2, b2, res, EPI_RES_RELU6, r);
  primc_conv_epi e1 = {.bias = b1, .bias_stride = 1, .lo = -0.25f, .hi = 6.0f, .act = 1};
  primc_conv_epi e2 = {.bias = b2, .bias_stride = 1, .res = res, .lo = 0.0f, .hi = 6.0f};
  int st = primc_conv2d_then_dw_f32(&pw, x, w1, &e1, &dw, w2, &e2, y);
  if (!primc_isa_covers(primc_sgemm_isa(), primc_conv_row_isa(PRIMC_CONV_ROW_PAIR_DW))) {
    /* PRIMC_ERR_ARG before anything is written: primc_k_conv_pair then runs each conv's own row */
    CHECK_INT(st, PRIMC_ERR_ARG);
    CHECK_INT(primc_conv_plan_pair(&pw, &dw), 0);
    SKIP("pair_dw needs %s", primc_sgemm_isa_name(primc_conv_row_isa(PRIMC_CONV_ROW_PAIR_DW)));
  } else if (CHECK_INT(st, PRIMC_OK)) {
    for (int64_t i = 0; i < 24 * oh * ow; i++)
      if (!CHECK_MSG(fabs(y[i] - r[i]) <= 1e-4 * fmax(1.0, fabs(r[i])), "pair_dw y[%lld] = %g, want %g", (long long)i, y[i], r[i]))
        break;
  }
  free(x), free(w1), free(w2), free(b1), free(b2), free(res), free(y), free(mid), free(m), free(r);
}

/* Row `row` on every shape it fits, under every ISA this CPU runs from the row's own up (the generic rows
 * have vector paths inside). A row whose ISA is missing is skipped after its fallback is checked on the
 * same shapes. Every row must fit some shape here. */
static void check_row(int row) {
  if (primc_conv_row_class(row) == PRIMC_CONV_CLASS_PAIR) {
    check_pair();
    return;
  }
  int fits = 0, best = primc_sgemm_isa(), missing = !primc_isa_covers(best, primc_conv_row_isa(row));
  for (int isa = PRIMC_ISA_SCALAR; isa < PRIMC_ISA_COUNT; isa++) {
    /* a fallback once, on the CPU's ISA; else every ISA this CPU runs that covers the row's */
    if (missing ? isa != best : !primc_isa_covers(isa, primc_conv_row_isa(row)) || !primc_isa_covers(best, isa)) continue;
    if (primc_sgemm_force_isa(isa) != 0) continue;
    for (int s = 0; s < N_SHAPES; s++) fits += run_one(row, s, fallback_of(row));
  }
  primc_sgemm_force_isa(PRIMC_ISA_AUTO);
  /* the bf16 row under each bf16 GEMM row this CPU runs: AVX512-BF16's convs read x in place (bf16_direct.c), the
   * others make the tap-major column rows */
  for (int br = 0; row == PRIMC_CONV_ROW_BF16 && br < PRIMC_BGEMM_ROW_COUNT; br++)
    if (br != primc_bgemm_row_active() && primc_bgemm_force_row(br) == 0) {
      for (int s = 0; s < N_SHAPES; s++) run_one(row, s, fallback_of(row));
      primc_bgemm_force_row(-1);
    }
  CHECK_MSG(fits > 0, "no shape of the test fits %s: add one", primc_conv_row_name(row));
  if (missing)
    SKIP("%s needs %s (its fallback %s was checked)", primc_conv_row_name(row),
         primc_sgemm_isa_name(primc_conv_row_isa(row)), primc_conv_row_name(fallback_of(row)));
}

#define PRIMC_CONV_ROW(id, ...) \
  PC_TEST(conv_row_##id) { check_row(PRIMC_CONV_ROW_##id); }
#include "runtime/conv/conv_rows.def"
#undef PRIMC_CONV_ROW

/* Each fallback reads its row's weight layout, needs no more ISA, and a chain ends in a row of its own. */
PC_TEST(conv_rows_table) {
  for (int r = 0; r < PRIMC_CONV_ROW_COUNT; r++) {
    int f = primc_conv_row_fallback(r), lr = primc_conv_row_layout(r), lf = primc_conv_row_layout(f);
    CHECK_MSG(primc_conv_row_find(primc_conv_row_name(r)) == r, "row %d's name %s", r, primc_conv_row_name(r));
    CHECK_MSG(lr == lf, "%s falls back to %s, which reads other weights", primc_conv_row_name(r), primc_conv_row_name(f));
    CHECK_MSG(primc_isa_covers(primc_conv_row_isa(r), primc_conv_row_isa(f)), "%s's fallback needs more", primc_conv_row_name(r));
    CHECK_MSG(primc_conv_row_class(f) == primc_conv_row_class(r), "%s's fallback is of another class", primc_conv_row_name(r));
    CHECK_MSG(f == r || primc_conv_row_isa(r) > PRIMC_ISA_SCALAR || primc_conv_row_fallback(f) == f,
              "%s's fallback chain is longer than one", primc_conv_row_name(r));
  }
  CHECK_INT(primc_conv_row_find("no_such_row"), -1);
  CHECK(primc_conv_row_name(PRIMC_CONV_ROW_COUNT) == NULL);
}

/* The planner: a plain plan for plain weights, the forced row where it fits, the ranking where it does not,
 * and no plan for weights in a layout no row of the conv's class reads. */
PC_TEST(conv_plan_force_and_layouts) {
  primc_conv2d c3 = {1, 16, 20, 20, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0};
  primc_conv2d dw = {1, 16, 20, 20, 16, 3, 3, 16, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0};
  primc_conv_plan plan;
  primc_conv_plan_opts plain = {.layout = PRIMC_CONV_W_PLAIN, .has_scratch = 1};
  CHECK_INT(primc_conv_plan_make(&c3, &plain, &plan), PRIMC_OK);
  CHECK_INT(primc_conv_row_layout(plan.row), PRIMC_CONV_W_STRIPS);
  CHECK_INT(plan.layout, PRIMC_CONV_W_PLAIN);
  primc_conv_plan_opts forced = plain;
  forced.force = "im2col_implicit";
  CHECK_INT(primc_conv_plan_make(&c3, &forced, &plan), PRIMC_OK);
  CHECK_INT(plan.row, PRIMC_CONV_ROW_IM2COL_IMPLICIT);
  forced.force = "dw_plane"; /* not a row this conv's class has: ranked as usual */
  CHECK_INT(primc_conv_plan_make(&c3, &forced, &plan), PRIMC_OK);
  CHECK(plan.row != PRIMC_CONV_ROW_DW_PLANE);
  CHECK_INT(primc_conv_plan_make(&dw, &forced, &plan), PRIMC_OK);
  CHECK_INT(plan.row, PRIMC_CONV_ROW_DW_PLANE);
  primc_conv_plan_opts packable = {.packable = 1, .tile_mr = primc_sgemm_mr(), .has_scratch = 1, .force = "winograd_f2x3"};
  CHECK_INT(primc_conv_plan_make(&c3, &packable, &plan), PRIMC_OK);
  CHECK_INT(plan.row, PRIMC_CONV_ROW_WINOGRAD);
  CHECK_INT(plan.layout, PRIMC_CONV_W_WINOGRAD);
  CHECK_INT(plan.tile_mr, primc_sgemm_mr());
  packable.has_scratch = 0; /* Winograd needs the scratch: not forced then */
  CHECK_INT(primc_conv_plan_make(&c3, &packable, &plan), PRIMC_OK);
  CHECK(plan.row != PRIMC_CONV_ROW_WINOGRAD);
  primc_conv_plan_opts panels = {.layout = PRIMC_CONV_W_PANELS, .has_scratch = 1};
  CHECK_INT(primc_conv_plan_make(&c3, &panels, &plan), PRIMC_OK);
  CHECK_INT(plan.row, PRIMC_CONV_ROW_GEMM_T);
  CHECK_INT(primc_conv_plan_make(&dw, &panels, &plan), PRIMC_ERR_ARG);
  /* lanes weights: the direct lanes row with AVX-512 or AVX2, else the loop that reads the same layout */
  primc_conv_plan_opts lanes = {.layout = PRIMC_CONV_W_LANES};
  CHECK_INT(primc_conv_plan_make(&c3, &lanes, &plan), PRIMC_OK);
  CHECK_INT(plan.row, primc_isa_covers(primc_sgemm_isa(), PRIMC_ISA_AVX2) ? PRIMC_CONV_ROW_DIRECT_LANES
                                                                           : PRIMC_CONV_ROW_LANES_LOOP);
  /* bf16 only when asked (--autocast bf16), and then for deep sums into many channels (packable weights, not
   * depthwise); a 16-channel conv stays f32 */
  primc_conv2d deep = {1, 128, 14, 14, 128, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0};
  primc_conv_plan_opts bf = {.packable = 1, .tile_mr = primc_sgemm_mr(), .has_scratch = 1, .bf16 = 1};
  CHECK_INT(primc_conv_plan_make(&deep, &bf, &plan), PRIMC_OK);
  CHECK_INT(plan.row, PRIMC_CONV_ROW_BF16);
  CHECK_INT(plan.layout, PRIMC_CONV_W_BF16);
  CHECK_INT(primc_conv_plan_make(&c3, &bf, &plan), PRIMC_OK);
  CHECK(plan.row != PRIMC_CONV_ROW_BF16);
  CHECK_INT(primc_conv_plan_make(&dw, &bf, &plan), PRIMC_OK);
  CHECK(plan.row != PRIMC_CONV_ROW_BF16);
  /* weights that stream from memory: the bf16 plan's tile word says so, only then */
  CHECK_INT(primc_conv_plan_make(&deep, &bf, &plan), PRIMC_OK);
  CHECK_INT(plan.tile_mr, 0);
  bf.weights_stream = 1;
  CHECK_INT(primc_conv_plan_make(&deep, &bf, &plan), PRIMC_OK);
  CHECK_INT(plan.tile_mr, PRIMC_CONV_BF16_STREAM);
  CHECK_INT(primc_conv_plan_make(&c3, &bf, &plan), PRIMC_OK);
  CHECK(plan.row == PRIMC_CONV_ROW_BF16 || plan.tile_mr != PRIMC_CONV_BF16_STREAM);
  bf.weights_stream = 0;
  /* the AMD tuning's image stems: the 7x7/2 in bf16 (3 channels padded to 4, read in place), the 3x3/2 (K = 27) f32 */
  primc_conv2d stem7 = {1, 3, 224, 224, 64, 7, 7, 1, 2, 2, 1, 1, 3, 3, 3, 3, 0, 0, 0, 0, 0, 0, 0};
  primc_conv2d stem3 = {1, 3, 224, 224, 32, 3, 3, 1, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0};
  if (strstr(primc_conv_tuning_name(), "(AMD)")) {
    CHECK_INT(primc_conv_plan_make(&stem7, &bf, &plan), PRIMC_OK);
    CHECK_INT(plan.row, PRIMC_CONV_ROW_BF16);
    CHECK_INT(primc_conv_plan_make(&stem3, &bf, &plan), PRIMC_OK);
    CHECK(plan.row != PRIMC_CONV_ROW_BF16);
  }
  /* the AMX tuning: convs over blocks of 32 channels in place at any size, the 7x7/2 stem too (K = 147), not the
   * 3x3/2 one (K = 27) nor a narrow 3x3 the GEMM path would run (8 -> 128, K = 72) */
  primc_conv2d c64 = {1, 64, 56, 56, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0};
  primc_conv2d narrow = {1, 8, 10, 10, 128, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0};
  if (strstr(primc_conv_tuning_name(), "with AMX")) {
    const primc_conv2d *want[] = {&c64, &stem7}, *not[] = {&stem3, &narrow};
    for (int i = 0; i < 2; i++) {
      CHECK_INT(primc_conv_plan_make(want[i], &bf, &plan), PRIMC_OK);
      CHECK_INT(plan.row, PRIMC_CONV_ROW_BF16);
      CHECK_INT(primc_conv_plan_make(not[i], &bf, &plan), PRIMC_OK);
      CHECK(plan.row != PRIMC_CONV_ROW_BF16);
    }
  }
  /* a batch of 8 512-channel 7x7 maps (16 tiles an image): Winograd over the round's 128 tiles where the batch is
   * fixed and the weights packed once (AVX-512 tunings; AVX2's fill rule leaves 7x7 maps alone), not per image;
   * for weights packed by each call where that packing runs on zmm */
  primc_conv2d b8 = {8, 512, 7, 7, 512, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0};
  primc_conv_plan_opts per_image = {.packable = 1, .tile_mr = primc_sgemm_mr(), .has_scratch = 1}, batch = per_image;
  batch.batch_tiles = 1, batch.weights_once = 1;
  CHECK_INT(primc_conv_plan_make(&b8, &per_image, &plan), PRIMC_OK);
  CHECK(plan.row != PRIMC_CONV_ROW_WINOGRAD);
  CHECK_INT(primc_conv_plan_make(&b8, &batch, &plan), PRIMC_OK);
  if (strcmp(primc_conv_tuning_name(), "AVX2")) CHECK_INT(plan.row, PRIMC_CONV_ROW_WINOGRAD);
  primc_conv_plan_opts per_call = batch;
  per_call.weights_once = 0;
  CHECK_INT(primc_conv_plan_make(&b8, &per_call, &plan), PRIMC_OK);
  CHECK((plan.row == PRIMC_CONV_ROW_WINOGRAD) == (primc_sgemm_isa() == PRIMC_ISA_AVX512));
  b8.n = 1;
  CHECK_INT(primc_conv_plan_make(&b8, &per_call, &plan), PRIMC_OK);
  CHECK(plan.row != PRIMC_CONV_ROW_WINOGRAD);
  /* one image's 16 tiles: Winograd on Intel's AVX-512 tunings where the weights are packed once and pixels x
   * channels reach the row's work (512 at 7x7), not for 256 at 7x7, nor for weights packed at every call */
  primc_conv_plan_opts once = per_image;
  once.weights_once = 1;
  CHECK_INT(primc_conv_plan_make(&b8, &once, &plan), PRIMC_OK);
  if (strstr(primc_conv_tuning_name(), "(Intel)")) CHECK_INT(plan.row, PRIMC_CONV_ROW_WINOGRAD);
  else CHECK(plan.row != PRIMC_CONV_ROW_WINOGRAD);
  CHECK_INT(primc_conv_plan_make(&b8, &per_image, &plan), PRIMC_OK);
  CHECK(plan.row != PRIMC_CONV_ROW_WINOGRAD);
  primc_conv2d c256 = {1, 256, 7, 7, 256, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0};
  CHECK_INT(primc_conv_plan_make(&c256, &once, &plan), PRIMC_OK);
  CHECK(plan.row != PRIMC_CONV_ROW_WINOGRAD);
  bf.bf16 = 0;
  CHECK_INT(primc_conv_plan_make(&deep, &bf, &plan), PRIMC_OK);
  CHECK(plan.row != PRIMC_CONV_ROW_BF16 && plan.layout != PRIMC_CONV_W_BF16);
  CHECK(primc_conv_plan_candidates(&deep, &bf, NULL, 0) > 0);
  primc_conv_plan cands[PRIMC_CONV_ROW_COUNT];
  int nc = primc_conv_plan_candidates(&deep, &bf, cands, PRIMC_CONV_ROW_COUNT);
  for (int i = 0; i < nc; i++) CHECK(cands[i].row != PRIMC_CONV_ROW_BF16);
}

/* 1-D convs: a long kernel over one input channel runs on its windows (a spectrogram as a conv), a short one
 * (wav2vec's 10 taps) on generated im2col rows; on Intel's two-FMA cores a deep 1-D conv takes those rows
 * rather than the phase images */
PC_TEST(conv_plan_1d) {
  primc_conv2d spec = {1, 1, 1, 16000, 80, 1, 512, 1, 1, 160, 1, 1, 0, 256, 0, 256, 0, 0, 0, 0, 0, 0, 0};
  primc_conv2d short_k = {1, 1, 1, 16000, 512, 1, 10, 1, 1, 5, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  primc_conv2d deep = {1, 384, 1, 1001, 384, 1, 3, 1, 1, 2, 1, 1, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0};
  primc_conv_plan_opts o = {.packable = 1, .tile_mr = primc_sgemm_mr(), .has_scratch = 1};
  primc_conv_plan plan;
  CHECK_INT(primc_conv_plan_make(&spec, &o, &plan), PRIMC_OK);
  CHECK_INT(plan.row, PRIMC_CONV_ROW_WINDOWS);
  CHECK_INT(primc_conv_plan_make(&short_k, &o, &plan), PRIMC_OK);
  CHECK_INT(plan.row, PRIMC_CONV_ROW_IM2COL_IMPLICIT);
  CHECK_INT(primc_conv_plan_make(&deep, &o, &plan), PRIMC_OK);
  if (strstr(primc_conv_tuning_name(), "(Intel)"))
    CHECK_INT(plan.row, PRIMC_CONV_ROW_IM2COL_IMPLICIT);
  else
    CHECK(plan.row != PRIMC_CONV_ROW_WINDOWS);
}

/* ResNet's downsampling shortcuts, 1x1 at stride 2: the Intel and AVX2 tunings run them as im2col GEMMs (both
 * direct rows ran them slower on a Xeon and on Zen 3); elsewhere they may take a direct row, but never the
 * stride-1-only GEMM rows */
PC_TEST(conv_plan_strided_1x1) {
  primc_conv2d c28 = {1, 512, 28, 28, 1024, 1, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  primc_conv2d c15 = {1, 256, 56, 56, 512, 1, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  primc_conv_plan_opts o = {.packable = 1, .tile_mr = primc_sgemm_mr(), .has_scratch = 1};
  const primc_conv2d *cs[2] = {&c28, &c15};
  for (int i = 0; i < 2; i++) {
    primc_conv_plan plan;
    if (!CHECK_INT(primc_conv_plan_make(cs[i], &o, &plan), PRIMC_OK)) continue;
    int im2col = plan.row == PRIMC_CONV_ROW_IM2COL_EXPLICIT || plan.row == PRIMC_CONV_ROW_IM2COL_IMPLICIT;
    if (strstr(primc_conv_tuning_name(), "(Intel)") || !strcmp(primc_conv_tuning_name(), "AVX2"))
      CHECK_MSG(im2col, "conv %d: %s", i, primc_conv_row_name(plan.row));
    else
      CHECK_MSG(plan.row != PRIMC_CONV_ROW_GEMM_1X1, "conv %d: %s", i, primc_conv_row_name(plan.row));
  }
}

/* The AVX2 tuning's choices, a row per conv (figures: bench/conv_rows.md): every stride-1 1x1 on the GEMM reading
 * x in place (1.1-3x slower in the ymm lanes), the stem in the lanes, 3x3s widening 2x or more from fewer than 16
 * channels, or onto fewer channels than the lanes' 32, over phase images where the padding columns are at most 1/8
 * of a row (else as im2col GEMMs; 1-D convs too), other ones in the lanes (Winograd from 128 channels on maps of 16
 * 2x2 tiles or more whose outputs lie 80% inside the map), depthwise convs in dw_lanes8 up to output rows of 112 pixels, on
 * the planes past them (dw_rows8), groups of 8 channels in group_lanes8; a batch of 7x7 maps into 256 channels or
 * more, not 1x1s, as one GEMM over the images (im2col_batch). */
PC_TEST(conv_plan_avx2) {
  static const struct {
    primc_conv2d p;
    const char *row;
  } want[] = {
      {{1, 16, 112, 112, 96, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, "gemm_1x1"},         /* MobileNetV2 */
      {{1, 64, 56, 56, 256, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, "gemm_1x1"},          /* ResNet-50 */
      {{1, 256, 56, 56, 64, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, "gemm_1x1"},
      {{1, 3, 224, 224, 64, 7, 7, 1, 2, 2, 1, 1, 3, 3, 3, 3, 0, 0, 0, 0, 0, 0, 0}, "direct_lanes"},      /* stem */
      {{1, 64, 13, 13, 256, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0}, "direct_lanes"},      /* SqueezeNet */
      {{1, 16, 55, 55, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0}, "direct_lanes"},
      {{1, 8, 56, 56, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0}, "direct_phase"},      /* from 8 */
      {{1, 8, 13, 13, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0}, "im2col_explicit"},
      {{1, 64, 80, 112, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0}, "direct_phase"},      /* textdet */
      {{1, 64, 1, 400, 64, 1, 5, 1, 1, 1, 1, 1, 0, 2, 0, 2, 0, 0, 0, 0, 0, 0, 0}, "im2col_implicit"},  /* 1-D */
      {{1, 64, 56, 56, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0}, "direct_lanes"},      /* ResNet */
      {{1, 512, 10, 14, 512, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0}, "winograd_f2x3"},   /* textdet */
      {{1, 256, 8, 8, 256, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0}, "winograd_f2x3"},
      {{1, 512, 7, 7, 512, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0}, "direct_lanes"},      /* odd side */
      {{1, 96, 112, 112, 96, 3, 3, 96, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0}, "dw_lanes8"},     /* MobileNetV2 */
      {{1, 32, 112, 112, 32, 3, 3, 32, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0}, "dw_lanes8"},
      {{1, 16, 224, 224, 16, 3, 3, 16, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0}, "dw_rows8"},
      {{1, 240, 28, 28, 240, 5, 5, 240, 1, 1, 1, 1, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0, 0}, "dw_lanes8"},    /* EfficientNet */
      {{1, 240, 28, 28, 240, 3, 3, 240, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0}, "dw_lanes8"},
      {{1, 960, 7, 7, 960, 3, 3, 960, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0}, "dw_lanes8"},
      {{1, 48, 112, 112, 48, 3, 3, 6, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0}, "group_lanes8"},     /* RegNet */
      {{8, 512, 7, 7, 512, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0}, "im2col_batch"},      /* batch 8 */
      {{8, 256, 14, 14, 512, 3, 3, 1, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0}, "im2col_batch"},
      {{8, 128, 7, 7, 128, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0}, "direct_lanes"},      /* few og */
      {{8, 2048, 7, 7, 512, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, "gemm_1x1"},
      {{8, 256, 14, 14, 256, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0}, "winograd_f2x3"},
  };
  if (strcmp(primc_conv_tuning_name(), "AVX2")) {
    SKIP("tuning %s, not AVX2", primc_conv_tuning_name());
    return;
  }
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    const primc_conv2d *p = &want[i].p;
    /* depthwise weights stay plain; the others packed as the row reads them */
    primc_conv_plan_opts o = {.packable = p->groups != p->c, .tile_mr = primc_sgemm_mr(), .has_scratch = 1,
                              .threads = 1};
    primc_conv_plan plan;
    if (CHECK_INT(primc_conv_plan_make(p, &o, &plan), PRIMC_OK))
      CHECK_MSG(!strcmp(primc_conv_row_name(plan.row), want[i].row), "conv %zu: %s, want %s", i,
                primc_conv_row_name(plan.row), want[i].row);
  }
}

/* SiLU and GELU in the conv epilogue of sums far from 0 (+-20 .. +-400): e^-v and e^(-v^2) below f32's
 * normal range are 0 without a subnormal on the way (each a microcode assist on x86), which the underflow flag
 * would show; the values against the f64 formulas. 16 outputs of one channel: one task, on this thread. */
PC_TEST(conv_epilogue_act_no_subnormal) {
  enum { P = 16 };
  primc_conv2d p = {1, 1, 1, P, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  float x[P], w[1] = {1.0f}, y[P], spare[P], col[64];
  for (int i = 0; i < P; i++) x[i] = (i % 2 ? -1.0f : 1.0f) * (20.0f + 25.0f * (float)i);
  for (int act = PRIMC_ACT_SILU; act <= PRIMC_ACT_GELU; act++) {
    primc_conv_epi e = {.lo = -INFINITY, .hi = INFINITY, .act = act};
    feclearexcept(FE_ALL_EXCEPT);
    if (!CHECK_INT(primc_conv2d_f32_epi(&p, x, w, &e, y, spare, col), PRIMC_OK)) continue;
    CHECK_MSG(!fetestexcept(FE_UNDERFLOW), "act %d: underflow (a subnormal intermediate)", act);
    for (int i = 0; i < P; i++) {
      double v = x[i], want = act == PRIMC_ACT_SILU ? v / (1.0 + exp(-v)) : 0.5 * v * (1.0 + erf(v / sqrt(2.0)));
      if (!CHECK_MSG(fabs(y[i] - want) <= 1e-6 * fabs(v), "act %d of %g: %g, want %g", act, v, y[i], want)) break;
    }
  }
}

/* GELU in the epilogue on this CPU's vectors (cv_erf256 / cv_erf512) over [-6, 6] and around the erf's branch
 * point (|x / sqrt 2| = 1): within 3 ulp of erf's scale (2^-24 |v| / 2) and the result's last rounding of the
 * f64 formula on the same scaled input, NaN kept */
PC_TEST(conv_epilogue_gelu_ulps) {
  enum { N = 4096 };
  float *acc = malloc(sizeof(float) * N), *y = malloc(sizeof(float) * N);
  for (int i = 0; i < N; i++)
    acc[i] = i < 3072 ? -6.0f + 12.0f * (float)i / 3071 : (i % 2 ? -1.0f : 1.0f) * (1.41421f + (float)(i - 3072) * 1e-6f);
  acc[N - 1] = NAN;
  primc_conv_epi e = {.lo = -INFINITY, .hi = INFINITY, .act = PRIMC_ACT_GELU};
  primc_conv_epi_apply(&e, 1, 1, N, acc, y, 1);
  for (int i = 0; i < N - 1; i++) {
    double v = acc[i], want = 0.5 * v * (1.0 + erf((double)(acc[i] * 0.70710678f)));
    double tol = 3 * 0x1p-24 * fabs(0.5 * v) + fabs(nextafterf((float)want, INFINITY) - (float)want);
    if (!CHECK_MSG(fabs(y[i] - want) <= tol, "GELU(%.9g) = %.9g, want %.9g", v, y[i], want)) break;
  }
  CHECK_MSG(isnan(y[N - 1]), "GELU(NaN) = %g", y[N - 1]);
  free(acc), free(y);
}

/* act BF16 (--autocast bf16's rounding of a conv's output where no bf16 dot products are) on the scalar, AVX2 and
 * AVX-512 epilogues this CPU runs: ties to even, either sign, a carry into the exponent, the largest finite values
 * rounding to infinity, subnormals (bf16's below 2^-126 in steps of 2^-133, ties among them), infinities and a NaN
 * kept NaN (not -0: the vector epilogues add a zero bias); against ldexp's rounding, not the bit trick */
PC_TEST(conv_epilogue_bf16_rounding) {
  enum { N = 40 };
  float acc[N], y[N];
  const float fixed[] = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, -(1.0f + 0x1p-8f), 1.0f + 0x1p-8f + 0x1p-20f,
                         0x1.ffp0f, 0x1.ff8p0f, FLT_MAX, -FLT_MAX, 0x1p-140f, 3 * 0x1p-134f, -5 * 0x1p-134f, 0.0f,
                         INFINITY, -INFINITY, NAN};
  int nf = (int)(sizeof fixed / sizeof *fixed);
  for (int i = 0; i < N; i++) acc[i] = i < nf ? fixed[i] : (float)((i * 7919) % 1000 - 500) / 77.0f;
  primc_conv_epi e = {.lo = -INFINITY, .hi = INFINITY, .act = PRIMC_ACT_BF16};
  const int isas[] = {PRIMC_ISA_SCALAR, PRIMC_ISA_AVX2, PRIMC_ISA_AVX512};
  for (int k = 0; k < 3; k++) {
    if (primc_sgemm_force_isa(isas[k]) != 0) continue;
    for (int i = 0; i < N; i++) y[i] = 12345.0f;
    primc_conv_epi_apply(&e, 1, 1, N, acc, y, 1);
    for (int i = 0; i < N; i++) {
      double a = acc[i], want = a;
      if (!isnan(a) && !isinf(a) && a != 0) { /* 8 significant bits, in steps of 2^-133 below 2^-126 */
        int q = ilogb(a) < -126 ? -133 : ilogb(a) - 7;
        want = ldexp(nearbyint(ldexp(a, -q)), q);
      }
      if (fabs(a) > 0x1.ff8p127) want = a > 0 ? INFINITY : -INFINITY; /* past bf16's largest finite value */
      int good = isnan(a) ? isnan(y[i]) : y[i] == want && !signbit(y[i]) == !signbit(want);
      if (!CHECK_MSG(good, "%s: bf16(%a) = %a, want %a", primc_sgemm_isa_name(isas[k]), a, y[i], want)) break;
    }
  }
  primc_sgemm_force_isa(PRIMC_ISA_AUTO);
}

/* Depthwise rows with y over x (in place, or a row further on): the rows write y by planes and bands while later
 * ones still read x (dw_plane and dw_lanes8 both gave wrong sums), so the executor makes the result in the spare
 * buffer and copies it. Each depthwise row this CPU runs, a bias + SiLU + clamp epilogue (the one the lanes rows
 * fuse), against the reference on the original x. */
PC_TEST(conv_dw_in_place) {
  primc_conv2d p = {1, 20, 9, 30, 20, 3, 3, 20, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0};
  int64_t n = 20 * 9 * 30;
  float *x = rand_floats(n), *w = rand_floats(20 * 9), *bias = rand_floats(20), *buf = malloc(sizeof(float) * (size_t)(n + 30));
  float *spare = malloc(sizeof(float) * (size_t)n);
  double *r = malloc(sizeof(double) * (size_t)n);
  ref_conv(&p, x, w, bias, NULL, EPI_SILU, r);
  primc_conv_epi e = {.bias = bias, .bias_stride = 1, .lo = -0.25f, .hi = 6.0f, .act = PRIMC_ACT_SILU};
  int ran = 0;
  for (int row = 0; row < PRIMC_CONV_ROW_COUNT; row++) {
    if (primc_conv_row_class(row) != PRIMC_CONV_CLASS_DEPTHWISE || !primc_isa_covers(primc_sgemm_isa(), primc_conv_row_isa(row)))
      continue;
    for (int64_t at = 0; at <= 30; at += 30) { /* y at x, or one input row on */
      primc_conv_plan plan = {row, PRIMC_CONV_W_PLAIN, 0};
      memcpy(buf, x, sizeof(float) * (size_t)n);
      float *y = buf + at;
      if (!CHECK_INT(primc_conv_run(&p, &plan, buf, w, &e, y, spare, NULL), PRIMC_OK) ||
          !CHECK_STR(primc_conv_row_name(primc_conv_last_row()), primc_conv_row_name(row)))
        continue;
      ran++;
      for (int64_t i = 0; i < n; i++)
        if (!CHECK_MSG(fabs(y[i] - r[i]) <= 1e-5 * fmax(1.0, fabs(r[i])), "%s, y at x + %lld: y[%lld] = %g, want %g",
                       primc_conv_row_name(row), (long long)at, (long long)i, y[i], r[i]))
          break;
    }
  }
  CHECK(ran > 0);
  free(x), free(w), free(bias), free(buf), free(spare), free(r);
}

/* Winograd's packing on zmm (16 kernels at a time, each xi's block transposed into its strip) writes the bytes the
 * kernel-at-a-time path writes, plain and flipped, at two tile heights, channel counts past and short of 16 */
PC_TEST(conv_winograd_pack_zmm_matches_scalar) {
  if (primc_sgemm_isa() != PRIMC_ISA_AVX512) {
    SKIP("no AVX-512 here");
    return;
  }
  static const int64_t sizes[][2] = {{64, 64}, {70, 33}, {5, 17}, {129, 16}};
  for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
    int64_t C = sizes[s][0], O = sizes[s][1];
    primc_conv2d p = {.n = 2, .c = C, .h = 9, .w = 9, .o = O, .kh = 3, .kw = 3, .groups = 1, .stride_h = 1,
                      .stride_w = 1, .dil_h = 1, .dil_w = 1, .pad_t = 1, .pad_l = 1, .pad_b = 1, .pad_r = 1};
    float *w = malloc(sizeof(float) * (size_t)(O * C * 9));
    for (int64_t i = 0; i < O * C * 9; i++) w[i] = (float)((i * 7919) % 1000) * 0.001f - 0.5f;
    size_t n = primc_conv2d_winograd_bytes(&p);
    for (int fl = 0; fl < 2; fl++)
      for (int mr = 5; mr <= 14; mr += 9) {
        float *a = calloc(1, n), *b = calloc(1, n);
        int (*pack)(const primc_conv2d *, const float *, int, float *) =
            fl ? primc_conv2d_pack_winograd_flipped : primc_conv2d_pack_winograd;
        CHECK_INT(pack(&p, w, mr, a), PRIMC_OK);
        CHECK_INT(primc_sgemm_force_isa(PRIMC_ISA_AVX2), 0);
        CHECK_INT(pack(&p, w, mr, b), PRIMC_OK);
        primc_sgemm_force_isa(PRIMC_ISA_AUTO);
        CHECK_MSG(a && b && !memcmp(a, b, n), "%lld -> %lld, flipped %d, mr %d: the zmm packing differs", (long long)C,
                  (long long)O, fl, mr);
        free(a), free(b);
      }
    free(w);
  }
}
