/* matmul through the device's GEMM (BLAS on the cpu). A 2-D operand whose last or first dim
 * has unit stride is handed over as it lies (transposed views need no copy); other layouts are
 * made contiguous. Half types are widened to f32 for the product and rounded once at the end. */
#include "matmul.h"

#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "transfer.h"

/* How BLAS can read a [rows, cols] matrix view: row-major (trans 0) or as the transpose of
 * a row-major one (trans 1), with its leading dimension. 0 when it cannot. */
static int blas_layout(const lab_tensor *t, int d0, int d1, int *trans, int64_t *ld) {
  int64_t rows = t->shape[d0], cols = t->shape[d1];
  int64_t s0 = t->stride[d0], s1 = t->stride[d1];
  if ((s1 == 1 || cols == 1) && s0 >= (cols > 1 ? cols : 1)) {
    *trans = 0;
    *ld = s0 > 0 ? s0 : 1;
    if (rows == 1) *ld = cols > 0 ? cols : 1;
    return 1;
  }
  if ((s0 == 1 || rows == 1) && s1 >= (rows > 1 ? rows : 1)) {
    *trans = 1;
    *ld = s1 > 0 ? s1 : 1;
    if (cols == 1) *ld = rows > 0 ? rows : 1;
    return 1;
  }
  return 0;
}

static int64_t offset_of_batch(const lab_tensor *t, int nbatch, const int64_t *bshape, int64_t b) {
  /* t's leading dims broadcast against bshape (t has t->ndim - 2 batch dims) */
  int tb = t->ndim - 2;
  int64_t off = 0;
  for (int d = nbatch - 1; d >= 0; d--) {
    int64_t i = b % bshape[d];
    b /= bshape[d];
    int td = d - (nbatch - tb);
    if (td >= 0 && t->shape[td] != 1) off += i * t->stride[td];
  }
  return off;
}

static lab_tensor *prepare(lab_tensor *t, lab_dtype ct) {
  /* compute-type operand that BLAS can read */
  lab_tensor *x = lab_to_dtype(t, ct);
  if (!x) return NULL;
  int tr;
  int64_t ld;
  int nd = x->ndim;
  int ok = blas_layout(x, nd - 2, nd - 1, &tr, &ld);
  /* batch dims must not overlap rows; a stride-0 batch dim (expand) is fine */
  if (ok) return x;
  lab_tensor *c = lab_contiguous(x);
  lab_tensor_release(x);
  return c;
}

