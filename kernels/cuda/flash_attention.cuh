// Shared pieces of the FlashAttention-2 kernels (flash_attention.cu forward,
// flash_attention_bwd.cu backward): the shared-memory layout, the one tile copy (cp.async in,
// 16-byte stores out), the mma operand fragments loaded with ldmatrix, and the masks.
//
// Fragments of mma.m16n8k16 (PTX ISA, "Matrix Fragments for mma.m16n8k16"), per lane with
// g = lane / 4 and q = lane % 4, each 32-bit register holding two 16-bit elements:
//   A 16x16 row-major  a0 (g, 2q..2q+1)  a1 (g+8, 2q..)  a2 (g, 2q+8..)  a3 (g+8, 2q+8..)
//   B 16x8 "col"       b0 (k = 2q..2q+1, n = g)  b1 (k = 2q+8.., n = g)
//   C 16x8 f32         c0 c1 (g, 2q..2q+1)  c2 c3 (g+8, 2q..2q+1)
// ldmatrix gives each lane row l/4, columns 2(l%4).. of an 8x8 matrix (.trans: the column), so
// one ldmatrix.x4 loads an A fragment, or the B fragments of two 8-column tiles: from a
// [n][k] array plain (K for S = Q K^T), from a [k][n] array with .trans (V for O = P V). The
// C fragments of two neighbouring 8-column tiles are the A fragment of the 16-column chunk
// they form (P stays in registers between the two products, as FlashAttention-2 keeps it).
//
// Shared layout: rows of D elements padded by 8, so a row is an odd number of 16-byte chunks
// and the 8 rows an ldmatrix phase reads, or a cp.async phase writes (8 rows at one chunk),
// fall in 8 different bank groups: no conflicts for any D that is a multiple of 32.
#pragma once
#include <math.h>

#include "flash_ptx.cuh"

extern "C" int LAB_CU(flash_aligned)(const void *p); // flash_attention.cu: 16-byte aligned

LAB_NS_BEGIN

namespace flash {

constexpr int WARPS = 4;
constexpr int THREADS = WARPS * 32;
constexpr int PAD = 8; // elements added to each shared row (see above)
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

// The A fragment of rows r0..r0+15, columns c0..c0+15 of a row-major shared array (row stride ld)
template <typename E>
__device__ __forceinline__ void load_a(uint32_t (&a)[4], const E *s, int ld, int r0, int c0) {
  const int l = threadIdx.x & 31;
  ldsm<4>(a, s + (r0 + (l & 15)) * ld + c0 + (l >> 4) * 8);
}

// The A fragment of rows r0.., columns c0.. of the transpose of a shared array s[c][r]
template <typename E>
__device__ __forceinline__ void load_a_t(uint32_t (&a)[4], const E *s, int ld, int r0, int c0) {
  const int l = threadIdx.x & 31, m = l >> 3;
  ldsm_t<4>(a, s + (c0 + (l & 7) + (m >> 1) * 8) * ld + r0 + (m & 1) * 8);
}

// B fragments (k = c0..c0+15) of the 8-column tiles n0 (b[0], b[1]) and n0 + 8 (b[2], b[3]) of
// a shared array stored [n][k] (row stride ld)
template <typename E>
__device__ __forceinline__ void load_b2(uint32_t (&b)[4], const E *s, int ld, int n0, int c0) {
  const int l = threadIdx.x & 31;
  ldsm<4>(b, s + (n0 + (l & 7) + (l >> 4) * 8) * ld + c0 + ((l >> 3) & 1) * 8);
}

// the same fragments from a shared array stored [k][n]: ldmatrix .trans
template <typename E>
__device__ __forceinline__ void load_b2_t(uint32_t (&b)[4], const E *s, int ld, int k0, int n0) {
  const int l = threadIdx.x & 31;
  ldsm_t<4>(b, s + (k0 + (l & 7) + ((l >> 3) & 1) * 8) * ld + n0 + (l >> 4) * 8);
}

// The A fragment of a 16-column chunk from the C fragments of its two 8-column halves
template <typename E>
__device__ __forceinline__ void c_to_a(uint32_t (&a)[4], const float lo[4], const float hi[4]) {
  a[0] = elem<E>::pack(lo[0], lo[1]);
  a[1] = elem<E>::pack(lo[2], lo[3]);
  a[2] = elem<E>::pack(hi[0], hi[1]);
  a[3] = elem<E>::pack(hi[2], hi[3]);
}

// f(j, e, col, row) for each element c[j][e] of this lane's C fragments of a 16 x N tile:
// its column and its row within the tile
template <int N, typename F>
__device__ __forceinline__ void for_c(F f) {
  const int g = (threadIdx.x & 31) >> 2, qd = threadIdx.x & 3;
#pragma unroll
  for (int j = 0; j < N / 8; j++)
#pragma unroll
    for (int e = 0; e < 4; e++) f(j, e, j * 8 + 2 * qd + (e & 1), g + (e >= 2 ? 8 : 0));
}

// c (16 x N) += A B for one warp: A (16 x K) as fa(a, kc) gives its 16-column chunks, B from
// a row-major shared array, stored [N][K] (BT false: the product's operand is its transpose)
// or [K][N] (BT true: ldmatrix .trans)
template <typename E, int K, int N, bool BT, typename FA>
__device__ __forceinline__ void mma_tile(float (&c)[N / 8][4], FA fa, const E *sb, int ldb) {
#pragma unroll
  for (int kc = 0; kc < K / 16; kc++) {
    uint32_t a[4];
    fa(a, kc);
#pragma unroll
    for (int j = 0; j < N / 16; j++) {
      uint32_t b[4];
      if constexpr (BT) load_b2_t(b, sb, ldb, kc * 16, j * 16);
      else load_b2(b, sb, ldb, j * 16, kc * 16);
      mma(c[2 * j], a, b[0], b[1], E());
      mma(c[2 * j + 1], a, b[2], b[3], E());
    }
  }
}

// c = A B^T: A the 16 rows from r0 of a row-major shared array, B stored [N][K]: S = Q K^T and its kin
template <typename E, int K, int N>
__device__ __forceinline__ void mma_abt(float (&c)[N / 8][4], const E *sa, int lda, int r0, const E *sb, int ldb) {
#pragma unroll
  for (int j = 0; j < N / 8; j++) c[j][0] = c[j][1] = c[j][2] = c[j][3] = 0.f;
  mma_tile<E, K, N, false>(c, [&](uint32_t(&a)[4], int kc) { load_a(a, sa, lda, r0, kc * 16); }, sb, ldb);
}

// c += P B: P 16 x K in C fragments (registers, rounded to E), B stored [K][N]: O += P V and its kin
template <typename E, int K, int N>
__device__ __forceinline__ void mma_pb(float (&c)[N / 8][4], const float (&p)[K / 8][4], const E *sb, int ldb) {
  mma_tile<E, K, N, true>(c, [&](uint32_t(&a)[4], int kc) { c_to_a<E>(a, p[2 * kc], p[2 * kc + 1]); }, sb, ldb);
}

// The one walk over an R x D tile in 16-byte chunks, shared by every copy in and out: a warp
// takes 8 rows x 4 chunks (lane l: row l % 8, chunk l / 8), so each of its global requests is
// 8 whole 64-byte runs (coalesced) and each shared phase of 8 lanes is 8 rows at one chunk
// (conflict-free with the padded rows). f(row, column) per chunk.
template <int R, int D, typename F>
__device__ __forceinline__ void for_chunks(F f) {
  constexpr int CH = D / 8, UNITS = R * CH / 32;
  static_assert(CH % 4 == 0 && R % 8 == 0, "tiles of 8-row, 4-chunk units");
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int u = threadIdx.x >> 5; u < UNITS; u += WARPS)
    f((u / (CH / 4)) * 8 + (lane & 7), ((u % (CH / 4)) * 4 + (lane >> 3)) * 8);
}

