// Reductions, one block per output element walking its line of the input (the geometry's
// operand 1 points at the line's first element, `stride` bytes apart), accumulated in double
// (int64 for integer sums and products) as kernels/cpu/reduce.c does; the sum over a middle
// dim; softmax and log-softmax over rows. Sums and norms of a few long lines (a full sum, a
// gradient norm) and sums over a long middle dim (a bias gradient) are split over many blocks
// (one block per output ran a full sum on one SM): each block writes its partial to scratch
// and a second launch adds a line's partials in a fixed tree, so the result depends on the
// shape alone, run to run.
#include <math.h>

#include "common.cuh"

LAB_NS_BEGIN

#define THREADS 256

template <typename CT>
__device__ double load_d(const char *p, int dt) { return (double)lab_load<CT>(p, dt); }

__global__ void reduce_kernel(lab_red_args a, int64_t outputs) {
  for (int64_t o = blockIdx.x; o < outputs; o += gridDim.x) {
    int64_t rem = o;
    char *p[3] = {a.g.data[0], a.g.data[1], a.g.nops > 2 ? a.g.data[2] : nullptr};
    for (int d = a.g.ndim - 1; d >= 0; d--) {
      int64_t idx = rem % a.g.shape[d];
      rem /= a.g.shape[d];
      for (int k = 0; k < a.g.nops; k++) p[k] += idx * a.g.stride[k][d];
    }
    const char *line = p[1];
    int64_t n = a.len;
    if (a.op == LAB_R_MAX || a.op == LAB_R_MIN) {
      // (value, index) per thread, then a block-wide pick: NaN wins (its first index), then
      // the strict best, ties to the lowest index, as lab_row_argext
      __shared__ double bv[THREADS];
      __shared__ long long bi[THREADS];
      double best = 0;
      long long at = -1;
      int want_max = a.op == LAB_R_MAX;
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
        double v = a.ct == LAB_I64 ? (double)lab_load<long long>(line + j * a.stride, a.in_t)
                                   : lab_load<double>(line + j * a.stride, a.in_t);
        if (at < 0 || (v != v && best == best) || (best == best && (want_max ? v > best : v < best))) {
          best = v;
          at = j;
        }
      }
      bv[threadIdx.x] = best;
      bi[threadIdx.x] = at;
      __syncthreads();
      for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
          double v = bv[threadIdx.x + s], w = bv[threadIdx.x];
          long long j = bi[threadIdx.x + s], i = bi[threadIdx.x];
          int take = j >= 0 && (i < 0 || (v != v && (w == w || j < i)) ||
                                (w == w && v == v && ((want_max ? v > w : v < w) || (v == w && j < i))));
          if (take) {
            bv[threadIdx.x] = v;
            bi[threadIdx.x] = j;
          }
        }
        __syncthreads();
      }
      if (threadIdx.x == 0) {
        long long i = bi[0] < 0 ? 0 : bi[0];
        // the value itself, copied in its own dtype (integers stay exact)
        if (a.ct == LAB_I64) lab_store<long long>(p[0], a.out_t, lab_load<long long>(line + i * a.stride, a.in_t));
        else lab_store<double>(p[0], a.out_t, lab_load<double>(line + i * a.stride, a.in_t));
        *(long long *)p[2] = i;
      }
      __syncthreads();
      continue;
    }
    if (a.ct == LAB_I64 && (a.op == LAB_R_SUM || a.op == LAB_R_PROD)) {
      // unsigned: integer sums and products wrap as two's complement (kernels/cpu/reduce.c)
      unsigned long long acc = a.op == LAB_R_SUM ? 0 : 1;
      if (a.op == LAB_R_SUM) {
        for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
          acc += (unsigned long long)lab_load<long long>(line + j * a.stride, a.in_t);
        acc = lab_block_sum<unsigned long long>(acc);
      } else if (threadIdx.x == 0) { // products are short in practice; one thread keeps order
        for (int64_t j = 0; j < n; j++) acc *= (unsigned long long)lab_load<long long>(line + j * a.stride, a.in_t);
      }
      if (threadIdx.x == 0) lab_store<long long>(p[0], a.out_t, (long long)acc);
      __syncthreads();
      continue;
    }
    double s = 0, v = 0;
    switch (a.op) {
    case LAB_R_SUM:
    case LAB_R_MEAN:
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x) s += lab_load<double>(line + j * a.stride, a.in_t);
      s = lab_block_sum<double>(s);
      v = a.op == LAB_R_SUM ? s : (n ? s / (double)n : NAN);
      break;
    case LAB_R_PROD:
      if (threadIdx.x == 0) {
        v = 1;
        for (int64_t j = 0; j < n; j++) v *= lab_load<double>(line + j * a.stride, a.in_t);
      }
      break;
    case LAB_R_VAR: {
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x) s += lab_load<double>(line + j * a.stride, a.in_t);
      double mean = lab_block_sum<double>(s) / (double)n, ss = 0;
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
        double d = lab_load<double>(line + j * a.stride, a.in_t) - mean;
        ss += d * d;
      }
      ss = lab_block_sum<double>(ss);
      double den = (double)n - a.param;
      v = den > 0 ? ss / den : NAN;
      break;
    }
    default: { // norm
      double pp = a.param;
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
        double x = fabs(lab_load<double>(line + j * a.stride, a.in_t));
        if (isinf(pp)) s = fmax(s, x);
        else s += pp == 2 ? x * x : (pp == 1 ? x : pow(x, pp));
      }
      if (isinf(pp)) v = lab_block_max<double>(s);
      else {
        s = lab_block_sum<double>(s);
        v = pp == 2 ? sqrt(s) : (pp == 1 ? s : pow(s, 1.0 / pp));
      }
    }
    }
    if (threadIdx.x == 0) lab_store<double>(p[0], a.out_t, v);
    __syncthreads();
  }
}

