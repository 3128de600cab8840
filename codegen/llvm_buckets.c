/* codegen/llvm_buckets.c: the dispatcher of range dims in buckets (--dim NAME=LO..HI:STEP) as an object: the model
 * NAME, whose entry points run the bucket programs NAME__bK (each an object of its own) through the runtime's
 * primc_buckets_run_dims, and which holds the buckets' weights pool. */
#include "codegen/llvm_internal.h"
#include "runtime/primc_rt.h"

#include <llvm-c/Analysis.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* a function NAME_SUFFIX(params) whose body returns call(fn, args): args are the params, a NULL put at null_at
 * (-1: none), the bucket table first */
static LLVMValueRef forward(lctx *L, const char *suffix, LLVMTypeRef ret, LLVMTypeRef *pt, int n, const char *fn,
                            LLVMValueRef table, int null_at) {
  char name[LLVM_SYM_MAX];
  snprintf(name, sizeof name, "%s_%s", L->name, suffix);
  LLVMValueRef f = LLVMAddFunction(L->m, name, LLVMFunctionType(ret, pt, (unsigned)n, 0));
  L->fn = f;
  LLVMPositionBuilderAtEnd(L->b, LLVMAppendBasicBlockInContext(L->c, f, "entry"));
  LLVMTypeRef ct[8];
  LLVMValueRef args[8];
  int k = 0, q = 0;
  ct[k] = L->ptr, args[k++] = table;
  for (int i = 0; i < n + (null_at >= 0); i++) {
    if (i == null_at) ct[k] = L->ptr, args[k++] = LLVMConstNull(L->ptr);
    else ct[k] = pt[q], args[k++] = LLVMGetParam(f, (unsigned)q), q++;
  }
  LLVMBuildRet(L->b, lv_call_fn(L, fn, ret, ct, args, (unsigned)k));
  return f;
}

/* NAME_weights_base, which the buckets' objects read (hidden: theirs to link, not exported), and
 * NAME_load_weights(path) mapping the side file of size payload bytes into it */
static LLVMValueRef load_weights(lctx *L, int64_t size) {
  char name[LLVM_SYM_MAX];
  snprintf(name, sizeof name, "%s_weights_base", L->name);
  LLVMValueRef base = LLVMAddGlobal(L->m, L->ptr, name);
  LLVMSetInitializer(base, LLVMConstNull(L->ptr));
  LLVMSetVisibility(base, LLVMHiddenVisibility);
  return lv_emit_load_weights(L, base, size);
}

/* NAME_weights_pool, the buckets' weights, declared (hidden) and kept by a reference so that the object holds it
 * undefined: kir_elf_append defines it with the pool's bytes after LLVM wrote the object */
static void pool(lctx *L, int64_t size) {
  char name[LLVM_SYM_MAX];
  snprintf(name, sizeof name, "%s_weights_pool", L->name);
  LLVMValueRef gv = LLVMAddGlobal(L->m, LLVMArrayType2(L->i8, (uint64_t)size), name);
  LLVMSetGlobalConstant(gv, 1);
  LLVMSetVisibility(gv, LLVMHiddenVisibility);
  LLVMSetAlignment(gv, 64);
  snprintf(name, sizeof name, "%s_weights_pool_ref", L->name);
  LLVMValueRef ref = LLVMAddGlobal(L->m, L->ptr, name);
  LLVMSetInitializer(ref, gv);
  LLVMSetGlobalConstant(ref, 1);
  LLVMSetVisibility(ref, LLVMHiddenVisibility);
}

