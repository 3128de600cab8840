/* frontend/onnx_cf.c: ONNX control flow (If, Loop, Scan) unrolled at import, and sequences / optionals as import-time lists. */
#include "frontend/onnx_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define G (c->g)
#define CF_MAX_SEQ 4096    /* elements of one sequence */

/* a value an ONNX name carries: a tensor, or a sequence / optional */
typedef struct cf_val {
  pc_value *t;
  ox_seq s;
  int is_seq;
} cf_val;

/* ---------------------------------------------------------------- bindings */

static int cf_get(ox_ctx *c, const char *name, cf_val *v) {
  memset(v, 0, sizeof *v);
  v->t = ox_name_get(c, name);
  if (v->t) return 1;
  const ox_seq *s = ox_seq_get(c, name);
  if (s) return v->s = *s, v->is_seq = 1;
  ox_fail(c, PC_ERR_PARSE, "'%s' is not defined", name);
  return 0;
}

static pc_status cf_put(ox_ctx *c, const char *name, const cf_val *v) {
  if (!name || !*name) return G->status;
  return v->is_seq ? ox_seq_put(c, name, &v->s) : ox_name_put(c, name, v->t);
}

/* sets node output i to v */
static pc_status cf_out(ox_ctx *c, int i, const cf_val *v) {
  if (!ox_has_out(c, i)) return G->status;
  return v->is_seq ? ox_seq_out(c, i, &v->s) : ox_out(c, i, v->t);
}

static const char *vi_name(const Onnx__ValueInfoProto *vi) { return vi && vi->name ? vi->name : ""; }

/* a graph attribute that must be there */
static const Onnx__GraphProto *cf_body(ox_ctx *c, const char *attr) {
  const Onnx__GraphProto *b = ox_attr_graph(c, attr);
  if (!b) ox_fail(c, PC_ERR_ATTR, "graph attribute %s is required", attr);
  return b;
}

/* the first graph input v is computed from, NULL when none (a walk up its producers) */
static const char *graph_input_of(pc_graph *g, pc_value *v) {
  unsigned char *seen = v ? calloc((size_t)g->n_values + 1, 1) : NULL;
  pc_value **stack = seen ? malloc(sizeof *stack * ((size_t)g->n_values + 1)) : NULL;
  const char *found = NULL;
  int n = 0;
  if (stack) stack[n++] = v, seen[v->id] = 1;
  while (n > 0 && !found) {
    pc_value *u = stack[--n];
    if (!u->producer) {
      for (int i = 0; i < g->n_inputs && !found; i++)
        if (g->inputs[i] == u) found = u->name;
      continue;
    }
    for (int i = 0; i < u->producer->n_in; i++) {
      pc_value *w = u->producer->in[i];
      if (w && w->id < g->n_values && !seen[w->id]) seen[w->id] = 1, stack[n++] = w;
    }
  }
  free(stack);
  free(seen);
  return found;
}

/* the message the conformance runner and users read when an input must be known at compile time */
static pc_status need_const(ox_ctx *c, int i, const char *why) {
  const char *src = graph_input_of(c->g, ox_in(c, i));
  if (src)
    return ox_fail(c, PC_ERR_UNSUPPORTED, "unsupported: %s: input %d ('%s') must be a compile-time constant; it "
                   "depends on graph input '%s' (fix it with --const %s=VALUE)", why, i, c->node->input[i], src, src);
  return ox_fail(c, PC_ERR_UNSUPPORTED, "unsupported: %s: input %d ('%s') must be a compile-time constant", why, i,
                 c->node->input[i]);
}

/* a constant scalar's value (any dtype), -1 when v is no constant */
static int const_scalar(ox_ctx *c, pc_value *v, int64_t *out) {
  if (!v || !pc_const_data(v) || pc_type_numel(&v->type) != 1) return 0;
  return ox_value_ints(c, v, out, 1) == 1;
}

/* ---------------------------------------------------------------- If */

