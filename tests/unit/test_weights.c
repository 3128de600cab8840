/* tests/unit/test_weights.c: the weights side file (header, checksum, mapping) and the packed-weight header checks, down to a compiled model fed altered files. */
#include "codegen/codegen.h"
#include "ir/ir.h"
#include "runtime/primc_rt.h"
#include "tests/test.h"
#include "tests/unit/helpers.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static unsigned char *pattern(size_t n, unsigned seed) {
  unsigned char *b = malloc(n ? n : 1);
  for (size_t i = 0; i < n; i++) b[i] = (unsigned char)((i * 131 + seed * 7 + (i >> 8)) & 0xff);
  return b;
}

/* streamed in chunks of any size the checksum is the one-shot one; any one flipped bit, a changed
 * length or swapped words change it; a fixed input gives the value tests/ref/weights_checksum.py
 * (an independent implementation of the rule in runtime/weights.c) prints */
PC_TEST(weights_checksum) {
  size_t n = 1000;
  unsigned char *b = pattern(n, 1);
  uint64_t one = primc_checksum(b, n);
  static const size_t chunks[] = {1, 3, 7, 31, 32, 33, 64, 999};
  for (size_t c = 0; c < sizeof chunks / sizeof *chunks; c++) {
    primc_checksum_state s;
    primc_checksum_init(&s);
    for (size_t i = 0; i < n; i += chunks[c]) primc_checksum_update(&s, b + i, i + chunks[c] <= n ? chunks[c] : n - i);
    CHECK_MSG(primc_checksum_final(&s) == one, "chunks of %zu", chunks[c]);
  }
  int missed = 0;
  for (size_t bit = 0; bit < n * 8; bit++) {
    b[bit / 8] ^= (unsigned char)(1u << (bit % 8));
    missed += primc_checksum(b, n) == one;
    b[bit / 8] ^= (unsigned char)(1u << (bit % 8));
  }
  CHECK_INT(missed, 0);
  CHECK(primc_checksum(b, n - 1) != one);
  unsigned char z[64] = {0};
  CHECK(primc_checksum(z, 63) != primc_checksum(z, 64)); /* zero padding is not the same as zeros */
  unsigned char sw[64];
  memcpy(sw, b, 64);
  memcpy(sw, b + 8, 8), memcpy(sw + 8, b, 8);
  CHECK(primc_checksum(sw, 64) != primc_checksum(b, 64));
  /* 0..255 repeated to 1000 bytes: the reference script's value */
  for (size_t i = 0; i < n; i++) b[i] = (unsigned char)i;
  CHECK_MSG(primc_checksum(b, n) == 0x3c3cfb67921d1669ull, "checksum %016llx", (unsigned long long)primc_checksum(b, n));
  CHECK_MSG(primc_checksum(b, 0) == 0x23351b583ba3ec58ull, "empty %016llx", (unsigned long long)primc_checksum(b, 0));
  free(b);
}

/* every header field is checked: each altered one is an error naming it, the intact file passes */
PC_TEST(weights_header_check) {
  size_t n = 4096;
  unsigned char *file = malloc(sizeof(primc_weights_header) + n), *payload = file + sizeof(primc_weights_header);
  unsigned char *p = pattern(n, 5);
  memcpy(payload, p, n);
  primc_weights_header h;
  primc_weights_header_fill(&h, n, primc_checksum(payload, n));
  CHECK_INT(sizeof h, 64);
  memcpy(file, &h, sizeof h);
  char err[256] = "";
  size_t fs = sizeof h + n;
  CHECK_MSG(primc_weights_check(file, fs, (int64_t)n, err, sizeof err) == PRIMC_OK, "%s", err);
  CHECK_INT(primc_weights_check(file, fs, -1, err, sizeof err), PRIMC_OK);
  CHECK_INT(primc_weights_check(file, fs, (int64_t)n + 64, err, sizeof err), PRIMC_ERR_WEIGHTS);
  CHECK_CONTAINS(err, "different number of bytes");
  CHECK_INT(primc_weights_check(file, fs - 1, (int64_t)n, err, sizeof err), PRIMC_ERR_WEIGHTS);
  CHECK_CONTAINS(err, "truncated");
  CHECK_INT(primc_weights_check(file, 10, (int64_t)n, err, sizeof err), PRIMC_ERR_WEIGHTS);
  CHECK_CONTAINS(err, "shorter than");
  CHECK_INT(primc_weights_check(NULL, 0, 0, err, sizeof err), PRIMC_ERR_WEIGHTS);
  struct {
    size_t at;
    const char *why;
  } alter[] = {{0, "bad magic"}, {8, "version"}, {12, "version"}, {16, "header checksum"}, {24, "header checksum"},
               {40, "header checksum"}, {56, "header checksum"}};
  for (size_t i = 0; i < sizeof alter / sizeof *alter; i++) {
    file[alter[i].at] ^= 0x40;
    CHECK_INT(primc_weights_check(file, fs, (int64_t)n, err, sizeof err), PRIMC_ERR_WEIGHTS);
    CHECK_CONTAINS(err, alter[i].why);
    file[alter[i].at] ^= 0x40;
  }
  payload[n / 2] ^= 1;
  CHECK_INT(primc_weights_check(file, fs, (int64_t)n, err, sizeof err), PRIMC_ERR_WEIGHTS);
  CHECK_CONTAINS(err, "payload checksum");
  free(file);
  free(p);
}

