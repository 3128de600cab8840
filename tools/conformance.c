/* tools/conformance.c: `primc conformance`: runs the ONNX backend node tests through the importer and the interpreter. */
#include "frontend/frontend.h"
#include "frontend/onnx_internal.h"
#include "ir/ir.h"
#include "tools/cmds.h"

#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define CF_RTOL 1e-3 /* onnx.backend.test runner defaults */
#define CF_ATOL 1e-7
#define CF_TIMEOUT_S 60
#define CF_MAX_IO 64

static const char *conf_help =
    "usage: primc conformance [--dir D] [--filter S] [--list-failures] [--expected FILE]\n"
    "  Imports every ONNX node test under D (folders with model.onnx and test_data_set_*),\n"
    "  runs it with the reference interpreter and compares with the expected outputs\n"
    "  (rtol 1e-3, atol 1e-7, NaN equals NaN, exact for ints and bools).\n"
    "  --dir D            test folder (default: $ONNX_NODE_DIR, else build/onnx-node-tests;\n"
    "                     tests/ref/gen_onnx_node_tests.py D writes the tests)\n"
    "  --filter S         only tests whose name contains S\n"
    "  --list-failures    print only FAIL and UNSUPPORTED lines and the summary\n"
    "  --expected FILE    exit 1 when a test listed in FILE (one name a line) does not pass\n";

typedef enum { CF_PASS, CF_FAIL, CF_UNSUPPORTED } cf_result;
static const char *const cf_names[] = {"PASS", "FAIL", "UNSUPPORTED"};

typedef struct cf_test {
  char *name;
  char op[64];
  cf_result res;
} cf_test;

/* ---------------------------------------------------------------- files */

static unsigned char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  unsigned char *buf = NULL;
  size_t cap = 0, n = 0;
  for (;;) {
    if (n == cap) {
      unsigned char *nb = realloc(buf, cap = cap ? cap * 2 : 4096);
      if (!nb) break;
      buf = nb;
    }
    size_t r = fread(buf + n, 1, cap - n, f);
    if (r == 0) break;
    n += r;
  }
  fclose(f);
  *len = n;
  return buf;
}

static int is_file(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* reads one TensorProto .pb with the importer's decoder; message in err on failure */
static int load_pb(const char *path, pc_tensor *t, char **tname, char *err, size_t errlen) {
  size_t len;
  unsigned char *buf = read_file(path, &len);
  if (!buf) return snprintf(err, errlen, "cannot read %s", path), 0;
  Onnx__TensorProto *tp = onnx__tensor_proto__unpack(NULL, len, buf);
  free(buf);
  if (!tp) return snprintf(err, errlen, "%s: not a TensorProto", path), 0;
  pc_graph *scratch = pc_graph_new();
  int ok = scratch && ox_tensor_decode(scratch, tp, NULL, t) == PC_OK;
  if (!ok) snprintf(err, errlen, "%s", scratch ? pc_error(scratch) : "out of memory");
  *tname = tp->name ? strdup(tp->name) : NULL;
  pc_graph_free(scratch);
  onnx__tensor_proto__free_unpacked(tp, NULL);
  return ok;
}

/* op type of the model's first node, for grouping failures */
static void model_op(const char *path, char *op, size_t cap) {
  size_t len;
  snprintf(op, cap, "?");
  unsigned char *buf = read_file(path, &len);
  if (!buf) return;
  Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, len, buf);
  free(buf);
  if (m && m->graph && m->graph->n_node && m->graph->node[0]->op_type)
    snprintf(op, cap, "%s", m->graph->node[0]->op_type);
  if (m) onnx__model_proto__free_unpacked(m, NULL);
}

/* ---------------------------------------------------------------- comparison */

static double elem(const pc_tensor *t, int64_t k) {
  const void *p = t->data;
  switch (t->dtype) { /* one line per storage type */
  case PC_f16: return pc_f16_to_f32(((const uint16_t *)p)[k]);
  case PC_bf16: return pc_bf16_to_f32(((const uint16_t *)p)[k]);
  case PC_f32: return ((const float *)p)[k];
  case PC_f64: return ((const double *)p)[k];
  case PC_i8: return ((const int8_t *)p)[k];
  case PC_i16: return ((const int16_t *)p)[k];
  case PC_i32: return ((const int32_t *)p)[k];
  case PC_i64: return (double)((const int64_t *)p)[k];
  case PC_u8: case PC_bool: return ((const uint8_t *)p)[k];
  case PC_c64: return ((const float *)p)[k];
  case PC_DTYPE_COUNT: break;
  }
  return 0;
}

