/* Rank 0's terminal, told to every rank's Lua before each REPL chunk: a chunk's stdout is
 * captured (never a terminal), and the rank that draws a chart (lab.plot) may not be rank 0
 * (%on 1,3), so charts learn their width and colour from lab.terminal = {columns=, colour=}
 * (columns absent when rank 0 shows no terminal). Read by lua/lab/plot_term.lua. */
#ifndef LAB_SHELL_TERM_INFO_H
#define LAB_SHELL_TERM_INFO_H

#include <lua.h>

#include "terminal.h"

/* Every rank calls it together; t is rank 0's terminal (ignored on the other ranks). */
void term_info_share(lua_State *L, const terminal *t);

#endif
