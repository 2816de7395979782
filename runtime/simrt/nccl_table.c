/* The sim's NCCL backend as devcomm.c reaches it (declared in runtime/cuda/loader.h beside the
 * real plugin's): runtime/dist/nccl.c compiled against runtime/simrt's shims (nccl_mpi.c:
 * NCCL on MPI), as the nccl plugin's table, so sim tensors' collectives take nccl.c's path as
 * cuda tensors' do. */
#include "shim/nccl.h" /* first: lab_nccl_* are lab_simrt_nccl_* here */

#include <stdlib.h>
#include <string.h>

#include "../device_sim.h"
#include "../dist/nccl.h"
#include "../cuda/loader.h"

const lab_nccl_plugin *lab_simrt_nccl_plugin(void) {
  static lab_nccl_plugin p;
  const char *e = getenv("LLMLAB_SIM_NCCL");
  if ((e && strcmp(e, "0") == 0) || !lab_sim_is_simrt()) return NULL;
  p = LAB_NCCL_PLUGIN_TABLE();
  return &p;
}
