/* codegen/cuda_buckets.c: --target cuda with range dims in buckets (--dim NAME=LO..HI:STEP). As on the CPU
 * (codegen/buckets.c), each bucket is the model built at its box's ends and made to follow its part of the ranges
 * (codegen/cuda_dynamic.c), halved where one program cannot; each is packaged as an object of its own (entry points
 * NAME__bK, its own module), and the dispatcher NAME (codegen/package_cuda.c) runs the one that holds the value. */
#include "codegen/codegen.h"
#include "codegen/kir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_BUCKETS KIR_MAX_BUCKETS

/* the buckets' distinct weights so far, whole (each bucket's module reads one device copy; the CPU's buckets share
 * constant by constant, codegen/weights_pool.c): buckets often pack theirs alike (the GEMM panels do not follow
 * the rows of A; in a grid of buckets the same rows come back in other boxes), and a bucket with the same bytes as
 * an earlier one reads that bucket's. The bytes of the oldest are let go past TWIN_KEEP bytes in all (the last always
 * kept): a later bucket equal to those only keeps a copy of its own. */
#define TWIN_KEEP ((int64_t)1 << 30)
typedef struct twin {
  int n;
  void *blob[MAX_BUCKETS]; /* NULL: let go */
  int64_t bytes[MAX_BUCKETS];
  int k[MAX_BUCKETS];      /* whose they are */
} twin;

/* the bucket whose weights bucket k reads (k, or an earlier one with the same bytes); takes blob (malloc'ed) */
static int twin_take(twin *tw, void *blob, int64_t bytes, int k) {
  for (int i = 0; i < tw->n; i++)
    if (tw->blob[i] && tw->bytes[i] == bytes && !memcmp(tw->blob[i], blob, (size_t)bytes)) return free(blob), tw->k[i];
  if (tw->n == MAX_BUCKETS) return free(blob), k; /* not reached: a twin per bucket at most */
  int64_t kept = bytes;
  for (int i = tw->n - 1; i >= 0; i--) { /* the newest kept, the oldest let go */
    if (tw->blob[i] && kept + tw->bytes[i] > TWIN_KEEP) free(tw->blob[i]), tw->blob[i] = NULL;
    kept += tw->blob[i] ? tw->bytes[i] : 0;
  }
  tw->blob[tw->n] = blob, tw->bytes[tw->n] = bytes, tw->k[tw->n++] = k;
  return k;
}

/* the weights bucket k owns (its bytes in *bytes), NULL when it reads another's or they were let go */
static const void *twin_blob(const twin *tw, int k, int64_t *bytes) {
  for (int i = 0; i < tw->n; i++)
    if (tw->k[i] == k) return *bytes = tw->bytes[i], tw->blob[i];
  return *bytes = 0, NULL;
}

static void twin_free(twin *tw) {
  for (int i = 0; i < tw->n; i++) free(tw->blob[i]);
  tw->n = 0;
}

/* one bucket's program, packaged */
typedef struct part {
  pc_graph *g; /* built at the bucket's end; owns p's kernels, the launches and the dims */
  kir_program p;
  kir_cuda_dyn *d;
  int shared;  /* the bucket whose weights it reads */
} part;

/* bucket k (the box b) built, fitted and packaged at obj as NAME__bK; *refit: it could not follow its part of the
 * ranges, so its halves may */
static pc_status bucket(pc_graph *g, const pc_codegen_opts *o, int k, const kir_bucket *b, const char *name,
                        const char *obj, twin *tw, part *pt, int *refit) {
  pc_dyn_spec *ds = o->dyn, sub;
  kir_bucket_spec(ds, b, &sub);
  pc_codegen_opts ok = *o;
  ok.dyn = &sub;
  *refit = 0;
  memset(pt, 0, sizeof *pt);
  if (!(pt->g = ds->build(ds->ctx, b->hi))) return pc_fail(g, PC_ERR_NOMEM, "out of memory");
  char *src = NULL;
  pc_cuda_launch *L = NULL;
  pc_status st = pt->g->status;
  if (st == PC_OK) st = kir_cuda_program(pt->g, &ok, &pt->p, &src, &L, &pt->d);
  ds->fit_sym = sub.fit_sym; /* what to halve it along */
  *refit = st == PC_ERR_UNSUPPORTED && sub.fit_failed && kir_bucket_splits(ds, b);
  ds->n_builds += sub.n_builds, ds->n_sizes += sub.n_sizes;
  void *blob = st == PC_OK ? kir_weights_blob(&pt->p) : NULL;
  if (st == PC_OK && !blob) st = pc_fail(pt->g, PC_ERR_NOMEM, "out of memory for the weights");
  pt->shared = blob ? twin_take(tw, blob, pt->p.weights_size, k) : k;
  char bname[320], wname[320];
  snprintf(bname, sizeof bname, "%s__b%d", name, k);
  snprintf(wname, sizeof wname, "%s__b%d", name, pt->shared);
  int64_t bytes;
  if (st == PC_OK) /* the twin keeps the bytes of a bucket that owns its weights: this one's, when not shared */
    st = kir_cuda_part(pt->g, &ok, &pt->p, src, L, pt->d, bname, obj, pt->shared == k ? twin_blob(tw, k, &bytes) : NULL,
                       pt->shared != k ? wname : NULL);
  free(src);
  if (st != PC_OK && !*refit) /* the bucket's error, said as the model's */
    return kir_bucket_fail(g, pt->g->status ? pt->g->status : st, ds, b, pc_error(pt->g));
  return st;
}

