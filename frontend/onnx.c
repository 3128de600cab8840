/* frontend/onnx.c: ONNX importer: parses a ModelProto with protobuf-c and decomposes every node into prims. */
#include "frontend/onnx_internal.h"
#include "runtime/primc_file.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define OX_MAX_OPSET 28               /* newest default-domain opset we accept (onnx 1.23) */
#define OX_FOLD_MAX_NUMEL 65536       /* fold all-constant prims only when small (shape math) */
#define OX_FOLD_MAX_NULLARY 1024      /* and iota only when tiny */
#define OX_FOLD_MAX_GROWN 64          /* and results larger than their operands (broadcasts) when tiny */
#define OX_MAX_FILE ((size_t)1 << 32)
#define OX_MAX_BODY_DEPTH 32          /* If/Loop/Scan bodies nested in one another (real models: under 10) */

/* ---------------------------------------------------------------- op table */

/* the domains whose ops primc imports: ai.onnx, then the others in ox_domains' order */
typedef enum ox_dom { OX_DOM_ONNX = -1, OX_DOM_ML, OX_DOM_PREVIEW, OX_DOM_TRAINING, OX_DOM_MS } ox_dom;

typedef struct ox_row {
  const char *name;
  int min_opset, max_opset;
  ox_fn fn;
  ox_dom dom;
} ox_row;

/* every domain's rows in one table, each tagged with its domain, so onnx_ops.def is expanded once */
static const ox_row ox_rows[] = {
#define ONNX_OP(name, min_opset, max_opset, fn) {#name, min_opset, max_opset, fn, OX_DOM_ONNX},
#define ONNX_ML_OP(name, min_opset, max_opset, fn) {#name, min_opset, max_opset, fn, OX_DOM_ML},
#define ONNX_PREVIEW_OP(name, min_opset, max_opset, fn) {#name, min_opset, max_opset, fn, OX_DOM_PREVIEW},
#define ONNX_TRAINING_OP(name, min_opset, max_opset, fn) {#name, min_opset, max_opset, fn, OX_DOM_TRAINING},
#define ONNX_MS_OP(name, min_opset, max_opset, fn) {#name, min_opset, max_opset, fn, OX_DOM_MS},
#include "frontend/onnx_ops.def"
#undef ONNX_OP
#undef ONNX_ML_OP
#undef ONNX_PREVIEW_OP
#undef ONNX_TRAINING_OP
#undef ONNX_MS_OP
    {NULL, 0, 0, NULL, OX_DOM_ONNX},
};

/* names of the domains beside ai.onnx, indexed by ox_dom; opset index into ox_loader.dom_opset */
static const char *const ox_domains[] = {"ai.onnx.ml", "ai.onnx.preview", "ai.onnx.preview.training", "com.microsoft"};
#define OX_N_DOMAINS (int)(sizeof ox_domains / sizeof *ox_domains)

/* index of a non-default domain primc knows; -1 otherwise */
static int domain_index(const char *d) {
  for (int i = 0; d && i < OX_N_DOMAINS; i++)
    if (strcmp(ox_domains[i], d) == 0) return i;
  return -1;
}


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

/* ---------------------------------------------------------------- name map */

/* a name bound to a sequence or an optional (import-time lists, frontend/onnx_cf.c) */
typedef struct ox_seq_binding {
  const char *name; /* graph-owned */
  ox_seq s;
} ox_seq_binding;

typedef struct ox_loader {
  pc_graph *g;
  const char *dir;
  const pc_import_opts *opts;
  int opset;                 /* version of the ai.onnx domain; -1 when absent */
  int dom_opset[OX_N_DOMAINS]; /* versions of ox_domains; -1 when absent */
  const char **keys; /* open addressing, capacity a power of two */
  pc_value **vals;   /* NULL: the name is bound to a sequence (or unbound) */
  size_t cap, n;
  ox_seq_binding *seqs; /* few: searched linearly */
  int n_seqs, cap_seqs;
  const char *scope;    /* prefix of node origins inside subgraph bodies ("" at top level) */
  int body_depth;       /* bodies being imported one inside the other: ox_import_body recurses */
  const ox_raw_ref *raw; /* the main graph's initializers' raw_data left out of the unpack (ox_wire_strip) */
  size_t n_raw;
  int mapped;           /* raw points into a read-only file mapping, whose pages may be dropped once read */
  int64_t folded;       /* bytes of constants folded so far, against opts->mem_limit */
  /* opts->check: the first failure, kept to fail the graph with at the end; whether a lookup met a poisoned
   * name (the output of a node that failed) since the node began */
  pc_status first_status;
  char first_error[sizeof ((pc_graph *)0)->error];
  int hit_poison;
  ox_pool_memo pools[OX_POOL_MEMO]; /* stride-1 "same" max pools imported so far (ox_pool_find) */
  int keep_weights;                 /* initializers as keyed constants that import-time folding stops at */
  int n_pools;
} ox_loader;

int ox_pool_find(ox_ctx *c, const pc_value *x, int ns, const int64_t *k, ox_pool_memo *found) {
  ox_loader *L = c->L;
  int best = -1;
  int64_t best_sum = 0;
  for (int i = 0; L && i < L->n_pools; i++) {
    const ox_pool_memo *m = &L->pools[i];
    int fits = m->x == x && m->ns == ns;
    int64_t sum = 0;
    for (int d = 0; fits && d < ns; d++) fits = m->k[d] <= k[d], sum += m->k[d];
    if (fits && sum > best_sum) best = i, best_sum = sum;
  }
  if (best >= 0) *found = L->pools[best];
  return best >= 0;
}

void ox_pool_note(ox_ctx *c, const pc_value *x, int ns, const int64_t *k, pc_value *y) {
  ox_loader *L = c->L;
  if (!L || !y || L->n_pools == OX_POOL_MEMO || ns > PC_MAX_RANK) return;
  ox_pool_memo *m = &L->pools[L->n_pools++];
  m->x = x, m->y = y, m->ns = ns;
  for (int d = 0; d < ns; d++) m->k[d] = k[d];
}

/* the value a failed node's outputs are bound to under opts->check: lookups answer NULL and note it */
static pc_value ox_poison;

static size_t map_slot(const ox_loader *L, const char *name) {
  size_t i = pc_str_hash(name) & (L->cap - 1);
  while (L->keys[i] && strcmp(L->keys[i], name) != 0) i = (i + 1) & (L->cap - 1);
  return i;
}

static pc_value *map_get(ox_loader *L, const char *name) {
  if (!L->cap) return NULL;
  size_t i = map_slot(L, name);
  pc_value *v = L->keys[i] ? L->vals[i] : NULL;
  if (v == &ox_poison) L->hit_poison = 1, v = NULL;
  return v;
}

static int map_grow(ox_loader *L) {
  size_t cap = L->cap ? L->cap * 2 : 64;
  const char **keys = calloc(cap, sizeof *keys);
  pc_value **vals = calloc(cap, sizeof *vals);
  if (!keys || !vals) {
    free(keys);
    free(vals);
    return 0;
  }
  ox_loader nl = *L;
  nl.keys = keys, nl.vals = vals, nl.cap = cap;
  for (size_t i = 0; i < L->cap; i++)
    if (L->keys[i]) {
      size_t j = map_slot(&nl, L->keys[i]);
      keys[j] = L->keys[i], vals[j] = L->vals[i];
    }
  free(L->keys);
  free(L->vals);
  L->keys = keys, L->vals = vals, L->cap = cap;
  return 1;
}

