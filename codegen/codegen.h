/* codegen/codegen.h: kernel IR construction from fused groups, LLVM and CUDA C renderers, packaging. */
#ifndef PRIMC_CODEGEN_H
#define PRIMC_CODEGEN_H

#include "ir/ir.h"

struct pc_autotune; /* codegen/autotune.h */

typedef enum pc_emit {
  PC_EMIT_EXE,  /* standalone executable: .npy in/out, --bench N */
  PC_EMIT_OBJ,  /* NAME.o + NAME.h */
  PC_EMIT_LIB,  /* shared library + NAME.h */
  PC_EMIT_LLVM, /* .ll text */
  PC_EMIT_ASM,  /* assembly text */
  PC_EMIT_CUDA  /* .cu text */
} pc_emit;

typedef enum pc_target { PC_TARGET_CPU, PC_TARGET_CUDA } pc_target;

/* progress of a long compile: a phase ("kernel IR", "LLVM IR", "LLVM optimization", "machine code", "link")
 * and done of total units in it (total 0: not counted). Called on the compiling thread; the library itself
 * prints nothing. */
typedef void (*pc_progress_fn)(void *ctx, const char *phase, int64_t done, int64_t total);

/* Run-time dims (--dim NAME=LO..HI): the graph given to pc_codegen is the model at every symbol's hi; build
 * returns the model compiled the same way (imported, options applied, pipeline run) with symbol s at
 * values[s], or NULL when out of memory (a failed build comes back with its error in the graph). */
#define PC_DYN_MAX_SYMS 3
typedef struct pc_dyn_spec {
  int n_syms;
  const char *name[PC_DYN_MAX_SYMS];
  int64_t lo[PC_DYN_MAX_SYMS], hi[PC_DYN_MAX_SYMS];
  /* > 1: the symbol takes multiples of it only (--dim NAME=LO..HI%M); sizes are fitted in value / mult, the
   * value the run binds (a strided conv's output size floor((H + 2p - k) / s) + 1 is then a polynomial) */
  int64_t mult[PC_DYN_MAX_SYMS];
  pc_graph *(*build)(void *ctx, const int64_t *values);
  void *ctx;
  /* written by codegen, for --report */
  int n_builds, n_sizes;
  char probes[256];
  /* bucket_step[s] > 0: symbol s's range in buckets of that many values (--dim NAME=LO..HI:STEP; on several dims,
   * a grid of them), each its own program planned at the bucket's ends (codegen/buckets.c); what they cost,
   * written by codegen */
  int64_t bucket_step[PC_DYN_MAX_SYMS];
  char buckets[8192];
  int fit_failed; /* written by codegen/cuda_dynamic.c: the program built but could not follow the dims (a part of
                     the range may) */
  int fit_sym;    /* written by codegen when a program could not follow the dims: the symbol whose values it could
                     not follow (halving a bucket along it), -1 when none was named */
} pc_dyn_spec;
/* how many of ds's symbols are in buckets (0: one program for the ranges) */
static inline int pc_dyn_bucketed(const pc_dyn_spec *ds) {
  int n = 0;
  for (int s = 0; ds && s < ds->n_syms; s++) n += ds->bucket_step[s] > 0;
  return n;
}

typedef struct pc_codegen_opts {
  pc_emit emit;
  const char *output;       /* path of the main output */
  const char *name;         /* C identifier prefix of the entry points (default: from output) */
  const char *triple;       /* NULL: host */
  const char *cpu;          /* NULL: host cpu ("native"), e.g. "znver4", "generic" */
  const char *features;     /* NULL: host features */
  int weights_external;     /* weights in NAME.weights, mmapped, instead of .rodata */
  int deterministic;
  const char *runtime_dir;  /* where libprimc_rt.a and runtime/primc_rt.h are (default: beside primc) */
  int opt_level;            /* LLVM pipeline default<O0..O3> (tools/compile.c defaults to 3) */
  const char *gpu_arch;     /* CUDA target: NVRTC --gpu-architecture, e.g. "sm_90" (NULL: sm_90) */
  pc_target target;         /* PC_TARGET_CUDA: NVRTC cubin + PTX with a host side (codegen/package_cuda.c) */
  int cuda_graphs;          /* CUDA executables replay the model as one captured CUDA graph */
  int profile;              /* time every kernel (primc_prof_begin/end): `./OUT --profile` prints the table */
  struct pc_autotune *autotune; /* host CPU code: conv rows chosen by timing them (codegen/autotune.h); NULL: planner */
  pc_dyn_spec *dyn;         /* NULL: every dim fixed */
  /* run-time dims' probes: each conv takes the row the program at the bounds chose (by the conv's node id), so that
   * a row picked by the map's size does not differ between sizes (codegen/dynamic.c) */
  const struct kir_conv_pin *conv_pins;
  int n_conv_pins;
  pc_progress_fn progress;  /* NULL: none */
  void *progress_ctx;
} pc_codegen_opts;

