/* tests/unit/test_gemm_rows.c: every row of runtime/gemm/gemm_rows.def against a plain reference GEMM on shapes around its tile, and the table's choices. */
#include "runtime/primc_rt.h"
#include "tests/test.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* deterministic values in [-1, 1) */
static void fill(float *p, int64_t n, uint32_t seed) {
  for (int64_t i = 0; i < n; i++) {
    seed = seed * 1664525u + 1013904223u;
    p[i] = (float)(seed >> 8) / (float)(1u << 23) - 1.0f;
  }
}

/* one product: op(A) is M x K, op(B) K x N, both stored with leading dimensions a column wider than needed */
typedef struct prob {
  int64_t M, N, K, lda, ldb;
  int ta, tb;
  float *a, *b;
  double *want, *mag; /* the exact-ish sum and sum |a b| of each C element */
} prob;

static prob prob_make(int64_t M, int64_t N, int64_t K, int ta, int tb) {
  prob p = {M, N, K, (ta ? M : K) + 1, (tb ? K : N) + 1, ta, tb, NULL, NULL, NULL, NULL};
  p.a = malloc(sizeof(float) * (size_t)((ta ? K : M) * p.lda));
  p.b = malloc(sizeof(float) * (size_t)((tb ? N : K) * p.ldb));
  p.want = calloc((size_t)(M * N), sizeof(double));
  p.mag = calloc((size_t)(M * N), sizeof(double));
  fill(p.a, (ta ? K : M) * p.lda, (uint32_t)(M * 131 + K));
  fill(p.b, (tb ? N : K) * p.ldb, (uint32_t)(N * 137 + K));
  for (int64_t m = 0; m < M; m++)
    for (int64_t k = 0; k < K; k++) {
      double a = ta ? p.a[k * p.lda + m] : p.a[m * p.lda + k];
      for (int64_t n = 0; n < N; n++) {
        double v = a * (tb ? p.b[n * p.ldb + k] : p.b[k * p.ldb + n]);
        p.want[m * N + n] += v;
        p.mag[m * N + n] += fabs(v);
      }
    }
  return p;
}

static void prob_free(prob *p) { free(p->a), free(p->b), free(p->want), free(p->mag); }

/* c (M x N, ldc N) against f(want): f is the fused store's bias-and-clamp when lo < hi, else the sum */
static int prob_check(const prob *p, const float *c, const char *row, const char *path, const float *bias, float lo,
                      float hi) {
  for (int64_t i = 0; i < p->M * p->N; i++) {
    double w = p->want[i] + (bias ? bias[i / p->N] : 0.0);
    if (bias) w = w < lo ? lo : w > hi ? hi : w;
    double tol = 4.0 * (double)(p->K + 2) * FLT_EPSILON * (p->mag[i] + 1.0);
    if (!CHECK_MSG(fabs(c[i] - w) <= tol, "%s %s ta=%d tb=%d M=%lld N=%lld K=%lld: C[%lld][%lld] = %g, want %g", row, path,
                   p->ta, p->tb, (long long)p->M, (long long)p->N, (long long)p->K, (long long)(i / p->N),
                   (long long)(i % p->N), c[i], w))
      return 0;
  }
  return 1;
}

/* B^T's elements gathered (primc_gemm.b_gather, as a conv's weight gradient reads its columns): column n's
 * row of memory at gn[n], uneven apart; along it k at gk[k], in runs of 1, 2 and 3 floats apart broken every
 * 11 k (the row's gather8 and its element-by-element walk); every other float NaN, so a stray read shows */
