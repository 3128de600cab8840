/* codegen/kir_tile.c: the kernel-IR rewrite that tiles transposing loop kernels (CPU code): a loop kernel whose
 * store runs along one loop while a load runs along another walks the load T rows apart at every step; split in
 * T x T blocks, each block's rows stay in L1 until the next loop takes their next elements. */
#include "codegen/kir_internal.h"

#include <stdlib.h>

/* Loads at least this many elements apart from one step of the store's loop to the next, and stores as far apart
 * along the load's loop, make a kernel transposing: each step of either touches a new cache line */
#define TILE_FAR 64
/* elements from which a kernel is worth tiling */
#define TILE_MIN_ELEMS 4096

static int64_t iabs(int64_t v) { return v < 0 ? -v : v; }

/* the largest of 16, 8, 4 dividing n (0: none) */
static int64_t tile_of(int64_t n) {
  for (int64_t t = 16; t >= 4; t /= 2)
    if (n % t == 0 && n >= 2 * t) return t;
  return 0;
}

/* every load of e, depth first, into ld (at most cap); -1 when there are more */
static int loads_of(const kir_expr *e, const kir_expr **ld, int n, int cap) {
  if (n < 0) return n;
  if (e->kind == KE_LOAD) {
    if (n >= cap) return -1;
    ld[n++] = e;
  }
  for (int i = 0; i < e->n_args && n >= 0; i++) n = loads_of(e->args[i], ld, n, cap);
  return n;
}

/* the new loops: loop j walks old loop src[j] in steps of scale[j] */
typedef struct tiling {
  int n;
  int src[KIR_MAX_LOOPS];
  int64_t scale[KIR_MAX_LOOPS], extent[KIR_MAX_LOOPS];
} tiling;

static void map_tile(kir_map *m, const tiling *t) {
  int64_t s[KIR_MAX_LOOPS] = {0};
  for (int j = 0; j < t->n; j++) s[j] = m->stride[t->src[j]] * t->scale[j];
  for (int j = 0; j < KIR_MAX_LOOPS; j++) m->stride[j] = s[j];
}

static void expr_tile(kir_expr *e, const tiling *t) {
  if (e->kind == KE_LOAD || e->kind == KE_INDEX) map_tile(&e->map, t);
  for (int i = 0; i < e->n_args; i++) expr_tile(e->args[i], t);
}

/* Loops P (the store's, innermost but for a run both read contiguously) and Q (the far load's nearest) become
 * Q / TQ, P / TP, TQ, TP; the other loops stay outside in their order, the contiguous run inside. ResNet-18's
 * training step flips each conv's weights for the input gradient ([O, C, 3, 3] -> [C, O, 3, 3], taps reversed):
 * a 512-channel layer's rows are 18 KB apart (two L1 sets), 3.3 ms a flip, 12 ms a step (bench/train.md). */
static void kernel_tile(kir_kernel *k) {
  if (k->kind != KK_LOOP || k->absorbed || k->has_epilogue || k->n_stores != 1 || k->n_par != k->n_loops ||
      k->n_loops + 2 > KIR_MAX_LOOPS || k->n_loops < 2)
    return;
  const kir_store *st = &k->stores[0];
  if (st->red != KR_NONE) return;
  const kir_expr *ld[16];
  int n_ld = loads_of(st->value, ld, 0, 16);
  int64_t elems = 1;
  for (int l = 0; l < k->n_loops; l++) elems *= k->extent[l];
  if (n_ld < 1 || elems < TILE_MIN_ELEMS) return;
  for (int i = 0; i < n_ld; i++)
    if (ld[i]->buf == st->buf) return; /* in place: the order of the steps matters */
  /* the run inside: the innermost loop when the store and every load walk it contiguously */
  int inner = k->n_loops - 1, run = iabs(st->map.stride[inner]) == 1;
  for (int i = 0; run && i < n_ld; i++) run = iabs(ld[i]->map.stride[inner]) <= 1;
  int P = run ? inner - 1 : inner;
  if (P < 0 || iabs(st->map.stride[P]) >= TILE_FAR) return;
  int Q = -1;
  for (int i = 0; i < n_ld && Q < 0; i++) {
    const kir_map *m = &ld[i]->map;
    if (iabs(m->stride[P]) < TILE_FAR) continue;
    for (int l = 0; l < P; l++) /* the loop this load walks most nearly contiguously */
      if (k->extent[l] > 1 && m->stride[l] && (Q < 0 || iabs(m->stride[l]) < iabs(m->stride[Q]))) Q = l;
    if (Q >= 0 && (iabs(m->stride[Q]) >= TILE_FAR || iabs(st->map.stride[Q]) < TILE_FAR)) Q = -1;
  }
  int64_t tp = Q >= 0 ? tile_of(k->extent[P]) : 0, tq = Q >= 0 ? tile_of(k->extent[Q]) : 0;
  if (!tp || !tq) return;
  tiling t = {0};
  for (int l = 0; l < P; l++)
    if (l != Q) t.src[t.n] = l, t.scale[t.n] = 1, t.extent[t.n++] = k->extent[l];
  t.src[t.n] = Q, t.scale[t.n] = tq, t.extent[t.n++] = k->extent[Q] / tq;
  t.src[t.n] = P, t.scale[t.n] = tp, t.extent[t.n++] = k->extent[P] / tp;
  t.src[t.n] = Q, t.scale[t.n] = 1, t.extent[t.n++] = tq;
  t.src[t.n] = P, t.scale[t.n] = 1, t.extent[t.n++] = tp;
  if (run) t.src[t.n] = inner, t.scale[t.n] = 1, t.extent[t.n++] = k->extent[inner];
  map_tile(&k->stores[0].map, &t);
  expr_tile(k->stores[0].value, &t);
  for (int j = 0; j < t.n; j++) k->extent[j] = t.extent[j];
  k->n_loops = k->n_par = t.n;
}

pc_status kir_tile_transposes(kir_program *p) {
  if (p->sizes_vary) return PC_OK; /* run-time dims: the extents are bounds, and need not divide */
  for (int i = 0; i < p->n_kernels; i++) kernel_tile(&p->kernels[i]);
  return PC_OK;
}