/* both branches, then out[i] = where(cond, then_i, else_i): the outputs must agree in type */
static pc_status if_select(ox_ctx *c, pc_value *cond, const Onnx__GraphProto *tb, const Onnx__GraphProto *eb) {
  int n = c->n_out;
  pc_value **tv = pc_alloc(G, sizeof *tv * (size_t)(n + 1));
  if (!tv || ox_import_body(c, tb, "then_branch") != PC_OK) return G->status;
  for (int i = 0; i < n; i++) {
    cf_val v;
    if (!cf_get(c, vi_name(tb->output[i]), &v)) return G->status;
    if (v.is_seq) return need_const(c, 0, "branches that yield sequences need a known condition");
    tv[i] = v.t;
  }
  if (ox_import_body(c, eb, "else_branch") != PC_OK) return G->status;
  if (cond->type.rank) cond = pc_reshape(G, cond, 0, NULL);
  for (int i = 0; i < n && G->status == PC_OK; i++) {
    cf_val v;
    if (!cf_get(c, vi_name(eb->output[i]), &v)) return G->status;
    if (v.is_seq) return need_const(c, 0, "branches that yield sequences need a known condition");
    if (!pc_type_equal(&tv[i]->type, &v.t->type))
      return need_const(c, 0, "the branches' outputs differ in shape or type, so both cannot be computed and selected");
    pc_value *cb = pc_broadcast_to(G, cond, v.t->type.rank, v.t->type.dims);
    ox_out(c, i, pc_where(G, cb, tv[i], v.t));
  }
  return G->status;
}

pc_status ox_op_If(ox_ctx *c) {
  pc_value *cond = ox_in_req(c, 0);
  const Onnx__GraphProto *tb = cf_body(c, "then_branch"), *eb = cf_body(c, "else_branch");
  if (!cond || !tb || !eb) return G->status;
  if ((int)tb->n_output != c->n_out || (int)eb->n_output != c->n_out)
    return ox_fail(c, PC_ERR_ATTR, "branches yield %zu and %zu outputs, the node has %d", tb->n_output, eb->n_output,
                   c->n_out);
  int64_t k;
  if (!const_scalar(c, cond, &k)) return if_select(c, cond, tb, eb);
  const Onnx__GraphProto *b = k ? tb : eb;
  if (ox_import_body(c, b, k ? "then_branch" : "else_branch") != PC_OK) return G->status;
  for (int i = 0; i < c->n_out; i++) {
    cf_val v;
    if (!cf_get(c, vi_name(b->output[i]), &v) || cf_out(c, i, &v) != PC_OK) return G->status;
  }
  return G->status;
}

/* ---------------------------------------------------------------- scan outputs */

/* per-iteration values of one scan output, stacked along a new axis at the end */
typedef struct cf_stack {
  int n, cap;
  pc_value **v;
} cf_stack;

static int stack_push(ox_ctx *c, cf_stack *s, pc_value *v) {
  if (s->n == s->cap) {
    int cap = s->cap ? s->cap * 2 : 16;
    pc_value **nv = pc_alloc(G, sizeof *nv * (size_t)cap);
    if (!nv) return 0;
    if (s->n) memcpy(nv, s->v, sizeof *nv * (size_t)s->n);
    s->v = nv, s->cap = cap;
  }
  s->v[s->n++] = v;
  return 1;
}

/* the values stacked along a new axis `axis` (negative counts from the end of the result rank) */
static pc_value *stack_join(ox_ctx *c, cf_stack *s, int64_t axis, int reverse) {
  if (!s->n) return ox_fail(c, PC_ERR_UNSUPPORTED, "a scan output of zero iterations has no known shape"), NULL;
  int a = ox_axis(c, axis, s->v[0]->type.rank + 1);
  if (a < 0) return NULL;
  int64_t ax = a;
  pc_value **parts = pc_alloc(G, sizeof *parts * (size_t)s->n);
  for (int i = 0; parts && i < s->n; i++) parts[i] = ox_unsqueeze(c, s->v[reverse ? s->n - 1 - i : i], 1, &ax);
  return parts && G->status == PC_OK ? pc_concatenate(G, parts, s->n, ax) : NULL;
}

/* ---------------------------------------------------------------- Loop */

/* a Loop's trip count or condition: a constant, or absent (then `dflt`) */
static int loop_bound(ox_ctx *c, int i, int64_t dflt, int64_t *out) {
  pc_value *v = ox_in(c, i);
  *out = dflt;
  if (!v) return 1;
  if (const_scalar(c, v, out)) return 1;
  need_const(c, i, "data-dependent trip count");
  return 0;
}

