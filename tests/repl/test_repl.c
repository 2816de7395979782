/* The REPL driven as a person would: through a pseudo-terminal, typing lines and reading
 * the screen. Runs `llmlab -n N` and plain `mpirun -np N llmlab`. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "repl_pty.h"

static void error_on_one_rank(session *s) {
  type(s, "if lab.dist.rank() == 2 then error('only on two') end\r");
  assert_true(expect(s, "[2] error: ", 10));
  assert_true(expect(s, "only on two", 5));
  type(s, "lab.ones(4, 8):matmul(lab.ones(16, 4))\r");
  assert_true(expect(s, "[0-3] error: stdin:1: matmul: shapes [4, 8] and [16, 4]", 10));
  type(s, "=1 + 1\r"); /* the REPL goes on */
  assert_true(expect(s, "[0-3] 2", 10));
}

static void ctrl_c_clears_the_line(session *s) {
  type(s, "this is not lua");
  type(s, "\x03");
  assert_true(expect(s, "^C", 10));
  type(s, "=40 + 2\r");
  assert_true(expect(s, "[0-1] 42", 10));
}

static void test_grouped_output(void **state) {
  (void)state;
  session s;
  start_ranks(&s, "4");
  type(&s, "=lab.dist.rank()\r");
  assert_true(expect(&s, "[0] 0", 10));
  assert_true(expect(&s, "[1] 1", 5));
  assert_true(expect(&s, "[2] 2", 5));
  assert_true(expect(&s, "[3] 3", 5));
  type(&s, "x = lab.ones(4) * 2.5\r");
  type(&s, "x:sum():item()\r");
  assert_true(expect(&s, "[0-3] 10.0", 10));
  type(&s, "print(lab.dist.rank() % 2)\r");
  assert_true(expect(&s, "[0,2] 0", 10));
  assert_true(expect(&s, "[1,3] 1", 5));
  error_on_one_rank(&s); /* in the same session: a session costs 1 s to start at 4 ranks */
  type(&s, ":quit\r");
  assert_int_equal(finish(&s, 20), 0);
}

static void test_multiline_chunk(void **state) {
  (void)state;
  session s;
  start_ranks(&s, "2");
  type(&s, "for i = 1, 2 do\r");
  assert_true(expect(&s, ">> ", 10));
  type(&s, "print(i * 10)\r");
  assert_true(expect(&s, ">> ", 10));
  type(&s, "end\r");
  assert_true(expect(&s, "[0-1] 10", 10));
  assert_true(expect(&s, "[0-1] 20", 5));
  type(&s, "function sq(v)\r  return v * v\rend\r");
  type(&s, "=sq(7)\r");
  assert_true(expect(&s, "[0-1] 49", 10));
  ctrl_c_clears_the_line(&s); /* in the same session */
  type(&s, "\x04"); /* Ctrl-D */
  assert_int_equal(finish(&s, 20), 0);
}


static void test_plain_mpirun_and_history(void **state) {
  (void)state;
  session s;
  char *argv[] = {LLMLAB_MPIRUN, "-np", "2", "--oversubscribe", "--allow-run-as-root",
                  (char *)llmlab_path, NULL};
  spawn(&s, argv);
  assert_true(expect(&s, "> ", 30));
  type(&s, "=lab.dist.world() * 100\r");
  assert_true(expect(&s, "[0-1] 200", 10));
  /* Ctrl-C under plain mpirun interrupts the chunk and keeps the job */
  type(&s, "print('spinning') while true do end\r");
  assert_true(expect(&s, "[0-1] spinning", 10)); /* running (live output) */
  type(&s, "\x03");
  assert_true(expect(&s, "[0-1] error: interrupted!", 20));
  type(&s, "=7 * 6\r");
  assert_true(expect(&s, "[0-1] 42", 20));
  type(&s, "\x04");
  assert_int_equal(finish(&s, 20), 0);
  char path[512];
  snprintf(path, sizeof path, "%s/.llmlab_history", home_dir);
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  char line[256];
  int found = 0;
  while (fgets(line, sizeof line, f)) found = found || strstr(line, "lab.dist.world() * 100") != NULL;
  fclose(f);
  assert_true(found);
}

static void test_script_errors_exit_nonzero(void **state) {
  (void)state;
  session s;
  char *argv[] = {(char *)llmlab_path, "-n", "2", "-e",
                  "if lab.dist.rank() == 1 then error('planted') end", NULL};
  spawn(&s, argv);
  assert_true(expect(&s, "rank 1: ", 30));
  assert_true(expect(&s, "planted", 5));
  assert_int_not_equal(finish(&s, 30), 0);
}

int main(int argc, char **argv) {
  pty_setup(argc, argv);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_grouped_output),
      cmocka_unit_test(test_multiline_chunk),
      cmocka_unit_test(test_plain_mpirun_and_history),
      cmocka_unit_test(test_script_errors_exit_nonzero),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
