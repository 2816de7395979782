/* lab._optim_c: the fused AdamW steps that lab.optim (lua/lab/optim.lua) runs. */
#include "lab_lua.h"
#include "runtime/lab.h"

/* adamw_step(p, m, v, {lr=, beta1=, beta2=, eps=, weight_decay=, step=}[, grad]) uses
 * p.grad unless a gradient is given (ZeRO passes its gradient shard) */
static int l_adamw_step(lua_State *L) {
  lab_tensor *p = ll_check_tensor(L, 1), *m = ll_check_tensor(L, 2), *v = ll_check_tensor(L, 3);
  luaL_checktype(L, 4, LUA_TTABLE);
  lab_tensor *g = ll_test_tensor(L, 5);
  if (!g) {
    lua_getfield(L, 1, "grad");
    g = ll_test_tensor(L, -1);
  }
  if (!g) return 0; /* a parameter without a gradient is left alone */
  lab_adamw_opts o = {.lr = ll_opt_number(L, 4, "lr", 1e-3),
                      .beta1 = ll_opt_number(L, 4, "beta1", 0.9),
                      .beta2 = ll_opt_number(L, 4, "beta2", 0.999),
                      .eps = ll_opt_number(L, 4, "eps", 1e-8),
                      .weight_decay = ll_opt_number(L, 4, "weight_decay", 0.01),
                      .step = (int64_t)ll_opt_number(L, 4, "step", 1)};
  ll_check_rc(L, lab_adamw_(p, g, m, v, &o));
  return 0;
}

/* adamw_multi(params, ms, vs, {lr=, beta1=, beta2=, eps=, step=}, decays): adamw_step over
 * lists (parameter i with moments ms[i], vs[i], weight decay decays[i] and its .grad;
 * parameters without a gradient are left alone), all checked before any is updated, in one
 * parallel region where the device has the multi-tensor kernel */
static int l_adamw_multi(lua_State *L) {
  for (int a = 1; a <= 5; a++) luaL_checktype(L, a, LUA_TTABLE);
  lua_Integer n = (lua_Integer)lua_rawlen(L, 1);
  if ((lua_Integer)lua_rawlen(L, 2) != n || (lua_Integer)lua_rawlen(L, 3) != n || (lua_Integer)lua_rawlen(L, 5) != n)
    return ll_error(L, "adamw: %lld parameters but %lld, %lld moments and %lld decays", (long long)n,
                    (long long)lua_rawlen(L, 2), (long long)lua_rawlen(L, 3), (long long)lua_rawlen(L, 5));
  if (n > 1000000) return ll_error(L, "adamw: %lld parameters is more than a step takes", (long long)n);
  /* the arrays in a userdata (freed by the collector if an error is raised below) */
  size_t ptrs = sizeof(lab_tensor *) * 4 * (size_t)(n ? n : 1);
  lab_tensor **p = lua_newuserdatauv(L, ptrs + sizeof(double) * (size_t)(n ? n : 1), 0);
  lab_tensor **g = p + n, **m = g + n, **v = m + n;
  double *wd = (double *)((char *)p + ptrs);
  int count = 0, base = lua_gettop(L);
  if (!lua_checkstack(L, (int)n + 8)) return ll_error(L, "adamw: too many parameters (%lld)", (long long)n);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, 1, i);
    lab_tensor *pt = ll_test_tensor(L, -1);
    if (!pt) return ll_error(L, "adamw: parameter %lld is not a tensor", (long long)i);
    lua_getfield(L, -1, "grad"); /* kept on the stack while the step runs */
    lab_tensor *gt = ll_test_tensor(L, -1);
    lua_remove(L, -2);
    if (!gt) {
      lua_pop(L, 1);
      continue;
    }
    lua_rawgeti(L, 2, i);
    lab_tensor *mt = ll_test_tensor(L, -1);
    lua_rawgeti(L, 3, i);
    lab_tensor *vt = ll_test_tensor(L, -1);
    lua_rawgeti(L, 5, i);
    int isnum = 0;
    double d = lua_tonumberx(L, -1, &isnum);
    lua_pop(L, 3); /* the moments stay referenced by their tables */
    if (!mt || !vt || !isnum)
      return ll_error(L, "adamw: parameter %lld needs tensors for its moments and a number for its decay", (long long)i);
    p[count] = pt, g[count] = gt, m[count] = mt, v[count] = vt, wd[count] = d;
    count++;
  }
  lab_adamw_opts o = {.lr = ll_opt_number(L, 4, "lr", 1e-3),
                      .beta1 = ll_opt_number(L, 4, "beta1", 0.9),
                      .beta2 = ll_opt_number(L, 4, "beta2", 0.999),
                      .eps = ll_opt_number(L, 4, "eps", 1e-8),
                      .weight_decay = 0,
                      .step = (int64_t)ll_opt_number(L, 4, "step", 1)};
  ll_check_rc(L, lab_adamw_multi_(count, p, g, m, v, wd, &o));
  lua_settop(L, base);
  return 0;
}

void ll_register_optim(lua_State *L) {
  static const luaL_Reg funcs[] = {{"adamw_step", l_adamw_step}, {"adamw_multi", l_adamw_multi}, {NULL, NULL}};
  lua_newtable(L);
  luaL_setfuncs(L, funcs, 0);
  lua_setfield(L, -2, "_optim_c");
}
