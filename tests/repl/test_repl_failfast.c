/* Fail fast, through a pseudo-terminal at 2 and 4 ranks (issue 26): a collective whose missing
 * rank has failed or finished its chunk ends at once, the failed rank's error (with its
 * traceback) shown first and the others' waits after it, grouped; a finished rank's output
 * shows while the others still run; the watchdog (left at 30 s here) is only for ranks that
 * still run. The same in :step (the failed rank stops at its line: post-mortem) and in a
 * --check-collectives script (one report). Before, each of these waited for the watchdog
 * (30 s of blank screen) and the script printed the board's report once per waiting rank.
 * Prints how long each case took. */
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
static char others[16]; /* "[0,2-3]" at 4 ranks, "[0]" at 2: every rank but 1 */

static void test_failed_rank_ends_the_collective_at_once(void **state) {
  (void)state;
  session s;
  start_ranks(&s, ranks);
  type(&s, "r = lab.dist.rank()\r");
  assert_true(expect(&s, "> ", 20));
  double t0 = pty_now();
  type(&s, "if r == 1 then error('bad batch') end; lab.dist.all_reduce(lab.ones(2))\r");
  assert_true(expect(&s, "[1] error: stdin:1: bad batch", 5)); /* first, */
  assert_true(expect(&s, "[1] \tstdin:1: in main chunk", 5));   /* with its traceback, */
  assert_true(expectf(&s, 5, "%s error: checking the collective on every rank: rank 1 stopped with an error (shown first)",
                      others)); /* then the waits, grouped */
  assert_true(expect(&s, "> ", 5));
  double failed = pty_now() - t0;
  assert_true(failed < 5); /* the watchdog is 30 s */
  /* a rank that finished without joining: its output shows while the others still run */
  t0 = pty_now();
  type(&s, "if r == 1 then print('one done') return end; local t = lab.clock(); while lab.clock() - t < 2 do end; "
           "lab.dist.all_reduce(lab.ones(2))\r");
  assert_true(expect(&s, "[1] one done", 10));
  double streamed = pty_now() - t0;
  assert_true(expectf(&s, 10, "%s error: checking the collective on every rank: rank 1 finished without joining", others));
  assert_true(expect(&s, "> ", 5));
  double finished = pty_now() - t0;
  fprintf(stderr, "fail fast at %s ranks: failed rank %.0f ms; finished rank's line after %.0f ms, chunk of 2 s over "
                  "after %.0f ms\n", ranks, failed * 1e3, streamed * 1e3, finished * 1e3);
  assert_true(streamed < 1.8);  /* shown while the others still spin */
  assert_true(finished < 2 + 3); /* the wait gave up when it began, not at the watchdog */
  /* a receive whose sender failed gives up too, after a short grace for a message on its way */
  t0 = pty_now();
  type(&s, "x = lab.zeros(2); if r == 0 then error('no send') elseif r == 1 then lab.dist.recv(x, 0) end\r");
  assert_true(expect(&s, "[0] error: stdin:1: no send", 10));
  assert_true(expect(&s, "[1] error: recv: rank 0 stopped with an error (shown first) without sending this message", 10));
  assert_true(expect(&s, "> ", 5));
  double recv_gone = pty_now() - t0;
  fprintf(stderr, "receive from a failed rank at %s ranks: %.0f ms\n", ranks, recv_gone * 1e3);
  assert_true(recv_gone < 5);
  /* ranks still running are the watchdog's: a collective that completes late still completes */
  type(&s, "if r == 1 then local t = lab.clock(); while lab.clock() - t < 1 do end end; x = lab.ones(2); "
           "lab.dist.all_reduce(x); print(x[1])\r");
  assert_true(expectf(&s, 20, "] %d.0", nranks)); /* rank 0's line may show live, before the rest */
  assert_true(expect(&s, "> ", 20));
  s.buf[s.len] = 0;
  assert_null(strstr(s.buf + s.mark, "error"));
  type(&s, "=1+1\r");
  assert_true(expectf(&s, 20, "[0-%d] 2\r\n", nranks - 1));
  type(&s, "\x04");
  assert_int_equal(finish(&s, 30), 0);
}

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static void test_stepper_post_mortem(void **state) {
  (void)state;
  session s;
  start_ranks(&s, ranks);
  char path[512], cmd[600];
  snprintf(path, sizeof path, "%s/pm.lua", home_dir);
  write_file(path, "local r = lab.dist.rank()\n"
                   "local batch = lab.ones(2) * r\n"
                   "if r == 1 then error('bad batch ' .. batch[1]) end\n"
                   "lab.dist.all_reduce(batch)\n"
                   "print('sum', batch[1])\n");
  snprintf(cmd, sizeof cmd, ":step %s\r", path);
  type(&s, cmd);
  assert_true(expect(&s, "(step) ", 30));
  type(&s, "c\r");
  /* rank 1 stops at its error's line with the stack intact; the others wait in the collective */
  assert_true(expect(&s, "[1] ", 10));
  assert_true(expect(&s, "pm.lua:3  if r == 1 then error('bad batch ' .. batch[1]) end   <- post-mortem: ", 10));
  assert_true(expect(&s, "bad batch 1.0", 5));
  assert_true(expect(&s, "(step) ", 10));
  type(&s, "p batch\r");
  assert_true(expect(&s, "[1] tensor([1., 1.]", 10));
  assert_true(expect(&s, "(step) ", 10));
  double t0 = pty_now();
  type(&s, "c\r");
  assert_true(expect(&s, "[1] error: ", 10));
  assert_true(expect(&s, "bad batch 1.0", 5));
  assert_true(expectf(&s, 10, "%s error: checking the collective on every rank: rank 1 stopped with an error", others));
  assert_true(expect(&s, "> ", 10));
  double after = pty_now() - t0;
  fprintf(stderr, "stepper post-mortem at %s ranks: c to prompt %.0f ms\n", ranks, after * 1e3);
  assert_true(after < 5);
  type(&s, "=1+1\r");
  assert_true(expectf(&s, 20, "[0-%d] 2\r\n", nranks - 1));
  type(&s, "\x04");
  assert_int_equal(finish(&s, 30), 0);
}

