/* The parameter checksum lab.replicas compares across ranks (runtime/checksum.c): every single
 * flipped bit of every element changes it, for each dtype size; equal tensors (also a strided
 * view and its contiguous copy) give equal sums; the shape and dtype count too. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "runtime/checksum.h"
#include "runtime/tensor.h"
#include "runtime/transfer.h"

static lab_tensor *filled(lab_dtype dt, int64_t n) {
  int64_t shape[1] = {n};
  lab_tensor *t = lab_tensor_zeros(dt, 1, shape);
  assert_non_null(t);
  unsigned char *p = lab_data(t);
  for (size_t i = 0; i < lab_nbytes(t); i++) p[i] = (unsigned char)(i * 37 + 11);
  return t;
}

static uint64_t sum_of(lab_tensor *t) {
  uint64_t h = 0;
  assert_int_equal(lab_checksum(t, &h), 0);
  return h;
}

static void test_every_flipped_bit_changes_it(void **state) {
  (void)state;
  lab_dtype dts[] = {LAB_F32, LAB_BF16, LAB_F64, LAB_F16};
  for (size_t d = 0; d < sizeof dts / sizeof *dts; d++) {
    lab_tensor *t = filled(dts[d], 13); /* an odd count: a tail shorter than a word */
    uint64_t base = sum_of(t);
    unsigned char *p = lab_data(t);
    for (size_t i = 0; i < lab_nbytes(t); i++)
      for (int b = 0; b < 8; b++) {
        p[i] ^= (unsigned char)(1u << b);
        assert_true(sum_of(t) != base);
        p[i] ^= (unsigned char)(1u << b);
      }
    assert_true(sum_of(t) == base);
    lab_tensor_release(t);
  }
}

static void test_equal_values_equal_sums(void **state) {
  (void)state;
  lab_tensor *a = filled(LAB_F32, 24), *b = filled(LAB_F32, 24);
  assert_true(sum_of(a) == sum_of(b));
  int64_t shape[2] = {4, 6};
  lab_tensor *m = lab_view(a, 2, shape);
  assert_non_null(m);
  assert_true(sum_of(m) != sum_of(a)); /* the shape is part of it */
  lab_tensor *mt = lab_transpose(m, 0, 1), *copy = lab_contiguous(mt);
  assert_non_null(mt);
  assert_non_null(copy);
  assert_true(sum_of(mt) == sum_of(copy)); /* a strided view reads in row-major order */
  lab_tensor *c = filled(LAB_F16, 48); /* the same bytes under another dtype */
  assert_true(sum_of(c) != sum_of(a));
  lab_tensor_release(copy);
  lab_tensor_release(mt);
  lab_tensor_release(m);
  lab_tensor_release(a);
  lab_tensor_release(b);
  lab_tensor_release(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_flipped_bit_changes_it),
      cmocka_unit_test(test_equal_values_equal_sums),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
