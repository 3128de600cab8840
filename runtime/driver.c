/* runtime/driver.c: the standalone main linked into `primc compile` executables: .npy in, .npy out, --bench. */
/*
 * --profile (the model compiled with `primc compile --profile`) prints, after the runs
 * (the --bench N runs when given, else the one run), this table on stdout:
 *
 *   # profile MODEL: RUNS runs, THREADS threads, RUN_MS ms/run median, kernels KERNEL_MS ms/run
 *   kernel  name  origin  calls  total_ms  pct  bytes_moved  min_ms  median_ms
 *   k12  dot_general+add+max  Gemm:/fc1/Gemm  50  1.234  35.2  524288  0.0240  0.0245
 *   ...
 *   # total  KERNEL_TOTAL_MS ms over RUNS runs
 *
 * Lines starting with '#' are comments. Each row is one kernel that ran, sorted by
 * total_ms, largest first; its 9 fields are separated by runs of spaces and contain no
 * whitespace themselves (line.split() gives them):
 *   kernel       kN, the kernel's id (the kN of `primc dump --kernels` / `compile --report`)
 *   name         the kernel's prims joined by '+', a GEMM's fused epilogue included
 *   origin       the model node it came from, "OpType:node_name" ("-" when unknown)
 *   calls        times it ran over all counted runs
 *   total_ms     wall time summed over those calls, in ms (%.4f)
 *   pct          share of the sum of all kernels' total_ms, in percent (%.1f)
 *   bytes_moved  bytes of the distinct buffers it reads and writes, per call
 *   min_ms       its fastest call, in ms (%.4f; "-" when no call was recorded)
 *   median_ms    its median call, in ms: unlike total_ms, one preempted call does not move it
 * --trace FILE.json writes the same calls as Chrome trace events ("ph": "X", ts and dur in us) with
 * each kernel's model node in args.origin: tid 1 the calling thread, which runs the kernels one after
 * another, and tid 2.. each pool worker's share of a parallel kernel, named by that kernel;
 * chrome://tracing and ui.perfetto.dev open it.
 */
#include "runtime/primc_rt.h"


#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern const primc_model_desc *const primc_main_model;

static const char *usage =
    "usage: %s [IN0.npy ...] [--random-inputs] [--seed N] [-o OUTDIR] [--bench N [--cold]] [--weights FILE]\n"
    "          [--profile] [--trace FILE.json]\n"
    "  Runs the compiled model on .npy inputs (in the order of the model inputs) or on\n"
    "  deterministic random ones, writes OUTDIR/out0.npy ... (default: prints a summary),\n"
    "  and with --bench N prints the min and median latency of N runs. --profile (when compiled\n"
    "  with `primc compile --profile`) prints the time of every kernel; --trace FILE.json writes\n"
    "  every kernel call as a Chrome trace (chrome://tracing, ui.perfetto.dev). --cold writes 256 MiB\n"
    "  before each timed run, so every run reads its weights from memory, not cache.\n"
    "A training step (primc compile --train) takes one .npy dataset per input before its state (rows of\n"
    "the input's shape without the batch dim) and runs --steps N (default 1) steps on consecutive batches\n"
    "of them, printing the loss every --log-every K steps (default 1) and the time per step; --save\n"
    "FILE.safetensors writes the trained weights, -o OUTDIR the last step's outputs and state, --profile the\n"
    "time of every kernel over the steps. --batch B cuts batches of B rows, for a step compiled with its\n"
    "batch a range (--dim N=LO..HI). --epochs E in place of --steps: E passes over the datasets in order,\n"
    "each ending with a batch of the rows left over (a step with its batch a range takes it; --drop-last\n"
    "skips it), the mean loss of each epoch printed; --shuffle SEED orders each epoch's rows as the next\n"
    "numpy.random.RandomState(SEED).permutation does.\n";

