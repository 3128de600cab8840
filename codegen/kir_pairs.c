/* codegen/kir_pairs.c: --autocast bf16's maps between convs held as bf16 channel pairs (runtime/primc_rt.h's layout) where every kernel that touches one is a conv that reads or writes it so in place. */
#include "codegen/kir_internal.h"

#include <stdlib.h>

/*
 * A map one bf16 conv writes and only bf16 1x1s read (as x; those of stride 1 also as the residual their epilogues
 * add) is stored as bf16 pairs in the GEMM's panel layout: the writer's epilogue rounds its results into it, a 1x1
 * of stride 1 reads it without packing (a 256 -> 64 1x1 at 56x56 spent half its time packing its f32 input into bf16
 * panels: 0.30 -> 0.13 ms), one of stride 2 copies the words of its even pixels onto its plane, and half the bytes
 * move. A map any other kernel touches stays f32, and so does one a 3x3 reads: it copies all of x onto padded phase
 * planes either way (from pairs no faster than from f32), and its epilogue adds a residual of pairs 5-7% slower than
 * an f32 one (bench/precision.md).
 */

/* the conv call k as one whose maps may be pairs: f32, its epilogue fused without an activation, planned on the
 * bf16 row, and run in place on pairs here (primc_conv_pairs_in_place) */
static int pairs_conv(const kir_kernel *k, primc_conv2d *c) {
  if (k->kind != KK_CALL || k->call != KC_conv || k->pair || k->absorbed || k->params[0] != PC_f32) return 0;
  const int64_t *w = k->params + CONV_EPI_AT;
  if (!w[0] || w[6] != PRIMC_ACT_NONE || w[CONV_EPI_ROW] - 1 != PRIMC_CONV_ROW_BF16 || k->n_args < 7) return 0;
  return primc_conv2d_of_params(k->params, c) && primc_conv_pairs_in_place(c);
}

static void expr_bufs(const kir_expr *e, void (*fn)(void *ctx, int buf), void *ctx) {
  if (e->kind == KE_LOAD) fn(ctx, e->buf);
  for (int i = 0; i < e->n_args; i++) expr_bufs(e->args[i], fn, ctx);
}

/* every buffer kernel k reads or writes into fn (some more than once) */
static void each_buf(const kir_kernel *k, void (*fn)(void *ctx, int buf), void *ctx) {
  for (int i = 0; k->kind == KK_CALL && i < k->n_args; i++) fn(ctx, k->args[i]);
  for (int s = 0; k->kind == KK_LOOP && s < k->n_stores; s++) {
    fn(ctx, k->stores[s].buf);
    expr_bufs(k->stores[s].value, fn, ctx);
  }
}

static void mark(void *ctx, int buf) { ((char *)ctx)[buf] = 1; }

typedef struct overlap_ctx {
  const kir_program *p;
  int b, hit;
} overlap_ctx;

static void overlaps(void *ctx, int buf) {
  overlap_ctx *o = ctx;
  if (buf != o->b && kir_bufs_overlap(o->p, buf, o->b)) o->hit = 1;
}

