/* The process world: MPI start-up and shut-down and this rank's place in it (place.h: world
 * and node rank, host name). The world is MPI's on every backend: NCCL communicators are built over it
 * (their unique id travels over MPI), and the shell's control channel runs on it. */
#ifndef LAB_RUNTIME_DIST_WORLD_H
#define LAB_RUNTIME_DIST_WORLD_H

#include "place.h" /* this rank's place in the world, which set-up records */

/* Initialise the process world (MPI_Init): the world group, the control channel, the board.
 * A process not started by mpirun is a world of 1. */
int lab_ctl_init(int *argc, char ***argv);
void lab_ctl_finalize(void);

#endif
