/* codegen/cuda_gemm.c: f32 dot_general and conv as tiled GEMMs on CUDA. A block computes a BM x BN tile of
 * C = A B, staging BK-deep slices of A and B through shared memory. The products run on the SIMT cores (each
 * thread a TM x TN register block; two buffers, the next slice read into registers while the current one is
 * multiplied) or on the tensor cores (mma.sync, each warp a WM x WN tile; sm_80 and later, whose cp.async copies
 * global memory to shared memory without registers: a row's STAGES buffers keep STAGES - 1 slices in flight while
 * one is multiplied, since one slice's latency, not the tensor cores, bounded small tiles on two buffers; a row
 * without stages is staged through registers as the SIMT rows are). The tensor cores run TF32 under
 * --matmul-precision high, bf16 under medium or --autocast bf16 (f32 operands in shared memory, rounded to nearest
 * as the fragments are read: TF32 one value, bf16 a k pair to a register; or as staged through registers), and
 * wherever the operands are exact in a tensor core's type
 * (f16, bf16, TF32: widened from narrower floats, or such constants), whose products are then exact. A conv is
 * the implicit GEMM W[o][c,taps] x im2col(x)[c,taps][n,pixels], its im2col gathered while staging, its fused
 * epilogue (bias, residual, activation, clamp) applied at the store, as a dot's epilogue loop kernel is. A conv
 * with too few tiles to fill the GPU splits K: each split stores a partial tile, the last to finish (a counter per
 * tile) sums them in split order, so results do not depend on timing (a dot too, when forced). The tile row and split count are chosen
 * here, at compile time, by a wave model of the GPU (gemm_pick), and named in the kernel's comment with the
 * precision. */
#include "codegen/cuda_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define GPU_SMS 132       /* H100 / H200 multiprocessors: the wave model's GPU */
#define MAX_SPLITS 16
#define DOT_SPLIT_MAX_FLOATS (4 << 20) /* a dot's partial tiles in a __device__ array: 16 MB at most */

/* how a row multiplies: its kernel comment, its operand type (pc_pk_<type> packs a k16 fragment's pair), the warp's
 * mma (NULL: SIMT FMAs), whether a fragment register holds two 16-bit operands (k16), FMA/s of one multiprocessor */
static const struct gemm_kind {
  const char *what, *type, *mma;
  int half;
  double rate;
} kinds[CU_GEMM_KINDS] = {
    [CU_GEMM_SIMT] = {"f32 FMA", "f32", NULL, 0, 2.0e11},
    [CU_GEMM_TF32] = {"TF32 mma", "TF32", "pc_mma_tf32", 0, 1.5e12},
    [CU_GEMM_BF16] = {"bf16 mma", "bf16", "pc_mma_bf16", 1, 3.0e12},
    [CU_GEMM_F16] = {"f16 mma", "f16", "pc_mma_f16", 1, 3.0e12},
};

/* a tile row: SIMT (tm, tn: the thread's block, 4 or 8) or tensor cores (wm, wn: the warp's tile); stages: the
 * cp.async pipeline's shared buffers (sm_80 and later), or 0: two buffers staged through registers */
typedef struct gemm_tile {
  const char *name;
  int kind; /* CU_GEMM_* */
  int bm, bn, bk;
  int tm, tn;
  int wm, wn;
  int threads, stages;
  double eff; /* throughput at full occupancy, relative to the largest tile of its kind */
  int per_sm; /* blocks resident on one multiprocessor */
  int cand;   /* a candidate: run only when forced (PRIMC_CUDA_GEMM), until a GPU has timed it against the rest */
} gemm_tile;

/* the bf16 and f16 rows are the TF32 rows' tiles and warps on k16 fragments; depth times stages is what the 48 KB of
 * static shared memory holds (f32 operands); bench/gpu_results.md (2026-11-30) has the H200's times of both
 * pipelines */
static const gemm_tile tiles[] = {
    {"simt_128x128", CU_GEMM_SIMT, 128, 128, 8, 8, 8, 0, 0, 256, 0, 1.00, 2, 0},
    {"simt_64x64", CU_GEMM_SIMT, 64, 64, 8, 8, 8, 0, 0, 64, 0, 0.85, 8, 0},
    {"simt_32x32", CU_GEMM_SIMT, 32, 32, 8, 4, 4, 0, 0, 64, 0, 0.55, 12, 0},
    {"simt_64x64_cp4", CU_GEMM_SIMT, 64, 64, 8, 8, 8, 0, 0, 64, 4, 0.85, 8, 1},
    {"simt_32x32_cp4", CU_GEMM_SIMT, 32, 32, 8, 4, 4, 0, 0, 64, 4, 0.55, 12, 1},
    {"tf32_128x128", CU_GEMM_TF32, 128, 128, 16, 0, 0, 64, 32, 256, 0, 1.00, 2, 0},
    {"tf32_64x64", CU_GEMM_TF32, 64, 64, 16, 0, 0, 32, 32, 128, 4, 0.80, 4, 0},
    {"tf32_32x32", CU_GEMM_TF32, 32, 32, 32, 0, 0, 16, 16, 128, 4, 0.50, 4, 0},
    {"bf16_128x128", CU_GEMM_BF16, 128, 128, 16, 0, 0, 64, 32, 256, 2, 1.00, 2, 0},
    {"bf16_64x64", CU_GEMM_BF16, 64, 64, 16, 0, 0, 32, 32, 128, 5, 0.80, 4, 0},
    {"bf16_32x32", CU_GEMM_BF16, 32, 32, 32, 0, 0, 16, 16, 128, 4, 0.50, 4, 0},
    {"f16_128x128", CU_GEMM_F16, 128, 128, 16, 0, 0, 64, 32, 256, 2, 1.00, 2, 0},
    {"f16_64x64", CU_GEMM_F16, 64, 64, 16, 0, 0, 32, 32, 128, 5, 0.80, 4, 0},
    {"f16_32x32", CU_GEMM_F16, 32, 32, 32, 0, 0, 16, 16, 128, 4, 0.50, 4, 0},
};

