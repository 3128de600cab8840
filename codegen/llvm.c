/* codegen/llvm.c: renders a kernel IR program to LLVM IR and to objects: the module, the entry points (runtime
 * calls, NAME_run and its parts, the descriptors) and the driver; loop kernels are llvm_kernel.c's, values
 * llvm_expr.c's. */
#include "codegen/llvm_internal.h"

#include <llvm-c/Analysis.h>
#include <llvm-c/Core.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>
#include <stdlib.h>
#include <string.h>

/* loops whose total work is below this run on the calling thread */
#define PAR_MIN_WORK 32768

/* ---------------------------------------------------------------- entry points */

static LLVMValueRef const_i64_array(lctx *L, const int64_t *v, int n, const char *name) {
  LLVMValueRef *els = calloc((size_t)(n ? n : 1), sizeof *els);
  for (int i = 0; i < n; i++) els[i] = ci64(L, v[i]);
  LLVMValueRef gv = lv_const_global(L, LLVMConstArray2(L->i64, els, (uint64_t)n), name, LLVMPrivateLinkage);
  free(els);
  return gv;
}

/* if (status != 0) return status; */
static void check_status(lctx *L, LLVMValueRef st) {
  LLVMBasicBlockRef bad = LLVMAppendBasicBlockInContext(L->c, L->fn, "fail");
  LLVMBasicBlockRef ok = LLVMAppendBasicBlockInContext(L->c, L->fn, "ok");
  LLVMBuildCondBr(L->b, LLVMBuildICmp(L->b, LLVMIntNE, st, LLVMConstNull(L->i32), ""), bad, ok);
  LLVMPositionBuilderAtEnd(L->b, bad);
  LLVMBuildRet(L->b, st);
  LLVMPositionBuilderAtEnd(L->b, ok);
}

/* a call kernel's params (a constant array) and its buffer pointers (from the table) */
static void call_operands(lctx *L, const kir_kernel *k, int idx, LLVMValueRef table, LLVMValueRef *params,
                          LLVMValueRef *args) {
  char name[LLVM_SYM_MAX];
  snprintf(name, sizeof name, "%s_k%d_params", L->name, idx);
  *params = const_i64_array(L, k->params, k->n_params, name);
  int dyn = 0;
  for (int i = 0; i < k->n_params; i++) dyn |= kir_dyn_poly(L->p, &k->params[i]) != NULL;
  if (dyn) { /* a copy with the params that follow the symbols computed */
    LLVMValueRef copy = lv_entry_alloca(L, LLVMArrayType2(L->i64, (uint64_t)k->n_params));
    LLVMBuildMemCpy(L->b, copy, 8, *params, 8, ci64(L, 8 * (int64_t)k->n_params));
    for (int i = 0; i < k->n_params; i++) {
      if (!kir_dyn_poly(L->p, &k->params[i])) continue;
      LLVMValueRef at = ci64(L, i);
      LLVMBuildStore(L->b, lv_size(L, &k->params[i]), LLVMBuildInBoundsGEP2(L->b, L->i64, copy, &at, 1, ""));
    }
    *params = copy;
  }
  *args = lv_entry_alloca(L, LLVMArrayType2(L->ptr, KIR_MAX_CALL_ARGS));
  for (int i = 0; i < k->n_args; i++) {
    LLVMValueRef slot = ci64(L, k->args[i]);
    LLVMValueRef v = LLVMBuildLoad2(L->b, L->ptr, LLVMBuildInBoundsGEP2(L->b, L->ptr, table, &slot, 1, ""), "");
    LLVMValueRef di = ci64(L, i);
    LLVMBuildStore(L->b, v, LLVMBuildInBoundsGEP2(L->b, L->ptr, *args, &di, 1, ""));
  }
}

static void emit_call_kernel(lctx *L, const kir_kernel *k, int idx, LLVMValueRef table, LLVMValueRef epi) {
  LLVMValueRef params, args, params2, args2;
  LLVMTypeRef ps[4] = {L->ptr, L->ptr, L->ptr, L->ptr};
  call_operands(L, k, idx, table, &params, &args);
  if (k->pair) { /* primc_k_conv_pair(params, args, params2, args2) */
    call_operands(L, &L->p->kernels[k->pair], k->pair, table, &params2, &args2);
    check_status(L, lv_call_fn(L, "primc_k_conv_pair", L->i32, ps, (LLVMValueRef[]){params, args, params2, args2}, 4));
    return;
  }
  const kir_call_row *row = kir_call_info(k->call);
  const char *name = epi ? row->epi_symbol : row->symbol;
  check_status(L, lv_call_fn(L, name, L->i32, ps, (LLVMValueRef[]){params, args, epi, table}, epi ? 4 : 2));
}

static void emit_loop_launch(lctx *L, LLVMValueRef kfn, const kir_kernel *k, LLVMValueRef table) {
  int64_t work = 1;
  for (int l = 0; l < k->n_loops; l++) work *= k->extent[l];
  LLVMTypeRef wt[3] = {L->ptr, L->i64, L->i64};
  if (work >= PAR_MIN_WORK && k->extent[0] > 1) {
    LLVMTypeRef ps[3] = {L->i64, L->ptr, L->ptr};
    lv_call_fn(L, "primc_parallel_for", L->voidt, ps, (LLVMValueRef[]){lv_size(L, &k->extent[0]), kfn, table}, 3);
  } else {
    LLVMBuildCall2(L->b, LLVMFunctionType(L->voidt, wt, 3, 0), kfn,
                   (LLVMValueRef[]){table, ci64(L, 0), lv_size(L, &k->extent[0])}, 3, "");
  }
}

/* table[i] = the base pointer of buffer i: inputs[index], outputs[index], weights + offset or
 * workspace + offset. A loop over a constant (place, index or offset) array: one straight block of
 * a store per buffer makes LLVM's instruction scheduler quadratic (8,000 MatMuls: 27 s). */
