/* The stepper's state and the functions its files share: stepper.c (the pause every rank
 * takes part in, the line hook, arming, lab.breakpoint), stepper_commands.c (what each
 * command at a pause does, displays), stepper_breaks.c (breakpoints), stepper_script.c
 * (a stepped script and its post-mortem). Private to those files, as lstate.h is to Lua's. */
#ifndef LAB_SHELL_STEPPER_STATE_H
#define LAB_SHELL_STEPPER_STATE_H

#include <lua.h>
#include <stdio.h>

#include "capture.h"

/* how the script resumes after a pause: the command that ended it (n s finish until c q) */
enum { MODE_INTO, MODE_OVER, MODE_FINISH, MODE_UNTIL, MODE_CONTINUE, MODE_QUIT };

typedef struct {
  lua_State *L;
  int active;
  int mode, target_depth;
  int until_line;         /* until: stop past this line of the frame... */
  const void *until_fn;   /* ...when it is this function (the same depth may be another call) */
  int skip_lib;           /* n, s, finish, until step over lua/lab/ files (s! does not) */
  int base, frame;        /* the paused frame's stack level (1 inside a wait) and up's offset */
  const char *where;      /* where a rank without a Lua frame is (a wait, the end) */
  double pending_since;   /* when this rank first saw another's stop it has not joined yet */
  capture cap;
  int capturing;
  char *(*read_line)(const char *prompt);
  FILE *out;
  char *tail; /* output after the last pause */
  int own_capture; /* the stepper captures output itself (--step, :step), not the REPL */
} stepper_state;

extern stepper_state st;

/* rank 0 prints a line of its own (a confirmation, help) */
void stepper_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* every rank's text (NULL: none), grouped on rank 0 */
void stepper_show_all(const char *mine);
int stepper_stack_depth(lua_State *L);

/* Every rank: one pause at the Lua frame `base` (0 in the line hook, 1 inside a collective's
 * wait, the failing frame in a post-mortem); `where` describes a rank paused inside a wait or
 * at an error. A quit raises "stepper: quit" only when `raise_on_quit`. */
void stepper_pause_at(lua_State *L, int base, const char *where, int raise_on_quit);
void stepper_line_hook(lua_State *L, lua_Debug *ar);
/* a rank waiting in a collective joins the pause; 1 after q (it stops waiting) */
int stepper_wait_handler(const char *where);
/* a rank that is done (`what`: "(finished the script)") answers the others' pauses */
void stepper_answer_pauses_as(const char *what);
void stepper_answer_pauses_script(void); /* as "(finished the script)", for lab_ctl_wait_all_done */

/* stepper_commands.c: carries out one command on this rank; 1 when it resumes the script */
int stepper_command(lua_State *L, const char *cmd);
void stepper_show_displays(lua_State *L); /* every display, at a stop */
void stepper_reset_displays(void);

/* stepper_breaks.c: b [file:]line [cond], tbreak, delete [n], b alone lists them */
void breaks_add(const char *spec, const char *here, int temporary);
void breaks_list(void);
void breaks_delete(const char *arg);
void breaks_reset(void); /* a new :step session: none, numbers from 1 again */
/* 1 when a breakpoint is at this line (its condition holding in frame 0); a tbreak goes */
int breaks_hit(lua_State *L, lua_Debug *ar);

#endif
