/* A caching allocator for device memory in the spirit of PyTorch's CUDACachingAllocator:
 * device memory is reserved in segments (cudaMalloc only on a miss) and carved into blocks.
 * Blocks belong to the stream they were allocated for; a request takes the best-fitting free
 * block of its stream and pool and splits off the rest; freed blocks merge with free
 * neighbours of their segment. Requests up to 1 MiB come from a small pool of 2 MiB segments,
 * larger ones from a large pool (20 MiB segments below 10 MiB, else rounded to 2 MiB). When
 * the device is out of memory the whole-free segments are released and the request retried
 * once; then the error names the bytes requested, free on the device, and cached.
 * Plain C with the device behind three callbacks, so its logic is tested on any machine. */
#ifndef LAB_RUNTIME_CUDA_CACHING_ALLOCATOR_H
#define LAB_RUNTIME_CUDA_CACHING_ALLOCATOR_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
  void *(*raw_alloc)(void *ctx, size_t nbytes); /* NULL when the device is out of memory */
  void (*raw_free)(void *ctx, void *p);
  /* bytes free and total on the device (optional: NULL) */
  int (*mem_info)(void *ctx, size_t *free_bytes, size_t *total_bytes);
  void *ctx;
} lab_ca_backend;

typedef struct {
  int64_t allocated;     /* bytes in blocks handed out (rounded sizes) */
  int64_t reserved;      /* bytes in segments held from the device */
  int64_t peak_allocated, peak_reserved;
  int64_t segments, raw_allocs, raw_frees, cache_hits, splits, merges, oom_retries;
} lab_ca_stats;

typedef struct lab_caching_allocator lab_caching_allocator;

lab_caching_allocator *lab_ca_new(lab_ca_backend backend);
void lab_ca_destroy(lab_caching_allocator *a); /* gives every segment back */
/* nbytes rounded up to 512; NULL (with lab_fail naming requested, free and cached bytes)
 * when even the retry after emptying the cache fails. */
void *lab_ca_malloc(lab_caching_allocator *a, size_t nbytes, void *stream);
void lab_ca_free(lab_caching_allocator *a, void *p);
/* Releases every segment that holds no allocated block. */
void lab_ca_empty_cache(lab_caching_allocator *a);
lab_ca_stats lab_ca_get_stats(const lab_caching_allocator *a);
size_t lab_ca_round(size_t nbytes);

#endif
