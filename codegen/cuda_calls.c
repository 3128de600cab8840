/* codegen/cuda_calls.c: the CUDA renderings of the runtime calls of codegen/calls.def, one kernel of our own each, and call_rules. */
#include "codegen/cuda_internal.h"

#include <stdlib.h>
#include <string.h>

#define TILE 16         /* dot_general tile edge (TILE * TILE == CU_BLOCK) */

/* a shape as kir lays it out in params: rank then 8 dims */
typedef struct shp {
  int rank;
  int64_t d[PC_MAX_RANK];
} shp;

static const int64_t *get_shape(const int64_t *q, shp *s) {
  s->rank = (int)q[0];
  for (int i = 0; i < PC_MAX_RANK; i++) s->d[i] = q[1 + i];
  return q + 1 + PC_MAX_RANK;
}

static int64_t numel(const shp *s) {
  int64_t n = 1;
  for (int i = 0; i < s->rank; i++) n *= s->d[i];
  return n;
}

/* row-major strides, as a C initializer list */
static void put_strides(cctx *C, const char *name, const shp *s) {
  int64_t st[PC_MAX_RANK], acc = 1;
  for (int d = s->rank - 1; d >= 0; d--) st[d] = acc, acc *= s->d[d];
  fprintf(C->f, "  const long long %s[%d] = {", name, s->rank ? s->rank : 1);
  for (int d = 0; d < s->rank; d++) fprintf(C->f, "%s%lldLL", d ? ", " : "", (long long)st[d]);
  fprintf(C->f, "%s};\n", s->rank ? "" : "0");
}

static void put_dims(cctx *C, const char *name, const shp *s) {
  fprintf(C->f, "  const long long %s[%d] = {", name, s->rank ? s->rank : 1);
  for (int d = 0; d < s->rank; d++) fprintf(C->f, "%s%lldLL", d ? ", " : "", (long long)s->d[d]);
  fprintf(C->f, "%s};\n", s->rank ? "" : "1");
}

void cu_call_signature_with(cctx *C, const kir_kernel *k, int block, int64_t grid, const kir_kernel *loop, int skip) {
  fprintf(C->f, "extern \"C\" __global__ void __launch_bounds__(%d) %s(", block, C->name);
  int ns = cu_put_sym_params(C), *args = pc_alloc(C->g, sizeof(int) * (size_t)(ns + k->n_args + 1));
  for (int i = 0; i < k->n_args; i++) fprintf(C->f, "%sunsigned char *a%d", i || ns ? ", " : "", i);
  for (int i = 0; args && i < ns + k->n_args; i++) args[i] = i < ns ? -1 - i : k->args[i - ns];
  if (!args) {
    pc_fail(C->g, PC_ERR_NOMEM, "out of memory");
  } else if (loop) {
    cu_put_loop_params(C, loop, skip, args, ns + k->n_args);
  } else {
    C->launch->n_args = ns + k->n_args;
    C->launch->args = args;
  }
  fprintf(C->f, ") {\n");
  C->launch->block = block;
  C->launch->grid = grid;
}

void cu_call_signature(cctx *C, const kir_kernel *k, int block, int64_t grid) {
  cu_call_signature_with(C, k, block, grid, NULL, -1);
}

/* load of element i of a typed pointer as the accumulator type */
static const char *load_fn(pc_dtype t) { return cu_is_half(t) ? cu_narrows[t].load : ""; }
static const char *store_fn(pc_dtype t) { return cu_is_half(t) ? cu_narrows[t].store : cu_wrap_fn(t) ? cu_wrap_fn(t) : ""; }

/* copy: dst = src in the widest words that divide the size */
static pc_status render_copy(cctx *C, const kir_kernel *k) {
  shp s;
  get_shape(k->params + 1, &s);
  int64_t bytes = numel(&s) * (int64_t)pc_dtype_size((pc_dtype)k->params[0]);
  size_t w = bytes % 8 == 0 ? 8 : bytes % 4 == 0 ? 4 : bytes % 2 == 0 ? 2 : 1;
  cu_call_signature(C, k, CU_BLOCK, cu_grid1(C, bytes / (int64_t)w, CU_BLOCK));
  cu_line(C, 1, "if (a0 == a1) return;");
  cu_line(C, 1, "PC_GRID_STRIDE(i, %lldLL) ((%s *)a0)[i] = ((const %s *)a1)[i];", (long long)(bytes / (int64_t)w),
       cu_bits_type(w), cu_bits_type(w));
  fprintf(C->f, "}\n");
  return PC_OK;
}

/* dot_general: [dtype, B, M, N, K, a_sb, a_sm, a_sk, b_sb, b_sk, b_sn], out contiguous [B, M, N];
 * f32 as a tiled GEMM (cuda_gemm.c); other dtypes, and dot_b2 (two batch levels), TILE x TILE output tiles, the A
 * and B panels staged through shared memory */
