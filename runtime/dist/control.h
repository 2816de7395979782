/* The shell's control channel between ranks: chunks broadcast from rank 0, outputs and
 * statuses gathered back. It runs on its own communicator, apart from user collectives, and
 * waits by polling with short sleeps so that idle ranks do not spin a core at the prompt. */
#ifndef LAB_RUNTIME_DIST_CONTROL_H
#define LAB_RUNTIME_DIST_CONTROL_H

#include <stdint.h>

/* Initialise the process world (MPI_Init). A process not started by mpirun is a world of 1. */
int lab_ctl_init(int *argc, char ***argv);
void lab_ctl_finalize(void);
int lab_ctl_rank(void);
int lab_ctl_size(void);
int lab_ctl_local_rank(void);
int lab_ctl_local_size(void);
const char *lab_ctl_host(void);

/* Rank 0 sends *buf (len bytes); the others receive into a malloc'ed *buf. */
int lab_ctl_bcast(char **buf, int64_t *len);
/* Every rank's bytes reach rank 0: *all is malloc'ed (concatenated), lens[size] malloc'ed. */
int lab_ctl_gather(const char *mine, int64_t len, char **all, int64_t **lens);
/* Max of v over ranks. timeout_s > 0 bounds the wait: returns 1 when it expired. */
int lab_ctl_max(int v, int *out, double timeout_s);
void lab_ctl_abort(int code);
/* Waits until every rank has called this, running while_waiting (if any) between polls, on
 * a channel of its own (so the callback may use the control channel). */
void lab_ctl_wait_all_done(void (*while_waiting)(void));
/* A monotonic clock in seconds. */
double lab_now(void);

#endif
