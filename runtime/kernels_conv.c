/* runtime/kernels_conv.c: the conv call: its params decoded, 2-D f32 to the planned conv row (runtime/conv/), N-d by im2col + BLAS, other dtypes element by element, pairs of convs. */
#include "runtime/kernels.h"


/* ---------------------------------------------------------------- conv */

typedef struct conv_desc {
  int dt, S; /* spatial rank */
  shp x, w, o;
  int64_t groups, stride[8], pad[8], dil[8], ldil[8];
} conv_desc;

static void conv_read(const int64_t *q, conv_desc *c) {
  c->dt = (int)q[0];
  q = get_shape(get_shape(get_shape(q + 1, &c->x), &c->w), &c->o);
  c->groups = *q++;
  int64_t *dst[4] = {c->stride, c->pad, c->dil, c->ldil};
  for (int l = 0; l < 4; l++)
    for (int i = 0; i < 8; i++) dst[l][i] = *q++;
  c->S = c->x.rank - 2;
}

/* input position of output position o and kernel tap k along spatial dim d; -1 when it falls in padding */
static int64_t conv_src(const conv_desc *c, int d, int64_t o, int64_t k) {
  int64_t pos = o * c->stride[d] - c->pad[d] + k * c->dil[d];
  if (pos < 0 || pos % c->ldil[d]) return -1;
  pos /= c->ldil[d];
  return pos < c->x.d[2 + d] ? pos : -1;
}

/* input offset inside one channel plane of spatial position (o, k); -1 in padding */
static int64_t conv_offset(const conv_desc *c, const int64_t *o, const int64_t *k) {
  int64_t off = 0;
  for (int d = 0; d < c->S; d++) {
    int64_t s = conv_src(c, d, o[d], k[d]);
    if (s < 0) return -1;
    off = off * c->x.d[2 + d] + s;
  }
  return off;
}

static int64_t prod(const int64_t *d, int n) {
  int64_t p = 1;
  for (int i = 0; i < n; i++) p *= d[i];
  return p;
}

static int conv_is_identity(const conv_desc *c) {
  for (int d = 0; d < c->S; d++)
    if (c->stride[d] != 1 || c->pad[d] != 0 || c->ldil[d] != 1 || c->o.d[2 + d] != c->x.d[2 + d]) return 0;
  return 1;
}


/* NAME: columns [p0, p1) of the im2col rows (ci, tap) of one group's Cg input planes xg (of type SRC) over the P
 * output positions, 0 in the padding, as T into col[Cg*taps][p1 - p0]; all of them in the 2-D case without input
 * dilation by direct index, each row copied over its valid range */
