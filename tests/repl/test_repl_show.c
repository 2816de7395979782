/* The REPL's printer, through a pseudo-terminal at 2 and 4 ranks (issue 26): modules and the
 * DDP wrapper print as their tree (before: `no value: (nil)` and `invalid key to 'next'`, as
 * show.c popped two stack slots where a __tostring was found); functions print by name, not by
 * an address that differs per rank; a table with many keys prints the same first keys, sorted,
 * on every rank; small nested tables print whole; what ranks print that differs only where each
 * names itself folds into one block (rank «N»), a several-line answer that differs in one line
 * shows line by line with the difference marked, and lab.plan's table printed by every rank
 * shows once, [0-3], though the ranks print it at different moments. */
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
static char all[16]; /* "[0-3]" */

/* types code, then expects `want` after the rank set of every rank, and the prompt */
static void shows(session *s, const char *code, const char *want) {
  type(s, code);
  type(s, "\r");
  assert_true(expectf(s, 30, "%s %s", all, want));
  assert_true(expect(s, "> ", 30));
}

static void test_printer(void **state) {
  (void)state;
  session s;
  start_ranks(&s, ranks);
  type(&s, "r = lab.dist.rank(); lab.manual_seed(1); l = lab.nn.Linear(3, 4)\r");
  assert_true(expect(&s, "\r\n> ", 20));
  shows(&s, "l", "Linear(3 -> 4)  16 params\r\n");
  shows(&s, "=l", "Linear(3 -> 4)  16 params\r\n");
  shows(&s, "print(l)", "Linear(3 -> 4)  16 params\r\n");
  type(&s, "m = lab.ddp.wrap(lab.nn.Sequential(lab.nn.Linear(3, 4), lab.nn.Linear(4, 2)))\r");
  assert_true(expect(&s, "\r\n> ", 20));
  type(&s, "m\r");
  assert_true(expectf(&s, 20, "%s DDP(1 bucket)\r\n", all));
  assert_true(expectf(&s, 5, "%s   Sequential()  26 params\r\n", all));
  assert_true(expectf(&s, 5, "%s     1: Linear(3 -> 4)  16 params\r\n", all));
  assert_true(expect(&s, "> ", 20));
  shows(&s, "={model = l, n = 1}", "{model = Linear(3 -> 4)  16 params, n = 1}");
  shows(&s, "=lab.dist.all_reduce", "function lab.dist.all_reduce\r\n");
  shows(&s, "=print", "function print\r\n");
  type(&s, "f = function() end\r");
  assert_true(expect(&s, "\r\n> ", 20));
  shows(&s, "=f", "function f\r\n");
  shows(&s, "=function() end", "function <stdin:1>\r\n");
  type(&s, "t = {}; for i = 1, 100 do t['k' .. i] = i end\r");
  assert_true(expect(&s, "\r\n> ", 20));
  shows(&s, "=t",
        "{k1 = 1, k10 = 10, k100 = 100, k11 = 11, k12 = 12, k13 = 13, k14 = 14, k15 = 15, ...}\r\n");
  shows(&s, "={a = {b = {c = {d = 1}}}}", "{a = {b = {c = {d = 1}}}}\r\n");
  /* differing only where each rank names itself: one block */
  shows(&s, "error('bad batch on rank ' .. r)", "error: stdin:1: bad batch on rank \xc2\xabN\xc2\xbb\r\n");
  /* one line of three differs: line by line, the difference marked */
  type(&s, "print('step 1'); print('loss', r == 1 and 7 or 3); print('done')\r");
  assert_true(expectf(&s, 20, "%s step 1\r\n", all));
  assert_true(expect(&s, "loss\t\xc2\xab" "3\xc2\xbb\r\n", 10));
  assert_true(expect(&s, "[1] loss\t\xc2\xab" "7\xc2\xbb\r\n", 10));
  assert_true(expectf(&s, 10, "%s done\r\n", all));
  assert_true(expect(&s, "> ", 10));
  /* a long answer every rank prints: one block, though ranks print at different moments */
  size_t at = s.mark;
  type(&s, "p = lab.plan{model = 'llama3-8b', gpus = 8, gpu = 'h100', global_batch = 64, seq = 4096}\r");
  assert_true(expectf(&s, 60, "%s llama3-8b: 8.03B parameters", all));
  assert_true(expectf(&s, 60, "%s best: ", all));
  assert_true(expect(&s, "\r\n> ", 30));
  s.buf[s.len] = 0;
  assert_null(strstr(s.buf + at, "[0] ")); /* no per-rank blocks */
  assert_null(strstr(s.buf + at, "[1] "));
  type(&s, "\x04");
  assert_int_equal(finish(&s, 30), 0);
}

int main(int argc, char **argv) {
  pty_setup(argc, argv);
  if (argc > 2) ranks = argv[2];
  nranks = atoi(ranks);
  snprintf(all, sizeof all, "[0-%d]", nranks - 1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_printer),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