/* binds the loop body's formal inputs for iteration `it` */
static pc_status loop_bind(ox_ctx *c, const Onnx__GraphProto *body, int64_t it, int64_t cond, const cf_val *carried,
                           int n_carried) {
  uint8_t b = cond != 0;
  ox_name_put(c, vi_name(body->input[0]), pc_const(G, pc_type_make(PC_i64, 0, NULL), &it));
  ox_name_put(c, vi_name(body->input[1]), pc_const(G, pc_type_make(PC_bool, 0, NULL), &b));
  for (int j = 0; j < n_carried && G->status == PC_OK; j++) cf_put(c, vi_name(body->input[2 + j]), &carried[j]);
  return G->status;
}

pc_status ox_op_Loop(ox_ctx *c) {
  const Onnx__GraphProto *body = cf_body(c, "body");
  if (!body) return G->status;
  int n_carried = c->n_in - 2, n_scan = (int)body->n_output - 1 - n_carried;
  if (n_carried < 0 || (int)body->n_input != 2 + n_carried || n_scan < 0 || c->n_out != n_carried + n_scan)
    return ox_fail(c, PC_ERR_ATTR, "body has %zu inputs and %zu outputs for %d node inputs and %d outputs",
                   body->n_input, body->n_output, c->n_in, c->n_out);
  int64_t trips, cond;
  if (!loop_bound(c, 0, INT64_MAX, &trips) || !loop_bound(c, 1, 1, &cond)) return G->status;
  cf_val *carried = pc_alloc(G, sizeof *carried * (size_t)(n_carried + 1));
  cf_stack *scans = pc_alloc(G, sizeof *scans * (size_t)(n_scan + 1));
  if (!carried || !scans) return G->status;
  for (int j = 0; j < n_carried; j++)
    if (!cf_get(c, c->node->input[2 + j], &carried[j])) return G->status;
  for (int64_t it = 0; it < trips && cond; it++) {
    if (it >= OX_MAX_UNROLL)
      return ox_fail(c, PC_ERR_UNSUPPORTED, "unsupported: more than %d iterations to unroll", OX_MAX_UNROLL);
    char scope[64];
    snprintf(scope, sizeof scope, "[%lld]", (long long)it);
    if (loop_bind(c, body, it, cond, carried, n_carried) != PC_OK || ox_import_body(c, body, scope) != PC_OK)
      return G->status;
    cf_val cv;
    if (!cf_get(c, vi_name(body->output[0]), &cv)) return G->status;
    if (cv.is_seq || !const_scalar(c, cv.t, &cond))
      return ox_fail(c, PC_ERR_UNSUPPORTED, "unsupported: data-dependent trip count (the body's condition is "
                                            "computed at run time)");
    for (int j = 0; j < n_carried; j++)
      if (!cf_get(c, vi_name(body->output[1 + j]), &carried[j])) return G->status;
    for (int k = 0; k < n_scan; k++) {
      cf_val sv;
      if (!cf_get(c, vi_name(body->output[1 + n_carried + k]), &sv)) return G->status;
      if (sv.is_seq) return ox_fail(c, PC_ERR_UNSUPPORTED, "scan output %d is a sequence", k);
      if (!stack_push(c, &scans[k], sv.t)) return G->status;
    }
  }
  for (int j = 0; j < n_carried; j++) cf_out(c, j, &carried[j]);
  for (int k = 0; k < n_scan && G->status == PC_OK; k++)
    if (ox_has_out(c, n_carried + k)) ox_out(c, n_carried + k, stack_join(c, &scans[k], 0, 0));
  return G->status;
}

/* ---------------------------------------------------------------- Scan */

#define CF_MAX_SCAN 64

/* num_scan_inputs, or -1 outside 1..CF_MAX_SCAN (checked as int64: a cast first wrapped 2^31 + 2 to a
 * negative count, whose differences with the input count overflowed; found by fuzz_mutate) */
static int scan_inputs(ox_ctx *c) {
  int64_t m = ox_attr_int(c, "num_scan_inputs", 0);
  return m < 1 || m > CF_MAX_SCAN ? -1 : (int)m;
}

