/* pty helpers for the REPL tests. */
#define _GNU_SOURCE
#include "repl_pty.h"

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
      return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }
  }
  kill(s->pid, SIGKILL);
  waitpid(s->pid, &st, 0);
  close(s->fd);
  return -1;
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
}
