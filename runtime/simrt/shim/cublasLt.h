/* The emulated cuBLASLt for the sim compile of runtime/cuda/cuda_device.c: the descriptor
 * and layout calls it makes keep their attributes, and cublasLtMatmul checks them and runs a
 * reference product (runtime/simrt/gemm.c) on the stream's worker with exactly the arguments
 * given: column-major layouts with their leading dimensions, transposes, batch count and
 * strides, alpha/beta of the scale type, a bias epilogue. Every name is lab_simrt_-prefixed. */
#ifndef LAB_SIMRT_CUBLASLT_H
#define LAB_SIMRT_CUBLASLT_H

#include <stdint.h>

#include "cuda_runtime.h"

typedef enum {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_NOT_INITIALIZED = 1,
  CUBLAS_STATUS_ALLOC_FAILED = 3,
  CUBLAS_STATUS_INVALID_VALUE = 7,
  CUBLAS_STATUS_EXECUTION_FAILED = 13,
  CUBLAS_STATUS_NOT_SUPPORTED = 15
} cublasStatus_t;
typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 } cublasOperation_t;
typedef enum {
  CUBLAS_COMPUTE_32F = 68,
  CUBLAS_COMPUTE_32F_FAST_TF32 = 77,
  CUBLAS_COMPUTE_64F = 70
} cublasComputeType_t;
typedef enum {
  CUBLASLT_MATMUL_DESC_TRANSA = 3,
  CUBLASLT_MATMUL_DESC_TRANSB = 4,
  CUBLASLT_MATMUL_DESC_EPILOGUE = 7,
  CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8,
  CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE = 26
} cublasLtMatmulDescAttributes_t;
typedef enum { CUBLASLT_EPILOGUE_DEFAULT = 1, CUBLASLT_EPILOGUE_BIAS = 4 } cublasLtEpilogue_t;
typedef enum {
  CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT = 5,
  CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET = 6
} cublasLtMatrixLayoutAttribute_t;

typedef enum {
  CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8
} cublasLtMatmulPreferenceAttributes_t;

typedef struct lab_simrt_lt_handle *cublasLtHandle_t;
typedef struct lab_simrt_lt_desc *cublasLtMatmulDesc_t;
typedef struct lab_simrt_lt_layout *cublasLtMatrixLayout_t;
typedef struct lab_simrt_lt_pref *cublasLtMatmulPreference_t;
/* an algorithm, as cuBLASLt's (opaque 64-bit words, data[] first, so `{{0}}` initialises it);
 * the sim's heuristic writes data[0]: the pointer alignment in bytes it is valid for */
typedef struct {
  uint64_t data[8];
} cublasLtMatmulAlgo_t;
typedef struct {
  cublasLtMatmulAlgo_t algo;
  size_t workspaceSize;
  cublasStatus_t state;
  float wavesCount;
  int reserved[4];
} cublasLtMatmulHeuristicResult_t;

#define cublasLtCreate lab_simrt_cublasLtCreate
#define cublasLtDestroy lab_simrt_cublasLtDestroy
#define cublasLtMatmulDescCreate lab_simrt_cublasLtMatmulDescCreate
#define cublasLtMatmulDescDestroy lab_simrt_cublasLtMatmulDescDestroy
#define cublasLtMatmulDescSetAttribute lab_simrt_cublasLtMatmulDescSetAttribute
#define cublasLtMatrixLayoutCreate lab_simrt_cublasLtMatrixLayoutCreate
#define cublasLtMatrixLayoutDestroy lab_simrt_cublasLtMatrixLayoutDestroy
#define cublasLtMatrixLayoutSetAttribute lab_simrt_cublasLtMatrixLayoutSetAttribute
#define cublasLtMatmul lab_simrt_cublasLtMatmul
#define cublasLtMatmulPreferenceCreate lab_simrt_cublasLtMatmulPreferenceCreate
#define cublasLtMatmulPreferenceDestroy lab_simrt_cublasLtMatmulPreferenceDestroy
#define cublasLtMatmulPreferenceSetAttribute lab_simrt_cublasLtMatmulPreferenceSetAttribute
#define cublasLtMatmulAlgoGetHeuristic lab_simrt_cublasLtMatmulAlgoGetHeuristic

#ifdef __cplusplus
extern "C" {
#endif
cublasStatus_t cublasLtCreate(cublasLtHandle_t *h);
cublasStatus_t cublasLtDestroy(cublasLtHandle_t h);
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d, cublasComputeType_t compute, cudaDataType_t scale);
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d);
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr,
                                              const void *buf, size_t size);
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, cudaDataType_t type, uint64_t rows,
                                          uint64_t cols, int64_t ld);
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l);
cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t attr,
                                                const void *buf, size_t size);
cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t d, const void *alpha, const void *A,
                              cublasLtMatrixLayout_t la, const void *B, cublasLtMatrixLayout_t lb, const void *beta,
                              const void *C, cublasLtMatrixLayout_t lc, void *D, cublasLtMatrixLayout_t ld,
                              const cublasLtMatmulAlgo_t *algo, void *workspace, size_t workspace_bytes,
                              cudaStream_t s);
cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p);
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p);
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void *buf,
                                                    size_t size);
/* one result when the descriptors and layouts are accepted (as cublasLtMatmul checks them) */
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t la,
                                              cublasLtMatrixLayout_t lb, cublasLtMatrixLayout_t lc,
                                              cublasLtMatrixLayout_t ld, cublasLtMatmulPreference_t pref,
                                              int requested, cublasLtMatmulHeuristicResult_t *results,
                                              int *returned);
#ifdef __cplusplus
}
#endif

#endif