static int close_enough(double got, double want) {
  if (isnan(want) || isnan(got)) return isnan(want) && isnan(got);
  if (isinf(want) || isinf(got)) return got == want;
  return fabs(got - want) <= CF_ATOL + CF_RTOL * fabs(want);
}

static int compare(const pc_tensor *got, const pc_tensor *want, int idx, char *err, size_t errlen) {
  if (got->dtype != want->dtype)
    return snprintf(err, errlen, "output %d: dtype %s, expected %s", idx, pc_dtype_name(got->dtype),
                    pc_dtype_name(want->dtype)), 0;
  int same = got->rank == want->rank;
  for (int i = 0; same && i < got->rank; i++) same = got->dims[i] == want->dims[i];
  if (!same) return snprintf(err, errlen, "output %d: shape differs (rank %d vs %d)", idx, got->rank, want->rank), 0;
  int64_t n = pc_tensor_numel(want) * (want->dtype == PC_c64 ? 2 : 1);
  int exact = !pc_dtype_is_float(want->dtype) && want->dtype != PC_c64;
  if (want->dtype == PC_i64) { /* beyond 2^53 doubles would hide differences */
    for (int64_t k = 0; k < n; k++)
      if (((const int64_t *)got->data)[k] != ((const int64_t *)want->data)[k])
        return snprintf(err, errlen, "output %d[%lld]: %lld, expected %lld", idx, (long long)k,
                        (long long)((const int64_t *)got->data)[k], (long long)((const int64_t *)want->data)[k]), 0;
    return 1;
  }
  for (int64_t k = 0; k < n; k++) {
    double g = elem(got, k), w = elem(want, k);
    if (exact ? g != w : !close_enough(g, w))
      return snprintf(err, errlen, "output %d[%lld]: %.9g, expected %.9g", idx, (long long)k, g, w), 0;
  }
  return 1;
}

/* ---------------------------------------------------------------- one test */

static void free_tensors(pc_tensor *t, int n) {
  for (int i = 0; i < n; i++) pc_tensor_free(&t[i]);
}

/* position of the graph input a tensor feeds: by name, else by its file index */
static int input_slot(const pc_graph *g, const char *tname, int file_index) {
  for (int i = 0; tname && i < g->n_inputs; i++)
    if (g->inputs[i]->name && strcmp(g->inputs[i]->name, tname) == 0) return i;
  return file_index < g->n_inputs ? file_index : -1;
}

static cf_result run_data_set(pc_graph *g, const char *ds, char *err, size_t errlen) {
  pc_tensor ins[CF_MAX_IO], outs[CF_MAX_IO], want[CF_MAX_IO];
  memset(ins, 0, sizeof ins), memset(outs, 0, sizeof outs), memset(want, 0, sizeof want);
  char path[4096 + 64];
  cf_result res = CF_FAIL;
  int n_in = 0, n_want = 0;
  if (g->n_inputs > CF_MAX_IO || g->n_outputs > CF_MAX_IO) return snprintf(err, errlen, "too many inputs/outputs"), CF_FAIL;
  for (int i = 0; i < CF_MAX_IO; i++) {
    snprintf(path, sizeof path, "%s/input_%d.pb", ds, i);
    if (!is_file(path)) break;
    pc_tensor t;
    char *tname = NULL;
    if (!load_pb(path, &t, &tname, err, errlen)) goto done;
    int slot = input_slot(g, tname, i);
    free(tname);
    if (slot < 0 || ins[slot].data) {
      pc_tensor_free(&t);
      snprintf(err, errlen, "input_%d.pb matches no graph input", i);
      goto done;
    }
    ins[slot] = t;
    n_in++;
  }
  if (n_in != g->n_inputs) {
    snprintf(err, errlen, "%d input files for %d graph inputs", n_in, g->n_inputs);
    goto done;
  }
  for (int i = 0; i < g->n_outputs; i++) {
    char *tname = NULL;
    snprintf(path, sizeof path, "%s/output_%d.pb", ds, i);
    if (!load_pb(path, &want[i], &tname, err, errlen)) goto done;
    free(tname);
    n_want++;
  }
  if (pc_interp(g, ins, g->n_inputs, outs, g->n_outputs) != PC_OK) {
    snprintf(err, errlen, "interp: %s", pc_error(g));
    res = g->status == PC_ERR_UNSUPPORTED ? CF_UNSUPPORTED : CF_FAIL;
    goto done;
  }
  res = CF_PASS;
  for (int i = 0; i < g->n_outputs && res == CF_PASS; i++)
    if (!compare(&outs[i], &want[i], i, err, errlen)) res = CF_FAIL;
done:
  free_tensors(ins, CF_MAX_IO);
  free_tensors(outs, g->n_outputs < CF_MAX_IO ? g->n_outputs : CF_MAX_IO);
  free_tensors(want, n_want);
  return res;
}

