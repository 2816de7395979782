/* Tensor objects, creation and views. A view is a new header over the same storage; only
 * reshape of a non-viewable layout and contiguous() of a strided tensor copy. */
#include "tensor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../kernels/cpu/convert.h"
#include "error.h"
#include "size.h"

#define DTYPE_NAME(e, name, bytes) name,
static const char *dtype_names[LAB_NDTYPES] = {LAB_DTYPE_LIST(DTYPE_NAME)};
#undef DTYPE_NAME

const char *lab_dtype_name(lab_dtype t) { return (unsigned)t < LAB_NDTYPES ? dtype_names[t] : "?"; }

int lab_dtype_from_name(const char *s) {
  static const struct { const char *name; lab_dtype dt; } names[] = {
      {"f32", LAB_F32},   {"float32", LAB_F32},  {"float", LAB_F32},   {"f64", LAB_F64},
      {"float64", LAB_F64}, {"double", LAB_F64}, {"i32", LAB_I32},     {"int32", LAB_I32},
      {"int", LAB_I32},   {"i64", LAB_I64},      {"int64", LAB_I64},   {"long", LAB_I64},
      {"bf16", LAB_BF16}, {"bfloat16", LAB_BF16}, {"f16", LAB_F16},    {"float16", LAB_F16},
      {"half", LAB_F16},  {"bool", LAB_BOOL},     {"f8e4m3", LAB_F8E4M3}, {"float8_e4m3fn", LAB_F8E4M3},
      {"f8e5m2", LAB_F8E5M2}, {"float8_e5m2", LAB_F8E5M2}};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (strcmp(s, names[i].name) == 0) return (int)names[i].dt;
  return -1;
}

/* PyTorch's promotion lattice: bool < integers < floats; bf16 with f16 meet at f32. */
lab_dtype lab_promote(lab_dtype a, lab_dtype b) {
  if (a == b) return a;
  int fa = lab_dtype_is_float(a), fb = lab_dtype_is_float(b);
  if (fa && !fb) return a;
  if (fb && !fa) return b;
  if (fa && fb) {
    if (a == LAB_F64 || b == LAB_F64) return LAB_F64;
    return LAB_F32; /* f32 with a half type, or bf16 with f16 */
  }
  if (a == LAB_BOOL) return b;
  if (b == LAB_BOOL) return a;
  return LAB_I64; /* i32 with i64 */
}

static void set_contiguous_strides(lab_tensor *t) {
  int64_t s = 1;
  for (int i = t->ndim - 1; i >= 0; i--) {
    t->stride[i] = s;
    s *= t->shape[i];
  }
}

static lab_tensor *header_new(lab_dtype dt, int ndim, const int64_t *shape) {
  lab_tensor *t = calloc(1, sizeof *t);
  if (!t) {
    lab_fail("tensor", "out of memory");
    return NULL;
  }
  t->refcount = 1;
  t->dtype = dt;
  t->ndim = ndim;
  if (ndim) memcpy(t->shape, shape, sizeof(int64_t) * (size_t)ndim);
  set_contiguous_strides(t);
  return t;
}

static lab_tensor *alloc_tensor(lab_device dev, lab_dtype dt, int ndim, const int64_t *shape, int zero) {
  if (lab_check_size("tensor", ndim, shape, lab_dtype_size(dt), NULL) < 0) return NULL;
  lab_tensor *t = header_new(dt, ndim, shape);
  if (!t) return NULL;
  t->storage = lab_storage_new_on(dev, (size_t)lab_numel(t) * lab_dtype_size(dt), zero);
  if (!t->storage) {
    free(t);
    return NULL;
  }
  return t;
}

lab_tensor *lab_tensor_empty_on(lab_device dev, lab_dtype dt, int ndim, const int64_t *shape) {
  return alloc_tensor(dev, dt, ndim, shape, 0);
}

