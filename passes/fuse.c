/* passes/fuse.c: groups prims into kernels (node->group): vertical, reduction and contraction-epilogue fusion. */
#include "passes/passes.h"
#include "passes/rewrite.h"
#include "runtime/primc_rt.h"

#include <stdlib.h>
#include <string.h>

/* The model (DESIGN.md, "Fusion and the kernel IR"): a group is one kernel.
 * Elementwise prims and movement prims (index maps) fuse freely with their
 * neighbours; a group may hold reductions when they all reduce the same axes
 * of the same shape (softmax, layer norm: one pass over the row); a group with
 * a contraction (dot_general, conv) holds it plus an elementwise epilogue over
 * its result's shape; gather, scatter, sort, topk, fft, nonzero, random, cumsum
 * and bitcast stand alone. Each prim's class is the fuse column of
 * ir/prims.def. Groups are greedy unions along producer->consumer
 * edges in topological order, refused when the union would break a rule or
 * make the group graph cyclic. Cheap index maps of constants and inputs
 * (broadcast_in_dim of a bias, iota) are cloned per consumer first, so each
 * consumer recomputes them instead of reading a materialized copy. */

static const char *opname(const pc_node *n) { return pc_prim(n->op)->name; }

/* ---------------------------------------------------------------- cloning cheap producers */

/* an index map of something already in memory: recomputing it is a load */
static int cheap(const pc_node *n) {
  if (n->op == PC_OP_iota) return 1;
  if (pc_op_fuse_kind(n->op) != PC_FUSE_MOVE || n->n_in != 1 || n->op == PC_OP_pad) return 0;
  const pc_node *p = n->in[0]->producer;
  return !p || p->op == PC_OP_constant;
}

/* a broadcast to more elements than its operand: each reader reading the operand in place beats one copy of
 * the larger result in memory (an attention mask [B, 1, 1, S] that every layer adds to its [B, H, S, S] scores) */
static int expanding_broadcast(const pc_node *n) {
  return n->op == PC_OP_broadcast_in_dim && pc_type_numel(&n->out[0]->type) > pc_type_numel(&n->in[0]->type);
}

/* A value a broadcast's copy widens, itself computed by elementwise prims and index maps at a sixteenth of the
 * broadcast's size or less (a layer norm's sigma recomputed for the backward): the copy gets its own copy of that
 * chain (at most 8 deep), so that the kernel reading the broadcast can compute it inline instead of sharing a
 * value that another kernel would then store broadcast. Graphs with recomputed prims only (training steps). */
static pc_value *small_chain_copy(pc_graph *g, pc_value *v, int64_t wide_numel, int depth) {
  const pc_node *p = v->producer;
  int kind = p ? pc_op_fuse_kind(p->op) : PC_FUSE_CONST;
  if (!g->remat_prims || depth >= 8 || !p || p->n_out != 1 || p->n_in > 8 || (kind != PC_FUSE_ELEM && kind != PC_FUSE_MOVE) ||
      pc_type_numel(&v->type) * 16 > wide_numel || pc_type_numel(&v->type) == 1)
    return v; /* a computed scalar stays one kernel's, its readers reading it in place (edge_rule) */
  pc_value *in[8];
  for (int k = 0; k < p->n_in; k++) in[k] = small_chain_copy(g, p->in[k], wide_numel, depth + 1);
  pc_node *c = pc_node_add(g, p->op, in, p->n_in, p->attrs, p->n_attrs);
  if (!c) return v;
  c->origin = p->origin;
  return c->out[0];
}

