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

#include "capture.h"
#include "grouped.h"
#include "runtime/lab.h"
#include "repl.h"
#include "session.h"
#include "stepper_exec.h"
#include "stepper_frames.h"
#include "words.h"

enum { MODE_INTO, MODE_OVER, MODE_FINISH, MODE_UNTIL, MODE_CONTINUE, MODE_QUIT };

/* How long a running rank may go on when another has stopped before it is pulled into that
 * stop: after c, long enough to reach the same breakpoint itself (SPMD code then stops once,
 * every rank there); after n, s, finish or until each rank stops where its own command ends,
 * and the long grace only keeps a rank that never gets there (or that runs library code, where
 * no one wants to stop) from holding the others. */
#define PAUSE_GRACE_S 1.0
#define STEP_GRACE_S 10.0

#define MAX_DISPLAYS 32

typedef struct breakpoint {
  int id;
  char file[256];
  int line;
  char cond[256];
  int temporary; /* tbreak: deleted when first hit */
  struct breakpoint *next;
} breakpoint;

static struct {
  lua_State *L;
  int active;
  int mode, target_depth;
  int until_line;         /* until: stop past this line of the frame... */
  const void *until_fn;   /* ...when it is this function (the same depth may be another call) */
  int skip_lib;           /* n, s, finish, until step over lua/lab/ files (s! does not) */
  int base, frame;        /* the paused frame's stack level (1 inside a wait) and up's offset */
  const char *where;      /* where a rank without a Lua frame is (a wait, the end) */
  double pending_since;   /* when this rank first saw another's stop it has not joined yet */
  breakpoint *bps;
  int next_bp;
  struct {
    int id;
    char expr[256];
  } displays[MAX_DISPLAYS];
  int ndisplays, next_display;
  capture cap;
  int capturing;
  char *(*read_line)(const char *prompt);
  FILE *out;
  char *tail; /* output after the last pause */
  int own_capture; /* the stepper captures output itself (--step, :step), not the REPL */
} st;

void stepper_set_terminal(char *(*read_line)(const char *prompt), FILE *out) {
  st.read_line = read_line;
  st.out = out;
}

static int stack_depth(lua_State *L) {
  lua_Debug ar;
  int d = 0;
  while (lua_getstack(L, d, &ar)) d++;
  return d;
}

/* rank 0 prints a line of its own (a confirmation, help) */
static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...) {
  if (lab_ctl_rank() != 0) return;
  va_list ap;
  va_start(ap, fmt);
  vfprintf(st.out, fmt, ap);
  va_end(ap);
  fflush(st.out);
}

/* ---- the exchange ---- */

static void show_from_all(const char *mine) {
  char *all = NULL;
  int64_t *lens = NULL;
  lab_ctl_gather(mine ? mine : "", mine ? (int64_t)strlen(mine) : 0, &all, &lens);
  if (lab_ctl_rank() == 0) {
    int n = lab_ctl_size();
    const char **texts = malloc(sizeof *texts * (size_t)n);
    int64_t o = 0;
    for (int r = 0; r < n; r++) {
      texts[r] = all + o;
      o += lens[r];
    }
    print_grouped(st.out ? st.out : stdout, n, texts, lens, n > 1);
    free(texts);
  }
  free(all);
  free(lens);
}

/* ---- breakpoints ---- */

