/* tests/unit/codegen_check.c: the harness the test_codegen_*.c files share (tests/unit/codegen_check.h). */
#include "codegen/codegen.h"
#include "ir/ir.h"
#include "tests/test.h"
#include "tests/unit/codegen_check.h"
#include "tests/unit/helpers.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* ---------------------------------------------------------------- data */

static uint64_t rng_state = 88172645463325252ull;
static uint64_t rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}
double cg_urand(double lo, double hi) { return lo + (hi - lo) * (double)(rnd() >> 11) / 9007199254740992.0; }

pc_tensor cg_make_input(const pc_value *v, cg_range r) {
  pc_tensor t = {v->type.dtype, v->type.rank, {0}, NULL};
  memcpy(t.dims, v->type.dims, sizeof t.dims);
  int64_t n = pc_tensor_numel(&t);
  t.data = calloc((size_t)n + 1, pc_dtype_size(t.dtype) + 8);
  for (int64_t i = 0; i < n; i++) {
    double x = cg_urand(r.lo, r.hi);
    if (!pc_dtype_is_float(t.dtype)) x = (double)(int64_t)x;
    if (t.dtype == PC_bool) x = rnd() & 1;
    pc_test_put(t.dtype, t.data, i, x);
  }
  return t;
}

/* ---------------------------------------------------------------- compile, load, run */

/* compiles g to an object at -O2, links a shared library, runs it on ins into outs (malloc'ed) */
int cg_run_compiled(pc_graph *g, const pc_tensor *ins, pc_tensor *outs, const char *tag) {
  return pc_test_run_compiled(g, 2, ins, outs, tag);
}

static int close_enough(pc_dtype dt, double a, double b) {
  if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
  if (isinf(a) || isinf(b)) return a == b;
  double tol = dt == PC_f16 ? 2e-3 : dt == PC_bf16 ? 1e-2 : dt == PC_f32 || dt == PC_c64 ? 2e-5 : dt == PC_f64 ? 1e-12 : 0;
  return fabs(a - b) <= tol * (1 + fabs(b));
}

/* a is a value of f16 (11 significant bits, or a multiple of 2^-24 below 2^-14), found by frexp */
static int is_f16_value(double a) {
  int e;
  double m = frexp(a, &e);
  return a == 0 || isinf(a) || isnan(a) || (e <= 16 && ldexp(m, e < -13 ? 24 + e : 11) == nearbyint(ldexp(m, e < -13 ? 24 + e : 11)));
}

/* interpreter vs compiled code on random inputs in range r, outputs compared within the tolerance of dtype tol_as
 * (theirs when PC_DTYPE_COUNT); with tol_as f16, f32 outputs must also hold f16 values */
int cg_check_graph_as(pc_graph *g, cg_range r, const char *tag, pc_dtype tol_as) {
  if (!CHECK_MSG(g->status == PC_OK, "%s: build: %s", tag, pc_error(g))) return 0;
  pc_tensor ins[16], ref[16], got[16];
  for (int i = 0; i < g->n_inputs; i++) ins[i] = cg_make_input(g->inputs[i], r);
  memset(ref, 0, sizeof ref);
  memset(got, 0, sizeof got);
  int ok = CHECK_MSG(pc_interp(g, ins, g->n_inputs, ref, g->n_outputs) == PC_OK, "%s: interp: %s", tag, pc_error(g));
  ok = ok && cg_run_compiled(g, ins, got, tag);
  for (int o = 0; ok && o < g->n_outputs; o++) {
    pc_dtype dt = ref[o].dtype, lane = dt == PC_c64 ? PC_f32 : dt; /* complex: both halves */
    int64_t n = pc_tensor_numel(&ref[o]) * (dt == PC_c64 ? 2 : 1);
    for (int64_t i = 0; i < n; i++) {
      double a = pc_elem_f64(lane, got[o].data, i), b = pc_elem_f64(lane, ref[o].data, i);
      if (!close_enough(tol_as == PC_DTYPE_COUNT ? ref[o].dtype : tol_as, a, b) || (tol_as == PC_f16 && !is_f16_value(a))) {
        CHECK_MSG(0, "%s: out%d[%lld] = %.9g, interpreter %.9g", tag, o, (long long)i, a, b);
        ok = 0;
        break;
      }
    }
  }
  for (int i = 0; i < g->n_inputs; i++) free(ins[i].data);
  for (int o = 0; o < g->n_outputs; o++) {
    pc_tensor_free(&ref[o]);
    free(got[o].data);
  }
  return ok;
}

int cg_check_graph(pc_graph *g, cg_range r, const char *tag) { return cg_check_graph_as(g, r, tag, PC_DTYPE_COUNT); }

/* g compiled to LLVM IR text at opt level `opt` (caller frees); NULL on failure */
char *cg_llvm_text(pc_graph *g, int opt) {
  char dir[] = "/tmp/primc-cg-XXXXXX", path[256];
  if (!CHECK(mkdtemp(dir) != NULL)) return NULL;
  snprintf(path, sizeof path, "%s/m.ll", dir);
  pc_codegen_opts o = {0};
  o.emit = PC_EMIT_LLVM;
  o.output = path;
  o.name = "m";
  o.opt_level = opt;
  char *buf = NULL;
  if (CHECK_MSG(pc_codegen(g, &o) == PC_OK, "%s", pc_error(g))) {
    FILE *f = fopen(path, "r");
    buf = calloc(1, 1 << 22);
    size_t n = f && buf ? fread(buf, 1, (1 << 22) - 1, f) : 0;
    if (f) fclose(f);
    if (!CHECK(n > 0)) free(buf), buf = NULL;
  }
  unlink(path);
  rmdir(dir);
  return buf;
}

/* the kernel listing of g shows `want`; then g compiled agrees with the interpreter; g is freed */
void cg_listing_has_then_run(pc_graph *g, const char *want, cg_range r, const char *tag) {
  char *buf = pc_test_kernels_text(g);
  CHECK_CONTAINS(buf, want);
  free(buf);
  cg_check_graph(g, r, tag);
  pc_graph_free(g);
}

pc_type cg_ty(pc_dtype dt, int rank, const int64_t *dims) { return pc_type_make(dt, rank, dims); }

/* ---------------------------------------------------------------- fused groups */

/* every node of g created from index `from` on is put in group `grp` */
void cg_group_from(pc_graph *g, int from, int grp) {
  for (int i = from; i < g->n_nodes; i++) g->nodes[i]->group = grp;
  if (g->n_groups < grp + 1) g->n_groups = grp + 1;
}
