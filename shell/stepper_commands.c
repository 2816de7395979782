/* What each command at a stepper's pause does on every rank: n s finish until c q set how the
 * script resumes; b tbreak delete, up down, display undisplay, p locals l bt and Lua lines
 * answer in place (see stepper_state.h). */
#define _GNU_SOURCE
#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stepper_exec.h"
#include "stepper_frames.h"
#include "stepper_state.h"

/* ---- displays: expressions every rank shows at every stop ---- */

#define MAX_DISPLAYS 32

static struct {
  int id;
  char expr[256];
} displays[MAX_DISPLAYS];
static int ndisplays, next_display;

/* every rank's values of display `only` (0: all) in the selected frame, each display grouped
 * by itself ([0-3] 1: step = 4, then [0] 2: loss = ... per rank where they differ) */
static void show_displays(lua_State *L, int only) {
  for (int i = 0; i < ndisplays; i++) {
    if (only && displays[i].id != only) continue;
    char *mine = NULL;
    if (frame_exists(L, st.base + st.frame)) { /* a rank that is done has nothing to show */
      char *v = frame_eval(L, st.base + st.frame, displays[i].expr, "display", NULL);
      if (asprintf(&mine, "%d: %s = %s\n", displays[i].id, displays[i].expr, v ? v : "?") < 0) mine = NULL;
      free(v);
    }
    stepper_show_all(mine);
    free(mine);
  }
}

static void add_display(lua_State *L, const char *expr) {
  while (*expr == ' ') expr++;
  if (!expr[0]) { /* display: show them all now */
    if (ndisplays == 0) stepper_say("no displays\n");
    else show_displays(L, 0);
    return;
  }
  if (ndisplays == MAX_DISPLAYS) {
    stepper_say("display: already %d expressions; undisplay one first\n", MAX_DISPLAYS);
    return;
  }
  int i = ndisplays++;
  displays[i].id = ++next_display;
  snprintf(displays[i].expr, sizeof displays[i].expr, "%s", expr);
  show_displays(L, displays[i].id);
}

static void undisplay(const char *arg) {
  int id = atoi(arg), gone = 0, kept = 0;
  for (int i = 0; i < ndisplays; i++) {
    if (id == 0 || displays[i].id == id) gone++;
    else displays[kept++] = displays[i];
  }
  ndisplays = kept;
  if (id == 0) stepper_say("deleted %d display%s\n", gone, gone == 1 ? "" : "s");
  else if (gone) stepper_say("deleted display %d\n", id);
  else stepper_say("no display %d\n", id);
}

void stepper_show_displays(lua_State *L) {
  if (ndisplays) show_displays(L, 0);
}

void stepper_reset_displays(void) { ndisplays = next_display = 0; }

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
    "(!n = 2 sets n; a command word followed by = . [ , or : is Lua too: u = u * 0).\n"
    "Tab completes the selected frame's locals, upvalues and their fields (cfg.<TAB>), then globals.\n";

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
  stepper_show_all(text);
}

/* Carries out one command on this rank; returns 1 when it resumes the script. */
int stepper_command(lua_State *L, const char *cmd) {
  int level = st.base + st.frame;
  int depth = stepper_stack_depth(L) - 1 - level; /* the selected frame's depth as the line hook counts it */
  int user_frame = !frame_in_library(L, level);
  char *lua_answer = NULL; /* pdb's rule: `!`, interact, pp, a command word used as a name (stepper_exec.c) */
  int as_lua = exec_command(L, cmd, level, &lua_answer);
  if (as_lua) {
    if (as_lua == EXEC_SHOW) stepper_show_all(lua_answer);
    else stepper_say("%s", lua_answer);
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
    st.until_fn = frame_function(L, level);
    st.skip_lib = user_frame;
  } else if (is_cmd(cmd, "c", "continue")) {
    st.mode = MODE_CONTINUE;
  } else if (is_cmd(cmd, "q", "quit")) {
    st.mode = MODE_QUIT;
  } else {
    char here[256] = ""; /* the selected frame's file, for b LINE */
    lua_Debug ar;
    if (lua_getstack(L, level, &ar) && lua_getinfo(L, "S", &ar)) snprintf(here, sizeof here, "%s", ar.short_src);
    if (strcmp(cmd, "b") == 0 || strcmp(cmd, "break") == 0) breaks_list();
    else if (is_cmd(cmd, "b", "break")) breaks_add(arg_of(cmd), here, 0);
    else if (is_cmd(cmd, "tbreak", NULL)) breaks_add(arg_of(cmd), here, 1);
    else if (is_cmd(cmd, "delete", NULL)) breaks_delete(arg_of(cmd));
    else if (is_cmd(cmd, "up", "u")) move_frame(L, atoi(arg_of(cmd)) > 0 ? atoi(arg_of(cmd)) : 1);
    else if (is_cmd(cmd, "down", "d")) move_frame(L, -(atoi(arg_of(cmd)) > 0 ? atoi(arg_of(cmd)) : 1));
    else if (is_cmd(cmd, "display", NULL)) add_display(L, arg_of(cmd));
    else if (is_cmd(cmd, "undisplay", NULL)) undisplay(arg_of(cmd));
    else if (is_cmd(cmd, "h", "help")) stepper_say("%s", help_text);
    else {
      /* bt shows the whole stack, from the paused frame; the rest answer in the selected one */
      int bt = strcmp(cmd, "bt") == 0 || strcmp(cmd, "w") == 0 || strcmp(cmd, "where") == 0;
      char *a = bt ? frame_backtrace(L, st.base, st.frame, st.where) : frame_answer(L, cmd, level);
      if (!a) a = frame_exec_line(L, level, cmd); /* any other line is Lua, as in pdb */
      stepper_show_all(a);
      free(a);
    }
    return 0;
  }
  return 1;
}
