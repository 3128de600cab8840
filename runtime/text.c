/* runtime/text.c: a model's names (any bytes the model's author chose) made safe to print. A terminal acts on
 * control bytes: an input named with ESC sequences could move the cursor, rewrite earlier lines or retitle the
 * window when an error or a listing prints it. Those bytes are written as \xNN instead; everything else, UTF-8
 * included, passes unchanged, so ordinary names read as they are. */
#include "runtime/primc_rt.h"

#include <stdio.h>
#include <string.h>

int primc_text_control_len(const char *s, const char *end) {
  const unsigned char *p = (const unsigned char *)s;
  if (*p < 0x20 || *p == 0x7f) return 1;
  if (p[0] == 0xc2 && end - s >= 2 && p[1] >= 0x80 && p[1] <= 0x9f) return 2;
  return 0;
}

size_t primc_text_escape(char *dst, size_t n, const char *src) {
  static const char hex[] = "0123456789abcdef";
  size_t k = 0;
  if (!dst || !n) return 0;
  const unsigned char *p = (const unsigned char *)(src ? src : ""), *end = p + strlen((const char *)p);
  while (p < end) {
    int c = primc_text_control_len((const char *)p, (const char *)end);
    if (!c) {
      if (k + 1 >= n) break;
      dst[k++] = (char)*p++;
      continue;
    }
    if (k + 4 * (size_t)c >= n) break; /* an escape is never cut in half */
    for (int i = 0; i < c; i++, p++) {
      dst[k++] = '\\', dst[k++] = 'x';
      dst[k++] = hex[*p >> 4], dst[k++] = hex[*p & 15];
    }
  }
  dst[k] = 0;
  return k;
}

int primc_text_putn(FILE *f, const char *s, size_t n) {
  int k = 0;
  const unsigned char *p = (const unsigned char *)s, *end = p + (s ? n : 0);
  while (p < end) {
    int c = primc_text_control_len((const char *)p, (const char *)end);
    if (!c) {
      putc(*p++, f), k++;
      continue;
    }
    for (int i = 0; i < c; i++, p++) k += fprintf(f, "\\x%02x", *p);
  }
  return k;
}

int primc_text_put(FILE *f, const char *s) { return primc_text_putn(f, s, s ? strlen(s) : 0); }
