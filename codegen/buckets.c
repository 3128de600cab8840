/* codegen/buckets.c: range dims in buckets (--dim NAME=LO..HI:STEP, on one dim or several: a bucket is then a box,
 * one per combination). Each bucket is the model compiled with the ranges cut to its box, planned at the box's ends
 * (rows, tiles and workspace for its sizes, not the ranges' largest) and fitted like any range (codegen/dynamic.c);
 * a bucket no one program can follow (the planner picks other rows at smaller sizes) is halved until each part can,
 * down to programs for single values. Their weights are one pool of distinct constants (codegen/weights_pool.c).
 * Each is written as an object whose entry points are NAME__bK; a dispatcher object is the model NAME
 * (codegen/llvm_buckets.c); they are linked together, or joined into one relocatable object for --emit obj. */
#include "codegen/codegen.h"
#include "codegen/kir.h"
#include "runtime/primc_rt.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_BUCKETS KIR_MAX_BUCKETS
_Static_assert(KIR_DYN_MAX_SYMS >= PC_DYN_MAX_SYMS, "a bucket's box holds every symbol");

/* printf onto the end of buf's text, *k its length, as far as len allows */
__attribute__((format(printf, 4, 5))) static void app(char *buf, size_t len, size_t *k, const char *fmt, ...) {
  if (*k >= len) return;
  va_list ap;
  va_start(ap, fmt);
  int w = vsnprintf(buf + *k, len - *k, fmt, ap);
  va_end(ap);
  *k = w < 0 ? len : *k + (size_t)w;
}

/* "H and W", "N, H and W": the bucketed symbols' names (or their STEPs) for --report */
static void put_list(char *buf, size_t len, const pc_dyn_spec *ds, int steps) {
  int n = pc_dyn_bucketed(ds), i = 0;
  size_t k = 0;
  buf[0] = 0;
  for (int s = 0; s < ds->n_syms; s++) {
    if (!ds->bucket_step[s]) continue;
    const char *sep = i == 0 ? "" : i == n - 1 ? " and " : ", ";
    if (steps) app(buf, len, &k, "%s%lld", sep, (long long)ds->bucket_step[s]);
    else app(buf, len, &k, "%s%s", sep, ds->name[s]);
    i++;
  }
}

/* "--dim H=64..320%32:64 and --dim W=64..320%32:64", for the errors on the whole grid and the header */
static void put_specs(char *buf, size_t len, const pc_dyn_spec *ds) {
  size_t k = 0;
  buf[0] = 0;
  for (int s = 0, i = 0; s < ds->n_syms; s++) {
    if (!ds->bucket_step[s]) continue;
    app(buf, len, &k, "%s--dim %s=%lld..%lld", i++ ? " and " : "", ds->name[s], (long long)ds->lo[s],
        (long long)ds->hi[s]);
    if (kir_dyn_mult(ds, s) > 1) app(buf, len, &k, "%%%lld", (long long)kir_dyn_mult(ds, s));
    app(buf, len, &k, ":%lld", (long long)ds->bucket_step[s]);
  }
}

int kir_bucket_ranges(pc_graph *g, const pc_dyn_spec *ds, const char *name, kir_bucket *b) {
  int n = 1;
  for (int s = 0; s < ds->n_syms; s++) b[0].lo[s] = ds->lo[s], b[0].hi[s] = ds->hi[s];
  for (int s = 0; s < ds->n_syms; s++) {
    int64_t step = ds->bucket_step[s], m = kir_dyn_mult(ds, s); /* buckets end at multiples */
    if (!step) continue;
    int64_t c = (ds->hi[s] - ds->lo[s]) / step + 1;
    if (c > MAX_BUCKETS || n * c > MAX_BUCKETS) {
      char specs[600];
      put_specs(specs, sizeof specs, ds);
      return pc_fail(g, PC_ERR_UNSUPPORTED, "%s make%s more than %d buckets", specs, pc_dyn_bucketed(ds) > 1 ? "" : "s",
                     MAX_BUCKETS), -1;
    }
    for (int i = n - 1; i >= 0; i--) /* each box so far cut along s, in place from the end */
      for (int j = (int)c - 1; j >= 0; j--) {
        kir_bucket *d = &b[i * c + j];
        int64_t a = ds->lo[s] + j * step;
        *d = b[i];
        d->lo[s] = a, d->hi[s] = ds->hi[s] - a < step ? ds->hi[s] : a + step - m;
      }
    n *= (int)c;
  }
  if (strlen(name) + 5 > PC_MAX_ENTRY_NAME)
    return pc_fail(g, PC_ERR_UNSUPPORTED, "entry point prefix \"%s\" is too long for buckets' names (%s__bK)", name,
                   name), -1;
  return n;
}

