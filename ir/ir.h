/* ir/ir.h: the prim IR's public interface: types, graph, builder, text, verifier, interpreter. */
#ifndef PRIMC_IR_H
#define PRIMC_IR_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define PC_VERSION "0.1.0"
#define PC_MAX_RANK 8

/* ---------------------------------------------------------------- status */

typedef enum pc_status {
  PC_OK = 0,
  PC_ERR_PARSE,       /* malformed text or model file */
  PC_ERR_TYPE,        /* dtype not accepted */
  PC_ERR_SHAPE,       /* shapes do not agree */
  PC_ERR_ATTR,        /* missing or bad attribute */
  PC_ERR_UNSUPPORTED, /* valid input we do not handle yet */
  PC_ERR_IO,          /* file could not be read or written */
  PC_ERR_RANGE,       /* index or size out of range, absurd sizes */
  PC_ERR_NOMEM,
  PC_ERR_INTERNAL
} pc_status;

const char *pc_status_name(pc_status s);

/* ---------------------------------------------------------------- dtypes */

typedef enum pc_dtype {
#define PC_DTYPE(name, ctype, size, cls) PC_##name,
#include "dtypes.def"
#undef PC_DTYPE
  PC_DTYPE_COUNT
} pc_dtype;

size_t pc_dtype_size(pc_dtype t);
const char *pc_dtype_name(pc_dtype t);
int pc_dtype_from_name(const char *name, pc_dtype *out); /* 1 if found */
int pc_dtype_is_float(pc_dtype t);                       /* f16 bf16 f32 f64 and the f8 formats */
int pc_dtype_is_narrow_float(pc_dtype t);                /* a float narrower than f32: f16, bf16, the f8 formats */
int pc_dtype_is_int(pc_dtype t);                         /* signed or unsigned, not bool */
int pc_dtype_is_signed(pc_dtype t);                      /* signed int or float */

/* half-precision conversions used by every layer that touches f16/bf16 */
float pc_f16_to_f32(uint16_t h);
uint16_t pc_f32_to_f16(float f);   /* round to nearest even */
float pc_bf16_to_f32(uint16_t h);
uint16_t pc_f32_to_bf16(float f);  /* round to nearest even */

/* 8-bit floats (ONNX FLOAT8*), round to nearest even. saturate: values beyond
 * the largest finite one (and inf) give it with their sign; else inf (e5m2)
 * or NaN (the others). fnuz formats have no -0 (it becomes 0) and NaN 0x80;
 * e4m3fn has no inf and NaN S.1111.111. f8e8m0 (2^(b-127), NaN 0xff) keeps the f32 exponent field: it
 * truncates, drops the sign and gives NaN for inf (saturate changes nothing). */
int pc_dtype_is_f8(pc_dtype t); /* the five f8 formats and f4e2m1 (held in a byte) */
/* 4 or 2 for the sub-byte ints i4 u4 i2 u2 (held one per byte), else 0 */
int pc_dtype_subbyte_bits(pc_dtype t);
/* t must be an f8 dtype (else NaN / 0) */
float pc_f8_to_f32(pc_dtype t, uint8_t b);
uint8_t pc_f32_to_f8(pc_dtype t, float f, int saturate);
/* a float's bit pattern and back, without aliasing */
uint32_t pc_f32_bits(float f);
float pc_bits_f32(uint32_t u);

/* element i of a buffer of dtype t as the double it stands for (ints converted, f16/bf16/f8/f4 decoded, bool
 * and the sub-byte ints as their stored byte); c64: the real part. Code that compares complex data reads
 * it as PC_f32 over twice the element count, so both halves count. */
double pc_elem_f64(pc_dtype t, const void *data, int64_t i);
/* stores v as element i of a buffer of dtype t, converted as convert_element_type converts (ints truncated
 * and saturated, NaN to 0, bool v != 0): pc_elem_f64 reads it back */
void pc_elem_store(pc_dtype t, void *data, int64_t i, double v);

/* ---------------------------------------------------------------- shapes */

/* A dim >= 0 is concrete; a dim < 0 names a symbolic dim of the graph:
 * symbol id = -(dim) - 1. Symbols carry an inclusive bound [lo, hi]. */
#define PC_SYM(id) (-(int64_t)(id)-1)
#define PC_DIM_IS_SYM(d) ((d) < 0)
#define PC_DIM_SYM_ID(d) ((int)(-(d)-1))

