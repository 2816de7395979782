/* Tab completion at the REPL prompt from the live Lua state of rank 0: globals, and the
 * fields (and methods) of whatever a dotted prefix names, e.g. lab.dist.<TAB>; at the stepper's
 * prompt the selected frame's locals and upvalues too. */
#ifndef LAB_SHELL_COMPLETION_H
#define LAB_SHELL_COMPLETION_H

#include <lua.h>

void completion_install(lua_State *L);
/* At the stepper's prompt: names complete from the frame at this stack level (its locals,
 * upvalues and their fields: cfg.<TAB>) before the globals; -1 goes back to the globals. */
void completion_set_frame(int level);
/* The candidates for `text` (for tests): a NULL-terminated malloc'ed array. */
char **completion_candidates(lua_State *L, const char *text);

#endif
