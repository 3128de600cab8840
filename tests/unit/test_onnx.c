/* tests/unit/test_onnx.c: the ONNX importer on malformed models (status, one-line message, no crash) and tiny good ones. */
#include "codegen/kir.h"
#include "frontend/frontend.h"
#include "frontend/onnx_internal.h"
#include "passes/passes.h"
#include "tests/test.h"
#include "tests/unit/helpers.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pc_graph *load_data(const char *sub, const char *name) {
  char path[1024];
  snprintf(path, sizeof path, "%s/tests/data/%s/%s", pc_test_srcdir(), sub, name);
  return pc_onnx_load(path, NULL);
}

/* loads a bad model and checks its status and that the message is one line holding `needle` */
static void check_bad(const char *name, pc_status want, const char *needle) {
  pc_graph *g = load_data("onnx_bad", name);
  CHECK_MSG(g != NULL, "%s: graph", name);
  if (!g) return;
  CHECK_MSG(g->status == want, "%s: status %s, expected %s (%s)", name, pc_status_name(g->status),
            pc_status_name(want), pc_error(g));
  CHECK_MSG(strchr(pc_error(g), '\n') == NULL, "%s: message is one line", name);
  if (needle) CHECK_CONTAINS(pc_error(g), needle);
  pc_graph_free(g);
}

PC_TEST(onnx_bad_truncated) { check_bad("truncated.onnx", PC_ERR_PARSE, "truncated.onnx"); }
PC_TEST(onnx_bad_garbage) { check_bad("garbage.onnx", PC_ERR_PARSE, NULL); }
PC_TEST(onnx_bad_unknown_domain) { check_bad("unknown_domain.onnx", PC_ERR_UNSUPPORTED, "FooBar \"mystery\": op FooBar of domain 'com.example'"); }
PC_TEST(onnx_bad_unknown_op) { check_bad("unknown_op.onnx", PC_ERR_UNSUPPORTED, "NotAnOp \"nope\": unsupported op NotAnOp (domain ai.onnx"); }
PC_TEST(onnx_bad_opset) { check_bad("bad_opset.onnx", PC_ERR_UNSUPPORTED, "opset 99"); }
PC_TEST(onnx_bad_shape_mismatch) { check_bad("shape_mismatch.onnx", PC_ERR_SHAPE, "Add \"plus\""); }
PC_TEST(onnx_bad_external_dotdot) { check_bad("external_dotdot.onnx", PC_ERR_IO, "leaves the model directory"); }
PC_TEST(onnx_bad_external_abs) { check_bad("external_abs.onnx", PC_ERR_IO, "leaves the model directory"); }
PC_TEST(onnx_bad_absurd_dims) { check_bad("absurd_dims.onnx", PC_ERR_RANGE, "2^31"); }
/* window attributes bounded before their products (UBSan: (kernel - 1) * dilation overflowed; fuzz_mutate) */
PC_TEST(onnx_bad_huge_dilation) { check_bad("fuzz_pool_huge_dilation.onnx", PC_ERR_ATTR, "MaxPool \"pool\": kernel, strides, dilations and pads must be below 2^31"); }
PC_TEST(onnx_bad_huge_pads) { check_bad("fuzz_conv_huge_pads.onnx", PC_ERR_ATTR, "Conv \"conv\": kernel, strides, dilations and pads must be below 2^31"); }
PC_TEST(onnx_bad_huge_hidden) { check_bad("fuzz_lstm_huge_hidden.onnx", PC_ERR_ATTR, "LSTM \"lstm\": hidden_size 9223372036854775807 is outside [1, 2^31)"); }
PC_TEST(onnx_bad_huge_ct_pads) { check_bad("fuzz_convtranspose_huge_pads.onnx", PC_ERR_ATTR, "ConvTranspose \"convt\": strides, dilations, pads, output_padding and output_shape must be below 2^31"); }
PC_TEST(onnx_bad_huge_window) { check_bad("fuzz_pool_huge_window.onnx", PC_ERR_UNSUPPORTED, "MaxPool \"pool\": pool window of 90000 taps: more than 65536"); }
PC_TEST(onnx_bad_negative_dim) { check_bad("negative_dim.onnx", PC_ERR_RANGE, "dim 0 is -3"); }
PC_TEST(onnx_bad_short_raw) { check_bad("short_raw.onnx", PC_ERR_RANGE, "raw_data has 10 bytes"); }
/* an If without its branches: the error names the node and the missing attribute */
PC_TEST(onnx_bad_control_flow) { check_bad("control_flow.onnx", PC_ERR_ATTR, "If \"branch\": graph attribute then_branch"); }
PC_TEST(onnx_bad_undefined_input) { check_bad("undefined_input.onnx", PC_ERR_PARSE, "'missing'"); }
/* an attribute the op's version lacks (Conv's stride for strides) is refused, not ignored for its default */
PC_TEST(onnx_bad_unknown_attr) {
  check_bad("unknown_attr.onnx", PC_ERR_ATTR,
            "Conv \"conv\": Conv has no attribute 'stride' at opset 17 (its attributes: auto_pad dilations group "
            "kernel_shape pads strides)");
}
/* a graph output declared with another dtype than its node computes */
PC_TEST(onnx_bad_declared_output) {
  check_bad("declared_output_dtype.onnx", PC_ERR_SHAPE, "graph output 'y': the model declares i64, its nodes compute f32");
}
/* ReduceMean's axes as an attribute at opset 18, where it is an input: refused, not a reduction over every axis */
PC_TEST(onnx_bad_moved_attr) {
  check_bad("moved_axes_attr.onnx", PC_ERR_ATTR,
            "ReduceMean \"mean\": attribute 'axes' is input 1 of ReduceMean from opset 18 on (the model imports opset 18)");
}

