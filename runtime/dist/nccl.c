/* The NCCL backend of comm.h: collectives on cuda tensors, one communicator and one stream per
 * group, as PyTorch's ProcessGroupNCCL does it.
 *
 * Ordering: before an op, the group's stream waits for an event recorded on the device's
 * compute stream (the tensors are ready); after it, an event is recorded on the group's stream.
 * Waiting for a work object makes the compute stream wait for that event: the host blocks only
 * in guarded mode (the REPL and the stepper), where it polls the event so that Ctrl-C and the
 * watchdog can end the wait, or when the user asks for a value. A blocking call is an async one
 * waited for at once. Memory a collective uses stays safe: the caching allocator reuses blocks
 * on the compute stream, which is ordered after the collective once its work is waited for
 * (dist.c keeps the tensors alive until then).
 *
 * Failures: ncclCommGetAsyncError is polled with the event; an error or a timeout aborts the
 * communicator (ncclCommAbort, so kernels stuck on the GPU end; the buffers are then free to
 * reuse, so none is held for recovery), poisons the device group (the user's group keeps its
 * MPI communicator for cpu tensors) and reports what every rank is doing (guard.c); recovery
 * rebuilds the world's communicator with a new unique id over the host group; another group's
 * says to make the group again. Checked-mode fingerprints and unique ids travel over the host
 * group's MPI check channel (exchange), never over NCCL.
 *
 * A communicator is made (ncclCommInitRank, blocking until every member joins) at the group's first
 * collective on cuda tensors, after checked mode has verified that every member is in that same
 * collective; a member that never arrives there would leave the others waiting in the init,
 * outside the watchdog's reach (a non-blocking communicator would make every later call
 * pollable too; not done).
 *
 * NCCL has no tags and no message sizes: sends and recvs between two ranks match in the order
 * they were posted, and a recv of the wrong size is not detected (the MPI path detects it).
 * An NCCL send waits for its peer's recv, so sends and recvs issued one by one on the group's
 * stream deadlock when two ranks isend to each other before they irecv (ring attention). They
 * are held instead (struct held) and issued as one ncclGroupStart/End group at the group's next
 * wait, test, collective or blocking send/recv, as PyTorch's batch_isend_irecv groups them:
 * within a group NCCL progresses every pair at once, and every rank issues its p2p at the same
 * point relative to its collectives, so the order across ranks stays the posting order.
 * all_to_all and all_to_all_v are grouped sends and recvs (ncclGroupStart/End). bf16 and f16
 * reduce on the device in NCCL's own kernels. */
#include "nccl.h"

#include <cuda_runtime.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../cuda/cuda_device.h"
#include "../error.h"
#include "guard.h"

_Static_assert(sizeof(ncclUniqueId) == LAB_NCCL_ID_BYTES, "LAB_NCCL_ID_BYTES is sizeof(ncclUniqueId)");

#define HELD 64 /* sends and recvs held before a group is issued anyway */

/* a send or recv posted and not yet issued; its work (NULL: a blocking call's) gets the event */
typedef struct {
  int send;
  void *buf;
  size_t count;
  ncclDataType_t type;
  int peer;
  struct lab_backend_work *work;
} held;

typedef struct {
  ncclComm_t comm; /* NULL once aborted */
  held held[HELD];
  int nheld;
  cudaStream_t stream;
  cudaEvent_t ready; /* recorded on the compute stream before each op */
  int index;         /* the cuda device */
  lab_group *self;   /* the device group this is the communicator of: poisoned when aborted */
  lab_group *host;   /* the user's group: MPI, fingerprints, unique ids */
  cudaEvent_t *spare; /* completion events of finished work, reused (one was created per collective) */
  int nspare, capspare;
} nccl_group;

struct lab_backend_work {
  nccl_group *ng;
  lab_group *g;
  cudaEvent_t done; /* NULL while held (or when its group failed to issue) */
  int held;
};

static const lab_comm_backend nccl_backend;