static ox_seq_binding *seq_find(ox_loader *L, const char *name) {
  for (int i = L->n_seqs - 1; i >= 0; i--)
    if (strcmp(L->seqs[i].name, name) == 0) return &L->seqs[i];
  return NULL;
}

static void seq_unbind(ox_loader *L, const char *name) {
  ox_seq_binding *b = seq_find(L, name);
  if (b) *b = L->seqs[--L->n_seqs];
}

/* binds an ONNX name to a value (a later binding of the same name replaces it, also a sequence) */
static pc_status map_put(ox_loader *L, const char *name, pc_value *v) {
  if ((L->n + 1) * 2 > L->cap && !map_grow(L)) return pc_fail(L->g, PC_ERR_NOMEM, "out of memory");
  size_t i = map_slot(L, name);
  if (!L->keys[i]) {
    L->keys[i] = pc_strdup(L->g, name);
    L->n++;
  }
  L->vals[i] = v;
  seq_unbind(L, name);
  if (v != &ox_poison && !v->name) pc_value_set_name(L->g, v, name);
  return L->g->status;
}

/* binds an ONNX name to a sequence (items copied into the graph), unbinding a tensor of that name */
static pc_status seq_put(ox_loader *L, const char *name, const ox_seq *s) {
  if (L->cap) {
    size_t i = map_slot(L, name);
    if (L->keys[i]) L->vals[i] = NULL;
  }
  ox_seq_binding *b = seq_find(L, name);
  if (!b) {
    if (L->n_seqs == L->cap_seqs) {
      int cap = L->cap_seqs ? L->cap_seqs * 2 : 16;
      ox_seq_binding *nb = realloc(L->seqs, sizeof *nb * (size_t)cap);
      if (!nb) return pc_fail(L->g, PC_ERR_NOMEM, "out of memory");
      L->seqs = nb, L->cap_seqs = cap;
    }
    b = &L->seqs[L->n_seqs++];
    b->name = pc_strdup(L->g, name);
  }
  b->s = *s;
  b->s.items = s->n ? pc_alloc(L->g, sizeof *s->items * (size_t)s->n) : NULL;
  if (s->n && !b->s.items) return L->g->status;
  for (int k = 0; k < s->n; k++) b->s.items[k] = s->items[k];
  return L->g->status;
}

/* ---------------------------------------------------------------- graph inputs */

static const pc_dim_binding *find_binding(const pc_import_opts *o, const char *name) {
  for (int i = 0; o && i < o->n_dims; i++)
    if (o->dims[i].name && strcmp(o->dims[i].name, name) == 0) return &o->dims[i];
  return NULL;
}

/* the symbol naming dim k of a graph input, NULL for a fixed dim: its dim_param, else (no dim_param, "?",
 * or -1 as some exporters write) "INPUT.dimK", the name `primc inputs` shows and --dim takes */
static const char *dim_symbol(const char *in_name, int k, const Onnx__TensorShapeProto__Dimension *d, char *buf,
                              size_t n) {
  if (d && d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE && d->dim_value != -1) return NULL;
  if (d && d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && d->dim_param && *d->dim_param &&
      strcmp(d->dim_param, "?") != 0)
    return d->dim_param;
  snprintf(buf, n, "%s.dim%d", in_name, k);
  return buf;
}

/* one dim of a graph input: concrete, or a symbol (bound by --dim when given) */
static pc_status input_dim(ox_loader *L, const char *in_name, int k, const Onnx__TensorShapeProto__Dimension *d,
                           int64_t *out) {
  char buf[256];
  const char *sym = dim_symbol(in_name, k, d, buf, sizeof buf);
  if (!sym) {
    if (d->dim_value < 0 || d->dim_value > OX_MAX_NUMEL)
      return pc_fail(L->g, PC_ERR_RANGE, "input '%s': dim %d is %lld", in_name, k, (long long)d->dim_value);
    *out = d->dim_value;
    return PC_OK;
  }
  const pc_dim_binding *b = find_binding(L->opts, sym);
  if (b && b->lo == b->hi) {
    if (b->lo < 0) return pc_fail(L->g, PC_ERR_RANGE, "dim %s bound to %lld", sym, (long long)b->lo);
    *out = b->lo;
    return PC_OK;
  }
  int id = pc_sym_add(L->g, sym, b ? b->lo : 1, b ? b->hi : INT64_MAX);
  if (id < 0) return L->g->status ? L->g->status : pc_fail(L->g, PC_ERR_NOMEM, "out of memory");
  *out = PC_SYM(id);
  return PC_OK;
}

/* a --dim naming no dim of any graph input is a typo the user would otherwise learn of far later */
static pc_status check_bindings(ox_loader *L, const Onnx__GraphProto *gp) {
  for (int i = 0; L->opts && i < L->opts->n_dims; i++) {
    const char *want = L->opts->dims[i].name ? L->opts->dims[i].name : "";
    int found = 0;
    for (size_t j = 0; j < gp->n_input && !found; j++) {
      const Onnx__ValueInfoProto *vi = gp->input[j];
      const Onnx__TypeProto *tp = vi->type;
      const Onnx__TensorShapeProto *sh =
          tp && tp->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE && tp->tensor_type ? tp->tensor_type->shape : NULL;
      for (size_t k = 0; sh && k < sh->n_dim && !found; k++) {
        char buf[256];
        const char *sym = dim_symbol(vi->name ? vi->name : "", (int)k, sh->dim[k], buf, sizeof buf);
        found = sym && strcmp(sym, want) == 0;
      }
    }
    if (!found)
      return pc_fail(L->g, PC_ERR_ATTR, "--dim %s: no input of the model has a dim of that name (`primc inputs` "
                     "lists them)", want);
  }
  return PC_OK;
}

static const pc_const_input *find_const_input(const pc_import_opts *o, const char *name) {
  for (int i = 0; o && i < o->n_consts; i++)
    if (o->consts[i].name && strcmp(o->consts[i].name, name) == 0) return &o->consts[i];
  return NULL;
}

/* a graph input specialized to a constant: its value must fit the declared type */
static pc_status add_const_input(ox_loader *L, const char *nm, const Onnx__TypeProto__Tensor *tt,
                                 const pc_const_input *ci) {
  pc_dtype dt;
  if (!ox_dtype_from_onnx(tt->elem_type, &dt))
    return pc_fail(L->g, PC_ERR_UNSUPPORTED, "input '%s': element type %s (%d) is not supported", nm,
                   ox_onnx_type_name(tt->elem_type), tt->elem_type);
  const Onnx__TensorShapeProto *sh = tt->shape;
  if (sh && sh->n_dim > PC_MAX_RANK)
    return pc_fail(L->g, PC_ERR_RANGE, "input '%s': rank %zu exceeds %d", nm, sh->n_dim, PC_MAX_RANK);
  int64_t dims[PC_MAX_RANK];
  for (int k = 0; sh && k < (int)sh->n_dim; k++) {
    const Onnx__TensorShapeProto__Dimension *d = sh->dim[k];
    char buf[256];
    dims[k] = dim_symbol(nm, k, d, buf, sizeof buf) ? -1 : d->dim_value;
  }
  pc_tensor v;
  if (pc_const_input_fit(L->g, nm, ci, dt, sh ? (int)sh->n_dim : -1, dims, &v) != PC_OK) return L->g->status;
  pc_value *c = pc_const(L->g, pc_type_make(v.dtype, v.rank, v.dims), v.data);
  return c ? map_put(L, nm, c) : L->g->status;
}

