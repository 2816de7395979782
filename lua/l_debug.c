/* Bindings for finding faults: lab._flip_bit, lab._nonfinite, lab._summary (runtime/bits.h;
 * lab.monitor's activation statistics and lab.fault's bit flips use them), anomaly mode
 * (lab.autograd._set_anomaly, used by lab.autograd.detect_anomaly) and the planted NaN of
 * lab.fault (lab._plant_nan). */
#define _POSIX_C_SOURCE 200809L /* nanosleep, strdup */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lab_lua.h"

/* lab._flip_bit(t, index, bit): element index (1-based, row-major), bit 0 = least significant */
static int l_flip_bit(lua_State *L) {
  lab_tensor *t = ll_check_tensor(L, 1);
  lua_Integer i = ll_check_integer(L, 2, "flip_bit", "index");
  int bit = ll_check_int(L, 3, "flip_bit", "bit");
  if (i < 1 || i > lab_numel(t))
    return ll_error(L, "flip_bit: element %lld is outside 1..%lld", (long long)i, (long long)lab_numel(t));
  ll_check_rc(L, lab_bits_flip(t, (int64_t)i - 1, bit));
  return 0;
}

/* lab._nonfinite(t) -> number of NaN, number of Inf */
static int l_nonfinite(lua_State *L) {
  int64_t nan, inf;
  ll_check_rc(L, lab_bits_nonfinite(ll_check_tensor(L, 1), &nan, &inf));
  lua_pushinteger(L, nan);
  lua_pushinteger(L, inf);
  return 2;
}

/* lab._summary(t) -> largest |x|, sum of squares (finite elements), NaN count, Inf count */
static int l_summary(lua_State *L) {
  lab_bits_stats st;
  ll_check_rc(L, lab_bits_summary(ll_check_tensor(L, 1), &st));
  lua_pushnumber(L, st.max_abs);
  lua_pushnumber(L, st.sum_sq);
  lua_pushinteger(L, st.nan);
  lua_pushinteger(L, st.inf);
  return 4;
}

/* ---- anomaly mode ----
 * The Lua function describing where a forward runs (module and traceback) is kept in the
 * registry and called on the main thread, the one scripts and the REPL run on. */
static lua_State *anomaly_L;
static int anomaly_ref = LUA_NOREF;

static char *where(void *ctx, const char *op) {
  (void)ctx;
  lua_State *L = anomaly_L;
  lua_rawgeti(L, LUA_REGISTRYINDEX, anomaly_ref);
  lua_pushstring(L, op);
  char *out = NULL;
  if (lua_pcall(L, 1, 1, 0) == LUA_OK && lua_isstring(L, -1)) out = strdup(lua_tostring(L, -1));
  lua_pop(L, 1);
  return out;
}

/* lab.autograd._set_anomaly(fn | nil): fn(op) -> a string saying where that op's forward runs */
static int l_set_anomaly(lua_State *L) {
  luaL_unref(L, LUA_REGISTRYINDEX, anomaly_ref);
  anomaly_ref = LUA_NOREF;
  if (lua_isnoneornil(L, 1)) {
    lab_set_anomaly(NULL);
    return 0;
  }
  luaL_checktype(L, 1, LUA_TFUNCTION);
  lua_pushvalue(L, 1);
  anomaly_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
  anomaly_L = lua_tothread(L, -1);
  lua_pop(L, 1);
  lab_anomaly_hooks h = {where, NULL};
  lab_set_anomaly(&h);
  return 0;
}

static int l_anomaly_enabled(lua_State *L) {
  lua_pushboolean(L, lab_anomaly_enabled());
  return 1;
}

/* ---- the planted NaN ----
 * When it fires, the Lua function given with it is called (lab.fault prints the line). */
static int plant_ref = LUA_NOREF;

static void plant_fired(void *ctx, const char *op, int backward) {
  lua_State *L = ctx;
  if (plant_ref == LUA_NOREF) return;
  lua_rawgeti(L, LUA_REGISTRYINDEX, plant_ref);
  lua_pushstring(L, op);
  lua_pushboolean(L, backward);
  if (lua_pcall(L, 2, 0, 0) != LUA_OK) lua_pop(L, 1);
}

/* lab._plant_nan(op, backward, fired) arms it; lab._plant_nan(nil) disarms */
static int l_plant_nan(lua_State *L) {
  luaL_unref(L, LUA_REGISTRYINDEX, plant_ref);
  plant_ref = LUA_NOREF;
  if (lua_isnoneornil(L, 1)) {
    lab_plant_nan(NULL, 0, NULL, NULL);
    return 0;
  }
  const char *op = luaL_checkstring(L, 1);
  int backward = lua_toboolean(L, 2);
  if (lua_isfunction(L, 3)) {
    lua_pushvalue(L, 3);
    plant_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  }
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
  lua_State *main = lua_tothread(L, -1);
  lua_pop(L, 1);
  ll_check_rc(L, lab_plant_nan(op, backward, plant_fired, main));
  return 0;
}

/* lab._sleep(seconds): the straggler's delay, without spinning a core */
static int l_sleep(lua_State *L) {
  double s = luaL_checknumber(L, 1);
  if (!(s >= 0 && s < 3600)) return ll_error(L, "_sleep: %g seconds is outside [0, 3600)", s);
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {}
  return 0;
}

void ll_register_debug(lua_State *L) {
  static const luaL_Reg fns[] = {{"_flip_bit", l_flip_bit},
                                 {"_nonfinite", l_nonfinite},
                                 {"_summary", l_summary},
                                 {"_plant_nan", l_plant_nan},
                                 {"_sleep", l_sleep},
                                 {NULL, NULL}};
  luaL_setfuncs(L, fns, 0);
  static const luaL_Reg anomaly[] = {
      {"_set_anomaly", l_set_anomaly}, {"_anomaly_enabled", l_anomaly_enabled}, {NULL, NULL}};
  lua_getfield(L, -1, "autograd");
  luaL_setfuncs(L, anomaly, 0);
  lua_pop(L, 1);
}
