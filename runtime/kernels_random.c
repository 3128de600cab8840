/* runtime/kernels_random.c: the random kernel: Philox4x32-10 streams, uniform and normal, the same as the interpreter's. */
#include "runtime/kernels.h"
#include "runtime/primc_philox.h"

/* ---------------------------------------------------------------- random */

/* params: dtype, out shape, normal, seed, a, b (doubles as bits); element i draws primc_philox_draw, the
 * interpreter's stream */
int primc_k_random(const int64_t *q, void *const *bufs) {
  shp o;
  const int64_t *r = get_shape(q + 1, &o);
  int dt = (int)q[0], normal = (int)r[0], fl = is_float(dt);
  uint64_t seed = (uint64_t)r[1];
  double a, b;
  memcpy(&a, &r[2], 8);
  memcpy(&b, &r[3], 8);
  int64_t n = numel(&o);
  for (int64_t i = 0; i < n; i++) {
    double v = primc_philox_draw(seed, i, normal, a, b);
    if (fl) {
      set_f(bufs[0], i, dt, v);
      if (!normal && b > a && get_f(bufs[0], i, dt) >= b) primc_philox_below(dsize(dt), bufs[0], i);
    } else {
      double f = normal ? v : floor(v);
      set_i(bufs[0], i, dt, (int64_t)(!normal && f >= b ? ceil(b) - 1 : f));
    }
  }
  return PRIMC_OK;
}
