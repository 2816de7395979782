/* Lua at the stepper's prompt, in the selected frame (see stepper_exec.h). The code runs with
 * an environment whose reads find the frame's locals and upvalues first (later locals shadow
 * earlier ones, as in the code), then the globals; its writes to those names go back into the
 * frame with lua_setlocal / lua_setupvalue, others become globals, as pdb's `!x = 1` does. */
#define _GNU_SOURCE
#include "stepper_exec.h"

#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/lab.h"
#include "show.h"

static int interacting;

int exec_interacting(void) { return interacting; }
void exec_set_interacting(int on) { interacting = on; }
const char *exec_prompt(void) { return interacting ? "(interact) " : "(step) "; }
const char *exec_eof_line(void) { return interacting ? EXEC_LEAVE_INTERACT : "q"; }

int exec_is_lua(const char *line) {
  if (line[0] == '!') return 1;
  const char *p = line;
  while ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_') p++;
  if (p == line) return 0;
  while (*p == ' ' || *p == '\t') p++;
  if (*p == '=' && p[1] != '=') return 1; /* u = u * 0 */
  return *p == '.' || *p == '[' || *p == ',' || *p == ':'; /* n.x = 1, s[1] = 2, c, d = 1, 2, l:f() */
}

/* the proxy environment: (known, vals, globals, out) -> env; print appends to out */
static const char *proxy_code =
    "local known, vals, G, out = ...\n"
    "local function print_(...)\n"
    "  local t = table.pack(...)\n"
    "  for i = 1, t.n do t[i] = tostring(t[i]) end\n"
    "  out[#out + 1] = table.concat(t, '\\t', 1, t.n) .. '\\n'\n"
    "end\n"
    "return setmetatable({}, {\n"
    "  __index = function(_, k)\n"
    "    if known[k] then return vals[k] end\n"
    "    if k == 'print' then return print_ end\n"
    "    return G[k]\n"
    "  end,\n"
    "  __newindex = function(_, k, v) if known[k] then vals[k] = v else G[k] = v end end })\n";

/* what the frame's names are: for each, where it lives (local index > 0, upvalue index < 0) */
static void collect(lua_State *L, lua_Debug *ar, int fn, int known, int vals, int where) {
  const char *name;
  for (int i = 1; (name = lua_getupvalue(L, fn, i)); i++) {
    lua_setfield(L, vals, name);
    lua_pushboolean(L, 1);
    lua_setfield(L, known, name);
    lua_pushinteger(L, -i);
    lua_setfield(L, where, name);
  }
  for (int i = 1; (name = lua_getlocal(L, ar, i)); i++) {
    if (name[0] == '(') {
      lua_pop(L, 1);
      continue;
    }
    lua_setfield(L, vals, name);
    lua_pushboolean(L, 1);
    lua_setfield(L, known, name);
    lua_pushinteger(L, i);
    lua_setfield(L, where, name);
  }
}

/* writes back every name whose value the code changed */
static void write_back(lua_State *L, lua_Debug *ar, int fn, int vals, int where) {
  lua_pushnil(L);
  while (lua_next(L, where)) {
    int idx = (int)lua_tointeger(L, -1);
    const char *name = lua_tostring(L, -2);
    lua_getfield(L, vals, name);
    if (idx > 0) {
      lua_getlocal(L, ar, idx);
      if (!lua_rawequal(L, -1, -2)) {
        lua_pop(L, 1);
        lua_setlocal(L, ar, idx); /* pops the new value */
      } else {
        lua_pop(L, 2);
      }
    } else {
      lua_getupvalue(L, fn, -idx);
      if (!lua_rawequal(L, -1, -2)) {
        lua_pop(L, 1);
        lua_setupvalue(L, fn, -idx);
      } else {
        lua_pop(L, 2);
      }
    }
    lua_pop(L, 1);
  }
}

