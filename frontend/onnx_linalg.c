/* frontend/onnx_linalg.c: decompositions of the ONNX contractions and linear algebra into prims: MatMul, Gemm
 * and Einsum into dot_general, and Det by cofactor expansion. */
#include "frontend/onnx_internal.h"

#include <stdlib.h>
#include <string.h>

#define G (c->g)
#define X0 ox_in_req(c, 0)

/* ---------------------------------------------------------------- contractions */

static pc_value *matmul(ox_ctx *c, pc_value *a, pc_value *b) {
  if (!a || !b) return NULL;
  if (a->type.dtype != b->type.dtype) return ox_fail(c, PC_ERR_TYPE, "operands have different types"), NULL;
  int ra = a->type.rank, rb = b->type.rank;
  if (ra == 0 || rb == 0) return ox_fail(c, PC_ERR_SHAPE, "MatMul of a scalar"), NULL;
  int64_t one = 1;
  int a1 = ra == 1, b1 = rb == 1;
  if (a1) a = ox_reshape(c, a, 2, (int64_t[]){1, a->type.dims[0]}), ra = 2;
  if (b1) b = ox_reshape(c, b, 2, (int64_t[]){b->type.dims[0], 1}), rb = 2;
  if (!a || !b) return NULL;
  pc_value *y;
  if (rb == 2) { /* contract a's last dim with b's rows: no batch broadcast of b needed */
    int64_t lc = ra - 1, rc = 0;
    y = pc_dot_general(G, a, b, 1, &lc, &rc, 0, NULL, NULL);
  } else {
    int nb = (ra > rb ? ra : rb) - 2;
    int64_t bs[PC_MAX_RANK], sa[PC_MAX_RANK], sb[PC_MAX_RANK], batch[PC_MAX_RANK];
    for (int i = 0; i < nb; i++) {
      int ia = i - (nb - (ra - 2)), ib = i - (nb - (rb - 2));
      int64_t da = ia >= 0 ? a->type.dims[ia] : 1, db = ib >= 0 ? b->type.dims[ib] : 1;
      if (da != db && da != 1 && db != 1) return ox_fail(c, PC_ERR_SHAPE, "batch dims %lld and %lld do not broadcast", (long long)da, (long long)db), NULL;
      bs[i] = da == 1 ? db : da;
      batch[i] = i;
    }
    memcpy(sa, bs, sizeof bs), memcpy(sb, bs, sizeof bs);
    sa[nb] = a->type.dims[ra - 2], sa[nb + 1] = a->type.dims[ra - 1];
    sb[nb] = b->type.dims[rb - 2], sb[nb + 1] = b->type.dims[rb - 1];
    a = pc_broadcast_to(G, a, nb + 2, sa), b = pc_broadcast_to(G, b, nb + 2, sb);
    int64_t lc = nb + 1, rc = nb;
    y = pc_dot_general(G, a, b, 1, &lc, &rc, nb, batch, batch);
  }
  if (!y || (!a1 && !b1)) return y;
  int64_t s[PC_MAX_RANK];
  int k = 0, r = y->type.rank;
  for (int i = 0; i < r; i++)
    if (!((a1 && i == r - 2) || (b1 && i == r - 1))) s[k++] = y->type.dims[i];
  (void)one;
  return ox_reshape(c, y, k, s);
}

pc_status ox_op_MatMul(ox_ctx *c) { return ox_out(c, 0, matmul(c, X0, ox_in_req(c, 1))); }

