/* The MPI call of each collective, from its lab_post description (see mpi_post.h). */
#include "mpi_post.h"

int lab_mpi_post(MPI_Comm comm, const lab_post *p, const void *send, void *recv, MPI_Request *req) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  int count = (int)p->count; /* callers checked it fits MPI's int */
  MPI_Datatype t = p->kind == LAB_POST_EXCHANGE ? MPI_BYTE : lab_mpi_type(p->dtype);
  /* in place (all_reduce, and reduce at the root) when the caller passes one buffer */
  const void *s = send == recv ? MPI_IN_PLACE : send;
  switch (p->kind) {
  case LAB_OP_ALL_REDUCE: {
    MPI_Op op = lab_mpi_op(p->redop, p->dtype);
    return req ? MPI_Iallreduce(s, recv, count, t, op, comm, req) : MPI_Allreduce(s, recv, count, t, op, comm);
  }
  case LAB_OP_BROADCAST:
    return req ? MPI_Ibcast(recv, count, t, p->root, comm, req) : MPI_Bcast(recv, count, t, p->root, comm);
  case LAB_OP_REDUCE: {
    /* MPI_IN_PLACE is only valid at the root, and only the root receives */
    MPI_Op op = lab_mpi_op(p->redop, p->dtype);
    const void *rs = rank == p->root ? s : send;
    void *r = rank == p->root ? recv : NULL;
    return req ? MPI_Ireduce(rs, r, count, t, op, p->root, comm, req) : MPI_Reduce(rs, r, count, t, op, p->root, comm);
  }
  case LAB_OP_ALL_GATHER:
  case LAB_POST_EXCHANGE:
    return req ? MPI_Iallgather(send, count, t, recv, count, t, comm, req)
               : MPI_Allgather(send, count, t, recv, count, t, comm);
  case LAB_OP_REDUCE_SCATTER: {
    MPI_Op op = lab_mpi_op(p->redop, p->dtype);
    return req ? MPI_Ireduce_scatter_block(send, recv, count, t, op, comm, req)
               : MPI_Reduce_scatter_block(send, recv, count, t, op, comm);
  }
  case LAB_OP_ALL_TO_ALL:
    return req ? MPI_Ialltoall(send, count, t, recv, count, t, comm, req)
               : MPI_Alltoall(send, count, t, recv, count, t, comm);
  case LAB_OP_GATHER: { /* only the root receives */
    void *r = rank == p->root ? recv : NULL;
    return req ? MPI_Igather(send, count, t, r, count, t, p->root, comm, req)
               : MPI_Gather(send, count, t, r, count, t, p->root, comm);
  }
  case LAB_OP_SCATTER: { /* only the root sends */
    const void *sr = rank == p->root ? send : NULL;
    return req ? MPI_Iscatter(sr, count, t, recv, count, t, p->root, comm, req)
               : MPI_Scatter(sr, count, t, recv, count, t, p->root, comm);
  }
  case LAB_OP_BARRIER:
    return req ? MPI_Ibarrier(comm, req) : MPI_Barrier(comm);
  default:
    return MPI_ERR_OTHER;
  }
}

int lab_mpi_post_extent(const lab_post *p, int size, int64_t *send, int64_t *recv) {
  int64_t one = p->count, all = one * size;
  switch (p->kind) {
  case LAB_OP_ALL_REDUCE:
  case LAB_OP_BROADCAST: *send = one, *recv = one; return 1; /* in place: the normal path passes one buffer */
  case LAB_OP_REDUCE: *send = one, *recv = one; return 0;
  case LAB_OP_ALL_GATHER:
  case LAB_POST_EXCHANGE: *send = one, *recv = all; return 0;
  case LAB_OP_REDUCE_SCATTER:
  case LAB_OP_SCATTER: *send = all, *recv = one; return 0;
  case LAB_OP_GATHER: *send = one, *recv = all; return 0;
  case LAB_OP_ALL_TO_ALL: *send = all, *recv = all; return 0;
  case LAB_OP_BARRIER: *send = 0, *recv = 0; return 0;
  default: return -1;
  }
}
