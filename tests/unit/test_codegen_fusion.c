/* tests/unit/test_codegen_fusion.c: fused groups compiled into loop kernels and compared with pc_interp:
 * prologues inside reductions, reshapes and transposes in a load's map, collapsed loops, balanced max chains,
 * pads that fill only their frame, parallel loops, gathers of broadcasts, no result stored twice, and kernel
 * listings naming the model node. */
#include "codegen/kir.h"
#include "frontend/frontend.h"
#include "ir/ir.h"
#include "passes/passes.h"
#include "tests/test.h"
#include "tests/unit/codegen_check.h"
#include "tests/unit/helpers.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* ---------------------------------------------------------------- fused groups */

PC_TEST(codegen_fused_groups) {
  pc_graph *g = pc_graph_new();
  int64_t d[2] = {33, 65};
  pc_value *x = pc_input_add(g, "x", cg_ty(PC_f32, 2, d)), *y = pc_input_add(g, "y", cg_ty(PC_f32, 2, d));
  /* pointwise chain with a transposed, broadcast operand: one loop nest */
  int n0 = g->n_nodes;
  pc_value *row = pc_reduce(g, PC_OP_reduce_max, x, 1, (int64_t[]){1});
  cg_group_from(g, n0, 0);
  n0 = g->n_nodes;
  pc_value *sh = pc_sub(g, x, pc_broadcast_in_dim(g, row, 2, d, (int64_t[]){0}));
  pc_value *e = pc_exp(g, sh);
  pc_value *z = pc_mul(g, e, pc_transpose(g, pc_transpose(g, y, (int64_t[]){1, 0}), (int64_t[]){1, 0}));
  cg_group_from(g, n0, 1);
  /* reduction with an elementwise prologue */
  n0 = g->n_nodes;
  pc_value *s = pc_reduce(g, PC_OP_reduce_sum, pc_mul(g, z, z), 1, (int64_t[]){0});
  cg_group_from(g, n0, 2);
  /* a group that is not one loop nest (reshape of an inner value): split back into prims */
  n0 = g->n_nodes;
  pc_value *r = pc_reshape(g, pc_neg(g, z), 2, (int64_t[]){65, 33});
  cg_group_from(g, n0, 3);
  pc_output_add(g, e);
  pc_output_add(g, z);
  pc_output_add(g, s);
  pc_output_add(g, r);
  char *buf = pc_test_kernels_text(g);
  CHECK_CONTAINS(buf, "sum mul(");                /* the prologue is inside the reduction */
  CHECK_CONTAINS(buf, "= exp(sub(");              /* the broadcast is a stride-0 load */
  free(buf);
  cg_check_graph(g, (cg_range){-2, 2}, "fused");
  pc_graph_free(g);
}

static int count_lines_starting(const char *buf, const char *prefix) {
  int n = 0;
  for (const char *l = buf; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) n += !strncmp(l, prefix, strlen(prefix));
  return n;
}

/* attention's head split (slice, reshape that splits a dim, transpose, scale) is one loop kernel,
 * and so is a transpose stored through a reshape that merges dims (looped over the operand) */
PC_TEST(codegen_reshape_split_and_merge_fuse) {
  pc_graph *g = pc_graph_new();
  pc_value *qkv = pc_input_add(g, "qkv", cg_ty(PC_f32, 2, (int64_t[]){7, 24}));
  int n0 = g->n_nodes;
  pc_value *q = pc_slice(g, qkv, (int64_t[]){0, 8}, (int64_t[]){7, 16}, (int64_t[]){1, 1});
  pc_value *heads = pc_reshape(g, q, 3, (int64_t[]){7, 2, 4});
  pc_value *t = pc_transpose(g, heads, (int64_t[]){1, 0, 2});
  pc_value *scaled = pc_div(g, t, pc_broadcast_to(g, pc_scalar(g, PC_f32, 2), 3, (int64_t[]){2, 7, 4}));
  cg_group_from(g, n0, 0);
  pc_value *e = pc_exp(g, scaled); /* materializes the scaled heads: the group's result */
  cg_group_from(g, g->n_nodes - 1, 1);
  n0 = g->n_nodes;
  pc_value *back = pc_reshape(g, pc_transpose(g, e, (int64_t[]){1, 0, 2}), 2, (int64_t[]){7, 8});
  cg_group_from(g, n0, 2);
  pc_output_add(g, back);
  char *buf = pc_test_kernels_text(g);
  CHECK_INT(count_lines_starting(buf, "kernel "), 3); /* one per group, no copy in between */
  CHECK_CONTAINS(buf, "= div(b");               /* the slice and split reshape are the load's map */
  free(buf);
  cg_check_graph(g, (cg_range){-2, 2}, "reshapes");
  pc_graph_free(g);
}

