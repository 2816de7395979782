/* Settings across hosts: every LLMLAB_* variable is a setting of the job, but mpirun hands a
 * remote host's ranks only the variables it is told to forward (-x NAME; `llmlab -n` forwards
 * every LLMLAB_* one). At start-up each rank compares its settings with rank 0's and says which
 * differ, so a setting that did not travel (a watchdog that never fires on host 2) is named at
 * once rather than discovered as a hang. */
#define _GNU_SOURCE
#include "control_settings.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control_relay.h"
#include "place.h"

extern char **environ;

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* "NAME=value\n" for every setting, sorted (malloc'ed) */
static char *settings(void) {
  size_t n = 0, len = 1;
  for (char **e = environ; *e; e++)
    if (!strncmp(*e, "LLMLAB_", 7) && strncmp(*e, "LLMLAB_MPIRUN=", 14)) n++, len += strlen(*e) + 1;
  char **list = malloc((n + 1) * sizeof *list), *out = malloc(len);
  if (!list || !out) {
    free(list);
    free(out);
    return NULL;
  }
  n = 0;
  for (char **e = environ; *e; e++)
    if (!strncmp(*e, "LLMLAB_", 7) && strncmp(*e, "LLMLAB_MPIRUN=", 14)) list[n++] = *e;
  qsort(list, n, sizeof *list, by_name);
  out[0] = 0;
  for (size_t i = 0; i < n; i++) strcat(strcat(out, list[i]), "\n");
  free(list);
  return out;
}

/* the value of name in a "NAME=value\n" list, or NULL; *len its length */
static const char *value_in(const char *list, const char *name, size_t nlen, int *len) {
  for (const char *p = list; p && *p;) {
    const char *eol = strchr(p, '\n');
    if (!eol) break;
    if ((size_t)(eol - p) > nlen && !strncmp(p, name, nlen) && p[nlen] == '=') {
      *len = (int)(eol - p - (ptrdiff_t)nlen - 1);
      return p + nlen + 1;
    }
    p = eol + 1;
  }
  return NULL;
}

/* lines "NAME is X here but Y on rank 0" for names of `from` whose value in `other` differs */
static void differences(const char *from, const char *mine, const char *root, int from_root) {
  for (const char *p = from; *p;) {
    const char *eol = strchr(p, '\n'), *eq = strchr(p, '=');
    if (!eol || !eq || eq > eol) break;
    size_t nlen = (size_t)(eq - p);
    int ml = 0, rl = 0;
    const char *m = value_in(mine, p, nlen, &ml), *r = value_in(root, p, nlen, &rl);
    if (!(m && r) || ml != rl || strncmp(m, r, (size_t)ml)) {
      if (from_root || !r) /* each name once: from rank 0's list, or one rank 0 lacks */
        fprintf(stderr,
                "llmlab: rank %d%s: setting %.*s is %s%.*s%s here but %s%.*s%s on rank 0: pass it with mpirun -x %.*s "
                "(llmlab -n forwards every LLMLAB_* variable)\n",
                lab_ctl_rank(), lab_relay_host_label(lab_ctl_rank()), (int)nlen, p, m ? "'" : "", m ? ml : 5,
                m ? m : "unset", m ? "'" : "", r ? "'" : "", r ? rl : 5, r ? r : "unset", r ? "'" : "", (int)nlen, p);
    }
    p = eol + 1;
  }
}

void lab_settings_check(void) {
  if (lab_ctl_size() < 2) return;
  char *mine = settings();
  int len = mine && lab_ctl_rank() == 0 ? (int)strlen(mine) + 1 : 0;
  MPI_Bcast(&len, 1, MPI_INT, 0, MPI_COMM_WORLD);
  char *root = malloc((size_t)len + 1);
  if (!root) return;
  if (lab_ctl_rank() == 0 && mine) memcpy(root, mine, (size_t)len);
  MPI_Bcast(root, len, MPI_CHAR, 0, MPI_COMM_WORLD);
  root[len] = 0;
  if (lab_ctl_rank() != 0 && mine && strcmp(mine, root)) {
    differences(root, mine, root, 1);
    differences(mine, mine, root, 0);
    fflush(stderr);
  }
  free(mine);
  free(root);
}
