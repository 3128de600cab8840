/* codegen/dynamic.c: run-time dims. The program built at the symbols' bounds is the one that runs. It is
 * built again with each symbol at other values, and every size in it (loop extents, index maps, runtime
 * call params, integer constants, the graph's input and output dims) is fitted as a polynomial of the
 * symbols, of degree at most 2 in each, then checked at values the fit did not use. f32 and f64 constants that
 * are whole numbers or their reciprocals (a mean's N or 1/N) are fitted through that number; the program computes
 * them from the symbols as the build did (kir_dyn_float_int). The builds must agree
 * on everything else (kernels, buffers, rows chosen, weights); where they do not, one binary cannot follow
 * the symbol and the compile fails naming it and the kernel. No frontend or pass needs to reason about
 * symbols: shape arithmetic (Shape, Gather, Concat, Reshape with 0 and -1, Range ...) runs on numbers in
 * every build, and sizes that are no polynomial (a tile count rounded up) show up as failed checks. */
#include "codegen/codegen.h"
#include "codegen/kir_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- a program as structure and sizes */

/* sig: what must be equal in every build (with the kernel each entry belongs to, for messages); val: the
 * sizes, at[] their addresses in the program walked (the one that runs, for the first walk) */
typedef struct walk {
  int64_t *sig;
  int *sig_kernel;
  int n_sig, cap_sig;
  int64_t *val;
  const int64_t **at;
  int *val_kernel;
  int n_val, cap_val;
  int kernel;
  int oom;
} walk;

static void sig(walk *w, int64_t v) {
  if (w->n_sig == w->cap_sig) {
    int cap = w->cap_sig ? 2 * w->cap_sig : 1024;
    int64_t *s = realloc(w->sig, sizeof *s * (size_t)cap);
    int *k = s ? realloc(w->sig_kernel, sizeof *k * (size_t)cap) : NULL;
    if (s) w->sig = s;
    if (k) w->sig_kernel = k;
    if (!s || !k) return (void)(w->oom = 1);
    w->cap_sig = cap;
  }
  w->sig_kernel[w->n_sig] = w->kernel;
  w->sig[w->n_sig++] = v;
}

static void val(walk *w, const int64_t *v) {
  if (w->n_val == w->cap_val) {
    int cap = w->cap_val ? 2 * w->cap_val : 1024;
    int64_t *s = realloc(w->val, sizeof *s * (size_t)cap);
    const int64_t **a = s ? realloc((void *)w->at, sizeof *a * (size_t)cap) : NULL;
    int *k = a ? realloc(w->val_kernel, sizeof *k * (size_t)cap) : NULL;
    if (s) w->val = s;
    if (a) w->at = a;
    if (k) w->val_kernel = k;
    if (!s || !a || !k) return (void)(w->oom = 1);
    w->cap_val = cap;
  }
  w->val_kernel[w->n_val] = w->kernel;
  w->at[w->n_val] = v;
  w->val[w->n_val++] = *v;
}

static void walk_free(walk *w) {
  free(w->sig);
  free(w->sig_kernel);
  free(w->val);
  free((void *)w->at);
  free(w->val_kernel);
  memset(w, 0, sizeof *w);
}

static void walk_map(walk *w, const kir_map *m, int n_loops) {
  val(w, &m->offset);
  for (int l = 0; l < n_loops; l++) val(w, &m->stride[l]);
}

int kir_dyn_float_int(pc_dtype dt, double c, int64_t *n) {
  if ((dt != PC_f32 && dt != PC_f64) || !(c == c) || c == 0 || fabs(c) >= 0x1p31 || fabs(c) < 0x1p-31) return 0;
  double r = nearbyint(c), q = nearbyint(1.0 / c);
  if (r == c) return *n = (int64_t)r, KIR_FLOAT_WHOLE;
  if (q == 0 || (dt == PC_f32 ? (float)(1.0 / q) != (float)c : 1.0 / q != c)) return 0;
  return *n = (int64_t)q, KIR_FLOAT_RECIP;
}

