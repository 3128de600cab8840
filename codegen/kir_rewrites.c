/* codegen/kir_rewrites.c: the kernel-IR rewrites that follow lowering, one section each, run from one list
 * (the end of this file) in its order: kernels merged into calls, weights packed, loops collapsed. Each
 * keeps the program's meaning: a renderer that ignores the hints they set (absorbed, epilogue, pair)
 * and launches every kernel in order computes the same result. */
#include "codegen/kir_internal.h"
#include "runtime/primc_rt.h"

#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

/* ---------------------------------------------------------------- dot epilogues */

static int map_collapses(const kir_map *m, const kir_kernel *k, int l);
static int expr_collapses(const kir_expr *e, const kir_kernel *k, int l);
static void kernel_merge_loops(kir_kernel *k, int l);

/* k's parallel loops before its last merged into one where every map walks them as one, until two are left
 * (an elementwise kernel over [B, S, N] after a [B S, N] dot); 1 when k then loops over [M, N] */
static int loops_as_rows(kir_kernel *k, int64_t M, int64_t N) {
  if (k->n_loops < 2 || k->n_par != k->n_loops || k->extent[k->n_loops - 1] != N) return 0;
  int64_t rows = 1;
  for (int l = 0; l + 1 < k->n_loops; l++) rows *= k->extent[l];
  if (rows != M) return 0;
  for (int l = k->n_loops - 3; l >= 0; l--) {
    int ok = 1;
    for (int s = 0; ok && s < k->n_stores; s++)
      ok = map_collapses(&k->stores[s].map, k, l) && expr_collapses(k->stores[s].value, k, l);
    if (!ok) return 0;
    kernel_merge_loops(k, l);
  }
  return k->n_loops == 2;
}

/* A [M, N] dot whose result only the next kernel reads, element for element over the
 * same [M, N] loops (its leading loops merged into M's where they collapse): that kernel becomes the GEMM's
 * epilogue. */
static pc_status fuse_epilogues(kir_program *p) {
  kir_touches t;
  if (kir_touches_build(p, &t) != PC_OK) return p->g->status;
  for (int i = 0; i + 1 < p->n_kernels; i++) {
    kir_kernel *c = &p->kernels[i], *k = &p->kernels[i + 1];
    if (c->kind != KK_CALL || c->call != KC_dot || k->kind != KK_LOOP || c->params[1] != 1) continue;
    if (!c->n_nodes || !k->n_nodes || c->nodes[0]->group < 0 || c->nodes[0]->group != k->nodes[0]->group)
      continue; /* only inside a fused group: --unfused stays one launch per prim */
    int64_t M = c->params[2], N = c->params[3];
    int s = c->args[0], other = 0, reads = 0;
    if (p->bufs[s].place != KP_WORKSPACE || kir_touched_outside(p, &t, s, i, i + 1) || !loops_as_rows(k, M, N))
      continue;
    for (int j = 0; j < k->n_stores; j++) {
      reads |= kir_expr_reads(k->stores[j].value, s, N, &other);
      other |= k->stores[j].buf == s;
    }
    if (!reads || other) continue;
    c->has_epilogue = 1;
    c->epilogue = i + 1;
    k->absorbed = 1;
  }
  kir_touches_free(&t);
  return PC_OK;
}

/* ---------------------------------------------------------------- conv epilogues */

/* what a conv's epilogue kernel was recognized as: y = clamp(act(conv + bias + res), lo, hi) */
typedef struct conv_epi {
  const kir_kernel *k;
  int conv_buf, bias, res; /* buffer ids; -1 when absent */
  int64_t bias_off, bias_stride, plane, chans; /* plane: output pixels per channel; chans: output channels */
  int64_t cstride[KIR_MAX_LOOPS]; /* row-major element strides of k's loops */
  double lo, hi;
  int act; /* PRIMC_ACT_* */
} conv_epi;

void kir_absorb_in_call(kir_program *p, int i) {
  kir_kernel *c = &p->kernels[i];
  c->has_epilogue = c->epi_in_call = 1;
  c->epilogue = i + 1;
  p->kernels[i + 1].absorbed = 1;
}

int kir_channel_map(const kir_kernel *k, const int64_t *cstride, int64_t plane, int64_t chans, const kir_map *m,
                    int64_t *off, int64_t *stride) {
  int64_t bs = -1;
  for (int l = 0; l < k->n_loops; l++) {
    int64_t cs = cstride[l], st = m->stride[l];
    if (cs >= plane * chans) { /* a loop over images: the same channels again */
      if (st != 0) return 0;
      continue;
    }
    if (cs >= plane) {
      if (cs % plane) return 0;
      int64_t per = cs / plane; /* channels per step of this loop */
      if (st % per || (bs >= 0 && st / per != bs)) return 0;
      bs = st / per;
    } else if (cs * k->extent[l] > plane || st != 0) {
      return 0; /* the loop straddles channels, or the value varies inside a plane */
    }
  }
  *off = m->offset;
  *stride = bs < 0 ? 0 : bs;
  return 1;
}

/* a load that depends on the output channel only: offset + bias_stride * channel */
static int bias_map(conv_epi *e, const kir_map *m) {
  return kir_channel_map(e->k, e->cstride, e->plane, e->chans, m, &e->bias_off, &e->bias_stride);
}

/* sum of the conv result, at most one per-channel bias and at most one residual, all f32 loads */
static int match_sum(conv_epi *e, const kir_expr *x) {
  if (x->dtype != PC_f32) return 0;
  if (x->kind == KE_PRIM && x->op == PC_OP_add) return match_sum(e, x->args[0]) && match_sum(e, x->args[1]);
  /* a bias of zeros (freshly initialized layers; exporters share one zero initializer among them): none
   * (conv + 0 differs from conv only in -0's sign) */
  if (x->kind == KE_CONST && x->c == 0.0) return 1;
  if (x->kind != KE_LOAD) return 0;
  int n = e->k->n_loops;
  if (x->buf == e->conv_buf) {
    if (!kir_map_is(&x->map, e->cstride, n, 0) || e->conv_buf < 0) return 0;
    e->conv_buf = -1 - e->conv_buf; /* seen once */
    return 1;
  }
  if (kir_map_is(&x->map, e->cstride, n, 0) && e->res < 0) return (e->res = x->buf), 1;
  if (e->bias < 0 && bias_map(e, &x->map)) return (e->bias = x->buf), 1;
  return 0;
}

static int is_const(const kir_expr *x, double *v) {
  if (x->kind != KE_CONST) return 0;
  *v = x->c;
  return 1;
}

static int is_prim(const kir_expr *x, pc_op op) { return x->kind == KE_PRIM && x->op == op && x->dtype == PC_f32; }

