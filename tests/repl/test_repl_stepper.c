/* The stepper and the command line parsed strictly, through a pseudo-terminal at 2 and 4 ranks:
 * a breakpoint on a line of the current file whose condition reads a local (it was evaluated as
 * a global and never fired), tbreak, delete confirming, unknown commands named, l N, numbers
 * starting again in a new :step session, b listing; up/down (p and locals in the selected frame,
 * bt marking it), display at every stop and undisplay, a collective in p or display refused,
 * finish returning on every rank though odd ranks are 0.7 s late (they used to be pulled into
 * rank 0's stop inside the function), until and until N, s! into lua/lab; a lab.breakpoint()
 * that every rank reaches at a different moment stopping once, every rank there; q inside a
 * pcall caught as "rank N: stepper: quit"; the world repaired after a q that left ranks in a
 * collective, and Ctrl-C while a :step script runs; %on with spaces in its rank list, %on without code,
 * :ranks out of range with a labelled error, Tab after ':st', after 'x.sh' and after a
 * ModuleList's 'm.app'. */
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

/* the part of the test that waits until the screen has `text` past the mark, formatted */

/* up/down, display, finish on every rank, until, s! (the script's lines are numbered below) */
static void frames_display_finish_until(session *s, const char *dir_file) {
  char path[512], cmd[600];
  snprintf(path, sizeof path, "%.400s.nest.lua", dir_file);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fprintf(f, "local r = lab.dist.rank()\n"                      /* 1 */
             "local function work(n)\n"                         /* 2 */
             "  local t = lab.clock()\n"                        /* 3 */
             "  while lab.clock() - t < n do end\n"             /* 4: odd ranks spin 0.7 s */
             "  return n * 2\n"                                 /* 5 */
             "end\n"                                            /* 6 */
             "local function outer(v)\n"                        /* 7 */
             "  local w = work(v %% 2 * 0.7)\n"                 /* 8 */
             "  for k = 1, 3 do\n"                              /* 9 */
             "    w = w + k\n"                                  /* 10 */
             "  end\n"                                          /* 11 */
             "  return w\n"                                     /* 12 */
             "end\n"                                            /* 13 */
             "local z = outer(r)\n"                             /* 14 */
             "local lin = lab.nn.Linear(2, 2)\n"                /* 15 */
             "local y = lin(lab.ones(1, 2))\n"                  /* 16 */
             "print('z', z)\n");                                /* 17 */
  fclose(f);
  const char *all = nranks == 2 ? "[0-1]" : "[0-3]";
  snprintf(cmd, sizeof cmd, ":step %s\r", path);
  type(s, cmd);
  assert_true(expect(s, "(step) ", 30));
  type(s, "b 3\r");
  assert_true(expect(s, "breakpoint 1 at ", 10));
  type(s, "b\r"); /* lists them */
  assert_true(expectf(s, 10, "breakpoint 1 at %s:3", path));
  type(s, "c\r");
  assert_true(expectf(s, 30, "%s %s:3 in work", all, path));
  type(s, "display n\r"); /* shown now, and at every stop */
  assert_true(expect(s, "] 1: n = 0.0", 10));
  assert_true(expect(s, "] 1: n = 0.7", 10));
  /* a collective in an expression would wait for ranks paused at the prompt (it paused again
   * inside its own wait, or hung where a rank was elsewhere): refused, and the stepper goes on */
  type(s, "p lab.dist.all_reduce(lab.ones(1))\r");
  /* every rank's error names itself: one block */
  assert_true(expectf(s, 10, "[0-%d] error: rank \xc2\xabN\xc2\xbb: p: all_reduce inside a stepper expression would wait "
                             "for the other ranks", nranks - 1));
  type(s, "display lab.dist.barrier()\r");
  assert_true(expectf(s, 10, "[0-%d] 2: lab.dist.barrier() = error: rank \xc2\xabN\xc2\xbb: display: barrier inside a "
                             "stepper expression", nranks - 1));
  type(s, "undisplay 2\r");
  assert_true(expect(s, "deleted display 2", 10));
  type(s, "up\r");
  assert_true(expectf(s, 10, "%s frame 1: %s:8 in outer", all, path));
  type(s, "bt\r"); /* the selected frame marked, as pdb's where marks it */
  assert_true(expectf(s, 10, "%s   #0 %s:3 in work", all, path));
  assert_true(expectf(s, 10, "%s > #1 %s:8 in outer", all, path));
  assert_true(expectf(s, 10, "%s   #2 %s:14", all, path));
  type(s, "p v, v * 10\r"); /* in outer's frame now */
  assert_true(expect(s, "[1] 1\t10", 10));
  type(s, "locals\r");
  assert_true(expect(s, "[1] v = 1", 10));
  type(s, "up\r");
  assert_true(expectf(s, 10, "%s frame 2: %s:14", all, path));
  type(s, "up\r");
  assert_true(expectf(s, 10, "%s (oldest frame) frame 2: ", all));
  type(s, "down 5\r");
  assert_true(expectf(s, 10, "%s (newest frame) frame 0: %s:3 in work", all, path));
  /* every rank stops when its own work() returns, the odd ones 0.7 s later: one stop, in outer */
  type(s, "finish\r");
  assert_true(expectf(s, 30, "%s %s:9 in outer", all, path));
  assert_true(expectf(s, 10, "%s 1: n = nil", all)); /* the display, in the new frame */
  type(s, "n\r");
  assert_true(expectf(s, 30, "%s %s:10 in outer", all, path));
  type(s, "until\r"); /* past the loop: the first line after 10 in this frame */
  assert_true(expectf(s, 30, "%s %s:12 in outer", all, path));
  type(s, "undisplay 1\r");
  assert_true(expect(s, "deleted display 1", 10));
  type(s, "until\r"); /* outer returns */
  assert_true(expectf(s, 30, "%s %s:15", all, path));
  type(s, "until 16\r"); /* the first line at or past 16 */
  assert_true(expectf(s, 30, "%s %s:16", all, path));
  type(s, "s!\r"); /* into the library's code, which s skips */
  assert_true(expectf(s, 30, "%s ", all));
  assert_true(expect(s, "lua/lab/nn.lua:", 1));
  type(s, "finish\r");
  assert_true(expectf(s, 30, "%s %s:17", all, path));
  type(s, "help\r");
  assert_true(expect(s, "up [n], down [n]", 10));
  type(s, "c\r");
  assert_true(expectf(s, 30, "%s finished", all));
  assert_true(expect(s, "> ", 10));
}

