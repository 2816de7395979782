/* The tensor userdata: lifetime (__gc, __close), indexing (t[i] selects along dim 1, as in
 * Torch7), properties (shape, dtype, ndim), printing, views and copies. Math methods are
 * in l_tensor_ops.c. */
#include <stdlib.h>
#include <string.h>

#include "lab_lua.h"
#include "runtime/lab.h"

static lab_tensor **check_box(lua_State *L, int idx) { return luaL_checkudata(L, idx, LAB_TENSOR_MT); }

static int t_gc(lua_State *L) {
  lab_tensor **box = check_box(L, 1);
  lab_tensor_release(*box);
  *box = NULL;
  return 0;
}

static int t_tostring(lua_State *L) {
  lab_tensor **box = check_box(L, 1);
  if (!*box) {
    lua_pushliteral(L, "tensor(<closed>)");
    return 1;
  }
  if (!(*box)->storage->data && (*box)->storage->nbytes > 0) {
    char shape[128];
    lua_pushfstring(L, "tensor(<sharded: not gathered>, shape=%s, dtype=%s)", lab_shape_str(*box, shape, sizeof shape),
                    lab_dtype_name((*box)->dtype));
    return 1;
  }
  char *s = lab_format(*box);
  if (!s) return ll_runtime_error(L); /* the copy to the host failed (a bad id raised there, say), or no memory */
  lua_pushstring(L, s);
  free(s);
  return 1;
}

static void push_shape(lua_State *L, const lab_tensor *t) {
  lua_createtable(L, t->ndim, 0);
  for (int i = 0; i < t->ndim; i++) {
    lua_pushinteger(L, t->shape[i]);
    lua_rawseti(L, -2, i + 1);
  }
}

/* A Lua value for the single element of t (read through its device): integers stay
 * integers, bools booleans. */
static void push_item(lua_State *L, lab_tensor *t) {
  if (lab_dtype_is_float(t->dtype)) {
    double v;
    ll_check_rc(L, lab_item_f64(t, &v));
    lua_pushnumber(L, v);
    return;
  }
  int64_t v;
  ll_check_rc(L, lab_item_i64(t, &v));
  if (t->dtype == LAB_BOOL) lua_pushboolean(L, v != 0);
  else lua_pushinteger(L, v);
}

static int t_len(lua_State *L) {
  lab_tensor *t = ll_check_tensor(L, 1);
  if (t->ndim == 0) return ll_error(L, "len: a 0-d tensor has no length");
  lua_pushinteger(L, t->shape[0]);
  return 1;
}

/* a 1-based index (negative from the end) to 0-based; the error names the index as given */
static int64_t check_index(lua_State *L, lab_tensor *t, lua_Integer given, int dim, const char *op) {
  int64_t n = t->shape[dim];
  lua_Integer i = given < 0 ? given + n + 1 : given; /* n <= 2^48: no overflow */
  if (i < 1 || i > n)
    ll_error(L, "%s: index %lld out of range for dim %d of size %lld (use 1..%lld or -%lld..-1)", op,
             (long long)given, dim + 1, (long long)n, (long long)n, (long long)n);
  return i - 1;
}

