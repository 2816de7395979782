/* pdb's other half at the stepper's prompt, through a pseudo-terminal at 2 and 4 ranks: a
 * line whose first word is a command word used as a variable is Lua (`u = u * 0` assigned the
 * local instead of running `up`), `!` forces Lua, any other line runs as Lua in the frame, pp
 * prints tables by their contents, interact reads Lua until Ctrl-D, l keeps the indentation,
 * Ctrl-C after `c` breaks into (step) on every rank instead of ending the script, and
 * `:watchdog` alone says the value (it used to set 30 s). */
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

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static void test_lua_lines_at_step(void **state) {
  (void)state;
  char path[512], cmd[600];
  snprintf(path, sizeof path, "%s/pdb_work.lua", home_dir);
  write_file(path, "local function work(a)\n"
                   "  local u = a + 1\n"
                   "  if u > 0 then\n"
                   "    u = u + 1\n"
                   "  end\n"
                   "  return u\n"
                   "end\n"
                   "print('result', work(lab.dist.rank()))\n");
  session s;
  start_ranks(&s, ranks);
  snprintf(cmd, sizeof cmd, ":step %s\r", path);
  type(&s, cmd);
  assert_true(expect(&s, "(step) ", 30));
  type(&s, "s\r"); /* past the function's definition */
  assert_true(expect(&s, "pdb_work.lua:8", 20));
  assert_true(expect(&s, "(step) ", 20));
  type(&s, "s\r");
  assert_true(expect(&s, "in work", 20));
  assert_true(expect(&s, "(step) ", 20));
  type(&s, "n\r");
  assert_true(expect(&s, "if u > 0 then", 20));
  assert_true(expect(&s, "(step) ", 20));
  type(&s, "u = u * 0\r"); /* Lua: the local u becomes 0 (not `up`) */
  assert_true(expect(&s, "(step) ", 20));
  type(&s, "p u\r");
  expect_all(&s, "0\r\n", 20);
  type(&s, "!n = 5\r"); /* ! forces Lua: a global n, not `next` */
  assert_true(expect(&s, "(step) ", 20));
  type(&s, "p n + 1\r");
  expect_all(&s, "6\r\n", 20);
  type(&s, "a * 10\r"); /* any other line is Lua, an expression shows its value */
  assert_true(expect(&s, "[0] 0\r\n", 20));
  assert_true(expect(&s, "[1] 10\r\n", 20));
  type(&s, "pp {lr = 0.1, betas = {0.9, 0.999}}\r");
  expect_all(&s, "{betas = {0.9, 0.999}, lr = 0.1}\r\n", 20);
  type(&s, "l\r"); /* the listing keeps the indentation */
  expect_all(&s, "->   3    if u > 0 then\r\n", 20);
  expect_all(&s, "     4      u = u + 1\r\n", 5);
  type(&s, "interact\r");
  assert_true(expect(&s, "(interact) ", 20));
  type(&s, "c = u + 40\r"); /* not continue: Lua */
  assert_true(expect(&s, "(interact) ", 20));
  type(&s, "print(c)\r");
  expect_all(&s, "40\r\n", 20);
  type(&s, "\x04");
  assert_true(expect(&s, "(step) ", 20));
  type(&s, "c\r"); /* the stepper's continue again; the script saw u = 0 (so skipped the if) */
  expect_all(&s, "result\t0\r\n", 30);
  expect_all(&s, "finished", 20);
  /* lab.breakpoint() in a one-line chunk typed at the prompt stops there (it had no next line
   * to stop at: the chunk ran to its end and `p x` went to the prompt as Lua) */
  type(&s, "x = 1; lab.breakpoint(); x = 2\r");
  expect_all(&s, "stdin:1", 30);
  assert_true(expect(&s, "(step) ", 20));
  type(&s, "p x\r");
  expect_all(&s, "1\r\n", 20);
  type(&s, "c\r");
  assert_true(expect(&s, "> ", 20));
  type(&s, "=x\r");
  expect_all(&s, "2\r\n", 20);
  type(&s, ":watchdog\r");
  expect_all(&s, "watchdog: 30 s", 20);
  type(&s, ":watchdog 12\r:watchdog\r");
  expect_all(&s, "watchdog: 12 s", 20);
  type(&s, "\x04");
  assert_int_equal(finish(&s, 30), 0);
}

