/* tests/unit/test_text.c: the text format (print/parse round trips, tests/ir files, malformed input) and safetensors.
 *
 * tests/ir/NAME.txt convention: a file is a graph in the text format. The driver parses it (aten:: ops
 * through pc_aten_hook), prints the result and compares with the expected text: the part after a
 * line "# EXPECT" when there is one, else the file itself with its '#' comment lines dropped.
 * Files with a line starting "# PASS:" belong to the pass driver and are skipped here. Every
 * printed graph must also re-parse and print identically. */
#include "frontend/frontend.h"
#include "ir/ir.h"
#include "tests/test.h"
#include "tests/unit/helpers.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pc_graph *parse_str(const char *text) {
  pc_parse_opts o = {pc_aten_hook, NULL};
  return pc_graph_parse(text, strlen(text), "t.txt", &o);
}

/* print(parse(s)) == s, and the status is OK */
static int roundtrips(const char *name, const char *text) {
  pc_graph *g = parse_str(text);
  int ok = CHECK_MSG(g && g->status == PC_OK, "%s: %s", name, pc_error(g));
  char *p = ok ? pc_graph_to_string(g) : NULL;
  if (ok) ok = CHECK_STR(p, text);
  free(p);
  pc_graph_free(g);
  return ok;
}

/* the file's text without '#' comment lines */
static char *strip_comments(const char *s) {
  char *out = malloc(strlen(s) + 1);
  size_t o = 0;
  while (*s) {
    const char *eol = strchr(s, '\n');
    size_t n = eol ? (size_t)(eol - s) + 1 : strlen(s);
    if (s[0] != '#') memcpy(out + o, s, n), o += n;
    s += n;
  }
  out[o] = 0;
  return out;
}

static void run_ir_file(const char *path) {
  size_t len = 0;
  char *text = pc_test_slurp(path, &len);
  if (!CHECK_MSG(text != NULL, "cannot read %s", path)) return;
  if (strstr(text, "\n# PASS:") || !strncmp(text, "# PASS:", 7)) {
    free(text);
    return;
  }
  char *exp_mark = strstr(text, "# EXPECT\n");
  char *expected = exp_mark ? strdup(exp_mark + 9) : strip_comments(text);
  size_t in_len = exp_mark ? (size_t)(exp_mark - text) : len;
  pc_parse_opts o = {pc_aten_hook, NULL};
  pc_graph *g = pc_graph_parse(text, in_len, path, &o);
  if (CHECK_MSG(g && g->status == PC_OK, "%s: %s", path, pc_error(g))) {
    char *p = pc_graph_to_string(g);
    CHECK_MSG(p && !strcmp(p, expected), "%s: printed\n%s\nexpected\n%s", path, p ? p : "(null)", expected);
    if (p) roundtrips(path, p);
    free(p);
  }
  pc_graph_free(g);
  free(expected);
  free(text);
}

static int by_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

PC_TEST(text_ir_files) {
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/tests/ir", pc_test_srcdir());
  DIR *d = opendir(dir);
  if (!CHECK_MSG(d != NULL, "cannot open %s", dir)) return;
  char *names[512];
  int n = 0;
  for (struct dirent *e; (e = readdir(d)) && n < 512;) {
    size_t l = strlen(e->d_name);
    if (l > 4 && !strcmp(e->d_name + l - 4, ".txt")) names[n++] = strdup(e->d_name);
  }
  closedir(d);
  qsort(names, (size_t)n, sizeof *names, by_str);
  CHECK_MSG(n >= 5, "only %d files in %s", n, dir);
  for (int i = 0; i < n; i++) {
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    run_ir_file(path);
    free(names[i]);
  }
}

/* ---------------------------------------------------------------- round trips of built graphs */

