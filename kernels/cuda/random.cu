// Random numbers from the Philox4x32-10 counter stream of kernels/cpu/philox.c: element i of a
// draw uses position offset + i (pairs 2i, 2i+1 for normals, doubles and integers), so a seed
// gives the same stream on every device; integer and uniform draws are bit-identical, normals
// agree to the last bits of log/cos.
#include <math.h>

#include "common.cuh"

LAB_NS_BEGIN

__device__ __forceinline__ unsigned draw32(unsigned long long seed, unsigned long long pos) {
  unsigned long long ctr = pos >> 2;
  unsigned c0 = (unsigned)ctr, c1 = (unsigned)(ctr >> 32), c2 = 0, c3 = 0;
  unsigned k0 = (unsigned)seed, k1 = (unsigned)(seed >> 32);
  for (int r = 0; r < 10; r++) {
    unsigned hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
    unsigned hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
    unsigned n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
    c0 = n0;
    c1 = n1;
    c2 = n2;
    c3 = n3;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  switch (pos & 3) {
  case 0: return c0;
  case 1: return c1;
  case 2: return c2;
  default: return c3;
  }
}

__global__ void rand_k(lab_rand_args a) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < a.n; i += (int64_t)gridDim.x * blockDim.x) {
    unsigned long long base = a.offset + (a.kind == LAB_RAND_UNIFORM && a.dt != LAB_F64 ? (unsigned long long)i
                                                                                          : 2ull * (unsigned long long)i);
    if (a.kind == LAB_RAND_INT) {
      // the range in unsigned arithmetic, as kernels/cpu/philox.c: hi - lo overflows int64 for
      // ranges wider than 2^63 (signed overflow: undefined, and a wrong modulus in practice)
      unsigned long long x = draw32(a.seed, base), y = draw32(a.seed, base + 1);
      ((long long *)a.out)[i] = (long long)((unsigned long long)a.lo +
                                           ((x << 32) | y) % ((unsigned long long)a.hi - (unsigned long long)a.lo));
    } else if (a.kind == LAB_RAND_UNIFORM) {
      if (a.dt == LAB_F64) {
        unsigned long long x = draw32(a.seed, base), y = draw32(a.seed, base + 1);
        unsigned long long bits = ((x << 32) | y) >> 11;
        ((double *)a.out)[i] = a.a + (a.b - a.a) * (bits * (1.0 / 9007199254740992.0));
      } else {
        unsigned u = draw32(a.seed, base);
        float lo = (float)a.a, hi = (float)a.b;
        ((float *)a.out)[i] = lo + (hi - lo) * ((u >> 8) * (1.0f / 16777216.0f));
      }
    } else {
      unsigned x = draw32(a.seed, base), y = draw32(a.seed, base + 1);
      if (a.dt == LAB_F64) {
        double u1 = ((x >> 8) + 1.0) * (1.0 / 16777216.0), u2 = (y >> 8) * (1.0 / 16777216.0);
        ((double *)a.out)[i] = a.a + a.b * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
      } else {
        float u1 = ((x >> 8) + 1.0f) * (1.0f / 16777216.0f), u2 = (y >> 8) * (1.0f / 16777216.0f);
        ((float *)a.out)[i] = (float)a.a + (float)a.b * sqrtf(-2.0f * logf(u1)) * cosf(6.2831853f * u2);
      }
    }
  }
}

extern "C" int LAB_CU(rand)(const lab_rand_args *a, lab_cuda_stream s) {
  if (a->n <= 0) return 0;
  lab_launch<rand_k>(lab_blocks(a->n, 256), 256, 0, s, *a);
  return (int)cudaGetLastError();
}

LAB_NS_END
