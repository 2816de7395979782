/* The sim device's kernels when the build has the SIMT interpreter: kernels/cuda's launchers
 * (lab_simcu_*, kernels/simt/launch_sim.h) called as runtime/cuda/cuda_device.c calls them,
 * with every pointer on the arena's kernel view (K, from device_sim.c). A launch that fails
 * or in which the interpreter reports a hazard fails the op with the report's first line.
 * Matrix products stay the cpu's (cuBLASLt is not this project's code). */
#ifdef LLMLAB_HAVE_SIMT
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "../kernels/simt/launch_sim.h"
#include "../kernels/simt/simt.h"
#include "device.h"
#include "device_sim.h"
#include "error.h"

static void *(*K)(const void *p);

/* A failed launch is sticky, as a CUDA context's error after a fault: most kernel ops return
 * nothing, so the next copy or synchronize on the device fails with the report (once). */
static char sticky[1200];

int lab_sim_take_error(void) {
  if (!sticky[0]) return 0;
  lab_fail("sim", "%s", sticky);
  sticky[0] = 0;
  return -1;
}

static int report(const char *op, int e) {
  if (!e) return 0;
  const char *r = lab_simt_last_report();
  if (e == 719 && r[0]) snprintf(sticky, sizeof sticky, "%s on sim failed: %s", op, r);
  else snprintf(sticky, sizeof sticky, "%s on sim: launch failed with CUDA error %d", op, e);
  return lab_fail(op, "%s", sticky);
}

static int ewise(const lab_ew_args *a) {
  lab_ew_args k = *a;
  for (int i = 0; i < k.g.nops; i++) k.g.data[i] = K(k.g.data[i]);
  return report("ewise", lab_simcu_ewise(&k, NULL));
}
/* scratch for the multi-block reductions, from the arena as the cuda device takes it from its
 * pool (NULL when none fits: one block per output) */
static void *scratch(size_t n) { return n ? lab_sim_device_ops()->alloc(0, n) : NULL; }
static void scratch_free(void *p, size_t n) {
  if (p) lab_sim_device_ops()->free(0, p, n);
}
static int reduce(const lab_red_args *a) {
  lab_red_args k = *a;
  for (int i = 0; i < k.g.nops; i++) k.g.data[i] = K(k.g.data[i]);
  size_t wb = lab_simcu_reduce_work_bytes(a);
  void *w = scratch(wb);
  k.work = w ? K(w) : NULL;
  int rc = report("reduce", lab_simcu_reduce(&k, NULL));
  scratch_free(w, wb);
  return rc;
}
static int rand_(const lab_rand_args *a) {
  lab_rand_args k = *a;
  k.out = K(a->out);
  return report("rand", lab_simcu_rand(&k, NULL));
}
static int64_t simt_xent_fwd(lab_dtype ct, const void *logits, const int64_t *target, void *loss, void *lse, int64_t N,
                        int64_t C, int64_t ignore_index, double smoothing) {
  static void *count; /* device scratch for the row count, as the cuda device keeps one */
  if (!count && !(count = lab_sim_device_ops()->alloc(0, 8)))
    return lab_fail("cross_entropy", "sim: out of device memory for the row count") * 2;
  if (report("cross_entropy", lab_simcu_xent_fwd(ct, K(logits), K(target), K(loss), K(lse), N, C, ignore_index,
                                                 smoothing, K(count), NULL)))
    return -2;
  lab_sim_note_host_sync(); /* the cuda device waits for this count */
  return *(int64_t *)K(count);
}
/* the fused kernels (kernels/fused_ops.h), generated from their one signature: every pointer on
 * the kernel view, scratch from the arena where the list gives a size */
#define LAB_P(p) K(p)
#define LAUNCH_(name, R, cpu, cat, op, anchor, work, params, args) \
  static int simt_##name params { return report(op, lab_simcu_##name(LAB_UNPAREN args, NULL)); }
