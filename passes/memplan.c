/* passes/memplan.c: memory planning: storage for every value, workspace offsets by liveness over the kernel order. */
#include "passes/passes.h"

#include <stdlib.h>
#include <string.h>

/* Conventions (read by codegen):
 * - graph inputs INPUT, constants CONST (group -1, no kernel); a graph output
 *   computed by a kernel is written in place as OUTPUT; an output that is an
 *   input, a constant or listed twice keeps its storage and codegen copies it.
 * - FUSED: computed inline where it is read, never stored: every reader is in
 *   the producer's group, the producer is an inline prim (prims.def's inline
 *   column: elementwise, convert, index maps) and every reader is inline too, a reduction (its prologue), a
 *   gather reading it as its table or a concatenate that alone reads it (the kernel that copied the part
 *   computes it into the result instead).
 *   Everything else (results of reductions, contractions, pad, concatenate and
 *   the lone prims, and their operands) is materialized in the WORKSPACE.
 * - time is the kernel order; a value lives from its producer's kernel to its
 *   last reader's; buffers are placed best-fit, 64-byte aligned. A value read
 *   last by a purely elementwise kernel that stores one result of the same
 *   size and element type may hand its buffer to that result (in place); so may a scatter's base to its
 *   result (an embedding's gradient, zeros scattered into, was a copy of the whole table each step).
 * - the input of a conv whose result only a depthwise conv reads lives until that conv's kernel (the two
 *   may run as one call, extend_for_pairs).
 * - symbolic dims are planned at their upper bound.
 * - a concatenate whose parts lie one after another in its result (every dim before the axis is 1) and
 *   that is the only concatenate reading each of them is planned as one buffer from its first stored part's
 *   kernel on (its FUSED parts are computed into it by its own kernel): each part is written in place inside it, and codegen's copy of a part onto itself is
 *   no copy at all (kir.c). The SPPF block, SqueezeNet's fire modules and FPN heads concatenate so. Not with
 *   run-time dims: the parts' offsets would follow them while the buffers keep the bounds' offsets. */

#define ALIGN 64

/* op classes are prims.def's fuse and inline columns */
static int reduction_op(pc_op op) { return pc_op_fuse_kind(op) == PC_FUSE_RED; }
static int elementwise_op(pc_op op) { return pc_op_fuse_kind(op) == PC_FUSE_ELEM; }

/* bytes of v with symbolic dims at their bound; -1 when a dim is unbounded */
static int64_t value_bytes(const pc_graph *g, const pc_value *v) {
  int64_t n = (int64_t)pc_dtype_size(v->type.dtype);
  for (int i = 0; i < v->type.rank; i++) {
    int64_t d = v->type.dims[i];
    if (PC_DIM_IS_SYM(d)) {
      int id = PC_DIM_SYM_ID(d);
      if (id >= g->n_syms || g->syms[id].hi == INT64_MAX) return -1;
      d = g->syms[id].hi;
    }
    n *= d;
  }
  return n;
}

static int64_t align_up(int64_t x) { return (x + ALIGN - 1) / ALIGN * ALIGN; }

/* kernel order: step of each node (-1 for constants), def/last step of each value */
typedef struct liveness {
  int *step, *def, *last, n_steps;
} liveness;

/* A conv whose result (after its group's elementwise epilogue) only a depthwise conv reads may run with it
 * as one call (codegen's conv-depthwise pairs): the first conv's input is then read until the depthwise
 * conv's results are written, and must not share their memory (the call refuses, and the two convs run
 * apart). Its life is extended to the depthwise conv's kernel; a chain that does not pair costs a little
 * workspace. */
