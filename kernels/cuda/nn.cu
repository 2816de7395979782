// The fused NN kernels, one block per row where a row is reduced (norms, cross-entropy,
// softmax backward) and one thread per element elsewhere; the formulas are those of
// kernels/cpu/nn.c, with row sums in double. Weight gradients of the norms are summed over
// rows by one thread per column (no atomics, so they are deterministic).
#include <math.h>

#include "common.cuh"

LAB_NS_BEGIN

#define THREADS 256

static unsigned row_blocks(int64_t rows) { return (unsigned)(rows < 65535LL * 32 ? (rows > 0 ? rows : 1) : 65535LL * 32); }

template <typename T>
__global__ void layer_norm_fwd_k(const T *x, const T *w, const T *b, T *y, T *mean, T *rstd, int64_t rows, int64_t D,
                                 double eps) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *xr = x + r * D;
    double m = 0, v = 0;
    for (int64_t i = threadIdx.x; i < D; i += blockDim.x) m += xr[i];
    m = lab_block_sum<double>(m) / (double)D;
    for (int64_t i = threadIdx.x; i < D; i += blockDim.x) {
      double d = xr[i] - m;
      v += d * d;
    }
    v = lab_block_sum<double>(v);
    T rs = (T)(1.0 / sqrt(v / (double)D + eps)), mm = (T)m;
    for (int64_t i = threadIdx.x; i < D; i += blockDim.x)
      y[r * D + i] = (xr[i] - mm) * rs * (w ? w[i] : (T)1) + (b ? b[i] : (T)0);
    if (threadIdx.x == 0) {
      mean[r] = mm;
      rstd[r] = rs;
    }
  }
}

template <typename T>
__global__ void layer_norm_bwd_dx_k(const T *g, const T *x, const T *w, const T *mean, const T *rstd, T *dx,
                                    int64_t rows, int64_t D) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *gr = g + r * D, *xr = x + r * D;
    T m = mean[r], rs = rstd[r];
    double sgw = 0, sgwn = 0;
    for (int64_t i = threadIdx.x; i < D; i += blockDim.x) {
      T n = (xr[i] - m) * rs, gw = gr[i] * (w ? w[i] : (T)1);
      sgw += gw;
      sgwn += gw * n;
    }
    sgw = lab_block_sum<double>(sgw);
    sgwn = lab_block_sum<double>(sgwn);
    T a = (T)(sgw / (double)D), c = (T)(sgwn / (double)D);
    for (int64_t i = threadIdx.x; i < D; i += blockDim.x) {
      T n = (xr[i] - m) * rs, gw = gr[i] * (w ? w[i] : (T)1);
      dx[r * D + i] = (gw - a - n * c) * rs;
    }
  }
}

// dw[i] += sum_r g x_hat (layer norm: x_hat = (x - mean) rstd; rms: x rstd); db[i] += sum_r g
template <typename T>
__global__ void norm_bwd_params_k(const T *g, const T *x, const T *mean, const T *rstd, T *dw, T *db, int64_t rows,
                                  int64_t D) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < D; i += (int64_t)gridDim.x * blockDim.x) {
    double sw = 0, sb = 0;
    for (int64_t r = 0; r < rows; r++) {
      T gi = g[r * D + i];
      T n = mean ? (x[r * D + i] - mean[r]) * rstd[r] : x[r * D + i] * rstd[r];
      sw += gi * n;
      sb += gi;
    }
    if (dw) dw[i] += (T)sw;
    if (db) db[i] += (T)sb;
  }
}

// The same over many blocks (one thread per column over every row put a [8192, 768] weight
// gradient on 3 blocks): thread (chunk, column) sums its rows into part (dw's sums, then db's),
// and a second launch adds each column's chunks in order, so the sums depend on the shape alone.
template <typename T>
__global__ void norm_bwd_params_partial_k(const T *g, const T *x, const T *mean, const T *rstd, double *part,
                                          int64_t rows, int64_t D, int chunks) {
  for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < D * chunks; t += (int64_t)gridDim.x * blockDim.x) {
    int64_t c = t / D, i = t % D, lo = rows * c / chunks, hi = rows * (c + 1) / chunks;
    double sw = 0, sb = 0;
    for (int64_t r = lo; r < hi; r++) {
      T gi = g[r * D + i];
      T n = mean ? (x[r * D + i] - mean[r]) * rstd[r] : x[r * D + i] * rstd[r];
      sw += gi * n;
      sb += gi;
    }
    part[c * 2 * D + i] = sw;
    part[c * 2 * D + D + i] = sb;
  }
}

