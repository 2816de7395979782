/* Buffers kept alive for abandoned requests (see held.h): a growing list, emptied by recovery. */
#include "held.h"

#include <stdlib.h>
#include <string.h>

#include "../error.h"

typedef struct {
  lab_tensor *t;
  void *p;
} held_item;

static held_item *items;
static int nitems, cap;
static int64_t abandoned;

void lab_dist_note_abandoned(void) { abandoned++; }
int64_t lab_dist_abandoned_count(void) { return abandoned; }

static void hold(lab_tensor *t, void *p) {
  if (nitems == cap) {
    int ncap = cap ? 2 * cap : 16;
    held_item *n = realloc(items, sizeof *n * (size_t)ncap);
    if (!n) return; /* out of memory: the buffer leaks rather than being freed under MPI */
    items = n;
    cap = ncap;
  }
  items[nitems++] = (held_item){t, p};
}

void lab_dist_hold_tensor(lab_tensor *t) {
  if (!t) return;
  lab_tensor_retain(t);
  hold(t, NULL);
}

void lab_dist_hold_memory(void *p) {
  if (p) hold(NULL, p);
}

void lab_dist_release_held(void) {
  for (int i = 0; i < nitems; i++) {
    if (items[i].t) lab_tensor_release(items[i].t);
    free(items[i].p);
  }
  nitems = 0;
}

void lab_dist_keep_held_forever(void) { nitems = 0; /* deliberately leaked */ }

int lab_dist_held_count(void) { return nitems; }

/* mine and every member's answer in one block of this file's: a guarded exchange that gives up
 * leaves its request to recovery, which may still read mine and write the answers later */
int lab_dist_exchange_held(lab_group *g, const void *mine, void *all, int nbytes) {
  char *block = malloc((size_t)nbytes * ((size_t)g->size + 1));
  if (!block) return lab_fail("exchange", "out of memory");
  memcpy(block, mine, (size_t)nbytes);
  int64_t before = abandoned;
  if (g->backend->exchange(g, block, block + nbytes, nbytes) < 0) {
    if (abandoned != before) lab_dist_hold_memory(block);
    else free(block);
    return -1;
  }
  memcpy(all, block + nbytes, (size_t)nbytes * (size_t)g->size);
  free(block);
  return 0;
}
