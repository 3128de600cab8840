/* codegen/kir_pool_calls.c: the kernel-IR rewrite of max pools as primc_k_maxpool calls (CPU code): a loop kernel
 * storing a tree of max loads over a -inf padded copy of a map (ONNX MaxPool), or over the map itself, becomes a
 * call reading the map unpadded, the padding kernels absorbed; over a u8 map padded with 0 (a QDQ model's pool),
 * primc_k_maxpool_u8, which writes the pooled values dequantized too where the loop kernel stored them. */
#include "codegen/kir_internal.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* the loads of a tree of f32 max prims, in *n (at most cap); 0 when anything else is in it */
static int max_tree_loads(const kir_expr *e, const kir_expr **ld, int *n, int cap) {
  if (e->kind == KE_LOAD) {
    if (*n >= cap) return 0;
    ld[(*n)++] = e;
    return 1;
  }
  return e->kind == KE_PRIM && e->op == PC_OP_max && e->n_args == 2 && max_tree_loads(e->args[0], ld, n, cap) &&
         max_tree_loads(e->args[1], ld, n, cap);
}

/* kernel k stores the least value of dt (f32: -inf; u8: 0) into buf and nothing else; its element count in *n */
static int stores_least(const kir_kernel *k, int buf, pc_dtype dt, int64_t *n) {
  if (k->kind != KK_LOOP || k->n_stores != 1 || k->stores[0].buf != buf || k->stores[0].red != KR_NONE) return 0;
  const kir_expr *v = k->stores[0].value;
  if (v->kind != KE_CONST || (dt == PC_f32 ? !(isinf(v->c) && v->c < 0) : v->ci != 0)) return 0;
  *n = 1;
  for (int l = 0; l < k->n_loops; l++) *n *= k->extent[l];
  return 1;
}

/* the map a pool call reads: buffer sb as [C][H][W]; the tree's loads read it at rows and columns (pt, pl) into a
 * PH x PW buffer, the map itself or a -inf padded copy that kernels [first, i) fill (first == i: none) */
typedef struct pool_map {
  int sb, first;
  int64_t C, H, W, PH, PW, pt, pl;
} pool_map;

/* Loop kernel i's loads read pb, a workspace buffer that kernels [first, i) fill with -inf around a copy of an
 * unpadded map (the pad prim of ONNX MaxPool). The call reads the map itself: the stride-2 loads of the tree and
 * the padded copy (ResNet-18's stem pool: 0.43 ms of kernels on 1 thread, where ONNX Runtime takes 0.085) are
 * gone. */
static int padded_map(const kir_program *p, int i, int pb, pc_dtype dt, pool_map *m) {
  if (p->bufs[pb].place != KP_WORKSPACE) return 0;
  int first = i, copy = -1;
  int64_t frame = 0, cnt;
  while (first > 0 && p->kernels[first - 1].kind == KK_LOOP && p->kernels[first - 1].n_stores == 1 &&
         p->kernels[first - 1].stores[0].buf == pb) {
    const kir_kernel *q = &p->kernels[first - 1];
    if (stores_least(q, pb, dt, &cnt)) frame += cnt;
    else if (copy < 0 && q->n_loops == 3 && q->stores[0].red == KR_NONE && q->stores[0].value->kind == KE_LOAD) copy = first - 1;
    else return 0;
    first--;
  }
  if (copy < 0) return 0;
  const kir_kernel *cp = &p->kernels[copy];
  const kir_map *dst = &cp->stores[0].map, *src = &cp->stores[0].value->map;
  int sb = cp->stores[0].value->buf;
  int64_t C = cp->extent[0], H = cp->extent[1], W = cp->extent[2], PW = dst->stride[1];
  if (p->bufs[sb].dtype != dt || dst->stride[2] != 1 || PW < W || dst->stride[0] % PW || src->offset ||
      src->stride[2] != 1 || src->stride[1] != W || src->stride[0] != H * W)
    return 0;
  int64_t PH = dst->stride[0] / PW, pt = dst->offset / PW, pl = dst->offset % PW;
  if (PH < H + pt || pl + W > PW || frame + C * H * W != C * PH * PW) return 0;
  *m = (pool_map){sb, first, C, H, W, PH, PW, pt, pl};
  return 1;
}

