/* IEEE 754 binary16 conversions. The f32->f16 path rounds once, to nearest even, including
 * for results that land in the subnormal range, so it matches GPU hardware conversion. */
#include "half.h"

float lab_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  uint32_t u;
  if (exp == 0) {
    if (man == 0) {
      u = sign;
    } else { /* subnormal: normalise */
      exp = 127 - 15 + 1;
      while (!(man & 0x400u)) {
        man <<= 1;
        exp--;
      }
      man &= 0x3ffu;
      u = sign | (exp << 23) | (man << 13);
    }
  } else if (exp == 31) {
    u = sign | 0x7f800000u | (man << 13);
  } else {
    u = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float f;
  memcpy(&f, &u, 4);
  return f;
}

uint16_t lab_f32_to_f16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7e00u | (uint16_t)((a >> 13) & 0x3ffu); /* NaN */
  if (a >= 0x477ff000u) return sign | 0x7c00u; /* rounds to inf (>= 65520) */
  int32_t exp = (int32_t)(a >> 23) - 127 + 15;
  uint32_t man = a & 0x7fffffu;
  if (exp <= 0) { /* subnormal or zero in f16 */
    if (exp < -10) return sign; /* below half the smallest subnormal: rounds to zero */
    man |= 0x800000u;
    uint32_t shift = (uint32_t)(14 - exp);
    uint32_t half_bit = 1u << (shift - 1);
    uint32_t rest = man & ((1u << shift) - 1);
    uint32_t r = man >> shift;
    if (rest > half_bit || (rest == half_bit && (r & 1u))) r++;
    return sign | (uint16_t)r;
  }
  uint32_t r = ((uint32_t)exp << 10) | (man >> 13);
  uint32_t rest = man & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (r & 1u))) r++; /* may carry into the exponent: fine */
  return sign | (uint16_t)r;
}
