/* Row reductions and row softmax. Softmax subtracts the row max first so exp never
 * overflows, and log-softmax is computed as x - max - log(sum exp) for the same reason. */
#include "reduce.h"

#include "nn.h" /* lab_sum_middle, lab_softmax_rows */
#include "fastmath.h"

#include <math.h>

#define AS_F(ct, x, i) ((ct) == LAB_F32 ? (double)((const float *)(x))[i] : ((const double *)(x))[i])

double lab_row_sum_f(lab_dtype ct, const void *x, int64_t n) {
  double s = 0;
  if (ct == LAB_F32) {
    const float *p = x;
    for (int64_t i = 0; i < n; i++) s += p[i];
  } else {
    const double *p = x;
    for (int64_t i = 0; i < n; i++) s += p[i];
  }
  return s;
}

/* integer sums and products wrap as two's complement (as Lua's and PyTorch's integers do):
 * unsigned arithmetic, since signed overflow is undefined */
int64_t lab_row_sum_i(const int64_t *x, int64_t n) {
  uint64_t s = 0;
  for (int64_t i = 0; i < n; i++) s += (uint64_t)x[i];
  return (int64_t)s;
}

int64_t lab_row_prod_i(const int64_t *x, int64_t n) {
  uint64_t s = 1;
  for (int64_t i = 0; i < n; i++) s *= (uint64_t)x[i];
  return (int64_t)s;
}

double lab_row_prod_f(lab_dtype ct, const void *x, int64_t n) {
  double s = 1;
  for (int64_t i = 0; i < n; i++) s *= AS_F(ct, x, i);
  return s;
}

int64_t lab_row_argext(lab_dtype ct, const void *x, int64_t n, int want_max) {
  int64_t best = 0;
  if (ct == LAB_I64) {
    const int64_t *p = x;
    for (int64_t i = 1; i < n; i++)
      if (want_max ? p[i] > p[best] : p[i] < p[best]) best = i;
    return best;
  }
  double bv = AS_F(ct, x, 0);
  if (bv != bv) return 0;
  for (int64_t i = 1; i < n; i++) {
    double v = AS_F(ct, x, i);
    if (v != v) return i;
    if (want_max ? v > bv : v < bv) {
      bv = v;
      best = i;
    }
  }
  return best;
}

double lab_row_var(lab_dtype ct, const void *x, int64_t n, double correction) {
  double mean = 0;
  for (int64_t i = 0; i < n; i++) mean += AS_F(ct, x, i);
  mean /= (double)n;
  double ss = 0;
  for (int64_t i = 0; i < n; i++) {
    double d = AS_F(ct, x, i) - mean;
    ss += d * d;
  }
  double den = (double)n - correction;
  return den > 0 ? ss / den : NAN;
}

double lab_row_norm(lab_dtype ct, const void *x, int64_t n, double p) {
  double s = 0;
  if (isinf(p)) {
    for (int64_t i = 0; i < n; i++) s = fmax(s, fabs(AS_F(ct, x, i)));
    return s;
  }
  if (p == 2) {
    for (int64_t i = 0; i < n; i++) {
      double v = AS_F(ct, x, i);
      s += v * v;
    }
    return sqrt(s);
  }
  if (p == 1) {
    for (int64_t i = 0; i < n; i++) s += fabs(AS_F(ct, x, i));
    return s;
  }
  for (int64_t i = 0; i < n; i++) s += pow(fabs(AS_F(ct, x, i)), p);
  return pow(s, 1.0 / p);
}

#define SOFTMAX(T, EXP, LOG)                                                                   \
  _Pragma("omp parallel for schedule(static)")                                                 \
  for (int64_t r = 0; r < rows; r++) {                                                         \
    const T *xi = (const T *)x + r * n;                                                        \
    T *o = (T *)out + r * n;                                                                   \
    T m = xi[0];                                                                               \
    for (int64_t i = 1; i < n; i++) m = xi[i] > m ? xi[i] : m;                                 \
    T s = 0; /* in the element type: rows are short and the terms positive, so f32 suffices */ \
    if (want_log) {                                                                            \
      for (int64_t i = 0; i < n; i++) s += EXP(xi[i] - m);                                     \
      T ls = (T)LOG(s);                                                                        \
      for (int64_t i = 0; i < n; i++) o[i] = xi[i] - m - ls;                                   \
    } else {                                                                                   \
      for (int64_t i = 0; i < n; i++) {                                                        \
        o[i] = EXP(xi[i] - m);                                                                 \
        s += o[i];                                                                             \
      }                                                                                        \
      T inv = (T)1 / s;                                                                        \
      for (int64_t i = 0; i < n; i++) o[i] *= inv;                                             \
    }                                                                                          \
  }

void lab_softmax_rows(lab_dtype ct, const void *x, void *out, int64_t rows, int64_t n, int want_log) {
  if (ct == LAB_F32) {
    SOFTMAX(float, lab_expf, logf)
  } else {
    SOFTMAX(double, exp, log)
  }
}

#define SUM_MIDDLE(T)                                                                         \
  do {                                                                                        \
    const T *X = x;                                                                           \
    T *O = out;                                                                               \
    const int64_t block = 512; /* columns per task: the accumulator stays in L1 */            \
    int64_t nblocks = (inner + block - 1) / block;                                            \
    _Pragma("omp parallel for schedule(static)")                                             \
    for (int64_t t = 0; t < outer * nblocks; t++) {                                           \
      int64_t o = t / nblocks, j0 = (t % nblocks) * block;                                    \
      int64_t m = inner - j0 < block ? inner - j0 : block;                                    \
      double acc[512];                                                                        \
      for (int64_t j = 0; j < m; j++) acc[j] = 0;                                             \
      for (int64_t r = 0; r < R; r++) {                                                       \
        const T *row = X + (o * R + r) * inner + j0;                                          \
        for (int64_t j = 0; j < m; j++) acc[j] += row[j];                                     \
      }                                                                                       \
      for (int64_t j = 0; j < m; j++) O[o * inner + j0 + j] = (T)(acc[j] * scale);            \
    }                                                                                         \
  } while (0)

void lab_sum_middle(lab_dtype ct, const void *x, void *out, int64_t outer, int64_t R, int64_t inner,
                    double scale) {
  if (ct == LAB_F64) SUM_MIDDLE(double);
  else SUM_MIDDLE(float);
}
