/* The MPI backend's recovery after abandoned collectives (Ctrl-C, the watchdog, a stepper
 * quit): comm.h's recover op, called by recover.c. MPI's rule is that a request must complete, or be cancelled, before its buffer or
 * communicator is freed; a collective cannot be cancelled. So a guarded wait that gives up
 * hands its request here (its buffers are held, held.h), and between two REPL chunks, when
 * every rank is back at the prompt, every rank calls lab_dist_recover_after(), which calls this:
 *   1. each rank tells the others, per communicator it belongs to (named by the group's key),
 *      how many collectives it has posted there and what the recent ones were;
 *   2. a rank that posted fewer than the others (it never arrived) posts the same operations
 *      on scratch buffers: MPI matches collectives by their order on a communicator, so the
 *      abandoned requests of the others complete; abandoned receives are cancelled;
 *   3. every rank waits for all of it, with a deadline, then the held buffers are released
 *      and the groups are usable again, with their communicators unchanged.
 * Where that is impossible (ranks disagree on what they posted, an uneven all-to-all with a
 * missing rank, a send nobody receives, the deadline) the communicator is given up: its
 * requests and buffers are kept for the life of the process (never freed under MPI); the
 * world gets fresh communicators, and another group stays unusable, saying so by name. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "mpi_backend.h"
#include "held.h"
#include "mpi_group.h"
#include "mpi_post.h"

typedef struct abandoned_req {
  uint64_t key; /* the group's key and channel: the group itself is found again by key */
  lab_abandon_info info;
  MPI_Request req;
  int settled; /* completed, or given up for good */
  struct abandoned_req *next;
} abandoned_req;

static abandoned_req *pending;

void lab_mpi_abandon(lab_group *g, MPI_Request req, const lab_abandon_info *info) {
  abandoned_req *a = calloc(1, sizeof *a);
  if (!a) return; /* the request is leaked, and its buffers stay held: never freed under MPI */
  a->key = ((mpi_group *)g->impl)->key;
  a->info = *info;
  a->req = req;
  a->next = pending;
  pending = a;
}

/* ---- what each rank reports: per channel, its key, channel, posted count and history ---- */

#define FIELDS_PER_POST 5
#define ENTRY_WORDS (3 + LAB_POST_HISTORY * FIELDS_PER_POST)

/* this rank's view of an MPI group it belongs to (the control traffic of recovery goes over
 * MPI_COMM_WORLD, which carries no user collectives) */
static mpi_group *member_impl(lab_group *g) {
  return g && g->rank >= 0 && g->impl && g->backend == lab_mpi_backend() ? g->impl : NULL;
}

static int64_t *build_report(int *words) {
  int n = 0;
  for (int i = 0; i < lab_dist_group_count(); i++)
    if (member_impl(lab_dist_group_at(i))) n += LAB_NCH;
  int64_t *r = calloc((size_t)(1 + n * ENTRY_WORDS), sizeof *r);
  if (!r) return NULL;
  r[0] = n;
  int64_t *e = r + 1;
  for (int i = 0; i < lab_dist_group_count(); i++) {
    mpi_group *mg = member_impl(lab_dist_group_at(i));
    if (!mg) continue;
    for (int c = 0; c < LAB_NCH; c++, e += ENTRY_WORDS) {
      e[0] = (int64_t)mg->key;
      e[1] = c;
      e[2] = mg->ch[c].posted;
      for (int h = 0; h < LAB_POST_HISTORY; h++) {
        const lab_post *p = &mg->ch[c].recent[h];
        int64_t *f = e + 3 + h * FIELDS_PER_POST;
        f[0] = p->kind, f[1] = p->dtype, f[2] = p->redop, f[3] = p->root, f[4] = p->count;
      }
    }
  }
  *words = 1 + n * ENTRY_WORDS;
  return r;
}

typedef struct {
  int64_t *all;   /* every rank's report, concatenated */
  int *offsets;   /* where rank r's report starts */
  int nranks;
} reports;

