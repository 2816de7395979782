/* Row conversions between storage and compute types. Half and FP8 types round to nearest even
 * on store (FP8 saturating, see fp8.h); float-to-integer stores truncate toward zero as C (and PyTorch) casts do. */
#include "convert.h"
#include "fp8.h"
#include "half.h"

#define LOAD_LOOP(CT, EXPR)                                                                    \
  do {                                                                                         \
    CT *d = (CT *)dst;                                                                         \
    for (int64_t i = 0; i < n; i++) {                                                          \
      const char *s = src + i * stride;                                                        \
      d[i] = (CT)(EXPR);                                                                       \
    }                                                                                          \
  } while (0)

#define LOAD_AS(CT)                                                                            \
  switch (src_t) {                                                                             \
  case LAB_F32: LOAD_LOOP(CT, *(const float *)s); break;                                       \
  case LAB_F64: LOAD_LOOP(CT, *(const double *)s); break;                                      \
  case LAB_I32: LOAD_LOOP(CT, *(const int32_t *)s); break;                                     \
  case LAB_I64: LOAD_LOOP(CT, *(const int64_t *)s); break;                                     \
  case LAB_BF16: LOAD_LOOP(CT, lab_bf16_to_f32(*(const uint16_t *)s)); break;                  \
  case LAB_F16: LOAD_LOOP(CT, lab_f16_to_f32(*(const uint16_t *)s)); break;                    \
  case LAB_BOOL: LOAD_LOOP(CT, *(const uint8_t *)s != 0); break;                               \
  case LAB_F8E4M3: LOAD_LOOP(CT, lab_f8e4m3_to_f32(*(const uint8_t *)s)); break;               \
  case LAB_F8E5M2: LOAD_LOOP(CT, lab_f8e5m2_to_f32(*(const uint8_t *)s)); break;               \
  default: break;                                                                              \
  }

void lab_load_row(lab_dtype src_t, const char *src, int64_t stride, lab_dtype ct, void *dst,
                  int64_t n) {
  switch (ct) {
  case LAB_F32: LOAD_AS(float); break;
  case LAB_F64: LOAD_AS(double); break;
  default: LOAD_AS(int64_t); break;
  }
}

#define STORE_LOOP(DT, EXPR)                                                                   \
  do {                                                                                         \
    for (int64_t i = 0; i < n; i++) {                                                          \
      DT *d = (DT *)(dst + i * stride);                                                        \
      *d = (EXPR);                                                                             \
    }                                                                                          \
  } while (0)

#define STORE_FROM(CT)                                                                         \
  do {                                                                                         \
    const CT *s = (const CT *)src;                                                             \
    switch (dst_t) {                                                                           \
    case LAB_F32: STORE_LOOP(float, (float)s[i]); break;                                       \
    case LAB_F64: STORE_LOOP(double, (double)s[i]); break;                                     \
    case LAB_I32: STORE_LOOP(int32_t, (int32_t)s[i]); break;                                   \
    case LAB_I64: STORE_LOOP(int64_t, (int64_t)s[i]); break;                                   \
    case LAB_BF16: STORE_LOOP(uint16_t, lab_f32_to_bf16((float)s[i])); break;                  \
    case LAB_F16: STORE_LOOP(uint16_t, lab_f32_to_f16((float)s[i])); break;                    \
    case LAB_BOOL: STORE_LOOP(uint8_t, s[i] != 0); break;                                      \
    case LAB_F8E4M3: STORE_LOOP(uint8_t, lab_f32_to_f8e4m3((float)s[i])); break;               \
    case LAB_F8E5M2: STORE_LOOP(uint8_t, lab_f32_to_f8e5m2((float)s[i])); break;               \
    default: break;                                                                            \
    }                                                                                          \
  } while (0)

void lab_store_row(lab_dtype ct, const void *src, lab_dtype dst_t, char *dst, int64_t stride,
                   int64_t n) {
  switch (ct) {
  case LAB_F32: STORE_FROM(float); break;
  case LAB_F64: STORE_FROM(double); break;
  default: STORE_FROM(int64_t); break;
  }
}

double lab_get_f64(lab_dtype t, const void *p) {
  double v = 0;
  lab_load_row(t, p, 0, LAB_F64, &v, 1);
  return v;
}

int64_t lab_get_i64(lab_dtype t, const void *p) {
  int64_t v = 0;
  lab_load_row(t, p, 0, LAB_I64, &v, 1);
  return v;
}

void lab_set_f64(lab_dtype t, void *p, double v) { lab_store_row(LAB_F64, &v, t, p, 0, 1); }
void lab_set_i64(lab_dtype t, void *p, int64_t v) { lab_store_row(LAB_I64, &v, t, p, 0, 1); }
