/* runtime/gemm/scalar.c: the SCALAR row: a plain-C micro-kernel and dot product any CPU runs. */
#include "runtime/gemm/gemm.h"

#define SC_MR GM_MR_SCALAR
#define SC_NR GM_NR_SCALAR

void primc_gm_kern_scalar(const kargs *g, int mr) {
  float acc[SC_MR][SC_NR] = {{0}};
  for (int64_t k = 0; k < g->kc; k++) {
    const float *b = g->b + (g->koff ? g->koff[k] : k * g->bks);
    for (int r = 0; r < mr; r++) {
      float av = g->a[r * g->ars + k * g->aks];
      for (int j = 0; j < g->nr; j++) acc[r][j] += av * b[j];
    }
  }
  for (int r = 0; r < mr; r++)
    for (int j = 0; j < g->nr; j++) {
      float *c = g->c + r * g->ldc + j;
      *c = g->beta == 0 ? g->alpha * acc[r][j] : g->alpha * acc[r][j] + g->beta * *c;
    }
}

float primc_gm_dot_scalar(const float *x, const float *y, int64_t n) {
  float acc = 0;
  for (int64_t i = 0; i < n; i++) acc += x[i] * y[i];
  return acc;
}
