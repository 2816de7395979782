/* The prompt behaves as lua.c's, through a pseudo-terminal at 2 and 4 ranks: a line that reads
 * as an expression prints its value (`x`, `(x)`, `x.dtype` were sent to a `>>` prompt before);
 * Ctrl-C and Ctrl-D at `>>` discard the unfinished chunk (the next line is not appended to it,
 * and it is not run); the stepper's `p a, b` prints every value. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "repl_pty.h"

static const char *ranks = "4";
static int nranks = 4;

static void test_prompt_as_lua_c(void **state) {
  (void)state;
  session s;
  start_ranks(&s, ranks);
  char all[16], want[128];
  snprintf(all, sizeof all, "[0-%d]", nranks - 1);
  type(&s, "x = lab.ones(2); n = 41\r");
  assert_true(expect(&s, "> ", 20));
  type(&s, "n\r");
  snprintf(want, sizeof want, "%s 41\r\n", all);
  assert_true(expect(&s, want, 20));
  type(&s, "(n + 1)\r");
  snprintf(want, sizeof want, "%s 42\r\n", all);
  assert_true(expect(&s, want, 20));
  type(&s, "x.dtype\r");
  snprintf(want, sizeof want, "%s f32", all);
  assert_true(expect(&s, want, 20));
  /* Ctrl-C at >> drops the pending chunk: the next line runs alone */
  type(&s, "for i = 1, 3 do\r");
  assert_true(expect(&s, ">> ", 10));
  type(&s, "\x03");
  assert_true(expect(&s, "^C", 10));
  type(&s, "print('alone')\r");
  snprintf(want, sizeof want, "%s alone", all);
  assert_true(expect(&s, want, 20));
  /* Ctrl-D at >> drops it too (it used to run the unfinished chunk), and does not end the session */
  type(&s, "if true then print('never')\r");
  assert_true(expect(&s, ">> ", 10));
  type(&s, "\x04");
  type(&s, "=7 * 6\r");
  snprintf(want, sizeof want, "%s 42", all);
  assert_true(expect(&s, want, 20));
  s.buf[s.len] = 0;
  assert_null(strstr(s.buf, "] never"));
  assert_null(strstr(s.buf, "<eof>"));
  /* the stepper prints every value of p */
  char path[512], cmd[600];
  snprintf(path, sizeof path, "%s/p.lua", home_dir);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fprintf(f, "local step = 3\nlocal rank = lab.dist.rank()\nprint(step + rank)\n");
  fclose(f);
  snprintf(cmd, sizeof cmd, ":step %s\r", path);
  type(&s, cmd);
  assert_true(expect(&s, "(step) ", 30));
  type(&s, "n\r");
  assert_true(expect(&s, "(step) ", 20));
  type(&s, "n\r");
  assert_true(expect(&s, "(step) ", 20));
  type(&s, "p step, rank, 'x'\r");
  assert_true(expect(&s, "[0] 3\t0\tx\r\n", 20));
  assert_true(expect(&s, "[1] 3\t1\tx\r\n", 20));
  type(&s, "c\r");
  snprintf(want, sizeof want, "%s finished", all);
  assert_true(expect(&s, want, 30));
  type(&s, "\x04");
  assert_int_equal(finish(&s, 30), 0);
}

int main(int argc, char **argv) {
  pty_setup(argc, argv);
  if (argc > 2) ranks = argv[2];
  nranks = atoi(ranks);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_prompt_as_lua_c),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