static int const_near(const kir_expr *x, double want) {
  double c;
  return is_const(x, &c) && fabs(c - want) <= 1e-6 * fabs(want);
}

/* s where x is 1 + erf(s / sqrt 2), the division either way (s * 0.7071..., s / 1.4142...), the sum either
 * way round; NULL otherwise */
static const kir_expr *one_plus_erf(const kir_expr *x) {
  if (!is_prim(x, PC_OP_add)) return NULL;
  for (int i = 0; i < 2; i++) {
    const kir_expr *t = x->args[i];
    if (!const_near(x->args[1 - i], 1.0) || !is_prim(t, PC_OP_erf)) continue;
    const kir_expr *u = t->args[0];
    if (is_prim(u, PC_OP_div) && const_near(u->args[1], M_SQRT2)) return u->args[0];
    for (int j = 0; is_prim(u, PC_OP_mul) && j < 2; j++)
      if (const_near(u->args[1 - j], M_SQRT1_2)) return u->args[j];
  }
  return NULL;
}

/* the factors of a product tree of f32 muls, up to max; -1 when there are more */
static int factors(const kir_expr *x, const kir_expr **f, int n, int max) {
  if (!is_prim(x, PC_OP_mul)) return n < max ? (f[n] = x, n + 1) : -1;
  n = factors(x->args[0], f, n, max);
  return n < 0 ? -1 : factors(x->args[1], f, n, max);
}

/* GELU of the sum, erf form, as the ONNX composite (s / 2 (1 + erf(s / sqrt 2))) and PyTorch's export
 * (s (1 + erf(s / sqrt 2)) / 2) write it: the factors s, 1/2 and 1 + erf(s / sqrt 2) in any grouping */
static int match_gelu(conv_epi *e, const kir_expr *x) {
  const kir_expr *f[3], *s = NULL, *se = NULL;
  int half = 0;
  if (factors(x, f, 0, 3) != 3) return 0;
  for (int i = 0; i < 3; i++) {
    const kir_expr *t;
    if (const_near(f[i], 0.5)) half++;
    else if (!se && (t = one_plus_erf(f[i]))) se = t;
    else if (!s) s = f[i];
    else return 0;
  }
  if (half != 1 || !s || !se || !kir_expr_equal(s, se)) return 0;
  e->act = PRIMC_ACT_GELU;
  return match_sum(e, s);
}

/* the sum, SiLU of it (mul(s, sigmoid(s)) either way round) or GELU of it */
static int match_act(conv_epi *e, const kir_expr *x) {
  if (is_prim(x, PC_OP_mul) && !e->act) {
    for (int i = 0; i < 2; i++) {
      const kir_expr *s = x->args[i], *g = x->args[1 - i];
      if (g->kind == KE_PRIM && g->op == PC_OP_sigmoid && kir_expr_equal(g->args[0], s)) {
        e->act = PRIMC_ACT_SILU;
        return match_sum(e, s);
      }
    }
    if (match_gelu(e, x)) return 1;
  }
  return match_sum(e, x);
}

/* clamp(x, lo, hi), max(x, lo), min(x, hi) with constant bounds, nested, around the sum */
static int match_clamp(conv_epi *e, const kir_expr *x) {
  double c, c2;
  if (x->kind == KE_PRIM && (x->op == PC_OP_max || x->op == PC_OP_min) && x->dtype == PC_f32) {
    int ci = is_const(x->args[1], &c) ? 1 : is_const(x->args[0], &c) ? 0 : -1;
    if (ci < 0) return match_act(e, x);
    if (x->op == PC_OP_max && c > e->lo) e->lo = c;
    if (x->op == PC_OP_min && c < e->hi) e->hi = c;
    return match_clamp(e, x->args[1 - ci]);
  }
  if (x->kind == KE_PRIM && x->op == PC_OP_clamp && is_const(x->args[1], &c) && is_const(x->args[2], &c2)) {
    if (c > e->lo) e->lo = c;
    if (c2 < e->hi) e->hi = c2;
    return match_clamp(e, x->args[0]);
  }
  return match_act(e, x);
}

/* x is exact in t, f16 or bf16 (infinities included): a clamp bound that commutes with rounding to t */
static int exact_in(double x, pc_dtype t) {
  float f = (float)x;
  return (double)f == x && (t == PC_f16 ? pc_f16_to_f32(pc_f32_to_f16(f)) : pc_bf16_to_f32(pc_f32_to_bf16(f))) == f;
}

/* the value under f32(t(v)) (--autocast fp16's rounding of an activation, bf16's where no bf16 dot products are),
 * or NULL */
static const kir_expr *rounded_through(const kir_expr *x, pc_dtype t) {
  if (x->kind != KE_CONVERT || x->dtype != PC_f32 || x->args[0]->kind != KE_CONVERT || x->args[0]->dtype != t) return NULL;
  return x->args[0]->args[0]->dtype == PC_f32 ? x->args[0]->args[0] : NULL;
}

/* a conv call's output dims in its params (codegen/calls.def: the dtype, then x's, w's and y's shapes, 1 + 8 words
 * each), *rank of them */
static const int64_t *conv_out_dims(const int64_t *q, int *rank) {
  *rank = (int)q[1 + 18];
  return q + 1 + 18 + 1;
}

/* k (the loop kernel right after conv call c) as clamp(conv + bias + res), or that rounded to f16 or bf16 (act F16
 * or BF16, when no other activation is there and the bounds are values of that type); 0 when it is anything else */
static int match_conv_epilogue(const kir_program *p, const kir_kernel *c, const kir_kernel *k, conv_epi *e) {
  const int64_t *q = c->params;
  /* f32, 2 spatial dims (rank 4) or 1 (rank 3, run as 2-D of height 1), no input dilation: what
   * primc_conv2d_f32_epi runs */
  if (q[0] != PC_f32 || (q[1] != 4 && q[1] != 3) || q[1 + 27 + 1 + 24] != 1 || q[1 + 27 + 1 + 25] != 1) return 0;
  if (k->n_stores != 1 || k->n_par != k->n_loops || k->stores[0].red != KR_NONE) return 0;
  int rank;
  const int64_t *od = conv_out_dims(q, &rank);
  *e = (conv_epi){.k = k, .conv_buf = c->args[0], .bias = -1, .res = -1, .plane = od[2] * (rank == 4 ? od[3] : 1),
                  .chans = od[1], .lo = -INFINITY, .hi = INFINITY};
  int64_t total = 1, n = 1;
  for (int l = k->n_loops - 1; l >= 0; l--) {
    e->cstride[l] = n;
    n *= k->extent[l];
  }
  for (int d = 0; d < rank; d++) total *= od[d];
  if (n != total || !kir_map_is(&k->stores[0].map, e->cstride, k->n_loops, 0)) return 0;
  const kir_expr *v = k->stores[0].value, *r = rounded_through(v, PC_f16);
  pc_dtype rt = PC_f16;
  if (!r) r = rounded_through(v, rt = PC_bf16);
  if (!match_clamp(e, r ? r : v) || e->conv_buf >= 0) return 0;
  if (r && (e->act || !exact_in(e->lo, rt) || !exact_in(e->hi, rt))) return 0;
  if (r) e->act = rt == PC_f16 ? PRIMC_ACT_F16 : PRIMC_ACT_BF16;
  int y = k->stores[0].buf, x = c->args[1];
  /* y must not be written over the conv's input while the conv reads it; the bias is read throughout */
  return !kir_bufs_overlap(p, y, x) && !(e->bias >= 0 && kir_bufs_overlap(p, y, e->bias));
}

