/* The registry of live groups (group.h): the world in slot 0, new groups in the first free
 * slot, freed when their last holder releases them; the session's wait policy and refusal. */
#include "group.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../error.h"

#define MAX_GROUPS 256

static lab_group *groups[MAX_GROUPS];
static int ngroups;
static lab_group *default_group;
static lab_wait_policy policy;
static const char *refused_by, *refused_why; /* lab_dist_refuse_collectives */

lab_wait_policy *lab_group_policy(void) { return &policy; }
void lab_dist_set_guarded(int on) { policy.guarded = on; }
int lab_dist_guarded(void) { return policy.guarded; }
void lab_dist_set_watchdog(double seconds) { policy.watchdog = seconds; }
double lab_dist_watchdog(void) { return policy.watchdog; }
void lab_dist_set_traceback(const char *tb) { snprintf(policy.traceback, sizeof policy.traceback, "%s", tb ? tb : ""); }
const char *lab_dist_call_traceback(void) { return policy.traceback; }

void lab_dist_refuse_collectives(const char *who, const char *why) {
  refused_by = who;
  refused_why = why;
}

int lab_group_refusal(const char *op) {
  return refused_by ? lab_fail(refused_by, "%s %s", op, refused_why ? refused_why : "is refused here") : 0;
}

/* The first free slot (a freed group's) or a new one; -1 when all MAX_GROUPS are live. */
static int free_slot(void) {
  for (int i = 1; i < ngroups; i++)
    if (!groups[i]) return i;
  return ngroups < MAX_GROUPS ? ngroups : -1;
}

static void add_group(lab_group *g) {
  int i = ngroups ? free_slot() : 0;
  if (i < 0) return;
  g->id = i;
  g->wait = &policy;
  groups[i] = g;
  if (i == ngroups) ngroups++;
}

/* The world's device plan starts undecided (zero, as devcomm.h's lab_devcomm_setup leaves it):
 * its first collective on cuda tensors decides it. */
void lab_dist_register_world(lab_group *world) {
  world->id = 0;
  snprintf(world->name, sizeof world->name, "world");
  add_group(world);
}

lab_group *lab_dist_world(void) { return ngroups ? groups[0] : NULL; }
void lab_dist_set_default(lab_group *g) { default_group = g; }
lab_group *lab_dist_default(void) { return default_group ? default_group : lab_dist_world(); }
int lab_dist_world_rank(void) {
  lab_group *w = lab_dist_world();
  return w ? w->rank : 0;
}
int lab_dist_group_count(void) { return ngroups; }
lab_group *lab_dist_group_at(int i) { return i >= 0 && i < ngroups ? groups[i] : NULL; }

/* A new group from the backend's split; calloc leaves its device plan undecided (devcomm.h). */
static lab_group *group_from_split(lab_group *parent, int color, int key, const char *what) {
  if (lab_group_refusal(what) < 0) return NULL;
  if (free_slot() < 0) {
    lab_fail(what, "%d process groups are alive; destroy the ones no longer needed (group:destroy(), or drop "
             "every reference so the collector frees them)", MAX_GROUPS);
    return NULL;
  }
  lab_group *g = calloc(1, sizeof *g);
  if (!g) {
    lab_fail(what, "out of memory");
    return NULL;
  }
  g->backend = parent->backend;
  g->world_size = parent->world_size;
  if (parent->backend->split(parent, color, key, g) < 0) {
    free(g);
    return NULL;
  }
  g->refs = 1;
  add_group(g);
  return g;
}

lab_group *lab_dist_new_group(lab_group *parent, int n, const int *world_ranks) {
  int me = lab_dist_world_rank(), pos = -1;
  for (int i = 0; i < n; i++) {
    if (world_ranks[i] < 0 || world_ranks[i] >= parent->world_size) {
      lab_fail("new_group", "rank %d is not in the world of %d ranks", world_ranks[i], parent->world_size);
      return NULL;
    }
    for (int j = 0; j < i; j++)
      if (world_ranks[j] == world_ranks[i]) {
        lab_fail("new_group", "rank %d is listed twice", world_ranks[i]);
        return NULL;
      }
    if (world_ranks[i] == me) pos = i;
  }
  lab_group *g = group_from_split(parent, pos >= 0 ? 1 : -1, pos, "new_group");
  if (!g) return NULL;
  int len = 0;
  len += snprintf(g->name + len, sizeof g->name - (size_t)len, "group%d[", g->id);
  for (int i = 0; i < n && len < (int)sizeof g->name - 8; i++)
    len += snprintf(g->name + len, sizeof g->name - (size_t)len, i ? ",%d" : "%d", world_ranks[i]);
  snprintf(g->name + len, sizeof g->name - (size_t)len, "]");
  if (pos < 0) { /* a non-member keeps the member list for its error messages */
    g->size = n;
    g->world_ranks = malloc(sizeof(int) * (size_t)(n ? n : 1));
    if (g->world_ranks) memcpy(g->world_ranks, world_ranks, sizeof(int) * (size_t)n);
  }
  return g;
}

lab_group *lab_dist_split(lab_group *parent, int color, int key) {
  lab_group *g = group_from_split(parent, color, key, "split");
  if (g) snprintf(g->name, sizeof g->name, "group%d(color %d)", g->id, color);
  return g;
}

void lab_dist_group_retain(lab_group *g) {
  if (g) g->refs++;
}

void lab_dist_group_release(lab_group *g) {
  if (g && g->id != 0 && --g->refs <= 0) lab_dist_free_group(g);
}

/* The device group (NCCL) shares world_ranks with g, which owns it. */
void lab_dist_free_group(lab_group *g) {
  if (!g || g->id == 0) return;
  for (int i = 0; i < ngroups; i++)
    if (groups[i] == g) groups[i] = NULL;
  if (g->device) {
    g->device->backend->free_group(g->device);
    free(g->device);
  }
  g->backend->free_group(g);
  free(g->world_ranks);
  free(g);
}

void lab_dist_reset_stats(void) {
  for (int i = 0; i < ngroups; i++)
    if (groups[i]) memset(groups[i]->stats, 0, sizeof groups[i]->stats);
}
