/* Recovery after abandoned collectives (an interrupt, the watchdog, a stepper quit left a
 * request pending on some group): every rank calls lab_dist_recover at the same point, the
 * ranks agree over the control channel whether any group was poisoned, and the world gets a
 * fresh communicator from its backend (the abandoned requests stay with the old one, as MPI's
 * rule for abandoned work requires), and its NCCL communicator a new one if it was aborted. Other poisoned groups stay unusable and say so. */
#include "../error.h"
#include "control.h"
#include "devcomm.h"
#include "dist.h"

int lab_dist_recover(void) {
  int mine = 0, any = 0;
  for (int i = 0; i < lab_dist_group_count(); i++) {
    lab_group *g = lab_dist_group_at(i);
    if (g && g->poisoned) mine = 1;
  }
  lab_ctl_max(mine, &any, 0);
  if (!any) return 0;
  lab_group *w = lab_dist_world();
  if (w->backend->rebuild(w) < 0 || lab_devcomm_rebuild(w) < 0) return -1;
  w->poisoned = 0;
  return 1;
}
