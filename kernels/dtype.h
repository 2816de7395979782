/* Element types shared by every layer. Kernels see only this enum and raw pointers;
 * the runtime decides promotion and which compute type a kernel runs in. */
#ifndef LAB_KERNELS_DTYPE_H
#define LAB_KERNELS_DTYPE_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
  LAB_F32 = 0,
  LAB_F64,
  LAB_I32,
  LAB_I64,
  LAB_BF16,
  LAB_F16,
  LAB_BOOL,
  LAB_F8E4M3, /* OCP FP8, see kernels/cpu/fp8.h */
  LAB_F8E5M2,
  LAB_NDTYPES
} lab_dtype;

static inline size_t lab_dtype_size(lab_dtype t) {
  static const size_t sizes[LAB_NDTYPES] = {4, 8, 4, 8, 2, 2, 1, 1, 1};
  return sizes[t];
}

static inline int lab_dtype_is_float(lab_dtype t) {
  return t == LAB_F32 || t == LAB_F64 || t == LAB_BF16 || t == LAB_F16 || t == LAB_F8E4M3 || t == LAB_F8E5M2;
}

/* FP8 types: storage only, as on GPUs (a product of FP8 operands accumulates in f32). */
static inline int lab_dtype_is_fp8(lab_dtype t) { return t == LAB_F8E4M3 || t == LAB_F8E5M2; }

/* Kernels compute in one of three types: half and FP8 types widen to f32 (as GPUs do),
 * integer and bool types widen to i64. */
static inline lab_dtype lab_compute_type(lab_dtype t) {
  switch (t) {
  case LAB_F64: return LAB_F64;
  case LAB_F32: case LAB_BF16: case LAB_F16: case LAB_F8E4M3: case LAB_F8E5M2: return LAB_F32;
  default: return LAB_I64;
  }
}

#endif
