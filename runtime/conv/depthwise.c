/* runtime/conv/depthwise.c: the depthwise rows (groups == c == o): a plain row loop, AVX-512 row blocks, flat planes, and 16 channels in the lanes. */
#include "runtime/conv/conv.h"

#include <string.h>

#if PRIMC_X86
__attribute__((target("avx512f"))) static void axpy512(float *y, const float *x, float a, int64_t n) {
  __m512 va = _mm512_set1_ps(a);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, _mm512_fmadd_ps(va, _mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
  if (i < n) {
    __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(y + i, m, _mm512_fmadd_ps(va, _mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, y + i)));
  }
}
#endif

static void axpy_strided(float *y, const float *x, int64_t sx, float a, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] += a * x[i * sx];
}

#if PRIMC_X86
/* y[i] += a x[i sx] on ymm for sx 1 or 2 (stride 2: the even floats of two loads; the last vector stops short of
 * the row's end, so that its second load reads no float past x[2 (n - 1)]) */
__attribute__((target("avx2,fma"))) static void axpy256(float *y, const float *x, int64_t sx, float a, int64_t n) {
  __m256 va = _mm256_set1_ps(a);
  int64_t i = 0;
  if (sx == 1)
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  else
    for (; i + 9 <= n; i += 8) {
      __m256 e = primc_even8(_mm256_loadu_ps(x + 2 * i), _mm256_loadu_ps(x + 2 * i + 8));
      _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, e, _mm256_loadu_ps(y + i)));
    }
  for (; i < n; i++) y[i] += a * x[i * sx];
}
#endif

/* one output plane: for each output row, every tap adds a shifted input row */
static void dw_plane(const dw_job *j, int64_t plane) {
  const primc_conv2d *p = j->p;
  int64_t c = plane % p->c;
  const float *x = j->x + plane * p->h * p->w, *w = j->w + c * p->kh * p->kw;
  float *y = j->acc + plane * j->oh * j->ow, *out = j->y + plane * j->oh * j->ow;
  const float *res = j->e->res ? j->e->res + plane * j->oh * j->ow : NULL;
  epi_ctx e = cv_epi_of(j->e, 0, NULL, NULL);
  float b = cv_bias_at(&e, c), s = cv_scale_at(&e, c);
  for (int64_t oy = 0; oy < j->oh; oy++) {
    float *yr = y + oy * j->ow;
    for (int64_t t = 0; t < j->ow; t++) yr[t] = 0.0f;
    for (int64_t i = 0; i < p->kh; i++) {
      int64_t ih = oy * p->stride_h - p->pad_t + i * p->dil_h;
      if (ih < 0 || ih >= p->h) continue;
      for (int64_t jx = 0; jx < p->kw; jx++) {
        int64_t off = jx * p->dil_w - p->pad_l, sw = p->stride_w;
        int64_t lo = off >= 0 ? 0 : (-off + sw - 1) / sw;
        int64_t hi = off > p->w - 1 ? 0 : (p->w - 1 - off) / sw + 1;
        if (hi > j->ow) hi = j->ow;
        if (hi <= lo) continue;
        const float *xr = x + ih * p->w + off + lo * sw;
        float wv = w[i * p->kw + jx];
#if PRIMC_X86
        if (sw == 1 && j->isa == PRIMC_ISA_AVX512) {
          axpy512(yr + lo, xr, wv, hi - lo);
          continue;
        }
        if (sw <= 2 && primc_isa_covers(j->isa, PRIMC_ISA_AVX2)) {
          axpy256(yr + lo, xr, sw, wv, hi - lo);
          continue;
        }
#endif
        axpy_strided(yr + lo, xr, sw, wv, hi - lo);
      }
    }
    float *dst = out + oy * j->ow;
    cv_epi_row(j->isa, &e, dst, yr, res ? res + oy * j->ow : NULL, b, s, j->ow);
  }
}

#define DW_MAX_KW 8

/* which loaded elements of a 64-column block lie inside the input row, per tap column jx and vector c
 * (a: elements 0..15 of a load, b: 16..31 for stride 2), which outputs exist (st), and where tap jx's
 * first load starts in a source row (col): the borders run the same vector code as the interior,
 * padding read as zeros */
#if PRIMC_X86
typedef struct dw_masks {
  __mmask16 a[DW_MAX_KW][4], b[DW_MAX_KW][4], st[4];
  int64_t col[DW_MAX_KW];
} dw_masks;

/* lanes of a unit-stride load from column base of a row of width w, at most cnt of them */
static __mmask16 dw_lanes(int64_t base, int64_t cnt, int64_t w) {
  int64_t lim = cnt < w - base ? cnt : w - base;
  return (__mmask16)(primc_low_mask16(lim) & ~primc_low_mask16(-base));
}

