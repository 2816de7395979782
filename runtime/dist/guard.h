/* The guarded wait every backend uses for a blocking call in the REPL and the stepper: it
 * polls the backend's request instead of blocking in it, so that a Ctrl-C, the watchdog or the
 * debugger's pause can end or suspend the wait. A wait that gives up poisons the group: the
 * backend keeps the request it abandoned (and dist.c its buffers) for recovery, which completes
 * it between REPL chunks; the group is unusable until then. Backend-neutral: MPI passes MPI_Test, NCCL a
 * CUDA event query and the communicator's asynchronous error. */
#ifndef LAB_RUNTIME_DIST_GUARD_H
#define LAB_RUNTIME_DIST_GUARD_H

#include "group.h"

/* Sets *done when the request completed; 0, or -1 after lab_fail (the wait then fails too,
 * and the group is poisoned: the backend's communicator is in an unknown state). */
typedef int (*lab_guard_test_fn)(void *ctx, int *done);

/* Spins briefly (a small collective completes in microseconds), then polls with short naps.
 * Returns 0 when test says done; -1 after lab_fail, the group poisoned, on Ctrl-C, a stepper
 * quit while paused in the wait, when the watchdog expires (its message lists what every rank is doing), or when test fails. */
int lab_guard_wait(lab_group *g, const char *op, lab_guard_test_fn test, void *ctx);

/* Marks g unusable after an abandoned collective (dist.c refuses it; recovery rebuilds the
 * world's). */
void lab_group_poison(lab_group *g);

#endif
