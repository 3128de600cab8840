/* runtime/primc_rt.h: what generated code and the standalone driver call; knows nothing of the compiler. */
#ifndef PRIMC_RT_H
#define PRIMC_RT_H

#include <stddef.h>
#include <stdint.h>

#define PRIMC_MAX_RANK 8

/* same order as the compiler's ir/dtypes.def */
typedef enum primc_dtype {
  PRIMC_F16, PRIMC_BF16, PRIMC_F32, PRIMC_F64, PRIMC_I8, PRIMC_I16, PRIMC_I32, PRIMC_I64,
  PRIMC_U8, PRIMC_BOOL, PRIMC_C64, PRIMC_DTYPE_COUNT
} primc_dtype;

size_t primc_dtype_size(primc_dtype t);

typedef struct primc_array {
  primc_dtype dtype;
  int rank;
  int64_t dims[PRIMC_MAX_RANK];
  void *data; /* malloc'ed by primc_npy_read */
} primc_array;

int64_t primc_array_numel(const primc_array *a);

/* .npy I/O (format 1.0-3.0, little-endian, C order). 0 on success, else -1
 * with a one-line reason in err. */
int primc_npy_read(const char *path, primc_array *out, char *err, size_t errlen);
int primc_npy_read_buffer(const void *buf, size_t len, primc_array *out, char *err, size_t errlen);
int primc_npy_write(const char *path, const primc_array *a, char *err, size_t errlen);

#endif