static int t_index(lua_State *L) {
  lab_tensor *t = ll_check_tensor_meta(L, 1);
  if (lua_type(L, 2) == LUA_TNUMBER) t = ll_check_tensor(L, 1);
  if (lua_type(L, 2) == LUA_TNUMBER) {
    if (t->ndim == 0) return ll_error(L, "index: a 0-d tensor cannot be indexed (use :item())");
    int64_t i = check_index(L, t, luaL_checkinteger(L, 2), 0, "index");
    if (t->ndim == 1) {
      lab_tensor *e = lab_select(t, 0, i);
      if (!e) return ll_runtime_error(L);
      lab_tensor *h = lab_to_host(e); /* so that an error below cannot leak e */
      lab_tensor_release(e);
      if (!h) return ll_runtime_error(L);
      double f = 0;
      int64_t n = 0;
      int rc = lab_dtype_is_float(h->dtype) ? lab_item_f64(h, &f) : lab_item_i64(h, &n);
      lab_dtype dt = h->dtype;
      lab_tensor_release(h);
      ll_check_rc(L, rc);
      if (lab_dtype_is_float(dt)) lua_pushnumber(L, f);
      else if (dt == LAB_BOOL) lua_pushboolean(L, n != 0);
      else lua_pushinteger(L, n);
      return 1;
    }
    ll_push_tensor(L, lab_ad_select(t, 0, i));
    return 1;
  }
  const char *k = luaL_checkstring(L, 2);
  if (strcmp(k, "shape") == 0) {
    push_shape(L, t);
    return 1;
  }
  if (strcmp(k, "dtype") == 0) {
    lua_pushstring(L, lab_dtype_name(t->dtype));
    return 1;
  }
  if (strcmp(k, "ndim") == 0) {
    lua_pushinteger(L, t->ndim);
    return 1;
  }
  if (strcmp(k, "device") == 0) {
    char name[32];
    lua_pushstring(L, lab_device_str(lab_device_of(t), name, sizeof name));
    return 1;
  }
  if (ll_autograd_property(L, t, k)) return 1;
  lua_getmetatable(L, 1);
  lua_getfield(L, -1, "methods");
  if (lua_getfield(L, -1, k) != LUA_TNIL) return 1;
  /* an attribute set on this value (p.sequence_parallel), or nil */
  if (lua_getiuservalue(L, 1, 1) != LUA_TTABLE) {
    lua_pushnil(L);
    return 1;
  }
  lua_getfield(L, -1, k);
  return 1;
}

/* Attributes: a string field that is not a property or method (p.sequence_parallel = true)
 * is kept in a table that belongs to this userdata, as Megatron-LM sets attributes on a
 * torch parameter. A module's parameter is one Lua value held by the module, optimizers and
 * wrappers alike, so its marks travel with it; another push of the same tensor (a hook's
 * argument) is another value without them. */
static int set_attribute(lua_State *L, const char *k) {
  static const char *const builtin[] = {"shape", "dtype", "ndim", "device", "grad_fn", "is_leaf", NULL};
  for (int i = 0; builtin[i]; i++)
    if (strcmp(k, builtin[i]) == 0) return ll_error(L, "cannot set field '%s' of a tensor: it is read-only", k);
  lua_getmetatable(L, 1);
  lua_getfield(L, -1, "methods");
  if (lua_getfield(L, -1, k) != LUA_TNIL)
    return ll_error(L, "cannot set field '%s' of a tensor: it is a method", k);
  lua_pop(L, 3);
  if (lua_getiuservalue(L, 1, 1) != LUA_TTABLE) {
    lua_pop(L, 1);
    if (lua_isnil(L, 3)) return 0;
    lua_newtable(L);
    lua_pushvalue(L, -1);
    if (!lua_setiuservalue(L, 1, 1))
      return ll_error(L, "cannot set field '%s' of this tensor", k);
  }
  lua_pushvalue(L, 3);
  lua_setfield(L, -2, k);
  lua_pop(L, 1);
  return 0;
}

static int t_newindex(lua_State *L) {
  lab_tensor *t = ll_check_tensor_meta(L, 1);
  if (lua_type(L, 2) == LUA_TSTRING && ll_autograd_set_property(L, t, lua_tostring(L, 2), 3)) return 0;
  if (lua_type(L, 2) == LUA_TSTRING) return set_attribute(L, lua_tostring(L, 2));
  t = ll_check_tensor(L, 1);
  if (lua_type(L, 2) != LUA_TNUMBER) return ll_error(L, "cannot set field '%s' of a tensor", luaL_tolstring(L, 2, NULL));
  if (t->ndim == 0) return ll_error(L, "index: a 0-d tensor cannot be indexed (use :fill_())");
  int64_t i = check_index(L, t, luaL_checkinteger(L, 2), 0, "index assignment");
  ll_check_inplace(L, t, "index assignment");
  /* every check that can raise comes before the row view exists: an error's longjmp would
   * skip its release and leak the view and, through it, the target's storage (API fuzzer,
   * LSan: x[1] = a closed tensor) */
  lab_tensor *src = ll_test_tensor(L, 3);
  int is_int = !src && lua_isinteger(L, 3) && !lab_dtype_is_float(t->dtype);
  if (!src && !is_int && lua_type(L, 3) != LUA_TNUMBER && lua_type(L, 3) != LUA_TBOOLEAN)
    return ll_error(L, "index: can only assign a number or a tensor, got %s", luaL_typename(L, 3));
  lab_tensor *row = lab_select(t, 0, i);
  if (!row) return ll_runtime_error(L);
  int rc;
  if (src) rc = lab_copy_(row, src);
  else if (is_int) {
    int64_t v = lua_tointeger(L, 3);
    lab_tensor *s = lab_tensor_from_host(lab_cpu(), LAB_I64, 0, NULL, &v);
    rc = s ? lab_copy_(row, s) : -1;
    lab_tensor_release(s);
  } else {
    rc = lab_fill_(row, lua_type(L, 3) == LUA_TBOOLEAN ? lua_toboolean(L, 3) : lua_tonumber(L, 3));
  }
  lab_tensor_release(row);
  ll_check_rc(L, rc);
  return 0;
}

