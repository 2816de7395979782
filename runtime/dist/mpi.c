/* The MPI backend of comm.h: collectives for host buffers (CPU tensors, and device tensors
 * staged through host memory). bf16 and f16 have no MPI type: they travel as 2-byte types of
 * our own with reduction ops that widen to f32 and round back, as NCCL does. Blocking calls in
 * guarded mode wait through guard.c. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../kernels/cpu/half.h"
#include "../error.h"
#include "board.h"
#include "comm.h"
#include "dist.h"
#include "guard.h"
#include "held.h"
#include "mpi_backend.h"
#include "mpi_group.h"
#include "mpi_post.h"

/* What a point-to-point message says about itself, in 16 bytes after its data (see p2p_type). */
typedef struct {
  int64_t magic_dtype; /* P2P_MAGIC << 8 | dtype */
  int64_t count;
} p2p_trailer;
#define P2P_MAGIC 0x6c616270327050LL /* "labp2pP" */

struct lab_backend_work {
  MPI_Request req;
  int is_recv;          /* a point-to-point receive: checked against the trailer on completion */
  int peer;
  int64_t count;        /* its elements */
  lab_dtype dt;
  const void *buf;
  p2p_trailer trailer;  /* the message's trailer, alive as long as the request */
  int *v_counts; /* all_to_all_v: counts and displacements MPI reads until completion */
};

static MPI_Datatype bf16_type, f16_type;
static MPI_Op half_ops[LAB_NREDOPS];
static const lab_comm_backend mpi_backend;

static int mpi_fail(const char *op, int rc) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  return lab_fail(op, "MPI error: %s", msg);
}

/* ---- half-precision reductions ---- */

#define HALF_OP(NAME, EXPR)                                                                    \
  static void NAME(void *in, void *inout, int *len, MPI_Datatype *dt) {                        \
    uint16_t *a = in, *b = inout;                                                              \
    int bf = *dt == bf16_type;                                                                 \
    for (int i = 0; i < *len; i++) {                                                           \
      float x = bf ? lab_bf16_to_f32(a[i]) : lab_f16_to_f32(a[i]);                             \
      float y = bf ? lab_bf16_to_f32(b[i]) : lab_f16_to_f32(b[i]);                             \
      float r = (EXPR);                                                                        \
      b[i] = bf ? lab_f32_to_bf16(r) : lab_f32_to_f16(r);                                      \
    }                                                                                          \
  }
HALF_OP(half_sum, x + y)
HALF_OP(half_prod, x * y)
HALF_OP(half_max, (x != x || x > y) ? x : y)
HALF_OP(half_min, (x != x || x < y) ? x : y)

static MPI_Datatype mpi_type(lab_dtype dt) {
  switch (dt) {
  case LAB_F32: return MPI_FLOAT;
  case LAB_F64: return MPI_DOUBLE;
  case LAB_I32: return MPI_INT32_T;
  case LAB_I64: return MPI_INT64_T;
  case LAB_BF16: return bf16_type;
  case LAB_F16: return f16_type;
  default: return MPI_UINT8_T;
  }
}

static MPI_Op mpi_op(lab_redop op, lab_dtype dt) {
  if (dt == LAB_BF16 || dt == LAB_F16) return half_ops[op];
  switch (op) {
  case LAB_RED_MAX: return MPI_MAX;
  case LAB_RED_MIN: return MPI_MIN;
  case LAB_RED_PROD: return MPI_PROD;
  default: return MPI_SUM;
  }
}

MPI_Datatype lab_mpi_type(int dtype) { return mpi_type((lab_dtype)dtype); }
MPI_Op lab_mpi_op(int redop, int dtype) { return mpi_op((lab_redop)redop, (lab_dtype)dtype); }

static MPI_Comm comm_of(lab_group *g) { return ((mpi_group *)g->impl)->ch[LAB_CH_DATA].comm; }

