/* ir/print.c: prints a prim graph in the TorchScript-like text format that ir/parse.c reads back exactly. */
#include "ir/ir.h"
#include "runtime/primc_rt.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Constants with at most this many elements print their data inline. */
#define INLINE_MAX 64

/* ---------------------------------------------------------------- output buffer */

static void sb_str(pc_strbuf *b, const char *s) { pc_strbuf_put(b, s, strlen(s)); }

static void sb_quoted(pc_strbuf *b, const char *s) {
  sb_str(b, "\"");
  const char *end = s + strlen(s);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    int c = primc_text_control_len((const char *)p, end); /* what a terminal acts on, as errors escape it */
    if (*p == '"' || *p == '\\') pc_strbuf_fmt(b, "\\%c", *p);
    else if (*p == '\n') sb_str(b, "\\n");
    else if (*p == '\t') sb_str(b, "\\t");
    else if (c == 1) pc_strbuf_fmt(b, "\\x%02x", *p);
    else if (c == 2) pc_strbuf_fmt(b, "\\xc2\\x%02x", *++p);
    else pc_strbuf_put(b, (const char *)p, 1);
  }
  sb_str(b, "\"");
}

/* ---------------------------------------------------------------- numbers */

/* shortest %g text that reads back to exactly v */
static void fmt_f64(char *buf, size_t n, double v) {
  if (isnan(v)) snprintf(buf, n, "nan");
  else if (isinf(v)) snprintf(buf, n, v < 0 ? "-inf" : "inf");
  else
    for (int p = 1; p <= 17; p++) {
      snprintf(buf, n, "%.*g", p, v);
      if (strtod(buf, NULL) == v) break;
    }
}

static void fmt_f32(char *buf, size_t n, float v) {
  if (isnan(v) || isinf(v)) {
    fmt_f64(buf, n, v);
    return;
  }
  for (int p = 1; p <= 9; p++) {
    snprintf(buf, n, "%.*g", p, (double)v);
    if (strtof(buf, NULL) == v) break;
  }
}

/* a float attribute must read back as a float, so it always shows '.', an exponent, inf or nan */
static void put_float_attr(pc_strbuf *b, double v) {
  char buf[64];
  fmt_f64(buf, sizeof buf, v);
  sb_str(b, buf);
  if (!strpbrk(buf, ".eni")) sb_str(b, ".0");
}

/* ---------------------------------------------------------------- names */

/* A set of strings (open addressing) to make printed value names unique. */
typedef struct nameset {
  char **slot;
  size_t cap;
} nameset;

static int ns_has(const nameset *ns, const char *s) {
  for (size_t i = pc_str_hash(s) & (ns->cap - 1); ns->slot[i]; i = (i + 1) & (ns->cap - 1))
    if (strcmp(ns->slot[i], s) == 0) return 1;
  return 0;
}

static void ns_add(nameset *ns, char *s) {
  size_t i = pc_str_hash(s) & (ns->cap - 1);
  while (ns->slot[i]) i = (i + 1) & (ns->cap - 1);
  ns->slot[i] = s;
}

static int name_char(int c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
}

/* the value's name with characters the parser does not accept replaced, made unique with _N */
static char *unique_name(nameset *ns, const pc_value *v) {
  char base[256];
  if (v->name && *v->name) {
    size_t n = 0;
    for (const char *p = v->name; *p && n < sizeof base - 1; p++) base[n++] = name_char((unsigned char)*p) ? *p : '_';
    base[n] = 0;
  } else {
    snprintf(base, sizeof base, "%d", v->id);
  }
  size_t blen = strlen(base);
  char *s = malloc(blen + 24);
  if (!s) return NULL;
  memcpy(s, base, blen + 1);
  for (int k = 1; ns_has(ns, s); k++) snprintf(s + blen, 24, "_%d", k);
  ns_add(ns, s);
  return s;
}

typedef struct printer {
  const pc_graph *g;
  pc_strbuf out;
  char **names; /* by value id */
  nameset ns;
} printer;

static int names_build(printer *P) {
  const pc_graph *g = P->g;
  size_t cap = 64;
  while (cap < (size_t)g->n_values * 2 + 2) cap *= 2;
  P->ns.cap = cap;
  P->ns.slot = calloc(cap, sizeof *P->ns.slot);
  P->names = calloc((size_t)g->n_values + 1, sizeof *P->names);
  if (!P->ns.slot || !P->names) return 0;
  for (int i = 0; i < g->n_inputs; i++)
    if (!(P->names[g->inputs[i]->id] = unique_name(&P->ns, g->inputs[i]))) return 0;
  for (int i = 0; i < g->n_nodes; i++) {
    const pc_node *n = g->nodes[i];
    if (n->dead) continue;
    for (int j = 0; j < n->n_out; j++)
      if (!(P->names[n->out[j]->id] = unique_name(&P->ns, n->out[j]))) return 0;
  }
  return 1;
}

