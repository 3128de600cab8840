/* tests/fuzz/fuzz_onnx.c: libFuzzer harness: any byte string given to the ONNX importer ends in a status, never a crash. */
#include "frontend/frontend.h"

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* no model directory: external data must be refused, never read */
  pc_graph *g = pc_onnx_load_buffer(data, size, NULL, NULL);
  pc_graph_free(g);
  return 0;
}