int64_t lab_mpi_record(lab_group *g, int ch, int kind, int dtype, int redop, int root, int64_t count) {
  lab_channel *c = &((mpi_group *)g->impl)->ch[ch];
  int64_t seq = c->posted++;
  c->recent[seq % LAB_POST_HISTORY] = (lab_post){.kind = kind, .dtype = dtype, .redop = redop, .root = root, .count = count};
  return seq;
}

/* a collective on the data channel: numbered, and described for recovery */
static lab_abandon_info data_post(lab_group *g, lab_coll_op kind, lab_dtype dt, int redop, int root, int64_t count) {
  return (lab_abandon_info){.ch = LAB_CH_DATA, .seq = lab_mpi_record(g, LAB_CH_DATA, kind, dt, redop, root, count)};
}

static int count_check(const char *op, int64_t count) {
  if (count > 0x7fffffff) return lab_fail(op, "%lld elements exceed MPI's int count", (long long)count);
  return 0;
}

/* Each call is either blocking (work == NULL) or posts a request into a new work object. */
static lab_backend_work *new_work(void) {
  lab_backend_work *w = calloc(1, sizeof *w);
  if (w) w->req = MPI_REQUEST_NULL;
  return w;
}

/* A blocking call in guarded mode posts the non-blocking form and waits through guard.c. */
typedef struct {
  MPI_Request *req;
  MPI_Status *st;
} mpi_poll;

static int mpi_test_fn(void *ctx, int *done) {
  mpi_poll *p = ctx;
  int rc = MPI_Test(p->req, done, p->st);
  return rc == MPI_SUCCESS ? 0 : mpi_fail("wait", rc);
}

/* A wait that gives up (Ctrl-C, watchdog, stepper quit) does not drop its request: it goes to
 * recovery (mpi_recover.c), which completes it before its buffers are freed (held.h). */
static int guarded_wait(lab_group *g, MPI_Request *req, const char *op, MPI_Status *st, const lab_abandon_info *info) {
  if (lab_guard_wait(g, op, mpi_test_fn, &(mpi_poll){req, st}) == 0) return 0;
  if (*req != MPI_REQUEST_NULL) {
    lab_mpi_abandon(g, *req, info);
    lab_dist_note_abandoned();
  }
  return -1;
}

/* Posts the collective p on g's data channel, numbered and described for recovery:
 * blocking (work NULL; through a guarded wait in guarded mode, so that Ctrl-C and the
 * watchdog can end it) or as a request in a new work object. */
static int post(lab_group *g, const char *opname, lab_post p, const void *send, void *recv, lab_backend_work **work) {
  int rc;
  lab_abandon_info info = data_post(g, (lab_coll_op)p.kind, (lab_dtype)p.dtype, p.redop, p.root, p.count);
  if (!work && lab_dist_guarded()) {
    MPI_Request req;
    rc = lab_mpi_post(comm_of(g), &p, send, recv, &req);
    if (rc == MPI_SUCCESS) return guarded_wait(g, &req, opname, MPI_STATUS_IGNORE, &info);
  } else if (!work) {
    rc = lab_mpi_post(comm_of(g), &p, send, recv, NULL);
  } else {
    lab_backend_work *w = new_work();
    if (!w) return lab_fail(opname, "out of memory");
    rc = lab_mpi_post(comm_of(g), &p, send, recv, &w->req);
    if (rc != MPI_SUCCESS) free(w);
    else *work = w;
  }
  return rc == MPI_SUCCESS ? 0 : mpi_fail(opname, rc);
}

/* a collective's record: kind, dtype, the MPI-level reduction or -1, root or -1, count */
static lab_post describe(lab_coll_op kind, lab_dtype dt, int redop, int root, int64_t count) {
  return (lab_post){.kind = kind, .dtype = dt, .redop = redop, .root = root, .count = count};
}

static int m_all_reduce(lab_group *g, const void *send, void *recv, int64_t count, lab_dtype dt,
                        lab_redop op, lab_backend_work **work) {
  if (count_check("all_reduce", count) < 0) return -1;
  return post(g, "all_reduce", describe(LAB_OP_ALL_REDUCE, dt, op, -1, count), send, recv, work);
}

