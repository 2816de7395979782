/* The rest of what a learner found (issue 27), through a pseudo-terminal at 2 and 4 ranks:
 * the prompt shows the target ranks when not all; a collective's root in a %on chunk is a world
 * rank, as lab.dist.rank() there reports it (one not targeted is refused), in an explicit group a
 * rank of the group; :run passes quoted arguments as one;
 * lab.train.run takes a DDP wrapper (and its replicas stay equal); lab.print_on is lab.printr
 * and shows tables by their contents. */
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

static void test_rest(void **state) {
  (void)state;
  char path[512], cmd[700];
  session s;
  start_ranks(&s, ranks);
  type(&s, ":ranks 1\r");
  assert_true(expect(&s, "[1]> ", 20));
  type(&s, ":ranks all\r");
  assert_true(expect(&s, "\n> ", 20));
  type(&s, "lab.print_on(1, 'only on', lab.dist.rank())\r"); /* lab.printr's other name */
  assert_true(expect(&s, "[1] only on\t1\r\n", 20));
  type(&s, "lab.printr(1, {b = 2, a = {1, 2}})\r");
  assert_true(expect(&s, "[1] {a = {1, 2}, b = 2}\r\n", 20));
  type(&s, "=lab.printr == lab.print_on\r"); /* one function */
  expect_all(&s, "true\r\n", 20);
  type(&s, "t = lab.ones(2)\r");
  assert_true(expect(&s, "> ", 20));
  /* a root in a %on chunk is a world rank, as lab.dist.rank() there reports it: broadcast from
   * world rank 1 and 3 (ranks 0 and 1 of the targeted group); a rank not targeted is refused */
  const char *on = nranks >= 4 ? "%on 1,3" : "%on 0,1", *odds = nranks >= 4 ? "[1,3]" : "[0-1]";
  int a = nranks >= 4 ? 1 : 0, b = nranks >= 4 ? 3 : 1, outside = nranks >= 4 ? 2 : 5;
  snprintf(cmd, sizeof cmd, "%s x = lab.tensor({lab.dist.rank()}); lab.dist.broadcast(x, %d); print('from', x[1])\r", on, b);
  type(&s, cmd);
  assert_true(expectf(&s, 20, "%s from\t%d\r\n", odds, b));
  snprintf(cmd, sizeof cmd, "%s x = lab.tensor({lab.dist.rank()}); lab.dist.reduce(x, %d, 'max'); lab.dist.broadcast(x, %d); "
           "print('max', x[1])\r", on, a, a);
  type(&s, cmd);
  assert_true(expectf(&s, 20, "%s max\t%d\r\n", odds, b));
  snprintf(cmd, sizeof cmd, "%s lab.dist.broadcast(t, %d)\r", on, outside);
  type(&s, cmd);
  assert_true(expectf(&s, 20, "broadcast: src %d is not one of the ranks this chunk runs on (%d,%d): in a %%on or :ranks "
                      "chunk src counts world ranks, as lab.dist.rank() does", outside, a, b));
  /* an explicit group counts its own ranks, as g:rank() does */
  type(&s, "g = lab.dist.new_group({1, 0})\r");
  assert_true(expect(&s, "> ", 20));
  type(&s, "%on 0,1 x = lab.tensor({lab.dist.rank()}); lab.dist.broadcast(x, 1, {group = g}); print('g', x[1])\r");
  assert_true(expect(&s, "[0-1] g\t0\r\n", 20));
  snprintf(path, sizeof path, "%s/rest_args.lua", home_dir);
  write_file(path, "print(#arg, arg[1], arg[2])\n");
  snprintf(cmd, sizeof cmd, ":run %s \"x y\" z\r", path);
  type(&s, cmd);
  expect_all(&s, "2\tx y\tz\r\n", 30);
  snprintf(path, sizeof path, "%s/rest_ddp.lua", home_dir);
  write_file(path, "lab.manual_seed(7)\n"
                   "local task = lab.data.copy_task(4, 6)\n"
                   "local model = lab.nn.GPT { vocab = task.vocab, d_model = 16, n_layer = 1, n_head = 2,\n"
                   "  seq_len = task.seq_len }\n"
                   "local d = lab.ddp.wrap(model)\n"
                   "lab.seed_per_rank(3)\n"
                   "local r = lab.train.run { model = d, batch = function() return task.batch(4) end, steps = 3,\n"
                   "  quiet = true }\n"
                   "local s = lab.tensor({ model:parameters()[1]:sum():item() }, { dtype = 'f64' })\n"
                   "local mx, mn = s:clone(), s:clone()\n"
                   "lab.dist.all_reduce(mx, { op = 'max' }); lab.dist.all_reduce(mn, { op = 'min' })\n"
                   "print('trained', r.loss > 0, 'replicas equal', mx[1] == mn[1])\n");
  snprintf(cmd, sizeof cmd, ":run %s\r", path);
  type(&s, cmd);
  expect_all(&s, "trained\ttrue\treplicas equal\ttrue", 60);
  type(&s, "\x04");
  assert_int_equal(finish(&s, 30), 0);
}

int main(int argc, char **argv) {
  pty_setup(argc, argv);
  if (argc > 2) ranks = argv[2];
  nranks = atoi(ranks);
  snprintf(all, sizeof all, "[0-%d]", nranks - 1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rest),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
