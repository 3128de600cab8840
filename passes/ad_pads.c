/* passes/ad_pads.c: cotangents that are zero pads with interior steps (strided slices' gradients), summed by
 * stride phases instead of one full-size buffer each. */
#include "passes/autodiff.h"

/*
 * A max pool or strided conv imported as strided slices of one value sends that value one cotangent per kernel
 * tap, each a zero pad of the full size with interior steps: ResNet-18's 3x3/2 stem pool at batch 8 made nine
 * pads of [8, 64, 113, 113] (26 MB each, all live until one nine-way add: the training step's peak workspace)
 * for elements a quarter of which each pad sets. Along a dim with step s, the padded value's element i is
 * phase i % s, lattice position i / s; a pad starting at lo holds only phase lo % s, its operand's element k at
 * position lo / s + k. So per phase the pads are plain (step-free) pads of the operands onto a Q = ceil(D / s)
 * lattice, summed there; the phases interleave by concatenation along an axis of size s inserted after each
 * strided dim, a reshape merging each (Q, s) pair and a slice back to D.
 */

int ad_strided_pad(const pc_value *c) {
  const pc_node *n = c ? c->producer : NULL;
  if (!n || n->op != PC_OP_pad || pc_attr_float(n, "value", 0) != 0) return 0;
  int nl = 0, nh = 0, ni = 0, strided = 0;
  const int64_t *lo = pc_attr_ints(n, "low", &nl), *hi = pc_attr_ints(n, "high", &nh);
  const int64_t *in = pc_attr_ints(n, "interior", &ni);
  int r = c->type.rank;
  if (!lo || !hi || !in || nl != r || nh != r || ni != r) return 0;
  for (int d = 0; d < r; d++) {
    if (lo[d] < 0 || hi[d] < 0 || in[d] < 0) return 0;
    strided |= in[d] > 0;
  }
  return strided;
}

/* the two pads step alike in every dim (then their phases share one lattice) */
int ad_same_steps(const pc_value *a, const pc_value *b) {
  if (!pc_type_equal(&a->type, &b->type)) return 0;
  const int64_t *ia = pc_attr_ints(a->producer, "interior", NULL), *ib = pc_attr_ints(b->producer, "interior", NULL);
  for (int d = 0; d < a->type.rank; d++)
    if (ia[d] != ib[d]) return 0;
  return 1;
}

#define MAX_PHASES 64

pc_value *ad_sum_strided_pads(pc_graph *g, pc_value *const *pads, int n) {
  const pc_type *t = &pads[0]->type;
  const int64_t *in = pc_attr_ints(pads[0]->producer, "interior", NULL);
  int r = t->rank, ns = 0, sd[PC_MAX_RANK];
  int64_t s[PC_MAX_RANK], q[PC_MAX_RANK], nph = 1;
  for (int d = 0; d < r; d++) {
    s[d] = in[d] + 1;
    q[d] = (t->dims[d] + s[d] - 1) / s[d];
    if (s[d] > 1) sd[ns++] = d, nph *= s[d];
  }
  if (nph > MAX_PHASES || r + ns > PC_MAX_RANK) { /* too many phases to be worth it: the plain sum */
    pc_value *sum = pads[0];
    for (int i = 1; i < n; i++) sum = pc_add(g, sum, pads[i]);
    return sum;
  }
  pc_value *ph[MAX_PHASES] = {0};
  for (int i = 0; i < n && g->status == PC_OK; i++) {
    const pc_node *p = pads[i]->producer;
    const int64_t *lo = pc_attr_ints(p, "low", NULL);
    const pc_value *x = p->in[0];
    int64_t plo[PC_MAX_RANK], phi[PC_MAX_RANK], zero[PC_MAX_RANK] = {0}, at = 0;
    for (int d = 0; d < r; d++) {
      plo[d] = lo[d] / s[d];
      phi[d] = q[d] - plo[d] - x->type.dims[d];
    }
    for (int k = 0; k < ns; k++) at = at * s[sd[k]] + lo[sd[k]] % s[sd[k]];
    pc_attr a[4] = {pc_a_ints("low", plo, r), pc_a_ints("high", phi, r), pc_a_ints("interior", zero, r),
                    pc_a_float("value", 0)};
    pc_value *v = pc_build(g, PC_OP_pad, (pc_value **)&p->in[0], 1, a, 4);
    ph[at] = ph[at] ? pc_add(g, ph[at], v) : v;
  }
  /* each phase [.., Q, 1, ..] (an axis of 1 after each strided dim); a phase no pad holds is zeros */
  int64_t e[PC_MAX_RANK];
  int er = 0;
  for (int d = 0; d < r; d++) {
    e[er++] = q[d];
    if (s[d] > 1) e[er++] = 1;
  }
  for (int64_t i = 0; i < nph && g->status == PC_OK; i++)
    ph[i] = ph[i] ? pc_reshape(g, ph[i], er, e) : pc_full(g, t->dtype, 0, er, e);
  /* interleave: the last strided dim's phases first, each run of s of them concatenated along its axis */
  for (int k = ns - 1; k >= 0 && g->status == PC_OK; k--) {
    int d = sd[k];
    int64_t axis = d + k + 1, runs = nph / s[d];
    for (int64_t j = 0; j < runs; j++) ph[j] = pc_concatenate(g, ph + j * s[d], (int)s[d], axis);
    nph = runs;
  }
  int64_t full[PC_MAX_RANK], start[PC_MAX_RANK] = {0}, one[PC_MAX_RANK];
  for (int d = 0; d < r; d++) full[d] = q[d] * s[d], one[d] = 1;
  return pc_slice(g, pc_reshape(g, ph[0], r, full), start, t->dims, one);
}
