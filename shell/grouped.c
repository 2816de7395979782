/* Grouping per-rank output for display (see grouped.h). */
#define _GNU_SOURCE
#include "grouped.h"

#include <stdlib.h>
#include <string.h>

#include "runtime/lab_control.h"

#define MARK_OPEN "\xc2\xab"  /* « : where the ranks' lines differ */
#define MARK_CLOSE "\xc2\xbb" /* » */

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

/* ---- one rank's text as lines: a progress line rewritten with \r shows its last state ---- */

typedef struct {
  char **line;
  int n;
} lines;

static lines split_lines(const char *text, int64_t len) {
  lines ls = {0};
  int cap = 0;
  int64_t i = 0;
  while (i < len) {
    int64_t j = i;
    while (j < len && text[j] != '\n') j++;
    int64_t end = j;
    if (end > i && text[end - 1] == '\r') end--;
    int64_t start = i;
    for (int64_t k = i; k < end; k++)
      if (text[k] == '\r') start = k + 1;
    if (ls.n == cap) {
      char **grown = realloc(ls.line, sizeof *grown * (size_t)(cap = cap ? cap * 2 : 16));
      if (!grown) break;
      ls.line = grown;
    }
    ls.line[ls.n++] = strndup(text + start, (size_t)(end - start));
    i = j + 1;
  }
  return ls;
}

static void free_lines(lines *ls) {
  for (int i = 0; i < ls->n; i++) free(ls->line[i]);
  free(ls->line);
}

/* Texts that differ only where each names its own rank ("rank 1: bad" on rank 1, "rank 2: bad"
 * on rank 2) are one text: a and b (of ranks ra and rb) compare equal when, read side by side,
 * they differ only where a says "rank ra" and b says "rank rb" (a desync report listing every
 * rank stays equal: both name rank 0 there). Where they fold, marks[i] of a is set (if given). */
static int own_rank_at(const char *p, const char *start, const char *num, size_t nl) {
  if (strncmp(p, "rank ", 5) != 0 || strncmp(p + 5, num, nl) != 0) return 0;
  if (p[5 + nl] >= '0' && p[5 + nl] <= '9') return 0;
  return p == start || !((p[-1] >= 'a' && p[-1] <= 'z') || (p[-1] >= 'A' && p[-1] <= 'Z'));
}

static int equal_but_rank(const char *a, int ra, const char *b, int rb, char *marks) {
  char na[16], nb[16];
  size_t la = (size_t)snprintf(na, sizeof na, "%d", ra), lb = (size_t)snprintf(nb, sizeof nb, "%d", rb);
  const char *p = a, *q = b;
  while (*p && *q) {
    if (ra != rb && own_rank_at(p, a, na, la) && own_rank_at(q, b, nb, lb)) {
      if (marks) marks[p - a] = 1;
      p += 5 + la;
      q += 5 + lb;
      continue;
    }
    if (*p != *q) return 0;
    p++;
    q++;
  }
  return !*p && !*q;
}

/* a's text with "rank «N»" where marks say it folded (malloc'ed) */
static char *render(const char *a, int ra, const char *marks) {
  char na[16];
  size_t la = (size_t)snprintf(na, sizeof na, "%d", ra), n = strlen(a), o = 0;
  char *out = malloc(n * 3 + 16);
  if (!out) return NULL;
  for (size_t i = 0; i < n;) {
    if (marks && marks[i]) {
      o += (size_t)sprintf(out + o, "rank " MARK_OPEN "N" MARK_CLOSE);
      i += 5 + la;
      continue;
    }
    out[o++] = a[i++];
  }
  out[o] = 0;
  return out;
}

static void print_line(FILE *out, const char *prefix, const char *line) {
  if (prefix) fprintf(out, "[%s] ", prefix);
  fputs(line, out);
  fputc('\n', out);
}

/* line i of every present rank equal to rank r's (folding own-rank mentions into marks) */
static int line_group(int n, lines *ls, const int *present, int i, int r, int *member, const int *done, char *marks) {
  int all = 1;
  memset(member, 0, sizeof *member * (size_t)n);
  for (int q = 0; q < n; q++) {
    if (!present[q]) continue;
    if (!done[q] && equal_but_rank(ls[r].line[i], r, ls[q].line[i], q, marks)) member[q] = 1;
    else all = 0;
  }
  return all;
}

/* Line by line: a line every rank has is shown once, a line that differs is shown per group of
 * ranks with the differing part between « and ». */
