/* Completion: walk the prefix's dotted path from the names in scope (the globals, or at the
 * stepper's prompt the selected frame's locals and upvalues with the globals behind them),
 * then list the keys of the table it names, and of its metatable's __index table (tensor
 * methods, module methods). */
#include "completion.h"

#include <readline/readline.h>
#include <stdlib.h>
#include <string.h>

#include "stepper_frames.h"

static lua_State *state;
static int frame_level = -1; /* the stepper's selected frame while it reads a command */

void completion_set_frame(int level) { frame_level = level; }

/* pushes the value the dotted path names from the scope at index root, or nil */
static void push_path(lua_State *L, int root, const char *path, size_t len) {
  lua_pushvalue(L, root);
  size_t i = 0;
  while (i < len) {
    size_t j = i;
    while (j < len && path[j] != '.' && path[j] != ':') j++;
    if (!lua_istable(L, -1) && !lua_isuserdata(L, -1)) {
      lua_pop(L, 1);
      lua_pushnil(L);
      return;
    }
    lua_pushlstring(L, path + i, j - i);
    if (lua_istable(L, -2) && i > 0) lua_rawget(L, -2);
    else lua_gettable(L, -2); /* the scope (globals behind the frame's names), or userdata's
                               * __index: protected by the caller */
    lua_remove(L, -2);
    i = j + 1;
  }
}

static void add(char ***out, size_t *n, size_t *cap, const char *s) {
  for (size_t i = 0; i < *n; i++)
    if (strcmp((*out)[i], s) == 0) return;
  if (*n + 2 > *cap) {
    *cap = *cap ? *cap * 2 : 32;
    *out = realloc(*out, sizeof **out * *cap);
  }
  (*out)[(*n)++] = strdup(s);
  (*out)[*n] = NULL;
}

static void collect_keys(lua_State *L, int idx, const char *base, size_t blen, char sep, const char *prefix,
                         char ***out, size_t *n, size_t *cap) {
  idx = lua_absindex(L, idx);
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    if (lua_type(L, -2) == LUA_TSTRING) {
      const char *k = lua_tostring(L, -2);
      if (strncmp(k, prefix, strlen(prefix)) == 0 && k[0] != '_') {
        char buf[512];
        snprintf(buf, sizeof buf, "%.*s%s%s", (int)blen, base, blen ? (char[]){sep, 0} : "", k);
        add(out, n, cap, buf);
      }
    }
    lua_pop(L, 1);
  }
}

static int candidates_p(lua_State *L) {
  const char *text = lua_touserdata(L, 1);
  char ***out = lua_touserdata(L, 2);
  size_t n = 0, cap = 0;
  const char *dot = strrchr(text, '.'), *colon = strrchr(text, ':');
  const char *cut = dot > colon ? dot : colon;
  size_t blen = cut ? (size_t)(cut - text) : 0;
  const char *prefix = cut ? cut + 1 : text;
  char sep = cut ? *cut : '.';
  push_path(L, 3, text, blen);
  int v = lua_gettop(L);
  if (lua_istable(L, v)) collect_keys(L, v, text, blen, sep, prefix, out, &n, &cap);
  if (lua_isuserdata(L, v) && sep == '.') { /* fields a tensor computes (not in any table) */
    static const char *const fields[] = {"shape", "dtype", "ndim", "device", "grad", "grad_fn", "is_leaf", "requires_grad", NULL};
    for (int i = 0; fields[i]; i++) {
      if (strncmp(fields[i], prefix, strlen(prefix)) != 0) continue;
      lua_getfield(L, v, fields[i]); /* raises inside the caller's pcall if it is not a tensor */
      if (!lua_isnil(L, -1)) {
        char buf[512];
        snprintf(buf, sizeof buf, "%.*s.%s", (int)blen, text, fields[i]);
        add(out, &n, &cap, buf);
      }
      lua_pop(L, 1);
    }
  }
  if (lua_getmetatable(L, v)) {
    lua_getfield(L, -1, "methods"); /* tensors keep their methods here */
    if (lua_istable(L, -1)) collect_keys(L, -1, text, blen, sep, prefix, out, &n, &cap);
    lua_pop(L, 1);
    lua_getfield(L, -1, "__index");
    if (lua_istable(L, -1)) collect_keys(L, -1, text, blen, sep, prefix, out, &n, &cap);
    /* an __index function (ModuleList's integer keys): the class itself holds the methods */
    else if (lua_isfunction(L, -1)) collect_keys(L, -2, text, blen, sep, prefix, out, &n, &cap);
    lua_pop(L, 2);
  }
  return 0;
}

char **completion_candidates(lua_State *L, const char *text) {
  char **out = NULL;
  int top = lua_gettop(L);
  /* the scope is made here, before the pcall adds a stack level under the stepper's frame */
  int scope = frame_level >= 0 ? frame_push_scope(L, frame_level) : (lua_pushglobaltable(L), lua_gettop(L));
  lua_pushcfunction(L, candidates_p);
  lua_pushlightuserdata(L, (void *)text);
  lua_pushlightuserdata(L, &out);
  lua_pushvalue(L, scope);
  lua_pcall(L, 3, 0, 0); /* an __index that raises just means no candidates */
  lua_settop(L, top);
  return out;
}

static char **matches;
static size_t next_match;

static char *generator(const char *text, int st) {
  if (st == 0) {
    if (matches) {
      for (size_t i = next_match; matches[i]; i++) free(matches[i]);
      free(matches);
    }
    matches = completion_candidates(state, text);
    next_match = 0;
  }
  if (!matches || !matches[next_match]) return NULL;
  return matches[next_match++]; /* readline frees what it receives */
}

/* the REPL's own commands, offered when the line starts with ':' */
static const char *const commands[] = {":help", ":quit", ":ranks", ":run", ":step", ":tb", ":time", ":timeit",
                                       ":watchdog", ":who", NULL};
static size_t next_command;

static char *command_generator(const char *text, int st) {
  if (st == 0) next_command = 0;
  while (commands[next_command]) {
    const char *c = commands[next_command++];
    if (strncmp(c, text, strlen(text)) == 0) return strdup(c);
  }
  return NULL;
}

/* after :run or :step the words are a file name and its arguments */
static int wants_file_name(void) {
  const char *l = rl_line_buffer;
  return strncmp(l, ":run ", 5) == 0 || strncmp(l, ":step ", 6) == 0;
}

/* a file name breaks only at spaces (a path's '/' and '-' are part of it) */
static char *word_breaks(void) {
  return wants_file_name() ? " \t\n" : NULL;
}

static char **complete(const char *text, int start, int end) {
  (void)end;
  rl_attempted_completion_over = 1; /* no file names, but after :run and :step */
  rl_completion_append_character = '\0';
  if (start > 0 && wants_file_name()) {
    rl_filename_completion_desired = 1;
    return rl_completion_matches(text, rl_filename_completion_function);
  }
  if (start == 0 && text[0] == ':') return rl_completion_matches(text, command_generator);
  return rl_completion_matches(text, generator);
}

void completion_install(lua_State *L) {
  state = L;
  rl_basic_word_break_characters = " \t\n\"\\'`@$><=;|&{(,+-*/%^#~[]!?"; /* ! of the stepper's !stmt, ? of ?f */
  rl_attempted_completion_function = complete;
  rl_completion_word_break_hook = word_breaks;
}