static int nccl_fail(const char *op, ncclResult_t r, ncclComm_t comm) {
  const char *last = comm ? ncclGetLastError(comm) : NULL;
  return lab_fail(op, "NCCL error %d: %s%s%s", (int)r, ncclGetErrorString(r), last && *last ? ": " : "",
                  last ? last : "");
}

static int cuda_fail(const char *op, cudaError_t e) {
  return lab_fail(op, "CUDA error %d: %s", (int)e, cudaGetErrorString(e));
}

static ncclDataType_t nccl_type(lab_dtype dt) {
  switch (dt) {
  case LAB_F32: return ncclFloat32;
  case LAB_F64: return ncclFloat64;
  case LAB_I32: return ncclInt32;
  case LAB_I64: return ncclInt64;
  case LAB_BF16: return ncclBfloat16;
  case LAB_F16: return ncclFloat16;
  default: return ncclUint8;
  }
}

static ncclRedOp_t nccl_op(lab_redop op) {
  switch (op) {
  case LAB_RED_MAX: return ncclMax;
  case LAB_RED_MIN: return ncclMin;
  case LAB_RED_PROD: return ncclProd;
  case LAB_RED_AVG: return ncclAvg; /* dist.c passes sum and divides; kept for completeness */
  default: return ncclSum;
  }
}

static nccl_group *ng_of(lab_group *g) { return g->impl; }

/* ---- identity, ids, communicators ---- */

int lab_nccl_gpu_key(int index, char *key, size_t n) {
  char bus[64] = "", host[64] = "";
  cudaError_t e = cudaDeviceGetPCIBusId(bus, (int)sizeof bus, index);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return cuda_fail("nccl", e);
  }
  gethostname(host, sizeof host - 1);
  snprintf(key, n, "%s/%s", host, bus);
  return 0;
}

int lab_nccl_unique_id(void *id) {
  ncclResult_t r = ncclGetUniqueId((ncclUniqueId *)id);
  return r == ncclSuccess ? 0 : nccl_fail("nccl", r, NULL);
}

const char *lab_nccl_version(void) {
  static char buf[32];
  int v = 0;
  ncclGetVersion(&v);
  snprintf(buf, sizeof buf, "NCCL %d.%d.%d", v / 10000, v / 100 % 100, v % 100);
  return buf;
}

/* The communicator over the host group's members; its rank is the host group's rank. */
static int comm_init(nccl_group *ng, int rank, int size, const void *id) {
  ncclUniqueId uid;
  memcpy(&uid, id, sizeof uid);
  cudaError_t e = cudaSetDevice(ng->index);
  if (e != cudaSuccess) return cuda_fail("nccl", e);
  ncclResult_t r = ncclCommInitRank(&ng->comm, size, uid, rank);
  if (r != ncclSuccess) {
    ng->comm = NULL;
    return nccl_fail("nccl init", r, NULL);
  }
  return 0;
}

int lab_nccl_group_init(lab_group *dev, lab_group *host, int index, const void *id) {
  nccl_group *ng = calloc(1, sizeof *ng);
  if (!ng) return lab_fail("nccl", "out of memory");
  ng->index = index;
  ng->host = host;
  if (!lab_cuda_compute_stream(index)) { /* sets the device up (and current) */
    free(ng);
    return -1;
  }
  cudaError_t e = cudaStreamCreateWithFlags(&ng->stream, cudaStreamNonBlocking);
  if (e == cudaSuccess) e = cudaEventCreateWithFlags(&ng->ready, cudaEventDisableTiming);
  if (e != cudaSuccess) {
    free(ng);
    return cuda_fail("nccl", e);
  }
  if (comm_init(ng, host->rank, host->size, id) < 0) {
    cudaEventDestroy(ng->ready);
    cudaStreamDestroy(ng->stream);
    free(ng);
    return -1;
  }
  dev->id = host->id;
  snprintf(dev->name, sizeof dev->name, "%s", host->name);
  dev->rank = host->rank;
  dev->size = host->size;
  dev->world_size = host->world_size;
  dev->world_ranks = host->world_ranks; /* shared: the host group owns it */
  dev->backend = &nccl_backend;
  dev->impl = ng;
  dev->host = host;
  ng->self = dev;
  return 0;
}

