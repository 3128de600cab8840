/* tests/unit/test_graph.c: graph construction, arena, attributes, errors and half-precision conversion. */
#include "ir/ir.h"
#include "tests/test.h"

#include <string.h>

PC_TEST(dtype_table) {
  pc_dtype t;
  CHECK(pc_dtype_from_name("bf16", &t) && t == PC_bf16);
  CHECK(!pc_dtype_from_name("f12", &t));
  CHECK_INT(pc_dtype_size(PC_c64), 8);
  CHECK_STR(pc_dtype_name(PC_i64), "i64");
  CHECK(pc_dtype_is_float(PC_f16) && !pc_dtype_is_float(PC_i32));
  CHECK(pc_dtype_is_int(PC_u8) && !pc_dtype_is_int(PC_bool));
}

PC_TEST(prim_table) {
  pc_op op;
  CHECK(pc_op_from_name("dot_general", &op) && op == PC_OP_dot_general);
  CHECK(!pc_op_from_name("relu", &op));
  CHECK_INT(pc_prim(PC_OP_sort)->n_out, 2);
  CHECK(pc_op_is_elementwise(PC_OP_where) && pc_op_is_elementwise(PC_OP_exp));
  CHECK(!pc_op_is_elementwise(PC_OP_reduce_sum));
}

/* the names of the prims of fuse kind k (and inline or not, inl >= 0), in table order */
static void class_names(pc_fuse_kind k, int inl, char *buf, size_t n) {
  buf[0] = 0;
  for (int i = 0; i < PC_OP_COUNT; i++) {
    if (pc_op_fuse_kind((pc_op)i) != k || (inl >= 0 && pc_op_is_inline((pc_op)i) != inl)) continue;
    if (buf[0]) strncat(buf, " ", n - strlen(buf) - 1);
    strncat(buf, pc_prim((pc_op)i)->name, n - strlen(buf) - 1);
  }
}

/* prims.def's fuse and inline columns agree with the prim kinds, and each class holds what fusion,
 * memplan and codegen were written for (a new prim must be placed on purpose) */
PC_TEST(prim_table_op_classes) {
  for (int i = 0; i < PC_OP_COUNT; i++) {
    pc_op op = (pc_op)i;
    const pc_prim_info *p = pc_prim(op);
    pc_fuse_kind k = pc_op_fuse_kind(op);
    CHECK_MSG(k >= PC_FUSE_CONST && k <= PC_FUSE_ALONE, "%s: fuse kind %d", p->name, (int)k);
    CHECK_MSG(p->fuse == k && p->inl == pc_op_is_inline(op), "%s: accessors disagree with the row", p->name);
    if (pc_op_is_elementwise(op)) CHECK_MSG(k == PC_FUSE_ELEM, "%s is elementwise but not ELEM", p->name);
    if (k == PC_FUSE_ELEM)
      CHECK_MSG(pc_op_is_elementwise(op) || op == PC_OP_convert_element_type, "%s: ELEM but not elementwise", p->name);
    if (k == PC_FUSE_ELEM) CHECK_MSG(pc_op_is_inline(op), "%s: ELEM must be INLINE", p->name);
    if (pc_op_is_inline(op)) CHECK_MSG(k == PC_FUSE_ELEM || k == PC_FUSE_MOVE, "%s: INLINE but not ELEM/MOVE", p->name);
    if (pc_op_is_inline(op)) CHECK_MSG(p->n_out == 1, "%s: INLINE with %d results", p->name, p->n_out);
  }
  CHECK(!pc_op_is_inline(PC_OP_COUNT) && pc_op_fuse_kind(PC_OP_COUNT) == PC_FUSE_ALONE);
  char buf[512];
  class_names(PC_FUSE_MOVE, 1, buf, sizeof buf);
  CHECK_STR(buf, "broadcast_in_dim reshape transpose slice rev iota");
  class_names(PC_FUSE_MOVE, 0, buf, sizeof buf);
  CHECK_STR(buf, "pad concatenate");
  class_names(PC_FUSE_RED, -1, buf, sizeof buf);
  CHECK_STR(buf, "reduce_sum reduce_prod reduce_max reduce_min argmax argmin");
  class_names(PC_FUSE_CONTRACT, -1, buf, sizeof buf);
  CHECK_STR(buf, "dot_general conv");
  class_names(PC_FUSE_ALONE, -1, buf, sizeof buf);
  CHECK_STR(buf, "bitcast gather scatter cumsum fft sort topk random nonzero");
  class_names(PC_FUSE_CONST, -1, buf, sizeof buf);
  CHECK_STR(buf, "constant");
}