PC_TEST(text_roundtrip_constants) {
  pc_graph *g = pc_graph_new();
  float f[6] = {1.5f, -0.0f, 1e-45f, 3.4028235e38f, 0.1f, (float)(1.0 / 3)};
  pc_const(g, pc_type_make(PC_f32, 2, (int64_t[]){2, 3}), f);
  double d[3] = {0.1, 1e308, -2.5e-320};
  pc_const(g, pc_type_make(PC_f64, 1, (int64_t[]){3}), d);
  uint16_t h[3] = {pc_f32_to_f16(0.1f), 0x7c00, 0x0401};
  pc_const(g, pc_type_make(PC_f16, 1, (int64_t[]){3}), h);
  uint16_t bf[2] = {pc_f32_to_bf16(3.14159f), 0xff80};
  pc_const(g, pc_type_make(PC_bf16, 1, (int64_t[]){2}), bf);
  int64_t i64[2] = {INT64_MIN, INT64_MAX};
  pc_const(g, pc_type_make(PC_i64, 1, (int64_t[]){2}), i64);
  int8_t i8[2] = {-128, 127};
  pc_const(g, pc_type_make(PC_i8, 1, (int64_t[]){2}), i8);
  uint8_t b[3] = {1, 0, 1};
  pc_const(g, pc_type_make(PC_bool, 1, (int64_t[]){3}), b);
  float c[4] = {1, -2, 0.5f, 0};
  pc_const(g, pc_type_make(PC_c64, 1, (int64_t[]){2}), c);
  pc_value *nanv = pc_scalar(g, PC_f32, NAN);
  float big[100] = {0};
  pc_value *bigv = pc_const(g, pc_type_make(PC_f32, 1, (int64_t[]){100}), big);
  pc_output_add(g, nanv);
  pc_output_add(g, bigv);
  if (!CHECK_MSG(g->status == PC_OK, "%s", pc_error(g))) return;
  char *s = pc_graph_to_string(g);
  CHECK_CONTAINS(s, "f32[2,3] = constant(value=[1.5,-0,1e-45,3.4028235e+38,0.1,0.33333334])");
  CHECK_CONTAINS(s, "value=[0.1,1e+308,-2.5e-320]");
  CHECK_CONTAINS(s, "f16[3] = constant(value=[0.099975586,inf,6.109476e-05])");
  CHECK_CONTAINS(s, "value=[-9223372036854775808,9223372036854775807]");
  CHECK_CONTAINS(s, "c64[2] = constant(value=[[1,-2],[0.5,0]])");
  CHECK_CONTAINS(s, "value=[nan]");
  CHECK_CONTAINS(s, "constant(key=\"const9\")");
  roundtrips("constants", s);
  /* the parsed data has the same bits */
  pc_graph *g2 = parse_str(s);
  if (CHECK(g2 && g2->status == PC_OK)) {
    CHECK(memcmp(g2->nodes[0]->data, f, sizeof f) == 0);
    CHECK(memcmp(g2->nodes[1]->data, d, sizeof d) == 0);
    CHECK(memcmp(g2->nodes[2]->data, h, sizeof h) == 0);
    CHECK(memcmp(g2->nodes[3]->data, bf, sizeof bf) == 0);
    CHECK(memcmp(g2->nodes[4]->data, i64, sizeof i64) == 0);
    CHECK(memcmp(g2->nodes[7]->data, c, sizeof c) == 0);
    CHECK(g2->nodes[9]->data == NULL);
  }
  pc_graph_free(g2);
  free(s);
  pc_graph_free(g);
}

/* f16 subnormals print as their float value and must convert back to the same bits */
PC_TEST(text_roundtrip_f16_subnormal) {
  pc_graph *g = pc_graph_new();
  uint16_t h[3] = {0x0001, 0x8200, 0x03ff};
  pc_output_add(g, pc_const(g, pc_type_make(PC_f16, 1, (int64_t[]){3}), h));
  char *s = pc_graph_to_string(g);
  CHECK_CONTAINS(s, "value=[5.9604645e-08,-3.0517578e-05,6.097555e-05]");
  pc_graph *g2 = parse_str(s);
  if (CHECK_MSG(g2 && g2->status == PC_OK, "%s", pc_error(g2)))
    CHECK_MSG(memcmp(g2->nodes[0]->data, h, sizeof h) == 0, "f16 subnormals changed: is pc_f32_to_f16 exact on them?");
  pc_graph_free(g2);
  free(s);
  pc_graph_free(g);
}

