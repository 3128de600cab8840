/* tools/bench.c: `primc bench`: one model compiled fused and unfused, timed beside the interpreter, checked against it, profiled per kernel. */
#include "codegen/codegen.h"
#include "frontend/frontend.h"
#include "passes/passes.h"
#include "runtime/primc_rt.h"
#include "tools/cli.h"
#include "tools/cmds.h"

#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BN_MAX_THREADS 8
#define BN_MAX_IO 64
#define BN_INTERP_BUDGET_S 5.0 /* the interpreter stops timing after this long (3 runs at least) */

static const char *bench_help =
    "usage: primc bench MODEL [options]\n"
    "  Compiles MODEL fused (-O2) and unfused (-O2 --unfused, -O0 --unfused) into standalone\n"
    "  executables, runs them and the interpreter on the same inputs, checks every compiled\n"
    "  output against the interpreter's, and prints per thread count a table of min and median\n"
    "  latency, speedup over the -O0 unfused build and over the interpreter, and the largest\n"
    "  error; then the slowest kernels of the fused build from the per-kernel profiler, with\n"
    "  the bytes each moves. Exits 1 when a compiled output disagrees with the interpreter.\n"
    "  --runs N            timed runs per variant (default 50)\n"
    "  --threads LIST      thread counts, e.g. 1,2 (default: 1 and every core)\n"
    "  --inputs A.npy ...  the model inputs, in order (default: deterministic random ones)\n"
    "  --seed N            seed of the random inputs (default 1)\n"
    "  --target cpu        what to compile for (only cpu for now)\n"
    "  --rtol X --atol X   agreement with the interpreter: |got - ref| <= atol + rtol |ref|\n"
    "                      (default rtol 1e-4, atol 1e-5)\n"
    "  --top N             kernels shown from the profile (default 10)\n"
    "  --keep DIR          build and run in DIR and keep it (executables, inputs, outputs)\n"
    "  --weights FILE      .safetensors weights for a text graph\n"
    "  --dim NAME=N        fix a symbolic dim\n"
    "  --const NAME=VALUE  fix input NAME to a constant (3, 1.5, true, 1,2,3 or FILE.npy)\n"
    "  --matmul-precision highest|high|medium  as for compile (loosen --rtol for medium)\n"
    "  --autocast bf16|fp16  as for compile (loosen --rtol)\n";

typedef struct bench_opts {
  const char *model, *target, *keep, *weights;
  const char *inputs[BN_MAX_IO];
  int n_inputs, runs, top, n_threads;
  int threads[BN_MAX_THREADS];
  uint64_t seed;
  double rtol, atol;
  pc_cli_model read; /* --dim, --const */
} bench_opts;

/* a compiled build of the model; speedups are against the first */
typedef struct variant {
  const char *label, *id;
  int opt, unfused;
} variant;

static const variant variants[] = {
    {"unfused -O0", "unfused-O0", 0, 1},
    {"unfused -O2", "unfused-O2", 2, 1},
    {"fused -O2", "fused-O2", 2, 0},
};
#define N_VARIANTS (int)(sizeof variants / sizeof *variants)

/* one row of a table: timings and agreement with the interpreter */
typedef struct row {
  double min_ms, med_ms, max_abs, max_rel, compile_s;
  int ok, ran;
} row;

typedef struct bench_run {
  bench_opts o;
  char dir[4096];
  pc_graph *g; /* the interpreted graph */
  pc_tensor ins[BN_MAX_IO], ref[BN_MAX_IO];
  row interp;
  int interp_runs;
  row rows[BN_MAX_THREADS][N_VARIANTS];
  double compile_s[N_VARIANTS];
} bench_run;

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* ---------------------------------------------------------------- options */

static int parse_threads(const char *s, bench_opts *o) {
  o->n_threads = 0;
  while (*s) {
    char *end;
    long n = strtol(s, &end, 10);
    if (end == s || n < 1 || n > 256 || o->n_threads >= BN_MAX_THREADS) return 0;
    o->threads[o->n_threads++] = (int)n;
    s = *end == ',' ? end + 1 : end;
    if (*end && *end != ',') return 0;
  }
  return o->n_threads > 0;
}

static void default_threads(bench_opts *o) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  o->threads[0] = 1;
  o->n_threads = 1;
  if (n > 1) o->threads[o->n_threads++] = (int)(n < 256 ? n : 256);
}