static int m_broadcast(lab_group *g, void *buf, int64_t count, lab_dtype dt, int root,
                       lab_backend_work **work) {
  if (count_check("broadcast", count) < 0) return -1;
  return post(g, "broadcast", describe(LAB_OP_BROADCAST, dt, -1, root, count), buf, buf, work);
}

static int m_reduce(lab_group *g, const void *send, void *recv, int64_t count, lab_dtype dt,
                    lab_redop op, int root, lab_backend_work **work) {
  if (count_check("reduce", count) < 0) return -1;
  return post(g, "reduce", describe(LAB_OP_REDUCE, dt, op, root, count), send, recv, work);
}

static int m_all_gather(lab_group *g, const void *send, void *recv, int64_t count, lab_dtype dt,
                        lab_backend_work **work) {
  if (count_check("all_gather", count * g->size) < 0) return -1;
  return post(g, "all_gather", describe(LAB_OP_ALL_GATHER, dt, -1, -1, count), send, recv, work);
}

static int m_reduce_scatter(lab_group *g, const void *send, void *recv, int64_t count,
                            lab_dtype dt, lab_redop op, lab_backend_work **work) {
  if (count_check("reduce_scatter", count * g->size) < 0) return -1;
  return post(g, "reduce_scatter", describe(LAB_OP_REDUCE_SCATTER, dt, op, -1, count), send, recv, work);
}

static int m_all_to_all(lab_group *g, const void *send, void *recv, int64_t count, lab_dtype dt,
                        lab_backend_work **work) {
  if (count_check("all_to_all", count * g->size) < 0) return -1;
  return post(g, "all_to_all", describe(LAB_OP_ALL_TO_ALL, dt, -1, -1, count), send, recv, work);
}

/* MPI_Alltoallv takes int counts and displacements that must stay valid until the request
 * completes: they live in one block owned by the work object (or by this call when it
 * blocks). A guarded wait that gives up leaves the request pending, so its block is left
 * allocated rather than freed under MPI. */
static int m_all_to_all_v(lab_group *g, const void *send, const int64_t *send_counts,
                          const int64_t *send_displs, void *recv, const int64_t *recv_counts,
                          const int64_t *recv_displs, lab_dtype dt, lab_backend_work **work) {
  const char *op = "all_to_all_single";
  int n = g->size;
  for (int r = 0; r < n; r++)
    if (count_check(op, send_displs[r] + send_counts[r]) < 0 || count_check(op, recv_displs[r] + recv_counts[r]) < 0)
      return -1;
  int *v = malloc(sizeof(int) * 4 * (size_t)n);
  if (!v) return lab_fail(op, "out of memory");
  int *sc = v, *sd = v + n, *rc_ = v + 2 * n, *rd = v + 3 * n;
  for (int r = 0; r < n; r++) {
    sc[r] = (int)send_counts[r];
    sd[r] = (int)send_displs[r];
    rc_[r] = (int)recv_counts[r];
    rd[r] = (int)recv_displs[r];
  }
  MPI_Datatype t = mpi_type(dt);
  /* a rank that never arrived cannot post a matching uneven all-to-all without the others'
   * counts: recovery treats this one as unrepairable */
  lab_abandon_info info = data_post(g, (lab_coll_op)LAB_POST_UNREPAIRABLE, dt, -1, -1, 0);
  int rc;
  if (!work && !lab_dist_guarded()) {
    rc = MPI_Alltoallv(send, sc, sd, t, recv, rc_, rd, t, comm_of(g));
    free(v);
    return rc == MPI_SUCCESS ? 0 : mpi_fail(op, rc);
  }
  if (!work) { /* guarded: poll so that Ctrl-C and the watchdog can end the wait */
    MPI_Request req;
    rc = MPI_Ialltoallv(send, sc, sd, t, recv, rc_, rd, t, comm_of(g), &req);
    if (rc != MPI_SUCCESS) {
      free(v);
      return mpi_fail(op, rc);
    }
    if (guarded_wait(g, &req, op, MPI_STATUS_IGNORE, &info) < 0) {
      lab_dist_hold_memory(v); /* MPI reads the counts until the abandoned request completes */
      return -1;
    }
    free(v);
    return 0;
  }
  lab_backend_work *w = new_work();
  if (!w) {
    free(v);
    return lab_fail(op, "out of memory");
  }
  w->v_counts = v;
  rc = MPI_Ialltoallv(send, sc, sd, t, recv, rc_, rd, t, comm_of(g), &w->req);
  if (rc != MPI_SUCCESS) {
    free(v);
    free(w);
    return mpi_fail(op, rc);
  }
  *work = w;
  return 0;
}