static void dw_masks_make(const primc_conv2d *p, int64_t ox, int64_t n, dw_masks *m) {
  int64_t S = p->stride_w;
  for (int64_t jx = 0; jx < p->kw; jx++) m->col[jx] = ox * S - p->pad_l + jx * p->dil_w;
  for (int c = 0; c < 4; c++) {
    int64_t r = n - 16 * c, cnt = S == 1 ? r : 2 * r - 1; /* outputs left; elements they read */
    m->st[c] = primc_low_mask16(r);
    for (int64_t jx = 0; jx < p->kw; jx++) {
      int64_t base = m->col[jx] + 16 * c * S; /* input column of element 0 */
      m->a[jx][c] = dw_lanes(base, cnt, p->w);
      m->b[jx][c] = S == 1 ? 0 : dw_lanes(base + 16, cnt - 16, p->w);
    }
  }
}

/* Stride 2 reads every other column: each input row is first split into its even columns, then its
 * odd ones (a source row of 2 wp floats), so that tap jx, whose column 2 ox + d has the parity of d,
 * reads unit-stride from one half: one load per vector and tap instead of two loads and a permute. */
static void dw_masks_make_s2(const primc_conv2d *p, int64_t ox, int64_t n, int64_t wp, dw_masks *m) {
  int64_t we = (p->w + 1) / 2, wo = p->w / 2;
  for (int c = 0; c < 4; c++) m->st[c] = primc_low_mask16(n - 16 * c);
  for (int64_t jx = 0; jx < p->kw; jx++) {
    int64_t d = jx * p->dil_w - p->pad_l, odd = d & 1, off = (d - odd) / 2; /* column 2 (ox + off) + odd */
    m->col[jx] = ox + off + odd * wp;
    for (int c = 0; c < 4; c++) {
      m->a[jx][c] = dw_lanes(ox + off + 16 * c, n - 16 * c, odd ? wo : we);
      m->b[jx][c] = 0;
    }
  }
}

/* 16 inputs x[0], x[S], .. x[15 S] (S = 1 or 2) under masks: masked-off elements are never read */
__attribute__((target("avx512f"))) static inline __attribute__((always_inline)) __m512 dw_load(const float *x, const int S,
                                                                                               __mmask16 ma, __mmask16 mb) {
  if (S == 1) return _mm512_maskz_loadu_ps(ma, x);
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  return _mm512_permutex2var_ps(_mm512_maskz_loadu_ps(ma, x), even, _mm512_maskz_loadu_ps(mb, x + 16));
}

/* what a depthwise row block writes: the sums, or (fused) clamp(sum + bias + res) */
typedef struct dw_out {
  float *dst;
  const float *res;
  float b, lo, hi;
  int fused, act;
} dw_out;

__attribute__((target("avx512f"))) static inline __attribute__((always_inline)) void dw_store(const dw_out *o, int c,
                                                                                              __mmask16 m, __m512 v) {
  if (o->fused) {
    v = _mm512_add_ps(v, _mm512_set1_ps(o->b));
    if (o->res) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, o->res + 16 * c));
    if (o->act) v = cv_act512(o->act, v);
    v = _mm512_min_ps(_mm512_set1_ps(o->hi), _mm512_max_ps(_mm512_set1_ps(o->lo), v)); /* NaN stays */
  }
  _mm512_mask_storeu_ps(o->dst + 16 * c, m, v);
}
#endif

/* rows of zeros that taps above or below the input read instead of branching per row: only lanes whose
 * column exists are loaded, so DW_ZERO_ROW floats serve any input up to that width */
#define DW_ZERO_ROW 4096
#define DW_SPLIT_FLOATS 32768 /* stride 2: a plane split into even and odd columns, on the stack */
#if PRIMC_X86
static const float dw_zero_row[DW_ZERO_ROW] __attribute__((aligned(64)));

/* outputs [ox, ox + 16 CH) (those in m->st) of R rows from oy, R * CH <= 8 vectors side by side in
 * registers so the FMAs of a tap do not wait on each other (one vector alone is a latency-bound chain,
 * and narrow planes, 7 or 14 columns, have one vector per row) */
__attribute__((target("avx512f"))) static inline __attribute__((always_inline)) void
dw_rows512(const primc_conv2d *p, const float *x, int64_t pitch, const float *w, int64_t oy, const dw_masks *m,
           const dw_out *o, int64_t ow, const int CH, const int R, const int S) {
  __m512 a[8];
#pragma GCC unroll 8
  for (int k = 0; k < R * CH; k++) a[k] = _mm512_setzero_ps();
  for (int64_t i = 0; i < p->kh; i++) {
    const float *xr[8];
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) {
      int64_t ih = (oy + r) * p->stride_h - p->pad_t + i * p->dil_h;
      xr[r] = ih >= 0 && ih < p->h ? x + ih * pitch : dw_zero_row;
    }
    for (int64_t jx = 0; jx < p->kw; jx++) {
      __m512 wv = _mm512_set1_ps(w[i * p->kw + jx]);
      int64_t dx = m->col[jx];
#pragma GCC unroll 8
      for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int c = 0; c < CH; c++)
          a[r * CH + c] =
              _mm512_fmadd_ps(wv, dw_load(xr[r] + dx + 16 * c * S, S, m->a[jx][c], m->b[jx][c]), a[r * CH + c]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; r++) {
    dw_out q = *o;
    q.dst += r * ow;
    if (q.res) q.res += r * ow;
#pragma GCC unroll 4
    for (int c = 0; c < CH; c++) dw_store(&q, c, m->st[c], a[r * CH + c]);
  }
}

