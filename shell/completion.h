/* Tab completion at the REPL prompt from the live Lua state of rank 0: globals, and the
 * fields (and methods) of whatever a dotted prefix names, e.g. lab.dist.<TAB>. */
#ifndef LAB_SHELL_COMPLETION_H
#define LAB_SHELL_COMPLETION_H

#include <lua.h>

void completion_install(lua_State *L);
/* The candidates for `text` (for tests): a NULL-terminated malloc'ed array. */
char **completion_candidates(lua_State *L, const char *text);

#endif
