/* codegen/kir.h: the kernel IR: loop nests with affine index maps, built from fused groups; internal to codegen. */
#ifndef PRIMC_KIR_H
#define PRIMC_KIR_H

#include <stdio.h>
#include <sys/types.h>

#include "ir/ir.h"
#include "runtime/primc_rt.h"

struct pc_autotune; /* codegen/autotune.h */

#define KIR_MAX_LOOPS (PC_MAX_RANK + 1)
#define KIR_MAX_ARGS 8
#define KIR_MAX_CALL_ARGS 12 /* a call kernel's buffers (a requantizing conv_i8 call's outputs, operands and residual) */
#define CONV_EPI_AT PRIMC_CONV_EPI_AT /* where a conv call's fused-epilogue words start in its params */
#define CONV_EPI_WORDS PRIMC_CONV_EPI_WORDS
#define CONV_EPI_ROW 10 /* the planned row + 1 among those words; the three before: weight layout, tile height, bytes */
/* a conv call's params whose fused epilogue requantizes (act RQ, codegen/kir_requant.c) */
#define CONV_EPI_IS_RQ(params) ((params)[CONV_EPI_AT] && (params)[CONV_EPI_AT + 6] == PRIMC_ACT_RQ)

/* Where a buffer lives at run time. */
typedef enum kir_place {
  KP_INPUT,     /* inputs[index] */
  KP_OUTPUT,    /* outputs[index] */
  KP_CONST,     /* a weight: global constant (or side file) at offset in the weights blob */
  KP_WORKSPACE  /* workspace + offset */
} kir_place;

typedef struct kir_buf {
  kir_place place;
  int index;        /* input/output position */
  int64_t offset;   /* bytes into the workspace or the weights blob */
  int64_t nbytes;
  pc_dtype dtype;
  const pc_value *v; /* NULL for scratch buffers codegen adds */
} kir_buf;

/* a KP_CONST buffer holding v as GEMM panels (primc_sgemm_pack_b of v seen as B [k, n],
 * transposed when trans) or as a conv's A strips instead of v's bytes */
typedef struct kir_packed {
  int buf, trans;
  int64_t n, k;
  int a_mr, groups; /* groups > 0: a conv's weights, packed as its plan's layout says (the layout word of its
                       params, conv; primc_conv_plan_pack): A strips of a_mr rows, W^T panels (trans), ... */
  int xform;        /* PRIMC_CONV_W_WINOGRAD or _LANES: a conv's weights transformed for that row; 0 otherwise */
  const int64_t *conv;
  int bf16_split;   /* > 0: a dot's B as bf16 panels for that split (primc_bgemm_pack_b), not f32 GEMM panels */
  int int_chunks;   /* > 0: a dot_int's i32 B as bf16 panels per K chunk of this many (bf16_split 1) */
  int i8;           /* 1: a dot_i8's i32 B as s8 panels less an offset (primc_igemm_pack_b); 2: a conv_i8's
                       weights (primc_conv_i8_pack of its params, conv) */
  int i8_prep;      /* with i8: the int8 row whose records are packed beside B (primc_igemm_prep_row) + 1; 0: none */
} kir_packed;

/* element index = offset + sum over loops k of stride[k] * i_k (elements, not bytes) */
typedef struct kir_map {
  int64_t offset;
  int64_t stride[KIR_MAX_LOOPS];
} kir_map;

typedef enum kir_ekind { KE_LOAD, KE_CONST, KE_INDEX, KE_PRIM, KE_CONVERT } kir_ekind;

typedef struct kir_expr {
  kir_ekind kind;
  pc_dtype dtype;   /* of the result */
  pc_op op;         /* KE_PRIM: an elementwise prim (where and clamp included) */
  int n_args;
  struct kir_expr *args[3];
  int buf;          /* KE_LOAD */
  kir_map map;      /* KE_LOAD */
  double c;         /* KE_CONST, float dtypes */
  int64_t ci;       /* KE_CONST, int and bool dtypes */
  int loop;         /* KE_INDEX: value of loop variable */
} kir_expr;

typedef enum kir_red { KR_NONE, KR_SUM, KR_PROD, KR_MAX, KR_MIN, KR_ARGMAX, KR_ARGMIN } kir_red;

/* one result of a loop kernel: buf[map(i)] = value, or reduced over the
 * kernel's reduced loops when red != KR_NONE (argmax/argmin store the i64
 * index of loop `arg_loop` into an i64 buffer; arg_last picks the last tie) */
