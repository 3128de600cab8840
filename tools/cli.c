/* tools/cli.c: the option parsing, model loading and .npy handling every subcommand shares. */
#include "tools/cli.h"

#include "passes/passes.h"
#include "runtime/primc_rt.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>
#include <sys/stat.h>

int pc_cli_usage_error(const char *help, const char *msg) {
  fprintf(stderr, "primc: %s\n%s", msg, help);
  return 2;
}

int pc_cli_parse_size(const char *s, int64_t *out) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || end == s || v < 0) return 0;
  int shift = *end == 'K' ? 10 : *end == 'M' ? 20 : *end == 'G' ? 30 : 0;
  if (shift) end++;
  if (*end || v > (INT64_MAX >> shift)) return 0;
  *out = (int64_t)v << shift;
  return 1;
}

int64_t pc_cli_default_mem_limit(void) {
  FILE *f = fopen("/proc/meminfo", "r");
  if (!f) return 0;
  char line[256];
  long long kb = 0;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "MemAvailable: %lld kB", &kb) == 1) break;
  fclose(f);
  return kb > 0 ? (int64_t)kb * 1024 : 0;
}

/* an .npy array as the tensor it holds (the data moves over; the dtype codes are the same) */
static pc_tensor tensor_of(const primc_array *a) {
  pc_tensor t;
  memset(&t, 0, sizeof t);
  t.dtype = (pc_dtype)a->dtype;
  t.rank = a->rank;
  memcpy(t.dims, a->dims, sizeof t.dims);
  t.data = a->data;
  return t;
}

static const char *const transform_options[] = {"--loss", "--label", "--optimizer", "--lr", "--weight-decay", "--momentum", "--eps", "--vmap"};

static int transform_option(const char *a) {
  for (size_t i = 0; i < sizeof transform_options / sizeof *transform_options; i++)
    if (!strcmp(a, transform_options[i])) return (int)i;
  return -1;
}

int pc_cli_model_takes(const char *a) {
  return !strcmp(a, "--dim") || !strcmp(a, "--const") || !strcmp(a, "--matmul-precision") || !strcmp(a, "--autocast") ||
         transform_option(a) >= 0;
}

/* a number for --lr and friends: finite, and >= 0 */
static int parse_rate(const char *v, double *out) {
  char *end;
  double x = strtod(v, &end);
  if (end == v || *end || !(x >= 0) || x > 1e30) return 0;
  *out = x;
  return 1;
}

static int transform_option_set(pc_cli_model *m, int which, const char *a, const char *v) {
  pc_train_opts *t = &m->train_opts;
  if (which != 7 && !m->train_opts_set) pc_train_opts_default(t), m->train_opts_set = 1;
  switch (which) { /* the rows of transform_options */
  case 0:
    if ((t->loss = pc_loss_parse(v)) < 0) return fprintf(stderr, "primc: bad --loss '%s' (expected mse or cross_entropy)\n", v), -1;
    return 1;
  case 1: t->label = v; return 1;
  case 7: { /* --vmap NAME[,NAME]=B */
    const char *eq = strrchr(v, '=');
    char *end;
    long long b = eq ? strtoll(eq + 1, &end, 10) : 0;
    if (!eq || eq == v || b < 1 || *end || (size_t)(eq - v) >= sizeof m->vmap_names)
      return fprintf(stderr, "primc: bad --vmap '%s' (expected NAME[,NAME...]=B)\n", v), -1;
    memcpy(m->vmap_names, v, (size_t)(eq - v));
    m->vmap_names[eq - v] = 0;
    m->vmap_batch = b;
    return 1;
  }
  case 2:
    if ((t->optimizer = pc_optim_parse(v)) < 0)
      return fprintf(stderr, "primc: bad --optimizer '%s' (expected sgd, momentum, adam or adamw)\n", v), -1;
    return 1;
  default: {
    double *dst = which == 3 ? &t->lr : which == 4 ? &t->weight_decay : which == 5 ? &t->momentum : &t->eps;
    if (!parse_rate(v, dst)) return fprintf(stderr, "primc: bad %s '%s' (expected a number >= 0)\n", a, v), -1;
    return 1;
  }
  }
}

