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

static void ewise(const lab_ew_args *a) {
  lab_ew_args k = *a;
  for (int i = 0; i < k.g.nops; i++) k.g.data[i] = K(k.g.data[i]);
  report("ewise", lab_simcu_ewise(&k, NULL));
}
/* scratch for the multi-block reductions, from the arena as the cuda device takes it from its
 * pool (NULL when none fits: one block per output) */
static void *scratch(size_t n) { return n ? lab_sim_device_ops()->alloc(0, n) : NULL; }
static void scratch_free(void *p, size_t n) {
  if (p) lab_sim_device_ops()->free(0, p, n);
}
static void reduce(const lab_red_args *a) {
  lab_red_args k = *a;
  for (int i = 0; i < k.g.nops; i++) k.g.data[i] = K(k.g.data[i]);
  size_t wb = lab_simcu_reduce_work_bytes(a);
  void *w = scratch(wb);
  k.work = w ? K(w) : NULL;
  report("reduce", lab_simcu_reduce(&k, NULL));
  scratch_free(w, wb);
}
static void sum_middle(lab_dtype ct, const void *x, void *out, int64_t outer, int64_t R, int64_t inner, double scale) {
  size_t wb = lab_simcu_sum_middle_work_bytes(outer, R, inner);
  void *w = scratch(wb);
  report("sum", lab_simcu_sum_middle(ct, K(x), K(out), outer, R, inner, scale, w ? K(w) : NULL, NULL));
  scratch_free(w, wb);
}
static void softmax_rows(lab_dtype ct, const void *x, void *out, int64_t rows, int64_t n, int log) {
  report("softmax", lab_simcu_softmax_rows(ct, K(x), K(out), rows, n, log, NULL));
}
static void rand_(const lab_rand_args *a) {
  lab_rand_args k = *a;
  k.out = K(a->out);
  report("rand", lab_simcu_rand(&k, NULL));
}
static void layer_norm_fwd(lab_dtype ct, const void *x, const void *w, const void *b, void *y, void *mean, void *rstd,
                           int64_t rows, int64_t D, double eps) {
  report("layer_norm", lab_simcu_layer_norm_fwd(ct, K(x), K(w), K(b), K(y), K(mean), K(rstd), rows, D, eps, NULL));
}
static void layer_norm_bwd(lab_dtype ct, const void *g, const void *x, const void *w, const void *mean,
                           const void *rstd, void *dx, void *dw, void *db, int64_t rows, int64_t D) {
  size_t wb = dw || db ? lab_simcu_norm_bwd_work_bytes(rows, D) : 0;
  void *wk = scratch(wb);
  report("layer_norm", lab_simcu_layer_norm_bwd(ct, K(g), K(x), K(w), K(mean), K(rstd), K(dx), K(dw), K(db), rows, D,
                                                wk ? K(wk) : NULL, NULL));
  scratch_free(wk, wb);
}
static void rms_norm_fwd(lab_dtype ct, const void *x, const void *w, void *y, void *rstd, int64_t rows, int64_t D,
                         double eps) {
  report("rms_norm", lab_simcu_rms_norm_fwd(ct, K(x), K(w), K(y), K(rstd), rows, D, eps, NULL));
}
static void rms_norm_bwd(lab_dtype ct, const void *g, const void *x, const void *w, const void *rstd, void *dx,
                         void *dw, int64_t rows, int64_t D) {
  size_t wb = dw ? lab_simcu_norm_bwd_work_bytes(rows, D) : 0;
  void *wk = scratch(wb);
  report("rms_norm", lab_simcu_rms_norm_bwd(ct, K(g), K(x), K(w), K(rstd), K(dx), K(dw), rows, D, wk ? K(wk) : NULL, NULL));
  scratch_free(wk, wb);
}
static void act_fwd(lab_dtype ct, lab_act_kind kind, const void *x, void *y, int64_t n) {
  report("activation", lab_simcu_act_fwd(ct, kind, K(x), K(y), n, NULL));
}
static void act_bwd(lab_dtype ct, lab_act_kind kind, const void *g, const void *x, void *dx, int64_t n) {
  report("activation", lab_simcu_act_bwd(ct, kind, K(g), K(x), K(dx), n, NULL));
}
static int64_t xent_fwd(lab_dtype ct, const void *logits, const int64_t *target, void *loss, void *lse, int64_t N,
                        int64_t C, int64_t ignore_index, double smoothing) {
  static void *count; /* device scratch for the row count, as the cuda device keeps one */
  if (!count && !(count = lab_sim_device_ops()->alloc(0, 8))) return 0;
  if (report("cross_entropy", lab_simcu_xent_fwd(ct, K(logits), K(target), K(loss), K(lse), N, C, ignore_index,
                                                 smoothing, K(count), NULL)))
    return 0;
  lab_sim_note_host_sync(); /* the cuda device waits for this count */
  return *(int64_t *)K(count);
}
static void xent_bwd(lab_dtype ct, const void *logits, const int64_t *target, const void *lse, void *dlogits, int64_t N,
                     int64_t C, int64_t ignore_index, double smoothing, double scale) {
  report("cross_entropy", lab_simcu_xent_bwd(ct, K(logits), K(target), K(lse), K(dlogits), N, C, ignore_index,
                                             smoothing, scale, NULL));
}
static void embedding_fwd(lab_dtype ct, const void *weight, const int64_t *idx, void *out, int64_t n, int64_t D) {
  report("embedding", lab_simcu_embedding_fwd(ct, K(weight), K(idx), K(out), n, D, NULL));
}
static void embedding_bwd(lab_dtype ct, const void *g, const int64_t *idx, void *dweight, int64_t n, int64_t D) {
  report("embedding", lab_simcu_embedding_bwd(ct, K(g), K(idx), K(dweight), n, D, NULL));
}
static void causal_mask(lab_dtype ct, void *scores, int64_t batches, int64_t T, int64_t S) {
  report("sdpa", lab_simcu_causal_mask(ct, K(scores), batches, T, S, NULL));
}
static void softmax_bwd_rows(lab_dtype ct, const void *P, void *dP, int64_t rows, int64_t S, double scale) {
  report("sdpa", lab_simcu_softmax_bwd_rows(ct, K(P), K(dP), rows, S, scale, NULL));
}
static void adamw(lab_dtype ct, void *p, const void *g, void *m, void *v, int64_t n, double lr, double b1, double b2,
                  double eps, double wd, int64_t step) {
  report("adamw", lab_simcu_adamw(ct, K(p), K(g), K(m), K(v), n, lr, b1, b2, eps, wd, step, NULL));
}

