/* api/api.c: the public C API of include/primc.h, a thin layer over frontend, passes and codegen. */
#include "include/primc.h"

#include "api/dyn_source.h"
#include "codegen/autotune.h"
#include "codegen/codegen.h"
#include "frontend/frontend.h"
#include "passes/passes.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* the public codes are pc_status's, plus USAGE: a cast maps one to the other */
_Static_assert(PRIMC_STATUS_PARSE == (int)PC_ERR_PARSE && PRIMC_STATUS_UNSUPPORTED == (int)PC_ERR_UNSUPPORTED &&
                   PRIMC_STATUS_INTERNAL == (int)PC_ERR_INTERNAL,
               "primc_status mirrors pc_status");
_Static_assert(PRIMC_EMIT_CUDA == (int)PC_EMIT_CUDA && PRIMC_TARGET_CUDA == (int)PC_TARGET_CUDA,
               "primc_emit and primc_target mirror codegen's enums");


typedef struct api_dim {
  char *name;
  int64_t lo, hi, step; /* step > 0: the range in buckets ("NAME=LO..HI:STEP") */
  int64_t multiple;     /* > 0: multiples of it only ("NAME=LO..HI%M") */
} api_dim;

/* what the queries report, copied at load so a compile may consume the graph */
typedef struct api_tensor {
  char *name;
  int dtype, rank;
  int64_t dims[PC_MAX_RANK], lo[PC_MAX_RANK], hi[PC_MAX_RANK];
  char *dim_names[PC_MAX_RANK];
} api_tensor;

struct primc_model {
  /* read when importing */
  api_dim *dims;
  int n_dims;
  pc_const_input *consts; /* --const: names and values malloc'ed */
  int n_consts;
  char *weights_file;
  int64_t mem_limit;
  pc_transforms tr; /* vmap_inputs malloc'ed */
  /* the source, kept so that every compile after the first can import it again */
  int loaded;
  char *path;
  void *bytes;
  size_t n_bytes;
  char *dir;
  pc_graph *g; /* imported and not yet lowered; NULL once a compile has used it */
  /* read when compiling */
  int opt_level, unfused, weights_external, profile, cuda_graphs, autotune, matmul_precision, autocast;
  primc_target target;
  char *cpu, *triple, *gpu_arch, *name, *runtime_dir, *autotune_cache;
  api_tensor *io[2];
  int n_io[2];
  char error[1024];
};

static primc_status fail(primc_model *m, primc_status s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(m->error, sizeof m->error, fmt, ap);
  va_end(ap);
  return s;
}

/* a graph's failure as the handle's */
static primc_status fail_graph(primc_model *m, pc_graph *g, pc_status s) {
  if (!g) return fail(m, PRIMC_STATUS_NOMEM, "out of memory");
  if (s == PC_OK) s = g->status ? g->status : PC_ERR_INTERNAL;
  return fail(m, (primc_status)s, "%s", *pc_error(g) ? pc_error(g) : pc_status_name(s));
}

/* *slot = a copy of s (NULL stays NULL) */
static primc_status set_str(primc_model *m, char **slot, const char *s) {
  char *c = NULL;
  if (s && !(c = strdup(s))) return fail(m, PRIMC_STATUS_NOMEM, "out of memory");
  free(*slot);
  *slot = c;
  return PRIMC_STATUS_OK;
}

const char *primc_version(void) { return PC_VERSION; }

const char *primc_status_name(primc_status s) {
  static const char *const names[] = {"ok", "parse", "type", "shape", "attr", "unsupported",
                                      "io", "range", "nomem", "internal", "usage"};
  return (unsigned)s < sizeof names / sizeof *names ? names[s] : "unknown";
}

const char *primc_dtype_name(int dtype) {
  return dtype >= 0 && dtype < PC_DTYPE_COUNT ? pc_dtype_name((pc_dtype)dtype) : NULL;
}

