/* How the REPL prints values: print() with tables shown by their contents, compactly and
 * bounded ({2, 3}, {lr = 0.1, betas = {0.9, 0.999}}), keys sorted, so the same table prints the
 * same text on every rank and groups ([0-3] {2, 3}) instead of `table: 0x55d...` per rank. */
#ifndef LAB_SHELL_SHOW_H
#define LAB_SHELL_SHOW_H

#include <lua.h>

/* Pushes the compact text of the value at idx. */
void show_value(lua_State *L, int idx);
/* The same as an element of a table shows: strings quoted, a tensor by its first line. */
void show_value_short(lua_State *L, int idx);
/* lab._show(v): the text of v as the REPL prints it, for lab.print_on (lua/lab/init.lua) in
 * scripts and -e code too; lab must be a global already. */
void show_register(lua_State *L);
/* Replaces the global print with one that shows tables compactly (the REPL's sessions). */
void show_install_print(lua_State *L);

#endif