/* loops every access walks contiguously become one, so 14x14 planes fill whole vectors: a per-channel
 * scale collapses the plane, a global average pool's reduced axes too; a transpose keeps its loops */
PC_TEST(codegen_collapses_contiguous_loops) {
  pc_graph *g = pc_graph_new();
  int64_t d[3] = {4, 14, 14};
  pc_value *x = pc_input_add(g, "x", cg_ty(PC_f32, 3, d)), *c = pc_input_add(g, "c", cg_ty(PC_f32, 1, d));
  int n0 = g->n_nodes;
  pc_value *y = pc_mul(g, x, pc_broadcast_in_dim(g, c, 3, d, (int64_t[]){0}));
  cg_group_from(g, n0, 0);
  pc_output_add(g, y);
  pc_output_add(g, pc_reduce(g, PC_OP_reduce_sum, x, 2, (int64_t[]){1, 2}));
  pc_output_add(g, pc_transpose(g, x, (int64_t[]){0, 2, 1}));
  char *buf = pc_test_kernels_text(g);
  CHECK_CONTAINS(buf, "loops(i0<4, i1<196)\n  b2[0 +196*i0 +1*i1] = mul(");
  CHECK_CONTAINS(buf, "loops(i0<4, i1<196 reduce)");
  CHECK_CONTAINS(buf, "loops(i0<4, i1<14, i2<14)");
  free(buf);
  cg_check_graph(g, (cg_range){-9, 9}, "collapsed");
  pc_graph_free(g);
}

/* a chain of max (a MaxPool window) is rebalanced into a tree: max(max(a, b), max(c, d)); a NaN in
 * any operand still wins, else the largest does */
PC_TEST(codegen_max_chain_balanced) {
  pc_graph *g = pc_graph_new();
  int64_t d[1] = {40};
  pc_value *x[5];
  for (int i = 0; i < 5; i++) {
    char name[16];
    snprintf(name, sizeof name, "x%d", i);
    x[i] = pc_input_add(g, name, cg_ty(PC_f32, 1, d));
  }
  pc_value *m = x[0];
  int n0 = g->n_nodes;
  for (int i = 1; i < 5; i++) m = pc_max(g, m, x[i]);
  cg_group_from(g, n0, 0);
  pc_output_add(g, m);
  char *buf = pc_test_kernels_text(g);
  CHECK_CONTAINS(buf, "= max(max(b0[0 +1*i0], b1[0 +1*i0]), max(b2[0 +1*i0], max(b3[0 +1*i0], b4[0 +1*i0])))");
  free(buf);
  pc_tensor in[5], out[1];
  for (int i = 0; i < 5; i++) in[i] = cg_make_input(g->inputs[i], (cg_range){-3, 3});
  for (int i = 0; i < 5; i++) ((float *)in[i].data)[3 + 7 * i] = NAN; /* a NaN in each position of the chain */
  ((float *)in[4].data)[30] = INFINITY, ((float *)in[0].data)[31] = -INFINITY;
  if (cg_run_compiled(g, in, out, "max chain")) {
    const float *y = out[0].data;
    for (int e = 0; e < 40; e++) {
      float want = -INFINITY;
      int nan = 0;
      for (int i = 0; i < 5; i++) {
        float v = ((float *)in[i].data)[e];
        nan |= isnan(v);
        if (v > want) want = v;
      }
      CHECK_MSG(nan ? isnan(y[e]) : y[e] == want, "e=%d: %g, want %g", e, y[e], nan ? NAN : want);
    }
    free(out[0].data);
  }
  for (int i = 0; i < 5; i++) free(in[i].data);
  pc_graph_free(g);
}

/* two stores of one kernel reading prefixes of one max chain (a MaxPool's backward: a mask per tap, each reading
 * the window's max over the taps before it) keep the chain as written, so the kernel computes the prefixes once;
 * balanced apart, each store would hold a tree of its own */