/* slice `it` of x along axis, the axis removed */
static pc_value *scan_slice(ox_ctx *c, pc_value *x, int axis, int64_t it) {
  int64_t start[PC_MAX_RANK] = {0}, limit[PC_MAX_RANK], stride[PC_MAX_RANK], dims[PC_MAX_RANK];
  int r = x->type.rank, k = 0;
  for (int d = 0; d < r; d++) {
    limit[d] = x->type.dims[d], stride[d] = 1;
    if (d != axis) dims[k++] = x->type.dims[d];
  }
  start[axis] = it, limit[axis] = it + 1;
  return pc_reshape(G, pc_slice(G, x, start, limit, stride), r - 1, dims);
}

/* the body once per step of the scan inputs xs (along in_axis, backwards where in_dir): state
 * updated in place, each step's scan outputs pushed onto scans */
static pc_status scan_steps(ox_ctx *c, const Onnx__GraphProto *body, int n_state, cf_val *state, int m,
                            pc_value *const *xs, const int64_t *in_axis, const int64_t *in_dir, int64_t len,
                            int n_scan_out, cf_stack *scans, const char *prefix) {
  for (int64_t it = 0; it < len; it++) {
    for (int j = 0; j < n_state; j++) cf_put(c, vi_name(body->input[j]), &state[j]);
    for (int i = 0; i < m && G->status == PC_OK; i++)
      ox_name_put(c, vi_name(body->input[n_state + i]), scan_slice(c, xs[i], (int)in_axis[i], in_dir[i] ? len - 1 - it : it));
    char scope[96];
    snprintf(scope, sizeof scope, "%s[%lld]", prefix, (long long)it);
    if (G->status != PC_OK || ox_import_body(c, body, scope) != PC_OK) return G->status;
    for (int j = 0; j < n_state; j++)
      if (!cf_get(c, vi_name(body->output[j]), &state[j])) return G->status;
    for (int k = 0; k < n_scan_out; k++) {
      cf_val v;
      if (!cf_get(c, vi_name(body->output[n_state + k]), &v)) return G->status;
      if (v.is_seq) return ox_fail(c, PC_ERR_UNSUPPORTED, "scan output %d is a sequence", k);
      if (!stack_push(c, &scans[k], v.t)) return G->status;
    }
  }
  return G->status;
}

pc_status ox_op_Scan(ox_ctx *c) {
  const Onnx__GraphProto *body = cf_body(c, "body");
  int m = scan_inputs(c);
  if (!body) return G->status;
  int n_state = c->n_in - m, n_scan_out = c->n_out - n_state;
  if (m < 1 || m > CF_MAX_SCAN || n_state < 0 || n_scan_out < 0 || n_scan_out > CF_MAX_SCAN ||
      (int)body->n_input != c->n_in || (int)body->n_output != c->n_out)
    return ox_fail(c, PC_ERR_ATTR, "body has %zu inputs and %zu outputs for %d node inputs, %d outputs and "
                   "num_scan_inputs %d", body->n_input, body->n_output, c->n_in, c->n_out, m);
  int64_t in_dir[CF_MAX_SCAN], in_axis[CF_MAX_SCAN], out_dir[CF_MAX_SCAN], out_axis[CF_MAX_SCAN];
  if (!ox_attr_ints_n(c, "scan_input_directions", in_dir, m, CF_MAX_SCAN, 0) || !ox_attr_ints_n(c, "scan_input_axes", in_axis, m, CF_MAX_SCAN, 0) ||
      !ox_attr_ints_n(c, "scan_output_directions", out_dir, n_scan_out, CF_MAX_SCAN, 0) ||
      !ox_attr_ints_n(c, "scan_output_axes", out_axis, n_scan_out, CF_MAX_SCAN, 0))
    return G->status;
  pc_value *xs[CF_MAX_SCAN];
  int64_t len = -1;
  for (int i = 0; i < m; i++) {
    xs[i] = ox_in_req(c, n_state + i);
    if (!xs[i] || (in_axis[i] = ox_axis(c, in_axis[i], xs[i]->type.rank)) < 0) return G->status;
    int64_t d = xs[i]->type.dims[in_axis[i]];
    if (PC_DIM_IS_SYM(d)) return ox_fail(c, PC_ERR_UNSUPPORTED, "unsupported: scan input %d has a symbolic length", i);
    if (len >= 0 && d != len) return ox_fail(c, PC_ERR_SHAPE, "scan inputs have lengths %lld and %lld", (long long)len, (long long)d);
    len = d;
  }
  if (len > OX_MAX_UNROLL) return ox_fail(c, PC_ERR_UNSUPPORTED, "unsupported: more than %d iterations to unroll", OX_MAX_UNROLL);
  cf_val *state = pc_alloc(G, sizeof *state * (size_t)(n_state + 1));
  cf_stack scans[CF_MAX_SCAN];
  memset(scans, 0, sizeof scans);
  if (!state) return G->status;
  for (int j = 0; j < n_state; j++)
    if (!cf_get(c, c->node->input[j], &state[j])) return G->status;
  if (scan_steps(c, body, n_state, state, m, xs, in_axis, in_dir, len, n_scan_out, scans, "") != PC_OK) return G->status;
  for (int j = 0; j < n_state; j++) cf_out(c, j, &state[j]);
  for (int k = 0; k < n_scan_out && G->status == PC_OK; k++)
    if (ox_has_out(c, n_state + k)) ox_out(c, n_state + k, stack_join(c, &scans[k], out_axis[k], out_dir[k] != 0));
  return G->status;
}