static void emit_table_fill(lctx *L, LLVMValueRef table, LLVMValueRef in, LLVMValueRef out, LLVMValueRef ws,
                            LLVMValueRef weights) {
  const kir_program *p = L->p;
  if (!p->n_bufs) return;
  int64_t *desc = malloc(sizeof *desc * 2 * (size_t)p->n_bufs);
  for (int i = 0; i < p->n_bufs; i++) {
    const kir_buf *b = &p->bufs[i];
    desc[2 * i] = b->place;
    desc[2 * i + 1] = b->place == KP_INPUT || b->place == KP_OUTPUT ? b->index : b->offset;
  }
  char name[LLVM_SYM_MAX];
  snprintf(name, sizeof name, "%s_buf_places", L->name);
  LLVMValueRef places = const_i64_array(L, desc, 2 * p->n_bufs, name);
  free(desc);
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(L->b);
  LLVMBasicBlockRef head = LLVMAppendBasicBlockInContext(L->c, L->fn, "fill");
  LLVMBasicBlockRef arr = LLVMAppendBasicBlockInContext(L->c, L->fn, "fill.io");
  LLVMBasicBlockRef mem = LLVMAppendBasicBlockInContext(L->c, L->fn, "fill.mem");
  LLVMBasicBlockRef next = LLVMAppendBasicBlockInContext(L->c, L->fn, "fill.next");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(L->c, L->fn, "filled");
  LLVMBuildBr(L->b, head);
  LLVMPositionBuilderAtEnd(L->b, head);
  LLVMValueRef i = LLVMBuildPhi(L->b, L->i64, "");
  LLVMValueRef i2 = LLVMBuildMul(L->b, i, ci64(L, 2), "");
  LLVMValueRef place = LLVMBuildLoad2(L->b, L->i64, LLVMBuildInBoundsGEP2(L->b, L->i64, places, &i2, 1, ""), "");
  LLVMValueRef i21 = LLVMBuildAdd(L->b, i2, ci64(L, 1), "");
  LLVMValueRef at = LLVMBuildLoad2(L->b, L->i64, LLVMBuildInBoundsGEP2(L->b, L->i64, places, &i21, 1, ""), "");
  LLVMValueRef is_in = LLVMBuildICmp(L->b, LLVMIntEQ, place, ci64(L, KP_INPUT), "");
  LLVMValueRef is_out = LLVMBuildICmp(L->b, LLVMIntEQ, place, ci64(L, KP_OUTPUT), "");
  LLVMBuildCondBr(L->b, LLVMBuildOr(L->b, is_in, is_out, ""), arr, mem);
  LLVMPositionBuilderAtEnd(L->b, arr);
  LLVMValueRef a = LLVMBuildSelect(L->b, is_in, in, out, "");
  LLVMValueRef pa = LLVMBuildLoad2(L->b, L->ptr, LLVMBuildInBoundsGEP2(L->b, L->ptr, a, &at, 1, ""), "");
  LLVMBuildBr(L->b, next);
  LLVMPositionBuilderAtEnd(L->b, mem);
  LLVMValueRef is_const = LLVMBuildICmp(L->b, LLVMIntEQ, place, ci64(L, KP_CONST), "");
  LLVMValueRef base = LLVMBuildSelect(L->b, is_const, weights, ws, "");
  LLVMValueRef pm = LLVMBuildGEP2(L->b, L->i8, base, &at, 1, "");
  LLVMBuildBr(L->b, next);
  LLVMPositionBuilderAtEnd(L->b, next);
  LLVMValueRef ptr = LLVMBuildPhi(L->b, L->ptr, "");
  LLVMAddIncoming(ptr, (LLVMValueRef[]){pa, pm}, (LLVMBasicBlockRef[]){arr, mem}, 2);
  LLVMBuildStore(L->b, ptr, LLVMBuildInBoundsGEP2(L->b, L->ptr, table, &i, 1, ""));
  LLVMValueRef i1 = LLVMBuildAdd(L->b, i, ci64(L, 1), "");
  LLVMAddIncoming(i, (LLVMValueRef[]){ci64(L, 0), i1}, (LLVMBasicBlockRef[]){pre, next}, 2);
  LLVMBuildCondBr(L->b, LLVMBuildICmp(L->b, LLVMIntSLT, i1, ci64(L, p->n_bufs), ""), head, done);
  LLVMPositionBuilderAtEnd(L->b, done);
}

static LLVMValueRef emit_weights(lctx *L, const llvm_emit_opts *o) {
  const kir_program *p = L->p;
  char name[LLVM_SYM_MAX];
  if (o->weights_external && o->weights_sym) return LLVMAddGlobal(L->m, L->ptr, o->weights_sym); /* another's */
  if (o->weights_external) {
    snprintf(name, sizeof name, "%s_weights_base", L->name);
    LLVMValueRef gv = LLVMAddGlobal(L->m, L->ptr, name);
    LLVMSetInitializer(gv, LLVMConstNull(L->ptr));
    LLVMSetLinkage(gv, LLVMInternalLinkage);
    return gv;
  }
  snprintf(name, sizeof name, "%s_weights", L->name);
  if (o->weights_sym) snprintf(name, sizeof name, "%s", o->weights_sym);
  if (!o->weights_blob) { /* an object: package.c appends the weights after LLVM wrote it (codegen/elf_weights.c) */
    LLVMValueRef gv = LLVMAddGlobal(L->m, LLVMArrayType2(L->i8, (uint64_t)p->weights_size), name);
    LLVMSetGlobalConstant(gv, 1);
    LLVMSetVisibility(gv, LLVMHiddenVisibility);
    LLVMSetAlignment(gv, 64);
    return gv;
  }
  LLVMValueRef init = LLVMConstStringInContext2(L->c, (const char *)o->weights_blob, (size_t)p->weights_size, 1);
  LLVMValueRef gv = lv_const_global(L, init, name, LLVMInternalLinkage);
  LLVMSetAlignment(gv, 64);
  return gv;
}

/* ---------------------------------------------------------------- profiler */

LLVMValueRef lv_emit_profile(lctx *L, const kir_prof_row *rows, int n) {
  LLVMTypeRef ft[5] = {L->ptr, L->ptr, L->i64, L->i64, L->i64};
  LLVMTypeRef rt = LLVMStructTypeInContext(L->c, ft, 5, 0);
  LLVMValueRef *vals = calloc((size_t)n + 1, sizeof *vals);
  if (!vals) return pc_fail(L->g, PC_ERR_NOMEM, "out of memory"), NULL;
  for (int i = 0; i < n; i++) {
    LLVMValueRef f[5] = {lv_cstring(L, rows[i].name), lv_cstring(L, rows[i].origin), ci64(L, rows[i].bytes), ci64(L, 0),
                         ci64(L, 0)};
    vals[i] = LLVMConstStructInContext(L->c, f, 5, 0);
  }
  LLVMValueRef init = LLVMConstArray2(rt, vals, (uint64_t)n);
  free(vals);
  char name[LLVM_SYM_MAX];
  snprintf(name, sizeof name, "%s_prof_kernels", L->name);
  LLVMValueRef tab = LLVMAddGlobal(L->m, LLVMTypeOf(init), name);
  LLVMSetInitializer(tab, init);
  LLVMSetLinkage(tab, LLVMInternalLinkage);
  LLVMValueRef pf[2] = {LLVMConstInt(L->i32, (unsigned)n, 0), tab};
  LLVMValueRef pinit = LLVMConstStructInContext(L->c, pf, 2, 0);
  snprintf(name, sizeof name, "%s_profile", L->name);
  return lv_const_global(L, pinit, name, LLVMExternalLinkage);
}