/* gives every consumer after the first its own copy of a cheap node (with wide, of an expanding broadcast too) */
static pc_status clone_cheap(pc_graph *g, int wide) {
  pcp_sweep s;
  unsigned char *seen = calloc((size_t)g->n_values + 1, 1); /* by value id: a use is taken */
  if (!seen) return pc_fail(g, PC_ERR_NOMEM, "out of memory");
  if (pcp_sweep_begin(g, &s) != PC_OK) return free(seen), g->status;
  for (int i = 0; i < g->n_outputs; i++) seen[g->outputs[i]->id] = 1;
  for (int j = 0; j < s.n0 && g->status == PC_OK; j++) {
    pc_node *c = pcp_sweep_visit(&s, j);
    for (int k = 0; k < c->n_in && !c->dead; k++) {
      pc_node *p = c->in[k]->producer;
      /* a clone lands before c, where its operands (defined before p) are defined */
      if (!p || p->dead || p->n_out != 1 || p->id >= s.n0 || !(cheap(p) || (wide && expanding_broadcast(p)))) continue;
      if (!seen[c->in[k]->id]) {
        seen[c->in[k]->id] = 1;
        continue;
      }
      /* a broadcast's one operand, copied first: nodes built now land before c in build order */
      pc_value *bin = expanding_broadcast(p) ? small_chain_copy(g, p->in[0], pc_type_numel(&p->out[0]->type), 0) : NULL;
      pc_node *cl = pc_node_add(g, p->op, bin ? &bin : p->in, p->n_in, p->attrs, p->n_attrs);
      if (!cl) break;
      cl->origin = p->origin;
      c->in[k] = cl->out[0];
    }
  }
  free(seen);
  return pcp_sweep_end(&s);
}

/* ---------------------------------------------------------------- groups as union-find over node positions */

typedef struct fuser {
  pc_graph *g;
  pcp_users users;
  int n;
  int *parent, *next, *tail, *maxpos;
  int *contract, *red; /* per root: a member contraction / reduction position, or -1 */
  unsigned char *attn; /* per root: one call closed to other unions: CALL_ATTENTION (pc_attention_match) or
                        * CALL_COLUMNS (pc_columns_match) */
  int *size;           /* per root: members */
  int64_t *paths;      /* scratch of expanded_size, per node */
  int *members;        /* scratch of expanded_size: PC_FUSE_MAX_PRIMS positions */
  int *mark, stamp;
  unsigned char *is_out; /* by value id: a graph output */
  int *stack;
  const char ***reason; /* per node, per operand */
} fuser;

static int find(fuser *F, int i) {
  while (F->parent[i] != i) i = F->parent[i] = F->parent[F->parent[i]];
  return i;
}

static int grp(fuser *F, const pc_node *n) { return find(F, n->id); }

static void unite(fuser *F, int a, int b) {
  a = find(F, a), b = find(F, b);
  if (a == b) return;
  F->parent[b] = a;
  F->next[F->tail[a]] = b;
  F->tail[a] = F->tail[b];
  if (F->maxpos[b] > F->maxpos[a]) F->maxpos[a] = F->maxpos[b];
  if (F->contract[a] < 0) F->contract[a] = F->contract[b];
  if (F->red[a] < 0) F->red[a] = F->red[b];
  F->attn[a] |= F->attn[b];
  F->size[a] += F->size[b];
}

enum { CALL_ATTENTION = 1, CALL_COLUMNS = 2 };

#define FOR_MEMBERS(F, root, m) for (int m = (root); m >= 0; m = (F)->next[m])

/* ---------------------------------------------------------------- rules */

static int same_dims(const pc_type *a, const pc_type *b) {
  return a->rank == b->rank && memcmp(a->dims, b->dims, sizeof(int64_t) * (size_t)a->rank) == 0;
}

static const char *type_str(pc_graph *g, const pc_type *t) {
  char buf[160];
  int o = snprintf(buf, sizeof buf, "%s[", pc_dtype_name(t->dtype));
  for (int i = 0; i < t->rank && o < 140; i++) o += snprintf(buf + o, sizeof buf - (size_t)o, i ? ",%lld" : "%lld", (long long)t->dims[i]);
  snprintf(buf + o, sizeof buf - (size_t)o, "]");
  return pc_strdup(g, buf);
}

/* a gather's table that is an index map of a constant or input (ONNX Gather's broadcast):
 * in the gather's kernel it is read in place instead of materialized (for an embedding
 * table that copy is vocabulary x sequence x width) */
static int gather_reads_in_place(const pc_node *p, const pc_node *c) {
  return c->op == PC_OP_gather && c->in[0]->producer == p && c->in[1]->producer != p && p->op != PC_OP_iota && cheap(p);
}

