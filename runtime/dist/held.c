/* Buffers kept alive for abandoned requests (see held.h): a growing list, emptied by recovery. */
#include "held.h"

#include <stdlib.h>

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
