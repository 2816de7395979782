/* Opens the cuda and nccl plugins at their first use (loader.h): finds the plugin beside the
 * executable, preloads the CUDA libraries it links from the places loader_paths.c lists
 * (RTLD_GLOBAL, so the plugin's sonames resolve to them), opens the plugin and checks its ABI.
 * The one place that knows whether CUDA and NCCL were built (LLMLAB_HAVE_CUDA/NCCL). Nothing
 * here runs before a caller asks for CUDA: llmlab starts without loading any CUDA library. */
#define _GNU_SOURCE
#include "loader.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../strbuf.h"

#ifndef LLMLAB_CUDA_MAJOR
#define LLMLAB_CUDA_MAJOR "13"
#endif
#ifndef LLMLAB_CUDA_TOOLKIT_LIBDIR
#define LLMLAB_CUDA_TOOLKIT_LIBDIR ""
#endif
#ifndef LLMLAB_PLUGIN_BUILD_DIR
#define LLMLAB_PLUGIN_BUILD_DIR ""
#endif

#ifdef LLMLAB_HAVE_CUDA
static const int cuda_built = 1;
#else
static const int cuda_built = 0;
#endif
#ifdef LLMLAB_HAVE_NCCL
static const int nccl_built = 1;
#else
static const int nccl_built = 0;
#endif

#define MAX_DIRS 64

typedef struct {
  const char *soname;
  char path[1024]; /* where it was loaded from */
  void *handle;
} lib;

static lib cudart = {"libcudart.so." LLMLAB_CUDA_MAJOR, "", NULL};
static lib cublaslt = {"libcublasLt.so." LLMLAB_CUDA_MAJOR, "", NULL};
static lib nccl = {"libnccl.so.2", "", NULL};

static const lab_cuda_plugin *cuda_plugin;
static const lab_nccl_plugin *nccl_plugin;
static char cuda_plugin_path[1200], nccl_plugin_path[1200];
static char cuda_why[1400], nccl_why[1400];
static pthread_once_t cuda_once = PTHREAD_ONCE_INIT, nccl_once = PTHREAD_ONCE_INIT;

static const char *env_get(const char *name) { return getenv(name); }

/* the path a handle was loaded from (the soname fallback found it somewhere we did not name) */
static void loaded_path(void *h, char *out, size_t n) {
  struct link_map *m = NULL;
  if (dlinfo(h, RTLD_DI_LINKMAP, &m) == 0 && m && m->l_name && m->l_name[0]) snprintf(out, n, "%s", m->l_name);
}

/* opens l from the search directories, else by soname; 0, or -1 with why */
static int open_lib(lib *l, char *why, size_t n) {
  if (l->handle) return 0;
  static char dirs[MAX_DIRS][1024];
  int nd = lab_cuda_search_dirs(env_get, LLMLAB_CUDA_TOOLKIT_LIBDIR, dirs, MAX_DIRS);
  if (lab_cuda_find(l->soname, dirs, nd, l->path, sizeof l->path) == 0) {
    l->handle = dlopen(l->path, RTLD_NOW | RTLD_GLOBAL);
    if (!l->handle) {
      snprintf(why, n, "%s found at %s but not loadable: %s", l->soname, l->path, dlerror());
      return -1;
    }
    return 0;
  }
  l->handle = dlopen(l->soname, RTLD_NOW | RTLD_GLOBAL);
  if (l->handle) {
    snprintf(l->path, sizeof l->path, "%s", l->soname);
    loaded_path(l->handle, l->path, sizeof l->path);
    return 0;
  }
  snprintf(why, n, "%s not found (searched LLMLAB_CUDA_LIBS, CUDA_HOME, CUDA_PATH, the NVIDIA wheels of python3, "
           "/usr/local/cuda, %s and the system loader's path: %d director%s)",
           l->soname, LLMLAB_CUDA_TOOLKIT_LIBDIR[0] ? LLMLAB_CUDA_TOOLKIT_LIBDIR : "the build's toolkit", nd,
           nd == 1 ? "y" : "ies");
  return -1;
}

/* a plugin file: $LLMLAB_PLUGIN_DIR, beside the executable, or the build directory */
static int plugin_file(const char *name, char *out, size_t n) {
  const char *env = getenv("LLMLAB_PLUGIN_DIR");
  if (env && *env) {
    snprintf(out, n, "%s/%s", env, name);
    return access(out, R_OK);
  }
  char exe[1024];
  if (lab_exe_dir(exe, sizeof exe) == 0) {
    snprintf(out, n, "%s/%s", exe, name);
    if (access(out, R_OK) == 0) return 0;
  }
  snprintf(out, n, "%s/%s", LLMLAB_PLUGIN_BUILD_DIR, name);
  return access(out, R_OK);
}

