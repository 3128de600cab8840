/* passes/ad_pool.c: a max pool's backward as one scatter of the output gradient to each window's maximum. */
#include "passes/autodiff.h"
#include "passes/rewrite.h"

#include <stdint.h>

/*
 * The frontends import a max pool as a chain of max over strided slices of the padded input, one per window
 * tap (frontend/onnx_pool.c's pool_taps). Differentiated node by node, each max split its gradient by masks and
 * each slice sent back a zero pad with interior steps: for ResNet-18's 3x3/2 stem pool at batch 8, a kernel
 * of nine masks, nine pads of 6.6 MB, their sums by stride phase and four concatenations, about 40 ms of a
 * training step. Taken as a whole, the chain's gradient is the output gradient added at each window's first
 * maximum (torch's max_pool backward; a NaN wins as the first NaN): the window's flat position of that tap,
 * picked by a chain of selects over the taps (last to first), and one scatter-add of gy into zeros of the
 * padded input's size.
 */

/* s, the next tap: a slice of m->xp's spatial dims (whole batch and channel dims) of the first tap's type and
 * steps (s is the first when none is taken yet) */
static int tap_slice(ad_pool *m, const pc_node *s) {
  if (!s || s->op != PC_OP_slice || s->dead) return 0;
  const pc_value *x = s->in[0];
  const pc_type *xt = &x->type, *st = &s->out[0]->type;
  int ns = 0, nl = 0, nt = 0;
  const int64_t *start = pc_attr_ints(s, "start", &ns), *lim = pc_attr_ints(s, "limit", &nl);
  const int64_t *step = pc_attr_ints(s, "stride", &nt);
  if (!start || !lim || !step || ns != xt->rank || nt != xt->rank || xt->rank < 3 || !pc_type_is_static(xt)) return 0;
  if (m->n_taps == 0) m->xp = x, m->first = s;
  const pc_node *f = m->first;
  const int64_t *fstep = pc_attr_ints(f, "stride", NULL);
  if (x != m->xp || !pc_type_equal(st, &f->out[0]->type) || m->n_taps >= AD_POOL_MAX_TAPS) return 0;
  for (int d = 0; d < xt->rank; d++) {
    if (step[d] != fstep[d]) return 0;
    if (d < 2 && (start[d] != 0 || step[d] != 1 || st->dims[d] != xt->dims[d])) return 0;
  }
  m->taps[m->n_taps++] = s;
  return 1;
}

int ad_pool_match(const pc_graph *g, const pcp_users *u, const pc_node *root, ad_pool *m) {
  m->n_taps = 0, m->xp = NULL, m->first = NULL;
  if (root->op != PC_OP_max || !pc_dtype_is_float(root->out[0]->type.dtype)) return 0;
  /* walk down the chain: max(max(.. max(t0, t1) .., tK-2), tK-1), taps gathered last first */
  const pc_node *at = root, *rev[AD_POOL_MAX_TAPS];
  int n = 0;
  while (at->op == PC_OP_max) {
    const pc_node *right = at->in[1]->producer, *left = at->in[0]->producer;
    if (!right || n >= AD_POOL_MAX_TAPS - 1) return 0;
    rev[n++] = right;
    if (!left) return 0;
    if (left->op == PC_OP_max && (pcp_users_count(u, left->out[0]) != 1 || pc_value_is_output(g, left->out[0])))
      return 0;
    at = left;
  }
  rev[n++] = at;
  if (n < 2) return 0;
  for (int k = n - 1; k >= 0; k--)
    if (!tap_slice(m, rev[k])) return 0;
  return 1;
}

pc_value *ad_pool_backward(pc_graph *g, const ad_pool *m, pc_value *y, pc_value *gy) {
  const pc_type *yt = &y->type, *xt = &m->xp->type;
  int r = yt->rank, ns = r - 2;
  int64_t pstride[PC_MAX_RANK], P = 1;
  for (int d = ns - 1; d >= 0; d--) pstride[d] = P, P *= xt->dims[2 + d];
  const int64_t *step = pc_attr_ints(m->first, "stride", NULL);
  pc_dtype it = P <= INT32_MAX ? PC_i32 : PC_i64; /* positions within a plane: i32 halves their bytes */
  /* each output's window origin: sum over spatial dims of o_d s_d pstride_d */
  pc_value *base = NULL;
  for (int d = 0; d < ns; d++) {
    pc_attr ia[3] = {pc_a_dtype("dtype", it), pc_a_ints("shape", yt->dims, r), pc_a_int("axis", 2 + d)};
    pc_value *io = pc_build(g, PC_OP_iota, NULL, 0, ia, 3);
    int64_t scale = step[2 + d] * pstride[d];
    pc_value *t = scale == 1 ? io : pc_mul(g, io, pc_full(g, it, (double)scale, r, yt->dims));
    base = base ? pc_add(g, base, t) : t;
  }
  /* the first tap equal to the window's maximum (or the first NaN): selects from the last tap to the first */
  pc_value *pick = NULL;
  for (int k = m->n_taps - 1; k >= 0 && g->status == PC_OK; k--) {
    const int64_t *start = pc_attr_ints(m->taps[k], "start", NULL);
    int64_t off = 0;
    for (int d = 0; d < ns; d++) off += start[2 + d] * pstride[d];
    pc_value *o = pc_full(g, it, (double)off, r, yt->dims), *t = m->taps[k]->out[0];
    pick = pick ? pc_where(g, pc_or(g, pc_eq(g, t, y), pc_ne(g, t, t)), o, pick) : o;
  }
  int64_t flat[3] = {yt->dims[0], yt->dims[1], 1}, full[3] = {xt->dims[0], xt->dims[1], P};
  for (int d = 0; d < ns; d++) flat[2] *= yt->dims[2 + d];
  pc_value *pos = pc_reshape(g, pc_add(g, base, pick), 3, flat);
  pc_value *sum = ad_scatter_add(g, pc_full(g, xt->dtype, 0, 3, full), pos, pc_reshape(g, gy, 3, flat), 2);
  return pc_reshape(g, sum, xt->rank, xt->dims);
}
