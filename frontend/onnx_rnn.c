/* frontend/onnx_rnn.c: ONNX RNN, GRU, LSTM, com.microsoft DynamicQuantizeLSTM and LinearAttention unrolled into prims
 * over the static sequence length. */
#include "frontend/onnx_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define G (c->g)
#define RNN_MAX_ACTS 6 /* 3 activations per direction, 2 directions */

/* ---------------------------------------------------------------- activations */

typedef pc_value *(*act_fn)(ox_ctx *c, pc_value *x, double a, double b);

static pc_value *like(ox_ctx *c, double v, pc_value *x) { return ox_like(c, v, x); }
static pc_value *act_sigmoid(ox_ctx *c, pc_value *x, double a, double b) { return pc_sigmoid(G, x); }
static pc_value *act_tanh(ox_ctx *c, pc_value *x, double a, double b) { return pc_tanh(G, x); }
static pc_value *act_relu(ox_ctx *c, pc_value *x, double a, double b) { return pc_max(G, x, like(c, 0, x)); }
static pc_value *act_affine(ox_ctx *c, pc_value *x, double a, double b) {
  return pc_add(G, pc_mul(G, x, like(c, a, x)), like(c, b, x));
}
static pc_value *act_leaky(ox_ctx *c, pc_value *x, double a, double b) {
  return pc_where(G, pc_lt(G, x, like(c, 0, x)), pc_mul(G, x, like(c, a, x)), x);
}
static pc_value *act_thresholded(ox_ctx *c, pc_value *x, double a, double b) {
  return pc_where(G, pc_gt(G, x, like(c, a, x)), x, like(c, 0, x));
}
static pc_value *act_scaled_tanh(ox_ctx *c, pc_value *x, double a, double b) {
  return pc_mul(G, like(c, a, x), pc_tanh(G, pc_mul(G, x, like(c, b, x))));
}
static pc_value *act_hard_sigmoid(ox_ctx *c, pc_value *x, double a, double b) {
  return pc_clamp(G, act_affine(c, x, a, b), like(c, 0, x), like(c, 1, x));
}
static pc_value *act_elu(ox_ctx *c, pc_value *x, double a, double b) {
  return pc_where(G, pc_lt(G, x, like(c, 0, x)), pc_mul(G, pc_expm1(G, x), like(c, a, x)), x);
}
static pc_value *act_softsign(ox_ctx *c, pc_value *x, double a, double b) {
  return pc_div(G, x, pc_add(G, pc_abs(G, x), like(c, 1, x)));
}
static pc_value *act_softplus(ox_ctx *c, pc_value *x, double a, double b) {
  return pc_add(G, pc_max(G, x, like(c, 0, x)), pc_log1p(G, pc_exp(G, pc_neg(G, pc_abs(G, x)))));
}

typedef struct act_row {
  const char *name;
  act_fn fn;
  int n_params; /* how many of alpha, beta it consumes */
  double a, b;  /* defaults */
} act_row;

static const act_row act_rows[] = {
    {"Sigmoid", act_sigmoid, 0, 0, 0},          {"Tanh", act_tanh, 0, 0, 0},
    {"Relu", act_relu, 0, 0, 0},                {"Affine", act_affine, 2, 1, 0},
    {"LeakyRelu", act_leaky, 1, 0.01, 0},       {"ThresholdedRelu", act_thresholded, 1, 1, 0},
    {"ScaledTanh", act_scaled_tanh, 2, 1, 1},   {"HardSigmoid", act_hard_sigmoid, 2, 0.2, 0.5},
    {"Elu", act_elu, 1, 1, 0},                  {"Softsign", act_softsign, 0, 0, 0},
    {"Softplus", act_softplus, 0, 0, 0},
};

typedef struct act {
  act_fn fn;
  double a, b;
} act;

/* ---------------------------------------------------------------- configuration */

typedef enum { CELL_RNN, CELL_GRU, CELL_LSTM } cell_kind;

