/* The emulated CUDA runtime under the sim device: the subset of libcudart that
 * runtime/cuda/cuda_device.c uses, so that file runs on the sim (compiled a second time against
 * shim/cuda_runtime.h, where every cudaX is lab_simrt_cudaX: no symbol meets the real
 * libcudart). Two devices (LLMLAB_SIM_DEVICES overrides), memory from the sim arena
 * (device_sim.c: device pointers the host cannot dereference), and streams whose work (copies,
 * memsets, matrix products, event waits) runs on one worker thread per stream, in order. So a
 * device-to-host copy not followed by cudaStreamSynchronize leaves the host buffer unwritten,
 * as on a GPU (LLMLAB_SIMRT_DELAY_US delays each item, to make such a race show every time).
 * Host buffers are pageable, as everything llmlab hands the cuda device: a copy from the host
 * reads its source before it returns (CUDA stages a pageable source before cudaMemcpyAsync
 * returns, so the caller may free or reuse it at once), and a copy to the host is written only
 * when the stream reaches it (stricter than CUDA, whose copy to pageable memory returns when
 * done: code that reads it before a synchronize breaks once the buffer is pinned).
 * Events capture how much of their stream's queue must have run. Kernel launches (launch.c)
 * are stream work too, run by the same worker in stream order. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../device_sim.h"
#include "simrt_internal.h"

#define MAX_DEV 8

typedef struct item {
  struct item *next;
  lab_simrt_fn fn;
  void *arg;
} item;

struct CUstream_st {
  int device;
  pthread_t th;
  item *head, *tail;
  uint64_t enqueued, done; /* items */
  int error;               /* first failure since the last drain */
  int quit;
};

struct CUevent_st {
  cudaStream_t s; /* NULL: never recorded (complete) */
  uint64_t upto;  /* complete when s->done >= upto */
};

/* one lock for every queue: items are large (copies, kernels), so contention is negligible */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static __thread int cur_dev;
static __thread cudaError_t last_error;
static __thread char why[300]; /* what a refused call got wrong (cudaGetErrorString) */
static __thread int on_worker;
static cudaStream_t default_stream[MAX_DEV];
static char failure[1200];
static cudaStream_t all_streams[256]; /* for cudaDeviceSynchronize; a freed slot is NULL */
static int nall;

static int ndevices(void) {
  const char *e = getenv("LLMLAB_SIM_DEVICES");
  int n = e ? atoi(e) : 2;
  return n < 1 ? 1 : n > MAX_DEV ? MAX_DEV : n;
}

static cudaError_t fail(cudaError_t e) {
  if (e) last_error = e, why[0] = 0;
  return e;
}
/* a call refused with the reason, which cudaGetErrorString(e) gives on this thread */
static cudaError_t refuse(cudaError_t e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static cudaError_t refuse(cudaError_t e, const char *fmt, ...) {
  fail(e);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof why, fmt, ap);
  va_end(ap);
  return e;
}
int lab_simrt_on_worker(void) { return on_worker; }

void lab_simrt_note_failure(const char *text) { snprintf(failure, sizeof failure, "%s", text); }

void *lab_simrt_kview(const void *p) { return lab_sim_kview(p); }

/* ---- devices ---- */