typedef struct pc_type {
  pc_dtype dtype;
  int rank;
  int64_t dims[PC_MAX_RANK];
} pc_type;

pc_type pc_type_make(pc_dtype dt, int rank, const int64_t *dims);
int pc_type_equal(const pc_type *a, const pc_type *b);
int pc_type_is_static(const pc_type *t);
int64_t pc_type_numel(const pc_type *t); /* -1 when a dim is symbolic */
/* elements a value may have at most: its bytes, and any index into it times a stride, fit int64 */
#define PC_MAX_NUMEL (INT64_MAX / 16)
/* 1 when t's concrete dims are non-negative and multiply (0s counted as 1s) to at most PC_MAX_NUMEL */
int pc_type_size_ok(const pc_type *t);

/* ---------------------------------------------------------------- prims */

typedef enum pc_op {
#define PRIM(name, n_in, n_out, kind, operands, result, fuse, inl) PC_OP_##name,
#include "prims.def"
#undef PRIM
  PC_OP_COUNT
} pc_op;

typedef enum pc_prim_kind { PC_KIND_UNARY, PC_KIND_BINARY, PC_KIND_TERNARY, PC_KIND_OTHER } pc_prim_kind;
typedef enum pc_operand_class { PC_CLS_ANY, PC_CLS_NUM, PC_CLS_FLOAT, PC_CLS_INT, PC_CLS_LOGIC } pc_operand_class;
typedef enum pc_result_class { PC_RES_SAME, PC_RES_BOOL, PC_RES_SPECIAL } pc_result_class;

/* op classes that fusion, memory planning and codegen read (prims.def's fuse column) */
typedef enum pc_fuse_kind {
  PC_FUSE_CONST,    /* no kernel */
  PC_FUSE_ELEM,     /* elementwise, where, convert_element_type */
  PC_FUSE_MOVE,     /* index remapping */
  PC_FUSE_RED,      /* reduction over axes */
  PC_FUSE_CONTRACT, /* dot_general, conv: a call with an elementwise epilogue */
  PC_FUSE_ALONE,    /* a kernel of its own */
} pc_fuse_kind;

typedef struct pc_prim_info {
  const char *name;
  int n_in; /* -1: variadic */
  int n_out;
  pc_prim_kind kind;
  pc_operand_class operands;
  pc_result_class result;
  pc_fuse_kind fuse;
  int inl; /* 1: computed where it is read (an expression of the loop indices), never stored */
} pc_prim_info;

const pc_prim_info *pc_prim(pc_op op);
int pc_op_from_name(const char *name, pc_op *out); /* 1 if found */
int pc_op_is_elementwise(pc_op op);                /* UNARY/BINARY/TERNARY kinds and where */
pc_fuse_kind pc_op_fuse_kind(pc_op op);
int pc_op_is_inline(pc_op op);

/* Per-prim tables are generated from prims.def where every prim has an entry (names, inference, the
 * interpreter's dispatch). A table written by hand that must decide an entry for every prim of some
 * class (elementwise rows, reduction rows, codegen rules) states the prim count it was last checked
 * against, so a new prim breaks the build there until someone decides its entry. Tables that are
 * sparse on purpose (simplify's rewrite rules) say so instead. */
#define PC_PRIMS_CHECKED(n) \
  _Static_assert(PC_OP_COUNT == (n), "prims.def changed: decide the new prim's entry in this table, then raise the count")

/* ---------------------------------------------------------------- attributes */

typedef enum pc_attr_kind { PC_ATTR_INT, PC_ATTR_INTS, PC_ATTR_FLOAT, PC_ATTR_STRING, PC_ATTR_DTYPE } pc_attr_kind;

typedef struct pc_attr {
  const char *name;
  pc_attr_kind kind;
  int64_t i;           /* INT, DTYPE (a pc_dtype) */
  double f;            /* FLOAT */
  const char *s;       /* STRING */
  int n;               /* INTS length */
  const int64_t *ints; /* INTS */
} pc_attr;

/* constructors for building attribute lists; data is copied by pc_node_add */
pc_attr pc_a_int(const char *name, int64_t v);
pc_attr pc_a_ints(const char *name, const int64_t *v, int n);
pc_attr pc_a_float(const char *name, double v);
pc_attr pc_a_str(const char *name, const char *s);
pc_attr pc_a_dtype(const char *name, pc_dtype t);

