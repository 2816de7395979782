/* Creating tensors from Lua: lab.tensor{...} from nested tables, zeros/ones/full/empty,
 * arange, the random fills, and the generator's seed. Sizes come as varargs or one table:
 * lab.zeros(2, 3) == lab.zeros({2, 3}); options last: lab.zeros(2, 3, {dtype='bf16'}).
 * Every factory takes device= ('cpu', 'cuda', 'cuda:1', 'sim'); without it tensors go on the
 * default device (lab.set_default_device), and *_like on the device of their model. */
#include <stdio.h>
#include <string.h>

#include "lab_lua.h"
#include "runtime/lab.h"

/* ---- lab.tensor(nested table) ---- */

typedef struct {
  int ndim;
  int64_t shape[LAB_MAX_DIMS];
  int leaf_depth; /* depth of the numbers, once one is seen; -1 before */
  int all_int, any_bool, any_number;
  int64_t path[LAB_MAX_DIMS + 1]; /* 1-based indices down to the element being measured */
} nested_info;

/* "row 2" at depth 1, "row [2][3]" deeper: where an element sits in the nested table */
static const char *where(const nested_info *info, int depth, int first, char *buf, size_t n) {
  if (depth == 1) {
    snprintf(buf, n, "row %lld", first ? 1LL : (long long)info->path[0]);
    return buf;
  }
  size_t used = (size_t)snprintf(buf, n, "row ");
  for (int d = 0; d < depth && used < n; d++)
    used += (size_t)snprintf(buf + used, n - used, "[%lld]", first ? 1LL : (long long)info->path[d]);
  return buf;
}

/* The shape of a nested table: every list at one depth has the same length, and numbers sit
 * at one depth only. The first list at each depth is the one at [1][1].., so a ragged entry
 * is reported against it. */
static void measure(lua_State *L, int idx, int depth, nested_info *info) {
  char a[160], b[160];
  if (lua_type(L, idx) == LUA_TTABLE && !ll_test_tensor(L, idx)) {
    int64_t n = (int64_t)lua_rawlen(L, idx);
    if (depth >= LAB_MAX_DIMS) ll_error(L, "lab.tensor: nesting deeper than %d dimensions", LAB_MAX_DIMS);
    if (info->leaf_depth >= 0 && depth >= info->leaf_depth)
      ll_error(L, "lab.tensor: ragged table: %s is a list of %lld elements, %s is a number", where(info, depth, 0, a, sizeof a),
               (long long)n, where(info, info->leaf_depth, 1, b, sizeof b));
    if (depth == info->ndim) {
      info->shape[depth] = n;
      info->ndim = depth + 1;
    } else if (info->shape[depth] != n) {
      ll_error(L, "lab.tensor: ragged table: %s has %lld elements, %s has %lld", where(info, depth, 0, a, sizeof a),
               (long long)n, where(info, depth, 1, b, sizeof b), (long long)info->shape[depth]);
    }
    for (int64_t i = 1; i <= n; i++) {
      info->path[depth] = i;
      lua_rawgeti(L, idx, i);
      measure(L, lua_gettop(L), depth + 1, info);
      lua_pop(L, 1);
    }
    return;
  }
  if (lua_type(L, idx) != LUA_TBOOLEAN && lua_type(L, idx) != LUA_TNUMBER)
    ll_error(L, "lab.tensor: %s is a %s (numbers or booleans only)", depth ? where(info, depth, 0, a, sizeof a) : "the value",
             luaL_typename(L, idx));
  if (info->leaf_depth < 0) info->leaf_depth = depth;
  if (depth != info->ndim)
    ll_error(L, "lab.tensor: ragged table: %s is a number, %s is a list of %lld elements", where(info, depth, 0, a, sizeof a),
             where(info, depth, 1, b, sizeof b), (long long)info->shape[depth]);
  if (lua_type(L, idx) == LUA_TBOOLEAN) info->any_bool = 1;
  else {
    info->any_number = 1;
    if (!lua_isinteger(L, idx)) info->all_int = 0;
  }
}

/* The values in row-major order into a host array of int64 (all integers or booleans) or
 * double; the runtime converts to the tensor's dtype. */
static void fill_from(lua_State *L, int idx, int as_int, void *vals, int64_t *at) {
  if (lua_type(L, idx) == LUA_TTABLE) {
    int64_t n = (int64_t)lua_rawlen(L, idx);
    for (int64_t i = 1; i <= n; i++) {
      lua_rawgeti(L, idx, i);
      fill_from(L, lua_gettop(L), as_int, vals, at);
      lua_pop(L, 1);
    }
    return;
  }
  int64_t i = (*at)++;
  if (lua_type(L, idx) == LUA_TBOOLEAN) {
    if (as_int) ((int64_t *)vals)[i] = lua_toboolean(L, idx);
    else ((double *)vals)[i] = lua_toboolean(L, idx);
  } else if (as_int) {
    ((int64_t *)vals)[i] = lua_tointeger(L, idx);
  } else {
    ((double *)vals)[i] = lua_tonumber(L, idx);
  }
}