static lab_flash_args flash_view(const lab_flash_args *a) {
  lab_flash_args k = *a;
  k.q = K(a->q), k.k = K(a->k), k.v = K(a->v), k.o = K(a->o), k.dout = K(a->dout);
  k.out = K(a->out), k.lse = K(a->lse), k.dq = K(a->dq), k.dk = K(a->dk), k.dv = K(a->dv), k.work = K(a->work);
  return k;
}
static int flash_result(const char *what, int e) {
  if (e == 716) /* cudaErrorMisalignedAddress, as cuda_device.c says it */
    return lab_fail("sdpa", "flash %s on sim needs 16-byte aligned q, k, v (a view that starts inside a row?): "
                    "pass :clone() or use impl='math'", what);
  return report("sdpa", e);
}
/* kernels/cuda's tensor-core kernel where it takes the case (bf16/f16, D = Dv = 64 or 128,
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
  lab_flash_args k = flash_view(a);
  if (!interpreted(a, &k, 0)) return lab_cpu_device_ops()->flash_fwd(&k);
  return flash_result("forward", lab_simcu_flash_fwd(&k, NULL));
}
static int flash_bwd(const lab_flash_args *a) {
  lab_flash_args k = flash_view(a);
  if (!interpreted(a, &k, 1)) return lab_cpu_device_ops()->flash_bwd(&k);
  return flash_result("backward", lab_simcu_flash_bwd(&k, NULL));
}

void lab_sim_use_simt(lab_device_ops *ops, void *(*kview)(const void *p)) {
  K = kview;
  ops->ewise = ewise, ops->reduce = reduce, ops->sum_middle = sum_middle, ops->softmax_rows = softmax_rows;
  ops->rand = rand_, ops->layer_norm_fwd = layer_norm_fwd, ops->layer_norm_bwd = layer_norm_bwd;
  ops->rms_norm_fwd = rms_norm_fwd, ops->rms_norm_bwd = rms_norm_bwd, ops->act_fwd = act_fwd, ops->act_bwd = act_bwd;
  ops->xent_fwd = xent_fwd, ops->xent_bwd = xent_bwd, ops->embedding_fwd = embedding_fwd;
  ops->embedding_bwd = embedding_bwd, ops->causal_mask = causal_mask, ops->softmax_bwd_rows = softmax_bwd_rows;
  ops->adamw = adamw;
  ops->flash_supports = flash_supports, ops->flash_fwd = flash_fwd, ops->flash_bwd = flash_bwd;
  ops->flash_strided = 1; /* head views (the GPT's) go to the cpu kernel: see interpreted() */
}
#else
typedef int lab_device_sim_simt_unused; /* ISO C: a translation unit is not empty */
#endif
