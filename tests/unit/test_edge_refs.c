/* tests/unit/test_edge_refs.c: edge cases mutation testing found untested, on the interpreter and compiled through
 * LLVM (-O0 --unfused and -O2), against references computed outside primc: the comparison prims and max/min on
 * NaN, infinities and signed zeros (IEEE truth tables written out by hand), Slice with negative steps running to
 * the start of an axis, ArgMax/ArgMin ties with and without select_last_index, and max pools (numpy references from
 * tests/ref/gen_edge_refs.py in tests/data/onnx_edge, checked against onnxruntime there). */
#include "codegen/codegen.h"
#include "codegen/kir.h"
#include "frontend/frontend.h"
#include "ir/ir.h"
#include "passes/passes.h"
#include "tests/test.h"
#include "tests/unit/helpers.h"

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define MAXIO 16

typedef struct mode {
  const char *name;
  int opt, unfused;
} mode;

static const mode modes[] = {{"-O0 --unfused", 0, 1}, {"-O2", 2, 0}};

/* runs the pipeline of mode m on g, compiles it to an object, links and runs it on ins; outs are malloc'ed */
static int compile_run(pc_graph *g, const mode *m, const pc_tensor *ins, pc_tensor *outs, const char *tag) {
  if (!CHECK_MSG(g->n_inputs <= MAXIO && g->n_outputs <= MAXIO, "%s: too many inputs/outputs", tag)) return 0;
  pc_pipeline_opts po = {0};
  po.opt_level = m->opt;
  po.unfused = m->unfused;
  if (!CHECK_MSG(pc_pipeline_run(g, &po) == PC_OK, "%s %s: pipeline: %s", tag, m->name, pc_error(g))) return 0;
  char what[160];
  snprintf(what, sizeof what, "%s %s", tag, m->name);
  return pc_test_run_compiled(g, m->opt, ins, outs, what);
}

/* ---------------------------------------------------------------- comparisons and max/min on NaN */

#define NPAIR 11
#define NELEM 37 /* the pairs repeated: a vector body and a tail */

/* IEEE 754: every ordered comparison with a NaN operand is false, ne is true; -0 == +0; inf == inf. Written out by
 * hand, pair by pair, not computed with C's operators. */
static const double pa[NPAIR] = {1, 2, 2, NAN, 1, NAN, -0.0, INFINITY, -INFINITY, INFINITY, -INFINITY};
static const double pb[NPAIR] = {2, 1, 2, 1, NAN, NAN, 0.0, INFINITY, INFINITY, NAN, -INFINITY};
static const struct {
  pc_op op;
  const char *name, *want;
} cmps[] = {
    {PC_OP_lt, "lt", "10000000100"}, {PC_OP_le, "le", "10100011101"}, {PC_OP_gt, "gt", "01000000000"},
    {PC_OP_ge, "ge", "01100011001"}, {PC_OP_eq, "eq", "00100011001"}, {PC_OP_ne, "ne", "11011100110"},
};
/* numpy.maximum / numpy.minimum: a NaN operand gives NaN; Z marks the signed-zero pair, where either zero is right */
#define Z 99.0
static const double want_max[NPAIR] = {2, 2, 2, NAN, NAN, NAN, Z, INFINITY, INFINITY, NAN, -INFINITY};
static const double want_min[NPAIR] = {1, 1, 2, NAN, NAN, NAN, Z, INFINITY, -INFINITY, NAN, -INFINITY};
#define N_CMP (int)(sizeof cmps / sizeof *cmps)

static pc_graph *cmp_graph(pc_dtype dt) {
  pc_graph *g = pc_graph_new();
  int64_t d[1] = {NELEM};
  pc_value *x = pc_input_add(g, "a", pc_type_make(dt, 1, d)), *y = pc_input_add(g, "b", pc_type_make(dt, 1, d));
  pc_value *xy[2] = {x, y};
  for (int k = 0; k < N_CMP; k++) pc_output_add(g, pc_build(g, cmps[k].op, xy, 2, NULL, 0));
  pc_output_add(g, pc_max(g, x, y));
  pc_output_add(g, pc_min(g, x, y));
  /* a comparison feeding a select, which the fuser puts in one kernel with it: where(a <= b, a, b) */
  pc_output_add(g, pc_where(g, pc_build(g, PC_OP_le, xy, 2, NULL, 0), x, y));
  return g;
}

