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

/* ---------------------------------------------------------------- generated code's contract */

/* status codes returned by NAME_run and the other entry points */
enum {
  PRIMC_OK = 0,
  PRIMC_ERR_ARG = 1,      /* a NULL inputs/outputs/workspace pointer */
  PRIMC_ERR_WEIGHTS = 2,  /* external weights not loaded, or the side file is wrong */
  PRIMC_ERR_RUNTIME = 3,  /* a runtime kernel rejected its operands (e.g. gather index out of range) */
  PRIMC_ERR_UNSUPPORTED = 4
};

typedef struct primc_tensor_desc {
  const char *name;
  int32_t dtype; /* a primc_dtype */
  int32_t rank;
  int64_t dims[PRIMC_MAX_RANK];
} primc_tensor_desc;

/* exported by every generated object as NAME_model */
typedef struct primc_model_desc {
  const char *name;
  int (*run)(const void *const *inputs, void *const *outputs, void *workspace);
  int (*load_weights)(const char *path); /* NULL when the weights are inside the object */
  int64_t workspace_size, workspace_align;
  int32_t n_inputs, n_outputs;
  const primc_tensor_desc *inputs, *outputs;
} primc_model_desc;

/* Thread pool (runtime/threads.c): runs fn(ctx, begin, end) over [0, n) split
 * across PRIMC_NUM_THREADS threads (default: online CPUs); nested or
 * concurrent calls run on the calling thread. */
void primc_parallel_for(int64_t n, void (*fn)(void *ctx, int64_t begin, int64_t end), void *ctx);
int primc_num_threads(void);

/* Maps a weights side file of exactly `size` bytes read-only; 0 or PRIMC_ERR_WEIGHTS. */
int primc_weights_map(const char *path, int64_t size, void **base);

/* Kernels generated code calls (runtime/kernels.c): params are compile-time
 * constants laid out by codegen/kir.c, bufs the operand pointers (outputs first). */
int primc_k_dot(const int64_t *params, void *const *bufs);
/* dot whose epilogue (a generated loop over output rows [begin, end)) runs block by block */
int primc_k_dot_epi(const int64_t *params, void *const *bufs, void (*epi)(void *ctx, int64_t begin, int64_t end),
                    void *ctx);
int primc_k_conv(const int64_t *params, void *const *bufs);
int primc_k_copy(const int64_t *params, void *const *bufs);
int primc_k_gather(const int64_t *params, void *const *bufs);
int primc_k_scatter(const int64_t *params, void *const *bufs);
int primc_k_cumsum(const int64_t *params, void *const *bufs);
int primc_k_sort(const int64_t *params, void *const *bufs);
int primc_k_random(const int64_t *params, void *const *bufs);
int primc_k_fft(const int64_t *params, void *const *bufs);
int64_t primc_ipow(int64_t base, int64_t exp);

/* ---------------------------------------------------------------- CUDA driver (runtime/cuda_rt.c) */

/* libcuda.so.1 is opened with dlopen at run time: binaries run, and fail with a
 * status, where no driver is installed. Errors name the driver call and kernel. */
enum {
  PRIMC_ERR_NODEVICE = 5, /* no CUDA driver, cuInit failed, or no such device */
  PRIMC_ERR_CUDA = 6      /* a driver call failed; primc_cuda_error says which */
};

typedef struct primc_cuda primc_cuda;
typedef struct primc_cuda_module primc_cuda_module;
typedef struct primc_cuda_graph primc_cuda_graph;
typedef uint64_t primc_devptr;

/* cuInit, device `ordinal`'s primary context, one stream. On failure *out is NULL
 * and err says why (for PRIMC_ERR_NODEVICE it names cuInit's status or the missing library). */
int primc_cuda_open(int ordinal, primc_cuda **out, char *err, size_t errlen);
void primc_cuda_close(primc_cuda *c);
const char *primc_cuda_error(const primc_cuda *c); /* the last failure, "" when none */

int primc_cuda_alloc(primc_cuda *c, size_t n, primc_devptr *p);
int primc_cuda_free(primc_cuda *c, primc_devptr p);
int primc_cuda_upload(primc_cuda *c, primc_devptr dst, const void *src, size_t n);
int primc_cuda_download(primc_cuda *c, void *dst, primc_devptr src, size_t n);
int primc_cuda_memset(primc_cuda *c, primc_devptr dst, unsigned char v, size_t n);

/* image: a cubin, or NUL-terminated PTX the driver compiles for the device */
int primc_cuda_module_load(primc_cuda *c, const void *image, primc_cuda_module **m);
void primc_cuda_module_unload(primc_cuda *c, primc_cuda_module *m);
int primc_cuda_function(primc_cuda *c, primc_cuda_module *m, const char *name, void **fn);
/* fn(args...) on the stream: args[i] points at the i-th parameter's value */
int primc_cuda_launch(primc_cuda *c, void *fn, const char *name, unsigned grid, unsigned block, unsigned shmem,
                      void **args);
int primc_cuda_sync(primc_cuda *c);
/* the module's `__device__ int primc_status` (a kernel's data error), read then reset to 0 */
int primc_cuda_module_status(primc_cuda *c, primc_cuda_module *m, int *status);

/* launches between capture_begin and capture_end become one CUDA graph, replayed by graph_launch */
int primc_cuda_capture_begin(primc_cuda *c);
int primc_cuda_capture_end(primc_cuda *c, primc_cuda_graph **g);
int primc_cuda_graph_launch(primc_cuda *c, primc_cuda_graph *g);
void primc_cuda_graph_free(primc_cuda *c, primc_cuda_graph *g);

#endif
