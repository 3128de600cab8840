/* tests/unit/test_igemm.c: the int8 GEMM (runtime/gemm/igemm*.c), every row the CPU runs, against a plain int64 loop reduced mod 2^32, on shapes around each row's tile and the task blocks, with zero points of u8 x s8, u8 x u8 and s8 x s8 models and per-column ones, and rows too wide for u8. */
#include "runtime/gemm/igemm.h"
#include "runtime/primc_rt.h"
#include "tests/test.h"

#include <stdlib.h>
#include <string.h>

static uint32_t next(uint32_t *s) {
  *s = *s * 1664525u + 1013904223u;
  return *s >> 8;
}

/* operand kinds: what a quantized model's dot sees once its zero points are subtracted (PER_COL: u8 weights with
 * a zero point per column, together spanning more than 256 values). SPLIT: trained-looking s8 weights, most
 * small and a few near +-127, against u8 activations often 255: the AVX2 row's split form with a short list of
 * excesses; EDGE: pairs of weights around the largest sums vpmaddubsw takes without saturating (|b0| + |b1|
 * = 128 and 129, -128 beside -128 and beside 127) against activations at 0, 1, 254 and 255. */
enum { U8_S8, U8_U8, S8_S8, PER_COL, WIDE, SPLIT, EDGE, KINDS };

/* a weight of the SPLIT or EDGE kind */
static int32_t weight(int kind, uint32_t *s) {
  static const int32_t edge[] = {-128, -127, -65, -64, -63, 63, 64, 65, 127};
  uint32_t r = next(s) % 100;
  if (kind == SPLIT) return r < 2 ? (int32_t)(next(s) % 29) + 99 - (int32_t)(r % 2) * 226 : (int32_t)(next(s) % 81) - 40;
  return r < 12 ? edge[next(s) % 9] : (int32_t)(next(s) % 5) - 2;
}

/* A (na int32s) and B (K x N, or N x K when tb) as int32 of the kind */
static void fill(int kind, int32_t *a, int64_t na, int32_t *b, int64_t N, int64_t K, int tb, uint32_t seed) {
  int32_t za = kind == S8_S8 ? -7 : 131, zb = kind == U8_U8 ? 100 : kind == S8_S8 ? 0 : -3;
  for (int64_t i = 0; i < na; i++) {
    int32_t q = kind == S8_S8 ? (int32_t)(next(&seed) % 256) - 128 : (int32_t)(next(&seed) % 256);
    a[i] = kind == WIDE ? (int32_t)(next(&seed) % 601) - 300 : q - za;
    if (kind == SPLIT || kind == EDGE) a[i] = (int32_t[]){0, 1, 254, 255, 255, 255}[next(&seed) % 6];
    if (kind == SPLIT && next(&seed) % 2) a[i] = (int32_t)(next(&seed) % 256);
  }
  for (int64_t i = 0; i < N * K; i++) {
    int64_t n = tb ? i / K : i % N;
    int32_t q = kind == U8_U8 || kind == PER_COL ? (int32_t)(next(&seed) % 256) : (int32_t)(next(&seed) % 256) - 128;
    b[i] = kind == SPLIT || kind == EDGE ? weight(kind, &seed) : q - (kind == PER_COL ? (int32_t)(n * 37 % 256) : zb);
  }
}

/* the row whose records (igemm_rows.def's prep) a case packs beside B: the AVX2 row's where this CPU runs it, on
 * every other case (with_records), so that that row reads them and every other row passes them by; -1: none */
static int records_row(int with_records) {
#if PRIMC_X86
  static int runs = -1;
  if (runs < 0) {
    int32_t b[64] = {0};
    char *p = aligned_alloc(64, (primc_igemm_packed_b_size_row(1, 64, PRIMC_IGEMM_ROW_AVX2) + 63) / 64 * 64);
    runs = primc_igemm_pack_b_row(0, 1, 64, b, p, PRIMC_IGEMM_ROW_AVX2) == PRIMC_OK;
    free(p);
  }
  return runs && with_records ? PRIMC_IGEMM_ROW_AVX2 : -1;
#else
  (void)with_records;
  return -1;
#endif
}

/* C = A B through pack (with `records` row's records, -1 none) + prepacked against int64 sums reduced mod 2^32; 1
 * when equal */
