/* The autograd side of lab.Tensor: the properties grad, requires_grad, grad_fn, is_leaf; the
 * methods requires_grad_, backward, detach, register_hook, register_post_accumulate_grad_hook. */
#include <stdlib.h>
#include <string.h>

#include "lab_lua.h"
#include "runtime/lab.h"

void ll_check_inplace(lua_State *L, lab_tensor *t, const char *op) {
  if (lab_grad_enabled() && lab_requires_grad(t))
    ll_error(L, "%s: in-place change of a tensor that requires grad (%s); do it inside lab.no_grad(...)"
             " or on a detach()ed tensor", op, lab_is_leaf(t) ? "a leaf" : lab_grad_fn_name(t));
}

int ll_autograd_property(lua_State *L, lab_tensor *t, const char *k) {
  if (strcmp(k, "grad") == 0) {
    lab_tensor *g = lab_grad_of(t);
    if (!g) lua_pushnil(L);
    else {
      lab_tensor_retain(g);
      ll_push_tensor(L, g);
    }
    return 1;
  }
  if (strcmp(k, "requires_grad") == 0) {
    lua_pushboolean(L, lab_requires_grad(t));
    return 1;
  }
  if (strcmp(k, "grad_fn") == 0) {
    const char *n = lab_grad_fn_name(t);
    if (n) lua_pushstring(L, n);
    else lua_pushnil(L);
    return 1;
  }
  if (strcmp(k, "is_leaf") == 0) {
    lua_pushboolean(L, lab_is_leaf(t));
    return 1;
  }
  return 0;
}

int ll_autograd_set_property(lua_State *L, lab_tensor *t, const char *k, int idx) {
  if (strcmp(k, "grad") == 0) {
    if (lua_isnil(L, idx)) {
      lab_set_grad(t, NULL);
      return 1;
    }
    lab_tensor *g = ll_check_tensor(L, idx);
    if (!lab_same_shape(g, t)) {
      char a[128], b[128];
      ll_error(L, "grad: shape %s does not match the tensor's %s", lab_shape_str(g, a, sizeof a),
               lab_shape_str(t, b, sizeof b));
    }
    lab_set_grad(t, g);
    return 1;
  }
  if (strcmp(k, "requires_grad") == 0) {
    ll_check_rc(L, lab_set_requires_grad(t, lua_toboolean(L, idx)));
    return 1;
  }
  return 0;
}

static int m_requires_grad_(lua_State *L) {
  lab_tensor *t = ll_check_tensor(L, 1);
  ll_check_rc(L, lab_set_requires_grad(t, lua_isnone(L, 2) ? 1 : lua_toboolean(L, 2)));
  lua_settop(L, 1);
  return 1;
}

/* t:backward([grad][, {retain_graph=}]), also lab.autograd.backward(t, ...) */
int ll_backward(lua_State *L) {
  lab_tensor *t = ll_check_tensor(L, 1);
  int opts = ll_options_index(L);
  lab_tensor *g = (opts != 2) ? ll_test_tensor(L, 2) : NULL;
  int retain = ll_opt_bool(L, opts, "retain_graph", 0);
  ll_check_rc(L, lab_backward(t, g, retain));
  return 0;
}

static int m_detach(lua_State *L) {
  ll_push_tensor(L, lab_detach(ll_check_tensor(L, 1)));
  return 1;
}

/* register_hook's function fn(grad), kept in the registry */
static int run_hook(void *ctx, lab_tensor *grad, lab_tensor **replace) {
  ll_fn_ref *cb = ctx;
  lua_State *L = cb->L;
  if (!lua_checkstack(L, 8)) return lab_fail("hook", "Lua stack overflow");
  lua_rawgeti(L, LUA_REGISTRYINDEX, cb->ref);
  lab_tensor_retain(grad);
  ll_push_tensor(L, grad);
  if (ll_pcall_runtime(L, 1, 1, "hook") < 0) return -1;
  lab_tensor *r = ll_test_tensor(L, -1);
  if (r) {
    lab_tensor_retain(r);
    *replace = r;
  }
  lua_pop(L, 1);
  return 0;
}

/* post-accumulate hooks call fn(param) */
typedef struct {
  lua_State *L;
  lua_Integer slot; /* the key of the parameter in POST_PARAMS */
} lua_post_callback;

/* A post-accumulate hook's function usually closes over the module that owns the
 * parameter (DDP's bucketing, ZeRO's reduce-scatter), and the module holds the parameter.
 * Kept in the registry, that cycle would keep every wrapped model alive forever. So the
 * function lives in an ephemeron table keyed by the parameter's userdata (POST_FNS[param]
 * = {slot = fn}) and the callback finds the userdata through a weak-valued table
 * (POST_PARAMS[slot] = param): once nothing outside the cycle holds the parameter, the
 * collector frees the parameter, its hooks and the module together. */