/* a reshape whose result is a graph output that nothing else reads: merging dims or not, its kernel loops over
 * the operand's shape and stores in the same row-major order (codegen/kir.c, via_operand), so the loop that
 * computes the operand writes the output directly (a ConvTranspose tile transpose, a final Flatten) */
static int reshape_is_last(const pc_graph *g, const pc_node *c) {
  const pc_value *v = c->out[0];
  int out = 0;
  for (int i = 0; i < g->n_outputs; i++) out |= g->outputs[i] == v;
  for (int i = 0; out && i < g->n_nodes; i++)
    for (int k = 0; !g->nodes[i]->dead && k < g->nodes[i]->n_in; k++)
      if (g->nodes[i]->in[k] == v) return 0;
  return out;
}

/* the rule for the edge alone, from the two prims' kinds */
static const char *edge_rule(pc_graph *g, const pc_node *p, const pc_node *c) {
  pc_fuse_kind kp = pc_op_fuse_kind(p->op), kc = pc_op_fuse_kind(c->op);
  if (gather_reads_in_place(p, c)) return NULL;
  if (kp == PC_FUSE_ALONE) return pc_strfmt(g, "%s is kept alone", opname(p));
  if (kc == PC_FUSE_ALONE) return pc_strfmt(g, "%s is kept alone", opname(c));
  if (kc == PC_FUSE_CONTRACT) return pc_strfmt(g, "%s reads its operands from memory (no prologue fusion)", opname(c));
  if (kp == PC_FUSE_CONTRACT && kc != PC_FUSE_ELEM) return pc_strfmt(g, "only elementwise epilogues fuse into %s", opname(p));
  if (kp != PC_FUSE_CONST && c->op == PC_OP_broadcast_in_dim && c->in[0]->type.rank == 0 && expanding_broadcast(c))
    return pc_strdup(g, "a computed scalar is broadcast in the kernels reading it, not stored at their size");
  if (c->op == PC_OP_reshape && (kp == PC_FUSE_ELEM || kp == PC_FUSE_MOVE) && !pc_reshape_splits(c) &&
      !reshape_is_last(g, c))
    return pc_strdup(g, "reshape merges dims: not an affine index map of its operand");
  return NULL;
}

static int red_axes(const pc_node *n, int64_t *axes) {
  int len = 0;
  const int64_t *a = pc_attr_ints(n, "axes", &len);
  if (a) {
    memcpy(axes, a, sizeof *a * (size_t)len);
    return len;
  }
  axes[0] = pc_attr_int(n, "axis", 0);
  return 1;
}

/* same reduced axes of the same shape */
static int same_reduction(const pc_node *a, const pc_node *b) {
  int64_t xa[PC_MAX_RANK], xb[PC_MAX_RANK];
  int na = red_axes(a, xa), nb = red_axes(b, xb);
  return na == nb && memcmp(xa, xb, sizeof *xa * (size_t)na) == 0 && same_dims(&a->in[0]->type, &b->in[0]->type);
}

static const char *reduction_clash(fuser *F, int ga, int gb) {
  pc_node **N = F->g->nodes;
  int r = F->red[ga] >= 0 ? F->red[ga] : F->red[gb];
  if (r < 0) return NULL;
  for (int pass = 0; pass < 2; pass++)
    FOR_MEMBERS(F, pass ? gb : ga, m) {
      if (pc_op_fuse_kind(N[m]->op) != PC_FUSE_RED || same_reduction(N[r], N[m])) continue;
      return pc_strfmt(F->g, "%s over %s and %s over %s reduce different spaces", opname(N[r]),
                       type_str(F->g, &N[r]->in[0]->type), opname(N[m]), type_str(F->g, &N[m]->in[0]->type));
    }
  return NULL;
}

/* member m of the union of ga and gb is a smaller elementwise or index-map value (a layer norm's per-row scale
 * recomputed for the backward) read only inside the union and not a graph output: the epilogue's loop computes
 * it inline where it reads it, through the broadcast that widens it, and nothing stores it */
