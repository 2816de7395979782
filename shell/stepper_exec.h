/* pdb's other half at the stepper's prompt: any line that is not a stepper command runs as Lua
 * in the selected frame (its locals read and assigned), `!` forces Lua, `pp expr` pretty-prints,
 * `interact` reads only Lua until Ctrl-D. */
#ifndef LAB_SHELL_STEPPER_EXEC_H
#define LAB_SHELL_STEPPER_EXEC_H

#include <lua.h>

/* 1 when a line that starts with a command word is Lua by pdb's rule: `!stmt`, or the word is
 * followed by an assignment or an index (`u = u * 0`, `n.x = 1`, `s[1] = 2`, `c, d = 1, 2`). */
int exec_is_lua(const char *line);
/* Runs code (after a leading '!') in the frame at level: an expression's values, tab-separated,
 * or a statement's effect; assignments to the frame's locals and upvalues land in them; what
 * print writes is part of the answer. Returns the answer with a newline (malloc'ed). */
char *frame_exec(lua_State *L, int level, const char *code);
/* A line that is no command: Lua, as frame_exec, but a lone word that is nil is named as an
 * unknown command too (every rank answers, so the ranks' answers stay one exchange). */
char *frame_exec_line(lua_State *L, int level, const char *line);
/* pp expr: every value as the REPL shows it (tables by their contents) */
char *frame_pretty(lua_State *L, int level, const char *expr);

/* interact: until Ctrl-D every line is Lua. The prompt and what Ctrl-D sends follow the mode. */
int exec_interacting(void);
void exec_set_interacting(int on);
const char *exec_prompt(void);
/* the line rank 0 sends for Ctrl-D: "q" at (step), leave interact inside it */
const char *exec_eof_line(void);
#define EXEC_LEAVE_INTERACT "\x04leave-interact"

/* A line the stepper hands over first: in interact, `!...`, a command word used as a variable,
 * `pp expr`, `interact`. Returns 0 when it is none of these (a stepper command), EXEC_SHOW when
 * *answer is every rank's answer to show grouped, EXEC_SAY when rank 0 alone prints it. */
enum { EXEC_SHOW = 1, EXEC_SAY = 2 };
int exec_command(lua_State *L, const char *cmd, int level, char **answer);

#endif
