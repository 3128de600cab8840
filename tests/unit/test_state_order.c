/* tests/unit/test_state_order.c: a training step's state updated in place (passes/state_order.c,
 * codegen/kir_state.c): kernels reordered so a state's readers run before its writer, compiled runs with
 * the state's output given as its input's own buffer and as another one, the cases that keep two sets, and the
 * training driver's release of the initial state's pages. */
#include "codegen/codegen.h"
#include "passes/passes.h"
#include "runtime/primc_rt.h"
#include "tests/test.h"
#include "tests/unit/helpers.h"

#include <dlfcn.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static const void *no_init[1];

/* inputs x [4, 8] and the state w [8, 8]; outputs y and then w's next value, built by `step` in the node
 * order it chooses */
typedef pc_value *(*step_fn)(pc_graph *g, pc_value *x, pc_value *w, pc_value **y);

static pc_graph *state_graph(step_fn step) {
  pc_graph *g = pc_graph_new();
  int64_t xd[2] = {4, 8}, wd[2] = {8, 8};
  pc_value *x = pc_input_add(g, "x", pc_type_make(PC_f32, 2, xd));
  pc_value *w = pc_input_add(g, "w", pc_type_make(PC_f32, 2, wd));
  pc_value *y = NULL, *next = step(g, x, w, &y);
  pc_output_add(g, y);
  pc_output_add(g, next);
  g->n_state = 1, g->n_state_weights = 1, g->state_init = no_init;
  return g;
}

static pc_value *dot(pc_graph *g, pc_value *a, pc_value *b) {
  int64_t c1 = 1, c0 = 0;
  return pc_dot_general(g, a, b, 1, &c1, &c0, 0, NULL, NULL);
}

/* the update first in node order, the product reading the old w after it */
static pc_value *update_then_read(pc_graph *g, pc_value *x, pc_value *w, pc_value **y) {
  pc_value *next = pc_sub(g, w, pc_full_like(g, 0.25, w));
  *y = dot(g, x, w);
  return next;
}

/* the update reads w transposed too: its elementwise tail is split off the transpose's kernel */
static pc_value *transposed_update(pc_graph *g, pc_value *x, pc_value *w, pc_value **y) {
  int64_t perm[2] = {1, 0};
  *y = dot(g, x, w);
  return pc_sub(g, w, pc_mul(g, pc_transpose(g, w, perm), pc_full_like(g, 0.5, w)));
}

/* the next value is w's elements moved: no kernel can write it over w element for element */
static pc_value *transposed_next(pc_graph *g, pc_value *x, pc_value *w, pc_value **y) {
  int64_t perm[2] = {1, 0};
  *y = dot(g, x, w);
  return pc_transpose(g, pc_sub(g, w, pc_full_like(g, 0.25, w)), perm);
}

/* one kernel (a product of w and its next value) reads both: it can run neither before nor after the update */
static pc_value *read_both(pc_graph *g, pc_value *x, pc_value *w, pc_value **y) {
  pc_value *next = pc_sub(g, w, pc_full_like(g, 0.25, w));
  *y = dot(g, x, dot(g, w, next));
  return next;
}

/* the state is also the model's output */
static pc_value *state_out(pc_graph *g, pc_value *x, pc_value *w, pc_value **y) {
  (void)x;
  *y = w;
  return pc_sub(g, w, pc_full_like(g, 0.25, w));
}

typedef int (*run_fn)(const void *const *in, void *const *out, void *ws);

/* a build directory of this file's tests gone: the object, library and header codegen writes, then itself */
static void remove_build_dir(const char *dir) {
  static const char *const files[] = {"m.o", "m.so", "m.h"};
  char path[256];
  for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, files[i]);
    unlink(path);
  }
  rmdir(dir);
}

/* g compiled and run on x and w; with in_place the next state is written into a copy of w passed as both the
 * input and the output, else into its own buffer; outs y (32 floats) and next (64 floats) */
