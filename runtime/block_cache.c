/* The freed-block cache of block_cache.h: lists hashed by size (a multiple of 64), exact fits. */
#include "block_cache.h"

#include <stdint.h>
#include <stdlib.h>

struct lab_cached_block {
  lab_cached_block *next;
  void *data;
  size_t size;
};

static size_t bucket_of(size_t size) { return (size / 64 * 0x9E3779B97F4A7C15ull) >> 54 & (LAB_BC_BUCKETS - 1); }

static void *take(lab_block_cache *c, size_t size) {
  if (size < c->min) return NULL;
  for (lab_cached_block **p = &c->bucket[bucket_of(size)]; *p; p = &(*p)->next)
    if ((*p)->size == size) {
      lab_cached_block *b = *p;
      void *data = b->data;
      *p = b->next;
      c->bytes -= size;
      free(b);
      return data;
    }
  return NULL;
}

static int put(lab_block_cache *c, void *data, size_t size) {
  if (size < c->min || c->bytes + size > c->limit) return 0;
  lab_cached_block *b = malloc(sizeof *b);
  if (!b) return 0;
  *b = (lab_cached_block){c->bucket[bucket_of(size)], data, size};
  c->bucket[bucket_of(size)] = b;
  c->bytes += size;
  return 1;
}

void lab_bc_empty(lab_block_cache *c) {
  for (int i = 0; i < LAB_BC_BUCKETS; i++)
    while (c->bucket[i]) {
      lab_cached_block *b = c->bucket[i];
      c->bucket[i] = b->next;
      c->raw_free(b->data, b->size);
      free(b);
    }
  c->bytes = 0;
}

void *lab_bc_alloc(lab_block_cache *c, size_t size) {
  void *p = take(c, size);
  if (!p) p = c->raw_alloc(size);
  if (!p && c->bytes) {
    lab_bc_empty(c);
    p = c->raw_alloc(size);
  }
  return p;
}

void lab_bc_free(lab_block_cache *c, void *p, size_t size) {
  if (!put(c, p, size)) c->raw_free(p, size);
}