void kir_bucket_label(char *buf, size_t len, const pc_dyn_spec *ds, const kir_bucket *b, const char *sep) {
  size_t k = 0;
  buf[0] = 0;
  for (int s = 0, i = 0; s < ds->n_syms; s++)
    if (ds->bucket_step[s])
      app(buf, len, &k, "%s%s=%lld..%lld", i++ ? sep : "", ds->name[s], (long long)b->lo[s], (long long)b->hi[s]);
}

void kir_bucket_spec(const pc_dyn_spec *ds, const kir_bucket *b, pc_dyn_spec *sub) {
  *sub = *ds;
  for (int q = 0; q < ds->n_syms; q++) sub->lo[q] = b->lo[q], sub->hi[q] = b->hi[q], sub->bucket_step[q] = 0;
  sub->n_builds = sub->n_sizes = sub->fit_failed = 0, sub->probes[0] = 0, sub->fit_sym = -1;
}

pc_status kir_bucket_fail(pc_graph *g, pc_status code, const pc_dyn_spec *ds, const kir_bucket *b, const char *why) {
  char label[512];
  kir_bucket_label(label, sizeof label, ds, b, ", ");
  return pc_fail(g, code, "bucket %s: %s", label, why);
}

static int64_t file_bytes(const char *path) {
  struct stat st;
  return stat(path, &st) ? 0 : (int64_t)st.st_size;
}

/* how many more values than one bucketed symbol s takes in b (in units of its multiple) */
static int64_t span(const pc_dyn_spec *ds, const kir_bucket *b, int s) {
  return s >= 0 && s < ds->n_syms && ds->bucket_step[s] ? (b->hi[s] - b->lo[s]) / kir_dyn_mult(ds, s) : 0;
}

/* the symbol to halve b along: the one its program could not follow (ds->fit_sym) where it can, else the bucketed
 * symbol of most values in b; -1 when each holds one */
static int widest(const pc_dyn_spec *ds, const kir_bucket *b) {
  if (span(ds, b, ds->fit_sym) > 0) return ds->fit_sym;
  int best = -1;
  for (int s = 0; s < ds->n_syms; s++)
    if (span(ds, b, s) > (best < 0 ? 0 : span(ds, b, best))) best = s;
  return best;
}

int kir_bucket_splits(const pc_dyn_spec *ds, const kir_bucket *b) { return widest(ds, b) >= 0; }

pc_status kir_bucket_halve(pc_graph *g, const pc_dyn_spec *ds, kir_bucket *b, int *n, int k, const char *why) {
  int s = widest(ds, &b[k]);
  char label[512];
  kir_bucket_label(label, sizeof label, ds, &b[k], ", ");
  if (*n == MAX_BUCKETS || s < 0)
    return pc_fail(g, PC_ERR_UNSUPPORTED, "bucket %s: %s; halving the buckets to follow it would make more than %d",
                   label, why, MAX_BUCKETS);
  memmove(b + k + 1, b + k, sizeof *b * (size_t)(*n - k));
  int64_t m = kir_dyn_mult(ds, s);
  b[k].hi[s] = b[k].lo[s] + (b[k + 1].hi[s] - b[k].lo[s]) / m / 2 * m, b[k + 1].lo[s] = b[k].hi[s] + m;
  (*n)++;
  return PC_OK;
}

