/* The rest of issue 27's debugging habits, through a pseudo-terminal at 2 and 4 ranks: Tab at
 * the stepper's prompt completes the frame's locals, upvalues and fields of a local table
 * (cfg.<TAB>); an error shows the file:line of the user's line on each rank (from lab's C
 * functions and from the library's Lua alike), at :run, in the stepper's post-mortem and at
 * the prompt; a :run of a lab counts only its own traffic in lab.dist.stats (the prompt keeps its
 * running totals, the lab's added); `l` and the
 * stepper's position show the lines of a function typed at the prompt in an earlier chunk. */
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
static char all[16], evens[16], odds[16];

static void expect_all(session *s, const char *text, double timeout) {
  char want[512];
  snprintf(want, sizeof want, "%s %s", all, text);
  assert_true(expect(s, want, timeout));
}

static void test_tab_completes_locals(void **state) {
  (void)state;
  char path[512], cmd[600];
  snprintf(path, sizeof path, "%s/dbg_locals.lua", home_dir);
  write_text_file(path, "local outer_count = 3\n"
                   "local function work(n)\n"
                   "  local config_table = {learning_rate = 0.25, batch = n}\n"
                   "  return config_table.batch + outer_count\n"
                   "end\n"
                   "print('work', work(lab.dist.rank()))\n");
  session s;
  start_ranks(&s, ranks);
  snprintf(cmd, sizeof cmd, ":step %s\r", path);
  type(&s, cmd);
  assert_true(expect(&s, "(step) ", 30));
  type(&s, "s\r"); /* past the upvalue */
  assert_true(expect(&s, "(step) ", 20));
  type(&s, "s\r"); /* past the function's definition */
  assert_true(expect(&s, "dbg_locals.lua:6", 20));
  assert_true(expect(&s, "(step) ", 20));
  type(&s, "s\r"); /* into work */
  assert_true(expect(&s, "in work", 20));
  assert_true(expect(&s, "(step) ", 20));
  type(&s, "n\r");
  assert_true(expect(&s, "return config_table.batch", 20));
  assert_true(expect(&s, "(step) ", 20));
  /* a local, then a field of that local table, then an upvalue: each completed by Tab */
  type(&s, "p config_t\t");
  pump(&s, 0.5);
  type(&s, ".learn\t");
  pump(&s, 0.5);
  type(&s, "\r");
  expect_all(&s, "0.25\r\n", 20);
  type(&s, "p outer_c\t");
  pump(&s, 0.5);
  type(&s, " + 1\r");
  expect_all(&s, "4\r\n", 20);
  type(&s, "!lab.dist.ran\t");
  pump(&s, 0.5);
  type(&s, "()\r"); /* the globals still complete behind the frame's names, after ! too */
  assert_true(expect(&s, "[0] 0\r\n", 20));
  type(&s, "c\r");
  expect_all(&s, "finished", 30);
  type(&s, "\x04");
  assert_int_equal(finish(&s, 30), 0);
}

static void test_errors_carry_the_users_line(void **state) {
  (void)state;
  char path[300], cmd[600];
  snprintf(path, sizeof path, "%s/dbg_err.lua", home_dir);
  /* even ranks fail in lab's C (matmul), odd ones in the library's Lua (nn.Linear's check) */
  write_text_file(path, "local a = lab.zeros(2, 3)\n"
                   "local function f()\n"
                   "  return a:matmul(a)\n"
                   "end\n"
                   "if lab.dist.rank() % 2 == 0 then\n"
                   "  f()\n"
                   "else\n"
                   "  local m = lab.nn.Linear(4, 4)\n"
                   "  m(lab.zeros(3, 5))\n"
                   "end\n");
  session s;
  start_ranks(&s, ranks);
  char want[1200];
  snprintf(cmd, sizeof cmd, ":run %s\r", path);
  type(&s, cmd);
  snprintf(want, sizeof want, "%s error: %s:3: matmul: shapes [2, 3] and [2, 3]", evens, path);
  assert_true(expect(&s, want, 30));
  snprintf(want, sizeof want, "%s error: %s:9: linear: input [3, 5]", odds, path);
  assert_true(expect(&s, want, 20));
  assert_true(expect(&s, "> ", 20));
  /* the stepper's post-mortem stops at the user's line on each rank, not in the library */
  snprintf(cmd, sizeof cmd, ":step %s\r", path);
  type(&s, cmd);
  assert_true(expect(&s, "(step) ", 30));
  type(&s, "c\r");
  snprintf(want, sizeof want, "%s %s:3 in f  return a:matmul(a)   <- post-mortem: %s:3: matmul", evens, path, path);
  assert_true(expect(&s, want, 30));
  snprintf(want, sizeof want, "%s %s:9  m(lab.zeros(3, 5))   <- post-mortem: %s:9: linear", odds, path, path);
  assert_true(expect(&s, want, 20));
  assert_true(expect(&s, "(step) ", 20));
  type(&s, "c\r");
  snprintf(want, sizeof want, "%s error: %s:3: matmul", evens, path);
  assert_true(expect(&s, want, 30));
  assert_true(expect(&s, "> ", 20));
  /* at the prompt: the chunk's line, as lua.c's errors carry it */
  type(&s, "do x = 1\r");
  assert_true(expect(&s, ">> ", 20));
  type(&s, "lab.zeros(2, 3):matmul(lab.zeros(2, 3)) end\r");
  expect_all(&s, "error: stdin:2: matmul: shapes", 20);
  type(&s, "\x04");
  assert_int_equal(finish(&s, 30), 0);
}

