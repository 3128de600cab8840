/* tests/unit/test_interp.c: the reference interpreter against numpy (tests/data/prims), its error paths, symbols and random's statistics. */
#include "ir/ir.h"
#include "runtime/primc_mt19937.h"
#include "runtime/primc_philox.h"
#include "runtime/primc_rt.h"
#include "tests/test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ATTRS 12

/* CHECK_INT evaluates its operands twice; an interpreter run must happen once */
static int check_status(pc_status got, pc_status want, const char *what, int line) {
  return pc_test_check(got == want, __FILE__, line, "%s: %s, want %s", what, pc_status_name(got), pc_status_name(want));
}
#define CHECK_STATUS(call, want) check_status((call), (want), #call, __LINE__)
#define MAX_TENSORS 8

/* one line of tests/data/prims/cases.txt */
typedef struct prim_case {
  char line[1024]; /* tokens point into this copy */
  const char *name, *prim;
  int nin, nout;
  double atol, rtol;
  char bf16[64]; /* "in0,out0": tensors stored as f32 that are bf16 in the graph */
  int n_attrs;
  pc_attr attrs[MAX_ATTRS];
  int64_t ints[MAX_ATTRS][PC_MAX_RANK * 2];
} prim_case;

static int parse_attr(prim_case *pc, char *tok) {
  char *eq = strchr(tok, '='), *colon = eq ? strchr(eq, ':') : NULL;
  if (!eq || !colon || pc->n_attrs == MAX_ATTRS) return 0;
  *eq = *colon = 0;
  const char *kind = eq + 1, *val = colon + 1;
  int k = pc->n_attrs++;
  pc_attr *a = &pc->attrs[k];
  if (!strcmp(kind, "i")) *a = pc_a_int(tok, strtoll(val, NULL, 10));
  else if (!strcmp(kind, "f")) *a = pc_a_float(tok, strtod(val, NULL));
  else if (!strcmp(kind, "s")) *a = pc_a_str(tok, val);
  else if (!strcmp(kind, "d")) {
    pc_dtype t;
    if (!pc_dtype_from_name(val, &t)) return 0;
    *a = pc_a_dtype(tok, t);
  } else if (!strcmp(kind, "is")) {
    int n = 0;
    for (const char *p = val; *p && n < PC_MAX_RANK * 2;) {
      char *end;
      pc->ints[k][n++] = strtoll(p, &end, 10);
      p = *end == ',' ? end + 1 : end;
      if (end == p && *p) return 0;
    }
    *a = pc_a_ints(tok, pc->ints[k], n);
  } else {
    return 0;
  }
  return 1;
}

static int parse_case(const char *text, prim_case *pc) {
  memset(pc, 0, sizeof *pc);
  snprintf(pc->line, sizeof pc->line, "%s", text);
  char *save = NULL;
  pc->name = strtok_r(pc->line, " \t\n", &save);
  pc->prim = strtok_r(NULL, " \t\n", &save);
  if (!pc->name || !pc->prim) return 0;
  for (char *t; (t = strtok_r(NULL, " \t\n", &save));) {
    if (!strncmp(t, "nin=", 4)) pc->nin = atoi(t + 4);
    else if (!strncmp(t, "nout=", 5)) pc->nout = atoi(t + 5);
    else if (!strncmp(t, "atol=", 5)) pc->atol = strtod(t + 5, NULL);
    else if (!strncmp(t, "rtol=", 5)) pc->rtol = strtod(t + 5, NULL);
    else if (!strncmp(t, "bf16=", 5)) snprintf(pc->bf16, sizeof pc->bf16, "%s", t + 5);
    else if (!parse_attr(pc, t)) return 0;
  }
  return pc->nin <= MAX_TENSORS && pc->nout <= MAX_TENSORS;
}

static int is_bf16(const prim_case *pc, const char *tensor) {
  size_t n = strlen(tensor);
  for (const char *p = pc->bf16; (p = strstr(p, tensor)); p += n)
    if ((p == pc->bf16 || p[-1] == ',') && (p[n] == 0 || p[n] == ',')) return 1;
  return 0;
}