/* rows (<= 8 / CH) rows from oy, CH = the vectors n columns need */
__attribute__((target("avx512f"))) static void dw_block512(const primc_conv2d *p, const float *x, int64_t pitch,
                                                           int S, const float *w, int64_t oy, int64_t n, int rows,
                                                           const dw_masks *m, const dw_out *o, int64_t ow) {
  int k = (n > 32 ? 4 : n > 16 ? 2 : 1) * 16 + rows * 2 + (S == 2);
  switch (k) {
#define DW_CASE(CH, R)                                                                      \
  case CH * 16 + R * 2: dw_rows512(p, x, pitch, w, oy, m, o, ow, CH, R, 1); break;     \
  case CH * 16 + R * 2 + 1: dw_rows512(p, x, pitch, w, oy, m, o, ow, CH, R, 2); break;
    DW_CASE(1, 1) DW_CASE(1, 2) DW_CASE(1, 3) DW_CASE(1, 4) DW_CASE(1, 5) DW_CASE(1, 6) DW_CASE(1, 7) DW_CASE(1, 8)
    DW_CASE(2, 1) DW_CASE(2, 2) DW_CASE(2, 3) DW_CASE(2, 4)
    DW_CASE(4, 1) DW_CASE(4, 2)
#undef DW_CASE
    default: break;
  }
}

/* stride 1 or 2, kw <= DW_MAX_KW: 64-column blocks, each with its masks made once for all rows; the
 * epilogue is applied in registers unless the sums must go to a separate buffer first */
__attribute__((target("avx512f"))) static void dw_plane512(const dw_job *j, int64_t plane, const dw_masks *ms,
                                                           float *split, int64_t wp) {
  const primc_conv2d *p = j->p;
  int64_t c = plane % p->c, ow = j->ow, pitch = p->w;
  const float *x = j->x + plane * p->h * p->w, *w = j->w + c * p->kh * p->kw;
  int S = (int)p->stride_w;
  if (split) { /* stride 2: even columns, then odd ones, per row */
    for (int64_t r = 0; r < p->h; r++) {
      primc_cv_copy_stride2_512(split + r * 2 * wp, x + r * p->w, (p->w + 1) / 2);
      primc_cv_copy_stride2_512(split + r * 2 * wp + wp, x + r * p->w + 1, p->w / 2);
    }
    x = split, pitch = 2 * wp, S = 1;
  }
  float *acc = j->acc + plane * j->oh * ow, *out = j->y + plane * j->oh * ow;
  const float *res = j->e->res ? j->e->res + plane * j->oh * ow : NULL;
  float b = j->e->bias ? j->e->bias[c * j->e->bias_stride] : 0.0f;
  int fused = acc == out;
  for (int64_t ox = 0; ox < ow; ox += 64) {
    int64_t n = ow - ox < 64 ? ow - ox : 64;
    const dw_masks *m = &ms[ox / 64];
    int64_t rmax = n > 32 ? 2 : n > 16 ? 4 : 8;
    for (int64_t oy = 0; oy < j->oh; oy += rmax) {
      int rows = (int)(j->oh - oy < rmax ? j->oh - oy : rmax);
      dw_out o = {acc + oy * ow + ox, res ? res + oy * ow + ox : NULL, b, j->e->lo, j->e->hi, fused, j->e->act};
      dw_block512(p, x, pitch, S, w, oy, n, rows, m, &o, ow);
    }
  }
  epi_ctx e = {.lo = j->e->lo, .hi = j->e->hi, .act = j->e->act};
  for (int64_t oy = 0; !fused && oy < j->oh; oy++)
    primc_cv_epi_row512(&e, out + oy * ow, acc + oy * ow, res ? res + oy * ow : NULL, b, 1.0f, ow);
}
#endif

/* Stride 1 with ow == w: output element p = oy*w + ox reads input p + (i dil_h - pad_t) w + (j dil_w - pad_l),
 * so a plane is one flat row of vectors, none wasted at row ends (a 7x7 plane is 4 vectors, not 7 rows of
 * 16 lanes each), and blocks of vectors give independent FMA chains. A lane is read when its input row and
 * column exist: those masks depend on the vector and tap only, so they are made once per chunk of vectors
 * and serve every plane of the range. */
#define DW_FLAT_MASKS 2048
#define DW_FLAT_TAPS 64

#if PRIMC_X86
typedef struct dw_flat {
  const dw_job *j;
  int64_t off[DW_FLAT_TAPS];     /* input offset of each tap */
  __mmask16 m[DW_FLAT_MASKS];    /* [vector - v0][tap] */
  int64_t v0, nv, taps, nvalid; /* nvalid: output elements of a plane */
} dw_flat;
#endif

static int dw_flat_ok(const primc_conv2d *p, int64_t ow) {
  int64_t lim = 1 << 24; /* the masks compute rows and columns in 32-bit lanes */
  return p->stride_h == 1 && p->stride_w == 1 && ow == p->w && p->kh * p->kw <= DW_FLAT_TAPS && p->h < lim &&
         p->w < lim && p->pad_t < lim && p->pad_l < lim && p->kh * p->dil_h < lim && p->kw * p->dil_w < lim;
}

