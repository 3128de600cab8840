/* runtime/kernels.c: the kernels generated code calls instead of loop nests: GEMM, conv, gather/scatter, cumsum, sort, copies. */
#include "runtime/primc_rt.h"

#include <cblas.h>
#include <immintrin.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---------------------------------------------------------------- element access by dtype */

/* every element seen as a double (floats) or an int64 (ints, bool); kernels that
 * are not on the fast paths go through these */
static uint16_t f32_to_f16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  uint32_t sign = (u >> 16) & 0x8000, a = u & 0x7fffffff;
  if (a > 0x7f800000) return (uint16_t)(sign | 0x7e00);
  if (a >= 0x477ff000) return (uint16_t)(sign | 0x7c00); /* overflow after rounding */
  if (a < 0x38800000) {                                  /* subnormal f16 */
    float x;
    memcpy(&x, &a, 4);
    return (uint16_t)(sign | (uint16_t)lrintf(x * 16777216.0f));
  }
  uint32_t r = a + 0xfff + ((a >> 13) & 1);
  return (uint16_t)(sign | ((r >> 13) - (112u << 10)));
}

static float f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff, u;
  if (e == 0) {
    float x = (float)m / 16777216.0f;
    return sign ? -x : x;
  }
  u = e == 31 ? sign | 0x7f800000 | (m << 13) : sign | ((e + 112) << 23) | (m << 13);
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* 8-bit floats (ONNX FLOAT8*, dtypes PRIMC_F8E4M3FN..PRIMC_F8E5M2FNUZ in order): mantissa bits, bias, and
 * the NaN/inf scheme: e5m2 has IEEE inf and NaNs, e4m3fn no inf and NaN S.1111.111, fnuz NaN 0x80 and no -0 */
typedef struct f8_fmt {
  int mbits, bias, fn, fnuz, finite; /* finite: f4e2m1, no inf or NaN, saturating, sign bit 0x8 */
  uint32_t maxcode; /* largest finite magnitude */
} f8_fmt;

static const f8_fmt *f8_of(int dt) {
  static const f8_fmt f[4] = {{3, 7, 1, 0, 0, 0x7e}, {3, 8, 0, 1, 0, 0x7f}, {2, 15, 0, 0, 0, 0x7b}, {2, 16, 0, 1, 0, 0x7f}};
  static const f8_fmt f4 = {1, 1, 0, 0, 1, 0x7};
  if (dt == PRIMC_F4E2M1) return &f4;
  return dt >= PRIMC_F8E4M3FN && dt <= PRIMC_F8E5M2FNUZ ? &f[dt - PRIMC_F8E4M3FN] : NULL;
}

static float f8_to_f32(const f8_fmt *f, uint8_t b) {
  int sb = f->finite ? 0x8 : 0x80, mag = b & (sb - 1), e = mag >> f->mbits, m = mag & ((1 << f->mbits) - 1);
  float s = (b & sb) ? -1.0f : 1.0f;
  if (f->finite) {
  } else if (f->fnuz ? b == 0x80 : f->fn ? mag == 0x7f : e == (0x7f >> f->mbits)) {
    return f->fn || f->fnuz || m ? NAN : s * INFINITY;
  }
  return s * ldexpf((float)(e ? m + (1 << f->mbits) : m), (e ? e : 1) - f->bias - f->mbits);
}

/* round to nearest even, no saturation: overflow gives inf (e5m2) or NaN */
static uint8_t f32_to_f8(const f8_fmt *f, float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  uint32_t sb = f->finite ? 0x8 : 0x80, sign = u >> 31 ? sb : 0, a = u & 0x7fffffff, q;
  uint32_t nan = f->fnuz ? 0x80 : f->finite ? sign ^ sb : sign | (f->fn ? 0x7f : 0x7e);
  if (a > 0x7f800000) return (uint8_t)nan;
  int emin = 1 - f->bias, shift = 23 - f->mbits;
  if (a < (uint32_t)(emin + 127) << 23) { /* subnormal steps of 2^(emin - mbits); the scaling is exact */
    q = (uint32_t)lrintf(ldexpf(fabsf(x), f->mbits - emin));
  } else {
    q = ((a + (1u << (shift - 1)) - 1 + ((a >> shift) & 1)) >> shift) - ((uint32_t)(127 - f->bias) << f->mbits);
  }
  if (q > f->maxcode) return (uint8_t)(f->finite ? sign | f->maxcode : f->fn || f->fnuz ? nan : sign | 0x7c);
  return (uint8_t)(q == 0 && f->fnuz ? 0 : sign | q);
}

/* f8e8m0: 2^(b-127), 0xff NaN; stores keep the f32 exponent field (the compiler's ir/types.c rule) */
static float e8m0_to_f32(uint8_t b) {
  uint32_t u = b ? (uint32_t)b << 23 : 0x400000u;
  float f;
  memcpy(&f, &u, 4);
  return b == 0xff ? NAN : f;
}

static uint8_t f32_to_e8m0(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  return (uint8_t)(u >> 23);
}

static double get_f(const void *p, int64_t i, int dt) {
  uint32_t u;
  float f;
  switch (dt) { /* storage formats */
  case PRIMC_F16: return f16_to_f32(((const uint16_t *)p)[i]);
  case PRIMC_BF16: u = (uint32_t)((const uint16_t *)p)[i] << 16; memcpy(&f, &u, 4); return f;
  case PRIMC_F32: return ((const float *)p)[i];
  case PRIMC_F64: return ((const double *)p)[i];
  case PRIMC_F8E8M0: return e8m0_to_f32(((const uint8_t *)p)[i]);
  default: return f8_of(dt) ? f8_to_f32(f8_of(dt), ((const uint8_t *)p)[i]) : 0;
  }
}

