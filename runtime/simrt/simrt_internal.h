/* Between the parts of the emulated CUDA runtime (runtime/simrt): the stream queue that
 * launch.c and gemm.c put work on, and the arena's kernel view. */
#ifndef LAB_SIMRT_INTERNAL_H
#define LAB_SIMRT_INTERNAL_H

#include "shim/cuda_runtime.h"

/* work on a stream: run on the stream's worker thread, in order; returns a cudaError_t value.
 * arg is malloc'ed by the caller and freed after fn ran. */
typedef int (*lab_simrt_fn)(void *arg);
cudaError_t lab_simrt_enqueue(cudaStream_t s, lab_simrt_fn fn, void *arg);
/* waits until everything enqueued on s ran (NULL: the current device's default stream);
 * returns the first error of its work since the last drain, and clears it */
cudaError_t lab_simrt_drain(cudaStream_t s);
/* a device pointer on the arena's readable view; host pointers and NULL unchanged */
void *lab_simrt_kview(const void *p);
/* the text cudaGetErrorString gives for a launch failure (the interpreter's report) */
void lab_simrt_note_failure(const char *text);
/* a launch failed: the next cudaStreamSynchronize returns e (once) */
void lab_simrt_set_sticky(int e);
/* the sticky error (0: none) */
int lab_simrt_sticky(void);
/* nonzero on a stream's worker thread (where a host wait would wait for itself) */
int lab_simrt_on_worker(void);
/* the device of a stream's work (NULL: the current device's default stream) */
int lab_simrt_stream_device(cudaStream_t s);
/* the device whose cudaMalloc holds p, or -1 (host memory, NULL) */
int lab_simrt_device_of(const void *p);
/* waits until every stream's queued work ran, at most `seconds`; 0, or -1 when it gave up */
int lab_simrt_sync_all_for(double seconds);

/* the NCCL shim (nccl_mpi.c): nonzero on the thread that drives MPI while NCCL requests are
 * pending; progress tests them (on that thread only), so host waits on streams that wait for
 * NCCL items drive MPI while they wait */
int lab_simrt_nccl_pending(void);
void lab_simrt_nccl_progress(void);

/* set while the caching allocator runs (alloc.c): its cudaMalloc segments are not memcheck's */
extern __thread int lab_simrt_in_allocator;

#endif
