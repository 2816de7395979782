/* Peer for scripts/bench/matmul.lua: the same square sgemm called directly on OpenBLAS.
 * usage: matmul_blas N reps threads  -> prints the best time of one product in seconds */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  if (argc < 4) return 2;
  int n = atoi(argv[1]), reps = atoi(argv[2]);
  openblas_set_num_threads(atoi(argv[3]));
  float *a = aligned_alloc(64, sizeof(float) * (size_t)n * n);
  float *b = aligned_alloc(64, sizeof(float) * (size_t)n * n);
  float *c = aligned_alloc(64, sizeof(float) * (size_t)n * n);
  for (long i = 0; i < (long)n * n; i++) {
    a[i] = (float)(i % 7) * 0.1f;
    b[i] = (float)(i % 5) * 0.2f;
  }
  double best = 1e30;
  for (int r = 0; r < reps + 1; r++) {
    double t0 = now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
    double t = now() - t0;
    if (r > 0 && t < best) best = t; /* the first call warms up */
  }
  printf("%.9f\n", best);
  free(a);
  free(b);
  free(c);
  return 0;
}