/* ---- information ---- */

static int m_size(lua_State *L) {
  lab_tensor *t = ll_check_tensor_meta(L, 1);
  if (lua_isnoneornil(L, 2)) {
    push_shape(L, t);
    return 1;
  }
  lua_pushinteger(L, t->shape[ll_check_dim(L, 2, t->ndim, 0, "size")]);
  return 1;
}

static int m_stride(lua_State *L) {
  lab_tensor *t = ll_check_tensor_meta(L, 1);
  if (!lua_isnoneornil(L, 2)) {
    lua_pushinteger(L, t->stride[ll_check_dim(L, 2, t->ndim, 0, "stride")]);
    return 1;
  }
  lua_createtable(L, t->ndim, 0);
  for (int i = 0; i < t->ndim; i++) {
    lua_pushinteger(L, t->stride[i]);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

static int m_dim(lua_State *L) {
  lua_pushinteger(L, ll_check_tensor_meta(L, 1)->ndim);
  return 1;
}

static int m_numel(lua_State *L) {
  lua_pushinteger(L, lab_numel(ll_check_tensor_meta(L, 1)));
  return 1;
}

static int m_nbytes(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)lab_nbytes(ll_check_tensor_meta(L, 1)));
  return 1;
}

static int m_element_size(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)lab_dtype_size(ll_check_tensor_meta(L, 1)->dtype));
  return 1;
}

/* t:checksum(): an integer that changes whenever any bit of t's values does (runtime/checksum.h):
 * lab.replicas compares it across ranks instead of the values */
static int m_checksum(lua_State *L) {
  uint64_t h = 0;
  ll_check_rc(L, lab_checksum(ll_check_tensor(L, 1), &h));
  lua_pushinteger(L, (lua_Integer)h);
  return 1;
}

static int m_is_contiguous(lua_State *L) {
  lua_pushboolean(L, lab_is_contiguous(ll_check_tensor_meta(L, 1)));
  return 1;
}

static int m_close(lua_State *L) { return t_gc(L); }

/* same storage and layout: a view of the same memory */
static int m_data_ptr(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)(intptr_t)lab_data(ll_check_tensor(L, 1)));
  return 1;
}

static int m_item(lua_State *L) {
  lab_tensor *t = ll_check_tensor(L, 1);
  if (lab_numel(t) != 1) {
    char s[128];
    return ll_error(L, "item: tensor of shape %s has %lld elements, item() needs exactly one",
                    lab_shape_str(t, s, sizeof s), (long long)lab_numel(t));
  }
  push_item(L, t);
  return 1;
}

/* Nested tables from a host array of f64 or i64 values in row-major order. */
static void push_list(lua_State *L, const lab_tensor *t, int dim, const void *vals, int64_t *at, int as_float,
                      int as_bool) {
  if (dim == t->ndim) {
    int64_t i = (*at)++;
    if (as_float) lua_pushnumber(L, ((const double *)vals)[i]);
    else if (as_bool) lua_pushboolean(L, ((const int64_t *)vals)[i] != 0);
    else lua_pushinteger(L, ((const int64_t *)vals)[i]);
    return;
  }
  lua_createtable(L, (int)t->shape[dim], 0);
  for (int64_t i = 0; i < t->shape[dim]; i++) {
    push_list(L, t, dim + 1, vals, at, as_float, as_bool);
    lua_rawseti(L, -2, i + 1);
  }
}

