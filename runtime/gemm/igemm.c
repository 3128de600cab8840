/* runtime/gemm/igemm.c: the int8 GEMM: B packed as s8 panels with its offset and column sums, A cut into u8 tiles per call, the row table and the pick, the driver over the pool, the exact fallback, the portable row, the dot_i8 call. */
#include "runtime/gemm/igemm.h"
#include "runtime/gemm/gemm.h"

#include <pthread.h>
#include <string.h>

/*
 * C = A B exactly, in int32 that wraps. Column n of B spans at most 256 values: b = b' + ob[n] with b' in
 * [-128, 127] (ob[n] 0 when b already is; a per-column offset takes per-column zero points). Row m of A:
 * a = a' + oa[m], oa[m] its minimum, a' in [0, 255] when the row spans at most 256 values. Then
 *   sum_k a b = sum_k a' b' + ra[m] ob[n] + oa[m] (cb[n] + K ob[n]),   ra = sum_k a', cb = sum_k b'
 * and the first sum is what tdpbusd / vpdpbusd compute (u8 x s8, int32 sums); the others are the store's
 * rsum[m] cob[n] + roff[m] csum[n]. All of it mod 2^32, as the reference's int32 sums wrap.
 *
 * Layouts (every row reads the same ones):
 *   B  a 64-byte header, ob and cb + K ob as int32 [Np] each (N padded to 32), then pairs of 16-column panels
 *      (igemm.h's ig_b_at), Kp = K padded with zeros to a multiple of 64.
 *   A  in the caller's scratch: tiles (igemm.h's ig_a_at; M padded with zero rows to a multiple of 32), then
 *      oa and ra as int32 [Mp] each.
 * Driver: tasks of up to IG_MB rows by IG_PP pairs of panels go to the threads; within one, for each K block,
 * each pair's block (IG_KC x 32 bytes, for L1) is read by every call of the task's rows in turn. C holds raw sums
 * between K blocks and the folded result after the last.
 */

#ifndef IG_MB
#define IG_MB 128 /* rows of A in a task, a multiple of 32 */
#endif
#ifndef IG_PP
#define IG_PP 4 /* pairs of panels (32 columns each) in a task */
#endif
#define IG_SERIAL (1 << 20) /* below this many multiply-adds a GEMM runs on the calling thread */

_Static_assert(IG_MB % 32 == 0 && IG_KC % IG_KSTEP == 0, "a task's rows are whole AMX calls, K blocks whole k steps");

#define IG_MAGIC 0x42384749u /* "IG8B": a packed B */

typedef struct ig_hdr {
  uint32_t magic;
  int32_t prep_row; /* the row whose prep records follow the panels (primc_igemm_pack_b_row) + 1; 0: none */
  int64_t n, k, kp;
  int64_t prep_at; /* their offset from the header */
  char pad[64 - 40];
} ig_hdr;
_Static_assert(sizeof(ig_hdr) == 64, "column terms and panels start 64-byte aligned");

/* ---------------------------------------------------------------- rows */

enum { NEED_ANY, NEED_AVX2, NEED_AVXVNNI, NEED_AVX512VNNI, NEED_AMX_INT8 };

typedef struct ig_row {
  const char *name;
  int needs, mr, conv_k;
  ig_kern kern;
  void (*setup)(int on);
  void (*prep)(const int8_t *b, int64_t kc, char *rec);
  size_t (*prep_bytes)(int64_t kc);
  ig_kern kern_ip;
} ig_row;

