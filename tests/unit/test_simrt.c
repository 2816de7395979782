/* The emulated CUDA runtime under the sim device (runtime/simrt): stream work runs on a worker
 * thread, so a device-to-host copy read before cudaStreamSynchronize is stale (each item
 * delayed 20 ms here so the race shows every time); events order one stream after another;
 * two devices; and cuBLASLt's reference product against a plain loop with every argument it
 * takes (transposes, leading dimensions, batch count and strides, alpha, beta, bias), and the
 * descriptor checks (shapes that do not agree after the transposes are refused). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <stdio.h>

#include "runtime/simrt/shim/cublasLt.h"
#include "runtime/simrt/shim/cuda_runtime.h"
#include "kernels/cuda/launch.h" /* lab_cu_* as lab_simrt_cu_* (LAB_SIMRT) */

static void test_stale_without_sync(void **state) {
  (void)state;
  cudaStream_t s;
  assert_int_equal(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  float *d = NULL, host[64], src[64];
  for (int i = 0; i < 64; i++) src[i] = (float)i + 1, host[i] = -1;
  assert_int_equal(cudaMalloc((void **)&d, sizeof src), cudaSuccess);
  assert_int_equal(cudaMemcpyAsync(d, src, sizeof src, cudaMemcpyHostToDevice, s), cudaSuccess);
  assert_int_equal(cudaMemcpyAsync(host, d, sizeof host, cudaMemcpyDeviceToHost, s), cudaSuccess);
  assert_true(host[5] == -1.0f); /* no synchronize: the copy has not run */
  assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
  assert_true(host[5] == 6.0f);
  assert_int_equal(cudaFree(d), cudaSuccess);
  assert_int_equal(cudaStreamDestroy(s), cudaSuccess);
}

/* A host source is read before cudaMemcpyAsync returns (CUDA stages pageable memory so): the
 * caller may reuse it at once. The cuda device's uploads do not wait (issue 23 item 4), and a
 * temporary freed after one read garbage when the copy ran 20 ms later (sdpa's dk and dv,
 * and the harness's failure count, differed from the cpu in sim.test_kernels under load). */
static void test_host_source_staged(void **state) {
  (void)state;
  cudaStream_t s;
  assert_int_equal(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  float *d = NULL, host[64], src[64];
  for (int i = 0; i < 64; i++) src[i] = (float)i + 1, host[i] = -1;
  assert_int_equal(cudaMalloc((void **)&d, sizeof src), cudaSuccess);
  assert_int_equal(cudaMemcpyAsync(d, src, sizeof src, cudaMemcpyHostToDevice, s), cudaSuccess);
  for (int i = 0; i < 64; i++) src[i] = -7; /* reused before the stream reached the copy */
  assert_int_equal(cudaMemcpyAsync(host, d, sizeof host, cudaMemcpyDeviceToHost, s), cudaSuccess);
  assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
  for (int i = 0; i < 64; i++) assert_true(host[i] == (float)i + 1);
  assert_int_equal(cudaFree(d), cudaSuccess);
  assert_int_equal(cudaStreamDestroy(s), cudaSuccess);
}

static void test_event_orders_streams(void **state) {
  (void)state;
  cudaStream_t a, b;
  cudaEvent_t ev;
  assert_int_equal(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking), cudaSuccess);
  assert_int_equal(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking), cudaSuccess);
  assert_int_equal(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), cudaSuccess);
  unsigned char *d, out[256];
  memset(out, 0, sizeof out);
  assert_int_equal(cudaMalloc((void **)&d, 256), cudaSuccess);
  assert_int_equal(cudaMemsetAsync(d, 7, 256, a), cudaSuccess);
  assert_int_equal(cudaEventRecord(ev, a), cudaSuccess);
  assert_int_equal(cudaEventQuery(ev), cudaErrorNotReady); /* the memset is still queued (20 ms) */
  assert_int_equal(cudaStreamWaitEvent(b, ev, 0), cudaSuccess);
  assert_int_equal(cudaMemcpyAsync(out, d, 256, cudaMemcpyDeviceToHost, b), cudaSuccess);
  assert_int_equal(cudaStreamSynchronize(b), cudaSuccess); /* b alone: a's memset came first */
  assert_int_equal(out[0], 7);
  assert_int_equal(out[255], 7);
  assert_int_equal(cudaEventQuery(ev), cudaSuccess);
  cudaEventDestroy(ev);
  cudaFree(d);
  cudaStreamDestroy(a);
  cudaStreamDestroy(b);
}

