/* The cuda device: start-up without a GPU or driver (cudaGetDeviceCount's errors 35, 34 and 100
 * mean "no GPU here", said by llmlab --version and lab.cuda.status()), one compute stream per
 * device, memory from the caching allocator, copies through cudaMemcpyAsync, the kernels of
 * kernels/cuda, and matrix products through cuBLASLt (f32, optionally TF32; f64; bf16 and f16
 * with f32 accumulation). Compiled where CMake finds the toolkit; code compiled here has not
 * run on a GPU unless tests/gpu says so.
 *
 * Every kernel goes to the stream of the device that owns the op's memory (found from its first
 * pointer), never the one that happens to be current: with two GPUs in a process, an op on
 * cuda:1 after a cuda:0 call must not launch on GPU 0 with GPU 1's pointers. Every launch
 * returns its status and the op's caller raises a launch error naming the op; a kernel that
 * faults later, and a device-side id check that failed, are raised by the next wait (a copy to
 * the host, synchronize), as CUDA raises them. LLMLAB_CUDA_LAUNCH_BLOCKING=1
 * (CUDA_LAUNCH_BLOCKING's twin) makes every op wait for its kernels, so those are raised by the
 * op that faulted. Host-to-device copies do not wait: cudaMemcpyAsync from pageable memory
 * returns once the host buffer has been staged (nothing here pins host memory). */
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
#define CHECKS 32 /* device-side id checks armed between two host waits (a GPT step arms 3) */

typedef struct {
  const char *op; /* a static name: "embedding", "cross_entropy" */
  int64_t limit;
} armed_check;