// rows [r0, r0 + R) of a [rows][D] global array into shared memory (row stride D + PAD) by
// cp.async (the caller commits and waits); rows past `rows` as zeros, so masked keys multiply
// as 0, never as garbage NaN
template <typename E, int R, int D>
__device__ __forceinline__ void cp_rows(E *dst, const E *src, int64_t r0, int64_t rows) {
  for_chunks<R, D>([&](int r, int c) {
    bool in = r0 + r < rows;
    cp_async_cg(dst + r * (D + PAD) + c, src + (in ? r0 + r : 0) * D + c, in ? 16 : 0);
  });
}

// rows [r0, r0 + R) of a shared tile (row stride D + PAD) out to a [rows][D] global array
template <typename E, int R, int D>
__device__ __forceinline__ void store_rows(E *dst, const E *src, int64_t r0, int64_t rows) {
  for_chunks<R, D>([&](int r, int c) {
    if (r0 + r < rows)
      *reinterpret_cast<uint4 *>(dst + (r0 + r) * D + c) = *reinterpret_cast<const uint4 *>(src + r * (D + PAD) + c);
  });
}

// whether query t sees key s (causal: s <= t + S - T, bottom-right aligned as the cpu kernel)
__device__ __forceinline__ bool visible(int64_t t, int64_t s, int64_t T, int64_t S, int causal) {
  return t < T && s < S && (!causal || s <= t + (S - T));
}

}  // namespace flash

// L<E, D>(a, st) for a's dtype and head dim (flash_supports has checked them)
#define LAB_FLASH_DISPATCH(L, a, st)                                                                   \
  ((a)->dt == LAB_BF16 ? ((a)->D == 64 ? L<__nv_bfloat16, 64>(a, st) : (a)->D == 96 ? L<__nv_bfloat16, 96>(a, st)  \
                          : (a)->D == 128 ? L<__nv_bfloat16, 128>(a, st) : L<__nv_bfloat16, 256>(a, st))           \
                       : ((a)->D == 64 ? L<__half, 64>(a, st) : (a)->D == 96 ? L<__half, 96>(a, st)                \
                          : (a)->D == 128 ? L<__half, 128>(a, st) : L<__half, 256>(a, st)))

LAB_NS_END