cudaError_t cudaRuntimeGetVersion(int *v) {
  *v = 12080; /* reported as the toolkit the shim follows */
  return cudaSuccess;
}
cudaError_t cudaGetDeviceCount(int *n) {
  *n = ndevices();
  return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int device) {
  if (device < 0 || device >= ndevices()) return fail(cudaErrorInvalidDevice);
  memset(p, 0, sizeof *p);
  snprintf(p->name, sizeof p->name, "llmlab sim %d (SIMT interpreter)", device);
  p->major = 9;
  p->totalGlobalMem = lab_sim_arena_bytes();
  p->multiProcessorCount = 1;
  return cudaSuccess;
}
cudaError_t cudaDeviceGetPCIBusId(char *bus, int len, int device) {
  if (device < 0 || device >= ndevices()) return fail(cudaErrorInvalidDevice);
  /* distinct per device, as a bus id is, and per process: each process emulates its own GPUs,
   * so two ranks on sim:0 are on two GPUs (NCCL's duplicate-GPU rule does not apply) */
  snprintf(bus, (size_t)len, "sim-%ld:%d", (long)getpid(), device);
  return cudaSuccess;
}
const char *cudaGetErrorString(cudaError_t e) {
  switch (e) {
  case cudaSuccess: return "no error";
  case cudaErrorInvalidValue: return why[0] ? why : "invalid argument";
  case cudaErrorMemoryAllocation: return "out of memory";
  case cudaErrorInvalidDevice: return "invalid device ordinal";
  case cudaErrorInvalidResourceHandle: return "invalid resource handle";
  case cudaErrorNotReady: return "device not ready";
  case cudaErrorMisalignedAddress: return "misaligned address";
  case cudaErrorLaunchFailure: return failure[0] ? failure : "unspecified launch failure";
  default: return "unknown error (sim)";
  }
}
cudaError_t cudaGetLastError(void) {
  cudaError_t e = last_error;
  last_error = cudaSuccess;
  return e;
}
cudaError_t cudaSetDevice(int device) {
  if (device < 0 || device >= ndevices()) return fail(cudaErrorInvalidDevice);
  cur_dev = device;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int *device) {
  *device = cur_dev;
  return cudaSuccess;
}

/* ---- memory: the sim arena; sizes kept here since the arena frees by size. Memory the
 * caching allocator takes (lab_simrt_in_allocator, alloc.c) is not told to memcheck: its
 * blocks are, as they are handed out, so an overrun past a tensor is still caught. ---- */

typedef struct block {
  struct block *next;
  void *p;
  size_t n;
  int noted;
  int device;
} block;
static block *blocks;
static size_t in_use;
__thread int lab_simrt_in_allocator;

cudaError_t cudaMalloc(void **p, size_t n) {
  if (!n) n = 1;
  int note = !lab_simrt_in_allocator;
  void *d = lab_sim_arena_alloc(n, note);
  block *b = malloc(sizeof *b);
  if (!d || !b) {
    if (d) lab_sim_arena_free(d, n, note);
    free(b);
    return fail(cudaErrorMemoryAllocation);
  }
  *b = (block){NULL, d, n, note, cur_dev};
  pthread_mutex_lock(&mu);
  b->next = blocks;
  blocks = b;
  in_use += b->n;
  pthread_mutex_unlock(&mu);
  *p = d;
  return cudaSuccess;
}

cudaError_t cudaFree(void *p) {
  if (!p) return cudaSuccess;
  cudaDeviceSynchronize(); /* as cudaFree does: no queued work may still use it */
  pthread_mutex_lock(&mu);
  block **q = &blocks;
  while (*q && (*q)->p != p) q = &(*q)->next;
  block *b = *q;
  if (b) {
    *q = b->next;
    in_use -= b->n;
  }
  pthread_mutex_unlock(&mu);
  if (!b) return fail(cudaErrorInvalidValue);
  lab_sim_arena_free(p, b->n, b->noted);
  free(b);
  return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *a, const void *p) {
  *a = (struct cudaPointerAttributes){cudaMemoryTypeUnregistered, -2, NULL, (void *)p};
  pthread_mutex_lock(&mu);
  for (block *b = blocks; b; b = b->next)
    if ((const char *)p >= (const char *)b->p && (const char *)p < (const char *)b->p + b->n) {
      *a = (struct cudaPointerAttributes){cudaMemoryTypeDevice, b->device, (void *)p, NULL};
      break;
    }
  pthread_mutex_unlock(&mu);
  return cudaSuccess;
}

int lab_simrt_device_of(const void *p) {
  struct cudaPointerAttributes a;
  cudaPointerGetAttributes(&a, p);
  return a.type == cudaMemoryTypeDevice ? a.device : -1;
}

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
  size_t total = lab_sim_arena_bytes();
  pthread_mutex_lock(&mu);
  *free_bytes = total - in_use;
  pthread_mutex_unlock(&mu);
  *total_bytes = total;
  return cudaSuccess;
}

/* ---- streams ---- */

