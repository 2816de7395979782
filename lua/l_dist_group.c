/* lab.dist's process groups (userdata made by new_group and split, with :rank(), :size(),
 * :ranks(), :destroy()) and the facts about the job: ranks, sizes, hosts, which backend a
 * tensor takes, traffic stats, timers, checked mode and the watchdog. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "l_dist.h"
#include "lab_lua.h"
#include "runtime/lab.h"

#define GROUP_MT "lab.dist.Group"

/* ---- groups ---- */

/* The userdata holds a reference (the world's is never dropped): collecting it or
 * g:destroy() releases it, and the group is freed once no pending work or graph node uses it. */
static void push_group(lua_State *L, lab_group *g) {
  lab_group **box = lua_newuserdatauv(L, sizeof *box, 0);
  *box = g;
  lab_dist_group_retain(g);
  luaL_setmetatable(L, GROUP_MT);
}

static int g_gc(lua_State *L) {
  lab_group **box = luaL_checkudata(L, 1, GROUP_MT);
  lab_group *g = *box;
  *box = NULL;
  lab_dist_group_release(g);
  return 0;
}

/* g:destroy() / lab.dist.destroy_process_group(g): as torch.distributed; using g afterwards
 * is an error ("the process group was destroyed"); the world cannot be destroyed */
static int g_destroy(lua_State *L) {
  lab_group **box = luaL_testudata(L, 1, GROUP_MT);
  if (!box) return ll_error(L, "destroy_process_group: expected a process group, got %s", luaL_typename(L, 1));
  if (*box && (*box)->id == 0) return ll_error(L, "destroy_process_group: the world group lives as long as the job");
  return g_gc(L);
}

lab_group *ll_check_group(lua_State *L, int idx) {
  lab_group **box = luaL_testudata(L, idx, GROUP_MT);
  if (!box) ll_error(L, "expected a process group, got %s", luaL_typename(L, idx));
  if (!*box) ll_error(L, "the process group was destroyed");
  return *box;
}

/* The group named in an options table (or the world). */
lab_group *ll_opt_group(lua_State *L, int opts) {
  if (!opts) return lab_dist_default();
  lua_getfield(L, opts, "group");
  lab_group *g = lua_isnil(L, -1) ? lab_dist_default() : ll_check_group(L, -1);
  lua_pop(L, 1);
  return g;
}

static int g_rank(lua_State *L) {
  lua_pushinteger(L, ll_check_group(L, 1)->rank);
  return 1;
}

static int g_size(lua_State *L) {
  lua_pushinteger(L, ll_check_group(L, 1)->size);
  return 1;
}

