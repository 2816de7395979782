/* Buffers that an abandoned collective may still read or write. MPI's rule: a request must
 * complete (or be cancelled) before its buffer is freed. When a guarded wait gives up (Ctrl-C,
 * watchdog, stepper quit) the call returns at once, so its tensors and scratch memory are held
 * here instead of freed, until recovery has completed every abandoned request of this rank. */
#ifndef LAB_RUNTIME_DIST_HELD_H
#define LAB_RUNTIME_DIST_HELD_H

#include <stdint.h>

#include "../tensor.h"
#include "group.h"

/* The backend calls this when a wait gives up and leaves its request to recovery. */
void lab_dist_note_abandoned(void);
/* How many requests this rank has abandoned since it started (callers compare before/after). */
int64_t lab_dist_abandoned_count(void);

void lab_dist_hold_tensor(lab_tensor *t); /* retained; NULL is ignored */
void lab_dist_hold_memory(void *p);       /* malloc'ed; freed on release */
/* Recovery completed every abandoned request of this rank: give everything back. */
void lab_dist_release_held(void);
/* Some abandoned request can never complete: everything held so far stays allocated for good. */
void lab_dist_keep_held_forever(void);
int lab_dist_held_count(void);
/* g's exchange (every member's nbytes of mine into all, in rank order) through a block that is
 * held, not freed, when the exchange is given up: callers' buffers may then be on the stack. */
int lab_dist_exchange_held(lab_group *g, const void *mine, void *all, int nbytes);

#endif