static pc_status render_dot(cctx *C, const kir_kernel *k) {
  int b2 = k->call == KC_dot_b2;
  const primc_dot_shape q = primc_dot_shape_of(k->params, b2); /* dot's one batch level is B2 = 1 */
  pc_dtype dt = (pc_dtype)q.dt;
  long long B = q.B, M = q.M, N = q.N, K = q.K;
  if (!cu_types[dt].acc) return cu_fail_kernel(C, "dot_general on %s is not supported by the CUDA renderer", pc_dtype_name(dt));
  if (!b2 && cu_gemm_dot(C, k)) return PC_OK;
  int fl = pc_dtype_is_float(dt);
  const char *acc = !fl ? "unsigned long long" : dt == PC_f64 ? "double" : "float", *T = cu_types[dt].mem;
  const int64_t work[3] = {B, M, N}, per[3] = {1, TILE, TILE};
  cu_call_signature(C, k, TILE * TILE, cu_grid(C, 3, work, per));
  /* tile counts as expressions of M and N, which run-time dims replace (codegen/cuda_dynamic.c) */
  cu_line(C, 1, "const long long tm_ = (%lldLL + %d) / %d, tn_ = (%lldLL + %d) / %d;", M, TILE - 1, TILE, N, TILE - 1, TILE);
  const char *cvt = fl ? "" : "(unsigned long long)(long long)";
  cu_line(C, 1, "__shared__ %s sa[%d][%d], sb[%d][%d];", acc, TILE, TILE + 1, TILE, TILE + 1);
  cu_line(C, 1, "%s *o = (%s *)a0;", T, T);
  cu_line(C, 1, "const %s *A = (const %s *)a1, *Bm = (const %s *)a2;", T, T, T);
  cu_line(C, 1, "const int tx = threadIdx.x %% %d, ty = threadIdx.x / %d;", TILE, TILE);
  cu_line(C, 1, "for (long long tile = blockIdx.x; tile < %lldLL * tm_ * tn_; tile += gridDim.x) {", B);
  cu_line(C, 2, "const long long bt = tile / (tm_ * tn_), rt = tile %% (tm_ * tn_);");
  cu_line(C, 2, "const long long ao = bt / %lldLL * %lldLL + bt %% %lldLL * %lldLL, bo = bt / %lldLL * %lldLL + bt %% %lldLL * %lldLL;",
          (long long)q.B2, (long long)q.a_sb, (long long)q.B2, (long long)q.a_sb2, (long long)q.B2, (long long)q.b_sb,
          (long long)q.B2, (long long)q.b_sb2);
  cu_line(C, 2, "const long long m = rt / tn_ * %d + ty, n = rt %% tn_ * %d + tx;", TILE, TILE);
  cu_line(C, 2, "const long long mr = rt / tn_ * %d + tx;", TILE); /* the A row this thread stages */
  cu_line(C, 2, "%s acc = 0;", acc);
  cu_line(C, 2, "for (long long k0 = 0; k0 < %lldLL; k0 += %d) {", K, TILE);
  /* A panel stored transposed (sa[k][m]) so both panels are read along rows */
  cu_line(C, 3, "sa[ty][tx] = (mr < %lldLL && k0 + ty < %lldLL) ? (%s)%s(%s(A[ao + mr * %lldLL + (k0 + ty) * %lldLL])) : (%s)0;",
       M, K, acc, cvt, load_fn(dt), (long long)q.a_sm, (long long)q.a_sk, acc);
  cu_line(C, 3, "sb[ty][tx] = (n < %lldLL && k0 + ty < %lldLL) ? (%s)%s(%s(Bm[bo + (k0 + ty) * %lldLL + n * %lldLL])) : (%s)0;",
       N, K, acc, cvt, load_fn(dt), (long long)q.b_sk, (long long)q.b_sn, acc);
  cu_line(C, 3, "__syncthreads();");
  cu_line(C, 3, "for (int kk = 0; kk < %d; kk++) acc += sa[kk][ty] * sb[kk][tx];", TILE);
  cu_line(C, 3, "__syncthreads();");
  cu_line(C, 2, "}");
  cu_line(C, 2, "if (m < %lldLL && n < %lldLL) o[bt * %lldLL + m * %lldLL + n] = %s(%s%s);", M, N, M * N, N, store_fn(dt),
       fl ? "" : "(long long)", "acc");
  cu_line(C, 1, "}");
  fprintf(C->f, "}\n");
  return PC_OK;
}

/* the row-major offset of index variables v0..v{n-1} over dims, parenthesized in Horner form:
 * ((v0 * d1 + v1) * d2 + v2) */
static void put_row_major(cctx *C, const char *v, const int64_t *dims, int n) {
  if (n == 0) {
    fprintf(C->f, "0");
    return;
  }
  for (int d = 1; d < n; d++) fputc('(', C->f);
  fprintf(C->f, "%s0", v);
  for (int d = 1; d < n; d++) fprintf(C->f, " * %lldLL + %s%d)", (long long)dims[d], v, d);
}

/* conv: [dtype, x, w, out shapes, groups, stride, pad_lo, dilation, lhs_dilation (8 each), epilogue words]; f32 2-D
 * and 1-D convs with 8 or more output channels a group as implicit GEMMs (cuda_gemm.c), the rest one thread per
 * output; the fused epilogue applied by either */