static int l_tensor(lua_State *L) {
  int opts = lua_gettop(L) >= 2 ? 2 : 0;
  lab_tensor *src = ll_test_tensor(L, 1);
  if (src) { /* lab.tensor(t): a copy, as torch.tensor does */
    lab_device dev = ll_opt_device(L, opts, lab_device_of(src));
    lab_tensor *c = lab_to_dtype(src, ll_opt_dtype(L, opts, src->dtype));
    if (c == src) {
      lab_tensor_release(c);
      c = lab_clone(src);
    }
    lab_tensor *d = c ? lab_to_device(c, dev) : NULL;
    lab_tensor_release(c);
    ll_push_tensor(L, d);
    return 1;
  }
  nested_info info = {.all_int = 1, .leaf_depth = -1};
  if (lua_type(L, 1) != LUA_TNUMBER && lua_type(L, 1) != LUA_TBOOLEAN) luaL_checktype(L, 1, LUA_TTABLE);
  measure(L, 1, 0, &info);
  lab_dtype def = info.any_bool && !info.any_number ? LAB_BOOL : (info.all_int && info.any_number ? LAB_I64 : LAB_F32);
  lab_dtype dt = ll_opt_dtype(L, opts, def);
  int64_t n = 1;
  for (int d = 0; d < info.ndim; d++) n *= info.shape[d];
  int as_int = info.all_int;
  void *vals = lua_newuserdatauv(L, (size_t)(n ? n : 1) * 8, 0); /* collected with the call */
  int64_t at = 0;
  fill_from(L, 1, as_int, vals, &at);
  lab_tensor *h = lab_tensor_from_host(lab_cpu(), as_int ? LAB_I64 : LAB_F64, info.ndim, info.shape, vals);
  lab_tensor *t = h ? lab_to_dtype(h, dt) : NULL;
  lab_tensor_release(h);
  lab_tensor *d = t ? lab_to_device(t, ll_opt_device(L, opts, lab_default_device())) : NULL;
  lab_tensor_release(t);
  ll_push_tensor(L, d);
  return 1;
}

/* ---- filled tensors ---- */

/* The size, the dtype and the device of a factory call. */
static int shape_and_dtype(lua_State *L, int first, int64_t *shape, lab_dtype *dt, lab_device *dev, lab_dtype def,
                           const char *op) {
  int n = ll_read_shape(L, first, shape, op);
  int opts = ll_options_index(L);
  *dt = ll_opt_dtype(L, opts, def);
  *dev = ll_opt_device(L, opts, lab_default_device());
  ll_check_rc(L, lab_check_size(op, n, shape, lab_dtype_size(*dt), NULL)); /* names the factory */
  return n;
}

/* what zeros, ones, empty and their _like forms fill a new tensor with */
typedef enum { FILL_ZEROS, FILL_ONES, FILL_NONE } fill_kind;

static lab_tensor *new_filled(lab_device dev, lab_dtype dt, int n, const int64_t *s, fill_kind fill) {
  return fill == FILL_ZEROS ? lab_tensor_zeros_on(dev, dt, n, s)
         : fill == FILL_ONES ? lab_tensor_full_on(dev, dt, n, s, 1)
                             : lab_tensor_empty_on(dev, dt, n, s);
}

/* zeros / ones / empty(size...[, {dtype=, device=}]) */
static int factory(lua_State *L, const char *op, fill_kind fill) {
  int64_t s[LAB_MAX_DIMS];
  lab_dtype dt;
  lab_device dev;
  int n = shape_and_dtype(L, 1, s, &dt, &dev, LAB_F32, op);
  ll_push_tensor(L, new_filled(dev, dt, n, s, fill));
  return 1;
}
static int l_zeros(lua_State *L) { return factory(L, "zeros", FILL_ZEROS); }
static int l_ones(lua_State *L) { return factory(L, "ones", FILL_ONES); }
static int l_empty(lua_State *L) { return factory(L, "empty", FILL_NONE); }

