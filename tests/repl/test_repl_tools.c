/* The REPL's tools, through a pseudo-terminal at 2 and 4 ranks: rank targeting, :who,
 * :help, :run, tab completion, long output, a planted desync and a planted hang (their
 * reports asserted), Ctrl-C on an infinite loop, and stepping through a lab to its end. */
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

static void targeting_and_commands(session *s) {
  type(s, "%on 1 print(lab.dist.rank(), lab.dist.world())\r");
  assert_true(expect(s, "[1] 1\t1", 20)); /* only rank 1 ran it, in a group of one */
  type(s, "%on 0-1 x = lab.ones(1); lab.dist.all_reduce(x); print(x[1])\r");
  assert_true(expect(s, "[0-1] 2.0", 20)); /* the collective ran on the two targeted ranks */
  type(s, ":ranks 1\r=lab.dist.rank()\r");
  assert_true(expect(s, "[1] 1", 20));
  type(s, ":ranks all\r:who\r");
  assert_true(expect(s, "[0] host ", 20));
  assert_true(expect(s, "device cpu", 5));
  type(s, ":help\r");
  assert_true(expect(s, "%on 1,3 code", 10));
  type(s, "%on 9 print(1)\r");
  assert_true(expect(s, "error: %on 9: rank 9 is outside", 10));
}

static void completion_run_and_long_output(session *s) {
  type(s, "lab.dist.all_re\t");
  assert_true(expect(s, "lab.dist.all_reduce", 10));
  type(s, "\x03");
  char path[512];
  snprintf(path, sizeof path, "%s/script.lua", home_dir);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fprintf(f, "for i = 1, 300 do io.write(string.format('line %%d of rank %%d\\n', i, lab.dist.rank())) end\n"
             "print('args', arg[1], arg[2])\n");
  fclose(f);
  char cmd[600];
  snprintf(cmd, sizeof cmd, ":run %s alpha beta\r", path);
  type(s, cmd);
  /* every rank's 300 lines come back whole and in order (folded into one block where they
   * arrive together, since they differ only in naming their own rank) */
  assert_true(expect(s, "] line 1 of rank ", 30));
  assert_true(expect(s, "] line 300 of rank ", 10));
  assert_true(expect(s, "args\talpha\tbeta", 10));
}

static void planted_desync_and_hang(session *s) {
  type(s, "if lab.dist.rank() == 0 then lab.dist.all_reduce(lab.ones(4)) else lab.dist.broadcast(lab.ones(4), 0) end\r");
  assert_true(expect(s, "ranks of world disagree on the collective:", 30));
  assert_true(expect(s, "rank 0: all_reduce(4 x f32, op=sum) at stdin:1", 5));
  assert_true(expect(s, "rank 1: broadcast(4 x f32, root=0) at stdin:1", 5));
  assert_true(expect(s, "stack traceback:", 5));
  assert_true(expect(s, "> ", 10));
  s->buf[s->len] = 0;
  assert_null(strstr(strstr(s->buf, "disagree on the collective") + 1, "disagree on the collective")); /* once */
  type(s, ":watchdog 30\r");
  type(s, "if lab.dist.rank() == 1 then lab.dist.all_reduce(lab.ones(2)) end\r");
  /* the other ranks finished without joining: rank 1 gives up at once, not at the watchdog
   * (the watchdog's report, for ranks still running, is one_report_and_ctrl_t's) */
  double t0 = pty_now();
  assert_true(expect(s, "[1] error: checking the collective on every rank: rank 0 finished without joining this "
                        "collective on world; gave up at once", 10));
  assert_true(pty_now() - t0 < 10);
  s->buf[s->len] = 0;
  assert_null(strstr(s->buf + s->mark, "watchdog"));
  /* recovery completed the abandoned collective: no rebuilt world, and the session goes on */
  type(s, ":watchdog 30\r=lab.dist.all_reduce(lab.ones(1))[1]\r");
  char want[32];
  snprintf(want, sizeof want, "] %s.0", ranks);
  assert_true(expect(s, want, 20));
}

/* the watchdog's report appears once, from rank 0, while a rank still spins; Ctrl-T shows every
 * rank's traceback and collective without stopping the chunk */
static void one_report_and_ctrl_t(session *s) {
  /* rank 1 spins until this test lets it go (it creates the file `go`), not for a fixed time: a
   * 2.5 s spin, 1.5 s past the report, left no margin when the others started the chunk late or
   * the report came late under load. It goes once rank 0 has given up its wait (after the
   * report showed it), so that the chunk ends with the watchdog's error: rank 1 then waits its
   * own watchdog in the all_reduce the others gave up. */
  char go[512];
  snprintf(go, sizeof go, "%s/go", home_dir);
  unlink(go);
  char chunk[900];
  snprintf(chunk, sizeof chunk,
           "if lab.dist.rank() == 1 then local t = lab.clock() while lab.clock() - t < 60 and not io.open('%s') do end end; "
           "lab.dist.all_reduce(lab.ones(2))\r", go);
  type(s, ":watchdog 1\r");
  type(s, chunk);
  assert_true(expect(s, "watchdog: rank ", 30));
  assert_true(expect(s, "rank 0: in all_reduce(2 x f32) on world at stdin:1", 5));
  assert_true(expect(s, "rank 1: running Lua at stdin:1", 5)); /* still spinning when shown */
  size_t report_at = s->mark;
  type(s, "\x14");
  assert_true(expect(s, "^T every rank:", 10));
  char kept = s->buf[s->mark];
  s->buf[s->mark] = 0; /* the same stall is reported once, not once per waiting rank */
  assert_null(strstr(s->buf + report_at, "What every rank is doing"));
  s->buf[s->mark] = kept;
  assert_true(expect(s, "rank 1 stack traceback:", 10));
  assert_true(board_shows(s, "rank 0: idle", 1, 20)); /* rank 0 gave up its wait; rank 1 spins */
  FILE *f = fopen(go, "w"); /* rank 1 may stop spinning */
  assert_non_null(f);
  fclose(f);
  assert_true(expect(s, "error: ", 30)); /* the chunk ends after both */
  assert_true(expect(s, "> ", 20));
  unlink(go);
  type(s, ":watchdog 30\r=1+1\r");
  assert_true(expect(s, "] 2", 20));
}