/* Scan of opset 8: every input and output has a leading batch axis (scan inputs [B, T, ...]); the
 * body runs per batch entry, over the whole length (sequence_lens, when given, must be T) */
pc_status ox_op_Scan8(ox_ctx *c) {
  const Onnx__GraphProto *body = cf_body(c, "body");
  int m = scan_inputs(c);
  if (!body) return G->status;
  int n_state = c->n_in - 1 - m, n_scan_out = c->n_out - n_state;
  if (m < 1 || m > CF_MAX_SCAN || n_state < 0 || n_scan_out < 0 || n_scan_out > CF_MAX_SCAN ||
      (int)body->n_input != c->n_in - 1 || (int)body->n_output != c->n_out)
    return ox_fail(c, PC_ERR_ATTR, "body has %zu inputs and %zu outputs for %d node inputs and %d outputs",
                   body->n_input, body->n_output, c->n_in, c->n_out);
  int64_t dirs[CF_MAX_SCAN], zeros[CF_MAX_SCAN] = {0};
  if (!ox_attr_ints_n(c, "directions", dirs, m, CF_MAX_SCAN, 0)) return G->status;
  pc_value *all[CF_MAX_SCAN * 2 + 2];
  int n_all = n_state + m;
  if (n_all > CF_MAX_SCAN * 2) return ox_fail(c, PC_ERR_RANGE, "too many inputs");
  for (int i = 0; i < n_all; i++)
    if (!(all[i] = ox_in_req(c, 1 + i)) || all[i]->type.rank < 1 || PC_DIM_IS_SYM(all[i]->type.dims[0]))
      return G->status != PC_OK ? G->status : ox_fail(c, PC_ERR_SHAPE, "input %d needs a static batch axis", 1 + i);
  int64_t B = all[0]->type.dims[0], T = all[n_state]->type.rank > 1 ? all[n_state]->type.dims[1] : -1, lens[4096];
  if (T < 0 || PC_DIM_IS_SYM(T) || T > OX_MAX_UNROLL) return ox_fail(c, PC_ERR_UNSUPPORTED, "unsupported: scan length");
  /* the body is unrolled per batch entry and step: a batch of 2^34 once asked for 160 GB here (fuzz_mutate) */
  if (B > OX_MAX_UNROLL || B * (T > 0 ? T : 1) > OX_MAX_UNROLL)
    return ox_fail(c, PC_ERR_UNSUPPORTED, "unsupported: more than %d body instances to unroll (batch %lld x length %lld)",
                   OX_MAX_UNROLL, (long long)B, (long long)T);
  int nl = ox_const_ints(c, 0, lens, 4096);
  if (nl == -2) return G->status;
  for (int i = 0; i < nl; i++)
    if (lens[i] != T) return ox_fail(c, PC_ERR_UNSUPPORTED, "unsupported: sequence_lens shorter than the scan length");
  cf_stack *per_b = pc_alloc(G, sizeof *per_b * (size_t)(n_all + n_scan_out + 1) * (size_t)(B + 1));
  cf_val *state = pc_alloc(G, sizeof *state * (size_t)(n_state + 1));
  if (!per_b || !state) return G->status;
  for (int64_t b = 0; b < B; b++) {
    pc_value *xs[CF_MAX_SCAN];
    for (int j = 0; j < n_state; j++) memset(&state[j], 0, sizeof state[j]), state[j].t = scan_slice(c, all[j], 0, b);
    for (int i = 0; i < m; i++) xs[i] = scan_slice(c, all[n_state + i], 0, b);
    cf_stack scans[CF_MAX_SCAN];
    memset(scans, 0, sizeof scans);
    char prefix[48];
    snprintf(prefix, sizeof prefix, "[batch %lld]", (long long)b);
    if (scan_steps(c, body, n_state, state, m, xs, zeros, dirs, T, n_scan_out, scans, prefix) != PC_OK) return G->status;
    for (int j = 0; j < n_state; j++)
      if (state[j].is_seq || !stack_push(c, &per_b[j], state[j].t)) return ox_fail(c, PC_ERR_UNSUPPORTED, "a state is a sequence");
    for (int k = 0; k < n_scan_out; k++) stack_push(c, &per_b[n_state + k], stack_join(c, &scans[k], 0, 0));
  }
  for (int j = 0; j < n_state + n_scan_out && G->status == PC_OK; j++)
    if (ox_has_out(c, j)) ox_out(c, j, stack_join(c, &per_b[j], 0, 0));
  return G->status;
}

