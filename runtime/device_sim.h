/* Between the sim device (device_sim.c) and its interpreted kernels (device_sim_simt.c). */
#ifndef LAB_RUNTIME_DEVICE_SIM_H
#define LAB_RUNTIME_DEVICE_SIM_H
#include "device.h"
/* fills ops' kernel entries with kernels/cuda under the SIMT interpreter; kview translates a
 * device pointer into the arena's kernel view */
void lab_sim_use_simt(lab_device_ops *ops, void *(*kview)(const void *p));
/* -1 (with lab_fail) once after a launch failed since the last call, else 0 */
int lab_sim_take_error(void);
/* The arena for runtime/simrt's emulated cudaMalloc/cudaFree (sizes as asked; note: tell the
 * interpreter's memcheck), its kernel view (host pointers and NULL unchanged), and its size */
void *lab_sim_arena_alloc(size_t nbytes, int note);
void lab_sim_arena_free(void *p, size_t nbytes, int note);
void *lab_sim_kview(const void *p);
/* a FlashAttention launch's arguments with every pointer on the kernel view */
lab_flash_args lab_sim_flash_view(const lab_flash_args *a);
size_t lab_sim_arena_bytes(void);
/* runtime/cuda/cuda_device.c compiled against runtime/simrt (the sim's table when the build has
 * the SIMT interpreter) */
const lab_device_ops *lab_simrt_cuda_device_ops(void);
int lab_simrt_sync_all(void);
/* lab_sim_is_simrt (device.h); runtime/simrt/simrt.c: waits until every stream's work ran; 0 */
/* One host synchronization more (lab_sim_host_syncs, device.h): called where the cuda device
 * would wait for its stream (runtime/simrt's stream and D2H waits, the direct table's to_host
 * and synchronize) */
void lab_sim_note_host_sync(void);
#endif