/* the program's profile table (lv_emit_profile), or with o->profile_sym the other object's it counts into */
static LLVMValueRef emit_profile_table(lctx *L, const llvm_emit_opts *o) {
  const kir_program *p = L->p;
  L->prof_base = o->profile_base;
  if (o->profile_sym) return LLVMAddGlobal(L->m, L->i8, o->profile_sym);
  kir_prof_row *rows = calloc((size_t)p->n_kernels + 1, sizeof *rows);
  if (!rows) return pc_fail(L->g, PC_ERR_NOMEM, "out of memory"), NULL;
  for (int i = 0; i < p->n_kernels; i++) {
    kir_kernel_label(p, i, rows[i].name, sizeof rows[i].name, rows[i].origin, sizeof rows[i].origin);
    rows[i].bytes = kir_kernel_bytes(p, i);
  }
  LLVMValueRef t = lv_emit_profile(L, rows, p->n_kernels);
  free(rows);
  return t;
}

static LLVMValueRef prof_begin(lctx *L) {
  return L->profile ? lv_call_fn(L, "primc_prof_begin", L->i64, NULL, NULL, 0) : NULL;
}

static void prof_end(lctx *L, int idx, LLVMValueRef t0) {
  if (!L->profile) return;
  LLVMTypeRef ps[3] = {L->ptr, L->i32, L->i64};
  LLVMValueRef id = LLVMConstInt(L->i32, (unsigned)(L->prof_base + idx), 0);
  lv_call_fn(L, "primc_prof_end", L->voidt, ps, (LLVMValueRef[]){L->profile, id, t0}, 3);
}

/* kernels launched by one part of NAME_run: LLVM's CFG passes are quadratic in the status branches
 * of one function (4,000 kernels in one: 2.8 s; 8,000: 11 s), so the run is a chain of parts */
#define RUN_PART_KERNELS 64

/* NAME_run_partJ(table): kernels [lo, hi) in order; the first non-zero status, else 0 */
static LLVMValueRef emit_run_part(lctx *L, LLVMValueRef *kfns, int part, int lo, int hi) {
  const kir_program *p = L->p;
  char name[LLVM_SYM_MAX];
  snprintf(name, sizeof name, "%s_run_part%d", L->name, part);
  LLVMValueRef fn = LLVMAddFunction(L->m, name, LLVMFunctionType(L->i32, &L->ptr, 1, 0));
  LLVMSetLinkage(fn, LLVMInternalLinkage);
  LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                          LLVMCreateEnumAttribute(L->c, LLVMGetEnumAttributeKindForName("noinline", 8), 0));
  L->fn = fn;
  LLVMPositionBuilderAtEnd(L->b, LLVMAppendBasicBlockInContext(L->c, fn, "entry"));
  LLVMValueRef table = LLVMGetParam(fn, 0);
  if (p->dyn) {
    LLVMValueRef at = ci64(L, p->dyn->buf);
    lv_dyn_begin(L, LLVMBuildLoad2(L->b, L->ptr, LLVMBuildInBoundsGEP2(L->b, L->ptr, table, &at, 1, ""), ""));
  }
  for (int i = lo; i < hi; i++) {
    const kir_kernel *k = &p->kernels[i];
    if (k->absorbed) continue; /* run by the call it belongs to */
    LLVMValueRef t0 = prof_begin(L);
    /* an epilogue per block of rows needs the call's _epi symbol (calls.def); without one it runs after the call */
    int epi = k->kind == KK_CALL && k->has_epilogue && !k->epi_in_call, by_rows = epi && kir_call_info(k->call)->epi_symbol;
    if (k->kind == KK_CALL) emit_call_kernel(L, k, i, table, by_rows ? kfns[k->epilogue] : NULL);
    else emit_loop_launch(L, kfns[i], k, table);
    if (epi && !by_rows) emit_loop_launch(L, kfns[k->epilogue], &p->kernels[k->epilogue], table);
    prof_end(L, i, t0);
  }
  LLVMBuildRet(L->b, LLVMConstNull(L->i32));
  return fn;
}

/* 1 when arr (inputs or outputs) or any of its n pointers is NULL */
static LLVMValueRef any_null(lctx *L, LLVMValueRef arr, int n) {
  LLVMValueRef null = LLVMConstNull(L->ptr), bad = LLVMBuildICmp(L->b, LLVMIntEQ, arr, null, "");
  if (n == 0) return bad;
  /* the elements are read only when the array is there */
  LLVMBasicBlockRef from = LLVMGetInsertBlock(L->b);
  LLVMBasicBlockRef each = LLVMAppendBasicBlockInContext(L->c, L->fn, "elements");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(L->c, L->fn, "checked");
  LLVMBuildCondBr(L->b, bad, done, each);
  LLVMPositionBuilderAtEnd(L->b, each);
  LLVMValueRef any = LLVMConstInt(L->i1, 0, 0);
  for (int i = 0; i < n; i++) {
    LLVMValueRef slot = ci64(L, i);
    LLVMValueRef v = LLVMBuildLoad2(L->b, L->ptr, LLVMBuildInBoundsGEP2(L->b, L->ptr, arr, &slot, 1, ""), "");
    any = LLVMBuildOr(L->b, any, LLVMBuildICmp(L->b, LLVMIntEQ, v, null, ""), "");
  }
  LLVMBasicBlockRef each_end = LLVMGetInsertBlock(L->b);
  LLVMBuildBr(L->b, done);
  LLVMPositionBuilderAtEnd(L->b, done);
  LLVMValueRef phi = LLVMBuildPhi(L->b, L->i1, "");
  LLVMValueRef vals[2] = {LLVMConstInt(L->i1, 1, 0), any};
  LLVMBasicBlockRef blocks[2] = {from, each_end};
  LLVMAddIncoming(phi, vals, blocks, 2);
  return phi;
}

/* A step updating its state in place reads and writes each state in the output's buffer: a state input the
 * caller passed in another buffer is copied there first (a loop over the states' sizes) */