/* A 2-D f32 conv whose result only the next kernel reads, as clamp(conv + bias + residual): the
 * conv call applies it on each output tile (primc_conv2d_f32_epi), no second pass over memory. */
static pc_status fuse_conv_epilogues(kir_program *p) {
  kir_touches t;
  if (kir_touches_build(p, &t) != PC_OK) return p->g->status;
  for (int i = 0; i + 1 < p->n_kernels; i++) {
    kir_kernel *c = &p->kernels[i], *k = &p->kernels[i + 1];
    if (c->kind != KK_CALL || c->call != KC_conv || k->kind != KK_LOOP || c->n_args + 3 > KIR_MAX_CALL_ARGS) continue;
    if (!c->n_nodes || !k->n_nodes || c->nodes[0]->group < 0 || c->nodes[0]->group != k->nodes[0]->group) continue;
    int s = c->args[0], other = 0;
    if (p->bufs[s].place != KP_WORKSPACE) continue;
    for (int j = 0; j < k->n_stores; j++) other |= k->stores[j].buf == s;
    conv_epi e;
    if (other || kir_touched_outside(p, &t, s, i, i + 1) || !match_conv_epilogue(p, c, k, &e)) continue;
    kir_touches_recount(&t, c, -1);
    int64_t *w = c->params + CONV_EPI_AT;
    w[0] = 1, w[1] = e.bias_off, w[2] = e.bias >= 0 ? e.bias_stride : -1, w[3] = e.res >= 0; /* -1: no bias */
    memcpy(&w[4], &e.lo, 8);
    memcpy(&w[5], &e.hi, 8);
    w[6] = e.act;
    c->args[c->n_args++] = k->stores[0].buf;
    c->args[c->n_args++] = e.bias >= 0 ? e.bias : k->stores[0].buf;
    c->args[c->n_args++] = e.res >= 0 ? e.res : k->stores[0].buf;
    kir_absorb_in_call(p, i);
    kir_touches_recount(&t, c, 1);
  }
  kir_touches_free(&t);
  return PC_OK;
}

/* ---------------------------------------------------------------- conv + depthwise pairs */

/* A small conv (a 1x1 widening, a stem) whose fused result only a depthwise conv reads (MobileNet)
 * runs with it in one call, which makes the widened map 16 channels at a time while they are in
 * cache. Its weights then stay plain: the call takes a block of weight rows at a time. */
static pc_status pair_small_conv_depthwise(kir_program *p) {
  const char *force = getenv("PRIMC_CONV_ROW"); /* a forced row other than the pair's keeps convs apart */
  if (p->gpu_sm || (force && *force && strcmp(force, primc_conv_row_name(PRIMC_CONV_ROW_PAIR_DW))))
    return PC_OK; /* CUDA launches each conv of its own */
  kir_touches t;
  if (kir_touches_build(p, &t) != PC_OK) return p->g->status;
  for (int i = 0; i + 2 < p->n_kernels; i++) {
    kir_kernel *a = &p->kernels[i], *b = &p->kernels[i + 2];
    if (a->kind != KK_CALL || a->call != KC_conv || !a->epi_in_call || a->epilogue != i + 1) continue;
    if (b->kind != KK_CALL || b->call != KC_conv || b->pair || b->absorbed) continue;
    int mid = a->args[4];
    if (b->args[1] != mid || p->bufs[mid].place != KP_WORKSPACE || a->params[CONV_EPI_AT + 3]) continue;
    if ((CONV_EPI_IS_RQ(a->params) || CONV_EPI_IS_RQ(b->params)) && !primc_conv_pair_requantizes()) continue;
    primc_conv2d pw, dw;
    if (kir_touched_outside(p, &t, mid, i, i + 2) || !primc_conv2d_of_params(a->params, &pw) ||
        !primc_conv2d_of_params(b->params, &dw) || !primc_conv_plan_pair(&pw, &dw))
      continue;
    /* nor may the second conv's other buffers (its scratch aside) share the map's memory */
    int other = 0;
    for (int j = 0; j < b->n_args; j++) other |= j != 3 && b->args[j] != mid && kir_bufs_overlap(p, b->args[j], mid);
    if (other) continue;
    a->pair = i + 2;
    b->absorbed = 1;
  }
  kir_touches_free(&t);
  return PC_OK;
}

/* ---------------------------------------------------------------- loop collapsing */

/* loops l and l + 1 walk every map as one loop of extent[l] * extent[l + 1] */
static int map_collapses(const kir_map *m, const kir_kernel *k, int l) {
  return m->stride[l] == m->stride[l + 1] * k->extent[l + 1];
}

static int expr_collapses(const kir_expr *e, const kir_kernel *k, int l) {
  if ((e->kind == KE_LOAD || e->kind == KE_INDEX) && !map_collapses(&e->map, k, l)) return 0;
  for (int i = 0; i < e->n_args; i++)
    if (!expr_collapses(e->args[i], k, l)) return 0;
  return 1;
}

static void map_merge(kir_map *m, int l) {
  m->stride[l] = m->stride[l + 1];
  kir_map_drop_loop(m, l + 1);
}

static void expr_merge(kir_expr *e, int l) {
  if (e->kind == KE_LOAD || e->kind == KE_INDEX) map_merge(&e->map, l);
  for (int i = 0; i < e->n_args; i++) expr_merge(e->args[i], l);
}

/* Adjacent loops of the same kind that every load, index and store walks contiguously become
 * one: a [C, 14, 14] elementwise kernel is one loop of C * 196 the vectorizer fills with full
 * vectors, where 14-element inner loops ran scalar, and a global average pool reduces 196
 * elements per channel in one vector loop. Epilogues a call runs on its own row blocks and
 * argmax/argmin (which store a loop's index) keep their loops. */
