/* bench/gemm_bench.c: GFLOP/s of primc_sgemm and primc_conv2d_f32 against OpenBLAS, and the machine's FMA peak. */
#include "runtime/primc_rt.h"

#include <cblas.h>
#include <immintrin.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Usage: PRIMC_NUM_THREADS=T gemm_bench [--quick | --bf16 (the bf16 table only)]
 * OpenBLAS gets the same thread count; OPENBLAS_CORETYPE picks its kernels (printed in the header).
 * Each figure is the best of several timed runs of at least 40 ms each (20 ms with --quick). */

static double min_seconds = 0.04;
/* on one thread, the process's CPU time: the 2-core machine is shared, and time spent descheduled
 * is not the kernel's; on more threads, wall time */
static clockid_t clock_id = CLOCK_MONOTONIC;

static double now(void) {
  struct timespec t;
  clock_gettime(clock_id, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static float *rand_buf(size_t n) {
  float *p = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
  uint32_t s = 12345;
  for (size_t i = 0; i < n; i++) {
    s = s * 1664525u + 1013904223u;
    p[i] = (float)(s >> 8) / (float)(1 << 24) - 0.5f;
  }
  return p;
}

/* best seconds per call of fn(ctx), over 5 batches. OpenBLAS's threads keep spinning for about 0.1 s
 * after its last call: timing our GEMM right after one had them taking the second core from our pool
 * (square 512 on 2 threads read 200 GFLOP/s, 410 with the pause), so every timing starts after one. */
static double best_time(void (*fn)(void *), void *ctx) {
  if (primc_num_threads() > 1) usleep(300000);
  fn(ctx);
  double t0 = now();
  int reps = 1;
  fn(ctx);
  double one = now() - t0;
  if (one < min_seconds) reps = (int)(min_seconds / (one > 1e-7 ? one : 1e-7)) + 1;
  double best = 1e30;
  for (int b = 0; b < 5; b++) {
    t0 = now();
    for (int r = 0; r < reps; r++) fn(ctx);
    double t = (now() - t0) / reps;
    if (t < best) best = t;
  }
  return best;
}

/* ---------------------------------------------------------------- fp32 FMA peak */

#define PEAK_ITERS 20000000L

__attribute__((target("avx512f"))) static float fma_loop512(long iters) {
  __m512 acc[16], x = _mm512_set1_ps(1.0000001f), y = _mm512_set1_ps(0.9999999f);
  for (int i = 0; i < 16; i++) acc[i] = _mm512_set1_ps((float)i);
  for (long n = 0; n < iters; n++) {
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) acc[i] = _mm512_fmadd_ps(acc[i], x, y);
  }
  __m512 s = acc[0];
  for (int i = 1; i < 16; i++) s = _mm512_add_ps(s, acc[i]);
  return _mm512_reduce_add_ps(s);
}

/* the same on ymm, 8 floats a lane group: for AVX2 machines, where the zmm loop would fault. 12 chains, not 16:
 * there are 16 ymm registers, and 16 sums with x and y spilled two of them (Zen 3 read 55 GFLOP/s, where
 * OpenBLAS's sgemm reached 89); 12 still cover two pipes of 4-cycle FMAs */
#define PEAK_CHAINS_YMM 12
__attribute__((target("avx2,fma"))) static float fma_loop256(long iters) {
  __m256 acc[PEAK_CHAINS_YMM], x = _mm256_set1_ps(1.0000001f), y = _mm256_set1_ps(0.9999999f);
  for (int i = 0; i < PEAK_CHAINS_YMM; i++) acc[i] = _mm256_set1_ps((float)i);
  for (long n = 0; n < iters; n++) {
#pragma GCC unroll 16
    for (int i = 0; i < PEAK_CHAINS_YMM; i++) acc[i] = _mm256_fmadd_ps(acc[i], x, y);
  }
  float out[8], sum = 0;
  __m256 s = acc[0];
  for (int i = 1; i < PEAK_CHAINS_YMM; i++) s = _mm256_add_ps(s, acc[i]);
  _mm256_storeu_ps(out, s);
  for (int i = 0; i < 8; i++) sum += out[i];
  return sum;
}

static volatile float sink;
static int peak_zmm; /* the CPU has AVX-512 */

static void peak_fn(void *ctx, int64_t b, int64_t e) {
  for (int64_t i = b; i < e; i++) sink = peak_zmm ? fma_loop512(PEAK_ITERS / 4) : fma_loop256(PEAK_ITERS / 4);
}

static void peak_all(void *ctx) { primc_parallel_for(primc_num_threads(), peak_fn, NULL); }
static void peak_one(void *ctx) { peak_fn(NULL, 0, 1); }

static void report_peak(void) {
  __builtin_cpu_init();
  peak_zmm = __builtin_cpu_supports("avx512f");
  int chains = peak_zmm ? 16 : PEAK_CHAINS_YMM;
  double flops = 2.0 * (peak_zmm ? 16 : 8) * chains * (double)(PEAK_ITERS / 4);
  double t1 = best_time(peak_one, NULL), tn = best_time(peak_all, NULL);
  printf("fp32 FMA loop (%s, %d chains): %.0f GFLOP/s on 1 thread, %.0f on %d\n\n", peak_zmm ? "zmm" : "ymm", chains,
         flops / t1 * 1e-9, flops * primc_num_threads() / tn * 1e-9, primc_num_threads());
}

/* ---------------------------------------------------------------- GEMM */

typedef struct gemm_case {
  const char *name;
  int64_t M, N, K;
  int tb;
} gemm_case;

typedef struct gemm_run {
  const gemm_case *c;
  float *A, *B, *C;
} gemm_run;

static void run_primc(void *ctx) {
  gemm_run *r = ctx;
  const gemm_case *c = r->c;
  primc_sgemm(0, c->tb, c->M, c->N, c->K, 1.0f, r->A, c->K, r->B, c->tb ? c->K : c->N, 0.0f, r->C, c->N);
}

static void run_blas(void *ctx) {
  gemm_run *r = ctx;
  const gemm_case *c = r->c;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, c->tb ? CblasTrans : CblasNoTrans, (int)c->M, (int)c->N, (int)c->K, 1.0f,
              r->A, (int)c->K, r->B, c->tb ? (int)c->K : (int)c->N, 0.0f, r->C, (int)c->N);
}

