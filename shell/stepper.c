/* The stepper. Every pause is one exchange on the control channel in which every rank
 * takes part: positions (and the output since the last pause) go to rank 0, rank 0
 * broadcasts a command, every rank answers; resuming commands end the exchange. Each rank
 * then runs until its own stop (its next line, its frame's return, a breakpoint), joins a
 * stop of another rank from a collective wait or from the end of its work, or, after a grace,
 * from wherever it runs. */
#define _GNU_SOURCE
#include "stepper.h"

#include <lauxlib.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "completion.h"
#include "grouped.h"
#include "runtime/lab_control.h"
#include "repl.h"
#include "session.h"
#include "stepper_exec.h"
#include "stepper_frames.h"
#include "stepper_state.h"

/* How long a running rank may go on when another has stopped before it is pulled into that
 * stop: after c, long enough to reach the same breakpoint itself (SPMD code then stops once,
 * every rank there); after n, s, finish or until each rank stops where its own command ends,
 * and the long grace only keeps a rank that never gets there (or that runs library code, where
 * no one wants to stop) from holding the others. */
#define PAUSE_GRACE_S 1.0
#define STEP_GRACE_S 10.0

stepper_state st;

void stepper_set_terminal(char *(*read_line)(const char *prompt), FILE *out) {
  st.read_line = read_line;
  st.out = out;
}

int stepper_stack_depth(lua_State *L) {
  lua_Debug ar;
  int d = 0;
  while (lua_getstack(L, d, &ar)) d++;
  return d;
}

void stepper_say(const char *fmt, ...) {
  if (lab_ctl_rank() != 0) return;
  va_list ap;
  va_start(ap, fmt);
  vfprintf(st.out, fmt, ap);
  va_end(ap);
  fflush(st.out);
}

/* ---- the exchange ---- */

void stepper_show_all(const char *mine) {
  print_from_all(st.out ? st.out : stdout, mine, mine ? (int64_t)strlen(mine) : 0, lab_ctl_size() > 1);
}

static void resume_breaks(void);
static int resumed = 1;

/* a stop in the line hook (where NULL) or in a wait: a quit raises only from the hook (not from
 * a wait, nor from an error already being raised) */
static void pause_protocol(lua_State *L, const char *where) { stepper_pause_at(L, where ? 1 : 0, where, !where); }

void stepper_pause_at(lua_State *L, int base, const char *where, int raise_on_quit) {
  /* a plain script where only other ranks called lab.breakpoint(): rank 0 takes the terminal */
  if (lab_ctl_rank() == 0 && !st.read_line) repl_attach_terminal(L);
  lab_board_raise_pause();
  __atomic_store_n(&resumed, 0, __ATOMIC_SEQ_CST); /* Ctrl-C waits for the exchange (stepper_request_break) */
  if (st.own_capture && st.capturing) { /* what the script printed since the last pause */
    int64_t len = 0;
    char *text = capture_end(&st.cap, &len);
    st.capturing = 0;
    stepper_show_all(text);
    free(text);
  } else {
    stepper_show_all(NULL);
  }
  /* no hook while the ranks talk: a rank that joined from a collective's wait (not from inside
   * a hook, where Lua runs none) would otherwise stop again in its line hook on the first line
   * that p, display or a Lua line runs, and start a second exchange the others never join */
  lua_Hook hook = lua_gethook(L);
  int hook_mask = lua_gethookmask(L), hook_count = lua_gethookcount(L);
  lua_sethook(L, NULL, 0, 0);
  st.base = base;
  st.frame = 0;
  st.where = where;
  char pos[1024];
  frame_position(L, st.base, where, pos, sizeof pos - 1);
  strcat(pos, "\n");
  lab_board_set(LAB_PAUSED, "", "");
  stepper_show_all(pos);
  stepper_show_displays(L);
  for (;;) {
    char *cmd = NULL;
    int64_t len = 0;
    if (lab_ctl_rank() == 0) {
      completion_set_frame(st.base + st.frame); /* Tab knows the frame's locals (cfg.<TAB>) */
      char *line = st.read_line ? st.read_line(exec_prompt()) : NULL;
      completion_set_frame(-1);
      cmd = line ? line : strdup(exec_eof_line()); /* Ctrl-D: quit, or leave interact */
      len = (int64_t)strlen(cmd);
    }
    lab_ctl_bcast(&cmd, &len);
    int resume = stepper_command(L, cmd);
    free(cmd);
    if (resume) break;
  }
  st.where = NULL;
  lua_sethook(L, hook, hook_mask, hook_count);
  /* every rank has answered this pause: the epoch as it is now is served (all are here) */
  int epoch = lab_board_pause_epoch(), agreed = 0;
  lab_ctl_max(epoch, &agreed, 0);
  lab_board_set_served(agreed);
  resume_breaks();
  /* a count left from a stop this rank saw in a library frame and then joined by its own
   * command must not pull it into the next one at once (a REPL chunk later stopped twice) */
  st.pending_since = 0;
  lab_board_set(LAB_RUNNING, "", "");
  if (st.own_capture) st.capturing = capture_begin(&st.cap) == 0;
  if (st.mode == MODE_QUIT) {
    lua_sethook(L, NULL, 0, 0);
    if (raise_on_quit) session_stop(L, "stepper: quit");
  } else if (!st.active && st.mode != MODE_CONTINUE) {
    /* a rank that joined the pause from the REPL's hook or a wait steps from now on too */
    st.active = 1;
    lua_sethook(L, stepper_line_hook, LUA_MASKLINE, 0);
  }
}

