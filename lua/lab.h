/* What the shell needs of the Lua bindings (the role lualib.h plays): the `lab` module's
 * opener. The bindings' own helpers are in lab_lua.h, which the shell does not include. */
#ifndef LAB_LUA_LAB_H
#define LAB_LUA_LAB_H

#include <lua.h>

/* Opens the `lab` module: the C parts (tensors, creation, autograd, dist, files) and the
 * package.path entry for the pure-Lua parts in lua/lab/. Pushes the module table. */
int luaopen_lab(lua_State *L);

#endif
