/* The caching allocator's blocks and pools. Free blocks sit in one list per pool, scanned for
 * the best fit (smallest block of the same stream that is large enough): pools hold tens to
 * hundreds of blocks in a training step, where a scan is cheaper than a tree. A hash table
 * maps each handed-out address to its block for free(). */
#include "caching_allocator.h"

#include <stdlib.h>

#include "../error.h"

#define ROUND 512
#define SMALL_LIMIT ((size_t)1 << 20)       /* requests up to 1 MiB: small pool */
#define SMALL_SEGMENT ((size_t)2 << 20)     /* small pool segments: 2 MiB */
#define LARGE_SEGMENT_MIN ((size_t)20 << 20) /* large requests under 10 MiB share 20 MiB */
#define LARGE_SHARED_LIMIT ((size_t)10 << 20)
#define LARGE_ROUND ((size_t)2 << 20)
#define HASH 4096

typedef struct block {
  char *ptr;
  size_t size;
  void *stream;
  int allocated, small;
  struct block *prev, *next;     /* neighbours in the segment (address order) */
  struct block *free_next;       /* in the pool's free list */
  struct block *hash_next;       /* in the address table */
  char *segment;                 /* the segment's base (what raw_free takes) */
} block;

struct lab_caching_allocator {
  lab_ca_backend be;
  block *free_small, *free_large;
  block *table[HASH];
  lab_ca_stats st;
};

size_t lab_ca_round(size_t n) { return n < ROUND ? ROUND : (n + ROUND - 1) / ROUND * ROUND; }

static size_t hash_of(const void *p) { return ((uintptr_t)p >> 9) * 0x9E3779B97F4A7C15ull >> 52 & (HASH - 1); }

lab_caching_allocator *lab_ca_new(lab_ca_backend be) {
  lab_caching_allocator *a = calloc(1, sizeof *a);
  if (a) a->be = be;
  return a;
}

static block **pool_of(lab_caching_allocator *a, int small) { return small ? &a->free_small : &a->free_large; }

static void list_remove(block **head, block *b) {
  for (block **p = head; *p; p = &(*p)->free_next)
    if (*p == b) {
      *p = b->free_next;
      b->free_next = NULL;
      return;
    }
}

static void list_push(lab_caching_allocator *a, block *b) {
  block **head = pool_of(a, b->small);
  b->free_next = *head;
  *head = b;
}

static void table_put(lab_caching_allocator *a, block *b) {
  size_t h = hash_of(b->ptr);
  b->hash_next = a->table[h];
  a->table[h] = b;
}

static block *table_take(lab_caching_allocator *a, const void *p) {
  for (block **q = &a->table[hash_of(p)]; *q; q = &(*q)->hash_next)
    if ((*q)->ptr == p) {
      block *b = *q;
      *q = b->hash_next;
      b->hash_next = NULL;
      return b;
    }
  return NULL;
}

static block *best_fit(lab_caching_allocator *a, size_t size, void *stream, int small) {
  block *best = NULL;
  for (block *b = *pool_of(a, small); b; b = b->free_next)
    if (b->stream == stream && b->size >= size && (!best || b->size < best->size || (b->size == best->size && b->ptr < best->ptr)))
      best = b;
  return best;
}

static size_t segment_size(size_t size, int small) {
  if (small) return SMALL_SEGMENT;
  if (size < LARGE_SHARED_LIMIT) return LARGE_SEGMENT_MIN;
  return (size + LARGE_ROUND - 1) / LARGE_ROUND * LARGE_ROUND;
}

static void bump(int64_t *v, int64_t *peak, int64_t d) {
  *v += d;
  if (peak && *v > *peak) *peak = *v;
}

/* Releases the segments that are one free block each. */
void lab_ca_empty_cache(lab_caching_allocator *a) {
  for (int small = 0; small < 2; small++) {
    block **p = pool_of(a, small);
    while (*p) {
      block *b = *p;
      if (!b->prev && !b->next) { /* the whole segment is this free block */
        *p = b->free_next;
        a->be.raw_free(a->be.ctx, b->segment);
        bump(&a->st.reserved, NULL, -(int64_t)b->size);
        a->st.segments--;
        a->st.raw_frees++;
        free(b);
      } else {
        p = &b->free_next;
      }
    }
  }
}

static size_t cached_bytes(const lab_caching_allocator *a) { return (size_t)(a->st.reserved - a->st.allocated); }

