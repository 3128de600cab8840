/* runtime/prof.c: the per-kernel profiler's clock and counters, called by entry points compiled with --profile. */
#include "runtime/primc_rt.h"

#include <time.h>

int64_t primc_prof_begin(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

void primc_prof_end(const primc_profile *p, int32_t kernel, int64_t t0) {
  if (!p || kernel < 0 || kernel >= p->n_kernels) return;
  primc_prof_kernel *k = &p->kernels[kernel];
  k->calls++;
  k->ns += primc_prof_begin() - t0;
}

void primc_prof_reset(const primc_profile *p) {
  for (int32_t i = 0; p && i < p->n_kernels; i++) p->kernels[i].calls = p->kernels[i].ns = 0;
}
