/* Storage allocation, the per-device block caches and the per-device memory accounts. The
 * bytes come from the device's table (alloc/free); on the cpu they are 64-byte aligned so
 * BLAS and vector loops get whole cache lines. */
#include "storage.h"

#include <stdlib.h>
#include <string.h>

#include "error.h"

#define MAX_INDEX 16 /* devices of one type */

/* ---- the block cache ----
 * A training step allocates the same sizes every step. Freed blocks are kept in lists by
 * (rounded) size and handed out again, so steady-state steps make no system calls and touch
 * no fresh pages (each fresh page costs a fault and a kernel zeroing). The list nodes live
 * outside the blocks: device memory may not be readable from the host. Bounded: at most
 * CACHE_LIMIT bytes are kept per device; lab_mem_empty_cache() gives them all back. */
#define CACHE_BUCKETS 1024
#define CACHE_LIMIT ((size_t)1 << 30)
#define CACHE_MIN ((size_t)4096) /* small cpu blocks: malloc's own bins do this well */

typedef struct cached_block {
  struct cached_block *next;
  void *data;
  size_t size;
} cached_block;

typedef struct {
  lab_mem_account account;
  cached_block *cache[CACHE_BUCKETS];
  size_t cached_bytes;
} device_memory;

static device_memory memory[LAB_NDEVTYPES][MAX_INDEX];

static device_memory *mem_of(lab_device d) { return &memory[d.type][d.index]; }

static const char *tag_names[LAB_MEM_NTAGS] = {"other",      "param", "grad", "optimizer",
                                               "activation", "comm"};

const char *lab_mem_tag_name(lab_mem_tag tag) { return tag_names[tag]; }
const lab_mem_account *lab_mem_get(void) { return &memory[LAB_DEV_CPU][0].account; }
const lab_mem_account *lab_mem_get_device(lab_device d) { return &mem_of(d)->account; }
void lab_mem_mark(void) { memory[LAB_DEV_CPU][0].account.allocated_since_mark = 0; }

void lab_mem_reset_peak(void) {
  for (int t = 0; t < LAB_NDEVTYPES; t++)
    for (int d = 0; d < MAX_INDEX; d++) {
      lab_mem_account *a = &memory[t][d].account;
      for (int i = 0; i < LAB_MEM_NTAGS; i++) a->peak[i] = a->current[i];
      a->peak_total = a->current_total;
    }
}

static void account_add(lab_device dev, lab_mem_tag tag, int64_t bytes) {
  lab_mem_account *a = &mem_of(dev)->account;
  a->current[tag] += bytes;
  a->current_total += bytes;
  if (a->current[tag] > a->peak[tag]) a->peak[tag] = a->current[tag];
  if (a->current_total > a->peak_total) a->peak_total = a->current_total;
  if (bytes > 0) memory[LAB_DEV_CPU][0].account.allocated_since_mark += bytes;
}

static size_t bucket_of(size_t size) { return (size / 64 * 0x9E3779B97F4A7C15ull) >> 54 & (CACHE_BUCKETS - 1); }

static size_t cache_min(lab_device d) { return d.type == LAB_DEV_CPU ? CACHE_MIN : 1; }

static void *cache_take(lab_device d, size_t size) {
  device_memory *m = mem_of(d);
  if (size < cache_min(d)) return NULL;
  for (cached_block **p = &m->cache[bucket_of(size)]; *p; p = &(*p)->next)
    if ((*p)->size == size) {
      cached_block *b = *p;
      void *data = b->data;
      *p = b->next;
      m->cached_bytes -= size;
      free(b);
      return data;
    }
  return NULL;
}

static int cache_put(lab_device d, void *data, size_t size) {
  device_memory *m = mem_of(d);
  if (size < cache_min(d) || m->cached_bytes + size > CACHE_LIMIT) return 0;
  cached_block *b = malloc(sizeof *b);
  if (!b) return 0;
  b->data = data;
  b->size = size;
  b->next = m->cache[bucket_of(size)];
  m->cache[bucket_of(size)] = b;
  m->cached_bytes += size;
  return 1;
}

static void empty_cache_of(lab_device d) {
  device_memory *m = mem_of(d);
  const lab_device_ops *ops = lab_device_ops_of(d.type);
  for (int i = 0; i < CACHE_BUCKETS; i++) {
    while (m->cache[i]) {
      cached_block *b = m->cache[i];
      m->cache[i] = b->next;
      ops->free(d.index, b->data, b->size);
      free(b);
    }
  }
  m->cached_bytes = 0;
}

