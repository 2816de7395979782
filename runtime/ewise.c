/* Elementwise ops. Each row is processed in blocks: operands are loaded (converted and
 * gathered) into contiguous buffers of the compute type, the kernel runs, the result is
 * stored back in the output's type. Operands already in compute type with unit stride are
 * used in place, so f32 and f64 contiguous ops copy nothing. */
#include "ewise.h"

#include <string.h>

#include "../kernels/cpu/convert.h"
#include "error.h"
#include "iter.h"

#define BLOCK 1024

const char *lab_binary_name(lab_binary_op op) {
  static const char *n[LAB_NBINARY] = {"add", "sub", "mul", "div", "pow", "maximum", "minimum", "remainder",
                                       "eq",  "ne",  "lt",  "le",  "gt",  "ge"};
  return n[op];
}

const char *lab_unary_name(lab_unary_op op) {
  static const char *n[LAB_NUNARY] = {"neg", "abs", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid"};
  return n[op];
}

typedef struct {
  int kind; /* 0 binary, 1 unary, 2 clamp, 3 where, 4 copy */
  int op;
  lab_dtype ct;
  lab_dtype dt[LAB_ITER_MAX_OPS]; /* operand storage types; operand 0 is the output */
  int nin;
  double lo, hi;
  int has_lo, has_hi;
} ew_ctx;

/* Pointer to block of operand k in compute type: in place when possible, else loaded. */
static const void *operand(const ew_ctx *c, int k, char *p, int64_t stride, int64_t n, void *buf) {
  size_t es = lab_dtype_size(c->ct);
  if (c->dt[k] == c->ct && stride == (int64_t)es) return p;
  lab_load_row(c->dt[k], p, stride, c->ct, buf, n);
  return buf;
}

static void ew_row(void *vctx, char **ptrs, const int64_t *strides, int64_t n) {
  const ew_ctx *c = vctx;
  _Alignas(64) char bufs[LAB_ITER_MAX_OPS][BLOCK * 8];
  size_t es = lab_dtype_size(c->ct);
  for (int64_t off = 0; off < n; off += BLOCK) {
    int64_t m = n - off < BLOCK ? n - off : BLOCK;
    const void *in[3] = {0};
    for (int k = 1; k <= c->nin; k++)
      in[k - 1] = operand(c, k, ptrs[k] + off * strides[k], strides[k], m, bufs[k]);
    int direct = c->dt[0] == c->ct && strides[0] == (int64_t)es;
    void *out = direct ? ptrs[0] + off * strides[0] : bufs[0];
    switch (c->kind) {
    case 0: lab_binary_kernel((lab_binary_op)c->op, c->ct, in[0], in[1], out, m); break;
    case 1: lab_unary_kernel((lab_unary_op)c->op, c->ct, in[0], out, m); break;
    case 2: lab_clamp_kernel(c->ct, in[0], out, m, c->lo, c->has_lo, c->hi, c->has_hi); break;
    case 3: lab_where_kernel(c->ct, in[0], in[1], in[2], out, m); break;
    default:
      if (out != in[0]) memcpy(out, in[0], (size_t)m * es);
      break;
    }
    if (!direct) lab_store_row(c->ct, out, c->dt[0], ptrs[0] + off * strides[0], strides[0], m);
  }
}

/* Runs ctx over out and inputs, all broadcast to out's shape. */
static void ew_run(ew_ctx *c, lab_tensor *out, int nin, lab_tensor **in) {
  lab_tensor *ops[LAB_ITER_MAX_OPS] = {out};
  c->dt[0] = out->dtype;
  c->nin = nin;
  for (int k = 0; k < nin; k++) {
    ops[k + 1] = in[k];
    c->dt[k + 1] = in[k]->dtype;
  }
  lab_iter it;
  lab_iter_init(&it, out->ndim, out->shape, nin + 1, ops);
  lab_iter_run(&it, ew_row, c);
}

static int is_comparison(lab_binary_op op) { return op >= LAB_EQ && op <= LAB_GE; }

static lab_tensor *new_broadcast_out(const char *op, lab_dtype dt, int n, lab_tensor **in) {
  int nd = in[0]->ndim;
  int64_t shape[LAB_MAX_DIMS];
  memcpy(shape, in[0]->shape, sizeof(int64_t) * (size_t)nd);
  for (int k = 1; k < n; k++)
    if (lab_broadcast_shapes(op, nd, shape, in[k]->ndim, in[k]->shape, &nd, shape) < 0) return NULL;
  return lab_tensor_empty(dt, nd, shape);
}

static int check_inplace_shape(const char *op, lab_tensor *a, lab_tensor *b) {
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

/* integer remainder by zero is an error (as in Python and torch), not a silent 0 */
static int check_integer_divisor(lab_binary_op op, lab_dtype promoted, lab_tensor *b) {
  if (op != LAB_REMAINDER || lab_dtype_is_float(promoted)) return 0;
  lab_tensor *i = lab_to_dtype(b, LAB_I64);
  lab_tensor *c = i ? lab_contiguous(i) : NULL;
  int zero = 0;
  if (c) {
    const int64_t *v = lab_data(c);
    for (int64_t k = 0, n = lab_numel(c); k < n && !zero; k++) zero = v[k] == 0;
  }
  lab_tensor_release(i); /* lab_to_dtype retains b when it is already i64 */
  lab_tensor_release(c);
  if (!c) return -1;
  return zero ? lab_fail("remainder", "integer remainder by zero") : 0;
}

lab_tensor *lab_binary(lab_binary_op op, lab_tensor *a, lab_tensor *b, int out_dtype) {
  lab_dtype promoted = lab_promote(a->dtype, b->dtype);
  if (check_integer_divisor(op, promoted, b) < 0) return NULL;
  lab_dtype odt;
  if (out_dtype >= 0) odt = (lab_dtype)out_dtype;
  else if (is_comparison(op)) odt = LAB_BOOL;
  else if (op == LAB_DIV && !lab_dtype_is_float(promoted)) odt = LAB_F32;
  else odt = promoted;
  lab_tensor *in[2] = {a, b};
  lab_tensor *out = new_broadcast_out(lab_binary_name(op), odt, 2, in);
  if (!out) return NULL;
  ew_ctx c = {.kind = 0, .op = op, .ct = binary_compute_type(op, promoted)};
  ew_run(&c, out, 2, in);
  return out;
}

int lab_binary_(lab_binary_op op, lab_tensor *a, lab_tensor *b) {
  if (check_inplace_shape(lab_binary_name(op), a, b) < 0) return -1;
  lab_dtype promoted = lab_promote(a->dtype, b->dtype);
  if (!lab_dtype_is_float(a->dtype) && lab_dtype_is_float(promoted))
    return lab_fail(lab_binary_name(op), "in-place result of type %s cannot be stored in a %s tensor",
                    lab_dtype_name(promoted), lab_dtype_name(a->dtype));
  if (check_integer_divisor(op, promoted, b) < 0) return -1;
  lab_tensor *in[2] = {a, b};
  ew_ctx c = {.kind = 0, .op = op, .ct = binary_compute_type(op, promoted)};
  ew_run(&c, a, 2, in);
  return 0;
}

static lab_dtype unary_out_type(lab_unary_op op, lab_dtype t) {
  if (op == LAB_NEG || op == LAB_ABS) return t == LAB_BOOL ? LAB_I64 : t;
  return lab_dtype_is_float(t) ? t : LAB_F32;
}

lab_tensor *lab_unary(lab_unary_op op, lab_tensor *a) {
  lab_dtype odt = unary_out_type(op, a->dtype);
  lab_tensor *out = lab_tensor_empty(odt, a->ndim, a->shape);
  if (!out) return NULL;
  ew_ctx c = {.kind = 1, .op = op, .ct = lab_compute_type(odt)};
  ew_run(&c, out, 1, &a);
  return out;
}

int lab_unary_(lab_unary_op op, lab_tensor *a) {
  if (unary_out_type(op, a->dtype) != a->dtype)
    return lab_fail(lab_unary_name(op), "in-place result is float and cannot be stored in a %s tensor",
                    lab_dtype_name(a->dtype));
  ew_ctx c = {.kind = 1, .op = op, .ct = lab_compute_type(a->dtype)};
  ew_run(&c, a, 1, &a);
  return 0;
}

lab_tensor *lab_clamp(lab_tensor *a, double lo, int has_lo, double hi, int has_hi) {
  lab_tensor *out = lab_tensor_empty(a->dtype, a->ndim, a->shape);
  if (!out) return NULL;
  ew_ctx c = {.kind = 2, .ct = lab_compute_type(a->dtype), .lo = lo, .hi = hi, .has_lo = has_lo, .has_hi = has_hi};
  ew_run(&c, out, 1, &a);
  return out;
}

int lab_clamp_(lab_tensor *a, double lo, int has_lo, double hi, int has_hi) {
  ew_ctx c = {.kind = 2, .ct = lab_compute_type(a->dtype), .lo = lo, .hi = hi, .has_lo = has_lo, .has_hi = has_hi};
  ew_run(&c, a, 1, &a);
  return 0;
}

lab_tensor *lab_where(lab_tensor *cond, lab_tensor *a, lab_tensor *b) {
  lab_dtype odt = lab_promote(a->dtype, b->dtype);
  lab_tensor *in[3] = {cond, a, b};
  lab_tensor *out = new_broadcast_out("where", odt, 3, in);
  if (!out) return NULL;
  ew_ctx c = {.kind = 3, .ct = lab_compute_type(odt)};
  ew_run(&c, out, 3, in);
  return out;
}

int lab_copy_(lab_tensor *dst, lab_tensor *src) {
  if (check_inplace_shape("copy_", dst, src) < 0) return -1;
  /* the compute type must hold every value of both: i64 for integers, f64 for f64 */
  lab_dtype ct = lab_compute_type(lab_promote(dst->dtype, src->dtype));
  if (dst->dtype == src->dtype && lab_is_contiguous(dst) && lab_is_contiguous(src) &&
      lab_numel(dst) == lab_numel(src)) {
    memmove(lab_data(dst), lab_data(src), lab_nbytes(dst));
    return 0;
  }
  if (dst->dtype == src->dtype && dst->dtype != LAB_F64 && lab_dtype_size(dst->dtype) == 2) ct = LAB_F32;
  ew_ctx c = {.kind = 4, .ct = ct};
  ew_run(&c, dst, 1, &src);
  return 0;
}

int lab_fill_(lab_tensor *t, double value) {
  lab_tensor *s = lab_tensor_scalar(lab_compute_type(t->dtype) == LAB_I64 ? LAB_I64 : LAB_F64, value);
  if (!s) return -1;
  int rc = lab_copy_(t, s);
  lab_tensor_release(s);
  return rc;
}
