/* ir/interp_impl.h: what ir/interp.c (driver, element access, elementwise) shares with ir/interp_ops.c (the other prims). */
#ifndef PRIMC_INTERP_IMPL_H
#define PRIMC_INTERP_IMPL_H

#include "ir/ir.h"

/* run state: the graph (for errors) and the run's symbol bindings (-1: unbound) */
typedef struct pc_ictx {
  pc_graph *g;
  int64_t *sym;
  int n_sym;
  int64_t live; /* bytes of results held, checked against g->mem_limit */
} pc_ictx;

/* One prim on concrete tensors. out[i] arrive with dtype and shape resolved
 * and zeroed data allocated, except where a dim is still unbound (nonzero's
 * count): then data is NULL and the prim sets dims and allocates. */
typedef pc_status (*pc_iop_fn)(pc_ictx *c, const pc_node *n, const pc_tensor *in, pc_tensor *out);

#define PC_IOP_DECL_UNARY(name)
#define PC_IOP_DECL_BINARY(name)
#define PC_IOP_DECL_TERNARY(name)
#define PC_IOP_DECL_OTHER(name) pc_status pc_iop_##name(pc_ictx *c, const pc_node *n, const pc_tensor *in, pc_tensor *out);
#define PRIM(name, n_in, n_out, kind, operands, result, fuse, inl) PC_IOP_DECL_##kind(name)
#include "ir/prims.def"
#undef PRIM

/* element i of a buffer of dtype dt, read as double (floats, ints, bool; c64: real part) or int64 */
double pc_ild_d(pc_dtype dt, const void *p, int64_t i);
int64_t pc_ild_i(pc_dtype dt, const void *p, int64_t i);
/* writes with one correct rounding; to ints from double: truncation, saturating, NaN -> 0;
 * to ints from int64: two's-complement wrap; to bool: != 0; to c64: real part, imaginary 0 */
void pc_ist_d(pc_dtype dt, void *p, int64_t i, double v);
void pc_ist_i(pc_dtype dt, void *p, int64_t i, int64_t v);
/* 1 when values of dt are handled in double (floats), 0 for int64 (ints, bool) */
int pc_idomain_float(pc_dtype dt);

/* NaN-propagating max/min and wrapping int64 arithmetic, shared with reductions and scatter */
double pc_fmax_nan(double a, double b);
double pc_fmin_nan(double a, double b);
int64_t pc_iadd_wrap(int64_t a, int64_t b);
int64_t pc_imul_wrap(int64_t a, int64_t b);

#endif
