/* stdout capture through memfd. */
#define _GNU_SOURCE
#include "capture.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

int capture_begin(capture *c) {
  fflush(stdout);
  fflush(stderr);
  c->file_fd = memfd_create("llmlab-output", MFD_CLOEXEC);
  if (c->file_fd < 0) return -1;
  c->saved_fd = dup(STDOUT_FILENO);
  c->saved_err = dup(STDERR_FILENO);
  if (c->saved_fd < 0 || c->saved_err < 0 || dup2(c->file_fd, STDOUT_FILENO) < 0 || dup2(c->file_fd, STDERR_FILENO) < 0) {
    if (c->saved_fd >= 0) dup2(c->saved_fd, STDOUT_FILENO), close(c->saved_fd);
    if (c->saved_err >= 0) dup2(c->saved_err, STDERR_FILENO), close(c->saved_err);
    close(c->file_fd);
    return -1;
  }
  setvbuf(stdout, NULL, _IOLBF, 0); /* line by line, so rank 0 can show lines as they come */
  return 0;
}

char *capture_end_keep(capture *c, int64_t *len) {
  fflush(stdout);
  fflush(stderr);
  dup2(c->saved_fd, STDOUT_FILENO);
  dup2(c->saved_err, STDERR_FILENO);
  close(c->saved_fd);
  close(c->saved_err);
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
  if (buf) buf[got] = 0;
  *len = got;
  return buf;
}

void capture_close(capture *c) {
  if (c->file_fd >= 0) close(c->file_fd);
  c->file_fd = -1;
}

char *capture_end(capture *c, int64_t *len) {
  char *buf = capture_end_keep(c, len);
  capture_close(c);
  return buf;
}
