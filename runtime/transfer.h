/* Tensors and devices: moving a tensor to a device, reading and writing its elements from host
 * memory, and the rule that the operands of one op live on one device. This is the only way
 * host code (the Lua bindings, file formats, printing, collectives) reaches the elements of a
 * tensor that may not live on the cpu. */
#ifndef LAB_RUNTIME_TRANSFER_H
#define LAB_RUNTIME_TRANSFER_H

#include "device.h"
#include "tensor.h"

/* t itself (retained) when already on dev, else a contiguous copy there. */
lab_tensor *lab_to_device(lab_tensor *t, lab_device dev);
/* Moves t's values to dev in place: t keeps its identity (autograd leaf, hooks, references)
 * and becomes contiguous over new storage there, with the same memory tag. */
int lab_move_(lab_tensor *t, lab_device dev);
/* A cpu tensor with t's values: t itself (retained) when t is on the cpu. */
lab_tensor *lab_to_host(lab_tensor *t);
/* Copies t's elements in row-major order into dst (lab_nbytes(t) bytes of t's dtype). */
int lab_copy_to_host(lab_tensor *t, void *dst);
/* Writes t's elements in row-major order from src (lab_nbytes(t) bytes of t's dtype). */
int lab_copy_from_host(lab_tensor *t, const void *src);
/* A new tensor on dev holding n = prod(shape) elements of type dt read from host memory. */
lab_tensor *lab_tensor_from_host(lab_device dev, lab_dtype dt, int ndim, const int64_t *shape, const void *src);
/* The single element of a tensor of numel 1, as a double or an int64 (converted). */
int lab_item_f64(lab_tensor *t, double *v);
int lab_item_i64(lab_tensor *t, int64_t *v);

/* The device the operands of `op` share. A 0-d cpu tensor (a scalar) goes with any device,
 * as in PyTorch; anything else on two devices is an error naming both. NULL entries are
 * skipped; with only cpu scalars the device is the cpu. */
int lab_common_device(const char *op, int n, lab_tensor *const *ts, lab_device *dev);
/* The kernel table of t's device. */
const lab_device_ops *lab_ops_of(const lab_tensor *t);

#endif
