/* One frame of a paused rank's stack, as the stepper shows it (see stepper_frames.h). */
#define _GNU_SOURCE
#include "stepper_frames.h"

#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chunks.h"
#include "runtime/lab.h"
#include "show.h"

int frame_exists(lua_State *L, int level) {
  lua_Debug ar;
  return level >= 0 && lua_getstack(L, level, &ar);
}

/* line n of the frame's source: its file (read again each time: at human speed caching is not
 * worth it), or the kept text of a chunk typed at the prompt (shell/chunks.c); a position
 * shows it without its indentation, a listing (l) with it; 0 when there is no such line */
static int source_line(const char *src, const char *kept, int n, char *buf, size_t size, int keep_indent) {
  buf[0] = 0;
  char line[480];
  if (kept) {
    const char *p = kept;
    for (int i = 1; i < n && p; i++)
      if ((p = strchr(p, '\n'))) p++;
    if (!p || !*p || n < 1) return 0;
    snprintf(line, sizeof line, "%.*s", (int)strcspn(p, "\r\n"), p);
  } else {
    FILE *f = src && src[0] == '@' ? fopen(src + 1, "r") : NULL;
    if (!f) return 0;
    int found = 0;
    for (int i = 1; !found && fgets(line, sizeof line, f); i++) found = i == n;
    fclose(f);
    if (!found) return 0;
    line[strcspn(line, "\r\n")] = 0;
  }
  const char *p = line;
  while (!keep_indent && (*p == ' ' || *p == '\t')) p++;
  snprintf(buf, size, "%s", p);
  return 1;
}

/* pushes the kept text of the frame's chunk when it was typed at the prompt; NULL (nothing
 * pushed) for a file or a C function */
static const char *push_kept(lua_State *L, lua_Debug *ar) {
  if (ar->source[0] != '=' || !lua_getinfo(L, "f", ar)) return NULL;
  const char *kept = chunks_push_text_of(L, -1);
  lua_remove(L, kept ? -2 : -1);
  return kept;
}

void frame_position(lua_State *L, int level, const char *where, char *buf, size_t size) {
  lua_Debug ar;
  if (level >= 0 && lua_getstack(L, level, &ar) && lua_getinfo(L, "Sln", &ar)) {
    char text[512];
    const char *kept = push_kept(L, &ar);
    source_line(ar.source, kept, ar.currentline, text, sizeof text, 0);
    if (kept) lua_pop(L, 1);
    char line[32] = "";
    if (ar.currentline > 0) snprintf(line, sizeof line, ":%d", ar.currentline);
    snprintf(buf, size, "%s%s%s%s  %s%s%s", ar.short_src, line, ar.name ? " in " : "", ar.name ? ar.name : "", text,
             where ? "   <- " : "", where ? where : "");
  } else {
    snprintf(buf, size, "%s", where ? where : "(no frame)");
  }
}

const void *frame_function(lua_State *L, int level) {
  lua_Debug ar;
  if (!lua_getstack(L, level, &ar) || !lua_getinfo(L, "f", &ar)) return NULL;
  const void *fn = lua_topointer(L, -1);
  lua_pop(L, 1);
  return fn;
}

int frame_in_library(lua_State *L, int level) {
  lua_Debug ar;
  return lua_getstack(L, level, &ar) && lua_getinfo(L, "S", &ar) && strstr(ar.source, "/lua/lab/") != NULL;
}

int frame_push_scope(lua_State *L, int level) {
  lua_Debug ar;
  int frame = level >= 0 && lua_getstack(L, level, &ar);
  /* the frame's upvalues, then its locals (a later local of the same name shadows), in a
   * table whose misses go to the globals */
  lua_newtable(L);
  int env = lua_gettop(L);
  if (frame) {
    lua_getinfo(L, "f", &ar);
    int fn = lua_gettop(L);
    const char *name;
    for (int i = 1; (name = lua_getupvalue(L, fn, i)); i++) lua_setfield(L, env, name);
    for (int i = 1; (name = lua_getlocal(L, &ar, i)); i++) {
      if (name[0] != '(') lua_setfield(L, env, name);
      else lua_pop(L, 1);
    }
    lua_pop(L, 1);
  }
  lua_newtable(L);
  lua_pushglobaltable(L);
  lua_setfield(L, -2, "__index");
  lua_setmetatable(L, env);
  return env;
}