int pc_cli_model_flag(pc_cli_model *m, const char *a) {
  if (!strcmp(a, "--grad")) return m->grad = 1;
  if (!strcmp(a, "--jvp")) return m->jvp = 1;
  if (!strcmp(a, "--train")) return m->train = 1;
  return 0;
}

pc_transforms pc_cli_transforms(const pc_cli_model *m) {
  pc_transforms t;
  memset(&t, 0, sizeof t);
  t.vmap_inputs = m->vmap_names, t.vmap_batch = m->vmap_batch;
  t.grad = m->grad, t.jvp = m->jvp, t.train = m->train;
  if (m->train_opts_set) t.train_opts = m->train_opts;
  else pc_train_opts_default(&t.train_opts);
  return t;
}

pc_status pc_cli_model_apply(const pc_cli_model *m, pc_graph *g) {
  g->matmul_precision = m->matmul_precision;
  g->autocast = m->autocast;
  pc_transforms t = pc_cli_transforms(m);
  if (m->train_opts_set && !m->train)
    pc_fail(g, PC_ERR_ATTR, "--loss, --label, --optimizer, --lr, --weight-decay, --momentum and --eps need --train");
  else pc_apply_transforms(g, &t);
  if (g->status) fprintf(stderr, "primc: error: %s\n", pc_error(g));
  else if (g->tied_note) fputs("primc: note: --train: ", stderr), primc_text_put(stderr, g->tied_note), fputc('\n', stderr);
  return g->status;
}

int pc_cli_model_option(pc_cli_model *m, const char *a, const char *v) {
  int dim = !strcmp(a, "--dim"), prec = !strcmp(a, "--matmul-precision"), cast = !strcmp(a, "--autocast");
  if (!pc_cli_model_takes(a)) return 0;
  if (!v) return fprintf(stderr, "primc: option '%s' needs a value\n", a), -1;
  if (transform_option(a) >= 0) return transform_option_set(m, transform_option(a), a, v);
  if (cast) {
    if ((m->autocast = pc_autocast_parse(v)) < 0)
      return fprintf(stderr, "primc: bad --autocast '%s' (expected bf16, fp16 or none)\n", v), -1;
    return 1;
  }
  if (prec) {
    if ((m->matmul_precision = pc_matmul_precision_parse(v)) < 0)
      return fprintf(stderr, "primc: bad --matmul-precision '%s' (expected highest, high or medium)\n", v), -1;
    return 1;
  }
  if (dim) {
    if (m->n_dims >= PC_CLI_MAX || !pc_dim_spec_parse(v, &m->dims[m->n_dims], m->dim_names[m->n_dims], sizeof m->dim_names[0]))
      return fprintf(stderr, "primc: bad --dim '%s' (expected NAME=N, NAME=LO..HI, NAME=LO..HI:STEP or "
                     "NAME=LO..HI%%M[:STEP], LO, HI and STEP multiples of M)\n", v), -1;
    m->n_dims++;
    return 1;
  }
  if (m->n_consts >= PC_CLI_MAX) return fprintf(stderr, "primc: more than %d --const options\n", PC_CLI_MAX), -1;
  pc_const_input *c = &m->consts[m->n_consts];
  char *name = m->const_names[m->n_consts], err[512];
  size_t len = strlen(v), nl = strcspn(v, "=");
  if (len > 4 && !strcmp(v + len - 4, ".npy") && v[nl] == '=' && nl > 0 && nl < sizeof m->const_names[0]) {
    primc_array arr;
    if (primc_npy_read(v + nl + 1, &arr, err, sizeof err) != 0) return fprintf(stderr, "primc: --const %s\n", err), -1;
    memset(c, 0, sizeof *c);
    memcpy(name, v, nl);
    name[nl] = 0;
    c->name = name;
    c->value = tensor_of(&arr);
  } else if (!pc_const_spec_parse(v, c, name, sizeof m->const_names[0], err, sizeof err)) {
    return fprintf(stderr, "primc: bad --const %s (expected NAME=VALUE: 3, 1.5, true, 1,2,3 or FILE.npy)\n", err), -1;
  }
  m->n_consts++;
  return 1;
}

