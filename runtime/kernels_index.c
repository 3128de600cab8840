/* runtime/kernels_index.c: the kernels driven by index data: gather, scatter, nonzero, and the output dims nonzero's count gives. */
#include "runtime/kernels.h"

/* ---------------------------------------------------------------- gather, scatter */

/* element offset in a row-major shape of the multi-index idx */
static int64_t offset_of(const shp *s, const int64_t *idx) {
  int64_t off = 0;
  for (int d = 0; d < s->rank; d++) off = off * s->d[d] + idx[d];
  return off;
}

/* x element strides: row-major, or the [offset, strides] that follow the params */
static int64_t x_strides(const shp *s, const int64_t *strided, int64_t *st) {
  int64_t acc = 1;
  for (int d = s->rank - 1; d >= 0; d--) {
    st[d] = strided ? strided[1 + d] : acc;
    acc *= s->d[d];
  }
  return strided ? strided[0] : 0;
}

/* the offset, by strides st, of the row of multi-index idx's first last dims, skipping axis (-1: none) */
static int64_t row_base(const int64_t *idx, int last, int axis, const int64_t *st) {
  int64_t base = 0;
  for (int d = 0; d < last; d++)
    if (d != axis) base += idx[d] * st[d];
  return base;
}

/* element i of the index tensor as an index into a dim of n, negatives from its end; -1 when outside */
static int64_t index_at(const void *ix, int64_t i, int idt, int64_t n) {
  int64_t j = idt == PRIMC_I64 ? ((const int64_t *)ix)[i] : get_i(ix, i, idt);
  if (j < 0) j += n;
  return j >= 0 && j < n ? j : -1;
}

/* one row of a gather: dst[t] = src[base + j(t) * sa + t * step] for t < inner, j(t) the index at i + t; 0 when an
 * index is out of range. Inlined, so the call with es 4 and i64 indices (an embedding's rows) is a loop of its own:
 * through the general one's per-element checks of the two, 0.60 ms for 1024 rows of 256 against 0.32 */
static inline __attribute__((always_inline)) int gather_row(char *dst, const char *src, const void *ix, int64_t i,
                                                           int64_t inner, int idt, int64_t n_ax, int64_t base,
                                                           int64_t sa, int64_t step, size_t es) {
  for (int64_t t = 0; t < inner; t++) {
    int64_t j = index_at(ix, i + t, idt, n_ax);
    if (j < 0) return 0;
    int64_t off = base + j * sa + t * step;
    if (es == 4) memcpy(dst + t * 4, src + off * 4, 4);
    else memcpy(dst + (size_t)t * es, src + (size_t)off * es, es);
  }
  return 1;
}

/* The last dim runs as an inner loop with a fixed source stride, so an embedding
 * lookup (axis 0, idx broadcast along the row) is a strided row copy. */
static int gather(const int64_t *q, void *const *bufs, int strided) {
  shp x, ix, o;
  const int64_t *r = get_shape(get_shape(get_shape(q + 1, &x), &ix), &o);
  int axis = (int)r[0], idt = (int)r[1];
  size_t es = dsize((int)q[0]);
  int64_t st[PRIMC_MAX_RANK], base0 = x_strides(&x, strided ? r + 2 : NULL, st);
  int last = ix.rank - 1;
  int64_t n = numel(&ix), inner = ix.rank ? ix.d[last] : 1, idx[PRIMC_MAX_RANK] = {0};
  if (n == 0 || inner == 0) return PRIMC_OK;
  for (int64_t i = 0; i < n; i += inner) {
    int64_t base = base0 + row_base(idx, last, axis, st);
    int64_t step = last == axis ? 0 : st[last];
    char *dst = (char *)bufs[0] + (size_t)i * es;
    int ok = es == 4 && idt == PRIMC_I64
                 ? gather_row(dst, bufs[1], bufs[2], i, inner, PRIMC_I64, x.d[axis], base, st[axis], step, 4)
                 : gather_row(dst, bufs[1], bufs[2], i, inner, idt, x.d[axis], base, st[axis], step, es);
    if (!ok) return PRIMC_ERR_RUNTIME;
    if (last > 0) next_index(idx, ix.d, last);
  }
  return PRIMC_OK;
}

