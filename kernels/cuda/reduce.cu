// Reductions, one block per output element walking its line of the input (the geometry's
// operand 1 points at the line's first element, `stride` bytes apart), accumulated in double
// (int64 for integer sums and products) as kernels/cpu/reduce.c does; the sum over a middle
// dim; softmax and log-softmax over rows.
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

extern "C" int LAB_CU(reduce)(const lab_red_args *a, lab_cuda_stream s) {
  int64_t outputs = 1;
  for (int d = 0; d < a->g.ndim; d++) outputs *= a->g.shape[d];
  if (outputs <= 0) return 0;
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

extern "C" int LAB_CU(sum_middle)(lab_dtype ct, const void *x, void *out, int64_t outer, int64_t R, int64_t inner,
                                 double scale, lab_cuda_stream s) {
  int64_t n = outer * inner;
  if (n <= 0) return 0;
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