static const pc_seq_input *find_seq_input(const pc_import_opts *o, const char *name) {
  for (int i = 0; o && i < o->n_seqs; i++)
    if (o->seqs[i].name && strcmp(o->seqs[i].name, name) == 0) return &o->seqs[i];
  return NULL;
}

/* a sequence or optional graph input: import-time lists need their length, so the caller gives
 * the element types; element k becomes graph input NAME.k */
static pc_status add_seq_input(ox_loader *L, const char *nm, const Onnx__TypeProto *tp) {
  int optional = tp->value_case == ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE;
  const Onnx__TypeProto *inner = optional && tp->optional_type ? tp->optional_type->elem_type : NULL;
  const pc_seq_input *si = find_seq_input(L->opts, nm);
  if (!si)
    return pc_fail(L->g, PC_ERR_UNSUPPORTED, "input '%s' is a%s: its element count and types must be fixed at "
                   "compile time", nm, optional ? "n optional" : " sequence");
  if (si->n < 0 || si->n > 4096 || (si->n && !si->elems) || (optional && si->n > 1 && !si->holds_seq))
    return pc_fail(L->g, PC_ERR_ATTR, "input '%s': bad element count %d", nm, si->n);
  ox_seq s;
  memset(&s, 0, sizeof s);
  s.optional = optional;
  s.none = optional && si->none;
  s.holds_seq = optional && inner && inner->value_case == ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE;
  s.n = s.none ? 0 : si->n;
  s.items = s.n ? pc_alloc(L->g, sizeof *s.items * (size_t)s.n) : NULL;
  char buf[512];
  for (int k = 0; k < s.n && L->g->status == PC_OK; k++) {
    snprintf(buf, sizeof buf, "%s.%d", nm, k);
    s.items[k] = pc_input_add(L->g, buf, si->elems[k]);
  }
  return L->g->status == PC_OK ? seq_put(L, nm, &s) : L->g->status;
}

static pc_status add_input(ox_loader *L, const Onnx__ValueInfoProto *vi) {
  const char *nm = vi->name ? vi->name : "";
  const Onnx__TypeProto *tp = vi->type;
  if (tp && (tp->value_case == ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE ||
             tp->value_case == ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE))
    return add_seq_input(L, nm, tp);
  if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type)
    return pc_fail(L->g, PC_ERR_UNSUPPORTED, "input '%s': only tensor inputs are supported", nm);
  const pc_const_input *ci = find_const_input(L->opts, nm);
  if (ci) return add_const_input(L, nm, tp->tensor_type, ci);
  pc_type t;
  memset(&t, 0, sizeof t);
  int et = tp->tensor_type->elem_type;
  if (!ox_dtype_from_onnx(et, &t.dtype))
    return pc_fail(L->g, PC_ERR_UNSUPPORTED, "input '%s': element type %s (%d) is not supported", nm,
                   ox_onnx_type_name(et), et);
  const Onnx__TensorShapeProto *sh = tp->tensor_type->shape;
  if (!sh) return pc_fail(L->g, PC_ERR_UNSUPPORTED, "input '%s' has no shape (rank unknown)", nm);
  if (sh->n_dim > PC_MAX_RANK)
    return pc_fail(L->g, PC_ERR_RANGE, "input '%s': rank %zu exceeds %d", nm, sh->n_dim, PC_MAX_RANK);
  t.rank = (int)sh->n_dim;
  for (int k = 0; k < t.rank; k++)
    if (input_dim(L, nm, k, sh->dim[k], &t.dims[k]) != PC_OK) return L->g->status;
  pc_value *v = pc_input_add(L->g, nm, t);
  return v ? map_put(L, nm, v) : L->g->status;
}

/* drops the resident pages of a read-only file mapping's range: read once, they would otherwise stay in the
 * process's memory beside the copy just made (they read back from the file if touched again) */
static void drop_pages(const void *p, size_t n) {
  uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), a = (uintptr_t)p / page * page;
  uintptr_t e = ((uintptr_t)p + n + page - 1) / page * page;
  madvise((void *)a, e - a, MADV_DONTNEED);
}

/* raw: the initializer's raw_data when ox_wire_strip left it out of the unpack (NULL otherwise) */
static pc_status add_initializer(ox_loader *L, const Onnx__TensorProto *tp, const ox_raw_ref *raw) {
  pc_tensor t;
  Onnx__TensorProto with_raw;
  if (raw && raw->data) {
    with_raw = *tp;
    with_raw.has_raw_data = 1;
    with_raw.raw_data.data = (uint8_t *)raw->data;
    with_raw.raw_data.len = raw->len;
    tp = &with_raw;
  }
  pc_status st = ox_tensor_decode(L->g, tp, L->dir, &t);
  if (raw && raw->data && L->mapped) drop_pages(raw->data, raw->len);
  if (st != PC_OK) return L->g->status;
  pc_type ty = pc_type_make(t.dtype, t.rank, t.dims);
  int weight = L->keep_weights && tp->name && *tp->name && pc_dtype_is_float(t.dtype);
  pc_value *v = weight ? pc_const_weight(L->g, ty, t.data, tp->name) : pc_const(L->g, ty, t.data);
  pc_tensor_free(&t);
  if (!v) return L->g->status;
  return map_put(L, tp->name ? tp->name : "", v);
}

/* ---------------------------------------------------------------- constant folding at import */

/* Shape computations (Shape -> Gather -> Concat -> Reshape) must end as constants so that the ops
 * reading them can use their values: evaluate small prims whose operands are all constants. */