static void *worker(void *arg) {
  cudaStream_t s = arg;
  on_worker = 1;
  const char *d = getenv("LLMLAB_SIMRT_DELAY_US");
  long delay_us = d ? atol(d) : 0;
  pthread_mutex_lock(&mu);
  for (;;) {
    while (!s->head && !s->quit) pthread_cond_wait(&changed, &mu);
    if (!s->head) break;
    item *it = s->head;
    pthread_mutex_unlock(&mu);
    if (delay_us > 0) nanosleep(&(struct timespec){delay_us / 1000000, delay_us % 1000000 * 1000}, NULL);
    int e = it->fn(it->arg);
    free(it->arg);
    pthread_mutex_lock(&mu);
    s->head = it->next;
    if (!s->head) s->tail = NULL;
    free(it);
    if (e && !s->error) s->error = e;
    s->done++;
    pthread_cond_broadcast(&changed);
  }
  pthread_mutex_unlock(&mu);
  return NULL;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *out, unsigned flags) {
  (void)flags; /* every sim stream is non-blocking: there is no legacy default stream to sync with */
  cudaStream_t s = calloc(1, sizeof *s);
  if (!s) return fail(cudaErrorMemoryAllocation);
  s->device = cur_dev;
  if (pthread_create(&s->th, NULL, worker, s) != 0) {
    free(s);
    return fail(cudaErrorMemoryAllocation);
  }
  pthread_mutex_lock(&mu);
  int i = 0;
  while (i < nall && all_streams[i]) i++;
  if (i < 256) {
    all_streams[i] = s;
    if (i == nall) nall++;
  }
  pthread_mutex_unlock(&mu);
  *out = s;
  return cudaSuccess;
}

int lab_simrt_stream_device(cudaStream_t s) { return s ? s->device : cur_dev; }

static cudaStream_t resolve(cudaStream_t s) {
  if (s) return s;
  pthread_mutex_lock(&mu);
  cudaStream_t d = default_stream[cur_dev];
  pthread_mutex_unlock(&mu);
  if (d) return d;
  if (cudaStreamCreateWithFlags(&d, 0) != cudaSuccess) return NULL;
  pthread_mutex_lock(&mu);
  if (default_stream[cur_dev]) { /* another thread made it first: keep one */
    pthread_mutex_unlock(&mu);
    cudaStreamDestroy(d);
    pthread_mutex_lock(&mu);
  } else default_stream[cur_dev] = d;
  d = default_stream[cur_dev];
  pthread_mutex_unlock(&mu);
  return d;
}

/* A host wait for `changed` (mu held): where NCCL requests are pending, this thread drives
 * them while it waits (the stream may wait for an NCCL item: nccl_mpi.c) */
static void host_wait(void) {
  if (!lab_simrt_nccl_pending()) {
    pthread_cond_wait(&changed, &mu);
    return;
  }
  pthread_mutex_unlock(&mu);
  lab_simrt_nccl_progress();
  pthread_mutex_lock(&mu);
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  t.tv_nsec += 200000;
  if (t.tv_nsec >= 1000000000) t.tv_sec++, t.tv_nsec -= 1000000000;
  pthread_cond_timedwait(&changed, &mu, &t);
}

cudaError_t lab_simrt_enqueue(cudaStream_t s, lab_simrt_fn fn, void *arg) {
  item *it = malloc(sizeof *it);
  if (!(s = resolve(s)) || !it) {
    free(it);
    free(arg);
    return fail(cudaErrorMemoryAllocation);
  }
  *it = (item){NULL, fn, arg};
  pthread_mutex_lock(&mu);
  if (s->tail) s->tail->next = it;
  else s->head = it;
  s->tail = it;
  s->enqueued++;
  pthread_cond_broadcast(&changed);
  pthread_mutex_unlock(&mu);
  return cudaSuccess;
}

cudaError_t lab_simrt_drain(cudaStream_t s) {
  if (!(s = resolve(s))) return fail(cudaErrorMemoryAllocation);
  pthread_mutex_lock(&mu);
  uint64_t upto = s->enqueued;
  while (s->done < upto) host_wait();
  cudaError_t e = (cudaError_t)s->error;
  s->error = 0;
  pthread_mutex_unlock(&mu);
  return fail(e);
}