#define IM2COL(NAME, SRC, T)                                                                                              \
  static void NAME(const conv_desc *c, const SRC *xg, int64_t Cg, int64_t p0, int64_t p1, T *col) {                  \
    int64_t taps = prod(c->w.d + 2, c->S), P = prod(c->o.d + 2, c->S), plane = prod(c->x.d + 2, c->S);              \
    if (c->S == 2 && c->ldil[0] == 1 && c->ldil[1] == 1 && p0 == 0 && p1 == P) { /* rows by direct index */          \
      int64_t H = c->x.d[2], W = c->x.d[3], OH = c->o.d[2], OW = c->o.d[3], KH = c->w.d[2], KW = c->w.d[3];          \
      for (int64_t ci = 0; ci < Cg; ci++)                                                                          \
        for (int64_t ky = 0; ky < KH; ky++)                                                                        \
          for (int64_t kx = 0; kx < KW; kx++) {                                                                    \
            T *row = col + ((ci * KH + ky) * KW + kx) * P;                                                         \
            for (int64_t oy = 0; oy < OH; oy++) {                                                                  \
              int64_t iy = oy * c->stride[0] - c->pad[0] + ky * c->dil[0];                                         \
              T *r = row + oy * OW;                                                                                \
              int64_t sw = c->stride[1], x0 = kx * c->dil[1] - c->pad[1], a = 0, b = OW; /* ix = x0 + ox * sw */   \
              if (iy < 0 || iy >= H) a = b = OW;                                                                   \
              const SRC *xr = xg + ci * plane + (a < b ? iy : 0) * W; /* a row of the map: never read off it */    \
              while (a < b && x0 + a * sw < 0) a++;                                                                \
              while (b > a && x0 + (b - 1) * sw >= W) b--;                                                         \
              for (int64_t ox = 0; ox < a; ox++) r[ox] = (T)0;                                                     \
              for (int64_t ox = a; ox < b; ox++) r[ox] = (T)xr[x0 + ox * sw];                                      \
              for (int64_t ox = b; ox < OW; ox++) r[ox] = (T)0;                                                    \
            }                                                                                                      \
          }                                                                                                        \
      return;                                                                                                      \
    }                                                                                                              \
    for (int64_t ci = 0; ci < Cg; ci++) {                                                                          \
      int64_t k[8] = {0}, t = 0;                                                                                   \
      do {                                                                                                         \
        int64_t o[8] = {0}, rest = p0;                                                                             \
        for (int d = c->S - 1; d >= 0; d--) o[d] = rest % c->o.d[2 + d], rest /= c->o.d[2 + d];                   \
        T *row = col + (ci * taps + t) * (p1 - p0);                                                                \
        for (int64_t pidx = 0; pidx < p1 - p0; pidx++, next_index(o, c->o.d + 2, c->S)) {                         \
          int64_t off = conv_offset(c, o, k);                                                                      \
          row[pidx] = off < 0 ? (T)0 : (T)xg[ci * plane + off];                                                    \
        }                                                                                                          \
        t++;                                                                                                       \
      } while (next_index(k, c->w.d + 2, c->S));                                                                   \
    }                                                                                                              \
  }
IM2COL(conv_im2col, float, float)
IM2COL(im2col_i32_float, int32_t, float)
IM2COL(im2col_i32_double, int32_t, double)

/* f32: im2col of one (image, group) into col[Cg*taps][P], then one sgemm per group */
static void conv_f32(const conv_desc *c, float *out, const float *x, const float *w, float *col) {
  int64_t N = c->x.d[0], C = c->x.d[1], O = c->w.d[0], Cg = c->w.d[1], Og = O / c->groups;
  int64_t taps = prod(c->w.d + 2, c->S), P = prod(c->o.d + 2, c->S), plane = prod(c->x.d + 2, c->S);
  for (int64_t n = 0; n < N; n++)
    for (int64_t g = 0; g < c->groups; g++) {
      const float *b = col;
      if (taps == 1 && P == plane && conv_is_identity(c)) {
        b = x + (n * C + g * Cg) * plane; /* 1x1, stride 1, no padding: the image is the matrix */
      } else {
        conv_im2col(c, x + (n * C + g * Cg) * plane, Cg, 0, P, col);
      }
      primc_sgemm(0, 0, Og, P, Cg * taps, 1.0f, w + g * Og * Cg * taps, Cg * taps, b, P, 0.0f,
                  out + (n * O + g * Og) * P, P);
    }
}


/* the largest |v| of n int32 values, as int64 (|INT32_MIN| fits) */
static int64_t abs_max_i32(const int32_t *v, int64_t n) {
  int64_t m = 0;
  for (int64_t i = 0; i < n; i++) {
    int64_t a = v[i] < 0 ? -(int64_t)v[i] : v[i];
    m = a > m ? a : m;
  }
  return m;
}

int64_t primc_conv_i32_scratch_bytes(int64_t K, int64_t P, int64_t Og) { return 4 * (K * P + Og * K + Og * P); }


/* int32 conv (ConvInteger, QLinearConv: u8/i8 operands minus zero points) through a floating-point GEMM per group
 * over an im2col, where every sum is exact: f32 GEMMs over chunks of K short enough that each chunk's sum stays
 * below 2^24 (u8 x i8: 518 taps), added up in int32; else, while the whole sum stays below 2^53, one f64 GEMM. The
 * exact sum wraps to int32 as the integer loop's would. scratch: Cg*taps*P + Og*Cg*taps + Og*P floats (the f64 GEMMs
 * take the output positions in chunks that fit it). 0 when neither applies (the caller's integer loop runs). */
