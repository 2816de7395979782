/* matmul against a naive triple loop: plain, transposed views (no copy), batched with
 * broadcast, and the half types. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "kernels/cpu/convert.h"
#include "runtime/matmul.h"
#include "runtime/random.h"
#include "runtime/tensor.h"

static double get(const lab_tensor *t, const int64_t *idx) {
  int64_t off = t->offset;
  for (int d = 0; d < t->ndim; d++) off += idx[d] * t->stride[d];
  return lab_get_f64(t->dtype, (char *)t->storage->data + off * (int64_t)lab_dtype_size(t->dtype));
}

/* max |C - A@B| over a batch of 2-D products (batch dims broadcast) */
static double max_err(lab_tensor *a, lab_tensor *b, lab_tensor *c) {
  int nb = c->ndim - 2;
  int64_t m = c->shape[nb], n = c->shape[nb + 1], k = a->shape[a->ndim - 1];
  int64_t batches = 1;
  for (int d = 0; d < nb; d++) batches *= c->shape[d];
  double worst = 0;
  for (int64_t bi = 0; bi < batches; bi++) {
    int64_t cidx[8], aidx[8], bidx[8];
    int64_t rem = bi;
    for (int d = nb - 1; d >= 0; d--) {
      cidx[d] = rem % c->shape[d];
      rem /= c->shape[d];
    }
    for (int d = 0; d < a->ndim - 2; d++) {
      int cd = d + nb - (a->ndim - 2);
      aidx[d] = a->shape[d] == 1 ? 0 : cidx[cd];
    }
    for (int d = 0; d < b->ndim - 2; d++) {
      int cd = d + nb - (b->ndim - 2);
      bidx[d] = b->shape[d] == 1 ? 0 : cidx[cd];
    }
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        double s = 0;
        for (int64_t p = 0; p < k; p++) {
          aidx[a->ndim - 2] = i;
          aidx[a->ndim - 1] = p;
          bidx[b->ndim - 2] = p;
          bidx[b->ndim - 1] = j;
          s += get(a, aidx) * get(b, bidx);
        }
        cidx[nb] = i;
        cidx[nb + 1] = j;
        double e = fabs(get(c, cidx) - s);
        if (e > worst) worst = e;
      }
  }
  return worst;
}

static lab_tensor *randn(lab_dtype dt, int nd, const int64_t *shape) {
  lab_tensor *t = lab_tensor_empty(dt, nd, shape);
  lab_randn_(t, 0, 1);
  return t;
}

static void test_plain_and_transposed(void **state) {
  (void)state;
  lab_manual_seed(1);
  lab_tensor *a = randn(LAB_F32, 2, (int64_t[]){17, 33});
  lab_tensor *b = randn(LAB_F32, 2, (int64_t[]){33, 9});
  lab_tensor *c = lab_matmul(a, b);
  assert_true(max_err(a, b, c) < 1e-4);
  lab_tensor *bt_store = randn(LAB_F32, 2, (int64_t[]){9, 33});
  lab_tensor *bt = lab_transpose(bt_store, 0, 1); /* a transposed view goes to BLAS as is */
  lab_tensor *c2 = lab_matmul(a, bt);
  assert_true(max_err(a, bt, c2) < 1e-4);
  lab_tensor *at_store = randn(LAB_F64, 2, (int64_t[]){33, 17});
  lab_tensor *at = lab_transpose(at_store, 0, 1);
  lab_tensor *b64 = lab_to_dtype(b, LAB_F64);
  lab_tensor *c3 = lab_matmul(at, b64);
  assert_int_equal(c3->dtype, LAB_F64);
  assert_true(max_err(at, b64, c3) < 1e-10);
  lab_tensor *bad = randn(LAB_F32, 2, (int64_t[]){32, 9});
  assert_null(lab_matmul(a, bad));
  lab_tensor_release(bad);
  lab_tensor_release(c3);
  lab_tensor_release(b64);
  lab_tensor_release(at);
  lab_tensor_release(at_store);
  lab_tensor_release(c2);
  lab_tensor_release(bt);
  lab_tensor_release(bt_store);
  lab_tensor_release(c);
  lab_tensor_release(b);
  lab_tensor_release(a);
}

static void test_batched_broadcast(void **state) {
  (void)state;
  lab_manual_seed(2);
  lab_tensor *a = randn(LAB_F32, 3, (int64_t[]){4, 5, 6});
  lab_tensor *b = randn(LAB_F32, 2, (int64_t[]){6, 7});
  lab_tensor *c = lab_matmul(a, b);
  assert_int_equal(c->ndim, 3);
  assert_int_equal(c->shape[0], 4);
  assert_true(max_err(a, b, c) < 1e-4);
  lab_tensor *x = randn(LAB_F32, 4, (int64_t[]){2, 1, 3, 4});
  lab_tensor *y = randn(LAB_F32, 3, (int64_t[]){5, 4, 2});
  lab_tensor *z = lab_matmul(x, y);
  assert_int_equal(z->shape[1], 5);
  assert_true(max_err(x, y, z) < 1e-4);
  lab_tensor_release(z);
  lab_tensor_release(y);
  lab_tensor_release(x);
  lab_tensor_release(c);
  lab_tensor_release(b);
  lab_tensor_release(a);
}

static void test_half_types_round_once(void **state) {
  (void)state;
  lab_manual_seed(3);
  lab_tensor *a = randn(LAB_BF16, 2, (int64_t[]){8, 16});
  lab_tensor *b = randn(LAB_BF16, 2, (int64_t[]){16, 8});
  lab_tensor *c = lab_matmul(a, b);
  assert_int_equal(c->dtype, LAB_BF16);
  /* the exact product of the bf16 inputs, rounded once to bf16: relative error <= 2^-8 */
  lab_tensor *a32 = lab_to_dtype(a, LAB_F64), *b32 = lab_to_dtype(b, LAB_F64);
  lab_tensor *ref = lab_matmul(a32, b32);
  for (int64_t i = 0; i < 64; i++) {
    double r = ((double *)lab_data(ref))[i];
    double got = lab_get_f64(LAB_BF16, (char *)lab_data(c) + 2 * i);
    assert_true(fabs(got - r) <= fabs(r) * (1.0 / 256) + 1e-6);
  }
  lab_tensor_release(ref);
  lab_tensor_release(b32);
  lab_tensor_release(a32);
  lab_tensor_release(c);
  lab_tensor_release(b);
  lab_tensor_release(a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_plain_and_transposed),
      cmocka_unit_test(test_batched_broadcast),
      cmocka_unit_test(test_half_types_round_once),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
