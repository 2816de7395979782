/* IPython's habits at the llmlab prompt: `?lab.dist.all_reduce` and `lab.dist.all_reduce?`
 * show a docstring (lua/lab/help.lua), `:time code` and `:timeit code` time code on every
 * targeted rank and report min / median / max over the ranks, `:tb` shows each rank's last
 * traceback (lua/lab/magic.lua). Each becomes an ordinary chunk, so it runs on the targeted
 * ranks with their group, its output grouped as any chunk's. */
#define _GNU_SOURCE
#include "repl_magic.h"

#include <stdlib.h>
#include <string.h>

/* a name help can look up: letters, digits, '_', '.' and ':' */
static int is_name(const char *s, size_t n) {
  if (n == 0 || (s[0] >= '0' && s[0] <= '9')) return 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
          c == ':'))
      return 0;
  }
  return 1;
}

/* code as a Lua long string whose brackets do not occur in it: [==[code]==] */
static char *long_string(const char *code) {
  char close[40];
  int level = 0;
  for (;; level++) {
    snprintf(close, sizeof close, "]%.*s]", level, "==============================");
    if (!strstr(code, close) || level >= 30) break;
  }
  char *out = NULL;
  if (asprintf(&out, "[%.*s[%s%s", level, "==============================", code, close) < 0) return NULL;
  return out;
}

static char *help_message(const char *name, size_t n, const char *target) {
  char *msg = NULL;
  /* a method named with ':' (x:matmul) is looked up as a field */
  char *expr = strndup(name, n);
  for (char *c = expr; *c; c++)
    if (*c == ':') *c = '.';
  /* a name that cannot be read (a field of nil) is shown as nil, with what was typed */
  if (asprintf(&msg, "C%s\ndo local ok, v = pcall(function() return %s end); lab.help(ok and v or nil, \"%.*s\") end",
               target, expr, (int)n, name) < 0)
    msg = NULL;
  free(expr);
  return msg;
}

char *magic_message(const char *line, const char *target, FILE *out, int *handled) {
  *handled = 0;
  size_t len = strlen(line);
  while (len > 0 && (line[len - 1] == ' ' || line[len - 1] == '\t')) len--;
  const char *p = line;
  while (*p == ' ' || *p == '\t') p++;
  size_t plen = len - (size_t)(p - line);
  /* ?name, ??name, name?, name?? */
  if (plen > 1 && p[0] == '?') {
    size_t skip = p[1] == '?' ? 2 : 1;
    if (is_name(p + skip, plen - skip)) {
      *handled = 1;
      return help_message(p + skip, plen - skip, target);
    }
  }
  if (plen > 1 && p[plen - 1] == '?') {
    size_t n = plen - 1;
    if (n > 0 && p[n - 1] == '?') n--;
    if (is_name(p, n)) {
      *handled = 1;
      return help_message(p, n, target);
    }
  }
  const char *fn = NULL;
  size_t cmd = 0;
  if (strncmp(line, ":timeit", 7) == 0 && (line[7] == 0 || line[7] == ' ' || line[7] == '\t')) fn = "timeit", cmd = 7;
  else if (strncmp(line, ":time", 5) == 0 && (line[5] == 0 || line[5] == ' ' || line[5] == '\t')) fn = "time", cmd = 5;
  if (fn) {
    *handled = 1;
    const char *code = line + cmd;
    while (*code == ' ' || *code == '\t') code++;
    if (!*code) {
      fprintf(out, "error: :%s: give the code to time (e.g. :%s lab.randn(256, 256):matmul(lab.randn(256, 256)))\n",
              fn, fn);
      return NULL;
    }
    char *lit = long_string(code), *msg = NULL;
    if (lit && asprintf(&msg, "C%s\nrequire(\"lab.magic\").%s(%s)", target, fn, lit) < 0) msg = NULL;
    free(lit);
    return msg;
  }
  if (strncmp(line, ":tb", 3) == 0 && (line[3] == 0 || line[3] == ' ')) {
    *handled = 1;
    char *msg = NULL;
    /* "--:tb" first: the session keeps the last error's traceback through this chunk */
    if (asprintf(&msg, "C%s\n--:tb\nrequire(\"lab.magic\").tb()", target) < 0) msg = NULL;
    return msg;
  }
  return NULL;
}