/* o->progress, when there is one */
static inline void pc_progress(const pc_codegen_opts *o, const char *phase, int64_t done, int64_t total) {
  if (o && o->progress) o->progress(o->progress_ctx, phase, done, total);
}

/* Lowers every fused group of g (after pc_pipeline_run) to kernel IR and
 * renders it to the requested output, through the first row of the backend
 * table (codegen/backend.c) that takes the options. */
pc_status pc_codegen(pc_graph *g, const pc_codegen_opts *opts);
/* UNSUPPORTED (naming target) when g asks for bf16 contractions (--autocast bf16, --matmul-precision high or
 * medium), which only host CPU code (the bf16 GEMM rows) and CUDA (the tensor-core rows) have: for other CPUs */
pc_status pc_codegen_host_only_check(pc_graph *g, const char *target);

/* The CPU backend (codegen/package.c): LLVM object, header, executable or shared library,
 * for the host or, with opts->triple, another target. */
pc_status pc_codegen_cpu(pc_graph *g, const pc_codegen_opts *opts);

/* Prints the kernel IR of g (loops, index maps, expressions, origin nodes) for `primc dump --kernels`. */
pc_status pc_kernels_print(pc_graph *g, FILE *f);
/* the same with the conv rows tune chooses (NULL: the planner's), marked "(tuned)" */
pc_status pc_kernels_print_tuned(pc_graph *g, FILE *f, struct pc_autotune *tune);
/* the same as a CPU compile with o builds it (its triple, NULL: this machine; its autotune; its run-time dims, for
 * which the rows are planned as for any size in range): a cross compile's rows are planned on the target (its
 * weights stay plain), and max pools are runtime calls on every CPU */
pc_status pc_kernels_print_target(pc_graph *g, FILE *f, const pc_codegen_opts *o);
/* the kernel IR a --target cuda compile renders (sm: pc_cuda_sm's): no CPU rows, no packed weights */
pc_status pc_kernels_print_cuda(pc_graph *g, FILE *f, int sm);

/* ---------------------------------------------------------------- CUDA (codegen/cuda.c, codegen/nvrtc.c) */

struct kir_program;

/* how the host launches one kernel of the rendered module: a 1-D grid of 1-D blocks */
#define PC_CUDA_GRID_FACTORS 4
#define PC_CUDA_MAX_GRID 65535 /* kernels are grid-stride loops: more blocks buy nothing */
typedef struct pc_cuda_launch {
  const char *name;  /* extern "C" symbol: k<N>_<prim> */
  int64_t grid;      /* blocks: the product of ceil(work[i] / per[i]), at least 1, at most the grid-stride cap */
  int n_work;        /* the factors grid is made of, which a run with other dims computes again */
  int64_t work[PC_CUDA_GRID_FACTORS], per[PC_CUDA_GRID_FACTORS];
  int block;         /* threads per block */
  int n_args;
  const int *args;   /* kernel-IR buffer ids passed as the kernel's pointer parameters, in order; -1 - s: the value of
                      * run-time dim s (kir_program.cuda_syms) */
} pc_cuda_launch;
/* the grid of n factors: prod ceil(work[i] / per[i]), clamped to 1 .. the grid-stride cap */
int64_t pc_cuda_grid(int n, const int64_t *work, const int64_t *per);

/* Renders every kernel of p as an extern "C" __global__ CUDA C kernel to f;
 * *launches (p->n_kernels entries, in g's arena) says how to launch each, in order.
 * Kernels that find bad data (an index out of range) set the module's
 * `__device__ int primc_status` to PRIMC_ERR_RUNTIME. */
pc_status pc_cuda_render_program(const struct kir_program *p, FILE *f, pc_cuda_launch **launches);
/* Builds the kernel IR of g (its fusion groups) and renders it as CUDA C (for sm_90). */
pc_status pc_cuda_render(pc_graph *g, FILE *f);
/* the compute capability x 10 an NVRTC architecture names ("sm_90", "sm_90a", "compute_80"): 90 for NULL or
 * anything without one */
int pc_cuda_sm(const char *arch);

/* NVRTC, loaded with dlopen: libnvrtc.so from the default path or /usr/local/cuda/lib64 */
typedef struct pc_nvrtc pc_nvrtc;
/* NULL with a message in err when NVRTC cannot be loaded */
pc_nvrtc *pc_nvrtc_open(char *err, size_t errlen);
void pc_nvrtc_close(pc_nvrtc *nv);

