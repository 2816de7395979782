/* The SIMT interpreter's C interface: what the sim device, the emulation header (cuda_sim.h)
 * and the tests call. kernels/cuda compiled by the host compiler with LAB_SIMT runs its
 * kernels here: each block's threads as cooperatively scheduled fibers, blocks spread over a
 * few OS threads, every load and store seen (the kernel sources are compiled with the
 * compiler's ThreadSanitizer instrumentation, whose __tsan_* hooks hooks.c implements) and
 * checked as compute-sanitizer would: racecheck on shared memory, synccheck on barriers and
 * warp intrinsics, memcheck on global memory. Design note: kernels/simt/README.md. */
#ifndef LAB_KERNELS_SIMT_H
#define LAB_KERNELS_SIMT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  unsigned x, y, z;
} lab_simt_dim;

/* One launch as the emulation header describes it: entry(args) runs one thread's kernel body. */
typedef struct {
  const char *kernel; /* "flash_fwd_k<__nv_bfloat16, 64>" */
  int kernel_id;      /* from lab_simt_register_kernel */
  lab_simt_dim grid, block;
  size_t dyn_smem;
  void (*entry)(void *args);
  void *args;
} lab_simt_launch_desc;

/* cudaError_t values the interpreter returns (the runtime's numbering) */
enum { LAB_SIMT_OK = 0, LAB_SIMT_INVALID_CONFIG = 9, LAB_SIMT_ILLEGAL_ADDRESS = 700, LAB_SIMT_LAUNCH_FAILURE = 719 };

/* Runs the launch to completion; 0, or the error a GPU would give (a hazard found counts as a
 * launch failure: the sim's point is that it must not pass). */
int lab_simt_launch(const lab_simt_launch_desc *d);
/* the launch's shape within what a GPU (sm_90) allows: 0, or LAB_SIMT_INVALID_CONFIG */
int lab_simt_check_config(const lab_simt_launch_desc *d);

/* ---- launches as stream work ----
 * Where a queue is set (runtime/simrt sets one: a lower layer that must hand work up takes a
 * callback), a launch or memset that names a stream does not run at once: the emulation header
 * captures its arguments by value in a lab_simt_work and hands it to queue(stream, w), which
 * runs it on the stream's worker thread in stream order (run returns 0 or a cudaError_t value;
 * drop frees it; the queue calls each exactly once) and returns cudaSuccess or why it could
 * not enqueue. Without a queue, or with stream NULL (the unit tests, the sim's direct table),
 * the launch runs to completion on the calling thread as before. sync waits until every queued
 * item ran; the readers below (stats, coverage, perf) call it first, except on a queue's own
 * worker thread, so what they read includes every launch made before them. */
typedef struct lab_simt_work {
  int (*run)(struct lab_simt_work *w);
  void (*drop)(struct lab_simt_work *w);
  const char *kernel; /* the kernel instantiation, or "cudaMemsetAsync" */
} lab_simt_work;
typedef int (*lab_simt_queue_fn)(void *stream, lab_simt_work *w);
void lab_simt_set_queue(lab_simt_queue_fn queue, void (*sync)(void));
lab_simt_queue_fn lab_simt_queue(void);
void lab_simt_sync_queued(void); /* sync, where a queue is set */

/* every kernel instantiation the code can launch registers itself at start-up (coverage) */
int lab_simt_register_kernel(const char *name);

/* ---- device memory as the interpreter sees it ----
 * [lo, lo + n) is global memory (the sim arena's kernel view); reports name an address as
 * shown_base + (a - lo), the device address the user's tensor has. Accesses there must fall
 * inside a live allocation. */
void lab_simt_global_range(void *lo, size_t n, uintptr_t shown_base);
void lab_simt_note_alloc(const void *p, size_t n);
void lab_simt_note_free(const void *p, size_t n);

/* ---- settings ---- */
void lab_simt_set_workers(int n); /* OS threads that run blocks (default 1) */
void lab_simt_set_seed(uint64_t seed); /* thread order between barriers; 0: natural order */

/* ---- what was found ---- */
long lab_simt_hazards(void);            /* hazards reported since start (all kinds) */
const char *lab_simt_last_report(void); /* the first line of the last report, or "" */
void lab_simt_coverage(FILE *f);        /* kernel -> launches, every registered kernel */
void lab_simt_perf_report(FILE *f);     /* bank conflicts and sectors per kernel and site */
void lab_simt_reset_stats(void); /* the perf counts and the per-kernel stats below */
/* One kernel instantiation's launches since the last lab_simt_reset_stats (the coverage
 * table keeps its own counts): the last launch's shape, the blocks run, the __syncthreads
 * each block passed (fewest and most: a causal FlashAttention block that skips key tiles
 * passes fewer), and the hazards reported. lab.sim.stats() (lua/l_sim.c) reads these. */
typedef struct {
  const char *kernel;
  long launches, blocks, barriers, hazards;
  long block_barriers_min, block_barriers_max;
  lab_simt_dim grid, block; /* of the last launch */
  size_t dyn_smem;          /* of the last launch */
  double seconds;
} lab_simt_kernel_stats;
/* the i-th kernel with a launch since the reset (0-based); 0, or -1 past the last */
int lab_simt_kernel_stat(int i, lab_simt_kernel_stats *out);
/* count bank conflicts and sectors (off by default: they cost time) */
void lab_simt_set_perf(int on);
/* one kernel's totals (NULL: all): shared wavefronts, their ideal, global sectors, their ideal */
void lab_simt_perf_totals(const char *kernel, long out[4]);

/* ---- the emulated device side (called from cuda_sim.h) ---- */
struct lab_simt_block_pub { /* the fields the emulation header reads */
  lab_simt_dim bidx, bdim, gdim;
  void *dyn_smem;
};
struct lab_simt_thread_pub {
  lab_simt_dim tidx;
  struct lab_simt_block_pub *blk;
};
extern __thread struct lab_simt_thread_pub *lab_simt_self;

void lab_simt_syncthreads(void);
void lab_simt_syncwarp(unsigned mask);
void lab_simt_shfl_xor(unsigned mask, const void *in, void *out, size_t size, int lanemask);
/* c (16x8 f32) += a (16x16) b (16x8) for the whole warp; kind 0 bf16, 1 f16 */
void lab_simt_mma_m16n8k16(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1, int kind);
/* ldmatrix.m8n8.x{num}{.trans}.b16: row is this lane's row address (lanes < 8 num), r[num] */
void lab_simt_ldmatrix(uint32_t *r, const void *row, int num, int trans);
/* cp.async of cp_size bytes (4, 8, 16), bytes past src_size zero; commit_group; wait_group n */
void lab_simt_cp_async(void *dst, const void *src, int cp_size, int src_size);
void lab_simt_cp_async_commit(void);
void lab_simt_cp_async_wait(int n);
float lab_simt_atomic_add_f32(float *p, float v);
double lab_simt_atomic_add_f64(double *p, double v);
unsigned long long lab_simt_atomic_add_u64(unsigned long long *p, unsigned long long v);
int lab_simt_atomic_add_i32(int *p, int v);

#ifdef __cplusplus
}
#endif

#endif
