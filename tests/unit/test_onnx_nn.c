/* tests/unit/test_onnx_nn.c: the nn op decompositions against onnxruntime references in tests/data/onnx_nn. */
#include "frontend/frontend.h"
#include "frontend/onnx_internal.h"
#include "ir/ir.h"
#include "tests/test.h"
#include "tests/unit/helpers.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define NN_RTOL 1e-3
#define NN_ATOL 1e-5 /* onnxruntime's float32 kernels sum in another order than the interpreter's doubles */

/* compares got with want elementwise; 1 when all agree */
static int close_enough(const char *name, int idx, const pc_tensor *got, const pc_tensor *want) {
  if (!CHECK_MSG(got->rank == want->rank && got->dtype == want->dtype, "%s output %d: rank/dtype differ", name, idx))
    return 0;
  for (int i = 0; i < got->rank; i++)
    if (!CHECK_MSG(got->dims[i] == want->dims[i], "%s output %d: dim %d is %lld, expected %lld", name, idx, i,
                   (long long)got->dims[i], (long long)want->dims[i]))
      return 0;
  int64_t n = pc_tensor_numel(want);
  for (int64_t k = 0; k < n; k++) {
    double a = pc_elem_f64(got->dtype, got->data, k), b = pc_elem_f64(want->dtype, want->data, k);
    if (!(fabs(a - b) <= NN_ATOL + NN_RTOL * fabs(b)))
      return CHECK_MSG(0, "%s output %d[%lld]: %.9g, expected %.9g", name, idx, (long long)k, a, b);
  }
  return CHECK_MSG(1, "%s output %d", name, idx);
}

static void run_case(const char *name) {
  char path[1024];
  const char *src = pc_test_srcdir();
  snprintf(path, sizeof path, "%s/tests/data/onnx_nn/%s/model.onnx", src, name);
  pc_graph *g = pc_onnx_load(path, NULL);
  if (!CHECK_MSG(g && g->status == PC_OK, "%s: %s", name, g ? pc_error(g) : "out of memory")) {
    pc_graph_free(g);
    return;
  }
  pc_tensor in[2], want[4], got[4];
  memset(got, 0, sizeof got);
  int n_in = g->n_inputs, n_out = g->n_outputs, ok = CHECK(n_in <= 2) && CHECK(n_out <= 4);
  for (int i = 0; ok && i < n_in; i++) {
    snprintf(path, sizeof path, "%s/tests/data/onnx_nn/%s/input_%d.pb", src, name, i);
    ok = CHECK_MSG(pc_test_read_pb(path, &in[i]), "%s: input %d", name, i);
  }
  for (int i = 0; ok && i < n_out; i++) {
    snprintf(path, sizeof path, "%s/tests/data/onnx_nn/%s/output_%d.pb", src, name, i);
    ok = CHECK_MSG(pc_test_read_pb(path, &want[i]), "%s: output %d", name, i);
  }
  if (ok && CHECK_MSG(pc_interp(g, in, n_in, got, n_out) == PC_OK, "%s: %s", name, pc_error(g)))
    for (int i = 0; i < n_out; i++) close_enough(name, i, &got[i], &want[i]);
  for (int i = 0; ok && i < n_out; i++) {
    pc_tensor_free(&got[i]);
    pc_tensor_free(&want[i]);
  }
  for (int i = 0; ok && i < n_in; i++) pc_tensor_free(&in[i]);
  pc_graph_free(g);
}

static const char *const nn_cases[] = {
    "conv_group_dilated_asym", "conv1d_same_lower", "conv3d_depthwise", "convtranspose_group_outpad",
    "convtranspose_k2s2_bias", "convtranspose_k3s3_same_1d", "convtranspose_k2x1x3_3d", "convtranspose_k4s2p1_bias",
    "convtranspose_k3s2_outpad_1d", "convtranspose_k5s3_group2", "convtranspose_k1s3_gaps", "convtranspose_k4s2_same_upper",
    "maxpool_int8_ceil", "avgpool_ceil_include_pad", "avgpool_same_upper_exclude", "lppool_p3",
    "layernorm_outputs", "instancenorm_3d", "lrn_size5", "lstm_bidir_full", "gru_lbr_reverse_clip",
    "rnn_relu_bidir_h0", "resize_linear_sizes", "resize_cubic_asym_exclude", "resize_nearest_ceil_align",
    "dft_complex_axis1_len", "depthtospace_crd", "lrn_size_beyond_channels", "lstm_lens_bidir_peep",
    "gru_lens_reverse", "rnn_lens_forward", "lstm_lens_input",
    /* tests/ref/gen_onnx_einsum_refs.py, numpy.einsum references */
    "einsum_ellipsis_batch_broadcast", "einsum_ellipsis_implicit_trace", "einsum_ellipsis_middle_implicit",
    "einsum_ellipsis_of_no_dims", "einsum_diagonal_three", "einsum_label_broadcast",
};

