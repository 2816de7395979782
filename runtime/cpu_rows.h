/* The cpu device's iterator: several same-shaped strided operands of a launch (lab_geometry,
 * kernels/ops.h: dims already broadcast and merged by runtime/iter.c) walked together, one
 * inner row at a time, rows split across the OpenMP threads. Knows no tensor: it sits with the
 * cpu kernels (runtime/device_cpu.c) under the tensor core. */
#ifndef LAB_RUNTIME_CPU_ROWS_H
#define LAB_RUNTIME_CPU_ROWS_H

#include <stdint.h>

#include "../kernels/ops.h"

/* ptrs[i] points at operand i's first element of the row, strides[i] is its step in bytes */
typedef void (*lab_row_fn)(void *ctx, char **ptrs, const int64_t *strides, int64_t n);

int64_t lab_rows_numel(const lab_geometry *g);
/* Calls fn over every row; parallel unless the work is small. */
void lab_rows_run(const lab_geometry *g, lab_row_fn fn, void *ctx);

#endif
