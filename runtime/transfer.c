/* Moving tensor data between devices and the host through the device tables. A strided
 * tensor is first made contiguous on its own device (a device kernel), so only whole
 * contiguous buffers cross between memories. */
#include "transfer.h"

#include <stdlib.h>
#include <string.h>

#include "../kernels/cpu/convert.h"
#include "error.h"

const lab_device_ops *lab_ops_of(const lab_tensor *t) { return lab_device_ops_of(lab_device_of(t).type); }

int lab_copy_to_host(lab_tensor *t, void *dst) {
  size_t n = lab_nbytes(t);
  if (n == 0) return 0;
  lab_tensor *c = lab_contiguous(t);
  if (!c) return -1;
  lab_device d = lab_device_of(c);
  int rc = lab_device_ops_of(d.type)->to_host(d.index, dst, lab_data(c), n);
  lab_tensor_release(c);
  return rc;
}

int lab_copy_from_host(lab_tensor *t, const void *src) {
  size_t n = lab_nbytes(t);
  if (n == 0) return 0;
  lab_device d = lab_device_of(t);
  if (lab_is_contiguous(t)) return lab_device_ops_of(d.type)->from_host(d.index, lab_data(t), src, n);
  lab_tensor *c = lab_tensor_from_host(d, t->dtype, t->ndim, t->shape, src);
  int rc = c ? lab_copy_(t, c) : -1;
  lab_tensor_release(c);
  return rc;
}

lab_tensor *lab_tensor_from_host(lab_device dev, lab_dtype dt, int ndim, const int64_t *shape, const void *src) {
  lab_tensor *t = lab_tensor_empty_on(dev, dt, ndim, shape);
  if (t && lab_nbytes(t) && lab_device_ops_of(dev.type)->from_host(dev.index, lab_data(t), src, lab_nbytes(t)) < 0) {
    lab_tensor_release(t);
    return NULL;
  }
  return t;
}

lab_tensor *lab_to_device(lab_tensor *t, lab_device dev) {
  lab_device from = lab_device_of(t);
  if (lab_device_eq(from, dev)) {
    lab_tensor_retain(t);
    return t;
  }
  lab_tensor *out = lab_tensor_empty_on(dev, t->dtype, t->ndim, t->shape);
  if (!out) return NULL;
  size_t n = lab_nbytes(t);
  if (n == 0) return out;
  int rc;
  if (from.type == LAB_DEV_CPU) {
    lab_tensor *c = lab_contiguous(t);
    rc = c ? lab_device_ops_of(dev.type)->from_host(dev.index, lab_data(out), lab_data(c), n) : -1;
    lab_tensor_release(c);
  } else if (dev.type == LAB_DEV_CPU) {
    rc = lab_copy_to_host(t, lab_data(out));
  } else { /* between two devices: through a host buffer */
    void *buf = malloc(n);
    rc = buf ? lab_copy_to_host(t, buf) : lab_fail("to", "out of memory staging %zu bytes", n);
    if (rc == 0) rc = lab_device_ops_of(dev.type)->from_host(dev.index, lab_data(out), buf, n);
    free(buf);
  }
  if (rc < 0) {
    lab_tensor_release(out);
    return NULL;
  }
  return out;
}

int lab_move_(lab_tensor *t, lab_device dev) {
  if (lab_device_eq(lab_device_of(t), dev)) return 0;
  lab_tensor *moved = lab_to_device(t, dev);
  if (!moved) return -1;
  lab_storage_set_tag(moved->storage, t->storage->tag);
  lab_storage_retain(moved->storage);
  lab_storage_release(t->storage);
  t->storage = moved->storage;
  t->offset = 0;
  memcpy(t->stride, moved->stride, sizeof t->stride);
  lab_tensor_release(moved);
  return 0;
}

lab_tensor *lab_to_host(lab_tensor *t) { return lab_to_device(t, lab_cpu()); }

static int item(lab_tensor *t, lab_dtype as, void *v) {
  if (lab_numel(t) != 1) {
    char s[128];
    return lab_fail("item", "tensor of shape %s has %lld elements, item() needs exactly one",
                    lab_shape_str(t, s, sizeof s), (long long)lab_numel(t));
  }
  _Alignas(8) unsigned char raw[8];
  if (lab_copy_to_host(t, raw) < 0) return -1;
  lab_load_row(t->dtype, (const char *)raw, 0, as, v, 1);
  return 0;
}

int lab_item_f64(lab_tensor *t, double *v) { return item(t, LAB_F64, v); }
int lab_item_i64(lab_tensor *t, int64_t *v) { return item(t, LAB_I64, v); }

int lab_common_device(const char *op, int n, lab_tensor *const *ts, lab_device *dev) {
  int found = 0;
  *dev = lab_cpu();
  for (int i = 0; i < n; i++) {
    if (!ts[i]) continue;
    lab_device d = lab_device_of(ts[i]);
    if (d.type == LAB_DEV_CPU && ts[i]->ndim == 0) continue; /* a scalar goes anywhere */
    if (!found) {
      *dev = d;
      found = 1;
    } else if (!lab_device_eq(*dev, d)) {
      char a[32], b[32];
      return lab_fail(op, "tensors on different devices: %s and %s (move one with :to('%s'))",
                      lab_device_str(*dev, a, sizeof a), lab_device_str(d, b, sizeof b), a);
    }
  }
  return 0;
}

/* On a device: one element is written from the host and broadcast there by a copy. */
