/* tests/unit/test_passes.c: the passes: IR text tests (tests/ir/passes), fusion decisions, memory plans, folding. */
#include "passes/passes.h"
#include "tests/test.h"
#include "tests/unit/helpers.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>

/* ---------------------------------------------------------------- IR text tests */

typedef pc_status (*pass_fn)(pc_graph *g);
static const struct {
  const char *name;
  pass_fn fn;
} pass_table[] = {
#define PC_PASS(name, desc) {#name, pc_pass_##name},
#include "passes/passes.def"
#undef PC_PASS
};

static pass_fn pass_named(const char *name, size_t len) {
  for (size_t i = 0; i < sizeof pass_table / sizeof *pass_table; i++)
    if (strlen(pass_table[i].name) == len && strncmp(pass_table[i].name, name, len) == 0) return pass_table[i].fn;
  return NULL;
}

/* text without '#' comment lines and trailing blanks on each line */
static char *strip(const char *s) {
  char *out = malloc(strlen(s) + 2), *o = out;
  while (*s) {
    const char *e = strchr(s, '\n');
    size_t n = e ? (size_t)(e - s) : strlen(s);
    if (*s != '#') {
      while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\r')) n--;
      memcpy(o, s, n);
      o += n;
      *o++ = '\n';
    }
    s += e ? n + (size_t)(e - s - (ptrdiff_t)n) + 1 : n;
    if (!e) break;
  }
  *o = 0;
  return out;
}

/* "# RUN: a,b" then the input graph, "# EXPECT:" then the printed graph after the passes */
static void run_ir_test(const char *path) {
  char *text = pc_test_slurp(path, NULL);
  if (!CHECK_MSG(text != NULL, "cannot read %s", path)) return;
  const char *run = strstr(text, "# RUN:"), *exp = strstr(text, "# EXPECT:");
  if (!CHECK_MSG(run && exp, "%s: needs '# RUN:' and '# EXPECT:'", path)) {
    free(text);
    return;
  }
  pc_graph *g = pc_graph_parse(text, (size_t)(exp - text), path, NULL);
  CHECK_MSG(g && g->status == PC_OK, "%s: %s", path, pc_error(g));
  const char *p = run + 6;
  while (*p == ' ') p++;
  while (g && g->status == PC_OK && *p && *p != '\n') {
    size_t n = strcspn(p, ",\n ");
    pass_fn fn = pass_named(p, n);
    if (!CHECK_MSG(fn != NULL, "%s: no pass %.*s", path, (int)n, p)) break;
    CHECK_MSG(fn(g) == PC_OK, "%s: %s", path, pc_error(g));
    CHECK_MSG(pc_verify(g) == PC_OK, "%s: after %.*s: %s", path, (int)n, p, pc_error(g));
    p += n;
    while (*p == ',' || *p == ' ') p++;
  }
  char *got = g ? pc_graph_to_string(g) : NULL;
  char *want = strip(strchr(exp, '\n') ? strchr(exp, '\n') + 1 : "");
  char *got_s = strip(got ? got : "");
  CHECK_MSG(strcmp(got_s, want) == 0, "%s: expected\n%s\ngot\n%s", path, want, got_s);
  free(got_s), free(want), free(got), free(text);
  pc_graph_free(g);
}

PC_TEST(passes_ir_text) {
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/tests/ir/passes", pc_test_srcdir());
  DIR *d = opendir(dir);
  if (!CHECK_MSG(d != NULL, "cannot open %s", dir)) return;
  int count = 0;
  for (struct dirent *e; (e = readdir(d));) {
    size_t n = strlen(e->d_name);
    if (n < 5 || strcmp(e->d_name + n - 4, ".txt")) continue;
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    run_ir_test(path);
    count++;
  }
  closedir(d);
  CHECK(count >= 5);
}

/* ---------------------------------------------------------------- builders */

static pc_value *row_bcast(pc_graph *g, pc_value *r, const pc_value *like) {
  int64_t dims[1] = {0};
  return pc_broadcast_in_dim(g, r, like->type.rank, like->type.dims, dims);
}

/* softmax over the last axis of x [R,C], as the ONNX frontend decomposes it */
static pc_value *softmax(pc_graph *g, pc_value *x) {
  int64_t ax[1] = {1};
  pc_value *m = pc_reduce(g, PC_OP_reduce_max, x, 1, ax);
  pc_value *e = pc_exp(g, pc_sub(g, x, row_bcast(g, m, x)));
  pc_value *s = pc_reduce(g, PC_OP_reduce_sum, e, 1, ax);
  return pc_div(g, e, row_bcast(g, s, x));
}

/* every kernel node of g in one group */
static int one_group(const pc_graph *g) {
  int grp = -2;
  for (int i = 0; i < g->n_nodes; i++) {
    const pc_node *n = g->nodes[i];
    if (n->op == PC_OP_constant) continue;
    if (grp == -2) grp = n->group;
    if (n->group != grp || grp < 0) return 0;
  }
  return g->n_groups == 1;
}

PC_TEST(fuse_softmax_one_group) {
  pc_graph *g = pc_graph_new();
  int64_t d[2] = {4, 8};
  pc_value *x = pc_input_add(g, "x", pc_type_make(PC_f32, 2, d));
  pc_output_add(g, softmax(g, x));
  CHECK(pc_pass_fuse(g) == PC_OK);
  CHECK(one_group(g));
  CHECK(pc_pass_memplan(g) == PC_OK);
  CHECK_INT(g->outputs[0]->storage, PC_STORE_OUTPUT);
  pc_graph_free(g);
}