static void emit_state_carry(lctx *L, LLVMValueRef in, LLVMValueRef out) {
  const pc_graph *g = L->p->g;
  int n = g->n_state;
  int64_t *bytes = malloc(sizeof *bytes * (size_t)n);
  if (!bytes) {
    pc_fail(L->g, PC_ERR_NOMEM, "out of memory");
    return;
  }
  for (int i = 0; i < n; i++) {
    const pc_value *v = g->inputs[g->n_inputs - n + i];
    bytes[i] = pc_type_numel(&v->type) * (int64_t)pc_dtype_size(v->type.dtype);
  }
  char name[LLVM_SYM_MAX];
  snprintf(name, sizeof name, "%s_state_bytes", L->name);
  LLVMValueRef sizes = const_i64_array(L, bytes, n, name);
  free(bytes);
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(L->b);
  LLVMBasicBlockRef head = LLVMAppendBasicBlockInContext(L->c, L->fn, "carry");
  LLVMBasicBlockRef copy = LLVMAppendBasicBlockInContext(L->c, L->fn, "carry.copy");
  LLVMBasicBlockRef next = LLVMAppendBasicBlockInContext(L->c, L->fn, "carry.next");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(L->c, L->fn, "carried");
  LLVMBuildBr(L->b, head);
  LLVMPositionBuilderAtEnd(L->b, head);
  LLVMValueRef i = LLVMBuildPhi(L->b, L->i64, "");
  LLVMValueRef ii = LLVMBuildAdd(L->b, i, ci64(L, g->n_inputs - n), "");
  LLVMValueRef oi = LLVMBuildAdd(L->b, i, ci64(L, g->n_outputs - n), "");
  LLVMValueRef src = LLVMBuildLoad2(L->b, L->ptr, LLVMBuildInBoundsGEP2(L->b, L->ptr, in, &ii, 1, ""), "");
  LLVMValueRef dst = LLVMBuildLoad2(L->b, L->ptr, LLVMBuildInBoundsGEP2(L->b, L->ptr, out, &oi, 1, ""), "");
  LLVMBuildCondBr(L->b, LLVMBuildICmp(L->b, LLVMIntEQ, src, dst, ""), next, copy);
  LLVMPositionBuilderAtEnd(L->b, copy);
  LLVMValueRef nb = LLVMBuildLoad2(L->b, L->i64, LLVMBuildInBoundsGEP2(L->b, L->i64, sizes, &i, 1, ""), "");
  LLVMBuildMemCpy(L->b, dst, 1, src, 1, nb);
  LLVMBuildBr(L->b, next);
  LLVMPositionBuilderAtEnd(L->b, next);
  LLVMValueRef i1 = LLVMBuildAdd(L->b, i, ci64(L, 1), "");
  LLVMAddIncoming(i, (LLVMValueRef[]){ci64(L, 0), i1}, (LLVMBasicBlockRef[]){pre, next}, 2);
  LLVMBuildCondBr(L->b, LLVMBuildICmp(L->b, LLVMIntSLT, i1, ci64(L, n), ""), head, done);
  LLVMPositionBuilderAtEnd(L->b, done);
}

static LLVMValueRef emit_run(lctx *L, const llvm_emit_opts *o, LLVMValueRef *kfns) {
  const kir_program *p = L->p;
  char name[LLVM_SYM_MAX];
  int n_parts = (p->n_kernels + RUN_PART_KERNELS - 1) / RUN_PART_KERNELS;
  LLVMValueRef *parts = calloc((size_t)n_parts + 1, sizeof *parts);
  for (int j = 0; j < n_parts; j++)
    parts[j] = emit_run_part(L, kfns, j, j * RUN_PART_KERNELS,
                             (j + 1) * RUN_PART_KERNELS < p->n_kernels ? (j + 1) * RUN_PART_KERNELS : p->n_kernels);
  /* with run-time dims, NAME_run_dims binds them and calls this, NAME_run_at_bound */
  snprintf(name, sizeof name, p->dyn ? "%s_run_at_bound" : "%s_run", L->name);
  LLVMTypeRef pt[3] = {L->ptr, L->ptr, L->ptr};
  LLVMValueRef run = LLVMAddFunction(L->m, name, LLVMFunctionType(L->i32, pt, 3, 0));
  if (p->dyn) LLVMSetLinkage(run, LLVMInternalLinkage);
  L->fn = run;
  LLVMPositionBuilderAtEnd(L->b, LLVMAppendBasicBlockInContext(L->c, run, "entry"));
  LLVMValueRef in = LLVMGetParam(run, 0), out = LLVMGetParam(run, 1), ws = LLVMGetParam(run, 2);
  LLVMValueRef wg = emit_weights(L, o), weights = wg;
  if (o->weights_external) {
    weights = LLVMBuildLoad2(L->b, L->ptr, wg, "");
    LLVMValueRef missing = LLVMBuildICmp(L->b, LLVMIntEQ, weights, LLVMConstNull(L->ptr), "");
    check_status(L, LLVMBuildSelect(L->b, missing, LLVMConstInt(L->i32, 2, 0), LLVMConstNull(L->i32), ""));
    LLVMValueRef off = ci64(L, o->weights_offset);
    if (o->weights_offset) weights = LLVMBuildInBoundsGEP2(L->b, L->i8, weights, &off, 1, "");
  }
  /* status 1 for a NULL array, a NULL buffer inside one, or a NULL workspace the model needs */
  LLVMValueRef nulls = any_null(L, in, p->g->n_inputs);
  nulls = LLVMBuildOr(L->b, nulls, any_null(L, out, p->g->n_outputs), "");
  if (p->workspace_size > 0)
    nulls = LLVMBuildOr(L->b, nulls, LLVMBuildICmp(L->b, LLVMIntEQ, ws, LLVMConstNull(L->ptr), ""), "");
  check_status(L, LLVMBuildSelect(L->b, nulls, LLVMConstInt(L->i32, 1, 0), LLVMConstNull(L->i32), ""));
  if (p->g->state_in_place) emit_state_carry(L, in, out);
  LLVMValueRef table = lv_entry_alloca(L, LLVMArrayType2(L->ptr, (uint64_t)(p->n_bufs ? p->n_bufs : 1)));
  emit_table_fill(L, table, in, out, ws, weights);
  for (int j = 0; j < n_parts; j++)
    check_status(L, LLVMBuildCall2(L->b, LLVMFunctionType(L->i32, &L->ptr, 1, 0), parts[j], &table, 1, ""));
  LLVMBuildRet(L->b, LLVMConstNull(L->i32));
  free(parts);
  return run;
}

/* ---------------------------------------------------------------- run-time dims */

