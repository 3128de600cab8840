/* runtime/cuda_driver.c: the standalone main of --target cuda executables: .npy in, device run, .npy out, --bench, CUDA graphs. */
#include "runtime/primc_rt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_IO PRIMC_DRIVER_MAX_IO

static const char *usage =
    "usage: %s [IN0.npy ...] [--random-inputs] [--seed N] [-o OUTDIR] [--bench N] [--no-cuda-graphs]\n"
    "  Runs the CUDA-compiled model on the GPU (device 0, or $PRIMC_CUDA_DEVICE) on .npy inputs (in\n"
    "  the order of the model inputs; with run-time dims, of any dims in the compiled ranges) or\n"
    "  deterministic random ones (at the bounds), writes OUTDIR/out0.npy ...\n"
    "  (default: prints a summary), and with --bench N prints the min and median latency of N runs\n"
    "  (the clock read after the stream is idle). The model is captured once as a CUDA graph and\n"
    "  replayed; --no-cuda-graphs launches its kernels one by one on a stream instead (--cuda-graphs,\n"
    "  the default, is accepted).\n";

/* the CUDA main's options: the common ones and --no-cuda-graphs */
typedef struct opts {
  primc_driver_opts c;
  int no_graphs;
} opts;

/* the run's state: host arrays, device buffers, the stream's owner */
typedef struct run {
  const primc_cuda_model_desc *m;
  primc_cuda *cu;
  primc_array ins[MAX_IO], outs[MAX_IO];
  primc_devptr din[MAX_IO], dout[MAX_IO], ws;
  const int64_t *in_dims[MAX_IO + 1]; /* the inputs' dims, for a model with run-time dims */
  primc_cuda_graph *graph;
} run;

static int cuda_flag(void *ctx, int argc, char **argv, int *i) {
  opts *o = ctx;
  if (!strcmp(argv[*i], "--cuda-graphs")) return o->no_graphs = 0, 1;
  if (!strcmp(argv[*i], "--no-cuda-graphs")) return o->no_graphs = 1;
  return 0;
}

/* ---------------------------------------------------------------- host arrays */

static size_t nbytes(const primc_array *a) { return (size_t)primc_array_numel(a) * primc_dtype_size(a->dtype); }

/* the inputs (of any dims in range, with run-time dims), and host outputs of the dims they make */
static int read_inputs(run *r, const opts *o) {
  const primc_cuda_model_desc *m = r->m;
  if (primc_driver_inputs(m->inputs, m->n_inputs, o->c.random ? NULL : o->c.ins, o->c.seed, r->ins,
                          m->dims ? m->dims->input_syms : NULL))
    return 1;
  for (int i = 0; i < m->n_inputs; i++) r->in_dims[i] = r->ins[i].dims;
  for (int i = 0; i < m->n_outputs; i++) {
    primc_tensor_desc d = m->outputs[i];
    if (m->dims) {
      int st = m->output_dims(r->in_dims, i, d.dims);
      if (st != PRIMC_OK) return fprintf(stderr, "error: %s\n", m->error()), 1;
    }
    if (primc_driver_alloc(&d, &r->outs[i])) return 1;
  }
  return 0;
}

/* the model on its device buffers, enqueued on stream */
static int call_run(const run *r, void *stream) {
  const void *in[MAX_IO + 1];
  void *out[MAX_IO + 1], *ws = (void *)(uintptr_t)r->ws;
  for (int i = 0; i < r->m->n_inputs; i++) in[i] = (const void *)(uintptr_t)r->din[i];
  for (int i = 0; i < r->m->n_outputs; i++) out[i] = (void *)(uintptr_t)r->dout[i];
  return r->m->dims ? r->m->run_dims(in, r->in_dims, out, ws, stream) : r->m->run(in, out, ws, stream);
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
  int st = r->graph ? primc_cuda_graph_launch(r->cu, r->graph) : call_run(r, primc_cuda_stream(r->cu));
  if (st != PRIMC_OK) return r->graph ? cuda_failed(r, st, "graph launch") : model_failed(r, st);
  if ((st = primc_cuda_sync(r->cu)) != PRIMC_OK) return cuda_failed(r, st, "running the kernels");
  return (st = r->m->status()) != PRIMC_OK ? model_failed(r, st) : 0;
}

/* the model's launches captured once on the driver's stream */
static int capture(run *r) {
  int st = primc_cuda_capture_begin(r->cu);
  if (st != PRIMC_OK) return cuda_failed(r, st, "graph capture");
  int rs = call_run(r, primc_cuda_stream(r->cu));
  st = primc_cuda_capture_end(r->cu, &r->graph);
  if (rs != PRIMC_OK) return model_failed(r, rs);
  return st == PRIMC_OK ? 0 : cuda_failed(r, st, "graph capture (--no-cuda-graphs runs without one)");
}

static int bench(run *r, int n) {
  double *t = malloc(sizeof *t * (size_t)n);
  if (!t) return fprintf(stderr, "error: out of memory\n"), 1;
  for (int i = 0; i < n; i++) {
    double s = primc_now_ms();
    if (run_once(r)) return free(t), 1;
    t[i] = primc_now_ms() - s;
  }
  primc_sort_ms(t, n);
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
  if (read_inputs(r, o)) return 1; /* bad inputs are said before the GPU is asked for */
  int st = primc_cuda_open(dev ? atoi(dev) : 0, &r->cu, err, sizeof err);
  if (st != PRIMC_OK) return fprintf(stderr, "error: %s needs a CUDA GPU: %s\n", r->m->name, err), 1;
  if (to_device(r) || run_once(r)) return 1; /* the first run also loads the module */
  if (!o->no_graphs && capture(r)) return 1;
  if (r->graph && run_once(r)) return 1;
  if (o->c.bench > 0 && bench(r, o->c.bench)) return 1;
  if (from_device(r)) return 1;
  if (o->c.out_dir) return primc_driver_write(o->c.out_dir, r->outs, r->m->n_outputs);
  primc_driver_summary(r->m->outputs, r->outs, r->m->n_outputs);
  return 0;
}

int primc_cuda_main(int argc, char **argv, const primc_cuda_model_desc *m) {
  if (m->n_inputs > MAX_IO || m->n_outputs > MAX_IO) return fprintf(stderr, "error: more than %d inputs or outputs\n", MAX_IO), 1;
  opts o = {0};
  int rc = primc_driver_parse(argc, argv, usage, m->name, m->n_inputs, &o.c, cuda_flag, &o);
  if (rc) return rc == 1 ? 0 : 2;
  run *r = calloc(1, sizeof *r);
  if (!r) return fprintf(stderr, "error: out of memory\n"), 1;
  r->m = m;
  rc = run_model(r, &o);
  release(r);
  free(r);
  return rc;
}
