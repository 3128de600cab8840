/* include/primc.h: the public C API of the primc compiler (libprimc.so): load a model, set options, compile it
 * to a file, and query its inputs and outputs.
 *
 * One opaque handle, primc_model, holds a model and its options. Every call that can fail returns a
 * primc_status; the handle keeps the message of its last failure (primc_model_error), naming the file and
 * the model node where there is one. The library never prints and never exits. A handle may be used by one
 * thread at a time; separate handles are independent.
 *
 *   primc_model *m = primc_model_new();
 *   primc_model_set_dim(m, "batch", 1);
 *   if (primc_model_load_file(m, "model.onnx") || primc_model_compile(m, PRIMC_EMIT_LIB, "model.so"))
 *     fprintf(stderr, "%s\n", primc_model_error(m));
 *   primc_model_free(m);
 *
 * What is compiled is described by the header it writes beside the output (NAME.h for --emit obj / lib):
 * NAME_run(inputs, outputs, workspace), NAME_workspace_size, NAME_output_dims, NAME_load_weights. Compiled
 * code sizes its thread pool at its first parallel kernel from $PRIMC_NUM_THREADS (default: every CPU). */
#ifndef PRIMC_H
#define PRIMC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PRIMC_API_VERSION 1 /* raised when a declaration below changes incompatibly */

typedef struct primc_model primc_model;

typedef enum primc_status {
  PRIMC_STATUS_OK = 0,
  PRIMC_STATUS_PARSE = 1,       /* malformed model file */
  PRIMC_STATUS_TYPE = 2,        /* a dtype an op does not accept */
  PRIMC_STATUS_SHAPE = 3,       /* shapes that do not agree */
  PRIMC_STATUS_ATTR = 4,        /* a missing or bad attribute */
  PRIMC_STATUS_UNSUPPORTED = 5, /* a valid model primc does not handle yet */
  PRIMC_STATUS_IO = 6,          /* a file that could not be read or written, a link that failed */
  PRIMC_STATUS_RANGE = 7,       /* an index or size out of range, a model over the memory limit */
  PRIMC_STATUS_NOMEM = 8,
  PRIMC_STATUS_INTERNAL = 9,
  PRIMC_STATUS_USAGE = 10       /* a bad argument to this API, or a call out of order */
} primc_status;

typedef enum primc_emit {
  PRIMC_EMIT_EXE = 0,  /* standalone executable: .npy in and out, --bench N */
  PRIMC_EMIT_OBJ = 1,  /* PATH (.o added unless it ends in .o) + NAME.h */
  PRIMC_EMIT_LIB = 2,  /* shared library PATH + its header (PATH without extension + .h) */
  PRIMC_EMIT_LLVM = 3, /* LLVM IR text */
  PRIMC_EMIT_ASM = 4,  /* assembly text */
  PRIMC_EMIT_CUDA = 5  /* CUDA C (or its cubin / PTX when PATH ends in .cubin / .ptx) */
} primc_emit;

typedef enum primc_target {
  PRIMC_TARGET_CPU = 0, /* LLVM, for this machine unless primc_model_set_triple / set_cpu say otherwise */
  PRIMC_TARGET_CUDA = 1 /* kernels compiled by NVRTC into the output; the driver is needed at run time only */
} primc_target;

typedef enum primc_io { PRIMC_INPUT = 0, PRIMC_OUTPUT = 1 } primc_io;

/* "0.1.0": the compiler's version */
const char *primc_version(void);
/* "ok", "parse", "unsupported", ... (never NULL) */
const char *primc_status_name(primc_status s);
/* a dtype code's name ("f32", "i64", "bool", "bf16", ...), NULL when there is no such code. The codes are
 * those of the generated headers' NAME_INPUTi_DTYPE: f16 0, bf16 1, f32 2, f64 3, i8 4, i16 5, i32 6,
 * i64 7, u8 8, bool 9, c64 10, u16 11, u32 12, u64 13, then the 8-bit floats and sub-byte ints */
const char *primc_dtype_name(int dtype);