/* NAME_dims, a primc_dims_desc: the symbols, the symbol of each input dim, where the run keeps their values */
LLVMValueRef lv_emit_dims_desc(lctx *L, LLVMValueRef in_descs) {
  const kir_program *p = L->p;
  const kir_dyn *d = p->dyn;
  int n_in = p->g->n_inputs, n_syms = d ? d->n_syms : 0;
  LLVMTypeRef st[4] = {L->ptr, L->i64, L->i64, L->i64};
  LLVMTypeRef symt = LLVMStructTypeInContext(L->c, st, 4, 0);
  LLVMValueRef syms[KIR_DYN_MAX_SYMS + 1];
  for (int s = 0; s < n_syms; s++) {
    LLVMValueRef f[4] = {lv_cstring(L, d->name[s]), ci64(L, d->lo[s]), ci64(L, d->hi[s]), ci64(L, d->mult[s])};
    syms[s] = LLVMConstStructInContext(L->c, f, 4, 0);
  }
  char name[LLVM_SYM_MAX];
  snprintf(name, sizeof name, "%s_dim_syms", L->name);
  LLVMValueRef symtab = lv_const_global(L, LLVMConstArray2(symt, syms, (uint64_t)n_syms), name, LLVMPrivateLinkage);
  LLVMValueRef *ids = calloc((size_t)(n_in + 1) * PC_MAX_RANK, sizeof *ids);
  for (int i = 0; i < n_in * PC_MAX_RANK; i++) ids[i] = LLVMConstInt(L->i32, (unsigned long long)(d ? d->in_sym[i] : -1), 1);
  snprintf(name, sizeof name, "%s_input_syms", L->name);
  LLVMValueRef idtab = lv_const_global(L, LLVMConstArray2(L->i32, ids, (uint64_t)n_in * PC_MAX_RANK), name,
                                       LLVMPrivateLinkage);
  free(ids);
  LLVMValueRef f[6] = {LLVMConstInt(L->i32, (unsigned)n_syms, 0), symtab, idtab, ci64(L, d ? d->offset : -1),
                       LLVMConstInt(L->i32, (unsigned)n_in, 0), in_descs};
  snprintf(name, sizeof name, "%s_dims", L->name);
  return lv_const_global(L, LLVMConstStructInContext(L->c, f, 6, 0), name, LLVMInternalLinkage);
}

/* NAME_run_dims(inputs, input_dims, outputs, workspace): the symbols bound (primc_dims_bind), each output dim
 * that follows them written to its slot for NAME_output_dims, then the run; with run-time dims NAME_run is
 * NAME_run_dims at the bounds */
static LLVMValueRef emit_run_dims(lctx *L, LLVMValueRef run, LLVMValueRef dims_desc) {
  const kir_program *p = L->p;
  const kir_dyn *d = p->dyn;
  char name[LLVM_SYM_MAX];
  snprintf(name, sizeof name, "%s_run_dims", L->name);
  LLVMTypeRef pt[4] = {L->ptr, L->ptr, L->ptr, L->ptr};
  LLVMValueRef f = LLVMAddFunction(L->m, name, LLVMFunctionType(L->i32, pt, 4, 0));
  L->fn = f;
  LLVMPositionBuilderAtEnd(L->b, LLVMAppendBasicBlockInContext(L->c, f, "entry"));
  LLVMValueRef in = LLVMGetParam(f, 0), dims = LLVMGetParam(f, 1), out = LLVMGetParam(f, 2), ws = LLVMGetParam(f, 3);
  if (d) /* the values go into the workspace: a NULL one is status 1 before anything is read */
    check_status(L, LLVMBuildSelect(L->b, LLVMBuildICmp(L->b, LLVMIntEQ, ws, LLVMConstNull(L->ptr), ""),
                                    LLVMConstInt(L->i32, 1, 0), LLVMConstNull(L->i32), ""));
  LLVMTypeRef bt[3] = {L->ptr, L->ptr, L->ptr};
  check_status(L, lv_call_fn(L, "primc_dims_bind", L->i32, bt, (LLVMValueRef[]){dims_desc, dims, ws}, 3));
  if (d) {
    LLVMValueRef off = ci64(L, d->offset);
    lv_dyn_begin(L, LLVMBuildGEP2(L->b, L->i8, ws, &off, 1, ""));
    const pc_graph *g = p->g;
    for (int i = 0; i < g->n_outputs; i++)
      for (int k = 0; k < g->outputs[i]->type.rank; k++) {
        int64_t slot = d->out_slot[i * PC_MAX_RANK + k];
        if (slot < 0) continue;
        LLVMValueRef at = ci64(L, slot);
        LLVMBuildStore(L->b, lv_size(L, &g->outputs[i]->type.dims[k]), LLVMBuildGEP2(L->b, L->i8, ws, &at, 1, ""));
      }
  }
  LLVMValueRef args[3] = {in, out, ws};
  LLVMBuildRet(L->b, LLVMBuildCall2(L->b, LLVMFunctionType(L->i32, pt, 3, 0), run, args, 3, ""));
  if (!d) return f;
  snprintf(name, sizeof name, "%s_run", L->name);
  LLVMValueRef r = LLVMAddFunction(L->m, name, LLVMFunctionType(L->i32, pt, 3, 0));
  L->fn = r;
  LLVMPositionBuilderAtEnd(L->b, LLVMAppendBasicBlockInContext(L->c, r, "entry"));
  LLVMValueRef a4[4] = {LLVMGetParam(r, 0), LLVMConstNull(L->ptr), LLVMGetParam(r, 1), LLVMGetParam(r, 2)};
  LLVMBuildRet(L->b, LLVMBuildCall2(L->b, LLVMFunctionType(L->i32, pt, 4, 0), f, a4, 4, ""));
  return f;
}

/* NAME_check_dims(input_dims, msg, len): primc_dims_check's verdict and message, nothing run */
void lv_emit_check_dims(lctx *L, LLVMValueRef dims_desc) {
  char name[LLVM_SYM_MAX];
  snprintf(name, sizeof name, "%s_check_dims", L->name);
  LLVMTypeRef pt[3] = {L->ptr, L->ptr, L->i64};
  LLVMValueRef f = LLVMAddFunction(L->m, name, LLVMFunctionType(L->i32, pt, 3, 0));
  L->fn = f;
  LLVMPositionBuilderAtEnd(L->b, LLVMAppendBasicBlockInContext(L->c, f, "entry"));
  LLVMValueRef values = lv_entry_alloca(L, LLVMArrayType2(L->i64, KIR_DYN_MAX_SYMS));
  LLVMTypeRef ct[5] = {L->ptr, L->ptr, L->ptr, L->ptr, L->i64};
  LLVMValueRef args[5] = {dims_desc, LLVMGetParam(f, 0), values, LLVMGetParam(f, 1), LLVMGetParam(f, 2)};
  LLVMBuildRet(L->b, lv_call_fn(L, "primc_dims_check", L->i32, ct, args, 5));
}

LLVMValueRef lv_emit_load_weights(lctx *L, LLVMValueRef base, int64_t size) {
  char name[LLVM_SYM_MAX];
  snprintf(name, sizeof name, "%s_load_weights", L->name);
  LLVMValueRef f = LLVMAddFunction(L->m, name, LLVMFunctionType(L->i32, &L->ptr, 1, 0));
  L->fn = f;
  LLVMPositionBuilderAtEnd(L->b, LLVMAppendBasicBlockInContext(L->c, f, "entry"));
  LLVMTypeRef ps[3] = {L->ptr, L->i64, L->ptr};
  LLVMValueRef args[3] = {LLVMGetParam(f, 0), ci64(L, size), base};
  LLVMBuildRet(L->b, lv_call_fn(L, "primc_weights_map", L->i32, ps, args, 3));
  return f;
}