static cf_result run_test(const char *dir, char *err, size_t errlen) {
  char path[4096];
  snprintf(path, sizeof path, "%s/model.onnx", dir);
  pc_graph *g = pc_onnx_load(path, NULL);
  if (!g) return snprintf(err, errlen, "out of memory"), CF_FAIL;
  cf_result res = CF_PASS;
  if (g->status != PC_OK) {
    const char *msg = pc_error(g);
    const char *tail = strstr(msg, "model.onnx: ");
    snprintf(err, errlen, "%s", tail ? tail + 12 : msg);
    res = g->status == PC_ERR_UNSUPPORTED ? CF_UNSUPPORTED : CF_FAIL;
  }
  int n_sets = 0;
  for (int i = 0; res == CF_PASS; i++) {
    snprintf(path, sizeof path, "%s/test_data_set_%d", dir, i);
    struct stat st;
    if (stat(path, &st) != 0) break;
    res = run_data_set(g, path, err, errlen);
    n_sets++;
  }
  if (res == CF_PASS && n_sets == 0) res = CF_FAIL, snprintf(err, errlen, "no test_data_set_0");
  pc_graph_free(g);
  return res;
}

/* runs one test in a child process so that a crash or a hang in any layer costs one test only */
static cf_result run_isolated(const char *dir, char *err, size_t errlen) {
  int fd[2];
  if (pipe(fd) != 0) return run_test(dir, err, errlen);
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) {
    close(fd[0]), close(fd[1]);
    return run_test(dir, err, errlen);
  }
  if (pid == 0) {
    close(fd[0]);
    alarm(CF_TIMEOUT_S);
    char msg[1024] = "";
    cf_result r = run_test(dir, msg, sizeof msg);
    char line[1100];
    int n = snprintf(line, sizeof line, "%d %s", (int)r, msg);
    if (write(fd[1], line, (size_t)(n < (int)sizeof line ? n : (int)sizeof line - 1)) < 0) _exit(3);
    _exit(0);
  }
  close(fd[1]);
  char buf[1100];
  size_t n = 0;
  ssize_t r;
  while (n < sizeof buf - 1 && (r = read(fd[0], buf + n, sizeof buf - 1 - n)) > 0) n += (size_t)r;
  buf[n] = 0;
  close(fd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (n == 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    if (WIFSIGNALED(status))
      snprintf(err, errlen, "crashed (signal %d%s)", WTERMSIG(status), WTERMSIG(status) == SIGALRM ? ": timeout" : "");
    else snprintf(err, errlen, "child failed (status %d)", status);
    return CF_FAIL;
  }
  char *sp = strchr(buf, ' ');
  snprintf(err, errlen, "%s", sp ? sp + 1 : "");
  int code = atoi(buf);
  return code >= CF_PASS && code <= CF_UNSUPPORTED ? (cf_result)code : CF_FAIL;
}

/* ---------------------------------------------------------------- driver */

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static char **list_tests(const char *dir, const char *filter, int *n) {
  DIR *d = opendir(dir);
  *n = 0;
  if (!d) return NULL;
  char **names = NULL;
  int cap = 0;
  struct dirent *e;
  char path[4096];
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.' || (filter && !strstr(e->d_name, filter))) continue;
    snprintf(path, sizeof path, "%s/%s/model.onnx", dir, e->d_name);
    if (!is_file(path)) continue;
    if (*n == cap) {
      char **nn = realloc(names, sizeof *names * (size_t)(cap = cap ? cap * 2 : 256));
      if (!nn) break;
      names = nn;
    }
    names[(*n)++] = strdup(e->d_name);
  }
  closedir(d);
  if (names) qsort(names, (size_t)*n, sizeof *names, cmp_str);
  return names;
}

static const char *default_dir(void) {
  const char *env = getenv("ONNX_NODE_DIR");
  if (env && *env) {
    struct stat st;
    if (stat(env, &st) == 0 && S_ISDIR(st.st_mode)) return env;
  }
  return "build/onnx-node-tests";
}