primc_model *primc_model_new(void) {
  primc_model *m = calloc(1, sizeof *m);
  if (m) m->opt_level = 3;
  return m;
}

static void free_io(primc_model *m) {
  for (int k = 0; k < 2; k++) {
    for (int i = 0; i < m->n_io[k]; i++) {
      free(m->io[k][i].name);
      for (int d = 0; d < PC_MAX_RANK; d++) free(m->io[k][i].dim_names[d]);
    }
    free(m->io[k]);
    m->io[k] = NULL;
    m->n_io[k] = 0;
  }
}

static void free_source(primc_model *m) {
  pc_graph_free(m->g);
  free(m->path);
  free(m->bytes);
  free(m->dir);
  m->g = NULL, m->path = NULL, m->bytes = NULL, m->dir = NULL, m->n_bytes = 0, m->loaded = 0;
}

void primc_model_free(primc_model *m) {
  if (!m) return;
  free_source(m);
  free_io(m);
  for (int i = 0; i < m->n_dims; i++) free(m->dims[i].name);
  free(m->dims);
  for (int i = 0; i < m->n_consts; i++) free((char *)m->consts[i].name), pc_tensor_free(&m->consts[i].value);
  free(m->consts);
  free((char *)m->tr.vmap_inputs);
  char **strs[] = {&m->weights_file, &m->cpu, &m->triple, &m->gpu_arch, &m->name, &m->runtime_dir, &m->autotune_cache};
  for (size_t i = 0; i < sizeof strs / sizeof *strs; i++) free(*strs[i]);
  free(m);
}

const char *primc_model_error(const primc_model *m) { return m ? m->error : "no model handle (NULL)"; }

/* ---------------------------------------------------------------- import options */

#define NEED_M(m)                                                                                                     \
  do {                                                                                                                \
    if (!(m)) return PRIMC_STATUS_USAGE;                                                                              \
  } while (0)

static primc_status before_load(primc_model *m, const char *what) {
  if (m->loaded) return fail(m, PRIMC_STATUS_USAGE, "%s: set it before the model is loaded", what);
  return PRIMC_STATUS_OK;
}

/* name's dims lo..hi in buckets of step values (0: one range), multiples of mult only (0: any) */
static primc_status set_dim(primc_model *m, const char *name, int64_t lo, int64_t hi, int64_t step, int64_t mult) {
  NEED_M(m);
  if (before_load(m, "dim")) return PRIMC_STATUS_USAGE;
  if (!name || !*name) return fail(m, PRIMC_STATUS_USAGE, "dim: no name");
  if (lo < 0 || hi < lo) return fail(m, PRIMC_STATUS_USAGE, "dim %s: bad range %lld..%lld", name, (long long)lo, (long long)hi);
  int at = 0;
  while (at < m->n_dims && strcmp(m->dims[at].name, name)) at++;
  if (at == m->n_dims) {
    api_dim *d = realloc(m->dims, (size_t)(m->n_dims + 1) * sizeof *d);
    if (!d) return fail(m, PRIMC_STATUS_NOMEM, "out of memory");
    m->dims = d;
    if (!(d[at].name = strdup(name))) return fail(m, PRIMC_STATUS_NOMEM, "out of memory");
    m->n_dims++;
  }
  m->dims[at].lo = lo;
  m->dims[at].hi = hi;
  m->dims[at].step = step;
  m->dims[at].multiple = mult;
  return PRIMC_STATUS_OK;
}

primc_status primc_model_set_dim_range(primc_model *m, const char *name, int64_t lo, int64_t hi) {
  return set_dim(m, name, lo, hi, 0, 0);
}

primc_status primc_model_set_dim(primc_model *m, const char *name, int64_t value) {
  return primc_model_set_dim_range(m, name, value, value);
}

