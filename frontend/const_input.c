/* frontend/const_input.c: what a user fixes of a model's inputs: --dim NAME=N|LO..HI and --const NAME=VALUE as
 * spelled (the CLI and the C API parse them here), and fitting a constant to the dtype and dims the model
 * declares for its input. */
#include "frontend/frontend.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NUMBERS 4096 /* a value spelled on a command line; larger ones come as .npy files */

static int bad(char *err, size_t n, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, n, fmt, ap);
  va_end(ap);
  return 0;
}

int pc_dim_spec_parse(const char *s, pc_dim_binding *out, char *name, size_t name_size) {
  const char *eq = strchr(s, '=');
  if (!eq || eq == s || (size_t)(eq - s) >= name_size) return 0;
  memcpy(name, s, (size_t)(eq - s));
  name[eq - s] = 0;
  char *end;
  errno = 0;
  long long lo = strtoll(eq + 1, &end, 10), hi = lo, step = 0, mult = 0;
  if (errno || end == eq + 1 || lo < 0) return 0;
  if (end[0] == '.' && end[1] == '.') {
    const char *h = end + 2;
    hi = strtoll(h, &end, 10);
    if (errno || end == h || hi < lo) return 0;
    if (*end == '%') { /* multiples: a range only */
      const char *m = end + 1;
      mult = strtoll(m, &end, 10);
      if (errno || end == m || mult < 2 || lo < mult || lo % mult || hi % mult || hi == lo) return 0;
    }
    if (*end == ':') { /* buckets: a range only, of whole multiples */
      const char *st = end + 1;
      step = strtoll(st, &end, 10);
      if (errno || end == st || step < 1 || hi == lo || (mult && step % mult)) return 0;
    }
  }
  if (*end) return 0;
  out->name = name;
  out->lo = lo;
  out->hi = hi;
  out->step = step;
  out->multiple = mult;
  return 1;
}

int pc_const_spec_parse(const char *spec, pc_const_input *out, char *name, size_t name_size, char *err,
                        size_t errlen) {
  memset(out, 0, sizeof *out);
  const char *eq = spec ? strchr(spec, '=') : NULL;
  if (!eq || eq == spec || (size_t)(eq - spec) >= name_size)
    return bad(err, errlen, "'%s': expected NAME=VALUE", spec ? spec : "");
  memcpy(name, spec, (size_t)(eq - spec));
  name[eq - spec] = 0;
  const char *v = eq + 1;
  size_t len = strlen(v);
  int list = len >= 2 && v[0] == '[' && v[len - 1] == ']';
  if (list) v++, len -= 2;
  double *nums = malloc(sizeof *nums * MAX_NUMBERS);
  if (!nums) return bad(err, errlen, "out of memory");
  int n = 0;
  const char *p = v, *end = v + len;
  while (p < end || (n == 0 && !list)) {
    const char *comma = memchr(p, ',', (size_t)(end - p));
    const char *stop = comma ? comma : end;
    char tok[64];
    size_t tl = (size_t)(stop - p);
    if (n == MAX_NUMBERS || tl == 0 || tl >= sizeof tok) {
      free(nums);
      return n == MAX_NUMBERS ? bad(err, errlen, "%s: more than %d numbers (give a .npy file)", name, MAX_NUMBERS)
                              : bad(err, errlen, "%s: '%s' is not a list of numbers", name, eq + 1);
    }
    memcpy(tok, p, tl);
    tok[tl] = 0;
    char *e;
    errno = 0;
    double d = !strcmp(tok, "true") ? 1 : !strcmp(tok, "false") ? 0 : strtod(tok, &e);
    if (strcmp(tok, "true") && strcmp(tok, "false") && (*e || e == tok)) {
      free(nums);
      return bad(err, errlen, "%s: '%s' is not a number", name, tok);
    }
    nums[n++] = d;
    p = comma ? comma + 1 : end;
    if (comma && p == end) {
      free(nums);
      return bad(err, errlen, "%s: '%s' ends with a comma", name, eq + 1);
    }
  }
  out->name = name;
  out->from_numbers = 1;
  out->value.dtype = PC_f64;
  out->value.rank = list || n > 1 ? 1 : 0;
  out->value.dims[0] = n;
  out->value.data = nums;
  return 1;
}

