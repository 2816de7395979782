// FlashAttention-2 forward on the tensor cores (Dao 2023, "FlashAttention-2: Faster Attention
// with Better Parallelism and Work Partitioning"; the algorithm as kernels/cpu/flash_attention.c
// runs it, with the GPU's memory hierarchy as the paper and its public code use it).
//
// One block of 4 warps per (head, 64-query tile); each warp owns 16 query rows. Q, K and V
// tiles go to shared memory by cp.async (padded rows, flash_attention.cuh); K and V are
// double-buffered against each other as in FlashAttention-2: V of key tile n is in flight
// while S = Q K^T of tile n runs, K of tile n+1 while the softmax and O += P V of tile n run.
// Fragments come from shared memory by ldmatrix (Q and K plain, V .trans). S = Q K^T by mma
// into f32 registers, scaled into the log2 domain and masked (tails past T or S, the causal
// triangle, whose key tiles past the block's last query are never visited); an online
// softmax keeps the running max m and sum l per row (the max reduced over the 4 lanes that
// share a row), the accumulator is rescaled by exp2(m_old - m), and P, converted in
// registers to A fragments, multiplies V. The output is normalised by l, staged in shared
// memory and written with 16-byte coalesced stores; lse = (m + log2 l) ln 2 is kept for the
// backward. q, k, v, out [BH, T|S, D] contiguous bf16 or f16, D = 64, 96, 128 or 256 (key
// tiles of 64 rows, 32 at D = 256 so the accumulators stay in registers); sums in f32.
#include "flash_attention.cuh"

LAB_NS_BEGIN

using namespace flash;

constexpr int BR = 64; // queries per block
template <int D>
struct fwd_tiles {
  static constexpr int BC = D <= 128 ? 64 : 32; // keys per tile
  static constexpr size_t smem = (size_t)(BR + 2 * BC) * (D + PAD) * 2;
};