static int gathered(const prob *p, const char *name, float *c) {
  int64_t K = p->K, N = p->N, len = 0;
  int64_t *gn = malloc(sizeof *gn * (size_t)N), *gk = malloc(sizeof *gk * (size_t)K);
  for (int64_t k = 0; k < K; k++) gk[k] = len, len += k % 11 == 10 ? 5 : 1 + k * 3 / K;
  len += 3;
  float *gb = malloc(sizeof *gb * (size_t)(N * len + 2));
  for (int64_t i = 0; i < N * len + 2; i++) gb[i] = NAN;
  for (int64_t n = 0; n < N; n++) {
    gn[n] = n * len + n % 3;
    for (int64_t k = 0; k < K; k++) gb[gn[n] + gk[k]] = p->b[n * p->ldb + k];
  }
  primc_gemm g = {.M = p->M, .N = N, .K = K, .a = p->a, .lda = p->lda, .trans_a = p->ta, .b_gather = gb,
                  .gather_n = gn, .gather_k = gk, .c = c, .ldc = N};
  int ok = CHECK_INT(primc_sgemm_run(&g), PRIMC_OK) && prob_check(p, c, name, "gathered", NULL, 0, 0);
  if (ok && !p->ta) { /* A's k where they lie too (a_koff): runs of 7 (an image's pixels), 3 floats between */
    int64_t *ak = malloc(sizeof *ak * (size_t)K), alen = K + K / 7 * 3 + 1;
    float *ga = malloc(sizeof *ga * (size_t)(p->M * alen));
    for (int64_t i = 0; i < p->M * alen; i++) ga[i] = NAN;
    for (int64_t k = 0; k < K; k++) ak[k] = k + k / 7 * 3;
    for (int64_t m = 0; m < p->M; m++)
      for (int64_t k = 0; k < K; k++) ga[m * alen + ak[k]] = p->a[m * p->lda + k];
    g.a = ga, g.lda = alen, g.a_koff = ak;
    ok = CHECK_INT(primc_sgemm_run(&g), PRIMC_OK) && prob_check(p, c, name, "gathered A and B", NULL, 0, 0);
    free(ak), free(ga);
  }
  free(gn), free(gk), free(gb);
  return ok;
}

/* the row's shape through each entry point: plain, B packed ahead, the general form with a fused store, and B
 * gathered */
static int run_paths(int row, int64_t M, int64_t N, int64_t K) {
  const char *name = primc_gemm_row_name(row);
  float *c = malloc(sizeof(float) * (size_t)(M * N));
  int ok = 1;
  for (int t = 0; t < 4 && ok; t++) {
    prob p = prob_make(M, N, K, t & 1, t >> 1);
    for (int64_t i = 0; i < M * N; i++) c[i] = NAN; /* beta 0 must not read C */
    ok = CHECK_INT(primc_sgemm(p.ta, p.tb, M, N, K, 1.0f, p.a, p.lda, p.b, p.ldb, 0.0f, c, N), PRIMC_OK) &&
         prob_check(&p, c, name, "sgemm", NULL, 0, 0);
    if (ok && !p.ta) { /* B packed once, as codegen packs weights */
      size_t bytes = primc_sgemm_packed_b_size(N, K);
      void *packed = aligned_alloc(64, (bytes + 63) / 64 * 64);
      ok = CHECK_INT(primc_sgemm_pack_b(p.tb, N, K, p.b, p.ldb, packed), PRIMC_OK) &&
           CHECK_INT(primc_sgemm_prepacked(0, M, N, K, 1.0f, p.a, p.lda, packed, 0.0f, c, N, NULL, NULL), PRIMC_OK) &&
           prob_check(&p, c, name, "prepacked", NULL, 0, 0);
      free(packed);
    }
    if (ok && p.tb) ok = gathered(&p, name, c);
    if (ok && !p.ta && !p.tb) { /* the store the conv rows fuse: bias per row, then a clamp */
      float *bias = malloc(sizeof(float) * (size_t)M);
      fill(bias, M, 7u);
      primc_gemm_store st = {.bias = bias, .bias_stride = 1, .lo = -0.5f, .hi = 0.75f};
      primc_gemm g = {.M = M, .N = N, .K = K, .a = p.a, .lda = p.lda, .b = p.b, .ldb = p.ldb, .c = c, .ldc = N,
                      .store = &st};
      ok = CHECK_INT(primc_sgemm_run(&g), PRIMC_OK) && prob_check(&p, c, name, "store", bias, st.lo, st.hi);
      free(bias);
    }
    prob_free(&p);
  }
  free(c);
  return ok;
}

/* M, N, K around the row's tile: 1, one short of it, one over, several tiles with a remainder; K across
 * the driver's K blocks */
static void check_row(int row) {
  int isa = primc_gemm_row_isa(row), mr = primc_gemm_row_mr(row), nr = primc_gemm_row_nr(row);
  if (primc_sgemm_force_isa(isa) != 0) {
    SKIP("GEMM row %s needs %s, which this CPU lacks: not run", primc_gemm_row_name(row), primc_sgemm_isa_name(isa));
    return;
  }
  if (CHECK_MSG(primc_gemm_row_active() == row, "forcing %s runs row %s, not %s", primc_sgemm_isa_name(isa),
                primc_gemm_row_name(primc_gemm_row_active()), primc_gemm_row_name(row))) {
    const int64_t ms[] = {1, mr - 1 > 0 ? mr - 1 : 2, mr + 1, 2 * mr + 3};
    const int64_t ns[] = {1, nr - 1, nr + 1, 3 * nr + 5};
    const int64_t ks[] = {1, 17, 300, 1030};
    int ok = 1;
    for (int i = 0; i < 4 && ok; i++)
      for (int j = 0; j < 4 && ok; j++)
        for (int k = 0; k < 4 && ok; k++) ok = run_paths(row, ms[i], ns[j], ks[k]);
  }
  primc_sgemm_force_isa(PRIMC_ISA_AUTO);
}