#if PRIMC_X86
/* bit l of row[i] / col[jx]: lane l of vector v reads an existing input row / column at that tap
 * (lanes' output rows and columns in vectors, one division per vector: this runs for every vector of
 * a plane once per conv, as much work as the conv itself when it has few channels) */
__attribute__((target("avx512f"))) static void dw_flat_masks(const primc_conv2d *p, dw_flat *f) {
  const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  const __m512i W = _mm512_set1_epi32((int)p->w), one = _mm512_set1_epi32(1);
  for (int64_t v = 0; v < f->nv; v++) {
    int64_t q = (f->v0 + v) * 16;
    __m512i ox = _mm512_add_epi32(_mm512_set1_epi32((int)(q % p->w)), lane), oy = _mm512_set1_epi32((int)(q / p->w));
    for (__mmask16 wrap = _mm512_cmpge_epi32_mask(ox, W); wrap; wrap = _mm512_cmpge_epi32_mask(ox, W)) {
      ox = _mm512_mask_sub_epi32(ox, wrap, ox, W);
      oy = _mm512_mask_add_epi32(oy, wrap, oy, one);
    }
    __mmask16 row[DW_FLAT_TAPS], col[DW_FLAT_TAPS];
    for (int64_t i = 0; i < p->kh; i++) {
      int d = (int)(i * p->dil_h - p->pad_t); /* rows oy + d in [0, h) */
      row[i] = _mm512_cmpge_epi32_mask(oy, _mm512_set1_epi32(-d)) & _mm512_cmplt_epi32_mask(oy, _mm512_set1_epi32((int)p->h - d));
    }
    for (int64_t jx = 0; jx < p->kw; jx++) {
      int d = (int)(jx * p->dil_w - p->pad_l);
      col[jx] = _mm512_cmpge_epi32_mask(ox, _mm512_set1_epi32(-d)) & _mm512_cmplt_epi32_mask(ox, _mm512_set1_epi32((int)p->w - d));
    }
    for (int64_t i = 0; i < p->kh; i++)
      for (int64_t jx = 0; jx < p->kw; jx++) f->m[v * f->taps + i * p->kw + jx] = row[i] & col[jx];
  }
}

/* NV vectors from v (relative to the chunk) of one plane, NV accumulators in registers */
__attribute__((target("avx512f"))) static inline __attribute__((always_inline)) void
dw_flat_block(const dw_flat *f, const float *x, const float *w, int64_t v, const dw_out *o, const int NV) {
  __m512 a[8];
#pragma GCC unroll 8
  for (int b = 0; b < NV; b++) a[b] = _mm512_setzero_ps();
  const float *xv = x + (f->v0 + v) * 16;
  const __mmask16 *m = f->m + v * f->taps;
  for (int64_t t = 0; t < f->taps; t++) {
    __m512 wv = _mm512_set1_ps(w[t]);
    const float *src = xv + f->off[t];
#pragma GCC unroll 8
    for (int b = 0; b < NV; b++) a[b] = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(m[b * f->taps + t], src + 16 * b), a[b]);
  }
#pragma GCC unroll 8
  for (int b = 0; b < NV; b++) dw_store(o, b, primc_low_mask16(f->nvalid - (f->v0 + v + b) * 16), a[b]);
}

__attribute__((target("avx512f"))) static void dw_flat_plane(const dw_flat *f, int64_t plane) {
  const dw_job *j = f->j;
  const primc_conv2d *p = j->p;
  int64_t c = plane % p->c, np = f->nvalid;
  const float *x = j->x + plane * p->h * p->w, *w = j->w + c * f->taps;
  float *acc = j->acc + plane * np, *out = j->y + plane * np;
  const float *res = j->e->res ? j->e->res + plane * np : NULL;
  float b = j->e->bias ? j->e->bias[c * j->e->bias_stride] : 0.0f;
  int fused = acc == out;
  for (int64_t v = 0; v < f->nv;) {
    int64_t e0 = (f->v0 + v) * 16;
    dw_out o = {acc + e0, res ? res + e0 : NULL, b, j->e->lo, j->e->hi, fused, j->e->act};
    int64_t left = f->nv - v;
    if (left >= 8) dw_flat_block(f, x, w, v, &o, 8), v += 8;
    else if (left >= 4) dw_flat_block(f, x, w, v, &o, 4), v += 4;
    else if (left >= 2) dw_flat_block(f, x, w, v, &o, 2), v += 2;
    else dw_flat_block(f, x, w, v, &o, 1), v += 1;
  }
}