static int conv_i32_gemm(const conv_desc *c, int32_t *out, const int32_t *x, const int32_t *w, void *scratch) {
  int64_t N = c->x.d[0], C = c->x.d[1], O = c->w.d[0], Cg = c->w.d[1], Og = O / c->groups;
  int64_t taps = prod(c->w.d + 2, c->S), P = prod(c->o.d + 2, c->S), plane = prod(c->x.d + 2, c->S), K = Cg * taps;
  double mx = (double)abs_max_i32(x, N * C * plane), mw = (double)abs_max_i32(w, O * K);
  if (!scratch) return 0;
  int64_t chunk = mx * mw > 0 ? (int64_t)(16777215.0 / (mx * mw)) : K;
  if (chunk >= 1) {
    if (chunk > K) chunk = K;
    float *col = scratch, *wf = col + K * P, *acc = wf + Og * K;
    for (int64_t n = 0; n < N; n++)
      for (int64_t g = 0; g < c->groups; g++) {
        im2col_i32_float(c, x + (n * C + g * Cg) * plane, Cg, 0, P, col);
        for (int64_t i = 0; i < Og * K; i++) wf[i] = (float)w[g * Og * K + i];
        uint32_t *og = (uint32_t *)out + (n * O + g * Og) * P;
        for (int64_t i = 0; i < Og * P; i++) og[i] = 0;
        for (int64_t k0 = 0; k0 < K; k0 += chunk) {
          int64_t kc = K - k0 < chunk ? K - k0 : chunk;
          if (primc_sgemm(0, 0, Og, P, kc, 1.0f, wf + k0, K, col + k0 * P, P, 0.0f, acc, P) != PRIMC_OK) return 0;
          for (int64_t i = 0; i < Og * P; i++) og[i] += (uint32_t)(int32_t)acc[i];
        }
      }
    return 1;
  }
  if (mx * mw * (double)K >= 9007199254740992.0) return 0;
  /* one f64 GEMM per chunk of output positions, in the scratch sized for floats (primc_conv_i32_scratch_bytes) */
  int64_t doubles = (K * P + Og * K + Og * P) / 2, pc = (doubles - Og * K) / (K + Og);
  if (pc < 1) return 0;
  if (pc > P) pc = P;
  double *wd = scratch, *col = wd + Og * K, *acc = col + K * pc;
  for (int64_t n = 0; n < N; n++)
    for (int64_t g = 0; g < c->groups; g++) {
      for (int64_t i = 0; i < Og * K; i++) wd[i] = (double)w[g * Og * K + i];
      int32_t *og = out + (n * O + g * Og) * P;
      for (int64_t p0 = 0; p0 < P; p0 += pc) {
        int64_t w1 = P - p0 < pc ? P - p0 : pc;
        im2col_i32_double(c, x + (n * C + g * Cg) * plane, Cg, p0, p0 + w1, col);
        primc_dgemm(0, 0, Og, w1, K, wd, K, col, w1, acc, w1);
        for (int64_t o = 0; o < Og; o++)
          for (int64_t i = 0; i < w1; i++) og[o * P + p0 + i] = (int32_t)(uint32_t)(uint64_t)(int64_t)acc[o * w1 + i];
      }
    }
  return 1;
}