/* A kernel fault is sticky as in a CUDA context, here until the next synchronize reports it
 * (most kernel ops return nothing, so the copy that reads their result fails instead) */
static int sticky;
void lab_simrt_set_sticky(int e) {
  pthread_mutex_lock(&mu);
  if (!sticky) sticky = e;
  pthread_mutex_unlock(&mu);
}
int lab_simrt_sticky(void) {
  pthread_mutex_lock(&mu);
  int e = sticky;
  pthread_mutex_unlock(&mu);
  return e;
}

/* The host waits below are counted (lab.cuda.sim_host_syncs): where a GPU's host would stall on
 * its stream. The sim's own waits (an NCCL call reaching its stream, lab.sim's readers waiting
 * for queued kernels, integer products on the cpu's kernels) are not. */
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  lab_sim_note_host_sync();
  cudaError_t e = lab_simrt_drain(s);
  pthread_mutex_lock(&mu);
  if (!e && sticky) e = (cudaError_t)sticky;
  sticky = 0;
  pthread_mutex_unlock(&mu);
  return fail(e);
}

cudaError_t cudaStreamDestroy(cudaStream_t s) {
  if (!s) return fail(cudaErrorInvalidResourceHandle);
  lab_simrt_drain(s); /* CUDA lets queued work finish; so does this */
  pthread_mutex_lock(&mu);
  s->quit = 1;
  for (int i = 0; i < nall; i++)
    if (all_streams[i] == s) all_streams[i] = NULL;
  pthread_cond_broadcast(&changed);
  pthread_mutex_unlock(&mu);
  pthread_join(s->th, NULL);
  free(s);
  return cudaSuccess;
}

/* waits for every stream (of every device: the sim's devices share one arena) */
static void sync_all(void) {
  pthread_mutex_lock(&mu);
  for (int i = 0; i < nall; i++)
    while (all_streams[i] && all_streams[i]->done < all_streams[i]->enqueued) host_wait();
  pthread_mutex_unlock(&mu);
}
/* as sync_all, but gives up after `seconds`: lab_simt's readers (the coverage table at exit,
 * lab.sim.stats) must not hang a process whose stream waits on an NCCL peer that is gone */
int lab_simrt_sync_all_for(double seconds) {
  struct timespec end;
  clock_gettime(CLOCK_REALTIME, &end);
  end.tv_sec += (time_t)seconds;
  int ok = 1;
  pthread_mutex_lock(&mu);
  for (int i = 0; i < nall && ok; i++)
    while (ok && all_streams[i] && all_streams[i]->done < all_streams[i]->enqueued) {
      if (lab_simrt_nccl_pending()) {
        pthread_mutex_unlock(&mu);
        lab_simrt_nccl_progress();
        pthread_mutex_lock(&mu);
      }
      struct timespec t;
      clock_gettime(CLOCK_REALTIME, &t);
      if (t.tv_sec > end.tv_sec || (t.tv_sec == end.tv_sec && t.tv_nsec >= end.tv_nsec)) ok = 0;
      t.tv_nsec += 1000000;
      if (t.tv_nsec >= 1000000000) t.tv_sec++, t.tv_nsec -= 1000000000;
      pthread_cond_timedwait(&changed, &mu, &t);
    }
  pthread_mutex_unlock(&mu);
  return ok ? 0 : -1;
}

cudaError_t cudaDeviceSynchronize(void) {
  lab_sim_note_host_sync();
  sync_all();
  return cudaSuccess;
}

/* ---- copies and memsets ---- */

typedef struct {
  void *dst;
  const void *src;
  size_t n;
  int byte, is_set;
} move;

static int run_move(void *arg) {
  move *m = arg;
  if (m->is_set) memset(lab_simrt_kview(m->dst), m->byte, m->n);
  else memcpy(lab_simrt_kview(m->dst), lab_simrt_kview(m->src), m->n); /* never overlapping: refused */
  return 0;
}