/* "NAME=N", "NAME=LO..HI", "NAME=LO..HI:STEP", "NAME=LO..HI%M" or "NAME=LO..HI%M:STEP" */
primc_status primc_model_set_dim_spec(primc_model *m, const char *spec) {
  NEED_M(m);
  pc_dim_binding d;
  char name[256];
  if (!spec || !pc_dim_spec_parse(spec, &d, name, sizeof name))
    return fail(m, PRIMC_STATUS_USAGE, "dim '%s': expected NAME=N, NAME=LO..HI, NAME=LO..HI:STEP or NAME=LO..HI%%M[:STEP]",
                spec ? spec : "(null)");
  return set_dim(m, name, d.lo, d.hi, d.step, d.multiple);
}

primc_status primc_model_set_const_spec(primc_model *m, const char *spec) {
  NEED_M(m);
  if (before_load(m, "const")) return PRIMC_STATUS_USAGE;
  pc_const_input c;
  char name[256], err[512];
  if (!pc_const_spec_parse(spec, &c, name, sizeof name, err, sizeof err))
    return fail(m, PRIMC_STATUS_USAGE, "const %s (expected NAME=VALUE: 3, 1.5, true or 1,2,3)", err);
  int at = 0;
  while (at < m->n_consts && strcmp(m->consts[at].name, name)) at++;
  if (at < m->n_consts) { /* set again: the last value counts */
    pc_tensor_free(&m->consts[at].value);
    m->consts[at].value = c.value;
    return PRIMC_STATUS_OK;
  }
  pc_const_input *nc = realloc(m->consts, (size_t)(at + 1) * sizeof *nc);
  if (nc) m->consts = nc;
  if (!nc || !(c.name = strdup(name))) return pc_tensor_free(&c.value), fail(m, PRIMC_STATUS_NOMEM, "out of memory");
  m->consts[m->n_consts++] = c;
  return PRIMC_STATUS_OK;
}

primc_status primc_model_set_weights_file(primc_model *m, const char *path) {
  NEED_M(m);
  if (before_load(m, "weights file")) return PRIMC_STATUS_USAGE;
  return set_str(m, &m->weights_file, path);
}

primc_status primc_model_set_mem_limit(primc_model *m, int64_t bytes) {
  NEED_M(m);
  if (before_load(m, "memory limit")) return PRIMC_STATUS_USAGE;
  if (bytes < 0) return fail(m, PRIMC_STATUS_USAGE, "memory limit %lld is negative", (long long)bytes);
  m->mem_limit = bytes;
  return PRIMC_STATUS_OK;
}

/* ---------------------------------------------------------------- loading */

/* the import options of m, its dim bindings in b (m->n_dims + 1 of them) */
static pc_import_opts import_opts(const primc_model *m, pc_dim_binding *b) {
  for (int i = 0; i < m->n_dims; i++)
    b[i] = (pc_dim_binding){m->dims[i].name, m->dims[i].lo, m->dims[i].hi, m->dims[i].step, m->dims[i].multiple};
  pc_import_opts io = {.dims = b, .n_dims = m->n_dims, .weights_path = m->weights_file, .consts = m->consts,
                       .n_consts = m->n_consts, .mem_limit = m->mem_limit, .keep_weights = m->tr.grad || m->tr.train,
                       .gradient = pc_grad_values};
  return io;
}

/* the model read with io, its transforms applied (not to an inputs-only read) */
static pc_graph *import_with(const primc_model *m, const pc_import_opts *io) {
  pc_graph *g = m->path ? pc_model_load(m->path, io) : pc_onnx_load_buffer(m->bytes, m->n_bytes, m->dir, io);
  if (g) g->mem_limit = m->mem_limit;
  if (g && !g->status && !io->inputs_only) pc_apply_transforms(g, &m->tr);
  return g;
}

static pc_graph *import(const primc_model *m) {
  pc_dim_binding *b = calloc((size_t)m->n_dims + 1, sizeof *b);
  if (!b) return NULL;
  pc_import_opts io = import_opts(m, b);
  pc_graph *g = import_with(m, &io);
  free(b);
  return g;
}

