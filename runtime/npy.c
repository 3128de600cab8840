/* runtime/npy.c: .npy reading and writing (format 1.0-3.0, little-endian, C order) for the standalone driver and tests. */
#include "runtime/primc_rt.h"
#include "runtime/primc_file.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* a header longer than this is not something numpy writes for rank <= 8 */
#define NPY_MAX_HEADER (1 << 20)
/* refuse arrays whose payload would not fit a sane allocation */
#define NPY_MAX_BYTES ((int64_t)1 << 40)

typedef struct npy_dtype_row {
  const char *descr; /* numpy's descr string */
  primc_dtype dtype;
} npy_dtype_row;

/* numpy writes '|' for one-byte types; '<' is accepted there too since it means the same */
static const npy_dtype_row npy_dtypes[] = {
    {"<f2", PRIMC_F16}, {"<f4", PRIMC_F32}, {"<f8", PRIMC_F64}, {"|i1", PRIMC_I8},  {"<i1", PRIMC_I8},
    {"<i2", PRIMC_I16}, {"<i4", PRIMC_I32}, {"<i8", PRIMC_I64}, {"|u1", PRIMC_U8},  {"<u1", PRIMC_U8},
    {"|b1", PRIMC_BOOL}, {"<b1", PRIMC_BOOL}, {"<c8", PRIMC_C64}, {"<u2", PRIMC_U16}, {"<u4", PRIMC_U32},
    {"<u8", PRIMC_U64},
};

static const size_t dtype_sizes[PRIMC_DTYPE_COUNT] = {
    [PRIMC_F16] = 2, [PRIMC_BF16] = 2, [PRIMC_F32] = 4, [PRIMC_F64] = 8, [PRIMC_I8] = 1, [PRIMC_I16] = 2,
    [PRIMC_I32] = 4, [PRIMC_I64] = 8, [PRIMC_U8] = 1,  [PRIMC_BOOL] = 1, [PRIMC_C64] = 8,
    [PRIMC_U16] = 2, [PRIMC_U32] = 4, [PRIMC_U64] = 8, [PRIMC_F8E4M3FN] = 1, [PRIMC_F8E4M3FNUZ] = 1,
    [PRIMC_F8E5M2] = 1, [PRIMC_F8E5M2FNUZ] = 1, [PRIMC_I4] = 1, [PRIMC_U4] = 1, [PRIMC_I2] = 1, [PRIMC_U2] = 1, [PRIMC_F4E2M1] = 1, [PRIMC_F8E8M0] = 1,
};

size_t primc_dtype_size(primc_dtype t) { return (unsigned)t < PRIMC_DTYPE_COUNT ? dtype_sizes[t] : 0; }

int64_t primc_array_numel(const primc_array *a) {
  int64_t n = 1;
  for (int i = 0; i < a->rank; i++) n *= a->dims[i];
  return n;
}

