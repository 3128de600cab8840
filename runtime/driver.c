/* runtime/driver.c: the standalone main linked into `primc compile` executables: .npy in, .npy out, --bench. */
/*
 * --profile (the model compiled with `primc compile --profile`) prints, after the runs
 * (the --bench N runs when given, else the one run), this table on stdout:
 *
 *   # profile MODEL: RUNS runs, THREADS threads, RUN_MS ms/run median, kernels KERNEL_MS ms/run
 *   kernel  name  origin  calls  total_ms  pct  bytes_moved
 *   k12  dot_general+add+max  Gemm:/fc1/Gemm  50  1.234  35.2  524288
 *   ...
 *   # total  KERNEL_TOTAL_MS ms over RUNS runs
 *
 * Lines starting with '#' are comments. Each row is one kernel that ran, sorted by
 * total_ms, largest first; its 7 fields are separated by runs of spaces and contain no
 * whitespace themselves (line.split() gives them):
 *   kernel       kN, the kernel's id (the kN of `primc dump --kernels` / `compile --report`)
 *   name         the kernel's prims joined by '+', a GEMM's fused epilogue included
 *   origin       the model node it came from, "OpType:node_name" ("-" when unknown)
 *   calls        times it ran over all counted runs
 *   total_ms     wall time summed over those calls, in ms (%.4f)
 *   pct          share of the sum of all kernels' total_ms, in percent (%.1f)
 *   bytes_moved  bytes of the distinct buffers it reads and writes, per call
 */
#include "runtime/primc_rt.h"

#include <cblas.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

extern const primc_model_desc *const primc_main_model;

static const char *usage =
    "usage: %s [IN0.npy ...] [--random-inputs] [--seed N] [-o OUTDIR] [--bench N] [--weights FILE] [--profile]\n"
    "  Runs the compiled model on .npy inputs (in the order of the model inputs) or on\n"
    "  deterministic random ones, writes OUTDIR/out0.npy ... (default: prints a summary),\n"
    "  and with --bench N prints the min and median latency of N runs. --profile (when compiled\n"
    "  with `primc compile --profile`) prints the time of every kernel.\n";

typedef struct opts {
  const char *ins[64];
  int n_ins, random, bench, profile;
  unsigned long long seed;
  const char *out_dir, *weights;
} opts;

static int parse(int argc, char **argv, opts *o) {
  memset(o, 0, sizeof *o);
  o->seed = 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int has = i + 1 < argc;
    if (!strcmp(a, "--random-inputs")) o->random = 1;
    else if (!strcmp(a, "--profile")) o->profile = 1;
    else if (!strcmp(a, "-o") && has) o->out_dir = argv[++i];
    else if (!strcmp(a, "--bench") && has) o->bench = atoi(argv[++i]);
    else if (!strcmp(a, "--seed") && has) o->seed = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(a, "--weights") && has) o->weights = argv[++i];
    else if (!strcmp(a, "-h") || !strcmp(a, "--help")) return fprintf(stdout, usage, argv[0]), 1;
    else if (a[0] == '-' && a[1]) return fprintf(stderr, usage, argv[0]), 2;
    else if (o->n_ins < 64) o->ins[o->n_ins++] = a;
  }
  return 0;
}

