/* lab.mem: the measured memory account of this rank (tensor storage by tag), per device. */
#include <string.h>

#include "lab_lua.h"
#include "runtime/lab.h"

/* stats([device]) -> {current=, peak=, tags={param={current=, peak=}, ...}, cached=,
 * device=} in bytes, for the device named (default: the default device) */
static int l_stats(lua_State *L) {
  lab_device dev = lua_isnoneornil(L, 1) ? lab_default_device() : ll_check_device(L, 1, "mem.stats");
  const lab_mem_account *m = lab_mem_get_device(dev);
  lua_createtable(L, 0, 3);
  lua_pushinteger(L, m->current_total);
  lua_setfield(L, -2, "current");
  lua_pushinteger(L, m->peak_total);
  lua_setfield(L, -2, "peak");
  lua_createtable(L, 0, LAB_MEM_NTAGS);
  for (int i = 0; i < LAB_MEM_NTAGS; i++) {
    lua_createtable(L, 0, 2);
    lua_pushinteger(L, m->current[i]);
    lua_setfield(L, -2, "current");
    lua_pushinteger(L, m->peak[i]);
    lua_setfield(L, -2, "peak");
    lua_setfield(L, -2, lab_mem_tag_name((lab_mem_tag)i));
  }
  lua_setfield(L, -2, "tags");
  lua_pushinteger(L, (lua_Integer)lab_mem_cached_bytes_on(dev));
  lua_setfield(L, -2, "cached");
  char name[32];
  lua_pushstring(L, lab_device_str(dev, name, sizeof name));
  lua_setfield(L, -2, "device");
  return 1;
}

/* lab.mem.tag(t, 'param' | 'grad' | 'optimizer' | 'activation' | 'comm' | 'other') */
static int l_tag(lua_State *L) {
  lab_tensor *t = ll_check_tensor(L, 1);
  const char *name = luaL_checkstring(L, 2);
  for (int i = 0; i < LAB_MEM_NTAGS; i++)
    if (strcmp(name, lab_mem_tag_name((lab_mem_tag)i)) == 0) {
      lab_storage_set_tag(t->storage, (lab_mem_tag)i);
      lua_settop(L, 1);
      return 1;
    }
  return ll_error(L, "mem.tag: unknown tag '%s' (param, grad, optimizer, activation, comm, other)", name);
}

void ll_register_mem(lua_State *L) {
  static const luaL_Reg f[] = {{"stats", l_stats}, {"tag", l_tag}, {NULL, NULL}};
  static const ll_cbind actions[] = {{"reset_peak", LL_CB_RUN, {.run = lab_mem_reset_peak}},
                                     {"empty_cache", LL_CB_RUN, {.run = lab_mem_empty_cache}},
                                     {NULL, 0, {NULL}}};
  lua_newtable(L);
  luaL_setfuncs(L, f, 0);
  ll_set_cbinds(L, actions);
  lua_setfield(L, -2, "mem");
}
