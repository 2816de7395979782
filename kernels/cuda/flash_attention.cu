// FlashAttention-2 forward on the tensor cores (Dao 2023, "FlashAttention-2: Faster Attention
// with Better Parallelism and Work Partitioning"; the algorithm as kernels/cpu/flash_attention.c
// runs it, with the GPU's memory hierarchy).
//
// One block of 4 warps per (head, 64-query tile); each warp owns 16 query rows. The Q tile is
// read once into registers as mma A fragments. For each 64-key tile (the causal ones past the
// block's last query skipped): K and V^T are staged in shared memory, S = Q K^T by mma into
// f32 registers, scaled into the log2 domain and masked (tails past T or S, the causal
// triangle), an online softmax keeps the running max m and sum l per row (the max reduced
// over the 4 lanes that share a row), the output accumulator is rescaled by exp2(m_old - m),
// and P, converted in registers to the A fragments of the second product, multiplies V.
// Output rows are normalised by l at the end, and lse = (m + log2 l) ln 2 is saved for the
// backward. q, k, v, out [BH, T|S, D] contiguous bf16 or f16, D = 64 or 128; sums in f32.
//
// Left for later (measured nowhere yet: no GPU in the sessions that wrote this): ldmatrix
// and a swizzled layout instead of padded rows, cp.async double buffering of K/V, wgmma on
// sm_90a.
#include "flash_attention.cuh"

LAB_NS_BEGIN

using namespace flash;

template <typename E, int D>
__global__ void __launch_bounds__(THREADS) flash_fwd_k(const E *__restrict__ q, const E *__restrict__ k,
                                                       const E *__restrict__ v, E *__restrict__ o,
                                                       float *__restrict__ lse, int64_t BH, int64_t T, int64_t S,
                                                       float scale, int causal) {
  constexpr int LD = D + PAD, LDT = BC + PAD;
  LAB_DYN_SMEM(unsigned char, smem);
  E *sQ = reinterpret_cast<E *>(smem), *sK = sQ + BR * LD, *sVt = sK + BC * LD;
  const int64_t tiles = (T + BR - 1) / BR;
  const int64_t bh = blockIdx.x / tiles, t0 = (blockIdx.x % tiles) * BR;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, qd = lane & 3;
  q += bh * T * D, k += bh * S * D, v += bh * S * D, o += bh * T * D;
  const float sl2 = scale * LOG2E; // scores in the log2 domain: exp2 is one instruction

  load_rows<E, D>(sQ, LD, q, t0, T);
  __syncthreads();
  uint32_t qa[D / 16][4];
#pragma unroll
  for (int kc = 0; kc < D / 16; kc++) load_a(qa[kc], sQ, LD, warp * 16, kc * 16);

  float acc[D / 8][4];
#pragma unroll
  for (int dn = 0; dn < D / 8; dn++) acc[dn][0] = acc[dn][1] = acc[dn][2] = acc[dn][3] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f}; // rows g and g + 8 of the warp
  const int64_t row0 = t0 + warp * 16 + g;                  // this lane's first query

  // keys past the block's last query's causal limit are never visited
  int64_t kend = S;
  if (causal) {
    int64_t last = (t0 + BR < T ? t0 + BR : T) - 1;
    kend = last + (S - T) + 1;
    kend = kend < 0 ? 0 : (kend > S ? S : kend);
  }
  for (int64_t s0 = 0; s0 < kend; s0 += BC) {
    __syncthreads(); // every warp is done with the previous K and V tiles
    load_rows<E, D>(sK, LD, k, s0, S);
    load_rows_t<E, D>(sVt, LDT, v, s0, S);
    __syncthreads();

    float sc[BC / 8][4];
#pragma unroll
    for (int j = 0; j < BC / 8; j++) {
      sc[j][0] = sc[j][1] = sc[j][2] = sc[j][3] = 0.f;
#pragma unroll
      for (int kc = 0; kc < D / 16; kc++) {
        uint32_t b0, b1;
        load_b(b0, b1, sK, LD, j * 8, kc * 16);
        mma(sc[j], qa[kc], b0, b1, E());
      }
    }
#pragma unroll
    for (int j = 0; j < BC / 8; j++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        int64_t t = row0 + (e >= 2 ? 8 : 0), s = s0 + j * 8 + 2 * qd + (e & 1);
        sc[j][e] = visible(t, s, T, S, causal) ? sc[j][e] * sl2 : -INFINITY;
      }

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

#pragma unroll
    for (int kc = 0; kc < BC / 16; kc++) {
      uint32_t pa[4];
      c_to_a<E>(pa, sc[2 * kc], sc[2 * kc + 1]);
#pragma unroll
      for (int dn = 0; dn < D / 8; dn++) {
        uint32_t b0, b1;
        load_b(b0, b1, sVt, LDT, dn * 8, kc * 16);
        mma(acc[dn], pa, b0, b1, E());
      }
    }
  }

#pragma unroll
  for (int h = 0; h < 2; h++) {
    float sum = l[h];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    int64_t t = row0 + 8 * h;
    float inv = sum > 0.f ? 1.f / sum : 0.f; // a query that sees no key: output 0
    if (t < T) {
#pragma unroll
      for (int dn = 0; dn < D / 8; dn++) {
        uint32_t pk = elem<E>::pack(acc[dn][2 * h] * inv, acc[dn][2 * h + 1] * inv);
        *reinterpret_cast<uint32_t *>(o + t * D + dn * 8 + 2 * qd) = pk;
      }
      if (qd == 0) lse[bh * T + t] = sum > 0.f ? (m[h] + log2f(sum)) * LN2 : -INFINITY;
    }
  }
}

static size_t fwd_smem(int D) { return (size_t)((BR + BC) * (D + PAD) + D * (BC + PAD)) * 2; }

template <typename E, int D>
static int launch_fwd(const lab_flash_args *a, cudaStream_t s) {
  size_t smem = fwd_smem(D);
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
  return (dt == LAB_BF16 || dt == LAB_F16) && D == Dv && (D == 64 || D == 128);
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
  if (a->dt == LAB_BF16) return a->D == 64 ? launch_fwd<__nv_bfloat16, 64>(a, st) : launch_fwd<__nv_bfloat16, 128>(a, st);
  return a->D == 64 ? launch_fwd<__half, 64>(a, st) : launch_fwd<__half, 128>(a, st);
}

LAB_NS_END