/* shared memory rows' padding in words: conflict-free fragment reads (a TF32 k row, a k pair's two rows for bf16 and
 * f16), aligned float4 reads (SIMT) */
static int row_pad(const gemm_tile *t) { return !kinds[t->kind].mma ? 4 : kinds[t->kind].half ? 4 : 8; }
#define N_TILES ((int)(sizeof tiles / sizeof tiles[0]))

/* the problem a kernel renders: batch (dot batch or conv groups) of M x N x K */
typedef struct gemm {
  int64_t batch, M, N, K;
  const gemm_tile *t;
  int splits;
  int conv;
  /* dot: A(b, m, k) = A[b sb + m sm + k sk], B(b, k, n) = B[b sb + k sk + n sn] */
  int64_t a_sb, a_sm, a_sk, b_sb, b_sk, b_sn;
  /* conv, 2-D (1-D as height 1) */
  int64_t cin, h, w, o, og, cg, kh, kw, oh, ow, sh, sw, ph, pw, dh, dw;
  int epi;  /* the conv's epilogue words are applied here (a4 y, a5 bias, a6 res) */
  const int64_t *ew; /* the epilogue words */
  /* dot: the loop kernel that reads its result element for element (kir_rewrites.c's dot-epilogues), run at the
   * store with the result in a register; its buffers follow the call's in the signature */
  const kir_kernel *loop_epi;
  int result_buf;
  int exact;     /* the row's type holds both operands exactly (their products are exact), not by the precision */
  int round_bf16;/* SIMT rows staging the operands rounded to bf16 (bf16 asked for before sm_80: the same products) */
  /* how the staging threads walk the operands: A along k when its k stride is 1 (a conv's weight rows always),
   * else along m; B along n (conv columns are output pixels, dot columns usually contiguous), else along k */
  int a_kfast, b_nfast;
} gemm;

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* the K of one split, whole slices of t's depth */
static int64_t k_per_split(const gemm_tile *t, int64_t K, int splits) { return cdiv(cdiv(K, splits), t->bk) * t->bk; }

/* seconds, roughly: rounds of concurrent blocks at the tile's rate, and a split's partial sums through memory */
static double gemm_time(const gemm_tile *t, const gemm *g, int splits) {
  int64_t kc = k_per_split(t, g->K, splits);
  int64_t blocks = g->batch * cdiv(g->M, t->bm) * cdiv(g->N, t->bn) * splits;
  int64_t conc = cdiv(blocks, GPU_SMS);
  if (conc > t->per_sm) conc = t->per_sm;
  double occ = conc * t->threads / 512.0, rate = kinds[t->kind].rate;
  if (occ > 1) occ = 1;
  double s = (double)cdiv(blocks, GPU_SMS * conc) * conc * t->bm * t->bn * kc / (t->eff * occ * rate);
  if (splits > 1) s += 8.0 * splits * g->batch * g->M * g->N / 3e12 + 2e-6;
  return s;
}

/* a conv's partial tiles go to its call scratch (scratch_floats of it); a dot's to an array of its module, and only
 * when forced (a candidate until a GPU has timed it: dots have no call scratch) */
static int split_fits(const gemm_tile *t, const gemm *g, int s, int64_t scratch_floats, int forced) {
  int64_t tiles_mn = g->batch * cdiv(g->M, t->bm) * cdiv(g->N, t->bn), floats = s * tiles_mn * t->bm * t->bn;
  if (s == 1) return 1;
  if (s > MAX_SPLITS || g->K < s * 4 * t->bk) return 0;
  return g->conv ? floats <= scratch_floats : forced && floats <= DOT_SPLIT_MAX_FLOATS;
}

/* the fastest (tile, splits) of the precision's rows by the model; splits only where scratch holds the partials.
 * PRIMC_CUDA_GEMM=NAME[:SPLITS] in the environment forces a row of the precision (tests run every row), and
 * PRIMC_CUDA_GEMM=direct the kernels before the tiled ones (cuda_calls.c's), for a comparison. */
static void gemm_pick(gemm *g, int kind, int64_t scratch_floats, int sm, int fixed) {
  double best = INFINITY;
  gemm big = *g; /* fixed (run-time dims): every size of the range picks alike, the row for a large problem */
  big.batch = 1, big.M = big.N = big.K = 4096;
  const char *force = getenv("PRIMC_CUDA_GEMM");
  for (int i = 0; i < N_TILES; i++) {
    const gemm_tile *t = &tiles[i];
    size_t len = strlen(t->name);
    if (t->kind != kind || (t->stages && sm < 80) || (t->stages && g->round_bf16)) continue; /* cp.async: sm_80 */
    if (force && *force && !strncmp(force, t->name, len) && (!force[len] || force[len] == ':')) {
      int s = force[len] ? atoi(force + len + 1) : 1;
      g->t = t, g->splits = s >= 1 && !fixed && split_fits(t, g, s, scratch_floats, 1) ? s : 1;
      break;
    }
    if (t->cand) continue;
    for (int s = 1; split_fits(t, g, s, scratch_floats, 0) && (s == 1 || !fixed); s *= 2) {
      double c = gemm_time(t, fixed ? &big : g, s);
      if (c < best * 0.97) best = c, g->t = t, g->splits = s;
    }
  }
  g->a_kfast = g->conv || g->a_sk == 1;
  g->b_nfast = g->conv || g->b_sn == 1 || g->b_sk != 1;
}

