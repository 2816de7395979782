/* luaopen_lab: the `lab` module. C parts (tensors, creation, dist) are registered here;
 * the pure-Lua parts live in lua/lab/ and are found through package.path. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "lab.h"
#include "lab_lua.h"
#include "runtime/lab.h"


static int l_threads(lua_State *L) {
  lua_pushinteger(L, lab_get_num_threads());
  return 1;
}

static int l_set_threads(lua_State *L) {
  lab_set_num_threads(ll_check_int(L, 1, "set_threads", "threads"));
  return 0;
}

/* true for any tensor userdata, closed or sharded (ZeRO-3) too: a question, never an error */
static int l_is_tensor(lua_State *L) {
  lua_pushboolean(L, luaL_testudata(L, 1, LAB_TENSOR_MT) != NULL);
  return 1;
}

static int l_isatty(lua_State *L) {
  lua_pushboolean(L, isatty(ll_opt_int(L, 1, 1, "isatty", "fd")));
  return 1;
}

/* lab.tty_columns([fd]): the width of the terminal on fd (1 by default), or nil when fd is not
 * a terminal (lab.plot sizes its charts with it) */
static int l_tty_columns(lua_State *L) {
  struct winsize ws;
  int fd = ll_opt_int(L, 1, 1, "tty_columns", "fd");
  if (isatty(fd) && ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) lua_pushinteger(L, ws.ws_col);
  else lua_pushnil(L);
  return 1;
}

static int l_clock(lua_State *L) {
  lua_pushnumber(L, lab_now());
  return 1;
}

/* lab._kprof(on): the kernel profiler on or off (either resets its totals) */
static int l_kprof(lua_State *L) {
  lab_kprof_enable(lua_toboolean(L, 1));
  return 0;
}

/* lab._kprof_totals() -> {gemm = {calls=, wall=, cpu=}, attention = ..., ...} (seconds) */
static int l_kprof_totals(lua_State *L) {
  lua_newtable(L);
  for (int c = 0; c < LAB_KP_NCATS; c++) {
    lab_kp_total t = lab_kprof_total((lab_kp_category)c);
    lua_createtable(L, 0, 3);
    lua_pushinteger(L, t.calls);
    lua_setfield(L, -2, "calls");
    lua_pushnumber(L, t.wall);
    lua_setfield(L, -2, "wall");
    lua_pushnumber(L, t.cpu);
    lua_setfield(L, -2, "cpu");
    lua_setfield(L, -2, lab_kprof_category_name((lab_kp_category)c));
  }
  return 1;
}

/* Where the lua/lab modules live: $LLMLAB_LUA_DIR, else <exe dir>/../lua when present (a moved
 * build tree next to its sources), else the source directory CMake recorded. */
static void set_package_path(lua_State *L) {
  char dir[4096] = "";
  const char *env = getenv("LLMLAB_LUA_DIR");
  if (env && *env) {
    snprintf(dir, sizeof dir, "%s", env);
  } else {
    char exe[2048];
    if (lab_exe_dir(exe, sizeof exe) == 0) {
      char probe[4200];
      snprintf(probe, sizeof probe, "%s/../lua/lab/init.lua", exe);
      if (access(probe, R_OK) == 0) snprintf(dir, sizeof dir, "%s/../lua", exe);
    }
    if (!dir[0]) snprintf(dir, sizeof dir, "%s", LLMLAB_LUA_DIR);
  }
  lua_getglobal(L, "package");
  lua_getfield(L, -1, "path");
  lua_pushfstring(L, "%s/?.lua;%s/?/init.lua;%s", dir, dir, lua_tostring(L, -1));
  lua_setfield(L, -3, "path");
  lua_pop(L, 2);
}

int luaopen_lab(lua_State *L) {
  set_package_path(L);
  ll_register_tensor(L);
  lua_newtable(L);
  ll_register_creation(L);
  ll_register_dist(L);
  ll_register_mem(L);
  ll_register_tensor_grad(L);
  ll_register_grad_mode(L);
  ll_register_nn_ops(L);
  ll_register_autograd(L);
  ll_register_optim(L);
  ll_register_storage(L);
  ll_register_npy(L);
  ll_register_ckpt(L);
  ll_register_files(L);
  ll_register_debug(L);
  ll_register_device(L);
  ll_register_sim(L);
  static const luaL_Reg misc[] = {{"threads", l_threads},   {"set_threads", l_set_threads},
                                  {"is_tensor", l_is_tensor}, {"clock", l_clock},
                                  {"isatty", l_isatty},       {"_kprof", l_kprof},
                                  {"tty_columns", l_tty_columns},
                                  {"_kprof_totals", l_kprof_totals},
                                  {NULL, NULL}};
  luaL_setfuncs(L, misc, 0);
  lua_pushliteral(L, LLMLAB_VERSION);
  lua_setfield(L, -2, "version");
  for (int i = 0; i < LAB_NDTYPES; i++) { /* lab.f32 = "f32", ...: the names of kernels/dtype.h's list */
    lua_pushstring(L, lab_dtype_name((lab_dtype)i));
    lua_setfield(L, -2, lab_dtype_name((lab_dtype)i));
  }
  /* lab._tensor_methods: the tensors' method table, which init.lua's lab.Tensor reads (without
   * making a tensor to reach it) */
  luaL_getmetatable(L, LAB_TENSOR_MT);
  lua_getfield(L, -1, "methods");
  lua_setfield(L, -3, "_tensor_methods");
  lua_pop(L, 1);
  /* lua/lab/init.lua adds the pure-Lua helpers to this table */
  lua_pushvalue(L, -1);
  lua_setglobal(L, "lab");
  lua_getglobal(L, "require");
  lua_pushliteral(L, "lab.init");
  lua_call(L, 1, 0);
  return 1;
}