static void ctrl_c_interrupts_every_rank(session *s) {
  type(s, "while true do end\r");
  assert_true(expect(s, "while true do end", 10));
  double t0 = pty_now();
  type(s, "\x03");
  assert_true(expect(s, "error: interrupted!", 20));
  assert_true(expect(s, "> ", 10));
  fprintf(stderr, "Ctrl-C to prompt at %s ranks: %.0f ms\n", ranks, (pty_now() - t0) * 1e3);
  /* a rank spinning while the others wait in a collective */
  type(s, "if lab.dist.rank() == 1 then print('spinning') while true do end else lab.dist.all_reduce(lab.ones(3)) end\r");
  assert_true(expect(s, "[1] spinning", 20)); /* the chunk runs (live output), the others are in the wait */
  type(s, "\x03");
  assert_true(expect(s, "interrupted (Ctrl-C) while waiting", 20));
  assert_true(expect(s, "[1] error: interrupted!", 10));
  type(s, "=40 + 2\r");
  assert_true(expect(s, "42", 20));
}

/* three cases in one session (a session costs 0.6 s to start at 2 ranks, 1 s at 4, more under
 * load); the desync first, as it looks for its report once in the whole screen */
static void test_desync_hang_report_ctrl_t_ctrl_c(void **state) {
  (void)state;
  session s;
  start_ranks(&s, ranks);
  planted_desync_and_hang(&s);
  one_report_and_ctrl_t(&s);
  ctrl_c_interrupts_every_rank(&s);
  type(&s, "\x04");
  assert_int_equal(finish(&s, 20), 0);
}

/* the line of lab 01 holding `text`, so the test follows edits to the lab */
static int line_of(const char *path, const char *text) {
  FILE *f = fopen(path, "r");
  char line[512];
  int n = 0, found = 0;
  while (f && fgets(line, sizeof line, f)) {
    n++;
    if (strstr(line, text) == line) {
      found = n;
      break;
    }
  }
  if (f) fclose(f);
  return found;
}

static void stepping_a_lab_to_its_end(session *s) {
  char lab01[512];
  snprintf(lab01, sizeof lab01, "%s/../scripts/labs/01_allreduce.lua", LLMLAB_SOURCE_DIR);
  int bp = line_of(lab01, "local fact = 1");
  assert_true(bp > 0);
  char bcmd[128], bwant[128], bhit[64];
  snprintf(bcmd, sizeof bcmd, "b 01_allreduce.lua:%d\r", bp);
  snprintf(bwant, sizeof bwant, "breakpoint 1 at 01_allreduce.lua:%d", bp);
  snprintf(bhit, sizeof bhit, "01_allreduce.lua:%d", bp);
  char cmd[600];
  snprintf(cmd, sizeof cmd, ":step %s/../scripts/labs/01_allreduce.lua\r", LLMLAB_SOURCE_DIR);
  type(s, cmd);
  assert_true(expect(s, "01_allreduce.lua:", 30));
  assert_true(expect(s, "(step) ", 10));
  type(s, "n\r");
  assert_true(expect(s, "(step) ", 20));
  type(s, "n\r");
  assert_true(expect(s, "(step) ", 20));
  type(s, "p rank\r");
  assert_true(expect(s, "[0] 0", 20));
  type(s, bcmd);
  assert_true(expect(s, bwant, 10));
  type(s, "c\r");
  assert_true(expect(s, bhit, 60));
  type(s, "bt\r");
  assert_true(expect(s, "stack traceback:", 20));
  type(s, "l\r");
  assert_true(expect(s, "->", 20)); /* the listing marks the current line */
  type(s, "locals\r");
  assert_true(expect(s, "rank = ", 20));
  type(s, "b 01_allreduce.lua:1 rank == 99\r"); /* a condition that never holds */
  assert_true(expect(s, "if rank == 99", 10));
  type(s, "delete\rc\r");
  assert_true(expect(s, "all checks passed", 60));
  assert_true(expect(s, "finished", 30));
  assert_true(expect(s, "> ", 10));
}

/* three independent parts in one session (a session costs 0.6 s to start at 2 ranks, 1 s at 4) */
static void test_commands_completion_and_a_lab(void **state) {
  (void)state;
  session s;
  start_ranks(&s, ranks);
  targeting_and_commands(&s);
  completion_run_and_long_output(&s);
  stepping_a_lab_to_its_end(&s);
  type(&s, "\x04");
  assert_int_equal(finish(&s, 20), 0);
}

int main(int argc, char **argv) {
  pty_setup(argc, argv);
  if (argc > 2) ranks = argv[2];
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_commands_completion_and_a_lab),
      cmocka_unit_test(test_desync_hang_report_ctrl_t_ctrl_c),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
