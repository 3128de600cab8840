/* tests/fuzz/fuzz_text.c: libFuzzer harness: any text given to the IR text parser (with the aten:: hook) ends in a status or a graph that verifies and prints back to text that parses to the same text. */
#include "frontend/frontend.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char *print_graph(const pc_graph *g, size_t *len) {
  char *buf = NULL;
  FILE *f = open_memstream(&buf, len);
  if (!f) return NULL;
  pc_graph_print(g, f);
  fclose(f);
  return buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 1 << 16) return 0;
  pc_parse_opts po = {pc_aten_hook, NULL};
  pc_graph *g = pc_graph_parse((const char *)data, size, "fuzz.txt", &po);
  if (g && g->status == PC_OK && pc_verify(g) == PC_OK) {
    /* the printed graph parses back and prints the same (the format's round-trip promise) */
    size_t n1 = 0, n2 = 0;
    char *t1 = print_graph(g, &n1);
    pc_graph *h = t1 ? pc_graph_parse(t1, n1, "printed.txt", NULL) : NULL;
    if (t1 && (!h || h->status != PC_OK)) {
      fprintf(stderr, "printed graph does not parse: %s\n%s\n", h ? pc_error(h) : "no graph", t1);
      __builtin_trap();
    }
    char *t2 = h ? print_graph(h, &n2) : NULL;
    if (t1 && t2 && (n1 != n2 || memcmp(t1, t2, n1))) {
      fprintf(stderr, "round trip differs:\n%s\n---\n%s\n", t1, t2);
      __builtin_trap();
    }
    free(t1);
    free(t2);
    pc_graph_free(h);
  }
  pc_graph_free(g);
  return 0;
}
