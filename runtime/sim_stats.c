/* sim_stats.h over kernels/simt's counters; empty where the build has no interpreter. */
#include "sim_stats.h"

#ifdef LLMLAB_HAVE_SIMT
#include "../kernels/simt/simt.h"

static void dim3_of(lab_simt_dim d, unsigned out[3]) {
  out[0] = d.x;
  out[1] = d.y;
  out[2] = d.z;
}

int lab_sim_stats_available(void) { return 1; }

int lab_sim_kernel_stat(int i, lab_sim_kernel_stats *out) {
  lab_simt_kernel_stats s;
  if (lab_simt_kernel_stat(i, &s) != 0) return -1;
  long perf[4];
  lab_simt_perf_totals(s.kernel, perf);
  *out = (lab_sim_kernel_stats){.kernel = s.kernel,
                                .launches = s.launches,
                                .blocks = s.blocks,
                                .barriers = s.barriers,
                                .hazards = s.hazards,
                                .block_barriers_min = s.block_barriers_min,
                                .block_barriers_max = s.block_barriers_max,
                                .shared_bytes = s.dyn_smem,
                                .seconds = s.seconds,
                                .shared_wavefronts = perf[0],
                                .shared_ideal = perf[1],
                                .sectors = perf[2],
                                .sectors_ideal = perf[3]};
  dim3_of(s.grid, out->grid);
  dim3_of(s.block, out->block);
  return 0;
}

void lab_sim_stats_reset(void) { lab_simt_reset_stats(); }
void lab_sim_set_perf(int on) { lab_simt_set_perf(on); }
long lab_sim_hazards(void) { return lab_simt_hazards(); }
const char *lab_sim_last_report(void) { return lab_simt_last_report(); }
void lab_sim_perf_report(FILE *f) { lab_simt_perf_report(f); }

#else

int lab_sim_stats_available(void) { return 0; }
int lab_sim_kernel_stat(int i, lab_sim_kernel_stats *out) {
  (void)i;
  (void)out;
  return -1;
}
void lab_sim_stats_reset(void) {}
void lab_sim_set_perf(int on) { (void)on; }
long lab_sim_hazards(void) { return 0; }
const char *lab_sim_last_report(void) { return ""; }
void lab_sim_perf_report(FILE *f) { (void)f; }

#endif
