/* Tensors as bits: bit flips and NaN/Inf counts (see bits.h). */
#include "bits.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../kernels/cpu/half.h"
#include "error.h"
#include "transfer.h"

/* t's elements in a fresh host buffer (row-major, t's dtype); NULL after lab_fail */
static unsigned char *host_copy(lab_tensor *t, const char *op, size_t *n) {
  *n = lab_nbytes(t);
  unsigned char *buf = malloc(*n ? *n : 1);
  if (!buf) {
    lab_fail(op, "out of memory copying %zu bytes", *n);
    return NULL;
  }
  if (lab_copy_to_host(t, buf) < 0) {
    free(buf);
    return NULL;
  }
  return buf;
}

int lab_bits_flip(lab_tensor *t, int64_t index, int bit) {
  int64_t numel = lab_numel(t);
  int bits = (int)lab_dtype_size(t->dtype) * 8;
  if (index < 0 || index >= numel)
    return lab_fail("flip_bit", "element %lld is outside 0..%lld", (long long)index, (long long)numel - 1);
  if (bit < 0 || bit >= bits)
    return lab_fail("flip_bit", "bit %d is outside 0..%d for %s", bit, bits - 1, lab_dtype_name(t->dtype));
  size_t n;
  unsigned char *buf = host_copy(t, "flip_bit", &n);
  if (!buf) return -1;
  /* little-endian element bytes: bit b lives in byte b / 8 of the element */
  buf[(size_t)index * lab_dtype_size(t->dtype) + (size_t)(bit / 8)] ^= (unsigned char)(1u << (bit % 8));
  int rc = lab_copy_from_host(t, buf);
  free(buf);
  return rc;
}

/* whether one element (its bytes at p) is NaN (2), Inf (1) or finite (0) */
static int classify(lab_dtype dt, const unsigned char *p) {
  switch (dt) {
  case LAB_F32: {
    uint32_t u;
    memcpy(&u, p, 4);
    if ((u & 0x7f800000u) != 0x7f800000u) return 0;
    return (u & 0x007fffffu) ? 2 : 1;
  }
  case LAB_F64: {
    uint64_t u;
    memcpy(&u, p, 8);
    if ((u & 0x7ff0000000000000ull) != 0x7ff0000000000000ull) return 0;
    return (u & 0x000fffffffffffffull) ? 2 : 1;
  }
  case LAB_BF16: case LAB_F16: {
    uint16_t u;
    memcpy(&u, p, 2);
    uint16_t e = dt == LAB_BF16 ? 0x7f80u : 0x7c00u;
    if ((u & e) != e) return 0;
    return (u & (uint16_t)~(e | 0x8000u)) ? 2 : 1;
  }
  case LAB_F8E4M3: return (p[0] & 0x7fu) == 0x7fu ? 2 : 0; /* no Inf in e4m3 */
  case LAB_F8E5M2:
    if ((p[0] & 0x7cu) != 0x7cu) return 0;
    return (p[0] & 0x03u) ? 2 : 1;
  default: return 0;
  }
}

int lab_bits_nonfinite(lab_tensor *t, int64_t *nan, int64_t *inf) {
  *nan = *inf = 0;
  if (!lab_dtype_is_float(t->dtype)) return 0;
  size_t n;
  unsigned char *buf = host_copy(t, "nonfinite", &n);
  if (!buf) return -1;
  size_t es = lab_dtype_size(t->dtype);
  for (size_t i = 0; i + es <= n; i += es) {
    int c = classify(t->dtype, buf + i);
    if (c == 2) (*nan)++;
    else if (c == 1) (*inf)++;
  }
  free(buf);
  return 0;
}

/* one element into the running summary (v as a double: NaN and Inf counted, not summed) */
static inline void add_value(lab_bits_stats *st, double v) {
  if (v != v) st->nan++;
  else if (v == INFINITY || v == -INFINITY) st->inf++;
  else {
    double a = fabs(v);
    if (a > st->max_abs) st->max_abs = a;
    st->sum_sq += v * v;
  }
}

int lab_bits_summary(lab_tensor *t, lab_bits_stats *out) {
  memset(out, 0, sizeof *out);
  if (!lab_dtype_is_float(t->dtype)) return lab_fail("summary", "a %s tensor is not floating point", lab_dtype_name(t->dtype));
  size_t n;
  unsigned char *buf = host_copy(t, "summary", &n);
  if (!buf) return -1;
  size_t count = n / lab_dtype_size(t->dtype);
  /* one loop per dtype over the aligned buffer (malloc's alignment suits every type) */
  switch (t->dtype) {
  case LAB_F32: { /* the common case, kept to one predictable branch and two partial sums */
    const float *x = (const float *)(void *)buf;
    double s0 = 0, s1 = 0;
    float mx = 0;
    for (size_t i = 0; i < count; i++) {
      float v = x[i], a = fabsf(v);
      if (a <= FLT_MAX) {
        mx = a > mx ? a : mx;
        if (i & 1) s1 += (double)v * v;
        else s0 += (double)v * v;
      } else if (v != v) {
        out->nan++;
      } else {
        out->inf++;
      }
    }
    out->max_abs = mx;
    out->sum_sq = s0 + s1;
    break;
  }
  case LAB_F64:
    for (size_t i = 0; i < count; i++) add_value(out, ((const double *)(void *)buf)[i]);
    break;
  case LAB_BF16:
    for (size_t i = 0; i < count; i++) add_value(out, lab_bf16_to_f32(((const uint16_t *)(void *)buf)[i]));
    break;
  case LAB_F16:
    for (size_t i = 0; i < count; i++) add_value(out, lab_f16_to_f32(((const uint16_t *)(void *)buf)[i]));
    break;
  default: /* FP8: NaN and Inf only (values need the scale they are stored with) */
    for (size_t i = 0; i < count; i++) {
      int c = classify(t->dtype, buf + i);
      if (c == 2) out->nan++;
      else if (c == 1) out->inf++;
    }
  }
  free(buf);
  return 0;
}

int lab_bits_poison(lab_tensor *t, int64_t index) {
  static const unsigned char f32_nan[4] = {0, 0, 0xc0, 0x7f}, f64_nan[8] = {0, 0, 0, 0, 0, 0, 0xf8, 0x7f},
                             bf16_nan[2] = {0xc0, 0x7f}, f16_nan[2] = {0x00, 0x7e}, e4m3_nan[1] = {0x7f},
                             e5m2_nan[1] = {0x7e};
  const unsigned char *nan;
  switch (t->dtype) {
  case LAB_F32: nan = f32_nan; break;
  case LAB_F64: nan = f64_nan; break;
  case LAB_BF16: nan = bf16_nan; break;
  case LAB_F16: nan = f16_nan; break;
  case LAB_F8E4M3: nan = e4m3_nan; break;
  case LAB_F8E5M2: nan = e5m2_nan; break;
  default: return lab_fail("poison", "a %s tensor cannot hold NaN", lab_dtype_name(t->dtype));
  }
  if (index < 0 || index >= lab_numel(t))
    return lab_fail("poison", "element %lld is outside 0..%lld", (long long)index, (long long)lab_numel(t) - 1);
  size_t n;
  unsigned char *buf = host_copy(t, "poison", &n);
  if (!buf) return -1;
  size_t es = lab_dtype_size(t->dtype);
  memcpy(buf + (size_t)index * es, nan, es);
  int rc = lab_copy_from_host(t, buf);
  free(buf);
  return rc;
}