/* b file:line [cond], or b line [cond] in the file of the selected frame (here) */
static void add_breakpoint(const char *spec, const char *here, int temporary) {
  breakpoint *b = calloc(1, sizeof *b);
  if (!b) return;
  char file[256] = "";
  int line = 0, used = 0;
  while (*spec == ' ') spec++;
  if (sscanf(spec, "%255[^: ]:%d%n", file, &line, &used) < 2 || line <= 0) {
    line = 0;
    if (sscanf(spec, "%d%n", &line, &used) == 1 && line > 0 && here && here[0]) {
      snprintf(file, sizeof file, "%s", here);
    } else {
      free(b);
      say("usage: b file:line [condition], or b line [condition] in this file\n");
      return;
    }
  }
  b->temporary = temporary;
  const char *cond = spec + used;
  while (*cond == ' ') cond++;
  b->id = ++st.next_bp;
  snprintf(b->file, sizeof b->file, "%s", file);
  b->line = line;
  snprintf(b->cond, sizeof b->cond, "%s", cond);
  b->next = st.bps;
  st.bps = b;
  say("%sbreakpoint %d at %s:%d%s%s\n", temporary ? "temporary " : "", b->id, file, line, cond[0] ? " if " : "", cond);
}

static void list_breakpoints(void) {
  if (!st.bps) say("no breakpoints\n");
  for (int id = 1; id <= st.next_bp; id++) /* in the order they were set */
    for (breakpoint *b = st.bps; b; b = b->next)
      if (b->id == id)
        say("%sbreakpoint %d at %s:%d%s%s\n", b->temporary ? "temporary " : "", b->id, b->file, b->line,
            b->cond[0] ? " if " : "", b->cond);
}

static void delete_breakpoints(const char *arg) {
  int id = atoi(arg), gone = 0;
  for (breakpoint **p = &st.bps; *p;) {
    if (id == 0 || (*p)->id == id) {
      breakpoint *b = *p;
      *p = b->next;
      free(b);
      gone++;
    } else {
      p = &(*p)->next;
    }
  }
  if (id == 0) say("deleted %d breakpoint%s\n", gone, gone == 1 ? "" : "s");
  else if (gone) say("deleted breakpoint %d\n", id);
  else say("no breakpoint %d\n", id);
}

/* every breakpoint and display goes, and numbers start at 1 again (a new :step session) */
static void reset_breakpoints(void) {
  while (st.bps) {
    breakpoint *b = st.bps;
    st.bps = b->next;
    free(b);
  }
  st.next_bp = 0;
  st.ndisplays = st.next_display = 0;
}

/* ---- displays: expressions every rank shows at every stop ---- */

/* every rank's values of display `only` (0: all) in the selected frame, each display grouped
 * by itself ([0-3] 1: step = 4, then [0] 2: loss = ... per rank where they differ) */
static void show_displays(lua_State *L, int only) {
  for (int i = 0; i < st.ndisplays; i++) {
    if (only && st.displays[i].id != only) continue;
    char *mine = NULL;
    if (frame_exists(L, st.base + st.frame)) { /* a rank that is done has nothing to show */
      char *v = frame_eval(L, st.base + st.frame, st.displays[i].expr, "display", NULL);
      if (asprintf(&mine, "%d: %s = %s\n", st.displays[i].id, st.displays[i].expr, v ? v : "?") < 0) mine = NULL;
      free(v);
    }
    show_from_all(mine);
    free(mine);
  }
}

static void add_display(lua_State *L, const char *expr) {
  while (*expr == ' ') expr++;
  if (!expr[0]) { /* display: show them all now */
    if (st.ndisplays == 0) say("no displays\n");
    else show_displays(L, 0);
    return;
  }
  if (st.ndisplays == MAX_DISPLAYS) {
    say("display: already %d expressions; undisplay one first\n", MAX_DISPLAYS);
    return;
  }
  int i = st.ndisplays++;
  st.displays[i].id = ++st.next_display;
  snprintf(st.displays[i].expr, sizeof st.displays[i].expr, "%s", expr);
  show_displays(L, st.displays[i].id);
}

static void undisplay(const char *arg) {
  int id = atoi(arg), gone = 0, kept = 0;
  for (int i = 0; i < st.ndisplays; i++) {
    if (id == 0 || st.displays[i].id == id) gone++;
    else st.displays[kept++] = st.displays[i];
  }
  st.ndisplays = kept;
  if (id == 0) say("deleted %d display%s\n", gone, gone == 1 ? "" : "s");
  else if (gone) say("deleted display %d\n", id);
  else say("no display %d\n", id);
}

