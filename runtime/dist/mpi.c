/* The MPI backend of comm.h: collectives for host buffers (CPU tensors, and device tensors
 * staged through host memory). bf16 and f16 have no MPI type: they travel as 2-byte types of
 * our own with reduction ops that widen to f32 and round back, as NCCL does. Blocking calls in
 * guarded mode (the group's wait policy) wait through guard.c. Every collective goes through one
 * slot (comm.h's collective) and one MPI call per op (mpi_post.c); point-to-point messages are
 * in mpi_p2p.c. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../kernels/cpu/half.h"
#include "../error.h"
#include "guard.h"
#include "held.h"
#include "mpi_backend.h"
#include "mpi_group.h"
#include "mpi_post.h"

static MPI_Datatype bf16_type, f16_type;
static MPI_Op half_ops[LAB_NREDOPS];
static const lab_comm_backend mpi_backend;

int lab_mpi_fail(const char *op, int rc) {
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

MPI_Comm lab_mpi_comm(lab_group *g) { return ((mpi_group *)g->impl)->ch[LAB_CH_DATA].comm; }

int64_t lab_mpi_record(lab_group *g, int ch, int kind, int dtype, int redop, int root, int64_t count) {
  lab_channel *c = &((mpi_group *)g->impl)->ch[ch];
  int64_t seq = c->posted++;
  c->recent[seq % LAB_POST_HISTORY] = (lab_post){.kind = kind, .dtype = dtype, .redop = redop, .root = root, .count = count};
  return seq;
}

int lab_mpi_count_check(const char *op, int64_t count) {
  if (count > 0x7fffffff) return lab_fail(op, "%lld elements exceed MPI's int count", (long long)count);
  return 0;
}

/* Each call is either blocking (work == NULL) or posts a request into a new work object. */
lab_backend_work *lab_mpi_new_work(void) {
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
  return rc == MPI_SUCCESS ? 0 : lab_mpi_fail("wait", rc);
}

/* A wait that gives up (Ctrl-C, watchdog, stepper quit) does not drop its request: it goes to
 * recovery (mpi_recover.c), which completes it before its buffers are freed (held.h). */
int lab_mpi_guarded_wait(lab_group *g, MPI_Request *req, const char *op, MPI_Status *st, const lab_abandon_info *info) {
  if (lab_guard_wait(g, op, mpi_test_fn, &(mpi_poll){req, st}) == 0) return 0;
  if (*req != MPI_REQUEST_NULL) {
    lab_mpi_abandon(g, *req, info);
    lab_dist_note_abandoned();
  }
  return -1;
}

/* Posts the collective p on channel ch of g, numbered and described for recovery:
 * blocking (work NULL; through a guarded wait in guarded mode, so that Ctrl-C and the
 * watchdog can end it) or as a request in a new work object. */
static int post(lab_group *g, int ch, const char *opname, lab_post p, const void *send, void *recv,
                lab_backend_work **work) {
  int rc;
  MPI_Comm comm = ((mpi_group *)g->impl)->ch[ch].comm;
  lab_abandon_info info = {.ch = ch, .seq = lab_mpi_record(g, ch, p.kind, p.dtype, p.redop, p.root, p.count)};
  if (!work && g->wait->guarded) {
    MPI_Request req;
    rc = lab_mpi_post(comm, &p, send, recv, &req);
    if (rc == MPI_SUCCESS) return lab_mpi_guarded_wait(g, &req, opname, MPI_STATUS_IGNORE, &info);
  } else if (!work) {
    rc = lab_mpi_post(comm, &p, send, recv, NULL);
  } else {
    lab_backend_work *w = lab_mpi_new_work();
    if (!w) return lab_fail(opname, "out of memory");
    rc = lab_mpi_post(comm, &p, send, recv, &w->req);
    if (rc != MPI_SUCCESS) free(w);
    else *work = w;
  }
  return rc == MPI_SUCCESS ? 0 : lab_mpi_fail(opname, rc);
}

/* comm.h's one collective slot: the count MPI's int must hold (mpi_post.c says it per op),
 * then the op's single call, or the calls with their own shape (uneven all-to-all,
 * point-to-point, barrier). */
static int m_all_to_all_v(lab_group *g, const void *send, const int64_t *send_counts, const int64_t *send_displs,
                          void *recv, const int64_t *recv_counts, const int64_t *recv_displs, lab_dtype dt,
                          lab_backend_work **work);