static void walk_expr(walk *w, kir_expr *e, int n_loops) {
  sig(w, e->kind), sig(w, e->dtype), sig(w, e->op), sig(w, e->n_args);
  if (e->kind == KE_LOAD) sig(w, e->buf);
  if (e->kind == KE_LOAD || e->kind == KE_INDEX) walk_map(w, &e->map, n_loops);
  if (e->kind == KE_CONST && pc_dtype_is_float(e->dtype)) {
    int64_t bits, n;
    int kind = kir_dyn_float_int(e->dtype, e->c, &n);
    sig(w, kind);
    if (kind) { /* its number in ci (unused by float constants), a size like the others */
      e->ci = n;
      val(w, &e->ci);
    } else { /* any other float that follows a symbol is refused */
      memcpy(&bits, &e->c, sizeof bits);
      sig(w, bits);
    }
  }
  if (e->kind == KE_CONST && !pc_dtype_is_float(e->dtype)) val(w, &e->ci);
  for (int i = 0; i < e->n_args; i++) walk_expr(w, e->args[i], n_loops);
}

static uint64_t hash_bytes(uint64_t h, const void *data, size_t n) {
  const unsigned char *b = data;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
  return h;
}

int kir_dyn_weights_hash(const kir_program *p, uint64_t *hash) {
  char *read = calloc((size_t)p->n_bufs + 1, 1);
  if (!read) return 0;
  for (int i = 0; i < p->n_kernels; i++) kir_mark_kernel_bufs(&p->kernels[i], read);
  uint64_t h = 0xcbf29ce484222325ull;
  for (int i = 0; i < p->n_consts; i++) {
    const pc_value *v = p->consts[i];
    int b = p->buf_of_value[v->id];
    if (b < 0 || !read[b]) continue; /* kept for no kernel (a shape's scalar the import read, a mean's inlined 1/N) */
    int64_t n = pc_type_numel(&v->type);
    const void *data = pc_const_data(v);
    if (data && n > 0) h = hash_bytes(h, data, (size_t)n * pc_dtype_size(v->type.dtype));
  }
  free(read);
  return *hash = h, 1;
}

static void walk_program(walk *w, const kir_program *p) {
  const pc_graph *g = p->g;
  w->kernel = -1;
  sig(w, p->n_bufs);
  for (int i = 0; i < p->n_bufs; i++) sig(w, p->bufs[i].place), sig(w, p->bufs[i].index), sig(w, p->bufs[i].dtype);
  sig(w, g->n_inputs), sig(w, g->n_outputs);
  for (int k = 0; k < 2; k++)
    for (int i = 0; i < (k ? g->n_outputs : g->n_inputs); i++) {
      const pc_type *t = &(k ? g->outputs[i] : g->inputs[i])->type;
      sig(w, t->dtype), sig(w, t->rank);
      for (int d = 0; d < t->rank; d++) val(w, &t->dims[d]);
    }
  uint64_t h;
  if (!kir_dyn_weights_hash(p, &h)) return (void)(w->oom = 1);
  sig(w, (int64_t)h), sig(w, p->weights_size), sig(w, p->n_consts), sig(w, p->n_packed);
  for (int i = 0; i < p->n_packed; i++) {
    const kir_packed *k = &p->packed[i];
    int64_t f[] = {k->buf, k->trans, k->n, k->k, k->a_mr, k->groups, k->xform, k->bf16_split, k->int_chunks, k->i8};
    for (size_t j = 0; j < sizeof f / sizeof *f; j++) sig(w, f[j]);
  }
  sig(w, p->n_kernels);
  for (int i = 0; i < p->n_kernels; i++) {
    const kir_kernel *k = &p->kernels[i];
    w->kernel = i;
    int64_t f[] = {k->kind, k->has_epilogue, k->epilogue, k->absorbed, k->epi_in_call, k->pair};
    for (size_t j = 0; j < sizeof f / sizeof *f; j++) sig(w, f[j]);
    if (k->kind == KK_CALL) {
      sig(w, k->call), sig(w, k->n_args), sig(w, k->n_params);
      for (int a = 0; a < k->n_args; a++) sig(w, k->args[a]);
      for (int a = 0; a < k->n_params; a++) val(w, &k->params[a]);
      continue;
    }
    sig(w, k->n_loops), sig(w, k->n_par), sig(w, k->n_stores);
    for (int l = 0; l < k->n_loops; l++) val(w, &k->extent[l]);
    for (int s = 0; s < k->n_stores; s++) {
      const kir_store *st = &k->stores[s];
      sig(w, st->buf), sig(w, st->red), sig(w, st->arg_loop), sig(w, st->arg_last);
      walk_map(w, &st->map, k->n_loops);
      walk_expr(w, st->value, k->n_loops);
    }
  }
}