PC_TEST(fuse_layernorm_one_group) {
  pc_graph *g = pc_graph_new();
  int64_t d[2] = {4, 16}, ax[1] = {1};
  pc_value *x = pc_input_add(g, "x", pc_type_make(PC_f32, 2, d));
  pc_value *inv = pc_full(g, PC_f32, 1.0 / 16, 1, d);
  pc_value *mean = pc_mul(g, pc_reduce(g, PC_OP_reduce_sum, x, 1, ax), inv);
  pc_value *c = pc_sub(g, x, row_bcast(g, mean, x));
  pc_value *var = pc_mul(g, pc_reduce(g, PC_OP_reduce_sum, pc_mul(g, c, c), 1, ax), pc_full(g, PC_f32, 1.0 / 16, 1, d));
  pc_value *r = pc_rsqrt(g, pc_add(g, var, pc_full(g, PC_f32, 1e-5, 1, d)));
  pc_output_add(g, pc_mul(g, c, row_bcast(g, r, x)));
  CHECK(g->status == PC_OK);
  CHECK(pc_pass_fuse(g) == PC_OK);
  CHECK(one_group(g));
  pc_graph_free(g);
}

/* conv(x, w) + bias, relu: the contraction with its epilogue */
static pc_graph *conv_bias_relu(void) {
  pc_graph *g = pc_graph_new();
  int64_t xd[4] = {1, 3, 8, 8}, wd[4] = {4, 3, 3, 3}, bd[1] = {4}, one2[2] = {1, 1};
  pc_value *x = pc_input_add(g, "x", pc_type_make(PC_f32, 4, xd));
  pc_value *w = pc_const(g, pc_type_make(PC_f32, 4, wd), NULL);
  pc_value *b = pc_const(g, pc_type_make(PC_f32, 1, bd), NULL);
  pc_value *in[2] = {x, w};
  pc_attr a[6] = {pc_a_ints("stride", one2, 2),   pc_a_ints("pad_lo", one2, 2),       pc_a_ints("pad_hi", one2, 2),
                  pc_a_ints("dilation", one2, 2), pc_a_ints("lhs_dilation", one2, 2), pc_a_int("groups", 1)};
  pc_value *y = pc_build(g, PC_OP_conv, in, 2, a, 6);
  int64_t dims[1] = {1};
  pc_value *yb = y ? pc_add(g, y, pc_broadcast_in_dim(g, b, 4, y->type.dims, dims)) : NULL;
  pc_value *r = yb ? pc_max(g, yb, pc_full_like(g, 0.0, yb)) : NULL;
  pc_output_add(g, r);
  return g;
}

PC_TEST(fuse_conv_bias_relu_one_group) {
  pc_graph *g = conv_bias_relu();
  CHECK_MSG(g->status == PC_OK, "%s", pc_error(g));
  CHECK(pc_pass_fuse(g) == PC_OK);
  CHECK(one_group(g));
  pc_graph_free(g);
}

/* a 1x1 conv of C -> O channels, stride 1, no padding, then ReLU, or a k x k depthwise conv at stride s */
static pc_value *conv_relu(pc_graph *g, pc_value *x, int64_t o, int64_t k, int64_t s, int64_t groups) {
  int64_t wd[4] = {o, x->type.dims[1] / groups, k, k}, one2[2] = {1, 1}, st[2] = {s, s}, pd[2] = {k / 2, k / 2};
  pc_value *in[2] = {x, pc_const(g, pc_type_make(PC_f32, 4, wd), NULL)};
  pc_attr a[6] = {pc_a_ints("stride", st, 2),     pc_a_ints("pad_lo", pd, 2),         pc_a_ints("pad_hi", pd, 2),
                  pc_a_ints("dilation", one2, 2), pc_a_ints("lhs_dilation", one2, 2), pc_a_int("groups", groups)};
  pc_value *y = pc_build(g, PC_OP_conv, in, 2, a, 6);
  return y ? pc_max(g, y, pc_full_like(g, 0.0, y)) : NULL;
}

/* A conv whose result only a depthwise conv reads may run with it as one call, reading its input until the
 * depthwise conv's results are written: the plan keeps the two apart (it reused the input's memory for them,
 * and the fused call then refused to run: MnasNet's first block ran as two convs, 0.72 vs 0.36 ms) */
PC_TEST(memplan_conv_depthwise_pair_apart) {
  pc_graph *g = pc_graph_new();
  pc_value *x = pc_input_add(g, "x", pc_type_make(PC_f32, 4, (int64_t[]){1, 16, 32, 32}));
  pc_value *a = conv_relu(g, x, 16, 1, 1, 1);     /* the pair's input, in the workspace */
  pc_value *mid = conv_relu(g, a, 48, 1, 1, 1);   /* widening 1x1 */
  pc_value *y = conv_relu(g, mid, 48, 3, 2, 48);  /* depthwise 3x3/2 */
  pc_output_add(g, conv_relu(g, y, 16, 1, 1, 1));
  CHECK_MSG(g->status == PC_OK, "%s", pc_error(g));
  CHECK(pc_pass_fuse(g) == PC_OK && pc_pass_memplan(g) == PC_OK);
  CHECK_INT(a->storage, PC_STORE_WORKSPACE);
  CHECK_INT(y->storage, PC_STORE_WORKSPACE);
  int64_t sa = 16 * 32 * 32 * 4, sy = 48 * 16 * 16 * 4;
  CHECK_MSG(a->offset + sa <= y->offset || y->offset + sy <= a->offset, "input at %lld, depthwise result at %lld",
            (long long)a->offset, (long long)y->offset);
  pc_graph_free(g);
}

/* pc_explain_fusion's lines include want */
static void check_explains(const pc_graph *g, const char *want) {
  char *why = pc_explain_fusion(g);
  CHECK_CONTAINS(why, want);
  free(why);
}

/* a scalar computed in one kernel and broadcast for another is read there as a scalar, not stored at the
 * broadcast's size (Adam's bias corrections in a training step) */