static void extend_for_pairs(const pc_graph *g, liveness *L) {
  /* readers of each value; the input of each group's conv (a group holds one contraction: fuse.c) */
  int *readers = calloc((size_t)g->n_values + 1, sizeof(int)), *conv_in = malloc(sizeof(int) * (size_t)(g->n_groups + 1));
  if (!readers || !conv_in) return free(readers), free(conv_in);
  for (int k = 0; k < g->n_groups; k++) conv_in[k] = -1;
  for (int i = 0; i < g->n_nodes; i++) {
    const pc_node *n = g->nodes[i];
    for (int k = 0; !n->dead && k < n->n_in; k++) readers[n->in[k]->id]++;
    if (!n->dead && n->op == PC_OP_conv && n->group >= 0 && n->group < g->n_groups) conv_in[n->group] = n->in[0]->id;
  }
  for (int i = 0; i < g->n_nodes; i++) {
    const pc_node *b = g->nodes[i];
    if (b->dead || b->op != PC_OP_conv || b->n_in < 2 || b->in[0]->type.rank < 3) continue;
    const pc_value *mid = b->in[0];
    int64_t ch = mid->type.dims[1];
    const pc_node *prod = mid->producer;
    if (pc_attr_int(b, "groups", 1) != ch || ch < 2 || !prod || prod->group < 0 || prod->group >= g->n_groups ||
        readers[mid->id] != 1)
      continue;
    int x = conv_in[prod->group];
    if (x >= 0 && L->last[x] >= 0 && L->last[x] < L->step[i]) L->last[x] = L->step[i];
  }
  free(readers), free(conv_in);
}

static int liveness_build(const pc_graph *g, liveness *L) {
  L->step = malloc(sizeof(int) * (size_t)(g->n_nodes + 1));
  L->def = malloc(sizeof(int) * (size_t)(g->n_values + 1));
  L->last = malloc(sizeof(int) * (size_t)(g->n_values + 1));
  if (!L->step || !L->def || !L->last) return 0;
  int t = -1, prev = -2;
  for (int i = 0; i < g->n_nodes; i++) {
    const pc_node *n = g->nodes[i];
    if (n->op == PC_OP_constant || n->dead) {
      L->step[i] = -1;
      continue;
    }
    if (n->group < 0 || n->group != prev) t++;
    prev = n->group;
    L->step[i] = t;
  }
  L->n_steps = t + 1;
  for (int v = 0; v < g->n_values; v++) L->def[v] = L->last[v] = -1;
  for (int i = 0; i < g->n_nodes; i++) {
    const pc_node *n = g->nodes[i];
    if (n->dead) continue;
    for (int k = 0; k < n->n_out; k++) L->def[n->out[k]->id] = L->last[n->out[k]->id] = L->step[i];
    for (int k = 0; k < n->n_in; k++)
      if (L->last[n->in[k]->id] < L->step[i]) L->last[n->in[k]->id] = L->step[i];
  }
  extend_for_pairs(g, L);
  return 1;
}

static void liveness_free(liveness *L) { free(L->step), free(L->def), free(L->last); }

/* ---------------------------------------------------------------- storage classes */

