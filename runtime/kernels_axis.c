/* runtime/kernels_axis.c: the kernels along one axis: cumsum and sort/topk (stable, NaN last). */
#include "runtime/kernels.h"

/* ---------------------------------------------------------------- cumsum */

/* params: dtype, x, out shapes, axis, exclusive, reverse */
int primc_k_cumsum(const int64_t *q, void *const *bufs) {
  shp x, o;
  const int64_t *r = get_shape(get_shape(q + 1, &x), &o);
  int dt = (int)q[0], axis = (int)r[0], excl = (int)r[1], rev = (int)r[2];
  int64_t outer, len, inner;
  split_axis(&x, axis, &outer, &len, &inner);
  for (int64_t a = 0; a < outer; a++)
    for (int64_t c = 0; c < inner; c++) {
      double sf = 0;
      uint64_t si = 0;
      for (int64_t t = 0; t < len; t++) {
        int64_t k = rev ? len - 1 - t : t, i = (a * len + k) * inner + c;
        double vf = is_float(dt) ? get_f(bufs[1], i, dt) : 0;
        uint64_t vi = is_float(dt) ? 0 : (uint64_t)get_i(bufs[1], i, dt);
        if (!excl) sf += vf, si += vi;
        if (is_float(dt)) set_f(bufs[0], i, dt, sf);
        else set_i(bufs[0], i, dt, (int64_t)si);
        if (excl) sf += vf, si += vi;
      }
    }
  return PRIMC_OK;
}

/* ---------------------------------------------------------------- sort, topk */

typedef struct sort_ctx {
  const void *x;
  int dt, desc;
  int64_t base, inner;
} sort_ctx;

/* -1, 0, 1 comparing elements at positions i and j along the axis; NaN sorts last */
static int cmp_elems(const sort_ctx *s, int64_t i, int64_t j) {
  int64_t a = s->base + i * s->inner, b = s->base + j * s->inner;
  int c;
  if (is_float(s->dt)) {
    double x = get_f(s->x, a, s->dt), y = get_f(s->x, b, s->dt);
    if (isnan(x) || isnan(y)) return isnan(x) - isnan(y);
    c = (x > y) - (x < y);
  } else {
    int64_t x = ordered(get_i(s->x, a, s->dt), s->dt), y = ordered(get_i(s->x, b, s->dt), s->dt);
    c = (x > y) - (x < y);
  }
  return s->desc ? -c : c;
}

/* stable merge sort of the index permutation */
static void merge_sort(const sort_ctx *s, int64_t *v, int64_t *tmp, int64_t n) {
  if (n < 2) return;
  int64_t h = n / 2, i = 0, j = h, k = 0;
  merge_sort(s, v, tmp, h);
  merge_sort(s, v + h, tmp, n - h);
  while (i < h && j < n) tmp[k++] = cmp_elems(s, v[j], v[i]) < 0 ? v[j++] : v[i++];
  while (i < h) tmp[k++] = v[i++];
  while (j < n) tmp[k++] = v[j++];
  memcpy(v, tmp, sizeof *v * (size_t)n);
}

/* params: dtype, x, values, indices shapes, axis, descending (largest), k (-1: sort); bufs: values, indices, x, scratch */
int primc_k_sort(const int64_t *q, void *const *bufs) {
  shp x, vs, is;
  const int64_t *r = get_shape(get_shape(get_shape(q + 1, &x), &vs), &is);
  int dt = (int)q[0], axis = (int)r[0];
  if (axis < 0) axis += x.rank;
  int64_t outer, len, inner, k = r[2] < 0 ? (x.rank ? x.d[axis] : 1) : r[2];
  split_axis(&x, axis, &outer, &len, &inner);
  size_t es = dsize(dt);
  int64_t *perm = bufs[3]; /* workspace scratch: 2 * len */
  for (int64_t a = 0; a < outer; a++)
    for (int64_t c = 0; c < inner; c++) {
      sort_ctx s = {bufs[2], dt, (int)r[1], a * len * inner + c, inner};
      for (int64_t i = 0; i < len; i++) perm[i] = i;
      merge_sort(&s, perm, perm + len, len);
      for (int64_t t = 0; t < k && t < len; t++) {
        int64_t o = (a * k + t) * inner + c;
        memcpy((char *)bufs[0] + (size_t)o * es, (const char *)bufs[2] + (size_t)(s.base + perm[t] * inner) * es, es);
        ((int64_t *)bufs[1])[o] = perm[t];
      }
    }
  return PRIMC_OK;
}
