/* Moving elements between storage types and compute types (f32, f64, i64) along a strided
 * row. Every elementwise and reduction kernel is built on these two loops. */
#ifndef LAB_KERNELS_CONVERT_H
#define LAB_KERNELS_CONVERT_H

#include "../dtype.h"

/* dst[i] = (ct) src[i*stride]; stride in bytes, dst contiguous of compute type ct. */
void lab_load_row(lab_dtype src_t, const char *src, int64_t stride, lab_dtype ct, void *dst,
                  int64_t n);
/* dst[i*stride] = (dst_t) src[i]; src contiguous of compute type ct. */
void lab_store_row(lab_dtype ct, const void *src, lab_dtype dst_t, char *dst, int64_t stride,
                   int64_t n);
/* One element to/from double and int64, for scalar access from the runtime. */
double lab_get_f64(lab_dtype t, const void *p);
int64_t lab_get_i64(lab_dtype t, const void *p);
void lab_set_f64(lab_dtype t, void *p, double v);
void lab_set_i64(lab_dtype t, void *p, int64_t v);

#endif