static pc_status render_conv(cctx *C, const kir_kernel *k) {
  shp x, w, o;
  const int64_t *q = get_shape(get_shape(get_shape(k->params + 1, &x), &w), &o);
  pc_dtype dt = (pc_dtype)k->params[0];
  int64_t groups = *q++;
  const int64_t *stride = q, *pad = q + 8, *dil = q + 16, *ldil = q + 24;
  int S = x.rank - 2, fl = pc_dtype_is_float(dt);
  if (S < 0 || groups < 1 || !cu_types[dt].acc) return cu_fail_kernel(C, "%s: conv operands not supported by the CUDA renderer", "conv");
  /* the fused epilogue (kir_rewrites.c's conv-epilogues) runs here, its loop kernel is not launched */
  int epi = k->epi_in_call && k->params[CONV_EPI_AT] == 1 && k->n_args >= 7 && k->epilogue > C->idx;
  if (epi) C->skip[k->epilogue] = 1;
  if (cu_gemm_conv(C, k, epi)) return PC_OK;
  const char *acc = !fl ? "unsigned long long" : dt == PC_f64 ? "double" : "float", *T = cu_types[dt].mem;
  int64_t total = numel(&o), Cg = w.d[1], Og = w.d[0] / groups, plane = 1, taps = 1;
  for (int d = 0; d < S; d++) plane *= x.d[2 + d], taps *= w.d[2 + d];
  cu_call_signature(C, k, CU_BLOCK, cu_grid1(C, total, CU_BLOCK));
  cu_line(C, 1, "%s *out = (%s *)a0;", T, T);
  cu_line(C, 1, "const %s *x = (const %s *)a1, *w = (const %s *)a2;", T, T, T);
  cu_line(C, 1, "PC_GRID_STRIDE(lin, %lldLL) {", (long long)total);
  cu_line(C, 2, "long long r_ = lin;");
  for (int d = S - 1; d >= 0; d--) cu_line(C, 2, "const long long o%d = r_ %% %lldLL; r_ /= %lldLL;", d, (long long)o.d[2 + d], (long long)o.d[2 + d]);
  cu_line(C, 2, "const long long oc = r_ %% %lldLL, n = r_ / %lldLL, g = oc / %lldLL;", (long long)o.d[1], (long long)o.d[1], (long long)Og);
  cu_line(C, 2, "%s acc = 0;", acc);
  cu_line(C, 2, "for (long long ci = 0; ci < %lldLL; ci++) {", (long long)Cg);
  cu_line(C, 3, "const %s *xp = x + (n * %lldLL + g * %lldLL + ci) * %lldLL;", T, (long long)x.d[1], (long long)Cg, (long long)plane);
  cu_line(C, 3, "const %s *wp = w + (oc * %lldLL + ci) * %lldLL;", T, (long long)Cg, (long long)taps);
  for (int d = 0; d < S; d++) {
    cu_line(C, 3 + d, "for (long long k%d = 0; k%d < %lldLL; k%d++) {", d, d, (long long)w.d[2 + d], d);
    cu_line(C, 4 + d, "long long p%d = o%d * %lldLL - %lldLL + k%d * %lldLL;", d, d, (long long)stride[d], (long long)pad[d], d,
         (long long)dil[d]);
    cu_line(C, 4 + d, "if (p%d < 0 || p%d %% %lldLL) continue;", d, d, (long long)ldil[d]);
    cu_line(C, 4 + d, "p%d /= %lldLL;", d, (long long)ldil[d]);
    cu_line(C, 4 + d, "if (p%d >= %lldLL) continue;", d, (long long)x.d[2 + d]);
  }
  fprintf(C->f, "%*sconst long long xi = ", 2 * (3 + S), "");
  put_row_major(C, "p", x.d + 2, S);
  fprintf(C->f, ", wi = ");
  put_row_major(C, "k", w.d + 2, S);
  fprintf(C->f, ";\n");
  if (fl) cu_line(C, 3 + S, "acc += (%s)%s(xp[xi]) * (%s)%s(wp[wi]);", acc, load_fn(dt), acc, load_fn(dt));
  else cu_line(C, 3 + S, "acc += (unsigned long long)(long long)xp[xi] * (unsigned long long)(long long)wp[wi];");
  for (int d = S - 1; d >= 0; d--) cu_line(C, 3 + d, "}");
  cu_line(C, 2, "}");
  if (epi) {
    cu_line(C, 2, "const long long idx = lin;");
    cu_line(C, 2, "float s_ = acc;");
    cu_put_conv_epi(C, k->params + CONV_EPI_AT, 2);
  } else {
    cu_line(C, 2, "out[lin] = %s(%s%s);", store_fn(dt), fl ? "" : "(long long)", "acc");
  }
  cu_line(C, 1, "}");
  fprintf(C->f, "}\n");
  return PC_OK;
}

/* an element of dtype t at p[i] read as a double (floats) or a long long (ints) */
static void put_get(cctx *C, pc_dtype t, const char *p, const char *i) {
  if (pc_dtype_is_float(t)) fprintf(C->f, "(double)%s(((const %s *)%s)[%s])", load_fn(t), cu_types[t].mem, p, i);
  else fprintf(C->f, "(long long)((const %s *)%s)[%s]", cu_types[t].mem, p, i);
}

static void put_set(cctx *C, int ind, pc_dtype t, const char *p, const char *i, const char *v) {
  fprintf(C->f, "%*s", 2 * ind, "");
  if (t == PC_bool) fprintf(C->f, "((unsigned char *)%s)[%s] = (unsigned char)((%s) != 0);\n", p, i, v);
  else if (pc_dtype_is_float(t)) fprintf(C->f, "((%s *)%s)[%s] = %s((%s)(%s));\n", cu_types[t].mem, p, i, store_fn(t), cu_is_half(t) ? "float" : cu_types[t].mem, v);
  else fprintf(C->f, "((%s *)%s)[%s] = (%s)(%s);\n", cu_types[t].mem, p, i, cu_types[t].mem, v);
}

/* gather: [dtype, x, idx, out shapes, axis, idx dtype]; bufs out, x, idx; one thread per index.
 * gather_strided: then x's element offset and 8 strides (x read in place, e.g. a broadcast). */
static pc_status render_gather_any(cctx *C, const kir_kernel *k, int strided) {
  shp x, ix, o;
  const int64_t *r = get_shape(get_shape(get_shape(k->params + 1, &x), &ix), &o);
  int axis = (int)r[0];
  pc_dtype idt = (pc_dtype)r[1];
  const char *E = cu_bits_type(pc_dtype_size((pc_dtype)k->params[0]));
  int64_t n = numel(&ix);
  cu_call_signature(C, k, CU_BLOCK, cu_grid1(C, n, CU_BLOCK));
  put_dims(C, "id", &ix);
  if (strided) {
    fprintf(C->f, "  const long long xs[%d] = {", x.rank ? x.rank : 1);
    for (int d = 0; d < x.rank; d++) fprintf(C->f, "%s%lldLL", d ? ", " : "", (long long)r[3 + d]);
    fprintf(C->f, "%s};\n", x.rank ? "" : "0");
  } else {
    put_strides(C, "xs", &x);
  }
  cu_line(C, 1, "PC_GRID_STRIDE(i, %lldLL) {", (long long)n);
  fprintf(C->f, "    long long j = ");
  put_get(C, idt, "a2", "i");
  fprintf(C->f, ";\n");
  cu_line(C, 2, "if (j < 0) j += %lldLL;", (long long)(x.rank ? x.d[axis] : 1));
  cu_line(C, 2, "if (j < 0 || j >= %lldLL) { primc_status = 3; continue; }", (long long)(x.rank ? x.d[axis] : 1));
  cu_line(C, 2, "long long r_ = i, src = %lldLL;", (long long)(strided ? r[2] : 0));
  cu_line(C, 2, "for (int d = %d; d >= 0; d--) {", ix.rank - 1);
  cu_line(C, 3, "const long long c = r_ %% id[d];");
  cu_line(C, 3, "r_ /= id[d];");
  cu_line(C, 3, "src += (d == %d ? j : c) * xs[d];", axis);
  cu_line(C, 2, "}");
  cu_line(C, 2, "((%s *)a0)[i] = ((const %s *)a1)[src];", E, E);
  cu_line(C, 1, "}");
  fprintf(C->f, "}\n");
  return PC_OK;
}

