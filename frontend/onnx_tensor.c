/* frontend/onnx_tensor.c: ONNX TensorProto decoding: the dtype table and every storage form (raw_data, typed fields,
 * packed sub-byte values, external data inside the model's directory). */
#include "frontend/onnx_internal.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---------------------------------------------------------------- dtypes */

typedef struct ox_dtype_row {
  int onnx;
  pc_dtype dt;
} ox_dtype_row;

/* ONNX TensorProto.DataType numbers of the types the prim IR has */
static const ox_dtype_row ox_dtypes[] = {
    {1, PC_f32}, {2, PC_u8}, {3, PC_i8}, {5, PC_i16}, {6, PC_i32}, {7, PC_i64},
    {9, PC_bool}, {10, PC_f16}, {11, PC_f64}, {14, PC_c64}, {16, PC_bf16},
    {4, PC_u16}, {12, PC_u32}, {13, PC_u64}, {17, PC_f8e4m3fn}, {18, PC_f8e4m3fnuz}, {19, PC_f8e5m2},
    {20, PC_f8e5m2fnuz}, {21, PC_u4}, {22, PC_i4}, {25, PC_u2}, {26, PC_i2}, {23, PC_f4e2m1}, {24, PC_f8e8m0},
};

int ox_dtype_from_onnx(int64_t onnx_type, pc_dtype *out) {
  for (size_t i = 0; i < sizeof ox_dtypes / sizeof *ox_dtypes; i++)
    if (ox_dtypes[i].onnx == onnx_type) return *out = ox_dtypes[i].dt, 1;
  return 0;
}

const char *ox_onnx_type_name(int t) {
  static const char *const names[] = {"undefined", "float", "uint8", "int8", "uint16", "int16", "int32",
                                      "int64", "string", "bool", "float16", "double", "uint32", "uint64",
                                      "complex64", "complex128", "bfloat16", "float8e4m3fn",
                                      "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz", "uint4", "int4",
                                      "float4e2m1", "float8e8m0", "uint2", "int2"};
  return t >= 0 && t < (int)(sizeof names / sizeof *names) ? names[t] : "unknown";
}

/* ---------------------------------------------------------------- tensor decoding */

static const char *tensor_name(const Onnx__TensorProto *tp) { return tp->name ? tp->name : "(unnamed)"; }

/* dims of a TensorProto into t; RANGE for negative or absurd sizes */
static pc_status tensor_header(pc_graph *g, const Onnx__TensorProto *tp, pc_tensor *t) {
  const char *nm = tensor_name(tp);
  if (!ox_dtype_from_onnx(tp->data_type, &t->dtype))
    return pc_fail(g, PC_ERR_UNSUPPORTED, "tensor '%s': element type %s (%d) is not supported", nm,
                   ox_onnx_type_name(tp->data_type), (int)tp->data_type);
  if (tp->n_dims > PC_MAX_RANK)
    return pc_fail(g, PC_ERR_RANGE, "tensor '%s': rank %zu exceeds %d", nm, tp->n_dims, PC_MAX_RANK);
  t->rank = (int)tp->n_dims;
  int64_t numel = 1;
  for (int i = 0; i < t->rank; i++) {
    int64_t d = tp->dims[i];
    if (d < 0 || d > OX_MAX_NUMEL)
      return pc_fail(g, PC_ERR_RANGE, "tensor '%s': dim %d is %lld", nm, i, (long long)d);
    t->dims[i] = d;
    numel = d == 0 ? 0 : numel * d;
    if (numel > OX_MAX_NUMEL)
      return pc_fail(g, PC_ERR_RANGE, "tensor '%s': more than 2^31 elements", nm);
  }
  return PC_OK;
}

static const char *external_key(const Onnx__TensorProto *tp, const char *key) {
  for (size_t i = 0; i < tp->n_external_data; i++) {
    const Onnx__StringStringEntryProto *e = tp->external_data[i];
    if (e && e->key && e->value && strcmp(e->key, key) == 0) return e->value;
  }
  return NULL;
}

