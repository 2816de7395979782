/* Matrix products with PyTorch's matmul semantics: 1-D and 2-D operands, and batched
 * products with broadcast batch dims. */
#ifndef LAB_RUNTIME_MATMUL_H
#define LAB_RUNTIME_MATMUL_H

#include "tensor.h"

lab_tensor *lab_matmul(lab_tensor *a, lab_tensor *b);

#endif
