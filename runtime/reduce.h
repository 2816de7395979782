/* Reductions over one dim (0-based) or over all elements (dim < 0), and softmax. */
#ifndef LAB_RUNTIME_REDUCE_H
#define LAB_RUNTIME_REDUCE_H

#include "../kernels/ops.h"
#include "tensor.h"

/* "sum", "mean", ... (kernels/ops.h's LAB_REDUCE_LIST) */
const char *lab_reduce_name(lab_reduce_op op);
/* sum/mean/prod/var/norm. `param` is the correction for var and p for norm. */
lab_tensor *lab_reduction(lab_reduce_op op, lab_tensor *t, int dim, int keepdim, double param);
/* max/min over a dim: values and 0-based indices (i64). With dim < 0, indices are of the
 * flattened tensor. */
int lab_reduce_ext(lab_tensor *t, int dim, int keepdim, int want_max, lab_tensor **values,
                   lab_tensor **indices);
lab_tensor *lab_softmax(lab_tensor *t, int dim, int log);

#endif