void pc_cli_model_free(pc_cli_model *m) {
  for (int i = 0; i < m->n_consts; i++) pc_tensor_free(&m->consts[i].value);
  m->n_consts = 0;
}

void pc_cli_free(pc_cli *cli) { pc_cli_model_free(&cli->model); }

pc_import_opts pc_cli_import_opts(const pc_cli_model *m, const char *weights, int64_t mem_limit) {
  pc_import_opts o;
  memset(&o, 0, sizeof o);
  o.dims = m->dims, o.n_dims = m->n_dims, o.weights_path = weights;
  o.consts = m->consts, o.n_consts = m->n_consts, o.mem_limit = mem_limit;
  o.keep_weights = m->grad || m->train;
  o.gradient = pc_grad_values;
  return o;
}

/* value of an option that takes one: "--x V" */
static const char *opt_value(int argc, char **argv, int *i) {
  if (*i + 1 >= argc) return NULL;
  return argv[++*i];
}

int pc_cli_parse(pc_cli *cli, int argc, char **argv, const char *help) {
  memset(cli, 0, sizeof *cli);
  cli->seed = 1;
  cli->mem_limit = pc_cli_default_mem_limit();
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      fputs(help, stdout);
      cli->exit_code = 0;
      return 1;
    } else if (!strcmp(a, "-o")) {
      if (!(cli->out_dir = opt_value(argc, argv, &i))) goto missing;
    } else if (!strcmp(a, "--weights")) {
      if (!(cli->weights = opt_value(argc, argv, &i))) goto missing;
    } else if (!strcmp(a, "--save-weights")) {
      if (!(cli->save_weights = opt_value(argc, argv, &i))) goto missing;
    } else if (!strcmp(a, "--mem-limit")) {
      if (!(v = opt_value(argc, argv, &i))) goto missing;
      if (!pc_cli_parse_size(v, &cli->mem_limit)) {
        fprintf(stderr, "primc: bad --mem-limit '%s' (bytes, or with K, M, G; 0: none)\n", v);
        cli->exit_code = 2;
        return 1;
      }
    } else if (!strcmp(a, "--random-inputs")) {
      cli->random_inputs = 1;
    } else if (!strcmp(a, "--seed")) {
      if (!(v = opt_value(argc, argv, &i))) goto missing;
      cli->seed = strtoull(v, NULL, 10);
    } else if (pc_cli_model_flag(&cli->model, a)) {
    } else if (pc_cli_model_takes(a)) {
      if (pc_cli_model_option(&cli->model, a, opt_value(argc, argv, &i)) < 0) {
        cli->exit_code = 2;
        return 1;
      }
    } else if (a[0] == '-' && a[1]) {
      fprintf(stderr, "primc: unknown option '%s'\n%s", a, help);
      cli->exit_code = 2;
      return 1;
    } else {
      if (cli->n_pos >= PC_CLI_MAX) {
        fprintf(stderr, "primc: too many arguments\n");
        cli->exit_code = 2;
        return 1;
      }
      cli->pos[cli->n_pos++] = argv[i];
    }
    continue;
  missing:
    fprintf(stderr, "primc: option '%s' needs a value\n", a);
    cli->exit_code = 2;
    return 1;
  }
  return 0;
}

static double wall_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

typedef struct progress_impl {
  pthread_t thread;
  pthread_mutex_t lock;
} progress_impl;

static void progress_draw(pc_cli_progress *p, double now) {
  if (p->total > 0)
    fprintf(stderr, "\rprimc: %s %lld/%lld (%.1f s)\033[K", p->phase, (long long)p->done, (long long)p->total, now - p->t0);
  else fprintf(stderr, "\rprimc: %s (%.1f s)\033[K", p->phase, now - p->t0);
  fflush(stderr);
  p->printed = 1;
}

