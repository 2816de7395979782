/* A process group and the registry of live groups: the bottom of runtime/dist. Backends
 * (mpi.c, nccl.c), the guarded wait (guard.c) and recovery read only this header, never the
 * collectives above them (dist.h): what they need of the session (whether blocking waits poll,
 * the traceback Ctrl-T shows) reaches them in the group's wait policy. */
#ifndef LAB_RUNTIME_DIST_GROUP_H
#define LAB_RUNTIME_DIST_GROUP_H

#include <stdint.h>

#include "comm.h"

typedef struct {
  int64_t calls;
  int64_t bytes;      /* payload: the bytes of the tensor this rank passed in */
  int64_t wire_bytes; /* bytes this rank sends under a ring/tree algorithm (nccl-tests' bus factor) */
} lab_coll_stats;

/* How a backend waits in a blocking call, set by the session (the REPL and the stepper turn
 * guarded on) and shared by every group. */
typedef struct {
  /* blocking collectives wait by polling (guard.h), so that a Ctrl-C or the watchdog can end
   * the wait with an error instead of a hang */
  int guarded;
  /* seconds a blocking wait may make no progress before the watchdog reports what every rank
   * is doing (0: never; guarded waits only) */
  double watchdog;
  char traceback[512]; /* the Lua traceback of the current call (checked or guarded mode), or "" */
} lab_wait_policy;

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
  const lab_wait_policy *wait; /* the session's (lab_group_policy), the same for every group */
  lab_coll_stats stats[LAB_NOPS]; /* indexed by comm.h's lab_coll_op */
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

/* The wait policy every group points at; the session changes it through lab_dist_set_guarded,
 * lab_dist_set_watchdog and lab_dist_set_traceback. */
lab_wait_policy *lab_group_policy(void);
void lab_dist_set_guarded(int on);
int lab_dist_guarded(void);
void lab_dist_set_watchdog(double seconds);
double lab_dist_watchdog(void);
void lab_dist_set_traceback(const char *traceback);
const char *lab_dist_call_traceback(void); /* the last call's traceback (checked mode), or "" */

/* Set up from the world group the backend created (MPI_Init happens in the backend). */
void lab_dist_register_world(lab_group *world);
lab_group *lab_dist_world(void);
int lab_dist_world_rank(void);
/* The group collectives use when none is named: the world, or in a REPL chunk run on some
 * ranks only (%on), a group of just those ranks. */
lab_group *lab_dist_default(void);
void lab_dist_set_default(lab_group *g); /* NULL: the world again */
int lab_dist_group_count(void);
lab_group *lab_dist_group_at(int i);

/* While set, every collective and group creation fails at once on this rank, before anything
 * reaches the wire, with "who: OP why" (the stepper sets it while it evaluates p and display at
 * a pause, where the other ranks wait for its next command and never join a collective).
 * lab_dist_refuse_collectives(NULL, NULL) allows them again. */
void lab_dist_refuse_collectives(const char *who, const char *why);
/* -1 (after lab_fail naming op) while collectives are refused, else 0 */
int lab_group_refusal(const char *op);

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
void lab_dist_reset_stats(void);

#endif
