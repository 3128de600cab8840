/* runtime/kernels_conv_i8.c: int32 convs (ConvInteger, QLinearConv) on the int8 GEMM: the input once per image as
 * a padded channels-last u8 map, its patches copied straight into the GEMM's A tiles, the weights packed at compile
 * time as B; the GEMM's [pixels][channels] sums transposed into the NCHW result. */
#include "runtime/kernels.h"

#include <stdlib.h>

/* the params' conv as 2-D (a 1-D one as height 1): what every function here reads */
typedef struct ci8 {
  int64_t n, c, h, w, o, g, cg, og, kh, kw, sh, sw, dh, dw, pt, pl, oh, ow;
  int64_t hp, wp; /* the padded map: exactly what the outputs reach */
  int64_t k, p;   /* taps x Cg, output pixels */
  /* B's rows: kk of them. A row of taps shorter than a 64-byte block (a 3-channel stem's 7 x 3 bytes) is one run of
   * the map; rpb > 0: rpb such runs per block, none across two, the rest of the block zero (in A and in B), which
   * is done when it costs no more blocks than k's (the stem's 7 runs: 3 blocks of 3, 3 and 1, as 147 bytes take) */
  int64_t run, rpb, kk;
} ci8;

static int ci8_read(const int64_t *q, ci8 *c) {
  shp x, w, o;
  q = get_shape(get_shape(get_shape(q + 1, &x), &w), &o);
  int64_t groups = *q++;
  const int64_t *stride = q, *pad = q + 8, *dil = q + 16, *ldil = q + 24;
  int S = x.rank - 2;
  if ((S != 1 && S != 2) || w.rank != x.rank || o.rank != x.rank || groups < 1 || x.d[1] % groups || w.d[0] % groups)
    return 0;
  for (int d = 0; d < S; d++)
    if (ldil[d] != 1 || stride[d] < 1 || dil[d] < 1 || pad[d] < 0) return 0;
  int two = S == 2;
  *c = (ci8){.n = x.d[0], .c = x.d[1], .h = two ? x.d[2] : 1, .w = x.d[1 + S], .o = w.d[0], .g = groups,
             .cg = w.d[1], .og = w.d[0] / groups, .kh = two ? w.d[2] : 1, .kw = w.d[1 + S],
             .sh = two ? stride[0] : 1, .sw = stride[S - 1], .dh = two ? dil[0] : 1, .dw = dil[S - 1],
             .pt = two ? pad[0] : 0, .pl = pad[S - 1], .oh = two ? o.d[2] : 1, .ow = o.d[1 + S]};
  if (c->cg * groups != c->c || o.d[0] != c->n || o.d[1] != c->o || c->oh < 1 || c->ow < 1 || c->kh < 1 || c->kw < 1)
    return 0;
  c->hp = (c->oh - 1) * c->sh + (c->kh - 1) * c->dh + 1;
  c->wp = (c->ow - 1) * c->sw + (c->kw - 1) * c->dw + 1;
  c->k = c->kh * c->kw * c->cg;
  c->p = c->oh * c->ow;
  c->run = c->kw * c->cg, c->rpb = 0, c->kk = c->k;
  if (c->g == 1 && c->dw == 1 && c->kh > 1 && c->run < 64 && c->run > 0 &&
      (c->kh + 64 / c->run - 1) / (64 / c->run) <= (c->k + 63) / 64)
    c->rpb = 64 / c->run, c->kk = (c->kh + c->rpb - 1) / c->rpb * 64;
  /* every size below is a product of these: bounded so none overflows */
  return c->hp <= (1 << 20) && c->wp <= (1 << 20) && c->k <= (1 << 24) && c->p <= (1 << 28) && c->c <= (1 << 20) &&
         (double)c->hp * (double)c->wp * (double)c->c < (double)(1ll << 40);
}

static size_t align64(size_t n) { return (n + 63) / 64 * 64; }

/* one group's packed B with row's records (-1: none), padded to 64 bytes */
static size_t group_bytes(const ci8 *c, int row) { return align64(primc_igemm_packed_b_size_row(c->og, c->kk, row)); }

size_t primc_conv_i8_weight_bytes(const int64_t *params, int row) {
  ci8 c;
  return ci8_read(params, &c) && primc_igemm_packed_b_size(c.og, c.kk) ? group_bytes(&c, row) * (size_t)c.g : 0;
}

/* the row of B (the byte of A's row) of tap t's channel ci */
static int64_t k_at(const ci8 *c, int64_t t, int64_t ci) {
  if (!c->rpb) return t * c->cg + ci;
  int64_t ky = t / c->kw, kx = t % c->kw;
  return ky / c->rpb * 64 + ky % c->rpb * c->run + kx * c->cg + ci;
}

/* group g's weights as B [Og][KH][KW][Cg] (the patches' order; with rpb, runs of taps within blocks) into wr */
static void reorder_group(const ci8 *c, const int32_t *w, int64_t g, int32_t *wr) {
  if (c->rpb) memset(wr, 0, sizeof *wr * (size_t)(c->og * c->kk));
  for (int64_t o = 0; o < c->og; o++)
    for (int64_t ci = 0; ci < c->cg; ci++)
      for (int64_t t = 0; t < c->kh * c->kw; t++)
        wr[o * c->kk + k_at(c, t, ci)] = w[((g * c->og + o) * c->cg + ci) * c->kh * c->kw + t];
}

int primc_conv_i8_fits(const int64_t *params, const int32_t *w) {
  ci8 c;
  if (!ci8_read(params, &c) || !w || !primc_conv_i8_weight_bytes(params, -1)) return 0;
  int32_t *wr = malloc(sizeof *wr * (size_t)(c.og * c.kk));
  int ok = wr != NULL;
  for (int64_t g = 0; ok && g < c.g; g++) {
    reorder_group(&c, w, g, wr);
    ok = primc_igemm_b_fits(1, c.og, c.kk, wr);
  }
  free(wr);
  return ok;
}

int primc_conv_i8_pack(const int64_t *params, const int32_t *w, void *dst, int row) {
  ci8 c;
  if (!ci8_read(params, &c) || !w || !dst) return PRIMC_ERR_ARG;
  int32_t *wr = malloc(sizeof *wr * (size_t)(c.og * c.kk));
  if (!wr) return PRIMC_ERR_RUNTIME;
  int st = PRIMC_OK;
  for (int64_t g = 0; st == PRIMC_OK && g < c.g; g++) {
    reorder_group(&c, w, g, wr);
    st = primc_igemm_pack_b_row(1, c.og, c.kk, wr, (char *)dst + g * group_bytes(&c, row), row);
  }
  free(wr);
  return st;
}

/* scratch: the padded u8 map [hp][wp][c] (and 64 bytes that a 1x1's A read in place reaches past its last pixel),
 * one group's per-pixel sums [hp][wp], the GEMM's A, its C [P][Og] */
