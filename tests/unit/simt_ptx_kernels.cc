// Kernels for tests/unit/test_simt_ptx.c: ldmatrix and cp.async through the wrappers the
// FlashAttention kernels use (kernels/cuda/flash_ptx.cuh), compiled for the SIMT interpreter
// exactly as kernels/cuda is (LAB_SIMT, the __tsan_* access hooks).
#include "../../kernels/cuda/flash_ptx.cuh"

LAB_NS_BEGIN

// Shared memory holds 4 8x8 matrices of 16-bit elements, matrix i row r at element
// ((7 - r) * 4 + i) * 8 (rows in reverse order, matrices interleaved): lane l gives the
// address of row l % 8 of matrix l / 8. out[l * 4 + i] = register i of lane l.
template <int N, bool TRANS>
__global__ void ldsm_k(const uint16_t *src, uint32_t *out) {
  LAB_DYN_SMEM(uint16_t, s);
  for (int i = threadIdx.x; i < 256; i += 32) s[i] = src[i];
  __syncthreads();
  const int l = threadIdx.x, row = l % 8, mat = l / 8;
  uint32_t r[N];
  const uint16_t *addr = s + ((7 - row) * 4 + mat) * 8;
  if (TRANS) flash::ldsm_t<N>(r, addr);
  else flash::ldsm<N>(r, addr);
  for (int i = 0; i < N; i++) out[l * 4 + i] = r[i];
}

// Every thread copies a 16-byte chunk of src three ways into shared memory, 16 bytes
// (cg), 8 bytes (ca) and 4 bytes (ca), with src_bytes = (tid % 5) * 4 clamped to the size
// (so some copies are partly or wholly zero-filled), in two commit groups: wait_group 1
// lands the first, wait_group 0 the second. Shared memory starts as 0xee bytes; out gets
// the three regions after the waits and the barrier.
__global__ void cp_async_k(const unsigned char *src, unsigned char *out) {
  LAB_DYN_SMEM(unsigned char, s);
  const int t = threadIdx.x, n = blockDim.x;
  for (int i = t; i < 3 * 16 * n; i += n) s[i] = 0xee;
  __syncthreads();
  int sb = (t % 5) * 4;
  flash::cp_async_cg(s + 16 * t, src + 16 * t, sb);
  flash::cp_async_commit();
  flash::cp_async_ca<8>(s + 16 * n + 8 * t, src + 8 * t, sb < 8 ? sb : 8);
  flash::cp_async_ca<4>(s + 24 * n + 4 * t, src + 4 * t, sb < 4 ? sb : 4);
  flash::cp_async_commit();
  flash::cp_async_wait<1>();
  unsigned char first = s[16 * t]; // its own first group: landed
  flash::cp_async_wait<0>();
  __syncthreads();
  for (int i = t; i < 28 * n; i += n) out[i] = s[i];
  out[28 * n + t] = first;
}

// Reads its own cp.async destination before the wait (mode 1), or another thread's after
// its own wait but with no barrier (mode 2), or the second of two groups after wait_group 1
// (mode 3: only the first has landed), or correctly (mode 0). out[t] = what was read.
__global__ void cp_async_early_k(const uint32_t *src, uint32_t *out, int mode) {
  LAB_DYN_SMEM(uint32_t, s);
  const int t = threadIdx.x, n = blockDim.x;
  s[t] = s[n + t] = 0xdeadbeefu;
  __syncthreads();
  flash::cp_async_ca<4>(s + t, src + t, 4);
  flash::cp_async_commit();
  if (mode == 1) {
    out[t] = s[t];
    flash::cp_async_wait<0>();
    return;
  }
  if (mode == 3) {
    flash::cp_async_ca<4>(s + n + t, src + t, 4);
    flash::cp_async_commit();
    flash::cp_async_wait<1>();
    out[t] = s[n + t];
    flash::cp_async_wait<0>();
    return;
  }
  flash::cp_async_wait<0>();
  if (mode == 0) __syncthreads();
  out[t] = s[(t + 1) % blockDim.x];
}

template <int N, bool TRANS>
static int ldsm_launch(const uint16_t *src, uint32_t *out) {
  lab_launch<ldsm_k<N, TRANS>>(1, 32, 512, nullptr, src, out);
  return (int)cudaGetLastError();
}

extern "C" int simt_test_ldsm(int n, int trans, const uint16_t *src, uint32_t *out) {
  switch (n * 2 + trans) {
  case 2: return ldsm_launch<1, false>(src, out);
  case 3: return ldsm_launch<1, true>(src, out);
  case 4: return ldsm_launch<2, false>(src, out);
  case 5: return ldsm_launch<2, true>(src, out);
  case 8: return ldsm_launch<4, false>(src, out);
  case 9: return ldsm_launch<4, true>(src, out);
  default: return -1;
  }
}

extern "C" int simt_test_cp_async(const unsigned char *src, unsigned char *out, int threads) {
  lab_launch<cp_async_k>(1, threads, (size_t)48 * threads, nullptr, src, out);
  return (int)cudaGetLastError();
}

extern "C" int simt_test_cp_async_early(const uint32_t *src, uint32_t *out, int mode) {
  lab_launch<cp_async_early_k>(1, 64, 512, nullptr, src, out, mode);
  return (int)cudaGetLastError();
}

LAB_NS_END
