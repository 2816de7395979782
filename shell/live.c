/* Rank 0 showing every rank's output while a chunk runs (see live.h). */
#define _GNU_SOURCE
#include "live.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "grouped.h"
#include "runtime/dist/board.h"
#include "runtime/dist/clock.h"
#include "runtime/dist/control_relay.h"

#define LIVE_AFTER_S 0.1 /* chunks shorter than this show their output grouped at the end */

static int nranks;
static int64_t *shown;   /* per world rank: bytes shown */
static int *fds;         /* per world rank: our descriptor on its capture file, or -1 */
static int *source_fd;   /* per world rank: the descriptor number it was opened from */
static double started;

void live_begin(int world_size) {
  live_end();
  nranks = world_size;
  shown = calloc((size_t)nranks, sizeof *shown);
  fds = malloc(sizeof *fds * (size_t)nranks);
  source_fd = malloc(sizeof *source_fd * (size_t)nranks);
  for (int r = 0; fds && source_fd && r < nranks; r++) fds[r] = source_fd[r] = -1;
  started = lab_now();
  lab_relay_live_begin(); /* ranks on other hosts: their leader sends their lines */
}

/* the complete lines of rank r's file past what was shown (malloc'ed), or NULL */
static char *new_lines(int r, int pid, int fd, int64_t *len) {
  if (fds[r] < 0 || source_fd[r] != fd) {
    if (fds[r] >= 0) close(fds[r]);
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd/%d", pid, fd);
    fds[r] = open(path, O_RDONLY | O_CLOEXEC);
    source_fd[r] = fd;
    if (fds[r] < 0) return NULL;
  }
  off_t end = lseek(fds[r], 0, SEEK_END);
  if (end <= shown[r]) return NULL;
  size_t want = (size_t)(end - shown[r]);
  if (want > (1u << 20)) want = 1u << 20;
  char *buf = malloc(want);
  ssize_t got = buf ? pread(fds[r], buf, want, shown[r]) : -1;
  if (got <= 0) {
    free(buf);
    return NULL;
  }
  ssize_t keep = got;
  while (keep > 0 && buf[keep - 1] != '\n') keep--; /* whole lines only */
  if (keep == 0) {
    free(buf);
    return NULL;
  }
  *len = keep;
  return buf;
}

void live_poll(FILE *out) {
  if (!shown || !fds || !source_fd || lab_now() - started < LIVE_AFTER_S) return;
  const char **texts = calloc((size_t)nranks, sizeof *texts);
  int64_t *lens = calloc((size_t)nranks, sizeof *lens);
  int any = 0;
  for (int i = 0; texts && lens && i < lab_board_slots(); i++) {
    int r, pid;
    int fd = lab_board_output_of(i, &r, &pid);
    if (fd < 0 || r < 0 || r >= nranks) continue;
    int64_t len = 0;
    char *t = new_lines(r, pid, fd, &len);
    if (!t) continue;
    texts[r] = t;
    lens[r] = len;
    shown[r] += len;
    any = 1;
  }
  for (int r = 0; texts && lens && r < nranks; r++) { /* ranks on other hosts, through the relay */
    int64_t len = 0;
    char *t = texts[r] ? NULL : lab_relay_live_take(r, shown[r], &len);
    if (!t) continue;
    texts[r] = t;
    lens[r] = len;
    shown[r] += len;
    any = 1;
  }
  if (any) { /* what ranks printed in this interval, grouped like the report */
    for (int r = 0; r < nranks; r++)
      if (!texts[r]) texts[r] = "";
    print_grouped(out, nranks, texts, lens, nranks > 1);
    for (int r = 0; r < nranks; r++)
      if (lens[r]) free((char *)texts[r]);
  }
  free(texts);
  free(lens);
}

int64_t live_shown(int r) { return shown && r >= 0 && r < nranks ? shown[r] : 0; }

void live_end(void) {
  for (int r = 0; fds && r < nranks; r++)
    if (fds[r] >= 0) close(fds[r]);
  free(shown);
  free(fds);
  free(source_fd);
  shown = NULL;
  fds = source_fd = NULL;
  nranks = 0;
}