static void kernel_collapse(kir_kernel *k) {
  if (k->kind != KK_LOOP || k->absorbed) return;
  for (int s = 0; s < k->n_stores; s++)
    if (k->stores[s].red >= KR_ARGMAX) return;
  for (int l = k->n_loops - 2; l >= 0; l--) {
    int ok = l + 1 != k->n_par;
    for (int s = 0; ok && s < k->n_stores; s++)
      ok = map_collapses(&k->stores[s].map, k, l) && expr_collapses(k->stores[s].value, k, l);
    if (ok) kernel_merge_loops(k, l);
  }
}

/* loops l and l + 1 of k as one (every map walks them as one) */
static void kernel_merge_loops(kir_kernel *k, int l) {
  for (int s = 0; s < k->n_stores; s++) {
    map_merge(&k->stores[s].map, l);
    expr_merge(k->stores[s].value, l);
  }
  k->extent[l] *= k->extent[l + 1];
  for (int j = l + 1; j + 1 < k->n_loops; j++) k->extent[j] = k->extent[j + 1];
  k->n_loops--;
  if (l + 1 < k->n_par) k->n_par--;
}

static pc_status collapse_loops(kir_program *p) {
  for (int i = 0; i < p->n_kernels; i++) kernel_collapse(&p->kernels[i]);
  return PC_OK;
}

/* ---------------------------------------------------------------- packed weights (host code) */

/* a [R, C] operand with strides (sr, sc) read as a BLAS matrix: row-major or transposed */
static int gemm_layout(int64_t R, int64_t C, int64_t sr, int64_t sc, int *trans, int64_t *ld) {
  if (R == 1 && sc == 1) return *trans = 0, *ld = C, 1; /* one row (a GEMV's x): its stride is never stepped */
  if (sc == 1 && sr >= C) return *trans = 0, *ld = sr, 1;
  if (sr == 1 && sc >= R) return *trans = 1, *ld = sc, 1;
  return 0;
}

/* a new constant buffer of bytes for v, packed as pk says (pk.buf set here); its id, or -1 */
static int add_packed(kir_program *p, kir_packed pk, int64_t bytes, const pc_value *v) {
  kir_packed *np = pc_alloc(p->g, sizeof *np * (size_t)(p->n_packed + 1));
  kir_buf nb = {KP_CONST, -1, 0, bytes, PC_f32, v};
  int id = np ? kir_buf_add(p, nb) : -1;
  if (id < 0) return -1;
  if (p->n_packed) memcpy(np, p->packed, sizeof *np * (size_t)p->n_packed);
  pk.buf = id;
  np[p->n_packed++] = pk;
  p->packed = np;
  return id;
}

/* the int8 row whose records go beside a packed B multiplied in gemms GEMMs of M rows a run: the host's, when it
 * keeps some and they pay (with run-time dims, whatever the sizes: every build must choose alike); none for a cross
 * target (its runtime runs whichever int8 row it has on plain panels) */
static int i8_prep_row(const kir_program *p, int64_t M, int64_t gemms) {
  return p->cross_isa > 0 ? -1 : p->sizes_vary ? primc_igemm_prep_row(INT64_MAX / 2, 1) : primc_igemm_prep_row(M, gemms);
}

/* the dot's constant B as a new packed constant buffer: f32 GEMM panels; bf16 ones for split (> 0); with
 * chunk (> 0), an i32 B's values as bf16 panels per K chunk; with i8, an i32 B as the int8 GEMM's s8 panels;
 * -1 when it does not qualify */
static int packed_operand(kir_program *p, const kir_kernel *k, int split, int chunk, int i8) {
  const int64_t *q = k->params;
  int64_t M = q[2], N = q[3], K = q[4], lda, ldb;
  int ta, tb;
  const kir_buf *b = &p->bufs[k->args[2]];
  if (q[0] != (chunk || i8 ? PC_i32 : PC_f32) || q[1] != 1 || M < 1 || N < 1 || K < 1 || b->place != KP_CONST || !b->v ||
      !pc_const_data(b->v) || !gemm_layout(M, K, q[6], q[7], &ta, &lda) || !gemm_layout(K, N, q[9], q[10], &tb, &ldb))
    return -1;
  if (tb ? ldb != K : ldb != N) return -1; /* the constant is exactly B (no slice of a bigger one) */
  if (i8 && !primc_igemm_b_fits(tb, N, K, pc_const_data(b->v))) return -1;
  int prep = i8 ? i8_prep_row(p, M, 1) : -1;
  for (int i = 0; i < p->n_packed; i++) /* one packed copy per weight */
    if (p->bufs[p->packed[i].buf].v == b->v && !p->packed[i].groups && p->packed[i].trans == tb &&
        p->packed[i].bf16_split == split && p->packed[i].int_chunks == chunk && p->packed[i].i8 == i8)
      return p->packed[i].buf;
  size_t bytes = i8      ? primc_igemm_packed_b_size_row(N, K, prep)
                 : chunk ? primc_bgemm_int_b_size(N, K, chunk)
                 : split ? primc_bgemm_packed_b_size(N, K, split)
                         : primc_sgemm_packed_b_size_isa(kir_gemm_isa(p), N, K);
  return add_packed(p, (kir_packed){-1, tb, N, K, 0, 0, 0, NULL, split, chunk, i8, prep + 1}, (int64_t)bytes, b->v);
}

/* k becomes call c: its dot params, then the n words of extra (the packed B's bytes first) */
static pc_status dot_call(kir_program *p, kir_kernel *k, kir_call c, const int64_t *extra, int n) {
  int64_t *q = pc_alloc(p->g, sizeof(int64_t) * (size_t)(11 + n));
  if (!q) return p->g->status ? p->g->status : PC_ERR_NOMEM;
  memcpy(q, k->params, sizeof(int64_t) * 11);
  memcpy(q + 11, extra, sizeof(int64_t) * (size_t)n);
  k->params = q;
  k->n_params = 11 + n;
  k->call = c;
  return PC_OK;
}

static void place_weights(kir_program *p) {
  char *used = pc_alloc(p->g, (size_t)p->n_bufs + 1);
  if (!used) return;
  memset(used, 0, (size_t)p->n_bufs + 1);
  for (int i = 0; i < p->n_kernels; i++) kir_mark_kernel_bufs(&p->kernels[i], used);
  p->weights_size = 0;
  for (int i = 0; i < p->n_bufs; i++) {
    kir_buf *b = &p->bufs[i];
    if (b->place != KP_CONST) continue;
    if (!used[i]) b->nbytes = 0; /* its only reader now reads the packed copy */
    b->offset = p->weights_size;
    p->weights_size = kir_align_up(p->weights_size + b->nbytes);
  }
}

