/* Helpers shared by the binding files: errors, argument parsing, tensor userdata. */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab_lua.h"
#include "runtime/lab.h"

int ll_rank(void) { return lab_ctl_rank(); }

lua_State *ll_main_state(lua_State *L) {
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
  lua_State *main = lua_tothread(L, -1);
  lua_pop(L, 1);
  return main;
}

int ll_push_unary(lua_State *L, lab_tensor *(*op)(lab_tensor *)) {
  ll_push_tensor(L, op(ll_check_tensor(L, 1)));
  return 1;
}

void ll_new_class(lua_State *L, const char *mt, const luaL_Reg *meta, const luaL_Reg *methods) {
  luaL_newmetatable(L, mt);
  luaL_setfuncs(L, meta, 0);
  lua_newtable(L);
  luaL_setfuncs(L, methods, 0);
  lua_setfield(L, -2, "__index");
  lua_pop(L, 1);
}

void ll_add_tensor_methods(lua_State *L, const luaL_Reg *methods) {
  luaL_getmetatable(L, LAB_TENSOR_MT);
  lua_getfield(L, -1, "methods");
  luaL_setfuncs(L, methods, 0);
  lua_pop(L, 2);
}

int ll_pcall_runtime(lua_State *L, int nargs, int nresults, const char *op) {
  if (lua_pcall(L, nargs, nresults, 0) == LUA_OK) return 0;
  lab_fail(op, "%s", lua_tostring(L, -1));
  lua_pop(L, 1);
  return -1;
}

ll_fn_ref *ll_fn_ref_new(lua_State *L, int idx) {
  ll_fn_ref *r = malloc(sizeof *r);
  if (!r) return NULL;
  r->L = ll_main_state(L); /* never a coroutine's state: it may be collected */
  lua_pushvalue(L, idx);
  r->ref = luaL_ref(L, LUA_REGISTRYINDEX);
  return r;
}

void ll_fn_ref_free(void *p) {
  ll_fn_ref *r = p;
  luaL_unref(r->L, LUA_REGISTRYINDEX, r->ref);
  free(r);
}

int ll_error(lua_State *L, const char *fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  /* no "file:line:" prefix: the message starts with the rank on every path (tail calls
   * would otherwise attribute it to the caller's line); scripts get a traceback anyway */
  lua_pushfstring(L, "rank %d: %s", ll_rank(), msg);
  return lua_error(L);
}

int ll_runtime_error(lua_State *L) { return ll_error(L, "%s", lab_last_error()); }

/* "name: " for the C function running now, as luaL_argerror finds it ("all_gather: ",
 * "add: "), or "" when Lua does not know a name (a function called through pcall) */
static const char *fn_prefix(lua_State *L, char *buf, size_t n) {
  lua_Debug ar;
  buf[0] = 0;
  if (lua_getstack(L, 0, &ar) && lua_getinfo(L, "n", &ar) && ar.name) snprintf(buf, n, "%s: ", ar.name);
  return buf;
}

/* raises when t is a ZeRO-3 parameter whose storage is sharded away (its bytes exist only while
 * its module computes) */
static void check_not_sharded(lua_State *L, const lab_tensor *t, int idx) {
  char fn[96];
  if (!t->storage->data && t->storage->nbytes > 0)
    ll_error(L, "%stensor argument %d is a sharded parameter (ZeRO-3): its full value exists only "
             "while its module computes, called through the ZeRO engine (a weight used outside "
             "its module's forward, as a tied head, must be marked p.shared = true before "
             "lab.zero.wrap)", fn_prefix(L, fn, sizeof fn), idx);
}

lab_tensor *ll_test_tensor(lua_State *L, int idx) {
  lab_tensor **box = luaL_testudata(L, idx, LAB_TENSOR_MT);
  char fn[96];
  if (box && !*box) ll_error(L, "%stensor argument %d was already closed", fn_prefix(L, fn, sizeof fn), idx);
  if (box) check_not_sharded(L, *box, idx);
  return box ? *box : NULL;
}

lab_tensor *ll_check_tensor_meta(lua_State *L, int idx) {
  lab_tensor **box = luaL_testudata(L, idx, LAB_TENSOR_MT);
  char fn[96];
  if (!box) {
    ll_error(L, "%sexpected a tensor as argument %d, got %s", fn_prefix(L, fn, sizeof fn), idx, luaL_typename(L, idx));
    return NULL;
  }
  if (!*box) ll_error(L, "%stensor argument %d was already closed", fn_prefix(L, fn, sizeof fn), idx);
  return *box;
}

lab_tensor *ll_check_tensor(lua_State *L, int idx) {
  lab_tensor *t = ll_check_tensor_meta(L, idx);
  check_not_sharded(L, t, idx);
  return t;
}

