/* lab.autograd.dist: the differentiable collectives (runtime/autograd/ops_dist.c), each
 * taking (x[, {group=, dim=}]). */
#include "lab_lua.h"
#include "runtime/lab.h"

static int dim_opt(lua_State *L, int opts, lab_tensor *x) {
  if (!opts) return x->ndim - 1; /* tensor parallelism splits the last dim by default */
  lua_getfield(L, opts, "dim");
  int d = lua_isnil(L, -1) ? x->ndim - 1 : ll_to_dim(L, ll_check_integer(L, -1, "dim", "dim"), x->ndim, 0, "dim");
  lua_pop(L, 1);
  return d;
}

/* One of lab.autograd.dist's ops on (x[, opts]): exactly one of whole (ops on the whole tensor)
 * and along (ops along options field dim, the last dim by default) is given. dim= is read and
 * checked for every op, as before. */
typedef lab_tensor *(*dist_whole_fn)(lab_group *g, lab_tensor *x);
typedef lab_tensor *(*dist_along_fn)(lab_group *g, lab_tensor *x, int dim);

static int dist_op(lua_State *L, dist_whole_fn whole, dist_along_fn along) {
  lab_tensor *x = ll_check_tensor(L, 1);
  int opts = lua_istable(L, 2) ? 2 : 0;
  lab_group *g = ll_opt_group(L, opts);
  int dim = dim_opt(L, opts, x);
  ll_push_tensor(L, whole ? whole(g, x) : along(g, x, dim));
  return 1;
}
static int d_all_reduce(lua_State *L) { return dist_op(L, lab_ad_all_reduce, NULL); }
static int d_all_gather(lua_State *L) { return dist_op(L, NULL, lab_ad_all_gather); }
static int d_reduce_scatter(lua_State *L) { return dist_op(L, NULL, lab_ad_reduce_scatter); }
static int d_copy_to(lua_State *L) { return dist_op(L, lab_ad_copy_to_region, NULL); }
static int d_reduce_from(lua_State *L) { return dist_op(L, lab_ad_reduce_from_region, NULL); }
static int d_gather_from(lua_State *L) { return dist_op(L, NULL, lab_ad_gather_from_region); }
static int d_scatter_to(lua_State *L) { return dist_op(L, NULL, lab_ad_scatter_to_region); }

/* all_to_all_single(x[, {output_split_sizes=, input_split_sizes=, group=}]): a new tensor */
static int d_all_to_all_single(lua_State *L) {
  lab_tensor *x = ll_check_tensor(L, 1);
  int opts = lua_istable(L, 2) ? 2 : 0;
  lab_group *g = ll_opt_group(L, opts);
  if (g->rank < 0) return ll_error(L, "all_to_all_single: this rank is not a member of %s", g->name);
  const int64_t *os = ll_opt_splits(L, opts, "output_split_sizes", g);
  const int64_t *is = ll_opt_splits(L, opts, "input_split_sizes", g);
  ll_push_tensor(L, lab_ad_all_to_all_single(g, x, os, is));
  return 1;
}

void ll_register_autograd_dist(lua_State *L) {
  static const luaL_Reg dist[] = {{"all_reduce", d_all_reduce}, {"all_gather", d_all_gather},
                                  {"reduce_scatter", d_reduce_scatter}, {"copy_to_region", d_copy_to},
                                  {"reduce_from_region", d_reduce_from}, {"gather_from_region", d_gather_from},
                                  {"scatter_to_region", d_scatter_to},
                                  {"all_to_all_single", d_all_to_all_single}, {NULL, NULL}};
  lua_newtable(L);
  luaL_setfuncs(L, dist, 0);
  lua_setfield(L, -2, "dist");
}