/* a 2-D f32 conv's constant weights packed as its plan wants (conv_plan): A strips for this machine's
 * tile, W^T panels, Winograd's transform or the lanes layout; -1 when the plan reads plain weights or
 * the weights are not a constant */
static int packed_conv_weights(kir_program *p, const kir_kernel *k, primc_conv_plan *plan) {
  primc_conv2d c;
  const kir_buf *w = &p->bufs[k->args[2]];
  if (!primc_conv2d_of_params(k->params, &c) || !kir_conv_plan(p, kir_kernel_node(k), &c, 1, plan) ||
      plan->layout == PRIMC_CONV_W_PLAIN || w->place != KP_CONST || !w->v || !pc_const_data(w->v) || w->dtype != PC_f32)
    return -1;
  int layout = plan->layout;
  int64_t og = c.o / c.groups, kk = c.c / c.groups * c.kh * c.kw;
  int mr = plan->tile_mr;
  int xform = layout == PRIMC_CONV_W_WINOGRAD || layout == PRIMC_CONV_W_LANES ? layout : 0;
  if (w->nbytes != c.o * kk * 4) return -1;
  for (int i = 0; i < p->n_packed; i++) { /* one packed copy per weight and layout */
    const kir_packed *q = &p->packed[i];
    if (p->bufs[q->buf].v == w->v && q->groups == c.groups && q->a_mr == mr && q->n == og && q->xform == xform)
      return q->buf;
  }
  return add_packed(p, (kir_packed){-1, !mr, og, kk, mr, (int)c.groups, xform, k->params, 0, 0, 0, 0},
                    (int64_t)primc_conv2d_packed_weight_bytes(&c, layout), w->v);
}

/* the conv call's last epilogue words: the plan's weight layout, tile height, the packed weights' bytes, row + 1 */
static void conv_plan_words(kir_kernel *k, const primc_conv_plan *plan, int64_t wbytes) {
  k->params[CONV_EPI_AT + CONV_EPI_ROW - 3] = plan->layout;
  k->params[CONV_EPI_AT + CONV_EPI_ROW - 2] = plan->tile_mr;
  k->params[CONV_EPI_AT + CONV_EPI_ROW - 1] = wbytes;
  k->params[CONV_EPI_AT + CONV_EPI_ROW] = plan->row + 1;
}

/* Weights the program computes (a training step's, new every step) are packed by the conv call itself, into its
 * scratch past the col (primc_k_conv), when the plan for packed weights wants a layout of its own and each weight
 * meets enough output pixels to repay the copy: ResNet-18's 3x3s at batch 8 ran 1.3-1.5x faster on the direct
 * lanes, Winograd or the batch row's strips than on plain weights (build/conv_ab --plain). */
#define RUNTIME_PACK_MIN_PIXELS 64
static pc_status runtime_packed_conv(kir_program *p, int i) {
  kir_kernel *k = &p->kernels[i];
  primc_conv2d c;
  primc_conv_plan plan;
  const kir_buf *w = &p->bufs[k->args[2]];
  int64_t oh, ow;
  if (w->place == KP_CONST || w->dtype != PC_f32 || !primc_conv2d_of_params(k->params, &c) ||
      !primc_conv2d_out_hw(&c, &oh, &ow) || c.n * oh * ow < RUNTIME_PACK_MIN_PIXELS ||
      !kir_conv_plan(p, kir_kernel_node(k), &c, KIR_PACK_PER_CALL, &plan) || plan.layout == PRIMC_CONV_W_PLAIN ||
      (plan.layout == PRIMC_CONV_W_STRIPS && plan.row == PRIMC_CONV_ROW_BATCH))
    return PC_OK; /* the batch row's one GEMM packs plain strips itself, over the threads: packing first costs a copy */
  int64_t bytes = (int64_t)primc_conv_plan_weight_bytes(&c, &plan), need = primc_conv_plan_pack_offset(&c, &plan) + bytes;
  if (p->bufs[k->args[3]].nbytes < need) {
    int sb = kir_call_scratch_grown(p, PC_f32, need);
    if (sb < 0) return PC_ERR_NOMEM;
    k->args[3] = sb;
  }
  conv_plan_words(k, &plan, -bytes); /* negative: packed by the call from the plain weights */
  kir_conv_read_flipped(p, i);
  return PC_OK;
}

/* A dot with a constant B as a call on GEMM panels packed here (kir_gemm_isa's row): f32 as dot_packed; i32
 * (i8) whose B columns each span at most 256 values (a u8 or s8 weight less its zero points, as a QDQ,
 * MatMulInteger or QLinearMatMul model leaves it) as dot_i8 on the int8 GEMM, exact for any A (a row of A too
 * wide for u8 runs the GEMM's exact plain loop). 0 in *changed when B does not qualify. */
static pc_status packed_dot(kir_program *p, kir_kernel *k, int i8, int *changed) {
  *changed = 0;
  int nb = packed_operand(p, k, 0, 0, i8);
  if (nb < 0) return PC_OK;
  int64_t bytes = p->bufs[nb].nbytes; /* the runtime checks the packed header against it */
  if (dot_call(p, k, i8 ? KC_dot_i8 : KC_dot_packed, &bytes, 1) != PC_OK) return p->g->status;
  k->args[2] = nb;
  if (i8)
    k->args[k->n_args++] = kir_scratch_buf(p, PC_u8, (int64_t)primc_igemm_scratch_size(k->params[2], k->params[4]), NULL);
  *changed = 1;
  return PC_OK;
}

/* An i32 dot with a constant B whose operands are proven within [-256, 256] (the ints a QDQ or MatMulInteger
 * model's zero points leave: u8 - zp, i8) but that the int8 GEMM does not take: a dot_int call, exact on the
 * bf16 GEMM in K chunks, B packed here; 0 in *changed when it does not qualify (it stays the element-by-element
 * dot) */
