/* runtime/cuda_driver.c: the standalone main of --target cuda executables: .npy in, device run, .npy out, --bench, CUDA graphs. */
#include "runtime/primc_rt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define MAX_IO 64

static const char *usage =
    "usage: %s [IN0.npy ...] [--random-inputs] [--seed N] [-o OUTDIR] [--bench N] [--cuda-graphs]\n"
    "  Runs the CUDA-compiled model on the GPU (device 0, or $PRIMC_CUDA_DEVICE) on .npy inputs (in\n"
    "  the order of the model inputs) or deterministic random ones, writes OUTDIR/out0.npy ...\n"
    "  (default: prints a summary), and with --bench N prints the min and median latency of N runs\n"
    "  (the clock read after the stream is idle). --cuda-graphs captures the model once as a CUDA\n"
    "  graph and replays it. PRIMC_CUDA_SYNC=1 waits after each kernel to name a failing one.\n";

typedef struct opts {
  const char *ins[MAX_IO];
  int n_ins, random, bench, graphs;
  unsigned long long seed;
  const char *out_dir;
} opts;

/* the run's state: host arrays, device buffers, the stream's owner */
typedef struct run {
  const primc_cuda_model_desc *m;
  primc_cuda *cu;
  primc_array ins[MAX_IO], outs[MAX_IO];
  primc_devptr din[MAX_IO], dout[MAX_IO], ws;
  primc_cuda_graph *graph;
} run;

static int parse(int argc, char **argv, opts *o) {
  memset(o, 0, sizeof *o);
  o->seed = 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int has = i + 1 < argc;
    if (!strcmp(a, "--random-inputs")) o->random = 1;
    else if (!strcmp(a, "--cuda-graphs")) o->graphs = 1;
    else if (!strcmp(a, "-o") && has) o->out_dir = argv[++i];
    else if (!strcmp(a, "--bench") && has) o->bench = atoi(argv[++i]);
    else if (!strcmp(a, "--seed") && has) o->seed = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(a, "-h") || !strcmp(a, "--help")) return fprintf(stdout, usage, argv[0]), 1;
    else if (a[0] == '-' && a[1]) return fprintf(stderr, usage, argv[0]), 2;
    else if (o->n_ins < MAX_IO) o->ins[o->n_ins++] = a;
  }
  return 0;
}

/* ---------------------------------------------------------------- host arrays */

