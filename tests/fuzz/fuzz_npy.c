/* Parser fuzz target: a .npy file (runtime/npy.c). lab_npy_load reads from a path, so each
 * input is written to one in-memory file first (the reader's own fread path is what users
 * hit). A tensor that loads is read whole, so a shape that promises more bytes than were
 * allocated is a sanitizer report. */
#define _GNU_SOURCE /* memfd_create */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "runtime/npy.h"
#include "runtime/tensor.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char path[64];
static int fd = -1;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* an in-memory file (memfd), named through /proc: rewriting a file on disk thousands of
   * times made ext4 flush on every close (2 s per 300 inputs) */
  if (fd < 0) {
    fd = memfd_create("llmlab_fuzz_npy", 0);
    if (fd < 0) abort();
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  }
  if (ftruncate(fd, 0) != 0 || (size && pwrite(fd, data, size, 0) != (ssize_t)size)) abort();
  lab_tensor *t = lab_npy_load(path);
  if (t) {
    size_t n = lab_nbytes(t);
    const volatile unsigned char *p = lab_data(t);
    unsigned sum = 0;
    for (size_t i = 0; i < n; i++) sum += p[i];
    (void)sum;
    lab_tensor_release(t);
  }
  return 0;
}
