/* runtime/threads.c: the small pthread pool that splits generated kernels' outer loops (no OpenMP). */
#include "runtime/primc_rt.h"

#if PRIMC_X86
#include <immintrin.h>
#endif
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

/*
 * A model runs hundreds of kernels of a few microseconds to a few milliseconds each, so waking a
 * sleeping thread (a futex and a reschedule, 10-50 us on a VM) per kernel would cost more than the
 * small kernels themselves. Pool threads and the caller therefore spin on the job counter for a
 * while (PRIMC_SPIN_US, default 300 us) before sleeping on a condition variable: back-to-back
 * kernels find the workers awake, and an idle process still sleeps. PRIMC_SPIN_US=0 never spins.
 * The spin yields the core every 64 pauses: on a machine with more runnable threads than cores a
 * pure spin would hold the core the thread it waits for needs (10x slower measured on 2 cores).
 */

#define MAX_THREADS 64
#define DEFAULT_SPIN_US 300

typedef struct pool {
  pthread_mutex_t mu;
  pthread_cond_t go, done;
  pthread_mutex_t busy; /* one parallel_for at a time; others run inline */
  int n_threads;        /* including the caller */
  int quit;             /* set when the library unloads */
  int64_t spin_ns;
  pthread_t tids[MAX_THREADS];
  unsigned generation; /* atomic: bumped by each job */
  int pending;         /* atomic: workers still running the job */
  int sleepers;        /* workers waiting on go (under mu) */
  int caller_waits;    /* the caller waits on done (under mu) */
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

static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void relax(void) {
#if PRIMC_X86
  _mm_pause();
#endif
}

/* spins until *word differs from old (1) or the spin time is over (0) */
static int spin_until_changed(const unsigned *word, unsigned old, int64_t spin_ns) {
  if (spin_ns <= 0) return 0;
  int64_t end = now_ns() + spin_ns;
  for (int i = 1;; i++) {
    if (__atomic_load_n(word, __ATOMIC_ACQUIRE) != old) return 1;
    relax();
    if (i % 64 == 0 && (now_ns() > end || sched_yield())) return 0;
  }
}

/* the next job's generation, after spinning and then sleeping; 0 when the pool quits */
static int wait_for_job(pool *p, unsigned seen) {
  if (spin_until_changed(&p->generation, seen, p->spin_ns)) return !__atomic_load_n(&p->quit, __ATOMIC_ACQUIRE);
  pthread_mutex_lock(&p->mu);
  p->sleepers++;
  while (__atomic_load_n(&p->generation, __ATOMIC_ACQUIRE) == seen && !p->quit) pthread_cond_wait(&p->go, &p->mu);
  p->sleepers--;
  int go = !p->quit;
  pthread_mutex_unlock(&p->mu);
  return go;
}

static void *worker(void *arg) {
  int id = (int)(intptr_t)arg;
  pool *p = &the_pool;
  unsigned seen = 0;
  pthread_setspecific(worker_key, &the_pool);
  while (wait_for_job(p, seen)) {
    seen = __atomic_load_n(&p->generation, __ATOMIC_ACQUIRE);
    int64_t b, e;
    chunk(p->n, p->n_threads, id, &b, &e);
    if (b < e) {
      int64_t t0 = primc_prof_recording() ? primc_prof_begin() : -1; /* --trace: each worker's share */
      p->fn(p->ctx, b, e);
      if (t0 >= 0) primc_prof_note_share(id, t0, primc_prof_begin() - t0);
    }
    if (__atomic_sub_fetch(&p->pending, 1, __ATOMIC_ACQ_REL) == 0) {
      pthread_mutex_lock(&p->mu);
      if (p->caller_waits) pthread_cond_signal(&p->done);
      pthread_mutex_unlock(&p->mu);
    }
  }
  return NULL;
}

int primc_threads_wanted(void) {
  const char *env = getenv("PRIMC_NUM_THREADS");
  long n = env && *env ? strtol(env, NULL, 10) : sysconf(_SC_NPROCESSORS_ONLN);
  return n < 1 ? 1 : n > MAX_THREADS ? MAX_THREADS : (int)n;
}

static void pool_start(void) {
  const char *spin = getenv("PRIMC_SPIN_US");
  long n = primc_threads_wanted();
  long us = spin && *spin ? strtol(spin, NULL, 10) : DEFAULT_SPIN_US;
  the_pool.spin_ns = us > 0 && us < 1000000 ? (int64_t)us * 1000 : 0;
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
  __atomic_store_n(&p->quit, 1, __ATOMIC_RELAXED);
  __atomic_add_fetch(&p->generation, 1, __ATOMIC_RELEASE); /* spinning workers see it too */
  pthread_cond_broadcast(&p->go);
  pthread_mutex_unlock(&p->mu);
  for (int i = 1; i < p->n_threads; i++) pthread_join(p->tids[i], NULL);
  p->n_threads = 1;
}

int primc_num_threads(void) {
  pthread_once(&pool_once, pool_start);
  return the_pool.n_threads;
}

/* the caller's end of a job: spin while the workers finish, then sleep */
static void wait_for_workers(pool *p) {
  int64_t end = p->spin_ns > 0 ? now_ns() + p->spin_ns : 0;
  for (int i = 1; __atomic_load_n(&p->pending, __ATOMIC_ACQUIRE) > 0; i++) {
    relax();
    if (i % 64 == 0 && (now_ns() > end || sched_yield())) break;
  }
  pthread_mutex_lock(&p->mu);
  p->caller_waits = 1;
  while (__atomic_load_n(&p->pending, __ATOMIC_ACQUIRE) > 0) pthread_cond_wait(&p->done, &p->mu);
  p->caller_waits = 0;
  pthread_mutex_unlock(&p->mu);
}

void primc_parallel_for(int64_t n, void (*fn)(void *ctx, int64_t begin, int64_t end), void *ctx) {
  pool *p = &the_pool;
  if (n <= 0) return;
  if (n == 1 || primc_num_threads() == 1 || pthread_getspecific(worker_key) || pthread_mutex_trylock(&p->busy) != 0) {
    fn(ctx, 0, n);
    return;
  }
  p->n = n;
  p->fn = fn;
  p->ctx = ctx;
  __atomic_store_n(&p->pending, p->n_threads - 1, __ATOMIC_RELAXED);
  __atomic_add_fetch(&p->generation, 1, __ATOMIC_RELEASE); /* publishes n, fn, ctx and pending */
  pthread_mutex_lock(&p->mu);
  if (p->sleepers) pthread_cond_broadcast(&p->go);
  pthread_mutex_unlock(&p->mu);
  int64_t b, e;
  chunk(n, p->n_threads, 0, &b, &e);
  if (b < e) fn(ctx, b, e);
  wait_for_workers(p);
  pthread_mutex_unlock(&p->busy);
}