const char *cu_gemm_tiles_invalid(int kind, int i) {
  int n = 0;
  for (int j = 0; j < N_TILES; j++) {
    const gemm_tile *t = &tiles[j];
    if (t->kind != kind || n++ != i) continue;
    int T = t->threads, ok = T % 32 == 0 && T % t->bm == 0 && T % t->bn == 0 && T % t->bk == 0 &&
                             (t->bm * t->bk) % T == 0 && (t->bk * t->bn) % T == 0 && T / t->bn <= t->bk && T / t->bm <= t->bk;
    int kstep = kinds[kind].half ? 16 : 8; /* the mma's k */
    if (kinds[kind].mma)
      ok = ok && t->bk % kstep == 0 && t->wm % 16 == 0 && t->wn % 8 == 0 && (t->bm / t->wm) * (t->bn / t->wn) * 32 == T;
    else ok = ok && (t->tm == 4 || t->tm == 8) && (t->tn == 4 || t->tn == 8) && (t->bm / t->tm) * (t->bn / t->tn) == T;
    /* the stages of both f32 tiles, rows padded, in the 48 KB of static shared memory */
    int bufs = t->stages ? t->stages : 2;
    ok = ok && (t->stages || !kinds[kind].half) && t->stages != 1 &&
         bufs * t->bk * (t->bm + t->bn + 2 * row_pad(t)) * 4 <= 48 * 1024;
    return ok ? "" : t->name;
  }
  return NULL;
}

const char *cu_gemm_tile_name(int kind, int i) {
  for (int j = 0, n = 0; j < N_TILES; j++)
    if (tiles[j].kind == kind && n++ == i) return tiles[j].name;
  return NULL;
}

/* ---------------------------------------------------------------- rendering */

/* an unrolled counted loop's head: "for (int V = 0; V < N; V++)" then rest (" {", or a statement) */
static void put_for(cctx *C, int ind, const char *v, int n, const char *rest) {
  cu_line(C, ind, "#pragma unroll");
  cu_line(C, ind, "for (int %s = 0; %s < %d; %s++)%s", v, v, n, v, rest);
}

/* one element of the slice: into register reg (ra[i], rb[i]) or, async, by cp.async into shared memory at dst;
 * zero where !ok (outside the operands, a conv's padding), its address then not read */
static void put_elem(cctx *C, int ind, int async, const char *dst, const char *reg, const char *addr, const char *base) {
  if (async) cu_line(C, ind, "pc_cp4(&%s, ok ? %s : %s, ok);", dst, addr, base);
  else cu_line(C, ind, "%s = ok ? *(%s) : 0.0f;", reg, addr);
}

/* the slice at k0 of A and B, the threads walking A along k when its k stride is 1 (a conv's weight rows always),
 * else along m, and B along n (conv columns are output pixels, dot columns usually contiguous), else along k:
 * into registers (the SIMT rows and rows without stages), or by cp.async into shared buffer `nb` */
static void put_fetch(cctx *C, const gemm *g, int ind, int async) {
  const gemm_tile *t = g->t;
  int T = t->threads, la = t->bm * t->bk / T, lb = t->bk * t->bn / T;
  char addr[200];
  put_for(C, ind, "i", la, " {");
  if (g->a_kfast) cu_line(C, ind + 1, "const int mm = tid / %d + i * %d, kk = tid %% %d;", t->bk, T / t->bk, t->bk);
  else cu_line(C, ind + 1, "const int kk = tid / %d + i * %d, mm = tid %% %d;", t->bm, T / t->bm, t->bm);
  cu_line(C, ind + 1, "const long long m = m0 + mm, k = k0 + kk;");
  cu_line(C, ind + 1, "const bool ok = m < %lldLL && k < kend;", (long long)g->M);
  if (g->conv) snprintf(addr, sizeof addr, "A + (bt * %lldLL + m) * %lldLL + k", (long long)g->og, (long long)g->K);
  else
    snprintf(addr, sizeof addr, "A + bt * %lldLL + m * %lldLL + k * %lldLL", (long long)g->a_sb, (long long)g->a_sm,
             (long long)g->a_sk);
  put_elem(C, ind + 1, async, "As[nb][kk][mm]", "ra[i]", addr, "A");
  cu_line(C, ind, "}");
  put_for(C, ind, "i", lb, " {");
  if (g->b_nfast) cu_line(C, ind + 1, "const int kk = tid / %d + i * %d, nn = tid %% %d;", t->bn, T / t->bn, t->bn);
  else cu_line(C, ind + 1, "const int nn = tid / %d + i * %d, kk = tid %% %d;", t->bk, T / t->bk, t->bk);
  cu_line(C, ind + 1, "const long long k = k0 + kk;");
  if (g->conv) { /* the column's pixel was decoded once per tile: xb, ih0, iw0, ncol_ok */
    long long taps = g->kh * g->kw;
    cu_line(C, ind + 1, "const long long ci = k / %lldLL, r = k %% %lldLL;", taps, taps);
    cu_line(C, ind + 1, "const long long ih = ih0 + r / %lldLL * %lldLL, iw = iw0 + r %% %lldLL * %lldLL;", (long long)g->kw,
            (long long)g->dh, (long long)g->kw, (long long)g->dw);
    cu_line(C, ind + 1, "const bool ok = ncol_ok && k < kend && ih >= 0 && ih < %lldLL && iw >= 0 && iw < %lldLL;", (long long)g->h,
            (long long)g->w);
    snprintf(addr, sizeof addr, "xb + (ci * %lldLL + ih) * %lldLL + iw", (long long)g->h, (long long)g->w);
    put_elem(C, ind + 1, async, "Bs[nb][kk][nn]", "rb[i]", addr, "X");
  } else {
    cu_line(C, ind + 1, "const long long n = n0 + nn;");
    cu_line(C, ind + 1, "const bool ok = n < %lldLL && k < kend;", (long long)g->N);
    snprintf(addr, sizeof addr, "Bm + bt * %lldLL + k * %lldLL + n * %lldLL", (long long)g->b_sb, (long long)g->b_sk,
             (long long)g->b_sn);
    put_elem(C, ind + 1, async, "Bs[nb][kk][nn]", "rb[i]", addr, "Bm");
  }
  cu_line(C, ind, "}");
}

/* the registers into shared buffer `nb`: f32 (SIMT rows, rounded to bf16 where asked for), TF32 values (TF32 rows
 * staged through registers) */
