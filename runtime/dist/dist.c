/* Argument checks, traffic accounting and checked-mode fingerprints for collectives, in
 * front of the group's backend. */
#include "dist.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../error.h"
#include "../ewise.h"
#include "../transfer.h"
#include "board.h"
#include "control.h"
#include "devcomm.h"
#include "guard.h"
#include "held.h"

#define MAX_GROUPS 256

static lab_group *groups[MAX_GROUPS];
static int ngroups;
static int checked;
static double comm_seconds; /* time spent inside collectives and waits: the profiler's "comm" */
static double comm_cpu;     /* this process's CPU time in the same places (polling, copies, reductions) */
static char call_site[96];
static char call_traceback[512];
static char activity[160]; /* what the board shows while this rank waits in a collective */
static int guarded;
static const char *refused_by, *refused_why; /* lab_dist_refuse_collectives */

/* the names, from the lists in dist.h and comm.h */
#define NAME(e, name) name,
static const char *coll_names[LAB_NOPS] = {LAB_COLL_LIST(NAME)};
static const char *redop_names[LAB_NREDOPS] = {LAB_REDOP_LIST(NAME)};
#undef NAME

const char *lab_coll_name(lab_coll_op op) { return coll_names[op]; }
const char *lab_redop_name(lab_redop op) { return redop_names[op]; }

int lab_redop_from_name(const char *name) {
  for (int i = 0; i < LAB_NREDOPS; i++)
    if (strcmp(name, lab_redop_name((lab_redop)i)) == 0) return i;
  return -1;
}

/* The first free slot (a freed group's) or a new one; -1 when all MAX_GROUPS are live. */
static int free_slot(void) {
  for (int i = 1; i < ngroups; i++)
    if (!groups[i]) return i;
  return ngroups < MAX_GROUPS ? ngroups : -1;
}

static void add_group(lab_group *g) {
  int i = ngroups ? free_slot() : 0;
  if (i < 0) return;
  g->id = i;
  groups[i] = g;
  if (i == ngroups) ngroups++;
}

void lab_dist_register_world(lab_group *world) {
  world->id = 0;
  snprintf(world->name, sizeof world->name, "world");
  add_group(world);
  lab_devcomm_setup(world); /* a failure leaves the world's GPU collectives staged */
}

lab_group *lab_dist_world(void) { return ngroups ? groups[0] : NULL; }

static lab_group *default_group;
void lab_dist_set_default(lab_group *g) { default_group = g; }
lab_group *lab_dist_default(void) { return default_group ? default_group : lab_dist_world(); }
int lab_dist_world_rank(void) {
  lab_group *w = lab_dist_world();
  return w ? w->rank : 0;
}
void lab_dist_set_checked(int on) { checked = on; }
int lab_dist_checked(void) { return checked; }
void lab_dist_set_call_site(const char *site) {
  snprintf(call_site, sizeof call_site, "%s", site ? site : "");
}
const char *lab_dist_call_traceback(void) { return call_traceback; }
void lab_dist_set_traceback(const char *tb) { snprintf(call_traceback, sizeof call_traceback, "%s", tb ? tb : ""); }
void lab_dist_set_guarded(int on) { guarded = on; }
int lab_dist_guarded(void) { return guarded; }
void lab_dist_refuse_collectives(const char *who, const char *why) {
  refused_by = who;
  refused_why = why;
}

/* -1 (after lab_fail) while collectives are refused */
static int refusal_check(const char *op) {
  return refused_by ? lab_fail(refused_by, "%s %s", op, refused_why ? refused_why : "is refused here") : 0;
}

int lab_dist_group_count(void) { return ngroups; }
lab_group *lab_dist_group_at(int i) { return i >= 0 && i < ngroups ? groups[i] : NULL; }

static lab_group *group_from_split(lab_group *parent, int color, int key, const char *what) {
  if (refusal_check(what) < 0) return NULL;
  if (free_slot() < 0) {
    lab_fail(what, "%d process groups are alive; destroy the ones no longer needed (group:destroy(), or drop "
             "every reference so the collector frees them)", MAX_GROUPS);
    return NULL;
  }
  lab_group *g = calloc(1, sizeof *g);
  if (!g) {
    lab_fail(what, "out of memory");
    return NULL;
  }
  g->backend = parent->backend;
  g->world_size = parent->world_size;
  if (parent->backend->split(parent, color, key, g) < 0) {
    free(g);
    return NULL;
  }
  g->refs = 1;
  add_group(g);
  if (lab_devcomm_setup(g) < 0) {
    lab_dist_free_group(g);
    return NULL;
  }
  return g;
}

lab_group *lab_dist_new_group(lab_group *parent, int n, const int *world_ranks) {
  int me = lab_dist_world_rank(), pos = -1;
  for (int i = 0; i < n; i++) {
    if (world_ranks[i] < 0 || world_ranks[i] >= parent->world_size) {
      lab_fail("new_group", "rank %d is not in the world of %d ranks", world_ranks[i], parent->world_size);
      return NULL;
    }
    for (int j = 0; j < i; j++)
      if (world_ranks[j] == world_ranks[i]) {
        lab_fail("new_group", "rank %d is listed twice", world_ranks[i]);
        return NULL;
      }
    if (world_ranks[i] == me) pos = i;
  }
  lab_group *g = group_from_split(parent, pos >= 0 ? 1 : -1, pos, "new_group");
  if (!g) return NULL;
  int len = 0;
  len += snprintf(g->name + len, sizeof g->name - (size_t)len, "group%d[", g->id);
  for (int i = 0; i < n && len < (int)sizeof g->name - 8; i++)
    len += snprintf(g->name + len, sizeof g->name - (size_t)len, i ? ",%d" : "%d", world_ranks[i]);
  snprintf(g->name + len, sizeof g->name - (size_t)len, "]");
  if (pos < 0) { /* a non-member keeps the member list for its error messages */
    g->size = n;
    g->world_ranks = malloc(sizeof(int) * (size_t)(n ? n : 1));
    if (g->world_ranks) memcpy(g->world_ranks, world_ranks, sizeof(int) * (size_t)n);
  }
  return g;
}

