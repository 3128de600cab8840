/* codegen/kir_requant.c: a conv_i8 call's requantization inside the call.
 *
 * A QDQ conv (passes/qdq.c) or a QLinearConv computes its int32 sums on the int8 GEMM; the loop kernel after it
 * requantizes them: u8(clamp(round((f32(sums) * scale[o] + bias[o]) / s) + zp, lo, hi)) for QDQ, the same with
 * f64(sums + ibias[o]) * multiplier[o] for QLinearConv. As two kernels the sums go to memory as int32 NCHW (the
 * GEMM's [pixels][channels] transposed) and come back; here the call requantizes each block of sums while it is in
 * cache and writes the u8 / s8 output directly (runtime/kernels_conv_i8_rq.c), with the loop kernel's arithmetic,
 * operation for operation. The loop kernel stays in the program, absorbed: a renderer launching every kernel reads
 * sums the call no longer writes, so the call's epi_in_call says it ran it. */
#include "codegen/kir_internal.h"
#include "runtime/primc_rt.h"

#include <string.h>

typedef struct rq_match {
  const kir_program *p;
  const kir_kernel *k;
  int acc; /* the call's int32 result */
  int64_t cstride[KIR_MAX_LOOPS], plane, chans;
  int ib, mul, add; /* per-channel operand buffers, -1 when absent */
  int64_t ibias;
  double mulc, addc, div, zp, lo, hi;
} rq_match;

/* x reads the sums at the element the store writes */
static int is_sums(const rq_match *m, const kir_expr *x) {
  if (x->kind != KE_LOAD || x->buf != m->acc || x->map.offset) return 0;
  for (int l = 0; l < KIR_MAX_LOOPS; l++)
    if (x->map.stride[l] != (l < m->k->n_loops ? m->cstride[l] : 0)) return 0;
  return 1;
}

/* x of type t is a constant (into *c or *ci) or a constant buffer holding one value per output channel (into *buf) */
static int operand(const rq_match *m, const kir_expr *x, pc_dtype t, int *buf, double *c, int64_t *ci) {
  if (x->dtype != t) return 0;
  if (x->kind == KE_CONST) {
    if (t == PC_i32) *ci = x->ci;
    else *c = x->c;
    return *buf = -1, 1;
  }
  if (x->kind != KE_LOAD || x->buf == m->acc) return 0;
  const kir_buf *b = &m->p->bufs[x->buf];
  int64_t off, stride;
  if (b->place != KP_CONST || b->nbytes < m->chans * (int64_t)pc_dtype_size(t) ||
      !kir_channel_map(m->k, m->cstride, m->plane, m->chans, &x->map, &off, &stride) || off || stride != 1)
    return 0;
  return *buf = x->buf, 1;
}

/* x = op(rest, operand) or op(operand, rest) of type t: rest, the operand in *buf / *c; NULL otherwise */
static const kir_expr *with_operand(const rq_match *m, const kir_expr *x, pc_op op, pc_dtype t, int *buf, double *c,
                                    int64_t *ci) {
  if (x->kind != KE_PRIM || x->op != op || x->n_args != 2 || x->dtype != t) return NULL;
  for (int s = 1; s >= 0; s--)
    if (operand(m, x->args[s], t, buf, c, ci)) return x->args[1 - s];
  return NULL;
}

static int is_const(const kir_expr *x, pc_dtype t, double *c) {
  return x->kind == KE_CONST && x->dtype == t ? (*c = x->c, 1) : 0;
}

/* k's one store as [u8|s8](clamp(round(((T([sums + ibias]) [* mul]) [+ add]) [/ div]) [+ zp], lo, hi)), T f32 or
 * f64, into *m; 0 when it is anything else */
static int match_store(rq_match *m, const kir_expr *e, pc_dtype *t, int *u8) {
  if (e->kind != KE_CONVERT || (e->dtype != PC_u8 && e->dtype != PC_i8) || e->n_args != 1) return 0;
  *u8 = e->dtype == PC_u8;
  const kir_expr *x = e->args[0];
  *t = x->dtype;
  if ((*t != PC_f32 && *t != PC_f64) || x->kind != KE_PRIM || x->op != PC_OP_clamp || x->n_args != 3 ||
      !is_const(x->args[1], *t, &m->lo) || !is_const(x->args[2], *t, &m->hi))
    return 0;
  double tlo = *u8 ? 0 : -128, thi = *u8 ? 255 : 127;
  if (!(m->lo >= tlo && m->hi <= thi && m->lo <= m->hi)) return 0; /* else the conversion could wrap */
  x = x->args[0];
  m->zp = 0, m->div = 1, m->mulc = 1, m->addc = 0, m->ibias = 0, m->ib = m->mul = m->add = -1;
  int64_t ci;
  const kir_expr *y;
  if (x->kind == KE_PRIM && x->op == PC_OP_add && x->n_args == 2 && x->dtype == *t && is_const(x->args[1], *t, &m->zp))
    x = x->args[0];
  if (x->kind != KE_PRIM || x->op != PC_OP_round || x->n_args != 1 || x->dtype != *t) return 0;
  x = x->args[0];
  if (x->kind == KE_PRIM && x->op == PC_OP_div && x->n_args == 2 && x->dtype == *t && is_const(x->args[1], *t, &m->div))
    x = x->args[0];
  if ((y = with_operand(m, x, PC_OP_add, *t, &m->add, &m->addc, &ci))) x = y;
  if ((y = with_operand(m, x, PC_OP_mul, *t, &m->mul, &m->mulc, &ci))) x = y;
  if (x->kind != KE_CONVERT || x->dtype != *t || x->n_args != 1 || x->args[0]->dtype != PC_i32) return 0;
  x = x->args[0];
  if (is_sums(m, x)) return 1;
  double unused;
  y = with_operand(m, x, PC_OP_add, PC_i32, &m->ib, &unused, &m->ibias);
  return y && is_sums(m, y);
}

