/* tests/unit/test_onnx_more.c: Attention, losses, quantization (ai.onnx and com.microsoft), Cast to FLOAT8E8M0, CumProd, seeded training-mode Dropout and compile-time input specialization of the ONNX importer. */
#include "frontend/frontend.h"
#include "frontend/onnx_internal.h"
#include "ir/ir.h"
#include "tests/test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- one-node models built in memory */

enum { TM_IO = 8, TM_ATTRS = 8, TM_RANK = 4 };

typedef struct tm_io {
  const char *name;
  int elem; /* ONNX TensorProto.DataType */
  int rank;
  int64_t dims[TM_RANK];
} tm_io;

typedef struct tm_attr {
  const char *name;
  char kind; /* 'i' int, 'f' float, 's' string */
  int64_t i;
  float f;
  const char *s;
} tm_attr;

/* the protobuf messages of one model, all in one place */
typedef struct tm_model {
  Onnx__ModelProto model;
  Onnx__GraphProto graph;
  Onnx__NodeProto node;
  Onnx__OperatorSetIdProto opset, onnx_opset, *opsets[2];
  Onnx__ValueInfoProto vi[2 * TM_IO], *ins[TM_IO], *outs[TM_IO];
  Onnx__TypeProto type[2 * TM_IO];
  Onnx__TypeProto__Tensor tensor[2 * TM_IO];
  Onnx__TensorShapeProto shape[2 * TM_IO];
  Onnx__TensorShapeProto__Dimension dim[2 * TM_IO][TM_RANK], *dimp[2 * TM_IO][TM_RANK];
  Onnx__AttributeProto attr[TM_ATTRS], *attrp[TM_ATTRS];
  char *in_names[TM_IO], *out_names[TM_IO];
} tm_model;

static void tm_value(tm_model *m, int k, const tm_io *io) {
  Onnx__ValueInfoProto vi = ONNX__VALUE_INFO_PROTO__INIT;
  Onnx__TypeProto ty = ONNX__TYPE_PROTO__INIT;
  Onnx__TypeProto__Tensor te = ONNX__TYPE_PROTO__TENSOR__INIT;
  Onnx__TensorShapeProto sh = ONNX__TENSOR_SHAPE_PROTO__INIT;
  m->vi[k] = vi, m->type[k] = ty, m->tensor[k] = te, m->shape[k] = sh;
  for (int d = 0; d < io->rank; d++) {
    Onnx__TensorShapeProto__Dimension dm = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT;
    dm.value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
    dm.dim_value = io->dims[d];
    m->dim[k][d] = dm;
    m->dimp[k][d] = &m->dim[k][d];
  }
  m->shape[k].n_dim = (size_t)io->rank, m->shape[k].dim = m->dimp[k];
  m->tensor[k].has_elem_type = 1, m->tensor[k].elem_type = io->elem, m->tensor[k].shape = &m->shape[k];
  m->type[k].value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE, m->type[k].tensor_type = &m->tensor[k];
  m->vi[k].name = (char *)io->name, m->vi[k].type = &m->type[k];
}

static void tm_attribute(tm_model *m, int k, const tm_attr *a) {
  Onnx__AttributeProto at = ONNX__ATTRIBUTE_PROTO__INIT;
  at.name = (char *)a->name, at.has_type = 1;
  if (a->kind == 'i') at.type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT, at.has_i = 1, at.i = a->i;
  else if (a->kind == 'f') at.type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT, at.has_f = 1, at.f = a->f;
  else at.type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING, at.has_s = 1, at.s.data = (uint8_t *)a->s, at.s.len = strlen(a->s);
  m->attr[k] = at;
  m->attrp[k] = &m->attr[k];
}

/* a model of one node `op` named "n1" reading every input and writing every output; malloc'ed bytes. With a
 * domain, the node is of that domain at version opset, and the model imports ai.onnx 17 beside it. */