/* NAME_load_weights for the program's own side file, into NAME_weights_base (none when another object maps it) */
static LLVMValueRef emit_load_weights(lctx *L, const llvm_emit_opts *o) {
  if (!o->weights_external || o->weights_sym) return LLVMConstNull(L->ptr);
  char name[LLVM_SYM_MAX];
  snprintf(name, sizeof name, "%s_weights_base", L->name);
  return lv_emit_load_weights(L, LLVMGetNamedGlobal(L->m, name), L->p->weights_size);
}

LLVMValueRef lv_cstring(lctx *L, const char *s) {
  LLVMValueRef init = LLVMConstStringInContext2(L->c, s, strlen(s), 0);
  return lv_const_global(L, init, "", LLVMPrivateLinkage);
}

/* a data-dependent dim (nonzero's count) at its bound: the size of the buffer the caller passes */
static int64_t dim_bound(const pc_graph *g, int64_t d) { return PC_DIM_IS_SYM(d) ? g->syms[PC_DIM_SYM_ID(d)].hi : d; }

/* NAME_output_dims(workspace, i, dims): primc_output_dims over a table of each output's rank and
 * dims, a data-dependent dim as -(1 + workspace offset of the count the run wrote) */
static LLVMValueRef emit_output_dims(lctx *L) {
  const kir_program *p = L->p;
  const pc_graph *g = p->g;
  int n = g->n_outputs, w = 1 + PC_MAX_RANK;
  int64_t *tab = calloc((size_t)(n ? n : 1) * (size_t)w, sizeof *tab);
  for (int i = 0; i < n; i++) {
    const pc_type *t = &g->outputs[i]->type;
    tab[i * w] = t->rank;
    for (int d = 0; d < t->rank; d++) {
      int64_t v = t->dims[d];
      tab[i * w + 1 + d] = PC_DIM_IS_SYM(v) ? -1 - p->sym_slot[PC_DIM_SYM_ID(v)] : v;
      if (p->dyn && p->dyn->out_slot[i * PC_MAX_RANK + d] >= 0) tab[i * w + 1 + d] = -1 - p->dyn->out_slot[i * PC_MAX_RANK + d];
    }
  }
  char name[LLVM_SYM_MAX];
  snprintf(name, sizeof name, "%s_output_dims_table", L->name);
  LLVMValueRef gv = const_i64_array(L, tab, n * w, name);
  free(tab);
  snprintf(name, sizeof name, "%s_output_dims", L->name);
  LLVMTypeRef pt[3] = {L->ptr, L->i32, L->ptr};
  LLVMValueRef f = LLVMAddFunction(L->m, name, LLVMFunctionType(L->i32, pt, 3, 0));
  L->fn = f;
  LLVMPositionBuilderAtEnd(L->b, LLVMAppendBasicBlockInContext(L->c, f, "entry"));
  LLVMTypeRef ps[5] = {L->ptr, L->i32, L->ptr, L->i32, L->ptr};
  LLVMValueRef args[5] = {gv, LLVMConstInt(L->i32, (unsigned)n, 0), LLVMGetParam(f, 0), LLVMGetParam(f, 1),
                          LLVMGetParam(f, 2)};
  LLVMBuildRet(L->b, lv_call_fn(L, "primc_output_dims", L->i32, ps, args, 5));
  return f;
}

/* primc_tensor_desc[] for the graph inputs or outputs */
LLVMValueRef lv_emit_descs(lctx *L, pc_value *const *vals, int n, const char *what) {
  LLVMTypeRef ft[4] = {L->ptr, L->i32, L->i32, LLVMArrayType2(L->i64, PC_MAX_RANK)};
  LLVMTypeRef dt = LLVMStructTypeInContext(L->c, ft, 4, 0);
  LLVMValueRef *els = calloc((size_t)(n ? n : 1), sizeof *els);
  for (int i = 0; i < n; i++) {
    const pc_value *v = vals[i];
    char buf[32];
    snprintf(buf, sizeof buf, "%s%d", what, i); /* "in0", "out1": the header uses the same names */
    LLVMValueRef dims[PC_MAX_RANK];
    for (int d = 0; d < PC_MAX_RANK; d++) dims[d] = ci64(L, d < v->type.rank ? dim_bound(L->g, v->type.dims[d]) : 0);
    LLVMValueRef f[4] = {lv_cstring(L, v->name ? v->name : buf), LLVMConstInt(L->i32, (unsigned)v->type.dtype, 0),
                         LLVMConstInt(L->i32, (unsigned)v->type.rank, 0), LLVMConstArray2(L->i64, dims, PC_MAX_RANK)};
    els[i] = LLVMConstStructInContext(L->c, f, 4, 0);
  }
  LLVMValueRef init = LLVMConstArray2(dt, els, (uint64_t)n);
  char name[LLVM_SYM_MAX];
  snprintf(name, sizeof name, "%s_%s_descs", L->name, what);
  LLVMValueRef gv = lv_const_global(L, init, name, LLVMInternalLinkage);
  free(els);
  return gv;
}

LLVMValueRef lv_emit_state_desc(lctx *L) {
  const pc_graph *g = L->p->g;
  int n = g->n_state;
  if (!n) return LLVMConstNull(L->ptr);
  LLVMValueRef *init = calloc((size_t)n, sizeof *init);
  char name[LLVM_SYM_MAX];
  for (int i = 0; init && i < n; i++) {
    const pc_value *v = g->inputs[g->n_inputs - n + i];
    size_t bytes = (size_t)pc_type_numel(&v->type) * pc_dtype_size(v->type.dtype);
    if (!g->state_init[i] || !bytes) {
      init[i] = LLVMConstNull(L->ptr);
      continue;
    }
    snprintf(name, sizeof name, "%s_state%d", L->name, i);
    init[i] = lv_const_global(L, LLVMConstStringInContext(L->c, g->state_init[i], (unsigned)bytes, 1), name,
                              LLVMPrivateLinkage);
    LLVMSetAlignment(init[i], 64);
  }
  if (!init) return LLVMConstNull(L->ptr);
  snprintf(name, sizeof name, "%s_state_init", L->name);
  LLVMValueRef tab = lv_const_global(L, LLVMConstArray2(L->ptr, init, (uint64_t)n), name, LLVMExternalLinkage);
  free(init);
  LLVMValueRef f[4] = {LLVMConstInt(L->i32, (unsigned)n, 0), LLVMConstInt(L->i32, (unsigned)g->n_state_weights, 0), tab,
                       LLVMConstInt(L->i32, (unsigned)g->state_in_place, 0)};
  snprintf(name, sizeof name, "%s_state", L->name);
  return lv_const_global(L, LLVMConstStructInContext(L->c, f, 4, 0), name, LLVMInternalLinkage);
}