static int gather_reports(reports *rp) {
  MPI_Comm ctl = MPI_COMM_WORLD;
  int words = 0;
  int64_t *mine = build_report(&words);
  if (!mine) return -1;
  MPI_Comm_size(ctl, &rp->nranks);
  int *counts = calloc((size_t)rp->nranks, sizeof *counts);
  rp->offsets = calloc((size_t)rp->nranks, sizeof *rp->offsets);
  MPI_Allgather(&words, 1, MPI_INT, counts, 1, MPI_INT, ctl);
  int total = 0;
  for (int r = 0; r < rp->nranks; r++) {
    rp->offsets[r] = total;
    total += counts[r];
  }
  rp->all = calloc((size_t)total, sizeof *rp->all);
  MPI_Allgatherv(mine, words, MPI_INT64_T, rp->all, counts, rp->offsets, MPI_INT64_T, ctl);
  free(counts);
  free(mine);
  return 0;
}

/* rank r's entry for (key, ch), or NULL when r is not a member */
static const int64_t *entry_of(const reports *rp, int r, uint64_t key, int ch) {
  const int64_t *rep = rp->all + rp->offsets[r];
  for (int64_t i = 0; i < rep[0]; i++) {
    const int64_t *e = rep + 1 + i * ENTRY_WORDS;
    if ((uint64_t)e[0] == key && e[1] == ch) return e;
  }
  return NULL;
}

static int same_post(const int64_t *a, const int64_t *b) { return memcmp(a, b, sizeof(int64_t) * FIELDS_PER_POST) == 0; }

/* The post every member that got as far as seq made there; NULL when no member still
 * remembers it or members disagree (then no rank may post a match). */
static const int64_t *post_at(const reports *rp, uint64_t key, int ch, int64_t seq) {
  const int64_t *found = NULL;
  for (int r = 0; r < rp->nranks; r++) {
    const int64_t *e = entry_of(rp, r, key, ch);
    if (!e || seq >= e[2]) continue;
    if (seq < e[2] - LAB_POST_HISTORY) return NULL; /* forgotten by a rank that posted it */
    const int64_t *p = e + 3 + (seq % LAB_POST_HISTORY) * FIELDS_PER_POST;
    if (found && !same_post(found, p)) return NULL;
    found = p;
  }
  return found;
}

/* 1 when every member can be brought to the same count of posts on (key, ch) */
static int repairable(const reports *rp, uint64_t key, int ch, int64_t *most) {
  int64_t lo = -1, hi = 0;
  for (int r = 0; r < rp->nranks; r++) {
    const int64_t *e = entry_of(rp, r, key, ch);
    if (!e) continue;
    if (lo < 0 || e[2] < lo) lo = e[2];
    if (e[2] > hi) hi = e[2];
  }
  *most = hi;
  for (int64_t s = lo < 0 ? hi : lo; s < hi; s++) {
    const int64_t *p = post_at(rp, key, ch, s);
    if (!p || p[0] == LAB_POST_UNREPAIRABLE) return 0;
  }
  return 1;
}

/* ---- posting matches on scratch buffers ---- */

typedef struct {
  MPI_Request *reqs;
  void **scratch;
  int n, cap;
} req_list;

static void add_req(req_list *l, MPI_Request req, void *a, void *b) {
  if (l->n + 1 > l->cap) {
    l->cap = l->cap ? 2 * l->cap : 16;
    l->reqs = realloc(l->reqs, sizeof *l->reqs * (size_t)l->cap);
    l->scratch = realloc(l->scratch, sizeof *l->scratch * 2 * (size_t)l->cap);
  }
  l->reqs[l->n] = req;
  l->scratch[2 * l->n] = a;
  l->scratch[2 * l->n + 1] = b;
  l->n++;
}

/* posts on comm the operation p describes, on zeroed scratch buffers, through the same
 * lab_mpi_post as the normal path (mpi_post.c) */