// ---- sums and norms of a few long lines over many blocks ----
#define MAX_CHUNKS 1024

__device__ void line_of(const lab_red_args &a, int64_t o, char **out, const char **line) {
  int64_t rem = o;
  char *p0 = a.g.data[0], *p1 = a.g.data[1];
  for (int d = a.g.ndim - 1; d >= 0; d--) {
    int64_t idx = rem % a.g.shape[d];
    rem /= a.g.shape[d];
    p0 += idx * a.g.stride[0][d];
    p1 += idx * a.g.stride[1][d];
  }
  *out = p0;
  *line = p1;
}

// block b: chunk b % chunks of line b / chunks; its partial (a double, or an int sum's bits)
__global__ void reduce_partial_kernel(lab_red_args a, int64_t outputs, int chunks) {
  unsigned long long *part = (unsigned long long *)a.work;
  for (int64_t b = blockIdx.x; b < outputs * chunks; b += gridDim.x) {
    char *o;
    const char *line;
    line_of(a, b / chunks, &o, &line);
    int64_t c = b % chunks, lo = a.len * c / chunks, hi = a.len * (c + 1) / chunks;
    if (a.ct == LAB_I64) { // an integer sum, wrapping as two's complement
      unsigned long long acc = 0;
      for (int64_t j = lo + threadIdx.x; j < hi; j += blockDim.x)
        acc += (unsigned long long)lab_load<long long>(line + j * a.stride, a.in_t);
      acc = lab_block_sum<unsigned long long>(acc);
      if (threadIdx.x == 0) part[b] = acc;
    } else {
      double s = 0, pp = a.param;
      int inf = a.op == LAB_R_NORM && isinf(pp);
      for (int64_t j = lo + threadIdx.x; j < hi; j += blockDim.x) {
        double x = lab_load<double>(line + j * a.stride, a.in_t);
        if (a.op != LAB_R_NORM) s += x;
        else if (inf) s = fmax(s, fabs(x));
        else s += pp == 2 ? x * x : (pp == 1 ? fabs(x) : pow(fabs(x), pp));
      }
      s = inf ? lab_block_max<double>(s) : lab_block_sum<double>(s);
      if (threadIdx.x == 0) ((double *)part)[b] = s;
    }
    __syncthreads();
  }
}