lab_group *lab_dist_split(lab_group *parent, int color, int key) {
  lab_group *g = group_from_split(parent, color, key, "split");
  if (g) snprintf(g->name, sizeof g->name, "group%d(color %d)", g->id, color);
  return g;
}

void lab_dist_group_retain(lab_group *g) {
  if (g) g->refs++;
}

void lab_dist_group_release(lab_group *g) {
  if (g && g->id != 0 && --g->refs <= 0) lab_dist_free_group(g);
}

void lab_dist_free_group(lab_group *g) {
  if (!g || g->id == 0) return;
  for (int i = 0; i < ngroups; i++)
    if (groups[i] == g) groups[i] = NULL;
  lab_devcomm_free(g);
  g->backend->free_group(g);
  free(g->world_ranks);
  free(g);
}

void lab_dist_reset_stats(void) {
  for (int i = 0; i < ngroups; i++)
    if (groups[i]) memset(groups[i]->stats, 0, sizeof groups[i]->stats);
}

/* ---- checks ---- */

static int member_check(const char *op, lab_group *g) {
  if (refusal_check(op) < 0) return -1;
  if (g->poisoned)
    return lab_fail(op, "%s is unusable: a collective on it was abandoned (interrupted, timed out or quit) while "
                    "other ranks were elsewhere; the REPL repairs it before the next chunk, and a group still "
                    "unusable after that must be created again", g->name);
  if (g->rank >= 0) return 0;
  return lab_fail(op, "this rank is not a member of %s", g->name);
}

static int contiguous_check(const char *op, const char *what, lab_tensor *t) {
  if (lab_is_contiguous(t)) return 0;
  char s[128];
  return lab_fail(op, "%s tensor of shape %s is not contiguous; call :contiguous() first", what,
                  lab_shape_str(t, s, sizeof s));
}

/* A root counts the group's ranks (0 .. size-1), as torch's group_src does. A REPL chunk on
 * some ranks (%on 1,3) runs on their group while rank() reports world ranks: a world rank that
 * is a member is named with its number in the group, so the message says which to write. */
static int root_check(const char *op, lab_group *g, int root, const char *what) {
  if (root >= 0 && root < g->size) return 0;
  for (int i = 0; g->world_ranks && i < g->size; i++)
    if (g->world_ranks[i] == root)
      return lab_fail(op, "%s %d is not a rank of %s (size %d): %s counts the group's ranks 0-%d, and world rank %d "
                      "is rank %d of the group (write %d)", what, root, g->name, g->size, what, g->size - 1, root, i, i);
  return lab_fail(op, "%s %d is not a rank of %s (size %d): %s counts the group's ranks, 0-%d", what, root, g->name,
                  g->size, what, g->size - 1);
}

/* ---- checked mode ---- */

typedef struct {
  int32_t op, dtype, redop, root;
  int64_t count;
  char site[96];
  char traceback[512];
} fingerprint;

static int fingerprints_agree(const fingerprint *a, const fingerprint *b) {
  return a->op == b->op && a->dtype == b->dtype && a->redop == b->redop && a->root == b->root &&
         a->count == b->count;
}

static int describe(const fingerprint *f, char *buf, size_t n) {
  int len = snprintf(buf, n, "%s", lab_coll_name((lab_coll_op)f->op));
  if (f->op != LAB_OP_BARRIER)
    len += snprintf(buf + len, n - (size_t)len, "(%lld x %s", (long long)f->count,
                    lab_dtype_name((lab_dtype)f->dtype));
  if (f->redop >= 0) len += snprintf(buf + len, n - (size_t)len, ", op=%s", lab_redop_name((lab_redop)f->redop));
  if (f->root >= 0) len += snprintf(buf + len, n - (size_t)len, ", root=%d", f->root);
  if (f->op != LAB_OP_BARRIER) len += snprintf(buf + len, n - (size_t)len, ")");
  if (f->site[0]) len += snprintf(buf + len, n - (size_t)len, " at %s", f->site);
  return len;
}

static void set_activity(const char *op, lab_tensor *t, lab_group *g);

static int check_agreement(lab_group *g, lab_coll_op op, lab_dtype dt, int64_t count, int redop, int root) {
  if (!checked || op == LAB_OP_SEND || op == LAB_OP_RECV) return 0;
  lab_board_set(LAB_IN_COLLECTIVE, activity, call_site); /* waiting here counts as being in it */
  /* mine and every rank's in one block, which an abandoned exchange keeps (held.h) */
  fingerprint *block = calloc((size_t)g->size + 1, sizeof *block);
  if (!block) return lab_fail(lab_coll_name(op), "out of memory");
  fingerprint *mine = block, *all = block + 1;
  mine->op = op;
  mine->dtype = dt;
  mine->count = count;
  mine->redop = redop;
  mine->root = root;
  snprintf(mine->site, sizeof mine->site, "%s", call_site);
  snprintf(mine->traceback, sizeof mine->traceback, "%s", call_traceback);
  int64_t abandoned = lab_dist_abandoned_count();
  if (g->backend->exchange(g, mine, all, (int)sizeof *mine) < 0) {
    if (lab_dist_abandoned_count() != abandoned) lab_dist_hold_memory(block);
    else free(block);
    return -1;
  }
  int same = 1;
  for (int r = 1; r < g->size; r++) same = same && fingerprints_agree(&all[0], &all[r]);
  if (!same) {
    char msg[4096];
    int len = snprintf(msg, sizeof msg, "ranks of %s disagree on the collective:", g->name);
    for (int r = 0; r < g->size && len < (int)sizeof msg - 200; r++) {
      len += snprintf(msg + len, sizeof msg - (size_t)len, "\n  rank %d: ", g->world_ranks[r]);
      len += describe(&all[r], msg + len, sizeof msg - (size_t)len);
    }
    /* the first differing rank's traceback, to see how it got there */
    for (int r = 0; r < g->size && len < (int)sizeof msg - 100; r++) {
      if (all[r].traceback[0] && !fingerprints_agree(&all[0], &all[r])) {
        len += snprintf(msg + len, sizeof msg - (size_t)len, "\n  rank %d %s", g->world_ranks[r], all[r].traceback);
        break;
      }
    }
    free(block);
    return lab_fail("desync", "%s", msg); /* the same words on every rank, so it shows once */
  }
  free(block);
  return 0;
}

