/* frontend/safetensors.c: reads and writes .safetensors weight files for the keyed constants of a graph.
 *
 * Format: 8-byte little-endian header length N, N bytes of JSON
 *   {"name": {"dtype": "F32", "shape": [2,3], "data_offsets": [begin, end]}, ..., "__metadata__": {...}}
 * then the data; offsets are relative to the end of the header. The JSON reader below is strict
 * and bounds-checks every read: a malformed file is an error, never a crash. */
#include "frontend/frontend.h"
#include "runtime/primc_file.h"

#include <stdlib.h>
#include <string.h>

#define MAX_HEADER (INT64_C(100) << 20)
#define MAX_DEPTH 32
#define INLINE_MAX 64 /* ir/print.c prints larger unkeyed constants as key="const<id>" */

typedef struct st_dtype_row {
  const char *name;
  pc_dtype dt;
} st_dtype_row;

static const st_dtype_row st_dtypes[] = {
    {"F32", PC_f32}, {"F16", PC_f16}, {"BF16", PC_bf16}, {"F64", PC_f64}, {"I64", PC_i64},
    {"I32", PC_i32}, {"I16", PC_i16}, {"I8", PC_i8},     {"U8", PC_u8},   {"BOOL", PC_bool},
    {"U16", PC_u16}, {"U32", PC_u32}, {"U64", PC_u64}, {"F8_E4M3", PC_f8e4m3fn}, {"F8_E5M2", PC_f8e5m2},
};
#define N_ST_DTYPES (int)(sizeof st_dtypes / sizeof *st_dtypes)

typedef struct st_tensor {
  char *name;
  pc_dtype dt;
  int rank;
  int64_t dims[PC_MAX_RANK];
  int64_t begin, end;
} st_tensor;

typedef struct st_reader {
  pc_graph *g;
  const char *path;
  const char *s; /* JSON header */
  size_t n, pos;
  st_tensor *t;
  int n_t, cap_t;
} st_reader;

static int st_err(st_reader *R, const char *what) {
  pc_fail(R->g, PC_ERR_PARSE, "%s: malformed safetensors header at byte %zu: %s", R->path, R->pos, what);
  return 0;
}

static void ws(st_reader *R) {
  while (R->pos < R->n && strchr(" \t\r\n", R->s[R->pos]) && R->s[R->pos]) R->pos++;
}

static int eat(st_reader *R, char c) {
  ws(R);
  if (R->pos < R->n && R->s[R->pos] == c) {
    R->pos++;
    return 1;
  }
  return 0;
}

static int need(st_reader *R, char c) {
  if (eat(R, c)) return 1;
  char msg[24];
  snprintf(msg, sizeof msg, "expected '%c'", c);
  return st_err(R, msg);
}

static int hex4(st_reader *R, unsigned *out) {
  if (R->n - R->pos < 4) return st_err(R, "short \\u escape");
  unsigned v = 0;
  for (int i = 0; i < 4; i++) {
    char c = R->s[R->pos++];
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (d < 0) return st_err(R, "bad \\u escape");
    v = v * 16 + (unsigned)d;
  }
  *out = v;
  return 1;
}

static void put_utf8(char *d, size_t *o, unsigned cp) {
  if (cp < 0x80) d[(*o)++] = (char)cp;
  else if (cp < 0x800) {
    d[(*o)++] = (char)(0xc0 | cp >> 6);
    d[(*o)++] = (char)(0x80 | (cp & 0x3f));
  } else {
    d[(*o)++] = (char)(0xe0 | cp >> 12);
    d[(*o)++] = (char)(0x80 | ((cp >> 6) & 0x3f));
    d[(*o)++] = (char)(0x80 | (cp & 0x3f));
  }
}

