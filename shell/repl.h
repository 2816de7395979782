/* The cross-rank REPL: rank 0 reads complete chunks and broadcasts them; every rank runs
 * each chunk with its stdout captured; rank 0 gathers and shows the grouped output. */
#ifndef LAB_SHELL_REPL_H
#define LAB_SHELL_REPL_H

#include <lua.h>

/* Runs until :quit or end of input on rank 0; every rank must call it. */
void repl_run(lua_State *L);

/* `llmlab --step file args`: the stepper as the whole session */
void repl_step_main(lua_State *L, const char *cmdline);
/* lab.breakpoint() in a plain script: rank 0 opens its terminal for the stepper */
void repl_attach_terminal(lua_State *L);

#endif
