/* lab.autograd: Function (an op written in Lua, its backward called by the C engine),
 * backward, queue_callback; its dist table lives in l_autograd_dist.c. */
#include <stdlib.h>

#include "lab_lua.h"
#include "runtime/lab.h"

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
  if (ll_pcall_runtime(L, 2, f->nin, "autograd.Function backward") < 0) {
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

/* lab.autograd.queue_callback(fn): fn() once the running backward has finished */
static int run_queued(void *ctx, lab_tensor *grad, lab_tensor **replace) {
  (void)grad, (void)replace; /* a queued callback sees no gradient */
  ll_fn_ref *cb = ctx;
  if (!lua_checkstack(cb->L, 12)) return lab_fail("hook", "Lua stack overflow");
  int top = lua_gettop(cb->L);
  lua_rawgeti(cb->L, LUA_REGISTRYINDEX, cb->ref);
  int rc = ll_pcall_runtime(cb->L, 0, 0, "hook");
  lua_settop(cb->L, top);
  return rc;
}

static int l_queue_callback(lua_State *L) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  ll_fn_ref *cb = ll_fn_ref_new(L, 1);
  if (!cb) return ll_error(L, "queue_callback: out of memory");
  ll_check_rc(L, lab_queue_backward_callback(run_queued, cb, ll_fn_ref_free));
  return 0;
}

void ll_register_autograd(lua_State *L) {
  static const luaL_Reg funcs[] = {{"Function", l_function}, {"backward", ll_backward},
                                   {"queue_callback", l_queue_callback}, {NULL, NULL}};
  lua_newtable(L);
  luaL_setfuncs(L, funcs, 0);
  ll_register_autograd_dist(L);
  lua_setfield(L, -2, "autograd");
}