/* NAME_model (a primc_model_desc) and NAME_workspace_size */
static void emit_model_desc(lctx *L, const llvm_emit_opts *o, LLVMValueRef run, LLVMValueRef lw, LLVMValueRef od) {
  const pc_graph *g = L->p->g;
  char name[LLVM_SYM_MAX];
  LLVMValueRef in_descs = lv_emit_descs(L, g->inputs, g->n_inputs, "in");
  LLVMValueRef dims = lv_emit_dims_desc(L, in_descs);
  LLVMValueRef run_dims = emit_run_dims(L, run, dims);
  lv_emit_check_dims(L, dims);
  if (L->p->dyn) { /* NAME_run is now NAME_run_dims at the bounds */
    snprintf(name, sizeof name, "%s_run", L->name);
    run = LLVMGetNamedFunction(L->m, name);
  }
  lv_model_desc m = {run, lw, L->p->workspace_size, in_descs, lv_emit_descs(L, g->outputs, g->n_outputs, "out"),
                     L->profile ? L->profile : LLVMConstNull(L->ptr), od, dims, run_dims, lv_emit_state_desc(L)};
  lv_emit_model_desc(L, &m, o->main_alias);
}

void lv_emit_model_desc(lctx *L, const lv_model_desc *m, int main_alias) {
  const pc_graph *g = L->p->g;
  char name[LLVM_SYM_MAX];
  LLVMValueRef f[14] = {lv_cstring(L, L->name), m->run, m->load_weights, ci64(L, m->workspace_size), ci64(L, 64),
                        LLVMConstInt(L->i32, (unsigned)g->n_inputs, 0), LLVMConstInt(L->i32, (unsigned)g->n_outputs, 0),
                        m->inputs, m->outputs, m->profile, m->output_dims, m->dims, m->run_dims, m->state};
  LLVMValueRef init = LLVMConstStructInContext(L->c, f, 14, 0);
  snprintf(name, sizeof name, "%s_model", L->name);
  LLVMValueRef gv = lv_const_global(L, init, name, LLVMExternalLinkage);
  snprintf(name, sizeof name, "%s_workspace_size", L->name);
  lv_const_global(L, ci64(L, m->workspace_size), name, LLVMExternalLinkage);
  if (main_alias) lv_const_global(L, gv, "primc_main_model", LLVMExternalLinkage);
}

/* ---------------------------------------------------------------- module */

/* LLVM's diagnostics: remarks and warnings dropped (library code prints nothing; a loop given a vector width that
 * it cannot take is a remark, llvm_kernel.c's f16_width), the first error kept for pc_llvm_emit to return (the
 * default handler prints it and exits) */
static void on_diagnostic(LLVMDiagnosticInfoRef d, void *ctx) {
  lctx *L = ctx;
  if (LLVMGetDiagInfoSeverity(d) != LLVMDSError || L->diag_error[0]) return;
  char *m = LLVMGetDiagInfoDescription(d);
  snprintf(L->diag_error, sizeof L->diag_error, "%s", m && *m ? m : "unknown error");
  LLVMDisposeMessage(m);
}

void lv_init(lctx *L, const kir_program *p, const char *name) {
  L->c = LLVMContextCreate();
  LLVMContextSetDiagnosticHandler(L->c, on_diagnostic, L);
  L->m = LLVMModuleCreateWithNameInContext(name, L->c);
  L->b = LLVMCreateBuilderInContext(L->c);
  L->p = p;
  L->g = p->g;
  L->name = name;
  L->i1 = LLVMInt1TypeInContext(L->c);
  L->i8 = LLVMInt8TypeInContext(L->c);
  L->i16 = LLVMInt16TypeInContext(L->c);
  L->i32 = LLVMInt32TypeInContext(L->c);
  L->i64 = LLVMInt64TypeInContext(L->c);
  L->f16 = LLVMHalfTypeInContext(L->c);
  L->f32 = LLVMFloatTypeInContext(L->c);
  L->f64 = LLVMDoubleTypeInContext(L->c);
  L->ptr = LLVMPointerTypeInContext(L->c, 0);
  L->voidt = LLVMVoidTypeInContext(L->c);
  L->bufp = calloc((size_t)p->n_bufs + 1, sizeof *L->bufp);
}

void lv_free(lctx *L) {
  free(L->bufp);
  LLVMDisposeBuilder(L->b);
  LLVMDisposeModule(L->m);
  LLVMContextDispose(L->c);
}

static int expr_supported(const kir_expr *e) {
  if (e->dtype == PC_c64 && e->kind != KE_LOAD && e->kind != KE_CONST) return 0;
  if (e->kind == KE_PRIM && !lv_ew_rule(e->op)) return 0;
  for (int i = 0; i < e->n_args; i++)
    if (!expr_supported(e->args[i]) || e->args[i]->dtype == PC_c64) return 0;
  return 1;
}

static pc_status check_program(const kir_program *p) {
  for (int i = 0; i < p->n_kernels; i++) {
    const kir_kernel *k = &p->kernels[i];
    for (int s = 0; k->kind == KK_LOOP && s < k->n_stores; s++)
      if (!expr_supported(k->stores[s].value)) {
        if (k->n_nodes) return pc_node_fail(p->g, k->nodes[0], PC_ERR_UNSUPPORTED, "dtype or op not supported by the LLVM renderer");
        return pc_fail(p->g, PC_ERR_UNSUPPORTED, "kernel %d not supported by the LLVM renderer", i);
      }
  }
  return PC_OK;
}

LLVMTargetMachineRef lv_target_machine(pc_graph *g, const llvm_emit_opts *o) {
  LLVMInitializeAllTargetInfos();
  LLVMInitializeAllTargets();
  LLVMInitializeAllTargetMCs();
  LLVMInitializeAllAsmPrinters();
  char *host = LLVMGetDefaultTargetTriple();
  char *triple = o->triple ? LLVMNormalizeTargetTriple(o->triple) : host;
  int native = !o->triple && !o->cpu;
  char *cpu = native ? LLVMGetHostCPUName() : NULL;
  char *feat = native ? LLVMGetHostCPUFeatures() : NULL;
  LLVMTargetRef t = NULL;
  char *err = NULL;
  LLVMTargetMachineRef tm = NULL;
  if (LLVMGetTargetFromTriple(triple, &t, &err)) {
    pc_fail(g, PC_ERR_UNSUPPORTED, "target \"%s\": %s", triple, err ? err : "unknown");
  } else {
    LLVMCodeGenOptLevel lvl = o->opt_level <= 0 ? LLVMCodeGenLevelNone : o->opt_level >= 3 ? LLVMCodeGenLevelAggressive
                                                                                           : LLVMCodeGenLevelDefault;
    tm = LLVMCreateTargetMachine(t, triple, native ? cpu : o->cpu ? o->cpu : "generic",
                                 native ? feat : o->features ? o->features : "", lvl, LLVMRelocPIC,
                                 LLVMCodeModelDefault);
    if (!tm) pc_fail(g, PC_ERR_UNSUPPORTED, "cannot create a target machine for \"%s\"", triple);
  }
  LLVMDisposeMessage(err);
  if (triple != host) LLVMDisposeMessage(triple);
  LLVMDisposeMessage(host);
  LLVMDisposeMessage(cpu);
  LLVMDisposeMessage(feat);
  return tm;
}