/* loads dir/file.npy as a tensor; bf16: f32 data narrowed (exactly) to bf16 */
static int load_tensor(const char *dir, const char *file, int bf16, pc_tensor *t) {
  char path[512], err[200];
  primc_array a;
  snprintf(path, sizeof path, "%s/%s.npy", dir, file);
  if (primc_npy_read(path, &a, err, sizeof err) != 0) return CHECK_MSG(0, "%s: %s", path, err), 0;
  t->dtype = (pc_dtype)a.dtype; /* primc_dtype follows ir/dtypes.def's order */
  t->rank = a.rank;
  memcpy(t->dims, a.dims, sizeof t->dims);
  t->data = a.data;
  if (bf16 && a.dtype == PRIMC_F32) {
    int64_t n = pc_tensor_numel(t);
    uint16_t *h = malloc((size_t)(n ? n : 1) * 2);
    for (int64_t i = 0; i < n; i++) h[i] = pc_f32_to_bf16(((float *)a.data)[i]);
    free(a.data);
    t->data = h;
    t->dtype = PC_bf16;
  }
  return 1;
}

static int compare(const char *name, int k, const pc_tensor *got, const pc_tensor *want, double atol, double rtol) {
  if (!CHECK_MSG(got->dtype == want->dtype, "%s out%d: dtype %s, want %s", name, k, pc_dtype_name(got->dtype),
                 pc_dtype_name(want->dtype)))
    return 0;
  int same = got->rank == want->rank;
  for (int i = 0; same && i < got->rank; i++) same = got->dims[i] == want->dims[i];
  if (!CHECK_MSG(same, "%s out%d: shape differs (rank %d vs %d, dim0 %lld vs %lld)", name, k, got->rank, want->rank,
                 (long long)(got->rank ? got->dims[0] : -1), (long long)(want->rank ? want->dims[0] : -1)))
    return 0;
  int64_t n = pc_tensor_numel(got) * (got->dtype == PC_c64 ? 2 : 1);
  if (got->dtype == PC_i64) {
    for (int64_t i = 0; i < n; i++)
      if (((int64_t *)got->data)[i] != ((int64_t *)want->data)[i])
        return CHECK_MSG(0, "%s out%d[%lld]: %lld, want %lld", name, k, (long long)i, (long long)((int64_t *)got->data)[i],
                         (long long)((int64_t *)want->data)[i]);
    return CHECK(1);
  }
  pc_dtype lane = got->dtype == PC_c64 ? PC_f32 : got->dtype; /* complex: both halves */
  for (int64_t i = 0; i < n; i++) {
    double a = pc_elem_f64(lane, got->data, i), b = pc_elem_f64(lane, want->data, i);
    int ok = (isnan(a) && isnan(b)) || a == b || fabs(a - b) <= atol + rtol * fabs(b);
    if (!ok) return CHECK_MSG(0, "%s out%d[%lld]: %.9g, want %.9g", name, k, (long long)i, a, b);
  }
  return CHECK(1);
}

static void free_tensors(pc_tensor *t, int n) {
  for (int i = 0; i < n; i++) pc_tensor_free(&t[i]);
}

static void run_case(const prim_case *pc, const char *dir) {
  pc_tensor in[MAX_TENSORS] = {0}, want[MAX_TENSORS] = {0}, got[MAX_TENSORS] = {0};
  int ok = 1;
  char nm[16];
  for (int i = 0; ok && i < pc->nin; i++) {
    snprintf(nm, sizeof nm, "in%d", i);
    ok = load_tensor(dir, nm, is_bf16(pc, nm), &in[i]);
  }
  for (int i = 0; ok && i < pc->nout; i++) {
    snprintf(nm, sizeof nm, "out%d", i);
    ok = load_tensor(dir, nm, is_bf16(pc, nm), &want[i]);
  }
  pc_op op;
  if (ok && !CHECK_MSG(pc_op_from_name(pc->prim, &op), "%s: unknown prim %s", pc->name, pc->prim)) ok = 0;
  pc_graph *g = pc_graph_new();
  if (ok) {
    pc_value *vin[MAX_TENSORS];
    for (int i = 0; i < pc->nin; i++) vin[i] = pc_input_add(g, NULL, pc_type_make(in[i].dtype, in[i].rank, in[i].dims));
    if (op == PC_OP_constant) { /* the payload is the expected output itself */
      pc_value *v = pc_const(g, pc_type_make(want[0].dtype, want[0].rank, want[0].dims), want[0].data);
      pc_output_add(g, v);
    } else {
      pc_node *n = pc_node_add(g, op, vin, pc->nin, pc->attrs, pc->n_attrs);
      for (int i = 0; n && i < n->n_out; i++) pc_output_add(g, n->out[i]);
      if (n && !CHECK_MSG(n->n_out == pc->nout, "%s: %d results, manifest says %d", pc->name, n->n_out, pc->nout)) ok = 0;
    }
    if (ok && !CHECK_MSG(g->status == PC_OK, "%s: building: %s", pc->name, pc_error(g))) ok = 0;
  }
  if (ok) {
    pc_status st = pc_interp(g, in, pc->nin, got, pc->nout);
    if (CHECK_MSG(st == PC_OK, "%s: %s", pc->name, pc_error(g)))
      for (int i = 0; i < pc->nout; i++) compare(pc->name, i, &got[i], &want[i], pc->atol, pc->rtol);
  }
  pc_graph_free(g);
  free_tensors(in, pc->nin);
  free_tensors(want, pc->nout);
  free_tensors(got, pc->nout);
}

