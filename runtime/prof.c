/* runtime/prof.c: the per-kernel profiler's clock and counters, called by entry points compiled with --profile. */
#include "runtime/primc_rt.h"

#include <time.h>

int64_t primc_prof_begin(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* the recording: events appended from the calling thread and the pool's workers alike */
static primc_prof_event *rec;
static int64_t rec_n, rec_cap;
static int rec_on;

void primc_prof_record(primc_prof_event *buf, int64_t cap) {
  __atomic_store_n(&rec_on, 0, __ATOMIC_RELEASE);
  rec = buf;
  rec_cap = buf ? cap : 0;
  __atomic_store_n(&rec_n, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&rec_on, buf != NULL, __ATOMIC_RELEASE);
}

int64_t primc_prof_recorded(void) {
  int64_t n = __atomic_load_n(&rec_n, __ATOMIC_ACQUIRE);
  return n < rec_cap ? n : rec_cap;
}

int primc_prof_recording(void) { return __atomic_load_n(&rec_on, __ATOMIC_ACQUIRE); }

static void append(primc_prof_event e) {
  int64_t i = __atomic_fetch_add(&rec_n, 1, __ATOMIC_ACQ_REL);
  if (i < rec_cap) rec[i] = e;
}

void primc_prof_note_share(int32_t thread, int64_t t0, int64_t ns) {
  if (primc_prof_recording()) append((primc_prof_event){-1, thread, t0, ns});
}

void primc_prof_end(const primc_profile *p, int32_t kernel, int64_t t0) {
  if (!p || kernel < 0 || kernel >= p->n_kernels) return;
  primc_prof_kernel *k = &p->kernels[kernel];
  int64_t ns = primc_prof_begin() - t0;
  k->calls++;
  k->ns += ns;
  if (primc_prof_recording()) append((primc_prof_event){kernel, 0, t0, ns});
}

void primc_prof_reset(const primc_profile *p) {
  for (int32_t i = 0; p && i < p->n_kernels; i++) p->kernels[i].calls = p->kernels[i].ns = 0;
}
