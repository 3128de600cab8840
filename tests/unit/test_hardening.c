/* tests/unit/test_hardening.c: misuse of the compiled entry points and degenerate graphs (issue 26). */
#include "codegen/codegen.h"
#include "passes/passes.h"
#include "runtime/primc_rt.h"
#include "tests/test.h"
#include "tests/unit/helpers.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

typedef int (*run_fn)(const void *const *, void *const *, void *);

static const char *const two_inputs = "graph(%a : f32[4], %b : f32[4]):\n"
                                      "  %s = add(%a, %b)\n"
                                      "  %e = exp(%s)\n"
                                      "  %t = mul(%e, %a)\n"
                                      "  return (%s, %t)\n";

/* NAME_run answers status 1 for a NULL array or a NULL buffer in one (the header's promise), then runs */
PC_TEST(run_null_buffers_are_status_1) {
  pc_graph *g = pc_graph_parse(two_inputs, strlen(two_inputs), "two.txt", NULL);
  pc_pipeline_opts po = {0};
  po.opt_level = 2;
  if (!CHECK_MSG(g && g->status == PC_OK && pc_pipeline_run(g, &po) == PC_OK, "build: %s", g ? pc_error(g) : "")) {
    pc_graph_free(g);
    return;
  }
  char dir[] = "/tmp/primc-hard-XXXXXX", obj[256], so[256], hdr[256];
  if (!CHECK(mkdtemp(dir))) return;
  snprintf(obj, sizeof obj, "%s/m.o", dir);
  snprintf(so, sizeof so, "%s/m.so", dir);
  snprintf(hdr, sizeof hdr, "%s/m.h", dir);
  pc_codegen_opts o = {0};
  o.emit = PC_EMIT_OBJ, o.output = obj, o.name = "m", o.opt_level = 2;
  void *h = CHECK_MSG(pc_codegen(g, &o) == PC_OK, "codegen: %s", pc_error(g))
                ? pc_test_link_open(obj, so, "-lm -lpthread", "null buffers")
                : NULL;
  run_fn run = h ? (run_fn)dlsym(h, "m_run") : NULL;
  const int64_t *wsz = h ? dlsym(h, "m_workspace_size") : NULL;
  if (CHECK(run && wsz)) {
    float a[4] = {0, 1, -1, 2}, b[4] = {1, 1, 1, -2}, s[4], t[4];
    void *ws = aligned_alloc(64, (size_t)*wsz + 64);
    const void *in_ok[2] = {a, b}, *in_hole[2] = {a, NULL};
    void *out_ok[2] = {s, t}, *out_hole[2] = {NULL, t};
    CHECK_INT(run(in_hole, out_ok, ws), 1);
    CHECK_INT(run(in_ok, out_hole, ws), 1);
    CHECK_INT(run(NULL, out_ok, ws), 1);
    CHECK_INT(run(in_ok, NULL, ws), 1);
    CHECK_INT(run(in_ok, out_ok, ws), 0);
    for (int i = 0; i < 4; i++) {
      CHECK_NEAR(s[i], a[i] + b[i], 0);
      CHECK_NEAR(t[i], expf(a[i] + b[i]) * a[i], 1e-5 * (1 + fabsf(t[i])));
    }
    free(ws);
  }
  if (h) dlclose(h);
  unlink(obj), unlink(so), unlink(hdr), rmdir(dir);
  pc_graph_free(g);
}

/* a graph with no nodes (its output is its input) goes through every pass, fusion included */
PC_TEST(empty_graph_passes) {
  const char *text = "graph(%x : f32[3]):\n  return (%x)\n";
  pc_graph *g = pc_graph_parse(text, strlen(text), "empty.txt", NULL);
  pc_pipeline_opts po = {0};
  po.opt_level = 2;
  CHECK_MSG(g && g->status == PC_OK && pc_pipeline_run(g, &po) == PC_OK, "%s", g ? pc_error(g) : "no graph");
  CHECK_INT(g ? g->n_groups : -1, 0);
  pc_graph_free(g);
}

/* primc_text_escape: control bytes (C0, DEL, UTF-8 C1) as \xNN, other bytes (UTF-8 letters too) as they are,
 * and a short buffer cuts before an escape rather than inside one */
/* a node's origin is escaped once as it is set, short (on the stack) or long (through the heap) */
PC_TEST(origin_escaped_short_and_long) {
  pc_graph *g = pc_graph_new();
  if (!CHECK(g)) return;
  pc_set_origin(g, "Relu \"a\x1b[2Jb\"");
  CHECK_MSG(g->origin && !strcmp(g->origin, "Relu \"a\\x1b[2Jb\""), "got '%s'", g->origin ? g->origin : "(null)");
  char name[600], want[600 + 8];
  memset(name, 'n', sizeof name);
  name[200] = '\x07', name[sizeof name - 1] = 0;
  memcpy(want, name, 200);
  snprintf(want + 200, sizeof want - 200, "\\x07%s", name + 201);
  pc_set_origin(g, name);
  CHECK_MSG(g->origin && !strcmp(g->origin, want), "got %zu bytes", g->origin ? strlen(g->origin) : 0);
  pc_set_origin(g, NULL);
  CHECK(!g->origin);
  pc_graph_free(g);
}

PC_TEST(text_escape_controls_only) {
  char out[64];
  size_t n = primc_text_escape(out, sizeof out, "a\x1b[2J\tb\x7f\xc2\x9b" "c\xc3\xa9\xc2\xa0");
  CHECK_MSG(!strcmp(out, "a\\x1b[2J\\x09b\\x7f\\xc2\\x9bc\xc3\xa9\xc2\xa0") && n == strlen(out), "got '%s'", out);
  char small[7]; /* "ab" fits, "\x1b" (4 bytes) would not leave room for its NUL after it */
  n = primc_text_escape(small, sizeof small, "ab\x1b" "cd");
  CHECK_MSG(!strcmp(small, "ab\\x1b") && n == 6, "got '%s'", small);
  n = primc_text_escape(small, 6, "ab\x1b" "cd");
  CHECK_MSG(!strcmp(small, "ab") && n == 2, "got '%s'", small);
  CHECK(primc_text_escape(out, sizeof out, NULL) == 0 && out[0] == 0);
  FILE *f = tmpfile();
  if (!CHECK(f)) return;
  int k = primc_text_putn(f, "x\n\xc2\x85y", 5) + primc_text_put(f, "\xc2") + primc_text_putn(f, "a\xc2\x9b", 2);
  char back[64] = {0};
  rewind(f);
  size_t got = fread(back, 1, sizeof back - 1, f);
  fclose(f);
  /* a C1 pair counts only whole inside the n bytes: "a\xc2" of "a\xc2\x9b" prints as it is */
  CHECK_MSG(!strcmp(back, "x\\x0a\\xc2\\x85y\xc2" "a\xc2") && k == (int)got, "got '%s' (%d)", back, k);
}
