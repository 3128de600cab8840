/* codegen/autotune.c: `--autotune`: times the rows that can run each conv on this machine, keeps the fastest, caches the choice per CPU. */
#include "codegen/autotune.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define AT_HEADER "# primc autotune cache 1: CPU<TAB>conv signature<TAB>row (primc compile --autotune)"
#define AT_MAX_CANDS 16
#define AT_MIN_ROUNDS 5
#define AT_MAX_ROUNDS 9
#define AT_MARGIN 0.97 /* another row replaces the heuristic's only when its best time is this much of it or less */
#define AT_PRUNE 2.0   /* rows this many times slower than the best in the first round are not timed again */

enum { AT_UNUSED, AT_CACHED, AT_TIMED };

typedef struct at_entry {
  char *shape, *opts; /* the signature: the conv, then the plan options and threads */
  int row, heur;      /* the choice and the planner's row (-1 until known) */
  int how;            /* AT_CACHED (read, valid) or AT_TIMED; AT_UNUSED: read but not asked for yet */
  int used;           /* asked for by this context (counted in the stats) */
} at_entry;

struct pc_autotune {
  char path[4096];
  char cpu[256];
  char warning[4800];
  char **other; /* cache lines of other CPUs, kept as they are */
  int n_other, cap_other;
  at_entry *e;
  int n, cap;
  int dirty;
  double budget, seconds;
};

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static char *dup_str(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

/* ---------------------------------------------------------------- the keys */

/* "AMD EPYC 7B13 (AuthenticAMD family 25 model 1) isa 2 zmm 0": what the cache's choices hold for */
static void cpu_key(char *out, size_t n) {
  char vendor[64] = "?", family[16] = "?", model[16] = "?", name[128] = "?", line[512];
  FILE *f = fopen("/proc/cpuinfo", "r");
  while (f && fgets(line, sizeof line, f)) {
    char *colon = strchr(line, ':');
    if (!colon) {
      if (strcmp(name, "?")) break; /* the first processor's block ended */
      continue;
    }
    char *v = colon + 1;
    while (*v == ' ' || *v == '\t') v++;
    v[strcspn(v, "\n")] = 0;
    *colon = 0;
    for (char *k = colon - 1; k >= line && (*k == ' ' || *k == '\t'); k--) *k = 0;
    char *slot = !strcmp(line, "vendor_id") ? vendor : !strcmp(line, "cpu family") ? family
                 : !strcmp(line, "model")   ? model  : !strcmp(line, "model name") ? name : NULL;
    size_t cap = slot == vendor ? sizeof vendor : slot == name ? sizeof name : sizeof family;
    if (slot && !strcmp(slot, "?")) snprintf(slot, cap, "%s", v);
  }
  if (f) fclose(f);
  snprintf(out, n, "%s (%s family %s model %s) isa %d zmm %d", name, vendor, family, model, primc_sgemm_isa(),
           primc_cpu_zmm_fmas());
  for (char *c = out; *c; c++)
    if (*c == '\t' || *c == '\n' || *c == '\r') *c = ' ';
}

static void shape_key(const primc_conv2d *c, char *out, size_t n) {
  snprintf(out, n, "n%lld c%lld h%lld w%lld o%lld k%lldx%lld g%lld s%lldx%lld d%lldx%lld p%lld,%lld,%lld,%lld",
           (long long)c->n, (long long)c->c, (long long)c->h, (long long)c->w, (long long)c->o, (long long)c->kh,
           (long long)c->kw, (long long)c->groups, (long long)c->stride_h, (long long)c->stride_w, (long long)c->dil_h,
           (long long)c->dil_w, (long long)c->pad_t, (long long)c->pad_l, (long long)c->pad_b, (long long)c->pad_r);
}

static int threads_of(const primc_conv_plan_opts *o) { return o->threads > 0 ? o->threads : primc_threads_wanted(); }

static void opts_key(const primc_conv_plan_opts *o, char *out, size_t n) {
  snprintf(out, n, "t%d pk%d l%d mr%d sc%d", threads_of(o), o->packable != 0, o->packable ? 0 : o->layout, o->tile_mr,
           o->has_scratch != 0);
}

static at_entry *find(const pc_autotune *t, const char *shape, const char *opts) {
  for (int i = 0; i < t->n; i++)
    if (!strcmp(t->e[i].shape, shape) && !strcmp(t->e[i].opts, opts)) return &t->e[i];
  return NULL;
}

static at_entry *add(pc_autotune *t, const char *shape, const char *opts, int row) {
  if (t->n == t->cap) {
    int cap = t->cap ? 2 * t->cap : 32;
    at_entry *e = realloc(t->e, sizeof *e * (size_t)cap);
    if (!e) return NULL;
    t->e = e, t->cap = cap;
  }
  at_entry *e = &t->e[t->n];
  *e = (at_entry){dup_str(shape), dup_str(opts), row, -1, AT_UNUSED, 0};
  if (!e->shape || !e->opts) return free(e->shape), free(e->opts), NULL;
  t->n++;
  return e;
}

/* ---------------------------------------------------------------- the cache file */

void pc_autotune_default_path(char *out, size_t n) {
  const char *env = getenv("PRIMC_AUTOTUNE_CACHE"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  if (env && *env) snprintf(out, n, "%s", env);
  else if (xdg && *xdg) snprintf(out, n, "%s/primc/autotune.txt", xdg);
  else if (home && *home) snprintf(out, n, "%s/.cache/primc/autotune.txt", home);
  else if (n) *out = 0;
}

static void forget_all(pc_autotune *t) {
  for (int i = 0; i < t->n_other; i++) free(t->other[i]);
  for (int i = 0; i < t->n; i++) free(t->e[i].shape), free(t->e[i].opts);
  t->n_other = t->n = 0;
}

static int keep_other(pc_autotune *t, const char *line) {
  if (t->n_other == t->cap_other) {
    int cap = t->cap_other ? 2 * t->cap_other : 16;
    char **o = realloc(t->other, sizeof *o * (size_t)cap);
    if (!o) return 0;
    t->other = o, t->cap_other = cap;
  }
  return (t->other[t->n_other] = dup_str(line)) ? (t->n_other++, 1) : 0;
}

/* one line "CPU\tshape|opts\trow": 1 when well formed (entries of rows not in this build are dropped) */
static int read_line(pc_autotune *t, char *line) {
  char *tab1 = strchr(line, '\t'), *tab2 = tab1 ? strchr(tab1 + 1, '\t') : NULL;
  if (!tab1 || !tab2 || tab1 == line || strchr(tab2 + 1, '\t') || !tab2[1]) return 0;
  char *bar = memchr(tab1 + 1, '|', (size_t)(tab2 - tab1 - 1));
  if (!bar || bar == tab1 + 1 || bar + 1 == tab2) return 0;
  *tab1 = 0;
  if (strcmp(line, t->cpu)) {
    *tab1 = '\t';
    keep_other(t, line); /* out of memory: that CPU's line is dropped, no harm */
    return 1;
  }
  *tab2 = *bar = 0;
  int row = primc_conv_row_find(tab2 + 1);
  if (row < 0 || find(t, tab1 + 1, bar + 1)) return 1; /* a row gone since: timed again */
  add(t, tab1 + 1, bar + 1, row);
  return 1;
}

static void load(pc_autotune *t) {
  if (!t->path[0]) return;
  FILE *f = fopen(t->path, "r");
  if (!f) {
    if (errno != ENOENT)
      snprintf(t->warning, sizeof t->warning, "autotune cache %s cannot be read (%s): ignored", t->path, strerror(errno));
    return;
  }
  char line[2048];
  int no = 0, bad = 0;
  while (!bad && fgets(line, sizeof line, f)) {
    no++;
    size_t len = strlen(line);
    if (len && line[len - 1] == '\n') line[--len] = 0;
    else if (!feof(f)) bad = no; /* longer than any line this file writes */
    if (bad) break;
    if (no == 1) bad = strcmp(line, AT_HEADER) ? no : 0;
    else if (len && line[0] != '#') bad = read_line(t, line) ? 0 : no;
  }
  int err = ferror(f) ? errno : 0;
  fclose(f);
  if (!bad && !err) return;
  forget_all(t);
  t->dirty = 1; /* rewritten whole at the next save */
  if (err)
    snprintf(t->warning, sizeof t->warning, "autotune cache %s cannot be read (%s): ignored", t->path, strerror(err));
  else
    snprintf(t->warning, sizeof t->warning, "autotune cache %s: line %d is not a cache line: the cache is ignored "
             "and will be rewritten", t->path, bad);
}

pc_autotune *pc_autotune_new(const char *cache_path) {
  pc_autotune *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  if (cache_path) snprintf(t->path, sizeof t->path, "%s", cache_path);
  else pc_autotune_default_path(t->path, sizeof t->path);
  cpu_key(t->cpu, sizeof t->cpu);
  t->budget = 0.05;
  load(t);
  return t;
}

void pc_autotune_free(pc_autotune *t) {
  if (!t) return;
  forget_all(t);
  free(t->other);
  free(t->e);
  free(t);
}

const char *pc_autotune_warning(const pc_autotune *t) { return t && t->warning[0] ? t->warning : NULL; }
const char *pc_autotune_path(const pc_autotune *t) { return t ? t->path : ""; }
void pc_autotune_set_budget(pc_autotune *t, double seconds) {
  if (t && seconds > 0) t->budget = seconds;
}

/* mkdir -p of path's directory */
static int make_dirs(const char *path) {
  char d[4096];
  snprintf(d, sizeof d, "%s", path);
  char *slash = strrchr(d, '/');
  if (!slash || slash == d) return 1;
  *slash = 0;
  for (char *p = d + 1; *p; p++)
    if (*p == '/') {
      *p = 0;
      if (mkdir(d, 0777) && errno != EEXIST) return 0;
      *p = '/';
    }
  return !mkdir(d, 0777) || errno == EEXIST;
}

int pc_autotune_save(pc_autotune *t) {
  if (!t || !t->dirty || !t->path[0]) return 0;
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s.tmp%ld", t->path, (long)getpid());
  FILE *f = make_dirs(t->path) ? fopen(tmp, "w") : NULL;
  if (!f) {
    snprintf(t->warning, sizeof t->warning, "autotune cache %s cannot be written (%s)", t->path, strerror(errno));
    return -1;
  }
  fprintf(f, "%s\n", AT_HEADER);
  for (int i = 0; i < t->n_other; i++) fprintf(f, "%s\n", t->other[i]);
  for (int i = 0; i < t->n; i++)
    if (t->e[i].row >= 0) fprintf(f, "%s\t%s|%s\t%s\n", t->cpu, t->e[i].shape, t->e[i].opts, primc_conv_row_name(t->e[i].row));
  int ok = !ferror(f);
  ok &= fclose(f) == 0;
  if (!ok || rename(tmp, t->path)) {
    snprintf(t->warning, sizeof t->warning, "autotune cache %s cannot be written (%s)", t->path, strerror(errno));
    unlink(tmp);
    return -1;
  }
  t->dirty = 0;
  return 0;
}

/* ---------------------------------------------------------------- timing */

static float *rand_floats(int64_t n, uint64_t *rng) {
  float *p = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
  for (int64_t i = 0; p && i < n; i++) {
    *rng = *rng * 6364136223846793005ull + 1442695040888963407ull;
    p[i] = (float)((*rng >> 40) & 0xFFFFFF) / (float)0x800000 - 1.0f;
  }
  return p;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* the index in cand of the row kept: heur's (an index) unless another clearly beats it by AT_MARGIN;
 * -1 when buffers could not be had */
static int time_rows(pc_autotune *t, const primc_conv2d *c, const primc_conv_plan *cand, int n, int heur) {
  int64_t oh, ow, col_n = 0;
  primc_conv2d_out_hw(c, &oh, &ow);
  for (int i = 0; i < n; i++) {
    int64_t s = primc_conv_plan_scratch_floats(c, &cand[i]);
    if (s > col_n) col_n = s;
  }
  uint64_t rng = 0x9e3779b97f4a7c15ull;
  int64_t wn = c->o * (c->c / c->groups) * c->kh * c->kw;
  float *x = rand_floats(c->n * c->c * c->h * c->w, &rng), *w = rand_floats(wn, &rng), *bias = rand_floats(c->o, &rng);
  float *y = malloc((size_t)(c->n * c->o * oh * ow) * sizeof(float) + 64);
  float *col = malloc((size_t)(col_n > 0 ? col_n : 1) * sizeof(float));
  void *packed[AT_MAX_CANDS] = {0};
  double times[AT_MAX_CANDS][AT_MAX_ROUNDS], first_best = INFINITY;
  int live[AT_MAX_CANDS], rounds = 0, keep = -1;
  int ok = x && w && bias && y && col;
  primc_conv_epi e = {.bias = bias, .bias_stride = 1, .lo = 0.0f, .hi = INFINITY};
  for (int i = 0; ok && i < n; i++) {
    size_t bytes = primc_conv_plan_weight_bytes(c, &cand[i]);
    live[i] = !posix_memalign(&packed[i], 64, bytes ? bytes : 64) &&
              primc_conv_plan_pack(c, &cand[i], w, packed[i]) == PRIMC_OK;
    /* a first run, untimed, that touches y and col and checks that the row itself runs (no fallback) */
    live[i] = live[i] && primc_conv_run(c, &cand[i], x, packed[i], &e, y, NULL, col) == PRIMC_OK &&
              primc_conv_last_row() == cand[i].row;
  }
  if (ok && !live[heur]) ok = 0;
  double t0 = now_s();
  /* rounds of one run per row, so that a change in the machine's load falls on every row alike */
  for (; ok && rounds < AT_MAX_ROUNDS && (rounds < AT_MIN_ROUNDS || now_s() - t0 < t->budget); rounds++) {
    for (int i = 0; i < n; i++) {
      if (!live[i]) continue;
      double a = now_s();
      primc_conv_run(c, &cand[i], x, packed[i], &e, y, NULL, col);
      times[i][rounds] = now_s() - a;
      if (times[i][rounds] < first_best) first_best = times[i][rounds];
    }
    if (rounds == 0) /* far slower rows are not timed again */
      for (int j = 0; j < n; j++) live[j] = live[j] && (j == heur || times[j][0] <= AT_PRUNE * first_best);
  }
  /* The row with the fastest round (on a machine shared with other work, load only ever adds time)
   * replaces the planner's when it is faster by the margin in its fastest round, in its median round, and
   * in two thirds of the rounds run side by side: three ways for a spike of load to be outvoted */
  if (ok) {
    double fast[AT_MAX_CANDS], med[AT_MAX_CANDS], sorted[AT_MAX_ROUNDS];
    int best = heur, wins = 0;
    for (int i = 0; i < n; i++) {
      if (!live[i]) continue;
      memcpy(sorted, times[i], sizeof(double) * (size_t)rounds);
      qsort(sorted, (size_t)rounds, sizeof(double), by_value);
      fast[i] = sorted[0], med[i] = sorted[rounds / 2];
      if (fast[i] < fast[best]) best = i;
    }
    for (int r = 0; r < rounds; r++) wins += times[best][r] <= AT_MARGIN * times[heur][r];
    keep = best != heur && fast[best] <= AT_MARGIN * fast[heur] && med[best] <= AT_MARGIN * med[heur] &&
                   3 * wins >= 2 * rounds
               ? best
               : heur;
  }
  for (int i = 0; i < n; i++) free(packed[i]);
  free(x), free(w), free(bias), free(y), free(col);
  return keep;
}

/* ---------------------------------------------------------------- planning */

int pc_autotune_plan(pc_autotune *t, const primc_conv2d *c, const primc_conv_plan_opts *o, primc_conv_plan *plan) {
  primc_conv_plan_opts plain = {.layout = PRIMC_CONV_W_PLAIN}, q;
  if (!o) o = &plain;
  int st = primc_conv_plan_make(c, o, plan);
  if (st != PRIMC_OK || !t || (o->force && *o->force)) return st;
  if (!o->packable && primc_conv_row_class(plan->row) != PRIMC_CONV_CLASS_DEPTHWISE) return st;
  primc_conv_plan cand[AT_MAX_CANDS];
  q = *o;
  q.force = NULL;
  int n = primc_conv_plan_candidates(c, &q, cand, AT_MAX_CANDS), heur = -1;
  if (n > AT_MAX_CANDS) n = AT_MAX_CANDS;
  for (int i = 0; i < n; i++)
    if (cand[i].row == plan->row && cand[i].layout == plan->layout) heur = i;
  if (n < 2 || heur < 0) return st; /* nothing to choose from */
  char shape[256], opts[128];
  shape_key(c, shape, sizeof shape);
  opts_key(o, opts, sizeof opts);
  at_entry *e = find(t, shape, opts);
  int pick = -1;
  for (int i = 0; e && i < n; i++)
    if (cand[i].row == e->row) pick = i;
  if (e && pick >= 0) {
    if (e->how == AT_UNUSED) e->how = AT_CACHED;
  } else { /* new, or cached as a row that no longer fits: time them */
    double a = now_s();
    pick = time_rows(t, c, cand, n, heur);
    t->seconds += now_s() - a;
    if (pick < 0) return st; /* out of memory for the buffers: the planner's row */
    if (!e) e = add(t, shape, opts, cand[pick].row);
    if (!e) return st;
    e->row = cand[pick].row;
    e->how = AT_TIMED;
    t->dirty = 1;
  }
  e->heur = plan->row;
  e->used = 1;
  *plan = cand[pick];
  return PRIMC_OK;
}

int pc_autotune_tuned(const pc_autotune *t, const primc_conv2d *c, int row, int *heuristic) {
  char shape[256];
  if (!t || !c) return 0;
  shape_key(c, shape, sizeof shape);
  for (int i = 0; i < t->n; i++)
    if (t->e[i].used && t->e[i].row == row && !strcmp(t->e[i].shape, shape)) {
      if (heuristic) *heuristic = t->e[i].heur;
      return 1;
    }
  return 0;
}

void pc_autotune_stats_get(const pc_autotune *t, pc_autotune_stats *s) {
  memset(s, 0, sizeof *s);
  for (int i = 0; t && i < t->n; i++) {
    const at_entry *e = &t->e[i];
    if (!e->used) continue;
    s->shapes++;
    s->timed += e->how == AT_TIMED;
    s->cached += e->how == AT_CACHED;
    s->changed += e->row != e->heur;
  }
  s->seconds = t ? t->seconds : 0;
}