static int post_match(MPI_Comm comm, const int64_t *p, req_list *l) {
  int size = 1, esz = 1;
  MPI_Comm_size(comm, &size);
  lab_post post = {.kind = (int32_t)p[0], .dtype = (int32_t)p[1], .redop = (int32_t)p[2], .root = (int32_t)p[3],
                   .count = (int)p[4]};
  MPI_Datatype t = post.kind == LAB_POST_EXCHANGE ? MPI_BYTE : lab_mpi_type(post.dtype);
  MPI_Type_size(t, &esz);
  int64_t send_n = 0, recv_n = 0;
  int in_place = lab_mpi_post_extent(&post, size, &send_n, &recv_n);
  if (in_place < 0) return -1;
  /* scratch sizes (one byte more, so that none is empty); 0: no buffer (barrier, or in place) */
  size_t a_bytes = send_n || recv_n ? (size_t)send_n * (size_t)esz + 1 : 0;
  size_t b_bytes = a_bytes && !in_place ? (size_t)recv_n * (size_t)esz + 1 : 0;
  void *a = a_bytes ? calloc(a_bytes, 1) : NULL, *b = b_bytes ? calloc(b_bytes, 1) : NULL;
  MPI_Request req = MPI_REQUEST_NULL;
  /* in place as the normal path is (a as both buffers), or on two */
  int rc = lab_mpi_post(comm, &post, a, b ? b : a, &req);
  if (rc != MPI_SUCCESS) {
    free(a);
    free(b);
    return -1;
  }
  add_req(l, req, a, b);
  return 0;
}

/* ---- the broken set: channels given up, agreed by every rank ---- */

typedef struct {
  int64_t *keys; /* pairs (key, ch) */
  int n;
} key_set;

static void set_add(key_set *s, uint64_t key, int ch) {
  for (int i = 0; i < s->n; i++)
    if ((uint64_t)s->keys[2 * i] == key && s->keys[2 * i + 1] == ch) return;
  s->keys = realloc(s->keys, sizeof(int64_t) * 2 * (size_t)(s->n + 1));
  s->keys[2 * s->n] = (int64_t)key;
  s->keys[2 * s->n + 1] = ch;
  s->n++;
}

static int set_has(const key_set *s, uint64_t key, int ch) {
  for (int i = 0; i < s->n; i++)
    if ((uint64_t)s->keys[2 * i] == key && s->keys[2 * i + 1] == ch) return 1;
  return 0;
}

/* every rank's broken channels, united */
static void agree(key_set *s) {
  MPI_Comm ctl = MPI_COMM_WORLD;
  int n = 0;
  MPI_Comm_size(ctl, &n);
  int mine = 2 * s->n, *counts = calloc((size_t)n, sizeof *counts), *offs = calloc((size_t)n, sizeof *offs);
  MPI_Allgather(&mine, 1, MPI_INT, counts, 1, MPI_INT, ctl);
  int total = 0;
  for (int r = 0; r < n; r++) {
    offs[r] = total;
    total += counts[r];
  }
  int64_t *all = calloc((size_t)total + 1, sizeof *all);
  MPI_Allgatherv(s->keys, mine, MPI_INT64_T, all, counts, offs, MPI_INT64_T, ctl);
  for (int i = 0; i + 1 < total; i += 2) set_add(s, (uint64_t)all[i], (int)all[i + 1]);
  free(all);
  free(counts);
  free(offs);
}

static double recover_deadline_s(void) {
  const char *e = getenv("LLMLAB_RECOVER_TIMEOUT");
  double s = e ? atof(e) : 0;
  return s > 0 ? s : 5.0;
}

/* polls every request of l and of the unsettled abandoned ones until done or the deadline */
static void complete_all(req_list *l) {
  double end = lab_now() + recover_deadline_s();
  struct timespec nap = {0, 100000};
  for (;;) {
    int left = 0;
    for (int i = 0; i < l->n; i++) {
      if (l->reqs[i] == MPI_REQUEST_NULL) continue;
      int done = 0;
      MPI_Test(&l->reqs[i], &done, MPI_STATUS_IGNORE);
      left += !done;
    }
    for (abandoned_req *a = pending; a; a = a->next) {
      if (a->settled) continue;
      int done = 0;
      MPI_Test(&a->req, &done, MPI_STATUS_IGNORE);
      if (done) a->settled = 1;
      else left++;
    }
    if (!left || lab_now() > end) return;
    nanosleep(&nap, NULL);
  }
}