static void fold_node(ox_loader *L, pc_node *n) {
  pc_graph *g = L->g;
  /* nullary prims other than constant and random (iota) fold too, when as small as shape math
   * (Range over constants): a large iota is cheaper computed in a fused kernel than loaded */
  if (n->op == PC_OP_constant || n->op == PC_OP_random || n->n_out != 1) return;
  const pc_type *ot = &n->out[0]->type;
  if (!pc_type_is_static(ot) || pc_type_numel(ot) > OX_FOLD_MAX_NUMEL) return;
  if (n->n_in == 0 && pc_type_numel(ot) > OX_FOLD_MAX_NULLARY) return;
  pc_tensor in[16], out;
  if (n->n_in > 16) return;
  int64_t in_numel = 0;
  for (int i = 0; i < n->n_in; i++) {
    const void *d = pc_const_data(n->in[i]);
    if (!d) return;
    /* a weight to differentiate stays an operand: the gradient must reach it */
    if (pc_attr_find(n->in[i]->producer, "key")) return;
    in_numel += pc_type_numel(&n->in[i]->type);
    in[i].dtype = n->in[i]->type.dtype;
    in[i].rank = n->in[i]->type.rank;
    memcpy(in[i].dims, n->in[i]->type.dims, sizeof in[i].dims);
    in[i].data = (void *)d;
  }
  /* a conv's bias broadcast over its map (ResNet's 256x14x14) would become a constant of the map's
   * size: more weights to ship, and an epilogue reading a whole tensor where a value per channel does */
  if (n->n_in > 0 && pc_type_numel(ot) > OX_FOLD_MAX_GROWN && pc_type_numel(ot) > in_numel) return;
  /* With run-time dims no iota is folded, nor anything that grows but shape math (integers, at most a rank's
   * worth): a bias broadcast over the batch folded or not, and the constant made, would follow the dims */
  int shape_math = pc_dtype_is_int(ot->dtype) && pc_type_numel(ot) <= PC_MAX_RANK;
  if (g->run_time_dims && (n->n_in == 0 || (!shape_math && pc_type_numel(ot) > in_numel))) return;
  memset(&out, 0, sizeof out);
  if (pc_interp_node(g, n, in, &out) != PC_OK) {
    /* folding is an optimization: an op the interpreter rejects stays a runtime op */
    g->status = PC_OK;
    g->error[0] = 0;
    pc_tensor_free(&out);
    return;
  }
  size_t nbytes = pc_tensor_nbytes(&out);
  /* each fold is small, but a small model can chain many, each kept as a constant */
  int64_t lim = L->opts ? L->opts->mem_limit : 0;
  if (lim > 0 && L->folded + (int64_t)nbytes > lim) {
    pc_tensor_free(&out);
    pc_fail(g, PC_ERR_RANGE, "%s: constants folded at import need more than the memory limit (%lld bytes, --mem-limit)",
            g->origin, (long long)lim);
    return;
  }
  L->folded += (int64_t)nbytes;
  void *data = pc_alloc(g, nbytes ? nbytes : 1);
  if (!data) {
    pc_tensor_free(&out);
    return;
  }
  if (nbytes) memcpy(data, out.data, nbytes);
  pc_tensor_free(&out);
  n->op = PC_OP_constant;
  n->n_in = 0;
  n->n_attrs = 0;
  n->data = data;
  n->nbytes = nbytes;
}

/* ---------------------------------------------------------------- nodes */

static const ox_row *find_row(int dom, const char *op, int opset, int *name_known) {
  *name_known = 0;
  for (const ox_row *r = ox_rows; r->name; r++) {
    if ((int)r->dom != dom || strcmp(r->name, op) != 0) continue;
    *name_known = 1;
    if (opset >= r->min_opset && opset <= r->max_opset) return r;
  }
  return NULL;
}

static int is_default_domain(const char *d) { return !d || !*d || strcmp(d, "ai.onnx") == 0; }

static pc_status unsupported_op(ox_loader *L, const Onnx__NodeProto *nd, int opset, int name_known) {
  const char *op = nd->op_type;
  if (name_known)
    return pc_fail(L->g, PC_ERR_UNSUPPORTED, "%s: op %s is not supported at opset %d", L->g->origin, op, opset);
  return pc_fail(L->g, PC_ERR_UNSUPPORTED, "%s: unsupported op %s (domain %s, opset %d)", L->g->origin, op,
                 nd->domain && *nd->domain ? nd->domain : "ai.onnx", opset);
}

static void set_node_origin(ox_loader *L, const Onnx__NodeProto *nd, size_t index) {
  char buf[600];
  const char *op = nd->op_type ? nd->op_type : "?", *sc = L->scope ? L->scope : "";
  if (nd->name && *nd->name) snprintf(buf, sizeof buf, "%s%s \"%s\"", sc, op, nd->name);
  else snprintf(buf, sizeof buf, "%s%s #%zu", sc, op, index);
  pc_set_origin(L->g, buf);
}

static pc_status node_inputs(ox_loader *L, const Onnx__NodeProto *nd, pc_value **in) {
  for (size_t i = 0; i < nd->n_input; i++) {
    const char *nm = nd->input[i];
    if (!nm || !*nm) {
      in[i] = NULL;
      continue;
    }
    in[i] = map_get(L, nm);
    if (!in[i] && !seq_find(L, nm)) return pc_fail(L->g, PC_ERR_PARSE, "%s: input '%s' is not defined before use", L->g->origin, nm);
  }
  return PC_OK;
}

static pc_status import_node(ox_loader *L, const Onnx__NodeProto *nd, size_t index) {
  pc_graph *g = L->g;
  set_node_origin(L, nd, index);
  if (!nd->op_type || !*nd->op_type) return pc_fail(g, PC_ERR_PARSE, "%s: node has no op_type", g->origin);
  int dom = is_default_domain(nd->domain) ? -1 : domain_index(nd->domain);
  if (!is_default_domain(nd->domain) && dom < 0)
    return pc_fail(g, PC_ERR_UNSUPPORTED, "%s: op %s of domain '%s' is not supported", g->origin, nd->op_type,
                   nd->domain);
  int opset = dom < 0 ? L->opset : L->dom_opset[dom];
  if (opset < 0)
    return pc_fail(g, PC_ERR_PARSE, "%s: the model imports no %s opset", g->origin, dom < 0 ? "ai.onnx" : nd->domain);
  int known;
  const ox_row *row = find_row(dom, nd->op_type, opset, &known);
  if (!row) return unsupported_op(L, nd, opset, known);
  pc_value **in = calloc(nd->n_input + 1, sizeof *in), **out = calloc(nd->n_output + 1, sizeof *out);
  if (!in || !out) {
    free(in);
    free(out);
    return pc_fail(g, PC_ERR_NOMEM, "out of memory");
  }
  int first = g->n_nodes;
  ox_ctx c = {g, nd, nd->op_type, opset, (int)nd->n_input, in, (int)nd->n_output, out, L->dir, L};
  pc_status st = node_inputs(L, nd, in);
  /* an output left as NULL is produced when the decomposition bound it to a sequence */
  for (size_t i = 0; i < nd->n_output; i++)
    if (nd->output[i] && *nd->output[i]) seq_unbind(L, nd->output[i]);
  if (st == PC_OK) st = row->fn(&c);
  if (st == PC_OK && g->status != PC_OK) st = g->status;
  for (size_t i = 0; st == PC_OK && i < nd->n_output; i++) {
    if (!nd->output[i] || !*nd->output[i] || (!out[i] && seq_find(L, nd->output[i]))) continue;
    if (!out[i]) st = pc_fail(g, PC_ERR_UNSUPPORTED, "%s: output %zu ('%s') is not produced", g->origin, i, nd->output[i]);
    else st = map_put(L, nd->output[i], out[i]);
  }
  for (int i = first; st == PC_OK && i < g->n_nodes; i++) {
    fold_node(L, g->nodes[i]);
    st = g->status;
  }
  free(in);
  free(out);
  return st;
}

/* primc check: a node that fails is noted and its outputs poisoned, so that the nodes reading them are
 * skipped rather than reported for it; the graph is kept going (it is for reading only) */