/* protobuf-c unpacks nested messages recursively: these small models overflowed the stack (SIGSEGV) */
PC_TEST(onnx_bad_deep_sequence_type) {
  check_bad("deep_sequence_type.onnx", PC_ERR_RANGE, "messages nested deeper than 128 levels");
}
PC_TEST(onnx_bad_deep_if) { check_bad("deep_if.onnx", PC_ERR_RANGE, "messages nested deeper than 128 levels"); }
/* within the wire limit, the importer's own recursion over bodies has its limit */
PC_TEST(onnx_bad_nested_if_40) {
  check_bad("nested_if_40.onnx", PC_ERR_RANGE, "If \"if8\": subgraph bodies nested deeper than 32 levels");
}
/* what real models nest stays accepted: 6 If levels, each with both branches, as ONNX Runtime runs it */
PC_TEST(onnx_nested_if_6) {
  pc_graph *g = load_data("onnx_good", "nested_if_6.onnx");
  CHECK_MSG(g && g->status == PC_OK, "%s", pc_error(g));
  pc_graph_free(g);
}
/* malformed wire data: a length past the end, a group, field number 0 */
PC_TEST(onnx_wire_malformed) {
  static const struct {
    unsigned char b[8];
    size_t n;
    const char *why;
  } cases[] = {{{0x3a, 0x05, 0x0a}, 3, "runs past"}, {{0x3b}, 1, "wire type"}, {{0x02, 0x00}, 2, "tag"},
               {{0x08, 0x80}, 2, "varint"}, {{0x3a, 0x02, 0x0a, 0x05}, 4, "runs past"}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char msg[200] = "";
    pc_status st = ox_wire_check(cases[i].b, cases[i].n, &onnx__model_proto__descriptor, OX_MAX_MSG_DEPTH, msg,
                                 sizeof msg);
    CHECK_MSG(st == PC_ERR_PARSE, "case %zu: %s", i, pc_status_name(st));
    CHECK_CONTAINS(msg, cases[i].why);
  }
}

PC_TEST(onnx_missing_file) {
  pc_graph *g = pc_onnx_load("/nonexistent/model.onnx", NULL);
  CHECK(g && g->status == PC_ERR_IO);
  pc_graph_free(g);
}

