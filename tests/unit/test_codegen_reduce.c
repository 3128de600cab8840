/* tests/unit/test_codegen_reduce.c: reductions over rows whose columns stay (a bias's gradient) compiled in column form
 * (codegen/llvm_kernel.c: outputs accumulated in memory, rows outside, contiguous columns inside), against sums
 * computed here, for sum, product, max and min in f32 and f64, NaN included; and the code they compile to. */
#include "codegen/codegen.h"
#include "ir/ir.h"
#include "passes/passes.h"
#include "tests/test.h"
#include "tests/unit/helpers.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct red_case {
  int rank;
  int64_t dims[3];
  int n_axes;
  int64_t axes[2];
} red_case;

/* [37, 48] over rows; [5, 29, 64] over both leading dims; [3, 40, 20] over the middle one (a parallel loop
 * outside the column loop); [6, 10] whose 10 columns stay on the row-order path */
static const red_case cases[] = {
    {2, {37, 48}, 1, {0}}, {3, {5, 29, 64}, 2, {0, 1}}, {3, {3, 40, 20}, 1, {1}}, {2, {6, 10}, 1, {0}}};

static double combine(pc_op op, double acc, double x) {
  switch (op) {
  case PC_OP_reduce_sum: return acc + x;
  case PC_OP_reduce_prod: return acc * x;
  case PC_OP_reduce_max: return isnan(acc) || isnan(x) ? NAN : fmax(acc, x);
  default: return isnan(acc) || isnan(x) ? NAN : fmin(acc, x);
  }
}

static double start(pc_op op) {
  return op == PC_OP_reduce_sum ? 0.0 : op == PC_OP_reduce_prod ? 1.0 : op == PC_OP_reduce_max ? -INFINITY : INFINITY;
}

/* the reduction of x (dims c->dims) over c's axes, in row order */
static void reference(const red_case *c, pc_op op, const double *x, double *out, int64_t n_out) {
  for (int64_t i = 0; i < n_out; i++) out[i] = start(op);
  int64_t n = 1;
  for (int d = 0; d < c->rank; d++) n *= c->dims[d];
  for (int64_t i = 0; i < n; i++) {
    int64_t rest = i, o = 0, scale = 1, idx[3];
    for (int d = c->rank - 1; d >= 0; d--) idx[d] = rest % c->dims[d], rest /= c->dims[d];
    for (int d = c->rank - 1; d >= 0; d--) {
      int reduced = 0;
      for (int a = 0; a < c->n_axes; a++) reduced |= c->axes[a] == d;
      if (reduced) continue;
      o += idx[d] * scale, scale *= c->dims[d];
    }
    out[o] = combine(op, out[o], x[i]);
  }
}

PC_TEST(codegen_column_reductions) {
  static const pc_op ops[] = {PC_OP_reduce_sum, PC_OP_reduce_prod, PC_OP_reduce_max, PC_OP_reduce_min};
  static const pc_dtype types[] = {PC_f32, PC_f64};
  for (size_t t = 0; t < 2; t++)
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
      const red_case *rc = &cases[c];
      pc_graph *g = pc_graph_new();
      pc_value *x = pc_input_add(g, "x", pc_type_make(types[t], rc->rank, rc->dims));
      for (size_t o = 0; o < 4; o++) pc_output_add(g, pc_reduce(g, ops[o], x, rc->n_axes, rc->axes));
      pc_pipeline_opts po = {.opt_level = 2};
      if (!CHECK_MSG(pc_pipeline_run(g, &po) == PC_OK, "passes: %s", pc_error(g))) {
        pc_graph_free(g);
        continue;
      }
      pc_tensor in = {types[t], rc->rank, {0}, NULL};
      memcpy(in.dims, rc->dims, sizeof rc->dims);
      int64_t n = pc_tensor_numel(&in);
      double *xd = malloc(sizeof(double) * (size_t)n);
      in.data = malloc((size_t)n * pc_dtype_size(types[t]));
      for (int64_t i = 0; i < n; i++) {
        xd[i] = 0.75 + (double)((i * 37) % 101) / 200.0; /* products stay in range */
        if (i == 3 * rc->dims[rc->rank - 1] + 5) xd[i] = NAN; /* one column's max and min are NaN */
        pc_test_put(types[t], in.data, i, xd[i]);
      }
      pc_tensor outs[4];
      char tag[64];
      snprintf(tag, sizeof tag, "column reductions %s case %zu", pc_dtype_name(types[t]), c);
      if (pc_test_run_compiled(g, 2, &in, outs, tag)) {
        for (size_t o = 0; o < 4; o++) {
          int64_t m = pc_tensor_numel(&outs[o]);
          double *want = malloc(sizeof(double) * (size_t)m);
          reference(rc, ops[o], xd, want, m);
          for (int64_t i = 0; i < m; i++) {
            double got = types[t] == PC_f32 ? ((float *)outs[o].data)[i] : ((double *)outs[o].data)[i];
            double tol = (types[t] == PC_f32 ? 1e-5 : 1e-12) * (fabs(want[i]) + 1.0);
            if (!CHECK_MSG(isnan(want[i]) ? isnan(got) : fabs(got - want[i]) <= tol, "%s %s[%lld] = %g, want %g", tag,
                           pc_prim(ops[o])->name, (long long)i, got, want[i]))
              break;
          }
          free(want);
          free(outs[o].data);
        }
      }
      free(xd), free(in.data);
      pc_graph_free(g);
    }
}

