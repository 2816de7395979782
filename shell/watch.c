/* Rank 0 reads its terminal while a chunk runs: Ctrl-C interrupts (or, after `c` in the
 * stepper, breaks into it), Ctrl-T shows every rank, other keys are kept for readline (typed
 * ahead); meanwhile it prints the watchdog's report and the live output (see watch.h). */
#define _GNU_SOURCE
#include "watch.h"

#include <poll.h>
#include <pthread.h>
#include <readline/readline.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "live.h"
#include "runtime/lab_control.h"
#include "stepper.h"

static volatile int watching, running;
static terminal *term;
static pthread_t watcher;
static char typeahead[4096];
static volatile size_t typeahead_len;
static size_t typeahead_pos;

static int wake_pipe[2] = {-1, -1}; /* stop_watching wakes the watcher at once */

/* A Ctrl-C that has not ended the chunk after a second: some rank is inside one long C call
 * (a BLAS product cannot stop midway). Say so once, with what the board shows. */
static void say_interrupt_pending(void) {
  char *report = lab_board_report();
  fprintf(term->out, "^C interrupt pending: a rank is inside a long C call and stops when it returns, or its "
                    "code caught the interrupt (pcall): Ctrl-C again stops it at its next line. "
                    "What every rank is doing:%s\n", report ? report : "");
  fflush(term->out);
  free(report);
}

/* Ctrl-T: every busy rank writes its traceback into the board (from its hook, or from the
 * collective it waits in); the board is printed when all have, or after a second. */
static void show_every_rank(void) {
  lab_board_request_info();
  double end = lab_now() + 1.0;
  struct timespec nap = {0, 10000000};
  while (!lab_board_info_answered() && lab_now() < end) nanosleep(&nap, NULL);
  char *report = lab_board_info_report();
  fprintf(term->out, "^T every rank:%s\n", report ? report : "");
  fflush(term->out);
  free(report);
}

/* the watchdog's one report, from the board at one moment, while the chunk still runs */
static void report_stalls(void) {
  char *report = lab_board_stalled(lab_dist_watchdog());
  if (!report) return;
  fprintf(term->out, "%s\n", report);
  fflush(term->out);
  free(report);
  lab_board_stall_shown(); /* the waits it shows may give up now */
}

static void *watch_terminal(void *arg) {
  (void)arg;
  double interrupted_at = 0;
  int said = 0;
  while (watching) {
    struct pollfd p[2] = {{.fd = fileno(term->in), .events = POLLIN}, {.fd = wake_pipe[0], .events = POLLIN}};
    int ready = poll(p, 2, 50); /* live output within 0.2 s, stalls, pending Ctrl-C */
    if (interrupted_at > 0 && !said && lab_board_interrupt_requested() && lab_now() - interrupted_at > 1.0) {
      say_interrupt_pending();
      said = 1;
    }
    report_stalls();
    live_poll(term->out);
    if (ready <= 0) continue;
    if (p[1].revents) {
      char sink[16];
      if (read(wake_pipe[0], sink, sizeof sink) < 0) {}
      continue;
    }
    char c;
    if (read(p[0].fd, &c, 1) != 1) break;
    if (c == 3 && stepper_breaks_on_interrupt()) { /* after `c` in the stepper: break into (step) */
      stepper_request_break();
    } else if (c == 3) {
      lab_board_request_interrupt();
      if (interrupted_at == 0) interrupted_at = lab_now();
    } else if (c == 20) {
      show_every_rank();
    }
    else if (typeahead_len < sizeof typeahead) typeahead[typeahead_len++] = c;
  }
  return NULL;
}

int watch_getc(FILE *f) {
  if (typeahead_pos < typeahead_len) return (unsigned char)typeahead[typeahead_pos++];
  typeahead_pos = typeahead_len = 0;
  return rl_getc(f);
}

void watch_on_sigint(int sig) {
  (void)sig;
  if (running && stepper_breaks_on_interrupt()) stepper_request_break(); /* after `c`: into (step) */
  else if (running || !term->interactive) lab_board_request_interrupt();
  else terminal_interrupt_line(term);
}

void watch_start(void) {
  if (lab_ctl_rank() != 0 || !term->relayed) return;
  if (wake_pipe[0] < 0 && pipe(wake_pipe) < 0) return;
  terminal_run_mode(term);
  lab_board_set_monitored(1);
  watching = 1;
  pthread_create(&watcher, NULL, watch_terminal, NULL);
}

void watch_stop(void) {
  if (lab_ctl_rank() != 0 || !term->relayed || !watching) return;
  watching = 0;
  if (write(wake_pipe[1], "x", 1) < 0) {}
  pthread_join(watcher, NULL);
  lab_board_set_monitored(0);
}

void watch_init(terminal *t) { term = t; }
void watch_set_running(int on) { running = on; }
int watch_active(void) { return watching; }