PC_TEST(onnx_nn_reference_cases) {
  for (size_t i = 0; i < sizeof nn_cases / sizeof *nn_cases; i++) run_case(nn_cases[i]);
}

/* ConvTranspose with kernel = stride imports as one GEMM and a tile-interleaving loop whose final reshape the fuser
 * lets write the output, other strided ones as one conv per stride phase interleaved: compiled at -O2 (fused) and
 * -O0 (a kernel per prim), against onnxruntime's outputs */
PC_TEST(onnx_nn_convtranspose_tiles_compiled) {
  static const char *const cases[] = {"convtranspose_k2s2_bias",      "convtranspose_k3s3_same_1d",
                                      "convtranspose_k2x1x3_3d",      "convtranspose_k4s2p1_bias",
                                      "convtranspose_k3s2_outpad_1d", "convtranspose_k5s3_group2",
                                      "convtranspose_k1s3_gaps",      "convtranspose_k4s2_same_upper"};
  char path[1024];
  const char *src = pc_test_srcdir();
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
    for (int opt = 0; opt <= 2; opt += 2) {
      snprintf(path, sizeof path, "%s/tests/data/onnx_nn/%s/model.onnx", src, cases[i]);
      pc_graph *g = pc_onnx_load(path, NULL);
      pc_tensor in, want, got;
      memset(&got, 0, sizeof got);
      snprintf(path, sizeof path, "%s/tests/data/onnx_nn/%s/input_0.pb", src, cases[i]);
      int ok = CHECK_MSG(g && g->status == PC_OK, "%s", cases[i]) && CHECK(pc_test_read_pb(path, &in));
      snprintf(path, sizeof path, "%s/tests/data/onnx_nn/%s/output_0.pb", src, cases[i]);
      ok = ok && CHECK(pc_test_read_pb(path, &want));
      char tag[128];
      snprintf(tag, sizeof tag, "%s -O%d", cases[i], opt);
      if (ok && CHECK_MSG(pc_test_run_compiled(g, opt, &in, &got, tag), "%s: compiled", tag)) close_enough(tag, 0, &got, &want);
      if (ok) pc_tensor_free(&in), pc_tensor_free(&want), pc_tensor_free(&got);
      pc_graph_free(g);
    }
}

/* RNNs with sequence_lens shorter than the sequence (a constant, and lstm_lens_input's graph input read at run
 * time), compiled at -O2, against onnxruntime's Y (and, in run_case, every output interpreted) */
PC_TEST(onnx_nn_rnn_lens_compiled) {
  static const char *const cases[] = {"lstm_lens_bidir_peep", "gru_lens_reverse", "rnn_lens_forward", "lstm_lens_input"};
  char path[1024];
  const char *src = pc_test_srcdir();
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    snprintf(path, sizeof path, "%s/tests/data/onnx_nn/%s/model.onnx", src, cases[i]);
    pc_graph *g = pc_onnx_load(path, NULL);
    pc_tensor in[2], want, got[3];
    memset(got, 0, sizeof got);
    int n_in = g ? g->n_inputs : 0, ok = CHECK_MSG(g && g->status == PC_OK && n_in <= 2, "%s", cases[i]);
    for (int k = 0; ok && k < n_in; k++) {
      snprintf(path, sizeof path, "%s/tests/data/onnx_nn/%s/input_%d.pb", src, cases[i], k);
      ok = CHECK(pc_test_read_pb(path, &in[k]));
    }
    snprintf(path, sizeof path, "%s/tests/data/onnx_nn/%s/output_0.pb", src, cases[i]);
    ok = ok && CHECK(pc_test_read_pb(path, &want));
    if (ok && CHECK_MSG(pc_test_run_compiled(g, 2, in, got, cases[i]), "%s: compiled", cases[i]))
      close_enough(cases[i], 0, &got[0], &want);
    if (ok) {
      for (int k = 0; k < n_in; k++) pc_tensor_free(&in[k]);
      for (int k = 0; k < 3; k++) pc_tensor_free(&got[k]);
      pc_tensor_free(&want);
    }
    pc_graph_free(g);
  }
}

