/* Element types shared by every layer. Kernels see only this enum and raw pointers;
 * the runtime decides promotion and which compute type a kernel runs in. */
#ifndef LAB_KERNELS_DTYPE_H
#define LAB_KERNELS_DTYPE_H

#include <stddef.h>
#include <stdint.h>

/* The one list of element types: X(enum suffix, short name, bytes). The enum, the names
 * (runtime/tensor.c, lab.f32 ... in lua/l_lab.c) and the sizes are generated from it, so they
 * cannot fall out of step. F8E4M3 and F8E5M2 are OCP FP8, see kernels/cpu/fp8.h. */
#define LAB_DTYPE_LIST(X) \
  X(F32, "f32", 4)        \
  X(F64, "f64", 8)        \
  X(I32, "i32", 4)        \
  X(I64, "i64", 8)        \
  X(BF16, "bf16", 2)      \
  X(F16, "f16", 2)        \
  X(BOOL, "bool", 1)      \
  X(F8E4M3, "f8e4m3", 1)  \
  X(F8E5M2, "f8e5m2", 1)

typedef enum {
#define LAB_DTYPE_ENUM_(e, name, bytes) LAB_##e,
  LAB_DTYPE_LIST(LAB_DTYPE_ENUM_)
#undef LAB_DTYPE_ENUM_
  LAB_NDTYPES
} lab_dtype;

static inline size_t lab_dtype_size(lab_dtype t) {
#define LAB_DTYPE_SIZE_(e, name, bytes) bytes,
  static const size_t sizes[LAB_NDTYPES] = {LAB_DTYPE_LIST(LAB_DTYPE_SIZE_)};
#undef LAB_DTYPE_SIZE_
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
