/* ir/parse.c: reads the TorchScript-like text format (what ir/print.c writes) into a prim graph.
 *
 * Syntax (whitespace and newlines are free; '#' starts a comment to the end of the line):
 *
 *   sym batch in [1, 64]                  optional, before graph: a symbolic dim's bound; `inf` as
 *                                         the upper bound means unbounded. Undeclared symbols are
 *                                         created on first use with the bound [0, inf].
 *   graph(%x : f32[batch,3], %m : bool[]):
 *     %w : f32[3,4] = constant(key="fc.weight")          data bound later (pc_safetensors_bind)
 *     %c : f32[2] = constant(value=[1.5,-inf])            inline data, row-major; bool as 0/1,
 *                                                         c64 as [re,im] pairs
 *     %y : f32[batch,4] = dot_general(%x, %w, lhs_contract=[1], rhs_contract=[0], lhs_batch=[],
 *                                     rhs_batch=[]) loc("Gemm \"fc\"")
 *     %v, %i : i64[batch,4] = sort(%y, axis=1, descending=0)   types may be omitted (inferred)
 *     %z = aten::relu(%v)                                 ops with "::" go to the parse hook
 *     return (%z, %i)
 *
 *   value names: %[A-Za-z0-9_.]+; types: dtype[dims], a dim is an integer, a symbol identifier
 *   or a quoted symbol name; attributes: name=VALUE with VALUE an integer, a float (has '.',
 *   an exponent, inf or nan), a list of integers [1,2], a "string" (C escapes, \xHH), or a
 *   dtype name. Operands come before attributes. A declared type must equal the inferred one.
 *
 * Errors are one line, "file:line:col: message", set on the returned graph. */
#include "ir/ir.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DIM (INT64_C(1) << 40)
#define MAX_NUMEL (INT64_C(1) << 48)

typedef enum tkind { T_EOF, T_IDENT, T_VALUE, T_NUM, T_STR, T_PUNCT } tkind;

typedef struct tok {
  tkind k;
  const char *s; /* start in the source; for T_VALUE after the '%' */
  size_t n;
  int line, col;
} tok;

/* one number of a list or attribute, read in every precision the target dtype may need */
typedef struct num {
  int is_float;
  int above_i64; /* an integer in (INT64_MAX, UINT64_MAX]: i holds its bits (u64 constants) */
  int64_t i;
  double d;
  float f;
  tok at;
} num;

typedef struct vmap_entry {
  const char *name;
  pc_value *v;
} vmap_entry;

typedef struct lhs {
  const char *name;
  tok at;
  int typed;
  pc_type type;
} lhs;

/* an attribute as written; INTS, FLOAT lists and c64 pairs are all `list` until the op says which */
typedef struct pattr {
  pc_attr a;
  tok at;
  int is_list, nested, has_float;
  num *elems;
  int n_elems;
} pattr;

typedef struct parser {
  const char *src;
  size_t len, pos;
  int line, col;
  const char *file;
  pc_graph *g;
  const pc_parse_opts *opts;
  tok t;
  vmap_entry *map;
  size_t map_cap, map_n;
  pc_value **ins;
  int n_ins, cap_ins;
  pattr *attrs;
  int n_attrs, cap_attrs;
  lhs *lhs;
  int n_lhs, cap_lhs;
} parser;

/* ---------------------------------------------------------------- errors */

static int perr(parser *P, const tok *at, pc_status code, const char *fmt, ...) {
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  pc_fail(P->g, code, "%s:%d:%d: %s", P->file, at->line, at->col, msg);
  return 0;
}

/* prefixes an error some builder set (pc_node_add, the hook) with the location */
static int fail_at(parser *P, const tok *at) {
  pc_graph *g = P->g;
  if (g->status == PC_OK) g->status = PC_ERR_INTERNAL;
  char msg[sizeof g->error];
  memcpy(msg, g->error, sizeof msg);
  msg[sizeof msg - 1] = 0;
  if (snprintf(g->error, sizeof g->error, "%s:%d:%d: %s", P->file, at->line, at->col, msg) < 0) g->error[0] = 0;
  return 0;
}

/* ---------------------------------------------------------------- lexer */