/* ---------------------------------------------------------------- sequences */

/* sequence input i (a plain sequence, not an optional) */
static const ox_seq *seq_req(ox_ctx *c, int i) {
  const ox_seq *s = ox_seq_in(c, i);
  if (!s && G->status == PC_OK) ox_fail(c, PC_ERR_TYPE, "input %d must be a sequence", i);
  if (s && s->optional && !s->holds_seq) return ox_fail(c, PC_ERR_TYPE, "input %d is an optional tensor, not a sequence", i), NULL;
  if (s && s->none) return ox_fail(c, PC_ERR_ATTR, "input %d is an empty optional", i), NULL;
  return s;
}

static ox_seq seq_make(ox_ctx *c, int n) {
  ox_seq s;
  memset(&s, 0, sizeof s);
  s.n = n;
  s.items = n ? pc_alloc(G, sizeof *s.items * (size_t)n) : NULL;
  return s;
}

/* a position input (constant; negative counts from the end) normalized into [0, n + extra) */
static int seq_position(ox_ctx *c, int i, int n, int extra, int dflt, int *out) {
  int64_t p;
  int got = ox_const_ints(c, i, &p, 1);
  if (got == -2) return 0;
  if (got == -1) return *out = dflt, 1;
  if (p < 0) p += n;
  if (p < 0 || p >= n + extra)
    return ox_fail(c, PC_ERR_RANGE, "position %lld is out of range for a sequence of %d", (long long)p, n), 0;
  *out = (int)p;
  return 1;
}

pc_status ox_op_SequenceEmpty(ox_ctx *c) {
  ox_seq s = seq_make(c, 0);
  return ox_seq_out(c, 0, &s);
}

pc_status ox_op_SequenceConstruct(ox_ctx *c) {
  if (c->n_in > CF_MAX_SEQ) return ox_fail(c, PC_ERR_RANGE, "more than %d elements", CF_MAX_SEQ);
  ox_seq s = seq_make(c, c->n_in);
  for (int i = 0; i < c->n_in && G->status == PC_OK; i++) s.items[i] = ox_in_req(c, i);
  return G->status == PC_OK ? ox_seq_out(c, 0, &s) : G->status;
}

pc_status ox_op_SequenceAt(ox_ctx *c) {
  const ox_seq *s = seq_req(c, 0);
  int p;
  if (s && !ox_has_in(c, 1)) return ox_fail(c, PC_ERR_ATTR, "input 1 (position) is required");
  if (!s || !seq_position(c, 1, s->n, 0, 0, &p)) return G->status;
  return ox_out(c, 0, s->items[p]);
}

pc_status ox_op_SequenceInsert(ox_ctx *c) {
  const ox_seq *s = seq_req(c, 0);
  pc_value *t = ox_in_req(c, 1);
  int p;
  if (!s || !t || !seq_position(c, 2, s->n, 1, s->n, &p)) return G->status;
  if (s->n >= CF_MAX_SEQ) return ox_fail(c, PC_ERR_RANGE, "more than %d elements", CF_MAX_SEQ);
  ox_seq r = seq_make(c, s->n + 1);
  if (!r.items) return G->status;
  for (int i = 0, k = 0; i <= s->n; i++) r.items[i] = i == p ? t : s->items[k++];
  return ox_seq_out(c, 0, &r);
}