/* ---- point-to-point ----
 * MPI moves bytes without comparing the two sides' types, so an f16[4] sent to an f32[2]
 * arrived as garbage and an f32[4] received into an i64[4] reported "the message held 2".
 * Every message therefore carries a trailer after its data, {magic, dtype, count}, in the
 * same message (a struct datatype over the tensor and the trailer: no copy), and the receiver
 * compares it with its own tensor when the receive completes. A message longer than the
 * receiving tensor fails in MPI (MPI_ERR_TRUNCATE) and is reported the same way. */

static int p2p_type(const void *buf, int64_t count, lab_dtype dt, p2p_trailer *tr, MPI_Datatype *out) {
  int lens[2] = {(int)count, (int)sizeof *tr};
  MPI_Aint disp[2];
  MPI_Datatype types[2] = {mpi_type(dt), MPI_BYTE};
  MPI_Get_address(tr, &disp[1]);
  if (count > 0) MPI_Get_address(buf, &disp[0]);
  else disp[0] = disp[1]; /* an empty tensor has no data pointer */
  int rc = MPI_Type_create_struct(2, lens, disp, types, out);
  if (rc == MPI_SUCCESS) rc = MPI_Type_commit(out);
  return rc == MPI_SUCCESS ? 0 : mpi_fail("p2p", rc);
}

static void trailer_set(p2p_trailer *tr, lab_dtype dt, int64_t count) {
  tr->magic_dtype = P2P_MAGIC << 8 | (int64_t)dt;
  tr->count = count;
}

/* "f32[4]", or "a message of 24 bytes" when the trailer is not ours */
static const char *sent_str(const p2p_trailer *tr, int64_t bytes, char *buf, size_t n) {
  int dt = (int)(tr->magic_dtype & 0xff);
  if (tr->magic_dtype >> 8 == P2P_MAGIC && dt < LAB_NDTYPES && tr->count >= 0)
    snprintf(buf, n, "%s[%lld]", lab_dtype_name((lab_dtype)dt), (long long)tr->count);
  else
    snprintf(buf, n, "a message of %lld bytes", (long long)bytes);
  return buf;
}

/* After a receive into (buf: count x dt, then tr) completed with status st (or failed with
 * MPI error rc): the message must have been exactly a tensor of this dtype and size. */