static void test_run_counts_its_own_traffic(void **state) {
  (void)state;
  char path[512], cmd[600];
  snprintf(path, sizeof path, "%s/dbg_traffic.lua", home_dir);
  write_text_file(path, "lab.dist.all_reduce(lab.ones(4))\n"
                   "local s = lab.dist.stats().world.all_reduce\n"
                   "print('lab traffic', s.calls, s.bytes)\n");
  session s;
  start_ranks(&s, ranks);
  type(&s, "for i = 1, 3 do lab.dist.all_reduce(lab.ones(4)) end\r");
  assert_true(expect(&s, "> ", 30));
  type(&s, "=lab.dist.stats().world.all_reduce.calls\r");
  expect_all(&s, "3\r\n", 20);
  snprintf(cmd, sizeof cmd, ":run %s\r", path);
  type(&s, cmd);
  expect_all(&s, "lab traffic\t1\t16\r\n", 30); /* not the 4 calls, 64 bytes the prompt's made */
  /* and the prompt's running totals are kept, the lab's traffic added (:run reset them to 0) */
  type(&s, "=lab.dist.stats().world.all_reduce.calls\r");
  expect_all(&s, "4\r\n", 20); /* the prompt's 3 and the lab's 1 */
  type(&s, "\x04");
  assert_int_equal(finish(&s, 30), 0);
}

static void test_list_function_typed_earlier(void **state) {
  (void)state;
  session s;
  start_ranks(&s, ranks);
  type(&s, "function scale(x)\r");
  assert_true(expect(&s, ">> ", 20));
  type(&s, "  local y = x * 2\r");
  assert_true(expect(&s, ">> ", 20));
  type(&s, "  return y + lab.dist.rank()\r");
  assert_true(expect(&s, ">> ", 20));
  type(&s, "end\r");
  assert_true(expect(&s, "> ", 20));
  type(&s, "z = 5\r"); /* another chunk between the definition and the call */
  assert_true(expect(&s, "> ", 20));
  type(&s, "lab.breakpoint(); print('scaled', scale(3))\r");
  expect_all(&s, "stdin:1  lab.breakpoint(); print('scaled', scale(3))", 30);
  assert_true(expect(&s, "(step) ", 20));
  type(&s, "s\r");
  expect_all(&s, "stdin:2 in scale  local y = x * 2", 20); /* the position shows the line */
  assert_true(expect(&s, "(step) ", 20));
  type(&s, "l\r"); /* the listing keeps the indentation, as for a file */
  expect_all(&s, "     1  function scale(x)\r\n", 20);
  expect_all(&s, "->   2    local y = x * 2\r\n", 5);
  expect_all(&s, "     3    return y + lab.dist.rank()\r\n", 5);
  expect_all(&s, "     4  end\r\n", 5);
  type(&s, "c\r");
  assert_true(expect(&s, "[0] scaled\t6\r\n", 30));
  assert_true(expect(&s, "[1] scaled\t7\r\n", 10));
  type(&s, "\x04");
  assert_int_equal(finish(&s, 30), 0);
}

int main(int argc, char **argv) {
  pty_setup(argc, argv);
  if (argc > 2) ranks = argv[2];
  nranks = atoi(ranks);
  snprintf(all, sizeof all, "[0-%d]", nranks - 1);
  snprintf(evens, sizeof evens, nranks == 2 ? "[0]" : "[0,2]");
  snprintf(odds, sizeof odds, nranks == 2 ? "[1]" : "[1,3]");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_tab_completes_locals),
      cmocka_unit_test(test_errors_carry_the_users_line),
      cmocka_unit_test(test_run_counts_its_own_traffic),
      cmocka_unit_test(test_list_function_typed_earlier),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
