/* Fused AdamW. Doing the whole update in one loop reads and writes each of p, m, v once,
 * where the composed tensor ops would make a dozen passes and temporaries. */
#include "nn.h" /* the AdamW kernels' signatures (kernels/fused_ops.h gives the update) */

#include <math.h>
#include <stdlib.h>

/* the update of elements [i0, i1) of one tensor; the constants as the single-tensor kernel's */
#define ADAMW_RANGE(T, SQRT, p, g, m, v, i0, i1, wd)                                          \
  do {                                                                                        \
    T *P = (p), *M = (m), *V = (v);                                                           \
    const T *G = (g);                                                                         \
    const T bc1 = (T)(1.0 - pow(b1, (double)step)), bc2 = (T)(1.0 - pow(b2, (double)step));   \
    const T a = (T)lr, B1 = (T)b1, B2 = (T)b2, E = (T)eps, decay = (T)(1.0 - lr * (wd));      \
    const T rbc2 = (T)1 / SQRT(bc2);                                                          \
    for (int64_t i = (i0); i < (i1); i++) {                                                   \
      T gi = G[i];                                                                            \
      M[i] = B1 * M[i] + ((T)1 - B1) * gi;                                                    \
      V[i] = B2 * V[i] + ((T)1 - B2) * gi * gi;                                               \
      T denom = SQRT(V[i]) * rbc2 + E;                                                        \
      P[i] = P[i] * decay - a * (M[i] / bc1) / denom;                                         \
    }                                                                                         \
  } while (0)

#define CHUNK 16384 /* elements per task */

void lab_adamw_kernel(lab_dtype ct, void *p, const void *g, void *m, void *v, int64_t n, double lr,
                      double b1, double b2, double eps, double wd, int64_t step) {
  int64_t nc = (n + CHUNK - 1) / CHUNK;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < nc; c++) {
    int64_t i0 = c * CHUNK, i1 = i0 + CHUNK < n ? i0 + CHUNK : n;
    if (ct == LAB_F64) ADAMW_RANGE(double, sqrt, p, g, m, v, i0, i1, wd);
    else ADAMW_RANGE(float, sqrtf, p, g, m, v, i0, i1, wd);
  }
}

/* Every tensor's chunks are tasks of one parallel region (one per tensor cost a fork and join
 * each: a GPT has a dozen small tensors per layer). Per element the same arithmetic as above. */
void lab_adamw_multi_kernel(lab_dtype ct, int count, void *const *p, const void *const *g, void *const *m,
                            void *const *v, const int64_t *n, const double *wd, double lr, double b1, double b2,
                            double eps, int64_t step) {
  int64_t tasks = 0;
  for (int t = 0; t < count; t++) tasks += (n[t] + CHUNK - 1) / CHUNK;
  int64_t *first = malloc(sizeof(int64_t) * (size_t)(count + 1)); /* each tensor's first task */
  if (!first) { /* no memory for the task table: one region per tensor */
    for (int t = 0; t < count; t++) lab_adamw_kernel(ct, p[t], g[t], m[t], v[t], n[t], lr, b1, b2, eps, wd[t], step);
    return;
  }
  first[0] = 0;
  for (int t = 0; t < count; t++) first[t + 1] = first[t] + (n[t] + CHUNK - 1) / CHUNK;
#pragma omp parallel for schedule(static)
  for (int64_t task = 0; task < tasks; task++) {
    int lo = 0, hi = count - 1; /* the tensor holding this task: first[t] <= task < first[t + 1] */
    while (lo < hi) {
      int mid = (lo + hi + 1) / 2;
      if (first[mid] <= task) lo = mid;
      else hi = mid - 1;
    }
    int t = lo;
    int64_t i0 = (task - first[t]) * CHUNK, i1 = i0 + CHUNK < n[t] ? i0 + CHUNK : n[t];
    if (ct == LAB_F64) ADAMW_RANGE(double, sqrt, p[t], g[t], m[t], v[t], i0, i1, wd[t]);
    else ADAMW_RANGE(float, sqrtf, p[t], g[t], m[t], v[t], i0, i1, wd[t]);
  }
  free(first);
}