static pc_status render_gather(cctx *C, const kir_kernel *k) { return render_gather_any(C, k, 0); }
static pc_status render_gather_strided(cctx *C, const kir_kernel *k) { return render_gather_any(C, k, 1); }

/* scatter: [dtype, x, idx, upd, out shapes, axis, idx dtype, mode]; bufs out, x, idx, upd.
 * One thread per line of x along the axis: it copies the line, then applies the
 * updates that land in it in index order, as the CPU kernel does. */
static pc_status render_scatter(cctx *C, const kir_kernel *k) {
  shp x, ix, up, o;
  const int64_t *r = get_shape(get_shape(get_shape(get_shape(k->params + 1, &x), &ix), &up), &o);
  pc_dtype dt = (pc_dtype)k->params[0], idt = (pc_dtype)r[1];
  int axis = (int)r[0], mode = (int)r[2];
  int64_t len = x.rank ? x.d[axis] : 1, lines = len ? numel(&x) / len : 0;
  const char *E = cu_bits_type(pc_dtype_size(dt));
  cu_call_signature(C, k, CU_BLOCK, cu_grid1(C, lines, CU_BLOCK));
  put_dims(C, "xd", &x);
  put_dims(C, "id", &ix);
  put_strides(C, "xs", &x);
  put_strides(C, "is", &ix);
  put_strides(C, "us", &up);
  cu_line(C, 1, "PC_GRID_STRIDE(l, %lldLL) {", (long long)lines);
  cu_line(C, 2, "long long r_ = l, xo = 0, io = 0, uo = 0;");
  cu_line(C, 2, "bool hit = true;");
  cu_line(C, 2, "for (int d = %d; d >= 0; d--) {", x.rank - 1);
  cu_line(C, 3, "if (d == %d) continue;", axis);
  cu_line(C, 3, "const long long c = r_ %% xd[d];");
  cu_line(C, 3, "r_ /= xd[d];");
  cu_line(C, 3, "xo += c * xs[d], io += c * is[d], uo += c * us[d];");
  cu_line(C, 3, "hit = hit && c < id[d];");
  cu_line(C, 2, "}");
  cu_line(C, 2, "if (a0 != a1)");
  cu_line(C, 3, "for (long long a = 0; a < %lldLL; a++) ((%s *)a0)[xo + a * xs[%d]] = ((const %s *)a1)[xo + a * xs[%d]];",
       (long long)len, E, axis, E, axis);
  cu_line(C, 2, "if (!hit) continue;");
  cu_line(C, 2, "for (long long t = 0; t < %lldLL; t++) {", (long long)(ix.rank ? ix.d[axis] : 1));
  cu_line(C, 3, "const long long ii = io + t * is[%d], ui = uo + t * us[%d];", axis, axis);
  fprintf(C->f, "      long long j = ");
  put_get(C, idt, "a2", "ii");
  fprintf(C->f, ";\n");
  cu_line(C, 3, "if (j < 0) j += %lldLL;", (long long)len);
  cu_line(C, 3, "if (j < 0 || j >= %lldLL) { primc_status = 3; break; }", (long long)len);
  cu_line(C, 3, "const long long di = xo + j * xs[%d];", axis);
  if (mode == 0) {
    cu_line(C, 3, "((%s *)a0)[di] = ((const %s *)a3)[ui];", E, E);
  } else {
    int fl = pc_dtype_is_float(dt);
    const char *V = fl ? "double" : "long long";
    fprintf(C->f, "      const %s a = ", V);
    put_get(C, dt, "a0", "di");
    fprintf(C->f, ", b = ");
    put_get(C, dt, "a3", "ui");
    fprintf(C->f, ";\n");
    static const char *const fops[] = {"", "a + b", "a * b", "fmax(a, b)", "fmin(a, b)"};
    static const char *const iops[] = {"", "(long long)((unsigned long long)a + (unsigned long long)b)",
                                       "(long long)((unsigned long long)a * (unsigned long long)b)", "a > b ? a : b",
                                       "a < b ? a : b"};
    if (mode < 1 || mode > 4) return cu_fail_kernel(C, "%s: unknown scatter reduce", "scatter");
    put_set(C, 3, dt, "a0", "di", fl ? fops[mode] : iops[mode]);
  }
  cu_line(C, 2, "}");
  cu_line(C, 1, "}");
  fprintf(C->f, "}\n");
  return PC_OK;
}

/* outer (dims before axis), len (axis), inner (dims after) */
static void split_axis(const shp *s, int axis, int64_t *outer, int64_t *len, int64_t *inner) {
  *outer = *inner = 1;
  for (int i = 0; i < axis; i++) *outer *= s->d[i];
  for (int i = axis + 1; i < s->rank; i++) *inner *= s->d[i];
  *len = s->rank ? s->d[axis] : 1;
}

/* cumsum: [dtype, x, out shapes, axis, exclusive, reverse]; one thread per line, in double / wrapping int64 */
static pc_status render_cumsum(cctx *C, const kir_kernel *k) {
  shp x, o;
  const int64_t *r = get_shape(get_shape(k->params + 1, &x), &o);
  pc_dtype dt = (pc_dtype)k->params[0];
  int axis = (int)r[0], excl = (int)r[1], rev = (int)r[2], fl = pc_dtype_is_float(dt);
  int64_t outer, len, inner;
  split_axis(&x, axis, &outer, &len, &inner);
  cu_call_signature(C, k, CU_BLOCK, cu_grid1(C, outer * inner, CU_BLOCK));
  cu_line(C, 1, "PC_GRID_STRIDE(l, %lldLL) {", (long long)(outer * inner));
  cu_line(C, 2, "const long long a = l / %lldLL, c = l %% %lldLL;", (long long)inner, (long long)inner);
  cu_line(C, 2, "%s s = 0;", fl ? "double" : "unsigned long long");
  cu_line(C, 2, "for (long long t = 0; t < %lldLL; t++) {", (long long)len);
  char pos[64];
  if (rev) snprintf(pos, sizeof pos, "(%lldLL - 1 - t)", (long long)len);
  else snprintf(pos, sizeof pos, "t");
  cu_line(C, 3, "const long long i = (a * %lldLL + %s) * %lldLL + c;", (long long)len, pos, (long long)inner);
  fprintf(C->f, "      const %s v = %s", fl ? "double" : "unsigned long long", fl ? "" : "(unsigned long long)");
  put_get(C, dt, "a1", "i");
  fprintf(C->f, ";\n");
  if (!excl) cu_line(C, 3, "s += v;");
  put_set(C, 3, dt, "a0", "i", fl ? "s" : "(long long)s");
  if (excl) cu_line(C, 3, "s += v;");
  cu_line(C, 2, "}");
  cu_line(C, 1, "}");
  fprintf(C->f, "}\n");
  return PC_OK;
}

