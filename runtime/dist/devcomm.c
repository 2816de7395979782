/* The choice of communicator for device tensors and the device group of a group (devcomm.h).
 * NCCL is a plugin (runtime/cuda/loader.h), opened here at the first collective on cuda tensors
 * of a group, which is also when the group's plan is decided: a group made before any rank
 * touched CUDA (the world, at start) then loads nothing. */
#include "devcomm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cuda/loader.h"
#include "../error.h"
#include "dist.h" /* lab_dist_backend, lab_dist_sim_nccl_calls: the public side of this file */
#include "held.h"
#include "nccl.h" /* LAB_NCCL_ID_BYTES; the functions are reached through the plugin */

/* The NCCL of a device type: the plugin for cuda; for sim, nccl.c compiled against
 * runtime/simrt's NCCL on MPI (NULL where the build or the sim's table has none). */
static const lab_nccl_plugin *nccl_of(lab_device_type t) {
  if (t == LAB_DEV_CUDA) return lab_nccl_load();
#ifdef LLMLAB_HAVE_SIMT
  if (t == LAB_DEV_SIM) return lab_simrt_nccl_plugin();
#endif
  return NULL;
}
static const char *nccl_why(lab_device_type t) {
  return t == LAB_DEV_CUDA ? lab_nccl_why() : "the sim device has no NCCL here (a build without the SIMT "
                                              "interpreter, LLMLAB_SIMRT=0, LLMLAB_SIMT=0 or LLMLAB_SIM_NCCL=0)";
}

long lab_dist_sim_nccl_calls(void) {
#ifdef LLMLAB_HAVE_SIMT
  return lab_simrt_nccl_calls();
#else
  return 0;
#endif
}

long lab_dist_sim_nccl_events(void) {
#ifdef LLMLAB_HAVE_SIMT
  return lab_simrt_nccl_events_created();
#else
  return 0;
#endif
}

int lab_devcomm_plan(int n, const char (*keys)[LAB_GPU_KEY], const int *world_ranks, int built, char *why,
                     size_t len) {
  if (!built) {
    snprintf(why, len, "NCCL is not usable");
    return LAB_DEVPLAN_STAGED;
  }
  for (int i = 0; i < n; i++)
    if (!keys[i][0]) {
      snprintf(why, len, "world rank %d has no GPU", world_ranks[i]);
      return LAB_DEVPLAN_STAGED;
    }
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++)
      if (strncmp(keys[i], keys[j], LAB_GPU_KEY) == 0) {
        snprintf(why, len, "world ranks %d and %d share GPU %.*s; NCCL refuses two ranks of one communicator on "
                 "one GPU (duplicate GPU)", world_ranks[i], world_ranks[j], LAB_GPU_KEY - 1, keys[i]);
        return LAB_DEVPLAN_STAGED;
      }
  why[0] = 0;
  return LAB_DEVPLAN_NCCL;
}

lab_coll_path lab_coll_path_of(lab_device a, lab_device b, int plan) {
  if (a.type == LAB_DEV_CPU && b.type == LAB_DEV_CPU) return LAB_PATH_HOST;
  if (!lab_device_eq(a, b)) return LAB_PATH_STAGED;
  if (a.type == LAB_DEV_CUDA && plan == LAB_DEVPLAN_NCCL) return LAB_PATH_DEVICE;
  if (a.type == LAB_DEV_SIM && plan == LAB_DEVPLAN_SIM_NCCL) return LAB_PATH_DEVICE;
  return LAB_PATH_STAGED;
}

/* this rank's GPU of type t for the group: the default device's if it is of that type, else the
 * one "cuda" ("sim") names (cuda:(node rank mod GPUs)) */
