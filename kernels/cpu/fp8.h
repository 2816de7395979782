/* OCP 8-bit floats (OFP8, "OCP 8-bit Floating Point Specification" 1.0), the two formats
 * FP8 training uses:
 *   f8e4m3 (E4M3): 1 sign, 4 exponent (bias 7), 3 mantissa bits; max 448 (0x7E); no infinity;
 *                  NaN is S.1111.111 (0x7F, 0xFF); smallest subnormal 2^-9.
 *   f8e5m2 (E5M2): 1 sign, 5 exponent (bias 15), 2 mantissa bits; max 57344 (0x7B); infinity
 *                  S.11111.00; NaN S.11111.{01,10,11}; smallest subnormal 2^-16.
 * f32 -> fp8 rounds once to nearest, ties to even (also into the subnormal range), and
 * saturates as NVIDIA's __nv_cvt_float_to_fp8(x, __NV_SATFINITE, ...) and the PTX instruction
 * cvt.rn.satfinite do: a finite value or an infinity whose rounded magnitude exceeds the
 * format's max becomes +-max; NaN becomes the canonical 0x7F (sign dropped, as NVIDIA's).
 * Why saturation and not the non-saturating mode (overflow -> NaN for E4M3, inf for E5M2):
 * FP8 training quantises x * scale with a scale taken from past steps' amax (delayed scaling),
 * so a value larger than any seen before overflows by design now and then; saturating clips
 * it to max (as Transformer Engine's casts do) where NaN or inf would poison the whole GEMM.
 * fp8 -> f32 is exact (every fp8 value is an f32 value). */
#ifndef LAB_KERNELS_FP8_H
#define LAB_KERNELS_FP8_H

#include <stdint.h>

uint8_t lab_f32_to_f8e4m3(float f);
uint8_t lab_f32_to_f8e5m2(float f);
float lab_f8e4m3_to_f32(uint8_t c);
float lab_f8e5m2_to_f32(uint8_t c);

#define LAB_F8E4M3_MAX 448.0f
#define LAB_F8E5M2_MAX 57344.0f

#endif