static size_t map_bytes(const ci8 *c) { return align64((size_t)(c->hp * c->wp * c->c)) + 64; }
static size_t sums_bytes(const ci8 *c) { return align64((size_t)(c->hp * c->wp) * 4); }
static size_t a_bytes(const ci8 *c) { return align64(primc_igemm_scratch_size(c->p, c->kk)); }

int64_t primc_conv_i8_scratch_bytes(const int64_t *params) {
  ci8 c;
  if (!ci8_read(params, &c)) return 0;
  return (int64_t)(map_bytes(&c) + sums_bytes(&c) + a_bytes(&c) + align64((size_t)(c.p * c.og) * 4));
}

#if PRIMC_X86
#include "runtime/avx2.h"
#include <immintrin.h>

/* r[c] holds byte p of channel c for 16 pixels; afterwards r[p] holds pixel p's 16 channels (four unpack rounds) */
__attribute__((always_inline)) static inline void transpose16(__m128i *r) {
  __m128i a[8][2], b[4][4], c[2][8];
  for (int i = 0; i < 8; i++) a[i][0] = _mm_unpacklo_epi8(r[2 * i], r[2 * i + 1]), a[i][1] = _mm_unpackhi_epi8(r[2 * i], r[2 * i + 1]);
  for (int i = 0; i < 4; i++)
    for (int h = 0; h < 2; h++)
      b[i][2 * h] = _mm_unpacklo_epi16(a[2 * i][h], a[2 * i + 1][h]),
      b[i][2 * h + 1] = _mm_unpackhi_epi16(a[2 * i][h], a[2 * i + 1][h]);
  for (int i = 0; i < 2; i++)
    for (int q = 0; q < 4; q++)
      c[i][2 * q] = _mm_unpacklo_epi32(b[2 * i][q], b[2 * i + 1][q]),
      c[i][2 * q + 1] = _mm_unpackhi_epi32(b[2 * i][q], b[2 * i + 1][q]);
  for (int pp = 0; pp < 8; pp++) r[2 * pp] = _mm_unpacklo_epi64(c[0][pp], c[1][pp]), r[2 * pp + 1] = _mm_unpackhi_epi64(c[0][pp], c[1][pp]);
}

/* np (<= 16) bytes from src, the rest 0: a row's last pixels never read past them */
static inline __m128i load_bytes16(const uint8_t *src, int np) {
  if (np == 16) return _mm_loadu_si128((const __m128i *)src);
  uint8_t tmp[16] = {0};
  for (int i = 0; i < np; i++) tmp[i] = src[i];
  return _mm_loadu_si128((const __m128i *)tmp);
}

/* 16 elements of x from element at on (np of them, the rest 0) as int32: i32, or u8 / s8 widened */
__attribute__((target("avx512f"))) static inline __m512i load16(const void *x, int kind, int64_t at, int np, __mmask16 m) {
  if (kind == PRIMC_CONV_I8_X_I32) return _mm512_maskz_loadu_epi32(m, (const int32_t *)x + at);
  __m128i b = load_bytes16((const uint8_t *)x + at, np);
  return kind == PRIMC_CONV_I8_X_U8 ? _mm512_cvtepu8_epi32(b) : _mm512_cvtepi8_epi32(b);
}

/* fill_map's blocks of 16 channels by up to 16 pixels (a row's last block masked), each pixel's sum over the
 * channels added to sums: the bytes made 16 a vector and transposed in registers */
__attribute__((target("avx512f"))) static int map_blocks512(const ci8 *c, const void *x, int kind, int32_t bias,
                                                             uint8_t *map, int32_t *sums, int64_t y0, int64_t y1,
                                                             int64_t x1) {
  __m512i vb = _mm512_set1_epi32(bias), top = _mm512_set1_epi32(255);
  __mmask16 bad = 0;
  /* 64 channels at a time: 64 streams of x, and each pixel's 64 bytes of the map (a line) written at once */
  for (int64_t c0 = 0; c0 + 16 <= c->c; c0 += 64)
  for (int64_t y = y0; y < y1; y++)
    for (int64_t i = 0; i < x1; i += 16) {
      int np = x1 - i < 16 ? (int)(x1 - i) : 16;
      __mmask16 m = (__mmask16)((1u << np) - 1);
      int64_t at = (y + c->pt) * c->wp + c->pl + i;
      __m512i s = _mm512_setzero_si512();
      for (int64_t ch = c0; ch + 16 <= c->c && ch < c0 + 64; ch += 16) {
        __m128i r[16];
        for (int k = 0; k < 16; k++) { /* lanes past the row: 0, which passes the check and adds nothing */
          __m512i v = _mm512_maskz_sub_epi32(m, load16(x, kind, ((ch + k) * c->h + y) * c->w + i, np, m), vb);
          bad |= _mm512_cmpgt_epu32_mask(v, top);
          s = _mm512_add_epi32(s, v);
          r[k] = _mm512_cvtepi32_epi8(v);
        }
        transpose16(r);
        for (int p = 0; p < np; p++) _mm_storeu_si128((__m128i *)(map + (at + p) * c->c + ch), r[p]);
      }
      _mm512_mask_storeu_epi32(sums + at, m, _mm512_add_epi32(_mm512_maskz_loadu_epi32(m, sums + at), s));
    }
  return !bad;
}

/* map_blocks512 on ymm: 16 pixels of a channel as two vectors of int32, less the bias, packed to 16 bytes (the
 * saturating packs keep values in range; one out of range is counted bad), transposed 16 x 16 as map_own_bytes does.
 * The lanes past a row's last pixel are zeroed after the subtraction, so they pass the check and add nothing. */
