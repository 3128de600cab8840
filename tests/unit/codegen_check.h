/* tests/unit/codegen_check.h: the harness the test_codegen_*.c files share: random inputs in a range, prim graphs
 * compiled and compared with pc_interp, LLVM IR text and kernel listings, fused groups set by hand. */
#ifndef PRIMC_TEST_CODEGEN_CHECK_H
#define PRIMC_TEST_CODEGEN_CHECK_H

#include "ir/ir.h"

/* value ranges of generated inputs */
typedef struct cg_range {
  double lo, hi;
} cg_range;

/* a uniform double in [lo, hi) from the harness's one xorshift stream */
double cg_urand(double lo, double hi);
/* a tensor of v's type filled from the stream with values in r (ints truncated, bools 0 or 1), data calloc'ed */
pc_tensor cg_make_input(const pc_value *v, cg_range r);
/* compiles g to an object at -O2, links a shared library, runs it on ins into outs (malloc'ed) */
int cg_run_compiled(pc_graph *g, const pc_tensor *ins, pc_tensor *outs, const char *tag);
/* interpreter vs compiled code on random inputs in r, within the tolerance of dtype tol_as (theirs when
 * PC_DTYPE_COUNT; with tol_as f16, f32 outputs must also hold f16 values) */
int cg_check_graph_as(pc_graph *g, cg_range r, const char *tag, pc_dtype tol_as);
/* cg_check_graph_as within the outputs' own tolerance */
int cg_check_graph(pc_graph *g, cg_range r, const char *tag);
/* g compiled to LLVM IR text at opt level opt (caller frees); NULL on failure */
char *cg_llvm_text(pc_graph *g, int opt);
/* the kernel listing of g shows want; then g compiled agrees with the interpreter; g is freed */
void cg_listing_has_then_run(pc_graph *g, const char *want, cg_range r, const char *tag);
/* pc_type_make, for short */
pc_type cg_ty(pc_dtype dt, int rank, const int64_t *dims);
/* every node of g created from index from on is put in group grp */
void cg_group_from(pc_graph *g, int from, int grp);

#endif