pc_status ox_op_SequenceErase(ox_ctx *c) {
  const ox_seq *s = seq_req(c, 0);
  int p;
  if (!s || !seq_position(c, 1, s->n, 0, s->n - 1, &p)) return G->status;
  if (p < 0) return ox_fail(c, PC_ERR_RANGE, "erasing from an empty sequence");
  ox_seq r = seq_make(c, s->n - 1);
  for (int i = 0, k = 0; i < s->n; i++)
    if (i != p) r.items[k++] = s->items[i];
  return ox_seq_out(c, 0, &r);
}

pc_status ox_op_SequenceLength(ox_ctx *c) {
  const ox_seq *s = seq_req(c, 0);
  if (!s) return G->status;
  int64_t n = s->n;
  return ox_out(c, 0, pc_const(G, pc_type_make(PC_i64, 0, NULL), &n));
}

pc_status ox_op_ConcatFromSequence(ox_ctx *c) {
  const ox_seq *s = seq_req(c, 0);
  if (!s) return G->status;
  if (!s->n) return ox_fail(c, PC_ERR_UNSUPPORTED, "concatenating an empty sequence");
  int new_axis = ox_attr_flag(c, "new_axis", 0);
  int r = s->items[0]->type.rank;
  int a = ox_axis(c, ox_attr_int(c, "axis", 0), r + (new_axis != 0));
  if (a < 0) return G->status;
  int64_t ax = a;
  pc_value **parts = pc_alloc(G, sizeof *parts * (size_t)s->n);
  for (int i = 0; parts && i < s->n; i++) parts[i] = new_axis ? ox_unsqueeze(c, s->items[i], 1, &ax) : s->items[i];
  if (!parts || G->status != PC_OK) return G->status;
  return ox_out(c, 0, pc_concatenate(G, parts, s->n, ax));
}

/* the chunk sizes SplitToSequence cuts `dim` into: a scalar split (equal chunks, the last
 * smaller), a list of sizes, or ones */
static int split_sizes(ox_ctx *c, int64_t dim, int64_t *sizes, int *scalar) {
  pc_value *sp = ox_in(c, 1);
  *scalar = !sp;
  if (!sp) {
    for (int64_t i = 0; i < dim; i++) sizes[i] = 1;
    return (int)dim;
  }
  int n = ox_const_ints(c, 1, sizes, CF_MAX_SEQ);
  if (n < 0) return -1;
  if (sp->type.rank == 0) {
    int64_t k = sizes[0];
    if (k <= 0) return ox_fail(c, PC_ERR_ATTR, "split %lld is not positive", (long long)k), -1;
    n = 0;
    for (int64_t at = 0; at < dim; at += k) sizes[n++] = at + k <= dim ? k : dim - at;
    return n;
  }
  int64_t sum = 0;
  for (int i = 0; i < n; i++) sum += sizes[i];
  if (sum != dim) return ox_fail(c, PC_ERR_SHAPE, "split sizes add to %lld, the axis has %lld", (long long)sum, (long long)dim), -1;
  return n;
}

pc_status ox_op_SplitToSequence(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0);
  if (!x) return G->status;
  int r = x->type.rank, a = ox_axis(c, ox_attr_int(c, "axis", 0), r);
  if (a < 0) return G->status;
  int64_t dim = x->type.dims[a];
  if (PC_DIM_IS_SYM(dim) || dim > CF_MAX_SEQ)
    return ox_fail(c, PC_ERR_UNSUPPORTED, "the split axis must have a known length of at most %d", CF_MAX_SEQ);
  int64_t *sizes = pc_alloc(G, sizeof *sizes * (CF_MAX_SEQ + 1));
  int ones;
  int n = sizes ? split_sizes(c, dim, sizes, &ones) : -1;
  if (n < 0) return G->status;
  int squeeze = ones && ox_attr_int(c, "keepdims", 1) == 0;
  ox_seq s = seq_make(c, n);
  int64_t start[PC_MAX_RANK] = {0}, limit[PC_MAX_RANK], stride[PC_MAX_RANK], at = 0;
  for (int d = 0; d < r; d++) limit[d] = x->type.dims[d], stride[d] = 1;
  for (int i = 0; i < n && G->status == PC_OK; i++) {
    start[a] = at, limit[a] = at += sizes[i];
    s.items[i] = squeeze ? scan_slice(c, x, a, i) : pc_slice(G, x, start, limit, stride);
  }
  return G->status == PC_OK ? ox_seq_out(c, 0, &s) : G->status;
}

