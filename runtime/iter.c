/* The geometry of a strided launch from its tensors (iter.h): the operands walked together,
 * broadcast, with contiguous dims merged. The cpu device walks it (runtime/cpu_rows.c). */
#include "iter.h"

void lab_iter_init(lab_iter *it, int ndim, const int64_t *shape, int nops, lab_tensor **ops) {
  it->nops = nops;
  /* broadcast strides, dropping size-1 dims */
  int n = 0;
  for (int d = 0; d < ndim; d++) {
    if (shape[d] == 1) continue;
    it->shape[n] = shape[d];
    for (int k = 0; k < nops; k++) {
      lab_tensor *t = ops[k];
      int td = d - (ndim - t->ndim);
      int64_t st = (td >= 0 && t->shape[td] != 1) ? t->stride[td] : 0;
      it->stride[k][n] = st * (int64_t)lab_dtype_size(t->dtype);
    }
    n++;
  }
  for (int k = 0; k < nops; k++) it->data[k] = lab_data(ops[k]);
  /* merge dim d into d+1 when every operand steps over d as one run of d+1 */
  int m = 0;
  for (int d = 0; d < n; d++) {
    if (m > 0) {
      int ok = 1;
      for (int k = 0; k < nops && ok; k++)
        ok = it->stride[k][m - 1] == it->stride[k][d] * it->shape[d];
      if (ok) {
        it->shape[m - 1] *= it->shape[d];
        for (int k = 0; k < nops; k++) it->stride[k][m - 1] = it->stride[k][d];
        continue;
      }
    }
    it->shape[m] = it->shape[d];
    for (int k = 0; k < nops; k++) it->stride[k][m] = it->stride[k][d];
    m++;
  }
  if (m == 0) { /* a scalar: one row of one element */
    it->shape[0] = 1;
    for (int k = 0; k < nops; k++) it->stride[k][0] = 0;
    m = 1;
  }
  it->ndim = m;
}