/* packed B headers: each altered field (magic, ISA, panel width, K block, N, K) or a buffer too short
 * for the panels the header describes is PRIMC_ERR_WEIGHTS, never a read out of bounds */
PC_TEST(weights_packed_header_check) {
  int64_t N = 70, K = 24;
  size_t bytes = primc_sgemm_packed_b_size(N, K);
  float *B = (float *)pattern(sizeof(float) * (size_t)(N * K), 2);
  for (int64_t i = 0; i < N * K; i++) B[i] = (float)(i % 17) - 8.0f;
  unsigned char *pk = aligned_alloc(64, (bytes + 63) / 64 * 64);
  CHECK_INT(primc_sgemm_pack_b(0, N, K, B, N, pk), PRIMC_OK);
  size_t used = 0;
  CHECK_INT(primc_sgemm_packed_check(pk, bytes, N, K, &used), PRIMC_OK);
  CHECK_INT(used, bytes);
  CHECK_INT(primc_sgemm_packed_check(pk, bytes - 4, N, K, NULL), PRIMC_ERR_WEIGHTS);
  CHECK_INT(primc_sgemm_packed_check(pk, bytes, N + 1, K, NULL), PRIMC_ERR_WEIGHTS);
  CHECK_INT(primc_sgemm_packed_check(pk, bytes, N, K - 1, NULL), PRIMC_ERR_WEIGHTS);
  CHECK_INT(primc_sgemm_packed_check(pk + 4, bytes, N, K, NULL), PRIMC_ERR_WEIGHTS); /* misaligned */
  CHECK_INT(primc_sgemm_packed_check(NULL, bytes, N, K, NULL), PRIMC_ERR_WEIGHTS);
  /* header: u32 magic, i32 isa, nr, kc, i64 n, k */
  static const int32_t bad32[][2] = {{0, 0x12345678}, {1, 7}, {1, -1}, {2, 1000}, {2, 0}, {3, 0}, {3, 100000}};
  float A[4 * 24] = {0}, C[4 * 70];
  for (size_t i = 0; i < sizeof bad32 / sizeof *bad32; i++) {
    int32_t keep;
    memcpy(&keep, pk + 4 * bad32[i][0], 4);
    memcpy(pk + 4 * bad32[i][0], &bad32[i][1], 4);
    CHECK_MSG(primc_sgemm_packed_check(pk, bytes, N, K, NULL) == PRIMC_ERR_WEIGHTS, "word %d = %d", bad32[i][0],
              bad32[i][1]);
    /* the library entry points refuse it too (a status, no crash) */
    CHECK_INT(primc_sgemm_prepacked_any(0, 4, N, K, 1.0f, A, K, pk, 0.0f, C, N, NULL, NULL), PRIMC_ERR_ARG);
    memcpy(pk + 4 * bad32[i][0], &keep, 4);
  }
  int64_t big = (int64_t)1 << 50;
  memcpy(pk + 16, &big, 8);
  CHECK_INT(primc_sgemm_packed_check(pk, bytes, N, K, NULL), PRIMC_ERR_WEIGHTS);
  free(pk);
  free(B);
}

/* a conv whose weights are W^T panels per group: an altered header in any group is PRIMC_ERR_WEIGHTS from
 * the conv itself and from primc_conv2d_check_weights, which also knows their size */