/* ---- commands at a pause ---- */

static const char *help_text =
    "Every rank carries out each command; positions and answers are grouped by rank.\n"
    "  n(ext)               the next line in this frame (calls run through)\n"
    "  s(tep)               into calls too (not into the library, lua/lab/*.lua)\n"
    "  s!                   into calls, library code included\n"
    "  finish               until this frame returns (each rank: its own frame)\n"
    "  until [N]            until a line past this one (or line N) in this frame, or its return\n"
    "  c(ontinue)           until a breakpoint;  q(uit) stops the script\n"
    "  b [file:]line [cond] a breakpoint (cond sees the frame's locals);  b lists them\n"
    "  tbreak [file:]line   a breakpoint deleted when first hit;  delete [n] (all without n)\n"
    "  up [n], down [n]     select an older / newer frame for p, locals, l, b LINE, n, finish\n"
    "  p expr[, expr]       values in the selected frame;  locals its locals;  bt the stack (> marks it)\n"
    "  l [N]                source around the frame's line (or line N)\n"
    "  display [expr]       show expr at every stop (no expr: show them now);  undisplay [n]\n"
    "  pp expr              values as the REPL prints them (tables by their contents)\n"
    "  interact             every line is Lua until Ctrl-D\n"
    "Any other line is Lua in the selected frame (x = 1 sets the local x); !line forces Lua\n"
    "(!n = 2 sets n; a command word followed by = . [ , or : is Lua too: u = u * 0).\n";

static int is_cmd(const char *cmd, const char *a, const char *b) {
  size_t la = strlen(a), lb = b ? strlen(b) : 0;
  return (strncmp(cmd, a, la) == 0 && (cmd[la] == 0 || cmd[la] == ' ')) ||
         (b && strncmp(cmd, b, lb) == 0 && (cmd[lb] == 0 || cmd[lb] == ' '));
}

static const char *arg_of(const char *cmd) {
  const char *a = strchr(cmd, ' ');
  if (!a) return "";
  while (*a == ' ') a++;
  return a;
}

/* up/down: every rank moves its selected frame and shows where it is now */
static void move_frame(lua_State *L, int by) {
  int want = st.frame + by;
  const char *note = "";
  if (want < 0) {
    want = 0;
    note = "(newest frame) ";
  }
  while (want > 0 && !frame_exists(L, st.base + want)) {
    want--;
    note = "(oldest frame) ";
  }
  st.frame = want;
  char pos[1024], text[1200];
  frame_position(L, st.base + st.frame, st.frame == 0 ? st.where : NULL, pos, sizeof pos);
  snprintf(text, sizeof text, "%sframe %d: %s\n", note, st.frame, pos);
  show_from_all(text);
}

static const void *function_at(lua_State *L, int level) {
  lua_Debug ar;
  if (!lua_getstack(L, level, &ar) || !lua_getinfo(L, "f", &ar)) return NULL;
  const void *fn = lua_topointer(L, -1);
  lua_pop(L, 1);
  return fn;
}

