/* ir/strbuf.c: the growable text buffer that the printer and the passes' reports write into, and the string hash of every name table. */
#include "ir/ir.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* room for n more bytes and the NUL; 0 (and oom set) when it cannot be had */
static int reserve(pc_strbuf *b, size_t n) {
  if (b->oom) return 0;
  if (b->len + n + 1 <= b->cap) return 1;
  size_t nc = b->cap ? b->cap * 2 : 256;
  while (nc < b->len + n + 1) nc *= 2;
  char *p = realloc(b->s, nc);
  if (!p) {
    b->oom = 1;
    return 0;
  }
  b->s = p, b->cap = nc;
  return 1;
}

void pc_strbuf_put(pc_strbuf *b, const char *s, size_t n) {
  if (!reserve(b, n)) return;
  memcpy(b->s + b->len, s, n);
  b->len += n;
  b->s[b->len] = 0;
}

void pc_strbuf_fmt(pc_strbuf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0 || !reserve(b, (size_t)n)) return;
  va_start(ap, fmt);
  vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

char *pc_strbuf_done(pc_strbuf *b) {
  if (!b->oom && !b->s) reserve(b, 0);
  if (b->oom) {
    free(b->s);
    *b = (pc_strbuf){0};
    return NULL;
  }
  b->s[b->len] = 0;
  char *s = b->s;
  *b = (pc_strbuf){0};
  return s;
}

uint64_t pc_hash_bytes(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211u;
  return h;
}

size_t pc_str_hash(const char *s) { return (size_t)pc_hash_bytes(PC_HASH_SEED, s, strlen(s)); }