/* ---------------------------------------------------------------- where to probe */

int64_t kir_dyn_mult(const pc_dyn_spec *ds, int s) { return ds->mult[s] > 1 ? ds->mult[s] : 1; }

/* one symbol's fit points (x[0] = hi) and checks (the others at hi; soft ones may build differently) */
typedef struct sym_plan {
  int64_t x[3], check[3];
  int npts, n_check, soft[3];
} sym_plan;

static int used(const int64_t *v, int n, int64_t x) {
  for (int i = 0; i < n; i++)
    if (v[i] == x) return 1;
  return 0;
}

/* Values at least 2 (a dim of 1 can change the build: loops of one iteration are dropped) spread over the
 * range, so that sizes rounded to a tile do not look polynomial; lo itself is checked when it is below. */
static void plan_sym(sym_plan *P, int64_t lo, int64_t hi) {
  if (lo == hi) { /* one value (a bucket of one, codegen/buckets.c): nothing follows it */
    P->x[0] = hi, P->npts = 1, P->n_check = 0;
    return;
  }
  int64_t a = lo > 2 ? lo : 2, span = hi - a;
  int64_t *x = P->x, *c = P->check;
  int n = 0, nc = 0;
  x[n++] = hi;
  if (span >= 4) {
    int64_t cand[] = {a + span * 5 / 8, a + span / 4, a + span * 3 / 8, a + span * 7 / 8, a, hi - 1};
    for (size_t i = 0; i < sizeof cand / sizeof *cand && n < 3; i++)
      if (!used(x, n, cand[i])) x[n++] = cand[i];
    for (size_t i = 0; i < sizeof cand / sizeof *cand && nc < 2; i++)
      if (!used(x, n, cand[i]) && !used(c, nc, cand[i])) P->soft[nc] = 0, c[nc++] = cand[i];
  } else {
    for (int64_t v = hi - 1; v >= a && n < 3; v--) x[n++] = v;
    if (n < 3 && lo < a) x[n++] = lo; /* too few values of 2 or more: 1 (or 0) must fit too */
  }
  if (lo < a && !used(x, n, lo)) P->soft[nc] = 1, c[nc++] = lo;
  P->npts = n;
  P->n_check = nc;
}

/* ---------------------------------------------------------------- fitting */

typedef __int128 i128;

/* values y at the points x (n of them, 1..3) as coefficients c[0..n) of 1, x, x^2; 0 when no polynomial with
 * integer coefficients goes through them. For one, x - x' divides p(x) - p(x'), so every divided difference
 * of Newton's form is an integer too and each division must be exact. */
static int fit1(const int64_t *x, int n, const i128 *y, i128 *c) {
  if (n == 1) return c[0] = y[0], 1;
  i128 d01 = (i128)x[1] - x[0], f01 = y[1] - y[0];
  if (f01 % d01) return 0;
  i128 b = f01 / d01; /* y = y0 + b (x - x0) [+ a2 (x - x0)(x - x1)] */
  i128 a2 = 0;
  if (n == 3) {
    i128 d12 = (i128)x[2] - x[1], f12 = y[2] - y[1], d02 = (i128)x[2] - x[0];
    if (f12 % d12 || (f12 / d12 - b) % d02) return 0;
    a2 = (f12 / d12 - b) / d02;
    c[2] = a2;
  }
  c[1] = b - a2 * ((i128)x[0] + x[1]);
  c[0] = y[0] - b * x[0] + a2 * x[0] * x[1];
  return 1;
}

