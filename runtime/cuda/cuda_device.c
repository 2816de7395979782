/* The cuda device: start-up without a GPU or driver (cudaGetDeviceCount's errors 35, 34 and 100
 * mean "no GPU here", said by llmlab --version and lab.cuda.status()), one compute stream per
 * device, memory from the caching allocator, copies through cudaMemcpyAsync, the kernels of
 * kernels/cuda, and matrix products through cuBLASLt (f32, optionally TF32; f64; bf16 and f16
 * with f32 accumulation). Compiled where CMake finds the toolkit; code compiled here has not
 * run on a GPU unless tests/gpu says so. */
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../kernels/cuda/launch.h"
#include "../device.h"
#include "../error.h"
#include "caching_allocator.h"
#include "cuda_device.h"

#define MAX_GPUS 16

typedef struct {
  int ready;
  cudaStream_t stream;
  lab_caching_allocator *alloc;
  cublasLtHandle_t lt;
  void *workspace;
  size_t workspace_bytes;
  int64_t *count; /* device scratch for cross-entropy's row count */
} gpu;

static gpu gpus[MAX_GPUS];
static int probed, ngpus;
static char status[512];

static void probe(void) {
  if (probed) return;
  probed = 1;
  int rt = 0;
  cudaRuntimeGetVersion(&rt);
  cudaError_t e = cudaGetDeviceCount(&ngpus);
  if (e != cudaSuccess) {
    ngpus = 0;
    const char *why = e == cudaErrorNoDevice ? "no CUDA-capable device is detected"
                      : e == cudaErrorInsufficientDriver ? "no CUDA driver (or one older than this runtime)"
                      : cudaGetErrorString(e);
    snprintf(status, sizeof status, "CUDA compiled in (runtime %d.%d); no GPU usable: %s (error %d)", rt / 1000,
             rt % 1000 / 10, why, (int)e);
    cudaGetLastError(); /* clear it */
    return;
  }
  if (ngpus > MAX_GPUS) ngpus = MAX_GPUS;
  struct cudaDeviceProp p;
  if (ngpus > 0 && cudaGetDeviceProperties(&p, 0) == cudaSuccess)
    snprintf(status, sizeof status, "CUDA compiled in (runtime %d.%d); %d GPU%s: %s (sm_%d%d, %.0f GiB)", rt / 1000,
             rt % 1000 / 10, ngpus, ngpus == 1 ? "" : "s", p.name, p.major, p.minor,
             (double)p.totalGlobalMem / (1 << 30));
  else snprintf(status, sizeof status, "CUDA compiled in (runtime %d.%d); %d GPUs", rt / 1000, rt % 1000 / 10, ngpus);
}

static const char *cuda_describe(void) {
  probe();
  return status;
}

static int cuda_count(void) {
  probe();
  return ngpus;
}

static int fail_cuda(const char *op, cudaError_t e) {
  return lab_fail(op, "CUDA error %d: %s", (int)e, cudaGetErrorString(e));
}

static void *raw_alloc(void *ctx, size_t n) {
  (void)ctx;
  void *p = NULL;
  if (cudaMalloc(&p, n) != cudaSuccess) {
    cudaGetLastError();
    return NULL;
  }
  return p;
}
static void raw_free(void *ctx, void *p) {
  (void)ctx;
  cudaFree(p);
}
static int mem_info(void *ctx, size_t *fr, size_t *total) {
  (void)ctx;
  return cudaMemGetInfo(fr, total) == cudaSuccess ? 0 : -1;
}

/* The device made current with its stream, allocator and cuBLASLt handle on first use. */
static gpu *use(int index) {
  probe();
  if (index < 0 || index >= ngpus) {
    lab_fail("cuda", "device %d does not exist (%d present)", index, ngpus);
    return NULL;
  }
  gpu *g = &gpus[index];
  cudaError_t e = cudaSetDevice(index);
  if (e != cudaSuccess) {
    fail_cuda("cuda", e);
    return NULL;
  }
  if (g->ready) return g;
  if ((e = cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking)) != cudaSuccess) {
    fail_cuda("cuda start-up", e);
    return NULL;
  }
  g->alloc = lab_ca_new((lab_ca_backend){raw_alloc, raw_free, mem_info, NULL});
  g->workspace_bytes = (size_t)32 << 20;
  if (!g->alloc || cublasLtCreate(&g->lt) != CUBLAS_STATUS_SUCCESS ||
      cudaMalloc(&g->workspace, g->workspace_bytes) != cudaSuccess || cudaMalloc((void **)&g->count, 8) != cudaSuccess) {
    lab_fail("cuda start-up", "cannot create the stream, allocator or cuBLASLt handle on device %d", index);
    return NULL;
  }
  g->ready = 1;
  return g;
}

