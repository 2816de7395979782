/* The entry point of libllmlab_nccl.so (plugin.h): nccl.c's functions as a table. nccl.c asks
 * for the compute stream of a cuda device (cuda_device.h), which lives in the other plugin:
 * the definition here forwards to the function the cuda plugin's table gives. */
#include <stddef.h>

#include "../dist/nccl.h"
#include "cuda_device.h"
#include "plugin.h"

static void *(*cuda_stream)(int index);

cudaStream_t lab_cuda_compute_stream(int index) { return (cudaStream_t)cuda_stream(index); }

__attribute__((visibility("default"))) const lab_nccl_plugin *llmlab_nccl_plugin(const lab_cuda_plugin *cuda) {
  static lab_nccl_plugin p;
  cuda_stream = cuda->compute_stream;
  p = LAB_NCCL_PLUGIN_TABLE();
  return &p;
}
