/* tests/unit/test_reshape_alias.c: a reshape that is its stored operand's last reader takes over the operand's
 * buffer (passes/memplan.c, inplace_ok), and its kernel, a copy onto itself, is not made (codegen/kir.c). */
#include "codegen/codegen.h"
#include "ir/ir.h"
#include "passes/passes.h"
#include "tests/test.h"
#include "tests/unit/helpers.h"

#include <stdlib.h>
#include <string.h>

/* u = concat(2x, 3x) [2, 6, 40] (group 0), w = u reshaped to [12, 40] (group 1: the merge of dims is no affine map
 * of u, so w is stored), t = 5w (group 2): w lies over u and the group's kernel is none, two kernels in all; with
 * u read again after w (v = u + 1, group 3) w needs a buffer of its own and its copy: four. Against the
 * interpreter each time. */
PC_TEST(reshape_over_its_operand) {
  for (int reread = 0; reread < 2; reread++) {
    pc_graph *g = pc_graph_new();
    pc_type tx = {PC_f32, 3, {2, 3, 40}};
    pc_value *x = pc_input_add(g, "x", tx);
    pc_value *a = pc_mul(g, x, pc_broadcast_to(g, pc_scalar(g, PC_f32, 2), 3, tx.dims));
    pc_value *b = pc_mul(g, x, pc_broadcast_to(g, pc_scalar(g, PC_f32, 3), 3, tx.dims));
    pc_value *u = pc_concatenate(g, (pc_value *[]){a, b}, 2, 1);
    int n1 = g->n_nodes;
    pc_value *w = pc_reshape(g, u, 2, (int64_t[]){12, 40});
    int n2 = g->n_nodes;
    pc_value *t = pc_mul(g, w, pc_broadcast_to(g, pc_scalar(g, PC_f32, 5), 2, w->type.dims));
    int n3 = g->n_nodes;
    pc_value *v = reread ? pc_add(g, u, pc_broadcast_to(g, pc_scalar(g, PC_f32, 1), 3, u->type.dims)) : NULL;
    for (int i = 0; i < g->n_nodes; i++) g->nodes[i]->group = i < n1 ? 0 : i < n2 ? 1 : i < n3 ? 2 : 3;
    g->n_groups = reread ? 4 : 3;
    pc_output_add(g, t);
    if (reread) pc_output_add(g, v);
    CHECK_MSG(g->status == PC_OK && pc_pass_memplan(g) == PC_OK, "build: %s", pc_error(g));
    pc_test_kernels_count_is(g, reread ? 4 : 2, reread ? "u read again" : "reshape over u");
    pc_tensor in = pc_test_pattern_f32(3, (int64_t[]){2, 3, 40});
    pc_test_compiled_matches_interp(g, &in, reread ? 2 : 1, 1e-5f, reread ? "u read again" : "reshape over u");
    free(in.data);
    pc_graph_free(g);
  }
}