/* Carries out one command on this rank; returns 1 when it resumes the script. */
static int run_command(lua_State *L, const char *cmd) {
  int level = st.base + st.frame;
  int depth = stack_depth(L) - 1 - level; /* the selected frame's depth as the line hook counts it */
  int user_frame = !frame_in_library(L, level);
  char *lua_answer = NULL; /* pdb's rule: `!`, interact, pp, a command word used as a name (stepper_exec.c) */
  int as_lua = exec_command(L, cmd, level, &lua_answer);
  if (as_lua) {
    if (as_lua == EXEC_SHOW) show_from_all(lua_answer);
    else say("%s", lua_answer);
    free(lua_answer);
    return 0;
  }
  if (is_cmd(cmd, "n", "next") || cmd[0] == 0) {
    st.mode = MODE_OVER;
    st.target_depth = depth;
    st.skip_lib = user_frame;
  } else if (is_cmd(cmd, "s", "step") || strcmp(cmd, "s!") == 0) {
    st.mode = MODE_INTO;
    st.skip_lib = cmd[1] != '!';
  } else if (is_cmd(cmd, "finish", NULL)) {
    st.mode = MODE_FINISH;
    st.target_depth = depth;
    st.skip_lib = user_frame;
  } else if (is_cmd(cmd, "until", "unt")) {
    lua_Debug ar;
    int line = lua_getstack(L, level, &ar) && lua_getinfo(L, "l", &ar) ? ar.currentline : 0;
    int n = atoi(arg_of(cmd));
    st.mode = MODE_UNTIL;
    st.target_depth = depth;
    st.until_line = n > 0 ? n - 1 : line; /* until N: the first line at or past N */
    st.until_fn = function_at(L, level);
    st.skip_lib = user_frame;
  } else if (is_cmd(cmd, "c", "continue")) {
    st.mode = MODE_CONTINUE;
  } else if (is_cmd(cmd, "q", "quit")) {
    st.mode = MODE_QUIT;
  } else {
    char here[256] = ""; /* the selected frame's file, for b LINE */
    lua_Debug ar;
    if (lua_getstack(L, level, &ar) && lua_getinfo(L, "S", &ar)) snprintf(here, sizeof here, "%s", ar.short_src);
    if (strcmp(cmd, "b") == 0 || strcmp(cmd, "break") == 0) list_breakpoints();
    else if (is_cmd(cmd, "b", "break")) add_breakpoint(arg_of(cmd), here, 0);
    else if (is_cmd(cmd, "tbreak", NULL)) add_breakpoint(arg_of(cmd), here, 1);
    else if (is_cmd(cmd, "delete", NULL)) delete_breakpoints(arg_of(cmd));
    else if (is_cmd(cmd, "up", "u")) move_frame(L, atoi(arg_of(cmd)) > 0 ? atoi(arg_of(cmd)) : 1);
    else if (is_cmd(cmd, "down", "d")) move_frame(L, -(atoi(arg_of(cmd)) > 0 ? atoi(arg_of(cmd)) : 1));
    else if (is_cmd(cmd, "display", NULL)) add_display(L, arg_of(cmd));
    else if (is_cmd(cmd, "undisplay", NULL)) undisplay(arg_of(cmd));
    else if (is_cmd(cmd, "h", "help")) say("%s", help_text);
    else {
      /* bt shows the whole stack, from the paused frame; the rest answer in the selected one */
      int bt = strcmp(cmd, "bt") == 0 || strcmp(cmd, "w") == 0 || strcmp(cmd, "where") == 0;
      char *a = bt ? frame_backtrace(L, st.base, st.frame, st.where) : frame_answer(L, cmd, level);
      if (!a) a = frame_exec_line(L, level, cmd); /* any other line is Lua, as in pdb */
      show_from_all(a);
      free(a);
    }
    return 0;
  }
  return 1;
}

static void line_hook(lua_State *L, lua_Debug *ar);
static void resume_breaks(void);
static int resumed = 1;

/* Every rank: one pause at the Lua frame `base` (0 in the line hook, 1 inside a collective's
 * wait, the failing frame in a post-mortem); `where` describes a rank paused inside a wait or
 * at an error. A quit raises "stepper: quit" only when `raise_on_quit` (not from a wait, nor
 * from an error already being raised). */
static void pause_at(lua_State *L, int base, const char *where, int raise_on_quit);
static void pause_protocol(lua_State *L, const char *where) { pause_at(L, where ? 1 : 0, where, !where); }

