/* runtime/primc_mt19937.h: numpy's legacy generator (np.random.RandomState(int seed)): the Mersenne Twister MT19937
 * (Matsumoto & Nishimura, 1998) with its single-integer seeding, doubles and shuffles as RandomState draws them;
 * header-only, shared by the importer (ONNX's reference draws seeded Dropout masks with it) and the trainer
 * (--shuffle). */
#ifndef PRIMC_MT19937_H
#define PRIMC_MT19937_H

#include <stdint.h>

#define PRIMC_MT19937_N 624
typedef struct primc_mt19937 {
  uint32_t key[PRIMC_MT19937_N];
  int pos;
} primc_mt19937;

static inline void primc_mt19937_seed(primc_mt19937 *s, uint32_t seed) {
  s->key[0] = seed;
  for (uint32_t i = 1; i < PRIMC_MT19937_N; i++) s->key[i] = 1812433253u * (s->key[i - 1] ^ (s->key[i - 1] >> 30)) + i;
  s->pos = PRIMC_MT19937_N; /* the first draw twists the whole state */
}

static inline uint32_t primc_mt19937_next(primc_mt19937 *s) {
  if (s->pos >= PRIMC_MT19937_N) { /* all N words refilled at once; index arithmetic wraps at the state's end */
    for (int i = 0; i < PRIMC_MT19937_N; i++) {
      uint32_t y = (s->key[i] & 0x80000000u) | (s->key[(i + 1) % PRIMC_MT19937_N] & 0x7fffffffu);
      s->key[i] = s->key[(i + 397) % PRIMC_MT19937_N] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
    }
    s->pos = 0;
  }
  uint32_t y = s->key[s->pos++];
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  return y ^ (y >> 18);
}

/* a double in [0, 1) from two draws (27 high bits and 26), as numpy's random_sample and uniform(0, 1) */
static inline double primc_mt19937_double(primc_mt19937 *s) {
  uint32_t a = primc_mt19937_next(s) >> 5, b = primc_mt19937_next(s) >> 6;
  return ((double)a * 67108864.0 + (double)b) / 9007199254740992.0;
}

/* an integer in [0, max] by masked rejection, one draw a try (two above 2^32), as numpy's random_interval */
static inline uint64_t primc_mt19937_interval(primc_mt19937 *s, uint64_t max) {
  uint64_t mask = max, v;
  for (int sh = 1; sh <= 32; sh *= 2) mask |= mask >> sh;
  if (max == 0) return 0;
  if (max <= 0xffffffffu) {
    while ((v = primc_mt19937_next(s) & mask) > max) {}
  } else {
    while ((v = (((uint64_t)primc_mt19937_next(s) << 32) | primc_mt19937_next(s)) & mask) > max) {}
  }
  return v;
}

/* a[0 .. n) shuffled as RandomState.shuffle does a 1-D array (so a = 0 .. n-1 becomes permutation(n)) */
static inline void primc_mt19937_shuffle(primc_mt19937 *s, int64_t *a, int64_t n) {
  for (int64_t i = n - 1; i > 0; i--) {
    int64_t j = (int64_t)primc_mt19937_interval(s, (uint64_t)i), t = a[i];
    a[i] = a[j], a[j] = t;
  }
}

#endif