typedef struct {
  int ready;
  cudaStream_t stream;
  lab_caching_allocator *alloc;
  cublasLtHandle_t lt;
  void *workspace;
  size_t workspace_bytes;
  int64_t *count; /* device scratch for cross-entropy's row count */
  int64_t *checks; /* device: CHECKS records (position + 1, id) for check_slot, zero while none failed */
  int64_t checks_back[2 * CHECKS]; /* their copy, read back with the next host wait */
  armed_check armed[CHECKS];
  int narmed;
  long syncs;    /* cuda_synchronize calls (counter "synchronize:N") */
  long launches; /* kernel launches routed here (counter "launches:N") */
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

/* The segments the caching allocators hold, sorted by address, with their device: a launch finds
 * its device from its first pointer here (a binary search) instead of asking the driver
 * (cudaPointerGetAttributes) on every launch; a pointer not found (none should be) is asked. */
typedef struct {
  uintptr_t lo, hi;
  int device;
} segment;
static segment *segs;
static int nsegs, capsegs;
static long pointer_queries; /* counter "pointer_queries" */

static int seg_find(uintptr_t p) { /* the first segment with lo > p */
  int lo = 0, hi = nsegs;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (segs[mid].lo <= p) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
static int seg_add(void *p, size_t n, int device) {
  if (nsegs == capsegs) {
    int cap = capsegs ? 2 * capsegs : 64;
    segment *grown = realloc(segs, sizeof *grown * (size_t)cap);
    if (!grown) return -1;
    segs = grown, capsegs = cap;
  }
  int at = seg_find((uintptr_t)p);
  memmove(segs + at + 1, segs + at, sizeof *segs * (size_t)(nsegs - at));
  segs[at] = (segment){(uintptr_t)p, (uintptr_t)p + n, device};
  nsegs++;
  return 0;
}
static void seg_remove(void *p) {
  int at = seg_find((uintptr_t)p) - 1;
  if (at < 0 || segs[at].lo != (uintptr_t)p) return;
  memmove(segs + at, segs + at + 1, sizeof *segs * (size_t)(nsegs - at - 1));
  nsegs--;
}

static void *raw_alloc(void *ctx, size_t n) {
  void *p = NULL;
  if (cudaMalloc(&p, n) != cudaSuccess) {
    cudaGetLastError();
    return NULL;
  }
  if (seg_add(p, n, (int)(intptr_t)ctx) < 0) { /* no memory for the table: the segment goes back */
    cudaFree(p);
    return NULL;
  }
  return p;
}
static void raw_free(void *ctx, void *p) {
  (void)ctx;
  seg_remove(p);
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
  int cur = -1;
  cudaError_t e = cudaSuccess;
  /* cudaGetDevice reads the thread's state; cudaSetDevice only where it changes (once per op before) */
  if (cudaGetDevice(&cur) != cudaSuccess || cur != index) e = cudaSetDevice(index);
  if (e != cudaSuccess) {
    fail_cuda("cuda", e);
    return NULL;
  }
  if (g->ready) return g;
  if ((e = cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking)) != cudaSuccess) {
    fail_cuda("cuda start-up", e);
    return NULL;
  }
  g->alloc = lab_ca_new((lab_ca_backend){raw_alloc, raw_free, mem_info, (void *)(intptr_t)index});
  g->workspace_bytes = (size_t)32 << 20;
  if (!g->alloc || cublasLtCreate(&g->lt) != CUBLAS_STATUS_SUCCESS ||
      cudaMalloc(&g->workspace, g->workspace_bytes) != cudaSuccess || cudaMalloc((void **)&g->count, 8) != cudaSuccess ||
      cudaMalloc((void **)&g->checks, sizeof g->checks_back) != cudaSuccess ||
      cudaMemsetAsync(g->checks, 0, sizeof g->checks_back, g->stream) != cudaSuccess) {
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

/* the caching allocator's segments less its blocks in use: what empty_cache gives back */
static size_t cuda_cached_bytes(int index) {
  if (index < 0 || index >= MAX_GPUS || !gpus[index].ready) return 0;
  lab_ca_stats st = lab_ca_get_stats(gpus[index].alloc);
  return (size_t)(st.reserved - st.allocated);
}
/* after the stream's work: a segment given back may still be read by a queued kernel */
static void cuda_empty_cache(int index) {
  if (index < 0 || index >= MAX_GPUS || !gpus[index].ready) return;
  cudaStreamSynchronize(gpus[index].stream);
  lab_ca_empty_cache(gpus[index].alloc);
}

static int launch_blocking(void) {
  static int v = -1;
  if (v < 0) {
    const char *e = getenv("LLMLAB_CUDA_LAUNCH_BLOCKING");
    v = e && atoi(e) == 1;
  }
  return v;
}

/* The host waits for g's stream. The id checks armed since the last wait come back with it (their
 * copy queued ahead of the wait: no second synchronization) and the first that failed is raised,
 * naming its op, as CUDA raises a device-side assert at the next synchronizing call. The failed
 * record is cleared, so the session goes on. */
static int wait_stream(gpu *g, const char *op) {
  int n = g->narmed;
  cudaError_t e = cudaSuccess;
  if (n) e = cudaMemcpyAsync(g->checks_back, g->checks, (size_t)n * 16, cudaMemcpyDeviceToHost, g->stream);
  if (e == cudaSuccess) e = cudaStreamSynchronize(g->stream);
  if (e != cudaSuccess)
    return lab_fail(op, "CUDA error %d: %s (%s)", (int)e, cudaGetErrorString(e),
                    launch_blocking() ? "a kernel of this op faulted"
                                      : "a kernel queued before this wait faulted; LLMLAB_CUDA_LAUNCH_BLOCKING=1 "
                                        "raises it at the op that launched it");
  g->narmed = 0;
  for (int i = 0; i < n; i++) {
    const int64_t *r = g->checks_back + 2 * i;
    if (!r[0]) continue;
    cudaMemsetAsync(g->checks, 0, (size_t)n * 16, g->stream);
    return lab_fail(g->armed[i].op, "id %lld at position %lld is outside [0, %lld) (ids count from 0; found by the "
                    "device's check, raised %s)", (long long)r[1], (long long)r[0], (long long)g->armed[i].limit,
                    launch_blocking() ? "at the op: LLMLAB_CUDA_LAUNCH_BLOCKING=1" : "at the next synchronization");
  }
  return 0;
}

/* a record for a device-side id check (device.h); when every one is armed, a wait reads them */
static int64_t *cuda_check_slot(int index, const char *op, int64_t limit) {
  gpu *g = use(index);
  if (!g) return NULL;
  if (g->narmed == CHECKS && wait_stream(g, op) < 0) return NULL;
  g->armed[g->narmed] = (armed_check){op, limit};
  return g->checks + 2 * g->narmed++;
}

static int copy_kind(int index, void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, int wait) {
  gpu *g = use(index);
  if (!g) return -1;
  cudaError_t e = cudaMemcpyAsync(dst, src, n, kind, g->stream);
  if (e != cudaSuccess) return fail_cuda("copy", e);
  return wait || launch_blocking() ? wait_stream(g, "copy") : 0;
}

/* to pageable host memory: waits, so the values are there when this returns */
static int cuda_to_host(int index, void *dst, const void *src, size_t n) {
  return copy_kind(index, dst, src, n, cudaMemcpyDeviceToHost, 1);
}
/* from pageable host memory: queued; the host buffer may be reused at once (staged by CUDA) */
static int cuda_from_host(int index, void *dst, const void *src, size_t n) {
  return copy_kind(index, dst, src, n, cudaMemcpyHostToDevice, 0);
}
/* Regions may overlap (device.h): cudaMemcpyAsync forbids it, so an overlapping move goes
 * through a block of the stream's own (freed on the stream, so reuse is ordered after it). */
static int cuda_copy(int index, void *dst, const void *src, size_t n) {
  const char *d = dst, *s = src;
  if (n == 0 || d == s) return 0;
  if (d + n <= s || s + n <= d) return copy_kind(index, dst, src, n, cudaMemcpyDeviceToDevice, 0);
  gpu *g = use(index);
  if (!g) return -1;
  void *tmp = lab_ca_malloc(g->alloc, n, g->stream);
  if (!tmp) return -1;
  int rc = copy_kind(index, tmp, src, n, cudaMemcpyDeviceToDevice, 0);
  if (rc == 0) rc = copy_kind(index, dst, tmp, n, cudaMemcpyDeviceToDevice, 0);
  lab_ca_free(g->alloc, tmp);
  return rc;
}
static int cuda_memset(int index, void *dst, int byte, size_t n) {
  gpu *g = use(index);
  if (!g) return -1;
  cudaError_t e = cudaMemsetAsync(dst, byte, n, g->stream);
  if (e != cudaSuccess) return fail_cuda("memset", e);
  return launch_blocking() ? wait_stream(g, "memset") : 0;
}
static int cuda_synchronize(int index) {
  gpu *g = use(index);
  if (!g) return -1;
  g->syncs++;
  return wait_stream(g, "synchronize");
}

/* ---- kernels: the launchers of kernels/cuda on the stream of the device that owns the op's
 * memory. The runtime checked that every pointer of one op is on one device; the first one
 * names it, found in the allocators' segment table (a view's pointer is inside its segment);
 * once, cudaPointerGetAttributes and cudaSetDevice ran on every launch. ---- */

static int device_of(const void *p) {
  probe();
  if (ngpus == 1) return 0; /* no lookup where there is one GPU */
  int at_ = seg_find((uintptr_t)p) - 1;
  if (p && at_ >= 0 && (uintptr_t)p < segs[at_].hi) return segs[at_].device;
  pointer_queries++;
  struct cudaPointerAttributes at;
  if (p && cudaPointerGetAttributes(&at, p) == cudaSuccess && at.type == cudaMemoryTypeDevice) return at.device;
  cudaGetLastError(); /* a host or unknown pointer: the current device, as before */
  int d = 0;
  cudaGetDevice(&d);
  return d;
}

/* the op's device made current; NULL (with lab_fail) when it cannot be */
static gpu *on(const void *p, int *index) {
  *index = device_of(p);
  return use(*index);
}

/* LLMLAB_CUDA_INJECT_LAUNCH_ERROR=op (a name as the launchers give it: "ewise", "reduce", "rand",
 * "layer_norm", "adamw", ...): every launch of that op reports a launch failure, as a kernel
 * asking for more registers or shared memory than the GPU has would; the tests of the op's error
 * path use it (SQLite's fault injection), since the emulated runtime launches what it is given. */
static int injected(const char *op) {
  static const char *e;
  static int read;
  if (!read) e = getenv("LLMLAB_CUDA_INJECT_LAUNCH_ERROR"), read = 1; /* once: not a scan per launch */
  return e && *e && strcmp(e, op) == 0;
}

/* After a launch, its status for the op's caller, which raises it naming the op (a launch error
 * was once kept here and dropped by the void ops: issue 23, defect 2). Without
 * LLMLAB_CUDA_LAUNCH_BLOCKING a kernel's fault shows at the next wait. With the variable at 1
 * the op waits for its kernels here: a fault, or a device-side id check that failed, is raised
 * now, by this op (the emulated runtime clears a fault once it is returned, so it must be
 * raised where it is read). */
static int report_on(gpu *g, int index, const char *op, int e) {
  if (!g) return -1;
  g->launches++;
  if (!e && injected(op))
    return lab_fail(op, "cuda:%d: kernel launch failed: CUDA error %d (injected by LLMLAB_CUDA_INJECT_LAUNCH_ERROR=%s)",
                    index, (int)cudaErrorLaunchFailure, op);
  if (e) {
    cudaGetLastError(); /* a launch error is not sticky: cleared, raised here by the op's caller */
    return lab_fail(op, "cuda:%d: kernel launch failed: CUDA error %d: %s", index, e,
                    cudaGetErrorString((cudaError_t)e));
  }
  if (!launch_blocking()) return 0;
  return wait_stream(g, op); /* the kernels' faults and the armed id checks, raised at this op */
}

static int cu_ewise(const lab_ew_args *a) {
  int index;
  gpu *g = on(a->g.data[0], &index);
  return g ? report_on(g, index, "ewise", lab_cu_ewise(a, g->stream)) : -1;
}
/* Sums and norms of a few long lines, and long middle sums, run over many blocks with scratch
 * from the stream's own pool (freed on the stream: reuse is ordered after the kernels). */
static int cu_reduce(const lab_red_args *a) {
  int index;
  gpu *g = on(a->g.data[0], &index);
  if (!g) return -1;
  lab_red_args k = *a;
  size_t wb = lab_cu_reduce_work_bytes(a);
  k.work = wb ? lab_ca_malloc(g->alloc, wb, g->stream) : NULL; /* NULL: one block per output */
  int rc = report_on(g, index, "reduce", lab_cu_reduce(&k, g->stream));
  if (k.work) lab_ca_free(g->alloc, k.work);
  return rc;
}
static int cu_rand(const lab_rand_args *a) {
  int index;
  gpu *g = on(a->out, &index);
  return g ? report_on(g, index, "rand", lab_cu_rand(a, g->stream)) : -1;
}
/* The fused kernels of kernels/fused_ops.h, generated from their one signature: the launcher
 * on the anchor's device and stream, with scratch from the stream's own pool where the list
 * gives a size (freed on the stream: reuse is ordered after the kernel); each returns the
 * launch's status (report_on). */
#define LAB_P(p) p
#define LAUNCH_(name, R, cpu, cat, op, anchor, work, params, args)                                    \
  static int cu_##name params {                                                                      \
    int index_;                                                                                      \
    gpu *gpu_ = on(anchor, &index_);                                                                 \
    return gpu_ ? report_on(gpu_, index_, op, LAB_CU(name)(LAB_UNPAREN args, gpu_->stream)) : -1;    \
  }
#define LAUNCH_WORK_(name, R, cpu, cat, op, anchor, work, params, args)                               \
  static int cu_##name params {                                                                      \
    int index_;                                                                                      \
    gpu *gpu_ = on(anchor, &index_);                                                                 \
    if (!gpu_) return -1;                                                                            \
    size_t bytes_ = work;                                                                            \
    void *work_ = bytes_ ? lab_ca_malloc(gpu_->alloc, bytes_, gpu_->stream) : NULL;                  \
    int rc_ = report_on(gpu_, index_, op, LAB_CU(name)(LAB_UNPAREN args, work_, gpu_->stream));      \
    if (work_) lab_ca_free(gpu_->alloc, work_);                                                      \
    return rc_;                                                                                      \
  }
LAB_FUSED_LAUNCH(LAUNCH_)
LAB_FUSED_WORK(LAUNCH_WORK_)
#undef LAUNCH_
#undef LAUNCH_WORK_
#undef LAB_P
/* The count of rows not ignored stays on the device (-1 says so): the caller takes the mean there,
 * so the forward does not wait for the GPU (it did, for this count, on every call). */
static int64_t cu_xent_fwd(lab_dtype ct, const void *logits, const int64_t *target, void *loss, void *lse, int64_t N,
                           int64_t C, int64_t ignore_index, double smoothing) {
  int index;
  gpu *g = on(logits, &index);
  if (!g) return -2;
  if (report_on(g, index, "cross_entropy", lab_cu_xent_fwd(ct, logits, target, loss, lse, N, C, ignore_index,
                                                           smoothing, g->count, g->stream)) < 0)
    return -2; /* failed (fused_ops.h) */
  return -1;
}
/* FlashAttention-2 (kernels/cuda/flash_attention*.cu): bf16/f16, head dims 64, 96, 128 and 256 */
static int cu_flash_result(gpu *g, int index, const char *what, int e) {
  if (e == cudaErrorMisalignedAddress)
    return lab_fail("sdpa", "flash %s on cuda needs 16-byte aligned q, k, v (a view that starts inside a row?): "
                    "pass :clone() or use impl='math'", what);
  return report_on(g, index, "sdpa", e);
}
static int cu_flash_fwd(const lab_flash_args *a) {
  int index;
  gpu *g = on(a->q, &index);
  if (!g) return -1;
  return cu_flash_result(g, index, "forward", lab_cu_flash_fwd(a, g->stream));
}
static int cu_flash_bwd(const lab_flash_args *a) {
  int index;
  gpu *g = on(a->q, &index);
  if (!g) return -1;
  return cu_flash_result(g, index, "backward", lab_cu_flash_bwd(a, g->stream));
}

/* ---- matrix products through cuBLASLt ----
 * Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: B's buffer goes first. */

/* f32 products in TF32 when LLMLAB_TF32=1 (as torch's allow_tf32): 10-bit mantissas in the
 * multiply, f32 accumulation */
static int tf32_allowed(void) {
  const char *e = getenv("LLMLAB_TF32");
  return e && atoi(e) == 1;
}

/* A product's cuBLASLt plan: the descriptors, layouts (strided-batched where the batches are
 * evenly spaced) and the heuristic's algorithm for one shape, kept by shape so a training step's
 * few dozen shapes are planned once (the descriptors were rebuilt and the heuristic left to
 * cublasLtMatmul's implicit choice, with no workspace offered, on every call). */
typedef struct {
  int used, device, ct, comp, ta, tb, align;
  int64_t m, n, k, lda, ldb, ldc, batches, sa, sb; /* sa, sb: batch strides; -1: not strided */
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t lb, la, lc;
  cublasLtMatmulAlgo_t algo;
  unsigned long long last; /* for replacing the least recently used */
} lt_plan;

#define LT_PLANS 64
static lt_plan plans[LT_PLANS];
static unsigned long long plan_clock;
static long lt_plans_made, lt_heuristics, lt_matmuls, lt_workspace; /* cuda_counter */

static void plan_drop(lt_plan *p) {
  if (p->lc) cublasLtMatrixLayoutDestroy(p->lc);
  if (p->la) cublasLtMatrixLayoutDestroy(p->la);
  if (p->lb) cublasLtMatrixLayoutDestroy(p->lb);
  if (p->op) cublasLtMatmulDescDestroy(p->op);
  memset(p, 0, sizeof *p);
}

/* the largest power of two up to 256 dividing every pointer of the product: the heuristic
 * must only offer kernels that this alignment allows */
static int alignment_of(const lab_gemm_args *a, size_t es) {
  uintptr_t bits = (uintptr_t)a->a | (uintptr_t)a->b | (uintptr_t)a->c | 256;
  for (int64_t bi = 0; bi < a->batches; bi++)
    bits |= (uintptr_t)(a->a_off[bi] * (int64_t)es) | (uintptr_t)(a->b_off[bi] * (int64_t)es) |
            (uintptr_t)(bi * a->m * a->ldc * (int64_t)es);
  return (int)(bits & (~bits + 1));
}

/* the common stride of an offset array (offset b = b * stride), or -1 */
static int64_t stride_of(const int64_t *off, int64_t batches) {
  if (batches < 2 || off[0] != 0) return batches < 2 ? 0 : -1;
  int64_t st = off[1];
  for (int64_t bi = 2; bi < batches; bi++)
    if (off[bi] != bi * st) return -1;
  return st >= 0 ? st : -1;
}

static cublasStatus_t set_batch(cublasLtMatrixLayout_t l, int64_t batches, int64_t stride) {
  int32_t n = (int32_t)batches;
  cublasStatus_t st = cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &n, sizeof n);
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride);
  return st;
}

