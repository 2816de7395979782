/* cat/stack copy each input into a narrow()ed slice of the result; split/chunk are narrow()s. */
#include "join.h"

#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "transfer.h"

lab_tensor *lab_cat(int n, lab_tensor **ts, int dim) {
  char x[128], y[128];
  if (n <= 0) {
    lab_fail("cat", "needs at least one tensor");
    return NULL;
  }
  lab_tensor *f = ts[0];
  if (dim < 0 || dim >= f->ndim) {
    lab_fail("cat", "dim %d out of range for tensors of %d dimensions", dim + 1, f->ndim);
    return NULL;
  }
  lab_dtype dt = f->dtype;
  int64_t shape[LAB_MAX_DIMS];
  memcpy(shape, f->shape, sizeof shape);
  shape[dim] = 0;
  for (int i = 0; i < n; i++) {
    lab_tensor *t = ts[i];
    int ok = t->ndim == f->ndim;
    for (int d = 0; ok && d < f->ndim; d++) ok = d == dim || t->shape[d] == f->shape[d];
    if (!ok) {
      lab_fail("cat", "tensor %d has shape %s, tensor 1 has %s: they must match except in dim %d",
               i + 1, lab_shape_str(t, x, sizeof x), lab_shape_str(f, y, sizeof y), dim + 1);
      return NULL;
    }
    dt = lab_promote(dt, t->dtype);
    shape[dim] += t->shape[dim];
  }
  lab_device dev;
  if (lab_common_device("cat", n, ts, &dev) < 0) return NULL;
  lab_tensor *out = lab_tensor_empty_on(dev, dt, f->ndim, shape);
  if (!out) return NULL;
  int64_t at = 0;
  for (int i = 0; i < n; i++) {
    lab_tensor *slice = lab_narrow(out, dim, at, ts[i]->shape[dim]);
    int rc = slice ? lab_copy_(slice, ts[i]) : -1;
    lab_tensor_release(slice);
    if (rc < 0) {
      lab_tensor_release(out);
      return NULL;
    }
    at += ts[i]->shape[dim];
  }
  return out;
}

lab_tensor *lab_stack(int n, lab_tensor **ts, int dim) {
  char x[128], y[128];
  if (n <= 0) {
    lab_fail("stack", "needs at least one tensor");
    return NULL;
  }
  if (dim < 0 || dim > ts[0]->ndim) {
    lab_fail("stack", "dim %d out of range for tensors of %d dimensions", dim + 1, ts[0]->ndim);
    return NULL;
  }
  for (int i = 1; i < n; i++)
    if (!lab_same_shape(ts[i], ts[0])) {
      lab_fail("stack", "tensor %d has shape %s, tensor 1 has %s: all must be equal", i + 1,
               lab_shape_str(ts[i], x, sizeof x), lab_shape_str(ts[0], y, sizeof y));
      return NULL;
    }
  lab_tensor **u = calloc((size_t)n, sizeof *u);
  if (!u) return NULL;
  lab_tensor *out = NULL;
  int i = 0;
  for (; i < n; i++)
    if (!(u[i] = lab_unsqueeze(ts[i], dim))) break;
  if (i == n) out = lab_cat(n, u, dim);
  for (int j = 0; j < i; j++) lab_tensor_release(u[j]);
  free(u);
  return out;
}

int lab_split(lab_tensor *t, int64_t size, int dim, lab_tensor ***out) {
  if (dim < 0 || dim >= t->ndim) return lab_fail("split", "dim %d out of range for a tensor of %d dimensions", dim + 1, t->ndim);
  if (size <= 0) return lab_fail("split", "split size must be positive, got %lld", (long long)size);
  int64_t len = t->shape[dim];
  if (size > len) size = len > 0 ? len : 1; /* one piece, as torch.split; len + size must not wrap */
  int count = (int)((len + size - 1) / size);
  if (count == 0) count = 1;
  lab_tensor **v = calloc((size_t)count, sizeof *v);
  if (!v) return lab_fail("split", "out of memory");
  for (int i = 0; i < count; i++) {
    int64_t start = (int64_t)i * size;
    int64_t l = len - start < size ? len - start : size;
    if (!(v[i] = lab_narrow(t, dim, start, l))) {
      for (int j = 0; j < i; j++) lab_tensor_release(v[j]);
      free(v);
      return -1;
    }
  }
  *out = v;
  return count;
}

int lab_chunk(lab_tensor *t, int chunks, int dim, lab_tensor ***out) {
  if (chunks <= 0) return lab_fail("chunk", "number of chunks must be positive, got %d", chunks);
  if (dim < 0 || dim >= t->ndim) return lab_fail("chunk", "dim %d out of range for a tensor of %d dimensions", dim + 1, t->ndim);
  int64_t size = (t->shape[dim] + chunks - 1) / chunks;
  return lab_split(t, size ? size : 1, dim, out);
}
