/* tests/unit/test_conv_i8_rq.c: a conv_i8 call whose int32 result the next kernel requantizes to u8 or s8 (QDQ's
 * f32 form, QLinearConv's f64 form; then a residual's dequantize-add-requantize; u8, s8, i32 and f32 outputs) runs
 * the requantization itself (codegen/kir_requant.c, runtime/kernels_conv_i8_rq.c): the listing says so, and the
 * compiled bytes equal the interpreter's, through the AVX-512 and AVX2 blocks and element by element. */
#include "codegen/codegen.h"
#include "ir/ir.h"
#include "passes/passes.h"
#include "runtime/kernels.h"
#include "runtime/primc_rt.h"
#include "tests/test.h"
#include "tests/unit/helpers.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

/* what the loop kernel stores of the requantized q */
enum { OUT_Q, OUT_Q_DEQ, OUT_Q_I32, OUT_DEQ };

typedef struct rq_case {
  int f64;      /* QLinearConv's form: f64(sums + ibias[o]) * m[o]; else QDQ's: f32(sums) * s[o] + b[o], / S */
  int s8_out;   /* the output s8 (else u8) */
  int per_chan; /* the scale (and bias) per output channel; else one constant */
  int64_t n, c, o, h, w, groups;
  double zp, lo, hi;
  int residual; /* stage 2: q dequantized plus an f32 input r, requantized (QDQ's, or QLinearAdd's with f64) */
  int outs;     /* OUT_*: q alone; q and q dequantized; q and i32(q); q dequantized alone */
  const char *tag;
} rq_case;

static uint32_t lcg(uint32_t *s) { return *s = *s * 1664525u + 1013904223u, *s >> 24; }

static pc_value *chan(pc_graph *g, pc_dtype t, const void *data, int64_t o, const pc_type *like) {
  int64_t axis = 1;
  return pc_broadcast_in_dim(g, pc_const(g, pc_type_make(t, 1, &o), data), like->rank, like->dims, &axis);
}

/* the element-by-element path in the compiled library (the test's own runtime is not the one the model links) */
static void rq_portable_in(void *so) {
  void (*force)(int) = (void (*)(int))dlsym(so, "primc_conv_i8_rq_force_portable");
  if (CHECK_MSG(force != NULL, "primc_conv_i8_rq_force_portable not in the compiled library")) force(1);
}

/* clamp(round(f) + zp, lo, hi) */
static pc_value *requant(pc_graph *g, pc_value *f, double zp, double lo, double hi) {
  pc_value *r = pc_build(g, PC_OP_round, &f, 1, NULL, 0);
  r = pc_add(g, r, pc_full_like(g, zp, r));
  return pc_build(g, PC_OP_clamp, (pc_value *[]){r, pc_full_like(g, lo, r), pc_full_like(g, hi, r)}, 3, NULL, 0);
}

