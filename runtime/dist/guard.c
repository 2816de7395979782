/* The guarded wait of guard.h: interrupt, watchdog and debugger pause around a backend's
 * polled request, and the poisoning of a group whose collective was abandoned. */
#include "guard.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "../error.h"
#include "board.h"
#include "clock.h"

/* how long past the watchdog a monitored wait waits for rank 0's report before giving up with
 * its own */
#define REPORT_LATE_S 5.0

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
    if (lab_board_info_pending()) lab_board_answer_info(g->wait->traceback); /* Ctrl-T */
    int failed = 0, gone = lab_board_missing_member(g->world_ranks, g->size, &failed);
    int from = lab_board_sender_gone(&failed);
    if (from >= 0) { /* a receive whose sender finished: the message is not coming */
      lab_group_poison(g);
      lab_board_note_gave_up();
      return lab_fail(op, "rank %d %s without sending this message on %s; gave up", from,
                      failed ? "stopped with an error (shown first)" : "finished", g->name);
    }
    if (gone >= 0) { /* a member finished without posting this collective: it never will */
      lab_group_poison(g);
      lab_board_note_gave_up();
      if (failed)
        return lab_fail(op, "rank %d stopped with an error (shown first) before it joined this collective on %s; "
                            "gave up at once", gone, g->name);
      return lab_fail(op, "rank %d finished without joining this collective on %s; gave up at once", gone, g->name);
    }
    double wd = g->wait->watchdog, waited = lab_now() - t0;
    /* in the REPL (monitored) rank 0 prints the board once a wait passes wd: this wait gives up
     * when that report has shown it, so the report always has it; if none has within
     * REPORT_LATE_S more (rank 0's watcher starved for a core, a rank on another node), or none
     * can (the board shows this rank running again: a wait resumed after a debugger pause), it
     * reports the board itself, as unmonitored waits do */
    int monitored = lab_board_monitored() && lab_board_in_wait();
    if (wd > 0 && waited > wd && monitored && lab_board_wait_shown()) {
      lab_group_poison(g);
      return lab_fail(op, "watchdog: no progress for %.0f s on %s; a rank never arrived (the report above shows every rank)",
                      wd, g->name);
    }
    if (wd > 0 && waited > wd && (!monitored || waited > wd + REPORT_LATE_S)) {
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
