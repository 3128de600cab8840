/* tests/unit/test_conv_i8.c: int32 convs of quantized models (u8 or s8 input less a constant zero point, constant
 * weights less theirs) through the -O2 pipeline: the conv_i8 call on the int8 GEMM, results equal to int64 sums
 * computed here and wrapped to int32; weights too wide for s8 keep the exact floating-point path. */
#include "codegen/codegen.h"
#include "ir/ir.h"
#include "passes/passes.h"
#include "runtime/primc_rt.h"
#include "tests/test.h"
#include "tests/unit/helpers.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

typedef struct ci8_case {
  int s;  /* spatial rank: 1 or 2 */
  int s8; /* the input is s8 (else u8) */
  int64_t n, c, o, h, w, kh, kw, stride, pad, dil, groups, zx;
} ci8_case;

static uint32_t lcg(uint32_t *s) { return *s = *s * 1664525u + 1013904223u, *s >> 24; }

/* 1: zx is a run-time input (a u8 scalar "z"), as quantize_dynamic's ConvInteger reads DynamicQuantizeLinear's zero
 * point: no range is proven, the call finds each image's */
static int zx_input;

/* 1: trained-looking s8 weights (most within +-40, one in fifty near +-110) instead of a uniform span: the AVX2 row
 * then runs its split form, each pair of large weights of one sign an excess on a list */
static int trained_weights;

/* y = conv(i32(x) - zx, w) for a constant w whose values per output channel span wspan (with keep_i32, i32(x) - zx
 * is a graph output too, so the call reads it as i32; else the kernel computing it stores x's bytes and the call
 * reads those); the listing must name call and not not_call, and y equal the int64 sums */