#define POST_FNS "lab.post_hook_fns"
#define POST_PARAMS "lab.post_hook_params"
static lua_Integer next_post_slot = 1;

static void weak_table(lua_State *L, const char *name, const char *mode) {
  if (luaL_getsubtable(L, LUA_REGISTRYINDEX, name)) return;
  lua_createtable(L, 0, 1);
  lua_pushstring(L, mode);
  lua_setfield(L, -2, "__mode");
  lua_setmetatable(L, -2);
}

static int run_post_callback(void *ctx, lab_tensor *grad, lab_tensor **replace) {
  (void)grad;
  (void)replace;
  lua_post_callback *cb = ctx;
  lua_State *L = cb->L;
  if (!lua_checkstack(L, 12)) return lab_fail("hook", "Lua stack overflow");
  int top = lua_gettop(L);
  weak_table(L, POST_PARAMS, "v");
  lua_rawgeti(L, -1, cb->slot); /* the parameter */
  if (lua_isnil(L, -1)) {       /* collected: nobody can observe the hook any more */
    lua_settop(L, top);
    return 0;
  }
  weak_table(L, POST_FNS, "k");
  lua_pushvalue(L, -2);
  lua_rawget(L, -2);            /* its hooks */
  lua_rawgeti(L, -1, cb->slot); /* fn */
  lua_replace(L, top + 1);      /* fn where W was: fn, param, E, hooks */
  lua_settop(L, top + 2);
  int rc = ll_pcall_runtime(L, 1, 0, "hook");
  lua_settop(L, top);
  return rc;
}

/* p:register_post_accumulate_grad_hook(fn): fn(p) after each gradient lands in p.grad;
 * lives as long as the userdata p (see POST_FNS above) */
static int m_register_post_hook(lua_State *L) {
  lab_tensor *t = ll_check_tensor_meta(L, 1);
  luaL_checktype(L, 2, LUA_TFUNCTION);
  lua_post_callback *cb = malloc(sizeof *cb);
  if (!cb) return ll_error(L, "register_post_accumulate_grad_hook: out of memory");
  cb->L = ll_main_state(L); /* never a coroutine's state: it may be collected */
  cb->slot = next_post_slot++;
  weak_table(L, POST_PARAMS, "v");
  lua_pushvalue(L, 1);
  lua_rawseti(L, -2, cb->slot);
  weak_table(L, POST_FNS, "k");
  lua_pushvalue(L, 1);
  if (lua_rawget(L, -2) == LUA_TNIL) {
    lua_pop(L, 1);
    lua_newtable(L);
    lua_pushvalue(L, 1);
    lua_pushvalue(L, -2);
    lua_rawset(L, -4);
  }
  lua_pushvalue(L, 2);
  lua_rawseti(L, -2, cb->slot);
  lua_pop(L, 3);
  int id = lab_register_post_accumulate_hook(t, run_post_callback, cb, free);
  if (id < 0) {
    free(cb);
    return ll_runtime_error(L);
  }
  lua_pushinteger(L, id);
  return 1;
}

static int hook_remove(lua_State *L) {
  lua_getfield(L, 1, "tensor");
  lua_getfield(L, 1, "id");
  lab_remove_hook(ll_check_tensor(L, -2), (int)lua_tointeger(L, -1));
  return 0;
}

/* register_hook(fn) -> handle with :remove(); fn(grad) may return a replacement */
static int m_register_hook(lua_State *L) {
  lab_tensor *t = ll_check_tensor(L, 1);
  luaL_checktype(L, 2, LUA_TFUNCTION);
  ll_fn_ref *cb = ll_fn_ref_new(L, 2);
  if (!cb) return ll_error(L, "register_hook: out of memory");
  int id = lab_register_hook(t, run_hook, cb, ll_fn_ref_free);
  if (id < 0) {
    ll_fn_ref_free(cb);
    return ll_runtime_error(L);
  }
  lua_createtable(L, 0, 3);
  lua_pushvalue(L, 1);
  lua_setfield(L, -2, "tensor");
  lua_pushinteger(L, id);
  lua_setfield(L, -2, "id");
  lua_pushcfunction(L, hook_remove);
  lua_setfield(L, -2, "remove");
  return 1;
}

void ll_register_tensor_grad(lua_State *L) {
  static const luaL_Reg methods[] = {{"requires_grad_", m_requires_grad_}, {"backward", ll_backward},
                                     {"detach", m_detach}, {"register_hook", m_register_hook},
                                     {"register_post_accumulate_grad_hook", m_register_post_hook},
                                     {NULL, NULL}};
  ll_add_tensor_methods(L, methods);
}
