/* The machine's single-precision FMA peak, measured: independent chains of vector FMAs
 * (enough of them to hide the FMA latency) on every thread, widest vectors the compiler
 * has for this CPU. usage: fma_peak threads -> "WALL CPU": GFLOP/s in total (best of 3
 * rounds by wall clock) and GFLOP per CPU-second of one thread (best of 3 by process CPU
 * time): on a machine shared with other work the second is the figure that holds. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#if defined(__AVX512F__)
#define WIDTH 16
#elif defined(__AVX__)
#define WIDTH 8
#else
#define WIDTH 4
#endif
typedef float vec __attribute__((vector_size(WIDTH * 4)));
#define CHAINS 12

int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 1;
  long iters = 200000000L / CHAINS;
  double best = 0, best_cpu = 0;
  for (int rep = 0; rep < 3; rep++) {
    struct timespec c0, c1;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    double t0 = omp_get_wtime();
    float sink = 0;
#pragma omp parallel num_threads(threads) reduction(+ : sink)
    {
      vec a, b;
      for (int k = 0; k < WIDTH; k++) {
        a[k] = 0.999999f;
        b[k] = 1e-7f;
      }
      /* twelve named accumulators stay in registers; an array would live in memory */
      vec c0 = a, c1 = a * 2, c2 = a * 3, c3 = a * 4, c4 = a * 5, c5 = a * 6;
      vec c6 = a * 7, c7 = a * 8, c8 = a * 9, c9 = a * 10, c10 = a * 11, c11 = a * 12;
      for (long i = 0; i < iters; i++) {
        c0 = c0 * a + b; c1 = c1 * a + b; c2 = c2 * a + b; c3 = c3 * a + b;
        c4 = c4 * a + b; c5 = c5 * a + b; c6 = c6 * a + b; c7 = c7 * a + b;
        c8 = c8 * a + b; c9 = c9 * a + b; c10 = c10 * a + b; c11 = c11 * a + b;
      }
      vec all = c0 + c1 + c2 + c3 + c4 + c5 + c6 + c7 + c8 + c9 + c10 + c11;
      for (int k = 0; k < WIDTH; k++) sink += all[k];
    }
    double t = omp_get_wtime() - t0;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    double cpu = (double)(c1.tv_sec - c0.tv_sec) + 1e-9 * (double)(c1.tv_nsec - c0.tv_nsec);
    double flop = 2.0 * WIDTH * CHAINS * (double)iters * threads;
    if (flop / t / 1e9 > best) best = flop / t / 1e9;
    if (flop / cpu / 1e9 > best_cpu) best_cpu = flop / cpu / 1e9;
    if (sink == 12345.f) printf("#");
  }
  printf("%.1f %.1f\n", best, best_cpu);
  return 0;
}
