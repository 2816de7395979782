/* The debugger's pause epoch on the activity board: a raise is a new pause for every rank, even
 * on a host whose board the relay has not yet brought up to the epoch the ranks agreed was
 * served (the agreement is a collective and can outrun the relay). */
#include <mpi.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "runtime/dist/board.h"

static int handler(const char *where) {
  (void)where;
  return 0;
}

static void test_raise_behind_served(void **state) {
  (void)state;
  lab_board_set_pause_handler(handler);
  int e = lab_board_pause_epoch();
  /* the other hosts raised three pauses; the ranks agreed on e + 3 as served before the relay
   * brought those raises here */
  lab_board_set_served(e + 3);
  assert_false(lab_board_pause_pending());
  lab_board_raise_pause(); /* a rank of this host stops at a breakpoint */
  assert_true(lab_board_pause_pending()); /* lost when the board stayed behind the agreement */
  assert_int_equal(lab_board_pause_epoch(), e + 4);
  /* the relay then brings the older raises: no effect, the new pause stays pending */
  lab_board_pause_to(e + 3);
  assert_int_equal(lab_board_pause_epoch(), e + 4);
  assert_true(lab_board_pause_pending());
}

static void test_raise_ahead_of_served(void **state) {
  (void)state;
  lab_board_set_pause_handler(handler);
  lab_board_pause_to(lab_board_served() + 2); /* two raises here, not yet answered */
  int e = lab_board_pause_epoch();
  lab_board_raise_pause();
  assert_int_equal(lab_board_pause_epoch(), e + 1);
  lab_board_set_served(e + 1); /* answered */
  assert_false(lab_board_pause_pending());
  lab_board_set_pause_handler(NULL); /* no debugger: nothing is pending */
  lab_board_raise_pause();
  assert_false(lab_board_pause_pending());
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv); /* a singleton: the board is a shared window over this node's ranks */
  if (lab_board_init(0) != 0) return 1;
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_raise_behind_served), cmocka_unit_test(test_raise_ahead_of_served)};
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  MPI_Finalize();
  return failed;
}