lab_tensor *lab_tensor_zeros_on(lab_device dev, lab_dtype dt, int ndim, const int64_t *shape) {
  return alloc_tensor(dev, dt, ndim, shape, 1);
}

lab_tensor *lab_tensor_empty(lab_dtype dt, int ndim, const int64_t *shape) {
  return alloc_tensor(lab_cpu(), dt, ndim, shape, 0);
}

lab_tensor *lab_tensor_zeros(lab_dtype dt, int ndim, const int64_t *shape) {
  return alloc_tensor(lab_cpu(), dt, ndim, shape, 1);
}

lab_tensor *lab_tensor_full(lab_dtype dt, int ndim, const int64_t *shape, double value) {
  lab_tensor *t = alloc_tensor(lab_cpu(), dt, ndim, shape, 0);
  if (!t) return NULL;
  int64_t n = lab_numel(t);
  size_t es = lab_dtype_size(dt);
  char *p = t->storage->data;
  if (n > 0) {
    lab_set_f64(dt, p, value);
    for (int64_t i = 1; i < n; i++) memcpy(p + (size_t)i * es, p, es);
  }
  return t;
}

lab_tensor *lab_tensor_scalar(lab_dtype dt, double value) { return lab_tensor_full(dt, 0, NULL, value); }

lab_tensor *lab_tensor_arange(lab_dtype dt, double start, double end, double step) {
  if (step == 0) {
    lab_fail("arange", "step must be non-zero");
    return NULL;
  }
  double count = (end - start) / step;
  if (count != count || count > (double)LAB_MAX_TENSOR_BYTES) { /* NaN or inf bounds, or a huge range */
    lab_fail("arange", "from %g to %g by %g is %g elements, more than a tensor may hold", start, end, step, count);
    return NULL;
  }
  int64_t n = count > 0 ? (int64_t)count : 0;
  if ((double)n < count) n++; /* ceil */
  lab_tensor *t = lab_tensor_empty(dt, 1, &n);
  if (!t) return NULL;
  size_t es = lab_dtype_size(dt);
  for (int64_t i = 0; i < n; i++) lab_set_f64(dt, (char *)t->storage->data + (size_t)i * es, start + (double)i * step);
  return t;
}

void lab_tensor_retain(lab_tensor *t) { t->refcount++; }

static void (*ag_free)(struct lab_ag_meta *);

void lab_tensor_set_ag_free(void (*fn)(struct lab_ag_meta *)) { ag_free = fn; }

void lab_tensor_release(lab_tensor *t) {
  if (!t || --t->refcount > 0) return;
  if (t->ag && ag_free) ag_free(t->ag);
  lab_storage_release(t->storage);
  free(t);
}

int64_t lab_numel(const lab_tensor *t) {
  int64_t n = 1;
  for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
  return n;
}

int lab_is_contiguous(const lab_tensor *t) {
  int64_t s = 1;
  for (int i = t->ndim - 1; i >= 0; i--) {
    if (t->shape[i] != 1 && t->stride[i] != s) return 0;
    s *= t->shape[i];
  }
  return 1;
}

void *lab_data(const lab_tensor *t) {
  return (char *)t->storage->data + t->offset * (int64_t)lab_dtype_size(t->dtype);
}

size_t lab_nbytes(const lab_tensor *t) { return (size_t)lab_numel(t) * lab_dtype_size(t->dtype); }

int lab_same_shape(const lab_tensor *a, const lab_tensor *b) {
  if (a->ndim != b->ndim) return 0;
  for (int i = 0; i < a->ndim; i++)
    if (a->shape[i] != b->shape[i]) return 0;
  return 1;
}

const char *lab_shape_str(const lab_tensor *t, char *buf, size_t n) {
  return lab_dims_str(t->ndim, t->shape, buf, n);
}