static int inline_in_epilogue(fuser *F, int m, int ga, int gb, const pc_type *t) {
  const pc_node *n = F->g->nodes[m];
  int kind = pc_op_fuse_kind(n->op);
  if ((kind != PC_FUSE_ELEM && kind != PC_FUSE_MOVE) || n->n_out != 1 || F->is_out[n->out[0]->id] ||
      pc_type_numel(&n->out[0]->type) >= pc_type_numel(t))
    return 0;
  const pc_value *v = n->out[0];
  for (int u = F->users.start[v->id]; u < F->users.start[v->id + 1]; u++) {
    int gu = grp(F, F->users.list[u]);
    if (gu != ga && gu != gb) return 0;
  }
  return 1;
}

/* a contraction's group: the contraction plus prims over its result's shape (and smaller values computed inline
 * in its epilogue), none feeding it */
static const char *contraction_clash(fuser *F, int ga, int gb) {
  pc_node **N = F->g->nodes;
  int ca = F->contract[ga], cb = F->contract[gb];
  if (ca < 0 && cb < 0) return NULL;
  if (ca >= 0 && cb >= 0) return pc_strfmt(F->g, "a kernel holds one contraction (%s and %s)", opname(N[ca]), opname(N[cb]));
  if (F->red[ga] >= 0 || F->red[gb] >= 0) return pc_strdup(F->g, "a contraction's epilogue takes no reductions");
  const pc_node *anchor = N[ca >= 0 ? ca : cb];
  const pc_type *t = &anchor->out[0]->type;
  for (int pass = 0; pass < 2; pass++)
    FOR_MEMBERS(F, pass ? gb : ga, m) {
      if (N[m] == anchor || pc_op_fuse_kind(N[m]->op) == PC_FUSE_CONST) continue;
      if (!same_dims(&N[m]->out[0]->type, t) && !inline_in_epilogue(F, m, ga, gb, t))
        return pc_strfmt(F->g, "%s is over %s, not the %s result's %s", opname(N[m]), type_str(F->g, &N[m]->out[0]->type),
                         opname(anchor), type_str(F->g, t));
    }
  for (int k = 0; k < anchor->n_in; k++) {
    const pc_node *p = anchor->in[k]->producer;
    int gp = p ? grp(F, p) : -1;
    if (p && (gp == ga || gp == gb) && p != anchor)
      return pc_strfmt(F->g, "%s feeds the %s (no prologue fusion)", opname(p), opname(anchor));
  }
  return NULL;
}

/* A node of a third group on a path from group a to group b, or NULL: fusing a
 * and b would then need that group both before and after the kernel. The walk
 * is over groups, not nodes: two groups can each be convex and still feed each
 * other. Nodes after `limit` (the node being decided) are still alone and
 * cannot lead back to it, so the walk stops there. */
static const pc_node *path_between(fuser *F, int a, int b, int limit) {
  pc_node **N = F->g->nodes;
  int sp = 0;
  F->stamp++;
  F->stack[sp++] = a;
  F->mark[a] = F->stamp;
  while (sp > 0) {
    int x = F->stack[--sp];
    FOR_MEMBERS(F, x, m) {
      for (int k = 0; k < N[m]->n_out; k++) {
        const pc_value *v = N[m]->out[k];
        for (int u = F->users.start[v->id]; u < F->users.start[v->id + 1]; u++) {
          int w = F->users.list[u]->id, gw = find(F, w);
          if (w > limit || gw == a) continue;
          if (gw == b) {
            if (x != a) return N[m];
            continue;
          }
          if (F->mark[gw] == F->stamp) continue;
          F->mark[gw] = F->stamp;
          F->stack[sp++] = gw;
        }
      }
    }
  }
  return NULL;
}

static int cmp_desc(const void *a, const void *b) { return *(const int *)b - *(const int *)a; }

/* Prims the kernel of groups a and b together would instantiate: codegen inlines a value into every
 * reader in its kernel, so a prim counts once per path from it to a stored result; x2 = x1 * x1,
 * x3 = x2 * x2, ... doubles at every step. Saturates at PC_FUSE_MAX_EXPANDED + 1. */
