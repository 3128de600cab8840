/* codegen/cuda.c: renders the kernel IR of a graph as CUDA C, one extern "C" __global__ kernel per kernel-IR kernel:
 * dtypes, render context, expressions, loop kernels and the program (runtime calls: cuda_calls.c; prelude: cuda_prelude.c). */
#include "codegen/cuda_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- dtypes */

const cu_dtype cu_types[PC_DTYPE_COUNT] = {
    [PC_f16] = {"unsigned short", "float", "float", "-PC_INF_F", "PC_INF_F"},
    [PC_bf16] = {"unsigned short", "float", "float", "-PC_INF_F", "PC_INF_F"},
    [PC_f32] = {"float", "float", "float", "-PC_INF_F", "PC_INF_F"},
    [PC_f64] = {"double", "double", "double", "-PC_INF_D", "PC_INF_D"},
    [PC_i8] = {"signed char", "signed char", "int", "-128", "127"},
    [PC_i16] = {"short", "short", "int", "-32768", "32767"},
    [PC_i32] = {"int", "int", "int", "(-2147483647 - 1)", "2147483647"},
    [PC_i64] = {"long long", "long long", "long long", "(-9223372036854775807LL - 1)", "9223372036854775807LL"},
    [PC_u8] = {"unsigned char", "unsigned char", "unsigned int", "0u", "255u"},
    [PC_bool] = {"unsigned char", "unsigned char", "unsigned int", "0u", "1u"},
    [PC_c64] = {"unsigned long long", "unsigned long long", NULL, "0", "0"}, /* moved as 64-bit patterns */
    [PC_u16] = {"unsigned short", "unsigned short", "unsigned int", "0u", "65535u"},
    [PC_u32] = {"unsigned int", "unsigned int", "unsigned int", "0u", "4294967295u"},
    [PC_u64] = {"unsigned long long", "unsigned long long", "unsigned long long", "0ull", "18446744073709551615ull"},
    [PC_f8e4m3fn] = {"unsigned char", "float", "float", "-PC_INF_F", "PC_INF_F"},
    [PC_f8e4m3fnuz] = {"unsigned char", "float", "float", "-PC_INF_F", "PC_INF_F"},
    [PC_f8e5m2] = {"unsigned char", "float", "float", "-PC_INF_F", "PC_INF_F"},
    [PC_f8e5m2fnuz] = {"unsigned char", "float", "float", "-PC_INF_F", "PC_INF_F"},
    [PC_i4] = {"signed char", "signed char", "int", "-8", "7"},
    [PC_u4] = {"unsigned char", "unsigned char", "unsigned int", "0u", "15u"},
    [PC_i2] = {"signed char", "signed char", "int", "-2", "1"},
    [PC_u2] = {"unsigned char", "unsigned char", "unsigned int", "0u", "3u"},
    [PC_f4e2m1] = {"unsigned char", "float", "float", "-PC_INF_F", "PC_INF_F"},
    [PC_f8e8m0] = {"unsigned char", "float", "float", "-PC_INF_F", "PC_INF_F"},
};

const cu_narrow cu_narrows[PC_DTYPE_COUNT] = {
    [PC_f16] = {"pc_h2f", "pc_f2h", "pc_rh"},
    [PC_bf16] = {"pc_bf2f", "pc_f2bf", "pc_rbf"},
    [PC_f8e4m3fn] = {"pc_f8e4m3fn_to_f", "pc_f_to_f8e4m3fn", "pc_rf8e4m3fn"},
    [PC_f8e4m3fnuz] = {"pc_f8e4m3fnuz_to_f", "pc_f_to_f8e4m3fnuz", "pc_rf8e4m3fnuz"},
    [PC_f8e5m2] = {"pc_f8e5m2_to_f", "pc_f_to_f8e5m2", "pc_rf8e5m2"},
    [PC_f8e5m2fnuz] = {"pc_f8e5m2fnuz_to_f", "pc_f_to_f8e5m2fnuz", "pc_rf8e5m2fnuz"},
    [PC_f4e2m1] = {"pc_f4e2m1_to_f", "pc_f_to_f4e2m1", "pc_rf4e2m1"},
    [PC_f8e8m0] = {"pc_f8e8m0_to_f", "pc_f_to_f8e8m0", "pc_rf8e8m0"},
};

int cu_is_half(pc_dtype t) { return cu_narrows[t].load != NULL; }

