/* Thread and BLAS settings for the callers above the runtime (shell, Lua bindings), so they
 * need not know which kernels library sits underneath. */
#ifndef LAB_RUNTIME_THREADS_H
#define LAB_RUNTIME_THREADS_H

/* Threads for the cpu kernels' OpenMP loops and for OpenBLAS (at least 1). */
void lab_set_num_threads(int n);
int lab_get_num_threads(void);

/* The OpenBLAS kernel family in use, and a better one the CPU supports when OpenBLAS chose a
 * weaker one (NULL otherwise); it takes effect only through OPENBLAS_CORETYPE before the
 * library loads. */
const char *lab_blas_corename(void);
const char *lab_blas_better_coretype(void);

#endif