static unsigned char *tm_pack_dom(const char *domain, const char *op, int opset, const tm_io *in, int n_in,
                                  const tm_io *out, int n_out, const tm_attr *attrs, int n_attrs, size_t *len) {
  tm_model *m = calloc(1, sizeof *m);
  if (!m) return NULL;
  Onnx__ModelProto mp = ONNX__MODEL_PROTO__INIT;
  Onnx__GraphProto gp = ONNX__GRAPH_PROTO__INIT;
  Onnx__NodeProto np = ONNX__NODE_PROTO__INIT;
  Onnx__OperatorSetIdProto os = ONNX__OPERATOR_SET_ID_PROTO__INIT;
  m->model = mp, m->graph = gp, m->node = np, m->opset = os, m->onnx_opset = os;
  for (int i = 0; i < n_in; i++) tm_value(m, i, &in[i]), m->ins[i] = &m->vi[i], m->in_names[i] = (char *)in[i].name;
  for (int i = 0; i < n_out; i++)
    tm_value(m, TM_IO + i, &out[i]), m->outs[i] = &m->vi[TM_IO + i], m->out_names[i] = (char *)out[i].name;
  for (int i = 0; i < n_attrs; i++) tm_attribute(m, i, &attrs[i]);
  m->node.op_type = (char *)op, m->node.name = "n1";
  m->node.n_input = (size_t)n_in, m->node.input = m->in_names;
  m->node.n_output = (size_t)n_out, m->node.output = m->out_names;
  m->node.n_attribute = (size_t)n_attrs, m->node.attribute = m->attrp;
  Onnx__NodeProto *nodes[1] = {&m->node};
  m->graph.name = "g", m->graph.n_node = 1, m->graph.node = nodes;
  m->graph.n_input = (size_t)n_in, m->graph.input = m->ins;
  m->graph.n_output = (size_t)n_out, m->graph.output = m->outs;
  m->opset.has_version = 1, m->opset.version = opset, m->opsets[0] = &m->opset;
  m->model.has_ir_version = 1, m->model.ir_version = 9, m->model.graph = &m->graph;
  m->model.n_opset_import = 1, m->model.opset_import = m->opsets;
  if (domain) {
    m->node.domain = (char *)domain, m->opset.domain = (char *)domain;
    m->onnx_opset.has_version = 1, m->onnx_opset.version = 17, m->opsets[1] = &m->onnx_opset;
    m->model.n_opset_import = 2;
  }
  *len = onnx__model_proto__get_packed_size(&m->model);
  unsigned char *buf = malloc(*len ? *len : 1);
  if (buf) onnx__model_proto__pack(&m->model, buf);
  free(m);
  return buf;
}

static pc_graph *tm_load_dom(const char *domain, const char *op, int opset, const tm_io *in, int n_in, const tm_io *out,
                             int n_out, const tm_attr *attrs, int n_attrs, const pc_import_opts *o) {
  size_t len;
  unsigned char *buf = tm_pack_dom(domain, op, opset, in, n_in, out, n_out, attrs, n_attrs, &len);
  pc_graph *g = buf ? pc_onnx_load_buffer(buf, len, NULL, o) : NULL;
  free(buf);
  return g;
}

static pc_graph *tm_load(const char *op, int opset, const tm_io *in, int n_in, const tm_io *out, int n_out,
                         const tm_attr *attrs, int n_attrs, const pc_import_opts *o) {
  return tm_load_dom(NULL, op, opset, in, n_in, out, n_out, attrs, n_attrs, o);
}

static pc_tensor tensor(pc_dtype dt, int rank, const int64_t *dims, void *data) {
  pc_tensor t;
  memset(&t, 0, sizeof t);
  t.dtype = dt, t.rank = rank, t.data = data;
  for (int i = 0; i < rank; i++) t.dims[i] = dims[i];
  return t;
}