/* params: dtype, x, idx, out shapes, axis, idx dtype; bufs: out, x, idx */
int primc_k_gather(const int64_t *q, void *const *bufs) { return gather(q, bufs, 0); }

/* the same params followed by x's element offset and 8 strides: x is read in place from
 * the buffer it is an index remapping of (e.g. a broadcast, never materialized) */
int primc_k_gather_strided(const int64_t *q, void *const *bufs) { return gather(q, bufs, 1); }

static void combine(void *o, int64_t oi, const void *u, int64_t ui, int dt, int mode) {
  if (is_float(dt)) {
    double a = get_f(o, oi, dt), b = get_f(u, ui, dt);
    double r = mode == 0 ? b : mode == 1 ? a + b : mode == 2 ? a * b : mode == 3 ? fmax(a, b) : fmin(a, b);
    set_f(o, oi, dt, r);
  } else {
    int64_t a = get_i(o, oi, dt), b = get_i(u, ui, dt);
    int64_t r = mode == 0   ? b
                : mode == 1 ? (int64_t)((uint64_t)a + (uint64_t)b)
                : mode == 2 ? (int64_t)((uint64_t)a * (uint64_t)b)
                : mode == 3 ? (ordered(a, dt) > ordered(b, dt) ? a : b)
                            : (ordered(a, dt) < ordered(b, dt) ? a : b);
    set_i(o, oi, dt, r);
  }
}

/* f32 set and add (an embedding's gradient: rows of tokens added into the table; a max pool's gradient, one add per
 * window) walk the last dim as gather does, offsets from the row's base: through offset_of and combine per element,
 * 1024 rows of 256 took 8 ms. A float sum equals combine's sum rounded from double (53 >= 2 * 24 + 2 bits: the
 * double rounding is innocuous), so both paths give the same bits. */
static int scatter_rows_f32(const shp *x, const shp *ix, const shp *up, int axis, int idt, int mode, void *const *bufs) {
  int last = ix->rank - 1;
  int64_t sx[PRIMC_MAX_RANK], su[PRIMC_MAX_RANK], n = numel(ix), inner = ix->d[last], idx[PRIMC_MAX_RANK] = {0};
  x_strides(x, NULL, sx);
  x_strides(up, NULL, su);
  float *o = bufs[0];
  const float *u = bufs[3];
  for (int64_t i = 0; inner > 0 && i < n; i += inner) {
    int64_t bx = row_base(idx, last, axis, sx), bu = row_base(idx, last, -1, su);
    int64_t stepx = last == axis ? 0 : sx[last], sa = sx[axis], lim = x->d[axis], ul = su[last];
    const float *ur = u + bu;
    if (idt == PRIMC_I64 && mode) { /* the common adds, their indices read as they lie */
      const int64_t *jr = (const int64_t *)bufs[2] + i;
      for (int64_t t = 0; t < inner; t++) {
        int64_t j = jr[t] < 0 ? jr[t] + lim : jr[t];
        if ((uint64_t)j >= (uint64_t)lim) return PRIMC_ERR_RUNTIME;
        o[bx + j * sa + t * stepx] += ur[t * ul];
      }
    } else if (idt == PRIMC_I32 && mode) {
      const int32_t *jr = (const int32_t *)bufs[2] + i;
      for (int64_t t = 0; t < inner; t++) {
        int64_t j = jr[t] < 0 ? (int64_t)jr[t] + lim : jr[t];
        if ((uint64_t)j >= (uint64_t)lim) return PRIMC_ERR_RUNTIME;
        o[bx + j * sa + t * stepx] += ur[t * ul];
      }
    } else {
      for (int64_t t = 0; t < inner; t++) {
        int64_t j = index_at(bufs[2], i + t, idt, lim);
        if (j < 0) return PRIMC_ERR_RUNTIME;
        float v = ur[t * ul];
        o[bx + j * sa + t * stepx] = mode ? o[bx + j * sa + t * stepx] + v : v;
      }
    }
    if (last > 0) next_index(idx, ix->d, last);
  }
  return PRIMC_OK;
}