PC_TEST(fuse_computed_scalar_broadcast_joins_reader) {
  pc_graph *g = pc_graph_new();
  int64_t d[2] = {64, 64}, v[1] = {64}, all[1] = {0}, c1[1] = {1}, c0[1] = {0};
  pc_value *x = pc_input_add(g, "x", pc_type_make(PC_f32, 1, v));
  pc_value *a = pc_input_add(g, "a", pc_type_make(PC_f32, 2, d));
  pc_value *t = pc_sqrt(g, pc_reduce(g, PC_OP_reduce_sum, x, 1, all));
  pc_value *b = pc_broadcast_in_dim(g, t, 2, d, NULL);
  pc_output_add(g, pc_add(g, pc_dot_general(g, a, a, 1, c1, c0, 0, NULL, NULL), b));
  pc_output_add(g, t);
  CHECK_MSG(g->status == PC_OK, "%s", pc_error(g));
  CHECK(pc_pass_fuse(g) == PC_OK && pc_pass_memplan(g) == PC_OK);
  CHECK(b->producer->group != t->producer->group);
  CHECK_INT(b->storage, PC_STORE_FUSED);
  CHECK_MSG(g->workspace_size < 64 * 64 * 4 * 2, "workspace %lld bytes", (long long)g->workspace_size);
  check_explains(g, "a computed scalar is broadcast in the kernels reading it");
  pc_graph_free(g);
}

/* a gradient's prims stay out of the forward's kernels, so they run when the backward needs them (a conv weight
 * gradient's columns of a max pool's result: 58 MB held from the pool to the end of ResNet-18's step); a forward
 * copy still fuses */
PC_TEST(fuse_backward_prims_apart) {
  pc_graph *g = pc_graph_new();
  int64_t d[2] = {16, 16}, perm[2] = {1, 0}, c1[1] = {1}, c0[1] = {0};
  pc_value *x = pc_input_add(g, "x", pc_type_make(PC_f32, 2, d));
  pc_value *p = pc_exp(g, x);
  pc_output_add(g, pc_dot_general(g, p, x, 1, c1, c0, 0, NULL, NULL));
  pc_value *fwd = pc_transpose(g, p, perm);
  pc_output_add(g, pc_add(g, fwd, x));
  g->backward = 1;
  pc_value *t = pc_transpose(g, p, perm), *e = pc_neg(g, p);
  g->backward = 0;
  pc_output_add(g, pc_add(g, t, x));
  pc_output_add(g, e);
  CHECK_MSG(g->status == PC_OK, "%s", pc_error(g));
  CHECK(pc_pass_fuse(g) == PC_OK);
  CHECK(t->producer->group != p->producer->group);
  CHECK(fwd->producer->group == p->producer->group);
  CHECK(e->producer->group != p->producer->group);
  check_explains(g, "a gradient's prim runs in the backward, not in a forward kernel");
  pc_graph_free(g);
}

/* text parsed twice, each differentiated with respect to %x: *g for the pass, *ref as it was; 0 (both freed) when
 * either fails */
static int remat_graphs(const char *text, pc_graph **g, pc_graph **ref) {
  const char *wrt[1] = {"x"};
  pc_grad_opts o = {wrt, 1};
  *g = pc_graph_parse(text, strlen(text), "remat", NULL), *ref = pc_graph_parse(text, strlen(text), "remat", NULL);
  if (CHECK(*g && *ref && pc_grad(*g, &o) == PC_OK && pc_grad(*ref, &o) == PC_OK)) return 1;
  pc_graph_free(*g), pc_graph_free(*ref);
  return 0;
}

/* g and ref (inputs x [4, 8], w [8, 8] and two [4, 8] more, n_out outputs, the gradient last) on the same pattern
 * inputs in the interpreter: the gradients bit for bit the same; frees both */
static void remat_same_grad(pc_graph *g, pc_graph *ref, int n_out) {
  int64_t xd[2] = {4, 8}, wd[2] = {8, 8};
  pc_tensor ins[4] = {pc_test_pattern_f32(2, xd), pc_test_pattern_f32(2, wd), pc_test_pattern_f32(2, xd),
                      pc_test_pattern_f32(2, xd)}, a[3], b[3];
  memset(a, 0, sizeof a), memset(b, 0, sizeof b);
  if (CHECK(pc_interp(g, ins, 4, a, n_out) == PC_OK && pc_interp(ref, ins, 4, b, n_out) == PC_OK))
    CHECK(memcmp(a[n_out - 1].data, b[n_out - 1].data, 32 * sizeof(float)) == 0);
  for (int i = 0; i < 4; i++) free(ins[i].data);
  for (int i = 0; i < n_out; i++) pc_tensor_free(&a[i]), pc_tensor_free(&b[i]);
  pc_graph_free(g), pc_graph_free(ref);
}

/* the backward recomputes a forward inline chain from the values stored anyway (GELU's erf term from the
 * GEMM's result), so the forward stores none of it; a value a contraction reads is read as it is, and the
 * gradients are the same as the interpreter's before the pass */
PC_TEST(remat_backward_recomputes_inline_chain) {
  const char *text = "graph(%x : f32[4,8], %w : f32[8,8]):\n"
                     "  %d : f32[4,8] = dot_general(%x, %w, lhs_contract=[1], rhs_contract=[0], lhs_batch=[], rhs_batch=[])\n"
                     "  %e : f32[4,8] = erf(%d)\n"
                     "  %t : f32[4,8] = tanh(%d)\n"
                     "  %y : f32[4,8] = mul(%e, %t)\n"
                     "  %z : f32[4,8] = dot_general(%t, %w, lhs_contract=[1], rhs_contract=[0], lhs_batch=[], rhs_batch=[])\n"
                     "  return (%y, %z)\n";
  pc_graph *g, *ref;
  if (!remat_graphs(text, &g, &ref)) return;
  const pc_value *e = NULL, *t = NULL;
  for (int i = 0; i < g->n_nodes; i++) {
    if (g->nodes[i]->op == PC_OP_erf && !g->nodes[i]->backward) e = g->nodes[i]->out[0];
    if (g->nodes[i]->op == PC_OP_tanh && !g->nodes[i]->backward) t = g->nodes[i]->out[0];
  }
  CHECK(pc_pass_remat(g) == PC_OK && pc_verify(g) == PC_OK);
  CHECK_MSG(g->remat_prims >= 1, "%d prims", g->remat_prims);
  int e_backward = 0, t_backward = 0, erf_copies = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    const pc_node *n = g->nodes[i];
    for (int k = 0; n->backward && k < n->n_in; k++) e_backward += n->in[k] == e, t_backward += n->in[k] == t;
    erf_copies += n->op == PC_OP_erf && n->backward;
  }
  CHECK_INT(e_backward, 0); /* the gradient reads its own erf */
  CHECK_INT(erf_copies, 1);
  CHECK(t_backward > 0);     /* tanh's result, stored for the second product, is read as it is */
  remat_same_grad(g, ref, 3);
}