static void put_stores(cctx *C, const gemm *g, int ind) {
  const gemm_tile *t = g->t;
  int T = t->threads, la = t->bm * t->bk / T, lb = t->bk * t->bn / T;
  const char *cv = g->round_bf16 ? "pc_rbf" : t->kind == CU_GEMM_TF32 ? "pc_tf32" : "";
  put_for(C, ind, "i", la, " {");
  if (g->a_kfast) cu_line(C, ind + 1, "const int kk = tid %% %d, mm = tid / %d + i * %d;", t->bk, t->bk, T / t->bk);
  else cu_line(C, ind + 1, "const int kk = tid / %d + i * %d, mm = tid %% %d;", t->bm, T / t->bm, t->bm);
  cu_line(C, ind + 1, "As[nb][kk][mm] = %s(ra[i]);", cv);
  cu_line(C, ind, "}");
  put_for(C, ind, "i", lb, " {");
  if (g->b_nfast) cu_line(C, ind + 1, "const int kk = tid / %d + i * %d, nn = tid %% %d;", t->bn, T / t->bn, t->bn);
  else cu_line(C, ind + 1, "const int kk = tid %% %d, nn = tid / %d + i * %d;", t->bk, t->bk, T / t->bk);
  cu_line(C, ind + 1, "Bs[nb][kk][nn] = %s(rb[i]);", cv);
  cu_line(C, ind, "}");
}

/* one fragment register of X (As or Bs) at k row kx, tile row or column ix: one TF32 value (m16n8k8), or the k pair
 * kx, kx + 1 as two 16-bit values, the lower k in the low half (m16n8k16 for bf16 and f16) */
static void put_frag(const gemm *g, char *buf, size_t n, const char *x, const char *kx, const char *ix) {
  const struct gemm_kind *k = &kinds[g->t->kind];
  if (k->half)
    snprintf(buf, n, "pc_pk_%s(%s[cb][%s][%s], %s[cb][%s + 1][%s])", k->type, x, kx, ix, x, kx, ix);
  else if (g->t->stages) snprintf(buf, n, "__float_as_uint(pc_tf32(%s[cb][%s][%s]))", x, kx, ix);
  else snprintf(buf, n, "__float_as_uint(%s[cb][%s][%s])", x, kx, ix); /* rounded as staged */
}

/* the tensor-core rows' steps through a BK slice: per step a warp's fragments by the PTX ISA's layouts (A: rows g
 * and g + 8, k rows t and t + 4 (TF32) or pairs 2t and 2t + 8 (k16); B: column g, the same k) */
static void put_compute_mma(cctx *C, const gemm *g, int ind) {
  const gemm_tile *t = g->t;
  const struct gemm_kind *k = &kinds[t->kind];
  int mt = t->wm / 16, nt = t->wn / 8, kstep = k->half ? 16 : 8;
  char f0[160], f1[160], f2[160], f3[160];
  put_for(C, ind, "s", t->bk / kstep, " {");
  cu_line(C, ind + 1, "const int ka = s * %d + %s, kb = ka + %d;", kstep, k->half ? "2 * tq" : "tq", kstep / 2);
  cu_line(C, ind + 1, "unsigned af[%d][4], bf[%d][2];", mt, nt);
  put_for(C, ind + 1, "i", mt, " {");
  cu_line(C, ind + 2, "const int r = wm0 + i * 16 + gq;");
  put_frag(g, f0, sizeof f0, "As", "ka", "r"), put_frag(g, f1, sizeof f1, "As", "ka", "r + 8");
  cu_line(C, ind + 2, "af[i][0] = %s, af[i][1] = %s;", f0, f1);
  put_frag(g, f2, sizeof f2, "As", "kb", "r"), put_frag(g, f3, sizeof f3, "As", "kb", "r + 8");
  cu_line(C, ind + 2, "af[i][2] = %s, af[i][3] = %s;", f2, f3);
  cu_line(C, ind + 1, "}");
  put_for(C, ind + 1, "j", nt, " {");
  cu_line(C, ind + 2, "const int c = wn0 + j * 8 + gq;");
  put_frag(g, f0, sizeof f0, "Bs", "ka", "c"), put_frag(g, f1, sizeof f1, "Bs", "kb", "c");
  cu_line(C, ind + 2, "bf[j][0] = %s, bf[j][1] = %s;", f0, f1);
  cu_line(C, ind + 1, "}");
  put_for(C, ind + 1, "i", mt, "");
  put_for(C, ind + 2, "j", nt, "");
  cu_line(C, ind + 3, "%s<0>(acc[i][j], af[i], bf[j]);", k->mma);
  cu_line(C, ind, "}");
}

/* one BK slice of shared buffer `cb` into the accumulators */
static void put_compute(cctx *C, const gemm *g, int ind) {
  const gemm_tile *t = g->t;
  if (kinds[t->kind].mma) {
    put_compute_mma(C, g, ind);
    return;
  }
  int gm = t->tm / 4, gn = t->tn / 4;
  put_for(C, ind, "kk", t->bk, " {");
  cu_line(C, ind + 1, "float a[%d], b[%d];", t->tm, t->tn);
  for (int q = 0; q < gm; q++)
    cu_line(C, ind + 1, "*(float4 *)&a[%d] = *(const float4 *)&As[cb][kk][%d + ty * 4];", 4 * q, q * t->bm / gm);
  for (int q = 0; q < gn; q++)
    cu_line(C, ind + 1, "*(float4 *)&b[%d] = *(const float4 *)&Bs[cb][kk][%d + tx * 4];", 4 * q, q * t->bn / gn);
  put_for(C, ind + 1, "i", t->tm, "");
  put_for(C, ind + 2, "j", t->tn, " acc[i][j] = fmaf(a[i], b[j], acc[i][j]);");
  cu_line(C, ind, "}");
}

