/* ir/graph.c: the graph: arena ownership, values, nodes, attributes, symbols and sticky errors. */
#include "ir/ir.h"
#include "runtime/primc_rt.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ARENA_ALIGN 64
#define ARENA_BLOCK (64 * 1024)
#define PC_ALLOC_MAX ((size_t)1 << 40) /* no model needs a terabyte: larger requests are corrupt sizes */

struct pc_arena_block {
  struct pc_arena_block *next;
  size_t used, size;
  _Alignas(ARENA_ALIGN) unsigned char mem[];
};

static struct pc_arena_block *arena_block_new(size_t size) {
  struct pc_arena_block *b = aligned_alloc(ARENA_ALIGN, (sizeof *b + size + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN);
  if (!b) return NULL;
  b->next = NULL;
  b->used = 0;
  b->size = size;
  return b;
}

void *pc_alloc(pc_graph *g, size_t n) {
  if (n > PC_ALLOC_MAX) return NULL; /* also keeps the rounding below from wrapping */
  size_t need = (n + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
  if (need == 0) need = ARENA_ALIGN;
  struct pc_arena_block *b = g->arena;
  if (!b || b->size - b->used < need) {
    /* big requests get a block of their own, kept behind the current one */
    size_t size = need > ARENA_BLOCK / 4 ? need : ARENA_BLOCK;
    struct pc_arena_block *nb = arena_block_new(size);
    if (!nb) return NULL;
    if (b && size != ARENA_BLOCK) {
      nb->next = b->next;
      b->next = nb;
    } else {
      nb->next = b;
      g->arena = nb;
    }
    b = nb;
  }
  void *p = b->mem + b->used;
  b->used += need;
  memset(p, 0, n);
  return p;
}

char *pc_strdup(pc_graph *g, const char *s) {
  if (!s) return NULL;
  size_t n = strlen(s) + 1;
  char *d = pc_alloc(g, n);
  if (d) memcpy(d, s, n);
  return d;
}

char *pc_strfmt(pc_graph *g, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0) return NULL;
  char *d = pc_alloc(g, (size_t)n + 1);
  if (!d) return NULL;
  va_start(ap, fmt);
  vsnprintf(d, (size_t)n + 1, fmt, ap);
  va_end(ap);
  return d;
}

pc_graph *pc_graph_new(void) {
  pc_graph *g = calloc(1, sizeof *g);
  return g;
}

void pc_graph_free(pc_graph *g) {
  if (!g) return;
  for (struct pc_arena_block *b = g->arena, *next; b; b = next) {
    next = b->next;
    free(b);
  }
  free(g->nodes);
  free(g->values);
  free(g->inputs);
  free(g->outputs);
  free(g->syms);
  free(g);
}

int pc_array_grow(void **arr, int *cap, int need, size_t elem) {
  if (need <= *cap) return 1;
  int nc = *cap ? *cap * 2 : 16;
  while (nc < need) nc *= 2;
  void *p = realloc(*arr, (size_t)nc * elem);
  if (!p) return 0;
  *arr = p;
  *cap = nc;
  return 1;
}

/* ---- errors */

pc_status pc_vfail(pc_graph *g, pc_status code, const char *fmt, va_list ap) {
  if (g->status != PC_OK) return g->status;
  g->status = code;
  char raw[sizeof g->error];
  vsnprintf(raw, sizeof raw, fmt, ap);
  primc_text_escape(g->error, sizeof g->error, raw); /* the model's names in it: printed, never acted on */
  return code;
}

pc_status pc_fail(pc_graph *g, pc_status code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  pc_vfail(g, code, fmt, ap);
  va_end(ap);
  return g->status;
}

pc_status pc_node_fail(pc_graph *g, const pc_node *n, pc_status code, const char *fmt, ...) {
  if (g->status != PC_OK) return g->status;
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  const char *prim = pc_prim(n->op) ? pc_prim(n->op)->name : "?";
  if (n->origin)
    return pc_fail(g, code, "%s: %s: %s", n->origin, prim, msg);
  return pc_fail(g, code, "%s: %s", prim, msg);
}

const char *pc_error(const pc_graph *g) {
  if (!g) return "out of memory";
  return g->status == PC_OK ? "" : g->error;
}

/* escaped once here: origins name kernels in listings, profiles and compiled artifacts' --profile output */
void pc_set_origin(pc_graph *g, const char *origin) {
  if (!origin) {
    g->origin = NULL;
    return;
  }
  char small[512]; /* a name's escape fits here but for the longest names: no allocation per node */
  size_t n = 4 * strlen(origin) + 1;
  char *e = n <= sizeof small ? small : malloc(n);
  if (!e) {
    g->origin = NULL;
    return;
  }
  primc_text_escape(e, n, origin);
  g->origin = pc_strdup(g, e);
  if (e != small) free(e);
}

/* ---- symbols */

int pc_sym_find(const pc_graph *g, const char *name) {
  for (int i = 0; i < g->n_syms; i++)
    if (strcmp(g->syms[i].name, name) == 0) return i;
  return -1;
}

int pc_sym_add(pc_graph *g, const char *name, int64_t lo, int64_t hi) {
  int id = pc_sym_find(g, name);
  if (id >= 0) return id;
  if (!pc_array_grow((void **)&g->syms, &g->cap_syms, g->n_syms + 1, sizeof *g->syms)) {
    pc_fail(g, PC_ERR_NOMEM, "out of memory");
    return -1;
  }
  g->syms[g->n_syms] = (pc_sym){pc_strdup(g, name), lo, hi};
  return g->n_syms++;
}

/* ---- values and nodes */

static pc_value *value_new(pc_graph *g) {
  if (!pc_array_grow((void **)&g->values, &g->cap_values, g->n_values + 1, sizeof *g->values)) return NULL;
  pc_value *v = pc_alloc(g, sizeof *v);
  if (!v) return NULL;
  v->id = g->n_values;
  g->values[g->n_values++] = v;
  return v;
}

void pc_value_set_name(pc_graph *g, pc_value *v, const char *name) { v->name = pc_strdup(g, name); }

pc_value *pc_input_add(pc_graph *g, const char *name, pc_type t) {
  if (g->status != PC_OK) return NULL;
  if (t.rank < 0 || t.rank > PC_MAX_RANK) {
    pc_fail(g, PC_ERR_RANGE, "input %s: rank %d exceeds %d", name ? name : "?", t.rank, PC_MAX_RANK);
    return NULL;
  }
  if (!pc_type_size_ok(&t)) {
    pc_fail(g, PC_ERR_RANGE, "input %s: its dims multiply past %lld elements", name ? name : "?",
            (long long)PC_MAX_NUMEL);
    return NULL;
  }
  pc_value *v = value_new(g);
  if (!v || !pc_array_grow((void **)&g->inputs, &g->cap_inputs, g->n_inputs + 1, sizeof *g->inputs)) {
    pc_fail(g, PC_ERR_NOMEM, "out of memory");
    return NULL;
  }
  v->type = t;
  if (name) pc_value_set_name(g, v, name);
  g->inputs[g->n_inputs++] = v;
  return v;
}

pc_status pc_output_add(pc_graph *g, pc_value *v) {
  if (g->status != PC_OK) return g->status;
  if (!v) return pc_fail(g, PC_ERR_INTERNAL, "graph output is missing");
  if (!pc_array_grow((void **)&g->outputs, &g->cap_outputs, g->n_outputs + 1, sizeof *g->outputs))
    return pc_fail(g, PC_ERR_NOMEM, "out of memory");
  g->outputs[g->n_outputs++] = v;
  return PC_OK;
}

static int copy_attrs(pc_graph *g, pc_node *n, const pc_attr *attrs, int n_attrs) {
  n->n_attrs = n_attrs;
  n->attrs = pc_alloc(g, sizeof *n->attrs * (size_t)(n_attrs ? n_attrs : 1));
  if (!n->attrs) return 0;
  for (int i = 0; i < n_attrs; i++) {
    pc_attr a = attrs[i];
    a.name = pc_strdup(g, a.name);
    if (a.kind == PC_ATTR_STRING) a.s = pc_strdup(g, a.s ? a.s : "");
    if (a.kind == PC_ATTR_INTS) {
      int64_t *v = pc_alloc(g, sizeof *v * (size_t)(a.n > 0 ? a.n : 1));
      if (!v) return 0;
      if (a.n > 0) memcpy(v, a.ints, sizeof *v * (size_t)a.n);
      a.ints = v;
    }
    n->attrs[i] = a;
  }
  return 1;
}

static int check_arity(pc_graph *g, pc_node *n, pc_value *const *in) {
  const pc_prim_info *p = pc_prim(n->op);
  if (p->n_in >= 0 && n->n_in != p->n_in)
    return pc_node_fail(g, n, PC_ERR_ATTR, "takes %d operand%s, got %d", p->n_in, p->n_in == 1 ? "" : "s", n->n_in), 0;
  if (p->n_in < 0 && n->n_in < 1) return pc_node_fail(g, n, PC_ERR_ATTR, "takes at least one operand"), 0;
  for (int i = 0; i < n->n_in; i++)
    if (!in[i]) return pc_node_fail(g, n, PC_ERR_INTERNAL, "operand %d is missing", i), 0;
  return 1;
}

/* allocates a node with its outputs (types unset); not yet in the graph */
static pc_node *node_create(pc_graph *g, pc_op op, pc_value *const *in, int n_in, const pc_attr *attrs, int n_attrs) {
  if (g->status != PC_OK) return NULL;
  if (!pc_prim(op)) {
    pc_fail(g, PC_ERR_INTERNAL, "unknown prim %d", (int)op);
    return NULL;
  }
  pc_node *n = pc_alloc(g, sizeof *n);
  if (!n) {
    pc_fail(g, PC_ERR_NOMEM, "out of memory");
    return NULL;
  }
  n->op = op;
  n->origin = g->origin;
  n->backward = g->backward;
  n->group = -1;
  n->n_in = n_in;
  n->n_out = pc_prim(op)->n_out;
  if (!check_arity(g, n, in)) return NULL;
  n->in = pc_alloc(g, sizeof *n->in * (size_t)(n_in ? n_in : 1));
  n->out = pc_alloc(g, sizeof *n->out * (size_t)n->n_out);
  if (!n->in || !n->out || !copy_attrs(g, n, attrs, n_attrs)) {
    pc_fail(g, PC_ERR_NOMEM, "out of memory");
    return NULL;
  }
  for (int i = 0; i < n_in; i++) n->in[i] = in[i];
  for (int i = 0; i < n->n_out; i++) {
    pc_value *v = value_new(g);
    if (!v) {
      pc_fail(g, PC_ERR_NOMEM, "out of memory");
      return NULL;
    }
    v->producer = n;
    v->out_index = i;
    n->out[i] = v;
  }
  return n;
}

/* infers output types and appends the node in topological order */
static pc_node *node_commit(pc_graph *g, pc_node *n) {
  if (!n || g->status != PC_OK) return NULL;
  if (pc_infer(g, n) != PC_OK) return NULL;
  if (!pc_array_grow((void **)&g->nodes, &g->cap_nodes, g->n_nodes + 1, sizeof *g->nodes)) {
    pc_fail(g, PC_ERR_NOMEM, "out of memory");
    return NULL;
  }
  n->id = g->n_nodes;
  g->nodes[g->n_nodes++] = n;
  return n;
}

pc_node *pc_node_add(pc_graph *g, pc_op op, pc_value *const *in, int n_in, const pc_attr *attrs, int n_attrs) {
  return node_commit(g, node_create(g, op, in, n_in, attrs, n_attrs));
}

pc_value *pc_build(pc_graph *g, pc_op op, pc_value *const *in, int n_in, const pc_attr *attrs, int n_attrs) {
  pc_node *n = pc_node_add(g, op, in, n_in, attrs, n_attrs);
  return n ? n->out[0] : NULL;
}

/* a constant node of type t over data (owned by g, at least t's size) */
static pc_value *const_node(pc_graph *g, pc_type t, void *data, size_t nbytes) {
  pc_node *n = node_create(g, PC_OP_constant, NULL, 0, NULL, 0);
  if (!n) return NULL;
  n->nbytes = nbytes;
  n->data = data;
  n->out[0]->type = t;
  n = node_commit(g, n);
  return n ? n->out[0] : NULL;
}

/* bytes of a constant of type t; -1 (g failed) for a symbolic dim */
static int64_t const_bytes(pc_graph *g, const pc_type *t) {
  int64_t numel = pc_type_numel(t);
  if (numel < 0) return pc_fail(g, PC_ERR_SHAPE, "constant with a symbolic dim"), -1;
  if (!pc_type_size_ok(t)) return pc_fail(g, PC_ERR_RANGE, "constant's dims multiply past %lld elements", (long long)PC_MAX_NUMEL), -1;
  return numel * (int64_t)pc_dtype_size(t->dtype);
}

pc_value *pc_const(pc_graph *g, pc_type t, const void *data) {
  if (g->status != PC_OK) return NULL;
  int64_t nbytes = const_bytes(g, &t);
  if (nbytes < 0) return NULL;
  void *copy = pc_alloc(g, (size_t)nbytes);
  if (!copy) {
    pc_fail(g, PC_ERR_NOMEM, "out of memory for a constant of %lld bytes", (long long)nbytes);
    return NULL;
  }
  if (data) memcpy(copy, data, (size_t)nbytes);
  return const_node(g, t, copy, (size_t)nbytes);
}

/* a constant over bytes the graph already owns (pc_alloc'ed, at least t's size): not copied, so a pass
 * can rearrange a large weight where it is */
pc_value *pc_const_view(pc_graph *g, pc_type t, void *data) {
  if (g->status != PC_OK || !data) return NULL;
  int64_t nbytes = const_bytes(g, &t);
  return nbytes < 0 ? NULL : const_node(g, t, data, (size_t)nbytes);
}

/* a constant whose data will be bound later by name (weights files) */
pc_value *pc_const_keyed(pc_graph *g, pc_type t, const char *key) {
  if (g->status != PC_OK) return NULL;
  pc_attr a = pc_a_str("key", key);
  pc_node *n = node_create(g, PC_OP_constant, NULL, 0, &a, 1);
  if (!n) return NULL;
  n->out[0]->type = t;
  n = node_commit(g, n);
  return n ? n->out[0] : NULL;
}

pc_value *pc_const_weight(pc_graph *g, pc_type t, const void *data, const char *key) {
  pc_value *v = pc_const_keyed(g, t, key);
  int64_t nbytes = v ? const_bytes(g, &t) : -1;
  void *copy = nbytes >= 0 ? pc_alloc(g, (size_t)nbytes) : NULL;
  if (!copy) {
    if (v) pc_fail(g, PC_ERR_NOMEM, "out of memory for a constant of %lld bytes", (long long)nbytes);
    return NULL;
  }
  memcpy(copy, data, (size_t)nbytes);
  v->producer->data = copy;
  v->producer->nbytes = (size_t)nbytes;
  return v;
}

const void *pc_const_data(const pc_value *v) {
  if (!v || !v->producer || v->producer->op != PC_OP_constant) return NULL;
  return v->producer->data;
}

/* ---- attributes */

pc_attr pc_a_int(const char *name, int64_t v) { return (pc_attr){.name = name, .kind = PC_ATTR_INT, .i = v}; }
pc_attr pc_a_ints(const char *name, const int64_t *v, int n) {
  return (pc_attr){.name = name, .kind = PC_ATTR_INTS, .ints = v, .n = n};
}
pc_attr pc_a_float(const char *name, double v) { return (pc_attr){.name = name, .kind = PC_ATTR_FLOAT, .f = v}; }
pc_attr pc_a_str(const char *name, const char *s) { return (pc_attr){.name = name, .kind = PC_ATTR_STRING, .s = s}; }
pc_attr pc_a_dtype(const char *name, pc_dtype t) { return (pc_attr){.name = name, .kind = PC_ATTR_DTYPE, .i = t}; }

const pc_attr *pc_attr_find(const pc_node *n, const char *name) {
  for (int i = 0; i < n->n_attrs; i++)
    if (strcmp(n->attrs[i].name, name) == 0) return &n->attrs[i];
  return NULL;
}

int64_t pc_attr_int(const pc_node *n, const char *name, int64_t dflt) {
  const pc_attr *a = pc_attr_find(n, name);
  return a && (a->kind == PC_ATTR_INT || a->kind == PC_ATTR_DTYPE) ? a->i : dflt;
}

const int64_t *pc_attr_ints(const pc_node *n, const char *name, int *len) {
  const pc_attr *a = pc_attr_find(n, name);
  if (!a || a->kind != PC_ATTR_INTS) return NULL;
  if (len) *len = a->n;
  return a->ints;
}

double pc_attr_float(const pc_node *n, const char *name, double dflt) {
  const pc_attr *a = pc_attr_find(n, name);
  if (!a) return dflt;
  if (a->kind == PC_ATTR_FLOAT) return a->f;
  if (a->kind == PC_ATTR_INT) return (double)a->i;
  return dflt;
}

const char *pc_attr_str(const pc_node *n, const char *name, const char *dflt) {
  const pc_attr *a = pc_attr_find(n, name);
  return a && a->kind == PC_ATTR_STRING ? a->s : dflt;
}

/* ---- rewriting support for passes */

int pc_value_is_output(const pc_graph *g, const pc_value *v) {
  for (int i = 0; i < g->n_outputs; i++)
    if (g->outputs[i] == v) return 1;
  return 0;
}

int pc_value_use_count(const pc_graph *g, const pc_value *v) {
  int c = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    const pc_node *n = g->nodes[i];
    if (n->dead) continue;
    for (int j = 0; j < n->n_in; j++) c += n->in[j] == v;
  }
  for (int i = 0; i < g->n_outputs; i++) c += g->outputs[i] == v;
  return c;
}

/* Drops dead nodes and values no longer reachable from a node or input;
 * renumbers node and value ids densely, keeping order. */
void pc_graph_compact(pc_graph *g) {
  int nn = 0;
  for (int i = 0; i < g->n_nodes; i++)
    if (!g->nodes[i]->dead) g->nodes[nn++] = g->nodes[i];
  g->n_nodes = nn;
  /* a value no live node produces goes, and so does one without a producer that is no longer a graph input
   * (a transform replaced the input, passes/vmap.c) */
  unsigned char *input = calloc((size_t)g->n_values + 1, 1);
  for (int i = 0; input && i < g->n_inputs; i++) input[g->inputs[i]->id] = 1;
  int nv = 0;
  for (int i = 0; i < g->n_values; i++) {
    pc_value *v = g->values[i];
    if ((v->producer && v->producer->dead) || (!v->producer && input && !input[i])) continue;
    g->values[nv++] = v;
  }
  free(input);
  g->n_values = nv;
  /* values of dropped nodes were removed above; renumber the rest */
  for (int i = 0; i < g->n_nodes; i++) g->nodes[i]->id = i;
  for (int i = 0; i < g->n_values; i++) g->values[i]->id = i;
}
