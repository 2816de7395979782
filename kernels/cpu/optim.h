/* Fused optimizer updates over contiguous f32/f64 arrays (one pass over memory). */
#ifndef LAB_KERNELS_OPTIM_H
#define LAB_KERNELS_OPTIM_H

#include "../dtype.h"

/* AdamW (Loshchilov & Hutter): p -= lr * wd * p (decoupled), then
 * m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; p -= lr * (m / bc1) / (sqrt(v / bc2) + eps)
 * with bias corrections bc1 = 1 - b1^step, bc2 = 1 - b2^step. p, g, m, v of type ct. */
void lab_adamw_kernel(lab_dtype ct, void *p, const void *g, void *m, void *v, int64_t n, double lr,
                      double b1, double b2, double eps, double wd, int64_t step);
/* The same update over `count` tensors (tensor t: n[t] elements, weight decay wd[t]) in one
 * parallel region. */
void lab_adamw_multi_kernel(lab_dtype ct, int count, void *const *p, const void *const *g, void *const *m,
                            void *const *v, const int64_t *n, const double *wd, double lr, double b1, double b2,
                            double eps, int64_t step);

#endif