/* calls fn on every case of the manifest; the count of cases, -1 when it is missing */
static int for_each_case(void (*fn)(const prim_case *pc, const char *dir, void *ctx), void *ctx) {
  char path[512], line[1024];
  snprintf(path, sizeof path, "%s/tests/data/prims/cases.txt", pc_test_srcdir());
  FILE *f = fopen(path, "r");
  if (!CHECK_MSG(f != NULL, "cannot open %s (run python3 tests/ref/gen_prim_refs.py)", path)) return -1;
  int count = 0;
  static prim_case pc;
  while (fgets(line, sizeof line, f)) {
    if (line[0] == '#' || line[0] == '\n') continue;
    if (!CHECK_MSG(parse_case(line, &pc), "bad manifest line: %s", line)) continue;
    char dir[512];
    snprintf(dir, sizeof dir, "%s/tests/data/prims/%s", pc_test_srcdir(), pc.name);
    fn(&pc, dir, ctx);
    count++;
  }
  fclose(f);
  return count;
}

static void run_one(const prim_case *pc, const char *dir, void *ctx) {
  const char *filter = getenv("PRIMC_PRIM_CASE");
  if (!filter || strstr(pc->name, filter)) run_case(pc, dir);
}

PC_TEST(interp_prims_vs_numpy) {
  int n = for_each_case(run_one, NULL);
  CHECK_MSG(n > 100, "only %d cases", n);
}

static void mark_prim(const prim_case *pc, const char *dir, void *ctx) {
  pc_op op;
  if (pc_op_from_name(pc->prim, &op)) ((int *)ctx)[op] = 1;
}

/* every prim has a numpy case, or a targeted test below (random: statistics and known answers) */
PC_TEST(interp_every_prim_covered) {
  int seen[PC_OP_COUNT] = {0};
  for_each_case(mark_prim, seen);
  seen[PC_OP_random] = 1;
  char missing[1024] = "";
  for (int i = 0; i < PC_OP_COUNT; i++)
    if (!seen[i]) {
      strncat(missing, " ", sizeof missing - strlen(missing) - 1);
      strncat(missing, pc_prim((pc_op)i)->name, sizeof missing - strlen(missing) - 1);
    }
  CHECK_MSG(missing[0] == 0, "prims without a case:%s", missing);
}

/* ---------------------------------------------------------------- error paths */

static pc_tensor tensor1(pc_dtype dt, int64_t n, void *data) {
  pc_tensor t = {.dtype = dt, .rank = 1, .dims = {n}, .data = data};
  return t;
}

