/* codegen/buckets.c: a range dim in buckets (--dim NAME=LO..HI:STEP). Each bucket is the model compiled with that
 * dim's range cut to the bucket, planned at the bucket's HI (rows, tiles and workspace for its sizes, not the
 * range's largest) and fitted like any range (codegen/dynamic.c); a bucket no one program can follow (the planner
 * picks other rows at smaller sizes) is halved until each part can, down to programs for a single value. Each is
 * written as an object whose entry points are NAME__bK; a dispatcher object is the model NAME
 * (codegen/llvm_buckets.c); they are linked together, or joined into one relocatable object for --emit obj. */
#include "codegen/codegen.h"
#include "codegen/kir.h"
#include "runtime/primc_rt.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_BUCKETS KIR_MAX_BUCKETS

int kir_bucket_ranges(pc_graph *g, const pc_dyn_spec *ds, const char *name, int64_t *lo, int64_t *hi) {
  int s = ds->bucket_sym, n = 0;
  int64_t m = kir_dyn_mult(ds, s); /* buckets end at multiples */
  for (int64_t a = ds->lo[s]; a <= ds->hi[s] && n <= MAX_BUCKETS; a += ds->bucket_step, n++)
    lo[n] = a, hi[n] = ds->hi[s] - a < ds->bucket_step ? ds->hi[s] : a + ds->bucket_step - m;
  if (n > MAX_BUCKETS)
    return pc_fail(g, PC_ERR_UNSUPPORTED, "--dim %s=%lld..%lld:%lld makes more than %d buckets", ds->name[s],
                   (long long)ds->lo[s], (long long)ds->hi[s], (long long)ds->bucket_step, MAX_BUCKETS), -1;
  if (strlen(name) + 5 > PC_MAX_ENTRY_NAME)
    return pc_fail(g, PC_ERR_UNSUPPORTED, "entry point prefix \"%s\" is too long for buckets' names (%s__bK)", name,
                   name), -1;
  return n;
}

static int64_t file_bytes(const char *path) {
  struct stat st;
  return stat(path, &st) ? 0 : (int64_t)st.st_size;
}

int kir_twin_take(kir_twin *tw, void *blob, int64_t bytes, int k) {
  if (tw->k >= 0 && tw->bytes == bytes && !memcmp(tw->blob, blob, (size_t)bytes)) return free(blob), tw->k;
  free(tw->blob);
  *tw = (kir_twin){blob, bytes, k};
  return k;
}

pc_status kir_bucket_halve(pc_graph *g, const pc_dyn_spec *ds, int64_t *lo, int64_t *hi, int *n, int k, const char *why) {
  int s = ds->bucket_sym;
  if (*n == MAX_BUCKETS)
    return pc_fail(g, PC_ERR_UNSUPPORTED, "bucket %s=%lld..%lld: %s; halving the buckets to follow it would make more "
                   "than %d", ds->name[s], (long long)lo[k], (long long)hi[k], why, MAX_BUCKETS);
  memmove(lo + k + 1, lo + k, sizeof *lo * (size_t)(*n - k));
  memmove(hi + k + 1, hi + k, sizeof *hi * (size_t)(*n - k));
  int64_t m = kir_dyn_mult(ds, s);
  hi[k] = lo[k] + (hi[k + 1] - lo[k]) / m / 2 * m, lo[k + 1] = hi[k] + m;
  (*n)++;
  return PC_OK;
}

void kir_bucket_line(char *buf, size_t len, const pc_dyn_spec *ds, const int64_t *lo, const int64_t *hi, int k,
                     int shared, int n_kernels, const char *obj, int64_t weights, int64_t workspace) {
  int s = ds->bucket_sym;
  char wtext[64];
  if (shared == k) snprintf(wtext, sizeof wtext, "weights %.2f MB", weights / 1e6);
  else snprintf(wtext, sizeof wtext, "the weights of %s=%lld..%lld", ds->name[s], (long long)lo[shared], (long long)hi[shared]);
  snprintf(buf, len, "    %s=%lld..%lld: %d kernels, object %.2f MB (%s), workspace %.2f MB\n", ds->name[s],
           (long long)lo[k], (long long)hi[k], n_kernels, file_bytes(obj) / 1e6, wtext, workspace / 1e6);
}