static int64_t expanded_size(fuser *F, int a, int b) {
  pc_node **N = F->g->nodes;
  int n = 0;
  F->stamp++;
  for (int pass = 0; pass < 2; pass++)
    FOR_MEMBERS(F, pass ? b : a, m) F->members[n++] = m, F->mark[m] = F->stamp;
  qsort(F->members, (size_t)n, sizeof *F->members, cmp_desc); /* readers before what they read */
  int64_t total = 0, cap = PC_FUSE_MAX_EXPANDED + 1;
  for (int i = 0; i < n; i++) {
    const pc_node *x = N[F->members[i]];
    int64_t paths = 0;
    for (int k = 0; k < x->n_out; k++) {
      const pc_value *v = x->out[k];
      int stored = F->is_out[v->id] || pcp_users_count(&F->users, v) == 0;
      for (int u = F->users.start[v->id]; u < F->users.start[v->id + 1]; u++) {
        int w = F->users.list[u]->id;
        if (F->mark[w] == F->stamp) paths += F->paths[w];
        else stored = 1;
      }
      paths += stored;
    }
    F->paths[x->id] = paths < cap ? paths : cap;
    total += F->paths[x->id];
    if (total >= cap) return cap;
  }
  return total;
}

static const char *value_ref(pc_graph *g, const pc_value *v) {
  return v->name ? pc_strfmt(g, "%%%s", v->name) : pc_strfmt(g, "%%%d", v->id);
}

/* NULL when p's group and c's group may become one kernel, else why not */
static const char *fuse_refusal(fuser *F, const pc_node *p, const pc_node *c) {
  const char *r = edge_rule(F->g, p, c);
  /* a gradient's prim joining a forward kernel would be computed there and its result held until the backward
   * reads it (a weight gradient's columns, GELU's derivative terms); apart, it runs in the backward, reading
   * forward values that are stored anyway (passes/remat.c recomputes the cheap ones there) */
  if (!r && c->backward && !p->backward) r = "a gradient's prim runs in the backward, not in a forward kernel";
  int gp = grp(F, p), gc = grp(F, c);
  if ((F->attn[gp] | F->attn[gc]) & CALL_ATTENTION) return "attention runs as one call (primc_k_attention)";
  if ((F->attn[gp] | F->attn[gc]) & CALL_COLUMNS)
    return "a weight gradient over columns read in place runs as one call (primc_k_dot_cols)";
  /* codegen walks a kernel's expressions recursively, and the group walks below are linear in its
   * size: a bound keeps both from growing with the model (a chain of 10,000 prims) */
  if (!r && F->size[gp] + F->size[gc] > PC_FUSE_MAX_PRIMS)
    r = pc_strfmt(F->g, "a kernel holds at most %d prims", PC_FUSE_MAX_PRIMS);
  if (!r && expanded_size(F, gp, gc) > PC_FUSE_MAX_EXPANDED)
    r = pc_strfmt(F->g, "the kernel's expressions would repeat shared values past %d prims (store one instead)",
                  PC_FUSE_MAX_EXPANDED);
  if (!r) r = contraction_clash(F, gp, gc);
  if (!r) r = reduction_clash(F, gp, gc);
  if (r) return r;
  const pc_node *x = path_between(F, gp, gc, c->id);
  if (!x) x = path_between(F, gc, gp, c->id);
  if (x) return pc_strfmt(F->g, "a path runs through %s = %s outside both kernels", value_ref(F->g, x->out[0]), opname(x));
  return NULL;
}

/* reads per value id by live nodes (the matchers' uses); NULL with g failed when out of memory */
static int *value_uses(fuser *F) {
  int *uses = calloc((size_t)F->g->n_values + 1, sizeof *uses);
  if (!uses) return pc_fail(F->g, PC_ERR_NOMEM, "out of memory"), NULL;
  for (int v = 0; v < F->g->n_values; v++) uses[v] = pcp_users_count(&F->users, F->g->values[v]);
  return uses;
}

/* n and nodes become one group of call kind `kind`, closed to other unions, unless one of them is in a group of
 * more than itself already */
