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
size_t lab_simrt_cu_sum_middle_work_bytes(int64_t outer, int64_t R, int64_t inner) {
  return lab_simcu_sum_middle_work_bytes(outer, R, inner);
}
size_t lab_simrt_cu_norm_bwd_work_bytes(int64_t rows, int64_t D) { return lab_simcu_norm_bwd_work_bytes(rows, D); }
int lab_simrt_cu_sum_middle(lab_dtype ct, const void *x, void *out, int64_t outer, int64_t R, int64_t inner,
                            double scale, void *work, cudaStream_t s) {
  RUN(lab_simcu_sum_middle(ct, K(x), K(out), outer, R, inner, scale, K(work), NULL));
}
int lab_simrt_cu_softmax_rows(lab_dtype ct, const void *x, void *out, int64_t rows, int64_t n, int log,
                              cudaStream_t s) {
  RUN(lab_simcu_softmax_rows(ct, K(x), K(out), rows, n, log, NULL));
}
int lab_simrt_cu_rand(const lab_rand_args *a, cudaStream_t s) {
  lab_rand_args k = *a;
  k.out = K(a->out);
  RUN(lab_simcu_rand(&k, NULL));
}
int lab_simrt_cu_layer_norm_fwd(lab_dtype ct, const void *x, const void *w, const void *b, void *y, void *mean,
                                void *rstd, int64_t rows, int64_t D, double eps, cudaStream_t s) {
  RUN(lab_simcu_layer_norm_fwd(ct, K(x), K(w), K(b), K(y), K(mean), K(rstd), rows, D, eps, NULL));
}
int lab_simrt_cu_layer_norm_bwd(lab_dtype ct, const void *g, const void *x, const void *w, const void *mean,
                                const void *rstd, void *dx, void *dw, void *db, int64_t rows, int64_t D, void *work,
                                cudaStream_t s) {
  RUN(lab_simcu_layer_norm_bwd(ct, K(g), K(x), K(w), K(mean), K(rstd), K(dx), K(dw), K(db), rows, D, K(work), NULL));
}
int lab_simrt_cu_rms_norm_fwd(lab_dtype ct, const void *x, const void *w, void *y, void *rstd, int64_t rows,
                              int64_t D, double eps, cudaStream_t s) {
  RUN(lab_simcu_rms_norm_fwd(ct, K(x), K(w), K(y), K(rstd), rows, D, eps, NULL));
}
int lab_simrt_cu_rms_norm_bwd(lab_dtype ct, const void *g, const void *x, const void *w, const void *rstd, void *dx,
                              void *dw, int64_t rows, int64_t D, void *work, cudaStream_t s) {
  RUN(lab_simcu_rms_norm_bwd(ct, K(g), K(x), K(w), K(rstd), K(dx), K(dw), rows, D, K(work), NULL));
}
int lab_simrt_cu_act_fwd(lab_dtype ct, lab_act_kind kind, const void *x, void *y, int64_t n, cudaStream_t s) {
  RUN(lab_simcu_act_fwd(ct, kind, K(x), K(y), n, NULL));
}
int lab_simrt_cu_act_bwd(lab_dtype ct, lab_act_kind kind, const void *g, const void *x, void *dx, int64_t n,
                         cudaStream_t s) {
  RUN(lab_simcu_act_bwd(ct, kind, K(g), K(x), K(dx), n, NULL));
}
int lab_simrt_cu_xent_fwd(lab_dtype ct, const void *logits, const int64_t *target, void *loss, void *lse, int64_t N,
                          int64_t C, int64_t ignore_index, double smoothing, int64_t *count_out, cudaStream_t s) {
  RUN(lab_simcu_xent_fwd(ct, K(logits), K(target), K(loss), K(lse), N, C, ignore_index, smoothing, K(count_out),
                         NULL));
}
int lab_simrt_cu_xent_bwd(lab_dtype ct, const void *logits, const int64_t *target, const void *lse, void *dlogits,
                          int64_t N, int64_t C, int64_t ignore_index, double smoothing, double scale,
                          cudaStream_t s) {
  RUN(lab_simcu_xent_bwd(ct, K(logits), K(target), K(lse), K(dlogits), N, C, ignore_index, smoothing, scale, NULL));
}
int lab_simrt_cu_embedding_fwd(lab_dtype ct, const void *weight, const int64_t *idx, void *out, int64_t n, int64_t D,
                               cudaStream_t s) {
  RUN(lab_simcu_embedding_fwd(ct, K(weight), K(idx), K(out), n, D, NULL));
}
int lab_simrt_cu_embedding_bwd(lab_dtype ct, const void *g, const int64_t *idx, void *dweight, int64_t n, int64_t D,
                               cudaStream_t s) {
  RUN(lab_simcu_embedding_bwd(ct, K(g), K(idx), K(dweight), n, D, NULL));
}
int lab_simrt_cu_causal_mask(lab_dtype ct, void *scores, int64_t batches, int64_t T, int64_t S, cudaStream_t s) {
  RUN(lab_simcu_causal_mask(ct, K(scores), batches, T, S, NULL));
}
int lab_simrt_cu_softmax_bwd_rows(lab_dtype ct, const void *P, void *dP, int64_t rows, int64_t S, double scale,
                                  cudaStream_t s) {
  RUN(lab_simcu_softmax_bwd_rows(ct, K(P), K(dP), rows, S, scale, NULL));
}
int lab_simrt_cu_flash_supports(lab_dtype dt, int64_t D, int64_t Dv) { return lab_simcu_flash_supports(dt, D, Dv); }
static lab_flash_args flash_view(const lab_flash_args *a) {
  lab_flash_args k = *a;
  k.q = K(a->q), k.k = K(a->k), k.v = K(a->v), k.o = K(a->o), k.dout = K(a->dout);
  k.out = K(a->out), k.lse = K(a->lse), k.dq = K(a->dq), k.dk = K(a->dk), k.dv = K(a->dv), k.work = K(a->work);
  return k;
}
int lab_simrt_cu_flash_fwd(const lab_flash_args *a, cudaStream_t s) {
  lab_flash_args k = flash_view(a);
  RUN(lab_simcu_flash_fwd(&k, NULL));
}
int lab_simrt_cu_flash_bwd(const lab_flash_args *a, cudaStream_t s) {
  lab_flash_args k = flash_view(a);
  RUN(lab_simcu_flash_bwd(&k, NULL));
}
int lab_simrt_cu_adamw(lab_dtype ct, void *p, const void *g, void *m, void *v, int64_t n, double lr, double b1,
                       double b2, double eps, double wd, int64_t step, cudaStream_t s) {
  RUN(lab_simcu_adamw(ct, K(p), K(g), K(m), K(v), n, lr, b1, b2, eps, wd, step, NULL));
}