void kir_bucket_report(pc_dyn_spec *ds, int n, int halved, const char (*lines)[KIR_BUCKET_LINE], const char *kind,
                       const char *tail) {
  snprintf(ds->probes, sizeof ds->probes, "in %d programs, one per bucket", n);
  size_t len = (size_t)snprintf(ds->buckets, sizeof ds->buckets, "  buckets of %s: %d %sprograms (STEP %lld%s):\n",
                                ds->name[ds->bucket_sym], n, kind, (long long)ds->bucket_step,
                                halved ? "; halved where one program could not follow the dims" : "");
  for (int k = 0; k < n && len < sizeof ds->buckets; k++)
    len += (size_t)snprintf(ds->buckets + len, sizeof ds->buckets - len, "%s", lines[k]);
  if (len < sizeof ds->buckets) snprintf(ds->buckets + len, sizeof ds->buckets - len, "    dispatcher: %s\n", tail);
}

/* with --profile: p's kernels appended to the rows of the dispatcher's table, their origins led by the bucket
 * ("seq=1..4:Conv:/l1/conv"; the dim's name escaped, without whitespace, as the labels are) */
static pc_status prof_rows(pc_graph *g, const pc_dyn_spec *ds, int64_t lo, int64_t hi, const kir_program *p,
                           kir_prof_row **rows, int *n) {
  kir_prof_row *r = realloc(*rows, sizeof *r * (size_t)(*n + p->n_kernels + 1));
  if (!r) return pc_fail(g, PC_ERR_NOMEM, "out of memory");
  *rows = r;
  char dim[KIR_LABEL_MAX / 2], lead[KIR_LABEL_MAX];
  primc_text_escape(dim, sizeof dim, ds->name[ds->bucket_sym]);
  for (char *c = dim; *c; c++)
    if (*c == ' ' || *c == '"') *c = ':';
  snprintf(lead, sizeof lead, "%s=%lld..%lld:", dim, (long long)lo, (long long)hi);
  for (int i = 0; i < p->n_kernels; i++, (*n)++) {
    size_t l = strlen(lead);
    memcpy(r[*n].origin, lead, l + 1);
    kir_kernel_label(p, i, r[*n].name, sizeof r[*n].name, r[*n].origin + l, sizeof r[*n].origin - l);
    r[*n].bytes = kir_kernel_bytes(p, i);
  }
  return PC_OK;
}

/* --weights external: one side file for every bucket, each distinct bucket's weights at a 64-byte aligned offset of
 * the payload, a twin's at its twin's */
typedef struct wfile {
  int fd;
  int64_t at, off[MAX_BUCKETS + 1];
  char path[1100];
} wfile;

static pc_status wfile_put(pc_graph *g, wfile *wf, int k, int shared, const kir_twin *tw) {
  if (shared != k || !tw->blob || tw->k != k) {
    wf->off[k] = shared != k ? wf->off[shared] : 0;
    return PC_OK;
  }
  wf->off[k] = wf->at;
  if (!kir_pwrite_all(wf->fd, tw->blob, (size_t)tw->bytes, (off_t)(sizeof(primc_weights_header) + wf->at)))
    return pc_fail(g, PC_ERR_IO, "cannot write %s: %s", wf->path, strerror(errno));
  wf->at += (tw->bytes + 63) / 64 * 64;
  return PC_OK;
}

