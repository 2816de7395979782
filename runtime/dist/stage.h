/* Collectives on tensors of other devices (stage.c). devcomm.c routes them: cuda tensors to the
 * group's NCCL communicator where every member has a GPU of its own; otherwise (ranks sharing a
 * GPU, sim tensors, mixed devices, no NCCL, a collective NCCL lacks) the collective runs again
 * on host copies and its results are copied back; an async call copies back when its work is
 * waited for. Private to runtime/dist. */
#ifndef LAB_RUNTIME_DIST_STAGE_H
#define LAB_RUNTIME_DIST_STAGE_H

#include "devcomm.h"
#include "dist.h"

/* The arguments of a collective besides its tensors, so that one function runs it on the
 * caller's tensors and again on host copies. */
typedef struct {
  lab_redop op;
  int root, tag;
  const int64_t *out_splits, *in_splits;
} lab_coll_args;

/* A collective on tensors t and u (either may be NULL) with the rest of its arguments in a */
typedef int (*lab_coll_fn)(lab_group *g, lab_tensor *t, lab_tensor *u, const lab_coll_args *a, lab_work **work);

/* The path for tensors a (and b; NULL: none) on g: -1 after lab_fail, else 0 with *path set. */
int lab_coll_route(const char *op, lab_group *g, lab_tensor *a, lab_tensor *b, int p2p, lab_coll_path *path);
/* the group whose backend runs the call: g, or its device group (made at its first use) */
lab_group *lab_coll_backend_group(lab_group *g, lab_coll_path path);

/* The rest of a collective once its route is not staged: what the board shows (shown: the
 * tensor named there, or NULL), the fingerprint in checked mode (fp_redop: the user's
 * reduction, avg included, or -1; the root is c.peer), the traffic (bytes, of which wire_factor
 * leave this rank), then c launched on the route's group (lab_coll_launch: k0, k1, avg). */
int lab_coll_run(lab_group *g, lab_coll_path path, lab_tensor *shown, int fp_redop, int64_t bytes, double wire_factor,
                 lab_work **work, lab_tensor *k0, lab_tensor *k1, int avg, lab_coll_call c);

/* Runs fn on host copies of t (and u) and copies the results back into those written. Blocking
 * when work is NULL. Asynchronous otherwise: fn starts a host request on the copies, and the
 * copy back happens when the work is waited for, so two ranks that isend to each other before
 * they wait do not block one another in a send that cannot complete until the peer receives. */
int lab_coll_staged(lab_group *g, lab_tensor *t, lab_tensor *u, int writes_t, int writes_u, lab_coll_fn fn,
                    const lab_coll_args *a, lab_work **work);

#endif