static void check_conv_x(const ci8_case *t, int wspan, const char *call, const char *not_call, int keep_i32,
                         const char *tag) {
  int any_range = zx_input || t->zx > 255 || t->zx < -128;
  int s = t->s;
  int64_t xd[4] = {t->n, t->c, t->h, t->w}, wd[4] = {t->o, t->c / t->groups, t->kh, t->kw};
  if (s == 1) xd[2] = t->w, wd[2] = t->kw;
  int64_t nx = t->n * t->c * t->h * t->w, nw = t->o * (t->c / t->groups) * t->kh * t->kw;
  int8_t *xs = malloc((size_t)nx);
  int32_t *w = malloc(sizeof *w * (size_t)nw);
  uint32_t seed = 11;
  for (int64_t i = 0; i < nx; i++) xs[i] = (int8_t)lcg(&seed);
  for (int64_t i = 0; i < nw; i++) /* each output channel its own zero point */
    w[i] = (int32_t)(lcg(&seed) * (uint32_t)wspan / 256) - (int32_t)(i / (nw / t->o) % 7) * 9 - wspan / 2;
  for (int64_t i = 0; trained_weights && i < nw; i++) {
    uint32_t r = lcg(&seed);
    w[i] = r < 5 ? 100 + (int32_t)(lcg(&seed) % 28) - (int32_t)(r % 2) * 227 : (int32_t)(lcg(&seed) % 81) - 40;
  }
  pc_graph *g = pc_graph_new();
  pc_value *x = pc_input_add(g, "x", pc_type_make(t->s8 ? PC_i8 : PC_u8, 2 + s, xd));
  int32_t zx = (int32_t)t->zx;
  uint8_t zx8 = (uint8_t)t->zx;
  pc_value *zv = zx_input ? pc_convert(g, pc_input_add(g, "z", pc_type_make(PC_u8, 0, NULL)), PC_i32)
                          : pc_const(g, pc_type_make(PC_i32, 0, NULL), &zx);
  pc_value *z = pc_broadcast_in_dim(g, zv, 2 + s, xd, NULL);
  pc_value *xi = pc_sub(g, pc_convert(g, x, PC_i32), z);
  pc_value *wc = pc_const(g, pc_type_make(PC_i32, 2 + s, wd), w);
  int64_t st[2] = {t->stride, t->stride}, pd[2] = {t->pad, t->pad}, dl[2] = {t->dil, t->dil}, one[2] = {1, 1};
  pc_attr a[6] = {pc_a_ints("stride", st, s), pc_a_ints("pad_lo", pd, s), pc_a_ints("pad_hi", pd, s),
                  pc_a_ints("dilation", dl, s), pc_a_ints("lhs_dilation", one, s), pc_a_int("groups", t->groups)};
  pc_output_add(g, pc_build(g, PC_OP_conv, (pc_value *[]){xi, wc}, 2, a, 6));
  if (keep_i32) pc_output_add(g, xi);
  pc_pipeline_opts po = {.opt_level = 2};
  primc_igemm_force_conv_min_k(64); /* the call's path at every shape here, whichever int8 row this CPU has */
  int built = g->status == PC_OK && pc_pipeline_run(g, &po) == PC_OK;
  primc_igemm_force_conv_min_k(-1);
  if (CHECK_MSG(built, "%s: %s", tag, pc_error(g))) {
    char *text = pc_test_kernels_text(g);
    CHECK_MSG(text && strstr(text, call), "%s: no %s in the listing", tag, call);
    CHECK_MSG(text && !strstr(text, not_call), "%s: %s in the listing", tag, not_call);
    if (strstr(call, "conv_i8")) {
      const char *want = any_range ? "input stored as i32 with no range proven"
                         : keep_i32 ? "input stored as i32" : t->s8 ? "input stored as s8" : "input stored as u8";
      CHECK_MSG(text && strstr(text, want), "%s: no '%s' in the listing", tag, want);
    }
    free(text);
    pc_tensor in[2] = {{t->s8 ? PC_i8 : PC_u8, 2 + s, {xd[0], xd[1], xd[2], xd[3]}, xs}, {PC_u8, 0, {0}, &zx8}}, outs[2];
    if (pc_test_run_compiled(g, 2, in, outs, tag)) {
      pc_tensor out = outs[0];
      if (keep_i32) free(outs[1].data);
      const int32_t *y = out.data;
      int64_t H = s == 2 ? t->h : 1, KH = s == 2 ? t->kh : 1, cg = t->c / t->groups, og = t->o / t->groups;
      int64_t oh = s == 2 ? (H + 2 * t->pad - t->dil * (KH - 1) - 1) / t->stride + 1 : 1;
      int64_t ow = (t->w + 2 * t->pad - t->dil * (t->kw - 1) - 1) / t->stride + 1;
      int64_t ph = s == 2 ? t->pad : 0, bad = 0;
      for (int64_t n = 0; n < t->n && !bad; n++)
        for (int64_t o = 0; o < t->o && !bad; o++)
          for (int64_t oy = 0; oy < oh && !bad; oy++)
            for (int64_t ox = 0; ox < ow && !bad; ox++) {
              int64_t want = 0, g0 = o / og * cg;
              for (int64_t ci = 0; ci < cg; ci++)
                for (int64_t ky = 0; ky < KH; ky++)
                  for (int64_t kx = 0; kx < t->kw; kx++) {
                    int64_t iy = oy * (s == 2 ? t->stride : 1) - ph + ky * (s == 2 ? t->dil : 1);
                    int64_t ix = ox * t->stride - t->pad + kx * t->dil;
                    if (iy < 0 || iy >= H || ix < 0 || ix >= t->w) continue;
                    int8_t raw = xs[((n * t->c + g0 + ci) * H + iy) * t->w + ix];
                    int64_t xv = (t->s8 ? (int64_t)raw : (int64_t)(uint8_t)raw) - t->zx;
                    want += xv * w[((o * cg + ci) * KH + ky) * t->kw + kx];
                  }
              int64_t at = ((n * t->o + o) * oh + oy) * ow + ox;
              bad = !CHECK_MSG(y[at] == (int32_t)(uint32_t)(uint64_t)want, "%s: y[%lld] = %d, want %lld", tag,
                               (long long)at, y[at], (long long)want);
            }
      free(out.data);
    }
  }
  pc_graph_free(g);
  free(xs);
  free(w);
}

static void check_conv(const ci8_case *t, int wspan, const char *call, const char *not_call, const char *tag) {
  check_conv_x(t, wspan, call, not_call, 0, tag);
}

