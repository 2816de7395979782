/* The caching allocator as the sim compile of cuda_device.c calls it (lab_ca_new/_malloc/_free
 * renamed lab_simrt_ca_* by shim/cuda_runtime.h): runtime/cuda/caching_allocator.c itself,
 * with its blocks told to the SIMT interpreter's memcheck as they are handed out and taken
 * back (sizes as asked), instead of the 2 and 20 MiB segments it takes from cudaMalloc, so a
 * kernel reading past a tensor or after its free is reported as it was without the cache.
 * Both are told in stream order (an item on the block's stream), as the allocator reuses a
 * block: kernels are stream work, so a block freed on the host right after the launch that
 * reads it (a reduction's scratch) is still that kernel's until its stream gets there, and a
 * block handed out again is the next op's from there on. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "../../kernels/simt/simt.h"
#include "../cuda/caching_allocator.h"
#include "simrt_internal.h"
#undef lab_ca_new /* here the names are the allocator's own */
#undef lab_ca_malloc
#undef lab_ca_free

lab_caching_allocator *lab_simrt_ca_new(lab_ca_backend backend);
void *lab_simrt_ca_malloc(lab_caching_allocator *a, size_t nbytes, void *stream);
void lab_simrt_ca_free(lab_caching_allocator *a, void *p);

/* block -> size asked, for the free (a chained hash on the address) */
#define NB 4096
typedef struct entry {
  struct entry *next;
  void *p;
  size_t n;
  void *stream;
} entry;
static entry *table[NB];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static unsigned slot(const void *p) { return (unsigned)(((uintptr_t)p >> 9) % NB); }

lab_caching_allocator *lab_simrt_ca_new(lab_ca_backend backend) { return lab_ca_new(backend); }

/* memcheck's note of a block, as an item on its stream */
typedef struct {
  void *p;
  size_t n;
  int live;
} note;
static int run_note(void *arg) {
  note *t = arg;
  if (t->live) lab_simt_note_alloc(t->p, t->n);
  else lab_simt_note_free(t->p, t->n);
  return 0;
}
static void note_on(void *stream, void *p, size_t n, int live) {
  note *t = malloc(sizeof *t);
  if (!t) return; /* memcheck then misses this block (out of host memory) */
  *t = (note){lab_simrt_kview(p), n, live};
  lab_simrt_enqueue((cudaStream_t)stream, run_note, t);
}

void *lab_simrt_ca_malloc(lab_caching_allocator *a, size_t nbytes, void *stream) {
  lab_simrt_in_allocator = 1;
  void *p = lab_ca_malloc(a, nbytes, stream);
  lab_simrt_in_allocator = 0;
  entry *e = p ? malloc(sizeof *e) : NULL;
  if (e) {
    *e = (entry){NULL, p, nbytes, stream};
    pthread_mutex_lock(&mu);
    e->next = table[slot(p)];
    table[slot(p)] = e;
    pthread_mutex_unlock(&mu);
    note_on(stream, p, nbytes, 1);
  }
  return p;
}

void lab_simrt_ca_free(lab_caching_allocator *a, void *p) {
  pthread_mutex_lock(&mu);
  entry **q = &table[slot(p)];
  while (*q && (*q)->p != p) q = &(*q)->next;
  entry *e = *q;
  if (e) *q = e->next;
  pthread_mutex_unlock(&mu);
  if (e) {
    note_on(e->stream, p, e->n, 0);
    free(e);
  }
  lab_simrt_in_allocator = 1;
  lab_ca_free(a, p);
  lab_simrt_in_allocator = 0;
}