/* for each accumulator: its tile row mm, column nn and value v, as a loop nest ending in an open block */
static int put_acc_loop(cctx *C, const gemm *g, int ind) {
  const gemm_tile *t = g->t;
  if (!kinds[t->kind].mma) {
    put_for(C, ind, "i", t->tm, "");
    put_for(C, ind + 1, "j", t->tn, " {");
    cu_line(C, ind + 2, "const int mm = i / 4 * %d + ty * 4 + i %% 4, nn = j / 4 * %d + tx * 4 + j %% 4;", t->bm / (t->tm / 4),
            t->bn / (t->tn / 4));
    cu_line(C, ind + 2, "const float v = acc[i][j];");
    return 2;
  }
  put_for(C, ind, "i", t->wm / 16, "");
  put_for(C, ind + 1, "j", t->wn / 8, "");
  put_for(C, ind + 2, "e", 4, " {");
  cu_line(C, ind + 3, "const int mm = wm0 + i * 16 + gq + (e >> 1) * 8, nn = wn0 + j * 8 + 2 * tq + (e & 1);");
  cu_line(C, ind + 3, "const float v = acc[i][j][e];");
  return 3;
}

/* the conv's epilogue on s_ (channel oc, output element idx), stored to y (a4) */
void cu_put_conv_epi(cctx *C, const int64_t *w, int ind) {
  double lo, hi;
  memcpy(&lo, &w[4], 8);
  memcpy(&hi, &w[5], 8);
  if (w[6] == PRIMC_ACT_RQ) { /* exact integer sums requantized, each step one f32 operation as on the CPU */
    const int64_t *r = w + PRIMC_CONV_EPI_RQ;
    double sc, div, zp;
    memcpy(&sc, &r[2], 8);
    memcpy(&div, &r[3], 8);
    memcpy(&zp, &r[4], 8);
    if (r[1] >= 0)
      cu_line(C, ind, "s_ = __fmul_rn(truncf(s_), ((const float *)a6)[%lldLL + oc * %lldLL]);", (long long)r[0], (long long)r[1]);
    else
      cu_line(C, ind, "s_ = __fmul_rn(truncf(s_), (float)(%.17g));", sc);
    if (w[2] >= 0)
      cu_line(C, ind, "s_ = __fadd_rn(s_, ((const float *)a5)[%lldLL + oc * %lldLL]);", (long long)w[1], (long long)w[2]);
    cu_line(C, ind, "s_ = __fadd_rn(rintf(__fdiv_rn(s_, (float)(%.17g))), (float)(%.17g));", div, zp);
  } else {
    if (w[2] >= 0) cu_line(C, ind, "s_ += ((const float *)a5)[%lldLL + oc * %lldLL];", (long long)w[1], (long long)w[2]);
    if (w[3]) cu_line(C, ind, "s_ += ((const float *)a6)[idx];");
  }
  if (w[6] == PRIMC_ACT_SILU) cu_line(C, ind, "s_ = s_ * (1.0f / (1.0f + expf(-s_)));");
  if (w[6] == PRIMC_ACT_GELU) cu_line(C, ind, "s_ = s_ * 0.5f * (1.0f + erff(s_ * 0.707106781186547524f));");
  if (w[6] == PRIMC_ACT_F16) cu_line(C, ind, "s_ = pc_rh(s_);");
  if (w[6] == PRIMC_ACT_BF16) cu_line(C, ind, "s_ = pc_rbf(s_);");
  if (lo > -INFINITY) cu_line(C, ind, "s_ = pc_max(s_, (float)(%.17g));", lo);
  if (hi < INFINITY) cu_line(C, ind, "s_ = pc_min(s_, (float)(%.17g));", hi);
  cu_line(C, ind, "((float *)a4)[idx] = s_;");
}

/* the final value s_ of row m, column n (both in range) to the output */
static void put_final_store(cctx *C, const gemm *g, int ind) {
  if (g->loop_epi) { /* its two loops are the dot's rows and columns */
    cu_line(C, ind, "{");
    cu_line(C, ind + 1, "const long long i0 = m, i1 = n;");
    C->subst = "s_", C->subst_buf = g->result_buf;
    cu_emit_stores(C, g->loop_epi, ind + 1);
    C->subst = NULL;
    cu_line(C, ind, "}");
    return;
  }
  if (!g->conv) {
    cu_line(C, ind, "out[bt * %lldLL + m * %lldLL + n] = s_;", (long long)(g->M * g->N), (long long)g->N);
    return;
  }
  long long P = g->oh * g->ow;
  cu_line(C, ind, "const long long oc = bt * %lldLL + m, idx = (n / %lldLL * %lldLL + oc) * %lldLL + n %% %lldLL;",
          (long long)g->og, P, (long long)g->o, P, P);
  if (g->epi) cu_put_conv_epi(C, g->ew, ind);
  else cu_line(C, ind, "out[idx] = s_;");
}

static void put_epilogue(cctx *C, const gemm *g, int ind) {
  const gemm_tile *t = g->t;
  if (g->splits == 1) {
    int d = put_acc_loop(C, g, ind);
    cu_line(C, ind + d, "const long long m = m0 + mm, n = n0 + nn;");
    cu_line(C, ind + d, "if (m >= %lldLL || n >= %lldLL) continue;", (long long)g->M, (long long)g->N);
    cu_line(C, ind + d, "float s_ = v;");
    put_final_store(C, g, ind + d);
    cu_line(C, ind + d - 1, "}");
    return;
  }
  /* this split's tile to its slot of the scratch; the last split of the tile to arrive sums all in order */
  int d = put_acc_loop(C, g, ind);
  cu_line(C, ind + d, "part[((tmn * %dLL + sp) * %d + mm) * %d + nn] = v;", g->splits, t->bm, t->bn);
  cu_line(C, ind + d - 1, "}");
  cu_line(C, ind, "__threadfence();");
  cu_line(C, ind, "__syncthreads();");
  cu_line(C, ind, "if (tid == 0) last_ = atomicAdd(&%s_count[tmn], 1u) == %du;", C->name, g->splits - 1);
  cu_line(C, ind, "__syncthreads();");
  cu_line(C, ind, "if (last_) {");
  cu_line(C, ind + 1, "__threadfence();");
  cu_line(C, ind + 1, "for (int e = tid; e < %d; e += %d) {", t->bm * t->bn, t->threads);
  cu_line(C, ind + 2, "const int mm = e / %d, nn = e %% %d;", t->bn, t->bn);
  cu_line(C, ind + 2, "const long long m = m0 + mm, n = n0 + nn;");
  cu_line(C, ind + 2, "if (m >= %lldLL || n >= %lldLL) continue;", (long long)g->M, (long long)g->N);
  cu_line(C, ind + 2, "float s_ = 0.0f;");
  cu_line(C, ind + 2, "for (int q = 0; q < %d; q++) s_ += __ldcg(&part[((tmn * %dLL + q) * %d + mm) * %d + nn]);", g->splits,
          g->splits, t->bm, t->bn);
  put_final_store(C, g, ind + 2);
  cu_line(C, ind + 1, "}");
  cu_line(C, ind + 1, "if (tid == 0) %s_count[tmn] = 0u;", C->name);
  cu_line(C, ind, "}");
  cu_line(C, ind, "__syncthreads();");
}