const char *cu_wrap_fn(pc_dtype t) {
  static const char *const fns[PC_DTYPE_COUNT] = {[PC_i4] = "pc_wrap_i4", [PC_u4] = "pc_wrap_u4", [PC_i2] = "pc_wrap_i2",
                                                  [PC_u2] = "pc_wrap_u2"};
  return fns[t];
}

const char *cu_bits_type(size_t size) {
  return size == 8 ? "unsigned long long" : size == 4 ? "unsigned int" : size == 2 ? "unsigned short" : "unsigned char";
}

/* ---------------------------------------------------------------- render context */

void cu_line(cctx *C, int ind, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(C->f, "%*s", 2 * ind, "");
  vfprintf(C->f, fmt, ap);
  fputc('\n', C->f);
  va_end(ap);
}

int64_t pc_cuda_grid(int n, const int64_t *work, const int64_t *per) {
  int64_t b = 1;
  for (int i = 0; i < n && b > 0 && b <= PC_CUDA_MAX_GRID; i++) b *= work[i] > 0 ? (work[i] + per[i] - 1) / per[i] : 0;
  return b < 1 ? 1 : b > PC_CUDA_MAX_GRID ? PC_CUDA_MAX_GRID : b;
}

int64_t cu_grid(cctx *C, int n, const int64_t *work, const int64_t *per) {
  pc_cuda_launch *L = C->launch;
  L->n_work = n < PC_CUDA_GRID_FACTORS ? n : PC_CUDA_GRID_FACTORS;
  for (int i = 0; i < L->n_work; i++) L->work[i] = work[i], L->per[i] = per[i];
  return L->grid = pc_cuda_grid(L->n_work, L->work, L->per);
}

int64_t cu_grid1(cctx *C, int64_t work, int64_t per_block) { return cu_grid(C, 1, &work, &per_block); }

int cu_put_sym_params(cctx *C) {
  for (int s = 0; s < C->p->cuda_syms; s++) fprintf(C->f, "%sconst long long pc_s%d", s ? ", " : "", s);
  return C->p->cuda_syms;
}

pc_status cu_fail_kernel(cctx *C, const char *fmt, const char *what) {
  const kir_kernel *k = &C->p->kernels[C->idx];
  if (k->n_nodes) return pc_node_fail(C->g, k->nodes[0], PC_ERR_UNSUPPORTED, fmt, what);
  char msg[256];
  snprintf(msg, sizeof msg, fmt, what);
  return pc_fail(C->g, PC_ERR_UNSUPPORTED, "kernel %s: %s", C->name, msg);
}

/* ---------------------------------------------------------------- expressions */

static void put_map(cctx *C, const kir_map *m, int n_loops) {
  fprintf(C->f, "(%lldLL", (long long)m->offset);
  for (int k = 0; k < n_loops; k++)
    if (m->stride[k]) fprintf(C->f, " + %lldLL * i%d", (long long)m->stride[k], k);
  fprintf(C->f, ")");
}

/* bN, cast when the access's dtype is not the buffer's */
static void put_buf(cctx *C, int buf, pc_dtype t) {
  if (C->p->bufs[buf].dtype == t) fprintf(C->f, "b%d", buf);
  else fprintf(C->f, "((%s *)b%d)", cu_types[t].mem, buf);
}

static void put_int(FILE *f, pc_dtype t, int64_t v) {
  if (v == INT64_MIN) fprintf(f, "(%s)(-9223372036854775807LL - 1)", cu_types[t].reg);
  else fprintf(f, "(%s)%lldLL", cu_types[t].reg, (long long)v);
}

/* v as a constant of type t. With run-time dims, 1/N (a mean's scale) is written as the division the build did,
 * so that N is an integer literal cuda_dynamic.c fits like any size (a whole N already is one) */
static void put_float(FILE *f, pc_dtype t, double v, int dyn) {
  const char *sfx = cu_types[t].reg[0] == 'd' ? "D" : "F";
  int64_t n;
  if (dyn && kir_dyn_float_int(t, v, &n) == KIR_FLOAT_RECIP) fprintf(f, "(%s)(1.0 / %lldLL)", cu_types[t].reg, (long long)n);
  else if (isnan(v)) fprintf(f, "PC_NAN_%s", sfx);
  else if (isinf(v)) fprintf(f, "%sPC_INF_%s", v < 0 ? "-" : "", sfx);
  else fprintf(f, "(%s)%.17g", cu_types[t].reg, v);
}

