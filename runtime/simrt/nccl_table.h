/* The sim's NCCL backend as devcomm.c reaches it: runtime/dist/nccl.c compiled against
 * runtime/simrt's shims (nccl_mpi.c: NCCL on MPI), with the table of the nccl plugin
 * (runtime/cuda/plugin.h), so sim tensors' collectives take nccl.c's path as cuda tensors'
 * do. Built with the SIMT interpreter (LLMLAB_HAVE_SIMT). */
#ifndef LAB_SIMRT_NCCL_TABLE_H
#define LAB_SIMRT_NCCL_TABLE_H

#include "../cuda/plugin.h"

/* NULL when the sim is not running runtime/cuda's device over runtime/simrt (LLMLAB_SIMRT=0,
 * LLMLAB_SIMT=0: its memory is not the emulated runtime's) or LLMLAB_SIM_NCCL=0 (collectives
 * on sim tensors then stage through MPI, as before) */
const lab_nccl_plugin *lab_simrt_nccl_plugin(void);
/* collectives and sends/recvs the shim posted in this process (lab.cuda.sim_nccl_calls) */
long lab_simrt_nccl_calls(void);

#endif