/* ---- the op's frame: order after the compute stream, run, record, wait ---- */

/* The group's stream waits for what the compute stream has queued (the tensors are written). */
static int order(const char *op, nccl_group *ng) {
  if (!ng->comm)
    return lab_fail(op, "the NCCL communicator of %s was aborted after a failed or abandoned collective; %s",
                    ng->host->name, ng->host->id == 0 ? "the REPL rebuilds the world's before the next chunk"
                                                     : "make the group again for cuda tensors");
  cudaStream_t compute = lab_cuda_compute_stream(ng->index);
  if (!compute) return -1;
  cudaError_t e = cudaEventRecord(ng->ready, compute);
  if (e == cudaSuccess) e = cudaStreamWaitEvent(ng->stream, ng->ready, 0);
  return e == cudaSuccess ? 0 : cuda_fail(op, e);
}

typedef struct {
  nccl_group *ng;
  cudaEvent_t ev;
} nccl_poll;

/* guard.c's test: the event, and the communicator's asynchronous error */
static int poll_fn(void *ctx, int *done) {
  nccl_poll *p = ctx;
  if (!p->ng->comm) /* aborted while this work was pending */
    return lab_fail("nccl", "the NCCL communicator of %s was aborted before this collective completed", p->ng->host->name);
  ncclResult_t ae = ncclSuccess;
  ncclResult_t r = ncclCommGetAsyncError(p->ng->comm, &ae);
  if (r != ncclSuccess) return nccl_fail("nccl", r, p->ng->comm);
  if (ae != ncclSuccess && ae != ncclInProgress) return nccl_fail("nccl", ae, p->ng->comm);
  cudaError_t e = cudaEventQuery(p->ev);
  if (e == cudaSuccess) *done = 1;
  else if (e == cudaErrorNotReady) *done = 0;
  else return cuda_fail("nccl", e);
  return 0;
}

/* held sends and recvs that will never be issued: their waits fail */
static void drop_held(nccl_group *ng) {
  for (int i = 0; i < ng->nheld; i++)
    if (ng->held[i].work) ng->held[i].work->held = 0;
  ng->nheld = 0;
}

/* The communicator is in an unknown state: abort it so that its kernels end, and leave the
 * group poisoned (guard.c did) until recovery rebuilds it. */
static void abort_comm(nccl_group *ng) {
  if (ng->comm) ncclCommAbort(ng->comm);
  ng->comm = NULL;
  drop_held(ng);
}

/* Completion of work: the compute stream waits for it; in guarded mode the host polls it too,
 * bounded by the watchdog. */
static int finish(const char *op, nccl_group *ng, cudaEvent_t ev) {
  if (ng->self->wait->guarded) {
    if (lab_guard_wait(ng->self, op, poll_fn, &(nccl_poll){ng, ev}) < 0) {
      abort_comm(ng);
      return -1;
    }
  } else {
    int done = 0;
    if (poll_fn(&(nccl_poll){ng, ev}, &done) < 0) { /* an error already raised asynchronously */
      lab_group_poison(ng->self);
      abort_comm(ng);
      return -1;
    }
  }
  cudaStream_t compute = lab_cuda_compute_stream(ng->index);
  if (!compute) return -1;
  cudaError_t e = cudaStreamWaitEvent(compute, ev, 0);
  return e == cudaSuccess ? 0 : cuda_fail(op, e);
}

/* Completion events come from the group's pool: re-recording an event is allowed once the
 * waits that captured it were queued (cudaStreamWaitEvent takes the event's state when called). */
