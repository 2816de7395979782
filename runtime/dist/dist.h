/* Collectives on tensors, torch.distributed style: in place, on a group, synchronous or
 * asynchronous. This layer checks arguments (contiguity, dtypes, sizes, membership),
 * counts traffic per op and group, optionally cross-checks the call on every rank, and
 * hands raw buffers to the group's backend. */
#ifndef LAB_RUNTIME_DIST_H
#define LAB_RUNTIME_DIST_H

#include "../tensor.h"
#include "clock.h"
#include "comm.h"

/* X(enum suffix, name): lab_coll_op and lab_coll_name's table come from this one list. */
#define LAB_COLL_LIST(X)                                                                         \
  X(ALL_REDUCE, "all_reduce") X(BROADCAST, "broadcast") X(REDUCE, "reduce")                     \
  X(ALL_GATHER, "all_gather") X(REDUCE_SCATTER, "reduce_scatter") X(ALL_TO_ALL, "all_to_all")   \
  X(SEND, "send") X(RECV, "recv") X(BARRIER, "barrier") X(ALL_TO_ALL_SINGLE, "all_to_all_single")

#define LAB_COLL_ENUM_(e, name) LAB_OP_##e,
typedef enum { LAB_COLL_LIST(LAB_COLL_ENUM_) LAB_NOPS } lab_coll_op;
#undef LAB_COLL_ENUM_

typedef struct {
  int64_t calls;
  int64_t bytes;      /* payload: the bytes of the tensor this rank passed in */
  int64_t wire_bytes; /* bytes this rank sends under a ring/tree algorithm (nccl-tests' bus factor) */
} lab_coll_stats;

#define LAB_GROUP_NAME 64

struct lab_group {
  int id;
  int refs; /* holders: the Lua userdata, pending work, autograd nodes; freed at 0 (never the world) */
  char name[LAB_GROUP_NAME];
  int rank, size;   /* this rank's place in the group; rank -1: not a member */
  int world_size;
  int *world_ranks; /* world rank of each member */
  const lab_comm_backend *backend;
  void *impl;       /* the backend's communicator */
  lab_coll_stats stats[LAB_NOPS];
  int poisoned; /* a collective on it was abandoned (interrupt, watchdog): unusable */
  /* Collectives on cuda tensors (devcomm.c): the plan decided when the group was made, the
   * device group over the same members (backend NCCL, made at its first use), the GPU it is on,
   * and why GPU collectives stage through host memory when they do. A device group points back
   * at its host group (fingerprints, unique ids and recovery travel over MPI). */
  int device_plan;
  int device_index;
  int device_said; /* the staging note was printed */
  struct lab_group *device;
  struct lab_group *host;
  char device_why[224];
};

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

/* Set up from the world group the backend created (MPI_Init happens in the backend). */
void lab_dist_register_world(lab_group *world);
lab_group *lab_dist_world(void);
/* The group collectives use when none is named: the world, or in a REPL chunk run on some
 * ranks only (%on), a group of just those ranks. */
lab_group *lab_dist_default(void);
void lab_dist_set_default(lab_group *g); /* NULL: the world again */
int lab_dist_world_rank(void);
/* When on, every collective first exchanges (op, dtype, count, root) across the group and
 * fails on every rank if they differ, instead of hanging or corrupting memory. */
void lab_dist_set_checked(int on);
int lab_dist_checked(void);
/* Call site recorded in the fingerprint (the Lua layer sets it before each call), and the
 * Lua traceback shown when ranks disagree. */
void lab_dist_set_call_site(const char *site);
void lab_dist_set_traceback(const char *traceback);
const char *lab_dist_call_traceback(void); /* the last call's traceback (checked mode), or "" */
/* Guarded mode (the REPL and the stepper): blocking collectives wait by polling, so that a
 * Ctrl-C or the watchdog can end the wait with an error instead of a hang. */
void lab_dist_set_guarded(int on);
int lab_dist_guarded(void);
/* While set, every collective and group creation fails at once on this rank, before anything
 * reaches the wire, with "who: OP why" (the stepper sets it while it evaluates p and display at
 * a pause, where the other ranks wait for its next command and never join a collective).
 * lab_dist_refuse_collectives(NULL, NULL) allows them again. */
void lab_dist_refuse_collectives(const char *who, const char *why);
/* After an abandoned collective every rank must call this at the same point (the REPL does,
 * between chunks): the ranks that never arrived post matching operations so that every
 * abandoned request completes before its buffers are freed, and the groups keep working.
 * Where that is impossible the world gets fresh communicators and another group stays
 * unusable (its error names it). Returns 0 when there was nothing to do, else a mask that is
 * the same on every rank: */
enum {
  LAB_RECOVERED_COMPLETED = 1, /* recovery ran (abandoned requests completed where possible) */
  LAB_RECOVERED_NEW_WORLD = 2, /* the world's communicators had to be replaced */
  LAB_RECOVERED_GROUP_LOST = 4 /* some other group had to be given up: it stays unusable */
};
int lab_dist_recover(void);
/* The same after a chunk that ended in an error on some rank (every rank passes the same
 * flag): the ranks also catch up on asynchronous collectives some of them posted (a DDP
 * bucket launched before a Ctrl-C), so a wrapper can wait for its pending work and go on. */
int lab_dist_recover_aborted(int aborted);

/* New groups: every rank of `parent` must call these, members or not. */
lab_group *lab_dist_new_group(lab_group *parent, int n, const int *world_ranks);
lab_group *lab_dist_split(lab_group *parent, int color, int key);
void lab_dist_free_group(lab_group *g); /* at once, whoever holds it: use release */
/* Groups are counted references: every holder beyond the creator retains (a pending work, a
 * graph node that runs a collective in backward), and the last release frees the group and
 * its communicators (as torch.distributed.destroy_process_group), so new_group can be called
 * without bound. Freeing is local to each rank, as MPI_Comm_free is. */
void lab_dist_group_retain(lab_group *g);
void lab_dist_group_release(lab_group *g);
int lab_dist_group_count(void);
lab_group *lab_dist_group_at(int i);

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
#define LAB_P2P_TAG_MAX 32766 /* tags are 0..this (MPI guarantees 32767; the backend keeps the last) */
int lab_send(lab_group *g, lab_tensor *t, int dst, int tag, lab_work **work);
int lab_recv(lab_group *g, lab_tensor *t, int src, int tag, lab_work **work);
int lab_barrier(lab_group *g);

int lab_work_wait(lab_work *w);
int lab_work_test(lab_work *w, int *done);
void lab_work_free(lab_work *w);

void lab_dist_reset_stats(void);
/* Seconds this rank has spent inside collectives (calls and waits) since it started. */
double lab_dist_comm_seconds(void);
/* This process's CPU time in the same places, and in all (CLOCK_PROCESS_CPUTIME_ID): under
 * more ranks than cores, CPU time outside collectives is the work a rank did, while its wall
 * time also counts the turns it waited for a core. */
double lab_dist_comm_cpu_seconds(void);

#endif