static void *progress_ticker(void *arg) {
  pc_cli_progress *p = arg;
  progress_impl *im = p->impl;
  for (;;) {
    struct timespec ts = {0, 200 * 1000 * 1000};
    nanosleep(&ts, NULL);
    pthread_mutex_lock(&im->lock);
    int stop = p->stop;
    double now = wall_s();
    if (!stop && p->phase && now - p->t0 >= p->after) progress_draw(p, now);
    pthread_mutex_unlock(&im->lock);
    if (stop) return NULL;
  }
}

double pc_cli_now(void) { return wall_s(); }

void pc_cli_progress_init(pc_cli_progress *p, int quiet, double t0) {
  memset(p, 0, sizeof *p);
  p->t0 = t0;
  const char *a = getenv("PRIMC_PROGRESS_AFTER");
  p->after = a && *a ? atof(a) : 1.0;
  progress_impl *im = !quiet && isatty(2) ? calloc(1, sizeof *im) : NULL;
  if (!im) return;
  pthread_mutex_init(&im->lock, NULL);
  p->impl = im;
  if (pthread_create(&im->thread, NULL, progress_ticker, p) != 0) {
    pthread_mutex_destroy(&im->lock);
    free(im);
    p->impl = NULL;
    return;
  }
  p->on = 1;
}

void pc_cli_progress_fn(void *ctx, const char *phase, int64_t done, int64_t total) {
  pc_cli_progress *p = ctx;
  if (!p->on) return;
  progress_impl *im = p->impl;
  pthread_mutex_lock(&im->lock);
  p->phase = phase, p->done = done, p->total = total;
  double now = wall_s();
  if (!p->printed && now - p->t0 >= p->after) progress_draw(p, now); /* the first line at once, the rest by the ticker */
  pthread_mutex_unlock(&im->lock);
}

void pc_cli_progress_end(pc_cli_progress *p, int ok) {
  if (!p->on) return;
  progress_impl *im = p->impl;
  pthread_mutex_lock(&im->lock);
  p->stop = 1;
  pthread_mutex_unlock(&im->lock);
  pthread_join(im->thread, NULL);
  pthread_mutex_destroy(&im->lock);
  free(im);
  p->impl = NULL, p->on = 0;
  if (!p->printed) return;
  if (ok) fprintf(stderr, "\rprimc: compiled in %.1f s\033[K\n", wall_s() - p->t0);
  else fprintf(stderr, "\r\033[K"); /* the error line follows on a clean line */
}

void pc_cli_print_report(FILE *f, const char *report) {
  for (const char *l = report; l && *l;) {
    const char *e = strchr(l, '\n');
    int n = e ? (int)(e - l) : (int)strlen(l);
    fputs("  ", f), primc_text_putn(f, l, (size_t)n), fputc('\n', f);
    l += n + (e != NULL);
  }
}

void pc_cli_more_problems(const char *path, const pc_import_opts *io) {
  pc_import_opts o = *io;
  pc_check_result r;
  memset(&r, 0, sizeof r);
  o.check = &r;
  pc_graph *g = pc_model_load(path, &o);
  if (g && r.n_nodes > 1) {
    fprintf(stderr, "primc: %d nodes cannot be imported, not only the first (`primc check` lists them):\n", r.n_nodes);
    pc_cli_print_report(stderr, r.report);
  }
  pc_graph_free(g);
  pc_check_result_free(&r);
}

pc_graph *pc_cli_load_model(const pc_cli *cli) {
  pc_import_opts o = pc_cli_import_opts(&cli->model, cli->weights, cli->mem_limit);
  pc_graph *g = pc_model_load(cli->pos[0], &o);
  if (!g) {
    fprintf(stderr, "primc: error: out of memory loading %s\n", cli->pos[0]);
    return NULL;
  }
  if (g->status != PC_OK) {
    fprintf(stderr, "primc: error: %s\n", pc_error(g));
    if (g->status == PC_ERR_UNSUPPORTED) pc_cli_more_problems(cli->pos[0], &o);
    pc_graph_free(g);
    return NULL;
  }
  g->mem_limit = cli->mem_limit;
  if (pc_cli_model_apply(&cli->model, g) != PC_OK) {
    pc_graph_free(g);
    return NULL;
  }
  return g;
}

