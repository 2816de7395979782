/* lab._ckpt: the C side of lab.ckpt (lua/lab/ckpt.lua). Here the file operations of a save
 * with their fault points; the readers are l_ckpt_read.c, the writer jobs l_ckpt_write.c. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "lab_lua.h"
#include "runtime/lab.h"

static int rc_or_raise(lua_State *L, int rc) {
  if (rc != 0) ll_runtime_error(L);
  return 0;
}

static int l_mkdir(lua_State *L) { return rc_or_raise(L, lab_ckpt_mkdir(ll_check_path(L, 1, "ckpt.mkdir"))); }
static int l_rename(lua_State *L) {
  return rc_or_raise(L, lab_ckpt_rename(ll_check_path(L, 1, "ckpt.rename"), ll_check_path(L, 2, "ckpt.rename")));
}
static int l_remove_tree(lua_State *L) { return rc_or_raise(L, lab_ckpt_remove_tree(ll_check_path(L, 1, "ckpt.remove_tree"))); }
static int l_fsync_dir(lua_State *L) { return rc_or_raise(L, lab_ckpt_fsync_dir(ll_check_path(L, 1, "ckpt.fsync_dir"))); }

static int l_write_file(lua_State *L) {
  size_t n;
  const char *path = ll_check_path(L, 1, "ckpt.write_file"), *s = luaL_checklstring(L, 2, &n);
  lab_io_piece piece = {s, n};
  return rc_or_raise(L, lab_ckpt_write_file(path, &piece, 1));
}

/* read_file(path[, max_bytes]) -> string, or nil, message */
static int l_read_file(lua_State *L) {
  const char *path = ll_check_path(L, 1, "ckpt.read_file");
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
  char **names = ll_read_dir(ll_check_path(L, 1, "ckpt.list_dir"), &n);
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
  lua_pushboolean(L, stat(ll_check_path(L, 1, "ckpt.is_dir"), &st) == 0 && S_ISDIR(st.st_mode));
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
  static const luaL_Reg fns[] = {
      {"mkdir", l_mkdir}, {"rename", l_rename}, {"remove_tree", l_remove_tree}, {"fsync_dir", l_fsync_dir},
      {"write_file", l_write_file}, {"read_file", l_read_file}, {"list_dir", l_list_dir}, {"is_dir", l_is_dir},
      {"fault", l_fault}, {"fault_count", l_fault_count}, {"crc32", l_crc32}, {NULL, NULL}};
  luaL_newlib(L, fns);
  ll_register_ckpt_read(L);
  ll_register_ckpt_write(L);
  lua_setfield(L, -2, "_ckpt");
}
