/* Fused optimizer updates on tensors, run by the kernel of the parameters' device. */
#ifndef LAB_RUNTIME_OPTIM_H
#define LAB_RUNTIME_OPTIM_H

#include "tensor.h"

typedef struct {
  double lr, beta1, beta2, eps, weight_decay;
  int64_t step;
} lab_adamw_opts;

/* One AdamW step over p with gradient g and moments m, v (kernels/fused_ops.h has the math):
 * all contiguous, same size, same dtype (f32 or f64), on one device. */
int lab_adamw_(lab_tensor *p, lab_tensor *g, lab_tensor *m, lab_tensor *v, const lab_adamw_opts *o);
/* The step over `count` parameters (weight decay wd[i] for parameter i; o->weight_decay is not
 * read), checked as lab_adamw_; one kernel call (one parallel region) when they share a
 * dtype and device whose table has adamw_multi, else one lab_adamw_ each. */
int lab_adamw_multi_(int count, lab_tensor **p, lab_tensor **g, lab_tensor **m, lab_tensor **v, const double *wd,
                     const lab_adamw_opts *o);

#endif