/* one table row: ours and BLAS's run of case c on the same buffers (ctx), timed in turn */
static void gemm_row(const gemm_case *c, void (*ours)(void *), void (*blas)(void *), void *ctx) {
  double flops = 2.0 * (double)c->M * (double)c->N * (double)c->K;
  double tp = best_time(ours, ctx), tb = best_time(blas, ctx);
  printf("| %-28s | %5lld %5lld %5lld | %7.1f | %7.1f | %5.2fx |\n", c->name, (long long)c->M, (long long)c->N,
         (long long)c->K, flops / tp * 1e-9, flops / tb * 1e-9, tb / tp);
}

static void bench_gemm(const gemm_case *c) {
  gemm_run r = {c, rand_buf((size_t)(c->M * c->K)), rand_buf((size_t)(c->K * c->N)), rand_buf((size_t)(c->M * c->N))};
  gemm_row(c, run_primc, run_blas, &r);
  free(r.A), free(r.B), free(r.C);
}

/* ---------------------------------------------------------------- bf16: primc_bgemm's rows, the AMX peak */

#define AMX_ITERS 4000000L

/* 4 independent 16x16 C tiles fed by the same A and B tiles: tdpbf16ps's throughput, the AMX peak */
__attribute__((target("amx-tile,amx-bf16"))) static float amx_loop(long iters) {
  static const struct {
    uint8_t palette, start, res[14];
    uint16_t colsb[16];
    uint8_t rows[16];
  } cfg __attribute__((aligned(64))) = {1, 0, {0}, {64, 64, 64, 64, 64, 64, 64, 64}, {16, 16, 16, 16, 16, 16, 16, 16}};
  static uint16_t ab[16 * 32] __attribute__((aligned(64)));
  float out[256] __attribute__((aligned(64)));
  _tile_loadconfig(&cfg);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, ab, 64);
  _tile_loadd(5, ab, 64);
  _tile_loadd(6, ab, 64);
  _tile_loadd(7, ab, 64);
  for (long i = 0; i < iters; i++) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, out, 64);
  _tile_release();
  return out[0];
}