static long events_created; /* the pool's misses, counted for tests (sim build: below) */
static cudaError_t event_get(nccl_group *ng, cudaEvent_t *ev) {
  if (ng->nspare > 0) {
    *ev = ng->spare[--ng->nspare];
    return cudaSuccess;
  }
  events_created++;
  return cudaEventCreateWithFlags(ev, cudaEventDisableTiming);
}
#ifdef LAB_SIMRT
long lab_simrt_nccl_events_created(void) { return events_created; } /* runtime/cuda/loader.h */
#endif
static void event_put(nccl_group *ng, cudaEvent_t ev) {
  if (ng->nspare == ng->capspare) {
    int cap = ng->capspare ? 2 * ng->capspare : 8;
    cudaEvent_t *grown = realloc(ng->spare, sizeof *grown * (size_t)cap);
    if (!grown) {
      cudaEventDestroy(ev);
      return;
    }
    ng->spare = grown;
    ng->capspare = cap;
  }
  ng->spare[ng->nspare++] = ev;
}

/* An event recorded on the group's stream now, from the pool */
static cudaError_t record(nccl_group *ng, cudaEvent_t *ev) {
  cudaError_t e = event_get(ng, ev);
  if (e == cudaSuccess && (e = cudaEventRecord(*ev, ng->stream)) != cudaSuccess) cudaEventDestroy(*ev);
  return e;
}

/* The held sends and recvs issued as one NCCL group, each work given its completion event. */
static int issue_held(const char *op, nccl_group *ng) {
  int n = ng->nheld, rc = order(op, ng);
  ng->nheld = 0;
  if (rc == 0) {
    ncclResult_t r = ncclGroupStart();
    for (int i = 0; i < n && r == ncclSuccess; i++) {
      const held *h = &ng->held[i];
      r = h->send ? ncclSend(h->buf, h->count, h->type, h->peer, ng->comm, ng->stream)
                  : ncclRecv(h->buf, h->count, h->type, h->peer, ng->comm, ng->stream);
    }
    ncclResult_t r2 = ncclGroupEnd(); /* always closes the group it opened */
    if (r == ncclSuccess) r = r2;
    if (r != ncclSuccess) rc = nccl_fail(op, r, ng->comm);
  }
  for (int i = 0; i < n; i++) {
    lab_backend_work *w = ng->held[i].work;
    w->held = 0;
    cudaError_t e = rc == 0 ? record(ng, &w->done) : cudaSuccess;
    if (e != cudaSuccess) rc = cuda_fail(op, e);
  }
  return rc;
}

/* Every op but a send or recv: the held ones are issued first (the posting order), then the
 * group's stream is ordered after the compute stream. g's NCCL group, or NULL after lab_fail. */
static nccl_group *enter(const char *op, lab_group *g) {
  nccl_group *ng = ng_of(g);
  if (ng->nheld && issue_held(op, ng) < 0) return NULL;
  return order(op, ng) < 0 ? NULL : ng;
}

/* After the op was queued: record its event; hand it out as work, or finish it now. */
static int leave(const char *op, lab_group *g, nccl_group *ng, ncclResult_t r, lab_backend_work **work) {
  if (r != ncclSuccess) return nccl_fail(op, r, ng->comm);
  cudaEvent_t ev;
  cudaError_t e = record(ng, &ev);
  if (e != cudaSuccess) return cuda_fail(op, e);
  if (!work) {
    int rc = finish(op, ng, ev);
    event_put(ng, ev); /* waits already captured it */
    return rc;
  }
  lab_backend_work *w = calloc(1, sizeof *w);
  if (!w) {
    finish(op, ng, ev);
    event_put(ng, ev);
    return lab_fail(op, "out of memory");
  }
  w->ng = ng;
  w->g = g;
  w->done = ev;
  *work = w;
  return 0;
}

/* all-to-all as one group of sends and recvs: block i of send goes to rank i, block j of recv
 * comes from rank j (counts and displacements in elements) */
