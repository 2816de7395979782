/* OCP FP8 (E4M3, E5M2) conversions against NVIDIA's: every row of fp8_reference.h (codes that
 * NVIDIA's __nv_cvt_float_to_fp8 with __NV_SATFINITE produced, see fp8_reference.cc) and every
 * code's decoded value; then each class of value spelled out by hand from the OCP spec, so a
 * reader sees the rules (zero, subnormals, normals, max, overflow, infinity, NaN, ties). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "kernels/cpu/convert.h"
#include "kernels/cpu/fp8.h"
#include "fp8_reference.h"

static float from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static void test_encode_matches_nvidia(void **state) {
  (void)state;
  size_t n = sizeof fp8_reference / sizeof fp8_reference[0], bad = 0;
  for (size_t i = 0; i < n; i++) {
    float x = from_bits(fp8_reference[i].f32);
    uint8_t a = lab_f32_to_f8e4m3(x), b = lab_f32_to_f8e5m2(x);
    if (a != fp8_reference[i].e4m3 || b != fp8_reference[i].e5m2) {
      if (bad++ < 10)
        fprintf(stderr, "f32 0x%08x (%g): e4m3 0x%02x want 0x%02x, e5m2 0x%02x want 0x%02x\n",
                fp8_reference[i].f32, x, a, fp8_reference[i].e4m3, b, fp8_reference[i].e5m2);
    }
  }
  assert_true(n > 1500);
  assert_int_equal(bad, 0);
}

static void test_decode_matches_nvidia(void **state) {
  (void)state;
  for (unsigned c = 0; c < 256; c++) {
    float want4 = from_bits(fp8_decode_reference[0][c]), want5 = from_bits(fp8_decode_reference[1][c]);
    float got4 = lab_f8e4m3_to_f32((uint8_t)c), got5 = lab_f8e5m2_to_f32((uint8_t)c);
    /* NaN payload and sign are not part of the contract (NVIDIA's decode drops the sign) */
    if (isnan(want4)) assert_true(isnan(got4));
    else assert_memory_equal(&got4, &want4, 4); /* bitwise: -0 stays -0 */
    if (isnan(want5)) assert_true(isnan(got5));
    else assert_memory_equal(&got5, &want5, 4);
    /* and every code round-trips (NaN to the canonical NaN) */
    if (!isnan(got4)) assert_int_equal(lab_f32_to_f8e4m3(got4), c);
    if (!isnan(got5) && !isinf(got5)) assert_int_equal(lab_f32_to_f8e5m2(got5), c);
  }
}

static void test_e4m3_classes(void **state) {
  (void)state;
  assert_int_equal(lab_f32_to_f8e4m3(0.0f), 0x00);
  assert_int_equal(lab_f32_to_f8e4m3(-0.0f), 0x80);
  assert_int_equal(lab_f32_to_f8e4m3(1.0f), 0x38);                  /* 0.0111.000 */
  assert_int_equal(lab_f32_to_f8e4m3(-1.75f), 0xbe);
  assert_int_equal(lab_f32_to_f8e4m3(0x1p-6f), 0x08);               /* smallest normal */
  assert_int_equal(lab_f32_to_f8e4m3(0x1p-9f), 0x01);               /* smallest subnormal */
  assert_int_equal(lab_f32_to_f8e4m3(0x7p-9f), 0x07);               /* largest subnormal */
  assert_int_equal(lab_f32_to_f8e4m3(0x1p-10f), 0x00);              /* half of it: tie to even 0 */
  assert_int_equal(lab_f32_to_f8e4m3(0x1.8p-10f), 0x01);            /* above half: up */
  assert_int_equal(lab_f32_to_f8e4m3(0x1.ep-7f), 0x08);             /* 7.5 subnormal quanta: tie to 8, a normal */
  assert_int_equal(lab_f32_to_f8e4m3(1.0625f), 0x38);               /* 1 + half ulp: tie to even (down) */
  assert_int_equal(lab_f32_to_f8e4m3(1.1875f), 0x3a);               /* 1.125 + half ulp: tie to even (up) */
  assert_int_equal(lab_f32_to_f8e4m3(448.0f), 0x7e);                /* max: S.1111.110 */
  assert_int_equal(lab_f32_to_f8e4m3(464.0f), 0x7e);                /* max + half ulp: tie to even max */
  assert_int_equal(lab_f32_to_f8e4m3(465.0f), 0x7e);                /* would round past max: saturates */
  assert_int_equal(lab_f32_to_f8e4m3(-1e9f), 0xfe);
  assert_int_equal(lab_f32_to_f8e4m3(INFINITY), 0x7e);              /* no infinity in E4M3: max */
  assert_int_equal(lab_f32_to_f8e4m3(-INFINITY), 0xfe);
  assert_int_equal(lab_f32_to_f8e4m3(NAN), 0x7f);                   /* S.1111.111 */
  assert_int_equal(lab_f32_to_f8e4m3(-NAN), 0x7f);                  /* canonical, as NVIDIA */
  assert_true(lab_f8e4m3_to_f32(0x7e) == LAB_F8E4M3_MAX);
  assert_true(lab_f8e4m3_to_f32(0x01) == 0x1p-9f);
  assert_true(isnan(lab_f8e4m3_to_f32(0xff)));
  assert_true(lab_f8e4m3_to_f32(0x78) == 256.0f);                   /* S.1111.000 is a number here */
}

