/* tests/unit/test_onnx_cf.c: If / Loop / Scan unrolled at import and sequences / optionals as import-time lists, against onnxruntime references in tests/data/onnx_cf. */
#include "frontend/frontend.h"
#include "frontend/onnx_internal.h"
#include "ir/ir.h"
#include "tests/test.h"
#include "tests/unit/helpers.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CF_RTOL 1e-5
#define CF_ATOL 1e-6

static void same(const char *name, int idx, const pc_tensor *got, const pc_tensor *want) {
  if (!CHECK_MSG(got->rank == want->rank && got->dtype == want->dtype, "%s output %d: rank/dtype differ", name, idx))
    return;
  for (int i = 0; i < got->rank; i++)
    if (!CHECK_MSG(got->dims[i] == want->dims[i], "%s output %d: dim %d is %lld, expected %lld", name, idx, i,
                   (long long)got->dims[i], (long long)want->dims[i]))
      return;
  for (int64_t k = 0; k < pc_tensor_numel(want); k++) {
    double a = pc_elem_f64(got->dtype, got->data, k), b = pc_elem_f64(want->dtype, want->data, k);
    if (!(fabs(a - b) <= CF_ATOL + CF_RTOL * fabs(b)))
      return (void)CHECK_MSG(0, "%s output %d[%lld]: %.9g, expected %.9g", name, idx, (long long)k, a, b);
  }
}

static pc_graph *load_case(const char *name) {
  char path[1024];
  snprintf(path, sizeof path, "%s/tests/data/onnx_cf/%s/model.onnx", pc_test_srcdir(), name);
  return pc_onnx_load(path, NULL);
}

/* imports the case, runs it on input_0.pb and compares every output with onnxruntime's */
static void run_case(const char *name) {
  char path[1024];
  pc_graph *g = load_case(name);
  pc_tensor in, want[4], got[4];
  memset(got, 0, sizeof got);
  if (!CHECK_MSG(g && g->status == PC_OK, "%s: %s", name, g ? pc_error(g) : "out of memory") ||
      !CHECK(g->n_outputs <= 4)) {
    pc_graph_free(g);
    return;
  }
  int n_out = g->n_outputs, n_want = 0;
  snprintf(path, sizeof path, "%s/tests/data/onnx_cf/%s/input_0.pb", pc_test_srcdir(), name);
  int ok = CHECK_MSG(pc_test_read_pb(path, &in), "%s: input", name);
  for (; ok && n_want < n_out; n_want++) {
    snprintf(path, sizeof path, "%s/tests/data/onnx_cf/%s/output_%d.pb", pc_test_srcdir(), name, n_want);
    ok = CHECK_MSG(pc_test_read_pb(path, &want[n_want]), "%s: output %d", name, n_want);
  }
  if (ok && CHECK_MSG(pc_interp(g, &in, 1, got, n_out) == PC_OK, "%s: %s", name, pc_error(g)))
    for (int i = 0; i < n_out; i++) same(name, i, &got[i], &want[i]);
  for (int i = 0; i < n_out; i++) pc_tensor_free(&got[i]);
  for (int i = 0; i < n_want; i++) pc_tensor_free(&want[i]);
  pc_tensor_free(&in);
  pc_graph_free(g);
}

PC_TEST(onnx_cf_if_select_and_taken_branch) {
  run_case("if_where"); /* the condition is computed at run time: both branches and where */
  run_case("if_const"); /* a folded condition: only the taken branch, whose shape differs */
}

PC_TEST(onnx_cf_loop_and_scan_unrolled) {
  run_case("loop_unrolled"); /* the body's condition stops it after 3 of 5 trips; scan outputs stacked */
  run_case("scan_reverse");  /* scan axis 1, reverse direction, output stacked on axis 1 */
}

PC_TEST(onnx_cf_sequences_and_optionals) {
  run_case("sequences");
  run_case("optionals");
}

/* what cannot be unrolled or selected is refused with the node named */
PC_TEST(onnx_cf_refusals_name_the_node) {
  pc_graph *g = load_case("loop_trip_error");
  CHECK_INT(g->status, PC_ERR_UNSUPPORTED);
  CHECK_CONTAINS(pc_error(g), "Loop \"spin\": unsupported: data-dependent trip count");
  pc_graph_free(g);
  g = load_case("if_shapes_error");
  CHECK_INT(g->status, PC_ERR_UNSUPPORTED);
  CHECK_CONTAINS(pc_error(g), "If \"pick\"");
  CHECK_CONTAINS(pc_error(g), "differ in shape");
  pc_graph_free(g);
}
