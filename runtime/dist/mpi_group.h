/* The MPI backend's private view of a group, shared by mpi.c (the collectives), mpi_p2p.c
 * (point-to-point) and mpi_recover.c (completing collectives abandoned by a Ctrl-C, the watchdog or a stepper quit). Each group
 * has two channels (communicators): data for the user's collectives and check for the
 * fingerprints of checked mode. Every collective posted on a channel is numbered and its
 * recent descriptors kept, because MPI matches collectives by their order on a communicator:
 * a rank that never arrived can later post the same operation (on scratch buffers) and so let
 * the others' abandoned requests complete, instead of leaving them to write into freed memory. */
#ifndef LAB_RUNTIME_DIST_MPI_GROUP_H
#define LAB_RUNTIME_DIST_MPI_GROUP_H

#include <mpi.h>
#include <stdint.h>

#include "group.h"

enum { LAB_CH_DATA = 0, LAB_CH_CHECK = 1, LAB_NCH };
enum { LAB_POST_EXCHANGE = 100, LAB_POST_UNREPAIRABLE = 101 }; /* kinds besides lab_coll_op */
#define LAB_POST_HISTORY 16

/* one posted collective, enough to post a matching one */
typedef struct {
  int32_t kind;  /* lab_coll_op, or LAB_POST_EXCHANGE (count = bytes) */
  int32_t dtype; /* lab_dtype */
  int32_t redop; /* the MPI-level reduction (avg already turned into sum), or -1 */
  int32_t root;  /* or -1 */
  int64_t count; /* elements per rank, as passed to MPI */
} lab_post;

typedef struct {
  MPI_Comm comm;
  int64_t posted;                       /* collectives posted so far */
  lab_post recent[LAB_POST_HISTORY];    /* recent[seq % LAB_POST_HISTORY] */
} lab_channel;

typedef struct {
  lab_channel ch[LAB_NCH];
  uint64_t key;   /* the same on every member: names this group to other ranks in recovery */
  int64_t splits; /* groups split from this one so far (the same count on every member) */
  int lost;       /* recovery gave it up: requests that can never complete are left on it */
} mpi_group;

/* numbers a collective about to be posted on channel ch of g; returns its sequence number */
int64_t lab_mpi_record(lab_group *g, int ch, int kind, int dtype, int redop, int root, int64_t count);
MPI_Datatype lab_mpi_type(int dtype);
MPI_Op lab_mpi_op(int redop, int dtype);
/* the backend's recover op (mpi_recover.c) */
int lab_mpi_recover(int aborted);

/* Point-to-point (mpi.c): the tag recovery's fences use (user tags stay below it, dist.h's
 * LAB_P2P_TAG_MAX); whether any send was posted since the last recovery (clear: forget it);
 * what a message that ends in mpi.c's trailer carries ("f32[4]", or "a message of N bytes"). */
#define LAB_P2P_FENCE_TAG (LAB_P2P_TAG_MAX + 1)
int lab_mpi_sent_since_recover(int clear);
const char *lab_mpi_p2p_describe(const void *msg, int64_t bytes, char *buf, size_t n);

/* What a point-to-point message says about itself, in 16 bytes after its data (mpi_p2p.c). */
typedef struct {
  int64_t magic_dtype; /* P2P_MAGIC << 8 | dtype */
  int64_t count;
} lab_p2p_trailer;

struct lab_backend_work {
  MPI_Request req;
  int is_recv;          /* a point-to-point receive: checked against the trailer on completion */
  int peer;
  int64_t count;        /* its elements */
  lab_dtype dt;
  const void *buf;
  lab_p2p_trailer trailer; /* the message's trailer, alive as long as the request */
  int *v_counts; /* all_to_all_v: counts and displacements MPI reads until completion */
};

/* Shared by mpi.c and mpi_p2p.c: "op: MPI error: <MPI's words>" (-1); g's data channel; an
 * empty work (NULL when out of memory); g's blocking wait through guard.h, which on giving up
 * leaves req to recovery (0, or -1 after lab_fail). */
int lab_mpi_fail(const char *op, int rc);
MPI_Comm lab_mpi_comm(lab_group *g);
lab_backend_work *lab_mpi_new_work(void);
struct lab_abandon_info;
int lab_mpi_guarded_wait(lab_group *g, MPI_Request *req, const char *op, MPI_Status *st,
                         const struct lab_abandon_info *info);
/* -1 after lab_fail when count elements do not fit MPI's int */
int lab_mpi_count_check(const char *op, int64_t count);

/* Point-to-point (mpi_p2p.c): comm.h's send and recv, and the check of a completed receive
 * (rc, st: MPI's) against the trailer the sender put after its data. */
int lab_mpi_send(lab_group *g, const void *buf, int64_t count, lab_dtype dt, int peer, int tag, lab_backend_work **work);
int lab_mpi_recv(lab_group *g, void *buf, int64_t count, lab_dtype dt, int peer, int tag, lab_backend_work **work);
int lab_mpi_p2p_check(int rc, MPI_Status *st, const void *buf, int64_t count, lab_dtype dt, const lab_p2p_trailer *tr,
                      int peer);

/* What a guarded wait that gave up leaves behind: its request, to be completed by recovery. */
typedef struct lab_abandon_info {
  int ch;
  int64_t seq;   /* collective's number on the channel, or -1 for point-to-point */
  int is_send;   /* point-to-point: 1 send, 0 recv */
} lab_abandon_info;
void lab_mpi_abandon(lab_group *g, MPI_Request req, const lab_abandon_info *info);

#endif