/* params: dtype, x, idx, upd, out shapes, axis, idx dtype, mode; bufs: out, x, idx, upd */
int primc_k_scatter(const int64_t *q, void *const *bufs) {
  shp x, ix, up, o;
  const int64_t *r = get_shape(get_shape(get_shape(get_shape(q + 1, &x), &ix), &up), &o);
  int dt = (int)q[0], axis = (int)r[0], idt = (int)r[1], mode = (int)r[2];
  size_t es = dsize(dt);
  if (bufs[0] != bufs[1]) memmove(bufs[0], bufs[1], (size_t)numel(&x) * es);
  if (dt == PRIMC_F32 && (mode == 0 || mode == 1) && ix.rank > 0) return scatter_rows_f32(&x, &ix, &up, axis, idt, mode, bufs);
  int64_t n = numel(&ix), idx[PRIMC_MAX_RANK] = {0};
  for (int64_t i = 0; i < n; i++) {
    int64_t dst[PRIMC_MAX_RANK];
    memcpy(dst, idx, sizeof dst);
    int64_t j = index_at(bufs[2], i, idt, x.d[axis]);
    if (j < 0) return PRIMC_ERR_RUNTIME;
    dst[axis] = j;
    if (mode == 0 && es) memcpy((char *)bufs[0] + (size_t)offset_of(&x, dst) * es, (char *)bufs[3] + (size_t)offset_of(&up, idx) * es, es);
    else combine(bufs[0], offset_of(&x, dst), bufs[3], offset_of(&up, idx), dt, mode);
    next_index(idx, ix.d, ix.rank);
  }
  return PRIMC_OK;
}

/* ---------------------------------------------------------------- nonzero */

static int elem_nonzero(const void *x, int64_t i, int dt) {
  if (dt == PRIMC_C64) return ((const float *)x)[2 * i] != 0 || ((const float *)x)[2 * i + 1] != 0;
  return is_float(dt) ? get_f(x, i, dt) != 0 : get_i(x, i, dt) != 0; /* NaN counts, -0.0 does not */
}

/* params: dtype, x shape. bufs: out (room for rank * numel(x) i64), x, count (one i64).
 * Two serial passes: the count n first, so that the indices land row-major in [rank, n] */
int primc_k_nonzero(const int64_t *q, void *const *bufs) {
  shp x;
  get_shape(q + 1, &x);
  int dt = (int)q[0];
  int64_t total = numel(&x), n = 0, j = 0, idx[PRIMC_MAX_RANK] = {0};
  for (int64_t i = 0; i < total; i++) n += elem_nonzero(bufs[1], i, dt);
  int64_t *out = bufs[0];
  for (int64_t i = 0; i < total; i++, next_index(idx, x.d, x.rank)) {
    if (!elem_nonzero(bufs[1], i, dt)) continue;
    for (int d = 0; d < x.rank; d++) out[d * n + j] = idx[d];
    j++;
  }
  *(int64_t *)bufs[2] = n;
  return PRIMC_OK;
}

/* ---------------------------------------------------------------- actual output dims */

int primc_output_dims(const int64_t *table, int32_t n_outputs, const void *workspace, int32_t output, int64_t *dims) {
  if (!table || !dims || output < 0 || output >= n_outputs) return PRIMC_ERR_ARG;
  const int64_t *row = table + (int64_t)output * (1 + PRIMC_MAX_RANK);
  for (int d = 0; d < PRIMC_MAX_RANK; d++) {
    int64_t v = d < row[0] ? row[1 + d] : 0;
    if (v < 0 && !workspace) return PRIMC_ERR_ARG;
    dims[d] = v >= 0 ? v : *(const int64_t *)(const void *)((const char *)workspace + (-v - 1));
  }
  return PRIMC_OK;
}