PC_TEST(weights_conv_panels_check) {
  primc_conv2d p = {1, 8, 7, 7, 64, 3, 3, 2, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 0, 0, 0, 0};
  int64_t og = p.o / p.groups, kk = (p.c / p.groups) * p.kh * p.kw;
  size_t stride = (primc_sgemm_packed_b_size(og, kk) + 63) / 64 * 64, bytes = primc_conv2d_packed_weight_bytes(&p, PRIMC_CONV_W_PANELS);
  CHECK_INT(bytes, 2 * stride);
  float *w = malloc(sizeof(float) * (size_t)(p.o * kk)), *x = calloc((size_t)(p.c * 49), sizeof(float));
  float *y = malloc(sizeof(float) * (size_t)(p.o * 49)), *col = malloc(sizeof(float) * (size_t)primc_conv2d_scratch_floats(&p) + 64);
  for (int64_t i = 0; i < p.o * kk; i++) w[i] = (float)(i % 5);
  unsigned char *wp = aligned_alloc(64, bytes);
  for (int g = 0; g < 2; g++) CHECK_INT(primc_sgemm_pack_b(1, og, kk, w + g * og * kk, kk, wp + g * stride), PRIMC_OK);
  CHECK_INT(primc_conv2d_check_weights(&p, wp, bytes), PRIMC_OK);
  CHECK_INT(primc_conv2d_check_weights(&p, wp, bytes - 64), PRIMC_ERR_WEIGHTS);
  primc_conv_epi e = {.lo = -1e30f, .hi = 1e30f};
  CHECK_INT(primc_conv2d_f32_epi(&p, x, (const float *)wp, &e, y, NULL, col), PRIMC_OK);
  for (int g = 0; g < 2; g++) {
    int32_t nr_bad = 4096, keep;
    memcpy(&keep, wp + g * stride + 8, 4);
    memcpy(wp + g * stride + 8, &nr_bad, 4);
    CHECK_INT(primc_conv2d_check_weights(&p, wp, bytes), PRIMC_ERR_WEIGHTS);
    CHECK_INT(primc_conv2d_f32_epi(&p, x, (const float *)wp, &e, y, NULL, col), PRIMC_ERR_WEIGHTS);
    memcpy(wp + g * stride + 8, &keep, 4);
  }
  free(w), free(x), free(y), free(col), free(wp);
}

/* ---------------------------------------------------------------- a compiled model and its weights file */

typedef int (*run_fn)(const void *const *, void *const *, void *);
typedef int (*load_fn)(const char *);

static unsigned char *read_all(const char *path, size_t *n) { return (unsigned char *)pc_test_slurp(path, n); }

static int write_all(const char *path, const void *d, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) return 0;
  int ok = fwrite(d, 1, n, f) == n;
  return (fclose(f) == 0) && ok;
}

/* the file with its header's checksum made right again (an altered but well-formed file) */
static void reseal(unsigned char *file, size_t n) {
  primc_weights_header h;
  primc_weights_header_fill(&h, n - sizeof h, primc_checksum(file + sizeof h, n - sizeof h));
  memcpy(file, &h, sizeof h);
}

/* offsets of the packed B headers ("GMPB") in a payload: 64-byte aligned */
static int find_packed(const unsigned char *payload, size_t n, size_t *at, int cap) {
  int k = 0;
  for (size_t o = 0; o + 64 <= n && k < cap; o += 64)
    if (!memcmp(payload + o, "GMPB", 4)) at[k++] = o;
  return k;
}

/* y = x W + b (W a constant, packed at compile time), compiled with --weights external: the weights file
 * loads and runs right; a missing one, a FIFO, a directory, a NULL path, a truncated or bit-flipped file
 * fail to load with their status (2; 1 for NULL) and without blocking; a file whose packed header is
 * altered and its checksum made right again loads, and the run returns 2 instead of crashing */
