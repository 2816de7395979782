/* The NCCL-API subset of shim/nccl.h on MPI, so runtime/dist/nccl.c runs on the sim device
 * (compiled a second time against this shim, as cuda_device.c is against simrt.c). What it
 * keeps of NCCL's contract, and how:
 * - Communicators from a unique id: ncclGetUniqueId names the creator's MPI_COMM_WORLD rank and
 *   a sequence number; ncclCommInitRank sends each member's (rank, world rank) to the creator,
 *   which answers with the list, and the members make an MPI communicator of exactly them
 *   (MPI_Comm_create_group: collective over the members only, as ncclCommInitRank is). It
 *   blocks until every member joined, as NCCL's does.
 * - Stream order: a call first waits until its stream has reached it (the sim's own wait, like
 *   a kernel launch's in launch.c: not a host synchronization), then reads its input and posts
 *   a non-blocking MPI request; the stream then gets an item that ends when the request has
 *   completed and writes the output. So an NCCL op reads what its stream was ordered after (a
 *   missing cudaStreamWaitEvent on the compute stream reads stale data, as on a GPU), and the
 *   compute stream sees the output only after waiting for the op's event.
 * - MPI from one thread: llmlab's MPI is MPI_THREAD_FUNNELED on one node, so every MPI call
 *   here runs on the thread that made the communicators; the stream workers only wait. The
 *   host's waits drive the requests (ncclCommGetAsyncError, and simrt.c's stream and event
 *   waits call lab_simrt_nccl_progress while NCCL work is pending).
 * - Reductions gather every member's input (MPI has no bf16/f16 types) and reduce in rank
 *   order, rounding to the dtype after each step as NCCL's kernels do, so every member gets
 *   the same bits. Send/recv match in posting order per pair (one tag), as NCCL's.
 * - ncclCommAbort ends the communicator's pending items at once (the kernels end on a GPU):
 *   outputs stay unwritten, the communicator's requests stay posted with their buffers and
 *   the MPI communicator never freed (MPI's rule: a request must complete or be cancelled
 *   before its buffer or communicator is freed; collective requests cannot be cancelled), so
 *   a peer that posts later writes only into memory kept for it. nccl.c rebuilds with a new id.
 * - ncclGroupStart/End: every call posts non-blocking requests at once, so a group needs no
 *   deferral (NCCL's groups exist to keep blocking kernels from deadlocking); only its first
 *   call waits for the stream. Sends and recvs outside a group (each waits for the one before
 *   it on the stream, as an NCCL send kernel waits for its peer's recv) deadlock when both
 *   peers send first, as they would on a GPU (nccl.c holds sends and recvs and issues them as
 *   one group: tests/sim/test_sim_p2p.lua showed the ungrouped ones hanging here). Not modelled:
 *   NCCL's transport, algorithms and channels, ncclCommSplit, non-blocking communicators. */
#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../kernels/cpu/half.h"
#include "shim/nccl.h"
#include "simrt_internal.h"

#define ID_MAGIC 0x6c61626eu /* "labn" */
#define TAG_JOIN 0x4c41      /* the rendezvous of ncclCommInitRank on MPI_COMM_WORLD */
#define TAG_P2P 7

typedef enum { K_ALL_REDUCE, K_REDUCE, K_BROADCAST, K_ALL_GATHER, K_REDUCE_SCATTER, K_SEND, K_RECV } kind;

typedef struct op {
  struct op *next; /* the communicator's pending list (progress) */
  kind k;
  struct ncclComm *comm;
  MPI_Request req;
  void *recv;          /* device pointer written when the item runs */
  size_t count, esz;   /* elements of the output (per rank for the gathers) */
  ncclDataType_t t;
  ncclRedOp_t rop;
  int root;
  int done, failed;
  unsigned char *in, *all; /* the input read at the call; what MPI delivers */
} op;

struct ncclComm {
  MPI_Comm mc;
  int rank, size;
  int aborted;
  ncclResult_t async;
  op *pending;
  char last[200];
  struct ncclComm *next_aborted;
};

typedef struct {
  uint32_t magic;
  int creator; /* MPI_COMM_WORLD rank */
  uint32_t seq;
} id_body;

