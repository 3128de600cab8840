/* bench/coreshare.c: whether this vCPU's core is shared with another thread right now. It times two loops of 12
 * independent ymm FMA chains: one of FMAs alone, and one shaped like a GEMM tile (per step 2 vector loads, 6
 * broadcasts, 12 FMAs and the loop's own instructions: 24 a step), and prints the second's rate over the
 * first's. On a core of its own both run at the FMA peak (ratio about 1.0); in the minutes when the host
 * runs another thread on the core (its SMT sibling, most likely), the FMAs alone keep their rate while the
 * wider loop, short of issue slots, falls to about 0.75 (AMD EPYC Zen 3, 2026-11-29: bench/gemm_rows.md). Kernels that spend more
 * instructions per FMA lose more in such minutes, which is why timings on these VMs come in two speeds.
 * Usage: coreshare [ROUNDS] (x86 with AVX2 and FMA only; pin it with taskset). */
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define AVX2 __attribute__((target("avx2,fma"), noinline))
#define KC 256

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static AVX2 double fma_only(long n) {
  __m256 a[12], b = _mm256_set1_ps(0.999f), c = _mm256_set1_ps(1e-3f);
  for (int i = 0; i < 12; i++) a[i] = _mm256_set1_ps((float)i);
  double t = now();
  for (long k = 0; k < n; k++)
#pragma GCC unroll 12
    for (int i = 0; i < 12; i++) a[i] = _mm256_fmadd_ps(a[i], b, c);
  t = now() - t;
  volatile float sink = 0;
  for (int i = 0; i < 12; i++) sink += a[i][0];
  return (double)n * 12 * 16 / t * 1e-9;
}

/* a 6 x 16 tile over KC steps of an L1-resident A [k][6] and B [k][16], one step an iteration */
static AVX2 void tile(const float *a, const float *b, float *c) {
  __m256 s[6][2];
#pragma GCC unroll 6
  for (int r = 0; r < 6; r++) s[r][0] = s[r][1] = _mm256_setzero_ps();
  for (int k = 0; k < KC; k++) {
    __m256 b0 = _mm256_load_ps(b + 16 * k), b1 = _mm256_load_ps(b + 16 * k + 8);
#pragma GCC unroll 6
    for (int r = 0; r < 6; r++) {
      __m256 x = _mm256_broadcast_ss(a + 6 * k + r);
      s[r][0] = _mm256_fmadd_ps(x, b0, s[r][0]);
      s[r][1] = _mm256_fmadd_ps(x, b1, s[r][1]);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < 6; r++) {
    _mm256_store_ps(c + 16 * r, s[r][0]);
    _mm256_store_ps(c + 16 * r + 8, s[r][1]);
  }
}

static double tile_loop(const float *a, const float *b, float *c, long calls) {
  double t = now();
  for (long i = 0; i < calls; i++) tile(a, b, c);
  return (double)calls * 2 * 6 * 16 * KC / (now() - t) * 1e-9;
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 5;
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
    fprintf(stderr, "coreshare: this CPU lacks AVX2 or FMA\n");
    return 2;
  }
  float *a = aligned_alloc(64, sizeof(float) * 6 * KC), *b = aligned_alloc(64, sizeof(float) * 16 * KC),
        *c = aligned_alloc(64, sizeof(float) * 96);
  if (!a || !b || !c) return 1;
  for (int i = 0; i < 6 * KC; i++) a[i] = 1e-3f;
  for (int i = 0; i < 16 * KC; i++) b[i] = 1e-3f;
  printf("round  fma-only GFLOP/s  tile GFLOP/s  tile/fma\n");
  for (int r = 0; r < rounds; r++) {
    double f = fma_only(400000), g = tile_loop(a, b, c, 2000);
    printf("%5d  %16.1f  %12.1f  %8.2f%s\n", r, f, g, g / f, g / f < 0.85 ? "  (core shared)" : "");
  }
  free(a), free(b), free(c);
  return 0;
}