/* ---- accounting ---- */

static void count(lab_group *g, lab_coll_op op, int64_t bytes, double wire_factor) {
  g->stats[op].calls++;
  g->stats[op].bytes += bytes;
  g->stats[op].wire_bytes += (int64_t)((double)bytes * wire_factor + 0.5);
}

static double ring(lab_group *g) { return g->size > 1 ? (double)(g->size - 1) / g->size : 0; }

/* ---- the work object ---- */

static int start(lab_group *g, lab_backend_work *bw, lab_work **work, lab_tensor *k0,
                 lab_tensor *k1, int avg) {
  lab_work *w = calloc(1, sizeof *w);
  if (!w) {
    g->backend->wait(bw);
    g->backend->free_work(bw);
    return lab_fail("async", "out of memory");
  }
  w->group = g;
  lab_dist_group_retain(g); /* the group lives while its request does */
  w->bw = bw;
  w->keep[0] = k0;
  w->keep[1] = k1;
  if (k0) lab_tensor_retain(k0);
  if (k1) lab_tensor_retain(k1);
  w->avg_divisor = avg;
  *work = w;
  return 0;
}

static int finish_avg(lab_tensor *t, int divisor) {
  lab_tensor *d = lab_tensor_scalar(LAB_F64, (double)divisor);
  if (!d) return -1;
  int rc = lab_binary_(LAB_DIV, t, d);
  lab_tensor_release(d);
  return rc;
}

double lab_dist_comm_seconds(void) { return comm_seconds; }

double lab_dist_comm_cpu_seconds(void) { return comm_cpu; }

/* the wall and CPU time since (t0, c0) were spent communicating */
static void comm_add(double t0, double c0) {
  comm_seconds += lab_now() - t0;
  comm_cpu += lab_cpu_seconds() - c0;
}

/* after a backend call, back in Lua; a failed one (its wait given up) keeps showing the wait
 * until the next line or call: the other waits' watchdogs fire a moment later, and their
 * reports must show this rank in the collective, not running Lua (multinode, rank 0's report) */
static void call_over(int rc) { if (rc >= 0) lab_board_set(LAB_RUNNING, "", call_site); }

/* a request's own failure (a receive whose message does not fit) completes it with that error;
 * only a wait given up (Ctrl-C, watchdog, fail fast) poisons the group */
typedef struct {
  lab_work *w;
  int rc;
} work_poll;

static int test_work(void *ctx, int *done) {
  work_poll *p = ctx;
  if (p->w->group->backend->test(p->w->bw, done) < 0) {
    p->rc = -1;
    *done = 1;
  }
  return 0;
}

int lab_work_wait(lab_work *w) {
  if (w->done) return 0;
  if (w->inner) {
    int rc = lab_work_wait(w->inner);
    w->done = 1;
    for (int i = 0; i < 2 && rc == 0; i++)
      if (w->back[i]) rc = lab_copy_(w->back[i], w->back_src[i]);
    return rc;
  }
  double t0 = lab_now(), c0 = lab_cpu_seconds();
  int rc;
  if (lab_dist_guarded()) {
    /* guarded (the REPL, the stepper): Ctrl-C, the watchdog and fail fast can end the wait of
     * an asynchronous collective too (a DDP bucket whose peer never posts it). Given up, the
     * request stays pending in w: recovery has the late ranks post theirs, and a later wait
     * (a wrapper's reset, the handle's release) completes it. */
    char what[200];
    snprintf(what, sizeof what, "wait for an asynchronous collective on %s", w->group->name);
    lab_board_set(LAB_IN_COLLECTIVE, what, call_site);
    work_poll poll = {w, 0};
    rc = lab_guard_wait(w->group, "wait", test_work, &poll);
    call_over(rc);
    comm_add(t0, c0);
    if (rc < 0) return -1;
    rc = poll.rc;
  } else {
    rc = w->group->backend->wait(w->bw);
    comm_add(t0, c0);
  }
  w->done = 1;
  if (rc == 0 && w->avg_divisor > 0) rc = finish_avg(w->keep[0], w->avg_divisor);
  return rc;
}

int lab_work_test(lab_work *w, int *done) {
  if (w->done) {
    *done = 1;
    return 0;
  }
  if (w->inner ? lab_work_test(w->inner, done) < 0 : w->group->backend->test(w->bw, done) < 0) return -1;
  if (*done) return lab_work_wait(w);
  return 0;
}

void lab_work_free(lab_work *w) {
  if (!w) return;
  /* never free buffers under a pending request: one whose wait gives up (a guarded wait
   * interrupted again) is kept, with its tensors, for the life of the process */
  if (!w->done && lab_work_wait(w) < 0) return;
  if (w->bw) w->group->backend->free_work(w->bw); /* none for staged work: its inner has it */
  lab_work_free(w->inner);
  for (int i = 0; i < 3; i++) lab_tensor_release(w->keep[i]);
  for (int i = 0; i < 2; i++) lab_tensor_release(w->back[i]);
  lab_dist_group_release(w->group);
  free(w);
}

