/* The -n launcher. mpirun needs --oversubscribe for more ranks than cores and
 * --allow-run-as-root as root; binding is turned off because ranks set their own thread
 * counts (cores / ranks) and a rank pinned to one core would starve its BLAS threads. Every
 * LLMLAB_* variable is forwarded (-x): mpirun gives ranks on other hosts only what it is told to
 * (a hostfile in OMPI_MCA_orte_default_hostfile, or LLMLAB_MPIRUN naming a wrapper, spans hosts).
 * On a terminal the launcher stays as mpirun's parent and gives the terminal its modes back
 * when mpirun ends, however it ends (rank 0 restores them on SIGTERM too, but mpirun's SIGKILL
 * can overtake that handler on a loaded machine). */
#define _GNU_SOURCE
#include "launcher.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
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

static volatile sig_atomic_t mpirun_pid;

/* SIGTERM or SIGHUP to the launcher is meant for the job: mpirun passes it on to every rank */
static void forward_to_mpirun(int sig) {
  if (mpirun_pid > 0) kill((pid_t)mpirun_pid, sig);
}

/* Runs av under a parent that restores the terminal's modes when it ends; returns only if the
 * fork fails (the caller then execs in place). Exits with mpirun's status, or dies of its signal. */
static void run_and_restore_terminal(char **av) {
  struct termios modes;
  /* only in the terminal's foreground: a background job (under timeout(1), say) that set the
   * modes would be stopped by SIGTTOU, and its modes are not the user's to restore anyway */
  if (!isatty(STDIN_FILENO) || tcgetpgrp(STDIN_FILENO) != getpgrp() || tcgetattr(STDIN_FILENO, &modes) != 0) return;
  pid_t pid = fork();
  if (pid < 0) return;
  if (pid == 0) {
    execvp(av[0], av);
    fprintf(stderr, "llmlab: cannot run %s: %s\n", av[0], strerror(errno));
    _exit(127);
  }
  mpirun_pid = pid;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = forward_to_mpirun;
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGHUP, &sa, NULL);
  /* keys that the terminal turns into signals reach mpirun directly (same process group) */
  signal(SIGINT, SIG_IGN);
  signal(SIGQUIT, SIG_IGN);
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
  signal(SIGTTOU, SIG_IGN); /* the job may have been moved to the background meanwhile */
  tcsetattr(STDIN_FILENO, TCSADRAIN, &modes);
  if (WIFSIGNALED(st)) {
    signal(WTERMSIG(st), SIG_DFL);
    raise(WTERMSIG(st));
  }
  exit(WIFEXITED(st) ? WEXITSTATUS(st) : 1);
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
  run_and_restore_terminal(av);
  execvp(av[0], av);
  fprintf(stderr, "llmlab: cannot run %s: ", av[0]);
  perror(NULL);
  free(av);
  return -1;
}