static void pause_at(lua_State *L, int base, const char *where, int raise_on_quit) {
  /* a plain script where only other ranks called lab.breakpoint(): rank 0 takes the terminal */
  if (lab_ctl_rank() == 0 && !st.read_line) repl_attach_terminal(L);
  lab_board_raise_pause();
  __atomic_store_n(&resumed, 0, __ATOMIC_SEQ_CST); /* Ctrl-C waits for the exchange (stepper_request_break) */
  if (st.own_capture && st.capturing) { /* what the script printed since the last pause */
    int64_t len = 0;
    char *text = capture_end(&st.cap, &len);
    st.capturing = 0;
    show_from_all(text);
    free(text);
  } else {
    show_from_all(NULL);
  }
  st.base = base;
  st.frame = 0;
  st.where = where;
  char pos[1024];
  frame_position(L, st.base, where, pos, sizeof pos - 1);
  strcat(pos, "\n");
  lab_board_set(LAB_PAUSED, "", "");
  show_from_all(pos);
  if (st.ndisplays) show_displays(L, 0);
  for (;;) {
    char *cmd = NULL;
    int64_t len = 0;
    if (lab_ctl_rank() == 0) {
      char *line = st.read_line ? st.read_line(exec_prompt()) : NULL;
      cmd = line ? line : strdup(exec_eof_line()); /* Ctrl-D: quit, or leave interact */
      len = (int64_t)strlen(cmd);
    }
    lab_ctl_bcast(&cmd, &len);
    int resume = run_command(L, cmd);
    free(cmd);
    if (resume) break;
  }
  st.where = NULL;
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
    lua_sethook(L, line_hook, LUA_MASKLINE, 0);
  }
}

/* evaluates cond in the frame at level (its locals and upvalues, globals behind them) */
static int condition_holds(lua_State *L, int level, const char *cond) {
  int ok = 0;
  char *v = frame_eval(L, level, cond, NULL, &ok); /* the same evaluation as p */
  int holds = !v || (ok && strncmp(v, "nil", 3) != 0 && strncmp(v, "false", 5) != 0);
  free(v);
  return holds;
}

