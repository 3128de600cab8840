/* runtime/gemm/igemm.h: what the int8 GEMM's files share: the packed layouts, the micro-kernel call, the row table's kernels. */
#ifndef PRIMC_IGEMM_INTERNAL_H
#define PRIMC_IGEMM_INTERNAL_H

#include "runtime/primc_rt.h"

#include <stdint.h>

/* K is padded to a multiple of IG_KSTEP (an AMX tile row: 64 bytes of k); a panel is IG_PANEL columns */
#define IG_KSTEP 64
#define IG_PANEL 16
#ifndef IG_KC
#define IG_KC 1024 /* the driver's K block (bytes of k), a multiple of 64: a pair's block is 32 KiB; a call's kc <= IG_KC */
#endif

/* A (u8) in strips of 16 rows, each a run of [16 rows][64 k] blocks of 1 KiB (an AMX A tile, contiguous);
 * a(r, k) from a call's first row and k 0, lda bytes from one strip to the next */
static inline int64_t ig_a_at(int64_t lda, int64_t r, int64_t k) {
  return r / 16 * lda + (k / IG_KSTEP) * 16 * IG_KSTEP + r % 16 * IG_KSTEP + k % IG_KSTEP;
}

/* B (s8) in pairs of 16-column panels, each a run of [2 halves][16 k quads][16 columns][4 k] blocks per 64 k
 * (two AMX B tiles side by side; one zmm of vpdpbusd operand per k quad and half): the 64 bytes of k quad kq
 * of half h, from the pair's start */
static inline int64_t ig_b_at(int64_t kq, int h) {
  return ((kq / 16) * 2 + h) * 16 * IG_KSTEP + kq % 16 * 4 * IG_PANEL;
}

/* one micro-kernel call over one K block: S = A'[mr][kc] B'[kc][nr] (A' u8, B' s8: the operands less their offsets,
 * igemm.c's fold), added to the raw sums C holds unless first; C = S when not last, else
 * C = S + rsum[r] * cob[j] + roff[r] * csum[j], all in int32 arithmetic that wraps.
 * a: the first row at the block's first k in the tiled A (a row within a strip, or a strip's first for AMX's
 * 32); lda: bytes from one strip to the next; rows past mr up to the row's own mr are readable (zero). b: the
 * pair of panels at the block's first k; its second panel is read only when nr > 16. kc: a multiple of 64.
 * pf: pf_lines cache lines from here on to pull into L2 over the call's k steps (B's next block), or NULL. */
typedef struct ikargs {
  const uint8_t *a;
  int64_t lda;
  const int8_t *b;
  const char *pf;
  int64_t pf_lines;
  int64_t kc;
  int mr, nr, first, last;
  int32_t *c;
  int64_t ldc;
  const int32_t *roff, *rsum; /* the call's rows */
  const int32_t *cob, *csum;  /* the call's 32 columns (zero past N) */
  int16_t *wb; /* the thread's room for this block of B in another form (IG_KC * 32 int16, then IG_WB_NOTES bytes
               * of the row's notes on it), kept between its calls */
  int fresh;   /* the first call on this block of B on this thread: wb holds another block */
  const char *pre; /* the row's prep record of this block of B (igemm_rows.def), NULL when B was packed without */
  /* A read in place (a row's kern_ip): row r's byte k (from the call's first k) at arow[r] + boff[k / 64] + k % 64 */
  const uint8_t *const *arow;
  const int64_t *boff;
} ikargs;

#define IG_WB_NOTES 128

typedef void (*ig_kern)(const ikargs *g);

/* each row's rows per call, for the kernels' register arrays */
enum {
#define PRIMC_IGEMM_ROW(id, name, needs, mr, ...) IG_MR_##id = (mr),
#include "runtime/gemm/igemm_rows.def"
#undef PRIMC_IGEMM_ROW
};

void primc_ig_kern_generic(const ikargs *g);
#if PRIMC_X86
void primc_ig_kern_amx(const ikargs *g);
void primc_ig_kern_amx_ip(const ikargs *g);
void primc_ig_kern_avx512vnni(const ikargs *g);
void primc_ig_kern_avx512vnni_ip(const ikargs *g);
void primc_ig_kern_avxvnni(const ikargs *g);
void primc_ig_kern_avx2(const ikargs *g);
/* the AVX2 row's record of a block of B (kc bytes of k of a pair of panels): its split copy and excesses */
void primc_ig_prep_avx2(const int8_t *b, int64_t kc, char *rec);
size_t primc_ig_prep_bytes_avx2(int64_t kc);
/* bgemm_x86.c's: the tile configuration (the same eight 16 x 64-byte tiles serve both families), and the check for
 * AMX tiles with Linux's permission for tile data */
void primc_bg_setup_amx(int on);
int primc_bg_has_amx(void);
/* what the CPU (and Linux, for AMX tile data) allows, each read once (igemm_x86.c) */
int primc_ig_has_amx_int8(void);
int primc_ig_has_avx512vnni(void);
int primc_ig_has_avxvnni(void);
/* row r (< 16) of a tiled strip from x[0 .. K) less its minimum (*lo), zero past K up to Kp; the sum of what it
 * stored in *ra; 1 when x spans more than 256 values (the stored bytes then mean nothing) */
int primc_ig_pack_row_avx512(const int32_t *x, int64_t K, int64_t Kp, uint8_t *strip, int r, int32_t *lo, uint32_t *ra);
int primc_ig_pack_row_avx2(const int32_t *x, int64_t K, int64_t Kp, uint8_t *strip, int r, int32_t *lo, uint32_t *ra);
#endif

/* the fold's store: v + rsum cob + roff csum, wrapping */
static inline int32_t ig_fix(int32_t v, int32_t rsum, int32_t roff, int32_t cob, int32_t csum) {
  return (int32_t)((uint32_t)v + (uint32_t)rsum * (uint32_t)cob + (uint32_t)roff * (uint32_t)csum);
}

/* the call's C element (r, j): raw sums between K blocks, the fold at the last */
static inline void ig_store(const ikargs *g, int r, int j, int32_t v) {
  int32_t *c = g->c + r * g->ldc + j;
  if (!g->first) v = (int32_t)((uint32_t)v + (uint32_t)*c);
  *c = g->last ? ig_fix(v, g->rsum[r], g->roff[r], g->cob[j], g->csum[j]) : v;
}

#endif