__attribute__((target("avx2"))) static int map_blocks256(const ci8 *c, const void *x, int kind, int32_t bias,
                                                           uint8_t *map, int32_t *sums, int64_t y0, int64_t y1,
                                                           int64_t x1) {
  const __m256i vb = _mm256_set1_epi32(bias), low = _mm256_set1_epi32(255);
  __m256i bad = _mm256_setzero_si256();
  int64_t plane = c->h * c->w;
  for (int64_t c0 = 0; c0 + 16 <= c->c; c0 += 64)
    for (int64_t y = y0; y < y1; y++)
      for (int64_t i = 0; i < x1; i += 16) {
        int np = x1 - i < 16 ? (int)(x1 - i) : 16;
        __m256i in0 = primc_low_mask8(np), in1 = primc_low_mask8(np - 8);
        int64_t at = (y + c->pt) * c->wp + c->pl + i;
        __m256i s0 = _mm256_setzero_si256(), s1 = s0;
        for (int64_t ch = c0; ch + 16 <= c->c && ch < c0 + 64; ch += 16) {
          __m128i r[16];
          for (int k = 0; k < 16; k++) {
            int64_t e = (ch + k) * plane + y * c->w + i;
            __m256i v0, v1;
            if (kind == PRIMC_CONV_I8_X_I32) {
              const int32_t *src = (const int32_t *)x + e;
              v0 = np >= 8 ? _mm256_loadu_si256((const __m256i *)src) : _mm256_maskload_epi32(src, in0);
              v1 = np == 16 ? _mm256_loadu_si256((const __m256i *)(src + 8)) : _mm256_maskload_epi32(src + 8, in1);
            } else {
              __m128i b = load_bytes16((const uint8_t *)x + e, np);
              v0 = kind == PRIMC_CONV_I8_X_U8 ? _mm256_cvtepu8_epi32(b) : _mm256_cvtepi8_epi32(b);
              v1 = kind == PRIMC_CONV_I8_X_U8 ? _mm256_cvtepu8_epi32(_mm_srli_si128(b, 8)) : _mm256_cvtepi8_epi32(_mm_srli_si128(b, 8));
            }
            v0 = _mm256_and_si256(_mm256_sub_epi32(v0, vb), in0);
            v1 = _mm256_and_si256(_mm256_sub_epi32(v1, vb), in1);
            bad = _mm256_or_si256(bad, _mm256_andnot_si256(low, _mm256_or_si256(v0, v1)));
            s0 = _mm256_add_epi32(s0, v0), s1 = _mm256_add_epi32(s1, v1);
            r[k] = primc_u8_of_i32x16(v0, v1);
          }
          transpose16(r);
          for (int p = 0; p < np; p++) _mm_storeu_si128((__m128i *)(map + (at + p) * c->c + ch), r[p]);
        }
        int32_t t[16];
        _mm256_storeu_si256((__m256i *)t, s0);
        _mm256_storeu_si256((__m256i *)(t + 8), s1);
        for (int p = 0; p < np; p++) sums[at + p] += t[p];
      }
  return _mm256_testz_si256(bad, bad);
}

/* each written pixel's sum over the map's first c / 16 * 16 channels, added to sums */
__attribute__((target("avx2"))) static void own_sums(const ci8 *c, const uint8_t *map, int32_t *sums, int64_t y0,
                                                       int64_t y1, int64_t x1) {
  __m128i zero = _mm_setzero_si128();
  int64_t vec_ch = c->c / 16 * 16;
  for (int64_t y = y0; y < y1; y++)
    for (int64_t i = 0; i < x1; i++) {
      int64_t at = (y + c->pt) * c->wp + c->pl + i;
      __m128i acc = zero;
      for (int64_t ch = 0; ch < vec_ch; ch += 16)
        acc = _mm_add_epi64(acc, _mm_sad_epu8(_mm_loadu_si128((const __m128i *)(map + at * c->c + ch)), zero));
      sums[at] += (int32_t)(_mm_cvtsi128_si64(acc) + _mm_extract_epi64(acc, 1));
    }
}

/* map_blocks512 for 8-bit x whose map bytes are x's own (u8 less 0, s8 less -128: a flip of the top bit): no widening
 * and no check, the bytes transposed 16 x 16 (SSE alone: AVX2 machines take it too); then each written pixel's sum
 * over the first vec_ch channels. Where the map has no left padding and its rows are x's whole rows, the rows are
 * one run of pixels (a 7x7 map: 4 blocks of 16 pixels, not 7 of 7); a block's 16 bytes of a channel load whole
 * while they stay inside the image (the bytes past its pixels are never stored) */
__attribute__((target("avx2"))) static void map_own_bytes(const ci8 *c, const uint8_t *x, uint8_t flip, uint8_t *map,
                                                            int32_t *sums, int64_t y0, int64_t y1, int64_t x1) {
  __m128i vf = _mm_set1_epi8((char)flip);
  int64_t vec_ch = c->c / 16 * 16, plane = c->h * c->w;
  const uint8_t *end = x + c->c * plane;
  int flat = c->pl == 0 && c->wp == c->w && x1 == c->w;
  int64_t runs = flat ? 1 : y1 - y0, len = flat ? (y1 - y0) * c->w : x1;
  for (int64_t c0 = 0; c0 < vec_ch; c0 += 64)
    for (int64_t u = 0; u < runs; u++) {
      int64_t y = y0 + u, from = y * c->w, at0 = (y + c->pt) * c->wp + c->pl;
      for (int64_t i = 0; i < len; i += 16) {
        int np = len - i < 16 ? (int)(len - i) : 16;
        int64_t at = at0 + i;
        for (int64_t ch = c0; ch < vec_ch && ch < c0 + 64; ch += 16) {
          __m128i r[16];
          for (int k = 0; k < 16; k++) {
            const uint8_t *src = x + (ch + k) * plane + from + i;
            r[k] = _mm_xor_si128(src + 16 <= end ? _mm_loadu_si128((const __m128i *)src) : load_bytes16(src, np), vf);
          }
          transpose16(r);
          for (int q = 0; q < np; q++) _mm_storeu_si128((__m128i *)(map + (at + q) * c->c + ch), r[q]);
        }
      }
    }
  own_sums(c, map, sums, y0, y1, x1);
}

/* map_own_bytes with AVX512-BW: 16 channels by 64 pixels a block, four 16 x 16 transposes side by side in the
 * 128-bit lanes; each pixel's 16 bytes then stored from its lane */
__attribute__((always_inline, target("avx512f,avx512bw"))) static inline void transpose16x4(__m512i *r) {
  __m512i a[16], b[16];
  for (int i = 0; i < 8; i++) a[2 * i] = _mm512_unpacklo_epi8(r[2 * i], r[2 * i + 1]), a[2 * i + 1] = _mm512_unpackhi_epi8(r[2 * i], r[2 * i + 1]);
  for (int i = 0; i < 4; i++)
    for (int h = 0; h < 2; h++)
      b[4 * i + 2 * h] = _mm512_unpacklo_epi16(a[4 * i + h], a[4 * i + 2 + h]),
                    b[4 * i + 2 * h + 1] = _mm512_unpackhi_epi16(a[4 * i + h], a[4 * i + 2 + h]);
  for (int i = 0; i < 2; i++)
    for (int q = 0; q < 4; q++)
      a[8 * i + 2 * q] = _mm512_unpacklo_epi32(b[8 * i + q], b[8 * i + 4 + q]),
                    a[8 * i + 2 * q + 1] = _mm512_unpackhi_epi32(b[8 * i + q], b[8 * i + 4 + q]);
  for (int pp = 0; pp < 8; pp++)
    r[2 * pp] = _mm512_unpacklo_epi64(a[pp], a[8 + pp]), r[2 * pp + 1] = _mm512_unpackhi_epi64(a[pp], a[8 + pp]);
}

