/* codegen/llvm_kernel.c: loop kernels in LLVM IR: loop nests, reductions, and each kernel's body and
 * thread-pool entry functions. */
#include "codegen/llvm_internal.h"

#include <llvm-c/DebugInfo.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- loops */

LLVMValueRef lv_entry_alloca(lctx *L, LLVMTypeRef t) {
  LLVMBasicBlockRef cur = LLVMGetInsertBlock(L->b);
  LLVMBasicBlockRef entry = LLVMGetEntryBasicBlock(L->fn);
  LLVMValueRef first = LLVMGetFirstInstruction(entry);
  if (first) LLVMPositionBuilderBefore(L->b, first);
  else LLVMPositionBuilderAtEnd(L->b, entry);
  LLVMValueRef a = LLVMBuildAlloca(L->b, t, "");
  LLVMPositionBuilderAtEnd(L->b, cur);
  return a;
}

typedef struct loop {
  LLVMValueRef var;
  LLVMBasicBlockRef cond, exit;
  LLVMValueRef hi;
} loop;

static loop loop_begin(lctx *L, int k, LLVMValueRef lo, LLVMValueRef hi) {
  loop l = {lv_entry_alloca(L, L->i64), NULL, NULL, hi};
  LLVMBuildStore(L->b, lo, l.var);
  l.cond = LLVMAppendBasicBlockInContext(L->c, L->fn, "cond");
  LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(L->c, L->fn, "body");
  l.exit = LLVMAppendBasicBlockInContext(L->c, L->fn, "exit");
  LLVMBuildBr(L->b, l.cond);
  LLVMPositionBuilderAtEnd(L->b, l.cond);
  LLVMValueRef i = LLVMBuildLoad2(L->b, L->i64, l.var, "i");
  LLVMBuildCondBr(L->b, LLVMBuildICmp(L->b, LLVMIntSLT, i, hi, ""), body, l.exit);
  LLVMPositionBuilderAtEnd(L->b, body);
  L->iv[k] = i;
  return l;
}

/* the loop's latch: its branch back to cond */
static LLVMValueRef loop_end(lctx *L, loop *l) {
  LLVMValueRef i = LLVMBuildLoad2(L->b, L->i64, l->var, "");
  LLVMBuildStore(L->b, LLVMBuildNSWAdd(L->b, i, ci64(L, 1), ""), l->var);
  LLVMValueRef latch = LLVMBuildBr(L->b, l->cond);
  LLVMPositionBuilderAtEnd(L->b, l->exit);
  return latch;
}

/* The latch of an innermost reduced loop of 16 to 64 iterations (its branch back to cond) gets
 * llvm.loop.unroll.disable: such a loop (a 7x7 global average pool's 49) is otherwise unrolled whole
 * before the vectorizer runs, which then vectorizes the channel loop around it with one 16-lane gather
 * per element (MobileNetV2's 1280x49 pool: 15.5 -> 3 us on 1 thread; EfficientNet-B0's 17 pools
 * 144 -> 82 us). Longer loops are not unrolled whole anyway, and leaving the unroller off them cost
 * ViT-Tiny's layer norms and softmaxes 30% (610 -> 800 us); shorter ones are best unrolled. */
#define NO_UNROLL_MIN 16
#define NO_UNROLL_MAX 64

/* the loads of e whose stride along loop l is unit (*unit; of dtype only, unless only is PC_DTYPE_COUNT) or
 * neither 0 nor 1, or follows run-time dims (*other) */
static void load_strides(const kir_program *p, const kir_expr *e, int l, pc_dtype only, int *unit, int *other) {
  if (e->kind == KE_LOAD) {
    int64_t st = e->map.stride[l];
    *unit |= st == 1 && (only == PC_DTYPE_COUNT || e->dtype == only);
    *other |= (st != 0 && st != 1) || kir_dyn_poly(p, &e->map.stride[l]) != NULL;
  }
  for (int i = 0; i < e->n_args; i++) load_strides(p, e->args[i], l, only, unit, other);
}

/* LLVM 19's x86 cost model prices a half <-> float conversion of 8 or 16 lanes as if scalarized (22 and 46
 * against 1 for 4 lanes, `opt -passes='print<cost-model>'`) although F16C and AVX-512 convert a whole ymm or zmm
 * in one instruction, so every loop over f16 data ran on 4 lanes of xmm (an f16 softmax 2.4x the f32 one's time
 * on Zen 3). A loop whose f16 loads or stores move by 1 along it, and no access by more (no gathers), gets the
 * target's width (lctx.f16_vf); 0: leave it to the cost model */
