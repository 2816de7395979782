/* FlashAttention on the CPU: scaled dot-product attention that never holds the T x S score
 * matrix. Shapes and conventions are those of lab_flash_args (kernels/ops.h). */
#ifndef LAB_KERNELS_FLASH_ATTENTION_H
#define LAB_KERNELS_FLASH_ATTENTION_H

#include "../ops.h"

/* Forward: a->out and a->lse from q, k, v. Inputs f32, bf16 or f16, sums in f32.
 * Returns 0, or -1 when the dtype is not one of those or a tile buffer cannot be allocated. */
int lab_flash_attn_fwd(const lab_flash_args *a);
/* Backward: a->dq, a->dk, a->dv from q, k, v, o, dout and the forward's lse (a->work holds
 * lab_flash_work_bytes). Returns 0 or -1 as the forward. */
int lab_flash_attn_bwd(const lab_flash_args *a);

#endif
