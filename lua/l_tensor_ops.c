/* Tensor math for Lua: elementwise ops (methods, in-place forms and operators), reductions,
 * softmax, matmul, split/chunk. Reductions take (dim, keepdim) positionally or as options:
 * t:sum(2, true) or t:sum{dim=2, keepdim=true}. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lab_lua.h"
#include "runtime/lab.h"

/* ---- binary ---- */

/* a op b where either side may be a number (operators allow 2 + t). */
static int binary(lua_State *L, lab_binary_op op) {
  lab_tensor *a = ll_test_tensor(L, 1), *b = ll_test_tensor(L, 2);
  if (!a && !b) return ll_error(L, "%s: needs at least one tensor operand", lab_binary_name(op));
  int od = -1;
  lab_tensor *x, *y;
  if (a && b) {
    x = a;
    y = b;
    lab_tensor_retain(x);
    lab_tensor_retain(y);
  } else if (a) {
    y = ll_scalar_for(L, 2, a, &od); /* raises on a bad operand: before anything is retained */
    x = a;
    lab_tensor_retain(x);
  } else {
    x = ll_scalar_for(L, 1, b, &od);
    y = b;
    lab_tensor_retain(y);
  }
  if ((op >= LAB_EQ && op <= LAB_GE) || (op == LAB_DIV && od >= 0 && !lab_dtype_is_float((lab_dtype)od))) od = -1;
  lab_tensor *r = lab_ad_binary(op, x, y, od);
  lab_tensor_release(x);
  lab_tensor_release(y);
  ll_push_tensor(L, r);
  return 1;
}

static int binary_(lua_State *L, lab_binary_op op) {
  lab_tensor *a = ll_check_tensor(L, 1);
  ll_check_inplace(L, a, lab_binary_name(op));
  int od;
  lab_tensor *b = ll_scalar_for(L, 2, a, &od);
  int rc = lab_binary_(op, a, b);
  lab_tensor_release(b);
  ll_check_rc(L, rc);
  lua_settop(L, 1);
  return 1;
}

#define BINARY(NAME, OP)                                                                       \
  static int m_##NAME(lua_State *L) { return binary(L, OP); }                                  \
  static int m_##NAME##_(lua_State *L) { return binary_(L, OP); }
BINARY(add, LAB_ADD)
BINARY(sub, LAB_SUB)
BINARY(mul, LAB_MUL)
BINARY(div, LAB_DIV)
BINARY(pow, LAB_POW)
BINARY(maximum, LAB_MAXIMUM)
BINARY(minimum, LAB_MINIMUM)
BINARY(remainder, LAB_REMAINDER)
BINARY(floor_divide, LAB_FLOOR_DIV)
BINARY(eq, LAB_EQ)
BINARY(ne, LAB_NE)
BINARY(lt, LAB_LT)
BINARY(le, LAB_LE)
BINARY(gt, LAB_GT)
BINARY(ge, LAB_GE)

/* ---- unary ---- */

#define UNARY(NAME, OP)                                                                        \
  static int m_##NAME(lua_State *L) {                                                          \
    ll_push_tensor(L, lab_ad_unary(OP, ll_check_tensor(L, 1)));                                \
    return 1;                                                                                  \
  }                                                                                            \
  static int m_##NAME##_(lua_State *L) {                                                       \
    ll_check_inplace(L, ll_check_tensor(L, 1), #NAME "_");                                     \
    ll_check_rc(L, lab_unary_(OP, ll_check_tensor(L, 1)));                                     \
    lua_settop(L, 1);                                                                          \
    return 1;                                                                                  \
  }
UNARY(neg, LAB_NEG)
UNARY(abs, LAB_ABS)
UNARY(exp, LAB_EXP)
UNARY(log, LAB_LOG)
UNARY(sqrt, LAB_SQRT)
UNARY(rsqrt, LAB_RSQRT)
UNARY(tanh, LAB_TANH)
UNARY(sigmoid, LAB_SIGMOID)