/* a one-node model from text built by hand: protobuf-c packs it */
static pc_graph *one_node(const char *op, const char *const *outs, int n_out, Onnx__AttributeProto **attrs,
                          int n_attrs, int opset) {
  Onnx__TensorShapeProto__Dimension d[4];
  Onnx__TensorShapeProto__Dimension *dp[4];
  int64_t dims[4] = {1, 2, 4, 4};
  for (int i = 0; i < 4; i++) {
    onnx__tensor_shape_proto__dimension__init(&d[i]);
    d[i].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
    d[i].dim_value = dims[i];
    dp[i] = &d[i];
  }
  Onnx__TensorShapeProto shape;
  onnx__tensor_shape_proto__init(&shape);
  shape.n_dim = 4, shape.dim = dp;
  Onnx__TypeProto__Tensor tt;
  onnx__type_proto__tensor__init(&tt);
  tt.has_elem_type = 1, tt.elem_type = 1, tt.shape = &shape;
  Onnx__TypeProto type;
  onnx__type_proto__init(&type);
  type.value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE, type.tensor_type = &tt;
  /* outputs declared as tensors of no given type or shape: the node decides (MaxPool's indices are int64) */
  Onnx__TypeProto__Tensor ott;
  onnx__type_proto__tensor__init(&ott);
  Onnx__TypeProto otype;
  onnx__type_proto__init(&otype);
  otype.value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE, otype.tensor_type = &ott;
  Onnx__ValueInfoProto vin, vout[4], *pin = &vin, *pout[4];
  onnx__value_info_proto__init(&vin);
  vin.name = "x", vin.type = &type;
  for (int i = 0; i < n_out; i++) {
    onnx__value_info_proto__init(&vout[i]);
    vout[i].name = (char *)outs[i], vout[i].type = &otype;
    pout[i] = &vout[i];
  }
  char *in_names[1] = {"x"};
  Onnx__NodeProto node, *pn = &node;
  onnx__node_proto__init(&node);
  node.op_type = (char *)op, node.name = "n1", node.n_input = 1, node.input = in_names;
  node.n_output = (size_t)n_out, node.output = (char **)outs, node.n_attribute = (size_t)n_attrs, node.attribute = attrs;
  Onnx__GraphProto gp;
  onnx__graph_proto__init(&gp);
  gp.name = "g", gp.n_node = 1, gp.node = &pn, gp.n_input = 1, gp.input = &pin, gp.n_output = (size_t)n_out, gp.output = pout;
  Onnx__OperatorSetIdProto os, *pos = &os;
  onnx__operator_set_id_proto__init(&os);
  os.domain = "", os.has_version = 1, os.version = opset;
  Onnx__ModelProto m;
  onnx__model_proto__init(&m);
  m.has_ir_version = 1, m.ir_version = 8, m.graph = &gp, m.n_opset_import = 1, m.opset_import = &pos;
  size_t len = onnx__model_proto__get_packed_size(&m);
  unsigned char *buf = malloc(len);
  onnx__model_proto__pack(&m, buf);
  pc_graph *g = pc_onnx_load_buffer(buf, len, NULL, NULL);
  free(buf);
  return g;
}

static Onnx__AttributeProto ints_attr(const char *name, int64_t *v, size_t n) {
  Onnx__AttributeProto a;
  onnx__attribute_proto__init(&a);
  a.name = (char *)name, a.has_type = 1, a.type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS, a.n_ints = n, a.ints = v;
  return a;
}

static Onnx__AttributeProto floats_attr(const char *name, float *v, size_t n) {
  Onnx__AttributeProto a;
  onnx__attribute_proto__init(&a);
  a.name = (char *)name, a.has_type = 1, a.type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS, a.n_floats = n, a.floats = v;
  return a;
}

/* nearest upsampling: an integer factor is a broadcast and a reshape (no gather: one copy kernel
 * when compiled), any other a single gather per axis; both give y[i][j] = x[floor(i / sh)][floor(j / sw)] */