char *frame_eval(lua_State *L, int level, const char *expr, const char *at_pause, int *ok) {
  int top = lua_gettop(L);
  int env = frame_push_scope(L, level);
  char *code = NULL;
  if (asprintf(&code, "return %s", expr) < 0) code = NULL;
  int rc = code ? luaL_loadbuffer(L, code, strlen(code), "=p") : LUA_ERRMEM;
  free(code);
  int base = lua_gettop(L);
  if (rc == LUA_OK) {
    lua_pushvalue(L, env);
    lua_setupvalue(L, -2, 1);
    /* at a pause every other rank waits for the next command, not in a collective: one started
     * here would wait for them forever (or pause again inside its own wait) */
    if (at_pause)
      lab_dist_refuse_collectives(at_pause, "inside a stepper expression would wait for the other ranks, which are "
                                            "paused at the prompt and never join it; run it as a line of the "
                                            "script, or at the REPL prompt");
    rc = lua_pcall(L, 0, LUA_MULTRET, 0);
    lab_dist_refuse_collectives(NULL, NULL);
  }
  /* every value, tab-separated as print does (p step, rank) */
  int nres = lua_gettop(L) - base + 1; /* the function slot holds the first result or the error */
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  if (rc != LUA_OK) luaL_addstring(&b, "error: ");
  for (int i = 0; i < nres; i++) {
    if (i) luaL_addchar(&b, '\t');
    luaL_tolstring(L, base + i, NULL);
    luaL_addvalue(&b);
  }
  if (nres == 0) luaL_addstring(&b, "(no value)");
  luaL_pushresult(&b);
  char *out = strdup(lua_tostring(L, -1));
  lua_settop(L, top);
  if (ok) *ok = rc == LUA_OK;
  return out;
}

/* locals: strings quoted, tensors by their first line, tables compact */
static char *locals_of(lua_State *L, lua_Debug *ar, int frame) {
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  const char *name;
  for (int i = 1; frame && (name = lua_getlocal(L, ar, i)); i++) {
    if (name[0] != '(') {
      show_value_short(L, -1);
      lua_pushfstring(L, "%s = %s\n", name, lua_tostring(L, -1));
      lua_remove(L, -2); /* the shown text */
      lua_remove(L, -2); /* the local */
      luaL_addvalue(&b);
    } else {
      lua_pop(L, 1);
    }
  }
  luaL_pushresult(&b);
  char *out = strdup(lua_tostring(L, -1));
  lua_pop(L, 1);
  return out;
}

/* l [N]: seven lines around the frame's line, or around line N of its file */
static char *listing(lua_State *L, lua_Debug *ar, int frame, const char *arg) {
  size_t cap = 4096, len = 0;
  char *out = malloc(cap);
  if (!out) return NULL;
  out[0] = 0;
  const char *kept = frame ? push_kept(L, ar) : NULL; /* a function typed at the prompt */
  if (frame && !kept && ar->source[0] != '@') { /* a C function, or a chunk no longer kept */
    snprintf(out, cap, "(no source kept for %s)\n", ar->short_src);
    return out;
  }
  int around = frame ? ar->currentline : 0;
  if (arg && atoi(arg) > 0) around = atoi(arg);
  for (int n = frame ? around - 3 : 0; frame && n <= around + 3; n++) {
    if (n < 1) continue;
    char text[512];
    if (!source_line(ar->source, kept, n, text, sizeof text, 1) && n > around) break; /* past the end */
    len += (size_t)snprintf(out + len, cap - len, "%s%4d  %s\n", n == ar->currentline ? "->" : "  ", n, text);
    if (len >= cap) break;
  }
  if (kept) lua_pop(L, 1);
  return out;
}

char *frame_backtrace(lua_State *L, int base, int selected, const char *where) {
  enum { ENDS = 12 }; /* a deep stack shows its newest and oldest frames, and the selected one */
  int n = 0;
  while (frame_exists(L, base + n)) n++;
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  luaL_addstring(&b, "stack traceback:\n");
  for (int i = 0; i < n; i++) {
    if (i >= ENDS && i < n - ENDS && i != selected) { /* a run of frames left out */
      int j = i;
      while (j < n - ENDS && j != selected) j++;
      lua_pushfstring(L, "  ... (%d frames)\n", j - i);
      luaL_addvalue(&b);
      i = j - 1;
      continue;
    }
    char pos[1024];
    frame_position(L, base + i, i == 0 ? where : NULL, pos, sizeof pos);
    lua_pushfstring(L, "%s #%d %s\n", i == selected ? ">" : " ", i, pos);
    luaL_addvalue(&b);
  }
  luaL_pushresult(&b);
  char *out = strdup(lua_tostring(L, -1));
  lua_pop(L, 1);
  return out;
}

char *frame_answer(lua_State *L, const char *cmd, int level) {
  lua_Debug ar;
  int frame = level >= 0 && lua_getstack(L, level, &ar) && lua_getinfo(L, "Sl", &ar);
  if (strcmp(cmd, "locals") == 0) return locals_of(L, &ar, frame);
  if (strcmp(cmd, "l") == 0 || strcmp(cmd, "list") == 0) return listing(L, &ar, frame, NULL);
  if (strncmp(cmd, "l ", 2) == 0) return listing(L, &ar, frame, cmd + 2);
  if (strncmp(cmd, "p ", 2) == 0) {
    char *v = frame_eval(L, level, cmd + 2, "p", NULL), *out = NULL;
    if (v && asprintf(&out, "%s\n", v) < 0) out = NULL;
    free(v);
    return out;
  }
  return NULL;
}
