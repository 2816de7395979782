/* Grouping per-rank output for display. */
#include "grouped.h"

#include <stdlib.h>
#include <string.h>

void rank_set_str(const int *member, int n, char *buf, size_t size) {
  size_t used = 0;
  buf[0] = 0;
  for (int r = 0; r < n; r++) {
    if (!member[r]) continue;
    int end = r;
    while (end + 1 < n && member[end + 1]) end++;
    int w;
    if (end == r) w = snprintf(buf + used, size - used, used ? ",%d" : "%d", r);
    else w = snprintf(buf + used, size - used, used ? ",%d-%d" : "%d-%d", r, end);
    if (w < 0 || (size_t)w >= size - used) return;
    used += (size_t)w;
    r = end;
  }
}

static int same_text(const char *a, int64_t la, const char *b, int64_t lb) {
  return la == lb && (la == 0 || memcmp(a, b, (size_t)la) == 0);
}

static void print_prefixed(FILE *out, const char *prefix, const char *text, int64_t len) {
  int64_t i = 0;
  while (i < len) {
    int64_t j = i;
    while (j < len && text[j] != '\n') j++;
    /* a progress line rewritten with \r shows its last state, and never overwrites the label */
    int64_t end = j;
    if (end > i && text[end - 1] == '\r') end--;
    int64_t start = i;
    for (int64_t k = i; k < end; k++)
      if (text[k] == '\r') start = k + 1;
    if (prefix) fprintf(out, "[%s] ", prefix);
    fwrite(text + start, 1, (size_t)(end - start), out);
    fputc('\n', out);
    i = j + 1;
  }
}

void print_grouped(FILE *out, int n, const char *const *texts, const int64_t *lens, int prefix) {
  int *done = calloc((size_t)n, sizeof *done), *member = calloc((size_t)n, sizeof *member);
  if (!done || !member) {
    free(done);
    free(member);
    return;
  }
  for (int r = 0; r < n; r++) {
    if (done[r] || lens[r] == 0) continue;
    memset(member, 0, sizeof *member * (size_t)n);
    for (int q = r; q < n; q++)
      if (!done[q] && same_text(texts[r], lens[r], texts[q], lens[q])) member[q] = done[q] = 1;
    char set[1024];
    rank_set_str(member, n, set, sizeof set);
    print_prefixed(out, prefix ? set : NULL, texts[r], lens[r]);
  }
  fflush(out);
  free(done);
  free(member);
}
