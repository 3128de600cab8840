/* runtime/conv/gemm_paths.c: the rows that run on primc_sgemm: 1x1 GEMM, direct over phase images, 1-D windows, explicit and implicit im2col, the transposed GEMM. */
#include "runtime/conv/conv.h"

#include <stdint.h>
#include <string.h>

/* ---------------------------------------------------------------- direct convs */

/*
 * A stride-1 conv over an input padded to Hp x Wp is a GEMM whose B needs no copy at all: with the
 * outputs numbered q = oy * Wp + ox over padded-width rows, tap k = (c, i, j) reads B[k][q] =
 * xp[c][i * dh][j * dw + q], consecutive in q. So the micro-kernel loads B straight from the padded
 * image at koff[k] + q (no im2col, no packing), and the Wp - OW columns of each row that fall on
 * padding are computed and dropped by the epilogue, which writes y's compact rows.
 *
 * Stride s becomes stride 1 on phase images: xph[a][b][c][yy][xx] = xp[c][s yy + a][s xx + b]. Tap
 * (i, j) with i dh = s qi + a, j dw = s qj + b reads phase (a, b) at (oy + qi, ox + qj), so every tap is
 * again one offset into one of the phase images, all Hph x Wph. Building the phases is one strided
 * copy of the input, the cost the padding copy has anyway.
 *
 * Worth it while the dropped columns are few; past a share of the row the planner sets (plan.c) im2col costs less
 * than the wasted FMAs.
 */
#define DIRECT_MAX_STRIDE 4
#define DIRECT_SLACK 64 /* floats past the phase images a masked tail can reach by address */

typedef struct direct_geo {
  int64_t hph, wph, oh, ow, taps_floats, xp_floats, phase_floats;
  int64_t phase_base[DIRECT_MAX_STRIDE][DIRECT_MAX_STRIDE]; /* -1: no tap reads the phase */
} direct_geo;

static direct_geo direct_geometry(const primc_conv2d *p, int64_t oh, int64_t ow) {
  direct_geo d = {.oh = oh, .ow = ow};
  int64_t cg = p->c / p->groups, n = 0;
  d.hph = oh + (p->kh - 1) * p->dil_h / p->stride_h;
  d.wph = ow + (p->kw - 1) * p->dil_w / p->stride_w;
  d.phase_floats = cg * d.hph * d.wph;
  for (int a = 0; a < DIRECT_MAX_STRIDE; a++)
    for (int b = 0; b < DIRECT_MAX_STRIDE; b++) d.phase_base[a][b] = -1;
  for (int64_t i = 0; i < p->kh; i++)
    for (int64_t j = 0; j < p->kw; j++) {
      int64_t *base = &d.phase_base[i * p->dil_h % p->stride_h][j * p->dil_w % p->stride_w];
      if (*base < 0) *base = n++ * d.phase_floats;
    }
  d.taps_floats = 2 * cg * p->kh * p->kw; /* koff: one int64 per tap */
  d.xp_floats = n * d.phase_floats + p->kw * p->dil_w + DIRECT_SLACK;
  return d;
}

/* the output width of the phase images' rows, of which ow are outputs (the planner weighs the waste) */
int64_t primc_cv_direct_wph(const primc_conv2d *p, int64_t ow) { return ow + (p->kw - 1) * p->dil_w / p->stride_w; }

/* strides the phase images cover; a 1x1 stride-1 conv is one GEMM already */
int primc_cv_direct_can(const primc_conv2d *p) {
  return p->stride_h <= DIRECT_MAX_STRIDE && p->stride_w <= DIRECT_MAX_STRIDE && !cv_is_pointwise(p);
}

static int64_t direct_floats(const primc_conv2d *p, int64_t oh, int64_t ow) {
  direct_geo d = direct_geometry(p, oh, ow);
  return d.taps_floats + d.xp_floats + (p->o / p->groups) * oh * d.wph;
}