static const ig_row rows[PRIMC_IGEMM_ROW_COUNT] = {
#define PRIMC_IGEMM_ROW(id, nm, nd, m, ck, kn, su, pr, pb, ip) \
  [PRIMC_IGEMM_ROW_##id] = {nm, NEED_##nd, m, ck, kn, su, pr, pb, ip},
#include "runtime/gemm/igemm_rows.def"
#undef PRIMC_IGEMM_ROW
};
_Static_assert(PRIMC_IGEMM_ROW_COUNT == (PRIMC_X86 ? 5 : 1), "rows: AMX, AVX512VNNI, AVXVNNI, AVX2 (x86), GENERIC");
#define PRIMC_IGEMM_ROW(id, nm, nd, m, ...) _Static_assert((m) == 32 || 16 % (m) == 0, "row " nm ": 32 rows a call, or rows within a 16-row strip");
#include "runtime/gemm/igemm_rows.def"
#undef PRIMC_IGEMM_ROW

static int row_runs(int r) {
  switch (rows[r].needs) {
#if PRIMC_X86
  case NEED_AMX_INT8: return primc_ig_has_amx_int8();
  case NEED_AVX512VNNI: return primc_ig_has_avx512vnni();
  case NEED_AVXVNNI: return primc_ig_has_avxvnni();
  case NEED_AVX2: return primc_isa_covers(primc_sgemm_isa(), PRIMC_ISA_AVX2);
#endif
  case NEED_ANY: return 1;
  default: return 0;
  }
}

/* whether this CPU runs row r's prep: what the row needs, whatever ISA the GEMMs are held to (tests force one) */
static int prep_runs(int r) {
#if PRIMC_X86
  if (rows[r].needs == NEED_AVX2) return __builtin_cpu_supports("avx2");
#endif
  return row_runs(r);
}

static int auto_row = -1, forced_row = -1;
static pthread_once_t pick_once = PTHREAD_ONCE_INIT;

static void pick(void) {
  for (int r = PRIMC_IGEMM_ROW_COUNT - 1; r >= 0; r--)
    if (row_runs(r)) auto_row = r;
}

int primc_igemm_row_active(void) {
  pthread_once(&pick_once, pick);
  int f = __atomic_load_n(&forced_row, __ATOMIC_RELAXED);
  return f >= 0 ? f : auto_row;
}

int primc_igemm_force_row(int row) {
  if (row < 0) {
    __atomic_store_n(&forced_row, -1, __ATOMIC_RELAXED);
    return 0;
  }
  if (row >= PRIMC_IGEMM_ROW_COUNT || !row_runs(row)) return -1;
  __atomic_store_n(&forced_row, row, __ATOMIC_RELAXED);
  return 0;
}

const char *primc_igemm_row_name(int row) { return row >= 0 && row < PRIMC_IGEMM_ROW_COUNT ? rows[row].name : NULL; }

static int64_t forced_conv_k = -1;

int64_t primc_igemm_conv_min_k(int row) {
  int64_t f = __atomic_load_n(&forced_conv_k, __ATOMIC_RELAXED);
  if (row < 0 || row >= PRIMC_IGEMM_ROW_COUNT) return 0;
  return f >= 0 ? f : rows[row].conv_k;
}

void primc_igemm_force_conv_min_k(int64_t k) { __atomic_store_n(&forced_conv_k, k < 0 ? -1 : k, __ATOMIC_RELAXED); }

/* ---------------------------------------------------------------- the portable row */

void primc_ig_kern_generic(const ikargs *g) {
  for (int r = 0; r < g->mr; r++) {
    int32_t acc[2 * IG_PANEL] = {0};
    for (int64_t kq = 0; kq < g->kc / 4; kq++) {
      const uint8_t *a = g->a + ig_a_at(g->lda, r, 4 * kq);
      for (int h = 0; h < 2 && h * IG_PANEL < g->nr; h++) {
        const int8_t *b = g->b + ig_b_at(kq, h);
        for (int j = 0; j < IG_PANEL; j++)
          acc[h * IG_PANEL + j] += a[0] * b[4 * j] + a[1] * b[4 * j + 1] + a[2] * b[4 * j + 2] + a[3] * b[4 * j + 3];
      }
    }
    for (int j = 0; j < g->nr; j++) ig_store(g, r, j, acc[j]);
  }
}

/* ---------------------------------------------------------------- sizes, packing B */

static int64_t kpad(int64_t K) { return cdiv(K, IG_KSTEP) * IG_KSTEP; }
static int64_t npad(int64_t N) { return cdiv(N, 2 * IG_PANEL) * 2 * IG_PANEL; }

size_t primc_igemm_packed_b_size(int64_t N, int64_t K) {
  if (N < 1 || K < 1) return 0;
  return sizeof(ig_hdr) + (size_t)npad(N) * 8 + (size_t)npad(N) * (size_t)kpad(K);
}

/* where a row's records start in a packed B: past the panels, 64-byte aligned */
static int64_t records_at(int64_t N, int64_t K) { return (int64_t)(primc_igemm_packed_b_size(N, K) + 63) / 64 * 64; }

/* row's records for one pair of panels: a record per K block (IG_KC, the last one the rest) */
static size_t prep_pair_bytes(const ig_row *r, int64_t K) {
  int64_t Kp = kpad(K), full = Kp / IG_KC, rest = Kp % IG_KC;
  return (size_t)full * r->prep_bytes(IG_KC) + (rest ? r->prep_bytes(rest) : 0);
}

int primc_igemm_prep_row(int64_t M, int64_t gemms) {
  int r = primc_igemm_row_active();
  /* a task of IG_MB rows makes a block's record for itself: one task a run makes it once anyway */
  return rows[r].prep && (double)cdiv(M, IG_MB) * (double)gemms >= 2 ? r : -1;
}

size_t primc_igemm_packed_b_size_row(int64_t N, int64_t K, int row) {
  size_t base = primc_igemm_packed_b_size(N, K);
  if (!base || row < 0 || row >= PRIMC_IGEMM_ROW_COUNT || !rows[row].prep) return base;
  return (size_t)records_at(N, K) + (size_t)(npad(N) / (2 * IG_PANEL)) * prep_pair_bytes(&rows[row], K);
}

/* column n's lowest and highest value */
static void col_range(int trans_b, int64_t N, int64_t K, const int32_t *B, int64_t n, int32_t *lo, int32_t *hi) {
  *lo = INT32_MAX, *hi = INT32_MIN;
  for (int64_t k = 0; k < K; k++) {
    int32_t v = trans_b ? B[n * K + k] : B[k * N + n];
    *lo = v < *lo ? v : *lo, *hi = v > *hi ? v : *hi;
  }
}

int primc_igemm_b_fits(int trans_b, int64_t N, int64_t K, const int32_t *B) {
  if (N < 1 || K < 1 || !B) return 0;
  for (int64_t n = 0; n < N; n++) {
    int32_t lo, hi;
    col_range(trans_b, N, K, B, n, &lo, &hi);
    if ((int64_t)hi - lo > 255) return 0;
  }
  return 1;
}

int primc_igemm_pack_b(int trans_b, int64_t N, int64_t K, const int32_t *B, void *packed) {
  return primc_igemm_pack_b_row(trans_b, N, K, B, packed, -1);
}

int primc_igemm_pack_b_row(int trans_b, int64_t N, int64_t K, const int32_t *B, void *packed, int row) {
  size_t size = primc_igemm_packed_b_size(N, K);
  if (!size || !B || !packed || !primc_igemm_b_fits(trans_b, N, K, B)) return PRIMC_ERR_ARG;
  if (row >= 0 && (row >= PRIMC_IGEMM_ROW_COUNT || !prep_runs(row))) return PRIMC_ERR_ARG; /* prep runs that row's code */
  int64_t Kp = kpad(K), Np = npad(N);
  ig_hdr *h = packed;
  memset(packed, 0, size);
  *h = (ig_hdr){.magic = IG_MAGIC, .n = N, .k = K, .kp = Kp};
  int32_t *ob = (int32_t *)(h + 1);
  uint32_t *cs = (uint32_t *)(ob + Np);
  int8_t *pan = (int8_t *)(cs + Np);
  for (int64_t n = 0; n < N; n++) {
    int32_t lo, hi;
    col_range(trans_b, N, K, B, n, &lo, &hi);
    ob[n] = lo >= -128 && hi <= 127 ? 0 : lo + 128;
    int8_t *p = pan + n / (2 * IG_PANEL) * Kp * 2 * IG_PANEL + n % IG_PANEL * 4;
    int h2 = (int)(n % (2 * IG_PANEL) / IG_PANEL);
    uint32_t sum = 0;
    for (int64_t k = 0; k < K; k++) {
      int32_t v = (trans_b ? B[n * K + k] : B[k * N + n]) - ob[n];
      p[ig_b_at(k / 4, h2) + k % 4] = (int8_t)v;
      sum += (uint32_t)v;
    }
    cs[n] = sum + (uint32_t)K * (uint32_t)ob[n];
  }
  const ig_row *r = row >= 0 ? &rows[row] : NULL;
  if (!r || !r->prep) return PRIMC_OK;
  h->prep_row = row + 1;
  h->prep_at = records_at(N, K);
  /* every byte written (a record uses part of its room): the same weights pack to the same bytes */
  memset((char *)packed + size, 0, primc_igemm_packed_b_size_row(N, K, row) - size);
  char *rec = (char *)packed + h->prep_at;
  for (int64_t q = 0; q < Np / (2 * IG_PANEL); q++)
    for (int64_t kb = 0; kb < Kp; kb += IG_KC) {
      int64_t kc = Kp - kb < IG_KC ? Kp - kb : IG_KC;
      r->prep(pan + q * Kp * 2 * IG_PANEL + kb * 2 * IG_PANEL, kc, rec);
      rec += r->prep_bytes(kc);
    }
  return PRIMC_OK;
}

static int hdr_ok(const ig_hdr *h, int64_t N, int64_t K) {
  return h && h->magic == IG_MAGIC && h->n == N && h->k == K && h->kp == kpad(K);
}

int primc_igemm_packed_check(const void *packed, size_t avail, int64_t N, int64_t K) {
  size_t size = primc_igemm_packed_b_size(N, K);
  if (!packed || !size || avail < size || !hdr_ok(packed, N, K)) return PRIMC_ERR_WEIGHTS;
  const ig_hdr *h = packed;
  int r = h->prep_row - 1;
  if (r == -1) return PRIMC_OK;
  /* records of a row this build has, where that row's packing puts them, inside the bytes */
  return r >= 0 && r < PRIMC_IGEMM_ROW_COUNT && rows[r].prep && h->prep_at == records_at(N, K) &&
                 avail >= primc_igemm_packed_b_size_row(N, K, r)
             ? PRIMC_OK
             : PRIMC_ERR_WEIGHTS;
}

/* ---------------------------------------------------------------- A, per call */

size_t primc_igemm_scratch_size(int64_t M, int64_t K) {
  if (M < 1 || K < 1) return 0;
  int64_t Mp = cdiv(M, 32) * 32;
  return (size_t)(Mp * kpad(K)) + (size_t)Mp * 8;
}

typedef struct job {
  int trans_a, wide, vec; /* vec: A's rows packed by primc_ig_pack_row_avx512 (2) or _avx2 (1), written whole */
  int64_t M, N, K, lda, Kp, Mp, pairs, nm, np, next; /* next: the first task no thread has claimed */
  const int32_t *A;
  const ig_hdr *h;
  const int32_t *cob, *csum;
  const int8_t *pan;
  const char *pre; /* the active row's prep records, NULL when B has none for it */
  int64_t pre_pair; /* their bytes per pair of panels */
  uint8_t *a; /* tiles */
  int32_t *roff, *rsum;
  int32_t *C;
  int64_t ldc;
  const ig_row *row;
  const primc_igemm_ip *ip; /* A in place (the row's kern_ip), or NULL: tiles */
} job;

/* a row of A (x[k * sk] for k < K) less its minimum (*lo) into row r of a zeroed tiled strip, the sum of what it
 * stored in *ra; 1 when it spans more than 256 values (the stored bytes then mean nothing) */
static int pack_row(const int32_t *x, int64_t sk, int64_t K, uint8_t *strip, int r, int32_t *lo, uint32_t *ra) {
  int32_t l = INT32_MAX, h = INT32_MIN;
  for (int64_t k = 0; k < K; k++) l = x[k * sk] < l ? x[k * sk] : l, h = x[k * sk] > h ? x[k * sk] : h;
  uint32_t sum = 0;
  for (int64_t k = 0; k < K; k++) {
    uint32_t v = (uint32_t)x[k * sk] - (uint32_t)l;
    strip[ig_a_at(0, r, k)] = (uint8_t)v;
    sum += v;
  }
  *lo = l, *ra = sum;
  return (int64_t)h - l > 255;
}

/* strips [b, e) of 16 rows of A into tiles, offsets and sums; rows past M zero */
static void pack_strips(void *ctx, int64_t b, int64_t e) {
  job *j = ctx;
  int wide = 0;
  for (int64_t st = b; st < e; st++) {
    uint8_t *t = j->a + st * 16 * j->Kp;
    if (st * 16 + 16 > j->M || !j->vec || j->trans_a) memset(t, 0, (size_t)(16 * j->Kp)); /* else written whole */
    for (int r = 0; r < 16; r++) {
      int64_t m = st * 16 + r;
      if (m >= j->M) {
        j->roff[m] = j->rsum[m] = 0;
        continue;
      }
      int32_t lo;
      uint32_t ra;
#if PRIMC_X86
      if (!j->trans_a && j->vec)
        wide |= (j->vec == 2 ? primc_ig_pack_row_avx512 : primc_ig_pack_row_avx2)(j->A + m * j->lda, j->K, j->Kp, t, r,
                                                                                  &lo, &ra);
      else
#endif
        wide |= pack_row(j->trans_a ? j->A + m : j->A + m * j->lda, j->trans_a ? j->lda : 1, j->K, t, r, &lo, &ra);
      j->roff[m] = lo;
      j->rsum[m] = (int32_t)ra;
    }
  }
  if (wide) __atomic_store_n(&j->wide, 1, __ATOMIC_RELAXED);
}

int32_t primc_igemm_packed_b_at(const void *packed, int64_t n, int64_t k) {
  const ig_hdr *h = packed;
  const int32_t *ob = (const int32_t *)(h + 1);
  const int8_t *pan = (const int8_t *)(ob + 2 * npad(h->n));
  const int8_t *p = pan + n / (2 * IG_PANEL) * h->kp * 2 * IG_PANEL + n % IG_PANEL * 4;
  return p[ig_b_at(k / 4, (int)(n % (2 * IG_PANEL) / IG_PANEL)) + k % 4] + ob[n];
}

/* ---------------------------------------------------------------- the driver */

static void run_task(const job *j, int64_t t, int16_t *wb) {
  const ig_row *row = j->row;
  int64_t m0 = t / j->np * IG_MB, m1 = m0 + IG_MB < j->M ? m0 + IG_MB : j->M;
  int64_t q0 = t % j->np * IG_PP, q1 = q0 + IG_PP < j->pairs ? q0 + IG_PP : j->pairs;
  int64_t calls = (m1 - m0 + row->mr - 1) / row->mr;
  for (int64_t kb = 0; kb < j->Kp; kb += IG_KC)
    for (int64_t q = q0; q < q1; q++) {
      int64_t n0 = q * 2 * IG_PANEL, nr = j->N - n0 < 2 * IG_PANEL ? j->N - n0 : 2 * IG_PANEL;
      int64_t kc = j->Kp - kb < IG_KC ? j->Kp - kb : IG_KC;
      /* B's next block (the next pair's, or the first pair's next K block after the last pair) pulled into L2 while
       * this one runs, a share per call: weights larger than the caches stream from memory */
      int64_t nq = q + 1 < q1 ? q + 1 : q0, nkb = q + 1 < q1 ? kb : kb + IG_KC;
      const char *next = nkb < j->Kp ? (const char *)(j->pan + nq * j->Kp * 2 * IG_PANEL + nkb * 2 * IG_PANEL) : NULL;
      int64_t nlines = next ? (j->Kp - nkb < IG_KC ? j->Kp - nkb : IG_KC) / 2 : 0, share = (nlines + calls - 1) / calls;
      const char *pre = j->pre ? j->pre + q * j->pre_pair + kb / IG_KC * (int64_t)row->prep_bytes(IG_KC) : NULL;
      for (int64_t m = m0; m < m1; m += row->mr) {
        int64_t i = (m - m0) / row->mr, lines = nlines - i * share < share ? nlines - i * share : share;
        const uint8_t *ar[32]; /* in place: the call's rows, one division for the first */
        if (j->ip) {
          const primc_igemm_ip *ip = j->ip;
          int64_t y = m / ip->ow, x = m % ip->ow;
          for (int64_t r = 0; r < row->mr && m + r < m1; r++, x++) {
            if (x == ip->ow) x = 0, y++;
            ar[r] = ip->map + y * ip->row_bytes + x * ip->col_bytes;
          }
        }
        ikargs g = {.a = j->ip ? NULL : j->a + ig_a_at(16 * j->Kp, m, kb),
                    .lda = 16 * j->Kp,
                    .b = j->pan + q * j->Kp * 2 * IG_PANEL + kb * 2 * IG_PANEL,
                    .pf = lines > 0 ? next + 64 * i * share : NULL,
                    .pf_lines = lines > 0 ? lines : 0,
                    .kc = kc,
                    .mr = (int)(m1 - m < row->mr ? m1 - m : row->mr),
                    .nr = (int)nr,
                    .first = kb == 0,
                    .last = kb + IG_KC >= j->Kp,
                    .c = j->C + m * j->ldc + n0,
                    .ldc = j->ldc,
                    .roff = j->roff + m,
                    .rsum = j->rsum + m,
                    .cob = j->cob + n0,
                    .csum = j->csum + n0,
                    .wb = wb,
                    .fresh = m == m0,
                    .pre = pre,
                    .arow = ar,
                    .boff = j->ip ? j->ip->boff + kb / IG_KSTEP : NULL};
        if (j->ip) row->kern_ip(&g);
        else row->kern(&g);
      }
    }
}

/* each of the pool's threads claims tasks one at a time until none is left: a core slowed by a neighbour (a VM's
 * shared AMX unit) takes fewer of them instead of holding up the others; every C element is still one task's */
static void claim_tasks(void *ctx, int64_t b, int64_t e) {
  job *j = ctx;
  (void)b, (void)e;
  int16_t wb[IG_KC * 2 * IG_PANEL + IG_WB_NOTES / 2] __attribute__((aligned(64)));
  if (j->row->setup) j->row->setup(1);
  for (int64_t t; (t = __atomic_fetch_add(&j->next, 1, __ATOMIC_RELAXED)) < j->nm * j->np;) run_task(j, t, wb);
  if (j->row->setup) j->row->setup(0);
}

/* a row of A too wide for u8: every element summed exactly (b read back from the panels) */
static void fallback_rows(void *ctx, int64_t b, int64_t e) {
  const job *j = ctx;
  for (int64_t m = b; m < e; m++)
    for (int64_t n = 0; n < j->N; n++) {
      uint32_t acc = 0;
      for (int64_t k = 0; k < j->K; k++) {
        int32_t a = j->trans_a ? j->A[k * j->lda + m] : j->A[m * j->lda + k];
        acc += (uint32_t)a * (uint32_t)primc_igemm_packed_b_at(j->h, n, k);
      }
      j->C[m * j->ldc + n] = (int32_t)acc;
    }
}

/* j's header, panels, A tiles and row offsets from the call's arguments; 0 on a bad shape or packed B */
static int job_init(job *j, int64_t M, int64_t N, int64_t K, const void *packed_b, int32_t *C, int64_t ldc,
                    void *scratch) {
  const ig_hdr *h = packed_b;
  if (!hdr_ok(h, N, K)) return 0;
  *j = (job){.M = M, .N = N, .K = K, .h = h, .C = C, .ldc = ldc};
  j->row = &rows[primc_igemm_row_active()];
#if PRIMC_X86
  j->vec = primc_isa_covers(primc_sgemm_isa(), PRIMC_ISA_AVX512) ? 2
           : primc_isa_covers(primc_sgemm_isa(), PRIMC_ISA_AVX2)  ? 1
                                                                   : 0;
#endif
  j->Kp = kpad(K);
  j->Mp = cdiv(M, 32) * 32;
  j->pairs = cdiv(N, 2 * IG_PANEL);
  j->nm = cdiv(M, IG_MB);
  j->np = cdiv(j->pairs, IG_PP);
  j->cob = (const int32_t *)(h + 1);
  j->csum = j->cob + npad(N);
  j->pan = (const int8_t *)(j->csum + npad(N));
  if (h->prep_row - 1 == (int)(j->row - rows) && j->row->prep && h->prep_at == records_at(N, K)) /* bytes: packed_check */
    j->pre = (const char *)h + h->prep_at, j->pre_pair = (int64_t)prep_pair_bytes(j->row, K);
  if (scratch) { /* none in place */
    j->a = scratch;
    j->roff = (int32_t *)(j->a + j->Mp * j->Kp);
    j->rsum = j->roff + j->Mp;
  }
  return 1;
}

static int job_serial(const job *j) { return (double)j->M * (double)j->N * (double)j->Kp < IG_SERIAL; }

int primc_igemm_prepacked(int trans_a, int64_t M, int64_t N, int64_t K, const int32_t *A, int64_t lda,
                          const void *packed_b, int32_t *C, int64_t ldc, void *scratch) {
  if (M < 0 || N < 0 || K < 1 || !A || !C || !scratch || ldc < N || lda < (trans_a ? M : K)) return PRIMC_ERR_ARG;
  if (M == 0 || N == 0) return PRIMC_OK;
  job j;
  if (!job_init(&j, M, N, K, packed_b, C, ldc, scratch)) return PRIMC_ERR_ARG;
  j.trans_a = trans_a, j.A = A, j.lda = lda;
  int serial = job_serial(&j);
  if (serial) pack_strips(&j, 0, j.Mp / 16);
  else primc_parallel_for(j.Mp / 16, pack_strips, &j);
  if (j.wide) {
    if (serial) fallback_rows(&j, 0, M);
    else primc_parallel_for(M, fallback_rows, &j);
  } else {
    primc_parallel_for(serial ? 1 : primc_num_threads(), claim_tasks, &j);
  }
  return PRIMC_OK;
}

typedef struct fill_job {
  job *j;
  primc_igemm_fill_fn fill;
  void *ctx;
} fill_job;

static void fill_strips(void *ctx, int64_t b, int64_t e) {
  fill_job *f = ctx;
  for (int64_t st = b; st < e; st++)
    f->fill(f->ctx, st, f->j->a + st * 16 * f->j->Kp, f->j->Kp, f->j->roff + st * 16, f->j->rsum + st * 16);
}

int primc_igemm_filled(int64_t M, int64_t N, int64_t K, primc_igemm_fill_fn fill, void *ctx, const void *packed_b,
                       int32_t *C, int64_t ldc, void *scratch) {
  if (M < 0 || N < 0 || K < 1 || !fill || !C || !scratch || ldc < N) return PRIMC_ERR_ARG;
  if (M == 0 || N == 0) return PRIMC_OK;
  job j;
  if (!job_init(&j, M, N, K, packed_b, C, ldc, scratch)) return PRIMC_ERR_ARG;
  fill_job f = {&j, fill, ctx};
  int serial = job_serial(&j);
  for (int64_t st = j.Mp / 16 - 1; st >= cdiv(M, 16); st--) /* strips wholly past M: zero, no fill */
    memset(j.a + st * 16 * j.Kp, 0, (size_t)(16 * j.Kp)), memset(j.roff + st * 16, 0, 64), memset(j.rsum + st * 16, 0, 64);
  if (serial) fill_strips(&f, 0, cdiv(M, 16));
  else primc_parallel_for(cdiv(M, 16), fill_strips, &f);
  primc_parallel_for(serial ? 1 : primc_num_threads(), claim_tasks, &j);
  return PRIMC_OK;
}

int primc_igemm_in_place_runs(void) { return rows[primc_igemm_row_active()].kern_ip != NULL; }

int primc_igemm_in_place(int64_t M, int64_t N, int64_t K, const primc_igemm_ip *ip, const void *packed_b, int32_t *C,
                         int64_t ldc) {
  if (M < 0 || N < 0 || K < 1 || !ip || !ip->map || !ip->boff || !ip->roff || !ip->rsum || ip->ow < 1 || !C || ldc < N)
    return PRIMC_ERR_ARG;
  if (M == 0 || N == 0) return PRIMC_OK;
  job j;
  if (!primc_igemm_in_place_runs() || !job_init(&j, M, N, K, packed_b, C, ldc, NULL)) return PRIMC_ERR_ARG;
  j.ip = ip;
  j.roff = (int32_t *)ip->roff, j.rsum = (int32_t *)ip->rsum; /* read only: the calls' fold */
  primc_parallel_for(job_serial(&j) ? 1 : primc_num_threads(), claim_tasks, &j);
  return PRIMC_OK;
}

/* ---------------------------------------------------------------- the dot_i8 call */

/* params: dot's (dtype, B, M, N, K, a strides (batch, m, k), b strides), then the packed B's bytes; bufs: out
 * (i32 [M, N]), a (i32), B packed by primc_igemm_pack_b, scratch (primc_igemm_scratch_size(M, K) bytes) */
int primc_k_dot_i8(const int64_t *q, void *const *bufs) {
  int64_t M = q[2], N = q[3], K = q[4], sm = q[6], sk = q[7], lda;
  int ta;
  if (M * N == 0) return PRIMC_OK;
  if (q[0] != PRIMC_I32 || q[1] != 1 || K < 1) return PRIMC_ERR_RUNTIME;
  if (sk == 1 || K == 1) /* A as a BLAS operand: row-major or transposed */
    ta = 0, lda = M == 1 ? K : sm < K ? K : sm;
  else if (sm == 1 || M == 1)
    ta = 1, lda = sk < M ? M : sk;
  else
    return PRIMC_ERR_RUNTIME;
  /* B may come from a weights file: its header decides every read, so it is checked first */
  if (q[11] < 1 || primc_igemm_packed_check(bufs[2], (size_t)q[11], N, K) != PRIMC_OK) return PRIMC_ERR_WEIGHTS;
  return primc_igemm_prepacked(ta, M, N, K, bufs[1], lda, bufs[2], bufs[0], N, bufs[3]);
}

/* elements of C below which the epilogue runs on the calling thread (kernels_dot.c's figure) */
#define EPI_SPLIT_ELEMS 32768

int primc_k_dot_i8_epi(const int64_t *q, void *const *bufs, void (*epi)(void *, int64_t, int64_t), void *ctx) {
  int64_t M = q[2], N = q[3];
  int st = primc_k_dot_i8(q, bufs);
  if (st != PRIMC_OK || M == 0) return st;
  if (M > 1 && M * N >= EPI_SPLIT_ELEMS) primc_parallel_for(M, epi, ctx);
  else epi(ctx, 0, M);
  return PRIMC_OK;
}
