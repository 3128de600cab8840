/* bench/stream.c: STREAM-style triad a = b + s * c in plain C on 1..T pthreads, the memory roofline
 * that bench/roofline.sh sets primc's fused elementwise kernel against. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define N (1 << 24) /* elements per array, as bench/triad.txt */
#define REPS 20

typedef struct {
  float *a;
  const float *b, *c;
  size_t lo, hi;
} part;

static void *triad(void *arg) {
  part *p = arg;
  for (size_t i = p->lo; i < p->hi; i++) p->a[i] = p->b[i] + 3.0f * p->c[i];
  return NULL;
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* best seconds of REPS triads on `threads` threads */
static double best_triad(float *a, const float *b, const float *c, int threads) {
  pthread_t tid[64];
  part parts[64];
  double best = 1e30;
  for (int r = 0; r < REPS; r++) {
    double t0 = now();
    for (int t = 0; t < threads; t++) {
      parts[t] = (part){a, b, c, (size_t)N * (size_t)t / (size_t)threads, (size_t)N * (size_t)(t + 1) / (size_t)threads};
      pthread_create(&tid[t], NULL, triad, &parts[t]);
    }
    for (int t = 0; t < threads; t++) pthread_join(tid[t], NULL);
    double dt = now() - t0;
    if (dt < best) best = dt;
  }
  return best;
}

int main(int argc, char **argv) {
  int max_threads = argc > 1 ? atoi(argv[1]) : 2;
  if (max_threads < 1 || max_threads > 64) return fprintf(stderr, "usage: stream [threads 1..64]\n"), 2;
  float *a = malloc(sizeof(float) * N), *b = malloc(sizeof(float) * N), *c = malloc(sizeof(float) * N);
  if (!a || !b || !c) return fprintf(stderr, "stream: out of memory\n"), 1;
  for (size_t i = 0; i < N; i++) a[i] = 0, b[i] = (float)(i & 1023), c[i] = 1.0f / (float)(1 + (i & 255));
  for (int t = 1; t <= max_threads; t++) {
    double s = best_triad(a, b, c, t);
    printf("STREAM triad, %d thread(s): %.3f ms, %.1f GB/s\n", t, s * 1e3, 3.0 * sizeof(float) * N / s * 1e-9);
  }
  free(a), free(b), free(c);
  return 0;
}
