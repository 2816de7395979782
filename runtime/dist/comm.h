/* The communicator interface every backend implements (MPI now, NCCL later). Callers never
 * see MPI or NCCL types (mpi.c and nccl.c sit side by side; neither includes the other): a group holds an opaque backend handle, and a backend call takes
 * raw buffers, an element count and a dtype. Passing `work` makes the call asynchronous;
 * the returned work object is completed with backend->wait. Returns 0, or -1 after
 * lab_fail(). */
#ifndef LAB_RUNTIME_DIST_COMM_H
#define LAB_RUNTIME_DIST_COMM_H

#include <stdint.h>

#include "../../kernels/dtype.h"

/* X(enum suffix, name): lab_redop and lab_redop_name's table (dist.c) come from this list. */
#define LAB_REDOP_LIST(X) X(SUM, "sum") X(AVG, "avg") X(MAX, "max") X(MIN, "min") X(PROD, "prod")
#define LAB_REDOP_ENUM_(e, name) LAB_RED_##e,
typedef enum { LAB_REDOP_LIST(LAB_REDOP_ENUM_) LAB_NREDOPS } lab_redop;
#undef LAB_REDOP_ENUM_

/* X(enum suffix, name): lab_coll_op and lab_coll_name's table (check.c) come from this one
 * list; the groups' traffic stats (group.h) and the backends' records of posted collectives
 * (mpi_group.h) are indexed by it, which is why it sits here, under them, not in dist.h. */
#define LAB_COLL_LIST(X)                                                                         \
  X(ALL_REDUCE, "all_reduce") X(BROADCAST, "broadcast") X(REDUCE, "reduce")                     \
  X(ALL_GATHER, "all_gather") X(REDUCE_SCATTER, "reduce_scatter") X(ALL_TO_ALL, "all_to_all")   \
  X(SEND, "send") X(RECV, "recv") X(BARRIER, "barrier") X(ALL_TO_ALL_SINGLE, "all_to_all_single") \
  X(GATHER, "gather") X(SCATTER, "scatter")
#define LAB_COLL_ENUM_(e, name) LAB_OP_##e,
typedef enum { LAB_COLL_LIST(LAB_COLL_ENUM_) LAB_NOPS } lab_coll_op;
#undef LAB_COLL_ENUM_

typedef struct lab_group lab_group;
typedef struct lab_backend_work lab_backend_work; /* a backend's pending request */

/* One backend call of a collective, described by its data (dist.c fills it; a backend posts
 * it): op is a lab_coll_op (above). In-place calls (all_reduce, reduce, broadcast, send, recv)
 * pass send == recv. Fields an op does not use are -1 (redop, peer) or NULL. */
typedef struct {
  int op;
  const char *name; /* the op's name, for errors (lab_coll_launch fills it) */
  const void *send;
  void *recv; /* for reduce and gather only the root's is written; scatter reads only the root's send */
  int64_t count; /* elements per rank (all_to_all_single: unused, see the v arrays) */
  lab_dtype dt;
  int redop;  /* the backend-level reduction (avg already turned into sum), or -1 */
  int peer;   /* root of broadcast, reduce, gather, scatter; the other rank of send and recv; or -1 */
  int tag;
  /* all_to_all_single: send_counts, send_displs, recv_counts, recv_displs, one per rank */
  const int64_t *v[4];
} lab_coll_call;

#define LAB_P2P_TAG_MAX 32766 /* tags are 0..this (MPI guarantees 32767; the backend keeps the last) */