/* the inputs as gi has them, the outputs as go has them */
static int snapshot2(primc_model *m, const pc_graph *gi, const pc_graph *go) {
  for (int k = 0; k < 2; k++) {
    const pc_graph *g = k ? go : gi;
    int n = k ? g->n_outputs : g->n_inputs;
    if (!(m->io[k] = calloc((size_t)n + 1, sizeof *m->io[k]))) return 0;
    m->n_io[k] = n;
    for (int i = 0; i < n; i++) {
      const pc_value *v = k ? g->outputs[i] : g->inputs[i];
      api_tensor *t = &m->io[k][i];
      char fallback[32];
      snprintf(fallback, sizeof fallback, "%s%d", k ? "out" : "in", i); /* as the generated header names it */
      if (!(t->name = strdup(v->name ? v->name : fallback))) return 0;
      t->dtype = (int)v->type.dtype;
      t->rank = v->type.rank;
      for (int d = 0; d < t->rank; d++) {
        int64_t x = v->type.dims[d];
        t->dims[d] = t->lo[d] = t->hi[d] = x;
        if (!PC_DIM_IS_SYM(x)) continue;
        const pc_sym *s = &g->syms[PC_DIM_SYM_ID(x)];
        t->lo[d] = s->lo, t->hi[d] = s->hi;
        if (s->lo == s->hi) { /* a text graph's symbol fixed by a dim binding */
          t->dims[d] = s->lo;
          continue;
        }
        t->dims[d] = -1;
        if (!(t->dim_names[d] = strdup(s->name ? s->name : "?"))) return 0;
      }
    }
  }
  return 1;
}

static int snapshot(primc_model *m, const pc_graph *g) { return snapshot2(m, g, g); }

/* A model whose import with symbols fails (shape arithmetic on a dim given as a range) may still compile with
 * run-time dims, which import at the bounds: its inputs are read without the nodes, its outputs at the bounds */
static pc_graph *import_at_bounds(primc_model *m, pc_graph **inputs) {
  pc_dim_binding *b = calloc((size_t)m->n_dims + 1, sizeof *b);
  pc_dyn_source *src = calloc(1, sizeof *src);
  pc_graph *g = NULL;
  pc_dyn_spec spec;
  pc_import_opts io = b ? import_opts(m, b) : (pc_import_opts){0};
  if (b && src && pc_dyn_source_init(src, &spec, &io) > 0) {
    g = import_with(m, &src->io);
    io.inputs_only = 1;
    *inputs = g && !g->status ? import_with(m, &io) : NULL;
  }
  free(b);
  free(src);
  return g;
}

static primc_status finish_load(primc_model *m) {
  m->loaded = 1;
  pc_graph *g = import(m);
  if (g && g->status == PC_ERR_UNSUPPORTED) {
    pc_graph *ins = NULL, *gb = import_at_bounds(m, &ins);
    int ok = gb && !gb->status && ins && !ins->status && snapshot2(m, ins, gb);
    pc_graph_free(gb);
    pc_graph_free(ins);
    if (ok) return pc_graph_free(g), PRIMC_STATUS_OK; /* each compile imports again */
    free_io(m);
  }
  if (!g || g->status) {
    primc_status s = fail_graph(m, g, PC_OK);
    pc_graph_free(g);
    free_source(m);
    return s;
  }
  if (!snapshot(m, g)) {
    pc_graph_free(g);
    free_source(m);
    free_io(m);
    return fail(m, PRIMC_STATUS_NOMEM, "out of memory");
  }
  m->g = g;
  return PRIMC_STATUS_OK;
}

primc_status primc_model_load_file(primc_model *m, const char *path) {
  NEED_M(m);
  if (m->loaded) return fail(m, PRIMC_STATUS_USAGE, "a model is already loaded in this handle");
  if (!path || !*path) return fail(m, PRIMC_STATUS_USAGE, "no model path");
  if (!(m->path = strdup(path))) return fail(m, PRIMC_STATUS_NOMEM, "out of memory");
  return finish_load(m);
}