/* every word an f32 value where the arithmetic is f32 (the runtime checks it too) */
static int f32_words(const rq_match *m) {
  const double w[6] = {m->mulc, m->addc, m->div, m->zp, m->lo, m->hi};
  for (int i = 0; i < 6; i++)
    if ((double)(float)w[i] != w[i]) return 0;
  return 1;
}

/* call c's requantizing loop kernel k (the next one) into *m; 0 when it does not qualify */
static int match(const kir_program *p, const kir_touches *t, int i, rq_match *m, pc_dtype *ty, int *u8) {
  const kir_kernel *c = &p->kernels[i], *k = &p->kernels[i + 1];
  if (c->kind != KK_CALL || c->call != KC_conv_i8 || c->has_epilogue || c->n_args + 4 > KIR_MAX_ARGS ||
      c->params[CONV_EPI_AT + 2] == PRIMC_CONV_I8_X_I32_ANY || k->kind != KK_LOOP || k->n_stores != 1 ||
      k->n_par != k->n_loops || k->stores[0].red != KR_NONE)
    return 0;
  const int64_t *od = c->params + 1 + 18 + 1; /* the out shape's dims */
  int rank = (int)c->params[1 + 18];
  if (rank < 3) return 0;
  /* only inside a fused group: --unfused stays one launch per prim */
  if (!c->n_nodes || !k->n_nodes || c->nodes[0]->group < 0 || c->nodes[0]->group != k->nodes[0]->group) return 0;
  *m = (rq_match){.p = p, .k = k, .acc = c->args[0], .plane = 1, .chans = od[1]};
  for (int d = 2; d < rank; d++) m->plane *= od[d];
  int64_t n = 1, total = od[0] * m->chans * m->plane;
  for (int l = k->n_loops - 1; l >= 0; l--) m->cstride[l] = n, n *= k->extent[l];
  const kir_store *s = &k->stores[0];
  if (n != total || p->bufs[m->acc].place != KP_WORKSPACE || s->map.offset) return 0;
  for (int l = 0; l < KIR_MAX_LOOPS; l++)
    if (s->map.stride[l] != (l < k->n_loops ? m->cstride[l] : 0)) return 0;
  if (!match_store(m, s->value, ty, u8) || (*ty == PC_f32 && !f32_words(m))) return 0;
  /* the sums go nowhere else; y is written while the call reads x and uses its scratch */
  return !kir_touched_outside(p, t, m->acc, i, i + 1) && !kir_bufs_overlap(p, s->buf, c->args[1]) &&
         !kir_bufs_overlap(p, s->buf, c->args[3]);
}

pc_status kir_requant_rewrite(kir_program *p) {
  if (p->sizes_vary) return PC_OK; /* the calls' shapes are the bound's */
  kir_touches t;
  if (kir_touches_build(p, &t) != PC_OK) return p->g->status;
  for (int i = 0; i + 1 < p->n_kernels; i++) {
    rq_match m;
    pc_dtype ty;
    int u8;
    if (!match(p, &t, i, &m, &ty, &u8)) continue;
    kir_kernel *c = &p->kernels[i], *k = &p->kernels[i + 1];
    kir_touches_recount(&t, c, -1);
    int64_t *w = c->params + PRIMC_CONV_I8_RQ_AT;
    w[0] = ty == PC_f32 ? PRIMC_CONV_I8_RQ_F32 : PRIMC_CONV_I8_RQ_F64;
    w[1] = u8 ? PRIMC_U8 : PRIMC_I8;
    w[2] = (m.ib >= 0 ? PRIMC_CONV_I8_RQ_IBIAS : 0) | (m.mul >= 0 ? PRIMC_CONV_I8_RQ_MUL : 0) |
           (m.add >= 0 ? PRIMC_CONV_I8_RQ_ADD : 0);
    w[3] = m.ibias;
    const double d[6] = {m.mulc, m.addc, m.div, m.zp, m.lo, m.hi};
    memcpy(w + 4, d, sizeof d);
    c->args[c->n_args++] = k->stores[0].buf;
    if (m.ib >= 0) c->args[c->n_args++] = m.ib;
    if (m.mul >= 0) c->args[c->n_args++] = m.mul;
    if (m.add >= 0) c->args[c->n_args++] = m.add;
    kir_absorb_in_call(p, i);
    kir_touches_recount(&t, c, 1);
  }
  kir_touches_free(&t);
  return PC_OK;
}
