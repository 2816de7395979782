/* Differentiable tensor ops: each computes its result with the plain op and, when an input
 * requires grad (and grad mode is on), records a node whose backward is written beside it.
 * Same conventions as the plain ops: new references, NULL after lab_fail(). */
#ifndef LAB_RUNTIME_AUTOGRAD_OPS_H
#define LAB_RUNTIME_AUTOGRAD_OPS_H

#include "../reduce.h"
#include "autograd.h"

/* elementwise (ops_ewise.c) */
lab_tensor *lab_ad_binary(lab_binary_op op, lab_tensor *a, lab_tensor *b, int out_dtype);
lab_tensor *lab_ad_unary(lab_unary_op op, lab_tensor *a);
lab_tensor *lab_ad_clamp(lab_tensor *a, double lo, int has_lo, double hi, int has_hi);
lab_tensor *lab_ad_where(lab_tensor *cond, lab_tensor *a, lab_tensor *b);

/* shapes and copies (ops_shape.c) */
lab_tensor *lab_ad_view(lab_tensor *t, int ndim, const int64_t *shape);
lab_tensor *lab_ad_reshape(lab_tensor *t, int ndim, const int64_t *shape);
lab_tensor *lab_ad_transpose(lab_tensor *t, int d0, int d1);
lab_tensor *lab_ad_permute(lab_tensor *t, const int *dims);
lab_tensor *lab_ad_narrow(lab_tensor *t, int dim, int64_t start, int64_t length);
lab_tensor *lab_ad_select(lab_tensor *t, int dim, int64_t index);
lab_tensor *lab_ad_expand(lab_tensor *t, int ndim, const int64_t *shape);
lab_tensor *lab_ad_unsqueeze(lab_tensor *t, int dim);
lab_tensor *lab_ad_squeeze(lab_tensor *t, int dim);
lab_tensor *lab_ad_contiguous(lab_tensor *t);
lab_tensor *lab_ad_clone(lab_tensor *t);
lab_tensor *lab_ad_to_dtype(lab_tensor *t, lab_dtype dt);
lab_tensor *lab_ad_to_device(lab_tensor *t, lab_device dev); /* the gradient moves back */
lab_tensor *lab_ad_cat(int n, lab_tensor **ts, int dim);
lab_tensor *lab_ad_stack(int n, lab_tensor **ts, int dim);

/* reductions and matmul (ops_reduce.c) */
lab_tensor *lab_ad_reduction(lab_reduce_op op, lab_tensor *t, int dim, int keepdim, double param);
int lab_ad_reduce_ext(lab_tensor *t, int dim, int keepdim, int want_max, lab_tensor **values,
                      lab_tensor **indices);
lab_tensor *lab_ad_softmax(lab_tensor *t, int dim, int log);
lab_tensor *lab_ad_matmul(lab_tensor *a, lab_tensor *b);

/* y = x W^T + b for W [out, in], x [..., in]; b may be NULL; the bias in the GEMM (ops_linear.c) */
lab_tensor *lab_ad_linear(lab_tensor *x, lab_tensor *w, lab_tensor *b);
/* act(x W^T + b) as one op: its backward takes act' and the bias gradient in one pass */
lab_tensor *lab_ad_linear_act(lab_tensor *x, lab_tensor *w, lab_tensor *b, lab_act_kind kind);

/* neural-network ops with fused kernels (ops_nn.c) */
/* idx holds 0-based ids (any integer dtype); out is idx.shape + [dim] */
lab_tensor *lab_ad_embedding(lab_tensor *weight, lab_tensor *idx);
/* normalise over the last dim; w, b may be NULL */
lab_tensor *lab_ad_layer_norm(lab_tensor *x, lab_tensor *w, lab_tensor *b, double eps);
lab_tensor *lab_ad_rms_norm(lab_tensor *x, lab_tensor *w, double eps);
lab_tensor *lab_ad_gelu(lab_tensor *x, int tanh_approx);
lab_tensor *lab_ad_silu(lab_tensor *x);
lab_tensor *lab_ad_dropout(lab_tensor *x, double p, int training);
/* logits [N, C], target [N] of 0-based class ids; mean over targets != ignore_index */
lab_tensor *lab_ad_cross_entropy(lab_tensor *logits, lab_tensor *target, int64_t ignore_index,
                                 double label_smoothing);
/* Scaled dot-product attention (ops_attention.c): q [..., T, D], k [..., S, D], v [..., S, Dv];
 * softmax(q k^T * scale [+ causal mask]) v. LAB_SDPA_MATH materialises the T x S scores;
 * LAB_SDPA_FLASH runs the device's FlashAttention kernel (memory linear in T); LAB_SDPA_AUTO
 * takes flash where the device supports the dtype and head dims, math elsewhere. */
typedef enum { LAB_SDPA_AUTO, LAB_SDPA_FLASH, LAB_SDPA_MATH } lab_sdpa_impl;
lab_tensor *lab_ad_sdpa(lab_tensor *q, lab_tensor *k, lab_tensor *v, int causal, double scale, lab_sdpa_impl impl);
/* The FlashAttention kernels without autograd, for callers that merge blocks by their
 * log-sum-exp themselves (ring attention): out [..., T, Dv] and lse [..., T] (f32) of one block;
 * and its dq, dk, dv given the (merged) out, dout and lse. q, k, v of one float dtype; where the device's
 * kernels refuse it or the head dims, the math path (attention_block_math.h) gives the same
 * contract. Return 0, or -1 with lab_fail. */
int lab_flash_block_fwd(lab_tensor *q, lab_tensor *k, lab_tensor *v, int causal, double scale, lab_tensor **out,
                        lab_tensor **lse);
int lab_flash_block_bwd(lab_tensor *q, lab_tensor *k, lab_tensor *v, lab_tensor *out, lab_tensor *dout,
                        lab_tensor *lse, int causal, double scale, lab_tensor **dq, lab_tensor **dk, lab_tensor **dv);

#endif
