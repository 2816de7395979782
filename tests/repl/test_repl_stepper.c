/* The stepper and the command line parsed strictly, through a pseudo-terminal at 2 and 4 ranks:
 * a breakpoint on a line of the current file whose condition reads a local (it was evaluated as
 * a global and never fired), tbreak, delete confirming, unknown commands named, l N, numbers
 * starting again in a new :step session; %on with spaces in its rank list, %on without code,
 * :ranks out of range with a labelled error, Tab after ':st' and after 'x.sh'. */
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

static void test_stepper_and_parsing(void **state) {
  (void)state;
  session s;
  start_ranks(&s, ranks);
  char path[512], cmd[600], want[128];
  snprintf(path, sizeof path, "%s/loop.lua", home_dir);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fprintf(f, "local total = 0\n"
             "for i = 1, 5 do\n"
             "  total = total + i\n"
             "end\n"
             "print('total', total)\n"
             "local name, x = 'adam', lab.ones(3)\n"
             "print(name)\n");
  fclose(f);
  snprintf(cmd, sizeof cmd, ":step %s\r", path);
  type(&s, cmd);
  assert_true(expect(&s, "(step) ", 30));
  type(&s, "b 3 i == 4\r"); /* line 3 of this file, when the local i is 4 */
  assert_true(expect(&s, "breakpoint 1 at ", 10));
  type(&s, "frobnicate\r");
  assert_true(expect(&s, "unknown command 'frobnicate'", 10));
  type(&s, "c\r");
  assert_true(expect(&s, "loop.lua:3", 30));
  type(&s, "p i, total\r");
  assert_true(expect(&s, "4\t6", 20));
  type(&s, "l 1\r");
  assert_true(expect(&s, "   1  local total = 0", 20));
  type(&s, "delete 1\r");
  assert_true(expect(&s, "deleted breakpoint 1", 10));
  type(&s, "tbreak 5\r");
  assert_true(expect(&s, "temporary breakpoint 2 at ", 10));
  type(&s, "c\r");
  assert_true(expect(&s, "loop.lua:5", 30));
  type(&s, "c\r");
  snprintf(want, sizeof want, "[0-%d] finished", nranks - 1);
  assert_true(expect(&s, want, 30));
  type(&s, cmd); /* a new session numbers its breakpoints from 1 again */
  assert_true(expect(&s, "(step) ", 30));
  type(&s, "b 7\r");
  assert_true(expect(&s, "breakpoint 1 at ", 10));
  type(&s, "c\r");
  assert_true(expect(&s, "loop.lua:7", 30));
  type(&s, "locals\r"); /* strings quoted, a tensor by its first line */
  assert_true(expect(&s, "name = \"adam\"", 20));
  assert_true(expect(&s, "x = ", 20));
  type(&s, "q\r");
  assert_true(expect(&s, "stopped", 30));
  assert_true(expect(&s, "> ", 10));
  /* strict parsing */
  type(&s, "%on 0, 1 print('on', lab.dist.rank())\r");
  assert_true(expect(&s, "[0] on\t0", 20));
  assert_true(expect(&s, "[1] on\t1", 20));
  type(&s, "%on\r");
  assert_true(expect(&s, "error: %on: cannot read the rank list", 10));
  type(&s, "%on 1\r");
  assert_true(expect(&s, "error: %on 1: no code to run", 10));
  type(&s, ":ranks 7\r");
  assert_true(expect(&s, "error: :ranks 7: rank 7 is outside", 10));
  type(&s, ":st\t");
  assert_true(expect(&s, ":step", 10));
  type(&s, "\x03");
  type(&s, "x = lab.ones(2)\r");
  assert_true(expect(&s, "> ", 10));
  type(&s, "x.sh\t");
  assert_true(expect(&s, "x.shape", 10));
  type(&s, "\x03\x04");
  assert_int_equal(finish(&s, 30), 0);
}

int main(int argc, char **argv) {
  pty_setup(argc, argv);
  if (argc > 2) ranks = argv[2];
  nranks = atoi(ranks);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_stepper_and_parsing),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
