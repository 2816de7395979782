/* Peer for scripts/bench/allreduce.sh: MPI_Allreduce (sum, f32, in place) called directly,
 * for sizes 1 KiB .. 64 MiB (x4), the same sizes and repetitions as allreduce.lua.
 * usage: mpirun -np N allreduce_mpi -> rank 0 prints "bytes seconds-per-call" lines */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  for (long bytes = 1024; bytes <= 64L * 1024 * 1024; bytes *= 4) {
    long r = (256L * 1024 * 1024) / (bytes * 8);
    int reps = (int)(r < 5 ? 5 : r > 200 ? 200 : r);
    int count = (int)(bytes / 4);
    float *x = calloc((size_t)count, sizeof *x);
    MPI_Allreduce(MPI_IN_PLACE, x, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); /* warm-up */
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < reps; i++) MPI_Allreduce(MPI_IN_PLACE, x, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double t = (MPI_Wtime() - t0) / reps, tmax;
    MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) printf("%ld %.9f\n", bytes, tmax);
    free(x);
  }
  MPI_Finalize();
  return 0;
}
