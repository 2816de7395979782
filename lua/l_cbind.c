/* Bindings that only call one C function: a getter of no arguments whose result is pushed, a
 * setter of argument 1, an action of none. The binding files list them as a table of
 * (name, kind, function) instead of writing a four-line wrapper for each; one dispatcher
 * reads the entry it was registered with (its upvalue) and calls the function. */
#include "lab_lua.h"

static int cbind_call(lua_State *L) {
  const ll_cbind *b = lua_touserdata(L, lua_upvalueindex(1));
  switch (b->kind) {
  case LL_CB_INT: lua_pushinteger(L, b->fn.get_int()); return 1;
  case LL_CB_LONG: lua_pushinteger(L, b->fn.get_long()); return 1;
  case LL_CB_BOOL: lua_pushboolean(L, b->fn.get_int()); return 1;
  case LL_CB_NUMBER: lua_pushnumber(L, b->fn.get_number()); return 1;
  case LL_CB_STRING: lua_pushstring(L, b->fn.get_string()); return 1;
  case LL_CB_SET_BOOL: b->fn.set_int(lua_toboolean(L, 1)); return 0;
  case LL_CB_SET_NUMBER: b->fn.set_number(luaL_checknumber(L, 1)); return 0;
  case LL_CB_RUN: b->fn.run(); return 0;
  }
  return 0;
}

void ll_set_cbinds(lua_State *L, const ll_cbind *list) {
  for (const ll_cbind *b = list; b->name; b++) {
    lua_pushlightuserdata(L, (void *)b);
    lua_pushcclosure(L, cbind_call, 1);
    lua_setfield(L, -2, b->name);
  }
}