/* splitmix64: a small, well-mixed generator for reproducible random inputs */
static uint64_t next_random(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static int random_tensor(const pc_type *t, uint64_t *state, pc_tensor *out) {
  if (!pc_type_is_static(t)) return -1;
  out->dtype = t->dtype;
  out->rank = t->rank;
  memcpy(out->dims, t->dims, sizeof out->dims);
  int64_t n = pc_type_numel(t);
  out->data = malloc((size_t)n * pc_dtype_size(t->dtype) + 1);
  if (!out->data) return -1;
  for (int64_t i = 0; i < n; i++) {
    uint64_t r = next_random(state);
    double u = (double)(r >> 11) * (1.0 / 9007199254740992.0) * 2 - 1; /* [-1, 1) */
    unsigned char *p = (unsigned char *)out->data + (size_t)i * pc_dtype_size(t->dtype);
    switch (t->dtype) { /* the value each storage type gets */
    case PC_f32: *(float *)p = (float)u; break;
    case PC_f64: *(double *)p = u; break;
    case PC_f16: *(uint16_t *)p = pc_f32_to_f16((float)u); break;
    case PC_bf16: *(uint16_t *)p = pc_f32_to_bf16((float)u); break;
    case PC_c64: ((float *)p)[0] = (float)u; ((float *)p)[1] = (float)(r & 0xff) / 256.0f; break;
    case PC_bool: *p = r & 1; break;
    case PC_i8: *(int8_t *)p = (int8_t)(r % 8); break;
    case PC_u8: *p = (uint8_t)(r % 8); break;
    case PC_u16: *(uint16_t *)p = (uint16_t)(r % 8); break;
    case PC_i4: case PC_i2: case PC_u4: case PC_u2: *p = (uint8_t)(r % 2); break;
    case PC_u32: *(uint32_t *)p = (uint32_t)(r % 8); break;
    case PC_u64: *(uint64_t *)p = r % 8; break;
    case PC_f8e4m3fn: case PC_f8e4m3fnuz: case PC_f8e5m2: case PC_f8e5m2fnuz: case PC_f4e2m1: case PC_f8e8m0: *p = pc_f32_to_f8(t->dtype, (float)u, 0); break;
    case PC_i16: *(int16_t *)p = (int16_t)(r % 8); break;
    case PC_i32: *(int32_t *)p = (int32_t)(r % 8); break;
    case PC_i64: *(int64_t *)p = (int64_t)(r % 8); break;
    case PC_DTYPE_COUNT: break;
    }
  }
  return 0;
}

static void format_type(char *buf, size_t n, pc_dtype dt, int rank, const int64_t *dims) {
  int k = snprintf(buf, n, "%s[", pc_dtype_name(dt));
  for (int i = 0; i < rank && k > 0 && (size_t)k < n; i++)
    k += snprintf(buf + k, n - (size_t)k, "%s%lld", i ? "," : "", (long long)dims[i]);
  if (k > 0 && (size_t)k < n) snprintf(buf + k, n - (size_t)k, "]");
}

/* checks an .npy array against the graph input it feeds (symbolic dims accept any size) */
static int check_input(const pc_graph *g, int i, const primc_array *a, const char *path) {
  const pc_type *t = &g->inputs[i]->type;
  int ok = (int)a->dtype == (int)t->dtype && a->rank == t->rank;
  for (int d = 0; ok && d < t->rank; d++) ok = PC_DIM_IS_SYM(t->dims[d]) || t->dims[d] == a->dims[d];
  if (ok) return 0;
  char want[128], got[128];
  format_type(want, sizeof want, t->dtype, t->rank, t->dims);
  format_type(got, sizeof got, (pc_dtype)a->dtype, a->rank, a->dims);
  fprintf(stderr, "primc: error: input %d (%s) expects %s, %s holds %s\n", i,
          g->inputs[i]->name ? g->inputs[i]->name : "?", want, path, got);
  return -1;
}

/* a training step's state input i (of g's last n_state) at its first value */
static int state_tensor(const pc_graph *g, int i, pc_tensor *out) {
  const pc_type *t = &g->inputs[g->n_inputs - g->n_state + i]->type;
  size_t bytes = (size_t)pc_type_numel(t) * pc_dtype_size(t->dtype);
  out->dtype = t->dtype, out->rank = t->rank;
  memcpy(out->dims, t->dims, sizeof out->dims);
  if (!(out->data = calloc(1, bytes + 1))) return -1;
  if (g->state_init[i]) memcpy(out->data, g->state_init[i], bytes);
  return 0;
}

int pc_cli_inputs(const pc_cli *cli, const pc_graph *g, int n, const char *const *paths, pc_tensor *ins) {
  /* a training step's state starts at its first values unless given */
  int n_data = g->n_inputs - g->n_state;
  if (g->n_state && (cli->random_inputs || n == n_data)) {
    for (int i = 0; i < g->n_state; i++)
      if (state_tensor(g, i, &ins[n_data + i]) != 0) return fprintf(stderr, "primc: error: out of memory\n"), -1;
    pc_graph view = *g;
    view.n_inputs = n_data, view.n_state = 0;
    return pc_cli_inputs(cli, &view, n, paths, ins);
  }
  if (cli->random_inputs) {
    uint64_t state = cli->seed;
    int64_t bytes = 0;
    for (int i = 0; i < g->n_inputs; i++) {
      const pc_type *t = &g->inputs[i]->type;
      bytes += pc_type_is_static(t) ? pc_type_numel(t) * (int64_t)pc_dtype_size(t->dtype) : 0;
    }
    if (cli->mem_limit > 0 && bytes > cli->mem_limit) {
      fprintf(stderr, "primc: error: random inputs of %lld bytes are over the memory limit of %lld bytes (--mem-limit)\n",
              (long long)bytes, (long long)cli->mem_limit);
      return -1;
    }
    for (int i = 0; i < g->n_inputs; i++)
      if (random_tensor(&g->inputs[i]->type, &state, &ins[i]) != 0) {
        fprintf(stderr, "primc: error: cannot make a random input for %s (symbolic dims: fix them with --dim)\n",
                g->inputs[i]->name ? g->inputs[i]->name : "?");
        return -1;
      }
    return 0;
  }
  if (n != g->n_inputs) {
    fprintf(stderr, "primc: error: the model takes %d input%s, %d .npy file%s given (or use --random-inputs)\n",
            g->n_inputs, g->n_inputs == 1 ? "" : "s", n, n == 1 ? "" : "s");
    return -1;
  }
  for (int i = 0; i < n; i++) {
    primc_array a;
    char err[256];
    if (primc_npy_read(paths[i], &a, err, sizeof err) != 0) {
      fprintf(stderr, "primc: error: %s: %s\n", paths[i], err);
      return -1;
    }
    if (check_input(g, i, &a, paths[i]) != 0) {
      free(a.data);
      return -1;
    }
    ins[i] = tensor_of(&a);
  }
  return 0;
}

int pc_cli_write_outputs(const char *dir, const pc_graph *g, const pc_tensor *outs) {
  if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
    fprintf(stderr, "primc: error: cannot create %s: %s\n", dir, strerror(errno));
    return 1;
  }
  for (int i = 0; i < g->n_outputs; i++) {
    char path[4096], err[256];
    snprintf(path, sizeof path, "%s/out%d.npy", dir, i);
    primc_array a = {(primc_dtype)outs[i].dtype, outs[i].rank, {0}, outs[i].data};
    memcpy(a.dims, outs[i].dims, sizeof a.dims);
    if (primc_npy_write(path, &a, err, sizeof err) != 0) {
      fprintf(stderr, "primc: error: %s: %s\n", path, err);
      return 1;
    }
  }
  return 0;
}
