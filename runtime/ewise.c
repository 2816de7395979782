/* Elementwise ops: shapes, broadcasting, type promotion and the choice of compute type are
 * decided here; the walk over the operands is one launch on their device (runtime/device.h),
 * whose cpu implementation is the reference. */
#include "ewise.h"

#include <stdio.h>
#include <string.h>

#include "../kernels/cpu/convert.h"
#include "error.h"
#include "iter.h"
#include "transfer.h"

const char *lab_binary_name(lab_binary_op op) {
#define NAME(e, name) name,
  static const char *n[LAB_NBINARY] = {LAB_BINARY_LIST(NAME)};
  return n[op];
}

const char *lab_unary_name(lab_unary_op op) {
  static const char *n[LAB_NUNARY] = {LAB_UNARY_LIST(NAME)};
#undef NAME
  return n[op];
}

/* the op an elementwise launch does, for its error */
static const char *ew_name(const lab_ew_args *c) {
  switch (c->kind) {
  case LAB_EW_BINARY: return lab_binary_name((lab_binary_op)c->op);
  case LAB_EW_UNARY: return lab_unary_name((lab_unary_op)c->op);
  case LAB_EW_CLAMP: return "clamp";
  case LAB_EW_WHERE: return "where";
  case LAB_EW_COPY: break;
  }
  return "copy";
}

/* A cpu 0-d operand of an op on a device (a Lua number, the sdpa scale) goes with the launch
 * as a value (lab_ew_args.scalars), read here on the host: it was copied to the device before
 * every such op (a host-to-device copy each time). */
static int as_scalar(lab_ew_args *c, int k, lab_tensor *t, lab_device dev) {
  if (dev.type == LAB_DEV_CPU || lab_device_of(t).type != LAB_DEV_CPU || t->ndim != 0) return 0;
  const char *p = lab_data(t);
  lab_ew_scalar *v = &c->sv[k];
  memset(v, 0, sizeof *v);
  memcpy(v->raw, p, lab_dtype_size(t->dtype));
  v->is_int = !lab_dtype_is_float(t->dtype);
  lab_load_row(t->dtype, p, 0, LAB_F64, &v->f, 1);
  lab_load_row(t->dtype, p, 0, LAB_I64, &v->i, 1);
  c->scalars |= 1u << k;
  return 1;
}

int lab_ew_launch(lab_ew_args *c, lab_tensor *out, int nin, lab_tensor **in) {
  lab_tensor *ops[LAB_ITER_MAX_OPS] = {out}, *moved[LAB_ITER_MAX_OPS] = {0};
  lab_device dev = lab_device_of(out);
  int rc = 0;
  c->dt[0] = out->dtype;
  c->scalars = 0;
  for (int k = 0; k < nin; k++) {
    ops[k + 1] = in[k];
    c->dt[k + 1] = in[k]->dtype;
    if (as_scalar(c, k + 1, in[k], dev)) continue;
    if (!lab_device_eq(lab_device_of(in[k]), dev)) {
      if (!(moved[k] = lab_to_device(in[k], dev))) rc = -1;
      ops[k + 1] = moved[k];
    }
  }
  if (rc == 0) {
    lab_iter_init(&c->g, out->ndim, out->shape, nin + 1, ops);
    for (int k = 1; k <= nin; k++)
      if ((c->scalars >> k) & 1u) { /* no memory: the value is in c->sv[k] */
        c->g.data[k] = NULL;
        memset(c->g.stride[k], 0, sizeof c->g.stride[k]);
      }
    if (lab_device_ops_of(dev.type)->ewise(c) < 0) { /* the device said why: "ewise: cuda:0: ..." */
      char why[400], d[32];
      snprintf(why, sizeof why, "%s", lab_last_error());
      rc = lab_fail(ew_name(c), "on %s: %s", lab_device_str(dev, d, sizeof d), why);
    }
  }
  for (int k = 0; k < nin; k++) lab_tensor_release(moved[k]);
  return rc;
}