// one block per line: its partials in a fixed order, then mean / root as reduce_kernel
__global__ void reduce_combine_kernel(lab_red_args a, int64_t outputs, int chunks) {
  const unsigned long long *part = (const unsigned long long *)a.work;
  for (int64_t o = blockIdx.x; o < outputs; o += gridDim.x) {
    char *out;
    const char *line;
    line_of(a, o, &out, &line);
    const unsigned long long *mine = part + o * chunks;
    if (a.ct == LAB_I64) {
      unsigned long long acc = 0;
      for (int c = threadIdx.x; c < chunks; c += blockDim.x) acc += mine[c];
      acc = lab_block_sum<unsigned long long>(acc);
      if (threadIdx.x == 0) lab_store<long long>(out, a.out_t, (long long)acc);
    } else {
      double pp = a.param, s = 0;
      int inf = a.op == LAB_R_NORM && isinf(pp);
      for (int c = threadIdx.x; c < chunks; c += blockDim.x)
        s = inf ? fmax(s, ((const double *)mine)[c]) : s + ((const double *)mine)[c];
      s = inf ? lab_block_max<double>(s) : lab_block_sum<double>(s);
      double v = a.op == LAB_R_SUM ? s
                 : a.op == LAB_R_MEAN ? (a.len ? s / (double)a.len : NAN)
                 : inf ? s : pp == 2 ? sqrt(s) : (pp == 1 ? s : pow(s, 1.0 / pp));
      if (threadIdx.x == 0) lab_store<double>(out, a.out_t, v);
    }
    __syncthreads();
  }
}

// chunks per line: enough blocks for the whole GPU (~2 x 132 SMs on an H200) when the lines
// are few and long; 1 (one block per output) otherwise
static int reduce_chunks(const lab_red_args *a, int64_t outputs) {
  int sum = a->op == LAB_R_SUM || a->op == LAB_R_MEAN, norm = a->op == LAB_R_NORM && a->ct != LAB_I64;
  if (!(sum || norm) || outputs >= 264 || a->len < 8 * THREADS) return 1;
  int64_t c = a->len / (4 * THREADS), cap = 264 * 4 / outputs;
  if (c > cap) c = cap;
  if (c > MAX_CHUNKS) c = MAX_CHUNKS;
  return c < 2 ? 1 : (int)c;
}

extern "C" size_t LAB_CU(reduce_work_bytes)(const lab_red_args *a) {
  int64_t outputs = 1;
  for (int d = 0; d < a->g.ndim; d++) outputs *= a->g.shape[d];
  return outputs > 0 && reduce_chunks(a, outputs) > 1 ? (size_t)(outputs * reduce_chunks(a, outputs)) * 8 : 0;
}

extern "C" int LAB_CU(reduce)(const lab_red_args *a, lab_cuda_stream s) {
  int64_t outputs = 1;
  for (int d = 0; d < a->g.ndim; d++) outputs *= a->g.shape[d];
  if (outputs <= 0) return 0;
  int chunks = a->work ? reduce_chunks(a, outputs) : 1;
  if (chunks > 1) {
    lab_launch<reduce_partial_kernel>((unsigned)(outputs * chunks), THREADS, 0, s, *a, outputs, chunks);
    lab_launch<reduce_combine_kernel>((unsigned)outputs, THREADS, 0, s, *a, outputs, chunks);
    return (int)cudaGetLastError();
  }
  unsigned blocks = (unsigned)(outputs < 65535LL * 32 ? outputs : 65535LL * 32);
  lab_launch<reduce_kernel>(blocks, THREADS, 0, s, *a, outputs);
  return (int)cudaGetLastError();
}

template <typename T>
__global__ void sum_middle_kernel(const T *x, T *out, int64_t outer, int64_t R, int64_t inner, double scale) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < outer * inner; i += (int64_t)gridDim.x * blockDim.x) {
    int64_t o = i / inner, j = i % inner;
    double acc = 0;
    for (int64_t r = 0; r < R; r++) acc += x[(o * R + r) * inner + j];
    out[i] = (T)(acc * scale);
  }
}

// A long middle dim over few columns (a bias gradient: N = 768 columns, R = 8192 rows ran on 3
// blocks) is cut into row chunks: thread (chunk, column) sums its rows into scratch, and a
// second launch adds each column's chunks in order.
template <typename T>
__global__ void sum_middle_partial_kernel(const T *x, double *part, int64_t outer, int64_t R, int64_t inner,
                                          int chunks) {
  int64_t cols = outer * inner;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < cols * chunks; i += (int64_t)gridDim.x * blockDim.x) {
    int64_t c = i / cols, col = i % cols, o = col / inner, j = col % inner;
    int64_t lo = R * c / chunks, hi = R * (c + 1) / chunks;
    double acc = 0;
    for (int64_t r = lo; r < hi; r++) acc += x[(o * R + r) * inner + j]; // adjacent threads: adjacent columns
    part[i] = acc;
  }
}

