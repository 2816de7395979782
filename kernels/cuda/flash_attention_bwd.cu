// FlashAttention-2 backward on the tensor cores: the gradients of q, k and v from the
// forward's output and log-sum-exp, the scores recomputed tile by tile (never stored).
//
// Three kernels, as FlashAttention-2 splits the work:
//   1. delta[t] = rowdot(dO[t], O[t]) (one warp per query row), the f32 dq sums zeroed;
//   2. one block of 4 warps per (head, 64-key tile), each warp owning 16 keys, with dK and
//      dV of its keys in f32 registers for the whole pass. K and V are staged once by
//      cp.async; Q and dO tiles (BR queries: 64 at D = 64, 32 above, so no variant spills)
//      are double-buffered, the next tile in flight while this one is computed. For each
//      query tile that sees the keys (causal: from the first query past the diagonal), per
//      warp, every operand by ldmatrix from the one row-major copy of each tile (.trans
//      where the product wants it transposed: no transposed copies in shared memory):
//        S^T = K Q^T, P^T = exp2(S^T scale log2e - lse log2e) (masked: 0),
//        dV += P^T dO,  dP^T = V dO^T,  dS^T = P^T (dP^T - delta) scale,  dK += dS^T Q,
//      P^T and dS^T going from C fragments to A fragments in registers; dS^T is stored to
//      shared memory [key][query], and after a barrier the warps compute dQ = dS K for the
//      tile (A by ldmatrix .trans of dS^T) and add it to the f32 sums with atomicAdd (the
//      blocks of other key tiles add theirs). dK and dV leave through shared memory with
//      16-byte stores. At D = 256 dK and dV do not both fit in registers: two launches of
//      the same kernel, one for dV, one for dK and dQ (PASS P_DV, then P_DK | P_DQ);
//   3. dq = the f32 sums converted to bf16/f16.
// With lab.use_deterministic_algorithms(true) (a->deterministic) the atomics' order, which
// varies run to run, is taken out: kernel 2 leaves dQ out, and flash_bwd_dq_k computes it per
// query tile, summing the key tiles in order (S and dP recomputed: two more products per
// tile, the price FlashAttention-2's deterministic mode also pays in some form).
// q, k, v, o, dout and the gradients [BH, T|S, D] contiguous, D = 64, 96, 128 or 256.
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

enum { P_DV = 1, P_DK = 2, P_DQ = 4 }; // what one flash_bwd_k launch computes (PASS: a set of them)
constexpr int BC = 64;                  // keys per block, 16 per warp
template <int D>
struct bwd_tiles {
  static constexpr int BR = D <= 64 ? 64 : 32; // queries per tile
  // D = 256: dK and dV would not both fit in registers: two launches, dV then dK and dQ
  static constexpr bool SPLIT = D > 128;
  // sK, sV [BC][D + PAD]; sQ, sdO two buffers each of [BR][D + PAD]; sdS [BC][BR + PAD]
  static constexpr size_t smem = ((size_t)(2 * BC + 4 * BR) * (D + PAD) + (size_t)BC * (BR + PAD)) * 2;
  // blocks per SM the tiles are sized for: 2 up to D = 128 (shared bytes above: 64,512 / 58,368 /
  // 74,752), 1 at D = 256 (140,288); __launch_bounds__ holds ptxas to the registers that allows
  static constexpr int MIN_BLOCKS = D <= 128 ? 2 : 1;
};