/* the cp.async rows' k loop: STAGES - 1 slices copied ahead; each step waits for its slice (and for every warp to
 * be done with the buffer the next copy takes), starts that copy, multiplies */
static void put_async_loop(cctx *C, const gemm *g) {
  const gemm_tile *t = g->t;
  int S = t->stages;
  cu_line(C, 2, "for (int nb = 0; nb < %d; nb++) {", S - 1);
  cu_line(C, 3, "const long long k0 = kbeg + nb * %dLL;", t->bk);
  cu_line(C, 3, "if (k0 < kend) {");
  put_fetch(C, g, 4, 1);
  cu_line(C, 3, "}");
  cu_line(C, 3, "pc_cp_commit();");
  cu_line(C, 2, "}");
  cu_line(C, 2, "int cb = 0;");
  cu_line(C, 2, "for (long long kc = kbeg; kc < kend; kc += %d) {", t->bk);
  cu_line(C, 3, "pc_cp_wait<%d>();", S - 2);
  cu_line(C, 3, "__syncthreads();");
  cu_line(C, 3, "{");
  cu_line(C, 4, "const long long k0 = kc + %dLL;", (S - 1) * t->bk);
  cu_line(C, 4, "const int nb = cb == 0 ? %d : cb - 1;", S - 1);
  cu_line(C, 4, "if (k0 < kend) {");
  put_fetch(C, g, 5, 1);
  cu_line(C, 4, "}");
  cu_line(C, 4, "pc_cp_commit();");
  cu_line(C, 3, "}");
  put_compute(C, g, 3);
  cu_line(C, 3, "cb = cb == %d ? 0 : cb + 1;", S - 1);
  cu_line(C, 2, "}");
  cu_line(C, 2, "pc_cp_wait<0>();");
  cu_line(C, 2, "__syncthreads();");
}

/* the k loop of the rows without stages: two buffers, the next slice read into registers while the current one is
 * multiplied, then stored */
static void put_register_loop(cctx *C, const gemm *g) {
  const gemm_tile *t = g->t;
  cu_line(C, 2, "float ra[%d], rb[%d];", t->bm * t->bk / t->threads, t->bk * t->bn / t->threads);
  cu_line(C, 2, "{");
  cu_line(C, 3, "const long long k0 = kbeg;");
  put_fetch(C, g, 3, 0);
  cu_line(C, 3, "const int nb = 0;");
  put_stores(C, g, 3);
  cu_line(C, 2, "}");
  cu_line(C, 2, "__syncthreads();");
  cu_line(C, 2, "int cb = 0;");
  cu_line(C, 2, "for (long long kc = kbeg; kc < kend; kc += %d) {", t->bk);
  cu_line(C, 3, "const bool more = kc + %d < kend;", t->bk);
  cu_line(C, 3, "if (more) {");
  cu_line(C, 4, "const long long k0 = kc + %d;", t->bk);
  put_fetch(C, g, 4, 0);
  cu_line(C, 3, "}");
  put_compute(C, g, 3);
  cu_line(C, 3, "if (more) {");
  cu_line(C, 4, "const int nb = cb ^ 1;");
  put_stores(C, g, 4);
  cu_line(C, 3, "}");
  cu_line(C, 3, "__syncthreads();");
  cu_line(C, 3, "cb ^= 1;");
  cu_line(C, 2, "}");
}