/* runs g on ins and compares its one output (as doubles) with want */
static void run_expect(pc_graph *g, pc_tensor *ins, int n_in, const double *want, int64_t n, double rtol) {
  if (!CHECK_MSG(g && g->status == PC_OK, "import: %s", g ? pc_error(g) : "out of memory")) return;
  pc_tensor out;
  memset(&out, 0, sizeof out);
  if (!CHECK_MSG(pc_interp(g, ins, n_in, &out, 1) == PC_OK, "interp: %s", pc_error(g))) return;
  if (CHECK(pc_tensor_numel(&out) == n)) {
    for (int64_t k = 0; k < n; k++) {
      double got = out.dtype == PC_f32 ? ((float *)out.data)[k] : out.dtype == PC_f64 ? ((double *)out.data)[k]
                 : out.dtype == PC_i8 ? ((int8_t *)out.data)[k] : out.dtype == PC_u8 ? ((uint8_t *)out.data)[k]
                 : (double)((int64_t *)out.data)[k];
      CHECK_MSG(fabs(got - want[k]) <= 1e-6 + rtol * fabs(want[k]), "element %lld: %.9g, expected %.9g", (long long)k, got, want[k]);
    }
  }
  pc_tensor_free(&out);
}

/* ---------------------------------------------------------------- Attention */

/* expected values: onnx.reference.ReferenceEvaluator on the same model (onnx 1.23) */
PC_TEST(onnx_more_attention_causal) {
  tm_io in[3] = {{"Q", 1, 4, {1, 1, 3, 2}}, {"K", 1, 4, {1, 1, 3, 2}}, {"V", 1, 4, {1, 1, 3, 2}}}, out[1] = {{"Y", 1, 4, {1, 1, 3, 2}}};
  tm_attr a[1] = {{"is_causal", 'i', 1, 0, NULL}};
  pc_graph *g = tm_load("Attention", 23, in, 3, out, 1, a, 1, NULL);
  float q[6] = {0.1f, -0.2f, 0.3f, 0.4f, -0.5f, 0.6f}, k[6] = {0.7f, 0.1f, -0.3f, 0.2f, 0.5f, -0.6f}, v[6] = {1, 2, 3, 4, 5, 6};
  int64_t d[4] = {1, 1, 3, 2};
  pc_tensor ins[3] = {tensor(PC_f32, 4, d, q), tensor(PC_f32, 4, d, k), tensor(PC_f32, 4, d, v)};
  const double want[6] = {1, 2, 1.9083343, 2.9083343, 2.8766496, 3.8766496};
  run_expect(g, ins, 3, want, 6, 1e-5);
  pc_graph_free(g);
}

PC_TEST(onnx_more_attention_3d_needs_heads) {
  tm_io in[3] = {{"Q", 1, 3, {1, 3, 4}}, {"K", 1, 3, {1, 3, 4}}, {"V", 1, 3, {1, 3, 4}}}, out[1] = {{"Y", 1, 3, {1, 3, 4}}};
  pc_graph *g = tm_load("Attention", 23, in, 3, out, 1, NULL, 0, NULL);
  CHECK(g && g->status == PC_ERR_ATTR);
  if (g) CHECK_CONTAINS(pc_error(g), "Attention \"n1\": 3-D inputs need q_num_heads");
  pc_graph_free(g);
}

/* ---------------------------------------------------------------- losses, quantization, scans */

/* expected: onnx reference, -log(0.5) (the second target is ignored) */
PC_TEST(onnx_more_nll_ignore_index) {
  tm_io in[2] = {{"x", 1, 2, {2, 3}}, {"t", 7, 1, {2}}}, out[1] = {{"l", 1, 0, {0}}};
  tm_attr a[1] = {{"ignore_index", 'i', 1, 0, NULL}};
  pc_graph *g = tm_load("NegativeLogLikelihoodLoss", 22, in, 2, out, 1, a, 1, NULL);
  float x[6] = {-1.60943794f, -1.20397282f, -0.693147182f, -2.30258512f, -0.510825574f, -1.20397282f};
  int64_t t[2] = {2, 1}, dx[2] = {2, 3}, dt[1] = {2};
  pc_tensor ins[2] = {tensor(PC_f32, 2, dx, x), tensor(PC_i64, 1, dt, t)};
  const double want[1] = {0.69314718};
  run_expect(g, ins, 2, want, 1, 1e-6);
  pc_graph_free(g);
}