PC_TEST(interp_int_div_by_zero) {
  const char *prims[] = {"div", "rem"};
  for (int k = 0; k < 2; k++) {
    pc_graph *g = pc_graph_new();
    pc_set_origin(g, "Div \"layer.div\"");
    int64_t d[1] = {3};
    pc_value *a = pc_input_add(g, "a", pc_type_make(PC_i32, 1, d)), *b = pc_input_add(g, "b", pc_type_make(PC_i32, 1, d));
    pc_op op;
    pc_op_from_name(prims[k], &op);
    pc_value *ab[2] = {a, b};
    pc_output_add(g, pc_build(g, op, ab, 2, NULL, 0));
    int32_t x[3] = {7, 8, 9}, y[3] = {1, 0, 2};
    pc_tensor in[2] = {tensor1(PC_i32, 3, x), tensor1(PC_i32, 3, y)}, out[1];
    CHECK_STATUS(pc_interp(g, in, 2, out, 1), PC_ERR_RANGE);
    CHECK_CONTAINS(pc_error(g), "layer.div");
    CHECK_CONTAINS(pc_error(g), "division by zero");
    pc_graph_free(g);
  }
}

/* INT_MIN / -1 and INT_MIN % -1 overflow (a trap on x86): defined here as wrapping */
PC_TEST(interp_int_min_div_minus_one) {
  pc_graph *g = pc_graph_new();
  int64_t d[1] = {2};
  pc_value *a = pc_input_add(g, "a", pc_type_make(PC_i64, 1, d)), *b = pc_input_add(g, "b", pc_type_make(PC_i64, 1, d));
  pc_output_add(g, pc_div(g, a, b));
  pc_output_add(g, pc_rem(g, a, b));
  int64_t x[2] = {INT64_MIN, -9}, y[2] = {-1, -1};
  pc_tensor in[2] = {tensor1(PC_i64, 2, x), tensor1(PC_i64, 2, y)}, out[2];
  if (CHECK_STATUS(pc_interp(g, in, 2, out, 2), PC_OK)) {
    CHECK(((int64_t *)out[0].data)[0] == INT64_MIN);
    CHECK_INT(((int64_t *)out[0].data)[1], 9);
    CHECK_INT(((int64_t *)out[1].data)[0], 0);
    free_tensors(out, 2);
  }
  pc_graph_free(g);
}

static void check_index_error(pc_op op, int64_t bad) {
  pc_graph *g = pc_graph_new();
  int64_t xd[1] = {3}, id[1] = {2};
  pc_value *x = pc_input_add(g, "x", pc_type_make(PC_f32, 1, xd));
  pc_value *idx = pc_input_add(g, "idx", pc_type_make(PC_i64, 1, id));
  pc_attr attrs[2] = {pc_a_int("axis", 0), pc_a_str("reduce", "add")};
  pc_value *ins[3] = {x, idx, NULL};
  if (op == PC_OP_scatter) ins[2] = pc_input_add(g, "upd", pc_type_make(PC_f32, 1, id));
  int nin = op == PC_OP_scatter ? 3 : 2;
  pc_output_add(g, pc_build(g, op, ins, nin, attrs, op == PC_OP_scatter ? 2 : 1));
  if (!CHECK_MSG(g->status == PC_OK, "%s", pc_error(g))) {
    pc_graph_free(g);
    return;
  }
  float xv[3] = {1, 2, 3}, uv[2] = {5, 6};
  int64_t iv[2] = {1, bad};
  pc_tensor in[3] = {tensor1(PC_f32, 3, xv), tensor1(PC_i64, 2, iv), tensor1(PC_f32, 2, uv)}, out[1];
  CHECK_STATUS(pc_interp(g, in, nin, out, 1), PC_ERR_RANGE);
  CHECK_CONTAINS(pc_error(g), pc_prim(op)->name);
  CHECK_CONTAINS(pc_error(g), "out of range");
  pc_graph_free(g);
}

PC_TEST(interp_index_out_of_range) {
  check_index_error(PC_OP_gather, 3);
  check_index_error(PC_OP_gather, -1);
  check_index_error(PC_OP_scatter, 7);
  check_index_error(PC_OP_scatter, -2);
}

/* ---------------------------------------------------------------- symbols */

