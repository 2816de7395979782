/* The peer of scripts/bench/gpu_gemm.lua: the same bf16 products called on cuBLASLt directly
 * from C (f32 accumulation, a 32 MiB workspace, the library's default algorithm), timed with
 * CUDA events.   build/gpu_gemm_cublaslt 4096 8192 */
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    printf("no CUDA device\n");
    return 77;
  }
  cublasLtHandle_t lt;
  cublasLtCreate(&lt);
  size_t ws_bytes = (size_t)32 << 20;
  void *ws;
  cudaMalloc(&ws, ws_bytes);
  int nsizes = argc > 1 ? argc - 1 : 2;
  for (int i = 0; i < nsizes; i++) {
    long n = argc > 1 ? atol(argv[i + 1]) : (i ? 8192 : 4096);
    void *a, *b, *c;
    size_t bytes = (size_t)n * n * 2;
    cudaMalloc(&a, bytes);
    cudaMalloc(&b, bytes);
    cudaMalloc(&c, bytes);
    cudaMemset(a, 0x3c, bytes); /* bf16 0x3c3c: about 0.0115, finite */
    cudaMemset(b, 0x3c, bytes);
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t l;
    cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    cublasLtMatrixLayoutCreate(&l, CUDA_R_16BF, n, n, n);
    float alpha = 1, beta = 0;
    int iters = n >= 8192 ? 10 : 30;
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    for (int k = 0; k < 3; k++) cublasLtMatmul(lt, op, &alpha, a, l, b, l, &beta, c, l, c, l, NULL, ws, ws_bytes, 0);
    cudaEventRecord(e0, 0);
    for (int k = 0; k < iters; k++) cublasLtMatmul(lt, op, &alpha, a, l, b, l, &beta, c, l, c, l, NULL, ws, ws_bytes, 0);
    cudaEventRecord(e1, 0);
    cudaEventSynchronize(e1);
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    double s = ms / 1e3 / iters;
    printf("cuBLASLt  bf16 %5ld x %5ld x %5ld  %8.3f ms  %7.1f TFLOP/s\n", n, n, n, s * 1e3, 2.0 * n * n * n / s / 1e12);
    cublasLtMatrixLayoutDestroy(l);
    cublasLtMatmulDescDestroy(op);
    cudaFree(a);
    cudaFree(b);
    cudaFree(c);
  }
  return 0;
}