/* 1 once another rank's stop has waited `grace` seconds for this one (counted from when this
 * rank first saw it; every pause this rank takes part in starts the count again) */
static int pull_in_due(double grace) {
  if (!lab_board_pause_pending()) {
    st.pending_since = 0;
    return 0;
  }
  if (st.pending_since == 0) st.pending_since = lab_now();
  return lab_now() - st.pending_since > grace;
}

/* lab.breakpoint() in a chunk typed at the prompt: most are one line, with no next line to
 * stop at, so the stop comes with the caller's next instruction (a count hook of 1) */
static int stop_after_call;

/* A stop that came mid-line (that count hook): Lua then reports the rest of the same line as
 * a new line event, which must not stop again (`s` would stay on the line it stopped at). */
static struct {
  const void *fn;
  int line, depth;
} stopped_mid_line;

void stepper_line_hook(lua_State *L, lua_Debug *ar) {
  int mid_line = ar->event == LUA_HOOKCOUNT;
  if (mid_line) {
    lua_sethook(L, stepper_line_hook, LUA_MASKLINE, 0);
    if (!stop_after_call) return;
    stop_after_call = 0;
  } else if (ar->event != LUA_HOOKLINE) {
    return;
  }
  session_check_interrupt(L);
  if (!lua_getinfo(L, "Sl", ar) || ar->currentline <= 0) return;
  int in_library = strstr(ar->source, "/lua/lab/") != NULL;
  int skip = in_library && st.skip_lib; /* pdb skips its own frames; we skip the library's */
  int depth = stepper_stack_depth(L) - 1, pause = 0;
  if (!mid_line && stopped_mid_line.fn) {
    int same = stopped_mid_line.fn == frame_function(L, 0) && stopped_mid_line.line == ar->currentline &&
               stopped_mid_line.depth == depth;
    stopped_mid_line.fn = NULL;
    if (same) return;
  }
  switch (st.mode) {
  case MODE_INTO: pause = !skip; break;
  case MODE_OVER: pause = !skip && depth <= st.target_depth; break;
  case MODE_FINISH: pause = !skip && depth < st.target_depth; break;
  case MODE_UNTIL:
    pause = !skip && (depth < st.target_depth ||
                      (depth == st.target_depth && ar->currentline > st.until_line && frame_function(L, 0) == st.until_fn));
    break;
  case MODE_CONTINUE: pause = breaks_hit(L, ar); break;
  default: break;
  }
  /* another rank stopped: this one stops too once the grace is over, in the user's code (in the
   * library only after the long grace, so that a rank inside a long library call still joins) */
  if (!pause) pause = pull_in_due(st.mode == MODE_CONTINUE && !in_library ? PAUSE_GRACE_S : STEP_GRACE_S);
  if (!pause) return;
  pause_protocol(L, NULL);
  if (mid_line) {
    stopped_mid_line.fn = frame_function(L, 0);
    stopped_mid_line.line = ar->currentline;
    stopped_mid_line.depth = depth;
  }
}