/* a value that a reduction and another forward prim read (a layer norm's input, the residual sum after a
 * projection) is stored by the forward anyway: the backward reads it rather than recomputing it from the dot's raw
 * result, which then would have to be stored too and kept the adds out of the dot's epilogue */
PC_TEST(remat_reads_a_value_a_reduction_reads) {
  const char *text = "graph(%x : f32[4,8], %w : f32[8,8], %r : f32[4,8]):\n"
                     "  %d : f32[4,8] = dot_general(%x, %w, lhs_contract=[1], rhs_contract=[0], lhs_batch=[], rhs_batch=[])\n"
                     "  %s : f32[4,8] = add(%d, %r)\n"
                     "  %m : f32[4] = reduce_sum(%s, axes=[1])\n"
                     "  %mb : f32[4,8] = broadcast_in_dim(%m, shape=[4,8], dims=[0])\n"
                     "  %c : f32[4,8] = sub(%s, %mb)\n"
                     "  %y : f32[4,8] = mul(%c, %c)\n"
                     "  return (%y)\n";
  pc_graph *g, *ref;
  if (!remat_graphs(text, &g, &ref)) return;
  const pc_value *sum = NULL;
  for (int i = 0; i < g->n_nodes; i++)
    if (g->nodes[i]->op == PC_OP_add && !g->nodes[i]->backward && g->nodes[i]->in[1]->producer == NULL) sum = g->nodes[i]->out[0];
  CHECK(sum && pc_pass_remat(g) == PC_OK && pc_verify(g) == PC_OK);
  int sum_backward = 0, dot_backward = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    const pc_node *n = g->nodes[i];
    for (int k = 0; n->backward && k < n->n_in; k++) {
      sum_backward += n->in[k] == sum;
      dot_backward += n->in[k]->producer && n->in[k]->producer->op == PC_OP_dot_general && !n->in[k]->producer->backward;
    }
  }
  CHECK_MSG(sum_backward > 0 && dot_backward == 0, "the backward reads the sum %d times, the dot's result %d times",
            sum_backward, dot_backward);
  remat_same_grad(g, ref, 2);
}

/* a value a pad reads is stored for the pad's copy anyway: the backward reads it rather than a recomputed chain
 * (a training step's ReLU before its max pool: recomputed from the conv's raw result, which then had to be stored
 * too, its bias and ReLU were a kernel of their own: 17.2 -> 10.2 ms a step of ResNet-18 b8's conv1) */
PC_TEST(remat_reads_a_value_a_pad_reads) {
  const char *text = "graph(%x : f32[4,8], %w : f32[8,8]):\n"
                     "  %d : f32[4,8] = dot_general(%x, %w, lhs_contract=[1], rhs_contract=[0], lhs_batch=[], rhs_batch=[])\n"
                     "  %t : f32[4,8] = tanh(%d)\n"
                     "  %p : f32[6,10] = pad(%t, low=[1,1], high=[1,1], interior=[0,0], value=0.0)\n"
                     "  return (%p)\n";
  pc_graph *g = pc_graph_parse(text, strlen(text), "remat", NULL);
  const char *wrt[1] = {"x"};
  pc_grad_opts o = {wrt, 1};
  if (!CHECK(g && pc_grad(g, &o) == PC_OK)) return pc_graph_free(g);
  const pc_value *t = NULL;
  for (int i = 0; i < g->n_nodes; i++)
    if (g->nodes[i]->op == PC_OP_tanh && !g->nodes[i]->backward) t = g->nodes[i]->out[0];
  CHECK(t && pc_pass_remat(g) == PC_OK && pc_verify(g) == PC_OK);
  int t_backward = 0, tanh_copies = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    const pc_node *n = g->nodes[i];
    for (int k = 0; n->backward && k < n->n_in; k++) t_backward += n->in[k] == t;
    tanh_copies += n->op == PC_OP_tanh && n->backward;
  }
  CHECK_MSG(t_backward > 0 && tanh_copies == 0, "the backward reads tanh's result %d times, %d copies", t_backward,
            tanh_copies);
  pc_graph_free(g);
}

PC_TEST(fuse_two_consumers_materialized) {
  pc_graph *g = pc_graph_new();
  int64_t d[2] = {4, 4}, c1[1] = {1}, c0[1] = {0};
  pc_value *x = pc_input_add(g, "x", pc_type_make(PC_f32, 2, d));
  pc_value *e = pc_exp(g, x);
  pc_value_set_name(g, e, "e");
  pc_value *m = pc_dot_general(g, e, x, 1, c1, c0, 0, NULL, NULL);
  pc_value *a = pc_add(g, e, pc_full_like(g, 1.0, e));
  pc_output_add(g, pc_add(g, m, a));
  CHECK(pc_pass_fuse(g) == PC_OK);
  CHECK(pc_pass_memplan(g) == PC_OK);
  CHECK(e->producer->group != m->producer->group);
  CHECK_INT(e->storage, PC_STORE_WORKSPACE);
  CHECK(g->workspace_size >= 64);
  char *why = pc_explain_fusion(g);
  CHECK_CONTAINS(why, "%e = exp not fused into");
  CHECK_CONTAINS(why, "dot_general reads its operands from memory");
  free(why);
  /* groups are contiguous and topological */
  for (int i = 1; i < g->n_nodes; i++)
    if (g->nodes[i]->op != PC_OP_constant) CHECK(g->nodes[i]->group >= g->nodes[i - 1]->group);
  pc_graph_free(g);
}

