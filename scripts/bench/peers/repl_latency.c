/* Measures the REPL round trip as a person sees it: through a pseudo-terminal, the time
 * from typing "=1<Enter>" to the grouped answer and the next prompt being on the screen.
 * usage: repl_latency path/to/llmlab ranks reps [think_ms] -> median and p90 in milliseconds.
 * think_ms pauses between lines as a typist would, so idle ranks have backed off to sleeping. */
#define _GNU_SOURCE
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static char buf[1 << 16];
static size_t len;

static int wait_for(int fd, const char *text, double timeout) {
  double end = now() + timeout;
  while (now() < end) {
    buf[len] = 0;
    if (strstr(buf, text)) return 1;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 100) <= 0) continue;
    ssize_t n = read(fd, buf + len, sizeof buf - 1 - len);
    if (n <= 0) return 0;
    len += (size_t)n;
  }
  return 0;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  if (argc < 4) return 2;
  int reps = atoi(argv[3]);
  int think_ms = argc > 4 ? atoi(argv[4]) : 0;
  int fd;
  struct winsize ws = {.ws_row = 40, .ws_col = 120};
  pid_t pid = forkpty(&fd, NULL, NULL, &ws);
  if (pid == 0) {
    setenv("TERM", "dumb", 1);
    execl(argv[1], argv[1], "-n", argv[2], (char *)NULL);
    _exit(127);
  }
  if (!wait_for(fd, "> ", 60)) return 1;
  double *t = calloc((size_t)reps, sizeof *t);
  char want[64];
  snprintf(want, sizeof want, "] 1\r\n> ");
  if (atoi(argv[2]) == 1) snprintf(want, sizeof want, "1\r\n> ");
  for (int i = 0; i < reps; i++) {
    if (think_ms > 0) usleep((useconds_t)think_ms * 1000);
    len = 0;
    double t0 = now();
    if (write(fd, "=1\r", 3) != 3) return 1;
    if (!wait_for(fd, want, 10)) {
      fprintf(stderr, "no answer; screen: %s\n", buf);
      return 1;
    }
    t[i] = (now() - t0) * 1e3;
  }
  if (write(fd, "\x04", 1) != 1) return 1;
  int st;
  waitpid(pid, &st, 0);
  qsort(t, (size_t)reps, sizeof *t, cmp);
  printf("%.3f %.3f\n", t[reps / 2], t[(reps * 9) / 10]);
  return 0;
}
