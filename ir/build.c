/* ir/build.c: builder helpers that frontends use to write decompositions tersely. */
#include "ir/ir.h"

#include <math.h>
#include <string.h>

#define PC_DEF_UNARY(n) \
  pc_value *pc_##n(pc_graph *g, pc_value *x) { return pc_build(g, PC_OP_##n, &x, 1, NULL, 0); }
#define PC_DEF_BINARY(n)                                  \
  pc_value *pc_##n(pc_graph *g, pc_value *a, pc_value *b) { \
    pc_value *in[2] = {a, b};                             \
    return pc_build(g, PC_OP_##n, in, 2, NULL, 0);        \
  }
#define PC_DEF_TERNARY(n)                                              \
  pc_value *pc_##n(pc_graph *g, pc_value *a, pc_value *b, pc_value *c) { \
    pc_value *in[3] = {a, b, c};                                       \
    return pc_build(g, PC_OP_##n, in, 3, NULL, 0);                     \
  }
#define PC_DEF_OTHER(n)
#define PRIM(name, n_in, n_out, kind, operands, result, fuse, inl) PC_DEF_##kind(name)
#include "ir/prims.def"
#undef PRIM

pc_value *pc_where(pc_graph *g, pc_value *cond, pc_value *a, pc_value *b) {
  pc_value *in[3] = {cond, a, b};
  return pc_build(g, PC_OP_where, in, 3, NULL, 0);
}

pc_value *pc_convert(pc_graph *g, pc_value *x, pc_dtype to) {
  if (!x) return NULL;
  if (x->type.dtype == to) return x;
  pc_attr a = pc_a_dtype("dtype", to);
  return pc_build(g, PC_OP_convert_element_type, &x, 1, &a, 1);
}

pc_value *pc_broadcast_in_dim(pc_graph *g, pc_value *x, int rank, const int64_t *shape, const int64_t *dims) {
  if (!x) return NULL;
  pc_attr a[2] = {pc_a_ints("shape", shape, rank), pc_a_ints("dims", dims, x->type.rank)};
  return pc_build(g, PC_OP_broadcast_in_dim, &x, 1, a, 2);
}

pc_value *pc_broadcast_to(pc_graph *g, pc_value *x, int rank, const int64_t *shape) {
  if (!x) return NULL;
  int r = x->type.rank;
  if (r > rank) {
    pc_fail(g, PC_ERR_SHAPE, "cannot broadcast rank %d to rank %d", r, rank);
    return NULL;
  }
  int same = r == rank;
  for (int i = 0; same && i < r; i++) same = x->type.dims[i] == shape[i];
  if (same) return x;
  int64_t dims[PC_MAX_RANK];
  for (int i = 0; i < r; i++) dims[i] = rank - r + i;
  return pc_broadcast_in_dim(g, x, rank, shape, dims);
}

/* numpy rule for one dim pair; 0 when incompatible */
static int broadcast_dim(int64_t a, int64_t b, int64_t *out) {
  if (a == b || b == 1) *out = a;
  else if (a == 1) *out = b;
  else return 0;
  return 1;
}

/* a dim as a user wrote it: its size, or its symbol's name */
static const char *dim_text(const pc_graph *g, int64_t d, char *buf, size_t n) {
  if (PC_DIM_IS_SYM(d) && PC_DIM_SYM_ID(d) < g->n_syms && g->syms[PC_DIM_SYM_ID(d)].name)
    return g->syms[PC_DIM_SYM_ID(d)].name;
  snprintf(buf, n, PC_DIM_IS_SYM(d) ? "?" : "%lld", (long long)d);
  return buf;
}

