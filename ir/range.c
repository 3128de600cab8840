/* ir/range.c: integer value ranges by interval arithmetic over a value's producers, for kernels that are exact only on small integers. */
#include "ir/ir.h"

#include <string.h>

#define RANGE_DEPTH 16 /* producers followed before giving up */

/* the range every value of integer dtype t can take; 0 for a dtype wider than 32 bits */
static int dtype_range(pc_dtype t, int64_t *lo, int64_t *hi) {
  if (!pc_dtype_is_int(t)) return 0;
  int bits = pc_dtype_subbyte_bits(t) ? pc_dtype_subbyte_bits(t) : (int)pc_dtype_size(t) * 8;
  if (bits > 32) return 0;
  *lo = pc_dtype_is_signed(t) ? -((int64_t)1 << (bits - 1)) : 0;
  *hi = pc_dtype_is_signed(t) ? ((int64_t)1 << (bits - 1)) - 1 : ((int64_t)1 << bits) - 1;
  return 1;
}

/* min and max of an integer constant's data (at most 32 bits wide) */
static int const_range(const pc_node *n, int64_t *lo, int64_t *hi) {
  pc_dtype t = n->out[0]->type.dtype;
  int64_t count = pc_type_numel(&n->out[0]->type);
  size_t sz = pc_dtype_size(t);
  if (!pc_dtype_is_int(t) || pc_dtype_subbyte_bits(t) || sz > 4 || count < 1 || !n->data) return 0;
  int sgn = pc_dtype_is_signed(t);
  for (int64_t i = 0; i < count; i++) {
    const unsigned char *p = (const unsigned char *)n->data + (size_t)i * sz;
    int64_t v;
    if (sz == 1) v = sgn ? (int64_t)(int8_t)p[0] : (int64_t)p[0];
    else if (sz == 2) {
      uint16_t u;
      memcpy(&u, p, 2);
      v = sgn ? (int64_t)(int16_t)u : (int64_t)u;
    } else {
      uint32_t u;
      memcpy(&u, p, 4);
      v = sgn ? (int64_t)(int32_t)u : (int64_t)u;
    }
    if (i == 0 || v < *lo) *lo = v;
    if (i == 0 || v > *hi) *hi = v;
  }
  return 1;
}

static int range_of(const pc_value *v, int depth, int64_t *lo, int64_t *hi) {
  int64_t l0, h0, l1, h1, tl, th;
  const pc_node *n = v->producer;
  int have_type = dtype_range(v->type.dtype, &tl, &th);
  if (!have_type) return 0;
  *lo = tl, *hi = th; /* what the dtype allows: the answer when nothing better is known */
  if (!n || depth >= RANGE_DEPTH) return 1;
  switch (n->op) {
  case PC_OP_constant:
    if (const_range(n, &l0, &h0)) *lo = l0, *hi = h0;
    return 1;
  case PC_OP_broadcast_in_dim:
  case PC_OP_reshape:
  case PC_OP_transpose:
  case PC_OP_slice:
  case PC_OP_rev:
    if (range_of(n->in[0], depth + 1, &l0, &h0)) *lo = l0, *hi = h0;
    return 1;
  case PC_OP_convert_element_type: /* the operand's range when the result holds all of it (no wrap) */
    if (range_of(n->in[0], depth + 1, &l0, &h0) && l0 >= tl && h0 <= th) *lo = l0, *hi = h0;
    return 1;
  case PC_OP_neg:
    if (range_of(n->in[0], depth + 1, &l0, &h0) && -h0 >= tl && -l0 <= th) *lo = -h0, *hi = -l0;
    return 1;
  case PC_OP_add:
  case PC_OP_sub:
    if (!range_of(n->in[0], depth + 1, &l0, &h0) || !range_of(n->in[1], depth + 1, &l1, &h1)) return 1;
    if (n->op == PC_OP_sub) {
      int64_t t = l1;
      l1 = -h1, h1 = -t;
    }
    if (l0 + l1 >= tl && h0 + h1 <= th) *lo = l0 + l1, *hi = h0 + h1; /* else the sum may wrap */
    return 1;
  default:
    return 1;
  }
}

int pc_value_int_range(const pc_value *v, int64_t *lo, int64_t *hi) { return v && lo && hi && range_of(v, 0, lo, hi); }
