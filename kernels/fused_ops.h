/* The fused kernels, each signature written once. Every place that used to repeat a signature
 * by hand is generated from these lists: the device table's entries (runtime/device.h), the
 * cpu kernels' declarations (kernels/cpu/nn.h) and the cpu table (runtime/device_cpu.c), the
 * CUDA launchers' declarations (kernels/cuda/launch.h) and the cuda table's wrappers
 * (runtime/cuda/cuda_device.c), the sim's tables (runtime/device_sim.c, device_sim_simt.c,
 * runtime/simrt/launch.c) and the kernel profiler's timing wrappers (runtime/kprof.c). Adding a
 * fused kernel is one line here plus its kernels: a cpu function and, where a list below says
 * so, a LAB_CU launcher in kernels/cuda. A device that lacks one fails to link, and
 * tests/unit/test_device.c checks every table has every entry its list promises.
 *
 * Each entry is X(name, R, cpu, cat, op, anchor, work, params, args):
 *   name    the device table's entry and the launcher's suffix (LAB_CU(name));
 *   R       the cpu kernel's result: V (void) or I64 (int64_t), LAB_FUSED_RET(R) is its type; the
 *           device table's entry returns LAB_FUSED_STATUS(R): for V an int status (0, or -1 with
 *           lab_fail naming the op: a launch that failed is raised by the op's caller, not
 *           dropped), for I64 the value itself (xent_fwd: -2 with lab_fail when it failed);
 *   cpu     the cpu kernel (kernels/cpu) that is the reference for every device;
 *   cat     the kernel profiler's category (LAB_KP_##cat, runtime/kprof.h);
 *   op      the op named in a launch error;
 *   anchor  the parameter whose memory names the device a launch runs on;
 *   work    LAB_FUSED_WORK list only: the scratch bytes the launcher needs (0: none), an
 *           expression of the parameters using LAB_CU(...) size functions;
 *   params  the parameter list (a parameter's name never ends in '_': wrappers' locals do);
 *   args    the parameters in order, each pointer wrapped in LAB_P(...) so a device whose
 *           pointers need translating (the sim's kernel view) can define LAB_P.
 * Shapes are in the comments as in llm.c; ct is the compute type (f32, f64; bf16/f16 where a
 * device's kernel takes them). */
#ifndef LAB_KERNELS_FUSED_OPS_H
#define LAB_KERNELS_FUSED_OPS_H

#include <stdint.h>

#include "dtype.h"
#include "ops.h"

#define LAB_FUSED_RET_V void
#define LAB_FUSED_RET_I64 int64_t
#define LAB_FUSED_RET(R) LAB_FUSED_RET_##R
#define LAB_FUSED_STATUS_V int
#define LAB_FUSED_STATUS_I64 int64_t
#define LAB_FUSED_STATUS(R) LAB_FUSED_STATUS_##R
#define LAB_UNPAREN(...) __VA_ARGS__

