/* codegen/kir_requant.c: a conv_i8 call's requantization inside the call.
 *
 * A QDQ conv (passes/qdq.c) or a QLinearConv computes its int32 sums on the int8 GEMM; the loop kernel after it
 * requantizes them: u8(clamp(round((f32(sums) * scale[o] + bias[o]) / s) + zp, lo, hi)) for QDQ, the same with
 * f64(sums + ibias[o]) * multiplier[o] for QLinearConv; after a ResNet block's second conv, that dequantized, a
 * residual added and the sum requantized again; stored as u8 / s8 / i32, or dequantized f32. As two kernels the sums
 * go to memory as int32 NCHW (the GEMM's [pixels][channels] transposed) and come back; here the call requantizes
 * each block of sums while it is in cache and writes the outputs directly (runtime/kernels_conv_i8_rq.c), with the
 * loop kernel's arithmetic, operation for operation. The loop kernel stays in the program, absorbed: a renderer
 * launching every kernel reads sums the call no longer writes, so the call's epi_in_call says it ran it. */
#include "codegen/kir_internal.h"
#include "runtime/primc_rt.h"

#include <string.h>

/* clamp(round(inner [/ div]) [+ zp], lo, hi) in type t: a requantization */
typedef struct rq_clamp {
  const kir_expr *at, *inner; /* the clamp; what it rounds */
  pc_dtype t;
  double div, zp, lo, hi;
} rq_clamp;

/* an output: q as u8 / s8, or f32 (q - zsub) * smul */
typedef struct rq_out {
  int kind; /* PRIMC_CONV_I8_OUT_* */
  double zsub, smul;
  const kir_expr *q; /* the clamp it reads */
} rq_out;

typedef struct rq_match {
  const kir_program *p;
  const kir_kernel *k;
  int acc;      /* the call's int32 result */
  int f32_sums; /* an exact f32 conv's: acc is f32, read as i32(acc) */
  int64_t cstride[KIR_MAX_LOOPS], plane, chans;
  int ib, mul, add, res; /* per-channel operand buffers and stage 2's residual, -1 when absent */
  int64_t ibias;
  double mulc, addc;
  rq_clamp c1, c2; /* stage 1; stage 2 when res >= 0 */
  double z1, s1;   /* stage 2's dequantization of stage 1 */
  rq_out out[2];
} rq_match;

/* x loads the element the stores write */
static int at_element(const rq_match *m, const kir_expr *x) {
  return x->kind == KE_LOAD && kir_map_is(&x->map, m->cstride, m->k->n_loops, 0);
}

