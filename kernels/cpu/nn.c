/* Fused NN kernels. Each is written once as a macro over the element type T (float or
 * double) and instantiated for both, so the f64 path used by gradient checks runs the very
 * same arithmetic as the f32 path used for training. */
#include "nn.h"
#include "fastmath.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define DISPATCH(ct, NAME, ...)                                                               \
  do {                                                                                        \
    if ((ct) == LAB_F64) NAME##_d(__VA_ARGS__);                                               \
    else NAME##_f(__VA_ARGS__);                                                               \
  } while (0)

/* The norms' backward sums dw (and db) over rows: rows are taken in chunks of NORM_CHUNK, in
 * parallel, each into its own partial sums (double), which are then added in chunk order, so
 * the result is the same for any number of threads. */
#define NORM_CHUNK 32

/* ---- layer norm ----
 * The row sums are double, taken with `omp simd reduction`: the compiler keeps a vector of
 * partial sums (a fixed order for a given build, the same for any number of threads) instead
 * of one serial chain of dependent double adds, which made these kernels latency-bound (at
 * D = 256, ~4 cycles per element and pass). w and b are taken as all-ones / zeros when absent,
 * so every loop is one branch-free vector loop. */
#define LAYER_NORM(T, S)                                                                      \
  static void layer_norm_fwd_##S(const T *x, const T *w, const T *b, T *y, T *mean, T *rstd, \
                                 int64_t rows, int64_t D, double eps) {                      \
    _Pragma("omp parallel for schedule(static)")                                             \
    for (int64_t r = 0; r < rows; r++) {                                                      \
      const T *xr = x + r * D;                                                                \
      T *yr = y + r * D;                                                                      \
      double m = 0, v = 0;                                                                    \
      _Pragma("omp simd reduction(+ : m)")                                                   \
      for (int64_t i = 0; i < D; i++) m += xr[i];                                             \
      m /= (double)D;                                                                         \
      _Pragma("omp simd reduction(+ : v)")                                                   \
      for (int64_t i = 0; i < D; i++) {                                                       \
        double d = xr[i] - m;                                                                 \
        v += d * d;                                                                           \
      }                                                                                       \
      T rs = (T)(1.0 / sqrt(v / (double)D + eps));                                            \
      T mm = (T)m;                                                                            \
      if (w && b) {                                                                           \
        _Pragma("omp simd")                                                                  \
        for (int64_t i = 0; i < D; i++) yr[i] = (xr[i] - mm) * rs * w[i] + b[i];              \
      } else {                                                                                \
        for (int64_t i = 0; i < D; i++) {                                                     \
          T n = (xr[i] - mm) * rs;                                                            \
          yr[i] = n * (w ? w[i] : (T)1) + (b ? b[i] : (T)0);                                  \
        }                                                                                     \
      }                                                                                       \
      mean[r] = mm;                                                                           \
      rstd[r] = rs;                                                                           \
    }                                                                                         \
  }                                                                                           \
  /* one row's sums of g w and g w n; its dw/db terms into pw/pb (the chunk's double partial
   * sums) or, with no memory for those, straight into dw/db */                               \
  static inline void layer_norm_row_##S(const T *gr, const T *xr, const T *w, T m, T rs,      \
                                        double *pw, double *pb, T *dw, T *db, double *s_gw,   \
                                        double *s_gwn, int64_t D) {                           \
    double sum_gw = 0, sum_gwn = 0;                                                           \
    if (w && pw) {                                                                            \
      _Pragma("omp simd reduction(+ : sum_gw, sum_gwn)")                                     \
      for (int64_t i = 0; i < D; i++) {                                                       \
        T n = (xr[i] - m) * rs;                                                               \
        T gw = gr[i] * w[i];                                                                  \
        sum_gw += gw;                                                                         \
        sum_gwn += gw * n;                                                                    \
        pw[i] += gr[i] * n;                                                                   \
        pb[i] += gr[i];                                                                       \
      }                                                                                       \
    } else {                                                                                  \
      for (int64_t i = 0; i < D; i++) {                                                       \
        T n = (xr[i] - m) * rs;                                                               \
        T gw = gr[i] * (w ? w[i] : (T)1);                                                     \
        sum_gw += gw;                                                                         \
        sum_gwn += gw * n;                                                                    \
        if (pw) {                                                                             \
          pw[i] += gr[i] * n;                                                                 \
          pb[i] += gr[i];                                                                     \
        } else {                                                                              \
          if (dw) dw[i] += gr[i] * n;                                                         \
          if (db) db[i] += gr[i];                                                             \
        }                                                                                     \
      }                                                                                       \
    }                                                                                         \
    *s_gw = sum_gw;                                                                           \
    *s_gwn = sum_gwn;                                                                         \
  }                                                                                           \
  static void layer_norm_bwd_##S(const T *g, const T *x, const T *w, const T *mean,           \
                                 const T *rstd, T *dx, T *dw, T *db, int64_t rows, int64_t D) { \
    /* dw, db: sums over rows, taken per chunk of rows in parallel and added in chunk order */ \
    int64_t nch = (rows + NORM_CHUNK - 1) / NORM_CHUNK;                                       \
    double *part = (dw || db) && nch > 0 ? calloc((size_t)(nch * 2 * D), sizeof(double)) : NULL; \
    int serial = (dw || db) && nch > 0 && !part; /* no memory for the partial sums */         \
    /* one region: the rows, then (after the loop's barrier) the partial sums in chunk order */ \
    _Pragma("omp parallel if (!serial)")                                                     \
    {                                                                                         \
    _Pragma("omp for schedule(static)")                                                      \
    for (int64_t c = 0; c < nch; c++) {                                                       \
      double *pw = part ? part + c * 2 * D : NULL, *pb = pw ? pw + D : NULL;                  \
      int64_t r1 = (c + 1) * NORM_CHUNK < rows ? (c + 1) * NORM_CHUNK : rows;                 \
      for (int64_t r = c * NORM_CHUNK; r < r1; r++) {                                         \
        const T *gr = g + r * D, *xr = x + r * D;                                             \
        T m = mean[r], rs = rstd[r];                                                          \
        double sum_gw, sum_gwn;                                                               \
        layer_norm_row_##S(gr, xr, w, m, rs, pw, pb, serial ? dw : NULL, serial ? db : NULL,  \
                           &sum_gw, &sum_gwn, D);                                             \
        if (!dx) continue;                                                                    \
        T a = (T)(sum_gw / (double)D), cc = (T)(sum_gwn / (double)D);                         \
        T *dxr = dx + r * D;                                                                  \
        if (w) {                                                                              \
          _Pragma("omp simd")                                                                \
          for (int64_t i = 0; i < D; i++) dxr[i] = (gr[i] * w[i] - a - (xr[i] - m) * rs * cc) * rs; \
        } else {                                                                              \
          _Pragma("omp simd")                                                                \
          for (int64_t i = 0; i < D; i++) dxr[i] = (gr[i] - a - (xr[i] - m) * rs * cc) * rs;  \
        }                                                                                     \
      }                                                                                       \
    }                                                                                         \
    if (part) {                                                                               \
      _Pragma("omp for schedule(static)")                                                    \
      for (int64_t i = 0; i < D; i++) {                                                       \
        double sw = 0, sb = 0;                                                                \
        for (int64_t c = 0; c < nch; c++) {                                                   \
          sw += part[c * 2 * D + i];                                                          \
          sb += part[c * 2 * D + D + i];                                                      \
        }                                                                                     \
        if (dw) dw[i] += (T)sw;                                                               \
        if (db) db[i] += (T)sb;                                                               \
      }                                                                                       \
    }                                                                                         \
    }                                                                                         \
    free(part);                                                                               \
  }