PC_TEST(codegen_max_chain_shared_by_stores_kept) {
  pc_graph *g = pc_graph_new();
  pc_value *x[5];
  for (int i = 0; i < 5; i++) {
    char name[16];
    snprintf(name, sizeof name, "x%d", i);
    x[i] = pc_input_add(g, name, cg_ty(PC_f32, 1, (int64_t[]){40}));
  }
  int n0 = g->n_nodes;
  pc_value *m3 = pc_max(g, pc_max(g, x[0], x[1]), x[2]), *m4 = pc_max(g, m3, x[3]);
  pc_output_add(g, pc_gt(g, m3, x[3]));
  pc_output_add(g, pc_gt(g, m4, x[4]));
  cg_group_from(g, n0, 0);
  char *buf = pc_test_kernels_text(g);
  CHECK_CONTAINS(buf, "= gt(max(max(b0[0 +1*i0], b1[0 +1*i0]), b2[0 +1*i0]), b3[0 +1*i0])");
  CHECK_CONTAINS(buf, "= gt(max(max(max(b0[0 +1*i0], b1[0 +1*i0]), b2[0 +1*i0]), b3[0 +1*i0]), b4[0 +1*i0])");
  free(buf);
  cg_check_graph(g, (cg_range){-3, 3}, "max chain shared by two stores");
  pc_graph_free(g);
}

/* a pad without interior padding fills only the frame around the copied box, never the whole
 * result first: here the row above, the column before and the two after */
PC_TEST(codegen_pad_fills_only_the_frame) {
  pc_graph *g = pc_graph_new();
  pc_value *x = pc_input_add(g, "x", cg_ty(PC_f32, 3, (int64_t[]){2, 5, 6}));
  pc_attr pad[4] = {pc_a_ints("low", (int64_t[]){0, 1, 1}, 3), pc_a_ints("high", (int64_t[]){0, 0, 2}, 3),
                    pc_a_ints("interior", (int64_t[]){0, 0, 0}, 3), pc_a_float("value", -INFINITY)};
  pc_output_add(g, pc_build(g, PC_OP_pad, &x, 1, pad, 4));
  char *buf = pc_test_kernels_text(g);
  CHECK_CONTAINS(buf, "loops(i0<2, i1<9)\n  b1[0 +54*i0 +1*i1] = -inf");           /* row 0 */
  CHECK_CONTAINS(buf, "loops(i0<2, i1<5)\n  b1[9 +54*i0 +9*i1] = -inf");           /* column 0 */
  CHECK_CONTAINS(buf, "loops(i0<2, i1<5, i2<2)\n  b1[16 +54*i0 +9*i1 +1*i2] = -inf"); /* columns 7, 8 */
  CHECK_MSG(!strstr(buf, "i1<6, i2<9)"), "the whole result is filled:\n%s", buf);
  free(buf);
  cg_check_graph(g, (cg_range){-9, 9}, "pad frame");
  pc_graph_free(g);
}

PC_TEST(codegen_parallel_loops) {
  pc_graph *g = pc_graph_new();
  int64_t d[3] = {1, 513, 301};
  pc_value *x = pc_input_add(g, "x", cg_ty(PC_f32, 3, d)), *y = pc_input_add(g, "y", cg_ty(PC_f32, 3, d));
  pc_value *z = pc_add(g, pc_exp(g, x), y);
  pc_output_add(g, z);
  pc_output_add(g, pc_reduce(g, PC_OP_reduce_sum, z, 1, (int64_t[]){2}));
  pc_output_add(g, pc_reduce(g, PC_OP_reduce_max, z, 2, (int64_t[]){0, 1}));
  pc_attr a[2] = {pc_a_int("axis", 1), pc_a_int("last", 0)};
  pc_output_add(g, pc_build(g, PC_OP_argmax, &z, 1, a, 2));
  cg_check_graph(g, (cg_range){-2, 2}, "parallel");
  pc_graph_free(g);
}

PC_TEST(codegen_gather_reads_broadcast_in_place) {
  pc_graph *g = pc_graph_new();
  pc_value *tab = pc_input_add(g, "tab", cg_ty(PC_f32, 2, (int64_t[]){10, 4}));
  int64_t idx[6] = {3, 9, 0, 0, 7, 1};
  pc_value *ix = pc_const(g, cg_ty(PC_i64, 2, (int64_t[]){2, 3}), idx);
  pc_value *ib = pc_broadcast_in_dim(g, ix, 3, (int64_t[]){2, 3, 4}, (int64_t[]){0, 1});
  int n0 = g->n_nodes;
  pc_value *tb = pc_broadcast_in_dim(g, tab, 3, (int64_t[]){10, 3, 4}, (int64_t[]){0, 2});
  pc_attr ga = pc_a_int("axis", 0);
  pc_value *out = pc_build(g, PC_OP_gather, (pc_value *[]){tb, ib}, 2, &ga, 1);
  cg_group_from(g, n0, 0);
  pc_output_add(g, out);
  cg_listing_has_then_run(g, "primc_k_gather_strided(", (cg_range){-3, 3}, "gather of a broadcast");
}

