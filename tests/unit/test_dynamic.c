/* tests/unit/test_dynamic.c: run-time dims: the runtime's check of the inputs' dims (primc_dims_check), and
 * codegen's fit of a program's sizes as polynomials of the dims (kir_dyn_fit) on text graphs built at each
 * value asked: sizes linear and quadratic in a dim, a size rounded up (no polynomial), a program that changes. */
#include "codegen/codegen.h"
#include "codegen/kir.h"
#include "frontend/frontend.h"
#include "ir/ir.h"
#include "passes/passes.h"
#include "runtime/primc_rt.h"
#include "tests/test.h"

#include <stdio.h>
#include <string.h>

/* ---------------------------------------------------------------- primc_dims_check */

/* primc_dims_check refuses dims with PRIMC_ERR_SHAPE and says why */
static void refused(const primc_dims_desc *d, const int64_t *const *dims, const char *why) {
  int64_t v[4];
  char msg[256];
  CHECK_INT(primc_dims_check(d, dims, v, msg, sizeof msg), PRIMC_ERR_SHAPE);
  CHECK_STR(msg, why);
}

PC_TEST(dims_check_names_input_dim_value_and_range) {
  /* x: f32[N, 4], y: f32[N], N in 1..8 */
  static const primc_sym_desc syms[] = {{"N", 1, 8, 0}};
  static const int32_t in_syms[2 * PRIMC_MAX_RANK] = {0, -1, -1, -1, -1, -1, -1, -1, 0, -1, -1, -1, -1, -1, -1, -1};
  static const primc_tensor_desc ins[] = {{"x", PRIMC_F32, 2, {8, 4}}, {"y", PRIMC_F32, 1, {8}}};
  primc_dims_desc d = {1, syms, in_syms, 0, 2, ins};
  int64_t v[4], x[2] = {3, 4}, y[1] = {3};
  char msg[256];
  CHECK_INT(primc_dims_check(&d, NULL, v, msg, sizeof msg), PRIMC_OK);
  CHECK_INT(v[0], 8); /* no dims: the bounds */
  const int64_t *both[2] = {x, y};
  CHECK_INT(primc_dims_check(&d, both, v, msg, sizeof msg), PRIMC_OK);
  CHECK_INT(v[0], 3);
  x[0] = 9;
  refused(&d, both, "input \"x\" dim 0 (N) is 9, outside the range 1..8 compiled in");
  x[0] = 3, x[1] = 5;
  refused(&d, both, "input \"x\" dim 1 is 5; the model was compiled for 4");
  x[1] = 4, y[0] = 2;
  refused(&d, both, "input \"y\" dim 0 is 2, but input \"x\" made N 3");
  /* bind writes the values where the run reads them, and only when they pass */
  int64_t ws[4] = {-1, -1, -1, -1};
  d.offset = 8;
  CHECK_INT(primc_dims_bind(&d, both, ws), PRIMC_ERR_SHAPE);
  CHECK_INT(ws[1], -1);
  y[0] = 3;
  CHECK_INT(primc_dims_bind(&d, both, ws), PRIMC_OK);
  CHECK_INT(ws[1], 3);
}

/* a range of multiples (--dim H=16..96%16): the symbol is the dim over 16; a dim that is no multiple is refused */
PC_TEST(dims_check_multiples) {
  static const primc_sym_desc syms[] = {{"H", 16, 96, 16}};
  static const int32_t in_syms[2 * PRIMC_MAX_RANK] = {-1, 0, -1, -1, -1, -1, -1, -1, 0, -1, -1, -1, -1, -1, -1, -1};
  static const primc_tensor_desc ins[] = {{"x", PRIMC_F32, 2, {3, 96}}, {"y", PRIMC_F32, 1, {96}}};
  primc_dims_desc d = {1, syms, in_syms, 8, 2, ins};
  int64_t v[4], x[2] = {3, 48}, y[1] = {48}, ws[4] = {-1, -1, -1, -1};
  char msg[256];
  CHECK_INT(primc_dims_check(&d, NULL, v, msg, sizeof msg), PRIMC_OK);
  CHECK_INT(v[0], 6); /* the bound, 96 / 16 */
  const int64_t *both[2] = {x, y};
  CHECK_INT(primc_dims_bind(&d, both, ws), PRIMC_OK);
  CHECK_INT(ws[1], 3);
  x[1] = 40, y[0] = 40;
  refused(&d, both, "input \"x\" dim 1 (H) is 40, not a multiple of 16 (the range 16..96 compiled in)");
  x[1] = 32, y[0] = 64;
  refused(&d, both, "input \"y\" dim 0 is 64, but input \"x\" made H 32");
  x[1] = 112, y[0] = 112;
  refused(&d, both, "input \"x\" dim 1 (H) is 112, outside the range 16..96 compiled in");
}