__attribute__((target("avx512f"))) static void dw_flat_range(const dw_job *j, int64_t b, int64_t e) {
  const primc_conv2d *p = j->p;
  dw_flat f;
  f.j = j;
  f.taps = p->kh * p->kw;
  f.nvalid = j->oh * j->ow;
  for (int64_t i = 0; i < p->kh; i++)
    for (int64_t jx = 0; jx < p->kw; jx++)
      f.off[i * p->kw + jx] = (i * p->dil_h - p->pad_t) * p->w + jx * p->dil_w - p->pad_l;
  int64_t nvec = (f.nvalid + 15) / 16, chunk = DW_FLAT_MASKS / f.taps;
  for (f.v0 = 0; f.v0 < nvec; f.v0 += chunk) {
    f.nv = nvec - f.v0 < chunk ? nvec - f.v0 : chunk;
    dw_flat_masks(p, &f);
    for (int64_t i = b; i < e; i++) dw_flat_plane(&f, i);
  }
  if (j->acc == j->y) return;
  epi_ctx ec = {.lo = j->e->lo, .hi = j->e->hi, .act = j->e->act};
  for (int64_t i = b; i < e; i++) {
    int64_t c = i % p->c, off = i * f.nvalid;
    float bias = j->e->bias ? j->e->bias[c * j->e->bias_stride] : 0.0f;
    primc_cv_epi_row512(&ec, j->y + off, j->acc + off, j->e->res ? j->e->res + off : NULL, bias, 1.0f, f.nvalid);
  }
}
#endif

/* Depthwise convs with 16 channels in the vector lanes, for planes whose rows fill vectors poorly: a
 * 7-wide output row fills 7 of 16 lanes, and at stride 2 each of its taps costs two loads and a
 * permute. A band of 16 channels' input rows is transposed into a zero-bordered [row][col][16] tile;
 * each output pixel is then one full-width FMA per tap, with no masks and at any stride; the
 * [pixel][16] sums are transposed back. The transposes are 16x16 in registers. */
/* the band: the most output rows, up to oh, whose tile rows ((band - 1) stride_h + reach of them) and
 * sums fit their buffers; 0 when not even one row's do */
dwl_geo primc_cv_dwl_geometry(const primc_conv2d *p, int64_t oh, int64_t ow, int lanes) {
  dwl_geo g = {(ow - 1) * p->stride_w + (p->kw - 1) * p->dil_w + 1, 0, p->kh * p->kw};
  int64_t reach = (p->kh - 1) * p->dil_h + 1, tile_rows = DWL_TILE_FLOATS / (g.pw * lanes);
  if (tile_rows < reach) return g;
  int64_t band = (tile_rows - reach) / p->stride_h + 1, out_rows = DWL_OUT_FLOATS / (ow * lanes);
  g.band = band < out_rows ? band : out_rows;
  if (g.band > oh) g.band = oh;
  return g;
}

#if PRIMC_X86
__attribute__((target("avx512f"))) static void dwl_plain_row(const dwl_src *s, int64_t ih, int64_t n, float *dst) {
  for (int64_t q = 0; q < n; q += 16)
    primc_tr16_part(s->x + ih * s->w + q, s->hw, s->nch, (int)(n - q < 16 ? n - q : 16), dst + q * 16, 16);
}

/* tile rows [r0, rows) of the band from input row (oy0 stride_h - pad_t) on: zeros outside the input */
__attribute__((target("avx512f"))) static void dwl_fill(const primc_conv2d *p, const dwl_src *src, int64_t oy0,
                                                        int64_t r0, int64_t rows, int64_t pw, float *tile) {
  int64_t in_end = p->pad_l + p->w < pw ? p->pad_l + p->w : pw;
  for (int64_t r = r0; r < rows; r++) {
    int64_t ih = oy0 * p->stride_h - p->pad_t + r;
    float *t = tile + r * pw * 16;
    if (ih < 0 || ih >= p->h || in_end <= p->pad_l) {
      memset(t, 0, (size_t)(pw * 16) * sizeof(float));
      continue;
    }
    memset(t, 0, (size_t)(p->pad_l * 16) * sizeof(float));
    if (in_end < pw) memset(t + in_end * 16, 0, (size_t)((pw - in_end) * 16) * sizeof(float));
    src->make(src, ih, in_end - p->pad_l, t + p->pad_l * 16);
  }
}

typedef struct dwl_ctx {
  const primc_conv2d *p;
  const float *wt;   /* [tap][16] */
  __m512 b, lo, hi;  /* the epilogue in lanes */
  int64_t pw, ow;
  int lanes_epi, act;
} dwl_ctx;

/* NB sums of a[] to out[pixel][16], through the epilogue when it runs in the lanes */
__attribute__((target("avx512f"))) static inline __attribute__((always_inline)) void
dwl_out(const dwl_ctx *d, const __m512 *a, float *out, const int NB) {
#pragma GCC unroll 8
  for (int b = 0; b < NB; b++) {
    __m512 v = a[b];
    if (d->lanes_epi) {
      v = _mm512_add_ps(v, d->b);
      if (d->act) v = cv_act512(d->act, v);
      v = _mm512_min_ps(d->hi, _mm512_max_ps(d->lo, v));
    }
    _mm512_storeu_ps(out + b * 16, v);
  }
}

