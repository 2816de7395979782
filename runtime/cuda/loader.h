/* Opening the CUDA device and the NCCL backend at their first use (plugin.h), so that llmlab
 * starts without any CUDA library and runs where there is none.
 *
 * The plugins sit beside the llmlab executable (or in $LLMLAB_PLUGIN_DIR). Before a plugin is
 * opened, the CUDA libraries it links by soname (libcudart.so.N, libcublasLt.so.N,
 * libnccl.so.2) are opened by full path from the first of these places that has them, each
 * library on its own:
 *   1. $LLMLAB_CUDA_LIBS: directories separated by ':' (the override);
 *   2. $CUDA_HOME, then $CUDA_PATH: lib64, lib, targets/<arch>-linux/lib;
 *   3. the NVIDIA wheels of the machine's Python, <site-packages>/nvidia/<any>/lib, where the
 *      site-packages are those of $VIRTUAL_ENV, $CONDA_PREFIX, the python3 first on PATH
 *      (<bin>/../lib/python3.*), each $PYTHONPATH entry, ~/.local, /usr/local, /usr and
 *      /opt/conda (found without running Python);
 *   4. /usr/local/cuda (lib64, lib, targets/<arch>-linux/lib) and the toolkit llmlab was built with;
 *   5. the system loader's own search (LD_LIBRARY_PATH, ld.so.cache), by soname.
 * A library that none of them has leaves that plugin unloaded, and the reason names the
 * library and the places searched (llmlab --version, lab.cuda.status(), the error of a cuda
 * tensor). */
#ifndef LAB_RUNTIME_CUDA_LOADER_H
#define LAB_RUNTIME_CUDA_LOADER_H

#include <stddef.h>

#include "../device.h"
#include "../exe_dir.h" /* lab_exe_dir: the plugins sit beside the executable */
#include "plugin.h"

/* The cuda device's table, the plugin opened at the first call; NULL when CUDA was not built
 * or cannot be loaded here (lab_cuda_why says why). */
const lab_device_ops *lab_cuda_load(void);
/* The NCCL backend (opens the cuda plugin first); NULL with lab_nccl_why. */
const lab_nccl_plugin *lab_nccl_load(void);
const char *lab_cuda_why(void);
/* The sim's NCCL (runtime/simrt/nccl_table.c, built with the SIMT interpreter): nccl.c
 * compiled against runtime/simrt's NCCL on MPI, as this plugin table; NULL when the sim is not
 * running runtime/cuda's device over runtime/simrt (LLMLAB_SIMRT=0, LLMLAB_SIMT=0: its memory
 * is not the emulated runtime's) or LLMLAB_SIM_NCCL=0 (collectives on sim tensors then stage
 * through MPI, as before). */
const lab_nccl_plugin *lab_simrt_nccl_plugin(void);
/* collectives and sends/recvs the sim's NCCL posted in this process (lab.cuda.sim_nccl_calls) */
long lab_simrt_nccl_calls(void);
/* CUDA events the sim's build of nccl.c created: its event pool's misses (lab.cuda.sim_nccl_events) */
long lab_simrt_nccl_events_created(void);
const char *lab_nccl_why(void);
/* 1 once the cuda plugin is open (asks nothing, loads nothing). */
int lab_cuda_loaded(void);
/* Lines on what was loaded from where, with versions (loads both plugins): for llmlab
 * --version and the GPU check's report. */
const char *lab_cuda_libraries(char *buf, size_t n);

/* ---- the search (loader_paths.c), plain logic that tests call with their own environment ---- */
typedef const char *(*lab_getenv_fn)(const char *name);
/* The directories of steps 1-4 above, in order, each an existing directory, at most max;
 * toolkit_dir: the build's toolkit library directory ("" for none). Returns the count. */
int lab_cuda_search_dirs(lab_getenv_fn env, const char *toolkit_dir, char (*dirs)[1024], int max);
/* The first dir/soname of dirs that exists into path; 0, or -1 when none has it. */
int lab_cuda_find(const char *soname, char (*dirs)[1024], int ndirs, char *path, size_t n);

#endif