static lab_tensor *matmul_nd(lab_tensor *a, lab_tensor *b) {
  char x[128], y[128];
  int64_t m = a->shape[a->ndim - 2], k = a->shape[a->ndim - 1];
  int64_t k2 = b->shape[b->ndim - 2], n = b->shape[b->ndim - 1];
  if (k != k2) {
    lab_fail("matmul", "shapes %s and %s do not match (dim %d vs dim %d: %lld vs %lld)",
             lab_shape_str(a, x, sizeof x), lab_shape_str(b, y, sizeof y), a->ndim, b->ndim - 1,
             (long long)k, (long long)k2);
    return NULL;
  }
  lab_device dev;
  lab_tensor *ab[2] = {a, b};
  if (lab_common_device("matmul", 2, ab, &dev) < 0) return NULL;
  lab_dtype pt = lab_promote(a->dtype, b->dtype);
  if (pt == LAB_BOOL) pt = LAB_I64;
  lab_dtype ct = lab_compute_type(pt);
  if ((pt == LAB_BF16 || pt == LAB_F16) && lab_device_ops_of(dev.type)->gemm_half) ct = pt; /* tensor cores */
  int nbatch;
  int64_t bshape[LAB_MAX_DIMS];
  if (lab_broadcast_shapes("matmul", a->ndim - 2, a->shape, b->ndim - 2, b->shape, &nbatch, bshape) < 0)
    return NULL;
  int64_t oshape[LAB_MAX_DIMS];
  memcpy(oshape, bshape, sizeof(int64_t) * (size_t)nbatch);
  oshape[nbatch] = m;
  oshape[nbatch + 1] = n;
  lab_tensor *A = prepare(a, ct), *B = A ? prepare(b, ct) : NULL;
  lab_tensor *C = B ? lab_tensor_empty_on(dev, ct, nbatch + 2, oshape) : NULL;
  if (!C) {
    lab_tensor_release(A);
    lab_tensor_release(B);
    return NULL;
  }
  int ta = 0, tb = 0;
  int64_t lda = 1, ldb = 1;
  blas_layout(A, A->ndim - 2, A->ndim - 1, &ta, &lda);
  blas_layout(B, B->ndim - 2, B->ndim - 1, &tb, &ldb);
  int64_t batches = 1;
  for (int d = 0; d < nbatch; d++) batches *= bshape[d];
  int64_t *offs = malloc(sizeof(int64_t) * (size_t)(2 * (batches ? batches : 1)));
  if (!offs) {
    lab_fail("matmul", "out of memory");
    lab_tensor_release(A);
    lab_tensor_release(B);
    lab_tensor_release(C);
    return NULL;
  }
  for (int64_t bi = 0; bi < batches; bi++) {
    offs[bi] = offset_of_batch(A, nbatch, bshape, bi);
    offs[batches + bi] = offset_of_batch(B, nbatch, bshape, bi);
  }
  lab_gemm_args g = {.ct = ct, .trans_a = ta, .trans_b = tb, .m = m, .n = n, .k = k, .lda = lda, .ldb = ldb,
                     .ldc = n, .alpha = 1.0, .beta = 0.0, .a = lab_data(A), .b = lab_data(B), .c = lab_data(C),
                     .batches = batches, .a_off = offs, .b_off = offs + batches};
  int rc = lab_ops_of(C)->gemm(&g);
  free(offs);
  if (rc < 0) {
    lab_tensor_release(A);
    lab_tensor_release(B);
    lab_tensor_release(C);
    return NULL;
  }
  lab_tensor_release(A);
  lab_tensor_release(B);
  if (pt == ct) return C;
  lab_tensor *r = lab_to_dtype(C, pt);
  lab_tensor_release(C);
  return r;
}

lab_tensor *lab_matmul(lab_tensor *a, lab_tensor *b) {
  char x[128], y[128];
  if (a->ndim == 0 || b->ndim == 0) {
    lab_fail("matmul", "both operands need at least 1 dimension, got %s and %s",
             lab_shape_str(a, x, sizeof x), lab_shape_str(b, y, sizeof y));
    return NULL;
  }
  /* 1-D operands become matrices [1,k] / [k,1] and the added dim is removed after */
  lab_tensor *A = a->ndim == 1 ? lab_unsqueeze(a, 0) : (lab_tensor_retain(a), a);
  lab_tensor *B = b->ndim == 1 ? lab_unsqueeze(b, 1) : (lab_tensor_retain(b), b);
  lab_tensor *C = (A && B) ? matmul_nd(A, B) : NULL;
  lab_tensor_release(A);
  lab_tensor_release(B);
  if (!C) return NULL;
  if (a->ndim > 1 && b->ndim > 1) return C;
  int64_t shape[LAB_MAX_DIMS];
  int nd = lab_matmul_drop_vector_dims(a->ndim, b->ndim, C, shape);
  lab_tensor *r = lab_view(C, nd, shape);
  lab_tensor_release(C);
  return r;
}

int lab_matmul_drop_vector_dims(int a_ndim, int b_ndim, const lab_tensor *c, int64_t *shape) {
  int nd = 0;
  for (int i = 0; i < c->ndim; i++) {
    if (a_ndim == 1 && i == c->ndim - 2) continue;
    if (b_ndim == 1 && i == c->ndim - 1) continue;
    shape[nd++] = c->shape[i];
  }
  return nd;
}
