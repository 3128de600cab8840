/* tests/fuzz/fuzz_npy.c: libFuzzer harness: any bytes given to the .npy reader end in an array whose every byte is readable, or an error; never a crash. */
#include "runtime/primc_rt.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  primc_array a;
  char err[256];
  if (primc_npy_read_buffer(data, size, &a, err, sizeof err) != 0) return 0;
  if (a.rank < 0 || a.rank > PRIMC_MAX_RANK || (int)a.dtype < 0 || a.dtype >= PRIMC_DTYPE_COUNT) __builtin_trap();
  int64_t n = primc_array_numel(&a);
  if (n < 0) __builtin_trap();
  size_t bytes = (size_t)n * primc_dtype_size(a.dtype);
  volatile unsigned char sum = 0; /* every byte the array claims is readable (ASan checks) */
  for (size_t i = 0; i < bytes; i++) sum ^= ((const unsigned char *)a.data)[i];
  free(a.data);
  return 0;
}
