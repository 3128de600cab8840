/* frontend/onnx_ml.c: decompositions of the classical machine-learning ops into prims: ai.onnx.ml's Binarizer,
 * ArrayFeatureExtractor and TreeEnsemble, and TfIdfVectorizer. */
#include "frontend/onnx_internal.h"

#include <string.h>

#define G (c->g)

/* ---------------------------------------------------------------- ai.onnx.ml */

pc_status ox_op_Binarizer(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0);
  if (!x) return ox_status(c);
  pc_value *above = ox_binary_s(c, PC_OP_gt, x, ox_attr_float(c, "threshold", 0));
  return ox_out(c, 0, pc_where(G, above, ox_like(c, 1, x), ox_like(c, 0, x)));
}

/* the entries Y of the last axis of X; a 1-D X reads as one row */
pc_status ox_op_ArrayFeatureExtractor(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0), *y = ox_in_req(c, 1);
  if (!x || !y || !ox_check_static_input(c, x)) return ox_status(c);
  if (x->type.rank == 1) x = ox_reshape(c, x, 2, (int64_t[]){1, x->type.dims[0]});
  int r = x->type.rank;
  int64_t n = pc_type_numel(&y->type), shape[PC_MAX_RANK], last = r - 1;
  for (int i = 0; i < r; i++) shape[i] = i == last ? n : x->type.dims[i];
  pc_value *idx = pc_convert(G, ox_reshape(c, y, 1, &n), PC_i64); /* the gather prim takes one index per output */
  idx = idx ? pc_broadcast_in_dim(G, idx, r, shape, &last) : NULL;
  pc_attr a = pc_a_int("axis", last);
  pc_value *in[2] = {x, idx};
  return ox_out(c, 0, idx ? pc_build(G, PC_OP_gather, in, 2, &a, 1) : NULL);
}

/* TreeEnsemble: every tree becomes nested selects over its decisions, each leaf a one-hot row of
 * its weight at its target; the trees' rows add up (aggregate SUM or AVERAGE, no post transform) */
#define TE_MAX_NODES 4096
#define TE_MAX_DEPTH 64

typedef struct te_model {
  int64_t n_nodes, n_leaves, n_targets, n_members, cursor;
  int64_t feat[TE_MAX_NODES], tnode[TE_MAX_NODES], fnode[TE_MAX_NODES], tleaf[TE_MAX_NODES], fleaf[TE_MAX_NODES];
  int64_t mode[TE_MAX_NODES], missing[TE_MAX_NODES], target[TE_MAX_NODES];
  double split[TE_MAX_NODES], weight[TE_MAX_NODES], members[TE_MAX_NODES];
  pc_value *memo[TE_MAX_NODES]; /* each inner node's value once: children shared by several parents (a DAG) would
                                 * otherwise be rebuilt once per path, 2^depth times */
  pc_value *x;
} te_model;

/* a TENSOR attribute's values as doubles; the count, -1 when absent */
static int te_floats(ox_ctx *c, const char *name, double *out, int max) {
  pc_value *v = ox_attr_tensor(c, name);
  if (!v) return -1;
  const void *d = pc_const_data(v);
  int64_t n = pc_type_numel(&v->type);
  if (n > max || (v->type.dtype != PC_f32 && v->type.dtype != PC_f64 && v->type.dtype != PC_u8))
    return ox_fail(c, PC_ERR_ATTR, "attribute %s: too long or of an unexpected type", name), -2;
  for (int64_t k = 0; k < n; k++)
    out[k] = v->type.dtype == PC_f32 ? ((const float *)d)[k] : v->type.dtype == PC_f64 ? ((const double *)d)[k] : ((const uint8_t *)d)[k];
  return (int)n;
}