void kir_bucket_line(char *buf, size_t len, const pc_dyn_spec *ds, const kir_bucket *b, int k, const char *weights,
                     int n_kernels, const char *obj, int64_t workspace) {
  char label[512];
  kir_bucket_label(label, sizeof label, ds, &b[k], ", ");
  snprintf(buf, len, "    %s: %d kernels, object %.2f MB (%s), workspace %.2f MB\n", label, n_kernels,
           file_bytes(obj) / 1e6, weights, workspace / 1e6);
}

void kir_bucket_report(pc_dyn_spec *ds, int n, int halved, const char (*lines)[KIR_BUCKET_LINE], const char *kind,
                       const char *tail) {
  char names[512], steps[128];
  put_list(names, sizeof names, ds, 0);
  put_list(steps, sizeof steps, ds, 1);
  snprintf(ds->probes, sizeof ds->probes, "in %d programs, one per bucket", n);
  size_t len = 0;
  app(ds->buckets, sizeof ds->buckets, &len, "  buckets of %s: %d %sprograms (STEP %s%s):\n", names, n, kind, steps,
      halved ? "; halved where one program could not follow the dims" : "");
  for (int k = 0; k < n; k++) app(ds->buckets, sizeof ds->buckets, &len, "%s", lines[k]);
  app(ds->buckets, sizeof ds->buckets, &len, "    dispatcher: %s\n", tail);
}

/* with --profile: p's kernels appended to the rows of the dispatcher's table, their origins led by the bucket
 * ("seq=1..4:Conv:/l1/conv", "H=16..32,W=48..64:..."; the dims' names escaped, without whitespace, as the labels
 * are) */
static pc_status prof_rows(pc_graph *g, const pc_dyn_spec *ds, const kir_bucket *b, const kir_program *p,
                           kir_prof_row **rows, int *n) {
  kir_prof_row *r = realloc(*rows, sizeof *r * (size_t)(*n + p->n_kernels + 1));
  if (!r) return pc_fail(g, PC_ERR_NOMEM, "out of memory");
  *rows = r;
  char label[KIR_LABEL_MAX], lead[KIR_LABEL_MAX];
  kir_bucket_label(label, sizeof label, ds, b, ",");
  primc_text_escape(lead, sizeof lead - 1, label);
  for (char *c = lead; *c; c++)
    if (*c == ' ' || *c == '"') *c = ':';
  strcat(lead, ":");
  for (int i = 0; i < p->n_kernels; i++, (*n)++) {
    size_t l = strlen(lead);
    memcpy(r[*n].origin, lead, l + 1);
    kir_kernel_label(p, i, r[*n].name, sizeof r[*n].name, r[*n].origin + l, sizeof r[*n].origin - l);
    r[*n].bytes = kir_kernel_bytes(p, i);
  }
  return PC_OK;
}

/* bucket k (the box b) compiled and written to path as NAME__bK: its program in *p, on its graph *gk (the caller
 * frees it), its constants (*own bytes) in the pool (*fresh: the bytes it added), which the bucket reads through the
 * dispatcher's NAME_weights_pool, or with --weights external the side file's NAME_weights_base. *refit: the fit
 * failed, so halves of the bucket may still compile. With --profile its kernels count into the dispatcher's
 * NAME_profile from row prof_base. */
static pc_status bucket(pc_graph *g, const pc_codegen_opts *o, int k, const kir_bucket *b, const char *name,
                        const char *path, kir_pool *pool, int64_t *own, int64_t *fresh, pc_graph **gk, kir_program *p,
                        int *refit, int prof_base) {
  pc_dyn_spec *ds = o->dyn, sub;
  kir_bucket_spec(ds, b, &sub);
  pc_codegen_opts ok = *o;
  ok.dyn = &sub;
  *refit = 0, *own = *fresh = 0;
  if (!(*gk = ds->build(ds->ctx, b->hi))) return pc_fail(g, PC_ERR_NOMEM, "out of memory");
  pc_status st = (*gk)->status;
  if (st == PC_OK) st = kir_build_cpu(*gk, &ok, p);
  if (st == PC_OK && (st = kir_dyn_fit(p, &ok)) != PC_OK) {
    ds->fit_sym = sub.fit_sym; /* what to halve it along */
    *refit = st == PC_ERR_UNSUPPORTED && kir_bucket_splits(ds, b);
  }
  char bname[320], wsym[340], psym[340];
  snprintf(bname, sizeof bname, "%s__b%d", name, k);
  snprintf(wsym, sizeof wsym, o->weights_external ? "%s_weights_base" : "%s_weights_pool", name);
  snprintf(psym, sizeof psym, "%s_profile", name);
  if (st == PC_OK) st = kir_pool_add(pool, p, own, fresh);
  kir_object_link ln = {wsym, 0, psym, prof_base};
  if (st == PC_OK) st = kir_object_write(p, &ok, bname, path, &ln);
  ds->n_builds += sub.n_builds, ds->n_sizes += sub.n_sizes;
  if (st != PC_OK && !*refit) /* the bucket's error, said as the model's */
    return kir_bucket_fail(g, (*gk)->status ? (*gk)->status : st, ds, b, pc_error(*gk));
  return st;
}