static int p2p_check(int rc, MPI_Status *st, const void *buf, int64_t count, lab_dtype dt, const p2p_trailer *tr,
                     int peer) {
  char want[64], got[80];
  snprintf(want, sizeof want, "%s[%lld]", lab_dtype_name(dt), (long long)count);
  if (rc != MPI_SUCCESS) {
    int cls = 0;
    MPI_Error_class(rc, &cls);
    if (cls == MPI_ERR_TRUNCATE)
      return lab_fail("recv", "rank %d sent more bytes than the receiving tensor %s holds; send and recv "
                      "tensors must have the same dtype and size", peer, want);
    return mpi_fail("recv", rc);
  }
  MPI_Count bytes = 0;
  MPI_Get_elements_x(st, MPI_BYTE, &bytes);
  int64_t data = count * (int64_t)lab_dtype_size(dt), expect = data + (int64_t)sizeof *tr;
  p2p_trailer theirs = *tr;
  if (bytes != expect && bytes >= (MPI_Count)sizeof *tr) {
    /* a shorter message: its trailer landed inside this tensor's bytes, or across the two */
    unsigned char *o = (unsigned char *)&theirs;
    for (int64_t i = 0, at = (int64_t)bytes - (int64_t)sizeof *tr; i < (int64_t)sizeof *tr; i++, at++)
      o[i] = at < data ? ((const unsigned char *)buf)[at] : ((const unsigned char *)tr)[at - data];
  }
  int ours = theirs.magic_dtype >> 8 == P2P_MAGIC;
  if (bytes == expect && ours && (lab_dtype)(theirs.magic_dtype & 0xff) == dt && theirs.count == count) return 0;
  return lab_fail("recv", "rank %d sent %s, this rank receives into %s; send and recv tensors must have the same "
                  "dtype and size", peer, sent_str(&theirs, (int64_t)bytes - (int64_t)sizeof *tr, got, sizeof got), want);
}

/* a guarded receive's poll keeps MPI's code: a truncated message completes with an error */
typedef struct {
  MPI_Request *req;
  MPI_Status *st;
  int mpi_rc;
} recv_poll;

static int recv_test_fn(void *ctx, int *done) {
  recv_poll *p = ctx;
  p->mpi_rc = MPI_Test(p->req, done, p->st);
  if (p->mpi_rc != MPI_SUCCESS) *done = 1;
  return 0;
}

/* a send posted since the last recovery: it may have completed with nobody receiving it
 * (MPI's eager sends), which recovery checks (mpi_recover.c, drain_p2p) */
static int sent_since_recover;

int lab_mpi_sent_since_recover(int clear) {
  int s = sent_since_recover;
  if (clear) sent_since_recover = 0;
  return s;
}

const char *lab_mpi_p2p_describe(const void *msg, int64_t bytes, char *buf, size_t n) {
  p2p_trailer tr;
  if (bytes < (int64_t)sizeof tr) {
    snprintf(buf, n, "a message of %lld bytes", (long long)bytes);
    return buf;
  }
  memcpy(&tr, (const char *)msg + bytes - (int64_t)sizeof tr, sizeof tr);
  return sent_str(&tr, bytes - (int64_t)sizeof tr, buf, n);
}

static int m_send(lab_group *g, const void *buf, int64_t count, lab_dtype dt, int peer, int tag,
                  lab_backend_work **work) {
  if (count_check("send", count) < 0) return -1;
  sent_since_recover = 1;
  MPI_Datatype type;
  if (work) { /* the trailer lives in the work object until the request completes */
    lab_backend_work *w = new_work();
    if (!w) return lab_fail("send", "out of memory");
    trailer_set(&w->trailer, dt, count);
    if (p2p_type(buf, count, dt, &w->trailer, &type) < 0) {
      free(w);
      return -1;
    }
    int rc = MPI_Isend(MPI_BOTTOM, 1, type, peer, tag, comm_of(g), &w->req);
    MPI_Type_free(&type); /* a posted request keeps what it needs */
    if (rc != MPI_SUCCESS) {
      free(w);
      return mpi_fail("send", rc);
    }
    *work = w;
    return 0;
  }
  if (!lab_dist_guarded()) {
    p2p_trailer tr;
    trailer_set(&tr, dt, count);
    if (p2p_type(buf, count, dt, &tr, &type) < 0) return -1;
    int rc = MPI_Send(MPI_BOTTOM, 1, type, peer, tag, comm_of(g));
    MPI_Type_free(&type);
    return rc == MPI_SUCCESS ? 0 : mpi_fail("send", rc);
  }
  /* guarded: an abandoned request keeps reading its trailer, so it is held (held.h) */
  p2p_trailer *tr = malloc(sizeof *tr);
  if (!tr) return lab_fail("send", "out of memory");
  trailer_set(tr, dt, count);
  if (p2p_type(buf, count, dt, tr, &type) < 0) {
    free(tr);
    return -1;
  }
  MPI_Request req;
  int rc = MPI_Isend(MPI_BOTTOM, 1, type, peer, tag, comm_of(g), &req);
  MPI_Type_free(&type);
  if (rc != MPI_SUCCESS) {
    free(tr);
    return mpi_fail("send", rc);
  }
  lab_abandon_info info = {.ch = LAB_CH_DATA, .seq = -1, .is_send = 1};
  if (guarded_wait(g, &req, "send", MPI_STATUS_IGNORE, &info) < 0) {
    lab_dist_hold_memory(tr); /* the request may still read it until recovery settles it */
    return -1;
  }
  free(tr);
  return 0;
}

