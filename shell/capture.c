/* stdout capture through memfd. */
#define _GNU_SOURCE
#include "capture.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

int capture_begin(capture *c) {
  fflush(stdout);
  c->file_fd = memfd_create("llmlab-output", MFD_CLOEXEC);
  if (c->file_fd < 0) return -1;
  c->saved_fd = dup(STDOUT_FILENO);
  if (c->saved_fd < 0 || dup2(c->file_fd, STDOUT_FILENO) < 0) {
    close(c->file_fd);
    if (c->saved_fd >= 0) close(c->saved_fd);
    return -1;
  }
  return 0;
}

char *capture_end(capture *c, int64_t *len) {
  fflush(stdout);
  dup2(c->saved_fd, STDOUT_FILENO);
  close(c->saved_fd);
  off_t size = lseek(c->file_fd, 0, SEEK_END);
  char *buf = malloc((size_t)(size > 0 ? size : 0) + 1);
  int64_t got = 0;
  if (buf && size > 0) {
    lseek(c->file_fd, 0, SEEK_SET);
    while (got < size) {
      ssize_t r = read(c->file_fd, buf + got, (size_t)(size - got));
      if (r <= 0) break;
      got += r;
    }
  }
  close(c->file_fd);
  if (buf) buf[got] = 0;
  *len = got;
  return buf;
}