PC_TEST(fuse_reductions_over_other_axes_apart) {
  pc_graph *g = pc_graph_new();
  int64_t d[2] = {4, 6}, a0[1] = {0}, a1[1] = {1};
  pc_value *x = pc_input_add(g, "x", pc_type_make(PC_f32, 2, d));
  pc_value *e = pc_exp(g, x);
  pc_output_add(g, pc_reduce(g, PC_OP_reduce_sum, e, 1, a1));
  pc_output_add(g, pc_reduce(g, PC_OP_reduce_max, e, 1, a0));
  CHECK(pc_pass_fuse(g) == PC_OK);
  CHECK_INT(g->n_groups, 2);
  char *why = pc_explain_fusion(g);
  CHECK_CONTAINS(why, "reduce different spaces");
  free(why);
  pc_graph_free(g);
}

/* ONNX Gather of an embedding table: the table's broadcast over the index dims joins the
 * gather's kernel and is never stored (it would be vocabulary x sequence x width floats) */
PC_TEST(fuse_gather_table_read_in_place) {
  pc_graph *g = pc_graph_new();
  pc_value *tab = pc_const(g, pc_type_make(PC_f32, 2, (int64_t[]){1000, 64}), NULL);
  pc_value *ix = pc_input_add(g, "ids", pc_type_make(PC_i64, 2, (int64_t[]){1, 32}));
  pc_value *ib = pc_broadcast_in_dim(g, ix, 3, (int64_t[]){1, 32, 64}, (int64_t[]){0, 1});
  pc_value *tb = pc_broadcast_in_dim(g, tab, 3, (int64_t[]){1000, 32, 64}, (int64_t[]){0, 2});
  pc_attr ga = pc_a_int("axis", 0);
  pc_value *out = pc_build(g, PC_OP_gather, (pc_value *[]){tb, ib}, 2, &ga, 1);
  pc_output_add(g, out);
  CHECK(pc_pass_fuse(g) == PC_OK && pc_pass_memplan(g) == PC_OK);
  CHECK(tb->producer->group == out->producer->group);
  CHECK_INT(tb->storage, PC_STORE_FUSED);
  CHECK(g->workspace_size < 1000 * 64 * 4);
  pc_graph_free(g);
}

PC_TEST(unfuse_one_group_per_prim) {
  pc_graph *g = conv_bias_relu();
  CHECK(pc_pass_unfuse(g) == PC_OK);
  int kernels = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    const pc_node *n = g->nodes[i];
    if (n->op == PC_OP_constant) CHECK_INT(n->group, -1);
    else {
      CHECK_INT(n->group, kernels);
      kernels++;
    }
  }
  CHECK_INT(g->n_groups, kernels);
  CHECK(pc_pass_memplan(g) == PC_OK);
  for (int i = 0; i < g->n_nodes; i++)
    if (g->nodes[i]->op == PC_OP_constant) CHECK_INT(g->nodes[i]->out[0]->storage, PC_STORE_CONST);
  pc_graph_free(g);
}

/* ---------------------------------------------------------------- memory plan property */

static uint32_t rng_next(uint64_t *s) {
  *s = *s * 6364136223846793005u + 1442695040888963407u;
  return (uint32_t)(*s >> 33);
}

/* a random graph of square f32 tensors: elementwise chains, row reductions, transposes, dots, cumsums */
static pc_graph *random_graph(uint64_t seed) {
  pc_graph *g = pc_graph_new();
  uint64_t s = seed;
  int64_t n = 2 + rng_next(&s) % 15, d[2] = {n, n}, a1[1] = {1}, c1[1] = {1}, c0[1] = {0}, p10[2] = {1, 0};
  pc_value *pool[64];
  int np = 0;
  pool[np++] = pc_input_add(g, "x", pc_type_make(PC_f32, 2, d));
  pool[np++] = pc_input_add(g, "y", pc_type_make(PC_f32, 2, d));
  for (int i = 0; i < 40 && g->status == PC_OK; i++) {
    pc_value *a = pool[rng_next(&s) % (uint32_t)np], *b = pool[rng_next(&s) % (uint32_t)np], *r = NULL;
    pc_attr ax = pc_a_int("axis", 1);
    pc_attr cs[3] = {ax, pc_a_int("exclusive", 0), pc_a_int("reverse", 0)};
    switch (rng_next(&s) % 7) { /* one kind of step per case */
    case 0: r = pc_exp(g, a); break;
    case 1: r = pc_add(g, a, b); break;
    case 2: r = pc_mul(g, a, pc_neg(g, b)); break;
    case 3: r = row_bcast(g, pc_reduce(g, PC_OP_reduce_sum, a, 1, a1), a); break;
    case 4: r = pc_transpose(g, a, p10); break;
    case 5: r = pc_dot_general(g, a, b, 1, c1, c0, 0, NULL, NULL); break;
    case 6: r = pc_build(g, PC_OP_cumsum, &a, 1, cs, 3); break;
    }
    if (r && np < 64) pool[np++] = r;
  }
  pc_output_add(g, pool[np - 1]);
  pc_output_add(g, pool[np / 2]);
  return g;
}

/* def/last kernel of every value, recomputed here from the groups */
static void live_range(const pc_graph *g, const pc_value *v, int *def, int *last) {
  *def = *last = v->producer ? v->producer->group : -1;
  for (int i = 0; i < g->n_nodes; i++)
    for (int k = 0; k < g->nodes[i]->n_in; k++)
      if (g->nodes[i]->in[k] == v && g->nodes[i]->group > *last) *last = g->nodes[i]->group;
}

/* u may hand its buffer to w in kernel t: u dies there, read by elementwise prims only, and w is elementwise */
static int inplace_pair(const pc_graph *g, const pc_value *u, const pc_value *w, int t) {
  if (!pc_op_is_elementwise(w->producer->op) || w->producer->group != t) return 0;
  for (int i = 0; i < g->n_nodes; i++)
    for (int k = 0; k < g->nodes[i]->n_in; k++)
      if (g->nodes[i]->in[k] == u && g->nodes[i]->group == t && !pc_op_is_elementwise(g->nodes[i]->op)) return 0;
  return 1;
}