/* sort / topk: [dtype, x, values, indices shapes, axis, descending, k (-1: all)]; bufs values, indices, x, scratch.
 * One thread per element: its rank in the stable order (NaN last either way) is where it goes. */
static pc_status render_sort(cctx *C, const kir_kernel *k) {
  shp x, vs, is;
  const int64_t *r = get_shape(get_shape(get_shape(k->params + 1, &x), &vs), &is);
  pc_dtype dt = (pc_dtype)k->params[0];
  int axis = (int)r[0], desc = (int)r[1], fl = pc_dtype_is_float(dt);
  if (axis < 0) axis += x.rank;
  int64_t outer, len, inner;
  split_axis(&x, axis, &outer, &len, &inner);
  int64_t kk = r[2] < 0 ? len : r[2];
  const char *V = fl ? "double" : "long long", *E = cu_bits_type(pc_dtype_size(dt));
  cu_call_signature(C, k, CU_BLOCK, cu_grid1(C, outer * inner * len, CU_BLOCK));
  cu_line(C, 1, "PC_GRID_STRIDE(e, %lldLL) {", (long long)(outer * inner * len));
  cu_line(C, 2, "const long long i = e %% %lldLL, l = e / %lldLL, a = l / %lldLL, c = l %% %lldLL;", (long long)len,
       (long long)len, (long long)inner, (long long)inner);
  cu_line(C, 2, "const long long base = a * %lldLL + c, yi = base + i * %lldLL;", (long long)(len * inner), (long long)inner);
  fprintf(C->f, "    const %s y = ", V);
  put_get(C, dt, "a2", "yi");
  fprintf(C->f, ";\n");
  cu_line(C, 2, "long long rank = 0;");
  cu_line(C, 2, "for (long long j = 0; j < %lldLL; j++) {", (long long)len);
  cu_line(C, 3, "if (j == i) continue;");
  cu_line(C, 3, "const long long zi = base + j * %lldLL;", (long long)inner);
  fprintf(C->f, "      const %s z = ", V);
  put_get(C, dt, "a2", "zi");
  fprintf(C->f, ";\n");
  cu_line(C, 3, "const bool zn = z != z, yn = y != y;");
  cu_line(C, 3, "const int cmp = (zn || yn) ? (int)zn - (int)yn : %s((z > y) - (z < y));", desc ? "-" : "");
  cu_line(C, 3, "rank += cmp < 0 || (cmp == 0 && j < i);");
  cu_line(C, 2, "}");
  cu_line(C, 2, "if (rank < %lldLL) {", (long long)kk);
  cu_line(C, 3, "const long long oi = (a * %lldLL + rank) * %lldLL + c;", (long long)kk, (long long)inner);
  cu_line(C, 3, "((%s *)a0)[oi] = ((const %s *)a2)[yi];", E, E);
  cu_line(C, 3, "((long long *)a1)[oi] = i;");
  cu_line(C, 2, "}");
  cu_line(C, 1, "}");
  fprintf(C->f, "}\n");
  return PC_OK;
}

/* fft: [dtype, in shape, out shape, type (0 fft, 1 ifft, 2 rfft, 3 irfft), length] with numpy's
 * conventions; one thread per output element, a direct DFT in double */
static pc_status render_fft(cctx *C, const kir_kernel *k) {
  shp in, out;
  const int64_t *r = get_shape(get_shape(k->params + 1, &in), &out);
  int type = (int)r[0];
  long long n = r[1], mi = in.rank ? in.d[in.rank - 1] : 1, mo = out.rank ? out.d[out.rank - 1] : 1;
  long long rows = mi ? numel(&in) / mi : 0, m = type == 3 ? n : mi;
  if (type < 0 || type > 3 || n < 1) return cu_fail_kernel(C, "%s: bad fft parameters", "fft");
  int cin = type != 2, cout = type != 3;
  cu_call_signature(C, k, CU_BLOCK, cu_grid1(C, rows * mo, CU_BLOCK));
  cu_line(C, 1, "PC_GRID_STRIDE(e, %lldLL) {", rows * mo);
  cu_line(C, 2, "const long long row = e / %lldLL, k = e %% %lldLL;", mo, mo);
  cu_line(C, 2, "const float *src = (const float *)a1 + row * %lldLL;", mi * (cin ? 2 : 1));
  cu_line(C, 2, "double sr = 0, si = 0;");
  cu_line(C, 2, "for (long long t = 0; t < %lldLL; t++) {", m < n ? m : n);
  if (type == 3) { /* hermitian extension of the n/2+1 inputs; X[0] and X[n/2] taken real */
    cu_line(C, 3, "const bool up = t > %lldLL;", n / 2);
    cu_line(C, 3, "const long long u = up ? %lldLL - t : t;", n);
    cu_line(C, 3, "double re = u < %lldLL ? src[2 * u] : 0.0, im = u < %lldLL ? src[2 * u + 1] : 0.0;", mi, mi);
    cu_line(C, 3, "if (u == 0 || (%d && u == %lldLL)) im = 0.0;", n % 2 == 0, n / 2);
    cu_line(C, 3, "if (up) im = -im;");
  } else if (cin) {
    cu_line(C, 3, "const double re = t < %lldLL ? src[2 * t] : 0.0, im = t < %lldLL ? src[2 * t + 1] : 0.0;", mi, mi);
  } else {
    cu_line(C, 3, "const double re = t < %lldLL ? src[t] : 0.0, im = 0.0;", mi);
  }
  cu_line(C, 3, "double s_, c_;");
  cu_line(C, 3, "sincos(%d.0 * 6.283185307179586 * (double)((k * t) %% %lldLL) / %lld.0, &s_, &c_);",
       type == 1 || type == 3 ? 1 : -1, n, n);
  cu_line(C, 3, "sr += re * c_ - im * s_;");
  cu_line(C, 3, "si += re * s_ + im * c_;");
  cu_line(C, 2, "}");
  const char *scale = type == 1 || type == 3 ? " / " : "";
  char sc[32] = "";
  if (*scale) snprintf(sc, sizeof sc, " / %lld.0", n);
  if (cout) {
    cu_line(C, 2, "((float *)a0)[e * 2] = (float)(sr%s);", sc);
    cu_line(C, 2, "((float *)a0)[e * 2 + 1] = (float)(si%s);", sc);
  } else {
    cu_line(C, 2, "((float *)a0)[e] = (float)(sr%s);", sc);
  }
  cu_line(C, 1, "}");
  fprintf(C->f, "}\n");
  return PC_OK;
}

