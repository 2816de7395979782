/* Copies of tensors (declared in tensor.h, "copies"): copy_ with broadcasting, dtype conversion
 * and a move between devices, and the copies made from it (contiguous, clone, to_dtype). Its own
 * file: the tensor's header and views (tensor.c) call no op, and the elementwise front end
 * (ewise.c) holds only the ops. */

#include "error.h"
#include "ewise.h"
#include "tensor.h"
#include "transfer.h"

/* Copies between devices too (as PyTorch's copy_): src is first moved to dst's device. */
int lab_copy_(lab_tensor *dst, lab_tensor *src) {
  if (lab_check_inplace_shape("copy_", dst, src) < 0) return -1;
  lab_device dev = lab_device_of(dst);
  if (!lab_device_eq(lab_device_of(src), dev)) {
    lab_tensor *moved = lab_to_device(src, dev);
    int rc = moved ? lab_copy_(dst, moved) : -1;
    lab_tensor_release(moved);
    return rc;
  }
  /* the compute type must hold every value of both: i64 for integers, f64 for f64 */
  lab_dtype ct = lab_compute_type(lab_promote(dst->dtype, src->dtype));
  if (dst->dtype == src->dtype && lab_is_contiguous(dst) && lab_is_contiguous(src) &&
      lab_numel(dst) == lab_numel(src)) {
    if (lab_nbytes(dst) == 0) return 0;
    return lab_device_ops_of(dev.type)->copy(dev.index, lab_data(dst), lab_data(src), lab_nbytes(dst));
  }
  if (dst->dtype == src->dtype && dst->dtype != LAB_F64 && lab_dtype_size(dst->dtype) == 2) ct = LAB_F32;
  lab_ew_args c = {.kind = LAB_EW_COPY, .ct = ct};
  return lab_ew_launch(&c, dst, 1, &src);
}

lab_tensor *lab_contiguous(lab_tensor *t) {
  if (lab_is_contiguous(t)) {
    lab_tensor_retain(t);
    return t;
  }
  return lab_clone(t);
}

lab_tensor *lab_clone(lab_tensor *t) {
  lab_tensor *c = lab_tensor_empty_on(lab_device_of(t), t->dtype, t->ndim, t->shape);
  if (!c) return NULL;
  if (lab_copy_(c, t) < 0) {
    lab_tensor_release(c);
    return NULL;
  }
  return c;
}

lab_tensor *lab_to_dtype(lab_tensor *t, lab_dtype dt) {
  if (t->dtype == dt) {
    lab_tensor_retain(t);
    return t;
  }
  lab_tensor *c = lab_tensor_empty_on(lab_device_of(t), dt, t->ndim, t->shape);
  if (!c) return NULL;
  if (lab_copy_(c, t) < 0) {
    lab_tensor_release(c);
    return NULL;
  }
  return c;
}
