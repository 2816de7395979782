/* Storage allocation and the per-device memory accounts. The bytes come from the device's table
 * (alloc/free), whose allocator keeps its own cache of freed blocks (device.h); storage keeps
 * only the refcount, the tag and the account of the device the bytes are on. */
#include "storage.h"

#include <stdlib.h>
#include <string.h>

#include "error.h"

#define MAX_INDEX 16 /* devices of one type */

typedef struct {
  lab_mem_account account;
  int used; /* an allocation was made here: empty_cache visits only these (never opens a plugin) */
} device_memory;

static device_memory memory[LAB_NDEVTYPES][MAX_INDEX];
static int64_t allocated_since_mark; /* every device's bytes: drives Lua's GC */

static device_memory *mem_of(lab_device d) { return &memory[d.type][d.index]; }

#define LAB_MEM_NAME_(e, name) name,
static const char *tag_names[LAB_MEM_NTAGS] = {LAB_MEM_TAG_LIST(LAB_MEM_NAME_)};
#undef LAB_MEM_NAME_

const char *lab_mem_tag_name(lab_mem_tag tag) { return tag_names[tag]; }
const lab_mem_account *lab_mem_get(void) { return &memory[LAB_DEV_CPU][0].account; }
const lab_mem_account *lab_mem_get_device(lab_device d) { return &mem_of(d)->account; }

void lab_mem_mark(void) {
  allocated_since_mark = 0;
  for (int t = 0; t < LAB_NDEVTYPES; t++)
    for (int d = 0; d < MAX_INDEX; d++) memory[t][d].account.allocated_since_mark = 0;
}
int64_t lab_mem_allocated_since_mark(void) { return allocated_since_mark; }

int64_t lab_mem_live_bytes(void) {
  int64_t sum = 0;
  for (int t = 0; t < LAB_NDEVTYPES; t++)
    for (int d = 0; d < MAX_INDEX; d++) sum += memory[t][d].account.current_total;
  return sum;
}

void lab_mem_reset_peak(void) {
  for (int t = 0; t < LAB_NDEVTYPES; t++)
    for (int d = 0; d < MAX_INDEX; d++) {
      lab_mem_account *a = &memory[t][d].account;
      for (int i = 0; i < LAB_MEM_NTAGS; i++) a->peak[i] = a->current[i];
      a->peak_total = a->current_total;
    }
}

/* bytes of tag on dev's account, and nowhere else */
static void account_add(lab_device dev, lab_mem_tag tag, int64_t bytes) {
  lab_mem_account *a = &mem_of(dev)->account;
  a->current[tag] += bytes;
  a->current_total += bytes;
  if (a->current[tag] > a->peak[tag]) a->peak[tag] = a->current[tag];
  if (a->current_total > a->peak_total) a->peak_total = a->current_total;
  if (bytes > 0) {
    a->allocated_since_mark += bytes;
    allocated_since_mark += bytes;
  }
}

void lab_mem_empty_cache(void) {
  for (int t = 0; t < LAB_NDEVTYPES; t++)
    for (int i = 0; i < MAX_INDEX; i++) {
      const lab_device_ops *ops = memory[t][i].used ? lab_device_ops_of((lab_device_type)t) : NULL;
      if (ops && ops->empty_cache) ops->empty_cache(i);
    }
}

size_t lab_mem_cached_bytes_on(lab_device d) {
  const lab_device_ops *ops = mem_of(d)->used ? lab_device_ops_of(d.type) : NULL;
  return ops && ops->cached_bytes ? ops->cached_bytes(d.index) : 0;
}
size_t lab_mem_cached_bytes(void) { return lab_mem_cached_bytes_on(lab_cpu()); }

static size_t rounded_size(size_t nbytes) { return (nbytes + 63) & ~(size_t)63; }

/* Device bytes for a block from the device's allocator (which tries its own cache, and gives it
 * back before it says out of memory); NULL with lab_fail. */
static void *device_alloc(const lab_device_ops *ops, lab_device d, size_t nbytes) {
  void *data = ops->alloc(d.index, rounded_size(nbytes));
  mem_of(d)->used = 1;
  if (!data) {
    char name[32];
    lab_fail("alloc", "out of memory allocating %zu bytes on %s (%lld bytes in use there)", nbytes,
             lab_device_str(d, name, sizeof name), (long long)mem_of(d)->account.current_total);
  }
  return data;
}

static void device_free(lab_storage *s) {
  if (s->data) lab_device_ops_of(s->device.type)->free(s->device.index, s->data, rounded_size(s->nbytes));
}

lab_storage *lab_storage_new_on(lab_device dev, size_t nbytes, int zero) {
  const lab_device_ops *ops = lab_device_ops_of(dev.type); /* once per allocation */
  if (!ops || dev.index < 0 || dev.index >= MAX_INDEX) {
    lab_fail("alloc", "device type %d index %d is not available", (int)dev.type, dev.index);
    return NULL;
  }
  lab_storage *s = malloc(sizeof *s);
  if (!s) {
    lab_fail("alloc", "out of memory allocating a storage header");
    return NULL;
  }
  void *data = NULL;
  if (nbytes > 0 && !(data = device_alloc(ops, dev, nbytes))) {
    free(s);
    return NULL;
  }
  if (zero && data) ops->memset(dev.index, data, 0, rounded_size(nbytes));
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
  device_free(s);
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
  device_free(s);
  s->data = NULL;
  account_add(s->device, s->tag, -(int64_t)s->nbytes);
}

int lab_storage_restore_data(lab_storage *s) {
  if (s->data || s->nbytes == 0) return 0;
  void *data = device_alloc(lab_device_ops_of(s->device.type), s->device, s->nbytes);
  if (!data) return -1;
  s->data = data;
  account_add(s->device, s->tag, (int64_t)s->nbytes);
  return 0;
}