static void check_plan(const pc_graph *g, uint64_t seed) {
  int64_t sum = 0;
  for (int i = 0; i < g->n_values; i++) {
    const pc_value *u = g->values[i];
    if (u->storage == PC_STORE_UNPLANNED && u->producer && u->producer->op != PC_OP_constant)
      CHECK_MSG(0, "seed %llu: value %d unplanned", (unsigned long long)seed, u->id);
    if (u->storage != PC_STORE_WORKSPACE) continue;
    int64_t su = pc_type_numel(&u->type) * 4;
    sum += (su + 63) / 64 * 64;
    CHECK_MSG(u->offset % 64 == 0 && u->offset + su <= g->workspace_size, "seed %llu: %%%d at %lld",
              (unsigned long long)seed, u->id, (long long)u->offset);
    int du, lu;
    live_range(g, u, &du, &lu);
    for (int j = i + 1; j < g->n_values; j++) {
      const pc_value *w = g->values[j];
      if (w->storage != PC_STORE_WORKSPACE) continue;
      int64_t sw = pc_type_numel(&w->type) * 4;
      int dw, lw;
      live_range(g, w, &dw, &lw);
      int overlap_t = du <= lw && dw <= lu, overlap_b = u->offset < w->offset + sw && w->offset < u->offset + su;
      /* in place: one dies in the kernel that writes the other, reading it elementwise */
      int same = u->offset == w->offset && su == sw;
      int inplace = same && ((lu == dw && du <= dw && inplace_pair(g, u, w, dw)) || (lw == du && dw <= du && inplace_pair(g, w, u, du)));
      if (overlap_t && overlap_b && !inplace)
        CHECK_MSG(0, "seed %llu: %%%d [%d,%d] and %%%d [%d,%d] share bytes", (unsigned long long)seed, u->id, du, lu,
                  w->id, dw, lw);
    }
  }
  CHECK_MSG(g->workspace_size <= sum, "seed %llu: workspace %lld > sum %lld", (unsigned long long)seed,
            (long long)g->workspace_size, (long long)sum);
}

PC_TEST(memplan_random_graphs_no_overlap) {
  for (uint64_t seed = 1; seed <= 60; seed++) {
    pc_graph *g = random_graph(seed);
    if (!CHECK_MSG(g->status == PC_OK, "seed %llu: %s", (unsigned long long)seed, pc_error(g))) {
      pc_graph_free(g);
      continue;
    }
    pc_status s = seed % 3 == 0 ? pc_pass_unfuse(g) : pc_pass_fuse(g);
    if (s == PC_OK) s = pc_pass_memplan(g);
    if (s == PC_OK) s = pc_verify(g);
    CHECK_MSG(s == PC_OK, "seed %llu: %s", (unsigned long long)seed, pc_error(g));
    check_plan(g, seed);
    pc_graph_free(g);
  }
}

PC_TEST(memplan_storage_classes_and_report) {
  pc_graph *g = pc_graph_new();
  int64_t d[2] = {8, 8};
  pc_value *x = pc_input_add(g, "x", pc_type_make(PC_f32, 2, d));
  pc_value *y = softmax(g, pc_exp(g, x));
  pc_output_add(g, y);
  pc_output_add(g, x); /* an input as output: keeps INPUT, codegen copies it */
  CHECK(pc_pass_fuse(g) == PC_OK && pc_pass_memplan(g) == PC_OK);
  CHECK_INT(x->storage, PC_STORE_INPUT);
  CHECK_INT(y->storage, PC_STORE_OUTPUT);
  int fused = 0, ws = 0;
  for (int i = 0; i < g->n_values; i++) {
    fused += g->values[i]->storage == PC_STORE_FUSED;
    ws += g->values[i]->storage == PC_STORE_WORKSPACE;
  }
  CHECK(fused >= 3); /* the exps, sub and broadcasts stay in registers */
  CHECK_INT(ws, 2);  /* the two row reductions' results */
  CHECK_INT(g->workspace_size, 128); /* both live through the kernel: 32 bytes each, 64-aligned */
  char *rep = pc_memplan_report(g);
  CHECK_CONTAINS(rep, "peak 64 bytes");
  CHECK_CONTAINS(rep, "reduce_max");
  free(rep);
  pc_graph_free(g);
}

/* ---------------------------------------------------------------- folding and the pipeline */

/* y = x * exp(c1 * c2) + reduce_sum(c3) (broadcast): every constant part folds */
static pc_graph *foldable_graph(void) {
  pc_graph *g = pc_graph_new();
  int64_t d[1] = {5}, d2[2] = {3, 5}, a0[1] = {0};
  float c1[5] = {0.1f, -0.7f, 1.3f, 2.0f, -3.5f}, c2[5] = {2, 0.5f, -1, 0.25f, 1};
  float c3[15];
  for (int i = 0; i < 15; i++) c3[i] = (float)(i * i) / 7.0f - 3.0f;
  pc_value *x = pc_input_add(g, "x", pc_type_make(PC_f32, 1, d));
  pc_value *k1 = pc_const(g, pc_type_make(PC_f32, 1, d), c1), *k2 = pc_const(g, pc_type_make(PC_f32, 1, d), c2);
  pc_value *k3 = pc_const(g, pc_type_make(PC_f32, 2, d2), c3);
  pc_value *e = pc_exp(g, pc_mul(g, k1, k2));
  pc_output_add(g, pc_add(g, pc_mul(g, x, e), pc_reduce(g, PC_OP_reduce_sum, k3, 1, a0)));
  return g;
}

PC_TEST(constfold_matches_interpreter) {
  pc_graph *a = foldable_graph(), *b = foldable_graph();
  CHECK(pc_pass_constfold(b) == PC_OK && pc_pass_dce(b) == PC_OK);
  int kernels = 0;
  for (int i = 0; i < b->n_nodes; i++) kernels += b->nodes[i]->op != PC_OP_constant;
  CHECK_INT(kernels, 2); /* mul and add with the input */
  float xs[5] = {1, -2, 0.5f, 3, 0};
  pc_tensor in = {PC_f32, 1, {5}, xs}, oa = {0}, ob = {0};
  CHECK(pc_interp(a, &in, 1, &oa, 1) == PC_OK);
  CHECK(pc_interp(b, &in, 1, &ob, 1) == PC_OK);
  CHECK(oa.data && ob.data && memcmp(oa.data, ob.data, 5 * sizeof(float)) == 0);
  pc_tensor_free(&oa), pc_tensor_free(&ob);
  pc_graph_free(a), pc_graph_free(b);
}