/* odd ranks reach lab.breakpoint() later (a few million instructions: the REPL's hook used to
 * pull them into rank 0's stop at once, and they stopped again at their own): one stop, one c */
static void breakpoint_reached_by_every_rank(session *s) {
  type(s, "do\r");
  assert_true(expect(s, ">> ", 10));
  type(s, "if lab.dist.rank() % 2 == 1 then for i = 1, 3000000 do end end\r");
  assert_true(expect(s, ">> ", 10));
  type(s, "lab.breakpoint()\r");
  assert_true(expect(s, ">> ", 10));
  type(s, "print('after', lab.dist.rank())\r");
  assert_true(expect(s, ">> ", 10));
  type(s, "end\r");
  assert_true(expectf(s, 30, "%s stdin:4", nranks == 2 ? "[0-1]" : "[0-3]"));
  assert_true(expect(s, "(step) ", 10));
  size_t from = s->mark;
  type(s, "c\r");
  assert_true(expectf(s, 30, "[%d] after\t%d", nranks - 1, nranks - 1));
  assert_true(expect(s, "> ", 10));
  char seen = s->buf[s->mark];
  s->buf[s->mark] = 0;
  assert_null(strstr(s->buf + from, "(step)")); /* no second stop */
  s->buf[s->mark] = seen;
}

/* q while the other ranks wait in a collective, then a chunk with a collective: the world is
 * repaired after :step as after a chunk (it was not: the chunk's all_reduce failed 'world is
 * unusable' on the waiting ranks and waited for the 30 s watchdog on rank 0). Then Ctrl-C
 * while a :step script runs after c (nothing watched the keyboard: the job had to be killed). */
