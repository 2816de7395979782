/* Elementwise loops. Each op is a plain loop over contiguous arrays so the compiler can
 * vectorise it; the runtime calls these per block with conversions around them. */
#include "ewise.h"
#include "fastmath.h"

#include <math.h>

#define BINARY_LOOP(T, EXPR)                                                                   \
  do {                                                                                         \
    const T *x = a, *y = b;                                                                    \
    T *o = out;                                                                                \
    for (int64_t i = 0; i < n; i++) o[i] = (EXPR);                                             \
  } while (0)

/* Integer arithmetic wraps around as two's complement (as PyTorch's and Lua's integers do)
 * instead of being undefined on overflow; INT64_MIN / -1 and INT64_MIN % -1 trap on x86
 * (SIGFPE), so -1 divisors take their own branch. The runtime refuses zero divisors and
 * negative exponents before a kernel runs; the 0s here only keep the kernel total. */
static inline int64_t wrap_add(int64_t x, int64_t y) { return (int64_t)((uint64_t)x + (uint64_t)y); }
static inline int64_t wrap_sub(int64_t x, int64_t y) { return (int64_t)((uint64_t)x - (uint64_t)y); }
static inline int64_t wrap_mul(int64_t x, int64_t y) { return (int64_t)((uint64_t)x * (uint64_t)y); }
static inline int64_t wrap_neg(int64_t x) { return (int64_t)(0 - (uint64_t)x); }

static inline int64_t floor_div(int64_t x, int64_t y) {
  if (y == 0) return 0;
  if (y == -1) return wrap_neg(x); /* Lua: math.mininteger // -1 == math.mininteger */
  return x / y - ((x % y != 0) && ((x < 0) != (y < 0)));
}

/* floored, as Python's and Lua's %: the sign of the divisor */
static inline int64_t floor_mod(int64_t x, int64_t y) {
  if (y == 0 || y == -1) return 0;
  int64_t r = x % y;
  return (r != 0 && ((r < 0) != (y < 0))) ? r + y : r;
}

static int64_t ipow(int64_t base, int64_t e) {
  if (e < 0) return base == 1 ? 1 : (base == -1 ? ((e & 1) ? -1 : 1) : 0);
  int64_t r = 1;
  while (e) {
    if (e & 1) r = wrap_mul(r, base);
    base = wrap_mul(base, base);
    e >>= 1;
  }
  return r;
}

/* remainder with the sign of the divisor, as Python's % and torch.remainder: a - floor(a/b) b */
static inline float floored_modf(float x, float y) {
  float r = fmodf(x, y);
  return (r != 0 && ((r < 0) != (y < 0))) ? r + y : r;
}
static inline double floored_mod(double x, double y) {
  double r = fmod(x, y);
  return (r != 0 && ((r < 0) != (y < 0))) ? r + y : r;
}

#define BINARY_FLOAT(T, POW, MOD, FLOOR)                                                                   \
  switch (op) {                                                                                \
  case LAB_ADD: BINARY_LOOP(T, x[i] + y[i]); break;                                            \
  case LAB_SUB: BINARY_LOOP(T, x[i] - y[i]); break;                                            \
  case LAB_MUL: BINARY_LOOP(T, x[i] * y[i]); break;                                            \
  case LAB_DIV: BINARY_LOOP(T, x[i] / y[i]); break;                                            \
  case LAB_POW: BINARY_LOOP(T, POW(x[i], y[i])); break;                                        \
  case LAB_MAXIMUM: BINARY_LOOP(T, (x[i] != x[i] || x[i] > y[i]) ? x[i] : y[i]); break;        \
  case LAB_MINIMUM: BINARY_LOOP(T, (x[i] != x[i] || x[i] < y[i]) ? x[i] : y[i]); break;        \
  case LAB_REMAINDER: BINARY_LOOP(T, MOD(x[i], y[i])); break;                                    \
  case LAB_EQ: BINARY_LOOP(T, x[i] == y[i]); break;                                            \
  case LAB_NE: BINARY_LOOP(T, x[i] != y[i]); break;                                            \
  case LAB_LT: BINARY_LOOP(T, x[i] < y[i]); break;                                             \
  case LAB_LE: BINARY_LOOP(T, x[i] <= y[i]); break;                                            \
  case LAB_GT: BINARY_LOOP(T, x[i] > y[i]); break;                                             \
  case LAB_GE: BINARY_LOOP(T, x[i] >= y[i]); break;                                            \
  case LAB_FLOOR_DIV: BINARY_LOOP(T, FLOOR(x[i] / y[i])); break;                               \
  default: break;                                                                              \
  }

