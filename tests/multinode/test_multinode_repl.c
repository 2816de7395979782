/* The REPL across simulated hosts, through a pseudo-terminal: test_multinode_repl LLMLAB NP
 * HOSTS, run on host1 by test_multinode.sh (LLMLAB_MPIRUN names the mpirun that spans the hosts,
 * LLMLAB_WATCHDOG=3 travels with `llmlab -n`). The last rank is on the last host. Live output of
 * a remote rank while its chunk runs; Ctrl-C of a loop on every rank of every host, and of a
 * remote rank spinning while the others wait in all_reduce, and of a remote rank inside one long
 * matrix product (rank 0's "interrupt pending" report naming every rank with its host, then the
 * error when the product returns); the next command typed ahead of the prompt after a Ctrl-C; a
 * Ctrl-C inside a remote rank's data-parallel backward (the replicas checked after it); a rank
 * that fails before a collective ending the others' wait on every host at once, and a receive
 * from a remote rank that failed; Ctrl-T naming every rank with its
 * host; the watchdog's report of a remote straggler; lab.breakpoint() reached only by the remote
 * rank while the others wait in a barrier; a stepper breakpoint only the remote rank reaches
 * while the others wait in all_reduce; Ctrl-D. Prints
 * each latency (they are compared with one host in the README). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "../repl/repl_pty.h"

/* Bounds on the answers to Ctrl-C and Ctrl-T (see ctrl_c), for a loaded 2-core machine. */
#define ANSWER_BOUND_MS 750  /* the error or the traceback on screen */
#define PROMPT_BOUND_MS 2000 /* the prompt after Ctrl-C: the ranks' recovery comes first */

static const char *np = "4";
static int last = 3, hosts = 2;
static char last_label[64]; /* "rank 3 (host2)" as reports name the last rank ("rank 3" on one host) */

/* expectf: the pty harness's (repl_pty.h) */

