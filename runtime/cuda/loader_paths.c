/* Where the CUDA libraries are looked for (loader.h gives the order and why): the directories,
 * built from the environment given, each kept only if it exists. Plain logic, no dlopen, so the
 * unit test runs it against a fake environment and a wheel-shaped tree. */
#define _GNU_SOURCE
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "loader.h"

typedef struct {
  char (*dirs)[1024];
  int n, max;
} dir_list;

static int is_dir(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static void add(dir_list *l, const char *d) {
  if (!d || !*d || l->n >= l->max || !is_dir(d)) return;
  for (int i = 0; i < l->n; i++)
    if (strcmp(l->dirs[i], d) == 0) return;
  if (snprintf(l->dirs[l->n], 1024, "%s", d) < 1024) l->n++; /* a longer path is left out */
}

/* every match of a glob pattern, in sorted order */
static void add_glob(dir_list *l, const char *pattern) {
  glob_t g;
  if (glob(pattern, GLOB_ONLYDIR, NULL, &g) != 0) return;
  for (size_t i = 0; i < g.gl_pathc; i++) add(l, g.gl_pathv[i]);
  globfree(&g);
}

/* a toolkit's library directories: lib64, lib, targets/<arch>-linux/lib */
static void add_toolkit(dir_list *l, const char *root) {
  if (!root || !*root) return;
  char p[1100];
  if (snprintf(p, sizeof p, "%s/lib64", root) < (int)sizeof p) add(l, p);
  if (snprintf(p, sizeof p, "%s/lib", root) < (int)sizeof p) add(l, p);
  if (snprintf(p, sizeof p, "%s/targets/*-linux/lib", root) < (int)sizeof p) add_glob(l, p);
}

/* the wheels' library directories under one site-packages pattern (may hold a glob) */
static void add_wheels(dir_list *l, const char *site) {
  char p[1100];
  if (snprintf(p, sizeof p, "%s/nvidia/*/lib", site) < (int)sizeof p) add_glob(l, p);
}

/* <prefix>/lib/python3.X/site-packages and dist-packages */
static void add_prefix_sites(dir_list *l, const char *prefix) {
  if (!prefix || !*prefix) return;
  char p[1100];
  if (snprintf(p, sizeof p, "%s/lib/python3*/site-packages", prefix) < (int)sizeof p) add_wheels(l, p);
  if (snprintf(p, sizeof p, "%s/lib/python3*/dist-packages", prefix) < (int)sizeof p) add_wheels(l, p);
}

/* the python3 first on PATH: its prefix (<bin>/..) as found on PATH (a venv's), and as the link
 * resolves (the base installation's) */
static void add_path_python(dir_list *l, const char *path) {
  if (!path) return;
  char buf[4096];
  snprintf(buf, sizeof buf, "%s", path);
  for (char *save = NULL, *d = strtok_r(buf, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
    char exe[1100];
    if (snprintf(exe, sizeof exe, "%s/python3", d) >= (int)sizeof exe || access(exe, X_OK) != 0) continue;
    char prefix[1100];
    if (snprintf(prefix, sizeof prefix, "%s/..", d) < (int)sizeof prefix) add_prefix_sites(l, prefix);
    char real[4096];
    if (realpath(exe, real)) {
      char *slash = strrchr(real, '/');
      if (slash) {
        *slash = 0;
        if (snprintf(prefix, sizeof prefix, "%s/..", real) < (int)sizeof prefix) add_prefix_sites(l, prefix);
      }
    }
    return;
  }
}

static void add_list(dir_list *l, const char *list, int wheels) {
  if (!list) return;
  char buf[4096];
  snprintf(buf, sizeof buf, "%s", list);
  for (char *save = NULL, *d = strtok_r(buf, ":", &save); d; d = strtok_r(NULL, ":", &save))
    if (wheels) add_wheels(l, d);
    else add(l, d);
}

int lab_cuda_search_dirs(lab_getenv_fn env, const char *toolkit_dir, char (*dirs)[1024], int max) {
  dir_list l = {dirs, 0, max};
  add_list(&l, env("LLMLAB_CUDA_LIBS"), 0);
  add_toolkit(&l, env("CUDA_HOME"));
  add_toolkit(&l, env("CUDA_PATH"));
  add_prefix_sites(&l, env("VIRTUAL_ENV"));
  add_prefix_sites(&l, env("CONDA_PREFIX"));
  add_path_python(&l, env("PATH"));
  add_list(&l, env("PYTHONPATH"), 1);
  const char *home = env("HOME");
  if (home && *home) {
    char p[1100];
    snprintf(p, sizeof p, "%s/.local", home);
    add_prefix_sites(&l, p);
  }
  add_prefix_sites(&l, "/usr/local");
  add_prefix_sites(&l, "/usr"); /* /usr/lib/python3/dist-packages too: python3* matches python3 */
  add_prefix_sites(&l, "/opt/conda");
  add_toolkit(&l, "/usr/local/cuda");
  add(&l, toolkit_dir);
  return l.n;
}

int lab_cuda_find(const char *soname, char (*dirs)[1024], int ndirs, char *path, size_t n) {
  for (int i = 0; i < ndirs; i++) {
    snprintf(path, n, "%s/%s", dirs[i], soname);
    if (access(path, R_OK) == 0) return 0;
  }
  path[0] = 0;
  return -1;
}
