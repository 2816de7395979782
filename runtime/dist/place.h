/* This rank's place in the process world: world and node rank and size, host name, and the
 * job's abort. World set-up (world.c) records them once; the control channel, the board, the
 * relay and the settings check read them from here, below the set-up that starts them, so no
 * header of theirs leads back up to world.h. */
#ifndef LAB_RUNTIME_DIST_PLACE_H
#define LAB_RUNTIME_DIST_PLACE_H

/* world set-up only: records the ranks and reads the host name */
void lab_place_set(int world_rank, int world_size, int local_rank, int local_size);
int lab_ctl_rank(void);
int lab_ctl_size(void);
int lab_ctl_local_rank(void);
int lab_ctl_local_size(void);
const char *lab_ctl_host(void);
void lab_ctl_abort(int code);

#endif
