/* tests/unit/test_npy.c: .npy round trips, numpy-written files and every malformed-header error of runtime/npy.c. */
#include "runtime/primc_rt.h"
#include "tests/test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void tmp_path(char *buf, size_t n, const char *tag) {
  snprintf(buf, n, "/tmp/primc_test_npy_%d_%s.npy", (int)getpid(), tag);
}

static void round_trip(primc_dtype dt, int rank, const int64_t *dims) {
  primc_array a = {.dtype = dt, .rank = rank};
  if (rank) memcpy(a.dims, dims, sizeof(int64_t) * (size_t)rank);
  size_t nb = (size_t)primc_array_numel(&a) * primc_dtype_size(dt);
  a.data = malloc(nb + 1);
  for (size_t i = 0; i < nb; i++) ((unsigned char *)a.data)[i] = (unsigned char)(i * 37 + 11);
  if (dt == PRIMC_BOOL)
    for (size_t i = 0; i < nb; i++) ((unsigned char *)a.data)[i] &= 1;
  char path[256], err[200];
  tmp_path(path, sizeof path, "rt");
  primc_array b;
  if (CHECK_MSG(primc_npy_write(path, &a, err, sizeof err) == 0, "write: %s", err) &&
      CHECK_MSG(primc_npy_read(path, &b, err, sizeof err) == 0, "read: %s", err)) {
    CHECK_INT(b.dtype, dt);
    CHECK_INT(b.rank, rank);
    for (int i = 0; i < rank; i++) CHECK_INT(b.dims[i], dims[i]);
    CHECK(nb == 0 || memcmp(a.data, b.data, nb) == 0);
    free(b.data);
  }
  remove(path);
  free(a.data);
}

PC_TEST(npy_round_trip) {
  static const primc_dtype dts[] = {PRIMC_F16, PRIMC_F32, PRIMC_F64, PRIMC_I8,   PRIMC_I16,
                                    PRIMC_I32, PRIMC_I64, PRIMC_U8,  PRIMC_BOOL, PRIMC_C64,
                                    PRIMC_U16, PRIMC_U32, PRIMC_U64};
  int64_t d2[2] = {3, 5}, d1[1] = {7}, d8[8] = {1, 2, 1, 3, 1, 1, 2, 1}, d0[2] = {4, 0};
  for (size_t i = 0; i < sizeof dts / sizeof *dts; i++) {
    round_trip(dts[i], 2, d2);
    round_trip(dts[i], 1, d1);
    round_trip(dts[i], 0, NULL);
  }
  round_trip(PRIMC_F32, 8, d8);
  round_trip(PRIMC_I64, 2, d0);
}

PC_TEST(npy_write_header_is_numpy_style) {
  primc_array a = {.dtype = PRIMC_F32, .rank = 2, .dims = {2, 3}};
  float v[6] = {0};
  a.data = v;
  char path[256], err[200];
  tmp_path(path, sizeof path, "hdr");
  CHECK(primc_npy_write(path, &a, err, sizeof err) == 0);
  FILE *f = fopen(path, "rb");
  char buf[256] = {0};
  size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
  if (f) fclose(f);
  CHECK_INT(n, 128 + 24); /* the header padded to a multiple of 64 bytes, then the data */
  CHECK(memcmp(buf, "\x93NUMPY\x01\x00", 8) == 0);
  CHECK_CONTAINS(buf + 10, "'shape': (2, 3)");
  CHECK(buf[127] == '\n');
  a.rank = 1;
  a.dims[0] = 6;
  CHECK(primc_npy_write(path, &a, err, sizeof err) == 0);
  f = fopen(path, "rb");
  n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
  if (f) fclose(f);
  buf[n < sizeof buf ? n : sizeof buf - 1] = 0;
  CHECK_CONTAINS(buf + 10, "'shape': (6,)");
  remove(path);
  a.dtype = PRIMC_BF16; /* numpy has no bfloat16 */
  CHECK(primc_npy_write(path, &a, err, sizeof err) == -1);
}

/* files numpy itself wrote (tests/ref/gen_prim_refs.py) */
PC_TEST(npy_reads_numpy_files) {
  char path[512], err[200];
  primc_array a;
  snprintf(path, sizeof path, "%s/tests/data/prims/exp_f16/in0.npy", pc_test_srcdir());
  if (CHECK_MSG(primc_npy_read(path, &a, err, sizeof err) == 0, "%s", err)) {
    CHECK_INT(a.dtype, PRIMC_F16);
    CHECK_INT(a.rank, 2);
    CHECK_INT(a.dims[1], 6);
    free(a.data);
  }
  snprintf(path, sizeof path, "%s/tests/data/prims/add_f32_scalar/in0.npy", pc_test_srcdir());
  if (CHECK_MSG(primc_npy_read(path, &a, err, sizeof err) == 0, "%s", err)) {
    CHECK_INT(a.rank, 0);
    CHECK(((float *)a.data)[0] == 1.25f);
    free(a.data);
  }
  CHECK(primc_npy_read("/nonexistent/x.npy", &a, err, sizeof err) == -1);
  const char *msg = err;
  CHECK_CONTAINS(msg, "cannot open");
}