/* a JSON string into a malloc'ed C string (or just skipped when out is NULL) */
static int jstring(st_reader *R, char **out) {
  if (!need(R, '"')) return 0;
  char *d = out ? malloc(R->n - R->pos + 1) : NULL;
  if (out && !d) return pc_fail(R->g, PC_ERR_NOMEM, "out of memory"), 0;
  size_t o = 0;
  for (;;) {
    if (R->pos >= R->n) return free(d), st_err(R, "unterminated string");
    unsigned char c = (unsigned char)R->s[R->pos++];
    if (c == '"') break;
    if (c < 0x20) return free(d), st_err(R, "control character in string");
    if (c != '\\') {
      if (d) d[o++] = (char)c;
      continue;
    }
    if (R->pos >= R->n) return free(d), st_err(R, "unterminated string");
    char e = R->s[R->pos++];
    const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";
    const char *k = strchr(from, e);
    unsigned cp;
    if (k && e) {
      if (d) d[o++] = to[k - from];
    } else if (e == 'u') {
      if (!hex4(R, &cp)) return free(d), 0;
      if (cp == 0) return free(d), st_err(R, "NUL in string");
      if (d) put_utf8(d, &o, cp); /* surrogate halves pass through as 3-byte sequences; names are ASCII in practice */
    } else {
      return free(d), st_err(R, "bad escape");
    }
  }
  if (d) d[o] = 0;
  if (out) *out = d;
  return 1;
}

/* a non-negative JSON integer */
static int jint(st_reader *R, int64_t *out) {
  ws(R);
  size_t start = R->pos;
  int64_t v = 0;
  while (R->pos < R->n && R->s[R->pos] >= '0' && R->s[R->pos] <= '9') {
    if (v > (INT64_MAX - 9) / 10) return st_err(R, "integer too large");
    v = v * 10 + (R->s[R->pos++] - '0');
  }
  if (R->pos == start) return st_err(R, "expected a non-negative integer");
  if (R->pos < R->n && strchr(".eE", R->s[R->pos]) && R->s[R->pos]) return st_err(R, "expected an integer");
  *out = v;
  return 1;
}

static int jskip(st_reader *R, int depth);

static int jskip_list(st_reader *R, char close, int is_obj, int depth) {
  if (eat(R, close)) return 1;
  do {
    if (is_obj && !(jstring(R, NULL) && need(R, ':'))) return 0;
    if (!jskip(R, depth + 1)) return 0;
  } while (eat(R, ','));
  return need(R, close);
}

/* skips any JSON value (metadata, unknown fields) */
static int jskip(st_reader *R, int depth) {
  if (depth > MAX_DEPTH) return st_err(R, "nesting too deep");
  ws(R);
  if (R->pos >= R->n) return st_err(R, "unexpected end");
  char c = R->s[R->pos];
  if (c == '"') return jstring(R, NULL);
  if (c == '{') return R->pos++, jskip_list(R, '}', 1, depth);
  if (c == '[') return R->pos++, jskip_list(R, ']', 0, depth);
  static const char *const words[] = {"true", "false", "null"};
  for (int i = 0; i < 3; i++) {
    size_t l = strlen(words[i]);
    if (R->n - R->pos >= l && !memcmp(R->s + R->pos, words[i], l)) return R->pos += l, 1;
  }
  size_t start = R->pos;
  while (R->pos < R->n && strchr("0123456789+-.eE", R->s[R->pos]) && R->s[R->pos]) R->pos++;
  return R->pos > start ? 1 : st_err(R, "unexpected character");
}

static int jint_list(st_reader *R, int64_t *out, int max, int *n) {
  *n = 0;
  if (!need(R, '[')) return 0;
  if (eat(R, ']')) return 1;
  do {
    if (*n == max) return st_err(R, "list too long");
    if (!jint(R, &out[(*n)++])) return 0;
  } while (eat(R, ','));
  return need(R, ']');
}