/* A blocking call whose wait was given up leaves its request to recovery: the tensors it
 * reads and writes stay alive until then. Returns -1. */
static int hold_if_abandoned(int64_t before, lab_tensor *a, lab_tensor *b) {
  if (lab_dist_abandoned_count() != before) {
    lab_dist_hold_tensor(a);
    lab_dist_hold_tensor(b);
  }
  return -1;
}

/* One backend call of a collective, described by its data: which call (op) and its
 * arguments. backend_post makes it; launch wraps it with the board, the timing and the work. */
typedef struct {
  lab_coll_op op;
  const void *send; /* in-place calls (all_reduce, reduce, broadcast, send, recv): send == recv */
  void *recv;
  int64_t count;
  lab_dtype dt;
  lab_redop redop;
  int peer; /* root for broadcast/reduce, the other rank for send/recv */
  int tag;
} backend_call;

static int backend_post(lab_group *bg, const backend_call *c, lab_backend_work **bw) {
  const lab_comm_backend *b = bg->backend;
  switch (c->op) {
  case LAB_OP_ALL_REDUCE: return b->all_reduce(bg, c->send, c->recv, c->count, c->dt, c->redop, bw);
  case LAB_OP_BROADCAST: return b->broadcast(bg, c->recv, c->count, c->dt, c->peer, bw);
  case LAB_OP_REDUCE: return b->reduce(bg, c->send, c->recv, c->count, c->dt, c->redop, c->peer, bw);
  case LAB_OP_ALL_GATHER: return b->all_gather(bg, c->send, c->recv, c->count, c->dt, bw);
  case LAB_OP_REDUCE_SCATTER: return b->reduce_scatter(bg, c->send, c->recv, c->count, c->dt, c->redop, bw);
  case LAB_OP_ALL_TO_ALL: return b->all_to_all(bg, c->send, c->recv, c->count, c->dt, bw);
  case LAB_OP_SEND: return b->send(bg, c->send, c->count, c->dt, c->peer, c->tag, bw);
  case LAB_OP_RECV: return b->recv(bg, c->recv, c->count, c->dt, c->peer, c->tag, bw);
  default: return lab_fail(lab_coll_name(c->op), "no single backend call (internal error)");
  }
}

/* Blocking when work is NULL; otherwise wraps the request of bg (the group whose backend runs
 * the call: the user's group, or its device group for NCCL). k0 and k1 are the tensors the
 * call reads and writes (kept alive by the work, or held when a wait is abandoned); avg > 0
 * divides k0 by it once the call completes. */
static int launch(lab_group *bg, lab_work **work, lab_tensor *k0, lab_tensor *k1, int avg, backend_call c) {
  lab_backend_work *bw = NULL;
  double t0 = lab_now(), c0 = lab_cpu_seconds();
  int64_t abandoned = lab_dist_abandoned_count();
  lab_board_set(LAB_IN_COLLECTIVE, activity, call_site);
  int rc = backend_post(bg, &c, work ? &bw : NULL);
  call_over(rc);
  comm_add(t0, c0);
  if (rc < 0) return hold_if_abandoned(abandoned, k0, k1);
  if (work) return start(bg, bw, work, k0, k1, avg);
  if (avg > 0) return finish_avg(k0, avg);
  return 0;
}

/* what the board shows while this rank waits, and the count of collectives it posted per
 * group during the chunk (fail fast: board.h); point-to-point calls are not counted */
static void set_activity(const char *op, lab_tensor *t, lab_group *g) {
  if (strcmp(op, "send") != 0 && strcmp(op, "recv") != 0) lab_board_count_collective(g->world_ranks, g->size);
  if (t) snprintf(activity, sizeof activity, "%s(%lld x %s) on %s", op, (long long)lab_numel(t), lab_dtype_name(t->dtype), g->name);
  else snprintf(activity, sizeof activity, "%s on %s", op, g->name);
}

static int redop_check(const char *op, lab_tensor *t, lab_redop r) {
  /* NCCL reduces no FP8 type either; a sum rounded to 3 mantissa bits at every hop is useless */
  if (lab_dtype_is_fp8(t->dtype))
    return lab_fail(op, "%s tensors cannot be reduced (FP8 is a storage type): reduce in bf16 or f32, "
                        "or move them with broadcast/all_gather", lab_dtype_name(t->dtype));
  if (r == LAB_RED_AVG && !lab_dtype_is_float(t->dtype))
    return lab_fail(op, "op 'avg' needs a floating-point tensor, got %s", lab_dtype_name(t->dtype));
  return 0;
}

/* ---- tensors of other devices ----
 * devcomm.c routes a collective on device tensors: cuda tensors to the group's NCCL
 * communicator where every member has a GPU of its own; otherwise (ranks sharing a GPU, sim
 * tensors, mixed devices, no NCCL) the collective runs on host copies and its results are
 * copied back; an async call copies back when its work is waited for. */

/* The path for tensors a (and b): -1 after lab_fail, else 0 with *path set. */
static int route(const char *op, lab_group *g, lab_tensor *a, lab_tensor *b, int p2p, lab_coll_path *path) {
  lab_device da = lab_device_of(a), db = b ? lab_device_of(b) : da;
  return lab_devcomm_route(op, g, da, db, p2p, path);
}

/* the group whose backend runs the call: g, or its device group (made at its first use) */
static lab_group *backend_group(lab_group *g, lab_coll_path path) {
  return path == LAB_PATH_DEVICE ? lab_devcomm_group(g) : g;
}

