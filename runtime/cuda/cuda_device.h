/* What the rest of the runtime's CUDA code (runtime/dist/nccl.c) needs from the cuda device:
 * the compute stream every kernel and copy of a device runs on, to order other streams
 * against it with events. */
#ifndef LAB_RUNTIME_CUDA_DEVICE_H
#define LAB_RUNTIME_CUDA_DEVICE_H

#include <cuda_runtime.h>

/* The compute stream of cuda device index, made current (set up at first use); NULL after
 * lab_fail. */
cudaStream_t lab_cuda_compute_stream(int index);

#endif