/* a temp folder holding the external-data model; weights.bin is a real file or a link leaving it */
static int external_setup(char *dir, size_t cap, int as_symlink, const char *outside) {
  char src[1024], path[1200];
  snprintf(dir, cap, "/tmp/primc_onnx_XXXXXX");
  if (!mkdtemp(dir)) return 0;
  snprintf(src, sizeof src, "%s/tests/data/onnx_bad/external_symlink.onnx", pc_test_srcdir());
  size_t len;
  unsigned char *buf = (unsigned char *)pc_test_slurp(src, &len);
  if (!buf) return 0;
  snprintf(path, sizeof path, "%s/model.onnx", dir);
  FILE *f = fopen(path, "wb");
  int ok = f && fwrite(buf, 1, len, f) == len;
  if (f) fclose(f);
  free(buf);
  snprintf(path, sizeof path, "%s/weights.bin", dir);
  if (as_symlink) return ok && symlink(outside, path) == 0;
  float w[4] = {1, 2, 3, 4};
  f = fopen(path, "wb");
  ok = ok && f && fwrite(w, sizeof w, 1, f) == 1;
  if (f) fclose(f);
  return ok;
}

static void external_cleanup(const char *dir) {
  char path[1200];
  snprintf(path, sizeof path, "%s/model.onnx", dir);
  unlink(path);
  snprintf(path, sizeof path, "%s/weights.bin", dir);
  unlink(path);
  rmdir(dir);
}

PC_TEST(onnx_external_symlink_outside) {
  char dir[64], outside[64] = "/tmp/primc_onnx_out_XXXXXX", model[128];
  int fd = mkstemp(outside);
  CHECK(fd >= 0);
  if (fd < 0) return;
  float w[4] = {0};
  CHECK(write(fd, w, sizeof w) == (ssize_t)sizeof w);
  close(fd);
  CHECK(external_setup(dir, sizeof dir, 1, outside));
  snprintf(model, sizeof model, "%s/model.onnx", dir);
  pc_graph *g = pc_onnx_load(model, NULL);
  CHECK(g && g->status == PC_ERR_IO);
  CHECK_CONTAINS(pc_error(g), "outside the model directory");
  pc_graph_free(g);
  external_cleanup(dir);
  unlink(outside);
}

PC_TEST(onnx_external_inside) {
  char dir[64], model[128];
  CHECK(external_setup(dir, sizeof dir, 0, NULL));
  snprintf(model, sizeof model, "%s/model.onnx", dir);
  pc_graph *g = pc_onnx_load(model, NULL);
  CHECK_MSG(g && g->status == PC_OK, "load: %s", pc_error(g));
  const float *w = NULL;
  for (int i = 0; g && i < g->n_values; i++)
    if (g->values[i]->name && strcmp(g->values[i]->name, "w") == 0) w = pc_const_data(g->values[i]);
  CHECK(w && w[0] == 1 && w[3] == 4);
  pc_graph_free(g);
  external_cleanup(dir);
}

PC_TEST(onnx_external_from_buffer_without_dir) {
  char src[1024];
  snprintf(src, sizeof src, "%s/tests/data/onnx_bad/external_symlink.onnx", pc_test_srcdir());
  size_t len;
  unsigned char *buf = (unsigned char *)pc_test_slurp(src, &len);
  CHECK(buf != NULL);
  if (!buf) return;
  pc_graph *g = pc_onnx_load_buffer(buf, len, NULL, NULL);
  CHECK(g && g->status == PC_ERR_IO);
  pc_graph_free(g);
  free(buf);
}

/* every prefix of a good model is rejected cleanly or accepted, never crashes */
PC_TEST(onnx_every_truncation) {
  char src[1024];
  snprintf(src, sizeof src, "%s/tests/data/onnx_good/mlp.onnx", pc_test_srcdir());
  size_t len;
  unsigned char *buf = (unsigned char *)pc_test_slurp(src, &len);
  CHECK(buf != NULL);
  int rejected = 0;
  for (size_t n = 0; buf && n < len; n++) {
    pc_graph *g = pc_onnx_load_buffer(buf, n, NULL, NULL);
    rejected += g && g->status != PC_OK;
    pc_graph_free(g);
  }
  CHECK(buf == NULL || rejected == (int)len);
  free(buf);
}