static int breakpoint_hit(lua_State *L, lua_Debug *ar) {
  for (breakpoint **p = &st.bps; *p; p = &(*p)->next) {
    breakpoint *b = *p;
    if (b->line != ar->currentline) continue;
    size_t fl = strlen(b->file), sl = strlen(ar->short_src);
    if (sl < fl || strcmp(ar->short_src + sl - fl, b->file) != 0) continue;
    if (b->cond[0] && !condition_holds(L, 0, b->cond)) continue;
    if (b->temporary) {
      *p = b->next;
      free(b);
    }
    return 1;
  }
  return 0;
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

static void line_hook(lua_State *L, lua_Debug *ar) {
  if (ar->event == LUA_HOOKCOUNT) {
    lua_sethook(L, line_hook, LUA_MASKLINE, 0);
    if (!stop_after_call) return;
    stop_after_call = 0;
  } else if (ar->event != LUA_HOOKLINE) {
    return;
  }
  session_check_interrupt(L);
  if (!lua_getinfo(L, "Sl", ar) || ar->currentline <= 0) return;
  int in_library = strstr(ar->source, "/lua/lab/") != NULL;
  int skip = in_library && st.skip_lib; /* pdb skips its own frames; we skip the library's */
  int depth = stack_depth(L) - 1, pause = 0;
  switch (st.mode) {
  case MODE_INTO: pause = !skip; break;
  case MODE_OVER: pause = !skip && depth <= st.target_depth; break;
  case MODE_FINISH: pause = !skip && depth < st.target_depth; break;
  case MODE_UNTIL:
    pause = !skip && (depth < st.target_depth ||
                      (depth == st.target_depth && ar->currentline > st.until_line && function_at(L, 0) == st.until_fn));
    break;
  case MODE_CONTINUE: pause = breakpoint_hit(L, ar); break;
  default: break;
  }
  /* another rank stopped: this one stops too once the grace is over, in the user's code (in the
   * library only after the long grace, so that a rank inside a long library call still joins) */
  if (!pause) pause = pull_in_due(st.mode == MODE_CONTINUE && !in_library ? PAUSE_GRACE_S : STEP_GRACE_S);
  if (pause) pause_protocol(L, NULL);
}

static void answer_pauses_when_done(void) {
  if (lab_board_pause_pending() && st.mode != MODE_QUIT) pause_protocol(st.L, "(finished the script)");
}

/* a rank waiting in a collective joins the pause; after q it stops waiting */
static int wait_handler(const char *where) {
  if (!st.L) return 0;
  pause_protocol(st.L, where);
  return st.mode == MODE_QUIT;
}

void stepper_arm(lua_State *L) {
  st.L = L;
  st.mode = MODE_CONTINUE;
  st.pending_since = 0;
  lab_board_set_pause_handler(wait_handler);
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

void stepper_answer_pauses(void) {
  if (st.L && lab_board_pause_pending() && st.mode != MODE_QUIT) pause_protocol(st.L, "(finished the chunk)");
}

void stepper_arm_batch(lua_State *L) {
  lab_dist_set_guarded(1);
  if (lab_ctl_rank() != 0) stepper_set_terminal(NULL, stdout);
  stepper_arm(L);
}

static void answer_pauses_when_done_batch(void) {
  if (st.L && lab_board_pause_pending() && st.mode != MODE_QUIT) pause_protocol(st.L, "(finished the script)");
}

int stepper_batch_done(double timeout_s) {
  int late = lab_ctl_wait_all_done_within(answer_pauses_when_done_batch, timeout_s);
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
    lab_board_set_pause_handler(wait_handler);
    lab_dist_set_guarded(1);
    lua_sethook(L, line_hook, LUA_MASKLINE, 0);
  }
  st.mode = MODE_INTO; /* stop at the next line of the caller */
  st.skip_lib = 1;
  lua_Debug caller;
  if (lua_getstack(L, 1, &caller) && lua_getinfo(L, "S", &caller) && strcmp(caller.source, "=stdin") == 0) {
    stop_after_call = 1; /* typed at the prompt: right after this call, on its line */
    lua_sethook(L, line_hook, LUA_MASKLINE | LUA_MASKCOUNT, 1);
  }
  return 0;
}

void stepper_register(lua_State *L) {
  lua_getglobal(L, "lab");
  lua_pushcfunction(L, l_breakpoint);
  lua_setfield(L, -2, "breakpoint");
  lua_pop(L, 1);
}

/* splits `file a "b c"` into arg (quotes as a shell's, shell/words.c) and returns the file */
static char *set_args(lua_State *L, const char *cmdline) {
  const char *p = cmdline;
  char *file = next_word(&p), *word;
  lua_newtable(L);
  if (file) {
    lua_pushstring(L, file);
    lua_rawseti(L, -2, 0);
  }
  for (int i = 1; file && (word = next_word(&p)); i++) {
    lua_pushstring(L, word);
    lua_rawseti(L, -2, i);
    free(word);
  }
  lua_setglobal(L, "arg");
  return file;
}

/* The message handler of a stepped script: a rank whose code raises an error stops there
 * (post-mortem, as pdb's), with the stack intact, so p, locals, bt and up show how it got
 * there; every other rank joins the pause (from its wait, its next line, or its end). Any
 * resuming command lets the error go on; then the ranks waiting for this one give up at once. */
static int post_mortem_handler(lua_State *L) {
  const char *msg = lua_tostring(L, 1);
  if (!msg) {
    if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) msg = lua_tostring(L, -1);
    else msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
  }
  /* not for an error that follows from another rank's (a wait given up for it: fail fast) */
  if (st.active && st.mode != MODE_QUIT && !lab_board_gave_up_for_member() && !strstr(msg, "stepper: quit") &&
      !strstr(msg, "interrupted!")) {
    int level = 1; /* the first Lua frame above this handler and error() */
    lua_Debug ar;
    while (lua_getstack(L, level, &ar) && lua_getinfo(L, "S", &ar) && strcmp(ar.what, "C") == 0) level++;
    char where[512];
    snprintf(where, sizeof where, "post-mortem: %s", msg);
    lua_sethook(L, NULL, 0, 0);
    st.mode = MODE_INTO;
    pause_at(L, level, where, 0);
    st.active = 0; /* whatever was typed, the error goes on: no more stops on this rank */
    lua_sethook(L, NULL, 0, 0);
  }
  luaL_traceback(L, L, msg, 1);
  return 1;
}

