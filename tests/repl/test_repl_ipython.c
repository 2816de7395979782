/* IPython's habits at the llmlab prompt, through a pseudo-terminal at 2 and 4 ranks:
 * help(f), ?f and f? show the docstring; _ holds the last value and a trailing ; prints
 * nothing; :time and :timeit report min / median / max over the targeted ranks; :tb shows
 * the traceback of each rank's last error; Tab completes file names after :run and :step. */
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
static char all[16];

static void expect_all(session *s, const char *text, double timeout) {
  char want[512];
  snprintf(want, sizeof want, "%s %s", all, text);
  assert_true(expect(s, want, timeout));
}

static void test_help(void **state) {
  (void)state;
  session s;
  start_ranks(&s, ranks);
  type(&s, "help(lab.dist.all_reduce)\r");
  expect_all(&s, "lab.dist.all_reduce\r\n", 20);
  expect_all(&s, "  lab.dist.all_reduce(t[, op]", 5);
  type(&s, "?lab.zeros\r");
  expect_all(&s, "  lab.zeros(size...[, opts]) -> tensor: filled with 0", 20);
  type(&s, "lab.ddp.wrap?\r");
  expect_all(&s, "  lab.ddp.wrap(model[, {group=", 20);
  type(&s, "f = lab.dist.broadcast\r?f\r"); /* by the function, whatever holds it */
  expect_all(&s, "  lab.dist.broadcast(t, src", 20);
  type(&s, "help(lab.optim)\r");
  expect_all(&s, "lab.optim:", 20);
  expect_all(&s, "  lab.optim.AdamW(params", 5);
  type(&s, "lab.dist.nope?\r");
  expect_all(&s, "help: lab.dist.nope is nil", 20);
  /* a class shows its constructor, a tensor method its own docstring, lab.Tensor the methods */
  type(&s, "?lab.nn.Linear\r");
  expect_all(&s, "  lab.nn.Linear(in, out[, {bias=true", 20);
  type(&s, "t = lab.ones(2)\r?t.sum\r");
  expect_all(&s, "  Tensor:sum([dim][, keepdim]) -> tensor", 20);
  type(&s, "help(lab.Tensor)\r");
  expect_all(&s, "lab.Tensor:\r\n", 20);
  expect_all(&s, "  Tensor:zero_() -> self", 20);
  /* Tab after a leading '?' completes the name ('?' breaks words, as '(' does) */
  type(&s, "?lab.dist.all_re\t");
  assert_true(expect(&s, "duce", 10));
  type(&s, "\r");
  expect_all(&s, "  lab.dist.all_reduce(t[, op]", 20);
  type(&s, "\x04");
  assert_int_equal(finish(&s, 30), 0);
}

static void test_last_value_and_quiet(void **state) {
  (void)state;
  session s;
  start_ranks(&s, ranks);
  type(&s, "n = 41\r");
  assert_true(expect(&s, "> ", 20));
  type(&s, "n + 1\r");
  expect_all(&s, "42\r\n", 20);
  type(&s, "_ * 2\r");
  expect_all(&s, "84\r\n", 20);
  type(&s, "1234;\r"); /* runs, prints nothing, leaves _ alone */
  assert_true(expect(&s, "> ", 20));
  type(&s, "=_\r");
  expect_all(&s, "84\r\n", 20);
  s.buf[s.len] = 0;
  assert_null(strstr(s.buf, "] 1234"));
  type(&s, "\x04");
  assert_int_equal(finish(&s, 30), 0);
}

static void test_time_and_traceback(void **state) {
  (void)state;
  session s;
  start_ranks(&s, ranks);
  char want[256];
  type(&s, ":time lab.ones(4):sum():item()\r");
  expect_all(&s, "4.0\r\n", 30);
  snprintf(want, sizeof want, "time: min ");
  expect_all(&s, want, 10);
  snprintf(want, sizeof want, " over %d ranks\r\n", nranks);
  assert_true(expect(&s, want, 5));
  type(&s, ":timeit lab.ones(4):sum()\r");
  expect_all(&s, "timeit: min ", 60);
  assert_true(expect(&s, " per run (best of 3 loops of ", 5));
  /* on some ranks: the min / median / max is over those ranks */
  type(&s, "%on 0,1 :time 1\r"); /* not a command inside %on: Lua, a syntax error */
  assert_true(expect(&s, "error: ", 20));
  type(&s, ":ranks 0,1\r:time 7\r");
  assert_true(expect(&s, "[0-1] time: min ", 30));
  assert_true(expect(&s, " over 2 ranks", 5));
  type(&s, ":ranks all\r");
  type(&s, ":time\r");
  assert_true(expect(&s, "error: :time: give the code to time", 10));
  /* :tb: each rank's last error with its traceback, the others say they have none */
  type(&s, "function deep() error('boom') end\r");
  assert_true(expect(&s, "> ", 20));
  type(&s, "%on 1 deep()\r");
  assert_true(expect(&s, "[1] error: stdin:1: boom", 20));
  type(&s, ":tb\r");
  assert_true(expect(&s, "[0", 20));
  assert_true(expect(&s, "no error on this rank in the last chunk", 10));
  assert_true(expect(&s, "[1] stdin:1: boom\r\n[1] stack traceback:", 10));
  assert_true(expect(&s, "in function 'deep'", 5));
  type(&s, ":tb\r"); /* :tb leaves it for the next :tb */
  assert_true(expect(&s, "[1] stdin:1: boom\r\n[1] stack traceback:", 20));
  type(&s, "x = 1\r:tb\r"); /* a chunk without an error has none */
  expect_all(&s, "no error on this rank in the last chunk", 20);
  type(&s, "\x04");
  assert_int_equal(finish(&s, 30), 0);
}

static void test_file_completion(void **state) {
  (void)state;
  session s;
  char path[512], cmd[600];
  snprintf(path, sizeof path, "%s/ipy_completion_lab.lua", home_dir);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fprintf(f, "print('ran the lab', arg[1])\n");
  fclose(f);
  start_ranks(&s, ranks);
  /* the directory's slashes and the file name's '_' are one word: the whole name completes */
  snprintf(cmd, sizeof cmd, ":run %s/ipy_compl\t", home_dir);
  type(&s, cmd);
  assert_true(expect(&s, "ipy_completion_lab.lua", 10));
  type(&s, " a\r");
  expect_all(&s, "ran the lab\ta", 30);
  snprintf(cmd, sizeof cmd, ":step %s/ipy_compl\t", home_dir);
  type(&s, cmd);
  assert_true(expect(&s, "ipy_completion_lab.lua", 10));
  type(&s, "\r");
  assert_true(expect(&s, "(step) ", 30));
  type(&s, "c\r");
  expect_all(&s, "ran the lab\tnil", 30);
  type(&s, "\x04");
  assert_int_equal(finish(&s, 30), 0);
}

int main(int argc, char **argv) {
  pty_setup(argc, argv);
  if (argc > 2) ranks = argv[2];
  nranks = atoi(ranks);
  snprintf(all, sizeof all, "[0-%d]", nranks - 1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_help),
      cmocka_unit_test(test_last_value_and_quiet),
      cmocka_unit_test(test_time_and_traceback),
      cmocka_unit_test(test_file_completion),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