/* phase (a, b) of channels [c0, c1): xph[c][yy][xx] = x[c][s yy + a - pad_t][s xx + b - pad_l] inside x, else 0 */
static void build_phase(const primc_conv2d *p, const direct_geo *d, const float *x, int64_t a, int64_t b, float *xph,
                        int64_t c0, int64_t c1) {
  int64_t sh = p->stride_h, sw = p->stride_w;
  int64_t col0 = b - p->pad_l; /* input column of phase column 0 */
  int64_t lo = col0 >= 0 ? 0 : (-col0 + sw - 1) / sw, hi = col0 > p->w - 1 ? 0 : (p->w - 1 - col0) / sw + 1;
  if (hi > d->wph) hi = d->wph;
  if (lo > hi) lo = hi;
  for (int64_t c = c0; c < c1; c++)
    for (int64_t yy = 0; yy < d->hph; yy++) {
      float *row = xph + (c * d->hph + yy) * d->wph;
      int64_t ih = sh * yy + a - p->pad_t;
      if (ih < 0 || ih >= p->h || hi == lo) {
        memset(row, 0, (size_t)d->wph * sizeof(float));
        continue;
      }
      memset(row, 0, (size_t)lo * sizeof(float));
      primc_cv_copy_strided(row + lo, x + (c * p->h + ih) * p->w + col0 + lo * sw, hi - lo, sw);
      memset(row + hi, 0, (size_t)(d->wph - hi) * sizeof(float));
    }
}

typedef struct phases_job {
  const primc_conv2d *p;
  const direct_geo *d;
  const float *x;
  float *xp;
} phases_job;

static void phases_range(void *ctx, int64_t c0, int64_t c1) {
  const phases_job *j = ctx;
  for (int64_t a = 0; a < j->p->stride_h; a++)
    for (int64_t b = 0; b < j->p->stride_w; b++)
      if (j->d->phase_base[a][b] >= 0) build_phase(j->p, j->d, j->x, a, b, j->xp + j->d->phase_base[a][b], c0, c1);
}

/* the used phases, split over the threads by channel when there is enough to copy (the copy would
 * otherwise be the serial part of the conv: 1x1/2 downsamples scaled 0.8x on 2 threads) */
#define PHASES_SPLIT_FLOATS (1 << 15)
static void build_phases(const primc_conv2d *p, const direct_geo *d, const float *x, float *xp) {
  int64_t used = 0, cg = p->c / p->groups;
  for (int64_t a = 0; a < p->stride_h; a++)
    for (int64_t b = 0; b < p->stride_w; b++) used += d->phase_base[a][b] >= 0;
  phases_job j = {p, d, x, xp};
  if (used * d->phase_floats >= PHASES_SPLIT_FLOATS && cg > 1)
    primc_parallel_for(cg, phases_range, &j);
  else
    phases_range(&j, 0, cg);
  memset(xp + used * d->phase_floats, 0, (size_t)(d->xp_floats - used * d->phase_floats) * sizeof(float));
}

typedef struct direct_epi {
  epi_ctx e; /* y and res in y's compact layout */
  int64_t wp, oh, ow;
} direct_epi;

/* the padded-width tile [m0, m0+mb) x [n0, n0+nb) of sums: each output row's valid part to y */
static void direct_rows(void *ctx, float *C, int64_t ldc, int64_t m0, int64_t n0, int64_t mb, int64_t nb) {
  const direct_epi *d = ctx;
  const epi_ctx *e = &d->e;
  int isa = primc_sgemm_isa();
  for (int64_t oy = n0 / d->wp; oy < d->oh && oy * d->wp < n0 + nb; oy++) {
    int64_t q0 = oy * d->wp > n0 ? oy * d->wp : n0, q1 = oy * d->wp + d->ow < n0 + nb ? oy * d->wp + d->ow : n0 + nb;
    if (q1 <= q0) continue;
    for (int64_t m = 0; m < mb; m++) {
      int64_t off = (m0 + m) * d->oh * d->ow + oy * d->ow + (q0 - oy * d->wp);
      const float *c = C + m * ldc + (q0 - n0), *res = e->res ? e->res + off : NULL;
      cv_epi_row(isa, e, e->y + off, c, res, cv_bias_at(e, m0 + m), cv_scale_at(e, m0 + m), q1 - q0);
    }
  }
}

