/* A growable byte string for text built piece by piece (the tensor printer, the safetensors
 * header): appends double the capacity as needed and keep the bytes NUL-terminated; an
 * allocation that fails turns every later append into nothing, so the builder checks once, at
 * the end (oom), instead of after each piece. */
#ifndef LAB_RUNTIME_STRBUF_H
#define LAB_RUNTIME_STRBUF_H

#include <stddef.h>

typedef struct {
  char *b; /* malloc'ed, NUL-terminated once anything was added; the caller frees it */
  size_t n, cap;
  int oom;
} lab_strbuf;

void lab_strbuf_add(lab_strbuf *s, const void *p, size_t n);
void lab_strbuf_printf(lab_strbuf *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
