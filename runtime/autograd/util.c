/* Helpers for writing backward functions compactly. */
#include <string.h>

#include "../reduce.h"
#include "util.h"

lab_tensor *ag_drop(lab_tensor *out) {
  lab_tensor_release(out);
  return NULL;
}

lab_tensor *ag_finish(lab_node *n, lab_tensor *out, int rc) {
  if (!n || rc != 0) {
    lab_node_release(n);
    return ag_drop(out);
  }
  if (lab_node_attach(n, out) < 0) return ag_drop(out);
  return out;
}

ag_shape ag_shape_of(const lab_tensor *t) {
  ag_shape s = {.ndim = t->ndim};
  memcpy(s.dims, t->shape, sizeof(int64_t) * (size_t)t->ndim);
  return s;
}

lab_tensor *ag_cast(lab_tensor *r, int dtype) {
  if (!r || r->dtype == (lab_dtype)dtype || !dtype_valid(dtype)) return r;
  lab_tensor *c = lab_to_dtype(r, (lab_dtype)dtype);
  lab_tensor_release(r);
  return c;
}

lab_tensor *ag_to_input(lab_node *n, int i, lab_tensor *r, const ag_shape *shape) {
  if (!r) return NULL;
  lab_tensor *s = lab_sum_to_shape(r, shape->ndim, shape->dims);
  lab_tensor_release(r);
  return ag_cast(s, i < 8 ? n->in_dtype[i] : -1);
}

lab_tensor *ag_chain(lab_tensor *x, lab_binary_op op, lab_tensor *other, double scalar) {
  if (!x) return NULL;
  lab_tensor *o = other;
  if (!o) o = lab_tensor_scalar(lab_compute_type(x->dtype) == LAB_F64 ? LAB_F64 : LAB_F32, scalar);
  lab_tensor *r = o ? lab_binary(op, x, o, other ? -1 : (int)x->dtype) : NULL;
  if (!other) lab_tensor_release(o);
  lab_tensor_release(x);
  return r;
}

lab_tensor *ag_scalar_op(lab_tensor *x, lab_binary_op op, double scalar) {
  lab_tensor_retain(x);
  return ag_chain(x, op, NULL, scalar);
}

lab_tensor *ag_scalar_rsub(double scalar, lab_tensor *x) {
  lab_tensor *s = lab_tensor_scalar(lab_compute_type(x->dtype) == LAB_F64 ? LAB_F64 : LAB_F32, scalar);
  lab_tensor *r = s ? lab_binary(LAB_SUB, s, x, x->dtype) : NULL;
  lab_tensor_release(s);
  return r;
}

lab_tensor *ag_sign(lab_tensor *x) {
  lab_tensor *zero = lab_tensor_scalar(x->dtype, 0);
  lab_tensor *pos = zero ? lab_binary(LAB_GT, x, zero, x->dtype) : NULL;
  lab_tensor *neg = zero ? lab_binary(LAB_LT, x, zero, x->dtype) : NULL;
  lab_tensor *sign = (pos && neg) ? lab_binary(LAB_SUB, pos, neg, -1) : NULL;
  lab_tensor_release(zero);
  lab_tensor_release(pos);
  lab_tensor_release(neg);
  return sign;
}

lab_tensor *lab_sum_to_shape(lab_tensor *g, int ndim, const int64_t *shape) {
  lab_tensor_retain(g);
  /* leading dims that the operand did not have */
  while (g->ndim > ndim) {
    lab_tensor *s = lab_reduction(LAB_R_SUM, g, 0, 0, 0);
    lab_tensor_release(g);
    if (!(g = s)) return NULL;
  }
  for (int d = 0; d < ndim; d++) {
    if (shape[d] == 1 && g->shape[d] != 1) {
      lab_tensor *s = lab_reduction(LAB_R_SUM, g, d, 1, 0);
      lab_tensor_release(g);
      if (!(g = s)) return NULL;
    }
  }
  return g;
}
