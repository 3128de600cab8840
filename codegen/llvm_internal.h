/* codegen/llvm_internal.h: what the LLVM renderer's files share (llvm.c: module, entry points, driver;
 * llvm_kernel.c: loop nests and kernel functions; llvm_expr.c: types, values, elementwise prims). */
#ifndef PRIMC_LLVM_INTERNAL_H
#define PRIMC_LLVM_INTERNAL_H

#include "codegen/codegen.h"
#include "codegen/kir.h"

#include <llvm-c/Core.h>
#include <llvm-c/TargetMachine.h>

/* a symbol: the entry-point prefix (at most PC_MAX_ENTRY_NAME) and a suffix ("_output_dims_table", "_k123_body") */
#define LLVM_SYM_MAX (PC_MAX_ENTRY_NAME + 64)

typedef struct lctx {
  LLVMContextRef c;
  LLVMModuleRef m;
  LLVMBuilderRef b;
  const kir_program *p;
  const char *name;
  LLVMTypeRef i1, i8, i16, i32, i64, f16, f32, f64, ptr, voidt;
  LLVMValueRef fn;        /* function being built */
  LLVMValueRef profile;   /* NAME_profile when compiled with --profile, else NULL */
  int prof_base;          /* kernel i counts into the profile's row prof_base + i */
  LLVMValueRef *bufp;     /* by buffer id, in the kernel being built */
  LLVMValueRef iv[KIR_MAX_LOOPS];
  LLVMValueRef symv[KIR_DYN_MAX_SYMS]; /* run-time dims: the symbols' values in the function being built */
  pc_graph *g;
  int f16_native; /* the target computes f16 vectors natively (AVX512-FP16, Arm's fullfp16) */
  char diag_error[256]; /* the first error LLVM reported through the context's handler (llvm.c) */
  int f16_vf;     /* the vector width of loops over f16 data on x86 (llvm_kernel.c's f16_width), 0: LLVM's choice */
} lctx;

static inline int dt_unsigned(pc_dtype t) { return t == PC_bool || (pc_dtype_is_int(t) && !pc_dtype_is_signed(t)); }
/* floats stored narrower than they are computed: f16, bf16 and the f8 formats live in f32 registers */
static inline int dt_narrow(pc_dtype t) { return t == PC_f16 || t == PC_bf16 || pc_dtype_is_f8(t); }
static inline LLVMValueRef ci64(lctx *L, int64_t v) { return LLVMConstInt(L->i64, (unsigned long long)v, 1); }
static inline LLVMValueRef fconst(LLVMTypeRef t, double v) { return LLVMConstReal(t, v); }

/* ---------------------------------------------------------------- values (llvm_expr.c) */

/* register type: half types are computed in float */
LLVMTypeRef lv_reg_type(lctx *L, pc_dtype t);
#define T(L, t) lv_reg_type(L, t)
/* a constant global named name holding init */
LLVMValueRef lv_const_global(lctx *L, LLVMValueRef init, const char *name, LLVMLinkage linkage);
/* NAME_prof_kernels (writable primc_prof_kernel rows, counters at 0) and NAME_profile, exported, pointing at them */
LLVMValueRef lv_emit_profile(lctx *L, const kir_prof_row *rows, int n);
/* NAME_load_weights(path): primc_weights_map of the side file, size payload bytes, into the pointer global base */
LLVMValueRef lv_emit_load_weights(lctx *L, LLVMValueRef base, int64_t size);
/* a call of the overloaded intrinsic name at type t */
LLVMValueRef lv_intrinsic(lctx *L, const char *name, LLVMTypeRef t, LLVMValueRef *args, unsigned n);
/* a call of the external function name, declared on first use */
LLVMValueRef lv_call_fn(lctx *L, const char *name, LLVMTypeRef ret, LLVMTypeRef *params, LLVMValueRef *args,
                        unsigned n);
typedef LLVMValueRef (*ew_fn)(lctx *L, pc_dtype t, LLVMValueRef *a);
/* an elementwise prim's lowering at operand dtype t (NULL for prims that are not elementwise) */
ew_fn lv_ew_rule(pc_op op);
/* an expression of a loop kernel at the current loop variables L->iv */
LLVMValueRef lv_emit_expr(lctx *L, const kir_expr *e, int n_loops);
void lv_store_value(lctx *L, const kir_store *s, pc_dtype t, LLVMValueRef v, int n_loops);
/* what the store's element holds now (f32 or f64: a reduction accumulating in its output) */
LLVMValueRef lv_store_load(lctx *L, const kir_store *s, pc_dtype t, int n_loops);

/* run-time dims: the symbols' values loaded from dims (the buffer over them) into L->symv for the function
 * being built; then a size of the program (an extent, a map's offset or stride, a param) as its constant, or as
 * its polynomial of the symbols where it follows them (no-ops for a program without run-time dims) */
void lv_dyn_begin(lctx *L, LLVMValueRef dims);
LLVMValueRef lv_size(lctx *L, const int64_t *field);

/* ---------------------------------------------------------------- kernels (llvm_kernel.c) */

/* an alloca in the entry block of the function being built */
LLVMValueRef lv_entry_alloca(lctx *L, LLVMTypeRef t);
/* loop kernel idx as kN(table, begin, end), the thread pool's entry, over kN_body */
LLVMValueRef lv_emit_loop_kernel(lctx *L, int idx);

/* ---------------------------------------------------------------- the module's frame (llvm.c), for llvm_buckets.c */

void lv_init(lctx *L, const kir_program *p, const char *name);
void lv_free(lctx *L);
/* the target machine of o's triple, cpu and features (NULL with g's error set) */
LLVMTargetMachineRef lv_target_machine(pc_graph *g, const llvm_emit_opts *o);
/* the module's triple and data layout: tm's */
void lv_set_target(lctx *L, LLVMTargetMachineRef tm);
/* cpu and features on every defined function */
void lv_set_function_attrs(lctx *L, LLVMTargetMachineRef tm);
/* the module written as o->kind says */
pc_status lv_emit_file(lctx *L, LLVMTargetMachineRef tm, const llvm_emit_opts *o);
LLVMValueRef lv_cstring(lctx *L, const char *s);
/* primc_tensor_desc[] of vals ("in" or "out"), NAME_dims (a primc_dims_desc of L->p->dyn) and NAME_check_dims */
LLVMValueRef lv_emit_descs(lctx *L, pc_value *const *vals, int n, const char *what);
LLVMValueRef lv_emit_dims_desc(lctx *L, LLVMValueRef in_descs);
/* NAME_state (a primc_state_desc) of a training step: each state's first value as a constant, zeros as NULL;
 * a null pointer for any other model */
LLVMValueRef lv_emit_state_desc(lctx *L);
void lv_emit_check_dims(lctx *L, LLVMValueRef dims_desc);
/* NAME_model (a primc_model_desc, runtime/primc_rt.h: its name and counts from L, the rest as given) and
 * NAME_workspace_size; main_alias: also primc_main_model, the standalone driver's */
typedef struct lv_model_desc {
  LLVMValueRef run, load_weights;
  int64_t workspace_size;
  LLVMValueRef inputs, outputs, profile, output_dims, dims, run_dims, state;
} lv_model_desc;
void lv_emit_model_desc(lctx *L, const lv_model_desc *m, int main_alias);

#endif