/* Lua's collector does not see tensor bytes: after enough allocation, collect so that
 * tensors no longer referenced give their memory back. The budget is the bytes that were
 * live after the previous collection (at least 64 MiB), as a generational collector
 * would do, so the cost stays proportional to the work. */
static void gc_pressure(lua_State *L) {
  static int64_t live_after_gc;
  int64_t budget = live_after_gc > (64 << 20) ? live_after_gc : (64 << 20);
  if (lab_mem_allocated_since_mark() > budget) { /* every device's bytes */
    lua_gc(L, LUA_GCCOLLECT);
    lab_mem_mark();
    live_after_gc = lab_mem_live_bytes();
  }
}

void ll_push_tensor(lua_State *L, lab_tensor *t) {
  if (!t) ll_runtime_error(L);
  lab_tensor **box = lua_newuserdatauv(L, sizeof *box, 1); /* 1: attributes (l_tensor.c) */
  *box = t;
  luaL_setmetatable(L, LAB_TENSOR_MT);
  gc_pressure(L);
}

void ll_check_rc(lua_State *L, int rc) {
  if (rc < 0) ll_runtime_error(L);
}

lua_Integer ll_check_integer(lua_State *L, int idx, const char *op, const char *what) {
  int ok = 0;
  lua_Integer v = lua_type(L, idx) == LUA_TNUMBER ? lua_tointegerx(L, idx, &ok) : 0;
  if (ok) return v;
  if (lua_type(L, idx) == LUA_TNUMBER)
    return ll_error(L, "%s: %s must be an integer, got %.14g", op, what, lua_tonumber(L, idx));
  return ll_error(L, "%s: %s must be an integer, got %s", op, what, luaL_typename(L, idx));
}

int ll_check_int(lua_State *L, int idx, const char *op, const char *what) {
  lua_Integer v = ll_check_integer(L, idx, op, what);
  if (v < INT_MIN || v > INT_MAX)
    return ll_error(L, "%s: %s %lld is out of range (at most %d in magnitude)", op, what, (long long)v, INT_MAX);
  return (int)v;
}

int ll_opt_int(lua_State *L, int idx, int def, const char *op, const char *what) {
  return lua_isnoneornil(L, idx) ? def : ll_check_int(L, idx, op, what);
}

/* pushes options field `field` of the table at opts and says whether it is set; nothing is
 * left pushed when it is not (or there are no options) */
static int push_opt(lua_State *L, int opts, const char *field) {
  if (!opts) return 0;
  if (lua_getfield(L, opts, field) != LUA_TNIL) return 1;
  lua_pop(L, 1);
  return 0;
}

int ll_opt_int_field(lua_State *L, int opts, const char *field, int def, const char *op) {
  if (!push_opt(L, opts, field)) return def;
  int v = ll_check_int(L, lua_gettop(L), op, field);
  lua_pop(L, 1);
  return v;
}

int ll_to_dim(lua_State *L, lua_Integer d, int ndim, int extra, const char *op) {
  int n = ndim + extra;
  if (d < 0) d += n + 1;
  if (d < 1 || d > n) {
    if (n == 0) return ll_error(L, "%s: dim %lld given for a tensor with no dimensions", op, (long long)d);
    return ll_error(L, "%s: dim %lld out of range for a tensor of %d dimensions (use 1..%d or -1..-%d)",
                    op, (long long)d, ndim, n, n);
  }
  return (int)d - 1;
}

int ll_check_dim(lua_State *L, int idx, int ndim, int extra, const char *op) {
  return ll_to_dim(L, ll_check_integer(L, idx, op, "dim"), ndim, extra, op);
}

int ll_read_shape(lua_State *L, int idx, int64_t *shape, const char *op) {
  int n = 0;
  if (lua_istable(L, idx) && !ll_test_tensor(L, idx) && lua_rawlen(L, idx) > 0) {
    int len = (int)lua_rawlen(L, idx);
    if (len > LAB_MAX_DIMS) return ll_error(L, "%s: %d dimensions, at most %d supported", op, len, LAB_MAX_DIMS);
    for (int i = 1; i <= len; i++) {
      lua_rawgeti(L, idx, i);
      if (!lua_isinteger(L, -1)) ll_error(L, "%s: size %d is not an integer", op, i);
      shape[n++] = lua_tointeger(L, -1);
      lua_pop(L, 1);
    }
    return n;
  }
  int top = lua_gettop(L), i = idx;
  for (; i <= top && lua_type(L, i) == LUA_TNUMBER; i++) {
    if (n >= LAB_MAX_DIMS) return ll_error(L, "%s: at most %d dimensions supported", op, LAB_MAX_DIMS);
    if (!lua_isinteger(L, i)) ll_error(L, "%s: size %d is not an integer", op, n + 1);
    shape[n++] = lua_tointeger(L, i);
  }
  /* the sizes end at the options table (or nothing): lab.zeros("x") was a 0-d tensor */
  if (i <= top && !lua_isnil(L, i) && !lua_istable(L, i))
    return ll_error(L, "%s: size %d must be an integer, got %s", op, n + 1, luaL_typename(L, i));
  return n;
}

