/* codegen/kir_state.c: the kernels of a training step that updates its state in place, checked as built.
 * passes/state_order.c ordered the kernels; here every state's buffer must be read only before the one
 * kernel that writes its next value, or in that kernel at the element it stores: a loop kernel without
 * reduced loops, whose loads of the state use the store's own index map (it emits loads before stores). */
#include "codegen/kir_internal.h"

#include <string.h>

static int same_map(const kir_map *a, const kir_map *b, int n_loops) {
  if (a->offset != b->offset) return 0;
  for (int l = 0; l < n_loops; l++)
    if (a->stride[l] != b->stride[l]) return 0;
  return 1;
}

/* loads of buf in e: 0 none, 1 all at map m, 2 another element too */
static int loads_of(const kir_expr *e, int buf, const kir_map *m, int n_loops) {
  if (!e) return 0;
  if (e->kind == KE_LOAD) return e->buf != buf ? 0 : m && same_map(&e->map, m, n_loops) ? 1 : 2;
  int r = 0;
  for (int a = 0; a < e->n_args; a++) {
    int x = loads_of(e->args[a], buf, m, n_loops);
    r = x > r ? x : r;
  }
  return r;
}

/* 0 when kernel k does not read buf, 1 when only at map m (m NULL: never), 2 otherwise */
static int kernel_reads(const kir_kernel *k, int buf, const kir_map *m) {
  if (k->kind == KK_CALL) {
    for (int a = 0; a < k->n_args; a++)
      if (k->args[a] == buf) return 2;
    return 0;
  }
  int r = 0;
  for (int s = 0; s < k->n_stores; s++) {
    int x = loads_of(k->stores[s].value, buf, m, k->n_loops);
    r = x > r ? x : r;
  }
  return r;
}

static const kir_store *store_to(const kir_kernel *k, int buf) {
  for (int s = 0; k->kind == KK_LOOP && s < k->n_stores; s++)
    if (k->stores[s].buf == buf) return &k->stores[s];
  return NULL;
}

/* a call with buf among its buffers counts as writing it */
static int writes(const kir_kernel *k, int buf) {
  if (k->kind == KK_LOOP) return store_to(k, buf) != NULL;
  for (int a = 0; a < k->n_args; a++)
    if (k->args[a] == buf) return 1;
  return 0;
}

/* why the state in buffer bi with its next value in bo is not updated safely in place, NULL when it is */
static const char *check_one(const kir_program *p, int bi, int bo) {
  int writer = -1;
  for (int k = 0; k < p->n_kernels; k++) {
    const kir_kernel *K = &p->kernels[k];
    if (writer >= 0) {
      if (kernel_reads(K, bi, NULL) || writes(K, bo)) return "a kernel reads it after its next value is written over it";
      continue;
    }
    if (!writes(K, bo)) continue; /* a reader before the writer */
    writer = k;
    if (K->kind == KK_CALL && kernel_reads(K, bi, NULL)) return "the call writing its next value reads it";
    if (K->kind == KK_LOOP && K->n_loops != K->n_par) return "the kernel writing its next value reduces";
    if (K->kind == KK_LOOP && kernel_reads(K, bi, &store_to(K, bo)->map) > 1)
      return "the kernel writing its next value reads another element of it";
  }
  return writer < 0 ? "no kernel writes its next value" : NULL;
}

pc_status kir_check_state_in_place(kir_program *p) {
  pc_graph *g = p->g;
  for (int s = 0; g->state_in_place && s < g->n_state; s++) {
    const pc_value *in = g->inputs[g->n_inputs - g->n_state + s], *out = g->outputs[g->n_outputs - g->n_state + s];
    int bi = p->buf_of_value[in->id], bo = p->buf_of_value[out->id];
    const char *why = bi == bo ? NULL : check_one(p, bi, bo);
    if (why)
      return pc_fail(g, PC_ERR_INTERNAL, "training state %s, updated in place (passes/state_order.c): %s",
                     in->name ? in->name : "?", why);
  }
  return PC_OK;
}
