/* The launch of a collective's backend call and the work objects of work.h / dist.h. */
#include "work.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../error.h"
#include "../ewise.h"
#include "../transfer.h"
#include "board.h"
#include "guard.h"
#include "held.h"

static double comm_seconds; /* time spent inside collectives and waits: the profiler's "comm" */
static double comm_cpu;     /* this process's CPU time in the same places (polling, copies, reductions) */
static char call_site[96];
static char activity[160]; /* what the board shows while this rank waits in a collective */

void lab_dist_set_call_site(const char *site) { snprintf(call_site, sizeof call_site, "%s", site ? site : ""); }
const char *lab_coll_call_site(void) { return call_site; }

/* point-to-point calls are not counted as collectives (fail fast counts those) */
void lab_coll_set_activity(const char *op, lab_tensor *t, lab_group *g) {
  if (strcmp(op, "send") != 0 && strcmp(op, "recv") != 0) lab_board_count_collective(g->world_ranks, g->size);
  if (t) snprintf(activity, sizeof activity, "%s(%lld x %s) on %s", op, (long long)lab_numel(t), lab_dtype_name(t->dtype), g->name);
  else snprintf(activity, sizeof activity, "%s on %s", op, g->name);
}

void lab_coll_board_waiting(void) { lab_board_set(LAB_IN_COLLECTIVE, activity, call_site); }

void lab_coll_count(lab_group *g, lab_coll_op op, int64_t bytes, double wire_factor) {
  g->stats[op].calls++;
  g->stats[op].bytes += bytes;
  g->stats[op].wire_bytes += (int64_t)((double)bytes * wire_factor + 0.5);
}

double lab_coll_ring(lab_group *g) { return g->size > 1 ? (double)(g->size - 1) / g->size : 0; }

double lab_dist_comm_seconds(void) { return comm_seconds; }
double lab_dist_comm_cpu_seconds(void) { return comm_cpu; }

/* the wall and CPU time since (t0, c0) were spent communicating */
static void comm_add(double t0, double c0) {
  comm_seconds += lab_now() - t0;
  comm_cpu += lab_cpu_seconds() - c0;
}

/* ---- the work object ---- */

static int start(lab_group *g, lab_backend_work *bw, lab_work **work, lab_tensor *k0, lab_tensor *k1, int avg) {
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

lab_work *lab_coll_work_wrap(lab_group *g, lab_work *inner, lab_tensor *keep0, lab_tensor *keep1,
                             lab_tensor *back0, lab_tensor *back1) {
  lab_work *w = calloc(1, sizeof *w);
  if (!w) {
    lab_fail("async", "out of memory");
    return NULL;
  }
  w->group = g;
  lab_dist_group_retain(g);
  w->inner = inner;
  w->keep[0] = keep0;
  w->keep[1] = keep1;
  lab_tensor *backs[2] = {back0, back1}, *srcs[2] = {keep0, keep1};
  for (int i = 0; i < 2; i++)
    if (backs[i]) {
      w->back[i] = backs[i];
      w->back_src[i] = srcs[i];
      lab_tensor_retain(backs[i]);
    }
  return w;
}

static int finish_avg(lab_tensor *t, int divisor) {
  lab_tensor *d = lab_tensor_scalar(LAB_F64, (double)divisor);
  if (!d) return -1;
  int rc = lab_binary_(LAB_DIV, t, d);
  lab_tensor_release(d);
  return rc;
}

/* after a backend call, back in Lua; a failed one (its wait given up) keeps showing the wait
 * until the next line or call: the other waits' watchdogs fire a moment later, and their
 * reports must show this rank in the collective, not running Lua (multinode, rank 0's report) */
static void call_over(int rc) {
  if (rc >= 0) lab_board_set(LAB_RUNNING, "", call_site);
}

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
  if (w->group->wait->guarded) {
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

/* ---- the launch ---- */

/* c on a backend with one slot for every collective (MPI), else on its per-op slots (NCCL) */
static int backend_post(lab_group *bg, const lab_coll_call *c, lab_backend_work **bw) {
  const lab_comm_backend *b = bg->backend;
  if (b->collective) return b->collective(bg, c, bw);
  switch (c->op) {
  case LAB_OP_ALL_REDUCE: return b->all_reduce(bg, c->send, c->recv, c->count, c->dt, (lab_redop)c->redop, bw);
  case LAB_OP_BROADCAST: return b->broadcast(bg, c->recv, c->count, c->dt, c->peer, bw);
  case LAB_OP_REDUCE: return b->reduce(bg, c->send, c->recv, c->count, c->dt, (lab_redop)c->redop, c->peer, bw);
  case LAB_OP_ALL_GATHER: return b->all_gather(bg, c->send, c->recv, c->count, c->dt, bw);
  case LAB_OP_REDUCE_SCATTER: return b->reduce_scatter(bg, c->send, c->recv, c->count, c->dt, (lab_redop)c->redop, bw);
  case LAB_OP_ALL_TO_ALL: return b->all_to_all(bg, c->send, c->recv, c->count, c->dt, bw);
  case LAB_OP_ALL_TO_ALL_SINGLE: return b->all_to_all_v(bg, c->send, c->v[0], c->v[1], c->recv, c->v[2], c->v[3], c->dt, bw);
  case LAB_OP_SEND: return b->send(bg, c->send, c->count, c->dt, c->peer, c->tag, bw);
  case LAB_OP_RECV: return b->recv(bg, c->recv, c->count, c->dt, c->peer, c->tag, bw);
  case LAB_OP_BARRIER: return b->barrier(bg);
  default: return lab_fail(lab_coll_name((lab_coll_op)c->op), "the %s backend has no such call (internal error)", b->name);
  }
}

int lab_coll_launch(lab_group *bg, lab_work **work, lab_tensor *k0, lab_tensor *k1, int avg, lab_coll_call c) {
  lab_backend_work *bw = NULL;
  double t0 = lab_now(), c0 = lab_cpu_seconds();
  int64_t abandoned = lab_dist_abandoned_count();
  lab_coll_board_waiting();
  c.name = lab_coll_name((lab_coll_op)c.op);
  int rc = backend_post(bg, &c, work ? &bw : NULL);
  call_over(rc);
  comm_add(t0, c0);
  if (rc < 0) {
    /* a blocking call whose wait was given up leaves its request to recovery: the tensors it
     * reads and writes stay alive until then */
    if (lab_dist_abandoned_count() != abandoned) {
      lab_dist_hold_tensor(k0);
      lab_dist_hold_tensor(k1);
    }
    return -1;
  }
  if (work) return start(bg, bw, work, k0, k1, avg);
  if (avg > 0) return finish_avg(k0, avg);
  return 0;
}
