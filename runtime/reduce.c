/* Reductions. The reduced dim is removed from an iteration over the output; each output
 * element then walks its line of the input with the reduced dim's stride. The walk is one
 * launch on the tensor's device (runtime/device_cpu.c holds the reference). */
#include "reduce.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "iter.h"
#include "transfer.h"

const char *lab_reduce_name(lab_reduce_op op) {
#define NAME(e, name) name,
  static const char *n[LAB_NREDUCE] = {LAB_REDUCE_LIST(NAME)};
#undef NAME
  return n[op];
}

/* Output shape with `dim` kept as size 1 (for iteration) and the final shape. */
static void out_shapes(const lab_tensor *t, int dim, int keepdim, int *nk, int64_t *kept,
                       int *nf, int64_t *final) {
  *nk = t->ndim;
  *nf = 0;
  for (int i = 0; i < t->ndim; i++) {
    kept[i] = i == dim ? 1 : t->shape[i];
    if (i != dim || keepdim) final[(*nf)++] = kept[i];
  }
}

/* Runs a reduction of t over dim into outs (already shaped with dim kept as 1). */
static int run_reduce(lab_red_args *c, lab_tensor *t, int dim, lab_tensor *out, lab_tensor *idx) {
  c->in_t = t->dtype;
  c->len = t->shape[dim];
  c->stride = t->stride[dim] * (int64_t)lab_dtype_size(t->dtype);
  /* iterate the input with the reduced dim pinned to its first element */
  lab_tensor *pinned = lab_narrow(t, dim, 0, t->shape[dim] ? 1 : 0);
  if (!pinned) return -1;
  if (t->shape[dim] == 0) { /* empty line: reduce over nothing */
    pinned->shape[dim] = 1;
  }
  lab_tensor *ops[3] = {out, pinned, idx};
  lab_iter_init(&c->g, out->ndim, out->shape, idx ? 3 : 2, ops);
  int rc = lab_ops_of(t)->reduce(c);
  lab_tensor_release(pinned);
  if (rc < 0) { /* the device said why ("reduce: cuda:0: ..."): raised naming the op */
    char why[400], d[32];
    snprintf(why, sizeof why, "%s", lab_last_error());
    return lab_fail(lab_reduce_name(c->op), "on %s: %s", lab_device_str(lab_device_of(t), d, sizeof d), why);
  }
  return 0;
}

static lab_tensor *flat_view(lab_tensor *t) {
  lab_tensor *c = lab_contiguous(t);
  if (!c) return NULL;
  int64_t n = lab_numel(c);
  lab_tensor *f = lab_view(c, 1, &n);
  lab_tensor_release(c);
  return f;
}

static lab_tensor *finish_shape(lab_tensor *out, int nf, const int64_t *final) {
  lab_tensor *v = lab_view(out, nf, final);
  lab_tensor_release(out);
  return v;
}

static int check_reduce_dim(const char *op, const lab_tensor *t, int dim) {
  if (dim >= t->ndim && !(t->ndim == 0 && dim == 0))
    return lab_fail(op, "dim %d out of range for a tensor of %d dimensions", dim + 1, t->ndim);
  return 0;
}

lab_tensor *lab_reduction(lab_reduce_op op, lab_tensor *t, int dim, int keepdim, double param) {
  const char *name = lab_reduce_name(op);
  if (check_reduce_dim(name, t, dim) < 0) return NULL;
  int is_float = lab_dtype_is_float(t->dtype);
  if (!is_float && (op == LAB_R_MEAN || op == LAB_R_VAR || op == LAB_R_NORM)) {
    lab_fail(name, "needs a floating-point tensor, got %s (convert with :to('f32'))",
             lab_dtype_name(t->dtype));
    return NULL;
  }
  lab_red_args c = {.op = op, .param = param};
  c.out_t = is_float ? t->dtype : LAB_I64;
  /* accumulate half types and f32 in f32 rows, summed in double by the row kernels */
  c.ct = lab_compute_type(t->dtype);
  if (dim < 0 || t->ndim == 0) {
    lab_tensor *f = flat_view(t);
    if (!f) return NULL;
    lab_tensor *out = lab_tensor_empty_on(lab_device_of(t), c.out_t, 1, (int64_t[]){1});
    if (out && run_reduce(&c, f, 0, out, NULL) < 0) {
      lab_tensor_release(out);
      out = NULL;
    }
    lab_tensor_release(f);
    if (!out) return NULL;
    if (keepdim && t->ndim > 0) {
      int64_t ones[LAB_MAX_DIMS];
      for (int i = 0; i < t->ndim; i++) ones[i] = 1;
      return finish_shape(out, t->ndim, ones);
    }
    return finish_shape(out, 0, NULL);
  }
  int nk, nf;
  int64_t kept[LAB_MAX_DIMS], final[LAB_MAX_DIMS];
  out_shapes(t, dim, keepdim, &nk, kept, &nf, final);
  lab_tensor *out = lab_tensor_empty_on(lab_device_of(t), c.out_t, nk, kept);
  if (!out) return NULL;
  /* sum or mean over a middle dim of a contiguous f32/f64 tensor: whole-row adds */
  if ((op == LAB_R_SUM || op == LAB_R_MEAN) && dim < t->ndim - 1 && lab_is_contiguous(t) &&
      (t->dtype == LAB_F32 || t->dtype == LAB_F64)) {
    int64_t outer = 1, inner = 1, R = t->shape[dim];
    for (int d = 0; d < dim; d++) outer *= t->shape[d];
    for (int d = dim + 1; d < t->ndim; d++) inner *= t->shape[d];
    if (lab_ops_of(t)->sum_middle(t->dtype, lab_data(t), lab_data(out), outer, R, inner,
                                  op == LAB_R_MEAN ? (R ? 1.0 / (double)R : NAN) : 1.0) < 0) {
      lab_tensor_release(out); /* "sum: cuda:0: kernel launch failed ..." */
      return NULL;
    }
    return finish_shape(out, nf, final);
  }
  if (run_reduce(&c, t, dim, out, NULL) < 0) {
    lab_tensor_release(out);
    return NULL;
  }
  return finish_shape(out, nf, final);
}

