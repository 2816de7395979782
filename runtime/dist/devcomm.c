/* The choice of communicator for device tensors and the device group of a group (devcomm.h).
 * The one place that knows whether NCCL was compiled in. */
#include "devcomm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../error.h"
#ifdef LLMLAB_HAVE_NCCL
#include "nccl.h"
static const int nccl_built = 1;
#else
static const int nccl_built = 0;
#endif

int lab_devcomm_plan(int n, const char (*keys)[LAB_GPU_KEY], const int *world_ranks, int built, char *why,
                     size_t len) {
  if (!built) {
    snprintf(why, len, "this llmlab was built without NCCL");
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
  if (a.type == LAB_DEV_CUDA && lab_device_eq(a, b) && plan == LAB_DEVPLAN_NCCL) return LAB_PATH_DEVICE;
  return LAB_PATH_STAGED;
}

/* this rank's GPU for the group: the default device's if it is cuda, else the one "cuda" names
 * (cuda:(node rank mod GPUs)) */
static int my_gpu(char *key, size_t n, int *index) {
  key[0] = 0;
  *index = 0;
  if (lab_device_count(LAB_DEV_CUDA) <= 0) return 0;
  lab_device d = lab_default_device();
  if (d.type != LAB_DEV_CUDA && lab_device_parse("nccl", "cuda", &d) < 0) return -1;
  *index = d.index;
#ifdef LLMLAB_HAVE_NCCL
  return lab_nccl_gpu_key(*index, key, n);
#else
  (void)n;
  return 0;
#endif
}

int lab_devcomm_setup(lab_group *g) {
  if (g->rank < 0) return 0;
  g->device_plan = LAB_DEVPLAN_STAGED;
  if (!nccl_built) {
    lab_devcomm_plan(0, NULL, NULL, 0, g->device_why, sizeof g->device_why);
    return 0;
  }
  char mine[LAB_GPU_KEY];
  char(*all)[LAB_GPU_KEY] = calloc((size_t)g->size, LAB_GPU_KEY);
  if (!all) return lab_fail("new_group", "out of memory");
  int rc = my_gpu(mine, sizeof mine, &g->device_index);
  if (rc < 0) mine[0] = 0; /* a GPU that cannot say its bus id: staged, with the reason below */
  if (g->backend->exchange(g, mine, all, LAB_GPU_KEY) < 0) {
    free(all);
    return -1;
  }
  g->device_plan = lab_devcomm_plan(g->size, (const char(*)[LAB_GPU_KEY])all, g->world_ranks, 1, g->device_why,
                                    sizeof g->device_why);
  free(all);
  return 0;
}

static const char *devname(lab_device d, char *buf, size_t n) { return lab_device_str(d, buf, n); }

int lab_devcomm_route(const char *op, lab_group *g, lab_device a, lab_device b, int p2p, lab_coll_path *path) {
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
#ifdef LLMLAB_HAVE_NCCL
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
  int rc = g->rank == 0 ? lab_nccl_unique_id(id) : 0;
  if (rc == 0) rc = g->backend->exchange(g, id, all, LAB_NCCL_ID_BYTES);
  if (rc == 0) rc = lab_nccl_group_init(dev, g, g->device_index, all);
  free(all);
  if (rc < 0) {
    free(dev);
    return NULL;
  }
  g->device = dev;
  return dev;
#else
  lab_fail("nccl", "this llmlab was built without NCCL");
  return NULL;
#endif
}

int lab_devcomm_rebuild(lab_group *g) {
  if (!g->device) return 0;
  return g->device->backend->rebuild(g->device);
}

void lab_devcomm_free(lab_group *g) {
  if (!g->device) return;
  g->device->backend->free_group(g->device);
  free(g->device);
  g->device = NULL;
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
    snprintf(buf, n, "mpi, staged through host memory: %s",
             a.type == LAB_DEV_CUDA ? g->device_why : "collectives on sim tensors always stage (a testing device)");
  }
  return buf;
}