static int fail(char *err, size_t errlen, const char *fmt, ...) {
  if (err && errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return -1;
}

/* ---------------------------------------------------------------- header parsing */

typedef struct hdr {
  const char *p, *end;
} hdr;

static void skip_ws(hdr *h) {
  while (h->p < h->end && (*h->p == ' ' || *h->p == '\t' || *h->p == '\n' || *h->p == '\r')) h->p++;
}

/* finds the value following 'key': in the dict text, or NULL */
static const char *find_key(const char *p, const char *end, const char *key) {
  size_t kl = strlen(key);
  for (; p + kl + 2 <= end; p++)
    if ((*p == '\'' || *p == '"') && memcmp(p + 1, key, kl) == 0 && p[kl + 1] == *p) {
      hdr h = {p + kl + 2, end};
      skip_ws(&h);
      if (h.p >= end || *h.p != ':') return NULL;
      h.p++;
      skip_ws(&h);
      return h.p;
    }
  return NULL;
}

static int parse_descr(const char *v, const char *end, primc_dtype *dt, char *err, size_t errlen) {
  if (!v || v >= end || (*v != '\'' && *v != '"')) return fail(err, errlen, "npy header: no 'descr' string");
  char q = *v++;
  const char *s = v;
  while (v < end && *v != q) v++;
  if (v >= end) return fail(err, errlen, "npy header: unterminated 'descr' string");
  size_t n = (size_t)(v - s);
  for (size_t i = 0; i < sizeof npy_dtypes / sizeof *npy_dtypes; i++)
    if (strlen(npy_dtypes[i].descr) == n && memcmp(npy_dtypes[i].descr, s, n) == 0) {
      *dt = npy_dtypes[i].dtype;
      return 0;
    }
  if (n > 0 && *s == '>') return fail(err, errlen, "npy: big-endian dtype '%.*s' is not supported", (int)(n > 16 ? 16 : n), s);
  return fail(err, errlen, "npy: unsupported dtype '%.*s'", (int)(n > 16 ? 16 : n), s);
}

static int parse_shape(const char *v, const char *end, primc_array *out, char *err, size_t errlen) {
  if (!v || v >= end || *v != '(') return fail(err, errlen, "npy header: no 'shape' tuple");
  hdr h = {v + 1, end};
  int rank = 0;
  for (;;) {
    skip_ws(&h);
    if (h.p < end && *h.p == ')') break;
    if (h.p >= end || *h.p < '0' || *h.p > '9') return fail(err, errlen, "npy header: malformed 'shape' tuple");
    if (rank == PRIMC_MAX_RANK) return fail(err, errlen, "npy: rank exceeds %d", PRIMC_MAX_RANK);
    int64_t d = 0;
    while (h.p < end && *h.p >= '0' && *h.p <= '9') {
      if (d > NPY_MAX_BYTES) return fail(err, errlen, "npy: dim too large");
      d = d * 10 + (*h.p++ - '0');
    }
    while (h.p < end && *h.p == 'L') h.p++; /* python 2 longs */
    out->dims[rank++] = d;
    skip_ws(&h);
    if (h.p < end && *h.p == ',') h.p++;
    else if (h.p >= end || *h.p != ')') return fail(err, errlen, "npy header: malformed 'shape' tuple");
  }
  out->rank = rank;
  return 0;
}

static int parse_fortran(const char *v, const char *end, char *err, size_t errlen) {
  if (!v) return fail(err, errlen, "npy header: no 'fortran_order'");
  if (end - v >= 5 && memcmp(v, "False", 5) == 0) return 0;
  if (end - v >= 4 && memcmp(v, "True", 4) == 0) return fail(err, errlen, "npy: fortran_order arrays are not supported");
  return fail(err, errlen, "npy header: malformed 'fortran_order'");
}

/* size in bytes of the payload, or -1 when absurd */
static int64_t payload_bytes(const primc_array *a) {
  int64_t n = (int64_t)primc_dtype_size(a->dtype);
  for (int i = 0; i < a->rank; i++) {
    if (a->dims[i] == 0) return 0;
    if (a->dims[i] > NPY_MAX_BYTES / n) return -1;
    n *= a->dims[i];
  }
  return n;
}

int primc_npy_read_buffer(const void *buf, size_t len, primc_array *out, char *err, size_t errlen) {
  const unsigned char *b = buf;
  memset(out, 0, sizeof *out);
  if (!b || len < 10) return fail(err, errlen, "npy: truncated (%zu bytes, need at least 10)", len);
  if (memcmp(b, "\x93NUMPY", 6) != 0) return fail(err, errlen, "npy: bad magic (not a .npy file)");
  int major = b[6];
  if (major < 1 || major > 3) return fail(err, errlen, "npy: unsupported format version %d.%d", major, b[7]);
  size_t pre = major == 1 ? 10 : 12;
  if (len < pre) return fail(err, errlen, "npy: truncated header length");
  size_t hlen = major == 1 ? (size_t)b[8] | (size_t)b[9] << 8
                           : (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24;
  if (hlen > NPY_MAX_HEADER) return fail(err, errlen, "npy: header length %zu is absurd", hlen);
  if (len - pre < hlen) return fail(err, errlen, "npy: truncated header (%zu of %zu bytes)", len - pre, hlen);
  const char *h = (const char *)b + pre, *hend = h + hlen;
  if (hlen == 0 || *h != '{') return fail(err, errlen, "npy header: not a dict");
  primc_array a;
  memset(&a, 0, sizeof a);
  if (parse_descr(find_key(h, hend, "descr"), hend, &a.dtype, err, errlen) ||
      parse_fortran(find_key(h, hend, "fortran_order"), hend, err, errlen) ||
      parse_shape(find_key(h, hend, "shape"), hend, &a, err, errlen))
    return -1;
  int64_t nbytes = payload_bytes(&a);
  if (nbytes < 0) return fail(err, errlen, "npy: array size overflows");
  size_t avail = len - pre - hlen;
  if ((uint64_t)nbytes != (uint64_t)avail)
    return fail(err, errlen, "npy: size mismatch: shape needs %lld data bytes, file has %zu", (long long)nbytes, avail);
  a.data = malloc(nbytes ? (size_t)nbytes : 1);
  if (!a.data) return fail(err, errlen, "npy: out of memory for %lld bytes", (long long)nbytes);
  if (nbytes) memcpy(a.data, hend, (size_t)nbytes);
  *out = a;
  return 0;
}

int primc_npy_read(const char *path, primc_array *out, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  char why[4200];
  FILE *f = primc_file_open(path, NULL, why, sizeof why); /* refuses FIFOs, directories, devices */
  if (!f) return fail(err, errlen, "npy: %s", why);
  long size = -1;
  if (fseek(f, 0, SEEK_END) == 0) size = ftell(f);
  if (size < 0 || (int64_t)size > NPY_MAX_BYTES || fseek(f, 0, SEEK_SET) != 0) {
    fclose(f);
    return fail(err, errlen, "npy: cannot size %s", path);
  }
  void *buf = malloc(size ? (size_t)size : 1);
  if (!buf) {
    fclose(f);
    return fail(err, errlen, "npy: out of memory reading %s", path);
  }
  size_t got = fread(buf, 1, (size_t)size, f);
  fclose(f);
  int rc = got == (size_t)size ? primc_npy_read_buffer(buf, got, out, err, errlen)
                               : fail(err, errlen, "npy: short read on %s", path);
  free(buf);
  return rc;
}

/* ---------------------------------------------------------------- writing */

static const char *descr_of(primc_dtype t) {
  for (size_t i = 0; i < sizeof npy_dtypes / sizeof *npy_dtypes; i++)
    if (npy_dtypes[i].dtype == t) return npy_dtypes[i].descr;
  return NULL;
}

int primc_npy_write(const char *path, const primc_array *a, char *err, size_t errlen) {
  const char *descr = descr_of(a->dtype);
  if (!descr) return fail(err, errlen, "npy: dtype %d has no .npy encoding", (int)a->dtype);
  if (a->rank < 0 || a->rank > PRIMC_MAX_RANK) return fail(err, errlen, "npy: rank %d out of range", a->rank);
  char shape[PRIMC_MAX_RANK * 24 + 8];
  size_t sl = 0;
  shape[sl++] = '(';
  for (int i = 0; i < a->rank; i++) {
    if (a->dims[i] < 0) return fail(err, errlen, "npy: negative dim %lld", (long long)a->dims[i]);
    sl += (size_t)snprintf(shape + sl, sizeof shape - sl, i ? " %lld," : "%lld,", (long long)a->dims[i]);
  }
  if (a->rank > 1) sl--; /* numpy writes (3,) but (2, 3) */
  snprintf(shape + sl, sizeof shape - sl, ")");
  int64_t nbytes = payload_bytes(a);
  if (nbytes < 0) return fail(err, errlen, "npy: array size overflows");
  char head[512];
  int n = snprintf(head + 10, sizeof head - 10, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, shape);
  size_t total = 10 + (size_t)n + 1, padded = (total + 63) / 64 * 64;
  memset(head + 10 + n, ' ', padded - total);
  head[padded - 1] = '\n';
  memcpy(head, "\x93NUMPY\x01\x00", 8);
  head[8] = (char)((padded - 10) & 0xff);
  head[9] = (char)((padded - 10) >> 8);
  FILE *f = fopen(path, "wb");
  if (!f) return fail(err, errlen, "npy: cannot create %s", path);
  int ok = fwrite(head, 1, padded, f) == padded && (nbytes == 0 || fwrite(a->data, 1, (size_t)nbytes, f) == (size_t)nbytes);
  ok = (fclose(f) == 0) && ok;
  return ok ? 0 : fail(err, errlen, "npy: write failed on %s", path);
}
