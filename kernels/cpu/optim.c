/* Fused AdamW. Doing the whole update in one loop reads and writes each of p, m, v once,
 * where the composed tensor ops would make a dozen passes and temporaries. */
#include "optim.h"

#include <math.h>

#define ADAMW(T, SQRT)                                                                        \
  do {                                                                                        \
    T *P = p, *M = m, *V = v;                                                                 \
    const T *G = g;                                                                           \
    const T bc1 = (T)(1.0 - pow(b1, (double)step)), bc2 = (T)(1.0 - pow(b2, (double)step));   \
    const T a = (T)lr, B1 = (T)b1, B2 = (T)b2, E = (T)eps, decay = (T)(1.0 - lr * wd);        \
    const T rbc2 = (T)1 / SQRT(bc2);                                                          \
    _Pragma("omp parallel for schedule(static)")                                             \
    for (int64_t i = 0; i < n; i++) {                                                         \
      T gi = G[i];                                                                            \
      M[i] = B1 * M[i] + ((T)1 - B1) * gi;                                                    \
      V[i] = B2 * V[i] + ((T)1 - B2) * gi * gi;                                               \
      T denom = SQRT(V[i]) * rbc2 + E;                                                        \
      P[i] = P[i] * decay - a * (M[i] / bc1) / denom;                                         \
    }                                                                                         \
  } while (0)

void lab_adamw_kernel(lab_dtype ct, void *p, const void *g, void *m, void *v, int64_t n, double lr,
                      double b1, double b2, double eps, double wd, int64_t step) {
  if (ct == LAB_F64) ADAMW(double, sqrt);
  else ADAMW(float, sqrtf);
}
