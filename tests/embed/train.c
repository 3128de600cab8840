/* tests/embed/train.c: an application training through a primc --train step's header only: the MLP of
 * models/mlp with SGD (its state is its 6 weights), started from MODEL_state_init, three steps on two batches of
 * 4 rows, the state passed from each step's outputs to the next one's inputs by swapping buffers; the losses
 * are checked against torch.optim's (tests/data/train/mlp_mse_sgd.npz). */
#include MODEL_HEADER
#include "app.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(M(_NUM_STATE) == 6 && M(_NUM_STATE_WEIGHTS) == 6 && M(_NUM_INPUTS) == 8, "the MLP with SGD");

int main(int argc, char **argv) {
  if (argc < 4) return fprintf(stderr, "usage: %s x.bin y.bin losses.bin\n", argv[0]), 2;
  static float x[2 * M(_INPUT0_NUMEL)], y[2 * M(_INPUT1_NUMEL)], loss, logits[M(_OUTPUT1_NUMEL)];
  double want[3];
  static _Alignas(M(_WORKSPACE_ALIGN)) unsigned char workspace[M(_WORKSPACE_SIZE) + 1];
  if (read_raw(argv[1], x, sizeof x) || read_raw(argv[2], y, sizeof y) || read_raw(argv[3], want, sizeof want))
    return fprintf(stderr, "bad data files\n"), 1;
  const size_t bytes[6] = {M(_INPUT2_BYTES), M(_INPUT3_BYTES), M(_INPUT4_BYTES), M(_INPUT5_BYTES), M(_INPUT6_BYTES),
                           M(_INPUT7_BYTES)};
  void *state[2][6];
  for (int i = 0; i < 6; i++) {
    state[0][i] = malloc(bytes[i]), state[1][i] = malloc(bytes[i]);
    if (!state[0][i] || !state[1][i]) return 1;
    memcpy(state[0][i], M(_state_init)[i], bytes[i]); /* the model's initial weights */
  }
  int cur = 0, bad = 0;
  for (int step = 0; step < 3; step++) {
    int b = step % 2; /* batches of 4 rows: 0, 1, 0 */
    const void *in[8] = {x + b * M(_INPUT0_NUMEL), y + b * M(_INPUT1_NUMEL)};
    void *out[8] = {&loss, logits};
    for (int i = 0; i < 6; i++) in[2 + i] = state[cur][i], out[2 + i] = state[!cur][i];
    int rc = M(_run)(in, out, workspace);
    cur = !cur;
    int off = rc != 0 || fabs(loss - want[step]) > 1e-4 * fabs(want[step]);
    printf("step %d: run -> %d, loss %.6f, torch %.6f%s\n", step + 1, rc, loss, want[step], off ? " DIFFERS" : "");
    bad |= off;
  }
  for (int i = 0; i < 6; i++) free(state[0][i]), free(state[1][i]);
  return bad;
}