/* random: [dtype, out shape, normal, seed, a, b (double bits)]; element i draws philox(i, seed) as in
 * the interpreter: uniform a + (b - a) u kept below b, normal a + b sqrt(-2 ln(1 - u1)) cos(2 pi u2) */
static pc_status render_random(cctx *C, const kir_kernel *k) {
  shp o;
  const int64_t *r = get_shape(k->params + 1, &o);
  pc_dtype dt = (pc_dtype)k->params[0];
  int normal = (int)r[0], fl = pc_dtype_is_float(dt);
  uint64_t seed = (uint64_t)r[1];
  double a, b;
  memcpy(&a, &r[2], 8);
  memcpy(&b, &r[3], 8);
  if (dt == PC_c64) return cu_fail_kernel(C, "%s: random is not defined on c64", "random");
  int64_t n = numel(&o);
  cu_call_signature(C, k, CU_BLOCK, cu_grid1(C, n, CU_BLOCK));
  cu_line(C, 1, "const double a = %.17g, b = %.17g;", a, b);
  cu_line(C, 1, "PC_GRID_STRIDE(i, %lldLL) {", (long long)n);
  cu_line(C, 2, "unsigned r[4];");
  cu_line(C, 2, "pc_philox((unsigned)i, (unsigned)((unsigned long long)i >> 32), %uu, %uu, r);", (unsigned)seed,
       (unsigned)(seed >> 32));
  cu_line(C, 2, "const double u = pc_unit(r[0], r[1]);");
  if (normal) cu_line(C, 2, "double v = a + b * sqrt(-2.0 * log(1.0 - u)) * cos(6.283185307179586 * pc_unit(r[2], r[3]));");
  else cu_line(C, 2, "double v = a + (b - a) * u;");
  if (!fl && !normal) cu_line(C, 2, "v = floor(v) >= b ? ceil(b) - 1.0 : floor(v);");
  if (!fl && dt != PC_bool) /* saturating, as the interpreter stores doubles into ints */
    cu_line(C, 2, "v = v != v ? 0.0 : v <= (double)%s ? (double)%s : v >= (double)%s ? (double)%s : v;", cu_types[dt].lo,
         cu_types[dt].lo, cu_types[dt].hi, cu_types[dt].hi);
  put_set(C, 2, dt, "a0", "i", fl || dt == PC_bool ? "v" : "(long long)v");
  if (fl && !normal) { /* rounding may have reached b: the next value down */
    const char *E = cu_bits_type(pc_dtype_size(dt));
    fprintf(C->f, "    if (");
    put_get(C, dt, "a0", "i");
    fprintf(C->f, " >= b) {\n");
    cu_line(C, 3, "%s bits = ((%s *)a0)[i];", E, E);
    cu_line(C, 3, "const %s sign = (%s)((%s)1 << %d);", E, E, E, (int)(8 * pc_dtype_size(dt) - 1));
    cu_line(C, 3, "bits = ((bits & sign) || (bits & (%s)~sign) == 0) ? (%s)(((bits & (%s)~sign) + 1) | sign) : (%s)(bits - 1);",
         E, E, E, E);
    cu_line(C, 3, "((%s *)a0)[i] = bits;", E);
    cu_line(C, 2, "}");
  }
  cu_line(C, 1, "}");
  fprintf(C->f, "}\n");
  return PC_OK;
}

typedef pc_status (*call_fn)(cctx *C, const kir_kernel *k);

/* the host side would have to read the count back from the device to report the output's
 * dims (primc_cuda_model_desc has no output_dims): CPU only for now */
static pc_status render_nonzero(cctx *C, const kir_kernel *k) {
  (void)k;
  return cu_fail_kernel(C, "the size of its result depends on the data: %s compiles for the CPU only, not for CUDA",
                     "nonzero");
}

/* the attention call's operand bases for head h = (b0, b1): q0, k0, v0, mk0 (with a mask), o0 */
static void put_attention_bases(cctx *C, const int64_t *q) {
  static const char *const names[5] = {"q", "k", "v", "mk", "o"};
  for (int o = 0; o < 5; o++) {
    const int64_t *st = q + 7 + 5 * o;
    if (o == 3 && !(q[32] & 1)) continue;
    cu_line(C, 2, "const long long %s0 = %lldLL + b0 * %lldLL + b1 * %lldLL;", names[o], (long long)st[0], (long long)st[1],
            (long long)st[2]);
  }
}

/* query row m's output: each lane's sums acc[j] (columns lane + 32 j) over the softmax's sum */
static void put_attention_store(cctx *C, const int64_t *q) {
  long long Dv = q[6], vl = (Dv + 31) / 32;
  cu_line(C, 2, "for (int j = 0; j < %lld; j++) {", vl);
  cu_line(C, 3, "const long long c = lane + 32 * j;");
  cu_line(C, 3, "if (c < %lldLL) y[o0 + m * %lldLL + c * %lldLL] = acc[j] / sum;", Dv, (long long)q[30], (long long)q[31]);
  cu_line(C, 2, "}");
}