static pc_status import_or_note(ox_loader *L, const Onnx__NodeProto *nd, size_t index) {
  pc_check_result *r = L->opts ? L->opts->check : NULL;
  if (!r) return import_node(L, nd, index);
  L->hit_poison = 0;
  pc_graph *g = L->g;
  pc_status st = import_node(L, nd, index);
  if (st == PC_OK || st == PC_ERR_NOMEM) return st;
  if (L->hit_poison) {
    r->n_skipped++;
  } else {
    char node[64];
    snprintf(node, sizeof node, "#%zu", index);
    if (!L->first_status) L->first_status = st, memcpy(L->first_error, g->error, sizeof L->first_error);
    if (!ox_check_note(r, g->origin, nd->name && *nd->name ? nd->name : node, g->error))
      return g->status = PC_OK, pc_fail(g, PC_ERR_NOMEM, "out of memory");
  }
  g->status = PC_OK;
  g->error[0] = 0;
  for (size_t i = 0; i < nd->n_output; i++)
    if (nd->output[i] && *nd->output[i] && map_put(L, nd->output[i], &ox_poison) != PC_OK) return g->status;
  return PC_OK;
}

/* ---------------------------------------------------------------- model */

static int is_initializer(const Onnx__GraphProto *gp, const char *name) { return ox_initializer_of(gp, name) != NULL; }

static int is_graph_input(const Onnx__GraphProto *gp, const char *name) {
  for (size_t i = 0; i < gp->n_input; i++)
    if (gp->input[i]->name && strcmp(gp->input[i]->name, name) == 0 && !is_initializer(gp, name)) return 1;
  return 0;
}

static pc_status read_opsets(ox_loader *L, const Onnx__ModelProto *m) {
  L->opset = -1;
  for (int d = 0; d < OX_N_DOMAINS; d++) L->dom_opset[d] = -1;
  for (size_t i = 0; i < m->n_opset_import; i++) {
    const Onnx__OperatorSetIdProto *o = m->opset_import[i];
    int v = (int)(o && o->version > INT_MAX ? INT_MAX : o ? o->version : 0), d = o ? domain_index(o->domain) : -1;
    if (o && is_default_domain(o->domain)) L->opset = v;
    if (d >= 0) L->dom_opset[d] = v;
  }
  if (L->opset < 0) return PC_OK; /* only other domains: their nodes are refused one by one */
  if (L->opset < 1 || L->opset > OX_MAX_OPSET)
    return pc_fail(L->g, PC_ERR_UNSUPPORTED, "ai.onnx opset %d is not supported (1..%d)", L->opset, OX_MAX_OPSET);
  return PC_OK;
}

static pc_status import_graph(ox_loader *L, const Onnx__GraphProto *gp) {
  pc_graph *g = L->g;
  if (gp->n_sparse_initializer) return pc_fail(g, PC_ERR_UNSUPPORTED, "sparse initializers are not supported");
  if (ox_validate_graph(g, gp, "") != PC_OK) return g->status;
  int only_inputs = L->opts && L->opts->inputs_only;
  /* weights stay operands for the grad transform, and for a Gradient node of the model itself */
  L->keep_weights = L->opts && L->opts->keep_weights;
  for (size_t i = 0; i < gp->n_node; i++)
    L->keep_weights |= gp->node[i]->op_type && !strcmp(gp->node[i]->op_type, "Gradient");
  for (size_t i = 0; i < gp->n_initializer && g->status == PC_OK && !only_inputs; i++) {
    pc_set_origin(g, NULL);
    add_initializer(L, gp->initializer[i], i < L->n_raw ? &L->raw[i] : NULL);
  }
  /* a graph input that is also an initializer is a constant with a default value */
  for (size_t i = 0; i < gp->n_input && g->status == PC_OK; i++)
    if (!is_initializer(gp, gp->input[i]->name)) add_input(L, gp->input[i]);
  for (int i = 0; L->opts && i < L->opts->n_consts && g->status == PC_OK; i++)
    if (!L->opts->consts[i].name || !is_graph_input(gp, L->opts->consts[i].name))
      return pc_fail(g, PC_ERR_ATTR, "constant input '%s': the model has no graph input of that name",
                     L->opts->consts[i].name ? L->opts->consts[i].name : "");
  if (g->status == PC_OK) check_bindings(L, gp);
  if (only_inputs) return g->status;
  for (size_t i = 0; i < gp->n_node && g->status == PC_OK; i++) import_or_note(L, gp->node[i], i);
  pc_set_origin(g, NULL);
  pc_check_result *check = L->opts ? L->opts->check : NULL;
  if (check && g->status == PC_OK && !ox_check_finish(check)) return pc_fail(g, PC_ERR_NOMEM, "out of memory");
  if (check && L->first_status) return pc_fail(g, L->first_status, "%s", L->first_error);
  for (size_t i = 0; i < gp->n_output && g->status == PC_OK; i++) {
    const char *nm = gp->output[i]->name ? gp->output[i]->name : "";
    pc_value *v = map_get(L, nm);
    const ox_seq_binding *sb = v ? NULL : seq_find(L, nm);
    /* a sequence output becomes one graph output per element (an empty optional: none) */
    for (int k = 0; sb && k < sb->s.n; k++) pc_output_add(g, sb->s.items[k]);
    if (sb) continue;
    if (!v) return pc_fail(g, PC_ERR_PARSE, "graph output '%s' is not produced by any node", nm);
    pc_output_add(g, v);
  }
  return g->status;
}

/* ---------------------------------------------------------------- scopes (control flow, sequences) */

const pc_import_opts *ox_import_opts(ox_ctx *c) { return c->L ? c->L->opts : NULL; }

pc_value *ox_name_get(ox_ctx *c, const char *name) { return map_get(c->L, name); }

const ox_seq *ox_seq_get(ox_ctx *c, const char *name) {
  ox_seq_binding *b = map_get(c->L, name) ? NULL : seq_find(c->L, name);
  return b ? &b->s : NULL;
}

pc_status ox_name_put(ox_ctx *c, const char *name, pc_value *v) {
  if (!v) return c->g->status != PC_OK ? c->g->status : ox_fail(c, PC_ERR_INTERNAL, "'%s' was not built", name);
  return map_put(c->L, name, v);
}

pc_status ox_seq_put(ox_ctx *c, const char *name, const ox_seq *s) { return seq_put(c->L, name, s); }

const ox_seq *ox_seq_in(ox_ctx *c, int i) {
  if (i < 0 || i >= c->n_in || c->in[i] || !c->node->input[i] || !*c->node->input[i]) return NULL;
  return ox_seq_get(c, c->node->input[i]);
}

pc_status ox_seq_out(ox_ctx *c, int i, const ox_seq *s) {
  if (!ox_has_out(c, i)) return c->g->status;
  return seq_put(c->L, c->node->output[i], s);
}

const Onnx__GraphProto *ox_attr_graph(ox_ctx *c, const char *name) {
  for (size_t i = 0; i < c->node->n_attribute; i++) {
    const Onnx__AttributeProto *a = c->node->attribute[i];
    if (a && a->name && strcmp(a->name, name) == 0) return a->g;
  }
  return NULL;
}

