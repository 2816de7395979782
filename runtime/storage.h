/* Reference-counted tensor storage on a device, with a memory account per device: every
 * allocation carries a tag (param, grad, optimizer state, activation, comm buffer, other) and
 * the device's account keeps current and peak bytes per tag, so memory reports are measured,
 * not estimated. The bytes come from the device's allocator (runtime/device.h), which caches
 * freed blocks itself; a device's bytes are charged to its own account only. */
#ifndef LAB_RUNTIME_STORAGE_H
#define LAB_RUNTIME_STORAGE_H

#include <stddef.h>
#include <stdint.h>

#include "device.h"

/* X(enum suffix, name): what a storage's bytes are for (lab.mem.report's categories);
 * lab_mem_tag and lab_mem_tag_name's table come from this list. */
#define LAB_MEM_TAG_LIST(X)                                                                      \
  X(OTHER, "other") X(PARAM, "param") X(GRAD, "grad") X(OPTIM, "optimizer")                     \
  X(ACTIVATION, "activation") X(COMM, "comm")

#define LAB_MEM_ENUM_(e, name) LAB_MEM_##e,
typedef enum { LAB_MEM_TAG_LIST(LAB_MEM_ENUM_) LAB_MEM_NTAGS } lab_mem_tag;
#undef LAB_MEM_ENUM_

typedef struct lab_storage {
  void *data; /* memory of `device`: host code may dereference it only when that is the cpu */
  size_t nbytes;
  int refcount;
  lab_mem_tag tag;
  lab_device device;
} lab_storage;

/* Zero-filled when `zero` is set. Returns NULL (with lab_fail) when out of memory. */
lab_storage *lab_storage_new(size_t nbytes, int zero); /* on the cpu */
lab_storage *lab_storage_new_on(lab_device dev, size_t nbytes, int zero);
void lab_storage_retain(lab_storage *s);
void lab_storage_release(lab_storage *s);
void lab_storage_set_tag(lab_storage *s, lab_mem_tag tag);
/* Frees the memory but keeps the object (data NULL); restore allocates it again. */
void lab_storage_release_data(lab_storage *s);
int lab_storage_restore_data(lab_storage *s);

typedef struct {
  int64_t current[LAB_MEM_NTAGS];
  int64_t peak[LAB_MEM_NTAGS];
  int64_t current_total, peak_total;
  int64_t allocated_since_mark; /* bytes allocated on this device since lab_mem_mark() */
} lab_mem_account;

/* The cpu's account. */
const lab_mem_account *lab_mem_get(void);
const lab_mem_account *lab_mem_get_device(lab_device dev);
const char *lab_mem_tag_name(lab_mem_tag tag);
void lab_mem_mark(void);
/* Every device's bytes allocated since lab_mem_mark(), and every device's bytes in use: what
 * steps Lua's collector (lua/l_util.c), which does not see tensor bytes. */
int64_t lab_mem_allocated_since_mark(void);
int64_t lab_mem_live_bytes(void);
void lab_mem_reset_peak(void);
/* Freed blocks the device's allocator keeps for reuse (not counted as tensor memory), and
 * giving them back (every device allocated on). */
size_t lab_mem_cached_bytes(void);
size_t lab_mem_cached_bytes_on(lab_device dev);
void lab_mem_empty_cache(void);

#endif
