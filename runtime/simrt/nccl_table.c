/* The sim's NCCL backend table (nccl_table.h): nccl.c's functions under their sim names. */
#include "shim/nccl.h" /* first: lab_nccl_* are lab_simrt_nccl_* here */

#include <stdlib.h>
#include <string.h>

#include "../device_sim.h"
#include "../dist/nccl.h"
#include "nccl_table.h"

const lab_nccl_plugin *lab_simrt_nccl_plugin(void) {
  static lab_nccl_plugin p;
  const char *e = getenv("LLMLAB_SIM_NCCL");
  if ((e && strcmp(e, "0") == 0) || !lab_sim_is_simrt()) return NULL;
  p = LAB_NCCL_PLUGIN_TABLE();
  return &p;
}