typedef struct rnn {
  cell_kind kind;
  int gates, n_acts, dirs, reverse_only, layout, lbr;
  int64_t S, B, I, H;
  double clip; /* <= 0: none */
  act acts[RNN_MAX_ACTS];
  pc_value *x; /* [S, B, I] */
  pc_value *lens; /* sequence_lens [B] (int32) when some may be shorter than S, else NULL: steps past an entry's length
                     keep its state and write zeros to Y */
  int quant;   /* DynamicQuantizeLSTM: W [D, I, GH] and R [D, H, GH] 8-bit, with scales and zero points (inputs 8-11) */
} rnn;

static const char *const default_acts[3][3] = {{"Tanh"}, {"Sigmoid", "Tanh"}, {"Sigmoid", "Tanh", "Tanh"}};

static int read_acts(ox_ctx *c, rnn *r) {
  const Onnx__AttributeProto *list = NULL;
  for (size_t i = 0; i < c->node->n_attribute; i++)
    if (c->node->attribute[i]->name && !strcmp(c->node->attribute[i]->name, "activations")) list = c->node->attribute[i];
  double al[RNN_MAX_ACTS], be[RNN_MAX_ACTS];
  int na = ox_attr_floats(c, "activation_alpha", al, RNN_MAX_ACTS), nb = ox_attr_floats(c, "activation_beta", be, RNN_MAX_ACTS);
  if (na == -2 || nb == -2) return 0;
  int want = r->n_acts * r->dirs, ia = 0, ib = 0;
  if (list && (int)list->n_strings != want)
    return ox_fail(c, PC_ERR_ATTR, "activations lists %zu functions, expected %d", list->n_strings, want), 0;
  for (int k = 0; k < want; k++) {
    char name[32] = {0};
    if (list) {
      size_t len = list->strings[k].len < sizeof name - 1 ? list->strings[k].len : sizeof name - 1;
      memcpy(name, list->strings[k].data, len);
    } else {
      strcpy(name, default_acts[r->kind][k % r->n_acts]);
    }
    const act_row *row = NULL;
    for (size_t j = 0; j < sizeof act_rows / sizeof *act_rows; j++)
      if (!strcasecmp(act_rows[j].name, name)) row = &act_rows[j];
    if (!row) return ox_fail(c, PC_ERR_UNSUPPORTED, "activation '%s' is not supported", name), 0;
    r->acts[k] = (act){row->fn, row->a, row->b};
    if (row->n_params >= 1 && ia < na) r->acts[k].a = al[ia++];
    if (row->n_params >= 2 && ib < nb) r->acts[k].b = be[ib++];
  }
  return 1;
}

