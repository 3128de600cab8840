/* runtime/primc_rt.h: what generated code and the standalone driver call; knows nothing of the compiler. */
#ifndef PRIMC_RT_H
#define PRIMC_RT_H

#include "runtime/arch.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define PRIMC_MAX_RANK 8

/* same order as the compiler's ir/dtypes.def */
typedef enum primc_dtype {
  PRIMC_F16, PRIMC_BF16, PRIMC_F32, PRIMC_F64, PRIMC_I8, PRIMC_I16, PRIMC_I32, PRIMC_I64,
  PRIMC_U8, PRIMC_BOOL, PRIMC_C64, PRIMC_U16, PRIMC_U32, PRIMC_U64,
  PRIMC_F8E4M3FN, PRIMC_F8E4M3FNUZ, PRIMC_F8E5M2, PRIMC_F8E5M2FNUZ,
  PRIMC_I4, PRIMC_U4, PRIMC_I2, PRIMC_U2, /* sub-byte ints: one per byte */
  PRIMC_F4E2M1, PRIMC_F8E8M0, PRIMC_DTYPE_COUNT
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

/* runtime/text.c: a model's names made safe for a terminal, control bytes (C0, DEL, UTF-8 C1) written as \xNN.
 * primc_text_escape copies src into dst (n bytes with the NUL, cut short rather than an escape cut in half) and
 * returns the length; primc_text_put writes s to f and returns the characters written. */
size_t primc_text_escape(char *dst, size_t n, const char *src);
/* the bytes at s (before end) that a terminal would act on: 1 for a C0 control or DEL, 2 for a C1 control in its
 * UTF-8 form (0xc2 0x80..0x9f: CSI is 0xc2 0x9b), else 0 */
int primc_text_control_len(const char *s, const char *end);
int primc_text_put(FILE *f, const char *s);
int primc_text_putn(FILE *f, const char *s, size_t n); /* n bytes of s */

/* ---------------------------------------------------------------- generated code's contract */

/* status codes returned by NAME_run and the other entry points */
enum {
  PRIMC_OK = 0,
  PRIMC_ERR_ARG = 1,      /* a NULL inputs/outputs/workspace pointer */
  PRIMC_ERR_WEIGHTS = 2,  /* weights missing or corrupt: external weights not loaded, the side file not a
                             regular file, of the wrong size or failing its header check, or a packed
                             weight header (GEMM panels) failing its check at run time */
  PRIMC_ERR_RUNTIME = 3,  /* a runtime kernel rejected its operands (e.g. gather index out of range) */
  PRIMC_ERR_UNSUPPORTED = 4,
  PRIMC_ERR_SHAPE = 7     /* input dims outside the compiled range, or inconsistent (5 and 6 are CUDA's) */
};

typedef struct primc_tensor_desc {
  const char *name;
  int32_t dtype; /* a primc_dtype */
  int32_t rank;
  int64_t dims[PRIMC_MAX_RANK];
} primc_tensor_desc;

/* ---------------------------------------------------------------- per-kernel profiler (runtime/prof.c) */

/* One kernel of a model compiled with --profile: a row in the generated object's
 * writable table. name: its prims joined by '+' ("dot_general+add+max"); origin: the
 * model node it came from; bytes: bytes of the buffers it reads and writes per call. */
typedef struct primc_prof_kernel {
  const char *name, *origin;
  int64_t bytes;
  int64_t calls, ns; /* counters, updated by primc_prof_end */
} primc_prof_kernel;

typedef struct primc_profile {
  int32_t n_kernels;
  primc_prof_kernel *kernels; /* indexed by kernel id (the N of kN) */
} primc_profile;

/* The generated entry point brackets each kernel: t0 = primc_prof_begin(); ...;
 * primc_prof_end(profile, id, t0). Monotonic clock in ns, no allocation. Counters are
 * plain adds: concurrent runs of one profiled model may lose counts. */
int64_t primc_prof_begin(void);
void primc_prof_end(const primc_profile *p, int32_t kernel, int64_t t0);
void primc_prof_reset(const primc_profile *p);
/* one kernel call (kernel >= 0, on the calling thread), or one pool thread's share of a parallel loop
 * (kernel -1, thread 1..): when it began (primc_prof_begin's clock) and how long it took */
typedef struct primc_prof_event {
  int32_t kernel, thread;
  int64_t t0, ns;
} primc_prof_event;
/* from now on every profiled call is also recorded into buf, at most cap of them (buf NULL: none); the
 * driver's per-call min and median and its --trace file read them. Not for concurrent runs. */
void primc_prof_record(primc_prof_event *buf, int64_t cap);
int64_t primc_prof_recorded(void); /* events written into buf since primc_prof_record */
/* the thread pool's side: whether calls are being recorded, and one worker's share of a parallel loop */
int primc_prof_recording(void);
void primc_prof_note_share(int32_t thread, int64_t t0, int64_t ns);

/* exported by every generated object as NAME_model */
/* Run-time dims (compiled with --dim NAME=LO..HI): the symbols, and which input dims they are. A model with
 * every dim fixed has n_syms 0; its inputs' dims are still checked. */
typedef struct primc_sym_desc {
  const char *name;
  int64_t lo, hi;
  int64_t multiple; /* > 1: the dim takes multiples of it only (--dim NAME=LO..HI%M) and the symbol is dim / multiple */
} primc_sym_desc;

typedef struct primc_dims_desc {
  int32_t n_syms;
  const primc_sym_desc *syms;
  const int32_t *input_syms; /* [input * PRIMC_MAX_RANK + d]: the symbol dim d of input is, -1 when fixed */
  int64_t offset;            /* workspace bytes where the run keeps the symbols' values (int64 each); -1: none */
  int32_t n_inputs;
  const primc_tensor_desc *inputs; /* dims at the bounds */
} primc_dims_desc;

/* The symbols' values from the inputs' dims (input_dims[i]: input i's dims; input_dims NULL, or an entry
 * NULL, for inputs at the bounds, the SHAPE the header declares): PRIMC_OK with values[s] set (n_syms of
 * them, each the dim divided by its multiple; a symbol no input names stays at its bound), or PRIMC_ERR_SHAPE
 * with msg naming the input, the dim, its value and the range (msg may be NULL). */
int primc_dims_check(const primc_dims_desc *d, const int64_t *const *input_dims, int64_t *values, char *msg,
                     size_t len);
/* the same, the values then written where the run reads them: what NAME_run_dims does first */
int primc_dims_bind(const primc_dims_desc *d, const int64_t *const *input_dims, void *workspace);

/* A training step's state (`primc compile --train`): the model's last n inputs, each replaced after a run
 * by the output at the same place among its last n outputs (the next weights, the optimizer's buffers);
 * init[i] the first value of state i (NULL: zeros). The first n_weights are the model's weights, named as
 * their inputs. */
typedef struct primc_state_desc {
  int32_t n, n_weights;
  const void *const *init;
  /* 1: a run reads every state before it writes the state's next value, element for element, so the output
   * may be the input's own buffer (one buffer set, updated in place; NAME_STATE_IN_PLACE); 0: two sets */
  int32_t in_place;
} primc_state_desc;

typedef struct primc_model_desc {
  const char *name;
  int (*run)(const void *const *inputs, void *const *outputs, void *workspace);
  int (*load_weights)(const char *path); /* NULL when the weights are inside the object */
  int64_t workspace_size, workspace_align;
  int32_t n_inputs, n_outputs;
  const primc_tensor_desc *inputs, *outputs;
  const primc_profile *profile; /* per-kernel counters when compiled with --profile, else NULL */
  /* NAME_output_dims: the dims of output `output` as the last run on `workspace` wrote it. An output
   * whose size depends on the data (ONNX NonZero's count) has its bound in outputs[i].dims, the size
   * of the buffer the caller passes; the run writes it row-major in its actual dims, which this
   * gives. Other outputs get their dims. 0, or PRIMC_ERR_ARG (NULL pointer, no such output). */
  int (*output_dims)(const void *workspace, int32_t output, int64_t *dims);
  const primc_dims_desc *dims;
  /* NAME_run_dims: NAME_run with each input's actual dims (see primc_dims_check) */
  int (*run_dims)(const void *const *inputs, const int64_t *const *input_dims, void *const *outputs, void *workspace);
  const primc_state_desc *state; /* a training step's state, else NULL */
} primc_model_desc;

/* A model whose run-time dims are split into buckets (--dim NAME=LO..HI:STEP, on one dim or several): each bucket
 * is a program of its own, planned at its ends, and NAME_run_dims runs the one whose box holds the dims' values.
 * The workspace starts with PRIMC_BUCKET_HEADER bytes that say which bucket ran (NAME_output_dims reads them); that
 * program's own workspace follows a page in, keeping the page alignment of the caller's. */
#define PRIMC_BUCKET_HEADER 4096
typedef struct primc_buckets_desc {
  int32_t n;                     /* the buckets */
  const int64_t *lo, *hi;        /* bucket b holds the dims with lo[b * S + s] <= value of symbol s <= hi[b * S + s]
                                    for every s of dims (S = dims->n_syms); the boxes do not overlap */
  const primc_model_desc *const *models; /* bucket b's program */
  const primc_dims_desc *dims;   /* the whole ranges, as the header declares them */
} primc_buckets_desc;
/* the bucket whose box holds the symbols' values (primc_dims_check's, in units of each symbol's multiple), lo and hi
 * as in primc_buckets_desc; -1 if none */
int32_t primc_bucket_of(const primc_dims_desc *d, int32_t n, const int64_t *lo, const int64_t *hi,
                        const int64_t *values);
/* NAME_run_dims of a bucketed model: the dims checked against the whole ranges (PRIMC_ERR_SHAPE before anything
 * is read or written), then the bucket's program on the workspace after the header */
int primc_buckets_run_dims(const primc_buckets_desc *b, const void *const *inputs, const int64_t *const *input_dims,
                           void *const *outputs, void *workspace);
/* NAME_output_dims of a bucketed model: those of the bucket that last ran on workspace (PRIMC_ERR_ARG if none) */
int primc_buckets_output_dims(const primc_buckets_desc *b, const void *workspace, int32_t output, int64_t *dims);

/* NAME_output_dims's body: table holds n_outputs rows of rank then 8 dims, a dim >= 0 fixed, a
 * dim < 0 the int64 at workspace byte offset -(dim + 1), written by the run (primc_k_nonzero's count) */
int primc_output_dims(const int64_t *table, int32_t n_outputs, const void *workspace, int32_t output, int64_t *dims);

/* Thread pool (runtime/threads.c): runs fn(ctx, begin, end) over [0, n) split
 * across PRIMC_NUM_THREADS threads (default: online CPUs); nested or
 * concurrent calls run on the calling thread. Idle threads spin PRIMC_SPIN_US
 * microseconds (default 300; 0: never) before sleeping. */
void primc_parallel_for(int64_t n, void (*fn)(void *ctx, int64_t begin, int64_t end), void *ctx);
int primc_num_threads(void);
/* the threads the pool starts (PRIMC_NUM_THREADS, else online CPUs), without starting it (the planner) */
int primc_threads_wanted(void);

/* ---------------------------------------------------------------- the weights side file (runtime/weights.c) */

/* `primc compile --weights external` writes NAME.weights: this 64-byte header, then the payload (the
 * weights blob generated code addresses from NAME_weights_base, 64-byte aligned in the file and in the
 * mapping). Fields in the host's byte order (little-endian on every target the runtime builds for). */
#define PRIMC_WEIGHTS_MAGIC "PRIMCWTS"
#define PRIMC_WEIGHTS_VERSION 1u
typedef struct primc_weights_header {
  char magic[8];             /* PRIMC_WEIGHTS_MAGIC, no NUL */
  uint32_t version;          /* PRIMC_WEIGHTS_VERSION */
  uint32_t header_size;      /* sizeof(primc_weights_header): 64 */
  uint64_t payload_size;     /* bytes after the header: the model's weights size */
  uint64_t payload_checksum; /* primc_checksum of the payload */
  uint8_t reserved[24];      /* zero */
  uint64_t header_checksum;  /* primc_checksum of the 56 bytes before it */
} primc_weights_header;

/* The checksum of weights files: 64 bits, any change within one 8-byte word always detected; about
 * 10 GB/s on one core. It guards against damage, not an attacker (who can recompute it): the kernels
 * check every packed header they read regardless. Streamed: init, update with chunks of any size, final. */
typedef struct primc_checksum_state {
  uint64_t lane[4], total;
  unsigned char tail[32];
  uint32_t n_tail;
} primc_checksum_state;
void primc_checksum_init(primc_checksum_state *c);
void primc_checksum_update(primc_checksum_state *c, const void *data, size_t n);
uint64_t primc_checksum_final(const primc_checksum_state *c);
uint64_t primc_checksum(const void *data, size_t n);

/* The header a writer puts before a payload of payload_size bytes whose primc_checksum is given (a writer
 * streaming the payload can write a placeholder first and this header over it at the end). */
void primc_weights_header_fill(primc_weights_header *h, uint64_t payload_size, uint64_t payload_checksum);
/* Checks a whole weights file in memory (file_size bytes): magic, version, header size, header checksum,
 * payload size (against the file's, and against payload_size unless it is negative), payload checksum.
 * PRIMC_OK, or PRIMC_ERR_WEIGHTS with the reason in err (may be NULL). */
int primc_weights_check(const void *file, size_t file_size, int64_t payload_size, char *err, size_t errlen);

/* NAME_load_weights's body: maps the weights file at path (a regular file: a FIFO, directory or device is
 * refused without blocking) read-only, checks it as primc_weights_check with the model's payload size
 * (size < 0: any), and sets *base to its payload. PRIMC_OK, PRIMC_ERR_ARG (path or base NULL), or
 * PRIMC_ERR_WEIGHTS (missing, not a regular file, wrong size, failing its check); _err also says why in
 * err (may be NULL). */
int primc_weights_map(const char *path, int64_t size, void **base);
int primc_weights_map_err(const char *path, int64_t size, void **base, char *err, size_t errlen);

/* Kernels generated code calls (runtime/kernels_*.c): params are compile-time
 * constants laid out as codegen/calls.def's rows say, bufs the operand pointers (outputs first). */
int primc_k_dot(const int64_t *params, void *const *bufs);
/* dot with two batch levels (attention heads split off a [B, S, H, D] value: B and H have strides of their own) */
int primc_k_dot_b2(const int64_t *params, void *const *bufs);
/* a conv's weight gradient dw [M, C taps] = a [M, K] x cols^T, cols read in place from the padded input xp (never
 * stored): column (c, t) at pixel k = (image, o..) is xp[off + c xs_c + image xs_n + sum_s (o_s ostep_s + t_s
 * tstep_s)]. a is [M, K] at a_sm, a_sk apart (a_mode 0), or read in place from the conv's output gradient (a_mode 1):
 * a(m, k = (image, o..)) = a[a_off + m a_sm + image a_sn + sum_s o_s a_os_s]. params: [M, K, a_sm, a_sk, C, xs_c,
 * images, xs_n, ns (1..3), od[3], ostep[3], kd[3], tstep[3], off, a_mode, a_sn, a_os[3], a_off, row, rlo, rhi,
 * clo, chi]; bufs: out [M, C taps] contiguous, a, xp, scratch: (C taps + 2 K) int64 (the columns', pixels' and a's
 * offsets) for row PRIMC_WGRAD_COLUMNS, primc_wgrad_wino_floats floats for PRIMC_WGRAD_WINOGRAD (a 3x3 whose stride
 * equals its dilation, as Winograd F(2x2, 3x3): primc_wgrad_wino_fits). The Winograd row reads xp's window grid only
 * at rows [rlo, rhi) and columns [clo, chi) of it, zero elsewhere (the unpadded input where it lies: off may then be
 * negative, every element read is at a nonnegative offset) */
#define PRIMC_DOT_COLS_PARAMS 33
enum { PRIMC_WGRAD_COLUMNS = 0, PRIMC_WGRAD_WINOGRAD = 1 };
int primc_k_dot_cols(const int64_t *params, void *const *bufs);
int primc_wgrad_wino_fits(int64_t M, int64_t C, int64_t images, int64_t oh, int64_t ow);
int64_t primc_wgrad_wino_floats(int64_t M, int64_t C, int64_t images, int64_t oh, int64_t ow);
/* a strided dot's shape from dot's params (b2 0) or dot_b2's (b2 1), read by the runtime and by the CUDA
 * renderer: batch i of B = B1 * B2 is (i / B2, i % B2), its operands at (i / B2) * sb + (i % B2) * sb2 elements;
 * out [B, M, N] contiguous */
typedef struct primc_dot_shape {
  int dt;
  int64_t B, B2, M, N, K, a_sb, a_sb2, a_sm, a_sk, b_sb, b_sb2, b_sk, b_sn;
} primc_dot_shape;
static inline primc_dot_shape primc_dot_shape_of(const int64_t *q, int b2) {
  if (!b2) return (primc_dot_shape){(int)q[0], q[1], 1, q[2], q[3], q[4], q[5], 0, q[6], q[7], q[8], 0, q[9], q[10]};
  return (primc_dot_shape){(int)q[0], q[1] * q[2], q[2], q[3], q[4], q[5], q[6], q[7], q[8], q[9], q[10], q[11], q[12], q[13]};
}
/* y = softmax(Q K^T * scale + mask) V per (b0, b1) with online softmax over key tiles, never the Sq x Sk
 * scores (runtime/attention.c). params: [f32 dtype, B0, B1, Sq, Sk, D, Dv, then for Q, K, V, mask and y an
 * element offset and strides (b0, b1, row, column: Q [query, d], K [key, d], V [key, dv], mask [query, key],
 * y [query, dv]), flags (1: mask, 2: causal, keys after the query's index masked), scale (a double's bits)];
 * bufs: y, q, k, v[, mask]. D and Dv at most PRIMC_ATTENTION_MAX_DIM (the tiles live on the stack). */
#define PRIMC_ATTENTION_PARAMS 34
#define PRIMC_ATTENTION_MAX_DIM 256
int primc_k_attention(const int64_t *params, void *const *bufs);
/* The call's vector code is a row of runtime/attention_rows.def per instruction set; the first the CPU runs
 * is the one that runs. force_row (tests, benchmarks): -1 when the CPU lacks it, a negative row goes back. */
typedef enum primc_attention_row {
#define PRIMC_ATTENTION_ROW(id, ...) PRIMC_ATTENTION_ROW_##id,
#include "runtime/attention_rows.def"
#undef PRIMC_ATTENTION_ROW
  PRIMC_ATTENTION_ROW_COUNT
} primc_attention_row;
int primc_attention_row_active(void);
int primc_attention_force_row(int row);
const char *primc_attention_row_name(int row);
/* whether the fused call beats the stored-scores kernels for Sq queries over Sk keys on this CPU (the
 * fuser asks, per chain); force_fuse(1) or (0) answers that instead (tests), -1 undoes */
int primc_attention_pays(int64_t sq, int64_t sk);
/* the same where the call would run by attention row `row` (a cross compile asks for the generic row) */
int primc_attention_pays_for(int row, int64_t sq, int64_t sk);
void primc_attention_force_fuse(int on);
/* dot whose epilogue (a generated loop over output rows [begin, end)) runs after it, split over the threads by rows */
int primc_k_dot_epi(const int64_t *params, void *const *bufs, void (*epi)(void *ctx, int64_t begin, int64_t end),
                    void *ctx);
/* dot (same params) whose B operand (bufs[2]) is a constant packed at compile time by
 * primc_sgemm_pack_b; B must be f32, one batch */
int primc_k_dot_packed(const int64_t *params, void *const *bufs);
int primc_k_dot_packed_epi(const int64_t *params, void *const *bufs, void (*epi)(void *ctx, int64_t begin, int64_t end),
                           void *ctx);
/* dot (same params) then the packed B's bytes (0: B plain, packed per call) and the split (1, 3): an f32
 * dot on the bf16 GEMM, primc_bgemm (--matmul-precision medium and high) */
int primc_k_dot_bf16(const int64_t *params, void *const *bufs);
int primc_k_dot_bf16_epi(const int64_t *params, void *const *bufs, void (*epi)(void *ctx, int64_t begin, int64_t end),
                         void *ctx);
/* an i32 dot on small integers, exact on the bf16 GEMM (codegen/calls.def's dot_int) */
int primc_k_dot_int(const int64_t *params, void *const *bufs);
int primc_k_dot_int_epi(const int64_t *params, void *const *bufs, void (*epi)(void *ctx, int64_t begin, int64_t end),
                        void *ctx);
int primc_k_conv(const int64_t *params, void *const *bufs);
int primc_k_conv_pair(const int64_t *params, void *const *bufs, const int64_t *params2, void *const *bufs2);
int primc_k_copy(const int64_t *params, void *const *bufs);
int primc_k_gather(const int64_t *params, void *const *bufs);
int primc_k_gather_strided(const int64_t *params, void *const *bufs);
int primc_k_scatter(const int64_t *params, void *const *bufs);
int primc_k_cumsum(const int64_t *params, void *const *bufs);
/* f32 2-D max pool over a -inf padded map, read unpadded: params [planes, h, w, oh, ow, kh, kw, sh, sw,
 * pad top, pad left], bufs (y, x); primc_maxpool_row says whether a row fits its buffer (0: it does not) */
int primc_k_maxpool(const int64_t *params, void *const *bufs);
int64_t primc_maxpool_row(int64_t w, int64_t ow, int64_t kw, int64_t sw, int64_t pl);
/* the same over a u8 map padded with 0: params maxpool's, then 1 when a dequantized f32 copy ((float)y * scale) is
 * written too and the scale (an f32's bits); bufs (y, x[, y f32]); _force: tests, 0 the CPU's best rows, 1 AVX2's
 * at most, 2 the plain C loops */
int primc_k_maxpool_u8(const int64_t *params, void *const *bufs);
void primc_maxpool_u8_force(int level);
int primc_k_sort(const int64_t *params, void *const *bufs);
int primc_k_random(const int64_t *params, void *const *bufs);
int primc_k_fft(const int64_t *params, void *const *bufs);
/* the scratch an int32 conv of K = Cg * taps, P output positions and Og channels a group needs (codegen sizes it) */
int64_t primc_conv_i32_scratch_bytes(int64_t K, int64_t P, int64_t Og);
/* the scratch primc_k_fft needs for transforms of length up to n (codegen sizes its workspace slot with it) */
int64_t primc_fft_scratch_bytes(int64_t n);
/* params [dtype, x shape], bufs (out, x, count): the indices of x's nonzeros as an i64 [rank, n] array
 * (row-major in those dims, at the start of out, which has room for rank * numel(x)); n into *count */
int primc_k_nonzero(const int64_t *params, void *const *bufs);
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

/* primc_cuda_launch on `stream` (a CUstream; NULL: c's own stream), and c's own stream */
int primc_cuda_launch_on(primc_cuda *c, void *stream, void *fn, const char *name, unsigned grid, unsigned block,
                         unsigned shmem, void **args);
void *primc_cuda_stream(const primc_cuda *c);

/* exported as NAME_model by every object compiled with --target cuda (codegen/package_cuda.c) */
typedef struct primc_cuda_model_desc {
  const char *name;
  const char *gpu_arch; /* the embedded cubin's ("sm_90"); the embedded PTX serves newer GPUs */
  /* inputs, outputs: device pointers; workspace: workspace_size bytes of device memory;
   * stream: a CUstream to launch on without waiting, or NULL: the model's own stream, waited for */
  int (*run)(const void *const *inputs, void *const *outputs, void *workspace, void *stream);
  int (*status)(void);        /* once the stream is idle: a kernel's data error (PRIMC_ERR_RUNTIME), then reset */
  const char *(*error)(void); /* the last failure: driver call, status name, kernel */
  int64_t workspace_size, workspace_align;
  int32_t n_inputs, n_outputs;
  const primc_tensor_desc *inputs, *outputs;
  int32_t n_kernels;
  int32_t cuda_graphs; /* compiled with --cuda-graphs (the standalone driver replays one captured graph either way,
                        * unless run with --no-cuda-graphs) */
  /* run-time dims (--dim NAME=LO..HI), NULL when every dim is fixed: the ranges; NAME_run_dims, run with each
   * input's actual dims (primc_dims_check; PRIMC_ERR_SHAPE before any launch when one is out of range), the
   * kernels taking the dims as arguments and their grids sized for them; NAME_output_dims, the dims of an output
   * of a run with those input dims (no device access) */
  const primc_dims_desc *dims;
  int (*run_dims)(const void *const *inputs, const int64_t *const *input_dims, void *const *outputs, void *workspace,
                  void *stream);
  int (*output_dims)(const int64_t *const *input_dims, int32_t output, int64_t *dims);
} primc_cuda_model_desc;

/* the standalone main of --target cuda executables (runtime/cuda_driver.c): .npy in, .npy out, --bench */
int primc_cuda_main(int argc, char **argv, const primc_cuda_model_desc *m);

/* ---------------------------------------------------------------- the standalone mains' shared parts (runtime/driver_io.c) */

/* Used by runtime/driver.c (CPU) and runtime/cuda_driver.c; they print their errors on stderr and return 1
 * (0 on success). */
#define PRIMC_DRIVER_MAX_IO 64

/* the options both mains take */
typedef struct primc_driver_opts {
  const char *ins[PRIMC_DRIVER_MAX_IO]; /* .npy inputs, in the model's order */
  int n_ins, random, bench;
  unsigned long long seed;
  const char *out_dir;
} primc_driver_opts;

/* a main's own options: 1 when it took argv[*i] (moving *i past a value it takes), else 0 */
typedef int (*primc_driver_flag)(void *ctx, int argc, char **argv, int *i);

/* Parses the command line: the common options into o, the others through own(ctx, ...). Returns 0 to run,
 * 1 after -h/--help (usage on stdout), 2 on an unknown option (usage on stderr) or when the number of
 * .npy inputs is not the model's n_inputs and --random-inputs is not given. */
int primc_driver_parse(int argc, char **argv, const char *usage, const char *model, int n_inputs,
                       primc_driver_opts *o, primc_driver_flag own, void *ctx);
/* the n model inputs: read from paths[i] and checked against d[i] (but for the dims syms, a primc_dims_desc's
 * input_syms, gives a symbol: run-time dims, checked by primc_dims_check; syms may be NULL), or when paths is
 * NULL drawn from seed at d's dims: f32/f64 uniform in [-1, 1), i32/i64 0..9, bools 0/1, other types 0..9 in
 * their lowest byte */
int primc_driver_inputs(const primc_tensor_desc *d, int n, const char *const *paths, unsigned long long seed,
                        primc_array *ins, const int32_t *syms);
/* a zeroed, 64-byte aligned array of d's dtype and shape (primc_driver_big_alloc) */
int primc_driver_alloc(const primc_tensor_desc *d, primc_array *a);
/* n bytes and 64 more, 64-byte aligned; from 2 MB on in 2 MB pages where the kernel grants them (free() it) */
void *primc_driver_big_alloc(size_t n);
/* for each of count ranges [p[i], p[i] + bytes[i]) (NULL p[i]: none), the pages wholly inside it given back when
 * it lies in one read-only file mapping (data read once, such as a training step's initial state in the executable
 * once copied out): read again, they come from the file. The process's mappings are read once. */
void primc_driver_drop_file_pages(const void *const *p, const size_t *bytes, int count);
/* one line per output: name, dims and, for f32, the sum */
void primc_driver_summary(const primc_tensor_desc *d, const primc_array *outs, int n);
/* DIR/out0.npy ...; DIR is created when missing */
int primc_driver_write(const char *dir, const primc_array *outs, int n);
/* --profile's per-kernel table (runtime/driver.c documents it) with each kernel's per-call min and median
 * from the recorded events, and --trace's Chrome trace / Perfetto JSON of them (1 on error, said on stderr) */
void primc_driver_profile_print(const primc_model_desc *m, int runs, double run_ms, const primc_prof_event *ev,
                                int64_t n_ev);
int primc_driver_trace_write(const char *path, const primc_model_desc *m, const primc_prof_event *ev, int64_t n_ev);
/* a training step's executable (runtime/train.c): `--steps N` steps, each on the next batch of rows of the
 * .npy datasets in o->ins (one per non-state input: rows of its shape without the batch dim, wrapping
 * around), the state carried from step to step, the loss printed every log_every steps and the time per
 * step at the end, the weights saved to save (safetensors) when given, and with o->out_dir the last step's
 * outputs and state written */
typedef struct primc_train_opts {
  int64_t steps, log_every;
  int64_t batch; /* --batch B: rows per step, for a step compiled with its batch a range; 0: the compiled batch */
  int64_t epochs; /* --epochs E: E passes over the datasets (steps follow), each in order in batches, the last one
                     the rows left over (a step compiled with its batch a range takes it) unless drop_last; 0: steps */
  int drop_last;  /* --drop-last: an epoch's rows left over are not a batch */
  int64_t shuffle; /* --shuffle SEED (with epochs): each epoch's rows in the order of the next
                      np.random.RandomState(SEED).permutation(rows); -1: in order */
  const char *save;
  int profile; /* --profile: the per-kernel table over all steps (min and median not recorded) */
} primc_train_opts;
int primc_train_main(const primc_model_desc *m, const primc_driver_opts *o, const primc_train_opts *t);
double primc_now_ms(void); /* a monotonic clock */
/* sorts n run times ascending: t[0] is the min, t[n / 2] the median */
void primc_sort_ms(double *t, int n);

/* ---------------------------------------------------------------- fp32 GEMM and conv (runtime/gemm/, runtime/conv/) */

/* Row-major C[M][N] = alpha * op(A) * op(B) + beta * C, op(X) = X or X^T (trans_*). beta == 0 never
 * reads C. Splits the work over the pool; each C element is summed in the same order whatever the
 * thread count (bitwise-identical results across thread counts, for a given ISA). Each calling thread
 * keeps a 512 KiB packing buffer from its first call on; primc_sgemm_reserve() has every pool thread
 * allocate its buffer at once (call it at load time so the inference path never allocates).
 * Returns PRIMC_OK, or PRIMC_ERR_RUNTIME when that buffer could not be allocated. */
int primc_sgemm(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                const float *B, int64_t ldb, float beta, float *C, int64_t ldc);
void primc_sgemm_reserve(void);
/* Row-major f64 C[M][N] = op(A) * op(B) (runtime/gemm/dgemm.c): k summed in ascending order per element,
 * whatever the thread count. Returns PRIMC_OK. */
int primc_dgemm(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, const double *A, int64_t lda,
                const double *B, int64_t ldb, double *C, int64_t ldc);

/* bf16 GEMM (runtime/gemm/bgemm*.c): row-major C[M][N] = op(A) * op(B) for f32 A, B and C, computed on
 * operands rounded to bf16 (split 1: torch's "medium" matmul precision) or each split into a bf16 hi and
 * lo part, summed as hi*hi + hi*lo + lo*hi (split 3: "high", about 2^-16 relative per product), products
 * summed in f32. B packed once by primc_bgemm_pack_b (64-byte aligned, primc_bgemm_packed_b_size bytes)
 * in one layout that every row reads; A is rounded per call into a buffer the calling thread keeps. Each
 * C element is summed by one thread in one order: results do not depend on the thread count. */
size_t primc_bgemm_packed_b_size(int64_t N, int64_t K, int split); /* 0 for a bad shape or split */
int primc_bgemm_pack_b(int trans_b, int64_t N, int64_t K, const float *B, int64_t ldb, int split, void *packed);
/* PRIMC_OK when packed (avail bytes there) is a header primc_bgemm_pack_b wrote for N x K and split whose
 * panels fit, else PRIMC_ERR_WEIGHTS */
int primc_bgemm_packed_check(const void *packed, size_t avail, int64_t N, int64_t K, int split);
int primc_bgemm_prepacked(int trans_a, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                          const void *packed_b, float *C, int64_t ldc);
/* B packed on the fly into a buffer the calling thread keeps */
int primc_bgemm(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                const float *B, int64_t ldb, int split, float *C, int64_t ldc);
/* Exact small-integer products on the bf16 GEMM: A's int32 values and B's (packed by primc_bgemm_pack_b from
 * their f32 values, split 1) within [-256, 256] are exact in bf16 and their products in f32; a sum of K of them
 * is exact while K * max|a| * max|b| <= 2^24, so C holds the exact integer sums as floats. Callers cut K into
 * chunks that keep that bound, at most PRIMC_BGEMM_INT_K, and add the chunks' C in int32 (primc_k_dot_int). */
#define PRIMC_BGEMM_INT_K 1024
int primc_bgemm_prepacked_int(int trans_a, int64_t M, int64_t N, int64_t K, const int32_t *A, int64_t lda,
                              const void *packed_b, float *C, int64_t ldc);
/* an int32 B [K][N] ([N][K] when trans_b) of such values packed chunk after chunk of chunk rows, each chunk
 * primc_bgemm_packed_b_size(N, rows, 1) bytes (a multiple of 64); the total is 0 for a bad shape or chunk */
size_t primc_bgemm_int_b_size(int64_t N, int64_t K, int64_t chunk);
int primc_bgemm_pack_b_int(int trans_b, int64_t N, int64_t K, const int32_t *B, int64_t chunk, void *packed);
/* The bf16 micro-kernels are rows of runtime/gemm/bgemm_rows.def (AMX tiles, AVX512-BF16, portable C);
 * the first one the CPU runs is picked once. force_row (tests, benchmarks): -1 when the CPU lacks it, a
 * negative row goes back to the pick. */
typedef enum primc_bgemm_row {
#define PRIMC_BGEMM_ROW(id, ...) PRIMC_BGEMM_ROW_##id,
#include "runtime/gemm/bgemm_rows.def"
#undef PRIMC_BGEMM_ROW
  PRIMC_BGEMM_ROW_COUNT
} primc_bgemm_row;
int primc_bgemm_row_active(void);
int primc_bgemm_force_row(int row);
const char *primc_bgemm_row_name(int row); /* NULL past the table */

/* Called once per finished tile of C, while it is hot: rows [m0, m0+mb), columns [n0, n0+nb); C
 * points at element (m0, n0). Tiles do not overlap and cover C; calls may come from several threads. */
typedef void (*primc_epilogue)(void *ctx, float *C, int64_t ldc, int64_t m0, int64_t n0, int64_t mb, int64_t nb);
int primc_sgemm_epi(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                    int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc, primc_epilogue epi,
                    void *epi_ctx);

/* B given by rows: brow(ctx, k, n0, nc, dst) writes B[k][n0 .. n0+nc) to dst (implicit im2col). */
typedef void (*primc_brow_fn)(void *ctx, int64_t k, int64_t n0, int64_t nc, float *dst);
int primc_sgemm_gen_b(int trans_a, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                      primc_brow_fn brow, void *brow_ctx, float beta, float *C, int64_t ldc, primc_epilogue epi,
                      void *epi_ctx);
/* A packed once (a conv's weights), B given by rows: C[M][N] = A B on bf16 operands, f32 sums. packed_a:
 * primc_bgemm_pack_a's (64-byte aligned, primc_bgemm_packed_a_size bytes; _check as primc_bgemm_packed_check);
 * B's row k, columns [n0, n0 + nc), from row(row_ctx, k, n0, nc, dst) (an implicit im2col), or when row is
 * NULL from B[k * ldb + n], rounded and packed per call into a buffer the calling thread keeps */
size_t primc_bgemm_packed_a_size(int64_t M, int64_t K);
int primc_bgemm_pack_a(int64_t M, int64_t K, const float *A, int64_t lda, void *packed);
int primc_bgemm_packed_a_check(const void *packed, size_t avail, int64_t M, int64_t K);
int primc_bgemm_packed_a_run(const void *packed_a, int64_t M, int64_t N, int64_t K, const float *B, int64_t ldb,
                             primc_brow_fn row, void *row_ctx, float *C, int64_t ldc);

/* B packed once (weights, at load time): the layout depends on the ISA chosen at run time, so pack
 * on the machine that runs. packed: 64-byte aligned, primc_sgemm_packed_b_size(N, K) bytes.
 * primc_sgemm_prepacked returns PRIMC_ERR_ARG when packed_b was packed for another ISA or shape. */
size_t primc_sgemm_packed_b_size(int64_t N, int64_t K);
int primc_sgemm_pack_b(int trans_b, int64_t N, int64_t K, const float *B, int64_t ldb, void *packed);
/* the same for the row another ISA runs (a cross compile packs for its target's row: PRIMC_ISA_NEON) */
size_t primc_sgemm_packed_b_size_isa(int isa, int64_t N, int64_t K);
int primc_sgemm_pack_b_isa(int isa, int trans_b, int64_t N, int64_t K, const float *B, int64_t ldb, void *packed);
int primc_sgemm_prepacked(int trans_a, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                          const void *packed_b, float beta, float *C, int64_t ldc, primc_epilogue epi, void *epi_ctx);

/* Checks packed_b (avail bytes there) before a read: a header primc_sgemm_pack_b writes for an N x K B on
 * some ISA (magic, ISA, its panel width and K block, N, K), whose panels fit in avail bytes. PRIMC_OK and
 * the bytes they take in *bytes (may be NULL), or PRIMC_ERR_WEIGHTS: weights read from a file may have
 * been altered, and the header decides where every later read goes. */
int primc_sgemm_packed_check(const void *packed_b, size_t avail, int64_t N, int64_t K, size_t *bytes);

/* the same from a packed_b made on any machine (a compiler packing weights ahead of time):
 * prepacked when its ISA is the running one's, else B is read out of the panels row by row */
int primc_sgemm_prepacked_any(int trans_a, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                              const void *packed_b, float beta, float *C, int64_t ldc, primc_epilogue epi,
                              void *epi_ctx);

/* What the micro-kernel applies to C as it stores its last K block, instead of a pass over each finished
 * tile: C[m][n] = clamp(C[m][n] + bias[m * bias_stride] + res[m * ldc + n], lo, hi); bias and res may be
 * NULL, res must not overlap C; NaN stays NaN. Not with b_packed.
 * With row > 0 the store also compacts (a direct conv's sums, rows padded to `row` columns of which the
 * first `keep` are outputs): column n of C row m goes to y[m * ldy + (n / row) * keep + n % row] when
 * n % row < keep and is dropped otherwise; C keeps only the partial sums of earlier K blocks, and res
 * is in y's layout. K must be > 0. */
typedef struct primc_gemm_store {
  const float *bias;
  int64_t bias_stride;
  const float *res;
  float lo, hi;
  int64_t row, keep; /* 0: no compaction */
  float *y;
  int64_t ldy;
} primc_gemm_store;

/* The general form the convolutions use (alpha 1, beta 0, C = A B then the epilogue):
 * A [M][K] row-major (lda), or [K][M] when trans_a, or packed by primc_sgemm_pack_a with tile height
 * a_packed_mr (> 0; lda unused);
 * B one of: b [K][N] (ldb); b_packed, made by primc_sgemm_pack_b (on any machine); rows generated by brow;
 * b with koff: B[k][n] = b[koff[k] + n], read in place (a stride-1 conv's taps over a padded image); or
 * b_gather: B[k][n] = b_gather[gather_n[n] + gather_k[k]] (a conv's weight-gradient columns, each a tap's
 * pixels of a padded input, read in place). */
typedef struct primc_gemm {
  int64_t M, N, K;
  const float *a;
  int64_t lda;
  int trans_a, a_packed_mr;
  const int64_t *a_koff; /* or A[m][k] = a[m * lda + a_koff[k]] (not trans_a, not packed): a conv's output gradient
                          * [images, M, pixels] read as [M, images x pixels] where it lies */
  const float *b;
  int64_t ldb;
  int trans_b; /* b(k, n) = b[n * ldb + k]; rows may overlap (ldb < K: a 1-D conv's strided windows) */
  const void *b_packed;
  const int64_t *koff;
  primc_brow_fn brow;
  void *brow_ctx;
  const float *b_gather;
  const int64_t *gather_n, *gather_k;
  float *c;
  int64_t ldc;
  primc_epilogue epi;
  void *epi_ctx;
  const struct primc_gemm_store *store; /* NULL, or what the micro-kernel adds as it stores (before epi) */
} primc_gemm;
int primc_sgemm_run(const primc_gemm *g);
/* A [M][K] (lda) as row strips of at most mr rows (M split evenly), each stored [k][rows]: M * K floats.
 * Any machine runs it (strips taller than its tile are split), faster when mr is its primc_sgemm_mr(). */
int primc_sgemm_pack_a(int64_t M, int64_t K, const float *A, int64_t lda, int mr, float *dst);
int primc_sgemm_mr(void);

/* the instruction set, chosen once from the CPU; it picks the GEMM row (below) and the conv rows' checks.
 * force_isa (tests, benchmarks) returns -1 when the CPU lacks it, PRIMC_ISA_AUTO goes back to the CPU's best */
enum {
  PRIMC_ISA_AUTO = -1,
  PRIMC_ISA_SCALAR = 0,
  PRIMC_ISA_AVX2 = 1,
  PRIMC_ISA_AVX512 = 2,
  PRIMC_ISA_NEON = 3,
  PRIMC_ISA_COUNT = 4
};
/* whether a CPU whose ISA is cpu runs code written for need: SCALAR runs anywhere, x86's levels are a ladder
 * (AVX-512 runs AVX2 code), NEON is a ladder of its own */
static inline int primc_isa_covers(int cpu, int need) {
  return need == PRIMC_ISA_SCALAR || need == cpu || (need == PRIMC_ISA_AVX2 && cpu == PRIMC_ISA_AVX512);
}
int primc_sgemm_force_isa(int isa);
int primc_sgemm_isa(void);
const char *primc_sgemm_isa_name(int isa);

/* Every fp32 GEMM micro-kernel is a row of runtime/gemm/gemm_rows.def (ISA, register tile, kernels); for
 * each ISA the first row in rank order it runs is the one the GEMM entry points use, picked once. A packed
 * B is laid out for that row's tile and records its ISA. */
typedef enum primc_gemm_row {
#define PRIMC_GEMM_ROW(id, ...) PRIMC_GEMM_ROW_##id,
#include "runtime/gemm/gemm_rows.def"
#undef PRIMC_GEMM_ROW
  PRIMC_GEMM_ROW_COUNT
} primc_gemm_row;
/* row metadata: name (NULL past the table), least ISA (-1), register tile (0) */
const char *primc_gemm_row_name(int row);
int primc_gemm_row_isa(int row);
int primc_gemm_row_mr(int row);
int primc_gemm_row_nr(int row);
/* the row an ISA runs (-1 for no ISA), and the one primc_sgemm runs now (as primc_sgemm_isa() says) */
int primc_gemm_row_of_isa(int isa);
int primc_gemm_row_active(void);
/* zmm FMAs a core of this CPU starts per cycle: 2 on most AVX-512 CPUs, 1 where 512-bit ops are split
 * into two 256-bit halves (AMD Zen 4), 0 without AVX-512. Kernel choices that trade multiply-adds
 * against memory traffic (Winograd) weigh them by it. */
int primc_cpu_zmm_fmas(void);
/* F16C's ymm conversions (with AVX2 and FMA, as the AVX2 epilogues use them) */
int primc_cpu_f16c(void);

/* 2-D convolution, NCHW input x[n][c][h][w], OIHW weights w[o][c/groups][kh][kw], y[n][o][oh][ow],
 * bias[o] (or NULL), then max(y, 0) when relu. Depthwise (groups == c == o) runs direct loops,
 * 1x1 stride-1 unpadded convs are one GEMM per group, the rest a GEMM per group whose B operand is
 * generated on the fly from x (implicit im2col): no scratch buffer beyond primc_sgemm's.
 * Returns PRIMC_ERR_ARG on inconsistent parameters. */
typedef struct primc_conv2d {
  int64_t n, c, h, w;
  int64_t o, kh, kw;
  int64_t groups, stride_h, stride_w, dil_h, dil_w;
  int64_t pad_t, pad_l, pad_b, pad_r;
  int relu;
  int w_packed_mr; /* > 0: w holds each group's [o/groups][c/groups*kh*kw] block packed by primc_sgemm_pack_a
                      with this tile height, at the group's plain offset (PRIMC_CONV_W_STRIPS) */
  int w_packed_panels; /* w holds each group's block transposed, as primc_sgemm_pack_b(1, o/groups,
                          c/groups*kh*kw) panels, group g at g * primc_sgemm_packed_b_size(...) bytes
                          (PRIMC_CONV_W_PANELS) */
  int w_winograd;      /* w is primc_conv2d_pack_winograd's output with tile height w_packed_mr
                          (PRIMC_CONV_W_WINOGRAD) */
  int w_lanes;         /* w is primc_conv2d_pack_lanes's output (PRIMC_CONV_W_LANES) */
  int w_bf16;          /* w holds each group's [o/groups][c/groups*kh*kw] block as primc_bgemm_pack_a's bf16
                          tiles, groups primc_conv2d_packed_weight_bytes / groups apart (PRIMC_CONV_W_BF16);
                          PRIMC_CONV_BF16_STREAM (not 1) when every call reads them from memory (the program's
                          weights outgrow the last-level cache: its plan's tile word), so large 1x1s read x in place */
  int store;           /* PRIMC_CONV_*_PAIRS: which of x, y and the residual are held as bf16 channel pairs */
} primc_conv2d;
/* A map held as bf16 channel pairs (--autocast bf16 between convs, codegen/kir_pairs.c), laid out as the bf16 GEMM's
 * B panels of the map seen as [channels][pixels], so that a 1x1 reads it without packing: per image, blocks of 32
 * pixels (the last one padded), each cp = ceil(c / 32) * 16 channel pairs by 32 pixels of 32-bit words, channel 2i's
 * value rounded to bf16 (nearest even) in the low half and channel 2i + 1's (0 past c) in the high half. The word of
 * pair i at pixel q is at (q / 32) 32 cp + ((i / 16) 2 + q % 32 / 16) 256 + i % 16 * 16 + q % 16. The bf16 row reads
 * and writes such maps where primc_conv_pairs_in_place says; every other path converts them to f32 around the conv. */
enum { PRIMC_CONV_X_PAIRS = 1, PRIMC_CONV_Y_PAIRS = 2, PRIMC_CONV_RES_PAIRS = 4 };
/* in the same word: the call packs its weights per call from the conv's whose input gradient it is, [c][o][kh][kw]
 * with each kernel reversed in both axes (primc_conv_plan_pack_flipped: the direct lanes and Winograd layouts) */
enum { PRIMC_CONV_W_FLIPPED = 8 };
int64_t primc_conv_pairs_bytes(int64_t n, int64_t c, int64_t h, int64_t w);
/* the word of pair i at pixel q of an image of c channels held so */
static inline int64_t primc_conv_pair_at(int64_t c, int64_t i, int64_t q) {
  return q / 32 * 32 * ((c + 31) / 32 * 16) + (i / 16 * 2 + q % 32 / 16) * 256 + i % 16 * 16 + q % 16;
}
void primc_conv_pairs_from_f32(const float *x, int64_t n, int64_t c, int64_t hw, uint32_t *d);
void primc_conv_pairs_to_f32(const uint32_t *s, int64_t n, int64_t c, int64_t hw, float *x);
/* whether the bf16 row's in-place path on this CPU runs p with its x, y and residual as channel pairs (one group,
 * blocks of 32 input channels, an even count of output channels, stride 1 and several taps, stride 2, or a 1x1
 * of stride 1 without padding); p's store bits aside */
int primc_conv_pairs_in_place(const primc_conv2d *p);
/* How a conv's weights are stored: PLAIN (OIHW), STRIPS (A strips for the GEMM rows), PANELS (W^T panels:
 * the transposed GEMM, output channels in the lanes), WINOGRAD and LANES (their rows' own layouts), BF16
 * (bf16 GEMM tiles of W: the bf16 row, only planned when the plan options ask for bf16). A
 * conv's plan (primc_conv_plan_make) says which; primc_conv2d_weight_layout gives the layout of the plan
 * for packable weights on this CPU (PLAIN for depthwise convs, which do not run on the GEMM). */
enum {
  PRIMC_CONV_W_PLAIN = 0,
  PRIMC_CONV_W_STRIPS = 1,
  PRIMC_CONV_W_PANELS = 2,
  PRIMC_CONV_W_WINOGRAD = 3,
  PRIMC_CONV_W_LANES = 4,
  PRIMC_CONV_W_BF16 = 5
};
int primc_conv2d_weight_layout(const primc_conv2d *p);
/* WINOGRAD (3x3 stride 1, 64 or 128+ channels each side by the CPU, 36+ 2x2 output tiles; on Intel's AVX-512 cores
 * also 16+ tiles where output pixels x channels reach 16,000): the conv runs as Winograd
 * F(2x2, 3x3); its weights are transformed once: the 16 matrices U_xi [o][c] of G g G^T, each packed
 * by primc_sgemm_pack_a with tile height mr, one after the other (primc_conv2d_winograd_bytes) */
int primc_conv2d_pack_winograd(const primc_conv2d *p, const float *w, int mr, float *dst);
/* the same from wf, the weights of the conv whose input gradient p is (as primc_conv2d_pack_lanes_flipped's) */
int primc_conv2d_pack_winograd_flipped(const primc_conv2d *p, const float *wf, int mr, float *dst);
size_t primc_conv2d_winograd_bytes(const primc_conv2d *p);
/* LANES (one group, AVX-512): the conv runs direct with 32 output channels in the vector lanes and
 * pixels broadcast from x in place; weights [ceil(o/32)][c kh kw][32], channels past o zero */
int primc_conv2d_pack_lanes(const primc_conv2d *p, const float *w, float *dst);
/* the same from wf, the weights of the conv whose input gradient p is: w[o][c][r][s] = wf[c][o][kh-1-r][kw-1-s] */
int primc_conv2d_pack_lanes_flipped(const primc_conv2d *p, const float *wf, float *dst);
size_t primc_conv2d_lanes_bytes(const primc_conv2d *p);
/* Checks weights w (bytes of them) before a conv reads them: p's packed panels (PRIMC_CONV_W_PANELS) one
 * header per group, each as primc_sgemm_packed_check, the next group's at the stride the first's ISA
 * gives; other layouts by their size. PRIMC_OK, or PRIMC_ERR_WEIGHTS (a weights file may be altered). */
int primc_conv2d_check_weights(const primc_conv2d *p, const void *w, size_t bytes);
/* bytes of the packed weights of that layout */
size_t primc_conv2d_packed_weight_bytes(const primc_conv2d *p, int layout);
/* p's w_* fields as weights in layout (PRIMC_CONV_W_*) with a plan's tile word (primc_conv_plan.tile_mr) say */
void primc_conv2d_set_layout(primc_conv2d *p, int layout, int tile);
/* the 2-D f32 conv a codegen conv call's params describe (primc_k_conv's layout); 0 when they describe
 * another conv (other rank or dtype, input dilation) */
int primc_conv2d_of_params(const int64_t *params, primc_conv2d *p);
/* floats of the col scratch primc_conv2d_f32_epi may use (im2col or the padded copy of a stride-1 conv's
 * input and its padded-width sums) */
int64_t primc_conv2d_scratch_floats(const primc_conv2d *p);
/* output height and width; 0 when the parameters are inconsistent */
int primc_conv2d_out_hw(const primc_conv2d *p, int64_t *oh, int64_t *ow);
int primc_conv2d_f32(const primc_conv2d *p, const float *x, const float *w, const float *bias, float *y);
/* the fused epilogue of a conv, applied to each output tile while it is in cache: y = clamp(sum +
 * bias[o * bias_stride] + res[same index as y], lo, hi); bias and res may be NULL; relu is lo = 0,
 * hi = inf, ReLU6 lo = 0, hi = 6; p->relu is ignored. The sums go to y, or to spare (y's size, may be
 * NULL) when y overlaps x or res: y may then alias either. PRIMC_ERR_ARG when that needs a spare.
 * col (may be NULL): primc_conv2d_scratch_floats(p) floats, where convs with narrow outputs materialize
 * im2col and stride-1 convs pad their input (without it they run on implicit im2col). */
typedef struct primc_conv_epi {
  const float *bias;
  int64_t bias_stride;
  const float *res;
  float lo, hi;
  int act; /* PRIMC_ACT_*: applied to the sum before the clamp */
  /* act RQ: the multiplier of channel o, rq_scale[o * rq_scale_stride] (rq_scale NULL: rq_scale_c for all), the
   * divisor and the zero point */
  const float *rq_scale;
  int64_t rq_scale_stride;
  float rq_scale_c, rq_div, rq_zp;
} primc_conv_epi;
/* a conv epilogue's activation: SiLU x sigmoid(x) (EfficientNet), GELU x/2 (1 + erf(x / sqrt 2)) (wav2vec,
 * Whisper's conv stem), F16: x rounded to the nearest f16 (ties to even) and back (--autocast fp16's rounded
 * activations; rounding is monotone, so with f16 bounds it commutes with the clamp applied after it). RQ
 * requantizes the integer sums of an exact f32 conv (passes/widen.c's): roundeven((trunc(sum) * scale[o] + bias[o])
 * / div) + zp, each operation in f32 as the QuantizeLinear loop it replaces computes it, then the clamp; no
 * residual. BF16: as F16 at bf16 (--autocast bf16's rounded activations on a CPU without bf16 dot products) */
enum { PRIMC_ACT_NONE, PRIMC_ACT_SILU, PRIMC_ACT_GELU, PRIMC_ACT_F16, PRIMC_ACT_RQ, PRIMC_ACT_BF16, PRIMC_ACT_COUNT };
/* erf on f32 as codegen's vectorized erf and the conv epilogue's compute it, with neither a division nor an exp:
 * |x| < 1: x P(x^2); 1 <= |x|: 1 - R(min(|x|, 3.92) - 2.46), R a polynomial for erfc on [1, 3.92] (beyond 3.92
 * erf rounds to 1); both computed, one kept. P (degree 6) fits erf(x)/x, R (degree 15) erfc, least squares in
 * double precision, made for primc, highest power first; within 2.5 ulp of the exact erf (every f32 of [1, 8)
 * checked: 1.3). R's degree keeps erf near +-1 within a few hundredths of an ulp of the rounded value: GELU's
 * x/2 (1 + erf) cancels there, and with degree 12 an f16 GELU missed its reference on 79 of the f16 inputs in
 * [-8, 8] (a correctly rounded erf: 10; this one: 6) */
#define PRIMC_ERF_P 8.00618654e-05, -0.000805356714, 0.00519293966, -0.0268560611, 0.112836346, -0.376126289, 1.12837923
#define PRIMC_ERFC_R                                                                                               \
  3.58396221e-07, -1.10014594e-06, -2.96276335e-06, 1.73729877e-05, -1.55256312e-05, -7.59426403e-05,              \
      0.000284649141, -0.000355739205, -0.000446261634, 0.00293705962, -0.00680540456, 0.00991422124,              \
      -0.00983129907, 0.00653451588, -0.00265630335, 0.000503353716
#define PRIMC_ERFC_R_N 16
#define PRIMC_ERFC_TO 3.92f /* R holds on [1, this]; |x| beyond is clamped to it (erf rounds to +-1) */
#define PRIMC_ERFC_AT 2.46f /* R's variable is min(|x|, PRIMC_ERFC_TO) less this */
/* y = e's epilogue of the sums acc over n images of o channels of P pixels (e's residual in y's layout; y may be
 * acc), on this CPU's vectors or, vector 0, in plain C (libm's exp and erf for SiLU and GELU) */
void primc_conv_epi_apply(const primc_conv_epi *e, int64_t n, int64_t o, int64_t P, const float *acc, float *y,
                          int vector);
int primc_conv2d_f32_epi(const primc_conv2d *p, const float *x, const float *w, const primc_conv_epi *e, float *y,
                         float *spare, float *col);
/* A conv of one group with few taps x input channels (pw: a 1x1 widening, a 3-channel stem; plain
 * weights w1, epilogue e1 without a residual) whose result only a depthwise conv (dw, plain weights w2,
 * epilogue e2) reads, run as one: the first conv makes the depthwise conv's input tiles itself, 16
 * channels in the vector lanes, and the map between them is never written. y must not overlap x or
 * e2's residual (the sums are stored before the residual is read). PRIMC_ERR_ARG (before anything is
 * written) when they do or when this CPU does not run the pair so (pays: it does, and faster than
 * the two convs one after the other); primc_k_conv_pair then runs the two convs in order. */
int primc_conv2d_then_dw_pays(const primc_conv2d *pw, const primc_conv2d *dw);
/* whether the pair runs act RQ epilogues on this CPU (its AVX2 lanes do; else PRIMC_ERR_ARG and the convs apart) */
int primc_conv_pair_requantizes(void);
int primc_conv2d_then_dw_f32(const primc_conv2d *pw, const float *x, const float *w1, const primc_conv_epi *e1,
                             const primc_conv2d *dw, const float *w2, const primc_conv_epi *e2, float *y);

/* ---------------------------------------------------------------- the conv family as rows (runtime/conv/) */

/* Every conv variant is a row of runtime/conv/conv_rows.def. The planner (runtime/conv/plan.c) picks
 * one at compile time from the shape and one per-CPU tuning table; codegen records it in the call's
 * params (the words at PRIMC_CONV_EPI_AT) and primc_k_conv runs that row without choosing again: at
 * run time only the row's instruction set, its buffer needs and its fit are checked, and when one
 * fails its named fallback row (same weight layout) runs instead. */
typedef enum primc_conv_row {
#define PRIMC_CONV_ROW(id, ...) PRIMC_CONV_ROW_##id,
#include "runtime/conv/conv_rows.def"
#undef PRIMC_CONV_ROW
  PRIMC_CONV_ROW_COUNT
} primc_conv_row;
enum { PRIMC_CONV_CLASS_CONV2D = 0, PRIMC_CONV_CLASS_DEPTHWISE = 1, PRIMC_CONV_CLASS_PAIR = 2 };

/* the typed call descriptor: what the planner chose and how the weights are stored for it */
typedef struct primc_conv_plan {
  int32_t row;     /* a primc_conv_row */
  int32_t layout;  /* PRIMC_CONV_W_* of the weights the call passes (PLAIN for a STRIPS row not packed) */
  int32_t tile_mr; /* tile height of STRIPS and WINOGRAD weights; PRIMC_CONV_BF16_STREAM or 0 for BF16 ones; else 0 */
} primc_conv_plan;
#define PRIMC_CONV_BF16_STREAM 2

typedef struct primc_conv_plan_opts {
  int packable;      /* the weights are constants the caller will pack as the plan says: any layout */
  int layout;        /* when !packable: the layout the weights are in (PRIMC_CONV_W_*; STRIPS needs tile_mr) */
  int tile_mr;       /* the tile height STRIPS and WINOGRAD weights are (or will be) packed with */
  int has_scratch;   /* the call passes primc_conv_plan_scratch_floats' col */
  int threads;       /* threads the call will run on; 0: primc_num_threads() */
  const char *force; /* a row name (PRIMC_CONV_ROW=) taken when it fits and its ISA is here; NULL: none */
  int bf16;          /* the conv may run on bf16 operands with f32 sums (--autocast bf16): the bf16 row first */
  int weights_stream; /* the program's weights outgrow the last-level cache: a bf16 plan says so (its tile word) */
  int batch_tiles;    /* the batch is fixed and the weights packed (once, or by each call): Winograd counts the tiles
                         of all the images one round of its GEMMs takes, not one image's */
  int weights_once;   /* the weights are packed once (constants), not at every call: rows whose packed weights
                         outweigh the plain ones (Winograd's 16/9) may pay on smaller maps */
} primc_conv_plan_opts;

/* the best row for p as o allows; PRIMC_OK, or PRIMC_ERR_ARG (p inconsistent, or no row reads weights in
 * o's layout) */
int primc_conv_plan_make(const primc_conv2d *p, const primc_conv_plan_opts *o, primc_conv_plan *plan);
/* every row that can run p under o on this CPU (o->force aside) and may pay, in the planner's rank order,
 * as plans (rows only ever fallbacks, lanes_loop, and the PAIR row left out): what `primc compile
 * --autotune` times. Returns their count (only max of them
 * are written to out, which may be NULL), or -1 when p is inconsistent */
int primc_conv_plan_candidates(const primc_conv2d *p, const primc_conv_plan_opts *o, primc_conv_plan *out, int max);
/* the planner's tuning row for this CPU (e.g. "AVX-512, two zmm FMAs per cycle (Intel)") */
const char *primc_conv_tuning_name(void);
/* whether the small conv pw then the depthwise conv dw run as the PAIR_DW row on this CPU (and pay) */
int primc_conv_plan_pair(const primc_conv2d *pw, const primc_conv2d *dw);
/* row metadata: name (NULL past the table), row of a name (-1), class, ISA, layout, fallback, and
 * whether the row can run p (next: the depthwise conv of a PAIR row, else NULL) */
const char *primc_conv_row_name(int row);
int primc_conv_row_find(const char *name);
int primc_conv_row_class(int row);
int primc_conv_row_isa(int row);
int primc_conv_row_layout(int row);
int primc_conv_row_fallback(int row);
int primc_conv_row_fits(int row, const primc_conv2d *p, const primc_conv2d *next);
/* floats of col the plan's row uses, and bytes of its weights */
int64_t primc_conv_plan_scratch_floats(const primc_conv2d *p, const primc_conv_plan *plan);
size_t primc_conv_plan_weight_bytes(const primc_conv2d *p, const primc_conv_plan *plan);
/* w (plain OIHW) into dst as the plan's layout wants (primc_conv_plan_weight_bytes, 64-byte aligned) */
int primc_conv_plan_pack(const primc_conv2d *p, const primc_conv_plan *plan, const float *w, void *dst);
/* the same from wf, the weights of the conv whose input gradient p is (PRIMC_CONV_W_FLIPPED): the LANES and
 * WINOGRAD layouts; PRIMC_ERR_ARG for others */
int primc_conv_plan_pack_flipped(const primc_conv2d *p, const primc_conv_plan *plan, const float *wf, void *dst);
/* where a call that packs its weights at run time (weights computed by the program: a training step's) puts
 * them in its scratch: past the plan's col, at a multiple of 64 bytes */
int64_t primc_conv_plan_pack_offset(const primc_conv2d *p, const primc_conv_plan *plan);
/* runs the plan's row (or its fallback) with primc_conv2d_f32_epi's arguments; p's w_* fields are
 * ignored (the plan says how w is stored); x, y and e->res point at maps of bf16 channel pairs where p->store says */
int primc_conv_run(const primc_conv2d *p, const primc_conv_plan *plan, const float *x, const void *w,
                   const primc_conv_epi *e, float *y, float *spare, float *col);
/* the row that last ran in this process (after fallbacks), for tests; -1 before any */
int primc_conv_last_row(void);
/* tests: 1 makes the executor requantize (act RQ) after every row, as it does after rows without CV_EPI_RQ */
void primc_conv_rq_force_after(int on);

/* where a conv call's fused-epilogue words start in its params (codegen/kir_rewrites.c writes them,
 * runtime/kernels_conv.c reads them), and their count: [fused, bias offset, bias stride, has residual, lo, hi,
 * act (PRIMC_ACT_*), weight layout, tile height, packed weight bytes, planned row + 1 (0: none), then act RQ's:
 * scale offset, scale stride (-1: the constant next), scale constant, divisor, zero point (doubles as bits), then
 * the storage of x, y and the residual (PRIMC_CONV_EPI_STORE)]; act RQ's per-channel scales arrive in the
 * residual's buffer */
#define PRIMC_CONV_EPI_AT (1 + 27 + 1 + 32)
#define PRIMC_CONV_EPI_WORDS 17
#define PRIMC_CONV_EPI_RQ 11 /* the first of act RQ's words */
#define PRIMC_CONV_EPI_STORE 16 /* PRIMC_CONV_*_PAIRS bits: x's, y's and the residual's storage (0: f32) */

/* int8 GEMM (runtime/gemm/igemm*.c): exact int32 C[M][N] = A B for int32 A and a constant int32 B each of whose
 * columns spans at most 256 values (a u8 or s8 weight less its zero points), wrapping as the prims' integer sums
 * do. B is packed once by primc_igemm_pack_b as s8 less a per-column offset, with its column sums; A is cut per
 * call into u8 less a per-row offset (its minimum) and multiplied as u8 x s8 (AMX-INT8 tdpbusd, VNNI vpdpbusd);
 * the offsets fold back in at the store: sum (a'+oa)(b'+ob) = sum a'b' + ob sum a' + oa sum b' + K oa ob. A call
 * with a row of A spanning more than 256 values runs on an exact plain loop instead. scratch:
 * primc_igemm_scratch_size(M, K) bytes, 64-byte aligned. */
size_t primc_igemm_packed_b_size(int64_t N, int64_t K); /* 0 for a bad shape */
/* 1 when every column of B ([K][N], [N][K] when trans_b) spans at most 256 values, which pack_b requires */
int primc_igemm_b_fits(int trans_b, int64_t N, int64_t K, const int32_t *B);
/* B[k][n] read back from a B packed by primc_igemm_pack_b (checked by primc_igemm_packed_check; n < N, k < K) */
int32_t primc_igemm_packed_b_at(const void *packed, int64_t n, int64_t k);
int primc_igemm_pack_b(int trans_b, int64_t N, int64_t K, const int32_t *B, void *packed);
/* the same, with row's records of every block of B beside the panels where the row keeps some (igemm_rows.def's
 * prep: the AVX2 row's split of B, made once here instead of per call); row -1: none, as pack_b. The size with them:
 * packed_b_size_row. A B packed with one row's records runs on every row; only that row reads them. */
size_t primc_igemm_packed_b_size_row(int64_t N, int64_t K, int row);
int primc_igemm_pack_b_row(int trans_b, int64_t N, int64_t K, const int32_t *B, void *packed, int row);
/* the row a host compile packs records for: the active row when it keeps records and a run multiplies B in gemms
 * GEMMs of M rows, so that without them its tasks would make each block's record more than once a run; else -1 */
int primc_igemm_prep_row(int64_t M, int64_t gemms);
int primc_igemm_packed_check(const void *packed, size_t avail, int64_t N, int64_t K); /* PRIMC_OK or _ERR_WEIGHTS */
size_t primc_igemm_scratch_size(int64_t M, int64_t K);
int primc_igemm_prepacked(int trans_a, int64_t M, int64_t N, int64_t K, const int32_t *A, int64_t lda,
                          const void *packed_b, int32_t *C, int64_t ldc, void *scratch);
/* the same GEMM on an A its caller writes straight into the GEMM's tiles (a conv's patches, read from its input
 * without an int32 im2col): fill(ctx, strip, tiles, Kp, roff, rsum) writes rows strip * 16 .. + 15 of A (rows past
 * M zero) as u8 tiles of 16 * Kp bytes (Kp: K rounded up to 64, zero past K; byte (r, k) at (k / 64) * 1024 +
 * r * 64 + k % 64), each row's offset (subtracted before the row was stored as u8) and the sum of its stored
 * bytes; strips are filled in parallel. scratch as primc_igemm_prepacked's. */
typedef void (*primc_igemm_fill_fn)(void *ctx, int64_t strip, uint8_t *tiles, int64_t Kp, int32_t *roff, int32_t *rsum);
int primc_igemm_filled(int64_t M, int64_t N, int64_t K, primc_igemm_fill_fn fill, void *ctx, const void *packed_b,
                       int32_t *C, int64_t ldc, void *scratch);
/* the same GEMM with A read where it lies, on rows whose kern_ip the active row has (primc_igemm_in_place_runs; else
 * PRIMC_ERR_ARG): row m's byte k at map + (m / ow) * row_bytes + (m % ow) * col_bytes + boff[k / 64] + k % 64 (a
 * conv's patches on its channels-last u8 map, each tap whole 64-byte blocks of channels; bytes past K meet B's zero
 * rows); roff and rsum (M each) as fill's. No scratch. */
typedef struct primc_igemm_ip {
  const uint8_t *map;
  int64_t ow, row_bytes, col_bytes;
  const int64_t *boff; /* K rounded up to 64, over 64, entries */
  const int32_t *roff, *rsum;
} primc_igemm_ip;
int primc_igemm_in_place_runs(void);
int primc_igemm_in_place(int64_t M, int64_t N, int64_t K, const primc_igemm_ip *ip, const void *packed_b, int32_t *C,
                         int64_t ldc);
/* int32 convs (ConvInteger, QLinearConv: u8 or s8 operands less their zero points) on the int8 GEMM
 * (runtime/kernels_conv_i8.c). params: the conv call's first PRIMC_CONV_EPI_AT words (codegen/calls.def), then
 * for the call lo (x's values are proven within [lo, lo + 255], lo <= 0: the padding's 0 is one of them), the
 * packed weights' bytes, how x is stored and its zero point (PRIMC_CONV_I8_X_*). The weights are packed once per group as B = W [Og][KH][KW][Cg] (primc_igemm_pack_b,
 * transposed); the input goes per image into a padded channels-last u8 copy (x - lo) whose patches fill A's
 * tiles directly. fits: a 1-D or 2-D conv without input dilation whose every output channel's weights span at
 * most 256 values. */
/* how a conv_i8 call's x is stored (params word PRIMC_CONV_EPI_AT + 2; the next word is zp): int32 values, or u8 / s8
 * whose values are the stored ones less zp (codegen narrows the kernel that computed i32(q) - zp to store q) */
enum { PRIMC_CONV_I8_X_I32 = 0, PRIMC_CONV_I8_X_U8 = 1, PRIMC_CONV_I8_X_S8 = 2, PRIMC_CONV_I8_X_I32_ANY = 3 };
/* PRIMC_CONV_I8_X_I32_ANY: int32 values no range was proven for (ConvInteger's input less a zero point computed at
 * run time, as quantize_dynamic writes): each image's lo is its least value (0 when the padding is lower), and an
 * image whose values (with the padding's 0) span more than 256 runs an exact direct conv from the packed weights */
/* The words after x's zero point (PRIMC_CONV_I8_RQ_AT, PRIMC_CONV_I8_RQ_WORDS of them): a requantization of the
 * call's int32 sums (a QDQ or QLinearConv output's QuantizeLinear, and a residual add's dequantize-add-requantize
 * after it: codegen/kir_requant.c) that it applies itself, writing its outputs instead of int32 sums to bufs[0].
 * Words: [0] kind (NONE: plain int32 sums), [1] the outputs' count (1 or 2), [2] a mask of the per-channel operands
 * (PRIMC_CONV_I8_RQ_IBIAS, _MUL, _ADD) and of stage 2 (_RES), [3] the int32 bias, then doubles' bits: [4..9] mul,
 * add, div, zp, lo, hi; [10..15] stage 2's z1, s1, div2, zp2, lo2, hi2; [16..21] per output its kind
 * (PRIMC_CONV_I8_OUT_*, as an integer), zsub and smul.
 * Stage 1, output channel o: v = sums + ibias[o] (int32, wrapping), x = T(v) * mul[o] + add[o], x = x / div,
 * q = clamp(roundeven(x) + zp, lo, hi) (a NaN to lo) in T, f32 (every word an f32 value) or f64 (kind).
 * Stage 2 (with _RES), in f32: x = ((q - z1) * s1 + res) / div2, q = clamp(roundeven(x) + zp2, lo2, hi2), res an
 * f32 tensor shaped as the output. Each output (NCHW) is q as u8, s8 or i32, or (q - zsub) * smul as f32.
 * bufs[4], [5]: the outputs; then the per-channel arrays ibias, mul, add (those in the mask; f32 or f64 as T,
 * int32 for ibias); then res. */
enum { PRIMC_CONV_I8_RQ_NONE = 0, PRIMC_CONV_I8_RQ_F32 = 1, PRIMC_CONV_I8_RQ_F64 = 2 };
enum { PRIMC_CONV_I8_RQ_IBIAS = 1, PRIMC_CONV_I8_RQ_MUL = 2, PRIMC_CONV_I8_RQ_ADD = 4, PRIMC_CONV_I8_RQ_RES = 8 };
enum { PRIMC_CONV_I8_OUT_U8 = 0, PRIMC_CONV_I8_OUT_S8 = 1, PRIMC_CONV_I8_OUT_F32 = 2, PRIMC_CONV_I8_OUT_I32 = 3 };
#define PRIMC_CONV_I8_RQ_AT (PRIMC_CONV_EPI_AT + 4)
#define PRIMC_CONV_I8_RQ_WORDS 22
int primc_conv_i8_fits(const int64_t *params, const int32_t *w);
/* the weights' bytes and packing with int8 row `row`'s records (-1: none; primc_igemm_pack_b_row); the call takes each
 * group's share of the bytes its params give */
size_t primc_conv_i8_weight_bytes(const int64_t *params, int row);
int primc_conv_i8_pack(const int64_t *params, const int32_t *w, void *dst, int row);
int64_t primc_conv_i8_scratch_bytes(const int64_t *params);
/* bufs: out (i32), x (i32), the packed weights, scratch of primc_conv_i8_scratch_bytes; PRIMC_ERR_WEIGHTS on a
 * packed header that does not match, PRIMC_ERR_RUNTIME when x leaves [lo, lo + 255] (nothing proven it then) */
int primc_k_conv_i8(const int64_t *params, void *const *bufs);
/* tests: on (1) makes primc_k_conv_i8 fill A without AVX512-BW moves, as a CPU without them does; 0 goes back */
void primc_conv_i8_force_portable(int on);
/* tests: on (1) makes a requantizing conv_i8 call write its output element by element, as a CPU without AVX2 does */
void primc_conv_i8_rq_force_portable(int on);
/* The int8 micro-kernels are rows of runtime/gemm/igemm_rows.def; the first the CPU runs is picked once.
 * force_row (tests, benchmarks): -1 when the CPU lacks it, a negative row goes back to the pick. */
typedef enum primc_igemm_row {
#define PRIMC_IGEMM_ROW(id, ...) PRIMC_IGEMM_ROW_##id,
#include "runtime/gemm/igemm_rows.def"
#undef PRIMC_IGEMM_ROW
  PRIMC_IGEMM_ROW_COUNT
} primc_igemm_row;
int primc_igemm_row_active(void);
int primc_igemm_force_row(int row);
const char *primc_igemm_row_name(int row);
/* taps x input channels per group from which an int32 conv pays on row `row` (igemm_rows.def's conv_k; 0 past the
 * table): below it passes/widen.c computes it as an f32 conv where that is exact */
int64_t primc_igemm_conv_min_k(int row);
/* tests: every row's conv_k taken as k (k >= 0), or each its own again (k < 0) */
void primc_igemm_force_conv_min_k(int64_t k);
/* dot's params, then the packed B's bytes; bufs: out (i32), a (i32), B packed by primc_igemm_pack_b, scratch of
 * primc_igemm_scratch_size(M, K) bytes (codegen/calls.def's dot_i8) */
int primc_k_dot_i8(const int64_t *params, void *const *bufs);
int primc_k_dot_i8_epi(const int64_t *params, void *const *bufs, void (*epi)(void *ctx, int64_t begin, int64_t end),
                       void *ctx);

#endif
