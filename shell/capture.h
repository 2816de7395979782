/* Capturing everything a rank writes to stdout while a chunk runs (print, io.write, C
 * printf alike) by pointing fd 1 at an anonymous file, so it can be sent to rank 0. */
#ifndef LAB_SHELL_CAPTURE_H
#define LAB_SHELL_CAPTURE_H

#include <stdint.h>

typedef struct {
  int saved_fd; /* the real stdout while capturing */
  int file_fd;  /* the anonymous file */
} capture;

int capture_begin(capture *c);
/* Restores stdout and returns the captured bytes (malloc'ed, NUL-terminated). */
char *capture_end(capture *c, int64_t *len);

#endif
