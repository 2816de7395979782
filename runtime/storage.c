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

lab_storage *lab_storage_new(size_t nbytes, int zero) {
  lab_storage *s = malloc(sizeof *s);
  size_t rounded = (nbytes + 63) & ~(size_t)63;
  void *data = NULL;
  if (s && rounded > 0) data = aligned_alloc(64, rounded);
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
  account_add(s->tag, -(int64_t)s->nbytes);
  free(s->data);
  free(s);
}

void lab_storage_set_tag(lab_storage *s, lab_mem_tag tag) {
  account_add(s->tag, -(int64_t)s->nbytes);
  s->tag = tag;
  account.current[tag] += (int64_t)s->nbytes;
  account.current_total += (int64_t)s->nbytes;
  if (account.current[tag] > account.peak[tag]) account.peak[tag] = account.current[tag];
}