primc_status primc_model_load_onnx(primc_model *m, const void *data, size_t size, const char *dir) {
  NEED_M(m);
  if (m->loaded) return fail(m, PRIMC_STATUS_USAGE, "a model is already loaded in this handle");
  if (!data || !size) return fail(m, PRIMC_STATUS_USAGE, "no model bytes");
  if (!(m->bytes = malloc(size)) || (dir && !(m->dir = strdup(dir)))) {
    free_source(m);
    return fail(m, PRIMC_STATUS_NOMEM, "out of memory");
  }
  memcpy(m->bytes, data, size);
  m->n_bytes = size;
  return finish_load(m);
}

/* ---------------------------------------------------------------- compile options */

primc_status primc_model_set_opt_level(primc_model *m, int level) {
  NEED_M(m);
  if (level < 0 || level > 3) return fail(m, PRIMC_STATUS_USAGE, "optimization level %d is not 0..3", level);
  m->opt_level = level;
  return PRIMC_STATUS_OK;
}

/* the on/off options: any non-zero value is on */
#define FLAG_SETTER(field)                                      \
  primc_status primc_model_set_##field(primc_model *m, int on) { \
    NEED_M(m);                                                  \
    m->field = !!on;                                            \
    return PRIMC_STATUS_OK;                                     \
  }
FLAG_SETTER(unfused)

primc_status primc_model_set_target(primc_model *m, primc_target target) {
  NEED_M(m);
  if (target != PRIMC_TARGET_CPU && target != PRIMC_TARGET_CUDA)
    return fail(m, PRIMC_STATUS_USAGE, "target %d is not cpu (0) or cuda (1)", (int)target);
  m->target = target;
  return PRIMC_STATUS_OK;
}

primc_status primc_model_set_cpu(primc_model *m, const char *cpu) { return m ? set_str(m, &m->cpu, cpu) : PRIMC_STATUS_USAGE; }
primc_status primc_model_set_triple(primc_model *m, const char *triple) {
  return m ? set_str(m, &m->triple, triple) : PRIMC_STATUS_USAGE;
}
primc_status primc_model_set_gpu_arch(primc_model *m, const char *arch) {
  return m ? set_str(m, &m->gpu_arch, arch) : PRIMC_STATUS_USAGE;
}
primc_status primc_model_set_runtime_dir(primc_model *m, const char *dir) {
  return m ? set_str(m, &m->runtime_dir, dir) : PRIMC_STATUS_USAGE;
}

FLAG_SETTER(weights_external)

FLAG_SETTER(profile)

FLAG_SETTER(cuda_graphs)

FLAG_SETTER(autotune)

/* a named choice: parse(s) >= 0 goes into *field, anything else is a usage error naming the choices */
static primc_status set_choice(primc_model *m, int *field, int (*parse)(const char *), const char *s, const char *what,
                               const char *choices) {
  NEED_M(m);
  int v = parse(s);
  if (v < 0) return fail(m, PRIMC_STATUS_USAGE, "%s '%.*s' is not %s", what, 100, s ? s : "(null)", choices);
  *field = v;
  return PRIMC_STATUS_OK;
}

primc_status primc_model_set_grad(primc_model *m, int grad) {
  NEED_M(m);
  if (before_load(m, "grad")) return PRIMC_STATUS_USAGE;
  m->tr.grad = grad != 0;
  return PRIMC_STATUS_OK;
}

primc_status primc_model_set_jvp(primc_model *m, int jvp) {
  NEED_M(m);
  if (before_load(m, "jvp")) return PRIMC_STATUS_USAGE;
  m->tr.jvp = jvp != 0;
  return PRIMC_STATUS_OK;
}