static cublasStatus_t plan_make(gpu *g, lt_plan *p, cudaDataType_t dt, cudaDataType_t scale_t) {
  cublasOperation_t opb = p->tb ? CUBLAS_OP_T : CUBLAS_OP_N, opa = p->ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasLtMatmulPreference_t pref = NULL;
  cublasStatus_t st = cublasLtMatmulDescCreate(&p->op, (cublasComputeType_t)p->comp, scale_t);
  if (st == CUBLAS_STATUS_SUCCESS) {
    cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &opb, sizeof opb);
    cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &opa, sizeof opa);
    /* X = B side: n x k after op; Y = A side: k x m after op; C^T: n x m, ld ldc */
    st = cublasLtMatrixLayoutCreate(&p->lb, dt, p->tb ? p->k : p->n, p->tb ? p->n : p->k, p->ldb);
  }
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatrixLayoutCreate(&p->la, dt, p->ta ? p->m : p->k, p->ta ? p->k : p->m, p->lda);
  if (st == CUBLAS_STATUS_SUCCESS) st = cublasLtMatrixLayoutCreate(&p->lc, dt, p->n, p->m, p->ldc);
  if (st == CUBLAS_STATUS_SUCCESS && p->sa >= 0 && p->batches > 1) { /* one strided-batched call */
    st = set_batch(p->lb, p->batches, p->sb);
    if (st == CUBLAS_STATUS_SUCCESS) st = set_batch(p->la, p->batches, p->sa);
    if (st == CUBLAS_STATUS_SUCCESS) st = set_batch(p->lc, p->batches, p->m * p->ldc);
  }
  lt_plans_made++;
  if (st == CUBLAS_STATUS_SUCCESS) st = cublasLtMatmulPreferenceCreate(&pref);
  if (st == CUBLAS_STATUS_SUCCESS) {
    uint64_t ws = g->workspace_bytes;
    lt_workspace = (long)ws;
    uint32_t al = (uint32_t)p->align;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al, sizeof al);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al, sizeof al);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al, sizeof al);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al, sizeof al);
    cublasLtMatmulHeuristicResult_t best;
    int found = 0;
    lt_heuristics++;
    st = cublasLtMatmulAlgoGetHeuristic(g->lt, p->op, p->lb, p->la, p->lc, p->lc, pref, 1, &best, &found);
    if (st == CUBLAS_STATUS_SUCCESS && found < 1) st = CUBLAS_STATUS_NOT_SUPPORTED;
    if (st == CUBLAS_STATUS_SUCCESS) p->algo = best.algo;
    cublasLtMatmulPreferenceDestroy(pref);
  }
  return st;
}

