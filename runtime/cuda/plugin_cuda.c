/* The entry point of libllmlab_cuda.so (plugin.h): the cuda device's table from cuda_device.c
 * and the versions of the CUDA libraries this plugin was loaded with, for llmlab --version and
 * the GPU check's report. cuda_device.c itself knows nothing of being a plugin (the sim device
 * compiles it a second time against its emulated runtime). */
#include <cublasLt.h>
#include <cuda_runtime.h>

#include "cuda_device.h"
#include "plugin.h"

static void *compute_stream(int index) { return (void *)lab_cuda_compute_stream(index); }

static int runtime_version(void) {
  int v = 0;
  cudaRuntimeGetVersion(&v);
  return v;
}

static int driver_version(void) {
  int v = 0;
  if (cudaDriverGetVersion(&v) != cudaSuccess) v = 0;
  cudaGetLastError();
  return v;
}

static size_t cublaslt_version(void) { return cublasLtGetVersion(); }

__attribute__((visibility("default"))) const lab_cuda_plugin *llmlab_cuda_plugin(void) {
  static lab_cuda_plugin p;
  p = (lab_cuda_plugin){.abi = LAB_PLUGIN_ABI,
                        .ops_size = sizeof(lab_device_ops),
                        .group_size = sizeof(lab_group),
                        .ops = lab_cuda_device_ops(),
                        .compute_stream = compute_stream,
                        .runtime_version = runtime_version,
                        .driver_version = driver_version,
                        .cublaslt_version = cublaslt_version};
  return &p;
}