primc_status primc_model_set_vmap(primc_model *m, const char *names, int64_t batch) {
  NEED_M(m);
  if (before_load(m, "vmap")) return PRIMC_STATUS_USAGE;
  if (!names || !*names || batch < 1) return fail(m, PRIMC_STATUS_USAGE, "vmap: name inputs and a batch size >= 1");
  char *copy = strdup(names);
  if (!copy) return fail(m, PRIMC_STATUS_NOMEM, "out of memory");
  free((char *)m->tr.vmap_inputs);
  m->tr.vmap_inputs = copy, m->tr.vmap_batch = batch;
  return PRIMC_STATUS_OK;
}

primc_status primc_model_set_train(primc_model *m, const char *loss, const char *optimizer, double lr,
                                   double weight_decay) {
  NEED_M(m);
  if (before_load(m, "train")) return PRIMC_STATUS_USAGE;
  pc_train_opts t;
  pc_train_opts_default(&t);
  if ((t.loss = pc_loss_parse(loss)) < 0)
    return fail(m, PRIMC_STATUS_USAGE, "train: loss '%.*s' is not mse or cross_entropy", 100, loss ? loss : "(null)");
  if ((t.optimizer = pc_optim_parse(optimizer)) < 0)
    return fail(m, PRIMC_STATUS_USAGE, "train: optimizer '%.*s' is not sgd, momentum, adam or adamw", 100,
                optimizer ? optimizer : "(null)");
  if (!(lr >= 0) || !(weight_decay >= 0)) return fail(m, PRIMC_STATUS_USAGE, "train: lr and weight_decay must be >= 0");
  t.lr = lr, t.weight_decay = weight_decay;
  m->tr.train = 1, m->tr.train_opts = t;
  return PRIMC_STATUS_OK;
}

primc_status primc_model_set_matmul_precision(primc_model *m, const char *precision) {
  return set_choice(m, m ? &m->matmul_precision : NULL, pc_matmul_precision_parse, precision, "matmul precision",
                    "highest, high or medium");
}

primc_status primc_model_set_autocast(primc_model *m, const char *autocast) {
  return set_choice(m, m ? &m->autocast : NULL, pc_autocast_parse, autocast, "autocast", "bf16, fp16 or none");
}

primc_status primc_model_set_autotune_cache(primc_model *m, const char *path) {
  return m ? set_str(m, &m->autotune_cache, path) : PRIMC_STATUS_USAGE;
}

primc_status primc_model_set_name(primc_model *m, const char *name) {
  NEED_M(m);
  if (name && !pc_entry_name_ok(name))
    return fail(m, PRIMC_STATUS_USAGE, "name '%.*s' is not a C identifier of at most %d characters", 300, name,
                PC_MAX_ENTRY_NAME);
  return set_str(m, &m->name, name);
}

/* ---------------------------------------------------------------- compiling */

/* the directory of libprimc.so (or of the program it is linked into): libprimc_rt.a is built beside it */
static void own_dir(char *out, size_t n) {
  Dl_info info;
  out[0] = 0;
  if (dladdr((void *)primc_model_compile, &info) && info.dli_fname) snprintf(out, n, "%s", info.dli_fname);
  char *slash = strrchr(out, '/');
  if (slash) *slash = 0;
  else snprintf(out, n, ".");
}