typedef struct kir_store {
  int buf;
  kir_map map;
  kir_expr *value;
  kir_red red;
  int arg_loop, arg_last;
} kir_store;

typedef enum kir_kkind { KK_LOOP, KK_CALL } kir_kkind;

/* the runtime calls, one row of codegen/calls.def each */
typedef enum kir_call {
#define KIR_CALL(name, n_params, epi, params, args) KC_##name,
#include "codegen/calls.def"
#undef KIR_CALL
  KC_COUNT
} kir_call;

typedef struct kir_call_row {
  const char *name;            /* as printed and profiled: "dot" */
  const char *symbol;          /* the runtime's primc_k_<name> */
  const char *epi_symbol;      /* primc_k_<name>_epi, NULL when there is none */
  int n_params;                /* -1 when it varies */
  const char *params, *args;   /* their layout, as calls.def documents it */
} kir_call_row;

const kir_call_row *kir_call_info(kir_call c);
const char *kir_call_name(kir_call c);

typedef struct kir_kernel {
  kir_kkind kind;
  /* KK_LOOP: loops [0, n_par) are parallel (loop 0 is split across threads),
   * [n_par, n_loops) are reduced; n_par >= 1 always */
  int n_loops, n_par;
  int64_t extent[KIR_MAX_LOOPS];
  int n_stores;
  kir_store stores[KIR_MAX_ARGS];
  /* KK_CALL: primc_k_<call>(params, bufs) from the runtime; codegen/calls.def lays out each call's
   * params and args */
  kir_call call;
  int n_args;
  int args[KIR_MAX_CALL_ARGS]; /* buffer ids, outputs first */
  int n_params;
  int64_t *params;
  /* a dot's elementwise epilogue: loop kernel `epilogue` runs on each block of output rows
   * right after the GEMM wrote it (while it is in cache); that kernel is `absorbed`. This is
   * a scheduling hint only: a renderer that ignores it launches the kernels in order as usual */
  int has_epilogue, epilogue, absorbed;
  /* the call runs its absorbed epilogue itself (from its params and args, see conv): a renderer
   * honouring `absorbed` calls it plainly, one that launches every kernel gets the same result */
  int epi_in_call;
  /* > 0: this conv call runs as one with the depthwise conv call at this index, which reads only
   * its result (primc_k_conv_pair) and is marked absorbed; again a hint: in order, they compute the same */
  int pair;
  /* provenance: the prims this kernel came from */
  int n_nodes;
  const pc_node **nodes;
} kir_kernel;

typedef struct kir_program {
  pc_graph *g;            /* every allocation lives in g's arena */
  int n_bufs, cap_bufs;
  kir_buf *bufs;
  int *buf_of_value;      /* by value id; -1 when not materialized */
  char *escapes;          /* by value id: read outside its producer's fused group */
  int *repeat_mask;       /* by value id: dims along which a constant's data repeats */
  int n_kernels, cap_kernels;
  kir_kernel *kernels;
  int64_t workspace_size; /* planned workspace plus codegen's scratch */
  int64_t call_scratch;   /* bytes of the region every call's own scratch shares (kir_call_scratch_buf) */
  int64_t call_scratch_at;/* its workspace offset once placed (0 before) */
  int64_t weights_size;   /* bytes of the weights blob */
  const pc_value **consts;/* the constant values in the blob, by order */
  int n_packed;           /* kir_pack_weights' panels */
  int cross_isa;          /* > 0: a cross compile's GEMM ISA (PRIMC_ISA_NEON): its dots' panels are that row's */
  int weights_stream;     /* a host compile's bf16 weights outgrow the last-level cache: every run reads them from
                             memory (kir_pack_weights; its bf16 conv plans say so) */
  kir_packed *packed;
  int n_consts;
  /* by symbol id: workspace byte offset of the i64 where the run writes the actual size of a
   * data-dependent dim (nonzero's count), -1 for other symbols; read by NAME_output_dims */
  int64_t *sym_slot;
  struct pc_autotune *tune; /* --autotune: conv plans by timing (codegen/autotune.h); NULL: the planner's */
  struct kir_dyn *dyn;      /* run-time dims (codegen/dynamic.c); NULL: every size is the one written here */
  int sizes_vary;           /* built for a --dim LO..HI compile: rewrites choose alike whatever the sizes */
  const struct kir_conv_pin *pins; /* conv rows taken by node id (pc_codegen_opts.conv_pins) */
  int n_pins;
  int gpu_sm;               /* CUDA: the target's compute capability x 10 (pc_cuda_sm); 0: a CPU program */
  int cuda_syms;            /* CUDA with run-time dims: every kernel takes the symbols' values as its first
                             * parameters (long long pc_s0..), launch argument -1 - s (codegen/cuda_dynamic.c) */
} kir_program;