lab_dtype ll_check_dtype_name(lua_State *L, int idx) {
  const char *s = luaL_checkstring(L, idx);
  int dt = lab_dtype_from_name(s);
  if (dt < 0) ll_error(L, "unknown dtype '%s' (use f32, f64, bf16, f16, i32, i64 or bool)", s);
  return (lab_dtype)dt;
}

const char *ll_check_path(lua_State *L, int idx, const char *op) {
  size_t n;
  const char *s = luaL_checklstring(L, idx, &n);
  if (strlen(s) != n) ll_error(L, "%s: the path \"%s\" is followed by a NUL byte (a file name cannot hold one)", op, s);
  return s;
}

lab_dtype ll_opt_dtype(lua_State *L, int idx, lab_dtype def) {
  if (idx == 0 || lua_isnoneornil(L, idx)) return def;
  if (lua_type(L, idx) == LUA_TSTRING) return ll_check_dtype_name(L, idx);
  if (!lua_istable(L, idx)) return def;
  lua_getfield(L, idx, "dtype");
  lab_dtype dt = lua_isnil(L, -1) ? def : ll_check_dtype_name(L, -1);
  lua_pop(L, 1);
  return dt;
}

lab_device ll_check_device(lua_State *L, int idx, const char *op) {
  lab_tensor *t = ll_test_tensor(L, idx);
  if (t) return lab_device_of(t);
  lab_device d;
  ll_check_rc(L, lab_device_parse(op, luaL_checkstring(L, idx), &d));
  return d;
}

lab_device ll_opt_device(lua_State *L, int idx, lab_device def) {
  if (idx == 0 || !lua_istable(L, idx)) return def;
  lua_getfield(L, idx, "device");
  lab_device d = lua_isnil(L, -1) ? def : ll_check_device(L, lua_gettop(L), "device");
  lua_pop(L, 1);
  return d;
}

int ll_options_index(lua_State *L) {
  int top = lua_gettop(L);
  if (top > 0 && lua_istable(L, top) && !ll_test_tensor(L, top) && lua_rawlen(L, top) == 0) return top;
  return 0;
}

int ll_opt_bool(lua_State *L, int opts, const char *field, int def) {
  if (!push_opt(L, opts, field)) return def;
  int v = lua_toboolean(L, -1);
  lua_pop(L, 1);
  return v;
}

double ll_opt_number(lua_State *L, int opts, const char *field, double def) {
  if (!push_opt(L, opts, field)) return def;
  double v = luaL_checknumber(L, -1);
  lua_pop(L, 1);
  return v;
}

/* A Lua number next to a tensor follows PyTorch's "weak scalar" rule: it takes the
 * tensor's type, except a fractional number with an integer tensor, which gives f32. The
 * scalar is held in the compute type so bf16 * 0.1 multiplies by f32 0.1, as GPUs do. */
void ll_check_scalar_arg(lua_State *L, int idx) {
  char fn[96];
  if (!ll_test_tensor(L, idx) && lua_type(L, idx) != LUA_TNUMBER && lua_type(L, idx) != LUA_TBOOLEAN)
    ll_error(L, "%sexpected a tensor or number as argument %d, got %s", fn_prefix(L, fn, sizeof fn), idx,
             luaL_typename(L, idx));
}

lab_tensor *ll_scalar_for(lua_State *L, int idx, const lab_tensor *like, int *out_dtype) {
  ll_check_scalar_arg(L, idx);
  lab_tensor *t = ll_test_tensor(L, idx);
  if (t) {
    lab_tensor_retain(t);
    *out_dtype = -1;
    return t;
  }
  if (lua_type(L, idx) == LUA_TBOOLEAN) {
    *out_dtype = -1;
    lab_tensor *s = lab_tensor_scalar(LAB_BOOL, lua_toboolean(L, idx));
    if (!s) ll_runtime_error(L);
    return s;
  }
  int is_int = lua_isinteger(L, idx);
  lab_dtype st;
  if (lab_dtype_is_float(like->dtype)) {
    st = lab_compute_type(like->dtype);
    *out_dtype = like->dtype;
  } else if (is_int) {
    st = LAB_I64;
    *out_dtype = like->dtype == LAB_BOOL ? LAB_I64 : like->dtype;
  } else {
    st = LAB_F32;
    *out_dtype = LAB_F32;
  }
  lab_tensor *s;
  if (st == LAB_I64) {
    int64_t v = lua_tointeger(L, idx);
    s = lab_tensor_from_host(lab_cpu(), LAB_I64, 0, NULL, &v);
  } else {
    s = lab_tensor_scalar(st, lua_tonumber(L, idx));
  }
  if (!s) ll_runtime_error(L);
  return s;
}
