/* lab.sim: what the SIMT interpreter (kernels/simt) recorded while the sim device ran
 * kernels/cuda, for lab 08 and lab.prof's kernel table, as runtime/sim_stats.h gives it.
 * lab.sim.available says whether this build has the interpreter (it needs the CUDA headers at
 * build time); without it the sim device runs the cpu kernels and each function raises an
 * error saying so.
 *   lab.sim.reset()            -- forget the kernels, hazards and perf counts so far
 *   lab.sim.perf(true)         -- count bank conflicts and global sectors (costs time)
 *   lab.sim.stats()            -- {{kernel=, launches=, blocks=, grid={x,y,z}, block={x,y,z},
 *                              --   shared_bytes=, barriers=, block_barriers_min=, ..._max=,
 *                              --   hazards=, seconds=, shared_wavefronts=, shared_ideal=,
 *                              --   sectors=, sectors_ideal=}, ...} one per kernel launched
 *   lab.sim.hazards()          -- hazards reported since start, and the last report's line
 *   lab.sim.perf_report()      -- the per-site counts as LLMLAB_SIMT_PERF=1 prints them */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>

#include "lab_lua.h"

static void push_dim(lua_State *L, const unsigned d[3]) {
  lua_createtable(L, 3, 0);
  for (int i = 0; i < 3; i++) {
    lua_pushinteger(L, d[i]);
    lua_rawseti(L, -2, i + 1);
  }
}

static void set_int(lua_State *L, const char *k, lua_Integer v) {
  lua_pushinteger(L, v);
  lua_setfield(L, -2, k);
}

static int l_stats(lua_State *L) {
  lua_newtable(L);
  lab_sim_kernel_stats s;
  for (int i = 0; lab_sim_kernel_stat(i, &s) == 0; i++) {
    lua_createtable(L, 0, 16);
    lua_pushstring(L, s.kernel);
    lua_setfield(L, -2, "kernel");
    set_int(L, "launches", s.launches);
    set_int(L, "blocks", s.blocks);
    push_dim(L, s.grid);
    lua_setfield(L, -2, "grid");
    push_dim(L, s.block);
    lua_setfield(L, -2, "block");
    set_int(L, "shared_bytes", (lua_Integer)s.shared_bytes);
    set_int(L, "barriers", s.barriers);
    set_int(L, "block_barriers_min", s.block_barriers_min);
    set_int(L, "block_barriers_max", s.block_barriers_max);
    set_int(L, "hazards", s.hazards);
    lua_pushnumber(L, s.seconds);
    lua_setfield(L, -2, "seconds");
    set_int(L, "shared_wavefronts", s.shared_wavefronts);
    set_int(L, "shared_ideal", s.shared_ideal);
    set_int(L, "sectors", s.sectors);
    set_int(L, "sectors_ideal", s.sectors_ideal);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

static int l_perf(lua_State *L) {
  if (!lua_isboolean(L, 1)) return ll_error(L, "lab.sim.perf: expected true or false, got %s", luaL_typename(L, 1));
  lab_sim_set_perf(lua_toboolean(L, 1));
  return 0;
}

static int l_hazards(lua_State *L) {
  lua_pushinteger(L, lab_sim_hazards());
  lua_pushstring(L, lab_sim_last_report());
  return 2;
}

static int l_perf_report(lua_State *L) {
  char *buf = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&buf, &n);
  if (!f) return ll_error(L, "lab.sim.perf_report: out of memory");
  lab_sim_perf_report(f);
  fclose(f);
  lua_pushlstring(L, buf ? buf : "", n);
  free(buf);
  return 1;
}

/* a build without the interpreter: each function says so instead of being nil */
static int l_unavailable(lua_State *L) {
  return ll_error(L, "lab.sim.%s: this llmlab was built without the SIMT interpreter (it needs the CUDA headers "
                       "at build time), so the sim device runs the cpu kernels and records nothing "
                       "(lab.sim.available is false; llmlab --version says which)",
                    lua_tostring(L, lua_upvalueindex(1)));
}

void ll_register_sim(lua_State *L) {
  lua_newtable(L);
  int available = lab_sim_stats_available();
  static const luaL_Reg fns[] = {{"stats", l_stats},     {"perf", l_perf},
                                 {"hazards", l_hazards}, {"perf_report", l_perf_report},
                                 {NULL, NULL}};
  static const ll_cbind reset[] = {{"reset", LL_CB_RUN, {.run = lab_sim_stats_reset}}, {NULL, 0, {NULL}}};
  if (available) {
    luaL_setfuncs(L, fns, 0);
    ll_set_cbinds(L, reset);
  } else { /* the same names, each saying why it has nothing */
    for (const luaL_Reg *f = fns; f->name; f++) {
      lua_pushstring(L, f->name);
      lua_pushcclosure(L, l_unavailable, 1);
      lua_setfield(L, -2, f->name);
    }
    lua_pushstring(L, reset[0].name);
    lua_pushcclosure(L, l_unavailable, 1);
    lua_setfield(L, -2, reset[0].name);
  }
  lua_pushboolean(L, available);
  lua_setfield(L, -2, "available");
  lua_setfield(L, -2, "sim");
}
