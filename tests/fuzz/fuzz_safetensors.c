/* tests/fuzz/fuzz_safetensors.c: libFuzzer harness: any bytes given to the safetensors reader, binding the keyed constants of a small text graph, end in a status, never a crash. */
#include "frontend/frontend.h"

#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* constants of several dtypes, ranks and sizes (an empty one, a scalar) for the file to match or not */
static const char graph_text[] = "graph(%x : f32[2,3]):\n"
                                 "  %a : f32[2,3] = constant(key=\"a\")\n"
                                 "  %b : i64[4] = constant(key=\"b\")\n"
                                 "  %c : f16[1,1,2] = constant(key=\"c\")\n"
                                 "  %d : u8[0] = constant(key=\"d\")\n"
                                 "  %e : f64[] = constant(key=\"e\")\n"
                                 "  %y = add(%x, %a)\n"
                                 "  return (%y, %b, %c, %d, %e)\n";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  pc_parse_opts po = {pc_aten_hook, NULL};
  pc_graph *g = pc_graph_parse(graph_text, strlen(graph_text), "fuzz.txt", &po);
  if (!g || g->status != PC_OK) __builtin_trap(); /* the fixed graph must parse */
  pc_safetensors_bind_buffer(g, data, size, "fuzz.safetensors");
  pc_graph_free(g);
  return 0;
}