/* from -> to with the IR's rules: nonzero is true, half results rounded */
static void put_convert(cctx *C, pc_dtype to, pc_dtype from, const char *x) {
  (void)from;
  if (to == PC_bool) fprintf(C->f, "(unsigned char)(%s != 0)", x);
  else if (cu_is_half(to)) fprintf(C->f, "%s((float)(%s))", cu_narrows[to].round, x);
  else if (cu_wrap_fn(to)) fprintf(C->f, "%s((long long)(%s))", cu_wrap_fn(to), x);
  else fprintf(C->f, "(%s)(%s)", cu_types[to].reg, x);
}

static void put_rounded_open(cctx *C, pc_dtype t) {
  if (cu_is_half(t)) fprintf(C->f, "%s(", cu_narrows[t].round);
  if (cu_wrap_fn(t)) fprintf(C->f, "%s(", cu_wrap_fn(t));
}

/* one temporary per expression node, in evaluation order; returns its number */
static int emit_expr(cctx *C, const kir_expr *e, int n_loops, int ind) {
  int a[3] = {0};
  for (int i = 0; i < e->n_args; i++) a[i] = emit_expr(C, e->args[i], n_loops, ind);
  int t = C->tmp++;
  fprintf(C->f, "%*sconst %s t%d = ", 2 * ind, "", cu_types[e->dtype].reg, t);
  char x[32];
  switch (e->kind) { /* the renderer's one walk over expression kinds */
  case KE_LOAD:
    if (C->subst && e->buf == C->subst_buf) { /* the call's own result, in a register (an epilogue in its kernel) */
      fprintf(C->f, "%s", C->subst);
      break;
    }
    if (cu_is_half(e->dtype)) fprintf(C->f, "%s(", cu_narrows[e->dtype].load);
    put_buf(C, e->buf, e->dtype);
    fprintf(C->f, "[");
    put_map(C, &e->map, n_loops);
    fprintf(C->f, "]%s", cu_is_half(e->dtype) ? ")" : "");
    break;
  case KE_CONST:
    if (pc_dtype_is_float(e->dtype)) put_float(C->f, e->dtype, e->c, C->p->cuda_syms > 0);
    else put_int(C->f, e->dtype, e->ci);
    break;
  case KE_INDEX: {
    char *buf = NULL;
    size_t len = 0;
    FILE *save = C->f, *mf = open_memstream(&buf, &len);
    if (!mf) return t;
    C->f = mf;
    put_map(C, &e->map, n_loops);
    fclose(mf);
    C->f = save;
    put_convert(C, e->dtype, PC_i64, buf ? buf : "0");
    free(buf);
    break;
  }
  case KE_CONVERT:
    snprintf(x, sizeof x, "t%d", a[0]);
    put_convert(C, e->dtype, e->args[0]->dtype, x);
    break;
  case KE_PRIM: {
    int lnot = e->op == PC_OP_not && e->dtype == PC_bool;
    put_rounded_open(C, e->dtype);
    fprintf(C->f, "pc_%s(", lnot ? "lnot" : pc_prim(e->op)->name);
    for (int i = 0; i < e->n_args; i++) fprintf(C->f, "%st%d", i ? ", " : "", a[i]);
    fprintf(C->f, ")%s", cu_is_half(e->dtype) || cu_wrap_fn(e->dtype) ? ")" : "");
    break;
  }
  }
  fprintf(C->f, ";\n");
  return t;
}

/* the value v (register type of dtype t) as stored in memory */
static void put_store(cctx *C, int ind, const kir_store *s, pc_dtype t, const char *v, int n_loops) {
  fprintf(C->f, "%*s", 2 * ind, "");
  put_buf(C, s->buf, t);
  fprintf(C->f, "[");
  put_map(C, &s->map, n_loops);
  if (cu_is_half(t)) fprintf(C->f, "] = %s(%s);\n", cu_narrows[t].store, v);
  else if (cu_wrap_fn(t)) fprintf(C->f, "] = %s(%s);\n", cu_wrap_fn(t), v); /* reduction accumulators are wider */
  else fprintf(C->f, "] = (%s)(%s);\n", cu_types[t].mem, v);
}

static int expr_supported(const kir_expr *e) {
  if (e->dtype == PC_c64 && e->kind != KE_LOAD) return 0;
  for (int i = 0; i < e->n_args; i++)
    if (!expr_supported(e->args[i])) return 0;
  return 1;
}

/* ---------------------------------------------------------------- loop kernels */

