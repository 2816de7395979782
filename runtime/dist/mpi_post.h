/* Each collective's MPI call, written once: the normal path (mpi.c: blocking, or a request a
 * work object or a guarded wait completes) and the recovery path (mpi_recover.c: a matching
 * post on scratch buffers for a rank that never arrived) both post from a lab_post record
 * (mpi_group.h), so the two cannot disagree on arguments MPI matches by. */
#ifndef LAB_RUNTIME_DIST_MPI_POST_H
#define LAB_RUNTIME_DIST_MPI_POST_H

#include <mpi.h>

#include "mpi_group.h"

/* Posts on comm the collective p describes (kind: a lab_coll_op other than send, recv and
 * all_to_all_single, or LAB_POST_EXCHANGE: an all-gather of count bytes). For all_reduce and
 * reduce, send == recv is an in-place call; for reduce only the root's recv is used. With req
 * NULL the call blocks; otherwise *req is the started request. Returns MPI's code
 * (MPI_ERR_OTHER for a kind that has no single call). */
int lab_mpi_post(MPI_Comm comm, const lab_post *p, const void *send, void *recv, MPI_Request *req);

/* The elements the collective p reads from send and writes to recv on a group of size ranks
 * (the root's, where only the root's buffer is used): what MPI's int must hold, and the
 * scratch buffers recovery posts a matching call on. 1 for a call the normal path makes in
 * place (send == recv: one buffer), 0 for one with two, -1 for a kind lab_mpi_post lacks. */
int lab_mpi_post_extent(const lab_post *p, int size, int64_t *send, int64_t *recv);

#endif
