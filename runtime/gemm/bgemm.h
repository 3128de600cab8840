/* runtime/gemm/bgemm.h: what the bf16 GEMM's files share: the micro-kernel call, the row table, the packed layout. */
#ifndef PRIMC_BGEMM_INTERNAL_H
#define PRIMC_BGEMM_INTERNAL_H

#include "runtime/kernels.h"
#include "runtime/primc_rt.h"

#include <stdint.h>

/* K is padded to a multiple of BG_KSTEP (an AMX tile's 32 bf16 of k); a panel is BG_PANEL columns */
#define BG_KSTEP 32
#define BG_PANEL 16

/* A is rounded into tiles: 16-row strips, each a run of [16 rows][32 k] blocks (an AMX A tile, 1 KiB,
 * contiguous: rows 64 bytes apart, so a tile load touches 16 consecutive lines rather than 16 lines one
 * row stride apart in the same cache set). a(r, k) below, for r and k from the call's first row and k. */
static inline int64_t bg_a_at(int64_t lda, int64_t r, int64_t k) {
  return r / 16 * lda + (k / BG_KSTEP) * 16 * BG_KSTEP + r % 16 * BG_KSTEP + k % BG_KSTEP;
}

/* B is packed in pairs of 16-column panels, each pair a run of [2 halves][16 k pairs][16 columns][2] blocks
 * per 32 k (two AMX B tiles side by side, so a pair's K block is one contiguous stream); the row of k pair
 * kp (16 columns x 2 k) of half h, from the pair's (or K block's) start: */
static inline int64_t bg_b_at(int64_t kp, int h) {
  return ((kp / 16) * 2 + h) * 16 * BG_KSTEP + kp % 16 * 2 * BG_PANEL;
}

/* one micro-kernel call: C[mr][nr] (+)= A[mr][kc] B[kc][nr] over bf16 operands, f32 sums.
 * a: the first row's first k in the tiled A (a row within a strip, its k a multiple of 32); lda: elements
 * from one strip to the next; rows past mr up to the row's own mr are readable (zero padding).
 * b: a pair of panels (32 columns) at this K block, bg_b_at's layout; the second panel is read only when
 * nr > 16; kc a multiple of 32. A call's rows lie in one strip, or start one (AMX's 32).
 * pf: pf_lines cache lines from here on to pull into L2 over the call's k steps (the next pair), or NULL. */
typedef struct bkargs {
  const uint16_t *a;
  int64_t lda;
  const uint16_t *b;
  const char *pf;
  int64_t pf_lines;
  int64_t kc;
  int mr, nr;
  float *c;
  int64_t ldc;
  int accumulate; /* 0: C = A B; 1: C += A B */
} bkargs;

typedef void (*bg_kern)(const bkargs *g);

/* each row's rows per call, for the kernels' register arrays */
enum {
#define PRIMC_BGEMM_ROW(id, name, needs, mr, ...) BG_MR_##id = (mr),
#include "runtime/gemm/bgemm_rows.def"
#undef PRIMC_BGEMM_ROW
};

void primc_bg_kern_amx(const bkargs *g);
void primc_bg_kern_avx512bf16(const bkargs *g);
void primc_bg_kern_avx512(const bkargs *g);
void primc_bg_kern_avx2(const bkargs *g);
void primc_bg_kern_generic(const bkargs *g);
void primc_bg_setup_amx(int on);

/* primc_bgemm_pack_a's tiles (bg_a_at's layout, 16 * kpad(K) elements a strip of 16 rows), NULL when packed is
 * not an A of M x K */
const uint16_t *primc_bg_packed_a_tiles(const void *packed, int64_t M, int64_t K);
/* primc_bgemm_packed_a_run with epi (primc_epilogue's contract) on each task's block of C, up to 128 x 128, once
 * its sums are whole: a conv's epilogue while the block is in cache. Where K is one block (1,024) the sums go to a
 * buffer of the thread's instead, handed to epi with its own ldc, and C is not written: epi places its results by
 * m0, n0 and a stride of its own (conv.h's epi_ctx.ldy) */
int primc_bg_packed_a_run_epi(const void *packed_a, int64_t M, int64_t N, int64_t K, const float *B, int64_t ldb,
                              primc_brow_fn row, void *row_ctx, float *C, int64_t ldc, primc_epilogue epi,
                              void *epi_ctx);
/* the largest K whose sums primc_bg_packed_a_run_epi keeps in its thread buffers (C then unwritten) */
int64_t primc_bg_epi_k(void);
/* the same with B's panels made already (a map held as bf16 channel pairs: primc_rt.h's layout is theirs, K a
 * multiple of 32) */
int primc_bg_packed_a_run_panels(const void *packed_a, int64_t M, int64_t N, int64_t K, const uint16_t *pan, float *C,
                                 int64_t ldc, primc_epilogue epi, void *epi_ctx);
/* the calling thread's buffer which (0 or 1: what primc_bgemm_packed_a_run uses too), at least size bytes,
 * 64-byte aligned, kept for the thread's next call; NULL when out of memory */
void *primc_bg_thread_scratch(int which, size_t size);

/* x86 feature checks and the AMX permission (bgemm_x86.c), each read once */
int primc_bg_has_amx(void);
int primc_bg_has_avx512bf16(void);
/* n floats to bf16, round to nearest even (NaN stays NaN): hi; and lo = bf16(x - hi) when lo is set */
void primc_bg_round(const float *x, int64_t n, uint16_t *hi, uint16_t *lo);
/* the strip of rows [0, rows) (rows <= 16) of A^T, a(r, k) = a[k * lda + r] for k < K, rounded into a tiled
 * strip (bgemm.h's bg_a_at with lda 0) of Kp columns: hi at segment hi_seg (and hi_seg2 when >= 0), lo at lo_seg
 * when >= 0; segment s starts at k = s * Kp. The strip's other entries are left as they are (zero). */
/* row x (K floats) rounded into row r (< 16) of a tiled strip (bg_a_at with lda 0) of Kp columns, zero past K:
 * hi at segment hi_seg (and hi_seg2 when >= 0), lo = bf16(x - hi) at lo_seg when >= 0 (segment s at k = s Kp) */
void primc_bg_round_row(const float *x, int64_t K, int64_t Kp, uint16_t *strip, int r, int hi_seg, int hi_seg2,
                        int lo_seg);
/* one k pair of B (rows r0 and r1, r1 NULL past K) over n <= 32 columns rounded into the pair of panels' rows:
 * columns 0..15 to dst0, 16..31 to dst1 (bg_b_at's rows, 16 x 2 each); columns past n are zero */
void primc_bg_pack_pair(const float *r0, const float *r1, int n, uint16_t *dst0, uint16_t *dst1);
void primc_bg_round_strip_t(const float *a, int64_t lda, int rows, int64_t K, int64_t Kp, uint16_t *strip, int hi_seg,
                            int hi_seg2, int lo_seg);

#endif
