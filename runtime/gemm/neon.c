/* runtime/gemm/neon.c: the NEON row: 12 x 8 register tiles on AArch64's 128-bit vectors with fmla by element, and its dot product. */
#include "runtime/gemm/gemm.h"

#if PRIMC_ARM64
#include <arm_neon.h>
#include <string.h>

#define NE_MR GM_MR_NEON
#define NE_NR GM_NR_NEON
_Static_assert(NE_MR == 12 && NE_NR == 8, "the tile: 12 rows x two q registers of columns, 24 accumulators");

#define INLINE static inline __attribute__((always_inline))

/* four of A's values in one register: a whole load when all four are rows of the tile, else lane by lane
 * (a prepacked strip may end right after its last row: nothing past it is read) */
INLINE float32x4_t load_a4(const float *a, const int n) {
  if (n >= 4) return vld1q_f32(a);
  float32x4_t v = vdupq_n_f32(0.0f);
  v = vld1q_lane_f32(a, v, 0);
  if (n > 1) v = vld1q_lane_f32(a + 1, v, 1);
  if (n > 2) v = vld1q_lane_f32(a + 2, v, 2);
  return v;
}

/* rows 4q .. 4q+3 of the tile += (their four A values, by lane) x the two B vectors */
#define FMA_LANE(q, l)                                                                                                 \
  if (4 * (q) + (l) < R) {                                                                                           \
    acc[4 * (q) + (l)][0] = vfmaq_laneq_f32(acc[4 * (q) + (l)][0], b0, av, l);                                       \
    acc[4 * (q) + (l)][1] = vfmaq_laneq_f32(acc[4 * (q) + (l)][1], b1, av, l);                                       \
  }
#define FMA_QUAD(q)                                                                                                    \
  if (4 * (q) < R) {                                                                                                 \
    float32x4_t av = load_a4(a + 4 * (q), R - 4 * (q));                                                              \
    FMA_LANE(q, 0) FMA_LANE(q, 1) FMA_LANE(q, 2) FMA_LANE(q, 3)                                                      \
  }

/* R rows x 8 columns. FULL: all 8 columns of B exist (else they are copied, zero-padded). UNIT: a(r, k) at
 * a[r + k * aks] (a packed strip), four rows a load; else a(r, k) = a[r * ars + k * aks], one value a row.
 * OFF: B's row k at koff[k]. */
INLINE void tile(const kargs *g, const int R, const int FULL, const int UNIT, const int OFF) {
  float32x4_t acc[NE_MR][2];
#pragma GCC unroll 12
  for (int r = 0; r < R; r++) acc[r][0] = acc[r][1] = vdupq_n_f32(0.0f);
  const float *a = g->a, *bb = g->b;
  const int64_t aks = g->aks, bks = g->bks, ars = g->ars;
#pragma GCC unroll 2
  for (int64_t k = 0; k < g->kc; k++) {
    const float *b = OFF ? g->b + g->koff[k] : bb;
    float32x4_t b0, b1;
    if (FULL) {
      b0 = vld1q_f32(b), b1 = vld1q_f32(b + 4);
    } else {
      float t[NE_NR] = {0};
      memcpy(t, b, (size_t)g->nr * sizeof(float));
      b0 = vld1q_f32(t), b1 = vld1q_f32(t + 4);
    }
    if (UNIT) {
      FMA_QUAD(0) FMA_QUAD(1) FMA_QUAD(2)
    } else {
#pragma GCC unroll 12
      for (int r = 0; r < R; r++) {
        float32x4_t av = vdupq_n_f32(a[r * ars]);
        acc[r][0] = vfmaq_f32(acc[r][0], b0, av);
        acc[r][1] = vfmaq_f32(acc[r][1], b1, av);
      }
    }
    a += aks;
    bb += bks;
  }
  float32x4_t va = vdupq_n_f32(g->alpha), vb = vdupq_n_f32(g->beta);
  int read_c = g->beta != 0;
#pragma GCC unroll 12
  for (int r = 0; r < R; r++) {
    float *c = g->c + r * g->ldc;
    float t[NE_NR];
    if (!FULL && read_c) memcpy(t, c, (size_t)g->nr * sizeof(float));
    float *src = FULL ? c : t;
    float32x4_t x0 = vmulq_f32(acc[r][0], va), x1 = vmulq_f32(acc[r][1], va);
    if (read_c) x0 = vfmaq_f32(x0, vld1q_f32(src), vb), x1 = vfmaq_f32(x1, vld1q_f32(src + 4), vb);
    vst1q_f32(FULL ? c : t, x0);
    vst1q_f32(FULL ? c + 4 : t + 4, x1);
    if (!FULL) memcpy(c, t, (size_t)g->nr * sizeof(float));
  }
}

