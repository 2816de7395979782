/* lab._ckpt: the C side of lab.ckpt. JSON decoding (data, never code), safetensors reading
 * with checks, writer jobs (synchronous or on a background thread), the file operations of a
 * save with their fault points, and directory listing. lua/lab/ckpt.lua builds on these. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "lab_lua.h"
#include "runtime/lab.h"

#define JOB_MT "lab.ckpt_job"
#define MAX_FILE_BYTES ((size_t)1 << 40)

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
  const char *path = luaL_checkstring(L, 1);
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
  if (lab_st_read_header_json(luaL_checkstring(L, 1), &h) != 0) {
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

/* ---- writer jobs ---- */

static lab_ckpt_job **check_job(lua_State *L, int idx) { return luaL_checkudata(L, idx, JOB_MT); }

/* one {path=, tensors={{name, tensor}, ...}, metadata={k=v}} or {path=, bytes=} into the job */
static void add_file(lua_State *L, lab_ckpt_job *job, int spec) {
  lua_getfield(L, spec, "path");
  const char *path = luaL_checkstring(L, -1);
  lua_getfield(L, spec, "bytes");
  if (!lua_isnil(L, -1)) {
    size_t n;
    const char *b = luaL_checklstring(L, -1, &n);
    if (lab_ckpt_job_add_bytes(job, path, b, n) != 0) ll_runtime_error(L);
    lua_pop(L, 2);
    return;
  }
  lua_pop(L, 1);
  lua_getfield(L, spec, "tensors");
  luaL_checktype(L, -1, LUA_TTABLE);
  int tl = lua_gettop(L);
  size_t n = (size_t)lua_rawlen(L, tl);
  const char **names = calloc(n ? n : 1, sizeof *names);
  lab_tensor **ts = calloc(n ? n : 1, sizeof *ts);
  if (!names || !ts) {
    free(names), free(ts);
    ll_error(L, "ckpt: out of memory");
  }
  for (size_t i = 0; i < n; i++) {
    lua_rawgeti(L, tl, (lua_Integer)i + 1);
    lua_rawgeti(L, -1, 1);
    names[i] = lua_tostring(L, -1); /* stays alive in the table */
    lua_rawgeti(L, -2, 2);
    ts[i] = luaL_testudata(L, -1, LAB_TENSOR_MT) ? *(lab_tensor **)lua_touserdata(L, -1) : NULL;
    lua_pop(L, 3);
    if (!names[i] || !ts[i]) {
      free(names), free(ts);
      ll_error(L, "ckpt: tensors[%d] of %s is not {name, open tensor}", (int)i + 1, path);
    }
  }
  lua_getfield(L, spec, "metadata");
  size_t nmeta = 0;
  const char **keys = NULL, **values = NULL;
  if (lua_istable(L, -1)) {
    lua_pushnil(L);
    while (lua_next(L, -2)) {
      nmeta++;
      lua_pop(L, 1);
    }
    keys = calloc(nmeta ? nmeta : 1, sizeof *keys);
    values = calloc(nmeta ? nmeta : 1, sizeof *values);
    size_t i = 0;
    lua_pushnil(L);
    while (keys && values && lua_next(L, -2)) {
      if (lua_type(L, -2) != LUA_TSTRING || lua_type(L, -1) != LUA_TSTRING) {
        free(names), free(ts), free(keys), free(values);
        ll_error(L, "ckpt: metadata of %s must map strings to strings", path);
      }
      keys[i] = lua_tostring(L, -2);
      values[i] = lua_tostring(L, -1);
      i++;
      lua_pop(L, 1);
    }
  }
  int rc = (nmeta && (!keys || !values)) ? lab_fail("ckpt", "out of memory")
                                         : lab_ckpt_job_add_safetensors(job, path, names, ts, n, keys, values, nmeta);
  free(names), free(ts), free(keys), free(values);
  if (rc != 0) ll_runtime_error(L);
  lua_settop(L, spec);
}

/* write(files, async) -> job. Synchronous: the files are written (an error raises) and the job
 * is returned finished. Async: the job runs on a thread; job:wait() -> true or false, message.
 * The job keeps `files` (and so the tensors whose bytes it writes) alive. */
static int l_write(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  int async = lua_toboolean(L, 2);
  lab_ckpt_job **box = lua_newuserdatauv(L, sizeof *box, 1);
  *box = NULL;
  luaL_setmetatable(L, JOB_MT);
  lua_pushvalue(L, 1);
  lua_setiuservalue(L, -2, 1);
  *box = lab_ckpt_job_new();
  if (!*box) ll_runtime_error(L);
  int nfiles = (int)lua_rawlen(L, 1);
  for (int i = 1; i <= nfiles; i++) {
    lua_rawgeti(L, 1, i);
    luaL_checktype(L, -1, LUA_TTABLE);
    add_file(L, *box, lua_gettop(L));
    lua_pop(L, 1);
  }
  if (async ? lab_ckpt_job_start(*box) : lab_ckpt_job_run(*box)) ll_runtime_error(L);
  return 1;
}

static int job_wait(lua_State *L) {
  lab_ckpt_job **box = check_job(L, 1);
  if (!*box) {
    lua_pushboolean(L, 1);
    return 1;
  }
  int rc = lab_ckpt_job_wait(*box);
  lua_pushboolean(L, rc == 0);
  if (rc == 0) return 1;
  lua_pushstring(L, lab_last_error());
  return 2;
}