static ncclResult_t grouped_exchange(nccl_group *ng, int n, const void *send, const int64_t *sc, const int64_t *sd,
                                     void *recv, const int64_t *rc, const int64_t *rd, lab_dtype dt) {
  size_t esz = lab_dtype_size(dt);
  ncclDataType_t t = nccl_type(dt);
  ncclResult_t r = ncclGroupStart();
  for (int p = 0; p < n && r == ncclSuccess; p++) {
    if (sc[p] > 0) r = ncclSend((const char *)send + (size_t)sd[p] * esz, (size_t)sc[p], t, p, ng->comm, ng->stream);
    if (r == ncclSuccess && rc[p] > 0)
      r = ncclRecv((char *)recv + (size_t)rd[p] * esz, (size_t)rc[p], t, p, ng->comm, ng->stream);
  }
  ncclResult_t r2 = ncclGroupEnd(); /* always closes the group it opened */
  return r != ncclSuccess ? r : r2;
}

/* The NCCL call of the collective c (comm.h's description) on g's communicator ng and its stream: each
 * op's call is written here once (all_to_all is the uneven one with even counts). */
static ncclResult_t post(lab_group *g, nccl_group *ng, const lab_coll_call *c) {
  size_t n = (size_t)c->count;
  ncclDataType_t t = nccl_type(c->dt);
  switch (c->op) {
  case LAB_OP_ALL_REDUCE: return ncclAllReduce(c->send, c->recv, n, t, nccl_op(c->redop), ng->comm, ng->stream);
  case LAB_OP_BROADCAST: return ncclBroadcast(c->send, c->recv, n, t, c->peer, ng->comm, ng->stream);
  case LAB_OP_REDUCE: return ncclReduce(c->send, c->recv, n, t, nccl_op(c->redop), c->peer, ng->comm, ng->stream);
  case LAB_OP_ALL_GATHER: return ncclAllGather(c->send, c->recv, n, t, ng->comm, ng->stream);
  case LAB_OP_REDUCE_SCATTER:
    return ncclReduceScatter(c->send, c->recv, n, t, nccl_op(c->redop), ng->comm, ng->stream);
  case LAB_OP_ALL_TO_ALL_SINGLE:
    return grouped_exchange(ng, g->size, c->send, c->v[0], c->v[1], c->recv, c->v[2], c->v[3], c->dt);
  default: return ncclInvalidUsage;
  }
}

/* Every collective's frame: the held sends and recvs and the stream order first (enter), then
 * its NCCL call (post), then its event as work (leave). */
static int run(lab_group *g, lab_coll_call c, lab_backend_work **work) {
  nccl_group *ng = enter(c.name, g);
  return ng ? leave(c.name, g, ng, post(g, ng, &c), work) : -1;
}

static int n_all_reduce(lab_group *g, const void *send, void *recv, int64_t count, lab_dtype dt, lab_redop op,
                        lab_backend_work **work) {
  return run(g, (lab_coll_call){.op = LAB_OP_ALL_REDUCE, .name = "all_reduce", .send = send, .recv = recv,
                                .count = count, .dt = dt, .redop = op, .peer = -1}, work);
}

static int n_broadcast(lab_group *g, void *buf, int64_t count, lab_dtype dt, int root, lab_backend_work **work) {
  return run(g, (lab_coll_call){.op = LAB_OP_BROADCAST, .name = "broadcast", .send = buf, .recv = buf,
                                .count = count, .dt = dt, .redop = -1, .peer = root}, work);
}

static int n_reduce(lab_group *g, const void *send, void *recv, int64_t count, lab_dtype dt, lab_redop op, int root,
                    lab_backend_work **work) {
  return run(g, (lab_coll_call){.op = LAB_OP_REDUCE, .name = "reduce", .send = send, .recv = recv, .count = count,
                                .dt = dt, .redop = op, .peer = root}, work);
}

static int n_all_gather(lab_group *g, const void *send, void *recv, int64_t count, lab_dtype dt,
                        lab_backend_work **work) {
  return run(g, (lab_coll_call){.op = LAB_OP_ALL_GATHER, .name = "all_gather", .send = send, .recv = recv,
                                .count = count, .dt = dt, .redop = -1, .peer = -1}, work);
}