/* clamp's bounds: t:clamp(min, max) with nil for none, or t:clamp{min=, max=} */
typedef struct {
  double lo, hi;
  int has_lo, has_hi;
} clamp_bounds;

static clamp_bounds clamp_args(lua_State *L) {
  clamp_bounds b;
  int opts = ll_options_index(L);
  if (opts) { /* clamp{min=, max=}: the fields become arguments 2 and 3 */
    lua_getfield(L, opts, "min");
    lua_getfield(L, opts, "max");
    int top = lua_gettop(L);
    lua_copy(L, top - 1, 2);
    lua_copy(L, top, 3); /* opts may be at 2: it is read before being overwritten */
    lua_settop(L, 3);
  }
  b.has_lo = !lua_isnoneornil(L, 2);
  b.has_hi = !lua_isnoneornil(L, 3);
  b.lo = b.has_lo ? luaL_checknumber(L, 2) : 0;
  b.hi = b.has_hi ? luaL_checknumber(L, 3) : 0;
  if (!b.has_lo && !b.has_hi) ll_error(L, "clamp: give at least one of min and max");
  return b;
}

static int m_clamp(lua_State *L) {
  lab_tensor *t = ll_check_tensor(L, 1);
  clamp_bounds b = clamp_args(L);
  ll_push_tensor(L, lab_ad_clamp(t, b.lo, b.has_lo, b.hi, b.has_hi));
  return 1;
}

static int m_clamp_(lua_State *L) {
  lab_tensor *t = ll_check_tensor(L, 1);
  clamp_bounds b = clamp_args(L);
  ll_check_inplace(L, t, "clamp_");
  ll_check_rc(L, lab_clamp_(t, b.lo, b.has_lo, b.hi, b.has_hi));
  lua_settop(L, 1);
  return 1;
}

/* lab.where(cond, a, b); a or b may be numbers */
int ll_where(lua_State *L) {
  lab_tensor *c = ll_check_tensor(L, 1);
  lab_tensor *a = ll_test_tensor(L, 2), *b = ll_test_tensor(L, 3);
  const lab_tensor *like = a ? a : b ? b : c;
  int od;
  /* both checked before x holds a reference: a bad b would otherwise raise past x's
   * release and keep a alive for good (API fuzzer seed 3, LSan) */
  ll_check_scalar_arg(L, 2);
  ll_check_scalar_arg(L, 3);
  lab_tensor *x = ll_scalar_for(L, 2, like, &od);
  lab_tensor *y = ll_scalar_for(L, 3, like, &od);
  lab_tensor *r = lab_ad_where(c, x, y);
  lab_tensor_release(x);
  lab_tensor_release(y);
  ll_push_tensor(L, r);
  return 1;
}

/* t:where(cond, other): PyTorch's method form */
static int m_where(lua_State *L) {
  lua_pushvalue(L, 2);
  lua_pushvalue(L, 1);
  lua_pushvalue(L, 3);
  lua_replace(L, 3);
  lua_replace(L, 2);
  lua_replace(L, 1);
  return ll_where(L);
}

/* ---- reductions ---- */

/* Reads (dim, keepdim) from positions 2, 3 or an options table; dim -1 (C) means all. */
static void reduce_args(lua_State *L, const lab_tensor *t, const char *op, int *dim, int *keepdim) {
  int opts = ll_options_index(L);
  *dim = -1;
  *keepdim = 0;
  if (opts == 2) {
    lua_getfield(L, 2, "dim");
    if (!lua_isnil(L, -1)) *dim = ll_to_dim(L, ll_check_integer(L, -1, op, "dim"), t->ndim, 0, op);
    lua_pop(L, 1);
    *keepdim = ll_opt_bool(L, 2, "keepdim", 0);
    return;
  }
  if (!lua_isnoneornil(L, 2)) *dim = ll_check_dim(L, 2, t->ndim, 0, op);
  if (lua_type(L, 3) == LUA_TBOOLEAN) *keepdim = lua_toboolean(L, 3);
  else if (opts) *keepdim = ll_opt_bool(L, opts, "keepdim", 0);
}