/* each of at least 64 taps x channels per group: fewer run as exact f32 convs (passes/widen.c, tests/unit/test_widen_int.c) */
static const ci8_case cases[] = {
    {2, 0, 1, 16, 32, 12, 12, 3, 3, 1, 1, 1, 1, 128}, /* ResNet's 3x3, padded */
    {2, 0, 2, 24, 40, 9, 11, 3, 3, 2, 1, 1, 1, 3},    /* stride 2, batch 2, 25 pixels: a partial strip */
    {2, 1, 1, 70, 20, 7, 7, 1, 1, 1, 0, 1, 1, -5},    /* 1x1, K = 70 past one 64-byte block, s8 input */
    {2, 0, 1, 3, 16, 19, 19, 7, 7, 2, 3, 1, 1, 100},  /* a 3-channel stem, K = 147 */
    {2, 0, 1, 16, 12, 10, 10, 3, 3, 1, 2, 2, 2, 0},   /* dilation 2, two groups */
    {1, 0, 1, 14, 18, 1, 40, 1, 5, 3, 2, 1, 1, 77},   /* 1-D, kernel 5, stride 3 */
    {2, 1, 1, 32, 33, 5, 6, 3, 3, 1, 1, 1, 1, 127},   /* s8 less 127: [-255, 0] */
    {2, 0, 2, 40, 24, 5, 37, 3, 3, 1, 1, 1, 1, 128},  /* 16 x 16 vector blocks and the channels and pixels past them */
    {1, 1, 1, 32, 8, 1, 50, 1, 3, 2, 0, 1, 1, -100}, /* 1-D, vector blocks, s8 less -100 */
    {2, 0, 1, 64, 16, 9, 18, 3, 3, 1, 1, 1, 1, 128},  /* taps of whole 64-byte blocks */
    {2, 0, 1, 128, 24, 10, 10, 1, 1, 2, 0, 1, 1, 7},  /* a 1x1/2 downsample, two blocks a tap */
    {2, 0, 1, 40, 20, 6, 21, 3, 3, 1, 1, 1, 1, 0},    /* u8 less 0 (the map's own bytes): 16-channel blocks and a tail */
    {2, 1, 1, 24, 16, 5, 9, 3, 3, 1, 1, 1, 1, -128},  /* s8 less -128 (the bytes with their top bit flipped) */
    /* own bytes in rows past 64 pixels (AVX512-BW: 64 a block, the last one partial) */
    {2, 0, 1, 48, 16, 3, 150, 3, 3, 1, 1, 1, 1, 0},   /* u8 less 0, 128 + 22 pixels a row */
    {2, 1, 1, 64, 8, 2, 64, 1, 1, 1, 0, 1, 1, -128},  /* s8 less -128, a row of exactly 64 */
    {2, 0, 1, 128, 16, 5, 21, 3, 3, 1, 1, 1, 1, 0},   /* u8 less 0, 128 channels: whole 64-byte lines, 16 + 5 pixels */
    /* taps of whole 64-byte blocks: A read in place from the map into at most 64 channels (VNNI), else filled */
    {2, 0, 2, 64, 40, 7, 9, 3, 3, 2, 2, 2, 1, 128},   /* stride and dilation 2, two images, 12 pixels each */
    {2, 0, 1, 128, 64, 5, 5, 3, 3, 1, 1, 1, 2, 128},  /* two groups of 64 */
    {2, 0, 1, 64, 80, 6, 9, 3, 3, 1, 1, 1, 1, 128},   /* 80 output channels: the fill */
};

PC_TEST(conv_i8_quantized_convs_take_int8_gemm) {
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char tag[64];
    snprintf(tag, sizeof tag, "int8 conv case %zu", i);
    check_conv(&cases[i], 256, "call primc_k_conv_i8(", "call primc_k_conv(", tag);
  }
}

/* A host compile packs the int8 row's records of B beside the weights where its tasks would make them more than
 * once a run (runtime/gemm/igemm_rows.def's prep: the AVX2 row's split): 144 output pixels (two tasks of rows), two
 * images; a single image of 100 pixels (one task) keeps plain panels. With trained-looking weights the records hold
 * split blocks and their lists; with uniform ones, blocks on the int16 form. */
PC_TEST(conv_i8_row_records_where_they_pay) {
  int rec = primc_igemm_prep_row(144, 1) >= 0;
  ci8_case one = cases[3];
  one.n = 1;
  for (trained_weights = 1; trained_weights >= 0; trained_weights--) {
    check_conv(&cases[0], 256, rec ? "row's records of its blocks" : "call primc_k_conv_i8(", "call primc_k_conv(",
               trained_weights ? "trained weights, 144 pixels" : "uniform weights, 144 pixels");
    check_conv(&cases[1], 256, rec ? "row's records of its blocks" : "call primc_k_conv_i8(", "call primc_k_conv(",
               trained_weights ? "trained weights, 2 images" : "uniform weights, 2 images");
    check_conv(&one, 256, "call primc_k_conv_i8(", "row's records", trained_weights ? "trained weights, 1 task" : "1 task");
  }
  trained_weights = 0;
  CHECK(primc_igemm_prep_row(100, 1) < 0); /* one task of rows: its records are made once a run anyway */
}