static int m_tolist(lua_State *L) {
  lab_tensor *t = ll_check_tensor(L, 1);
  luaL_checkstack(L, t->ndim + 4, "tolist");
  int as_float = lab_dtype_is_float(t->dtype);
  /* widened on the tensor's device, then read in one copy */
  lab_tensor *w = lab_to_dtype(t, as_float ? LAB_F64 : LAB_I64);
  void *vals = w ? lua_newuserdatauv(L, lab_nbytes(w) ? lab_nbytes(w) : 1, 0) : NULL;
  int rc = w ? lab_copy_to_host(w, vals) : -1;
  lab_tensor_release(w);
  ll_check_rc(L, rc);
  int64_t at = 0;
  push_list(L, t, 0, vals, &at, as_float, t->dtype == LAB_BOOL);
  return 1;
}

/* ---- views ---- */

/* view, reshape, expand: to the sizes given (t:op(size...) or t:op({size})), or to another
 * tensor's shape (the _as forms) */
typedef lab_tensor *(*to_shape_fn)(lab_tensor *t, int ndim, const int64_t *shape);

static int to_sizes(lua_State *L, const char *op, to_shape_fn fn) {
  lab_tensor *t = ll_check_tensor(L, 1);
  int64_t shape[LAB_MAX_DIMS];
  int n = ll_read_shape(L, 2, shape, op);
  ll_push_tensor(L, fn(t, n, shape));
  return 1;
}

static int to_shape_of(lua_State *L, to_shape_fn fn) {
  lab_tensor *t = ll_check_tensor(L, 1), *o = ll_check_tensor(L, 2);
  ll_push_tensor(L, fn(t, o->ndim, o->shape));
  return 1;
}

static int m_view(lua_State *L) { return to_sizes(L, "view", lab_ad_view); }
static int m_reshape(lua_State *L) { return to_sizes(L, "reshape", lab_ad_reshape); }
static int m_view_as(lua_State *L) { return to_shape_of(L, lab_ad_view); }

static int m_flatten(lua_State *L) {
  lab_tensor *t = ll_check_tensor(L, 1);
  int64_t n = -1;
  ll_push_tensor(L, lab_ad_reshape(t, 1, &n));
  return 1;
}

static int m_transpose(lua_State *L) {
  lab_tensor *t = ll_check_tensor(L, 1);
  int a = ll_check_dim(L, 2, t->ndim, 0, "transpose"), b = ll_check_dim(L, 3, t->ndim, 0, "transpose");
  ll_push_tensor(L, lab_ad_transpose(t, a, b));
  return 1;
}

static int m_t(lua_State *L) {
  lab_tensor *t = ll_check_tensor(L, 1);
  if (t->ndim > 2) return ll_error(L, "t: expects a tensor of at most 2 dimensions, got %d (use transpose)", t->ndim);
  if (t->ndim < 2) {
    lab_tensor_retain(t);
    ll_push_tensor(L, t);
    return 1;
  }
  ll_push_tensor(L, lab_ad_transpose(t, 0, 1));
  return 1;
}

static int m_permute(lua_State *L) {
  lab_tensor *t = ll_check_tensor(L, 1);
  int64_t d[LAB_MAX_DIMS];
  int n = ll_read_shape(L, 2, d, "permute");
  if (n != t->ndim) return ll_error(L, "permute: %d dims given for a tensor of %d dimensions", n, t->ndim);
  int dims[LAB_MAX_DIMS];
  for (int i = 0; i < n; i++) dims[i] = ll_to_dim(L, d[i], t->ndim, 0, "permute");
  ll_push_tensor(L, lab_ad_permute(t, dims));
  return 1;
}