static void print_by_line(FILE *out, int n, lines *ls, const int *present, int nlines) {
  int *member = calloc((size_t)n, sizeof *member), *done = calloc((size_t)n, sizeof *done);
  int *leader = calloc((size_t)n, sizeof *leader);
  char **shown = calloc((size_t)n, sizeof *shown);
  char set[1024];
  for (int i = 0; member && done && leader && shown && i < nlines; i++) {
    memset(done, 0, sizeof *done * (size_t)n);
    int ngroups = 0;
    for (int r = 0; r < n; r++) { /* the groups of this line, each rendered by its leader */
      if (!present[r] || done[r]) continue;
      char *marks = calloc(strlen(ls[r].line[i]) + 1, 1);
      line_group(n, ls, present, i, r, member, done, marks);
      for (int q = 0; q < n; q++) done[q] |= member[q];
      leader[ngroups] = r;
      shown[ngroups++] = render(ls[r].line[i], r, marks);
      free(marks);
    }
    /* the prefix and suffix every group's line shares */
    size_t pre = shown[0] ? strlen(shown[0]) : 0, suf = pre;
    for (int g = 1; g < ngroups; g++) {
      const char *a = shown[0], *b = shown[g];
      if (!a || !b) continue;
      size_t la = strlen(a), lb = strlen(b), k = 0;
      while (k < pre && k < lb && a[k] == b[k]) k++;
      pre = k;
      k = 0;
      while (k < suf && k < la && k < lb && a[la - 1 - k] == b[lb - 1 - k]) k++;
      suf = k;
    }
    while (pre > 0 && shown[0] && ((unsigned char)shown[0][pre] & 0xc0) == 0x80) pre--; /* whole UTF-8 characters */
    for (int g = 0; g < ngroups; g++) {
      memset(done, 0, sizeof *done * (size_t)n);
      for (int h = 0; h < g; h++) { /* ranks of earlier groups */
        line_group(n, ls, present, i, leader[h], member, done, NULL);
        for (int q = 0; q < n; q++) done[q] |= member[q];
      }
      line_group(n, ls, present, i, leader[g], member, done, NULL);
      rank_set_str(member, n, set, sizeof set);
      const char *l = shown[g] ? shown[g] : ls[leader[g]].line[i];
      size_t len = strlen(l), p = pre, s = suf;
      while (s > 0 && ((unsigned char)l[len - s] & 0xc0) == 0x80) s--;
      if (ngroups == 1) {
        print_line(out, set, l);
      } else {
        if (p + s > len) s = len - p; /* overlapping: "ab" vs "abab" */
        char *marked = NULL;
        if (asprintf(&marked, "%.*s" MARK_OPEN "%.*s" MARK_CLOSE "%s", (int)p, l, (int)(len - p - s), l + p, l + len - s) < 0)
          marked = NULL;
        print_line(out, set, marked ? marked : l);
        free(marked);
      }
    }
    for (int g = 0; g < ngroups; g++) free(shown[g]);
  }
  free(member);
  free(done);
  free(leader);
  free(shown);
}

void print_grouped(FILE *out, int n, const char *const *texts, const int64_t *lens, int prefix) {
  int *done = calloc((size_t)n, sizeof *done), *member = calloc((size_t)n, sizeof *member);
  int *present = calloc((size_t)n, sizeof *present);
  lines *ls = calloc((size_t)n, sizeof *ls);
  if (!done || !member || !ls || !present) goto out;
  int nlines = -1, same_count = 1;
  for (int r = 0; r < n; r++) {
    if (lens[r] == 0) continue;
    present[r] = 1;
    ls[r] = split_lines(texts[r], lens[r]);
    if (nlines < 0) nlines = ls[r].n;
    else if (nlines != ls[r].n) same_count = 0;
  }
  /* equal texts (but for their own rank): one block per group, in order of the lowest rank */
  int groups = 0, fold = prefix; /* a world of one names no ranks */
  for (int r = 0; r < n; r++) {
    if (!present[r] || member[r]) continue;
    groups++;
    for (int q = r; q < n; q++) {
      if (!present[q] || member[q] || ls[q].n != ls[r].n) continue;
      int same = 1;
      for (int i = 0; same && i < ls[r].n; i++)
        same = fold ? equal_but_rank(ls[r].line[i], r, ls[q].line[i], q, NULL) : strcmp(ls[r].line[i], ls[q].line[i]) == 0;
      if (same) member[q] = r + 1;
    }
  }
  if (prefix && groups > 1 && same_count && nlines >= 2) {
    /* several lines, most of them alike: line by line, so what differs stands out */
    int common = 0, first = -1;
    for (int r = 0; r < n && first < 0; r++)
      if (present[r]) first = r;
    for (int i = 0; i < nlines; i++) {
      int all = 1;
      for (int r = first + 1; r < n && all; r++)
        if (present[r]) all = equal_but_rank(ls[first].line[i], first, ls[r].line[i], r, NULL);
      common += all;
    }
    if (2 * common >= nlines) {
      print_by_line(out, n, ls, present, nlines);
      goto out;
    }
  }
  for (int r = 0; r < n; r++) {
    if (!present[r] || done[r]) continue;
    char set[1024];
    int *m = calloc((size_t)n, sizeof *m);
    if (!m) break;
    int size = 0;
    for (int q = r; q < n; q++)
      if (member[q] == member[r]) m[q] = done[q] = 1, size++;
    rank_set_str(m, n, set, sizeof set);
    for (int i = 0; i < ls[r].n; i++) {
      char *marks = size > 1 ? calloc(strlen(ls[r].line[i]) + 1, 1) : NULL;
      for (int q = r + 1; marks && q < n; q++)
        if (m[q]) equal_but_rank(ls[r].line[i], r, ls[q].line[i], q, marks);
      char *l = marks ? render(ls[r].line[i], r, marks) : NULL;
      print_line(out, prefix ? set : NULL, l ? l : ls[r].line[i]);
      free(l);
      free(marks);
    }
    free(m);
  }
out:
  fflush(out);
  for (int r = 0; ls && r < n; r++) free_lines(&ls[r]);
  free(ls);
  free(present);
  free(done);
  free(member);
}

void print_gathered(FILE *out, int n, const char *all, const int64_t *lens, int prefix) {
  const char **texts = malloc(sizeof *texts * (size_t)n);
  if (!texts) return;
  int64_t off = 0;
  for (int r = 0; r < n; r++) {
    texts[r] = all + off;
    off += lens[r];
  }
  print_grouped(out, n, texts, lens, prefix);
  free(texts);
}

void print_from_all(FILE *out, const char *mine, int64_t len, int prefix) {
  char *all = NULL;
  int64_t *lens = NULL;
  lab_ctl_gather(mine ? mine : "", mine ? len : 0, &all, &lens);
  if (lab_ctl_rank() == 0 && all && lens) print_gathered(out, lab_ctl_size(), all, lens, prefix);
  free(all);
  free(lens);
}