static int f16_width(const lctx *L, const kir_kernel *k, int l, int stores_inside) {
  int f16_unit = 0, other = 0;
  if (!L->f16_vf) return 0;
  for (int s = 0; s < k->n_stores; s++) {
    const kir_store *st = &k->stores[s];
    load_strides(L->p, st->value, l, PC_f16, &f16_unit, &other);
    if (!stores_inside) continue;
    int64_t sd = st->map.stride[l];
    other |= (sd != 0 && sd != 1) || kir_dyn_poly(L->p, &st->map.stride[l]) != NULL;
    f16_unit |= sd == 1 && L->p->bufs[st->buf].dtype == PC_f16;
  }
  return f16_unit && !other ? L->f16_vf : 0;
}

static LLVMMetadataRef md_string(lctx *L, const char *s) {
  LLVMMetadataRef str = LLVMMDStringInContext2(L->c, s, strlen(s));
  return LLVMMDNodeInContext2(L->c, &str, 1);
}

/* llvm.loop metadata on a loop's latch: unrolling off (no_unroll), a vector width (width > 0) */
static void loop_md(lctx *L, LLVMValueRef latch, int no_unroll, int width) {
  if (!no_unroll && !width) return;
  LLVMMetadataRef ops[3];
  int n = 0;
  ops[n++] = LLVMTemporaryMDNode(L->c, NULL, 0);
  if (no_unroll) ops[n++] = md_string(L, "llvm.loop.unroll.disable");
  if (width) {
    LLVMMetadataRef w[2] = {LLVMMDStringInContext2(L->c, "llvm.loop.vectorize.width", 25),
                            LLVMValueAsMetadata(LLVMConstInt(L->i32, (unsigned long long)width, 0))};
    ops[n++] = LLVMMDNodeInContext2(L->c, w, 2); /* a hint, not vectorize.enable: no warning where it cannot */
  }
  LLVMMetadataRef md = LLVMMDNodeInContext2(L->c, ops, (size_t)n);
  LLVMMetadataReplaceAllUsesWith(ops[0], md);
  LLVMSetMetadata(latch, LLVMGetMDKindIDInContext(L->c, "llvm.loop", 9), LLVMMetadataAsValue(L->c, md));
}

/* accumulator start value of a reduction */
static LLVMValueRef red_init(lctx *L, kir_red r, pc_dtype t) {
  LLVMTypeRef ty = T(L, t);
  int is_max = r == KR_MAX || r == KR_ARGMAX, f = pc_dtype_is_float(t);
  if (r == KR_SUM) return LLVMConstNull(ty);
  if (r == KR_PROD) return f ? fconst(ty, 1) : LLVMConstInt(ty, 1, 0);
  if (f) return fconst(ty, is_max ? -__builtin_inf() : __builtin_inf());
  unsigned w = LLVMGetIntTypeWidth(ty);
  unsigned long long smax = (w == 64 ? ~0ull : ((1ull << w) - 1)) >> 1;
  if (dt_unsigned(t)) return is_max ? LLVMConstNull(ty) : LLVMConstAllOnes(ty);
  return is_max ? LLVMConstInt(ty, ~smax, 1) : LLVMConstInt(ty, smax, 0);
}

/* is x a better argmax/argmin candidate than best (NaN wins, first NaN kept) */
static LLVMValueRef arg_better(lctx *L, const kir_store *s, pc_dtype t, LLVMValueRef x, LLVMValueRef best) {
  int is_max = s->red == KR_ARGMAX, f = pc_dtype_is_float(t);
  if (f) {
    LLVMRealPredicate pr = is_max ? (s->arg_last ? LLVMRealOGE : LLVMRealOGT) : (s->arg_last ? LLVMRealOLE : LLVMRealOLT);
    LLVMValueRef c = LLVMBuildFCmp(L->b, pr, x, best, "");
    LLVMValueRef xn = LLVMBuildFCmp(L->b, LLVMRealUNO, x, x, ""), bn = LLVMBuildFCmp(L->b, LLVMRealUNO, best, best, "");
    LLVMValueRef nan_first = LLVMBuildAnd(L->b, xn, LLVMBuildNot(L->b, bn, ""), "");
    return LLVMBuildOr(L->b, c, nan_first, "");
  }
  int u = dt_unsigned(t);
  LLVMIntPredicate pr = is_max ? (s->arg_last ? (u ? LLVMIntUGE : LLVMIntSGE) : (u ? LLVMIntUGT : LLVMIntSGT))
                               : (s->arg_last ? (u ? LLVMIntULE : LLVMIntSLE) : (u ? LLVMIntULT : LLVMIntSLT));
  return LLVMBuildICmp(L->b, pr, x, best, "");
}

