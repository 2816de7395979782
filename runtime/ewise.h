/* Elementwise tensor ops with broadcasting and type promotion (PyTorch's rules). */
#ifndef LAB_RUNTIME_EWISE_H
#define LAB_RUNTIME_EWISE_H

#include "../kernels/ops.h"
#include "tensor.h"

const char *lab_binary_name(lab_binary_op op);
const char *lab_unary_name(lab_unary_op op);

/* out_dtype < 0 picks the promoted type (bool for comparisons, float for true division of
 * integers). The compute type always follows the promoted input type. */
lab_tensor *lab_binary(lab_binary_op op, lab_tensor *a, lab_tensor *b, int out_dtype);
/* a = a op b in place; b must broadcast to a's shape. */
int lab_binary_(lab_binary_op op, lab_tensor *a, lab_tensor *b);
lab_tensor *lab_unary(lab_unary_op op, lab_tensor *a);
int lab_unary_(lab_unary_op op, lab_tensor *a);
lab_tensor *lab_clamp(lab_tensor *a, double lo, int has_lo, double hi, int has_hi);
int lab_clamp_(lab_tensor *a, double lo, int has_lo, double hi, int has_hi);
lab_tensor *lab_where(lab_tensor *cond, lab_tensor *a, lab_tensor *b);
/* Launches c over out and inputs, all broadcast to out's shape, on out's device. Inputs on
 * another device must be cpu scalars (lab_common_device checked that): they are moved. */
int lab_ew_launch(lab_ew_args *c, lab_tensor *out, int nin, lab_tensor **in);
/* -1 (with lab_fail naming op) unless b broadcasts to a's shape, as an in-place op needs */
int lab_check_inplace_shape(const char *op, lab_tensor *a, lab_tensor *b);
/* Fill every element (views included) with one value. */
int lab_fill_(lab_tensor *t, double value);

#endif
