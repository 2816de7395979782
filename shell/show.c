/* Compact, bounded text for Lua values at the REPL (see show.h). Built in C strings that
 * open_memstream grows: Lua's buffers cannot be nested with other values pushed between. */
#include "show.h"

#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SHOW_ITEMS 8     /* entries shown per table before ", ..." */
#define SHOW_DEPTH 2     /* nested tables shown before {...}, when deeper ones would not fit */
#define SHOW_MAX_DEPTH 6 /* how deep a small table is shown */
#define SHOW_CHARS 240   /* a table's whole text, before "..." */
#define SHOW_KEYS 4096   /* keys sorted per table: past this many, the first SHOW_KEYS sorted */
#define NAME_DEPTH 3     /* how deep the search for a function's name goes (lab.nn.Linear.init) */

/* a growing string: open_memstream does the growing; s and len are final after text_end */
typedef struct {
  char *s;
  size_t len;
  FILE *f;
} text;

static void text_begin(text *t) {
  t->s = NULL;
  t->len = 0;
  t->f = open_memstream(&t->s, &t->len);
}

static void text_end(text *t) {
  if (t->f) fclose(t->f);
  t->f = NULL;
}

static void add(text *t, const char *s, size_t n) {
  if (t->f) fwrite(s, 1, n, t->f);
}
static void adds(text *t, const char *s) { add(t, s, strlen(s)); }

static void add_value(lua_State *L, text *t, int idx, int depth, int max_depth, int in_table);

/* a plain table: no __tostring or __name of its own (modules, tensors print themselves) */
static int plain_table(lua_State *L, int idx) {
  if (!lua_istable(L, idx)) return 0;
  if (!lua_getmetatable(L, idx)) return 1;
  int has_tostring = lua_getfield(L, -1, "__tostring") != LUA_TNIL;
  int has_name = lua_getfield(L, -2, "__name") != LUA_TNIL;
  lua_pop(L, 3); /* both fields and the metatable, whichever were found */
  return !has_tostring && !has_name;
}

static int item_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int is_identifier(const char *s) {
  if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_')) return 0;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_')) return 0;
  return 1;
}

/* ---- functions by name: the shortest path from the globals (lab.dist.all_reduce) ---- */

/* Breadth-first over the tables reachable from _G up to NAME_DEPTH keys deep (identifier
 * keys only, package.loaded skipped: it repeats every module under another name), so the same
 * function has the same name on every rank; pushes the name or nothing (returns 0). */
static int function_name(lua_State *L, int fidx) {
  fidx = lua_absindex(L, fidx);
  int top = lua_gettop(L);
  lua_newtable(L); /* seen tables */
  int seen = lua_gettop(L);
  lua_newtable(L); /* queue: {table, "path"} pairs as a flat array */
  int queue = lua_gettop(L);
  lua_Integer head = 1, tail = 1;
  lua_pushglobaltable(L);
  lua_rawseti(L, queue, tail++);
  lua_pushstring(L, "");
  lua_rawseti(L, queue, tail++);
  lua_pushglobaltable(L);
  lua_pushboolean(L, 1);
  lua_rawset(L, seen);
  while (head < tail) {
    lua_rawgeti(L, queue, head++);
    int tab = lua_gettop(L);
    lua_rawgeti(L, queue, head++);
    const char *path = lua_tostring(L, -1);
    int depth = 0;
    for (const char *p = path; *p; p++) depth += *p == '.';
    if (*path) depth++;
    /* sorted keys, so two names at the same depth resolve the same way everywhere */
    int cap = 64, nk = 0;
    char **keys = malloc(sizeof *keys * (size_t)cap);
    lua_pushnil(L);
    while (keys && lua_next(L, tab)) {
      lua_pop(L, 1);
      if (lua_type(L, -1) != LUA_TSTRING || !is_identifier(lua_tostring(L, -1))) continue;
      if (nk == cap) {
        char **grown = realloc(keys, sizeof *keys * (size_t)(cap *= 2));
        if (!grown) break;
        keys = grown;
      }
      keys[nk++] = strdup(lua_tostring(L, -1));
    }
    if (lua_gettop(L) > tab + 1) lua_settop(L, tab + 1); /* a break left the key */
    if (keys) qsort(keys, (size_t)nk, sizeof *keys, item_cmp);
    int found = 0;
    for (int i = 0; i < nk; i++) {
      if (!found && strcmp(keys[i], "_") != 0) { /* _ is the prompt's last value, not a name */
        lua_pushstring(L, keys[i]);
        lua_rawget(L, tab); /* raw: printing must not run a table's __index */
        if (lua_rawequal(L, -1, fidx)) {
          lua_settop(L, tab + 1);
          lua_pushfstring(L, "%s%s%s", path, *path ? "." : "", keys[i]);
          found = 1;
        } else if (lua_type(L, -1) == LUA_TTABLE && depth + 1 < NAME_DEPTH && strcmp(keys[i], "loaded") != 0) {
          lua_pushvalue(L, -1);
          if (lua_rawget(L, seen) == LUA_TNIL) {
            lua_pop(L, 1);
            lua_pushvalue(L, -1);
            lua_pushboolean(L, 1);
            lua_rawset(L, seen);
            lua_rawseti(L, queue, tail++);
            lua_pushfstring(L, "%s%s%s", path, *path ? "." : "", keys[i]);
            lua_rawseti(L, queue, tail++);
          } else {
            lua_pop(L, 2);
          }
        } else {
          lua_pop(L, 1);
        }
      }
      free(keys[i]);
    }
    free(keys);
    if (found) {
      lua_replace(L, top + 1);
      lua_settop(L, top + 1);
      return 1;
    }
    lua_settop(L, queue);
  }
  lua_settop(L, top);
  return 0;
}

