/* codegen/cuda_dynamic.c: run-time dims for CUDA. As for the CPU (dynamic.c), no renderer reasons about symbols:
 * the program is built and rendered at the points dynamic.c plans, and the CUDA C texts are compared. Everything
 * but their integers (and the comments) must be the same; each integer that moves is fitted as a polynomial of the
 * symbols and written as that expression of the kernel's leading parameters pc_s0.. . The launches' grid factors
 * and the graph's input and output dims are fitted alike, for the host side to compute per run. */
#include "codegen/codegen.h"
#include "codegen/kir.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

void kir_poly_put(FILE *f, const kir_poly *q, int n_syms, const char *sym_fmt) {
  int any = 0;
  fputc('(', f);
  for (int t = 0; t < KIR_DYN_TERMS; t++) {
    if (!q->c[t]) continue;
    fprintf(f, "%s%lldLL", any ? " + " : "", (long long)q->c[t]);
    for (int s = 0, r = t; s < n_syms; s++, r /= 3)
      for (int e = 0; e < r % 3; e++) {
        fputs(" * ", f);
        fprintf(f, sym_fmt, s);
      }
    any = 1;
  }
  fprintf(f, "%s)", any ? "" : "0LL");
}

/* ---------------------------------------------------------------- the CUDA C as text and integers */

/* an integer literal of the text: [at, end) with its suffix, the kernel it lies in */
typedef struct lit {
  size_t at, end;
  int64_t v;
  int kernel;
} lit;

typedef struct text {
  char *src;
  size_t len;
  lit *lits;
  int n, cap;
} text;

static int ident_char(char c) { return isalnum((unsigned char)c) || c == '_' || c == '.'; }

/* The literals of t->src; 0 when out of memory. Comments are skipped (they name values and shapes); a kernel's
 * comment header "/" "* kN_" sets the kernel the literals after it lie in. Hexadecimal and floating literals are
 * left in the text, where they must match. */
static int scan(text *t) {
  const char *s = t->src;
  int kernel = -1;
  for (size_t i = 0; i < t->len;) {
    if (s[i] == '/' && s[i + 1] == '*') {
      if (s[i + 2] == ' ' && s[i + 3] == 'k' && isdigit((unsigned char)s[i + 4])) kernel = atoi(s + i + 4);
      const char *e = strstr(s + i + 2, "*/");
      i = e ? (size_t)(e - s) + 2 : t->len;
      continue;
    }
    if (!isdigit((unsigned char)s[i]) || (i > 0 && ident_char(s[i - 1]))) {
      i++;
      continue;
    }
    size_t j = i;
    while (j < t->len && isdigit((unsigned char)s[j])) j++;
    if (s[j] == 'x' || s[j] == 'X' || s[j] == '.' || s[j] == 'e' || s[j] == 'E') { /* hex or float: text */
      while (j < t->len && (ident_char(s[j]) || ((s[j] == '-' || s[j] == '+') && (s[j - 1] == 'e' || s[j - 1] == 'E'))))
        j++; /* 1e-05: the exponent is the float's */
      i = j;
      continue;
    }
    int64_t v = strtoll(s + i, NULL, 10);
    while (j < t->len && (s[j] == 'u' || s[j] == 'U' || s[j] == 'l' || s[j] == 'L')) j++;
    if (t->n == t->cap) {
      int cap = t->cap ? 2 * t->cap : 4096;
      lit *l = realloc(t->lits, sizeof *l * (size_t)cap);
      if (!l) return 0;
      t->lits = l, t->cap = cap;
    }
    t->lits[t->n++] = (lit){i, j, v, kernel};
    i = j;
  }
  return 1;
}

/* the text between literals (comments left out) equal in a and b; else the kernel where they first differ */
static int same_shape(const text *a, const text *b, int *kernel) {
  *kernel = -1;
  if (a->n != b->n) return 0;
  size_t pa = 0, pb = 0;
  for (int k = 0; k <= a->n; k++) {
    size_t ea = k < a->n ? a->lits[k].at : a->len, eb = k < b->n ? b->lits[k].at : b->len;
    const char *x = a->src + pa, *y = b->src + pb, *xe = a->src + ea, *ye = b->src + eb;
    while (x < xe || y < ye) { /* equal outside comments */
      if (x + 1 < xe && x[0] == '/' && x[1] == '*') {
        const char *e = strstr(x + 2, "*/");
        x = e ? e + 2 : xe;
        continue;
      }
      if (y + 1 < ye && y[0] == '/' && y[1] == '*') {
        const char *e = strstr(y + 2, "*/");
        y = e ? e + 2 : ye;
        continue;
      }
      if (x == xe || y == ye || *x != *y) return *kernel = k < a->n ? a->lits[k].kernel : -1, 0;
      x++, y++;
    }
    if (k < a->n) { /* the suffixes */
      size_t la = a->lits[k].end - a->lits[k].at, lb = b->lits[k].end - b->lits[k].at;
      const char *sa = a->src + a->lits[k].at, *sb = b->src + b->lits[k].at;
      while (la && isdigit((unsigned char)*sa)) sa++, la--;
      while (lb && isdigit((unsigned char)*sb)) sb++, lb--;
      if (la != lb || memcmp(sa, sb, la)) return *kernel = a->lits[k].kernel, 0;
      pa = a->lits[k].end, pb = b->lits[k].end;
    }
  }
  return 1;
}