/* a poisoned group that recovery has not yet looked at (lost ones stay poisoned) */
static int any_poisoned(void) {
  for (int i = 0; i < lab_dist_group_count(); i++) {
    lab_group *g = lab_dist_group_at(i);
    mpi_group *mg = member_impl(g);
    if (mg && g->poisoned && !mg->lost) return 1;
  }
  return 0;
}

/* ---- point-to-point messages that no receive took ----
 * A send that fits MPI's eager limit completes without its receiver, and its message waits in
 * the receiver's queue: a later recv from that rank with that tag, chunks later, would take
 * it instead of the message meant for it, silently. PyTorch's send is synchronous (it returns
 * once received), so a send belongs to the chunk that makes it. After a chunk in which any
 * rank sent, every rank sends a fence (an empty message with a tag no user may take) to every
 * peer of every group it belongs to, on the channel user messages travel, and takes every
 * message that arrives from that peer before the fence (MPI keeps one sender's messages in
 * order): each is reported on stderr, naming both ranks, and dropped. An abandoned send (one
 * too large to complete alone, whose wait the watchdog or a Ctrl-C ended) completes this way
 * too, instead of costing its communicator. */

typedef struct {
  lab_group *g;
  int peer;
  int fenced;        /* its fence arrived */
  MPI_Request req;   /* a dropped message being received, or MPI_REQUEST_NULL */
  void *buf;
  MPI_Status st;
} p2p_peer;

static void report_drop(p2p_peer *p, int64_t bytes) {
  char what[80];
  lab_mpi_p2p_describe(p->buf, bytes, what, sizeof what);
  lab_group *g = p->g, *w = lab_dist_world();
  fprintf(stderr, "rank %d: dropped a message from rank %d (%s, tag %d)%s%s%s that no recv took: a send "
          "must be received before the chunk or script that sends it ends\n", g->world_ranks[g->rank],
          g->world_ranks[p->peer], what, p->st.MPI_TAG, g == w ? "" : " in group '", g == w ? "" : g->name,
          g == w ? "" : "'");
  fflush(stderr);
}

/* fences every peer and drops what came before each fence; a peer whose fence never came (or
 * a message that never completed) marks its group's data channel broken */