template <typename T>
__global__ void sum_middle_combine_kernel(const double *part, T *out, int64_t cols, int chunks, double scale) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < cols; i += (int64_t)gridDim.x * blockDim.x) {
    double acc = 0;
    for (int c = 0; c < chunks; c++) acc += part[c * cols + i];
    out[i] = (T)(acc * scale);
  }
}

// row chunks so that columns x chunks fill ~2 x 132 SMs of 2048 threads, each chunk >= 16 rows
static int sum_middle_chunks(int64_t outer, int64_t R, int64_t inner) {
  int64_t cols = outer * inner, want = (264LL * 2048 + cols - 1) / cols, most = R / 16;
  int64_t c = want < most ? want : most;
  if (c > MAX_CHUNKS) c = MAX_CHUNKS;
  return c < 2 ? 1 : (int)c;
}

extern "C" size_t LAB_CU(sum_middle_work_bytes)(int64_t outer, int64_t R, int64_t inner) {
  int c = outer * inner > 0 ? sum_middle_chunks(outer, R, inner) : 1;
  return c > 1 ? (size_t)(outer * inner * c) * sizeof(double) : 0;
}

extern "C" int LAB_CU(sum_middle)(lab_dtype ct, const void *x, void *out, int64_t outer, int64_t R, int64_t inner,
                                 double scale, void *work, lab_cuda_stream s) {
  int64_t n = outer * inner;
  if (n <= 0) return 0;
  int chunks = work ? sum_middle_chunks(outer, R, inner) : 1;
  if (chunks > 1) {
    double *part = (double *)work;
    if (ct == LAB_F64) {
      lab_launch<sum_middle_partial_kernel<double>>(lab_blocks(n * chunks, 256), 256, 0, s, (const double *)x, part,
                                                    outer, R, inner, chunks);
      lab_launch<sum_middle_combine_kernel<double>>(lab_blocks(n, 256), 256, 0, s, (const double *)part,
                                                    (double *)out, n, chunks, scale);
    } else {
      lab_launch<sum_middle_partial_kernel<float>>(lab_blocks(n * chunks, 256), 256, 0, s, (const float *)x, part,
                                                   outer, R, inner, chunks);
      lab_launch<sum_middle_combine_kernel<float>>(lab_blocks(n, 256), 256, 0, s, (const double *)part,
                                                   (float *)out, n, chunks, scale);
    }
    return (int)cudaGetLastError();
  }
  if (ct == LAB_F64)
    lab_launch<sum_middle_kernel<double>>(lab_blocks(n, 256), 256, 0, s, (const double *)x, (double *)out, outer, R, inner, scale);
  else
    lab_launch<sum_middle_kernel<float>>(lab_blocks(n, 256), 256, 0, s, (const float *)x, (float *)out, outer, R, inner, scale);
  return (int)cudaGetLastError();
}

// one block per row: max, sum of exp in double, then the row written (in place allowed)
template <typename T>
__global__ void softmax_kernel(const T *x, T *out, int64_t rows, int64_t n, int want_log) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *xr = x + r * n;
    T *o = out + r * n;
    double m = -INFINITY;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) m = fmax(m, (double)xr[i]);
    m = lab_block_max<double>(m);
    double s = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += exp((double)xr[i] - m);
    s = lab_block_sum<double>(s);
    double ls = log(s);
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
      o[i] = want_log ? (T)((double)xr[i] - m - ls) : (T)(exp((double)xr[i] - m) / s);
    __syncthreads();
  }
}

extern "C" int LAB_CU(softmax_rows)(lab_dtype ct, const void *x, void *out, int64_t rows, int64_t n, int log_,
                                   lab_cuda_stream s) {
  if (rows <= 0 || n <= 0) return 0;
  unsigned blocks = (unsigned)(rows < 65535LL * 32 ? rows : 65535LL * 32);
  if (ct == LAB_F64) lab_launch<softmax_kernel<double>>(blocks, THREADS, 0, s, (const double *)x, (double *)out, rows, n, log_);
  else lab_launch<softmax_kernel<float>>(blocks, THREADS, 0, s, (const float *)x, (float *)out, rows, n, log_);
  return (int)cudaGetLastError();
}

LAB_NS_END
