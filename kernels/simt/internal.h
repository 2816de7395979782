/* The interpreter's own structures, shared by its files: threads (fibers), blocks, the OS
 * workers that run blocks, the shadow of shared memory, and the access log per thread that
 * the performance counters group by warp. Not for use outside kernels/simt. */
#ifndef LAB_KERNELS_SIMT_INTERNAL_H
#define LAB_KERNELS_SIMT_INTERNAL_H

#include <stdint.h>

#include "fiber.h"
#include "simt.h"

enum { T_RUNNABLE, T_BARRIER, T_WARP, T_DONE };
enum { SP_SHARED, SP_GLOBAL };
enum { W_NONE, W_SHFL, W_MMA_BF16, W_MMA_F16, W_SYNCWARP, W_LDMATRIX };

typedef struct { /* one shared or global access, for the bank and sector counters */
  uintptr_t pc, addr;
  uint32_t size;
  uint8_t space, write;
} simt_access;

typedef struct { /* one cp.async in flight: its source read at the issue, landing at a wait */
  unsigned char data[16];
  uint32_t dst; /* offset in the block's dynamic shared memory */
  uint8_t size;
  int group;    /* the commit group it belongs to (the thread's commits so far at the issue) */
  uintptr_t pc; /* the issue site */
} simt_cpa;

typedef struct simt_thr {
  struct lab_simt_thread_pub pub; /* first: lab_simt_self points here */
  lab_fiber f;
  int tid, lane, warp, state;
  const void *site; /* where it waits (return address of the sync call) */
  simt_access *log;
  int nlog, caplog;
  simt_cpa *cpa; /* cp.async copies issued and not yet landed, oldest first */
  int ncpa, capcpa, commits;
} simt_thr;

typedef struct { /* a warp-wide operation being gathered */
  int op, arg;
  unsigned mask, arrived;
  size_t size;
  const void *site;
  const void *in[32];
  void *out[32];
} simt_warp;

typedef struct { /* per byte of shared memory: last writer and readers in the current epoch */
  uint32_t wep, rep;
  int16_t wt, rt; /* thread ids; rt -2: more than one reader */
} simt_shadow;

struct simt_worker;
typedef struct simt_blk {
  struct lab_simt_block_pub pub; /* first */
  const lab_simt_launch_desc *d;
  struct simt_worker *w;
  simt_thr *t;
  int n, nwarps, aborted;
  simt_warp *warps;
  size_t dyn_n;
} simt_blk;

typedef struct simt_worker {
  lab_fiber os; /* the OS thread's own context (the scheduler runs there) */
  simt_thr *thr;
  int cap_thr;
  char *stacks;
  size_t stack_size;
  simt_warp warps[32];
  char *dyn;
  size_t dyn_cap;
  simt_shadow *sh_dyn, *sh_tls;
  int16_t *pend; /* per byte of dynamic shared memory: 1 + the thread whose cp.async to it is in flight */
  long npend;    /* bytes with a cp.async in flight (0: no check on shared accesses) */
  size_t sh_dyn_cap;
  uintptr_t tls_lo;
  size_t tls_n;
  uint32_t epoch; /* bumped at each block start and barrier: older shadow entries are stale */
  uint64_t rng;
  simt_blk *blk;
} simt_worker;

extern __thread simt_worker *lab_simt_worker_self;

static inline simt_thr *simt_cur(void) { return (simt_thr *)lab_simt_self; }
static inline simt_blk *simt_blk_of(simt_thr *t) { return (simt_blk *)t->pub.blk; }

/* sched.c: blocks the calling thread at a warp operation until every lane of mask arrives;
 * the last to arrive runs compute(w) for all of them */
void simt_warp_op(int op, unsigned mask, const void *in, void *out, size_t size, int arg, const void *site,
                  void (*compute)(simt_warp *w));

/* report.c */
void simt_hazard(simt_thr *t, const char *kind, uintptr_t pc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void simt_launch_begin(void);
long simt_launch_hazards(void);
void simt_coverage_count(const lab_simt_launch_desc *d);
void simt_coverage_time(const lab_simt_launch_desc *d, double seconds);
void simt_block_barriers(const lab_simt_launch_desc *d, long n);
void simt_reset_kernel_stats(void);
const char *simt_dim_str(lab_simt_dim v, char *buf);
lab_simt_dim simt_tidx(const simt_blk *b, int tid);
void simt_site_name(uintptr_t pc, char *out, size_t n);

/* hooks.c */
void simt_worker_tls(simt_worker *w);
void simt_memcheck_forget(void); /* per worker, at each launch */
void simt_shadow_reserve(simt_worker *w, size_t dyn);
/* one access as the instrumentation reports it, from an emulated instruction at pc */
void simt_access_at(const void *p, size_t n, int write, uintptr_t pc);
/* the racecheck and perf record of a shared write at offset off of dynamic shared memory */
void simt_shared_write(simt_thr *t, uintptr_t off, size_t n, uintptr_t pc);

/* async.c: cp.async copies a thread leaves in flight when it ends or its block is abandoned */
void simt_cpa_drop(simt_thr *t);

/* perf.c: groups the warp's logged accesses by site into requests */
void simt_perf_flush_warp(simt_blk *b, int warp);
void simt_log(simt_thr *t, uintptr_t pc, uintptr_t addr, uint32_t size, int space, int write);

#endif