/* the CPU main's own options beside primc_driver_opts */
typedef struct cpu_opts {
  int profile;
  const char *trace; /* --trace FILE */
  int cold; /* --cold: each timed run starts with the caches flushed of the model's data */
  const char *weights;
  primc_train_opts train; /* --steps, --epochs, --log-every, --save, --batch, --drop-last, --shuffle */
  int train_flag;         /* one of them was given */
  int steps_given;        /* --steps (which --epochs replaces) */
  int bad;                /* a bad value, said on stderr */
} cpu_opts;

/* s as a whole number in lo..hi (lo >= 0), else -1 */
static int64_t int_arg(const char *s, int64_t lo, int64_t hi) {
  char *end;
  long long v = strtoll(s, &end, 10);
  return end != s && !*end && v >= lo && v <= hi ? (int64_t)v : -1;
}

static int cpu_flag(void *ctx, int argc, char **argv, int *i) {
  cpu_opts *c = ctx;
  if (!strcmp(argv[*i], "--profile")) return c->profile = 1;
  if (!strcmp(argv[*i], "--cold")) return c->cold = 1;
  if (!strcmp(argv[*i], "--weights") && *i + 1 < argc) return c->weights = argv[++*i], 1;
  if (!strcmp(argv[*i], "--trace") && *i + 1 < argc) return c->trace = argv[++*i], 1;
  if (!strcmp(argv[*i], "--save") && *i + 1 < argc) return c->train.save = argv[++*i], c->train_flag = 1;
  if (!strcmp(argv[*i], "--drop-last")) return c->train.drop_last = 1, c->train_flag = 1;
  if (!strcmp(argv[*i], "--shuffle") && *i + 1 < argc) {
    if ((c->train.shuffle = int_arg(argv[*i + 1], 0, 0xffffffffLL)) < 0)
      c->bad = fprintf(stderr, "error: --shuffle takes a seed 0..4294967295, not '%s'\n", argv[*i + 1]) > 0;
    ++*i;
    return c->train_flag = 1;
  }
  if ((!strcmp(argv[*i], "--steps") || !strcmp(argv[*i], "--log-every") || !strcmp(argv[*i], "--batch") ||
       !strcmp(argv[*i], "--epochs")) && *i + 1 < argc) {
    if (argv[*i][2] == 's') c->steps_given = 1;
    int64_t *dst = argv[*i][2] == 's' ? &c->train.steps : argv[*i][2] == 'b' ? &c->train.batch
                 : argv[*i][2] == 'e' ? &c->train.epochs : &c->train.log_every;
    if ((*dst = int_arg(argv[*i + 1], 1, INT64_MAX)) < 0)
      c->bad = fprintf(stderr, "error: %s takes a count >= 1, not '%s'\n", argv[*i], argv[*i + 1]) > 0;
    ++*i;
    return c->train_flag = 1;
  }
  return 0;
}

/* more than a CPU's last-level cache: writing a byte of each line evicts the model's weights and activations */
#define COLD_BYTES ((size_t)256 << 20)
/* kernel calls recorded for --profile's min and median and --trace: 96 MiB at most */
#define PROF_MAX_EVENTS ((int64_t)4 << 20)

/* median ms per run in *median; with a flush buffer, it is written before each run (not timed) */
static int bench(const primc_model_desc *m, const void **in, const int64_t *const *dims, void **out, void *ws, int n,
                 char *flush, double *median) {
  double *t = malloc(sizeof *t * (size_t)n);
  if (!t) return 1;
  for (int i = 0; i < n; i++) {
    for (size_t b = 0; flush && b < COLD_BYTES; b += 64) flush[b] = (char)i; /* a line each: memset streams past the cache */
    double s = primc_now_ms();
    if (m->run_dims(in, dims, out, ws) != 0) return free(t), 1;
    t[i] = primc_now_ms() - s;
  }
  primc_sort_ms(t, n);
  printf("%s: %d runs, min %.3f ms, median %.3f ms\n", m->name, n, t[0], t[n / 2]);
  *median = t[n / 2];
  free(t);
  return 0;
}