static int tensor_field(st_reader *R, st_tensor *t, const char *key, int *seen) {
  if (!strcmp(key, "dtype")) {
    char *s;
    if (!jstring(R, &s)) return 0;
    int i = 0;
    while (i < N_ST_DTYPES && strcmp(st_dtypes[i].name, s)) i++;
    if (i == N_ST_DTYPES) {
      pc_fail(R->g, PC_ERR_TYPE, "%s: tensor '%s': unsupported dtype %s", R->path, t->name, s);
      return free(s), 0;
    }
    free(s);
    t->dt = st_dtypes[i].dt;
    return *seen |= 1, 1;
  }
  if (!strcmp(key, "shape")) return *seen |= 2, jint_list(R, t->dims, PC_MAX_RANK, &t->rank);
  if (!strcmp(key, "data_offsets")) {
    int64_t off[2];
    int n;
    if (!jint_list(R, off, 2, &n)) return 0;
    if (n != 2) return st_err(R, "data_offsets needs two numbers");
    t->begin = off[0];
    t->end = off[1];
    return *seen |= 4, 1;
  }
  return jskip(R, 1);
}

static int tensor_entry(st_reader *R, char *name) {
  for (int i = 0; i < R->n_t; i++)
    if (!strcmp(R->t[i].name, name)) return free(name), st_err(R, "duplicate tensor name");
  if (R->n_t == R->cap_t) {
    int nc = R->cap_t ? R->cap_t * 2 : 64;
    st_tensor *p = realloc(R->t, sizeof *p * (size_t)nc);
    if (!p) return free(name), pc_fail(R->g, PC_ERR_NOMEM, "out of memory"), 0;
    R->t = p;
    R->cap_t = nc;
  }
  st_tensor *t = &R->t[R->n_t++];
  memset(t, 0, sizeof *t);
  t->name = name;
  int seen = 0;
  if (!need(R, '{')) return 0;
  if (!eat(R, '}')) {
    do {
      char *key;
      if (!jstring(R, &key)) return 0;
      int ok = need(R, ':') && tensor_field(R, t, key, &seen);
      free(key);
      if (!ok) return 0;
    } while (eat(R, ','));
    if (!need(R, '}')) return 0;
  }
  if (seen != 7) return st_err(R, "tensor entry needs dtype, shape and data_offsets");
  return 1;
}

static int read_header(st_reader *R) {
  if (!need(R, '{')) return 0;
  if (!eat(R, '}')) {
    do {
      char *name;
      if (!jstring(R, &name)) return 0;
      if (!need(R, ':')) return free(name), 0;
      if (!strcmp(name, "__metadata__")) {
        free(name);
        if (!jskip(R, 1)) return 0;
      } else if (!tensor_entry(R, name)) {
        return 0;
      }
    } while (eat(R, ','));
    if (!need(R, '}')) return 0;
  }
  ws(R);
  return R->pos == R->n ? 1 : st_err(R, "text after the header object");
}

/* every tensor's extent lies inside the data section and matches dtype x shape */
static int check_extents(st_reader *R, int64_t data_len) {
  for (int i = 0; i < R->n_t; i++) {
    st_tensor *t = &R->t[i];
    int64_t bytes = (int64_t)pc_dtype_size(t->dt);
    for (int k = 0; k < t->rank; k++) {
      if (t->dims[k] > 0 && bytes > INT64_MAX / t->dims[k])
        return pc_fail(R->g, PC_ERR_RANGE, "%s: tensor '%s': shape too large", R->path, t->name), 0;
      bytes *= t->dims[k];
    }
    if (t->begin > t->end || t->end > data_len || t->end - t->begin != bytes)
      return pc_fail(R->g, PC_ERR_RANGE, "%s: tensor '%s': data_offsets [%lld, %lld] do not fit %lld bytes of data",
                     R->path, t->name, (long long)t->begin, (long long)t->end, (long long)data_len), 0;
  }
  return 1;
}

static unsigned char *read_file(pc_graph *g, const char *path, int64_t *len) {
  char why[4200];
  FILE *f = primc_file_open(path, NULL, why, sizeof why); /* refuses FIFOs, directories, devices */
  if (!f) return pc_fail(g, PC_ERR_IO, "%s", why), NULL;
  unsigned char *buf = NULL;
  long n = -1;
  if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0)
    buf = malloc((size_t)n + 1);
  if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
    free(buf);
    buf = NULL;
  }
  fclose(f);
  if (!buf) return pc_fail(g, PC_ERR_IO, "%s: cannot read", path), NULL;
  *len = n;
  return buf;
}