PC_TEST(onnx_nn_nearest_upsample) {
  float factors[2][4] = {{1, 1, 2, 2}, {1, 1, 1.5f, 2}};
  const char *one[1] = {"y"};
  for (int t = 0; t < 2; t++) {
    Onnx__AttributeProto sc = floats_attr("scales", factors[t], 4), *attrs[1] = {&sc};
    pc_graph *g = one_node("Upsample", one, 1, attrs, 1, 7);
    if (!CHECK_MSG(g->status == PC_OK, "%s", pc_error(g))) {
      pc_graph_free(g);
      continue;
    }
    int gathers = 0;
    for (int i = 0; i < g->n_nodes; i++) gathers += g->nodes[i]->op == PC_OP_gather;
    CHECK_MSG(t == 0 ? gathers == 0 : gathers == 1, "scales %g x %g: %d gathers", factors[t][2], factors[t][3], gathers);
    float ramp[32];
    for (int i = 0; i < 32; i++) ramp[i] = (float)i;
    pc_tensor in = {PC_f32, 4, {1, 2, 4, 4}, ramp}, out;
    memset(&out, 0, sizeof out);
    if (CHECK_INT(pc_interp(g, &in, 1, &out, 1), PC_OK)) {
      int64_t H = out.dims[2], W = out.dims[3];
      CHECK(H == (t ? 6 : 8) && W == 8);
      int ok = 1;
      for (int64_t c = 0; c < 2 && ok; c++)
        for (int64_t i = 0; i < H && ok; i++)
          for (int64_t j = 0; j < W && ok; j++) {
            float want = ramp[(c * 4 + (int64_t)floor((double)i / factors[t][2])) * 4 + j / 2];
            ok = CHECK_MSG(((float *)out.data)[(c * H + i) * W + j] == want, "y[%lld][%lld][%lld]", (long long)c,
                           (long long)i, (long long)j);
          }
      pc_tensor_free(&out);
    }
    pc_graph_free(g);
  }
}

PC_TEST(onnx_nn_pool_variants) {
  int64_t k[2] = {2, 2};
  Onnx__AttributeProto ks = ints_attr("kernel_shape", k, 2), *attrs[1] = {&ks};
  const char *two[2] = {"y", "idx"};
  /* MaxPool's Indices: the flat position of each window's maximum; on 0..31 the 2x2 window at
   * (0, 0) holds 0, 1, 4, 5, so its max is 5 at position 5, and the last window's is 31 at 31 */
  pc_graph *g = one_node("MaxPool", two, 2, attrs, 1, 17);
  if (CHECK_INT(g->status, PC_OK)) {
    float ramp[32];
    for (int i = 0; i < 32; i++) ramp[i] = (float)i;
    pc_tensor in = {PC_f32, 4, {1, 2, 4, 4}, ramp}, out[2];
    memset(out, 0, sizeof out);
    if (CHECK_INT(pc_interp(g, &in, 1, out, 2), PC_OK)) {
      CHECK_NEAR(((float *)out[0].data)[0], 5.0, 0);
      CHECK_INT(((int64_t *)out[1].data)[0], 5);
      CHECK_INT(((int64_t *)out[1].data)[17], 31);
      pc_tensor_free(&out[0]);
      pc_tensor_free(&out[1]);
    }
  }
  pc_graph_free(g);

  int64_t bad[3] = {2, 2, 2};
  Onnx__AttributeProto kb = ints_attr("kernel_shape", bad, 3), *battrs[1] = {&kb};
  g = one_node("AveragePool", two, 1, battrs, 1, 17);
  CHECK_INT(g->status, PC_ERR_ATTR);
  CHECK_CONTAINS(pc_error(g), "AveragePool \"n1\": kernel_shape has 3 entries");
  pc_graph_free(g);

  /* the same pool with a valid kernel imports and runs: 2x2 windows of ones average to one */
  g = one_node("AveragePool", two, 1, attrs, 1, 17);
  CHECK_INT(g->status, PC_OK);
  float ones[32];
  for (int i = 0; i < 32; i++) ones[i] = 1;
  pc_tensor in = {PC_f32, 4, {1, 2, 4, 4}, ones}, out;
  memset(&out, 0, sizeof out);
  if (CHECK_INT(pc_interp(g, &in, 1, &out, 1), PC_OK)) {
    CHECK_INT(out.dims[2], 3);
    CHECK_NEAR(((float *)out.data)[0], 1.0, 1e-6);
    pc_tensor_free(&out);
  }
  pc_graph_free(g);
}