void kir_bucket_note(char *buf, size_t len, const char *name, const pc_dyn_spec *ds, const kir_bucket *b, int n,
                     int cuda) {
  char specs[600], dims[256];
  int nd = pc_dyn_bucketed(ds);
  size_t k = 0;
  put_specs(specs, sizeof specs, ds);
  put_list(dims, sizeof dims, ds, 0);
  pc_c_comment_text(specs, sizeof specs, specs);
  pc_c_comment_text(dims, sizeof dims, dims);
  app(buf, len, &k, "\n/* buckets (%s): %d programs, each planned at its bucket's end%s;\n * %s_run_dims runs the one "
      "whose bucket holds %s%s%s. %s */\n#define %s_NUM_BUCKETS %d\n", specs, n, nd > 1 ? "s" : "", name,
      nd > 1 ? "the values of " : "", dims, nd > 1 ? "" : "'s value",
      cuda ? "Each has its own module, loaded on\n * its first run; buckets with the same weights share one device "
             "copy; the workspace is the largest bucket's"
           : "The workspace starts with\n * PRIMC_BUCKET_HEADER (4096) bytes that say which ran, then the largest "
             "bucket's", name, n);
  if (nd == 1) { /* one dim: where each bucket ends */
    int s = 0;
    while (!ds->bucket_step[s]) s++;
    app(buf, len, &k, "#define %s_BUCKET_DIM %d /* %s_DIMk */\n#define %s_BUCKET_MAX {", name, s, name, name);
    for (int i = 0; i < n; i++) app(buf, len, &k, "%s%lld", i ? ", " : "", (long long)b[i].hi[s]);
    app(buf, len, &k, "}\n");
    return;
  }
  /* several: the dims, and each bucket's box over them */
  app(buf, len, &k, "#define %s_NUM_BUCKET_DIMS %d\n#define %s_BUCKET_DIMS {", name, nd, name);
  for (int s = 0, j = 0; s < ds->n_syms; s++)
    if (ds->bucket_step[s]) app(buf, len, &k, "%s%d", j++ ? ", " : "", s);
  app(buf, len, &k, "} /* %s_DIMk */\n", name);
  for (int hi = 0; hi < 2; hi++) {
    app(buf, len, &k, "#define %s_BUCKET_%s {", name, hi ? "MAX" : "MIN");
    for (int i = 0; i < n; i++) {
      app(buf, len, &k, "%s{", i ? ", " : "");
      for (int s = 0, j = 0; s < ds->n_syms; s++)
        if (ds->bucket_step[s]) app(buf, len, &k, "%s%lld", j++ ? ", " : "", (long long)(hi ? b[i].hi[s] : b[i].lo[s]));
      app(buf, len, &k, "}");
    }
    app(buf, len, &k, "}\n");
  }
}

void kir_bucket_dims(const pc_dyn_spec *ds, const pc_graph *gt, int n, const kir_bucket *b, const int64_t *dims,
                     int *in_sym) {
  int n_in = gt->n_inputs * PC_MAX_RANK;
  for (int i = 0; i < n_in; i++) {
    if (in_sym[i] >= 0 || i % PC_MAX_RANK >= gt->inputs[i / PC_MAX_RANK]->type.rank) continue;
    int moves = 0;
    for (int k = 1; k < n; k++) moves |= dims[k * n_in + i] != dims[i];
    for (int s = 0; moves && s < ds->n_syms && in_sym[i] < 0; s++) {
      int all = ds->bucket_step[s] > 0;
      for (int k = 0; all && k < n; k++) all = dims[k * n_in + i] == b[k].hi[s];
      if (all) in_sym[i] = s;
    }
  }
}