static const st_tensor *find_tensor(const st_reader *R, const char *name) {
  for (int i = 0; i < R->n_t; i++)
    if (!strcmp(R->t[i].name, name)) return &R->t[i];
  return NULL;
}

static int bind_node(st_reader *R, pc_node *n, const unsigned char *data) {
  const char *key = pc_attr_str(n, "key", NULL);
  const st_tensor *t = find_tensor(R, key);
  const pc_type *ty = &n->out[0]->type;
  if (!t) return pc_fail(R->g, PC_ERR_IO, "%s: no tensor '%s' for constant", R->path, key), 0;
  pc_type ft = pc_type_make(t->dt, t->rank, t->dims);
  if (!pc_type_equal(&ft, ty)) {
    char a[128], b[128];
    size_t oa = (size_t)snprintf(a, sizeof a, "%s[", pc_dtype_name(ty->dtype));
    size_t ob = (size_t)snprintf(b, sizeof b, "%s[", pc_dtype_name(t->dt));
    for (int i = 0; i < ty->rank && oa < sizeof a; i++)
      oa += (size_t)snprintf(a + oa, sizeof a - oa, i ? ",%lld" : "%lld", (long long)ty->dims[i]);
    for (int i = 0; i < t->rank && ob < sizeof b; i++)
      ob += (size_t)snprintf(b + ob, sizeof b - ob, i ? ",%lld" : "%lld", (long long)t->dims[i]);
    return pc_fail(R->g, PC_ERR_SHAPE, "%s: tensor '%s' is %s], the constant is %s]", R->path, key, b, a), 0;
  }
  size_t nb = (size_t)(t->end - t->begin);
  void *p = pc_alloc(R->g, nb);
  if (!p) return pc_fail(R->g, PC_ERR_NOMEM, "out of memory for tensor '%s'", key), 0;
  memcpy(p, data + t->begin, nb);
  n->data = p;
  n->nbytes = nb;
  return 1;
}

pc_status pc_safetensors_bind(pc_graph *g, const char *path) {
  if (g->status != PC_OK) return g->status;
  int64_t len;
  unsigned char *buf = read_file(g, path, &len);
  if (!buf) return g->status;
  pc_safetensors_bind_buffer(g, buf, (size_t)len, path);
  free(buf);
  return g->status;
}

pc_status pc_safetensors_bind_buffer(pc_graph *g, const void *data, size_t size, const char *path) {
  if (g->status != PC_OK) return g->status;
  const unsigned char *buf = data;
  int64_t len = (int64_t)size;
  st_reader R = {.g = g, .path = path};
  uint64_t hlen = 0;
  if (len < 8) pc_fail(g, PC_ERR_PARSE, "%s: too short for a safetensors file", path);
  else {
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | buf[i];
    if (hlen > (uint64_t)(len - 8) || hlen > (uint64_t)MAX_HEADER)
      pc_fail(g, PC_ERR_PARSE, "%s: header length %llu exceeds the file", path, (unsigned long long)hlen);
  }
  if (g->status == PC_OK) {
    R.s = (const char *)buf + 8;
    R.n = (size_t)hlen;
    if (read_header(&R) && check_extents(&R, len - 8 - (int64_t)hlen))
      for (int i = 0; i < g->n_nodes && g->status == PC_OK; i++) {
        pc_node *n = g->nodes[i];
        if (n->op == PC_OP_constant && !n->data && pc_attr_str(n, "key", NULL)) bind_node(&R, n, buf + 8 + hlen);
      }
  }
  for (int i = 0; i < R.n_t; i++) free(R.t[i].name);
  free(R.t);
  return g->status;
}

/* ---------------------------------------------------------------- writing */

/* the name a constant is saved (and printed) under, or NULL when it is printed inline */
static const char *save_key(const pc_node *n, char *buf, size_t len) {
  const char *key = pc_attr_str(n, "key", NULL);
  if (key) return key;
  if (pc_type_numel(&n->out[0]->type) <= INLINE_MAX) return NULL;
  snprintf(buf, len, "const%d", n->id);
  return buf;
}

