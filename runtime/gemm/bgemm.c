/* runtime/gemm/bgemm.c: the bf16 GEMM: B packed into bf16 pair panels, A rounded to bf16 per call, the row table and the pick, the blocked driver over the pool, the portable row. */
#include "runtime/gemm/bgemm.h"
#include "runtime/gemm/gemm.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/*
 * C[M][N] (f32) = A B with A and B rounded to bf16 and products summed in f32: torch's "medium" matmul
 * precision. split 3 is its "high": each operand x = hi + lo, two bf16s, and the sum runs over three
 * K segments, A [hi hi lo] against B [hi; lo; hi] (the lo * lo term, 2^-16 relative, is dropped).
 *
 * Layouts (every row reads the same ones):
 *   B  a 64-byte header, then pairs of 16-column panels (bgemm.h's bg_b_at): a k pair of one column adjacent,
 *      the AMX and vdpbf16ps operand, and per 32 k both panels' tiles side by side. Kt = split * Kp, Kp = K
 *      padded with zeros to a multiple of 32; N padded with zero columns to a multiple of 32.
 *   A  rounded once per call into tiles (bgemm.h: strips of 16 rows, [Kt / 32][16][32] each; M padded with
 *      zero rows to a multiple of 32), in a per-thread buffer of the calling thread that the pool threads read.
 * Driver: tasks of up to BG_MB rows by BG_PB panels go to the threads; within one, for each K block, each
 * pair of panels (BG_KC x 32 bf16) is read by every strip of the task's rows in turn while the next pair
 * is prefetched into L2 (weights larger than the caches stream from memory). Each C element is summed by one
 * thread in one order, so results do not depend on the thread count.
 */

#ifndef BG_KC /* overridable for tuning runs: cc -DBG_KC=256 */
#define BG_KC 1024 /* K block (bf16 elements) */
#endif
#ifndef BG_MB
#define BG_MB 128 /* rows of A in a task: 128 x BG_KC bf16 is 256 KiB, for L2 */
#endif
#ifndef BG_PB
#define BG_PB 8 /* panels (of 16 columns) in a task, even: pairs */
#endif
#define BG_SERIAL (1 << 20) /* below this many multiply-adds a GEMM runs on the calling thread */

_Static_assert(BG_PB % 2 == 0, "a task takes whole pairs of panels");

#define BG_MAGIC 0x36314642u   /* "BF16": a packed B */
#define BG_MAGIC_A 0x41314642u /* "BF1A": a packed (tiled) A */

typedef struct bg_hdr {
  uint32_t magic;
  int32_t split;
  int64_t n, k, kt;
  char pad[64 - 32];
} bg_hdr;
_Static_assert(sizeof(bg_hdr) == 64, "panels start 64-byte aligned");

/* ---------------------------------------------------------------- rows */

enum { NEED_ANY, NEED_AVX2, NEED_AVX512, NEED_AVX512BF16, NEED_AMX };

typedef struct bg_row {
  const char *name;
  int needs, mr;
  bg_kern kern;
  void (*setup)(int on);
} bg_row;

static const bg_row rows[PRIMC_BGEMM_ROW_COUNT] = {
#define PRIMC_BGEMM_ROW(id, nm, nd, m, kn, su) [PRIMC_BGEMM_ROW_##id] = {nm, NEED_##nd, m, kn, su},
#include "runtime/gemm/bgemm_rows.def"
#undef PRIMC_BGEMM_ROW
};
_Static_assert(PRIMC_BGEMM_ROW_COUNT == 5, "rows: AMX, AVX512BF16, AVX512, AVX2, GENERIC");
#define PRIMC_BGEMM_ROW(id, nm, nd, m, ...) _Static_assert((m) == 32 || 16 % (m) == 0, "row " nm ": 32 rows a call, or rows within a 16-row strip");
#include "runtime/gemm/bgemm_rows.def"
#undef PRIMC_BGEMM_ROW

static int row_runs(int r) {
  switch (rows[r].needs) {
  case NEED_AMX: return primc_bg_has_amx();
  case NEED_AVX512BF16: return primc_bg_has_avx512bf16();
  case NEED_AVX512: return primc_isa_covers(primc_sgemm_isa(), PRIMC_ISA_AVX512);
  case NEED_AVX2: return primc_isa_covers(primc_sgemm_isa(), PRIMC_ISA_AVX2);
  default: return 1;
  }
}

/* whether the pick takes a row the CPU runs: vdpbf16ps issues at half the f32 FMA rate on Intel cores
 * (the AVX512-BF16 row ran 0.54-0.58x the f32 GEMM on an Emerald Rapids Xeon, the converting AVX-512 row
 * 0.6-0.8x), so the AVX512-BF16 row is AMD's (Zen 4 and later) */
static int row_preferred(int r) {
  return r != PRIMC_BGEMM_ROW_AVX512BF16 || primc_gm_amd_family() >= 0x19;
}

static int auto_row = -1, forced_row = -1;
static pthread_once_t pick_once = PTHREAD_ONCE_INIT;

static void pick(void) {
  for (int r = PRIMC_BGEMM_ROW_COUNT - 1; r >= 0; r--)
    if (row_runs(r) && row_preferred(r)) auto_row = r;
}

int primc_bgemm_row_active(void) {
  pthread_once(&pick_once, pick);
  int f = __atomic_load_n(&forced_row, __ATOMIC_RELAXED);
  return f >= 0 ? f : auto_row;
}

int primc_bgemm_force_row(int row) {
  if (row < 0) {
    __atomic_store_n(&forced_row, -1, __ATOMIC_RELAXED);
    return 0;
  }
  if (row >= PRIMC_BGEMM_ROW_COUNT || !row_runs(row)) return -1;
  __atomic_store_n(&forced_row, row, __ATOMIC_RELAXED);
  return 0;
}

const char *primc_bgemm_row_name(int row) { return row >= 0 && row < PRIMC_BGEMM_ROW_COUNT ? rows[row].name : NULL; }

/* ---------------------------------------------------------------- the portable row (no x86 vectors) */

void primc_bg_kern_generic(const bkargs *g) {
  for (int r = 0; r < g->mr; r++) {
    float acc[2 * BG_PANEL] = {0};
    for (int64_t kp = 0; kp < g->kc / 2; kp++) {
      const uint16_t *a = g->a + bg_a_at(g->lda, r, 2 * kp);
      float x0 = primc_bf16_to_f32(a[0]), x1 = primc_bf16_to_f32(a[1]);
      for (int h = 0; h < 2 && h * BG_PANEL < g->nr; h++) {
        const uint16_t *b = g->b + bg_b_at(kp, h);
        for (int j = 0; j < BG_PANEL; j++)
          acc[h * BG_PANEL + j] += x0 * primc_bf16_to_f32(b[2 * j]) + x1 * primc_bf16_to_f32(b[2 * j + 1]);
      }
    }
    float *c = g->c + r * g->ldc;
    for (int j = 0; j < g->nr; j++) c[j] = g->accumulate ? c[j] + acc[j] : acc[j];
  }
}

/* ---------------------------------------------------------------- sizes, packing B */

static int64_t kpad(int64_t K) { return cdiv(K, BG_KSTEP) * BG_KSTEP; }

/* whether h is the header of an n x k operand packed here with that magic and split (0: 1 or 3) */
static int hdr_ok(const bg_hdr *h, uint32_t magic, int64_t n, int64_t k, int split) {
  return h && h->magic == magic && h->n == n && h->k == k && (split ? h->split == split : h->split == 1 || h->split == 3) &&
         h->kt == h->split * kpad(k);
}

size_t primc_bgemm_packed_b_size(int64_t N, int64_t K, int split) {
  if (N < 1 || K < 1 || (split != 1 && split != 3)) return 0;
  return sizeof(bg_hdr) + (size_t)cdiv(N, 2 * BG_PANEL) * (size_t)(split * kpad(K)) * 2 * BG_PANEL * 2;
}

/* v rounded into B's packed place for k (within segment s's copy) and columns n0 .. n0 + n of one pair */
static void put_b(uint16_t *pair, int64_t kk, int64_t j0, const uint16_t *v, int64_t n) {
  for (int64_t j = 0; j < n; j++) pair[bg_b_at(kk / 2, (int)((j0 + j) / BG_PANEL)) + (j0 + j) % BG_PANEL * 2 + kk % 2] = v[j];
}

/* one pair of panels (columns n0 .. n0 + nn, nn <= 32) of a split-1 B, every k pair of K, by primc_bg_pack_pair: from
 * B's rows, or from 16 x 16 transposes of B^T's (scalar at its edges) */
static void pack_b_pair(int trans_b, const float *B, int64_t ldb, int64_t n0, int64_t nn, int64_t K, uint16_t *pair) {
  float t[16][2 * BG_PANEL] __attribute__((aligned(64)));
  gm_trans16 tr = primc_gm_row()->trans16;
  for (int64_t k0 = 0; k0 < K; k0 += 16) {
    int64_t kn = K - k0 < 16 ? K - k0 : 16;
    const float *rows[16];
    for (int64_t k = 0; k < kn; k++) rows[k] = trans_b ? t[k] : B + (k0 + k) * ldb + n0;
    for (int64_t c0 = 0; trans_b && c0 < nn; c0 += 16) {
      int64_t cn = nn - c0 < 16 ? nn - c0 : 16;
      const float *src = B + (n0 + c0) * ldb + k0;
      if (tr && cn == 16 && kn == 16) tr(src, ldb, &t[0][c0], 2 * BG_PANEL);
      else
        for (int64_t k = 0; k < kn; k++)
          for (int64_t j = 0; j < cn; j++) t[k][c0 + j] = src[j * ldb + k];
    }
    for (int64_t k = 0; k < kn; k += 2)
      primc_bg_pack_pair(rows[k], k + 1 < kn ? rows[k + 1] : NULL, (int)nn, pair + bg_b_at((k0 + k) / 2, 0),
                         pair + bg_b_at((k0 + k) / 2, 1));
  }
}

typedef struct pack_b_job {
  int trans_b;
  const float *B;
  int64_t ldb, N, K, Kt;
  uint16_t *pan;
} pack_b_job;

/* pairs of panels [b, e) of a split-1 B, their K padding zeroed */
static void pack_b_pairs(void *ctx, int64_t b, int64_t e) {
  const pack_b_job *j = ctx;
  for (int64_t q = b; q < e; q++) {
    uint16_t *pair = j->pan + q * j->Kt * 2 * BG_PANEL;
    int64_t n0 = q * 2 * BG_PANEL, nn = j->N - n0 < 2 * BG_PANEL ? j->N - n0 : 2 * BG_PANEL;
    pack_b_pair(j->trans_b, j->B, j->ldb, n0, nn, j->K, pair);
    for (int64_t kp = (j->K + 1) / 2; kp < j->Kt / 2; kp++)
      for (int hf = 0; hf < 2; hf++) memset(pair + bg_b_at(kp, hf), 0, 2 * BG_PANEL * sizeof *pair);
  }
}

int primc_bgemm_pack_b(int trans_b, int64_t N, int64_t K, const float *B, int64_t ldb, int split, void *packed) {
  size_t size = primc_bgemm_packed_b_size(N, K, split);
  if (!size || !B || !packed) return PRIMC_ERR_ARG;
  int64_t Kp = kpad(K), Kt = split * Kp, len = trans_b ? K : 2 * BG_PANEL;
  bg_hdr *h = packed;
  memset(h, 0, sizeof *h);
  *h = (bg_hdr){.magic = BG_MAGIC, .split = split, .n = N, .k = K, .kt = Kt};
  uint16_t *pan = (uint16_t *)(h + 1);
  if (split == 1) { /* a k pair at a time, vectorized, the pairs over the pool (weights packed at every call) */
    pack_b_job j = {trans_b, B, ldb, N, K, Kt, pan};
    int64_t pairs = cdiv(N, 2 * BG_PANEL);
    if ((double)N * (double)K >= (1 << 16)) primc_parallel_for(pairs, pack_b_pairs, &j);
    else pack_b_pairs(&j, 0, pairs);
    return PRIMC_OK;
  }
  uint16_t *hi = malloc((size_t)len * 2 * sizeof *hi), *lo = hi + len;
  if (!hi) return PRIMC_ERR_RUNTIME;
  memset(pan, 0, size - sizeof *h);
  /* split 3 (hi, lo, hi): read B the way it is stored, a column at a time when transposed, else a row of 32 columns */
  for (int64_t n0 = 0; n0 < N; n0 += trans_b ? 1 : 2 * BG_PANEL) {
    uint16_t *pair = pan + n0 / (2 * BG_PANEL) * Kt * 2 * BG_PANEL;
    int64_t nn = N - n0 < 2 * BG_PANEL ? N - n0 : 2 * BG_PANEL;
    for (int64_t k = 0; k < (trans_b ? 1 : K); k++) {
      const float *src = trans_b ? B + n0 * ldb : B + k * ldb + n0;
      primc_bg_round(src, trans_b ? K : nn, hi, lo);
      for (int s = 0; s < split; s++) {
        const uint16_t *seg = s == 1 ? lo : hi;
        if (!trans_b) {
          put_b(pair, s * Kp + k, 0, seg, nn);
          continue;
        }
        for (int64_t kk = 0; kk < K; kk++) put_b(pair, s * Kp + kk, n0 % (2 * BG_PANEL), seg + kk, 1);
      }
    }
  }
  free(hi);
  return PRIMC_OK;
}

int primc_bgemm_packed_check(const void *packed, size_t avail, int64_t N, int64_t K, int split) {
  size_t size = primc_bgemm_packed_b_size(N, K, split);
  return packed && size && avail >= size && hdr_ok(packed, BG_MAGIC, N, K, split) ? PRIMC_OK : PRIMC_ERR_WEIGHTS;
}

/* ---------------------------------------------------------------- per-thread buffers */

typedef struct scratch {
  void *p;
  size_t size;
} scratch;

static pthread_key_t key;
static int key_ok;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

static void scratch_free(void *v) {
  scratch *s = v;
  if (s) free(s[0].p), free(s[1].p);
  free(s);
}
static void key_make(void) { key_ok = pthread_key_create(&key, scratch_free) == 0; }

/* the calling thread's buffer `which` (0: A, 1: B), at least size bytes, 64-byte aligned; kept, grown */
static void *thread_scratch(int which, size_t size) {
  pthread_once(&key_once, key_make);
  if (!key_ok) return NULL;
  scratch *s = pthread_getspecific(key);
  if (!s) {
    if (!(s = calloc(2, sizeof *s))) return NULL;
    if (pthread_setspecific(key, s) != 0) {
      free(s);
      return NULL;
    }
  }
  if (s[which].size < size) {
    size_t want = (size + 63) / 64 * 64;
    void *p = aligned_alloc(64, want);
    if (!p) return NULL;
    free(s[which].p);
    s[which] = (scratch){p, want};
  }
  return s[which].p;
}

/* ---------------------------------------------------------------- the driver */

typedef struct job {
  int trans_a, split, a_packed; /* a_packed: a points at tiles packed by primc_bgemm_pack_a, not rounded here */
  int64_t M, N, K, lda, Kp, Kt, Mp, P, nm, np;
  const float *A;
  const int32_t *A_i32; /* instead of A: small integers (primc_bgemm_prepacked_int), K <= PRIMC_BGEMM_INT_K */
  uint16_t *a; /* tiled, bgemm.h */
  const uint16_t *pan;
  float *C;
  int64_t ldc;
  const bg_row *row;
  primc_epilogue epi; /* on a task's block of C when its last K block is in (may be NULL) */
  void *epi_ctx;
} job;

/* strips [b, e) of 16 rows of A rounded into tiles: row by row, or, with A transposed (A^T's rows are the
 * strip's columns), by 16 x 16 blocks; int32 A (small integers) widened to floats first */
static void round_strips(void *ctx, int64_t b, int64_t e) {
  const job *j = ctx;
  int hi2 = j->split == 3 ? 1 : -1, lo = j->split == 3 ? 2 : -1;
  for (int64_t st = b; st < e; st++) {
    uint16_t *strip = j->a + st * 16 * j->Kt;
    int64_t m0 = st * 16, rows = j->M - m0 < 16 ? j->M - m0 : 16;
    if (rows < 16 || j->trans_a) memset(strip, 0, (size_t)(16 * j->Kt) * sizeof *strip);
    if (rows <= 0) continue;
    if (j->A_i32) { /* exact in f32, then in bf16 (|a| <= 256): widened here, then rounded as floats */
      float t[PRIMC_BGEMM_INT_K * 16];
      if (j->trans_a) {
        for (int64_t k = 0; k < j->K; k++) {
          const int32_t *src = j->A_i32 + k * j->lda + m0;
          for (int64_t r = 0; r < rows; r++) t[k * 16 + r] = (float)src[r];
        }
        primc_bg_round_strip_t(t, 16, (int)rows, j->K, j->Kp, strip, 0, hi2, lo);
        continue;
      }
      for (int64_t r = 0; r < rows; r++) {
        const int32_t *src = j->A_i32 + (m0 + r) * j->lda;
        for (int64_t k = 0; k < j->K; k++) t[k] = (float)src[k];
        primc_bg_round_row(t, j->K, j->Kp, strip, (int)r, 0, hi2, lo);
      }
      continue;
    }
    if (j->trans_a) {
      primc_bg_round_strip_t(j->A + m0, j->lda, (int)rows, j->K, j->Kp, strip, 0, hi2, lo);
      continue;
    }
    /* every tile row of a real row is written whole, its K padding included */
    for (int64_t r = 0; r < rows; r++) primc_bg_round_row(j->A + (m0 + r) * j->lda, j->K, j->Kp, strip, (int)r, 0, hi2, lo);
  }
}

/* a task's block of sums where an epilogue takes them over one K block: its rows BG_LD floats apart */
#define BG_LD (BG_PB * BG_PANEL)

static void run_task(const job *j, int64_t t, float *cbuf) {
  const bg_row *row = j->row;
  int64_t m0 = t / j->np * BG_MB, m1 = m0 + BG_MB < j->M ? m0 + BG_MB : j->M;
  int64_t p0 = t % j->np * BG_PB, p1 = p0 + BG_PB < j->P ? p0 + BG_PB : j->P;
  /* the epilogue's sums in the thread's buffer (L2), not in C: the tile stores are then no first touch of C's
   * lines, which a 64 -> 256 1x1 at 56x56 waited on */
  float *cb = j->epi && j->Kt <= BG_KC ? cbuf : NULL;
  for (int64_t kb = 0; kb < j->Kt; kb += BG_KC) {
    int64_t kc = j->Kt - kb < BG_KC ? j->Kt - kb : BG_KC;
    for (int64_t p = p0; p < p1; p += 2) {
      int64_t n0 = p * BG_PANEL, nr = j->N - n0 < 2 * BG_PANEL ? j->N - n0 : 2 * BG_PANEL;
      const uint16_t *b = j->pan + p / 2 * j->Kt * 2 * BG_PANEL + kb * 2 * BG_PANEL;
      /* the next pair's block (kc lines), pulled into L2 while this one runs, a share per call */
      int64_t calls = (m1 - m0 + row->mr - 1) / row->mr, share = (kc + calls - 1) / calls;
      const char *next = p + 2 < p1 ? (const char *)(b + j->Kt * 2 * BG_PANEL) : NULL;
      for (int64_t m = m0; m < m1; m += row->mr) {
        int64_t i = (m - m0) / row->mr, lines = kc - i * share < share ? kc - i * share : share;
        bkargs g = {.a = j->a + m / 16 * 16 * j->Kt + bg_a_at(0, m % 16, kb),
                    .lda = 16 * j->Kt,
                    .b = b,
                    .pf = next && lines > 0 ? next + 64 * i * share : NULL,
                    .pf_lines = lines > 0 ? lines : 0,
                    .kc = kc,
                    .mr = (int)(m1 - m < row->mr ? m1 - m : row->mr),
                    .nr = (int)nr,
                    .c = cb ? cb + (m - m0) * BG_LD + (n0 - p0 * BG_PANEL) : j->C + m * j->ldc + n0,
                    .ldc = cb ? BG_LD : j->ldc,
                    .accumulate = kb > 0};
        row->kern(&g);
      }
    }
  }
  if (j->epi) {
    int64_t n0 = p0 * BG_PANEL, n1 = p1 * BG_PANEL < j->N ? p1 * BG_PANEL : j->N;
    if (cb) j->epi(j->epi_ctx, cb, BG_LD, m0, n0, m1 - m0, n1 - n0);
    else j->epi(j->epi_ctx, j->C + m0 * j->ldc + n0, j->ldc, m0, n0, m1 - m0, n1 - n0);
  }
}

static void run_tasks(void *ctx, int64_t b, int64_t e) {
  const job *j = ctx;
  float cbuf[BG_MB * BG_LD] __attribute__((aligned(64)));
  if (j->row->setup) j->row->setup(1);
  for (int64_t t = b; t < e; t++) run_task(j, t, cbuf);
  if (j->row->setup) j->row->setup(0);
}

static int run(job *j) {
  j->row = &rows[primc_bgemm_row_active()];
  j->Kp = kpad(j->K);
  j->Kt = j->split * j->Kp;
  j->Mp = cdiv(j->M, 32) * 32;
  j->P = cdiv(j->N, BG_PANEL);
  j->nm = cdiv(j->M, BG_MB);
  j->np = cdiv(j->P, BG_PB);
  if (!j->a_packed && !(j->a = thread_scratch(0, (size_t)(j->Mp * j->Kt) * sizeof *j->a))) return PRIMC_ERR_RUNTIME;
  int serial = (double)j->M * (double)j->N * (double)j->Kt < BG_SERIAL;
  if (serial) {
    if (!j->a_packed) round_strips(j, 0, j->Mp / 16);
    run_tasks(j, 0, j->nm * j->np);
  } else {
    if (!j->a_packed) primc_parallel_for(j->Mp / 16, round_strips, j);
    primc_parallel_for(j->nm * j->np, run_tasks, j);
  }
  return PRIMC_OK;
}

int primc_bgemm_prepacked(int trans_a, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                          const void *packed_b, float *C, int64_t ldc) {
  if (M < 0 || N < 0 || K < 0 || !C || ldc < N) return PRIMC_ERR_ARG;
  if (M == 0 || N == 0) return PRIMC_OK;
  if (K == 0) {
    for (int64_t m = 0; m < M; m++) memset(C + m * ldc, 0, (size_t)N * sizeof *C);
    return PRIMC_OK;
  }
  const bg_hdr *h = packed_b;
  if (!A || !hdr_ok(h, BG_MAGIC, N, K, 0) || lda < (trans_a ? M : K)) return PRIMC_ERR_ARG;
  job j = {.trans_a = trans_a, .split = h->split, .M = M, .N = N, .K = K, .lda = lda, .A = A,
           .pan = (const uint16_t *)(h + 1), .C = C, .ldc = ldc};
  return run(&j);
}

int primc_bgemm_prepacked_int(int trans_a, int64_t M, int64_t N, int64_t K, const int32_t *A, int64_t lda,
                              const void *packed_b, float *C, int64_t ldc) {
  if (M < 0 || N < 0 || K < 1 || K > PRIMC_BGEMM_INT_K || !A || !C || ldc < N || lda < (trans_a ? M : K))
    return PRIMC_ERR_ARG;
  if (M == 0 || N == 0) return PRIMC_OK;
  const bg_hdr *h = packed_b;
  if (!hdr_ok(h, BG_MAGIC, N, K, 1)) return PRIMC_ERR_ARG;
  job j = {.trans_a = trans_a, .split = 1, .M = M, .N = N, .K = K, .lda = lda, .A_i32 = A,
           .pan = (const uint16_t *)(h + 1), .C = C, .ldc = ldc};
  return run(&j);
}

int primc_bgemm(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                const float *B, int64_t ldb, int split, float *C, int64_t ldc) {
  if (M < 0 || N < 0 || K < 0 || (split != 1 && split != 3) || !C || ldc < N) return PRIMC_ERR_ARG;
  if (M == 0 || N == 0 || K == 0) return primc_bgemm_prepacked(trans_a, M, N, K, A, lda, NULL, C, ldc);
  if (!B || ldb < (trans_b ? K : N)) return PRIMC_ERR_ARG;
  void *packed = thread_scratch(1, primc_bgemm_packed_b_size(N, K, split));
  if (!packed) return PRIMC_ERR_RUNTIME;
  int st = primc_bgemm_pack_b(trans_b, N, K, B, ldb, split, packed);
  return st != PRIMC_OK ? st : primc_bgemm_prepacked(trans_a, M, N, K, A, lda, packed, C, ldc);
}

/* ---------------------------------------------------------------- A packed once, B by rows */

size_t primc_bgemm_packed_a_size(int64_t M, int64_t K) {
  if (M < 1 || K < 1) return 0;
  return sizeof(bg_hdr) + (size_t)(cdiv(M, 32) * 32) * (size_t)kpad(K) * 2;
}

int primc_bgemm_pack_a(int64_t M, int64_t K, const float *A, int64_t lda, void *packed) {
  size_t size = primc_bgemm_packed_a_size(M, K);
  if (!size || !A || !packed || lda < K) return PRIMC_ERR_ARG;
  bg_hdr *h = packed;
  memset(h, 0, sizeof *h);
  *h = (bg_hdr){.magic = BG_MAGIC_A, .split = 1, .n = M, .k = K, .kt = kpad(K)};
  job j = {.split = 1, .M = M, .K = K, .lda = lda, .A = A, .Kp = kpad(K), .Kt = kpad(K), .a = (uint16_t *)(h + 1)};
  round_strips(&j, 0, cdiv(M, 32) * 2);
  return PRIMC_OK;
}

int primc_bgemm_packed_a_check(const void *packed, size_t avail, int64_t M, int64_t K) {
  size_t size = primc_bgemm_packed_a_size(M, K);
  return packed && size && avail >= size && hdr_ok(packed, BG_MAGIC_A, M, K, 1) ? PRIMC_OK : PRIMC_ERR_WEIGHTS;
}

typedef struct rows_job {
  int64_t N, K, Kt, ldb;
  int64_t kparts, kstep; /* each column item's K rows in kparts parts of kstep (even) rows */
  const float *B;
  primc_brow_fn row;
  void *ctx;
  uint16_t *pan;
} rows_job;

#define ROWS_PAIRS 4 /* pairs of panels an item packs: rows are made 128 columns at a time */

/* items [b, e) of ROWS_PAIRS pairs of panels of B by a part of K, from its rows (plain, or made by row) */
static void pack_rows(void *ctx, int64_t b, int64_t e) {
  const rows_job *j = ctx;
  enum { W = ROWS_PAIRS * 2 * BG_PANEL };
  float r0[W], r1[W];
  for (int64_t it = b; it < e; it++) {
    int64_t n0 = it / j->kparts * W, nn = j->N - n0 < W ? j->N - n0 : W;
    int64_t k0 = it % j->kparts * j->kstep, k1 = k0 + j->kstep < j->Kt ? k0 + j->kstep : j->Kt;
    for (int64_t k = k0; k < k1; k += 2) {
      const float *a0 = NULL, *a1 = NULL;
      if (k < j->K) {
        if (j->row) j->row(j->ctx, k, n0, nn, r0), a0 = r0;
        else a0 = j->B + k * j->ldb + n0;
      }
      if (k + 1 < j->K) {
        if (j->row) j->row(j->ctx, k + 1, n0, nn, r1), a1 = r1;
        else a1 = j->B + (k + 1) * j->ldb + n0;
      }
      for (int64_t q = 0; q * 2 * BG_PANEL < nn; q++) {
        uint16_t *pair = j->pan + (n0 / (2 * BG_PANEL) + q) * j->Kt * 2 * BG_PANEL;
        uint16_t *d0 = pair + bg_b_at(k / 2, 0), *d1 = pair + bg_b_at(k / 2, 1);
        int64_t c = q * 2 * BG_PANEL, n = nn - c < 2 * BG_PANEL ? nn - c : 2 * BG_PANEL;
        if (a0) primc_bg_pack_pair(a0 + c, a1 ? a1 + c : NULL, (int)n, d0, d1);
        else memset(d0, 0, 2 * BG_PANEL * sizeof *d0), memset(d1, 0, 2 * BG_PANEL * sizeof *d1);
      }
    }
  }
}

const uint16_t *primc_bg_packed_a_tiles(const void *packed, int64_t M, int64_t K) {
  const bg_hdr *h = packed;
  return hdr_ok(h, BG_MAGIC_A, M, K, 1) ? (const uint16_t *)(h + 1) : NULL;
}

void *primc_bg_thread_scratch(int which, size_t size) { return thread_scratch(which, size); }

int primc_bgemm_packed_a_run(const void *packed_a, int64_t M, int64_t N, int64_t K, const float *B, int64_t ldb,
                             primc_brow_fn row, void *row_ctx, float *C, int64_t ldc) {
  return primc_bg_packed_a_run_epi(packed_a, M, N, K, B, ldb, row, row_ctx, C, ldc, NULL, NULL);
}

int primc_bg_packed_a_run_epi(const void *packed_a, int64_t M, int64_t N, int64_t K, const float *B, int64_t ldb,
                              primc_brow_fn row, void *row_ctx, float *C, int64_t ldc, primc_epilogue epi,
                              void *epi_ctx) {
  if (M < 1 || N < 0 || K < 1 || !C || ldc < N || (!row && (!B || ldb < N))) return PRIMC_ERR_ARG;
  if (N == 0) return PRIMC_OK;
  const bg_hdr *h = packed_a;
  if (!hdr_ok(h, BG_MAGIC_A, M, K, 1)) return PRIMC_ERR_ARG;
  int64_t Kt = kpad(K), pairs = cdiv(N, 2 * BG_PANEL);
  uint16_t *pan = thread_scratch(1, (size_t)(pairs * Kt * 2 * BG_PANEL) * sizeof *pan); /* panels only: no header */
  if (!pan) return PRIMC_ERR_RUNTIME;
  /* a narrow B (a 7x7 map's 49 columns, K in the thousands) is one column item: its K then splits too, so that
   * the threads share making and rounding the rows */
  int64_t citems = cdiv(N, ROWS_PAIRS * 2 * BG_PANEL), kparts = citems >= 4 || Kt < 1024 ? 1 : Kt / 512 > 4 ? 4 : Kt / 512;
  int64_t kstep = (cdiv(Kt, kparts) + 1) / 2 * 2, items = citems * kparts;
  rows_job rj = {N, K, Kt, ldb, kparts, kstep, B, row, row_ctx, pan};
  if ((double)N * (double)Kt >= (1 << 16)) primc_parallel_for(items, pack_rows, &rj);
  else pack_rows(&rj, 0, items);
  job j = {.split = 1, .a_packed = 1, .M = M, .N = N, .K = K, .a = (uint16_t *)(h + 1), .pan = pan, .C = C, .ldc = ldc,
           .epi = epi, .epi_ctx = epi_ctx};
  return run(&j);
}

int64_t primc_bg_epi_k(void) { return BG_KC; }

int primc_bg_packed_a_run_panels(const void *packed_a, int64_t M, int64_t N, int64_t K, const uint16_t *pan, float *C,
                                 int64_t ldc, primc_epilogue epi, void *epi_ctx) {
  const bg_hdr *h = packed_a;
  if (M < 1 || N < 1 || K < 1 || !pan || !C || ldc < N || !hdr_ok(h, BG_MAGIC_A, M, K, 1)) return PRIMC_ERR_ARG;
  job j = {.split = 1, .a_packed = 1, .M = M, .N = N, .K = K, .a = (uint16_t *)(h + 1), .pan = pan, .C = C, .ldc = ldc,
           .epi = epi, .epi_ctx = epi_ctx};
  return run(&j);
}

/* ---------------------------------------------------------------- small-integer B in K chunks */

/* one chunk of kc rows is primc_bgemm_packed_b_size(N, kc, 1) bytes, a multiple of 64: the next one stays aligned */
static size_t int_chunk_bytes(int64_t N, int64_t kc) { return primc_bgemm_packed_b_size(N, kc, 1); }
_Static_assert(sizeof(bg_hdr) % 64 == 0 && 2 * BG_PANEL * BG_KSTEP * 2 % 64 == 0, "packed B sizes are multiples of 64");

size_t primc_bgemm_int_b_size(int64_t N, int64_t K, int64_t chunk) {
  if (N < 1 || K < 1 || chunk < 1 || chunk > PRIMC_BGEMM_INT_K) return 0;
  size_t total = 0;
  for (int64_t k0 = 0; k0 < K; k0 += chunk) total += int_chunk_bytes(N, K - k0 < chunk ? K - k0 : chunk);
  return total;
}

int primc_bgemm_pack_b_int(int trans_b, int64_t N, int64_t K, const int32_t *B, int64_t chunk, void *packed) {
  if (!primc_bgemm_int_b_size(N, K, chunk) || !B || !packed) return PRIMC_ERR_ARG;
  int64_t ld = trans_b ? K : N;
  float *f = malloc(sizeof(float) * (size_t)(N * K));
  if (!f) return PRIMC_ERR_RUNTIME;
  for (int64_t i = 0; i < N * K; i++) f[i] = (float)B[i]; /* exact: the caller's values are small */
  int st = PRIMC_OK;
  char *dst = packed;
  for (int64_t k0 = 0; k0 < K && st == PRIMC_OK; k0 += chunk) {
    int64_t kc = K - k0 < chunk ? K - k0 : chunk;
    st = primc_bgemm_pack_b(trans_b, N, kc, trans_b ? f + k0 : f + k0 * ld, ld, 1, dst);
    dst += int_chunk_bytes(N, kc);
  }
  free(f);
  return st;
}
