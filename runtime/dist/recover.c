/* Recovery after abandoned collectives (an interrupt, the watchdog, a stepper quit left a
 * request pending on some group): every rank calls lab_dist_recover at the same point.
 * - Groups of the world's host backend: the backend's recover op when it has one (MPI:
 *   mpi_recover.c completes every abandoned request, so groups keep their communicators);
 *   otherwise the world gets a fresh communicator (the abandoned requests stay with the old
 *   one, as MPI's rule for abandoned work requires).
 * - Groups of other backends (NCCL device groups): the ranks agree whether any was poisoned
 *   (in the host backend's first exchange, with whether the chunk failed anywhere; over the
 *   control channel where it has no recover op), and the world's device communicator is made
 *   anew if so.
 * Other poisoned groups stay unusable and say so. */
#include "../error.h"
#include "control.h"
#include "devcomm.h"
#include "dist.h"

int lab_dist_recover(void) { return lab_dist_recover_after(0, NULL); }

int lab_dist_recover_after(int failed_here, int *aborted) {
  lab_group *w = lab_dist_world();
  const lab_comm_backend *host = w->backend;
  int device_here = 0; /* groups the host backend's recovery does not repair */
  for (int i = 0; i < lab_dist_group_count(); i++) {
    lab_group *g = lab_dist_group_at(i);
    if (g && g->poisoned && (!host->recover || g->backend != host)) device_here = 1;
    if (g && g->device && g->device->poisoned) device_here = 1; /* an aborted NCCL communicator */
  }
  int result = 0, failed_anywhere = failed_here, device_anywhere = device_here;
  if (host->recover) { /* the flags travel in its first exchange */
    result = host->recover((failed_here ? LAB_RECOVER_FAILED : 0) | (device_here ? LAB_RECOVER_DEVICE : 0));
    failed_anywhere = (result & LAB_RECOVERED_ABORTED) != 0;
    device_anywhere = (result & LAB_RECOVERED_DEVICE) != 0;
    result &= ~(LAB_RECOVERED_ABORTED | LAB_RECOVERED_DEVICE);
  } else {
    lab_ctl_max(failed_here, &failed_anywhere, 0);
    lab_ctl_max(device_here, &device_anywhere, 0);
  }
  if (aborted) *aborted = failed_anywhere;
  if (!device_anywhere) return result;
  if (!host->recover) {
    if (host->rebuild(w) < 0) return -1;
    w->poisoned = 0;
    result |= LAB_RECOVERED_NEW_WORLD;
  }
  if (lab_devcomm_rebuild(w) < 0) return -1;
  return result | LAB_RECOVERED_COMPLETED;
}
