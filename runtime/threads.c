/* Thread and BLAS settings: forwarded to the cpu kernels, which own OpenMP and OpenBLAS. */
#include "threads.h"

#include "../kernels/cpu/gemm.h"

void lab_set_num_threads(int n) { lab_cpu_set_threads(n); }
int lab_get_num_threads(void) { return lab_cpu_threads(); }
const char *lab_blas_corename(void) { return lab_cpu_blas_corename(); }
const char *lab_blas_better_coretype(void) { return lab_cpu_blas_better_coretype(); }
