/* runtime/kernels_random.c: the random kernel: Philox4x32-10 streams, uniform and normal, the same as the interpreter's. */
#include "runtime/kernels.h"

/* ---------------------------------------------------------------- random */

/* Philox4x32-10 (Salmon et al., SC'11): ten rounds of two 32x32->64 multiplies, the key
 * bumped by the Weyl constants between rounds; the same stream as the interpreter's */
static void philox(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
  uint32_t x0 = ctr[0], x1 = ctr[1], x2 = ctr[2], x3 = ctr[3], k0 = key[0], k1 = key[1];
  for (int r = 0; r < 10; r++) {
    uint64_t p0 = (uint64_t)0xD2511F53u * x0, p1 = (uint64_t)0xCD9E8D57u * x2;
    uint32_t y0 = (uint32_t)(p1 >> 32) ^ x1 ^ k0, y2 = (uint32_t)(p0 >> 32) ^ x3 ^ k1;
    x1 = (uint32_t)p1;
    x3 = (uint32_t)p0;
    x0 = y0;
    x2 = y2;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  out[0] = x0, out[1] = x1, out[2] = x2, out[3] = x3;
}

static double unit_double(uint32_t hi, uint32_t lo) {
  return (double)((((uint64_t)hi << 32) | lo) >> 11) * (1.0 / 9007199254740992.0);
}

/* the largest value of the float dtype below the one stored at element i */
static void step_down(int dt, void *p, int64_t i) {
  size_t es = dsize(dt);
  uint64_t bits = 0, sign = (uint64_t)1 << (8 * es - 1);
  memcpy(&bits, (char *)p + (size_t)i * es, es);
  if ((bits & sign) || (bits & ~sign) == 0) bits = ((bits & ~sign) + 1) | sign;
  else bits -= 1;
  memcpy((char *)p + (size_t)i * es, &bits, es);
}

/* params: dtype, out shape, normal, seed, a, b (doubles as bits); element i draws
 * philox(counter (i lo, i hi, 0, 0), key (seed lo, seed hi)) */
int primc_k_random(const int64_t *q, void *const *bufs) {
  shp o;
  const int64_t *r = get_shape(q + 1, &o);
  int dt = (int)q[0], normal = (int)r[0], fl = is_float(dt);
  uint64_t seed = (uint64_t)r[1];
  double a, b;
  memcpy(&a, &r[2], 8);
  memcpy(&b, &r[3], 8);
  uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)}, w[4];
  int64_t n = numel(&o);
  for (int64_t i = 0; i < n; i++) {
    uint32_t ctr[4] = {(uint32_t)(uint64_t)i, (uint32_t)((uint64_t)i >> 32), 0, 0};
    philox(ctr, key, w);
    double u = unit_double(w[0], w[1]), v;
    if (normal) v = a + b * sqrt(-2.0 * log(1.0 - u)) * cos(2.0 * M_PI * unit_double(w[2], w[3]));
    else v = a + (b - a) * u;
    if (fl) {
      set_f(bufs[0], i, dt, v);
      if (!normal && b > a && get_f(bufs[0], i, dt) >= b) step_down(dt, bufs[0], i);
    } else {
      double f = normal ? v : floor(v);
      set_i(bufs[0], i, dt, (int64_t)(!normal && f >= b ? ceil(b) - 1 : f));
    }
  }
  return PRIMC_OK;
}
