/* Between the sim device (device_sim.c) and its interpreted kernels (device_sim_simt.c). */
#ifndef LAB_RUNTIME_DEVICE_SIM_H
#define LAB_RUNTIME_DEVICE_SIM_H
#include "device.h"
/* fills ops' kernel entries with kernels/cuda under the SIMT interpreter; kview translates a
 * device pointer into the arena's kernel view */
void lab_sim_use_simt(lab_device_ops *ops, void *(*kview)(const void *p));
/* -1 (with lab_fail) once after a launch failed since the last call, else 0 */
int lab_sim_take_error(void);
#endif