static int load_weights(const primc_model_desc *m, const cpu_opts *o, const char *argv0) {
  if (!m->load_weights) return 0;
  char path[4096];
  if (o->weights) snprintf(path, sizeof path, "%s", o->weights);
  else snprintf(path, sizeof path, "%s.weights", argv0);
  if (m->load_weights(path) == 0) return 0;
  /* why: the same checks without the model's size (a file that passes them is another model's) */
  char why[4400];
  void *base;
  if (primc_weights_map_err(path, -1, &base, why, sizeof why) == PRIMC_OK)
    snprintf(why, sizeof why, "%s: its size is not this model's weights size (another model's weights?)", path);
  fprintf(stderr, "error: cannot load weights file: %s\n", why);
  return 1;
}

/* what main allocates, freed on every exit after it (the error exits included) */
typedef struct run_bufs {
  primc_array *ins, *outs;
  const void **inp;
  const int64_t **dims; /* each input's dims */
  void **outp;
  void *ws;
  char *flush;
  primc_prof_event *events; /* the recorded kernel calls (--profile, --trace) */
  int n_ins, n_outs;
} run_bufs;

static int run_bufs_free(run_bufs *r, int rc) {
  for (int i = 0; r->ins && i < r->n_ins; i++) free(r->ins[i].data);
  for (int i = 0; r->outs && i < r->n_outs; i++) free(r->outs[i].data);
  free(r->ins);
  free(r->outs);
  free(r->inp);
  free(r->dims);
  free(r->outp);
  free(r->ws);
  free(r->flush);
  primc_prof_record(NULL, 0);
  free(r->events);
  return rc;
}

/* loads, runs and reports once the options are parsed and the weights mapped; 0, or 1 after an error */
static int run_model(const primc_model_desc *m, const primc_driver_opts *o, const cpu_opts *c, run_bufs *r) {
  r->n_ins = m->n_inputs, r->n_outs = m->n_outputs;
  r->ins = calloc((size_t)m->n_inputs + 1, sizeof *r->ins), r->outs = calloc((size_t)m->n_outputs + 1, sizeof *r->outs);
  r->inp = calloc((size_t)m->n_inputs + 1, sizeof *r->inp);
  r->dims = calloc((size_t)m->n_inputs + 1, sizeof *r->dims);
  r->outp = calloc((size_t)m->n_outputs + 1, sizeof *r->outp);
  r->ws = primc_driver_big_alloc((size_t)m->workspace_size);
  if (!r->ins || !r->outs || !r->inp || !r->dims || !r->outp || !r->ws) return fprintf(stderr, "error: out of memory\n"), 1;
  if (primc_driver_inputs(m->inputs, m->n_inputs, o->random ? NULL : o->ins, o->seed, r->ins, m->dims->input_syms))
    return 1;
  for (int i = 0; i < m->n_inputs; i++) r->inp[i] = r->ins[i].data, r->dims[i] = r->ins[i].dims;
  /* run-time dims: the inputs' dims within the ranges compiled in, and agreeing on each symbol */
  int64_t values[PRIMC_MAX_RANK * 4];
  char msg[512];
  if (primc_dims_check(m->dims, r->dims, values, msg, sizeof msg) != PRIMC_OK)
    return fprintf(stderr, "error: %s\n", msg), 1;
  for (int i = 0; i < m->n_outputs; i++) {
    if (primc_driver_alloc(&m->outputs[i], &r->outs[i])) return 1;
    r->outp[i] = r->outs[i].data;
  }
  /* every call of the counted runs recorded, for per-call statistics and the trace (a bounded buffer) */
  int runs = o->bench > 0 ? o->bench : 1;
  int64_t cap = m->profile ? (int64_t)m->profile->n_kernels * (2 + 2 * primc_num_threads()) * runs : 0;
  if (cap > PROF_MAX_EVENTS) cap = PROF_MAX_EVENTS;
  r->events = cap && (c->profile || c->trace) ? malloc(sizeof *r->events * (size_t)cap) : NULL;
  primc_prof_record(r->events, cap);
  double run_ms = primc_now_ms();
  int st = m->run_dims(r->inp, r->dims, r->outp, r->ws);
  run_ms = primc_now_ms() - run_ms;
  if (st != 0) return fprintf(stderr, "error: %s_run returned %d\n", m->name, st), 1;
  if (o->bench > 0 && m->profile) primc_prof_reset(m->profile), primc_prof_record(r->events, cap);
  r->flush = c->cold ? malloc(COLD_BYTES) : NULL;
  if (c->cold && !r->flush) return fprintf(stderr, "error: out of memory\n"), 1;
  if (o->bench > 0 && bench(m, r->inp, r->dims, r->outp, r->ws, o->bench, r->flush, &run_ms)) return 1;
  int64_t n_ev = primc_prof_recorded();
  primc_prof_record(NULL, 0);
  if (c->profile) primc_driver_profile_print(m, runs, run_ms, r->events, n_ev);
  if (c->trace && primc_driver_trace_write(c->trace, m, r->events, n_ev)) return 1;
  for (int i = 0; i < m->n_outputs; i++) /* outputs whose size the data decides are written at that size */
    if (m->output_dims(r->ws, i, r->outs[i].dims) != 0) return fprintf(stderr, "error: %s_output_dims failed\n", m->name), 1;
  if (!o->out_dir) primc_driver_summary(m->outputs, r->outs, m->n_outputs);
  else if (primc_driver_write(o->out_dir, r->outs, m->n_outputs)) return 1;
  return 0;
}