static i128 ipow(i128 b, int e) { return e == 0 ? 1 : e == 1 ? b : b * b; }

static i128 poly_eval(const kir_poly *q, int n_syms, const int64_t *v) {
  i128 sum = 0;
  for (int t = 0; t < KIR_DYN_TERMS; t++) {
    if (!q->c[t]) continue;
    i128 term = q->c[t];
    for (int s = 0, r = t; s < KIR_DYN_MAX_SYMS; s++, r /= 3) term *= s < n_syms ? ipow(v[s], r % 3) : (r % 3 ? 0 : 1);
    sum += term;
  }
  return sum;
}

int64_t kir_poly_eval(const kir_poly *q, int n_syms, const int64_t *sym) { return (int64_t)poly_eval(q, n_syms, sym); }

int kir_poly_sym(const kir_poly *q, int n_syms, const int64_t *mult) {
  for (int s = 0, t = 1; s < n_syms; s++, t *= 3) {
    kir_poly just = {{0}};
    just.c[t] = mult[s];
    if (!memcmp(q, &just, sizeof just)) return s;
  }
  return -1;
}

/* y over the grid (index sum_s i_s * stride_s, i_s < npts[s]) as a polynomial: one 1-D fit per symbol in turn */
static int fit(const kir_dyn_pts *P, const i128 *grid, int n_grid, kir_poly *q) {
  i128 a[243], line[3], c[3];
  int64_t x[3];
  memcpy(a, grid, sizeof *a * (size_t)n_grid);
  int stride = 1;
  for (int s = 0; s < P->n_syms; s++) {
    int n = P->npts[s];
    for (int base = 0; base < n_grid; base++) {
      if ((base / stride) % n) continue; /* the first point of each line along s */
      for (int j = 0; j < n; j++) line[j] = a[base + j * stride], x[j] = P->x[s][j] / P->mult[s];
      if (!fit1(x, n, line, c)) return 0;
      for (int j = 0; j < n; j++) a[base + j * stride] = c[j];
    }
    stride *= n;
  }
  memset(q, 0, sizeof *q);
  for (int i = 0; i < n_grid; i++) {
    int t = 0, r = i, p3 = 1;
    for (int s = 0; s < P->n_syms; s++, p3 *= 3) t += (r % P->npts[s]) * p3, r /= P->npts[s];
    if (a[i] > INT64_MAX || a[i] < INT64_MIN) return 0;
    q->c[t] = (int64_t)a[i];
  }
  return 1;
}

void kir_dyn_points(pc_dyn_spec *ds, kir_dyn_pts *P) {
  sym_plan sp[KIR_DYN_MAX_SYMS];
  memset(P, 0, sizeof *P);
  P->n_syms = ds->n_syms;
  P->n_grid = 1;
  for (int s = 0; s < ds->n_syms; s++) {
    int64_t m = P->mult[s] = kir_dyn_mult(ds, s);
    plan_sym(&sp[s], ds->lo[s] / m, ds->hi[s] / m); /* in multiples of m */
    for (int j = 0; j < sp[s].npts; j++) sp[s].x[j] *= m;
    for (int j = 0; j < sp[s].n_check; j++) sp[s].check[j] *= m;
    P->npts[s] = sp[s].npts;
    memcpy(P->x[s], sp[s].x, sizeof sp[s].x);
    P->n_grid *= sp[s].npts;
  }
  int n = 0;
  for (; n < P->n_grid; n++) /* point 0: every symbol at its bound */
    for (int k = 0, r = n; k < ds->n_syms; k++) P->v[n][k] = P->x[k][r % P->npts[k]], r /= P->npts[k];
  for (int k = 0; k < ds->n_syms; k++)
    for (int j = 0; j < sp[k].n_check; j++, n++) {
      for (int q = 0; q < ds->n_syms; q++) P->v[n][q] = ds->hi[q];
      P->v[n][k] = sp[k].check[j];
      P->soft[n] = (unsigned char)sp[k].soft[j];
    }
  if (ds->n_syms > 1) { /* every symbol moved at once: catches products the grid alone would miss */
    for (int q = 0; q < ds->n_syms; q++) P->v[n][q] = P->x[q][P->npts[q] > 1 ? 1 : 0];
    for (int q = 0; q < ds->n_syms; q++)
      if (sp[q].n_check && !sp[q].soft[0]) P->v[n][q] = sp[q].check[0];
    n++;
  }
  P->n = n;
  size_t k = 0, len = sizeof ds->probes;
  char *buf = ds->probes;
  buf[0] = 0;
  for (int s = 0; s < P->n_syms && k < len; s++) {
    k += (size_t)snprintf(buf + k, len - k, "%s%s at", s ? "; " : "", ds->name[s]);
    for (int j = 0; j < P->npts[s] && k < len; j++) k += (size_t)snprintf(buf + k, len - k, "%s %lld", j ? "," : "", (long long)P->x[s][j]);
    for (int j = 0; j < sp[s].n_check && k < len; j++)
      k += (size_t)snprintf(buf + k, len - k, "%s %lld", j ? "," : ", checked at", (long long)sp[s].check[j]);
  }
}

