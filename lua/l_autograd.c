/* Autograd for Lua: tensor properties (grad, requires_grad, grad_fn, is_leaf), backward,
 * detach, hooks, no_grad, lab.autograd.Function (the C engine calling back into Lua), the
 * NN ops with fused kernels, and differentiable collectives (lab.autograd.dist). */
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

/* ---- methods ---- */

static int m_requires_grad_(lua_State *L) {
  lab_tensor *t = ll_check_tensor(L, 1);
  ll_check_rc(L, lab_set_requires_grad(t, lua_isnone(L, 2) ? 1 : lua_toboolean(L, 2)));
  lua_settop(L, 1);
  return 1;
}

/* backward([grad][, {retain_graph=}]) */
static int m_backward(lua_State *L) {
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

/* hooks call a Lua function kept in the registry */
typedef struct {
  lua_State *L;
  int ref;
} lua_callback;

static void free_callback(void *p) {
  lua_callback *cb = p;
  luaL_unref(cb->L, LUA_REGISTRYINDEX, cb->ref);
  free(cb);
}

static int run_hook(void *ctx, lab_tensor *grad, lab_tensor **replace) {
  lua_callback *cb = ctx;
  lua_State *L = cb->L;
  if (!lua_checkstack(L, 8)) return lab_fail("hook", "Lua stack overflow");
  lua_rawgeti(L, LUA_REGISTRYINDEX, cb->ref);
  lab_tensor_retain(grad);
  ll_push_tensor(L, grad);
  if (lua_pcall(L, 1, 1, 0) != LUA_OK) {
    lab_fail("hook", "%s", lua_tostring(L, -1));
    lua_pop(L, 1);
    return -1;
  }
  lab_tensor *r = ll_test_tensor(L, -1);
  if (r) {
    lab_tensor_retain(r);
    *replace = r;
  }
  lua_pop(L, 1);
  return 0;
}

/* post-accumulate hooks call fn(param); end-of-backward callbacks call fn() */
typedef struct {
  lua_State *L;
  int fn_ref;       /* end-of-backward callbacks: the function, in the registry */
  lua_Integer slot; /* post-accumulate hooks: the key of the parameter in POST_PARAMS */
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

static void free_post_callback(void *p) {
  lua_post_callback *cb = p;
  luaL_unref(cb->L, LUA_REGISTRYINDEX, cb->fn_ref);
  free(cb);
}

static int run_post_callback(void *ctx, lab_tensor *grad, lab_tensor **replace) {
  (void)grad;
  (void)replace;
  lua_post_callback *cb = ctx;
  lua_State *L = cb->L;
  if (!lua_checkstack(L, 12)) return lab_fail("hook", "Lua stack overflow");
  int top = lua_gettop(L), nargs = 0;
  if (cb->fn_ref != LUA_NOREF) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, cb->fn_ref);
  } else {
    weak_table(L, POST_PARAMS, "v");
    lua_rawgeti(L, -1, cb->slot);       /* the parameter */
    if (lua_isnil(L, -1)) {             /* collected: nobody can observe the hook any more */
      lua_settop(L, top);
      return 0;
    }
    weak_table(L, POST_FNS, "k");
    lua_pushvalue(L, -2);
    lua_rawget(L, -2);                  /* its hooks */
    lua_rawgeti(L, -1, cb->slot);       /* fn */
    lua_replace(L, top + 1);            /* fn where W was: fn, param, E, hooks */
    lua_settop(L, top + 2);
    nargs = 1;
  }
  if (lua_pcall(L, nargs, 0, 0) != LUA_OK) {
    lab_fail("hook", "%s", lua_tostring(L, -1));
    lua_settop(L, top);
    return -1;
  }
  lua_settop(L, top);
  return 0;
}

static lua_post_callback *new_post_callback(lua_State *L, int fn_idx) {
  lua_post_callback *cb = malloc(sizeof *cb);
  if (!cb) return NULL;
  cb->L = ll_main_state(L); /* never a coroutine's state: it may be collected */
  cb->slot = 0;
  lua_pushvalue(L, fn_idx);
  cb->fn_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  return cb;
}

/* p:register_post_accumulate_grad_hook(fn): fn(p) after each gradient lands in p.grad;
 * lives as long as the userdata p (see POST_FNS above) */