/* full(size..., value[, opts]) / full({size}, value[, opts]) */
static int l_full(lua_State *L) {
  int64_t s[LAB_MAX_DIMS];
  int opts = ll_options_index(L);
  int last = opts ? opts - 1 : lua_gettop(L);
  double v = luaL_checknumber(L, last);
  lab_dtype def = lua_isinteger(L, last) ? LAB_I64 : LAB_F32;
  lua_pushnil(L);
  lua_replace(L, last); /* so the size list stops before the value */
  int n = ll_read_shape(L, 1, s, "full");
  lab_dtype dt = ll_opt_dtype(L, opts, def);
  ll_check_rc(L, lab_check_size("full", n, s, lab_dtype_size(dt), NULL));
  ll_push_tensor(L, lab_tensor_full_on(ll_opt_device(L, opts, lab_default_device()), dt, n, s, v));
  return 1;
}

/* arange(end) / arange(start, end[, step]) with 1-based counting left to the user */
static int l_arange(lua_State *L) {
  int opts = ll_options_index(L);
  int nargs = opts ? opts - 1 : lua_gettop(L);
  double start = 0, end, step = 1;
  int all_int = 1;
  for (int i = 1; i <= nargs; i++) all_int = all_int && lua_isinteger(L, i);
  if (nargs == 1) end = luaL_checknumber(L, 1);
  else {
    start = luaL_checknumber(L, 1);
    end = luaL_checknumber(L, 2);
    if (nargs >= 3) step = luaL_checknumber(L, 3);
  }
  lab_dtype dt = ll_opt_dtype(L, opts, all_int ? LAB_I64 : LAB_F32);
  lab_device dev = ll_opt_device(L, opts, lab_default_device());
  lab_tensor *h = lab_tensor_arange(dt, start, end, step); /* made on the host, then moved */
  lab_tensor *t = h ? lab_to_device(h, dev) : NULL;
  lab_tensor_release(h);
  ll_push_tensor(L, t);
  return 1;
}

/* zeros_like / ones_like / empty_like(o[, {dtype=, device=}]): o's shape, and o's dtype and
 * device unless the options say otherwise */
static int like(lua_State *L, fill_kind fill) {
  lab_tensor *o = ll_check_tensor(L, 1);
  lab_dtype dt = ll_opt_dtype(L, 2, o->dtype);
  lab_device dev = ll_opt_device(L, 2, lab_device_of(o));
  ll_push_tensor(L, new_filled(dev, dt, o->ndim, o->shape, fill));
  return 1;
}
static int l_zeros_like(lua_State *L) { return like(L, FILL_ZEROS); }
static int l_ones_like(lua_State *L) { return like(L, FILL_ONES); }
static int l_empty_like(lua_State *L) { return like(L, FILL_NONE); }

/* ---- random ---- */

/* rand / randn(size...[, opts]): the new tensor, pushed, for the caller to fill */
static lab_tensor *push_sized(lua_State *L, const char *op) {
  factory(L, op, FILL_NONE);
  return ll_check_tensor(L, -1);
}

static int l_rand(lua_State *L) {
  ll_check_rc(L, lab_rand_(push_sized(L, "rand"), 0, 1));
  return 1;
}

static int l_randn(lua_State *L) {
  lab_tensor *t = push_sized(L, "randn");
  int opts = ll_options_index(L);
  ll_check_rc(L, lab_randn_(t, ll_opt_number(L, opts, "mean", 0), ll_opt_number(L, opts, "std", 1)));
  return 1;
}

/* randint(low, high, size...) or randint(high, {size}); values in [low, high) */
static int l_randint(lua_State *L) {
  lua_Integer lo = 0, hi;
  int first;
  if (lua_istable(L, 2)) {
    hi = luaL_checkinteger(L, 1);
    first = 2;
  } else {
    lo = luaL_checkinteger(L, 1);
    hi = luaL_checkinteger(L, 2);
    first = 3;
  }
  int64_t s[LAB_MAX_DIMS];
  lab_dtype dt;
  lab_device dev;
  int n = shape_and_dtype(L, first, s, &dt, &dev, LAB_I64, "randint");
  lab_tensor *t = lab_tensor_empty_on(dev, dt, n, s);
  if (!t) return ll_runtime_error(L);
  ll_push_tensor(L, t);
  ll_check_rc(L, lab_randint_(t, lo, hi));
  return 1;
}

static int m_uniform_(lua_State *L) {
  lab_tensor *t = ll_check_tensor(L, 1);
  ll_check_rc(L, lab_rand_(t, luaL_optnumber(L, 2, 0), luaL_optnumber(L, 3, 1)));
  lua_settop(L, 1);
  return 1;
}

static int m_normal_(lua_State *L) {
  lab_tensor *t = ll_check_tensor(L, 1);
  ll_check_rc(L, lab_randn_(t, luaL_optnumber(L, 2, 0), luaL_optnumber(L, 3, 1)));
  lua_settop(L, 1);
  return 1;
}