static int read_config(ox_ctx *c, rnn *r, cell_kind kind, int quant) {
  static const int gates[] = {1, 3, 4}, n_acts[] = {1, 2, 3};
  r->kind = kind, r->gates = gates[kind], r->n_acts = n_acts[kind], r->quant = quant;
  pc_value *x = ox_in_req(c, 0), *w = ox_in_req(c, 1), *rr = ox_in_req(c, 2);
  if (!x || !w || !rr) return 0;
  if (x->type.rank != 3 || !pc_type_is_static(&x->type) || !ox_require_float(c, x))
    return ox_status(c) == PC_OK ? (ox_fail(c, PC_ERR_SHAPE, "X must be a static rank-3 tensor"), 0) : 0;
  const char *dir = ox_attr_str(c, "direction", "forward");
  r->dirs = !strcmp(dir, "bidirectional") ? 2 : 1;
  r->reverse_only = !strcmp(dir, "reverse");
  if (r->dirs == 1 && !r->reverse_only && strcmp(dir, "forward"))
    return ox_fail(c, PC_ERR_ATTR, "direction '%s' is not forward, reverse or bidirectional", dir), 0;
  r->layout = ox_attr_flag(c, "layout", 0);
  r->lbr = ox_attr_flag(c, "linear_before_reset", 0);
  r->clip = ox_has_attr(c, "clip") ? ox_attr_float(c, "clip", 0) : -1;
  if (ox_attr_int(c, "input_forget", 0)) return ox_fail(c, PC_ERR_UNSUPPORTED, "input_forget=1 is not supported"), 0;
  int64_t perm[3] = {1, 0, 2};
  r->x = r->layout ? pc_transpose(G, x, perm) : x;
  if (!r->x) return 0;
  r->S = r->x->type.dims[0], r->B = r->x->type.dims[1], r->I = r->x->type.dims[2];
  r->H = ox_attr_int(c, "hidden_size", w->type.dims[quant ? 2 : 1] / r->gates);
  if (r->H < 1 || r->H >= (int64_t)1 << 31) /* before gates * H could overflow (found by fuzz_mutate) */
    return ox_fail(c, PC_ERR_ATTR, "hidden_size %lld is outside [1, 2^31)", (long long)r->H), 0;
  if (r->S > OX_MAX_UNROLL)
    return ox_fail(c, PC_ERR_UNSUPPORTED, "unsupported: more than %d steps to unroll", OX_MAX_UNROLL), 0;
  int64_t GH = r->gates * r->H;
  int gd = quant ? 2 : 1, kd = quant ? 1 : 2; /* the quantized op stores W and R as [D, K, GH] */
  if (quant && ((w->type.dtype != PC_u8 && w->type.dtype != PC_i8) || (rr->type.dtype != PC_u8 && rr->type.dtype != PC_i8)))
    return ox_fail(c, PC_ERR_TYPE, "W and R must be uint8 or int8"), 0;
  if (w->type.rank != 3 || w->type.dims[0] != r->dirs || w->type.dims[gd] != GH || w->type.dims[kd] != r->I ||
      rr->type.rank != 3 || rr->type.dims[0] != r->dirs || rr->type.dims[gd] != GH || rr->type.dims[kd] != r->H)
    return ox_fail(c, PC_ERR_SHAPE, "W or R does not match %d direction(s), hidden_size %lld, input size %lld", r->dirs,
                   (long long)r->H, (long long)r->I), 0;
  pc_value *lens = ox_in(c, 4);
  if (lens && (lens->type.rank != 1 || lens->type.dims[0] != r->B || !pc_dtype_is_int(lens->type.dtype)))
    return ox_fail(c, PC_ERR_SHAPE, "sequence_lens must be [batch] = [%lld] integers", (long long)r->B), 0;
  if (lens && pc_const_data(lens)) { /* known: each in 1..S, and the mask only where one is shorter */
    int64_t v[1024];
    int n = ox_value_ints(c, lens, v, 1024), shorter = 0;
    if (n < 0) return 0;
    for (int i = 0; i < n; i++) {
      if (v[i] < 1 || v[i] > r->S)
        return ox_fail(c, PC_ERR_RANGE, "sequence_lens[%d] = %lld is outside 1..%lld", i, (long long)v[i], (long long)r->S), 0;
      shorter |= v[i] < r->S;
    }
    if (!shorter) lens = NULL;
  }
  r->lens = lens;
  return read_acts(c, r);
}

/* ---------------------------------------------------------------- building blocks */

/* t[d] of a [D, ...] tensor, without the leading dim */
static pc_value *take_dir(ox_ctx *c, pc_value *t, int d) {
  if (!t) return NULL;
  int r = t->type.rank;
  if (r < 1 || d >= t->type.dims[0])
    return ox_fail(c, PC_ERR_SHAPE, "an operand of rank %d has no direction %d", r, d), NULL;
  int64_t st[PC_MAX_RANK] = {0}, lim[PC_MAX_RANK], one[PC_MAX_RANK];
  for (int i = 0; i < r; i++) lim[i] = t->type.dims[i], one[i] = 1;
  st[0] = d, lim[0] = d + 1;
  return pc_reshape(G, pc_slice(G, t, st, lim, one), r - 1, t->type.dims + 1);
}

/* columns [k*n, (k+1)*n) of the last dim */
static pc_value *cols(ox_ctx *c, pc_value *t, int64_t k, int64_t n) {
  if (!t) return NULL;
  int r = t->type.rank;
  if (r < 1) return ox_fail(c, PC_ERR_SHAPE, "a gate operand is a scalar"), NULL;
  int64_t st[PC_MAX_RANK] = {0}, lim[PC_MAX_RANK], one[PC_MAX_RANK];
  for (int i = 0; i < r; i++) lim[i] = t->type.dims[i], one[i] = 1;
  st[r - 1] = k * n, lim[r - 1] = (k + 1) * n;
  return pc_slice(G, t, st, lim, one);
}