/* NB output pixels from (oy, ox) of the band (oy relative to its first row) into out[pixel][16] */
__attribute__((target("avx512f"))) static inline __attribute__((always_inline)) void
dwl_pixels(const dwl_ctx *d, const float *tile, int64_t oy, int64_t ox, float *out, const int NB) {
  const primc_conv2d *p = d->p;
  __m512 a[8];
#pragma GCC unroll 8
  for (int b = 0; b < NB; b++) a[b] = _mm512_setzero_ps();
  for (int64_t i = 0; i < p->kh; i++) {
    const float *row = tile + ((oy * p->stride_h + i * p->dil_h) * d->pw + ox * p->stride_w) * 16;
    for (int64_t jx = 0; jx < p->kw; jx++) {
      __m512 wv = _mm512_loadu_ps(d->wt + (i * p->kw + jx) * 16);
      const float *src = row + jx * p->dil_w * 16;
#pragma GCC unroll 8
      for (int b = 0; b < NB; b++) a[b] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(src + b * p->stride_w * 16), a[b]);
    }
  }
  dwl_out(d, a, out, NB);
}
#endif

/* the kernels dwl_band_cols runs: 3 or 5 taps across, dilation 1 across, stride 1 or 2 across */
int primc_cv_dwl_cols_ok(const primc_conv2d *p) {
  return (p->kw == 3 || p->kw == 5) && p->dil_w == 1 && (p->stride_w == 1 || p->stride_w == 2);
}

#if PRIMC_X86
/* Stride S across, dilation 1, KW taps across: each input column of a tile row is loaded once for the
 * outputs that read it (10 loads for 8 stride-1 outputs of a 3x3 row, where dwl_pixels loads 24).
 * With HOIST (3x3, the same stride down) all 9 weights stay in registers for the band, else a row's
 * KW (up to 5) for the row. Each output still sums its taps row by row, left to right: the same
 * result (bench/conv_rows.md). */
__attribute__((target("avx512f"))) static inline __attribute__((always_inline)) void
dwl_pixels_cols(const dwl_ctx *d, const __m512 *w9, const float *tile, int64_t oy, int64_t ox, float *out,
                const int NB, const int S, const int KW, const int HOIST) {
  const primc_conv2d *p = d->p;
  __m512 a[8], wr[5];
#pragma GCC unroll 8
  for (int b = 0; b < NB; b++) a[b] = _mm512_setzero_ps();
  const int64_t kh = HOIST ? 3 : p->kh;
#pragma GCC unroll 3
  for (int64_t i = 0; i < kh; i++) {
    int64_t ty = HOIST ? oy * S + i : oy * p->stride_h + i * p->dil_h;
    const float *row = tile + (ty * d->pw + ox * S) * 16;
    const __m512 *w = HOIST ? w9 + i * 3 : wr;
#pragma GCC unroll 5
    for (int jx = 0; jx < KW && !HOIST; jx++) wr[jx] = _mm512_loadu_ps(d->wt + (i * KW + jx) * 16);
#pragma GCC unroll 19
    for (int c = 0; c < (NB - 1) * S + KW; c++) {
      __m512 v = _mm512_loadu_ps(row + c * 16);
#pragma GCC unroll 5
      for (int jx = 0; jx < KW; jx++) {
        int b = c - jx;
        if (b >= 0 && b % S == 0 && b / S < NB) a[b / S] = _mm512_fmadd_ps(w[jx], v, a[b / S]);
      }
    }
  }
  dwl_out(d, a, out, NB);
}

/* NB outputs from (oy, ox): through dwl_pixels_cols for a KW-wide kernel, dwl_pixels for KW = 0 (any) */
__attribute__((target("avx512f"))) static inline __attribute__((always_inline)) void
dwl_block(const dwl_ctx *d, const __m512 *w9, const float *tile, int64_t oy, int64_t ox, float *out, const int NB,
          const int S, const int KW, const int HOIST) {
  if (KW) dwl_pixels_cols(d, w9, tile, oy, ox, out, NB, S, KW, HOIST);
  else dwl_pixels(d, tile, oy, ox, out, NB);
}

/* the band's output rows in blocks of 8, 4 and the rest (1-3 pixels: one block, not a chain of dependent
 * FMAs per pixel) */
__attribute__((target("avx512f"))) static inline __attribute__((always_inline)) void
dwl_band_of(const dwl_ctx *d, const float *tile, int64_t rows, float *out, const int S, const int KW,
            const int HOIST) {
  __m512 w9[9];
#pragma GCC unroll 9
  for (int t = 0; t < 9 && HOIST; t++) w9[t] = _mm512_loadu_ps(d->wt + t * 16);
  for (int64_t oy = 0; oy < rows; oy++) {
    float *o = out + oy * d->ow * 16;
    int64_t ox = 0;
    for (; ox + 8 <= d->ow; ox += 8) dwl_block(d, w9, tile, oy, ox, o + ox * 16, 8, S, KW, HOIST);
    if (d->ow - ox >= 4) dwl_block(d, w9, tile, oy, ox, o + ox * 16, 4, S, KW, HOIST), ox += 4;
    if (d->ow - ox == 3) dwl_block(d, w9, tile, oy, ox, o + ox * 16, 3, S, KW, HOIST);
    else if (d->ow - ox == 2) dwl_block(d, w9, tile, oy, ox, o + ox * 16, 2, S, KW, HOIST);
    else if (d->ow - ox == 1) dwl_block(d, w9, tile, oy, ox, o + ox * 16, 1, S, KW, HOIST);
  }
}