/* the option's value, or NULL (and an error) when it is the last argument */
static const char *value(int argc, char **argv, int *i) {
  if (*i + 1 < argc) return argv[++*i];
  fprintf(stderr, "primc bench: option '%s' needs a value\n", argv[*i]);
  return NULL;
}

/* returns -1 to go on, else the exit code */
static int parse(int argc, char **argv, bench_opts *o) {
  memset(o, 0, sizeof *o);
  o->runs = 50, o->top = 10, o->seed = 1, o->rtol = 1e-4, o->atol = 1e-5, o->target = "cpu";
  default_threads(o);
  const char *v;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) return fputs(bench_help, stdout), 0;
    if (!strcmp(a, "--inputs")) {
      while (i + 1 < argc && argv[i + 1][0] != '-' && o->n_inputs < BN_MAX_IO) o->inputs[o->n_inputs++] = argv[++i];
      if (!o->n_inputs) return pc_cli_usage_error(bench_help, "--inputs needs .npy files");
      continue;
    }
    int has_value = !strcmp(a, "--runs") || !strcmp(a, "--threads") || !strcmp(a, "--seed") || !strcmp(a, "--target") ||
                    !strcmp(a, "--rtol") || !strcmp(a, "--atol") || !strcmp(a, "--top") || !strcmp(a, "--keep") ||
                    !strcmp(a, "--weights") || pc_cli_model_takes(a);
    if (has_value && !(v = value(argc, argv, &i))) return 2;
    if (!has_value && a[0] == '-' && a[1]) return fprintf(stderr, "primc bench: unknown option '%s'\n%s", a, bench_help), 2;
    if (!has_value) {
      if (o->model) return pc_cli_usage_error(bench_help, "more than one MODEL");
      o->model = a;
    } else if (!strcmp(a, "--runs")) {
      if ((o->runs = atoi(v)) < 1) return pc_cli_usage_error(bench_help, "--runs needs a count >= 1");
    } else if (!strcmp(a, "--threads")) {
      if (!parse_threads(v, o)) return pc_cli_usage_error(bench_help, "bad --threads (expected e.g. 1,2)");
    } else if (!strcmp(a, "--seed")) o->seed = strtoull(v, NULL, 10);
    else if (!strcmp(a, "--target")) o->target = v;
    else if (!strcmp(a, "--rtol")) o->rtol = atof(v);
    else if (!strcmp(a, "--atol")) o->atol = atof(v);
    else if (!strcmp(a, "--top")) o->top = atoi(v);
    else if (!strcmp(a, "--keep")) o->keep = v;
    else if (!strcmp(a, "--weights")) o->weights = v;
    else if (pc_cli_model_option(&o->read, a, v) < 0)
      return 2;
  }
  if (!o->model) return pc_cli_usage_error(bench_help, "missing MODEL");
  if (strcmp(o->target, "cpu") != 0) {
    fprintf(stderr, "primc bench: target '%s' is not supported (cpu only for now)\n", o->target);
    return 2;
  }
  return -1;
}

/* ---------------------------------------------------------------- work folder */

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  return remove(path);
}

static int make_dir(bench_run *b) {
  if (b->o.keep) {
    snprintf(b->dir, sizeof b->dir, "%s", b->o.keep);
    if (mkdir(b->dir, 0777) != 0 && errno != EEXIST)
      return fprintf(stderr, "primc: error: cannot create %s: %s\n", b->dir, strerror(errno)), 0;
    return 1;
  }
  const char *tmp = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  snprintf(b->dir, sizeof b->dir, "%s/primc-bench-XXXXXX", tmp);
  if (!mkdtemp(b->dir)) return fprintf(stderr, "primc: error: cannot create a folder in %s\n", tmp), 0;
  return 1;
}