int main(int argc, char **argv) {
  const primc_model_desc *m = primc_main_model;
  primc_driver_opts o;
  cpu_opts c = {0};
  c.train.steps = 1, c.train.log_every = 1, c.train.shuffle = -1;
  int n_state = m->state ? m->state->n : 0;
  int rc = primc_driver_parse(argc, argv, usage, m->name, m->n_inputs - n_state, &o, cpu_flag, &c);
  if (rc || c.bad) return rc == 1 ? 0 : 2;
  if (c.train_flag && !m->state)
    return fprintf(stderr, "error: %s is not a training step (compiled without --train): --steps, --epochs, "
                   "--log-every, --save and --batch are for one\n", m->name), 2;
  if (c.steps_given && c.train.epochs)
    return fprintf(stderr, "error: give --steps or --epochs (an epoch's steps follow from the datasets' rows)\n"), 2;
  if ((c.train.drop_last || c.train.shuffle >= 0) && !c.train.epochs)
    return fprintf(stderr, "error: %s shapes --epochs: give it\n", c.train.drop_last ? "--drop-last" : "--shuffle"), 2;
  if ((c.profile || c.trace) && !m->profile)
    return fprintf(stderr, "error: %s was not compiled with --profile (%s needs it)\n", m->name,
                   c.profile ? "--profile" : "--trace"), 2;
  if (m->state) {
    if (o.bench > 0 || c.trace || c.weights)
      return fprintf(stderr, "error: a training step takes --steps or --epochs, --log-every, --save, --batch, "
                     "--drop-last, --shuffle, --profile, -o and its datasets\n"), 2;
    c.train.profile = c.profile;
    return primc_train_main(m, &o, &c.train);
  }
  if (c.cold && o.bench <= 0) return fprintf(stderr, "error: --cold times --bench runs: give --bench N\n"), 2;
  if (c.weights && !m->load_weights)
    return fprintf(stderr, "error: %s holds its weights (compiled without --weights external): --weights %s would "
                   "not be read\n", m->name, c.weights), 2;
  if (load_weights(m, &c, argv[0])) return 1;
  run_bufs r = {0};
  return run_bufs_free(&r, run_model(m, &o, &c, &r));
}