PC_TEST(text_roundtrip_names_attrs_syms) {
  pc_graph *g = pc_graph_new();
  int b = pc_sym_add(g, "batch", 1, 64);
  int s = pc_sym_add(g, "seq len", 0, INT64_MAX);
  pc_value *x = pc_input_add(g, "in/x:0", pc_type_make(PC_f32, 2, (int64_t[]){PC_SYM(b), PC_SYM(s)}));
  pc_value *y = pc_input_add(g, "in.x_0", pc_type_make(PC_f32, 2, (int64_t[]){PC_SYM(b), PC_SYM(s)}));
  pc_set_origin(g, "Add \"a\\b\"\n"); /* the newline kept as the text \x0a (pc_set_origin escapes) */
  pc_value *z = pc_add(g, x, y);
  pc_set_origin(g, NULL);
  pc_value_set_name(g, z, "in_x_0");
  pc_value *w = pc_mul(g, z, z);
  pc_value_set_name(g, w, "4");
  pc_value *cv = pc_convert(g, pc_input_add(g, "s", pc_type_make(PC_f32, 1, (int64_t[]){2})), PC_f16);
  pc_attr pa[4] = {pc_a_ints("low", (int64_t[]){1}, 1), pc_a_ints("high", (int64_t[]){-1}, 1),
                   pc_a_ints("interior", (int64_t[]){2}, 1), pc_a_float("value", 2)};
  pc_value *p = pc_build(g, PC_OP_pad, &cv, 1, pa, 4);
  pc_output_add(g, p);
  pc_output_add(g, w);
  pc_output_add(g, x);
  if (!CHECK_MSG(g->status == PC_OK, "%s", pc_error(g))) return;
  char *txt = pc_graph_to_string(g);
  const char *want =
      "sym batch in [1, 64]\n"
      "graph(%in_x_0 : f32[batch,\"seq len\"], %in.x_0 : f32[batch,\"seq len\"], %s : f32[2]):\n"
      "  %in_x_0_1 : f32[batch,\"seq len\"] = add(%in_x_0, %in.x_0) loc(\"Add \\\"a\\\\b\\\"\\\\x0a\")\n"
      "  %4 : f32[batch,\"seq len\"] = mul(%in_x_0_1, %in_x_0_1)\n"
      "  %5 : f16[2] = convert_element_type(%s, dtype=f16)\n"
      "  %6 : f16[4] = pad(%5, low=[1], high=[-1], interior=[2], value=2.0)\n"
      "  return (%6, %4, %in_x_0)\n";
  CHECK_STR(txt, want);
  roundtrips("names", txt);
  free(txt);
  pc_graph_free(g);
}

PC_TEST(text_types_inferred_and_checked) {
  roundtrips("multi-result",
             "graph(%x : f32[3,4]):\n"
             "  %v : f32[3,4], %i : i64[3,4] = sort(%x, axis=1, descending=1)\n"
             "  return (%v, %i)\n");
  pc_graph *g = parse_str("graph(%x : f32[3]):\n  %y = neg(%x)\n  return (%y)\n");
  if (CHECK(g && g->status == PC_OK)) {
    char *s = pc_graph_to_string(g);
    CHECK_CONTAINS(s, "%y : f32[3] = neg(%x)");
    free(s);
  }
  pc_graph_free(g);
}

/* ---------------------------------------------------------------- malformed input */

typedef struct bad_case {
  const char *what, *text, *error; /* error: expected "line:col: message" fragment */
} bad_case;