static void drop_dir(const bench_run *b) {
  if (!b->o.keep && b->dir[0]) nftw(b->dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* ---------------------------------------------------------------- model, inputs, interpreter */

static pc_graph *load(const bench_opts *o) {
  for (int i = 0; i < o->read.n_dims; i++) /* the builds compared run one size; a range is compile's */
    if (o->read.dims[i].lo != o->read.dims[i].hi) {
      fprintf(stderr, "primc: error: bench times one size: give --dim %s=VALUE; one binary for the range "
              "%lld..%lld is `primc compile --dim %s=%lld..%lld` (bench/dynamic_peers.py times it)\n",
              o->read.dims[i].name, (long long)o->read.dims[i].lo, (long long)o->read.dims[i].hi,
              o->read.dims[i].name, (long long)o->read.dims[i].lo, (long long)o->read.dims[i].hi);
      return NULL;
    }
  pc_import_opts io = pc_cli_import_opts(&o->read, o->weights, 0);
  pc_graph *g = pc_model_load(o->model, &io);
  if (!g) fprintf(stderr, "primc: error: out of memory loading %s\n", o->model);
  else if (g->status != PC_OK) fprintf(stderr, "primc: error: %s\n", pc_error(g)), pc_graph_free(g), g = NULL;
  else if (pc_cli_model_apply(&o->read, g) != PC_OK) pc_graph_free(g), g = NULL;
  return g;
}

static primc_array as_array(const pc_tensor *t) {
  primc_array a = {(primc_dtype)t->dtype, t->rank, {0}, t->data};
  memcpy(a.dims, t->dims, sizeof a.dims);
  return a;
}

/* the inputs (given or random) in b->ins, also written to DIR/inN.npy for the executables */
static int make_inputs(bench_run *b) {
  pc_graph *g = b->g;
  if (g->n_inputs > BN_MAX_IO || g->n_outputs > BN_MAX_IO) return fprintf(stderr, "primc: error: too many inputs/outputs\n"), 0;
  pc_cli cli;
  memset(&cli, 0, sizeof cli);
  cli.random_inputs = b->o.n_inputs == 0;
  cli.seed = b->o.seed;
  if (pc_cli_inputs(&cli, g, b->o.n_inputs, b->o.inputs, b->ins) != 0) return 0;
  for (int i = 0; i < g->n_inputs; i++) {
    char path[4200], err[256];
    snprintf(path, sizeof path, "%s/in%d.npy", b->dir, i);
    primc_array a = as_array(&b->ins[i]);
    if (primc_npy_write(path, &a, err, sizeof err) != 0) return fprintf(stderr, "primc: error: %s: %s\n", path, err), 0;
  }
  return 1;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* times the interpreter; its first run's outputs are the reference */
static int time_interp(bench_run *b) {
  pc_graph *g = b->g;
  double *t = calloc((size_t)b->o.runs, sizeof *t), spent = 0;
  if (!t) return 0;
  int n = 0;
  fprintf(stderr, "bench: interpreting %s ...\n", b->o.model);
  for (; n < b->o.runs && (n < 3 || spent < BN_INTERP_BUDGET_S); n++) {
    pc_tensor outs[BN_MAX_IO];
    memset(outs, 0, sizeof outs);
    double s = now_s();
    pc_status st = pc_interp(g, b->ins, g->n_inputs, n ? outs : b->ref, g->n_outputs);
    t[n] = (now_s() - s) * 1e3;
    spent += t[n] / 1e3;
    for (int i = 0; n && i < g->n_outputs; i++) pc_tensor_free(&outs[i]);
    if (st != PC_OK) return fprintf(stderr, "primc: error: interpreter: %s\n", pc_error(g)), free(t), 0;
  }
  qsort(t, (size_t)n, sizeof *t, cmp_double);
  b->interp = (row){.min_ms = t[0], .med_ms = t[n / 2], .ok = 1, .ran = 1};
  b->interp_runs = n;
  free(t);
  return 1;
}

/* ---------------------------------------------------------------- compiling and running */

static void exe_path(const bench_run *b, const char *id, char *out, size_t n) { snprintf(out, n, "%s/%s", b->dir, id); }

/* the model through the same steps as `primc compile` (tools/compile.c), to an executable */
static int compile_variant(bench_run *b, const variant *v, int profile, const char *out) {
  double t0 = now_s();
  fprintf(stderr, "bench: compiling %s%s ...\n", v->label, profile ? " with --profile" : "");
  pc_graph *g = load(&b->o);
  if (!g) return 0;
  pc_pipeline_opts po = {.opt_level = v->opt, .unfused = v->unfused};
  pc_codegen_opts co = {.emit = PC_EMIT_EXE, .output = out, .opt_level = v->opt, .profile = profile};
  pc_status s = pc_pipeline_run(g, &po);
  if (s == PC_OK) s = pc_codegen(g, &co);
  if (s != PC_OK) fprintf(stderr, "primc: error: %s: %s\n", v->label, pc_error(g));
  pc_graph_free(g);
  if (!profile) b->compile_s[v - variants] = now_s() - t0;
  return s == PC_OK;
}

/* runs argv with PRIMC_NUM_THREADS=threads, its stdout into out; the exit status, -1 when it did not exit */
static int run_capture(char *const *argv, int threads, char *out, size_t cap) {
  int fd[2];
  if (pipe(fd) != 0) return -1;
  fflush(stdout), fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) return close(fd[0]), close(fd[1]), -1;
  if (pid == 0) {
    char t[16];
    snprintf(t, sizeof t, "%d", threads);
    setenv("PRIMC_NUM_THREADS", t, 1);
    dup2(fd[1], 1);
    close(fd[0]), close(fd[1]);
    execv(argv[0], argv);
    _exit(127);
  }
  close(fd[1]);
  size_t n = 0;
  ssize_t r;
  char sink[4096];
  while ((r = read(fd[0], n + 1 < cap ? out + n : sink, n + 1 < cap ? cap - 1 - n : sizeof sink)) > 0)
    if (n + 1 < cap) n += (size_t)r;
  out[n] = 0;
  close(fd[0]);
  int status;
  if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

/* EXE in0.npy ... --bench RUNS [-o OUTDIR] [--profile] */
static int run_exe(const bench_run *b, const char *exe, int threads, const char *out_dir, int profile, char *text,
                   size_t cap) {
  char *argv[BN_MAX_IO + 10], runs[16], in[BN_MAX_IO][4200];
  int n = 0;
  argv[n++] = (char *)exe;
  for (int i = 0; i < b->g->n_inputs; i++) {
    snprintf(in[i], sizeof in[i], "%s/in%d.npy", b->dir, i);
    argv[n++] = in[i];
  }
  snprintf(runs, sizeof runs, "%d", b->o.runs);
  argv[n++] = "--bench", argv[n++] = runs;
  if (out_dir) argv[n++] = "-o", argv[n++] = (char *)out_dir;
  if (profile) argv[n++] = "--profile";
  argv[n] = NULL;
  int rc = run_capture(argv, threads, text, cap);
  if (rc != 0) fprintf(stderr, "primc: error: %s exited with %d\n", exe, rc);
  return rc == 0;
}

/* ---------------------------------------------------------------- agreement with the interpreter */

/* folds one output into r: max |got - ref|, max |got - ref| / (|ref| + atol), and whether all are within tolerance */
static void compare(const bench_opts *o, const pc_tensor *ref, const primc_array *got, row *r) {
  int same = (int)got->dtype == (int)ref->dtype && got->rank == ref->rank;
  for (int d = 0; same && d < ref->rank; d++) same = got->dims[d] == ref->dims[d];
  if (!same) {
    r->ok = 0, r->max_abs = INFINITY;
    return;
  }
  int64_t n = pc_tensor_numel(ref) * (ref->dtype == PC_c64 ? 2 : 1);
  pc_dtype lane = ref->dtype == PC_c64 ? PC_f32 : ref->dtype; /* complex: both halves */
  for (int64_t k = 0; k < n; k++) {
    double g = pc_elem_f64(lane, got->data, k), w = pc_elem_f64(lane, ref->data, k);
    if (isnan(g) || isnan(w) || isinf(g) || isinf(w)) {
      if (!(isnan(g) && isnan(w)) && g != w) r->ok = 0, r->max_abs = INFINITY;
      continue;
    }
    double d = fabs(g - w);
    if (d > r->max_abs) r->max_abs = d;
    if (d / (fabs(w) + o->atol) > r->max_rel) r->max_rel = d / (fabs(w) + o->atol);
    if (d > o->atol + o->rtol * fabs(w)) r->ok = 0;
  }
}

static int check_outputs(const bench_run *b, const char *out_dir, row *r) {
  r->ok = 1;
  for (int i = 0; i < b->g->n_outputs; i++) {
    char path[4400], err[256];
    primc_array a;
    snprintf(path, sizeof path, "%s/out%d.npy", out_dir, i);
    if (primc_npy_read(path, &a, err, sizeof err) != 0) {
      fprintf(stderr, "primc: error: %s: %s\n", path, err);
      return r->ok = 0;
    }
    compare(&b->o, &b->ref[i], &a, r);
    free(a.data);
  }
  return r->ok;
}

/* one variant at one thread count: timings from the executable's --bench line, outputs checked */
static int bench_variant(bench_run *b, int vi, int ti) {
  char exe[4200], out_dir[4300], text[4096];
  exe_path(b, variants[vi].id, exe, sizeof exe);
  snprintf(out_dir, sizeof out_dir, "%s/out-%s-t%d", b->dir, variants[vi].id, b->o.threads[ti]);
  row *r = &b->rows[ti][vi];
  fprintf(stderr, "bench: running %s, %d thread%s, %d runs ...\n", variants[vi].label, b->o.threads[ti],
          b->o.threads[ti] == 1 ? "" : "s", b->o.runs);
  if (!run_exe(b, exe, b->o.threads[ti], out_dir, 0, text, sizeof text)) return 0;
  const char *line = strstr(text, " runs, min ");
  if (!line || sscanf(line, " runs, min %lf ms, median %lf ms", &r->min_ms, &r->med_ms) != 2)
    return fprintf(stderr, "primc: error: no timing line in the output of %s\n", exe), 0;
  r->ran = 1;
  return check_outputs(b, out_dir, r);
}

/* ---------------------------------------------------------------- report */

static void print_row(const char *label, const row *r, const row *base, const row *interp) {
  char err[64];
  if (r == interp) snprintf(err, sizeof err, "reference");
  else if (isinf(r->max_abs)) snprintf(err, sizeof err, "MISMATCH (shape or NaN/inf)");
  else snprintf(err, sizeof err, "%.1e abs, %.1e rel%s", r->max_abs, r->max_rel, r->ok ? "" : "  MISMATCH");
  printf("| %-12s | %9.3f | %9.3f | %9.2fx | %9.2fx | %-28s |\n", label, r->min_ms, r->med_ms, base->med_ms / r->med_ms,
         interp->med_ms / r->med_ms, err);
}

static void print_table(const bench_run *b, int ti) {
  printf("\n%d thread%s:\n", b->o.threads[ti], b->o.threads[ti] == 1 ? "" : "s");
  printf("| %-12s | %9s | %9s | %10s | %10s | %-28s |\n", "variant", "min ms", "median ms", "vs unfused", "vs interp",
         "max error vs interpreter");
  printf("|--------------|-----------|-----------|------------|------------|------------------------------|\n");
  const row *base = &b->rows[ti][0];
  print_row("interpreter", &b->interp, base, &b->interp);
  for (int v = 0; v < N_VARIANTS; v++)
    if (b->rows[ti][v].ran) print_row(variants[v].label, &b->rows[ti][v], base, &b->interp);
}

static void print_header(const bench_run *b) {
  printf("primc bench %s: %d input%s (%s), %d runs per variant, interpreter %d run%s\n", b->o.model, b->g->n_inputs,
         b->g->n_inputs == 1 ? "" : "s", b->o.n_inputs ? "given" : "random", b->o.runs, b->interp_runs,
         b->interp_runs == 1 ? "" : "s");
  printf("compile time:");
  for (int v = 0; v < N_VARIANTS; v++) printf("%s %s %.2f s", v ? "," : "", variants[v].label, b->compile_s[v]);
  printf("\nagreement: |compiled - interpreter| <= %g + %g |interpreter| for every output element\n", b->o.atol,
         b->o.rtol);
}

/* ---------------------------------------------------------------- profile */

typedef struct prof_row {
  char kernel[16], name[256], origin[256];
  long long calls, bytes;
  double total_ms, pct;
} prof_row;

/* the rows of the table runtime/driver.c documents; the header line's runs count in *runs */
static int parse_profile(char *text, prof_row *rows, int cap, int *runs) {
  int n = 0;
  *runs = 1;
  for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
    const char *h = strstr(line, "# profile ");
    if (h && strchr(h, ':')) sscanf(strchr(h, ':'), ": %d runs", runs);
    if (line[0] != 'k' || n >= cap) continue;
    prof_row *r = &rows[n];
    if (sscanf(line, "%15s %255s %255s %lld %lf %lf %lld", r->kernel, r->name, r->origin, &r->calls, &r->total_ms,
               &r->pct, &r->bytes) == 7 && r->kernel[1] >= '0' && r->kernel[1] <= '9')
      n++;
  }
  return n;
}

static void print_profile(const bench_run *b, prof_row *rows, int n, int runs, int threads) {
  int top = b->o.top < n ? b->o.top : n;
  double shown = 0;
  for (int i = 0; i < top; i++) shown += rows[i].pct;
  printf("\nslowest kernels of fused -O2 (per-kernel profiler, %d thread%s, %d runs; %d of %d kernels, %.1f%% of kernel "
         "time):\n", threads, threads == 1 ? "" : "s", runs, top, n, shown);
  printf("| %-6s | %9s | %5s | %11s | %7s | %-40s | %s\n", "kernel", "ms/run", "%", "bytes/call", "GB/s", "prims",
         "origin");
  printf("|--------|-----------|-------|-------------|---------|------------------------------------------|-------\n");
  for (int i = 0; i < top; i++) {
    const prof_row *r = &rows[i];
    double per_call_s = r->calls ? r->total_ms / 1e3 / (double)r->calls : 0;
    printf("| %-6s | %9.4f | %5.1f | %11lld | %7.2f | %-40.40s | %s\n", r->kernel, r->total_ms / runs, r->pct, r->bytes,
           per_call_s > 0 ? (double)r->bytes / per_call_s / 1e9 : 0.0, r->name, r->origin);
  }
}

/* a build of the fused variant with the profiler, run at the first thread count */
static int profile_fused(bench_run *b) {
  const variant *v = &variants[N_VARIANTS - 1];
  char exe[4200];
  exe_path(b, "fused-O2-profile", exe, sizeof exe);
  if (!compile_variant(b, v, 1, exe)) return 0;
  fprintf(stderr, "bench: profiling %s ...\n", v->label);
  size_t cap = 1 << 20;
  char *text = malloc(cap);
  prof_row *rows = calloc(4096, sizeof *rows);
  int ok = text && rows && run_exe(b, exe, b->o.threads[0], NULL, 1, text, cap), runs = 1;
  int n = ok ? parse_profile(text, rows, 4096, &runs) : 0;
  if (ok && n == 0) fprintf(stderr, "primc: error: no kernel rows in the profile of %s\n", exe), ok = 0;
  if (ok) print_profile(b, rows, n, runs, b->o.threads[0]);
  free(text);
  free(rows);
  return ok;
}

/* ---------------------------------------------------------------- command */

static int bench_all(bench_run *b) {
  if (!make_dir(b) || !(b->g = load(&b->o)) || !make_inputs(b) || !time_interp(b)) return 1;
  char exe[4200];
  for (int v = 0; v < N_VARIANTS; v++) {
    exe_path(b, variants[v].id, exe, sizeof exe);
    if (!compile_variant(b, &variants[v], 0, exe)) return 1;
  }
  int agree = 1, ran = 1;
  for (int t = 0; t < b->o.n_threads; t++)
    for (int v = 0; v < N_VARIANTS; v++) {
      bench_variant(b, v, t);
      ran &= b->rows[t][v].ran;
      agree &= b->rows[t][v].ok || !b->rows[t][v].ran;
    }
  print_header(b);
  for (int t = 0; t < b->o.n_threads; t++) print_table(b, t);
  fflush(stdout);
  int profiled = ran && profile_fused(b);
  if (!agree) printf("\nbench: a compiled output disagrees with the interpreter (see MISMATCH above)\n");
  return agree && ran && profiled ? 0 : 1;
}

int pc_cmd_bench(int argc, char **argv) {
  bench_run *b = calloc(1, sizeof *b);
  if (!b) return 1;
  int rc = parse(argc, argv, &b->o);
  if (rc < 0) rc = bench_all(b);
  drop_dir(b);
  for (int i = 0; b->g && i < b->g->n_inputs; i++) pc_tensor_free(&b->ins[i]);
  for (int i = 0; b->g && i < b->g->n_outputs; i++) pc_tensor_free(&b->ref[i]);
  pc_graph_free(b->g);
  pc_cli_model_free(&b->o.read);
  free(b);
  return rc;
}
