/* tests/unit/test_threads.c: the thread pool covers every index once, back to back (workers spinning) and after idling (asleep). */
#include "runtime/primc_rt.h"
#include "tests/test.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct hits {
  int *count;
  int nested; /* each range also runs a nested parallel_for, which must run inline */
} hits;

static void count_range(void *ctx, int64_t b, int64_t e) {
  hits *h = ctx;
  for (int64_t i = b; i < e; i++) __atomic_add_fetch(&h->count[i], 1, __ATOMIC_RELAXED);
  if (h->nested) {
    hits inner = {h->count + 1000, 0};
    primc_parallel_for(e - b, count_range, &inner);
  }
}

static int covered_once(const int *count, int64_t n, int round) {
  for (int64_t i = 0; i < n; i++)
    if (!CHECK_MSG(count[i] == 1, "round %d: index %lld ran %d times", round, (long long)i, count[i])) return 0;
  return 1;
}

PC_TEST(threads_cover_each_index_once) {
  int count[2000];
  int ok = 1;
  /* back to back: the workers find each job while spinning */
  for (int round = 0; round < 3000 && ok; round++) {
    int64_t n = 1 + round % 97;
    memset(count, 0, sizeof count);
    hits h = {count, 0};
    primc_parallel_for(n, count_range, &h);
    ok = covered_once(count, n, round);
  }
  /* with pauses longer than the spin: the workers have gone to sleep and are woken */
  for (int round = 0; round < 5 && ok; round++) {
    usleep(2000);
    memset(count, 0, sizeof count);
    hits h = {count, 0};
    primc_parallel_for(500, count_range, &h);
    ok = covered_once(count, 500, round);
  }
  /* a parallel_for inside a job runs on the calling thread, whole */
  memset(count, 0, sizeof count);
  hits h = {count, 1};
  primc_parallel_for(64, count_range, &h);
  if (ok) ok = covered_once(count, 64, -1);
  int inner = 0;
  for (int64_t i = 1000; i < 1064; i++) inner += count[i];
  if (ok) CHECK_INT(inner, 64);
}