__attribute__((target("avx512f"))) static void dwl_band(const dwl_ctx *d, const float *tile, int64_t rows, float *out) {
  const primc_conv2d *p = d->p;
  int s = (int)p->stride_w, k3 = p->kw == 3, hoist = k3 && p->kh == 3 && p->dil_h == 1 && p->stride_h == s;
  if (!primc_cv_dwl_cols_ok(p)) dwl_band_of(d, tile, rows, out, 0, 0, 0);
  else if (hoist) s == 1 ? dwl_band_of(d, tile, rows, out, 1, 3, 1) : dwl_band_of(d, tile, rows, out, 2, 3, 1);
  else if (k3) s == 1 ? dwl_band_of(d, tile, rows, out, 1, 3, 0) : dwl_band_of(d, tile, rows, out, 2, 3, 0);
  else s == 1 ? dwl_band_of(d, tile, rows, out, 1, 5, 0) : dwl_band_of(d, tile, rows, out, 2, 5, 0);
}

__attribute__((target("avx512f"))) void primc_cv_lanes_weights(const float *w, int64_t k, int nch, float *wt) {
  if (nch < 16) memset(wt, 0, (size_t)(k * 16) * sizeof(float));
  for (int64_t t0 = 0; t0 < k; t0 += 16) primc_tr16_part(w + t0, k, nch, (int)(k - t0 < 16 ? k - t0 : 16), wt + t0 * 16, 16);
}

/* the depthwise conv of 16 channels [c0, c0 + nch) of image n, output rows [oy_b, oy_e), their input
 * rows made by src */
__attribute__((target("avx512f"))) void primc_cv_dwl_item(const dw_job *j, int64_t n, int64_t c0, int nch,
                                                        const dwl_src *src, int64_t oy_b, int64_t oy_e) {
  const primc_conv2d *p = j->p;
  const primc_conv_epi *ep = j->e;
  dwl_geo g = primc_cv_dwl_geometry(p, j->oh, j->ow, 16);
  int64_t P = j->oh * j->ow, reach = (p->kh - 1) * p->dil_h + 1;
  float tile[DWL_TILE_FLOATS] __attribute__((aligned(64)));
  float out[DWL_OUT_FLOATS] __attribute__((aligned(64)));
  float wt[DWL_MAX_TAPS * 16] __attribute__((aligned(64)));
  float bias[16] = {0};
  for (int l = 0; l < nch && ep->bias; l++) bias[l] = ep->bias[(c0 + l) * ep->bias_stride];
  primc_cv_lanes_weights(j->w + c0 * g.taps, g.taps, nch, wt);
  /* the epilogue runs in the lanes unless it needs the residual, which is laid out per plane */
  int lanes_epi = j->acc == j->y && !ep->res;
  dwl_ctx d = {p, wt, _mm512_loadu_ps(bias), _mm512_set1_ps(ep->lo), _mm512_set1_ps(ep->hi), g.pw, j->ow,
               lanes_epi, ep->act};
  float *acc = j->acc + (n * p->c + c0) * P;
  int64_t have0 = 0, have = 0; /* the tile holds input rows [have0, have0 + have) */
  for (int64_t oy0 = oy_b; oy0 < oy_e; oy0 += g.band) {
    int64_t rows = oy_e - oy0 < g.band ? oy_e - oy0 : g.band, need = (rows - 1) * p->stride_h + reach;
    int64_t ih0 = oy0 * p->stride_h - p->pad_t, keep = 0;
    /* rows the last band read too (a 3x3/2 band's first row is the last one's last) move up, not remade */
    if (have > 0 && ih0 >= have0 && ih0 < have0 + have) {
      keep = have0 + have - ih0 < need ? have0 + have - ih0 : need;
      memmove(tile, tile + (ih0 - have0) * g.pw * 16, (size_t)(keep * g.pw * 16) * sizeof(float));
    }
    if (j->pf_out) primc_cv_prefetch_out(&(epi_ctx){.y = acc}, P, oy0 * j->ow, rows * j->ow, nch);
    dwl_fill(p, src, oy0, keep, need, g.pw, tile);
    have0 = ih0, have = need;
    dwl_band(&d, tile, rows, out);
    for (int64_t q = 0; q < rows * j->ow; q += 16) {
      int px = (int)(rows * j->ow - q < 16 ? rows * j->ow - q : 16);
      primc_tr16_part(out + q * 16, 16, px, nch, acc + oy0 * j->ow + q, P);
    }
  }
  if (lanes_epi) return;
  epi_ctx ec = {.lo = ep->lo, .hi = ep->hi, .act = ep->act};
  for (int l = 0; l < nch; l++) {
    int64_t off = (n * p->c + c0 + l) * P + oy_b * j->ow;
    primc_cv_epi_row512(&ec, j->y + off, j->acc + off, ep->res ? ep->res + off : NULL, bias[l], 1.0f,
                        (oy_e - oy_b) * j->ow);
  }
}
#endif

#if PRIMC_X86
/* dwl_range's items: (image, block of 16 channels) */
static int64_t dwl_items(const primc_conv2d *p) { return p->n * ((p->c + 15) / 16); }