/* known IEEE binary16 encodings (from the IEEE 754 tables) */
PC_TEST(f16_conversion) {
  CHECK_INT(pc_f32_to_f16(1.0f), 0x3c00);
  CHECK_INT(pc_f32_to_f16(-2.0f), 0xc000);
  CHECK_INT(pc_f32_to_f16(65504.0f), 0x7bff);
  CHECK_INT(pc_f32_to_f16(65520.0f), 0x7c00);        /* rounds up to inf */
  CHECK_INT(pc_f32_to_f16(5.960464477539063e-08f), 0x0001); /* smallest subnormal */
  CHECK_INT(pc_f32_to_f16(0.333333343f), 0x3555);
  CHECK_INT(pc_f32_to_f16(1.0009765625f), 0x3c01);
  CHECK_INT(pc_f32_to_f16(1.00048828125f), 0x3c00);  /* tie to even */
  CHECK(pc_f16_to_f32(0x7e00) != pc_f16_to_f32(0x7e00)); /* nan */
  CHECK(pc_f16_to_f32(0x0001) == 5.960464477539063e-08f);
  CHECK(pc_f16_to_f32(0x3555) == 0.333251953125f);
  for (unsigned h = 0; h < 0x7c00; h++) /* every finite positive half round-trips */
    if (pc_f32_to_f16(pc_f16_to_f32((uint16_t)h)) != h) {
      CHECK_MSG(0, "half 0x%04x does not round-trip", h);
      break;
    }
}

PC_TEST(bf16_conversion) {
  CHECK_INT(pc_f32_to_bf16(1.0f), 0x3f80);
  CHECK_INT(pc_f32_to_bf16(3.140625f), 0x4049);
  CHECK(pc_bf16_to_f32(0x4049) == 3.140625f);
  CHECK_INT(pc_f32_to_bf16(1.00390625f), 0x3f80); /* tie to even */
}

PC_TEST(graph_build_and_error) {
  pc_graph *g = pc_graph_new();
  int64_t d[2] = {2, 3};
  pc_value *x = pc_input_add(g, "x", pc_type_make(PC_f32, 2, d));
  CHECK(x != NULL && x->id == 0);
  int s = pc_sym_add(g, "batch", 1, 64);
  CHECK_INT(pc_sym_add(g, "batch", 1, 64), s);
  CHECK_INT(pc_sym_find(g, "nope"), -1);
  pc_fail(g, PC_ERR_SHAPE, "first %d", 1);
  pc_fail(g, PC_ERR_TYPE, "second");
  CHECK_INT(g->status, PC_ERR_SHAPE);
  CHECK_STR(pc_error(g), "first 1");
  CHECK(pc_input_add(g, "y", pc_type_make(PC_f32, 2, d)) == NULL); /* sticky */
  pc_graph_free(g);
}

PC_TEST(arena_alignment_and_big_blocks) {
  pc_graph *g = pc_graph_new();
  for (int i = 1; i < 200; i++) {
    void *p = pc_alloc(g, (size_t)i * 37);
    if (!CHECK(p && ((uintptr_t)p % 64) == 0)) break;
  }
  unsigned char *big = pc_alloc(g, 1 << 20);
  CHECK(big && big[12345] == 0);
  CHECK_STR(pc_strfmt(g, "%s-%d", "a", 7), "a-7");
  pc_graph_free(g);
}

/* scalars for integer dtypes saturate like the interpreter's float->int conversion */
PC_TEST(scalar_constants_saturate) {
  pc_graph *g = pc_graph_new();
  pc_value *a = pc_scalar(g, PC_i8, 300.7), *b = pc_scalar(g, PC_u8, -5), *c = pc_scalar(g, PC_i64, 1e30);
  pc_value *d = pc_scalar(g, PC_i32, NAN), *e = pc_scalar(g, PC_i16, -12.9);
  CHECK(a && b && c && d && e);
  if (a && b && c && d && e) {
    CHECK_INT(*(const int8_t *)pc_const_data(a), 127);
    CHECK_INT(*(const uint8_t *)pc_const_data(b), 0);
    CHECK(*(const int64_t *)pc_const_data(c) > 9223372036854000000LL);
    CHECK_INT(*(const int32_t *)pc_const_data(d), 0);
    CHECK_INT(*(const int16_t *)pc_const_data(e), -12);
  }
  pc_graph_free(g);
}
