// Shared pieces of the FlashAttention-2 kernels (flash_attention.cu forward,
// flash_attention_bwd.cu backward): tile sizes, the tensor-core product
// mma.sync.m16n8k16 (bf16 or f16 operands, f32 accumulators) and its register fragments,
// and the copies of row tiles from global into shared memory.
//
// Fragments of mma.m16n8k16 (PTX ISA, "Matrix Fragments for mma.m16n8k16"), per lane with
// g = lane / 4 and q = lane % 4, each 32-bit register holding two 16-bit elements:
//   A 16x16 row-major  a0 (g, 2q..2q+1)  a1 (g+8, 2q..)  a2 (g, 2q+8..)  a3 (g+8, 2q+8..)
//   B 16x8 "col"       b0 (k = 2q..2q+1, n = g)  b1 (k = 2q+8.., n = g)
//   C 16x8 f32         c0 c1 (g, 2q..2q+1)  c2 c3 (g+8, 2q..2q+1)
// So a B operand is read as two adjacent elements of a row of a [n][k] array, and the C
// fragments of two neighbouring 8-column tiles are exactly the A fragment of the 16-column
// chunk they form (FlashAttention-2 keeps P in registers that way between its two products).
#pragma once
#include <math.h>

#include "flash_ptx.cuh"

extern "C" int LAB_CU(flash_aligned)(const void *p); // flash_attention.cu: 16-byte aligned

LAB_NS_BEGIN

namespace flash {

constexpr int BR = 64;        // query rows per tile (forward: per block; 16 per warp)
constexpr int BC = 64;        // key rows per tile
constexpr int WARPS = 4;
constexpr int THREADS = WARPS * 32;
constexpr int PAD = 8;        // elements added to each shared row: consecutive rows start in other banks
constexpr float LOG2E = 1.4426950408889634f;
constexpr float LN2 = 0.6931471805599453f;

template <typename E>
struct elem;
template <>
struct elem<__nv_bfloat16> {
  static __device__ __forceinline__ float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }
  static __device__ __forceinline__ __nv_bfloat16 from_f(float x) { return __float2bfloat16_rn(x); }
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&v);
  }
};
template <>
struct elem<__half> {
  static __device__ __forceinline__ float to_f(__half x) { return __half2float(x); }
  static __device__ __forceinline__ __half from_f(float x) { return __float2half_rn(x); }
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&v);
  }
};

// two adjacent 16-bit elements of shared memory (p at an even element) as one register
template <typename E>
__device__ __forceinline__ uint32_t ld2(const E *p) {
  return *reinterpret_cast<const uint32_t *>(p);
}

// The A fragment of rows r0..r0+15, columns c0..c0+15 of a row-major shared array (row stride ld)
template <typename E>
__device__ __forceinline__ void load_a(uint32_t a[4], const E *s, int ld, int r0, int c0) {
  const int g = (threadIdx.x & 31) >> 2, q = threadIdx.x & 3;
  a[0] = ld2(s + (r0 + g) * ld + c0 + 2 * q);
  a[1] = ld2(s + (r0 + g + 8) * ld + c0 + 2 * q);
  a[2] = ld2(s + (r0 + g) * ld + c0 + 2 * q + 8);
  a[3] = ld2(s + (r0 + g + 8) * ld + c0 + 2 * q + 8);
}

// The B fragment (k = c0..c0+15, n = n0..n0+7) of a shared array stored as [n][k] (row stride ld)
template <typename E>
__device__ __forceinline__ void load_b(uint32_t &b0, uint32_t &b1, const E *s, int ld, int n0, int c0) {
  const int g = (threadIdx.x & 31) >> 2, q = threadIdx.x & 3;
  b0 = ld2(s + (n0 + g) * ld + c0 + 2 * q);
  b1 = ld2(s + (n0 + g) * ld + c0 + 2 * q + 8);
}

// The A fragment of a 16-column chunk from the C fragments of its two 8-column halves
template <typename E>
__device__ __forceinline__ void c_to_a(uint32_t a[4], const float lo[4], const float hi[4]) {
  a[0] = elem<E>::pack(lo[0], lo[1]);
  a[1] = elem<E>::pack(lo[2], lo[3]);
  a[2] = elem<E>::pack(hi[0], hi[1]);
  a[3] = elem<E>::pack(hi[2], hi[3]);
}

// rows [r0, r0 + 64) of a [rows][D] global array into shared memory (row stride ld), rows past
// `rows` as zeros (so masked keys multiply as 0, never as garbage NaN). 16-byte copies.
template <typename E, int D>
__device__ __forceinline__ void load_rows(E *dst, int ld, const E *src, int64_t r0, int64_t rows) {
  constexpr int CH = D / 8;
  for (int i = threadIdx.x; i < 64 * CH; i += THREADS) {
    int r = i / CH, c = (i % CH) * 8;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (r0 + r < rows) v = *reinterpret_cast<const uint4 *>(src + (r0 + r) * D + c);
    *reinterpret_cast<uint4 *>(dst + r * ld + c) = v;
  }
}

// the same rows stored transposed: dst[d][r] (row stride ld >= 64)
template <typename E, int D>
__device__ __forceinline__ void load_rows_t(E *dst, int ld, const E *src, int64_t r0, int64_t rows) {
  constexpr int CH = D / 8;
  for (int i = threadIdx.x; i < 64 * CH; i += THREADS) {
    int r = i / CH, c = (i % CH) * 8;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (r0 + r < rows) v = *reinterpret_cast<const uint4 *>(src + (r0 + r) * D + c);
    const E *e = reinterpret_cast<const E *>(&v);
#pragma unroll
    for (int u = 0; u < 8; u++) dst[(c + u) * ld + r] = e[u];
  }
}

// whether query t sees key s (causal: s <= t + S - T, bottom-right aligned as the cpu kernel)
__device__ __forceinline__ bool visible(int64_t t, int64_t s, int64_t T, int64_t S, int causal) {
  return t < T && s < S && (!causal || s <= t + (S - T));
}

}  // namespace flash

LAB_NS_END