/* Launched as the cpu kernel is called, with a stream added: int LAB_CU(name)(params, stream). */
#define LAB_FUSED_LAUNCH(X)                                                                                        \
  /* softmax (or log-softmax) of `rows` contiguous rows of length n, in place allowed */                          \
  X(softmax_rows, V, lab_softmax_rows, ATTENTION, "softmax", x, 0,                                                 \
    (lab_dtype ct, const void *x, void *out, int64_t rows, int64_t n, int log), (ct, LAB_P(x), LAB_P(out), rows, n, log)) \
  /* x (rows, D): y = (x - mean) * rstd * w + b; mean, rstd (rows) saved for backward; w, b may be NULL */       \
  X(layer_norm_fwd, V, lab_layer_norm_fwd, NORM, "layer_norm", x, 0,                                               \
    (lab_dtype ct, const void *x, const void *w, const void *b, void *y, void *mean, void *rstd, int64_t rows,     \
     int64_t D, double eps),                                                                                       \
    (ct, LAB_P(x), LAB_P(w), LAB_P(b), LAB_P(y), LAB_P(mean), LAB_P(rstd), rows, D, eps))                           \
  /* y = x * rstd * w with rstd = 1/sqrt(mean(x^2) + eps) */                                                       \
  X(rms_norm_fwd, V, lab_rms_norm_fwd, NORM, "rms_norm", x, 0,                                                     \
    (lab_dtype ct, const void *x, const void *w, void *y, void *rstd, int64_t rows, int64_t D, double eps),        \
    (ct, LAB_P(x), LAB_P(w), LAB_P(y), LAB_P(rstd), rows, D, eps))                                                 \
  /* activations over n elements, and dx = g * act'(x) */                                                          \
  X(act_fwd, V, lab_act_fwd, ACTIVATION, "activation", x, 0,                                                       \
    (lab_dtype ct, lab_act_kind kind, const void *x, void *y, int64_t n), (ct, kind, LAB_P(x), LAB_P(y), n))       \
  X(act_bwd, V, lab_act_bwd, ACTIVATION, "activation", x, 0,                                                       \
    (lab_dtype ct, lab_act_kind kind, const void *g, const void *x, void *dx, int64_t n),                          \
    (ct, kind, LAB_P(g), LAB_P(x), LAB_P(dx), n))                                                                  \
  /* dlogits (N, C) = (softmax - (1 - s) onehot - s / C) * scale for rows not ignored, 0 otherwise */            \
  X(xent_bwd, V, lab_cross_entropy_bwd, LOSS, "cross_entropy", logits, 0,                                          \
    (lab_dtype ct, const void *logits, const int64_t *target, const void *lse, void *dlogits, int64_t N,           \
     int64_t C, int64_t ignore_index, double smoothing, double scale),                                             \
    (ct, LAB_P(logits), LAB_P(target), LAB_P(lse), LAB_P(dlogits), N, C, ignore_index, smoothing, scale))          \
  /* ids (n) into out (n; NULL: check only): each id outside [0, limit) other than `allowed` becomes          \
   * `allowed` (a row in range, or one the op ignores) and the first one's position + 1 and value go to           \
   * bad[0], bad[1] unless bad[0] is set (an earlier check failed): a device-side assert (ops_nn.c) */          \
  X(ids_check, V, lab_ids_check, EMBEDDING, "ids_check", ids, 0,                                                   \
    (const int64_t *ids, int64_t *out, int64_t n, int64_t limit, int64_t allowed, int64_t *bad),                   \
    (LAB_P(ids), LAB_P(out), n, limit, allowed, LAB_P(bad)))                                                       \
  /* out (n, D) = weight[idx[i]] rows (idx int64, checked by the caller); dweight[idx[i]] += g[i] */              \
  X(embedding_fwd, V, lab_embedding_fwd, EMBEDDING, "embedding", weight, 0,                                        \
    (lab_dtype ct, const void *weight, const int64_t *idx, void *out, int64_t n, int64_t D),                       \
    (ct, LAB_P(weight), LAB_P(idx), LAB_P(out), n, D))                                                             \
  X(embedding_bwd, V, lab_embedding_bwd, EMBEDDING, "embedding", dweight, 0,                                       \
    (lab_dtype ct, const void *g, const int64_t *idx, void *dweight, int64_t n, int64_t D),                        \
    (ct, LAB_P(g), LAB_P(idx), LAB_P(dweight), n, D))                                                              \
  /* scores (batches, T, S): entry (t, s) with s > t + (S - T) set to -inf */                                     \
  X(causal_mask, V, lab_causal_mask, ATTENTION, "sdpa", scores, 0,                                                 \
    (lab_dtype ct, void *scores, int64_t batches, int64_t T, int64_t S), (ct, LAB_P(scores), batches, T, S))       \
  /* dS = P * (dP - rowsum(dP * P)) * scale, in place over dP (rows of length S) */                               \
  X(softmax_bwd_rows, V, lab_softmax_bwd_rows, ATTENTION, "sdpa", P, 0,                                            \
    (lab_dtype ct, const void *P, void *dP, int64_t rows, int64_t S, double scale),                                \
    (ct, LAB_P(P), LAB_P(dP), rows, S, scale))                                                                     \
  /* AdamW (Loshchilov & Hutter): p -= lr * wd * p (decoupled), then m = b1 m + (1-b1) g;                          \
   * v = b2 v + (1-b2) g^2; p -= lr * (m / bc1) / (sqrt(v / bc2) + eps), bc = 1 - b^step */                       \
  X(adamw, V, lab_adamw_kernel, OPTIMIZER, "adamw", p, 0,                                                          \
    (lab_dtype ct, void *p, const void *g, void *m, void *v, int64_t n, double lr, double b1, double b2,           \
     double eps, double wd, int64_t step),                                                                         \
    (ct, LAB_P(p), LAB_P(g), LAB_P(m), LAB_P(v), n, lr, b1, b2, eps, wd, step))

/* Launched with device scratch of `work` bytes: int LAB_CU(name)(params, void *work, stream),
 * work NULL when 0 bytes are needed. */