/* A new tensor of the broadcast shape of the inputs, on their device. */
static lab_tensor *new_broadcast_out(const char *op, lab_dtype dt, int n, lab_tensor **in) {
  lab_device dev;
  if (lab_common_device(op, n, in, &dev) < 0) return NULL;
  int nd = in[0]->ndim;
  int64_t shape[LAB_MAX_DIMS];
  memcpy(shape, in[0]->shape, sizeof(int64_t) * (size_t)nd);
  for (int k = 1; k < n; k++)
    if (lab_broadcast_shapes(op, nd, shape, in[k]->ndim, in[k]->shape, &nd, shape) < 0) return NULL;
  return lab_tensor_empty_on(dev, dt, nd, shape);
}

/* In place: the operands must live on the output's device (cpu scalars excepted). */
static int check_inplace_device(const char *op, lab_tensor *a, int n, lab_tensor **in) {
  lab_tensor *all[LAB_ITER_MAX_OPS] = {a};
  for (int k = 0; k < n; k++) all[k + 1] = in[k];
  lab_device dev;
  if (lab_common_device(op, n + 1, all, &dev) < 0) return -1;
  if (a->ndim == 0 && !lab_device_eq(dev, lab_device_of(a))) {
    char x[32], y[32];
    return lab_fail(op, "in-place on a %s scalar with a %s tensor: move it with :to('%s')",
                    lab_device_str(lab_device_of(a), x, sizeof x), lab_device_str(dev, y, sizeof y), y);
  }
  return 0;
}

static int is_comparison(lab_binary_op op) { return op >= LAB_EQ && op <= LAB_GE; }

int lab_check_inplace_shape(const char *op, lab_tensor *a, lab_tensor *b) {
  int nd;
  int64_t shape[LAB_MAX_DIMS];
  if (lab_broadcast_shapes(op, a->ndim, a->shape, b->ndim, b->shape, &nd, shape) < 0) return -1;
  if (nd != a->ndim || memcmp(shape, a->shape, sizeof(int64_t) * (size_t)nd) != 0) {
    char x[128], y[128];
    return lab_fail(op, "in-place result of shape %s does not fit the tensor's shape %s",
                    lab_dims_str(nd, shape, x, sizeof x), lab_shape_str(a, y, sizeof y));
  }
  return 0;
}

static lab_dtype binary_compute_type(lab_binary_op op, lab_dtype promoted) {
  /* true division (and transcendental pow) of integers happens in float */
  if (op == LAB_DIV && !lab_dtype_is_float(promoted)) return LAB_F32;
  return lab_compute_type(promoted);
}

/* Integer operands a kernel cannot give a right answer for are errors, as in Python and
 * PyTorch, not silent values: a zero divisor of % (and of an integer //), a negative
 * exponent of an integer pow ("Integers to negative integer powers are not allowed"). */
static int check_integer_operand(lab_binary_op op, lab_dtype promoted, lab_dtype ct, lab_tensor *b) {
  if (lab_dtype_is_float(promoted)) return 0;
  int divides = op == LAB_REMAINDER || op == LAB_FLOOR_DIV || (op == LAB_DIV && !lab_dtype_is_float(ct));
  if (!divides && op != LAB_POW) return 0;
  lab_tensor *i = lab_to_dtype(b, LAB_I64);
  lab_tensor *c = i ? lab_to_host(i) : NULL;
  lab_tensor *h = c ? lab_contiguous(c) : NULL;
  int64_t bad = 0, found = 0;
  if (h) {
    const int64_t *v = lab_data(h);
    for (int64_t k = 0, n = lab_numel(h); k < n && !found; k++)
      if (divides ? v[k] == 0 : v[k] < 0) found = 1, bad = v[k];
  }
  lab_tensor_release(i); /* lab_to_dtype retains b when it is already i64 */
  lab_tensor_release(c);
  lab_tensor_release(h);
  if (!h) return -1;
  if (!found) return 0;
  if (op == LAB_POW)
    return lab_fail("pow", "integers to negative integer powers are not allowed (exponent %lld; use a float "
                    "tensor)", (long long)bad);
  return lab_fail(lab_binary_name(op), "integer %s by zero", op == LAB_REMAINDER ? "remainder" : "division");
}