/* checks the outputs of cmp_graph against the tables; 1 when all agree */
static int check_cmp_outputs(const pc_tensor *outs, const char *tag) {
  int ok = 1;
  for (int i = 0; i < NELEM; i++) {
    int p = i % NPAIR;
    for (int k = 0; k < N_CMP; k++) {
      int got = pc_elem_f64(PC_bool, outs[k].data, i) != 0, want = cmps[k].want[p] == '1';
      if (got != want)
        ok = CHECK_MSG(0, "%s: %s(%g, %g) = %d, IEEE says %d", tag, cmps[k].name, pa[p], pb[p], got, want);
    }
    for (int k = 0; k < 2; k++) {
      double got = pc_elem_f64(outs[N_CMP + k].dtype, outs[N_CMP + k].data, i), want = k ? want_min[p] : want_max[p];
      int good = want == Z ? got == 0 : isnan(want) ? isnan(got) : got == want;
      if (!good) ok = CHECK_MSG(0, "%s: %s(%g, %g) = %g, numpy says %g", tag, k ? "min" : "max", pa[p], pb[p], got, want);
    }
    /* where(a <= b, a, b): b unless a <= b holds, so NaN pairs give b */
    double got = pc_elem_f64(outs[N_CMP + 2].dtype, outs[N_CMP + 2].data, i);
    double want = cmps[1].want[p] == '1' ? pa[p] : pb[p];
    if (!(isnan(want) ? isnan(got) : got == want))
      ok = CHECK_MSG(0, "%s: where(%g <= %g) = %g, want %g", tag, pa[p], pb[p], got, want);
  }
  return CHECK_MSG(ok, "%s: comparisons, max, min and where on NaN", tag);
}

PC_TEST(edge_compare_nan_interp_and_compiled) {
  static const pc_dtype dts[] = {PC_f32, PC_f64};
  for (size_t t = 0; t < sizeof dts / sizeof *dts; t++) {
    pc_dtype dt = dts[t];
    pc_tensor ins[2];
    for (int k = 0; k < 2; k++) {
      ins[k] = (pc_tensor){dt, 1, {NELEM}, calloc(NELEM, 8)};
      for (int i = 0; i < NELEM; i++) pc_test_put(dt, ins[k].data, i, (k ? pb : pa)[i % NPAIR]);
    }
    char tag[64];
    pc_graph *g = cmp_graph(dt);
    pc_tensor outs[MAXIO];
    memset(outs, 0, sizeof outs);
    snprintf(tag, sizeof tag, "%s interpreter", pc_dtype_name(dt));
    if (CHECK_MSG(g->status == PC_OK && pc_interp(g, ins, 2, outs, g->n_outputs) == PC_OK, "%s: %s", tag, pc_error(g)))
      check_cmp_outputs(outs, tag);
    for (int k = 0; k < g->n_outputs; k++) pc_tensor_free(&outs[k]);
    pc_graph_free(g);
    for (size_t m = 0; m < sizeof modes / sizeof *modes; m++) {
      g = cmp_graph(dt);
      snprintf(tag, sizeof tag, "%s compiled %s", pc_dtype_name(dt), modes[m].name);
      if (compile_run(g, &modes[m], ins, outs, tag)) check_cmp_outputs(outs, tag);
      for (int k = 0; k < g->n_outputs; k++) free(outs[k].data);
      pc_graph_free(g);
    }
    free(ins[0].data), free(ins[1].data);
  }
}

/* ---------------------------------------------------------------- ONNX cases with numpy references */

static pc_graph *load_case(const char *name) {
  char path[1024];
  snprintf(path, sizeof path, "%s/tests/data/onnx_edge/%s/model.onnx", pc_test_srcdir(), name);
  pc_graph *g = pc_onnx_load(path, NULL);
  if (!CHECK_MSG(g && g->status == PC_OK, "%s: %s", name, g ? pc_error(g) : "out of memory")) {
    pc_graph_free(g);
    return NULL;
  }
  return g;
}

/* exact comparison: slicing and arg indices leave no room for rounding */
static int same(const char *tag, int idx, const pc_tensor *got, const pc_tensor *want) {
  if (!CHECK_MSG(got->dtype == want->dtype && got->rank == want->rank, "%s output %d: dtype %s rank %d, want %s rank %d",
                 tag, idx, pc_dtype_name(got->dtype), got->rank, pc_dtype_name(want->dtype), want->rank))
    return 0;
  for (int i = 0; i < got->rank; i++)
    if (!CHECK_MSG(got->dims[i] == want->dims[i], "%s output %d: dim %d is %lld, want %lld", tag, idx, i,
                   (long long)got->dims[i], (long long)want->dims[i]))
      return 0;
  int64_t n = pc_tensor_numel(want);
  for (int64_t k = 0; k < n; k++) {
    double a = pc_elem_f64(got->dtype, got->data, k), b = pc_elem_f64(want->dtype, want->data, k);
    if (a != b) return CHECK_MSG(0, "%s output %d[%lld]: %.9g, numpy %.9g", tag, idx, (long long)k, a, b);
  }
  return CHECK_MSG(1, "%s output %d", tag, idx);
}