static cudaStream_t stream_of(int index) {
  gpu *g = use(index);
  return g ? g->stream : NULL;
}

cudaStream_t lab_cuda_compute_stream(int index) { return stream_of(index); }

/* ---- memory ---- */

static void *cuda_alloc(int index, size_t n) {
  gpu *g = use(index);
  return g ? lab_ca_malloc(g->alloc, n, g->stream) : NULL;
}

static void cuda_free(int index, void *p, size_t n) {
  (void)n;
  gpu *g = use(index);
  if (g) lab_ca_free(g->alloc, p);
}

static int copy_kind(int index, void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, int wait) {
  gpu *g = use(index);
  if (!g) return -1;
  cudaError_t e = cudaMemcpyAsync(dst, src, n, kind, g->stream);
  if (e == cudaSuccess && wait) e = cudaStreamSynchronize(g->stream);
  return e == cudaSuccess ? 0 : fail_cuda("copy", e);
}

/* to and from pageable host memory: waits, so the host buffer may be reused at once */
static int cuda_to_host(int index, void *dst, const void *src, size_t n) {
  return copy_kind(index, dst, src, n, cudaMemcpyDeviceToHost, 1);
}
static int cuda_from_host(int index, void *dst, const void *src, size_t n) {
  return copy_kind(index, dst, src, n, cudaMemcpyHostToDevice, 1);
}
static int cuda_copy(int index, void *dst, const void *src, size_t n) {
  return copy_kind(index, dst, src, n, cudaMemcpyDeviceToDevice, 0);
}
static int cuda_memset(int index, void *dst, int byte, size_t n) {
  gpu *g = use(index);
  if (!g) return -1;
  cudaError_t e = cudaMemsetAsync(dst, byte, n, g->stream);
  return e == cudaSuccess ? 0 : fail_cuda("memset", e);
}
static int cuda_synchronize(int index) {
  gpu *g = use(index);
  if (!g) return -1;
  cudaError_t e = cudaStreamSynchronize(g->stream);
  return e == cudaSuccess ? 0 : fail_cuda("synchronize", e);
}

/* ---- kernels: the launchers of kernels/cuda on the device's stream. Pointers of one launch
 * belong to one device; the runtime checked that. The device is found from the stream of
 * device 0 unless another was made current by use(). ---- */

static int current(void) {
  int d = 0;
  cudaGetDevice(&d);
  return d;
}
#define S (stream_of(current()))

static void report(const char *op, int e) {
  if (e) fail_cuda(op, (cudaError_t)e);
}