static void build(lctx *L, const kir_buckets *b, const llvm_emit_opts *o) {
  const pc_graph *g = L->p->g;
  char name[LLVM_SYM_MAX];
  int S = b->full->n_syms;
  LLVMValueRef *models = calloc((size_t)b->n, sizeof *models), *los = calloc((size_t)(b->n * S), sizeof *los),
               *his = calloc((size_t)(b->n * S), sizeof *his);
  if (!models || !los || !his) {
    free(models), free(los), free(his);
    pc_fail(L->g, PC_ERR_NOMEM, "out of memory");
    return;
  }
  for (int k = 0; k < b->n; k++) { /* NAME__bK_model, defined by bucket K's object */
    snprintf(name, sizeof name, "%s__b%d_model", L->name, k);
    models[k] = LLVMAddGlobal(L->m, L->i8, name);
    for (int s = 0; s < S; s++) los[k * S + s] = ci64(L, b->b[k].lo[s]), his[k * S + s] = ci64(L, b->b[k].hi[s]);
  }
  snprintf(name, sizeof name, "%s_bucket_models", L->name);
  LLVMValueRef mtab = lv_const_global(L, LLVMConstArray2(L->ptr, models, (uint64_t)b->n), name, LLVMPrivateLinkage);
  snprintf(name, sizeof name, "%s_bucket_lo", L->name);
  LLVMValueRef ltab = lv_const_global(L, LLVMConstArray2(L->i64, los, (uint64_t)(b->n * S)), name, LLVMPrivateLinkage);
  snprintf(name, sizeof name, "%s_bucket_hi", L->name);
  LLVMValueRef htab = lv_const_global(L, LLVMConstArray2(L->i64, his, (uint64_t)(b->n * S)), name, LLVMPrivateLinkage);
  free(models), free(los), free(his);
  LLVMValueRef in_descs = lv_emit_descs(L, g->inputs, g->n_inputs, "in");
  LLVMValueRef dims = lv_emit_dims_desc(L, in_descs);
  lv_emit_check_dims(L, dims);
  LLVMValueRef bf[5] = {LLVMConstInt(L->i32, (unsigned)b->n, 0), ltab, htab, mtab, dims};
  snprintf(name, sizeof name, "%s_buckets", L->name);
  LLVMValueRef table = lv_const_global(L, LLVMConstStructInContext(L->c, bf, 5, 0), name, LLVMInternalLinkage);
  LLVMTypeRef p4[4] = {L->ptr, L->ptr, L->ptr, L->ptr}, od[3] = {L->ptr, L->i32, L->ptr};
  LLVMValueRef run_dims = forward(L, "run_dims", L->i32, p4, 4, "primc_buckets_run_dims", table, -1);
  LLVMValueRef run = forward(L, "run", L->i32, p4, 3, "primc_buckets_run_dims", table, 1); /* at the bounds */
  LLVMValueRef out_dims = forward(L, "output_dims", L->i32, od, 3, "primc_buckets_output_dims", table, -1);
  /* with --profile every bucket's kernels, which count into it; with --weights external the side file every bucket
   * reads; a training step's state as the buckets share it */
  LLVMValueRef none = LLVMConstNull(L->ptr), prof = b->prof ? lv_emit_profile(L, b->prof, b->n_prof) : none;
  LLVMValueRef load = b->weights_file >= 0 ? load_weights(L, b->weights_file) : none;
  if (b->pool_size > 0) pool(L, b->pool_size);
  lv_model_desc m = {run, load, b->workspace_size, in_descs, lv_emit_descs(L, g->outputs, g->n_outputs, "out"),
                     prof ? prof : none, out_dims, dims, run_dims, lv_emit_state_desc(L)};
  lv_emit_model_desc(L, &m, o->main_alias);
}

pc_status pc_llvm_emit_buckets(const kir_program *top, const kir_buckets *b, const llvm_emit_opts *o) {
  pc_graph *g = top->g;
  LLVMTargetMachineRef tm = lv_target_machine(g, o);
  if (!tm) return g->status;
  kir_program p = *top; /* its inputs and outputs; the dims of the whole ranges */
  p.dyn = b->full;
  lctx L;
  memset(&L, 0, sizeof L);
  lv_init(&L, &p, o->name);
  lv_set_target(&L, tm);
  build(&L, b, o);
  lv_set_function_attrs(&L, tm);
  pc_status s = g->status;
  char *err = NULL;
  if (LLVMVerifyModule(L.m, LLVMReturnStatusAction, &err) && s == PC_OK)
    s = pc_fail(g, PC_ERR_INTERNAL, "LLVM verifier (bucket dispatcher): %.400s", err);
  LLVMDisposeMessage(err);
  if (s == PC_OK) s = lv_emit_file(&L, tm, o);
  lv_free(&L);
  LLVMDisposeTargetMachine(tm);
  return s;
}
