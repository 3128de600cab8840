/* tests/unit/test_range.c: integer value ranges (ir/range.c), on graphs in the text format, as codegen uses them to
 * prove a quantized dot's operands small enough for the exact bf16 path. */
#include "ir/ir.h"
#include "tests/test.h"

#include <string.h>

static pc_graph *parse(const char *text) { return pc_graph_parse(text, strlen(text), "range", NULL); }

/* the range of the value named name in g; 0 when g failed or there is none */
static int range_of(pc_graph *g, const char *name, int64_t *lo, int64_t *hi) {
  for (int i = 0; g && i < g->n_values; i++)
    if (g->values[i] && g->values[i]->name && !strcmp(g->values[i]->name, name))
      return pc_value_int_range(g->values[i], lo, hi);
  return 0;
}

PC_TEST(range_quantized_operands) {
  pc_graph *g = parse("graph(%a : u8[4,8], %zp : u8[]):\n"
                      "  %w : i8[8,3] = constant(value=[-5, 7, 0, 1, 2, 3, -100, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, "
                      "15, 16, 17, 18, 19, 120])\n"
                      "  %ai : i32[4,8] = convert_element_type(%a, dtype=i32)\n"
                      "  %zi : i32[] = convert_element_type(%zp, dtype=i32)\n"
                      "  %zb : i32[4,8] = broadcast_in_dim(%zi, shape=[4,8], dims=[])\n"
                      "  %d : i32[4,8] = sub(%ai, %zb)\n"
                      "  %t : i32[8,4] = transpose(%d, perm=[1,0])\n"
                      "  %wi : i32[8,3] = convert_element_type(%w, dtype=i32)\n"
                      "  %s : i32[4,8] = add(%d, %d)\n"
                      "  %m : i32[4,8] = mul(%d, %d)\n"
                      "  %n : u8[4,8] = convert_element_type(%d, dtype=u8)\n"
                      "  return (%t, %wi, %s, %m, %n)\n");
  CHECK_MSG(g && g->status == PC_OK, "%s", g ? pc_error(g) : "no graph");
  int64_t lo = 0, hi = 0;
  CHECK(range_of(g, "d", &lo, &hi) && lo == -255 && hi == 255); /* u8 minus a u8 zero point */
  CHECK(range_of(g, "t", &lo, &hi) && lo == -255 && hi == 255); /* movement keeps it */
  CHECK(range_of(g, "wi", &lo, &hi) && lo == -100 && hi == 120); /* a constant's data, through the convert */
  CHECK(range_of(g, "s", &lo, &hi) && lo == -510 && hi == 510);
  CHECK(range_of(g, "m", &lo, &hi) && lo == INT32_MIN && hi == INT32_MAX); /* mul: not followed, the dtype's */
  CHECK(range_of(g, "n", &lo, &hi) && lo == 0 && hi == 255); /* a wrapping convert: the dtype's range */
  CHECK(range_of(g, "a", &lo, &hi) && lo == 0 && hi == 255); /* a graph input: its dtype */
  pc_graph_free(g);
  g = parse("graph(%x : f32[2]):\n  %y : i64[2] = convert_element_type(%x, dtype=i64)\n  return (%y)\n");
  CHECK(g && g->status == PC_OK && !range_of(g, "x", &lo, &hi) && !range_of(g, "y", &lo, &hi)); /* float, i64 */
  pc_graph_free(g);
}
