/* Row-major matrix products C = alpha * op(A) op(B) + beta * C. f32 and f64 go to OpenBLAS;
 * i64 uses a plain loop (integer matmul is for checking, not for speed). */
#ifndef LAB_KERNELS_GEMM_H
#define LAB_KERNELS_GEMM_H

#include "../dtype.h"

void lab_gemm(lab_dtype ct, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
              double alpha, const void *a, int64_t lda, const void *b, int64_t ldb, double beta,
              void *c, int64_t ldc);

/* A batch of products C_b = alpha op(A_b) op(B_b) + beta C_b (element offsets a_off[b],
 * b_off[b]; C_b at b * m * ldc). Many small products (attention's per-head ones) run side by
 * side, each on one thread, instead of one after another on all threads: a small GEMM split
 * across threads spends its time waiting at the split. The result is the same either way.
 * stop (may be NULL) is polled between products: nonzero skips the rest (Ctrl-C). */
void lab_gemm_batch(lab_dtype ct, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
                    double alpha, const void *a, const int64_t *a_off, int64_t lda, const void *b,
                    const int64_t *b_off, int64_t ldb, double beta, void *c, int64_t ldc,
                    int64_t batches, int (*stop)(void));

/* OpenBLAS picks its kernels from the CPU model; on CPUs it does not know (virtual machines
 * report "Intel Xeon Processor") it falls back to its SSE3 "Prescott" kernels, 4-6x slower.
 * Returns the kernel family the CPU's features support (SkylakeX with AVX-512, Haswell with
 * AVX2+FMA) when OpenBLAS chose a weaker one, else NULL. It takes effect only through the
 * environment variable OPENBLAS_CORETYPE before the library loads. */
const char *lab_cpu_blas_better_coretype(void);
const char *lab_cpu_blas_corename(void);

/* Threads for our own OpenMP loops and for OpenBLAS. */
void lab_cpu_set_threads(int n);
int lab_cpu_threads(void);

#endif
