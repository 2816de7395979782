/* Collectives on tensors, torch.distributed style: in place, on a group, synchronous or
 * asynchronous. This layer checks arguments (contiguity, dtypes, sizes, membership),
 * counts traffic per op and group, optionally cross-checks the call on every rank, and
 * hands raw buffers to the group's backend. */
#ifndef LAB_RUNTIME_DIST_H
#define LAB_RUNTIME_DIST_H

#include "../tensor.h"
#include "clock.h"
#include "group.h"

/* A pending asynchronous collective and what must happen when it completes. */
typedef struct lab_work {
  lab_group *group;
  lab_backend_work *bw;
  lab_tensor *keep[3]; /* tensors the request reads or writes, kept alive until done */
  int avg_divisor;     /* > 0: divide keep[0] by it on completion (avg) */
  int done;
  /* A collective on tensors of another device runs as `inner` on host copies; at completion
   * back_src[i] is copied into back[i] (the device tensors it writes). */
  struct lab_work *inner;
  lab_tensor *back[2], *back_src[2];
} lab_work;

const char *lab_coll_name(lab_coll_op op);
const char *lab_redop_name(lab_redop op);
int lab_redop_from_name(const char *name);

/* When on, every collective first exchanges (op, dtype, count, root) across the group and
 * fails on every rank if they differ, instead of hanging or corrupting memory. */
void lab_dist_set_checked(int on);
int lab_dist_checked(void);
/* The largest of every member's v (on the check channel; Ctrl-C and the watchdog can end it,
 * and an exchange given up keeps its buffers for recovery, held.h). 0, or -1 after lab_fail. */
int lab_dist_agree_max(lab_group *g, int64_t v, int64_t *best);
/* Call site recorded in the fingerprint (the Lua layer sets it before each call; the
 * traceback shown when ranks disagree is group.h's lab_dist_set_traceback). */
void lab_dist_set_call_site(const char *site);
/* After an abandoned collective every rank must call this at the same point (the REPL does,
 * between chunks): the ranks that never arrived post matching operations so that every
 * abandoned request completes before its buffers are freed, and the groups keep working.
 * Where that is impossible the world gets fresh communicators and another group stays
 * unusable (its error names it). Returns 0 when there was nothing to do, else a mask that is
 * the same on every rank: comm.h's LAB_RECOVERED_* (the backends' recover returns them). */
int lab_dist_recover(void);
/* The same after a chunk, each rank saying whether it ended in an error here (failed_here):
 * when it did on any rank the ranks also catch up on asynchronous collectives some of them
 * posted (a DDP bucket launched before a Ctrl-C), so a wrapper can wait for its pending work
 * and go on. *aborted (when not NULL) says whether any rank failed, agreed in recovery's own
 * first exchange. */
int lab_dist_recover_after(int failed_here, int *aborted);

/* work: NULL for a blocking call, else receives a handle to wait on */
int lab_all_reduce(lab_group *g, lab_tensor *t, lab_redop op, lab_work **work);
int lab_broadcast(lab_group *g, lab_tensor *t, int root, lab_work **work);
int lab_reduce(lab_group *g, lab_tensor *t, lab_redop op, int root, lab_work **work);
/* out holds size * numel(in) elements: [size * d0, ...] or [size, ...] */
int lab_all_gather(lab_group *g, lab_tensor *out, lab_tensor *in, lab_work **work);
/* in holds size * numel(out) elements */
int lab_reduce_scatter(lab_group *g, lab_tensor *out, lab_tensor *in, lab_redop op, lab_work **work);
int lab_all_to_all(lab_group *g, lab_tensor *out, lab_tensor *in, lab_work **work);
/* Uneven all-to-all along dim 1 (torch's all_to_all_single with split sizes): rows
 * in_splits[i] of in go to rank i, out_splits[j] rows of out come from rank j, in rank
 * order. Both tensors have the same dtype and the same size of every other dim. One split
 * per rank of g; NULL splits mean an even split. In checked mode the ranks also compare
 * their splits: what rank i sends to j must be what j expects from i. */
int lab_all_to_all_single(lab_group *g, lab_tensor *out, const int64_t *out_splits, lab_tensor *in,
                          const int64_t *in_splits, lab_work **work);
int lab_send(lab_group *g, lab_tensor *t, int dst, int tag, lab_work **work);
int lab_recv(lab_group *g, lab_tensor *t, int src, int tag, lab_work **work);
int lab_barrier(lab_group *g);
/* torch's gather: the group's inputs (numel(in) elements each) land in dst's out, in rank
 * order (size * numel(in) elements); out is NULL on every other rank. scatter: block r of src's
 * in (size * numel(out) elements) lands in rank r's out; in is NULL elsewhere. dst and src count
 * the group's ranks (gather.c). */
int lab_gather(lab_group *g, lab_tensor *out, lab_tensor *in, int dst, lab_work **work);
int lab_scatter(lab_group *g, lab_tensor *out, lab_tensor *in, int src, lab_work **work);
/* Their argument checks alone, on this rank (no message, no collective): what only the root or
 * only the others can get wrong, for the members to agree on before any enters the collective
 * (lua/l_dist.c). 0, or -1 after lab_fail. */
int lab_gather_check(lab_group *g, lab_tensor *out, lab_tensor *in, int dst);
int lab_scatter_check(lab_group *g, lab_tensor *out, lab_tensor *in, int src);

int lab_work_wait(lab_work *w);
int lab_work_test(lab_work *w, int *done);
void lab_work_free(lab_work *w);

/* Which communicator a collective on tensors of device d takes on g, for lab.dist.backend:
 * "mpi", "nccl (cuda:0)" or "mpi, staged through host memory: <why>" into buf. For a cuda
 * tensor on a group whose plan is undecided the call is collective (the members exchange their
 * GPUs, devcomm.h). buf, or NULL after lab_fail. */
const char *lab_dist_backend(lab_group *g, lab_device d, char *buf, size_t n);
/* Collectives and sends/recvs the sim's NCCL shim posted in this process (0 without one):
 * lab.cuda.sim_nccl_calls, so a test can see the NCCL path was taken. */
long lab_dist_sim_nccl_calls(void);
/* CUDA events the sim's build of nccl.c created (its pool's misses): lab.cuda.sim_nccl_events */
long lab_dist_sim_nccl_events(void);

/* Seconds this rank has spent inside collectives (calls and waits) since it started. */
double lab_dist_comm_seconds(void);
/* This process's CPU time in the same places, and in all (CLOCK_PROCESS_CPUTIME_ID): under
 * more ranks than cores, CPU time outside collectives is the work a rank did, while its wall
 * time also counts the turns it waited for a core. */
double lab_dist_comm_cpu_seconds(void);

#endif