/* the plan of this shape on this device: found, or made in the least recently used slot */
static lt_plan *plan_of(gpu *g, int device, const lab_gemm_args *a, int comp, int align, int64_t sa, int64_t sb,
                        cudaDataType_t dt, cudaDataType_t scale_t, cublasStatus_t *st) {
  lt_plan key = {1, device, (int)a->ct, comp, a->trans_a, a->trans_b, align, a->m, a->n, a->k, a->lda, a->ldb, a->ldc,
                 sa >= 0 ? a->batches : 1, sa, sb, NULL, NULL, NULL, NULL, {{0}}, 0};
  lt_plan *victim = &plans[0];
  for (int i = 0; i < LT_PLANS; i++) {
    lt_plan *p = &plans[i];
    if (p->used && p->device == key.device && p->ct == key.ct && p->comp == key.comp && p->ta == key.ta &&
        p->tb == key.tb && p->align == key.align && p->m == key.m && p->n == key.n && p->k == key.k &&
        p->lda == key.lda && p->ldb == key.ldb && p->ldc == key.ldc && p->batches == key.batches && p->sa == key.sa &&
        p->sb == key.sb) {
      p->last = ++plan_clock;
      return p;
    }
    if (!p->used) victim = p;
    else if (victim->used && p->last < victim->last) victim = p;
  }
  plan_drop(victim);
  *victim = key;
  *st = plan_make(g, victim, dt, scale_t);
  if (*st != CUBLAS_STATUS_SUCCESS) {
    plan_drop(victim);
    return NULL;
  }
  victim->last = ++plan_clock;
  return victim;
}