/* --dim's forms, multiples among them */
PC_TEST(dim_spec_parse_multiples) {
  pc_dim_binding b;
  char name[32];
  CHECK(pc_dim_spec_parse("H=32..224%32", &b, name, sizeof name));
  CHECK(!strcmp(b.name, "H") && b.lo == 32 && b.hi == 224 && b.multiple == 32 && b.step == 0);
  CHECK(pc_dim_spec_parse("N=1..8", &b, name, sizeof name) && b.multiple == 0);
  CHECK(pc_dim_spec_parse("H=32..224%32:64", &b, name, sizeof name) && b.multiple == 32 && b.step == 64);
  const char *bad[] = {"H=32..224%1", "H=32..224%0", "H=30..224%32", "H=32..200%32", "H=0..64%32", "H=32%32",
                       "H=32..32%32", "H=32..224%32:48", "H=32..224:64%32", "H=32..224%", "H=32..224%32x"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) CHECK_MSG(!pc_dim_spec_parse(bad[i], &b, name, sizeof name), "%s", bad[i]);
}

/* ---------------------------------------------------------------- primc_buckets_run_dims */

/* two stand-in bucket programs: which ran, on which workspace */
static int ran_bucket = -1;
static void *ran_ws;
static int bucket0_run(const void *const *in, const int64_t *const *dims, void *const *out, void *ws) {
  (void)in, (void)dims, (void)out;
  ran_bucket = 0, ran_ws = ws;
  return PRIMC_OK;
}
static int bucket1_run(const void *const *in, const int64_t *const *dims, void *const *out, void *ws) {
  (void)in, (void)dims, (void)out;
  ran_bucket = 1, ran_ws = ws;
  return PRIMC_OK;
}
static int bucket2_run(const void *const *in, const int64_t *const *dims, void *const *out, void *ws) {
  (void)in, (void)dims, (void)out;
  ran_bucket = 2, ran_ws = ws;
  return PRIMC_OK;
}
static int bucket_out_dims(const void *ws, int32_t output, int64_t *dims) {
  dims[0] = output, dims[1] = (int64_t)((const char *)ws - (const char *)ran_ws); /* 0: the bucket's own workspace */
  return PRIMC_OK;
}

PC_TEST(buckets_run_the_program_whose_range_holds_the_value) {
  /* x: f32[N], N in 1..8 in buckets 1..4 and 5..8 */
  static const primc_sym_desc syms[] = {{"N", 1, 8, 0}};
  static const int32_t in_syms[PRIMC_MAX_RANK] = {0, -1, -1, -1, -1, -1, -1, -1};
  static const primc_tensor_desc ins[] = {{"x", PRIMC_F32, 1, {8}}};
  primc_dims_desc d = {1, syms, in_syms, -1, 1, ins};
  primc_model_desc m0 = {0}, m1 = {0};
  m0.run_dims = bucket0_run, m1.run_dims = bucket1_run, m0.output_dims = m1.output_dims = bucket_out_dims;
  const primc_model_desc *models[2] = {&m0, &m1};
  static const int64_t los[2] = {1, 5}, his[2] = {4, 8};
  primc_buckets_desc b = {2, los, his, models, &d};
  static int64_t ws[PRIMC_BUCKET_HEADER / 8 + 8] __attribute__((aligned(64)));
  int64_t x[1], od[2];
  const int64_t *dims[1] = {x};
  memset(ws, 0, sizeof ws);
  CHECK_INT(primc_buckets_output_dims(&b, ws, 0, od), PRIMC_ERR_ARG); /* nothing ran on it yet */
  int64_t want[][2] = {{1, 0}, {4, 0}, {5, 1}, {8, 1}};
  for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
    x[0] = want[i][0], ran_bucket = -1;
    CHECK_INT(primc_buckets_run_dims(&b, NULL, dims, NULL, ws), PRIMC_OK);
    CHECK_INT(ran_bucket, want[i][1]);
    CHECK(ran_ws == (char *)ws + PRIMC_BUCKET_HEADER);
    CHECK_INT(primc_buckets_output_dims(&b, ws, 3, od), PRIMC_OK);
    CHECK_INT(od[0], 3);
    CHECK_INT(od[1], 0);
  }
  x[0] = 9, ran_bucket = -1;
  CHECK_INT(primc_buckets_run_dims(&b, NULL, dims, NULL, ws), PRIMC_ERR_SHAPE);
  CHECK_INT(ran_bucket, -1); /* refused before any program ran */
  CHECK_INT(primc_buckets_run_dims(&b, NULL, NULL, NULL, ws), PRIMC_OK); /* no dims: the bounds, the last bucket */
  CHECK_INT(ran_bucket, 1);
  CHECK_INT(primc_buckets_run_dims(&b, NULL, dims, NULL, NULL), PRIMC_ERR_SHAPE); /* the dims are checked first */
  x[0] = 2;
  CHECK_INT(primc_buckets_run_dims(&b, NULL, dims, NULL, NULL), PRIMC_ERR_ARG);
}