__attribute__((target("avx512f,avx512bw"))) static void map_own_bytes512(const ci8 *c, const uint8_t *x, uint8_t flip,
                                                                          uint8_t *map, int32_t *sums, int64_t y0,
                                                                          int64_t y1, int64_t x1) {
  __m512i vf = _mm512_set1_epi8((char)flip);
  int64_t vec_ch = c->c / 16 * 16;
  for (int64_t c0 = 0; c0 < vec_ch; c0 += 64)
    for (int64_t y = y0; y < y1; y++)
      for (int64_t i = 0; i < x1; i += 64) {
        int np = x1 - i < 64 ? (int)(x1 - i) : 64;
        __mmask64 m = np == 64 ? ~(__mmask64)0 : ((__mmask64)1 << np) - 1;
        int64_t at = (y + c->pt) * c->wp + c->pl + i;
        for (int64_t ch = c0; ch < vec_ch && ch < c0 + 64; ch += 16) {
          __m512i r[16];
          for (int k = 0; k < 16; k++)
            r[k] = _mm512_xor_si512(_mm512_maskz_loadu_epi8(m, x + ((ch + k) * c->h + y) * c->w + i), vf);
          transpose16x4(r);
          for (int q = 0; q < 16; q++) {
            uint8_t *d = map + (at + q) * c->c + ch;
            int64_t st = 16 * c->c; /* 16 pixels on: the next lane's */
            if (q < np) _mm_storeu_si128((__m128i *)d, _mm512_extracti32x4_epi32(r[q], 0));
            if (16 + q < np) _mm_storeu_si128((__m128i *)(d + st), _mm512_extracti32x4_epi32(r[q], 1));
            if (32 + q < np) _mm_storeu_si128((__m128i *)(d + 2 * st), _mm512_extracti32x4_epi32(r[q], 2));
            if (48 + q < np) _mm_storeu_si128((__m128i *)(d + 3 * st), _mm512_extracti32x4_epi32(r[q], 3));
          }
        }
      }
  own_sums(c, map, sums, y0, y1, x1);
}


/* map_own_bytes512 for 64 channels at a time (Cg a multiple of 64): 16 pixels by 64 channels a block, lane l of
 * zmm k holding channel 16 l + k's 16 pixels, so that after the lanes' transposes zmm q is pixel q's 64 bytes, one
 * line stored whole (the 16-byte stores at the map's channel stride were a 256 -> 64 1x1's fifth, Zen 5) */
__attribute__((target("avx512f,avx512bw,avx512vl"))) static void map_own_lines(const ci8 *c, const uint8_t *x,
                                                                             uint8_t flip, uint8_t *map, int32_t *sums,
                                                                             int64_t y0, int64_t y1, int64_t x1) {
  __m512i vf = _mm512_set1_epi8((char)flip);
  int64_t plane = c->h * c->w;
  for (int64_t c0 = 0; c0 < c->c; c0 += 64)
    for (int64_t y = y0; y < y1; y++)
      for (int64_t i = 0; i < x1; i += 16) {
        int np = x1 - i < 16 ? (int)(x1 - i) : 16;
        __mmask16 m = (__mmask16)(np == 16 ? 0xFFFF : (1u << np) - 1);
        const uint8_t *src = x + c0 * plane + y * c->w + i;
        __m512i r[16];
        for (int k = 0; k < 16; k++) {
          __m512i v = _mm512_castsi128_si512(_mm_maskz_loadu_epi8(m, src + k * plane));
          v = _mm512_inserti32x4(v, _mm_maskz_loadu_epi8(m, src + (16 + k) * plane), 1);
          v = _mm512_inserti32x4(v, _mm_maskz_loadu_epi8(m, src + (32 + k) * plane), 2);
          r[k] = _mm512_xor_si512(_mm512_inserti32x4(v, _mm_maskz_loadu_epi8(m, src + (48 + k) * plane), 3), vf);
        }
        transpose16x4(r);
        uint8_t *dst = map + ((y + c->pt) * c->wp + c->pl + i) * c->c + c0;
        for (int q = 0; q < np; q++) _mm512_storeu_si512(dst + q * c->c, r[q]);
      }
  own_sums(c, map, sums, y0, y1, x1);
}
#endif

static int force_portable; /* primc_conv_i8_force_portable's: the paths of CPUs without AVX512-BW */

typedef struct map_job {
  const ci8 *c;
  const void *x;
  int kind;     /* PRIMC_CONV_I8_X_*: how x is stored */
  int32_t bias; /* subtracted from x's stored values: lo, plus the zero point for u8 and s8 */
  uint8_t *map;
  int32_t *sums;
  int64_t x1;
  int vec;    /* 16 channels or more, sums wanted, AVX2: map_own_bytes for bytes stored as the map's, else map_blocks256 */
  int vec512; /* and AVX-512: map_blocks512 for the others */
  int bw;     /* and AVX512-BW, not forced portable: map_own_bytes512 */
  uint32_t bad;
} map_job;

/* channels [ch0, c) of rows [y0, y1) into the map, pixel by pixel, each pixel's sum of them added to sums (a stem's
 * 3 channels; the channels past the vector blocks); kind a constant where it is inlined. Nonzero when a value
 * leaves [0, 255]. */
__attribute__((always_inline)) static inline uint32_t map_tail(const ci8 *c, const map_job *j, int64_t y0, int64_t y1,
                                                                int64_t ch0, int kind) {
  uint32_t bad = 0;
  int64_t plane = c->h * c->w;
  for (int64_t y = y0; y < y1; y++) {
    int64_t row = y * c->w, at = (y + c->pt) * c->wp + c->pl;
    for (int64_t i = 0; i < j->x1; i++) {
      uint8_t *px = j->map + (at + i) * c->c;
      int32_t s = 0;
      for (int64_t ch = ch0; ch < c->c; ch++) {
        int64_t e = ch * plane + row + i;
        int32_t raw = kind == PRIMC_CONV_I8_X_I32  ? ((const int32_t *)j->x)[e]
                      : kind == PRIMC_CONV_I8_X_U8 ? ((const uint8_t *)j->x)[e]
                                                   : ((const int8_t *)j->x)[e];
        uint32_t v = (uint32_t)raw - (uint32_t)j->bias;
        bad |= v >> 8;
        px[ch] = (uint8_t)v;
        s += (int32_t)v;
      }
      if (j->sums) j->sums[at + i] += s;
    }
  }
  return bad;
}