void *lab_ca_malloc(lab_caching_allocator *a, size_t nbytes, void *stream) {
  size_t size = lab_ca_round(nbytes);
  int small = size <= SMALL_LIMIT;
  block *b = best_fit(a, size, stream, small);
  if (b) {
    list_remove(pool_of(a, small), b);
    a->st.cache_hits++;
  } else {
    size_t seg = segment_size(size, small);
    char *mem = a->be.raw_alloc(a->be.ctx, seg);
    if (!mem && cached_bytes(a) > 0) { /* out of memory: give the cache back, try once more */
      size_t cached = cached_bytes(a);
      lab_ca_empty_cache(a);
      a->st.oom_retries++;
      mem = a->be.raw_alloc(a->be.ctx, seg);
      if (!mem) {
        size_t fr = 0, total = 0;
        if (a->be.mem_info) a->be.mem_info(a->be.ctx, &fr, &total);
        lab_fail("alloc", "device out of memory: tried to allocate %zu bytes (a %zu-byte segment); %zu bytes "
                 "free on the device of %zu; %zu bytes were cached by llmlab (released and retried once), %lld "
                 "allocated", nbytes, seg, fr, total, cached, (long long)a->st.allocated);
        return NULL;
      }
    }
    if (!mem) {
      size_t fr = 0, total = 0;
      if (a->be.mem_info) a->be.mem_info(a->be.ctx, &fr, &total);
      lab_fail("alloc", "device out of memory: tried to allocate %zu bytes (a %zu-byte segment); %zu bytes free "
               "on the device of %zu; 0 bytes cached by llmlab, %lld allocated", nbytes, seg, fr, total,
               (long long)a->st.allocated);
      return NULL;
    }
    b = calloc(1, sizeof *b);
    if (!b) {
      a->be.raw_free(a->be.ctx, mem);
      lab_fail("alloc", "out of host memory for a block header");
      return NULL;
    }
    *b = (block){.ptr = mem, .size = seg, .stream = stream, .small = small, .segment = mem};
    a->st.segments++;
    a->st.raw_allocs++;
    bump(&a->st.reserved, &a->st.peak_reserved, (int64_t)seg);
  }
  /* split off the rest when it is worth keeping: any remainder in the small pool, more than
   * the small limit in the large one (so large blocks do not fragment into small ones) */
  size_t rest = b->size - size;
  if (rest >= (small ? ROUND : SMALL_LIMIT + 1)) {
    block *r = calloc(1, sizeof *r);
    if (r) {
      *r = (block){.ptr = b->ptr + size, .size = rest, .stream = b->stream, .small = small, .segment = b->segment,
                   .prev = b, .next = b->next};
      if (b->next) b->next->prev = r;
      b->next = r;
      b->size = size;
      list_push(a, r);
      a->st.splits++;
    }
  }
  b->allocated = 1;
  table_put(a, b);
  bump(&a->st.allocated, &a->st.peak_allocated, (int64_t)b->size);
  return b->ptr;
}

/* Merges b with a free neighbour n (n after b in the segment); n is dropped. */
static void merge_next(lab_caching_allocator *a, block *b) {
  block *n = b->next;
  list_remove(pool_of(a, n->small), n);
  b->size += n->size;
  b->next = n->next;
  if (n->next) n->next->prev = b;
  free(n);
  a->st.merges++;
}

void lab_ca_free(lab_caching_allocator *a, void *p) {
  if (!p) return;
  block *b = table_take(a, p);
  if (!b) return; /* not ours: ignore rather than corrupt the pools */
  b->allocated = 0;
  bump(&a->st.allocated, NULL, -(int64_t)b->size);
  if (b->next && !b->next->allocated) merge_next(a, b);
  if (b->prev && !b->prev->allocated) {
    block *pr = b->prev;
    list_remove(pool_of(a, pr->small), pr);
    merge_next(a, pr);
    b = pr;
  }
  list_push(a, b);
}

lab_ca_stats lab_ca_get_stats(const lab_caching_allocator *a) { return a->st; }

void lab_ca_destroy(lab_caching_allocator *a) {
  if (!a) return;
  for (int h = 0; h < HASH; h++) /* allocated blocks: free them so their segments can go */
    while (a->table[h]) lab_ca_free(a, a->table[h]->ptr);
  lab_ca_empty_cache(a);
  free(a);
}