/* ---------------------------------------------------------------- graph */

typedef struct pc_graph pc_graph;
typedef struct pc_node pc_node;
typedef struct pc_value pc_value;

struct pc_value {
  int id;             /* dense, unique in the graph */
  pc_type type;
  pc_node *producer;  /* NULL for graph inputs */
  int out_index;      /* which output of producer */
  const char *name;   /* may be NULL; unique among named values */
  /* set by memory planning (passes/memplan.c), read by codegen */
  int storage;        /* a pc_storage */
  int64_t offset;     /* byte offset in the workspace when storage == PC_STORE_WORKSPACE */
};

typedef enum pc_storage {
  PC_STORE_UNPLANNED = 0,
  PC_STORE_INPUT,     /* caller's input buffer */
  PC_STORE_OUTPUT,    /* caller's output buffer */
  PC_STORE_CONST,     /* weights, in .rodata or a side file */
  PC_STORE_WORKSPACE, /* the one workspace, at offset */
  PC_STORE_FUSED      /* lives only inside a fused kernel, never materialized */
} pc_storage;

struct pc_node {
  int id;
  pc_op op;
  int n_in, n_out;
  pc_value **in;
  pc_value **out;
  int n_attrs;
  pc_attr *attrs;
  const char *origin;   /* model node this came from: "Conv \"layer1.0.conv1\"", or NULL */
  int backward;         /* built by reverse mode (passes/autodiff.c), for the fuser */
  /* constant payload (op == constant): row-major, 64-byte aligned, never NULL
   * once the graph is complete, except for key= constants not yet bound */
  void *data;
  size_t nbytes;
  int dead;             /* set by passes that remove nodes; pc_graph_compact drops them */
  int group;            /* fusion group (kernel) id set by passes/fuse.c; -1 before fusion */
  /* set by passes/fuse.c: why this node's group did not absorb its producers, one
   * line per operand ("" where fused or not applicable); NULL when all were fused */
  const char *unfused_reason;
};

typedef struct pc_sym {
  const char *name;
  int64_t lo, hi; /* inclusive bound; hi = INT64_MAX when unbounded */
} pc_sym;

struct pc_graph {
  /* arena: every node, value, attribute and string of the graph lives here */
  struct pc_arena_block *arena;
  pc_node **nodes;     /* topological order */
  int n_nodes, cap_nodes;
  pc_value **values;   /* by id */
  int n_values, cap_values;
  pc_value **inputs;
  int n_inputs, cap_inputs;
  pc_value **outputs;
  int n_outputs, cap_outputs;
  pc_sym *syms;
  int n_syms, cap_syms;
  int n_groups;        /* kernels after fusion: node->group in [0, n_groups), contiguous, topological */
  int64_t workspace_size; /* bytes, after memory planning */
  int64_t mem_limit;   /* bytes the interpreter may hold at once and a compiled model may need; 0: none */
  int matmul_precision; /* a pc_matmul_precision: how compiled host code runs f32 contractions */
  int run_time_dims;    /* built for codegen's run-time dims (codegen/dynamic.c): passes keep every decision
                           independent of the dims' values (constfold materializes no broadcast) */
  int autocast;         /* a pc_autocast: contractions (dots and convs) on bf16 or f16 operands */
  int bf16_f32_rows;    /* passes/autocast.c: the host CPU has no bf16 dot products, so --autocast bf16 rounded the
                           operands to bf16 and --matmul-precision high and medium are f32: the contractions run
                           on the f32 rows, codegen makes no bf16 calls */
  int foreign_cpu;      /* compiled for another CPU (--triple): passes that would ask this CPU what pays (the
                           attention planner) decide as for a CPU with no vector rows of its own */
  int gpu;              /* compiled for a GPU (--target cuda): the fuser makes no group whose call host code alone
                           has (a weight gradient's columns read in place) */
  /* a training step (passes/train.c): the last n_state inputs are state (the model's n_state_weights weights
   * first, then optimizer state), each replaced after a step by the output in the same place among the last
   * n_state outputs; state_init[i] its initial data (NULL: zeros) */
  int n_state, n_state_weights;
  const void **state_init;
  /* set by passes/state_order.c: every kernel reading a state runs before the one writing its next value,
   * which reads it only element for element, so codegen keeps each state in its output's buffer (the run
   * copies an input there first when the caller passed another); state_note: why not, when 0 (NULL: no state) */
  int state_in_place;
  const char *state_note;
  const char *tied_note; /* passes/train.c: weights read by several model nodes (trained as one), or NULL */
  int remat_prims;     /* prims passes/remat.c built for the backward to recompute forward values with */
  const char *origin;  /* stamped on nodes created from now on */
  int backward;        /* stamped on nodes created from now on (node->backward) */
  pc_status status;    /* first error, sticky */
  char error[512];
};

