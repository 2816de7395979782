/* Capturing everything a rank writes to stdout and stderr while a chunk runs (print, io.write,
 * io.stderr:write, C printf alike) by pointing fds 1 and 2 at one anonymous file, in the order
 * written, so it can be sent to rank 0 (and read by rank 0 while the chunk runs). */
#ifndef LAB_SHELL_CAPTURE_H
#define LAB_SHELL_CAPTURE_H

#include <stdint.h>

typedef struct {
  int saved_fd;  /* the real stdout while capturing */
  int saved_err; /* the real stderr */
  int file_fd;  /* the anonymous file */
} capture;

int capture_begin(capture *c);
/* Restores stdout and returns the captured bytes (malloc'ed, NUL-terminated). */
char *capture_end(capture *c, int64_t *len);
/* The same, but the file stays open (rank 0 may still be reading it through the board, as a
 * finished rank's output streams while others run); capture_close closes it afterwards. */
char *capture_end_keep(capture *c, int64_t *len);
void capture_close(capture *c);

#endif