static void cu_ewise(const lab_ew_args *a) { report("ewise", lab_cu_ewise(a, S)); }
static void cu_reduce(const lab_red_args *a) { report("reduce", lab_cu_reduce(a, S)); }
static void cu_sum_middle(lab_dtype ct, const void *x, void *out, int64_t outer, int64_t R, int64_t inner,
                          double scale) {
  report("sum", lab_cu_sum_middle(ct, x, out, outer, R, inner, scale, S));
}
static void cu_softmax_rows(lab_dtype ct, const void *x, void *out, int64_t rows, int64_t n, int log) {
  report("softmax", lab_cu_softmax_rows(ct, x, out, rows, n, log, S));
}
static void cu_rand(const lab_rand_args *a) { report("rand", lab_cu_rand(a, S)); }
static void cu_layer_norm_fwd(lab_dtype ct, const void *x, const void *w, const void *b, void *y, void *mean,
                              void *rstd, int64_t rows, int64_t D, double eps) {
  report("layer_norm", lab_cu_layer_norm_fwd(ct, x, w, b, y, mean, rstd, rows, D, eps, S));
}
static void cu_layer_norm_bwd(lab_dtype ct, const void *g, const void *x, const void *w, const void *mean,
                              const void *rstd, void *dx, void *dw, void *db, int64_t rows, int64_t D) {
  report("layer_norm", lab_cu_layer_norm_bwd(ct, g, x, w, mean, rstd, dx, dw, db, rows, D, S));
}
static void cu_rms_norm_fwd(lab_dtype ct, const void *x, const void *w, void *y, void *rstd, int64_t rows, int64_t D,
                            double eps) {
  report("rms_norm", lab_cu_rms_norm_fwd(ct, x, w, y, rstd, rows, D, eps, S));
}
static void cu_rms_norm_bwd(lab_dtype ct, const void *g, const void *x, const void *w, const void *rstd, void *dx,
                            void *dw, int64_t rows, int64_t D) {
  report("rms_norm", lab_cu_rms_norm_bwd(ct, g, x, w, rstd, dx, dw, rows, D, S));
}
static void cu_act_fwd(lab_dtype ct, lab_act_kind kind, const void *x, void *y, int64_t n) {
  report("activation", lab_cu_act_fwd(ct, kind, x, y, n, S));
}
static void cu_act_bwd(lab_dtype ct, lab_act_kind kind, const void *g, const void *x, void *dx, int64_t n) {
  report("activation", lab_cu_act_bwd(ct, kind, g, x, dx, n, S));
}
static int64_t cu_xent_fwd(lab_dtype ct, const void *logits, const int64_t *target, void *loss, void *lse, int64_t N,
                           int64_t C, int64_t ignore_index, double smoothing) {
  gpu *g = use(current());
  int64_t count = 0;
  if (!g) return 0;
  report("cross_entropy", lab_cu_xent_fwd(ct, logits, target, loss, lse, N, C, ignore_index, smoothing, g->count, g->stream));
  if (cudaMemcpyAsync(&count, g->count, 8, cudaMemcpyDeviceToHost, g->stream) != cudaSuccess ||
      cudaStreamSynchronize(g->stream) != cudaSuccess)
    report("cross_entropy", (int)cudaGetLastError());
  return count;
}
static void cu_xent_bwd(lab_dtype ct, const void *logits, const int64_t *target, const void *lse, void *dlogits,
                        int64_t N, int64_t C, int64_t ignore_index, double smoothing, double scale) {
  report("cross_entropy", lab_cu_xent_bwd(ct, logits, target, lse, dlogits, N, C, ignore_index, smoothing, scale, S));
}
static void cu_embedding_fwd(lab_dtype ct, const void *weight, const int64_t *idx, void *out, int64_t n, int64_t D) {
  report("embedding", lab_cu_embedding_fwd(ct, weight, idx, out, n, D, S));
}
static void cu_embedding_bwd(lab_dtype ct, const void *g, const int64_t *idx, void *dweight, int64_t n, int64_t D) {
  report("embedding", lab_cu_embedding_bwd(ct, g, idx, dweight, n, D, S));
}
static void cu_causal_mask(lab_dtype ct, void *scores, int64_t batches, int64_t T, int64_t Sk) {
  report("sdpa", lab_cu_causal_mask(ct, scores, batches, T, Sk, S));
}
static void cu_softmax_bwd_rows(lab_dtype ct, const void *P, void *dP, int64_t rows, int64_t Sk, double scale) {
  report("sdpa", lab_cu_softmax_bwd_rows(ct, P, dP, rows, Sk, scale, S));
}
static void cu_adamw(lab_dtype ct, void *p, const void *g, void *m, void *v, int64_t n, double lr, double b1, double b2,
                     double eps, double wd, int64_t step) {
  report("adamw", lab_cu_adamw(ct, p, g, m, v, n, lr, b1, b2, eps, wd, step, S));
}

/* FlashAttention-2 (kernels/cuda/flash_attention*.cu): bf16/f16, head dims 64 or 128 */
static int cu_flash_result(const char *what, int e) {
  if (e == cudaErrorMisalignedAddress)
    return lab_fail("sdpa", "flash %s on cuda needs 16-byte aligned q, k, v (a view that starts inside a row?): "
                    "pass :clone() or use impl='math'", what);
  return e ? fail_cuda("sdpa", (cudaError_t)e) : 0;
}
static int cu_flash_fwd(const lab_flash_args *a) { return cu_flash_result("forward", lab_cu_flash_fwd(a, S)); }
static int cu_flash_bwd(const lab_flash_args *a) { return cu_flash_result("backward", lab_cu_flash_bwd(a, S)); }

/* ---- matrix products through cuBLASLt ----
 * Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: B's buffer goes first. */

/* f32 products in TF32 when LLMLAB_TF32=1 (as torch's allow_tf32): 10-bit mantissas in the
 * multiply, f32 accumulation */
static int tf32_allowed(void) {
  const char *e = getenv("LLMLAB_TF32");
  return e && atoi(e) == 1;
}