/* [*lo, *hi]: every value v can take, an integer dtype of at most 32 bits, by interval arithmetic over its
 * producers (constants' data, converts, add/sub/neg, movement prims), else its dtype's range; 0 for other
 * dtypes (ir/range.c) */
int pc_value_int_range(const pc_value *v, int64_t *lo, int64_t *hi);

/* ir/attention.c: y = softmax(Q K^T * scale + mask) V as prims: a dot_general S of Q [.., Sq, D] and K
 * ([.., Sk, D], or [.., D, Sk] when k_trans), optionally times a uniform constant, where(lower triangle, s,
 * -inf) (causal, top-left aligned) and + an f32 mask of S's shape, in that order from S out; softmax over
 * the last dim as composite.c builds it; a dot_general of that with V [.., Sk, Dv]; f32, at most 2 batch
 * dims, head dims up to PC_ATTENTION_MAX_DIM. pc_attention_match recognizes the chain ending at the dot pv. With uses (reads per value id) it
 * also requires every value between the two dots to be read only by the chain and to be no graph output,
 * and lists in nodes the chain's prims plus the index maps (transpose, splitting reshape,
 * broadcast_in_dim) read only by it that feed Q, K, V and the mask; without, it finds the roles only. */
#define PC_ATTENTION_MAX_NODES 64
#define PC_ATTENTION_MAX_DIM 256 /* head dims (D, Dv) the runtime's call takes (its tiles live on the stack) */
typedef struct pc_attention {
  const pc_node *qk, *pv;
  int k_trans, causal;
  double scale;
  const pc_value *mask; /* NULL: none */
  int n_nodes;
  const pc_node *nodes[PC_ATTENTION_MAX_NODES];
} pc_attention;
int pc_attention_match(const pc_graph *g, const pc_node *pv, const int *uses, pc_attention *a);
/* ir/columns.c: a conv's weight gradient as one GEMM over gathered columns (passes/vjp_rules.c's dw_by_columns):
 * dot_general(a [M, N o..], reshape(concatenate(reshape(slice(xp)) per tap, axis 1))) contracting dim 1 with
 * dim 1, f32, xp [C, N, padded sp..] (ns of 1..3 spatial dims), one strided slice of it per kernel tap (taps row-major
 * over kd, tap (t_0 ..) starting at t_d dil_d, each od pixels st apart). pc_columns_match recognizes it at the dot
 * n; with uses (reads per value id) every value between xp and the dot must be read only by the chain and be no graph
 * output. nodes: the reshapes, concatenate and slices (not the dot, not xp's producer). When the dot's a is
 * reshape(transpose(gy, [1, 0, 2..])) of the conv's output gradient gy [N, M, o..] (each read only by the chain, with
 * uses), gy and those two nodes (a_nodes) too, which the call may read in place; else gy NULL. */
#define PC_COLUMNS_MAX_TAPS 64
#define PC_COLUMNS_MAX_NODES (2 + 2 * PC_COLUMNS_MAX_TAPS)
typedef struct pc_columns {
  const pc_node *dot;
  const pc_value *xp;
  int ns;
  int64_t C, images, od[3], st[3], kd[3], dil[3];
  int n_nodes;
  const pc_node *nodes[PC_COLUMNS_MAX_NODES];
  const pc_value *gy;
  const pc_node *a_nodes[2];
  /* xp = pad(transpose(x, [1, 0, 2..]), lo, hi, 0) with x [N, C, sp..], each read only by the chain (with uses), no
   * interior padding, lo >= 0: x, those two nodes and lo (x_lo[d], the grid's rows before x's first), else x NULL.
   * The Winograd row (pc_columns_winograd) with stride 1 reads x where it lies, zero around it. */
  const pc_value *x;
  const pc_node *x_nodes[2];
  int64_t x_lo[3];
} pc_columns;
int pc_columns_match(const pc_graph *g, const pc_node *n, const int *uses, pc_columns *m);
/* whether the weight gradient runs as Winograd F(2x2, 3x3) (runtime/conv/winograd.c): a 2-D 3x3 whose stride equals
 * its dilation, where primc_wgrad_wino_fits its sizes; and whether it then reads x unpadded (stride 1, m->x set).
 * The fuser and codegen decide by it alike. */
