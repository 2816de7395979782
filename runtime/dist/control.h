/* The shell's control channel between ranks: chunks broadcast from rank 0, outputs and
 * statuses gathered back. It runs on its own communicator, apart from user collectives, and
 * waits by polling with short sleeps so that idle ranks do not spin a core at the prompt. */
#ifndef LAB_RUNTIME_DIST_CONTROL_H
#define LAB_RUNTIME_DIST_CONTROL_H

#include <stdint.h>

#include "clock.h" /* lab_now and this rank's place, which every user of the channel also reads */
#include "place.h"


/* Rank 0 sends *buf (len bytes); the others receive into a malloc'ed *buf. */
int lab_ctl_bcast(char **buf, int64_t *len);
/* what rank 0 waits for before each broadcast (world set-up plugs in the relay's wait for a
 * cleared Ctrl-C to reach every host: control lies below the relay); NULL: nothing */
void lab_ctl_set_before_bcast(void (*wait)(void));
/* Every rank's bytes reach rank 0: *all is malloc'ed (concatenated), lens[size] malloc'ed. */
int lab_ctl_gather(const char *mine, int64_t len, char **all, int64_t **lens);
/* Max of v over ranks. timeout_s > 0 bounds the wait: returns 1 when it expired. */
int lab_ctl_max(int v, int *out, double timeout_s);
/* Opens the channel's communicators over the whole world (world set-up calls it once). */
int lab_ctl_open(void);
/* Waits until every rank has called this, running while_waiting (if any) between polls, on
 * a channel of its own (so the callback may use the control channel). */
void lab_ctl_wait_all_done(void (*while_waiting)(void));
/* The same, giving up after timeout_s (> 0) seconds: returns 1 then (the wait is abandoned,
 * so only a job about to abort may do this), 0 when every rank arrived. */
int lab_ctl_wait_all_done_within(void (*while_waiting)(void), double timeout_s);

#endif