static int cu_gemm(const lab_gemm_args *a) {
  gpu *g = use(current());
  if (!g) return -1;
  cudaDataType_t dt;
  cublasComputeType_t comp;
  cudaDataType_t scale_t = CUDA_R_32F;
  size_t es;
  switch (a->ct) {
  case LAB_F32: dt = CUDA_R_32F; comp = tf32_allowed() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F; es = 4; break;
  case LAB_F64: dt = CUDA_R_64F; comp = CUBLAS_COMPUTE_64F; scale_t = CUDA_R_64F; es = 8; break;
  case LAB_BF16: dt = CUDA_R_16BF; comp = CUBLAS_COMPUTE_32F; es = 2; break;
  case LAB_F16: dt = CUDA_R_16F; comp = CUBLAS_COMPUTE_32F; es = 2; break;
  default: return lab_fail("matmul", "integer matrix products are not supported on cuda (convert to f32 first)");
  }
  if (a->m == 0 || a->n == 0) return 0;
  cublasLtMatmulDesc_t op = NULL;
  cublasLtMatrixLayout_t lb = NULL, la = NULL, lc = NULL;
  cublasOperation_t opb = a->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, opa = a->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasStatus_t st = cublasLtMatmulDescCreate(&op, comp, scale_t);
  if (st == CUBLAS_STATUS_SUCCESS) {
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &opb, sizeof opb);
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &opa, sizeof opa);
    /* X = B side: n x k after op; Y = A side: k x m after op; C^T: n x m, ld ldc */
    st = cublasLtMatrixLayoutCreate(&lb, dt, a->trans_b ? a->k : a->n, a->trans_b ? a->n : a->k, a->ldb);
  }
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatrixLayoutCreate(&la, dt, a->trans_a ? a->m : a->k, a->trans_a ? a->k : a->m, a->lda);
  if (st == CUBLAS_STATUS_SUCCESS) st = cublasLtMatrixLayoutCreate(&lc, dt, a->n, a->m, a->ldc);
  float alpha_f = (float)a->alpha, beta_f = (float)a->beta;
  double alpha_d = a->alpha, beta_d = a->beta;
  const void *alpha = scale_t == CUDA_R_64F ? (const void *)&alpha_d : (const void *)&alpha_f;
  const void *beta = scale_t == CUDA_R_64F ? (const void *)&beta_d : (const void *)&beta_f;
  for (int64_t bi = 0; st == CUBLAS_STATUS_SUCCESS && bi < a->batches; bi++) {
    const char *pa = (const char *)a->a + a->a_off[bi] * (int64_t)es;
    const char *pb = (const char *)a->b + a->b_off[bi] * (int64_t)es;
    char *pc = (char *)a->c + bi * a->m * a->ldc * (int64_t)es;
    if (a->k == 0) {
      cudaMemsetAsync(pc, 0, (size_t)(a->m * a->ldc) * es, g->stream);
      continue;
    }
    st = cublasLtMatmul(g->lt, op, alpha, pb, lb, pa, la, beta, pc, lc, pc, lc, NULL, g->workspace, g->workspace_bytes,
                        g->stream);
  }
  if (lc) cublasLtMatrixLayoutDestroy(lc);
  if (la) cublasLtMatrixLayoutDestroy(la);
  if (lb) cublasLtMatrixLayoutDestroy(lb);
  if (op) cublasLtMatmulDescDestroy(op);
  if (st != CUBLAS_STATUS_SUCCESS)
    return lab_fail("matmul", "cuBLASLt failed (status %d) for %s [%lld x %lld] x [%lld x %lld]", (int)st,
                    (a->ct == LAB_F32 ? "f32" : a->ct == LAB_F64 ? "f64" : a->ct == LAB_BF16 ? "bf16" : "f16"), (long long)a->m, (long long)a->k, (long long)a->k, (long long)a->n);
  return 0;
}

static const lab_device_ops cuda_ops = {
    .name = "cuda",
    .count = cuda_count,
    .describe = cuda_describe,
    .gemm_half = 1,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .to_host = cuda_to_host,
    .from_host = cuda_from_host,
    .copy = cuda_copy,
    .memset = cuda_memset,
    .synchronize = cuda_synchronize,
    .ewise = cu_ewise,
    .reduce = cu_reduce,
    .sum_middle = cu_sum_middle,
    .softmax_rows = cu_softmax_rows,
    .gemm = cu_gemm,
    .rand = cu_rand,
    .layer_norm_fwd = cu_layer_norm_fwd,
    .layer_norm_bwd = cu_layer_norm_bwd,
    .rms_norm_fwd = cu_rms_norm_fwd,
    .rms_norm_bwd = cu_rms_norm_bwd,
    .act_fwd = cu_act_fwd,
    .act_bwd = cu_act_bwd,
    .xent_fwd = cu_xent_fwd,
    .xent_bwd = cu_xent_bwd,
    .embedding_fwd = cu_embedding_fwd,
    .embedding_bwd = cu_embedding_bwd,
    .causal_mask = cu_causal_mask,
    .softmax_bwd_rows = cu_softmax_bwd_rows,
    .adamw = cu_adamw,
    .flash_supports = lab_cu_flash_supports,
    .flash_fwd = cu_flash_fwd,
    .flash_bwd = cu_flash_bwd,
};

const lab_device_ops *lab_cuda_device_ops(void) { return &cuda_ops; }
