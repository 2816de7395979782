/* f32 <-> OCP FP8 (E4M3, E5M2) conversions; see fp8.h for the rules. One generic rounding
 * routine serves both formats: the value is rounded to an integer number of quanta, where the
 * quantum is the spacing of fp8 values at the value's exponent (fixed below the smallest normal,
 * which is what makes subnormals), and the fp8 code is then that integer plus the exponent
 * field, so a carry out of the mantissa moves into the exponent by itself. */
#include "fp8.h"

#include <string.h>

/* man: mantissa bits; bias: exponent bias; max_code: the largest finite magnitude's code */
static uint8_t to_fp8(float f, int man, int bias, int max_code) {
  uint32_t u;
  memcpy(&u, &f, 4);
  uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return 0x7f;                  /* NaN: canonical, sign dropped (as NVIDIA) */
  if (a == 0x7f800000u) return sign | (uint8_t)max_code; /* infinity saturates */
  if (a < 0x00800000u) return sign;                  /* zero or an f32 subnormal: far below 2^-17 */
  int e = (int)(a >> 23) - 127;                      /* unbiased exponent of f */
  uint32_t sig = (a & 0x7fffffu) | 0x800000u;        /* 24-bit significand, value sig * 2^(e-23) */
  int qe = (e < 1 - bias ? 1 - bias : e) - man;      /* exponent of the fp8 quantum at this value */
  int shift = 23 + qe - e;                           /* sig >> shift = value / quantum */
  if (shift > 25) return sign;                       /* below half the smallest subnormal */
  uint32_t r = sig >> shift;
  uint32_t rest = sig & ((1u << shift) - 1u), half = 1u << (shift - 1);
  if (rest > half || (rest == half && (r & 1u))) r++; /* nearest, ties to even */
  /* subnormal range: the code is the number of quanta (2^man quanta is the smallest normal);
   * normal range: r holds the implicit bit, which adds one to the exponent field below it */
  int code = e < 1 - bias ? (int)r : ((e + bias - 1) << man) + (int)r;
  if (code > max_code) code = max_code;              /* satfinite */
  return sign | (uint8_t)code;
}

uint8_t lab_f32_to_f8e4m3(float f) { return to_fp8(f, 3, 7, 0x7e); }
uint8_t lab_f32_to_f8e5m2(float f) { return to_fp8(f, 2, 15, 0x7b); }

static float from_fp8(uint8_t c, int man, int bias) {
  uint32_t sign = (uint32_t)(c & 0x80u) << 24;
  uint32_t ef = (c & 0x7fu) >> man, m = c & ((1u << man) - 1u);
  uint32_t u;
  if (ef == 0) { /* subnormal: m quanta of 2^(1 - bias - man), exact in f32 */
    float v = (float)m;
    for (int i = 0; i < bias - 1 + man; i++) v *= 0.5f;
    return (c & 0x80u) ? -v : v;
  }
  u = sign | ((ef - (uint32_t)bias + 127u) << 23) | (m << (23 - man));
  float f;
  memcpy(&f, &u, 4);
  return f;
}

float lab_f8e4m3_to_f32(uint8_t c) {
  if ((c & 0x7fu) == 0x7fu) { /* S.1111.111 is NaN; E4M3 spends no code on infinity */
    uint32_t u = 0x7fc00000u | ((uint32_t)(c & 0x80u) << 24);
    float f;
    memcpy(&f, &u, 4);
    return f;
  }
  return from_fp8(c, 3, 7);
}

float lab_f8e5m2_to_f32(uint8_t c) {
  if ((c & 0x7cu) == 0x7cu) { /* exponent all ones: infinity (mantissa 0) or NaN, IEEE-style */
    uint32_t u = ((uint32_t)(c & 0x80u) << 24) | ((c & 3u) ? 0x7fc00000u : 0x7f800000u);
    float f;
    memcpy(&f, &u, 4);
    return f;
  }
  return from_fp8(c, 2, 15);
}