/* items (image, block of 16 channels) [b, e) of the dw_job in ctx */
__attribute__((target("avx512f"))) static void dwl_range(void *ctx, int64_t b, int64_t e) {
  const dw_job *j = ctx;
  const primc_conv2d *p = j->p;
  int64_t nblk = (p->c + 15) / 16;
  for (int64_t it = b; it < e; it++) {
    int64_t n = it / nblk, c0 = it % nblk * 16;
    dwl_src src = {.make = dwl_plain_row, .x = j->x + (n * p->c + c0) * p->h * p->w, .hw = p->h * p->w, .w = p->w,
                   .nch = (int)(p->c - c0 < 16 ? p->c - c0 : 16)};
    primc_cv_dwl_item(j, n, c0, src.nch, &src, 0, j->oh);
  }
}
#endif

/* ---------------------------------------------------------------- the rows */

static dw_job dw_job_of(const cv_call *c) {
  return (dw_job){c->p, c->x, c->w, c->e, c->acc, c->y, c->oh, c->ow, primc_sgemm_isa(), cv_pf_out()};
}


/* 16 channels in the lanes: a band's tile holds every tap, and the sums fit their buffer */
int primc_cv_dwl_fits(const primc_conv2d *p, const primc_conv2d *next) {
  int64_t oh, ow;
  return cv_dw_plain(p) && primc_conv2d_out_hw(p, &oh, &ow) && p->kh * p->kw <= DWL_MAX_TAPS && p->stride_h <= 4 &&
         primc_cv_dwl_geometry(p, oh, ow, 16).band > 0;
}

int primc_cv_dwl_run(const cv_call *c) {
#if PRIMC_X86
  dw_job j = dw_job_of(c);
  primc_parallel_for(dwl_items(c->p), dwl_range, &j);
  return PRIMC_OK;
#else
  return PRIMC_ERR_ARG; /* an AVX-512 row: never planned here */
#endif
}

int primc_cv_dw_flat_fits(const primc_conv2d *p, const primc_conv2d *next) {
  int64_t oh, ow;
  return cv_dw_plain(p) && primc_conv2d_out_hw(p, &oh, &ow) && dw_flat_ok(p, ow);
}

#if PRIMC_X86
__attribute__((target("avx512f"))) static void dw_flat_items(void *ctx, int64_t b, int64_t e) { dw_flat_range(ctx, b, e); }
#endif

int primc_cv_dw_flat_run(const cv_call *c) {
#if PRIMC_X86
  dw_job j = dw_job_of(c);
  primc_parallel_for(c->p->n * c->p->c, dw_flat_items, &j);
  return PRIMC_OK;
#else
  return PRIMC_ERR_ARG;
#endif
}

/* stride 1 or 2 across, kernels up to DW_MAX_KW wide, rows within the zero row */
int primc_cv_dw_rows_fits(const primc_conv2d *p, const primc_conv2d *next) {
  int64_t oh, ow;
  return cv_dw_plain(p) && primc_conv2d_out_hw(p, &oh, &ow) && (p->stride_w == 1 || p->stride_w == 2) &&
         p->kw <= DW_MAX_KW && p->w <= DW_ZERO_ROW && ow <= DW_ZERO_ROW;
}

#if PRIMC_X86
__attribute__((target("avx512f"))) static void dw_rows_items(void *ctx, int64_t b, int64_t e) {
  const dw_job *j = ctx;
  const primc_conv2d *p = j->p;
  /* the masks of each 64-column block are the same for every plane: made once here (a 14x14 plane
   * has only 7 rows of work to spread their cost over) */
  dw_masks ms[DW_ZERO_ROW / 64];
  int64_t wp = ((p->w + 1) / 2 + 15) / 16 * 16;
  float split[DW_SPLIT_FLOATS] __attribute__((aligned(64)));
  /* splitting costs a pass over the plane (whose stores the loads then wait on): it pays from 5 taps a
   * row, not with 3 */
  int s2 = p->stride_w == 2 && p->kw >= 5 && p->h * 2 * wp <= DW_SPLIT_FLOATS;
  for (int64_t ox = 0; ox < j->ow; ox += 64) {
    int64_t n = j->ow - ox < 64 ? j->ow - ox : 64;
    if (s2) dw_masks_make_s2(p, ox, n, wp, &ms[ox / 64]);
    else dw_masks_make(p, ox, n, &ms[ox / 64]);
  }
  for (int64_t i = b; i < e; i++) dw_plane512(j, i, ms, s2 ? split : NULL, wp);
}
#endif

int primc_cv_dw_rows_run(const cv_call *c) {
#if PRIMC_X86
  dw_job j = dw_job_of(c);
  primc_parallel_for(c->p->n * c->p->c, dw_rows_items, &j);
  return PRIMC_OK;
#else
  return PRIMC_ERR_ARG;
#endif
}

int primc_cv_dw_plane_fits(const primc_conv2d *p, const primc_conv2d *next) { return cv_dw_plain(p); }

static void dw_plane_items(void *ctx, int64_t b, int64_t e) {
  for (int64_t i = b; i < e; i++) dw_plane(ctx, i);
}

int primc_cv_dw_plane_run(const cv_call *c) {
  dw_job j = dw_job_of(c);
  primc_parallel_for(c->p->n * c->p->c, dw_plane_items, &j);
  return PRIMC_OK;
}
