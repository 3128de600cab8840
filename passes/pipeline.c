/* passes/pipeline.c: the -O pipelines: cleanup passes to a fixpoint, then fusion and memory planning. */
#include "passes/passes.h"

#include <stdlib.h>
#include <string.h>

#define MAX_ROUNDS 8

typedef pc_status (*pass_fn)(pc_graph *g);

typedef struct pass_row {
  const char *name;
  pass_fn fn;
} pass_row;

static const pass_row all_passes[] = {
#define PC_PASS(name, desc) {#name, pc_pass_##name},
#include "passes/passes.def"
#undef PC_PASS
};

static pass_fn find_pass(const char *name) {
  for (size_t i = 0; i < sizeof all_passes / sizeof *all_passes; i++)
    if (strcmp(all_passes[i].name, name) == 0) return all_passes[i].fn;
  return NULL;
}

static int verify_each(void) {
#ifdef PRIMC_DEBUG
  return 1;
#else
  const char *e = getenv("PRIMC_VERIFY");
  return e && strcmp(e, "1") == 0;
#endif
}

static pc_status run_one(pc_graph *g, const char *name, const pc_pipeline_opts *o, int verify) {
  pass_fn fn = find_pass(name);
  if (!fn) return pc_fail(g, PC_ERR_INTERNAL, "no pass named %s", name);
  pc_status s = fn(g);
  if (s == PC_OK && verify) s = pc_verify(g);
  if (s != PC_OK) return s;
  if (o && o->print_to && (o->print_after_all || (o->print_after && strcmp(o->print_after, name) == 0))) {
    fprintf(o->print_to, "; after %s\n", name);
    s = pc_graph_print(g, o->print_to);
  }
  return s;
}

/* a fingerprint of the graph's structure: a cleanup round that changes nothing leaves it alone */
static uint64_t fingerprint(const pc_graph *g) {
  uint64_t h = 1469598103934665603u;
#define MIX(x) (h = (h ^ (uint64_t)(x)) * 1099511628211u)
  MIX(g->n_nodes);
  for (int i = 0; i < g->n_nodes; i++) {
    const pc_node *n = g->nodes[i];
    MIX(n->op);
    MIX(n->dead);
    for (int k = 0; k < n->n_in; k++) MIX((uintptr_t)n->in[k]);
  }
  for (int i = 0; i < g->n_outputs; i++) MIX((uintptr_t)g->outputs[i]);
#undef MIX
  return h;
}

static pc_status run_list(pc_graph *g, const char *const *names, const pc_pipeline_opts *o, int verify) {
  for (; *names; names++) {
    pc_status s = run_one(g, *names, o, verify);
    if (s != PC_OK) return s;
  }
  return PC_OK;
}

pc_status pc_pipeline_run(pc_graph *g, const pc_pipeline_opts *opts) {
  if (g->status != PC_OK) return g->status;
  static const char *const o0[] = {"dce", NULL};
  static const char *const o1[] = {"constfold", "dce", NULL};
  static const char *const o2[] = {"constfold", "simplify", "cse", "dce", NULL};
  int level = opts ? opts->opt_level : 2, verify = verify_each();
  const char *const *cleanup = level <= 0 ? o0 : level == 1 ? o1 : o2;
  int rounds = level >= 2 ? MAX_ROUNDS : 1;
  /* before the cleanup rounds, so constant folding converts narrow weights once */
  pc_status s = run_one(g, "qdq", opts, verify); /* before folding turns the dequantized weights into f32 */
  if (s == PC_OK) s = run_one(g, "autocast", opts, verify); /* its converts are widen's to leave alone */
  if (s == PC_OK) s = run_one(g, "widen", opts, verify);
  for (int r = 0; s == PC_OK && r < rounds; r++) {
    uint64_t before = fingerprint(g);
    s = run_list(g, cleanup, opts, verify);
    if (fingerprint(g) == before) break;
  }
  if (s == PC_OK && level >= 1) s = run_one(g, "remat", opts, verify); /* after CSE, which would merge its copies */
  if (s == PC_OK) s = run_one(g, opts && opts->unfused ? "unfuse" : level <= 0 ? "fuse0" : "fuse", opts, verify);
  if (s == PC_OK) s = run_one(g, "state_order", opts, verify); /* reorders kernels: before their liveness */
  if (s == PC_OK) s = run_one(g, "memplan", opts, 0);
  if (s == PC_OK) s = pc_verify(g);
  return s;
}
