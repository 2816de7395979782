/* Parameter storage for ZeRO (lua/lab/zero.lua): lab._rebind makes a parameter a window into
 * a flat buffer, lab._release_data / lab._restore_data free its memory between uses. */
#include "lab_lua.h"
#include "runtime/lab.h"

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

void ll_register_storage(lua_State *L) {
  static const luaL_Reg funcs[] = {{"_rebind", l_rebind}, {"_release_data", l_release_data},
                                   {"_restore_data", l_restore_data}, {NULL, NULL}};
  luaL_setfuncs(L, funcs, 0);
}
