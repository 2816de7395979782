/* Views share storage and follow PyTorch's stride rules; reshape copies only when needed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "runtime/tensor.h"
#include "kernels/cpu/convert.h"

static lab_tensor *arange(int64_t n) { return lab_tensor_arange(LAB_F32, 0, (double)n, 1); }

static float at(lab_tensor *t, int64_t i0, int64_t i1) {
  float *p = (float *)t->storage->data;
  return p[t->offset + i0 * t->stride[0] + i1 * t->stride[1]];
}

static void test_view_shares_storage(void **state) {
  (void)state;
  lab_tensor *a = arange(12);
  lab_tensor *v = lab_view(a, 2, (int64_t[]){3, -1});
  assert_non_null(v);
  assert_ptr_equal(v->storage, a->storage);
  assert_int_equal(v->shape[1], 4);
  assert_int_equal(v->stride[0], 4);
  assert_true(at(v, 2, 3) == 11.0f);
  lab_tensor_release(v);
  lab_tensor_release(a);
}

static void test_transpose_then_view_fails_but_reshape_copies(void **state) {
  (void)state;
  lab_tensor *a = arange(6);
  lab_tensor *m = lab_view(a, 2, (int64_t[]){2, 3});
  lab_tensor *t = lab_transpose(m, 0, 1);
  assert_false(lab_is_contiguous(t));
  assert_null(lab_view(t, 1, (int64_t[]){6}));
  lab_tensor *r = lab_reshape(t, 1, (int64_t[]){6});
  assert_non_null(r);
  assert_ptr_not_equal(r->storage, a->storage);
  float want[6] = {0, 3, 1, 4, 2, 5};
  for (int i = 0; i < 6; i++) assert_true(((float *)lab_data(r))[i] == want[i]);
  lab_tensor_release(r);
  lab_tensor_release(t);
  lab_tensor_release(m);
  lab_tensor_release(a);
}

static void test_narrow_select_expand(void **state) {
  (void)state;
  lab_tensor *a = arange(12);
  lab_tensor *m = lab_view(a, 2, (int64_t[]){3, 4});
  lab_tensor *n = lab_narrow(m, 1, 1, 2); /* columns 1..2 */
  assert_int_equal(n->shape[1], 2);
  assert_true(at(n, 2, 1) == 10.0f);
  lab_tensor *s = lab_select(m, 0, 1); /* row 1 */
  assert_int_equal(s->ndim, 1);
  assert_true(((float *)lab_data(s))[3] == 7.0f);
  lab_tensor *col = lab_view(arange(3), 2, (int64_t[]){3, 1});
  lab_tensor *e = lab_expand(col, 2, (int64_t[]){3, 5});
  assert_int_equal(e->stride[1], 0);
  assert_true(at(e, 2, 4) == 2.0f);
  assert_null(lab_expand(m, 2, (int64_t[]){3, 5}));
  lab_tensor_release(e);
  lab_tensor_release(col);
  lab_tensor_release(s);
  lab_tensor_release(n);
  lab_tensor_release(m);
  lab_tensor_release(a);
}

static void test_unsqueeze_squeeze_permute(void **state) {
  (void)state;
  lab_tensor *a = arange(24);
  lab_tensor *m = lab_view(a, 3, (int64_t[]){2, 3, 4});
  lab_tensor *u = lab_unsqueeze(m, 1);
  assert_int_equal(u->ndim, 4);
  assert_int_equal(u->shape[1], 1);
  lab_tensor *q = lab_squeeze(u, -1);
  assert_true(lab_same_shape(q, m));
  lab_tensor *p = lab_permute(m, (int[]){2, 0, 1});
  assert_int_equal(p->shape[0], 4);
  assert_int_equal(p->stride[0], 1);
  assert_int_equal(p->stride[2], 4);
  lab_tensor *c = lab_contiguous(p);
  assert_true(lab_is_contiguous(c));
  /* c[3][1][2] == m[1][2][3] == 1*12 + 2*4 + 3 */
  assert_true(((float *)lab_data(c))[3 * 6 + 1 * 3 + 2] == 23.0f);
  lab_tensor_release(c);
  lab_tensor_release(p);
  lab_tensor_release(q);
  lab_tensor_release(u);
  lab_tensor_release(m);
  lab_tensor_release(a);
}

static void test_copy_converts_and_broadcasts(void **state) {
  (void)state;
  lab_tensor *d = lab_tensor_zeros(LAB_I32, 2, (int64_t[]){2, 3});
  lab_tensor *row = lab_tensor_arange(LAB_F64, 1, 4, 1);
  assert_int_equal(lab_copy_(d, row), 0);
  int32_t *p = lab_data(d);
  assert_int_equal(p[0], 1);
  assert_int_equal(p[5], 3);
  lab_tensor *bad = lab_tensor_zeros(LAB_F32, 1, (int64_t[]){4});
  assert_int_equal(lab_copy_(d, bad), -1);
  lab_tensor_release(bad);
  lab_tensor_release(row);
  lab_tensor_release(d);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_view_shares_storage),
      cmocka_unit_test(test_transpose_then_view_fails_but_reshape_copies),
      cmocka_unit_test(test_narrow_select_expand),
      cmocka_unit_test(test_unsqueeze_squeeze_permute),
      cmocka_unit_test(test_copy_converts_and_broadcasts),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