void lab_binary_kernel(lab_binary_op op, lab_dtype ct, const void *a, const void *b, void *out,
                       int64_t n) {
  if (ct == LAB_F32) {
    BINARY_FLOAT(float, powf, floored_modf, floorf);
  } else if (ct == LAB_F64) {
    BINARY_FLOAT(double, pow, floored_mod, floor);
  } else {
    switch (op) {
    case LAB_ADD: BINARY_LOOP(int64_t, wrap_add(x[i], y[i])); break;
    case LAB_SUB: BINARY_LOOP(int64_t, wrap_sub(x[i], y[i])); break;
    case LAB_MUL: BINARY_LOOP(int64_t, wrap_mul(x[i], y[i])); break;
    case LAB_DIV: /* integer compute only for // (true division runs in float) */
    case LAB_FLOOR_DIV: BINARY_LOOP(int64_t, floor_div(x[i], y[i])); break; /* as Python's // */
    case LAB_POW: BINARY_LOOP(int64_t, ipow(x[i], y[i])); break;
    case LAB_REMAINDER: BINARY_LOOP(int64_t, floor_mod(x[i], y[i])); break;
    case LAB_MAXIMUM: BINARY_LOOP(int64_t, x[i] > y[i] ? x[i] : y[i]); break;
    case LAB_MINIMUM: BINARY_LOOP(int64_t, x[i] < y[i] ? x[i] : y[i]); break;
    case LAB_EQ: BINARY_LOOP(int64_t, x[i] == y[i]); break;
    case LAB_NE: BINARY_LOOP(int64_t, x[i] != y[i]); break;
    case LAB_LT: BINARY_LOOP(int64_t, x[i] < y[i]); break;
    case LAB_LE: BINARY_LOOP(int64_t, x[i] <= y[i]); break;
    case LAB_GT: BINARY_LOOP(int64_t, x[i] > y[i]); break;
    case LAB_GE: BINARY_LOOP(int64_t, x[i] >= y[i]); break;
    default: break;
    }
  }
}

#define UNARY_LOOP(T, EXPR)                                                                    \
  do {                                                                                         \
    const T *x = a;                                                                            \
    T *o = out;                                                                                \
    for (int64_t i = 0; i < n; i++) o[i] = (EXPR);                                             \
  } while (0)

#define UNARY_FLOAT(T, S)                                                                      \
  switch (op) {                                                                                \
  case LAB_NEG: UNARY_LOOP(T, -x[i]); break;                                                   \
  case LAB_ABS: UNARY_LOOP(T, fabs##S(x[i])); break;                                           \
  case LAB_EXP: UNARY_LOOP(T, EXPF(x[i])); break;                                              \
  case LAB_LOG: UNARY_LOOP(T, log##S(x[i])); break;                                            \
  case LAB_SQRT: UNARY_LOOP(T, sqrt##S(x[i])); break;                                          \
  case LAB_RSQRT: UNARY_LOOP(T, (T)1 / sqrt##S(x[i])); break;                                  \
  case LAB_TANH: UNARY_LOOP(T, TANHF(x[i])); break;                                            \
  case LAB_SIGMOID: UNARY_LOOP(T, (T)1 / ((T)1 + EXPF(-x[i]))); break;                         \
  default: break;                                                                              \
  }

void lab_unary_kernel(lab_unary_op op, lab_dtype ct, const void *a, void *out, int64_t n) {
  if (ct == LAB_F32) {
#define EXPF lab_expf
#define TANHF lab_tanhf
    UNARY_FLOAT(float, f);
#undef EXPF
#undef TANHF
  } else if (ct == LAB_F64) {
#define EXPF exp
#define TANHF tanh
    UNARY_FLOAT(double, );
#undef EXPF
#undef TANHF
  } else { /* the runtime promotes transcendental ops on integers to float */
    switch (op) {
    case LAB_NEG: UNARY_LOOP(int64_t, wrap_neg(x[i])); break;
    case LAB_ABS: UNARY_LOOP(int64_t, x[i] < 0 ? wrap_neg(x[i]) : x[i]); break;
    default: break;
    }
  }
}

#define CLAMP_LOOP(T)                                                                          \
  do {                                                                                         \
    const T *x = a;                                                                            \
    T *o = out;                                                                                \
    T l = (T)lo, h = (T)hi;                                                                    \
    for (int64_t i = 0; i < n; i++) {                                                          \
      T v = x[i];                                                                              \
      if (has_lo && v < l) v = l;                                                              \
      if (has_hi && v > h) v = h;                                                              \
      o[i] = v;                                                                                \
    }                                                                                          \
  } while (0)

void lab_clamp_kernel(lab_dtype ct, const void *a, void *out, int64_t n, double lo, int has_lo,
                      double hi, int has_hi) {
  if (ct == LAB_F32) CLAMP_LOOP(float);
  else if (ct == LAB_F64) CLAMP_LOOP(double);
  else CLAMP_LOOP(int64_t);
}

#define WHERE_LOOP(T)                                                                          \
  do {                                                                                         \
    const T *cc = c, *x = a, *y = b;                                                           \
    T *o = out;                                                                                \
    for (int64_t i = 0; i < n; i++) o[i] = cc[i] ? x[i] : y[i];                                \
  } while (0)

void lab_where_kernel(lab_dtype ct, const void *c, const void *a, const void *b, void *out,
                      int64_t n) {
  if (ct == LAB_F32) WHERE_LOOP(float);
  else if (ct == LAB_F64) WHERE_LOOP(double);
  else WHERE_LOOP(int64_t);
}