static void add_function(lua_State *L, text *t, int idx) {
  if (function_name(L, idx)) {
    adds(t, "function ");
    adds(t, lua_tostring(L, -1));
    lua_pop(L, 1);
    return;
  }
  lua_Debug ar;
  lua_pushvalue(L, idx);
  if (lua_getinfo(L, ">S", &ar) && ar.what && strcmp(ar.what, "C") != 0) { /* where it was written */
    char buf[LUA_IDSIZE + 64];
    snprintf(buf, sizeof buf, "function <%s:%d>", ar.short_src, ar.linedefined);
    adds(t, buf);
  } else {
    adds(t, "builtin function"); /* a C function no table names: its address differs per rank */
  }
}

/* ---- tables ---- */

/* a key as the table shows it: name, or [value] (malloc'ed, NULL when out of memory) */
static char *key_text(lua_State *L, int k, int max_depth) {
  text key;
  text_begin(&key);
  if (lua_type(L, k) == LUA_TSTRING && is_identifier(lua_tostring(L, k))) {
    adds(&key, lua_tostring(L, k));
  } else {
    adds(&key, "[");
    add_value(L, &key, k, max_depth, max_depth, 1);
    adds(&key, "]");
  }
  text_end(&key);
  return key.s;
}

static void add_table(lua_State *L, text *t, int idx, int depth, int max_depth) {
  if (depth >= max_depth) {
    adds(t, "{...}");
    return;
  }
  adds(t, "{");
  lua_Integer n = (lua_Integer)lua_rawlen(L, idx);
  int shown = 0, more = 0;
  for (lua_Integer i = 1; i <= n; i++) { /* the sequence first, in order */
    if (shown == SHOW_ITEMS) {
      more = 1;
      break;
    }
    if (shown++) adds(t, ", ");
    lua_rawgeti(L, idx, i);
    add_value(L, t, lua_gettop(L), depth + 1, max_depth, 1);
    lua_pop(L, 1);
  }
  /* then the other keys, sorted by their text, so every rank shows the same ones in the same
   * order: all keys are sorted (up to SHOW_KEYS), not the first few lua_next happens to give */
  int cap = 16, nk = 0;
  char **keys = malloc(sizeof *keys * (size_t)cap);
  lua_pushnil(L);
  while (keys && lua_next(L, idx)) {
    int k = lua_gettop(L) - 1;
    lua_pop(L, 1); /* the value; the key stays for lua_next */
    if (lua_isinteger(L, k) && lua_tointeger(L, k) >= 1 && lua_tointeger(L, k) <= n) continue;
    if (nk >= SHOW_KEYS) {
      more = 1;
      continue;
    }
    char *key = key_text(L, k, max_depth);
    if (nk == cap) {
      char **grown = realloc(keys, sizeof *keys * (size_t)(cap *= 2));
      if (grown) keys = grown;
    }
    if (nk < cap && key) keys[nk++] = key;
    else free(key);
  }
  if (keys) qsort(keys, (size_t)nk, sizeof *keys, item_cmp);
  for (int i = 0; i < nk; i++) {
    if (shown < SHOW_ITEMS) { /* the value is looked up again by its key's text */
      if (shown++) adds(t, ", ");
      adds(t, keys[i]);
      adds(t, " = ");
      lua_pushnil(L);
      while (lua_next(L, idx)) { /* find the key whose text this is (few: SHOW_ITEMS per table) */
        char *key = key_text(L, lua_gettop(L) - 1, max_depth);
        int same = key && strcmp(key, keys[i]) == 0;
        free(key);
        if (same) {
          add_value(L, t, lua_gettop(L), depth + 1, max_depth, 1);
          lua_pop(L, 2);
          break;
        }
        lua_pop(L, 1);
      }
    } else {
      more = 1;
    }
    free(keys[i]);
  }
  free(keys);
  if (more) adds(t, shown ? ", ..." : "...");
  adds(t, "}");
}

