/* tests/unit/test_aten.c: every aten:: decomposition run by the interpreter against PyTorch's outputs.
 *
 * Cases live in tests/data/aten (written by tests/ref/gen_aten_refs.py): NAME.txt is the graph,
 * NAME.in<i>.npy its inputs, NAME.out<i>.npy PyTorch's outputs, NAME.safetensors its weights. */
#include "frontend/frontend.h"
#include "ir/ir.h"
#include "runtime/primc_rt.h"
#include "tests/test.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_IO 8

static int load_npy(const char *path, pc_tensor *t) {
  primc_array a;
  char err[256];
  if (primc_npy_read(path, &a, err, sizeof err) != 0) return 0;
  t->dtype = (pc_dtype)a.dtype; /* primc_dtype follows ir/dtypes.def's order */
  t->rank = a.rank;
  memcpy(t->dims, a.dims, sizeof t->dims);
  t->data = a.data;
  return 1;
}

/* compares got with want elementwise (|d| <= atol + rtol |want|); reports the worst element */
static void compare(const char *name, int k, const pc_tensor *got, const pc_tensor *want) {
  int same = got->dtype == want->dtype && got->rank == want->rank;
  for (int i = 0; same && i < got->rank; i++) same = got->dims[i] == want->dims[i];
  if (!CHECK_MSG(same, "%s out%d: got %s rank %d, want %s rank %d", name, k, pc_dtype_name(got->dtype), got->rank,
                 pc_dtype_name(want->dtype), want->rank))
    return;
  int64_t n = pc_tensor_numel(want), worst = -1;
  double worst_excess = 0;
  for (int64_t i = 0; i < n; i++) {
    double a = pc_elem_f64(got->dtype, got->data, i), b = pc_elem_f64(want->dtype, want->data, i);
    if (isnan(a) && isnan(b)) continue;
    if (a == b) continue; /* also equal infinities */
    double excess = fabs(a - b) - (1e-5 + 1e-4 * fabs(b));
    if (!(excess <= 0) && (worst < 0 || !(excess <= worst_excess))) worst = i, worst_excess = excess;
  }
  CHECK_MSG(worst < 0, "%s out%d: element %lld is %.9g, PyTorch says %.9g", name, k, (long long)worst,
            worst >= 0 ? pc_elem_f64(got->dtype, got->data, worst) : 0.0,
            worst >= 0 ? pc_elem_f64(want->dtype, want->data, worst) : 0.0);
}

static void run_case(const char *dir, const char *name) {
  char path[4096], wpath[4096];
  snprintf(path, sizeof path, "%s/%s.txt", dir, name);
  snprintf(wpath, sizeof wpath, "%s/%s.safetensors", dir, name);
  pc_import_opts o = {.weights_path = access(wpath, R_OK) == 0 ? wpath : NULL};
  pc_graph *g = pc_text_load(path, &o);
  pc_tensor in[MAX_IO], want[MAX_IO], got[MAX_IO];
  int n_in = 0, n_out = 0;
  memset(got, 0, sizeof got);
  if (!CHECK_MSG(g && g->status == PC_OK, "%s: %s", name, pc_error(g))) goto done;
  for (; n_in < MAX_IO; n_in++) {
    snprintf(path, sizeof path, "%s/%s.in%d.npy", dir, name, n_in);
    if (!load_npy(path, &in[n_in])) break;
  }
  for (; n_out < MAX_IO; n_out++) {
    snprintf(path, sizeof path, "%s/%s.out%d.npy", dir, name, n_out);
    if (!load_npy(path, &want[n_out])) break;
  }
  if (!CHECK_MSG(n_in == g->n_inputs && n_out == g->n_outputs && n_out > 0, "%s: %d/%d inputs, %d/%d outputs", name,
                 n_in, g->n_inputs, n_out, g->n_outputs))
    goto done;
  pc_status st = pc_interp(g, in, n_in, got, n_out);
  if (CHECK_MSG(st == PC_OK, "%s: interp: %s", name, pc_error(g)))
    for (int k = 0; k < n_out; k++) compare(name, k, &got[k], &want[k]);
done:
  for (int i = 0; i < n_in; i++) free(in[i].data);
  for (int i = 0; i < n_out; i++) free(want[i].data), pc_tensor_free(&got[i]);
  pc_graph_free(g);
}