static void classify(pc_graph *g) {
  for (int i = 0; i < g->n_inputs; i++) g->inputs[i]->storage = PC_STORE_INPUT, g->inputs[i]->offset = 0;
  /* fusable[v]: every reader so far keeps v inline */
  char *inl = malloc((size_t)g->n_values + 1);
  /* by group: an attention call (two contractions, which only fuse.c's attention rule puts in one group) or a
   * weight gradient over columns read in place (fuse.c's columns rule: the dot with its columns' chain), whose
   * values inside stay in the call's registers and tiles */
  char *attn = calloc((size_t)g->n_groups + 1, 1);
  int *reads = calloc((size_t)g->n_values + 1, sizeof *reads); /* by value id: inputs of live nodes reading it */
  if (!inl || !attn || !reads) return free(inl), free(attn), free(reads);
  for (int i = 0; i < g->n_nodes; i++)
    for (int k = 0; !g->nodes[i]->dead && k < g->nodes[i]->n_in; k++) reads[g->nodes[i]->in[k]->id]++;
  memset(inl, 1, (size_t)g->n_values + 1);
  for (int i = 0, seen = -1; i < g->n_nodes; i++) {
    const pc_node *n = g->nodes[i];
    if (n->dead || n->group < 0 || n->group >= g->n_groups || pc_op_fuse_kind(n->op) != PC_FUSE_CONTRACT) continue;
    if (seen == n->group) attn[n->group] = 1;
    seen = n->group;
    pc_columns m;
    if (pc_columns_grouped(g, n, &m)) attn[n->group] = 1;
  }
  for (int i = 0; i < g->n_nodes; i++) {
    const pc_node *n = g->nodes[i];
    for (int k = 0; !n->dead && k < n->n_in; k++) {
      const pc_value *v = n->in[k];
      const pc_node *p = v->producer;
      int same = p && p->group >= 0 && p->group == n->group;
      int table = n->op == PC_OP_gather && k == 0; /* fused in by fuse.c: read in place (primc_k_gather_strided) */
      /* a part only the concatenate reads: computed into the result by the part's kernel (kir.c), not twice */
      int part = n->op == PC_OP_concatenate && reads[v->id] == 1;
      if (!same || !(pc_op_is_inline(n->op) || reduction_op(n->op) || table || part || attn[n->group])) inl[v->id] = 0;
    }
  }
  for (int i = 0; i < g->n_nodes; i++) {
    const pc_node *n = g->nodes[i];
    for (int k = 0; !n->dead && k < n->n_out; k++) {
      pc_value *v = n->out[k];
      v->offset = 0;
      if (n->op == PC_OP_constant) v->storage = PC_STORE_CONST;
      else if (pc_value_is_output(g, v)) v->storage = PC_STORE_OUTPUT;
      else if (n->group >= 0 && (pc_op_is_inline(n->op) || attn[n->group]) && n->n_out == 1 && inl[v->id])
        v->storage = PC_STORE_FUSED;
      else v->storage = PC_STORE_WORKSPACE;
    }
  }
  free(inl), free(attn), free(reads);
}

/* ---------------------------------------------------------------- concatenations in place */

/* in_cat[v]: index + 1 of the concatenate node whose buffer part v is placed in, 0 for none */
static int cat_static(const pc_graph *g, const pc_value *v) { return value_bytes(g, v) >= 0 && pc_type_is_static(&v->type); }

static int *cat_parts(const pc_graph *g) {
  int *in_cat = calloc((size_t)g->n_values + 1, sizeof *in_cat), *seen = calloc((size_t)g->n_values + 1, sizeof *seen);
  if (!in_cat || !seen) return free(in_cat), free(seen), NULL;
  for (int i = 0; i < g->n_nodes; i++) { /* values read by more than one concatenate: in none */
    const pc_node *n = g->nodes[i];
    for (int k = 0; !n->dead && n->op == PC_OP_concatenate && k < n->n_in; k++) seen[n->in[k]->id]++;
  }
  for (int i = 0; i < g->n_nodes; i++) {
    const pc_node *n = g->nodes[i];
    if (n->dead || n->op != PC_OP_concatenate || n->n_in < 2) continue;
    const pc_value *y = n->out[0];
    /* with run-time dims a part's offset in the result would follow them: the program at the bounds runs */
    int axis = (int)pc_attr_int(n, "axis", 0), ok = y->storage == PC_STORE_WORKSPACE && cat_static(g, y) && !g->run_time_dims;
    for (int d = 0; ok && d < axis; d++) ok = y->type.dims[d] == 1;
    for (int k = 0; ok && k < n->n_in; k++) { /* a FUSED part is computed into the result by the part's kernel */
      const pc_value *x = n->in[k];
      ok = x->storage == PC_STORE_FUSED ||
           (x->storage == PC_STORE_WORKSPACE && x->producer && seen[x->id] == 1 && cat_static(g, x) &&
            x->type.dtype == y->type.dtype && !in_cat[x->id]);
      for (int j = 0; ok && j < k; j++) ok = n->in[j] != x;
    }
    for (int k = 0; ok && k < n->n_in; k++)
      if (n->in[k]->storage == PC_STORE_WORKSPACE) in_cat[n->in[k]->id] = i + 1;
  }
  free(seen);
  return in_cat;
}