int pc_broadcast_pair(pc_graph *g, pc_value **a, pc_value **b) {
  if (!*a || !*b || g->status != PC_OK) return 0;
  const pc_type *ta = &(*a)->type, *tb = &(*b)->type;
  int rank = ta->rank > tb->rank ? ta->rank : tb->rank;
  int64_t shape[PC_MAX_RANK];
  for (int i = 0; i < rank; i++) {
    int ia = i - (rank - ta->rank), ib = i - (rank - tb->rank);
    int64_t da = ia >= 0 ? ta->dims[ia] : 1, db = ib >= 0 ? tb->dims[ib] : 1;
    if (!broadcast_dim(da, db, &shape[i])) {
      char ba[32], bb[32];
      int sym = PC_DIM_IS_SYM(da) || PC_DIM_IS_SYM(db);
      pc_fail(g, PC_ERR_SHAPE, "%s%sshapes of rank %d and %d cannot broadcast (dim %d: %s vs %s)%s",
              g->origin ? g->origin : "", g->origin ? ": " : "", ta->rank, tb->rank, i, dim_text(g, da, ba, sizeof ba),
              dim_text(g, db, bb, sizeof bb), sym ? ": symbolic dims that may differ; fix them with --dim" : "");
      return 0;
    }
  }
  *a = pc_broadcast_to(g, *a, rank, shape);
  *b = pc_broadcast_to(g, *b, rank, shape);
  return *a && *b;
}

pc_value *pc_reshape(pc_graph *g, pc_value *x, int rank, const int64_t *shape) {
  if (!x) return NULL;
  int same = x->type.rank == rank;
  for (int i = 0; same && i < rank; i++) same = x->type.dims[i] == shape[i];
  if (same) return x;
  pc_attr a = pc_a_ints("shape", shape, rank);
  return pc_build(g, PC_OP_reshape, &x, 1, &a, 1);
}

pc_value *pc_transpose(pc_graph *g, pc_value *x, const int64_t *perm) {
  if (!x) return NULL;
  pc_attr a = pc_a_ints("perm", perm, x->type.rank);
  return pc_build(g, PC_OP_transpose, &x, 1, &a, 1);
}

pc_value *pc_slice(pc_graph *g, pc_value *x, const int64_t *start, const int64_t *limit, const int64_t *stride) {
  if (!x) return NULL;
  int r = x->type.rank;
  int64_t ones[PC_MAX_RANK];
  for (int i = 0; i < r; i++) ones[i] = 1;
  pc_attr a[3] = {pc_a_ints("start", start, r), pc_a_ints("limit", limit, r),
                  pc_a_ints("stride", stride ? stride : ones, r)};
  return pc_build(g, PC_OP_slice, &x, 1, a, 3);
}

pc_value *pc_concatenate(pc_graph *g, pc_value *const *xs, int n, int64_t axis) {
  if (n == 1) return xs[0];
  pc_attr a = pc_a_int("axis", axis);
  return pc_build(g, PC_OP_concatenate, xs, n, &a, 1);
}

pc_value *pc_reduce(pc_graph *g, pc_op op, pc_value *x, int n_axes, const int64_t *axes) {
  if (!x) return NULL;
  pc_attr a = pc_a_ints("axes", axes, n_axes);
  return pc_build(g, op, &x, 1, &a, 1);
}

pc_value *pc_conv(pc_graph *g, pc_value *x, pc_value *w, int ns, const int64_t *stride, const int64_t *pad_lo,
                  const int64_t *pad_hi, const int64_t *dilation, const int64_t *lhs_dilation, int64_t groups) {
  if (!x || !w) return NULL;
  pc_attr a[6] = {pc_a_ints("stride", stride, ns), pc_a_ints("pad_lo", pad_lo, ns), pc_a_ints("pad_hi", pad_hi, ns),
                  pc_a_ints("dilation", dilation, ns), pc_a_ints("lhs_dilation", lhs_dilation, ns), pc_a_int("groups", groups)};
  pc_value *in[2] = {x, w};
  return pc_build(g, PC_OP_conv, in, 2, a, 6);
}

pc_value *pc_dot_general(pc_graph *g, pc_value *a, pc_value *b, int n_contract, const int64_t *lhs_contract,
                         const int64_t *rhs_contract, int n_batch, const int64_t *lhs_batch, const int64_t *rhs_batch) {
  pc_value *in[2] = {a, b};
  pc_attr at[4] = {pc_a_ints("lhs_contract", lhs_contract, n_contract),
                   pc_a_ints("rhs_contract", rhs_contract, n_contract), pc_a_ints("lhs_batch", lhs_batch, n_batch),
                   pc_a_ints("rhs_batch", rhs_batch, n_batch)};
  return pc_build(g, PC_OP_dot_general, in, 2, at, 4);
}