LAYER_NORM(float, f)
LAYER_NORM(double, d)

void lab_layer_norm_fwd(lab_dtype ct, const void *x, const void *w, const void *b, void *y,
                        void *mean, void *rstd, int64_t rows, int64_t D, double eps) {
  DISPATCH(ct, layer_norm_fwd, x, w, b, y, mean, rstd, rows, D, eps);
}

void lab_layer_norm_bwd(lab_dtype ct, const void *g, const void *x, const void *w,
                        const void *mean, const void *rstd, void *dx, void *dw, void *db,
                        int64_t rows, int64_t D) {
  DISPATCH(ct, layer_norm_bwd, g, x, w, mean, rstd, dx, dw, db, rows, D);
}

/* ---- RMS norm ---- */
#define RMS_NORM(T, S)                                                                        \
  static void rms_norm_fwd_##S(const T *x, const T *w, T *y, T *rstd, int64_t rows,           \
                               int64_t D, double eps) {                                       \
    _Pragma("omp parallel for schedule(static)")                                             \
    for (int64_t r = 0; r < rows; r++) {                                                      \
      const T *xr = x + r * D;                                                                \
      double ss = 0;                                                                          \
      for (int64_t i = 0; i < D; i++) ss += (double)xr[i] * xr[i];                            \
      T rs = (T)(1.0 / sqrt(ss / (double)D + eps));                                           \
      for (int64_t i = 0; i < D; i++) y[r * D + i] = xr[i] * rs * (w ? w[i] : (T)1);          \
      rstd[r] = rs;                                                                           \
    }                                                                                         \
  }                                                                                           \
  static void rms_norm_bwd_##S(const T *g, const T *x, const T *w, const T *rstd, T *dx,      \
                               T *dw, int64_t rows, int64_t D) {                              \
    /* dw: a sum over rows, taken per chunk of rows in parallel and added in chunk order */   \
    int64_t nch = (rows + NORM_CHUNK - 1) / NORM_CHUNK;                                       \
    double *part = dw && nch > 0 ? calloc((size_t)(nch * D), sizeof(double)) : NULL;          \
    int serial = dw && nch > 0 && !part;                                                      \
    _Pragma("omp parallel for schedule(static) if (!serial)")                                 \
    for (int64_t c = 0; c < nch; c++) {                                                       \
      double *pw = part ? part + c * D : NULL;                                                \
      int64_t r1 = (c + 1) * NORM_CHUNK < rows ? (c + 1) * NORM_CHUNK : rows;                 \
      for (int64_t r = c * NORM_CHUNK; r < r1; r++) {                                         \
        const T *gr = g + r * D, *xr = x + r * D;                                             \
        T rs = rstd[r];                                                                       \
        double dot = 0;                                                                       \
        for (int64_t i = 0; i < D; i++) {                                                     \
          T gw = gr[i] * (w ? w[i] : (T)1);                                                   \
          dot += gw * xr[i];                                                                  \
          if (pw) pw[i] += gr[i] * xr[i] * rs;                                                \
          else if (serial) dw[i] += gr[i] * xr[i] * rs;                                       \
        }                                                                                     \
        if (!dx) continue;                                                                    \
        T cc = (T)(dot / (double)D) * rs * rs * rs;                                           \
        for (int64_t i = 0; i < D; i++) dx[r * D + i] = gr[i] * (w ? w[i] : (T)1) * rs - xr[i] * cc; \
      }                                                                                       \
    }                                                                                         \
    if (!part) return;                                                                        \
    _Pragma("omp parallel for schedule(static)")                                             \
    for (int64_t i = 0; i < D; i++) {                                                         \
      double sw = 0;                                                                          \
      for (int64_t c = 0; c < nch; c++) sw += part[c * D + i];                                \
      dw[i] += (T)sw;                                                                         \
    }                                                                                         \
    free(part);                                                                               \
  }