int pc_columns_winograd(const pc_columns *m);
int pc_columns_reads_x(const pc_columns *m);
/* after fusion: the match whose chain lies wholly in n's group (fuse.c's columns group, which memplan and codegen
 * make one call); gy kept only where its transpose joined the group too */
int pc_columns_grouped(const pc_graph *g, const pc_node *n, pc_columns *m);

/* a reshape that only splits operand dims (and adds or drops 1s): its index map stays affine */
int pc_reshape_splits(const pc_node *n);

/* torch.set_float32_matmul_precision's settings for f32 contractions (dot_general) in compiled host code:
 * HIGHEST in f32; HIGH on bf16 hi + lo splits of the operands, three bf16 products (about 2^-16 relative);
 * MEDIUM on operands rounded to bf16. Sums are f32 in all three. The interpreter, the reference, is f32. */
typedef enum pc_matmul_precision {
  PC_MATMUL_HIGHEST = 0,
  PC_MATMUL_HIGH,
  PC_MATMUL_MEDIUM,
  PC_MATMUL_PRECISION_COUNT
} pc_matmul_precision;
const char *pc_matmul_precision_name(int p); /* "highest", "high", "medium"; "?" */
int pc_matmul_precision_parse(const char *s); /* -1 when s is none of the names */

/* torch.autocast's choice: NONE; BF16 (compiled host code): f32 dot_generals and convs on bf16 operands with f32
 * sums (dots as matmul precision MEDIUM), everything else f32; FP16 (passes/autocast.c, any target): f32
 * dot_generals and convs with a weight operand read both operands rounded to f16, f32 sums and results. */
typedef enum pc_autocast { PC_AUTOCAST_NONE = 0, PC_AUTOCAST_BF16, PC_AUTOCAST_FP16, PC_AUTOCAST_COUNT } pc_autocast;
const char *pc_autocast_name(int a);  /* "none", "bf16", "fp16"; "?" */
int pc_autocast_parse(const char *s); /* -1 when s is neither */

pc_graph *pc_graph_new(void);
void pc_graph_free(pc_graph *g);
void *pc_alloc(pc_graph *g, size_t n);         /* zeroed, 64-byte aligned, owned by g */
char *pc_strdup(pc_graph *g, const char *s);
char *pc_strfmt(pc_graph *g, const char *fmt, ...);
/* room for need elements of size elem in the malloc'ed *arr of *cap (doubling); 0 when out of memory */
int pc_array_grow(void **arr, int *cap, int need, size_t elem);

/* Errors: the first one sticks; builders return NULL once the graph is in error. */
pc_status pc_fail(pc_graph *g, pc_status code, const char *fmt, ...);
pc_status pc_vfail(pc_graph *g, pc_status code, const char *fmt, va_list ap);
/* fail with the message prefixed by the node's origin (or its prim name) */
pc_status pc_node_fail(pc_graph *g, const pc_node *n, pc_status code, const char *fmt, ...);
const char *pc_error(const pc_graph *g);
void pc_set_origin(pc_graph *g, const char *origin); /* copied; NULL clears */

int pc_sym_add(pc_graph *g, const char *name, int64_t lo, int64_t hi); /* id; existing name returns its id */
int pc_sym_find(const pc_graph *g, const char *name);                   /* -1 if absent */

pc_value *pc_input_add(pc_graph *g, const char *name, pc_type t);
pc_status pc_output_add(pc_graph *g, pc_value *v);
void pc_value_set_name(pc_graph *g, pc_value *v, const char *name);

/* Creates a node, infers its output types (rejecting bad operands with a
 * message naming the node), appends it in topological order. */
pc_node *pc_node_add(pc_graph *g, pc_op op, pc_value *const *in, int n_in, const pc_attr *attrs, int n_attrs);
/* same, output 0 */
pc_value *pc_build(pc_graph *g, pc_op op, pc_value *const *in, int n_in, const pc_attr *attrs, int n_attrs);