/* a [B, GH] = v [B, K] . m [GH, K]^T */
static pc_value *matmul_t(ox_ctx *c, pc_value *v, pc_value *m) {
  int64_t lc = v ? v->type.rank - 1 : 0, rc = 1;
  return pc_dot_general(G, v, m, 1, &lc, &rc, 0, NULL, NULL);
}

static pc_value *add_row(ox_ctx *c, pc_value *t, pc_value *row) {
  return t && row ? ox_binary(c, PC_OP_add, t, row) : t;
}

static pc_value *apply(ox_ctx *c, const rnn *r, const act *a, pc_value *x) {
  if (!x) return NULL;
  if (r->clip > 0) x = pc_clamp(G, x, ox_like(c, -r->clip, x), ox_like(c, r->clip, x));
  return a->fn(c, x, a->a, a->b);
}

/* initial state input i for direction d as [B, H], zeros when absent */
static pc_value *initial(ox_ctx *c, const rnn *r, int i, int d) {
  pc_value *h0 = ox_in(c, i);
  int64_t bh[2] = {r->B, r->H};
  if (!h0) return pc_full(G, r->x->type.dtype, 0, 2, bh);
  int64_t b_dim = r->layout ? h0->type.dims[0] : h0->type.dims[1], d_dim = r->layout ? h0->type.dims[1] : h0->type.dims[0];
  if (h0->type.rank != 3 || d_dim != r->dirs || b_dim != r->B || h0->type.dims[2] != r->H)
    return ox_fail(c, PC_ERR_SHAPE, "initial state must be [%d, %lld, %lld]", r->dirs, (long long)r->B, (long long)r->H), NULL;
  if (r->layout) {
    int64_t perm[3] = {1, 0, 2};
    h0 = pc_transpose(G, h0, perm);
  }
  return take_dir(c, h0, d);
}

/* one direction's weights: W, R and the bias rows (Wb, Rb); quantized, W's and R's scales and zero points */
typedef struct dir_w {
  pc_value *w, *r, *wb, *rb, *p;
  pc_value *ws, *wz, *rs, *rz;
} dir_w;

/* a quantization parameter (input i) of direction d: one value ([D]) or one per gate column ([D, GH]) */
static pc_value *dir_qparam(ox_ctx *c, const rnn *r, int i, int d, int required) {
  pc_value *v = required ? ox_in_req(c, i) : ox_in(c, i);
  if (!v) return NULL;
  int64_t GH = r->gates * r->H;
  if (!((v->type.rank == 1 && v->type.dims[0] == r->dirs) ||
        (v->type.rank == 2 && v->type.dims[0] == r->dirs && v->type.dims[1] == GH)))
    return ox_fail(c, PC_ERR_SHAPE, "input %d must be [%d] or [%d, %lld]", i, r->dirs, r->dirs, (long long)GH), NULL;
  return take_dir(c, v, d);
}

static void dir_weights(ox_ctx *c, const rnn *r, int d, dir_w *dw) {
  memset(dw, 0, sizeof *dw);
  dw->w = take_dir(c, ox_in(c, 1), d);
  dw->r = take_dir(c, ox_in(c, 2), d);
  pc_value *b = take_dir(c, ox_in(c, 3), d);
  int64_t GH = r->gates * r->H;
  dw->wb = b ? cols(c, b, 0, GH) : NULL;
  dw->rb = b ? cols(c, b, 1, GH) : NULL;
  dw->p = r->kind == CELL_LSTM ? take_dir(c, ox_in(c, 7), d) : NULL;
  if (r->quant) {
    dw->ws = dir_qparam(c, r, 8, d, 1), dw->wz = dir_qparam(c, r, 9, d, 0);
    dw->rs = dir_qparam(c, r, 10, d, 1), dw->rz = dir_qparam(c, r, 11, d, 0);
  }
}