static int cu_gemm(const lab_gemm_args *a) {
  int index;
  gpu *g = on(a->c, &index);
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
  if (a->m == 0 || a->n == 0 || a->batches == 0) return 0;
  if (a->k == 0) { /* C = beta C with nothing to add: cuBLASLt has no k = 0; beta is 0 here (matmul.c) */
    cudaError_t e = cudaMemsetAsync(a->c, 0, (size_t)(a->batches * a->m * a->ldc) * es, g->stream);
    return e == cudaSuccess ? 0 : fail_cuda("matmul", e);
  }
  float alpha_f = (float)a->alpha, beta_f = (float)a->beta;
  double alpha_d = a->alpha, beta_d = a->beta;
  const void *alpha = scale_t == CUDA_R_64F ? (const void *)&alpha_d : (const void *)&alpha_f;
  const void *beta = scale_t == CUDA_R_64F ? (const void *)&beta_d : (const void *)&beta_f;
  int64_t sa = stride_of(a->a_off, a->batches), sb = stride_of(a->b_off, a->batches);
  if (sa < 0 || sb < 0) sa = sb = -1; /* uneven offsets: one call per batch */
  cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
  lt_plan *p = plan_of(g, index, a, (int)comp, alignment_of(a, es), sa, sb, dt, scale_t, &st);
  int64_t calls = sa >= 0 ? 1 : a->batches;
  for (int64_t bi = 0; p && st == CUBLAS_STATUS_SUCCESS && bi < calls; bi++) {
    const char *pa = (const char *)a->a + a->a_off[bi] * (int64_t)es;
    const char *pb = (const char *)a->b + a->b_off[bi] * (int64_t)es;
    char *pc = (char *)a->c + bi * a->m * a->ldc * (int64_t)es;
    st = cublasLtMatmul(g->lt, p->op, alpha, pb, p->lb, pa, p->la, beta, pc, p->lc, pc, p->lc, &p->algo, g->workspace,
                        g->workspace_bytes, g->stream);
    lt_matmuls++;
  }
  if (st != CUBLAS_STATUS_SUCCESS)
    return lab_fail("matmul", "cuBLASLt failed (status %d) for %s [%lld x %lld] x [%lld x %lld]%s on cuda:%d", (int)st,
                    (a->ct == LAB_F32 ? "f32" : a->ct == LAB_F64 ? "f64" : a->ct == LAB_BF16 ? "bf16" : "f16"),
                    (long long)a->m, (long long)a->k, (long long)a->k, (long long)a->n,
                    a->batches > 1 ? " (batched)" : "", index);
  return report_on(g, index, "matmul", 0);
}