static int m_recv(lab_group *g, void *buf, int64_t count, lab_dtype dt, int peer, int tag,
                  lab_backend_work **work) {
  if (count_check("recv", count) < 0) return -1;
  MPI_Datatype type;
  if (work) {
    lab_backend_work *w = new_work();
    if (!w) return lab_fail("recv", "out of memory");
    w->is_recv = 1;
    w->peer = peer;
    w->count = count;
    w->dt = dt;
    w->buf = buf;
    if (p2p_type(buf, count, dt, &w->trailer, &type) < 0) {
      free(w);
      return -1;
    }
    int rc = MPI_Irecv(MPI_BOTTOM, 1, type, peer, tag, comm_of(g), &w->req);
    MPI_Type_free(&type);
    if (rc != MPI_SUCCESS) {
      free(w);
      return mpi_fail("recv", rc);
    }
    *work = w;
    return 0;
  }
  MPI_Status st;
  if (!lab_dist_guarded()) {
    p2p_trailer tr = {0};
    if (p2p_type(buf, count, dt, &tr, &type) < 0) return -1;
    int rc = MPI_Recv(MPI_BOTTOM, 1, type, peer, tag, comm_of(g), &st);
    MPI_Type_free(&type);
    return p2p_check(rc, &st, buf, count, dt, &tr, peer);
  }
  /* guarded: MPI may write the trailer until an abandoned request is cancelled: held */
  p2p_trailer *tr = calloc(1, sizeof *tr);
  if (!tr) return lab_fail("recv", "out of memory");
  if (p2p_type(buf, count, dt, tr, &type) < 0) {
    free(tr);
    return -1;
  }
  MPI_Request req;
  int rc = MPI_Irecv(MPI_BOTTOM, 1, type, peer, tag, comm_of(g), &req);
  MPI_Type_free(&type);
  if (rc != MPI_SUCCESS) {
    free(tr);
    return mpi_fail("recv", rc);
  }
  lab_abandon_info info = {.ch = LAB_CH_DATA, .seq = -1, .is_send = 0};
  recv_poll poll = {&req, &st, MPI_SUCCESS};
  lab_board_expect_sender(peer >= 0 && peer < g->size ? g->world_ranks[peer] : -1); /* fail fast on a finished sender */
  int waited = lab_guard_wait(g, "recv", recv_test_fn, &poll);
  lab_board_expect_sender(-1);
  if (waited < 0) { /* given up: recovery completes or cancels it */
    if (req != MPI_REQUEST_NULL) {
      lab_mpi_abandon(g, req, &info);
      lab_dist_note_abandoned();
    }
    lab_dist_hold_memory(tr);
    return -1;
  }
  rc = p2p_check(poll.mpi_rc, &st, buf, count, dt, tr, peer);
  free(tr);
  return rc;
}

static int m_barrier(lab_group *g) {
  lab_abandon_info info = data_post(g, LAB_OP_BARRIER, LAB_F32, -1, -1, 0);
  if (lab_dist_guarded()) {
    MPI_Request req;
    int rc = MPI_Ibarrier(comm_of(g), &req);
    if (rc != MPI_SUCCESS) return mpi_fail("barrier", rc);
    return guarded_wait(g, &req, "barrier", MPI_STATUS_IGNORE, &info);
  }
  int rc = MPI_Barrier(comm_of(g));
  return rc == MPI_SUCCESS ? 0 : mpi_fail("barrier", rc);
}

