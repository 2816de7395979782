// Elementwise launches on strided, broadcast geometry: one thread per output element (grid
// stride), each operand loaded from its own dtype into the compute type and the result stored
// in the output's dtype. The arithmetic follows kernels/cpu/ewise.c op for op (floored
// remainder, NaN-propagating maximum, floor division of integers with 0 for a zero divisor).
#include <math.h>

#include "common.cuh"

LAB_NS_BEGIN

template <typename CT>
__device__ __forceinline__ CT floored_mod(CT x, CT y) {
  CT r = fmod(x, y);
  return (r != 0 && ((r < 0) != (y < 0))) ? r + y : r;
}

// Integers wrap as two's complement (kernels/cpu/ewise.c): unsigned arithmetic, and -1
// divisors on their own branch (INT64_MIN / -1 traps).
__device__ __forceinline__ long long wrap_mul(long long x, long long y) {
  return (long long)((unsigned long long)x * (unsigned long long)y);
}
__device__ __forceinline__ long long wrap_neg(long long x) { return (long long)(0ull - (unsigned long long)x); }

__device__ __forceinline__ long long ipow(long long b, long long e) {
  if (e < 0) return b == 1 ? 1 : (b == -1 ? ((e & 1) ? -1 : 1) : 0);
  long long r = 1;
  while (e) {
    if (e & 1) r = wrap_mul(r, b);
    b = wrap_mul(b, b);
    e >>= 1;
  }
  return r;
}

template <typename CT> __device__ CT binary_f(int op, CT x, CT y) {
  switch (op) {
  case LAB_ADD: return x + y;
  case LAB_SUB: return x - y;
  case LAB_MUL: return x * y;
  case LAB_DIV: return x / y;
  case LAB_POW: return pow(x, y);
  case LAB_MAXIMUM: return (x != x || x > y) ? x : y;
  case LAB_MINIMUM: return (x != x || x < y) ? x : y;
  case LAB_REMAINDER: return floored_mod(x, y);
  case LAB_EQ: return x == y;
  case LAB_NE: return x != y;
  case LAB_LT: return x < y;
  case LAB_LE: return x <= y;
  case LAB_GT: return x > y;
  case LAB_FLOOR_DIV: return floor(x / y);
  default: return x >= y;
  }
}

__device__ long long binary_i(int op, long long x, long long y) {
  switch (op) {
  case LAB_ADD: return (long long)((unsigned long long)x + (unsigned long long)y);
  case LAB_SUB: return (long long)((unsigned long long)x - (unsigned long long)y);
  case LAB_MUL: return wrap_mul(x, y);
  case LAB_DIV:
  case LAB_FLOOR_DIV:
    if (y == 0) return 0;
    if (y == -1) return wrap_neg(x);
    return x / y - ((x % y != 0) && ((x < 0) != (y < 0)));
  case LAB_POW: return ipow(x, y);
  case LAB_REMAINDER: {
    if (y == 0 || y == -1) return 0;
    long long r = x % y;
    return (r != 0 && ((r < 0) != (y < 0))) ? r + y : r;
  }
  case LAB_MAXIMUM: return x > y ? x : y;
  case LAB_MINIMUM: return x < y ? x : y;
  case LAB_EQ: return x == y;
  case LAB_NE: return x != y;
  case LAB_LT: return x < y;
  case LAB_LE: return x <= y;
  case LAB_GT: return x > y;
  default: return x >= y;
  }
}

template <typename CT> __device__ CT unary_f(int op, CT x) {
  switch (op) {
  case LAB_NEG: return -x;
  case LAB_ABS: return fabs(x);
  case LAB_EXP: return exp(x);
  case LAB_LOG: return log(x);
  case LAB_SQRT: return sqrt(x);
  case LAB_RSQRT: return (CT)1 / sqrt(x);
  case LAB_TANH: return tanh(x);
  default: return (CT)1 / ((CT)1 + exp(-x));
  }
}

template <typename CT> struct ops_of {
  __device__ static CT binary(int op, CT x, CT y) { return binary_f<CT>(op, x, y); }
  __device__ static CT unary(int op, CT x) { return unary_f<CT>(op, x); }
};
template <> struct ops_of<long long> {
  __device__ static long long binary(int op, long long x, long long y) { return binary_i(op, x, y); }
  __device__ static long long unary(int op, long long x) { return op == LAB_NEG ? wrap_neg(x) : (x < 0 ? wrap_neg(x) : x); }
};

// operand k in the compute type: loaded from memory, or its value passed with the launch
// (lab_ew_args.scalars: a Lua number), converted as lab_load converts the element
template <typename CT>
__device__ __forceinline__ CT operand(const lab_ew_args &a, const char *p, int k) {
  if ((a.scalars >> k) & 1u) return a.sv[k].is_int ? (CT)a.sv[k].i : (CT)a.sv[k].f;
  return lab_load<CT>(p, a.dt[k]);
}

template <typename CT>
__global__ void ewise_kernel(lab_ew_args a, int64_t total) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
    int64_t rem = i;
    char *p[LAB_DEV_MAX_OPS];
    for (int k = 0; k < a.g.nops; k++) p[k] = a.g.data[k];
    for (int d = a.g.ndim - 1; d >= 0; d--) {
      int64_t idx = rem % a.g.shape[d];
      rem /= a.g.shape[d];
      for (int k = 0; k < a.g.nops; k++) p[k] += idx * a.g.stride[k][d];
    }
    CT r;
    switch (a.kind) {
    case LAB_EW_BINARY: r = ops_of<CT>::binary(a.op, operand<CT>(a, p[1], 1), operand<CT>(a, p[2], 2)); break;
    case LAB_EW_UNARY: r = ops_of<CT>::unary(a.op, operand<CT>(a, p[1], 1)); break;
    case LAB_EW_CLAMP: {
      r = operand<CT>(a, p[1], 1);
      if (a.has_lo && r < (CT)a.lo) r = (CT)a.lo;
      if (a.has_hi && r > (CT)a.hi) r = (CT)a.hi;
      break;
    }
    case LAB_EW_WHERE:
      r = operand<CT>(a, p[1], 1) != (CT)0 ? operand<CT>(a, p[2], 2) : operand<CT>(a, p[3], 3);
      break;
    default: r = operand<CT>(a, p[1], 1); break;
    }
    lab_store<CT>(p[0], a.dt[0], r);
  }
}

extern "C" int LAB_CU(ewise)(const lab_ew_args *a, lab_cuda_stream s) {
  int64_t total = 1;
  for (int d = 0; d < a->g.ndim; d++) total *= a->g.shape[d];
  if (total <= 0) return 0;
  unsigned threads = 256, blocks = lab_blocks(total, threads);
  if (a->ct == LAB_F32) lab_launch<ewise_kernel<float>>(blocks, threads, 0, s, *a, total);
  else if (a->ct == LAB_F64) lab_launch<ewise_kernel<double>>(blocks, threads, 0, s, *a, total);
  else lab_launch<ewise_kernel<long long>>(blocks, threads, 0, s, *a, total);
  return (int)cudaGetLastError();
}

LAB_NS_END