/* the counts device.h's counter entry names (tests/sim/test_cublaslt_plans.lua reads them on the sim) */
static long cuda_counter(const char *name) {
  if (!strcmp(name, "lt_plans")) return lt_plans_made;
  if (!strcmp(name, "lt_heuristics")) return lt_heuristics;
  if (!strcmp(name, "lt_matmuls")) return lt_matmuls;
  if (!strcmp(name, "lt_workspace")) return lt_workspace;
  int i = -1, n = 0;
  if (sscanf(name, "synchronize:%d%n", &i, &n) == 1 && !name[n] && i >= 0 && i < MAX_GPUS) return gpus[i].syncs;
  if (sscanf(name, "ready:%d%n", &i, &n) == 1 && !name[n] && i >= 0 && i < MAX_GPUS) return gpus[i].ready;
  if (sscanf(name, "launches:%d%n", &i, &n) == 1 && !name[n] && i >= 0 && i < MAX_GPUS) return gpus[i].launches;
  if (!strcmp(name, "pointer_queries")) return pointer_queries;
  return -1;
}

static const lab_device_ops cuda_ops = {
    .name = "cuda",
    .describe = cuda_describe,
    .gemm_half = 1,
    LAB_DEVICE_MEMORY(cuda) /* device.h */
    .check_slot = cuda_check_slot,
    LAB_DEVICE_LAUNCHES(cu)
#define ENTRY_(name, R, cpu, cat, op, anchor, work, params, args) .name = cu_##name,
    LAB_FUSED_REQUIRED(ENTRY_) /* kernels/fused_ops.h; no optional ones */
#undef ENTRY_
    .flash_supports = lab_cu_flash_supports,
    .flash_fwd = cu_flash_fwd,
    .flash_bwd = cu_flash_bwd,
    .counter = cuda_counter,
};

const lab_device_ops *lab_cuda_device_ops(void) { return &cuda_ops; }
