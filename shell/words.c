/* Command-line words for :run and :step (see words.h): `:run x.lua "x y" z` passes
 * arg = {"x y", "z"}, as a shell would. */
#include "words.h"

#include <stdlib.h>
#include <string.h>

char *next_word(const char **p) {
  const char *s = *p;
  while (*s == ' ' || *s == '\t') s++;
  if (!*s) {
    *p = s;
    return NULL;
  }
  char *out = malloc(strlen(s) + 1);
  if (!out) return NULL;
  size_t n = 0;
  char quote = 0;
  for (; *s; s++) {
    if (quote) {
      if (*s == quote) quote = 0;
      else if (*s == '\\' && quote == '"' && s[1]) out[n++] = *++s;
      else out[n++] = *s;
    } else if (*s == ' ' || *s == '\t') {
      break;
    } else if (*s == '"' || *s == '\'') {
      quote = *s;
    } else if (*s == '\\' && s[1]) {
      out[n++] = *++s;
    } else {
      out[n++] = *s;
    }
  }
  out[n] = 0;
  *p = s;
  return out;
}