static int check_one(int row, int kind, int64_t M, int64_t N, int64_t K, int ta, int tb, int records) {
  int64_t lda = (ta ? M : K) + 3, ldc = N + 2;
  int32_t *a = malloc(sizeof(int32_t) * (size_t)((ta ? K : M) * lda));
  int32_t *b = malloc(sizeof(int32_t) * (size_t)(N * K));
  int32_t *c = malloc(sizeof(int32_t) * (size_t)(M * ldc));
  size_t bs = primc_igemm_packed_b_size_row(N, K, records), ss = primc_igemm_scratch_size(M, K);
  void *pb = aligned_alloc(64, (bs + 63) / 64 * 64), *sc = aligned_alloc(64, (ss + 63) / 64 * 64);
  fill(kind, a, (ta ? K : M) * lda, b, N, K, tb, (uint32_t)(M * 7919 + N * 31 + K + kind));
  for (int64_t i = 0; i < M * ldc; i++) c[i] = 0x5a5a5a5a; /* old values must not leak in, padding must stay */
  int ok = CHECK_INT(primc_igemm_pack_b_row(tb, N, K, b, pb, records), PRIMC_OK) &&
           CHECK_INT(primc_igemm_packed_check(pb, bs, N, K), PRIMC_OK) &&
           CHECK_INT(primc_igemm_prepacked(ta, M, N, K, a, lda, pb, c, ldc, sc), PRIMC_OK);
  for (int64_t m = 0; m < M && ok; m++)
    for (int64_t n = 0; n < ldc && ok; n++) {
      int64_t want = 0x5a5a5a5a;
      if (n < N) {
        want = 0;
        for (int64_t k = 0; k < K; k++)
          want += (int64_t)(ta ? a[k * lda + m] : a[m * lda + k]) * (tb ? b[n * K + k] : b[k * N + n]);
      }
      ok = CHECK_MSG(c[m * ldc + n] == (int32_t)(uint32_t)(uint64_t)want,
                     "row %s kind %d %lldx%lldx%lld ta=%d tb=%d records %d: C[%lld][%lld] = %d, want %d",
                     primc_igemm_row_name(row), kind, (long long)M, (long long)N, (long long)K, ta, tb, records,
                     (long long)m, (long long)n, c[m * ldc + n], (int32_t)(uint32_t)(uint64_t)want);
    }
  free(a), free(b), free(c), free(pb), free(sc);
  return ok;
}

/* A read in place (a row's kern_ip): rows of a map ow pixels wide at strides of its own, blocks of k at scattered
 * offsets, each row's offset and the sum of its bytes given; C against int64 sums of (A + roff) B */
static int check_in_place(int64_t M, int64_t N, int64_t K, int64_t ow) {
  int64_t blocks = (K + 63) / 64, col = 96, rowb = ow * col + 40, span = blocks * 64 + 100;
  int64_t mapn = (M / ow + 1) * rowb + span + 64;
  uint8_t *map = malloc((size_t)mapn);
  int32_t *b = malloc(sizeof(int32_t) * (size_t)(N * K)), *c = malloc(sizeof(int32_t) * (size_t)(M * N));
  int32_t *roff = malloc(sizeof(int32_t) * (size_t)M), *rsum = malloc(sizeof(int32_t) * (size_t)M);
  int64_t *boff = malloc(sizeof(int64_t) * (size_t)blocks);
  size_t bs = primc_igemm_packed_b_size(N, K);
  void *pb = aligned_alloc(64, (bs + 63) / 64 * 64);
  uint32_t seed = (uint32_t)(M * 13 + N * 7 + K);
  for (int64_t i = 0; i < mapn; i++) map[i] = (uint8_t)next(&seed);
  for (int64_t i = 0; i < N * K; i++) b[i] = (int32_t)(next(&seed) % 256) - 128;
  for (int64_t i = 0; i < blocks; i++) boff[i] = (blocks - 1 - i) * 64 + i % 3 * 5; /* backwards, not aligned */
  for (int64_t m = 0; m < M; m++) {
    const uint8_t *r = map + m / ow * rowb + m % ow * col;
    int32_t sum = 0;
    for (int64_t k = 0; k < K; k++) sum += r[boff[k / 64] + k % 64];
    roff[m] = -(int32_t)(m % 5) * 11, rsum[m] = sum;
  }
  primc_igemm_ip ip = {map, ow, rowb, col, boff, roff, rsum};
  int ok = CHECK_INT(primc_igemm_pack_b(0, N, K, b, pb), PRIMC_OK) &&
           CHECK_INT(primc_igemm_in_place(M, N, K, &ip, pb, c, N), PRIMC_OK);
  for (int64_t m = 0; m < M && ok; m++)
    for (int64_t n = 0; n < N && ok; n++) {
      const uint8_t *r = map + m / ow * rowb + m % ow * col;
      int64_t want = 0;
      for (int64_t k = 0; k < K; k++) want += ((int64_t)r[boff[k / 64] + k % 64] + roff[m]) * b[k * N + n];
      ok = CHECK_MSG(c[m * N + n] == (int32_t)want, "in place %lldx%lldx%lld (rows of %lld): C[%lld][%lld] = %d, "
                     "want %lld", (long long)M, (long long)N, (long long)K, (long long)ow, (long long)m, (long long)n,
                     c[m * N + n], (long long)want);
    }
  free(map), free(b), free(c), free(roff), free(rsum), free(boff), free(pb);
  return ok;
}