static int parse_i64(const char *s, int64_t *out) {
  if (!s) return 0;
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || end == s || *end || v < 0) return 0;
  *out = v;
  return 1;
}

/* the resolved path of an external data file; only files inside the model's directory qualify */
static pc_status external_path(pc_graph *g, const char *nm, const char *dir, const char *loc, char *out,
                               size_t cap) {
  if (!dir) return pc_fail(g, PC_ERR_IO, "tensor '%s': external data without a model directory", nm);
  if (!loc || !*loc) return pc_fail(g, PC_ERR_PARSE, "tensor '%s': external data has no location", nm);
  if (loc[0] == '/' || strstr(loc, ".."))
    return pc_fail(g, PC_ERR_IO, "tensor '%s': external data location '%s' leaves the model directory", nm, loc);
  char joined[PATH_MAX], rdir[PATH_MAX];
  if ((size_t)snprintf(joined, sizeof joined, "%s/%s", dir, loc) >= sizeof joined)
    return pc_fail(g, PC_ERR_IO, "tensor '%s': external data path too long", nm);
  if (!realpath(dir, rdir)) return pc_fail(g, PC_ERR_IO, "tensor '%s': model directory '%s' not found", nm, dir);
  if (!realpath(joined, out) || strlen(out) >= cap)
    return pc_fail(g, PC_ERR_IO, "tensor '%s': external data file '%s' not found", nm, loc);
  size_t n = strlen(rdir);
  if (strncmp(out, rdir, n) != 0 || (out[n] != '/' && strcmp(rdir, "/") != 0))
    return pc_fail(g, PC_ERR_IO, "tensor '%s': external data '%s' resolves outside the model directory", nm, loc);
  return PC_OK;
}

/* checks an external tensor's file, offset and length (before anything is allocated) */
static pc_status external_check(pc_graph *g, const Onnx__TensorProto *tp, const char *dir, size_t nbytes,
                                char *path, size_t cap, int64_t *offset) {
  const char *nm = tensor_name(tp);
  if (external_path(g, nm, dir, external_key(tp, "location"), path, cap) != PC_OK) return g->status;
  int64_t length = (int64_t)nbytes;
  const char *s_off = external_key(tp, "offset"), *s_len = external_key(tp, "length");
  *offset = 0;
  if ((s_off && !parse_i64(s_off, offset)) || (s_len && !parse_i64(s_len, &length)))
    return pc_fail(g, PC_ERR_PARSE, "tensor '%s': bad external data offset or length", nm);
  if ((size_t)length != nbytes)
    return pc_fail(g, PC_ERR_RANGE, "tensor '%s': external data length %lld, shape needs %zu bytes", nm,
                   (long long)length, nbytes);
  struct stat st;
  if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
    return pc_fail(g, PC_ERR_IO, "tensor '%s': external data is not a regular file", nm);
  if (*offset > st.st_size || (int64_t)nbytes > st.st_size - *offset)
    return pc_fail(g, PC_ERR_RANGE, "tensor '%s': external data file is shorter than offset + length", nm);
  return PC_OK;
}

static pc_status external_read(pc_graph *g, const Onnx__TensorProto *tp, const char *path, int64_t offset,
                               void *dst, size_t nbytes) {
  FILE *f = fopen(path, "rb");
  if (!f) return pc_fail(g, PC_ERR_IO, "tensor '%s': cannot open external data", tensor_name(tp));
  int ok = fseek(f, (long)offset, SEEK_SET) == 0 && fread(dst, 1, nbytes, f) == nbytes;
  fclose(f);
  return ok ? PC_OK : pc_fail(g, PC_ERR_IO, "tensor '%s': cannot read external data", tensor_name(tp));
}