/* Each materialized result is stored by one kernel: no two stores anywhere in the program write the same buffer
 * through the same index map (a fused group's pointwise results were stored again at every later flush: YOLO's
 * SPP pools were recomputed in the next pool's kernel and after the concat). Pad kernels write one buffer in
 * pieces, through different maps, and pass. */
PC_TEST(codegen_no_result_stored_twice) {
  static const char *const models[] = {"tests/data/onnx_edge/maxpool_spp_5_9_13/model.onnx",
                                       "models/yolo_tiny/model.onnx"};
  for (size_t m = 0; m < sizeof models / sizeof *models; m++) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", pc_test_srcdir(), models[m]);
    pc_graph *g = pc_onnx_load(path, NULL);
    if (!CHECK_MSG(g && g->status == PC_OK, "%s: %s", models[m], g ? pc_error(g) : "out of memory")) {
      pc_graph_free(g);
      continue;
    }
    pc_pipeline_run(g, &(pc_pipeline_opts){.opt_level = 2});
    kir_program p;
    int twice = 0, stores = 0;
    if (CHECK(kir_build(g, &p) == PC_OK))
      for (int a = 0; a < p.n_kernels; a++)
        for (int sa = 0; p.kernels[a].kind == KK_LOOP && sa < p.kernels[a].n_stores; sa++, stores++)
          for (int b = a + 1; b < p.n_kernels; b++)
            for (int sb = 0; p.kernels[b].kind == KK_LOOP && sb < p.kernels[b].n_stores; sb++) {
              const kir_store *x = &p.kernels[a].stores[sa], *y = &p.kernels[b].stores[sb];
              if (x->buf == y->buf && !memcmp(&x->map, &y->map, sizeof x->map))
                CHECK_MSG(twice++ < 0, "%s: kernels %d and %d both store buffer %d", models[m], a, b, x->buf);
            }
    CHECK_MSG(stores > 10 && !twice, "%s: %d stores, %d twice", models[m], stores, twice);
    pc_graph_free(g);
  }
}

/* A max pool over a -inf padded copy that the backward reads too (a training step's pool: its gradient scatters to
 * each window's maximum, found in that copy) keeps the copy and becomes a primc_k_maxpool call reading it as the
 * map, its frame as the padding (it stayed a loop kernel, 3.4 ms of ResNet-18's b8 step against 1.2) */
PC_TEST(codegen_max_pool_call_over_a_copy_the_backward_reads) {
  pc_graph *g = pc_graph_new();
  pc_value *x = pc_input_add(g, "x", cg_ty(PC_f32, 4, (int64_t[]){2, 3, 12, 12}));
  pc_attr pad[4] = {pc_a_ints("low", (int64_t[]){0, 0, 1, 1}, 4), pc_a_ints("high", (int64_t[]){0, 0, 1, 1}, 4),
                    pc_a_ints("interior", (int64_t[]){0, 0, 0, 0}, 4), pc_a_float("value", -INFINITY)};
  pc_value *xp = pc_build(g, PC_OP_pad, &x, 1, pad, 4), *y = NULL;
  for (int t = 0; t < 9; t++) {
    int64_t a = t / 3, b = t % 3;
    pc_value *s = pc_slice(g, xp, (int64_t[]){0, 0, a, b}, (int64_t[]){2, 3, a + 11, b + 11}, (int64_t[]){1, 1, 2, 2});
    y = y ? pc_build(g, PC_OP_max, (pc_value *[]){y, s}, 2, NULL, 0) : s;
  }
  pc_output_add(g, y);
  if (!CHECK_MSG(pc_grad(g, NULL) == PC_OK && g->n_outputs == 2 &&
                     pc_pipeline_run(g, &(pc_pipeline_opts){.opt_level = 2}) == PC_OK,
                 "%s", pc_error(g)))
    return pc_graph_free(g);
  cg_listing_has_then_run(g, "primc_k_maxpool(", (cg_range){-3, 3}, "pool and its gradient");
}

PC_TEST(codegen_kernel_listing_names_origin) {
  pc_graph *g = pc_graph_new();
  pc_value *x = pc_input_add(g, "x", cg_ty(PC_f32, 2, (int64_t[]){2, 3}));
  pc_set_origin(g, "Relu \"act1\"");
  pc_output_add(g, pc_max(g, x, pc_broadcast_to(g, pc_scalar(g, PC_f32, 0), 2, (int64_t[]){2, 3})));
  char *buf = pc_test_kernels_text(g);
  CHECK_CONTAINS(buf, "loops(i0<6)"); /* [2, 3] walked contiguously: one loop */
  CHECK_CONTAINS(buf, "max(");
  CHECK_CONTAINS(buf, "Relu \"act1\"");
  free(buf);
  pc_graph_free(g);
}
