/* Which communicator carries a collective on device tensors, and the device communicator of a
 * group. CPU tensors go to the group's host backend (MPI). CUDA tensors go to NCCL when it is
 * compiled in and every member of the group drives a GPU of its own; NCCL refuses two ranks of
 * one communicator on the same GPU ("Duplicate GPU detected"), so when members share a GPU (or
 * NCCL is absent, or the tensors are of mixed devices) the collective runs through MPI on host
 * copies (dist.c's staged path), and the first such collective on a group says why, once. NCCL
 * is a plugin (runtime/cuda/loader.h) opened at that first collective. Sim tensors take the
 * same path with nccl.c's second build over runtime/simrt's NCCL on MPI (each process's sim
 * GPUs are its own), or stage where the sim has none; a group's plan is decided by the first
 * device type it meets, and the other type's tensors then stage. The choice
 * is plain logic (lab_devcomm_plan, lab_coll_path_of), tested on the CPU; the NCCL calls are in
 * nccl.c. */
#ifndef LAB_RUNTIME_DIST_DEVCOMM_H
#define LAB_RUNTIME_DIST_DEVCOMM_H

#include <stddef.h>

#include "../device.h"
#include "group.h"

/* SIM_NCCL: the plan NCCL, decided for sim tensors (runtime/simrt's NCCL on MPI runs nccl.c) */
enum { LAB_DEVPLAN_UNDECIDED = 0, LAB_DEVPLAN_NCCL, LAB_DEVPLAN_STAGED, LAB_DEVPLAN_SIM_NCCL };
typedef enum { LAB_PATH_HOST, LAB_PATH_STAGED, LAB_PATH_DEVICE } lab_coll_path;

/* A GPU's identity across the job: "host/PCI bus id" (empty: this rank has no GPU). */
#define LAB_GPU_KEY 96

/* The plan for a group of n members whose GPUs are keys[i] (world ranks world_ranks[i]):
 * LAB_DEVPLAN_NCCL when NCCL is built and every member has a GPU that no other member has,
 * else LAB_DEVPLAN_STAGED with the reason in why ("world ranks 0 and 1 share GPU node1/0000:3b:00.0;
 * NCCL refuses duplicate GPUs ..."). */
int lab_devcomm_plan(int n, const char (*keys)[LAB_GPU_KEY], const int *world_ranks, int nccl_built, char *why,
                     size_t len);

/* The path of a collective on tensors of devices a and b (b = a for one tensor) on a group whose
 * plan is `plan`: HOST for cpu tensors, DEVICE for cuda tensors of one device index under an NCCL
 * plan, STAGED otherwise. */
lab_coll_path lab_coll_path_of(lab_device a, lab_device b, int plan);

/* A new group's plan starts undecided (every member calls this, right after the group is made):
 * lab_devcomm_route decides it at the group's first collective on cuda tensors, where the
 * members load NCCL (a plugin) and exchange their GPU keys over the group's host backend, so
 * that making a group (the world, at start) loads no CUDA library. 0. */
int lab_devcomm_setup(lab_group *g);

/* The path of a collective on tensors of devices a, b on g (p2p: a send or recv, which takes
 * NCCL only once the group's communicator exists, since making it needs every member). Says
 * once per group why a GPU collective is staged. -1 after lab_fail (a tensor on another GPU
 * than the group's communicator). */
int lab_devcomm_route(const char *op, lab_group *g, lab_device a, lab_device b, int p2p, lab_coll_path *path);
/* g's device group (backend NCCL), made at its first use: every member must call this at the
 * same collective (the collectives call it after the checked-mode agreement). NULL after lab_fail. */
lab_group *lab_devcomm_group(lab_group *g);

/* After recovery: the device group of g (if any) gets a fresh communicator. */
int lab_devcomm_rebuild(lab_group *g);

/* Decides g's plan now when it is undecided and a is a cuda device: collective (every member
 * of g calls it, as at the group's first collective on cuda tensors); 0 or -1. lab.dist.backend
 * calls it so that it can answer for cuda tensors before any collective. */
int lab_devcomm_decide(lab_group *g, lab_device a);

/* Collectives and sends/recvs the sim's NCCL shim posted in this process (0 without one):
 * lab.cuda.sim_nccl_calls, so a test can see the NCCL path was taken. */
long lab_devcomm_sim_nccl_calls(void);
/* CUDA events the sim's build of nccl.c created (its pool's misses): lab.cuda.sim_nccl_events */
long lab_devcomm_sim_nccl_events(void);

/* "nccl (cuda:0)" or "mpi, staged through host memory: <why>" for lab.dist.backend_of. */
const char *lab_devcomm_describe(lab_group *g, lab_device a, char *buf, size_t n);

#endif