pc_status lv_emit_file(lctx *L, LLVMTargetMachineRef tm, const llvm_emit_opts *o) {
  char *err = NULL;
  pc_status s = PC_OK;
  if (o->kind == LLVM_OUT_IR) {
    if (LLVMPrintModuleToFile(L->m, o->path, &err)) s = pc_fail(L->g, PC_ERR_IO, "%s: %s", o->path, err);
  } else {
    LLVMCodeGenFileType ft = o->kind == LLVM_OUT_ASM ? LLVMAssemblyFile : LLVMObjectFile;
    if (LLVMTargetMachineEmitToFile(tm, L->m, o->path, ft, &err)) s = pc_fail(L->g, PC_ERR_IO, "%s: %s", o->path, err);
  }
  LLVMDisposeMessage(err);
  return s;
}

/* cpu and features on every defined function, and full-width vectors where AVX-512 is
 * there: LLVM's host tuning (this Zen 5 reports "rocketlake") otherwise prefers 256 bits */
void lv_set_function_attrs(lctx *L, LLVMTargetMachineRef tm) {
  char *cpu = LLVMGetTargetMachineCPU(tm), *feat = LLVMGetTargetMachineFeatureString(tm);
  int avx512 = strstr(feat, "+avx512f") != NULL;
  for (LLVMValueRef f = LLVMGetFirstFunction(L->m); f; f = LLVMGetNextFunction(f)) {
    if (LLVMIsDeclaration(f)) continue;
    const char *kv[3][2] = {{"target-cpu", cpu}, {"target-features", feat}, {"prefer-vector-width", "512"}};
    for (int i = 0; i < (avx512 ? 3 : 2); i++)
      LLVMAddAttributeAtIndex(f, LLVMAttributeFunctionIndex,
                              LLVMCreateStringAttribute(L->c, kv[i][0], (unsigned)strlen(kv[i][0]), kv[i][1],
                                                        (unsigned)strlen(kv[i][1])));
  }
  LLVMDisposeMessage(cpu);
  LLVMDisposeMessage(feat);
}

void lv_set_target(lctx *L, LLVMTargetMachineRef tm) {
  char *trip = LLVMGetTargetMachineTriple(tm);
  LLVMSetTarget(L->m, trip);
  LLVMDisposeMessage(trip);
  LLVMTargetDataRef td = LLVMCreateTargetDataLayout(tm);
  LLVMSetModuleDataLayout(L->m, td);
  LLVMDisposeTargetData(td);
}

pc_status pc_llvm_emit(const kir_program *p, const llvm_emit_opts *o) {
  pc_graph *g = p->g;
  pc_status s = check_program(p);
  if (s != PC_OK) return s;
  LLVMTargetMachineRef tm = lv_target_machine(g, o);
  if (!tm) return g->status;
  lctx L;
  memset(&L, 0, sizeof L);
  lv_init(&L, p, o->name);
  char *feat = LLVMGetTargetMachineFeatureString(tm);
  L.f16_native = strstr(feat, "+avx512fp16") || strstr(feat, "+fullfp16");
  char *trip = LLVMGetTargetMachineTriple(tm);
  /* x86: a zmm of floats where the features say AVX-512 (a host build), else a ymm (a CPU named by --cpu comes
   * without its features; an 8-lane vector on SSE alone is two xmm) */
  if (!strncmp(trip, "x86_64", 6) || (trip[0] == 'i' && strstr(trip, "86-"))) L.f16_vf = strstr(feat, "+avx512f") ? 16 : 8;
  LLVMDisposeMessage(feat);
  LLVMDisposeMessage(trip);
  lv_set_target(&L, tm);
  LLVMValueRef *kfns = calloc((size_t)p->n_kernels + 1, sizeof *kfns);
  for (int i = 0; i < p->n_kernels; i++) {
    if (p->kernels[i].kind == KK_LOOP) kfns[i] = lv_emit_loop_kernel(&L, i);
    if (i % 64 == 63 || i == p->n_kernels - 1) pc_progress(o->report, "LLVM IR", i + 1, p->n_kernels);
  }
  if (o->profile) L.profile = emit_profile_table(&L, o);
  LLVMValueRef run = emit_run(&L, o, kfns);
  LLVMValueRef lw = emit_load_weights(&L, o);
  LLVMValueRef od = emit_output_dims(&L);
  emit_model_desc(&L, o, run, lw, od);
  lv_set_function_attrs(&L, tm);
  free(kfns);
  char *err = NULL;
  if (s == PC_OK && g->status) s = g->status; /* an emitter out of memory */
  if (LLVMVerifyModule(L.m, LLVMReturnStatusAction, &err) && s == PC_OK)
    s = pc_fail(g, PC_ERR_INTERNAL, "LLVM verifier: %.400s", err);
  LLVMDisposeMessage(err);
  if (s == PC_OK) {
    LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
    LLVMPassBuilderOptionsSetLoopVectorization(po, o->opt_level >= 2);
    LLVMPassBuilderOptionsSetSLPVectorization(po, o->opt_level >= 2);
    char pipeline[32];
    snprintf(pipeline, sizeof pipeline, "default<O%d>", o->opt_level < 0 ? 0 : o->opt_level > 3 ? 3 : o->opt_level);
    pc_progress(o->report, "LLVM optimization", 0, 0);
    LLVMErrorRef e = LLVMRunPasses(L.m, pipeline, tm, po);
    if (e) {
      char *msg = LLVMGetErrorMessage(e);
      s = pc_fail(g, PC_ERR_INTERNAL, "LLVM passes: %s", msg);
      LLVMDisposeErrorMessage(msg);
    }
    LLVMDisposePassBuilderOptions(po);
  }
  if (s == PC_OK) pc_progress(o->report, "machine code", 0, 0);
  if (s == PC_OK) s = lv_emit_file(&L, tm, o);
  if (s == PC_OK && L.diag_error[0]) s = pc_fail(g, PC_ERR_INTERNAL, "LLVM: %s", L.diag_error);
  lv_free(&L);
  LLVMDisposeTargetMachine(tm);
  return s;
}
