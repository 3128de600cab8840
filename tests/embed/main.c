/* tests/embed/main.c: an application embedding a primc-compiled model through its generated header only. */
#include MODEL_HEADER
#include "app.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  if (argc < 3) return fprintf(stderr, "usage: %s input.bin ref.bin [weights]\n", argv[0]), 2;
  static float x[M(_INPUT0_NUMEL)], y[M(_OUTPUT0_NUMEL)], ref[M(_OUTPUT0_NUMEL)];
  static _Alignas(M(_WORKSPACE_ALIGN)) unsigned char workspace[M(_WORKSPACE_SIZE) + 1];
  if (read_raw(argv[1], x, sizeof x) || read_raw(argv[2], ref, sizeof ref)) return fprintf(stderr, "bad data files\n"), 1;
#if M(_WEIGHTS_EXTERNAL)
  if (argc < 4 || M(_load_weights)(argv[3]) != 0) return fprintf(stderr, "cannot load weights\n"), 1;
#endif
  const void *in[M(_NUM_INPUTS)] = {x};
  void *out[M(_NUM_OUTPUTS)] = {y};
  int rc = M(_run)(in, out, workspace);
  int bad = rc != 0;
  for (long i = 0; !bad && i < M(_OUTPUT0_NUMEL); i++) bad = fabsf(y[i] - ref[i]) > 1e-5f * (1 + fabsf(ref[i]));
  printf("%s: run -> %d, output \"%s\" %s onnxruntime\n", argv[0], rc, M(_OUTPUT0_NAME),
         bad ? "DIFFERS FROM" : "matches");
  return bad;
}