pc_status ox_op_Gemm(ox_ctx *c) {
  pc_value *a = X0, *b = ox_in_req(c, 1), *cc = ox_in(c, 2);
  if (!a || !b) return ox_status(c);
  if (a->type.rank != 2 || b->type.rank != 2) return ox_fail(c, PC_ERR_SHAPE, "A and B must be 2-D");
  int64_t lc = ox_attr_int(c, "transA", 0) ? 0 : 1, rc = ox_attr_int(c, "transB", 0) ? 1 : 0;
  double alpha = ox_attr_float(c, "alpha", 1.0), beta = ox_attr_float(c, "beta", 1.0);
  pc_value *y = pc_dot_general(G, a, b, 1, &lc, &rc, 0, NULL, NULL);
  if (y && alpha != 1.0) y = ox_mul_s(c, y, alpha);
  if (y && cc && beta != 0.0) {
    if (beta != 1.0) cc = ox_mul_s(c, cc, beta);
    pc_value *yb = ox_binary(c, PC_OP_add, y, cc);
    if (yb && !pc_type_equal(&yb->type, &y->type)) return ox_fail(c, PC_ERR_SHAPE, "C does not broadcast to [M, N]");
    y = yb;
  }
  return ox_out(c, 0, y);
}

/* ---- Einsum: "..." becomes letters the equation does not use, repeated letters in a term take the diagonal,
 * size-1 dims that broadcast are dropped; then operands are reduced over letters nobody needs and contracted
 * pairwise */

typedef struct ein_term {
  pc_value *v;
  char idx[PC_MAX_RANK + 1];
} ein_term;