template <typename E, int D, int PASS>
__global__ void __launch_bounds__(THREADS, bwd_tiles<D>::MIN_BLOCKS) flash_bwd_k(const E *__restrict__ q, const E *__restrict__ k,
                                                       const E *__restrict__ v, const E *__restrict__ dout,
                                                       const float *__restrict__ lse, const float *__restrict__ delta,
                                                       float *__restrict__ dq_acc, E *__restrict__ dk,
                                                       E *__restrict__ dv, int64_t T, int64_t S, float scale,
                                                       int causal) {
  constexpr int LD = D + PAD, BR = bwd_tiles<D>::BR, LDS = BR + PAD;
  constexpr bool DO_DV = PASS & P_DV, DO_DK = PASS & P_DK, DO_DQ = PASS & P_DQ;
  constexpr int MT = BR / 16, WPM = WARPS / MT, DQC = D / WPM; // dQ: 16-row tiles, warps per tile, columns per warp
  LAB_DYN_SMEM(unsigned char, smem);
  E *sK = reinterpret_cast<E *>(smem); // [BC][LD]  keys x d
  E *sV = sK + BC * LD;                 // [BC][LD]
  E *sQ = sV + BC * LD;                 // [2][BR][LD]  queries x d
  E *sdO = sQ + 2 * BR * LD;            // [2][BR][LD]
  E *sdS = sdO + 2 * BR * LD;           // [BC][LDS]  dS^T: keys x queries
  const int64_t ktiles = (S + BC - 1) / BC;
  const int64_t bh = blockIdx.x / ktiles, s0 = (blockIdx.x % ktiles) * BC;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, qd = lane & 3;
  q += bh * T * D, dout += bh * T * D, k += bh * S * D, v += bh * S * D, dk += bh * S * D, dv += bh * S * D;
  lse += bh * T, delta += bh * T, dq_acc += bh * T * D;
  const float sl2 = scale * LOG2E;

  // the first query that sees key s0: t + (S - T) >= s0
  int64_t tfirst = causal ? s0 - (S - T) : 0;
  tfirst = (tfirst < 0 ? 0 : tfirst) / BR * BR;
  cp_rows<E, BC, D>(sK, k, s0, S);
  if (DO_DK || DO_DQ) cp_rows<E, BC, D>(sV, v, s0, S);
  if (tfirst < T) cp_rows<E, BR, D>(sQ, q, tfirst, T), cp_rows<E, BR, D>(sdO, dout, tfirst, T);
  cp_async_commit();

  float dK[DO_DK ? D / 8 : 1][4], dV[DO_DV ? D / 8 : 1][4];
#pragma unroll
  for (int dn = 0; dn < D / 8; dn++)
#pragma unroll
    for (int e = 0; e < 4; e++) {
      if (DO_DK) dK[dn][e] = 0.f;
      if (DO_DV) dV[dn][e] = 0.f;
    }

  for (int64_t t0 = tfirst, it = 0; t0 < T; t0 += BR, it++) {
    const E *cQ = sQ + (it & 1) * BR * LD, *cdO = sdO + (it & 1) * BR * LD;
    cp_async_wait<0>();
    __syncthreads(); // this tile landed for every thread; every warp is done with the other buffer and sdS
    if (t0 + BR < T) {
      E *nQ = sQ + ((it + 1) & 1) * BR * LD, *ndO = sdO + ((it + 1) & 1) * BR * LD;
      cp_rows<E, BR, D>(nQ, q, t0 + BR, T), cp_rows<E, BR, D>(ndO, dout, t0 + BR, T);
    }
    cp_async_commit(); // the next tile flies while this one is computed

    // S^T (16 keys x BR queries) = K Q^T, then P^T = exp2(S^T scale log2e - lse log2e), masked 0
    float st[BR / 8][4];
    mma_abt<E, D, BR>(st, sK, LD, warp * 16, cQ, LD);
    for_c<BR>([&](int j, int e, int col, int row) {
      int64_t s = s0 + warp * 16 + row, t = t0 + col;
      float L = t < T ? lse[t] * LOG2E : INFINITY;
      st[j][e] = visible(t, s, T, S, causal) && L != -INFINITY ? exp2f(st[j][e] * sl2 - L) : 0.f;
    });

    if constexpr (DO_DV) mma_pb<E, BR, D>(dV, st, cdO, LD); // dV += P^T dO (dO stored [k = queries][n = d])
    // dP^T = V dO^T, then dS^T = P^T (dP^T - delta) scale, in place of dP^T
    [[maybe_unused]] float ds[BR / 8][4];
    if constexpr (DO_DK || DO_DQ) {
      mma_abt<E, D, BR>(ds, sV, LD, warp * 16, cdO, LD);
      for_c<BR>([&](int j, int e, int col, int) {
        int64_t t = t0 + col;
        ds[j][e] = st[j][e] * (ds[j][e] - (t < T ? delta[t] : 0.f)) * scale;
      });

      if constexpr (DO_DK) mma_pb<E, BR, D>(dK, ds, cQ, LD); // dK += dS^T Q (Q stored [k = queries][n = d])
    }
    if constexpr (DO_DQ) {
      // dS^T to shared memory [key][query] for dQ
#pragma unroll
      for (int kc = 0; kc < BR / 16; kc++) {
        uint32_t da[4];
        c_to_a<E>(da, ds[2 * kc], ds[2 * kc + 1]);
        int key = warp * 16 + g, col = kc * 16 + 2 * qd;
        *reinterpret_cast<uint32_t *>(sdS + key * LDS + col) = da[0];
        *reinterpret_cast<uint32_t *>(sdS + (key + 8) * LDS + col) = da[1];
        *reinterpret_cast<uint32_t *>(sdS + key * LDS + col + 8) = da[2];
        *reinterpret_cast<uint32_t *>(sdS + (key + 8) * LDS + col + 8) = da[3];
      }
      __syncthreads(); // dS^T of every warp's keys is in shared memory

      // dQ (16 queries x DQC columns per warp) += dS K  (A: dS from dS^T by ldmatrix .trans;
      // B: K stored [k = keys][n = d], .trans), into the f32 sums
      const int qr = (warp % MT) * 16, c0 = (warp / MT) * DQC;
      uint32_t sa[BC / 16][4];
#pragma unroll
      for (int kc = 0; kc < BC / 16; kc++) load_a_t(sa[kc], sdS, LDS, qr, kc * 16);
#pragma unroll
      for (int dn = 0; dn < DQC / 16; dn++) {
        float c[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
        mma_tile<E, BC, 16, true>(c, [&](uint32_t(&a)[4], int kc) { a[0] = sa[kc][0], a[1] = sa[kc][1], a[2] = sa[kc][2], a[3] = sa[kc][3]; },
                                  sK + c0 + dn * 16, LD);
#pragma unroll
        for (int e = 0; e < 8; e++) {
          int64_t t = t0 + qr + g + ((e & 2) ? 8 : 0);
          if (t < T) atomicAdd(dq_acc + t * D + c0 + dn * 16 + (e >> 2) * 8 + 2 * qd + (e & 1), c[e >> 2][e & 3]);
        }
      }
    }
  }

  // dK and dV through shared memory (each warp its own 16 key rows), out with 16-byte stores
  cp_async_wait<0>();
  __syncthreads();
#pragma unroll
  for (int h = 0; h < 2; h++) {
    int r = warp * 16 + g + 8 * h;
#pragma unroll
    for (int dn = 0; dn < D / 8; dn++) {
      if (DO_DK)
        *reinterpret_cast<uint32_t *>(sK + r * LD + dn * 8 + 2 * qd) = elem<E>::pack(dK[dn][2 * h], dK[dn][2 * h + 1]);
      if (DO_DV)
        *reinterpret_cast<uint32_t *>(sV + r * LD + dn * 8 + 2 * qd) = elem<E>::pack(dV[dn][2 * h], dV[dn][2 * h + 1]);
    }
  }
  __syncthreads();
  if (DO_DK) store_rows<E, BC, D>(dk, sK, s0, S);
  if (DO_DV) store_rows<E, BC, D>(dv, sV, s0, S);
}

template <typename E, int D, int PASS>
static int launch_bwd_pass(const lab_flash_args *a, cudaStream_t s, const float *delta, float *dq_acc) {
  size_t smem = bwd_tiles<D>::smem;
  cudaError_t e = cudaFuncSetAttribute(flash_bwd_k<E, D, PASS>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
  if (e != cudaSuccess) return (int)e;
  int64_t blocks = a->BH * ((a->S + BC - 1) / BC);
  if (blocks > 0x7fffffffLL) return (int)cudaErrorInvalidConfiguration;
  lab_launch<flash_bwd_k<E, D, PASS>>((unsigned)blocks, THREADS, smem, s, static_cast<const E *>(a->q),
      static_cast<const E *>(a->k), static_cast<const E *>(a->v), static_cast<const E *>(a->dout),
      static_cast<const float *>(a->lse), delta, dq_acc, static_cast<E *>(a->dk), static_cast<E *>(a->dv), a->T, a->S,
      (float)a->scale, a->causal);
  return (int)cudaGetLastError();
}

// dQ alone, in a fixed order (lab.use_deterministic_algorithms): one block of 4 warps per
// (head, 64-query tile), each warp 16 queries, looping over the key tiles in order with K and
// V double-buffered by cp.async; per tile S = Q K^T, P = exp2(S scale log2e - lse log2e),
// dP = dO V^T, dS = P (dP - delta) scale, dQ += dS K, all by the same tile loop. dQ stays in
// f32 registers and leaves once, rounded, through shared memory. Key tiles of 64 rows (32 at
// D = 256, as the forward).
// blocks per SM it is sized for: 3 at D = 64 (55,296 shared bytes; 165 registers before the bound),
// 2 at D = 96 and 128 (79,872 / 104,448), 1 at D = 256 (135,168). A bound of 2 at D = 64 let ptxas
// take 217 registers: 2 blocks, not 3.
template <typename E, int D>
__global__ void __launch_bounds__(THREADS, D <= 64 ? 3 : D <= 128 ? 2 : 1) flash_bwd_dq_k(const E *__restrict__ q, const E *__restrict__ k,
                                                          const E *__restrict__ v, const E *__restrict__ dout,
                                                          const float *__restrict__ lse, const float *__restrict__ delta,
                                                          E *__restrict__ dq, int64_t T, int64_t S, float scale, int causal) {
  constexpr int LD = D + PAD, BQ = 64, BK = D <= 128 ? 64 : 32;
  LAB_DYN_SMEM(unsigned char, smem);
  E *sQ = reinterpret_cast<E *>(smem), *sdO = sQ + BQ * LD, *sK = sdO + BQ * LD, *sV = sK + 2 * BK * LD;
  const int64_t tiles = (T + BQ - 1) / BQ;
  const int64_t bh = blockIdx.x / tiles, t0 = (blockIdx.x % tiles) * BQ;
  const int warp = threadIdx.x >> 5, g = (threadIdx.x & 31) >> 2, qd = threadIdx.x & 3;
  q += bh * T * D, dout += bh * T * D, dq += bh * T * D, k += bh * S * D, v += bh * S * D;
  lse += bh * T, delta += bh * T;
  const float sl2 = scale * LOG2E;
  int64_t kend = S; // keys past the tile's last query's causal limit are never visited
  if (causal) {
    kend = (t0 + BQ < T ? t0 + BQ : T) - 1 + (S - T) + 1;
    kend = kend < 0 ? 0 : (kend > S ? S : kend);
  }
  float L[2], Dl[2]; // this lane's rows g and g + 8
  for (int h = 0; h < 2; h++) {
    int64_t t = t0 + warp * 16 + g + 8 * h;
    L[h] = t < T ? lse[t] * LOG2E : -INFINITY;
    Dl[h] = t < T ? delta[t] : 0.f;
  }
  cp_rows<E, BQ, D>(sQ, q, t0, T), cp_rows<E, BQ, D>(sdO, dout, t0, T);
  if (kend > 0) cp_rows<E, BK, D>(sK, k, 0, S), cp_rows<E, BK, D>(sV, v, 0, S);
  cp_async_commit();
  float acc[D / 8][4] = {};
  for (int64_t s0 = 0, it = 0; s0 < kend; s0 += BK, it++) {
    const E *cK = sK + (it & 1) * BK * LD, *cV = sV + (it & 1) * BK * LD;
    cp_async_wait<0>();
    __syncthreads(); // this key tile landed for every thread; every warp is done with the other buffer
    if (s0 + BK < kend) {
      E *nK = sK + ((it + 1) & 1) * BK * LD, *nV = sV + ((it + 1) & 1) * BK * LD;
      cp_rows<E, BK, D>(nK, k, s0 + BK, S), cp_rows<E, BK, D>(nV, v, s0 + BK, S);
    }
    cp_async_commit();
    float p[BK / 8][4], ds[BK / 8][4];
    mma_abt<E, D, BK>(p, sQ, LD, warp * 16, cK, LD);
    mma_abt<E, D, BK>(ds, sdO, LD, warp * 16, cV, LD);
    for_c<BK>([&](int j, int e, int col, int row) {
      int h = row >= 8;
      bool vis = visible(t0 + warp * 16 + row, s0 + col, T, S, causal) && L[h] != -INFINITY;
      ds[j][e] = vis ? exp2f(p[j][e] * sl2 - L[h]) * (ds[j][e] - Dl[h]) * scale : 0.f;
    });
    mma_pb<E, BK, D>(acc, ds, cK, LD);
  }
  cp_async_wait<0>(); // (where no key tile was visited, Q's copy has not landed yet)
  __syncthreads();     // every lane is done reading sQ
#pragma unroll
  for (int h = 0; h < 2; h++)
#pragma unroll
    for (int dn = 0; dn < D / 8; dn++) // each warp its own 16 rows of sQ
      *reinterpret_cast<uint32_t *>(sQ + (warp * 16 + g + 8 * h) * LD + dn * 8 + 2 * qd) =
          elem<E>::pack(acc[dn][2 * h], acc[dn][2 * h + 1]);
  __syncthreads();
  store_rows<E, BQ, D>(dq, sQ, t0, T);
}

template <typename E, int D>
static int launch_dq(const lab_flash_args *a, cudaStream_t s, const float *delta) {
  constexpr int BK = D <= 128 ? 64 : 32;
  size_t smem = (size_t)(2 * 64 + 4 * BK) * (D + PAD) * 2;
  cudaError_t e = cudaFuncSetAttribute(flash_bwd_dq_k<E, D>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
  if (e != cudaSuccess) return (int)e;
  int64_t blocks = a->BH * ((a->T + 63) / 64);
  if (blocks > 0x7fffffffLL) return (int)cudaErrorInvalidConfiguration;
  lab_launch<flash_bwd_dq_k<E, D>>((unsigned)blocks, THREADS, smem, s, static_cast<const E *>(a->q),
      static_cast<const E *>(a->k), static_cast<const E *>(a->v), static_cast<const E *>(a->dout),
      static_cast<const float *>(a->lse), delta, static_cast<E *>(a->dq), a->T, a->S, (float)a->scale, a->causal);
  return (int)cudaGetLastError();
}

template <typename E, int D>
static int launch_bwd(const lab_flash_args *a, cudaStream_t s) {
  float *dq_acc = static_cast<float *>(a->work);
  float *delta = dq_acc + a->BH * a->T * D;
  int64_t rows = a->BH * a->T;
  cudaError_t e = cudaSuccess;
  // deterministic: dq by flash_bwd_dq_k, one block per query tile summing the key tiles in
  // order, instead of the f32 atomics of flash_bwd_k (whose order varies run to run)
  const bool det = a->deterministic;
  if (!det && (e = cudaMemsetAsync(dq_acc, 0, (size_t)(rows * D) * sizeof(float), s)) != cudaSuccess) return (int)e;
  if (rows > 0) {
    lab_launch<flash_bwd_pre_k<E, D>>((unsigned)((rows + WARPS - 1) / WARPS), THREADS, 0, s,
        static_cast<const E *>(a->o), static_cast<const E *>(a->dout), delta, rows);
    if ((e = cudaGetLastError()) != cudaSuccess) return (int)e;
  }
  int rc = 0;
  if (a->S > 0) {
    if constexpr (bwd_tiles<D>::SPLIT) { // dK and dV do not both fit in registers
      rc = launch_bwd_pass<E, D, P_DV>(a, s, delta, dq_acc);
      if (!rc) rc = det ? launch_bwd_pass<E, D, P_DK>(a, s, delta, dq_acc) : launch_bwd_pass<E, D, P_DK | P_DQ>(a, s, delta, dq_acc);
    } else {
      rc = det ? launch_bwd_pass<E, D, P_DV | P_DK>(a, s, delta, dq_acc)
               : launch_bwd_pass<E, D, P_DV | P_DK | P_DQ>(a, s, delta, dq_acc);
    }
  }
  if (rc || rows == 0) return rc;
  if (det) return launch_dq<E, D>(a, s, delta);
  lab_launch<flash_bwd_post_k<E>>(lab_blocks(rows * D, 256), 256, 0, s, dq_acc, static_cast<E *>(a->dq), rows * D);
  return (int)cudaGetLastError();
}

extern "C" int LAB_CU(flash_bwd)(const lab_flash_args *a, lab_cuda_stream s) {
  if (!LAB_CU(flash_supports)(a->dt, a->D, a->Dv)) return (int)cudaErrorInvalidValue;
  if (a->BH == 0) return 0;
  const void *ptrs[] = {a->q, a->k, a->v, a->o, a->dout, a->dq, a->dk, a->dv};
  for (const void *p : ptrs)
    if (!LAB_CU(flash_aligned)(p)) return (int)cudaErrorMisalignedAddress;
  cudaStream_t st = reinterpret_cast<cudaStream_t>(s);
  return LAB_FLASH_DISPATCH(launch_bwd, a, st);
}

LAB_NS_END