/* bucket k ([lo, hi] of the symbol) compiled and written to path as NAME__bK: its program in *p, on its graph *gk
 * (the caller frees it); *shared: the bucket whose weights it reads, else k. *refit: the fit failed, so halves of
 * the bucket may still compile. With --profile its kernels count into the dispatcher's NAME_profile from row
 * prof_base; with --weights external (wf) its weights go into the side file, read through the dispatcher's
 * NAME_weights_base. */
static pc_status bucket(pc_graph *g, const pc_codegen_opts *o, int k, int64_t lo, int64_t hi, const char *name,
                        const char *path, kir_twin *tw, int *shared, pc_graph **gk, kir_program *p, int *refit,
                        int prof_base, wfile *wf) {
  pc_dyn_spec *ds = o->dyn, sub = *ds;
  int s = ds->bucket_sym;
  sub.lo[s] = lo, sub.hi[s] = hi, sub.bucket_step = 0, sub.n_builds = sub.n_sizes = 0, sub.probes[0] = 0;
  pc_codegen_opts ok = *o;
  ok.dyn = &sub;
  int64_t values[PC_DYN_MAX_SYMS];
  for (int q = 0; q < ds->n_syms; q++) values[q] = ds->hi[q];
  values[s] = hi;
  *refit = 0;
  if (!(*gk = ds->build(ds->ctx, values))) return pc_fail(g, PC_ERR_NOMEM, "out of memory");
  pc_status st = (*gk)->status;
  if (st == PC_OK) st = kir_build_cpu(*gk, &ok, p);
  if (st == PC_OK && (st = kir_dyn_fit(p, &ok)) != PC_OK) *refit = st == PC_ERR_UNSUPPORTED && lo < hi;
  char bname[320], wsym[340];
  snprintf(bname, sizeof bname, "%s__b%d", name, k);
  *shared = k;
  void *blob = st == PC_OK && p->weights_size > 0 ? kir_weights_blob(p) : NULL;
  if (st == PC_OK && p->weights_size > 0 && !blob) st = pc_fail(*gk, PC_ERR_NOMEM, "out of memory for the weights");
  if (blob) *shared = kir_twin_take(tw, blob, p->weights_size, k);
  if (wf) snprintf(wsym, sizeof wsym, "%s_weights_base", name);
  else snprintf(wsym, sizeof wsym, "%s__b%d_weights", name, *shared);
  char psym[340];
  snprintf(psym, sizeof psym, "%s_profile", name);
  if (st == PC_OK && wf) st = wfile_put(g, wf, k, *shared, tw);
  kir_object_link ln = {wf || *shared != k ? wsym : NULL, wf ? wf->off[k] : 0, psym, prof_base};
  if (st == PC_OK) st = kir_object_write(p, &ok, bname, path, &ln);
  ds->n_builds += sub.n_builds, ds->n_sizes += sub.n_sizes;
  if (st != PC_OK && !*refit) /* the bucket's error, said as the model's */
    return pc_fail(g, (*gk)->status ? (*gk)->status : st, "bucket %s=%lld..%lld: %s", ds->name[s], (long long)lo,
                   (long long)hi, pc_error(*gk));
  return st;
}

void kir_bucket_note(char *buf, size_t len, const char *name, const pc_dyn_spec *ds, const int64_t *hi, int n, int cuda) {
  int s = ds->bucket_sym;
  char dim[256];
  pc_c_comment_text(dim, sizeof dim, ds->name[s]);
  size_t k = (size_t)snprintf(buf, len,
                              "\n/* buckets (--dim %s=%lld..%lld:%lld): %d programs, each planned at its bucket's end;\n"
                              " * %s_run_dims runs the one whose bucket holds %s's value. %s */\n"
                              "#define %s_NUM_BUCKETS %d\n#define %s_BUCKET_DIM %d /* %s_DIMk */\n#define %s_BUCKET_MAX {",
                              dim, (long long)ds->lo[s], (long long)ds->hi[s], (long long)ds->bucket_step, n, name, dim,
                              cuda ? "Each has its own module, loaded on\n * its first run; buckets with the same weights share "
                                     "one device copy; the workspace is the largest bucket's"
                                   : "The workspace starts with\n * PRIMC_BUCKET_HEADER (4096) bytes that say which ran, "
                                     "then the largest bucket's",
                              name, n, name, s, name, name);
  for (int i = 0; i < n && k < len; i++) k += (size_t)snprintf(buf + k, len - k, "%s%lld", i ? ", " : "", (long long)hi[i]);
  if (k < len) snprintf(buf + k, len - k, "}\n");
}