/* ---------------------------------------------------------------- run-time dims (codegen/dynamic.c) */

#define KIR_DYN_MAX_SYMS 3
#define KIR_DYN_TERMS 27 /* 3^KIR_DYN_MAX_SYMS */

/* sum over terms t of c[t] * prod_s sym_s^e_s, e_s the base-3 digit s of t: every symbol to the power 0..2 */
typedef struct kir_poly {
  int64_t c[KIR_DYN_TERMS];
} kir_poly;

/* A program built at the symbols' bounds whose sizes follow the symbols at run time: each size that
 * changes with them (a loop extent, an index map's offset or stride, a runtime call's param, an integer
 * constant, a graph output's dim) is a polynomial of them, found by dynamic.c; the rest is as written. */
typedef struct kir_dyn {
  int n_syms;
  const char *name[KIR_DYN_MAX_SYMS];
  int64_t lo[KIR_DYN_MAX_SYMS], hi[KIR_DYN_MAX_SYMS];
  int64_t mult[KIR_DYN_MAX_SYMS]; /* >= 1: the polynomials' symbols are dim / mult, the values the run binds */
  int64_t offset;        /* workspace bytes where the run keeps the symbols' values (i64 each), then the output dims */
  int buf;               /* the kernel-IR buffer over them: loop kernels read the symbols from it */
  int n_fields;          /* the sizes that follow the symbols, sorted by address (kir_dyn_poly) */
  const int64_t **field;
  kir_poly *poly;
  int *in_sym;           /* [input * PC_MAX_RANK + d]: the symbol input dim d is, -1 when fixed */
  int64_t *out_slot;     /* [output * PC_MAX_RANK + d]: workspace offset of that output dim's i64, -1 when fixed */
  int n_builds;          /* programs built to find the polynomials, the one that runs included */
  char probes[256];      /* "N at 16, 11, 5; checked at 8, 2" */
} kir_dyn;

/* an f32/f64 constant c that is a whole number n (KIR_FLOAT_WHOLE) or 1/n as dt rounds it (KIR_FLOAT_RECIP), else
 * 0: fitted through n, which it keeps in its ci; a run computes it as (dt)n or (dt)(1.0 / n), n in double */
enum { KIR_FLOAT_WHOLE = 1, KIR_FLOAT_RECIP = 2 };
/* a hash of the weights p's kernels read (the ones that must not follow a symbol); 0 when out of memory */
int kir_dyn_weights_hash(const kir_program *p, uint64_t *hash);
int kir_dyn_float_int(pc_dtype dt, double c, int64_t *n);
/* the polynomial of a size of p that follows the symbols, NULL for one that does not (or a static program) */
const kir_poly *kir_dyn_poly(const kir_program *p, const int64_t *field);
int64_t kir_poly_eval(const kir_poly *q, int n_syms, const int64_t *sym);
/* s when q is symbol s's dim (an input dim that is a run-time dim): mult[s] times the symbol, else -1 */
int kir_poly_sym(const kir_poly *q, int n_syms, const int64_t *mult);

/* why a size that follows no polynomial fails; what may help, after "compile with a fixed --dim NAME=VALUE" */
#define KIR_DYN_NONE_HINT " (rounded to a tile, or a strided conv's or pool's output size?)"
#define KIR_DYN_NONE_WHY "a size follows it in no polynomial way" KIR_DYN_NONE_HINT
#define KIR_DYN_MULTIPLES_FMT "in multiples of its strides' product, for a strided conv's or pool's sizes (--dim %s=LO..HI%%M)"

/* Where a fit builds the program: a grid of up to 3 values per symbol (point 0 the bounds, the program that
 * runs), then checks at values the fit does not use (soft ones, a dim of 1, may build another program) */
#define KIR_DYN_MAX_POINTS 40
typedef struct kir_dyn_pts {
  int n_syms, n_grid, n;
  int npts[KIR_DYN_MAX_SYMS];
  int64_t x[KIR_DYN_MAX_SYMS][3];                  /* the dims' values (multiples of mult where > 1) */
  int64_t v[KIR_DYN_MAX_POINTS][KIR_DYN_MAX_SYMS];
  int64_t mult[KIR_DYN_MAX_SYMS]; /* sizes are polynomials of x / mult (pc_dyn_spec.mult) */
  unsigned char soft[KIR_DYN_MAX_POINTS];
} kir_dyn_pts;