/* M, N, K around the row's tile: 1, one short, one over, several with a remainder, past a task's 128 rows and
 * 128 columns; K around the 64-deep k step and long; every kind and transpose along the way */
static void check_row(int row, int mr) {
  if (primc_igemm_force_row(row) != 0) {
    SKIP("int8 GEMM row %s: this CPU lacks what it needs, not run", primc_igemm_row_name(row));
    return;
  }
  CHECK_INT(primc_igemm_row_active(), row);
  /* the portable row packs A with the portable loop too, as a machine without AVX2 does (the CPU checks were read
   * above, with the real instruction set) */
  if (row == PRIMC_IGEMM_ROW_GENERIC) primc_sgemm_force_isa(PRIMC_ISA_SCALAR);
#if PRIMC_X86
  /* and the AVX2 row with AVX2's packer, on a CPU with AVX-512 too */
  if (row == PRIMC_IGEMM_ROW_AVX2) primc_sgemm_force_isa(PRIMC_ISA_AVX2);
#endif
  const int64_t ms[] = {1, mr - 1 > 0 ? mr - 1 : 2, mr + 1, 2 * mr + 3, 133};
  const int64_t ns[] = {1, 31, 33, 3 * 32 + 5, 161};
  const int64_t ks[] = {1, 63, 65, 300, 2100}; /* 2100: three K blocks, the last short */
  int ok = 1, i = 0;
  for (int x = 0; x < 5 && ok; x++)
    for (int y = 0; y < 5 && ok; y++)
      for (int z = 0; z < 5 && ok; z++, i++) {
        if (ms[x] * ns[y] * ks[z] > 4000000 && (x + y + z) % 2) continue; /* the biggest shapes once in two */
        ok = check_one(row, i % KINDS, ms[x], ns[y], ks[z], i / KINDS % 2, i / (2 * KINDS) % 2, records_row(i % 3 != 1));
      }
  /* A in place where the row reads it so; elsewhere the call refuses */
  if (primc_igemm_in_place_runs()) {
    const int64_t ims[] = {1, 7, 133}, ins[] = {33, 161}, iks[] = {64, 192, 2112};
    for (int x = 0; x < 3 && ok; x++)
      for (int y = 0; y < 2 && ok; y++)
        for (int z = 0; z < 3 && ok; z++) ok = check_in_place(ims[x], ins[y], iks[z], 5 + z);
    /* rows of 48 and 40 pixels: 16-row strips within one row of the map (AMX loads them as one tile where they
     * lie) and across two */
    if (ok) ok = check_in_place(133, 33, 192, 48);
    if (ok) ok = check_in_place(133, 161, 2112, 40);
  } else {
    int64_t boff = 0;
    int32_t zero = 0;
    uint8_t byte = 0;
    primc_igemm_ip ip = {&byte, 1, 0, 0, &boff, &zero, &zero};
    int32_t c = 0;
    CHECK_INT(primc_igemm_in_place(1, 1, 64, &ip, NULL, &c, 1), PRIMC_ERR_ARG);
  }
  /* sums past 2^31 wrap as int32 does: 255 x 127 (after the offsets) over 70,000 k */
  if (ok) check_one(row, U8_S8, 3, 40, 70000, 0, 0, records_row(1));
  /* the split form over whole tasks, several K blocks and a short last one, split per task and at packing */
  for (int kind = SPLIT; kind <= EDGE && ok; kind++)
    for (int rec = 0; rec < 2 && ok; rec++) ok = check_one(row, kind, 133, 77, 2500, 0, kind == EDGE, records_row(rec));
  primc_igemm_force_row(-1);
  primc_sgemm_force_isa(PRIMC_ISA_AUTO);
}