void kir_bucket_dims(const pc_dyn_spec *ds, const pc_graph *gt, const int64_t *dims0, int *in_sym) {
  for (int i = 0; i < gt->n_inputs * PC_MAX_RANK; i++) {
    int d = i % PC_MAX_RANK;
    const pc_type *t = &gt->inputs[i / PC_MAX_RANK]->type;
    if (in_sym[i] < 0 && d < t->rank && dims0[i] != t->dims[d]) in_sym[i] = ds->bucket_sym;
  }
}

pc_status kir_codegen_buckets(pc_graph *g, const pc_codegen_opts *o) {
  pc_dyn_spec *ds = o->dyn;
  int s = ds->bucket_sym;
  if (o->emit != PC_EMIT_EXE && o->emit != PC_EMIT_LIB && o->emit != PC_EMIT_OBJ)
    return pc_fail(g, PC_ERR_UNSUPPORTED, "buckets (--dim NAME=LO..HI:STEP) compile to an executable, an object or a "
                   "shared library, not LLVM IR or assembly");
  int64_t lo[MAX_BUCKETS + 1], hi[MAX_BUCKETS + 1];
  char name[256], stem[1024];
  kir_output_names(o, name, sizeof name, stem, sizeof stem);
  int n = kir_bucket_ranges(g, ds, name, lo, hi);
  if (n < 0) return g->status;
  int n_io = (g->n_inputs + g->n_outputs + 1) * PC_MAX_RANK;
  char (*objs)[1100] = calloc(MAX_BUCKETS + 1, sizeof *objs);
  const char **paths = calloc(MAX_BUCKETS + 1, sizeof *paths);
  int *in_sym = pc_alloc(g, sizeof *in_sym * (size_t)n_io);
  int64_t *out_slot = pc_alloc(g, sizeof *out_slot * (size_t)n_io), *dims0 = calloc((size_t)n_io, sizeof *dims0);
  if (!objs || !paths || !in_sym || !out_slot || !dims0)
    return free(objs), free(paths), free(dims0), pc_fail(g, PC_ERR_NOMEM, "out of memory");
  for (int i = 0; i < n_io; i++) in_sym[i] = -1, out_slot[i] = -1;
  int64_t ws = 0, weights = 0;
  char lines[MAX_BUCKETS][KIR_BUCKET_LINE];
  kir_program top;
  pc_graph *gtop = NULL;
  pc_status st = PC_OK;
  int halved = 0, shared = 0, in_place = 1;
  kir_twin tw = {NULL, 0, -1};
  kir_prof_row *prof = NULL;
  int n_prof = 0;
  wfile *wf = o->weights_external ? calloc(1, sizeof *wf) : NULL;
  if (o->weights_external) {
    if (!wf) st = pc_fail(g, PC_ERR_NOMEM, "out of memory");
    else snprintf(wf->path, sizeof wf->path, "%s.weights", o->emit == PC_EMIT_EXE ? o->output : stem);
    if (wf && (wf->fd = kir_weights_file_open(g, wf->path)) < 0) st = g->status, free(wf), wf = NULL;
  }
  for (int k = 0; st == PC_OK && k < n;) {
    pc_graph *gk = NULL;
    kir_program p;
    int refit;
    snprintf(objs[k], sizeof objs[k], "%s.primc-b%d.o", o->output, k);
    pc_progress(o, "bucket", k, n);
    st = bucket(g, o, k, lo[k], hi[k], name, objs[k], &tw, &shared, &gk, &p, &refit, n_prof, wf);
    if (refit) { /* two halves in its place */
      st = kir_bucket_halve(g, ds, lo, hi, &n, k, pc_error(gk));
      halved++;
      pc_graph_free(gk);
      continue;
    }
    if (st == PC_OK) {
      ws = p.workspace_size > ws ? p.workspace_size : ws;
      in_place &= gk->state_in_place; /* one buffer set serves every step only if it does in every bucket */
      weights += shared == k ? p.weights_size : 0;
      for (int i = 0; i < n_io; i++) {
        if (in_sym[i] < 0 && i < gk->n_inputs * PC_MAX_RANK) in_sym[i] = p.dyn->in_sym[i];
        if (out_slot[i] < 0 && i < gk->n_outputs * PC_MAX_RANK) out_slot[i] = p.dyn->out_slot[i];
        if (k == 0 && i < gk->n_inputs * PC_MAX_RANK && i % PC_MAX_RANK < gk->inputs[i / PC_MAX_RANK]->type.rank)
          dims0[i] = gk->inputs[i / PC_MAX_RANK]->type.dims[i % PC_MAX_RANK];
      }
      kir_bucket_line(lines[k], sizeof lines[k], ds, lo, hi, k, shared, p.n_kernels, objs[k], p.weights_size,
                      p.workspace_size);
      if (o->profile && prof_rows(g, ds, lo[k], hi[k], &p, &prof, &n_prof) != PC_OK) st = g->status;
    }
    if (st == PC_OK && k == n - 1) top = p, gtop = gk;
    else pc_graph_free(gk);
    k++;
  }
  if (wf) st = kir_weights_file_close(g, wf->fd, wf->at, st, wf->path);
  kir_dyn full;
  if (st == PC_OK) {
    if (gtop->n_state) gtop->state_in_place = g->state_in_place = in_place; /* the header's, the descriptor's */
    full = *top.dyn;
    for (int q = 0; q < ds->n_syms; q++) full.lo[q] = ds->lo[q], full.hi[q] = ds->hi[q];
    full.in_sym = in_sym, full.out_slot = out_slot, full.offset = -1;
    if (n > 1) kir_bucket_dims(ds, gtop, dims0, in_sym);
    kir_buckets b = {n, s, hi, &full, PRIMC_BUCKET_HEADER + (ws + 63) / 64 * 64, n_prof, prof, wf ? wf->at : -1};
    snprintf(objs[n], sizeof objs[n], "%s.primc-tmp.o", o->output);
    for (int k = 0; k <= n; k++) paths[k] = objs[k];
    llvm_emit_opts lo_ = {LLVM_OUT_OBJ, objs[n], name, o->triple, o->cpu, o->features, o->opt_level, 0, NULL,
                          o->emit == PC_EMIT_EXE, 0, o, NULL, 0, NULL, 0};
    st = pc_llvm_emit_buckets(&top, &b, &lo_);
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
      h.weights_size = wf ? wf->at : weights;
      char note[2048], path[1100];
      kir_bucket_note(note, sizeof note, name, ds, hi, n, 0);
      snprintf(path, sizeof path, "%s.h", stem);
      st = kir_header_write(&h, path, name, wf != NULL, note);
    }
    if (st != PC_OK && !g->status && gtop->status) pc_fail(g, gtop->status, "%s", pc_error(gtop));
  }
  if (wf && st != PC_OK) unlink(wf->path);
  free(tw.blob), free(prof), free(wf);
  pc_graph_free(gtop);
  for (int k = 0; k <= n && k <= MAX_BUCKETS; k++)
    if (objs[k][0]) unlink(objs[k]);
  free(objs), free(paths), free(dims0);
  return st;
}
