/* C support for lab.nn and lab.optim: the fused AdamW step, memory tags for parameters
 * and optimizer state, and .npy import/export. */
#include <string.h>

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

/* lab._rebind(t, flat, offset): t becomes a contiguous view of flat's storage starting at
 * element offset (1-based), keeping its identity (autograd leaf, hooks, Lua references):
 * how ZeRO makes every parameter a window into one flat buffer. Values are copied over. */
static int l_rebind(lua_State *L) {
  lab_tensor *t = ll_check_tensor(L, 1), *flat = ll_check_tensor(L, 2);
  lua_Integer off = luaL_checkinteger(L, 3) - 1;
  if (t->dtype != flat->dtype || !lab_is_contiguous(flat) || off < 0 || off + lab_numel(t) > lab_numel(flat))
    return ll_error(L, "rebind: a %s tensor of %lld elements does not fit at %lld in a %s buffer of %lld",
                    lab_dtype_name(t->dtype), (long long)lab_numel(t), (long long)off + 1,
                    lab_dtype_name(flat->dtype), (long long)lab_numel(flat));
  lab_tensor *old = lab_alias(t); /* keeps the old values readable during the copy */
  if (!old) return ll_runtime_error(L);
  lab_storage_retain(flat->storage);
  lab_storage_release(t->storage);
  t->storage = flat->storage;
  t->offset = flat->offset + off;
  int64_t s = 1;
  for (int d = t->ndim - 1; d >= 0; d--) {
    t->stride[d] = s;
    s *= t->shape[d];
  }
  int rc = lab_copy_(t, old);
  lab_tensor_release(old);
  ll_check_rc(L, rc);
  return 0;
}

/* lab._release_data(t) frees t's storage memory while every view and saved alias keeps
 * pointing at the storage object; lab._restore_data(t) allocates it again (contents
 * undefined). ZeRO-3 holds a layer's full parameters only while it computes. */
static lab_tensor *raw_tensor(lua_State *L, int idx) {
  lab_tensor **box = luaL_checkudata(L, idx, LAB_TENSOR_MT);
  if (!*box) ll_error(L, "tensor argument %d was already closed", idx);
  return *box;
}

static int l_release_data(lua_State *L) {
  lab_tensor *t = raw_tensor(L, 1);
  lab_storage_release_data(t->storage);
  return 0;
}

static int l_restore_data(lua_State *L) {
  lab_tensor *t = raw_tensor(L, 1);
  ll_check_rc(L, lab_storage_restore_data(t->storage));
  return 0;
}

static int l_load_npy(lua_State *L) {
  ll_push_tensor(L, lab_npy_load(luaL_checkstring(L, 1)));
  return 1;
}

static int m_save_npy(lua_State *L) {
  ll_check_rc(L, lab_npy_save(ll_check_tensor(L, 1), luaL_checkstring(L, 2)));
  return 0;
}

void ll_register_nn_support(lua_State *L) {
  lua_pushcfunction(L, l_load_npy);
  lua_setfield(L, -2, "load_npy");
  lua_pushcfunction(L, l_rebind);
  lua_setfield(L, -2, "_rebind");
  lua_pushcfunction(L, l_release_data);
  lua_setfield(L, -2, "_release_data");
  lua_pushcfunction(L, l_restore_data);
  lua_setfield(L, -2, "_restore_data");
  lua_getfield(L, -1, "mem");
  lua_pushcfunction(L, l_tag);
  lua_setfield(L, -2, "tag");
  lua_pop(L, 1);
  lua_newtable(L);
  lua_pushcfunction(L, l_adamw_step);
  lua_setfield(L, -2, "adamw_step");
  lua_pushcfunction(L, l_adamw_multi);
  lua_setfield(L, -2, "adamw_multi");
  lua_setfield(L, -2, "_optim_c");
  luaL_getmetatable(L, LAB_TENSOR_MT);
  lua_getfield(L, -1, "methods");
  lua_pushcfunction(L, m_save_npy);
  lua_setfield(L, -2, "save_npy");
  lua_pop(L, 2);
}