int kir_dyn_fit_series(const kir_dyn_pts *P, const int64_t *y, const unsigned char *have, kir_poly *q, int *bad) {
  int same = 1;
  i128 grid[243];
  for (int i = 0; i < P->n; i++) same &= !have[i] || y[i] == y[0];
  if (same) return KIR_FIT_SAME;
  for (int i = 0; i < P->n_grid; i++) grid[i] = y[i];
  if (!fit(P, grid, P->n_grid, q)) return KIR_FIT_NONE;
  for (int i = P->n_grid; i < P->n; i++) {
    int64_t u[KIR_DYN_MAX_SYMS];
    for (int s = 0; s < P->n_syms; s++) u[s] = P->v[i][s] / P->mult[s];
    if (have[i] && poly_eval(q, P->n_syms, u) != y[i]) return *bad = i, KIR_FIT_CHECK;
  }
  return KIR_FIT_POLY;
}

int kir_dyn_moved(const pc_dyn_spec *ds, const kir_dyn_pts *P, int i) {
  for (int s = 0; s < ds->n_syms; s++)
    if (P->v[i][s] != ds->hi[s]) return s;
  return 0;
}

int kir_dyn_nonzero_kernel(const kir_program *p) {
  for (int i = 0; i < p->n_kernels; i++)
    if (p->kernels[i].kind == KK_CALL && p->kernels[i].call == KC_nonzero) return i;
  return -1;
}

void kir_dyn_note_unchecked(pc_dyn_spec *ds, const kir_dyn_pts *P, const unsigned char *have) {
  for (int i = P->n_grid; i < P->n; i++)
    if (P->soft[i] && !have[i]) { /* said in --report: that value runs code fitted at the others */
      size_t k = strlen(ds->probes);
      int y = kir_dyn_moved(ds, P, i);
      snprintf(ds->probes + k, sizeof ds->probes - k, " (%s=%lld builds another program: not checked)", ds->name[y],
               (long long)P->v[i][y]);
    }
}

/* ---------------------------------------------------------------- the builds */

static pc_status kernel_fail(kir_program *p, int kernel, const char *sym, const char *why) {
  pc_graph *g = p->g;
  if (kernel >= 0 && kernel < p->n_kernels && p->kernels[kernel].n_nodes)
    return pc_node_fail(g, p->kernels[kernel].nodes[0], PC_ERR_UNSUPPORTED,
                        "dim %s: %s (kernel %d); compile with a fixed --dim %s=VALUE, in buckets (--dim "
                        "%s=LO..HI:STEP), or " KIR_DYN_MULTIPLES_FMT, sym, why, kernel, sym, sym, sym);
  return pc_fail(g, PC_ERR_UNSUPPORTED, "dim %s: %s%s; compile with a fixed --dim %s=VALUE, in buckets (--dim "
                 "%s=LO..HI:STEP), or " KIR_DYN_MULTIPLES_FMT, sym, why,
                 kernel == -1 ? " (in the buffers, weights or graph inputs and outputs)" : "", sym, sym, sym);
}