/* expected: numpy.rint (half to even), saturated to int8 */
PC_TEST(onnx_more_quantize_half_even) {
  tm_io in[3] = {{"x", 1, 1, {7}}, {"s", 1, 0, {0}}, {"z", 3, 0, {0}}}, out[1] = {{"y", 3, 1, {7}}};
  pc_graph *g = tm_load("QuantizeLinear", 21, in, 3, out, 1, NULL, 0, NULL);
  float x[7] = {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 300, -300}, s = 1;
  int8_t z = 0;
  int64_t d[1] = {7};
  pc_tensor ins[3] = {tensor(PC_f32, 1, d, x), tensor(PC_f32, 0, NULL, &s), tensor(PC_i8, 0, NULL, &z)};
  const double want[7] = {0, 2, 2, 0, -2, 127, -128};
  run_expect(g, ins, 3, want, 7, 0);
  pc_graph_free(g);
}

/* com.microsoft QLinearAdd (ONNX Runtime's contrib op): (0.5 (a - 128) + 0) / 1 rounded half to even, plus 200,
 * saturated to uint8: 0.5 1 1.5 2.5 63.5 -> 0 1 2 2 64 -> 200 201 202 202 255 (nearbyintf, as MLAS rounds) */
PC_TEST(onnx_more_ms_qlinear_add_half_even) {
  tm_io in[8] = {{"a", 2, 1, {5}}, {"as", 1, 0, {0}}, {"az", 2, 0, {0}}, {"b", 2, 1, {1}},
                 {"bs", 1, 0, {0}}, {"bz", 2, 0, {0}}, {"cs", 1, 0, {0}}, {"cz", 2, 0, {0}}},
        out[1] = {{"y", 2, 1, {5}}};
  pc_graph *g = tm_load_dom("com.microsoft", "QLinearAdd", 1, in, 8, out, 1, NULL, 0, NULL);
  uint8_t a[5] = {129, 130, 131, 133, 255}, az = 128, b = 128, bz = 128, cz = 200;
  float as = 0.5f, bs = 0.5f, cs = 1;
  int64_t d[1] = {5}, d1[1] = {1};
  pc_tensor ins[8] = {tensor(PC_u8, 1, d, a), tensor(PC_f32, 0, NULL, &as), tensor(PC_u8, 0, NULL, &az), tensor(PC_u8, 1, d1, &b),
                      tensor(PC_f32, 0, NULL, &bs), tensor(PC_u8, 0, NULL, &bz), tensor(PC_f32, 0, NULL, &cs), tensor(PC_u8, 0, NULL, &cz)};
  const double want[5] = {200, 201, 202, 202, 255};
  run_expect(g, ins, 8, want, 5, 0);
  pc_graph_free(g);
}

/* ONNX Runtime's QLinear kernels take per-tensor scales only: a per-channel one is refused naming the node */
PC_TEST(onnx_more_ms_qlinear_per_tensor_scales) {
  tm_io in[7] = {{"a", 2, 1, {2}}, {"as", 1, 1, {2}}, {"az", 2, 0, {0}}, {"b", 2, 1, {2}}, {"bs", 1, 0, {0}}, {"bz", 2, 0, {0}},
                 {"cs", 1, 0, {0}}},
        out[1] = {{"y", 2, 1, {2}}};
  pc_graph *g = tm_load_dom("com.microsoft", "QLinearMul", 1, in, 7, out, 1, NULL, 0, NULL);
  CHECK(g && g->status == PC_ERR_SHAPE);
  if (g) CHECK_CONTAINS(pc_error(g), "QLinearMul \"n1\": A_scale must be a scalar or a 1-element tensor");
  pc_graph_free(g);
  /* a zero point of another type than the data */
  in[2].elem = 3;
  in[1].rank = 0;
  g = tm_load_dom("com.microsoft", "QLinearMul", 1, in, 7, out, 1, NULL, 0, NULL);
  CHECK(g && g->status == PC_ERR_TYPE);
  if (g) CHECK_CONTAINS(pc_error(g), "QLinearMul \"n1\": A_zero_point is i8, the quantized data u8");
  pc_graph_free(g);
}

/* Cast to FLOAT8E8M0 in each round_mode, saturate 0 and 1, against onnx.numpy_helper.to_float8e8m0 (the C rows of
 * tests/data/f8/f8_table.txt, written by tests/ref/gen_f8_refs.py) */
