/* frontend/text.c: loads a TorchScript-like text graph (aten:: ops decomposed) with optional safetensors weights. */
#include "frontend/frontend.h"
#include "runtime/primc_file.h"

#include <stdlib.h>
#include <string.h>

static char *read_text(const char *path, size_t *len, char *why, size_t whylen) {
  FILE *f = primc_file_open(path, NULL, why, whylen); /* refuses FIFOs, directories, devices */
  if (!f) return NULL;
  snprintf(why, whylen, "%s: cannot read", path);
  char *buf = NULL;
  long n = -1;
  if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) buf = malloc((size_t)n + 1);
  if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
    free(buf);
    buf = NULL;
  }
  fclose(f);
  if (buf) {
    buf[n] = 0;
    *len = (size_t)n;
  }
  return buf;
}

/* --dim bindings narrow the bounds of the graph's symbols; a binding to an unknown symbol is an error */
static pc_status bind_dims(pc_graph *g, const pc_import_opts *opts) {
  for (int i = 0; opts && i < opts->n_dims && g->status == PC_OK; i++) {
    const pc_dim_binding *b = &opts->dims[i];
    int id = b->name ? pc_sym_find(g, b->name) : -1;
    if (id < 0) return pc_fail(g, PC_ERR_ATTR, "--dim %s: the graph has no such symbolic dim", b->name ? b->name : "?");
    if (b->lo < 0 || b->hi < b->lo) return pc_fail(g, PC_ERR_RANGE, "--dim %s: bad range", b->name);
    g->syms[id].lo = b->lo;
    g->syms[id].hi = b->hi;
  }
  return g->status;
}

pc_graph *pc_text_load(const char *path, const pc_import_opts *opts) {
  size_t len = 0;
  char why[4200];
  char *text = read_text(path, &len, why, sizeof why);
  if (!text) {
    pc_graph *g = pc_graph_new();
    if (g) pc_fail(g, PC_ERR_IO, "%s", why);
    return g;
  }
  if (opts && opts->n_consts) {
    pc_graph *g = pc_graph_new();
    if (g) pc_fail(g, PC_ERR_UNSUPPORTED, "%s: --const is for ONNX models (a text graph can write the constant)", path);
    return g;
  }
  pc_parse_opts po = {pc_aten_hook, NULL};
  pc_graph *g = pc_graph_parse(text, len, path, &po);
  free(text);
  if (!g || g->status != PC_OK) return g;
  if (bind_dims(g, opts) == PC_OK && opts && opts->weights_path) pc_safetensors_bind(g, opts->weights_path);
  return g;
}