static int reduce(lua_State *L, lab_reduce_op op, const char *name, double param) {
  lab_tensor *t = ll_check_tensor(L, 1);
  int dim, keepdim;
  reduce_args(L, t, name, &dim, &keepdim);
  ll_push_tensor(L, lab_ad_reduction(op, t, dim, keepdim, param));
  return 1;
}

static int m_sum(lua_State *L) { return reduce(L, LAB_R_SUM, "sum", 0); }
static int m_mean(lua_State *L) { return reduce(L, LAB_R_MEAN, "mean", 0); }
static int m_prod(lua_State *L) { return reduce(L, LAB_R_PROD, "prod", 0); }

static double correction_of(lua_State *L) {
  int opts = ll_options_index(L);
  if (!opts) return 1;
  if (!ll_opt_bool(L, opts, "unbiased", 1)) return 0;
  return ll_opt_number(L, opts, "correction", 1);
}

static int m_var(lua_State *L) { return reduce(L, LAB_R_VAR, "var", correction_of(L)); }

static int m_std(lua_State *L) {
  reduce(L, LAB_R_VAR, "std", correction_of(L));
  ll_push_tensor(L, lab_ad_unary(LAB_SQRT, ll_check_tensor(L, -1)));
  return 1;
}

/* norm(p=2, dim, keepdim) or norm{p=, dim=, keepdim=} */
static int m_norm(lua_State *L) {
  lab_tensor *t = ll_check_tensor(L, 1);
  double p = 2;
  int opts = ll_options_index(L);
  if (opts == 2) {
    p = ll_opt_number(L, 2, "p", 2);
    return reduce(L, LAB_R_NORM, "norm", p);
  }
  if (lua_type(L, 2) == LUA_TSTRING && strcmp(lua_tostring(L, 2), "inf") == 0) p = INFINITY;
  else if (!lua_isnoneornil(L, 2)) p = luaL_checknumber(L, 2);
  lua_remove(L, 2);
  int dim, keepdim;
  reduce_args(L, t, "norm", &dim, &keepdim);
  ll_push_tensor(L, lab_ad_reduction(LAB_R_NORM, t, dim, keepdim, p));
  return 1;
}

/* max() -> 0-d tensor; max(dim[, keepdim]) -> values, indices (1-based) */
static int extreme(lua_State *L, int want_max, int indices_only) {
  lab_tensor *t = ll_check_tensor(L, 1);
  const char *name = want_max ? (indices_only ? "argmax" : "max") : (indices_only ? "argmin" : "min");
  int dim, keepdim;
  reduce_args(L, t, name, &dim, &keepdim);
  lab_tensor *v = NULL, *ix = NULL;
  ll_check_rc(L, lab_ad_reduce_ext(t, dim, keepdim, want_max, &v, &ix));
  if (!v || !ix) {
    lab_tensor_release(v);
    lab_tensor_release(ix);
    return ll_runtime_error(L);
  }
  /* indices count from 1, like every position in Lua (a new tensor: the 0-based one may be
   * saved for backward) */
  lab_tensor *one = lab_tensor_scalar(LAB_I64, 1);
  lab_tensor *ix1 = one ? lab_binary(LAB_ADD, ix, one, -1) : NULL;
  lab_tensor_release(one);
  lab_tensor_release(ix);
  ix = ix1;
  if (!ix) {
    lab_tensor_release(v);
    return ll_runtime_error(L);
  }
  if (indices_only) {
    lab_tensor_release(v);
    ll_push_tensor(L, ix);
    return 1;
  }
  ll_push_tensor(L, v);
  if (dim < 0) {
    lab_tensor_release(ix);
    return 1;
  }
  ll_push_tensor(L, ix);
  return 2;
}

static int m_max(lua_State *L) {
  if (ll_test_tensor(L, 2)) return binary(L, LAB_MAXIMUM);
  return extreme(L, 1, 0);
}
static int m_min(lua_State *L) {
  if (ll_test_tensor(L, 2)) return binary(L, LAB_MINIMUM);
  return extreme(L, 0, 0);
}
static int m_argmax(lua_State *L) { return extreme(L, 1, 1); }
static int m_argmin(lua_State *L) { return extreme(L, 0, 1); }