/* the A fill without AVX512-BW moves (an AVX2 or Arm CPU's): the stem's runs of taps within blocks, the patches */
static void portable_in(void *so) {
  void (*force)(int) = (void (*)(int))dlsym(so, "primc_conv_i8_force_portable");
  if (CHECK_MSG(force != NULL, "primc_conv_i8_force_portable not in the compiled library")) force(1);
}

PC_TEST(conv_i8_portable_fill) {
  pc_test_before_run = portable_in;
  check_conv(&cases[3], 256, "call primc_k_conv_i8(", "call primc_k_conv(", "portable fill, 3-channel stem");
  check_conv(&cases[0], 256, "call primc_k_conv_i8(", "call primc_k_conv(", "portable fill, 3x3");
  check_conv(&cases[9], 256, "call primc_k_conv_i8(", "call primc_k_conv(", "portable fill, 64-channel taps");
  pc_test_before_run = NULL;
}

/* i32(x) - zx also a graph output: the call reads it as int32 (the path of inputs no kernel narrows) */
PC_TEST(conv_i8_int32_input) {
  check_conv_x(&cases[1], 256, "call primc_k_conv_i8(", "call primc_k_conv(", 1, "i32 input");
  check_conv_x(&cases[8], 256, "call primc_k_conv_i8(", "call primc_k_conv(", 1, "i32 input, vector blocks");
}

/* an output channel's weights spanning 300 values are not s8 less an offset: the floating-point im2col path */
PC_TEST(conv_i8_wide_weights_stay_on_exact_path) {
  check_conv(&cases[0], 300, "call primc_k_conv(", "call primc_k_conv_i8(", "wide weights");
}

/* u8 less 300: no byte range is proven, so the call finds it per image: with the padding's 0 it spans 301 values,
 * which the exact direct conv from the packed weights takes; without padding [-300, -45] is a byte's span less 300 */
PC_TEST(conv_i8_input_range_at_run_time) {
  ci8_case t = cases[0], u = cases[2];
  t.zx = 300;
  check_conv(&t, 256, "call primc_k_conv_i8(", "call primc_k_conv(", "input less 300, padded: exact direct conv");
  u.s8 = 0, u.zx = 300;
  check_conv(&u, 256, "call primc_k_conv_i8(", "call primc_k_conv(", "input less 300, no padding: the GEMM");
}

/* the map's vector blocks of an AVX2 CPU (map_blocks256: u8 or s8 less a zero point, int32 input, a range found at run
 * time), forced in the compiled library on a CPU with AVX-512 too */
static void avx2_in(void *so) {
  int (*force)(int) = (int (*)(int))dlsym(so, "primc_sgemm_force_isa");
  if (CHECK_MSG(force != NULL, "primc_sgemm_force_isa not in the compiled library")) CHECK_INT(force(PRIMC_ISA_AVX2), 0);
}

PC_TEST(conv_i8_avx2_map_blocks) {
  if (!__builtin_cpu_supports("avx2")) {
    SKIP("no AVX2 here: the blocks are an AVX2 CPU's");
    return;
  }
  pc_test_before_run = avx2_in;
  check_conv(&cases[7], 256, "call primc_k_conv_i8(", "call primc_k_conv(", "AVX2 blocks, u8 less 128");
  check_conv(&cases[8], 256, "call primc_k_conv_i8(", "call primc_k_conv(", "AVX2 blocks, 1-D, s8 less -100");
  check_conv_x(&cases[7], 256, "call primc_k_conv_i8(", "call primc_k_conv(", 1, "AVX2 blocks, i32 input");
  zx_input = 1;
  check_conv(&cases[9], 256, "call primc_k_conv_i8(", "call primc_k_conv(", "AVX2 blocks, run-time zero point");
  zx_input = 0;
  pc_test_before_run = NULL;
}

/* a zero point given at run time (ConvInteger after DynamicQuantizeLinear): u8 less it spans [-255, 255] as far as
 * anything can prove; each image's own span is a byte's */
PC_TEST(conv_i8_zero_point_at_run_time) {
  zx_input = 1;
  check_conv(&cases[0], 256, "call primc_k_conv_i8(", "call primc_k_conv(", "run-time zero point, 3x3");
  check_conv(&cases[3], 256, "call primc_k_conv_i8(", "call primc_k_conv(", "run-time zero point, stem");
  check_conv(&cases[9], 256, "call primc_k_conv_i8(", "call primc_k_conv(", "run-time zero point, 64 channels");
  zx_input = 0;
}