static void test_two_devices(void **state) {
  (void)state;
  int n = 0, dev = -1;
  assert_int_equal(cudaGetDeviceCount(&n), cudaSuccess);
  assert_int_equal(n, 2);
  assert_int_equal(cudaSetDevice(1), cudaSuccess);
  assert_int_equal(cudaGetDevice(&dev), cudaSuccess);
  assert_int_equal(dev, 1);
  assert_int_equal(cudaSetDevice(2), cudaErrorInvalidDevice);
  assert_int_equal(cudaGetLastError(), cudaErrorInvalidDevice);
  assert_int_equal(cudaGetLastError(), cudaSuccess);
  /* a pointer knows its device: inside an allocation made on device 1, not past its end */
  assert_int_equal(cudaSetDevice(1), cudaSuccess);
  char *d1 = NULL;
  struct cudaPointerAttributes at;
  assert_int_equal(cudaMalloc((void **)&d1, 1000), cudaSuccess);
  assert_int_equal(cudaSetDevice(0), cudaSuccess);
  assert_int_equal(cudaPointerGetAttributes(&at, d1 + 999), cudaSuccess);
  assert_int_equal(at.type, cudaMemoryTypeDevice);
  assert_int_equal(at.device, 1);
  assert_int_equal(cudaPointerGetAttributes(&at, &dev), cudaSuccess);
  assert_int_equal(at.type, cudaMemoryTypeUnregistered);
  assert_int_equal(cudaFree(d1), cudaSuccess);
}

/* A kernel launch is stream work (runtime/simrt/launch.c): a copy on another stream that does
 * not wait for it reads what was there before; one that waits for its event reads the draws.
 * A launch whose pointer argument is another device's memory is refused at the launch, the
 * error's text naming the launcher, the pointer and both devices (issue 23 defect 1). */
static void test_kernel_is_stream_work(void **state) {
  (void)state;
  assert_int_equal(cudaSetDevice(1), cudaSuccess);
  cudaStream_t s, t;
  cudaEvent_t ev;
  assert_int_equal(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  assert_int_equal(cudaStreamCreateWithFlags(&t, cudaStreamNonBlocking), cudaSuccess);
  assert_int_equal(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), cudaSuccess);
  float *d = NULL, host[256];
  assert_int_equal(cudaMalloc((void **)&d, sizeof host), cudaSuccess);
  assert_int_equal(cudaMemsetAsync(d, 0, sizeof host, s), cudaSuccess);
  assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
  /* the kernel queued behind 6 items of 20 ms on s; the copy on t runs after its own 20 ms */
  for (int i = 0; i < 6; i++) assert_int_equal(cudaMemsetAsync(d, 0, sizeof host, s), cudaSuccess);
  lab_rand_args r = {.kind = LAB_RAND_UNIFORM, .dt = LAB_F32, .seed = 1, .out = d, .n = 256, .a = 1, .b = 2};
  assert_int_equal(lab_cu_rand(&r, s), cudaSuccess);
  assert_int_equal(cudaMemcpyAsync(host, d, sizeof host, cudaMemcpyDeviceToHost, t), cudaSuccess);
  assert_int_equal(cudaStreamSynchronize(t), cudaSuccess);
  for (int i = 0; i < 256; i++) assert_true(host[i] == 0.0f); /* the kernel had not run */
  assert_int_equal(cudaEventRecord(ev, s), cudaSuccess);
  assert_int_equal(cudaStreamWaitEvent(t, ev, 0), cudaSuccess);
  assert_int_equal(cudaMemcpyAsync(host, d, sizeof host, cudaMemcpyDeviceToHost, t), cudaSuccess);
  assert_int_equal(cudaStreamSynchronize(t), cudaSuccess);
  for (int i = 0; i < 256; i++) assert_true(host[i] >= 1.0f && host[i] < 2.0f);
  /* sim:1's pointer launched on a sim:0 stream */
  assert_int_equal(cudaSetDevice(0), cudaSuccess);
  cudaStream_t s0;
  assert_int_equal(cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking), cudaSuccess);
  r.out = d + 8;
  assert_int_equal(lab_cu_rand(&r, s0), cudaErrorLaunchFailure);
  const char *why = cudaGetErrorString(cudaErrorLaunchFailure);
  char want[64];
  snprintf(want, sizeof want, "%p", (void *)(d + 8));
  assert_non_null(strstr(why, "rand on sim:0's stream"));
  assert_non_null(strstr(why, want));
  assert_non_null(strstr(why, "memory of sim:1"));
  assert_int_equal(cudaStreamSynchronize(s0), cudaSuccess); /* refused, not run: nothing sticky */
  assert_int_equal(cudaStreamDestroy(s0), cudaSuccess);
  assert_int_equal(cudaEventDestroy(ev), cudaSuccess);
  assert_int_equal(cudaFree(d), cudaSuccess);
  assert_int_equal(cudaStreamDestroy(s), cudaSuccess);
  assert_int_equal(cudaStreamDestroy(t), cudaSuccess);
}