lab_tensor *lab_binary(lab_binary_op op, lab_tensor *a, lab_tensor *b, int out_dtype) {
  lab_dtype promoted = lab_promote(a->dtype, b->dtype);
  if (check_integer_operand(op, promoted, binary_compute_type(op, promoted), b) < 0) return NULL;
  lab_dtype odt;
  if (out_dtype >= 0) odt = (lab_dtype)out_dtype;
  else if (is_comparison(op)) odt = LAB_BOOL;
  else if (op == LAB_DIV && !lab_dtype_is_float(promoted)) odt = LAB_F32;
  else odt = promoted;
  lab_tensor *in[2] = {a, b};
  lab_tensor *out = new_broadcast_out(lab_binary_name(op), odt, 2, in);
  if (!out) return NULL;
  lab_ew_args c = {.kind = LAB_EW_BINARY, .op = op, .ct = binary_compute_type(op, promoted)};
  if (lab_ew_launch(&c, out, 2, in) < 0) {
    lab_tensor_release(out);
    return NULL;
  }
  return out;
}

int lab_binary_(lab_binary_op op, lab_tensor *a, lab_tensor *b) {
  if (lab_check_inplace_shape(lab_binary_name(op), a, b) < 0 || check_inplace_device(lab_binary_name(op), a, 1, &b) < 0)
    return -1;
  lab_dtype promoted = lab_promote(a->dtype, b->dtype);
  if (!lab_dtype_is_float(a->dtype) && lab_dtype_is_float(promoted))
    return lab_fail(lab_binary_name(op), "in-place result of type %s cannot be stored in a %s tensor",
                    lab_dtype_name(promoted), lab_dtype_name(a->dtype));
  if (check_integer_operand(op, promoted, binary_compute_type(op, promoted), b) < 0) return -1;
  lab_tensor *in[2] = {a, b};
  lab_ew_args c = {.kind = LAB_EW_BINARY, .op = op, .ct = binary_compute_type(op, promoted)};
  return lab_ew_launch(&c, a, 2, in);
}

static lab_dtype unary_out_type(lab_unary_op op, lab_dtype t) {
  if (op == LAB_NEG || op == LAB_ABS) return t == LAB_BOOL ? LAB_I64 : t;
  return lab_dtype_is_float(t) ? t : LAB_F32;
}

lab_tensor *lab_unary(lab_unary_op op, lab_tensor *a) {
  lab_dtype odt = unary_out_type(op, a->dtype);
  lab_tensor *out = lab_tensor_empty_on(lab_device_of(a), odt, a->ndim, a->shape);
  if (!out) return NULL;
  lab_ew_args c = {.kind = LAB_EW_UNARY, .op = op, .ct = lab_compute_type(odt)};
  if (lab_ew_launch(&c, out, 1, &a) < 0) {
    lab_tensor_release(out);
    return NULL;
  }
  return out;
}

int lab_unary_(lab_unary_op op, lab_tensor *a) {
  if (unary_out_type(op, a->dtype) != a->dtype)
    return lab_fail(lab_unary_name(op), "in-place result is float and cannot be stored in a %s tensor",
                    lab_dtype_name(a->dtype));
  lab_ew_args c = {.kind = LAB_EW_UNARY, .op = op, .ct = lab_compute_type(a->dtype)};
  return lab_ew_launch(&c, a, 1, &a);
}

/* An integer tensor's bounds are integers its dtype can hold (PyTorch: "value cannot be
 * converted to type int without overflow"); a cast of 1e300 to int64 is undefined and gave 0s. */
static int check_clamp_bounds(const char *op, lab_dtype dt, double lo, int has_lo, double hi, int has_hi) {
  if (lab_dtype_is_float(dt)) return 0;
  double min = dt == LAB_BOOL ? 0 : dt == LAB_I32 ? -2147483648.0 : -9223372036854775808.0;
  double max = dt == LAB_BOOL ? 1 : dt == LAB_I32 ? 2147483647.0 : 9223372036854775807.0; /* rounds to 2^63 */
  for (int k = 0; k < 2; k++) {
    double v = k ? hi : lo;
    if (!(k ? has_hi : has_lo)) continue;
    const char *name = k ? "max" : "min";
    if (v != v || v < min || v > max || (dt == LAB_I64 && v >= 9223372036854775808.0))
      return lab_fail(op, "%s %.15g cannot be converted to %s without overflow", name, v, lab_dtype_name(dt));
    if (v != (double)(int64_t)v)
      return lab_fail(op, "%s %.15g is not an integer, and the tensor is %s (convert it with :float() first)", name, v,
                      lab_dtype_name(dt));
  }
  return 0;
}

