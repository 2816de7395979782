/* cuBLASLt on the sim (shim/cublasLt.h): the descriptors keep every attribute cuda_device.c
 * sets, and cublasLtMatmul checks them as cuBLASLt does (shapes after the transposes must
 * agree, types must match the compute type) before queueing a reference product on the stream:
 * D = alpha op(A) op(B) + beta C (+ bias per row of D), column-major with each layout's leading
 * dimension, per batch at each layout's strided batch offset. Products accumulate in double and
 * are stored in D's type rounding to nearest; CUBLAS_COMPUTE_32F_FAST_TF32 rounds A and B to
 * TF32 (10-bit mantissas) first, as the tensor cores do. This is a reference, not cuBLASLt's
 * algorithms: what it exercises is the call's arguments. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../kernels/cpu/half.h"
#include "shim/cublasLt.h"
#include "simrt_internal.h"

struct lab_simrt_lt_handle {
  int device;
};
struct lab_simrt_lt_desc {
  cublasComputeType_t compute;
  cudaDataType_t scale;
  int transa, transb;
  int epilogue;
  const void *bias;
  cudaDataType_t bias_type;
  int bias_type_set;
};
struct lab_simrt_lt_layout {
  cudaDataType_t type;
  uint64_t rows, cols;
  int64_t ld;
  int32_t batch;
  int64_t batch_stride;
};

cublasStatus_t cublasLtCreate(cublasLtHandle_t *h) {
  *h = calloc(1, sizeof **h);
  if (!*h) return CUBLAS_STATUS_ALLOC_FAILED;
  cudaGetDevice(&(*h)->device);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtDestroy(cublasLtHandle_t h) {
  free(h);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d, cublasComputeType_t compute, cudaDataType_t scale) {
  if (compute != CUBLAS_COMPUTE_32F && compute != CUBLAS_COMPUTE_32F_FAST_TF32 && compute != CUBLAS_COMPUTE_64F)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  *d = calloc(1, sizeof **d);
  if (!*d) return CUBLAS_STATUS_ALLOC_FAILED;
  (*d)->compute = compute;
  (*d)->scale = scale;
  (*d)->epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) {
  free(d);
  return CUBLAS_STATUS_SUCCESS;
}

static int get_int(const void *buf, size_t size, int *out) {
  if (size != sizeof(int32_t)) return -1;
  int32_t v;
  memcpy(&v, buf, 4);
  *out = v;
  return 0;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr,
                                              const void *buf, size_t size) {
  int v = 0;
  switch (attr) {
  case CUBLASLT_MATMUL_DESC_TRANSA:
    if (get_int(buf, size, &v) || (v != CUBLAS_OP_N && v != CUBLAS_OP_T)) return CUBLAS_STATUS_INVALID_VALUE;
    d->transa = v == CUBLAS_OP_T;
    return CUBLAS_STATUS_SUCCESS;
  case CUBLASLT_MATMUL_DESC_TRANSB:
    if (get_int(buf, size, &v) || (v != CUBLAS_OP_N && v != CUBLAS_OP_T)) return CUBLAS_STATUS_INVALID_VALUE;
    d->transb = v == CUBLAS_OP_T;
    return CUBLAS_STATUS_SUCCESS;
  case CUBLASLT_MATMUL_DESC_EPILOGUE:
    if (get_int(buf, size, &v) || (v != CUBLASLT_EPILOGUE_DEFAULT && v != CUBLASLT_EPILOGUE_BIAS))
      return CUBLAS_STATUS_NOT_SUPPORTED; /* the sim implements the epilogues the project uses */
    d->epilogue = v;
    return CUBLAS_STATUS_SUCCESS;
  case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
    if (size != sizeof(void *)) return CUBLAS_STATUS_INVALID_VALUE;
    memcpy(&d->bias, buf, sizeof(void *));
    return CUBLAS_STATUS_SUCCESS;
  case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE:
    if (get_int(buf, size, &v)) return CUBLAS_STATUS_INVALID_VALUE;
    d->bias_type = (cudaDataType_t)v;
    d->bias_type_set = 1;
    return CUBLAS_STATUS_SUCCESS;
  }
  return CUBLAS_STATUS_INVALID_VALUE;
}

static size_t type_size(cudaDataType_t t) {
  switch (t) {
  case CUDA_R_32F: return 4;
  case CUDA_R_64F: return 8;
  case CUDA_R_16F:
  case CUDA_R_16BF: return 2;
  }
  return 0;
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, cudaDataType_t type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  /* cuBLASLt: ld >= rows for a column-major layout */
  if (!type_size(type) || (rows > 0 && ld < (int64_t)rows)) return CUBLAS_STATUS_INVALID_VALUE;
  *l = calloc(1, sizeof **l);
  if (!*l) return CUBLAS_STATUS_ALLOC_FAILED;
  **l = (struct lab_simrt_lt_layout){type, rows, cols, ld, 1, 0};
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) {
  free(l);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t attr,
                                                const void *buf, size_t size) {
  if (attr == CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT && size == 4) {
    memcpy(&l->batch, buf, 4);
    return l->batch >= 1 ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
  }
  if (attr == CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET && size == 8) {
    memcpy(&l->batch_stride, buf, 8);
    return CUBLAS_STATUS_SUCCESS;
  }
  return CUBLAS_STATUS_INVALID_VALUE;
}

