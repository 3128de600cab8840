/* runtime/threads.c: the small pthread pool that splits generated kernels' outer loops (no OpenMP). */
#include "runtime/primc_rt.h"

#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#define MAX_THREADS 64

typedef struct pool {
  pthread_mutex_t mu;
  pthread_cond_t go, done;
  pthread_mutex_t busy; /* one parallel_for at a time; others run inline */
  int n_threads;        /* including the caller */
  int quit;             /* set when the library unloads */
  pthread_t tids[MAX_THREADS];
  unsigned generation;
  int pending;
  int64_t n;
  void (*fn)(void *, int64_t, int64_t);
  void *ctx;
} pool;

static pool the_pool = {.mu = PTHREAD_MUTEX_INITIALIZER, .go = PTHREAD_COND_INITIALIZER,
                        .done = PTHREAD_COND_INITIALIZER, .busy = PTHREAD_MUTEX_INITIALIZER};
static pthread_once_t pool_once = PTHREAD_ONCE_INIT;
/* set in pool threads (a key, not _Thread_local: this code also links into shared libraries) */
static pthread_key_t worker_key;

static void chunk(int64_t n, int parts, int i, int64_t *b, int64_t *e) {
  *b = n * i / parts;
  *e = n * (i + 1) / parts;
}

static void *worker(void *arg) {
  int id = (int)(intptr_t)arg;
  pool *p = &the_pool;
  unsigned seen = 0;
  pthread_setspecific(worker_key, &the_pool);
  for (;;) {
    pthread_mutex_lock(&p->mu);
    while (p->generation == seen && !p->quit) pthread_cond_wait(&p->go, &p->mu);
    if (p->quit) {
      pthread_mutex_unlock(&p->mu);
      return NULL;
    }
    seen = p->generation;
    int64_t n = p->n;
    void (*fn)(void *, int64_t, int64_t) = p->fn;
    void *ctx = p->ctx;
    pthread_mutex_unlock(&p->mu);
    int64_t b, e;
    chunk(n, p->n_threads, id, &b, &e);
    if (b < e) fn(ctx, b, e);
    pthread_mutex_lock(&p->mu);
    if (--p->pending == 0) pthread_cond_signal(&p->done);
    pthread_mutex_unlock(&p->mu);
  }
  return NULL;
}

static void pool_start(void) {
  const char *env = getenv("PRIMC_NUM_THREADS");
  long n = env && *env ? strtol(env, NULL, 10) : sysconf(_SC_NPROCESSORS_ONLN);
  if (n < 1) n = 1;
  if (n > MAX_THREADS) n = MAX_THREADS;
  int started = 1;
  if (pthread_key_create(&worker_key, NULL) != 0) n = 1;
  for (int i = 1; i < n; i++) {
    if (pthread_create(&the_pool.tids[i], NULL, worker, (void *)(intptr_t)i) != 0) break;
    started++;
  }
  the_pool.n_threads = started;
}

/* The pool's threads run code of this library: when it is a shared library being
 * unloaded (dlclose) they must be gone first. */
__attribute__((destructor)) static void pool_stop(void) {
  pool *p = &the_pool;
  if (p->n_threads <= 1) return;
  pthread_mutex_lock(&p->mu);
  p->quit = 1;
  pthread_cond_broadcast(&p->go);
  pthread_mutex_unlock(&p->mu);
  for (int i = 1; i < p->n_threads; i++) pthread_join(p->tids[i], NULL);
  p->n_threads = 1;
}

int primc_num_threads(void) {
  pthread_once(&pool_once, pool_start);
  return the_pool.n_threads;
}

void primc_parallel_for(int64_t n, void (*fn)(void *ctx, int64_t begin, int64_t end), void *ctx) {
  pool *p = &the_pool;
  if (n <= 0) return;
  if (n == 1 || primc_num_threads() == 1 || pthread_getspecific(worker_key) || pthread_mutex_trylock(&p->busy) != 0) {
    fn(ctx, 0, n);
    return;
  }
  pthread_mutex_lock(&p->mu);
  p->n = n;
  p->fn = fn;
  p->ctx = ctx;
  p->pending = p->n_threads - 1;
  p->generation++;
  pthread_cond_broadcast(&p->go);
  pthread_mutex_unlock(&p->mu);
  int64_t b, e;
  chunk(n, p->n_threads, 0, &b, &e);
  if (b < e) fn(ctx, b, e);
  pthread_mutex_lock(&p->mu);
  while (p->pending > 0) pthread_cond_wait(&p->done, &p->mu);
  pthread_mutex_unlock(&p->mu);
  pthread_mutex_unlock(&p->busy);
}
