/* The directory of the running executable: the CUDA plugins (cuda/loader.c) and the lua/lab
 * modules (lua/l_lab.c) are looked for beside it, so a moved build tree finds its own files. */
#ifndef LAB_RUNTIME_EXE_DIR_H
#define LAB_RUNTIME_EXE_DIR_H

#include <stddef.h>

/* /proc/self/exe without its last part into dir; 0, or -1 when it cannot be read (dir is then
 * ""). */
int lab_exe_dir(char *dir, size_t n);

#endif
