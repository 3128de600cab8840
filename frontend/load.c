/* frontend/load.c: picks the importer for a model file by its extension. */
#include "frontend/frontend.h"

#include <string.h>

static int has_suffix(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

pc_graph *pc_model_load(const char *path, const pc_import_opts *opts) {
  if (has_suffix(path, ".onnx")) return pc_onnx_load(path, opts);
  return pc_text_load(path, opts);
}