static void set_f(void *p, int64_t i, int dt, double v) {
  float f = (float)v;
  uint32_t u;
  switch (dt) {
  case PRIMC_F16: ((uint16_t *)p)[i] = f32_to_f16(f); break;
  case PRIMC_BF16:
    memcpy(&u, &f, 4);
    ((uint16_t *)p)[i] = isnan(f) ? (uint16_t)((u >> 16) | 0x40) : (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
    break;
  case PRIMC_F32: ((float *)p)[i] = f; break;
  case PRIMC_F64: ((double *)p)[i] = v; break;
  case PRIMC_F8E8M0: ((uint8_t *)p)[i] = f32_to_e8m0(f); break;
  default:
    if (f8_of(dt)) ((uint8_t *)p)[i] = f32_to_f8(f8_of(dt), f);
    break;
  }
}

static int64_t get_i(const void *p, int64_t i, int dt) {
  switch (dt) {
  case PRIMC_I8: return ((const int8_t *)p)[i];
  case PRIMC_I16: return ((const int16_t *)p)[i];
  case PRIMC_I32: return ((const int32_t *)p)[i];
  case PRIMC_I64: return ((const int64_t *)p)[i];
  case PRIMC_U8: case PRIMC_BOOL: return ((const uint8_t *)p)[i];
  case PRIMC_U16: return ((const uint16_t *)p)[i];
  case PRIMC_U32: return ((const uint32_t *)p)[i];
  case PRIMC_U64: return (int64_t)((const uint64_t *)p)[i]; /* the bits; see ordered() */
  case PRIMC_I4: case PRIMC_I2: return ((const int8_t *)p)[i];
  case PRIMC_U4: case PRIMC_U2: return ((const uint8_t *)p)[i];
  default: return 0;
  }
}

static void set_i(void *p, int64_t i, int dt, int64_t v) {
  switch (dt) {
  case PRIMC_I8: ((int8_t *)p)[i] = (int8_t)v; break;
  case PRIMC_I16: ((int16_t *)p)[i] = (int16_t)v; break;
  case PRIMC_I32: ((int32_t *)p)[i] = (int32_t)v; break;
  case PRIMC_I64: ((int64_t *)p)[i] = v; break;
  case PRIMC_U8: ((uint8_t *)p)[i] = (uint8_t)v; break;
  case PRIMC_U16: ((uint16_t *)p)[i] = (uint16_t)v; break;
  case PRIMC_U32: ((uint32_t *)p)[i] = (uint32_t)v; break;
  case PRIMC_U64: ((uint64_t *)p)[i] = (uint64_t)v; break;
  case PRIMC_I4: ((int8_t *)p)[i] = (int8_t)(((v & 0xf) ^ 8) - 8); break; /* wrap to the width */
  case PRIMC_U4: ((uint8_t *)p)[i] = (uint8_t)(v & 0xf); break;
  case PRIMC_I2: ((int8_t *)p)[i] = (int8_t)(((v & 0x3) ^ 2) - 2); break;
  case PRIMC_U2: ((uint8_t *)p)[i] = (uint8_t)(v & 0x3); break;
  case PRIMC_BOOL: ((uint8_t *)p)[i] = v != 0; break;
  default: break;
  }
}

static int is_float(int dt) {
  return dt == PRIMC_F16 || dt == PRIMC_BF16 || dt == PRIMC_F32 || dt == PRIMC_F64 || dt == PRIMC_F8E8M0 || f8_of(dt) != NULL;
}

static size_t dsize(int dt) {
  static const size_t s[PRIMC_DTYPE_COUNT] = {2, 2, 4, 8, 1, 2, 4, 8, 1, 1, 8, 2, 4, 8, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  return dt >= 0 && dt < PRIMC_DTYPE_COUNT ? s[dt] : 1;
}

/* get_i's value mapped so that signed order is the dtype's order: u64 bits have their top bit flipped */
static int64_t ordered(int64_t v, int dt) { return dt == PRIMC_U64 ? (int64_t)((uint64_t)v ^ (1ull << 63)) : v; }

/* a shape as codegen lays it out in params: rank then 8 dims */
typedef struct shp {
  int rank;
  int64_t d[PRIMC_MAX_RANK];
} shp;

static const int64_t *get_shape(const int64_t *q, shp *s) {
  s->rank = (int)q[0];
  for (int i = 0; i < PRIMC_MAX_RANK; i++) s->d[i] = q[1 + i];
  return q + 1 + PRIMC_MAX_RANK;
}

static int64_t numel(const shp *s) {
  int64_t n = 1;
  for (int i = 0; i < s->rank; i++) n *= s->d[i];
  return n;
}

/* outer (dims before axis), len (axis), inner (dims after) */
static void split_axis(const shp *s, int axis, int64_t *outer, int64_t *len, int64_t *inner) {
  *outer = *inner = 1;
  for (int i = 0; i < axis; i++) *outer *= s->d[i];
  for (int i = axis + 1; i < s->rank; i++) *inner *= s->d[i];
  *len = s->rank ? s->d[axis] : 1;
}

int64_t primc_ipow(int64_t b, int64_t e) {
  if (e < 0) return b == 1 ? 1 : b == -1 ? (e & 1 ? -1 : 1) : 0;
  uint64_t r = 1, x = (uint64_t)b;
  for (; e; e >>= 1, x *= x)
    if (e & 1) r *= x;
  return (int64_t)r;
}

/* ---------------------------------------------------------------- copy (bitcast, output copies) */

int primc_k_copy(const int64_t *params, void *const *bufs) {
  shp s;
  get_shape(params + 1, &s);
  if (bufs[0] != bufs[1]) memmove(bufs[0], bufs[1], (size_t)numel(&s) * dsize((int)params[0]));
  return PRIMC_OK;
}

/* ---------------------------------------------------------------- dot_general */

/* a strided [R, C] matrix as a BLAS operand; 0 when neither stride is 1 */
static int blas_layout(int64_t R, int64_t C, int64_t sr, int64_t sc, int *trans, int64_t *ld) {
  if (sc == 1 || C == 1) {
    *trans = 0;
    *ld = R == 1 ? C : sr;
    if (*ld < C) *ld = C;
    return 1;
  }
  if (sr == 1 || R == 1) {
    *trans = 1;
    *ld = sc;
    if (*ld < R) *ld = R;
    return 1;
  }
  return 0;
}

static void dot_generic(int dt, int64_t M, int64_t N, int64_t K, const char *a, int64_t sm, int64_t sk,
                        const char *b, int64_t bk, int64_t bn, char *o) {
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) {
      if (is_float(dt)) {
        double acc = 0;
        for (int64_t k = 0; k < K; k++) acc += get_f(a, m * sm + k * sk, dt) * get_f(b, k * bk + n * bn, dt);
        set_f(o, m * N + n, dt, acc);
      } else {
        uint64_t acc = 0;
        for (int64_t k = 0; k < K; k++)
          acc += (uint64_t)get_i(a, m * sm + k * sk, dt) * (uint64_t)get_i(b, k * bk + n * bn, dt);
        set_i(o, m * N + n, dt, (int64_t)acc);
      }
    }
}

/* elements of C below which the epilogue runs on the calling thread */
#define EPI_SPLIT_ELEMS 32768

/* one batch of a strided dot: f32 through our GEMM, f64 through BLAS, the rest element by element */
typedef struct dot_job {
  const int64_t *q;
  void *const *bufs;
  int blas, ta, tb;
  int64_t lda, ldb;
} dot_job;

static void dot_batch(const dot_job *j, int64_t i) {
  const int64_t *q = j->q;
  int dt = (int)q[0];
  int64_t M = q[2], N = q[3], K = q[4];
  size_t es = dsize(dt);
  const char *ai = (const char *)j->bufs[1] + (size_t)(i * q[5]) * es, *bi = (const char *)j->bufs[2] + (size_t)(i * q[8]) * es;
  char *oi = (char *)j->bufs[0] + (size_t)(i * M * N) * es;
  if (!j->blas)
    dot_generic(dt, M, N, K, ai, q[6], q[7], bi, q[9], q[10], oi);
  else if (dt == PRIMC_F32)
    primc_sgemm(j->ta, j->tb, M, N, K, 1.0f, (const float *)ai, j->lda, (const float *)bi, j->ldb, 0.0f, (float *)oi, N);
  else
    cblas_dgemm(CblasRowMajor, j->ta ? CblasTrans : CblasNoTrans, j->tb ? CblasTrans : CblasNoTrans, (int)M, (int)N,
                (int)K, 1.0, (const double *)ai, (int)j->lda, (const double *)bi, (int)j->ldb, 0.0, (double *)oi, (int)N);
}

static void dot_batches(void *ctx, int64_t b, int64_t e) {
  for (int64_t i = b; i < e; i++) dot_batch(ctx, i);
}

/* below this many multiply-adds per batch, batches (attention heads) go to the threads whole */
#define DOT_BATCH_SPLIT_FLOPS (1 << 22)

/* params: dtype, B, M, N, K, a strides (batch, m, k), b strides (batch, k, n); out is [B, M, N] */
int primc_k_dot(const int64_t *q, void *const *bufs) {
  int dt = (int)q[0];
  int64_t B = q[1], M = q[2], N = q[3], K = q[4];
  if (M * N == 0) return PRIMC_OK;
  dot_job j = {q, bufs, 0, 0, 0, 0, 0};
  j.blas = (dt == PRIMC_F32 || dt == PRIMC_F64) && K > 0 && blas_layout(M, K, q[6], q[7], &j.ta, &j.lda) &&
           blas_layout(K, N, q[9], q[10], &j.tb, &j.ldb);
  double flops = (double)M * (double)N * (double)K;
  if (B > 1 && j.blas && dt == PRIMC_F32 && flops < DOT_BATCH_SPLIT_FLOPS && flops * (double)B >= (1 << 18))
    primc_parallel_for(B, dot_batches, &j); /* primc_sgemm runs inline on a pool thread */
  else
    dot_batches(&j, 0, B);
  return PRIMC_OK;
}

/* params as dot's (B's strides unused), then the packed B's bytes; bufs: out, a, B packed by primc_sgemm_pack_b */
int primc_k_dot_packed(const int64_t *q, void *const *bufs) {
  int64_t M = q[2], N = q[3], K = q[4];
  int ta = 0;
  int64_t lda = 0;
  if (M * N == 0) return PRIMC_OK;
  if (q[0] != PRIMC_F32 || q[1] != 1 || K < 1 || !blas_layout(M, K, q[6], q[7], &ta, &lda)) return PRIMC_ERR_RUNTIME;
  /* B may come from a weights file: its header decides every read, so it is checked first */
  if (q[11] < 1 || primc_sgemm_packed_check(bufs[2], (size_t)q[11], N, K, NULL) != PRIMC_OK) return PRIMC_ERR_WEIGHTS;
  return primc_sgemm_prepacked_any(ta, M, N, K, 1.0f, bufs[1], lda, bufs[2], 0.0f, bufs[0], N, NULL, NULL);
}

/* the GEMM over all of C, then the epilogue split over the threads by rows while C is in cache */
static int dot_then_epilogue(int (*dot)(const int64_t *, void *const *), const int64_t *q, void *const *bufs,
                             void (*epi)(void *, int64_t, int64_t), void *ctx) {
  int64_t M = q[2], N = q[3];
  int st = dot(q, bufs);
  if (st != PRIMC_OK || M == 0) return st;
  if (q[1] == 1 && M > 1 && M * N >= EPI_SPLIT_ELEMS)
    primc_parallel_for(M, epi, ctx);
  else
    epi(ctx, 0, M);
  return PRIMC_OK;
}

/* dot with an elementwise epilogue over [M, N] rows [begin, end) */
int primc_k_dot_epi(const int64_t *q, void *const *bufs, void (*epi)(void *, int64_t, int64_t), void *ctx) {
  return dot_then_epilogue(primc_k_dot, q, bufs, epi, ctx);
}

int primc_k_dot_packed_epi(const int64_t *q, void *const *bufs, void (*epi)(void *, int64_t, int64_t), void *ctx) {
  return dot_then_epilogue(primc_k_dot_packed, q, bufs, epi, ctx);
}

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

/* next multi-index over dims[0..n); 0 when wrapped */
static int next_index(int64_t *idx, const int64_t *dims, int n) {
  for (int d = n - 1; d >= 0; d--) {
    if (++idx[d] < dims[d]) return 1;
    idx[d] = 0;
  }
  return 0;
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

static void conv_im2col(const conv_desc *c, const float *x, int64_t Cg, int64_t taps, int64_t P, int64_t plane,
                        float *col);

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
        conv_im2col(c, x + (n * C + g * Cg) * plane, Cg, taps, P, plane, col);
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)Og, (int)P, (int)(Cg * taps), 1.0f,
                  w + g * Og * Cg * taps, (int)(Cg * taps), b, (int)P, 0.0f, out + (n * O + g * Og) * P, (int)P);
    }
}