void lab_mem_empty_cache(void) {
  for (int t = 0; t < LAB_NDEVTYPES; t++)
    for (int i = 0; i < MAX_INDEX; i++)
      if (memory[t][i].cached_bytes) empty_cache_of((lab_device){(lab_device_type)t, i});
}

size_t lab_mem_cached_bytes(void) { return memory[LAB_DEV_CPU][0].cached_bytes; }
size_t lab_mem_cached_bytes_on(lab_device d) { return mem_of(d)->cached_bytes; }

static size_t rounded_size(size_t nbytes) { return (nbytes + 63) & ~(size_t)63; }

/* Device bytes for a block: from the cache, else the allocator; on a miss with a full cache,
 * the cache is given back and the allocation tried once more. NULL (with lab_fail) when out
 * of memory. */
static void *device_alloc(lab_device d, size_t nbytes) {
  const lab_device_ops *ops = lab_device_ops_of(d.type);
  size_t rounded = rounded_size(nbytes);
  if (rounded == 0) return NULL;
  void *data = cache_take(d, rounded);
  if (!data) data = ops->alloc(d.index, rounded);
  if (!data && mem_of(d)->cached_bytes) {
    empty_cache_of(d);
    data = ops->alloc(d.index, rounded);
  }
  if (!data) {
    char name[32];
    lab_fail("alloc", "out of memory allocating %zu bytes on %s (%lld bytes in use there)", nbytes,
             lab_device_str(d, name, sizeof name), (long long)mem_of(d)->account.current_total);
  }
  return data;
}

static void device_free(lab_device d, void *data, size_t nbytes) {
  size_t rounded = rounded_size(nbytes);
  if (!data) return;
  if (!cache_put(d, data, rounded)) lab_device_ops_of(d.type)->free(d.index, data, rounded);
}

lab_storage *lab_storage_new_on(lab_device dev, size_t nbytes, int zero) {
  if (!lab_device_ops_of(dev.type) || dev.index < 0 || dev.index >= MAX_INDEX) {
    lab_fail("alloc", "device type %d index %d is not available", (int)dev.type, dev.index);
    return NULL;
  }
  lab_storage *s = malloc(sizeof *s);
  if (!s) {
    lab_fail("alloc", "out of memory allocating a storage header");
    return NULL;
  }
  void *data = NULL;
  if (nbytes > 0 && !(data = device_alloc(dev, nbytes))) {
    free(s);
    return NULL;
  }
  if (zero && data) lab_device_ops_of(dev.type)->memset(dev.index, data, 0, rounded_size(nbytes));
  s->data = data;
  s->nbytes = nbytes;
  s->refcount = 1;
  s->tag = LAB_MEM_OTHER;
  s->device = dev;
  account_add(dev, s->tag, (int64_t)nbytes);
  return s;
}

lab_storage *lab_storage_new(size_t nbytes, int zero) { return lab_storage_new_on(lab_cpu(), nbytes, zero); }

void lab_storage_retain(lab_storage *s) { s->refcount++; }

void lab_storage_release(lab_storage *s) {
  if (!s || --s->refcount > 0) return;
  if (!s->data && s->nbytes > 0) { /* memory already given back (release_data) */
    free(s);
    return;
  }
  account_add(s->device, s->tag, -(int64_t)s->nbytes);
  device_free(s->device, s->data, s->nbytes);
  free(s);
}

void lab_storage_set_tag(lab_storage *s, lab_mem_tag tag) {
  if (!s->data && s->nbytes > 0) {
    s->tag = tag;
    return;
  }
  lab_mem_account *a = &mem_of(s->device)->account;
  account_add(s->device, s->tag, -(int64_t)s->nbytes);
  s->tag = tag;
  a->current[tag] += (int64_t)s->nbytes;
  a->current_total += (int64_t)s->nbytes;
  if (a->current[tag] > a->peak[tag]) a->peak[tag] = a->current[tag];
}

void lab_storage_release_data(lab_storage *s) {
  if (!s->data) return;
  device_free(s->device, s->data, s->nbytes);
  s->data = NULL;
  account_add(s->device, s->tag, -(int64_t)s->nbytes);
}

int lab_storage_restore_data(lab_storage *s) {
  if (s->data || s->nbytes == 0) return 0;
  void *data = device_alloc(s->device, s->nbytes);
  if (!data) return -1;
  s->data = data;
  account_add(s->device, s->tag, (int64_t)s->nbytes);
  return 0;
}
