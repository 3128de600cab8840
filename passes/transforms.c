/* passes/transforms.c: the graph transforms a compile asks for, applied in one order for every caller (the CLI,
 * the C API, the run-time dims' rebuilds): vmap first (so the others take the batched model: its gradient is
 * summed over the batch), then grad, then jvp (the jvp of the gradient: Hessian-vector products); or a
 * training step alone. */
#include "passes/passes.h"

#include <stdlib.h>
#include <string.h>

pc_status pc_apply_transforms(pc_graph *g, const pc_transforms *t) {
  if (g->status || !t) return g->status;
  if (t->train && (t->grad || t->jvp || t->vmap_batch))
    return pc_fail(g, PC_ERR_ATTR, "a training step takes no grad, jvp or vmap transform");
  if (t->train) return pc_train(g, &t->train_opts);
  if (t->vmap_batch) {
    /* "x,y": the inputs to batch */
    char *names = strdup(t->vmap_inputs ? t->vmap_inputs : "");
    const char **list = calloc(strlen(names ? names : "") + 1, sizeof *list);
    if (!names || !list) {
      free(names), free(list);
      return pc_fail(g, PC_ERR_NOMEM, "out of memory");
    }
    int n = 0;
    char *save = NULL;
    for (char *s = strtok_r(names, ",", &save); s; s = strtok_r(NULL, ",", &save)) list[n++] = s;
    pc_vmap_opts vo = {list, n, t->vmap_batch};
    pc_vmap(g, &vo);
    free(names), free(list);
  }
  if (t->grad) pc_grad(g, NULL);
  if (t->jvp) pc_jvp(g, NULL);
  return g->status;
}