static int my_gpu(lab_device_type t, char *key, size_t n, int *index) {
  key[0] = 0;
  *index = 0;
  if (lab_device_count(t) <= 0) return 0;
  lab_device d = lab_default_device();
  if (d.type != t && lab_device_parse("nccl", t == LAB_DEV_CUDA ? "cuda" : "sim", &d) < 0) return -1;
  *index = d.index;
  const lab_nccl_plugin *nccl = nccl_of(t);
  return nccl ? nccl->gpu_key(*index, key, n) : 0;
}

/* The group's plan is decided at its first collective on cuda tensors (lab_devcomm_route), not
 * when it is made: deciding needs every member's GPU, which would load CUDA on every rank at
 * start for the world. */
int lab_devcomm_setup(lab_group *g) {
  g->device_plan = LAB_DEVPLAN_UNDECIDED;
  g->device_why[0] = 0;
  return 0;
}

/* Every member calls this in the same collective (the first on cuda tensors of g): NCCL where
 * NCCL loads and every member has a GPU of its own. A member whose tensors are cpu while the
 * others' are cuda is a mismatch checked mode reports only after this exchange. */
static int decide(lab_group *g, lab_device_type t) {
  if (g->rank < 0) return 0;
  g->device_plan = LAB_DEVPLAN_STAGED;
  int built = nccl_of(t) != NULL;
  /* a rank where NCCL does not load still takes part in the exchange, with no GPU key: the
   * others then stage too ("world rank N has no GPU") */
  if (!built) snprintf(g->device_why, sizeof g->device_why, "NCCL is not usable: %s", nccl_why(t));
  char mine[LAB_GPU_KEY];
  char(*all)[LAB_GPU_KEY] = calloc((size_t)g->size, LAB_GPU_KEY);
  if (!all) return lab_fail("nccl", "out of memory");
  int rc = built ? my_gpu(t, mine, sizeof mine, &g->device_index) : 0;
  if (rc < 0 || !built) mine[0] = 0; /* no NCCL, or a GPU that cannot say its bus id: staged */
  if (lab_dist_exchange_held(g, mine, all, LAB_GPU_KEY) < 0) {
    free(all);
    return -1;
  }
  if (built) {
    g->device_plan = lab_devcomm_plan(g->size, (const char(*)[LAB_GPU_KEY])all, g->world_ranks, 1, g->device_why,
                                      sizeof g->device_why);
    if (t == LAB_DEV_SIM && g->device_plan == LAB_DEVPLAN_NCCL) g->device_plan = LAB_DEVPLAN_SIM_NCCL;
    /* a member without NCCL sent no key: the plan above says "world rank N has no GPU" */
  }
  free(all);
  return 0;
}

int lab_devcomm_decide(lab_group *g, lab_device a) {
  if (g->rank < 0 || g->device_plan != LAB_DEVPLAN_UNDECIDED || a.type == LAB_DEV_CPU) return 0;
  /* sim tensors decide only where the sim has NCCL (every rank of a job has the same build
   * and environment); else they stage, as before, and the plan stays open for cuda tensors */
  if (a.type == LAB_DEV_SIM && !nccl_of(LAB_DEV_SIM)) return 0;
  return decide(g, a.type);
}

static const char *devname(lab_device d, char *buf, size_t n) { return lab_device_str(d, buf, n); }

int lab_devcomm_route(const char *op, lab_group *g, lab_device a, lab_device b, int p2p, lab_coll_path *path) {
  /* a send or recv involves two members: it cannot decide, and stages until a collective has */
  if (!p2p && (lab_devcomm_decide(g, a) < 0 || lab_devcomm_decide(g, b) < 0)) return -1;
  *path = lab_coll_path_of(a, b, g->device_plan);
  if (*path == LAB_PATH_DEVICE && a.index != g->device_index) {
    char s[32];
    return lab_fail(op, "the NCCL communicator of %s is on cuda:%d but the tensor is on %s", g->name, g->device_index,
                    devname(a, s, sizeof s));
  }
  /* making the communicator needs every member: a send or recv before any collective stages */
  if (*path == LAB_PATH_DEVICE && p2p && !g->device) *path = LAB_PATH_STAGED;
  if (*path == LAB_PATH_STAGED && (a.type == LAB_DEV_CUDA || b.type == LAB_DEV_CUDA) &&
      g->device_plan == LAB_DEVPLAN_STAGED && !g->device_said) {
    g->device_said = 1;
    if (g->rank == 0)
      fprintf(stderr, "llmlab: collectives on cuda tensors of %s go through MPI with host staging: %s\n", g->name,
              g->device_why);
  }
  return 0;
}