static void test_checked_script_one_report(void **state) {
  (void)state;
  char path[512];
  snprintf(path, sizeof path, "%s/skip.lua", home_dir);
  write_file(path, "local r = lab.dist.rank()\n"
                   "if r ~= 1 then lab.dist.all_reduce(lab.ones(2)) end\n"
                   "print('done', r)\n");
  session s;
  char *argv[] = {(char *)llmlab_path, "-n", (char *)ranks, "--check-collectives", path, NULL};
  double t0 = pty_now();
  spawn(&s, argv);
  assert_true(expectf(&s, 20, "%s checking the collective on every rank: rank 1 finished without joining", others));
  int rc = finish(&s, 30);
  double took = pty_now() - t0;
  fprintf(stderr, "checked script at %s ranks: %.0f ms\n", ranks, took * 1e3);
  assert_int_not_equal(rc, 0);
  s.mark = 0;
  assert_int_equal(occurrences(&s, "finished without joining"), 1); /* one report */
  assert_int_equal(occurrences(&s, "watchdog"), 0);
  assert_true(took < 20);
}

int main(int argc, char **argv) {
  pty_setup(argc, argv);
  if (argc > 2) ranks = argv[2];
  nranks = atoi(ranks);
  snprintf(others, sizeof others, nranks > 2 ? "[0,2-%d]" : "[0]", nranks - 1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_failed_rank_ends_the_collective_at_once),
      cmocka_unit_test(test_stepper_post_mortem),
      cmocka_unit_test(test_checked_script_one_report),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
