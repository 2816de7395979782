/* Storage allocation and the per-tag memory account. Buffers are 64-byte aligned so BLAS
 * and vector loops get whole cache lines. */
#include "storage.h"

#include <stdlib.h>
#include <string.h>

#include "error.h"

static lab_mem_account account;

static const char *tag_names[LAB_MEM_NTAGS] = {"other",      "param", "grad", "optimizer",
                                               "activation", "comm"};

const char *lab_mem_tag_name(lab_mem_tag tag) { return tag_names[tag]; }
const lab_mem_account *lab_mem_get(void) { return &account; }
void lab_mem_mark(void) { account.allocated_since_mark = 0; }

void lab_mem_reset_peak(void) {
  for (int i = 0; i < LAB_MEM_NTAGS; i++) account.peak[i] = account.current[i];
  account.peak_total = account.current_total;
}

static void account_add(lab_mem_tag tag, int64_t bytes) {
  account.current[tag] += bytes;
  account.current_total += bytes;
  if (account.current[tag] > account.peak[tag]) account.peak[tag] = account.current[tag];
  if (account.current_total > account.peak_total) account.peak_total = account.current_total;
  if (bytes > 0) account.allocated_since_mark += bytes;
}

/* ---- the block cache ----
 * A training step allocates the same sizes every step. Freed blocks are kept in lists by
 * (rounded) size and handed out again, so steady-state steps make no system calls and touch
 * no fresh pages (each fresh page costs a fault and a kernel zeroing). Bounded: at most
 * CACHE_LIMIT bytes are kept; lab_mem_empty_cache() gives them all back. */
#define CACHE_BUCKETS 1024
#define CACHE_LIMIT ((size_t)1 << 30)
#define CACHE_MIN ((size_t)4096) /* small blocks: malloc's own bins do this well */

typedef struct cached_block {
  struct cached_block *next;
  size_t size;
} cached_block;

static cached_block *cache[CACHE_BUCKETS];
static size_t cached_bytes;

static size_t bucket_of(size_t size) { return (size / 64 * 0x9E3779B97F4A7C15ull) >> 54 & (CACHE_BUCKETS - 1); }

static void *cache_take(size_t size) {
  cached_block **p = &cache[bucket_of(size)];
  for (; *p; p = &(*p)->next)
    if ((*p)->size == size) {
      cached_block *b = *p;
      *p = b->next;
      cached_bytes -= size;
      return b;
    }
  return NULL;
}

static int cache_put(void *data, size_t size) {
  if (size < CACHE_MIN || cached_bytes + size > CACHE_LIMIT) return 0;
  cached_block *b = data;
  b->size = size;
  b->next = cache[bucket_of(size)];
  cache[bucket_of(size)] = b;
  cached_bytes += size;
  return 1;
}

void lab_mem_empty_cache(void) {
  for (int i = 0; i < CACHE_BUCKETS; i++) {
    while (cache[i]) {
      cached_block *b = cache[i];
      cache[i] = b->next;
      free(b);
    }
  }
  cached_bytes = 0;
}

size_t lab_mem_cached_bytes(void) { return cached_bytes; }

lab_storage *lab_storage_new(size_t nbytes, int zero) {
  lab_storage *s = malloc(sizeof *s);
  size_t rounded = (nbytes + 63) & ~(size_t)63;
  void *data = NULL;
  if (s && rounded > 0) {
    data = rounded >= CACHE_MIN ? cache_take(rounded) : NULL;
    if (!data) data = aligned_alloc(64, rounded);
    if (!data && cached_bytes) { /* out of memory: give the cache back and try once more */
      lab_mem_empty_cache();
      data = aligned_alloc(64, rounded);
    }
  }
  if (!s || (rounded > 0 && !data)) {
    free(s);
    free(data);
    lab_fail("alloc", "out of memory allocating %zu bytes", nbytes);
    return NULL;
  }
  if (zero && data) memset(data, 0, rounded);
  s->data = data;
  s->nbytes = nbytes;
  s->refcount = 1;
  s->tag = LAB_MEM_OTHER;
  account_add(s->tag, (int64_t)nbytes);
  return s;
}

void lab_storage_retain(lab_storage *s) { s->refcount++; }

void lab_storage_release(lab_storage *s) {
  if (!s || --s->refcount > 0) return;
  if (!s->data && s->nbytes > 0) { /* memory already given back (release_data) */
    free(s);
    return;
  }
  account_add(s->tag, -(int64_t)s->nbytes);
  size_t rounded = (s->nbytes + 63) & ~(size_t)63;
  if (!s->data || !cache_put(s->data, rounded)) free(s->data);
  free(s);
}

void lab_storage_set_tag(lab_storage *s, lab_mem_tag tag) {
  if (!s->data && s->nbytes > 0) {
    s->tag = tag;
    return;
  }
  account_add(s->tag, -(int64_t)s->nbytes);
  s->tag = tag;
  account.current[tag] += (int64_t)s->nbytes;
  account.current_total += (int64_t)s->nbytes;
  if (account.current[tag] > account.peak[tag]) account.peak[tag] = account.current[tag];
}

void lab_storage_release_data(lab_storage *s) {
  if (!s->data) return;
  size_t rounded = (s->nbytes + 63) & ~(size_t)63;
  if (!cache_put(s->data, rounded)) free(s->data);
  s->data = NULL;
  account_add(s->tag, -(int64_t)s->nbytes);
}

int lab_storage_restore_data(lab_storage *s) {
  if (s->data || s->nbytes == 0) return 0;
  size_t rounded = (s->nbytes + 63) & ~(size_t)63;
  void *data = cache_take(rounded);
  if (!data) data = aligned_alloc(64, rounded);
  if (!data) return lab_fail("alloc", "out of memory allocating %zu bytes", s->nbytes);
  s->data = data;
  account_add(s->tag, (int64_t)s->nbytes);
  return 0;
}
