/* A cache of freed blocks for a device allocator that has none of its own (the cpu's, the sim
 * arena's direct table; the cuda device has its caching allocator). A training step allocates
 * the same sizes every step: freed blocks are kept in lists by size and handed out again, so
 * steady-state steps make no system calls and touch no fresh pages (each fresh page costs a
 * fault and a kernel zeroing). The list nodes live outside the blocks (device memory may not
 * be readable from the host). Bounded by `limit` bytes; blocks under `min` bytes are not kept.
 * Not thread-safe: storage is allocated from the thread that runs Lua. */
#ifndef LAB_RUNTIME_BLOCK_CACHE_H
#define LAB_RUNTIME_BLOCK_CACHE_H

#include <stddef.h>

#define LAB_BC_BUCKETS 1024

typedef struct lab_cached_block lab_cached_block;

typedef struct {
  size_t min, limit;                          /* set by the owner */
  void *(*raw_alloc)(size_t size);            /* the device's own allocation; NULL when out of memory */
  void (*raw_free)(void *p, size_t size);
  size_t bytes;                               /* held now */
  lab_cached_block *bucket[LAB_BC_BUCKETS];
} lab_block_cache;

/* A kept block of exactly `size` bytes, else raw_alloc's; when that fails with blocks kept,
 * they are given back and raw_alloc tried once more. */
void *lab_bc_alloc(lab_block_cache *c, size_t size);
/* Keeps p, or gives it to raw_free when it is too small or the cache full. */
void lab_bc_free(lab_block_cache *c, void *p, size_t size);
/* Gives every kept block to raw_free. */
void lab_bc_empty(lab_block_cache *c);

#endif