template <typename E, int D>
__global__ void __launch_bounds__(THREADS) flash_fwd_k(const E *__restrict__ q, const E *__restrict__ k,
                                                       const E *__restrict__ v, E *__restrict__ o,
                                                       float *__restrict__ lse, int64_t BH, int64_t T, int64_t S,
                                                       float scale, int causal) {
  constexpr int LD = D + PAD, BC = fwd_tiles<D>::BC;
  LAB_DYN_SMEM(unsigned char, smem);
  E *sQ = reinterpret_cast<E *>(smem), *sK = sQ + BR * LD, *sV = sK + BC * LD;
  const int64_t tiles = (T + BR - 1) / BR;
  const int64_t bh = blockIdx.x / tiles, t0 = (blockIdx.x % tiles) * BR;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, qd = lane & 3;
  q += bh * T * D, k += bh * S * D, v += bh * S * D, o += bh * T * D;
  const float sl2 = scale * LOG2E; // scores in the log2 domain: exp2 is one instruction

  // keys past the block's last query's causal limit are never visited
  int64_t kend = S;
  if (causal) {
    int64_t last = (t0 + BR < T ? t0 + BR : T) - 1;
    kend = last + (S - T) + 1;
    kend = kend < 0 ? 0 : (kend > S ? S : kend);
  }
  cp_rows<E, BR, D>(sQ, q, t0, T);
  if (kend > 0) cp_rows<E, BC, D>(sK, k, 0, S);
  cp_async_commit();

  float acc[D / 8][4];
#pragma unroll
  for (int dn = 0; dn < D / 8; dn++) acc[dn][0] = acc[dn][1] = acc[dn][2] = acc[dn][3] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f}; // rows g and g + 8 of the warp
  const int64_t row0 = t0 + warp * 16 + g;                  // this lane's first query

  for (int64_t s0 = 0; s0 < kend; s0 += BC) {
    cp_async_wait<0>();
    __syncthreads(); // K of this tile (and Q) landed for every thread; every warp is done with V
    cp_rows<E, BC, D>(sV, v, s0, S);
    cp_async_commit();

    float sc[BC / 8][4]; // S = Q K^T, 16 queries x BC keys per warp
    mma_abt<E, D, BC>(sc, sQ, LD, warp * 16, sK, LD);
    for_c<BC>([&](int j, int e, int col, int row) {
      int64_t t = t0 + warp * 16 + row, s = s0 + col;
      sc[j][e] = visible(t, s, T, S, causal) ? sc[j][e] * sl2 : -INFINITY;
    });

#pragma unroll
    for (int h = 0; h < 2; h++) {
      float mx = -INFINITY;
#pragma unroll
      for (int j = 0; j < BC / 8; j++) mx = fmaxf(mx, fmaxf(sc[j][2 * h], sc[j][2 * h + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      float mnew = fmaxf(m[h], mx);
      float base = mnew == -INFINITY ? 0.f : mnew; // a row with nothing visible yet: exp2(-inf) = 0
      float alpha = exp2f(m[h] - base);
      m[h] = mnew;
      l[h] *= alpha;
#pragma unroll
      for (int dn = 0; dn < D / 8; dn++) acc[dn][2 * h] *= alpha, acc[dn][2 * h + 1] *= alpha;
#pragma unroll
      for (int j = 0; j < BC / 8; j++) {
        float p0 = exp2f(sc[j][2 * h] - base), p1 = exp2f(sc[j][2 * h + 1] - base);
        sc[j][2 * h] = p0, sc[j][2 * h + 1] = p1;
        l[h] += p0 + p1; // this lane's columns; the 4 lanes of a row are summed at the end
      }
    }

    cp_async_wait<0>();
    __syncthreads(); // V landed for every thread; every warp is done with K
    if (s0 + BC < kend) cp_rows<E, BC, D>(sK, k, s0 + BC, S);
    cp_async_commit();
    mma_pb<E, BC, D>(acc, sc, sV, LD); // O += P V
  }

  // normalised rows into the Q tile's place: each warp its own 16 rows, which only it read
  // (no barrier needed, except where no key tile was visited and Q's copy was never waited for)
  if (kend == 0) {
    cp_async_wait<0>();
    __syncthreads();
  }
#pragma unroll
  for (int h = 0; h < 2; h++) {
    float sum = l[h];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    int64_t t = row0 + 8 * h;
    float inv = sum > 0.f ? 1.f / sum : 0.f; // a query that sees no key: output 0
    int r = warp * 16 + g + 8 * h;
#pragma unroll
    for (int dn = 0; dn < D / 8; dn++)
      *reinterpret_cast<uint32_t *>(sQ + r * LD + dn * 8 + 2 * qd) =
          elem<E>::pack(acc[dn][2 * h] * inv, acc[dn][2 * h + 1] * inv);
    if (qd == 0 && t < T) lse[bh * T + t] = sum > 0.f ? (m[h] + log2f(sum)) * LN2 : -INFINITY;
  }
  __syncthreads();
  store_rows<E, BR, D>(o, sQ, t0, T);
}

template <typename E, int D>
static int launch_fwd(const lab_flash_args *a, cudaStream_t s) {
  size_t smem = fwd_tiles<D>::smem;
  cudaError_t e = cudaFuncSetAttribute(flash_fwd_k<E, D>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
  if (e != cudaSuccess) return (int)e;
  int64_t blocks = a->BH * ((a->T + BR - 1) / BR);
  if (blocks > 0x7fffffffLL) return (int)cudaErrorInvalidConfiguration;
  lab_launch<flash_fwd_k<E, D>>((unsigned)blocks, THREADS, smem, s, 
      static_cast<const E *>(a->q), static_cast<const E *>(a->k), static_cast<const E *>(a->v),
      static_cast<E *>(a->out), static_cast<float *>(a->lse), a->BH, a->T, a->S, (float)a->scale, a->causal);
  return (int)cudaGetLastError();
}

extern "C" int LAB_CU(flash_supports)(lab_dtype dt, int64_t D, int64_t Dv) {
  return (dt == LAB_BF16 || dt == LAB_F16) && D == Dv && (D == 64 || D == 96 || D == 128 || D == 256);
}

// 16-byte loads need 16-byte aligned rows: every base pointer (rows are D * 2 bytes, D a multiple of 8)
extern "C" int LAB_CU(flash_aligned)(const void *p) { return ((uintptr_t)p & 15) == 0; }

extern "C" int LAB_CU(flash_fwd)(const lab_flash_args *a, lab_cuda_stream s) {
  if (!LAB_CU(flash_supports)(a->dt, a->D, a->Dv)) return (int)cudaErrorInvalidValue;
  if (a->BH == 0 || a->T == 0) return 0;
  if (!LAB_CU(flash_aligned)(a->q) || !LAB_CU(flash_aligned)(a->k) || !LAB_CU(flash_aligned)(a->v) ||
      !LAB_CU(flash_aligned)(a->out))
    return (int)cudaErrorMisalignedAddress;
  cudaStream_t st = reinterpret_cast<cudaStream_t>(s);
  return LAB_FLASH_DISPATCH(launch_fwd, a, st);
}

LAB_NS_END