/* an i8 weight of 1100 x 1000 (past the fold size cap) transposed and widened, as a QGemm with transB imports:
 * the transpose is no larger than its operand, so it folds (and the convert after it) and no kernel is left to
 * redo them on every call; a broadcast of a scalar to that size, which grows, does not */
PC_TEST(constfold_large_transpose_of_weight) {
  enum { R = 1100, S = 1000 };
  int8_t *w = malloc(R * S);
  for (int i = 0; i < R * S; i++) w[i] = (int8_t)(i * 7);
  pc_graph *g = pc_graph_new();
  pc_value *wc = pc_const(g, pc_type_make(PC_i8, 2, (int64_t[]){R, S}), w);
  int64_t perm[2] = {1, 0};
  pc_value *t = pc_convert(g, pc_transpose(g, wc, perm), PC_i32);
  pc_value *x = pc_input_add(g, "x", pc_type_make(PC_i32, 2, (int64_t[]){S, R}));
  pc_output_add(g, pc_add(g, x, t));
  float one = 1;
  pc_value *b = pc_broadcast_in_dim(g, pc_const(g, pc_type_make(PC_f32, 0, NULL), &one), 2, (int64_t[]){R, S}, NULL);
  pc_output_add(g, b);
  CHECK(pc_pass_constfold(g) == PC_OK && pc_pass_dce(g) == PC_OK);
  int kept = 0, bcast = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    kept += g->nodes[i]->op == PC_OP_transpose || g->nodes[i]->op == PC_OP_convert_element_type;
    bcast += g->nodes[i]->op == PC_OP_broadcast_in_dim;
  }
  CHECK_INT(kept, 0);
  CHECK_INT(bcast, 1);
  const int32_t *folded = pc_const_data(g->outputs[0]->producer->in[1]);
  CHECK(folded && folded[1] == w[S] && folded[(int64_t)3 * R + 5] == w[(int64_t)5 * S + 3]);
  pc_graph_free(g);
  free(w);
}

/* x [3,4] . W^T with W a constant [5,4] (nn.Linear): simplify stores W as [4,5] once, the
 * result is unchanged (same products, same order) */
static pc_graph *linear_graph(void) {
  pc_graph *g = pc_graph_new();
  float w[20];
  for (int i = 0; i < 20; i++) w[i] = (float)(i % 7) * 0.25f - 0.5f;
  pc_value *x = pc_input_add(g, "x", pc_type_make(PC_f32, 2, (int64_t[]){3, 4}));
  pc_value *wc = pc_const(g, pc_type_make(PC_f32, 2, (int64_t[]){5, 4}), w);
  int64_t one = 1;
  pc_output_add(g, pc_dot_general(g, x, wc, 1, &one, &one, 0, NULL, NULL));
  return g;
}

PC_TEST(simplify_linear_weight_stored_transposed) {
  pc_graph *a = linear_graph(), *b = linear_graph();
  CHECK(pc_pass_simplify(b) == PC_OK && pc_pass_dce(b) == PC_OK && pc_verify(b) == PC_OK);
  const pc_node *d = b->outputs[0]->producer;
  CHECK(d && d->op == PC_OP_dot_general);
  if (d && d->op == PC_OP_dot_general) {
    int n = 0;
    const int64_t *rc = pc_attr_ints(d, "rhs_contract", &n);
    CHECK(n == 1 && rc[0] == 0);
    CHECK(d->in[1]->type.dims[0] == 4 && d->in[1]->type.dims[1] == 5 && pc_const_data(d->in[1]));
  }
  float xs[12];
  for (int i = 0; i < 12; i++) xs[i] = (float)i - 5.5f;
  pc_tensor in = {PC_f32, 2, {3, 4}, xs}, oa = {0}, ob = {0};
  CHECK(pc_interp(a, &in, 1, &oa, 1) == PC_OK && pc_interp(b, &in, 1, &ob, 1) == PC_OK);
  CHECK(oa.data && ob.data && memcmp(oa.data, ob.data, 15 * sizeof(float)) == 0);
  pc_tensor_free(&oa), pc_tensor_free(&ob);
  pc_graph_free(a), pc_graph_free(b);
}

/* a transpose that moves only dims of 1 ([1, 6, 5, 1] -> [6, 1, 1, 5]) keeps every element where it is: simplify
 * makes it a reshape (no copy kernel); one that reorders two dims above 1 stays a transpose */
PC_TEST(simplify_unit_dim_transpose_is_reshape) {
  for (int swap = 0; swap < 2; swap++) {
    pc_graph *g = pc_graph_new();
    pc_value *x = pc_input_add(g, "x", pc_type_make(PC_f32, 4, (int64_t[]){1, 6, 5, 1}));
    const int64_t keep[4] = {1, 0, 3, 2}, cross[4] = {2, 0, 3, 1};
    pc_output_add(g, pc_exp(g, pc_transpose(g, x, swap ? cross : keep)));
    pc_graph *ref = pc_graph_new();
    pc_value *xr = pc_input_add(ref, "x", pc_type_make(PC_f32, 4, (int64_t[]){1, 6, 5, 1}));
    pc_output_add(ref, pc_exp(ref, pc_transpose(ref, xr, swap ? cross : keep)));
    CHECK(pc_pass_simplify(g) == PC_OK && pc_pass_dce(g) == PC_OK && pc_verify(g) == PC_OK);
    const pc_node *e = g->outputs[0]->producer, *t = e ? e->in[0]->producer : NULL;
    CHECK_MSG(t && t->op == (swap ? PC_OP_transpose : PC_OP_reshape), "%s: %s", swap ? "5 and 6 swapped" : "unit dims moved",
              t ? pc_prim(t->op)->name : "none");
    float xs[30];
    for (int i = 0; i < 30; i++) xs[i] = 0.1f * (float)i - 1.5f;
    pc_tensor in = {PC_f32, 4, {1, 6, 5, 1}, xs}, oa = {0}, ob = {0};
    CHECK(pc_interp(ref, &in, 1, &oa, 1) == PC_OK && pc_interp(g, &in, 1, &ob, 1) == PC_OK);
    CHECK(oa.data && ob.data && memcmp(oa.data, ob.data, 30 * sizeof(float)) == 0);
    pc_tensor_free(&oa), pc_tensor_free(&ob);
    pc_graph_free(g), pc_graph_free(ref);
  }
}