#define INT_EXACT_MAX 256
static pc_status int_dot(kir_program *p, kir_kernel *k, int *changed) {
  int64_t lo, hi;
  const kir_buf *a = &p->bufs[k->args[1]], *b = &p->bufs[k->args[2]];
  if (packed_dot(p, k, 1, changed) != PC_OK || *changed) return p->g->status;
  if (!a->v || !pc_value_int_range(a->v, &lo, &hi) || lo < -INT_EXACT_MAX || hi > INT_EXACT_MAX) return PC_OK;
  int64_t amax = -lo > hi ? -lo : hi;
  if (!b->v || !pc_value_int_range(b->v, &lo, &hi) || lo < -INT_EXACT_MAX || hi > INT_EXACT_MAX) return PC_OK;
  int64_t bmax = -lo > hi ? -lo : hi, prod = amax * bmax > 0 ? amax * bmax : 1;
  /* the longest K chunk (a multiple of 32) whose sums stay within 2^24, where f32 holds every integer */
  int64_t chunk = ((int64_t)1 << 24) / prod / 32 * 32;
  if (chunk > PRIMC_BGEMM_INT_K) chunk = PRIMC_BGEMM_INT_K;
  int nb = packed_operand(p, k, 1, (int)chunk, 0);
  if (nb < 0) return PC_OK;
  int64_t extra[2] = {p->bufs[nb].nbytes, chunk};
  if (dot_call(p, k, KC_dot_int, extra, 2) != PC_OK) return p->g->status;
  k->args[2] = nb;
  k->args[k->n_args++] = kir_scratch_buf(p, PC_f32, k->params[2] * k->params[3] * 4, NULL);
  *changed = 1;
  return PC_OK;
}

/* e as [sub(] i32(q) [, constant)] with q's expression u8 or s8: q in *q, the constant in *zp */
static int narrowed(kir_expr *e, kir_expr **q, int64_t *zp) {
  *zp = 0;
  if (e->kind == KE_PRIM && e->op == PC_OP_sub && e->n_args == 2 && e->args[1]->kind == KE_CONST &&
      e->args[1]->dtype == PC_i32)
    *zp = e->args[1]->ci, e = e->args[0];
  if (e->kind != KE_CONVERT || e->dtype != PC_i32 || e->n_args != 1) return 0;
  *q = e->args[0];
  return (*q)->dtype == PC_u8 || (*q)->dtype == PC_i8;
}

/* whether e loads a buffer that shares bytes with buf */
static int reads_overlapping(const kir_program *p, const kir_expr *e, int buf) {
  if (e->kind == KE_LOAD && kir_bufs_overlap(p, e->buf, buf)) return 1;
  for (int a = 0; a < e->n_args; a++)
    if (reads_overlapping(p, e->args[a], buf)) return 1;
  return 0;
}

/* a conv_i8 call reading xb as its i32 input, and xb nowhere else */
static int i32_reader(const kir_kernel *k, int xb) {
  if (k->kind != KK_CALL || k->call != KC_conv_i8 || k->args[1] != xb || k->params[CONV_EPI_AT + 2] != PRIMC_CONV_I8_X_I32)
    return 0;
  for (int a = 0; a < k->n_args; a++)
    if (a != 1 && k->args[a] == xb) return 0;
  return 1;
}

/* conv_i8 calls that read an i32 input which one loop kernel before them computes as i32(q) - zp from an 8-bit q (a
 * QuantizeLinear's result, ConvInteger's u8 input), and which nothing else touches (two convs of a ResNet block's
 * input may share it): that kernel stores q itself, in the same buffer made 8-bit (or, when that buffer shares bytes
 * with what the kernel reads, in a workspace region of its own), and the calls widen it (PRIMC_CONV_I8_X_U8 / _S8
 * with zp): a quarter of the bytes written and read. The kernel may store other results beside x (the dequantized
 * value a residual reads). */
static void narrow_inputs(kir_program *p) {
  for (int i = 0; i < p->n_kernels; i++) {
    int xb = p->kernels[i].args[1], wi = -1, si = -1, ok = i32_reader(&p->kernels[i], xb);
    kir_buf *b = &p->bufs[xb];
    if (!ok || b->place != KP_WORKSPACE || b->dtype != PC_i32) continue;
    for (int j = 0; ok && j < p->n_kernels; j++) { /* the one writer before i; every other toucher a reader */
      const kir_kernel *w = &p->kernels[j];
      if (!kir_kernel_touches(w, xb) || i32_reader(w, xb)) continue;
      ok = wi < 0 && j < i && w->kind == KK_LOOP;
      wi = j;
    }
    if (!ok || wi < 0) continue;
    kir_kernel *w = &p->kernels[wi];
    int overlap = 0;
    for (int st = 0; st < w->n_stores; st++) {
      if (w->stores[st].buf == xb) si = si == -1 ? st : -2;
      overlap |= reads_overlapping(p, w->stores[st].value, xb);
    }
    kir_expr *q;
    int64_t zp, numel = b->nbytes / 4, total = 1, strides[KIR_MAX_LOOPS];
    if (si < 0 || w->stores[si].red != KR_NONE || !narrowed(w->stores[si].value, &q, &zp) || zp < -512 || zp > 512)
      continue;
    for (int l = w->n_loops - 1; l >= 0; l--) strides[l] = total, total *= w->extent[l];
    if (total != numel || !kir_map_is(&w->stores[si].map, strides, w->n_loops, 0)) continue; /* every element, in order */
    int nb = xb;
    if (overlap) { /* written in place over what the kernel reads: bytes would land on elements not read yet */
      if ((nb = kir_scratch_buf(p, q->dtype, numel, NULL)) < 0) return; /* a region of its own */
      w->stores[si].buf = nb;
    } else {
      b->dtype = q->dtype;
      b->nbytes = numel;
    }
    w->stores[si].value = q;
    for (int j = 0; j < p->n_kernels; j++) {
      kir_kernel *k = &p->kernels[j];
      if (!i32_reader(k, xb)) continue;
      k->args[1] = nb;
      k->params[CONV_EPI_AT + 2] = q->dtype == PC_u8 ? PRIMC_CONV_I8_X_U8 : PRIMC_CONV_I8_X_S8;
      k->params[CONV_EPI_AT + 3] = zp;
    }
  }
}

/* An i32 conv (ConvInteger, QLinearConv) whose input is proven within [lo, lo + 255] for some lo <= 0 (u8 or s8
 * less a zero point, with the padding's 0) and whose constant weights span at most 256 values per output channel:
 * a conv_i8 call on the int8 GEMM, the weights packed here. 0 in *changed when it does not qualify (it stays the
 * exact floating-point im2col path). */