#define PRIMC_IGEMM_ROW(id, name, needs, mr, ...) \
  PC_TEST(igemm_row_##id) { check_row(PRIMC_IGEMM_ROW_##id, mr); }
#include "runtime/gemm/igemm_rows.def"
#undef PRIMC_IGEMM_ROW

/* the portable row runs anywhere, the pick is the first row the CPU runs, names are distinct */
PC_TEST(igemm_rows_table) {
  int first = -1;
  for (int r = 0; r < PRIMC_IGEMM_ROW_COUNT; r++) {
    if (first < 0 && primc_igemm_force_row(r) == 0) first = r;
    for (int q = 0; q < r; q++) CHECK(strcmp(primc_igemm_row_name(q), primc_igemm_row_name(r)) != 0);
  }
  primc_igemm_force_row(-1);
  CHECK_INT(primc_igemm_row_active(), first);
  CHECK_INT(primc_igemm_force_row(PRIMC_IGEMM_ROW_GENERIC), 0);
  CHECK_INT(primc_igemm_force_row(PRIMC_IGEMM_ROW_COUNT), -1);
  primc_igemm_force_row(-1);
  CHECK(primc_igemm_row_name(PRIMC_IGEMM_ROW_COUNT) == NULL);
}

PC_TEST(igemm_rejects_bad_input) {
  int32_t b[64 * 8], a[4 * 64], c[4 * 8];
  for (int i = 0; i < 64 * 8; i++) b[i] = i % 200 - 100;
  for (int i = 0; i < 4 * 64; i++) a[i] = i % 256;
  size_t sz = primc_igemm_packed_b_size(8, 64), ss = primc_igemm_scratch_size(4, 64);
  CHECK(sz > 0 && primc_igemm_packed_b_size(0, 64) == 0 && primc_igemm_scratch_size(4, 0) == 0);
  char *p = aligned_alloc(64, (sz + 63) / 64 * 64), *s = aligned_alloc(64, (ss + 63) / 64 * 64);
  CHECK_INT(primc_igemm_pack_b(0, 8, 64, b, p), PRIMC_OK);
  CHECK_INT(primc_igemm_packed_check(p, sz, 8, 64), PRIMC_OK);
  CHECK_INT(primc_igemm_packed_check(p, sz - 1, 8, 64), PRIMC_ERR_WEIGHTS); /* truncated */
  CHECK_INT(primc_igemm_packed_check(p, sz, 9, 64), PRIMC_ERR_WEIGHTS);     /* another shape */
  CHECK_INT(primc_igemm_prepacked(0, 4, 9, 64, a, 64, p, c, 9, s), PRIMC_ERR_ARG);
  p[0] ^= 1;
  CHECK_INT(primc_igemm_packed_check(p, sz, 8, 64), PRIMC_ERR_WEIGHTS); /* bad magic */
  CHECK_INT(primc_igemm_prepacked(0, 4, 8, 64, a, 64, p, c, 8, s), PRIMC_ERR_ARG);
  CHECK(primc_igemm_b_fits(0, 8, 64, b));
  b[5] = 170; /* column 5 within [-95, 170]: 266 values, more than s8 less an offset holds */
  CHECK(!primc_igemm_b_fits(0, 8, 64, b));
  CHECK_INT(primc_igemm_pack_b(0, 8, 64, b, p), PRIMC_ERR_ARG);
  b[5] = 5;
  /* a row without records packs none */
  CHECK(primc_igemm_packed_b_size_row(8, 64, PRIMC_IGEMM_ROW_GENERIC) == sz);
#if PRIMC_X86
  /* records: no further than the bytes, and of a row of this build that keeps some (the header's second word) */
  if (records_row(1) >= 0) {
    size_t rz = primc_igemm_packed_b_size_row(8, 64, PRIMC_IGEMM_ROW_AVX2);
    char *r = aligned_alloc(64, (rz + 63) / 64 * 64);
    CHECK(rz > sz);
    CHECK_INT(primc_igemm_pack_b_row(0, 8, 64, b, r, PRIMC_IGEMM_ROW_AVX2), PRIMC_OK);
    CHECK_INT(primc_igemm_packed_check(r, rz, 8, 64), PRIMC_OK);
    CHECK_INT(primc_igemm_packed_check(r, rz - 1, 8, 64), PRIMC_ERR_WEIGHTS); /* records cut short */
    int32_t bad = PRIMC_IGEMM_ROW_COUNT + 1;
    memcpy(r + 4, &bad, sizeof bad);
    CHECK_INT(primc_igemm_packed_check(r, rz, 8, 64), PRIMC_ERR_WEIGHTS); /* a row past the table */
    bad = PRIMC_IGEMM_ROW_GENERIC + 1;
    memcpy(r + 4, &bad, sizeof bad);
    CHECK_INT(primc_igemm_packed_check(r, rz, 8, 64), PRIMC_ERR_WEIGHTS); /* a row that keeps none */
    /* records from a weights file are not trusted: every count, end and offset in them huge, the AVX2 row still
     * reads only inside its arrays (ASan's suite would see a read out of bounds) */
    int32_t row = PRIMC_IGEMM_ROW_AVX2 + 1;
    memcpy(r + 4, &row, sizeof row);
    memset(r + (sz + 63) / 64 * 64, 0x7f, rz - (sz + 63) / 64 * 64);
    CHECK_INT(primc_igemm_packed_check(r, rz, 8, 64), PRIMC_OK);
    if (primc_igemm_force_row(PRIMC_IGEMM_ROW_AVX2) == 0) {
      CHECK_INT(primc_igemm_prepacked(0, 4, 8, 64, a, 64, r, c, 8, s), PRIMC_OK);
      primc_igemm_force_row(-1);
    }
    free(r);
  }
#endif
  free(p), free(s);
}