static char *run(lua_State *L, int level, const char *code, int pretty) {
  int top = lua_gettop(L);
  lua_Debug ar;
  int frame = level >= 0 && lua_getstack(L, level, &ar);
  int fn = 0;
  if (frame) {
    lua_getinfo(L, "f", &ar);
    fn = lua_gettop(L);
  }
  lua_newtable(L);
  int known = lua_gettop(L);
  lua_newtable(L);
  int vals = lua_gettop(L);
  lua_newtable(L);
  int where = lua_gettop(L);
  lua_newtable(L);
  int out = lua_gettop(L);
  if (frame) collect(L, &ar, fn, known, vals, where);
  if (luaL_loadstring(L, proxy_code) != LUA_OK) return strdup("error: stepper proxy\n");
  lua_pushvalue(L, known);
  lua_pushvalue(L, vals);
  lua_pushglobaltable(L);
  lua_pushvalue(L, out);
  lua_call(L, 4, 1);
  int env = lua_gettop(L);
  /* an expression shows its values (as p); otherwise a statement */
  char *ret = NULL;
  if (asprintf(&ret, "return %s", code) < 0) ret = NULL;
  int rc = ret ? luaL_loadbuffer(L, ret, strlen(ret), "=(step)") : LUA_ERRMEM;
  free(ret);
  int expression = rc == LUA_OK;
  if (!expression) {
    lua_pop(L, 1);
    rc = luaL_loadbuffer(L, code, strlen(code), "=(step)");
  }
  int base = lua_gettop(L);
  if (rc == LUA_OK) {
    lua_pushvalue(L, env);
    lua_setupvalue(L, -2, 1);
    /* the other ranks wait at the prompt, not in a collective: one started here would hang */
    lab_dist_refuse_collectives("!", "inside a stepper line would wait for the other ranks, which are paused at the "
                                     "prompt and never join it; run it as a line of the script, or at the REPL prompt");
    rc = lua_pcall(L, 0, LUA_MULTRET, 0);
    lab_dist_refuse_collectives(NULL, NULL);
    if (rc == LUA_OK && frame) write_back(L, &ar, fn, vals, where);
  }
  int nres = lua_gettop(L) - base + 1; /* before the buffer, which takes a stack slot */
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  int nout = (int)lua_rawlen(L, out);
  for (int i = 1; i <= nout; i++) {
    lua_rawgeti(L, out, i);
    luaL_addvalue(&b);
  }
  if (rc != LUA_OK) {
    luaL_addstring(&b, "error: ");
    luaL_tolstring(L, base, NULL);
    luaL_addvalue(&b);
    luaL_addchar(&b, '\n');
  } else if (expression && nres > 0) {
    for (int i = 0; i < nres; i++) {
      if (i) luaL_addchar(&b, '\t');
      if (pretty) show_value(L, base + i);
      else luaL_tolstring(L, base + i, NULL);
      luaL_addvalue(&b);
    }
    luaL_addchar(&b, '\n');
  }
  luaL_pushresult(&b);
  char *answer = strdup(lua_tostring(L, -1));
  lua_settop(L, top);
  return answer;
}

char *frame_exec(lua_State *L, int level, const char *code) {
  if (code[0] == '!') code++;
  while (*code == ' ') code++;
  return run(L, level, code, 0);
}

char *frame_pretty(lua_State *L, int level, const char *expr) { return run(L, level, expr, 1); }

char *frame_exec_line(lua_State *L, int level, const char *line) {
  char *a = run(L, level, line, 0);
  const char *p = line; /* a lone word that is nil is more likely a mistyped command */
  while ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_') p++;
  if (*p == 0 && p != line && a && strcmp(a, "nil\n") == 0) {
    free(a);
    if (asprintf(&a, "unknown command '%s' (h for help); as Lua it is nil\n", line) < 0) a = NULL;
  }
  return a;
}

int exec_command(lua_State *L, const char *cmd, int level, char **answer) {
  *answer = NULL;
  if (interacting) {
    if (strcmp(cmd, EXEC_LEAVE_INTERACT) == 0) {
      interacting = 0;
      *answer = strdup("(back at the stepper: n s c ... and Lua lines again)\n");
      return EXEC_SAY;
    }
    *answer = frame_exec(L, level, cmd);
    return EXEC_SHOW;
  }
  if (exec_is_lua(cmd)) {
    *answer = frame_exec(L, level, cmd);
    return EXEC_SHOW;
  }
  if (strcmp(cmd, "interact") == 0) {
    interacting = 1;
    *answer = strdup("interact: every line is Lua in this frame on every rank (locals assigned too); "
                     "Ctrl-D goes back to (step)\n");
    return EXEC_SAY;
  }
  if (strncmp(cmd, "pp ", 3) == 0) {
    *answer = frame_pretty(L, level, cmd + 3);
    return EXEC_SHOW;
  }
  return 0;
}