static void test_e5m2_classes(void **state) {
  (void)state;
  assert_int_equal(lab_f32_to_f8e5m2(0.0f), 0x00);
  assert_int_equal(lab_f32_to_f8e5m2(-0.0f), 0x80);
  assert_int_equal(lab_f32_to_f8e5m2(1.0f), 0x3c);                  /* 0.01111.00 */
  assert_int_equal(lab_f32_to_f8e5m2(0x1p-14f), 0x04);              /* smallest normal */
  assert_int_equal(lab_f32_to_f8e5m2(0x1p-16f), 0x01);              /* smallest subnormal */
  assert_int_equal(lab_f32_to_f8e5m2(0x1p-17f), 0x00);              /* tie to even 0 */
  assert_int_equal(lab_f32_to_f8e5m2(0x1.000002p-17f), 0x01);
  assert_int_equal(lab_f32_to_f8e5m2(1.125f), 0x3c);                /* tie: even (down) */
  assert_int_equal(lab_f32_to_f8e5m2(1.375f), 0x3e);                /* tie: even (up) */
  assert_int_equal(lab_f32_to_f8e5m2(57344.0f), 0x7b);              /* max: S.11110.11 */
  assert_int_equal(lab_f32_to_f8e5m2(61440.0f), 0x7b);              /* tie would go to inf: saturates */
  assert_int_equal(lab_f32_to_f8e5m2(INFINITY), 0x7b);              /* satfinite: inf -> max */
  assert_int_equal(lab_f32_to_f8e5m2(-INFINITY), 0xfb);
  assert_int_equal(lab_f32_to_f8e5m2(NAN), 0x7f);
  assert_true(isinf(lab_f8e5m2_to_f32(0x7c)) && lab_f8e5m2_to_f32(0xfc) < 0); /* infinities decode */
  assert_true(isnan(lab_f8e5m2_to_f32(0x7d)) && isnan(lab_f8e5m2_to_f32(0xfe)));
  assert_true(lab_f8e5m2_to_f32(0x7b) == LAB_F8E5M2_MAX);
}

/* the row loops every elementwise op and .to() use: strided loads and stores in both formats */
static void test_rows(void **state) {
  (void)state;
  float src[4] = {1.0f, -448.0f, 1000.0f, 0x1p-9f}, back[4];
  uint8_t q[8];
  lab_store_row(LAB_F32, src, LAB_F8E4M3, (char *)q, 2, 4); /* every other byte */
  assert_int_equal(q[0], 0x38);
  assert_int_equal(q[2], 0xfe);
  assert_int_equal(q[4], 0x7e);
  assert_int_equal(q[6], 0x01);
  lab_load_row(LAB_F8E4M3, (const char *)q, 2, LAB_F32, back, 4);
  assert_true(back[0] == 1.0f && back[1] == -448.0f && back[2] == 448.0f && back[3] == 0x1p-9f);
  lab_store_row(LAB_F32, src, LAB_F8E5M2, (char *)q, 1, 4);
  lab_load_row(LAB_F8E5M2, (const char *)q, 1, LAB_F32, back, 4);
  assert_true(back[0] == 1.0f && back[1] == -448.0f && back[2] == 1024.0f && back[3] == 0x1p-9f);
  assert_int_equal(lab_dtype_size(LAB_F8E4M3), 1);
  assert_true(lab_dtype_is_float(LAB_F8E5M2));
  assert_int_equal(lab_compute_type(LAB_F8E4M3), LAB_F32);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_encode_matches_nvidia), cmocka_unit_test(test_decode_matches_nvidia),
      cmocka_unit_test(test_e4m3_classes),          cmocka_unit_test(test_e5m2_classes),
      cmocka_unit_test(test_rows),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
