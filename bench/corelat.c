/* bench/corelat.c: how far apart the first two CPUs are right now: a cache line's round trip between two
 * threads pinned to them, in ns. On the benchmark VM it reads about 100 ns in some minutes and 400 in
 * others, when 2-thread runs of a model slow down by up to a quarter; bench/run.py prints it per model. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <time.h>

#define TRIPS 100000

static volatile int ball __attribute__((aligned(64)));

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int pin(int cpu) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(cpu, &s);
  return pthread_setaffinity_np(pthread_self(), sizeof s, &s);
}

/* returns each odd value as the next even one */
static void *partner(void *arg) {
  (void)arg;
  if (pin(1) != 0) return NULL;
  for (int i = 0; i < TRIPS; i++) {
    while (ball != 2 * i + 1) {
    }
    ball = 2 * i + 2;
  }
  return NULL;
}

int main(void) {
  pthread_t t;
  if (pin(0) != 0 || pthread_create(&t, NULL, partner, NULL) != 0) {
    fprintf(stderr, "corelat: needs two CPUs it may pin threads to\n");
    return 1;
  }
  /* the partner may have failed to pin: it then never answers, so give up after a second (the clock is
   * read once per 4096 spins, so that reading it is not part of the round trip measured) */
  double start = now_ns();
  for (int i = 0; i < TRIPS; i++) {
    ball = 2 * i + 1;
    for (unsigned spins = 1; ball != 2 * i + 2; spins++)
      if (spins % 4096 == 0 && now_ns() - start > 1e9) {
        fprintf(stderr, "corelat: the thread on CPU 1 did not answer\n");
        return 1;
      }
  }
  double ns = (now_ns() - start) / TRIPS;
  pthread_join(t, NULL);
  printf("%.0f\n", ns);
  return 0;
}
