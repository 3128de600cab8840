/* runtime/gemm/pack.c: B packed into a row's panels (per call, and once for weights behind a checked header), B read back out of another ISA's panels, A packed into strips. */
#include "runtime/gemm/gemm.h"

#include <string.h>

/* A gathered B: each column's own row of memory at gn[n], row k of B at gk[k] along it. Where 8 k step evenly
 * by 1 or 2 (a stride-1 or stride-2 conv's pixels along a row of its padded input) the row's gather8 transposes 8
 * columns' runs at once; elsewhere (the ends of rows of few pixels) element by element. */
static void pack_b_gather(const bsrc *s, const gm_row *kr, int64_t k0, int64_t kc, int64_t n0, int64_t n1, float *dst) {
  const int NR = kr->nr;
  const int64_t *gk = s->gk + k0;
  /* the walk over k, the same for every panel: at k, 8 evenly st apart (run[k] = st) or one (0) */
  unsigned char run[KC_MAX];
  for (int64_t k = 0; k < kc;) {
    int64_t st = k + 8 <= kc && kr->gather8 ? gk[k + 1] - gk[k] : 0;
    for (int i = 2; i < 8 && (st == 1 || st == 2); i++)
      if (gk[k + i] - gk[k + i - 1] != st) st = 0;
    run[k] = st == 1 || st == 2 ? (unsigned char)st : 0;
    k += run[k] ? 8 : 1;
  }
  const float *rows[NR_MAX];
  for (int64_t p = 0; p * NR < n1 - n0; p++) {
    float *d = dst + p * kc * NR;
    int nr = (int)min64(NR, n1 - n0 - p * NR);
    for (int j = 0; j < nr; j++) rows[j] = s->gb + s->gn[n0 + p * NR + j];
    for (int64_t k = 0; k < kc;) {
      if (run[k]) {
        for (int jb = 0; jb < NR; jb += 8) kr->gather8(rows + jb, nr - jb, gk[k], run[k], d + k * NR + jb, NR);
        k += 8;
        continue;
      }
      for (int j = 0; j < NR; j++) d[k * NR + j] = j < nr ? rows[j][gk[k]] : 0.0f;
      k++;
    }
  }
}

/* columns [p0*NR, n1) of rows [k0, k0+kc) into panels dst[p - p0][k][NR], zero-padded to NR */
void primc_gm_pack_b(const bsrc *s, const gm_row *kr, int64_t k0, int64_t kc, int64_t p0, int64_t n1, float *dst) {
  const int NR = kr->nr;
  int64_t n0 = p0 * NR, np = cdiv(n1 - n0, NR);
  if (s->gb) {
    pack_b_gather(s, kr, k0, kc, n0, n1, dst);
    return;
  }
  if (s->trans) {
    for (int64_t p = 0; p < np; p++) {
      float *d = dst + p * kc * NR;
      int64_t nr = min64(NR, n1 - n0 - p * NR), j = 0, kt = kr->trans16 ? kc / 16 * 16 : 0;
      const float *src = s->b + (n0 + p * NR) * s->ldb + k0;
      for (; j + 16 <= nr && kt; j += 16)
        for (int64_t k = 0; k < kt; k += 16) kr->trans16(src + j * s->ldb + k, s->ldb, d + k * NR + j, NR);
      for (int64_t jj = 0; jj < NR; jj++)
        for (int64_t k = jj < j ? kt : 0; k < kc; k++) d[k * NR + jj] = jj < nr ? src[jj * s->ldb + k] : 0.0f;
    }
    return;
  }
  float tmp[NC_MAX];
  for (int64_t k = 0; k < kc; k++) {
    const float *src = tmp; /* B given by rows (another ISA's panels read back) has no pointer to offset */
    if (s->row) s->row(s->row_ctx, k0 + k, n0, n1 - n0, tmp);
    else src = s->b + (k0 + k) * s->ldb + n0;
    for (int64_t p = 0; p < np; p++) {
      int64_t nr = min64(NR, n1 - n0 - p * NR);
      float *d = dst + p * kc * NR + k * NR;
      memcpy(d, src + p * NR, (size_t)nr * sizeof(float));
      if (nr < NR) memset(d + nr, 0, (size_t)(NR - nr) * sizeof(float));
    }
  }
}

/* ---------------------------------------------------------------- prepacked B */

#define PACKED_MAGIC 0x42504d47u /* "GMPB" */

/* bytes of an N x K B packed in panels nr wide, header included */
static size_t packed_bytes(int64_t nr, int64_t N, int64_t K) {
  return sizeof(packed_hdr) + (size_t)(cdiv(N, nr) * nr * K) * sizeof(float);
}

size_t primc_sgemm_packed_b_size(int64_t N, int64_t K) { return primc_sgemm_packed_b_size_isa(primc_sgemm_isa(), N, K); }

size_t primc_sgemm_packed_b_size_isa(int isa, int64_t N, int64_t K) {
  return isa >= 0 && isa < PRIMC_ISA_COUNT ? packed_bytes(primc_gm_row_for(isa)->nr, N, K) : 0;
}

/* whether h is a header primc_sgemm_pack_b writes for an N x K B on some ISA: a weights file may have
 * been altered, and the ISA, panel width and K block decide where every later read goes */
int primc_gm_hdr_valid(const packed_hdr *h, int64_t N, int64_t K) {
  if (h->magic != PACKED_MAGIC || h->isa < 0 || h->isa >= PRIMC_ISA_COUNT || h->n != N || h->k != K || N < 0 || K < 0 ||
      N > ((int64_t)1 << 40) || K > ((int64_t)1 << 40))
    return 0;
  const gm_row *kr = primc_gm_row_for(h->isa);
  return h->nr == kr->nr && (K == 0 || h->kc == k_block(kr, K));
}