static uint64_t next_rand(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static void fill_random(primc_array *a, uint64_t *s) {
  int64_t n = primc_array_numel(a);
  for (int64_t i = 0; i < n; i++) {
    uint64_t r = next_rand(s);
    double u = (double)(r >> 11) / 9007199254740992.0 * 2 - 1;
    switch (a->dtype) { /* one fill per storage type */
    case PRIMC_F32: ((float *)a->data)[i] = (float)u; break;
    case PRIMC_F64: ((double *)a->data)[i] = u; break;
    case PRIMC_BOOL: ((uint8_t *)a->data)[i] = r & 1; break;
    case PRIMC_I32: ((int32_t *)a->data)[i] = (int32_t)(r % 10); break;
    case PRIMC_I64: ((int64_t *)a->data)[i] = (int64_t)(r % 10); break;
    default: ((uint8_t *)a->data)[(size_t)i * primc_dtype_size(a->dtype)] = (uint8_t)(r % 10); break; /* low byte */
    }
  }
}

static int check_input(const primc_tensor_desc *d, const primc_array *a, const char *path) {
  int ok = (int)a->dtype == d->dtype && a->rank == d->rank;
  for (int i = 0; ok && i < d->rank; i++) ok = a->dims[i] == d->dims[i];
  if (!ok) fprintf(stderr, "error: %s does not match input \"%s\" (dtype %d rank %d expected)\n", path, d->name,
                   d->dtype, d->rank);
  return ok;
}

static int alloc_array(const primc_tensor_desc *d, primc_array *a) {
  a->dtype = (primc_dtype)d->dtype;
  a->rank = d->rank;
  memcpy(a->dims, d->dims, sizeof a->dims);
  size_t n = (size_t)primc_array_numel(a) * primc_dtype_size(a->dtype);
  a->data = aligned_alloc(64, (n + 63) / 64 * 64 + 64);
  if (a->data) memset(a->data, 0, n);
  return a->data != NULL;
}

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* median ms per run in *median */
static int bench(const primc_model_desc *m, const void **in, void **out, void *ws, int n, double *median) {
  double *t = malloc(sizeof *t * (size_t)n);
  if (!t) return 1;
  for (int i = 0; i < n; i++) {
    double s = now_ms();
    if (m->run(in, out, ws) != 0) return free(t), 1;
    t[i] = now_ms() - s;
  }
  qsort(t, (size_t)n, sizeof *t, cmp_double);
  printf("%s: %d runs, min %.3f ms, median %.3f ms\n", m->name, n, t[0], t[n / 2]);
  *median = t[n / 2];
  free(t);
  return 0;
}

static const primc_profile *prof_table;

static int cmp_prof(const void *a, const void *b) {
  int64_t x = prof_table->kernels[*(const int *)a].ns, y = prof_table->kernels[*(const int *)b].ns;
  return (x < y) - (x > y);
}

/* the table documented at the top of this file */
static void print_profile(const primc_model_desc *m, int runs, double run_ms) {
  const primc_profile *p = m->profile;
  int *order = malloc(sizeof *order * (size_t)(p->n_kernels + 1));
  if (!order) return;
  int n = 0;
  int64_t total = 0;
  for (int i = 0; i < p->n_kernels; i++)
    if (p->kernels[i].calls) order[n++] = i, total += p->kernels[i].ns;
  prof_table = p;
  qsort(order, (size_t)n, sizeof *order, cmp_prof);
  printf("# profile %s: %d runs, %d threads, %.4f ms/run median, kernels %.4f ms/run\n", m->name, runs,
         primc_num_threads(), run_ms, (double)total / 1e6 / (runs > 0 ? runs : 1));
  printf("%-6s  %-40s  %-32s  %7s  %10s  %5s  %12s\n", "kernel", "name", "origin", "calls", "total_ms", "pct",
         "bytes_moved");
  for (int i = 0; i < n; i++) {
    const primc_prof_kernel *k = &p->kernels[order[i]];
    char id[16];
    snprintf(id, sizeof id, "k%d", order[i]);
    printf("%-6s  %-40s  %-32s  %7lld  %10.4f  %5.1f  %12lld\n", id, k->name, k->origin, (long long)k->calls,
           (double)k->ns / 1e6, total ? 100.0 * (double)k->ns / (double)total : 0.0, (long long)k->bytes);
  }
  printf("# total %.4f ms over %d runs\n", (double)total / 1e6, runs);
  free(order);
}

static void summary(const primc_model_desc *m, const primc_array *outs) {
  for (int i = 0; i < m->n_outputs; i++) {
    const primc_array *a = &outs[i];
    printf("out%d %s [", i, m->outputs[i].name);
    for (int d = 0; d < a->rank; d++) printf("%s%lld", d ? "," : "", (long long)a->dims[d]);
    printf("]");
    if (a->dtype == PRIMC_F32) {
      double s = 0;
      for (int64_t k = 0; k < primc_array_numel(a); k++) s += ((const float *)a->data)[k];
      printf(" sum=%.6g", s);
    }
    printf("\n");
  }
}

static int load_weights(const primc_model_desc *m, const opts *o, const char *argv0) {
  if (!m->load_weights) return 0;
  char path[4096];
  if (o->weights) snprintf(path, sizeof path, "%s", o->weights);
  else snprintf(path, sizeof path, "%s.weights", argv0);
  if (m->load_weights(path) == 0) return 0;
  fprintf(stderr, "error: cannot map weights file %s\n", path);
  return 1;
}

/* Debian's OpenBLAS picks its AVX2 kernels on this CPU unless told otherwise, and reads
 * the setting only when it loads: re-run once with it set when AVX-512 is there */
static void openblas_coretype(char **argv) {
  if (getenv("OPENBLAS_CORETYPE") || getenv("PRIMC_NO_REEXEC")) return;
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512f")) return;
  setenv("OPENBLAS_CORETYPE", "SkylakeX", 1);
  setenv("OPENBLAS_NUM_THREADS", "1", 0); /* no worker threads at all, see main */
  setenv("PRIMC_NO_REEXEC", "1", 1);
  execv("/proc/self/exe", argv);
}

int main(int argc, char **argv) {
  const primc_model_desc *m = primc_main_model;
  openblas_coretype(argv);
  /* our pool parallelizes; OpenBLAS's own workers would spin in sched_yield after each call, taking a
   * core from the pool (measured: 40% of a ResNet-18 run's CPU samples on this 2-core machine) */
  openblas_set_num_threads(1);
  opts o;
  int rc = parse(argc, argv, &o);
  if (rc) return rc == 1 ? 0 : 2;
  if (!o.random && o.n_ins != m->n_inputs) {
    fprintf(stderr, "error: %s expects %d input(s), got %d (or pass --random-inputs)\n", m->name, m->n_inputs, o.n_ins);
    return 2;
  }
  if (load_weights(m, &o, argv[0])) return 1;
  primc_array *ins = calloc((size_t)m->n_inputs + 1, sizeof *ins), *outs = calloc((size_t)m->n_outputs + 1, sizeof *outs);
  const void **inp = calloc((size_t)m->n_inputs + 1, sizeof *inp);
  void **outp = calloc((size_t)m->n_outputs + 1, sizeof *outp);
  void *ws = aligned_alloc(64, (size_t)(m->workspace_size + 64) / 64 * 64);
  if (!ins || !outs || !inp || !outp || !ws) return fprintf(stderr, "error: out of memory\n"), 1;
  uint64_t seed = o.seed * 0x9E3779B97F4A7C15ull + 1;
  char err[256];
  for (int i = 0; i < m->n_inputs; i++) {
    if (o.random) {
      if (!alloc_array(&m->inputs[i], &ins[i])) return 1;
      fill_random(&ins[i], &seed);
    } else if (primc_npy_read(o.ins[i], &ins[i], err, sizeof err) != 0) {
      return fprintf(stderr, "error: %s: %s\n", o.ins[i], err), 1;
    } else if (!check_input(&m->inputs[i], &ins[i], o.ins[i])) {
      return 1;
    }
    inp[i] = ins[i].data;
  }
  for (int i = 0; i < m->n_outputs; i++) {
    if (!alloc_array(&m->outputs[i], &outs[i])) return 1;
    outp[i] = outs[i].data;
  }
  if (o.profile && !m->profile) return fprintf(stderr, "error: %s was not compiled with --profile\n", m->name), 2;
  double run_ms = now_ms();
  int st = m->run(inp, outp, ws);
  run_ms = now_ms() - run_ms;
  if (st != 0) return fprintf(stderr, "error: %s_run returned %d\n", m->name, st), 1;
  if (o.bench > 0 && m->profile) primc_prof_reset(m->profile);
  if (o.bench > 0 && bench(m, inp, outp, ws, o.bench, &run_ms)) return 1;
  if (o.profile) print_profile(m, o.bench > 0 ? o.bench : 1, run_ms);
  if (!o.out_dir) summary(m, outs);
  if (o.out_dir) mkdir(o.out_dir, 0777); /* an existing one is fine */
  for (int i = 0; o.out_dir && i < m->n_outputs; i++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/out%d.npy", o.out_dir, i);
    if (primc_npy_write(path, &outs[i], err, sizeof err) != 0) return fprintf(stderr, "error: %s: %s\n", path, err), 1;
  }
  for (int i = 0; i < m->n_inputs; i++) free(ins[i].data);
  for (int i = 0; i < m->n_outputs; i++) free(outs[i].data);
  free(ins);
  free(outs);
  free(inp);
  free(outp);
  free(ws);
  return 0;
}