static void mark_loads(const kir_expr *e, char *used) {
  if (e->kind == KE_LOAD) used[e->buf] |= 1;
  for (int i = 0; i < e->n_args; i++) mark_loads(e->args[i], used);
}

int cu_put_loop_params(cctx *C, const kir_kernel *k, int skip, const int *before, int n_before) {
  const kir_program *p = C->p;
  char *used = calloc((size_t)p->n_bufs + 1, 1);
  int *args = pc_alloc(C->g, sizeof(int) * (size_t)(p->n_bufs + n_before + KIR_DYN_MAX_SYMS + 1));
  if (!used || !args) {
    free(used);
    return pc_fail(C->g, PC_ERR_NOMEM, "out of memory"), -1;
  }
  for (int s = 0; s < k->n_stores; s++) {
    used[k->stores[s].buf] |= 2;
    mark_loads(k->stores[s].value, used);
  }
  if (skip >= 0) used[skip] = 0;
  int n = 0;
  for (; n < n_before; n++) args[n] = before[n];
  if (n_before == 0) /* a loop kernel of its own: the symbols lead (a call printed them before its a0..) */
    for (; n < C->p->cuda_syms; n++) args[n] = -1 - n;
  for (int b = 0; b < p->n_bufs; b++) {
    if (!used[b]) continue;
    fprintf(C->f, "%s%s%s *b%d", n ? ", " : "", used[b] & 2 ? "" : "const ", cu_types[p->bufs[b].dtype].mem, b);
    args[n++] = b;
  }
  C->launch->n_args = n;
  C->launch->args = args;
  free(used);
  return n;
}

/* signature: every buffer the kernel touches, by id; the launch passes the same list */
static pc_status loop_signature(cctx *C, const kir_kernel *k) {
  fprintf(C->f, "extern \"C\" __global__ void __launch_bounds__(%d) %s(", CU_BLOCK, C->name);
  cu_put_sym_params(C);
  if (cu_put_loop_params(C, k, -1, NULL, 0) < 0) return C->g->status;
  fprintf(C->f, ") {\n");
  return PC_OK;
}

/* i<first>..i<last-1> from the linear index `lin` (row-major over the loops' extents) */
static void decompose(cctx *C, int ind, const kir_kernel *k, int first, int last, const char *lin) {
  cu_line(C, ind, "long long r_ = %s;", lin);
  for (int l = last - 1; l > first; l--) {
    cu_line(C, ind, "const long long i%d = r_ %% %lldLL;", l, (long long)k->extent[l]);
    cu_line(C, ind, "r_ /= %lldLL;", (long long)k->extent[l]);
  }
  cu_line(C, ind, "const long long i%d = r_;", first);
}

static int64_t extent_product(const kir_kernel *k, int first, int last) {
  int64_t n = 1;
  for (int l = first; l < last; l++) n *= k->extent[l];
  return n;
}

void cu_emit_stores(cctx *C, const kir_kernel *k, int ind) {
  int t[KIR_MAX_ARGS];
  /* every value before any store: a store may overwrite what another store reads (in place) */
  for (int s = 0; s < k->n_stores; s++) t[s] = emit_expr(C, k->stores[s].value, k->n_loops, ind);
  for (int s = 0; s < k->n_stores; s++) {
    char v[32];
    snprintf(v, sizeof v, "t%d", t[s]);
    put_store(C, ind, &k->stores[s], k->stores[s].value->dtype, v, k->n_loops);
  }
}

int cu_loop_supported(const kir_kernel *k) {
  for (int s = 0; s < k->n_stores; s++)
    if (!expr_supported(k->stores[s].value)) return 0;
  return 1;
}

/* out[map(i)] = expr(i) over all loops, one thread per point */
static pc_status render_pointwise(cctx *C, const kir_kernel *k) {
  int64_t total = extent_product(k, 0, k->n_loops);
  cu_grid1(C, total, CU_BLOCK);
  cu_line(C, 1, "PC_GRID_STRIDE(lin, %lldLL) {", (long long)total);
  decompose(C, 2, k, 0, k->n_loops, "lin");
  cu_emit_stores(C, k, 2);
  cu_line(C, 1, "}");
  return PC_OK;
}

static const char *red_functor(kir_red r) {
  static const char *const f[] = {[KR_SUM] = "pc_f_sum", [KR_PROD] = "pc_f_prod", [KR_MAX] = "pc_f_max",
                                  [KR_MIN] = "pc_f_min"};
  return f[r];
}

