/* tests/unit/test_concat_in_place.c: concatenations planned in place (passes/memplan.c): the parts written inside
 * the result's buffer, no copy kernels, and every value still right against the interpreter, including a part
 * read again after the result has died and a value planned while it still lives. */
#include "codegen/codegen.h"
#include "ir/ir.h"
#include "passes/passes.h"
#include "tests/test.h"
#include "tests/unit/helpers.h"

#include <stdlib.h>
#include <string.h>

static pc_type ty3(int64_t a, int64_t b, int64_t c) {
  pc_type t = {PC_f32, 3, {a, b, c}};
  return t;
}

static void group_from(pc_graph *g, int from, int grp) {
  for (int i = from; i < g->n_nodes; i++) g->nodes[i]->group = grp;
  if (g->n_groups < grp + 1) g->n_groups = grp + 1;
}

static pc_value *scaled(pc_graph *g, pc_value *x, double k, int grp) {
  int n0 = g->n_nodes;
  pc_value *y = pc_mul(g, x, pc_broadcast_to(g, pc_scalar(g, PC_f32, k), x->type.rank, x->type.dims));
  group_from(g, n0, grp);
  return y;
}

/* p = 17x, a = 2x, b = 3x, a' = 13x (own kernels), y = concat(a, b, a') on axis 1 (its own kernel), t = 5y; then
 * v = 7 t[:, :3], planned after y's last reader with p below it, where a lies unless a's reader after y
 * keeps the buffer (w = 11a), and the outputs p v and w. With batch n = 1 the parts lie one after another in y:
 * no copy kernel; with n = 2 they do not. */
static void concat_case(int64_t n) {
  pc_graph *g = pc_graph_new();
  pc_value *x = pc_input_add(g, "x", ty3(n, 3, 40));
  pc_value *p = scaled(g, x, 17, 0), *a = scaled(g, x, 2, 1), *b = scaled(g, x, 3, 2), *a2 = scaled(g, x, 13, 3);
  int n0 = g->n_nodes;
  pc_value *y = pc_concatenate(g, (pc_value *[]){a, b, a2}, 3, 1);
  group_from(g, n0, 4);
  pc_value *t = scaled(g, y, 5, 5);
  n0 = g->n_nodes;
  pc_value *ts = pc_slice(g, t, (int64_t[]){0, 0, 0}, (int64_t[]){n, 3, 40}, NULL);
  group_from(g, n0, 6);
  pc_value *v = scaled(g, ts, 7, 6);
  pc_value *w = scaled(g, a, 11, 7);
  n0 = g->n_nodes;
  pc_value *pv = pc_mul(g, p, v);
  group_from(g, n0, 8);
  pc_output_add(g, pv);
  pc_output_add(g, w);
  CHECK_MSG(g->status == PC_OK && pc_pass_memplan(g) == PC_OK, "build: %s", pc_error(g));
  char *buf = pc_test_kernels_text(g);
  CHECK_MSG((strstr(buf ? buf : "", "concatenate") == NULL) == (n == 1), "batch %lld:\n%s", (long long)n, buf);
  free(buf);
  pc_tensor in = pc_test_pattern_f32(3, (int64_t[]){n, 3, 40});
  pc_test_compiled_matches_interp(g, &in, 2, 1e-5f, n == 1 ? "concat in place, batch 1" : "concat in place, batch 2");
  free(in.data);
  pc_graph_free(g);
}

PC_TEST(memplan_concat_in_place) {
  concat_case(1);
  concat_case(2);
}

/* Parts computed in the concatenate's own group and read by it alone (a = 2x, b = 3x, d = x[:, :2]) are computed
 * into the result, one kernel per shape (a and b together, d), not stored and copied: with batch 2 (parts not one
 * after another in y) the group is two kernels and y's reader (t = 5y) a third; the result against the
 * interpreter. A part also read elsewhere (c = 7x, read by w = 11c too) is stored once and copied: c's kernel, its
 * copy and w's make six. */
PC_TEST(concat_parts_computed_into_result) {
  for (int shared = 0; shared < 2; shared++) {
    pc_graph *g = pc_graph_new();
    pc_value *x = pc_input_add(g, "x", ty3(2, 3, 40));
    int n0 = g->n_nodes;
    pc_value *a = pc_mul(g, x, pc_broadcast_to(g, pc_scalar(g, PC_f32, 2), 3, (int64_t[]){2, 3, 40}));
    pc_value *b = pc_mul(g, x, pc_broadcast_to(g, pc_scalar(g, PC_f32, 3), 3, (int64_t[]){2, 3, 40}));
    pc_value *d = pc_slice(g, x, (int64_t[]){0, 0, 0}, (int64_t[]){2, 2, 40}, NULL);
    pc_value *c = shared ? pc_mul(g, x, pc_broadcast_to(g, pc_scalar(g, PC_f32, 7), 3, (int64_t[]){2, 3, 40})) : NULL;
    pc_value *y = pc_concatenate(g, shared ? (pc_value *[]){a, b, d, c} : (pc_value *[]){a, b, d}, shared ? 4 : 3, 1);
    group_from(g, n0, 0);
    pc_output_add(g, scaled(g, y, 5, 1));
    if (shared) pc_output_add(g, scaled(g, c, 11, 2));
    CHECK_MSG(g->status == PC_OK && pc_pass_memplan(g) == PC_OK, "build: %s", pc_error(g));
    pc_test_kernels_count_is(g, shared ? 6 : 3, shared ? "shared part" : "parts in the group");
    pc_tensor in = pc_test_pattern_f32(3, (int64_t[]){2, 3, 40});
    pc_test_compiled_matches_interp(g, &in, shared ? 2 : 1, 1e-5f, shared ? "shared part" : "parts in the group");
    free(in.data);
    pc_graph_free(g);
  }
}
