/* tests/fuzz/fuzz_grad.c: libFuzzer harness: a text graph that parses and verifies goes through reverse mode
 * (pc_grad) and, parsed again, forward mode (pc_jvp); each ends in a status or a graph that verifies. A model
 * compiled with --grad or --train reaches the transforms with whatever graph its bytes import to. */
#include "frontend/frontend.h"
#include "passes/passes.h"

#include <stdint.h>
#include <stdio.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void transform(const uint8_t *data, size_t size, int forward) {
  pc_graph *g = pc_graph_parse((const char *)data, size, "fuzz.txt", NULL);
  /* bounded: each node's rule builds a few more, and the harness should find bugs, not time out */
  if (g && g->status == PC_OK && g->n_nodes <= 400 && pc_verify(g) == PC_OK &&
      (forward ? pc_jvp(g, NULL) : pc_grad(g, NULL)) == PC_OK && pc_verify(g) != PC_OK) {
    fprintf(stderr, "the %s graph does not verify: %s\n", forward ? "jvp" : "grad", pc_error(g));
    __builtin_trap();
  }
  pc_graph_free(g);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 1 << 14) return 0;
  transform(data, size, 0);
  transform(data, size, 1);
  return 0;
}
