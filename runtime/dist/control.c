/* The control channel of control.h over MPI: two communicators over the world, apart from
 * user collectives (chunks, outputs, statuses; and "I am done" for the stepper), waited on by
 * polling with naps so that idle ranks leave the cores to working ones. */
#include "control.h"

#include <mpi.h>
#include <stdlib.h>
#include <time.h>

#include "../error.h"

static MPI_Comm ctl_comm = MPI_COMM_NULL;
static MPI_Comm done_comm = MPI_COMM_NULL; /* only for "I am done, are you?" (the stepper) */

int lab_ctl_open(void) {
  if (MPI_Comm_dup(MPI_COMM_WORLD, &ctl_comm) != MPI_SUCCESS || MPI_Comm_dup(MPI_COMM_WORLD, &done_comm) != MPI_SUCCESS)
    return lab_fail("init", "could not create the control channel's communicators");
  return 0;
}

/* Waits for a request, spinning briefly (a REPL round trip stays well under a millisecond)
 * and then sleeping between tests so waiting ranks leave the cores to working ones.
 * Returns 1 if timeout_s (> 0) expired first. */
static int poll_wait(MPI_Request *req, double timeout_s) {
  int done = 0;
  for (int i = 0; i < 2000 && !done; i++) MPI_Test(req, &done, MPI_STATUS_IGNORE);
  double t0 = lab_now();
  struct timespec nap = {0, 100000}; /* 0.1 ms */
  while (!done) {
    nanosleep(&nap, NULL);
    MPI_Test(req, &done, MPI_STATUS_IGNORE);
    if (!done && timeout_s > 0 && lab_now() - t0 > timeout_s) return 1;
    if (nap.tv_nsec < 500000) nap.tv_nsec += 50000; /* back off to 0.5 ms: a prompt answers fast */
  }
  return 0;
}

static void (*before_bcast)(void);

void lab_ctl_set_before_bcast(void (*wait)(void)) { before_bcast = wait; }

int lab_ctl_bcast(char **buf, int64_t *len) {
  if (lab_ctl_rank() == 0 && before_bcast) before_bcast(); /* a cleared Ctrl-C has reached every host */
  MPI_Request req;
  MPI_Ibcast(len, 1, MPI_INT64_T, 0, ctl_comm, &req);
  poll_wait(&req, 0);
  if (lab_ctl_rank() != 0) {
    *buf = malloc((size_t)*len + 1);
    if (!*buf) return lab_fail("control", "out of memory");
    (*buf)[*len] = 0;
  }
  if (*len > 0) {
    MPI_Ibcast(*buf, (int)*len, MPI_CHAR, 0, ctl_comm, &req);
    poll_wait(&req, 0);
  }
  return 0;
}

int lab_ctl_gather(const char *mine, int64_t len, char **all, int64_t **lens) {
  int n = lab_ctl_size();
  int64_t *ls = lab_ctl_rank() == 0 ? malloc(sizeof(int64_t) * (size_t)n) : NULL;
  MPI_Request req;
  MPI_Igather(&len, 1, MPI_INT64_T, ls, 1, MPI_INT64_T, 0, ctl_comm, &req);
  poll_wait(&req, 0);
  int *counts = NULL, *displs = NULL;
  char *out = NULL;
  if (lab_ctl_rank() == 0) {
    counts = malloc(sizeof(int) * (size_t)n);
    displs = malloc(sizeof(int) * (size_t)n);
    int64_t total = 0;
    for (int r = 0; r < n; r++) {
      counts[r] = (int)ls[r];
      displs[r] = (int)total;
      total += ls[r];
    }
    out = malloc((size_t)total + 1);
  }
  MPI_Igatherv(mine, (int)len, MPI_CHAR, out, counts, displs, MPI_CHAR, 0, ctl_comm, &req);
  poll_wait(&req, 0);
  free(counts);
  free(displs);
  if (lab_ctl_rank() == 0) {
    *all = out;
    *lens = ls;
  }
  return 0;
}

int lab_ctl_max(int v, int *out, double timeout_s) {
  MPI_Request req;
  MPI_Iallreduce(&v, out, 1, MPI_INT, MPI_MAX, ctl_comm, &req);
  return poll_wait(&req, timeout_s);
}

int lab_ctl_wait_all_done_within(void (*while_waiting)(void), double timeout_s) {
  MPI_Request req;
  MPI_Ibarrier(done_comm, &req);
  int done = 0;
  double t0 = lab_now();
  struct timespec nap = {0, 200000};
  while (!done) {
    MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (!done) {
      if (while_waiting) while_waiting();
      if (timeout_s > 0 && lab_now() - t0 > timeout_s) return 1; /* the caller aborts the job */
      nanosleep(&nap, NULL);
    }
  }
  return 0;
}

void lab_ctl_wait_all_done(void (*while_waiting)(void)) { lab_ctl_wait_all_done_within(while_waiting, 0); }