static int m_narrow(lua_State *L) {
  lab_tensor *t = ll_check_tensor(L, 1);
  int d = ll_check_dim(L, 2, t->ndim, 0, "narrow");
  lua_Integer given = luaL_checkinteger(L, 3), len = luaL_checkinteger(L, 4);
  int64_t n = t->shape[d];
  lua_Integer start = given < 0 ? given + n + 1 : given; /* n <= 2^48: no overflow */
  /* start may be one past the end for an empty slice, as in PyTorch; no start + len (wraps) */
  if (start < 1 || start > n + 1 || len < 0 || len > n - (start - 1))
    return ll_error(L, "narrow: start %lld with length %lld does not fit dim %d of size %lld", (long long)given,
                    (long long)len, d + 1, (long long)n);
  ll_push_tensor(L, lab_ad_narrow(t, d, start - 1, len));
  return 1;
}

/* slice(dim, first, last): Lua-style inclusive range, negatives from the end */
static int m_slice(lua_State *L) {
  lab_tensor *t = ll_check_tensor(L, 1);
  int d = ll_check_dim(L, 2, t->ndim, 0, "slice");
  int64_t n = t->shape[d];
  lua_Integer first0 = luaL_optinteger(L, 3, 1), last0 = luaL_optinteger(L, 4, n);
  lua_Integer first = first0 < 0 ? first0 + n + 1 : first0, last = last0 < 0 ? last0 + n + 1 : last0;
  if (first < 1 || last > n || last < first - 1)
    return ll_error(L, "slice: range %lld..%lld is outside dim %d of size %lld", (long long)first0,
                    (long long)last0, d + 1, (long long)n);
  ll_push_tensor(L, lab_ad_narrow(t, d, first - 1, last - first + 1));
  return 1;
}

static int m_select(lua_State *L) {
  lab_tensor *t = ll_check_tensor(L, 1);
  int d = ll_check_dim(L, 2, t->ndim, 0, "select");
  int64_t i = check_index(L, t, luaL_checkinteger(L, 3), d, "select");
  ll_push_tensor(L, lab_ad_select(t, d, i));
  return 1;
}

static int m_expand(lua_State *L) { return to_sizes(L, "expand", lab_ad_expand); }
static int m_expand_as(lua_State *L) { return to_shape_of(L, lab_ad_expand); }

static int m_unsqueeze(lua_State *L) {
  lab_tensor *t = ll_check_tensor(L, 1);
  ll_push_tensor(L, lab_ad_unsqueeze(t, ll_check_dim(L, 2, t->ndim, 1, "unsqueeze")));
  return 1;
}

static int m_squeeze(lua_State *L) {
  lab_tensor *t = ll_check_tensor(L, 1);
  int d = lua_isnoneornil(L, 2) ? -1 : ll_check_dim(L, 2, t->ndim, 0, "squeeze");
  ll_push_tensor(L, lab_ad_squeeze(t, d));
  return 1;
}

static int m_contiguous(lua_State *L) { return ll_push_unary(L, lab_ad_contiguous); }

/* ---- copies ---- */

static int m_copy_(lua_State *L) {
  lab_tensor *t = ll_check_tensor(L, 1), *s = ll_check_tensor(L, 2);
  ll_check_inplace(L, t, "copy_");
  ll_check_rc(L, lab_copy_(t, s));
  lua_settop(L, 1);
  return 1;
}

static int m_clone(lua_State *L) { return ll_push_unary(L, lab_ad_clone); }

/* t:to(dtype), t:to(device), t:to(device, dtype), t:to(other) (its device and dtype),
 * t:to{device=, dtype=}: t itself when nothing changes; differentiable both ways. */
