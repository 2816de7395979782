/* One attention block by the math path with the FlashAttention kernels' contract
 * (attention_block_math.c): lab_flash_block_fwd/bwd's path where a device's kernels refuse
 * the dtype or head dims. Shapes as lab_flash_block_fwd/bwd (ops.h): q [..., T, D],
 * k [..., S, D], v [..., S, Dv] of one dtype; out [..., T, Dv] in that dtype, lse [..., T] f32.
 * Return 0, or -1 after lab_fail. */
#ifndef LAB_RUNTIME_AUTOGRAD_ATTENTION_BLOCK_MATH_H
#define LAB_RUNTIME_AUTOGRAD_ATTENTION_BLOCK_MATH_H

#include "../tensor.h"

int lab_attn_block_math_fwd(lab_tensor *q, lab_tensor *k, lab_tensor *v, int causal, double scale, lab_tensor **out,
                            lab_tensor **lse);
int lab_attn_block_math_bwd(lab_tensor *q, lab_tensor *k, lab_tensor *v, lab_tensor *out, lab_tensor *dout,
                            lab_tensor *lse, int causal, double scale, lab_tensor **dq, lab_tensor **dk,
                            lab_tensor **dv);

#endif
