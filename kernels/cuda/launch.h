/* The CUDA kernels' launchers: plain C entry points (extern "C") that the cuda device table
 * (runtime/cuda/cuda_device.c) calls with device pointers and a stream. Each mirrors a cpu
 * kernel (kernels/cpu) with the same arguments, and returns a cudaError_t value (0: launched).
 * The same sources compiled by the host compiler for the SIMT interpreter (kernels/simt, with
 * LAB_SIMT defined) name them lab_simcu_*, so both builds live in one process: the sim device
 * includes kernels/simt/launch_sim.h, which declares those. */
#ifndef LAB_KERNELS_CUDA_LAUNCH_H
#define LAB_KERNELS_CUDA_LAUNCH_H

#include <stddef.h>
#include "../fused_ops.h"
#include "../ops.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct CUstream_st *lab_cuda_stream; /* = cudaStream_t */

#ifdef LAB_SIMT
#define LAB_CU(name) lab_simcu_##name
#elif defined(LAB_SIMRT) /* runtime/cuda/cuda_device.c compiled against runtime/simrt */
#define LAB_CU(name) lab_simrt_cu_##name
#else
#define LAB_CU(name) lab_cu_##name
#endif

int LAB_CU(ewise)(const lab_ew_args *a, lab_cuda_stream s);
int LAB_CU(reduce)(const lab_red_args *a, lab_cuda_stream s);
/* work: device scratch of the *_work_bytes size (0: none needed), or NULL for one block per
 * output (reduce: a->work) */
size_t LAB_CU(reduce_work_bytes)(const lab_red_args *a);
size_t LAB_CU(sum_middle_work_bytes)(int64_t outer, int64_t R, int64_t inner);
int LAB_CU(rand)(const lab_rand_args *a, lab_cuda_stream s);
/* scratch for the weight gradients of both norms' backward over many blocks (0: none needed) */
size_t LAB_CU(norm_bwd_work_bytes)(int64_t rows, int64_t D);
/* The fused kernels (kernels/fused_ops.h): LAB_FUSED_LAUNCH's with the cpu kernel's arguments and
 * a stream, LAB_FUSED_WORK's with device scratch of the list's size before it. */
#define LAB_CU_DECLARE_(name, R, cpu, cat, op, anchor, work, params, args) \
  int LAB_CU(name)(LAB_UNPAREN params, lab_cuda_stream s);
#define LAB_CU_DECLARE_WORK_(name, R, cpu, cat, op, anchor, work, params, args) \
  int LAB_CU(name)(LAB_UNPAREN params, void *scratch, lab_cuda_stream s);
LAB_FUSED_LAUNCH(LAB_CU_DECLARE_)
LAB_FUSED_WORK(LAB_CU_DECLARE_WORK_)
#undef LAB_CU_DECLARE_
#undef LAB_CU_DECLARE_WORK_
/* cross-entropy's forward (LAB_FUSED_OWN): count_out, device int64, receives the number of rows
 * not ignored */
int LAB_CU(xent_fwd)(lab_dtype ct, const void *logits, const int64_t *target, void *loss, void *lse, int64_t N,
                    int64_t C, int64_t ignore_index, double smoothing, int64_t *count_out, lab_cuda_stream s);
/* FlashAttention-2 (flash_attention.cu, flash_attention_bwd.cu): bf16/f16, D = Dv = 64, 96, 128 or 256;
 * pointers 16-byte aligned (cudaErrorMisalignedAddress otherwise); the backward's a->work holds
 * lab_flash_work_bytes (the f32 dq sums and the row dots of dout and out) */
int LAB_CU(flash_supports)(lab_dtype dt, int64_t D, int64_t Dv);
int LAB_CU(flash_fwd)(const lab_flash_args *a, lab_cuda_stream s);
int LAB_CU(flash_bwd)(const lab_flash_args *a, lab_cuda_stream s);

#ifdef __cplusplus
}
#endif

#endif