static const bad_case bad_cases[] = {
    {"unknown op", "graph(%x : f32[2]):\n  %y = frobnicate(%x)\n  return (%y)\n", "t.txt:2:8: unknown op 'frobnicate'"},
    {"unknown aten op", "graph(%x : f32[2]):\n  %y = aten::frob(%x)\n  return (%y)\n", "t.txt:2:8: unknown op 'aten::frob'"},
    {"wrong arity", "graph(%x : f32[2]):\n  %y = add(%x)\n  return (%y)\n", "t.txt:2:8: add takes 2 operands, got 1"},
    {"wrong result count", "graph(%x : f32[2]):\n  %y = sort(%x, axis=0, descending=0)\n  return (%y)\n",
     "2:8: sort has 2 results, 1 named"},
    {"aten arity", "graph(%x : f32[2]):\n  %y = aten::relu(%x, %x)\n  return (%y)\n", "2:8: aten::relu: takes 1 operand, got 2"},
    {"unknown attribute type", "graph(%x : f32[2]):\n  %y = convert_element_type(%x, dtype=f33)\n  return (%y)\n",
     "2:39: unknown attribute value 'f33'"},
    {"float list attribute", "graph(%x : f32[2]):\n  %y = reshape(%x, shape=[2.5])\n  return (%y)\n",
     "2:20: attribute 'shape': only integer lists"},
    {"shape mismatch", "graph(%x : f32[2], %z : f32[3]):\n  %y = add(%x, %z)\n  return (%y)\n", "2:8: add:"},
    {"declared type mismatch", "graph(%x : f32[2]):\n  %y : f32[3] = neg(%x)\n  return (%y)\n",
     "2:3: %y is declared f32[3] but its type is f32[2]"},
    {"bad dtype", "graph(%x : f31[2]):\n  return (%x)\n", "1:12: unknown dtype 'f31'"},
    {"undefined value", "graph(%x : f32[2]):\n  %y = neg(%q)\n  return (%y)\n", "2:12: undefined value %q"},
    {"redefinition", "graph(%x : f32[2]):\n  %x = neg(%x)\n  return (%x)\n", "2:3: redefinition of %x"},
    {"truncated file", "graph(%x : f32[2]):\n  %y = add(%x, ", "2:16: unexpected end of file"},
    {"missing return", "graph(%x : f32[2]):\n  %y = neg(%x)\n", "3:1: missing return"},
    {"garbage", "graph(%x : f32[2]):\n  %y = neg(%x) @\n  return (%y)\n", "2:16: unexpected character '@'"},
    {"binary garbage", "graph(%x : f32[2]):\x01\n", "1:20: unexpected character \\x01"},
    {"huge integer", "graph(%x : f32[2]):\n  %y = iota(dtype=i64, shape=[99999999999999999999], axis=0)\n  return (%y)\n",
     "2:31: integer 99999999999999999999 is out of range"},
    {"huge dim", "graph(%x : f32[1099511627777]):\n  return (%x)\n", "1:16: bad dim"},
    {"huge numel", "graph(%x : f32[1099511627776,1099511627776]):\n  return (%x)\n", "more than 2^48 elements"},
    {"constant count", "graph():\n  %c : f32[3] = constant(value=[1,2])\n  return (%c)\n", "2:26: constant has 2 values"},
    {"constant range", "graph():\n  %c : i8[1] = constant(value=[200])\n  return (%c)\n", "2:32: 200 is out of range for i8"},
    {"constant f32 range", "graph():\n  %c : f32[1] = constant(value=[1e39])\n  return (%c)\n", "out of range for f32"},
    {"constant untyped", "graph():\n  %c = constant(value=[1])\n  return (%c)\n", "2:3: a constant needs a declared type"},
    {"unterminated string", "graph():\n  %c : f32[1] = constant(key=\"abc)\n", "2:30: unterminated string"},
    {"text after return", "graph(%x : f32[2]):\n  return (%x)\n  %y = neg(%x)\n", "3:3: unexpected 'y' after return"},
    {"rank too large", "graph(%x : f32[1,1,1,1,1,1,1,1,1]):\n  return (%x)\n", "rank exceeds 8"},
    {"empty file", "", "1:1: unexpected end of file, expected 'graph'"},
    {"duplicate attr", "graph(%x : f32[2]):\n  %y = reduce_sum(%x, axes=[0], axes=[0])\n  return (%y)\n",
     "2:33: duplicate attribute 'axes'"},
    {"aten attribute error", "graph(%x : f32[2,3]):\n  %y = aten::gelu(%x, approximate=\"fast\")\n  return (%y)\n",
     "2:8: aten::gelu: approximate=\"fast\""},
    {"sym bound", "sym n in [5, 2]\ngraph():\n  return ()\n", "1:5: bad bound for symbol n"},
};