pc_status ox_import_body(ox_ctx *c, const Onnx__GraphProto *body, const char *scope) {
  ox_loader *L = c->L;
  pc_graph *g = c->g;
  char origin[600], sc[600];
  snprintf(origin, sizeof origin, "%s", g->origin ? g->origin : c->op_type);
  if (snprintf(sc, sizeof sc, "%s%s/", origin, scope) >= (int)sizeof sc) sc[sizeof sc - 2] = '/';
  /* the node named alone: a full origin this deep would fill the message before the limit is named */
  if (L->body_depth >= OX_MAX_BODY_DEPTH)
    return pc_fail(g, PC_ERR_RANGE, "%s \"%s\": subgraph bodies nested deeper than %d levels", c->op_type,
                   c->node->name ? c->node->name : "", OX_MAX_BODY_DEPTH);
  const char *saved = L->scope;
  L->scope = sc;
  L->body_depth++;
  if (body->n_sparse_initializer) ox_fail(c, PC_ERR_UNSUPPORTED, "sparse initializers in a subgraph");
  if (g->status == PC_OK) ox_validate_graph(g, body, sc);
  for (size_t i = 0; i < body->n_initializer && g->status == PC_OK; i++) add_initializer(L, body->initializer[i], NULL);
  for (size_t i = 0; i < body->n_node && g->status == PC_OK; i++) import_node(L, body->node[i], i);
  L->scope = saved;
  L->body_depth--;
  if (g->status == PC_OK) pc_set_origin(g, origin);
  return g->status;
}

/* raw_data of at least this many bytes is left out of the unpack (ox_wire_strip): protobuf-c would copy it */
#define OX_STRIP_MIN_BYTES 4096

/* mapped: buf is a read-only private mapping of the model file */
static pc_graph *load_wire(const uint8_t *buf, size_t len, const char *dir, const pc_import_opts *opts, int mapped) {
  pc_graph *g = pc_graph_new();
  if (!g) return NULL;
  g->run_time_dims = opts && opts->run_time_dims;
  char why[200];
  pc_status wst = ox_wire_check(buf, len, &onnx__model_proto__descriptor, OX_MAX_MSG_DEPTH, why, sizeof why);
  ox_wire_stripped sw;
  if (wst == PC_OK) wst = ox_wire_strip(buf, len, OX_STRIP_MIN_BYTES, &sw, why, sizeof why);
  if (wst != PC_OK) {
    pc_fail(g, wst, "not a valid ONNX model: %s", why);
    return g;
  }
  Onnx__ModelProto *m = sw.buf ? onnx__model_proto__unpack(NULL, sw.len, sw.buf) : onnx__model_proto__unpack(NULL, len, buf);
  free(sw.buf);
  if (!m) {
    free(sw.refs);
    pc_fail(g, PC_ERR_PARSE, "not a valid ONNX model (protobuf parse failed, %zu bytes)", len);
    return g;
  }
  ox_loader L;
  memset(&L, 0, sizeof L);
  L.g = g, L.dir = dir, L.opts = opts, L.scope = "";
  L.raw = sw.refs, L.n_raw = sw.n_refs, L.mapped = mapped;
  if (!m->graph) pc_fail(g, PC_ERR_PARSE, "model has no graph");
  else if (read_opsets(&L, m) == PC_OK) import_graph(&L, m->graph);
  pc_set_origin(g, NULL);
  free(L.keys);
  free(L.vals);
  free(L.seqs);
  free(sw.refs);
  onnx__model_proto__free_unpacked(m, NULL);
  return g;
}

pc_graph *pc_onnx_load_buffer(const void *buf, size_t len, const char *dir, const pc_import_opts *opts) {
  return load_wire(buf, len, dir, opts, 0);
}

/* directory part of path ("." when none), malloc'ed */
static char *dir_of(const char *path) {
  const char *slash = strrchr(path, '/');
  if (!slash) return strdup(".");
  if (slash == path) return strdup("/");
  return strndup(path, (size_t)(slash - path));
}

/* The file is mapped, not read: its large raw_data is copied once, from the mapping into the graph, and its
 * pages dropped as each tensor is read, so a model costs its weights once in memory (issue 26). */
pc_graph *pc_onnx_load(const char *path, const pc_import_opts *opts) {
  char why_buf[PATH_MAX + 64];
  long long fsize = 0;
  int fd = primc_file_open_fd(path, &fsize, why_buf, sizeof why_buf); /* refuses FIFOs, directories, devices */
  const char *why = fd < 0 ? why_buf : NULL;
  if (!why && (uint64_t)fsize > OX_MAX_FILE) why = "file too large";
  void *map = NULL;
  size_t n = why ? 0 : (size_t)fsize;
  if (!why && n) {
    map = mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) map = NULL, why = strerror(errno);
  }
  if (fd >= 0) close(fd);
  char *dir = why ? NULL : dir_of(path);
  pc_graph *g;
  if (why || !dir) {
    g = pc_graph_new();
    if (g && why == why_buf) pc_fail(g, PC_ERR_IO, "%s", why_buf); /* it names the path */
    else if (g) pc_fail(g, why ? PC_ERR_IO : PC_ERR_NOMEM, "%s: %s", path, why ? why : "out of memory");
  } else {
    g = load_wire(map ? map : (const uint8_t *)"", n, dir, opts, 1);
    if (g && g->status != PC_OK) {
      /* prefix the file name, keeping the node-naming message */
      char msg[2 * sizeof g->error + PATH_MAX];
      size_t k = (size_t)snprintf(msg, sizeof msg, "%s: %s", path, g->error);
      if (k >= sizeof g->error) k = sizeof g->error - 1;
      memcpy(g->error, msg, k);
      g->error[k] = 0;
    }
  }
  if (map) munmap(map, n);
  free(dir);
  return g;
}

/* ---------------------------------------------------------------- helper API for decompositions */

pc_status ox_fail(ox_ctx *c, pc_status code, const char *fmt, ...) {
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return pc_fail(c->g, code, "%s: %s", c->g->origin ? c->g->origin : c->op_type, msg);
}

pc_status ox_status(ox_ctx *c) { return c->g->status; }

pc_value *ox_in(ox_ctx *c, int i) { return i >= 0 && i < c->n_in ? c->in[i] : NULL; }
int ox_has_in(ox_ctx *c, int i) { return ox_in(c, i) != NULL; }

pc_value *ox_in_req(ox_ctx *c, int i) {
  pc_value *v = ox_in(c, i);
  if (!v && c->g->status == PC_OK) ox_fail(c, PC_ERR_ATTR, "input %d is required", i);
  return v;
}

pc_status ox_out(ox_ctx *c, int i, pc_value *v) {
  if (i >= 0 && i < c->n_out) c->out[i] = v;
  if (!v && c->g->status == PC_OK) ox_fail(c, PC_ERR_INTERNAL, "output %d was not built", i);
  return c->g->status;
}

int ox_has_out(ox_ctx *c, int i) {
  return i >= 0 && i < c->n_out && c->node->output[i] && *c->node->output[i];
}

static const Onnx__AttributeProto *find_attr(ox_ctx *c, const char *name) {
  for (size_t i = 0; i < c->node->n_attribute; i++) {
    const Onnx__AttributeProto *a = c->node->attribute[i];
    if (a && a->name && strcmp(a->name, name) == 0) return a;
  }
  return NULL;
}