static LLVMValueRef red_combine(lctx *L, kir_red r, pc_dtype t, LLVMValueRef acc, LLVMValueRef x) {
  LLVMValueRef a[2] = {acc, x};
  static const pc_op comb[] = {[KR_SUM] = PC_OP_add, [KR_PROD] = PC_OP_mul, [KR_MAX] = PC_OP_max, [KR_MIN] = PC_OP_min};
  /* float max/min reductions keep the intrinsics: the vectorizer splits those into lanes */
  int fminmax = pc_dtype_is_float(t) && (r == KR_MAX || r == KR_MIN);
  LLVMValueRef v = fminmax ? lv_intrinsic(L, r == KR_MAX ? "llvm.maximum" : "llvm.minimum", T(L, t), a, 2)
                            : lv_ew_rule(comb[r])(L, t, a);
  /* sums and products may be reassociated so the vectorizer can split them into lanes; the
   * order is still fixed at compile time, so results do not depend on threads or runs */
  if (pc_dtype_is_float(t) && (r == KR_SUM || r == KR_PROD) && LLVMIsAInstruction(v))
    LLVMSetFastMathFlags(v, LLVMFastMathAllowReassoc);
  return v; /* a half accumulator stays in float until the store: prims.def accumulates wide, rounds once */
}

/* reduced loops around the stores' expressions, then the stores */
static void emit_reduction(lctx *L, const kir_kernel *k) {
  LLVMValueRef acc[KIR_MAX_ARGS], idx[KIR_MAX_ARGS];
  for (int s = 0; s < k->n_stores; s++) {
    pc_dtype t = k->stores[s].value->dtype;
    acc[s] = lv_entry_alloca(L, T(L, t));
    idx[s] = lv_entry_alloca(L, L->i64);
    LLVMBuildStore(L->b, red_init(L, k->stores[s].red, t), acc[s]);
    LLVMBuildStore(L->b, ci64(L, 0), idx[s]);
  }
  loop loops[KIR_MAX_LOOPS];
  for (int l = k->n_par; l < k->n_loops; l++) loops[l] = loop_begin(L, l, ci64(L, 0), lv_size(L, &k->extent[l]));
  for (int s = 0; s < k->n_stores; s++) {
    const kir_store *st = &k->stores[s];
    pc_dtype t = st->value->dtype;
    LLVMValueRef x = lv_emit_expr(L, st->value, k->n_loops);
    LLVMValueRef cur = LLVMBuildLoad2(L->b, T(L, t), acc[s], "");
    if (st->red == KR_ARGMAX || st->red == KR_ARGMIN) {
      LLVMValueRef better = arg_better(L, st, t, x, cur);
      LLVMValueRef ci = LLVMBuildLoad2(L->b, L->i64, idx[s], "");
      LLVMBuildStore(L->b, LLVMBuildSelect(L->b, better, x, cur, ""), acc[s]);
      LLVMBuildStore(L->b, LLVMBuildSelect(L->b, better, L->iv[st->arg_loop], ci, ""), idx[s]);
    } else {
      LLVMBuildStore(L->b, red_combine(L, st->red, t, cur, x), acc[s]);
    }
  }
  for (int l = k->n_loops - 1; l >= k->n_par; l--) {
    LLVMValueRef i = LLVMBuildLoad2(L->b, L->i64, loops[l].var, "");
    LLVMBuildStore(L->b, LLVMBuildNSWAdd(L->b, i, ci64(L, 1), ""), loops[l].var);
    LLVMValueRef latch = LLVMBuildBr(L->b, loops[l].cond);
    if (l == k->n_loops - 1)
      loop_md(L, latch, k->extent[l] >= NO_UNROLL_MIN && k->extent[l] <= NO_UNROLL_MAX, f16_width(L, k, l, 0));
    LLVMPositionBuilderAtEnd(L->b, loops[l].exit);
  }
  for (int s = 0; s < k->n_stores; s++) {
    const kir_store *st = &k->stores[s];
    int arg = st->red == KR_ARGMAX || st->red == KR_ARGMIN;
    pc_dtype t = arg ? PC_i64 : st->value->dtype;
    LLVMValueRef v = LLVMBuildLoad2(L->b, T(L, t), arg ? idx[s] : acc[s], "");
    lv_store_value(L, st, t, v, k->n_par);
  }
}