void stepper_answer_pauses_as(const char *what) {
  if (st.L && lab_board_pause_pending() && st.mode != MODE_QUIT) pause_protocol(st.L, what);
}

/* a rank waiting in a collective joins the pause; after q it stops waiting */
int stepper_wait_handler(const char *where) {
  if (!st.L) return 0;
  pause_protocol(st.L, where);
  return st.mode == MODE_QUIT;
}

void stepper_arm(lua_State *L) {
  st.L = L;
  st.mode = MODE_CONTINUE;
  st.pending_since = 0;
  lab_board_set_pause_handler(stepper_wait_handler);
}

void stepper_disarm(void) {
  if (st.L) lua_sethook(st.L, NULL, 0, 0);
  st.active = 0;
  st.mode = MODE_CONTINUE;
  st.L = NULL;
  lab_board_set_pause_handler(NULL);
}

/* from the REPL's count hook: the same grace as after c, so that a lab.breakpoint() that every
 * rank reaches stops once, with every rank there */
void stepper_pause_if_asked(lua_State *L) {
  if (st.L && pull_in_due(frame_in_library(L, 0) ? STEP_GRACE_S : PAUSE_GRACE_S)) pause_protocol(L, NULL);
}

void stepper_answer_pauses(void) { stepper_answer_pauses_as("(finished the chunk)"); }

void stepper_arm_batch(lua_State *L) {
  lab_dist_set_guarded(1);
  if (lab_ctl_rank() != 0) stepper_set_terminal(NULL, stdout);
  stepper_arm(L);
}

void stepper_answer_pauses_script(void) { stepper_answer_pauses_as("(finished the script)"); }

int stepper_batch_done(double timeout_s) {
  int late = lab_ctl_wait_all_done_within(stepper_answer_pauses_script, timeout_s);
  stepper_disarm();
  return late;
}

/* Ctrl-C while a stepped script runs breaks into (step), whatever the mode: a `c` typed just
 * before it may still be waiting in the watcher's typeahead (mode not yet CONTINUE), and the
 * request is then raised when the ranks resume (resume_breaks), not turned into 'interrupted!' */
int stepper_breaks_on_interrupt(void) { return st.L && st.active; }

/* A Ctrl-C that comes while the ranks still finish the exchange of `c` would raise a pause
 * they then mark served (lost: the script ran on); it is kept until the exchange is over. The
 * watcher sets the request before it looks at `resumed`, the stepper sets `resumed` before it
 * looks at the request: whichever comes second raises the pause, once. */
static int break_requested;

void stepper_request_break(void) {
  __atomic_store_n(&break_requested, 1, __ATOMIC_SEQ_CST);
  if (__atomic_load_n(&resumed, __ATOMIC_SEQ_CST) && __atomic_exchange_n(&break_requested, 0, __ATOMIC_SEQ_CST))
    lab_board_raise_pause();
}

static void resume_breaks(void) {
  __atomic_store_n(&resumed, 1, __ATOMIC_SEQ_CST);
  if (__atomic_exchange_n(&break_requested, 0, __ATOMIC_SEQ_CST)) lab_board_raise_pause();
}

/* lab.breakpoint(): every rank that calls it stops here (the others at their next line) */
static int l_breakpoint(lua_State *L) {
  if (!st.read_line) repl_attach_terminal(L); /* a plain script: rank 0 takes the terminal now */
  if (!st.active) {
    st.active = 1;
    st.L = L;
    lab_board_set_pause_handler(stepper_wait_handler);
    lab_dist_set_guarded(1);
    lua_sethook(L, stepper_line_hook, LUA_MASKLINE, 0);
  }
  st.mode = MODE_INTO; /* stop at the next line of the caller */
  st.skip_lib = 1;
  lua_Debug caller;
  if (lua_getstack(L, 1, &caller) && lua_getinfo(L, "S", &caller) && strcmp(caller.source, "=stdin") == 0) {
    stop_after_call = 1; /* typed at the prompt: right after this call, on its line */
    lua_sethook(L, stepper_line_hook, LUA_MASKLINE | LUA_MASKCOUNT, 1);
  }
  return 0;
}

void stepper_register(lua_State *L) {
  lua_getglobal(L, "lab");
  lua_pushcfunction(L, l_breakpoint);
  lua_setfield(L, -2, "breakpoint");
  lua_pop(L, 1);
}