template <typename T>
__global__ void norm_bwd_params_combine_k(const double *part, T *dw, T *db, int64_t D, int chunks) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < D; i += (int64_t)gridDim.x * blockDim.x) {
    double sw = 0, sb = 0;
    for (int c = 0; c < chunks; c++) sw += part[c * 2 * D + i], sb += part[c * 2 * D + D + i];
    if (dw) dw[i] += (T)sw;
    if (db) db[i] += (T)sb;
  }
}

// row chunks so that columns x chunks fill ~2 x 132 SMs of 2048 threads, each chunk >= 16 rows
static int norm_chunks(int64_t rows, int64_t D) {
  int64_t want = D > 0 ? (264LL * 2048 + D - 1) / D : 1, most = rows / 16;
  int64_t c = want < most ? want : most;
  return c < 2 ? 1 : (int)(c > 1024 ? 1024 : c);
}

extern "C" size_t LAB_CU(norm_bwd_work_bytes)(int64_t rows, int64_t D) {
  int c = rows > 0 && D > 0 ? norm_chunks(rows, D) : 1;
  return c > 1 ? (size_t)(2 * D * c) * sizeof(double) : 0;
}

// dw, db from the chunked kernels when work is given (and the shape wants them), else the loop
template <typename T>
static void norm_bwd_params(const T *g, const T *x, const T *mean, const T *rstd, T *dw, T *db, int64_t rows, int64_t D,
                            void *work, cudaStream_t s) {
  int chunks = work ? norm_chunks(rows, D) : 1;
  if (chunks < 2) {
    lab_launch<norm_bwd_params_k<T>>(lab_blocks(D, THREADS), THREADS, 0, s, g, x, mean, rstd, dw, db, rows, D);
    return;
  }
  double *part = (double *)work;
  lab_launch<norm_bwd_params_partial_k<T>>(lab_blocks(D * chunks, THREADS), THREADS, 0, s, g, x, mean, rstd, part, rows,
                                           D, chunks);
  lab_launch<norm_bwd_params_combine_k<T>>(lab_blocks(D, THREADS), THREADS, 0, s, (const double *)part, dw, db, D, chunks);
}

template <typename T>
__global__ void rms_norm_fwd_k(const T *x, const T *w, T *y, T *rstd, int64_t rows, int64_t D, double eps) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *xr = x + r * D;
    double ss = 0;
    for (int64_t i = threadIdx.x; i < D; i += blockDim.x) ss += (double)xr[i] * xr[i];
    ss = lab_block_sum<double>(ss);
    T rs = (T)(1.0 / sqrt(ss / (double)D + eps));
    for (int64_t i = threadIdx.x; i < D; i += blockDim.x) y[r * D + i] = xr[i] * rs * (w ? w[i] : (T)1);
    if (threadIdx.x == 0) rstd[r] = rs;
  }
}

template <typename T>
__global__ void rms_norm_bwd_dx_k(const T *g, const T *x, const T *w, const T *rstd, T *dx, int64_t rows, int64_t D) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *gr = g + r * D, *xr = x + r * D;
    T rs = rstd[r];
    double dot = 0;
    for (int64_t i = threadIdx.x; i < D; i += blockDim.x) dot += gr[i] * (w ? w[i] : (T)1) * xr[i];
    dot = lab_block_sum<double>(dot);
    T c = (T)(dot / (double)D) * rs * rs * rs;
    for (int64_t i = threadIdx.x; i < D; i += blockDim.x) dx[r * D + i] = gr[i] * (w ? w[i] : (T)1) * rs - xr[i] * c;
  }
}

#define P(T_, p) ((T_)(p))

extern "C" int LAB_CU(layer_norm_fwd)(lab_dtype ct, const void *x, const void *w, const void *b, void *y, void *mean,
                                     void *rstd, int64_t rows, int64_t D, double eps, lab_cuda_stream s) {
  if (rows <= 0) return 0;
  if (ct == LAB_F64)
    lab_launch<layer_norm_fwd_k<double>>(row_blocks(rows), THREADS, 0, s, P(const double *, x), P(const double *, w),
        P(const double *, b), P(double *, y), P(double *, mean), P(double *, rstd), rows, D, eps);
  else
    lab_launch<layer_norm_fwd_k<float>>(row_blocks(rows), THREADS, 0, s, P(const float *, x), P(const float *, w),
        P(const float *, b), P(float *, y), P(float *, mean), P(float *, rstd), rows, D, eps);
  return (int)cudaGetLastError();
}