/* rows [y0, y1) of the image into the map (fill_map's share of a thread) */
static void map_rows(void *ctx, int64_t y0, int64_t y1) {
  map_job *j = ctx;
  const ci8 *c = j->c;
  int64_t vec_ch = 0; /* the vector blocks wrote channels [0, vec_ch) */
  uint32_t bad = 0;
  if (j->sums)
    for (int64_t y = y0; y < y1; y++) memset(j->sums + (y + c->pt) * c->wp + c->pl, 0, sizeof(int32_t) * (size_t)j->x1);
#if PRIMC_X86
  if (j->vec) {
    vec_ch = c->c / 16 * 16;
    int own = j->kind == PRIMC_CONV_I8_X_U8 && j->bias == 0 ? 1 : j->kind == PRIMC_CONV_I8_X_S8 && j->bias == -128 ? 2 : 0;
    if (own && j->bw && c->c % 64 == 0)
      map_own_lines(c, j->x, own == 2 ? 0x80 : 0, j->map, j->sums, y0, y1, j->x1);
    else if (own && j->bw)
      map_own_bytes512(c, j->x, own == 2 ? 0x80 : 0, j->map, j->sums, y0, y1, j->x1);
    else if (own)
      map_own_bytes(c, j->x, own == 2 ? 0x80 : 0, j->map, j->sums, y0, y1, j->x1);
    else if (j->vec512)
      bad |= !map_blocks512(c, j->x, j->kind, j->bias, j->map, j->sums, y0, y1, j->x1);
    else
      bad |= !map_blocks256(c, j->x, j->kind, j->bias, j->map, j->sums, y0, y1, j->x1);
  }
#endif
  if (vec_ch < c->c) {
    if (j->kind == PRIMC_CONV_I8_X_I32) bad |= map_tail(c, j, y0, y1, vec_ch, PRIMC_CONV_I8_X_I32);
    else if (j->kind == PRIMC_CONV_I8_X_U8) bad |= map_tail(c, j, y0, y1, vec_ch, PRIMC_CONV_I8_X_U8);
    else bad |= map_tail(c, j, y0, y1, vec_ch, PRIMC_CONV_I8_X_S8);
  }
  if (bad) __atomic_store_n(&j->bad, 1, __ATOMIC_RELAXED);
}

/* image x ([c][h][w], stored as kind says, the values its stored ones less zp) less lo into the padded channels-last
 * map, and (sums not NULL) each padded pixel's sum over all channels, rows split over the pool; 0 when a value
 * leaves [lo, lo + 255] */
static int fill_map(const ci8 *c, const void *x, int kind, int32_t zp, int32_t lo, uint8_t *map, int32_t *sums) {
  uint8_t pad = (uint8_t)(0u - (uint32_t)lo); /* the padding: 0 less lo */
  int64_t y1 = c->h < c->hp - c->pt ? c->h : c->hp - c->pt, x1 = c->w < c->wp - c->pl ? c->w : c->wp - c->pl;
  if (y1 < 1 || x1 < 1) y1 = x1 = 0;
  /* the padding pixels alone (map_rows writes the others): rows above and below the image, columns beside it */
  for (int64_t py = 0; py < c->hp; py++) {
    int inside = py >= c->pt && py < c->pt + y1;
    int64_t spans[2][2] = {{0, inside ? c->pl : c->wp}, {inside ? c->pl + x1 : c->wp, c->wp}};
    for (int s = 0; s < 2; s++) {
      int64_t a = py * c->wp + spans[s][0], n = spans[s][1] - spans[s][0];
      if (n <= 0) continue;
      memset(map + a * c->c, pad, (size_t)(n * c->c));
      for (int64_t i = 0; sums && i < n; i++) sums[a + i] = (int32_t)pad * (int32_t)c->c;
    }
  }
  if (y1 < 1) return 1;
  map_job j = {c, x, kind, (int32_t)((uint32_t)zp + (uint32_t)lo), map, sums, x1, 0, 0, 0, 0};
#if PRIMC_X86
  j.vec = sums && c->c >= 16 && primc_isa_covers(primc_sgemm_isa(), PRIMC_ISA_AVX2);
  j.vec512 = j.vec && primc_isa_covers(primc_sgemm_isa(), PRIMC_ISA_AVX512);
  j.bw = j.vec512 && __builtin_cpu_supports("avx512bw") && !__atomic_load_n(&force_portable, __ATOMIC_RELAXED);
#endif
  if ((double)y1 * (double)x1 * (double)c->c < (1 << 16)) map_rows(&j, 0, y1);
  else primc_parallel_for(y1, map_rows, &j);
  return !j.bad;
}

/* the sums over group g's channels of each padded pixel */
static void pixel_sums(const ci8 *c, const uint8_t *map, int64_t g, int32_t *sums) {
  for (int64_t i = 0; i < c->hp * c->wp; i++) {
    const uint8_t *px = map + i * c->c + g * c->cg;
    int32_t s = 0;
    for (int64_t ch = 0; ch < c->cg; ch++) s += px[ch];
    sums[i] = s;
  }
}

typedef struct patches {
  const ci8 *c;
  const uint8_t *map; /* at group g's first channel */
  const int32_t *sums;
  int32_t lo;
  int bw; /* AVX512-BW: put_run_bw */
} patches;

/* n bytes from src into row r of a strip's tiles from k on, across its 64-byte blocks */
static void put_run(uint8_t *tiles, int r, int64_t k, const uint8_t *src, int64_t n) {
  while (n > 0) {
    int64_t off = k % 64, seg = 64 - off < n ? 64 - off : n;
    memcpy(tiles + (k / 64) * 1024 + r * 64 + off, src, (size_t)seg);
    k += seg, src += seg, n -= seg;
  }
}

#if PRIMC_X86
/* put_run with masked 64-byte moves: a run shorter than a block (a stem's 21 bytes) is one load and one store */
__attribute__((target("avx512f,avx512bw"))) static void put_run_bw(uint8_t *tiles, int r, int64_t k, const uint8_t *src,
                                                                    int64_t n) {
  while (n > 0) {
    int64_t off = k % 64, seg = 64 - off < n ? 64 - off : n;
    __mmask64 m = seg == 64 ? ~(__mmask64)0 : (((__mmask64)1 << seg) - 1);
    _mm512_mask_storeu_epi8(tiles + (k / 64) * 1024 + r * 64 + off, m, _mm512_maskz_loadu_epi8(m, src));
    k += seg, src += seg, n -= seg;
  }
}
#endif

/* put_run, as masked moves where the CPU has AVX512-BW */
static inline void copy_run(const patches *pt, uint8_t *tiles, int r, int64_t k, const uint8_t *src, int64_t n) {
#if PRIMC_X86
  if (pt->bw) {
    put_run_bw(tiles, r, k, src, n);
    return;
  }
#endif
  (void)pt;
  put_run(tiles, r, k, src, n);
}