enum { E8M0_MAX_ROWS = 8192 };

static int read_e8m0_cast_rows(uint32_t *x, uint8_t (*want)[6]) {
  char path[512], line[256];
  snprintf(path, sizeof path, "%s/tests/data/f8/f8_table.txt", pc_test_srcdir());
  FILE *f = fopen(path, "r");
  if (!CHECK_MSG(f != NULL, "cannot open %s", path)) return 0;
  int n = 0;
  while (n < E8M0_MAX_ROWS && fgets(line, sizeof line, f)) {
    unsigned b[6];
    if (line[0] != 'C') continue;
    if (!CHECK_MSG(sscanf(line, "C f8e8m0 %x %x %x %x %x %x %x", &x[n], &b[0], &b[1], &b[2], &b[3], &b[4], &b[5]) == 7,
                   "bad line: %s", line))
      break;
    for (int k = 0; k < 6; k++) want[n][k] = (uint8_t)b[k];
    n++;
  }
  fclose(f);
  return n;
}

PC_TEST(onnx_more_cast_e8m0_round_modes) {
  static uint32_t x[E8M0_MAX_ROWS];
  static uint8_t want[E8M0_MAX_ROWS][6];
  static const char *const modes[3] = {"up", "down", "nearest"};
  int n = read_e8m0_cast_rows(x, want);
  if (!CHECK_MSG(n > 3000, "only %d Cast rows", n)) return;
  for (int k = 0; k < 6; k++) {
    tm_io in[1] = {{"x", 1, 1, {n}}}, out[1] = {{"y", 24, 1, {n}}};
    tm_attr at[3] = {{"to", 'i', 24, 0, NULL}, {"saturate", 'i', k % 2, 0, NULL}, {"round_mode", 's', 0, 0, modes[k / 2]}};
    pc_graph *g = tm_load("Cast", 25, in, 1, out, 1, at, 3, NULL);
    int64_t d[1] = {n};
    pc_tensor ins[1] = {tensor(PC_f32, 1, d, x)}, got;
    memset(&got, 0, sizeof got);
    if (CHECK_MSG(g && g->status == PC_OK, "import: %s", g ? pc_error(g) : "out of memory") &&
        CHECK_MSG(pc_interp(g, ins, 1, &got, 1) == PC_OK, "interp: %s", pc_error(g)) && CHECK(got.dtype == PC_f8e8m0)) {
      int bad = 0;
      for (int i = 0; i < n; i++) {
        uint8_t b = ((const uint8_t *)got.data)[i];
        if (b != want[i][k] && bad++ < 3)
          CHECK_MSG(0, "round_mode %s saturate %d, x %08x: %02x, onnx %02x", modes[k / 2], k % 2, x[i], b, want[i][k]);
      }
      CHECK_MSG(bad == 0, "round_mode %s saturate %d: %d of %d differ", modes[k / 2], k % 2, bad, n);
    }
    pc_tensor_free(&got);
    pc_graph_free(g);
  }
}

PC_TEST(onnx_more_cast_e8m0_bad_round_mode) {
  tm_io in[1] = {{"x", 1, 1, {2}}}, out[1] = {{"y", 24, 1, {2}}};
  tm_attr at[2] = {{"to", 'i', 24, 0, NULL}, {"round_mode", 's', 0, 0, "sideways"}};
  pc_graph *g = tm_load("Cast", 25, in, 1, out, 1, at, 2, NULL);
  CHECK(g && g->status == PC_ERR_ATTR);
  if (g) CHECK_CONTAINS(pc_error(g), "round_mode 'sideways'");
  pc_graph_free(g);
}