static void amx_fn(void *ctx, int64_t b, int64_t e) {
  for (int64_t i = b; i < e; i++) sink = amx_loop(AMX_ITERS);
}
static void amx_all(void *ctx) { primc_parallel_for(primc_num_threads(), amx_fn, NULL); }
static void amx_one(void *ctx) { amx_fn(NULL, 0, 1); }

typedef struct bgemm_run {
  const gemm_case *c;
  float *A, *C;
  void *packed;
} bgemm_run;

static void run_bgemm(void *ctx) {
  bgemm_run *r = ctx;
  primc_bgemm_prepacked(0, r->c->M, r->c->N, r->c->K, r->A, r->c->K, r->packed, r->C, r->c->N);
}

static void run_sgemm_packed(void *ctx) {
  bgemm_run *r = ctx;
  primc_sgemm_prepacked(0, r->c->M, r->c->N, r->c->K, 1.0f, r->A, r->c->K, r->packed, 0.0f, r->C, r->c->N, NULL, NULL);
}

/* each row the CPU runs, B packed once (as a compiled model's weights), against the f32 GEMM on packed B */
static void bench_bf16(void) {
  int amx = primc_bgemm_force_row(PRIMC_BGEMM_ROW_AMX) == 0;
  double amx_peak = 0;
  if (amx) {
    double flops = 4.0 * 16 * 16 * 32 * 2 * (double)AMX_ITERS;
    double t1 = best_time(amx_one, NULL), tn = best_time(amx_all, NULL);
    amx_peak = flops / t1 * 1e-9;
    printf("AMX tdpbf16ps loop (4 C tiles): %.0f GFLOP/s on 1 thread, %.0f on %d\n\n", amx_peak,
           flops * primc_num_threads() / tn * 1e-9, primc_num_threads());
  }
  static const gemm_case cases[] = {
      {"square 256", 256, 256, 256, 1},           {"square 512", 512, 512, 512, 1},
      {"square 1024", 1024, 1024, 1024, 1},       {"square 2048", 2048, 2048, 2048, 1},
      {"bert linear 768->768", 128, 768, 768, 1}, {"bert linear 768->3072", 128, 3072, 768, 1},
      {"bert linear 3072->768", 128, 768, 3072, 1}, {"resnet18 layer3 3x3 (as GEMM)", 196, 256, 2304, 1},
  };
  printf("| bf16 GEMM, B packed (split 1) | M N K | row | bf16 GFLOP/s | of AMX peak | f32 GFLOP/s | bf16 / f32 "
         "speedup |\n| --- | --- | --- | ---: | ---: | ---: | ---: |\n");
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    const gemm_case *c = &cases[i];
    float *B = rand_buf((size_t)(c->K * c->N));
    bgemm_run r = {c, rand_buf((size_t)(c->M * c->K)), rand_buf((size_t)(c->M * c->N)), NULL},
              f = {c, r.A, r.C, aligned_alloc(64, (primc_sgemm_packed_b_size(c->N, c->K) + 63) / 64 * 64)};
    r.packed = aligned_alloc(64, (primc_bgemm_packed_b_size(c->N, c->K, 1) + 63) / 64 * 64);
    primc_bgemm_pack_b(1, c->N, c->K, B, c->K, 1, r.packed);
    primc_sgemm_pack_b(1, c->N, c->K, B, c->K, f.packed);
    double flops = 2.0 * (double)c->M * (double)c->N * (double)c->K;
    double tf = best_time(run_sgemm_packed, &f);
    for (int row = 0; row < PRIMC_BGEMM_ROW_COUNT; row++) {
      if (primc_bgemm_force_row(row) < 0 || row == PRIMC_BGEMM_ROW_GENERIC) continue;
      double tb = best_time(run_bgemm, &r);
      char of[16] = "-";
      if (row == PRIMC_BGEMM_ROW_AMX) snprintf(of, sizeof of, "%.0f%%", 100 * flops / tb * 1e-9 / amx_peak);
      printf("| %-28s | %5lld %5lld %5lld | %s | %7.1f | %s | %7.1f | %5.2fx |\n", c->name, (long long)c->M,
             (long long)c->N, (long long)c->K, primc_bgemm_row_name(row), flops / tb * 1e-9, of, flops / tf * 1e-9,
             tf / tb);
    }
    primc_bgemm_force_row(-1);
    free(B), free(r.A), free(r.C), free(r.packed), free(f.packed);
  }
  printf("\n");
}