/* ---------------------------------------------------------------- the handle */

/* a handle with default options (-O3, CPU, weights inside the output, no memory limit); NULL only when
 * out of memory */
primc_model *primc_model_new(void);
void primc_model_free(primc_model *m); /* NULL is fine */
/* the message of the last call on m that failed; "" when none has. Valid until the next call on m. */
const char *primc_model_error(const primc_model *m);

/* ---- options applied when the model is read: set them before primc_model_load_* (USAGE after) */

/* fixes the symbolic dim NAME (an ONNX dim_param) to value, or bounds it to [lo, hi] */
primc_status primc_model_set_dim(primc_model *m, const char *name, int64_t value);
primc_status primc_model_set_dim_range(primc_model *m, const char *name, int64_t lo, int64_t hi);
/* the same from the command line's spelling: "NAME=N", "NAME=LO..HI" or "NAME=LO..HI:STEP" (buckets, see
 * `primc compile --help`) */
primc_status primc_model_set_dim_spec(primc_model *m, const char *spec);
/* fixes ONNX graph input NAME to a constant, spelled as `primc compile --const` takes it: "mode=1",
 * "scale=0.5", "flag=true", "axes=0,2" (converted to the input's dtype where exact, shaped to its dims); the
 * input leaves the compiled code's inputs, and what depends on it (an If on a mode flag) is folded */
primc_status primc_model_set_const_spec(primc_model *m, const char *spec);
/* .safetensors weights of a text graph's constant(key=...) nodes */
primc_status primc_model_set_weights_file(primc_model *m, const char *path);
/* refuse a model needing more than bytes at run time (workspace, weights, inputs and outputs) or at
 * import (constants folded); 0: no limit (the default) */
primc_status primc_model_set_mem_limit(primc_model *m, int64_t bytes);

/* Graph transforms, applied to the model as it is read, so its inputs and outputs below are the transformed
 * ones (see README "Gradients and training"). grad: the vector-Jacobian product (a cotangent input per float
 * output, a gradient output per float input and weight). jvp: the Jacobian-vector product (a tangent input
 * per float input, a tangent output per float output). vmap: the inputs named in names ("x" or "x,y") take
 * a leading batch dim of size batch. Several: vmap, then grad, then jvp. train: a training step, with loss
 * "mse" or "cross_entropy" (a label input "label") and optimizer "sgd", "momentum", "adam" or "adamw" (its
 * weights and buffers become state inputs and outputs: the header's NAME_NUM_STATE); no other transform. */
primc_status primc_model_set_grad(primc_model *m, int grad);
primc_status primc_model_set_jvp(primc_model *m, int jvp);
primc_status primc_model_set_vmap(primc_model *m, const char *names, int64_t batch);
primc_status primc_model_set_train(primc_model *m, const char *loss, const char *optimizer, double lr,
                                   double weight_decay);

/* ---- loading: once per handle */

/* a model file: .onnx is ONNX, anything else primc's text graph; external data next to the file */
primc_status primc_model_load_file(primc_model *m, const char *path);
/* an ONNX model's bytes (copied: the caller may free them on return). dir: where its external data
 * lives, or NULL when it has none */
primc_status primc_model_load_onnx(primc_model *m, const void *data, size_t size, const char *dir);

/* ---- compile options: any time before primc_model_compile */

primc_status primc_model_set_opt_level(primc_model *m, int level); /* 0..3, default 3 */
primc_status primc_model_set_unfused(primc_model *m, int unfused); /* one kernel per prim */
primc_status primc_model_set_target(primc_model *m, primc_target target);
primc_status primc_model_set_cpu(primc_model *m, const char *cpu);          /* "znver4", "generic"; NULL: host */
primc_status primc_model_set_triple(primc_model *m, const char *triple);    /* "aarch64-linux-gnu"; NULL: host */
primc_status primc_model_set_gpu_arch(primc_model *m, const char *arch);    /* "sm_80"; NULL: sm_90 */
/* weights in a side file (PATH without extension + .weights) that NAME_load_weights maps, instead of
 * inside the output */