extern "C" int LAB_CU(layer_norm_bwd)(lab_dtype ct, const void *g, const void *x, const void *w, const void *mean,
                                     const void *rstd, void *dx, void *dw, void *db, int64_t rows, int64_t D,
                                     void *work, lab_cuda_stream s) {
  if (rows <= 0) return 0;
  if (ct == LAB_F64) {
    if (dx) lab_launch<layer_norm_bwd_dx_k<double>>(row_blocks(rows), THREADS, 0, s, P(const double *, g), P(const double *, x),
        P(const double *, w), P(const double *, mean), P(const double *, rstd), P(double *, dx), rows, D);
    if (dw || db) norm_bwd_params<double>(P(const double *, g), P(const double *, x), P(const double *, mean), P(const double *, rstd),
        P(double *, dw), P(double *, db), rows, D, work, s);
  } else {
    if (dx) lab_launch<layer_norm_bwd_dx_k<float>>(row_blocks(rows), THREADS, 0, s, P(const float *, g), P(const float *, x),
        P(const float *, w), P(const float *, mean), P(const float *, rstd), P(float *, dx), rows, D);
    if (dw || db) norm_bwd_params<float>(P(const float *, g), P(const float *, x), P(const float *, mean), P(const float *, rstd),
        P(float *, dw), P(float *, db), rows, D, work, s);
  }
  return (int)cudaGetLastError();
}

extern "C" int LAB_CU(rms_norm_fwd)(lab_dtype ct, const void *x, const void *w, void *y, void *rstd, int64_t rows,
                                   int64_t D, double eps, lab_cuda_stream s) {
  if (rows <= 0) return 0;
  if (ct == LAB_F64)
    lab_launch<rms_norm_fwd_k<double>>(row_blocks(rows), THREADS, 0, s, P(const double *, x), P(const double *, w),
        P(double *, y), P(double *, rstd), rows, D, eps);
  else
    lab_launch<rms_norm_fwd_k<float>>(row_blocks(rows), THREADS, 0, s, P(const float *, x), P(const float *, w),
        P(float *, y), P(float *, rstd), rows, D, eps);
  return (int)cudaGetLastError();
}

extern "C" int LAB_CU(rms_norm_bwd)(lab_dtype ct, const void *g, const void *x, const void *w, const void *rstd,
                                   void *dx, void *dw, int64_t rows, int64_t D, void *work, lab_cuda_stream s) {
  if (rows <= 0) return 0;
  if (ct == LAB_F64) {
    if (dx) lab_launch<rms_norm_bwd_dx_k<double>>(row_blocks(rows), THREADS, 0, s, P(const double *, g), P(const double *, x),
        P(const double *, w), P(const double *, rstd), P(double *, dx), rows, D);
    if (dw) norm_bwd_params<double>(P(const double *, g), P(const double *, x), nullptr, P(const double *, rstd), P(double *, dw), nullptr,
        rows, D, work, s);
  } else {
    if (dx) lab_launch<rms_norm_bwd_dx_k<float>>(row_blocks(rows), THREADS, 0, s, P(const float *, g), P(const float *, x),
        P(const float *, w), P(const float *, rstd), P(float *, dx), rows, D);
    if (dw) norm_bwd_params<float>(P(const float *, g), P(const float *, x), nullptr, P(const float *, rstd), P(float *, dw), nullptr,
        rows, D, work, s);
  }
  return (int)cudaGetLastError();
}

// ---- activations ----
template <typename T>
__global__ void act_k(int kind, int backward, const T *g, const T *x, T *y, int64_t n) {
  const T k = (T)0.7978845608028654, c = (T)0.044715;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    T v = x[i], r;
    if (kind == LAB_ACT_GELU) {
      T cdf = (T)0.5 * ((T)1 + erf(v * (T)0.7071067811865476));
      r = backward ? g[i] * (cdf + v * exp((T)-0.5 * v * v) * (T)0.3989422804014327) : v * cdf;
    } else if (kind == LAB_ACT_GELU_TANH) {
      T s = (T)1 / ((T)1 + exp((T)-2 * k * (v + c * v * v * v)));
      r = backward ? g[i] * (s + v * s * ((T)1 - s) * (T)2 * k * ((T)1 + (T)3 * c * v * v)) : v * s;
    } else {
      T s = (T)1 / ((T)1 + exp(-v));
      r = backward ? g[i] * s * ((T)1 + v * ((T)1 - s)) : v * s;
    }
    y[i] = r;
  }
}