/* ---------------------------------------------------------------- kernel functions */

static void mark_loads(const kir_expr *e, char *used) {
  if (e->kind == KE_LOAD) used[e->buf] = 1;
  for (int i = 0; i < e->n_args; i++) mark_loads(e->args[i], used);
}

static int same_start(const kir_buf *a, const kir_buf *b) {
  if (a->place != b->place) return 0;
  return a->place == KP_WORKSPACE || a->place == KP_CONST ? a->offset == b->offset : a->index == b->index;
}

/* ---------------------------------------------------------------- column reductions */

static int reads_buf(const kir_program *p, const kir_expr *e, int buf) {
  if (e->kind == KE_LOAD && kir_bufs_overlap(p, e->buf, buf)) return 1;
  for (int i = 0; i < e->n_args; i++)
    if (reads_buf(p, e->args[i], buf)) return 1;
  return 0;
}

/* some load of e moves by 1 along loop r and also along loop c: contiguous within the reduction (a per-row
 * value, still along r but fixed along c, is not) */
static int moves_along_both(const kir_expr *e, int r, int c) {
  if (e->kind == KE_LOAD && e->map.stride[r] == 1 && e->map.stride[c] != 0) return 1;
  for (int i = 0; i < e->n_args; i++)
    if (moves_along_both(e->args[i], r, c)) return 1;
  return 0;
}

/* A reduction over rows whose columns are the innermost parallel loop P: a bias's gradient, [rows][cols] summed
 * over rows. Reduced innermost, each output walks a column at the row pitch, a scalar load per element that
 * every cache set of a power-of-two pitch conflicts on (1024 x 1024 f32: 6.7 ms). This form keeps the outputs
 * in memory instead: a pass sets them to the start value, then the reduced loops go outside and P inside,
 * each row added to the outputs a vector at a time, contiguous. Each output still takes its terms in the same
 * order. Taken when every load and store moves by 0 or 1 along P (some load by 1), some load strides along
 * the innermost reduced loop and none moves by 1 along both (a row reduction keeps its accumulators; a per-row
 * value such as a layer norm's mean, by 1 along the rows only, does not count), sums, products, max or min of
 * f32 or f64 into a buffer no expression reads, and sizes fixed at compile time. */
static int column_reduction(const kir_program *p, const kir_kernel *k) {
  int P = k->n_par - 1, R = k->n_loops - 1;
  if (p->dyn || P < 0 || R <= P || k->extent[P] < 16) return 0;
  for (int s = 0; s < k->n_stores; s++) {
    const kir_store *st = &k->stores[s];
    pc_dtype t = st->value->dtype;
    int unit_p = 0, other_p = 0, unit_r = 0, other_r = 0;
    load_strides(p, st->value, P, PC_DTYPE_COUNT, &unit_p, &other_p);
    load_strides(p, st->value, R, PC_DTYPE_COUNT, &unit_r, &other_r);
    if ((st->red != KR_SUM && st->red != KR_PROD && st->red != KR_MAX && st->red != KR_MIN) ||
        (t != PC_f32 && t != PC_f64) || p->bufs[st->buf].dtype != t || st->map.stride[P] != 1 || !unit_p ||
        other_p || !other_r || moves_along_both(st->value, R, P) || reads_buf(p, st->value, st->buf))
      return 0;
  }
  return 1;
}