static void render_gemm(cctx *C, const kir_kernel *k, const gemm *g) {
  const gemm_tile *t = g->t;
  int64_t tmn = g->batch * cdiv(g->M, t->bm) * cdiv(g->N, t->bn), total = tmn * g->splits;
  const int64_t work[4] = {g->batch, g->M, g->N, g->splits}, per[4] = {1, t->bm, t->bn, 1};
  const struct gemm_kind *kd = &kinds[t->kind];
  int pa = row_pad(t), S = t->stages ? t->stages : 2;
  fprintf(C->f, "/* gemm %s (%s%s%s%s): %lld x [%lld x %lld x %lld], split %d */\n", t->name, kd->what,
          g->exact ? ", " : g->round_bf16 ? ", operands rounded to bf16" : "", g->exact ? kd->type : "",
          g->exact ? "-exact operands" : "", (long long)g->batch, (long long)g->M, (long long)g->N, (long long)g->K, g->splits);
  if (g->splits > 1) fprintf(C->f, "__device__ unsigned %s_count[%lld];\n", C->name, (long long)tmn);
  if (g->splits > 1 && !g->conv)
    fprintf(C->f, "__device__ float %s_part[%lld];\n", C->name, (long long)(total * t->bm * t->bn));
  cu_call_signature_with(C, k, t->threads, cu_grid(C, 4, work, per), g->loop_epi, g->result_buf);
  /* tile counts and the K of a split as expressions of M, N and K, which run-time dims replace (cuda_dynamic.c) */
  cu_line(C, 1, "const long long tm_ = (%lldLL + %d) / %d, tn_ = (%lldLL + %d) / %d;", (long long)g->M, t->bm - 1, t->bm,
          (long long)g->N, t->bn - 1, t->bn);
  cu_line(C, 1, "const long long kc_ = ((%lldLL + %d) / %d + %d) / %d * %d;", (long long)g->K, g->splits - 1, g->splits,
          t->bk - 1, t->bk, t->bk);
  cu_line(C, 1, "__shared__ __align__(16) float As[%d][%d][%d], Bs[%d][%d][%d];", S, t->bk, t->bm + pa, S, t->bk, t->bn + pa);
  if (g->splits > 1) cu_line(C, 1, "__shared__ bool last_;");
  if (g->conv) cu_line(C, 1, "const float *A = (const float *)a2, *X = (const float *)a1;");
  else cu_line(C, 1, "const float *A = (const float *)a1, *Bm = (const float *)a2;");
  cu_line(C, 1, "float *out = (float *)a0;");
  if (g->splits > 1 && g->conv) cu_line(C, 1, "float *part = (float *)a3;");
  if (g->splits > 1 && !g->conv) cu_line(C, 1, "float *part = %s_part;", C->name);
  cu_line(C, 1, "const int tid = threadIdx.x;");
  if (kd->mma) {
    cu_line(C, 1, "const int lane = tid & 31, wid = tid >> 5, gq = lane >> 2, tq = lane & 3;");
    cu_line(C, 1, "const int wm0 = wid / %d * %d, wn0 = wid %% %d * %d;", t->bn / t->wn, t->wm, t->bn / t->wn, t->wn);
  } else {
    cu_line(C, 1, "const int tx = tid %% %d, ty = tid / %d;", t->bn / t->tn, t->bn / t->tn);
  }
  cu_line(C, 1, "for (long long tile = blockIdx.x; tile < %lldLL * tm_ * tn_ * %d; tile += gridDim.x) {",
          (long long)g->batch, g->splits);
  cu_line(C, 2, "const long long sp = tile %% %d, tmn = tile / %d;", g->splits, g->splits);
  cu_line(C, 2, "const long long bt = tmn / (tm_ * tn_), m0 = tmn %% (tm_ * tn_) / tn_ * %d, n0 = tmn %% tn_ * %d;", t->bm,
          t->bn);
  cu_line(C, 2, "const long long kbeg = sp * kc_, kend = kbeg + kc_ < %lldLL ? kbeg + kc_ : %lldLL;", (long long)g->K,
          (long long)g->K);
  cu_line(C, 2, "(void)sp;");
  if (g->conv) { /* this thread's B column: one output pixel, decoded once per tile */
    long long P = g->oh * g->ow;
    cu_line(C, 2, "const long long ncol = n0 + tid %% %d, img = ncol / %lldLL, pix = ncol %% %lldLL;", t->bn, P, P);
    cu_line(C, 2, "const bool ncol_ok = ncol < %lldLL;", (long long)g->N);
    cu_line(C, 2, "const long long ih0 = pix / %lldLL * %lldLL - %lldLL, iw0 = pix %% %lldLL * %lldLL - %lldLL;", (long long)g->ow,
            (long long)g->sh, (long long)g->ph, (long long)g->ow, (long long)g->sw, (long long)g->pw);
    cu_line(C, 2, "const float *xb = X + (img * %lldLL + bt * %lldLL) * %lldLL;", (long long)g->cin, (long long)g->cg,
            (long long)(g->h * g->w));
  }
  if (kd->mma) cu_line(C, 2, "float acc[%d][%d][4] = {};", t->wm / 16, t->wn / 8);
  else cu_line(C, 2, "float acc[%d][%d] = {};", t->tm, t->tn);
  if (t->stages) put_async_loop(C, g);
  else put_register_loop(C, g);
  put_epilogue(C, g, 2);
  cu_line(C, 1, "}");
  fprintf(C->f, "}\n");
}

/* the tensor cores' operand types that hold a value exactly */
enum { EX_TF32 = 1, EX_BF16 = 2, EX_F16 = 4 };

/* what holds every value of a narrow float type exactly: f16 and the small f8 / f4 formats fit in f16, bf16 and
 * TF32; f8e8m0's powers of two from 2^-127 in bf16 and TF32 (f32's exponent range) */
static const struct {
  pc_dtype dt;
  int exact;
} narrow_exact[] = {
    {PC_f16, EX_TF32 | EX_F16},  {PC_bf16, EX_TF32 | EX_BF16}, {PC_f8e4m3fn, EX_TF32 | EX_BF16 | EX_F16},
    {PC_f8e4m3fnuz, EX_TF32 | EX_BF16 | EX_F16}, {PC_f8e5m2, EX_TF32 | EX_BF16 | EX_F16},
    {PC_f8e5m2fnuz, EX_TF32 | EX_BF16 | EX_F16}, {PC_f4e2m1, EX_TF32 | EX_BF16 | EX_F16}, {PC_f8e8m0, EX_TF32 | EX_BF16},
};

/* f32 bits u is a finite value f16 holds: zero, or 2^e (1 + m) with e in f16's range and m's bits within f16's
 * (fewer below 2^-14, where f16's spacing stays 2^-24) */
static int f16_holds(uint32_t u) {
  int e = (int)(u >> 23 & 0xff) - 127;
  if (!(u & 0x7fffffffu)) return 1;
  if (e < -24 || e > 15) return 0;
  int tz = e < -14 ? -1 - e : 13; /* low mantissa bits that must be 0 */
  return !(u & ((1u << tz) - 1u));
}

/* EX_* for the types that hold every value of v exactly: converted from a narrower float (a narrow model widened
 * by passes/widen.c, --autocast fp16's rounding), or a constant all of whose elements they hold, through
 * movements of it */