/* builds the program at point i of P and keeps its sizes in *vals (NULL when a soft point builds another program);
 * a structure unlike base's fails */
static pc_status probe(kir_program *p, const pc_codegen_opts *o, const walk *base, const kir_dyn_pts *P, int i,
                       int64_t **vals) {
  pc_dyn_spec *d = o->dyn;
  const int64_t *v = P->v[i];
  pc_graph *g2 = d->build(d->ctx, v);
  if (!g2) return pc_fail(p->g, PC_ERR_NOMEM, "out of memory");
  d->n_builds++;
  pc_status s = g2->status;
  kir_program p2;
  if (s == PC_OK) s = kir_build_cpu(g2, o, &p2);
  if (s != PC_OK) {
    if (P->soft[i]) return pc_graph_free(g2), PC_OK;
    char why[600] = "";
    for (int k = 0; k < d->n_syms; k++)
      if (v[k] != d->hi[k])
        snprintf(why, sizeof why, "the model does not build at %s=%lld: %.480s", d->name[k], (long long)v[k],
                 pc_error(g2));
    pc_graph_free(g2);
    return pc_fail(p->g, PC_ERR_UNSUPPORTED, "%s", why);
  }
  walk w = {0};
  walk_program(&w, &p2);
  s = w.oom ? pc_fail(p->g, PC_ERR_NOMEM, "out of memory") : PC_OK;
  int differ = s == PC_OK && (w.n_sig != base->n_sig || w.n_val != base->n_val);
  int at = -1, n = w.n_sig < base->n_sig ? w.n_sig : base->n_sig;
  for (int i = 0; s == PC_OK && at < 0 && i < n; i++)
    if (w.sig[i] != base->sig[i]) differ = 1, at = i;
  for (int i = 0; s == PC_OK && !differ && i < p->n_bufs; i++)
    if (p2.bufs[i].nbytes > p->bufs[i].nbytes) differ = 1; /* the plan at the bounds must hold every size */
  if (s == PC_OK && differ && !P->soft[i]) {
    int kernel = at >= 0 ? base->sig_kernel[at] : -1;
    char why[200];
    int k = kir_dyn_moved(d, P, i);
    const char *sym = d->name[k];
    d->fit_sym = k;
    long long at_k = (long long)v[k];
    if (p2.n_kernels != p->n_kernels) /* a loop unrolled over the dim (an RNN over its sequence) */
      snprintf(why, sizeof why, "the number of kernels follows it (%d at %s=%lld, %d at %lld)", p->n_kernels, sym,
               (long long)d->hi[k], p2.n_kernels, at_k);
    else
      snprintf(why, sizeof why, "the program compiled at %s=%lld differs from the one at the bound, not only in its "
               "sizes (another kernel or row, a constant that follows it)", sym, at_k);
    s = kernel_fail(p, p2.n_kernels != p->n_kernels ? -2 : kernel, sym, why);
  }
  if (s == PC_OK && !differ) {
    *vals = w.val;
    w.val = NULL;
  }
  walk_free(&w);
  pc_graph_free(g2);
  return s;
}

static int cmp_field(const void *a, const void *b) {
  const int64_t *x = *(const int64_t *const *)a, *y = *(const int64_t *const *)b;
  return x < y ? -1 : x > y;
}

const kir_poly *kir_dyn_poly(const kir_program *p, const int64_t *field) {
  const kir_dyn *d = p->dyn;
  if (!d || !d->n_fields) return NULL;
  int lo = 0, hi = d->n_fields - 1;
  while (lo <= hi) {
    int mid = (lo + hi) / 2;
    if (d->field[mid] == field) return &d->poly[mid];
    if (d->field[mid] < field) lo = mid + 1;
    else hi = mid - 1;
  }
  return NULL;
}

