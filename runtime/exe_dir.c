/* exe_dir.h: where the running executable is. */
#define _GNU_SOURCE
#include "exe_dir.h"

#include <string.h>
#include <unistd.h>

int lab_exe_dir(char *dir, size_t n) {
  if (n < 2) return -1;
  ssize_t len = readlink("/proc/self/exe", dir, n - 1);
  dir[len > 0 ? len : 0] = 0;
  char *slash = strrchr(dir, '/');
  if (!slash) {
    dir[0] = 0;
    return -1;
  }
  *slash = 0;
  return 0;
}
