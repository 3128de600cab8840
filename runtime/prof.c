/* runtime/prof.c: the per-kernel profiler's clock and counters, called by entry points compiled with --profile. */
#include "runtime/primc_rt.h"

#include <time.h>

int64_t primc_prof_begin(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static primc_prof_event *rec;
static int64_t rec_n, rec_cap;

void primc_prof_record(primc_prof_event *buf, int64_t cap) {
  rec = buf;
  rec_cap = buf ? cap : 0;
  rec_n = 0;
}

int64_t primc_prof_recorded(void) { return rec_n; }

void primc_prof_end(const primc_profile *p, int32_t kernel, int64_t t0) {
  if (!p || kernel < 0 || kernel >= p->n_kernels) return;
  primc_prof_kernel *k = &p->kernels[kernel];
  int64_t ns = primc_prof_begin() - t0;
  k->calls++;
  k->ns += ns;
  if (rec_n < rec_cap) rec[rec_n++] = (primc_prof_event){kernel, t0, ns};
}

void primc_prof_reset(const primc_profile *p) {
  for (int32_t i = 0; p && i < p->n_kernels; i++) p->kernels[i].calls = p->kernels[i].ns = 0;
}