static pc_status conv_i8(kir_program *p, int i, int *changed) {
  kir_kernel *k = &p->kernels[i];
  int64_t lo, hi;
  const kir_buf *x = &p->bufs[k->args[1]], *w = &p->bufs[k->args[2]];
  *changed = 0;
  if (k->has_epilogue || k->pair || !x->v) return PC_OK;
  /* no range proven within a byte (a zero point computed at run time): the call finds each image's */
  int any = !pc_value_int_range(x->v, &lo, &hi) || (lo < 0 ? lo : 0) < (hi > 0 ? hi : 0) - 255;
  lo = any || lo > 0 ? 0 : lo;
  if ((any && x->dtype != PC_i32) || w->place != KP_CONST || !w->v || !pc_const_data(w->v) || w->dtype != PC_i32 ||
      !primc_conv_i8_fits(k->params, pc_const_data(w->v)))
    return PC_OK;
  int nb = -1;
  for (int j = 0; j < p->n_packed && nb < 0; j++) /* one packed copy per weight and conv shape */
    if (p->packed[j].i8 == 2 && p->bufs[p->packed[j].buf].v == w->v &&
        !memcmp(p->packed[j].conv, k->params, sizeof(int64_t) * CONV_EPI_AT))
      nb = p->packed[j].buf;
  int rank;
  const int64_t *od = conv_out_dims(k->params, &rank); /* a group's B multiplies each image's pixels */
  int64_t pixels = 1;
  for (int d = 2; d < rank; d++) pixels *= od[d];
  int prep = i8_prep_row(p, pixels, od[0]);
  if (nb < 0)
    nb = add_packed(p, (kir_packed){-1, 1, 0, 0, 0, 0, 0, k->params, 0, 0, 2, prep + 1},
                    (int64_t)primc_conv_i8_weight_bytes(k->params, prep), w->v);
  int64_t scratch = primc_conv_i8_scratch_bytes(k->params), n_params = kir_call_info(KC_conv_i8)->n_params;
  int64_t *q = pc_alloc(p->g, sizeof(int64_t) * (size_t)n_params);
  if (nb < 0 || !q || scratch < 1) return p->g->status ? p->g->status : PC_ERR_NOMEM;
  memset(q, 0, sizeof(int64_t) * (size_t)n_params); /* no requantization (kir_requant's) */
  memcpy(q, k->params, sizeof(int64_t) * CONV_EPI_AT);
  q[CONV_EPI_AT] = lo;
  q[CONV_EPI_AT + 1] = p->bufs[nb].nbytes;
  q[CONV_EPI_AT + 2] = any ? PRIMC_CONV_I8_X_I32_ANY : PRIMC_CONV_I8_X_I32;
  q[CONV_EPI_AT + 3] = 0;
  k->params = q;
  k->n_params = (int)n_params;
  k->call = KC_conv_i8;
  k->args[2] = nb;
  if (p->bufs[k->args[3]].nbytes < scratch) /* the exact path's scratch (codegen sized it for doubles) usually serves */
    k->args[3] = kir_scratch_buf(p, PC_u8, scratch, NULL);
  *changed = 1;
  return PC_OK;
}

/* below this many multiply-adds a product of two activations (an attention head's) stays f32: rounding
 * and packing its B on every call costs more than the bf16 GEMM saves (BERT-base's heads, 128 x 128 x 64,
 * took 8.4 ms a run against 5.2 in f32 on an AMX Xeon), and f32 is more precise than asked, never less */
#define BF16_ACTIVATION_MIN_MACS (1 << 22)

/* an f32 dot under matmul precision high or medium (or autocast bf16, as medium): a dot_bf16 call, its B packed
 * as bf16 panels here when it is a constant, else at each call; 0 in *changed when it stays an f32 dot */
static pc_status bf16_dot(kir_program *p, kir_kernel *k, int *changed) {
  int split = p->g->matmul_precision == PC_MATMUL_HIGH && p->g->autocast != PC_AUTOCAST_BF16 ? 3 : 1;
  int nb = packed_operand(p, k, split, 0, 0);
  *changed = 0;
  if (nb < 0 && (double)k->params[2] * (double)k->params[3] * (double)k->params[4] < BF16_ACTIVATION_MIN_MACS)
    return PC_OK;
  int64_t extra[2] = {nb >= 0 ? p->bufs[nb].nbytes : 0, split};
  if (dot_call(p, k, KC_dot_bf16, extra, 2) != PC_OK) return p->g->status;
  if (nb >= 0) k->args[2] = nb;
  *changed = 1;
  return PC_OK;
}

static int64_t forced_llc; /* tests: kir_force_llc_bytes */
void kir_force_llc_bytes(int64_t bytes) { forced_llc = bytes; }

/* the last-level cache a core of this host uses: Linux's highest cache level of cpu0 (glibc's sysconf reports an
 * AMD socket's L3 of all its CCDs, 512 MiB on the Zen 5 these sessions ran on, where a core's is 32 MiB), 0 if
 * unknown */
static int64_t host_llc_bytes(void) {
  int64_t best = 0;
  int best_level = 0;
  for (int i = 0; i < 8; i++) {
    char path[96], buf[32];
    int level = 0;
    long long size = 0;
    char unit = 0;
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
    FILE *f = fopen(path, "r");
    if (!f) break;
    int ok = fscanf(f, "%d", &level) == 1;
    fclose(f);
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
    if (!ok || !(f = fopen(path, "r"))) continue;
    ok = fgets(buf, sizeof buf, f) && sscanf(buf, "%lld%c", &size, &unit) >= 1;
    fclose(f);
    int64_t bytes = size * (unit == 'K' ? 1024 : unit == 'M' ? 1 << 20 : 1);
    if (ok && size > 0 && level >= best_level) best_level = level, best = bytes;
  }
  return best;
}

/* whether the weights of p's convs and dots, as bf16, outgrow this host's last-level cache (32 MiB where it does
 * not say): then each run reads them from memory, and a bf16 plan tells its row so (primc_conv_plan_opts) */
static int weights_outgrow_cache(const kir_program *p) {
  if (p->g->autocast != PC_AUTOCAST_BF16 || p->g->bf16_f32_rows) return 0;
  int64_t llc = forced_llc > 0 ? forced_llc : host_llc_bytes();
  if (llc <= 0) llc = 32ll << 20;
  char *seen = calloc((size_t)p->n_bufs + 1, 1);
  double bytes = 0;
  for (int j = 0; j < p->n_kernels && seen; j++) {
    const kir_kernel *k = &p->kernels[j];
    if (k->kind != KK_CALL || (k->call != KC_conv && k->call != KC_dot) || k->n_args < 3 || seen[k->args[2]]) continue;
    const kir_buf *b = &p->bufs[k->args[2]];
    seen[k->args[2]] = 1;
    if (b->place == KP_CONST && b->dtype == PC_f32) bytes += (double)b->nbytes / 2;
  }
  free(seen);
  return bytes > (double)llc;
}

/* f32 dots whose B is a constant become dot_packed calls reading GEMM panels packed once at compile
 * time, and constant conv weights take the layout their planned row wants: for this machine's kernels
 * (another machine reads them row by row), so host code only; weights nothing reads any more leave
 * the blob (place_weights) */