/* expected: numpy, np.cumprod([4, 3, 2, 1])[::-1] shifted by one (reverse, exclusive) */
PC_TEST(onnx_more_cumprod_reverse_exclusive) {
  tm_io in[2] = {{"x", 11, 1, {4}}, {"axis", 6, 0, {0}}}, out[1] = {{"y", 11, 1, {4}}};
  tm_attr a[2] = {{"exclusive", 'i', 1, 0, NULL}, {"reverse", 'i', 1, 0, NULL}};
  int32_t axis = 0;
  pc_const_input ci = {"axis", tensor(PC_i32, 0, NULL, &axis), 0};
  pc_import_opts o = {.consts = &ci, .n_consts = 1};
  pc_graph *g = tm_load("CumProd", 26, in, 2, out, 1, a, 2, &o);
  double x[4] = {1, 2, 3, 4};
  int64_t d[1] = {4};
  pc_tensor ins[1] = {tensor(PC_f64, 1, d, x)};
  const double want[4] = {24, 12, 4, 1};
  run_expect(g, ins, 1, want, 4, 0);
  pc_graph_free(g);
}

/* ---------------------------------------------------------------- training-mode Dropout */

static const tm_io do_in[3] = {{"x", 1, 2, {3, 4}}, {"r", 1, 0, {0}}, {"t", 9, 0, {0}}},
                   do_out[2] = {{"y", 1, 2, {3, 4}}, {"z", 9, 2, {3, 4}}};

/* Dropout(x, r = 0.3, t = true), seed 42 imported with r and t fixed; x = ((np.arange(12) - 5.5) / 3) as float32.
 * expected: onnx.reference.ReferenceEvaluator on the same model (onnx 1.23.2, numpy 2.4.6), which draws the mask
 * with np.random.RandomState(42).uniform(0, 1, (3, 4)) >= 0.3 and scales by float32 1 / (1 - 0.3) */
PC_TEST(onnx_more_dropout_seeded_matches_reference) {
  float r = 0.3f;
  uint8_t t = 1;
  pc_const_input ci[2] = {{"r", tensor(PC_f32, 0, NULL, &r), 0}, {"t", tensor(PC_bool, 0, NULL, &t), 0}};
  pc_import_opts o = {.consts = ci, .n_consts = 2};
  tm_attr a[1] = {{"seed", 'i', 42, 0, NULL}};
  pc_graph *g = tm_load("Dropout", 22, do_in, 3, do_out, 2, a, 1, &o);
  if (!CHECK_MSG(g && g->status == PC_OK, "import: %s", g ? pc_error(g) : "out of memory")) {
    pc_graph_free(g);
    return;
  }
  float x[12];
  for (int i = 0; i < 12; i++) x[i] = (float)((i - 5.5) / 3);
  int64_t d[2] = {3, 4};
  pc_tensor in = tensor(PC_f32, 2, d, x), out[2];
  memset(out, 0, sizeof out);
  static const float want_y[12] = {-2.6190476417541504f, -2.142857074737549f, -1.6666666269302368f, -1.1904761791229248f,
                                   -0.0f, -0.0f, 0.0f, 0.7142857313156128f,
                                   1.1904761791229248f, 1.6666666269302368f, 0.0f, 2.6190476417541504f};
  static const uint8_t want_z[12] = {1, 1, 1, 1, 0, 0, 0, 1, 1, 1, 0, 1};
  if (CHECK_MSG(pc_interp(g, &in, 1, out, 2) == PC_OK, "interp: %s", pc_error(g)) &&
      CHECK(out[0].dtype == PC_f32 && out[1].dtype == PC_bool && pc_tensor_numel(&out[1]) == 12))
    for (int i = 0; i < 12; i++) {
      CHECK_MSG(((float *)out[0].data)[i] == want_y[i], "y[%d]: %.9g, expected %.9g", i, ((float *)out[0].data)[i], want_y[i]);
      CHECK_MSG(((uint8_t *)out[1].data)[i] == want_z[i], "mask[%d]: %d, expected %d", i, ((uint8_t *)out[1].data)[i], want_z[i]);
    }
  pc_tensor_free(&out[0]);
  pc_tensor_free(&out[1]);
  pc_graph_free(g);
}

/* without a seed every run draws another mask: nothing to reproduce, so the import says so naming the node */
PC_TEST(onnx_more_dropout_training_needs_seed) {
  float r = 0.3f;
  uint8_t t = 1;
  pc_const_input ci[2] = {{"r", tensor(PC_f32, 0, NULL, &r), 0}, {"t", tensor(PC_bool, 0, NULL, &t), 0}};
  pc_import_opts o = {.consts = ci, .n_consts = 2};
  pc_graph *g = tm_load("Dropout", 22, do_in, 3, do_out, 2, NULL, 0, &o);
  CHECK(g && g->status == PC_ERR_UNSUPPORTED);
  if (g) CHECK_CONTAINS(pc_error(g), "Dropout \"n1\": training-mode Dropout (ratio 0.3) without a seed attribute");
  pc_graph_free(g);
}