static int load_pb(const char *name, pc_tensor *t) {
  char path[1024];
  snprintf(path, sizeof path, "%s/tests/data/onnx_good/%s", pc_test_srcdir(), name);
  return pc_test_read_pb(path, t);
}

/* runs a good model on its saved input and compares with onnxruntime's output */
static void check_good(const char *stem) {
  char name[256];
  snprintf(name, sizeof name, "%s.onnx", stem);
  pc_graph *g = load_data("onnx_good", name);
  CHECK_MSG(g && g->status == PC_OK, "%s: %s", stem, pc_error(g));
  pc_tensor in, want, out;
  memset(&out, 0, sizeof out);
  snprintf(name, sizeof name, "%s.input_0.pb", stem);
  int ok = load_pb(name, &in);
  snprintf(name, sizeof name, "%s.output_0.pb", stem);
  ok = load_pb(name, &want) && ok;
  CHECK(ok);
  if (ok && g && g->status == PC_OK && g->n_inputs == 1 && g->n_outputs == 1) {
    pc_status st = pc_interp(g, &in, 1, &out, 1);
    CHECK_MSG(st == PC_OK, "%s: interp: %s", stem, pc_error(g));
    int same = st == PC_OK && out.rank == want.rank && out.dtype == PC_f32;
    for (int i = 0; same && i < out.rank; i++) same = out.dims[i] == want.dims[i];
    CHECK_MSG(same, "%s: output shape", stem);
    for (int64_t k = 0; same && k < pc_tensor_numel(&want); k++)
      CHECK_NEAR(((float *)out.data)[k], ((float *)want.data)[k], 1e-5 + 1e-4 * fabs(((float *)want.data)[k]));
  }
  if (ok) pc_tensor_free(&in), pc_tensor_free(&want);
  pc_tensor_free(&out);
  pc_graph_free(g);
}

PC_TEST(onnx_good_mlp) { check_good("mlp"); }

/* DequantizeLinear with block_size 2^63-1 over an axis of 4: one block of the whole axis (the rounding of
 * the block count overflowed: fuzz_mutate); values as onnx.reference gives them with block_size 4 */
PC_TEST(onnx_dequant_huge_block) {
  pc_graph *g = load_data("onnx_bad", "fuzz_dequant_huge_block.onnx");
  if (!CHECK_MSG(g && g->status == PC_OK, "%s", pc_error(g))) return pc_graph_free(g);
  int8_t x[8] = {1, -2, 3, 4, 5, 6, -7, 8};
  static const float want[8] = {0.5f, -1.0f, 1.5f, 2.0f, 10.0f, 12.0f, -14.0f, 16.0f};
  pc_tensor in = {PC_i8, 2, {2, 4}, x}, out;
  memset(&out, 0, sizeof out);
  if (CHECK_MSG(pc_interp(g, &in, 1, &out, 1) == PC_OK, "%s", pc_error(g)) && CHECK_INT(pc_tensor_numel(&out), 8))
    for (int i = 0; i < 8; i++) CHECK_NEAR(((float *)out.data)[i], want[i], 0);
  pc_tensor_free(&out);
  pc_graph_free(g);
}

/* TfIdfVectorizer with max_skip_count 2^62: skips past a row's length add nothing and are not tried (the
 * import once looped 2^62 times; fuzz_mutate); counts as onnx.reference gives them with skip 5 */