PC_TEST(text_malformed_inputs) {
  for (size_t i = 0; i < sizeof bad_cases / sizeof *bad_cases; i++) {
    const bad_case *c = &bad_cases[i];
    pc_graph *g = parse_str(c->text);
    if (!CHECK_MSG(g && g->status != PC_OK, "%s: accepted", c->what)) {
      pc_graph_free(g);
      continue;
    }
    CHECK_MSG(strstr(pc_error(g), c->error) != NULL, "%s: error \"%s\" lacks \"%s\"", c->what, pc_error(g), c->error);
    CHECK_MSG(strchr(pc_error(g), '\n') == NULL, "%s: error is not one line", c->what);
    pc_graph_free(g);
  }
}

/* every prefix of a valid file fails cleanly (or parses), never crashes or hangs */
PC_TEST(text_truncations_fail_cleanly) {
  const char *text =
      "sym b in [1, 8]\n"
      "graph(%x : f32[b,4], %w : f32[4,4]):\n"
      "  %c : f32[2] = constant(value=[1.5,-inf])  # comment\n"
      "  %y : f32[b,4] = dot_general(%x, %w, lhs_contract=[1], rhs_contract=[0], lhs_batch=[], rhs_batch=[]) loc(\"mm\")\n"
      "  %z = aten::relu(%y)\n"
      "  return (%z, %c)\n";
  size_t n = strlen(text);
  int failed = 0;
  for (size_t k = 0; k < n; k++) {
    pc_parse_opts o = {pc_aten_hook, NULL};
    pc_graph *g = pc_graph_parse(text, k, "t.txt", &o);
    failed += g && g->status != PC_OK && strncmp(pc_error(g), "t.txt:", 6) == 0;
    pc_graph_free(g);
  }
  CHECK_INT(failed, (int)n - 1); /* only the prefix missing just the final newline parses */
  pc_graph *g = parse_str(text);
  CHECK_MSG(g && g->status == PC_OK, "%s", pc_error(g));
  pc_graph_free(g);
}

PC_TEST(text_no_hook_rejects_aten) {
  const char *t = "graph(%x : f32[2]):\n  %y = aten::relu(%x)\n  return (%y)\n";
  pc_graph *g = pc_graph_parse(t, strlen(t), "t.txt", NULL);
  CHECK(g && g->status == PC_ERR_PARSE);
  CHECK_CONTAINS(pc_error(g), "t.txt:2:8: unknown op 'aten::relu'");
  pc_graph_free(g);
}

/* ---------------------------------------------------------------- safetensors */

static const char *tmp_path(char *buf, size_t n, const char *name) {
  snprintf(buf, n, "/tmp/primc_text_test_%d_%s", (int)getpid(), name);
  return buf;
}

static void write_file(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  if (f) {
    fwrite(data, 1, n, f);
    fclose(f);
  }
}