#define LAUNCH_WORK_(name, R, cpu, cat, op, anchor, work, params, args)                     \
  static int simt_##name params {                                                           \
    size_t bytes_ = work;                                                                   \
    void *work_ = scratch(bytes_);                                                          \
    int rc_ = report(op, lab_simcu_##name(LAB_UNPAREN args, work_ ? K(work_) : NULL, NULL)); \
    scratch_free(work_, bytes_);                                                            \
    return rc_;                                                                             \
  }
LAB_FUSED_LAUNCH(LAUNCH_)
LAB_FUSED_WORK(LAUNCH_WORK_)
#undef LAUNCH_
#undef LAUNCH_WORK_
#undef LAB_P
static int flash_result(const char *what, int e) {
  if (e == 716) /* cudaErrorMisalignedAddress, as cuda_device.c says it */
    return lab_fail("sdpa", "flash %s on sim needs 16-byte aligned q, k, v (a view that starts inside a row?): "
                    "pass :clone() or use impl='math'", what);
  return report("sdpa", e);
}
/* kernels/cuda's tensor-core kernel where it takes the case (bf16/f16, D = Dv = 64, 96, 128 or 256,
 * contiguous, 16-byte aligned); the cpu kernel on the kernel view elsewhere (head views included,
 * which the cuda device copies contiguous first), so every sdpa
 * that works on the cpu works here (the cuda device has no such path yet: issue 23) */
static int dense(const lab_flash_layout *l, int64_t H, int64_t rows, int64_t width) {
  if (!l->st) return 1; /* all zero: contiguous */
  if (H < 1) H = 1;
  return l->st == width && (H == 1 || l->sh == rows * width) && (l->sb == 0 || l->sb == H * rows * width);
}
static int interpreted(const lab_flash_args *a, const lab_flash_args *k, int bwd) {
  int64_t H = a->H, T = a->T, S = a->S, D = a->D, Dv = a->Dv;
  if (!dense(&a->lq, H, T, D) || !dense(&a->lk, H, S, D) || !dense(&a->lv, H, S, Dv) || !dense(&a->lo, H, T, Dv))
    return 0;
  if (bwd && (!dense(&a->ldo, H, T, Dv) || !dense(&a->ldq, H, T, D) || !dense(&a->ldk, H, S, D) ||
              !dense(&a->ldv, H, S, Dv)))
    return 0;
  const void *ps[] = {k->q, k->k, k->v, bwd ? k->o : k->out, k->dout, k->dq, k->dk, k->dv};
  for (int i = 0; i < (bwd ? 8 : 4); i++)
    if ((uintptr_t)ps[i] & 15) return 0;
  return lab_simcu_flash_supports(a->dt, a->D, a->Dv);
}
static int flash_supports(lab_dtype dt, int64_t D, int64_t Dv) {
  return lab_simcu_flash_supports(dt, D, Dv) || lab_cpu_device_ops()->flash_supports(dt, D, Dv);
}
static int flash_fwd(const lab_flash_args *a) {
  lab_flash_args k = lab_sim_flash_view(a);
  if (!interpreted(a, &k, 0)) return lab_cpu_device_ops()->flash_fwd(&k);
  return flash_result("forward", lab_simcu_flash_fwd(&k, NULL));
}
static int flash_bwd(const lab_flash_args *a) {
  lab_flash_args k = lab_sim_flash_view(a);
  if (!interpreted(a, &k, 1)) return lab_cpu_device_ops()->flash_bwd(&k);
  return flash_result("backward", lab_simcu_flash_bwd(&k, NULL));
}

void lab_sim_use_simt(lab_device_ops *ops, void *(*kview)(const void *p)) {
  K = kview;
  ops->ewise = ewise, ops->reduce = reduce, ops->rand = rand_;
#define SET_(name, R, cpu, cat, op, anchor, work, params, args) ops->name = simt_##name;
  LAB_FUSED_REQUIRED(SET_)
#undef SET_
  ops->flash_supports = flash_supports, ops->flash_fwd = flash_fwd, ops->flash_bwd = flash_bwd;
  ops->flash_strided = 1; /* head views (the GPT's) go to the cpu kernel: see interpreted() */
}
#else
typedef int lab_device_sim_simt_unused; /* ISO C: a translation unit is not empty */
#endif