/* Runs fn on host copies of t (and u) and copies the results back into those written. Blocking
 * when work is NULL. Asynchronous otherwise: fn starts a host request on the copies, and the
 * copy back happens when the work is waited for, so two ranks that isend to each other before
 * they wait do not block one another in a send that cannot complete until the peer receives. */
typedef int (*staged_fn)(lab_group *g, lab_tensor *t, lab_tensor *u, void *ctx, lab_work **work);

static int staged(lab_group *g, lab_tensor *t, lab_tensor *u, int writes_t, int writes_u, staged_fn fn, void *ctx,
                  lab_work **work) {
  lab_tensor *ht = lab_to_host(t), *hu = u && ht ? lab_to_host(u) : NULL;
  lab_work *inner = NULL;
  int rc = (!ht || (u && !hu)) ? -1 : fn(g, ht, hu, ctx, work ? &inner : NULL);
  if (rc == 0 && work) {
    lab_work *w = calloc(1, sizeof *w);
    if (!w) {
      lab_work_free(inner);
      rc = lab_fail("async", "out of memory");
    } else {
      w->group = g;
      lab_dist_group_retain(g);
      w->inner = inner;
      w->keep[0] = ht; /* the host copies the request uses */
      w->keep[1] = hu;
      if (writes_t) w->back[0] = t, w->back_src[0] = ht, lab_tensor_retain(t);
      if (writes_u) w->back[1] = u, w->back_src[1] = hu, lab_tensor_retain(u);
      *work = w;
      return 0;
    }
  }
  if (rc == 0 && writes_t) rc = lab_copy_(t, ht);
  if (rc == 0 && writes_u) rc = lab_copy_(u, hu);
  lab_tensor_release(ht);
  lab_tensor_release(hu);
  return rc;
}

typedef struct {
  lab_redop op;
  int root, tag;
  const int64_t *out_splits, *in_splits;
} coll_args;

static int st_all_reduce(lab_group *g, lab_tensor *t, lab_tensor *u, void *c, lab_work **work) {
  (void)u;
  return lab_all_reduce(g, t, ((coll_args *)c)->op, work);
}
static int st_broadcast(lab_group *g, lab_tensor *t, lab_tensor *u, void *c, lab_work **work) {
  (void)u;
  return lab_broadcast(g, t, ((coll_args *)c)->root, work);
}
static int st_reduce(lab_group *g, lab_tensor *t, lab_tensor *u, void *c, lab_work **work) {
  (void)u;
  return lab_reduce(g, t, ((coll_args *)c)->op, ((coll_args *)c)->root, work);
}
static int st_all_gather(lab_group *g, lab_tensor *out, lab_tensor *in, void *c, lab_work **work) {
  (void)c;
  return lab_all_gather(g, out, in, work);
}
static int st_reduce_scatter(lab_group *g, lab_tensor *out, lab_tensor *in, void *c, lab_work **work) {
  return lab_reduce_scatter(g, out, in, ((coll_args *)c)->op, work);
}
static int st_all_to_all(lab_group *g, lab_tensor *out, lab_tensor *in, void *c, lab_work **work) {
  (void)c;
  return lab_all_to_all(g, out, in, work);
}
static int st_all_to_all_single(lab_group *g, lab_tensor *out, lab_tensor *in, void *c, lab_work **work) {
  coll_args *a = c;
  return lab_all_to_all_single(g, out, a->out_splits, in, a->in_splits, work);
}
static int st_send(lab_group *g, lab_tensor *t, lab_tensor *u, void *c, lab_work **work) {
  (void)u;
  return lab_send(g, t, ((coll_args *)c)->root, ((coll_args *)c)->tag, work);
}
static int st_recv(lab_group *g, lab_tensor *t, lab_tensor *u, void *c, lab_work **work) {
  (void)u;
  return lab_recv(g, t, ((coll_args *)c)->root, ((coll_args *)c)->tag, work);
}

int lab_all_reduce(lab_group *g, lab_tensor *t, lab_redop op, lab_work **work) {
  const char *name = "all_reduce";
  if (member_check(name, g) < 0 || contiguous_check(name, "the", t) < 0 || redop_check(name, t, op) < 0) return -1;
  lab_coll_path path;
  if (route(name, g, t, NULL, 0, &path) < 0) return -1;
  if (path == LAB_PATH_STAGED) return staged(g, t, NULL, 1, 0, st_all_reduce, &(coll_args){.op = op}, work);
  int64_t n = lab_numel(t);
  set_activity("all_reduce", t, g);
  if (check_agreement(g, LAB_OP_ALL_REDUCE, t->dtype, n, op, -1) < 0) return -1;
  count(g, LAB_OP_ALL_REDUCE, (int64_t)lab_nbytes(t), 2 * ring(g));
  lab_redop bop = op == LAB_RED_AVG ? LAB_RED_SUM : op;
  int avg = op == LAB_RED_AVG ? g->size : 0;
  lab_group *bg = backend_group(g, path);
  if (!bg) return -1;
  return launch(bg, work, t, NULL, avg, (backend_call){LAB_OP_ALL_REDUCE, lab_data(t), lab_data(t), n, t->dtype, bop, 0, 0});
}