/* typed storage fields: the repeated field a dtype uses when raw_data is absent */
static pc_status decode_fields(pc_graph *g, const Onnx__TensorProto *tp, pc_tensor *t, int64_t numel) {
  const char *nm = tensor_name(tp);
  size_t have = 0, need = (size_t)numel;
  pc_dtype dt = t->dtype;
  if (dt == PC_f32 || dt == PC_c64) {
    have = tp->n_float_data;
    need = dt == PC_c64 ? need * 2 : need;
    if (have == need && need) memcpy(t->data, tp->float_data, need * sizeof(float));
  } else if (dt == PC_f64) {
    have = tp->n_double_data;
    if (have == need && need) memcpy(t->data, tp->double_data, need * sizeof(double));
  } else if (dt == PC_i64) {
    have = tp->n_int64_data;
    if (have == need && need) memcpy(t->data, tp->int64_data, need * sizeof(int64_t));
  } else if (dt == PC_u32 || dt == PC_u64) { /* ONNX keeps these two in uint64_data */
    have = tp->n_uint64_data;
    for (size_t k = 0; have == need && k < need; k++) {
      if (dt == PC_u64) ((uint64_t *)t->data)[k] = tp->uint64_data[k];
      else ((uint32_t *)t->data)[k] = (uint32_t)tp->uint64_data[k];
    }
  } else { /* i32 and everything narrower is carried in int32_data (f16/bf16 as their bit patterns) */
    have = tp->n_int32_data;
    size_t sz = pc_dtype_size(dt);
    for (size_t k = 0; have == need && k < need; k++) {
      int32_t v = tp->int32_data[k];
      unsigned char *p = (unsigned char *)t->data + k * sz;
      if (sz == 4) memcpy(p, &v, 4);
      else if (sz == 2) { uint16_t h = (uint16_t)v; memcpy(p, &h, 2); }
      else *p = dt == PC_bool ? (v != 0) : (unsigned char)v;
    }
  }
  if (have != need)
    return pc_fail(g, PC_ERR_RANGE, "tensor '%s': has %zu values, its shape needs %zu", nm, have, need);
  return PC_OK;
}

static int is_external(const Onnx__TensorProto *tp) {
  return tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
}

/* how many values the proto carries for dtype dt, in whichever field it uses */
static size_t stored_values(const Onnx__TensorProto *tp, pc_dtype dt) {
  if (tp->has_raw_data) return tp->raw_data.len / pc_dtype_size(dt) * (dt == PC_c64 ? 2 : 1);
  if (dt == PC_f32 || dt == PC_c64) return tp->n_float_data;
  if (dt == PC_f64) return tp->n_double_data;
  if (dt == PC_i64) return tp->n_int64_data;
  if (dt == PC_u32 || dt == PC_u64) return tp->n_uint64_data;
  return tp->n_int32_data;
}

/* sub-byte ints (int4 uint4 int2 uint2) and float4e2m1: ONNX packs them low bits first, in raw_data, external data or one
 * byte per int32_data entry; primc holds one per byte, sign- or zero-extended */