static int run_state(pc_graph *g, const float *x, const float *w, int in_place, float *y, float *next, float *w_after,
                     const char *tag) {
  char dir[] = "/tmp/primc-st-XXXXXX", obj[256], so[256];
  if (!CHECK(mkdtemp(dir) != NULL)) return 0;
  snprintf(obj, sizeof obj, "%s/m.o", dir);
  snprintf(so, sizeof so, "%s/m.so", dir);
  pc_codegen_opts o = {0};
  o.emit = PC_EMIT_OBJ, o.output = obj, o.name = "m", o.opt_level = 2;
  pc_status cs = pc_codegen(g, &o);
  int ok = CHECK_MSG(cs == PC_OK, "%s: codegen: %s", tag, pc_error(g));
  void *h = ok ? pc_test_link_open(obj, so, "-lm -lpthread", tag) : NULL;
  run_fn run = h ? (run_fn)dlsym(h, "m_run") : NULL;
  const int64_t *ws_size = h ? dlsym(h, "m_workspace_size") : NULL;
  ok = ok && CHECK_MSG(run && ws_size, "%s: entry points missing", tag);
  float wbuf[64], *ws = ok ? aligned_alloc(64, (size_t)(*ws_size + 64)) : NULL;
  memcpy(wbuf, w, sizeof wbuf);
  const void *in[2] = {x, wbuf};
  void *out[2] = {y, in_place ? wbuf : next};
  if (ok) ok = CHECK_MSG(run(in, out, ws) == 0, "%s: run failed", tag);
  if (in_place) memcpy(next, wbuf, sizeof wbuf);
  memcpy(w_after, wbuf, sizeof wbuf);
  free(ws);
  if (h) dlclose(h);
  remove_build_dir(dir);
  return ok;
}

/* the interpreter's y and next (no buffer shared), then compiled with two sets and, where allowed, in place */
static void check_runs(pc_graph *g, const char *tag) {
  int64_t xd[2] = {4, 8}, wd[2] = {8, 8};
  pc_tensor ins[2] = {pc_test_pattern_f32(2, xd), pc_test_pattern_f32(2, wd)}, ref[2];
  memset(ref, 0, sizeof ref);
  if (!CHECK_MSG(pc_interp(g, ins, 2, ref, 2) == PC_OK, "%s: interp: %s", tag, pc_error(g))) return;
  for (int in_place = 0; in_place <= g->state_in_place; in_place++) { /* one set only where the artifact allows it */
    float y[64], next[64], w_after[64];
    if (!run_state(g, ins[0].data, ins[1].data, in_place, y, next, w_after, tag)) break;
    const float *ry = ref[0].data, *rn = ref[1].data, *w = ins[1].data;
    int64_t ny = pc_tensor_numel(&ref[0]);
    for (int64_t i = 0; i < ny; i++)
      if (!CHECK_MSG(fabsf(y[i] - ry[i]) <= 1e-5f * (1 + fabsf(ry[i])), "%s (%s): y[%lld] = %g, interpreter %g", tag,
                     in_place ? "in place" : "two sets", (long long)i, y[i], ry[i]))
        break;
    for (int i = 0; i < 64; i++)
      if (!CHECK_MSG(next[i] == rn[i] && w_after[i] == (in_place ? rn[i] : w[i]), "%s (%s): next[%d] = %g, interpreter %g",
                     tag, in_place ? "in place" : "two sets", i, next[i], rn[i]))
        break;
  }
  for (int i = 0; i < 2; i++) free(ins[i].data), pc_tensor_free(&ref[i]);
}

static int group_of(const pc_graph *g, pc_op op) {
  for (int i = 0; i < g->n_nodes; i++)
    if (!g->nodes[i]->dead && g->nodes[i]->op == op) return g->nodes[i]->group;
  return -1;
}

/* step compiled in place, the kernel of op `first` before the update's sub, and run both ways */
static void check_in_place(step_fn step, pc_op first, const char *tag) {
  pc_graph *g = state_graph(step);
  if (CHECK(pc_pipeline_run(g, NULL) == PC_OK)) {
    CHECK_MSG(g->state_in_place == 1, "%s: not in place: %s", tag, g->state_note ? g->state_note : "?");
    CHECK_MSG(group_of(g, first) < group_of(g, PC_OP_sub), "%s: the update's kernel runs first", tag);
    check_runs(g, tag);
  }
  pc_graph_free(g);
}

