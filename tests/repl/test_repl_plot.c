/* lab.plot in the REPL through a pseudo-terminal, at 2 and 4 ranks: every rank of the chunk
 * calls it, one chart comes back, drawn by the group's first rank ([0], or [1] under %on 1-2),
 * with a series per rank when the ranks differ and one when they agree; its width follows rank
 * 0's terminal (resized between chunks) less the "[0] " label; colour on a colour terminal,
 * none with NO_COLOR or TERM=dumb (the harness's default). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <cmocka.h>

#include "repl_pty.h"

static const char *ranks = "4";
static int nranks = 4;

/* the widest line (in characters, colour codes left out) between from and the next prompt */
static int widest_line(const char *from) {
  int widest = 0, cur = 0;
  for (const char *p = from; *p; p++) {
    if (p[0] == '>' && p[1] == ' ' && (p == from || p[-1] == '\n')) break;
    if (*p == '\x1b') { /* CSI ... final byte */
      p++;
      if (*p == '[')
        while (p[1] && !(p[1] >= '@' && p[1] <= '~')) p++;
      if (p[1]) p++;
      continue;
    }
    if (*p == '\n' || *p == '\r') {
      if (cur > widest) widest = cur;
      cur = 0;
    } else if (((unsigned char)*p & 0xC0) != 0x80) {
      cur++; /* a character starts here (not a UTF-8 continuation byte) */
    }
  }
  return cur > widest ? cur : widest;
}

static void start_with(session *s, const char *env_a, const char *env_b) {
  char *argv[] = {"env", "-u", "NO_COLOR", (char *)env_a, (char *)env_b, (char *)llmlab_path, "-n", (char *)ranks, NULL};
  spawn(s, argv);
  assert_true(expect(s, "> ", 30));
}

static void test_grouping_and_width(void **state) {
  (void)state;
  session s;
  start_with(&s, "TERM=xterm-256color", "LLMLAB_X=1");
  char want[256];
  /* ranks differ: a series per rank, drawn once, on rank 0, in colour */
  type(&s, "lab.plot({1, 2, 3 + lab.dist.rank()}, {height = 4, title = 'differ'})\r");
  assert_true(expect(&s, "[0]", 20));
  assert_true(expect(&s, "differ", 20));
  size_t chart = s.mark;
  for (int r = 0; r < nranks; r++) {
    snprintf(want, sizeof want, "rank %d", r);
    assert_true(expect(&s, want, 20));
  }
  assert_true(expect(&s, "> ", 20));
  s.buf[s.len] = 0;
  assert_non_null(strstr(s.buf + chart, "\x1b[34m")); /* the first series' colour */
  assert_null(strstr(s.buf + chart, "[1] "));         /* no other rank printed */
  int w = widest_line(s.buf + chart);
  fprintf(stderr, "chart at %s ranks on a 160-column terminal: %d columns with the [0] label\n", ranks, w);
  assert_int_equal(w, 160);
  /* ranks agree: one series, named for all of them */
  type(&s, "lab.plot({1, 2, 3}, {height = 4, title = 'agree'})\r");
  assert_true(expect(&s, "agree", 20));
  chart = s.mark;
  snprintf(want, sizeof want, " ranks 0-%d", nranks - 1);
  assert_true(expect(&s, want, 20));
  assert_true(expect(&s, "> ", 20));
  s.buf[s.len] = 0;
  assert_null(strstr(s.buf + chart, "rank 1"));
  /* a chart every rank draws alike (lab.plot.line): grouped as [0-N], sized for that label */
  type(&s, "lab.plot.line({1, 2, 3}, {height = 4, title = 'everywhere'})\r");
  assert_true(expect(&s, "everywhere", 20));
  chart = s.mark;
  assert_true(expect(&s, "> ", 20));
  s.buf[s.len] = 0;
  snprintf(want, sizeof want, "[0-%d] ", nranks - 1);
  assert_non_null(strstr(s.buf + chart, want));
  assert_int_equal(widest_line(s.buf + chart), 160);
  /* a narrower terminal: the next chunk's chart follows it */
  struct winsize ws = {.ws_row = 40, .ws_col = 70};
  ioctl(s.fd, TIOCSWINSZ, &ws);
  type(&s, "lab.plot({3, 1, 2}, {title = 'narrow'})\r");
  assert_true(expect(&s, "narrow", 20));
  chart = s.mark;
  assert_true(expect(&s, "> ", 20));
  s.buf[s.len] = 0;
  w = widest_line(s.buf + chart);
  assert_true(w <= 70 && w >= 66);
  /* %on 1-N: the group of ranks 1 and up; rank 1, its first, draws */
  snprintf(want, sizeof want, "%%on 1-%d lab.plot({lab.dist.rank(), 5}, {kind = 'bar', labels = {'mine', 'five'}})\r",
           nranks - 1);
  type(&s, want);
  assert_true(expect(&s, "[1] mine", 20));
  chart = s.mark;
  for (int r = 1; nranks > 2 && r < nranks; r++) { /* a legend when the group's ranks differ */
    snprintf(want, sizeof want, "rank %d", r);
    assert_true(expect(&s, want, 20));
  }
  assert_true(expect(&s, "> ", 20));
  s.buf[s.len] = 0;
  assert_null(strstr(s.buf + chart, "rank 0"));
  assert_null(strstr(s.buf + chart, "[0] "));
  type(&s, "\x04");
  assert_int_equal(finish(&s, 30), 0);
}

static void test_no_colour(void **state) {
  (void)state;
  session s;
  start_with(&s, "TERM=xterm-256color", "NO_COLOR=1");
  type(&s, "lab.plot({1, 2, 3 + lab.dist.rank()}, {height = 4, title = 'plain'})\r");
  assert_true(expect(&s, "plain", 20));
  size_t chart = s.mark;
  assert_true(expect(&s, "rank 1", 20));
  assert_true(expect(&s, "> ", 20));
  s.buf[s.len] = 0;
  assert_null(strstr(s.buf + chart, "\x1b[3")); /* no colour codes */
  assert_non_null(strstr(s.buf + chart, "╌╌╌ rank 1")); /* series told apart by dashes */
  type(&s, "\x04");
  assert_int_equal(finish(&s, 30), 0);
}

int main(int argc, char **argv) {
  pty_setup(argc, argv);
  if (argc > 2) ranks = argv[2];
  nranks = atoi(ranks);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_grouping_and_width),
      cmocka_unit_test(test_no_colour),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