typedef struct pc_cuda_binary {
  void *cubin;       /* malloc'ed, for arch */
  size_t cubin_size;
  char *ptx;         /* malloc'ed, NUL-terminated: JIT-compiled by drivers of newer GPUs */
  size_t ptx_size;
  char *log;         /* NVRTC's log (warnings), malloc'ed, may be empty */
} pc_cuda_binary;

/* Compiles CUDA C to a cubin + PTX for arch ("sm_90" when NULL). On failure the
 * graph's error names the kernel of the first error line and quotes NVRTC's log. */
pc_status pc_nvrtc_compile(pc_graph *g, pc_nvrtc *nv, const char *src, const char *arch, pc_cuda_binary *out);
void pc_cuda_binary_free(pc_cuda_binary *b);

/* --emit cuda: writes the CUDA C of g to opts->output; an output ending in
 * .cubin or .ptx gets NVRTC's binary for opts->gpu_arch instead. */
pc_status pc_codegen_cuda(pc_graph *g, const pc_codegen_opts *opts);

/* --target cuda (codegen/package_cuda.c): NVRTC cubin for opts->gpu_arch + PTX, weights and a
 * host side NAME_run(inputs, outputs, workspace, stream) in one object; executable, object +
 * header, or shared library as opts->emit says. The host side is C compiled with the system cc. */
pc_status pc_codegen_cuda_package(pc_graph *g, const pc_codegen_opts *opts);

/* ---- file names and files, shared by the backends (codegen/files.c) */

void pc_path_stem(const char *path, char *out, size_t n);  /* path without its extension */
void pc_path_ident(const char *path, char *out, size_t n); /* a C identifier from path's base name */
/* the entry points' prefix at most this long: symbols are built from it in 256 bytes, with suffixes */
#define PC_MAX_ENTRY_NAME 200
int pc_entry_name_ok(const char *name); /* a C identifier of 1 to PC_MAX_ENTRY_NAME characters */
/* refuses what can be refused before any work: a name that is no C identifier (or too long), an output whose
 * directory does not exist or cannot be written (named as the user gave it) */
pc_status pc_output_check(pc_graph *g, const pc_codegen_opts *o);
/* n bytes of data into path; PC_ERR_IO on g when it cannot be written */
pc_status pc_file_write(pc_graph *g, const char *path, const void *data, size_t n);
/* Model strings (tensor and dim names, node names) in generated C and headers, which a compiler reads: as a string
 * literal ("..." with ", \\, * and every byte outside printable ASCII as escapes, so that it stays one literal and
 * cannot close a comment around it either), or as comment text (newlines as spaces, the second character of a
 * comment's opening or closing pair as "|") */
void pc_put_c_string(FILE *f, const char *s);
void pc_put_c_comment(FILE *f, const char *s);
/* pc_put_c_comment's text into buf (len bytes, truncated) */
void pc_c_comment_text(char *buf, size_t len, const char *s);
/* where libprimc_rt.a and runtime/primc_rt.h are: o->runtime_dir, else the running program's directory */
void pc_runtime_dir(const pc_codegen_opts *o, char *out, size_t n);

/* ---- running the system cc (codegen/spawn.c): an argument vector, no shell */

#define PC_ARGV_MAX 64
typedef struct pc_argv {
  const char *v[PC_ARGV_MAX]; /* NULL-terminated */
  int n, overflow;
  char store[4096];           /* the words of pc_argv_add_words */
  size_t store_used;
} pc_argv;

void pc_argv_add(pc_argv *a, const char *arg);        /* one argument, as it is (a path may hold anything) */
void pc_argv_add_path(pc_argv *a, const char *path); /* a file: "./" before one that starts with '-' */
void pc_argv_add_words(pc_argv *a, const char *words); /* each blank-separated word of words ($CC, $PRIMC_LDFLAGS) */
/* runs a->v[0] found on PATH with a's arguments and waits; PC_ERR_IO on g naming what and the command
 * when it cannot start, exits non-zero or dies of a signal */
pc_status pc_argv_run(pc_graph *g, const char *what, const pc_argv *a);

/* NVRTC compile-check without packaging, several graphs per NVRTC program (their kernels renamed
 * apart) for speed: res[i] is PC_OK, or the graph's failure with its message in gs[i] (a kernel
 * cuda.c cannot render comes back as PC_ERR_UNSUPPORTED). Graphs must have run the pipeline. */
void pc_cuda_check_many(pc_graph *const *gs, int n, pc_nvrtc *nv, const char *arch, pc_status *res);

#endif