PC_TEST(onnx_tfidf_huge_skip) {
  pc_graph *g = load_data("onnx_bad", "fuzz_tfidf_huge_skip.onnx");
  if (!CHECK_MSG(g && g->status == PC_OK, "%s", pc_error(g))) return pc_graph_free(g);
  int64_t x[12] = {5, 7, 3, 5, 9, 3, 3, 1, 5, 5, 2, 3};
  static const float want[6] = {2, 1, 1, 2, 0, 2};
  pc_tensor in = {PC_i64, 2, {2, 6}, x}, out;
  memset(&out, 0, sizeof out);
  if (CHECK_MSG(pc_interp(g, &in, 1, &out, 1) == PC_OK, "%s", pc_error(g)) && CHECK_INT(pc_tensor_numel(&out), 6))
    for (int i = 0; i < 6; i++) CHECK_NEAR(((float *)out.data)[i], want[i], 0);
  pc_tensor_free(&out);
  pc_graph_free(g);
}
PC_TEST(onnx_good_shape_chain) {
  check_good("shape_chain");
  /* the shape computation must fold away: nothing but the reshape of x is left at run time */
  pc_graph *g = load_data("onnx_good", "shape_chain.onnx");
  int runtime_ops = 0;
  for (int i = 0; g && i < g->n_nodes; i++) runtime_ops += g->nodes[i]->op != PC_OP_constant;
  CHECK_INT(runtime_ops, 1);
  pc_graph_free(g);
}

/* inputs the fuzzer once crashed on (tests/data/onnx_bad/fuzz_*): each now ends in a status */
PC_TEST(onnx_fuzz_regressions) {
  char dir[1024], path[1400];
  snprintf(dir, sizeof dir, "%s/tests/data/onnx_bad", pc_test_srcdir());
  DIR *d = opendir(dir);
  CHECK(d != NULL);
  int n = 0;
  struct dirent *e;
  while (d && (e = readdir(d))) {
    if (strncmp(e->d_name, "fuzz_", 5) != 0) continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    pc_graph *g = pc_onnx_load(path, NULL);
    CHECK_MSG(g != NULL, "%s", e->d_name);
    CHECK_MSG(!g || strchr(pc_error(g), '\n') == NULL, "%s: one-line message", e->d_name);
    /* what imports goes on, as in tests/fuzz/fuzz_mutate.c: the -O2 pipeline and the kernel IR */
    kir_program p;
    pc_pipeline_opts po = {.opt_level = 2};
    if (g && g->status == PC_OK && pc_pipeline_run(g, &po) == PC_OK && kir_build(g, &p) == PC_OK &&
        kir_pack_weights(&p) == PC_OK)
      kir_pool_calls(&p);
    CHECK_MSG(!g || strchr(pc_error(g), '\n') == NULL, "%s: one-line message", e->d_name);
    pc_graph_free(g);
    n++;
  }
  if (d) closedir(d);
  CHECK(n > 0);
}

/* Folding at import keeps results that grow past their operands symbolic: a conv's bias broadcast over
 * its map stays [C] (it once became a constant of the map's size, resnet_tiny's constants then taking
 * 577 KB from a 323 KB file). So the constants of a model never outweigh the file they came from. */
PC_TEST(onnx_import_keeps_broadcasts_unfolded) {
  static const char *const models[] = {"resnet_tiny", "yolo_tiny", "encoder_tiny", "mlp"};
  for (size_t m = 0; m < sizeof models / sizeof models[0]; m++) {
    char path[1024];
    snprintf(path, sizeof path, "%s/models/%s/model.onnx", pc_test_srcdir(), models[m]);
    FILE *f = fopen(path, "rb");
    if (!CHECK_MSG(f != NULL, "%s: cannot open", path)) return;
    fseek(f, 0, SEEK_END);
    long file_bytes = ftell(f);
    fclose(f);
    pc_graph *g = pc_onnx_load(path, NULL);
    if (!CHECK_MSG(g && g->status == PC_OK, "%s: %s", models[m], pc_error(g))) return;
    size_t const_bytes = 0;
    for (int i = 0; i < g->n_nodes; i++)
      if (g->nodes[i]->op == PC_OP_constant) const_bytes += g->nodes[i]->nbytes;
    CHECK_MSG(const_bytes <= (size_t)file_bytes, "%s: %zu bytes of constants from a %ld-byte file", models[m],
              const_bytes, file_bytes);
    pc_graph_free(g);
  }
}