/* the [N, 1] decision of node i on the rows of X */
static pc_value *te_decide(ox_ctx *c, te_model *m, int64_t i) {
  pc_value *x = m->x;
  int64_t N = x->type.dims[0], st[2] = {0, m->feat[i]}, lim[2] = {N, m->feat[i] + 1}, one[2] = {1, 1};
  pc_value *f = pc_slice(G, x, st, lim, one), *d = NULL;
  static const pc_op cmp[] = {PC_OP_le, PC_OP_lt, PC_OP_ge, PC_OP_gt, PC_OP_eq, PC_OP_ne};
  if (m->mode[i] >= 0 && m->mode[i] < 6) d = ox_binary_s(c, cmp[m->mode[i]], f, m->split[i]);
  else if (m->mode[i] == 6) { /* membership: the next NaN-terminated run of members */
    for (; m->cursor < m->n_members && m->members[m->cursor] == m->members[m->cursor]; m->cursor++) {
      pc_value *e = ox_binary_s(c, PC_OP_eq, f, m->members[m->cursor]);
      d = d ? pc_or(G, d, e) : e;
    }
    m->cursor++;
    if (!d && f) d = pc_full(G, PC_bool, 0, 2, f->type.dims); /* an empty set: never */
  } else return ox_fail(c, PC_ERR_ATTR, "node %lld has mode %lld", (long long)i, (long long)m->mode[i]), NULL;
  if (d && m->missing[i]) d = pc_or(G, d, pc_isnan(G, f));
  return d;
}

static pc_value *te_leaf(ox_ctx *c, te_model *m, int64_t i) {
  if (i < 0 || i >= m->n_leaves || m->target[i] < 0 || m->target[i] >= m->n_targets)
    return ox_fail(c, PC_ERR_ATTR, "leaf %lld is out of range", (long long)i), NULL;
  int64_t shape[2] = {m->x->type.dims[0], m->n_targets}, t = m->target[i], one = 1;
  pc_value *row = pc_full(G, m->x->type.dtype, 0, 1, &m->n_targets);
  pc_value *w = pc_full(G, m->x->type.dtype, m->weight[i], 1, &one);
  int64_t lo = t, hi = m->n_targets - t - 1, in = 0;
  pc_attr a[4] = {pc_a_ints("low", &lo, 1), pc_a_ints("high", &hi, 1), pc_a_ints("interior", &in, 1), pc_a_float("value", 0)};
  pc_value *hot = w ? pc_build(G, PC_OP_pad, &w, 1, a, 4) : row;
  return hot ? pc_broadcast_to(G, hot, 2, shape) : NULL;
}

static pc_value *te_node(ox_ctx *c, te_model *m, int64_t i, int is_leaf, int depth) {
  if (ox_status(c) != PC_OK) return NULL; /* a failed subtree: stop, do not retry it on every path */
  if (is_leaf) return te_leaf(c, m, i);
  if (i < 0 || i >= m->n_nodes || depth > TE_MAX_DEPTH) return ox_fail(c, PC_ERR_ATTR, "bad tree node %lld", (long long)i), NULL;
  if (m->memo[i]) return m->memo[i];
  pc_value *d = te_decide(c, m, i);
  pc_value *t = te_node(c, m, m->tnode[i], m->tleaf[i] != 0, depth + 1), *f = te_node(c, m, m->fnode[i], m->fleaf[i] != 0, depth + 1);
  if (!d || !t || !f) return NULL;
  return m->memo[i] = pc_where(G, pc_broadcast_to(G, d, 2, t->type.dims), t, f);
}

static int te_ints(ox_ctx *c, const char *name, int64_t *out, int64_t n, int required) {
  int got = ox_attr_ints(c, name, out, TE_MAX_NODES);
  if (got == -1 && !required) {
    for (int64_t i = 0; i < n; i++) out[i] = 0;
    return 1;
  }
  if (got < 0 || (n >= 0 && got != n)) return got == -2 ? 0 : (ox_fail(c, PC_ERR_ATTR, "attribute %s is missing or of the wrong length", name), 0);
  return 1;
}

