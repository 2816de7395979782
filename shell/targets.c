/* The ranks a chunk goes to: "all" or a list ("1,3", "0-2") as typed after %on and :ranks,
 * and the group each such set of ranks runs its collectives on (see targets.h). */
#define _GNU_SOURCE
#include "targets.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Fills member[] (world size entries); returns -1 with a message for a bad spec. */
int parse_ranks(const char *spec, int *member, int n, char *err, size_t errn) {
  if (strcmp(spec, "all") == 0) {
    for (int r = 0; r < n; r++) member[r] = 1;
    return 0;
  }
  memset(member, 0, sizeof *member * (size_t)n);
  const char *p = spec;
  int any = 0;
  while (*p) {
    char *end;
    long a = strtol(p, &end, 10), b = a;
    if (end == p) break;
    p = end;
    if (*p == '-') {
      b = strtol(p + 1, &end, 10);
      if (end == p + 1) break;
      p = end;
    }
    if (a < 0 || b >= n || a > b) {
      if (a == b) snprintf(err, errn, "rank %ld is outside 0-%d (this world has %d ranks)", a, n - 1, n);
      else if (a > b) snprintf(err, errn, "the range %ld-%ld is empty (write the lower rank first)", a, b);
      else snprintf(err, errn, "ranks %ld-%ld go outside 0-%d (this world has %d ranks)", a, b, n - 1, n);
      return -1;
    }
    for (long r = a; r <= b; r++) member[r] = any = 1;
    if (*p == ',') p++;
    else break;
  }
  if (*p || !any) {
    snprintf(err, errn, "cannot read the rank list '%s' (use e.g. 1,3 or 0-2)", spec);
    return -1;
  }
  return 0;
}

/* The rank list after %on or :ranks: digits, commas and dashes, with spaces allowed around
 * commas and dashes (%on 1, 2 code). Copies it without spaces into spec; returns where the
 * code starts (after one space), or NULL when no list is there. */
const char *split_rank_list(const char *p, char *spec, size_t n) {
  while (*p == ' ' || *p == '\t') p++;
  size_t len = 0;
  const char *q = p;
  for (;;) {
    while (*q >= '0' && *q <= '9') {
      if (len + 1 < n) spec[len++] = *q;
      q++;
    }
    const char *r = q;
    while (*r == ' ' || *r == '\t') r++;
    if ((*r == ',' || *r == '-') && len > 0 && spec[len - 1] >= '0' && spec[len - 1] <= '9') {
      if (len + 1 < n) spec[len++] = *r;
      q = r + 1;
      while (*q == ' ' || *q == '\t') q++;
      continue;
    }
    break;
  }
  spec[len] = 0;
  if (strncmp(p, "all", 3) == 0 && (p[3] == 0 || p[3] == ' ' || p[3] == '\t')) {
    snprintf(spec, n, "all");
    q = p + 3;
  }
  if (!spec[0] || (*q && *q != ' ' && *q != '\t')) return NULL;
  while (*q == ' ' || *q == '\t') q++;
  return q;
}

/* the group of the targeted ranks; made once per target set, by every rank together */
typedef struct target_group {
  char spec[256];
  lab_group *group;
  struct target_group *next;
} target_group;
static target_group *targets;

lab_group *target_group_for(const char *spec, int in_target) {
  for (target_group *t = targets; t; t = t->next)
    if (strcmp(t->spec, spec) == 0) return t->group;
  lab_group *g = lab_dist_split(lab_dist_world(), in_target ? 0 : -1, lab_ctl_rank());
  target_group *t = calloc(1, sizeof *t);
  if (!t || !g) {
    free(t);
    return g;
  }
  snprintf(t->spec, sizeof t->spec, "%s", spec);
  t->group = g;
  t->next = targets;
  targets = t;
  return g;
}

/* When recovery gave up on a group, every rank forgets every target group (a non-member
 * cannot tell which one was lost, and all must make the next one together); they are made
 * again when next used, so an error never names a group the user did not make. The old
 * groups stay registered: a communicator with abandoned requests is never freed. */
void forget_targets(void) {
  while (targets) {
    target_group *t = targets;
    targets = t->next;
    free(t);
  }
}