const pc_attr *pc_attr_find(const pc_node *n, const char *name);
int64_t pc_attr_int(const pc_node *n, const char *name, int64_t dflt);
const int64_t *pc_attr_ints(const pc_node *n, const char *name, int *len); /* NULL if absent */
double pc_attr_float(const pc_node *n, const char *name, double dflt);
const char *pc_attr_str(const pc_node *n, const char *name, const char *dflt);

/* Removes nodes marked dead and renumbers; values of dead nodes must be unused. */
void pc_graph_compact(pc_graph *g);
/* number of uses of v as an operand or graph output */
int pc_value_use_count(const pc_graph *g, const pc_value *v);
/* whether v is one of the graph's outputs */
int pc_value_is_output(const pc_graph *g, const pc_value *v);

/* ---------------------------------------------------------------- builder helpers (ir/build.c) */

/* elementwise prims by name: pc_neg(g, x), pc_add(g, a, b), pc_clamp(g, x, lo, hi) */
#define PC_DECL_UNARY(n) pc_value *pc_##n(pc_graph *g, pc_value *x);
#define PC_DECL_BINARY(n) pc_value *pc_##n(pc_graph *g, pc_value *a, pc_value *b);
#define PC_DECL_TERNARY(n) pc_value *pc_##n(pc_graph *g, pc_value *a, pc_value *b, pc_value *c);
#define PC_DECL_OTHER(n)
#define PRIM(name, n_in, n_out, kind, operands, result, fuse, inl) PC_DECL_##kind(name)
#include "prims.def"
#undef PRIM

pc_value *pc_where(pc_graph *g, pc_value *cond, pc_value *a, pc_value *b);
pc_value *pc_convert(pc_graph *g, pc_value *x, pc_dtype to);
pc_value *pc_broadcast_in_dim(pc_graph *g, pc_value *x, int rank, const int64_t *shape, const int64_t *dims);
/* numpy-style: right-aligned broadcast of x to shape */
pc_value *pc_broadcast_to(pc_graph *g, pc_value *x, int rank, const int64_t *shape);
/* numpy broadcasting of two operands to their common shape; 0 on failure */
int pc_broadcast_pair(pc_graph *g, pc_value **a, pc_value **b);
pc_value *pc_reshape(pc_graph *g, pc_value *x, int rank, const int64_t *shape);
pc_value *pc_transpose(pc_graph *g, pc_value *x, const int64_t *perm);
pc_value *pc_slice(pc_graph *g, pc_value *x, const int64_t *start, const int64_t *limit, const int64_t *stride);
pc_value *pc_concatenate(pc_graph *g, pc_value *const *xs, int n, int64_t axis);
pc_value *pc_reduce(pc_graph *g, pc_op op, pc_value *x, int n_axes, const int64_t *axes);
pc_value *pc_dot_general(pc_graph *g, pc_value *a, pc_value *b, int n_contract, const int64_t *lhs_contract,
                         const int64_t *rhs_contract, int n_batch, const int64_t *lhs_batch, const int64_t *rhs_batch);
/* the conv prim with its attributes, one per spatial dim (ns of them) */
pc_value *pc_conv(pc_graph *g, pc_value *x, pc_value *w, int ns, const int64_t *stride, const int64_t *pad_lo,
                  const int64_t *pad_hi, const int64_t *dilation, const int64_t *lhs_dilation, int64_t groups);
/* The transposed conv (ONNX ConvTranspose, a conv's gradient by its input; ir/conv_transpose.c) of x [N, C, sp]
 * with w [C, O/groups, k] (ConvTranspose's layout; a conv weight [O', C'/groups, k] read so gives the conv's
 * input gradient): y[n, o, i*s + j*d - lo] += x[n, c, i] w[c, o, j], y [N, O, out], plus b [O] when not NULL.
 * k = s as one GEMM and an interleave, other strides by stride phases, else a conv of the stride-dilated input. */
pc_value *pc_conv_transpose(pc_graph *g, pc_value *x, pc_value *w, pc_value *b, int64_t groups, const int64_t *stride,
                            const int64_t *dil, const int64_t *lo, const int64_t *out);