PC_TEST(interp_symbolic_dims) {
  pc_graph *g = pc_graph_new();
  int s = pc_sym_add(g, "batch", 1, 8);
  int64_t d[2] = {PC_SYM(s), 3};
  pc_value *a = pc_input_add(g, "a", pc_type_make(PC_f32, 2, d)), *b = pc_input_add(g, "b", pc_type_make(PC_f32, 2, d));
  int64_t axes[1] = {1};
  pc_output_add(g, pc_reduce(g, PC_OP_reduce_sum, pc_mul(g, a, b), 1, axes));
  if (!CHECK_MSG(g->status == PC_OK, "%s", pc_error(g))) {
    pc_graph_free(g);
    return;
  }
  float x[30], y[30];
  for (int i = 0; i < 30; i++) x[i] = (float)i, y[i] = 2;
  pc_tensor in[2] = {{PC_f32, 2, {5, 3}, x}, {PC_f32, 2, {5, 3}, y}}, out[1];
  if (CHECK_STATUS(pc_interp(g, in, 2, out, 1), PC_OK)) {
    CHECK_INT(out[0].rank, 1);
    CHECK_INT(out[0].dims[0], 5);
    CHECK_NEAR(((float *)out[0].data)[4], 2 * (12 + 13 + 14), 0);
    pc_tensor_free(&out[0]);
  }
  pc_graph_free(g);
}

static pc_status run_sym_graph(int64_t n0, int64_t n1, int64_t c1) {
  pc_graph *g = pc_graph_new();
  int s = pc_sym_add(g, "batch", 1, 8);
  int64_t d[2] = {PC_SYM(s), 3};
  pc_value *a = pc_input_add(g, "a", pc_type_make(PC_f32, 2, d)), *b = pc_input_add(g, "b", pc_type_make(PC_f32, 2, d));
  pc_output_add(g, pc_add(g, a, b));
  float x[64] = {0}, y[64] = {0};
  pc_tensor in[2] = {{PC_f32, 2, {n0, 3}, x}, {PC_f32, 2, {n1, c1}, y}}, out[1];
  pc_status st = pc_interp(g, in, 2, out, 1);
  if (st == PC_OK) pc_tensor_free(&out[0]);
  else CHECK_CONTAINS(pc_error(g), "input");
  pc_graph_free(g);
  return st;
}

PC_TEST(interp_symbol_binding_errors) {
  CHECK_INT(run_sym_graph(4, 4, 3), PC_OK);
  CHECK_INT(run_sym_graph(9, 9, 3), PC_ERR_SHAPE); /* outside the bound */
  CHECK_INT(run_sym_graph(4, 5, 3), PC_ERR_SHAPE); /* batch bound twice differently */
  CHECK_INT(run_sym_graph(4, 4, 2), PC_ERR_SHAPE); /* concrete dim disagrees */
}

/* nonzero's count is bound at run time and flows into the next node's shape */
PC_TEST(interp_nonzero_binds_its_dim) {
  pc_graph *g = pc_graph_new();
  int64_t d[1] = {6};
  pc_value *x = pc_input_add(g, "x", pc_type_make(PC_i32, 1, d));
  pc_value *nz = pc_build(g, PC_OP_nonzero, &x, 1, NULL, 0);
  pc_output_add(g, pc_convert(g, nz, PC_f32));
  if (!CHECK_MSG(g->status == PC_OK, "%s", pc_error(g))) {
    pc_graph_free(g);
    return;
  }
  int32_t v[6] = {0, 4, 0, 0, -1, 2};
  pc_tensor in[1] = {tensor1(PC_i32, 6, v)}, out[1];
  if (CHECK_STATUS(pc_interp(g, in, 1, out, 1), PC_OK)) {
    CHECK_INT(out[0].dims[0], 1);
    CHECK_INT(out[0].dims[1], 3);
    float *o = out[0].data;
    CHECK(o[0] == 1 && o[1] == 4 && o[2] == 5);
    pc_tensor_free(&out[0]);
  }
  pc_graph_free(g);
}

PC_TEST(interp_node_direct) {
  pc_graph *g = pc_graph_new();
  int64_t d[1] = {3};
  pc_value *a = pc_input_add(g, "a", pc_type_make(PC_f32, 1, d));
  pc_value *y = pc_sub(g, a, a);
  pc_value *z = pc_mul(g, a, y);
  float x[3] = {1, 2, 3}, w[3] = {4, 5, 6};
  pc_tensor in[2] = {tensor1(PC_f32, 3, x), tensor1(PC_f32, 3, w)}, out[1];
  if (CHECK(z != NULL) && CHECK_STATUS(pc_interp_node(g, z->producer, in, out), PC_OK)) {
    CHECK(((float *)out[0].data)[2] == 18);
    pc_tensor_free(&out[0]);
  }
  pc_tensor bad = tensor1(PC_f32, 2, x);
  pc_tensor in2[2] = {bad, bad};
  CHECK_STATUS(pc_interp_node(g, z->producer, in2, out), PC_ERR_SHAPE);
  CHECK_CONTAINS(pc_error(g), "mul");
  pc_graph_free(g);
}

