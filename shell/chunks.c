/* The text of the chunks typed at the prompt (see chunks.h). Every chunk is named "=stdin"
 * (errors read "stdin:1:", as in lua.c), so the name cannot tell which chunk a function came
 * from; its compiled form can. string.dump of a function writes its source name and then its
 * body (code, constants, line info, nested functions); inside the dump of the chunk that
 * defined it the same body follows its (omitted) source name. So a function's body, searched
 * in the kept chunks' dumps, finds its chunk: exact, as two bodies match only when the code and
 * the lines it came from match. */
#define _GNU_SOURCE
#include "chunks.h"

#include <lauxlib.h>
#include <string.h>

#define CHUNKS_KEPT 256
#define KEPT "lab.chunks" /* registry: {next = n, [i % CHUNKS_KEPT] = {text, dump}} */
#define SOURCE "=stdin"

/* pushes string.dump(f) of the function at fn, or nothing (returns 0) */
static int push_dump(lua_State *L, int fn) {
  fn = lua_absindex(L, fn);
  if (lua_getglobal(L, "string") != LUA_TTABLE || lua_getfield(L, -1, "dump") != LUA_TFUNCTION) {
    lua_pop(L, 2);
    return 0;
  }
  lua_remove(L, -2);
  lua_pushvalue(L, fn);
  if (lua_pcall(L, 1, 1, 0) != LUA_OK || !lua_isstring(L, -1)) {
    lua_pop(L, 1);
    return 0;
  }
  return 1;
}

void chunks_keep(lua_State *L, int fn, const char *text, size_t len) {
  fn = lua_absindex(L, fn);
  if (lua_getfield(L, LUA_REGISTRYINDEX, KEPT) != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_newtable(L);
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_REGISTRYINDEX, KEPT);
  }
  int kept = lua_gettop(L);
  lua_getfield(L, kept, "next");
  lua_Integer n = lua_tointeger(L, -1);
  lua_pop(L, 1);
  lua_createtable(L, 2, 0);
  lua_pushlstring(L, text, len);
  lua_rawseti(L, -2, 1);
  if (push_dump(L, fn)) lua_rawseti(L, -2, 2);
  lua_rawseti(L, kept, n % CHUNKS_KEPT + 1); /* the oldest goes */
  lua_pushinteger(L, n + 1);
  lua_setfield(L, kept, "next");
  lua_pop(L, 1);
}

const char *chunks_push_text_of(lua_State *L, int fn) {
  fn = lua_absindex(L, fn);
  lua_Debug ar;
  if (!lua_isfunction(L, fn)) return NULL;
  lua_pushvalue(L, fn);
  if (!lua_getinfo(L, ">S", &ar) || strcmp(ar.source, SOURCE) != 0) return NULL;
  int top = lua_gettop(L);
  if (!push_dump(L, fn)) return NULL;
  size_t dl;
  const char *dump = lua_tolstring(L, -1, &dl);
  const char *src = memmem(dump, dl, SOURCE, strlen(SOURCE));
  if (!src) {
    lua_settop(L, top);
    return NULL;
  }
  const char *body = src + strlen(SOURCE); /* from the line it was defined at on */
  size_t bl = dl - (size_t)(body - dump);
  const char *found = NULL;
  if (lua_getfield(L, LUA_REGISTRYINDEX, KEPT) == LUA_TTABLE) {
    lua_getfield(L, -1, "next");
    lua_Integer n = lua_tointeger(L, -1);
    lua_pop(L, 1);
    for (lua_Integer i = n - 1; !found && i >= 0 && i >= n - CHUNKS_KEPT; i--) { /* the newest first */
      lua_rawgeti(L, -1, i % CHUNKS_KEPT + 1);
      size_t cl = 0;
      const char *cd = lua_rawgeti(L, -1, 2) == LUA_TSTRING ? lua_tolstring(L, -1, &cl) : NULL;
      lua_pop(L, 1);
      if (cd && memmem(cd, cl, body, bl)) {
        lua_rawgeti(L, -1, 1);
        lua_replace(L, top + 1);
        found = lua_tostring(L, top + 1);
      }
      lua_pop(L, 1);
    }
  }
  lua_settop(L, found ? top + 1 : top);
  return found;
}
