/* The process world of world.h: MPI_Init and MPI_Finalize, world and node ranks, host name;
 * at start-up it builds the world group (MPI backend), the control channel and the board. */
#include "world.h"

#include <mpi.h>

#include "../device.h"
#include "../error.h"
#include "board.h"
#include "control.h"
#include "control_relay.h"
#include "control_settings.h"
#include "group.h"
#include "mpi_backend.h"
#include "place.h"

static lab_group world_group;

int lab_ctl_init(int *argc, char ***argv) {
  int provided;
  if (MPI_Init_thread(argc, argv, lab_relay_thread_level(), &provided) != MPI_SUCCESS)
    return lab_fail("init", "MPI_Init failed");
  lab_relay_provided(provided); /* a job across hosts relays the board with a thread */
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int world_rank, world_size, local_rank, local_size;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_rank, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &local_rank);
  MPI_Comm_size(node, &local_size);
  MPI_Comm_free(&node);
  lab_place_set(world_rank, world_size, local_rank, local_size);
  lab_device_set_node_rank(local_rank);

  if (lab_ctl_open() < 0) return -1;
  world_group.world_size = world_size;
  if (lab_mpi_world_group(&world_group) < 0) return -1;
  lab_dist_register_world(&world_group);
  lab_board_init(lab_relay_copies(local_size));
  lab_board_set_relay(lab_relay_host_label, lab_relay_flush, lab_relay_wake);
  lab_ctl_set_before_bcast(lab_relay_settle);
  lab_relay_start();
  lab_settings_check(); /* a setting that did not reach a host is named */
  return 0;
}

void lab_ctl_finalize(void) {
  int fin = 0;
  MPI_Finalized(&fin);
  if (!fin) lab_relay_stop();
  if (!fin) MPI_Finalize();
}