static int m_exchange(lab_group *g, const void *mine, void *all, int nbytes) {
  MPI_Comm check = ((mpi_group *)g->impl)->ch[LAB_CH_CHECK].comm;
  lab_abandon_info info = {.ch = LAB_CH_CHECK,
                           .seq = lab_mpi_record(g, LAB_CH_CHECK, LAB_POST_EXCHANGE, LAB_F32, -1, -1, nbytes)};
  if (lab_dist_guarded()) { /* a rank that skipped the collective must not hang the others here */
    MPI_Request req;
    int rc = MPI_Iallgather(mine, nbytes, MPI_BYTE, all, nbytes, MPI_BYTE, check, &req);
    if (rc != MPI_SUCCESS) return mpi_fail("check", rc);
    return guarded_wait(g, &req, "checking the collective on every rank", MPI_STATUS_IGNORE, &info);
  }
  int rc = MPI_Allgather(mine, nbytes, MPI_BYTE, all, nbytes, MPI_BYTE, check);
  return rc == MPI_SUCCESS ? 0 : mpi_fail("check", rc);
}

static int m_wait(lab_backend_work *w) {
  MPI_Status st;
  int rc = MPI_Wait(&w->req, &st);
  if (w->is_recv) return p2p_check(rc, &st, w->buf, w->count, w->dt, &w->trailer, w->peer);
  return rc == MPI_SUCCESS ? 0 : mpi_fail("wait", rc);
}

static int m_test(lab_backend_work *w, int *done) {
  MPI_Status st;
  int rc = MPI_Test(&w->req, done, &st);
  if (w->is_recv && (*done || rc != MPI_SUCCESS)) {
    *done = 1; /* a failed receive (truncated) is complete */
    return p2p_check(rc, &st, w->buf, w->count, w->dt, &w->trailer, w->peer);
  }
  if (rc != MPI_SUCCESS) return mpi_fail("test", rc);
  return 0;
}

static void m_free_work(lab_backend_work *w) {
  if (w) free(w->v_counts);
  free(w);
}

static int fill_group(lab_group *g, MPI_Comm comm) {
  mpi_group *mg = calloc(1, sizeof *mg);
  if (!mg) return lab_fail("group", "out of memory");
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  mg->ch[LAB_CH_DATA].comm = comm;
  MPI_Comm_dup(comm, &mg->ch[LAB_CH_CHECK].comm);
  MPI_Comm_set_errhandler(mg->ch[LAB_CH_CHECK].comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm, &g->rank);
  MPI_Comm_size(comm, &g->size);
  g->world_ranks = malloc(sizeof(int) * (size_t)g->size);
  if (!g->world_ranks) return lab_fail("group", "out of memory");
  int world_rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Allgather(&world_rank, 1, MPI_INT, g->world_ranks, 1, MPI_INT, comm);
  g->impl = mg;
  g->backend = &mpi_backend;
  return 0;
}

/* a key every member computes alike: the parent's key, how many splits of the parent came
 * before (every member of the parent takes part in each), and the colour (FNV-1a mixing) */
static uint64_t child_key(uint64_t parent, int64_t nth, int color) {
  uint64_t h = 1469598103934665603ull, v[3] = {parent, (uint64_t)nth, (uint64_t)(int64_t)color};
  for (int i = 0; i < 3; i++)
    for (int b = 0; b < 8; b++) h = (h ^ ((v[i] >> (8 * b)) & 0xff)) * 1099511628211ull;
  return h;
}

