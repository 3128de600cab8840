/* runtime/dims.c: run-time dims: the symbols' values from the inputs' actual dims, checked against the
 * compiled ranges before a run touches anything. */
#include "runtime/primc_rt.h"

#include <stdio.h>
#include <string.h>

int primc_dims_check(const primc_dims_desc *d, const int64_t *const *input_dims, int64_t *values, char *msg,
                     size_t len) {
  if (msg && len) msg[0] = 0;
  if (!d || !values) return PRIMC_ERR_ARG;
  int set_by[PRIMC_MAX_RANK * 4];
  if (d->n_syms > (int)(sizeof set_by / sizeof *set_by)) return PRIMC_ERR_ARG;
  for (int s = 0; s < d->n_syms; s++) values[s] = d->syms[s].hi, set_by[s] = -1;
  for (int i = 0; input_dims && i < d->n_inputs; i++) {
    const int64_t *dims = input_dims[i];
    const primc_tensor_desc *t = &d->inputs[i];
    for (int k = 0; dims && k < t->rank; k++) {
      int s = d->input_syms[i * PRIMC_MAX_RANK + k];
      long long v = (long long)dims[k];
      if (s < 0) {
        if (dims[k] == t->dims[k]) continue;
        if (msg && len)
          snprintf(msg, len, "input \"%s\" dim %d is %lld; the model was compiled for %lld", t->name, k, v,
                   (long long)t->dims[k]);
        return PRIMC_ERR_SHAPE;
      }
      const primc_sym_desc *y = &d->syms[s];
      if (dims[k] < y->lo || dims[k] > y->hi) {
        if (msg && len)
          snprintf(msg, len, "input \"%s\" dim %d (%s) is %lld, outside the range %lld..%lld compiled in", t->name, k,
                   y->name, v, (long long)y->lo, (long long)y->hi);
        return PRIMC_ERR_SHAPE;
      }
      if (set_by[s] >= 0 && values[s] != dims[k]) {
        if (msg && len)
          snprintf(msg, len, "input \"%s\" dim %d is %lld, but input \"%s\" made %s %lld", t->name, k, v,
                   d->inputs[set_by[s]].name, y->name, (long long)values[s]);
        return PRIMC_ERR_SHAPE;
      }
      values[s] = dims[k];
      set_by[s] = i;
    }
  }
  return PRIMC_OK;
}

int primc_dims_bind(const primc_dims_desc *d, const int64_t *const *input_dims, void *workspace) {
  int64_t values[PRIMC_MAX_RANK * 4];
  if (!d || d->n_syms > (int)(sizeof values / sizeof *values)) return PRIMC_ERR_ARG;
  int st = primc_dims_check(d, input_dims, values, NULL, 0);
  if (st != PRIMC_OK || d->offset < 0) return st;
  if (!workspace) return PRIMC_ERR_ARG;
  memcpy((char *)workspace + d->offset, values, sizeof *values * (size_t)d->n_syms);
  return PRIMC_OK;
}