/* the dims the value takes: the input's, with at most one unknown dim taken from the value's element count */
static pc_status fit_shape(pc_graph *g, const char *nm, const pc_tensor *v, int rank, const int64_t *dims,
                           int64_t *shape) {
  int64_t known = 1, n = pc_tensor_numel(v);
  int unknown = -1, n_unknown = 0;
  for (int k = 0; k < rank; k++) {
    shape[k] = dims[k];
    if (dims[k] < 0) unknown = k, n_unknown++;
    else known *= dims[k];
  }
  if (n_unknown > 1)
    return pc_fail(g, PC_ERR_SHAPE, "input '%s': %d of its dims are not fixed; give its value as a .npy file", nm,
                   n_unknown);
  if (n_unknown == 1 && known > 0 && n % known == 0) shape[unknown] = n / known;
  else if (n_unknown == 1 || known != n)
    return pc_fail(g, PC_ERR_SHAPE, "input '%s': %lld number%s given, its dims hold %s%lld", nm, (long long)n,
                   n == 1 ? "" : "s", n_unknown ? "a multiple of " : "", (long long)known);
  return PC_OK;
}

pc_status pc_const_input_fit(pc_graph *g, const char *nm, const pc_const_input *ci, pc_dtype dt, int rank,
                             const int64_t *dims, pc_tensor *out) {
  const pc_tensor *v = &ci->value;
  memset(out, 0, sizeof *out);
  out->dtype = dt;
  if (ci->from_numbers) {
    if (rank < 0) { /* the model does not say: the spelling does */
      rank = v->rank;
      memcpy(out->dims, v->dims, sizeof out->dims);
    } else if (fit_shape(g, nm, v, rank, dims, out->dims) != PC_OK)
      return g->status;
  } else {
    if (rank >= 0 && rank != v->rank)
      return pc_fail(g, PC_ERR_SHAPE, "input '%s': the constant given for it has rank %d, the input %d", nm, v->rank,
                     rank);
    for (int k = 0; k < v->rank; k++) {
      if (rank >= 0 && dims[k] >= 0 && dims[k] != v->dims[k])
        return pc_fail(g, PC_ERR_SHAPE, "input '%s': dim %d of the constant given for it is %lld, the input's %lld",
                       nm, k, (long long)v->dims[k], (long long)dims[k]);
      out->dims[k] = v->dims[k];
    }
    rank = v->rank;
  }
  out->rank = rank;
  int64_t n = pc_tensor_numel(out);
  if (n != pc_tensor_numel(v)) return pc_fail(g, PC_ERR_INTERNAL, "input '%s': constant size mismatch", nm);
  if (v->dtype == dt) { /* as given, bit for bit */
    out->data = v->data;
    return PC_OK;
  }
  if (v->dtype == PC_c64 || dt == PC_c64 || (!ci->from_numbers && pc_dtype_is_float(v->dtype) && !pc_dtype_is_float(dt)))
    return pc_fail(g, PC_ERR_TYPE, "input '%s': the constant given for it is %s, the input is %s", nm,
                   pc_dtype_name(v->dtype), pc_dtype_name(dt));
  out->data = pc_alloc(g, pc_dtype_size(dt) * (size_t)(n ? n : 1));
  if (!out->data) return g->status;
  for (int64_t i = 0; i < n; i++) {
    double x = pc_elem_f64(v->dtype, v->data, i);
    pc_elem_store(dt, out->data, i, x);
    /* ints and bool take only the values they hold; floats round */
    double back = pc_elem_f64(dt, out->data, i);
    if (!pc_dtype_is_float(dt) && back != x)
      return pc_fail(g, PC_ERR_RANGE, "input '%s': element %lld of the constant given for it, %.17g, is not exactly a %s", nm,
                     (long long)i, x, pc_dtype_name(dt));
  }
  return PC_OK;
}