static void test_ctrl_c_after_continue(void **state) {
  (void)state;
  char path[512], cmd[600];
  snprintf(path, sizeof path, "%s/pdb_loop.lua", home_dir);
  write_file(path, "local i = 0\nwhile true do\n  i = i + 1\nend\n");
  session s;
  start_ranks(&s, ranks);
  snprintf(cmd, sizeof cmd, ":step %s\r", path);
  type(&s, cmd);
  assert_true(expect(&s, "(step) ", 30));
  type(&s, "c\r");
  pump(&s, 1.0);
  type(&s, "\x03");
  /* every rank stops inside the loop, and the session stays in the stepper */
  char want[600];
  snprintf(want, sizeof want, "%s %s/pdb_loop.lua:", all, home_dir);
  assert_true(expect(&s, want, 30));
  assert_true(expect(&s, "(step) ", 20));
  type(&s, "p i > 0\r");
  expect_all(&s, "true\r\n", 20);
  type(&s, "q\r");
  expect_all(&s, "stopped: stepper: quit", 30);
  type(&s, "=1 + 1\r");
  expect_all(&s, "2\r\n", 30);
  type(&s, "\x04");
  assert_int_equal(finish(&s, 30), 0);
}

/* p on ranks that joined the pause from a collective's wait after a step had armed their line
 * hook: the expression's own line stopped them again, a second exchange rank 0 never joined
 * (REPL fuzzer, seed 376175321: `p warn`, then `bt` hung) */
static void test_p_on_ranks_waiting(void **state) {
  (void)state;
  char path[512], cmd[600], others[16];
  snprintf(path, sizeof path, "%s/pdb_wait.lua", home_dir);
  write_file(path, "if lab.dist.rank() == 0 then lab.breakpoint() end\n"
                   "local x = 1\n"
                   "x = x + 1\n"
                   "x = x + 1\n"
                   "lab.dist.all_reduce(lab.ones(2))\n"
                   "print('done', x)\n");
  snprintf(others, sizeof others, nranks == 2 ? "[1]" : "[1-%d]", nranks - 1);
  session s;
  start_ranks(&s, ranks);
  snprintf(cmd, sizeof cmd, ":run %s\r", path);
  type(&s, cmd);
  assert_true(expect(&s, "(step) ", 30)); /* rank 0 at line 2, the others waiting at line 5 */
  type(&s, "s\r");
  assert_true(expect(&s, "pdb_wait.lua:3", 30));
  assert_true(expect(&s, "(step) ", 20));
  type(&s, "p x\r");
  assert_true(expect(&s, "[0] 1\r\n", 20));
  assert_true(expectf(&s, 20, "%s 3\r\n", others));
  assert_true(expect(&s, "(step) ", 20));
  type(&s, "bt\r");
  assert_true(expect(&s, "stack traceback:", 20));
  assert_true(expect(&s, "(step) ", 20));
  type(&s, "c\r");
  expect_all(&s, "done\t3\r\n", 30);
  type(&s, "\x04");
  assert_int_equal(finish(&s, 30), 0);
}

int main(int argc, char **argv) {
  pty_setup(argc, argv);
  if (argc > 2) ranks = argv[2];
  nranks = atoi(ranks);
  snprintf(all, sizeof all, "[0-%d]", nranks - 1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_lua_lines_at_step),
      cmocka_unit_test(test_ctrl_c_after_continue),
      cmocka_unit_test(test_p_on_ranks_waiting),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
