/* codegen/kir_touches.c: which kernels read and write which buffers, for the kernel-IR rewrites that move a
 * kernel into another (kir_rewrites.c, kir_pool_calls.c): a count per buffer kept as they change kernels. */
#include "codegen/kir_internal.h"

#include <stdlib.h>

int kir_expr_reads(const kir_expr *e, int buf, int64_t n_cols, int *other_map) {
  int r = 0;
  if (e->kind == KE_LOAD && e->buf == buf) {
    r = 1;
    for (int k = 2; k < KIR_MAX_LOOPS; k++) *other_map |= e->map.stride[k] != 0;
    *other_map |= e->map.offset != 0 || e->map.stride[0] != n_cols || e->map.stride[1] != 1;
  }
  for (int i = 0; i < e->n_args; i++) r |= kir_expr_reads(e->args[i], buf, n_cols, other_map);
  return r;
}

int kir_kernel_touches(const kir_kernel *k, int buf) {
  int dummy = 0;
  for (int i = 0; k->kind == KK_CALL && i < k->n_args; i++)
    if (k->args[i] == buf) return 1;
  for (int s = 0; k->kind == KK_LOOP && s < k->n_stores; s++)
    if (k->stores[s].buf == buf || kir_expr_reads(k->stores[s].value, buf, 0, &dummy)) return 1;
  return 0;
}

static void count_expr(kir_touches *t, const kir_expr *e, int sign) {
  if (e->kind == KE_LOAD && t->seen[e->buf] != t->stamp) t->seen[e->buf] = t->stamp, t->n[e->buf] += sign;
  for (int i = 0; i < e->n_args; i++) count_expr(t, e->args[i], sign);
}

void kir_touches_recount(kir_touches *t, const kir_kernel *k, int sign) {
  t->stamp++;
  for (int i = 0; k->kind == KK_CALL && i < k->n_args; i++)
    if (t->seen[k->args[i]] != t->stamp) t->seen[k->args[i]] = t->stamp, t->n[k->args[i]] += sign;
  for (int s = 0; k->kind == KK_LOOP && s < k->n_stores; s++) {
    if (t->seen[k->stores[s].buf] != t->stamp) t->seen[k->stores[s].buf] = t->stamp, t->n[k->stores[s].buf] += sign;
    count_expr(t, k->stores[s].value, sign);
  }
}

pc_status kir_touches_build(kir_program *p, kir_touches *t) {
  t->n = calloc((size_t)p->n_bufs + 1, sizeof *t->n);
  t->seen = calloc((size_t)p->n_bufs + 1, sizeof *t->seen);
  t->stamp = 0;
  if (!t->n || !t->seen) return free(t->n), free(t->seen), pc_fail(p->g, PC_ERR_NOMEM, "out of memory");
  for (int j = 0; j < p->n_kernels; j++) kir_touches_recount(t, &p->kernels[j], 1);
  return PC_OK;
}

void kir_touches_free(kir_touches *t) { free(t->n), free(t->seen); }

int kir_touched_outside(const kir_program *p, const kir_touches *t, int buf, int first, int last) {
  int inside = 0;
  for (int j = first; j <= last && j < p->n_kernels; j++) inside += kir_kernel_touches(&p->kernels[j], buf);
  return t->n[buf] > inside;
}
