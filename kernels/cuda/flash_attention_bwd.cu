// FlashAttention-2 backward on the tensor cores: the gradients of q, k and v from the
// forward's output and log-sum-exp, the scores recomputed tile by tile (never stored).
//
// Three kernels, as FlashAttention-2 splits the work:
//   1. delta[t] = rowdot(dO[t], O[t]) (one warp per query row), the f32 dq sums zeroed;
//   2. one block of 4 warps per (head, 64-key tile), each warp owning 16 keys, with dK and
//      dV of its keys in f32 registers for the whole pass. For each 64-query tile that sees
//      the keys (causal: from the first query past the diagonal): Q, Q^T, dO, dO^T staged in
//      shared memory, then per warp
//        S^T = K Q^T (mma), P^T = exp2(S^T scale log2e - lse log2e) (masked: 0),
//        dV += P^T dO,  dP^T = V dO^T,  dS^T = P^T (dP^T - delta) scale,  dK += dS^T Q,
//      P^T and dS^T going from C fragments to A fragments in registers; dS is written to
//      shared memory transposed, and after a barrier each warp computes 16 query rows of
//      dQ = dS K for the tile and adds them to the f32 sums with atomicAdd (the blocks of
//      other key tiles add theirs);
//   3. dq = the f32 sums converted to bf16/f16.
// q, k, v, o, dout and the gradients [BH, T|S, D] contiguous, D = 64 or 128.
#include "flash_attention.cuh"

LAB_NS_BEGIN

using namespace flash;

template <typename E, int D>
__global__ void flash_bwd_pre_k(const E *__restrict__ o, const E *__restrict__ dout, float *__restrict__ delta,
                                int64_t rows) {
  int64_t r = blockIdx.x * (int64_t)WARPS + (threadIdx.x >> 5);
  if (r >= rows) return;
  int lane = threadIdx.x & 31;
  float s = 0.f;
  for (int d = lane; d < D; d += 32) s += elem<E>::to_f(o[r * D + d]) * elem<E>::to_f(dout[r * D + d]);
  for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
  if (lane == 0) delta[r] = s;
}

template <typename E>
__global__ void flash_bwd_post_k(const float *__restrict__ acc, E *__restrict__ dq, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    dq[i] = elem<E>::from_f(acc[i]);
}

