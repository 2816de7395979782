/* The emulated CUDA runtime's header for the sim compile of runtime/cuda/cuda_device.c (and,
 * later, runtime/dist/nccl.c): found before any toolkit header because the sim's object library
 * has only runtime/simrt/shim on its include path. It declares the subset of the CUDA runtime
 * that code uses, every function renamed cudaX -> lab_simrt_cudaX, and renames the cuda
 * device's own exported names (lab_cuda_*, the lab_cu_* launchers; the caching allocator's
 * calls go to alloc.c, which tells memcheck of its blocks) so both builds of
 * cuda_device.c, and the real libcudart, can live in one process. Implemented in
 * runtime/simrt/simrt.c (streams on worker threads, memory in the sim arena), launch.c (the
 * launchers: kernels/cuda under the SIMT interpreter) and gemm.c (cublasLt.h). */
#ifndef LAB_SIMRT_CUDA_RUNTIME_H
#define LAB_SIMRT_CUDA_RUNTIME_H

#include <stddef.h>

#define LAB_SIMRT 1

typedef enum cudaError {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorStubLibrary = 34,
  cudaErrorInsufficientDriver = 35,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorNotReady = 600,
  cudaErrorMisalignedAddress = 716,
  cudaErrorLaunchFailure = 719
} cudaError_t;

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4
};

typedef enum cudaDataType_t { CUDA_R_32F = 0, CUDA_R_64F = 1, CUDA_R_16F = 2, CUDA_R_16BF = 14 } cudaDataType_t;

struct cudaDeviceProp {
  char name[256];
  size_t totalGlobalMem;
  int major, minor;
  int multiProcessorCount;
};

enum cudaMemoryType { cudaMemoryTypeUnregistered = 0, cudaMemoryTypeHost = 1, cudaMemoryTypeDevice = 2 };
struct cudaPointerAttributes {
  enum cudaMemoryType type;
  int device;
  void *devicePointer;
  void *hostPointer;
};

typedef struct CUstream_st *cudaStream_t;
typedef struct CUevent_st *cudaEvent_t;

#define cudaStreamDefault 0x0
#define cudaStreamNonBlocking 0x1
#define cudaEventDefault 0x0
#define cudaEventDisableTiming 0x2

/* the cuda device's exported names, for the sim compile (the fused kernels' launchers are
 * lab_simrt_cu_* through LAB_CU, kernels/cuda/launch.h, since LAB_SIMRT is defined above) */
#define lab_cuda_compute_stream lab_simrt_compute_stream
#define lab_cuda_device_ops lab_simrt_cuda_device_ops
#define lab_ca_new lab_simrt_ca_new
#define lab_ca_malloc lab_simrt_ca_malloc
#define lab_ca_free lab_simrt_ca_free
#define lab_cu_ewise lab_simrt_cu_ewise
#define lab_cu_reduce lab_simrt_cu_reduce
#define lab_cu_reduce_work_bytes lab_simrt_cu_reduce_work_bytes
#define lab_cu_rand lab_simrt_cu_rand
#define lab_cu_xent_fwd lab_simrt_cu_xent_fwd
#define lab_cu_flash_supports lab_simrt_cu_flash_supports
#define lab_cu_flash_fwd lab_simrt_cu_flash_fwd
#define lab_cu_flash_bwd lab_simrt_cu_flash_bwd

/* the runtime subset: each cudaX is lab_simrt_cudaX */
#define cudaRuntimeGetVersion lab_simrt_cudaRuntimeGetVersion
#define cudaGetDeviceCount lab_simrt_cudaGetDeviceCount
#define cudaGetDeviceProperties lab_simrt_cudaGetDeviceProperties
#define cudaDeviceGetPCIBusId lab_simrt_cudaDeviceGetPCIBusId
#define cudaGetErrorString lab_simrt_cudaGetErrorString
#define cudaGetLastError lab_simrt_cudaGetLastError
#define cudaSetDevice lab_simrt_cudaSetDevice
#define cudaGetDevice lab_simrt_cudaGetDevice
#define cudaDeviceSynchronize lab_simrt_cudaDeviceSynchronize
#define cudaPointerGetAttributes lab_simrt_cudaPointerGetAttributes
#define cudaMalloc lab_simrt_cudaMalloc
#define cudaFree lab_simrt_cudaFree
#define cudaMemGetInfo lab_simrt_cudaMemGetInfo
#define cudaMemcpyAsync lab_simrt_cudaMemcpyAsync
#define cudaMemsetAsync lab_simrt_cudaMemsetAsync
#define cudaStreamCreateWithFlags lab_simrt_cudaStreamCreateWithFlags
#define cudaStreamDestroy lab_simrt_cudaStreamDestroy
#define cudaStreamSynchronize lab_simrt_cudaStreamSynchronize
#define cudaStreamWaitEvent lab_simrt_cudaStreamWaitEvent
#define cudaEventCreateWithFlags lab_simrt_cudaEventCreateWithFlags
#define cudaEventRecord lab_simrt_cudaEventRecord
#define cudaEventQuery lab_simrt_cudaEventQuery
#define cudaEventSynchronize lab_simrt_cudaEventSynchronize
#define cudaEventDestroy lab_simrt_cudaEventDestroy

#ifdef __cplusplus
extern "C" {
#endif
cudaError_t cudaRuntimeGetVersion(int *v);
cudaError_t cudaGetDeviceCount(int *n);
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int device);
cudaError_t cudaDeviceGetPCIBusId(char *bus, int len, int device);
const char *cudaGetErrorString(cudaError_t e);
cudaError_t cudaGetLastError(void);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDevice(int *device);
cudaError_t cudaDeviceSynchronize(void);
/* the device whose cudaMalloc the pointer falls in; host memory: cudaMemoryTypeUnregistered */
cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *a, const void *p);
cudaError_t cudaMalloc(void **p, size_t n);
cudaError_t cudaFree(void *p);
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t s);
cudaError_t cudaMemsetAsync(void *dst, int byte, size_t n, cudaStream_t s);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s);
cudaError_t cudaEventQuery(cudaEvent_t e);
cudaError_t cudaEventSynchronize(cudaEvent_t e);
cudaError_t cudaEventDestroy(cudaEvent_t e);
#ifdef __cplusplus
}
#endif

#endif