primc_status primc_model_compile(primc_model *m, primc_emit emit, const char *path) {
  NEED_M(m);
  if (!m->loaded) return fail(m, PRIMC_STATUS_USAGE, "no model loaded");
  if (!path || !*path) return fail(m, PRIMC_STATUS_USAGE, "no output path");
  if ((unsigned)emit > PRIMC_EMIT_CUDA) return fail(m, PRIMC_STATUS_USAGE, "emit kind %d is not 0..5", (int)emit);
  /* dims given as ranges: one binary that takes them at run time, built at their bounds (codegen/dynamic.c) */
  pc_dim_binding *b = calloc((size_t)m->n_dims + 1, sizeof *b);
  pc_dyn_source *src = calloc(1, sizeof *src);
  pc_dyn_spec spec;
  if (!b || !src) return free(b), free(src), fail(m, PRIMC_STATUS_NOMEM, "out of memory");
  pc_import_opts io = import_opts(m, b);
  int n_syms = pc_dyn_source_init(src, &spec, &io);
  if (n_syms < 0) {
    free(b), free(src);
    return fail(m, PRIMC_STATUS_UNSUPPORTED, "more than %d dims given as ranges", PC_DYN_MAX_SYMS);
  }
  src->path = m->path, src->bytes = m->bytes, src->n_bytes = m->n_bytes, src->dir = m->dir;
  src->po = (pc_pipeline_opts){.opt_level = m->opt_level, .unfused = m->unfused};
  src->matmul_precision = m->matmul_precision, src->autocast = m->autocast, src->mem_limit = m->mem_limit;
  src->foreign_cpu = m->triple != NULL;
  src->gpu = m->target != PRIMC_TARGET_CPU;
  src->tr = m->tr;
  /* the passes and codegen change the graph: each compile lowers a fresh import */
  pc_graph *g = n_syms ? import_with(m, &src->io) : m->g ? m->g : import(m);
  if (n_syms) pc_graph_free(m->g); /* imported with symbols: the queries' snapshot has what they need of it */
  if (n_syms && g) g->run_time_dims = 1;
  m->g = NULL;
  if (g && !g->status && g->n_state && m->target != PRIMC_TARGET_CPU)
    pc_fail(g, PC_ERR_UNSUPPORTED, "a training step compiles host CPU code for now");
  if (!g || g->status) {
    primc_status s = fail_graph(m, g, PC_OK);
    pc_graph_free(g);
    free(b), free(src);
    return s;
  }
  pc_pipeline_opts po = {0};
  po.opt_level = m->opt_level;
  po.unfused = m->unfused;
  g->matmul_precision = m->matmul_precision;
  g->autocast = m->autocast;
  g->foreign_cpu = m->triple != NULL;
  g->gpu = m->target != PRIMC_TARGET_CPU;
  pc_status s = pc_pipeline_run(g, &po);
  char rt_dir[4096];
  own_dir(rt_dir, sizeof rt_dir);
  pc_codegen_opts co = {0};
  co.emit = (pc_emit)emit;
  co.output = path;
  co.name = m->name;
  co.triple = m->triple;
  co.cpu = m->cpu;
  co.weights_external = m->weights_external;
  co.runtime_dir = m->runtime_dir ? m->runtime_dir : rt_dir;
  co.opt_level = m->opt_level;
  co.gpu_arch = m->gpu_arch;
  co.target = (pc_target)m->target;
  co.profile = m->profile;
  co.cuda_graphs = m->cuda_graphs;
  co.dyn = n_syms ? &spec : NULL;
  if (s == PC_OK && m->autotune && !(co.autotune = pc_autotune_new(m->autotune_cache)))
    s = pc_fail(g, PC_ERR_NOMEM, "out of memory");
  if (s == PC_OK) s = pc_codegen(g, &co);
  if (s == PC_OK) pc_autotune_save(co.autotune); /* a cache that cannot be written only costs the next compile time */
  pc_autotune_free(co.autotune);
  primc_status r = s == PC_OK ? PRIMC_STATUS_OK : fail_graph(m, g, s);
  pc_graph_free(g);
  free(b), free(src);
  return r;
}

void primc_free(void *p) { free(p); }

