// The PTX instructions the FlashAttention kernels are built from, each as inline asm for nvcc
// and, under the SIMT interpreter (LAB_SIMT), as its software version from the PTX ISA's
// definitions (kernels/simt/warp.c, kernels/simt/async.c): one #ifdef for all of them.
//   mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}: c (16x8 f32) += a (16x16) b (16x8)
//   ldmatrix.sync.aligned.m8n8.x{1,2,4}{.trans}.shared.b16: N 8x8 matrices, lanes 8i..8i+7
//     giving the row addresses of matrix i; register i of lane l = row l/4, columns
//     2(l%4)..+1 of matrix i (.trans: column l/4, rows 2(l%4)..+1)
//   cp.async.{ca,cg}.shared.global (4, 8, 16 bytes; the bytes past src_bytes zero-filled),
//     cp.async.commit_group, cp.async.wait_group N (every group but the N most recent done)
#pragma once
#include "common.cuh"

LAB_NS_BEGIN

namespace flash {

#ifdef LAB_SIMT
__device__ __forceinline__ void mma(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1, __nv_bfloat16) {
  lab_simt_mma_m16n8k16(c, a, b0, b1, 0);
}
__device__ __forceinline__ void mma(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1, __half) {
  lab_simt_mma_m16n8k16(c, a, b0, b1, 1);
}
template <int N>
__device__ __forceinline__ void ldsm(uint32_t (&r)[N], const void *row) {
  lab_simt_ldmatrix(r, row, N, 0);
}
template <int N>
__device__ __forceinline__ void ldsm_t(uint32_t (&r)[N], const void *row) {
  lab_simt_ldmatrix(r, row, N, 1);
}
template <int B>
__device__ __forceinline__ void cp_async_ca(void *dst, const void *src, int src_bytes) {
  lab_simt_cp_async(dst, src, B, src_bytes);
}
__device__ __forceinline__ void cp_async_cg(void *dst, const void *src, int src_bytes) {
  lab_simt_cp_async(dst, src, 16, src_bytes);
}
__device__ __forceinline__ void cp_async_commit() { lab_simt_cp_async_commit(); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  lab_simt_cp_async_wait(N);
}
#else
__device__ __forceinline__ void mma(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1, __nv_bfloat16) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%0,%1,%2,%3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void mma(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1, __half) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%0,%1,%2,%3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ uint32_t smem_addr(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }
// the three widths of ldmatrix, TR "" or ".trans" (string literals concatenated into the asm)
#define LAB_LDSM_ASM(TR)                                                                                        \
  if constexpr (N == 1)                                                                                         \
    asm volatile("ldmatrix.sync.aligned.m8n8.x1" TR ".shared.b16 {%0}, [%1];\n" : "=r"(r[0]) : "r"(smem_addr(row))); \
  else if constexpr (N == 2)                                                                                    \
    asm volatile("ldmatrix.sync.aligned.m8n8.x2" TR ".shared.b16 {%0,%1}, [%2];\n"                              \
                 : "=r"(r[0]), "=r"(r[1])                                                                       \
                 : "r"(smem_addr(row)));                                                                        \
  else                                                                                                          \
    asm volatile("ldmatrix.sync.aligned.m8n8.x4" TR ".shared.b16 {%0,%1,%2,%3}, [%4];\n"                        \
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])                                               \
                 : "r"(smem_addr(row)));
template <int N>
__device__ __forceinline__ void ldsm(uint32_t (&r)[N], const void *row) {
  static_assert(N == 1 || N == 2 || N == 4, "ldmatrix loads 1, 2 or 4 matrices");
  LAB_LDSM_ASM("")
}
template <int N>
__device__ __forceinline__ void ldsm_t(uint32_t (&r)[N], const void *row) {
  static_assert(N == 1 || N == 2 || N == 4, "ldmatrix loads 1, 2 or 4 matrices");
  LAB_LDSM_ASM(".trans")
}
#undef LAB_LDSM_ASM
template <int B>
__device__ __forceinline__ void cp_async_ca(void *dst, const void *src, int src_bytes) {
  static_assert(B == 4 || B == 8 || B == 16, "cp.async copies 4, 8 or 16 bytes");
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(smem_addr(dst)), "l"(src), "n"(B),
               "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_cg(void *dst, const void *src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
#endif

}  // namespace flash

LAB_NS_END