/* SequenceMap: the body once per element of the first input; further sequence inputs are read at
 * the same position, tensor inputs whole; each body output collects into an output sequence */
pc_status ox_op_SequenceMap(ox_ctx *c) {
  const Onnx__GraphProto *body = cf_body(c, "body");
  const ox_seq *s0 = seq_req(c, 0);
  if (!body || !s0) return G->status;
  if ((int)body->n_input != c->n_in || (int)body->n_output != c->n_out)
    return ox_fail(c, PC_ERR_ATTR, "body has %zu inputs and %zu outputs for %d node inputs and %d outputs",
                   body->n_input, body->n_output, c->n_in, c->n_out);
  ox_seq *outs = pc_alloc(G, sizeof *outs * (size_t)(c->n_out + 1));
  for (int k = 0; outs && k < c->n_out; k++) outs[k] = seq_make(c, s0->n);
  for (int j = 1; j < c->n_in; j++) {
    const ox_seq *sj = ox_seq_in(c, j);
    if (sj && sj->n != s0->n)
      return ox_fail(c, PC_ERR_SHAPE, "input %d has %d elements, input 0 %d", j, sj->n, s0->n);
    if (!sj && !ox_in_req(c, j)) return G->status;
  }
  for (int i = 0; i < s0->n && G->status == PC_OK; i++) {
    for (int j = 0; j < c->n_in; j++) {
      const ox_seq *sj = ox_seq_in(c, j);
      ox_name_put(c, vi_name(body->input[j]), sj ? sj->items[i] : ox_in(c, j));
    }
    char scope[64];
    snprintf(scope, sizeof scope, "[%d]", i);
    if (G->status != PC_OK || ox_import_body(c, body, scope) != PC_OK) return G->status;
    for (int k = 0; k < c->n_out; k++) {
      outs[k].items[i] = ox_name_get(c, vi_name(body->output[k]));
      if (!outs[k].items[i]) return ox_fail(c, PC_ERR_UNSUPPORTED, "body output %d is not a tensor", k);
    }
  }
  for (int k = 0; k < c->n_out && G->status == PC_OK; k++) ox_seq_out(c, k, &outs[k]);
  return G->status;
}

/* ---------------------------------------------------------------- optionals */

pc_status ox_op_Optional(ox_ctx *c) {
  ox_seq o = seq_make(c, 0);
  o.optional = 1;
  pc_value *t = ox_in(c, 0);
  const ox_seq *s = ox_seq_in(c, 0);
  if (t) {
    o = seq_make(c, 1);
    o.optional = 1;
    o.items[0] = t;
  } else if (s) {
    o = *s;
    o.optional = 1, o.holds_seq = 1, o.none = 0;
  } else {
    o.none = 1;
  }
  return ox_seq_out(c, 0, &o);
}

pc_status ox_op_OptionalHasElement(ox_ctx *c) {
  const ox_seq *s = ox_seq_in(c, 0);
  uint8_t has = ox_has_in(c, 0) || (s && !s->none);
  return ox_out(c, 0, pc_const(G, pc_type_make(PC_bool, 0, NULL), &has));
}

pc_status ox_op_OptionalGetElement(ox_ctx *c) {
  pc_value *t = ox_in(c, 0);
  if (t) return ox_out(c, 0, t);
  const ox_seq *s = ox_seq_in(c, 0);
  if (!s) return ox_fail(c, PC_ERR_ATTR, "input 0 is required");
  if (s->none) return ox_fail(c, PC_ERR_ATTR, "the optional input has no value");
  if (s->optional && !s->holds_seq) return ox_out(c, 0, s->items[0]);
  ox_seq r = *s;
  r.optional = 0, r.holds_seq = 0;
  return ox_seq_out(c, 0, &r);
}

pc_status ox_op_SequenceIdentity(ox_ctx *c) {
  const ox_seq *s = ox_seq_in(c, 0);
  if (!s) return ox_fail(c, PC_ERR_ATTR, "input 0 is required");
  return ox_seq_out(c, 0, s);
}