/* A new header over t's storage. */
static lab_tensor *view_of(lab_tensor *t, int ndim, const int64_t *shape, const int64_t *stride,
                           int64_t offset) {
  lab_tensor *v = header_new(t->dtype, ndim, shape);
  if (!v) return NULL;
  if (ndim) memcpy(v->stride, stride, sizeof(int64_t) * (size_t)ndim);
  v->offset = offset;
  v->storage = t->storage;
  lab_storage_retain(t->storage);
  return v;
}

static int infer_shape(const char *op, const lab_tensor *t, int ndim, const int64_t *in,
                       int64_t *out) {
  if (ndim < 0 || ndim > LAB_MAX_DIMS)
    return lab_fail(op, "%d dimensions requested, at most %d are supported", ndim, LAB_MAX_DIMS);
  int infer = -1;
  int64_t known = 1, sizes[LAB_MAX_DIMS] = {0};
  for (int i = 0; i < ndim; i++) sizes[i] = in[i] == -1 ? 1 : in[i];
  /* the sizes other than -1 must make a tensor that can exist, or their product wraps */
  if (lab_check_size(op, ndim, sizes, lab_dtype_size(t->dtype), NULL) < 0) return -1;
  for (int i = 0; i < ndim; i++) {
    if (in[i] == -1) {
      if (infer >= 0) return lab_fail(op, "only one dimension can be -1");
      infer = i;
    } else if (in[i] < 0) {
      return lab_fail(op, "invalid size %lld in dim %d", (long long)in[i], i + 1);
    } else {
      known *= in[i];
    }
    out[i] = in[i];
  }
  int64_t n = lab_numel(t);
  char a[128], b[128];
  if (infer >= 0) {
    if (known == 0 || n % known != 0)
      return lab_fail(op, "shape %s is invalid for a tensor of %lld elements %s",
                      lab_dims_str(ndim, in, a, sizeof a), (long long)n, lab_shape_str(t, b, sizeof b));
    out[infer] = n / known;
  } else if (known != n) {
    return lab_fail(op, "shape %s is invalid for a tensor of %lld elements %s",
                    lab_dims_str(ndim, in, a, sizeof a), (long long)n, lab_shape_str(t, b, sizeof b));
  }
  return 0;
}

/* Strides for viewing t as `shape` without a copy, following PyTorch's computeStride:
 * walk groups of old dims that are contiguous with each other and split them. */