static pc_graph *build(const rq_case *t, const int32_t *w, const float *s32, const float *b32, const double *m64,
                       const int32_t *ib) {
  pc_graph *g = pc_graph_new();
  int64_t xd[4] = {t->n, t->c, t->h, t->w}, wd[4] = {t->o, t->c / t->groups, 3, 3};
  pc_value *x = pc_input_add(g, "x", pc_type_make(PC_u8, 4, xd));
  int32_t zx = 100;
  pc_value *xi = pc_sub(g, pc_convert(g, x, PC_i32),
                        pc_broadcast_in_dim(g, pc_const(g, pc_type_make(PC_i32, 0, NULL), &zx), 4, xd, NULL));
  int64_t one[2] = {1, 1}, pad[2] = {1, 1};
  pc_value *y = pc_conv(g, xi, pc_const(g, pc_type_make(PC_i32, 4, wd), w), 2, one, pad, pad, one, one, t->groups);
  pc_value *f;
  if (t->f64) {
    pc_value *v = t->per_chan ? pc_add(g, y, chan(g, PC_i32, ib, t->o, &y->type)) : y;
    pc_value *f0 = pc_convert(g, v, PC_f64);
    f = pc_mul(g, f0, t->per_chan ? chan(g, PC_f64, m64, t->o, &y->type) : pc_full_like(g, m64[0], f0));
  } else {
    pc_value *f0 = pc_convert(g, y, PC_f32);
    f = pc_mul(g, f0, t->per_chan ? chan(g, PC_f32, s32, t->o, &y->type) : pc_full_like(g, s32[0], f0));
    if (t->per_chan) f = pc_add(g, f, chan(g, PC_f32, b32, t->o, &y->type));
    f = pc_build(g, PC_OP_div, (pc_value *[]){f, pc_full_like(g, 0.5, f)}, 2, NULL, 0);
  }
  pc_dtype qt = t->s8_out ? PC_i8 : PC_u8;
  pc_value *q = pc_convert(g, requant(g, f, t->zp, t->lo, t->hi), qt);
  if (t->residual) { /* (q - z) * s + r, requantized (in f32; the bounds now the type's) */
    pc_value *r = pc_input_add(g, "r", pc_type_make(PC_f32, 4, y->type.dims)), *d;
    if (t->f64)
      d = pc_convert(g, pc_sub(g, pc_convert(g, q, PC_i32), pc_full_like(g, t->zp, pc_convert(g, q, PC_i32))), PC_f32);
    else
      d = pc_sub(g, pc_convert(g, q, PC_f32), pc_full_like(g, t->zp, pc_convert(g, q, PC_f32)));
    d = pc_add(g, pc_mul(g, d, pc_full_like(g, 0.75, d)), r);
    d = pc_build(g, PC_OP_div, (pc_value *[]){d, pc_full_like(g, 1.5, d)}, 2, NULL, 0);
    q = pc_convert(g, requant(g, d, t->s8_out ? -7 : 9, t->s8_out ? -128 : 0, t->s8_out ? 127 : 255), qt);
  }
  pc_value *deq = pc_mul(g, pc_sub(g, pc_convert(g, q, PC_f32), pc_full_like(g, 3, pc_convert(g, q, PC_f32))),
                         pc_full_like(g, 0.125, pc_convert(g, q, PC_f32)));
  if (t->outs != OUT_DEQ) pc_output_add(g, q);
  if (t->outs == OUT_Q_DEQ || t->outs == OUT_DEQ) pc_output_add(g, deq);
  if (t->outs == OUT_Q_I32) pc_output_add(g, pc_convert(g, q, PC_i32));
  return g;
}