static int is_alpha(int c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static int is_digit(int c) { return c >= '0' && c <= '9'; }
static int is_name(int c) { return is_alpha(c) || is_digit(c) || c == '.'; }

static int peekc(const parser *P, size_t k) { return P->pos + k < P->len ? (unsigned char)P->src[P->pos + k] : -1; }

static void advance(parser *P, size_t n) {
  for (size_t i = 0; i < n && P->pos < P->len; i++, P->pos++) {
    if (P->src[P->pos] == '\n') {
      P->line++;
      P->col = 1;
    } else {
      P->col++;
    }
  }
}

static void skip_space(parser *P) {
  for (;;) {
    int c = peekc(P, 0);
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') advance(P, 1);
    else if (c == '#')
      while (peekc(P, 0) != -1 && peekc(P, 0) != '\n') advance(P, 1);
    else return;
  }
}

static size_t lex_number(const parser *P) {
  size_t k = 0;
  if (peekc(P, k) == '-' || peekc(P, k) == '+') k++;
  if (P->pos + k + 3 <= P->len && (!strncmp(P->src + P->pos + k, "inf", 3) || !strncmp(P->src + P->pos + k, "nan", 3)))
    return k + 3;
  while (is_digit(peekc(P, k))) k++;
  if (peekc(P, k) == '.')
    for (k++; is_digit(peekc(P, k));) k++;
  if ((peekc(P, k) == 'e' || peekc(P, k) == 'E') &&
      (is_digit(peekc(P, k + 1)) || ((peekc(P, k + 1) == '-' || peekc(P, k + 1) == '+') && is_digit(peekc(P, k + 2)))))
    for (k += 2; is_digit(peekc(P, k));) k++;
  return k;
}

static size_t lex_ident(const parser *P) {
  size_t k = 1;
  for (;;) {
    while (is_name(peekc(P, k))) k++;
    if (peekc(P, k) == ':' && peekc(P, k + 1) == ':' && is_alpha(peekc(P, k + 2))) k += 2;
    else return k;
  }
}

static size_t lex_string(parser *P) {
  size_t k = 1;
  for (;;) {
    int c = peekc(P, k);
    if (c == -1 || c == '\n') return 0;
    if (c == '"') return k + 1;
    k += c == '\\' && peekc(P, k + 1) != -1 ? 2 : 1;
  }
}

/* reads the next token into P->t; 0 on a lexical error */
static int next(parser *P) {
  skip_space(P);
  tok t = {T_EOF, P->src + P->pos, 0, P->line, P->col};
  int c = peekc(P, 0);
  if (c == -1) {
    P->t = t;
    return 1;
  }
  if (c == '%') {
    size_t k = 1;
    while (is_name(peekc(P, k))) k++;
    if (k == 1) return perr(P, &t, PC_ERR_PARSE, "expected a value name after '%%'");
    t.k = T_VALUE;
    t.s++;
    t.n = k - 1;
  } else if (is_alpha(c)) {
    t.k = T_IDENT;
    t.n = lex_ident(P);
    if (t.n == 3 && (!strncmp(t.s, "inf", 3) || !strncmp(t.s, "nan", 3))) t.k = T_NUM;
  } else if (is_digit(c) || ((c == '-' || c == '+') && (is_digit(peekc(P, 1)) || peekc(P, 1) == 'i' || peekc(P, 1) == 'n'))) {
    t.k = T_NUM;
    t.n = lex_number(P);
    if (t.n <= 1 && !is_digit(c)) return perr(P, &t, PC_ERR_PARSE, "malformed number");
  } else if (c == '"') {
    t.k = T_STR;
    t.n = lex_string(P);
    if (!t.n) return perr(P, &t, PC_ERR_PARSE, "unterminated string");
  } else if (strchr("()[],:=", c)) {
    t.k = T_PUNCT;
    t.n = 1;
  } else if (c >= 0x21 && c < 0x7f) {
    return perr(P, &t, PC_ERR_PARSE, "unexpected character '%c'", c);
  } else {
    return perr(P, &t, PC_ERR_PARSE, "unexpected character \\x%02x", c);
  }
  advance(P, t.n + (t.k == T_VALUE));
  P->t = t;
  return 1;
}

static int tok_is(const tok *t, tkind k, const char *s) {
  return t->k == k && strlen(s) == t->n && memcmp(t->s, s, t->n) == 0;
}

static int at_punct(const parser *P, char c) { return P->t.k == T_PUNCT && P->t.s[0] == c; }

static const char *tok_desc(const tok *t) {
  static const char *const names[] = {"end of file", "identifier", "value name", "number", "string", "punctuation"};
  return names[t->k];
}

static int expect_punct(parser *P, char c) {
  if (at_punct(P, c)) return next(P);
  if (P->t.k == T_EOF) return perr(P, &P->t, PC_ERR_PARSE, "unexpected end of file, expected '%c'", c);
  if (P->t.k == T_PUNCT) return perr(P, &P->t, PC_ERR_PARSE, "expected '%c', got '%c'", c, P->t.s[0]);
  return perr(P, &P->t, PC_ERR_PARSE, "expected '%c', got %s '%.*s'", c, tok_desc(&P->t), (int)P->t.n, P->t.s);
}

/* always fails: reports the current token where `what` was expected */
static int expected(parser *P, const char *what) {
  if (P->t.k == T_EOF) return perr(P, &P->t, PC_ERR_PARSE, "unexpected end of file, expected %s", what);
  return perr(P, &P->t, PC_ERR_PARSE, "expected %s, got '%.*s'", what, (int)P->t.n, P->t.s);
}

static int expect_kind(parser *P, tkind k, const char *what) {
  if (P->t.k == k) return 1;
  if (P->t.k == T_EOF) return perr(P, &P->t, PC_ERR_PARSE, "unexpected end of file, expected %s", what);
  return perr(P, &P->t, PC_ERR_PARSE, "expected %s, got '%.*s'", what, (int)P->t.n, P->t.s);
}

/* the token's text as a graph-owned string */
static char *tok_str(parser *P, const tok *t) {
  char *s = pc_alloc(P->g, t->n + 1);
  if (s) memcpy(s, t->s, t->n);
  else pc_fail(P->g, PC_ERR_NOMEM, "out of memory");
  return s;
}

static int hexval(int c) {
  if (is_digit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* decodes the escapes of a string token into a graph-owned string */
static char *str_decode(parser *P, const tok *t) {
  char *d = pc_alloc(P->g, t->n);
  if (!d) return pc_fail(P->g, PC_ERR_NOMEM, "out of memory"), NULL;
  size_t o = 0;
  for (size_t i = 1; i + 1 < t->n; i++) {
    char c = t->s[i];
    if (c != '\\') {
      d[o++] = c;
      continue;
    }
    c = t->s[++i];
    if (c == 'n') d[o++] = '\n';
    else if (c == 't') d[o++] = '\t';
    else if (c == 'r') d[o++] = '\r';
    else if (c == '"' || c == '\\') d[o++] = c;
    else if (c == 'x' && i + 3 < t->n && hexval(t->s[i + 1]) >= 0 && hexval(t->s[i + 2]) >= 0) {
      int v = hexval(t->s[i + 1]) * 16 + hexval(t->s[i + 2]);
      if (!v) return perr(P, t, PC_ERR_PARSE, "string holds a NUL byte"), NULL;
      d[o++] = (char)v;
      i += 2;
    } else {
      return perr(P, t, PC_ERR_PARSE, "unknown escape '\\%c' in string", c), NULL;
    }
  }
  d[o] = 0;
  return d;
}

/* ---------------------------------------------------------------- numbers */

static int read_num(parser *P, num *out) {
  char buf[80];
  const tok *t = &P->t;
  if (t->n >= sizeof buf) return perr(P, t, PC_ERR_RANGE, "number '%.20s...' is too long", t->s);
  memcpy(buf, t->s, t->n);
  buf[t->n] = 0;
  out->at = *t;
  out->is_float = strpbrk(buf, ".eEin") != NULL;
  /* every reading comes from the text itself: (float)strtod would round twice, (double)i loses -0 */
  out->d = strtod(buf, NULL);
  out->f = strtof(buf, NULL);
  if (isinf(out->d) && !strstr(buf, "inf")) return perr(P, t, PC_ERR_RANGE, "number %s is out of range", buf);
  out->i = 0;
  out->above_i64 = 0;
  errno = 0;
  if (!out->is_float) {
    out->i = strtoll(buf, NULL, 10);
    out->above_i64 = errno == ERANGE && buf[0] != '-';
    if (out->above_i64) {
      errno = 0;
      out->i = (int64_t)strtoull(buf, NULL, 10);
    }
    if (errno == ERANGE) return perr(P, t, PC_ERR_RANGE, "integer %s is out of range", buf);
  }
  return next(P);
}

/* ---------------------------------------------------------------- value names */

static pc_value *map_get(const parser *P, const char *name) {
  if (!P->map_cap) return NULL;
  for (size_t i = pc_str_hash(name) & (P->map_cap - 1); P->map[i].name; i = (i + 1) & (P->map_cap - 1))
    if (strcmp(P->map[i].name, name) == 0) return P->map[i].v;
  return NULL;
}

static void map_insert(vmap_entry *map, size_t cap, const char *name, pc_value *v) {
  size_t i = pc_str_hash(name) & (cap - 1);
  while (map[i].name) i = (i + 1) & (cap - 1);
  map[i] = (vmap_entry){name, v};
}

static int map_put(parser *P, const char *name, pc_value *v) {
  if ((P->map_n + 1) * 2 > P->map_cap) {
    size_t nc = P->map_cap ? P->map_cap * 2 : 256;
    vmap_entry *m = calloc(nc, sizeof *m);
    if (!m) return pc_fail(P->g, PC_ERR_NOMEM, "out of memory"), 0;
    for (size_t i = 0; i < P->map_cap; i++)
      if (P->map[i].name) map_insert(m, nc, P->map[i].name, P->map[i].v);
    free(P->map);
    P->map = m;
    P->map_cap = nc;
  }
  map_insert(P->map, P->map_cap, name, v);
  P->map_n++;
  return 1;
}

/* a new value name at the current token: checks it is not defined yet */
static const char *new_name(parser *P) {
  if (!expect_kind(P, T_VALUE, "a value name")) return NULL;
  char *s = tok_str(P, &P->t);
  if (!s) return NULL;
  if (map_get(P, s)) return perr(P, &P->t, PC_ERR_PARSE, "redefinition of %%%s", s), NULL;
  return s;
}

/* ---------------------------------------------------------------- types */

static void type_str(const pc_graph *g, const pc_type *t, char *buf, size_t n) {
  size_t o = (size_t)snprintf(buf, n, "%s[", pc_dtype_name(t->dtype));
  for (int i = 0; i < t->rank && o < n; i++) {
    int64_t d = t->dims[i];
    const char *sep = i ? "," : "";
    if (PC_DIM_IS_SYM(d) && PC_DIM_SYM_ID(d) < g->n_syms)
      o += (size_t)snprintf(buf + o, n - o, "%s%s", sep, g->syms[PC_DIM_SYM_ID(d)].name);
    else o += (size_t)snprintf(buf + o, n - o, "%s%lld", sep, (long long)d);
  }
  if (o < n) snprintf(buf + o, n - o, "]");
}

static int parse_dim(parser *P, int64_t *d) {
  tok t = P->t;
  if (t.k == T_NUM) {
    num v;
    if (!read_num(P, &v)) return 0;
    if (v.is_float || v.i < 0 || v.i > MAX_DIM) return perr(P, &t, PC_ERR_RANGE, "bad dim '%.*s'", (int)t.n, t.s);
    *d = v.i;
    return 1;
  }
  if (t.k != T_IDENT && t.k != T_STR) return expect_kind(P, T_NUM, "a dim");
  char *name = t.k == T_STR ? str_decode(P, &t) : tok_str(P, &t);
  if (!name) return 0;
  int id = pc_sym_add(P->g, name, 0, INT64_MAX);
  if (id < 0) return 0;
  *d = PC_SYM(id);
  return next(P);
}

static int parse_type(parser *P, pc_type *ty) {
  if (!expect_kind(P, T_IDENT, "a dtype")) return 0;
  tok t = P->t;
  char name[16];
  pc_dtype dt;
  if (t.n >= sizeof name || (memcpy(name, t.s, t.n), name[t.n] = 0, !pc_dtype_from_name(name, &dt)))
    return perr(P, &t, PC_ERR_TYPE, "unknown dtype '%.*s'", (int)t.n, t.s);
  if (!next(P) || !expect_punct(P, '[')) return 0;
  memset(ty, 0, sizeof *ty);
  ty->dtype = dt;
  int64_t numel = 1;
  while (!at_punct(P, ']')) {
    if (ty->rank && !expect_punct(P, ',')) return 0;
    if (ty->rank == PC_MAX_RANK) return perr(P, &P->t, PC_ERR_RANGE, "rank exceeds %d", PC_MAX_RANK);
    int64_t *d = &ty->dims[ty->rank++];
    if (!parse_dim(P, d)) return 0;
    if (*d > 0 && numel > MAX_NUMEL / *d) return perr(P, &t, PC_ERR_RANGE, "type has more than 2^48 elements");
    if (*d > 0) numel *= *d;
  }
  return next(P);
}

/* ---------------------------------------------------------------- attributes */

static int list_push(parser *P, pattr *a, int *cap) {
  num v;
  if (!expect_kind(P, T_NUM, "a number") || !read_num(P, &v)) return 0;
  if (!pc_array_grow((void **)&a->elems, cap, a->n_elems + 1, sizeof *a->elems))
    return pc_fail(P->g, PC_ERR_NOMEM, "out of memory"), 0;
  a->has_float |= v.is_float;
  a->elems[a->n_elems++] = v;
  return 1;
}

/* [n, n, ...] or [[re,im], ...] */
static int parse_list(parser *P, pattr *a) {
  int cap = 0, count = 0;
  a->is_list = 1;
  if (!next(P)) return 0;
  while (!at_punct(P, ']')) {
    if (count && !expect_punct(P, ',')) return 0;
    int pair = at_punct(P, '[');
    if (count && pair != a->nested) return perr(P, &P->t, PC_ERR_PARSE, "list mixes numbers and pairs");
    a->nested = pair;
    if (pair && !(next(P) && list_push(P, a, &cap) && expect_punct(P, ',') && list_push(P, a, &cap) &&
                  expect_punct(P, ']')))
      return 0;
    if (!pair && !list_push(P, a, &cap)) return 0;
    count++;
  }
  return next(P);
}

static int parse_attr_value(parser *P, pattr *a) {
  tok t = P->t;
  if (t.k == T_NUM) {
    num v;
    if (!read_num(P, &v)) return 0;
    if (v.above_i64) return perr(P, &t, PC_ERR_RANGE, "attribute '%s': integer out of range", a->a.name);
    a->a.kind = v.is_float ? PC_ATTR_FLOAT : PC_ATTR_INT;
    a->a.f = v.d;
    a->a.i = v.i;
    return 1;
  }
  if (t.k == T_STR) {
    a->a.kind = PC_ATTR_STRING;
    return (a->a.s = str_decode(P, &t)) && next(P);
  }
  if (t.k == T_PUNCT && t.s[0] == '[') return parse_list(P, a);
  if (t.k == T_IDENT) {
    char name[16];
    pc_dtype dt;
    if (t.n < sizeof name && (memcpy(name, t.s, t.n), name[t.n] = 0, pc_dtype_from_name(name, &dt))) {
      a->a.kind = PC_ATTR_DTYPE;
      a->a.i = dt;
      return next(P);
    }
    return perr(P, &t, PC_ERR_TYPE, "unknown attribute value '%.*s' (not a dtype)", (int)t.n, t.s);
  }
  if (t.k == T_EOF) return perr(P, &t, PC_ERR_PARSE, "unexpected end of file, expected an attribute value");
  return perr(P, &t, PC_ERR_PARSE, "expected an attribute value, got '%.*s'", (int)t.n, t.s);
}

/* turns a list attribute into INTS (the only list kind prims take) */
static int attr_to_ints(parser *P, pattr *a) {
  if (!a->is_list) return 1;
  if (a->nested || a->has_float)
    return perr(P, &a->at, PC_ERR_ATTR, "attribute '%s': only integer lists are supported", a->a.name);
  int64_t *v = pc_alloc(P->g, sizeof *v * (size_t)(a->n_elems ? a->n_elems : 1));
  if (!v) return pc_fail(P->g, PC_ERR_NOMEM, "out of memory"), 0;
  for (int i = 0; i < a->n_elems; i++) v[i] = a->elems[i].i;
  a->a.kind = PC_ATTR_INTS;
  a->a.ints = v;
  a->a.n = a->n_elems;
  return 1;
}

/* ---------------------------------------------------------------- constants */

static int store_int(parser *P, const num *v, pc_dtype dt, void *p, int64_t i) {
  static const int64_t lo[] = {[PC_i8] = INT8_MIN, [PC_i16] = INT16_MIN, [PC_i32] = INT32_MIN, [PC_i64] = INT64_MIN,
                               [PC_u8] = 0, [PC_bool] = 0, [PC_u16] = 0, [PC_u32] = 0, [PC_u64] = 0,
                               [PC_i4] = -8, [PC_u4] = 0, [PC_i2] = -2, [PC_u2] = 0};
  static const int64_t hi[] = {[PC_i8] = INT8_MAX, [PC_i16] = INT16_MAX, [PC_i32] = INT32_MAX, [PC_i64] = INT64_MAX,
                               [PC_u8] = UINT8_MAX, [PC_bool] = 1, [PC_u16] = UINT16_MAX,
                               [PC_u32] = UINT32_MAX, [PC_u64] = INT64_MAX, [PC_i4] = 7, [PC_u4] = 15, [PC_i2] = 1,
                               [PC_u2] = 3};
  if (v->is_float) return perr(P, &v->at, PC_ERR_TYPE, "%s constant holds a float", pc_dtype_name(dt));
  if (v->above_i64 ? dt != PC_u64 : v->i < lo[dt] || v->i > hi[dt])
    return perr(P, &v->at, PC_ERR_RANGE, "%lld is out of range for %s", (long long)v->i, pc_dtype_name(dt));
  switch (dt) { /* one line per storage type */
  case PC_i8: ((int8_t *)p)[i] = (int8_t)v->i; break;
  case PC_i16: ((int16_t *)p)[i] = (int16_t)v->i; break;
  case PC_i32: ((int32_t *)p)[i] = (int32_t)v->i; break;
  case PC_i64: ((int64_t *)p)[i] = v->i; break;
  case PC_u16: ((uint16_t *)p)[i] = (uint16_t)v->i; break;
  case PC_u32: ((uint32_t *)p)[i] = (uint32_t)v->i; break;
  case PC_u64: ((uint64_t *)p)[i] = (uint64_t)v->i; break;
  default: ((uint8_t *)p)[i] = (uint8_t)v->i; break;
  }
  return 1;
}

static int store_float(parser *P, const num *v, pc_dtype dt, void *p, int64_t i) {
  int src_inf = isinf(v->d);
  if (dt == PC_f64) ((double *)p)[i] = v->d;
  else if (isinf(v->f) && !src_inf) return perr(P, &v->at, PC_ERR_RANGE, "value out of range for %s", pc_dtype_name(dt));
  else if (dt == PC_f32 || dt == PC_c64) ((float *)p)[i] = v->f;
  else if (pc_dtype_is_f8(dt)) {
    uint8_t b = pc_f32_to_f8(dt, v->f, 0);
    float back = pc_f8_to_f32(dt, b);
    if ((isinf(back) || isnan(back)) && !src_inf && !isnan(v->f))
      return perr(P, &v->at, PC_ERR_RANGE, "value out of range for %s", pc_dtype_name(dt));
    ((uint8_t *)p)[i] = b;
  } else {
    uint16_t h = dt == PC_f16 ? pc_f32_to_f16(v->f) : pc_f32_to_bf16(v->f);
    float back = dt == PC_f16 ? pc_f16_to_f32(h) : pc_bf16_to_f32(h);
    if (isinf(back) && !src_inf) return perr(P, &v->at, PC_ERR_RANGE, "value out of range for %s", pc_dtype_name(dt));
    ((uint16_t *)p)[i] = h;
  }
  return 1;
}

static int const_data(parser *P, const pattr *a, const pc_type *t, void **out) {
  int64_t numel = pc_type_numel(t);
  if (numel < 0) return perr(P, &a->at, PC_ERR_SHAPE, "constant with a symbolic dim");
  int want_pairs = t->dtype == PC_c64;
  if (a->n_elems && a->nested != want_pairs)
    return perr(P, &a->at, PC_ERR_TYPE, want_pairs ? "c64 values are [re,im] pairs" : "nested list for %s",
                pc_dtype_name(t->dtype));
  int64_t n = a->n_elems / (want_pairs ? 2 : 1);
  if (n != numel)
    return perr(P, &a->at, PC_ERR_SHAPE, "constant has %lld values, its type holds %lld", (long long)n,
                (long long)numel);
  void *d = pc_alloc(P->g, (size_t)numel * pc_dtype_size(t->dtype));
  if (!d) return pc_fail(P->g, PC_ERR_NOMEM, "out of memory"), 0;
  int flt = pc_dtype_is_float(t->dtype) || want_pairs;
  for (int i = 0; i < a->n_elems; i++)
    if (!(flt ? store_float(P, &a->elems[i], t->dtype, d, i) : store_int(P, &a->elems[i], t->dtype, d, i))) return 0;
  *out = d;
  return 1;
}

static pc_node *build_const(parser *P, const tok *op_at) {
  const lhs *l = &P->lhs[0];
  if (!l->typed) return perr(P, &l->at, PC_ERR_TYPE, "a constant needs a declared type"), NULL;
  const char *key = NULL;
  const pattr *val = NULL;
  for (int i = 0; i < P->n_attrs; i++) {
    const pattr *a = &P->attrs[i];
    if (!strcmp(a->a.name, "key") && a->a.kind == PC_ATTR_STRING && !a->is_list) key = a->a.s;
    else if (!strcmp(a->a.name, "value") && a->is_list) val = a;
    else return perr(P, &a->at, PC_ERR_ATTR, "constant: unexpected attribute '%s'", a->a.name), NULL;
  }
  if (!key && !val) return perr(P, op_at, PC_ERR_ATTR, "constant needs key= or value="), NULL;
  if (pc_type_numel(&l->type) < 0) return perr(P, &l->at, PC_ERR_SHAPE, "constant with a symbolic dim"), NULL;
  void *data = NULL;
  if (val && !const_data(P, val, &l->type, &data)) return NULL;
  pc_value *v = key ? pc_const_keyed(P->g, l->type, key) : pc_const(P->g, l->type, data);
  if (!v) return fail_at(P, op_at), NULL;
  if (key && data) {
    v->producer->data = data;
    v->producer->nbytes = (size_t)pc_type_numel(&l->type) * pc_dtype_size(l->type.dtype);
  }
  return v->producer;
}

/* ---------------------------------------------------------------- statements */

static int check_declared(parser *P, pc_value *const *outs) {
  for (int i = 0; i < P->n_lhs; i++) {
    const lhs *l = &P->lhs[i];
    if (!l->typed || pc_type_equal(&l->type, &outs[i]->type)) continue;
    char want[160], got[160];
    type_str(P->g, &l->type, want, sizeof want);
    type_str(P->g, &outs[i]->type, got, sizeof got);
    return perr(P, &l->at, PC_ERR_SHAPE, "%%%s is declared %s but its type is %s", l->name, want, got);
  }
  return 1;
}

static int bind_names(parser *P, pc_value *const *outs) {
  for (int i = 0; i < P->n_lhs; i++) {
    /* a hook may return an existing value (a no-op reshape): the new name aliases it */
    if (!outs[i]->name) outs[i]->name = P->lhs[i].name;
    if (!map_put(P, P->lhs[i].name, outs[i])) return 0;
  }
  return 1;
}

static int build_prim(parser *P, const tok *op_at, const char *op_name, pc_value **outs) {
  pc_op op;
  if (!pc_op_from_name(op_name, &op)) return perr(P, op_at, PC_ERR_PARSE, "unknown op '%s'", op_name);
  const pc_prim_info *pi = pc_prim(op);
  if (P->n_lhs != pi->n_out)
    return perr(P, op_at, PC_ERR_PARSE, "%s has %d result%s, %d named", op_name, pi->n_out, pi->n_out == 1 ? "" : "s",
                P->n_lhs);
  if ((pi->n_in >= 0 && P->n_ins != pi->n_in) || (pi->n_in < 0 && P->n_ins < 1))
    return perr(P, op_at, PC_ERR_PARSE, "%s takes %s%d operand%s, got %d", op_name, pi->n_in < 0 ? "at least " : "",
                pi->n_in < 0 ? 1 : pi->n_in, pi->n_in == 1 || pi->n_in < 0 ? "" : "s", P->n_ins);
  if (op == PC_OP_constant) {
    pc_node *n = build_const(P, op_at);
    if (!n) return 0;
    outs[0] = n->out[0];
    return 1;
  }
  pc_attr attrs[64];
  if (P->n_attrs > 64) return perr(P, op_at, PC_ERR_ATTR, "too many attributes");
  for (int i = 0; i < P->n_attrs; i++) {
    if (!attr_to_ints(P, &P->attrs[i])) return 0;
    attrs[i] = P->attrs[i].a;
  }
  pc_node *n = pc_node_add(P->g, op, P->ins, P->n_ins, attrs, P->n_attrs);
  if (!n) return fail_at(P, op_at);
  for (int i = 0; i < n->n_out; i++) outs[i] = n->out[i];
  return 1;
}

static int build_hooked(parser *P, const tok *op_at, const char *op_name, pc_value **outs) {
  if (!P->opts || !P->opts->hook) return perr(P, op_at, PC_ERR_PARSE, "unknown op '%s'", op_name);
  pc_attr attrs[64];
  if (P->n_attrs > 64) return perr(P, op_at, PC_ERR_ATTR, "too many attributes");
  for (int i = 0; i < P->n_attrs; i++) {
    if (!attr_to_ints(P, &P->attrs[i])) return 0;
    attrs[i] = P->attrs[i].a;
  }
  pc_status st = P->opts->hook(P->opts->hook_ctx, P->g, op_name, P->ins, P->n_ins, attrs, P->n_attrs, outs, P->n_lhs);
  if (st != PC_OK || P->g->status != PC_OK) {
    if (P->g->status == PC_OK) pc_fail(P->g, st, "%s failed", op_name);
    return fail_at(P, op_at);
  }
  for (int i = 0; i < P->n_lhs; i++)
    if (!outs[i]) return perr(P, op_at, PC_ERR_INTERNAL, "%s gave no value for result %d", op_name, i);
  return 1;
}

static int parse_lhs(parser *P) {
  P->n_lhs = 0;
  for (;;) {
    const char *name = new_name(P);
    if (!name) return 0;
    for (int i = 0; i < P->n_lhs; i++)
      if (!strcmp(P->lhs[i].name, name)) return perr(P, &P->t, PC_ERR_PARSE, "redefinition of %%%s", name);
    if (!pc_array_grow((void **)&P->lhs, &P->cap_lhs, P->n_lhs + 1, sizeof *P->lhs))
      return pc_fail(P->g, PC_ERR_NOMEM, "out of memory"), 0;
    lhs *l = &P->lhs[P->n_lhs++];
    *l = (lhs){.name = name, .at = P->t};
    if (!next(P)) return 0;
    if (at_punct(P, ':')) {
      l->typed = 1;
      if (!next(P) || !parse_type(P, &l->type)) return 0;
    }
    if (at_punct(P, '=')) return next(P);
    if (!expect_punct(P, ',')) return 0;
  }
}

static int parse_arg(parser *P) {
  tok t = P->t;
  if (t.k == T_VALUE) {
    if (P->n_attrs) return perr(P, &t, PC_ERR_PARSE, "operand after attributes");
    char *name = tok_str(P, &t);
    if (!name) return 0;
    pc_value *v = map_get(P, name);
    if (!v) return perr(P, &t, PC_ERR_PARSE, "undefined value %%%s", name);
    if (!pc_array_grow((void **)&P->ins, &P->cap_ins, P->n_ins + 1, sizeof *P->ins))
      return pc_fail(P->g, PC_ERR_NOMEM, "out of memory"), 0;
    P->ins[P->n_ins++] = v;
    return next(P);
  }
  if (!expect_kind(P, T_IDENT, "an operand or attribute")) return 0;
  char *name = tok_str(P, &t);
  if (!name) return 0;
  for (int i = 0; i < P->n_attrs; i++)
    if (!strcmp(P->attrs[i].a.name, name)) return perr(P, &t, PC_ERR_ATTR, "duplicate attribute '%s'", name);
  if (!pc_array_grow((void **)&P->attrs, &P->cap_attrs, P->n_attrs + 1, sizeof *P->attrs))
    return pc_fail(P->g, PC_ERR_NOMEM, "out of memory"), 0;
  pattr *a = &P->attrs[P->n_attrs++];
  memset(a, 0, sizeof *a);
  a->a.name = name;
  a->at = t;
  return next(P) && expect_punct(P, '=') && parse_attr_value(P, a);
}

static void attrs_clear(parser *P) {
  for (int i = 0; i < P->n_attrs; i++) free(P->attrs[i].elems);
  P->n_attrs = 0;
}

/* optional loc("...") after a node */
static int parse_loc(parser *P, const char **loc) {
  *loc = NULL;
  if (!tok_is(&P->t, T_IDENT, "loc")) return 1;
  if (!next(P) || !expect_punct(P, '(') || !expect_kind(P, T_STR, "a string")) return 0;
  if (!(*loc = str_decode(P, &P->t))) return 0;
  return next(P) && expect_punct(P, ')');
}

static int parse_stmt(parser *P) {
  if (!parse_lhs(P) || !expect_kind(P, T_IDENT, "an op name")) return 0;
  tok op_at = P->t;
  char *op_name = tok_str(P, &op_at);
  if (!op_name || !next(P) || !expect_punct(P, '(')) return 0;
  P->n_ins = 0;
  attrs_clear(P);
  while (!at_punct(P, ')')) {
    if ((P->n_ins || P->n_attrs) && !expect_punct(P, ',')) return 0;
    if (!parse_arg(P)) return 0;
  }
  const char *loc;
  if (!next(P) || !parse_loc(P, &loc)) return 0;
  pc_value *outs[64] = {0};
  if (P->n_lhs > 64) return perr(P, &op_at, PC_ERR_PARSE, "too many results");
  int hooked = strstr(op_name, "::") != NULL;
  if (hooked && !loc) loc = pc_strfmt(P->g, "%s %%%s", op_name, P->lhs[0].name);
  pc_set_origin(P->g, loc);
  int ok = hooked ? build_hooked(P, &op_at, op_name, outs) : build_prim(P, &op_at, op_name, outs);
  pc_set_origin(P->g, NULL);
  return ok && check_declared(P, outs) && bind_names(P, outs);
}

/* ---------------------------------------------------------------- graph */

/* sym NAME in [LO, HI|inf] */
static int parse_sym(parser *P) {
  if (!next(P)) return 0;
  tok t = P->t;
  if (t.k != T_IDENT && t.k != T_STR) return expect_kind(P, T_IDENT, "a symbol name");
  char *name = t.k == T_STR ? str_decode(P, &t) : tok_str(P, &t);
  if (!name || !next(P)) return 0;
  if (pc_sym_find(P->g, name) >= 0) return perr(P, &t, PC_ERR_PARSE, "symbol %s declared twice", name);
  if (!tok_is(&P->t, T_IDENT, "in")) return expected(P, "'in'");
  num lo, hi = {0};
  if (!next(P) || !expect_punct(P, '[') || !expect_kind(P, T_NUM, "a number") || !read_num(P, &lo) ||
      !expect_punct(P, ','))
    return 0;
  if (!expect_kind(P, T_NUM, "a number or inf") || !read_num(P, &hi)) return 0;
  if (hi.is_float && isinf(hi.d) && hi.d > 0) hi = (num){.i = INT64_MAX};
  if (lo.is_float || hi.is_float || lo.above_i64 || hi.above_i64 || lo.i < 0 || hi.i < lo.i)
    return perr(P, &t, PC_ERR_RANGE, "bad bound for symbol %s", name);
  if (pc_sym_add(P->g, name, lo.i, hi.i) < 0) return 0;
  return expect_punct(P, ']');
}

static int parse_params(parser *P) {
  if (!expect_punct(P, '(')) return 0;
  while (!at_punct(P, ')')) {
    if (P->g->n_inputs && !expect_punct(P, ',')) return 0;
    tok at = P->t;
    const char *name = new_name(P);
    pc_type t;
    if (!name || !next(P) || !expect_punct(P, ':') || !parse_type(P, &t)) return 0;
    pc_value *v = pc_input_add(P->g, name, t);
    if (!v) return fail_at(P, &at);
    if (!map_put(P, name, v)) return 0;
  }
  return next(P) && expect_punct(P, ':');
}

static int parse_return(parser *P) {
  if (!next(P)) return 0;
  int paren = at_punct(P, '(');
  if (paren && !next(P)) return 0;
  int n = 0;
  while (paren ? !at_punct(P, ')') : n == 0 || at_punct(P, ',')) {
    if (n && !expect_punct(P, ',')) return 0;
    tok t = P->t;
    if (!expect_kind(P, T_VALUE, "a value name")) return 0;
    char *name = tok_str(P, &t);
    pc_value *v = name ? map_get(P, name) : NULL;
    if (!name) return 0;
    if (!v) return perr(P, &t, PC_ERR_PARSE, "undefined value %%%s", name);
    if (pc_output_add(P->g, v) != PC_OK) return fail_at(P, &t);
    n++;
    if (!next(P)) return 0;
  }
  if (paren && !next(P)) return 0;
  if (P->t.k != T_EOF) return perr(P, &P->t, PC_ERR_PARSE, "unexpected '%.*s' after return", (int)P->t.n, P->t.s);
  return 1;
}

static int parse_graph(parser *P) {
  if (!next(P)) return 0;
  while (tok_is(&P->t, T_IDENT, "sym"))
    if (!parse_sym(P)) return 0;
  if (!tok_is(&P->t, T_IDENT, "graph")) return expected(P, "'graph'");
  if (!next(P) || !parse_params(P)) return 0;
  for (;;) {
    if (P->t.k == T_EOF) return perr(P, &P->t, PC_ERR_PARSE, "missing return");
    if (tok_is(&P->t, T_IDENT, "return")) return parse_return(P);
    if (P->t.k != T_VALUE) return expected(P, "a statement or 'return'");
    if (!parse_stmt(P)) return 0;
  }
}

pc_graph *pc_graph_parse(const char *text, size_t len, const char *filename, const pc_parse_opts *opts) {
  pc_graph *g = pc_graph_new();
  if (!g) return NULL;
  parser P = {.src = text ? text : "", .len = text ? len : 0, .line = 1, .col = 1,
              .file = filename ? filename : "<input>", .g = g, .opts = opts};
  if (!parse_graph(&P) && g->status == PC_OK) pc_fail(g, PC_ERR_PARSE, "%s: parse failed", P.file);
  attrs_clear(&P);
  free(P.attrs);
  free(P.ins);
  free(P.lhs);
  free(P.map);
  return g;
}