static void conv_generic(const conv_desc *c, char *out, const char *x, const char *w) {
  int64_t N = c->x.d[0], C = c->x.d[1], O = c->w.d[0], Cg = c->w.d[1], Og = O / c->groups;
  int64_t taps = prod(c->w.d + 2, c->S), P = prod(c->o.d + 2, c->S), plane = prod(c->x.d + 2, c->S);
  int f = is_float(c->dt);
  for (int64_t n = 0; n < N; n++)
    for (int64_t oc = 0; oc < O; oc++) {
      int64_t g = oc / Og, o[8] = {0}, pidx = 0;
      do {
        double accf = 0;
        uint64_t acci = 0;
        for (int64_t ci = 0; ci < Cg; ci++) {
          int64_t k[8] = {0}, t = 0;
          do {
            int64_t off = conv_offset(c, o, k);
            if (off >= 0) {
              int64_t xi = (n * C + g * Cg + ci) * plane + off, wi = (oc * Cg + ci) * taps + t;
              if (f) accf += get_f(x, xi, c->dt) * get_f(w, wi, c->dt);
              else acci += (uint64_t)get_i(x, xi, c->dt) * (uint64_t)get_i(w, wi, c->dt);
            }
            t++;
          } while (next_index(k, c->w.d + 2, c->S));
        }
        if (f) set_f(out, (n * O + oc) * P + pidx, c->dt, accf);
        else set_i(out, (n * O + oc) * P + pidx, c->dt, (int64_t)acci);
        pidx++;
      } while (next_index(o, c->o.d + 2, c->S));
    }
}

/* the fused epilogue codegen appends after the conv params (CONV_EPI words at CONV_EPI_AT):
 * [fused, bias offset, bias stride (-1: no bias), has residual, lo, hi (doubles as bits), act (PRIMC_ACT_*), how the weights are
 * packed (PRIMC_CONV_W_*: 0 plain), the tile height they were packed for, the packed weights' bytes, the
 * planned conv row + 1 (runtime/conv/plan.c), act RQ's words (PRIMC_CONV_EPI_RQ), x's, y's and the residual's
 * storage (PRIMC_CONV_EPI_STORE)];
 * bufs[4..6] = y, bias, residual (act RQ: its scales) */
#define CONV_EPI_AT PRIMC_CONV_EPI_AT
#define CONV_EPI_PACKED 7
#define CONV_EPI_TILE 8
#define CONV_EPI_WBYTES 9
#define CONV_EPI_ROW 10 /* the planned row + 1; 0 in params made without a plan */

static void conv_epi_read(const int64_t *q, void *const *bufs, primc_conv_epi *e) {
  double lo, hi;
  memcpy(&lo, &q[4], 8);
  memcpy(&hi, &q[5], 8);
  e->bias = q[0] && q[2] >= 0 && bufs[5] ? (const float *)bufs[5] + q[1] : NULL; /* its arg is y when absent */
  e->bias_stride = q[2] < 0 ? 0 : q[2];
  e->res = q[0] && q[3] ? bufs[6] : NULL;
  e->lo = (float)lo;
  e->hi = (float)hi;
  e->act = q[0] && q[6] > 0 && q[6] < PRIMC_ACT_COUNT ? (int)q[6] : PRIMC_ACT_NONE;
  e->rq_scale = NULL, e->rq_scale_stride = 0, e->rq_scale_c = e->rq_div = 1.0f, e->rq_zp = 0.0f;
  if (e->act == PRIMC_ACT_RQ) { /* its scales in the residual's buffer */
    const int64_t *r = q + PRIMC_CONV_EPI_RQ;
    double c, div, zp;
    memcpy(&c, &r[2], 8);
    memcpy(&div, &r[3], 8);
    memcpy(&zp, &r[4], 8);
    e->res = NULL;
    e->rq_scale = r[1] >= 0 && bufs[6] ? (const float *)bufs[6] + r[0] : NULL;
    e->rq_scale_stride = r[1] < 0 ? 0 : r[1];
    e->rq_scale_c = (float)c, e->rq_div = (float)div, e->rq_zp = (float)zp;
  }
}

/* the 2-D f32 conv as primc_conv2d, a 1-D one as 2-D of height 1 (a long strided audio kernel then gets the 2-D
 * rows); 0 when the bottom/right padding codegen implies is negative */