PC_TEST(state_order_runs_readers_first) { check_in_place(update_then_read, PC_OP_dot_general, "update then read"); }

/* an update fused with a kernel that reads the state otherwise gets a kernel of its own, after that one */
PC_TEST(state_order_splits_update_off) { check_in_place(transposed_update, PC_OP_transpose, "transposed update"); }

PC_TEST(state_order_keeps_two_sets) {
  static const struct {
    step_fn step;
    const char *why;
  } cases[] = {
      {transposed_next, "reads it through transpose"},
      {read_both, "cannot all run before"},
      {state_out, "also output 0"},
  };
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    pc_graph *g = state_graph(cases[c].step);
    if (!CHECK(pc_pipeline_run(g, NULL) == PC_OK)) {
      pc_graph_free(g);
      continue;
    }
    CHECK_MSG(g->state_in_place == 0 && g->state_note && strstr(g->state_note, cases[c].why), "case %zu: %s", c,
              g->state_in_place ? "in place" : g->state_note);
    check_runs(g, cases[c].why);
    pc_graph_free(g);
  }
}

/* codegen checks what the pass promised: told a transposed next value is in place, it refuses to compile it */
PC_TEST(state_order_codegen_refuses_unsafe) {
  pc_graph *g = state_graph(transposed_next);
  if (CHECK(pc_pipeline_run(g, NULL) == PC_OK)) {
    g->state_in_place = 1;
    char dir[] = "/tmp/primc-st-XXXXXX", obj[256];
    if (CHECK(mkdtemp(dir) != NULL)) {
      snprintf(obj, sizeof obj, "%s/m.o", dir);
      pc_codegen_opts o = {0};
      o.emit = PC_EMIT_OBJ, o.output = obj, o.name = "m", o.opt_level = 2;
      CHECK(pc_codegen(g, &o) == PC_ERR_INTERNAL);
      CHECK_CONTAINS(pc_error(g), "training state w, updated in place");
      remove_build_dir(dir);
    }
  }
  pc_graph_free(g);
}

static long resident_pages(void) {
  long size = 0, res = -1;
  FILE *f = fopen("/proc/self/statm", "r");
  if (f && fscanf(f, "%ld %ld", &size, &res) != 2) res = -1;
  if (f) fclose(f);
  return res;
}

/* the training driver gives back the pages of the initial state it copied out of the executable: a read-only
 * file mapping's pages leave the resident set and read back the file's bytes; anonymous memory is left alone */
PC_TEST(state_initial_pages_dropped) {
  enum { N = 8 << 20 };
  char path[] = "/tmp/primc-st-XXXXXX";
  int fd = mkstemp(path);
  if (!CHECK(fd >= 0)) return;
  unsigned char *buf = malloc(N);
  for (size_t i = 0; buf && i < N; i++) buf[i] = (unsigned char)(i * 7 + 3);
  int ok = CHECK(buf && write(fd, buf, N) == N);
  const unsigned char *map = ok ? mmap(NULL, N, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
  if (ok && CHECK(map != MAP_FAILED)) {
    unsigned sum = 0;
    for (size_t i = 0; i < N; i += 4096) sum += map[i]; /* resident now */
    long before = resident_pages();
    const void *ranges[2] = {NULL, map};
    size_t bytes[2] = {N, N};
    primc_driver_drop_file_pages(ranges, bytes, 2);
    long after = resident_pages();
    CHECK_MSG(before - after >= N / 4096 / 2, "resident pages %ld -> %ld (sum %u)", before, after, sum);
    CHECK(memcmp(map, buf, N) == 0);
    munmap((void *)map, N);
  }
  unsigned char *anon = malloc(N);
  if (anon && buf) {
    memcpy(anon, buf, N);
    const void *ranges[1] = {anon};
    size_t bytes[1] = {N};
    primc_driver_drop_file_pages(ranges, bytes, 1);
    CHECK(memcmp(anon, buf, N) == 0);
  }
  free(anon), free(buf);
  close(fd), unlink(path);
}
