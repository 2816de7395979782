/* Fused kernels for the neural-network ops, forward and backward, on contiguous rows.
 * ct is LAB_F32 or LAB_F64; all arrays are of that type unless noted. Shapes are in the
 * comments as in llm.c: x is (rows, D). */
#ifndef LAB_KERNELS_NN_H
#define LAB_KERNELS_NN_H

#include "../dtype.h"
#include "../ops.h"

/* y = (x - mean) * rstd * w + b; mean, rstd (rows) saved for backward. w, b may be NULL. */
void lab_layer_norm_fwd(lab_dtype ct, const void *x, const void *w, const void *b, void *y,
                        void *mean, void *rstd, int64_t rows, int64_t D, double eps);
/* dx (rows, D); dw, db (D) are accumulated into (zero them first); any may be NULL */
void lab_layer_norm_bwd(lab_dtype ct, const void *g, const void *x, const void *w,
                        const void *mean, const void *rstd, void *dx, void *dw, void *db,
                        int64_t rows, int64_t D);
/* y = x * rstd * w with rstd = 1/sqrt(mean(x^2) + eps) */
void lab_rms_norm_fwd(lab_dtype ct, const void *x, const void *w, void *y, void *rstd,
                      int64_t rows, int64_t D, double eps);
void lab_rms_norm_bwd(lab_dtype ct, const void *g, const void *x, const void *w,
                      const void *rstd, void *dx, void *dw, int64_t rows, int64_t D);

/* activations over n elements */
void lab_act_fwd(lab_dtype ct, lab_act_kind kind, const void *x, void *y, int64_t n);
void lab_act_bwd(lab_dtype ct, lab_act_kind kind, const void *g, const void *x, void *dx, int64_t n);
/* dx = g * act'(x) for x [rows, cols], and db [cols] = the column sums of dx (set, not added):
 * the preceding Linear's bias gradient taken in the same pass */
void lab_act_bwd_bias(lab_dtype ct, lab_act_kind kind, const void *g, const void *x, void *dx, void *db,
                      int64_t rows, int64_t cols);

/* Cross-entropy over rows of logits (N, C) with int64 targets (N). Writes the per-row loss
 * (0 for ignored rows) and the row's log-sum-exp; returns the count of rows not ignored. */
int64_t lab_cross_entropy_fwd(lab_dtype ct, const void *logits, const int64_t *target,
                              void *loss, void *lse, int64_t N, int64_t C, int64_t ignore_index,
                              double smoothing);
/* dlogits = (softmax - (1 - s) onehot - s / C) * scale for rows not ignored, 0 otherwise */
void lab_cross_entropy_bwd(lab_dtype ct, const void *logits, const int64_t *target,
                           const void *lse, void *dlogits, int64_t N, int64_t C,
                           int64_t ignore_index, double smoothing, double scale);

/* out (n, D) = weight[idx[i]] rows; idx int64, checked by the caller */
void lab_embedding_fwd(lab_dtype ct, const void *weight, const int64_t *idx, void *out,
                       int64_t n, int64_t D);
/* dweight[idx[i]] += g[i] */
void lab_embedding_bwd(lab_dtype ct, const void *g, const int64_t *idx, void *dweight,
                       int64_t n, int64_t D);

/* Causal mask on (T, S) scores rows: entry (t, s) with s > t + (S - T) set to -inf. */
void lab_causal_mask(lab_dtype ct, void *scores, int64_t batches, int64_t T, int64_t S);
/* dS = P * (dP - rowsum(dP * P)) * scale, in place over dP (rows of length S) */
void lab_softmax_bwd_rows(lab_dtype ct, const void *P, void *dP, int64_t rows, int64_t S,
                          double scale);

#endif
