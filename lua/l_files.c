/* lab._list_files(root): the regular files under a directory, walked with opendir/readdir
 * and lstat, so no shell ever sees the path (lab.data's corpus of the project's sources was
 * `find '<root>' ...` through io.popen: a quote in the path ran a command). Symbolic links
 * are not followed (find's default), so a link cycle cannot make the walk endless. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lab_lua.h"

enum { MAX_DEPTH = 64 };

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* (lab_lua.h) The directory is closed before the caller walks on, so a Lua error later
 * leaks nothing of it. */
char **ll_read_dir(const char *dir, size_t *count) {
  DIR *d = opendir(dir);
  if (!d) return NULL;
  size_t n = 0, cap = 16;
  char **names = malloc(cap * sizeof *names);
  struct dirent *e;
  while (names && (e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    if (n == cap) {
      char **more = realloc(names, 2 * cap * sizeof *names);
      if (!more) break;
      names = more;
      cap *= 2;
    }
    names[n] = strdup(e->d_name);
    if (names[n]) n++;
  }
  closedir(d);
  if (!names) {
    errno = ENOMEM;
    return NULL;
  }
  qsort(names, n, sizeof *names, cmp_str);
  *count = n;
  return names;
}

void ll_free_dir(char **names, size_t n) {
  for (size_t i = 0; i < n; i++) free(names[i]);
  free(names);
}

/* appends the regular files under dir to the table at the top of L's stack; -1 (errno set)
 * when dir itself cannot be read (below the root such a directory is skipped, as find does).
 * (Only lua_pushstring can raise here, on memory exhaustion; the name lists of the
 * directories being walked would then be lost, which is the one leak this accepts.) */
static int walk(lua_State *L, const char *dir, int depth) {
  size_t n = 0;
  char **names = ll_read_dir(dir, &n);
  if (!names) return -1;
  const char *sep = dir[strlen(dir) - 1] == '/' ? "" : "/";
  for (size_t i = 0; i < n; i++) {
    char path[PATH_MAX];
    int len = snprintf(path, sizeof path, "%s%s%s", dir, sep, names[i]);
    struct stat st;
    if (len < 0 || (size_t)len >= sizeof path || lstat(path, &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      if (depth < MAX_DEPTH) (void)walk(L, path, depth + 1);
    } else if (S_ISREG(st.st_mode)) {
      lua_pushstring(L, path);
      lua_rawseti(L, -2, (lua_Integer)lua_rawlen(L, -2) + 1);
    }
  }
  ll_free_dir(names, n);
  return 0;
}

/* lab._list_files(root) -> sorted list of the regular files' paths (root/..../name), or nil
 * and the reason when root is not a readable directory */
static int l_list_files(lua_State *L) {
  const char *root = ll_check_path(L, 1, "list_files");
  struct stat st;
  const char *why = NULL;
  if (!*root) why = "an empty path";
  else if (stat(root, &st) != 0) why = strerror(errno);
  else if (!S_ISDIR(st.st_mode)) why = "not a directory";
  if (why) {
    lua_pushnil(L);
    lua_pushstring(L, why);
    return 2;
  }
  lua_newtable(L);
  if (walk(L, root, 0) < 0) {
    lua_pushnil(L);
    lua_pushstring(L, strerror(errno));
    return 2;
  }
  return 1;
}

void ll_register_files(lua_State *L) {
  lua_pushcfunction(L, l_list_files);
  lua_setfield(L, -2, "_list_files");
}
