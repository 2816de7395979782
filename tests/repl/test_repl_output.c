/* Output as people read it, through a pseudo-terminal at 2 and 4 ranks: lines printed during a
 * long chunk appear while it runs (labelled, grouped per moment); stderr is labelled and grouped
 * like stdout; a \r progress line shows its last state; tables print their contents, compactly,
 * so equal ones group across ranks; print_ranks is labelled once. Prints the live-output latency. */
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

static void test_output(void **state) {
  (void)state;
  session s;
  start_ranks(&s, ranks);
  char all[16], want[128];
  snprintf(all, sizeof all, "[0-%d]", nranks - 1);
  /* three ticks 0.6 s apart: the first two are on the screen well before the chunk ends */
  double t0 = pty_now();
  type(&s, "for i = 1, 3 do print('tick ' .. i); local t = lab.clock() while lab.clock() - t < 0.6 do end end\r");
  assert_true(expect(&s, "] tick 1", 20));
  double first = pty_now() - t0;
  assert_true(expect(&s, "] tick 2", 20));
  double second = pty_now() - t0;
  fprintf(stderr, "live output at %s ranks: tick 1 after %.0f ms, tick 2 after %.0f ms (chunk takes 1.8 s)\n", ranks,
          first * 1e3, second * 1e3);
  assert_true(second < 1.7); /* shown before the chunk ended */
  assert_true(expect(&s, "] tick 3", 20));
  assert_true(expect(&s, "> ", 20));
  type(&s, "do io.stderr:write('warn\\n') end\r");
  snprintf(want, sizeof want, "%s warn", all);
  assert_true(expect(&s, want, 20));
  type(&s, "do io.write('step 1\\rstep 2\\rstep 3\\n') end\r");
  snprintf(want, sizeof want, "%s step 3\r\n", all);
  assert_true(expect(&s, want, 20));
  type(&s, "x = lab.ones({2, 3})\r=x.shape\r");
  snprintf(want, sizeof want, "%s {2, 3}\r\n", all);
  assert_true(expect(&s, want, 20));
  type(&s, "={lr = 0.1, name = 'adam', betas = {0.9, 0.999}}\r");
  snprintf(want, sizeof want, "%s {betas = {0.9, 0.999}, lr = 0.1, name = \"adam\"}", all);
  assert_true(expect(&s, want, 20));
  type(&s, "lab.dist.print_ranks('hi')\r");
  snprintf(want, sizeof want, "%s hi\r\n", all);
  assert_true(expect(&s, want, 20));
  s.buf[s.len] = 0;
  assert_null(strstr(s.buf, "] [0]"));     /* print_ranks labelled once */
  assert_null(strstr(s.buf, "table: 0x")); /* tables show their contents */
  type(&s, "\x04");
  assert_int_equal(finish(&s, 30), 0);
}

int main(int argc, char **argv) {
  pty_setup(argc, argv);
  if (argc > 2) ranks = argv[2];
  nranks = atoi(ranks);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_output),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
