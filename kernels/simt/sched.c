/* The block scheduler: a launch's blocks are spread over the OS workers; each block's threads
 * are fibers run one at a time in an order shuffled from the seed, each until it reaches a
 * barrier, a warp operation or its end. A barrier opens when every thread of the block waits
 * at one; a warp operation completes when every lane its mask names has arrived. Anything
 * else (a thread that ended while others wait, lanes at different operations, a wait nobody
 * can end) is a synccheck report and the block is abandoned, as a GPU would hang or fault. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "internal.h"

__thread struct lab_simt_thread_pub *lab_simt_self;
__thread simt_worker *lab_simt_worker_self;

#define STACK_SIZE ((size_t)64 << 10) /* per thread; pages appear only where used */
#define MAX_SMEM ((size_t)227 << 10)  /* an H100/H200 block's opt-in maximum */

static uint64_t seed = 1;
static int nworkers = 1;

void lab_simt_set_seed(uint64_t s) { seed = s; }
void lab_simt_set_workers(int n) { nworkers = n < 1 ? 1 : (n > 64 ? 64 : n); }

static uint64_t mix(uint64_t x) { /* splitmix64 */
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

static simt_worker *worker(void) {
  simt_worker *w = lab_simt_worker_self;
  if (w) return w;
  w = calloc(1, sizeof *w);
  if (!w) abort();
  w->stack_size = STACK_SIZE;
  simt_worker_tls(w);
  return lab_simt_worker_self = w;
}

static int reserve_threads(simt_worker *w, int n) {
  if (n <= w->cap_thr) return 0;
  if (w->stacks) munmap(w->stacks, w->stack_size * (size_t)w->cap_thr);
  free(w->thr);
  w->thr = calloc((size_t)n, sizeof *w->thr);
  w->stacks = mmap(NULL, w->stack_size * (size_t)n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
  if (!w->thr || w->stacks == MAP_FAILED) {
    w->stacks = NULL;
    w->cap_thr = 0;
    return -1;
  }
  w->cap_thr = n;
  return 0;
}

/* ---- a thread's life ---- */

static void fiber_main(void) {
  simt_worker *w = lab_simt_worker_self;
  simt_thr *t = simt_cur();
  lab_fiber_started(&t->f, &w->os);
  const lab_simt_launch_desc *d = w->blk->d;
  d->entry(d->args);
  t = simt_cur();
  t->state = T_DONE;
  simt_cpa_drop(t);
  simt_blk *b = w->blk;
  simt_warp *wp = &b->warps[t->warp];
  if (wp->arrived && (wp->mask >> t->lane & 1u)) {
    simt_hazard(t, "synccheck", (uintptr_t)wp->site,
                "thread ended while lanes 0x%08x of its warp wait for it at a warp operation (mask 0x%08x)",
                wp->arrived, wp->mask);
    b->aborted = 1;
  }
  lab_fiber_exit_to(&t->f, &w->os);
}

static void yield(simt_thr *t) {
  simt_worker *w = lab_simt_worker_self;
  lab_fiber_switch(&t->f, &w->os);
  lab_simt_self = &t->pub;
}

void lab_simt_syncthreads(void) {
  simt_thr *t = simt_cur();
  t->site = __builtin_return_address(0);
  t->state = T_BARRIER;
  yield(t);
}

void simt_warp_op(int op, unsigned mask, const void *in, void *out, size_t size, int arg, const void *site,
                  void (*compute)(simt_warp *w)) {
  simt_thr *t = simt_cur();
  simt_blk *b = simt_blk_of(t);
  simt_warp *w = &b->warps[t->warp];
  unsigned me = 1u << t->lane;
  int lanes = b->n - t->warp * 32 < 32 ? b->n - t->warp * 32 : 32;
  unsigned exist = lanes == 32 ? 0xffffffffu : ((1u << lanes) - 1);
  if (!(mask & me) || (mask & ~exist)) {
    simt_hazard(t, "synccheck", (uintptr_t)site, "warp operation with mask 0x%08x %s", mask,
                !(mask & me) ? "that does not name the calling lane" : "naming lanes the block does not have");
    b->aborted = 1;
    mask = (mask | me) & exist;
  }
  if (w->arrived && (w->op != op || w->mask != mask || w->size != size || w->arg != arg)) {
    simt_hazard(t, "synccheck", (uintptr_t)site,
                "lanes of one warp at different warp operations (mask 0x%08x here, 0x%08x waiting at %p)", mask, w->mask,
                w->site);
    b->aborted = 1;
    t->state = T_WARP;
    yield(t); /* never resumed: the block is abandoned */
    return;
  }
  for (int l = 0; l < lanes; l++)
    if ((mask >> l & 1u) && b->t[t->warp * 32 + l].state == T_DONE) {
      simt_hazard(t, "synccheck", (uintptr_t)site, "warp operation with mask 0x%08x names lane %d, which has ended",
                  mask, l);
      b->aborted = 1;
      t->state = T_WARP;
      yield(t);
      return;
    }
  if (!w->arrived) {
    w->op = op, w->mask = mask, w->size = size, w->arg = arg, w->site = site;
  }
  w->in[t->lane] = in;
  w->out[t->lane] = out;
  w->arrived |= me;
  if (w->arrived == w->mask) {
    compute(w);
    for (int l = 0; l < 32; l++)
      if (w->mask >> l & 1u) b->t[t->warp * 32 + l].state = T_RUNNABLE;
    w->arrived = 0;
    if (w->mask == exist) simt_perf_flush_warp(b, t->warp);
    return;
  }
  t->state = T_WARP;
  t->site = site;
  yield(t);
}

/* ---- a block ---- */

static void shuffle(int *ord, int n, uint64_t *rng) {
  if (!seed) return;
  for (int i = n - 1; i > 0; i--) {
    *rng = mix(*rng);
    int j = (int)(*rng % (uint64_t)(i + 1));
    int x = ord[i];
    ord[i] = ord[j];
    ord[j] = x;
  }
}

static void stuck_report(simt_blk *b) {
  int at_bar = 0, done = 0, first_bar = -1, first_done = -1;
  for (int i = 0; i < b->n; i++) {
    if (b->t[i].state == T_BARRIER && at_bar++ == 0) first_bar = i;
    if (b->t[i].state == T_DONE && done++ == 0) first_done = i;
  }
  for (int wi = 0; wi < b->nwarps; wi++) {
    simt_warp *w = &b->warps[wi];
    if (w->arrived) {
      int l = __builtin_ctz(w->arrived);
      simt_hazard(&b->t[wi * 32 + l], "synccheck", (uintptr_t)w->site,
                  "warp %d waits at a warp operation (mask 0x%08x) that lanes 0x%08x never reach", wi, w->mask,
                  w->mask & ~w->arrived);
      return;
    }
  }
  char tb[48];
  simt_hazard(&b->t[first_bar], "synccheck", (uintptr_t)b->t[first_bar].site,
              "__syncthreads reached by %d of %d threads; %d ended without it (thread %s first)", at_bar, b->n, done,
              first_done >= 0 ? simt_dim_str(simt_tidx(b, first_done), tb) : "?");
}

static void run_block(simt_worker *w, const lab_simt_launch_desc *d, long linear) {
  int n = (int)(d->block.x * d->block.y * d->block.z);
  simt_blk b = {0};
  b.pub.bdim = d->block;
  b.pub.gdim = d->grid;
  b.pub.bidx = (lab_simt_dim){(unsigned)(linear % d->grid.x), (unsigned)(linear / d->grid.x % d->grid.y),
                              (unsigned)(linear / ((long)d->grid.x * d->grid.y))};
  b.d = d;
  b.w = w;
  b.n = n;
  b.nwarps = (n + 31) / 32;
  b.warps = w->warps;
  memset(w->warps, 0, sizeof w->warps);
  b.t = w->thr;
  b.dyn_n = d->dyn_smem;
  b.pub.dyn_smem = d->dyn_smem ? w->dyn : NULL;
  w->blk = &b;
  w->epoch++;
  w->rng = mix(seed ^ mix((uint64_t)linear) ^ mix((uint64_t)(uintptr_t)d->kernel_id << 32));
  for (int i = 0; i < n; i++) {
    simt_thr *t = &w->thr[i];
    int nlog = 0, cap = t->caplog, capcpa = t->capcpa;
    simt_access *log = t->log;
    simt_cpa *cpa = t->cpa;
    memset(t, 0, sizeof *t);
    t->log = log, t->caplog = cap, t->nlog = nlog;
    t->cpa = cpa, t->capcpa = capcpa;
    t->tid = i, t->lane = i & 31, t->warp = i >> 5;
    t->pub.tidx = simt_tidx(&b, i);
    t->pub.blk = &b.pub;
  }
  /* Stacks are handed out when a thread first runs and taken back when it ends, so kernels
   * whose threads never wait run every thread on the same warm stack. */
  int free_stacks[1024], nfree = 0;
  for (int i = n - 1; i >= 0; i--) free_stacks[nfree++] = i;
  int ord[1024];
  long barriers = 0;
  for (;;) {
    int m = 0;
    for (int i = 0; i < n; i++)
      if (w->thr[i].state == T_RUNNABLE) ord[m++] = i;
    if (m == 0) {
      int at_bar = 0, done = 0;
      for (int i = 0; i < n; i++) at_bar += w->thr[i].state == T_BARRIER, done += w->thr[i].state == T_DONE;
      if (done == n) break;
      if (at_bar == n) { /* the barrier opens: a new epoch for racecheck */
        for (int wi = 0; wi < b.nwarps; wi++) simt_perf_flush_warp(&b, wi);
        w->epoch++;
        barriers++;
        for (int i = 0; i < n; i++) w->thr[i].state = T_RUNNABLE;
        continue;
      }
      stuck_report(&b);
      break;
    }
    shuffle(ord, m, &w->rng);
    for (int k = 0; k < m && !b.aborted; k++) {
      simt_thr *t = &w->thr[ord[k]];
      if (t->state != T_RUNNABLE) continue;
      if (!t->f.stack) {
        t->f.stack = w->stacks + (size_t)free_stacks[--nfree] * w->stack_size;
        t->f.stack_size = w->stack_size;
        lab_fiber_init(&t->f, fiber_main);
      }
      lab_simt_self = &t->pub;
      lab_fiber_switch(&w->os, &t->f);
      lab_simt_self = NULL;
      if (t->state == T_DONE) free_stacks[nfree++] = (int)((t->f.stack - w->stacks) / (ptrdiff_t)w->stack_size);
    }
    if (b.aborted) break;
  }
  for (int wi = 0; wi < b.nwarps; wi++) simt_perf_flush_warp(&b, wi);
  for (int i = 0; i < n; i++) simt_cpa_drop(&w->thr[i]); /* an abandoned block's copies in flight */
  simt_block_barriers(d, barriers);
  w->blk = NULL;
}

/* ---- the workers ---- */

static struct {
  pthread_mutex_t mu;
  pthread_cond_t go, done;
  const lab_simt_launch_desc *d;
  uint64_t gen;
  int busy, started;
  atomic_long next;
  long nblocks;
} job = {.mu = PTHREAD_MUTEX_INITIALIZER, .go = PTHREAD_COND_INITIALIZER, .done = PTHREAD_COND_INITIALIZER};
static pthread_mutex_t launch_mu = PTHREAD_MUTEX_INITIALIZER;

static int prepare(simt_worker *w, const lab_simt_launch_desc *d) {
  int n = (int)(d->block.x * d->block.y * d->block.z);
  if (reserve_threads(w, n) < 0) return -1;
  if (d->dyn_smem > w->dyn_cap) {
    free(w->dyn);
    w->dyn = aligned_alloc(128, (d->dyn_smem + 127) & ~(size_t)127);
    w->dyn_cap = w->dyn ? d->dyn_smem : 0;
    if (!w->dyn) return -1;
  }
  simt_shadow_reserve(w, d->dyn_smem);
  return 0;
}

static void run_blocks(simt_worker *w, const lab_simt_launch_desc *d) {
  simt_memcheck_forget();
  if (prepare(w, d) < 0) return;
  for (long b; (b = atomic_fetch_add(&job.next, 1)) < job.nblocks;) run_block(w, d, b);
}

static void *worker_main(void *arg) {
  (void)arg;
  simt_worker *w = worker();
  uint64_t seen = 0;
  pthread_mutex_lock(&job.mu);
  for (;;) {
    while (job.gen == seen) pthread_cond_wait(&job.go, &job.mu);
    seen = job.gen;
    const lab_simt_launch_desc *d = job.d;
    pthread_mutex_unlock(&job.mu);
    run_blocks(w, d);
    pthread_mutex_lock(&job.mu);
    if (--job.busy == 0) pthread_cond_signal(&job.done);
  }
  return NULL;
}

int lab_simt_check_config(const lab_simt_launch_desc *d) {
  long nb = (long)d->grid.x * d->grid.y * d->grid.z;
  long nt = (long)d->block.x * d->block.y * d->block.z;
  if (nb <= 0 || nt <= 0 || nt > 1024 || d->block.z > 64 || d->grid.y > 65535 || d->grid.z > 65535 ||
      d->dyn_smem > MAX_SMEM)
    return LAB_SIMT_INVALID_CONFIG;
  return LAB_SIMT_OK;
}

/* ---- the queue launches go to (runtime/simrt's streams), and its wait ---- */
static _Atomic(lab_simt_queue_fn) queue_fn;
static void (*_Atomic queue_sync)(void);
void lab_simt_set_queue(lab_simt_queue_fn queue, void (*sync)(void)) {
  atomic_store(&queue_sync, sync);
  atomic_store(&queue_fn, queue);
}
lab_simt_queue_fn lab_simt_queue(void) { return atomic_load(&queue_fn); }
void lab_simt_sync_queued(void) {
  void (*sync)(void) = atomic_load(&queue_sync);
  if (sync) sync();
}

int lab_simt_launch(const lab_simt_launch_desc *d) {
  long nb = (long)d->grid.x * d->grid.y * d->grid.z;
  if (lab_simt_check_config(d)) return LAB_SIMT_INVALID_CONFIG;
  pthread_mutex_lock(&launch_mu);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  simt_coverage_count(d);
  simt_launch_begin();
  simt_worker *w = worker();
  job.d = d;
  job.nblocks = nb;
  atomic_store(&job.next, 0);
  int helpers = nworkers - 1 < nb - 1 ? nworkers - 1 : (int)(nb - 1);
  pthread_mutex_lock(&job.mu);
  while (job.started < helpers) {
    pthread_t th;
    if (pthread_create(&th, NULL, worker_main, NULL) != 0) break;
    pthread_detach(th);
    job.started++;
  }
  if (helpers > job.started) helpers = job.started;
  /* every started worker takes part (idle ones find no block left) */
  job.busy = job.started;
  job.gen++;
  pthread_cond_broadcast(&job.go);
  pthread_mutex_unlock(&job.mu);
  run_blocks(w, d);
  pthread_mutex_lock(&job.mu);
  while (job.busy > 0) pthread_cond_wait(&job.done, &job.mu);
  pthread_mutex_unlock(&job.mu);
  long hz = simt_launch_hazards();
  clock_gettime(CLOCK_MONOTONIC, &t1);
  simt_coverage_time(d, (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
  pthread_mutex_unlock(&launch_mu);
  return hz ? LAB_SIMT_LAUNCH_FAILURE : LAB_SIMT_OK;
}
