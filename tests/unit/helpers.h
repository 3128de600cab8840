/* tests/unit/helpers.h: what several unit test files need: whole-file reads, ONNX tensor files, typed test data. */
#ifndef PRIMC_TEST_HELPERS_H
#define PRIMC_TEST_HELPERS_H

#include "ir/ir.h"

#include <stddef.h>

/* the whole file, NUL-terminated and malloc'ed (length in *len when len is not NULL); NULL when unreadable */
char *pc_test_slurp(const char *path, size_t *len);
/* a TensorProto .pb decoded by the importer into t; 0 when absent or bad */
int pc_test_read_pb(const char *path, pc_tensor *t);
/* element i of a dtype dt buffer set from v: ints truncate, the sub-byte ints wrap to their width,
 * c64 gets (v, -v) so both halves carry data */
void pc_test_put(pc_dtype dt, void *p, int64_t i, double v);

/* links obj with the runtime (libprimc_rt.a beside the test binary) and libs into the shared library so,
 * and dlopens it; NULL after a failed check naming tag */
void *pc_test_link_open(const char *obj, const char *so, const char *libs, const char *tag);

/* pc_kernels_print's listing of g, malloc'ed (NULL after a failed check) */
char *pc_test_kernels_text(pc_graph *g);

#define PC_TEST_MAX_IO 16
/* g (after the pipeline) compiled to an object at opt_level, linked, loaded and run on ins; outs[i] are
 * malloc'ed in the outputs' shapes; 0 after a failed check naming tag */
int pc_test_run_compiled(pc_graph *g, int opt_level, const pc_tensor *ins, pc_tensor *outs, const char *tag);
/* the reference graph r interpreted on ins (its n_ref outputs into ref, zeroed first) and g through the -O2 pipeline:
 * 1 when both worked, else 0 with the failure checked, naming tag */
int pc_test_ref_and_plan(pc_graph *r, pc_graph *g, const pc_tensor *ins, int n_in, pc_tensor *ref, int n_ref,
                         const char *tag);
/* the kernels g compiles to (after pc_pass_memplan) counted: 1 when there are want of them, else 0 after a failed
 * check naming tag and printing the listing */
int pc_test_kernels_count_is(pc_graph *g, int want, const char *tag);
/* an f32 tensor of dims with a fixed pattern in [-2, 2] (element i: ((37 i) mod 101 - 50) / 25), data malloc'ed */
pc_tensor pc_test_pattern_f32(int rank, const int64_t *dims);
/* g's f32 outputs (n_out of them) interpreted and compiled at -O2 on the one input in: 1 when every element of each
 * lies within rtol relative of the interpreter's, else 0 after a failed check naming tag and the element */
int pc_test_compiled_matches_interp(pc_graph *g, const pc_tensor *in, int n_out, float rtol, const char *tag);
/* when set, pc_test_run_compiled calls it with the compiled library's dlopen handle before running it (the library
 * holds its own copy of the runtime: a test hook of the runtime is reached through dlsym) */
extern void (*pc_test_before_run)(void *so);

#endif