static void check(const rq_case *t, int portable) {
  int64_t nx = t->n * t->c * t->h * t->w, nw = t->o * (t->c / t->groups) * 9;
  uint8_t *xs = malloc((size_t)nx);
  int32_t *w = malloc(sizeof *w * (size_t)nw), *ib = malloc(sizeof *ib * (size_t)t->o);
  float *s32 = malloc(sizeof *s32 * (size_t)t->o), *b32 = malloc(sizeof *b32 * (size_t)t->o);
  double *m64 = malloc(sizeof *m64 * (size_t)t->o);
  uint32_t seed = 7;
  for (int64_t i = 0; i < nx; i++) xs[i] = (uint8_t)lcg(&seed);
  for (int64_t i = 0; i < nw; i++) w[i] = (int32_t)(lcg(&seed) % 61) - 30;
  for (int64_t o = 0; o < t->o; o++) { /* sums of a few thousand: scales that land them across the output range,
                                        * quarters and halves among them (ties that round to even) */
    s32[o] = 0.25f / (float)(8 + o % 5), b32[o] = (float)(o % 7) - 3.5f, ib[o] = (int32_t)(o % 9) * 37 - 150;
    m64[o] = 1.0 / (double)(16 + 4 * (o % 4));
  }
  char tag[160];
  snprintf(tag, sizeof tag, "%s%s", t->tag, portable ? ", element by element" : "");
  pc_graph *r = build(t, w, s32, b32, m64, ib), *g = build(t, w, s32, b32, m64, ib);
  int64_t nr = t->n * t->o * t->h * t->w;
  float *rs = malloc(sizeof *rs * (size_t)nr);
  for (int64_t i = 0; i < nr; i++) rs[i] = (float)lcg(&seed) / 8 - 16; /* eighths: ties after the scales here */
  pc_tensor in[2] = {{PC_u8, 4, {t->n, t->c, t->h, t->w}, xs}, {PC_f32, 4, {t->n, t->o, t->h, t->w}, rs}}, ref[2], got[2];
  int n_out = t->outs == OUT_Q || t->outs == OUT_DEQ ? 1 : 2;
  primc_igemm_force_conv_min_k(64); /* the int8 GEMM at this small shape, whichever int8 row this CPU has */
  int ok = pc_test_ref_and_plan(r, g, in, 1 + t->residual, ref, n_out, tag);
  primc_igemm_force_conv_min_k(-1);
  if (ok) {
    char *text = pc_test_kernels_text(g);
    const char *want = t->residual ? "then a residual added and requantized in f32, writing" : "writing";
    CHECK_MSG(text && strstr(text, "call primc_k_conv_i8(") && strstr(text, "requantized in the call") &&
                  strstr(text, want) && strstr(text, "in the call"),
              "%s: the requantization is not in the conv_i8 call as it should be", tag);
    free(text);
  }
  pc_test_before_run = portable ? rq_portable_in : NULL; /* the compiled library's own copy of the runtime */
  if (ok && pc_test_run_compiled(g, 2, in, got, tag)) {
    for (int k = 0; k < n_out; k++) { /* byte for byte: the same operations in the same types */
      int64_t n = pc_tensor_numel(&ref[k]), es = (int64_t)pc_dtype_size(ref[k].dtype), bad = -1, spread = 0;
      const unsigned char *a = got[k].data, *b = ref[k].data;
      for (int64_t i = 0; i < n && bad < 0; i++) bad = memcmp(a + i * es, b + i * es, (size_t)es) ? i : -1;
      for (int64_t i = 1; i < n; i++) spread += memcmp(b + i * es, b, (size_t)es) != 0;
      CHECK_MSG(bad < 0, "%s: output %d differs from the interpreter's at element %lld", tag, k, (long long)bad);
      CHECK_MSG(spread > n / 4, "%s: output %d barely varies (%lld of %lld differ from the first)", tag, k,
                (long long)spread, (long long)n);
      free(got[k].data);
    }
  }
  pc_test_before_run = NULL;
  for (int k = 0; ok && k < n_out; k++) pc_tensor_free(&ref[k]);
  free(rs);
  pc_graph_free(r);
  pc_graph_free(g);
  free(xs), free(w), free(ib), free(s32), free(b32), free(m64);
}