PC_TEST(text_safetensors_save_bind) {
  char path[256];
  tmp_path(path, sizeof path, "w.safetensors");
  pc_graph *g = pc_graph_new();
  float w[70];
  for (int i = 0; i < 70; i++) w[i] = (float)i * 0.5f;
  int64_t ids[3] = {7, -1, 3};
  pc_value *a = pc_const(g, pc_type_make(PC_f32, 2, (int64_t[]){7, 10}), w);
  pc_value *b = pc_const(g, pc_type_make(PC_i64, 1, (int64_t[]){3}), ids);
  pc_output_add(g, a);
  pc_output_add(g, b);
  CHECK_INT(pc_safetensors_save(g, path), PC_OK);
  char *txt = pc_graph_to_string(g);
  pc_graph *g2 = parse_str(txt);
  if (CHECK(g2 && g2->status == PC_OK)) {
    CHECK(g2->nodes[0]->data == NULL);
    CHECK_INT(pc_safetensors_bind(g2, path), PC_OK);
    CHECK(g2->nodes[0]->data && memcmp(g2->nodes[0]->data, w, sizeof w) == 0);
    CHECK(((uintptr_t)g2->nodes[0]->data & 63) == 0);
    char *txt2 = pc_graph_to_string(g2);
    CHECK_STR(txt2, txt);
    free(txt2);
  }
  pc_graph_free(g2);
  free(txt);
  pc_graph_free(g);
  remove(path);
}

/* a file whose JSON header is `json` and data section `data_len` zero bytes */
static void write_st(const char *path, const char *json, size_t data_len, int64_t hlen_override) {
  size_t hl = strlen(json);
  size_t total = 8 + hl + data_len;
  unsigned char *buf = calloc(1, total);
  uint64_t h = hlen_override >= 0 ? (uint64_t)hlen_override : hl;
  for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(h >> (8 * i));
  memcpy(buf + 8, json, hl);
  write_file(path, buf, total);
  free(buf);
}

typedef struct bad_st {
  const char *what, *json;
  size_t data_len;
  int64_t hlen;
  const char *error;
} bad_st;

static const bad_st bad_sts[] = {
    {"header too long", "{}", 0, 1000, "header length 1000 exceeds the file"},
    {"not json", "{\"w\": [}", 0, -1, "malformed safetensors header"},
    {"unterminated", "{\"w\": {\"dtype\": \"F32", 0, -1, "unterminated string"},
    {"bad offsets", "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}}", 8, -1, "do not fit 8 bytes"},
    {"size mismatch", "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,20]}}", 24, -1, "do not fit"},
    {"bad dtype", "{\"w\":{\"dtype\":\"F8\",\"shape\":[2,3],\"data_offsets\":[0,6]}}", 6, -1, "unsupported dtype F8"},
    {"missing field", "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3]}}", 24, -1, "needs dtype, shape and data_offsets"},
    {"negative dim", "{\"w\":{\"dtype\":\"F32\",\"shape\":[-2,3],\"data_offsets\":[0,24]}}", 24, -1, "non-negative integer"},
    {"huge dim", "{\"w\":{\"dtype\":\"F32\",\"shape\":[9223372036854775807,3],\"data_offsets\":[0,24]}}", 24, -1, "too large"},
    {"shape mismatch", "{\"w\":{\"dtype\":\"F32\",\"shape\":[3,2],\"data_offsets\":[0,24]}}", 24, -1,
     "tensor 'w' is f32[3,2], the constant is f32[2,3]"},
    {"dtype mismatch", "{\"w\":{\"dtype\":\"I32\",\"shape\":[2,3],\"data_offsets\":[0,24]}}", 24, -1, "is i32[2,3]"},
    {"missing tensor", "{\"v\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}}", 24, -1, "no tensor 'w'"},
    {"trailing", "{} x", 0, -1, "text after the header"},
    {"deep metadata", "{\"__metadata__\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}", 0, -1,
     "nesting too deep"},
};