/* the common 2-D case without input dilation: no division per element */
static void im2col_2d(const conv_desc *c, const float *x, int64_t Cg, float *col) {
  int64_t H = c->x.d[2], W = c->x.d[3], KH = c->w.d[2], KW = c->w.d[3], OH = c->o.d[2], OW = c->o.d[3];
  for (int64_t ci = 0; ci < Cg; ci++)
    for (int64_t kh = 0; kh < KH; kh++)
      for (int64_t kw = 0; kw < KW; kw++) {
        float *row = col + ((ci * KH + kh) * KW + kw) * OH * OW;
        for (int64_t oh = 0; oh < OH; oh++) {
          int64_t ih = oh * c->stride[0] - c->pad[0] + kh * c->dil[0];
          float *dst = row + oh * OW;
          if (ih < 0 || ih >= H) {
            memset(dst, 0, sizeof *dst * (size_t)OW);
            continue;
          }
          const float *src = x + (ci * H + ih) * W;
          for (int64_t ow = 0; ow < OW; ow++) {
            int64_t iw = ow * c->stride[1] - c->pad[1] + kw * c->dil[1];
            dst[ow] = iw >= 0 && iw < W ? src[iw] : 0.0f;
          }
        }
      }
}

static void conv_im2col(const conv_desc *c, const float *x, int64_t Cg, int64_t taps, int64_t P, int64_t plane,
                        float *col) {
  if (c->S == 2 && c->ldil[0] == 1 && c->ldil[1] == 1) {
    im2col_2d(c, x, Cg, col);
    return;
  }
  for (int64_t ci = 0; ci < Cg; ci++) {
    const float *xp = x + ci * plane;
    int64_t k[8] = {0};
    int64_t t = 0;
    do {
      int64_t o[8] = {0}, pidx = 0;
      float *row = col + (ci * taps + t) * P;
      do {
        int64_t off = conv_offset(c, o, k);
        row[pidx++] = off < 0 ? 0.0f : xp[off];
      } while (next_index(o, c->o.d + 2, c->S));
      t++;
    } while (next_index(k, c->w.d + 2, c->S));
  }
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
 * [fused, bias offset, bias stride (-1: no bias), has residual, lo, hi (doubles as bits), silu, how the weights are
 * packed (PRIMC_CONV_W_*: 0 plain), the tile height they were packed for, the packed weights' bytes, the
 * planned conv row + 1 (runtime/conv/plan.c)];
 * bufs[4..6] = y, bias, residual */
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
  e->silu = q[0] && q[6];
}