static void put_red_init(cctx *C, kir_red r, pc_dtype t) {
  const cu_dtype *d = &cu_types[t];
  if (r == KR_SUM || r == KR_ARGMAX || r == KR_ARGMIN) fprintf(C->f, "(%s)0", d->acc);
  else if (r == KR_PROD) fprintf(C->f, "(%s)1", d->acc);
  else fprintf(C->f, "(%s)(%s)", d->acc, r == KR_MAX ? d->lo : d->hi);
}

static pc_status reduction_shared(cctx *C, const kir_kernel *k, int sbase) {
  for (int s = 0; s < k->n_stores; s++) {
    const kir_store *st = &k->stores[s];
    if (st->red == KR_NONE || !cu_types[st->value->dtype].acc)
      return cu_fail_kernel(C, "%s: reduction not supported by the CUDA renderer", kir_red_name(st->red));
    cu_line(C, 1, "__shared__ %s sh%d[32];", cu_types[st->value->dtype].acc, sbase + s);
    if (st->red == KR_ARGMAX || st->red == KR_ARGMIN) cu_line(C, 1, "__shared__ long long shi%d[32];", sbase + s);
  }
  return PC_OK;
}

/* k's reductions of the current row (its row loops decomposed): the block's threads stride over the reduced loops,
 * then a block reduction; thread 0 stores. Accumulators and shared slots numbered from sbase */
static void reduction_row(cctx *C, const kir_kernel *k, int sbase) {
  int64_t red = extent_product(k, k->n_par, k->n_loops);
  for (int s = 0; s < k->n_stores; s++) {
    fprintf(C->f, "    %s acc%d = ", cu_types[k->stores[s].value->dtype].acc, sbase + s);
    put_red_init(C, k->stores[s].red, k->stores[s].value->dtype);
    fprintf(C->f, ";\n");
    if (k->stores[s].red == KR_ARGMAX || k->stores[s].red == KR_ARGMIN) cu_line(C, 2, "long long ai%d = -1;", sbase + s);
  }
  cu_line(C, 2, "for (long long red = threadIdx.x; red < %lldLL; red += blockDim.x) {", (long long)red);
  cu_line(C, 3, "{");
  decompose(C, 4, k, k->n_par, k->n_loops, "red");
  for (int s = 0; s < k->n_stores; s++) {
    const kir_store *st = &k->stores[s];
    const char *acc = cu_types[st->value->dtype].acc;
    int t = emit_expr(C, st->value, k->n_loops, 4), a = sbase + s;
    if (st->red == KR_ARGMAX || st->red == KR_ARGMIN)
      cu_line(C, 4, "if (pc_arg_better((%s)t%d, red, acc%d, ai%d, %d, %d)) acc%d = (%s)t%d, ai%d = red;", acc, t, a, a,
           st->red == KR_ARGMAX, st->arg_last, a, acc, t, a);
    else cu_line(C, 4, "acc%d = %s()(acc%d, (%s)t%d);", a, red_functor(st->red), a, acc, t);
  }
  cu_line(C, 3, "}");
  cu_line(C, 2, "}");
  for (int s = 0; s < k->n_stores; s++) {
    const kir_store *st = &k->stores[s];
    pc_dtype t = st->value->dtype;
    char v[160];
    int a = sbase + s;
    if (st->red == KR_ARGMAX || st->red == KR_ARGMIN) {
      cu_line(C, 2, "pc_block_arg(acc%d, ai%d, sh%d, shi%d, %d, %d);", a, a, a, a, st->red == KR_ARGMAX, st->arg_last);
      /* the linear reduced index back to the index along the arg loop */
      int64_t div = extent_product(k, st->arg_loop + 1, k->n_loops);
      snprintf(v, sizeof v, "ai%d < 0 ? 0LL : (ai%d / %lldLL) %% %lldLL", a, a, (long long)div,
               (long long)k->extent[st->arg_loop]);
      t = PC_i64;
    } else {
      fprintf(C->f, "    acc%d = pc_block_reduce(acc%d, sh%d, ", a, a, a);
      put_red_init(C, st->red, t);
      fprintf(C->f, ", %s());\n", red_functor(st->red));
      snprintf(v, sizeof v, "acc%d", a);
    }
    cu_line(C, 2, "if (threadIdx.x == 0) {");
    put_store(C, 3, st, t, v, k->n_par);
    cu_line(C, 2, "}");
  }
}