static void drain_p2p(req_list *posted, key_set *broken) {
  int n = 0;
  for (int i = 0; i < lab_dist_group_count(); i++) {
    mpi_group *mg = member_impl(lab_dist_group_at(i));
    if (mg && !mg->lost) n += lab_dist_group_at(i)->size - 1;
  }
  p2p_peer *ps = calloc((size_t)n + 1, sizeof *ps);
  if (!ps) return;
  n = 0;
  for (int i = 0; i < lab_dist_group_count(); i++) {
    lab_group *g = lab_dist_group_at(i);
    mpi_group *mg = member_impl(g);
    if (!mg || mg->lost) continue;
    for (int p = 0; p < g->size; p++) {
      if (p == g->rank) continue;
      MPI_Request req;
      if (MPI_Isend(NULL, 0, MPI_BYTE, p, LAB_P2P_FENCE_TAG, mg->ch[LAB_CH_DATA].comm, &req) == MPI_SUCCESS)
        add_req(posted, req, NULL, NULL);
      ps[n++] = (p2p_peer){.g = g, .peer = p, .req = MPI_REQUEST_NULL};
    }
  }
  double end = lab_now() + recover_deadline_s();
  struct timespec nap = {0, 100000};
  for (int left = n; left > 0 && lab_now() <= end;) {
    left = 0;
    for (int i = 0; i < n; i++) {
      p2p_peer *p = &ps[i];
      MPI_Comm comm = ((mpi_group *)p->g->impl)->ch[LAB_CH_DATA].comm;
      if (p->req != MPI_REQUEST_NULL) { /* a dropped message still arriving */
        int done = 0;
        MPI_Status st;
        MPI_Test(&p->req, &done, &st);
        if (!done) {
          left++;
          continue;
        }
        MPI_Count bytes = 0;
        MPI_Get_elements_x(&st, MPI_BYTE, &bytes);
        report_drop(p, (int64_t)bytes);
        free(p->buf);
        p->buf = NULL;
      }
      if (p->fenced) continue;
      left++;
      int found = 0;
      MPI_Message msg;
      if (MPI_Improbe(p->peer, MPI_ANY_TAG, comm, &found, &msg, &p->st) != MPI_SUCCESS || !found) continue;
      MPI_Count bytes = 0;
      MPI_Get_elements_x(&p->st, MPI_BYTE, &bytes);
      p->buf = malloc((size_t)bytes + 1);
      if (!p->buf || MPI_Imrecv(p->buf, (int)bytes, MPI_BYTE, &msg, &p->req) != MPI_SUCCESS) break;
      if (p->st.MPI_TAG == LAB_P2P_FENCE_TAG) {
        p->fenced = 1;
        add_req(posted, p->req, p->buf, NULL); /* empty: completes with the rest */
        p->req = MPI_REQUEST_NULL;
        p->buf = NULL;
      }
    }
    if (left) nanosleep(&nap, NULL);
  }
  for (int i = 0; i < n; i++) {
    if (ps[i].req != MPI_REQUEST_NULL) add_req(posted, ps[i].req, ps[i].buf, NULL); /* complete_all decides */
    else free(ps[i].buf);
    if (!ps[i].fenced) set_add(broken, ((mpi_group *)ps[i].g->impl)->key, LAB_CH_DATA);
  }
  free(ps);
}

/* A digest of this rank's report (build_report: per group it belongs to and channel, the
 * collectives posted and the recent ones): the same on every rank when all posted alike on
 * the same groups, so an aborted chunk left nothing to repair. Below 2^62; -1 when it could
 * not be made (the caller then assumes the ranks differ). */
static int64_t report_digest(void) {
  int words = 0;
  int64_t *r = build_report(&words);
  if (!r) return -1;
  uint64_t h = 1469598103934665603ull;
  const unsigned char *b = (const unsigned char *)r;
  for (size_t i = 0; i < (size_t)words * sizeof *r; i++) h = (h ^ b[i]) * 1099511628211ull;
  free(r);
  return (int64_t)(h >> 2);
}

