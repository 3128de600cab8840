/* runtime/dims.c: run-time dims: the symbols' values from the inputs' actual dims, checked against the
 * compiled ranges before a run touches anything; a bucketed range's program picked by them. */
#include "runtime/primc_rt.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* a verdict into msg, the model's names in it escaped (an app prints NAME_error's text as it is) */
__attribute__((format(printf, 3, 4))) static void say(char *msg, size_t len, const char *fmt, ...) {
  char raw[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(raw, sizeof raw, fmt, ap);
  va_end(ap);
  primc_text_escape(msg, len, raw);
}

static int64_t unit(const primc_sym_desc *y) { return y->multiple > 1 ? y->multiple : 1; }

int primc_dims_check(const primc_dims_desc *d, const int64_t *const *input_dims, int64_t *values, char *msg,
                     size_t len) {
  if (msg && len) msg[0] = 0;
  if (!d || !values) return PRIMC_ERR_ARG;
  int set_by[PRIMC_MAX_RANK * 4];
  if (d->n_syms > (int)(sizeof set_by / sizeof *set_by)) return PRIMC_ERR_ARG;
  for (int s = 0; s < d->n_syms; s++) values[s] = d->syms[s].hi / unit(&d->syms[s]), set_by[s] = -1;
  for (int i = 0; input_dims && i < d->n_inputs; i++) {
    const int64_t *dims = input_dims[i];
    const primc_tensor_desc *t = &d->inputs[i];
    for (int k = 0; dims && k < t->rank; k++) {
      int s = d->input_syms[i * PRIMC_MAX_RANK + k];
      long long v = (long long)dims[k];
      if (s < 0) {
        if (dims[k] == t->dims[k]) continue;
        if (msg && len)
          say(msg, len, "input \"%s\" dim %d is %lld; the model was compiled for %lld", t->name, k, v,
              (long long)t->dims[k]);
        return PRIMC_ERR_SHAPE;
      }
      const primc_sym_desc *y = &d->syms[s];
      if (dims[k] < y->lo || dims[k] > y->hi) {
        if (msg && len)
          say(msg, len, "input \"%s\" dim %d (%s) is %lld, outside the range %lld..%lld compiled in", t->name, k,
              y->name, v, (long long)y->lo, (long long)y->hi);
        return PRIMC_ERR_SHAPE;
      }
      if (dims[k] % unit(y)) {
        if (msg && len)
          say(msg, len, "input \"%s\" dim %d (%s) is %lld, not a multiple of %lld (the range %lld..%lld compiled in)",
              t->name, k, y->name, v, (long long)unit(y), (long long)y->lo, (long long)y->hi);
        return PRIMC_ERR_SHAPE;
      }
      if (set_by[s] >= 0 && values[s] != dims[k] / unit(y)) {
        if (msg && len)
          say(msg, len, "input \"%s\" dim %d is %lld, but input \"%s\" made %s %lld", t->name, k, v,
              d->inputs[set_by[s]].name, y->name, (long long)(values[s] * unit(y)));
        return PRIMC_ERR_SHAPE;
      }
      values[s] = dims[k] / unit(y);
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

/* the header's first words: a tag, then which bucket ran */
#define BUCKET_TAG 0x6b637562 /* "buck" */

int32_t primc_bucket_of(const primc_dims_desc *d, int32_t n, const int64_t *lo, const int64_t *hi,
                        const int64_t *values) {
  for (int32_t k = 0; d && k < n; k++) {
    int in = 1;
    for (int s = 0; s < d->n_syms && in; s++) {
      int64_t v = values[s] * unit(&d->syms[s]); /* the dim: bucket bounds are dims */
      in = v >= lo[k * d->n_syms + s] && v <= hi[k * d->n_syms + s];
    }
    if (in) return k;
  }
  return -1;
}

int primc_buckets_run_dims(const primc_buckets_desc *b, const void *const *inputs, const int64_t *const *input_dims,
                           void *const *outputs, void *workspace) {
  int64_t values[PRIMC_MAX_RANK * 4];
  if (!b || !b->dims || b->n < 1 || b->dims->n_syms > (int)(sizeof values / sizeof *values)) return PRIMC_ERR_ARG;
  int st = primc_dims_check(b->dims, input_dims, values, NULL, 0);
  if (st != PRIMC_OK) return st;
  if (!workspace) return PRIMC_ERR_ARG;
  int32_t k = primc_bucket_of(b->dims, b->n, b->lo, b->hi, values);
  if (k < 0) return PRIMC_ERR_ARG; /* the boxes do not cover the ranges: no table primc writes */
  int32_t head[2] = {BUCKET_TAG, k};
  memcpy(workspace, head, sizeof head);
  return b->models[k]->run_dims(inputs, input_dims, outputs, (char *)workspace + PRIMC_BUCKET_HEADER);
}

int primc_buckets_output_dims(const primc_buckets_desc *b, const void *workspace, int32_t output, int64_t *dims) {
  int32_t head[2];
  if (!b || !workspace) return PRIMC_ERR_ARG;
  memcpy(head, workspace, sizeof head);
  if (head[0] != BUCKET_TAG || head[1] < 0 || head[1] >= b->n) return PRIMC_ERR_ARG;
  return b->models[head[1]]->output_dims((const char *)workspace + PRIMC_BUCKET_HEADER, output, dims);
}
