/* tests/embed/dynamic.c: an application running a model compiled with run-time dims (--dim NAME=LO..HI) through
 * its header: NAME_run_dims at the sizes of the .npy inputs given, the output written at the dims
 * NAME_output_dims reports; and dims outside the range refused by NAME_check_dims and NAME_run_dims with
 * status 7, the output untouched. Usage: app OUT.npy IN0.npy [IN1.npy ...] (one per model input), then with
 * --weights external the weights file, which NAME_load_weights maps (a run before it: status 2) */
#include MODEL_HEADER
#include "app.h"

#include "runtime/primc_rt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static float y[M(_OUTPUT0_NUMEL)];
static _Alignas(M(_WORKSPACE_ALIGN)) unsigned char workspace[M(_WORKSPACE_SIZE) + 1];

int main(int argc, char **argv) {
  char err[256], msg[256];
  if (argc != 2 + M(_NUM_INPUTS) + M(_WEIGHTS_EXTERNAL))
    return fprintf(stderr, "usage: %s OUT.npy IN.npy (one per input)%s\n", argv[0], M(_WEIGHTS_EXTERNAL) ? " WEIGHTS" : ""), 2;
  primc_array x[M(_NUM_INPUTS)];
  const void *in[M(_NUM_INPUTS)];
  const int64_t *dims[M(_NUM_INPUTS)];
  for (int i = 0; i < M(_NUM_INPUTS); i++) {
    if (primc_npy_read(argv[2 + i], &x[i], err, sizeof err)) return fprintf(stderr, "%s: %s\n", argv[2 + i], err), 1;
    in[i] = x[i].data, dims[i] = x[i].dims;
  }
  void *out[1] = {y};
  if (M(_check_dims)(dims, msg, sizeof msg) != 0) return fprintf(stderr, "check_dims: %s\n", msg), 1;
#if M(_WEIGHTS_EXTERNAL)
  int early = M(_run_dims)(in, dims, out, workspace);
  if (early != 2) return fprintf(stderr, "a run before NAME_load_weights -> %d, not 2\n", early), 1;
  if (M(_load_weights)(argv[2 + M(_NUM_INPUTS)]) != 0) return fprintf(stderr, "cannot load weights\n"), 1;
#endif
  int rc = M(_run_dims)(in, dims, out, workspace);
  primc_array o = {PRIMC_F32, M(_OUTPUT0_RANK), {0}, y};
  if (rc || M(_output_dims)(workspace, 0, o.dims)) return fprintf(stderr, "run_dims -> %d\n", rc), 1;
  if (primc_npy_write(argv[1], &o, err, sizeof err)) return fprintf(stderr, "%s: %s\n", argv[1], err), 1;
  /* input 0 one past the bound of the first run-time dim: refused before the output is touched */
  int64_t big[PRIMC_MAX_RANK];
  memcpy(big, x[0].dims, sizeof big);
  int syms[] = M(_INPUT0_DIM_SYMS), d = 0;
  while (syms[d] != 0) d++; /* the first dim of input 0 that is run-time dim 0 */
  big[d] = M(_DIM0_MAX) + 1;
  dims[0] = big;
  y[0] = 12345.f;
  int st = M(_check_dims)(dims, msg, sizeof msg), st2 = M(_run_dims)(in, dims, out, workspace);
  if (st != PRIMC_ERR_SHAPE || st2 != PRIMC_ERR_SHAPE || y[0] != 12345.f || !strstr(msg, "outside the range"))
    return fprintf(stderr, "dims out of range: check %d, run %d, message \"%s\"\n", st, st2, msg), 1;
  printf("%s: %s; refused: %s\n", argv[0], argv[1], msg);
  for (int i = 0; i < M(_NUM_INPUTS); i++) free(x[i].data);
  return 0;
}
