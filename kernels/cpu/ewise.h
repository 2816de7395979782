/* Elementwise kernels on contiguous arrays in a compute type (f32, f64 or i64).
 * Broadcasting, strides and storage types are handled by the runtime, which feeds these
 * loops one block of a row at a time. */
#ifndef LAB_KERNELS_EWISE_H
#define LAB_KERNELS_EWISE_H

#include "../dtype.h"
#include "../ops.h"

/* out[i] = a[i] op b[i]; ct is the compute type of all three arrays. Comparisons write 1/0. */
void lab_binary_kernel(lab_binary_op op, lab_dtype ct, const void *a, const void *b, void *out,
                       int64_t n);
void lab_unary_kernel(lab_unary_op op, lab_dtype ct, const void *a, void *out, int64_t n);
/* out[i] = clamp(a[i], lo, hi); has_lo/has_hi say which bound applies. */
void lab_clamp_kernel(lab_dtype ct, const void *a, void *out, int64_t n, double lo, int has_lo,
                      double hi, int has_hi);
/* out[i] = c[i] ? a[i] : b[i] */
void lab_where_kernel(lab_dtype ct, const void *c, const void *a, const void *b, void *out,
                      int64_t n);

#endif
