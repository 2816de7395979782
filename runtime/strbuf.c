/* The growable byte string of strbuf.h. */
#include "strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* room for n more bytes and the NUL; 0, or -1 (and oom) when it cannot be had */
static int reserve(lab_strbuf *s, size_t n) {
  if (s->oom) return -1;
  if (s->n + n + 1 <= s->cap) return 0;
  size_t cap = s->cap ? s->cap : 256;
  while (s->n + n + 1 > cap) cap *= 2;
  char *b = realloc(s->b, cap);
  if (!b) {
    s->oom = 1;
    return -1;
  }
  s->b = b;
  s->cap = cap;
  return 0;
}

void lab_strbuf_add(lab_strbuf *s, const void *p, size_t n) {
  if (reserve(s, n) < 0) return;
  memcpy(s->b + s->n, p, n);
  s->n += n;
  s->b[s->n] = 0;
}

void lab_strbuf_printf(lab_strbuf *s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0 || reserve(s, (size_t)n) < 0) return;
  va_start(ap, fmt);
  vsnprintf(s->b + s->n, s->cap - s->n, fmt, ap);
  va_end(ap);
  s->n += (size_t)n;
}