/* one (image, group): x and w at the group's start, c the epilogue with y and res there */
static int direct_conv(const primc_conv2d *p, int64_t oh, int64_t ow, const float *x, const float *w,
                       const epi_ctx *c, float *col) {
  direct_geo d = direct_geometry(p, oh, ow);
  int64_t *koff = (int64_t *)(void *)col, cg = p->c / p->groups, taps = p->kh * p->kw;
  float *xp = col + d.taps_floats, *sums = xp + d.xp_floats;
  for (int64_t t = 0; t < taps; t++) {
    int64_t vi = t / p->kw * p->dil_h, vj = t % p->kw * p->dil_w;
    int64_t base = d.phase_base[vi % p->stride_h][vj % p->stride_w];
    int64_t at = vi / p->stride_h * d.wph + vj / p->stride_w;
    for (int64_t ch = 0; ch < cg; ch++) koff[ch * taps + t] = base + ch * d.hph * d.wph + at;
  }
  build_phases(p, &d, x, xp);
  direct_epi de = {*c, d.wph, oh, ow};
  int64_t og = p->o / p->groups, kk = cg * taps;
  primc_gemm g = {.M = og, .N = oh * d.wph, .K = kk, .a = w, .lda = kk, .a_packed_mr = p->w_packed_mr, .b = xp,
                  .koff = koff, .c = sums, .ldc = oh * d.wph, .epi = direct_rows, .epi_ctx = &de};
  /* the micro-kernel drops the padding columns as it stores the outputs: no second pass over the sums */
  primc_gemm_store gs = {c->bias, c->bias_stride, c->res, c->lo, c->hi, d.wph, ow, c->y, oh * ow};
  if (!c->act) g.store = &gs, g.epi = NULL;
  return primc_sgemm_run(&g);
}

/* ---------------------------------------------------------------- output channels in the lanes */

/*
 * With few output pixels (7x7 maps: 49 = 32 + 17 lanes, a quarter of the FMAs on padding) the GEMM
 * runs transposed: C^T[P][Og] = X_col^T[P][K] W^T[K][Og], pixels as the broadcast rows and output
 * channels in the lanes, W^T packed once as B panels. The epilogue turns each finished tile back.
 */
typedef struct lanes_epi {
  epi_ctx e; /* y and res in y's layout */
  int64_t P;
} lanes_epi;

/* the tile of C^T (pixels [m0, m0+mb) x channels [n0, n0+nb)) into y[channel][pixel] */
static void lanes_rows(void *ctx, float *C, int64_t ldc, int64_t m0, int64_t n0, int64_t mb, int64_t nb) {
  const lanes_epi *d = ctx;
  epi_ctx en = cv_epi_at(&d->e, n0, d->P);
  cv_ct_store(&en, d->P, C, ldc, m0, mb, nb);
}

/* bytes from one group's W^T panels to the next: 64-aligned, as primc_sgemm_pack_b wants */
size_t primc_cv_panels_stride(int64_t og, int64_t kk) { return (primc_sgemm_packed_b_size(og, kk) + 63) / 64 * 64; }

/* each group's W^T panels' header checked, the stride from one group's to the next's in *stride:
 * that of the ISA that packed them, as the first header names it */
int primc_cv_panels_check(const primc_conv2d *p, const void *w, size_t avail, size_t *stride) {
  int64_t og = p->o / p->groups, kk = (p->c / p->groups) * p->kh * p->kw;
  size_t used;
  if (primc_sgemm_packed_check(w, avail, og, kk, &used) != PRIMC_OK) return PRIMC_ERR_WEIGHTS;
  size_t s = (used + 63) / 64 * 64;
  for (int64_t g = 1; g < p->groups; g++)
    if ((size_t)g > avail / s ||
        primc_sgemm_packed_check((const char *)w + g * s, avail - (size_t)g * s, og, kk, &used) != PRIMC_OK ||
        (used + 63) / 64 * 64 != s)
      return PRIMC_ERR_WEIGHTS;
  *stride = s;
  return PRIMC_OK;
}

/* one (image, group): X_col^T from x (1x1) or im2col in col, C^T after it in col */
static int lanes_conv(const primc_conv2d *p, int64_t oh, int64_t ow, const float *x, const void *w, const epi_ctx *c,
                      float *col) {
  int64_t og = p->o / p->groups, kk = (p->c / p->groups) * p->kh * p->kw, P = oh * ow;
  const float *a = x;
  if (!cv_is_pointwise(p)) {
    primc_cv_im2col_par(p, x, p->c / p->groups, oh, ow, col);
    a = col;
  }
  lanes_epi le = {*c, P};
  primc_gemm g = {.M = P, .N = og, .K = kk, .a = a, .lda = P, .trans_a = 1, .b_packed = w, .c = col + kk * P,
                  .ldc = og, .epi = lanes_rows, .epi_ctx = &le};
  return primc_sgemm_run(&g);
}

