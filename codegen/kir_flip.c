/* codegen/kir_flip.c: a conv call whose weights a loop kernel has just flipped out of another conv's (the input
 * gradient's weights in a training step) reads that conv's weights itself, as its per-call packing goes. */
#include "codegen/kir_internal.h"

/*
 * The input gradient of a conv with weights W [C][O][kh][kw] is a conv with weights W' [O][C][kh][kw],
 * W'[o][c][r][s] = W[c][o][kh-1-r][kw-1-s]: a loop kernel (reshape, transpose, rev) writes W' every step, and
 * the conv call then packs W' for its row. For the direct lanes and Winograd rows the packing reads W in that order
 * itself (primc_conv_plan_pack_flipped, PRIMC_CONV_W_FLIPPED in the call's store word), so the loop kernel is
 * absorbed: ResNet-18's layer-4 flips (9.4 MB each way, 1.3-4.3 ms a step) no longer run. A renderer that runs
 * absorbed kernels anyway computes the same: the call reads W, which the flip leaves as it was.
 */

enum { FL_O, FL_C, FL_T, FL_PARTS };

/* whether loops of (step, extent) pairs tile [0, range) exactly, each index once */
static int tiles_range(int64_t (*loops)[2], int n, int64_t range) {
  for (int a = 1; a < n; a++) /* by step: at most a few loops */
    for (int b = a; b > 0 && loops[b][0] < loops[b - 1][0]; b--) {
      int64_t t0 = loops[b][0], t1 = loops[b][1];
      loops[b][0] = loops[b - 1][0], loops[b][1] = loops[b - 1][1];
      loops[b - 1][0] = t0, loops[b - 1][1] = t1;
    }
  int64_t next = 1;
  for (int a = 0; a < n; a++) {
    if (loops[a][0] != next) return 0;
    next *= loops[a][1];
  }
  return next == range;
}

/* whether loop kernel f writes dst[o][c][t] = src[c][o][T-1-t] for every o < O, c < C, t < T (flat indices, the
 * rows of the kernel's loops split or ordered in any way), reading nothing else */
static int is_flip(const kir_program *p, const kir_kernel *f, int dst, int *src, int64_t O, int64_t C, int64_t T) {
  if (f->kind != KK_LOOP || f->absorbed || f->has_epilogue || f->n_stores != 1 || f->n_par != f->n_loops) return 0;
  const kir_store *st = &f->stores[0];
  const kir_expr *v = st->value;
  if (st->buf != dst || st->red != KR_NONE || v->kind != KE_LOAD || v->dtype != PC_f32 || p->bufs[v->buf].dtype != PC_f32)
    return 0;
  if (st->map.offset != 0 || v->map.offset != T - 1) return 0;
  int64_t loops[FL_PARTS][KIR_MAX_LOOPS][2];
  int n[FL_PARTS] = {0};
  for (int l = 0; l < f->n_loops; l++) {
    int64_t d = st->map.stride[l], s = v->map.stride[l], e = f->extent[l];
    if (e == 1) continue;
    if (e < 1 || d <= 0) return 0;
    int part;
    if (d % (C * T) == 0) part = FL_O, d /= C * T, s -= d * T;
    else if (d % T == 0) part = FL_C, d /= T, s -= d * O * T;
    else part = FL_T, s += d;
    if (s != 0) return 0; /* the source steps as the flip says */
    loops[part][n[part]][0] = d, loops[part][n[part]][1] = e, n[part]++;
  }
  if (!tiles_range(loops[FL_O], n[FL_O], O) || !tiles_range(loops[FL_C], n[FL_C], C) ||
      !tiles_range(loops[FL_T], n[FL_T], T))
    return 0;
  *src = v->buf;
  return 1;
}

int kir_conv_read_flipped(kir_program *p, int i) {
  kir_kernel *k = &p->kernels[i];
  primc_conv2d c;
  int w = k->args[2], layout = (int)k->params[CONV_EPI_AT + CONV_EPI_ROW - 3];
  if (p->dyn || k->kind != KK_CALL || k->call != KC_conv || k->pair || !primc_conv2d_of_params(k->params, &c) ||
      c.groups != 1 || (layout != PRIMC_CONV_W_LANES && layout != PRIMC_CONV_W_WINOGRAD) ||
      k->params[CONV_EPI_AT + CONV_EPI_ROW - 1] >= 0 || p->bufs[w].place != KP_WORKSPACE)
    return 0;
  int64_t O = c.o, C = c.c, T = c.kh * c.kw;
  /* the kernel that last wrote the weights before the call */
  int f = i - 1;
  while (f >= 0 && !kir_kernel_touches(&p->kernels[f], w)) f--;
  int src;
  if (f < 0 || !is_flip(p, &p->kernels[f], w, &src, O, C, T) || p->bufs[src].place == KP_WORKSPACE ||
      p->bufs[src].nbytes < O * C * T * (int64_t)sizeof(float))
    return 0;
  /* the source as the flip read it until the call; the flipped weights read by the call alone */
  for (int j = f + 1; j < i; j++)
    for (int b = 0; b < p->n_bufs; b++)
      if (kir_kernel_touches(&p->kernels[j], b) && kir_bufs_overlap(p, b, src)) return 0;
  for (int j = 0; j < p->n_kernels; j++)
    if (j != f && j != i && kir_kernel_touches(&p->kernels[j], w)) return 0;
  k->args[2] = src;
  k->params[CONV_EPI_AT + PRIMC_CONV_EPI_STORE] |= PRIMC_CONV_W_FLIPPED;
  p->kernels[f].absorbed = 1;
  return 1;
}