static int m_split(lab_group *g, int color, int key, lab_group *out) {
  mpi_group *pg = g->impl;
  int64_t nth = pg->splits++;
  MPI_Comm c;
  int rc = MPI_Comm_split(comm_of(g), color < 0 ? MPI_UNDEFINED : color, key, &c);
  if (rc != MPI_SUCCESS) return mpi_fail("new_group", rc);
  out->world_size = g->world_size;
  if (c == MPI_COMM_NULL) {
    out->rank = -1;
    out->size = 0;
    out->impl = NULL;
    return 0;
  }
  if (fill_group(out, c) < 0) return -1;
  ((mpi_group *)out->impl)->key = child_key(pg->key, nth, color);
  return 0;
}

static void m_free_group(lab_group *g) {
  mpi_group *mg = g->impl;
  if (!mg) return;
  for (int c = 0; c < LAB_NCH; c++) MPI_Comm_free(&mg->ch[c].comm);
  free(mg);
}

/* A fresh communicator over the same members, from MPI_COMM_WORLD (which carries no user
 * traffic, so no abandoned request sits on it); the old ones keep their pending requests and
 * are never freed. Collective over the members only (MPI_Comm_create_group). */
static int m_rebuild(lab_group *g) {
  mpi_group *mg = g->impl;
  if (!mg) return 0;
  MPI_Group wg, sub;
  MPI_Comm fresh, check;
  MPI_Comm_group(MPI_COMM_WORLD, &wg);
  MPI_Group_incl(wg, g->size, g->world_ranks, &sub);
  int rc = MPI_Comm_create_group(MPI_COMM_WORLD, sub, 0x1ab, &fresh);
  MPI_Group_free(&sub);
  MPI_Group_free(&wg);
  if (rc != MPI_SUCCESS) return mpi_fail("recover", rc);
  MPI_Comm_set_errhandler(fresh, MPI_ERRORS_RETURN);
  MPI_Comm_dup(fresh, &check);
  MPI_Comm_set_errhandler(check, MPI_ERRORS_RETURN);
  for (int c = 0; c < LAB_NCH; c++) { /* numbering starts again on the fresh communicators */
    mg->ch[c].posted = 0;
    memset(mg->ch[c].recent, 0, sizeof mg->ch[c].recent);
  }
  mg->ch[LAB_CH_DATA].comm = fresh;
  mg->ch[LAB_CH_CHECK].comm = check;
  return 0;
}

static const lab_comm_backend mpi_backend = {
    .name = "mpi",
    .all_reduce = m_all_reduce,
    .broadcast = m_broadcast,
    .reduce = m_reduce,
    .all_gather = m_all_gather,
    .reduce_scatter = m_reduce_scatter,
    .all_to_all = m_all_to_all,
    .all_to_all_v = m_all_to_all_v,
    .send = m_send,
    .recv = m_recv,
    .barrier = m_barrier,
    .exchange = m_exchange,
    .wait = m_wait,
    .test = m_test,
    .free_work = m_free_work,
    .split = m_split,
    .free_group = m_free_group,
    .rebuild = m_rebuild,
    .recover = lab_mpi_recover,
};

const lab_comm_backend *lab_mpi_backend(void) { return &mpi_backend; }

int lab_mpi_world_group(lab_group *world) {
  MPI_Type_contiguous(2, MPI_BYTE, &bf16_type);
  MPI_Type_commit(&bf16_type);
  MPI_Type_contiguous(2, MPI_BYTE, &f16_type);
  MPI_Type_commit(&f16_type);
  MPI_Op_create(half_sum, 1, &half_ops[LAB_RED_SUM]);
  half_ops[LAB_RED_AVG] = half_ops[LAB_RED_SUM];
  MPI_Op_create(half_prod, 1, &half_ops[LAB_RED_PROD]);
  MPI_Op_create(half_max, 1, &half_ops[LAB_RED_MAX]);
  MPI_Op_create(half_min, 1, &half_ops[LAB_RED_MIN]);
  MPI_Comm wc;
  MPI_Comm_dup(MPI_COMM_WORLD, &wc);
  if (fill_group(world, wc) < 0) return -1;
  ((mpi_group *)world->impl)->key = 1;
  return 0;
}