static int n_reduce_scatter(lab_group *g, const void *send, void *recv, int64_t count, lab_dtype dt, lab_redop op,
                            lab_backend_work **work) {
  return run(g, (lab_coll_call){.op = LAB_OP_REDUCE_SCATTER, .name = "reduce_scatter", .send = send, .recv = recv,
                                .count = count, .dt = dt, .redop = op, .peer = -1}, work);
}

static int n_all_to_all_v(lab_group *g, const void *send, const int64_t *send_counts, const int64_t *send_displs,
                          void *recv, const int64_t *recv_counts, const int64_t *recv_displs, lab_dtype dt,
                          lab_backend_work **work) {
  return run(g, (lab_coll_call){.op = LAB_OP_ALL_TO_ALL_SINGLE, .name = "all_to_all_single", .send = send,
                                .recv = recv, .dt = dt, .redop = -1, .peer = -1,
                                .v = {send_counts, send_displs, recv_counts, recv_displs}}, work);
}

static int n_all_to_all(lab_group *g, const void *send, void *recv, int64_t count, lab_dtype dt,
                        lab_backend_work **work) {
  int n = g->size;
  int64_t *v = malloc(sizeof(int64_t) * 2 * (size_t)n);
  if (!v) return lab_fail("all_to_all", "out of memory");
  for (int p = 0; p < n; p++) v[p] = count, v[n + p] = count * p;
  int rc = run(g, (lab_coll_call){.op = LAB_OP_ALL_TO_ALL_SINGLE, .name = "all_to_all", .send = send, .recv = recv,
                                  .dt = dt, .redop = -1, .peer = -1, .v = {v, v + n, v, v + n}}, work);
  free(v); /* NCCL took the counts when the group ended */
  return rc;
}


/* A send or recv is held (see the top); a blocking one is issued with the held ones at once. */
static int p2p(const char *op, lab_group *g, int send, void *buf, int64_t count, lab_dtype dt, int peer,
               lab_backend_work **work) {
  nccl_group *ng = ng_of(g);
  if (!ng->comm) return order(op, ng); /* says it was aborted */
  if (ng->nheld == HELD && issue_held(op, ng) < 0) return -1;
  lab_backend_work local, *w = work ? calloc(1, sizeof *w) : &local;
  if (!w) return lab_fail(op, "out of memory");
  *w = (lab_backend_work){ng, g, NULL, 1};
  ng->held[ng->nheld++] = (held){send, buf, (size_t)count, nccl_type(dt), peer, w};
  if (work) {
    *work = w;
    return 0;
  }
  int rc = issue_held(op, ng);
  if (rc == 0) rc = finish(op, ng, local.done);
  if (local.done) event_put(ng, local.done); /* waits already captured it */
  return rc;
}

static int n_send(lab_group *g, const void *buf, int64_t count, lab_dtype dt, int peer, int tag,
                  lab_backend_work **work) {
  (void)tag; /* NCCL matches a pair's messages in order */
  return p2p("send", g, 1, (void *)buf, count, dt, peer, work);
}

static int n_recv(lab_group *g, void *buf, int64_t count, lab_dtype dt, int peer, int tag, lab_backend_work **work) {
  (void)tag;
  return p2p("recv", g, 0, buf, count, dt, peer, work);
}

/* barriers and fingerprints are host matters: the host group's MPI channel */
static int n_barrier(lab_group *g) { return g->host->backend->barrier(g->host); }
static int n_exchange(lab_group *g, const void *mine, void *all, int nbytes) {
  return g->host->backend->exchange(g->host, mine, all, nbytes);
}

/* a held send or recv is issued (with the others held) before it is waited for or tested */
static int issued(const char *op, lab_backend_work *w) {
  if (w->held && issue_held(op, w->ng) < 0) return -1;
  if (!w->done)
    return lab_fail(op, "this send or recv was never issued (its NCCL group failed, or the communicator of %s was "
                    "aborted)", w->ng->host->name);
  return 0;
}

