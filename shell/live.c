/* Rank 0 showing every rank's output while a chunk runs (see live.h). */
#define _GNU_SOURCE
#include "live.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "grouped.h"
#include "runtime/lab_control.h"

#define LIVE_AFTER_S 0.1 /* chunks shorter than this show their output grouped at the end */
#define LIVE_HOLD_S 1.0  /* how long a rank's lines wait for the other ranks' */

static int nranks;
static int64_t *shown;   /* per world rank: bytes shown */
static char **pending;   /* per world rank: complete lines read but not shown yet */
static int64_t *pending_len;
static double *pending_since; /* when the oldest of them was read */
static int *fds;         /* per world rank: our descriptor on its capture file, or -1 */
static int *source_fd;   /* per world rank: the descriptor number it was opened from */
static int *expected;     /* per world rank: it runs the chunk, so its lines are waited for */
static double started;

void live_begin(int world_size, const int *targeted) {
  live_end();
  nranks = world_size;
  shown = calloc((size_t)nranks, sizeof *shown);
  pending = calloc((size_t)nranks, sizeof *pending);
  pending_len = calloc((size_t)nranks, sizeof *pending_len);
  pending_since = calloc((size_t)nranks, sizeof *pending_since);
  expected = calloc((size_t)nranks, sizeof *expected);
  for (int r = 0; expected && r < nranks; r++) expected[r] = targeted ? targeted[r] : 1;
  fds = malloc(sizeof *fds * (size_t)nranks);
  source_fd = malloc(sizeof *source_fd * (size_t)nranks);
  for (int r = 0; fds && source_fd && r < nranks; r++) fds[r] = source_fd[r] = -1;
  started = lab_now();
  lab_relay_live_begin(); /* ranks on other hosts: their leader sends their lines */
}

/* the complete lines of rank r's file past what was read (malloc'ed), or NULL */
static char *new_lines(int r, int pid, int fd, int64_t *len) {
  if (fds[r] < 0 || source_fd[r] != fd) {
    if (fds[r] >= 0) close(fds[r]);
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd/%d", pid, fd);
    fds[r] = open(path, O_RDONLY | O_CLOEXEC);
    source_fd[r] = fd;
    if (fds[r] < 0) return NULL;
  }
  int64_t from = shown[r] + pending_len[r];
  off_t end = lseek(fds[r], 0, SEEK_END);
  if (end <= from) return NULL;
  size_t want = (size_t)(end - from);
  if (want > (1u << 20)) want = 1u << 20;
  char *buf = malloc(want);
  ssize_t got = buf ? pread(fds[r], buf, want, from) : -1;
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

static int64_t count_lines(const char *s, int64_t len) {
  int64_t n = 0;
  for (int64_t i = 0; i < len; i++) n += s[i] == '\n';
  return n;
}

/* the bytes of the first k lines of s */
static int64_t first_lines(const char *s, int64_t len, int64_t k) {
  int64_t i = 0;
  for (; i < len && k > 0; i++)
    if (s[i] == '\n') k--;
  return i;
}

/* Ranks print the same lines at slightly different moments: lines wait (up to LIVE_HOLD_S) until
 * every rank whose output is open has printed as many, so that what they print alike shows as
 * one group ([0-3] ...) rather than a block per rank per moment. */
void live_poll(FILE *out) {
  if (!shown || !fds || !source_fd || !pending || lab_now() - started < LIVE_AFTER_S) return;
  int *open_now = calloc((size_t)nranks, sizeof *open_now), *read_here = calloc((size_t)nranks, sizeof *read_here);
  if (!open_now || !read_here) {
    free(open_now);
    free(read_here);
    return;
  }
  double now = lab_now();
  for (int r0 = -lab_board_slots(); r0 < nranks; r0++) {
    /* first this node's ranks (their capture files), then the others through the relay */
    int r = -1, pid = 0, fd = -1;
    int64_t len = 0;
    char *t = NULL;
    if (r0 < 0) {
      fd = lab_board_output_of(-r0 - 1, &r, &pid);
      if (fd < 0 || r < 0 || r >= nranks) continue;
      open_now[r] = read_here[r] = 1;
      t = new_lines(r, pid, fd, &len);
    } else {
      r = r0;
      if (read_here[r]) continue;
      t = lab_relay_live_take(r, shown[r] + pending_len[r], &len);
    }
    if (!t) continue;
    char *grown = realloc(pending[r], (size_t)(pending_len[r] + len));
    if (grown) {
      if (pending_len[r] == 0) pending_since[r] = now;
      memcpy(grown + pending_len[r], t, (size_t)len);
      pending[r] = grown;
      pending_len[r] += len;
    }
    free(t);
  }
  free(read_here);
  /* the lines every open rank has, or everything once a line has waited long enough */
  int64_t common = -1;
  int overdue = 0, any = 0;
  for (int r = 0; r < nranks; r++) {
    if (pending_len[r] > 0) {
      any = 1;
      if (now - pending_since[r] > LIVE_HOLD_S) overdue = 1;
    }
    /* every targeted rank counts, also before it opens its output and after it closes it (one
     * that just finished stops publishing before rank 0's last poll: its lines come with the
     * report) */
    if (!(expected && expected[r]) && !open_now[r] && pending_len[r] == 0) continue;
    int64_t n = count_lines(pending[r], pending_len[r]);
    if (common < 0 || n < common) common = n;
  }
  if (any && (overdue || common > 0)) {
    const char **texts = calloc((size_t)nranks, sizeof *texts);
    int64_t *lens = calloc((size_t)nranks, sizeof *lens);
    for (int r = 0; texts && lens && r < nranks; r++) {
      texts[r] = pending[r] ? pending[r] : "";
      lens[r] = overdue ? pending_len[r] : first_lines(pending[r], pending_len[r], common);
    }
    if (texts && lens) {
      print_grouped(out, nranks, texts, lens, nranks > 1);
      for (int r = 0; r < nranks; r++) {
        if (lens[r] == 0) continue;
        shown[r] += lens[r];
        memmove(pending[r], pending[r] + lens[r], (size_t)(pending_len[r] - lens[r]));
        pending_len[r] -= lens[r];
        pending_since[r] = now;
      }
    }
    free(texts);
    free(lens);
  }
  free(open_now);
}

int64_t live_shown(int r) { return shown && r >= 0 && r < nranks ? shown[r] : 0; }

void live_end(void) {
  for (int r = 0; fds && r < nranks; r++)
    if (fds[r] >= 0) close(fds[r]);
  for (int r = 0; pending && r < nranks; r++) free(pending[r]);
  free(shown);
  free(pending);
  free(pending_len);
  free(pending_since);
  free(expected);
  expected = NULL;
  free(fds);
  free(source_fd);
  shown = NULL;
  pending = NULL;
  pending_len = NULL;
  pending_since = NULL;
  fds = source_fd = NULL;
  nranks = 0;
}