/* the whole file at path into a malloc'ed buffer */
static primc_status slurp(primc_model *m, const char *path, void **data, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f) return fail(m, PRIMC_STATUS_IO, "cannot read %s back", path);
  struct stat st;
  char *buf = NULL;
  int ok = fstat(fileno(f), &st) == 0 && (buf = malloc((size_t)st.st_size + 1)) &&
           fread(buf, 1, (size_t)st.st_size, f) == (size_t)st.st_size;
  fclose(f);
  if (!ok) {
    primc_status s = buf ? PRIMC_STATUS_IO : PRIMC_STATUS_NOMEM;
    free(buf);
    return fail(m, s, "cannot read %s back", path);
  }
  buf[st.st_size] = 0; /* text outputs read as strings */
  *data = buf;
  *size = (size_t)st.st_size;
  return PRIMC_STATUS_OK;
}

primc_status primc_model_compile_to_memory(primc_model *m, primc_emit emit, void **data, size_t *size) {
  NEED_M(m);
  if (!data || !size) return fail(m, PRIMC_STATUS_USAGE, "no place for the result");
  *data = NULL, *size = 0;
  if (m->weights_external) return fail(m, PRIMC_STATUS_USAGE, "weights in a side file cannot come back in memory");
  static const char *const ext[] = {"", ".o", ".so", ".ll", ".s", ".cu"};
  if ((unsigned)emit > PRIMC_EMIT_CUDA) return fail(m, PRIMC_STATUS_USAGE, "emit kind %d is not 0..5", (int)emit);
  const char *tmp = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  char dir[4096], path[4200], aux[4200];
  snprintf(dir, sizeof dir, "%s/primc-XXXXXX", tmp);
  if (!mkdtemp(dir)) return fail(m, PRIMC_STATUS_IO, "cannot make a directory in %s: %s", tmp, strerror(errno));
  snprintf(path, sizeof path, "%s/model%s", dir, ext[emit]);
  primc_status s = primc_model_compile(m, emit, path);
  if (s == PRIMC_STATUS_OK) s = slurp(m, path, data, size);
  unlink(path);
  snprintf(aux, sizeof aux, "%s/model.h", dir); /* the header of obj and lib */
  unlink(aux);
  rmdir(dir);
  return s;
}

/* ---------------------------------------------------------------- queries */

static const api_tensor *tensor(const primc_model *m, primc_io io, int i) {
  if (!m || !m->loaded || (io != PRIMC_INPUT && io != PRIMC_OUTPUT) || i < 0 || i >= m->n_io[io]) return NULL;
  return &m->io[io][i];
}

int primc_model_count(const primc_model *m, primc_io io) {
  if (!m || !m->loaded || (io != PRIMC_INPUT && io != PRIMC_OUTPUT)) return -1;
  return m->n_io[io];
}

const char *primc_model_tensor_name(const primc_model *m, primc_io io, int i) {
  const api_tensor *t = tensor(m, io, i);
  return t ? t->name : NULL;
}

int primc_model_tensor_dtype(const primc_model *m, primc_io io, int i) {
  const api_tensor *t = tensor(m, io, i);
  return t ? t->dtype : -1;
}

int primc_model_tensor_rank(const primc_model *m, primc_io io, int i) {
  const api_tensor *t = tensor(m, io, i);
  return t ? t->rank : -1;
}

int64_t primc_model_tensor_dim(const primc_model *m, primc_io io, int i, int d) {
  const api_tensor *t = tensor(m, io, i);
  return t && d >= 0 && d < t->rank ? t->dims[d] : -1;
}

const char *primc_model_tensor_dim_name(const primc_model *m, primc_io io, int i, int d) {
  const api_tensor *t = tensor(m, io, i);
  return t && d >= 0 && d < t->rank ? t->dim_names[d] : NULL;
}

primc_status primc_model_tensor_dim_range(const primc_model *m, primc_io io, int i, int d, int64_t *lo, int64_t *hi) {
  const api_tensor *t = tensor(m, io, i);
  if (!t || d < 0 || d >= t->rank || !lo || !hi) return PRIMC_STATUS_USAGE;
  *lo = t->lo[d];
  *hi = t->hi[d];
  return PRIMC_STATUS_OK;
}
