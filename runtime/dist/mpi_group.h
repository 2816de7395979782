/* The MPI backend's private view of a group, shared by mpi.c (the collectives) and recover.c
 * (completing collectives abandoned by a Ctrl-C, the watchdog or a stepper quit). Each group
 * has two channels (communicators): data for the user's collectives and check for the
 * fingerprints of checked mode. Every collective posted on a channel is numbered and its
 * recent descriptors kept, because MPI matches collectives by their order on a communicator:
 * a rank that never arrived can later post the same operation (on scratch buffers) and so let
 * the others' abandoned requests complete, instead of leaving them to write into freed memory. */
#ifndef LAB_RUNTIME_DIST_MPI_GROUP_H
#define LAB_RUNTIME_DIST_MPI_GROUP_H

#include <mpi.h>
#include <stdint.h>

#include "dist.h"

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

/* What a guarded wait that gave up leaves behind: its request, to be completed by recovery. */
typedef struct {
  int ch;
  int64_t seq;   /* collective's number on the channel, or -1 for point-to-point */
  int is_send;   /* point-to-point: 1 send, 0 recv */
} lab_abandon_info;
void lab_mpi_abandon(lab_group *g, MPI_Request req, const lab_abandon_info *info);

#endif