static void quit_in_a_collective_then_ctrl_c(session *s) {
  char path[512], cmd[600];
  snprintf(path, sizeof path, "%s/wait.lua", home_dir);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fprintf(f, "local x = lab.ones(1)\n"
             "if lab.dist.rank() == 0 then\n"
             "  local y = 1\n"
             "end\n"
             "lab.dist.all_reduce(x)\n");
  fclose(f);
  snprintf(cmd, sizeof cmd, ":step %s\r", path);
  type(s, cmd);
  assert_true(expect(s, "(step) ", 30));
  type(s, "b 3\r");
  assert_true(expect(s, "breakpoint 1 at ", 10));
  type(s, "c\r");
  assert_true(expect(s, "<- waiting in ", 30));
  assert_true(expect(s, "(step) ", 10));
  type(s, "q\r");
  assert_true(expect(s, "stepper: quit while waiting", 15));
  assert_true(expect(s, "> ", 10));
  type(s, "x = lab.ones(1); lab.dist.all_reduce(x); print('sum', x[1])\r");
  assert_true(expectf(s, 15, "[0-%d] sum\t%d.0", nranks - 1, nranks));
  assert_true(expect(s, "> ", 10));
  snprintf(path, sizeof path, "%s/endless.lua", home_dir);
  f = fopen(path, "w");
  assert_non_null(f);
  fprintf(f, "local n = 0\n"
             "while true do n = n + 1 end\n");
  fclose(f);
  snprintf(cmd, sizeof cmd, ":step %s\r", path);
  type(s, cmd);
  assert_true(expect(s, "(step) ", 30));
  type(s, "c\r");
  pump(s, 0.5);
  type(s, "\x03"); /* breaks into (step) at the loop on every rank, as pdb (issue 27), then q ends it */
  assert_true(expectf(s, 15, "[0-%d] %s/endless.lua:2", nranks - 1, home_dir));
  assert_true(expect(s, "(step) ", 10));
  type(s, "q\r");
  assert_true(expectf(s, 15, "[0-%d] stopped: stepper: quit", nranks - 1));
  assert_true(expect(s, "> ", 10));
}

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
  frames_display_finish_until(&s, path);
  breakpoint_reached_by_every_rank(&s);
  /* q inside a pcall: what the pcall catches names the rank (it was a bare "stepper: quit") */
  snprintf(path, sizeof path, "%s/caught.lua", home_dir);
  f = fopen(path, "w");
  assert_non_null(f);
  fprintf(f, "local ok, e = pcall(function()\n"
             "  return 1\n"
             "end)\n"
             "print('caught', e)\n");
  fclose(f);
  snprintf(cmd, sizeof cmd, ":step %s\r", path);
  type(&s, cmd);
  assert_true(expect(&s, "(step) ", 30));
  type(&s, "b 2\r");
  assert_true(expect(&s, "breakpoint 1 at ", 10));
  type(&s, "c\r");
  assert_true(expect(&s, "caught.lua:2", 30));
  type(&s, "q\r");
  /* every rank caught the same error about itself: one block */
  assert_true(expectf(&s, 30, "[0-%d] caught\trank \xc2\xabN\xc2\xbb: stepper: quit", nranks - 1));
  assert_true(expect(&s, "> ", 10));
  quit_in_a_collective_then_ctrl_c(&s);
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
  type(&s, "\x03");
  type(&s, "m = lab.nn.ModuleList({lab.nn.Linear(2, 2)})\r"); /* its __index is a function */
  assert_true(expect(&s, "> ", 10));
  type(&s, "m.app\t");
  assert_true(expect(&s, "m.append", 10));
  type(&s, "\x03\x04");
  assert_int_equal(finish(&s, 30), 0);
}

/* A plain script (llmlab -n N script.lua) where only rank 0 calls lab.breakpoint(): the last
 * rank finished its script and rank 1 waits in an all_reduce rank 0 has not reached. Both used
 * to hang the job silently (the finished rank in an unguarded final exchange, the waiting one
 * in a blocking collective); now each joins the stop from where it is. */
static void test_breakpoint_in_plain_script(void **state) {
  (void)state;
  char path[512], want[128];
  snprintf(path, sizeof path, "%s/plain.lua", home_dir);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fprintf(f, "local r, n = lab.dist.rank(), lab.dist.world_size()\n"     /* 1 */
             "local members = {}\n"                                     /* 2 */
             "for i = 0, n - 2 do members[#members + 1] = i end\n"       /* 3 */
             "local g = lab.dist.new_group(members)\n"                  /* 4 */
             "if r == n - 1 then print('done early', r) return end\n"   /* 5 */
             "local x = lab.ones(4)\n"                                  /* 6 */
             "if r == 0 then\n"                                         /* 7 */
             "  lab.breakpoint()\n"                                     /* 8 */
             "  x = x * 2\n"                                            /* 9 */
             "end\n"                                                    /* 10 */
             "lab.dist.all_reduce(x, {group = g})\n"                       /* 11 */
             "print('sum', r, x[1])\n");                                /* 12 */
  fclose(f);
  session s;
  char *argv[] = {(char *)llmlab_path, "-n", (char *)ranks, path, NULL};
  spawn(&s, argv);
  assert_true(expect(&s, "plain.lua:9", 30));
  if (nranks > 2) assert_true(expect(&s, "plain.lua:11  lab.dist.all_reduce(x, {group = g})   <- waiting in all_reduce", 30));
  snprintf(want, sizeof want, "[%d] (finished the script)", nranks - 1);
  assert_true(expect(&s, want, 30));
  assert_true(expect(&s, "(step) ", 10));
  type(&s, "n\r");
  assert_true(expect(&s, "plain.lua:11", 30));
  size_t from = s.mark;
  type(&s, "c\r");
  /* rank 0 adds 2, ranks 1..n-2 add 1 each; the ranks print in any order */
  char want1[128];
  snprintf(want, sizeof want, "sum\t0\t%d.0", nranks);
  snprintf(want1, sizeof want1, "sum\t1\t%d.0", nranks);
  int seen = 0;
  for (double t0 = pty_now(); !seen && pty_now() - t0 < 30;) {
    pump(&s, 0.2);
    seen = memmem(s.buf + from, s.len - from, want, strlen(want)) &&
           (nranks == 2 || memmem(s.buf + from, s.len - from, want1, strlen(want1)));
  }
  assert_true(seen);
  assert_int_equal(finish(&s, 30), 0);
}

int main(int argc, char **argv) {
  pty_setup(argc, argv);
  if (argc > 2) ranks = argv[2];
  nranks = atoi(ranks);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_stepper_and_parsing),
      cmocka_unit_test(test_breakpoint_in_plain_script),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