/* v truncated toward zero and saturated to [lo, hi]; NaN gives 0 (the interpreter's conversion rule) */
static double to_int_range(double v, double lo, double hi) {
  if (isnan(v)) return 0;
  v = trunc(v);
  return v < lo ? lo : v > hi ? hi : v;
}

void pc_elem_store(pc_dtype dt, void *data, int64_t i, double v) {
  void *p = (char *)data + (size_t)i * pc_dtype_size(dt);
  switch (dt) { /* one row per storage type; a table would need a function per row anyway */
  case PC_f16: *(uint16_t *)p = pc_f32_to_f16((float)v); break;
  case PC_bf16: *(uint16_t *)p = pc_f32_to_bf16((float)v); break;
  case PC_f32: *(float *)p = (float)v; break;
  case PC_f64: *(double *)p = v; break;
  case PC_i8: *(int8_t *)p = (int8_t)to_int_range(v, INT8_MIN, INT8_MAX); break;
  case PC_i16: *(int16_t *)p = (int16_t)to_int_range(v, INT16_MIN, INT16_MAX); break;
  case PC_i32: *(int32_t *)p = (int32_t)to_int_range(v, INT32_MIN, INT32_MAX); break;
  /* 2^63 is not representable as int64: stop one double step below it */
  case PC_i64: *(int64_t *)p = (int64_t)to_int_range(v, -9223372036854775808.0, 9223372036854774784.0); break;
  case PC_u8: *(uint8_t *)p = (uint8_t)to_int_range(v, 0, UINT8_MAX); break;
  case PC_u16: *(uint16_t *)p = (uint16_t)to_int_range(v, 0, UINT16_MAX); break;
  case PC_u32: *(uint32_t *)p = (uint32_t)to_int_range(v, 0, UINT32_MAX); break;
  /* 2^64 is not representable as uint64: stop one double step below it */
  case PC_u64: *(uint64_t *)p = (uint64_t)to_int_range(v, 0, 18446744073709549568.0); break;
  case PC_bool: *(uint8_t *)p = v != 0; break;
  case PC_i4: *(int8_t *)p = (int8_t)to_int_range(v, -8, 7); break;
  case PC_u4: *(uint8_t *)p = (uint8_t)to_int_range(v, 0, 15); break;
  case PC_i2: *(int8_t *)p = (int8_t)to_int_range(v, -2, 1); break;
  case PC_u2: *(uint8_t *)p = (uint8_t)to_int_range(v, 0, 3); break;
  case PC_f8e4m3fn: case PC_f8e4m3fnuz: case PC_f8e5m2: case PC_f8e5m2fnuz: case PC_f4e2m1: case PC_f8e8m0: *(uint8_t *)p = pc_f32_to_f8(dt, (float)v, 0); break;
  case PC_c64: ((float *)p)[0] = (float)v; ((float *)p)[1] = 0; break;
  case PC_DTYPE_COUNT: break;
  }
}

pc_value *pc_scalar(pc_graph *g, pc_dtype dt, double v) {
  unsigned char buf[16];
  memset(buf, 0, sizeof buf);
  pc_elem_store(dt, buf, 0, v);
  return pc_const(g, pc_type_make(dt, 0, NULL), buf);
}

pc_value *pc_full(pc_graph *g, pc_dtype dt, double v, int rank, const int64_t *shape) {
  pc_value *s = pc_scalar(g, dt, v);
  if (rank == 0) return s;
  return pc_broadcast_in_dim(g, s, rank, shape, NULL);
}

pc_value *pc_full_like(pc_graph *g, double v, const pc_value *like) {
  if (!like) return NULL;
  return pc_full(g, like->type.dtype, v, like->type.rank, like->type.dims);
}