/* the fitted sizes into p->dyn, sorted by address; the symbols of the input dims; the workspace area */
static pc_status install(kir_program *p, const pc_dyn_spec *ds, const walk *base, kir_poly *polys, const char *moves) {
  pc_graph *g = p->g;
  kir_dyn *d = pc_alloc(g, sizeof *d);
  int n = 0;
  for (int f = 0; f < base->n_val; f++) n += moves[f];
  int n_io = (g->n_inputs + g->n_outputs + 1) * PC_MAX_RANK;
  if (!d) return pc_fail(g, PC_ERR_NOMEM, "out of memory");
  memset(d, 0, sizeof *d);
  d->field = pc_alloc(g, sizeof *d->field * (size_t)(n + 1));
  d->poly = pc_alloc(g, sizeof *d->poly * (size_t)(n + 1));
  d->in_sym = pc_alloc(g, sizeof *d->in_sym * (size_t)n_io);
  d->out_slot = pc_alloc(g, sizeof *d->out_slot * (size_t)n_io);
  const int64_t **order = malloc(sizeof *order * (size_t)(n + 1));
  if (!d->field || !d->poly || !d->in_sym || !d->out_slot || !order) return free(order), pc_fail(g, PC_ERR_NOMEM, "out of memory");
  d->n_syms = ds->n_syms;
  for (int s = 0; s < ds->n_syms; s++)
    d->name[s] = ds->name[s], d->lo[s] = ds->lo[s], d->hi[s] = ds->hi[s], d->mult[s] = kir_dyn_mult(ds, s);
  /* sorted by address, each with its polynomial: sort the addresses, then look each up among the fields */
  int k = 0;
  for (int f = 0; f < base->n_val; f++)
    if (moves[f]) order[k++] = base->at[f];
  qsort(order, (size_t)n, sizeof *order, cmp_field);
  for (int f = 0, j; f < base->n_val; f++) {
    if (!moves[f]) continue;
    const int64_t **hit = bsearch(&base->at[f], order, (size_t)n, sizeof *order, cmp_field);
    j = (int)(hit - order);
    d->field[j] = base->at[f];
    d->poly[j] = polys[f];
  }
  free(order);
  d->n_fields = n;
  p->dyn = d;
  /* the symbols an input's dims are, and a slot for every output dim that follows them */
  int64_t off = kir_align_up(p->workspace_size), slot = off + 8 * KIR_DYN_MAX_SYMS;
  for (int i = 0; i < g->n_inputs; i++)
    for (int dd = 0; dd < PC_MAX_RANK; dd++) {
      const kir_poly *q = dd < g->inputs[i]->type.rank ? kir_dyn_poly(p, &g->inputs[i]->type.dims[dd]) : NULL;
      int sym = q ? kir_poly_sym(q, ds->n_syms, d->mult) : -1;
      if (q && sym < 0)
        return pc_fail(g, PC_ERR_UNSUPPORTED, "input \"%s\" dim %d follows the dims given by --dim but is none of them",
                       g->inputs[i]->name ? g->inputs[i]->name : "?", dd);
      d->in_sym[i * PC_MAX_RANK + dd] = sym;
    }
  for (int i = 0; i < g->n_outputs; i++)
    for (int dd = 0; dd < PC_MAX_RANK; dd++) {
      int dyn = dd < g->outputs[i]->type.rank && kir_dyn_poly(p, &g->outputs[i]->type.dims[dd]);
      d->out_slot[i * PC_MAX_RANK + dd] = dyn ? slot : -1;
      slot += dyn ? 8 : 0;
    }
  d->offset = off;
  kir_buf b = {KP_WORKSPACE, 0, off, slot - off, PC_i64, NULL};
  d->buf = kir_buf_add(p, b);
  if (d->buf < 0) return pc_fail(g, PC_ERR_NOMEM, "out of memory");
  p->workspace_size = kir_align_up(slot);
  return PC_OK;
}