/* the same epilogue after a conv that did not run it: y = clamp(acc + bias + res) over [N, O, P] */
static void conv_epi_apply(const conv_desc *c, const primc_conv_epi *e, float *y, const float *acc) {
  int64_t N = c->o.d[0], O = c->o.d[1], P = prod(c->o.d + 2, c->S);
  for (int64_t n = 0; n < N; n++)
    for (int64_t o = 0; o < O; o++) {
      float b = e->bias ? e->bias[o * e->bias_stride] : 0.0f;
      for (int64_t i = (n * O + o) * P, end = i + P; i < end; i++) {
        float v = acc[i] + b + (e->res ? e->res[i] : 0.0f);
        if (e->silu) v = v / (1.0f + expf(-v));
        y[i] = v < e->lo ? e->lo : v > e->hi ? e->hi : v;
      }
    }
}

/* the 2-D f32 conv as primc_conv2d; 0 when the bottom/right padding codegen implies is negative */
static int conv2d_params(const conv_desc *c, primc_conv2d *p) {
  if (c->dt != PRIMC_F32 || c->S != 2 || c->ldil[0] != 1 || c->ldil[1] != 1) return 0;
  *p = (primc_conv2d){.n = c->x.d[0], .c = c->x.d[1], .h = c->x.d[2], .w = c->x.d[3], .o = c->w.d[0],
                      .kh = c->w.d[2], .kw = c->w.d[3], .groups = c->groups, .stride_h = c->stride[0],
                      .stride_w = c->stride[1], .dil_h = c->dil[0], .dil_w = c->dil[1], .pad_t = c->pad[0],
                      .pad_l = c->pad[1]};
  /* the end padding the last output reaches; negative when a strided conv leaves the last input rows
   * unread (a 1x1/2 downsample of an even map), which is the same conv with none */
  p->pad_b = (c->o.d[2] - 1) * p->stride_h + p->dil_h * (p->kh - 1) + 1 - p->h - p->pad_t;
  p->pad_r = (c->o.d[3] - 1) * p->stride_w + p->dil_w * (p->kw - 1) + 1 - p->w - p->pad_l;
  if (p->pad_b < 0 && p->pad_b > -p->stride_h) p->pad_b = 0;
  if (p->pad_r < 0 && p->pad_r > -p->stride_w) p->pad_r = 0;
  int64_t oh, ow;
  return p->pad_b >= 0 && p->pad_r >= 0 && primc_conv2d_out_hw(p, &oh, &ow) && oh == c->o.d[2] && ow == c->o.d[3];
}