/* ---------------------------------------------------------------- f64: primc_dgemm vs cblas_dgemm */

typedef struct dgemm_run {
  const gemm_case *c;
  double *A, *B, *C;
} dgemm_run;

static double *rand_dbuf(size_t n) {
  double *p = aligned_alloc(64, (n * sizeof *p + 63) / 64 * 64);
  uint32_t s = 12345u + (uint32_t)n;
  for (size_t i = 0; p && i < n; i++) s = s * 1664525u + 1013904223u, p[i] = (double)(s >> 8) / (1 << 23) - 1;
  return p;
}

static void run_primc_d(void *ctx) {
  dgemm_run *r = ctx;
  const gemm_case *c = r->c;
  primc_dgemm(0, c->tb, c->M, c->N, c->K, r->A, c->K, r->B, c->tb ? c->K : c->N, r->C, c->N);
}

static void run_blas_d(void *ctx) {
  dgemm_run *r = ctx;
  const gemm_case *c = r->c;
  cblas_dgemm(CblasRowMajor, CblasNoTrans, c->tb ? CblasTrans : CblasNoTrans, (int)c->M, (int)c->N, (int)c->K, 1.0,
              r->A, (int)c->K, r->B, c->tb ? (int)c->K : (int)c->N, 0.0, r->C, (int)c->N);
}

static void bench_dgemm(const gemm_case *c) {
  dgemm_run r = {c, rand_dbuf((size_t)(c->M * c->K)), rand_dbuf((size_t)(c->K * c->N)), rand_dbuf((size_t)(c->M * c->N))};
  gemm_row(c, run_primc_d, run_blas_d, &r);
  free(r.A), free(r.B), free(r.C);
}

/* ---------------------------------------------------------------- conv: primc_conv2d_f32 vs im2col + cblas_sgemm */

typedef struct conv_case {
  const char *name;
  primc_conv2d p;
} conv_case;

typedef struct conv_run {
  const primc_conv2d *p;
  float *x, *w, *b, *y, *col;
  int64_t oh, ow;
  primc_conv2d packed; /* as compiled models run it: weights packed at compile time, scratch */
  float *wp, *scratch;
} conv_run;

/* without scratch or packed weights: implicit im2col */
static void run_conv_plain(void *ctx) {
  conv_run *r = ctx;
  primc_conv2d_f32(r->p, r->x, r->w, r->b, r->y);
}

static void run_conv_primc(void *ctx) {
  conv_run *r = ctx;
  primc_conv_epi e = {.bias = r->b, .bias_stride = 1, .lo = -INFINITY, .hi = INFINITY};
  primc_conv2d_f32_epi(&r->packed, r->x, r->wp, &e, r->y, NULL, r->scratch);
}

/* the baseline the runtime had: explicit im2col, then one cblas_sgemm, then the bias */
static void run_conv_blas(void *ctx) {
  conv_run *r = ctx;
  const primc_conv2d *p = r->p;
  int64_t P = r->oh * r->ow, K = p->c * p->kh * p->kw;
  for (int64_t c = 0; c < p->c; c++)
    for (int64_t i = 0; i < p->kh; i++)
      for (int64_t j = 0; j < p->kw; j++) {
        float *row = r->col + ((c * p->kh + i) * p->kw + j) * P;
        for (int64_t y = 0; y < r->oh; y++)
          for (int64_t x = 0; x < r->ow; x++) {
            int64_t ih = y * p->stride_h - p->pad_t + i, iw = x * p->stride_w - p->pad_l + j;
            row[y * r->ow + x] = ih >= 0 && ih < p->h && iw >= 0 && iw < p->w ? r->x[(c * p->h + ih) * p->w + iw] : 0;
          }
      }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)p->o, (int)P, (int)K, 1.0f, r->w, (int)K, r->col, (int)P,
              0.0f, r->y, (int)P);
  for (int64_t o = 0; o < p->o; o++)
    for (int64_t i = 0; i < P; i++) r->y[o * P + i] += r->b[o];
}

