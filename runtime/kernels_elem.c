/* runtime/kernels_elem.c: the small helpers generated code calls: integer power, whole-buffer copies (bitcast, output copies). */
#include "runtime/kernels.h"

int64_t primc_ipow(int64_t b, int64_t e) {
  if (e < 0) return b == 1 ? 1 : b == -1 ? (e & 1 ? -1 : 1) : 0;
  uint64_t r = 1, x = (uint64_t)b;
  for (; e; e >>= 1, x *= x)
    if (e & 1) r *= x;
  return (int64_t)r;
}

/* ---------------------------------------------------------------- copy (bitcast, output copies) */

int primc_k_copy(const int64_t *params, void *const *bufs) {
  shp s;
  get_shape(params + 1, &s);
  if (bufs[0] != bufs[1]) memmove(bufs[0], bufs[1], (size_t)numel(&s) * dsize((int)params[0]));
  return PRIMC_OK;
}