static const rq_case cases[] = {
    /* 20 channels: two blocks of 8 and 4 past them; 9 x 11 pixels: 12 blocks of 8 and 3 past them; 2 images */
    {0, 0, 1, 2, 16, 20, 9, 11, 1, 0, 0, 255, 0, OUT_Q, "QDQ form, u8, per-channel scale and bias"},
    {0, 1, 0, 1, 16, 16, 12, 12, 2, 3, -128, 127, 0, OUT_Q, "QDQ form, s8, one scale, two groups"},
    {1, 0, 1, 1, 24, 12, 7, 13, 1, 128, 0, 255, 0, OUT_Q, "QLinearConv form, u8, per-channel int bias and multiplier"},
    {1, 1, 0, 2, 16, 8, 10, 10, 1, -5, -100, 100, 0, OUT_Q, "QLinearConv form, s8 clamped to [-100, 100], one multiplier"},
    {0, 0, 1, 1, 16, 24, 8, 9, 1, 129, 0, 255, 0, OUT_DEQ, "QDQ form, dequantized f32 alone"},
    /* a ResNet block's second conv: its requantized output dequantized, a residual added, requantized again */
    {0, 0, 1, 2, 16, 20, 9, 11, 1, 129, 0, 255, 1, OUT_Q_DEQ, "QDQ residual, u8 and its dequantized f32"},
    {0, 1, 1, 1, 16, 16, 6, 13, 1, 5, -128, 127, 1, OUT_Q, "QDQ residual, s8"},
    {1, 0, 1, 1, 24, 12, 7, 13, 1, 140, 0, 255, 1, OUT_Q_I32, "QLinearAdd residual, u8 and i32"},
    /* on AVX-512 16 x 16 blocks, then 8 x 8 ones and the rest: 40 channels are 2 x 16 + 8, 36 are 2 x 16 + 4 */
    {1, 0, 1, 1, 24, 40, 7, 13, 1, 128, 0, 255, 0, OUT_Q, "QLinearConv form, u8, 40 channels"},
    {1, 1, 1, 2, 16, 36, 9, 11, 1, 3, -128, 127, 1, OUT_Q_DEQ, "QLinearAdd residual, s8, 36 channels, 2 images"},
    {0, 0, 1, 1, 32, 48, 5, 7, 1, 129, 0, 255, 1, OUT_Q_I32, "QDQ residual, u8 and i32, 48 channels"},
};

PC_TEST(conv_i8_requantizes_in_the_call) {
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    check(&cases[i], 0);
    check(&cases[i], 1);
  }
}

/* The AVX-512 blocks of f64 words multiply by 1 / div and divide only the lanes near a half: exact ties (x / d = n +
 * 1/2, d 49 in f64 words, and 7 in f32 ones, whose products by 1 / d miss the tie for over a third of n below 2^17)
 * and their neighbours come out as the element-by-element division's. Fails when the near lanes are not divided. */
PC_TEST(conv_i8_rq_reciprocal_keeps_ties) {
  enum { P = 4096, OG = 16 };
  int32_t *acc = malloc(sizeof *acc * P * OG), *got = malloc(sizeof *got * P * OG), *want = malloc(sizeof *want * P * OG);
  for (int kind = PRIMC_CONV_I8_RQ_F32; kind <= PRIMC_CONV_I8_RQ_F64; kind++) {
    int32_t dv = kind == PRIMC_CONV_I8_RQ_F32 ? 7 : 49;
    for (int64_t i = 0; i < P * OG; i++) {
      uint32_t n = (uint32_t)i * 2654435761u % (i % 2 ? 300u : 1u << 17);
      acc[i] = dv * (int32_t)n + dv / 2 + (i % 5 == 0 ? (int32_t)(i % 3) - 1 : 0); /* acc + 0.5: a tie, or beside one */
    }
    int64_t w[PRIMC_CONV_I8_RQ_WORDS] = {kind, 1, 0, 0};
    const double d[18] = {1, 0.5, dv, 0, -16777216, 16777216, 0, 1, 1, 0, 0, 0, PRIMC_CONV_I8_OUT_I32, 0, 1, 0, 0, 0};
    memcpy(w + 4, d, sizeof d);
    void *bufs[5] = {NULL, NULL, NULL, NULL, NULL};
    primc_i8_rq r;
    for (int portable = 0; portable < 2; portable++) {
      bufs[4] = portable ? want : got;
      if (!CHECK_INT(primc_i8_rq_read(w, bufs, OG, &r), PRIMC_OK)) break;
      primc_conv_i8_rq_force_portable(portable);
      primc_i8_rq_out(&r, acc, P, OG, 0, 0);
    }
    primc_conv_i8_rq_force_portable(0);
    for (int64_t i = 0; i < P * OG; i++)
      if (!CHECK_MSG(got[i] == want[i], "%s words: sum %d of pixel %lld requantized to %d, the division gives %d",
                     kind == PRIMC_CONV_I8_RQ_F32 ? "f32" : "f64", acc[i % P * OG + i / P], (long long)(i % P), got[i],
                     want[i]))
        break;
  }
  free(acc), free(got), free(want);
}