/* one block per output row (the parallel loops), its threads striding over the reduced loops */
static pc_status render_reduction(cctx *C, const kir_kernel *k) {
  int64_t rows = extent_product(k, 0, k->n_par);
  cu_grid1(C, rows, 1);
  pc_status st = reduction_shared(C, k, 0);
  if (st != PC_OK) return st;
  cu_line(C, 1, "for (long long row = blockIdx.x; row < %lldLL; row += gridDim.x) {", (long long)rows);
  decompose(C, 2, k, 0, k->n_par, "row");
  reduction_row(C, k, 0);
  cu_line(C, 1, "}");
  return PC_OK;
}

/* ---------------------------------------------------------------- row chains */

/* A row chain: reductions over the same rows and reduced loops (a layer norm's mean and variance, a softmax's max and
 * sum), optionally ending in a pointwise kernel over the same loops (the normalization), run as one kernel with a
 * block per row: each reduction's result is stored by thread 0 and read back by the block after a __syncthreads.
 * Safe when every read of what the chain writes stays in its row: a reduction's result read at its own row (no
 * stride along the other loops), the pointwise kernel's stores read only at the very element it stores. */

static int same_loops(const kir_kernel *a, const kir_kernel *b) {
  if (a->n_loops != b->n_loops) return 0;
  for (int l = 0; l < a->n_loops; l++)
    if (a->extent[l] != b->extent[l]) return 0;
  return 1;
}

/* the load of buf at map m by chain kernel `self` against every store of the chain ch[0..n) */
static int load_in_row(const kir_program *p, const kir_kernel *ch, int n, int self, int buf, const kir_map *m) {
  for (int j = 0; j < n; j++)
    for (int s = 0; s < ch[j].n_stores; s++) {
      const kir_store *st = &ch[j].stores[s];
      if (!kir_bufs_overlap(p, buf, st->buf)) continue;
      if (buf != st->buf) return 0;
      if (ch[j].n_loops == ch[j].n_par) { /* the pointwise end: only the element it stores */
        if (memcmp(m, &st->map, sizeof *m)) return 0; /* all int64: as kir_expr_equal (kir_expr.c) compares maps */
        continue;
      }
      if (j >= self || m->offset != st->map.offset) return 0; /* a result read before it is made */
      for (int l = 0; l < KIR_MAX_LOOPS; l++)
        if (m->stride[l] != (l < ch[j].n_par ? st->map.stride[l] : 0)) return 0;
    }
  return 1;
}

static int expr_in_row(const kir_program *p, const kir_kernel *ch, int n, int self, const kir_expr *e) {
  if (e->kind == KE_LOAD && !load_in_row(p, ch, n, self, e->buf, &e->map)) return 0;
  for (int i = 0; i < e->n_args; i++)
    if (!expr_in_row(p, ch, n, self, e->args[i])) return 0;
  return 1;
}

/* how many kernels from i form a row chain (2 or more), else 0 */
static int row_chain(const cctx *C, int i) {
  const kir_program *p = C->p;
  const kir_kernel *a = &p->kernels[i];
  int stores = 0, n = 0;
  if (a->kind != KK_LOOP || a->n_loops == a->n_par || !a->n_nodes || a->nodes[0]->group < 0) return 0;
  for (int j = i; j < p->n_kernels; j++) {
    const kir_kernel *k = &p->kernels[j];
    int red = k->n_loops > k->n_par;
    if (k->kind != KK_LOOP || k->absorbed || k->has_epilogue || C->skip[j] || !k->n_nodes ||
        k->nodes[0]->group != a->nodes[0]->group || !same_loops(k, a) || (red && k->n_par != a->n_par) ||
        stores + k->n_stores > KIR_MAX_ARGS || !cu_loop_supported(k))
      break;
    for (int s = 0; s < k->n_stores; s++)
      if (k->stores[s].red == KR_ARGMAX || k->stores[s].red == KR_ARGMIN) return n >= 2 ? n : 0;
    stores += k->n_stores;
    n++;
    if (!red) break;
  }
  for (int j = 0; j < n; j++)
    for (int s = 0; s < p->kernels[i + j].n_stores; s++)
      if (!expr_in_row(p, &p->kernels[i], n, j, p->kernels[i + j].stores[s].value)) return 0;
  return n >= 2 ? n : 0;
}