PC_TEST(text_safetensors_malformed) {
  char path[256];
  tmp_path(path, sizeof path, "bad.safetensors");
  for (size_t i = 0; i < sizeof bad_sts / sizeof *bad_sts; i++) {
    const bad_st *c = &bad_sts[i];
    write_st(path, c->json, c->data_len, c->hlen);
    pc_graph *g = parse_str("graph():\n  %w : f32[2,3] = constant(key=\"w\")\n  return (%w)\n");
    if (!CHECK(g && g->status == PC_OK)) continue;
    pc_status st = pc_safetensors_bind(g, path);
    CHECK_MSG(st != PC_OK && strstr(pc_error(g), c->error), "%s: \"%s\" lacks \"%s\"", c->what, pc_error(g), c->error);
    pc_graph_free(g);
  }
  write_file(path, "abc", 3);
  pc_graph *g = parse_str("graph():\n  %w : f32[2,3] = constant(key=\"w\")\n  return (%w)\n");
  CHECK(pc_safetensors_bind(g, path) == PC_ERR_PARSE);
  pc_graph_free(g);
  /* a valid file with metadata and escapes in names binds */
  write_st(path, "{\"__metadata__\":{\"a\":\"b\"},\"w\\u002e0\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}}", 24, -1);
  g = parse_str("graph():\n  %w : f32[2,3] = constant(key=\"w.0\")\n  return (%w)\n");
  CHECK_MSG(pc_safetensors_bind(g, path) == PC_OK, "%s", pc_error(g));
  pc_graph_free(g);
  remove(path);
}

PC_TEST(text_load_file_with_weights) {
  char tp[256], wp[256];
  tmp_path(tp, sizeof tp, "m.txt");
  tmp_path(wp, sizeof wp, "m.safetensors");
  const char *text = "graph(%x : f32[2]):\n  %b : f32[2] = constant(key=\"bias\")\n  %y = aten::add(%x, %b)\n  return (%y)\n";
  write_file(tp, text, strlen(text));
  write_st(wp, "{\"bias\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, -1);
  pc_import_opts o = {.weights_path = wp};
  pc_graph *g = pc_text_load(tp, &o);
  CHECK_MSG(g && g->status == PC_OK, "%s", pc_error(g));
  CHECK(g && g->nodes[0]->data != NULL);
  pc_graph_free(g);
  g = pc_text_load("/nonexistent/x.txt", NULL);
  CHECK(g && g->status == PC_ERR_IO);
  pc_graph_free(g);
  remove(tp);
  remove(wp);
}

/* single-byte mutations of a valid file: each parses or fails with a located one-line error,
 * and whatever parses round-trips */
PC_TEST(text_mutations_fail_cleanly) {
  const char *text =
      "sym b in [1, 8]\n"
      "graph(%x : f32[b,4], %w : f32[4,4], %i : i64[2]):\n"
      "  %c : f32[2] = constant(value=[1.5,-inf])\n"
      "  %y : f32[b,4] = dot_general(%x, %w, lhs_contract=[1], rhs_contract=[0], lhs_batch=[], rhs_batch=[]) loc(\"mm\")\n"
      "  %z = aten::softmax(%y, dim=1)\n"
      "  %s = scatter(%c, %i, %c, axis=0, reduce=\"add\")\n"
      "  return (%z, %s)\n";
  static const char subst[] = {'\0', ' ', '%', '"', '[', ']', '(', ')', ',', '=', '9', '-', 'x', '\\', ':', '\n'};
  size_t n = strlen(text);
  char *buf = malloc(n + 1);
  int bad = 0, parsed = 0;
  for (size_t k = 0; k < n; k++)
    for (size_t j = 0; j < sizeof subst; j++) {
      memcpy(buf, text, n + 1);
      buf[k] = subst[j];
      pc_parse_opts o = {pc_aten_hook, NULL};
      pc_graph *g = pc_graph_parse(buf, n, "t.txt", &o);
      if (!g) continue;
      if (g->status != PC_OK) {
        bad += strncmp(pc_error(g), "t.txt:", 6) != 0 || strchr(pc_error(g), '\n') != NULL;
      } else {
        parsed++;
        char *p = pc_graph_to_string(g);
        pc_graph *g2 = p ? pc_graph_parse(p, strlen(p), "p.txt", &o) : NULL;
        char *p2 = g2 ? pc_graph_to_string(g2) : NULL;
        bad += !p || !p2 || strcmp(p, p2) != 0;
        free(p);
        free(p2);
        pc_graph_free(g2);
      }
      pc_graph_free(g);
    }
  free(buf);
  CHECK_INT(bad, 0);
  CHECK(parsed > 0);
}