/* a warp's key tile, D x 33 floats, and its query row in the 48 KB of static shared memory */
_Static_assert(PRIMC_ATTENTION_MAX_DIM * 34 * 4 <= 48 * 1024, "the attention call's head dims fit one warp's tile");

/* attention with the lanes over the keys: a warp per (head, query row) takes 32 keys at a time, copies their rows
 * into shared memory transposed (coalesced reads, the lanes over the head dims), then each lane computes one key's
 * score against the query row (kept in shared memory), the chunk's max and sum by shuffles (online softmax, a
 * rescale per chunk, not per key), and its Dv / 32 output sums over the chunk's keys, their weights broadcast by
 * shuffles. The lanes-over-dims kernel below pays two shuffle trees and two exps in sequence for every key
 * (BERT-base: 113 us a layer on an H200, a third of its kernel time). */
static pc_status render_attention_keys(cctx *C, const kir_kernel *k) {
  const int64_t *q = k->params;
  long long B1 = q[2], Sq = q[3], Sk = q[4], D = q[5], Dv = q[6], rows = (long long)(q[1] * q[2] * q[3]);
  long long vl = (Dv + 31) / 32;
  int wpb = D <= 64 ? 4 : D <= 128 ? 2 : 1; /* warps a block */
  double scale;
  memcpy(&scale, &q[33], sizeof scale);
  cu_call_signature(C, k, 32 * wpb, cu_grid1(C, rows, wpb));
  cu_line(C, 1, "__shared__ float qs[%d][%lld], kt[%d][%lld][33];", wpb, D, wpb, D);
  cu_line(C, 1, "float *y = (float *)a0;");
  cu_line(C, 1, "const float *Q = (const float *)a1, *K = (const float *)a2, *V = (const float *)a3;");
  if (q[32] & 1) cu_line(C, 1, "const float *Mk = (const float *)a4;");
  cu_line(C, 1, "const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;");
  cu_line(C, 1, "for (long long t = blockIdx.x * %dLL + w; t < %lldLL; t += gridDim.x * %dLL) {", wpb, rows, wpb);
  cu_line(C, 2, "const long long h = t / %lldLL, m = t %% %lldLL, b0 = h / %lldLL, b1 = h %% %lldLL;", Sq, Sq, B1, B1);
  put_attention_bases(C, q);
  cu_line(C, 2, "__syncwarp();");
  cu_line(C, 2, "for (int d = lane; d < %lld; d += 32) qs[w][d] = Q[q0 + m * %lldLL + d * %lldLL] * (float)(%.17g);", D,
          (long long)q[10], (long long)q[11], scale);
  cu_line(C, 2, "float acc[%lld], mx = -PC_INF_F, sum = 0.0f;", vl);
  cu_line(C, 2, "for (int j = 0; j < %lld; j++) acc[j] = 0.0f;", vl);
  if (q[32] & 2) cu_line(C, 2, "const long long kend = m + 1 < %lldLL ? m + 1 : %lldLL; /* causal */", Sk, Sk);
  else cu_line(C, 2, "const long long kend = %lldLL;", Sk);
  cu_line(C, 2, "for (long long n0 = 0; n0 < kend; n0 += 32) {");
  cu_line(C, 3, "const int cnt = kend - n0 < 32 ? (int)(kend - n0) : 32;");
  cu_line(C, 3, "__syncwarp(); /* the last chunk's reads of kt (and the query row's stores) done */");
  cu_line(C, 3, "for (int r = 0; r < cnt; r++)");
  cu_line(C, 4, "for (int d = lane; d < %lld; d += 32) kt[w][d][r] = K[k0 + (n0 + r) * %lldLL + d * %lldLL];", D,
          (long long)q[15], (long long)q[16]);
  cu_line(C, 3, "__syncwarp();");
  cu_line(C, 3, "float s = -PC_INF_F;");
  cu_line(C, 3, "if (lane < cnt) {");
  cu_line(C, 4, "float s0 = 0.0f, s1 = 0.0f;");
  cu_line(C, 4, "int d = 0;");
  cu_line(C, 4, "for (; d + 1 < %lld; d += 2) s0 += qs[w][d] * kt[w][d][lane], s1 += qs[w][d + 1] * kt[w][d + 1][lane];", D);
  cu_line(C, 4, "if (d < %lld) s0 += qs[w][d] * kt[w][d][lane];", D);
  cu_line(C, 4, "s = s0 + s1;");
  if (q[32] & 1) cu_line(C, 4, "s += Mk[mk0 + m * %lldLL + (n0 + lane) * %lldLL];", (long long)q[25], (long long)q[26]);
  cu_line(C, 3, "}");
  cu_line(C, 3, "float cm = s;");
  cu_line(C, 3, "for (int o = 16; o > 0; o >>= 1) cm = fmaxf(cm, __shfl_xor_sync(0xffffffffu, cm, o));");
  cu_line(C, 3, "if (cm == -PC_INF_F) continue; /* every key of the chunk masked out */");
  cu_line(C, 3, "const float nm = fmaxf(mx, cm), alpha = mx == -PC_INF_F ? 0.0f : expf(mx - nm);");
  cu_line(C, 3, "const float p = s == -PC_INF_F ? 0.0f : expf(s - nm);");
  cu_line(C, 3, "float cs = p;");
  cu_line(C, 3, "for (int o = 16; o > 0; o >>= 1) cs += __shfl_xor_sync(0xffffffffu, cs, o);");
  cu_line(C, 3, "mx = nm, sum = sum * alpha + cs;");
  cu_line(C, 3, "for (int j = 0; j < %lld; j++) acc[j] *= alpha;", vl);
  cu_line(C, 3, "for (int jj = 0; jj < cnt; jj++) {");
  cu_line(C, 4, "const float pj = __shfl_sync(0xffffffffu, p, jj);");
  cu_line(C, 4, "const float *vr = V + v0 + (n0 + jj) * %lldLL;", (long long)q[20]);
  cu_line(C, 4, "for (int j = 0; j < %lld; j++) {", vl);
  cu_line(C, 5, "const long long c = lane + 32 * j;");
  cu_line(C, 5, "if (c < %lldLL) acc[j] += pj * vr[c * %lldLL];", Dv, (long long)q[21]);
  cu_line(C, 4, "}");
  cu_line(C, 3, "}");
  cu_line(C, 2, "}");
  put_attention_store(C, q);
  cu_line(C, 1, "}");
  fprintf(C->f, "}\n");
  return PC_OK;
}