PC_TEST(weights_external_file_checked) {
  enum { M = 5, K = 40, N = 70 };
  static float w[K * N], x[M * K], y[M * N], ref[M * N];
  for (int i = 0; i < K * N; i++) w[i] = (float)((i * 7 % 23) - 11) / 16.0f;
  for (int i = 0; i < M * K; i++) x[i] = (float)((i * 5 % 13) - 6) / 8.0f;
  for (int m = 0; m < M; m++)
    for (int n = 0; n < N; n++) {
      double s = 0;
      for (int k = 0; k < K; k++) s += (double)x[m * K + k] * w[k * N + n];
      ref[m * N + n] = (float)s;
    }
  pc_graph *g = pc_graph_new();
  pc_value *xi = pc_input_add(g, "x", pc_type_make(PC_f32, 2, (int64_t[]){M, K}));
  pc_value *wc = pc_const(g, pc_type_make(PC_f32, 2, (int64_t[]){K, N}), w);
  pc_output_add(g, pc_dot_general(g, xi, wc, 1, (int64_t[]){1}, (int64_t[]){0}, 0, NULL, NULL));
  char dir[] = "/tmp/primc-wt-XXXXXX", obj[256], so[256], wpath[256], bad[256], cmd[512];
  if (!CHECK(mkdtemp(dir) != NULL)) return;
  snprintf(obj, sizeof obj, "%s/wm.o", dir);
  snprintf(so, sizeof so, "%s/wm.so", dir);
  snprintf(wpath, sizeof wpath, "%s/wm.weights", dir);
  snprintf(bad, sizeof bad, "%s/bad.weights", dir);
  pc_codegen_opts o = {0};
  o.emit = PC_EMIT_OBJ;
  o.output = obj;
  o.opt_level = 2;
  o.weights_external = 1;
  void *h = NULL;
  if (CHECK_MSG(pc_codegen(g, &o) == PC_OK, "%s", pc_error(g))) h = pc_test_link_open(obj, so, "-lm", "weights");
  run_fn run = h ? (run_fn)dlsym(h, "wm_run") : NULL;
  load_fn load = h ? (load_fn)dlsym(h, "wm_load_weights") : NULL;
  size_t n = 0;
  unsigned char *file = read_all(wpath, &n);
  if (CHECK(run && load && file && n > 64)) {
    int64_t ws_size = *(const int64_t *)dlsym(h, "wm_workspace_size");
    void *ws = aligned_alloc(64, (size_t)(ws_size + 64) / 64 * 64);
    const void *in[1] = {x};
    void *out[1] = {y};
    /* before any load: weights not loaded */
    CHECK_INT(run(in, out, ws), PRIMC_ERR_WEIGHTS);
    CHECK_INT(load(NULL), PRIMC_ERR_ARG);
    snprintf(cmd, sizeof cmd, "%s/none.weights", dir);
    CHECK_INT(load(cmd), PRIMC_ERR_WEIGHTS);
    CHECK_INT(load(dir), PRIMC_ERR_WEIGHTS); /* a directory */
    snprintf(cmd, sizeof cmd, "%s/fifo", dir);
    if (CHECK(mkfifo(cmd, 0600) == 0)) CHECK_INT(load(cmd), PRIMC_ERR_WEIGHTS); /* returns: no writer awaited */
    char err[512] = "";
    void *base = NULL;
    CHECK_INT(primc_weights_map_err(cmd, 0, &base, err, sizeof err), PRIMC_ERR_WEIGHTS);
    CHECK_CONTAINS(err, "not a regular file (a FIFO)");
    CHECK(write_all(bad, file, n - 1));
    CHECK_INT(load(bad), PRIMC_ERR_WEIGHTS); /* truncated */
    file[n - 3] ^= 0x10;
    CHECK(write_all(bad, file, n));
    CHECK_INT(load(bad), PRIMC_ERR_WEIGHTS); /* one bit flipped in the payload */
    file[n - 3] ^= 0x10;
    /* the intact file: right results */
    CHECK_INT(load(wpath), PRIMC_OK);
    memset(y, 0, sizeof y);
    CHECK_INT(run(in, out, ws), PRIMC_OK);
    double err_max = 0;
    for (int i = 0; i < M * N; i++) err_max = fabs(y[i] - ref[i]) > err_max ? fabs(y[i] - ref[i]) : err_max;
    CHECK_MSG(err_max < 1e-4, "max error %g", err_max);
    /* altered packed headers (the ISA, the panel width) with the checksum made right: run says 2 */
    size_t at[4];
    int np = find_packed(file + 64, n - 64, at, 4);
    CHECK_INT(np, 1);
    static const struct {
      int word;
      int32_t v;
    } alter[] = {{1, 9}, {2, 4096}, {2, 1}, {3, 1 << 30}};
    for (int a = 0; np && a < 4; a++) {
      unsigned char *hp = file + 64 + at[0] + 4 * alter[a].word;
      int32_t keep;
      memcpy(&keep, hp, 4);
      memcpy(hp, &alter[a].v, 4);
      reseal(file, n);
      CHECK(write_all(bad, file, n));
      CHECK_INT(load(bad), PRIMC_OK);
      CHECK_MSG(run(in, out, ws) == PRIMC_ERR_WEIGHTS, "header word %d = %d", alter[a].word, alter[a].v);
      memcpy(hp, &keep, 4);
    }
    reseal(file, n);
    free(ws);
  }
  free(file);
  if (h) dlclose(h);
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0);
  pc_graph_free(g);
}