/* v [..., K] times a direction's W or R (m, [GH, K], or quantized [K, GH] with scale s and zero point z) */
static pc_value *project(ox_ctx *c, const rnn *r, pc_value *v, pc_value *m, pc_value *s, pc_value *z) {
  return r->quant ? ox_dyn_qmatmul(c, v, m, s, z) : matmul_t(c, v, m);
}

/* ---------------------------------------------------------------- cells */

typedef struct state {
  pc_value *h, *cell;
} state;

/* one step; xw = x_t W^T + Wb, [B, GH] */
static state step(ox_ctx *c, const rnn *r, const dir_w *dw, const act *acts, pc_value *xw, state s) {
  int64_t H = r->H;
  pc_value *hr = project(c, r, s.h, dw->r, dw->rs, dw->rz);
  if (r->kind == CELL_RNN) return (state){apply(c, r, &acts[0], add_row(c, pc_add(G, xw, hr), dw->rb)), NULL};
  if (r->kind == CELL_GRU) {
    pc_value *rbz = dw->rb ? cols(c, dw->rb, 0, H) : NULL, *rbr = dw->rb ? cols(c, dw->rb, 1, H) : NULL,
             *rbh = dw->rb ? cols(c, dw->rb, 2, H) : NULL;
    pc_value *z = apply(c, r, &acts[0], add_row(c, pc_add(G, cols(c, xw, 0, H), cols(c, hr, 0, H)), rbz));
    pc_value *rt = apply(c, r, &acts[0], add_row(c, pc_add(G, cols(c, xw, 1, H), cols(c, hr, 1, H)), rbr));
    pc_value *hh;
    if (r->lbr) {
      hh = pc_mul(G, rt, add_row(c, cols(c, hr, 2, H), rbh));
    } else { /* the reset gate applies before the recurrence: its own product with R_h */
      int64_t st[2] = {2 * H, 0}, lim[2] = {3 * H, H}, one[2] = {1, 1};
      hh = add_row(c, matmul_t(c, pc_mul(G, rt, s.h), pc_slice(G, dw->r, st, lim, one)), rbh);
    }
    pc_value *ht = apply(c, r, &acts[1], pc_add(G, cols(c, xw, 2, H), hh));
    pc_value *one_z = z ? pc_sub(G, ox_like(c, 1, z), z) : NULL;
    return (state){pc_add(G, pc_mul(G, one_z, ht), pc_mul(G, z, s.h)), NULL};
  }
  /* LSTM, gate order i o f c; peepholes P = [Pi Po Pf] */
  pc_value *g = add_row(c, pc_add(G, xw, hr), dw->rb);
  pc_value *gi = cols(c, g, 0, H), *go = cols(c, g, 1, H), *gf = cols(c, g, 2, H), *gc = cols(c, g, 3, H);
  if (dw->p) {
    gi = add_row(c, gi, pc_mul(G, s.cell, pc_broadcast_to(G, cols(c, dw->p, 0, H), 2, s.cell->type.dims)));
    gf = add_row(c, gf, pc_mul(G, s.cell, pc_broadcast_to(G, cols(c, dw->p, 2, H), 2, s.cell->type.dims)));
  }
  pc_value *i = apply(c, r, &acts[0], gi), *f = apply(c, r, &acts[0], gf), *cc = apply(c, r, &acts[1], gc);
  pc_value *ct = pc_add(G, pc_mul(G, f, s.cell), pc_mul(G, i, cc));
  if (dw->p && ct) go = pc_add(G, go, pc_mul(G, ct, pc_broadcast_to(G, cols(c, dw->p, 1, H), 2, ct->type.dims)));
  pc_value *o = apply(c, r, &acts[0], go);
  return (state){pc_mul(G, o, apply(c, r, &acts[2], ct)), ct};
}

/* [B, H] booleans: t < sequence_lens[b] */
static pc_value *in_sequence(ox_ctx *c, const rnn *r, int64_t t) {
  int64_t bh[2] = {r->B, r->H}, keep[1] = {0};
  pc_value *lt = ox_binary(c, PC_OP_lt, ox_like(c, (double)t, r->lens), r->lens);
  return lt ? pc_broadcast_in_dim(G, lt, 2, bh, keep) : NULL;
}