static int act(lab_dtype ct, lab_act_kind kind, int backward, const void *g, const void *x, void *y, int64_t n,
               lab_cuda_stream s) {
  if (n <= 0) return 0;
  if (ct == LAB_F64)
    lab_launch<act_k<double>>(lab_blocks(n, THREADS), THREADS, 0, s, (int)kind, backward, P(const double *, g),
                                                             P(const double *, x), P(double *, y), n);
  else
    lab_launch<act_k<float>>(lab_blocks(n, THREADS), THREADS, 0, s, (int)kind, backward, P(const float *, g),
                                                            P(const float *, x), P(float *, y), n);
  return (int)cudaGetLastError();
}

extern "C" int LAB_CU(act_fwd)(lab_dtype ct, lab_act_kind kind, const void *x, void *y, int64_t n, lab_cuda_stream s) {
  return act(ct, kind, 0, nullptr, x, y, n, s);
}

extern "C" int LAB_CU(act_bwd)(lab_dtype ct, lab_act_kind kind, const void *g, const void *x, void *dx, int64_t n,
                              lab_cuda_stream s) {
  return act(ct, kind, 1, g, x, dx, n, s);
}

// ---- cross-entropy: one block per row ----
template <typename T>
__global__ void xent_fwd_k(const T *x, const long long *tg, T *loss, T *lse, int64_t N, int64_t C, long long ignore,
                           double sm, unsigned long long *count) {
  for (int64_t r = blockIdx.x; r < N; r += gridDim.x) {
    const T *xr = x + r * C;
    double m = -INFINITY;
    for (int64_t i = threadIdx.x; i < C; i += blockDim.x) m = fmax(m, (double)xr[i]);
    m = lab_block_max<double>(m);
    double se = 0, sx = 0;
    for (int64_t i = threadIdx.x; i < C; i += blockDim.x) {
      se += exp((double)xr[i] - m);
      sx += xr[i];
    }
    se = lab_block_sum<double>(se);
    sx = lab_block_sum<double>(sx);
    if (threadIdx.x == 0) {
      T l = (T)(m + log(se));
      lse[r] = l;
      if (tg[r] == ignore) loss[r] = 0;
      else {
        loss[r] = (T)((double)l - (1.0 - sm) * xr[tg[r]] - sm * sx / (double)C);
        atomicAdd(count, 1ull);
      }
    }
  }
}

template <typename T>
__global__ void xent_bwd_k(const T *x, const long long *tg, const T *lse, T *dx, int64_t N, int64_t C, long long ignore,
                           double sm, double scale) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < N * C; i += (int64_t)gridDim.x * blockDim.x) {
    int64_t r = i / C, c = i % C;
    if (tg[r] == ignore) {
      dx[i] = 0;
      continue;
    }
    T sc = (T)scale, off = (T)(sm / (double)C);
    T d = (exp(x[i] - lse[r]) - off) * sc;
    if (c == tg[r]) d -= (T)(1.0 - sm) * sc;
    dx[i] = d;
  }
}

extern "C" int LAB_CU(xent_fwd)(lab_dtype ct, const void *logits, const int64_t *target, void *loss, void *lse,
                               int64_t N, int64_t C, int64_t ignore_index, double smoothing, int64_t *count_out,
                               lab_cuda_stream s) {
  cudaMemsetAsync(count_out, 0, sizeof(int64_t), s);
  if (N <= 0) return (int)cudaGetLastError();
  unsigned long long *cnt = (unsigned long long *)count_out;
  if (ct == LAB_F64)
    lab_launch<xent_fwd_k<double>>(row_blocks(N), THREADS, 0, s, P(const double *, logits), P(const long long *, target),
        P(double *, loss), P(double *, lse), N, C, ignore_index, smoothing, cnt);
  else
    lab_launch<xent_fwd_k<float>>(row_blocks(N), THREADS, 0, s, P(const float *, logits), P(const long long *, target),
        P(float *, loss), P(float *, lse), N, C, ignore_index, smoothing, cnt);
  return (int)cudaGetLastError();
}

