/* Size arithmetic of tensors, checked: element counts and byte sizes are products of
 * user-given integers, and an unchecked product wraps (2^32 x 2^32 elements of f32 became a
 * tensor of 0 bytes that was then read). Every factory, view, expand, and file reader goes
 * through lab_check_size, which refuses negative sizes, products that overflow int64 and
 * tensors larger than LAB_MAX_TENSOR_BYTES, naming the op and the shape. */
#ifndef LAB_RUNTIME_SIZE_H
#define LAB_RUNTIME_SIZE_H

#include <stddef.h>
#include <stdint.h>

/* The largest tensor (its logical size, views included): 2^48 bytes = 256 TiB, more than any
 * machine's memory, far below where int64 offsets and byte counts could wrap. */
#define LAB_MAX_TENSOR_BYTES ((int64_t)1 << 48)

/* the most dims a tensor has (tensor.h includes this header) */
#define LAB_MAX_DIMS 8

/* numel of shape[0..ndim) into *numel (may be NULL) when every size is >= 0 and numel x
 * elem_size <= LAB_MAX_TENSOR_BYTES; else lab_fail(op, "shape [..] needs 2^62 elements x 4
 * bytes, more than ...") and -1. */
int lab_check_size(const char *op, int ndim, const int64_t *shape, size_t elem_size, int64_t *numel);

/* "[2, 3]" of shape[0..ndim) into buf; returns buf */
const char *lab_dims_str(int ndim, const int64_t *shape, char *buf, size_t n);

/* a * b and a + b, or 0 when the result does not fit in int64 (the result is then unset) */
static inline int lab_mul_fits(int64_t a, int64_t b, int64_t *out) { return !__builtin_mul_overflow(a, b, out); }
static inline int lab_add_fits(int64_t a, int64_t b, int64_t *out) { return !__builtin_add_overflow(a, b, out); }

#endif