typedef struct lab_comm_backend {
  const char *name;
  /* Any collective c describes, in one slot (MPI): a backend that has it needs no other
   * collective slot, and a collective added to dist.h needs no new slot here. -1 after
   * lab_fail for an op it cannot post. NULL: the per-op slots below (NCCL), and collectives
   * without a slot there run on host copies through the host backend. */
  int (*collective)(lab_group *g, const lab_coll_call *c, lab_backend_work **work);
  int (*all_reduce)(lab_group *g, const void *send, void *recv, int64_t count, lab_dtype dt,
                    lab_redop op, lab_backend_work **work);
  int (*broadcast)(lab_group *g, void *buf, int64_t count, lab_dtype dt, int root,
                   lab_backend_work **work);
  int (*reduce)(lab_group *g, const void *send, void *recv, int64_t count, lab_dtype dt,
                lab_redop op, int root, lab_backend_work **work);
  /* count is per rank: recv holds size * count elements in rank order */
  int (*all_gather)(lab_group *g, const void *send, void *recv, int64_t count, lab_dtype dt,
                    lab_backend_work **work);
  /* count is per rank: send holds size * count elements, recv gets this rank's block */
  int (*reduce_scatter)(lab_group *g, const void *send, void *recv, int64_t count, lab_dtype dt,
                        lab_redop op, lab_backend_work **work);
  int (*all_to_all)(lab_group *g, const void *send, void *recv, int64_t count, lab_dtype dt,
                    lab_backend_work **work);
  /* Uneven all-to-all: send_counts[i] elements starting at send_displs[i] go to rank i;
   * recv_counts[j] elements from rank j land at recv_displs[j]. One entry per rank. */
  int (*all_to_all_v)(lab_group *g, const void *send, const int64_t *send_counts,
                      const int64_t *send_displs, void *recv, const int64_t *recv_counts,
                      const int64_t *recv_displs, lab_dtype dt, lab_backend_work **work);
  int (*send)(lab_group *g, const void *buf, int64_t count, lab_dtype dt, int peer, int tag,
              lab_backend_work **work);
  int (*recv)(lab_group *g, void *buf, int64_t count, lab_dtype dt, int peer, int tag,
              lab_backend_work **work);
  int (*barrier)(lab_group *g);
  /* Exchange a small fixed-size record with every rank of the group, on a channel apart
   * from user traffic: used by checked collectives to compare what each rank is calling. */
  int (*exchange)(lab_group *g, const void *mine, void *all, int nbytes);
  int (*wait)(lab_backend_work *w);
  int (*test)(lab_backend_work *w, int *done);
  void (*free_work)(lab_backend_work *w);
  /* New group of the members of g whose colour matches; colour < 0 leaves this rank out. */
  int (*split)(lab_group *g, int color, int key, lab_group *out);
  void (*free_group)(lab_group *g);
  /* After an abandoned collective: a fresh communicator over the same members in place of the
   * old one, whose pending requests are left to it (never freed under them). Every member
   * calls it at the same point (recovery, between REPL chunks). */
  int (*rebuild)(lab_group *g);
  /* Between REPL chunks, on every rank at the same point: complete the requests that guarded
   * waits abandoned on this backend's groups (ranks that never arrived post matching calls),
   * so that their buffers can be freed; rebuild or give up groups where that is impossible.
   * `here` is this rank's LAB_RECOVER_* flags: when a chunk ended in an error on any rank the
   * ranks also catch up when nothing was abandoned (an asynchronous collective that only some
   * ranks posted before the chunk was cut short, a DDP bucket, would otherwise pair with the
   * next one the others post). The flags travel in recovery's first exchange, so the caller
   * needs none of its own. Returns the mask below, with LAB_RECOVERED_ABORTED and
   * LAB_RECOVERED_DEVICE set where any rank passed the matching flag. Optional (NULL: only
   * rebuild the world). */
  int (*recover)(int here);
} lab_comm_backend;

/* What recovery did, a mask that is the same on every rank (0: nothing to do) */
enum {
  LAB_RECOVERED_COMPLETED = 1, /* recovery ran (abandoned requests completed where possible) */
  LAB_RECOVERED_NEW_WORLD = 2, /* the world's communicators had to be replaced */
  LAB_RECOVERED_GROUP_LOST = 4, /* some other group had to be given up: it stays unusable */
  LAB_RECOVERED_ABORTED = 8,    /* a chunk ended in an error on some rank (LAB_RECOVER_FAILED) */
  LAB_RECOVERED_DEVICE = 16     /* some rank has a poisoned device or other-backend group */
};
/* What one rank brings to recovery (the recover op's `here`) */
enum { LAB_RECOVER_FAILED = 1, LAB_RECOVER_DEVICE = 2 };

#endif