static pthread_mutex_t nm = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t nc = PTHREAD_COND_INITIALIZER;
static pthread_t mpi_thread;
static int have_thread;
static ncclComm_t comms[64]; /* communicators with pending work (progress), NULL slots free */
static long calls;           /* collectives and sends/recvs posted (lab_simrt_nccl_calls) */
static int group_depth;
static int group_waited; /* the open group's first call waited for its stream */
/* aborted communicators, kept with their pending requests' buffers for the life of the
 * process (MPI may still write them); a list, so they stay reachable (leak checkers) */
static ncclComm_t aborted_comms;

long lab_simrt_nccl_calls(void) {
  pthread_mutex_lock(&nm);
  long n = calls;
  pthread_mutex_unlock(&nm);
  return n;
}

ncclResult_t ncclGetVersion(int *version) {
  *version = 22809; /* the NCCL whose API this follows (2.28.9) */
  return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t r) {
  switch (r) {
  case ncclSuccess: return "no error";
  case ncclSystemError: return "unhandled system error (sim: an MPI call failed)";
  case ncclInternalError: return "internal error (sim)";
  case ncclInvalidArgument: return "invalid argument";
  case ncclInvalidUsage: return "invalid usage";
  case ncclRemoteError: return "remote process exited or there was a network error";
  case ncclInProgress: return "NCCL operation in progress";
  default: return "unknown result (sim)";
  }
}

const char *ncclGetLastError(ncclComm_t comm) { return comm ? comm->last : ""; }