static int on_device(const void *p) {
  struct cudaPointerAttributes a;
  cudaPointerGetAttributes(&a, p);
  return a.type == cudaMemoryTypeDevice;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t s) {
  (void)kind; /* the arena tells device pointers from host ones */
  /* CUDA's contract: the ranges of a copy must not overlap (its kernels copy in any order), so
   * a device-to-device copy between overlapping ranges is refused rather than done as memmove */
  const char *d = dst, *c = src;
  if (n > 0 && d < c + n && c < d + n && on_device(dst) && on_device(src))
    return refuse(cudaErrorInvalidValue,
                  "invalid argument (sim: cudaMemcpyAsync device-to-device of %zu bytes from %p to %p: the ranges "
                  "overlap by %zu bytes, which CUDA forbids)",
                  n, src, dst, (size_t)(d < c ? d + n - c : c + n - d));
  /* a host source is staged now, as CUDA stages pageable memory before returning: the caller's
   * buffer (often a temporary, freed right after) is not read again */
  int stage = n > 0 && !on_device(src) && on_device(dst);
  move *m = malloc(sizeof *m + (stage ? n : 0));
  if (!m) return fail(cudaErrorMemoryAllocation);
  *m = (move){dst, src, n, 0, 0};
  if (stage) m->src = memcpy(m + 1, src, n);
  return lab_simrt_enqueue(s, run_move, m);
}

cudaError_t cudaMemsetAsync(void *dst, int byte, size_t n, cudaStream_t s) {
  move *m = malloc(sizeof *m);
  if (!m) return fail(cudaErrorMemoryAllocation);
  *m = (move){dst, NULL, n, byte, 1};
  return lab_simrt_enqueue(s, run_move, m);
}

/* ---- events ---- */

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags) {
  (void)flags;
  *e = calloc(1, sizeof **e);
  return *e ? cudaSuccess : fail(cudaErrorMemoryAllocation);
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
  free(e); /* waits already enqueued captured the stream and count */
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  if (!e) return fail(cudaErrorInvalidResourceHandle);
  if (!(s = resolve(s))) return fail(cudaErrorMemoryAllocation);
  pthread_mutex_lock(&mu);
  e->s = s;
  e->upto = s->enqueued;
  pthread_mutex_unlock(&mu);
  return cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t e) {
  lab_simrt_nccl_progress(); /* a polled NCCL event (nccl.c's guarded waits) moves on */
  pthread_mutex_lock(&mu);
  int ready = !e->s || e->s->done >= e->upto;
  pthread_mutex_unlock(&mu);
  return ready ? cudaSuccess : cudaErrorNotReady;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  lab_sim_note_host_sync();
  pthread_mutex_lock(&mu);
  while (e->s && e->s->done < e->upto) host_wait();
  pthread_mutex_unlock(&mu);
  return cudaSuccess;
}

typedef struct {
  cudaStream_t s;
  uint64_t upto;
} wait_item;

static int run_wait(void *arg) {
  wait_item *w = arg;
  pthread_mutex_lock(&mu);
  while (w->s->done < w->upto) pthread_cond_wait(&changed, &mu);
  pthread_mutex_unlock(&mu);
  return 0;
}

/* LLMLAB_SIMRT_DROP_WAITS=1 makes every stream wait a no-op: a planted bug (a caller's missing
 * cudaStreamWaitEvent) that tests/sim/test_stream_order.lua must catch as stale data */
static int drop_waits(void) {
  static int v = -1;
  if (v < 0) {
    const char *e = getenv("LLMLAB_SIMRT_DROP_WAITS");
    v = e && atoi(e) > 0;
  }
  return v;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags) {
  (void)flags;
  if (!e) return fail(cudaErrorInvalidResourceHandle);
  if (drop_waits()) return cudaSuccess;
  pthread_mutex_lock(&mu);
  wait_item w = {e->s, e->upto};
  pthread_mutex_unlock(&mu);
  if (!w.s) return cudaSuccess; /* never recorded: nothing to wait for */
  wait_item *p = malloc(sizeof *p);
  if (!p) return fail(cudaErrorMemoryAllocation);
  *p = w;
  return lab_simrt_enqueue(s, run_wait, p);
}

/* the sim's own wait (integer products on the cpu's kernels): not a GPU's, so not counted */
int lab_simrt_sync_all(void) {
  sync_all();
  return 0;
}