PC_TEST(buckets_on_two_dims_run_the_program_whose_box_holds_both) {
  /* x: f32[H][W], H and W in 16..64 multiples of 16; boxes H 16..32 x W 16..64, then H 48..64 split at W 32 */
  static const primc_sym_desc syms[] = {{"H", 16, 64, 16}, {"W", 16, 64, 16}};
  static const int32_t in_syms[PRIMC_MAX_RANK] = {0, 1, -1, -1, -1, -1, -1, -1};
  static const primc_tensor_desc ins[] = {{"x", PRIMC_F32, 2, {64, 64}}};
  primc_dims_desc d = {2, syms, in_syms, -1, 1, ins};
  primc_model_desc m0 = {0}, m1 = {0}, m2 = {0};
  m0.run_dims = bucket0_run, m1.run_dims = bucket1_run, m2.run_dims = bucket2_run;
  const primc_model_desc *models[3] = {&m0, &m1, &m2};
  static const int64_t los[6] = {16, 16, 48, 16, 48, 48}, his[6] = {32, 64, 64, 32, 64, 64};
  primc_buckets_desc b = {3, los, his, models, &d};
  static int64_t ws[PRIMC_BUCKET_HEADER / 8 + 8] __attribute__((aligned(64)));
  int64_t x[2];
  const int64_t *dims[1] = {x};
  int64_t want[][3] = {{16, 64, 0}, {32, 16, 0}, {48, 16, 1}, {64, 32, 1}, {48, 48, 2}, {64, 64, 2}};
  for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
    x[0] = want[i][0], x[1] = want[i][1], ran_bucket = -1;
    CHECK_INT(primc_buckets_run_dims(&b, NULL, dims, NULL, ws), PRIMC_OK);
    CHECK_MSG(ran_bucket == want[i][2], "%lldx%lld ran bucket %d", (long long)x[0], (long long)x[1], ran_bucket);
  }
  int64_t values[2] = {3, 2}; /* in units of 16: 48x32 */
  CHECK_INT(primc_bucket_of(&d, 3, los, his, values), 1);
  values[0] = 5; /* 80: in no box */
  CHECK_INT(primc_bucket_of(&d, 3, los, his, values), -1);
  x[0] = 40, x[1] = 16, ran_bucket = -1; /* no multiple of 16 */
  CHECK_INT(primc_buckets_run_dims(&b, NULL, dims, NULL, ws), PRIMC_ERR_SHAPE);
  CHECK_INT(ran_bucket, -1);
}

/* ---------------------------------------------------------------- kir_dyn_fit */

/* a text graph with %V (and %H, half of V rounded up) replaced by the value asked */
typedef struct text_model {
  const char *text;
  int changes_below; /* values below this build a program with one more kernel */
} text_model;

static pc_graph *build_text(void *ctx, const int64_t *values) {
  const text_model *t = ctx;
  char src[1024], *o = src;
  for (const char *s = t->text; *s && o < src + sizeof src - 32; s++) {
    if (s[0] == '%' && (s[1] == 'V' || s[1] == 'H')) {
      o += sprintf(o, "%lld", (long long)(s[1] == 'V' ? values[0] : (values[0] + 1) / 2));
      s++;
    } else {
      *o++ = *s;
    }
  }
  *o = 0;
  if (values[0] < t->changes_below) { /* another result: a negation after the exp */
    char *ret = strstr(src, "  return");
    if (ret) snprintf(ret, sizeof src - (size_t)(ret - src), "  %%2 : f32[%lld,8] = neg(%%1)\n  return (%%2)\n",
                      (long long)values[0]);
  }
  pc_graph *g = pc_graph_parse(src, strlen(src), "dyn", NULL);
  if (g && !g->status) pc_pipeline_run(g, &(pc_pipeline_opts){.opt_level = 2});
  return g;
}

