/* Posting a collective's backend call and the work object of an asynchronous one (work.c):
 * what the board shows while this rank is in a collective, the time spent there, the traffic
 * counts, the buffers kept alive for a pending request or held for recovery, and the average
 * finished on completion. Private to runtime/dist. */
#ifndef LAB_RUNTIME_DIST_WORK_H
#define LAB_RUNTIME_DIST_WORK_H

#include "dist.h"

/* What the board shows while this rank waits in op on g (t: its tensor, or NULL), and the
 * count of collectives posted per group during the chunk (fail fast: board.h). */
void lab_coll_set_activity(const char *op, lab_tensor *t, lab_group *g);
void lab_coll_board_waiting(void); /* the board shows the activity: this rank is in it */
const char *lab_coll_call_site(void);

/* Traffic: one call of op moving `bytes`, of which wire_factor leave this rank (ring(g): a ring
 * algorithm's (size - 1) / size). */
void lab_coll_count(lab_group *g, lab_coll_op op, int64_t bytes, double wire_factor);
double lab_coll_ring(lab_group *g);

/* Posts c on bg (the group whose backend runs it: the user's group, or its device group):
 * blocking when work is NULL, else *work is a new pending work. k0 and k1 are the tensors the
 * call reads and writes (kept alive by the work, or held when a wait is abandoned); avg > 0
 * divides k0 by it once the call completes. 0, or -1 after lab_fail. */
int lab_coll_launch(lab_group *bg, lab_work **work, lab_tensor *k0, lab_tensor *k1, int avg, lab_coll_call c);

/* A work on g that waits for inner (a collective on host copies) and then copies back_src[i]
 * into back[i] (NULL: none); keeps keep0, keep1 (the copies) and back[] alive. NULL after
 * lab_fail. */
lab_work *lab_coll_work_wrap(lab_group *g, lab_work *inner, lab_tensor *keep0, lab_tensor *keep1,
                             lab_tensor *back0, lab_tensor *back1);

#endif