struct pc_dyn_spec;
/* the multiple symbol s of ds takes (--dim NAME=LO..HI%M), 1 for any value: its sizes are polynomials of value / it */
int64_t kir_dyn_mult(const struct pc_dyn_spec *ds, int s);
/* the points for ds's ranges; their description into ds->probes */
void kir_dyn_points(struct pc_dyn_spec *ds, kir_dyn_pts *P);
/* y[i], the value of one size in the build at point i (have[i] 0 where a soft point built another program), as
 * a polynomial: KIR_FIT_SAME (y is y[0] everywhere), KIR_FIT_POLY (into *q), KIR_FIT_NONE (no polynomial through
 * the grid) or KIR_FIT_CHECK (one through the grid, wrong at check point *bad) */
enum { KIR_FIT_SAME, KIR_FIT_POLY, KIR_FIT_NONE, KIR_FIT_CHECK };
int kir_dyn_fit_series(const kir_dyn_pts *P, const int64_t *y, const unsigned char *have, kir_poly *q, int *bad);
/* the symbol point i moves (the first of several) */
int kir_dyn_moved(const struct pc_dyn_spec *ds, const kir_dyn_pts *P, int i);
/* the first NonZero call of p, -1 when none: its count is a size of its own, written by the run, which no fit follows */
int kir_dyn_nonzero_kernel(const kir_program *p);
#define KIR_DYN_NONZERO_WHY "a data-dependent size (NonZero) with dims given as ranges is not supported yet"
/* appends to ds->probes each soft check point that built another program (have[i] 0): that value runs code fitted
 * at the others */
void kir_dyn_note_unchecked(struct pc_dyn_spec *ds, const kir_dyn_pts *P, const unsigned char *have);
/* q as a C expression of long longs over the symbols, each printed by sym_fmt ("pc_s%d", "s[%d]") */
void kir_poly_put(FILE *f, const kir_poly *q, int n_syms, const char *sym_fmt);

/* A CUDA program whose kernels follow the symbols at run time (codegen/cuda_dynamic.c): its CUDA C takes the
 * symbols as every kernel's leading parameters, and each grid is made again from its factors per run */
typedef struct kir_cuda_dyn {
  int n_syms;
  const char *name[KIR_DYN_MAX_SYMS];
  int64_t lo[KIR_DYN_MAX_SYMS], hi[KIR_DYN_MAX_SYMS];
  int64_t mult[KIR_DYN_MAX_SYMS]; /* >= 1: the polynomials' symbols are dim / mult (kir_dyn_mult) */
  kir_poly *work;    /* [kernel * PC_CUDA_GRID_FACTORS + i]: its launch's factor work[i] */
  int *in_sym;       /* [input * PC_MAX_RANK + d]: the symbol input dim d is, -1 when fixed */
  kir_poly *out_dim; /* [output * PC_MAX_RANK + d] */
  int n_sizes;       /* integers of the CUDA C that follow the symbols */
} kir_cuda_dyn;

struct pc_codegen_opts;
struct pc_cuda_launch;
/* g's kernel IR into *p and its CUDA C for arch (NULL: sm_90) into *src (malloc'ed, NUL-terminated, *len bytes;
 * NULL on failure), its kernels led by cuda_syms run-time dims' parameters, with the launches (may be NULL) */
pc_status kir_cuda_render(pc_graph *g, const char *arch, int cuda_syms, kir_program *p, char **src, size_t *len,
                          struct pc_cuda_launch **launches);
/* the same for a compile's options: with opts->dyn, kir_cuda_dynamic's program (*dyn set), else kir_cuda_render's */
pc_status kir_cuda_program(pc_graph *g, const struct pc_codegen_opts *opts, kir_program *p, char **src,
                           struct pc_cuda_launch **launches, kir_cuda_dyn **dyn);
/* one bucket: a box of the symbols' values (dims, not units of a multiple); a symbol not in buckets spans its range */
typedef struct kir_bucket {
  int64_t lo[KIR_DYN_MAX_SYMS], hi[KIR_DYN_MAX_SYMS];
} kir_bucket;
/* --target cuda with range dims in buckets (--dim NAME=LO..HI:STEP; codegen/cuda_buckets.c): each bucket's program
 * (a range of its own, planned at its end) an object with the entry points NAME__bK (kir_cuda_part), then the model
 * NAME, whose NAME_run_dims runs the bucket that holds the value (kir_cuda_dispatch), linked with them */