/* The kernel that quantizes an f32 conv's result (exact here: small integers) for the next conv, as ResNet's QDQ
 * blocks do, writes over that result's memory: its narrowed u8 store must not land on elements it has not read
 * (it goes to a region of its own), or the pool's threads corrupt each other's inputs. With two_readers a 1x1/2
 * conv (a downsample) reads the same input: both calls read the u8. Compiled equals the interpreter exactly. */
static void check_in_place(int two_readers, const char *tag) {
  enum { CH = 64, HW = 40 };
  static float xs[CH * HW * HW], w1[CH * CH];
  static int32_t w2[CH * CH * 9];
  uint32_t s = 9;
  for (int i = 0; i < CH * HW * HW; i++) xs[i] = (float)(lcg(&s) % 4);
  for (int i = 0; i < CH * CH; i++) w1[i] = (float)((int)(lcg(&s) % 3) - 1);
  for (int i = 0; i < CH * CH * 9; i++) w2[i] = (int32_t)(lcg(&s) % 255) - 127;
  pc_tensor in = {PC_f32, 4, {1, CH, HW, HW}, xs}, ref[2], got[2];
  pc_graph *gs[2];
  for (int v = 0; v < 2; v++) {
    pc_graph *g = gs[v] = pc_graph_new();
    int64_t xd[4] = {1, CH, HW, HW}, wd1[4] = {CH, CH, 1, 1}, wd2[4] = {CH, CH, 3, 3}, one[2] = {1, 1}, zero[2] = {0, 0};
    pc_value *x = pc_input_add(g, "x", pc_type_make(PC_f32, 4, xd));
    pc_value *y1 = pc_conv(g, x, pc_const(g, pc_type_make(PC_f32, 4, wd1), w1), 2, one, zero, zero, one, one, 1);
    pc_value *q = pc_convert(g, pc_clamp(g, pc_add(g, pc_round(g, y1), pc_full_like(g, 128, y1)), pc_full_like(g, 0, y1),
                                         pc_full_like(g, 255, y1)), PC_u8);
    pc_value *qi = pc_convert(g, q, PC_i32);
    pc_value *xi = pc_sub(g, qi, pc_full_like(g, 128, qi));
    pc_output_add(g, pc_conv(g, xi, pc_const(g, pc_type_make(PC_i32, 4, wd2), w2), 2, one, one, one, one, one, 1));
    int64_t two[2] = {2, 2}, wd3[4] = {CH / 2, CH, 1, 1};
    if (two_readers) /* a ResNet block's downsample beside its first conv */
      pc_output_add(g, pc_conv(g, xi, pc_const(g, pc_type_make(PC_i32, 4, wd3), w2), 2, two, zero, zero, one, one, 1));
  }
  memset(ref, 0, sizeof ref);
  pc_pipeline_opts po = {.opt_level = 2};
  primc_igemm_force_conv_min_k(64); /* the downsample's 64 taps on the int8 GEMM too, whichever row this CPU has */
  int built = pc_pipeline_run(gs[1], &po) == PC_OK;
  primc_igemm_force_conv_min_k(-1);
  if (CHECK_MSG(pc_interp(gs[0], &in, 1, ref, 1 + two_readers) == PC_OK, "interp: %s", pc_error(gs[0])) &&
      CHECK_MSG(built, "%s", pc_error(gs[1]))) {
    char *text = pc_test_kernels_text(gs[1]);
    int n = 0;
    for (const char *t = text; t && (t = strstr(t, "input stored as u8")); t++) n++;
    CHECK_MSG(n == 1 + two_readers, "%s: %d calls read the quantized input as u8", tag, n);
    free(text);
    if (pc_test_run_compiled(gs[1], 2, &in, got, tag)) {
      for (int o = 0; o < 1 + two_readers; o++) {
        const int32_t *a = got[o].data, *b = ref[o].data;
        for (int64_t i = 0, bad = 0; i < pc_tensor_numel(&ref[o]) && !bad; i++)
          bad = !CHECK_MSG(a[i] == b[i], "%s: y%d[%lld] = %d, interpreter %d", tag, o, (long long)i, a[i], b[i]);
        free(got[o].data);
      }
    }
  }
  for (int o = 0; o < 2; o++) pc_tensor_free(&ref[o]);
  pc_graph_free(gs[0]);
  pc_graph_free(gs[1]);
}

PC_TEST(conv_i8_narrowed_input_written_in_place) {
  check_in_place(0, "in place");
  check_in_place(1, "in place, two convs reading it");
}