/* runs direction d over the sequence; ys gets Y [S, 1, B, H]; s the final state */
static pc_value *run_dir(ox_ctx *c, const rnn *r, int d, state *s) {
  dir_w dw;
  dir_weights(c, r, d, &dw);
  int reverse = r->reverse_only || d == 1;
  int64_t GH = r->gates * r->H, bgh[2] = {r->B, GH}, one4[4] = {1, 1, r->B, r->H};
  /* the input projection of every step at once: [S, B, GH] (quantized: x quantized as a whole, as ONNX Runtime's
   * one GEMM over every step does) */
  pc_value *xw = project(c, r, r->x, dw.w, dw.ws, dw.wz);
  xw = add_row(c, xw, dw.wb);
  s->h = initial(c, r, 5, d);
  s->cell = r->kind == CELL_LSTM ? initial(c, r, 6, d) : NULL;
  pc_value **ys = calloc((size_t)r->S + 1, sizeof *ys);
  if (!ys) return ox_fail(c, PC_ERR_NOMEM, "out of memory"), NULL;
  const act *acts = &r->acts[d * r->n_acts];
  for (int64_t k = 0; k < r->S && c->g->status == PC_OK; k++) {
    int64_t t = reverse ? r->S - 1 - k : k;
    int64_t st[3] = {t, 0, 0}, lim[3] = {t + 1, r->B, GH}, one[3] = {1, 1, 1};
    pc_value *xt = pc_reshape(G, pc_slice(G, xw, st, lim, one), 2, bgh);
    state n = step(c, r, &dw, acts, xt, *s);
    pc_value *y = n.h;
    if (r->lens) { /* past its length an entry keeps its state (so a reverse run starts at its last step) and writes 0 */
      pc_value *in = in_sequence(c, r, t); /* [B, H]: step t is within the entry's length */
      n.h = pc_where(G, in, y, s->h);
      n.cell = n.cell ? pc_where(G, in, n.cell, s->cell) : NULL;
      y = pc_where(G, in, y, y ? ox_like(c, 0, y) : NULL);
    }
    *s = n;
    ys[t] = pc_reshape(G, y, 4, one4);
  }
  pc_value *y = c->g->status == PC_OK ? pc_concatenate(G, ys, (int)r->S, 0) : NULL;
  free(ys);
  return y;
}

static pc_status rnn_op(ox_ctx *c, cell_kind kind, int quant) {
  rnn r;
  memset(&r, 0, sizeof r);
  if (!read_config(c, &r, kind, quant)) return ox_status(c);
  if (r.S < 1) return ox_fail(c, PC_ERR_SHAPE, "empty sequence");
  pc_value *ys[2] = {NULL, NULL}, *hs[2], *cs[2];
  int64_t one3[3] = {1, r.B, r.H};
  for (int d = 0; d < r.dirs; d++) {
    state s;
    ys[d] = run_dir(c, &r, d, &s);
    if (!ys[d]) return ox_status(c);
    hs[d] = pc_reshape(G, s.h, 3, one3);
    cs[d] = s.cell ? pc_reshape(G, s.cell, 3, one3) : NULL;
  }
  pc_value *y = r.dirs == 2 ? pc_concatenate(G, ys, 2, 1) : ys[0];
  pc_value *yh = r.dirs == 2 ? pc_concatenate(G, hs, 2, 0) : hs[0];
  pc_value *yc = kind == CELL_LSTM ? (r.dirs == 2 ? pc_concatenate(G, cs, 2, 0) : cs[0]) : NULL;
  if (r.layout) {
    int64_t p4[4] = {2, 0, 1, 3}, p3[3] = {1, 0, 2};
    y = pc_transpose(G, y, p4);
    yh = pc_transpose(G, yh, p3);
    yc = yc ? pc_transpose(G, yc, p3) : NULL;
  }
  if (ox_has_out(c, 0)) ox_out(c, 0, y);
  if (ox_has_out(c, 1)) ox_out(c, 1, yh);
  if (kind == CELL_LSTM && ox_has_out(c, 2)) ox_out(c, 2, yc);
  return ox_status(c);
}