static void put_value(printer *P, const pc_value *v) {
  sb_str(&P->out, "%");
  if (v && v->id >= 0 && v->id < P->g->n_values && P->names[v->id]) sb_str(&P->out, P->names[v->id]);
  else pc_strbuf_fmt(&P->out, "%d", v ? v->id : -1);
}

/* ---------------------------------------------------------------- types */

static int ident_ok(const char *s) {
  /* the lexer starts an identifier with a letter or '_' only (".x" came back as punctuation: fuzz_text) */
  int first = (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_';
  if (!first || !strcmp(s, "inf") || !strcmp(s, "nan")) return 0;
  for (; *s; s++)
    if (!name_char((unsigned char)*s)) return 0;
  return 1;
}

static void put_sym_name(pc_strbuf *b, const char *s) {
  if (ident_ok(s)) sb_str(b, s);
  else sb_quoted(b, s);
}

static void put_dim(printer *P, int64_t d) {
  if (!PC_DIM_IS_SYM(d)) {
    pc_strbuf_fmt(&P->out, "%lld", (long long)d);
    return;
  }
  int id = PC_DIM_SYM_ID(d);
  if (id < P->g->n_syms && P->g->syms[id].name) put_sym_name(&P->out, P->g->syms[id].name);
  else pc_strbuf_fmt(&P->out, "\"?sym%d\"", id);
}

static void put_type(printer *P, const pc_type *t) {
  sb_str(&P->out, pc_dtype_name(t->dtype));
  sb_str(&P->out, "[");
  for (int i = 0; i < t->rank; i++) {
    if (i) sb_str(&P->out, ",");
    put_dim(P, t->dims[i]);
  }
  sb_str(&P->out, "]");
}

static void put_typed_value(printer *P, const pc_value *v) {
  put_value(P, v);
  sb_str(&P->out, " : ");
  put_type(P, &v->type);
}

/* ---------------------------------------------------------------- attributes and constant data */

static void put_attr(printer *P, const pc_attr *a) {
  pc_strbuf *b = &P->out;
  sb_str(b, a->name);
  sb_str(b, "=");
  switch (a->kind) { /* one line per attribute kind */
  case PC_ATTR_INT: pc_strbuf_fmt(b, "%lld", (long long)a->i); break;
  case PC_ATTR_FLOAT: put_float_attr(b, a->f); break;
  case PC_ATTR_STRING: sb_quoted(b, a->s ? a->s : ""); break;
  case PC_ATTR_DTYPE: sb_str(b, pc_dtype_name((pc_dtype)a->i)); break;
  case PC_ATTR_INTS:
    sb_str(b, "[");
    for (int i = 0; i < a->n; i++) pc_strbuf_fmt(b, i ? ",%lld" : "%lld", (long long)a->ints[i]);
    sb_str(b, "]");
    break;
  }
}

/* element i of constant data as text that parses back to the same bits */
static void put_element(pc_strbuf *b, pc_dtype dt, const void *data, int64_t i) {
  char buf[64];
  switch (dt) { /* one line per storage type */
  case PC_f16: fmt_f32(buf, sizeof buf, pc_f16_to_f32(((const uint16_t *)data)[i])); break;
  case PC_bf16: fmt_f32(buf, sizeof buf, pc_bf16_to_f32(((const uint16_t *)data)[i])); break;
  case PC_f32: fmt_f32(buf, sizeof buf, ((const float *)data)[i]); break;
  case PC_f64: fmt_f64(buf, sizeof buf, ((const double *)data)[i]); break;
  case PC_i8: snprintf(buf, sizeof buf, "%d", ((const int8_t *)data)[i]); break;
  case PC_i16: snprintf(buf, sizeof buf, "%d", ((const int16_t *)data)[i]); break;
  case PC_i32: snprintf(buf, sizeof buf, "%d", ((const int32_t *)data)[i]); break;
  case PC_i64: snprintf(buf, sizeof buf, "%lld", (long long)((const int64_t *)data)[i]); break;
  case PC_u8: snprintf(buf, sizeof buf, "%u", ((const uint8_t *)data)[i]); break;
  case PC_u16: snprintf(buf, sizeof buf, "%u", ((const uint16_t *)data)[i]); break;
  case PC_u32: snprintf(buf, sizeof buf, "%u", ((const uint32_t *)data)[i]); break;
  case PC_u64: snprintf(buf, sizeof buf, "%llu", (unsigned long long)((const uint64_t *)data)[i]); break;
  case PC_bool: snprintf(buf, sizeof buf, "%d", ((const uint8_t *)data)[i] != 0); break;
  case PC_i4: case PC_i2: snprintf(buf, sizeof buf, "%d", ((const int8_t *)data)[i]); break;
  case PC_u4: case PC_u2: snprintf(buf, sizeof buf, "%u", ((const uint8_t *)data)[i]); break;
  case PC_f8e4m3fn: case PC_f8e4m3fnuz: case PC_f8e5m2: case PC_f8e5m2fnuz: case PC_f4e2m1: case PC_f8e8m0: fmt_f32(buf, sizeof buf, pc_f8_to_f32(dt, ((const uint8_t *)data)[i])); break;
  case PC_c64: {
    char im[32];
    fmt_f32(buf, sizeof buf, ((const float *)data)[2 * i]);
    fmt_f32(im, sizeof im, ((const float *)data)[2 * i + 1]);
    pc_strbuf_fmt(b, "[%s,%s]", buf, im);
    return;
  }
  case PC_DTYPE_COUNT: snprintf(buf, sizeof buf, "?"); break;
  }
  sb_str(b, buf);
}

static void put_const_attrs(printer *P, const pc_node *n) {
  const pc_type *t = &n->out[0]->type;
  int64_t numel = pc_type_numel(t);
  int first = 1;
  for (int i = 0; i < n->n_attrs; i++, first = 0) {
    if (!first) sb_str(&P->out, ", ");
    put_attr(P, &n->attrs[i]);
  }
  if (n->data && numel >= 0 && numel <= INLINE_MAX) {
    sb_str(&P->out, first ? "value=[" : ", value=[");
    for (int64_t i = 0; i < numel; i++) {
      if (i) sb_str(&P->out, ",");
      put_element(&P->out, t->dtype, n->data, i);
    }
    sb_str(&P->out, "]");
  } else if (!pc_attr_find(n, "key")) {
    pc_strbuf_fmt(&P->out, first ? "key=\"const%d\"" : ", key=\"const%d\"", n->id);
  }
}

/* ---------------------------------------------------------------- graph */

static void put_node(printer *P, const pc_node *n) {
  pc_strbuf *b = &P->out;
  sb_str(b, "  ");
  for (int j = 0; j < n->n_out; j++) {
    if (j) sb_str(b, ", ");
    put_typed_value(P, n->out[j]);
  }
  sb_str(b, " = ");
  sb_str(b, pc_prim(n->op) ? pc_prim(n->op)->name : "?");
  sb_str(b, "(");
  if (n->op == PC_OP_constant) {
    put_const_attrs(P, n);
  } else {
    for (int j = 0; j < n->n_in; j++) {
      if (j) sb_str(b, ", ");
      put_value(P, n->in[j]);
    }
    for (int j = 0; j < n->n_attrs; j++) {
      if (j || n->n_in) sb_str(b, ", ");
      put_attr(P, &n->attrs[j]);
    }
  }
  sb_str(b, ")");
  if (n->origin) {
    sb_str(b, " loc(");
    sb_quoted(b, n->origin);
    sb_str(b, ")");
  }
  sb_str(b, "\n");
}

static void put_syms(printer *P) {
  for (int i = 0; i < P->g->n_syms; i++) {
    const pc_sym *s = &P->g->syms[i];
    if (s->lo == 0 && s->hi == INT64_MAX) continue;
    sb_str(&P->out, "sym ");
    put_sym_name(&P->out, s->name ? s->name : "?");
    pc_strbuf_fmt(&P->out, " in [%lld, ", (long long)s->lo);
    if (s->hi == INT64_MAX) sb_str(&P->out, "inf]\n");
    else pc_strbuf_fmt(&P->out, "%lld]\n", (long long)s->hi);
  }
}

static void print_graph(printer *P) {
  const pc_graph *g = P->g;
  put_syms(P);
  sb_str(&P->out, "graph(");
  for (int i = 0; i < g->n_inputs; i++) {
    if (i) sb_str(&P->out, ", ");
    put_typed_value(P, g->inputs[i]);
  }
  sb_str(&P->out, "):\n");
  for (int i = 0; i < g->n_nodes; i++)
    if (!g->nodes[i]->dead) put_node(P, g->nodes[i]);
  sb_str(&P->out, "  return (");
  for (int i = 0; i < g->n_outputs; i++) {
    if (i) sb_str(&P->out, ", ");
    put_value(P, g->outputs[i]);
  }
  sb_str(&P->out, ")\n");
}

static void printer_free(printer *P) {
  if (P->names)
    for (int i = 0; i <= P->g->n_values; i++) free(P->names[i]);
  free(P->names);
  free(P->ns.slot);
}

char *pc_graph_to_string(const pc_graph *g) {
  if (!g) return NULL;
  printer P = {.g = g};
  if (names_build(&P)) print_graph(&P);
  else P.out.oom = 1;
  printer_free(&P);
  return pc_strbuf_done(&P.out);
}

pc_status pc_graph_print(const pc_graph *g, FILE *f) {
  char *s = pc_graph_to_string(g);
  if (!s) return PC_ERR_NOMEM;
  size_t n = strlen(s);
  pc_status st = fwrite(s, 1, n, f) == n ? PC_OK : PC_ERR_IO;
  free(s);
  return st;
}
