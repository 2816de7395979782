/* Recovery after abandoned collectives (an interrupt, the watchdog, a stepper quit left a
 * request pending on some group): every rank calls lab_dist_recover at the same point.
 * - Groups of the world's host backend: the backend's recover op when it has one (MPI:
 *   mpi_recover.c completes every abandoned request, so groups keep their communicators);
 *   otherwise the world gets a fresh communicator (the abandoned requests stay with the old
 *   one, as MPI's rule for abandoned work requires).
 * - Groups of other backends (NCCL device groups): the ranks agree over the control channel
 *   whether any was poisoned, and the world's device communicator is made anew if so.
 * Other poisoned groups stay unusable and say so. */
#include "../error.h"
#include "control.h"
#include "devcomm.h"
#include "dist.h"

int lab_dist_recover(void) { return lab_dist_recover_aborted(0); }

int lab_dist_recover_aborted(int aborted) {
  lab_group *w = lab_dist_world();
  const lab_comm_backend *host = w->backend;
  int result = host->recover ? host->recover(aborted) : 0;
  int mine = 0, any = 0;
  for (int i = 0; i < lab_dist_group_count(); i++) {
    lab_group *g = lab_dist_group_at(i);
    if (g && g->poisoned && (!host->recover || g->backend != host)) mine = 1;
    if (g && g->device && g->device->poisoned) mine = 1; /* an aborted NCCL communicator */
  }
  lab_ctl_max(mine, &any, 0);
  if (!any) return result;
  if (!host->recover) {
    if (host->rebuild(w) < 0) return -1;
    w->poisoned = 0;
    result |= LAB_RECOVERED_NEW_WORLD;
  }
  if (lab_devcomm_rebuild(w) < 0) return -1;
  return result | LAB_RECOVERED_COMPLETED;
}