static int g_ranks(lua_State *L) {
  lab_group *g = ll_check_group(L, 1);
  lua_createtable(L, g->size, 0);
  for (int i = 0; i < g->size && g->world_ranks; i++) {
    lua_pushinteger(L, g->world_ranks[i]);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

static int g_tostring(lua_State *L) {
  lab_group *g = ll_check_group(L, 1);
  lua_pushfstring(L, "ProcessGroup(%s, size %d, this rank %d)", g->name, g->size, g->rank);
  return 1;
}

/* ---- groups ---- */

static int l_new_group(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  /* every rank of the world makes a group together (MPI_Comm_create): in a chunk run on some
   * ranks only (%on, :ranks) the others never would, and the call would hang (REPL fuzzer) */
  lab_group *d = lab_dist_default();
  if (d != lab_dist_world()) {
    char who[256] = "";
    for (int i = 0, len = 0; i < d->size && len < (int)sizeof who - 16; i++)
      len += snprintf(who + len, sizeof who - (size_t)len, "%s%d", i ? "," : "", d->world_ranks[i]);
    return ll_error(L, "new_group: every rank of the world makes a group together, but this chunk runs on ranks %s only "
                       "(%%on or :ranks): make the group in a chunk every rank runs", who);
  }
  int n = (int)lua_rawlen(L, 1);
  int *ranks = malloc(sizeof(int) * (size_t)(n ? n : 1));
  if (!ranks) return ll_error(L, "new_group: out of memory");
  for (int i = 0; i < n; i++) {
    char what[32];
    snprintf(what, sizeof what, "ranks[%d]", i + 1);
    lua_rawgeti(L, 1, i + 1);
    int isnum = 0;
    lua_Integer v = lua_type(L, -1) == LUA_TNUMBER ? lua_tointegerx(L, -1, &isnum) : 0;
    if (!isnum || v < INT_MIN || v > INT_MAX) {
      free(ranks); /* before raising: the error does not return */
      if (lua_type(L, -1) == LUA_TNUMBER && isnum) return ll_error(L, "new_group: %s %lld is not a rank", what, (long long)v);
      if (lua_type(L, -1) == LUA_TNUMBER) return ll_error(L, "new_group: %s must be an integer, got %.14g", what, lua_tonumber(L, -1));
      return ll_error(L, "new_group: %s must be an integer, got %s", what, luaL_typename(L, -1));
    }
    ranks[i] = (int)v;
    lua_pop(L, 1);
  }
  lab_group *g = lab_dist_new_group(lab_dist_world(), n, ranks);
  free(ranks);
  if (!g) return ll_runtime_error(L);
  push_group(L, g);
  lab_dist_group_release(g); /* the creator's reference: the userdata holds its own */
  return 1;
}

/* split(color[, key][, {group=parent}]): colour < 0 (or nil) leaves this rank out */
static int l_split(lua_State *L) {
  int opts = ll_options_index(L);
  int color = lua_isnil(L, 1) ? -1 : ll_check_int(L, 1, "split", "color");
  int key = lua_type(L, 2) == LUA_TNUMBER ? ll_check_int(L, 2, "split", "key") : lab_ctl_rank();
  lab_group *g = lab_dist_split(ll_opt_group(L, opts), color, key);
  if (!g) return ll_runtime_error(L);
  push_group(L, g);
  lab_dist_group_release(g); /* the creator's reference: the userdata holds its own */
  return 1;
}

/* ---- facts ---- */

static int l_rank(lua_State *L) {
  lua_pushinteger(L, lua_isnoneornil(L, 1) ? lab_ctl_rank() : ll_check_group(L, 1)->rank);
  return 1;
}

/* world([group]): the size of the group, by default the default group (the world, or the
 * targeted ranks inside a %on chunk) */
static int l_world(lua_State *L) {
  lua_pushinteger(L, lua_isnoneornil(L, 1) ? lab_dist_default()->size : ll_check_group(L, 1)->size);
  return 1;
}

static int l_world_group(lua_State *L) {
  push_group(L, lab_dist_world());
  return 1;
}

/* backend(t[, {group=}]) -> "mpi", "nccl (cuda:0)" or "mpi, staged through host memory: why":
 * which communicator a collective on t takes on the group. For a cuda tensor on a group that has
 * had no collective on cuda tensors yet, the first call is collective (the members exchange
 * their GPUs: lab_dist_backend). */
static int l_backend(lua_State *L) {
  lab_tensor *t = ll_check_tensor(L, 1);
  int opts = ll_options_index(L);
  char buf[320];
  lab_group *g = ll_opt_group(L, opts);
  const char *backend = lab_dist_backend(g, lab_device_of(t), buf, sizeof buf);
  if (!backend) return ll_runtime_error(L);
  lua_pushstring(L, backend);
  return 1;
}

/* set_nccl_env(name, value): sets an NCCL_* environment variable of this process; NCCL reads
 * NCCL_ALGO and NCCL_PROTO when a communicator is made (a group made afterwards), and most
 * others (NCCL_BUFFSIZE, channel counts) once per process */
static int l_set_nccl_env(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  if (strncmp(name, "NCCL_", 5) != 0)
    ll_error(L, "set_nccl_env: '%s' is not an NCCL_ variable", name);
  if (lua_isnil(L, 2)) unsetenv(name);
  else setenv(name, luaL_checkstring(L, 2), 1);
  return 0;
}

/* stats() -> {[group name] = {[op] = {calls=, bytes=, wire_bytes=}}}; only ops used */
static int l_stats(lua_State *L) {
  lua_newtable(L);
  for (int i = 0; i < lab_dist_group_count(); i++) {
    lab_group *g = lab_dist_group_at(i);
    if (!g) continue;
    int any = 0;
    for (int op = 0; op < LAB_NOPS; op++) any = any || g->stats[op].calls;
    if (!any) continue;
    lua_newtable(L);
    for (int op = 0; op < LAB_NOPS; op++) {
      const lab_coll_stats *s = &g->stats[op];
      if (!s->calls) continue;
      lua_createtable(L, 0, 3);
      lua_pushinteger(L, s->calls);
      lua_setfield(L, -2, "calls");
      lua_pushinteger(L, s->bytes);
      lua_setfield(L, -2, "bytes");
      lua_pushinteger(L, s->wire_bytes);
      lua_setfield(L, -2, "wire_bytes");
      lua_setfield(L, -2, lab_coll_name((lab_coll_op)op));
    }
    lua_setfield(L, -2, g->name);
  }
  return 1;
}

/* _agree_max(v[, {group=}]): the largest v over the group's ranks, through the control
 * channel checked mode uses (not user traffic: not counted in stats). For decisions every
 * rank must take together, like DDP's "did any rank miss a gradient". */
static int l_agree_max(lua_State *L) {
  lua_Integer v = luaL_checkinteger(L, 1);
  lab_group *g = ll_opt_group(L, lua_istable(L, 2) ? 2 : 0);
  if (g->rank < 0) return ll_error(L, "agree_max: this rank is not a member of %s", g->name);
  int64_t best = v;
  ll_check_rc(L, lab_dist_agree_max(g, v, &best));
  lua_pushinteger(L, best);
  return 1;
}

static const luaL_Reg group_funcs[] = {
    {"rank", l_rank},
    {"world", l_world},
    {"world_size", l_world},
    {"world_group", l_world_group},
    {"new_group", l_new_group},
    {"destroy_process_group", g_destroy},
    {"split", l_split},
    {"backend", l_backend},
    {"set_nccl_env", l_set_nccl_env},
    {"stats", l_stats},
    {"_agree_max", l_agree_max},
    {NULL, NULL}};

/* the ones that only read or set a value of the runtime */
static const ll_cbind group_values[] = {
    {"local_rank", LL_CB_INT, {.get_int = lab_ctl_local_rank}},
    {"local_world", LL_CB_INT, {.get_int = lab_ctl_local_size}},
    {"hostname", LL_CB_STRING, {.get_string = lab_ctl_host}},
    {"set_checked", LL_CB_SET_BOOL, {.set_int = lab_dist_set_checked}},
    {"checked", LL_CB_BOOL, {.get_int = lab_dist_checked}},
    {"reset_stats", LL_CB_RUN, {.run = lab_dist_reset_stats}},
    {"comm_time", LL_CB_NUMBER, {.get_number = lab_dist_comm_seconds}},
    {"comm_cpu_time", LL_CB_NUMBER, {.get_number = lab_dist_comm_cpu_seconds}},
    {"cpu_time", LL_CB_NUMBER, {.get_number = lab_cpu_seconds}},
    /* set_watchdog(seconds): a blocking collective that makes no progress for this long ends
     * with a report of what every rank is doing (0 turns it off; guarded mode only) */
    {"set_watchdog", LL_CB_SET_NUMBER, {.set_number = lab_dist_set_watchdog}},
    {"watchdog", LL_CB_NUMBER, {.get_number = lab_dist_watchdog}},
    {NULL, 0, {NULL}}};

void ll_dist_group_funcs(lua_State *L) {
  static const luaL_Reg group_meta[] = {{"__gc", g_gc}, {"__tostring", g_tostring}, {NULL, NULL}};
  static const luaL_Reg group_methods[] = {
      {"rank", g_rank}, {"size", g_size}, {"ranks", g_ranks}, {"destroy", g_destroy}, {NULL, NULL}};
  ll_new_class(L, GROUP_MT, group_meta, group_methods);
  luaL_setfuncs(L, group_funcs, 0);
  ll_set_cbinds(L, group_values);
}