/* dtype attributes share one reader: a type primc lacks fails the node naming the attribute and the type */
PC_TEST(onnx_more_dtype_attributes_checked) {
  tm_io in[1] = {{"x", 1, 2, {3, 3}}}, out[1] = {{"y", 7, 2, {3, 3}}}; /* int64, as the second dtype says */
  tm_attr a[1] = {{"dtype", 'i', 8, 0, NULL}}; /* string */
  pc_graph *g = tm_load("EyeLike", 22, in, 1, out, 1, a, 1, NULL);
  CHECK(g && g->status == PC_ERR_UNSUPPORTED);
  if (g) CHECK_CONTAINS(pc_error(g), "attribute dtype: ONNX type 8 (string) is not supported");
  pc_graph_free(g);
  tm_attr b[1] = {{"dtype", 'i', 7, 0, NULL}}; /* int64: fine */
  g = tm_load("EyeLike", 22, in, 1, out, 1, b, 1, NULL);
  CHECK_MSG(g && g->status == PC_OK, "%s", g ? pc_error(g) : "out of memory");
  pc_graph_free(g);
}

/* ---------------------------------------------------------------- compile-time inputs */

static const tm_io rs_in[2] = {{"data", 1, 2, {2, 3}}, {"axes", 7, 1, {1}}}, rs_out[1] = {{"y", 1, 1, {2}}};

PC_TEST(onnx_more_const_input_needed) {
  pc_graph *g = tm_load("ReduceSum", 13, rs_in, 2, rs_out, 1, NULL, 0, NULL);
  CHECK(g && g->status == PC_ERR_UNSUPPORTED);
  if (g) CHECK_CONTAINS(pc_error(g), "ReduceSum \"n1\": input 1 ('axes') must be a compile-time constant");
  pc_graph_free(g);
}

PC_TEST(onnx_more_const_input_specialized) {
  int64_t axes = 1, one = 1;
  pc_const_input ci = {"axes", tensor(PC_i64, 1, &one, &axes), 0};
  pc_import_opts o = {.consts = &ci, .n_consts = 1};
  pc_graph *g = tm_load("ReduceSum", 13, rs_in, 2, rs_out, 1, NULL, 0, &o);
  CHECK(g && g->n_inputs == 1); /* the specialized input is gone */
  float x[6] = {1, 2, 3, 4, 5, 6};
  int64_t d[2] = {2, 3};
  pc_tensor ins[1] = {tensor(PC_f32, 2, d, x)};
  const double want[2] = {6, 15};
  run_expect(g, ins, 1, want, 2, 0);
  pc_graph_free(g);
}

/* Trilu's k only moves the mask: a k fed at run time stays an input, one graph for every k.
 * expected: numpy, x = np.arange(1, 13).reshape(3, 4); np.triu(x, 1), np.triu(x, -1), np.tril(x, 0), np.triu(x, 5) */
PC_TEST(onnx_more_trilu_k_at_run_time) {
  static const tm_io in[2] = {{"x", 1, 2, {3, 4}}, {"k", 7, 0, {0}}}, out[1] = {{"y", 1, 2, {3, 4}}};
  static const struct { int upper; int64_t k; double want[12]; } cases[4] = {
      {1, 1, {0, 2, 3, 4, 0, 0, 7, 8, 0, 0, 0, 12}},
      {1, -1, {1, 2, 3, 4, 5, 6, 7, 8, 0, 10, 11, 12}},
      {0, 0, {1, 0, 0, 0, 5, 6, 0, 0, 9, 10, 11, 0}},
      {1, 5, {0}},
  };
  for (int i = 0; i < 4; i++) {
    tm_attr upper = {"upper", 'i', cases[i].upper, 0, NULL};
    pc_graph *g = tm_load("Trilu", 14, in, 2, out, 1, &upper, 1, NULL);
    CHECK_MSG(g && g->status == PC_OK && g->n_inputs == 2, "case %d: %s", i, g ? pc_error(g) : "out of memory");
    float x[12];
    for (int e = 0; e < 12; e++) x[e] = (float)(e + 1);
    int64_t d[2] = {3, 4}, k = cases[i].k;
    pc_tensor ins[2] = {tensor(PC_f32, 2, d, x), tensor(PC_i64, 0, NULL, &k)};
    run_expect(g, ins, 2, cases[i].want, 12, 0);
    pc_graph_free(g);
  }
}