/* rows strip * 16 .. + 15 of A: output pixel m's patch, tap by tap, each tap's Cg channels one run of the map */
static void fill_patches(void *ctx, int64_t strip, uint8_t *tiles, int64_t Kp, int32_t *roff, int32_t *rsum) {
  const patches *pt = ctx;
  const ci8 *c = pt->c;
  for (int r = 0; r < 16; r++) {
    int64_t m = strip * 16 + r;
    if (m >= c->p) {
      for (int64_t kb = 0; kb < Kp; kb += 64) memset(tiles + (kb / 64) * 1024 + r * 64, 0, 64);
      roff[r] = rsum[r] = 0;
      continue;
    }
    int64_t oy = m / c->ow, ox = m % c->ow, k = 0;
    int32_t s = 0;
    for (int64_t ky = 0; ky < c->kh; ky++) {
      int64_t at = (oy * c->sh + ky * c->dh) * c->wp + ox * c->sw;
      if (c->cg % 64 && c->g == 1 && c->dw == 1) { /* the row of taps is one run of the map (a 3-channel stem's 21 bytes) */
        copy_run(pt, tiles, r, k, pt->map + at * c->c, c->kw * c->cg);
        for (int64_t kx = 0; kx < c->kw; kx++) s += pt->sums[at + kx];
        k += c->kw * c->cg;
        continue;
      }
      for (int64_t kx = 0; kx < c->kw; kx++, at += c->dw, k += c->cg) {
        const uint8_t *src = pt->map + at * c->c;
        if (c->cg % 64 == 0) /* whole 64-byte blocks: copies of a constant size, inlined */
          for (int64_t b = 0; b < c->cg; b += 64) memcpy(tiles + (k + b) / 64 * 1024 + r * 64, src + b, 64);
        else
          copy_run(pt, tiles, r, k, src, c->cg);
        s += pt->sums[at];
      }
    }
    if (k % 64) memset(tiles + (k / 64) * 1024 + r * 64 + k % 64, 0, (size_t)(64 - k % 64));
    for (int64_t kb = (k + 63) / 64 * 64; kb < Kp; kb += 64) memset(tiles + (kb / 64) * 1024 + r * 64, 0, 64);
    roff[r] = pt->lo;
    rsum[r] = s;
  }
}

#if PRIMC_X86
/* fill_patches for Cg a multiple of 64 (every conv of a ResNet past its stem): each tap's channels whole blocks,
 * moved a zmm at a time */
__attribute__((target("avx512f"))) static void fill_blocks512(void *ctx, int64_t strip, uint8_t *tiles, int64_t Kp,
                                                               int32_t *roff, int32_t *rsum) {
  const patches *pt = ctx;
  const ci8 *c = pt->c;
  int64_t nb = c->cg / 64, kb_end = Kp / 64;
  for (int r = 0; r < 16; r++) {
    int64_t m = strip * 16 + r, kb = 0;
    uint8_t *dst = tiles + r * 64;
    int32_t s = 0;
    if (m < c->p) {
      int64_t oy = m / c->ow, ox = m % c->ow;
      for (int64_t ky = 0; ky < c->kh; ky++) {
        int64_t at = (oy * c->sh + ky * c->dh) * c->wp + ox * c->sw;
        for (int64_t kx = 0; kx < c->kw; kx++, at += c->dw) {
          const uint8_t *src = pt->map + at * c->c;
          for (int64_t b = 0; b < nb; b++, kb++) _mm512_storeu_si512(dst + kb * 1024, _mm512_loadu_si512(src + b * 64));
          s += pt->sums[at];
        }
      }
    }
    for (; kb < kb_end; kb++) _mm512_storeu_si512(dst + kb * 1024, _mm512_setzero_si512());
    roff[r] = m < c->p ? pt->lo : 0;
    rsum[r] = s;
  }
}

/* fill_runs' row r: each block's runs as masked loads placed at their offsets (a masked load reads only its bytes),
 * one store of the block, the row's sum by psadbw over the blocks (the rest of each block is 0) */
__attribute__((target("avx512f,avx512bw"))) static int32_t runs_row_bw(const ci8 *c, const uint8_t *map, int64_t at0,
                                                                       uint8_t *tiles, int r, int64_t Kp) {
  __m512i acc = _mm512_setzero_si512(), zero = _mm512_setzero_si512();
  __mmask64 m = ((__mmask64)1 << c->run) - 1;
  for (int64_t ky = 0, kb = 0; kb < Kp; kb += 64) {
    __m512i v = zero;
    for (int64_t j = 0; j < c->rpb && ky < c->kh; j++, ky++) {
      const uint8_t *src = map + (at0 + ky * c->dh * c->wp) * c->c - j * c->run;
      v = _mm512_or_si512(v, _mm512_maskz_loadu_epi8(m << (j * c->run), src));
    }
    _mm512_storeu_si512(tiles + (kb / 64) * 1024 + r * 64, v);
    acc = _mm512_add_epi64(acc, _mm512_sad_epu8(v, zero));
  }
  return (int32_t)_mm512_reduce_add_epi64(acc);
}
#endif

/* rows strip * 16 .. + 15 of A in the rpb layout: each row of taps one run, rpb runs a block, the rest 0 */
static void fill_runs(void *ctx, int64_t strip, uint8_t *tiles, int64_t Kp, int32_t *roff, int32_t *rsum) {
  const patches *pt = ctx;
  const ci8 *c = pt->c;
  for (int r = 0; r < 16; r++) {
    int64_t m = strip * 16 + r;
    roff[r] = m < c->p ? pt->lo : 0;
    if (m >= c->p) {
      for (int64_t kb = 0; kb < Kp; kb += 64) memset(tiles + (kb / 64) * 1024 + r * 64, 0, 64);
      rsum[r] = 0;
      continue;
    }
    int64_t at0 = m / c->ow * c->sh * c->wp + m % c->ow * c->sw; /* the patch's top-left pixel */
#if PRIMC_X86
    if (pt->bw) {
      rsum[r] = runs_row_bw(c, pt->map, at0, tiles, r, Kp);
      continue;
    }
#endif
    int32_t s = 0;
    for (int64_t kb = 0; kb < Kp; kb += 64) memset(tiles + (kb / 64) * 1024 + r * 64, 0, 64);
    for (int64_t ky = 0; ky < c->kh; ky++) {
      int64_t at = at0 + ky * c->dh * c->wp;
      memcpy(tiles + (ky / c->rpb) * 1024 + r * 64 + ky % c->rpb * c->run, pt->map + at * c->c, (size_t)c->run);
      for (int64_t kx = 0; kx < c->kw; kx++) s += pt->sums[at + kx];
    }
    rsum[r] = s;
  }
}

/* A in place (primc_igemm_in_place) for taps of whole 64-byte blocks of channels, or a 1x1's one tap of any, on a CPU
 * whose int8 row reads it so:
 * each block's offset from a patch's top-left pixel, each row's window sum from the per-pixel sums, in the room the
 * A tiles would have taken. Only into at most 64 output channels, where the fill costs most per multiply-add: the
 * zoo's QDQ ResNet-18 (AMD Zen 5, 1 thread) 5.37 -> 5.29 ms (layer 1's 3x3s 0.34-0.37 -> 0.32-0.35 ms), while from
 * 128 channels the in-place reads cost more than the fill saved (256 at 14x14 0.266 -> 0.272 ms, the 64 -> 128
 * 1x1/2 0.063 -> 0.072). The same on an AMX Xeon (its tiles loading a strip of 16 pixels where they lie, else
 * copied first): 4.12 -> 3.80 ms, and 4.3 with every conv in place */