static void add_value(lua_State *L, text *t, int idx, int depth, int max_depth, int in_table) {
  idx = lua_absindex(L, idx);
  if (plain_table(L, idx)) {
    add_table(L, t, idx, depth, max_depth);
    return;
  }
  if (in_table && lua_type(L, idx) == LUA_TSTRING) {
    adds(t, "\"");
    adds(t, lua_tostring(L, idx));
    adds(t, "\"");
    return;
  }
  if (lua_type(L, idx) == LUA_TFUNCTION) {
    add_function(L, t, idx);
    return;
  }
  size_t len;
  const char *s = luaL_tolstring(L, idx, &len);
  const char *nl = in_table ? memchr(s, '\n', len) : NULL;
  if (nl) { /* a tensor or module inside a table: its first line */
    add(t, s, (size_t)(nl - s));
    adds(t, " ...");
  } else {
    add(t, s, len);
  }
  lua_pop(L, 1);
}

/* A plain table as deep as fits: small nested tables whole ({a = {b = {c = 1}}}), big ones cut
 * at SHOW_DEPTH and then at SHOW_CHARS. */
static void add_top(lua_State *L, text *t, int idx, int in_table) {
  if (!plain_table(L, idx)) {
    add_value(L, t, idx, 0, SHOW_DEPTH, in_table);
    return;
  }
  for (int d = SHOW_MAX_DEPTH; d > SHOW_DEPTH; d--) {
    text deep;
    text_begin(&deep);
    add_value(L, &deep, idx, 0, d, in_table);
    text_end(&deep);
    int fits = deep.s && deep.len <= SHOW_CHARS;
    if (fits) add(t, deep.s, deep.len);
    free(deep.s);
    if (fits) return;
  }
  add_value(L, t, idx, 0, SHOW_DEPTH, in_table);
}

void show_value(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  text t;
  text_begin(&t);
  add_top(L, &t, idx, 0);
  text_end(&t);
  int cut = t.s && plain_table(L, idx) && t.len > SHOW_CHARS; /* bounded: a huge table is cut */
  lua_pushlstring(L, t.s ? t.s : "", cut ? SHOW_CHARS : t.len);
  if (cut) {
    lua_pushliteral(L, "...}");
    lua_concat(L, 2);
  }
  free(t.s);
}

void show_value_short(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  text t;
  text_begin(&t);
  add_value(L, &t, idx, 0, SHOW_DEPTH, 1);
  text_end(&t);
  lua_pushlstring(L, t.s ? t.s : "", t.len);
  free(t.s);
}

static int show_print(lua_State *L) {
  int n = lua_gettop(L);
  for (int i = 1; i <= n; i++) {
    show_value(L, i);
    size_t len;
    const char *s = lua_tolstring(L, -1, &len);
    if (i > 1) fputc('\t', stdout);
    fwrite(s, 1, len, stdout);
    lua_pop(L, 1);
  }
  fputc('\n', stdout);
  fflush(stdout); /* a line at a time, so rank 0 can show it while the chunk still runs */
  return 0;
}

static int show_text(lua_State *L) {
  luaL_checkany(L, 1);
  show_value(L, 1);
  return 1;
}

void show_register(lua_State *L) {
  lua_getglobal(L, "lab");
  if (lua_istable(L, -1)) {
    lua_pushcfunction(L, show_text);
    lua_setfield(L, -2, "_show");
  }
  lua_pop(L, 1);
}

void show_install_print(lua_State *L) {
  lua_pushcfunction(L, show_print);
  lua_setglobal(L, "print");
}
