/* The -n launcher. mpirun needs --oversubscribe for more ranks than cores and
 * --allow-run-as-root as root; binding is turned off because ranks set their own thread
 * counts (cores / ranks) and a rank pinned to one core would starve its BLAS threads. Every
 * LLMLAB_* variable is forwarded (-x): mpirun gives ranks on other hosts only what it is told to
 * (a hostfile in OMPI_MCA_orte_default_hostfile, or LLMLAB_MPIRUN naming a wrapper, spans hosts). */
#define _GNU_SOURCE
#include "launcher.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

extern char **environ;

int launched_by_mpi(void) {
  return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || getenv("PMI_RANK");
}

/* The ranks' stdout is mpirun's (a pipe, or a pty of its own), so they cannot see whether the
 * user's is a terminal: LLMLAB_TERM says it ("<columns>" or "none"; lua/lab/plot_term.lua). */
static void tell_ranks_the_terminal(void) {
  struct winsize ws;
  char cols[32] = "none";
  if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
    snprintf(cols, sizeof cols, "%d", (int)ws.ws_col);
  else if (isatty(STDOUT_FILENO))
    snprintf(cols, sizeof cols, "80");
  setenv("LLMLAB_TERM", cols, 0); /* a caller's own setting stands */
}

int launch_under_mpirun(int n, int argc, char **argv, int n_index, int n_args) {
  char self[4096];
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0) {
    perror("llmlab: cannot find its own executable");
    return -1;
  }
  self[len] = 0;
  tell_ranks_the_terminal(); /* before the -x list below, so LLMLAB_TERM reaches every host */
  size_t settings = 0;
  for (char **e = environ; *e; e++) settings += strncmp(*e, "LLMLAB_", 7) == 0;
  char **av = calloc((size_t)argc + 16 + 2 * settings, sizeof *av);
  if (!av) return -1;
  int k = 0;
  const char *mpirun = getenv("LLMLAB_MPIRUN");
  av[k++] = (char *)(mpirun && *mpirun ? mpirun : LLMLAB_MPIRUN);
  static char np[32];
  snprintf(np, sizeof np, "%d", n);
  av[k++] = "-np";
  av[k++] = np;
  if (n > sysconf(_SC_NPROCESSORS_ONLN)) av[k++] = "--oversubscribe";
  if (geteuid() == 0) av[k++] = "--allow-run-as-root";
  av[k++] = "--bind-to";
  av[k++] = "none";
  for (char **e = environ; *e; e++) {
    char *eq = strchr(*e, '=');
    if (strncmp(*e, "LLMLAB_", 7) || !eq) continue;
    av[k++] = "-x";
    av[k++] = strndup(*e, (size_t)(eq - *e)); /* the name: mpirun takes the value from here */
  }
  av[k++] = self;
  for (int i = 1; i < argc; i++) {
    if (i >= n_index && i < n_index + n_args) continue;
    av[k++] = argv[i];
  }
  av[k] = NULL;
  execvp(av[0], av);
  fprintf(stderr, "llmlab: cannot run %s: ", av[0]);
  perror(NULL);
  free(av);
  return -1;
}