pc_status ox_op_RNN(ox_ctx *c) { return rnn_op(c, CELL_RNN, 0); }
pc_status ox_op_GRU(ox_ctx *c) { return rnn_op(c, CELL_GRU, 0); }
pc_status ox_op_LSTM(ox_ctx *c) { return rnn_op(c, CELL_LSTM, 0); }
/* onnxruntime.quantization.quantize_dynamic's LSTM: (X, W, R, B, sequence_lens, initial_h, initial_c, P, W_scale,
 * W_zero_point, R_scale, R_zero_point), W [D, I, 4H] and R [D, H, 4H] 8-bit; each product as ONNX Runtime's
 * quantized GEMMs compute it: the float operand (every step's x at once, each step's h) quantized to u8 over all of
 * it, the exact int32 product, scaled back (ox_dyn_qmatmul) */
pc_status ox_op_ms_DynamicQuantizeLSTM(ox_ctx *c) { return rnn_op(c, CELL_LSTM, 1); }

/* ---------------------------------------------------------------- LinearAttention */

/* [B, T, H*D] -> [B, H, T, D] in f32 */
static pc_value *la_heads(ox_ctx *c, pc_value *x, int64_t heads) {
  int64_t B = x->type.dims[0], T = x->type.dims[1], D = x->type.dims[2] / heads, d4[4] = {B, T, heads, D};
  int64_t perm[4] = {0, 2, 1, 3};
  return pc_convert(G, pc_transpose(G, pc_reshape(G, x, 4, d4), perm), PC_f32);
}

/* step t of a [B, H, T, D] tensor as [B, H, D] */
static pc_value *la_step(ox_ctx *c, pc_value *x, int64_t t) {
  const int64_t *d = x->type.dims;
  int64_t start[4] = {0, 0, t, 0}, limit[4] = {d[0], d[1], t + 1, d[3]}, stride[4] = {1, 1, 1, 1}, d3[3] = {d[0], d[1], d[3]};
  return pc_reshape(G, pc_slice(G, x, start, limit, stride), 3, d3);
}

/* x [B, H, D] with a size-1 dim inserted at axis */
static pc_value *la_unsq(ox_ctx *c, pc_value *x, int64_t axis) { return x ? ox_unsqueeze(c, x, 1, &axis) : NULL; }

/* sum over d of m[b, h, d, e] * v[b, h, d]: [B, H, E], a batched matrix-vector product */
static pc_value *la_contract(ox_ctx *c, pc_value *m, pc_value *v) {
  int64_t c2 = 2, batch[2] = {0, 1};
  return m && v ? pc_dot_general(G, m, v, 1, &c2, &c2, 2, batch, batch) : NULL;
}

/* the state [B, Hkv, dk, dv] repeated per query head group: [B, Hq, dk, dv] */
static pc_value *la_repeat(ox_ctx *c, pc_value *s, int64_t group) {
  if (group == 1 || !s) return s;
  const int64_t *d = s->type.dims;
  int64_t d5[5] = {d[0], d[1], group, d[2], d[3]}, d4[4] = {d[0], d[1] * group, d[2], d[3]}, dims[5] = {0, 1, 3, 4};
  pc_value *b = pc_broadcast_in_dim(G, s, 5, d5, dims);
  return pc_reshape(G, b, 4, d4);
}