/* ---------------------------------------------------------------- one point: build, render */

typedef struct build {
  pc_graph *g; /* owned for points other than the bounds, and freed once its values are kept */
  kir_program p;
  pc_cuda_launch *L;
  text t;
  int64_t *vals; /* its launches' grid factors, then its inputs' and outputs' dims (PC_MAX_RANK each) */
} build;

/* the values a fit reads besides the literals, kept so that the point's graph can go */
static int keep_values(build *b) {
  const pc_graph *g = b->g;
  int nk = b->p.n_kernels, n = nk * PC_CUDA_GRID_FACTORS + (g->n_inputs + g->n_outputs) * PC_MAX_RANK;
  if (!(b->vals = calloc((size_t)n + 1, sizeof *b->vals))) return 0;
  int64_t *v = b->vals;
  for (int k = 0; k < nk; k++, v += PC_CUDA_GRID_FACTORS)
    memcpy(v, b->L[k].work, sizeof b->L[k].work);
  for (int io = 0; io < 2; io++)
    for (int i = 0; i < (io ? g->n_outputs : g->n_inputs); i++, v += PC_MAX_RANK)
      memcpy(v, (io ? g->outputs[i] : g->inputs[i])->type.dims, sizeof(int64_t) * PC_MAX_RANK);
  return 1;
}

static pc_status render(const pc_codegen_opts *o, int n_syms, build *b) {
  pc_status s = kir_cuda_render(b->g, o->gpu_arch, n_syms, &b->p, &b->t.src, &b->t.len, &b->L);
  if (s == PC_OK && !scan(&b->t)) s = pc_fail(b->g, PC_ERR_NOMEM, "out of memory");
  return s;
}

static pc_status fail_at(const kir_program *p, int kernel, const char *sym, const char *why) {
  pc_graph *g = p->g;
  if (kernel >= 0 && kernel < p->n_kernels && p->kernels[kernel].n_nodes)
    return pc_node_fail(g, p->kernels[kernel].nodes[0], PC_ERR_UNSUPPORTED,
                        "dim %s: %s (CUDA kernel k%d); compile with a fixed --dim %s=VALUE, or " KIR_DYN_MULTIPLES_FMT,
                        sym, why, kernel, sym, sym);
  return pc_fail(g, PC_ERR_UNSUPPORTED, "dim %s: %s%s; compile with a fixed --dim %s=VALUE, or " KIR_DYN_MULTIPLES_FMT,
                 sym, why, kernel >= 0 ? " (a CUDA kernel)" : "", sym, sym);
}

/* what must be equal to the bounds' program besides the text: buffers (none larger), weights, launches, the
 * graph's inputs and outputs; the kernel where they differ, or -2 for the buffers and the graph */
static int same_program(const build *a, const build *b) {
  const kir_program *p = &a->p, *q = &b->p;
  const pc_graph *g = a->g, *h = b->g;
  if (p->n_kernels != q->n_kernels || p->n_bufs != q->n_bufs || p->weights_size != q->weights_size ||
      g->n_inputs != h->n_inputs || g->n_outputs != h->n_outputs)
    return -2;
  for (int i = 0; i < p->n_bufs; i++)
    if (p->bufs[i].place != q->bufs[i].place || p->bufs[i].index != q->bufs[i].index ||
        p->bufs[i].dtype != q->bufs[i].dtype || q->bufs[i].nbytes > p->bufs[i].nbytes)
      return -2;
  for (int k = 0; k < 2; k++)
    for (int i = 0; i < (k ? g->n_outputs : g->n_inputs); i++) {
      const pc_type *x = &(k ? g->outputs[i] : g->inputs[i])->type, *y = &(k ? h->outputs[i] : h->inputs[i])->type;
      if (x->dtype != y->dtype || x->rank != y->rank) return -2;
    }
  for (int k = 0; k < p->n_kernels; k++) {
    const pc_cuda_launch *x = &a->L[k], *y = &b->L[k];
    if (!x->grid != !y->grid || x->block != y->block || x->n_args != y->n_args || x->n_work != y->n_work ||
        (x->n_args && memcmp(x->args, y->args, sizeof *x->args * (size_t)x->n_args)) || memcmp(x->per, y->per, sizeof x->per))
      return k;
  }
  return -1;
}