static int conv2d_params(const conv_desc *c, primc_conv2d *p) {
  if (c->dt != PRIMC_F32 || (c->S != 2 && c->S != 1) || c->ldil[0] != 1 || (c->S == 2 && c->ldil[1] != 1)) return 0;
  int two = c->S == 2; /* dim h is the 2-D conv's first spatial dim, or a dim of 1 */
  int64_t oh_want = two ? c->o.d[2] : 1, ow_want = c->o.d[1 + c->S];
  *p = (primc_conv2d){.n = c->x.d[0], .c = c->x.d[1], .h = two ? c->x.d[2] : 1, .w = c->x.d[1 + c->S],
                      .o = c->w.d[0], .kh = two ? c->w.d[2] : 1, .kw = c->w.d[1 + c->S], .groups = c->groups,
                      .stride_h = two ? c->stride[0] : 1, .stride_w = c->stride[c->S - 1],
                      .dil_h = two ? c->dil[0] : 1, .dil_w = c->dil[c->S - 1], .pad_t = two ? c->pad[0] : 0,
                      .pad_l = c->pad[c->S - 1]};
  /* the end padding the last output reaches; negative when a strided conv leaves the last input rows
   * unread (a 1x1/2 downsample of an even map), which is the same conv with none */
  p->pad_b = (oh_want - 1) * p->stride_h + p->dil_h * (p->kh - 1) + 1 - p->h - p->pad_t;
  p->pad_r = (ow_want - 1) * p->stride_w + p->dil_w * (p->kw - 1) + 1 - p->w - p->pad_l;
  if (p->pad_b < 0 && p->pad_b > -p->stride_h) p->pad_b = 0;
  if (p->pad_r < 0 && p->pad_r > -p->stride_w) p->pad_r = 0;
  int64_t oh, ow;
  return p->pad_b >= 0 && p->pad_r >= 0 && primc_conv2d_out_hw(p, &oh, &ow) && oh == oh_want && ow == ow_want;
}

int primc_conv2d_of_params(const int64_t *params, primc_conv2d *p) {
  conv_desc c;
  conv_read(params, &c);
  if (c.S < 0 || c.S > 6 || c.groups < 1 || !conv2d_params(&c, p)) return 0;
  int64_t layout = params[CONV_EPI_AT + CONV_EPI_PACKED], tile = params[CONV_EPI_AT + CONV_EPI_TILE];
  primc_conv2d_set_layout(p, (int)layout, (int)tile);
  p->store = (int)(params[CONV_EPI_AT + PRIMC_CONV_EPI_STORE] &
                   (PRIMC_CONV_X_PAIRS | PRIMC_CONV_Y_PAIRS | PRIMC_CONV_RES_PAIRS));
  return 1;
}