static int world_rank(void) {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
  static uint32_t seq;
  memset(id, 0, sizeof *id);
  id_body b = {ID_MAGIC, world_rank(), ++seq};
  memcpy(id->internal, &b, sizeof b);
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *out, int nranks, ncclUniqueId id, int rank) {
  id_body b;
  memcpy(&b, id.internal, sizeof b);
  *out = NULL;
  if (b.magic != ID_MAGIC || nranks < 1 || rank < 0 || rank >= nranks) return ncclInvalidArgument;
  if (!have_thread) mpi_thread = pthread_self(), have_thread = 1;
  int *wr = calloc((size_t)nranks, sizeof *wr);
  ncclComm_t c = calloc(1, sizeof *c);
  if (!wr || !c) {
    free(wr);
    free(c);
    return ncclSystemError;
  }
  int me[2] = {rank, world_rank()}, tag = TAG_JOIN + (int)(b.seq % 1000);
  int rc = MPI_SUCCESS;
  if (rank == 0) { /* the creator: collect every member, then tell each the list */
    wr[0] = me[1];
    for (int i = 1; i < nranks && rc == MPI_SUCCESS; i++) {
      int who[2];
      rc = MPI_Recv(who, 2, MPI_INT, MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      if (rc == MPI_SUCCESS && who[0] > 0 && who[0] < nranks) wr[who[0]] = who[1];
    }
    for (int i = 1; i < nranks && rc == MPI_SUCCESS; i++)
      rc = MPI_Send(wr, nranks, MPI_INT, wr[i], tag, MPI_COMM_WORLD);
  } else {
    rc = MPI_Send(me, 2, MPI_INT, b.creator, tag, MPI_COMM_WORLD);
    if (rc == MPI_SUCCESS) rc = MPI_Recv(wr, nranks, MPI_INT, b.creator, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  MPI_Group wg, sub;
  if (rc == MPI_SUCCESS) rc = MPI_Comm_group(MPI_COMM_WORLD, &wg);
  if (rc == MPI_SUCCESS) rc = MPI_Group_incl(wg, nranks, wr, &sub);
  if (rc == MPI_SUCCESS) rc = MPI_Comm_create_group(MPI_COMM_WORLD, sub, tag, &c->mc);
  free(wr);
  if (rc != MPI_SUCCESS) {
    free(c);
    return ncclSystemError;
  }
  MPI_Group_free(&sub);
  MPI_Group_free(&wg);
  c->rank = rank, c->size = nranks;
  *out = c;
  return ncclSuccess;
}

/* ---- reductions in rank order, rounded to the dtype at each step ---- */

static double get(const unsigned char *p, ncclDataType_t t, size_t i) {
  switch (t) {
  case ncclFloat32: return ((const float *)p)[i];
  case ncclFloat64: return ((const double *)p)[i];
  case ncclInt32: return ((const int32_t *)p)[i];
  case ncclInt64: return (double)((const int64_t *)p)[i];
  case ncclBfloat16: return lab_bf16_to_f32(((const uint16_t *)p)[i]);
  case ncclFloat16: return lab_f16_to_f32(((const uint16_t *)p)[i]);
  default: return p[i];
  }
}
static void put(unsigned char *p, ncclDataType_t t, size_t i, double v) {
  switch (t) {
  case ncclFloat32: ((float *)p)[i] = (float)v; break;
  case ncclFloat64: ((double *)p)[i] = v; break;
  case ncclInt32: ((int32_t *)p)[i] = (int32_t)v; break;
  case ncclInt64: ((int64_t *)p)[i] = (int64_t)v; break;
  case ncclBfloat16: ((uint16_t *)p)[i] = lab_f32_to_bf16((float)v); break;
  case ncclFloat16: ((uint16_t *)p)[i] = lab_f32_to_f16((float)v); break;
  default: p[i] = (unsigned char)v;
  }
}
static double combine(ncclRedOp_t r, double a, double b) {
  switch (r) {
  case ncclProd: return a * b;
  case ncclMax: return a > b ? a : b;
  case ncclMin: return a < b ? a : b;
  default: return a + b; /* sum, avg */
  }
}

/* out[i] = in_0[i] op in_1[i] op ... for the blocks of `all` at `at`, `stride` bytes apart */
static void reduce_ranks(const op *o, const unsigned char *all, size_t stride, unsigned char *out) {
  int64_t i64acc;
  for (size_t i = 0; i < o->count; i++) {
    if (o->t == ncclInt64) { /* integers exactly, not through double */
      i64acc = ((const int64_t *)all)[i];
      for (int r = 1; r < o->comm->size; r++) {
        int64_t v = ((const int64_t *)(all + (size_t)r * stride))[i];
        i64acc = o->rop == ncclProd ? i64acc * v : o->rop == ncclMax ? (v > i64acc ? v : i64acc)
                 : o->rop == ncclMin ? (v < i64acc ? v : i64acc) : i64acc + v;
      }
      if (o->rop == ncclAvg) i64acc /= o->comm->size;
      ((int64_t *)out)[i] = i64acc;
      continue;
    }
    put(out, o->t, i, get(all, o->t, i));
    for (int r = 1; r < o->comm->size; r++)
      put(out, o->t, i, combine(o->rop, get(out, o->t, i), get(all + (size_t)r * stride, o->t, i)));
    if (o->rop == ncclAvg) put(out, o->t, i, get(out, o->t, i) / o->comm->size);
  }
}

/* ---- progress: on the MPI thread only ---- */

static int on_mpi_thread(void) { return have_thread && pthread_equal(pthread_self(), mpi_thread); }

int lab_simrt_nccl_pending(void) {
  if (!on_mpi_thread()) return 0;
  pthread_mutex_lock(&nm);
  int any = 0;
  for (int i = 0; i < 64 && !any; i++) any = comms[i] && comms[i]->pending;
  pthread_mutex_unlock(&nm);
  return any;
}

static void progress_comm(ncclComm_t c) {
  for (op **p = &c->pending; *p;) {
    op *o = *p;
    int flag = 0;
    int rc = MPI_Test(&o->req, &flag, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
      snprintf(c->last, sizeof c->last, "MPI error %d in a sim NCCL request", rc);
      c->async = ncclSystemError;
      o->failed = flag = 1;
    }
    if (!flag) {
      p = &o->next;
      continue;
    }
    *p = o->next;
    o->done = 1;
  }
}

void lab_simrt_nccl_progress(void) {
  if (!on_mpi_thread()) return;
  pthread_mutex_lock(&nm);
  for (int i = 0; i < 64; i++)
    if (comms[i] && !comms[i]->aborted) progress_comm(comms[i]);
  pthread_cond_broadcast(&nc);
  pthread_mutex_unlock(&nm);
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *async_error) {
  lab_simrt_nccl_progress();
  pthread_mutex_lock(&nm);
  *async_error = comm->async;
  pthread_mutex_unlock(&nm);
  return ncclSuccess;
}

/* ---- the stream item: waits for the request, then writes the output ---- */

static int run_op(void *arg) {
  op *o = *(op **)arg;
  pthread_mutex_lock(&nm);
  while (!o->done && !o->comm->aborted) pthread_cond_wait(&nc, &nm);
  int finished = o->done && !o->failed;
  int abandoned = !o->done; /* aborted: MPI still owns o's buffers */
  pthread_mutex_unlock(&nm);
  if (finished && o->recv) {
    unsigned char *dst = lab_simrt_kview(o->recv);
    size_t n = o->count * o->esz;
    switch (o->k) {
    case K_ALL_REDUCE: reduce_ranks(o, o->all, n, dst); break;
    case K_REDUCE: if (o->comm->rank == o->root) reduce_ranks(o, o->all, n, dst); break;
    case K_REDUCE_SCATTER: reduce_ranks(o, o->all + (size_t)o->comm->rank * n, n * (size_t)o->comm->size, dst); break;
    case K_ALL_GATHER: memcpy(dst, o->all, n * (size_t)o->comm->size); break;
    case K_BROADCAST: memcpy(dst, o->in, n); break;
    case K_RECV: memcpy(dst, o->all, n); break;
    case K_SEND: break;
    }
  }
  if (!abandoned) {
    free(o->in);
    free(o->all);
    free(o);
  }
  return 0;
}

static size_t esize(ncclDataType_t t) {
  switch (t) {
  case ncclFloat64: case ncclInt64: case ncclUint64: return 8;
  case ncclFloat32: case ncclInt32: case ncclUint32: return 4;
  case ncclFloat16: case ncclBfloat16: return 2;
  default: return 1;
  }
}

static int track(ncclComm_t c) {
  for (int i = 0; i < 64; i++)
    if (comms[i] == c) return 0;
  for (int i = 0; i < 64; i++)
    if (!comms[i]) {
      comms[i] = c;
      return 0;
    }
  return -1;
}

/* the frame of every call: wait for the stream to reach it, read the input, post, queue */
static ncclResult_t post(kind k, const void *send, void *recv, size_t count, ncclDataType_t t, ncclRedOp_t rop,
                         int root, ncclComm_t c, cudaStream_t s) {
  if (!c || c->aborted) return ncclInvalidUsage;
  if (!on_mpi_thread()) return ncclInvalidUsage; /* MPI is FUNNELED: one thread drives it */
  if ((k == K_BROADCAST || k == K_REDUCE || k == K_SEND || k == K_RECV) && (root < 0 || root >= c->size))
    return ncclInvalidArgument;
  /* inside a group, the first call waits for the stream and the rest are ordered after it:
   * waiting again would wait for this group's own sends, which complete only once the peers
   * post the receives that follow them in their groups (a deadlock for messages past MPI's
   * eager size) */
  if (group_depth == 0 || !group_waited) {
    if (lab_simrt_drain(s) != cudaSuccess) return ncclUnhandledCudaError;
    group_waited = group_depth > 0;
  }
  size_t esz = esize(t), n = count * esz, P = (size_t)c->size;
  size_t in_n = k == K_REDUCE_SCATTER ? n * P : n;
  op *o = calloc(1, sizeof *o);
  op **item = malloc(sizeof *item);
  if (o) o->in = malloc(in_n ? in_n : 1);
  int gathers = k == K_ALL_REDUCE || k == K_REDUCE || k == K_ALL_GATHER || k == K_REDUCE_SCATTER;
  if (o) o->all = malloc(gathers ? in_n * P + 1 : n + 1);
  if (!o || !item || !o->in || !o->all) {
    if (o) free(o->in), free(o->all);
    free(o);
    free(item);
    return ncclSystemError;
  }
  *o = (op){NULL, k, c, MPI_REQUEST_NULL, recv, count, esz, t, rop, root, 0, 0, o->in, o->all};
  /* the input as the stream left it (broadcast: only the root's counts) */
  if (send && k != K_RECV && (k != K_BROADCAST || c->rank == root)) memcpy(o->in, lab_simrt_kview(send), in_n);
  int rc;
  switch (k) {
  case K_ALL_REDUCE: case K_ALL_GATHER: case K_REDUCE_SCATTER:
    rc = MPI_Iallgather(o->in, (int)in_n, MPI_BYTE, o->all, (int)in_n, MPI_BYTE, c->mc, &o->req);
    break;
  case K_REDUCE: rc = MPI_Igather(o->in, (int)n, MPI_BYTE, o->all, (int)n, MPI_BYTE, root, c->mc, &o->req); break;
  case K_BROADCAST: rc = MPI_Ibcast(o->in, (int)n, MPI_BYTE, root, c->mc, &o->req); break;
  case K_SEND: rc = MPI_Isend(o->in, (int)n, MPI_BYTE, root, TAG_P2P, c->mc, &o->req); break;
  default: rc = MPI_Irecv(o->all, (int)n, MPI_BYTE, root, TAG_P2P, c->mc, &o->req); break;
  }
  if (rc != MPI_SUCCESS) {
    free(o->in), free(o->all), free(o), free(item);
    snprintf(c->last, sizeof c->last, "MPI error %d posting a sim NCCL request", rc);
    return ncclSystemError;
  }
  pthread_mutex_lock(&nm);
  calls++;
  int tracked = track(c);
  o->next = c->pending; /* order within the list does not matter: each request is tested */
  c->pending = o;
  pthread_mutex_unlock(&nm);
  if (tracked < 0) return ncclInternalError;
  *item = o;
  return lab_simrt_enqueue(s, run_op, item) == cudaSuccess ? ncclSuccess : ncclUnhandledCudaError;
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t t, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t s) {
  return post(K_ALL_REDUCE, send, recv, count, t, op, 0, comm, s);
}
ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t t, int root, ncclComm_t comm,
                           cudaStream_t s) {
  return post(K_BROADCAST, send, recv, count, t, ncclSum, root, comm, s);
}
ncclResult_t ncclReduce(const void *send, void *recv, size_t count, ncclDataType_t t, ncclRedOp_t op, int root,
                        ncclComm_t comm, cudaStream_t s) {
  return post(K_REDUCE, send, recv, count, t, op, root, comm, s);
}
ncclResult_t ncclAllGather(const void *send, void *recv, size_t count, ncclDataType_t t, ncclComm_t comm,
                           cudaStream_t s) {
  return post(K_ALL_GATHER, send, recv, count, t, ncclSum, 0, comm, s);
}
ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t count, ncclDataType_t t, ncclRedOp_t op,
                               ncclComm_t comm, cudaStream_t s) {
  return post(K_REDUCE_SCATTER, send, recv, count, t, op, 0, comm, s);
}
ncclResult_t ncclSend(const void *buf, size_t count, ncclDataType_t t, int peer, ncclComm_t comm, cudaStream_t s) {
  return post(K_SEND, buf, NULL, count, t, ncclSum, peer, comm, s);
}
ncclResult_t ncclRecv(void *buf, size_t count, ncclDataType_t t, int peer, ncclComm_t comm, cudaStream_t s) {
  return post(K_RECV, NULL, buf, count, t, ncclSum, peer, comm, s);
}

ncclResult_t ncclGroupStart(void) {
  if (group_depth++ == 0) group_waited = 0;
  return ncclSuccess;
}
ncclResult_t ncclGroupEnd(void) {
  if (group_depth <= 0) return ncclInvalidUsage;
  group_depth--;
  return ncclSuccess;
}

/* ---- ending a communicator ---- */

static void untrack(ncclComm_t c) {
  for (int i = 0; i < 64; i++)
    if (comms[i] == c) comms[i] = NULL;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (!comm) return ncclInvalidArgument;
  pthread_mutex_lock(&nm);
  if (!comm->aborted) {
    comm->next_aborted = aborted_comms;
    aborted_comms = comm;
  }
  comm->aborted = 1; /* its items end now; the struct, requests and MPI communicator stay */
  untrack(comm);
  pthread_cond_broadcast(&nc);
  pthread_mutex_unlock(&nm);
  return ncclSuccess;
}

/* after the caller synchronized the stream: every request completed, so all may be freed */
ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (!comm) return ncclInvalidArgument;
  pthread_mutex_lock(&nm);
  int busy = comm->pending != NULL;
  if (!busy) untrack(comm);
  pthread_mutex_unlock(&nm);
  if (busy) return ncclCommAbort(comm); /* requests still posted: keep what they use */
  MPI_Comm_free(&comm->mc);
  free(comm);
  return ncclSuccess;
}
