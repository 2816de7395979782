/* The guarded wait of guard.h: interrupt, watchdog and debugger pause around a backend's
 * polled request, and the poisoning of a group whose collective was abandoned. */
#include "guard.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "../error.h"
#include "board.h"
#include "clock.h"

void lab_group_poison(lab_group *g) { g->poisoned = 1; }

int lab_guard_wait(lab_group *g, const char *op, lab_guard_test_fn test, void *ctx) {
  int done = 0;
  for (int i = 0; i < 2000 && !done; i++)
    if (test(ctx, &done) < 0) {
      lab_group_poison(g);
      return -1;
    }
  double t0 = lab_now();
  struct timespec nap = {0, 50000};
  while (!done) {
    if (lab_board_interrupt_requested()) {
      lab_group_poison(g);
      return lab_fail(op, "interrupted (Ctrl-C) while waiting for the other ranks of %s", g->name);
    }
    if (lab_board_info_pending()) lab_board_answer_info(lab_dist_call_traceback()); /* Ctrl-T */
    double wd = lab_board_watchdog();
    /* when rank 0 prints the board (at wd), give it half a second to see this wait in it */
    if (wd > 0 && lab_now() - t0 > wd + 0.5 && lab_board_monitored()) {
      lab_group_poison(g);
      return lab_fail(op, "watchdog: no progress for %.0f s on %s; a rank never arrived (the report above shows every rank)",
                      wd, g->name);
    }
    if (wd > 0 && lab_now() - t0 > wd && !lab_board_monitored()) {
      char *report = lab_board_report();
      lab_group_poison(g);
      lab_fail(op, "watchdog: no progress for %.0f s on %s; a rank never arrived. What every rank is doing:%s", wd,
               g->name, report ? report : "");
      free(report);
      return -1;
    }
    if (lab_board_pause_pending()) { /* the debugger stopped another rank: join it from here */
      char where[200];
      snprintf(where, sizeof where, "waiting in %s on %s", op, g->name);
      if (lab_board_pause_now(where)) { /* the stepper quit: stop waiting */
        lab_group_poison(g);
        return lab_fail(op, "stepper: quit while waiting for the other ranks of %s", g->name);
      }
      t0 = lab_now(); /* time spent paused is not the collective's fault */
    }
    if (lab_now() - t0 > 0.01) nanosleep(&nap, NULL); /* after 10 ms, stop burning the core */
    if (test(ctx, &done) < 0) {
      lab_group_poison(g);
      return -1;
    }
  }
  return 0;
}