/* bufs: out, x, w, im2col scratch, then with a fused epilogue y, bias, residual (see CONV_EPI_AT) */
int primc_k_conv(const int64_t *params, void *const *bufs) {
  conv_desc c;
  conv_read(params, &c);
  if (c.S < 0 || c.S > 6 || c.groups < 1) return PRIMC_ERR_RUNTIME;
  if (numel(&c.o) == 0) return PRIMC_OK;
  const int64_t *q = params + CONV_EPI_AT;
  primc_conv_epi e;
  conv_epi_read(q, bufs, &e);
  primc_conv2d p;
  int two_d = primc_conv2d_of_params(params, &p);
  if (q[CONV_EPI_PACKED] && !two_d) return PRIMC_ERR_RUNTIME; /* only the 2-D path reads packed weights */
  int planned = two_d && q[CONV_EPI_ROW] > 0 && q[CONV_EPI_ROW] <= PRIMC_CONV_ROW_COUNT;
  primc_conv_plan plan = {(int32_t)(q[CONV_EPI_ROW] - 1), (int32_t)q[CONV_EPI_PACKED], (int32_t)q[CONV_EPI_TILE]};
  const void *w = bufs[2];
  if (q[CONV_EPI_PACKED] && q[CONV_EPI_WBYTES] < 0) { /* plain weights, packed here into the scratch past the col */
    if (!planned) return PRIMC_ERR_RUNTIME;
    char *dst = (char *)bufs[3] + primc_conv_plan_pack_offset(&p, &plan);
    if ((uintptr_t)dst % 64 || primc_conv_plan_weight_bytes(&p, &plan) != (size_t)-q[CONV_EPI_WBYTES])
      return PRIMC_ERR_RUNTIME;
    primc_conv2d plain = p; /* the weights as they arrive */
    primc_conv2d_set_layout(&plain, PRIMC_CONV_W_PLAIN, 0);
    int st = q[PRIMC_CONV_EPI_STORE] & PRIMC_CONV_W_FLIPPED ? primc_conv_plan_pack_flipped(&plain, &plan, bufs[2], dst)
                                                            : primc_conv_plan_pack(&plain, &plan, bufs[2], dst);
    if (st != PRIMC_OK) return st;
    w = dst;
  } else if (q[PRIMC_CONV_EPI_STORE] & PRIMC_CONV_W_FLIPPED) {
    return PRIMC_ERR_RUNTIME; /* flipped weights are read only by the per-call packing */
  } else if (q[CONV_EPI_PACKED] &&
             (q[CONV_EPI_WBYTES] < 1 || primc_conv2d_check_weights(&p, bufs[2], (size_t)q[CONV_EPI_WBYTES]))) {
    /* packed weights may come from a weights file: their headers decide every read, so they are checked first */
    return PRIMC_ERR_WEIGHTS;
  }
  if (planned) /* the compiled plan, run as it is */
    return primc_conv_run(&p, &plan, bufs[1], w, q[0] ? &e : NULL, q[0] ? bufs[4] : bufs[0], bufs[0], bufs[3]);
  if (two_d) /* params made without a plan: planned now, for the layout they name */
    return primc_conv2d_f32_epi(&p, bufs[1], bufs[2], q[0] ? &e : NULL, q[0] ? bufs[4] : bufs[0], bufs[0],
                                bufs[3]);
  if (c.dt == PRIMC_F32) conv_f32(&c, bufs[0], bufs[1], bufs[2], bufs[3]);
  else if (c.dt != PRIMC_I32 || !conv_i32_gemm(&c, bufs[0], bufs[1], bufs[2], bufs[3])) conv_generic(&c, bufs[0], bufs[1], bufs[2]);
  if (q[0]) {
    if (c.dt != PRIMC_F32) return PRIMC_ERR_RUNTIME;
    primc_conv_epi_apply(&e, c.o.d[0], c.o.d[1], prod(c.o.d + 2, c.S), bufs[0], bufs[4], 0); /* plain C: libm exp, erf */
  }
  return PRIMC_OK;
}

/* two conv calls, a small conv and the depthwise conv that reads its fused result (bufs[4]), as one where
 * primc_conv2d_then_dw_f32 runs them; otherwise one after the other */
int primc_k_conv_pair(const int64_t *pa, void *const *ba, const int64_t *pb, void *const *bb) {
  const int64_t *qa = pa + CONV_EPI_AT, *qb = pb + CONV_EPI_AT;
  primc_conv2d pw, dw;
  primc_conv_epi e1, e2;
  if (qa[0] && bb[1] == ba[4] && primc_conv2d_of_params(pa, &pw) && primc_conv2d_of_params(pb, &dw)) {
    conv_epi_read(qa, ba, &e1);
    conv_epi_read(qb, bb, &e2);
    /* PRIMC_ERR_ARG: the pair is not one it runs (checked before it writes anything) */
    int st = primc_conv2d_then_dw_f32(&pw, ba[1], ba[2], &e1, &dw, bb[2], qb[0] ? &e2 : NULL, qb[0] ? bb[4] : bb[0]);
    if (st != PRIMC_ERR_ARG) return st;
  }
  int st = primc_k_conv(pa, ba);
  return st != PRIMC_OK ? st : primc_k_conv(pb, bb);
}
