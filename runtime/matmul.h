/* Matrix products with PyTorch's matmul semantics: 1-D and 2-D operands, and batched
 * products with broadcast batch dims. */
#ifndef LAB_RUNTIME_MATMUL_H
#define LAB_RUNTIME_MATMUL_H

#include "tensor.h"

lab_tensor *lab_matmul(lab_tensor *a, lab_tensor *b);
/* The result shape once the dims added for 1-D operands ([1,k] / [k,1]) are removed from
 * the matrix product c; returns its ndim. */
int lab_matmul_drop_vector_dims(int a_ndim, int b_ndim, const lab_tensor *c, int64_t *shape);

#endif