/* attention: a warp per (head, query row), its lanes over the head dims (the score's dot product summed across
 * the warp by shuffles, each lane keeping Dv / 32 of the output sums); online softmax over the keys, the scores
 * never stored; the same arithmetic as runtime/attention.c's plain rows. The kernel of before the one above, kept
 * to compare: PRIMC_CUDA_ATTN=dims at compile time. */
static pc_status render_attention(cctx *C, const kir_kernel *k) {
  const char *force = getenv("PRIMC_CUDA_ATTN");
  if (!(force && !strcmp(force, "dims"))) return render_attention_keys(C, k);
  const int64_t *q = k->params;
  long long B1 = q[2], Sq = q[3], Sk = q[4], D = q[5], Dv = q[6], rows = (long long)(q[1] * q[2] * q[3]);
  long long dl = (D + 31) / 32, vl = (Dv + 31) / 32;
  double scale;
  memcpy(&scale, &q[33], sizeof scale);
  cu_call_signature(C, k, 128, cu_grid1(C, rows, 4));
  cu_line(C, 1, "float *y = (float *)a0;");
  cu_line(C, 1, "const float *Q = (const float *)a1, *K = (const float *)a2, *V = (const float *)a3;");
  if (q[32] & 1) cu_line(C, 1, "const float *Mk = (const float *)a4;");
  cu_line(C, 1, "const int lane = threadIdx.x & 31;");
  cu_line(C, 1, "for (long long t = (blockIdx.x * 128LL + threadIdx.x) >> 5; t < %lldLL; t += gridDim.x * 4LL) {", rows);
  cu_line(C, 2, "const long long h = t / %lldLL, m = t %% %lldLL, b0 = h / %lldLL, b1 = h %% %lldLL;", Sq, Sq, B1, B1);
  put_attention_bases(C, q);
  cu_line(C, 2, "float qv[%lld], acc[%lld], mx = -PC_INF_F, sum = 0.0f;", dl, vl);
  cu_line(C, 2, "for (int j = 0; j < %lld; j++) {", dl);
  cu_line(C, 3, "const long long d = lane + 32 * j;");
  cu_line(C, 3, "qv[j] = d < %lldLL ? Q[q0 + m * %lldLL + d * %lldLL] * (float)(%.17g) : 0.0f;", D, (long long)q[10],
          (long long)q[11], scale);
  cu_line(C, 2, "}");
  cu_line(C, 2, "for (int j = 0; j < %lld; j++) acc[j] = 0.0f;", vl);
  cu_line(C, 2, "for (long long n = 0; n < %lldLL; n++) {", Sk);
  if (q[32] & 2) cu_line(C, 3, "if (n > m) break; /* causal */");
  cu_line(C, 3, "float s = 0.0f;");
  cu_line(C, 3, "for (int j = 0; j < %lld; j++) {", dl);
  cu_line(C, 4, "const long long d = lane + 32 * j;");
  cu_line(C, 4, "if (d < %lldLL) s += qv[j] * K[k0 + n * %lldLL + d * %lldLL];", D, (long long)q[15], (long long)q[16]);
  cu_line(C, 3, "}");
  cu_line(C, 3, "for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);");
  if (q[32] & 1) cu_line(C, 3, "s += Mk[mk0 + m * %lldLL + n * %lldLL];", (long long)q[25], (long long)q[26]);
  cu_line(C, 3, "if (s == -PC_INF_F) continue;");
  cu_line(C, 3, "const float nm = fmaxf(mx, s), alpha = mx == -PC_INF_F ? 0.0f : expf(mx - nm), p = expf(s - nm);");
  cu_line(C, 3, "mx = nm, sum = sum * alpha + p;");
  cu_line(C, 3, "for (int j = 0; j < %lld; j++) {", vl);
  cu_line(C, 4, "const long long c = lane + 32 * j;");
  cu_line(C, 4, "acc[j] = acc[j] * alpha + (c < %lldLL ? p * V[v0 + n * %lldLL + c * %lldLL] : 0.0f);", Dv, (long long)q[20],
          (long long)q[21]);
  cu_line(C, 3, "}");
  cu_line(C, 2, "}");
  put_attention_store(C, q);
  cu_line(C, 1, "}");
  fprintf(C->f, "}\n");
  return PC_OK;
}

/* the runtime calls of codegen/calls.def (primc_k_<name> on the CPU) by row: a CUDA rendering (or, for
 * nonzero, a refusal saying why); NULL for the host-only ones (dot_packed, dot_bf16, dot_int, dot_i8, conv_i8, maxpool,
 * maxpool_u8 and dot_cols, which host compiles alone make), named in the error */
static const call_fn call_rules[KC_COUNT] = {
    [KC_copy] = render_copy,       [KC_dot] = render_dot,       [KC_conv] = render_conv, [KC_gather] = render_gather,
    [KC_scatter] = render_scatter, [KC_cumsum] = render_cumsum, [KC_sort] = render_sort,  [KC_fft] = render_fft,
    [KC_random] = render_random,   [KC_gather_strided] = render_gather_strided, [KC_nonzero] = render_nonzero,
    [KC_attention] = render_attention, [KC_dot_b2] = render_dot,
};
_Static_assert(KC_COUNT == 21, "calls.def changed: give the new call a CUDA rendering in call_rules (or none), "
                               "then raise the count");

pc_status cu_render_call(cctx *C, const kir_kernel *k) {
  if (call_rules[k->call]) return call_rules[k->call](C, k);
  const char *what = k->n_nodes ? pc_prim(k->nodes[0]->op)->name : kir_call_name(k->call);
  return cu_fail_kernel(C, "%s has no CUDA kernel yet", what);
}
