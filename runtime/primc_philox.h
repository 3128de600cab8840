/* runtime/primc_philox.h: the random prim's stream (Philox4x32-10, uniform and normal draws); header-only, shared by the interpreter and the runtime's random kernel. */
#ifndef PRIMC_PHILOX_H
#define PRIMC_PHILOX_H

/* Header-only, as primc_file.h, so that the interpreter (the compiler's reference) and the compiled
 * model's kernel draw one stream from one definition; its known answers are Random123's
 * (tests/unit/test_interp.c: philox_known_answers). */

#include <math.h>
#include <stdint.h>
#include <string.h>

/* Philox4x32-10 (Salmon et al., SC'11): ten rounds of two 32x32->64 multiplies, the key bumped by the
 * Weyl constants between rounds */
static inline void primc_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
  uint32_t x0 = ctr[0], x1 = ctr[1], x2 = ctr[2], x3 = ctr[3], k0 = key[0], k1 = key[1];
  for (int r = 0; r < 10; r++) {
    uint64_t p0 = (uint64_t)0xD2511F53u * x0, p1 = (uint64_t)0xCD9E8D57u * x2;
    uint32_t y0 = (uint32_t)(p1 >> 32) ^ x1 ^ k0, y2 = (uint32_t)(p0 >> 32) ^ x3 ^ k1;
    x1 = (uint32_t)p1, x3 = (uint32_t)p0, x0 = y0, x2 = y2;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  out[0] = x0, out[1] = x1, out[2] = x2, out[3] = x3;
}

/* 53 random bits as a double in [0, 1) */
static inline double primc_philox_unit(uint32_t hi, uint32_t lo) {
  return (double)((((uint64_t)hi << 32) | lo) >> 11) * (1.0 / 9007199254740992.0);
}

/* Element i of a stream seeded by seed draws philox(counter = (i lo, i hi, 0, 0), key = (seed lo, seed hi)):
 * uniform a + (b - a) u, u from words 0-1; normal a + b sqrt(-2 ln(1 - u1)) cos(2 pi u2), u1 from words 0-1,
 * u2 from 2-3. The caller rounds to its dtype (primc_philox_below keeps a uniform float below b). */
static inline double primc_philox_draw(uint64_t seed, int64_t i, int normal, double a, double b) {
  uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)}, w[4];
  uint32_t ctr[4] = {(uint32_t)(uint64_t)i, (uint32_t)((uint64_t)i >> 32), 0, 0};
  primc_philox4x32_10(ctr, key, w);
  double u = primc_philox_unit(w[0], w[1]);
  if (normal) return a + b * sqrt(-2.0 * log(1.0 - u)) * cos(2.0 * M_PI * primc_philox_unit(w[2], w[3]));
  return a + (b - a) * u;
}

/* the largest float of es bytes below the one stored at element i of p (little-endian host): a uniform draw
 * that rounded up to b steps back below it */
static inline void primc_philox_below(size_t es, void *p, int64_t i) {
  uint64_t bits = 0, sign = (uint64_t)1 << (8 * es - 1);
  memcpy(&bits, (char *)p + (size_t)i * es, es);
  if ((bits & sign) || (bits & ~sign) == 0) bits = ((bits & ~sign) + 1) | sign; /* <= 0: the magnitude grows */
  else bits -= 1;
  memcpy((char *)p + (size_t)i * es, &bits, es);
}

#endif