int lab_mpi_recover(int here) {
  /* One exchange says what recovery has to do (an element-wise max over the ranks): [0]
   * something abandoned or poisoned; [1] a send was posted (drain_p2p); [2] the chunk ended in
   * an error somewhere, so asynchronous work some ranks posted may be missing on others; [3],
   * [4] the digest of each rank's report and its negation, whose maxima show whether every
   * rank's is the same; [5] a poisoned device group somewhere (recover.c's part). A Ctrl-C of
   * code that posted alike everywhere (a Lua loop) ends here: at 4 ranks over 2 hosts the full
   * exchange below crossed the hosts four more times before the prompt, and the two flags the
   * shell and recover.c agreed on in exchanges of their own twice more. */
  int64_t digest = report_digest();
  int64_t mine[6] = {pending != NULL || any_poisoned(), lab_mpi_sent_since_recover(1), (here & LAB_RECOVER_FAILED) != 0,
                     digest >= 0 ? digest : INT64_MAX, digest >= 0 ? -digest : INT64_MAX,
                     (here & LAB_RECOVER_DEVICE) != 0},
          most[6] = {0};
  MPI_Allreduce(mine, most, 6, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
  int agreed = (most[2] ? LAB_RECOVERED_ABORTED : 0) | (most[5] ? LAB_RECOVERED_DEVICE : 0);
  int alike = most[3] == -most[4];
  if (!most[0] && !most[1] && (!most[2] || alike)) return agreed | (most[2] ? LAB_RECOVERED_COMPLETED : 0);
  int any = 1 | (most[1] ? 2 : 0);
  reports rp = {0};
  if (gather_reports(&rp) < 0) return 0;
  key_set broken = {0};
  req_list posted = {0};
  /* 1-2: catch up on every channel this rank is behind on, where that is possible */
  for (int i = 0; i < lab_dist_group_count(); i++) {
    mpi_group *mg = member_impl(lab_dist_group_at(i));
    if (!mg) continue;
    for (int c = 0; c < LAB_NCH; c++) {
      int64_t most = 0;
      if (!repairable(&rp, mg->key, c, &most)) {
        set_add(&broken, mg->key, c);
        continue;
      }
      for (int64_t s = mg->ch[c].posted; s < most; s++) {
        if (post_match(mg->ch[c].comm, post_at(&rp, mg->key, c, s), &posted) < 0) {
          set_add(&broken, mg->key, c);
          break;
        }
        const int64_t *m = post_at(&rp, mg->key, c, s);
        lab_mpi_record(lab_dist_group_at(i), c, (int)m[0], (int)m[1], (int)m[2], (int)m[3], m[4]);
      }
    }
  }
  /* abandoned receives can be cancelled; sends only complete if their peer received */
  for (abandoned_req *a = pending; a; a = a->next)
    if (!a->settled && a->info.seq < 0 && !a->info.is_send && !set_has(&broken, a->key, a->info.ch))
      MPI_Cancel(&a->req);
  if (any & 2) drain_p2p(&posted, &broken);
  /* 3: everything completes, or what did not marks its channel broken */
  complete_all(&posted);
  for (abandoned_req *a = pending; a; a = a->next)
    if (!a->settled) set_add(&broken, a->key, a->info.ch);
  for (int i = 0; i < posted.n; i++)
    if (posted.reqs[i] != MPI_REQUEST_NULL) {
      for (int j = 0; j < lab_dist_group_count(); j++) {
        mpi_group *mg = member_impl(lab_dist_group_at(j));
        if (mg) set_add(&broken, mg->key, 0); /* cannot tell which: give up on this rank's groups */
      }
      posted.scratch[2 * i] = posted.scratch[2 * i + 1] = NULL; /* MPI may still use them: leaked */
    }
  agree(&broken);
  /* settled requests are forgotten; the rest stay pending on their old communicators for
   * good, and so does every buffer held until now (which of them they use is not known) */
  int left = 0;
  while (pending) {
    abandoned_req *a = pending;
    pending = a->next;
    left |= !a->settled;
    free(a); /* an unsettled request's handle is dropped: nothing will wait on it again */
  }
  if (left) lab_dist_keep_held_forever();
  else lab_dist_release_held();
  /* the answer is the same on every rank: it comes from the agreed set */
  int result = LAB_RECOVERED_COMPLETED | agreed;
  for (int i = 0; i < broken.n; i++)
    result |= (uint64_t)broken.keys[2 * i] == ((mpi_group *)lab_dist_world()->impl)->key ? LAB_RECOVERED_NEW_WORLD
                                                                                      : LAB_RECOVERED_GROUP_LOST;
  for (int i = 0; i < lab_dist_group_count(); i++) {
    lab_group *g = lab_dist_group_at(i);
    mpi_group *mg = member_impl(g);
    if (!mg) continue;
    int lost = set_has(&broken, mg->key, LAB_CH_DATA) || set_has(&broken, mg->key, LAB_CH_CHECK);
    if (lost && g->id == 0) { /* fresh communicators; the old ones keep what was left on them */
      if (g->backend->rebuild(g) == 0) g->poisoned = 0;
    } else if (lost) {
      g->poisoned = 1; /* its communicator holds requests that can never complete */
      mg->lost = 1;
    } else {
      g->poisoned = 0;
    }
  }
  for (int i = 0; i < posted.n; i++) {
    free(posted.scratch[2 * i]);
    free(posted.scratch[2 * i + 1]);
  }
  free(posted.reqs);
  free(posted.scratch);
  free(broken.keys);
  free(rp.all);
  free(rp.offsets);
  return result;
}