int primc_conv2d_of_params(const int64_t *params, primc_conv2d *p) {
  conv_desc c;
  conv_read(params, &c);
  if (c.S < 0 || c.S > 6 || c.groups < 1 || !conv2d_params(&c, p)) return 0;
  int64_t layout = params[CONV_EPI_AT + CONV_EPI_PACKED], tile = params[CONV_EPI_AT + CONV_EPI_TILE];
  p->w_packed_mr = layout == PRIMC_CONV_W_STRIPS || layout == PRIMC_CONV_W_WINOGRAD ? (int)tile : 0;
  p->w_packed_panels = layout == PRIMC_CONV_W_PANELS;
  p->w_winograd = layout == PRIMC_CONV_W_WINOGRAD;
  p->w_lanes = layout == PRIMC_CONV_W_LANES;
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
  /* packed weights may come from a weights file: their headers decide every read, so they are checked first */
  if (q[CONV_EPI_PACKED] && (q[CONV_EPI_WBYTES] < 1 || primc_conv2d_check_weights(&p, bufs[2], (size_t)q[CONV_EPI_WBYTES])))
    return PRIMC_ERR_WEIGHTS;
  if (two_d && q[CONV_EPI_ROW] > 0 && q[CONV_EPI_ROW] <= PRIMC_CONV_ROW_COUNT) { /* the compiled plan, run as it is */
    primc_conv_plan plan = {(int32_t)(q[CONV_EPI_ROW] - 1), (int32_t)q[CONV_EPI_PACKED], (int32_t)q[CONV_EPI_TILE]};
    return primc_conv_run(&p, &plan, bufs[1], bufs[2], q[0] ? &e : NULL, q[0] ? bufs[4] : bufs[0], bufs[0], bufs[3]);
  }
  if (two_d) /* params made without a plan: planned now, for the layout they name */
    return primc_conv2d_f32_epi(&p, bufs[1], bufs[2], q[0] ? &e : NULL, q[0] ? bufs[4] : bufs[0], bufs[0],
                                bufs[3]);
  if (c.dt == PRIMC_F32) conv_f32(&c, bufs[0], bufs[1], bufs[2], bufs[3]);
  else conv_generic(&c, bufs[0], bufs[1], bufs[2]);
  if (q[0]) {
    if (c.dt != PRIMC_F32) return PRIMC_ERR_RUNTIME;
    conv_epi_apply(&c, &e, bufs[4], bufs[0]);
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

/* ---------------------------------------------------------------- gather, scatter */

/* element offset in a row-major shape of the multi-index idx */
static int64_t offset_of(const shp *s, const int64_t *idx) {
  int64_t off = 0;
  for (int d = 0; d < s->rank; d++) off = off * s->d[d] + idx[d];
  return off;
}

/* x element strides: row-major, or the [offset, strides] that follow the params */
static int64_t x_strides(const shp *s, const int64_t *strided, int64_t *st) {
  int64_t acc = 1;
  for (int d = s->rank - 1; d >= 0; d--) {
    st[d] = strided ? strided[1 + d] : acc;
    acc *= s->d[d];
  }
  return strided ? strided[0] : 0;
}

/* The last dim runs as an inner loop with a fixed source stride, so an embedding
 * lookup (axis 0, idx broadcast along the row) is a strided row copy. */
static int gather(const int64_t *q, void *const *bufs, int strided) {
  shp x, ix, o;
  const int64_t *r = get_shape(get_shape(get_shape(q + 1, &x), &ix), &o);
  int axis = (int)r[0], idt = (int)r[1];
  size_t es = dsize((int)q[0]);
  int64_t st[PRIMC_MAX_RANK], base0 = x_strides(&x, strided ? r + 2 : NULL, st);
  int last = ix.rank - 1;
  int64_t n = numel(&ix), inner = ix.rank ? ix.d[last] : 1, idx[PRIMC_MAX_RANK] = {0};
  if (n == 0 || inner == 0) return PRIMC_OK;
  for (int64_t i = 0; i < n; i += inner) {
    int64_t base = base0;
    for (int d = 0; d < last; d++)
      if (d != axis) base += idx[d] * st[d];
    int64_t step = last == axis ? 0 : st[last];
    const char *src = (const char *)bufs[1];
    char *dst = (char *)bufs[0] + (size_t)i * es;
    for (int64_t t = 0; t < inner; t++) {
      int64_t j = idt == PRIMC_I64 ? ((const int64_t *)bufs[2])[i + t] : get_i(bufs[2], i + t, idt);
      if (j < 0) j += x.d[axis];
      if (j < 0 || j >= x.d[axis]) return PRIMC_ERR_RUNTIME;
      int64_t off = base + j * st[axis] + t * step;
      if (es == 4) memcpy(dst + t * 4, src + off * 4, 4);
      else memcpy(dst + (size_t)t * es, src + (size_t)off * es, es);
    }
    if (last > 0) next_index(idx, ix.d, last);
  }
  return PRIMC_OK;
}

/* params: dtype, x, idx, out shapes, axis, idx dtype; bufs: out, x, idx */
int primc_k_gather(const int64_t *q, void *const *bufs) { return gather(q, bufs, 0); }

/* the same params followed by x's element offset and 8 strides: x is read in place from
 * the buffer it is an index remapping of (e.g. a broadcast, never materialized) */
int primc_k_gather_strided(const int64_t *q, void *const *bufs) { return gather(q, bufs, 1); }

static void combine(void *o, int64_t oi, const void *u, int64_t ui, int dt, int mode) {
  if (is_float(dt)) {
    double a = get_f(o, oi, dt), b = get_f(u, ui, dt);
    double r = mode == 0 ? b : mode == 1 ? a + b : mode == 2 ? a * b : mode == 3 ? fmax(a, b) : fmin(a, b);
    set_f(o, oi, dt, r);
  } else {
    int64_t a = get_i(o, oi, dt), b = get_i(u, ui, dt);
    int64_t r = mode == 0   ? b
                : mode == 1 ? (int64_t)((uint64_t)a + (uint64_t)b)
                : mode == 2 ? (int64_t)((uint64_t)a * (uint64_t)b)
                : mode == 3 ? (ordered(a, dt) > ordered(b, dt) ? a : b)
                            : (ordered(a, dt) < ordered(b, dt) ? a : b);
    set_i(o, oi, dt, r);
  }
}

/* params: dtype, x, idx, upd, out shapes, axis, idx dtype, mode; bufs: out, x, idx, upd */
int primc_k_scatter(const int64_t *q, void *const *bufs) {
  shp x, ix, up, o;
  const int64_t *r = get_shape(get_shape(get_shape(get_shape(q + 1, &x), &ix), &up), &o);
  int dt = (int)q[0], axis = (int)r[0], idt = (int)r[1], mode = (int)r[2];
  size_t es = dsize(dt);
  if (bufs[0] != bufs[1]) memmove(bufs[0], bufs[1], (size_t)numel(&x) * es);
  int64_t n = numel(&ix), idx[PRIMC_MAX_RANK] = {0};
  for (int64_t i = 0; i < n; i++) {
    int64_t dst[PRIMC_MAX_RANK];
    memcpy(dst, idx, sizeof dst);
    int64_t j = get_i(bufs[2], i, idt);
    if (j < 0) j += x.d[axis];
    if (j < 0 || j >= x.d[axis]) return PRIMC_ERR_RUNTIME;
    dst[axis] = j;
    if (mode == 0 && es) memcpy((char *)bufs[0] + (size_t)offset_of(&x, dst) * es, (char *)bufs[3] + (size_t)offset_of(&up, idx) * es, es);
    else combine(bufs[0], offset_of(&x, dst), bufs[3], offset_of(&up, idx), dt, mode);
    next_index(idx, ix.d, ix.rank);
  }
  return PRIMC_OK;
}

/* ---------------------------------------------------------------- cumsum */

/* params: dtype, x, out shapes, axis, exclusive, reverse */
int primc_k_cumsum(const int64_t *q, void *const *bufs) {
  shp x, o;
  const int64_t *r = get_shape(get_shape(q + 1, &x), &o);
  int dt = (int)q[0], axis = (int)r[0], excl = (int)r[1], rev = (int)r[2];
  int64_t outer, len, inner;
  split_axis(&x, axis, &outer, &len, &inner);
  for (int64_t a = 0; a < outer; a++)
    for (int64_t c = 0; c < inner; c++) {
      double sf = 0;
      uint64_t si = 0;
      for (int64_t t = 0; t < len; t++) {
        int64_t k = rev ? len - 1 - t : t, i = (a * len + k) * inner + c;
        double vf = is_float(dt) ? get_f(bufs[1], i, dt) : 0;
        uint64_t vi = is_float(dt) ? 0 : (uint64_t)get_i(bufs[1], i, dt);
        if (!excl) sf += vf, si += vi;
        if (is_float(dt)) set_f(bufs[0], i, dt, sf);
        else set_i(bufs[0], i, dt, (int64_t)si);
        if (excl) sf += vf, si += vi;
      }
    }
  return PRIMC_OK;
}

/* ---------------------------------------------------------------- max pooling */

/*
 * A 2-D max pool over a -inf padded map, read from the unpadded map: codegen turns the pad kernels
 * and the max tree over the padded buffer into this call (see kir_pool_calls). Per output row: the
 * max of its valid input rows into a row buffer with -inf borders, then each output's kw window
 * along that row. A NaN wins, as in the max prim.
 */
#define POOL_ROW_MAX 4096 /* floats of the row buffer, on the stack */

typedef struct pool_job {
  const float *x;
  float *y;
  int64_t h, w, oh, ow, kh, kw, sh, sw, pt, pl, row, fast;
} pool_job;

static inline float max_nan(float a, float b) { return a > b || a != a ? a : b; }

/* lanes i of a 16-float load at x[p + i] that lie inside [0, w) */
static inline __mmask16 in_row(int64_t p, int64_t w) {
  int64_t lo = p < 0 ? -p : 0, hi = w - p < 16 ? w - p : 16;
  return lo >= hi ? 0 : (__mmask16)(((1u << hi) - 1) & ~((1u << lo) - 1));
}

/* x[p .. p + 16) with -inf outside the row */
__attribute__((target("avx512f"))) static inline __m512 row_load(const float *x, int64_t p, int64_t w) {
  return _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), in_row(p, w), x + p);
}

