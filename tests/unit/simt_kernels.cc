// Kernels for tests/unit/test_simt.c, written as CUDA C and compiled for the SIMT interpreter
// exactly as kernels/cuda is (LAB_SIMT, the __tsan_* access hooks): each warp-level
// instruction run per lane, and each rule of kernels/simt broken once on purpose.
#include "../../kernels/cuda/flash_attention.cuh"

LAB_NS_BEGIN

// D = A B + C for one m16n8k16 through the fragment loads (ldmatrix) flash_attention.cuh uses:
// a [16][16] row-major, b [8][16] (n x k), c and d [16][8] f32
template <typename E>
__global__ void mma_k(const E *a, const E *b, const float *c, float *d) {
  alignas(16) __shared__ E sa[16 * 16];
  alignas(16) __shared__ E sb[8 * 16];
  for (int i = threadIdx.x; i < 256; i += 32) sa[i] = a[i];
  for (int i = threadIdx.x; i < 128; i += 32) sb[i] = b[i];
  __syncthreads();
  const int lane = threadIdx.x, g = lane >> 2, q = lane & 3;
  uint32_t fa[4], b0, b1;
  flash::load_a(fa, sa, 16, 0, 0);
  uint32_t fb[2]; // b0 from columns 0..7 of sb's rows (lanes 0-7), b1 from columns 8..15 (lanes 8-15)
  flash::ldsm<2>(fb, sb + (lane & 7) * 16 + ((lane >> 3) & 1) * 8);
  b0 = fb[0], b1 = fb[1];
  float acc[4] = {c[g * 8 + 2 * q], c[g * 8 + 2 * q + 1], c[(g + 8) * 8 + 2 * q], c[(g + 8) * 8 + 2 * q + 1]};
  flash::mma(acc, fa, b0, b1, E());
  d[g * 8 + 2 * q] = acc[0], d[g * 8 + 2 * q + 1] = acc[1];
  d[(g + 8) * 8 + 2 * q] = acc[2], d[(g + 8) * 8 + 2 * q + 1] = acc[3];
}

// out[lanemask][lane] = in[lane ^ lanemask], for lanemask 0..31
__global__ void shfl_k(const double *in, double *out) {
  for (int m = 0; m < 32; m++) out[m * 32 + threadIdx.x] = __shfl_xor_sync(0xffffffffu, in[threadIdx.x], m);
}

// a block sum whose barrier between the store and the reads can be left out
__global__ void sum_k(const float *x, float *out, int barrier) {
  __shared__ float buf[256];
  buf[threadIdx.x] = x[threadIdx.x];
  if (barrier) __syncthreads();
  if (threadIdx.x == 0) {
    float s = 0;
    for (int i = 0; i < 256; i++) s += buf[i];
    out[0] = s;
  }
}

// a __syncthreads only half the block reaches
__global__ void diverge_k(float *out) {
  if (threadIdx.x < 16) __syncthreads();
  out[threadIdx.x] = 1;
}

// a shuffle whose mask names lanes that have returned
__global__ void mask_k(float *out) {
  if (threadIdx.x >= 16) return;
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1.f, 1);
}

// y[i] = x[i + off]: off = 1 reads one element past the end
__global__ void shift_k(const float *x, float *y, int n, int off) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i + off];
}

// shared reads at a stride of `stride` floats (bank conflicts), global at the same stride
__global__ void stride_k(const float *x, float *y, int stride) {
  __shared__ float s[32 * 33];
  for (int i = threadIdx.x; i < 32 * 33; i += 32) s[i] = (float)i;
  __syncthreads();
  y[threadIdx.x] = s[(threadIdx.x * stride) % (32 * 33)] + x[threadIdx.x * stride];
}

// the order threads ran in, as seen through an unsynchronized shared counter (a race on purpose)
__global__ void order_k(int *out) {
  __shared__ int next;
  if (threadIdx.x == 0) next = 0;
  __syncthreads();
  out[threadIdx.x] = atomicAdd(&next, 1);
}

// a race nobody reports: every thread writes the same global word (racecheck watches shared
// memory only), so the value left is the last writer's, which the seeded order decides
__global__ void last_writer_k(int *out) { out[0] = (int)threadIdx.x; }

// atomicAdd contended: every thread of every block adds into acc[0] (1, its old value kept) and
// acc[1] (its global index + 1), and into lanes[its lane] (its block + 1), then 1000 times 1 into
// acc[2], with blocks running on
// several OS threads at once. Sums of small integers: exact in float and double.
template <typename T>
__global__ void atomic_k(T *acc, T *old, T *lanes) {
  int g = blockIdx.x * blockDim.x + threadIdx.x;
  old[g] = atomicAdd(&acc[0], (T)1);
  atomicAdd(&acc[1], (T)(g + 1));
  atomicAdd(&lanes[threadIdx.x % 32], (T)(blockIdx.x + 1));
  for (int k = 0; k < 1000; k++) atomicAdd(&acc[2], (T)1); // contention long enough to lose an add
}

extern "C" int simt_test_last_writer(int *out) {
  lab_launch<last_writer_k>(1, 256, 0, nullptr, out);
  return (int)cudaGetLastError();
}
extern "C" int simt_test_atomic(int f64, void *acc, void *old, void *lanes, int blocks, int threads) {
  if (f64) lab_launch<atomic_k<double>>(blocks, threads, 0, nullptr, (double *)acc, (double *)old, (double *)lanes);
  else lab_launch<atomic_k<float>>(blocks, threads, 0, nullptr, (float *)acc, (float *)old, (float *)lanes);
  return (int)cudaGetLastError();
}

extern "C" int simt_test_mma(int f16, const void *a, const void *b, const float *c, float *d) {
  if (f16) lab_launch<mma_k<__half>>(1, 32, 0, nullptr, (const __half *)a, (const __half *)b, c, d);
  else lab_launch<mma_k<__nv_bfloat16>>(1, 32, 0, nullptr, (const __nv_bfloat16 *)a, (const __nv_bfloat16 *)b, c, d);
  return (int)cudaGetLastError();
}
extern "C" int simt_test_shfl(const double *in, double *out) {
  lab_launch<shfl_k>(1, 32, 0, nullptr, in, out);
  return (int)cudaGetLastError();
}
extern "C" int simt_test_sum(const float *x, float *out, int barrier) {
  lab_launch<sum_k>(1, 256, 0, nullptr, x, out, barrier);
  return (int)cudaGetLastError();
}
extern "C" int simt_test_diverge(float *out) {
  lab_launch<diverge_k>(1, 32, 0, nullptr, out);
  return (int)cudaGetLastError();
}
extern "C" int simt_test_mask(float *out) {
  lab_launch<mask_k>(1, 32, 0, nullptr, out);
  return (int)cudaGetLastError();
}
extern "C" int simt_test_shift(const float *x, float *y, int n, int off) {
  lab_launch<shift_k>((n + 63) / 64, 64, 0, nullptr, x, y, n, off);
  return (int)cudaGetLastError();
}
extern "C" int simt_test_stride(const float *x, float *y, int stride) {
  lab_launch<stride_k>(1, 32, 0, nullptr, x, y, stride);
  return (int)cudaGetLastError();
}
extern "C" int simt_test_order(int *out) {
  lab_launch<order_k>(1, 64, 0, nullptr, out);
  return (int)cudaGetLastError();
}

LAB_NS_END