/* ---- the reference product, on the stream's worker ---- */

typedef struct {
  struct lab_simrt_lt_desc d;
  struct lab_simrt_lt_layout la, lb, lc, ld;
  double alpha, beta;
  const void *A, *B, *C;
  void *D;
} product;

static double load(cudaDataType_t t, const char *base, int64_t i) {
  switch (t) {
  case CUDA_R_32F: return ((const float *)base)[i];
  case CUDA_R_64F: return ((const double *)base)[i];
  case CUDA_R_16F: return lab_f16_to_f32(((const uint16_t *)base)[i]);
  case CUDA_R_16BF: return lab_bf16_to_f32(((const uint16_t *)base)[i]);
  }
  return NAN;
}
static void store(cudaDataType_t t, char *base, int64_t i, double v) {
  switch (t) {
  case CUDA_R_32F: ((float *)base)[i] = (float)v; break;
  case CUDA_R_64F: ((double *)base)[i] = v; break;
  case CUDA_R_16F: ((uint16_t *)base)[i] = lab_f32_to_f16((float)v); break;
  case CUDA_R_16BF: ((uint16_t *)base)[i] = lab_f32_to_bf16((float)v); break;
  }
}
static double tf32(double v) { /* f32 rounded to 10 mantissa bits, nearest even */
  float f = (float)v;
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0xfffu + ((u >> 13) & 1u)) & ~0x1fffu;
  memcpy(&f, &u, 4);
  return f;
}

/* op(X)[r][c] for a layout and transpose flag */
static double at(const struct lab_simrt_lt_layout *l, const char *p, int trans, int64_t r, int64_t c) {
  return trans ? load(l->type, p, c + r * l->ld) : load(l->type, p, r + c * l->ld);
}

/* op(A) and op(B) are first unpacked (as double, TF32-rounded where asked) into rows of k, so
 * the product's inner loop is a contiguous dot product */
static int run_product(void *arg) {
  product *q = arg;
  int64_t m = (int64_t)q->ld.rows, n = (int64_t)q->ld.cols, k = (int64_t)(q->d.transa ? q->la.rows : q->la.cols);
  int fast = q->d.compute == CUBLAS_COMPUTE_32F_FAST_TF32;
  cudaDataType_t bt = q->d.bias_type_set ? q->d.bias_type : q->ld.type;
  double *ra = malloc((size_t)(m * k + n * k + 1) * sizeof(double)), *rb = ra + m * k;
  if (!ra) return cudaErrorMemoryAllocation;
  for (int32_t b = 0; b < q->ld.batch; b++) {
    const char *A = (const char *)lab_simrt_kview(q->A) + b * q->la.batch_stride * (int64_t)type_size(q->la.type);
    const char *B = (const char *)lab_simrt_kview(q->B) + b * q->lb.batch_stride * (int64_t)type_size(q->lb.type);
    const char *C = (const char *)lab_simrt_kview(q->C) + b * q->lc.batch_stride * (int64_t)type_size(q->lc.type);
    char *D = (char *)lab_simrt_kview(q->D) + b * q->ld.batch_stride * (int64_t)type_size(q->ld.type);
    const char *bias = q->d.epilogue == CUBLASLT_EPILOGUE_BIAS ? lab_simrt_kview(q->d.bias) : NULL;
    for (int64_t r = 0; r < m; r++)
      for (int64_t i = 0; i < k; i++) {
        double x = at(&q->la, A, q->d.transa, r, i);
        ra[r * k + i] = fast ? tf32(x) : x;
      }
    for (int64_t c = 0; c < n; c++)
      for (int64_t i = 0; i < k; i++) {
        double y = at(&q->lb, B, q->d.transb, i, c);
        rb[c * k + i] = fast ? tf32(y) : y;
      }
    for (int64_t c = 0; c < n; c++)
      for (int64_t r = 0; r < m; r++) {
        const double *x = ra + r * k, *y = rb + c * k;
        double acc = 0;
        for (int64_t i = 0; i < k; i++) acc += x[i] * y[i];
        double v = q->alpha * acc;
        if (q->beta != 0) v += q->beta * load(q->lc.type, C, r + c * q->lc.ld); /* beta 0: C is not read */
        if (bias) v += load(bt, bias, r);
        store(q->ld.type, D, r + c * q->ld.ld, v);
      }
  }
  free(ra);
  return 0;
}

