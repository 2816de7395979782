/* Checked size arithmetic (see size.h). */
#include "size.h"

#include <math.h>
#include <stdio.h>

#include "error.h"

/* "2^62" for a power of two, else the number itself: the sizes that overflow are usually
 * shifts the user typed (1 << 62) */
static const char *count_str(int64_t n, char *buf, size_t len) {
  if (n > 0 && (n & (n - 1)) == 0) snprintf(buf, len, "2^%d", __builtin_ctzll((unsigned long long)n));
  else snprintf(buf, len, "%lld", (long long)n);
  return buf;
}

int lab_check_size(const char *op, int ndim, const int64_t *shape, size_t elem_size, int64_t *numel) {
  char dims[256], cnt[32];
  if (ndim < 0 || ndim > LAB_MAX_DIMS)
    return lab_fail(op, "%d dimensions requested, at most %d are supported", ndim, LAB_MAX_DIMS);
  /* The bound applies to the product of the non-zero sizes: an empty tensor's other sizes
   * are multiplied too (strides, the outer and inner extents of a reduction), and
   * [8, 2^62, 0] wrapped in those products. */
  int64_t n = 1;
  int overflow = 0, empty = 0;
  double approx = 1; /* for the message when the exact count overflows */
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0)
      return lab_fail(op, "negative size %lld in dim %d of shape %s", (long long)shape[i], i + 1,
                      lab_dims_str(ndim, shape, dims, sizeof dims));
    if (shape[i] == 0) {
      empty = 1;
      continue;
    }
    approx *= (double)shape[i];
    if (!overflow && !lab_mul_fits(n, shape[i], &n)) overflow = 1;
  }
  int64_t bytes = 0;
  if (!overflow && lab_mul_fits(n, (int64_t)elem_size, &bytes) && bytes <= LAB_MAX_TENSOR_BYTES) {
    if (numel) *numel = empty ? 0 : n;
    return 0;
  }
  lab_dims_str(ndim, shape, dims, sizeof dims);
  const char *zero = empty ? " (not counting the 0: an empty tensor's other sizes must fit too)" : "";
  if (overflow)
    return lab_fail(op, "shape %s needs about 2^%.0f elements x %zu bytes, more than the 2^48 bytes "
                    "(256 TiB) a tensor may hold%s", dims, log2(approx), elem_size, zero);
  return lab_fail(op, "shape %s needs %s elements x %zu bytes, more than the 2^48 bytes (256 TiB) a "
                  "tensor may hold%s", dims, count_str(n, cnt, sizeof cnt), elem_size, zero);
}

const char *lab_dims_str(int ndim, const int64_t *shape, char *buf, size_t n) {
  size_t used = 0;
  used += (size_t)snprintf(buf, n, "[");
  for (int i = 0; i < ndim && used < n; i++)
    used += (size_t)snprintf(buf + used, n - used, i ? ", %lld" : "%lld", (long long)shape[i]);
  if (used < n) snprintf(buf + used, n - used, "]");
  return buf;
}
