/* tests/embed/dynamic.c: an application running a model compiled with run-time dims (--dim NAME=LO..HI) through
 * its header: NAME_run_dims at the sizes of each .npy input given, the outputs written at the dims
 * NAME_output_dims reports; and dims outside the range refused by NAME_check_dims and NAME_run_dims with
 * status 7, the outputs untouched. Usage: app IN.npy OUT.npy [IN.npy OUT.npy ...] */
#include MODEL_HEADER

#include "runtime/primc_rt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
#define M(x) CAT(MODEL, x)

static float y[M(_OUTPUT0_NUMEL)];
static _Alignas(M(_WORKSPACE_ALIGN)) unsigned char workspace[M(_WORKSPACE_SIZE) + 1];

int main(int argc, char **argv) {
  char err[256], msg[256];
  for (int a = 1; a + 1 < argc; a += 2) {
    primc_array x;
    if (primc_npy_read(argv[a], &x, err, sizeof err)) return fprintf(stderr, "%s: %s\n", argv[a], err), 1;
    const void *in[1] = {x.data};
    const int64_t *dims[1] = {x.dims};
    void *out[1] = {y};
    if (M(_check_dims)(dims, msg, sizeof msg) != 0) return fprintf(stderr, "check_dims: %s\n", msg), 1;
    int rc = M(_run_dims)(in, dims, out, workspace);
    primc_array o = {PRIMC_F32, M(_OUTPUT0_RANK), {0}, y};
    if (rc || M(_output_dims)(workspace, 0, o.dims)) return fprintf(stderr, "run_dims -> %d\n", rc), 1;
    if (primc_npy_write(argv[a + 1], &o, err, sizeof err)) return fprintf(stderr, "%s: %s\n", argv[a + 1], err), 1;
    /* one past the bound of the first run-time dim: refused before the outputs are touched */
    int64_t big[PRIMC_MAX_RANK];
    memcpy(big, x.dims, sizeof big);
    int syms[] = M(_INPUT0_DIM_SYMS), d = 0;
    while (syms[d] != 0) d++; /* the first input dim that is run-time dim 0 */
    big[d] = M(_DIM0_MAX) + 1;
    const int64_t *bad[1] = {big};
    y[0] = 12345.f;
    int st = M(_check_dims)(bad, msg, sizeof msg), st2 = M(_run_dims)(in, bad, out, workspace);
    if (st != PRIMC_ERR_SHAPE || st2 != PRIMC_ERR_SHAPE || y[0] != 12345.f || !strstr(msg, "outside the range"))
      return fprintf(stderr, "dims out of range: check %d, run %d, message \"%s\"\n", st, st2, msg), 1;
    printf("%s: %s -> %s; %s\n", argv[0], argv[a], argv[a + 1], msg);
    free(x.data);
  }
  return 0;
}