static int m_collective(lab_group *g, const lab_coll_call *c, lab_backend_work **work) {
  switch (c->op) {
  case LAB_OP_SEND: return lab_mpi_send(g, c->send, c->count, c->dt, c->peer, c->tag, work);
  case LAB_OP_RECV: return lab_mpi_recv(g, c->recv, c->count, c->dt, c->peer, c->tag, work);
  case LAB_OP_ALL_TO_ALL_SINGLE: return m_all_to_all_v(g, c->send, c->v[0], c->v[1], c->recv, c->v[2], c->v[3], c->dt, work);
  default: break;
  }
  lab_post p = {.kind = c->op, .dtype = c->dt, .redop = c->redop, .root = c->peer, .count = c->count};
  int64_t send_n = 0, recv_n = 0;
  if (lab_mpi_post_extent(&p, g->size, &send_n, &recv_n) < 0)
    return lab_fail(c->name, "the mpi backend has no such call (internal error)");
  if (lab_mpi_count_check(c->name, send_n > recv_n ? send_n : recv_n) < 0) return -1;
  return post(g, LAB_CH_DATA, c->name, p, c->send, c->recv, work);
}

/* The uneven all-to-all's one MPI call on g's data channel, v holding the send counts, send
 * displacements, receive counts and receive displacements (g->size each): posted on req, or
 * blocking when req is NULL (as lab_mpi_post does for the other collectives). */
static int alltoallv(lab_group *g, const void *send, void *recv, const int *v, MPI_Datatype t, MPI_Request *req) {
  int n = g->size;
  MPI_Comm comm = lab_mpi_comm(g);
  return req ? MPI_Ialltoallv(send, v, v + n, t, recv, v + 2 * n, v + 3 * n, t, comm, req)
             : MPI_Alltoallv(send, v, v + n, t, recv, v + 2 * n, v + 3 * n, t, comm);
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
    if (lab_mpi_count_check(op, send_displs[r] + send_counts[r]) < 0 || lab_mpi_count_check(op, recv_displs[r] + recv_counts[r]) < 0)
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
  lab_abandon_info info = (lab_abandon_info){.ch = LAB_CH_DATA, .seq = lab_mpi_record(g, LAB_CH_DATA, LAB_POST_UNREPAIRABLE, dt, -1, -1, 0)};
  int rc;
  if (!work && g->wait->guarded) { /* poll so that Ctrl-C and the watchdog can end the wait */
    MPI_Request req;
    rc = alltoallv(g, send, recv, v, t, &req);
    if (rc == MPI_SUCCESS && lab_mpi_guarded_wait(g, &req, op, MPI_STATUS_IGNORE, &info) < 0) {
      lab_dist_hold_memory(v); /* MPI reads the counts until the abandoned request completes */
      return -1;
    }
  } else if (!work) {
    rc = alltoallv(g, send, recv, v, t, NULL);
  } else {
    lab_backend_work *w = lab_mpi_new_work();
    if (!w) {
      free(v);
      return lab_fail(op, "out of memory");
    }
    rc = alltoallv(g, send, recv, v, t, &w->req);
    if (rc == MPI_SUCCESS) {
      w->v_counts = v; /* freed with the work */
      *work = w;
      return 0;
    }
    free(w);
  }
  free(v);
  return rc == MPI_SUCCESS ? 0 : lab_mpi_fail(op, rc);
}


static int m_barrier(lab_group *g) {
  return post(g, LAB_CH_DATA, "barrier", (lab_post){.kind = LAB_OP_BARRIER, .dtype = LAB_F32, .redop = -1, .root = -1},
              NULL, NULL, NULL);
}

/* on the check channel, apart from user traffic; guarded, a rank that skipped the collective
 * must not hang the others here */
static int m_exchange(lab_group *g, const void *mine, void *all, int nbytes) {
  return post(g, LAB_CH_CHECK, "checking the collective on every rank",
              (lab_post){.kind = LAB_POST_EXCHANGE, .dtype = LAB_F32, .redop = -1, .root = -1, .count = nbytes}, mine,
              all, NULL);
}

static int m_wait(lab_backend_work *w) {
  MPI_Status st;
  int rc = MPI_Wait(&w->req, &st);
  if (w->is_recv) return lab_mpi_p2p_check(rc, &st, w->buf, w->count, w->dt, &w->trailer, w->peer);
  return rc == MPI_SUCCESS ? 0 : lab_mpi_fail("wait", rc);
}

static int m_test(lab_backend_work *w, int *done) {
  MPI_Status st;
  int rc = MPI_Test(&w->req, done, &st);
  if (w->is_recv && (*done || rc != MPI_SUCCESS)) {
    *done = 1; /* a failed receive (truncated) is complete */
    return lab_mpi_p2p_check(rc, &st, w->buf, w->count, w->dt, &w->trailer, w->peer);
  }
  if (rc != MPI_SUCCESS) return lab_mpi_fail("test", rc);
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
  int rc = MPI_Comm_split(lab_mpi_comm(g), color < 0 ? MPI_UNDEFINED : color, key, &c);
  if (rc != MPI_SUCCESS) return lab_mpi_fail("new_group", rc);
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
  if (rc != MPI_SUCCESS) return lab_mpi_fail("recover", rc);
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
    .collective = m_collective,
    .barrier = m_barrier, /* also nccl.c's, on the host group */
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

