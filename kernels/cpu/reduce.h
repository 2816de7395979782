/* Reductions over one contiguous row in a compute type. Floating sums accumulate in double
 * so that long rows of f32 (and the half types widened to f32) keep their precision. */
#ifndef LAB_KERNELS_REDUCE_H
#define LAB_KERNELS_REDUCE_H

#include "../dtype.h"

double lab_row_sum_f(lab_dtype ct, const void *x, int64_t n);
int64_t lab_row_sum_i(const int64_t *x, int64_t n);
int64_t lab_row_prod_i(const int64_t *x, int64_t n);
double lab_row_prod_f(lab_dtype ct, const void *x, int64_t n);
/* 0-based index of the first max (want_max) or min; a NaN wins, as in PyTorch. */
int64_t lab_row_argext(lab_dtype ct, const void *x, int64_t n, int want_max);
/* Variance with `correction` subtracted from n in the denominator (1 = unbiased). */
double lab_row_var(lab_dtype ct, const void *x, int64_t n, double correction);
/* (sum |x|^p)^(1/p); p = INFINITY gives max |x|. */
double lab_row_norm(lab_dtype ct, const void *x, int64_t n, double p);
/* lab_sum_middle (a middle dim's sum as vector adds of whole rows, accumulated in double) and
 * lab_softmax_rows are fused kernels: declared in nn.h from kernels/fused_ops.h */

#endif