static int64_t lanes_floats(const primc_conv2d *p, int64_t oh, int64_t ow) {
  int64_t og = p->o / p->groups, kk = (p->c / p->groups) * p->kh * p->kw, P = oh * ow;
  return kk * P + P * og;
}


/* ---------------------------------------------------------------- 1-D windows of one channel */

/*
 * A 1-D conv of one input channel per group (raw audio: a spectrogram as a 512-tap conv at stride 160,
 * wav2vec's 10-tap first layer) has im2col columns that are windows of its input: X_col^T[q][j] =
 * xp[s q + j], rows of B^T s floats apart, overlapping where s < kw. The GEMM packs its panels from
 * them by 16x16 transposes where the other paths gather each B row at stride s. xp, x with its
 * padding, is the only copy.
 */
static int windows_can(const primc_conv2d *p) {
  return p->c == p->groups && p->h == 1 && p->kh == 1 && p->pad_t == 0 && p->pad_b == 0 && p->dil_w == 1;
}

static int64_t windows_floats(const primc_conv2d *p, int64_t ow) { return (ow - 1) * p->stride_w + p->kw; }

/* xp[i] = x[i - pad_l] inside x, else 0, for i < n */
static void windows_pad(const primc_conv2d *p, const float *x, int64_t n, float *xp) {
  int64_t lo = p->pad_l < n ? p->pad_l : n, hi = p->pad_l + p->w < n ? p->pad_l + p->w : n; /* lo <= hi: w > 0 */
  memset(xp, 0, (size_t)lo * sizeof(float));
  if (hi > lo) memcpy(xp + lo, x + (lo - p->pad_l), (size_t)(hi - lo) * sizeof(float));
  memset(xp + hi, 0, (size_t)(n - hi) * sizeof(float));
}

/* ---------------------------------------------------------------- the batch as GEMM columns */

/* the GEMM rows read plain weights or A strips; not depthwise convs, which have their own rows */
static int gemm_weights(const primc_conv2d *p) { return !cv_is_depthwise(p) && cv_w_strips_or_plain(p); }

/*
 * At batch n the per-image GEMMs of a small map are narrow (ResNet's 7x7 stage: 49 columns, the last panel
 * mostly empty) and stream, or pack, the weights again for every image. One GEMM per group over the columns
 * of all images, q = image * P + pixel, its B rows generated from x (implicit im2col across the images'
 * boundaries), C in the scratch; the epilogue writes each finished tile into y's images.
 */
typedef struct batch_src {
  col_src s;              /* image 0's group */
  int64_t P, img_floats;  /* columns per image; floats from one image's input to the next */
} batch_src;

static void batch_col_row(void *ctx, int64_t k, int64_t n0, int64_t nc, float *dst) {
  const batch_src *b = ctx;
  while (nc > 0) {
    int64_t img = n0 / b->P, q = n0 % b->P, run = b->P - q < nc ? b->P - q : nc;
    col_src s = b->s;
    s.x += img * b->img_floats;
    primc_cv_col_row(&s, k, q, run, dst);
    dst += run, n0 += run, nc -= run;
  }
}

typedef struct batch_epi {
  epi_ctx e;              /* y and res at image 0's group */
  int64_t P, img_floats;  /* pixels per channel; floats from one image's output to the next */
} batch_epi;

/* the finished tile of C (rows [m0, m0+mb), columns [n0, n0+nb)) into each image's rows of y */
static void batch_rows(void *ctx, float *C, int64_t ldc, int64_t m0, int64_t n0, int64_t mb, int64_t nb) {
  const batch_epi *d = ctx;
  const epi_ctx *e = &d->e;
  int isa = primc_sgemm_isa();
  for (int64_t m = 0; m < mb; m++) {
    float b = cv_bias_at(e, m0 + m), s = cv_scale_at(e, m0 + m);
    for (int64_t q = n0; q < n0 + nb;) {
      int64_t pix = q % d->P, run = d->P - pix < n0 + nb - q ? d->P - pix : n0 + nb - q;
      int64_t off = q / d->P * d->img_floats + (m0 + m) * d->P + pix;
      cv_epi_row(isa, e, e->y + off, C + m * ldc + (q - n0), e->res ? e->res + off : NULL, b, s, run);
      q += run;
    }
  }
}

