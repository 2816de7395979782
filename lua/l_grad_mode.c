/* Grad mode for Lua: lab.no_grad, lab.enable_grad (a function's scope or a <close> guard),
 * lab.set_grad_enabled, lab.is_grad_enabled. */
#include "lab_lua.h"
#include "runtime/lab.h"

static int guard_close(lua_State *L) {
  lua_getfield(L, 1, "previous");
  lab_set_grad_enabled(lua_toboolean(L, -1));
  return 0;
}

/* lab.no_grad(fn, ...) runs fn without recording; lab.no_grad() returns a guard to use as
 * `local g <close> = lab.no_grad()`. */
static int grad_mode_scope(lua_State *L, int enable) {
  int previous = lab_grad_enabled();
  if (lua_isfunction(L, 1)) {
    lab_set_grad_enabled(enable);
    int n = lua_gettop(L) - 1;
    int status = lua_pcall(L, n, LUA_MULTRET, 0);
    lab_set_grad_enabled(previous);
    if (status != LUA_OK) return lua_error(L);
    return lua_gettop(L);
  }
  lab_set_grad_enabled(enable);
  lua_createtable(L, 0, 1);
  lua_pushboolean(L, previous);
  lua_setfield(L, -2, "previous");
  lua_createtable(L, 0, 1);
  lua_pushcfunction(L, guard_close);
  lua_setfield(L, -2, "__close");
  lua_setmetatable(L, -2);
  return 1;
}

static int l_no_grad(lua_State *L) { return grad_mode_scope(L, 0); }
static int l_enable_grad(lua_State *L) { return grad_mode_scope(L, 1); }

void ll_register_grad_mode(lua_State *L) {
  static const luaL_Reg funcs[] = {{"no_grad", l_no_grad}, {"enable_grad", l_enable_grad}, {NULL, NULL}};
  static const ll_cbind mode[] = {{"set_grad_enabled", LL_CB_SET_BOOL, {.set_int = lab_set_grad_enabled}},
                                  {"is_grad_enabled", LL_CB_BOOL, {.get_int = lab_grad_enabled}},
                                  {NULL, 0, {NULL}}};
  luaL_setfuncs(L, funcs, 0);
  ll_set_cbinds(L, mode);
}