RMS_NORM(float, f)
RMS_NORM(double, d)

void lab_rms_norm_fwd(lab_dtype ct, const void *x, const void *w, void *y, void *rstd,
                      int64_t rows, int64_t D, double eps) {
  DISPATCH(ct, rms_norm_fwd, x, w, y, rstd, rows, D, eps);
}

void lab_rms_norm_bwd(lab_dtype ct, const void *g, const void *x, const void *w,
                      const void *rstd, void *dx, void *dw, int64_t rows, int64_t D) {
  DISPATCH(ct, rms_norm_bwd, g, x, w, rstd, dx, dw, rows, D);
}

/* ---- activations ---- */
#define ACT_BLOCK 4096 /* elements per task of the backward */
/* gelu_tanh(x) = x/2 (1 + tanh(u)), u = k (x + 0.044715 x^3), k = sqrt(2/pi); written as
 * x sigmoid(2u) so one exp per element serves. One loop per kind keeps each vectorisable. */
#define ACT(T, S, EXP, ERF)                                                                   \
  static void act_fwd_##S(lab_act_kind kind, const T *x, T *y, int64_t n) {                   \
    const T k2 = (T)(2 * 0.7978845608028654), c = (T)0.044715;                                \
    if (kind == LAB_ACT_GELU) {                                                               \
      _Pragma("omp parallel for schedule(static)")                                           \
      for (int64_t i = 0; i < n; i++) y[i] = (T)0.5 * x[i] * ((T)1 + ERF(x[i] * (T)0.7071067811865476)); \
    } else if (kind == LAB_ACT_GELU_TANH) {                                                   \
      _Pragma("omp parallel for simd schedule(static)")                                      \
      for (int64_t i = 0; i < n; i++) {                                                       \
        T v = x[i];                                                                           \
        y[i] = v / ((T)1 + EXP(-k2 * (v + c * v * v * v)));                                   \
      }                                                                                       \
    } else {                                                                                  \
      _Pragma("omp parallel for simd schedule(static)")                                      \
      for (int64_t i = 0; i < n; i++) y[i] = x[i] / ((T)1 + EXP(-x[i]));                     \
    }                                                                                         \
  }                                                                                           \
  /* the backward of n elements on the calling thread (vector loops) */                      \
  static void act_bwd_row_##S(lab_act_kind kind, const T *g, const T *x, T *dx, int64_t n) {  \
    const T k = (T)0.7978845608028654, c = (T)0.044715;                                       \
    if (kind == LAB_ACT_GELU) {                                                               \
      for (int64_t i = 0; i < n; i++) {                                                       \
        T v = x[i];                                                                           \
        T cdf = (T)0.5 * ((T)1 + ERF(v * (T)0.7071067811865476));                             \
        T pdf = EXP((T)-0.5 * v * v) * (T)0.3989422804014327;                                 \
        dx[i] = g[i] * (cdf + v * pdf);                                                       \
      }                                                                                       \
    } else if (kind == LAB_ACT_GELU_TANH) {                                                   \
      /* with s = sigmoid(2u): d/dx = s + x s (1 - s) 2 k (1 + 3 c x^2) */                    \
      _Pragma("omp simd")                                                                    \
      for (int64_t i = 0; i < n; i++) {                                                       \
        T v = x[i];                                                                           \
        T s = (T)1 / ((T)1 + EXP((T)-2 * k * (v + c * v * v * v)));                           \
        dx[i] = g[i] * (s + v * s * ((T)1 - s) * (T)2 * k * ((T)1 + (T)3 * c * v * v));       \
      }                                                                                       \
    } else {                                                                                  \
      _Pragma("omp simd")                                                                    \
      for (int64_t i = 0; i < n; i++) {                                                       \
        T v = x[i], s = (T)1 / ((T)1 + EXP(-v));                                              \
        dx[i] = g[i] * s * ((T)1 + v * ((T)1 - s));                                           \
      }                                                                                       \
    }                                                                                         \
  }                                                                                           \
  /* in parallel over blocks of ACT_BLOCK elements */                                        \
  static void act_bwd_##S(lab_act_kind kind, const T *g, const T *x, T *dx, int64_t n) {      \
    int64_t nb = (n + ACT_BLOCK - 1) / ACT_BLOCK;                                             \
    _Pragma("omp parallel for schedule(static)")                                             \
    for (int64_t b = 0; b < nb; b++) {                                                        \
      int64_t i0 = b * ACT_BLOCK, m = n - i0 < ACT_BLOCK ? n - i0 : ACT_BLOCK;                \
      act_bwd_row_##S(kind, g + i0, x + i0, dx + i0, m);                                      \
    }                                                                                         \
  }