/* x reads the sums at the element the store writes (as i32(acc) from an f32 conv) */
static int is_sums(const rq_match *m, const kir_expr *x) {
  if (m->f32_sums) {
    if (x->kind != KE_CONVERT || x->dtype != PC_i32 || x->n_args != 1 || x->args[0]->dtype != PC_f32) return 0;
    x = x->args[0];
  }
  return at_element(m, x) && x->buf == m->acc;
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

/* x as a requantization's clamp (f32 or f64) into *c */
static int match_clamp(const kir_expr *x, rq_clamp *c) {
  c->at = x, c->t = x->dtype, c->div = 1, c->zp = 0;
  if ((c->t != PC_f32 && c->t != PC_f64) || x->kind != KE_PRIM || x->op != PC_OP_clamp || x->n_args != 3 ||
      !is_const(x->args[1], c->t, &c->lo) || !is_const(x->args[2], c->t, &c->hi) || !(c->lo <= c->hi))
    return 0;
  x = x->args[0];
  if (x->kind == KE_PRIM && x->op == PC_OP_add && x->n_args == 2 && x->dtype == c->t && is_const(x->args[1], c->t, &c->zp))
    x = x->args[0];
  if (x->kind != KE_PRIM || x->op != PC_OP_round || x->n_args != 1 || x->dtype != c->t) return 0;
  x = x->args[0];
  if (x->kind == KE_PRIM && x->op == PC_OP_div && x->n_args == 2 && x->dtype == c->t && is_const(x->args[1], c->t, &c->div))
    x = x->args[0];
  c->inner = x;
  return 1;
}

/* x = [u8|s8](c): c, the type's range holding c's (its values pass unchanged) */
static const kir_expr *narrowed(const kir_expr *x, pc_dtype *to) {
  rq_clamp c;
  if (x->kind != KE_CONVERT || (x->dtype != PC_u8 && x->dtype != PC_i8) || x->n_args != 1 || !match_clamp(x->args[0], &c))
    return NULL;
  double tlo = x->dtype == PC_u8 ? 0 : -128, thi = x->dtype == PC_u8 ? 255 : 127;
  *to = x->dtype;
  return c.lo >= tlo && c.hi <= thi ? x->args[0] : NULL;
}

/* x as an f32 dequantization of an integer requantization q: [mul(] f32(u8(q)) [- zsub] [, smul)], or f32(i32(u8(q)))
 * or f32(i32(u8(q)) - zsub) likewise; q, zsub and smul into *o */
static int match_deq(const kir_expr *x, rq_out *o) {
  double z = 0;
  o->kind = PRIMC_CONV_I8_OUT_F32, o->zsub = 0, o->smul = 1;
  if (x->dtype != PC_f32) return 0;
  if (x->kind == KE_PRIM && x->op == PC_OP_mul && x->n_args == 2 && is_const(x->args[1], PC_f32, &o->smul)) x = x->args[0];
  if (x->kind == KE_PRIM && x->op == PC_OP_sub && x->n_args == 2 && is_const(x->args[1], PC_f32, &o->zsub)) x = x->args[0];
  if (x->kind != KE_CONVERT || x->dtype != PC_f32 || x->n_args != 1) return 0;
  x = x->args[0];
  if (x->dtype == PC_i32 && x->kind == KE_PRIM && x->op == PC_OP_sub && x->n_args == 2 && x->args[1]->kind == KE_CONST &&
      x->args[1]->dtype == PC_i32 && o->zsub == 0)
    z = (double)x->args[1]->ci, x = x->args[0];
  if (x->dtype == PC_i32 && x->kind == KE_CONVERT && x->n_args == 1) x = x->args[0];
  pc_dtype to;
  if (!(o->q = narrowed(x, &to))) return 0;
  if (z) o->zsub = z;
  return 1;
}

/* stage 1's inner value as ((T([sums + ibias]) [* mul]) [+ add]), T the clamp's type, into *m */
static int match_stage1(rq_match *m, const kir_expr *x) {
  pc_dtype t = m->c1.t;
  int64_t ci;
  const kir_expr *y;
  if ((y = with_operand(m, x, PC_OP_add, t, &m->add, &m->addc, &ci))) x = y;
  if ((y = with_operand(m, x, PC_OP_mul, t, &m->mul, &m->mulc, &ci))) x = y;
  if (x->kind != KE_CONVERT || x->dtype != t || x->n_args != 1 || x->args[0]->dtype != PC_i32) return 0;
  x = x->args[0];
  if (is_sums(m, x)) return 1;
  double unused;
  y = with_operand(m, x, PC_OP_add, PC_i32, &m->ib, &unused, &m->ibias);
  return y && is_sums(m, y);
}

/* an f32 load of a buffer other than the sums at the element the store writes */
static int is_residual(const rq_match *m, const kir_expr *x) {
  return at_element(m, x) && x->dtype == PC_f32 && x->buf != m->acc;
}

/* k's stores as outputs of one requantization q (stage 1, or stage 2 of a residual added to stage 1 dequantized)
 * into *m; 0 when they are anything else */
static int match_stores(rq_match *m) {
  const kir_expr *q = NULL;
  m->ib = m->mul = m->add = m->res = -1, m->ibias = 0, m->mulc = 1, m->addc = 0;
  for (int s = 0; s < m->k->n_stores; s++) {
    const kir_expr *v = m->k->stores[s].value;
    rq_out *o = &m->out[s];
    pc_dtype to;
    o->zsub = 0, o->smul = 1;
    if ((o->q = narrowed(v, &to))) o->kind = to == PC_u8 ? PRIMC_CONV_I8_OUT_U8 : PRIMC_CONV_I8_OUT_S8;
    else if (v->kind == KE_CONVERT && v->dtype == PC_i32 && v->n_args == 1 && (o->q = narrowed(v->args[0], &to)))
      o->kind = PRIMC_CONV_I8_OUT_I32;
    else if (!match_deq(v, o)) return 0;
    if (q && !kir_expr_equal(q, o->q)) return 0;
    q = o->q;
  }
  rq_clamp c;
  rq_out d;
  if (!match_clamp(q, &c)) return 0;
  const kir_expr *in = c.inner;
  /* stage 2: (deq(stage 1) + residual) requantized, in f32 */
  for (int side = 0; c.t == PC_f32 && in->kind == KE_PRIM && in->op == PC_OP_add && in->n_args == 2 && side < 2; side++)
    if (is_residual(m, in->args[1 - side]) && match_deq(in->args[side], &d)) {
      m->c2 = c, m->res = in->args[1 - side]->buf, m->z1 = d.zsub, m->s1 = d.smul;
      return match_clamp(d.q, &m->c1) && match_stage1(m, m->c1.inner);
    }
  m->c1 = c;
  return match_stage1(m, c.inner);
}

/* every word an f32 value where the arithmetic is f32 (the runtime checks it too) */
static int f32_words(const rq_match *m) {
  const double w1[6] = {m->mulc, m->addc, m->c1.div, m->c1.zp, m->c1.lo, m->c1.hi};
  const double w2[6] = {m->z1, m->s1, m->c2.div, m->c2.zp, m->c2.lo, m->c2.hi};
  for (int i = 0; i < 6; i++)
    if ((m->c1.t == PC_f32 && (double)(float)w1[i] != w1[i]) || (m->res >= 0 && (double)(float)w2[i] != w2[i]))
      return 0;
  for (int s = 0; s < m->k->n_stores; s++)
    if ((double)(float)m->out[s].zsub != m->out[s].zsub || (double)(float)m->out[s].smul != m->out[s].smul) return 0;
  return 1;
}

/* conv call c's requantizing loop kernel k (the next one) into *m; 0 when it does not qualify */
static int match(const kir_program *p, const kir_touches *t, int i, int f32_sums, rq_match *m) {
  const kir_kernel *c = &p->kernels[i], *k = &p->kernels[i + 1];
  if (c->kind != KK_CALL || c->has_epilogue || k->kind != KK_LOOP || k->n_stores < 1 || k->n_stores > 2 ||
      k->n_par != k->n_loops)
    return 0;
  const int64_t *od = c->params + 1 + 18 + 1; /* the out shape's dims */
  int rank = (int)c->params[1 + 18];
  if (rank < 3) return 0;
  /* only inside a fused group: --unfused stays one launch per prim */
  if (!c->n_nodes || !k->n_nodes || c->nodes[0]->group < 0 || c->nodes[0]->group != k->nodes[0]->group) return 0;
  *m = (rq_match){.p = p, .k = k, .acc = c->args[0], .f32_sums = f32_sums, .plane = 1, .chans = od[1]};
  for (int d = 2; d < rank; d++) m->plane *= od[d];
  int64_t n = 1, total = od[0] * m->chans * m->plane;
  for (int l = k->n_loops - 1; l >= 0; l--) m->cstride[l] = n, n *= k->extent[l];
  if (n != total || p->bufs[m->acc].place != KP_WORKSPACE) return 0;
  for (int s = 0; s < k->n_stores; s++)
    if (k->stores[s].red != KR_NONE || !kir_map_is(&k->stores[s].map, m->cstride, k->n_loops, 0)) return 0;
  if (!match_stores(m) || !f32_words(m) || kir_touched_outside(p, t, m->acc, i, i + 1)) return 0;
  /* the sums go nowhere else; the outputs are written while the call reads x, its scratch and the residual */
  for (int s = 0; s < k->n_stores; s++) {
    int y = k->stores[s].buf;
    if (kir_bufs_overlap(p, y, c->args[1]) || kir_bufs_overlap(p, y, c->args[3]) ||
        (m->res >= 0 && kir_bufs_overlap(p, y, m->res)) || (s && kir_bufs_overlap(p, y, k->stores[0].buf)))
      return 0;
  }
  return 1;
}

/* a conv_i8 call with room for its outputs and operands */
static int i8_call(const kir_kernel *c) {
  return c->kind == KK_CALL && c->call == KC_conv_i8 && c->n_args + 2 + 4 <= KIR_MAX_CALL_ARGS &&
         c->params[CONV_EPI_AT + 2] != PRIMC_CONV_I8_X_I32_ANY;
}

pc_status kir_requant_rewrite(kir_program *p) {
  if (p->sizes_vary) return PC_OK; /* the calls' shapes are the bound's */
  kir_touches t;
  if (kir_touches_build(p, &t) != PC_OK) return p->g->status;
  for (int i = 0; i + 1 < p->n_kernels; i++) {
    rq_match m;
    if (!i8_call(&p->kernels[i]) || !match(p, &t, i, 0, &m)) continue;
    kir_kernel *c = &p->kernels[i], *k = &p->kernels[i + 1];
    kir_touches_recount(&t, c, -1);
    int64_t *w = c->params + PRIMC_CONV_I8_RQ_AT;
    w[0] = m.c1.t == PC_f32 ? PRIMC_CONV_I8_RQ_F32 : PRIMC_CONV_I8_RQ_F64;
    w[1] = k->n_stores;
    w[2] = (m.ib >= 0 ? PRIMC_CONV_I8_RQ_IBIAS : 0) | (m.mul >= 0 ? PRIMC_CONV_I8_RQ_MUL : 0) |
           (m.add >= 0 ? PRIMC_CONV_I8_RQ_ADD : 0) | (m.res >= 0 ? PRIMC_CONV_I8_RQ_RES : 0);
    w[3] = m.ibias;
    const double d[18] = {m.mulc, m.addc, m.c1.div, m.c1.zp, m.c1.lo, m.c1.hi,
                          m.z1, m.s1, m.c2.div, m.c2.zp, m.c2.lo, m.c2.hi,
                          m.out[0].kind, m.out[0].zsub, m.out[0].smul, m.out[1].kind, m.out[1].zsub, m.out[1].smul};
    memcpy(w + 4, d, sizeof d);
    for (int s = 0; s < k->n_stores; s++) c->args[c->n_args++] = k->stores[s].buf;
    if (m.ib >= 0) c->args[c->n_args++] = m.ib;
    if (m.mul >= 0) c->args[c->n_args++] = m.mul;
    if (m.add >= 0) c->args[c->n_args++] = m.add;
    if (m.res >= 0) c->args[c->n_args++] = m.res;
    kir_absorb_in_call(p, i);
    kir_touches_recount(&t, c, 1);
  }
  kir_touches_free(&t);
  return PC_OK;
}

/* ---------------------------------------------------------------- the f32 conv's epilogue */

/* An int32 conv with few taps runs as an exact f32 conv (passes/widen.c); its requantizing loop kernel, f32(i32(
 * u8(clamp(round((f32(i32(sums)) * scale[o] + bias[o]) / s) + zp, lo, hi)))) [- zsub], becomes the conv call's
 * epilogue (act RQ, runtime/conv/conv.h's cv_rqf, the same f32 operations one by one): the sums are not stored and
 * read again. zsub folds into the zero point and the bounds, exactly, all of them integers. */
static int integral(double x) { return x == (double)(int64_t)x && x > -(1 << 24) && x < (1 << 24); }

/* the conv call a 2-D or 1-D f32 conv without an epilogue (what primc_conv2d_f32_epi runs) */
static int f32_call(const kir_kernel *c) {
  const int64_t *q = c->params;
  return c->kind == KK_CALL && c->call == KC_conv && !c->pair && !c->absorbed && c->n_args + 3 <= KIR_MAX_CALL_ARGS &&
         q[0] == PC_f32 && (q[1] == 4 || q[1] == 3) && q[1 + 27 + 1 + 24] == 1 && q[1 + 27 + 1 + 25] == 1 &&
         !q[CONV_EPI_AT];
}

/* m (matched with f32 sums) as act RQ's arithmetic: one f32 store of stage 1 less an integral zero point */
static int f32_form(const rq_match *m) {
  const rq_out *o = &m->out[0];
  return m->k->n_stores == 1 && m->res < 0 && m->ib < 0 && m->c1.t == PC_f32 && (m->add >= 0 || m->addc == 0) &&
         o->kind == PRIMC_CONV_I8_OUT_F32 && o->smul == 1 && integral(o->zsub) && integral(m->c1.zp) &&
         integral(m->c1.lo) && integral(m->c1.hi) && m->c1.div != 0;
}

pc_status kir_conv_requant_rewrite(kir_program *p) {
  if (p->sizes_vary) return PC_OK;
  kir_touches t;
  if (kir_touches_build(p, &t) != PC_OK) return p->g->status;
  for (int i = 0; i + 1 < p->n_kernels; i++) {
    rq_match m;
    kir_kernel *c = &p->kernels[i], *k = &p->kernels[i + 1];
    if (!f32_call(c) || !match(p, &t, i, 1, &m) || !f32_form(&m)) continue; /* match: y apart from x and the scratch */
    kir_touches_recount(&t, c, -1);
    int64_t *w = c->params + CONV_EPI_AT, *r = w + PRIMC_CONV_EPI_RQ, y = k->stores[0].buf;
    double zs = m.out[0].zsub, lo = m.c1.lo - zs, hi = m.c1.hi - zs, zp = m.c1.zp - zs;
    w[0] = 1, w[1] = 0, w[2] = m.add >= 0 ? 1 : -1, w[3] = 0, w[6] = PRIMC_ACT_RQ;
    memcpy(&w[4], &lo, 8);
    memcpy(&w[5], &hi, 8);
    r[0] = 0, r[1] = m.mul >= 0 ? 1 : -1;
    memcpy(&r[2], &m.mulc, 8);
    memcpy(&r[3], &m.c1.div, 8);
    memcpy(&r[4], &zp, 8);
    c->args[c->n_args++] = (int)y;
    c->args[c->n_args++] = m.add >= 0 ? m.add : (int)y;
    c->args[c->n_args++] = m.mul >= 0 ? m.mul : (int)y;
    kir_absorb_in_call(p, i);
    kir_touches_recount(&t, c, 1);
  }
  kir_touches_free(&t);
  return PC_OK;
}
