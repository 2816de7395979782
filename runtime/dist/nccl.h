/* The NCCL backend of comm.h (nccl.c, compiled where CMake finds CUDA and NCCL), as devcomm.c
 * sees it: a GPU's identity, a unique id, and a device group over the members of a host group. */
#ifndef LAB_RUNTIME_DIST_NCCL_H
#define LAB_RUNTIME_DIST_NCCL_H

#include <stddef.h>

#include "group.h"

#define LAB_NCCL_ID_BYTES 128 /* sizeof(ncclUniqueId) */

/* "host/PCI bus id" of cuda device index into key; 0, or -1 after lab_fail. */
int lab_nccl_gpu_key(int index, char *key, size_t n);
/* A new unique id (the group's rank 0 makes it; the others receive it over the host group). */
int lab_nccl_unique_id(void *id);
/* Fills dev: a group over the members of host (same rank, size, world ranks, name) whose
 * backend is NCCL on cuda device index, with its own stream; waits (guarded in the REPL)
 * until every member has joined. 0, or -1 after lab_fail. */
int lab_nccl_group_init(lab_group *dev, lab_group *host, int index, const void *id);
const lab_comm_backend *lab_nccl_backend(void);
/* "NCCL 2.28.9" */
const char *lab_nccl_version(void);

#endif