pc_status kir_conv_pairs(kir_program *p) {
  if (p->gpu_sm || p->sizes_vary || p->dyn || p->cross_isa || !p->n_bufs) return PC_OK;
  int nb = p->n_bufs, nk = p->n_kernels;
  int *writer = malloc(sizeof *writer * (size_t)nb), *last = malloc(sizeof *last * (size_t)nb);
  char *bad = calloc((size_t)nb, 1), *in_call = calloc((size_t)nk + 1, 1);
  if (!writer || !last || !bad || !in_call) {
    free(writer), free(last), free(bad), free(in_call);
    return pc_fail(p->g, PC_ERR_NOMEM, "out of memory");
  }
  for (int b = 0; b < nb; b++) writer[b] = -1, last[b] = -1;
  for (int i = 0; i < nk; i++) { /* a conv's epilogue kernel runs inside the call: the call's args say what it touches */
    const kir_kernel *k = &p->kernels[i];
    if (k->kind == KK_CALL && k->call == KC_conv && k->epi_in_call && k->epilogue > i && k->epilogue < nk)
      in_call[k->epilogue] = 1;
  }
  for (int i = 0; i < nk; i++) {
    const kir_kernel *k = &p->kernels[i];
    if (in_call[i]) continue;
    primc_conv2d c;
    if (!pairs_conv(k, &c)) {
      each_buf(k, mark, bad);
      continue;
    }
    const int64_t *w = k->params + CONV_EPI_AT;
    /* a 1x1 of stride 1 without padding runs on the GEMM, its x the B panels; one of stride 2 (a downsample) copies
     * the even pixels of the even rows of x onto a plane, from pairs about as fast as from f32 (the in-place convs of
     * several taps copy all of x onto their planes, slower from pairs) */
    int one = c.kh == 1 && c.kw == 1 && !c.pad_t && !c.pad_l && !c.pad_b && !c.pad_r;
    int s1 = one && c.stride_h == 1 && c.stride_w == 1;
    primc_conv2d cy = c; /* whether it writes pairs in place too (a 1x1 past one K block reads them only) */
    cy.store = PRIMC_CONV_Y_PAIRS;
    int y_ok = primc_conv_pairs_in_place(&cy);
    for (int j = 0; j < k->n_args; j++) {
      int a = k->args[j];
      if (j == 4 && !y_ok) bad[a] = 1;
      else if (j == 4) writer[a] = writer[a] == -1 ? i : -2; /* y: a second writer rules it out */
      else if ((j == 1 && one) || (j == 6 && w[3] && s1)) last[a] = i; /* a 1x1's x, a stride-1 1x1's residual */
      else if (!((j == 5 && w[2] < 0) || (j == 6 && !w[3]))) bad[a] = 1; /* the absent bias and residual name y */
    }
  }
  for (int b = 0; b < nb; b++) {
    const kir_buf *bf = &p->bufs[b];
    if (bad[b] || writer[b] < 0 || last[b] <= writer[b] || bf->place != KP_WORKSPACE) continue;
    primc_conv2d c;
    int64_t oh, ow;
    kir_kernel *wk = &p->kernels[writer[b]];
    if (!primc_conv2d_of_params(wk->params, &c) || !primc_conv2d_out_hw(&c, &oh, &ow) ||
        primc_conv_pairs_bytes(c.n, c.o, oh, ow) > bf->nbytes)
      continue;
    /* no other buffer over b's bytes is touched while b lives (the convs' own overlaps the executor handles) */
    overlap_ctx o = {p, b, 0};
    for (int i = writer[b]; i <= last[b] && !o.hit; i++) {
      const kir_kernel *k = &p->kernels[i];
      if (!in_call[i] && !(k->kind == KK_CALL && k->call == KC_conv && kir_kernel_touches(k, b))) each_buf(k, overlaps, &o);
    }
    if (o.hit) continue;
    wk->params[CONV_EPI_AT + PRIMC_CONV_EPI_STORE] |= PRIMC_CONV_Y_PAIRS;
    for (int i = writer[b] + 1; i <= last[b]; i++) {
      kir_kernel *k = &p->kernels[i];
      if (in_call[i] || k->kind != KK_CALL || k->call != KC_conv) continue;
      if (k->args[1] == b) k->params[CONV_EPI_AT + PRIMC_CONV_EPI_STORE] |= PRIMC_CONV_X_PAIRS;
      if (k->params[CONV_EPI_AT + 3] && k->args[6] == b) k->params[CONV_EPI_AT + PRIMC_CONV_EPI_STORE] |= PRIMC_CONV_RES_PAIRS;
    }
  }
  free(writer), free(last), free(bad), free(in_call);
  return PC_OK;
}