pc_status ox_op_TreeEnsemble(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0);
  if (!x || !ox_check_static_input(c, x) || !ox_require_float(c, x)) return ox_status(c);
  if (x->type.rank != 2) return ox_fail(c, PC_ERR_SHAPE, "X must be [N, features]");
  int64_t agg = ox_attr_int(c, "aggregate_function", 1), post = ox_attr_int(c, "post_transform", 0);
  if ((agg != 0 && agg != 1) || post != 0)
    return ox_fail(c, PC_ERR_UNSUPPORTED, "aggregate_function %lld / post_transform %lld (SUM or AVERAGE, no transform)", (long long)agg, (long long)post);
  te_model *m = pc_alloc(G, sizeof *m);
  int64_t roots[TE_MAX_NODES];
  if (!m) return ox_status(c);
  memset(m->memo, 0, sizeof m->memo);
  m->x = x;
  m->n_targets = ox_attr_int(c, "n_targets", 0);
  double modes[TE_MAX_NODES];
  int nm = te_floats(c, "nodes_modes", modes, TE_MAX_NODES), ns = te_floats(c, "nodes_splits", m->split, TE_MAX_NODES);
  int nw = te_floats(c, "leaf_weights", m->weight, TE_MAX_NODES), nmem = te_floats(c, "membership_values", m->members, TE_MAX_NODES);
  int nr = ox_attr_ints(c, "tree_roots", roots, TE_MAX_NODES);
  if (nm < 0 || ns != nm || nw < 0 || nmem == -2 || nr < 1 || m->n_targets < 1)
    return ox_status(c) != PC_OK ? ox_status(c) : ox_fail(c, PC_ERR_ATTR, "incomplete tree ensemble attributes");
  m->n_nodes = nm, m->n_leaves = nw, m->n_members = nmem < 0 ? 0 : nmem;
  for (int i = 0; i < nm; i++) m->mode[i] = (int64_t)modes[i];
  if (!te_ints(c, "nodes_featureids", m->feat, nm, 1) || !te_ints(c, "nodes_truenodeids", m->tnode, nm, 1) ||
      !te_ints(c, "nodes_falsenodeids", m->fnode, nm, 1) || !te_ints(c, "nodes_trueleafs", m->tleaf, nm, 1) ||
      !te_ints(c, "nodes_falseleafs", m->fleaf, nm, 1) || !te_ints(c, "nodes_missing_value_tracks_true", m->missing, nm, 0) ||
      !te_ints(c, "leaf_targetids", m->target, nw, 1))
    return ox_status(c);
  for (int i = 0; i < nm; i++)
    if (m->feat[i] < 0 || m->feat[i] >= x->type.dims[1]) return ox_fail(c, PC_ERR_ATTR, "node %d reads feature %lld", i, (long long)m->feat[i]);
  pc_value *sum = NULL;
  for (int r = 0; r < nr && ox_status(c) == PC_OK; r++) {
    int64_t i = roots[r];
    int leaf = i >= 0 && i < nm && m->tleaf[i] && m->fleaf[i] && m->tnode[i] == m->fnode[i];
    pc_value *t = te_node(c, m, i, leaf, 0);
    sum = sum && t ? pc_add(G, sum, t) : t;
  }
  if (sum && agg == 0) sum = ox_binary_s(c, PC_OP_div, sum, (double)nr);
  return ox_out(c, 0, sum);
}

/* ---------------------------------------------------------------- TfIdfVectorizer */

#define TFIDF_MAX_POOL 4096

/* occurrences in each row of X (last axis) of the n-gram g whose items lie d apart */
static pc_value *tfidf_count(ox_ctx *c, pc_value *x, const int64_t *g, int n, int64_t d) {
  int r = x->type.rank;
  int64_t C = x->type.dims[r - 1], P = C - (int64_t)(n - 1) * d, ax = r - 1;
  if (P <= 0) return NULL;
  int64_t st[2] = {0, 0}, lim[2], one[2] = {1, 1};
  pc_value *hit = NULL;
  for (int k = 0; k < n; k++) {
    for (int i = 0; i < r; i++) lim[i] = x->type.dims[i];
    st[r - 1] = k * d, lim[r - 1] = k * d + P;
    pc_value *e = ox_binary_s(c, PC_OP_eq, pc_slice(G, x, st, lim, one), (double)g[k]);
    hit = hit ? pc_and(G, hit, e) : e;
  }
  return ox_reduce(c, PC_OP_reduce_sum, pc_convert(G, hit, PC_f32), 1, &ax, 0);
}