static int run_stepped_file(lua_State *L, const char *path, char **err) {
  int status = luaL_loadfile(L, path);
  if (status == LUA_OK) {
    lua_pushcfunction(L, post_mortem_handler);
    lua_insert(L, -2);
    status = lua_pcall(L, 0, 0, -2);
    if (status == LUA_OK) lua_pop(L, 1);
  }
  if (status != LUA_OK) {
    const char *m = lua_tostring(L, -1);
    *err = strdup(m ? m : "(no message)");
    lua_pop(L, status == LUA_ERRSYNTAX || status == LUA_ERRFILE ? 1 : 2);
    return -1;
  }
  return 0;
}

int stepper_run_script(lua_State *L, const char *cmdline, int stepping, char **err) {
  char *file = set_args(L, cmdline);
  if (!file) {
    *err = strdup("give a script: :run file.lua [args]");
    return -1;
  }
  if (stepping) {
    st.active = 1;
    st.L = L;
    st.mode = MODE_INTO;
    st.skip_lib = 1;
    lab_board_set_pause_handler(wait_handler);
    lua_sethook(L, line_hook, LUA_MASKLINE, 0);
    st.own_capture = 1;
    st.capturing = capture_begin(&st.cap) == 0;
  }
  int rc = stepping ? run_stepped_file(L, file, err) : session_run_file(L, file, err);
  if (stepping) {
    lua_sethook(L, NULL, 0, 0);
    lab_board_set(LAB_IDLE, "", ""); /* done: the board says so, and waits for it end at once */
    lab_board_end_chunk(rc < 0);
    /* a rank that is done still answers pauses of the others until all are done */
    lab_ctl_wait_all_done(answer_pauses_when_done);
    if (st.capturing) { /* shown grouped by stepper_session */
      int64_t len;
      free(st.tail);
      st.tail = capture_end(&st.cap, &len);
      st.capturing = 0;
    }
    st.active = 0;
    st.own_capture = 0;
    lab_board_set_pause_handler(NULL);
  }
  free(file);
  return rc;
}

int stepper_session(lua_State *L, const char *cmdline, FILE *out) {
  st.out = out;
  session_reset_interrupt();
  reset_breakpoints();
  char *err = NULL;
  lab_dist_set_guarded(1);
  lab_board_begin_chunk();
  int rc = stepper_run_script(L, cmdline, 1, &err);
  show_from_all(st.tail);
  free(st.tail);
  st.tail = NULL;
  /* every rank's outcome */
  char line[2048];
  if (rc < 0) {
    char head[32];
    int hl = snprintf(head, sizeof head, "rank %d: ", lab_ctl_rank());
    const char *msg = strncmp(err, head, (size_t)hl) == 0 ? err + hl : err;
    const char *nl = strchr(msg, '\n');
    snprintf(line, sizeof line, "%s: %.*s\n", strstr(msg, "stepper: quit") ? "stopped" : "error",
             nl ? (int)(nl - msg) : (int)strlen(msg), msg);
  } else {
    snprintf(line, sizeof line, "finished\n");
  }
  /* a rank's own error first, then the waits given up because of it (fail fast) */
  int followed = rc < 0 && lab_board_gave_up_for_member();
  show_from_all(followed ? NULL : line);
  show_from_all(followed ? line : NULL);
  if (lab_ctl_rank() == 0) fflush(st.out);
  free(err);
  return rc;
}