static int64_t batch_floats(const primc_conv2d *p, int64_t oh, int64_t ow) { return p->o / p->groups * p->n * oh * ow; }

int primc_cv_batch_fits(const primc_conv2d *p, const primc_conv2d *next) { return gemm_weights(p) && p->n > 1; }

int64_t primc_cv_batch_scratch(const primc_conv2d *p) {
  int64_t oh, ow;
  primc_conv2d_out_hw(p, &oh, &ow);
  return p->n > 1 ? batch_floats(p, oh, ow) : 0;
}

int primc_cv_batch_run(const cv_call *k) {
  const primc_conv2d *p = k->p;
  const primc_conv_epi *e = k->e;
  int64_t cg = p->c / p->groups, og = p->o / p->groups, kk = cg * p->kh * p->kw, P = k->oh * k->ow;
  for (int64_t g = 0; g < p->groups; g++) {
    batch_src src = {{p, k->x + g * cg * p->h * p->w, k->oh, k->ow, cv_use_avx512() && (p->stride_w == 1 || p->stride_w == 2)},
                     P, p->c * p->h * p->w};
    batch_epi be = {cv_epi_of(e, g * og, k->y + g * og * P, e->res ? e->res + g * og * P : NULL), P, p->o * P};
    primc_gemm gm = {.M = og, .N = p->n * P, .K = kk, .a = (const float *)k->w + g * og * kk, .lda = kk,
                     .a_packed_mr = p->w_packed_mr, .c = k->col, .ldc = p->n * P, .brow = batch_col_row,
                     .brow_ctx = &src, .epi = batch_rows, .epi_ctx = &be};
    int st = primc_sgemm_run(&gm);
    if (st != PRIMC_OK) return st;
  }
  return PRIMC_OK;
}

/* ---------------------------------------------------------------- the rows */

enum { GP_1X1, GP_DIRECT, GP_EXPLICIT, GP_IMPLICIT, GP_PANELS, GP_WINDOWS };

/* One GEMM per (image, group): Y_g[Og][P] = W_g[Og][Cg kh kw] X_col[Cg kh kw][P], with the weights as A
 * (strips or plain) and the epilogue on each finished tile; the paths differ in where B comes from. */
