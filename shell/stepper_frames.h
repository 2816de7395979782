/* What a rank paused in the stepper tells about one frame of its stack: where it is, and the
 * answers to p, locals, l and bt. A frame is a stack level as lua_getstack counts it (the
 * stepper moves it with up/down); expressions see that frame's locals and upvalues, with the
 * globals behind them, as pdb evaluates in the selected frame. */
#ifndef LAB_SHELL_STEPPER_FRAMES_H
#define LAB_SHELL_STEPPER_FRAMES_H

#include <lua.h>
#include <stddef.h>

/* 1 if the stack has this level */
int frame_exists(lua_State *L, int level);

/* "file:line in fn  source text" of the frame (with "   <- where" when where is given), or
 * where alone when there is no such frame */
void frame_position(lua_State *L, int level, const char *where, char *buf, size_t size);

/* the function running at the level (to tell two calls at one depth apart), or NULL */
const void *frame_function(lua_State *L, int level);

/* 1 if the frame runs code of the library (lua/lab/ files), which s and n step over */
int frame_in_library(lua_State *L, int level);

/* Pushes the names the frame sees: a table of its upvalues and locals (a later local of a name
 * shadows an earlier one) whose misses go to the globals; returns its stack index. A level
 * that does not exist gives the globals alone. p, display and Tab at (step) read it. */
int frame_push_scope(lua_State *L, int level);

/* The values of expr in the frame, tab-separated as print shows them, or "error: ..."
 * (malloc'ed, no newline); *ok is 0 when it raised. at_pause names the command ("p",
 * "display") when every rank is paused: collectives are then refused with an error naming
 * it; NULL (a breakpoint's condition, which a running rank evaluates) allows them. */
char *frame_eval(lua_State *L, int level, const char *expr, const char *at_pause, int *ok);

/* bt: the stack from level base (the paused frame, #0) down, one frame a line with the
 * `selected` one (up/down's frame number) marked '>' as pdb marks it; `where` follows frame 0
 * (malloc'ed) */
char *frame_backtrace(lua_State *L, int base, int selected, const char *where);

/* The answer to locals, l [N] or p expr in the frame (malloc'ed, newline-terminated), or
 * NULL for another command. */
char *frame_answer(lua_State *L, const char *cmd, int level);

#endif
