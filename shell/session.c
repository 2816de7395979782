/* Running Lua code on a rank: loading, the `return` trick, the traceback handler and the
 * interrupt hook, all in the manner of lua.c. */
#include "session.h"

#include <lauxlib.h>
#include <lualib.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "chunks.h"
#include "show.h"
#include "lua/lab.h"
#include "runtime/lab_control.h"

lua_State *session_new(void) {
  lua_State *L = luaL_newstate();
  if (!L) return NULL;
  luaL_openlibs(L);
  lua_pushcfunction(L, luaopen_lab);
  if (lua_pcall(L, 0, 1, 0) != LUA_OK) {
    fprintf(stderr, "llmlab: cannot load the lab module: %s\n", lua_tostring(L, -1));
    lua_close(L);
    return NULL;
  }
  lua_setglobal(L, "lab");
  /* help(f), as at Python's prompt: the docstrings of lua/lab/doc */
  lua_getglobal(L, "lab");
  lua_getfield(L, -1, "help");
  lua_setglobal(L, "help");
  lua_pop(L, 1);
  show_register(L); /* lab.print_on shows values as the REPL does */
  return L;
}

void session_set_args(lua_State *L, char **argv, int argc, int script_index) {
  lua_createtable(L, argc - script_index, script_index + 1);
  for (int i = 0; i < argc; i++) {
    lua_pushstring(L, argv[i]);
    lua_rawseti(L, -2, i - script_index);
  }
  lua_setglobal(L, "arg");
}

int session_incomplete(lua_State *L, const char *code, size_t len) {
  int status = luaL_loadbuffer(L, code, len, "=stdin");
  int incomplete = 0;
  if (status == LUA_ERRSYNTAX) {
    size_t ml;
    const char *msg = lua_tolstring(L, -1, &ml);
    const char *eof = "<eof>";
    size_t el = strlen(eof);
    incomplete = ml >= el && strcmp(msg + ml - el, eof) == 0;
  }
  lua_pop(L, 1);
  return incomplete;
}

/* :tb shows the last error's traceback: every error a chunk or script raises keeps its
 * traceback here (in the registry, read by lua/lab/magic.lua), shown or not */
#define LAST_TRACEBACK "lab.last_traceback"

static void keep_traceback(lua_State *L, const char *msg) {
  luaL_traceback(L, L, msg, 1);
  lua_setfield(L, LUA_REGISTRYINDEX, LAST_TRACEBACK);
}

/* "file:line: " of the user's code nearest the error (the newest Lua frame outside lua/lab/),
 * from stack level `from` on; 0 when there is none */
static int user_position(lua_State *L, int from, char *buf, size_t n) {
  lua_Debug ar;
  for (int level = from; lua_getstack(L, level, &ar); level++) {
    if (!lua_getinfo(L, "Sl", &ar) || ar.currentline <= 0 || strcmp(ar.what, "C") == 0) continue;
    if (strstr(ar.source, "/lua/lab/")) continue;
    snprintf(buf, n, "%s:%d: ", ar.short_src, ar.currentline);
    return 1;
  }
  return 0;
}

/* the length of a leading "src:line: " whose src is the library's (lua/lab/), else 0 */
static size_t library_position(const char *m) {
  const char *colon = strstr(m, ": ");
  if (!colon) return 0;
  const char *d = colon;
  while (d > m && d[-1] >= '0' && d[-1] <= '9') d--;
  if (d == colon || d == m || d[-1] != ':') return 0;
  const char *lib = strstr(m, "lua/lab/");
  return lib && lib < d && !memchr(m, '\n', (size_t)(colon - m)) ? (size_t)(colon + 2 - m) : 0;
}

const char *session_locate(lua_State *L, const char *msg, int from) {
  char where[320];
  if (lab_board_gave_up_for_member() || !user_position(L, from, where, sizeof where)) return msg;
  char head[32];
  int hl = snprintf(head, sizeof head, "rank %d: ", lab_ctl_rank());
  size_t skip = strncmp(msg, head, (size_t)hl) == 0 ? (size_t)hl : 0; /* lab's errors name the rank first */
  const char *rest = msg + skip;
  if (strncmp(rest, where, strlen(where)) == 0 || strncmp(rest, "interrupted!", 12) == 0 ||
      strncmp(rest, "stepper: quit", 13) == 0)
    return msg; /* already there; a stop from a hook says nothing of a line */
  rest += library_position(rest); /* the user's line instead of the library's (:tb shows both) */
  return lua_pushfstring(L, "%s%s%s", skip ? head : "", where, rest);
}

static int msghandler_traceback(lua_State *L) {
  const char *msg = lua_tostring(L, 1);
  if (!msg) {
    if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) return 1;
    msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
  }
  msg = session_locate(L, msg, 1);
  luaL_traceback(L, L, msg, 1);
  lua_pushvalue(L, -1);
  lua_setfield(L, LUA_REGISTRYINDEX, LAST_TRACEBACK);
  return 1;
}