/* whether concatenate node i (nd) has parts planned inside its buffer (its FUSED parts are computed into it) */
static int cat_has_parts(const int *in_cat, const pc_node *nd, int i) {
  for (int k = 0; k < nd->n_in; k++)
    if (in_cat[nd->in[k]->id] == i + 1) return 1;
  return 0;
}

/* bytes from the start of concatenate cat's result to part v (0 for the result itself) */
static int64_t part_offset(const pc_graph *g, const pc_node *cat, const pc_value *v) {
  int64_t off = 0;
  for (int k = 0; k < cat->n_in && cat->in[k] != v; k++) off += value_bytes(g, cat->in[k]);
  return cat->out[0] == v ? 0 : off;
}

/* ---------------------------------------------------------------- placement */

typedef struct slot {
  pc_value *v;
  int64_t off, size;
  int def, last, donated;
  int whole; /* a concatenate's buffer with its parts: its last reader may read a part, never give it away */
} slot;

/* nodes [*lo, *hi) of kernel t (constants may sit between them) */
static void kernel_range(const pc_graph *g, const liveness *L, int from, int t, int *lo, int *hi) {
  int i = from;
  while (i > 0 && (L->step[i - 1] == t || L->step[i - 1] < 0)) i--;
  *lo = i;
  while (i < g->n_nodes && (L->step[i] == t || L->step[i] < 0)) i++;
  *hi = i;
}

static int in_kernel(const liveness *L, const pc_value *v, int t) {
  return v->producer && v->producer->id >= 0 && L->step[v->producer->id] == t;
}

/* May kernel t write w over u's buffer? Only when every element of w is
 * computed from u's element at the same index, after it is read: u is read
 * in t by elementwise prims only; every other prim of t is elementwise, u's
 * producer (a reduction or contraction that fills u first), or an index map of
 * something outside t (a bias broadcast); and w is t's only other stored result. A reshape of u counts as
 * elementwise: it reads u's element at w's linear index. */
static int inplace_ok(const pc_graph *g, const liveness *L, int lo, int hi, int t, const pc_value *u, const pc_value *w) {
  /* a scatter (a kernel alone) starts from a copy of its base: over the base, that copy is none
   * (primc_k_scatter), unless the base is also its indices or updates */
  const pc_node *sc = w->producer;
  if (sc->op == PC_OP_scatter) return sc->in[0] == u && sc->in[1] != u && sc->in[2] != u;
  /* a reshape of u is u's bytes in the same order: w over u makes its kernel a copy onto itself (none, kir.c) */
  const pc_node *alias = w->producer->op == PC_OP_reshape && w->producer->in[0] == u ? w->producer : NULL;
  if (!elementwise_op(w->producer->op) && !alias) return 0;
  for (int i = lo; i < hi; i++) {
    const pc_node *n = g->nodes[i];
    if (L->step[i] != t || n == u->producer) continue;
    int elem = elementwise_op(n->op) || n == alias;
    if (!elem && !(pc_op_is_inline(n->op) && n->n_in == 1 && !in_kernel(L, n->in[0], t))) return 0;
    for (int k = 0; k < n->n_in; k++)
      if (n->in[k] == u && !elem) return 0;
    for (int k = 0; k < n->n_out; k++) {
      int stored = n->out[k]->storage == PC_STORE_WORKSPACE || n->out[k]->storage == PC_STORE_OUTPUT;
      if (stored && n->out[k] != w && n->out[k] != u) return 0;
    }
  }
  return 1;
}

/* A buffer whose value is read last by kernel t, of v's size and element type, that v may take over.
 * by_last[t] chains the slots read last by kernel t (through next_last), earliest first, so the search
 * looks at those only, not at every live slot (an unrolled RNN keeps thousands live). */