ACT(float, f, lab_expf, erff)
ACT(double, d, exp, erf)

/* The activation's backward with the column sums of its result (the preceding Linear's bias
 * gradient) in the same pass: rows in chunks of NORM_CHUNK, in parallel, each chunk's column
 * sums in double partials added in chunk order (the same result for any number of threads),
 * so dx is summed while it is in cache instead of being read again by a separate reduction. */
#define ACT_BWD_BIAS(T, S)                                                                    \
  static void act_bwd_bias_##S(lab_act_kind kind, const T *g, const T *x, T *dx, T *db,       \
                               int64_t rows, int64_t cols) {                                  \
    int64_t nch = (rows + NORM_CHUNK - 1) / NORM_CHUNK;                                       \
    double *part = nch > 0 && cols > 0 ? calloc((size_t)(nch * cols), sizeof(double)) : NULL; \
    if (!part) { /* no memory for the partial sums (or nothing to sum): two passes */         \
      act_bwd_##S(kind, g, x, dx, rows * cols);                                               \
      for (int64_t j = 0; j < cols; j++) {                                                    \
        double s = 0;                                                                         \
        for (int64_t r = 0; r < rows; r++) s += dx[r * cols + j];                             \
        db[j] = (T)s;                                                                         \
      }                                                                                       \
      return;                                                                                 \
    }                                                                                         \
    _Pragma("omp parallel") /* one region: the rows, then the column sums in chunk order */  \
    {                                                                                         \
    _Pragma("omp for schedule(static)")                                                      \
    for (int64_t c = 0; c < nch; c++) {                                                       \
      double *pc = part + c * cols;                                                           \
      int64_t r1 = (c + 1) * NORM_CHUNK < rows ? (c + 1) * NORM_CHUNK : rows;                 \
      for (int64_t r = c * NORM_CHUNK; r < r1; r++) {                                         \
        act_bwd_row_##S(kind, g + r * cols, x + r * cols, dx + r * cols, cols);               \
        const T *d = dx + r * cols;                                                           \
        _Pragma("omp simd")                                                                  \
        for (int64_t j = 0; j < cols; j++) pc[j] += d[j];                                     \
      }                                                                                       \
    }                                                                                         \
    _Pragma("omp for schedule(static)")                                                      \
    for (int64_t j = 0; j < cols; j++) {                                                      \
      double s = 0;                                                                           \
      for (int64_t c = 0; c < nch; c++) s += part[c * cols + j];                              \
      db[j] = (T)s;                                                                           \
    }                                                                                         \
    }                                                                                         \
    free(part);                                                                               \
  }