/* dlopen the plugin and look up its entry; NULL with why */
static void *open_plugin(const char *file, char *path, size_t pn, const char *entry, char *why, size_t n) {
  if (plugin_file(file, path, pn) != 0) {
    snprintf(why, n, "the plugin %s is missing (looked for %s)", file, path);
    return NULL;
  }
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    snprintf(why, n, "the plugin %s cannot be loaded: %s", path, dlerror());
    return NULL;
  }
  void *fn = dlsym(h, entry);
  if (!fn) snprintf(why, n, "the plugin %s has no entry point %s", path, entry);
  return fn;
}

static int abi_ok(int abi, size_t ops, size_t group, const char *path, char *why, size_t n) {
  if (abi == LAB_PLUGIN_ABI && ops == sizeof(lab_device_ops) && group == sizeof(lab_group)) return 0;
  snprintf(why, n, "the plugin %s was built from other sources than this llmlab (ABI %d, expected %d)", path, abi,
           LAB_PLUGIN_ABI);
  return -1;
}

static void load_cuda(void) {
  if (!cuda_built) {
    snprintf(cuda_why, sizeof cuda_why, "CUDA not compiled in (the build found no CUDA toolkit)");
    return;
  }
  if (open_lib(&cudart, cuda_why, sizeof cuda_why) < 0 || open_lib(&cublaslt, cuda_why, sizeof cuda_why) < 0) return;
  void *fn = open_plugin("libllmlab_cuda.so", cuda_plugin_path, sizeof cuda_plugin_path, LAB_CUDA_PLUGIN_ENTRY,
                         cuda_why, sizeof cuda_why);
  if (!fn) return;
  const lab_cuda_plugin *p = ((lab_cuda_plugin_entry)fn)();
  if (abi_ok(p->abi, p->ops_size, p->group_size, cuda_plugin_path, cuda_why, sizeof cuda_why) == 0) cuda_plugin = p;
}

static void load_nccl(void) {
  if (!nccl_built) {
    snprintf(nccl_why, sizeof nccl_why, "this llmlab was built without NCCL");
    return;
  }
  if (!lab_cuda_load()) {
    snprintf(nccl_why, sizeof nccl_why, "%s", cuda_why);
    return;
  }
  if (open_lib(&nccl, nccl_why, sizeof nccl_why) < 0) return;
  void *fn = open_plugin("libllmlab_nccl.so", nccl_plugin_path, sizeof nccl_plugin_path, LAB_NCCL_PLUGIN_ENTRY,
                         nccl_why, sizeof nccl_why);
  if (!fn) return;
  const lab_nccl_plugin *p = ((lab_nccl_plugin_entry)fn)(cuda_plugin);
  if (abi_ok(p->abi, p->ops_size, p->group_size, nccl_plugin_path, nccl_why, sizeof nccl_why) == 0) nccl_plugin = p;
}

const lab_device_ops *lab_cuda_load(void) {
  pthread_once(&cuda_once, load_cuda);
  return cuda_plugin ? cuda_plugin->ops : NULL;
}

const lab_nccl_plugin *lab_nccl_load(void) {
  pthread_once(&nccl_once, load_nccl);
  return nccl_plugin;
}

const char *lab_cuda_why(void) { return cuda_why; }

/* cuda's opener, registered when the program is loaded (device.h): the plugin is opened at the
 * first use of cuda, never at start */
__attribute__((constructor)) static void cuda_register(void) { lab_device_provide(LAB_DEV_CUDA, lab_cuda_load, lab_cuda_why); }
const char *lab_nccl_why(void) { return nccl_why; }
int lab_cuda_loaded(void) { return cuda_plugin != NULL; }

const char *lab_cuda_libraries(char *buf, size_t n) {
  lab_strbuf s = {0};
  const lab_device_ops *ops = lab_cuda_load();
  if (ops) {
    int rt = cuda_plugin->runtime_version(), drv = cuda_plugin->driver_version();
    size_t lt = cuda_plugin->cublaslt_version();
    lab_strbuf_printf(&s, "  plugin   %s\n", cuda_plugin_path);
    lab_strbuf_printf(&s, "  cudart   %d.%d from %s\n", rt / 1000, rt % 1000 / 10, cudart.path);
    lab_strbuf_printf(&s, "  cublasLt %zu.%zu.%zu from %s\n", lt / 10000, lt / 100 % 100, lt % 100, cublaslt.path);
    if (drv) lab_strbuf_printf(&s, "  driver   CUDA %d.%d\n", drv / 1000, drv % 1000 / 10);
    else lab_strbuf_printf(&s, "  driver   none\n");
  } else {
    lab_strbuf_printf(&s, "  cuda     not loaded: %s\n", cuda_why);
  }
  if (lab_nccl_load())
    lab_strbuf_printf(&s, "  nccl     %s from %s (plugin %s)", nccl_plugin->version(), nccl.path, nccl_plugin_path);
  else lab_strbuf_printf(&s, "  nccl     not loaded: %s", nccl_why);
  snprintf(buf, n, "%s", s.oom || !s.b ? "" : s.b);
  free(s.b);
  return buf;
}