static pc_status pack_weights(kir_program *p) {
  int packed = 0;
  p->weights_stream = weights_outgrow_cache(p);
  for (int i = 0; i < p->n_kernels; i++) {
    kir_kernel *k = &p->kernels[i];
    if (k->kind != KK_CALL) continue;
    if (k->call == KC_conv && k->params[0] == PC_i32) {
      int changed;
      if (conv_i8(p, i, &changed) != PC_OK) return p->g->status;
      packed += changed;
      continue;
    }
    if (k->call == KC_conv) {
      primc_conv_plan plan;
      if (k->pair) continue; /* the pair reads plain weights, and so does its first conv's own row */
      int nb = packed_conv_weights(p, k, &plan);
      if (nb < 0) {
        if (runtime_packed_conv(p, i) != PC_OK) return p->g->status ? p->g->status : PC_ERR_NOMEM;
        continue;
      }
      k->args[2] = nb;
      conv_plan_words(k, &plan, p->bufs[nb].nbytes); /* the runtime checks packed headers against the bytes */
      packed++;
      continue;
    }
    if (k->call != KC_dot) continue;
    if (k->params[0] == PC_i32) {
      int changed;
      if (int_dot(p, k, &changed) != PC_OK) return p->g->status;
      packed += changed;
      continue;
    }
    if (k->params[0] == PC_f32 && !p->g->bf16_f32_rows &&
        (p->g->matmul_precision != PC_MATMUL_HIGHEST || p->g->autocast == PC_AUTOCAST_BF16)) {
      int changed;
      if (bf16_dot(p, k, &changed) != PC_OK) return p->g->status;
      packed += changed;
      if (changed) continue;
    }
    int changed;
    if (packed_dot(p, k, 0, &changed) != PC_OK) return p->g->status;
    packed += changed;
  }
  if (packed) place_weights(p);
  narrow_inputs(p);
  return p->g->status;
}

/* A cross compile's f32 dots with a constant B read it as panels of the target's row (p->cross_isa), packed
 * here: its runtime would otherwise pack them on every call. Its convs keep plain weights (their rows are
 * planned on the target), and bf16 dots and dot_int are host code only. Integer dots take the int8 GEMM as on the
 * host: its packed B is the same on every machine, and the target runs whichever of its rows it has. */
static pc_status pack_cross_weights(kir_program *p) {
  int packed = 0;
  for (int i = 0; p->cross_isa > 0 && i < p->n_kernels; i++) {
    kir_kernel *k = &p->kernels[i];
    if (k->kind != KK_CALL || k->call != KC_dot) continue;
    int changed = 0;
    /* the int8 GEMM's layout is every machine's */
    pc_status s = k->params[0] == PC_i32   ? packed_dot(p, k, 1, &changed)
                   : k->params[0] == PC_f32 ? packed_dot(p, k, 0, &changed)
                                            : PC_OK;
    if (s != PC_OK) return p->g->status;
    packed += changed;
  }
  if (packed) place_weights(p);
  return p->g->status;
}

/* ---------------------------------------------------------------- the list */

/* Every rewrite of the kernel IR, in the order it runs. kir_build runs the BUILD rows on every program;
 * a compile for the host CPU then asks for the HOST_WEIGHTS row (kir_pack_weights: the machine's GEMM
 * panels and conv layouts; `primc dump --kernels` too, to show the conv rows a host compile plans) and
 * the HOST_POOLS rows (kir_pool_calls: pool calls, tiled transposes; every CPU compile). A cross compile (--triple) takes the CROSS_WEIGHTS row (its dots'
 * panels for the target's GEMM row) instead of HOST_WEIGHTS, CUDA the BUILD rows only.
 * (Gather tables read in place are decided before lowering, by build_group in kir.c, not here.) */
static const struct kir_rewrite {
  const char *name;
  kir_stage stage;
  pc_status (*run)(kir_program *p);
} rewrites[] = {
    /* a dot's elementwise consumer runs on each block of GEMM rows while they are in cache */
    {"dot-epilogues", KIR_STAGE_BUILD, fuse_epilogues},
    /* a conv's clamp(conv + bias + residual) consumer runs inside the conv call, per output tile */
    {"conv-epilogues", KIR_STAGE_BUILD, fuse_conv_epilogues},
    /* an exact f32 conv's requantizing loop kernel as its epilogue (act RQ) */
    {"conv-requant", KIR_STAGE_BUILD, kir_conv_requant_rewrite},
    /* needs conv-epilogues' epi_in_call: a small conv and the depthwise conv reading it, one call */
    {"conv-depthwise-pairs", KIR_STAGE_BUILD, pair_small_conv_depthwise},
    /* last: contiguous adjacent loops become one, for full vectors (absorbed epilogues keep theirs) */
    {"collapse-loops", KIR_STAGE_BUILD, collapse_loops},
    /* constant GEMM B and conv weights packed for this machine's kernels; the plain copies leave the blob */
    {"pack-weights", KIR_STAGE_HOST_WEIGHTS, pack_weights},
    /* needs pack-weights' conv plans: maps only bf16 convs touch are held as bf16 channel pairs */
    {"conv-bf16-pairs", KIR_STAGE_HOST_WEIGHTS, kir_conv_pairs},
    /* needs pack-weights' conv_i8 calls: the loop kernel requantizing one's int32 result runs inside it */
    {"conv-i8-requant", KIR_STAGE_HOST_WEIGHTS, kir_requant_rewrite},
    /* a cross target's dots: B as its GEMM row's panels */
    {"pack-cross-weights", KIR_STAGE_CROSS_WEIGHTS, pack_cross_weights},
    /* max trees over a -inf padded copy become primc_k_maxpool calls that read the map unpadded */
    {"pool-calls", KIR_STAGE_HOST_POOLS, kir_pool_calls_rewrite},
    /* transposing loop kernels in blocks that stay in L1 (a training step's flipped conv weights) */
    {"tile-transposes", KIR_STAGE_HOST_POOLS, kir_tile_transposes},
};

pc_status kir_rewrites_run(kir_program *p, kir_stage stage) {
  for (size_t i = 0; i < sizeof rewrites / sizeof *rewrites; i++) {
    if (rewrites[i].stage != stage) continue;
    pc_status s = rewrites[i].run(p);
    if (s != PC_OK) return s;
  }
  return PC_OK;
}

pc_status kir_pack_weights(kir_program *p) { return kir_rewrites_run(p, KIR_STAGE_HOST_WEIGHTS); }

pc_status kir_pack_cross_weights(kir_program *p) { return kir_rewrites_run(p, KIR_STAGE_CROSS_WEIGHTS); }

void kir_pool_calls(kir_program *p) { kir_rewrites_run(p, KIR_STAGE_HOST_POOLS); }
