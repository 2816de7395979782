/* The MPI backend of comm.h (mpi.c), as world set-up sees it: the group over every process. */
#ifndef LAB_RUNTIME_DIST_MPI_BACKEND_H
#define LAB_RUNTIME_DIST_MPI_BACKEND_H

#include "group.h"

/* Fills *world with a group over MPI_COMM_WORLD (a duplicate of it, apart from the control
 * channel) and sets up the 2-byte types and reductions of bf16 and f16. MPI is initialised. */
int lab_mpi_world_group(lab_group *world);
const lab_comm_backend *lab_mpi_backend(void);

#endif
