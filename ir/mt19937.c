/* ir/mt19937.c: the Mersenne Twister MT19937 (Matsumoto & Nishimura, 1998) as numpy's legacy RandomState draws it. */
#include "ir/ir.h"

enum { MT_M = 397 };
#define MT_MATRIX_A 0x9908b0dfu
#define MT_UPPER 0x80000000u
#define MT_LOWER 0x7fffffffu

void pc_mt19937_seed(pc_mt19937 *s, uint32_t seed) {
  s->key[0] = seed;
  for (uint32_t i = 1; i < PC_MT19937_N; i++) s->key[i] = 1812433253u * (s->key[i - 1] ^ (s->key[i - 1] >> 30)) + i;
  s->pos = PC_MT19937_N; /* the first draw twists the whole state */
}

/* refills all N words at once; index arithmetic wraps so one loop covers the state's end */
static void twist(pc_mt19937 *s) {
  for (int i = 0; i < PC_MT19937_N; i++) {
    uint32_t y = (s->key[i] & MT_UPPER) | (s->key[(i + 1) % PC_MT19937_N] & MT_LOWER);
    s->key[i] = s->key[(i + MT_M) % PC_MT19937_N] ^ (y >> 1) ^ ((y & 1u) ? MT_MATRIX_A : 0u);
  }
  s->pos = 0;
}

uint32_t pc_mt19937_next(pc_mt19937 *s) {
  if (s->pos >= PC_MT19937_N) twist(s);
  uint32_t y = s->key[s->pos++];
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  return y ^ (y >> 18);
}

/* 27 high bits of one draw and 26 of the next make the 53-bit mantissa: every double in [0, 1) of the form
 * k / 2^53 */
double pc_mt19937_double(pc_mt19937 *s) {
  uint32_t a = pc_mt19937_next(s) >> 5, b = pc_mt19937_next(s) >> 6;
  return ((double)a * 67108864.0 + (double)b) / 9007199254740992.0;
}
