/* One rank's Lua state and the ways code runs in it: chunks typed at the REPL (a bare
 * expression is tried as `return <expr>` first, as lua.c does), -e strings and scripts.
 * Errors come back as text; nothing here prints them. */
#ifndef LAB_SHELL_SESSION_H
#define LAB_SHELL_SESSION_H

#include <lua.h>
#include <stddef.h>

lua_State *session_new(void);
/* Sets the global `arg` as lua.c does: arg[0] the script, arg[1..] its arguments,
 * negative indices the interpreter and its options. */
void session_set_args(lua_State *L, char **argv, int argc, int script_index);

/* 1 when `code` is an incomplete chunk (the parser stopped at <eof>). */
int session_incomplete(lua_State *L, const char *code, size_t len);

/* Runs a chunk; with print_results, values it returns are printed with print. Returns 0
 * or -1 with *err set (malloc'ed message). */
int session_run_chunk(lua_State *L, const char *code, size_t len, const char *name,
                      int print_results, int traceback, char **err);
/* Runs a script file with the arguments already in `arg`; -1 with *err (with traceback). */
int session_run_file(lua_State *L, const char *path, char **err);

/* Makes the running chunk raise "rank N: interrupted!" at its next Lua instruction
 * (signal-safe). */
void session_interrupt(lua_State *L);

/* From the hooks that poll for Ctrl-C (the REPL's count hook, the stepper's line hook): the
 * first press raises "rank N: interrupted!" once, which a user's pcall may catch (as in
 * lua.c, so that its own clean-up can run); a second press raises it again at every line of
 * user code until the chunk ends, so a loop around pcall cannot go on deaf to Ctrl-C. Library
 * lines (lua/lab/) are left to run: their closers and clean-ups restore state. */
void session_check_interrupt(lua_State *L);
/* At the start of a chunk, on every rank (the board's count starts again from 0). */
void session_reset_interrupt(void);
/* 1 when this rank raised an interrupt since the reset (the chunk may have caught it) */
int session_interrupt_raised(void);

/* From a message handler: msg with "file:line: " of the user's code nearest the error (the
 * newest Lua frame at stack level `from` or older outside lua/lab/), after lab's "rank N: "
 * and in place of a library file's position, as lua.c's errors carry the caller's line. Pushes
 * the new message and returns it, or returns msg as it is (already there, no user frame, an
 * interrupt, or a wait given up because another rank stopped). */
const char *session_locate(lua_State *L, const char *msg, int from);

/* Raises "rank N: what" with no position, from a hook ("interrupted!", "stepper: quit"): a
 * user's pcall that catches it sees the rank, as in every other error; the REPL's report and
 * the stepper's outcome strip this rank's prefix and still recognise the rest. */
int session_stop(lua_State *L, const char *what);

#endif
