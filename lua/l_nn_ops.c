/* The NN ops with fused kernels (runtime/autograd/ops_nn.c, ops_linear.c, ops_attention.c):
 * lab.linear, lab.layer_norm, lab.sdpa, ..., with gelu, silu, relu as tensor methods too. */
#include <string.h>

#include "lab_lua.h"
#include "runtime/lab.h"

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

static int m_silu(lua_State *L) { return ll_push_unary(L, lab_ad_silu); }

static int m_relu(lua_State *L) {
  ll_push_tensor(L, lab_ad_clamp(ll_check_tensor(L, 1), 0, 1, 0, 0));
  return 1;
}

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

void ll_register_nn_ops(lua_State *L) {
  static const luaL_Reg methods[] = {{"gelu", m_gelu}, {"silu", m_silu}, {"relu", m_relu}, {NULL, NULL}};
  ll_add_tensor_methods(L, methods);
  static const luaL_Reg funcs[] = {{"embedding", l_embedding}, {"layer_norm", l_layer_norm}, {"linear", l_linear},
                                   {"rms_norm", l_rms_norm}, {"dropout", l_dropout},
                                   {"cross_entropy", l_cross_entropy}, {"sdpa", l_sdpa},
                                   {"flash_block", l_flash_block}, {"flash_block_backward", l_flash_block_backward},
                                   {"gelu", m_gelu}, {"silu", m_silu}, {NULL, NULL}};
  luaL_setfuncs(L, funcs, 0);
}