#define DEF_R(R)                                                                                                       \
  static void k_##R##_full_unit(const kargs *g) { tile(g, R, 1, 1, 0); }                                             \
  static void k_##R##_full_rows(const kargs *g) { tile(g, R, 1, 0, 0); }                                             \
  static void k_##R##_part_unit(const kargs *g) { tile(g, R, 0, 1, 0); }                                             \
  static void k_##R##_part_rows(const kargs *g) { tile(g, R, 0, 0, 0); }                                             \
  static void k_##R##_full_off(const kargs *g) { tile(g, R, 1, 1, 1); }                                              \
  static void k_##R##_part_off(const kargs *g) { tile(g, R, 0, 1, 1); }
DEF_R(1) DEF_R(2) DEF_R(3) DEF_R(4) DEF_R(5) DEF_R(6) DEF_R(7) DEF_R(8) DEF_R(9) DEF_R(10) DEF_R(11) DEF_R(12)
#define ROW_R(R) {k_##R##_full_unit, k_##R##_full_rows, k_##R##_part_unit, k_##R##_part_rows, k_##R##_full_off, k_##R##_part_off}

/* [rows - 1][FULL ? 0 : 2 | UNIT ? 0 : 1], or 4 | !FULL with koff (A is then always a packed strip) */
static void (*const tab[NE_MR][6])(const kargs *) = {ROW_R(1), ROW_R(2), ROW_R(3), ROW_R(4),  ROW_R(5),  ROW_R(6),
                                                     ROW_R(7), ROW_R(8), ROW_R(9), ROW_R(10), ROW_R(11), ROW_R(12)};

void primc_gm_kern_neon(const kargs *g, int mr) {
  int full = g->nr == NE_NR;
  int v = g->koff ? 4 + !full : (full ? 0 : 2) + (g->ars != 1);
  tab[mr - 1][v](g);
}

float primc_gm_dot_neon(const float *x, const float *y, int64_t n) {
  float32x4_t a0 = vdupq_n_f32(0.0f), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    a0 = vfmaq_f32(a0, vld1q_f32(x + i), vld1q_f32(y + i));
    a1 = vfmaq_f32(a1, vld1q_f32(x + i + 4), vld1q_f32(y + i + 4));
    a2 = vfmaq_f32(a2, vld1q_f32(x + i + 8), vld1q_f32(y + i + 8));
    a3 = vfmaq_f32(a3, vld1q_f32(x + i + 12), vld1q_f32(y + i + 12));
  }
  float acc = vaddvq_f32(vaddq_f32(vaddq_f32(a0, a1), vaddq_f32(a2, a3)));
  for (; i < n; i++) acc += x[i] * y[i];
  return acc;
}

#else
/* not AArch64: the NEON row never runs here (its ISA is never covered), but the row table names it */
void primc_gm_kern_neon(const kargs *g, int mr) { __builtin_trap(); }
float primc_gm_dot_neon(const float *x, const float *y, int64_t n) { __builtin_trap(); }
#endif
