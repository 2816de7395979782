/* bf16 and f16 rounding against known bit patterns (round to nearest, ties to even). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "kernels/cpu/half.h"

static float from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static void test_bf16_known_patterns(void **state) {
  (void)state;
  assert_int_equal(lab_f32_to_bf16(1.0f), 0x3f80);
  assert_int_equal(lab_f32_to_bf16(-2.0f), 0xc000);
  assert_int_equal(lab_f32_to_bf16(3.140625f), 0x4049);
  /* ties: 1 + 2^-8 is halfway between 0x3f80 and 0x3f81: even wins (0x3f80) */
  assert_int_equal(lab_f32_to_bf16(from_bits(0x3f808000u)), 0x3f80);
  /* 0x3f818000 is halfway between 0x3f81 and 0x3f82: even is 0x3f82 */
  assert_int_equal(lab_f32_to_bf16(from_bits(0x3f818000u)), 0x3f82);
  /* just above half rounds up */
  assert_int_equal(lab_f32_to_bf16(from_bits(0x3f808001u)), 0x3f81);
  /* overflow to inf, NaN stays NaN */
  assert_int_equal(lab_f32_to_bf16(from_bits(0x7f7fffffu)), 0x7f80);
  assert_true((lab_f32_to_bf16(NAN) & 0x7fc0) == 0x7fc0);
  assert_true(lab_bf16_to_f32(0x4049) == 3.140625f);
}

static void test_f16_known_patterns(void **state) {
  (void)state;
  assert_int_equal(lab_f32_to_f16(1.0f), 0x3c00);
  assert_int_equal(lab_f32_to_f16(-2.0f), 0xc000);
  assert_int_equal(lab_f32_to_f16(65504.0f), 0x7bff);   /* largest finite */
  assert_int_equal(lab_f32_to_f16(65520.0f), 0x7c00);   /* rounds to inf */
  assert_int_equal(lab_f32_to_f16(65519.0f), 0x7bff);
  assert_int_equal(lab_f32_to_f16(from_bits(0x33800000u)), 0x0001); /* 2^-24 smallest subnormal */
  assert_int_equal(lab_f32_to_f16(from_bits(0x33000000u)), 0x0000); /* 2^-25: tie to even 0 */
  assert_int_equal(lab_f32_to_f16(from_bits(0x33400000u)), 0x0001); /* 1.5 * 2^-25 rounds up */
  assert_int_equal(lab_f32_to_f16(1.0f + 1.0f / 2048), 0x3c00);      /* tie: even */
  assert_int_equal(lab_f32_to_f16(1.0f + 3.0f / 2048), 0x3c02);      /* tie: even is up */
  assert_int_equal(lab_f32_to_f16(from_bits(0x387fe000u)), 0x0400); /* subnormal carries to normal */
  assert_true(lab_f16_to_f32(0x0001) == from_bits(0x33800000u));
  assert_true(lab_f16_to_f32(0x7bff) == 65504.0f);
  assert_true(isinf(lab_f16_to_f32(0xfc00)) && lab_f16_to_f32(0xfc00) < 0);
  assert_true(isnan(lab_f16_to_f32(0x7e00)));
}

static void test_round_trip_every_f16(void **state) {
  (void)state;
  for (uint32_t h = 0; h < 0x10000; h++) {
    if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) continue; /* NaN payloads */
    assert_int_equal(lab_f32_to_f16(lab_f16_to_f32((uint16_t)h)), h);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bf16_known_patterns),
      cmocka_unit_test(test_f16_known_patterns),
      cmocka_unit_test(test_round_trip_every_f16),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