/* The column form reads rows contiguously: no gathered load in the code a column sum compiles to (the row-order
 * form vectorizes a 512 x 256 column sum with 16-lane gathers on AVX-512, on AVX2 with a scalar load per lane),
 * and its sums are vectors stored in memory (the row-order form stores each output once, a scalar). Also when
 * a per-row value enters the sum, as a layer norm's mean and scale do its weight's gradient (such a kernel took
 * the row-order form: 2.2 ms for 1024 x 256 on Zen 3); its sums against ones computed here. */
static void column_form_case(const char *text, int with_rows) {
  pc_graph *g = pc_graph_parse(text, strlen(text), "colsum", NULL);
  pc_pipeline_opts po = {.opt_level = 2};
  char path[] = "/tmp/primc-colsum-XXXXXX";
  int fd = mkstemp(path);
  if (fd >= 0) close(fd);
  pc_codegen_opts o = {.emit = PC_EMIT_LLVM, .output = path, .name = "m", .opt_level = 2};
  if (CHECK(fd >= 0 && g && !g->status) &&
      CHECK_MSG(pc_pipeline_run(g, &po) == PC_OK && pc_codegen(g, &o) == PC_OK, "%s", pc_error(g))) {
    size_t len = 0;
    char *ir = pc_test_slurp(path, &len);
    if (CHECK(ir != NULL)) {
      CHECK_MSG(!strstr(ir, "masked.gather"), "the column sum gathers its loads");
      int vector_stores = 0;
      for (const char *at = ir; (at = strstr(at, "store <")) != NULL; at++) {
        int lanes = 0;
        char ty[8] = "";
        vector_stores += sscanf(at, "store <%d x %5[a-z]>", &lanes, ty) == 2 && !strcmp(ty, "float");
      }
      CHECK_MSG(vector_stores > 0, "the column sum does not keep its sums in memory as vectors");
    }
    free(ir);
  }
  unlink(path);
  if (g && !g->status && with_rows) {
    float *x = malloc(sizeof(float) * 512 * 256), m[512], sc[512];
    for (int i = 0; i < 512 * 256; i++) x[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
    for (int r = 0; r < 512; r++) m[r] = (float)(r % 7) * 0.125f, sc[r] = 0.5f + (float)(r % 5) * 0.25f;
    pc_tensor ins[3] = {{PC_f32, 2, {512, 256}, x}, {PC_f32, 1, {512}, m}, {PC_f32, 1, {512}, sc}}, out;
    if (pc_test_run_compiled(g, 2, ins, &out, "colsum with per-row values")) {
      for (int c = 0; c < 256; c++) {
        double want = 0;
        for (int r = 0; r < 512; r++) want += ((double)x[r * 256 + c] - m[r]) * sc[r];
        if (!CHECK_MSG(fabs(((float *)out.data)[c] - want) <= 1e-4 * (fabs(want) + 1), "y[%d] = %g, want %g", c,
                       ((float *)out.data)[c], want))
          break;
      }
      free(out.data);
    }
    free(x);
  }
  pc_graph_free(g);
}

PC_TEST(codegen_column_reduction_loads_rows) {
  column_form_case("graph(%x : f32[512,256]):\n  %y : f32[256] = reduce_sum(%x, axes=[0])\n  return (%y)\n", 0);
  column_form_case("graph(%x : f32[512,256], %m : f32[512], %s : f32[512]):\n"
                   "  %mb : f32[512,256] = broadcast_in_dim(%m, shape=[512,256], dims=[0])\n"
                   "  %sb : f32[512,256] = broadcast_in_dim(%s, shape=[512,256], dims=[0])\n"
                   "  %d : f32[512,256] = sub(%x, %mb)\n  %p : f32[512,256] = mul(%d, %sb)\n"
                   "  %y : f32[256] = reduce_sum(%p, axes=[0])\n  return (%y)\n",
                   1);
}
