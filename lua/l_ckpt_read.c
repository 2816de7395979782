/* lab._ckpt's readers: JSON decoding (data, never code), safetensors files with every header
 * field checked, their metadata alone. */
#include <stdlib.h>

#include "lab_lua.h"
#include "runtime/lab.h"

#define MAX_FILE_BYTES ((size_t)1 << 40) /* a safetensors file read whole */

static void push_json(lua_State *L, const lab_json *v) {
  luaL_checkstack(L, 4, "json nesting");
  switch (v->kind) {
  case LAB_JSON_NULL: lua_pushlightuserdata(L, NULL); break;
  case LAB_JSON_BOOL: lua_pushboolean(L, v->boolean); break;
  case LAB_JSON_INT: lua_pushinteger(L, (lua_Integer)v->integer); break;
  case LAB_JSON_NUMBER: lua_pushnumber(L, v->number); break;
  case LAB_JSON_STRING: lua_pushlstring(L, v->str, v->len); break;
  case LAB_JSON_ARRAY:
    lua_createtable(L, (int)(v->len > 1000000 ? 0 : v->len), 0);
    for (size_t i = 0; i < v->len; i++) {
      push_json(L, &v->items[i]);
      lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    break;
  case LAB_JSON_OBJECT:
    lua_createtable(L, 0, (int)(v->len > 1000000 ? 0 : v->len));
    for (size_t i = 0; i < v->len; i++) {
      push_json(L, &v->items[i]);
      lua_setfield(L, -2, v->keys[i]);
    }
    break;
  }
}

/* json_decode(text[, what]) -> value, or nil, message */
static int l_json_decode(lua_State *L) {
  size_t n;
  const char *s = luaL_checklstring(L, 1, &n);
  lab_json v;
  char err[256];
  if (lab_json_parse(s, n, &v, err, sizeof err) != 0) {
    lua_pushnil(L);
    lua_pushfstring(L, "%s is not valid JSON (%s)", luaL_optstring(L, 2, "the text"), err);
    return 2;
  }
  push_json(L, &v);
  lab_json_free(&v);
  return 1;
}

static void push_shape(lua_State *L, int ndim, const int64_t *shape) {
  lua_createtable(L, ndim, 0);
  for (int d = 0; d < ndim; d++) {
    lua_pushinteger(L, shape[d]);
    lua_rawseti(L, -2, d + 1);
  }
}

/* read_safetensors(path) -> {entries = {name = {dtype=, shape=, crc=}}, metadata = {},
 * tensors = {name = tensor}}, or nil, message. Every check of lab_st_parse (and the crc32 of
 * every tensor that records one) has passed when it returns a table. */
static int l_read_safetensors(lua_State *L) {
  const char *path = ll_check_path(L, 1, "read_safetensors");
  unsigned char *bytes;
  size_t n;
  lab_st_header h;
  if (lab_ckpt_read_file(path, MAX_FILE_BYTES, &bytes, &n) != 0 || lab_st_parse(bytes, n, path, &h) != 0) {
    free(bytes);
    lua_pushnil(L);
    lua_pushstring(L, lab_last_error());
    return 2;
  }
  lua_createtable(L, 0, 3);
  lua_newtable(L); /* entries */
  lua_newtable(L); /* tensors */
  for (size_t i = 0; i < h.n; i++) {
    const lab_st_entry *e = &h.entries[i];
    lua_createtable(L, 0, 3);
    lua_pushstring(L, lab_dtype_name(e->dtype));
    lua_setfield(L, -2, "dtype");
    push_shape(L, e->ndim, e->shape);
    lua_setfield(L, -2, "shape");
    if (e->has_crc) {
      lua_pushinteger(L, e->crc);
      lua_setfield(L, -2, "crc");
    }
    lua_setfield(L, -3, e->name);
    lab_tensor *t = lab_st_tensor_at(&h, bytes, i);
    if (!t) {
      free(bytes);
      lab_st_header_free(&h);
      lua_pushnil(L);
      lua_pushstring(L, lab_last_error());
      return 2;
    }
    ll_push_tensor(L, t);
    lua_setfield(L, -2, e->name);
  }
  lua_setfield(L, -3, "tensors");
  lua_setfield(L, -2, "entries");
  if (h.metadata) push_json(L, h.metadata);
  else lua_newtable(L);
  lua_setfield(L, -2, "metadata");
  free(bytes);
  lab_st_header_free(&h);
  return 1;
}

/* read_safetensors_metadata(path) -> the __metadata__ table (empty if none), or nil, message:
 * the header alone, not the data */
static int l_read_safetensors_metadata(lua_State *L) {
  lab_json h;
  if (lab_st_read_header_json(ll_check_path(L, 1, "read_safetensors_metadata"), &h) != 0) {
    lua_pushnil(L);
    lua_pushstring(L, lab_last_error());
    return 2;
  }
  const lab_json *m = lab_json_get(&h, "__metadata__");
  if (m && m->kind == LAB_JSON_OBJECT) push_json(L, m);
  else lua_newtable(L);
  lab_json_free(&h);
  return 1;
}

void ll_register_ckpt_read(lua_State *L) {
  static const luaL_Reg fns[] = {{"json_decode", l_json_decode}, {"read_safetensors", l_read_safetensors},
                                 {"read_safetensors_metadata", l_read_safetensors_metadata}, {NULL, NULL}};
  luaL_setfuncs(L, fns, 0);
  lua_pushlightuserdata(L, NULL);
  lua_setfield(L, -2, "null");
}
