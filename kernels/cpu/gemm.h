/* Row-major matrix products C = alpha * op(A) op(B) + beta * C. f32 and f64 go to OpenBLAS;
 * i64 uses a plain loop (integer matmul is for checking, not for speed). */
#ifndef LAB_KERNELS_GEMM_H
#define LAB_KERNELS_GEMM_H

#include "../dtype.h"

void lab_gemm(lab_dtype ct, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
              double alpha, const void *a, int64_t lda, const void *b, int64_t ldb, double beta,
              void *c, int64_t ldc);

/* Threads for our own OpenMP loops and for OpenBLAS. */
void lab_set_num_threads(int n);
int lab_get_num_threads(void);

#endif