static void emit_column_reduction(lctx *L, const kir_kernel *k, LLVMValueRef lo, LLVMValueRef hi) {
  int P = k->n_par - 1;
  loop c = loop_begin(L, P, lo, hi);
  for (int s = 0; s < k->n_stores; s++) {
    pc_dtype t = k->stores[s].value->dtype;
    lv_store_value(L, &k->stores[s], t, red_init(L, k->stores[s].red, t), k->n_par);
  }
  loop_end(L, &c);
  loop loops[KIR_MAX_LOOPS];
  for (int l = k->n_par; l < k->n_loops; l++) loops[l] = loop_begin(L, l, ci64(L, 0), lv_size(L, &k->extent[l]));
  c = loop_begin(L, P, lo, hi);
  for (int s = 0; s < k->n_stores; s++) {
    const kir_store *st = &k->stores[s];
    pc_dtype t = st->value->dtype;
    LLVMValueRef x = lv_emit_expr(L, st->value, k->n_loops);
    lv_store_value(L, st, t, red_combine(L, st->red, t, lv_store_load(L, st, t, k->n_par), x), k->n_par);
  }
  loop_end(L, &c);
  for (int l = k->n_loops - 1; l >= k->n_par; l--) loop_end(L, &loops[l]);
}

/* Some store moves along loop l by neither 0 nor 1: vectorized, each vector store would be a scatter, which x86
 * CPUs run an element at a time and slower than scalar stores. LLVM still chose them where a short inner loop
 * was unrolled whole, vectorizing the loop around it with gathers and scatters (a training step's flipped
 * conv weights, [O, C, 3, 3] -> [C, O, 3, 3]: 1.5 ns an element), so the loop gets vectorize.width 1. */
static int scatters(const kir_program *p, const kir_kernel *k, int l) {
  for (int s = 0; s < k->n_stores; s++) {
    int64_t sd = k->stores[s].map.stride[l];
    if ((sd != 0 && sd != 1) || kir_dyn_poly(p, &k->stores[s].map.stride[l]) != NULL) return 1;
  }
  return 0;
}

/* kN_body(bufs..., begin, end) with noalias where no other buffer of the kernel overlaps;
 * kN(ctx, begin, end) unpacks the buffer table for the thread pool */
/* Kernels called directly (too little work for the pool) are inlined into NAME_run_partJ by LLVM;
 * many big ones inlined together make one huge block, on which instruction selection is quadratic
 * (155 kernels of 256 max prims each: 95 s). Big bodies stay out of line: a call costs nothing next
 * to them. */
#define KERNEL_INLINE_MAX 256

static int instruction_count(LLVMValueRef fn) {
  int n = 0;
  for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(fn); bb; bb = LLVMGetNextBasicBlock(bb))
    for (LLVMValueRef i = LLVMGetFirstInstruction(bb); i; i = LLVMGetNextInstruction(i)) n++;
  return n;
}