static void unite_call(fuser *F, const pc_node *n, const pc_node *const *nodes, int count, unsigned char kind) {
  int taken = F->size[find(F, n->id)] > 1;
  for (int j = 0; j < count; j++) taken |= F->size[find(F, nodes[j]->id)] > 1;
  if (taken) return;
  for (int j = 0; j < count; j++) unite(F, n->id, nodes[j]->id);
  F->attn[find(F, n->id)] = kind;
}

/* Each softmax(Q K^T * scale + mask) V chain (ir/attention.c) where the call pays on the target CPU (this one;
 * for a cross compile, as if it ran the plain C row)
 * (primc_attention_pays: enough queries) becomes one group before any other decision: codegen makes it one
 * primc_k_attention call, which never stores the Sq x Sk scores, and reads Q, K, V and the mask through
 * the transposes and head splits the chain took in. */
static pc_status attention_groups(fuser *F) {
  pc_graph *g = F->g;
  int *uses = value_uses(F);
  if (!uses) return g->status;
  pc_attention a;
  for (int i = 0; i < F->n; i++) {
    const pc_node *n = g->nodes[i];
    if (n->op != PC_OP_dot_general || !pc_attention_match(g, n, uses, &a)) continue;
    /* the one decision between the call and the stored-scores kernels (runtime/attention.c's tuning). With
     * run-time dims every build of the range must decide alike: as at sizes large enough to pay */
    const pc_type *st = &a.qk->out[0]->type;
    int64_t sq = g->run_time_dims ? INT64_MAX / 2 : st->dims[st->rank - 2];
    int row = g->foreign_cpu ? PRIMC_ATTENTION_ROW_GENERIC : primc_attention_row_active();
    if (primc_attention_pays_for(row, sq, st->dims[st->rank - 1])) unite_call(F, n, a.nodes, a.n_nodes, CALL_ATTENTION);
  }
  free(uses);
  return PC_OK;
}

/* Each conv weight gradient over gathered columns (ir/columns.c) becomes one group of the dot, the concatenate, its
 * slices and reshapes: codegen makes it one primc_k_dot_cols call, which packs the GEMM's B panels from the padded
 * input, so the columns (the input copied once per kernel tap: 58 MB a step for each of ResNet-18's first 3x3
 * convs at batch 8) are never stored; with the output gradient's transpose, which it packs A from, where that is
 * read by the dot alone, and the input's transpose and pad where the call reads the input unpadded
 * (pc_columns_reads_x). Host code alone has that call: not for a GPU. */
static pc_status columns_groups(fuser *F) {
  pc_graph *g = F->g;
  if (g->gpu) return PC_OK;
  int *uses = value_uses(F);
  if (!uses) return g->status;
  pc_columns m;
  for (int i = 0; i < F->n; i++) {
    const pc_node *n = g->nodes[i];
    if (n->op != PC_OP_dot_general || !pc_columns_match(g, n, uses, &m)) continue;
    unite_call(F, n, m.nodes, m.n_nodes, CALL_COLUMNS);
    /* the output gradient's transpose too, read in place by the call, where the columns' group formed */
    int fresh = m.gy && F->attn[find(F, n->id)] == CALL_COLUMNS;
    for (int j = 0; j < 2 && fresh; j++) fresh = F->size[find(F, m.a_nodes[j]->id)] == 1;
    for (int j = 0; j < 2 && fresh; j++) unite(F, n->id, m.a_nodes[j]->id);
    /* the input's transpose and zero pad too where the Winograd row reads the input unpadded where it lies */
    fresh = pc_columns_reads_x(&m) && F->attn[find(F, n->id)] == CALL_COLUMNS;
    for (int j = 0; j < 2 && fresh; j++) fresh = F->size[find(F, m.x_nodes[j]->id)] == 1;
    for (int j = 0; j < 2 && fresh; j++) unite(F, n->id, m.x_nodes[j]->id);
  }
  free(uses);
  return PC_OK;
}