static int gemm_groups(const cv_call *k, int path) {
  const primc_conv2d *p = k->p;
  const primc_conv_epi *e = k->e;
  int64_t oh = k->oh, ow = k->ow, cg = p->c / p->groups, og = p->o / p->groups, kk = cg * p->kh * p->kw, P = oh * ow;
  const float *w = k->w;
  float *y = k->y, *acc = k->acc, *col = k->col;
  primc_epilogue epi = primc_cv_epi_needed(e) || acc != y ? primc_cv_epi_rows : NULL;
  /* each group's panels as their header says they were packed (by the ISA of the machine that packed
   * them, whose panel width gives the stride from one group to the next); every header's fields are
   * checked before a read (their size too, where the caller knows it: primc_conv2d_check_weights) */
  size_t wstride = 0;
  if (path == GP_PANELS && primc_cv_panels_check(p, k->w, SIZE_MAX / 2, &wstride) != PRIMC_OK) return PRIMC_ERR_WEIGHTS;
  for (int64_t n = 0; n < p->n; n++)
    for (int64_t g = 0; g < p->groups; g++) {
      const float *xg = k->x + (n * p->c + g * cg) * p->h * p->w, *wg = path == GP_PANELS ? NULL : w + g * og * kk;
      int64_t yoff = (n * p->o + g * og) * P;
      epi_ctx c = cv_epi_of(e, g * og, y + yoff, e->res ? e->res + yoff : NULL);
      primc_gemm gm = {.M = og, .N = P, .K = kk, .a = wg, .lda = kk, .a_packed_mr = p->w_packed_mr, .c = acc + yoff,
                       .ldc = P, .epi = epi, .epi_ctx = &c};
      /* the micro-kernel adds bias and residual and clamps as it stores, when the sums go to y itself */
      primc_gemm_store gs = {c.bias, c.bias_stride, c.res, e->lo, e->hi, 0, 0, NULL, 0};
      if (epi && acc == y && !e->act) gm.store = &gs, gm.epi = NULL;
      col_src s = {p, xg, oh, ow, cv_use_avx512() && (p->stride_w == 1 || p->stride_w == 2)};
      int st;
      if (path == GP_PANELS) { /* the epilogue writes y from C^T in col */
        st = lanes_conv(p, oh, ow, xg, (const char *)k->w + g * wstride, &c, col);
      } else if (path == GP_1X1) {
        gm.b = xg, gm.ldb = P;
        st = primc_sgemm_run(&gm);
      } else if (path == GP_DIRECT) { /* the epilogue writes y from the padded sums: acc is not used */
        st = direct_conv(p, oh, ow, xg, wg, &c, col);
      } else if (path == GP_WINDOWS) {
        windows_pad(p, xg, windows_floats(p, ow), col);
        gm.b = col, gm.ldb = p->stride_w, gm.trans_b = 1;
        st = primc_sgemm_run(&gm);
      } else if (path == GP_EXPLICIT) {
        primc_cv_im2col_par(p, xg, cg, oh, ow, col);
        gm.b = col, gm.ldb = P;
        st = primc_sgemm_run(&gm);
      } else {
        gm.brow = primc_cv_col_row, gm.brow_ctx = &s;
        st = primc_sgemm_run(&gm);
      }
      if (st != PRIMC_OK) return st;
    }
  return PRIMC_OK;
}

int64_t primc_cv_no_scratch(const primc_conv2d *p) { return 0; }

int primc_cv_gemm_any_fits(const primc_conv2d *p, const primc_conv2d *next) { return gemm_weights(p); }

int primc_cv_gemm_1x1_fits(const primc_conv2d *p, const primc_conv2d *next) {
  return gemm_weights(p) && cv_is_pointwise(p);
}

int primc_cv_direct_fits(const primc_conv2d *p, const primc_conv2d *next) {
  return gemm_weights(p) && primc_cv_direct_can(p);
}

int primc_cv_windows_fits(const primc_conv2d *p, const primc_conv2d *next) { return gemm_weights(p) && windows_can(p); }

int primc_cv_gemm_t_fits(const primc_conv2d *p, const primc_conv2d *next) {
  return !cv_is_depthwise(p) && p->w_packed_panels && !p->w_packed_mr && !p->w_winograd && !p->w_lanes && !p->w_bf16;
}

int64_t primc_cv_im2col_scratch(const primc_conv2d *p) {
  int64_t oh, ow;
  primc_conv2d_out_hw(p, &oh, &ow);
  return (p->c / p->groups) * p->kh * p->kw * oh * ow;
}

int64_t primc_cv_direct_scratch(const primc_conv2d *p) {
  int64_t oh, ow;
  primc_conv2d_out_hw(p, &oh, &ow);
  return direct_floats(p, oh, ow);
}

int64_t primc_cv_windows_scratch(const primc_conv2d *p) {
  int64_t oh, ow;
  primc_conv2d_out_hw(p, &oh, &ow);
  return windows_floats(p, ow);
}

int64_t primc_cv_gemm_t_scratch(const primc_conv2d *p) {
  int64_t oh, ow;
  primc_conv2d_out_hw(p, &oh, &ow);
  return lanes_floats(p, oh, ow);
}

int primc_cv_gemm_1x1_run(const cv_call *c) { return gemm_groups(c, GP_1X1); }
int primc_cv_direct_run(const cv_call *c) { return gemm_groups(c, GP_DIRECT); }
int primc_cv_windows_run(const cv_call *c) { return gemm_groups(c, GP_WINDOWS); }
int primc_cv_im2col_explicit_run(const cv_call *c) { return gemm_groups(c, GP_EXPLICIT); }
int primc_cv_im2col_implicit_run(const cv_call *c) { return gemm_groups(c, GP_IMPLICIT); }
int primc_cv_gemm_t_run(const cv_call *c) { return gemm_groups(c, GP_PANELS); }