template <typename E, int D>
__global__ void __launch_bounds__(THREADS) flash_bwd_k(const E *__restrict__ q, const E *__restrict__ k,
                                                       const E *__restrict__ v, const E *__restrict__ dout,
                                                       const float *__restrict__ lse, const float *__restrict__ delta,
                                                       float *__restrict__ dq_acc, E *__restrict__ dk,
                                                       E *__restrict__ dv, int64_t T, int64_t S, float scale,
                                                       int causal) {
  constexpr int LD = D + PAD, LDT = BR + PAD;
  LAB_DYN_SMEM(unsigned char, smem);
  E *sK = reinterpret_cast<E *>(smem);   // [BC][LD]  keys x d
  E *sKt = sK + BC * LD;                 // [D][LDT]  d x keys
  E *sV = sKt + D * LDT;                 // [BC][LD]
  E *sQ = sV + BC * LD;                  // [BR][LD]  queries x d
  E *sQt = sQ + BR * LD;                 // [D][LDT]  d x queries
  E *sdO = sQt + D * LDT;                // [BR][LD]
  E *sdOt = sdO + BR * LD;               // [D][LDT]
  E *sdS = sdOt + D * LDT;               // [BR][LDT] queries x keys
  float *sL = reinterpret_cast<float *>(sdS + BR * LDT); // [BR] lse * log2e
  float *sD = sL + BR;                                    // [BR] delta
  const int64_t ktiles = (S + BC - 1) / BC;
  const int64_t bh = blockIdx.x / ktiles, s0 = (blockIdx.x % ktiles) * BC;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, qd = lane & 3;
  q += bh * T * D, dout += bh * T * D, k += bh * S * D, v += bh * S * D, dk += bh * S * D, dv += bh * S * D;
  lse += bh * T, delta += bh * T, dq_acc += bh * T * D;
  const float sl2 = scale * LOG2E;

  load_rows<E, D>(sK, LD, k, s0, S);
  load_rows_t<E, D>(sKt, LDT, k, s0, S);
  load_rows<E, D>(sV, LD, v, s0, S);

  float dK[D / 8][4], dV[D / 8][4];
#pragma unroll
  for (int dn = 0; dn < D / 8; dn++)
#pragma unroll
    for (int e = 0; e < 4; e++) dK[dn][e] = dV[dn][e] = 0.f;
  const int64_t key0 = s0 + warp * 16 + g; // this lane's first key (the second is key0 + 8)

  // the first query that sees key s0: t + (S - T) >= s0
  int64_t tfirst = causal ? s0 - (S - T) : 0;
  tfirst = tfirst < 0 ? 0 : tfirst;
  for (int64_t t0 = tfirst / BR * BR; t0 < T; t0 += BR) {
    __syncthreads(); // the previous tile's readers are done
    load_rows<E, D>(sQ, LD, q, t0, T);
    load_rows_t<E, D>(sQt, LDT, q, t0, T);
    load_rows<E, D>(sdO, LD, dout, t0, T);
    load_rows_t<E, D>(sdOt, LDT, dout, t0, T);
    for (int i = threadIdx.x; i < BR; i += THREADS) {
      bool in = t0 + i < T;
      sL[i] = in ? lse[t0 + i] * LOG2E : INFINITY;
      sD[i] = in ? delta[t0 + i] : 0.f;
    }
    __syncthreads();

    // S^T (16 keys x 64 queries) = K Q^T, then P^T
    float st[BR / 8][4];
#pragma unroll
    for (int j = 0; j < BR / 8; j++) {
      st[j][0] = st[j][1] = st[j][2] = st[j][3] = 0.f;
#pragma unroll
      for (int kc = 0; kc < D / 16; kc++) {
        uint32_t a[4], b0, b1;
        load_a(a, sK, LD, warp * 16, kc * 16);
        load_b(b0, b1, sQ, LD, j * 8, kc * 16);
        mma(st[j], a, b0, b1, E());
      }
#pragma unroll
      for (int e = 0; e < 4; e++) {
        int64_t s = key0 + (e >= 2 ? 8 : 0);
        int col = j * 8 + 2 * qd + (e & 1);
        float L = sL[col];
        st[j][e] = visible(t0 + col, s, T, S, causal) && L != -INFINITY ? exp2f(st[j][e] * sl2 - L) : 0.f;
      }
    }

    // dV += P^T dO  (k = queries, n = d: B read from dO^T)
#pragma unroll
    for (int kc = 0; kc < BR / 16; kc++) {
      uint32_t pa[4];
      c_to_a<E>(pa, st[2 * kc], st[2 * kc + 1]);
#pragma unroll
      for (int dn = 0; dn < D / 8; dn++) {
        uint32_t b0, b1;
        load_b(b0, b1, sdOt, LDT, dn * 8, kc * 16);
        mma(dV[dn], pa, b0, b1, E());
      }
    }

    // dP^T = V dO^T, then dS^T = P^T (dP^T - delta) scale, in place of dP^T
    float ds[BR / 8][4];
#pragma unroll
    for (int j = 0; j < BR / 8; j++) {
      ds[j][0] = ds[j][1] = ds[j][2] = ds[j][3] = 0.f;
#pragma unroll
      for (int kc = 0; kc < D / 16; kc++) {
        uint32_t a[4], b0, b1;
        load_a(a, sV, LD, warp * 16, kc * 16);
        load_b(b0, b1, sdO, LD, j * 8, kc * 16);
        mma(ds[j], a, b0, b1, E());
      }
#pragma unroll
      for (int e = 0; e < 4; e++) {
        int col = j * 8 + 2 * qd + (e & 1);
        ds[j][e] = st[j][e] * (ds[j][e] - sD[col]) * scale;
      }
    }

    // dK += dS^T Q  (k = queries, n = d: B read from Q^T)
#pragma unroll
    for (int kc = 0; kc < BR / 16; kc++) {
      uint32_t da[4];
      c_to_a<E>(da, ds[2 * kc], ds[2 * kc + 1]);
#pragma unroll
      for (int dn = 0; dn < D / 8; dn++) {
        uint32_t b0, b1;
        load_b(b0, b1, sQt, LDT, dn * 8, kc * 16);
        mma(dK[dn], da, b0, b1, E());
      }
    }

    // dS (queries x keys) into shared memory for dQ
#pragma unroll
    for (int j = 0; j < BR / 8; j++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        int col = j * 8 + 2 * qd + (e & 1), key = warp * 16 + g + (e >= 2 ? 8 : 0);
        sdS[col * LDT + key] = elem<E>::from_f(ds[j][e]);
      }
    __syncthreads();

    // dQ (this warp's 16 queries x D) += dS K  (k = keys, n = d: B read from K^T), into the f32 sums
#pragma unroll
    for (int dn = 0; dn < D / 8; dn++) {
      float c[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
      for (int kc = 0; kc < BC / 16; kc++) {
        uint32_t a[4], b0, b1;
        load_a(a, sdS, LDT, warp * 16, kc * 16);
        load_b(b0, b1, sKt, LDT, dn * 8, kc * 16);
        mma(c, a, b0, b1, E());
      }
#pragma unroll
      for (int e = 0; e < 4; e++) {
        int64_t t = t0 + warp * 16 + g + (e >= 2 ? 8 : 0);
        if (t < T) atomicAdd(dq_acc + t * D + dn * 8 + 2 * qd + (e & 1), c[e]);
      }
    }
  }

#pragma unroll
  for (int h = 0; h < 2; h++) {
    int64_t s = key0 + 8 * h;
    if (s >= S) continue;
#pragma unroll
    for (int dn = 0; dn < D / 8; dn++) {
      *reinterpret_cast<uint32_t *>(dk + s * D + dn * 8 + 2 * qd) = elem<E>::pack(dK[dn][2 * h], dK[dn][2 * h + 1]);
      *reinterpret_cast<uint32_t *>(dv + s * D + dn * 8 + 2 * qd) = elem<E>::pack(dV[dn][2 * h], dV[dn][2 * h + 1]);
    }
  }
}

// sK, sV, sQ, sdO [64][D + PAD]; sKt, sQt, sdOt [D][64 + PAD]; sdS [64][64 + PAD]; lse and delta
static size_t bwd_smem(int D) {
  size_t elems = (size_t)(4 * 64 * (D + PAD) + 3 * D * (64 + PAD) + 64 * (64 + PAD));
  return elems * 2 + 2 * BR * sizeof(float);
}

template <typename E, int D>
static int launch_bwd(const lab_flash_args *a, cudaStream_t s) {
  float *dq_acc = static_cast<float *>(a->work);
  float *delta = dq_acc + a->BH * a->T * D;
  int64_t rows = a->BH * a->T;
  cudaError_t e = cudaMemsetAsync(dq_acc, 0, (size_t)(rows * D) * sizeof(float), s);
  if (e != cudaSuccess) return (int)e;
  if (rows > 0) {
    lab_launch<flash_bwd_pre_k<E, D>>((unsigned)((rows + WARPS - 1) / WARPS), THREADS, 0, s, 
        static_cast<const E *>(a->o), static_cast<const E *>(a->dout), delta, rows);
    if ((e = cudaGetLastError()) != cudaSuccess) return (int)e;
  }
  if (a->S > 0) {
    size_t smem = bwd_smem(D);
    e = cudaFuncSetAttribute(flash_bwd_k<E, D>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (e != cudaSuccess) return (int)e;
    int64_t blocks = a->BH * ((a->S + BC - 1) / BC);
    if (blocks > 0x7fffffffLL) return (int)cudaErrorInvalidConfiguration;
    lab_launch<flash_bwd_k<E, D>>((unsigned)blocks, THREADS, smem, s, 
        static_cast<const E *>(a->q), static_cast<const E *>(a->k), static_cast<const E *>(a->v),
        static_cast<const E *>(a->dout), static_cast<const float *>(a->lse), delta, dq_acc, static_cast<E *>(a->dk),
        static_cast<E *>(a->dv), a->T, a->S, (float)a->scale, a->causal);
    if ((e = cudaGetLastError()) != cudaSuccess) return (int)e;
  }
  if (rows > 0) lab_launch<flash_bwd_post_k<E>>(lab_blocks(rows * D, 256), 256, 0, s, dq_acc, static_cast<E *>(a->dq), rows * D);
  return (int)cudaGetLastError();
}

extern "C" int LAB_CU(flash_bwd)(const lab_flash_args *a, lab_cuda_stream s) {
  if (!LAB_CU(flash_supports)(a->dt, a->D, a->Dv)) return (int)cudaErrorInvalidValue;
  if (a->BH == 0) return 0;
  const void *ptrs[] = {a->q, a->k, a->v, a->o, a->dout, a->dq, a->dk, a->dv};
  for (const void *p : ptrs)
    if (!LAB_CU(flash_aligned)(p)) return (int)cudaErrorMisalignedAddress;
  cudaStream_t st = reinterpret_cast<cudaStream_t>(s);
  if (a->dt == LAB_BF16) return a->D == 64 ? launch_bwd<__nv_bfloat16, 64>(a, st) : launch_bwd<__nv_bfloat16, 128>(a, st);
  return a->D == 64 ? launch_bwd<__half, 64>(a, st) : launch_bwd<__half, 128>(a, st);
}

LAB_NS_END