static const char *st_dtype_name(pc_dtype dt) {
  for (int i = 0; i < N_ST_DTYPES; i++)
    if (st_dtypes[i].dt == dt) return st_dtypes[i].name;
  return NULL;
}

static void json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
    else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
    else fputc(*p, f);
  }
  fputc('"', f);
}

typedef struct st_item {
  const pc_node *n;
  char key_buf[32];
  const char *key;
} st_item;

/* the constants to save, in graph order; a key used twice (one weight shared) is saved once */
static st_item *save_list(pc_graph *g, int *count) {
  st_item *items = calloc((size_t)g->n_nodes + 1, sizeof *items);
  if (!items) return pc_fail(g, PC_ERR_NOMEM, "out of memory"), NULL;
  int c = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    const pc_node *n = g->nodes[i];
    if (n->op != PC_OP_constant || !n->data || n->dead) continue;
    st_item *it = &items[c];
    it->n = n;
    if (!(it->key = save_key(n, it->key_buf, sizeof it->key_buf))) continue;
    int dup = 0;
    const char *k = it->key; /* may point into it->key_buf: items is never reallocated */
    for (int j = 0; j < c && !dup; j++) dup = !strcmp(items[j].key, k);
    if (dup) continue;
    if (!st_dtype_name(n->out[0]->type.dtype)) {
      pc_fail(g, PC_ERR_UNSUPPORTED, "constant '%s': safetensors has no %s", k, pc_dtype_name(n->out[0]->type.dtype));
      free(items);
      return NULL;
    }
    c++;
  }
  *count = c;
  return items;
}

static void write_header(const st_item *items, int count, FILE *f) {
  int64_t off = 0;
  fputc('{', f);
  for (int i = 0; i < count; i++) {
    const pc_node *n = items[i].n;
    if (i) fputc(',', f);
    json_str(f, items[i].key);
    const pc_type *t = &n->out[0]->type;
    fprintf(f, ":{\"dtype\":\"%s\",\"shape\":[", st_dtype_name(t->dtype));
    for (int k = 0; k < t->rank; k++) fprintf(f, k ? ",%lld" : "%lld", (long long)t->dims[k]);
    fprintf(f, "],\"data_offsets\":[%lld,%lld]}", (long long)off, (long long)(off + (int64_t)n->nbytes));
    off += (int64_t)n->nbytes;
  }
  fputc('}', f);
}

pc_status pc_safetensors_save(const pc_graph *cg, const char *path) {
  /* the graph is not changed; the cast only lets a failure leave its message where callers read it */
  pc_graph *g = (pc_graph *)cg;
  int count = 0;
  st_item *items = save_list(g, &count);
  if (!items) return g->status;
  char *hdr = NULL;
  size_t hlen = 0;
  FILE *m = open_memstream(&hdr, &hlen);
  if (!m) return free(items), pc_fail(g, PC_ERR_NOMEM, "out of memory");
  write_header(items, count, m);
  fclose(m);
  size_t padded = (hlen + 7) / 8 * 8; /* data starts 8-byte aligned, as the reference writer does */
  FILE *f = fopen(path, "wb");
  if (!f) {
    free(hdr);
    free(items);
    return pc_fail(g, PC_ERR_IO, "%s: cannot create", path);
  }
  unsigned char len8[8];
  for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)padded >> (8 * i));
  int ok = fwrite(len8, 1, 8, f) == 8 && fwrite(hdr, 1, hlen, f) == hlen;
  for (size_t i = hlen; ok && i < padded; i++) ok = fputc(' ', f) != EOF;
  for (int i = 0; ok && i < count; i++) ok = fwrite(items[i].n->data, 1, items[i].n->nbytes, f) == items[i].n->nbytes;
  ok = fclose(f) == 0 && ok;
  free(hdr);
  free(items);
  return ok ? PC_OK : pc_fail(g, PC_ERR_IO, "%s: write failed", path);
}