static int ein_letter(char ch) { return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z'); }

/* letters of a term of len chars, and whether it holds "..." (at most once, the only '.' allowed); -1 if bad */
static int ein_count_letters(ox_ctx *c, const char *s, size_t len, int *has_ellipsis) {
  int n = 0;
  *has_ellipsis = 0;
  for (size_t i = 0; i < len; i++) {
    if (ein_letter(s[i])) {
      n++;
    } else if (s[i] == '.' && !*has_ellipsis && i + 2 < len && s[i + 1] == '.' && s[i + 2] == '.') {
      *has_ellipsis = 1;
      i += 2;
    } else {
      return ox_fail(c, PC_ERR_ATTR, "einsum term '%.*s': unexpected '%c'", (int)len, s, s[i]), -1;
    }
  }
  return n;
}

/* term s (len chars) with its "..." replaced by ell into out; 0 when too long */
static int ein_expand(ox_ctx *c, const char *s, size_t len, const char *ell, char *out) {
  size_t k = 0, n_ell = strlen(ell);
  for (size_t i = 0; i < len; i++) {
    size_t add = s[i] == '.' ? n_ell : 1;
    if (k + add > PC_MAX_RANK) return ox_fail(c, PC_ERR_UNSUPPORTED, "einsum term of rank above %d", PC_MAX_RANK), 0;
    if (s[i] == '.') memcpy(out + k, ell, n_ell), i += 2;
    else out[k] = s[i];
    k += add;
  }
  out[k] = 0;
  return 1;
}

/* drops letter position i of t: a size-1 dim (reshape) */
static void ein_drop_dim(ox_ctx *c, ein_term *t, int i) {
  int64_t dims[PC_MAX_RANK];
  int r = t->v->type.rank, k = 0;
  for (int d = 0; d < r; d++)
    if (d != i) dims[k++] = t->v->type.dims[d];
  t->v = pc_reshape(G, t->v, k, dims);
  memmove(t->idx + i, t->idx + i + 1, strlen(t->idx + i));
}

/* a letter repeated in one term (positions p < q) keeps the diagonal: zero off it, then sum over q */
static void ein_diagonal(ox_ctx *c, ein_term *t, int p, int q) {
  pc_value *x = t->v;
  const int64_t *d = x->type.dims;
  if (d[p] != d[q]) {
    ox_fail(c, PC_ERR_SHAPE, "einsum letter '%c' has sizes %lld and %lld in one term", t->idx[p], (long long)d[p], (long long)d[q]);
    return;
  }
  int r = x->type.rank;
  pc_value *on = ox_binary(c, PC_OP_eq, ox_iota(c, PC_i64, r, d, p), ox_iota(c, PC_i64, r, d, q));
  int64_t ax = q;
  t->v = pc_reduce(G, PC_OP_reduce_sum, pc_where(G, on, x, ox_like(c, 0, x)), 1, &ax);
  memmove(t->idx + q, t->idx + q + 1, strlen(t->idx + q));
}

static void ein_diagonals(ox_ctx *c, ein_term *t) {
  for (int q = 1; t->idx[q] && ox_status(c) == PC_OK; q++) {
    const char *p = memchr(t->idx, t->idx[q], (size_t)q);
    if (p) ein_diagonal(c, t, (int)(p - t->idx), q--);
  }
}

/* numpy broadcasting per letter: a size-1 dim where another operand has the letter larger is dropped (the
 * letter then lives in the other operands only); other differing sizes are an error */
static void ein_broadcast(ox_ctx *c, ein_term *t, int n) {
  for (int ch = 0; ch < 128 && ox_status(c) == PC_OK; ch++) {
    int64_t size = 1;
    for (int i = 0; i < n; i++) {
      const char *p = ein_letter((char)ch) ? strchr(t[i].idx, ch) : NULL;
      int64_t d = p ? t[i].v->type.dims[p - t[i].idx] : 1;
      if (d == 1) continue;
      if (size != 1 && d != size) {
        ox_fail(c, PC_ERR_SHAPE, "einsum letter '%c' has sizes %lld and %lld", ch, (long long)size, (long long)d);
        return;
      }
      size = d;
    }
    for (int i = 0; i < n && size != 1; i++) {
      const char *p = ein_letter((char)ch) ? strchr(t[i].idx, ch) : NULL;
      if (p && t[i].v->type.dims[p - t[i].idx] == 1) ein_drop_dim(c, &t[i], (int)(p - t[i].idx));
    }
  }
}

/* sums t over its letters absent from `keep` */
static void ein_reduce(ox_ctx *c, ein_term *t, const char *keep) {
  int64_t axes[PC_MAX_RANK];
  char rest[PC_MAX_RANK + 1];
  int n = 0, k = 0;
  for (int i = 0; t->idx[i]; i++) {
    if (strchr(keep, t->idx[i])) rest[k++] = t->idx[i];
    else axes[n++] = i;
  }
  rest[k] = 0;
  if (!n) return;
  t->v = pc_reduce(G, PC_OP_reduce_sum, t->v, n, axes);
  strcpy(t->idx, rest);
}

/* a · b over shared letters: batch when kept, contracted otherwise */
static void ein_pair(ox_ctx *c, ein_term *a, const ein_term *b, const char *keep) {
  int64_t lc[PC_MAX_RANK], rc[PC_MAX_RANK], lb[PC_MAX_RANK], rb[PC_MAX_RANK];
  int nc = 0, nb = 0;
  char bat[PC_MAX_RANK + 1], out[3 * PC_MAX_RANK + 1];
  for (int i = 0; a->idx[i]; i++) {
    const char *p = strchr(b->idx, a->idx[i]);
    if (!p) continue;
    if (strchr(keep, a->idx[i])) lb[nb] = i, rb[nb] = p - b->idx, bat[nb++] = a->idx[i];
    else lc[nc] = i, rc[nc++] = p - b->idx;
  }
  int k = 0;
  for (int i = 0; i < nb; i++) out[k++] = bat[i];
  for (int i = 0; a->idx[i]; i++)
    if (!strchr(b->idx, a->idx[i])) out[k++] = a->idx[i];
  for (int i = 0; b->idx[i]; i++)
    if (!strchr(a->idx, b->idx[i])) out[k++] = b->idx[i];
  out[k] = 0;
  if (k > PC_MAX_RANK) {
    ox_fail(c, PC_ERR_UNSUPPORTED, "einsum intermediate rank %d exceeds %d", k, PC_MAX_RANK);
    return;
  }
  a->v = pc_dot_general(G, a->v, b->v, nc, lc, rc, nb, lb, rb);
  strcpy(a->idx, out);
}

/* an equation without "->" outputs "..." (when used) then the letters that occur once, in alphabetical order */
static void ein_implicit_output(char *buf, size_t cap) {
  int count[256] = {0};
  for (const char *p = buf; *p; p++) count[(unsigned char)*p]++;
  size_t k = strlen(buf);
  int ell = strstr(buf, "...") != NULL;
  if (k + 5 > cap) return;
  buf[k++] = '-', buf[k++] = '>';
  if (ell) buf[k++] = '.', buf[k++] = '.', buf[k++] = '.';
  for (int ch = 'A'; ch <= 'z' && k + 1 < cap; ch++)
    if (ein_letter((char)ch) && count[ch] == 1) buf[k++] = (char)ch;
  buf[k] = 0;
}

/* the inputs' terms with "..." spelled as unused letters (right-aligned: an operand with fewer ellipsis dims
 * takes the last ones), the output likewise with all of them */
static int ein_terms(ox_ctx *c, const char *lhs, const char *rhs, ein_term *t, char *outidx) {
  const char *s = lhs, *start[6];
  size_t len[6];
  int ell_rank[6], n_ell = 0, has;
  for (int i = 0; i < c->n_in; i++) {
    const char *comma = strchr(s, ',');
    start[i] = s, len[i] = comma ? (size_t)(comma - s) : strlen(s);
    s = comma ? comma + 1 : s + len[i];
    t[i].v = ox_in_req(c, i);
    int n = ein_count_letters(c, start[i], len[i], &has);
    if (!t[i].v || n < 0) return 0;
    ell_rank[i] = t[i].v->type.rank - n;
    if (ell_rank[i] < 0 || (!has && ell_rank[i] != 0))
      return ox_fail(c, PC_ERR_SHAPE, "einsum term %d '%.*s' does not match rank %d", i, (int)len[i], start[i], t[i].v->type.rank), 0;
    if (ell_rank[i] > n_ell) n_ell = ell_rank[i];
  }
  char fresh[PC_MAX_RANK + 1];
  int k = 0;
  for (int ch = 'A'; ch <= 'z' && k < n_ell; ch++)
    if (ein_letter((char)ch) && !strchr(lhs, ch) && !strchr(rhs, ch)) fresh[k++] = (char)ch;
  fresh[k] = 0;
  for (int i = 0; i < c->n_in; i++)
    if (!ein_expand(c, start[i], len[i], fresh + n_ell - ell_rank[i], t[i].idx)) return 0;
  if (ein_count_letters(c, rhs, strlen(rhs), &has) < 0) return 0;
  if (n_ell && !has) return ox_fail(c, PC_ERR_ATTR, "einsum output has no '...' for the inputs' %d ellipsis dims", n_ell), 0;
  if (!ein_expand(c, rhs, strlen(rhs), fresh, outidx)) return 0;
  for (int i = 0; outidx[i]; i++)
    if (strchr(outidx + i + 1, outidx[i])) return ox_fail(c, PC_ERR_ATTR, "einsum output repeats '%c'", outidx[i]), 0;
  return 1;
}

pc_status ox_op_Einsum(ox_ctx *c) {
  const char *eq = ox_attr_str(c, "equation", "");
  char buf[256];
  size_t k = 0;
  for (const char *p = eq; *p && k < sizeof buf - 1; p++)
    if (*p != ' ') buf[k++] = *p;
  buf[k] = 0;
  if (c->n_in > 6) return ox_fail(c, PC_ERR_UNSUPPORTED, "einsum of %d operands (at most 6)", c->n_in);
  if (!strstr(buf, "->")) ein_implicit_output(buf, sizeof buf);
  char *arrow = strstr(buf, "->");
  if (!arrow) return ox_fail(c, PC_ERR_UNSUPPORTED, "einsum equation '%s' is too long", eq);
  *arrow = 0;
  char outidx[PC_MAX_RANK + 1];
  ein_term *t = calloc((size_t)c->n_in + 1, sizeof *t);
  if (!t) return ox_fail(c, PC_ERR_NOMEM, "out of memory");
  if (ein_terms(c, buf, arrow + 2, t, outidx)) {
    for (int i = 0; i < c->n_in && ox_status(c) == PC_OK; i++) ein_diagonals(c, &t[i]);
    if (ox_status(c) == PC_OK) ein_broadcast(c, t, c->n_in);
  }
  for (int i = 0; i < c->n_in && ox_status(c) == PC_OK; i++) {
    char keep[8 * PC_MAX_RANK + 1];
    strcpy(keep, outidx); /* letters needed later: the output and every later operand */
    for (int j = i + 1; j < c->n_in; j++) strcat(keep, t[j].idx);
    if (i > 0) {
      ein_reduce(c, &t[i], strcat(strcpy((char[8 * PC_MAX_RANK + 1]){0}, keep), t[0].idx));
      ein_pair(c, &t[0], &t[i], keep);
    }
    ein_reduce(c, &t[0], keep);
  }
  pc_value *y = ox_status(c) == PC_OK ? t[0].v : NULL;
  if (y) {
    int64_t perm[PC_MAX_RANK];
    int r = (int)strlen(outidx), id = 1;
    for (int i = 0; i < r; i++) {
      const char *p = strchr(t[0].idx, outidx[i]);
      if (!p) { free(t); return ox_fail(c, PC_ERR_ATTR, "output letter '%c' is in no input", outidx[i]); }
      perm[i] = p - t[0].idx;
      id &= perm[i] == i;
    }
    if (!id) y = pc_transpose(G, y, perm);
  }
  free(t);
  return ox_out(c, 0, y);
}

/* ---------------------------------------------------------------- Det */

#define DET_MAX_N 5 /* cofactor expansion: n! products */

/* determinant of the rows from `row` on and the columns in `cols` (bit set) by cofactor expansion */
static pc_value *det_minor(ox_ctx *c, pc_value *const *e, int n, int row, unsigned cols) {
  if (row == n) return NULL;
  pc_value *sum = NULL;
  int sign = 1;
  for (int j = 0; j < n; j++) {
    if (!(cols & (1u << j))) continue;
    pc_value *rest = det_minor(c, e, n, row + 1, cols & ~(1u << j));
    pc_value *t = rest ? pc_mul(G, e[row * n + j], rest) : e[row * n + j];
    sum = !sum ? t : sign > 0 ? pc_add(G, sum, t) : pc_sub(G, sum, t);
    sign = -sign;
  }
  return sum;
}

pc_status ox_op_Det(ox_ctx *c) {
  pc_value *x = ox_in_req(c, 0);
  if (!x || !ox_check_static_input(c, x) || !ox_require_float(c, x)) return ox_status(c);
  int r = x->type.rank;
  if (r < 2 || x->type.dims[r - 1] != x->type.dims[r - 2]) return ox_fail(c, PC_ERR_SHAPE, "needs [..., n, n] matrices");
  int64_t n = x->type.dims[r - 1];
  if (n < 1 || n > DET_MAX_N) return ox_fail(c, PC_ERR_UNSUPPORTED, "determinants of %lld x %lld matrices (at most %d)", (long long)n, (long long)n, DET_MAX_N);
  pc_value *e[DET_MAX_N * DET_MAX_N];
  int64_t start[PC_MAX_RANK] = {0}, limit[PC_MAX_RANK], one[PC_MAX_RANK];
  for (int i = 0; i < r; i++) limit[i] = x->type.dims[i], one[i] = 1;
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < n; j++) {
      start[r - 2] = i, limit[r - 2] = i + 1, start[r - 1] = j, limit[r - 1] = j + 1;
      e[i * n + j] = ox_reshape(c, pc_slice(G, x, start, limit, one), r - 2, x->type.dims);
    }
  return ox_out(c, 0, det_minor(c, e, (int)n, 0, (1u << n) - 1));
}
