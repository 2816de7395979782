/* Finding and driving rank 0's terminal. When rank 0 is not in the terminal's foreground
 * process group it makes its own group the foreground one, so that reading does not stop
 * the process (SIGTTIN) and Ctrl-C reaches rank 0 rather than mpirun, which would turn it
 * into killing the job; the previous foreground group is restored at exit. */
#define _GNU_SOURCE
#include "terminal.h"

#include <fcntl.h>
#include <readline/history.h>
#include <readline/readline.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

static char history_path[4096];

/* The terminal behind our parent's stdin (mpirun's), if it has one. */
static int open_parent_tty(void) {
  char link[64], target[4096];
  snprintf(link, sizeof link, "/proc/%d/fd/0", (int)getppid());
  ssize_t n = readlink(link, target, sizeof target - 1);
  if (n <= 0) return -1;
  target[n] = 0;
  if (strncmp(target, "/dev/", 5) != 0) return -1;
  int fd = open(target, O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (fd >= 0 && !isatty(fd)) {
    close(fd);
    return -1;
  }
  return fd;
}

static void take_foreground(terminal *t) {
  t->saved_fg = -1;
  pid_t fg = tcgetpgrp(t->fd);
  if (fg < 0 || fg == getpgrp()) return;
  signal(SIGTTOU, SIG_IGN);
  if (tcsetpgrp(t->fd, getpgrp()) == 0) t->saved_fg = fg;
}

void terminal_open(terminal *t) {
  memset(t, 0, sizeof *t);
  t->fd = -1;
  t->saved_fg = -1;
  t->in = stdin;
  t->out = stdout;
  if (isatty(STDIN_FILENO)) {
    t->interactive = 1;
  } else {
    const char *env = getenv("LLMLAB_TTY");
    int fd = env && *env ? open(env, O_RDWR | O_NOCTTY | O_CLOEXEC) : open_parent_tty();
    if (fd >= 0) {
      t->fd = fd;
      t->in = fdopen(fd, "r");
      t->out = fdopen(dup(fd), "w");
      t->interactive = t->in && t->out;
      if (!t->interactive) {
        t->in = stdin;
        t->out = stdout;
      } else {
        take_foreground(t);
      }
    }
  }
  if (t->interactive) {
    rl_instream = t->in;
    rl_outstream = t->out;
    rl_readline_name = "llmlab";
    const char *home = getenv("HOME");
    if (home) {
      snprintf(history_path, sizeof history_path, "%s/.llmlab_history", home);
      read_history(history_path);
    }
  }
}

void terminal_close(terminal *t) {
  if (t->interactive && history_path[0]) {
    stifle_history(1000);
    write_history(history_path);
  }
  if (t->saved_fg >= 0 && t->fd >= 0) tcsetpgrp(t->fd, t->saved_fg);
  if (t->fd >= 0) {
    fclose(t->in);
    fclose(t->out);
  }
}

char *terminal_readline(terminal *t, const char *prompt) {
  if (t->interactive) return readline(prompt);
  char *line = NULL;
  size_t cap = 0;
  ssize_t n = getline(&line, &cap, t->in);
  if (n < 0) {
    free(line);
    return NULL;
  }
  if (n > 0 && line[n - 1] == '\n') line[n - 1] = 0;
  return line;
}

void terminal_add_history(terminal *t, const char *line) {
  if (t->interactive && line[0]) add_history(line);
}
