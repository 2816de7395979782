/* Vectorisable exp, tanh and sigmoid for float. glibc's expf/tanhf are scalar calls that
 * the compiler cannot turn into SIMD loops; these are branch-free polynomials it can, with
 * a relative error of about 2e-7 (a couple of ulp), far below what training notices.
 * exp: x = n ln2 + r with |r| <= ln2/2, exp(r) by a degree-6 polynomial, 2^n by exponent
 * bits. Inputs beyond the float range saturate to 0 and +inf; NaN stays NaN. */
#ifndef LAB_KERNELS_FASTMATH_H
#define LAB_KERNELS_FASTMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline float lab_expf(float x) {
  const float hi = 88.3762626647949f, lo = -87.3365447504f;
  /* NaN takes the path of 0 (its result is replaced below): converting floor(NaN) to int
   * and shifting the negative result is undefined (UBSan, found by tests/fuzz) */
  float xc = x > hi ? hi : (x < lo ? lo : (x != x ? 0.0f : x));
  float n = floorf(xc * 1.44269504088896341f + 0.5f);
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  int32_t e = ((int32_t)n + 127) << 23;
  float scale;
  memcpy(&scale, &e, 4);
  float y = p * scale;
  y = x > hi ? INFINITY : y;
  y = x < lo ? 0.0f : y;
  return x != x ? x : y;
}

static inline float lab_sigmoidf(float x) { return 1.0f / (1.0f + lab_expf(-x)); }

/* tanh(x) = 2 sigmoid(2x) - 1, exact enough away from 0; near 0 use the odd polynomial to
 * keep relative accuracy for tiny x */
static inline float lab_tanhf(float x) {
  float ax = fabsf(x);
  float big = 2.0f / (1.0f + lab_expf(-2.0f * x)) - 1.0f;
  float x2 = x * x;
  float small = x * (1.0f + x2 * (-0.333333333f + x2 * (0.133333333f + x2 * (-0.0539682540f))));
  return ax < 0.125f ? small : big;
}

#endif
