/* NumPy's .npy files: lab.load_npy, Tensor:save_npy (runtime/npy.c). */
#include "lab_lua.h"
#include "runtime/lab.h"

/* lab.load_npy(path) -> tensor */
static int l_load_npy(lua_State *L) {
  ll_push_tensor(L, lab_npy_load(ll_check_path(L, 1, "load_npy")));
  return 1;
}

/* t:save_npy(path) */
static int m_save_npy(lua_State *L) {
  ll_check_rc(L, lab_npy_save(ll_check_tensor(L, 1), ll_check_path(L, 2, "save_npy")));
  return 0;
}

void ll_register_npy(lua_State *L) {
  static const luaL_Reg funcs[] = {{"load_npy", l_load_npy}, {NULL, NULL}};
  luaL_setfuncs(L, funcs, 0);
  static const luaL_Reg methods[] = {{"save_npy", m_save_npy}, {NULL, NULL}};
  ll_add_tensor_methods(L, methods);
}