/* CUDA forbids overlapping ranges in a device-to-device cudaMemcpyAsync: refused with the
 * ranges in the error's text (issue 23 defect 3); disjoint ranges of one allocation copy */
static void test_overlapping_copy_refused(void **state) {
  (void)state;
  assert_int_equal(cudaSetDevice(0), cudaSuccess);
  char *d = NULL;
  assert_int_equal(cudaMalloc((void **)&d, 1000), cudaSuccess);
  assert_int_equal(cudaMemcpyAsync(d + 1, d, 999, cudaMemcpyDeviceToDevice, NULL), cudaErrorInvalidValue);
  const char *why = cudaGetErrorString(cudaErrorInvalidValue);
  assert_non_null(strstr(why, "overlap by 998 bytes"));
  assert_int_equal(cudaGetLastError(), cudaErrorInvalidValue);
  assert_int_equal(cudaMemcpyAsync(d + 500, d, 500, cudaMemcpyDeviceToDevice, NULL), cudaSuccess);
  assert_int_equal(cudaStreamSynchronize(NULL), cudaSuccess);
  assert_int_equal(cudaFree(d), cudaSuccess);
}

/* D = alpha op(A) op(B) + beta C + bias, column-major, batch 2, A transposed, B not */
static void test_gemm_arguments(void **state) {
  (void)state;
  enum { M = 3, N = 4, K = 5, LDA = 6, LDB = 7, LDC = 4, BATCH = 2 };
  const int64_t sa = LDA * M + 3, sb = LDB * N + 1, sc = LDC * N; /* batch strides, elements */
  double A[2 * (LDA * M + 3)], B[2 * (LDB * N + 1)], C[2 * LDC * N], bias[M], want[2 * LDC * N];
  for (size_t i = 0; i < sizeof A / 8; i++) A[i] = (double)(i % 7) - 3;
  for (size_t i = 0; i < sizeof B / 8; i++) B[i] = (double)(i % 5) * 0.5 - 1;
  for (size_t i = 0; i < sizeof C / 8; i++) C[i] = (double)i * 0.25;
  for (int i = 0; i < M; i++) bias[i] = 10.0 * (i + 1);
  const double alpha = 2, beta = 0.5;
  memcpy(want, C, sizeof C);
  for (int b = 0; b < BATCH; b++)
    for (int r = 0; r < M; r++)
      for (int c = 0; c < N; c++) {
        double acc = 0;
        for (int k = 0; k < K; k++) acc += A[b * sa + k + r * LDA] * B[b * sb + k + c * LDB]; /* A^T: A is K x M */
        want[b * sc + r + c * LDC] = alpha * acc + beta * C[b * sc + r + c * LDC] + bias[r];
      }
  double *dA, *dB, *dC, *dbias, got[2 * LDC * N];
  cudaMalloc((void **)&dA, sizeof A), cudaMalloc((void **)&dB, sizeof B), cudaMalloc((void **)&dC, sizeof C);
  cudaMalloc((void **)&dbias, sizeof bias);
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cudaMemcpyAsync(dA, A, sizeof A, cudaMemcpyHostToDevice, s);
  cudaMemcpyAsync(dB, B, sizeof B, cudaMemcpyHostToDevice, s);
  cudaMemcpyAsync(dC, C, sizeof C, cudaMemcpyHostToDevice, s);
  cudaMemcpyAsync(dbias, bias, sizeof bias, cudaMemcpyHostToDevice, s);
  cublasLtHandle_t h;
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t la, lb, lc, bad;
  assert_int_equal(cublasLtCreate(&h), CUBLAS_STATUS_SUCCESS);
  assert_int_equal(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_64F, CUDA_R_64F), CUBLAS_STATUS_SUCCESS);
  int32_t t = CUBLAS_OP_T, ep = CUBLASLT_EPILOGUE_BIAS, batch = BATCH;
  assert_int_equal(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &t, 4), CUBLAS_STATUS_SUCCESS);
  assert_int_equal(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, 4), CUBLAS_STATUS_SUCCESS);
  assert_int_equal(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &dbias, sizeof dbias),
                   CUBLAS_STATUS_SUCCESS);
  assert_int_equal(cublasLtMatrixLayoutCreate(&la, CUDA_R_64F, K, M, LDA), CUBLAS_STATUS_SUCCESS);
  assert_int_equal(cublasLtMatrixLayoutCreate(&lb, CUDA_R_64F, K, N, LDB), CUBLAS_STATUS_SUCCESS);
  assert_int_equal(cublasLtMatrixLayoutCreate(&lc, CUDA_R_64F, M, N, LDC), CUBLAS_STATUS_SUCCESS);
  assert_int_equal(cublasLtMatrixLayoutCreate(&bad, CUDA_R_64F, M, N, M - 1), CUBLAS_STATUS_INVALID_VALUE); /* ld < rows */
  cublasLtMatrixLayout_t ls[3] = {la, lb, lc};
  const int64_t strides[3] = {sa, sb, sc};
  for (int i = 0; i < 3; i++) {
    cublasLtMatrixLayoutSetAttribute(ls[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, 4);
    cublasLtMatrixLayoutSetAttribute(ls[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &strides[i], 8);
  }
  /* B as A's layout (K x M where K x N is needed) does not agree: refused before any work */
  assert_int_equal(cublasLtMatmul(h, op, &alpha, dA, la, dA, la, &beta, dC, lc, dC, lc, NULL, NULL, 0, s),
                   CUBLAS_STATUS_INVALID_VALUE);
  /* a heuristic's algorithm for 16-byte aligned pointers: refused for a pointer aligned less */
  cublasLtMatmulPreference_t pref;
  cublasLtMatmulHeuristicResult_t best;
  int found = 0;
  uint32_t al = 16;
  assert_int_equal(cublasLtMatmulPreferenceCreate(&pref), CUBLAS_STATUS_SUCCESS);
  for (int i = CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES; i <= CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES; i++)
    cublasLtMatmulPreferenceSetAttribute(pref, (cublasLtMatmulPreferenceAttributes_t)i, &al, 4);
  assert_int_equal(cublasLtMatmulAlgoGetHeuristic(h, op, la, la, lc, lc, pref, 1, &best, &found),
                   CUBLAS_STATUS_INVALID_VALUE);
  assert_int_equal(cublasLtMatmulAlgoGetHeuristic(h, op, la, lb, lc, lc, pref, 1, &best, &found),
                   CUBLAS_STATUS_SUCCESS);
  assert_int_equal(found, 1);
  assert_int_equal(cublasLtMatmul(h, op, &alpha, dA + 1, la, dB, lb, &beta, dC, lc, dC, lc, &best.algo, NULL, 0, s),
                   CUBLAS_STATUS_INVALID_VALUE);
  cublasLtMatmulPreferenceDestroy(pref);
  assert_int_equal(cublasLtMatmul(h, op, &alpha, dA, la, dB, lb, &beta, dC, lc, dC, lc, &best.algo, NULL, 0, s),
                   CUBLAS_STATUS_SUCCESS);
  cudaMemcpyAsync(got, dC, sizeof got, cudaMemcpyDeviceToHost, s);
  assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
  for (int i = 0; i < 2 * LDC * N; i++) assert_true(got[i] == want[i]);
  cublasLtMatrixLayoutDestroy(la), cublasLtMatrixLayoutDestroy(lb), cublasLtMatrixLayoutDestroy(lc);
  cublasLtMatmulDescDestroy(op);
  cublasLtDestroy(h);
  cudaFree(dA), cudaFree(dB), cudaFree(dC), cudaFree(dbias);
  cudaStreamDestroy(s);
}

int main(void) {
  setenv("LLMLAB_SIMRT_DELAY_US", "20000", 1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_stale_without_sync),
      cmocka_unit_test(test_host_source_staged),
      cmocka_unit_test(test_event_orders_streams),
      cmocka_unit_test(test_two_devices),
      cmocka_unit_test(test_kernel_is_stream_work),
      cmocka_unit_test(test_overlapping_copy_refused),
      cmocka_unit_test(test_gemm_arguments),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