pc_status kir_dyn_fit(kir_program *p, const pc_codegen_opts *o) {
  pc_dyn_spec *ds = o->dyn;
  pc_graph *g = p->g;
  if (ds->n_syms < 1 || ds->n_syms > KIR_DYN_MAX_SYMS)
    return pc_fail(g, PC_ERR_UNSUPPORTED, "%d dims given as ranges: one binary follows at most %d", ds->n_syms,
                   KIR_DYN_MAX_SYMS);
  int nz = kir_dyn_nonzero_kernel(p);
  if (nz >= 0) return kernel_fail(p, nz, ds->name[0], KIR_DYN_NONZERO_WHY);
  kir_dyn_pts P;
  kir_dyn_points(ds, &P);
  int64_t **vals = calloc((size_t)P.n, sizeof *vals); /* each point's sizes, NULL where a soft point was skipped */
  /* the probes build each conv in the row the bounds' program chose: one picked by the map's size would differ */
  kir_conv_pin *pins = calloc((size_t)p->n_kernels + 1, sizeof *pins);
  pc_codegen_opts po = *o;
  po.conv_pins = pins;
  for (int i = 0; pins && i < p->n_kernels; i++) {
    const kir_kernel *k = &p->kernels[i];
    if (k->kind == KK_CALL && k->call == KC_conv && kir_kernel_node(k) >= 0 && k->params[CONV_EPI_AT + CONV_EPI_ROW] > 0)
      pins[po.n_conv_pins++] = (kir_conv_pin){kir_kernel_node(k), (int)k->params[CONV_EPI_AT + CONV_EPI_ROW] - 1};
  }
  walk base = {0};
  walk_program(&base, p);
  ds->n_builds = 1;
  pc_status s = vals && pins && !base.oom ? PC_OK : pc_fail(g, PC_ERR_NOMEM, "out of memory");
  for (int i = 0; s == PC_OK && i < P.n; i++) {
    if (i == 0) { /* the bounds: the program that runs */
      vals[i] = malloc(sizeof *vals[i] * (size_t)(base.n_val + 1));
      if (!vals[i]) s = pc_fail(g, PC_ERR_NOMEM, "out of memory");
      else memcpy(vals[i], base.val, sizeof *base.val * (size_t)base.n_val);
      continue;
    }
    pc_progress(o, "run-time dims", i, P.n);
    s = probe(p, &po, &base, &P, i, &vals[i]);
  }
  int64_t y[KIR_DYN_MAX_POINTS];
  unsigned char have[KIR_DYN_MAX_POINTS];
  for (int i = 0; vals && i < P.n; i++) have[i] = vals[i] != NULL;
  if (s == PC_OK) kir_dyn_note_unchecked(ds, &P, have);
  kir_poly *polys = s == PC_OK ? calloc((size_t)base.n_val + 1, sizeof *polys) : NULL;
  char *moves = s == PC_OK ? calloc((size_t)base.n_val + 1, 1) : NULL;
  if (s == PC_OK && (!polys || !moves)) s = pc_fail(g, PC_ERR_NOMEM, "out of memory");
  for (int f = 0; s == PC_OK && f < base.n_val; f++) {
    for (int i = 0; i < P.n; i++) y[i] = have[i] ? vals[i][f] : 0;
    int bad = 0, r = kir_dyn_fit_series(&P, y, have, &polys[f], &bad);
    if (r == KIR_FIT_SAME) continue;
    int kernel = base.val_kernel[f];
    if (r == KIR_FIT_NONE) s = kernel_fail(p, kernel, ds->name[0], KIR_DYN_NONE_WHY);
    if (r == KIR_FIT_CHECK)
      s = kernel_fail(p, kernel, ds->name[ds->fit_sym = kir_dyn_moved(ds, &P, bad)],
                      "a size follows it in no polynomial way (a check failed)");
    moves[f] = 1;
    ds->n_sizes++;
  }
  if (s == PC_OK) s = install(p, ds, &base, polys, moves);
  for (int i = 0; vals && i < P.n; i++) free(vals[i]);
  free(vals);
  free(pins);
  free(polys);
  free(moves);
  walk_free(&base);
  return s;
}
