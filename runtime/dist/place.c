/* This rank's place in the world (place.h), as world set-up recorded it. */
#include "place.h"

#include <mpi.h>
#include <unistd.h>

/* a process that never set up a world is rank 0 of 1 */
static int world_rank, world_size = 1, local_rank, local_size = 1;
static char host[256];

void lab_place_set(int wrank, int wsize, int lrank, int lsize) {
  world_rank = wrank;
  world_size = wsize;
  local_rank = lrank;
  local_size = lsize;
  gethostname(host, sizeof host - 1);
}

int lab_ctl_rank(void) { return world_rank; }
int lab_ctl_size(void) { return world_size; }
int lab_ctl_local_rank(void) { return local_rank; }
int lab_ctl_local_size(void) { return local_size; }
const char *lab_ctl_host(void) { return host; }
void lab_ctl_abort(int code) { MPI_Abort(MPI_COMM_WORLD, code); }