/* NaN-keeping max of two vectors: vmaxps returns its second operand when either is NaN */
__attribute__((target("avx512f"))) static inline __m512 vmax_nan(__m512 a, __m512 b) {
  return _mm512_mask_mov_ps(_mm512_max_ps(a, b), _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q), a);
}
#define VMAX(a, b) vmax_nan(a, b)

/* 3-wide windows at stride 2 from column -1 (one column of left padding, ResNet's stem pool): per 16
 * outputs the max over the kh rows of 32 input floats read at aligned offsets, whose even lanes are
 * the windows' centres, odd lanes their right taps, and odd lanes one lane later (the previous block's
 * last carried in) their left taps: no unaligned loads, which cost twice as much */
__attribute__((target("avx512f"))) static void pool_k3s2_512(const pool_job *j, const float *x, float *y,
                                                         int64_t oy) {
  const __m512i ev = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i od = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  const __m512 ninf = _mm512_set1_ps(-INFINITY);
  int64_t y0 = oy * j->sh - j->pt, w = j->w;
  __m512 prev = ninf;
  for (int64_t o = 0; o < j->ow; o += 16) {
    int64_t p = 2 * o;
    int inner = p + 32 <= w;
    __m512 a = ninf, b = ninf;
    for (int64_t dy = 0; dy < j->kh; dy++) {
      int64_t iy = y0 + dy;
      if (iy < 0 || iy >= j->h) continue;
      const float *r = x + iy * w;
      a = VMAX(a, inner ? _mm512_loadu_ps(r + p) : row_load(r, p, w));
      b = VMAX(b, inner ? _mm512_loadu_ps(r + p + 16) : row_load(r, p + 16, w));
    }
    __m512 e = _mm512_permutex2var_ps(a, ev, b), d = _mm512_permutex2var_ps(a, od, b);
    __m512 left = _mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512(d), _mm512_castps_si512(prev), 15));
    prev = d;
    __mmask16 k = (__mmask16)(j->ow - o >= 16 ? 0xFFFF : (1u << (j->ow - o)) - 1);
    _mm512_mask_storeu_ps(y + o, k, VMAX(VMAX(left, e), d));
  }
}

static void pool_planes(void *ctx, int64_t c0, int64_t c1) {
  const pool_job *j = ctx;
  float t[POOL_ROW_MAX];
  for (int64_t i = 0; i < j->row; i++) t[i] = -INFINITY;
  for (int64_t c = c0; c < c1; c++)
    for (int64_t oy = 0; oy < j->oh; oy++) {
      const float *x = j->x + c * j->h * j->w;
      float *y = j->y + (c * j->oh + oy) * j->ow, *tr = t + j->pl;
      if (j->fast) {
        pool_k3s2_512(j, x, y, oy);
        continue;
      }
      int64_t y0 = oy * j->sh - j->pt, n = 0;
      for (int64_t dy = 0; dy < j->kh; dy++) {
        int64_t iy = y0 + dy;
        if (iy < 0 || iy >= j->h) continue;
        for (int64_t i = 0; i < j->w; i++) tr[i] = n == 0 ? x[iy * j->w + i] : max_nan(tr[i], x[iy * j->w + i]);
        n++;
      }
      if (n == 0)
        for (int64_t i = 0; i < j->w; i++) tr[i] = -INFINITY; /* a window wholly in the padding */
      for (int64_t ox = 0; ox < j->ow; ox++) {
        const float *r = t + ox * j->sw;
        float m = r[0];
        for (int64_t dx = 1; dx < j->kw; dx++) m = max_nan(m, r[dx]);
        y[ox] = m;
      }
    }
}

