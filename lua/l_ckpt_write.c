/* lab._ckpt.write: checkpoint writer jobs (synchronous or on a background thread), with their
 * methods wait, finished. */
#include <stdlib.h>

#include "lab_lua.h"
#include "runtime/lab.h"

#define JOB_MT "lab.ckpt_job"

static lab_ckpt_job **check_job(lua_State *L, int idx) { return luaL_checkudata(L, idx, JOB_MT); }

/* one {path=, tensors={{name, tensor}, ...}, metadata={k=v}} or {path=, bytes=} into the job */
static void add_file(lua_State *L, lab_ckpt_job *job, int spec) {
  lua_getfield(L, spec, "path");
  const char *path = ll_check_path(L, -1, "ckpt.write");
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

void ll_register_ckpt_write(lua_State *L) {
  static const luaL_Reg job_meta[] = {{"__gc", job_gc}, {NULL, NULL}};
  static const luaL_Reg job_methods[] = {{"wait", job_wait}, {"finished", job_finished}, {NULL, NULL}};
  ll_new_class(L, JOB_MT, job_meta, job_methods);
  static const luaL_Reg fns[] = {{"write", l_write}, {NULL, NULL}};
  luaL_setfuncs(L, fns, 0);
}
