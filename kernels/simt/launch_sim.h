/* The interpreted launchers (kernels/cuda compiled for the SIMT interpreter): lab_simcu_*, with
 * the arguments of kernels/cuda/launch.h. The sim device includes this, never both. */
#ifndef LAB_KERNELS_SIMT_LAUNCH_SIM_H
#define LAB_KERNELS_SIMT_LAUNCH_SIM_H
#ifndef LAB_SIMT
#define LAB_SIMT 1
#endif
#include "../cuda/launch.h"
#endif