/* the case on the interpreter and in both compiled modes, every output against its reference */
static void run_onnx_case(const char *name) {
  char path[1024], tag[128];
  const char *src = pc_test_srcdir();
  pc_graph *g = load_case(name);
  if (!g) return;
  int n_out = g->n_outputs;
  pc_tensor in, want[MAXIO], got[MAXIO];
  memset(got, 0, sizeof got);
  snprintf(path, sizeof path, "%s/tests/data/onnx_edge/%s/input_0.pb", src, name);
  int have_in = CHECK_MSG(pc_test_read_pb(path, &in), "%s: input", name);
  int ok = have_in && CHECK(n_out >= 1 && n_out <= MAXIO);
  int n_want = 0;
  for (; ok && n_want < n_out; n_want++) {
    snprintf(path, sizeof path, "%s/tests/data/onnx_edge/%s/output_%d.pb", src, name, n_want);
    if (!CHECK_MSG(pc_test_read_pb(path, &want[n_want]), "%s: output %d", name, n_want)) ok = 0;
  }
  snprintf(tag, sizeof tag, "%s interpreter", name);
  if (ok && CHECK_MSG(pc_interp(g, &in, 1, got, n_out) == PC_OK, "%s: %s", tag, pc_error(g)))
    for (int i = 0; i < n_out; i++) same(tag, i, &got[i], &want[i]);
  for (int i = 0; i < n_out; i++) pc_tensor_free(&got[i]);
  pc_graph_free(g);
  for (size_t m = 0; ok && m < sizeof modes / sizeof *modes; m++) {
    if (!(g = load_case(name))) break;
    snprintf(tag, sizeof tag, "%s compiled %s", name, modes[m].name);
    if (compile_run(g, &modes[m], &in, got, tag))
      for (int i = 0; i < n_out; i++) same(tag, i, &got[i], &want[i]);
    for (int i = 0; i < n_out; i++) free(got[i].data), got[i].data = NULL;
    pc_graph_free(g);
  }
  for (int i = 0; i < n_want && i < n_out; i++) pc_tensor_free(&want[i]);
  if (have_in) pc_tensor_free(&in);
}

/* Slice with steps -1, -2, -3 whose ends are INT64_MIN, -len-1 and -100 (through index 0) and -len (stopping
 * before it), on both axes and a negative axis */
PC_TEST(edge_slice_negative_step_to_axis_start) { run_onnx_case("slice_neg_step_to_start"); }

/* the max pool calls (of kind call) codegen makes of case name's pools (kir_pool_calls, as a host compile runs it) */
static int pool_calls_of(const char *name, kir_call call) {
  pc_graph *g = load_case(name);
  kir_program p;
  int n = -1;
  if (g && CHECK(pc_pipeline_run(g, &(pc_pipeline_opts){.opt_level = 2}) == PC_OK) && CHECK(kir_build(g, &p) == PC_OK) &&
      CHECK(kir_pack_weights(&p) == PC_OK)) {
    kir_pool_calls(&p);
    n = 0;
    for (int k = 0; k < p.n_kernels; k++) n += p.kernels[k].kind == KK_CALL && p.kernels[k].call == call;
  }
  pc_graph_free(g);
  return n;
}

static int pool_calls(const char *name) { return pool_calls_of(name, KC_maxpool); }

/* strided max pools without pads read their map in place through the pool call (one-row windows stay loops),
 * also those whose windows stop short of the map's end (the importer's crop, a pad of negative edges, is a slice
 * read in place), against numpy */
PC_TEST(edge_max_pools_unpadded) {
  run_onnx_case("maxpool_unpadded_strided");
  run_onnx_case("maxpool_unpadded_narrow");
  CHECK_INT(pool_calls("maxpool_unpadded_strided"), 4);
  CHECK_INT(pool_calls("maxpool_unpadded_narrow"), 3);
}

/* strided max pools on uint8, padded and not, as primc_k_maxpool_u8 calls, against numpy and ONNX Runtime */
PC_TEST(edge_max_pools_u8) {
  run_onnx_case("maxpool_u8_strided");
  CHECK_INT(pool_calls_of("maxpool_u8_strided", KC_maxpool_u8), 3);
}

/* growing max pools of one map, built from each other by the importer (SPP) */
PC_TEST(edge_max_pools_grown_from_smaller_ones) {
  run_onnx_case("maxpool_spp_5_9_13");
  run_onnx_case("maxpool_growing_unequal");
}

/* ArgMax/ArgMin on rows with tied extremes, select_last_index 0 and 1, both axes, float and int32 inputs */
PC_TEST(edge_argmax_argmin_ties) {
  run_onnx_case("argmax_ties_f32");
  run_onnx_case("argmax_ties_i32");
}