/* ---------------------------------------------------------------- random */

/* Random123's tests/kat_vectors, the three philox4x32 10 lines (counter, key, result) */
PC_TEST(philox_known_answers) {
  static const uint32_t kat[3][10] = {
      {0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
      {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x408f276d, 0x41c83b0e, 0xa20bc7c6,
       0x6d5451fd},
      {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, 0xd16cfe09, 0x94fdcceb, 0x5001e420,
       0x24126ea1},
  };
  for (int k = 0; k < 3; k++) {
    uint32_t out[4];
    primc_philox4x32_10(kat[k], kat[k] + 4, out);
    for (int i = 0; i < 4; i++) CHECK_MSG(out[i] == kat[k][6 + i], "vector %d word %d: %08x", k, i, out[i]);
  }
}

/* numpy's legacy RandomState: 32-bit draws of
 *   np.random.RandomState(seed).randint(0, 2**32, size=1000, dtype=np.uint32)
 * (indices 0, 1, 2, 623, 624 and 999: the first twist's words, and two more twists) for seed 0, the first draw for
 * seeds 5489 (the generator's published first output) and 2**32 - 1, and the doubles of
 *   [float(v) for v in np.random.RandomState(0).random_sample(400)]
 * (indices 0, 1, 311, 312, 399: the two draws of 311 and 312 straddle a twist), numpy 2.4.6 */
PC_TEST(mt19937_matches_numpy) {
  static const struct { uint32_t seed; int at; uint32_t want; } draws[] = {
      {0, 0, 2357136044u},   {0, 1, 2546248239u},   {0, 2, 3071714933u},          {0, 623, 3791854820u},
      {0, 624, 341544762u},  {0, 999, 3043451800u}, {5489, 0, 3499211612u}, {4294967295u, 0, 419326371u},
  };
  for (size_t k = 0; k < sizeof draws / sizeof draws[0]; k++) {
    primc_mt19937 s;
    primc_mt19937_seed(&s, draws[k].seed);
    uint32_t v = 0;
    for (int i = 0; i <= draws[k].at; i++) v = primc_mt19937_next(&s);
    CHECK_MSG(v == draws[k].want, "seed %u draw %d: %u, numpy %u", draws[k].seed, draws[k].at, v, draws[k].want);
  }
  static const struct { int at; double want; } doubles[] = {
      {0, 0.5488135039273248}, {1, 0.7151893663724195}, {311, 0.14694664540037505},
      {312, 0.07952208258675575}, {399, 0.18523232523618394},
  };
  primc_mt19937 s;
  primc_mt19937_seed(&s, 0);
  for (int i = 0, k = 0; k < (int)(sizeof doubles / sizeof doubles[0]); i++) {
    double v = primc_mt19937_double(&s);
    if (i == doubles[k].at) CHECK_MSG(v == doubles[k].want, "double %d: %.17g, numpy %.17g", i, v, doubles[k].want), k++;
  }
}

/* shuffles as RandomState draws them (the trainer's --shuffle): two successive
 *   rs = np.random.RandomState(7); rs.permutation(10); rs.permutation(10)
 * and np.random.RandomState(12345).permutation(1797) at indices 0, 1, 900, 1796, numpy 2.4.6 */
PC_TEST(mt19937_shuffles_as_numpy) {
  static const int64_t want[2][10] = {{8, 5, 0, 2, 1, 9, 7, 3, 6, 4}, {1, 3, 2, 5, 9, 0, 4, 6, 7, 8}};
  primc_mt19937 s;
  primc_mt19937_seed(&s, 7);
  for (int r = 0; r < 2; r++) {
    int64_t a[10];
    for (int i = 0; i < 10; i++) a[i] = i;
    primc_mt19937_shuffle(&s, a, 10);
    for (int i = 0; i < 10; i++) CHECK_MSG(a[i] == want[r][i], "permutation %d [%d]: %lld, numpy %lld", r, i, (long long)a[i], (long long)want[r][i]);
  }
  static int64_t b[1797];
  for (int i = 0; i < 1797; i++) b[i] = i;
  primc_mt19937_seed(&s, 12345);
  primc_mt19937_shuffle(&s, b, 1797);
  CHECK_INT(b[0], 622);
  CHECK_INT(b[1], 1705);
  CHECK_INT(b[900], 181);
  CHECK_INT(b[1796], 482);
}

static int random_run(pc_dtype dt, const char *dist, double a, double b, int64_t seed, int64_t n, pc_tensor *out) {
  pc_graph *g = pc_graph_new();
  int64_t shape[1] = {n};
  pc_attr attrs[6] = {pc_a_dtype("dtype", dt), pc_a_ints("shape", shape, 1), pc_a_str("dist", dist),
                      pc_a_float("a", a),      pc_a_float("b", b),          pc_a_int("seed", seed)};
  pc_output_add(g, pc_build(g, PC_OP_random, NULL, 0, attrs, 6));
  int ok = CHECK_MSG(g->status == PC_OK, "%s", pc_error(g)) && CHECK_STATUS(pc_interp(g, NULL, 0, out, 1), PC_OK);
  if (!ok) CHECK_MSG(0, "%s", pc_error(g));
  pc_graph_free(g);
  return ok;
}

static void moments(const pc_tensor *t, double *mean, double *sd, double *lo, double *hi) {
  int64_t n = pc_tensor_numel(t);
  double s = 0, s2 = 0;
  *lo = INFINITY, *hi = -INFINITY;
  for (int64_t i = 0; i < n; i++) {
    double v = pc_elem_f64(t->dtype, t->data, i);
    s += v, s2 += v * v;
    *lo = v < *lo ? v : *lo;
    *hi = v > *hi ? v : *hi;
  }
  *mean = s / (double)n;
  *sd = sqrt(s2 / (double)n - *mean * *mean);
}

PC_TEST(interp_random_uniform) {
  pc_tensor a, b, c;
  if (!random_run(PC_f32, "uniform", -1, 3, 42, 20000, &a)) return;
  double mean, sd, lo, hi;
  moments(&a, &mean, &sd, &lo, &hi);
  CHECK(lo >= -1 && hi < 3);
  CHECK_NEAR(mean, 1.0, 0.05);              /* sigma of the mean: 0.008 */
  CHECK_NEAR(sd, 4 / sqrt(12.0), 0.03);
  if (random_run(PC_f32, "uniform", -1, 3, 42, 20000, &b)) {
    CHECK(memcmp(a.data, b.data, pc_tensor_nbytes(&a)) == 0); /* deterministic from the seed */
    pc_tensor_free(&b);
  }
  if (random_run(PC_f32, "uniform", -1, 3, 43, 20000, &c)) {
    CHECK(memcmp(a.data, c.data, pc_tensor_nbytes(&a)) != 0);
    pc_tensor_free(&c);
  }
  pc_tensor_free(&a);
  /* f16 rounds many draws up to b: they must stay below it */
  if (random_run(PC_f16, "uniform", 0, 1, 7, 20000, &a)) {
    moments(&a, &mean, &sd, &lo, &hi);
    CHECK(lo >= 0 && hi < 1);
    CHECK_NEAR(mean, 0.5, 0.02);
    pc_tensor_free(&a);
  }
}

PC_TEST(interp_random_normal) {
  pc_tensor a;
  double mean, sd, lo, hi;
  if (!random_run(PC_f64, "normal", 2.0, 0.5, 1234, 40000, &a)) return;
  moments(&a, &mean, &sd, &lo, &hi);
  CHECK_NEAR(mean, 2.0, 0.015); /* sigma of the mean: 0.0025 */
  CHECK_NEAR(sd, 0.5, 0.015);
  CHECK(lo > 2.0 - 0.5 * 6.5 && hi < 2.0 + 0.5 * 6.5);
  int64_t n = pc_tensor_numel(&a), within = 0;
  for (int64_t i = 0; i < n; i++) within += fabs(pc_elem_f64(a.dtype, a.data, i) - 2.0) < 0.5;
  CHECK_NEAR((double)within / (double)n, 0.6827, 0.015); /* one-sigma mass: the shape, not just moments */
  pc_tensor_free(&a);
}