int lab_broadcast(lab_group *g, lab_tensor *t, int root, lab_work **work) {
  const char *name = "broadcast";
  if (member_check(name, g) < 0 || contiguous_check(name, "the", t) < 0 || root_check(name, g, root, "src") < 0) return -1;
  lab_coll_path path;
  if (route(name, g, t, NULL, 0, &path) < 0) return -1;
  if (path == LAB_PATH_STAGED) return staged(g, t, NULL, 1, 0, st_broadcast, &(coll_args){.root = root}, work);
  int64_t n = lab_numel(t);
  set_activity("broadcast", t, g);
  if (check_agreement(g, LAB_OP_BROADCAST, t->dtype, n, -1, root) < 0) return -1;
  count(g, LAB_OP_BROADCAST, (int64_t)lab_nbytes(t), g->size > 1 ? 1.0 : 0.0);
  lab_group *bg = backend_group(g, path);
  if (!bg) return -1;
  return launch(bg, work, t, NULL, 0, (backend_call){LAB_OP_BROADCAST, lab_data(t), lab_data(t), n, t->dtype, 0, root, 0});
}

int lab_reduce(lab_group *g, lab_tensor *t, lab_redop op, int root, lab_work **work) {
  const char *name = "reduce";
  if (member_check(name, g) < 0 || contiguous_check(name, "the", t) < 0 || root_check(name, g, root, "dst") < 0 ||
      redop_check(name, t, op) < 0)
    return -1;
  lab_coll_path path;
  if (route(name, g, t, NULL, 0, &path) < 0) return -1;
  if (path == LAB_PATH_STAGED) return staged(g, t, NULL, 1, 0, st_reduce, &(coll_args){.op = op, .root = root}, work);
  int64_t n = lab_numel(t);
  set_activity("reduce", t, g);
  if (check_agreement(g, LAB_OP_REDUCE, t->dtype, n, op, root) < 0) return -1;
  count(g, LAB_OP_REDUCE, (int64_t)lab_nbytes(t), g->size > 1 ? 1.0 : 0.0);
  lab_redop bop = op == LAB_RED_AVG ? LAB_RED_SUM : op;
  int avg = (op == LAB_RED_AVG && g->rank == root) ? g->size : 0;
  lab_group *bg = backend_group(g, path);
  if (!bg) return -1;
  return launch(bg, work, t, NULL, avg, (backend_call){LAB_OP_REDUCE, lab_data(t), lab_data(t), n, t->dtype, bop, root, 0});
}

static int sized_pair_check(const char *op, lab_group *g, lab_tensor *big, const char *big_name,
                            lab_tensor *small, const char *small_name) {
  char a[128], b[128];
  if (big->dtype != small->dtype)
    return lab_fail(op, "%s is %s but %s is %s: dtypes must match", big_name, lab_dtype_name(big->dtype),
                    small_name, lab_dtype_name(small->dtype));
  if (lab_numel(big) != (int64_t)g->size * lab_numel(small))
    return lab_fail(op, "%s %s must hold %d x %lld elements (group size x %s %s), not %lld", big_name,
                    lab_shape_str(big, a, sizeof a), g->size, (long long)lab_numel(small), small_name,
                    lab_shape_str(small, b, sizeof b), (long long)lab_numel(big));
  if (contiguous_check(op, big_name, big) < 0 || contiguous_check(op, small_name, small) < 0) return -1;
  return 0;
}

int lab_all_gather(lab_group *g, lab_tensor *out, lab_tensor *in, lab_work **work) {
  const char *name = "all_gather";
  if (member_check(name, g) < 0 || sized_pair_check(name, g, out, "output", in, "input") < 0) return -1;
  lab_coll_path path;
  if (route(name, g, out, in, 0, &path) < 0) return -1;
  if (path == LAB_PATH_STAGED) return staged(g, out, in, 1, 0, st_all_gather, NULL, work);
  int64_t n = lab_numel(in);
  set_activity("all_gather", in, g);
  if (check_agreement(g, LAB_OP_ALL_GATHER, in->dtype, n, -1, -1) < 0) return -1;
  count(g, LAB_OP_ALL_GATHER, (int64_t)lab_nbytes(out), ring(g));
  lab_group *bg = backend_group(g, path);
  if (!bg) return -1;
  return launch(bg, work, out, in, 0, (backend_call){LAB_OP_ALL_GATHER, lab_data(in), lab_data(out), n, in->dtype, 0, 0, 0});
}

int lab_reduce_scatter(lab_group *g, lab_tensor *out, lab_tensor *in, lab_redop op, lab_work **work) {
  const char *name = "reduce_scatter";
  if (member_check(name, g) < 0 || sized_pair_check(name, g, in, "input", out, "output") < 0 ||
      redop_check(name, out, op) < 0)
    return -1;
  lab_coll_path path;
  if (route(name, g, out, in, 0, &path) < 0) return -1;
  if (path == LAB_PATH_STAGED) return staged(g, out, in, 1, 0, st_reduce_scatter, &(coll_args){.op = op}, work);
  int64_t n = lab_numel(out);
  set_activity("reduce_scatter", out, g);
  if (check_agreement(g, LAB_OP_REDUCE_SCATTER, in->dtype, n, op, -1) < 0) return -1;
  count(g, LAB_OP_REDUCE_SCATTER, (int64_t)lab_nbytes(in), ring(g));
  lab_redop bop = op == LAB_RED_AVG ? LAB_RED_SUM : op;
  int avg = op == LAB_RED_AVG ? g->size : 0;
  lab_group *bg = backend_group(g, path);
  if (!bg) return -1;
  return launch(bg, work, out, in, avg, (backend_call){LAB_OP_REDUCE_SCATTER, lab_data(in), lab_data(out), n, in->dtype, bop, 0, 0});
}