/* lab.use_deterministic_algorithms(on) and lab.are_deterministic_algorithms_enabled(), as in
 * PyTorch: with it on, the FlashAttention backward sums dq in a fixed order (no atomics) */
static int l_use_deterministic(lua_State *L) {
  luaL_checktype(L, 1, LUA_TBOOLEAN);
  lab_use_deterministic_algorithms(lua_toboolean(L, 1));
  return 0;
}
static int l_manual_seed(lua_State *L) {
  lab_manual_seed((uint64_t)luaL_checkinteger(L, 1));
  return 0;
}

/* A different stream on every rank from one seed (data order, dropout on DP ranks). The
 * rank is mixed in with a 64-bit odd constant so seeds s and s+1 never collide across ranks. */
static int l_seed_per_rank(lua_State *L) {
  uint64_t s = (uint64_t)luaL_checkinteger(L, 1);
  uint64_t r = (uint64_t)(lua_isnoneornil(L, 2) ? lab_ctl_rank() : luaL_checkinteger(L, 2));
  lab_manual_seed(s ^ ((r + 1) * 0x9E3779B97F4A7C15ull));
  return 0;
}

static int l_get_rng_state(lua_State *L) {
  uint64_t seed, offset;
  lab_rng_get_state(&seed, &offset);
  lua_createtable(L, 0, 2);
  lua_pushinteger(L, (lua_Integer)seed);
  lua_setfield(L, -2, "seed");
  lua_pushinteger(L, (lua_Integer)offset);
  lua_setfield(L, -2, "offset");
  return 1;
}

static int l_set_rng_state(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_getfield(L, 1, "seed");
  lua_getfield(L, 1, "offset");
  lab_rng_set_state((uint64_t)luaL_checkinteger(L, -2), (uint64_t)luaL_checkinteger(L, -1));
  return 0;
}

int ll_where(lua_State *L);
int ll_matmul(lua_State *L);
int ll_cat(lua_State *L);
int ll_stack(lua_State *L);

static const luaL_Reg creation[] = {
    {"randint", l_randint},
    {"use_deterministic_algorithms", l_use_deterministic},
    {"manual_seed", l_manual_seed}, {"seed_per_rank", l_seed_per_rank},
    {"get_rng_state", l_get_rng_state}, {"set_rng_state", l_set_rng_state},
    {"where", ll_where},        {"matmul", ll_matmul},      {"cat", ll_cat},
    {"stack", ll_stack},        {NULL, NULL}};

/* Factories take {requires_grad = true} as torch's do: lab.randn(3, 4, {requires_grad = true}).
 * Each factory in this list is registered inside this closure, which runs it and then reads
 * the option table (the last argument, after at least one other: a lone table is the data
 * or the shape). Upvalues: the factory, its name. */
static int with_requires_grad(lua_State *L) {
  int n = lua_gettop(L);
  int opts = (n >= 2 && lua_istable(L, n)) ? n : 0;
  int nret = lua_tocfunction(L, lua_upvalueindex(1))(L);
  if (opts && ll_opt_bool(L, opts, "requires_grad", 0)) {
    lab_tensor *t = ll_check_tensor(L, -1);
    if (!lab_dtype_is_float(t->dtype))
      return ll_error(L, "%s: requires_grad needs a floating dtype, not %s", lua_tostring(L, lua_upvalueindex(2)),
                      lab_dtype_name(t->dtype));
    ll_check_rc(L, lab_set_requires_grad(t, 1));
  }
  return nret;
}

static const luaL_Reg factories[] = {
    {"tensor", l_tensor},         {"zeros", l_zeros},         {"ones", l_ones},
    {"empty", l_empty},           {"full", l_full},           {"arange", l_arange},
    {"zeros_like", l_zeros_like}, {"ones_like", l_ones_like}, {"empty_like", l_empty_like},
    {"rand", l_rand},             {"randn", l_randn},         {NULL, NULL}};

void ll_register_creation(lua_State *L) {
  static const ll_cbind flags[] = {
      {"are_deterministic_algorithms_enabled", LL_CB_BOOL, {.get_int = lab_deterministic_algorithms}},
      {NULL, 0, {NULL}}};
  luaL_setfuncs(L, creation, 0);
  ll_set_cbinds(L, flags);
  for (const luaL_Reg *f = factories; f->name; f++) {
    lua_pushcfunction(L, f->func);
    lua_pushstring(L, f->name);
    lua_pushcclosure(L, with_requires_grad, 2);
    lua_setfield(L, -2, f->name);
  }
  /* the in-place random fills are tensor methods */
  static const luaL_Reg methods[] = {{"uniform_", m_uniform_}, {"normal_", m_normal_}, {NULL, NULL}};
  ll_add_tensor_methods(L, methods);
}