/* Loop kernel i's loads read the map pb in place (MaxPool without pads: SqueezeNet's 3x3/2 pools ran as scalar
 * loops at 5-10x ONNX Runtime's time). The row width is in the taps' offsets dy * W + dx: the least offset past
 * row 0's run 0, 1, .., kw - 1 (a one-row window does not show it and stays a loop). */
static int unpadded_map(const kir_program *p, const kir_kernel *k, const kir_expr *const *ld, int n, int pb,
                        pc_dtype dt, pool_map *m) {
  int64_t kw = 0, w = INT64_MAX, plane = ld[0]->map.stride[0];
  for (int found = 1; found;) {
    found = 0;
    for (int t = 0; t < n && !found; t++) found = ld[t]->map.offset == kw;
    kw += found;
  }
  for (int t = 0; t < n; t++)
    if (ld[t]->map.offset > kw && ld[t]->map.offset < w) w = ld[t]->map.offset;
  if (!kw || w == INT64_MAX || plane <= 0 || plane % w || p->bufs[pb].dtype != dt ||
      p->bufs[pb].nbytes / (int64_t)pc_dtype_size(dt) / plane < k->extent[0])
    return 0;
  *m = (pool_map){pb, 0, k->extent[0], plane / w, w, plane / w, w, 0, 0};
  return 1;
}

/* the loads of store s's value: a max tree over loads of dt values */
static int tree_of(const kir_program *p, const kir_store *s, pc_dtype dt, const kir_expr **ld, int *n) {
  *n = 0;
  return s->red == KR_NONE && p->bufs[s->buf].dtype == dt && max_tree_loads(s->value, ld, n, 64) && *n >= 2 &&
         p->bufs[ld[0]->buf].dtype == dt;
}

/* x's converts taken off while each holds every u8 value exactly (u8 -> i32 -> f32 as QLinearAdd's dequantize
 * writes it) */
static const kir_expr *exact_u8_converts(const kir_expr *x) {
  while (x->kind == KE_CONVERT && (x->dtype == PC_i16 || x->dtype == PC_i32 || x->dtype == PC_i64 ||
                                   x->dtype == PC_u16 || x->dtype == PC_u32 || x->dtype == PC_u64 || x->dtype == PC_f32))
    x = x->args[0];
  return x;
}

/* store s is (f32)(a max tree with loads ld) * c into an f32 buffer: the tree's dequantized copy; its scale in *c */
static int dequant_of(const kir_program *p, const kir_store *s, const kir_expr *const *ld, int n, float *c) {
  const kir_expr *v = s->value, *m[64];
  int nm = 0;
  if (s->red != KR_NONE || p->bufs[s->buf].dtype != PC_f32 || v->kind != KE_PRIM || v->op != PC_OP_mul ||
      v->dtype != PC_f32)
    return 0;
  for (int a = 0; a < 2; a++) {
    const kir_expr *cv = v->args[a], *k = v->args[1 - a];
    nm = 0;
    if (cv->kind != KE_CONVERT || cv->dtype != PC_f32 || k->kind != KE_CONST ||
        !max_tree_loads(exact_u8_converts(cv), m, &nm, 64) || nm != n)
      continue;
    int same = 1;
    for (int t = 0; t < n && same; t++) same = m[t]->buf == ld[t]->buf && !memcmp(&m[t]->map, &ld[t]->map, sizeof m[t]->map);
    if (same) return *c = (float)k->c, 1;
  }
  return 0;
}

/* Loop kernel i as a max pool call: the max of kh x kw loads at strides (sh, sw) over a padded buffer or the
 * map itself; f32, or u8 with the dequantized copy as a second store */