static void typef(session *s, const char *fmt, ...) {
  char text[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  type(s, text);
}

/* a remote rank's ticks 0.6 s apart are on the screen before its chunk ends (1.8 s) */
static void live_output(session *s) {
  double t0 = pty_now();
  typef(s, "if lab.dist.rank() == %d then for i = 1, 3 do print('tick ' .. i); local t = lab.clock() "
           "while lab.clock() - t < 0.6 do end end end\r", last);
  assert_true(expectf(s, 20, "[%d] tick 1", last));
  double first = pty_now() - t0;
  assert_true(expectf(s, 20, "[%d] tick 2", last));
  double second = pty_now() - t0;
  fprintf(stderr, "live output of rank %d on host%d: tick 1 after %.0f ms, tick 2 after %.0f ms (chunk takes 1.8 s)\n",
          last, hosts, first * 1e3, second * 1e3);
  assert_true(second < 1.7);
  assert_true(expect(s, "> ", 20));
}

/* Ctrl-C once `ready` is on the screen; `want` and the prompt must follow */
static void ctrl_c(session *s, const char *name, const char *ready, const char *want) {
  assert_true(expect(s, ready, 20));
  double t0 = pty_now();
  type(s, "\x03");
  assert_true(expect(s, want, 10));
  double err_ms = (pty_now() - t0) * 1e3; /* the rest is the ranks' clean-up before the prompt */
  assert_true(expect(s, "> ", 10));
  double ms = (pty_now() - t0) * 1e3;
  fprintf(stderr, "Ctrl-C latency at %s ranks over %d hosts, %s: %.0f ms (the error on screen after %.0f ms)\n", np,
          hosts, name, ms, err_ms);
  /* The error: 9-84 ms on 2 hosts at load 12-15 on this 2-core machine, once 322 ms; a rank
   * the relay failed to reach answers only with rank 0's "interrupt pending" (after 1 s) or
   * never. The prompt: 30-650 ms on 2 hosts, once 1210 ms at load 15, nearly all of it in
   * lab_dist_recover after the error (5-45 ms on 1 host); a recovery that hits its deadline
   * takes 5 s. (README, "Running across machines".) */
  assert_true(err_ms < ANSWER_BOUND_MS);
  assert_true(ms < PROMPT_BOUND_MS);
}

static void interrupts(session *s) {
  char want[64];
  type(s, "print('spinning') while true do end\r");
  snprintf(want, sizeof want, "[0-%d] error: interrupted!", last);
  ctrl_c(s, "every rank spinning", "] spinning", want);
  typef(s, "if lab.dist.rank() == %d then print('spinning') while true do end end; lab.dist.all_reduce(lab.ones(4))\r",
        last);
  char ready[32];
  snprintf(ready, sizeof ready, "[%d] spinning", last);
  snprintf(want, sizeof want, "[%d] error: interrupted!", last);
  ctrl_c(s, "the remote rank spinning, the others in all_reduce", ready, want);
  type(s, "x = lab.ones(1); lab.dist.all_reduce(x); print('sum', x[1])\r"); /* the world still works */
  assert_true(expectf(s, 15, "[0-%d] sum\t%d.0", last, last + 1));
  assert_true(expect(s, "> ", 10));
}

/* Ctrl-C with the next command typed ahead (sent in the same write): the prompt takes it at
 * once, and no rank on any host may see the press that ended the last chunk (the relay carries
 * the cleared flag a poll or two later; rank 0 waits for every host's ack before it sends the
 * next command, and the other ranks' after-chunk work waits for their host's board) */
static void typed_ahead(session *s) {
  type(s, "print('spinning') while true do end\r");
  assert_true(expect(s, "] spinning", 20));
  type(s, "\x03x = lab.ones(1); lab.dist.all_reduce(x); print('after', x[1])\r");
  char want[64];
  snprintf(want, sizeof want, "[0-%d] error: interrupted!", last);
  assert_true(expect(s, want, 10));
  assert_true(expectf(s, 15, "[0-%d] after\t%d.0", last, last + 1));
  assert_true(expect(s, "> ", 10));
}

/* Ctrl-C while the remote rank is inside a data-parallel backward and the others wait in its
 * bucket: after recovery every rank checks the replicas (collectives on every host), which the
 * remote ranks must not start while their board still holds the press */
static void ddp_interrupted(session *s) {
  typef(s, "r = lab.dist.rank(); lab.manual_seed(1); m = lab.ddp.wrap(lab.nn.Sequential(lab.nn.Linear(4, 4), "
           "lab.nn.Linear(4, 4)), {bucket_mb = 0.00001}); opt = lab.optim.SGD(m:parameters(), {lr = 0.1}); "
           "slow = true; m.module[1].weight:register_hook(function(g) if slow and r == %d then print('in backward'); "
           "local t = lab.clock(); while lab.clock() - t < 60 do end end return g end)\r", last);
  assert_true(expect(s, "> ", 20));
  type(s, "loss = m(lab.ones({2, 4})):sum(); loss:backward(); opt:step(); opt:zero_grad()\r");
  assert_true(expectf(s, 20, "[%d] in backward", last));
  type(s, "\x03");
  assert_true(expect(s, "interrupted", 10));
  assert_true(expect(s, "the step cut short was reset; its replicas agree)", 15));
  assert_true(expect(s, "> ", 10));
  type(s, "slow = false; loss = m(lab.ones({2, 4})):sum(); loss:backward(); opt:step(); print('stepped', m.in_step)\r");
  assert_true(expectf(s, 15, "[0-%d] stepped\tfalse", last));
  assert_true(expect(s, "> ", 10));
}

/* a rank that fails before a collective ends the others' wait on every host at once (fail fast
 * reads the relay's copy of a remote rank's chunk), not at the watchdog (3 s here): rank 1
 * fails with ranks on the last host waiting, then the last rank fails with rank 0 waiting */
static void fail_fast(session *s) {
  for (int i = 0; i < 2; i++) {
    int bad = i == 0 ? 1 : last;
    size_t at = s->mark;
    double t0 = pty_now();
    typef(s, "if lab.dist.rank() == %d then error('bad batch') end; lab.dist.all_reduce(lab.ones(2))\r", bad);
    assert_true(expectf(s, 10, "[%d] error: stdin:1: ", bad));
    assert_true(expect(s, "bad batch", 10));
    assert_true(expect(s, "> ", 10));
    double ms = (pty_now() - t0) * 1e3;
    s->buf[s->len] = 0;
    const char *answer = s->buf + at;
    fprintf(stderr, "rank %d fails before an all_reduce at %s ranks over %d hosts: the prompt after %.0f ms\n", bad, np,
            hosts, ms);
    if (strstr(answer, "watchdog")) fprintf(stderr, "--- the others waited for the watchdog:\n%s\n---\n", answer);
    assert_null(strstr(answer, "watchdog"));
    assert_non_null(strstr(answer, "gave up at once"));
  }
  /* a receive from a rank on another host that stopped without sending: given up after the
   * sender check's grace (0.5 s), not at the watchdog */
  double t0 = pty_now();
  typef(s, "x = lab.zeros(2); if lab.dist.rank() == %d then error('no send') elseif lab.dist.rank() == 0 then "
           "lab.dist.recv(x, %d) end\r", last, last);
  assert_true(expectf(s, 10, "[0] error: recv: rank %d stopped with an error (shown first) without sending this message",
                      last));
  assert_true(expect(s, "> ", 10));
  double ms = (pty_now() - t0) * 1e3;
  fprintf(stderr, "a receive on rank 0 from rank %d on host%d, which failed: the prompt after %.0f ms\n", last, hosts, ms);
  assert_true(ms < 2500); /* the watchdog is 3 s */
}

/* Ctrl-C while the remote rank is inside one matrix product of seconds (6000^3 multiply-adds,
 * one batch: nothing to stop between, the interrupt is raised when it returns). Past a second
 * rank 0 says the interrupt is pending, with what every rank on every host is doing; then the
 * remote rank's error and the prompt. (A 3000^3 product, 0.3 s, could end before the Ctrl-C
 * reached it: its "multiplying" crosses the hosts with live output, up to a second late.) */
static void c_call(session *s) {
  typef(s, "%%on %d a = lab.randn({6000, 6000})\r", last);
  assert_true(expect(s, "> ", 60));
  typef(s, "%%on %d print('multiplying') b = a:matmul(a)\r", last);
  assert_true(expectf(s, 20, "[%d] multiplying", last));
  double t0 = pty_now();
  type(s, "\x03");
  assert_true(expect(s, "interrupt pending: a rank is inside a long C call", 30));
  fprintf(stderr, "Ctrl-C during rank %d's 6000^2 matmul on host%d: 'pending' after %.0f ms\n", last, hosts,
          (pty_now() - t0) * 1e3);
  assert_true(expectf(s, 5, "%s: running Lua", last_label)); /* the remote rank, with its host */
  assert_true(expectf(s, 60, "[%d] error: interrupted! (inside a C call", last));
  assert_true(expect(s, "> ", 10));
  fprintf(stderr, "Ctrl-C during rank %d's 6000^2 matmul on host%d: prompt after %.0f ms\n", last, hosts,
          (pty_now() - t0) * 1e3);
  typef(s, "%%on %d a, b = nil, nil; collectgarbage()\r", last);
  assert_true(expect(s, "> ", 10));
}

/* Ctrl-T while every rank spins: the board lists every rank with its host, and the remote
 * rank's traceback */
static void ctrl_t(session *s) {
  type(s, "print('spinning') while true do end\r");
  assert_true(expect(s, "] spinning", 20));
  double t0 = pty_now();
  type(s, "\x14");
  assert_true(expect(s, "^T every rank:", 10));
  assert_true(expectf(s, 10, "%s: running Lua", last_label));
  assert_true(expectf(s, 10, "rank %d stack traceback:", last));
  double ms = (pty_now() - t0) * 1e3;
  fprintf(stderr, "Ctrl-T at %s ranks over %d hosts: the remote rank's traceback after %.0f ms\n", np, hosts, ms);
  assert_true(ms < ANSWER_BOUND_MS); /* medians 18-60 ms, 137 ms the worst seen */
  type(s, "\x03");
  assert_true(expect(s, "> ", 10));
}

/* the straggler is on the last host: rank 0's one report names it with its host (LLMLAB_WATCHDOG
 * = 3 came with llmlab -n), and the waits it covers, on every host, point at it */
static void watchdog(session *s) {
  double t0 = pty_now();
  typef(s, "if lab.dist.rank() ~= %d then lab.dist.all_reduce(lab.ones(2)) else local t = lab.clock() "
           "while lab.clock() - t < 5 do end end\r", last);
  assert_true(expect(s, "watchdog: rank ", 20));
  double at = pty_now() - t0;
  assert_true(expectf(s, 5, "%s: running Lua", last_label));
  fprintf(stderr, "watchdog (3 s) report at %s ranks over %d hosts after %.0f ms\n", np, hosts, at * 1e3);
  /* 3.0-3.14 s seen; rank 0's report missing, the waits report themselves only at 3 + 5 s */
  assert_true(at < 4.5);
  /* every waiting rank, the remote ones too, gives up once the report has shown its wait (rank
   * 0 tells their hosts through the relay): one error for all of them, pointing at the report */
  assert_true(expectf(s, 20, "[0-%d] error: ", last - 1));
  assert_true(expect(s, "(the report above shows every rank)", 5));
  assert_true(expect(s, "> ", 20));
}

/* only the remote rank reaches lab.breakpoint(); the others wait in a barrier: they join its
 * stop from their wait, the prompt shows, c finishes the chunk */
static void remote_breakpoint(session *s) {
  double t0 = pty_now();
  type(s, "do\r");
  assert_true(expect(s, ">> ", 10));
  typef(s, "if lab.dist.rank() == %d then lab.breakpoint() end\r", last);
  assert_true(expect(s, ">> ", 10));
  type(s, "lab.dist.barrier()\r");
  assert_true(expect(s, ">> ", 10));
  type(s, "print('after', lab.dist.rank())\r");
  assert_true(expect(s, ">> ", 10));
  t0 = pty_now();
  type(s, "end\r");
  assert_true(expect(s, "(step) ", 20));
  fprintf(stderr, "breakpoint on rank %d (host%d): the stepper's prompt after %.0f ms\n", last, hosts,
          (pty_now() - t0) * 1e3);
  type(s, "c\r");
  assert_true(expectf(s, 20, "after\t%d", last));
  assert_true(expect(s, "> ", 10));
}

/* a stepper breakpoint that only the remote rank reaches (line 4); the others go on into the
 * all_reduce of line 6 and join its stop from their wait; c finishes the script everywhere.
 * The script is in the directory every host shares (MN_STATE; /tmp is each host's own). */
static void remote_step_breakpoint(session *s) {
  const char *dir = getenv("MN_STATE") ? getenv("MN_STATE") : home_dir;
  char path[512];
  snprintf(path, sizeof path, "%s/remote_step.lua", dir);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fprintf(f, "local r = lab.dist.rank()\n"   /* 1 */
             "local x = lab.ones(1)\n"       /* 2 */
             "if r == %d then\n"             /* 3 */
             "  x = x * 2\n"                 /* 4 */
             "end\n"                         /* 5 */
             "lab.dist.all_reduce(x)\n"      /* 6 */
             "print('stepped', x[1])\n",     /* 7 */
          last);
  fclose(f);
  typef(s, ":step %s\r", path);
  assert_true(expect(s, "(step) ", 30));
  type(s, "b 4\r");
  assert_true(expect(s, "breakpoint 1 at ", 10));
  double t0 = pty_now();
  type(s, "c\r");
  assert_true(expectf(s, 30, "[%d] %s:4", last, path));
  assert_true(expect(s, "(step) ", 20));
  fprintf(stderr, "stepper breakpoint on rank %d (host%d) only: the prompt after %.0f ms\n", last, hosts,
          (pty_now() - t0) * 1e3);
  type(s, "c\r");
  assert_true(expectf(s, 30, "stepped\t%d.0", last + 2));
  assert_true(expect(s, "> ", 20));
}

static const struct {
  const char *name;
  void (*run)(session *);
} cases[] = {{"live", live_output}, {"interrupts", interrupts}, {"typed_ahead", typed_ahead}, {"ddp_interrupted", ddp_interrupted}, {"fail_fast", fail_fast}, {"c_call", c_call}, {"ctrl_t", ctrl_t}, {"watchdog", watchdog},
             {"breakpoint", remote_breakpoint}, {"step_breakpoint", remote_step_breakpoint}};
static const char *only; /* one case (argv[4]): how each is shown to fail on an old binary */

/* every case in one session (each start across hosts costs seconds), then Ctrl-D */
static void test_repl_across_hosts(void **state) {
  (void)state;
  session s;
  start_ranks(&s, np);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    if (!only || !strcmp(only, cases[i].name)) cases[i].run(&s);
  type(&s, "\x04"); /* Ctrl-D: every rank ends */
  assert_int_equal(finish(&s, 20), 0);
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s path/to/llmlab NP HOSTS [live|interrupts|typed_ahead|ddp_interrupted|fail_fast|c_call|ctrl_t|watchdog|breakpoint|step_breakpoint] (run on host1 by "
                    "test_multinode.sh)\n", argv[0]);
    return 2;
  }
  pty_setup(argc, argv);
  np = argv[2];
  last = atoi(np) - 1;
  hosts = atoi(argv[3]);
  only = argc > 4 ? argv[4] : NULL;
  if (hosts > 1)
    snprintf(last_label, sizeof last_label, "rank %d (host%d)", last, hosts);
  else
    snprintf(last_label, sizeof last_label, "rank %d", last);
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_repl_across_hosts)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