/* fits the program of t with V in lo..hi; the first loop kernel's extent 0 polynomial into *q (when there is one) */
static pc_status fit_text(const text_model *t, int64_t lo, int64_t hi, char *err, size_t n, kir_poly *q) {
  pc_dyn_spec spec = {.n_syms = 1, .name = {"V"}, .lo = {lo}, .hi = {hi}, .build = build_text, .ctx = (void *)t};
  int64_t v = hi;
  pc_graph *g = build_text((void *)t, &v);
  kir_program p;
  pc_codegen_opts o = {0};
  o.dyn = &spec;
  pc_status s = g->status ? g->status : kir_build_cpu(g, &o, &p);
  if (s == PC_OK) s = kir_dyn_fit(&p, &o);
  snprintf(err, n, "%s", s == PC_OK ? "" : pc_error(g));
  memset(q, 0, sizeof *q);
  for (int i = 0; s == PC_OK && i < p.n_kernels; i++)
    if (p.kernels[i].kind == KK_LOOP && kir_dyn_poly(&p, &p.kernels[i].extent[0])) {
      *q = *kir_dyn_poly(&p, &p.kernels[i].extent[0]);
      break;
    }
  pc_graph_free(g);
  return s;
}

PC_TEST(dyn_fit_linear_and_quadratic_sizes) {
  char err[512];
  kir_poly q;
  text_model lin = {"graph(%x : f32[%V,8]):\n  %1 : f32[%V,8] = exp(%x)\n  return (%1)\n", 0};
  CHECK_INT(fit_text(&lin, 1, 16, err, sizeof err, &q), PC_OK);
  CHECK_MSG(!err[0], "%s", err);
  for (int64_t v = 1; v <= 16; v++) { /* the loops run V * 8 elements, however they are split */
    int64_t e = kir_poly_eval(&q, 1, &v);
    CHECK_MSG(e == v || e == 8 * v, "extent at V=%lld: %lld", (long long)v, (long long)e);
  }
  text_model sq = {"graph(%x : f32[%V,%V]):\n  %1 : f32[%V,%V] = exp(%x)\n  return (%1)\n", 0};
  CHECK_INT(fit_text(&sq, 1, 16, err, sizeof err, &q), PC_OK);
  int64_t seven = 7, e7 = kir_poly_eval(&q, 1, &seven);
  CHECK_MSG(e7 == 7 || e7 == 49, "extent at V=7: %lld", (long long)e7);
}

PC_TEST(dyn_fit_refuses_what_no_polynomial_follows) {
  char err[512];
  kir_poly q;
  /* rows 0..ceil(V/2): no polynomial of V */
  text_model half = {"graph(%x : f32[%V,8]):\n  %s : f32[%H,8] = slice(%x, start=[0,0], limit=[%H,8], stride=[1,1])\n"
                     "  %1 : f32[%H,8] = exp(%s)\n  return (%1)\n", 0};
  CHECK_INT(fit_text(&half, 1, 16, err, sizeof err, &q), PC_ERR_UNSUPPORTED);
  CHECK_CONTAINS(err, "dim V: a size follows it in no polynomial way");
  /* one more kernel below 10: the program itself changes */
  text_model grows = {"graph(%x : f32[%V,8]):\n  %1 : f32[%V,8] = exp(%x)\n  return (%1)\n", 10};
  CHECK_INT(fit_text(&grows, 1, 16, err, sizeof err, &q), PC_ERR_UNSUPPORTED);
  CHECK_CONTAINS(err, "dim V:");
  CHECK_CONTAINS(err, "compile with a fixed --dim V=VALUE");
}

/* the float constants a fit follows through a whole number: N itself, or 1/N as the dtype rounds it */
PC_TEST(dyn_float_whole_or_reciprocal) {
  int64_t n = 0;
  CHECK(kir_dyn_float_int(PC_f32, 8.0, &n) == KIR_FLOAT_WHOLE && n == 8);
  CHECK(kir_dyn_float_int(PC_f64, -3.0, &n) == KIR_FLOAT_WHOLE && n == -3);
  CHECK(kir_dyn_float_int(PC_f32, (double)(float)(1.0 / 5), &n) == KIR_FLOAT_RECIP && n == 5);
  CHECK(kir_dyn_float_int(PC_f64, 1.0 / 49, &n) == KIR_FLOAT_RECIP && n == 49);
  CHECK(kir_dyn_float_int(PC_f64, (double)(float)(1.0 / 49), &n) == 0); /* f32's rounding is not f64's 1/49 */
  CHECK(kir_dyn_float_int(PC_f32, 0.3, &n) == 0 && kir_dyn_float_int(PC_f32, 2.5, &n) == 0);
  CHECK(kir_dyn_float_int(PC_f32, 0.0, &n) == 0 && kir_dyn_float_int(PC_f32, -0.0, &n) == 0);
  CHECK(kir_dyn_float_int(PC_f32, __builtin_nan(""), &n) == 0 && kir_dyn_float_int(PC_f32, 0x1p40, &n) == 0);
  CHECK(kir_dyn_float_int(PC_f16, 8.0, &n) == 0); /* only f32 and f64 constants follow a dim */
}