pc_status ox_op_LinearAttention(ox_ctx *c) {
  pc_value *q = ox_in_req(c, 0), *k = ox_in_req(c, 1), *v = ox_in_req(c, 2), *past = ox_in(c, 3), *decay = ox_in(c, 4),
           *beta = ox_in(c, 5);
  if (!q || !k || !v) return ox_status(c);
  const char *rule = ox_attr_str(c, "update_rule", "gated_delta");
  int gating = !strcmp(rule, "gated") || !strcmp(rule, "gated_delta"), delta = !strcmp(rule, "delta") || !strcmp(rule, "gated_delta");
  if (!gating && !delta && strcmp(rule, "linear")) return ox_fail(c, PC_ERR_ATTR, "update_rule '%s' is not supported", rule);
  int64_t hq = ox_attr_int(c, "q_num_heads", 0), hkv = ox_attr_int(c, "kv_num_heads", 0);
  if (hq <= 0 || hkv <= 0 || hq % hkv) return ox_fail(c, PC_ERR_ATTR, "q_num_heads must be a positive multiple of kv_num_heads");
  if ((gating && !decay) || (delta && !beta)) return ox_fail(c, PC_ERR_ATTR, "update_rule '%s' needs decay / beta", rule);
  if (q->type.rank != 3 || k->type.rank != 3 || v->type.rank != 3 || !pc_type_is_static(&q->type) ||
      !pc_type_is_static(&k->type) || !pc_type_is_static(&v->type) || q->type.dims[2] % hq || v->type.dims[2] % hkv)
    return ox_fail(c, PC_ERR_SHAPE, "query, key and value must be static [B, T, heads*D]");
  int64_t B = q->type.dims[0], T = q->type.dims[1], dk = q->type.dims[2] / hq, dv = v->type.dims[2] / hkv;
  if (T > OX_MAX_UNROLL) return ox_fail(c, PC_ERR_UNSUPPORTED, "unsupported: more than %d steps to unroll", OX_MAX_UNROLL);
  pc_value *q4 = la_heads(c, q, hq), *k4 = la_heads(c, k, hkv), *v4 = la_heads(c, v, hkv), *g4 = NULL, *b4 = NULL;
  /* decay per head [B, T, Hkv] or per key dim [B, T, Hkv*dk]; beta per head or shared [B, T, 1] */
  if (decay && (decay->type.rank != 3 || (decay->type.dims[2] != hkv && decay->type.dims[2] != hkv * dk)))
    return ox_fail(c, PC_ERR_SHAPE, "decay must be [B, T, kv_num_heads] or [B, T, kv_num_heads * d_k]");
  if (beta && (beta->type.rank != 3 || (beta->type.dims[2] != hkv && beta->type.dims[2] != 1)))
    return ox_fail(c, PC_ERR_SHAPE, "beta must be [B, T, kv_num_heads] or [B, T, 1]");
  if (decay) g4 = la_heads(c, decay, hkv);
  if (beta) b4 = la_heads(c, beta, beta->type.dims[2]);
  int64_t sd[4] = {B, hkv, dk, dv};
  pc_value *state = past ? pc_convert(G, past, PC_f32) : pc_full(G, PC_f32, 0, 4, sd);
  double scale = ox_attr_float(c, "scale", 0);
  if (scale == 0) scale = 1 / sqrt((double)dk);
  pc_value **outs = pc_alloc(G, sizeof *outs * (size_t)(T + 1));
  for (int64_t t = 0; outs && t < T && ox_status(c) == PC_OK; t++) {
    pc_value *kt = la_step(c, k4, t), *vt = la_step(c, v4, t);
    if (gating) state = ox_binary(c, PC_OP_mul, state, la_unsq(c, pc_exp(G, la_step(c, g4, t)), 3));
    if (delta) {
      pc_value *got = la_contract(c, state, kt); /* [B, Hkv, dv] */
      vt = ox_binary(c, PC_OP_mul, la_step(c, b4, t), ox_binary(c, PC_OP_sub, vt, got));
    }
    state = ox_binary(c, PC_OP_add, state, ox_binary(c, PC_OP_mul, la_unsq(c, kt, 3), la_unsq(c, vt, 2)));
    pc_value *o = la_contract(c, la_repeat(c, state, hq / hkv), la_step(c, q4, t)); /* [B, Hq, dv] */
    outs[t] = la_unsq(c, o ? pc_mul(G, o, ox_like(c, scale, o)) : NULL, 2);
  }
  if (!outs || ox_status(c) != PC_OK) return ox_status(c);
  int64_t perm[4] = {0, 2, 1, 3}, d3[3] = {B, T, hq * dv};
  pc_value *y = pc_reshape(G, pc_transpose(G, pc_concatenate(G, outs, (int)T, 2), perm), 3, d3);
  ox_out(c, 0, pc_convert(G, y, q->type.dtype));
  if (ox_has_out(c, 1)) ox_out(c, 1, pc_convert(G, state, past ? past->type.dtype : q->type.dtype));
  return ox_status(c);
}