LLVMValueRef lv_emit_loop_kernel(lctx *L, int idx) {
  const kir_kernel *k = &L->p->kernels[idx];
  const kir_program *p = L->p;
  char *used = calloc((size_t)p->n_bufs, 1);
  int *ids = calloc((size_t)p->n_bufs, sizeof *ids);
  LLVMTypeRef *pt = calloc((size_t)p->n_bufs + 2, sizeof *pt);
  int n = 0;
  for (int s = 0; s < k->n_stores; s++) {
    used[k->stores[s].buf] = 1;
    mark_loads(k->stores[s].value, used);
  }
  if (p->dyn) used[p->dyn->buf] = 1; /* the symbols' values */
  /* buffers starting at the same address (an elementwise result written in place over its
   * operand) share one pointer: LLVM then sees x[i] = f(x[i]) and vectorizes without the
   * runtime overlap check that would send exact aliasing down the scalar loop */
  int *same = calloc((size_t)p->n_bufs, sizeof *same);
  for (int b = 0; b < p->n_bufs; b++) {
    if (!used[b]) continue;
    same[b] = -1;
    for (int i = 0; i < n && same[b] < 0; i++)
      if (same_start(&p->bufs[ids[i]], &p->bufs[b])) same[b] = i;
    if (same[b] < 0) same[b] = n, ids[n] = b, pt[n++] = L->ptr;
  }
  pt[n] = L->i64;
  pt[n + 1] = L->i64;
  char name[LLVM_SYM_MAX];
  snprintf(name, sizeof name, "%s_k%d_body", L->name, idx);
  LLVMValueRef body = LLVMAddFunction(L->m, name, LLVMFunctionType(L->voidt, pt, (unsigned)n + 2, 0));
  LLVMSetLinkage(body, LLVMInternalLinkage);
  unsigned noalias = LLVMGetEnumAttributeKindForName("noalias", 7);
  for (int i = 0; i < n; i++) {
    int alone = 1;
    for (int j = 0; j < n; j++)
      if (j != i && kir_bufs_overlap(p, ids[i], ids[j])) alone = 0;
    if (alone)
      LLVMAddAttributeAtIndex(body, (unsigned)i + 1, LLVMCreateEnumAttribute(L->c, noalias, 0));
  }
  L->fn = body;
  LLVMPositionBuilderAtEnd(L->b, LLVMAppendBasicBlockInContext(L->c, body, "entry"));
  for (int b = 0; b < p->n_bufs; b++)
    if (used[b]) L->bufp[b] = LLVMGetParam(body, (unsigned)same[b]);
  free(same);
  if (p->dyn) lv_dyn_begin(L, L->bufp[p->dyn->buf]);
  loop loops[KIR_MAX_LOOPS];
  int columns = column_reduction(p, k), n_open = columns ? k->n_par - 1 : k->n_par;
  for (int l = 0; l < n_open; l++)
    loops[l] = l == 0 ? loop_begin(L, 0, LLVMGetParam(body, (unsigned)n), LLVMGetParam(body, (unsigned)n + 1))
                      : loop_begin(L, l, ci64(L, 0), lv_size(L, &k->extent[l]));
  if (columns) {
    int P = k->n_par - 1;
    emit_column_reduction(L, k, P == 0 ? LLVMGetParam(body, (unsigned)n) : ci64(L, 0),
                          P == 0 ? LLVMGetParam(body, (unsigned)n + 1) : lv_size(L, &k->extent[P]));
  } else if (k->n_loops > k->n_par) {
    emit_reduction(L, k);
  } else {
    /* every value before any store: a store may write over an element a later value reads (a training
     * step's state updated in place, passes/state_order.c) */
    LLVMValueRef vals[KIR_MAX_ARGS];
    for (int s = 0; s < k->n_stores; s++) vals[s] = lv_emit_expr(L, k->stores[s].value, k->n_loops);
    for (int s = 0; s < k->n_stores; s++) lv_store_value(L, &k->stores[s], k->stores[s].value->dtype, vals[s], k->n_loops);
  }
  for (int l = n_open - 1; l >= 0; l--) {
    LLVMValueRef latch = loop_end(L, &loops[l]);
    if (scatters(p, k, l)) loop_md(L, latch, 0, 1);
    else if (l == k->n_loops - 1) loop_md(L, latch, 0, f16_width(L, k, l, 1));
  }
  LLVMBuildRetVoid(L->b);

  /* the thread-pool entry */
  snprintf(name, sizeof name, "%s_k%d", L->name, idx);
  LLVMTypeRef wt[3] = {L->ptr, L->i64, L->i64};
  LLVMValueRef w = LLVMAddFunction(L->m, name, LLVMFunctionType(L->voidt, wt, 3, 0));
  LLVMSetLinkage(w, LLVMInternalLinkage);
  if (instruction_count(body) > KERNEL_INLINE_MAX)
    LLVMAddAttributeAtIndex(w, LLVMAttributeFunctionIndex,
                            LLVMCreateEnumAttribute(L->c, LLVMGetEnumAttributeKindForName("noinline", 8), 0));
  LLVMPositionBuilderAtEnd(L->b, LLVMAppendBasicBlockInContext(L->c, w, "entry"));
  LLVMValueRef *args = calloc((size_t)n + 2, sizeof *args);
  for (int i = 0; i < n; i++) {
    LLVMValueRef slot = ci64(L, ids[i]);
    LLVMValueRef gp = LLVMBuildInBoundsGEP2(L->b, L->ptr, LLVMGetParam(w, 0), &slot, 1, "");
    args[i] = LLVMBuildLoad2(L->b, L->ptr, gp, "");
  }
  args[n] = LLVMGetParam(w, 1);
  args[n + 1] = LLVMGetParam(w, 2);
  LLVMBuildCall2(L->b, LLVMFunctionType(L->voidt, pt, (unsigned)n + 2, 0), body, args, (unsigned)n + 2, "");
  LLVMBuildRetVoid(L->b);
  free(args);
  free(used);
  free(ids);
  free(pt);
  return w;
}