static int m_to(lua_State *L) {
  lab_tensor *t = ll_check_tensor(L, 1);
  lab_device dev = lab_device_of(t);
  lab_dtype dt = t->dtype;
  for (int i = 2; i <= lua_gettop(L); i++) {
    lab_tensor *o = ll_test_tensor(L, i);
    if (o) {
      dev = lab_device_of(o);
      dt = o->dtype;
    } else if (lua_type(L, i) == LUA_TSTRING) {
      const char *name = lua_tostring(L, i);
      int d = lab_dtype_from_name(name);
      if (d >= 0) dt = (lab_dtype)d;
      else if (lab_device_parse("to", name, &dev) < 0 && strncmp(lab_last_error(), "to: unknown device", 18) == 0)
        return ll_error(L, "to: unknown dtype or device '%s' (dtypes f32, f64, bf16, f16, i32, i64, bool; devices "
                        "cpu, cuda, cuda:N, sim)", name);
      else ll_check_device(L, i, "to");
    } else if (lua_istable(L, i)) {
      dt = ll_opt_dtype(L, i, dt);
      dev = ll_opt_device(L, i, dev);
    } else if (!lua_isnil(L, i)) {
      return ll_error(L, "to: expected a dtype, a device, a tensor or {device=, dtype=}, got %s", luaL_typename(L, i));
    }
  }
  lab_tensor *c = lab_ad_to_dtype(t, dt);
  if (!c) return ll_runtime_error(L);
  lab_tensor *m = lab_ad_to_device(c, dev);
  lab_tensor_release(c);
  ll_push_tensor(L, m);
  return 1;
}

#define TO_TYPE(NAME, DT)                                                                      \
  static int NAME(lua_State *L) {                                                              \
    ll_push_tensor(L, lab_ad_to_dtype(ll_check_tensor(L, 1), DT));                                \
    return 1;                                                                                  \
  }
TO_TYPE(m_float, LAB_F32)
TO_TYPE(m_double, LAB_F64)
TO_TYPE(m_long, LAB_I64)
TO_TYPE(m_int, LAB_I32)
TO_TYPE(m_bfloat16, LAB_BF16)
TO_TYPE(m_half, LAB_F16)
TO_TYPE(m_bool, LAB_BOOL)

static int m_fill_(lua_State *L) {
  lab_tensor *t = ll_check_tensor(L, 1);
  ll_check_inplace(L, t, "fill_");
  ll_check_rc(L, lab_fill_(t, lua_type(L, 2) == LUA_TBOOLEAN ? lua_toboolean(L, 2) : luaL_checknumber(L, 2)));
  lua_settop(L, 1);
  return 1;
}

static int m_zero_(lua_State *L) {
  ll_check_inplace(L, ll_check_tensor(L, 1), "zero_");
  ll_check_rc(L, lab_fill_(ll_check_tensor(L, 1), 0));
  lua_settop(L, 1);
  return 1;
}

static const luaL_Reg methods[] = {
    {"size", m_size},           {"stride", m_stride},       {"dim", m_dim},
    {"numel", m_numel},         {"nbytes", m_nbytes},       {"element_size", m_element_size},
    {"checksum", m_checksum},
    {"is_contiguous", m_is_contiguous}, {"close", m_close}, {"data_ptr", m_data_ptr},
    {"item", m_item},           {"tolist", m_tolist},       {"view", m_view},
    {"reshape", m_reshape},     {"view_as", m_view_as},     {"flatten", m_flatten},
    {"transpose", m_transpose}, {"t", m_t},                 {"permute", m_permute},
    {"narrow", m_narrow},       {"slice", m_slice},         {"select", m_select},
    {"expand", m_expand},       {"expand_as", m_expand_as}, {"unsqueeze", m_unsqueeze},
    {"squeeze", m_squeeze},     {"contiguous", m_contiguous}, {"copy_", m_copy_},
    {"clone", m_clone},         {"to", m_to},               {"float", m_float},
    {"double", m_double},       {"long", m_long},           {"int", m_int},
    {"bfloat16", m_bfloat16},   {"half", m_half},           {"bool", m_bool},
    {"fill_", m_fill_},         {"zero_", m_zero_},         {NULL, NULL}};

void ll_register_tensor(lua_State *L) {
  static const luaL_Reg meta[] = {{"__gc", t_gc},         {"__close", t_gc},       {"__tostring", t_tostring},
                                  {"__index", t_index},   {"__newindex", t_newindex}, {"__len", t_len},
                                  {NULL, NULL}};
  luaL_newmetatable(L, LAB_TENSOR_MT);
  luaL_setfuncs(L, meta, 0);
  lua_pushliteral(L, "Tensor");
  lua_setfield(L, -2, "__name");
  lua_newtable(L);
  luaL_setfuncs(L, methods, 0);
  ll_register_tensor_ops(L); /* adds the math methods and the operator metamethods */
  lua_setfield(L, -2, "methods");
  lua_pop(L, 1);
}
