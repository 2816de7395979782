/* What the SIMT interpreter (kernels/simt) recorded while the sim device ran kernels/cuda, as
 * the layers above read it (lab.sim, lab.prof's kernel table). A build without the interpreter
 * (it needs the CUDA headers at build time) records nothing: lab_sim_stats_available is 0, there
 * are no kernels and no hazards, and the sim device runs the cpu kernels. */
#ifndef LAB_RUNTIME_SIM_STATS_H
#define LAB_RUNTIME_SIM_STATS_H

#include <stddef.h>
#include <stdio.h>

/* One kernel instantiation's launches since the last lab_sim_stats_reset: the last launch's
 * shape, the blocks run, the __syncthreads each block passed (fewest and most), the hazards
 * reported, and (with lab_sim_set_perf on) shared-memory wavefronts and global sectors against
 * their ideal. */
typedef struct {
  const char *kernel;
  long launches, blocks, barriers, hazards;
  long block_barriers_min, block_barriers_max;
  unsigned grid[3], block[3]; /* of the last launch, x y z */
  size_t shared_bytes;        /* dynamic shared memory of the last launch */
  double seconds;
  long shared_wavefronts, shared_ideal, sectors, sectors_ideal;
} lab_sim_kernel_stats;

int lab_sim_stats_available(void);
/* the i-th kernel with a launch since the reset (0-based); 0, or -1 past the last */
int lab_sim_kernel_stat(int i, lab_sim_kernel_stats *out);
/* forget the kernels, hazards and perf counts so far */
void lab_sim_stats_reset(void);
/* count bank conflicts and global sectors (off by default: they cost time) */
void lab_sim_set_perf(int on);
/* hazards reported since start, and the first line of the last report ("" for none) */
long lab_sim_hazards(void);
const char *lab_sim_last_report(void);
/* the per-site counts, as LLMLAB_SIMT_PERF=1 prints them */
void lab_sim_perf_report(FILE *f);

#endif
