/* The geometry of a strided launch from its tensors: several same-shaped strided operands
 * broadcast to one shape, and dims that are contiguous in every operand merged, so a
 * contiguous tensor is one row and a transposed one is a loop of rows. The device walks it
 * (the cpu: runtime/cpu_rows.h). */
#ifndef LAB_RUNTIME_ITER_H
#define LAB_RUNTIME_ITER_H

#include "device.h"
#include "tensor.h"

#define LAB_ITER_MAX_OPS LAB_DEV_MAX_OPS

/* the geometry a device launch receives (runtime/device.h) */
typedef lab_geometry lab_iter;

/* Operands are broadcast to `shape` (ndim dims): each must broadcast to it. */
void lab_iter_init(lab_iter *it, int ndim, const int64_t *shape, int nops, lab_tensor **ops);

#endif