static pc_status decode_subbyte(pc_graph *g, const Onnx__TensorProto *tp, const char *dir, pc_tensor *t) {
  const char *nm = tensor_name(tp);
  int bits = t->dtype == PC_f4e2m1 ? 4 : pc_dtype_subbyte_bits(t->dtype);
  int is_signed = pc_dtype_is_int(t->dtype) && pc_dtype_is_signed(t->dtype); /* f4e2m1 stays a 4-bit code */
  int64_t numel = pc_tensor_numel(t);
  size_t packed = (size_t)(numel * bits + 7) / 8;
  char path[PATH_MAX];
  int64_t offset = 0;
  if (is_external(tp)) {
    if (external_check(g, tp, dir, packed, path, sizeof path, &offset) != PC_OK) return g->status;
  } else if (tp->has_raw_data ? tp->raw_data.len != packed : tp->n_int32_data != packed) {
    return pc_fail(g, PC_ERR_RANGE, "tensor '%s': holds %zu packed bytes, its shape needs %zu", nm,
                   tp->has_raw_data ? tp->raw_data.len : tp->n_int32_data, packed);
  }
  unsigned char *src = malloc(packed ? packed : 1), *dst = malloc(numel ? (size_t)numel : 1);
  if (!src || !dst) {
    free(src);
    free(dst);
    return pc_fail(g, PC_ERR_NOMEM, "tensor '%s': out of memory", nm);
  }
  pc_status st = PC_OK;
  if (is_external(tp)) st = external_read(g, tp, path, offset, src, packed);
  else if (tp->has_raw_data) memcpy(src, tp->raw_data.data, packed);
  else
    for (size_t k = 0; k < packed; k++) src[k] = (unsigned char)tp->int32_data[k];
  unsigned mask = (1u << bits) - 1, sign = 1u << (bits - 1);
  for (int64_t k = 0; st == PC_OK && k < numel; k++) {
    unsigned v = (unsigned)(src[k * bits / 8] >> (k * bits % 8)) & mask;
    dst[k] = (unsigned char)(is_signed ? (v ^ sign) - sign : v);
  }
  free(src);
  if (st != PC_OK) {
    free(dst);
    return st;
  }
  t->data = dst;
  return PC_OK;
}

pc_status ox_tensor_decode(pc_graph *g, const Onnx__TensorProto *tp, const char *dir, pc_tensor *out) {
  memset(out, 0, sizeof *out);
  if (g->status != PC_OK) return g->status;
  pc_tensor t;
  memset(&t, 0, sizeof t);
  if (tensor_header(g, tp, &t) != PC_OK) return g->status;
  const char *nm = tensor_name(tp);
  if (tp->segment) return pc_fail(g, PC_ERR_UNSUPPORTED, "tensor '%s': segmented tensors are not supported", nm);
  if (pc_dtype_subbyte_bits(t.dtype) || t.dtype == PC_f4e2m1) {
    if (decode_subbyte(g, tp, dir, &t) != PC_OK) return g->status;
    *out = t;
    return PC_OK;
  }
  int64_t numel = pc_tensor_numel(&t);
  size_t nbytes = (size_t)numel * pc_dtype_size(t.dtype);
  /* the data must be there before we allocate for it: a few bytes of model may declare 8 GiB */
  char path[PATH_MAX];
  int64_t offset = 0;
  size_t want = (size_t)numel * (t.dtype == PC_c64 ? 2 : 1);
  if (is_external(tp)) {
    if (external_check(g, tp, dir, nbytes, path, sizeof path, &offset) != PC_OK) return g->status;
  } else if (tp->has_raw_data) {
    /* raw_data is little-endian, like every host primc targets */
    if (tp->raw_data.len != nbytes)
      return pc_fail(g, PC_ERR_RANGE, "tensor '%s': raw_data has %zu bytes, its shape needs %zu", nm,
                     tp->raw_data.len, nbytes);
  } else if (stored_values(tp, t.dtype) != want) {
    return pc_fail(g, PC_ERR_RANGE, "tensor '%s': holds %zu values, its shape needs %zu", nm,
                   stored_values(tp, t.dtype), want);
  }
  t.data = malloc(nbytes ? nbytes : 1);
  if (!t.data) return pc_fail(g, PC_ERR_NOMEM, "tensor '%s': out of memory for %zu bytes", nm, nbytes);
  pc_status st = PC_OK;
  if (is_external(tp)) st = external_read(g, tp, path, offset, t.data, nbytes);
  else if (tp->has_raw_data && nbytes) memcpy(t.data, tp->raw_data.data, nbytes);
  else st = decode_fields(g, tp, &t, numel);
  if (st != PC_OK) {
    free(t.data);
    return st;
  }
  *out = t;
  return PC_OK;
}