int primc_sgemm_packed_check(const void *packed_b, size_t avail, int64_t N, int64_t K, size_t *bytes) {
  packed_hdr h;
  if (!packed_b || ((uintptr_t)packed_b & 63) || avail < sizeof h) return PRIMC_ERR_WEIGHTS;
  memcpy(&h, packed_b, sizeof h);
  if (!primc_gm_hdr_valid(&h, N, K)) return PRIMC_ERR_WEIGHTS;
  if (N && K && (double)N * (double)K > (double)avail) return PRIMC_ERR_WEIGHTS; /* before the product can overflow */
  size_t need = packed_bytes(h.nr, N, K);
  if (need > avail) return PRIMC_ERR_WEIGHTS;
  if (bytes) *bytes = need;
  return PRIMC_OK;
}

/* for each K block at k0: panels of the whole width, panel p at [k0 * n_panels * NR + p * kc * NR] */
int primc_sgemm_pack_b(int trans_b, int64_t N, int64_t K, const float *B, int64_t ldb, void *packed) {
  return primc_sgemm_pack_b_isa(primc_sgemm_isa(), trans_b, N, K, B, ldb, packed);
}

/* the panels need no code of the row's ISA (a row without trans16 packs B^T in plain C): any machine packs them */
int primc_sgemm_pack_b_isa(int isa_id, int trans_b, int64_t N, int64_t K, const float *B, int64_t ldb, void *packed) {
  if (!packed || ((uintptr_t)packed & 63) || N < 0 || K < 0 || (N && K && (!B || ldb < (trans_b ? K : N))) ||
      isa_id < 0 || isa_id >= PRIMC_ISA_COUNT)
    return PRIMC_ERR_ARG;
  const gm_row *kr = primc_gm_row_for(isa_id);
  gm_row plain = {.nr = kr->nr, .kc = kr->kc}; /* another family's row: its panels by plain C copies */
  if (!primc_isa_covers(primc_sgemm_isa(), kr->isa)) kr = &plain;
  int64_t kcb = k_block(kr, K);
  packed_hdr h = {.magic = PACKED_MAGIC, .isa = isa_id, .nr = kr->nr, .kc = (int32_t)kcb, .n = N, .k = K};
  memcpy(packed, &h, sizeof h);
  float *dst = (float *)((char *)packed + sizeof h);
  bsrc s = {.b = B, .ldb = ldb, .trans = trans_b};
  int64_t np = cdiv(N, kr->nr);
  for (int64_t k0 = 0; k0 < K; k0 += kcb) {
    int64_t kc = min64(kcb, K - k0);
    for (int64_t p0 = 0; p0 < np; p0 += NC_MAX / kr->nr) {
      int64_t p1 = min64(np, p0 + NC_MAX / kr->nr);
      primc_gm_pack_b(&s, kr, k0, kc, p0, min64(N, p1 * kr->nr), dst + k0 * np * kr->nr + p0 * kc * kr->nr);
    }
  }
  return PRIMC_OK;
}

/* ---------------------------------------------------------------- prepacked B of any ISA */

typedef struct packed_reader {
  const float *data;
  int64_t nr, kc, np, k;
} packed_reader;

/* b(k, n0 .. n0+nc) out of panels laid out by primc_sgemm_pack_b with the reader's nr and kc */
static void packed_row(void *ctx, int64_t k, int64_t n0, int64_t nc, float *dst) {
  const packed_reader *r = ctx;
  int64_t k0 = k / r->kc * r->kc, kcb = min64(r->kc, r->k - k0);
  const float *base = r->data + k0 * r->np * r->nr + (k - k0) * r->nr;
  for (int64_t j = 0; j < nc; j++) {
    int64_t n = n0 + j;
    dst[j] = base[(n / r->nr) * kcb * r->nr + n % r->nr];
  }
}

int primc_sgemm_prepacked_any(int trans_a, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                              const void *packed_b, float beta, float *C, int64_t ldc, primc_epilogue epi,
                              void *epi_ctx) {
  packed_hdr h;
  if (!packed_b || ((uintptr_t)packed_b & 63)) return PRIMC_ERR_ARG;
  memcpy(&h, packed_b, sizeof h);
  if (!primc_gm_hdr_valid(&h, N, K)) return PRIMC_ERR_ARG;
  if (h.isa == primc_sgemm_isa())
    return primc_sgemm_prepacked(trans_a, M, N, K, alpha, A, lda, packed_b, beta, C, ldc, epi, epi_ctx);
  packed_reader r = {(const float *)((const char *)packed_b + sizeof h), h.nr, h.kc, cdiv(N, h.nr), K};
  return primc_sgemm_gen_b(trans_a, M, N, K, alpha, A, lda, packed_row, &r, beta, C, ldc, epi, epi_ctx);
}

/* ---------------------------------------------------------------- packed A */

/* strips as the driver splits M for a tile of mr rows; strip s holds rows [m0, m1) as [k][m1 - m0] at
 * dst + m0 * K, so the whole is M * K floats whatever mr is */
int primc_sgemm_pack_a(int64_t M, int64_t K, const float *A, int64_t lda, int mr, float *dst) {
  if (M < 0 || K < 0 || mr < 1 || mr > MR_MAX || (M && K && (!A || !dst || lda < K))) return PRIMC_ERR_ARG;
  int64_t strips = cdiv(M, mr);
  for (int64_t s = 0; s < strips; s++) {
    int64_t h, m0 = gm_strip(M, strips, s, &h);
    for (int64_t r = 0; r < h; r++)
      for (int64_t k = 0; k < K; k++) dst[m0 * K + k * h + r] = A[(m0 + r) * lda + k];
  }
  return PRIMC_OK;
}
