/* pty helpers for the REPL tests. */
#define _GNU_SOURCE
#include "repl_pty.h"

#include <ctype.h>
#include <dirent.h>
#include <ftw.h>
#include <poll.h>
#include <pty.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

const char *llmlab_path;
char home_dir[256];

double pty_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Sessions not yet ended by finish(): a test that fails an assertion leaves its session
 * behind (cmocka jumps out of the test), and its ranks, each in a process group of its own
 * under mpirun, would go on (spinning, for a test about an endless loop) after the test binary
 * has exited, slowing every later test. At exit each one left is ended. */
#define MAX_LIVE 64
static pid_t live[MAX_LIVE];

static void remember(pid_t pid) {
  for (int i = 0; i < MAX_LIVE; i++)
    if (live[i] == 0) {
      live[i] = pid;
      return;
    }
}

static void forget(pid_t pid) {
  for (int i = 0; i < MAX_LIVE; i++)
    if (live[i] == pid) live[i] = 0;
}

/* SIGKILL to every process of session sid (forkpty made the spawned process its leader) */
static void kill_session_members(pid_t sid) {
  DIR *d = opendir("/proc");
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (!isdigit((unsigned char)e->d_name[0])) continue;
    char path[300], stat[512];
    snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    size_t n = fread(stat, 1, sizeof stat - 1, f);
    fclose(f);
    stat[n] = 0;
    const char *p = strrchr(stat, ')'); /* the command name may hold spaces and parentheses */
    int ppid, pgrp, session;
    char state;
    if (p && sscanf(p + 1, " %c %d %d %d", &state, &ppid, &pgrp, &session) == 4 && session == sid)
      kill((pid_t)atoi(e->d_name), SIGKILL);
  }
  closedir(d);
}

/* SIGTERM first (mpirun passes it on to the ranks), then SIGKILL to whatever is left */
static void end_session(pid_t pid) {
  int st;
  kill(pid, SIGTERM);
  for (double end = pty_now() + 3; pty_now() < end && waitpid(pid, &st, WNOHANG) == 0;) usleep(20000);
  kill_session_members(pid);
  kill(pid, SIGKILL);
  waitpid(pid, &st, WNOHANG);
  forget(pid);
}

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw) {
  (void)st, (void)type, (void)ftw;
  remove(path);
  return 0;
}

/* at exit: the sessions still running end, and the test's HOME (its history, the scripts it
 * wrote) goes with them: each test run left a /tmp/llmlab-repl-test-PID behind */
static void end_sessions_left(void) {
  for (int i = 0; i < MAX_LIVE; i++)
    if (live[i]) end_session(live[i]);
  if (home_dir[0]) nftw(home_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

void spawn(session *s, char *const argv[]) {
  memset(s, 0, sizeof *s);
  struct winsize ws = {.ws_row = 40, .ws_col = 160};
  s->pid = forkpty(&s->fd, NULL, NULL, &ws);
  assert_true(s->pid >= 0);
  if (s->pid == 0) {
    setenv("TERM", "dumb", 1);
    setenv("HOME", home_dir, 1);
    execvp(argv[0], argv);
    _exit(127);
  }
  remember(s->pid);
}

int expect(session *s, const char *text, double timeout) {
  double end = pty_now() + timeout;
  for (;;) {
    s->buf[s->len] = 0;
    char *hit = strstr(s->buf + s->mark, text);
    if (hit) {
      s->mark = (size_t)(hit - s->buf) + strlen(text);
      return 1;
    }
    double left = end - pty_now();
    if (left <= 0) break;
    struct pollfd p = {.fd = s->fd, .events = POLLIN};
    if (poll(&p, 1, (int)(left * 1000) + 1) <= 0) continue;
    if (s->len + 1 >= sizeof s->buf) break;
    ssize_t n = read(s->fd, s->buf + s->len, sizeof s->buf - 1 - s->len);
    if (n <= 0) break;
    s->len += (size_t)n;
  }
  fprintf(stderr, "--- expected %s; the screen so far:\n%s\n---\n", text, s->buf + s->mark);
  return 0;
}

int expectf(session *s, double timeout, const char *fmt, ...) {
  char text[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  return expect(s, text, timeout);
}

int occurrences(session *s, const char *text) {
  s->buf[s->len] = 0;
  int n = 0;
  for (const char *p = s->buf + s->mark; (p = strstr(p, text)); p += strlen(text)) n++;
  return n;
}

void pump(session *s, double timeout) {
  struct pollfd p = {.fd = s->fd, .events = POLLIN};
  if (s->len + 1 >= sizeof s->buf || poll(&p, 1, (int)(timeout * 1000)) <= 0) return;
  ssize_t n = read(s->fd, s->buf + s->len, sizeof s->buf - 1 - s->len);
  if (n > 0) s->len += (size_t)n;
  s->buf[s->len] = 0;
}

void type(session *s, const char *keys) {
  size_t n = strlen(keys);
  assert_int_equal(write(s->fd, keys, n), (ssize_t)n);
}

int finish(session *s, double timeout) {
  double end = pty_now() + timeout;
  int st;
  while (pty_now() < end) {
    char sink[4096];
    struct pollfd p = {.fd = s->fd, .events = POLLIN};
    if (poll(&p, 1, 50) > 0 && read(s->fd, sink, sizeof sink) <= 0) { /* pty closed */ }
    pid_t r = waitpid(s->pid, &st, WNOHANG);
    if (r == s->pid) {
      s->have_modes = tcgetattr(s->fd, &s->modes) == 0; /* the pty keeps the modes it was left in */
      close(s->fd);
      forget(s->pid);
      return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }
  }
  end_session(s->pid);
  close(s->fd);
  return -1;
}

int board_shows(session *s, const char *state, int busy, double timeout) {
  double end = pty_now() + timeout;
  char running[64], traceback[64];
  snprintf(running, sizeof running, "rank %d: running Lua", busy);
  snprintf(traceback, sizeof traceback, "rank %d stack traceback:", busy);
  while (pty_now() < end) {
    type(s, "\x14");
    if (!expect(s, "^T every rank:", 10)) return 0;
    size_t block_at = s->mark;
    if (!expect(s, traceback, 10)) return 0; /* the states come first, then the tracebacks */
    char kept = s->buf[s->mark];
    s->buf[s->mark] = 0;
    int shown = strstr(s->buf + block_at, state) != NULL, spinning = strstr(s->buf + block_at, running) != NULL;
    s->buf[s->mark] = kept;
    if (!spinning) return 0; /* the busy rank stopped early: what follows would not be tested */
    if (shown) return 1;
    usleep(200000);
  }
  return 0;
}

void write_text_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

void start_ranks(session *s, const char *n) {
  char *argv[] = {(char *)llmlab_path, "-n", (char *)n, NULL};
  spawn(s, argv);
  assert_true(expect(s, "> ", 30));
}

void pty_setup(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s path/to/llmlab\n", argv[0]);
    exit(2);
  }
  llmlab_path = argv[1];
  snprintf(home_dir, sizeof home_dir, "/tmp/llmlab-repl-test-%d", (int)getpid());
  mkdir(home_dir, 0700);
  signal(SIGPIPE, SIG_IGN);
  atexit(end_sessions_left);
}