static int n_wait(lab_backend_work *w) { return issued("wait", w) < 0 ? -1 : finish("wait", w->ng, w->done); }

static int n_test(lab_backend_work *w, int *done) {
  if (issued("test", w) < 0) return -1;
  if (poll_fn(&(nccl_poll){w->ng, w->done}, done) < 0) {
    lab_group_poison(w->ng->self);
    abort_comm(w->ng);
    return -1;
  }
  return 0; /* dist.c waits (the compute stream waits) once done */
}

static void n_free_work(lab_backend_work *w) {
  if (!w) return;
  if (w->held) issue_held("wait", w->ng); /* its peer may wait for it; and the list must not keep w */
  if (w->done) event_put(w->ng, w->done);
  free(w);
}

static int n_split(lab_group *g, int color, int key, lab_group *out) {
  (void)color, (void)key, (void)out;
  return lab_fail("new_group", "device groups are made from host groups (%s), not split", g->name);
}

static void n_free_group(lab_group *g) {
  nccl_group *ng = g->impl;
  if (!ng) return;
  drop_held(ng);
  if (ng->comm) {
    cudaStreamSynchronize(ng->stream); /* nothing of ours may still run on it */
    ncclCommDestroy(ng->comm);
  }
  cudaEventDestroy(ng->ready);
  for (int i = 0; i < ng->nspare; i++) cudaEventDestroy(ng->spare[i]);
  free(ng->spare);
  cudaStreamDestroy(ng->stream);
  free(ng);
  g->impl = NULL;
}

/* A new communicator from a new unique id over the host group, in place of an aborted one
 * (ncclCommAbort released it). Every member calls this at the same point (recovery, which
 * calls it when any member's device group was poisoned), and every member rebuilds: a member
 * whose communicator is still alive aborts it first. It may be alive because this member
 * never posted the collective the others gave up on (it skipped it, or finished its chunk),
 * or because it gave up in an MPI wait instead; returning early there left the others alone
 * in the exchange below, blocked forever outside any chunk (sim.test_nccl_recover). The
 * aborted communicator's pending kernels end; its buffers are free to reuse. */
static int n_rebuild(lab_group *g) {
  nccl_group *ng = g->impl;
  lab_group *host = ng->host;
  abort_comm(ng);
  /* rank 0's id and every member's in one block: an exchange given up may still read or write
   * it (its request goes to recovery), so then it is kept, not freed (a plugin has no held.h) */
  unsigned char *id = calloc((size_t)host->size + 1, LAB_NCCL_ID_BYTES), *all = id + LAB_NCCL_ID_BYTES;
  if (!id) return lab_fail("recover", "out of memory");
  int rc = host->rank == 0 ? lab_nccl_unique_id(id) : 0;
  int exchanged = rc == 0 && host->backend->exchange(host, id, all, LAB_NCCL_ID_BYTES) == 0;
  if (exchanged) rc = comm_init(ng, host->rank, host->size, all);
  if (exchanged || rc < 0) free(id);
  else rc = -1;
  if (rc == 0) g->poisoned = 0;
  return rc;
}

static const lab_comm_backend nccl_backend = {
    .name = "nccl",
    .all_reduce = n_all_reduce,
    .broadcast = n_broadcast,
    .reduce = n_reduce,
    .all_gather = n_all_gather,
    .reduce_scatter = n_reduce_scatter,
    .all_to_all = n_all_to_all,
    .all_to_all_v = n_all_to_all_v,
    .send = n_send,
    .recv = n_recv,
    .barrier = n_barrier,
    .exchange = n_exchange,
    .wait = n_wait,
    .test = n_test,
    .free_work = n_free_work,
    .split = n_split,
    .free_group = n_free_group,
    .rebuild = n_rebuild,
};

const lab_comm_backend *lab_nccl_backend(void) { return &nccl_backend; }
