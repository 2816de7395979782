/* The launchers runtime/cuda/cuda_device.c calls (lab_cu_*, renamed lab_simrt_cu_* by
 * shim/cuda_runtime.h) for the sim: kernels/cuda under the SIMT interpreter (lab_simcu_*,
 * kernels/simt/launch_sim.h) with every pointer argument on the arena's kernel view. A launch
 * runs once everything queued before it on its stream has run (so it sees the copies and waits
 * before it, and only those: a kernel on the wrong stream reads data not yet there), on the
 * calling thread, so a failure returns at the launch, and is sticky until the next
 * synchronize as a fault in a CUDA context (the copy that reads a void op's result fails);
 * the interpreter's report is the error's text (cudaGetErrorString). */
#include <stdint.h>

#include "../../kernels/simt/launch_sim.h"
#include "../../kernels/simt/simt.h"
#include "../device_sim.h" /* lab_sim_flash_view */
#include "shim/cuda_runtime.h"
#include "simrt_internal.h"

#define K lab_simrt_kview

static int before(cudaStream_t s) { return (int)lab_simrt_drain(s); }
static int after(int e) {
  if (e == cudaErrorLaunchFailure) {
    lab_simrt_note_failure(lab_simt_last_report());
    lab_simrt_set_sticky(e);
  }
  return e;
}
#define RUN(call) \
  do { \
    int e_ = before(s); \
    return e_ ? e_ : after(call); \
  } while (0)

int lab_simrt_cu_ewise(const lab_ew_args *a, cudaStream_t s) {
  lab_ew_args k = *a;
  for (int i = 0; i < k.g.nops; i++) k.g.data[i] = K(k.g.data[i]);
  RUN(lab_simcu_ewise(&k, NULL));
}
int lab_simrt_cu_reduce(const lab_red_args *a, cudaStream_t s) {
  lab_red_args k = *a;
  for (int i = 0; i < k.g.nops; i++) k.g.data[i] = K(k.g.data[i]);
  k.work = K(a->work);
  RUN(lab_simcu_reduce(&k, NULL));
}
/* the scratch sizes are the kernels' own (host arithmetic, no launch) */
size_t lab_simrt_cu_reduce_work_bytes(const lab_red_args *a) { return lab_simcu_reduce_work_bytes(a); }
int lab_simrt_cu_rand(const lab_rand_args *a, cudaStream_t s) {
  lab_rand_args k = *a;
  k.out = K(a->out);
  RUN(lab_simcu_rand(&k, NULL));
}
/* the fused kernels (kernels/fused_ops.h), generated from their one signature: every pointer
 * argument on the kernel view; the work lists' scratch sizes are the kernels' own (host
 * arithmetic, no launch) */
#define LAB_P(p) K(p)
#define LAUNCHER_(name, R, cpu, cat, op, anchor, work, params, args) \
  int lab_simrt_cu_##name(LAB_UNPAREN params, cudaStream_t s) { RUN(lab_simcu_##name(LAB_UNPAREN args, NULL)); }
#define LAUNCHER_WORK_(name, R, cpu, cat, op, anchor, work, params, args)     \
  int lab_simrt_cu_##name(LAB_UNPAREN params, void *work_, cudaStream_t s) { \
    RUN(lab_simcu_##name(LAB_UNPAREN args, K(work_), NULL));               \
  }
LAB_FUSED_LAUNCH(LAUNCHER_)
LAB_FUSED_WORK(LAUNCHER_WORK_)
#undef LAUNCHER_
#undef LAUNCHER_WORK_
#undef LAB_P
size_t lab_simrt_cu_sum_middle_work_bytes(int64_t outer, int64_t R, int64_t inner) {
  return lab_simcu_sum_middle_work_bytes(outer, R, inner);
}
size_t lab_simrt_cu_norm_bwd_work_bytes(int64_t rows, int64_t D) { return lab_simcu_norm_bwd_work_bytes(rows, D); }
int lab_simrt_cu_xent_fwd(lab_dtype ct, const void *logits, const int64_t *target, void *loss, void *lse, int64_t N,
                          int64_t C, int64_t ignore_index, double smoothing, int64_t *count_out, cudaStream_t s) {
  RUN(lab_simcu_xent_fwd(ct, K(logits), K(target), K(loss), K(lse), N, C, ignore_index, smoothing, K(count_out),
                         NULL));
}
int lab_simrt_cu_flash_supports(lab_dtype dt, int64_t D, int64_t Dv) { return lab_simcu_flash_supports(dt, D, Dv); }
int lab_simrt_cu_flash_fwd(const lab_flash_args *a, cudaStream_t s) {
  lab_flash_args k = lab_sim_flash_view(a);
  RUN(lab_simcu_flash_fwd(&k, NULL));
}
int lab_simrt_cu_flash_bwd(const lab_flash_args *a, cudaStream_t s) {
  lab_flash_args k = lab_sim_flash_view(a);
  RUN(lab_simcu_flash_bwd(&k, NULL));
}