typedef struct kir_cuda_buckets {
  int n;                    /* buckets */
  const kir_bucket *b;      /* their boxes */
  const char *const *objs;  /* bucket k's object */
  const kir_program *top;   /* the last bucket's program: the model's inputs and outputs at the bounds */
  const kir_cuda_dyn *full; /* the whole ranges; the inputs' symbols over every bucket */
  int64_t workspace_size;   /* the largest bucket's */
  int64_t weights_size;     /* the distinct weights' bytes in the objects */
  int n_kernels;            /* the largest bucket's */
  const char *note;         /* the header's lines on the buckets */
} kir_cuda_buckets;
pc_status kir_cuda_buckets_package(pc_graph *g, const struct pc_codegen_opts *o);
/* codegen/package_cuda.c: p (its CUDA C src, launches L, run-time dims d) through NVRTC into an object at obj whose
 * entry points are name_*, with no main; its weights (kir_weights_blob's bytes), or weights_of: the prefix of an
 * object whose weights are the same bytes (its device copy is used), else NULL */
pc_status kir_cuda_part(pc_graph *g, const struct pc_codegen_opts *o, const kir_program *p, const char *src,
                        const struct pc_cuda_launch *L, const kir_cuda_dyn *d, const char *name, const char *obj,
                        const void *weights, const char *weights_of);
/* the dispatcher's host side, linked with b's objects into o->output (or joined into one object), and its header */
pc_status kir_cuda_dispatch(pc_graph *g, const struct pc_codegen_opts *o, const kir_cuda_buckets *b);
/* g, built at opts->dyn's bounds, as kernel IR (*p) and CUDA C (*src, malloc'ed) with its launches, built and
 * rendered again at other values of the symbols and every integer of the CUDA C that moves fitted as a polynomial
 * of them; what cannot follow them fails naming the dim and the kernel */
pc_status kir_cuda_dynamic(pc_graph *g, const struct pc_codegen_opts *opts, kir_program *p, char **src,
                           struct pc_cuda_launch **launches, kir_cuda_dyn **dyn);

struct pc_codegen_opts;
/* the kernel IR the CPU backend renders for g (codegen/package.c): built, and for the host its weights
 * packed and its pool calls made */
pc_status kir_build_cpu(pc_graph *g, const struct pc_codegen_opts *opts, kir_program *p);
/* the ISA whose GEMM row reads p's f32 dot panels: a cross compile's target's, else this machine's */
static inline int kir_gemm_isa(const kir_program *p) { return p->cross_isa > 0 ? p->cross_isa : primc_sgemm_isa(); }
/* constant f32 dot operands packed for the GEMM row of p->cross_isa (kir_build_cpu, for a cross target) */
pc_status kir_pack_cross_weights(kir_program *p);
/* p, built by kir_build_cpu from the graph at opts->dyn's bounds, made to follow the symbols at run time:
 * p->dyn set, its dims area added to the workspace; a failure names the symbol and the kernel */
pc_status kir_dyn_fit(kir_program *p, const struct pc_codegen_opts *opts);

/* Builds kernels for every group of g (node->group; -1 everywhere means one
 * kernel per node) and places buffers (value->storage/offset when planned,
 * else a private plan: one workspace slot per value). */
pc_status kir_build(pc_graph *g, kir_program *p);
/* the same for CUDA (sm: pc_cuda_sm's): calls plan nothing for this machine's CPU, so that the program is the
 * same on every host and a run-time dims fit compares the GPU's program alone */
pc_status kir_build_cuda(pc_graph *g, kir_program *p, int sm);
/* buffers a and b share bytes: the same input or output, or overlapping workspace or weight ranges */
int kir_bufs_overlap(const kir_program *p, int a, int b);
/* a conv's row (its primc_conv_row index), pinned for the conv node of that id */
typedef struct kir_conv_pin {
  int node, row;
} kir_conv_pin;
/* the same with the conv rows chosen by tune (may be NULL) or pinned (pins, n_pins: may be none), which
 * kir_pack_weights asks again */