int ox_has_attr(ox_ctx *c, const char *name) { return find_attr(c, name) != NULL; }

int64_t ox_attr_int(ox_ctx *c, const char *name, int64_t dflt) {
  const Onnx__AttributeProto *a = find_attr(c, name);
  return a ? a->i : dflt;
}

int ox_attr_flag(ox_ctx *c, const char *name, int dflt) {
  int64_t v = ox_attr_int(c, name, dflt);
  if (v == 0 || v == 1) return (int)v;
  ox_fail(c, PC_ERR_ATTR, "attribute %s is %lld; it must be 0 or 1", name, (long long)v);
  return dflt;
}

int ox_attr_dtype(ox_ctx *c, const char *name, pc_dtype dflt, pc_dtype *out) {
  *out = dflt;
  if (!ox_has_attr(c, name)) return 1;
  int64_t t = ox_attr_int(c, name, 0);
  if (ox_dtype_from_onnx(t, out)) return 1;
  ox_fail(c, PC_ERR_UNSUPPORTED, "attribute %s: ONNX type %lld (%s) is not supported", name, (long long)t,
          t == (int)t ? ox_onnx_type_name((int)t) : "?");
  return 0;
}

double ox_attr_float(ox_ctx *c, const char *name, double dflt) {
  const Onnx__AttributeProto *a = find_attr(c, name);
  return a ? (double)a->f : dflt;
}

const char *ox_attr_str(ox_ctx *c, const char *name, const char *dflt) {
  const Onnx__AttributeProto *a = find_attr(c, name);
  if (!a) return dflt;
  char *s = pc_alloc(c->g, a->s.len + 1);
  if (!s) return dflt;
  if (a->s.len) memcpy(s, a->s.data, a->s.len);
  return s;
}

int ox_attr_ints(ox_ctx *c, const char *name, int64_t *out, int max) {
  const Onnx__AttributeProto *a = find_attr(c, name);
  if (!a) return -1;
  if (a->n_ints > (size_t)max) return ox_fail(c, PC_ERR_RANGE, "attribute %s has %zu entries (at most %d)", name, a->n_ints, max), -2;
  for (size_t i = 0; i < a->n_ints; i++) out[i] = a->ints[i];
  return (int)a->n_ints;
}

int ox_attr_ints_n(ox_ctx *c, const char *name, int64_t *out, int n, int cap, int64_t dflt) {
  int got = ox_attr_ints(c, name, out, cap);
  if (got == -2) return 0;
  if (got == -1) {
    for (int i = 0; i < n; i++) out[i] = dflt;
    return 1;
  }
  if (got != n) return ox_fail(c, PC_ERR_ATTR, "attribute %s has %d entries, expected %d", name, got, n), 0;
  return 1;
}

int ox_attr_floats(ox_ctx *c, const char *name, double *out, int max) {
  const Onnx__AttributeProto *a = find_attr(c, name);
  if (!a) return -1;
  if (a->n_floats > (size_t)max) return ox_fail(c, PC_ERR_RANGE, "attribute %s has %zu entries (at most %d)", name, a->n_floats, max), -2;
  for (size_t i = 0; i < a->n_floats; i++) out[i] = a->floats[i];
  return (int)a->n_floats;
}

pc_value *ox_attr_tensor(ox_ctx *c, const char *name) {
  const Onnx__AttributeProto *a = find_attr(c, name);
  if (!a || !a->t) return NULL;
  pc_tensor t;
  if (ox_tensor_decode(c->g, a->t, c->dir, &t) != PC_OK) return NULL;
  pc_value *v = pc_const(c->g, pc_type_make(t.dtype, t.rank, t.dims), t.data);
  pc_tensor_free(&t);
  return v;
}

/* element k of a buffer of dtype dt as int64, saturating */
static int64_t elem_i(pc_dtype dt, const void *p, int64_t k) {
  if (dt == PC_i64) return ((const int64_t *)p)[k];
  double v = pc_elem_f64(dt, p, k);
  if (v != v) return 0;
  if (v >= 9.2e18) return INT64_MAX;
  if (v <= -9.2e18) return INT64_MIN;
  return (int64_t)v;
}

int ox_value_ints(ox_ctx *c, const pc_value *v, int64_t *out, int max) {
  const void *d = pc_const_data(v);
  if (!d) return ox_fail(c, PC_ERR_UNSUPPORTED, "an input that must be known at compile time is computed at run time"), -2;
  int64_t n = pc_type_numel(&v->type);
  if (n < 0 || n > max) return ox_fail(c, PC_ERR_RANGE, "constant input has %lld elements (at most %d)", (long long)n, max), -2;
  for (int64_t k = 0; k < n; k++) out[k] = elem_i(v->type.dtype, d, k);
  return (int)n;
}

static const pc_value *const_input(ox_ctx *c, int i) {
  const pc_value *v = ox_in(c, i);
  if (v && !pc_const_data(v))
    ox_fail(c, PC_ERR_UNSUPPORTED, "input %d ('%s') must be a compile-time constant", i,
            c->node->input[i] ? c->node->input[i] : "");
  return v;
}

int ox_const_ints(ox_ctx *c, int i, int64_t *out, int max) {
  const pc_value *v = const_input(c, i);
  if (!v) return c->g->status == PC_OK ? -1 : -2;
  if (c->g->status != PC_OK) return -2;
  return ox_value_ints(c, v, out, max);
}

int ox_const_floats(ox_ctx *c, int i, double *out, int max) {
  const pc_value *v = const_input(c, i);
  if (!v) return c->g->status == PC_OK ? -1 : -2;
  if (c->g->status != PC_OK) return -2;
  int64_t n = pc_type_numel(&v->type);
  if (n < 0 || n > max) return ox_fail(c, PC_ERR_RANGE, "input %d has %lld elements (at most %d)", i, (long long)n, max), -2;
  const void *d = pc_const_data(v);
  for (int64_t k = 0; k < n; k++) out[k] = pc_elem_f64(v->type.dtype, d, k);
  return (int)n;
}

int ox_axis(ox_ctx *c, int64_t axis, int rank) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank) {
    ox_fail(c, PC_ERR_ATTR, "axis %lld is out of range for rank %d", (long long)axis, rank);
    return -1;
  }
  return (int)a;
}

int ox_axes(ox_ctx *c, int64_t *axes, int n, int rank) {
  for (int i = 0; i < n; i++) {
    int a = ox_axis(c, axes[i], rank);
    if (a < 0) return 0;
    axes[i] = a;
    for (int j = 0; j < i; j++)
      if (axes[j] == a) return ox_fail(c, PC_ERR_ATTR, "axis %d is repeated", a), 0;
  }
  return 1;
}

int ox_broadcast2(ox_ctx *c, pc_value **a, pc_value **b) {
  if (!*a || !*b) return 0;
  return pc_broadcast_pair(c->g, a, b);
}

int ox_broadcast3(ox_ctx *c, pc_value **a, pc_value **b, pc_value **d) {
  if (!ox_broadcast2(c, a, b) || !ox_broadcast2(c, a, d)) return 0;
  return ox_broadcast2(c, b, d);
}

