/* frontend/onnx.c: ONNX importer: parses a ModelProto with protobuf-c and decomposes every node into prims. */
#include "frontend/onnx_internal.h"
#include "runtime/primc_file.h"

#include <errno.h>
#include <limits.h>
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

/* every ai.onnx op version's attribute and input names (frontend/onnx_attrs.def, generated from onnx's schemas) */
typedef struct ox_attr_row {
  const char *op;
  int since;
  const char *attrs, *inputs; /* space-separated */
} ox_attr_row;

static const ox_attr_row ox_attr_rows[] = {
#define ONNX_ATTRS(op, since, attrs, inputs) {#op, since, attrs, inputs},
#include "frontend/onnx_attrs.def"
#undef ONNX_ATTRS
};

/* the position of word w in the space-separated list, -1 when absent */
static int word_at(const char *list, const char *w) {
  size_t n = strlen(w);
  int i = 0;
  for (const char *p = list; *p; i++) {
    size_t len = strcspn(p, " ");
    if (len == n && !strncmp(p, w, n)) return i;
    p += len + (p[len] == ' ');
  }
  return -1;
}

/* A node's attributes against its op's version (the newest row not above opset): one the version does not define
 * would be ignored and its default stand in silently (a Conv's misspelt stride; ReduceMean's axes once opset 18 made
 * it an input: a mean over every axis), so it is refused, as ONNX Runtime refuses it. An op the schemas lack is not
 * checked. */
static pc_status check_attrs(pc_graph *g, const Onnx__NodeProto *nd, int opset) {
  const ox_attr_row *row = NULL, *rows = ox_attr_rows;
  size_t n_rows = sizeof ox_attr_rows / sizeof *ox_attr_rows;
  for (size_t i = 0; i < n_rows; i++)
    if (!strcmp(rows[i].op, nd->op_type) && rows[i].since <= opset) row = &rows[i];
  for (size_t a = 0; row && a < nd->n_attribute; a++) {
    const char *an = nd->attribute[a]->name ? nd->attribute[a]->name : "";
    if (word_at(row->attrs, an) >= 0) continue;
    int input = word_at(row->inputs, an), from = row->since;
    /* an input of that name: the attribute moved there, in the oldest version from which on every one has it */
    for (const ox_attr_row *r = row; input >= 0 && r > rows && !strcmp(r[-1].op, r->op) && word_at(r[-1].inputs, an) >= 0; r--)
      from = r[-1].since;
    if (input >= 0)
      return pc_fail(g, PC_ERR_ATTR, "%s: attribute '%s' is input %d of %s from opset %d on (the model imports opset %d); "
                     "the attribute would be ignored: move it to the input or import the older opset",
                     g->origin, an, input, nd->op_type, from, opset);
    return pc_fail(g, PC_ERR_ATTR, "%s: %s has no attribute '%s' at opset %d (%s%s)", g->origin, nd->op_type, an, opset,
                   *row->attrs ? "its attributes: " : "it takes none", row->attrs);
  }
  return PC_OK;
}

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
  if (dom < 0 && check_attrs(g, nd, opset) != PC_OK) return g->status;
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

/* A graph output declared with another dtype than its nodes compute: the model is malformed or its import went
 * wrong, and either way the caller would be handed another type than the model promises (ONNX Runtime refuses
 * it too). Declared shapes are not compared: ONNX Runtime takes the computed one over a stale declaration. */
static pc_status declared_output(pc_graph *g, const Onnx__ValueInfoProto *vi, const pc_value *v) {
  const Onnx__TypeProto *tp = vi->type;
  if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type) return PC_OK;
  pc_dtype dt;
  int et = tp->tensor_type->elem_type;
  if (et && ox_dtype_from_onnx(et, &dt) && dt != v->type.dtype)
    return pc_fail(g, PC_ERR_SHAPE, "graph output '%s': the model declares %s, its nodes compute %s",
                   vi->name ? vi->name : "", pc_dtype_name(dt), pc_dtype_name(v->type.dtype));
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
    if (declared_output(g, gp->output[i], v) != PC_OK) return g->status;
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