primc_status primc_model_set_weights_external(primc_model *m, int external);
/* the C prefix of the entry points (NAME_run...): a C identifier; NULL: from the output's file name */
primc_status primc_model_set_name(primc_model *m, const char *name);
primc_status primc_model_set_profile(primc_model *m, int profile); /* a per-kernel timer in the output */
/* CUDA executables replay the model as one captured CUDA graph */
primc_status primc_model_set_cuda_graphs(primc_model *m, int cuda_graphs);
/* conv rows chosen by timing each conv's candidate rows on this machine (on $PRIMC_NUM_THREADS threads,
 * default every CPU) instead of by the planner's table alone, as `primc compile --autotune`; host CPU code
 * only. The choices are cached per CPU model in a file (set_autotune_cache; NULL, the default:
 * $PRIMC_AUTOTUNE_CACHE, else $XDG_CACHE_HOME/primc/autotune.txt, else ~/.cache/primc/autotune.txt; ""
 * none): a compile reads it and adds what it timed. A cache that cannot be read or written is ignored. */
primc_status primc_model_set_autotune(primc_model *m, int autotune);
primc_status primc_model_set_autotune_cache(primc_model *m, const char *path);
/* how f32 MatMul/Gemm contractions run, torch.set_float32_matmul_precision's settings: "highest" (f32, the
 * default), "high" (bf16 hi + lo parts of each operand, about f32), "medium" (bf16 operands); sums in f32.
 * Host CPU code only (AMX or AVX512-BF16 where the CPU has them, a portable kernel elsewhere); compiling for
 * another target with high or medium fails UNSUPPORTED */
primc_status primc_model_set_matmul_precision(primc_model *m, const char *precision);
/* torch.autocast: "bf16" (compiled host code) runs MatMul/Gemm (as "medium" above) and Conv on bf16 operands
 * with f32 sums, everything else in f32; "fp16" (any target) runs MatMul/Gemm/Conv with a weight on both
 * operands rounded to f16, f32 sums and results; "none" (the default) leaves them f32 */
primc_status primc_model_set_autocast(primc_model *m, const char *autocast);
/* where libprimc_rt.a is, to link executables and shared libraries; NULL (default): libprimc.so's
 * own directory */
primc_status primc_model_set_runtime_dir(primc_model *m, const char *dir);

/* ---- compiling: after a load; may be called several times (each compile reads the model again) */

primc_status primc_model_compile(primc_model *m, primc_emit emit, const char *path);
/* the same into memory: *data (free it with primc_free) holds what the file would, *size its bytes; the
 * header of obj / lib is not kept, and weights in a side file are refused. Files are written to a private
 * directory under $TMPDIR (default /tmp) and removed. */
primc_status primc_model_compile_to_memory(primc_model *m, primc_emit emit, void **data, size_t *size);
void primc_free(void *p);

/* ---- inputs and outputs of the loaded model (after a load; an index out of range gives NULL / -1) */

int primc_model_count(const primc_model *m, primc_io io); /* -1 before a load */
/* the tensor's name ("in0" / "out0" for an unnamed one), as NAME.h's NAME_INPUTi_NAME */
const char *primc_model_tensor_name(const primc_model *m, primc_io io, int i);
int primc_model_tensor_dtype(const primc_model *m, primc_io io, int i); /* a dtype code (above) */
int primc_model_tensor_rank(const primc_model *m, primc_io io, int i);
/* dim d: its size, or -1 when it is symbolic (not fixed by primc_model_set_dim) */
int64_t primc_model_tensor_dim(const primc_model *m, primc_io io, int i, int d);
/* a symbolic dim's name ("batch"), NULL for a fixed one */
const char *primc_model_tensor_dim_name(const primc_model *m, primc_io io, int i, int d);
/* dim d's inclusive range: [size, size] for a fixed dim, the symbol's bounds for a symbolic one */
primc_status primc_model_tensor_dim_range(const primc_model *m, primc_io io, int i, int d, int64_t *lo, int64_t *hi);

#ifdef __cplusplus
}
#endif
#endif
