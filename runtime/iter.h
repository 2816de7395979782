/* Walking several same-shaped strided operands together, one inner row at a time. Dims that
 * are contiguous in every operand are merged first, so a contiguous tensor is one row and
 * a transposed one is a loop of rows. Rows are split across the OpenMP threads. */
#ifndef LAB_RUNTIME_ITER_H
#define LAB_RUNTIME_ITER_H

#include "device.h"
#include "tensor.h"

#define LAB_ITER_MAX_OPS LAB_DEV_MAX_OPS

/* the geometry a device launch receives (runtime/device.h) */
typedef lab_geometry lab_iter;

/* ptrs[i] points at operand i's first element of the row, strides[i] is its step in bytes */
typedef void (*lab_row_fn)(void *ctx, char **ptrs, const int64_t *strides, int64_t n);

/* Operands are broadcast to `shape` (ndim dims): each must broadcast to it. */
void lab_iter_init(lab_iter *it, int ndim, const int64_t *shape, int nops, lab_tensor **ops);
int64_t lab_iter_numel(const lab_iter *it);
/* Calls fn over every row; parallel unless the work is small. */
void lab_iter_run(const lab_iter *it, lab_row_fn fn, void *ctx);

#endif