static int donor(const pc_graph *g, const liveness *L, slot *s, const int *by_last, const int *next_last,
                 const slot *v, int node) {
  int lo, hi;
  kernel_range(g, L, node, v->def, &lo, &hi);
  for (int j = v->def >= 0 ? by_last[v->def] : -1; j >= 0; j = next_last[j]) {
    if (s[j].donated || s[j].whole || s[j].size != v->size) continue;
    if (pc_dtype_size(s[j].v->type.dtype) != pc_dtype_size(v->v->type.dtype)) continue;
    if (inplace_ok(g, L, lo, hi, v->def, s[j].v, v->v)) return j;
  }
  return -1;
}

/* best fit among the gaps left by the slots live at v->def; act lists them by offset */
static int64_t best_fit(const slot *s, const int *act, int na, const slot *v) {
  int64_t best = -1, best_gap = INT64_MAX, end = 0;
  for (int a = 0; a < na; a++) {
    const slot *l = &s[act[a]];
    if (l->last < v->def || (l->donated && l->last == v->def)) continue;
    int64_t gap = l->off - end;
    if (gap >= v->size && gap < best_gap) best = end, best_gap = gap;
    if (l->off + align_up(l->size) > end) end = l->off + align_up(l->size);
  }
  return best >= 0 ? best : end;
}

/* slot n into act, which stays sorted by offset (a sort per placement was the plan's cost with thousands live) */
static int act_insert(const slot *s, int *act, int na, int n) {
  int lo = 0, hi = na;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (s[act[mid]].off <= s[n].off) lo = mid + 1;
    else hi = mid;
  }
  memmove(act + lo + 1, act + lo, sizeof *act * (size_t)(na - lo));
  act[lo] = n;
  return na + 1;
}

