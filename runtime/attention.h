/* runtime/attention.h: what the fused attention call's files share (internal to the runtime): the tile
 * geometry, one task's view of a head, and the rows' entry points. */
#ifndef PRIMC_ATTENTION_INTERNAL_H
#define PRIMC_ATTENTION_INTERNAL_H

#include "runtime/primc_rt.h"

#include <stdint.h>

#define VQ 4         /* vectors of 16 queries a task at most (b->vq: fewer for short query blocks) */
#define QB (16 * VQ) /* the lanes of every tile, of which a task uses 16 * b->vq */
#ifndef KT
#define KT 128 /* keys a tile: the scores tile, KT x QB floats, stays in L1 */
#endif
#ifndef PFV
#define PFV 16 /* V is prefetched this many keys ahead: its rows lie past the L1 stride prefetcher's reach */
#endif

/* one task's view: the head's operands, its QB queries from m0 (rows of them real) and its buffers */
typedef struct att_blk {
  int64_t d, dv, m0, rows;
  int vq; /* vectors of 16 queries: 16 * vq >= rows; every tile row is 16 * vq floats */
  const float *K, *V, *M; /* at the head */
  int64_t ksk, ksd, vsk, vsd, msq, msk;
  int causal;
  float *qt;  /* [d][16 vq]: Q^T, scaled, lanes past rows 0 */
  float *s;   /* [KT][16 vq]: S^T, then P^T */
  float *acc; /* [dv][16 vq]: O^T, unnormalized */
  float mx[QB], sum[QB];
  float tmx[QB]; /* vector rows: the running max with the current tile's scores, kept as they are stored */
} att_blk;

/* keys [n0, n0 + nk) of the block: scores, mask and causal cut, the online softmax, the accumulator */
typedef void att_tile(att_blk *b, int64_t n0, int64_t nk);
typedef void att_pack_q(att_blk *b, const float *Q, int64_t ld, float scale);
typedef void att_store_o(att_blk *b, float *y, int64_t ld);

/* a vector row's att_tile: its scores, softmax and pv steps for the block's vq, a constant V in each case so
 * that the register blocks unroll (ATTR: the row's target attribute) */
#define ATT_TILE_ENTRY(ATTR, fn, scores, softmax, pv)                                                            \
  ATTR static inline __attribute__((always_inline)) void fn##_of(att_blk *b, int64_t n0, int64_t nk, const int V) { \
    scores(b, n0, nk, V);                                                                                       \
    softmax(b, nk, V);                                                                                          \
    pv(b, n0, nk, V);                                                                                           \
  }                                                                                                             \
  ATTR void fn(att_blk *b, int64_t n0, int64_t nk) {                                                            \
    switch (b->vq) {                                                                                            \
    case 1: fn##_of(b, n0, nk, 1); break;                                                                       \
    case 2: fn##_of(b, n0, nk, 2); break;                                                                       \
    case 3: fn##_of(b, n0, nk, 3); break;                                                                       \
    default: fn##_of(b, n0, nk, 4); break;                                                                      \
    }                                                                                                           \
  }                                                                                                             \
  _Static_assert(VQ == 4, "a case for each V up to VQ")

#define PRIMC_ATTENTION_ROW(id, name, isa, tile, pack_q, store_o) att_tile tile;
#include "runtime/attention_rows.def"
#undef PRIMC_ATTENTION_ROW
#if PRIMC_X86
att_pack_q primc_att_pack_q_avx512;
att_store_o primc_att_store_o_avx512;
#endif

#endif
