/* The MPI backend's point-to-point messages (comm.h's send and recv), each carrying a trailer
 * that says what it holds, so that a receive into a tensor of another dtype or size fails
 * with both sides named instead of delivering garbage. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../error.h"
#include "board.h"
#include "guard.h"
#include "held.h"
#include "mpi_group.h"

#define P2P_MAGIC 0x6c616270327050LL /* "labp2pP" */

/* ---- point-to-point ----
 * MPI moves bytes without comparing the two sides' types, so an f16[4] sent to an f32[2]
 * arrived as garbage and an f32[4] received into an i64[4] reported "the message held 2".
 * Every message therefore carries a trailer after its data, {magic, dtype, count}, in the
 * same message (a struct datatype over the tensor and the trailer: no copy), and the receiver
 * compares it with its own tensor when the receive completes. A message longer than the
 * receiving tensor fails in MPI (MPI_ERR_TRUNCATE) and is reported the same way. */

static int p2p_type(const void *buf, int64_t count, lab_dtype dt, lab_p2p_trailer *tr, MPI_Datatype *out) {
  int lens[2] = {(int)count, (int)sizeof *tr};
  MPI_Aint disp[2];
  MPI_Datatype types[2] = {lab_mpi_type(dt), MPI_BYTE};
  MPI_Get_address(tr, &disp[1]);
  if (count > 0) MPI_Get_address(buf, &disp[0]);
  else disp[0] = disp[1]; /* an empty tensor has no data pointer */
  int rc = MPI_Type_create_struct(2, lens, disp, types, out);
  if (rc == MPI_SUCCESS) rc = MPI_Type_commit(out);
  return rc == MPI_SUCCESS ? 0 : lab_mpi_fail("p2p", rc);
}

static void trailer_set(lab_p2p_trailer *tr, lab_dtype dt, int64_t count) {
  tr->magic_dtype = P2P_MAGIC << 8 | (int64_t)dt;
  tr->count = count;
}

/* "f32[4]", or "a message of 24 bytes" when the trailer is not ours */
static const char *sent_str(const lab_p2p_trailer *tr, int64_t bytes, char *buf, size_t n) {
  int dt = (int)(tr->magic_dtype & 0xff);
  if (tr->magic_dtype >> 8 == P2P_MAGIC && dt < LAB_NDTYPES && tr->count >= 0)
    snprintf(buf, n, "%s[%lld]", lab_dtype_name((lab_dtype)dt), (long long)tr->count);
  else
    snprintf(buf, n, "a message of %lld bytes", (long long)bytes);
  return buf;
}

/* After a receive into (buf: count x dt, then tr) completed with status st (or failed with
 * MPI error rc): the message must have been exactly a tensor of this dtype and size. */
int lab_mpi_p2p_check(int rc, MPI_Status *st, const void *buf, int64_t count, lab_dtype dt, const lab_p2p_trailer *tr,
                      int peer) {
  char want[64], got[80];
  snprintf(want, sizeof want, "%s[%lld]", lab_dtype_name(dt), (long long)count);
  if (rc != MPI_SUCCESS) {
    int cls = 0;
    MPI_Error_class(rc, &cls);
    if (cls == MPI_ERR_TRUNCATE)
      return lab_fail("recv", "rank %d sent more bytes than the receiving tensor %s holds; send and recv "
                      "tensors must have the same dtype and size", peer, want);
    return lab_mpi_fail("recv", rc);
  }
  MPI_Count bytes = 0;
  MPI_Get_elements_x(st, MPI_BYTE, &bytes);
  int64_t data = count * (int64_t)lab_dtype_size(dt), expect = data + (int64_t)sizeof *tr;
  lab_p2p_trailer theirs = *tr;
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
  lab_p2p_trailer tr;
  if (bytes < (int64_t)sizeof tr) {
    snprintf(buf, n, "a message of %lld bytes", (long long)bytes);
    return buf;
  }
  memcpy(&tr, (const char *)msg + bytes - (int64_t)sizeof tr, sizeof tr);
  return sent_str(&tr, bytes - (int64_t)sizeof tr, buf, n);
}

/* a completed send or receive (rc, st: MPI's): a receive is checked against its trailer */
static int finish(lab_backend_work *w, int rc, MPI_Status *st) {
  if (w->is_recv) return lab_mpi_p2p_check(rc, st, w->buf, w->count, w->dt, &w->trailer, w->peer);
  return rc == MPI_SUCCESS ? 0 : lab_mpi_fail("send", rc);
}

/* Every message is posted as a request in a work object, whose trailer lives as long as the
 * request: returned (work), waited for here (blocking), or in guarded mode polled through
 * guard.h, where a wait that gives up leaves the request to recovery and the work (its
 * trailer) held until then (held.h). */
static int post(lab_group *g, int is_send, void *buf, int64_t count, lab_dtype dt, int peer, int tag,
                lab_backend_work **work) {
  const char *name = is_send ? "send" : "recv";
  if (lab_mpi_count_check(name, count) < 0) return -1;
  if (is_send) sent_since_recover = 1;
  lab_backend_work *w = lab_mpi_new_work();
  if (!w) return lab_fail(name, "out of memory");
  *w = (lab_backend_work){.req = MPI_REQUEST_NULL, .is_recv = !is_send, .peer = peer, .count = count, .dt = dt, .buf = buf};
  if (is_send) trailer_set(&w->trailer, dt, count);
  MPI_Datatype type;
  if (p2p_type(buf, count, dt, &w->trailer, &type) < 0) {
    free(w);
    return -1;
  }
  MPI_Comm comm = lab_mpi_comm(g);
  int rc = is_send ? MPI_Isend(MPI_BOTTOM, 1, type, peer, tag, comm, &w->req)
                   : MPI_Irecv(MPI_BOTTOM, 1, type, peer, tag, comm, &w->req);
  MPI_Type_free(&type); /* a posted request keeps what it needs */
  if (rc != MPI_SUCCESS) {
    free(w);
    return lab_mpi_fail(name, rc);
  }
  if (work) {
    *work = w;
    return 0;
  }
  MPI_Status st;
  if (!g->wait->guarded) {
    rc = finish(w, MPI_Wait(&w->req, &st), &st);
    free(w);
    return rc;
  }
  recv_poll poll = {&w->req, &st, MPI_SUCCESS};
  if (!is_send) lab_board_expect_sender(peer >= 0 && peer < g->size ? g->world_ranks[peer] : -1); /* fail fast */
  int waited = lab_guard_wait(g, name, recv_test_fn, &poll);
  if (!is_send) lab_board_expect_sender(-1);
  if (waited < 0) { /* given up: recovery completes or cancels it */
    if (w->req != MPI_REQUEST_NULL) {
      lab_mpi_abandon(g, w->req, &(lab_abandon_info){.ch = LAB_CH_DATA, .seq = -1, .is_send = is_send});
      lab_dist_note_abandoned();
    }
    lab_dist_hold_memory(w); /* MPI may read or write its trailer until then */
    return -1;
  }
  rc = finish(w, poll.mpi_rc, &st);
  free(w);
  return rc;
}

int lab_mpi_send(lab_group *g, const void *buf, int64_t count, lab_dtype dt, int peer, int tag, lab_backend_work **work) {
  return post(g, 1, (void *)buf, count, dt, peer, tag, work);
}

int lab_mpi_recv(lab_group *g, void *buf, int64_t count, lab_dtype dt, int peer, int tag, lab_backend_work **work) {
  return post(g, 0, buf, count, dt, peer, tag, work);
}