static pc_status place(pc_graph *g, const liveness *L) {
  int n = 0, na = 0;
  slot *s = calloc((size_t)g->n_values + 1, sizeof *s);
  /* the slots still live: values come in kernel order, so one that died stays dead, and the searches
   * below look at these only (over every slot placed so far they were quadratic: a 27x27x27 MaxPool's
   * 40,000 prims took 18 s under the sanitizers) */
  int *act = calloc((size_t)g->n_values + 1, sizeof *act);
  int *next_last = malloc(sizeof(int) * ((size_t)g->n_values + 1));
  int *by_last = malloc(sizeof(int) * ((size_t)g->n_nodes + 1)), *tail = malloc(sizeof(int) * ((size_t)g->n_nodes + 1));
  if (!s || !act || !next_last || !by_last || !tail) {
    free(s), free(act), free(next_last), free(by_last), free(tail);
    return pc_fail(g, PC_ERR_NOMEM, "out of memory");
  }
  for (int t = 0; t <= g->n_nodes; t++) by_last[t] = tail[t] = -1;
  int64_t top = 0;
  /* cat_off[node]: the offset of that concatenate's buffer once its first part placed it, else -1 */
  int *in_cat = cat_parts(g);
  int64_t *cat_off = malloc(sizeof(int64_t) * ((size_t)g->n_nodes + 1));
  if (!in_cat || !cat_off) {
    free(s), free(act), free(next_last), free(by_last), free(tail), free(in_cat), free(cat_off);
    return pc_fail(g, PC_ERR_NOMEM, "out of memory");
  }
  for (int i = 0; i <= g->n_nodes; i++) cat_off[i] = -1;
  /* values in kernel order, as the nodes list them */
  for (int i = 0; i < g->n_nodes; i++) {
    pc_node *nd = g->nodes[i];
    for (int k = 0; !nd->dead && k < nd->n_out; k++) {
      pc_value *v = nd->out[k];
      if (v->storage != PC_STORE_WORKSPACE) continue;
      int64_t bytes = value_bytes(g, v);
      if (bytes < 0) {
        free(s), free(act), free(next_last), free(by_last), free(tail), free(in_cat), free(cat_off);
        return pc_node_fail(g, nd, PC_ERR_UNSUPPORTED, "result has an unbounded symbolic dim: bound it (--dim NAME=LO..HI)");
      }
      /* a part of a concatenate planned in place, or that concatenate: inside its one buffer */
      int ci = in_cat[v->id] ? in_cat[v->id] - 1 : nd->op == PC_OP_concatenate && cat_has_parts(in_cat, nd, i) ? i : -1;
      const pc_node *cat = ci >= 0 ? g->nodes[ci] : NULL;
      if (cat && cat_off[ci] >= 0) {
        v->offset = cat_off[ci] + part_offset(g, cat, v);
        continue;
      }
      slot *me = &s[n];
      *me = (slot){v, 0, bytes, L->def[v->id], L->last[v->id], 0, 0};
      int64_t part = 0;
      if (cat) { /* its first part: the whole buffer, live until the last reader of it or of a part */
        const pc_value *y = cat->out[0];
        *me = (slot){(pc_value *)y, 0, value_bytes(g, y), L->def[v->id], L->last[y->id], 0, 1};
        part = part_offset(g, cat, v);
        for (int k = 0; k < cat->n_in; k++)
          if (L->last[cat->in[k]->id] > me->last) me->last = L->last[cat->in[k]->id];
      }
      int kept = 0;
      for (int a = 0; a < na; a++)
        if (s[act[a]].last >= me->def) act[kept++] = act[a];
      na = kept;
      int d = cat ? -1 : donor(g, L, s, by_last, next_last, me, i);
      if (d >= 0) {
        s[d].donated = 1;
        me->off = s[d].off;
      } else {
        me->off = best_fit(s, act, na, me);
      }
      na = act_insert(s, act, na, n);
      next_last[n] = -1;
      if (me->last >= 0 && me->last <= g->n_nodes) {
        if (tail[me->last] >= 0) next_last[tail[me->last]] = n;
        else by_last[me->last] = n;
        tail[me->last] = n;
      }
      v->offset = me->off + part;
      if (cat) cat_off[ci] = me->off;
      if (me->off + align_up(me->size) > top) top = me->off + align_up(me->size);
      n++;
    }
  }
  g->workspace_size = top;
  free(s), free(act), free(next_last), free(by_last), free(tail), free(in_cat), free(cat_off);
  return PC_OK;
}

/* what the compiled model holds while it runs, against g->mem_limit: a 200-byte model can ask for a
 * 4 GB tensor, and the standalone driver would only find out when the kernel touches it */
static pc_status check_limit(pc_graph *g) {
  int64_t weights = 0, io = 0, lim = g->mem_limit;
  if (lim <= 0) return PC_OK;
  for (int i = 0; i < g->n_nodes; i++)
    if (!g->nodes[i]->dead && g->nodes[i]->op == PC_OP_constant) weights += value_bytes(g, g->nodes[i]->out[0]);
  for (int i = 0; i < g->n_inputs; i++) io += value_bytes(g, g->inputs[i]);
  for (int i = 0; i < g->n_outputs; i++) io += value_bytes(g, g->outputs[i]);
  int64_t need = g->workspace_size + weights + io;
  if (need <= lim) return PC_OK;
  return pc_fail(g, PC_ERR_NOMEM,
                 "the compiled model needs %lld bytes at run time (workspace %lld, weights %lld, inputs and "
                 "outputs %lld), over the memory limit of %lld bytes (--mem-limit)",
                 (long long)need, (long long)g->workspace_size, (long long)weights, (long long)io, (long long)lim);
}

pc_status pc_pass_memplan(pc_graph *g) {
  if (g->status != PC_OK) return g->status;
  liveness L;
  if (!liveness_build(g, &L)) {
    liveness_free(&L);
    return pc_fail(g, PC_ERR_NOMEM, "out of memory");
  }
  classify(g);
  pc_status s = place(g, &L);
  liveness_free(&L);
  return s == PC_OK ? check_limit(g) : s;
}