static void decide(fuser *F) {
  pc_node **N = F->g->nodes;
  for (int i = 0; i < F->n; i++) {
    const pc_node *c = N[i];
    if (pc_op_fuse_kind(c->op) == PC_FUSE_CONST) continue;
    for (int k = 0; k < c->n_in; k++) {
      const pc_node *p = c->in[k]->producer;
      if (!p || p->op == PC_OP_constant || grp(F, p) == grp(F, c)) continue;
      const char *why = fuse_refusal(F, p, c);
      if (why) F->reason[i][k] = why;
      else unite(F, p->id, c->id);
    }
  }
}

/* ---------------------------------------------------------------- order: constants, then groups topologically */

/* Kahn over groups (roots), earliest first member first; fills order[] with node positions */
static pc_status order_groups(fuser *F, pc_node **order) {
  pc_graph *g = F->g;
  int n = F->n, *indeg = calloc((size_t)n, sizeof *indeg), *heap = malloc(sizeof *heap * (size_t)(n + 1));
  if (!indeg || !heap) {
    free(indeg), free(heap);
    return pc_fail(g, PC_ERR_NOMEM, "out of memory");
  }
  pc_node **N = g->nodes;
  int no = 0, nh = 0, ng = 0;
  for (int i = 0; i < n; i++)
    if (N[i]->op == PC_OP_constant) order[no++] = N[i];
  for (int i = 0; i < n; i++)
    for (int k = 0; N[i]->op != PC_OP_constant && k < N[i]->n_in; k++) {
      const pc_node *p = N[i]->in[k]->producer;
      if (p && p->op != PC_OP_constant && grp(F, p) != grp(F, N[i])) indeg[grp(F, N[i])]++;
    }
  /* a root's key is its first member's position: members are listed in union order, so take the min */
  int *key = F->mark;
  for (int i = 0; i < n; i++) key[i] = n;
  for (int i = 0; i < n; i++)
    if (N[i]->op != PC_OP_constant && key[grp(F, N[i])] > i) key[grp(F, N[i])] = i;
  for (int i = 0; i < n; i++)
    if (N[i]->op != PC_OP_constant && find(F, i) == i && indeg[i] == 0) pcp_heap_push(heap, &nh, key, i);
  /* members of each root in position order (CSR by root) */
  int *start = calloc((size_t)n + 2, sizeof *start), *list = malloc(sizeof *list * (size_t)(n + 1));
  for (int i = 0; start && i < n; i++) start[find(F, i) + 1]++;
  for (int i = 0; start && i < n; i++) start[i + 1] += start[i];
  for (int i = 0; start && list && i < n; i++) list[start[find(F, i)]++] = i;
  for (int i = n; start && i > 0; i--) start[i] = start[i - 1];
  if (start) start[0] = 0;
  while (start && list && nh > 0) {
    int r = pcp_heap_pop(heap, &nh, key);
    for (int j = start[r]; j < start[r + 1]; j++) N[list[j]]->group = ng, order[no++] = N[list[j]];
    ng++;
    for (int j = start[r]; j < start[r + 1]; j++) {
      const pc_node *m = N[list[j]];
      for (int k = 0; k < m->n_out; k++) {
        const pc_value *v = m->out[k];
        for (int u = F->users.start[v->id]; u < F->users.start[v->id + 1]; u++) {
          int gw = grp(F, F->users.list[u]);
          if (gw != r && --indeg[gw] == 0) pcp_heap_push(heap, &nh, key, gw);
        }
      }
    }
  }
  free(indeg), free(heap), free(start), free(list);
  if (no != n) return pc_fail(g, PC_ERR_INTERNAL, "fusion: groups are not in a topological order");
  g->n_groups = ng;
  return PC_OK;
}

/* node->unfused_reason: one line per operand */
static void store_reasons(fuser *F) {
  pc_graph *g = F->g;
  for (int i = 0; i < F->n; i++) {
    pc_node *c = g->nodes[i];
    c->unfused_reason = NULL;
    size_t len = 0;
    int any = 0;
    for (int k = 0; k < c->n_in; k++) {
      const pc_node *p = c->in[k]->producer;
      if (!p || p->op == PC_OP_constant || p->group == c->group) F->reason[i][k] = NULL;
      else if (!F->reason[i][k]) F->reason[i][k] = "kept apart by another fusion decision";
      if (F->reason[i][k]) any = 1, len += strlen(F->reason[i][k]);
      len++;
    }
    if (!any) continue;
    char *s = pc_alloc(g, len + 1), *q = s;
    for (int k = 0; s && k < c->n_in; k++) {
      if (k) *q++ = '\n';
      if (F->reason[i][k]) q += strlen(strcpy(q, F->reason[i][k]));
    }
    c->unfused_reason = s;
  }
}

