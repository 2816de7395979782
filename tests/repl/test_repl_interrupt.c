/* Ctrl-C from anywhere, through a pseudo-terminal at 2 and 4 ranks: rank 0 watches the keyboard
 * until every rank has finished the chunk, so the interrupt reaches a rank spinning after rank
 * 0 is done, a loop around pcall (the first press caught as "rank N: interrupted!", the second
 * ending the chunk), a %on chunk without rank 0, a default target without rank 0 (:ranks), a rank
 * spinning while the others wait in all_reduce, and a :run script on every rank. A Ctrl-C
 * during one long C call (a matrix product) is reported as pending and is not dropped. Each
 * case prints its latency (Ctrl-C to the next prompt) and must stay under a few seconds. */
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

/* types chunk, waits until it runs (its first line, `ready`, is on the screen: live output),
 * presses Ctrl-C, expects `want` and the prompt, and prints the latency */
static void interrupt_case(session *s, const char *name, const char *chunk, const char *ready, const char *want) {
  type(s, chunk);
  type(s, "\r");
  assert_true(expect(s, ready, 20));
  double t0 = pty_now();
  type(s, "\x03");
  assert_true(expect(s, want, 10));
  assert_true(expect(s, "> ", 10));
  double ms = (pty_now() - t0) * 1e3;
  fprintf(stderr, "Ctrl-C latency at %s ranks, %s: %.0f ms\n", ranks, name, ms);
  assert_true(ms < 5000);
}

/* the second Ctrl-C for the loop around pcall: the chunk ends on that rank */
static void second_ctrl_c(session *s, const char *want) {
  double t0 = pty_now();
  type(s, "\x03");
  assert_true(expect(s, want, 10));
  assert_true(expect(s, "> ", 10));
  fprintf(stderr, "Ctrl-C latency at %s ranks, a loop around pcall, second Ctrl-C: %.0f ms\n", ranks,
          (pty_now() - t0) * 1e3);
}

static void test_ctrl_c_from_anywhere(void **state) {
  (void)state;
  session s;
  start_ranks(&s, ranks);
  char chunk[256], last[16], spinning[32];
  snprintf(last, sizeof last, "%d", nranks - 1);
  snprintf(spinning, sizeof spinning, "[%s] spinning", last); /* the echo has "('spinning')" */
  snprintf(chunk, sizeof chunk, "if lab.dist.rank() == %s then print('spinning') for i = 1, 1e12 do end end", last);
  interrupt_case(&s, "one rank spinning after rank 0 finished", chunk, spinning, "error: interrupted!");
  /* a loop around pcall: the first Ctrl-C is caught, and names the rank as every other error
   * does (it was a bare "interrupted!"); the second stops the loop (it was deaf to every
   * later press: the hook had removed itself) */
  char caught[64];
  snprintf(chunk, sizeof chunk, "if lab.dist.rank() == %s then print('spinning') local said while true do "
           "local ok, e = pcall(function() for i = 1, 1e12 do end end) "
           "if not said then said = true print('caught', e) end end end", last);
  snprintf(caught, sizeof caught, "[%s] caught\trank %s: interrupted!", last, last);
  type(&s, chunk);
  type(&s, "\r");
  assert_true(expect(&s, spinning, 20));
  type(&s, "\x03");
  assert_true(expect(&s, caught, 10));
  snprintf(caught, sizeof caught, "[%s] error: interrupted!", last);
  second_ctrl_c(&s, caught);
  snprintf(chunk, sizeof chunk, "%%on %s print('spinning') for i = 1, 1e12 do end", last);
  interrupt_case(&s, "%on chunk without rank 0", chunk, spinning, "error: interrupted!");
  snprintf(chunk, sizeof chunk, ":ranks %s\r", last);
  type(&s, chunk);
  interrupt_case(&s, ":ranks without rank 0", "print('spinning') while true do end", spinning, "error: interrupted!");
  type(&s, ":ranks all\r");
  interrupt_case(&s, "a rank spinning while the others wait in all_reduce",
                 "if lab.dist.rank() == 1 then print('spinning') while true do end end; lab.dist.all_reduce(lab.ones(4))",
                 "[1] spinning", "[1] error: interrupted!");
  char path[512], cmd[600];
  snprintf(path, sizeof path, "%s/loop.lua", home_dir);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fprintf(f, "local x = lab.ones(64)\nlab.dist.all_reduce(x)\nprint('looping')\n"
             "while true do lab.dist.all_reduce(x); x = x / %d end\n", nranks);
  fclose(f);
  snprintf(cmd, sizeof cmd, ":run %s", path);
  interrupt_case(&s, ":run script with collectives on every rank", cmd, "] looping", "interrupted");
  /* one matrix product of a few seconds on rank 0 (6000^3 multiply-adds on one thread: 4000^3
   * took 0.7 s on a Skylake-X core, under the second after which the Ctrl-C is called pending): the
   * Ctrl-C is reported as pending after a second, and raised when the product returns */
  type(&s, "%on 0 a = lab.randn({6000, 6000})\r");
  assert_true(expect(&s, "> ", 60));
  /* Ctrl-C once rank 0 says it multiplies (its live output), not after a fixed 0.3 s: under
   * load the chunk may not have reached the product by then, and the Ctrl-C stops it before */
  type(&s, "%on 0 print('multiplying') b = a:matmul(a)\r");
  assert_true(expect(&s, "[0] multiplying", 20));
  double t0 = pty_now();
  type(&s, "\x03");
  assert_true(expect(&s, "interrupt pending: a rank is inside a long C call", 30));
  fprintf(stderr, "Ctrl-C at %s ranks during a 6000^2 matmul: 'pending' after %.0f ms\n", ranks, (pty_now() - t0) * 1e3);
  assert_true(expect(&s, "[0] error: interrupted! (inside a C call", 60));
  assert_true(expect(&s, "> ", 10));
  fprintf(stderr, "Ctrl-C at %s ranks during a 6000^2 matmul: prompt after %.0f ms\n", ranks, (pty_now() - t0) * 1e3);
  type(&s, "%on 0 a, b = nil, nil; collectgarbage()\r");
  assert_true(expect(&s, "> ", 10));
  char want[64];
  type(&s, "=1+1\r");
  snprintf(want, sizeof want, "[0-%d] 2", nranks - 1);
  assert_true(expect(&s, want, 20));
  type(&s, "\x04");
  assert_int_equal(finish(&s, 30), 0);
}

int main(int argc, char **argv) {
  pty_setup(argc, argv);
  if (argc > 2) ranks = argv[2];
  nranks = atoi(ranks);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ctrl_c_from_anywhere),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