/* the spellings of --const: "axes=1" (rank 0) fills the declared [1]; an int32 array converts to int64.
 * expected: numpy, np.arange(1, 7).reshape(2, 3).sum(axis=1) */
PC_TEST(onnx_more_const_input_converted) {
  char name[16], err[128];
  pc_const_input spelled;
  CHECK(pc_const_spec_parse("axes=1", &spelled, name, sizeof name, err, sizeof err));
  int32_t axes32 = 1;
  int64_t one = 1;
  pc_const_input given[2] = {spelled, {"axes", tensor(PC_i32, 1, &one, &axes32), 0}};
  for (int i = 0; i < 2; i++) {
    pc_import_opts o = {.consts = &given[i], .n_consts = 1};
    pc_graph *g = tm_load("ReduceSum", 13, rs_in, 2, rs_out, 1, NULL, 0, &o);
    CHECK_MSG(g && g->status == PC_OK && g->n_inputs == 1, "case %d: %s", i, g ? pc_error(g) : "out of memory");
    float x[6] = {1, 2, 3, 4, 5, 6};
    int64_t d[2] = {2, 3};
    pc_tensor ins[1] = {tensor(PC_f32, 2, d, x)};
    const double want[2] = {6, 15};
    if (g && g->status == PC_OK) run_expect(g, ins, 1, want, 2, 0);
    pc_graph_free(g);
  }
  pc_tensor_free(&spelled.value);
  /* bad spellings: an error naming the part that is wrong */
  const char *bad[4] = {"axes", "axes=", "axes=1,,2", "axes=one"};
  for (int i = 0; i < 4; i++) {
    CHECK_MSG(!pc_const_spec_parse(bad[i], &spelled, name, sizeof name, err, sizeof err), "'%s' parsed", bad[i]);
    CHECK(err[0] != 0);
  }
  CHECK(pc_const_spec_parse("m=[1.5,-2,true]", &spelled, name, sizeof name, err, sizeof err));
  CHECK(spelled.value.rank == 1 && spelled.value.dims[0] == 3 && ((double *)spelled.value.data)[2] == 1);
  pc_tensor_free(&spelled.value);
}

PC_TEST(onnx_more_const_input_mismatch) {
  float axes_f = 1.5f;
  int64_t axes = 1, one = 1, two = 2, pair[2] = {0, 1};
  double half[1] = {0.5};
  pc_const_input bad[4] = {{"axes", tensor(PC_f32, 1, &one, &axes_f), 0}, {"axes", tensor(PC_i64, 1, &two, pair), 0},
                           {"nope", tensor(PC_i64, 1, &one, &axes), 0}, {"axes", tensor(PC_f64, 0, NULL, half), 1}};
  const pc_status want[4] = {PC_ERR_TYPE, PC_ERR_SHAPE, PC_ERR_ATTR, PC_ERR_RANGE};
  const char *needle[4] = {"input 'axes'", "input 'axes'", "constant input 'nope'", "0.5, is not exactly a i64"};
  for (int i = 0; i < 4; i++) {
    pc_import_opts o = {.consts = &bad[i], .n_consts = 1};
    pc_graph *g = tm_load("ReduceSum", 13, rs_in, 2, rs_out, 1, NULL, 0, &o);
    CHECK_MSG(g && g->status == want[i], "case %d: %s", i, g ? pc_error(g) : "out of memory");
    if (g) CHECK_CONTAINS(pc_error(g), needle[i]);
    pc_graph_free(g);
  }
}