static int softmax(lua_State *L, int log) {
  lab_tensor *t = ll_check_tensor(L, 1);
  int dim = lua_isnoneornil(L, 2) ? t->ndim - 1 : ll_check_dim(L, 2, t->ndim, 0, log ? "log_softmax" : "softmax");
  ll_push_tensor(L, lab_ad_softmax(t, dim < 0 ? 0 : dim, log));
  return 1;
}
static int m_softmax(lua_State *L) { return softmax(L, 0); }
static int m_log_softmax(lua_State *L) { return softmax(L, 1); }

/* ---- matmul, split ---- */

int ll_matmul(lua_State *L) {
  ll_push_tensor(L, lab_ad_matmul(ll_check_tensor(L, 1), ll_check_tensor(L, 2)));
  return 1;
}

/* Pushes the pieces of t along dim as a list; with autograd they become narrow()s that
 * record their gradient path. */
static int push_list(lua_State *L, int n, lab_tensor **v, lab_tensor *t, int dim) {
  if (n < 0) return ll_runtime_error(L);
  if (lab_ag_needed(1, &t)) {
    int64_t at = 0;
    for (int i = 0; i < n; i++) {
      int64_t len = v[i]->shape[dim];
      lab_tensor_release(v[i]);
      v[i] = lab_ad_narrow(t, dim, at, len);
      at += len;
    }
  }
  lua_createtable(L, n, 0);
  for (int i = 0; i < n; i++) {
    lab_tensor **box = lua_newuserdatauv(L, sizeof *box, 1); /* 1: attributes (l_tensor.c) */
    *box = v[i];
    luaL_setmetatable(L, LAB_TENSOR_MT);
    lua_rawseti(L, -2, i + 1);
  }
  free(v);
  return 1;
}

/* t:split(size[, dim]) (parts of size elements) / t:chunk(chunks[, dim]) (that many parts) */
static int parts(lua_State *L, const char *op, int by_count) {
  lab_tensor *t = ll_check_tensor(L, 1);
  lua_Integer k = by_count ? ll_check_int(L, 2, op, "chunks") : ll_check_integer(L, 2, op, "size");
  int dim = lua_isnoneornil(L, 3) ? 0 : ll_check_dim(L, 3, t->ndim, 0, op);
  lab_tensor **v = NULL;
  int n = by_count ? lab_chunk(t, (int)k, dim, &v) : lab_split(t, k, dim, &v);
  return push_list(L, n, v, t, dim);
}

static int m_split(lua_State *L) { return parts(L, "split", 0); }
static int m_chunk(lua_State *L) { return parts(L, "chunk", 1); }

/* Collects a Lua list of tensors into an array that is a userdata left on the stack, so an
 * error raised while reading the list or the arguments after it cannot leak it (a malloc'ed
 * array leaked when an element was a closed tensor); references borrowed. */
static lab_tensor **tensor_list(lua_State *L, int idx, int *n, const char *op) {
  if (!lua_istable(L, idx) || ll_test_tensor(L, idx))
    ll_error(L, "%s: expected a list of tensors as argument %d, got %s", op, idx,
             ll_test_tensor(L, idx) ? "a tensor" : luaL_typename(L, idx));
  lua_Unsigned len = lua_rawlen(L, idx);
  if (len > (1u << 20)) ll_error(L, "%s: a list of %llu tensors is too long", op, (unsigned long long)len);
  *n = (int)len;
  lab_tensor **v = lua_newuserdatauv(L, sizeof *v * (size_t)(*n ? *n : 1), 0);
  for (int i = 0; i < *n; i++) {
    lua_rawgeti(L, idx, i + 1);
    lab_tensor **box = luaL_testudata(L, -1, LAB_TENSOR_MT);
    if (box && !*box) ll_error(L, "%s: element %d of the list was already closed", op, i + 1);
    v[i] = ll_test_tensor(L, -1);
    lua_pop(L, 1);
    if (!v[i]) ll_error(L, "%s: element %d of the list is not a tensor", op, i + 1);
  }
  return v;
}

