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

/* Whether OpenMP's idle threads should sleep at once instead of spinning (libgomp spins for
 * about 300,000 iterations by default before it sleeps): when the cores are shared, either by
 * this node's ranks (local_ranks x threads per rank > cores) or by other work (a load average
 * of at least the number of cores), a spinning thread takes the core a working thread of this
 * or another process is waiting for. threads_per_rank <= 0 means the default split
 * (cores / local_ranks). Returns 1 for passive, 0 for the default. */
int lab_threads_should_wait_passively(int local_ranks, int threads_per_rank);

#endif