/* builds a .npy in memory: version, header text (padded with spaces) and payload bytes */
static size_t make_npy(unsigned char *buf, int major, const char *dict, size_t payload) {
  size_t pre = major == 1 ? 10 : 12, hl = strlen(dict);
  memcpy(buf, "\x93NUMPY", 6);
  buf[6] = (unsigned char)major;
  buf[7] = 0;
  buf[8] = (unsigned char)(hl & 0xff);
  buf[9] = (unsigned char)(hl >> 8);
  if (major > 1) buf[10] = buf[11] = 0;
  memcpy(buf + pre, dict, hl);
  memset(buf + pre + hl, 0x3f, payload);
  return pre + hl + payload;
}

static void expect_error(const unsigned char *buf, size_t len, const char *needle) {
  primc_array a;
  char err[200] = "";
  int rc = primc_npy_read_buffer(buf, len, &a, err, sizeof err);
  CHECK_MSG(rc == -1, "accepted a file that should fail with \"%s\"", needle);
  const char *msg = err;
  CHECK_CONTAINS(msg, needle);
  if (rc == 0) free(a.data);
}

PC_TEST(npy_versions) {
  unsigned char buf[512];
  primc_array a;
  char err[200];
  for (int major = 1; major <= 3; major++) {
    size_t n = make_npy(buf, major, "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }\n", 8);
    if (CHECK_MSG(primc_npy_read_buffer(buf, n, &a, err, sizeof err) == 0, "v%d: %s", major, err)) {
      CHECK_INT(a.dtype, PRIMC_I32);
      CHECK_INT(a.dims[0], 2);
      free(a.data);
    }
  }
}

PC_TEST(npy_malformed_headers) {
  unsigned char buf[512];
  const char *good = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }\n";
  size_t n = make_npy(buf, 1, good, 24);
  primc_array a;
  char err[200];
  if (CHECK(primc_npy_read_buffer(buf, n, &a, err, sizeof err) == 0)) free(a.data);
  expect_error(buf, 5, "truncated");
  expect_error(buf, 30, "truncated header");
  expect_error(buf, n - 1, "size mismatch");
  memcpy(buf + 1, "NUMPX", 5);
  expect_error(buf, n, "bad magic");
  n = make_npy(buf, 4, good, 24);
  expect_error(buf, n, "version");
  n = make_npy(buf, 1, good, 24);
  n = make_npy(buf, 1, good, 24);
  unsigned char big[600];
  memcpy(big, buf, n);
  memset(big + n, 0, 8);
  expect_error(big, n + 8, "size mismatch");
  static const struct {
    const char *dict, *needle;
  } bad[] = {
      {"{'descr': '<c16', 'fortran_order': False, 'shape': (2, 3), }", "unsupported dtype"},
      {"{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }", "big-endian"},
      {"{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", "fortran_order"},
      {"{'descr': '<f4', 'fortran_order': False, }", "shape"},
      {"{'fortran_order': False, 'shape': (2, 3), }", "descr"},
      {"{'descr': '<f4', 'shape': (2, 3), }", "fortran_order"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, x), }", "shape"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3, }", "shape"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1, 1, 1), }", "rank"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4294967296), }", "overflow"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999,), }", "too large"},
      {"{'descr: '<f4', 'fortran_order': False, 'shape': (2, 3), }", "descr"},
      {"not a dict", "not a dict"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    n = make_npy(buf, 1, bad[i].dict, 24);
    expect_error(buf, n, bad[i].needle);
  }
  /* a header length pointing far past the end */
  n = make_npy(buf, 2, good, 24);
  buf[10] = 0x7f;
  expect_error(buf, n, "header");
}

/* random corruption of a valid file: every outcome is a clean accept or a one-line error */
PC_TEST(npy_mutations_never_crash) {
  unsigned char base[512], buf[512];
  size_t n = make_npy(base, 1, "{'descr': '<i2', 'fortran_order': False, 'shape': (3, 2), }\n", 12);
  uint32_t seed = 12345;
  int rejected = 0;
  for (int it = 0; it < 5000; it++) {
    memcpy(buf, base, n);
    for (int k = 0; k < 3; k++) {
      seed = seed * 1664525u + 1013904223u;
      buf[(seed >> 8) % n] = (unsigned char)(seed >> 24);
    }
    seed = seed * 1664525u + 1013904223u;
    size_t len = (seed >> 4) % 4 == 0 ? (seed >> 8) % (n + 1) : n;
    primc_array a;
    char err[200] = "";
    if (primc_npy_read_buffer(buf, len, &a, err, sizeof err) == 0) free(a.data);
    else rejected += strchr(err, '\n') == NULL && err[0] != 0;
  }
  CHECK(rejected > 100);
}