static int m_register_post_hook(lua_State *L) {
  lab_tensor *t = ll_check_tensor_meta(L, 1);
  luaL_checktype(L, 2, LUA_TFUNCTION);
  lua_post_callback *cb = malloc(sizeof *cb);
  if (!cb) return ll_error(L, "register_post_accumulate_grad_hook: out of memory");
  cb->L = ll_main_state(L); /* never a coroutine's state: it may be collected */
  cb->fn_ref = LUA_NOREF;
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
  int id = lab_register_post_accumulate_hook(t, run_post_callback, cb, free_post_callback);
  if (id < 0) {
    free_post_callback(cb);
    return ll_runtime_error(L);
  }
  lua_pushinteger(L, id);
  return 1;
}

/* lab.autograd.queue_callback(fn): fn() once the running backward has finished */
static int l_queue_callback(lua_State *L) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  lua_post_callback *cb = new_post_callback(L, 1);
  if (!cb) return ll_error(L, "queue_callback: out of memory");
  ll_check_rc(L, lab_queue_backward_callback(run_post_callback, cb, free_post_callback));
  return 0;
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
  lua_callback *cb = malloc(sizeof *cb);
  if (!cb) return ll_error(L, "register_hook: out of memory");
  cb->L = ll_main_state(L); /* never a coroutine's state: it may be collected */
  lua_pushvalue(L, 2);
  cb->ref = luaL_ref(L, LUA_REGISTRYINDEX);
  int id = lab_register_hook(t, run_hook, cb, free_callback);
  if (id < 0) {
    free_callback(cb);
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

static int m_gelu(lua_State *L) {
  lab_tensor *t = ll_check_tensor(L, 1);
  int tanh_approx = 0;
  if (lua_type(L, 2) == LUA_TSTRING) tanh_approx = strcmp(lua_tostring(L, 2), "tanh") == 0;
  else if (lua_istable(L, 2)) {
    lua_getfield(L, 2, "approximate");
    tanh_approx = lua_isstring(L, -1) && strcmp(lua_tostring(L, -1), "tanh") == 0;
    lua_pop(L, 1);
  }
  ll_push_tensor(L, lab_ad_gelu(t, tanh_approx));
  return 1;
}

static int m_silu(lua_State *L) {
  ll_push_tensor(L, lab_ad_silu(ll_check_tensor(L, 1)));
  return 1;
}

static int m_relu(lua_State *L) {
  ll_push_tensor(L, lab_ad_clamp(ll_check_tensor(L, 1), 0, 1, 0, 0));
  return 1;
}

/* ---- grad mode ---- */

static int guard_close(lua_State *L) {
  lua_getfield(L, 1, "previous");
  lab_set_grad_enabled(lua_toboolean(L, -1));
  return 0;
}

/* lab.no_grad(fn, ...) runs fn without recording; lab.no_grad() returns a guard to use as
 * `local g <close> = lab.no_grad()`. */
static int grad_mode_scope(lua_State *L, int enable) {
  int previous = lab_grad_enabled();
  if (lua_isfunction(L, 1)) {
    lab_set_grad_enabled(enable);
    int n = lua_gettop(L) - 1;
    int status = lua_pcall(L, n, LUA_MULTRET, 0);
    lab_set_grad_enabled(previous);
    if (status != LUA_OK) return lua_error(L);
    return lua_gettop(L);
  }
  lab_set_grad_enabled(enable);
  lua_createtable(L, 0, 1);
  lua_pushboolean(L, previous);
  lua_setfield(L, -2, "previous");
  lua_createtable(L, 0, 1);
  lua_pushcfunction(L, guard_close);
  lua_setfield(L, -2, "__close");
  lua_setmetatable(L, -2);
  return 1;
}

static int l_no_grad(lua_State *L) { return grad_mode_scope(L, 0); }
static int l_enable_grad(lua_State *L) { return grad_mode_scope(L, 1); }

static int l_set_grad_enabled(lua_State *L) {
  lab_set_grad_enabled(lua_toboolean(L, 1));
  return 0;
}

static int l_is_grad_enabled(lua_State *L) {
  lua_pushboolean(L, lab_grad_enabled());
  return 1;
}

/* ---- NN ops ---- */

static int l_embedding(lua_State *L) {
  lab_tensor *idx = ll_check_tensor(L, 1), *w = ll_check_tensor(L, 2);
  ll_push_tensor(L, lab_ad_embedding(w, idx));
  return 1;
}

/* lab.linear(x, weight [, bias] [, {activation = 'gelu' | 'gelu_tanh' | 'silu'}]): x W^T + b,
 * the bias added in the GEMM; with an activation, act(x W^T + b) as one op (ops_linear.c) */
static int l_linear(lua_State *L) {
  lab_tensor *x = ll_check_tensor(L, 1), *w = ll_check_tensor(L, 2), *b = ll_test_tensor(L, 3);
  if (!b && !lua_isnoneornil(L, 3))
    return ll_error(L, "linear: bias (argument 3) must be a tensor or nil, got %s", luaL_typename(L, 3));
  const char *act = NULL;
  if (!lua_isnoneornil(L, 4)) {
    if (!lua_istable(L, 4)) return ll_error(L, "linear: options (argument 4) must be a table, got %s", luaL_typename(L, 4));
    lua_getfield(L, 4, "activation");
    if (!lua_isnil(L, -1) && lua_type(L, -1) != LUA_TSTRING)
      return ll_error(L, "linear: activation must be 'gelu', 'gelu_tanh' or 'silu', got a %s", luaL_typename(L, -1));
    act = lua_tostring(L, -1);
    lua_pop(L, 1);
  }
  if (!act) {
    ll_push_tensor(L, lab_ad_linear(x, w, b));
    return 1;
  }
  lab_act_kind kind;
  if (strcmp(act, "gelu") == 0) kind = LAB_ACT_GELU;
  else if (strcmp(act, "gelu_tanh") == 0) kind = LAB_ACT_GELU_TANH;
  else if (strcmp(act, "silu") == 0) kind = LAB_ACT_SILU;
  else return ll_error(L, "linear: activation must be 'gelu', 'gelu_tanh' or 'silu', got '%s'", act);
  ll_push_tensor(L, lab_ad_linear_act(x, w, b, kind));
  return 1;
}

static int l_layer_norm(lua_State *L) {
  lab_tensor *x = ll_check_tensor(L, 1);
  lab_tensor *w = ll_test_tensor(L, 2), *b = ll_test_tensor(L, 3);
  ll_push_tensor(L, lab_ad_layer_norm(x, w, b, luaL_optnumber(L, 4, 1e-5)));
  return 1;
}

static int l_rms_norm(lua_State *L) {
  lab_tensor *x = ll_check_tensor(L, 1), *w = ll_test_tensor(L, 2);
  ll_push_tensor(L, lab_ad_rms_norm(x, w, luaL_optnumber(L, 3, 1e-6)));
  return 1;
}

static int l_dropout(lua_State *L) {
  lab_tensor *x = ll_check_tensor(L, 1);
  double p = luaL_optnumber(L, 2, 0.5);
  int training = lua_isnone(L, 3) ? 1 : lua_toboolean(L, 3);
  ll_push_tensor(L, lab_ad_dropout(x, p, training));
  return 1;
}

/* cross_entropy(logits, target[, {ignore_index=-100, label_smoothing=0}]) */
static int l_cross_entropy(lua_State *L) {
  lab_tensor *x = ll_check_tensor(L, 1), *t = ll_check_tensor(L, 2);
  int opts = lua_istable(L, 3) ? 3 : 0;
  double ignore = ll_opt_number(L, opts, "ignore_index", -100);
  double smooth = ll_opt_number(L, opts, "label_smoothing", 0);
  ll_push_tensor(L, lab_ad_cross_entropy(x, t, (int64_t)ignore, smooth));
  return 1;
}

/* sdpa(q, k, v[, {causal=false, scale=1/sqrt(D), impl='flash'|'math'}]); without impl, flash
 * where the device has a kernel for the dtype and head dims, math elsewhere */
static int l_sdpa(lua_State *L) {
  lab_tensor *q = ll_check_tensor(L, 1), *k = ll_check_tensor(L, 2), *v = ll_check_tensor(L, 3);
  int opts = lua_istable(L, 4) ? 4 : 0;
  lab_sdpa_impl impl = LAB_SDPA_AUTO;
  if (opts && lua_getfield(L, opts, "impl") != LUA_TNIL) {
    const char *s = lua_tostring(L, -1);
    if (s && strcmp(s, "flash") == 0) impl = LAB_SDPA_FLASH;
    else if (s && strcmp(s, "math") == 0) impl = LAB_SDPA_MATH;
    else return ll_error(L, "sdpa: impl must be 'flash' or 'math', got %s", s ? s : luaL_typename(L, -1));
  }
  if (opts) lua_pop(L, 1);
  ll_push_tensor(L, lab_ad_sdpa(q, k, v, ll_opt_bool(L, opts, "causal", 0), ll_opt_number(L, opts, "scale", 0), impl));
  return 1;
}

/* flash_block(q, k, v[, {causal=false, scale=}]) -> out, lse [..., T] (f32); no autograd */
static int l_flash_block(lua_State *L) {
  lab_tensor *q = ll_check_tensor(L, 1), *k = ll_check_tensor(L, 2), *v = ll_check_tensor(L, 3);
  int opts = lua_istable(L, 4) ? 4 : 0;
  lab_tensor *out, *lse;
  int rc = lab_flash_block_fwd(q, k, v, ll_opt_bool(L, opts, "causal", 0), ll_opt_number(L, opts, "scale", 0), &out,
                               &lse);
  ll_push_tensor(L, rc < 0 ? NULL : out); /* raises the recorded error when NULL */
  ll_push_tensor(L, lse);
  return 2;
}

/* flash_block_backward(q, k, v, out, dout, lse[, {causal=false, scale=}]) -> dq, dk, dv */
static int l_flash_block_backward(lua_State *L) {
  lab_tensor *t[6];
  for (int i = 0; i < 6; i++) t[i] = ll_check_tensor(L, i + 1);
  int opts = lua_istable(L, 7) ? 7 : 0;
  lab_tensor *dq, *dk, *dv;
  int rc = lab_flash_block_bwd(t[0], t[1], t[2], t[3], t[4], t[5], ll_opt_bool(L, opts, "causal", 0),
                               ll_opt_number(L, opts, "scale", 0), &dq, &dk, &dv);
  ll_push_tensor(L, rc < 0 ? NULL : dq);
  ll_push_tensor(L, dk);
  ll_push_tensor(L, dv);
  return 3;
}

/* ---- lab.autograd.Function ---- */

/* node ctx: the Function table (with backward) and the ctx table, as registry refs */
typedef struct {
  lua_State *L;
  int fn_ref, ctx_ref, nin;
} lua_function_node;

static void free_function_node(void *p) {
  lua_function_node *f = p;
  luaL_unref(f->L, LUA_REGISTRYINDEX, f->fn_ref);
  luaL_unref(f->L, LUA_REGISTRYINDEX, f->ctx_ref);
  free(f);
}

static int function_bw(lab_node *n, lab_tensor *g, lab_tensor **gin) {
  lua_function_node *f = n->ctx;
  lua_State *L = f->L;
  if (!lua_checkstack(L, 8 + f->nin)) return lab_fail("autograd.Function backward", "Lua stack overflow");
  int top = lua_gettop(L);
  lua_rawgeti(L, LUA_REGISTRYINDEX, f->fn_ref);
  lua_getfield(L, -1, "backward");
  lua_rawgeti(L, LUA_REGISTRYINDEX, f->ctx_ref);
  lab_tensor_retain(g);
  ll_push_tensor(L, g);
  if (lua_pcall(L, 2, f->nin, 0) != LUA_OK) {
    lab_fail("autograd.Function backward", "%s", lua_tostring(L, -1));
    lua_settop(L, top);
    return -1;
  }
  for (int i = 0; i < f->nin; i++) {
    lab_tensor *r = ll_test_tensor(L, top + 2 + i);
    if (r && (n->next[i].node || n->next[i].leaf)) {
      lab_tensor_retain(r);
      gin[i] = r;
    }
  }
  lua_settop(L, top);
  return 0;
}

static int ctx_save_for_backward(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  int n = lua_gettop(L) - 1;
  lua_createtable(L, n, 0);
  for (int i = 1; i <= n; i++) {
    lab_tensor *t = ll_test_tensor(L, i + 1);
    if (t) ll_push_tensor(L, lab_detach(t));
    else lua_pushvalue(L, i + 1);
    lua_rawseti(L, -2, i);
  }
  lua_setfield(L, 1, "saved_tensors");
  return 0;
}

/* F:apply(...) / F(...): forward runs without recording; its tensor result gets a node
 * whose backward calls F.backward(ctx, grad) for one gradient per argument. */
static int function_apply(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  int nargs = lua_gettop(L) - 1;
  lab_tensor *inputs[32] = {0};
  if (nargs > 32) return ll_error(L, "autograd.Function: at most 32 arguments");
  for (int i = 0; i < nargs; i++) inputs[i] = ll_test_tensor(L, i + 2);
  lua_newtable(L); /* ctx */
  lua_pushcfunction(L, ctx_save_for_backward);
  lua_setfield(L, -2, "save_for_backward");
  int ctx = lua_gettop(L);
  lua_getfield(L, 1, "forward");
  if (!lua_isfunction(L, -1)) return ll_error(L, "autograd.Function needs a forward function");
  lua_pushvalue(L, ctx);
  for (int i = 0; i < nargs; i++) lua_pushvalue(L, i + 2);
  int previous = lab_grad_enabled();
  lab_set_grad_enabled(0);
  int status = lua_pcall(L, nargs + 1, 1, 0);
  lab_set_grad_enabled(previous);
  if (status != LUA_OK) return lua_error(L);
  lab_tensor *out = ll_test_tensor(L, -1);
  if (!out) return ll_error(L, "autograd.Function: forward must return a tensor");
  if (!lab_ag_needed(nargs, inputs)) return 1;
  /* the result gets its own header, so the node never attaches to an input itself */
  lab_tensor *res = lab_alias(out);
  lab_node *n = res ? lab_node_new("Function", function_bw, nargs, inputs) : NULL;
  lua_function_node *f = n ? malloc(sizeof *f) : NULL;
  if (!f) {
    lab_node_release(n);
    lab_tensor_release(res);
    return ll_error(L, "autograd.Function: out of memory");
  }
  f->L = ll_main_state(L); /* never a coroutine's state: it may be collected */
  f->nin = nargs;
  lua_pushvalue(L, 1);
  f->fn_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_pushvalue(L, ctx);
  f->ctx_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  n->ctx = f;
  n->free_ctx = free_function_node;
  ll_check_rc(L, lab_node_attach(n, res));
  ll_push_tensor(L, res);
  return 1;
}

static int function_call(lua_State *L) {
  lua_remove(L, 1); /* the metatable's __call passes the object first: F(...) == F:apply(...) */
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  return function_apply(L);
}

/* lab.autograd.Function{forward=, backward=} */
static int l_function(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_getfield(L, 1, "forward");
  lua_getfield(L, 1, "backward");
  if (!lua_isfunction(L, -2) || !lua_isfunction(L, -1))
    return ll_error(L, "autograd.Function{forward=..., backward=...} needs both functions");
  lua_pop(L, 2);
  lua_pushcfunction(L, function_apply);
  lua_setfield(L, 1, "apply");
  lua_createtable(L, 0, 1);
  lua_pushvalue(L, 1);
  lua_pushcclosure(L, function_call, 1);
  lua_setfield(L, -2, "__call");
  lua_setmetatable(L, 1);
  lua_settop(L, 1);
  return 1;
}

static int l_backward(lua_State *L) { return m_backward(L); }

/* ---- differentiable collectives: lab.autograd.dist.* (x[, {group=, dim=}]) ---- */

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

void ll_register_autograd(lua_State *L) {
  /* tensor methods */
  luaL_getmetatable(L, LAB_TENSOR_MT);
  lua_getfield(L, -1, "methods");
  static const luaL_Reg methods[] = {{"requires_grad_", m_requires_grad_}, {"backward", m_backward},
                                     {"detach", m_detach}, {"register_hook", m_register_hook},
                                     {"register_post_accumulate_grad_hook", m_register_post_hook},
                                     {"gelu", m_gelu}, {"silu", m_silu}, {"relu", m_relu},
                                     {NULL, NULL}};
  luaL_setfuncs(L, methods, 0);
  lua_pop(L, 2);
  /* lab.* */
  static const luaL_Reg funcs[] = {{"no_grad", l_no_grad}, {"enable_grad", l_enable_grad},
                                   {"set_grad_enabled", l_set_grad_enabled},
                                   {"is_grad_enabled", l_is_grad_enabled}, {"embedding", l_embedding},
                                   {"layer_norm", l_layer_norm}, {"linear", l_linear}, {"rms_norm", l_rms_norm},
                                   {"dropout", l_dropout}, {"cross_entropy", l_cross_entropy},
                                   {"sdpa", l_sdpa}, {"flash_block", l_flash_block},
                                   {"flash_block_backward", l_flash_block_backward}, {"gelu", m_gelu}, {"silu", m_silu},
                                   {NULL, NULL}};
  luaL_setfuncs(L, funcs, 0);
  /* lab.autograd */
  lua_newtable(L);
  lua_pushcfunction(L, l_function);
  lua_setfield(L, -2, "Function");
  lua_pushcfunction(L, l_backward);
  lua_setfield(L, -2, "backward");
  lua_pushcfunction(L, l_queue_callback);
  lua_setfield(L, -2, "queue_callback");
  static const luaL_Reg dist[] = {{"all_reduce", d_all_reduce}, {"all_gather", d_all_gather},
                                  {"reduce_scatter", d_reduce_scatter}, {"copy_to_region", d_copy_to},
                                  {"reduce_from_region", d_reduce_from}, {"gather_from_region", d_gather_from},
                                  {"scatter_to_region", d_scatter_to},
                                  {"all_to_all_single", d_all_to_all_single}, {NULL, NULL}};
  lua_newtable(L);
  luaL_setfuncs(L, dist, 0);
  lua_setfield(L, -2, "dist");
  lua_setfield(L, -2, "autograd");
}