/* cat / stack(list[, dim]): stack's dim may be one past the inputs' (extra = 1) */
static int join(lua_State *L, const char *op, int extra, lab_tensor *(*fn)(int n, lab_tensor **ts, int dim)) {
  int n;
  lua_settop(L, 2); /* (list, dim): the list's array goes above them */
  lab_tensor **v = tensor_list(L, 1, &n, op);
  int dim = 0;
  if (n > 0 && !lua_isnoneornil(L, 2)) dim = ll_to_dim(L, ll_check_integer(L, 2, op, "dim"), v[0]->ndim, extra, op);
  ll_push_tensor(L, fn(n, v, dim));
  return 1;
}

int ll_cat(lua_State *L) { return join(L, "cat", 0, lab_ad_cat); }
int ll_stack(lua_State *L) { return join(L, "stack", 1, lab_ad_stack); }

static int mm_unm(lua_State *L) { return m_neg(L); }

static const luaL_Reg ops[] = {
    {"add", m_add},         {"add_", m_add_},     {"sub", m_sub},           {"sub_", m_sub_},
    {"mul", m_mul},         {"mul_", m_mul_},     {"div", m_div},           {"div_", m_div_},
    {"pow", m_pow},         {"pow_", m_pow_},     {"maximum", m_maximum},   {"maximum_", m_maximum_},
    {"minimum", m_minimum}, {"minimum_", m_minimum_}, {"remainder", m_remainder}, {"remainder_", m_remainder_}, {"floor_divide", m_floor_divide}, {"floor_divide_", m_floor_divide_}, {"eq", m_eq},         {"eq_", m_eq_},
    {"ne", m_ne},           {"ne_", m_ne_},       {"lt", m_lt},             {"lt_", m_lt_},
    {"le", m_le},           {"le_", m_le_},       {"gt", m_gt},             {"gt_", m_gt_},
    {"ge", m_ge},           {"ge_", m_ge_},       {"neg", m_neg},           {"neg_", m_neg_},
    {"abs", m_abs},         {"abs_", m_abs_},     {"exp", m_exp},           {"exp_", m_exp_},
    {"log", m_log},         {"log_", m_log_},     {"sqrt", m_sqrt},         {"sqrt_", m_sqrt_},
    {"rsqrt", m_rsqrt},     {"rsqrt_", m_rsqrt_}, {"tanh", m_tanh},         {"tanh_", m_tanh_},
    {"sigmoid", m_sigmoid}, {"sigmoid_", m_sigmoid_}, {"clamp", m_clamp},   {"clamp_", m_clamp_},
    {"where", m_where},     {"sum", m_sum},       {"mean", m_mean},         {"prod", m_prod},
    {"var", m_var},         {"std", m_std},       {"norm", m_norm},         {"max", m_max},
    {"min", m_min},         {"argmax", m_argmax}, {"argmin", m_argmin},     {"softmax", m_softmax},
    {"log_softmax", m_log_softmax}, {"matmul", ll_matmul}, {"mm", ll_matmul}, {"bmm", ll_matmul},
    {"split", m_split},     {"chunk", m_chunk},   {NULL, NULL}};

/* methods table at -1, metatable at -2 */
void ll_register_tensor_ops(lua_State *L) {
  luaL_setfuncs(L, ops, 0);
  static const luaL_Reg meta[] = {{"__add", m_add}, {"__sub", m_sub}, {"__mul", m_mul},
                                  {"__div", m_div}, {"__pow", m_pow}, {"__mod", m_remainder}, {"__idiv", m_floor_divide}, {"__unm", mm_unm},
                                  {NULL, NULL}};
  lua_pushvalue(L, -2);
  luaL_setfuncs(L, meta, 0);
  lua_pop(L, 1);
}