/* ---------------------------------------------------------------- fitting */

typedef struct fitter {
  const pc_dyn_spec *ds;
  const kir_dyn_pts *P;
  build *b;
  unsigned char have[KIR_DYN_MAX_POINTS];
  uint64_t h0; /* the hash of the bounds' weights, made once for the comparisons */
  int have_h0;
} fitter;

/* the weights b's kernels read are the bounds' (a constant that follows a dim would differ); ones no kernel reads
 * (a mean's 1/N, inlined in its kernel's text) may differ */
static int weights_equal(fitter *F, const build *b) {
  uint64_t h;
  if (!F->have_h0 && !(F->have_h0 = kir_dyn_weights_hash(&F->b[0].p, &F->h0))) return 0;
  return kir_dyn_weights_hash(&b->p, &h) && h == F->h0;
}

/* the value get(point build, i) at every point as a polynomial; a failure named at kernel */
static pc_status fit_value(fitter *F, int64_t (*get)(const fitter *, int, int), int i, int kernel, const char *what,
                           kir_poly *q, int *moves) {
  int64_t y[KIR_DYN_MAX_POINTS];
  for (int k = 0; k < F->P->n; k++) y[k] = F->have[k] ? get(F, k, i) : 0;
  int bad = 0, r = kir_dyn_fit_series(F->P, y, F->have, q, &bad);
  *moves = r != KIR_FIT_SAME;
  if (r == KIR_FIT_SAME) {
    memset(q, 0, sizeof *q);
    q->c[0] = y[0];
  }
  if (r == KIR_FIT_NONE || r == KIR_FIT_CHECK) {
    char why[360];
    snprintf(why, sizeof why, "%s follows it in no polynomial way%s", what, r == KIR_FIT_NONE ? KIR_DYN_NONE_HINT : " (a check failed)");
    return fail_at(&F->b[0].p, kernel, F->ds->name[r == KIR_FIT_CHECK ? kir_dyn_moved(F->ds, F->P, bad) : 0], why);
  }
  return PC_OK;
}

/* fit_value's getters: value i of a point (its literals; in vals, its grid factors, input dims, output dims) */
static int64_t get_lit(const fitter *F, int k, int i) { return F->b[k].t.lits[i].v; }
static int64_t get_val(const fitter *F, int k, int i) { return F->b[k].vals[i]; }

/* a literal inside an array's size or a template's argument cannot become an expression of the parameters */
static int fixed_place(const text *t, int i) {
  const char *s = t->src, *at = s + t->lits[i].at, *line = at;
  while (line > s && line[-1] != '\n') line--;
  while (*line == ' ') line++;
  int template_arg = at - s >= 2 && at[-1] == '<' && ident_char(at[-2]); /* pc_cp_wait<2>, not "i < 2" */
  return !strncmp(line, "__shared__", 10) || !strncmp(line, "__device__", 10) || template_arg;
}

/* the bounds' text with each literal that moves replaced by its polynomial */
static char *rewrite(const text *t, const kir_poly *polys, const unsigned char *moves, int n_syms) {
  char *out = NULL;
  size_t len = 0, at = 0;
  FILE *f = open_memstream(&out, &len);
  if (!f) return NULL;
  for (int i = 0; i < t->n; i++) {
    if (!moves[i]) continue;
    const lit *l = &t->lits[i];
    fwrite(t->src + at, 1, l->at - at, f);
    int uns = memchr(t->src + l->at, 'u', l->end - l->at) || memchr(t->src + l->at, 'U', l->end - l->at);
    fprintf(f, "((%s)", uns ? "unsigned long long" : "long long");
    kir_poly_put(f, &polys[i], n_syms, "pc_s%d");
    fputc(')', f);
    at = l->end;
  }
  fwrite(t->src + at, 1, t->len - at, f);
  if (fclose(f) != 0) return free(out), NULL;
  return out;
}