pc_value *ox_binary(ox_ctx *c, pc_op op, pc_value *a, pc_value *b) {
  if (!a || !b) return NULL;
  if (a->type.dtype != b->type.dtype) {
    ox_fail(c, PC_ERR_TYPE, "operands have different types %s and %s", pc_dtype_name(a->type.dtype),
            pc_dtype_name(b->type.dtype));
    return NULL;
  }
  if (!ox_broadcast2(c, &a, &b)) return NULL;
  pc_value *in[2] = {a, b};
  return pc_build(c->g, op, in, 2, NULL, 0);
}

/* v clamped into an integer dtype's range (a float attribute applied to an int tensor), so that
 * the conversion to the dtype is defined */
static double fit_dtype(pc_dtype dt, double v) {
  static const struct { pc_dtype dt; double lo, hi; } lim[] = {
      {PC_i8, -128, 127}, {PC_i16, -32768, 32767}, {PC_i32, -2147483648.0, 2147483647.0},
      {PC_i64, -9223372036854775808.0, 9223372036854774784.0}, {PC_u8, 0, 255}, {PC_bool, 0, 1},
      {PC_u16, 0, 65535}, {PC_u32, 0, 4294967295.0}, {PC_u64, 0, 18446744073709549568.0},
      {PC_i4, -8, 7}, {PC_u4, 0, 15}, {PC_i2, -2, 1}, {PC_u2, 0, 3}};
  for (size_t i = 0; i < sizeof lim / sizeof *lim; i++)
    if (lim[i].dt == dt) return v != v ? 0 : v < lim[i].lo ? lim[i].lo : v > lim[i].hi ? lim[i].hi : v;
  return v;
}

/* convert_element_type to an f8 type does not saturate (ir/prims.def): ONNX's saturate=1 is a clamp to
 * [-max, max] before it (NaN passes through the clamp; inf becomes max). The clamp is done in the operand's
 * type when that holds the bound exactly (f16 bf16 f32 f64: max is 448, 240 or 57344), else in f32. */
pc_value *ox_convert(ox_ctx *c, pc_value *x, pc_dtype to, int saturate) {
  return ox_convert_rounded(c, x, to, saturate, "up");
}

/* f8e8m0 keeps the f32 exponent field (ir/prims.def), i.e. rounds down. ONNX's "up" and "nearest" add to the
 * f32 bits (sign cleared) what carries into the exponent exactly when that mode rounds up: 2^23 - 1 for "up";
 * for "nearest" 2^22 (a half), less one when the exponent field is 0, whose tie the ONNX reference keeps down.
 * Exponents that must not move are left alone: 0xff (inf, NaN), and 0xfe when saturating. */
static pc_value *to_e8m0(ox_ctx *c, pc_value *x, int saturate, const char *round_mode) {
  int up = strcmp(round_mode, "up") == 0, nearest = strcmp(round_mode, "nearest") == 0;
  if (!up && !nearest && strcmp(round_mode, "down") != 0)
    return ox_fail(c, PC_ERR_ATTR, "round_mode '%s' is not up, down or nearest", round_mode), NULL;
  x = pc_convert(c->g, x, PC_f32); /* the reference rounds every input to float32 first */
  if (!up && !nearest) return pc_convert(c->g, x, PC_f8e8m0);
  pc_graph *g = c->g;
  pc_attr as_i32 = pc_a_dtype("dtype", PC_i32), as_f32 = pc_a_dtype("dtype", PC_f32);
  pc_value *a = pc_build(g, PC_OP_bitcast, &x, 1, &as_i32, 1);
  a = pc_bitwise_and(g, a, ox_like(c, 0x7fffffff, a));
  pc_value *add = ox_like(c, up ? 0x7fffff : 0x3fffff, a);
  if (nearest) add = pc_add(g, add, pc_convert(g, pc_ge(g, a, ox_like(c, 0x800000, a)), PC_i32));
  pc_value *fixed = pc_ge(g, a, ox_like(c, saturate ? 0x7f000000 : 0x7f800000, a));
  pc_value *r = pc_where(g, fixed, a, pc_add(g, a, add));
  return pc_convert(g, pc_build(g, PC_OP_bitcast, &r, 1, &as_f32, 1), PC_f8e8m0);
}

pc_value *ox_convert_rounded(ox_ctx *c, pc_value *x, pc_dtype to, int saturate, const char *round_mode) {
  if (!x) return NULL;
  pc_dtype from = x->type.dtype;
  if (to == PC_f8e8m0 && from != to) return to_e8m0(c, x, saturate, round_mode);
  /* the ONNX reference casts floats to the sub-byte ints through a wide int, wrapping to the width */
  if (pc_dtype_subbyte_bits(to) && pc_dtype_is_float(from)) return pc_convert(c->g, pc_convert(c->g, x, PC_i64), to);
  /* f4e2m1 saturates by itself: it has no inf or NaN */
  if (!saturate || !pc_dtype_is_f8(to) || to == PC_f4e2m1 || from == PC_bool || from == to) return pc_convert(c->g, x, to);
  if (pc_dtype_is_f8(from) || !pc_dtype_is_float(from)) x = pc_convert(c->g, x, PC_f32);
  double mx = to == PC_f8e4m3fn ? 448.0 : to == PC_f8e4m3fnuz ? 240.0 : 57344.0;
  return pc_convert(c->g, pc_clamp(c->g, x, ox_like(c, -mx, x), ox_like(c, mx, x)), to);
}

pc_value *ox_like(ox_ctx *c, double v, const pc_value *x) {
  return x ? pc_full_like(c->g, fit_dtype(x->type.dtype, v), x) : NULL;
}

pc_value *ox_reshape(ox_ctx *c, pc_value *x, int n, const int64_t *dims) { return pc_reshape(c->g, x, n, dims); }

pc_value *ox_unsqueeze(ox_ctx *c, pc_value *x, int n_axes, const int64_t *axes) {
  if (!x) return NULL;
  int r = x->type.rank + n_axes;
  if (r > PC_MAX_RANK) return ox_fail(c, PC_ERR_RANGE, "rank %d exceeds %d", r, PC_MAX_RANK), NULL;
  int64_t dims[PC_MAX_RANK];
  int src = 0;
  for (int i = 0; i < r; i++) {
    int ins = 0;
    for (int j = 0; j < n_axes; j++) ins |= axes[j] == i;
    dims[i] = ins ? 1 : x->type.dims[src++];
  }
  return pc_reshape(c->g, x, r, dims);
}

pc_value *ox_reduce(ox_ctx *c, pc_op op, pc_value *x, int n_axes, const int64_t *axes, int keepdims) {
  pc_value *y = pc_reduce(c->g, op, x, n_axes, axes);
  if (!y || !keepdims) return y;
  int64_t sorted[PC_MAX_RANK];
  memcpy(sorted, axes, sizeof *axes * (size_t)n_axes);
  return ox_unsqueeze(c, y, n_axes, sorted);
}

int ox_require_float(ox_ctx *c, const pc_value *x) {
  if (!x) return 0;
  if (pc_dtype_is_float(x->type.dtype)) return 1;
  ox_fail(c, PC_ERR_TYPE, "needs a float tensor, got %s", pc_dtype_name(x->type.dtype));
  return 0;
}
