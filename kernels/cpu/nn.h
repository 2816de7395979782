/* The cpu's fused kernels: forward and backward of the neural-network ops, the middle sum, the
 * row softmax and AdamW, on contiguous rows, declared from their one signature in
 * kernels/fused_ops.h (the shapes are in its comments, as in llm.c). ct is LAB_F32 or LAB_F64;
 * all arrays are of that type unless noted. Defined in nn.c, reduce.c and optim.c. */
#ifndef LAB_KERNELS_NN_H
#define LAB_KERNELS_NN_H

#include "../dtype.h"
#include "../fused_ops.h"
#include "../ops.h"

#define LAB_CPU_KERNEL_(name, R, cpu, cat, op, anchor, work, params, args) LAB_FUSED_RET(R) cpu params;
LAB_FUSED_ALL(LAB_CPU_KERNEL_)
#undef LAB_CPU_KERNEL_

#endif