static void bench_conv(const conv_case *c) {
  const primc_conv2d *p = &c->p;
  conv_run r = {.p = p};
  primc_conv2d_out_hw(p, &r.oh, &r.ow);
  int64_t P = r.oh * r.ow, K = p->c * p->kh * p->kw;
  r.x = rand_buf((size_t)(p->c * p->h * p->w));
  r.w = rand_buf((size_t)(p->o * K));
  r.b = rand_buf((size_t)p->o);
  r.y = rand_buf((size_t)(p->o * P));
  r.col = rand_buf((size_t)(K * P));
  r.packed = *p;
  int layout = primc_conv2d_weight_layout(p);
  r.wp = rand_buf(primc_conv2d_packed_weight_bytes(p, layout) / sizeof(float) + 16);
  r.scratch = rand_buf((size_t)primc_conv2d_scratch_floats(p) + 1);
  if (layout == PRIMC_CONV_W_WINOGRAD) {
    r.packed.w_winograd = 1;
    r.packed.w_packed_mr = primc_sgemm_mr();
    primc_conv2d_pack_winograd(p, r.w, r.packed.w_packed_mr, r.wp);
  } else if (layout == PRIMC_CONV_W_LANES) {
    r.packed.w_lanes = 1;
    primc_conv2d_pack_lanes(p, r.w, r.wp);
  } else if (layout == PRIMC_CONV_W_PANELS) {
    r.packed.w_packed_panels = 1;
    primc_sgemm_pack_b(1, p->o, K, r.w, K, r.wp);
  } else {
    r.packed.w_packed_mr = primc_sgemm_mr();
    primc_sgemm_pack_a(p->o, K, r.w, K, r.packed.w_packed_mr, r.wp);
  }
  double flops = 2.0 * (double)p->o * (double)P * (double)K;
  double tp = best_time(run_conv_primc, &r), tl = best_time(run_conv_plain, &r), tb = best_time(run_conv_blas, &r);
  printf("| %-28s | %5lld %5lld %5lld | %7.1f | %7.1f | %7.1f | %5.2fx |\n", c->name, (long long)p->o, (long long)P,
         (long long)K, flops / tp * 1e-9, flops / tl * 1e-9, flops / tb * 1e-9, tb / tp);
  free(r.x), free(r.w), free(r.b), free(r.y), free(r.col), free(r.wp), free(r.scratch);
}

#define CONV(name, c, hw, o, k, s, pad) {name, {1, c, hw, hw, o, k, k, 1, s, s, 1, 1, pad, pad, pad, pad, 0, 0, 0, 0, 0, 0, 0}}

/* OpenBLAS starts its own threads when the library loads, one per core, and they spin for a while
 * after: on one thread they doubled the process CPU time the first timings are taken in (the FMA
 * peak read 124 GFLOP/s instead of 247). So run with OPENBLAS_NUM_THREADS set from the start. */
static void openblas_threads_from_start(char **argv) {
  const char *env = getenv("PRIMC_NUM_THREADS"), *have = getenv("OPENBLAS_NUM_THREADS");
  char want[24];
  snprintf(want, sizeof want, "%ld", env && *env ? strtol(env, NULL, 10) : sysconf(_SC_NPROCESSORS_ONLN));
  if (have && strcmp(have, want) == 0) return;
  setenv("OPENBLAS_NUM_THREADS", want, 1);
  execv("/proc/self/exe", argv); /* on failure, go on as we are */
}