lab_tensor *lab_clamp(lab_tensor *a, double lo, int has_lo, double hi, int has_hi) {
  if (check_clamp_bounds("clamp", a->dtype, lo, has_lo, hi, has_hi) < 0) return NULL;
  lab_tensor *out = lab_tensor_empty_on(lab_device_of(a), a->dtype, a->ndim, a->shape);
  if (!out) return NULL;
  lab_ew_args c = {.kind = LAB_EW_CLAMP, .ct = lab_compute_type(a->dtype), .lo = lo, .hi = hi, .has_lo = has_lo, .has_hi = has_hi};
  if (lab_ew_launch(&c, out, 1, &a) < 0) {
    lab_tensor_release(out);
    return NULL;
  }
  return out;
}

int lab_clamp_(lab_tensor *a, double lo, int has_lo, double hi, int has_hi) {
  if (check_clamp_bounds("clamp_", a->dtype, lo, has_lo, hi, has_hi) < 0) return -1;
  lab_ew_args c = {.kind = LAB_EW_CLAMP, .ct = lab_compute_type(a->dtype), .lo = lo, .hi = hi, .has_lo = has_lo, .has_hi = has_hi};
  return lab_ew_launch(&c, a, 1, &a);
}

lab_tensor *lab_where(lab_tensor *cond, lab_tensor *a, lab_tensor *b) {
  lab_dtype odt = lab_promote(a->dtype, b->dtype);
  lab_tensor *in[3] = {cond, a, b};
  lab_tensor *out = new_broadcast_out("where", odt, 3, in);
  if (!out) return NULL;
  lab_ew_args c = {.kind = LAB_EW_WHERE, .ct = lab_compute_type(odt)};
  if (lab_ew_launch(&c, out, 3, in) < 0) {
    lab_tensor_release(out);
    return NULL;
  }
  return out;
}

/* tensor.h: on a device, one element of dt broadcast by a copy whose launch carries it (a
 * host-to-device copy of the element before each call once: cross_entropy's mean, backward's
 * seed) */
lab_tensor *lab_tensor_full_on(lab_device dev, lab_dtype dt, int ndim, const int64_t *shape, double value) {
  if (dev.type == LAB_DEV_CPU) return lab_tensor_full(dt, ndim, shape, value);
  lab_tensor *t = lab_tensor_empty_on(dev, dt, ndim, shape);
  lab_tensor *one = t ? lab_tensor_scalar(dt, value) : NULL;
  /* as lab_copy_ would broadcast it, with the element as a value (as_scalar) */
  lab_ew_args c = {.kind = LAB_EW_COPY, .ct = lab_compute_type(dt)};
  int rc = !one ? -1 : lab_numel(t) ? lab_ew_launch(&c, t, 1, &one) : 0;
  lab_tensor_release(one);
  if (rc < 0) {
    lab_tensor_release(t);
    return NULL;
  }
  return t;
}

/* the value goes with the launch (no host-to-device copy on a device): a copy from a cpu 0-d
 * tensor, in the compute type lab_copy_ takes for these dtypes */
int lab_fill_(lab_tensor *t, double value) {
  lab_tensor *s = lab_tensor_scalar(lab_compute_type(t->dtype) == LAB_I64 ? LAB_I64 : LAB_F64, value);
  if (!s) return -1;
  lab_ew_args c = {.kind = LAB_EW_COPY, .ct = lab_compute_type(lab_promote(t->dtype, s->dtype))};
  int rc = lab_numel(t) ? lab_ew_launch(&c, t, 1, &s) : 0;
  lab_tensor_release(s);
  return rc;
}