ACT_BWD_BIAS(float, f)
ACT_BWD_BIAS(double, d)

void lab_act_fwd(lab_dtype ct, lab_act_kind kind, const void *x, void *y, int64_t n) {
  DISPATCH(ct, act_fwd, kind, x, y, n);
}

void lab_act_bwd(lab_dtype ct, lab_act_kind kind, const void *g, const void *x, void *dx, int64_t n) {
  DISPATCH(ct, act_bwd, kind, g, x, dx, n);
}

void lab_act_bwd_bias(lab_dtype ct, lab_act_kind kind, const void *g, const void *x, void *dx, void *db,
                      int64_t rows, int64_t cols) {
  DISPATCH(ct, act_bwd_bias, kind, g, x, dx, db, rows, cols);
}

/* ---- cross-entropy ---- */
/* loss_r = lse - (1 - s) x[target] - s mean(x) */
#define XENT(T, S, EXP, LOG)                                                                  \
  static int64_t xent_fwd_##S(const T *x, const int64_t *tg, T *loss, T *lse, int64_t N,      \
                              int64_t C, int64_t ignore, double s) {                          \
    int64_t count = 0;                                                                        \
    _Pragma("omp parallel for schedule(static) reduction(+:count)")                          \
    for (int64_t r = 0; r < N; r++) {                                                         \
      const T *xr = x + r * C;                                                                \
      T m = xr[0];                                                                            \
      _Pragma("omp simd reduction(max : m)")                                                 \
      for (int64_t i = 1; i < C; i++) m = xr[i] > m ? xr[i] : m;                              \
      double se = 0, sx = 0; /* vector partial sums (omp simd), not one serial chain */        \
      _Pragma("omp simd reduction(+ : se, sx)")                                              \
      for (int64_t i = 0; i < C; i++) {                                                       \
        se += EXP(xr[i] - m);                                                                 \
        sx += xr[i];                                                                          \
      }                                                                                       \
      T l = m + (T)LOG(se);                                                                   \
      lse[r] = l;                                                                             \
      if (tg[r] == ignore) {                                                                  \
        loss[r] = 0;                                                                          \
        continue;                                                                             \
      }                                                                                       \
      count++;                                                                                \
      loss[r] = (T)(l - (1.0 - s) * xr[tg[r]] - s * sx / (double)C);                          \
    }                                                                                         \
    return count;                                                                             \
  }                                                                                           \
  static void xent_bwd_##S(const T *x, const int64_t *tg, const T *lse, T *dx, int64_t N,     \
                           int64_t C, int64_t ignore, double s, double scale) {               \
    _Pragma("omp parallel for schedule(static)")                                             \
    for (int64_t r = 0; r < N; r++) {                                                         \
      const T *xr = x + r * C;                                                                \
      T *dr = dx + r * C;                                                                     \
      if (tg[r] == ignore) {                                                                  \
        memset(dr, 0, sizeof(T) * (size_t)C);                                                 \
        continue;                                                                             \
      }                                                                                       \
      T sc = (T)scale, off = (T)(s / (double)C), l = lse[r];                                  \
      for (int64_t i = 0; i < C; i++) dr[i] = (EXP(xr[i] - l) - off) * sc;                    \
      dr[tg[r]] -= (T)(1.0 - s) * sc;                                                         \
    }                                                                                         \
  }