static pc_status fit_all(fitter *F, kir_cuda_dyn *d, char **src) {
  build *b0 = &F->b[0];
  pc_graph *g = b0->g;
  const kir_program *p = &b0->p;
  int n = b0->t.n, moves = 0;
  kir_poly *polys = calloc((size_t)n + 1, sizeof *polys);
  unsigned char *mv = calloc((size_t)n + 1, 1);
  pc_status s = polys && mv ? PC_OK : pc_fail(g, PC_ERR_NOMEM, "out of memory");
  for (int i = 0; s == PC_OK && i < n; i++) {
    s = fit_value(F, get_lit, i, b0->t.lits[i].kernel, "an integer of the CUDA C", &polys[i], &moves);
    mv[i] = (unsigned char)moves;
    d->n_sizes += moves;
    if (s == PC_OK && moves && fixed_place(&b0->t, i))
      s = fail_at(p, b0->t.lits[i].kernel, F->ds->name[0], "an array size or template argument of the CUDA C follows it");
  }
  int nk = p->n_kernels;
  for (int i = 0; s == PC_OK && i < nk * PC_CUDA_GRID_FACTORS; i++)
    if (i % PC_CUDA_GRID_FACTORS < b0->L[i / PC_CUDA_GRID_FACTORS].n_work)
      s = fit_value(F, get_val, i, i / PC_CUDA_GRID_FACTORS, "a launch's grid", &d->work[i], &moves);
  int at_in = nk * PC_CUDA_GRID_FACTORS, at_out = at_in + g->n_inputs * PC_MAX_RANK;
  for (int i = 0; s == PC_OK && i < g->n_inputs * PC_MAX_RANK; i++) {
    d->in_sym[i] = -1;
    if (i % PC_MAX_RANK >= g->inputs[i / PC_MAX_RANK]->type.rank) continue;
    kir_poly q;
    s = fit_value(F, get_val, at_in + i, -1, "an input dim", &q, &moves);
    if (s != PC_OK || !moves) continue;
    if ((d->in_sym[i] = kir_poly_sym(&q, d->n_syms, d->mult)) < 0)
      s = pc_fail(g, PC_ERR_UNSUPPORTED, "input \"%s\" dim %d follows the dims given by --dim but is none of them",
                  g->inputs[i / PC_MAX_RANK]->name ? g->inputs[i / PC_MAX_RANK]->name : "?", i % PC_MAX_RANK);
  }
  for (int i = 0; s == PC_OK && i < g->n_outputs * PC_MAX_RANK; i++)
    if (i % PC_MAX_RANK < g->outputs[i / PC_MAX_RANK]->type.rank)
      s = fit_value(F, get_val, at_out + i, -1, "an output dim", &d->out_dim[i], &moves);
  if (s == PC_OK && !(*src = rewrite(&b0->t, polys, mv, d->n_syms))) s = pc_fail(g, PC_ERR_NOMEM, "out of memory");
  free(polys);
  free(mv);
  return s;
}

/* ---------------------------------------------------------------- the builds */

static void build_free(build *b, int own_graph) {
  free(b->vals);
  free(b->t.src);
  free(b->t.lits);
  if (own_graph) pc_graph_free(b->g);
  memset(b, 0, sizeof *b);
}

/* point k built and rendered, compared with the bounds' (b[0]); a soft point that builds otherwise is skipped */
static pc_status probe(const pc_codegen_opts *o, fitter *F, int k) {
  pc_dyn_spec *ds = o->dyn;
  const kir_dyn_pts *P = F->P;
  build *b = &F->b[k], *b0 = &F->b[0];
  pc_graph *g = b0->g;
  int y = kir_dyn_moved(ds, P, k);
  b->g = ds->build(ds->ctx, P->v[k]);
  if (!b->g) return pc_fail(g, PC_ERR_NOMEM, "out of memory");
  ds->n_builds++;
  pc_status s = b->g->status ? b->g->status : render(o, ds->n_syms, b);
  if (s != PC_OK) {
    if (P->soft[k]) return PC_OK;
    return pc_fail(g, PC_ERR_UNSUPPORTED, "dim %s: the model does not build for CUDA at %s=%lld: %.400s", ds->name[y],
                   ds->name[y], (long long)P->v[k][y], pc_error(b->g));
  }
  int kernel = same_program(b0, b), shape = kernel == -1 ? same_shape(&b0->t, &b->t, &kernel) : 0;
  if (kernel == -1 && shape && !weights_equal(F, b)) kernel = -3;
  if (kernel == -1 && shape) {
    if (!keep_values(b)) return pc_fail(g, PC_ERR_NOMEM, "out of memory");
    free(b->t.src), b->t.src = NULL; /* the literals' values are all the fit needs of its text */
    pc_graph_free(b->g), b->g = NULL;
    return F->have[k] = 1, PC_OK;
  }
  if (P->soft[k]) return PC_OK;
  ds->fit_sym = y;
  char why[240];
  snprintf(why, sizeof why, "the CUDA program at %s=%lld differs from the one at the bound, not only in its sizes (%s)",
           ds->name[y], (long long)P->v[k][y],
           kernel == -3 ? "its weights: a constant that follows it" : kernel == -2 ? "its buffers, inputs or outputs"
                                                                         : "another kernel, row or launch; a float that follows it");
  return fail_at(&b0->p, kernel < -1 ? -1 : kernel, ds->name[y], why);
}

