/* runtime/gemm/driver.c: the fp32 GEMM driver: blocking, the per-thread B buffers, work split over the pool, the sgemm entry points. */
#include "runtime/gemm/gemm.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/*
 * Shape of the computation (row-major C[M][N] = alpha * op(A)[M][K] * op(B)[K][N] + beta * C):
 *
 *   items (m-chunk x n-block) split over the pool
 *     for each K block of KC rows
 *       B block (KC x n-block) packed into NR-wide panels [panel][k][NR] in a per-thread buffer (L2)
 *       for each strip of <= MR rows of A (read in place through strides, stays in L1)
 *         for each B panel: micro-kernel, an MR x NR register tile of FMAs
 *       after the last K block: the epilogue on each finished strip x n-block, while hot
 *
 * A is never packed: the micro-kernel broadcasts A[r][k] through (row stride, k stride), which covers
 * both op(A) = A and op(A) = A^T. B is read in place (no packing) when M is small and B is not
 * transposed, since a packed block would then be used only once or twice.
 *
 * Strips have heights that differ by at most one (M split evenly into ceil(M/MR) strips), and each
 * (rows, vectors) pair has its own fully unrolled kernel, so no FMA is spent on padding rows.
 *
 * Each C element is summed in the same order whatever the thread count (K blocks in order, one
 * thread per element): results are bitwise identical across thread counts for a given ISA.
 *
 * Memory: one buffer per thread (KC x NC floats for B, 512 KiB, then room for a group of A^T's strips),
 * allocated at the thread's first call and kept until it exits; primc_sgemm_reserve() makes the pool threads
 * allocate theirs up front, so the inference path itself never allocates.
 */

#define AT_ROWS 64 /* A^T's strips are packed in groups of up to this many rows (at least one strip) */
#define AT_PF 16   /* ... pulling each k's rows into the cache this many k ahead */
#define BUF_FLOATS (KC_MAX * NC_MAX + AT_ROWS * KC_MAX)
#define AT_BUF(buf) ((buf) + KC_MAX * NC_MAX)
#define STRIP_SPLIT_ROWS 8 /* tiles of rows from which threads may split M even when each packs all of B */
#define PACK_A_PANELS 4 /* pack an A strip when this many B panels reuse it */
#define SERIAL_FLOPS (1 << 18) /* below this many multiply-adds (4-10 us) a GEMM runs on the calling thread: waking the pool costs more */
#define SERIAL_B_FLOATS (1 << 17) /* ... unless B is larger than this (512 KiB): then reading it takes longer */

/* B read in place is K rows a map apart (a 1x1 conv's input channels), more streams than the hardware
 * prefetchers follow: the first strip over a panel pulls each row's lines this many panels ahead
 * (figures: bench/gemm_rows.md) */
#define DIRECT_PF_PANELS 2

/* ---------------------------------------------------------------- per-thread B buffer */

static pthread_key_t buf_key;
static int buf_key_ok;
static pthread_once_t buf_once = PTHREAD_ONCE_INIT;

static void buf_key_make(void) { buf_key_ok = pthread_key_create(&buf_key, free) == 0; }

static float *thread_buf(void) {
  pthread_once(&buf_once, buf_key_make);
  if (!buf_key_ok) return NULL;
  float *p = pthread_getspecific(buf_key);
  if (!p) {
    p = aligned_alloc(64, BUF_FLOATS * sizeof(float));
    if (p && pthread_setspecific(buf_key, p) != 0) {
      free(p);
      p = NULL;
    }
  }
  return p;
}

static void reserve_fn(void *ctx, int64_t b, int64_t e) { (void)thread_buf(); }

void primc_sgemm_reserve(void) { primc_parallel_for(primc_num_threads(), reserve_fn, NULL); }

/* ---------------------------------------------------------------- the driver */

typedef struct job {
  const gm_row *kr; /* the row that runs it */
  int64_t M, N, K;
  float alpha, beta;
  const float *a;
  int64_t ars, aks;
  bsrc bs;
  float *c;
  int64_t ldc;
  primc_epilogue epi;
  void *epi_ctx;
  const int64_t *koff; /* B's rows at b + koff[k] (read in place) */
  const int64_t *akoff; /* A's k at a + m * ars + akoff[k] (packed from where they lie) */
  const primc_gemm_store *st;
  int a_mr;            /* > 0: A packed by primc_sgemm_pack_a in strips of at most a_mr rows */
  int kc, direct;
  int64_t n_strips, n_panels, nI, nJ;
  int status;
} job;

/* the fused store's clamp in scalar code, as the vector code does it: NaN stays NaN */
static float store_clamp(const primc_gemm_store *s, float v) { return v < s->lo ? s->lo : v > s->hi ? s->hi : v; }

/* The compacting store's runs: C columns [n0, n0 + nr) lie on padded rows `row` wide whose first `keep` are outputs;
 * each run of outputs within one row is (C column, y column, length), found once per tile (two divisions per
 * element made this store 60% of a 16 -> 64 3x3 conv's time on AVX2). */
int primc_gm_compact_runs(const primc_gemm_store *s, int64_t n0, int nr, int64_t run[GM_STORE_RUNS][3]) {
  int64_t y = n0 / s->row, x = n0 % s->row;
  int n = 0;
  for (int64_t c = 0; c < nr && n < GM_STORE_RUNS; y++, x = 0) {
    int64_t len = min64(nr - c, s->row - x);
    if (x < s->keep) run[n][0] = c, run[n][1] = y * s->keep + x, run[n][2] = min64(len, s->keep - x), n++;
    c += len;
  }
  return n;
}

/* kargs.st on a stored tile, for kernels that do not apply it themselves (or not the compacting form) */
void primc_gm_store_tile(const kargs *h, int rows) {
  const primc_gemm_store *s = h->st;
  if (s->row) {
    int64_t run[GM_STORE_RUNS][3];
    int n = primc_gm_compact_runs(s, h->st_n0, h->nr, run);
    for (int r = 0; r < rows; r++) {
      float b = h->st_bias ? h->st_bias[r * s->bias_stride] : 0.0f;
      for (int i = 0; i < n; i++) {
        const float *c = h->c + r * h->ldc + run[i][0], *res = h->st_res ? h->st_res + r * s->ldy + run[i][1] : NULL;
        float *y = h->st_y + r * s->ldy + run[i][1];
        for (int64_t t = 0; t < run[i][2]; t++) y[t] = store_clamp(s, c[t] + b + (res ? res[t] : 0.0f));
      }
    }
    return;
  }
  for (int r = 0; r < rows; r++) {
    float b = h->st_bias ? h->st_bias[r * s->bias_stride] : 0.0f, *c = h->c + r * h->ldc;
    for (int n = 0; n < h->nr; n++) c[n] = store_clamp(s, c[n] + b + (h->st_res ? h->st_res[r * h->ldc + n] : 0.0f));
  }
}

/* rows of strip s: M split evenly into n_strips strips of at most MR rows */
static int64_t strip_row(const job *j, int64_t s) { return j->M * s / j->n_strips; }

/* the strip's a(r, k) into dst[k * mr + r]: one contiguous stream for the kernel, free of the cache-set
 * conflicts that rows a power-of-two apart cause (A^T's strips: pack_at_group) */
static void pack_a(const float *a, int64_t ars, int64_t aks, int64_t mr, int64_t kc, float *dst, gm_pack_a vec) {
  if (aks == 1 && vec && mr <= 16) {
    vec(a, ars, mr, kc, dst);
  } else if (aks == 1) {
    for (int64_t r = 0; r < mr; r++)
      for (int64_t k = 0; k < kc; k++) dst[k * mr + r] = a[r * ars + k];
  } else {
    for (int64_t k = 0; k < kc; k++) memcpy(dst + k * mr, a + k * aks, (size_t)mr * sizeof(float));
  }
}

/* Prepacked weights come from memory the first time a block of them is read (BERT-base streams 340 MB
 * a run), and the kernels that read them first would wait on it. So each strip prefetches, one cache
 * line per k step inside its kernels (a burst at the strip's start did not help), what comes next:
 * with prepacked B, the strips after the first pull a share each of the next K block (or of the
 * thread's next item); with prepacked A (conv weights), each strip pulls the next strip's A panel.
 * Sets g->pf, g->pf_n for strip s of [s0, s1) at K block k0. */
static void next_share(const job *j, int64_t item, int64_t last_item, int64_t s, int64_t s0, int64_t s1, int64_t k0,
                       kargs *g) {
  g->pf = NULL, g->pf_n = 0;
  int64_t k1 = k0 + min64(j->kc, j->K - k0);
  if (j->bs.packed) {
    int64_t i = s - s0, n = s1 - s0;
    if (n < 2 || i == 0) return;
    if (k1 >= j->K) {
      if (++item > last_item) return;
      k1 = 0;
    }
    int64_t jj = item % j->nJ, p0 = j->n_panels * jj / j->nJ, p1 = j->n_panels * (jj + 1) / j->nJ;
    int64_t kc = min64(j->kc, j->K - k1), NR = j->kr->nr, lines = kc * (p1 - p0) * NR * (int64_t)sizeof(float) / 64;
    int64_t l0 = lines * (i - 1) / (n - 1), l1 = lines * i / (n - 1);
    g->pf = (const char *)(j->bs.packed + k1 * j->n_panels * NR + p0 * kc * NR) + 64 * l0;
    g->pf_n = l1 - l0;
  } else if (j->a_mr) {
    int64_t ns = s + 1, kn = k0;
    if (ns >= s1) {
      if (k1 >= j->K) return;
      ns = s0, kn = k1;
    }
    int64_t m0 = strip_row(j, ns), mr = strip_row(j, ns + 1) - m0, kc = min64(j->kc, j->K - kn);
    g->pf = (const char *)(j->a + m0 * j->K + kn * mr);
    g->pf_n = (mr * kc * (int64_t)sizeof(float) + 63) / 64;
  }
}

/* the rows [r0, r0 + rows) of strip (m0, ..) x panel p: one kernel call, g pointing at its A rows */
static void run_part(const job *j, kargs *g, int64_t row, int rows, int64_t p, int last) {
  const gm_row *kr = j->kr;
  g->c = j->c + row * j->ldc + p * kr->nr;
  g->st = last ? j->st : NULL;
  if (g->st) {
    g->st_bias = j->st->bias ? j->st->bias + row * j->st->bias_stride : NULL;
    g->st_res = j->st->res ? j->st->res + row * (j->st->row ? j->st->ldy : j->ldc) + (j->st->row ? 0 : p * kr->nr) : NULL;
    g->st_y = j->st->y ? j->st->y + row * j->st->ldy : NULL;
    g->st_n0 = p * kr->nr;
  }
  if (g->st && !kr->fused_store) {
    g->st = NULL;
    kr->kern(g, rows);
    g->st = j->st;
    primc_gm_store_tile(g, rows);
  } else {
    kr->kern(g, rows);
  }
}

/* the kernel calls of strip (m0, mr) x panel p: one, or several when the strip is packed for a taller
 * register tile than this ISA's (the per-call work is small when K is: no division on the usual path) */
static void run_tile(const job *j, kargs *g, int64_t m0, int64_t mr, int64_t p, int last) {
  if (mr <= j->kr->mr) {
    run_part(j, g, m0, (int)mr, p, last);
    return;
  }
  int64_t parts = cdiv(mr, j->kr->mr);
  for (int64_t q = 0; q < parts; q++) {
    int64_t r0 = mr * q / parts, r1 = mr * (q + 1) / parts;
    kargs h = *g;
    h.a = g->a + r0 * g->ars;
    run_part(j, &h, m0 + r0, (int)(r1 - r0), p, last);
  }
}

/* the strips after s, from s, whose rows fit a group of AT_ROWS (s itself always), below s1 */
static int64_t at_group_end(const job *j, int64_t s, int64_t s1) {
  int64_t e = s + 1;
  while (e < s1 && strip_row(j, e + 1) - strip_row(j, s) <= AT_ROWS) e++;
  return e;
}

/* A^T's strips [s, e) at k0 into at, strip t's [kc][mr] block at (its first row - s's) * kc. A strip's own mr rows
 * at each k lie in one or two cache lines aks floats apart: packed one strip at a time, kc such lines a power of
 * two apart share a few cache sets and are read again from L3 by the strip after (a memcpy per k: 30% of a
 * 1024 x 256 x 1024 dW = X^T dY GEMM on Zen 3). So k by k, the group's rows at k are read once, each strip's
 * share copied by whole vectors where the rows and the block allow (the next k's copy writes over the excess). */
static void pack_at_group(const job *j, int64_t s, int64_t e, int64_t k0, int64_t kc, float *at) {
  const int64_t mg = strip_row(j, s), rows = strip_row(j, e) - mg;
  int64_t off[AT_ROWS], mr[AT_ROWS]; /* each strip's first row from mg, and its rows */
  for (int64_t t = s; t < e; t++) off[t - s] = strip_row(j, t) - mg, mr[t - s] = strip_row(j, t + 1) - strip_row(j, t);
  for (int64_t k = 0; k < kc; k++) {
    const float *src = j->a + (k0 + k) * j->aks + mg;
    /* each k's rows are a page or more apart: no hardware prefetcher follows them */
    if (k + AT_PF < kc)
      for (int64_t l = 0; l < rows; l += 16) __builtin_prefetch(src + AT_PF * j->aks + l);
    for (int64_t t = 0; t < e - s; t++) {
      int64_t room = (kc - k) * mr[t]; /* floats to the end of the strip's block */
      float *d = at + off[t] * kc + k * mr[t];
      if (mr[t] <= 8 && room >= 8 && mg + off[t] + 8 <= j->M)
        memcpy(d, src + off[t], 8 * sizeof(float));
      else if (mr[t] <= 16 && room >= 16 && mg + off[t] + 16 <= j->M)
        memcpy(d, src + off[t], 16 * sizeof(float));
      else
        memcpy(d, src + off[t], (size_t)mr[t] * sizeof(float));
    }
  }
}

/* g's A for the strip of rows [m0, m0 + mr) at k0: the prepacked panel, a packed copy in abuf, or A in place */
static void strip_a(const job *j, int64_t m0, int64_t mr, int64_t k0, int64_t kc, int pack, kargs *g, float *abuf) {
  if (j->a_mr) { /* the strip's panel [k][mr] starts at row m0 of a [M][K] block */
    g->a = j->a + m0 * j->K + k0 * mr;
    g->ars = 1, g->aks = mr;
    return;
  }
  if (j->akoff) { /* each run of k lying one after another packed as one piece */
    const int64_t *ak = j->akoff + k0;
    for (int64_t k = 0, len; k < kc; k += len) {
      for (len = 1; k + len < kc && ak[k + len] == ak[k + len - 1] + 1; len++) {}
      pack_a(j->a + m0 * j->ars + ak[k], j->ars, 1, mr, len, abuf + k * mr, j->kr->pack_a);
    }
    g->a = abuf, g->ars = 1, g->aks = mr;
    return;
  }
  g->a = j->a + m0 * j->ars + k0 * j->aks;
  g->ars = j->ars, g->aks = j->aks;
  if (pack) {
    pack_a(g->a, j->ars, j->aks, mr, kc, abuf, j->kr->pack_a);
    g->a = abuf, g->ars = 1, g->aks = mr;
  }
}

static void run_item(job *j, int64_t item, int64_t last_item, float *buf) {
  float abuf[MR_MAX * KC_MAX] __attribute__((aligned(64)));
  const gm_row *kr = j->kr;
  const int NR = kr->nr;
  int64_t ii = item / j->nJ, jj = item % j->nJ;
  int64_t s0 = j->n_strips * ii / j->nI, s1 = j->n_strips * (ii + 1) / j->nI;
  int64_t p0 = j->n_panels * jj / j->nJ, p1 = j->n_panels * (jj + 1) / j->nJ;
  int64_t n0 = p0 * NR, n1 = min64(j->N, p1 * NR);
  if (s0 >= s1 || n0 >= n1) return;
  for (int64_t k0 = 0; k0 < j->K; k0 += j->kc) {
    int64_t kc = min64(j->kc, j->K - k0);
    const float *bb;
    int64_t bks, pstep;
    if (j->bs.packed) {
      bb = j->bs.packed + k0 * j->n_panels * NR + p0 * kc * NR;
      bks = NR, pstep = kc * NR;
    } else if (j->koff) {
      bb = j->bs.b + n0;
      bks = 0, pstep = NR;
    } else if (j->direct) {
      bb = j->bs.b + k0 * j->bs.ldb + n0;
      bks = j->bs.ldb, pstep = NR;
    } else {
      primc_gm_pack_b(&j->bs, kr, k0, kc, p0, n1, buf);
      bb = buf;
      bks = NR, pstep = kc * NR;
    }
    kargs g = {.kc = kc, .ars = j->ars, .aks = j->aks, .bks = bks, .koff = j->koff ? j->koff + k0 : NULL,
               .b_full = j->bs.packed || (!j->koff && !j->direct),
               .ldc = j->ldc, .alpha = j->alpha, .beta = k0 == 0 ? j->beta : 1.0f};
    int last = k0 + kc >= j->K, pack = p1 - p0 >= PACK_A_PANELS || j->koff || j->akoff;
    int64_t gs = s0, ge = s0; /* the group of A^T's strips packed in the buffer */
    for (int64_t s = s0; s < s1; s++) {
      kargs share;
      next_share(j, item, last_item, s, s0, s1, k0, &share);
      int64_t m0 = strip_row(j, s), mr = strip_row(j, s + 1) - m0, per = cdiv(share.pf_n, p1 - p0);
      if (pack && !j->a_mr && j->aks != 1) {
        if (s >= ge) pack_at_group(j, gs = s, ge = at_group_end(j, s, s1), k0, kc, AT_BUF(buf));
        g.a = AT_BUF(buf) + (m0 - strip_row(j, gs)) * kc, g.ars = 1, g.aks = mr;
      } else {
        strip_a(j, m0, mr, k0, kc, pack, &g, abuf);
      }
      g.pfd = j->direct && s == s0 ? DIRECT_PF_PANELS * NR * (int64_t)sizeof(float) : 0;
      /* the strip that reads a block of prepacked B first (nothing prefetched it) pulls the next panel as it goes,
       * unless it is the only strip (a GEMV streams its panels in order) */
      int ahead = j->bs.packed && !share.pf && s == s0 && s1 - s0 > 1;
      for (int64_t p = p0; p < p1; p++) {
        g.b = bb + (p - p0) * pstep;
        g.nr = (int)min64(NR, j->N - p * NR);
        int64_t done = min64(share.pf_n, (p - p0) * per); /* this call's lines */
        g.pf = share.pf ? share.pf + 64 * done : NULL, g.pf_n = min64(per, share.pf_n - done);
        if (ahead && p + 1 < p1) g.pf = (const char *)(g.b + pstep), g.pf_n = min64(kc, pstep * (int64_t)sizeof(float) / 64);
        run_tile(j, &g, m0, mr, p, last);
      }
      g.pf = NULL, g.pf_n = 0;
      if (last && j->epi) j->epi(j->epi_ctx, j->c + m0 * j->ldc + n0, j->ldc, m0, n0, mr, n1 - n0);
    }
  }
}

static void run_items(void *ctx, int64_t begin, int64_t end) {
  job *j = ctx;
  float *buf = NULL;
  if (((!j->bs.packed && !j->direct && !j->koff) || (!j->a_mr && j->aks != 1)) && !(buf = thread_buf())) {
    __atomic_store_n(&j->status, PRIMC_ERR_RUNTIME, __ATOMIC_RELAXED);
    return;
  }
  for (int64_t i = begin; i < end; i++) run_item(j, i, end - 1, buf);
}

/* n-blocks of at most nc columns, as many as the threads when they would be fewer, a multiple of
 * the threads when that is cheap; M is split only when the n-blocks cannot feed every thread */
static void plan(job *j, int threads) {
  const gm_row *kr = j->kr;
  j->n_strips = cdiv(j->M, j->a_mr ? j->a_mr : kr->mr);
  j->n_panels = cdiv(j->N, kr->nr);
  j->nI = 1;
  j->nJ = cdiv(j->n_panels, kr->nc / kr->nr);
  if (threads <= 1) return;
  if (j->nJ >= threads) {
    j->nJ = min64(j->n_panels, cdiv(j->nJ, threads) * threads);
    return;
  }
  int64_t blocks = j->nJ;
  j->nJ = min64(j->n_panels, threads);
  j->nI = min64(j->n_strips, cdiv(threads, j->nJ));
  /* splitting the strips instead can even out the work: 7 panels on 2 threads is 4 + 3, 19 strips
   * 10 + 9. It costs nothing when no thread packs B (it is read in place or prepacked), and little
   * when every thread packing all of B is small next to its rows' product (bench/gemm_rows.md) */
  if (j->bs.packed || j->direct || j->koff || j->M >= STRIP_SPLIT_ROWS * kr->mr) {
    int64_t pj = min64(j->n_panels, threads), si = min64(j->n_strips, cdiv(threads, blocks));
    double panels_even = (double)j->n_panels / (double)(cdiv(j->n_panels, pj) * pj);
    double strips_even = (double)j->n_strips / (double)(cdiv(j->n_strips, si) * si);
    if (strips_even > panels_even) j->nJ = blocks, j->nI = si;
  }
}

static void scale_c(job *j) {
  for (int64_t m = 0; m < j->M; m++) {
    for (int64_t n = 0; n < j->N; n++) {
      float *c = j->c + m * j->ldc + n;
      *c = j->beta == 0 ? 0.0f : j->beta * *c;
    }
    for (int64_t n = 0; j->st && n < j->N; n++) {
      const primc_gemm_store *s = j->st;
      float *c = j->c + m * j->ldc + n, v = *c + (s->bias ? s->bias[m * s->bias_stride] : 0.0f);
      *c = store_clamp(s, v + (s->res ? s->res[m * j->ldc + n] : 0.0f));
    }
  }
  if (j->epi) j->epi(j->epi_ctx, j->c, j->ldc, 0, 0, j->M, j->N);
}

static int run_job(job *j) {
  if (j->M <= 0 || j->N <= 0) return PRIMC_OK;
  if (j->K <= 0 || j->alpha == 0) {
    scale_c(j);
    return PRIMC_OK;
  }
  if (!j->kc) j->kc = (int)k_block(j->kr, j->K);
  /* few flops but a large B (a classifier's GEMV over 5 MB of weights) is memory-bound: split it too */
  int small = (double)j->M * (double)j->N * (double)j->K < SERIAL_FLOPS && (double)j->N * (double)j->K < SERIAL_B_FLOATS;
  int threads = small ? 1 : primc_num_threads();
  plan(j, threads);
  int64_t items = j->nI * j->nJ;
  if (threads <= 1 || items <= 1)
    run_items(j, 0, items);
  else
    primc_parallel_for(items, run_items, j);
  return j->status;
}

static job job_make(int trans_a, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda, float beta,
                    float *C, int64_t ldc, primc_epilogue epi, void *epi_ctx) {
  job j = {.kr = primc_gm_row(), .M = M, .N = N, .K = K, .alpha = alpha, .beta = beta, .a = A,
           .ars = trans_a ? 1 : lda, .aks = trans_a ? lda : 1, .c = C, .ldc = ldc, .epi = epi, .epi_ctx = epi_ctx};
  return j;
}

/* M <= DOT_M_MAX rows against B^T: each C element is the dot product of two contiguous rows, and
 * packing B would cost more than the product itself */
#define DOT_M_MAX 4
#define DOT_NB 64 /* columns per work item */

static void dot_items(void *ctx, int64_t b, int64_t e) {
  job *j = ctx;
  for (int64_t i = b; i < e; i++) {
    int64_t n0 = i * DOT_NB, n1 = min64(j->N, n0 + DOT_NB);
    for (int64_t m = 0; m < j->M; m++)
      for (int64_t n = n0; n < n1; n++) {
        float v = j->alpha * j->kr->dot(j->a + m * j->ars, j->bs.b + n * j->bs.ldb, j->K);
        float *c = j->c + m * j->ldc + n;
        *c = j->beta == 0 ? v : v + j->beta * *c;
      }
    if (j->epi) j->epi(j->epi_ctx, j->c + n0, j->ldc, 0, n0, j->M, n1 - n0);
  }
}

static int run_dot(job *j) {
  int64_t items = cdiv(j->N, DOT_NB);
  if ((double)j->M * (double)j->N * (double)j->K < SERIAL_FLOPS)
    dot_items(j, 0, items);
  else
    primc_parallel_for(items, dot_items, j);
  return PRIMC_OK;
}

/* leading dimensions cover the rows they step over; pointers are there when something is read */
static int args_ok(int trans_a, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, float *C, int64_t ldc) {
  if (M < 0 || N < 0 || K < 0) return 0;
  if (M == 0 || N == 0) return 1;
  return C && ldc >= N && (K == 0 || (A && lda >= (trans_a ? M : K)));
}

/* rows of A up to which B is read in place rather than packed: the row's value (tuned on Zen 4), more where packing
 * B costs relatively more: AMD Zen 5 (family 1Ah, zmm FMAs at full width, twice Zen 4's rate) 128, Intel's AVX-512
 * cores 256 (a 1x1 conv's x: 256 -> 64 at 56x56 0.61 -> 0.53 ms on an AMX Xeon, 512 -> 2048 at 7x7 slower past
 * 256; bench/gemm_rows.md) */
int64_t primc_gm_direct_rows(const gm_row *kr) {
  int fam = kr->isa == PRIMC_ISA_AVX512 ? primc_gm_amd_family() : -1;
  int64_t more = fam >= 0x1a ? 128 : fam == 0 ? 256 : 0;
  return more > kr->direct_max ? more : kr->direct_max;
}

int primc_sgemm_epi(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                    int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc, primc_epilogue epi,
                    void *epi_ctx) {
  if (!args_ok(trans_a, M, N, K, A, lda, C, ldc) || (M && N && K && (!B || ldb < (trans_b ? K : N))))
    return PRIMC_ERR_ARG;
  job j = job_make(trans_a, M, N, K, alpha, A, lda, beta, C, ldc, epi, epi_ctx);
  j.bs = (bsrc){.b = B, .ldb = ldb, .trans = trans_b};
  j.direct = !trans_b && M <= primc_gm_direct_rows(j.kr);
  if (trans_b && !trans_a && M <= DOT_M_MAX && M > 0 && N > 0 && K > 0 && alpha != 0) return run_dot(&j);
  return run_job(&j);
}

int primc_sgemm(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
  return primc_sgemm_epi(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, NULL, NULL);
}

int primc_sgemm_gen_b(int trans_a, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                      primc_brow_fn brow, void *brow_ctx, float beta, float *C, int64_t ldc, primc_epilogue epi,
                      void *epi_ctx) {
  if (!args_ok(trans_a, M, N, K, A, lda, C, ldc) || !brow) return PRIMC_ERR_ARG;
  job j = job_make(trans_a, M, N, K, alpha, A, lda, beta, C, ldc, epi, epi_ctx);
  j.bs = (bsrc){.row = brow, .row_ctx = brow_ctx};
  return run_job(&j);
}

/* ---------------------------------------------------------------- prepacked B, packed A */

int primc_sgemm_prepacked(int trans_a, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                          const void *packed_b, float beta, float *C, int64_t ldc, primc_epilogue epi,
                          void *epi_ctx) {
  packed_hdr h;
  if (!packed_b || !args_ok(trans_a, M, N, K, A, lda, C, ldc)) return PRIMC_ERR_ARG;
  memcpy(&h, packed_b, sizeof h);
  job j = job_make(trans_a, M, N, K, alpha, A, lda, beta, C, ldc, epi, epi_ctx);
  if (!primc_gm_hdr_valid(&h, N, K) || h.isa != primc_sgemm_isa()) return PRIMC_ERR_ARG;
  j.bs = (bsrc){.packed = (const float *)((const char *)packed_b + sizeof h)};
  j.kc = h.kc;
  return run_job(&j);
}

int primc_sgemm_run(const primc_gemm *g) {
  if (!g || g->M < 0 || g->N < 0 || g->K < 0) return PRIMC_ERR_ARG;
  if (!g->M || !g->N) return PRIMC_OK;
  int sources = !!g->b + !!g->brow + !!g->b_packed + !!g->b_gather;
  if (!g->c || g->ldc < g->N || sources != 1 || (g->koff && !g->b) || g->a_packed_mr < 0 ||
      g->a_packed_mr > MR_MAX || (g->a_packed_mr && g->trans_a) || (g->K && !g->a) ||
      (!g->a_packed_mr && !g->a_koff && g->lda < (g->trans_a ? g->M : g->K)) || (g->a_koff && g->lda < 0) ||
      (g->b && !g->koff && g->K && (g->trans_b ? g->ldb < 0 : g->ldb < g->N)) || (g->trans_b && (g->koff || !g->b)) ||
      (g->b_gather && (!g->gather_n || !g->gather_k)) || (g->a_koff && (g->trans_a || g->a_packed_mr)))
    return PRIMC_ERR_ARG;
  if (g->store && (g->b_packed || (g->store->row && (g->K < 1 || !g->store->y || g->store->keep < 1 ||
                                                       g->store->keep > g->store->row || g->N % g->store->row))))
    return PRIMC_ERR_ARG;
  if (g->b_packed)
    return primc_sgemm_prepacked_any(g->trans_a, g->M, g->N, g->K, 1.0f, g->a, g->lda, g->b_packed, 0.0f, g->c,
                                     g->ldc, g->epi, g->epi_ctx);
  job j = job_make(g->trans_a, g->M, g->N, g->K, 1.0f, g->a, g->lda, 0.0f, g->c, g->ldc, g->epi, g->epi_ctx);
  j.bs = g->brow       ? (bsrc){.row = g->brow, .row_ctx = g->brow_ctx}
         : g->b_gather ? (bsrc){.gb = g->b_gather, .gn = g->gather_n, .gk = g->gather_k}
                       : (bsrc){.b = g->b, .ldb = g->ldb, .trans = g->trans_b};
  j.koff = g->koff;
  j.akoff = g->a_koff;
  j.st = g->store;
  j.a_mr = g->a_packed_mr;
  j.direct = g->b && !g->koff && !g->trans_b && g->M <= primc_gm_direct_rows(j.kr);
  return run_job(&j);
}