pc_status kir_build_tuned(pc_graph *g, kir_program *p, struct pc_autotune *tune, const kir_conv_pin *pins, int n_pins);
/* CPU codegen for the host: f32 dots whose B is a constant read it as GEMM panels packed
 * here once (for this machine's GEMM kernels; another machine reads them row by row), and
 * the weights blob drops constants no kernel reads any more. Under g->matmul_precision high or
 * medium, f32 dots become dot_bf16 calls instead, a constant B packed as bf16 panels. i32 dots with a constant B
 * become dot_i8 calls on the int8 GEMM (B packed as s8 panels) or, where B does not fit s8, dot_int calls. */
pc_status kir_pack_weights(kir_program *p);
/* tests: the last-level cache size kir_pack_weights weighs a program's bf16 weights against (0: this CPU's) */
void kir_force_llc_bytes(int64_t bytes);
/* host code only: max pools over a -inf padded copy become primc_k_maxpool calls that read the map
 * unpadded; the pad kernels are marked absorbed, the tree kernel turns into the call */
void kir_pool_calls(kir_program *p);
/* Human-readable listing of the program: buffers, loops, expressions, origins. */
void kir_print(const kir_program *p, FILE *f);

/* for the profiler: the prims of kernel idx (and of its epilogue) joined by '+', the
 * origin of its main node (a contraction, reduction or call before movement prims), both
 * without whitespace; and the bytes of the distinct buffers it reads and writes */
void kir_kernel_label(const kir_program *p, int idx, char *name, size_t name_len, char *origin, size_t origin_len);
int64_t kir_kernel_bytes(const kir_program *p, int idx);
/* one row of a profile table: a kernel's label and bytes as above */
#define KIR_LABEL_MAX 256
typedef struct kir_prof_row {
  char name[KIR_LABEL_MAX], origin[KIR_LABEL_MAX];
  int64_t bytes;
} kir_prof_row;

/* helpers shared with the renderers */
kir_expr *kir_expr_new(kir_program *p, kir_ekind kind, pc_dtype dt);
const char *kir_red_name(kir_red r);

/* ---------------------------------------------------------------- LLVM renderer (codegen/llvm.c) */

typedef enum llvm_out { LLVM_OUT_OBJ, LLVM_OUT_ASM, LLVM_OUT_IR } llvm_out;

typedef struct llvm_emit_opts {
  llvm_out kind;
  const char *path;           /* file written */
  const char *name;           /* C identifier prefix of the entry points */
  const char *triple, *cpu, *features; /* NULL: host */
  int opt_level;              /* 0..3 */
  int weights_external;       /* NAME_load_weights maps the blob from a side file */
  const void *weights_blob;   /* p->weights_size bytes, constants at their offsets */
  int main_alias;             /* also export primc_main_model for the standalone driver */
  int profile;                /* time every kernel into NAME_profile (primc_prof_begin/end) */
  const struct pc_codegen_opts *report; /* its progress callback, told of each phase (NULL: none) */
  /* the weights' symbol, defined by another object (a bucket's twin); with weights_external the pointer to the
   * mapped payload (the buckets' dispatcher's NAME_weights_base), this program's weights weights_offset bytes on
   * and no NAME_load_weights of its own; NULL: NAME_weights, or NAME_weights_base with NAME_load_weights */
  const char *weights_sym;
  int64_t weights_offset;
  /* with profile: the table the kernels count into, defined by another object (the buckets' dispatcher), kernel i
   * at its row profile_base + i; NULL: NAME_profile, defined here */
  const char *profile_sym;
  int profile_base;
} llvm_emit_opts;

pc_status pc_llvm_emit(const kir_program *p, const llvm_emit_opts *o);

/* Range dims split into buckets (--dim NAME=LO..HI:STEP; boxes on several dims), each bucket a program of its own
 * named NAME__bK in an object of its own (codegen/buckets.c). The dispatcher (codegen/llvm_buckets.c) is the model
 * NAME: descriptors as top's (the last bucket, whose bounds are the model's), the dims of full, and NAME_run_dims
 * running the bucket whose box holds the values (runtime/dims.c). */
typedef struct kir_buckets {
  int n;                   /* buckets */
  const kir_bucket *b;     /* their boxes over full's symbols */
  kir_dyn *full;           /* the whole ranges (offset -1: the dispatcher keeps no values) */
  int64_t workspace_size;  /* PRIMC_BUCKET_HEADER + the largest bucket's */
  int n_prof;              /* with --profile: every bucket's kernels, bucket by bucket (NAME_profile's rows) */
  const kir_prof_row *prof;
  int64_t weights_file;    /* with --weights external: the side file's payload bytes (NAME_load_weights); else -1 */
  int64_t pool_size;       /* else the buckets' weights pool (codegen/weights_pool.c), which the dispatcher's object
                              declares as NAME_weights_pool for kir_elf_append to define; 0: none */
} kir_buckets;
pc_status pc_llvm_emit_buckets(const kir_program *top, const kir_buckets *b, const llvm_emit_opts *o);