lab_group *lab_devcomm_group(lab_group *g) {
  if (g->device) return g->device;
  lab_device_type t = g->device_plan == LAB_DEVPLAN_SIM_NCCL ? LAB_DEV_SIM : LAB_DEV_CUDA;
  const lab_nccl_plugin *nccl = nccl_of(t);
  if (!nccl) {
    lab_fail("nccl", "NCCL is not usable: %s", nccl_why(t));
    return NULL;
  }
  unsigned char id[LAB_NCCL_ID_BYTES] = {0};
  unsigned char *all = calloc((size_t)g->size, LAB_NCCL_ID_BYTES);
  lab_group *dev = calloc(1, sizeof *dev);
  if (!all || !dev) {
    free(all);
    free(dev);
    lab_fail("nccl", "out of memory");
    return NULL;
  }
  /* rank 0's unique id reaches every member over the host group's check channel */
  int rc = g->rank == 0 ? nccl->unique_id(id) : 0;
  if (rc == 0) rc = lab_dist_exchange_held(g, id, all, LAB_NCCL_ID_BYTES);
  dev->wait = g->wait; /* the device group waits as its host group does */
  if (rc == 0) rc = nccl->group_init(dev, g, g->device_index, all);
  free(all);
  if (rc < 0) {
    free(dev);
    return NULL;
  }
  /* g owns it (lab_devcomm_free): work objects on it retain and release it, which must never
   * reach 0 and free it (its world ranks are g's) while g still points at it */
  dev->refs = 1;
  g->device = dev;
  return dev;
}

int lab_devcomm_rebuild(lab_group *g) {
  if (!g->device) return 0;
  return g->device->backend->rebuild(g->device);
}

const char *lab_devcomm_describe(lab_group *g, lab_device a, char *buf, size_t n) {
  char s[32];
  if (g->rank < 0) {
    snprintf(buf, n, "none: this rank is not a member of %s", g->name);
    return buf;
  }
  switch (lab_coll_path_of(a, a, g->device_plan)) {
  case LAB_PATH_HOST: snprintf(buf, n, "mpi"); break;
  case LAB_PATH_DEVICE: snprintf(buf, n, "nccl (%s)", devname(a, s, sizeof s)); break;
  default:
    if ((a.type == LAB_DEV_CUDA || (a.type == LAB_DEV_SIM && nccl_of(LAB_DEV_SIM))) &&
        g->device_plan == LAB_DEVPLAN_UNDECIDED) {
      snprintf(buf, n, "undecided: the first collective on cuda tensors of %s chooses nccl (every member has a GPU "
               "of its own and NCCL loads) or mpi staged through host memory", g->name);
      break;
    }
    snprintf(buf, n, "mpi, staged through host memory: %s",
             a.type == LAB_DEV_CUDA || (a.type == LAB_DEV_SIM && g->device_plan != LAB_DEVPLAN_UNDECIDED)
                 ? (g->device_plan == LAB_DEVPLAN_STAGED ? g->device_why : "the group's NCCL is another device type's")
                 : "collectives on sim tensors stage here (the sim has no NCCL in this build or environment)");
  }
  return buf;
}

const char *lab_dist_backend(lab_group *g, lab_device d, char *buf, size_t n) {
  if (lab_devcomm_decide(g, d) < 0) return NULL;
  return lab_devcomm_describe(g, d, buf, n);
}