int lab_all_to_all(lab_group *g, lab_tensor *out, lab_tensor *in, lab_work **work) {
  const char *name = "all_to_all";
  char a[128], b[128];
  if (member_check(name, g) < 0) return -1;
  lab_coll_path path;
  if (route(name, g, out, in, 0, &path) < 0) return -1;
  if (path == LAB_PATH_STAGED) return staged(g, out, in, 1, 0, st_all_to_all, NULL, work);
  if (in->dtype != out->dtype || lab_numel(in) != lab_numel(out))
    return lab_fail(name, "output %s %s and input %s %s must have the same dtype and size",
                    lab_shape_str(out, a, sizeof a), lab_dtype_name(out->dtype),
                    lab_shape_str(in, b, sizeof b), lab_dtype_name(in->dtype));
  if (lab_numel(in) % g->size != 0)
    return lab_fail(name, "input of %lld elements does not split evenly over %d ranks",
                    (long long)lab_numel(in), g->size);
  if (contiguous_check(name, "input", in) < 0 || contiguous_check(name, "output", out) < 0) return -1;
  int64_t n = lab_numel(in) / g->size;
  set_activity("all_to_all", in, g);
  if (check_agreement(g, LAB_OP_ALL_TO_ALL, in->dtype, n, -1, -1) < 0) return -1;
  count(g, LAB_OP_ALL_TO_ALL, (int64_t)lab_nbytes(in), ring(g));
  lab_group *bg = backend_group(g, path);
  if (!bg) return -1;
  return launch(bg, work, out, in, 0, (backend_call){LAB_OP_ALL_TO_ALL, lab_data(in), lab_data(out), n, in->dtype, 0, 0, 0});
}

/* ---- uneven all-to-all ---- */

/* the splits of one side: one per rank, none negative, summing to the tensor's dim 1 */
static int splits_check(const char *op, lab_group *g, const int64_t *splits, lab_tensor *t, const char *what) {
  char s[128];
  int64_t sum = 0;
  for (int r = 0; r < g->size; r++) {
    if (splits[r] < 0)
      return lab_fail(op, "%s_split_sizes[%d] is %lld: split sizes cannot be negative", what, r + 1, (long long)splits[r]);
    sum += splits[r];
  }
  if (sum != t->shape[0])
    return lab_fail(op, "%s_split_sizes sum to %lld but the %s tensor %s has %lld rows (dim 1)", what,
                    (long long)sum, what, lab_shape_str(t, s, sizeof s), (long long)t->shape[0]);
  return 0;
}

/* Checked mode: every rank shows its splits; what rank i sends to j must be what j expects
 * from i, else MPI would truncate a message or leave rows unwritten. */
static int splits_agree(const char *op, lab_group *g, const int64_t *in_splits, const int64_t *out_splits) {
  int n = g->size;
  int64_t *mine = malloc(sizeof(int64_t) * 2 * (size_t)n), *all = malloc(sizeof(int64_t) * 2 * (size_t)n * (size_t)n);
  if (!mine || !all) {
    free(mine);
    free(all);
    return lab_fail(op, "out of memory");
  }
  memcpy(mine, in_splits, sizeof(int64_t) * (size_t)n);
  memcpy(mine + n, out_splits, sizeof(int64_t) * (size_t)n);
  int64_t abandoned = lab_dist_abandoned_count();
  int rc = g->backend->exchange(g, mine, all, (int)(sizeof(int64_t) * 2 * (size_t)n));
  if (rc < 0 && lab_dist_abandoned_count() != abandoned) {
    lab_dist_hold_memory(mine);
    lab_dist_hold_memory(all);
    return -1;
  }
  for (int i = 0; rc == 0 && i < n; i++)
    for (int j = 0; rc == 0 && j < n; j++) {
      int64_t sends = all[(size_t)i * 2 * n + j], expects = all[(size_t)j * 2 * n + n + i];
      if (sends != expects)
        rc = lab_fail(op, "on %s, rank %d sends %lld rows to rank %d (its input_split_sizes[%d]) but rank %d "
                      "expects %lld rows from rank %d (its output_split_sizes[%d])", g->name, g->world_ranks[i],
                      (long long)sends, g->world_ranks[j], j + 1, g->world_ranks[j], (long long)expects,
                      g->world_ranks[i], i + 1);
    }
  free(mine);
  free(all);
  return rc;
}