static int exact_types(const pc_value *v) {
  for (int hops = 0; hops < 4 && v->producer; hops++) {
    const pc_node *p = v->producer;
    if (p->op == PC_OP_convert_element_type)
      for (size_t i = 0; i < sizeof narrow_exact / sizeof *narrow_exact; i++)
        if (narrow_exact[i].dt == p->in[0]->type.dtype) return narrow_exact[i].exact;
    if (p->op != PC_OP_reshape && p->op != PC_OP_transpose && p->op != PC_OP_broadcast_in_dim) break;
    v = p->in[0];
  }
  const uint32_t *u = pc_const_data(v);
  int64_t n = pc_type_numel(&v->type);
  if (!u || v->type.dtype != PC_f32 || n < 0) return 0;
  int ex = EX_TF32 | EX_BF16 | EX_F16;
  for (int64_t i = 0; i < n && ex; i++) {
    if (u[i] & 0x1fffu) ex &= ~EX_TF32;
    if (u[i] & 0xffffu) ex &= ~EX_BF16;
    if (!f16_holds(u[i])) ex &= ~EX_F16;
  }
  return ex;
}

/* the target's compute capability x 10 (pc_cuda_sm's; 0 in the program: sm_90) */
static int target_sm(const cctx *C) { return C->p->gpu_sm ? C->p->gpu_sm : 90; }

/* The rows' kind. Exact operands first: f16 or bf16 mma when both operands are values of that type (exact
 * products at twice TF32's rate, only the f32 sums' order differs from the SIMT rows); then what was asked for:
 * bf16 mma with the operands rounded under --matmul-precision medium or --autocast bf16, TF32 under high; then
 * TF32 where both operands are TF32 values; else SIMT. Tensor cores need sm_80: before, the SIMT rows, with the
 * operands rounded to bf16 where bf16 was asked for (the same products, in f32 FMAs). */
static int kind_of(cctx *C, const kir_kernel *k, gemm *g) {
  const pc_node *n = k->n_nodes ? k->nodes[0] : NULL;
  int ex = n && n->n_in >= 2 ? exact_types(n->in[0]) & exact_types(n->in[1]) : 0;
  int bf16 = C->g->autocast == PC_AUTOCAST_BF16 || C->g->matmul_precision == PC_MATMUL_MEDIUM;
  g->exact = g->round_bf16 = 0;
  if (target_sm(C) < 80) return g->round_bf16 = bf16 && !(ex & EX_BF16), CU_GEMM_SIMT;
  if (ex & EX_F16) return g->exact = 1, CU_GEMM_F16;
  if (ex & EX_BF16) return g->exact = 1, CU_GEMM_BF16;
  if (bf16) return CU_GEMM_BF16;
  if (C->g->matmul_precision == PC_MATMUL_HIGH) return CU_GEMM_TF32;
  if (ex & EX_TF32) return g->exact = 1, CU_GEMM_TF32;
  return CU_GEMM_SIMT;
}

/* PRIMC_CUDA_GEMM=direct: the kernels of before (a dot's 16 x 16 tile, a conv's thread per output), to compare */
static int direct_asked(void) {
  const char *f = getenv("PRIMC_CUDA_GEMM");
  return f && !strcmp(f, "direct");
}

int cu_gemm_dot(cctx *C, const kir_kernel *k) {
  const int64_t *q = k->params;
  if (q[0] != PC_f32 || q[2] < 1 || q[3] < 1 || q[4] < 1 || direct_asked()) return 0;
  gemm g = {.batch = q[1], .M = q[2], .N = q[3], .K = q[4], .a_sb = q[5], .a_sm = q[6], .a_sk = q[7], .b_sb = q[8],
            .b_sk = q[9], .b_sn = q[10], .result_buf = k->args[0]};
  const kir_kernel *e = k->has_epilogue && !k->epi_in_call ? &C->p->kernels[k->epilogue] : NULL;
  /* blocks store while others still read A and B: the epilogue must not write over them */
  int fits = e && k->epilogue > C->idx && e->kind == KK_LOOP && e->n_loops == 2 && g.batch == 1 && cu_loop_supported(e);
  for (int s = 0; fits && s < e->n_stores; s++)
    fits = !kir_bufs_overlap(C->p, e->stores[s].buf, k->args[1]) && !kir_bufs_overlap(C->p, e->stores[s].buf, k->args[2]);
  if (fits) g.loop_epi = e, C->skip[k->epilogue] = 1;
  gemm_pick(&g, kind_of(C, k, &g), 0, target_sm(C), C->p->cuda_syms > 0);
  render_gemm(C, k, &g);
  return 1;
}

/* a 2-D (or 1-D) f32 conv without input dilation and with at least 8 output channels a group; the rest (depthwise,
 * transposed) keeps the direct kernel */
int cu_gemm_conv(cctx *C, const kir_kernel *k, int epi) {
  /* params: dtype, then x, w and out shapes (rank and 8 dims each), groups, stride, pad_lo, dilation, lhs_dilation */
  const int64_t *q = k->params, *xs = q + 1, *ws = q + 10, *os = q + 19, *st = q + 29, *pd = q + 37, *dl = q + 45, *ld = q + 53;
  int rank = (int)xs[0], two = rank == 4;
  int64_t groups = q[28];
  if (q[0] != PC_f32 || (rank != 4 && rank != 3) || groups < 1 || ws[1] / groups < 8 || direct_asked()) return 0;
  for (int d = 0; d < rank - 2; d++)
    if (ld[d] != 1) return 0;
  gemm g = {.conv = 1, .epi = epi, .ew = q + CONV_EPI_AT, .o = ws[1], .og = ws[1] / groups, .cg = ws[2], .cin = xs[2]};
  g.h = two ? xs[3] : 1, g.w = xs[3 + two];
  g.kh = two ? ws[3] : 1, g.kw = ws[3 + two];
  g.oh = two ? os[3] : 1, g.ow = os[3 + two];
  g.sh = two ? st[0] : 1, g.sw = st[two], g.ph = two ? pd[0] : 0, g.pw = pd[two], g.dh = two ? dl[0] : 1, g.dw = dl[two];
  g.batch = groups, g.M = g.og, g.N = os[1] * g.oh * g.ow, g.K = g.cg * g.kh * g.kw;
  if (g.N < 1 || g.K < 1) return 0;
  gemm_pick(&g, kind_of(C, k, &g), C->p->call_scratch / 4, target_sm(C), C->p->cuda_syms > 0);
  render_gemm(C, k, &g);
  return 1;
}