/* the checks cuBLASLt makes of a product's descriptor and layouts */
static cublasStatus_t check(cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t la, cublasLtMatrixLayout_t lb,
                            cublasLtMatrixLayout_t lc, cublasLtMatrixLayout_t ld) {
  if (!d || !la || !lb || !lc || !ld) return CUBLAS_STATUS_INVALID_VALUE;
  /* the shapes after the transposes: op(A) m x k, op(B) k x n, C and D m x n */
  uint64_t m = d->transa ? la->cols : la->rows, k = d->transa ? la->rows : la->cols;
  uint64_t kb = d->transb ? lb->cols : lb->rows, n = d->transb ? lb->rows : lb->cols;
  if (k != kb || lc->rows != m || lc->cols != n || ld->rows != m || ld->cols != n) return CUBLAS_STATUS_INVALID_VALUE;
  if (la->batch != ld->batch || lb->batch != ld->batch || lc->batch != ld->batch) return CUBLAS_STATUS_INVALID_VALUE;
  /* the type combinations used: all of A, B, C, D one type; f64 with COMPUTE_64F and f64
   * scales; the rest with COMPUTE_32F(_FAST_TF32) and f32 scales (TF32 only for f32) */
  if (la->type != lb->type || la->type != lc->type || la->type != ld->type) return CUBLAS_STATUS_NOT_SUPPORTED;
  int f64 = la->type == CUDA_R_64F;
  if (f64 != (d->compute == CUBLAS_COMPUTE_64F) || f64 != (d->scale == CUDA_R_64F) ||
      (d->compute == CUBLAS_COMPUTE_32F_FAST_TF32 && la->type != CUDA_R_32F))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  if (d->epilogue == CUBLASLT_EPILOGUE_BIAS && !d->bias) return CUBLAS_STATUS_INVALID_VALUE;
  return CUBLAS_STATUS_SUCCESS;
}

struct lab_simrt_lt_pref {
  uint64_t max_workspace;
  uint32_t align[4];
};

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p) {
  *p = calloc(1, sizeof **p);
  if (!*p) return CUBLAS_STATUS_ALLOC_FAILED;
  for (int i = 0; i < 4; i++) (*p)->align[i] = 256; /* cuBLASLt's default: 256-byte aligned */
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) {
  free(p);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void *buf,
                                                    size_t size) {
  if (attr == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES && size == 8) {
    memcpy(&p->max_workspace, buf, 8);
    return CUBLAS_STATUS_SUCCESS;
  }
  if (attr >= CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES && attr <= CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES &&
      size == 4) {
    memcpy(&p->align[attr - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES], buf, 4);
    return CUBLAS_STATUS_SUCCESS;
  }
  return CUBLAS_STATUS_INVALID_VALUE;
}

/* the algorithm found is valid for pointers aligned as the preference promised (the smallest
 * of A, B, C, D); cublasLtMatmul refuses it for pointers aligned less, as a real kernel
 * chosen for 16-byte loads would fault. No workspace is needed. */
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t la,
                                              cublasLtMatrixLayout_t lb, cublasLtMatrixLayout_t lc,
                                              cublasLtMatrixLayout_t ld, cublasLtMatmulPreference_t pref,
                                              int requested, cublasLtMatmulHeuristicResult_t *results,
                                              int *returned) {
  *returned = 0;
  if (!h || !pref || requested < 1) return CUBLAS_STATUS_INVALID_VALUE;
  cublasStatus_t st = check(d, la, lb, lc, ld);
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  uint32_t al = pref->align[0];
  for (int i = 1; i < 4; i++)
    if (pref->align[i] < al) al = pref->align[i];
  memset(&results[0], 0, sizeof results[0]);
  results[0].algo.data[0] = al ? al : 1;
  results[0].state = CUBLAS_STATUS_SUCCESS;
  results[0].wavesCount = 1;
  *returned = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t d, const void *alpha, const void *A,
                              cublasLtMatrixLayout_t la, const void *B, cublasLtMatrixLayout_t lb, const void *beta,
                              const void *C, cublasLtMatrixLayout_t lc, void *D, cublasLtMatrixLayout_t ld,
                              const cublasLtMatmulAlgo_t *algo, void *workspace, size_t workspace_bytes,
                              cudaStream_t s) {
  (void)algo, (void)workspace, (void)workspace_bytes;
  if (!h || !alpha || !beta) return CUBLAS_STATUS_INVALID_VALUE;
  cublasStatus_t st = check(d, la, lb, lc, ld);
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  int f64 = la->type == CUDA_R_64F;
  if (algo) {
    const void *ptrs[4] = {A, B, C, D};
    for (int i = 0; i < 4; i++)
      if (!algo->data[0] || (uintptr_t)ptrs[i] % algo->data[0]) return CUBLAS_STATUS_INVALID_VALUE; /* misaligned for the algo */
  }
  product *q = malloc(sizeof *q);
  if (!q) return CUBLAS_STATUS_ALLOC_FAILED;
  *q = (product){*d, *la, *lb, *lc, *ld, 0, 0, A, B, C, D};
  q->alpha = f64 ? *(const double *)alpha : *(const float *)alpha;
  q->beta = f64 ? *(const double *)beta : *(const float *)beta;
  return lab_simrt_enqueue(s, run_product, q) == cudaSuccess ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}