static int job_finished(lua_State *L) {
  lab_ckpt_job **box = check_job(L, 1);
  lua_pushboolean(L, !*box || lab_ckpt_job_finished(*box));
  return 1;
}

static int job_gc(lua_State *L) {
  lab_ckpt_job **box = check_job(L, 1);
  lab_ckpt_job_free(*box); /* joins a running thread first: its bytes are freed only after */
  *box = NULL;
  return 0;
}

/* ---- file operations ---- */

static int rc_or_raise(lua_State *L, int rc) {
  if (rc != 0) ll_runtime_error(L);
  return 0;
}

static int l_mkdir(lua_State *L) { return rc_or_raise(L, lab_ckpt_mkdir(luaL_checkstring(L, 1))); }
static int l_rename(lua_State *L) {
  return rc_or_raise(L, lab_ckpt_rename(luaL_checkstring(L, 1), luaL_checkstring(L, 2)));
}
static int l_remove_tree(lua_State *L) { return rc_or_raise(L, lab_ckpt_remove_tree(luaL_checkstring(L, 1))); }
static int l_fsync_dir(lua_State *L) { return rc_or_raise(L, lab_ckpt_fsync_dir(luaL_checkstring(L, 1))); }

static int l_write_file(lua_State *L) {
  size_t n;
  const char *path = luaL_checkstring(L, 1), *s = luaL_checklstring(L, 2, &n);
  lab_io_piece piece = {s, n};
  return rc_or_raise(L, lab_ckpt_write_file(path, &piece, 1));
}

/* read_file(path[, max_bytes]) -> string, or nil, message */
static int l_read_file(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  lua_Integer max = luaL_optinteger(L, 2, 1 << 26);
  unsigned char *b;
  size_t n;
  if (max < 0 || lab_ckpt_read_file(path, (size_t)max, &b, &n) != 0) {
    lua_pushnil(L);
    lua_pushstring(L, max < 0 ? "negative size limit" : lab_last_error());
    return 2;
  }
  lua_pushlstring(L, (const char *)b, n);
  free(b);
  return 1;
}

/* list_dir(path) -> sorted names (without . and ..), or nil when it is not a directory */
static int l_list_dir(lua_State *L) {
  size_t n = 0;
  char **names = ll_read_dir(luaL_checkstring(L, 1), &n);
  if (!names) {
    if (errno == ENOMEM) return ll_error(L, "ckpt: out of memory listing a directory");
    return 0;
  }
  lua_createtable(L, (int)n, 0);
  for (size_t i = 0; i < n; i++) {
    lua_pushstring(L, names[i]);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  ll_free_dir(names, n);
  return 1;
}

static int l_is_dir(lua_State *L) {
  struct stat st;
  lua_pushboolean(L, stat(luaL_checkstring(L, 1), &st) == 0 && S_ISDIR(st.st_mode));
  return 1;
}

/* fault(k, 'fail' | 'exit') arms the k-th file operation from now; fault() disarms */
static int l_fault(lua_State *L) {
  if (lua_isnoneornil(L, 1)) {
    lab_ckpt_fault_arm(0, LAB_FAULT_OFF);
    return 0;
  }
  lua_Integer k = luaL_checkinteger(L, 1);
  const char *mode = luaL_checkstring(L, 2);
  if (k < 1 || k > 1000000) return ll_error(L, "ckpt.fault: operation %I out of range", (LUAI_UACINT)k);
  if (strcmp(mode, "fail") == 0) lab_ckpt_fault_arm((int)k, LAB_FAULT_FAIL);
  else if (strcmp(mode, "exit") == 0) lab_ckpt_fault_arm((int)k, LAB_FAULT_EXIT);
  else return ll_error(L, "ckpt.fault: mode is 'fail' or 'exit', got '%s'", mode);
  return 0;
}

/* crc32(string) -> integer (zlib's, as the safetensors files record) */
static int l_crc32(lua_State *L) {
  size_t n;
  const char *s = luaL_checklstring(L, 1, &n);
  lua_pushinteger(L, (lua_Integer)(crc32_z(0L, (const unsigned char *)s, n) & 0xffffffffu));
  return 1;
}

static int l_fault_count(lua_State *L) {
  lua_pushinteger(L, lab_ckpt_fault_count());
  return 1;
}

void ll_register_ckpt(lua_State *L) {
  static const luaL_Reg job_methods[] = {{"wait", job_wait}, {"finished", job_finished}, {NULL, NULL}};
  luaL_newmetatable(L, JOB_MT);
  luaL_newlib(L, job_methods);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, job_gc);
  lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);
  static const luaL_Reg fns[] = {
      {"json_decode", l_json_decode}, {"read_safetensors", l_read_safetensors},
      {"read_safetensors_metadata", l_read_safetensors_metadata}, {"write", l_write},
      {"mkdir", l_mkdir}, {"rename", l_rename}, {"remove_tree", l_remove_tree}, {"fsync_dir", l_fsync_dir},
      {"write_file", l_write_file}, {"read_file", l_read_file}, {"list_dir", l_list_dir}, {"is_dir", l_is_dir},
      {"fault", l_fault}, {"fault_count", l_fault_count}, {"crc32", l_crc32}, {NULL, NULL}};
  luaL_newlib(L, fns);
  lua_pushlightuserdata(L, NULL);
  lua_setfield(L, -2, "null");
  lua_setfield(L, -2, "_ckpt");
}