pc_status kir_codegen_buckets(pc_graph *g, const pc_codegen_opts *o) {
  pc_dyn_spec *ds = o->dyn;
  if (o->emit != PC_EMIT_EXE && o->emit != PC_EMIT_LIB && o->emit != PC_EMIT_OBJ)
    return pc_fail(g, PC_ERR_UNSUPPORTED, "buckets (--dim NAME=LO..HI:STEP) compile to an executable, an object or a "
                   "shared library, not LLVM IR or assembly");
  kir_bucket bx[MAX_BUCKETS + 1];
  char name[256], stem[1024];
  kir_output_names(o, name, sizeof name, stem, sizeof stem);
  int n = kir_bucket_ranges(g, ds, name, bx);
  if (n < 0) return g->status;
  int n_io = (g->n_inputs + g->n_outputs + 1) * PC_MAX_RANK, n_in = g->n_inputs * PC_MAX_RANK;
  char (*objs)[1100] = calloc(MAX_BUCKETS + 1, sizeof *objs);
  const char **paths = calloc(MAX_BUCKETS + 1, sizeof *paths);
  int *in_sym = pc_alloc(g, sizeof *in_sym * (size_t)n_io);
  int64_t *out_slot = pc_alloc(g, sizeof *out_slot * (size_t)n_io), *dims = calloc((size_t)(n_in + 1) * (MAX_BUCKETS + 1), sizeof *dims);
  if (!objs || !paths || !in_sym || !out_slot || !dims)
    return free(objs), free(paths), free(dims), pc_fail(g, PC_ERR_NOMEM, "out of memory");
  for (int i = 0; i < n_io; i++) in_sym[i] = -1, out_slot[i] = -1;
  int64_t ws = 0, weights = 0;
  char lines[MAX_BUCKETS][KIR_BUCKET_LINE], wpath[1100];
  kir_program top;
  pc_graph *gtop = NULL;
  pc_status st = PC_OK;
  int halved = 0, in_place = 1, wfd = -1;
  kir_prof_row *prof = NULL;
  int n_prof = 0;
  kir_pool pool = {.fd = -1};
  snprintf(wpath, sizeof wpath, "%s.weights", o->emit == PC_EMIT_EXE ? o->output : stem);
  if (o->weights_external && (wfd = kir_weights_file_open(g, wpath)) < 0) st = g->status;
  if (st == PC_OK) st = kir_pool_open(g, &pool, wfd, o->weights_external ? (int64_t)sizeof(primc_weights_header) : 0);
  for (int k = 0; st == PC_OK && k < n;) {
    pc_graph *gk = NULL;
    kir_program p;
    int refit;
    int64_t own, fresh;
    snprintf(objs[k], sizeof objs[k], "%s.primc-b%d.o", o->output, k);
    pc_progress(o, "bucket", k, n);
    st = bucket(g, o, k, &bx[k], name, objs[k], &pool, &own, &fresh, &gk, &p, &refit, n_prof);
    if (refit) { /* two halves in its place */
      st = kir_bucket_halve(g, ds, bx, &n, k, pc_error(gk));
      halved++;
      pc_graph_free(gk);
      continue;
    }
    if (st == PC_OK) {
      ws = p.workspace_size > ws ? p.workspace_size : ws;
      in_place &= gk->state_in_place; /* one buffer set serves every step only if it does in every bucket */
      for (int i = 0; i < n_io; i++) {
        if (in_sym[i] < 0 && i < gk->n_inputs * PC_MAX_RANK) in_sym[i] = p.dyn->in_sym[i];
        if (out_slot[i] < 0 && i < gk->n_outputs * PC_MAX_RANK) out_slot[i] = p.dyn->out_slot[i];
        if (i < n_in && i % PC_MAX_RANK < gk->inputs[i / PC_MAX_RANK]->type.rank)
          dims[k * n_in + i] = gk->inputs[i / PC_MAX_RANK]->type.dims[i % PC_MAX_RANK];
      }
      char wtext[96];
      snprintf(wtext, sizeof wtext, "weights %.2f MB, %.2f MB of them new", own / 1e6, fresh / 1e6);
      kir_bucket_line(lines[k], sizeof lines[k], ds, bx, k, wtext, p.n_kernels, objs[k], p.workspace_size);
      if (o->profile && prof_rows(g, ds, &bx[k], &p, &prof, &n_prof) != PC_OK) st = g->status;
    }
    if (st == PC_OK && k == n - 1) top = p, gtop = gk;
    else pc_graph_free(gk);
    k++;
  }
  weights = pool.size;
  if (wfd >= 0) st = kir_weights_file_close(g, wfd, weights, st, wpath);
  kir_dyn full;
  if (st == PC_OK) {
    if (gtop->n_state) gtop->state_in_place = g->state_in_place = in_place; /* the header's, the descriptor's */
    full = *top.dyn;
    for (int q = 0; q < ds->n_syms; q++) full.lo[q] = ds->lo[q], full.hi[q] = ds->hi[q];
    full.in_sym = in_sym, full.out_slot = out_slot, full.offset = -1;
    if (n > 1) kir_bucket_dims(ds, gtop, n, bx, dims, in_sym);
    kir_buckets b = {n, bx, &full, PRIMC_BUCKET_HEADER + (ws + 63) / 64 * 64, n_prof, prof,
                     o->weights_external ? weights : -1, o->weights_external ? 0 : weights};
    snprintf(objs[n], sizeof objs[n], "%s.primc-tmp.o", o->output);
    for (int k = 0; k <= n; k++) paths[k] = objs[k];
    llvm_emit_opts lo_ = {LLVM_OUT_OBJ, objs[n], name, o->triple, o->cpu, o->features, o->opt_level, 0, NULL,
                          o->emit == PC_EMIT_EXE, 0, o, NULL, 0, NULL, 0};
    st = pc_llvm_emit_buckets(&top, &b, &lo_);
    char psym[300];
    snprintf(psym, sizeof psym, "%s_weights_pool", name);
    if (st == PC_OK && b.pool_size > 0) st = kir_elf_append(g, objs[n], psym, b.pool_size, kir_pool_copy, &pool);
    char tail[128];
    snprintf(tail, sizeof tail, "workspace %.2f MB (the largest bucket's and %d bytes)", b.workspace_size / 1e6,
             PRIMC_BUCKET_HEADER);
    kir_bucket_report(ds, n, halved, (const char (*)[KIR_BUCKET_LINE])lines, "", tail);
    pc_progress(o, "link", 0, 0);
    if (st == PC_OK && o->emit == PC_EMIT_OBJ) {
      char out[1100];
      kir_object_path(o, out, sizeof out);
      st = kir_link(g, o, out, paths, n + 1, KIR_LINK_OBJECT);
    } else if (st == PC_OK) {
      st = kir_link(g, o, o->output, paths, n + 1, o->emit == PC_EMIT_LIB ? KIR_LINK_SHARED : KIR_LINK_EXE);
    }
    if (st == PC_OK && o->emit != PC_EMIT_EXE) {
      kir_program h = top;
      h.dyn = &full;
      h.workspace_size = b.workspace_size;
      h.weights_size = weights;
      char note[8192], path[1100];
      kir_bucket_note(note, sizeof note, name, ds, bx, n, 0);
      snprintf(path, sizeof path, "%s.h", stem);
      st = kir_header_write(&h, path, name, o->weights_external, note);
    }
    if (st != PC_OK && !g->status && gtop->status) pc_fail(g, gtop->status, "%s", pc_error(gtop));
  }
  if (wfd >= 0 && st != PC_OK) unlink(wpath); /* only the file this compile opened */
  kir_pool_close(&pool), free(prof);
  pc_graph_free(gtop);
  for (int k = 0; k <= n && k <= MAX_BUCKETS; k++)
    if (objs[k][0]) unlink(objs[k]);
  free(objs), free(paths), free(dims);
  return st;
}