pc_status kir_cuda_dynamic(pc_graph *g, const pc_codegen_opts *o, kir_program *p, char **src,
                           pc_cuda_launch **launches, kir_cuda_dyn **dyn) {
  pc_dyn_spec *ds = o->dyn;
  *src = NULL;
  if (ds->n_syms < 1 || ds->n_syms > KIR_DYN_MAX_SYMS)
    return pc_fail(g, PC_ERR_UNSUPPORTED, "%d dims given as ranges: one binary follows at most %d", ds->n_syms,
                   KIR_DYN_MAX_SYMS);
  for (int s = 0; s < ds->n_syms; s++)
    if (ds->bucket_step[s])
      return pc_fail(g, PC_ERR_UNSUPPORTED, "dim %s in buckets (--dim %s=LO..HI:STEP): each bucket is a CUDA module of "
                     "its own, which --target cuda packages; --emit cuda writes the CUDA C of one program (give the "
                     "range alone)", ds->name[s], ds->name[s]);
  kir_dyn_pts P;
  kir_dyn_points(ds, &P);
  build *b = calloc((size_t)P.n, sizeof *b);
  kir_cuda_dyn *d = pc_alloc(g, sizeof *d);
  if (!b || !d) return free(b), pc_fail(g, PC_ERR_NOMEM, "out of memory"); /* pc_alloc zeroes d */
  fitter F = {ds, &P, b, {0}, 0, 0};
  b[0].g = g;
  ds->n_builds = 1;
  pc_status s = render(o, ds->n_syms, &b[0]);
  int rendered = s == PC_OK;
  F.have[0] = 1;
  int nz = s == PC_OK ? kir_dyn_nonzero_kernel(&b[0].p) : -1;
  if (nz >= 0) s = fail_at(&b[0].p, nz, ds->name[0], KIR_DYN_NONZERO_WHY);
  for (int k = 1; s == PC_OK && k < P.n; k++) {
    pc_progress(o, "run-time dims (CUDA)", k, P.n);
    s = probe(o, &F, k);
    if (b[k].g) pc_graph_free(b[k].g), b[k].g = NULL; /* a soft point skipped, or a failure */
  }
  if (s == PC_OK) kir_dyn_note_unchecked(ds, &P, F.have);
  if (s == PC_OK && !keep_values(&b[0])) s = pc_fail(g, PC_ERR_NOMEM, "out of memory");
  d->n_syms = ds->n_syms;
  for (int y = 0; y < ds->n_syms; y++)
    d->name[y] = ds->name[y], d->lo[y] = ds->lo[y], d->hi[y] = ds->hi[y], d->mult[y] = P.mult[y];
  int nk = b[0].p.n_kernels;
  d->work = pc_alloc(g, sizeof *d->work * (size_t)(nk * PC_CUDA_GRID_FACTORS + 1));
  d->in_sym = pc_alloc(g, sizeof *d->in_sym * (size_t)(g->n_inputs * PC_MAX_RANK + 1));
  d->out_dim = pc_alloc(g, sizeof *d->out_dim * (size_t)(g->n_outputs * PC_MAX_RANK + 1));
  if (s == PC_OK && (!d->work || !d->in_sym || !d->out_dim)) s = pc_fail(g, PC_ERR_NOMEM, "out of memory");
  if (s == PC_OK) s = fit_all(&F, d, src);
  ds->fit_failed = rendered && s != PC_OK; /* built at the bounds, then could not follow */
  ds->n_sizes = d->n_sizes;
  *p = b[0].p;
  *launches = b[0].L;
  *dyn = s == PC_OK ? d : NULL;
  build_free(&b[0], 0);
  for (int k = 1; k < P.n; k++) build_free(&b[k], 1);
  free(b);
  return s;
}
