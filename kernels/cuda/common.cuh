// Shared device helpers for the CUDA kernels: loads and stores between every storage dtype
// and a compute type, and block-wide sums. Rounding matches kernels/cpu/half.h (nearest even).
#pragma once
#include <stdint.h>

#include "launch.h"

#ifdef LAB_SIMT
// compiled by the host compiler for the SIMT interpreter (kernels/simt/README.md): the
// emulation header, and every kernel in a namespace of its own, so that the template
// instantiations never meet those of the nvcc build at link time
#include "../simt/cuda_sim.h"
#define LAB_NS_BEGIN namespace lab_simt_k {
#define LAB_NS_END }
#else
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#define LAB_NS_BEGIN
#define LAB_NS_END
#define LAB_DYN_SMEM(T, name) extern __shared__ __align__(16) T name[]

// The one way both builds launch a kernel: lab_launch<kernel>(grid, block, smem, stream, args...)
template <auto K, typename... A>
static inline void lab_launch(dim3 g, dim3 b, size_t smem, cudaStream_t s, A &&...a) {
  K<<<g, b, smem, s>>>(static_cast<A &&>(a)...);
}
#endif

LAB_NS_BEGIN

template <typename CT>
__device__ __forceinline__ CT lab_load(const char *p, int dt) {
  switch (dt) {
  case LAB_F32: return (CT)(*(const float *)p);
  case LAB_F64: return (CT)(*(const double *)p);
  case LAB_I32: return (CT)(*(const int32_t *)p);
  case LAB_I64: return (CT)(*(const long long *)p);
  case LAB_BF16: return (CT)__bfloat162float(*(const __nv_bfloat16 *)p);
  case LAB_F16: return (CT)__half2float(*(const __half *)p);
  case LAB_F8E4M3: return (CT)__half2float(__half(__nv_cvt_fp8_to_halfraw(*(const __nv_fp8_storage_t *)p, __NV_E4M3)));
  case LAB_F8E5M2: return (CT)__half2float(__half(__nv_cvt_fp8_to_halfraw(*(const __nv_fp8_storage_t *)p, __NV_E5M2)));
  default: return (CT)(*(const uint8_t *)p != 0);
  }
}

template <typename CT>
__device__ __forceinline__ void lab_store(char *p, int dt, CT v) {
  switch (dt) {
  case LAB_F32: *(float *)p = (float)v; break;
  case LAB_F64: *(double *)p = (double)v; break;
  case LAB_I32: *(int32_t *)p = (int32_t)v; break;
  case LAB_I64: *(long long *)p = (long long)v; break;
  case LAB_BF16: *(__nv_bfloat16 *)p = __float2bfloat16_rn((float)v); break;
  case LAB_F16: *(__half *)p = __float2half_rn((float)v); break;
  // saturating, round to nearest even: kernels/cpu/fp8.h does the same on the host
  case LAB_F8E4M3: *(__nv_fp8_storage_t *)p = __nv_cvt_float_to_fp8((float)v, __NV_SATFINITE, __NV_E4M3); break;
  case LAB_F8E5M2: *(__nv_fp8_storage_t *)p = __nv_cvt_float_to_fp8((float)v, __NV_SATFINITE, __NV_E5M2); break;
  default: *(uint8_t *)p = v != (CT)0; break;
  }
}

// op(a, b) folded over the block's v (blockDim.x a power of two <= 1024) by halving a shared
// array; every thread gets the result.
template <typename A, typename Op>
__device__ A lab_block_reduce(A v, Op op) {
  __shared__ A buf[1024];
  buf[threadIdx.x] = v;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) buf[threadIdx.x] = op(buf[threadIdx.x], buf[threadIdx.x + s]);
    __syncthreads();
  }
  A r = buf[0];
  __syncthreads();
  return r;
}

struct lab_sum_op {
  template <typename A>
  __device__ A operator()(A a, A b) const { return a + b; }
};
// the larger: b replaces a only when b > a (a NaN b is passed over)
struct lab_max_op {
  template <typename A>
  __device__ A operator()(A a, A b) const { return b > a ? b : a; }
};

template <typename A>
__device__ A lab_block_sum(A v) { return lab_block_reduce(v, lab_sum_op{}); }
template <typename A>
__device__ A lab_block_max(A v) { return lab_block_reduce(v, lab_max_op{}); }

static inline unsigned lab_blocks(int64_t n, unsigned threads) {
  int64_t b = (n + threads - 1) / threads;
  return (unsigned)(b < 1 ? 1 : (b > 65535LL * 32 ? 65535LL * 32 : b));
}

LAB_NS_END