static pc_status render_row_chain(cctx *C, int i, int n) {
  const kir_kernel *ch = &C->p->kernels[i], *last = &ch[n - 1];
  kir_kernel all = ch[0]; /* the signature: every buffer of the chain */
  for (int j = 1; j < n; j++)
    for (int s = 0; s < ch[j].n_stores; s++) all.stores[all.n_stores++] = ch[j].stores[s];
  fprintf(C->f, "/* row chain: kernels %d..%d, a block per row */\n", i, i + n - 1);
  pc_status st = loop_signature(C, &all);
  if (st != PC_OK) return st;
  int64_t rows = extent_product(ch, 0, ch->n_par);
  C->launch->block = CU_BLOCK;
  cu_grid1(C, rows, 1);
  for (int j = 0, sb = 0; j < n; sb += ch[j].n_stores, j++)
    if (ch[j].n_loops > ch[j].n_par && (st = reduction_shared(C, &ch[j], sb)) != PC_OK) return st;
  cu_line(C, 1, "for (long long row = blockIdx.x; row < %lldLL; row += gridDim.x) {", (long long)rows);
  decompose(C, 2, ch, 0, ch->n_par, "row");
  for (int j = 0, sb = 0; j < n; sb += ch[j].n_stores, j++) {
    if (j) C->skip[i + j] = 1;
    if (ch[j].n_loops == ch[j].n_par) break;
    cu_line(C, 2, "{");
    reduction_row(C, &ch[j], sb);
    cu_line(C, 2, "}");
    cu_line(C, 2, "__syncthreads(); /* the results thread 0 stored, for the block */");
  }
  if (last->n_loops == last->n_par) {
    cu_line(C, 2, "for (long long red = threadIdx.x; red < %lldLL; red += blockDim.x) {",
            (long long)extent_product(last, ch->n_par, last->n_loops));
    decompose(C, 3, last, ch->n_par, last->n_loops, "red");
    cu_emit_stores(C, last, 3);
    cu_line(C, 2, "}");
    cu_line(C, 2, "__syncthreads(); /* the next row's reductions reuse the shared slots */");
  }
  cu_line(C, 1, "}");
  fprintf(C->f, "}\n");
  return PC_OK;
}

static pc_status render_loop(cctx *C, const kir_kernel *k) {
  if (!cu_loop_supported(k)) return cu_fail_kernel(C, "%s: c64 arithmetic is not supported by the CUDA renderer", "c64");
  pc_status st = loop_signature(C, k);
  if (st != PC_OK) return st;
  C->launch->block = CU_BLOCK;
  st = k->n_loops > k->n_par ? render_reduction(C, k) : render_pointwise(C, k);
  fprintf(C->f, "}\n");
  return st;
}

/* ---------------------------------------------------------------- program */

static void kernel_header(cctx *C, const kir_kernel *k) {
  const char *what = k->n_nodes ? pc_prim(k->nodes[k->n_nodes - 1]->op)->name : k->kind == KK_CALL ? kir_call_name(k->call) : "loop";
  snprintf(C->name, sizeof C->name, "k%d_%s", C->idx, what);
  C->launch->name = pc_strdup(C->g, C->name);
  fprintf(C->f, "\n/* %s", C->name);
  if (!k->n_nodes) fprintf(C->f, ": graph output copy");
  for (int i = 0; i < k->n_nodes; i++) {
    const pc_node *n = k->nodes[i];
    fprintf(C->f, "%s %%%d = %s", i ? "\n *" : ":", n->out[0]->id, pc_prim(n->op)->name);
    if (n->origin) {
      fprintf(C->f, " <- ");
      pc_put_c_comment(C->f, n->origin);
    }
  }
  fprintf(C->f, " */\n");
}

pc_status pc_cuda_render_program(const struct kir_program *p, FILE *f, pc_cuda_launch **launches) {
  pc_graph *g = p->g;
  cctx C;
  memset(&C, 0, sizeof C);
  C.p = p;
  C.g = g;
  C.f = f;
  pc_cuda_launch *L = pc_alloc(g, sizeof *L * (size_t)(p->n_kernels + 1));
  C.skip = pc_alloc(g, (size_t)p->n_kernels + 1);
  if (!L || !C.skip) return pc_fail(g, PC_ERR_NOMEM, "out of memory");
  fprintf(f, "/* CUDA C generated by primc %s: %d kernels, launched in order; workspace %lld bytes, weights %lld bytes */\n",
          PC_VERSION, p->n_kernels, (long long)p->workspace_size, (long long)p->weights_size);
  cu_put_prelude(f);
  pc_status s = PC_OK;
  for (int i = 0; s == PC_OK && i < p->n_kernels; i++) {
    const kir_kernel *k = &p->kernels[i];
    C.idx = i;
    C.launch = &L[i];
    C.tmp = 0;
    kernel_header(&C, k);
    if (C.skip[i]) { /* grid 0: not launched */
      fprintf(f, "/* run by an earlier kernel (a call's epilogue, a row chain) */\n");
      fprintf(f, "extern \"C\" __global__ void %s() {}\n", C.name);
      continue;
    }
    int chain = k->kind == KK_LOOP ? row_chain(&C, i) : 0;
    s = chain ? render_row_chain(&C, i, chain) : k->kind == KK_CALL ? cu_render_call(&C, k) : render_loop(&C, k);
  }
  if (s == PC_OK && ferror(f)) s = pc_fail(g, PC_ERR_IO, "cannot write the CUDA C");
  if (launches) *launches = L;
  return s;
}

