/* tests/unit/test_pointwise_roots.c: a fused group's stored elementwise results of several shapes become one loop
 * kernel per shape (codegen/kir.c, try_fused_pointwise), each right against the interpreter. */
#include "codegen/codegen.h"
#include "ir/ir.h"
#include "passes/passes.h"
#include "tests/test.h"
#include "tests/unit/helpers.h"

#include <stdlib.h>
#include <string.h>

static pc_value *times(pc_graph *g, pc_value *x, double k) {
  return pc_mul(g, x, pc_broadcast_to(g, pc_scalar(g, PC_f32, k), x->type.rank, x->type.dims));
}

/* One group stores u = 2x and w = 5x over [4, 30] and v = 3 x[:, :10] + u[:, :10] over [4, 10] (it reads u):
 * two kernels, u and w in one, v in the other (u loaded there, stored first); all three against the
 * interpreter. All or nothing across shapes made three. */
PC_TEST(pointwise_roots_one_kernel_per_shape) {
  pc_graph *g = pc_graph_new();
  pc_type t = {PC_f32, 2, {4, 30}};
  pc_value *x = pc_input_add(g, "x", t);
  pc_value *u = times(g, x, 2), *w = times(g, x, 5);
  pc_value *v = pc_add(g, times(g, pc_slice(g, x, (int64_t[]){0, 0}, (int64_t[]){4, 10}, NULL), 3),
                       pc_slice(g, u, (int64_t[]){0, 0}, (int64_t[]){4, 10}, NULL));
  for (int i = 0; i < g->n_nodes; i++) g->nodes[i]->group = 0;
  g->n_groups = 1;
  pc_output_add(g, u);
  pc_output_add(g, v);
  pc_output_add(g, w);
  CHECK_MSG(g->status == PC_OK && pc_pass_memplan(g) == PC_OK, "build: %s", pc_error(g));
  pc_test_kernels_count_is(g, 2, "roots by shape");
  pc_tensor in = pc_test_pattern_f32(2, (int64_t[]){4, 30});
  pc_test_compiled_matches_interp(g, &in, 3, 1e-5f, "roots by shape");
  free(in.data);
  pc_graph_free(g);
}
