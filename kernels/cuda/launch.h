/* The CUDA kernels' launchers: plain C entry points (extern "C") that the cuda device table
 * (runtime/cuda/cuda_device.c) calls with device pointers and a stream. Each mirrors a cpu
 * kernel (kernels/cpu) with the same arguments, and returns a cudaError_t value (0: launched).
 * The same sources compiled by the host compiler for the SIMT interpreter (kernels/simt, with
 * LAB_SIMT defined) name them lab_simcu_*, so both builds live in one process: the sim device
 * includes kernels/simt/launch_sim.h, which declares those. */
#ifndef LAB_KERNELS_CUDA_LAUNCH_H
#define LAB_KERNELS_CUDA_LAUNCH_H

#include <stddef.h>
#include "../ops.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct CUstream_st *lab_cuda_stream; /* = cudaStream_t */

#ifdef LAB_SIMT
#define LAB_CU(name) lab_simcu_##name
#else
#define LAB_CU(name) lab_cu_##name
#endif

int LAB_CU(ewise)(const lab_ew_args *a, lab_cuda_stream s);
int LAB_CU(reduce)(const lab_red_args *a, lab_cuda_stream s);
/* work: device scratch of the *_work_bytes size (0: none needed), or NULL for one block per
 * output (reduce: a->work) */
size_t LAB_CU(reduce_work_bytes)(const lab_red_args *a);
int LAB_CU(sum_middle)(lab_dtype ct, const void *x, void *out, int64_t outer, int64_t R, int64_t inner, double scale,
                      void *work, lab_cuda_stream s);
size_t LAB_CU(sum_middle_work_bytes)(int64_t outer, int64_t R, int64_t inner);
int LAB_CU(softmax_rows)(lab_dtype ct, const void *x, void *out, int64_t rows, int64_t n, int log, lab_cuda_stream s);
int LAB_CU(rand)(const lab_rand_args *a, lab_cuda_stream s);
int LAB_CU(layer_norm_fwd)(lab_dtype ct, const void *x, const void *w, const void *b, void *y, void *mean, void *rstd,
                          int64_t rows, int64_t D, double eps, lab_cuda_stream s);
int LAB_CU(layer_norm_bwd)(lab_dtype ct, const void *g, const void *x, const void *w, const void *mean,
                          const void *rstd, void *dx, void *dw, void *db, int64_t rows, int64_t D, void *work,
                          lab_cuda_stream s);
int LAB_CU(rms_norm_fwd)(lab_dtype ct, const void *x, const void *w, void *y, void *rstd, int64_t rows, int64_t D,
                        double eps, lab_cuda_stream s);
int LAB_CU(rms_norm_bwd)(lab_dtype ct, const void *g, const void *x, const void *w, const void *rstd, void *dx,
                        void *dw, int64_t rows, int64_t D, void *work, lab_cuda_stream s);
/* scratch for the weight gradients of both norms' backward over many blocks (0: none needed) */
size_t LAB_CU(norm_bwd_work_bytes)(int64_t rows, int64_t D);
int LAB_CU(act_fwd)(lab_dtype ct, lab_act_kind kind, const void *x, void *y, int64_t n, lab_cuda_stream s);
int LAB_CU(act_bwd)(lab_dtype ct, lab_act_kind kind, const void *g, const void *x, void *dx, int64_t n,
                   lab_cuda_stream s);
/* count_out: device int64 that receives the number of rows not ignored */
int LAB_CU(xent_fwd)(lab_dtype ct, const void *logits, const int64_t *target, void *loss, void *lse, int64_t N,
                    int64_t C, int64_t ignore_index, double smoothing, int64_t *count_out, lab_cuda_stream s);
int LAB_CU(xent_bwd)(lab_dtype ct, const void *logits, const int64_t *target, const void *lse, void *dlogits,
                    int64_t N, int64_t C, int64_t ignore_index, double smoothing, double scale, lab_cuda_stream s);
int LAB_CU(embedding_fwd)(lab_dtype ct, const void *weight, const int64_t *idx, void *out, int64_t n, int64_t D,
                         lab_cuda_stream s);
int LAB_CU(embedding_bwd)(lab_dtype ct, const void *g, const int64_t *idx, void *dweight, int64_t n, int64_t D,
                         lab_cuda_stream s);
int LAB_CU(causal_mask)(lab_dtype ct, void *scores, int64_t batches, int64_t T, int64_t S, lab_cuda_stream s);
int LAB_CU(softmax_bwd_rows)(lab_dtype ct, const void *P, void *dP, int64_t rows, int64_t S, double scale,
                            lab_cuda_stream s);
/* FlashAttention-2 (flash_attention.cu, flash_attention_bwd.cu): bf16/f16, D = Dv = 64 or 128;
 * pointers 16-byte aligned (cudaErrorMisalignedAddress otherwise); the backward's a->work holds
 * lab_flash_work_bytes (the f32 dq sums and the row dots of dout and out) */
int LAB_CU(flash_supports)(lab_dtype dt, int64_t D, int64_t Dv);
int LAB_CU(flash_fwd)(const lab_flash_args *a, lab_cuda_stream s);
int LAB_CU(flash_bwd)(const lab_flash_args *a, lab_cuda_stream s);
int LAB_CU(adamw)(lab_dtype ct, void *p, const void *g, void *m, void *v, int64_t n, double lr, double b1, double b2,
                 double eps, double wd, int64_t step, lab_cuda_stream s);

#ifdef __cplusplus
}
#endif

#endif