int pc_cuda_sm(const char *arch) {
  const char *d = arch ? strpbrk(arch, "0123456789") : NULL;
  int sm = d ? atoi(d) : 0;
  return sm > 0 ? sm : 90;
}

/* g's kernel IR into *p, rendered to f for arch with cuda_syms run-time dims' parameters */
static pc_status render_for(pc_graph *g, FILE *f, const char *arch, int cuda_syms, kir_program *p,
                            pc_cuda_launch **launches) {
  pc_status s = kir_build_cuda(g, p, pc_cuda_sm(arch));
  if (s != PC_OK) return g->status ? g->status : s;
  p->cuda_syms = cuda_syms;
  return pc_cuda_render_program(p, f, launches);
}

pc_status pc_cuda_render(pc_graph *g, FILE *f) {
  kir_program p;
  return render_for(g, f, NULL, 0, &p, NULL);
}

pc_status kir_cuda_render(pc_graph *g, const char *arch, int cuda_syms, kir_program *p, char **src, size_t *len,
                          pc_cuda_launch **launches) {
  *src = NULL;
  *len = 0;
  FILE *f = open_memstream(src, len);
  if (!f) return pc_fail(g, PC_ERR_NOMEM, "out of memory");
  pc_status s = render_for(g, f, arch, cuda_syms, p, launches);
  if (fclose(f) != 0 && s == PC_OK) s = pc_fail(g, PC_ERR_NOMEM, "out of memory");
  if (s != PC_OK) free(*src), *src = NULL;
  return s;
}

pc_status kir_cuda_program(pc_graph *g, const pc_codegen_opts *opts, kir_program *p, char **src,
                           pc_cuda_launch **launches, kir_cuda_dyn **dyn) {
  size_t len;
  *dyn = NULL;
  if (opts->dyn) return kir_cuda_dynamic(g, opts, p, src, launches, dyn); /* the kernels take the dims (cuda_dynamic.c) */
  return kir_cuda_render(g, opts->gpu_arch, 0, p, src, &len, launches);
}

static int ends_with(const char *s, const char *suffix) {
  size_t a = strlen(s), b = strlen(suffix);
  return a >= b && !strcmp(s + a - b, suffix);
}

/* CUDA C text, or NVRTC's cubin / PTX of it */
static pc_status emit_binary(pc_graph *g, const pc_codegen_opts *o, const char *src) {
  char err[512];
  pc_nvrtc *nv = pc_nvrtc_open(err, sizeof err);
  if (!nv) return pc_fail(g, PC_ERR_UNSUPPORTED, "%s", err);
  pc_cuda_binary b;
  pc_status s = pc_nvrtc_compile(g, nv, src, o->gpu_arch, &b);
  pc_nvrtc_close(nv);
  if (s != PC_OK) return s;
  if (ends_with(o->output, ".ptx")) s = pc_file_write(g, o->output, b.ptx, b.ptx_size);
  else s = pc_file_write(g, o->output, b.cubin, b.cubin_size);
  pc_cuda_binary_free(&b);
  return s;
}

pc_status pc_codegen_cuda(pc_graph *g, const pc_codegen_opts *opts) {
  if (!opts || !opts->output) return pc_fail(g, PC_ERR_ATTR, "codegen: no output path");
  char *src = NULL;
  kir_program p;
  pc_cuda_launch *L;
  kir_cuda_dyn *d;
  pc_status s = kir_cuda_program(g, opts, &p, &src, &L, &d);
  if (s == PC_OK) {
    if (ends_with(opts->output, ".cubin") || ends_with(opts->output, ".ptx")) s = emit_binary(g, opts, src);
    else s = pc_file_write(g, opts->output, src, strlen(src));
  }
  free(src);
  return s;
}