extern "C" int LAB_CU(xent_bwd)(lab_dtype ct, const void *logits, const int64_t *target, const void *lse, void *dlogits,
                               int64_t N, int64_t C, int64_t ignore_index, double smoothing, double scale,
                               lab_cuda_stream s) {
  if (N * C <= 0) return 0;
  if (ct == LAB_F64)
    lab_launch<xent_bwd_k<double>>(lab_blocks(N * C, THREADS), THREADS, 0, s, P(const double *, logits),
        P(const long long *, target), P(const double *, lse), P(double *, dlogits), N, C, ignore_index, smoothing, scale);
  else
    lab_launch<xent_bwd_k<float>>(lab_blocks(N * C, THREADS), THREADS, 0, s, P(const float *, logits),
        P(const long long *, target), P(const float *, lse), P(float *, dlogits), N, C, ignore_index, smoothing, scale);
  return (int)cudaGetLastError();
}

// ---- id checks: a device-side assert (fused_ops.h ids_check), one block, as ids are a step's
// tokens; the lowest bad position wins, as in the cpu kernel ----
__global__ void ids_check_k(const long long *ids, long long *out, int64_t n, int64_t limit, long long allowed,
                            long long *bad) {
  __shared__ long long first[THREADS];
  long long mine = n;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    long long v = ids[i];
    bool ok = (v >= 0 && v < limit) || v == allowed;
    if (!ok && i < mine) mine = i;
    if (out) out[i] = ok ? v : allowed;
  }
  first[threadIdx.x] = mine;
  __syncthreads();
  for (int h = blockDim.x / 2; h > 0; h >>= 1) {
    if (threadIdx.x < h && first[threadIdx.x + h] < first[threadIdx.x]) first[threadIdx.x] = first[threadIdx.x + h];
    __syncthreads();
  }
  if (threadIdx.x == 0 && first[0] < n && bad[0] == 0) {
    bad[0] = first[0] + 1;
    bad[1] = ids[first[0]];
  }
}

extern "C" int LAB_CU(ids_check)(const int64_t *ids, int64_t *out, int64_t n, int64_t limit, int64_t allowed,
                                int64_t *bad, lab_cuda_stream s) {
  if (n <= 0) return 0;
  lab_launch<ids_check_k>(1, THREADS, 0, s, P(const long long *, ids), P(long long *, out), n, limit,
                          (long long)allowed, P(long long *, bad));
  return (int)cudaGetLastError();
}

// ---- embedding ----
template <typename T>
__global__ void emb_fwd_k(const T *w, const long long *idx, T *out, int64_t n, int64_t D) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n * D; i += (int64_t)gridDim.x * blockDim.x)
    out[i] = w[idx[i / D] * D + i % D];
}

template <typename T>
__global__ void emb_bwd_k(const T *g, const long long *idx, T *dw, int64_t n, int64_t D) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n * D; i += (int64_t)gridDim.x * blockDim.x)
    atomicAdd(&dw[idx[i / D] * D + i % D], g[i]);
}

extern "C" int LAB_CU(embedding_fwd)(lab_dtype ct, const void *weight, const int64_t *idx, void *out, int64_t n,
                                    int64_t D, lab_cuda_stream s) {
  if (n * D <= 0) return 0;
  // a row copy moves bytes, whatever they mean: by the element's size (a 16-bit copy for every
  // non-f32 dtype read 2 bytes of each 1-byte FP8 element, past the row, and half of each int)
  switch (lab_dtype_size(ct)) {
  case 8:
    lab_launch<emb_fwd_k<unsigned long long>>(lab_blocks(n * D, THREADS), THREADS, 0, s,
        P(const unsigned long long *, weight), P(const long long *, idx), P(unsigned long long *, out), n, D);
    break;
  case 4:
    lab_launch<emb_fwd_k<unsigned>>(lab_blocks(n * D, THREADS), THREADS, 0, s, P(const unsigned *, weight),
        P(const long long *, idx), P(unsigned *, out), n, D);
    break;
  case 2:
    lab_launch<emb_fwd_k<unsigned short>>(lab_blocks(n * D, THREADS), THREADS, 0, s, P(const unsigned short *, weight),
        P(const long long *, idx), P(unsigned short *, out), n, D);
    break;
  default:
    lab_launch<emb_fwd_k<unsigned char>>(lab_blocks(n * D, THREADS), THREADS, 0, s, P(const unsigned char *, weight),
        P(const long long *, idx), P(unsigned char *, out), n, D);
  }
  return (int)cudaGetLastError();
}

