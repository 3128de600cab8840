/* tests/embed/app.h: what the embedding apps share: M(_RUN) names MODEL's entry points and constants from its
 * generated header (MODEL and MODEL_HEADER come from the compiler's -D flags), and whole-file reads. */
#ifndef PRIMC_TEST_EMBED_APP_H
#define PRIMC_TEST_EMBED_APP_H

#include <stddef.h>
#include <stdio.h>

#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
#define M(x) CAT(MODEL, x)

/* exactly n bytes of path into buf: 0, else -1 */
static inline int read_raw(const char *path, void *buf, size_t n) {
  FILE *f = fopen(path, "rb");
  size_t got = f ? fread(buf, 1, n, f) : 0;
  if (f) fclose(f);
  return got == n ? 0 : -1;
}

#endif