int lab_all_to_all_single(lab_group *g, lab_tensor *out, const int64_t *out_splits, lab_tensor *in,
                          const int64_t *in_splits, lab_work **work) {
  const char *name = "all_to_all_single";
  char a[128], b[128];
  if (member_check(name, g) < 0) return -1;
  if (!g->backend->all_to_all_v)
    return lab_fail(name, "the %s backend of %s has no uneven all-to-all", g->backend->name, g->name);
  lab_coll_path path;
  if (route(name, g, out, in, 0, &path) < 0) return -1;
  if (path == LAB_PATH_STAGED)
    return staged(g, out, in, 1, 0, st_all_to_all_single, &(coll_args){.out_splits = out_splits, .in_splits = in_splits},
                  work);
  if (in->ndim < 1 || out->ndim < 1 || in->dtype != out->dtype || in->ndim != out->ndim ||
      memcmp(in->shape + 1, out->shape + 1, sizeof(int64_t) * (size_t)(in->ndim - 1)) != 0)
    return lab_fail(name, "output %s %s and input %s %s must have the same dtype and the same sizes "
                    "except dim 1", lab_shape_str(out, a, sizeof a), lab_dtype_name(out->dtype),
                    lab_shape_str(in, b, sizeof b), lab_dtype_name(in->dtype));
  if (contiguous_check(name, "input", in) < 0 || contiguous_check(name, "output", out) < 0) return -1;
  int n = g->size;
  int64_t row = 1; /* elements per row */
  for (int d = 1; d < in->ndim; d++) row *= in->shape[d];
  int64_t *v = malloc(sizeof(int64_t) * 6 * (size_t)n); /* splits, then counts and displacements */
  if (!v) return lab_fail(name, "out of memory");
  int64_t *is = v, *os = v + n, *sc = v + 2 * n, *sd = v + 3 * n, *rc_ = v + 4 * n, *rd = v + 5 * n;
  for (int r = 0; r < n; r++) {
    if (!in_splits && in->shape[0] % n) {
      free(v);
      return lab_fail(name, "input %s has %lld rows, which do not split evenly over %d ranks; pass input_split_sizes",
                      lab_shape_str(in, a, sizeof a), (long long)in->shape[0], n);
    }
    if (!out_splits && out->shape[0] % n) {
      free(v);
      return lab_fail(name, "output %s has %lld rows, which do not split evenly over %d ranks; pass output_split_sizes",
                      lab_shape_str(out, a, sizeof a), (long long)out->shape[0], n);
    }
    is[r] = in_splits ? in_splits[r] : in->shape[0] / n;
    os[r] = out_splits ? out_splits[r] : out->shape[0] / n;
  }
  if (splits_check(name, g, is, in, "input") < 0 || splits_check(name, g, os, out, "output") < 0) {
    free(v);
    return -1;
  }
  int64_t off_in = 0, off_out = 0, wire = 0;
  for (int r = 0; r < n; r++) {
    sc[r] = is[r] * row;
    sd[r] = off_in;
    off_in += sc[r];
    rc_[r] = os[r] * row;
    rd[r] = off_out;
    off_out += rc_[r];
    if (r != g->rank) wire += sc[r];
  }
  set_activity(name, in, g);
  if (check_agreement(g, LAB_OP_ALL_TO_ALL_SINGLE, in->dtype, row, -1, -1) < 0 ||
      (checked && splits_agree(name, g, is, os) < 0)) {
    free(v);
    return -1;
  }
  /* bytes: what this rank passed in; wire: what leaves this rank (its own block stays) */
  size_t esz = lab_dtype_size(in->dtype);
  g->stats[LAB_OP_ALL_TO_ALL_SINGLE].calls++;
  g->stats[LAB_OP_ALL_TO_ALL_SINGLE].bytes += (int64_t)lab_nbytes(in);
  g->stats[LAB_OP_ALL_TO_ALL_SINGLE].wire_bytes += wire * (int64_t)esz;
  lab_backend_work *bw = NULL;
  double t0 = lab_now(), c0 = lab_cpu_seconds();
  lab_board_set(LAB_IN_COLLECTIVE, activity, call_site);
  lab_group *bg = backend_group(g, path);
  int64_t abandoned = lab_dist_abandoned_count();
  int rc = bg ? bg->backend->all_to_all_v(bg, lab_data(in), sc, sd, lab_data(out), rc_, rd, in->dtype, work ? &bw : NULL) : -1;
  call_over(rc);
  comm_add(t0, c0);
  free(v); /* the backend copied the counts it needs to keep */
  if (rc < 0) return hold_if_abandoned(abandoned, out, in);
  return work ? start(bg, bw, work, out, in, 0) : 0;
}

static int peer_check(const char *op, lab_group *g, int peer, const char *what, int tag) {
  if (root_check(op, g, peer, what) < 0) return -1;
  if (peer == g->rank) return lab_fail(op, "%s %d is this rank itself", what, peer);
  if (tag < 0 || tag > LAB_P2P_TAG_MAX) return lab_fail(op, "tag %d is out of range (0 to %d)", tag, LAB_P2P_TAG_MAX);
  return 0;
}

int lab_send(lab_group *g, lab_tensor *t, int dst, int tag, lab_work **work) {
  const char *name = "send";
  if (member_check(name, g) < 0 || contiguous_check(name, "the", t) < 0 || peer_check(name, g, dst, "dst", tag) < 0) return -1;
  lab_coll_path path;
  if (route(name, g, t, NULL, 1, &path) < 0) return -1;
  if (path == LAB_PATH_STAGED) return staged(g, t, NULL, 0, 0, st_send, &(coll_args){.root = dst, .tag = tag}, work);
  count(g, LAB_OP_SEND, (int64_t)lab_nbytes(t), 1.0);
  set_activity("send", t, g);
  lab_group *bg = backend_group(g, path);
  if (!bg) return -1;
  return launch(bg, work, t, NULL, 0, (backend_call){LAB_OP_SEND, lab_data(t), lab_data(t), lab_numel(t), t->dtype, 0, dst, tag});
}

int lab_recv(lab_group *g, lab_tensor *t, int src, int tag, lab_work **work) {
  const char *name = "recv";
  if (member_check(name, g) < 0 || contiguous_check(name, "the", t) < 0 || peer_check(name, g, src, "src", tag) < 0) return -1;
  lab_coll_path path;
  if (route(name, g, t, NULL, 1, &path) < 0) return -1;
  if (path == LAB_PATH_STAGED) return staged(g, t, NULL, 1, 0, st_recv, &(coll_args){.root = src, .tag = tag}, work);
  count(g, LAB_OP_RECV, (int64_t)lab_nbytes(t), 0.0);
  set_activity("recv", t, g);
  lab_group *bg = backend_group(g, path);
  if (!bg) return -1;
  return launch(bg, work, t, NULL, 0, (backend_call){LAB_OP_RECV, lab_data(t), lab_data(t), lab_numel(t), t->dtype, 0, src, tag});
}

int lab_barrier(lab_group *g) {
  if (member_check("barrier", g) < 0) return -1;
  set_activity("barrier", NULL, g);
  if (check_agreement(g, LAB_OP_BARRIER, LAB_F32, 0, -1, -1) < 0) return -1;
  g->stats[LAB_OP_BARRIER].calls++;
  double t0 = lab_now(), c0 = lab_cpu_seconds();
  lab_board_set(LAB_IN_COLLECTIVE, activity, call_site);
  int rc = g->backend->barrier(g);
  call_over(rc);
  comm_add(t0, c0);
  return rc;
}