extern "C" int LAB_CU(embedding_bwd)(lab_dtype ct, const void *g, const int64_t *idx, void *dweight, int64_t n,
                                    int64_t D, lab_cuda_stream s) {
  if (n * D <= 0) return 0;
  if (ct == LAB_F64)
    lab_launch<emb_bwd_k<double>>(lab_blocks(n * D, THREADS), THREADS, 0, s, P(const double *, g), P(const long long *, idx),
        P(double *, dweight), n, D);
  else
    lab_launch<emb_bwd_k<float>>(lab_blocks(n * D, THREADS), THREADS, 0, s, P(const float *, g), P(const long long *, idx),
        P(float *, dweight), n, D);
  return (int)cudaGetLastError();
}

// ---- attention helpers ----
template <typename T>
__global__ void causal_mask_k(T *sc, int64_t batches, int64_t Tq, int64_t Sk) {
  int64_t shift = Sk - Tq, total = batches * Tq * Sk;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
    int64_t col = i % Sk, t = (i / Sk) % Tq;
    if (col > t + shift) sc[i] = (T)-INFINITY;
  }
}

extern "C" int LAB_CU(causal_mask)(lab_dtype ct, void *scores, int64_t batches, int64_t T, int64_t S,
                                  lab_cuda_stream s) {
  int64_t n = batches * T * S;
  if (n <= 0) return 0;
  if (ct == LAB_F64) lab_launch<causal_mask_k<double>>(lab_blocks(n, THREADS), THREADS, 0, s, P(double *, scores), batches, T, S);
  else lab_launch<causal_mask_k<float>>(lab_blocks(n, THREADS), THREADS, 0, s, P(float *, scores), batches, T, S);
  return (int)cudaGetLastError();
}

template <typename T>
__global__ void softmax_bwd_k(const T *Pm, T *dP, int64_t rows, int64_t S, double scale) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *p = Pm + r * S;
    T *d = dP + r * S;
    double dot = 0;
    for (int64_t i = threadIdx.x; i < S; i += blockDim.x) dot += (double)d[i] * p[i];
    dot = lab_block_sum<double>(dot);
    T dt = (T)dot, sc = (T)scale;
    for (int64_t i = threadIdx.x; i < S; i += blockDim.x) d[i] = p[i] * (d[i] - dt) * sc;
  }
}

extern "C" int LAB_CU(softmax_bwd_rows)(lab_dtype ct, const void *Pm, void *dP, int64_t rows, int64_t S, double scale,
                                       lab_cuda_stream s) {
  if (rows <= 0) return 0;
  if (ct == LAB_F64)
    lab_launch<softmax_bwd_k<double>>(row_blocks(rows), THREADS, 0, s, P(const double *, Pm), P(double *, dP), rows, S, scale);
  else lab_launch<softmax_bwd_k<float>>(row_blocks(rows), THREADS, 0, s, P(const float *, Pm), P(float *, dP), rows, S, scale);
  return (int)cudaGetLastError();
}

// ---- AdamW, as kernels/cpu/optim.c ----
template <typename T>
__global__ void adamw_k(T *p, const T *g, T *m, T *v, int64_t n, T a, T b1, T b2, T eps, T decay, T bc1, T rbc2) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    T gi = g[i];
    T mi = b1 * m[i] + ((T)1 - b1) * gi, vi = b2 * v[i] + ((T)1 - b2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] = p[i] * decay - a * (mi / bc1) / (sqrt(vi) * rbc2 + eps);
  }
}

extern "C" int LAB_CU(adamw)(lab_dtype ct, void *p, const void *g, void *m, void *v, int64_t n, double lr, double b1,
                            double b2, double eps, double wd, int64_t step, lab_cuda_stream s) {
  if (n <= 0) return 0;
  double bc1 = 1.0 - pow(b1, (double)step), bc2 = 1.0 - pow(b2, (double)step);
  if (ct == LAB_F64)
    lab_launch<adamw_k<double>>(lab_blocks(n, THREADS), THREADS, 0, s, P(double *, p), P(const double *, g), P(double *, m),
        P(double *, v), n, lr, b1, b2, eps, 1.0 - lr * wd, bc1, 1.0 / sqrt(bc2));
  else
    lab_launch<adamw_k<float>>(lab_blocks(n, THREADS), THREADS, 0, s, P(float *, p), P(const float *, g), P(float *, m),
        P(float *, v), n, (float)lr, (float)b1, (float)b2, (float)eps, (float)(1.0 - lr * wd), (float)bc1,
        1.0f / sqrtf((float)bc2));
  return (int)cudaGetLastError();
}

LAB_NS_END