/* floats of the row buffer a pool needs (0: too wide for it) */
int64_t primc_maxpool_row(int64_t w, int64_t ow, int64_t kw, int64_t sw, int64_t pl) {
  int64_t need = (ow - 1) * sw + kw;
  if (pl + w > need) need = pl + w;
  return need <= POOL_ROW_MAX ? need : 0;
}

/* params: planes, h, w, oh, ow, kh, kw, sh, sw, pt, pl; bufs (y, x), f32 */
int primc_k_maxpool(const int64_t *q, void *const *bufs) {
  pool_job j = {bufs[1], bufs[0], q[1], q[2], q[3], q[4], q[5], q[6], q[7], q[8], q[9], q[10], 0, 0};
  j.row = primc_maxpool_row(j.w, j.ow, j.kw, j.sw, j.pl);
  if (!j.row || j.kh < 1 || j.kw < 1 || j.sh < 1 || j.sw < 1) return PRIMC_ERR_ARG;
  j.fast = j.kw == 3 && j.sw == 2 && j.pl == 1 && __builtin_cpu_supports("avx512f");
  primc_parallel_for(q[0], pool_planes, &j);
  return PRIMC_OK;
}

/* ---------------------------------------------------------------- sort, topk */

typedef struct sort_ctx {
  const void *x;
  int dt, desc;
  int64_t base, inner;
} sort_ctx;

/* -1, 0, 1 comparing elements at positions i and j along the axis; NaN sorts last */
static int cmp_elems(const sort_ctx *s, int64_t i, int64_t j) {
  int64_t a = s->base + i * s->inner, b = s->base + j * s->inner;
  int c;
  if (is_float(s->dt)) {
    double x = get_f(s->x, a, s->dt), y = get_f(s->x, b, s->dt);
    if (isnan(x) || isnan(y)) return isnan(x) - isnan(y);
    c = (x > y) - (x < y);
  } else {
    int64_t x = ordered(get_i(s->x, a, s->dt), s->dt), y = ordered(get_i(s->x, b, s->dt), s->dt);
    c = (x > y) - (x < y);
  }
  return s->desc ? -c : c;
}

/* stable merge sort of the index permutation */
static void merge_sort(const sort_ctx *s, int64_t *v, int64_t *tmp, int64_t n) {
  if (n < 2) return;
  int64_t h = n / 2, i = 0, j = h, k = 0;
  merge_sort(s, v, tmp, h);
  merge_sort(s, v + h, tmp, n - h);
  while (i < h && j < n) tmp[k++] = cmp_elems(s, v[j], v[i]) < 0 ? v[j++] : v[i++];
  while (i < h) tmp[k++] = v[i++];
  while (j < n) tmp[k++] = v[j++];
  memcpy(v, tmp, sizeof *v * (size_t)n);
}

/* params: dtype, x, values, indices shapes, axis, descending (largest), k (-1: sort); bufs: values, indices, x, scratch */
int primc_k_sort(const int64_t *q, void *const *bufs) {
  shp x, vs, is;
  const int64_t *r = get_shape(get_shape(get_shape(q + 1, &x), &vs), &is);
  int dt = (int)q[0], axis = (int)r[0];
  if (axis < 0) axis += x.rank;
  int64_t outer, len, inner, k = r[2] < 0 ? (x.rank ? x.d[axis] : 1) : r[2];
  split_axis(&x, axis, &outer, &len, &inner);
  size_t es = dsize(dt);
  int64_t *perm = bufs[3]; /* workspace scratch: 2 * len */
  for (int64_t a = 0; a < outer; a++)
    for (int64_t c = 0; c < inner; c++) {
      sort_ctx s = {bufs[2], dt, (int)r[1], a * len * inner + c, inner};
      for (int64_t i = 0; i < len; i++) perm[i] = i;
      merge_sort(&s, perm, perm + len, len);
      for (int64_t t = 0; t < k && t < len; t++) {
        int64_t o = (a * k + t) * inner + c;
        memcpy((char *)bufs[0] + (size_t)o * es, (const char *)bufs[2] + (size_t)(s.base + perm[t] * inner) * es, es);
        ((int64_t *)bufs[1])[o] = perm[t];
      }
    }
  return PRIMC_OK;
}

/* ---------------------------------------------------------------- not yet compiled */

/* ---------------------------------------------------------------- random */

/* Philox4x32-10 (Salmon et al., SC'11): ten rounds of two 32x32->64 multiplies, the key
 * bumped by the Weyl constants between rounds; the same stream as the interpreter's */
static void philox(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
  uint32_t x0 = ctr[0], x1 = ctr[1], x2 = ctr[2], x3 = ctr[3], k0 = key[0], k1 = key[1];
  for (int r = 0; r < 10; r++) {
    uint64_t p0 = (uint64_t)0xD2511F53u * x0, p1 = (uint64_t)0xCD9E8D57u * x2;
    uint32_t y0 = (uint32_t)(p1 >> 32) ^ x1 ^ k0, y2 = (uint32_t)(p0 >> 32) ^ x3 ^ k1;
    x1 = (uint32_t)p1;
    x3 = (uint32_t)p0;
    x0 = y0;
    x2 = y2;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  out[0] = x0, out[1] = x1, out[2] = x2, out[3] = x3;
}

static double unit_double(uint32_t hi, uint32_t lo) {
  return (double)((((uint64_t)hi << 32) | lo) >> 11) * (1.0 / 9007199254740992.0);
}

/* the largest value of the float dtype below the one stored at element i */
static void step_down(int dt, void *p, int64_t i) {
  size_t es = dsize(dt);
  uint64_t bits = 0, sign = (uint64_t)1 << (8 * es - 1);
  memcpy(&bits, (char *)p + (size_t)i * es, es);
  if ((bits & sign) || (bits & ~sign) == 0) bits = ((bits & ~sign) + 1) | sign;
  else bits -= 1;
  memcpy((char *)p + (size_t)i * es, &bits, es);
}

/* params: dtype, out shape, normal, seed, a, b (doubles as bits); element i draws
 * philox(counter (i lo, i hi, 0, 0), key (seed lo, seed hi)) */
int primc_k_random(const int64_t *q, void *const *bufs) {
  shp o;
  const int64_t *r = get_shape(q + 1, &o);
  int dt = (int)q[0], normal = (int)r[0], fl = is_float(dt);
  uint64_t seed = (uint64_t)r[1];
  double a, b;
  memcpy(&a, &r[2], 8);
  memcpy(&b, &r[3], 8);
  uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)}, w[4];
  int64_t n = numel(&o);
  for (int64_t i = 0; i < n; i++) {
    uint32_t ctr[4] = {(uint32_t)(uint64_t)i, (uint32_t)((uint64_t)i >> 32), 0, 0};
    philox(ctr, key, w);
    double u = unit_double(w[0], w[1]), v;
    if (normal) v = a + b * sqrt(-2.0 * log(1.0 - u)) * cos(2.0 * M_PI * unit_double(w[2], w[3]));
    else v = a + (b - a) * u;
    if (fl) {
      set_f(bufs[0], i, dt, v);
      if (!normal && b > a && get_f(bufs[0], i, dt) >= b) step_down(dt, bufs[0], i);
    } else {
      double f = normal ? v : floor(v);
      set_i(bufs[0], i, dt, (int64_t)(!normal && f >= b ? ceil(b) - 1 : f));
    }
  }
  return PRIMC_OK;
}
/* ---------------------------------------------------------------- fft */