/* the CPU backend's packaging (codegen/package.c): the entry points' prefix and the output's stem; p as an object
 * at path with its weights (NAME_weights; weights_sym: read another object's, the same bytes), no main; the header of p (note: text after its dims' macros, or NULL);
 * objects linked with the runtime into out (an executable, a shared library), or joined into one object, by the
 * target's cc */
void kir_output_names(const struct pc_codegen_opts *o, char *name, size_t name_size, char *stem, size_t stem_size);
/* where --emit obj writes: o->output, ".o" added unless it ends so */
void kir_object_path(const struct pc_codegen_opts *o, char *path, size_t n);
/* what an object reads of others' (a bucket's, of the dispatcher's and its twin's); zeros: nothing */
typedef struct kir_object_link {
  const char *weights_sym; /* llvm_emit_opts.weights_sym */
  int64_t weights_offset;  /* llvm_emit_opts.weights_offset */
  const char *profile_sym; /* llvm_emit_opts.profile_sym and profile_base */
  int profile_base;
} kir_object_link;
pc_status kir_object_write(const kir_program *p, const struct pc_codegen_opts *o, const char *name, const char *path,
                           const kir_object_link *ln);
pc_status kir_header_write(const kir_program *p, const char *path, const char *name, int external, const char *note);
typedef enum { KIR_LINK_EXE, KIR_LINK_SHARED, KIR_LINK_OBJECT /* joined into one relocatable object */ } kir_link_kind;
pc_status kir_link(pc_graph *g, const struct pc_codegen_opts *o, const char *out, const char *const *objs, int n_objs,
                   kir_link_kind kind);
/* --dim NAME=LO..HI:STEP: each bucket compiled and written, the dispatcher, the link (codegen/buckets.c) */
pc_status kir_codegen_buckets(pc_graph *g, const struct pc_codegen_opts *o);
#define KIR_MAX_BUCKETS 64
struct pc_dyn_spec;
/* the buckets of ds's bucketed symbols (STEP values each from LO; on several dims every combination, the first
 * symbol's buckets outermost; room for KIR_MAX_BUCKETS + 1) and their count; -1 after failing g when there would be
 * more than KIR_MAX_BUCKETS or the entry points' prefix name is too long for NAME__bK */
int kir_bucket_ranges(pc_graph *g, const struct pc_dyn_spec *ds, const char *name, kir_bucket *b);
/* b's bucketed symbols' ranges, "H=64..96, W=128..160" (sep ", "), or sep between them */
void kir_bucket_label(char *buf, size_t len, const struct pc_dyn_spec *ds, const kir_bucket *b, const char *sep);
/* in_sym (the input dims' symbols, -1 fixed) where the buckets' inputs differ: bucket k, built at its box's his,
 * had input dims dims[k * n_in + i] (n_in = gt's inputs times PC_MAX_RANK); such a dim is the bucketed symbol whose
 * built value it equals in every bucket (a program of one value leaves its dim fixed, so no program may say so) */
void kir_bucket_dims(const struct pc_dyn_spec *ds, const pc_graph *gt, int n, const kir_bucket *b, const int64_t *dims,
                     int *in_sym);
/* bucket k, which one program could not follow: its two halves in its place (*n one more), split along the bucketed
 * symbol of most values in it, or a failure naming it (why: its error) when that would make more than KIR_MAX_BUCKETS */
pc_status kir_bucket_halve(pc_graph *g, const struct pc_dyn_spec *ds, kir_bucket *b, int *n, int k, const char *why);
/* sub: ds with its ranges cut to box b and no buckets, its codegen counts and notes cleared: the spec bucket b's
 * program is built and fitted with */
void kir_bucket_spec(const struct pc_dyn_spec *ds, const kir_bucket *b, struct pc_dyn_spec *sub);
/* bucket b's error, said as the model's: "bucket H=16..32, W=48..64: why" */
pc_status kir_bucket_fail(pc_graph *g, pc_status code, const struct pc_dyn_spec *ds, const kir_bucket *b,
                          const char *why);