static int view_strides(const lab_tensor *t, int ndim, const int64_t *shape, int64_t *stride) {
  int64_t numel = lab_numel(t);
  if (numel == 0 || t->ndim == 0) {
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
      stride[i] = s;
      s *= shape[i] ? shape[i] : 1;
    }
    return 1;
  }
  int view_d = ndim - 1;
  int64_t chunk_base_stride = t->stride[t->ndim - 1];
  int64_t tensor_numel = 1, view_numel = 1;
  for (int d = t->ndim - 1; d >= 0; d--) {
    tensor_numel *= t->shape[d];
    if (d == 0 || (t->shape[d - 1] != 1 && t->stride[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
        stride[view_d] = view_numel * chunk_base_stride;
        view_numel *= shape[view_d];
        view_d--;
      }
      if (view_numel != tensor_numel) return 0;
      if (d > 0) {
        chunk_base_stride = t->stride[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return view_d == -1;
}

lab_tensor *lab_view(lab_tensor *t, int ndim, const int64_t *shape) {
  int64_t s[LAB_MAX_DIMS], st[LAB_MAX_DIMS];
  if (infer_shape("view", t, ndim, shape, s) < 0) return NULL;
  if (!view_strides(t, ndim, s, st)) {
    char a[128];
    lab_fail("view", "tensor of shape %s with these strides cannot be viewed as %s without a "
             "copy; use reshape (or contiguous first)",
             lab_shape_str(t, a, sizeof a), lab_dims_str(ndim, s, (char[128]){0}, 128));
    return NULL;
  }
  return view_of(t, ndim, s, st, t->offset);
}

lab_tensor *lab_reshape(lab_tensor *t, int ndim, const int64_t *shape) {
  int64_t s[LAB_MAX_DIMS], st[LAB_MAX_DIMS];
  if (infer_shape("reshape", t, ndim, shape, s) < 0) return NULL;
  if (view_strides(t, ndim, s, st)) return view_of(t, ndim, s, st, t->offset);
  lab_tensor *c = lab_contiguous(t);
  if (!c) return NULL;
  lab_tensor *v = lab_view(c, ndim, s);
  lab_tensor_release(c);
  return v;
}

static int check_dim(const char *op, const lab_tensor *t, int dim, int extra) {
  if (dim < 0 || dim >= t->ndim + extra)
    return lab_fail(op, "dim %d out of range for a tensor of %d dimensions", dim + 1, t->ndim);
  return 0;
}

lab_tensor *lab_transpose(lab_tensor *t, int d0, int d1) {
  if (check_dim("transpose", t, d0, 0) < 0 || check_dim("transpose", t, d1, 0) < 0) return NULL;
  lab_tensor *v = view_of(t, t->ndim, t->shape, t->stride, t->offset);
  if (!v) return NULL;
  v->shape[d0] = t->shape[d1];
  v->shape[d1] = t->shape[d0];
  v->stride[d0] = t->stride[d1];
  v->stride[d1] = t->stride[d0];
  return v;
}

lab_tensor *lab_permute(lab_tensor *t, const int *dims) {
  int seen[LAB_MAX_DIMS] = {0};
  int64_t shape[LAB_MAX_DIMS], stride[LAB_MAX_DIMS];
  for (int i = 0; i < t->ndim; i++) {
    if (check_dim("permute", t, dims[i], 0) < 0) return NULL;
    if (seen[dims[i]]++) {
      lab_fail("permute", "dim %d appears twice", dims[i] + 1);
      return NULL;
    }
    shape[i] = t->shape[dims[i]];
    stride[i] = t->stride[dims[i]];
  }
  return view_of(t, t->ndim, shape, stride, t->offset);
}

lab_tensor *lab_narrow(lab_tensor *t, int dim, int64_t start, int64_t length) {
  if (check_dim("narrow", t, dim, 0) < 0) return NULL;
  if (start < 0 || length < 0 || start > t->shape[dim] || length > t->shape[dim] - start) {
    lab_fail("narrow", "start %lld, length %lld exceed dim %d of size %lld", (long long)start + 1,
             (long long)length, dim + 1, (long long)t->shape[dim]);
    return NULL;
  }
  lab_tensor *v = view_of(t, t->ndim, t->shape, t->stride, t->offset + start * t->stride[dim]);
  if (v) v->shape[dim] = length;
  return v;
}

lab_tensor *lab_select(lab_tensor *t, int dim, int64_t index) {
  if (check_dim("select", t, dim, 0) < 0) return NULL;
  if (index < 0 || index >= t->shape[dim]) {
    lab_fail("select", "index %lld out of range for dim %d of size %lld", (long long)index + 1,
             dim + 1, (long long)t->shape[dim]);
    return NULL;
  }
  int64_t shape[LAB_MAX_DIMS], stride[LAB_MAX_DIMS];
  int n = 0;
  for (int i = 0; i < t->ndim; i++)
    if (i != dim) {
      shape[n] = t->shape[i];
      stride[n++] = t->stride[i];
    }
  return view_of(t, n, shape, stride, t->offset + index * t->stride[dim]);
}

lab_tensor *lab_expand(lab_tensor *t, int ndim, const int64_t *shape) {
  char a[128], b[128];
  if (ndim < t->ndim || ndim > LAB_MAX_DIMS) {
    lab_fail("expand", "cannot expand %s to %s", lab_shape_str(t, a, sizeof a),
             lab_dims_str(ndim, shape, b, sizeof b));
    return NULL;
  }
  int64_t s[LAB_MAX_DIMS] = {0}, st[LAB_MAX_DIMS] = {0};
  int lead = ndim - t->ndim;
  for (int i = 0; i < ndim; i++) {
    int j = i - lead;
    int64_t want = shape[i];
    if (j < 0) {
      if (want < 0) {
        lab_fail("expand", "-1 is not allowed in a new leading dim (dim %d)", i + 1);
        return NULL;
      }
      s[i] = want;
      st[i] = 0;
    } else if (want == -1 || want == t->shape[j]) {
      s[i] = t->shape[j];
      st[i] = t->stride[j];
    } else if (t->shape[j] == 1) {
      s[i] = want;
      st[i] = 0;
    } else {
      lab_fail("expand", "cannot expand %s to %s: dim %d has size %lld, not 1",
               lab_shape_str(t, a, sizeof a), lab_dims_str(ndim, shape, b, sizeof b), j + 1,
               (long long)t->shape[j]);
      return NULL;
    }
  }
  if (lab_check_size("expand", ndim, s, lab_dtype_size(t->dtype), NULL) < 0) return NULL;
  return view_of(t, ndim, s, st, t->offset);
}

lab_tensor *lab_unsqueeze(lab_tensor *t, int dim) {
  if (check_dim("unsqueeze", t, dim, 1) < 0) return NULL;
  if (t->ndim >= LAB_MAX_DIMS) {
    lab_fail("unsqueeze", "at most %d dimensions are supported", LAB_MAX_DIMS);
    return NULL;
  }
  int64_t shape[LAB_MAX_DIMS], stride[LAB_MAX_DIMS];
  for (int i = 0, j = 0; i <= t->ndim; i++) {
    if (i == dim) {
      shape[i] = 1;
      stride[i] = dim < t->ndim ? t->stride[dim] * t->shape[dim] : 1;
    } else {
      shape[i] = t->shape[j];
      stride[i] = t->stride[j++];
    }
  }
  return view_of(t, t->ndim + 1, shape, stride, t->offset);
}

lab_tensor *lab_squeeze(lab_tensor *t, int dim) {
  if (dim >= 0 && check_dim("squeeze", t, dim, 0) < 0) return NULL;
  int64_t shape[LAB_MAX_DIMS], stride[LAB_MAX_DIMS];
  int n = 0;
  for (int i = 0; i < t->ndim; i++) {
    int drop = t->shape[i] == 1 && (dim < 0 || dim == i);
    if (!drop) {
      shape[n] = t->shape[i];
      stride[n++] = t->stride[i];
    }
  }
  return view_of(t, n, shape, stride, t->offset);
}

lab_tensor *lab_alias(lab_tensor *t) { return view_of(t, t->ndim, t->shape, t->stride, t->offset); }

int lab_broadcast_shapes(const char *op, int na, const int64_t *a, int nb, const int64_t *b,
                         int *nout, int64_t *out) {
  int n = na > nb ? na : nb;
  int64_t res[LAB_MAX_DIMS]; /* out may alias a or b (callers fold shapes in place) */
  for (int i = 0; i < n; i++) {
    int ia = i - (n - na), ib = i - (n - nb);
    int64_t sa = ia >= 0 ? a[ia] : 1, sb = ib >= 0 ? b[ib] : 1;
    if (sa != sb && sa != 1 && sb != 1) {
      char x[128], y[128];
      return lab_fail(op, "shapes %s and %s cannot be broadcast (dim %d: %lld vs %lld)",
                      lab_dims_str(na, a, x, sizeof x), lab_dims_str(nb, b, y, sizeof y), i + 1,
                      (long long)sa, (long long)sb);
    }
    res[i] = sa == 1 ? sb : sa;
  }
  memcpy(out, res, sizeof(int64_t) * (size_t)n);
  *nout = n;
  return 0;
}