static int by_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* the case names (NAME of NAME.txt) in tests/data/aten, sorted; caller frees */
static int list_cases(const char *dir, char **names, int max) {
  DIR *d = opendir(dir);
  int n = 0;
  if (!d) return 0;
  for (struct dirent *e; (e = readdir(d)) && n < max;) {
    size_t l = strlen(e->d_name);
    if (l > 4 && !strcmp(e->d_name + l - 4, ".txt")) names[n++] = strndup(e->d_name, l - 4);
  }
  closedir(d);
  qsort(names, (size_t)n, sizeof *names, by_str);
  return n;
}

PC_TEST(aten_ops_match_pytorch) {
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/tests/data/aten", pc_test_srcdir());
  char *names[256];
  int n = list_cases(dir, names, 256);
  CHECK_MSG(n >= 40, "only %d cases in %s (run tests/ref/gen_aten_refs.py)", n, dir);
  for (int i = 0; i < n; i++) {
    run_case(dir, names[i]);
    free(names[i]);
  }
}

/* every row of frontend/aten_ops.def is exercised by at least one reference case */
PC_TEST(aten_ops_all_covered) {
  static const char *const ops[] = {
#define ATEN_OP(name, min_in, max_in, n_out, fn) #name,
#include "frontend/aten_ops.def"
#undef ATEN_OP
  };
  static const char *const untested[] = {"mm", "bmm", "contiguous", "dropout"}; /* aliases of tested rows */
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/tests/data/aten", pc_test_srcdir());
  char *names[256];
  int n = list_cases(dir, names, 256);
  char *all = calloc(1, 1);
  size_t len = 0;
  for (int i = 0; i < n; i++) {
    char path[2048];
    snprintf(path, sizeof path, "%s/%s.txt", dir, names[i]);
    FILE *f = fopen(path, "rb");
    char buf[4096];
    size_t k = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f) fclose(f);
    buf[k] = 0;
    all = realloc(all, len + k + 1);
    memcpy(all + len, buf, k + 1);
    len += k;
    free(names[i]);
  }
  for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
    int skip = 0;
    for (size_t j = 0; j < sizeof untested / sizeof *untested; j++) skip |= !strcmp(ops[i], untested[j]);
    char pat[96];
    snprintf(pat, sizeof pat, "aten::%s(", ops[i]);
    CHECK_MSG(skip || strstr(all, pat), "no reference case uses %s", pat);
  }
  free(all);
}

/* errors name the op and the line */
PC_TEST(aten_errors_name_the_op) {
  static const struct {
    const char *text, *error;
  } cases[] = {
      {"graph(%x : f32[2,3]):\n  %y = aten::softmax(%x, dim=2)\n  return (%y)\n", "2:8: aten::softmax: dim 2 is out of range"},
      {"graph(%x : f32[2,3], %w : f32[4,5]):\n  %y = aten::linear(%x, %w)\n  return (%y)\n", "2:8: aten::linear"},
      {"graph(%x : f32[2,3]):\n  %y = aten::reshape(%x, shape=[4,-1])\n  return (%y)\n", "aten::reshape: cannot infer -1"},
      {"graph(%x : f32[2,3]):\n  %y = aten::linear(%x)\n  return (%y)\n", "aten::linear: takes 2 to 3 operands, got 1"},
      {"graph(%x : i64[2,3]):\n  %y = aten::gelu(%x)\n  return (%y)\n", "aten::gelu: needs a float tensor, got i64"},
      {"graph(%x : f32[2,3]):\n  %y = aten::matmul(%x, %x)\n  return (%y)\n", "2:8: aten::matmul"},
      {"graph(%x : f32[2,3]):\n  %y = aten::permute(%x, dims=[0])\n  return (%y)\n", "aten::permute: dims= must list 2 dims"},
      {"graph(%x : f32[2,3]):\n  %y = aten::add(%x)\n  return (%y)\n", "aten::add: needs a second operand or other="},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    pc_parse_opts o = {pc_aten_hook, NULL};
    pc_graph *g = pc_graph_parse(cases[i].text, strlen(cases[i].text), "a.txt", &o);
    CHECK_MSG(g && g->status != PC_OK && strstr(pc_error(g), cases[i].error), "case %zu: \"%s\" lacks \"%s\"", i,
              pc_error(g), cases[i].error);
    pc_graph_free(g);
  }
}
