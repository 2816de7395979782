/* Finding and driving rank 0's terminal; see terminal.h for why keystrokes are relayed. */
#define _GNU_SOURCE
#include "terminal.h"

#include <fcntl.h>
#include <readline/history.h>
#include <readline/readline.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

static char history_path[4096];
static terminal *current;
static struct termios original_modes; /* the terminal as we found it */
static int have_original;

/* The terminal behind our parent's stdin (mpirun's), if it has one. */
static int open_parent_tty(void) {
  char link[64], target[1024];
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

/* readline's terminal preparation, applied to the real terminal rather than the pipe:
 * raw input, no echo (readline draws), and no signals from ^C/^Z/^\ so that mpirun,
 * the foreground job, never sees them: they reach readline as bytes. */
extern int _rl_echoing_p; /* readline draws typed text only when the terminal "echoes" */

static int raw_now; /* set once: the terminal stays raw for the session */

static void set_raw(void) {
  if (!have_original || raw_now) return;
  raw_now = 1;
  struct termios raw = original_modes;
  raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO | ISIG | IEXTEN);
  raw.c_iflag &= ~(tcflag_t)(IXON | ICRNL);
  raw.c_cc[VMIN] = 1;
  raw.c_cc[VTIME] = 0;
  tcsetattr(current->tty_fd, TCSADRAIN, &raw);
}

static void relay_prep(int meta) {
  (void)meta;
  _rl_echoing_p = 1;
  set_raw();
  struct winsize ws;
  if (ioctl(current->tty_fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) rl_set_screen_size(ws.ws_row, ws.ws_col);
}

/* Between lines the keys stay raw too: a Ctrl-C typed while a chunk is being sent out
 * must not become a SIGINT for mpirun. The modes are given back at terminal_close. */
static void relay_deprep(void) {}

static void restore_modes(void) {
  if (have_original) tcsetattr(current->tty_fd, TCSADRAIN, &original_modes);
  raw_now = 0;
}

/* Whatever ends the job (mpirun killed: it sends SIGTERM to every rank first; a hang-up; a
 * crash), the terminal gets its modes back: tcsetattr is async-signal-safe. */
static int mode_fd = -1;
static void restore_and_die(int sig) {
  if (mode_fd >= 0) tcsetattr(mode_fd, TCSANOW, &original_modes);
  signal(sig, SIG_DFL);
  raise(sig);
}

static void restore_on_fatal_signals(int fd) {
  mode_fd = fd;
  const int sigs[] = {SIGTERM, SIGHUP, SIGQUIT, SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL};
  for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) {
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = restore_and_die;
    sa.sa_flags = SA_RESETHAND;
    if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_DFL) sigaction(sigs[i], &sa, NULL);
  }
}

/* While a chunk runs the keys stay raw too: Ctrl-C must arrive as a byte (and not as a
 * SIGINT to mpirun, the foreground job, which would kill the job). The output of the
 * chunk is written with \r\n by the REPL, so cooked output is not needed. */
void terminal_run_mode(terminal *t) {
  if (t->relayed) set_raw();
}

static int ctrl_c_key(int count, int key) {
  (void)count;
  (void)key;
  terminal_interrupt_line(current);
  return 0;
}

void terminal_interrupt_line(terminal *t) {
  if (!t->interactive) return;
  t->interrupted = 1;
  fputs("^C\n", t->out);
  fflush(t->out);
  rl_replace_line("", 0);
  rl_point = rl_end = 0;
  rl_done = 1; /* readline returns the (now empty) line: the reader sees the interrupt */
}

int terminal_take_interrupt(terminal *t) {
  int was = t->interrupted;
  t->interrupted = 0;
  return was;
}

void terminal_open(terminal *t) {
  memset(t, 0, sizeof *t);
  t->tty_fd = -1;
  t->in = stdin;
  t->out = stdout;
  current = t;
  if (isatty(STDIN_FILENO)) {
    t->interactive = 1;
  } else {
    const char *env = getenv("LLMLAB_TTY");
    int fd = env && *env ? open(env, O_RDWR | O_NOCTTY | O_CLOEXEC) : open_parent_tty();
    FILE *out = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (out) {
      t->tty_fd = fd;
      t->out = out;
      t->interactive = t->relayed = 1;
      /* rank 0 is not in the foreground group: changing the terminal's modes would stop it */
      signal(SIGTTOU, SIG_IGN);
      have_original = tcgetattr(fd, &original_modes) == 0;
      if (have_original) restore_on_fatal_signals(fd);
      rl_prep_term_function = relay_prep;
      rl_deprep_term_function = relay_deprep;
      rl_bind_key(3, ctrl_c_key);
    } else if (fd >= 0) {
      close(fd);
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
  if (t->relayed) restore_modes();
  mode_fd = -1;
  if (t->tty_fd >= 0) fclose(t->out);
  current = NULL;
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