XENT(float, f, lab_expf, log)
XENT(double, d, exp, log)

int64_t lab_cross_entropy_fwd(lab_dtype ct, const void *logits, const int64_t *target,
                              void *loss, void *lse, int64_t N, int64_t C, int64_t ignore_index,
                              double smoothing) {
  if (ct == LAB_F64) return xent_fwd_d(logits, target, loss, lse, N, C, ignore_index, smoothing);
  return xent_fwd_f(logits, target, loss, lse, N, C, ignore_index, smoothing);
}

void lab_cross_entropy_bwd(lab_dtype ct, const void *logits, const int64_t *target,
                           const void *lse, void *dlogits, int64_t N, int64_t C,
                           int64_t ignore_index, double smoothing, double scale) {
  DISPATCH(ct, xent_bwd, logits, target, lse, dlogits, N, C, ignore_index, smoothing, scale);
}

/* ---- embedding ---- */
/* The id check (fused_ops.h): serial, the first bad id is the lowest position, as on a GPU */
void lab_ids_check(const int64_t *ids, int64_t *out, int64_t n, int64_t limit, int64_t allowed, int64_t *bad) {
  for (int64_t i = 0; i < n; i++) {
    int64_t v = ids[i];
    int ok = (v >= 0 && v < limit) || v == allowed;
    if (!ok && bad[0] == 0) {
      bad[0] = i + 1;
      bad[1] = v;
    }
    if (out) out[i] = ok ? v : allowed;
  }
}