#define PRIMC_GEMM_ROW(id, ...) \
  PC_TEST(gemm_row_##id) { check_row(PRIMC_GEMM_ROW_##id); }
#include "runtime/gemm/gemm_rows.def"
#undef PRIMC_GEMM_ROW

/* Every ISA runs a row that needs no more than it has, the best ISA here the first such row in rank order,
 * names are distinct, and the packed-B size and primc_sgemm_mr follow the active row's tile. */
PC_TEST(gemm_rows_table) {
  for (int isa = PRIMC_ISA_SCALAR; isa < PRIMC_ISA_COUNT; isa++) {
    int r = primc_gemm_row_of_isa(isa);
    CHECK_MSG(r >= 0 && primc_isa_covers(isa, primc_gemm_row_isa(r)), "ISA %s runs row %d", primc_sgemm_isa_name(isa), r);
    for (int q = 0; q < r; q++)
      CHECK_MSG(!primc_isa_covers(isa, primc_gemm_row_isa(q)), "%s outranks %s on %s", primc_gemm_row_name(q), primc_gemm_row_name(r),
                primc_sgemm_isa_name(isa));
  }
  for (int r = 0; r < PRIMC_GEMM_ROW_COUNT; r++)
    for (int q = 0; q < r; q++) CHECK(strcmp(primc_gemm_row_name(q), primc_gemm_row_name(r)) != 0);
  CHECK(primc_gemm_row_name(PRIMC_GEMM_ROW_COUNT) == NULL);
  CHECK_INT(primc_gemm_row_isa(-1), -1);
  CHECK_INT(primc_gemm_row_of_isa(PRIMC_ISA_COUNT), -1);
  int active = primc_gemm_row_active(), nr = primc_gemm_row_nr(active);
  CHECK_INT(active, primc_gemm_row_of_isa(primc_sgemm_isa()));
  CHECK_INT(primc_sgemm_mr(), primc_gemm_row_mr(active));
  CHECK_INT(primc_sgemm_packed_b_size(nr + 1, 3), 64 + 2 * nr * 3 * sizeof(float));
}

/* Panels packed for every row's ISA, on whatever machine runs the test (a cross compile packs a NEON target's
 * weights on x86): each passes the header check and multiplies right through primc_sgemm_prepacked_any, directly
 * where the ISA is the running one's, else read out of the panels row by row. Sizes and tile edges vary. */
PC_TEST(gemm_pack_for_any_isa) {
  const int64_t shapes[][3] = {{5, 37, 300}, {13, 8, 1}, {1, 33, 517}};
  float *c = malloc(sizeof(float) * 13 * 37);
  for (int r = 0; r < PRIMC_GEMM_ROW_COUNT; r++) {
    int isa = primc_gemm_row_isa(r), ok = 1;
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes && ok; s++)
      for (int tb = 0; tb < 2 && ok; tb++) {
        int64_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
        prob p = prob_make(M, N, K, 0, tb);
        size_t bytes = primc_sgemm_packed_b_size_isa(isa, N, K), checked = 0;
        void *packed = aligned_alloc(64, (bytes + 63) / 64 * 64);
        ok = CHECK_MSG(bytes >= (size_t)(N * K) * sizeof(float), "%s: %zu bytes", primc_gemm_row_name(r), bytes) &&
             CHECK_INT(primc_sgemm_pack_b_isa(isa, tb, N, K, p.b, p.ldb, packed), PRIMC_OK) &&
             CHECK_INT(primc_sgemm_packed_check(packed, bytes, N, K, &checked), PRIMC_OK) && CHECK(checked == bytes) &&
             CHECK_INT(primc_sgemm_prepacked_any(0, M, N, K, 1.0f, p.a, p.lda, packed, 0.0f, c, N, NULL, NULL), PRIMC_OK) &&
             prob_check(&p, c, primc_gemm_row_name(r), "packed for its ISA", NULL, 0, 0);
        free(packed);
        prob_free(&p);
      }
  }
  CHECK_INT(primc_sgemm_packed_b_size_isa(PRIMC_ISA_COUNT, 8, 8), 0);
  free(c);
}