static uint64_t next_rand(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

/* uniform in [-1, 1) for floats, 0..9 for integers, 0/1 for bools (as the CPU driver draws them) */
static void fill_random(primc_array *a, uint64_t *s) {
  int64_t n = primc_array_numel(a);
  size_t es = primc_dtype_size(a->dtype);
  for (int64_t i = 0; i < n; i++) {
    uint64_t r = next_rand(s);
    double u = (double)(r >> 11) / 9007199254740992.0 * 2 - 1;
    void *p = (char *)a->data + (size_t)i * es;
    if (a->dtype == PRIMC_F32) *(float *)p = (float)u;
    else if (a->dtype == PRIMC_F64) *(double *)p = u;
    else if (a->dtype == PRIMC_BOOL) *(uint8_t *)p = r & 1;
    else if (a->dtype == PRIMC_I32) *(int32_t *)p = (int32_t)(r % 10);
    else if (a->dtype == PRIMC_I64) *(int64_t *)p = (int64_t)(r % 10);
    else *(uint8_t *)p = (uint8_t)(r % 10); /* low byte */
  }
}

static size_t nbytes(const primc_array *a) { return (size_t)primc_array_numel(a) * primc_dtype_size(a->dtype); }

static int alloc_array(const primc_tensor_desc *d, primc_array *a) {
  a->dtype = (primc_dtype)d->dtype;
  a->rank = d->rank;
  memcpy(a->dims, d->dims, sizeof a->dims);
  a->data = calloc(1, nbytes(a) + 1);
  return a->data != NULL;
}

static int check_input(const primc_tensor_desc *d, const primc_array *a, const char *path) {
  int ok = (int)a->dtype == d->dtype && a->rank == d->rank;
  for (int i = 0; ok && i < d->rank; i++) ok = a->dims[i] == d->dims[i];
  if (!ok) fprintf(stderr, "error: %s does not match input \"%s\" (dtype %d rank %d expected)\n", path, d->name,
                   d->dtype, d->rank);
  return ok;
}

static int read_inputs(run *r, const opts *o) {
  uint64_t seed = o->seed * 0x9E3779B97F4A7C15ull + 1;
  char err[256];
  for (int i = 0; i < r->m->n_inputs; i++) {
    primc_array *a = &r->ins[i];
    if (o->random) {
      if (!alloc_array(&r->m->inputs[i], a)) return fprintf(stderr, "error: out of memory\n"), 1;
      fill_random(a, &seed);
    } else if (primc_npy_read(o->ins[i], a, err, sizeof err) != 0) {
      return fprintf(stderr, "error: %s: %s\n", o->ins[i], err), 1;
    } else if (!check_input(&r->m->inputs[i], a, o->ins[i])) {
      return 1;
    }
  }
  for (int i = 0; i < r->m->n_outputs; i++)
    if (!alloc_array(&r->m->outputs[i], &r->outs[i])) return fprintf(stderr, "error: out of memory\n"), 1;
  return 0;
}

/* ---------------------------------------------------------------- the device */

static int cuda_failed(const run *r, int st, const char *what) {
  fprintf(stderr, "error: %s: %s (status %d)\n", what, primc_cuda_error(r->cu), st);
  return 1;
}

static int model_failed(const run *r, int st) {
  fprintf(stderr, "error: %s_run returned %d: %s\n", r->m->name, st, r->m->error());
  return 1;
}

/* device buffers for inputs (uploaded), outputs and the workspace */
static int to_device(run *r) {
  int st = PRIMC_OK;
  for (int i = 0; st == PRIMC_OK && i < r->m->n_inputs; i++) {
    st = primc_cuda_alloc(r->cu, nbytes(&r->ins[i]), &r->din[i]);
    if (st == PRIMC_OK) st = primc_cuda_upload(r->cu, r->din[i], r->ins[i].data, nbytes(&r->ins[i]));
  }
  for (int i = 0; st == PRIMC_OK && i < r->m->n_outputs; i++) st = primc_cuda_alloc(r->cu, nbytes(&r->outs[i]), &r->dout[i]);
  if (st == PRIMC_OK) st = primc_cuda_alloc(r->cu, (size_t)r->m->workspace_size, &r->ws);
  return st == PRIMC_OK ? 0 : cuda_failed(r, st, "device memory");
}

/* one run on the driver's stream (a graph replay once captured), then a wait and the data status */
static int run_once(run *r) {
  const void *in[MAX_IO + 1];
  void *out[MAX_IO + 1];
  for (int i = 0; i < r->m->n_inputs; i++) in[i] = (const void *)(uintptr_t)r->din[i];
  for (int i = 0; i < r->m->n_outputs; i++) out[i] = (void *)(uintptr_t)r->dout[i];
  int st = r->graph ? primc_cuda_graph_launch(r->cu, r->graph)
                    : r->m->run(in, out, (void *)(uintptr_t)r->ws, primc_cuda_stream(r->cu));
  if (st != PRIMC_OK) return r->graph ? cuda_failed(r, st, "graph launch") : model_failed(r, st);
  if ((st = primc_cuda_sync(r->cu)) != PRIMC_OK) return cuda_failed(r, st, "running the kernels");
  return (st = r->m->status()) != PRIMC_OK ? model_failed(r, st) : 0;
}

/* the model's launches captured once on the driver's stream */
static int capture(run *r) {
  const void *in[MAX_IO + 1];
  void *out[MAX_IO + 1];
  for (int i = 0; i < r->m->n_inputs; i++) in[i] = (const void *)(uintptr_t)r->din[i];
  for (int i = 0; i < r->m->n_outputs; i++) out[i] = (void *)(uintptr_t)r->dout[i];
  int st = primc_cuda_capture_begin(r->cu);
  if (st != PRIMC_OK) return cuda_failed(r, st, "graph capture");
  int rs = r->m->run(in, out, (void *)(uintptr_t)r->ws, primc_cuda_stream(r->cu));
  st = primc_cuda_capture_end(r->cu, &r->graph);
  if (rs != PRIMC_OK) return model_failed(r, rs);
  return st == PRIMC_OK ? 0 : cuda_failed(r, st, "graph capture");
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

static int bench(run *r, int n) {
  double *t = malloc(sizeof *t * (size_t)n);
  if (!t) return fprintf(stderr, "error: out of memory\n"), 1;
  for (int i = 0; i < n; i++) {
    double s = now_ms();
    if (run_once(r)) return free(t), 1;
    t[i] = now_ms() - s;
  }
  qsort(t, (size_t)n, sizeof *t, cmp_double);
  printf("%s: %d runs%s, min %.3f ms, median %.3f ms\n", r->m->name, n, r->graph ? " (CUDA graph)" : "", t[0], t[n / 2]);
  free(t);
  return 0;
}

/* ---------------------------------------------------------------- outputs */

static int from_device(run *r) {
  for (int i = 0; i < r->m->n_outputs; i++) {
    int st = primc_cuda_download(r->cu, r->outs[i].data, r->dout[i], nbytes(&r->outs[i]));
    if (st != PRIMC_OK) return cuda_failed(r, st, "copying the outputs back");
  }
  return 0;
}

static void summary(const run *r) {
  for (int i = 0; i < r->m->n_outputs; i++) {
    const primc_array *a = &r->outs[i];
    printf("out%d %s [", i, r->m->outputs[i].name);
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

static int write_outputs(const run *r, const char *dir) {
  char err[256], path[4096];
  mkdir(dir, 0777); /* an existing one is fine */
  for (int i = 0; i < r->m->n_outputs; i++) {
    snprintf(path, sizeof path, "%s/out%d.npy", dir, i);
    if (primc_npy_write(path, &r->outs[i], err, sizeof err) != 0) return fprintf(stderr, "error: %s: %s\n", path, err), 1;
  }
  return 0;
}

static void release(run *r) {
  if (r->cu) {
    primc_cuda_graph_free(r->cu, r->graph);
    for (int i = 0; i < r->m->n_inputs; i++) primc_cuda_free(r->cu, r->din[i]);
    for (int i = 0; i < r->m->n_outputs; i++) primc_cuda_free(r->cu, r->dout[i]);
    primc_cuda_free(r->cu, r->ws);
    primc_cuda_close(r->cu);
  }
  for (int i = 0; i < r->m->n_inputs; i++) free(r->ins[i].data);
  for (int i = 0; i < r->m->n_outputs; i++) free(r->outs[i].data);
}

static int run_model(run *r, const opts *o) {
  char err[512];
  const char *dev = getenv("PRIMC_CUDA_DEVICE");
  int st = primc_cuda_open(dev ? atoi(dev) : 0, &r->cu, err, sizeof err);
  if (st != PRIMC_OK) return fprintf(stderr, "error: %s needs a CUDA GPU: %s\n", r->m->name, err), 1;
  if (read_inputs(r, o) || to_device(r) || run_once(r)) return 1; /* the first run also loads the module */
  if ((o->graphs || r->m->cuda_graphs) && capture(r)) return 1;
  if (r->graph && run_once(r)) return 1;
  if (o->bench > 0 && bench(r, o->bench)) return 1;
  if (from_device(r)) return 1;
  if (o->out_dir) return write_outputs(r, o->out_dir);
  summary(r);
  return 0;
}

int primc_cuda_main(int argc, char **argv, const primc_cuda_model_desc *m) {
  opts o;
  int rc = parse(argc, argv, &o);
  if (rc) return rc == 1 ? 0 : 2;
  if (m->n_inputs > MAX_IO || m->n_outputs > MAX_IO) return fprintf(stderr, "error: more than %d inputs or outputs\n", MAX_IO), 1;
  if (!o.random && o.n_ins != m->n_inputs) {
    fprintf(stderr, "error: %s expects %d input(s), got %d (or pass --random-inputs)\n", m->name, m->n_inputs, o.n_ins);
    return 2;
  }
  run *r = calloc(1, sizeof *r);
  if (!r) return fprintf(stderr, "error: out of memory\n"), 1;
  r->m = m;
  rc = run_model(r, &o);
  release(r);
  free(r);
  return rc;
}
