/* tests/unit/test_codegen_tile.c: transposing loop kernels split in blocks (codegen/kir_tile.c) and kept off
 * vector scatters (codegen/llvm_kernel.c): the listing shows the blocks, the compiled kernels agree with the
 * interpreter and with the flip written out here; shapes the blocks do not divide stay as they were. */
#include "codegen/kir.h"
#include "ir/ir.h"
#include "tests/test.h"
#include "tests/unit/codegen_check.h"
#include "tests/unit/helpers.h"

#include <stdlib.h>
#include <string.h>

/* w [O, C, 3, 3] -> [C, O, 3, 3] with its taps reversed: a conv's weights as its input gradient reads them */
static pc_graph *flip_graph(int64_t O, int64_t C) {
  pc_graph *g = pc_graph_new();
  pc_value *w = pc_input_add(g, "w", cg_ty(PC_f32, 4, (int64_t[]){O, C, 3, 3}));
  pc_value *t = pc_transpose(g, w, (int64_t[]){1, 0, 2, 3});
  pc_attr rev = pc_a_ints("dims", (int64_t[]){2, 3}, 2);
  pc_output_add(g, pc_build(g, PC_OP_rev, &t, 1, &rev, 1));
  return g;
}

PC_TEST(codegen_tile_flipped_weights) {
  /* 64 x 48 in blocks of 16 x 16 (C / 16, O / 16, then 16 C, 16 O and the 9 taps), against the flip itself */
  pc_graph *g = flip_graph(64, 48);
  char *text = pc_test_kernels_text(g);
  CHECK_CONTAINS(text, "loops(i0<3, i1<4, i2<16, i3<16, i4<9)");
  free(text);
  pc_tensor in = pc_test_pattern_f32(4, (int64_t[]){64, 48, 3, 3}), out[1];
  if (CHECK(cg_run_compiled(g, &in, out, "flip"))) {
    const float *w = in.data, *y = out[0].data;
    int bad = 0;
    for (int64_t c = 0; c < 48; c++)
      for (int64_t o = 0; o < 64; o++)
        for (int64_t k = 0; k < 9; k++)
          bad += y[(c * 64 + o) * 9 + k] != w[(o * 48 + c) * 9 + 8 - k];
    CHECK_MSG(bad == 0, "%d of %d flipped weights wrong", bad, 64 * 48 * 9);
    free(out[0].data);
  }
  free(in.data);
  pc_graph_free(g);
  /* 40 x 24: blocks of 8 x 8 */
  g = flip_graph(40, 24);
  cg_listing_has_then_run(g, "loops(i0<3, i1<5, i2<8, i3<8, i4<9)", (cg_range){-2, 2}, "flip 40x24");
  /* 36 x 30: 30 has no block of 4 or more, the kernel keeps its loops */
  g = flip_graph(36, 30);
  cg_listing_has_then_run(g, "loops(i0<30, i1<36, i2<9)", (cg_range){-2, 2}, "flip 36x30");
}

PC_TEST(codegen_tile_transpose_with_math) {
  /* a [96, 128] transpose times 2 plus a row-major operand: no run both read contiguously, the blocks 16 x 16
   * innermost; the same-layout operand rides along */
  pc_graph *g = pc_graph_new();
  pc_value *x = pc_input_add(g, "x", cg_ty(PC_f32, 2, (int64_t[]){96, 128}));
  pc_value *b = pc_input_add(g, "b", cg_ty(PC_f32, 2, (int64_t[]){128, 96}));
  pc_value *t = pc_transpose(g, x, (int64_t[]){1, 0});
  pc_value *two = pc_broadcast_to(g, pc_scalar(g, PC_f32, 2), 2, (int64_t[]){128, 96});
  pc_output_add(g, pc_add(g, pc_mul(g, t, two), b));
  cg_listing_has_then_run(g, "loops(i0<8, i1<6, i2<16, i3<16)", (cg_range){-3, 3}, "transpose * 2 + b");
  /* a head split [B, S, H, D] -> [B, H, S, D] with D = 8 read contiguously by both: S and H in blocks */
  g = pc_graph_new();
  x = pc_input_add(g, "x", cg_ty(PC_f32, 4, (int64_t[]){2, 64, 16, 8}));
  pc_output_add(g, pc_transpose(g, x, (int64_t[]){0, 2, 1, 3}));
  cg_listing_has_then_run(g, "loops(i0<2, i1<2, i2<4, i3<8, i4<16, i5<8)", (cg_range){-3, 3}, "head split");
}

PC_TEST(codegen_no_vector_scatters) {
  /* the flip's stores move by 9 along the O loop: that loop is kept scalar (vectorize.width 1) */
  pc_graph *g = flip_graph(64, 48);
  char *ir = cg_llvm_text(g, 2);
  CHECK_CONTAINS(ir, "!\"llvm.loop.vectorize.width\", i32 1}");
  CHECK_MSG(ir && !strstr(ir, "llvm.masked.scatter"), "a scatter in the flip's IR");
  free(ir);
  pc_graph_free(g);
}
