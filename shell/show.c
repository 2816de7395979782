/* Compact, bounded text for Lua values at the REPL (see show.h). Built in a plain C string:
 * Lua's buffers cannot be nested with other values pushed between. */
#include "show.h"

#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>

#define SHOW_ITEMS 8   /* entries shown per table before ", ..." */
#define SHOW_DEPTH 2   /* nested tables shown before {...} */
#define SHOW_CHARS 240 /* a table's whole text, before "..." */

typedef struct {
  char *s;
  size_t len, cap;
} text;

static void add(text *t, const char *s, size_t n) {
  if (t->len + n + 1 > t->cap) {
    size_t cap = (t->len + n + 1) * 2;
    char *ns = realloc(t->s, cap);
    if (!ns) return;
    t->s = ns;
    t->cap = cap;
  }
  memcpy(t->s + t->len, s, n);
  t->len += n;
  t->s[t->len] = 0;
}
static void adds(text *t, const char *s) { add(t, s, strlen(s)); }

static void add_value(lua_State *L, text *t, int idx, int depth, int in_table);

/* a plain table: no __tostring or __name of its own (modules, tensors print themselves) */
static int plain_table(lua_State *L, int idx) {
  if (!lua_istable(L, idx)) return 0;
  if (!lua_getmetatable(L, idx)) return 1;
  int plain = lua_getfield(L, -1, "__tostring") == LUA_TNIL;
  lua_pop(L, 1);
  plain = plain && lua_getfield(L, -1, "__name") == LUA_TNIL;
  lua_pop(L, 2);
  return plain;
}

static int item_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int is_identifier(const char *s) {
  if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_')) return 0;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_')) return 0;
  return 1;
}

static void add_table(lua_State *L, text *t, int idx, int depth) {
  if (depth >= SHOW_DEPTH) {
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
    add_value(L, t, lua_gettop(L), depth + 1, 1);
    lua_pop(L, 1);
  }
  /* then the other keys as "key = value" texts, sorted, so every rank shows the same order */
  int cap = 16, nk = 0;
  char **items = malloc(sizeof *items * (size_t)cap);
  lua_pushnil(L);
  while (items && lua_next(L, idx)) {
    int k = lua_gettop(L) - 1, v = lua_gettop(L);
    if (!(lua_isinteger(L, k) && lua_tointeger(L, k) >= 1 && lua_tointeger(L, k) <= n) && nk < 4 * SHOW_ITEMS) {
      text it = {0};
      if (lua_type(L, k) == LUA_TSTRING && is_identifier(lua_tostring(L, k))) {
        adds(&it, lua_tostring(L, k));
      } else {
        adds(&it, "[");
        add_value(L, &it, k, SHOW_DEPTH, 1);
        adds(&it, "]");
      }
      adds(&it, " = ");
      add_value(L, &it, v, depth + 1, 1);
      if (nk == cap) {
        char **grown = realloc(items, sizeof *items * (size_t)(cap *= 2));
        if (grown) items = grown;
      }
      if (nk < cap && it.s) items[nk++] = it.s;
      else free(it.s);
    } else if (nk >= 4 * SHOW_ITEMS) {
      more = 1;
    }
    lua_pop(L, 1); /* the value; the key stays for lua_next */
  }
  if (items) qsort(items, (size_t)nk, sizeof *items, item_cmp);
  for (int i = 0; i < nk; i++) {
    if (shown < SHOW_ITEMS) {
      if (shown++) adds(t, ", ");
      adds(t, items[i]);
    } else {
      more = 1;
    }
    free(items[i]);
  }
  free(items);
  if (more) adds(t, shown ? ", ..." : "...");
  adds(t, "}");
}

static void add_value(lua_State *L, text *t, int idx, int depth, int in_table) {
  idx = lua_absindex(L, idx);
  if (plain_table(L, idx)) {
    add_table(L, t, idx, depth);
    return;
  }
  if (in_table && lua_type(L, idx) == LUA_TSTRING) {
    adds(t, "\"");
    adds(t, lua_tostring(L, idx));
    adds(t, "\"");
    return;
  }
  size_t len;
  const char *s = luaL_tolstring(L, idx, &len);
  const char *nl = in_table ? memchr(s, '\n', len) : NULL;
  if (nl) { /* a tensor inside a table: its first line */
    add(t, s, (size_t)(nl - s));
    adds(t, " ...");
  } else {
    add(t, s, len);
  }
  lua_pop(L, 1);
}

void show_value(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  text t = {0};
  add_value(L, &t, idx, 0, 0);
  if (t.s && plain_table(L, idx) && t.len > SHOW_CHARS) { /* bounded: a huge table is cut */
    t.len = SHOW_CHARS;
    t.s[t.len] = 0;
    adds(&t, "...}");
  }
  lua_pushlstring(L, t.s ? t.s : "", t.len);
  free(t.s);
}

void show_value_short(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  text t = {0};
  add_value(L, &t, idx, 0, 1);
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

void show_install_print(lua_State *L) {
  lua_pushcfunction(L, show_print);
  lua_setglobal(L, "print");
}