static int in_place_fits(const ci8 *c) {
  return c->og <= 64 && (c->cg % 64 == 0 || c->kh * c->kw == 1) && !c->rpb &&
         !__atomic_load_n(&force_portable, __ATOMIC_RELAXED) && primc_igemm_in_place_runs();
}

static int conv_in_place(const ci8 *c, const uint8_t *map, const int32_t *sums, int32_t lo, const void *packed,
                         int32_t *acc, void *room) {
  int64_t *boff = room; /* room is 64-byte aligned */
  int64_t blocks = (c->k + 63) / 64; /* a 1x1's last block reads on past its pixel's channels: B's rows there are 0 */
  int32_t *roff = (int32_t *)(boff + blocks), *rsum = roff + c->p;
  for (int64_t b = 0; b < blocks; b++) {
    int64_t t = b * 64 / c->cg; /* the block's tap */
    boff[b] = (t / c->kw * c->dh * c->wp + t % c->kw * c->dw) * c->c + b * 64 % c->cg;
  }
  for (int64_t m = 0, y = 0, x = 0; m < c->p; m++, x++) {
    if (x == c->ow) x = 0, y++;
    const int32_t *at = sums + y * c->sh * c->wp + x * c->sw;
    int32_t s = 0;
    for (int64_t ky = 0; ky < c->kh; ky++)
      for (int64_t kx = 0; kx < c->kw; kx++) s += at[ky * c->dh * c->wp + kx * c->dw];
    roff[m] = lo, rsum[m] = s;
  }
  primc_igemm_ip ip = {map, c->ow, c->sh * c->wp * c->c, c->sw * c->c, boff, roff, rsum};
  return primc_igemm_in_place(c->p, c->og, c->k, &ip, packed, acc, c->og);
}

typedef struct out_job {
  const int32_t *acc;
  int64_t p, og;
  int32_t *y;
} out_job;

/* the GEMM's [p][og] sums into the result's [og][p] for pixel blocks [b, e) of 64 (their sums stay in L1 across
 * channels) */
static void out_blocks(void *ctx, int64_t b, int64_t e) {
  const out_job *j = ctx;
  for (int64_t m0 = b * 64; m0 < e * 64 && m0 < j->p; m0 += 64) {
    int64_t m1 = m0 + 64 < j->p ? m0 + 64 : j->p;
    for (int64_t o = 0; o < j->og; o++)
      for (int64_t m = m0; m < m1; m++) j->y[o * j->p + m] = j->acc[m * j->og + o];
  }
}

#if PRIMC_X86
/* r[i] holds row i of a 16 x 16 int32 block; afterwards r[j] holds column j (unpacks within 128-bit lanes, then
 * the lanes moved across registers) */
__attribute__((target("avx512f"), always_inline)) static inline void transpose16x16_epi32(__m512i *r) {
  __m512i t[16], u[16];
  for (int a = 0; a < 8; a++)
    t[2 * a] = _mm512_unpacklo_epi32(r[2 * a], r[2 * a + 1]), t[2 * a + 1] = _mm512_unpackhi_epi32(r[2 * a], r[2 * a + 1]);
  /* u[4b + c], lane L: column 4L + c of rows 4b .. 4b + 3 */
  for (int b = 0; b < 4; b++) {
    u[4 * b] = _mm512_unpacklo_epi64(t[4 * b], t[4 * b + 2]);
    u[4 * b + 1] = _mm512_unpackhi_epi64(t[4 * b], t[4 * b + 2]);
    u[4 * b + 2] = _mm512_unpacklo_epi64(t[4 * b + 1], t[4 * b + 3]);
    u[4 * b + 3] = _mm512_unpackhi_epi64(t[4 * b + 1], t[4 * b + 3]);
  }
  for (int c = 0; c < 4; c++) {
    __m512i v0 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x44), v1 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xEE);
    __m512i v2 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x44), v3 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xEE);
    r[c] = _mm512_shuffle_i32x4(v0, v2, 0x88), r[4 + c] = _mm512_shuffle_i32x4(v0, v2, 0xDD);
    r[8 + c] = _mm512_shuffle_i32x4(v1, v3, 0x88), r[12 + c] = _mm512_shuffle_i32x4(v1, v3, 0xDD);
  }
}

/* out_blocks as 16 x 16 blocks transposed in registers (masked at the last pixels and channels) */
__attribute__((target("avx512f"))) static void out_blocks512(void *ctx, int64_t b, int64_t e) {
  const out_job *j = ctx;
  int64_t end = e * 64 < j->p ? e * 64 : j->p;
  for (int64_t m = b * 64; m < end; m += 16) {
    int np = end - m < 16 ? (int)(end - m) : 16;
    __mmask16 pm = (__mmask16)((1u << np) - 1);
    for (int64_t o0 = 0; o0 < j->og; o0 += 16) {
      int no = j->og - o0 < 16 ? (int)(j->og - o0) : 16;
      __mmask16 om = (__mmask16)((1u << no) - 1);
      __m512i r[16];
      for (int i = 0; i < 16; i++)
        r[i] = i < np ? _mm512_maskz_loadu_epi32(om, j->acc + (m + i) * j->og + o0) : _mm512_setzero_si512();
      transpose16x16_epi32(r);
      for (int c = 0; c < no; c++) _mm512_mask_storeu_epi32(j->y + (o0 + c) * j->p + m, pm, r[c]);
    }
  }
}

/* out_blocks as 8 x 8 blocks transposed in registers, a channel's 64 pixels written one after another (8 channels'
 * planes at a time, not all of them: their lines stay whole); the last pixels and channels one by one */
__attribute__((target("avx2"))) static void out_blocks256(void *ctx, int64_t b, int64_t e) {
  const out_job *j = ctx;
  for (int64_t m0 = b * 64; m0 < e * 64 && m0 < j->p; m0 += 64) {
    int64_t m1 = m0 + 64 < j->p ? m0 + 64 : j->p, m8 = m0 + (m1 - m0) / 8 * 8, o0 = 0;
    for (; o0 + 8 <= j->og; o0 += 8)
      for (int64_t m = m0; m < m8; m += 8) {
        __m256 r[8];
        for (int i = 0; i < 8; i++) r[i] = _mm256_castsi256_ps(_mm256_loadu_si256((const __m256i *)(j->acc + (m + i) * j->og + o0)));
        primc_tr8(r);
        for (int c = 0; c < 8; c++) _mm256_storeu_si256((__m256i *)(j->y + (o0 + c) * j->p + m), _mm256_castps_si256(r[c]));
      }
    for (int64_t o = 0; o < j->og; o++)
      for (int64_t m = o < o0 ? m8 : m0; m < m1; m++) j->y[o * j->p + m] = j->acc[m * j->og + o];
  }
}
#endif

