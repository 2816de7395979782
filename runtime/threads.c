/* Thread and BLAS settings: forwarded to the cpu kernels, which own OpenMP and OpenBLAS. */
#include "threads.h"

#include <stdio.h>
#include <unistd.h>

#include "../kernels/cpu/gemm.h"

void lab_set_num_threads(int n) { lab_cpu_set_threads(n); }
int lab_get_num_threads(void) { return lab_cpu_threads(); }
const char *lab_blas_corename(void) { return lab_cpu_blas_corename(); }
const char *lab_blas_better_coretype(void) { return lab_cpu_blas_better_coretype(); }

int lab_threads_should_wait_passively(int local_ranks, int threads_per_rank) {
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  if (cores < 1) cores = 1;
  if (local_ranks < 1) local_ranks = 1;
  if (threads_per_rank <= 0) threads_per_rank = cores / local_ranks > 0 ? (int)(cores / local_ranks) : 1;
  if ((long)local_ranks * threads_per_rank > cores) return 1;
  double load = 0;
  FILE *f = fopen("/proc/loadavg", "r");
  if (f) {
    if (fscanf(f, "%lf", &load) != 1) load = 0;
    fclose(f);
  }
  return load >= (double)cores;
}
