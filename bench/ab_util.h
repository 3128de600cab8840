/* bench/ab_util.h: what the alternating timers (conv_ab, wgrad_ab) share: a monotonic clock, a sort order for
 * medians and a buffer of a fixed pattern. */
#ifndef PRIMC_BENCH_AB_UTIL_H
#define PRIMC_BENCH_AB_UTIL_H

#include <stdint.h>
#include <stdlib.h>
#include <time.h>

static inline double ab_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static inline int ab_by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* n floats in [-0.5, 0.5), 64-byte aligned; NULL when out of memory */
static inline float *ab_buf(int64_t n) {
  float *p = aligned_alloc(64, ((size_t)(n > 0 ? n : 1) * sizeof(float) + 63) / 64 * 64);
  for (int64_t i = 0; p && i < n; i++) p[i] = (float)((i * 7919) % 1000) / 1000.0f - 0.5f;
  return p;
}

#endif