static void fuser_free(fuser *F) {
  pcp_users_free(&F->users);
  free(F->parent), free(F->next), free(F->tail), free(F->maxpos);
  free(F->contract), free(F->red), free(F->size), free(F->mark), free(F->stack), free(F->attn);
  free(F->paths), free(F->members), free(F->is_out);
  free(F->reason);
}

static pc_status fuser_init(fuser *F, pc_graph *g) {
  memset(F, 0, sizeof *F);
  F->g = g;
  int n = F->n = g->n_nodes;
  size_t sz = sizeof(int) * (size_t)(n + 1);
  F->parent = malloc(sz), F->next = malloc(sz), F->tail = malloc(sz), F->maxpos = malloc(sz);
  F->contract = malloc(sz), F->red = malloc(sz), F->size = malloc(sz), F->mark = calloc((size_t)n + 1, sizeof(int));
  F->stack = malloc(sz);
  F->attn = calloc((size_t)n + 1, 1);
  F->paths = malloc(sizeof *F->paths * (size_t)(n + 1));
  F->members = malloc(sizeof *F->members * (2 * PC_FUSE_MAX_PRIMS + 1));
  F->reason = calloc((size_t)n + 1, sizeof *F->reason);
  F->is_out = calloc((size_t)g->n_values + 1, 1);
  if (!F->parent || !F->next || !F->tail || !F->maxpos || !F->contract || !F->red || !F->size || !F->mark || !F->stack || !F->reason || !F->paths || !F->members || !F->is_out || !F->attn)
    return pc_fail(g, PC_ERR_NOMEM, "out of memory");
  for (int i = 0; i < g->n_outputs; i++) F->is_out[g->outputs[i]->id] = 1;
  for (int i = 0; i < n; i++) {
    pc_node *c = g->nodes[i];
    F->parent[i] = F->tail[i] = F->maxpos[i] = i;
    F->next[i] = -1;
    F->contract[i] = pc_op_fuse_kind(c->op) == PC_FUSE_CONTRACT ? i : -1;
    F->red[i] = pc_op_fuse_kind(c->op) == PC_FUSE_RED ? i : -1;
    F->size[i] = 1;
    c->group = -1;
    F->reason[i] = pc_alloc(g, sizeof(const char *) * (size_t)(c->n_in + 1));
    if (!F->reason[i]) return pc_fail(g, PC_ERR_NOMEM, "out of memory");
  }
  return pcp_users_build(g, &F->users);
}

static pc_status fuse(pc_graph *g, int attention) {
  if (g->status != PC_OK) return g->status;
  pc_graph_compact(g);
  if (clone_cheap(g, attention) != PC_OK) return g->status;
  fuser F;
  pc_node **order = malloc(sizeof *order * (size_t)(g->n_nodes + 1));
  if (!order) return pc_fail(g, PC_ERR_NOMEM, "out of memory");
  if (fuser_init(&F, g) == PC_OK) {
    if (!attention || (attention_groups(&F) == PC_OK && columns_groups(&F) == PC_OK)) decide(&F);
    if (order_groups(&F, order) == PC_OK) {
      store_reasons(&F);
      if (g->n_nodes) memcpy(g->nodes, order, sizeof *order * (size_t)g->n_nodes); /* g->nodes: NULL when empty */
      for (int i = 0; i < g->n_nodes; i++) g->nodes[i]->id = i;
    }
  }
  fuser_free(&F);
  free(order);
  return g->status;
}

pc_status pc_pass_fuse(pc_graph *g) { return fuse(g, 1); }

pc_status pc_pass_fuse0(pc_graph *g) { return fuse(g, 0); }