/* ---------------------------------------------------------------- report */

static void put_ref(pc_strbuf *b, const pc_value *v) {
  if (v->name) pc_strbuf_fmt(b, "%%%s", v->name);
  else pc_strbuf_fmt(b, "%%%d", v->id);
}

/* prims of kernel t, comma-separated, cut at about 40 characters */
static void put_ops(pc_strbuf *b, const pc_graph *g, const liveness *L, int t) {
  size_t start = b->len;
  int first = 1;
  for (int i = 0; i < g->n_nodes; i++) {
    if (L->step[i] != t) continue;
    if (b->s && b->len - start > 40) {
      pc_strbuf_fmt(b, ",...");
      break;
    }
    pc_strbuf_fmt(b, "%s%s", first ? "" : ",", pc_prim(g->nodes[i]->op)->name);
    first = 0;
  }
  while (b->s && b->len - start < 44) pc_strbuf_fmt(b, " ");
}

/* donor[v]: v handed its buffer to a result of its last kernel (counted once there) */
static char *donors(const pc_graph *g, const liveness *L) {
  char *d = calloc((size_t)g->n_values + 1, 1);
  for (int i = 0; d && i < g->n_values; i++) {
    const pc_value *u = g->values[i];
    for (int j = 0; u->storage == PC_STORE_WORKSPACE && j < g->n_values; j++) {
      const pc_value *w = g->values[j];
      if (j != i && w->storage == PC_STORE_WORKSPACE && w->offset == u->offset && L->def[j] == L->last[i] &&
          L->def[i] <= L->def[j] && value_bytes(g, w) == value_bytes(g, u))
        d[i] = 1;
    }
  }
  return d;
}

static int live_at(const pc_graph *g, const liveness *L, const char *donor, int v, int t) {
  return g->values[v]->storage == PC_STORE_WORKSPACE && L->def[v] >= 0 && L->def[v] <= t &&
         (t < L->last[v] || (t == L->last[v] && !donor[v]));
}

static int64_t live_bytes(const pc_graph *g, const liveness *L, const char *donor, int t) {
  int64_t sum = 0;
  for (int v = 0; v < g->n_values; v++)
    if (live_at(g, L, donor, v, t)) sum += value_bytes(g, g->values[v]);
  return sum;
}

char *pc_memplan_report(const pc_graph *g) {
  pc_strbuf b = {0};
  liveness L;
  if (!liveness_build(g, &L)) {
    liveness_free(&L);
    return NULL;
  }
  char *donor = donors(g, &L);
  if (!donor) {
    liveness_free(&L);
    return NULL;
  }
  pc_strbuf_fmt(&b, "kernel  %-44s  %12s\n", "prims", "live bytes");
  int peak_t = -1;
  int64_t peak = -1;
  for (int t = 0; t < L.n_steps; t++) {
    int64_t lb = live_bytes(g, &L, donor, t);
    pc_strbuf_fmt(&b, "%6d  ", t);
    put_ops(&b, g, &L, t);
    pc_strbuf_fmt(&b, "  %12lld\n", (long long)lb);
    if (lb > peak) peak = lb, peak_t = t;
  }
  if (peak_t >= 0) {
    pc_strbuf_fmt(&b, "peak %lld bytes live at kernel %d:", (long long)peak, peak_t);
    for (int v = 0; v < g->n_values; v++) {
      const pc_value *x = g->values[v];
      if (!live_at(g, &L, donor, v, peak_t)) continue;
      pc_strbuf_fmt(&b, " ");
      put_ref(&b, x);
      pc_strbuf_fmt(&b, " (%lld @ %lld)", (long long)value_bytes(g, x), (long long)x->offset);
    }
    pc_strbuf_fmt(&b, "\n");
  }
  pc_strbuf_fmt(&b, "workspace %lld bytes\n", (long long)g->workspace_size);
  free(donor);
  liveness_free(&L);
  return pc_strbuf_done(&b);
}
