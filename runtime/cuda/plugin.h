/* The entry points of the two plugins (runtime/cuda/loader.h opens them): libllmlab_cuda.so holds
 * the cuda device (cuda_device.c, the caching allocator, kernels/cuda) linked to libcudart and
 * libcublasLt; libllmlab_nccl.so holds the NCCL backend (runtime/dist/nccl.c) linked to libnccl.
 * Each exports one function returning a table; everything else they define is hidden, and what
 * they call of the engine (lab_fail, the guard, ...) resolves against the llmlab executable.
 * No CUDA header here: the engine includes this file. */
#ifndef LAB_RUNTIME_CUDA_PLUGIN_H
#define LAB_RUNTIME_CUDA_PLUGIN_H

#include <stddef.h>

#include "../device.h"
#include "../dist/group.h"

/* Bumped when a table below changes; the sizes catch a plugin built from other headers. */
#define LAB_PLUGIN_ABI 1

typedef struct {
  int abi;
  size_t ops_size, group_size; /* sizeof(lab_device_ops), sizeof(lab_group) where it was built */
  const lab_device_ops *ops;
  void *(*compute_stream)(int index); /* a cudaStream_t: lab_cuda_compute_stream */
  int (*runtime_version)(void);       /* cudaRuntimeGetVersion: 13000 for 13.0 */
  int (*driver_version)(void);        /* cudaDriverGetVersion; 0 without a driver */
  size_t (*cublaslt_version)(void);   /* cublasLtGetVersion: 130000 for 13.0.0 */
} lab_cuda_plugin;

typedef struct {
  int abi;
  size_t ops_size, group_size;
  /* runtime/dist/nccl.h's functions */
  int (*gpu_key)(int index, char *key, size_t n);
  int (*unique_id)(void *id);
  int (*group_init)(lab_group *dev, lab_group *host, int index, const void *id);
  const char *(*version)(void);
} lab_nccl_plugin;

/* The table of runtime/dist/nccl.h's functions: one spelling for both builds of nccl.c (the
 * plugin's, and the sim's, where shim/nccl.h renames them lab_simrt_nccl_*) */
#define LAB_NCCL_PLUGIN_TABLE()                                                                          \
  ((lab_nccl_plugin){.abi = LAB_PLUGIN_ABI, .ops_size = sizeof(lab_device_ops), .group_size = sizeof(lab_group), \
                     .gpu_key = lab_nccl_gpu_key, .unique_id = lab_nccl_unique_id,                         \
                     .group_init = lab_nccl_group_init, .version = lab_nccl_version})

#define LAB_CUDA_PLUGIN_ENTRY "llmlab_cuda_plugin"
#define LAB_NCCL_PLUGIN_ENTRY "llmlab_nccl_plugin"
typedef const lab_cuda_plugin *(*lab_cuda_plugin_entry)(void);
/* the nccl plugin takes the cuda plugin's table: nccl.c orders its streams after the compute
 * stream of the cuda device, which lives in the other plugin */
typedef const lab_nccl_plugin *(*lab_nccl_plugin_entry)(const lab_cuda_plugin *cuda);

#endif