/* X[k] = sum_t x[t] e^(sign 2 pi i k t / n), naive in double precision; reads at most m inputs, zero beyond */
static void dft(const double *re, const double *im, int64_t m, int64_t n, int sign, int64_t nk, double *ore,
                double *oim) {
  for (int64_t k = 0; k < nk; k++) {
    double sr = 0, si = 0;
    for (int64_t t = 0; t < m && t < n; t++) {
      double a = sign * 2 * M_PI * (double)((k * t) % n) / (double)n, c = cos(a), s = sin(a);
      sr += re[t] * c - im[t] * s;
      si += re[t] * s + im[t] * c;
    }
    ore[k] = sr;
    oim[k] = si;
  }
}

/* params: dtype, in shape, out shape, type (0 fft, 1 ifft, 2 rfft, 3 irfft), length; numpy's conventions
 * (ifft and irfft scaled by 1/n); bufs: out, in, scratch (4 * max(in, out) last dim doubles) */
int primc_k_fft(const int64_t *q, void *const *bufs) {
  shp in, out;
  const int64_t *r = get_shape(get_shape(q + 1, &in), &out);
  int type = (int)r[0];
  int64_t n = r[1], mi = in.d[in.rank - 1], mo = out.d[out.rank - 1], rows = numel(&in) / (mi ? mi : 1);
  int64_t w = (mi > mo ? mi : mo) > n ? (mi > mo ? mi : mo) : n;
  double *re = bufs[2], *im = re + w, *ore = im + w, *oim = ore + w;
  const float *src = bufs[1];
  float *dst = bufs[0];
  for (int64_t row = 0; row < rows; row++) {
    int cin = type != 2, cout = type != 3;
    for (int64_t t = 0; t < w; t++) re[t] = im[t] = 0;
    for (int64_t t = 0; t < mi; t++) {
      re[t] = src[(row * mi + t) * (cin ? 2 : 1)];
      im[t] = cin ? src[(row * mi + t) * 2 + 1] : 0;
    }
    int64_t m = mi;
    if (type == 3) { /* hermitian extension; numpy drops the imaginary parts of X[0] and X[n/2] */
      im[0] = 0;
      if (n % 2 == 0 && n / 2 < mi) im[n / 2] = 0;
      for (int64_t k = n / 2 + 1; k < n; k++) re[k] = re[n - k], im[k] = -im[n - k];
      m = n;
    }
    dft(re, im, m, n, type == 1 || type == 3 ? 1 : -1, mo, ore, oim);
    double scale = type == 1 || type == 3 ? 1.0 / (double)n : 1.0;
    for (int64_t k = 0; k < mo; k++) {
      if (cout) {
        dst[(row * mo + k) * 2] = (float)(ore[k] * scale);
        dst[(row * mo + k) * 2 + 1] = (float)(oim[k] * scale);
      } else {
        dst[row * mo + k] = (float)(ore[k] * scale);
      }
    }
  }
  return PRIMC_OK;
}

/* ---------------------------------------------------------------- nonzero */

static int elem_nonzero(const void *x, int64_t i, int dt) {
  if (dt == PRIMC_C64) return ((const float *)x)[2 * i] != 0 || ((const float *)x)[2 * i + 1] != 0;
  return is_float(dt) ? get_f(x, i, dt) != 0 : get_i(x, i, dt) != 0; /* NaN counts, -0.0 does not */
}

/* params: dtype, x shape. bufs: out (room for rank * numel(x) i64), x, count (one i64).
 * Two serial passes: the count n first, so that the indices land row-major in [rank, n] */
int primc_k_nonzero(const int64_t *q, void *const *bufs) {
  shp x;
  get_shape(q + 1, &x);
  int dt = (int)q[0];
  int64_t total = numel(&x), n = 0, j = 0, idx[PRIMC_MAX_RANK] = {0};
  for (int64_t i = 0; i < total; i++) n += elem_nonzero(bufs[1], i, dt);
  int64_t *out = bufs[0];
  for (int64_t i = 0; i < total; i++, next_index(idx, x.d, x.rank)) {
    if (!elem_nonzero(bufs[1], i, dt)) continue;
    for (int d = 0; d < x.rank; d++) out[d * n + j] = idx[d];
    j++;
  }
  *(int64_t *)bufs[2] = n;
  return PRIMC_OK;
}

/* ---------------------------------------------------------------- actual output dims */

int primc_output_dims(const int64_t *table, int32_t n_outputs, const void *workspace, int32_t output, int64_t *dims) {
  if (!table || !dims || output < 0 || output >= n_outputs) return PRIMC_ERR_ARG;
  const int64_t *row = table + (int64_t)output * (1 + PRIMC_MAX_RANK);
  for (int d = 0; d < PRIMC_MAX_RANK; d++) {
    int64_t v = d < row[0] ? row[1 + d] : 0;
    if (v < 0 && !workspace) return PRIMC_ERR_ARG;
    dims[d] = v >= 0 ? v : *(const int64_t *)(const void *)((const char *)workspace + (-v - 1));
  }
  return PRIMC_OK;
}
