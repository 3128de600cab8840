/* runtime/gemm/rows.c: the GEMM row table, the row each ISA runs (picked once), and the rows' metadata. */
#include "runtime/gemm/gemm.h"

#include <pthread.h>
#include <stddef.h>

const gm_row primc_gm_rows[PRIMC_GEMM_ROW_COUNT] = {
#define PRIMC_GEMM_ROW(id, nm, is, m, n, dir, fused, kn, dt, tr, pa, ga)                                               \
  [PRIMC_GEMM_ROW_##id] = {.name = nm, .isa = PRIMC_ISA_##is, .mr = m, .nr = n, .kc = KC_MAX, .nc = NC_MAX,             \
                           .direct_max = dir, .fused_store = fused, .kern = kn, .dot = dt, .trans16 = tr, .pack_a = pa, \
                           .gather8 = ga},
#include "runtime/gemm/gemm_rows.def"
#undef PRIMC_GEMM_ROW
};

_Static_assert(PRIMC_GEMM_ROW_COUNT == 4, "a row per ISA: AVX512, AVX2, NEON, SCALAR");
#define PRIMC_GEMM_ROW(id, nm, is, m, n, ...)                                                                          \
  _Static_assert((m) <= MR_MAX && NC_MAX % (n) == 0 && (n) <= NR_MAX && (n) % 8 == 0,                                 \
                 "row " nm ": tile within the driver's buffers, panels of whole gather8 groups");
#include "runtime/gemm/gemm_rows.def"
#undef PRIMC_GEMM_ROW

static const gm_row *picked[PRIMC_ISA_COUNT];
static pthread_once_t pick_once = PTHREAD_ONCE_INIT;

/* for each ISA the first row in rank order it runs (the SCALAR row runs on any; an ISA with no row of its
 * family built here runs the SCALAR row) */
static void pick(void) {
  for (int isa = 0; isa < PRIMC_ISA_COUNT; isa++)
    for (int r = 0; r < PRIMC_GEMM_ROW_COUNT && !picked[isa]; r++)
      if (primc_isa_covers(isa, primc_gm_rows[r].isa)) picked[isa] = &primc_gm_rows[r];
}

const gm_row *primc_gm_row_for(int isa) {
  pthread_once(&pick_once, pick);
  return picked[isa];
}

static int row_ok(int row) { return row >= 0 && row < PRIMC_GEMM_ROW_COUNT; }

const char *primc_gemm_row_name(int row) { return row_ok(row) ? primc_gm_rows[row].name : NULL; }
int primc_gemm_row_isa(int row) { return row_ok(row) ? primc_gm_rows[row].isa : -1; }
int primc_gemm_row_mr(int row) { return row_ok(row) ? primc_gm_rows[row].mr : 0; }
int primc_gemm_row_nr(int row) { return row_ok(row) ? primc_gm_rows[row].nr : 0; }

int primc_gemm_row_of_isa(int isa) {
  return isa >= 0 && isa < PRIMC_ISA_COUNT ? (int)(primc_gm_row_for(isa) - primc_gm_rows) : -1;
}

int primc_gemm_row_active(void) { return primc_gemm_row_of_isa(primc_sgemm_isa()); }

int primc_sgemm_mr(void) { return primc_gm_row()->mr; }