static void transpose_out(const int32_t *acc, int64_t p, int64_t og, int32_t *y) {
  out_job j = {acc, p, og, y};
  void (*fn)(void *, int64_t, int64_t) = out_blocks;
#if PRIMC_X86
  if (primc_isa_covers(primc_sgemm_isa(), PRIMC_ISA_AVX512)) fn = out_blocks512;
  else if (primc_isa_covers(primc_sgemm_isa(), PRIMC_ISA_AVX2)) fn = out_blocks256;
#endif
  if ((double)p * (double)og < (1 << 16)) fn(&j, 0, (p + 63) / 64);
  else primc_parallel_for((p + 63) / 64, fn, &j);
}

/* the least and greatest of an image's n int32 values (with 0 when the conv reads padding) */
static void image_range(const ci8 *c, const int32_t *x, int64_t n, int32_t *lo, int32_t *hi) {
  int pad = c->pt > 0 || c->pl > 0 || c->hp > c->pt + c->h || c->wp > c->pl + c->w;
  int32_t l = pad ? 0 : INT32_MAX, h = pad ? 0 : INT32_MIN;
  int64_t i = 0;
#if PRIMC_X86
  if (primc_isa_covers(primc_sgemm_isa(), PRIMC_ISA_AVX2)) i = primc_range_i32_avx2(x, n, &l, &h);
#endif
  for (; i < n; i++) l = x[i] < l ? x[i] : l, h = x[i] > h ? x[i] : h;
  *lo = l, *hi = h;
}

/* image x's conv straight from the packed weights, exact (int32 sums that wrap, as the reference's): an image of
 * PRIMC_CONV_I8_X_I32_ANY values spanning more than a byte */
static void exact_image(const ci8 *c, const int32_t *x, const char *packed, size_t gb, int32_t *y) {
  for (int64_t g = 0; g < c->g; g++) {
    const char *pb = packed + g * gb;
    for (int64_t o = 0; o < c->og; o++)
      for (int64_t m = 0; m < c->p; m++) {
        int64_t oy = m / c->ow, ox = m % c->ow;
        uint32_t acc = 0;
        for (int64_t t = 0; t < c->kh * c->kw; t++) {
          int64_t iy = oy * c->sh + t / c->kw * c->dh - c->pt, ix = ox * c->sw + t % c->kw * c->dw - c->pl;
          if (iy < 0 || iy >= c->h || ix < 0 || ix >= c->w) continue;
          for (int64_t ci = 0; ci < c->cg; ci++)
            acc += (uint32_t)x[((g * c->cg + ci) * c->h + iy) * c->w + ix] * (uint32_t)primc_igemm_packed_b_at(pb, o, k_at(c, t, ci));
        }
        y[(g * c->og + o) * c->p + m] = (int32_t)acc;
      }
  }
}

void primc_conv_i8_force_portable(int on) { __atomic_store_n(&force_portable, on != 0, __ATOMIC_RELAXED); }

int primc_k_conv_i8(const int64_t *params, void *const *bufs) {
  ci8 c;
  if (!ci8_read(params, &c) || params[0] != PRIMC_I32) return PRIMC_ERR_RUNTIME;
  const int64_t *q = params + PRIMC_CONV_EPI_AT;
  int64_t lo = q[0], wbytes = q[1], kind = q[2], zp = q[3];
  int any = kind == PRIMC_CONV_I8_X_I32_ANY;
  /* each group's packed B (and the records packing may have put beside it) takes an equal share of the bytes */
  size_t gb = wbytes > 0 && wbytes % c.g == 0 ? (size_t)(wbytes / c.g) : 0;
  if (lo > 0 || lo < -255 || gb % 64 || gb < group_bytes(&c, -1) || kind < PRIMC_CONV_I8_X_I32 ||
      kind > PRIMC_CONV_I8_X_I32_ANY || ((kind == PRIMC_CONV_I8_X_I32 || any) && zp) || zp < -512 || zp > 512)
    return PRIMC_ERR_RUNTIME;
  for (int64_t g = 0; g < c.g; g++)
    if (primc_igemm_packed_check((const char *)bufs[2] + g * gb, gb, c.og, c.kk) != PRIMC_OK) return PRIMC_ERR_WEIGHTS;
  primc_i8_rq rq;
  if (primc_i8_rq_read(params + PRIMC_CONV_I8_RQ_AT, bufs, c.o, &rq) != PRIMC_OK) return PRIMC_ERR_RUNTIME;
  int32_t *out = bufs[0];
  const char *x = bufs[1];
  int64_t esize = kind == PRIMC_CONV_I8_X_I32 || any ? 4 : 1;
  uint8_t *map = bufs[3], *a = map + map_bytes(&c) + sums_bytes(&c);
  int32_t *sums = (int32_t *)(map + map_bytes(&c)), *acc = (int32_t *)(a + a_bytes(&c));
  int bw = 0;
#if PRIMC_X86
  bw = __builtin_cpu_supports("avx512bw") && !__atomic_load_n(&force_portable, __ATOMIC_RELAXED);
#endif
  for (int64_t n = 0; n < c.n; n++) {
    const char *xn = x + n * c.c * c.h * c.w * esize;
    if (any) { /* this image's range, found now */
      int32_t l, h;
      image_range(&c, (const int32_t *)xn, c.c * c.h * c.w, &l, &h);
      if ((int64_t)h - l > 255) {
        if (rq.kind) return PRIMC_ERR_RUNTIME; /* codegen requantizes only calls of a proven range */
        exact_image(&c, (const int32_t *)xn, bufs[2], gb, out + n * c.o * c.p);
        continue;
      }
      lo = l;
    }
    if (!fill_map(&c, xn, any ? PRIMC_CONV_I8_X_I32 : (int)kind, (int32_t)zp, (int32_t)lo, map, c.g == 1 ? sums : NULL))
      return PRIMC_ERR_RUNTIME;
    for (int64_t g = 0; g < c.g; g++) {
      if (c.g > 1) pixel_sums(&c, map, g, sums);
      patches pt = {&c, map + g * c.cg, sums, (int32_t)lo, bw};
      primc_igemm_fill_fn fill = c.rpb ? fill_runs : fill_patches;
#if PRIMC_X86
      if (c.cg % 64 == 0 && bw) fill = fill_blocks512;
#endif
      const char *wg = (const char *)bufs[2] + g * gb;
      int st = in_place_fits(&c) ? conv_in_place(&c, pt.map, sums, (int32_t)lo, wg, acc, a)
                                 : primc_igemm_filled(c.p, c.og, c.kk, fill, &pt, wg, acc, c.og, a);
      if (st != PRIMC_OK) return st;
      if (rq.kind) primc_i8_rq_out(&rq, acc, c.p, c.og, g * c.og, (n * c.o + g * c.og) * c.p);
      else transpose_out(acc, c.p, c.og, out + (n * c.o + g * c.og) * c.p);
    }
  }
  return PRIMC_OK;
}