void lab_embedding_fwd(lab_dtype ct, const void *weight, const int64_t *idx, void *out,
                       int64_t n, int64_t D) {
  size_t row = lab_dtype_size(ct) * (size_t)D;
  if (row == 0) return; /* a [V, 0] weight has no data pointer to copy from (UBSan: memcpy from NULL) */
  for (int64_t i = 0; i < n; i++) memcpy((char *)out + (size_t)i * row, (const char *)weight + (size_t)idx[i] * row, row);
}

/* In parallel over blocks of columns: each element still adds its rows in id order, so the
 * result is the serial one for any number of threads (repeated ids accumulate). */
#define EMB_BWD(T, S)                                                                         \
  static void emb_bwd_##S(const T *g, const int64_t *idx, T *dw, int64_t n, int64_t D) {      \
    const int64_t block = 64;                                                                 \
    _Pragma("omp parallel for schedule(static)")                                             \
    for (int64_t j0 = 0; j0 < D; j0 += block) {                                               \
      int64_t j1 = j0 + block < D ? j0 + block : D;                                           \
      for (int64_t i = 0; i < n; i++) {                                                       \
        T *row = dw + idx[i] * D;                                                             \
        const T *gr = g + i * D;                                                              \
        for (int64_t j = j0; j < j1; j++) row[j] += gr[j];                                    \
      }                                                                                       \
    }                                                                                         \
  }
EMB_BWD(float, f)
EMB_BWD(double, d)

void lab_embedding_bwd(lab_dtype ct, const void *g, const int64_t *idx, void *dweight,
                       int64_t n, int64_t D) {
  DISPATCH(ct, emb_bwd, g, idx, dweight, n, D);
}

/* ---- attention helpers ---- */
#define MASK(T, S)                                                                            \
  static void causal_mask_##S(T *sc, int64_t batches, int64_t Tq, int64_t Sk) {               \
    int64_t shift = Sk - Tq;                                                                  \
    for (int64_t b = 0; b < batches; b++)                                                     \
      for (int64_t t = 0; t < Tq; t++) {                                                      \
        T *row = sc + (b * Tq + t) * Sk;                                                      \
        /* T > S: the first T - S queries see no key (and s must not start below 0) */      \
        for (int64_t s = t + shift + 1 < 0 ? 0 : t + shift + 1; s < Sk; s++) row[s] = (T)-INFINITY; \
      }                                                                                       \
  }                                                                                           \
  static void softmax_bwd_rows_##S(const T *P, T *dP, int64_t rows, int64_t Sk, double scale) { \
    _Pragma("omp parallel for schedule(static)")                                             \
    for (int64_t r = 0; r < rows; r++) {                                                      \
      const T *p = P + r * Sk;                                                                \
      T *d = dP + r * Sk;                                                                     \
      double dot = 0;                                                                         \
      for (int64_t i = 0; i < Sk; i++) dot += (double)d[i] * p[i];                            \
      T dt = (T)dot, sc = (T)scale;                                                           \
      for (int64_t i = 0; i < Sk; i++) d[i] = p[i] * (d[i] - dt) * sc;                        \
    }                                                                                         \
  }
MASK(float, f)
MASK(double, d)

void lab_causal_mask(lab_dtype ct, void *scores, int64_t batches, int64_t T, int64_t S) {
  DISPATCH(ct, causal_mask, scores, batches, T, S);
}

void lab_softmax_bwd_rows(lab_dtype ct, const void *P, void *dP, int64_t rows, int64_t S,
                          double scale) {
  DISPATCH(ct, softmax_bwd_rows, P, dP, rows, S, scale);
}