static int msghandler_plain(lua_State *L) {
  if (!lua_tostring(L, 1)) {
    if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) return 1;
    lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
  }
  session_locate(L, lua_tostring(L, -1), 1);
  keep_traceback(L, lua_tostring(L, -1));
  return 1;
}

static char *take_error(lua_State *L) {
  const char *m = lua_tostring(L, -1);
  char *copy = strdup(m ? m : "(no message)");
  lua_pop(L, 1);
  return copy;
}

int session_stop(lua_State *L, const char *what) {
  lua_pushfstring(L, "rank %d: %s", lab_ctl_rank(), what);
  return lua_error(L);
}

static int presses_raised; /* the board's Ctrl-C count when this rank last raised */

/* after a second Ctrl-C: every line of user code raises */
static void insist_hook(lua_State *L, lua_Debug *ar) {
  if (ar->event != LUA_HOOKLINE || !lua_getinfo(L, "S", ar) || strstr(ar->source, "/lua/lab/")) return;
  session_stop(L, "interrupted!");
}

void session_check_interrupt(lua_State *L) {
  int presses = lab_board_interrupt_requested();
  if (presses == 0 || presses == presses_raised) return;
  presses_raised = presses;
  if (presses > 1) lua_sethook(L, insist_hook, LUA_MASKLINE, 0);
  session_stop(L, "interrupted!");
}

void session_reset_interrupt(void) { presses_raised = 0; }
int session_interrupt_raised(void) { return presses_raised > 0; }

static void stop_hook(lua_State *L, lua_Debug *ar) {
  (void)ar;
  lua_sethook(L, NULL, 0, 0);
  session_stop(L, "interrupted!");
}

void session_interrupt(lua_State *L) {
  int flag = LUA_MASKCALL | LUA_MASKRET | LUA_MASKLINE | LUA_MASKCOUNT;
  lua_sethook(L, stop_hook, flag, 1);
}

static int docall(lua_State *L, int nargs, int nres, int traceback) {
  int base = lua_gettop(L) - nargs;
  lua_pushcfunction(L, traceback ? msghandler_traceback : msghandler_plain);
  lua_insert(L, base);
  int status = lua_pcall(L, nargs, nres, base);
  lua_remove(L, base);
  return status;
}

/* prints what a chunk returned, and keeps the first value in `_` (as IPython and Python's
 * prompt do); quiet (a trailing `;`) keeps and prints nothing */
static int print_results(lua_State *L, int base, int quiet) {
  int n = lua_gettop(L) - base;
  if (n <= 0 || quiet) return LUA_OK;
  lua_pushvalue(L, base + 1);
  lua_setglobal(L, "_");
  luaL_checkstack(L, LUA_MINSTACK, "too many results to print");
  lua_getglobal(L, "print");
  lua_insert(L, base + 1);
  return lua_pcall(L, n, 0, 0);
}

int session_run_chunk(lua_State *L, const char *code, size_t len, const char *name,
                      int want_results, int traceback, char **err) {
  int base = lua_gettop(L);
  int status = LUA_ERRSYNTAX;
  /* the last error's traceback is this chunk's, or none (:tb itself leaves it) */
  if (!(len >= 5 && strncmp(code, "--:tb", 5) == 0)) {
    lua_pushnil(L);
    lua_setfield(L, LUA_REGISTRYINDEX, LAST_TRACEBACK);
  }
  size_t end = len; /* a trailing `;` suppresses the printing, as in IPython */
  while (end > 0 && (code[end - 1] == ' ' || code[end - 1] == '\t' || code[end - 1] == '\n')) end--;
  int quiet = end > 0 && code[end - 1] == ';';
  if (want_results) { /* a bare expression prints its value, as in lua.c */
    const char *body = code;
    size_t blen = len;
    if (blen > 0 && body[0] == '=') {
      body++;
      blen--;
    }
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    luaL_addstring(&b, "return ");
    luaL_addlstring(&b, body, blen);
    luaL_pushresult(&b);
    size_t rl;
    const char *ret = lua_tolstring(L, -1, &rl);
    status = luaL_loadbuffer(L, ret, rl, name);
    if (status == LUA_OK && strcmp(name, "=stdin") == 0) chunks_keep(L, -1, ret, rl);
    lua_remove(L, -2);
    if (status != LUA_OK) lua_pop(L, 1);
  }
  if (status != LUA_OK) {
    status = luaL_loadbuffer(L, code, len, name);
    /* the stepper shows its lines later (l in a function defined here) */
    if (status == LUA_OK && strcmp(name, "=stdin") == 0) chunks_keep(L, -1, code, len);
  }
  if (status == LUA_OK) status = docall(L, 0, LUA_MULTRET, traceback);
  if (status == LUA_OK && want_results) status = print_results(L, base, quiet);
  if (status != LUA_OK) {
    *err = take_error(L);
    lua_settop(L, base);
    return -1;
  }
  lua_settop(L, base);
  return 0;
}

int session_run_file(lua_State *L, const char *path, char **err) {
  int status = luaL_loadfile(L, path);
  if (status == LUA_OK) status = docall(L, 0, 0, 1);
  if (status != LUA_OK) {
    *err = take_error(L);
    return -1;
  }
  return 0;
}
