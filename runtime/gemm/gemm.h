/* runtime/gemm/gemm.h: what the GEMM family's files share: the row table, the micro-kernel call, B sources, packed-B headers, blocking. */
#ifndef PRIMC_GEMM_INTERNAL_H
#define PRIMC_GEMM_INTERNAL_H

#include "runtime/primc_rt.h"

#include <stdint.h>

#ifndef KC_MAX /* overridable for tuning runs: cc -DKC_MAX=384 */
#define KC_MAX 256
#endif
#ifndef NC_MAX
#define NC_MAX 512
#endif
#define MR_MAX 14 /* the tallest row's mr (rows.c checks) */
#define NR_MAX 32 /* the widest row's nr (rows.c checks) */

/* what one micro-kernel call computes: C[mr][nr] = alpha * sum_k a(r,k) b(k,j) + beta * C */
typedef struct kargs {
  int64_t kc;
  const float *a;
  int64_t ars, aks; /* a(r, k) = a[r * ars + k * aks] */
  const float *b;
  int64_t bks; /* b(k, j) = b[k * bks + j], j < nr; reading past nr is never done */
  const int64_t *koff; /* when set, b(k, j) = b[koff[k] + j] instead (a conv's taps read in place); A is UNIT */
  int b_full;          /* B's rows are packed panels, zero past nr: a tile of fewer columns may load them whole */
  float *c;
  int64_t ldc;
  float alpha, beta; /* beta == 0: C is not read */
  int nr;
  const primc_gemm_store *st; /* last K block only: applied at the store; bias and res already at row 0 */
  const float *st_bias, *st_res;
  float *st_y;     /* compacting store: y at this call's first row */
  int64_t st_n0;   /* compacting store: C column of this call's first lane */
  const char *pf; /* prefetch pf_n cache lines from pf into L2, one per k step (the next B block) */
  int64_t pf_n;
  int64_t pfd; /* B read in place (AVX-512): each k step prefetches its row's 2 lines pfd bytes on */
} kargs;

/* ---------------------------------------------------------------- the rows */

typedef void (*gm_kern)(const kargs *g, int mr);
/* kargs.st applied in plain C to a tile already stored in C (kernels without a fused store, or without its
 * compacting form) */
void primc_gm_store_tile(const kargs *h, int rows);
/* the compacting store's runs of outputs among C columns [n0, n0 + nr): (C column, y column, length) each */
#define GM_STORE_RUNS 64
int primc_gm_compact_runs(const primc_gemm_store *s, int64_t n0, int nr, int64_t run[GM_STORE_RUNS][3]);
typedef float (*gm_dot)(const float *x, const float *y, int64_t n);
/* 16 x 16 block of B^T rows (16 floats each, ld apart) into dst[k * ldd + j] */
typedef void (*gm_trans16)(const float *src, int64_t ld, float *dst, int64_t ldd);
/* mr rows of A (unit k stride, ars apart) into dst[k * mr + r]; it may write up to 8 floats past kc * mr (the
 * driver's buffer holds MR_MAX * KC_MAX) */
typedef void (*gm_pack_a)(const float *a, int64_t ars, int64_t mr, int64_t kc, float *dst);
/* 8 k of rows 0..7 (those from n on are zeros; n may be anything): row i's k-th at rows[i][off + k * st] (st 1
 * or 2) into dst[k * ldd + i] */
typedef void (*gm_gather8)(const float *const *rows, int n, int64_t off, int64_t st, float *dst, int64_t ldd);

typedef struct gm_row {
  const char *name;
  int isa;
  int mr, nr;     /* register tile */
  int kc, nc;     /* K block, n-block width (multiple of nr) */
  int direct_max; /* read B in place when M <= this (and B is not transposed) */
  int fused_store; /* the kernel applies kargs.st itself */
  gm_kern kern;
  gm_dot dot;
  gm_trans16 trans16; /* NULL: scalar transposition */
  gm_pack_a pack_a;   /* NULL: scalar copy */
  gm_gather8 gather8; /* NULL: a gathered B element by element */
} gm_row;

extern const gm_row primc_gm_rows[PRIMC_GEMM_ROW_COUNT];

/* each row's tile as constants, for the kernels' register arrays */
enum {
#define PRIMC_GEMM_ROW(id, name, isa, mr, nr, ...) GM_MR_##id = (mr), GM_NR_##id = (nr),
#include "runtime/gemm/gemm_rows.def"
#undef PRIMC_GEMM_ROW
};