PC_TEST(constfold_error_names_node) {
  pc_graph *g = pc_graph_new();
  int64_t d[1] = {3};
  int64_t idx[3] = {0, 7, 1};
  float v[3] = {1, 2, 3};
  pc_value *x = pc_input_add(g, "x", pc_type_make(PC_f32, 1, d));
  pc_value *in[2] = {pc_const(g, pc_type_make(PC_f32, 1, d), v), pc_const(g, pc_type_make(PC_i64, 1, d), idx)};
  pc_attr ax = pc_a_int("axis", 0);
  pc_set_origin(g, "Gather \"bad\"");
  pc_value *y = pc_build(g, PC_OP_gather, in, 2, &ax, 1);
  pc_set_origin(g, NULL);
  pc_output_add(g, pc_add(g, x, y));
  CHECK(pc_pass_constfold(g) != PC_OK);
  CHECK_CONTAINS(pc_error(g), "Gather \"bad\"");
  pc_graph_free(g);
}

PC_TEST(pipeline_levels_and_print_after) {
  for (int level = 0; level <= 3; level++) {
    pc_graph *g = foldable_graph();
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    pc_pipeline_opts o = {.opt_level = level, .print_after_all = 1, .print_to = f, .unfused = level == 3};
    CHECK_MSG(pc_pipeline_run(g, &o) == PC_OK, "-O%d: %s", level, pc_error(g));
    fclose(f);
    CHECK_CONTAINS(buf, "; after dce");
    CHECK_CONTAINS(buf, level == 3 ? "; after unfuse" : "; after fuse");
    if (level >= 2) CHECK_CONTAINS(buf, "; after cse");
    CHECK(g->n_groups >= 1);
    free(buf);
    pc_graph_free(g);
  }
}

/* a scatter writes over its base when the base dies there (an embedding's gradient: zeros, rows added), so
 * primc_k_scatter copies nothing; not when the base is also its updates. Compiled, against the interpreter. */
PC_TEST(memplan_scatter_over_its_base) {
  for (int shared = 0; shared < 2; shared++) {
    pc_graph *g = pc_graph_new();
    int64_t d[2] = {4, 2}, idx[8] = {3, 0, 1, 3, 0, 1, 2, 2};
    pc_value *x = pc_input_add(g, "x", pc_type_make(PC_f32, 2, d)), *u = pc_input_add(g, "u", pc_type_make(PC_f32, 2, d));
    pc_value *base = pc_mul(g, x, pc_full(g, PC_f32, 2, 2, d));
    pc_value *ix = pc_const(g, pc_type_make(PC_i64, 2, d), idx);
    pc_attr sa[2] = {pc_a_int("axis", 0), pc_a_str("reduce", "add")};
    pc_value *s = pc_build(g, PC_OP_scatter, (pc_value *[]){base, ix, shared ? base : u}, 3, sa, 2);
    pc_output_add(g, pc_add(g, s, pc_full(g, PC_f32, 1, 2, d)));
    float xv[8] = {1, 2, 3, 4, 5, 6, 7, 8}, uv[8] = {0.5f, -1, 2, 0.25f, -3, 4, 1, -2};
    pc_tensor ins[2] = {{PC_f32, 2, {4, 2}, xv}, {PC_f32, 2, {4, 2}, uv}}, ref = {0}, got = {0};
    CHECK(pc_interp(g, ins, 2, &ref, 1) == PC_OK);
    pc_pipeline_opts po = {.opt_level = 2};
    if (CHECK_MSG(pc_pipeline_run(g, &po) == PC_OK, "%s", pc_error(g))) {
      CHECK_INT(s->storage, PC_STORE_WORKSPACE);
      CHECK_MSG((s->offset == base->offset) == !shared, "shared %d: scatter at %lld, its base at %lld", shared,
                (long long)s->offset, (long long)base->offset);
      if (pc_test_run_compiled(g, 2, ins, &got, "scatter over its base")) {
        for (int i = 0; i < 8; i++)
          if (!CHECK_MSG(((float *)got.data)[i] == ((float *)ref.data)[i], "shared %d: y[%d] = %g, want %g", shared, i,
                         ((float *)got.data)[i], ((float *)ref.data)[i]))
            break;
        free(got.data);
      }
    }
    pc_tensor_free(&ref);
    pc_graph_free(g);
  }
}

PC_TEST(memplan_epilogue_in_place) {
  pc_graph *g = pc_graph_new();
  int64_t d[2] = {8, 8}, b[1] = {8}, c1[1] = {1}, c0[1] = {0}, dims[1] = {1};
  pc_value *x = pc_input_add(g, "x", pc_type_make(PC_f32, 2, d));
  pc_value *w = pc_const(g, pc_type_make(PC_f32, 2, d), NULL), *bias = pc_const(g, pc_type_make(PC_f32, 1, b), NULL);
  pc_value *h = pc_dot_general(g, x, w, 1, c1, c0, 0, NULL, NULL);
  pc_value *a = pc_max(g, pc_add(g, h, pc_broadcast_in_dim(g, bias, 2, d, dims)), pc_full(g, PC_f32, 0, 2, d));
  pc_output_add(g, pc_dot_general(g, a, w, 1, c1, c0, 0, NULL, NULL));
  CHECK(pc_pass_fuse(g) == PC_OK && pc_pass_memplan(g) == PC_OK);
  CHECK_INT(g->n_groups, 2);
  CHECK_INT(h->storage, PC_STORE_WORKSPACE);
  CHECK_INT(a->storage, PC_STORE_WORKSPACE);
  CHECK_INT(a->offset, h->offset); /* the relu writes over the GEMM result it reads */
  CHECK_INT(g->workspace_size, 256);
  pc_graph_free(g);
}