pc_status kir_cuda_buckets_package(pc_graph *g, const pc_codegen_opts *o) {
  pc_dyn_spec *ds = o->dyn;
  kir_bucket bx[MAX_BUCKETS + 1];
  char name[256], stem[1024], dir[64] = "/tmp/primc-cudab-XXXXXX";
  kir_output_names(o, name, sizeof name, stem, sizeof stem);
  int n = kir_bucket_ranges(g, ds, name, bx);
  if (n < 0) return g->status;
  if (!mkdtemp(dir)) return pc_fail(g, PC_ERR_IO, "cannot make a temporary directory");
  int n_in = g->n_inputs * PC_MAX_RANK;
  char (*objs)[96] = calloc(MAX_BUCKETS, sizeof *objs);
  const char **paths = calloc(MAX_BUCKETS, sizeof *paths);
  char (*lines)[KIR_BUCKET_LINE] = calloc(MAX_BUCKETS, sizeof *lines);
  int *in_sym = pc_alloc(g, sizeof *in_sym * (size_t)(n_in + 1));
  int64_t *dims = calloc((size_t)(n_in + 1) * (MAX_BUCKETS + 1), sizeof *dims);
  pc_status st = objs && paths && lines && in_sym && dims ? PC_OK : pc_fail(g, PC_ERR_NOMEM, "out of memory");
  for (int i = 0; i < n_in; i++) in_sym[i] = -1;
  int64_t ws = 0, weights = 0;
  int halved = 0, kernels = 0;
  twin tw = {0};
  part top = {0};
  for (int k = 0; st == PC_OK && k < n;) {
    part pt;
    int refit;
    snprintf(objs[k], sizeof objs[k], "%s/b%d.o", dir, k);
    pc_progress(o, "bucket (CUDA)", k, n);
    st = bucket(g, o, k, &bx[k], name, objs[k], &tw, &pt, &refit);
    if (refit) { /* two halves in its place */
      st = kir_bucket_halve(g, ds, bx, &n, k, pc_error(pt.g));
      halved++;
      pc_graph_free(pt.g);
      continue;
    }
    if (st == PC_OK) {
      ws = pt.p.workspace_size > ws ? pt.p.workspace_size : ws;
      kernels = pt.p.n_kernels > kernels ? pt.p.n_kernels : kernels;
      weights += pt.shared == k ? pt.p.weights_size : 0;
      for (int i = 0; i < n_in; i++) {
        if (in_sym[i] < 0) in_sym[i] = pt.d->in_sym[i];
        if (i % PC_MAX_RANK < pt.g->inputs[i / PC_MAX_RANK]->type.rank)
          dims[k * n_in + i] = pt.g->inputs[i / PC_MAX_RANK]->type.dims[i % PC_MAX_RANK];
      }
      char wtext[600];
      if (pt.shared == k) snprintf(wtext, sizeof wtext, "weights %.2f MB", pt.p.weights_size / 1e6);
      else {
        char label[512];
        kir_bucket_label(label, sizeof label, ds, &bx[pt.shared], ", ");
        snprintf(wtext, sizeof wtext, "the weights of %s", label);
      }
      kir_bucket_line(lines[k], sizeof lines[k], ds, bx, k, wtext, pt.p.n_kernels, objs[k], pt.p.workspace_size);
    }
    if (st == PC_OK && k == n - 1) top = pt;
    else pc_graph_free(pt.g);
    k++;
  }
  if (st == PC_OK) {
    kir_cuda_dyn full = *top.d;
    for (int q = 0; q < ds->n_syms; q++) full.lo[q] = ds->lo[q], full.hi[q] = ds->hi[q];
    full.in_sym = in_sym;
    if (n > 1) kir_bucket_dims(ds, top.g, n, bx, dims, in_sym);
    char note[8192];
    kir_bucket_note(note, sizeof note, name, ds, bx, n, 1);
    for (int k = 0; k < n; k++) paths[k] = objs[k];
    kir_cuda_buckets b = {n, bx, paths, &top.p, &full, ws, weights, kernels, note};
    pc_progress(o, "link", 0, 0);
    st = kir_cuda_dispatch(g, o, &b);
    char tail[128];
    snprintf(tail, sizeof tail, "workspace %.2f MB (the largest bucket's); a bucket uploads weights not shared with an "
             "earlier one on its first run", ws / 1e6);
    kir_bucket_report(ds, n, halved, (const char (*)[KIR_BUCKET_LINE])lines, "CUDA ", tail);
  }
  twin_free(&tw);
  pc_graph_free(top.g);
  for (int k = 0; objs && k < n && k < MAX_BUCKETS; k++)
    if (objs[k][0]) unlink(objs[k]);
  rmdir(dir);
  free(objs), free(paths), free(lines), free(dims);
  return st;
}
