/* bf16 and IEEE f16 conversions to and from f32, rounding to nearest even, bit-exact with
 * CUDA's __float2bfloat16_rn / __float2half_rn (NaN stays NaN, overflow goes to inf). */
#ifndef LAB_KERNELS_HALF_H
#define LAB_KERNELS_HALF_H

#include <stdint.h>
#include <string.h>

static inline float lab_bf16_to_f32(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static inline uint16_t lab_f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u); /* quiet NaN */
  u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest, ties to even */
  return (uint16_t)(u >> 16);
}

float lab_f16_to_f32(uint16_t h);
uint16_t lab_f32_to_f16(float f);

#endif