static int pool_call(kir_program *p, kir_touches *t, int i) {
  kir_kernel *k = &p->kernels[i];
  const kir_expr *ld[64];
  int n = 0, su = 0, sf = -1;
  float scale = 0;
  pc_dtype dt = PC_f32;
  if (k->kind != KK_LOOP || k->absorbed || k->n_loops != 3 || k->n_par != 3 || k->n_stores < 1 || k->n_stores > 2)
    return 0;
  if (!(k->n_stores == 1 && tree_of(p, &k->stores[0], PC_f32, ld, &n))) {
    dt = PC_u8;
    for (su = 0; su < k->n_stores && !tree_of(p, &k->stores[su], PC_u8, ld, &n); su++) {
    }
    if (su == k->n_stores) return 0;
    if (k->n_stores == 2 && !dequant_of(p, &k->stores[sf = 1 - su], ld, n, &scale)) return 0;
  }
  int pb = ld[0]->buf;
  pool_map pm;
  /* a padded copy something else reads too (a training step's max pool backward) stays, and the call reads it
   * as the map: its frame holds the padding's values */
  if (!padded_map(p, i, pb, dt, &pm) || kir_touched_outside(p, t, pb, pm.first, i) || kir_bufs_overlap(p, pb, pm.sb)) {
    if (!unpadded_map(p, k, ld, n, pb, dt, &pm)) return 0;
    pm.first = i;
  }
  int64_t C = pm.C, PH = pm.PH, PW = pm.PW;
  /* the tree: loads over the padded map at (c, oy * sh + dy, ox * sw + dx), every (dy, dx) once */
  const kir_map *sm = &k->stores[su].map;
  if (sf >= 0 && memcmp(&k->stores[sf].map, sm, sizeof *sm)) return 0;
  int64_t OH = k->extent[1], OW = k->extent[2], kh = 0, kw = 0;
  if (k->extent[0] != C || sm->offset || sm->stride[2] != 1 || sm->stride[1] != OW || sm->stride[0] != OH * OW) return 0;
  int64_t sh = ld[0]->map.stride[1] / PW, sw = ld[0]->map.stride[2];
  if (ld[0]->map.stride[1] % PW || sh < 1 || sw < 1) return 0;
  for (int t = 0; t < n; t++) {
    const kir_map *m = &ld[t]->map;
    if (ld[t]->buf != pb || m->stride[0] != PH * PW || m->stride[1] != sh * PW || m->stride[2] != sw || m->offset < 0)
      return 0;
    if (m->offset / PW + 1 > kh) kh = m->offset / PW + 1;
    if (m->offset % PW + 1 > kw) kw = m->offset % PW + 1;
  }
  if (kh * kw != n || (OH - 1) * sh + kh > PH || (OW - 1) * sw + kw > PW) return 0;
  unsigned char seen[64] = {0};
  for (int t = 0; t < n; t++) {
    int64_t o = ld[t]->map.offset, at = o / PW * kw + o % PW;
    if (seen[at]++) return 0;
  }
  /* stride 1 stays a loop kernel: LLVM's vectorized max tree beat the call's row and window passes on YOLO's
   * 5x5 pools (192 x 13 x 13, three of them: 0.27 ms against 0.97) */
  if (!primc_maxpool_row(pm.W, OW, kw, sw, pm.pl) || (sh == 1 && sw == 1)) return 0;
  /* the map must still hold its values at i */
  int out = k->stores[su].buf, outf = sf >= 0 ? k->stores[sf].buf : -1;
  if (kir_bufs_overlap(p, out, pm.sb) || (outf >= 0 && (kir_bufs_overlap(p, outf, pm.sb) || kir_bufs_overlap(p, outf, out))))
    return 0;
  kir_call call = dt == PC_u8 ? KC_maxpool_u8 : KC_maxpool;
  int np = kir_call_info(call)->n_params;
  int64_t *q = pc_alloc(p->g, sizeof(int64_t) * (size_t)np);
  if (!q) return 0;
  uint32_t bits;
  memcpy(&bits, &scale, sizeof bits);
  int64_t v[13] = {C, pm.H, pm.W, OH, OW, kh, kw, sh, sw, pm.pt, pm.pl, outf >= 0, bits};
  memcpy(q, v, sizeof(int64_t) * (size_t)np);
  for (int j = pm.first; j < i; j++) p->kernels[j].absorbed = 1;
  kir_touches_recount(t, k, -1);
  k->kind = KK_CALL;
  k->call = call;
  k->params = q;
  k->n_params = np;
  k->n_args = 2;
  k->args[0] = out;
  k->args[1] = pm.sb;
  if (outf >= 0) k->args[k->n_args++] = outf;
  kir_touches_recount(t, k, 1);
  return 1;
}

pc_status kir_pool_calls_rewrite(kir_program *p) {
  kir_touches t;
  if (kir_touches_build(p, &t) != PC_OK) return p->g->status;
  for (int i = 0; i < p->n_kernels; i++) pool_call(p, &t, i);
  kir_touches_free(&t);
  return PC_OK;
}