/* tests of the expected list that did not pass; prints them */
static int check_expected(const char *file, const cf_test *tests, int n) {
  size_t len;
  unsigned char *buf = read_file(file, &len);
  if (!buf) return fprintf(stderr, "primc: error: cannot read %s\n", file), 1;
  char *text = malloc(len + 1);
  if (!text) return free(buf), 1;
  memcpy(text, buf, len);
  text[len] = 0;
  free(buf);
  int bad = 0;
  for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
    while (*line == ' ' || *line == '\t') line++;
    size_t l = strlen(line);
    while (l && (line[l - 1] == ' ' || line[l - 1] == '\r')) line[--l] = 0;
    if (!l || line[0] == '#') continue;
    const cf_test *t = NULL;
    for (int i = 0; i < n && !t; i++)
      if (strcmp(tests[i].name, line) == 0) t = &tests[i];
    if (!t || t->res != CF_PASS) {
      printf("REGRESSION %s: %s\n", line, t ? cf_names[t->res] : "not found");
      bad++;
    }
  }
  free(text);
  if (bad) printf("conformance: %d expected test%s did not pass\n", bad, bad == 1 ? "" : "s");
  return bad ? 1 : 0;
}

/* "op: n failed" lines, most failures first */
static void print_groups(const cf_test *tests, int n) {
  typedef struct { const char *op; int fail, unsup; } grp;
  grp *gs = calloc((size_t)n + 1, sizeof *gs);
  if (!gs) return;
  int ng = 0;
  for (int i = 0; i < n; i++) {
    if (tests[i].res == CF_PASS) continue;
    int k = 0;
    while (k < ng && strcmp(gs[k].op, tests[i].op) != 0) k++;
    if (k == ng) gs[ng++].op = tests[i].op;
    if (tests[i].res == CF_FAIL) gs[k].fail++;
    else gs[k].unsup++;
  }
  for (int i = 1; i < ng; i++) /* insertion sort by total, ties by name */
    for (int j = i; j > 0; j--) {
      grp *a = &gs[j - 1], *b = &gs[j];
      int ta = a->fail + a->unsup, tb = b->fail + b->unsup;
      if (ta > tb || (ta == tb && strcmp(a->op, b->op) <= 0)) break;
      grp t = *a;
      *a = *b, *b = t;
    }
  if (ng) printf("not passing by op type:\n");
  for (int i = 0; i < ng; i++) printf("  %-24s %3d failed, %3d unsupported\n", gs[i].op, gs[i].fail, gs[i].unsup);
  free(gs);
}

int pc_cmd_conformance(int argc, char **argv) {
  const char *dir = NULL, *filter = NULL, *expected = NULL;
  int list_failures = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) return fputs(conf_help, stdout), 0;
    if (strcmp(a, "--list-failures") == 0) list_failures = 1;
    else if (i + 1 < argc && strcmp(a, "--dir") == 0) dir = argv[++i];
    else if (i + 1 < argc && strcmp(a, "--filter") == 0) filter = argv[++i];
    else if (i + 1 < argc && strcmp(a, "--expected") == 0) expected = argv[++i];
    else return fprintf(stderr, "primc conformance: bad argument '%s'\n%s", a, conf_help), 2;
  }
  if (!dir) dir = default_dir();
  int n = 0;
  char **names = list_tests(dir, filter, &n);
  if (!names && n == 0) {
    fprintf(stderr, "primc: error: no ONNX node tests under '%s' (generate them with "
                    "python3 tests/ref/gen_onnx_node_tests.py %s)\n", dir, dir);
    if (!expected) return 1;
  }
  cf_test *tests = calloc((size_t)n + 1, sizeof *tests);
  if (!tests) return 1;
  int count[3] = {0, 0, 0};
  char path[4096], err[1024];
  for (int i = 0; i < n; i++) {
    tests[i].name = names[i];
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    err[0] = 0;
    tests[i].res = run_isolated(path, err, sizeof err);
    snprintf(path, sizeof path, "%s/%s/model.onnx", dir, names[i]);
    model_op(path, tests[i].op, sizeof tests[i].op);
    count[tests[i].res]++;
    if (tests[i].res == CF_PASS) {
      if (!list_failures) printf("PASS %s\n", names[i]);
    } else {
      printf("%s %s: %s\n", cf_names[tests[i].res], names[i], err);
    }
    fflush(stdout);
  }
  print_groups(tests, n);
  printf("conformance: %d passed, %d failed, %d unsupported of %d\n", count[CF_PASS], count[CF_FAIL],
         count[CF_UNSUPPORTED], n);
  int rc = expected ? check_expected(expected, tests, n) : 0;
  for (int i = 0; i < n; i++) free(names[i]);
  free(names);
  free(tests);
  return rc;
}