/* whether bucket b holds more than one value of a bucketed symbol (halves of it may compile where it did not) */
int kir_bucket_splits(const struct pc_dyn_spec *ds, const kir_bucket *b);
#define KIR_BUCKET_LINE 320
/* --report's line on bucket k: its kernels, object (the file obj), weights (what to say of them), workspace */
void kir_bucket_line(char *buf, size_t len, const struct pc_dyn_spec *ds, const kir_bucket *b, int k,
                     const char *weights, int n_kernels, const char *obj, int64_t workspace);
/* ds->buckets and ds->probes for --report: a heading (kind: "" or "CUDA "), the n buckets' lines, the dispatcher's */
void kir_bucket_report(struct pc_dyn_spec *ds, int n, int halved, const char (*lines)[KIR_BUCKET_LINE], const char *kind,
                       const char *tail);
/* the header's lines on the n buckets b (cuda: the CUDA dispatcher's workspace, which has no header) */
void kir_bucket_note(char *buf, size_t len, const char *name, const struct pc_dyn_spec *ds, const kir_bucket *b, int n,
                     int cuda);
/* codegen/weights.c: the constants of p packed at their offsets (malloc'ed, caller frees); NULL when out of
 * memory. kir_weights_write streams the same bytes into fd at base, one constant at a time (a packed
 * weight through a buffer of its size), and sizes the file to base + weights_size. */
void *kir_weights_blob(const kir_program *p);
pc_status kir_weights_write(const kir_program *p, int fd, int64_t base);
/* each constant buffer of p with its final bytes (packed where kir_pack_weights says), in buffer order; a failure
 * of fn ends the walk with its status */
typedef pc_status (*kir_weight_fn)(void *ctx, int buf, const void *bytes, int64_t n);
pc_status kir_weights_each(const kir_program *p, kir_weight_fn fn, void *ctx);
/* n bytes at offset at of fd, through short writes and EINTR; 0 on failure */
int kir_pwrite_all(int fd, const void *data, size_t n, off_t at);
/* n bytes at offset at of fd into data, through short reads and EINTR; 0 on failure or an early end of file */
int kir_pread_all(int fd, void *data, size_t n, off_t at);
/* fd's n bytes from offset at, up to 1 MiB at a time, each chunk given to fn with its offset from at; 0 when a read
 * fails, memory runs out or fn returns 0 */
int kir_pread_chunks(int fd, off_t at, int64_t n, int (*fn)(void *ctx, const void *chunk, size_t len, int64_t off),
                     void *ctx);
pc_status kir_weights_write_file(const kir_program *p, const char *path);
/* the same in steps, for a file of several programs' weights (buckets): a descriptor (-1 after an error), the
 * payload written at sizeof(primc_weights_header) on by the caller, then the file cut to it, its header and the
 * close (s: the writer's status so far, returned unless these fail) */
int kir_weights_file_open(pc_graph *g, const char *path);
pc_status kir_weights_file_close(pc_graph *g, int fd, int64_t payload, pc_status s, const char *path);
/* codegen/weights_pool.c: several programs' weights with each distinct constant once, at base of fd (the side
 * file of --weights external) or of a temporary file (fd -1) */
typedef struct kir_pool_entry {
  uint64_t hash;
  int64_t off, n;
} kir_pool_entry;
typedef struct kir_pool {
  int fd, own;         /* own: the temporary file, closed by kir_pool_close */
  int64_t base, size;  /* the pool's bytes at base of fd */
  int n, cap;
  kir_pool_entry *e;
} kir_pool;
pc_status kir_pool_open(pc_graph *g, kir_pool *pl, int fd, int64_t base);
/* p's constants (*bytes of them) into the pool, each one the pool lacks appended (*fresh: their bytes); p's
 * constant buffers then point into the pool and p->weights_size is the end of the last */
pc_status kir_pool_add(kir_pool *pl, kir_program *p, int64_t *bytes, int64_t *fresh);
/* the pool's bytes into fd at at (a kir_elf_append writer, ctx the pool) */
pc_status kir_pool_copy(void *ctx, int fd, off_t at);
void kir_pool_close(kir_pool *pl);
/* codegen/elf_weights.c: appends the weights, streamed, to the ELF64 little-endian relocatable object at
 * path as a section of their own, defining there the undefined symbol sym the code refers to them by */
pc_status kir_elf_append_weights(const kir_program *p, const char *path, const char *sym);
/* the same for any bytes: size of them, written by write at offset at of the object's descriptor fd */
pc_status kir_elf_append(pc_graph *g, const char *path, const char *sym, int64_t size,
                         pc_status (*write)(void *ctx, int fd, off_t at), void *ctx);

#endif