/* a constant of the given type; data (row-major, pc_type_numel * size bytes) is copied */
pc_value *pc_const(pc_graph *g, pc_type t, const void *data);
/* rank-0 constant of dtype holding v (converted) */
pc_value *pc_scalar(pc_graph *g, pc_dtype dt, double v);
/* constant v broadcast to the type of `like` */
pc_value *pc_full_like(pc_graph *g, double v, const pc_value *like);
pc_value *pc_full(pc_graph *g, pc_dtype dt, double v, int rank, const int64_t *shape);
/* a constant bound later by name (weights files): data NULL, attribute key */
pc_value *pc_const_keyed(pc_graph *g, pc_type t, const char *key);
/* a weight: a constant with its data (copied) and a key naming it, as a bound key= constant */
pc_value *pc_const_weight(pc_graph *g, pc_type t, const void *data, const char *key);
/* a constant over bytes g already owns (pc_alloc'ed, t's size): no copy, so a pass can move a weight in place */
pc_value *pc_const_view(pc_graph *g, pc_type t, void *data);
/* data of a constant value, or NULL when v is not produced by a constant */
const void *pc_const_data(const pc_value *v);

/* ---------------------------------------------------------------- shape inference, verifier */

/* Sets n->out[*]->type from operands and attributes; fails naming the node. */
pc_status pc_infer(pc_graph *g, pc_node *n);
/* Checks the whole graph: topological order, types re-inferred equal, ids, outputs. */
pc_status pc_verify(pc_graph *g);

/* ---------------------------------------------------------------- text buffer, string hash (ir/strbuf.c) */

/* A growable NUL-terminated string for dumps and reports; start it zeroed. After an allocation
 * failure oom is set and appends do nothing, so a writer checks once, at pc_strbuf_done. */
typedef struct pc_strbuf {
  char *s;
  size_t len, cap;
  int oom;
} pc_strbuf;

void pc_strbuf_put(pc_strbuf *b, const char *s, size_t n);
void pc_strbuf_fmt(pc_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* the text, malloc'ed for the caller ("" when nothing was added); NULL (and freed) after oom */
char *pc_strbuf_done(pc_strbuf *b);

/* FNV-1a: pc_hash_bytes folds n bytes into h (start from PC_HASH_SEED); pc_str_hash hashes a string */
#define PC_HASH_SEED 1469598103934665603u
uint64_t pc_hash_bytes(uint64_t h, const void *p, size_t n);
size_t pc_str_hash(const char *s);

/* ---------------------------------------------------------------- text format (ir/print.c, ir/parse.c) */

/* graph(%x : f32[1,3], %w : f32[3,4]):
 *   %y : f32[1,4] = dot_general(%x, %w, lhs_contract=[1], rhs_contract=[0], lhs_batch=[], rhs_batch=[])
 *   return (%y)
 * Constants print their data inline when small, else as key="name". */
pc_status pc_graph_print(const pc_graph *g, FILE *f);
char *pc_graph_to_string(const pc_graph *g); /* malloc'ed; caller frees */

/* An op the prim parser does not know ("aten::linear"): the hook builds it
 * from prims. Declared output count is n_out; it fills out[]. */
typedef pc_status (*pc_op_hook)(void *ctx, pc_graph *g, const char *op, pc_value *const *in, int n_in,
                                const pc_attr *attrs, int n_attrs, pc_value **out, int n_out);

typedef struct pc_parse_opts {
  pc_op_hook hook;
  void *hook_ctx;
} pc_parse_opts;

/* Parses text into a new graph. Always returns a graph (or NULL only when out
 * of memory); on error its status is set and pc_error() reads
 * "file:line:col: message". */
pc_graph *pc_graph_parse(const char *text, size_t len, const char *filename, const pc_parse_opts *opts);

/* ---------------------------------------------------------------- interpreter (ir/interp.c) */

typedef struct pc_tensor {
  pc_dtype dtype;
  int rank;
  int64_t dims[PC_MAX_RANK];
  void *data; /* row-major; malloc'ed when produced by the interpreter */
} pc_tensor;

int64_t pc_tensor_numel(const pc_tensor *t);
size_t pc_tensor_nbytes(const pc_tensor *t);
void pc_tensor_free(pc_tensor *t); /* frees data, keeps metadata */

/* Runs g on inputs (one per graph input, concrete shapes binding symbolic
 * dims) and fills outputs (one per graph output, data malloc'ed). */
pc_status pc_interp(pc_graph *g, const pc_tensor *inputs, int n_inputs, pc_tensor *outputs, int n_outputs);
/* Evaluates one node on concrete operand tensors (used by constant folding). */
pc_status pc_interp_node(pc_graph *g, const pc_node *n, const pc_tensor *in, pc_tensor *out);


#endif