void primc_gm_kern_scalar(const kargs *g, int mr);
float primc_gm_dot_scalar(const float *x, const float *y, int64_t n);
void primc_gm_kern_avx2(const kargs *g, int mr);
float primc_gm_dot_avx2(const float *x, const float *y, int64_t n);
void primc_gm_kern_avx512(const kargs *g, int mr);
float primc_gm_dot_avx512(const float *x, const float *y, int64_t n);
void primc_gm_trans16_avx512(const float *src, int64_t ld, float *dst, int64_t ldd);
void primc_gm_trans16_avx2(const float *src, int64_t ld, float *dst, int64_t ldd);
void primc_gm_pack_a_avx2(const float *a, int64_t ars, int64_t mr, int64_t kc, float *dst);
void primc_gm_pack_a_avx512(const float *a, int64_t ars, int64_t mr, int64_t kc, float *dst);
void primc_gm_gather8_avx2(const float *const *rows, int n, int64_t off, int64_t st, float *dst, int64_t ldd);
void primc_gm_kern_neon(const kargs *g, int mr);
float primc_gm_dot_neon(const float *x, const float *y, int64_t n);

/* the row primc_sgemm runs when primc_sgemm_isa() is isa (0 <= isa < PRIMC_ISA_COUNT), picked once */
const gm_row *primc_gm_row_for(int isa);
static inline const gm_row *primc_gm_row(void) { return primc_gm_row_for(primc_sgemm_isa()); }

/* the CPU family of an AMD CPU (Zen 4 is 19h, Zen 5 1Ah), 0 on any other vendor (cpu.c) */
int primc_gm_amd_family(void);
/* rows of A up to which the driver reads a plain B in place rather than packing it, on this CPU (driver.c) */
int64_t primc_gm_direct_rows(const gm_row *kr);

/* ---------------------------------------------------------------- blocking */

static inline int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
/* primc_sgemm_pack_a's strips: M rows split evenly into cdiv(M, mr) strips; strip s's first row, *h its height */
static inline int64_t gm_strip(int64_t M, int64_t strips, int64_t s, int64_t *h) {
  int64_t m0 = M * s / strips;
  *h = M * (s + 1) / strips - m0;
  return m0;
}

/* K blocks of even length (a multiple of 16 up to the row's kc): 320 as 160 + 160, not 256 + 64, whose
 * short block would spill and reload every C tile for a quarter of the work, and in whose few k steps
 * the strips cannot prefetch the next block (one line a k step). Packed B records the value. */
static inline int64_t k_block(const gm_row *row, int64_t K) {
  if (K <= row->kc) return row->kc;
  int64_t kc = (cdiv(K, cdiv(K, row->kc)) + 15) / 16 * 16;
  return kc < row->kc ? kc : row->kc;
}

/* ---------------------------------------------------------------- B sources, packing (pack.c) */

typedef struct bsrc {
  const float *b; /* plain: b(k, n) = trans ? b[n * ldb + k] : b[k * ldb + n] */
  int64_t ldb;
  int trans;
  primc_brow_fn row; /* generated: row(ctx, k, n0, nc, dst) writes b(k, n0 .. n0+nc) */
  void *row_ctx;
  const float *packed; /* prepacked panels, see primc_sgemm_pack_b */
  const float *gb;     /* gathered: b(k, n) = gb[gn[n] + gk[k]] (a conv's weight-gradient columns in place) */
  const int64_t *gn, *gk;
} bsrc;

/* columns [p0*NR, n1) of rows [k0, k0+kc) into panels dst[p - p0][k][NR], zero-padded to NR */
void primc_gm_pack_b(const bsrc *s, const gm_row *row, int64_t k0, int64_t kc, int64_t p0, int64_t n1, float *dst);

/* header in front of the panels; the panel layout depends on the ISA, so it is checked at use */
typedef struct packed_hdr {
  uint32_t magic;
  int32_t isa, nr, kc;
  int64_t n, k;
  char pad[64 - 32];
} packed_hdr;

/* whether h is a header primc_sgemm_pack_b writes for an N x K B on some ISA */
int primc_gm_hdr_valid(const packed_hdr *h, int64_t N, int64_t K);

#endif