int lab_reduce_ext(lab_tensor *t, int dim, int keepdim, int want_max, lab_tensor **values,
                   lab_tensor **indices) {
  const char *name = want_max ? "max" : "min";
  if (check_reduce_dim(name, t, dim) < 0) return -1;
  if (lab_numel(t) == 0) return lab_fail(name, "cannot reduce an empty tensor");
  lab_red_args c = {.op = want_max ? LAB_R_MAX : LAB_R_MIN, .out_t = t->dtype, .ct = lab_compute_type(t->dtype)};
  lab_tensor *src = t, *flat = NULL;
  int nk, nf;
  int64_t kept[LAB_MAX_DIMS], final[LAB_MAX_DIMS];
  if (dim < 0 || t->ndim == 0) {
    flat = flat_view(t);
    if (!flat) return -1;
    src = flat;
    dim = 0;
    nk = 1;
    kept[0] = 1;
    nf = 0;
    if (keepdim)
      for (int i = 0; i < t->ndim; i++) final[nf++] = 1;
  } else {
    out_shapes(t, dim, keepdim, &nk, kept, &nf, final);
  }
  lab_tensor *v = lab_tensor_empty_on(lab_device_of(t), t->dtype, nk, kept);
  lab_tensor *ix = lab_tensor_empty_on(lab_device_of(t), LAB_I64, nk, kept);
  int rc = v && ix ? run_reduce(&c, src, dim, v, ix) : -1;
  lab_tensor_release(flat);
  if (rc < 0) {
    lab_tensor_release(v);
    lab_tensor_release(ix);
    return -1;
  }
  *values = finish_shape(v, nf, final);
  *indices = finish_shape(ix, nf, final);
  return 0;
}

lab_tensor *lab_softmax(lab_tensor *t, int dim, int log) {
  const char *name = log ? "log_softmax" : "softmax";
  if (t->ndim == 0) return lab_clone(t);
  if (dim < 0 || dim >= t->ndim) {
    lab_fail(name, "dim %d out of range for a tensor of %d dimensions", dim + 1, t->ndim);
    return NULL;
  }
  if (!lab_dtype_is_float(t->dtype)) {
    lab_fail(name, "needs a floating-point tensor, got %s", lab_dtype_name(t->dtype));
    return NULL;
  }
  lab_dtype ct = lab_compute_type(t->dtype);
  /* move dim last, compute rows in the compute type, move it back */
  lab_tensor *moved = lab_transpose(t, dim, t->ndim - 1);
  lab_tensor *x = moved ? lab_to_dtype(moved, ct) : NULL;
  lab_tensor *xc = x ? lab_contiguous(x) : NULL;
  lab_tensor *y = xc ? lab_tensor_empty_on(lab_device_of(t), ct, xc->ndim, xc->shape) : NULL;
  lab_tensor *result = NULL;
  if (y) {
    int64_t n = t->shape[dim];
    int rc = lab_ops_of(t)->softmax_rows(ct, lab_data(xc), lab_data(y), n ? lab_numel(xc) / n : 0, n, log);
    lab_tensor *back = rc < 0 ? NULL : lab_transpose(y, dim, t->ndim - 1);
    if (back) {
      result = lab_tensor_empty_on(lab_device_of(t), t->dtype, t->ndim, t->shape);
      if (result && lab_copy_(result, back) < 0) {
        lab_tensor_release(result);
        result = NULL;
      }
      lab_tensor_release(back);
    }
  }
  lab_tensor_release(moved);
  lab_tensor_release(x);
  lab_tensor_release(xc);
  lab_tensor_release(y);
  return result;
}
