/* runtime/gemm/amx.h: the AMX inner loop the bf16 and int8 GEMM families share (x86 only). */
#ifndef PRIMC_GEMM_AMX_H
#define PRIMC_GEMM_AMX_H

#include <immintrin.h>

/* C tiles tmm0-3 (rows 0-15 and 16-31 when M2, columns 0-15 and 16-31 when N2) += A tiles tmm4-5 (16 rows of
 * A's strip, 64 bytes of k each) times B tiles tmm6-7 (the call's two panels) over the call's K, KSTEP elements
 * of k a tile row; DP is the tile dot product (_tile_dpbf16ps, _tile_dpbusd). Each k step prefetches its share
 * of g->pf_lines lines from g->pf into L2: the next block of B. */
#define PRIMC_AMX_LOOP(g, M2, N2, KSTEP, PANEL, DP)                                                                    \
  do {                                                                                                                 \
    __typeof__((g)->a) a0_ = (g)->a, a1_ = (g)->a + (g)->lda;                                                          \
    const int64_t steps_ = (g)->kc / (KSTEP), per_ = (g)->pf ? ((g)->pf_lines + steps_ - 1) / steps_ : 0;            \
    const char *pf_ = (g)->pf, *pf_end_ = pf_ ? pf_ + 64 * (g)->pf_lines : NULL;                                      \
    for (int64_t k_ = 0; k_ < (g)->kc; k_ += (KSTEP)) {                                                               \
      for (int64_t l_ = 0; l_ < per_ && pf_ < pf_end_; l_++, pf_ += 64) _mm_prefetch(pf_, _MM_HINT_T1);               \
      _tile_loadd(4, a0_ + k_ * 16, 64);                                                                               \
      _tile_loadd(6, (g)->b + k_ * 2 * (PANEL), 64);                                                                   \
      if (N2) _tile_loadd(7, (g)->b + k_ * 2 * (PANEL) + 16 * (KSTEP), 64);                                            \
      DP(0, 4, 6);                                                                                                     \
      if (N2) DP(1, 4, 7);                                                                                             \
      if (M2) {                                                                                                        \
        _tile_loadd(5, a1_ + k_ * 16, 64);                                                                             \
        DP(2, 5, 6);                                                                                                   \
        if (N2) DP(3, 5, 7);                                                                                           \
      }                                                                                                                \
    }                                                                                                                  \
  } while (0)

#endif