#define LAB_FUSED_WORK(X)                                                                                          \
  /* out (outer, inner) = scale * sum over R of x (outer, R, inner): bias gradients, batch sums */                \
  X(sum_middle, V, lab_sum_middle, ELEMENTWISE, "sum", x, LAB_CU(sum_middle_work_bytes)(outer, R, inner),         \
    (lab_dtype ct, const void *x, void *out, int64_t outer, int64_t R, int64_t inner, double scale),               \
    (ct, LAB_P(x), LAB_P(out), outer, R, inner, scale))                                                            \
  /* dx (rows, D); dw, db (D) are accumulated into (zero them first); any may be NULL */                          \
  X(layer_norm_bwd, V, lab_layer_norm_bwd, NORM, "layer_norm", x,                                                  \
    (dw || db ? LAB_CU(norm_bwd_work_bytes)(rows, D) : 0),                                                         \
    (lab_dtype ct, const void *g, const void *x, const void *w, const void *mean, const void *rstd, void *dx,      \
     void *dw, void *db, int64_t rows, int64_t D),                                                                 \
    (ct, LAB_P(g), LAB_P(x), LAB_P(w), LAB_P(mean), LAB_P(rstd), LAB_P(dx), LAB_P(dw), LAB_P(db), rows, D))         \
  X(rms_norm_bwd, V, lab_rms_norm_bwd, NORM, "rms_norm", x, (dw ? LAB_CU(norm_bwd_work_bytes)(rows, D) : 0),       \
    (lab_dtype ct, const void *g, const void *x, const void *w, const void *rstd, void *dx, void *dw, int64_t rows, \
     int64_t D),                                                                                                   \
    (ct, LAB_P(g), LAB_P(x), LAB_P(w), LAB_P(rstd), LAB_P(dx), LAB_P(dw), rows, D))

/* Every device has these, but a GPU launches them its own way (the cuda table's wrapper is
 * written by hand): cross-entropy's count of rows not ignored, kept in the device's scratch. */
#define LAB_FUSED_OWN(X)                                                                                           \
  /* rows of logits (N, C), int64 targets (N): the per-row loss (0 for ignored rows) and the row's                \
   * log-sum-exp; returns the count of rows not ignored, or -1 where it stays on the device (cuda: the     \
   * caller takes the mean there, so the forward never waits for the GPU); the device entry returns -2   \
   * (with lab_fail) when the launch failed */                                                             \
  X(xent_fwd, I64, lab_cross_entropy_fwd, LOSS, "cross_entropy", logits, 0,                                        \
    (lab_dtype ct, const void *logits, const int64_t *target, void *loss, void *lse, int64_t N, int64_t C,         \
     int64_t ignore_index, double smoothing),                                                                      \
    (ct, LAB_P(logits), LAB_P(target), LAB_P(loss), LAB_P(lse), N, C, ignore_index, smoothing))

/* Optional entries (NULL: the caller takes the plain kernels), on the cpu only: the sim lane
 * runs the fallbacks the cuda device takes. */
#define LAB_FUSED_OPTIONAL(X)                                                                                      \
  /* dx = g * act'(x) for x [rows, cols], and db [cols] = the column sums of dx (set, not added): the              \
   * preceding Linear's bias gradient taken in the same pass (else act_bwd and sum_middle) */                     \
  X(act_bwd_bias, V, lab_act_bwd_bias, ACTIVATION, "activation", x, 0,                                             \
    (lab_dtype ct, lab_act_kind kind, const void *g, const void *x, void *dx, void *db, int64_t rows, int64_t cols), \
    (ct, kind, LAB_P(g), LAB_P(x), LAB_P(dx), LAB_P(db), rows, cols))                                              \
  /* AdamW over `count` tensors (tensor t: n[t] elements, weight decay wd[t]) in one parallel region */           \
  X(adamw_multi, V, lab_adamw_multi_kernel, OPTIMIZER, "adamw", p, 0,                                              \
    (lab_dtype ct, int count, void *const *p, const void *const *g, void *const *m, void *const *v,                \
     const int64_t *n, const double *wd, double lr, double b1, double b2, double eps, int64_t step),               \
    (ct, count, p, g, m, v, n, wd, lr, b1, b2, eps, step))

/* Every device has these entries. */
#define LAB_FUSED_REQUIRED(X) LAB_FUSED_LAUNCH(X) LAB_FUSED_WORK(X) LAB_FUSED_OWN(X)
#define LAB_FUSED_ALL(X) LAB_FUSED_REQUIRED(X) LAB_FUSED_OPTIONAL(X)

#endif