int main(int argc, char **argv) {
  openblas_threads_from_start(argv);
  int quick = argc > 1 && strcmp(argv[1], "--quick") == 0, bf16_only = argc > 1 && strcmp(argv[1], "--bf16") == 0;
  if (quick) min_seconds = 0.02;
  openblas_set_num_threads(primc_num_threads());
  if (primc_num_threads() == 1) clock_id = CLOCK_PROCESS_CPUTIME_ID;
  primc_sgemm_reserve();
  printf("## primc_sgemm (%s kernels) vs OpenBLAS (%s), %d thread(s), %s time\n\n",
         primc_sgemm_isa_name(primc_sgemm_isa()), openblas_get_corename(), primc_num_threads(),
         clock_id == CLOCK_MONOTONIC ? "wall" : "CPU");
  if (bf16_only) {
    bench_bf16();
    return 0;
  }
  report_peak();
  static const gemm_case gemms[] = {
      {"square 256", 256, 256, 256, 0},
      {"square 512", 512, 512, 512, 0},
      {"square 1024", 1024, 1024, 1024, 0},
      {"square 2048", 2048, 2048, 2048, 0},
      {"resnet18 conv1 7x7/2", 64, 12544, 147, 0},
      {"resnet18 layer1 3x3", 64, 3136, 576, 0},
      {"resnet18 layer2 3x3", 128, 784, 1152, 0},
      {"resnet18 layer3 3x3", 256, 196, 2304, 0},
      {"resnet18 layer4 3x3", 512, 49, 4608, 0},
      {"resnet18 fc", 1, 1000, 512, 1},
      {"bert linear 768->768", 128, 768, 768, 1},
      {"bert linear 768->3072", 128, 3072, 768, 1},
      {"bert linear 3072->768", 128, 768, 3072, 1},
  };
  printf("| GEMM (C = A B, B^T for linears) | M N K | primc GFLOP/s | OpenBLAS GFLOP/s | speedup |\n");
  printf("| --- | --- | ---: | ---: | ---: |\n");
  for (size_t i = 0; i < sizeof gemms / sizeof gemms[0]; i++) bench_gemm(&gemms[i]);
  static const gemm_case dgemms[] = {
      {"f64 square 256", 256, 256, 256, 0},
      {"f64 square 512", 512, 512, 512, 0},
      {"f64 linear 768->768", 128, 768, 768, 1},
  };
  printf("\n| f64 GEMM (primc_dgemm: compiled models link no BLAS) | M N K | primc GFLOP/s | OpenBLAS GFLOP/s | "
         "speedup |\n| --- | --- | ---: | ---: | ---: |\n");
  for (size_t i = 0; i < sizeof dgemms / sizeof dgemms[0]; i++) bench_dgemm(&dgemms[i]);
  printf("\n");
  bench_bf16();
  static const conv_case convs[] = {
      CONV("conv1 7x7/2 3->64", 3, 224, 64, 7, 2, 3),
      CONV("layer1 3x3 64->64", 64, 56, 64, 3, 1, 1),
      CONV("layer2 3x3/2 64->128", 64, 56, 128, 3, 2, 1),
      CONV("layer2 3x3 128->128", 128, 28, 128, 3, 1, 1),
      CONV("layer2 1x1/2 64->128", 64, 56, 128, 1, 2, 0),
      CONV("layer3 3x3 256->256", 256, 14, 256, 3, 1, 1),
      CONV("layer4 3x3 512->512", 512, 7, 512, 3, 1, 1),
      CONV("r50 layer1 1x1 64->256", 64, 56, 256, 1, 1, 0),
      CONV("r50 layer1 1x1 256->64", 256, 56, 64, 1, 1, 0),
      CONV("r50 layer3 1x1 1024->256", 1024, 14, 256, 1, 1, 0),
      CONV("r50 layer4 1x1/2 1024->2048", 1024, 14, 2048, 1, 2, 0),
      CONV("r50 layer4 1x1 512->2048", 512, 7, 2048, 1, 1, 0),
  };
  printf("\nGFLOP/s count a direct convolution's 2*O*P*K flops: Winograd convs (3x3 stride 1, as compiled) do fewer.\n");
  printf("\n| ResNet-18/50 conv, batch 1 (+bias) | O P K | primc_conv2d GFLOP/s (packed weights, scratch: as compiled) | "
         "primc_conv2d GFLOP/s (plain weights, implicit im2col) | im2col+OpenBLAS GFLOP/s | speedup |\n");
  printf("| --- | --- | ---: | ---: | ---: | ---: |\n");
  for (size_t i = 0; i < sizeof convs / sizeof convs[0]; i++) bench_conv(&convs[i]);
  printf("\n");
  return 0;
}