/* counts of the pool's n-grams in each row of X, with skips, weighted (TF, IDF, TFIDF) */
pc_status ox_op_TfIdfVectorizer(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0);
  if (!x || !ox_check_static_input(c, x)) return ox_status(c);
  if ((x->type.rank != 1 && x->type.rank != 2) || !pc_dtype_is_int(x->type.dtype))
    return ox_fail(c, PC_ERR_UNSUPPORTED, "needs int tokens of rank 1 or 2 (string pools are not supported)");
  int64_t *pool = pc_alloc(G, sizeof *pool * TFIDF_MAX_POOL), counts[64], *index = pc_alloc(G, sizeof *index * TFIDF_MAX_POOL);
  double *w = pc_alloc(G, sizeof *w * TFIDF_MAX_POOL);
  int64_t lo = ox_attr_int(c, "min_gram_length", 1), hi = ox_attr_int(c, "max_gram_length", 1), skip = ox_attr_int(c, "max_skip_count", 0);
  int np = pool ? ox_attr_ints(c, "pool_int64s", pool, TFIDF_MAX_POOL) : -2, nc = ox_attr_ints(c, "ngram_counts", counts, 64);
  int ni = index ? ox_attr_ints(c, "ngram_indexes", index, TFIDF_MAX_POOL) : -2, nw = w ? ox_attr_floats(c, "weights", w, TFIDF_MAX_POOL) : -2;
  const char *mode = ox_attr_str(c, "mode", "TF");
  int tf = !strcmp(mode, "TF"), idf = !strcmp(mode, "IDF");
  if (np < 0 || nc < 1 || ni < 0 || nw == -2 || lo < 1 || hi < lo || skip < 0 || (!tf && !idf && strcmp(mode, "TFIDF")))
    return ox_status(c) != PC_OK ? ox_status(c) : ox_fail(c, PC_ERR_ATTR, "bad or missing pool_int64s, ngram_counts, ngram_indexes, gram lengths or mode");
  for (int L = 0; L < nc; L++)
    if (counts[L] < 0 || counts[L] > np || (L && counts[L] < counts[L - 1]))
      return ox_fail(c, PC_ERR_ATTR, "ngram_counts must rise from 0 within the %d pool entries", np);
  int64_t out_n = 0;
  for (int i = 0; i < ni; i++) {
    if (index[i] < 0 || index[i] >= TFIDF_MAX_POOL)
      return ox_fail(c, PC_ERR_ATTR, "ngram_indexes[%d] = %lld is outside [0, %d)", i, (long long)index[i], TFIDF_MAX_POOL);
    out_n = index[i] + 1 > out_n ? index[i] + 1 : out_n;
  }
  pc_value **col = pc_alloc(G, sizeof *col * (size_t)(out_n + 1));
  int g_id = 0; /* the pool's n-grams, level by level: level L holds (L+1)-grams */
  for (int L = 0; col && L < nc && ox_status(c) == PC_OK; L++) {
    int64_t n = L + 1, end = L + 1 < nc ? counts[L + 1] : np;
    for (int64_t at = counts[L]; at + n <= end && g_id < ni; at += n, g_id++) {
      if (n < lo || n > hi || index[g_id] < 0) continue;
      pc_value *sum = NULL;
      /* unigrams do not skip; an n-gram's items d apart fit a row of C tokens only while (n - 1) d < C,
       * so larger skips add nothing (a max_skip_count near 2^63 once looped that many times: fuzz_mutate) */
      int64_t C = x->type.dims[x->type.rank - 1], dmax = n == 1 ? 1 : (C > 1 ? (C - 1) / (n - 1) : 1);
      if (n > 1 && skip < dmax) dmax = skip + 1;
      for (int64_t d = 1; d <= dmax; d++) {
        pc_value *k = tfidf_count(c, x, pool + at, (int)n, d);
        sum = sum && k ? pc_add(G, sum, k) : k ? k : sum;
      }
      if (sum) col[index[g_id]] = col[index[g_id]] ? pc_add(G, col[index[g_id]], sum) : sum;
    }
  }
  if (!col || ox_status(c) != PC_OK) return ox_status(c);
  int r = x->type.rank;
  int64_t one_shape[2] = {x->type.dims[0], 1};
  for (int64_t i = 0; i < out_n; i++) {
    pc_value *v = col[i] ? ox_reshape(c, col[i], r, r == 2 ? one_shape : (int64_t[]){1}) : pc_full(G, PC_f32, 0, r, r == 2 ? one_shape : (int64_t[]){1});
    if (v && !tf) { /* IDF: the weight where present; TFIDF: weight * count (weights default to 1) */
      double wi = i < nw ? w[i] : 1;
      v = idf ? pc_where(G, ox_binary_s(c, PC_OP_gt, v, 0), ox_like(c, wi, v), ox_like(c, 0, v)) : ox_binary_s(c, PC_OP_mul, v, wi);
    }
    col[i] = v;
  }
  return ox_out(c, 0, pc_concatenate(G, col, (int)out_n, r - 1));
}
