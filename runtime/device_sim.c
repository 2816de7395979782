/* The sim device: a testing device that proves the seam on machines without a GPU. Its memory
 * is a shared-memory arena seen through two mappings, as a GPU's memory is seen by the GPU
 * and not by the host: the addresses handed out (device pointers) map the arena PROT_NONE, so
 * host code that dereferences a sim tensor's memory faults on the spot; kernels launched
 * through the device table, and the device copy functions, translate device pointers into a
 * second, readable and writable view of the same pages. The kernels are the cpu's, called
 * through its table, so a CPU-only CI run with --device sim shows that every path goes through
 * the device functions. Where the build found the CUDA headers (LLMLAB_HAVE_SIMT), the kernels
 * are instead kernels/cuda's own, run by the SIMT interpreter (kernels/simt) on the same kernel
 * view: every pointer argument is translated here before the launcher sees it (the pointers
 * inside lab_ew_args, lab_red_args and lab_flash_args too), the arena's allocations are told to
 * the interpreter's memcheck with 256 unused bytes between them, and a hazard it reports makes
 * the op fail with the report's first line. (A first version toggled the arena with mprotect around each launch:
 * two system calls per launch made the tests 7-15x slower; the second view costs nothing and
 * never opens the device addresses at all.) */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "device.h"
#include "device_sim.h"
#include "error.h"
#ifdef LLMLAB_HAVE_SIMT
#include "../kernels/simt/launch_sim.h"
#include "../kernels/simt/simt.h"
#endif

#define ARENA_RESERVE ((size_t)64 << 30) /* address space only: pages appear when written */

/* ---- the arena: a first-fit free list kept outside the arena, sorted by address ---- */

typedef struct range {
  struct range *next;
  size_t at, size;
} range;

static char *base;  /* device addresses: never accessible */
static char *kview; /* the same pages for kernels and copies */
static range *free_list;

#ifdef LLMLAB_HAVE_SIMT
#define GAP 256 /* unused bytes after each allocation: an overrun lands in no allocation */
static void simt_at_exit(void) {
  const char *cov = getenv("LLMLAB_SIMT_COVERAGE");
  FILE *f = cov && *cov ? fopen(cov, "a") : NULL;
  if (f) {
    lab_simt_coverage(f);
    fclose(f);
  }
  if (getenv("LLMLAB_SIMT_PERF")) lab_simt_perf_report(stderr);
}
static void simt_start(void) {
  lab_simt_global_range(kview, ARENA_RESERVE, (uintptr_t)base);
  const char *s = getenv("LLMLAB_SIMT_SEED"), *w = getenv("LLMLAB_SIMT_THREADS");
  if (s) lab_simt_set_seed(strtoull(s, NULL, 10));
  if (w) lab_simt_set_workers(atoi(w));
  if (getenv("LLMLAB_SIMT_PERF")) lab_simt_set_perf(1);
  atexit(simt_at_exit);
}
#else
#define GAP 0
#endif

static int arena_init(void) {
  if (base) return 0;
  int fd = memfd_create("llmlab-sim", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, (off_t)ARENA_RESERVE) != 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  void *dev = mmap(NULL, ARENA_RESERVE, PROT_NONE, MAP_SHARED | MAP_NORESERVE, fd, 0);
  void *kv = mmap(NULL, ARENA_RESERVE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
  close(fd); /* the mappings keep the memory */
  free_list = malloc(sizeof *free_list);
  if (dev == MAP_FAILED || kv == MAP_FAILED || !free_list) return -1;
  base = dev;
  kview = kv;
  *free_list = (range){NULL, 0, ARENA_RESERVE};
#ifdef LLMLAB_HAVE_SIMT
  simt_start();
#endif
  return 0;
}

/* The kernel view of a pointer: device addresses are translated, host pointers (a cpu scalar
 * operand, say) pass unchanged, NULL stays NULL. */
static void *K(const void *p) {
  const char *c = p;
  if (c >= base && c < base + ARENA_RESERVE) return kview + (c - base);
  return (void *)c;
}

static int sim_count(void) { return 1; }

/* note: tell the interpreter's memcheck (runtime/simrt registers the caching allocator's
 * blocks instead of its segments) */
static void *arena_alloc(size_t nbytes, int note) {
  if (arena_init() < 0 || nbytes == 0) return NULL;
  size_t asked = nbytes;
  nbytes = (nbytes + 255) / 256 * 256 + GAP; /* 256-byte aligned, as cudaMalloc's */
  for (range **p = &free_list; *p; p = &(*p)->next) {
    range *r = *p;
    if (r->size < nbytes) continue;
    size_t at = r->at;
    r->at += nbytes;
    r->size -= nbytes;
    if (r->size == 0) {
      *p = r->next;
      free(r);
    }
#ifdef LLMLAB_HAVE_SIMT
    if (note) lab_simt_note_alloc(kview + at, asked);
#else
    (void)asked, (void)note;
#endif
    return base + at;
  }
  return NULL;
}

static void *sim_alloc(int index, size_t nbytes) {
  (void)index;
  return arena_alloc(nbytes, 1);
}

static void arena_free(void *ptr, size_t nbytes, int note) {
  if (!ptr) return;
#ifdef LLMLAB_HAVE_SIMT
  if (note) lab_simt_note_free(K(ptr), nbytes);
#else
  (void)note;
#endif
  nbytes = (nbytes + 255) / 256 * 256 + GAP;
  size_t at = (size_t)((char *)ptr - base);
  range *prev = NULL, *next = free_list;
  while (next && next->at < at) {
    prev = next;
    next = next->next;
  }
  if (prev && prev->at + prev->size == at) { /* merge with the range before */
    prev->size += nbytes;
    if (next && prev->at + prev->size == next->at) {
      prev->size += next->size;
      prev->next = next->next;
      free(next);
    }
    return;
  }
  if (next && at + nbytes == next->at) { /* merge with the range after */
    next->at = at;
    next->size += nbytes;
    return;
  }
  range *r = malloc(sizeof *r);
  if (!r) return; /* the bytes are lost to the arena, not to the process */
  *r = (range){next, at, nbytes};
  if (prev) prev->next = r;
  else free_list = r;
}

static void sim_free(int index, void *ptr, size_t nbytes) {
  (void)index;
  arena_free(ptr, nbytes, 1);
}

void *lab_sim_arena_alloc(size_t nbytes, int note) { return arena_alloc(nbytes, note); }
void lab_sim_arena_free(void *p, size_t nbytes, int note) { arena_free(p, nbytes, note); }
void *lab_sim_kview(const void *p) { return K(p); }
size_t lab_sim_arena_bytes(void) { return ARENA_RESERVE; }

/* ---- moving bytes: the only way in or out ---- */

static int sim_move(int index, void *dst, const void *src, size_t n) {
  (void)index;
#ifdef LLMLAB_HAVE_SIMT
  if (lab_sim_take_error()) return -1;
#endif
  memmove(K(dst), K(src), n);
  return 0;
}

static int sim_memset(int index, void *dst, int byte, size_t n) {
  (void)index;
  memset(K(dst), byte, n);
  return 0;
}

static _Atomic long host_syncs; /* runtime/simrt counts too, from whichever thread waits */
long lab_sim_host_syncs(void) { return host_syncs; }
void lab_sim_note_host_sync(void) { host_syncs++; }

/* to the host: where the cuda device waits for its stream (counted) */
static int sim_to_host(int index, void *dst, const void *src, size_t n) {
  host_syncs++;
  return sim_move(index, dst, src, n);
}

static int sim_synchronize(int index) {
  (void)index;
  host_syncs++;
#ifdef LLMLAB_HAVE_SIMT
  return lab_sim_take_error();
#endif
  return 0;
}

/* ---- kernels: the cpu's, on the kernel view ---- */

#define CPU (lab_cpu_device_ops())

static void sim_ewise(const lab_ew_args *a) {
  lab_ew_args k = *a;
  for (int i = 0; i < k.g.nops; i++) k.g.data[i] = K(k.g.data[i]);
  CPU->ewise(&k);
}
static void sim_reduce(const lab_red_args *a) {
  lab_red_args k = *a;
  for (int i = 0; i < k.g.nops; i++) k.g.data[i] = K(k.g.data[i]);
  CPU->reduce(&k);
}
static void sim_sum_middle(lab_dtype ct, const void *x, void *out, int64_t outer, int64_t R, int64_t inner,
                           double scale) {
  CPU->sum_middle(ct, K(x), K(out), outer, R, inner, scale);
}
static void sim_softmax_rows(lab_dtype ct, const void *x, void *out, int64_t rows, int64_t n, int log) {
  CPU->softmax_rows(ct, K(x), K(out), rows, n, log);
}
static int sim_gemm(const lab_gemm_args *a) {
  lab_gemm_args k = *a;
  k.a = K(a->a);
  k.b = K(a->b);
  k.c = K(a->c);
  return CPU->gemm(&k);
}
static void sim_rand(const lab_rand_args *a) {
  lab_rand_args k = *a;
  k.out = K(a->out);
  CPU->rand(&k);
}
static void sim_layer_norm_fwd(lab_dtype ct, const void *x, const void *w, const void *b, void *y, void *mean,
                               void *rstd, int64_t rows, int64_t D, double eps) {
  CPU->layer_norm_fwd(ct, K(x), K(w), K(b), K(y), K(mean), K(rstd), rows, D, eps);
}
static void sim_layer_norm_bwd(lab_dtype ct, const void *g, const void *x, const void *w, const void *mean,
                               const void *rstd, void *dx, void *dw, void *db, int64_t rows, int64_t D) {
  CPU->layer_norm_bwd(ct, K(g), K(x), K(w), K(mean), K(rstd), K(dx), K(dw), K(db), rows, D);
}
static void sim_rms_norm_fwd(lab_dtype ct, const void *x, const void *w, void *y, void *rstd, int64_t rows,
                             int64_t D, double eps) {
  CPU->rms_norm_fwd(ct, K(x), K(w), K(y), K(rstd), rows, D, eps);
}
static void sim_rms_norm_bwd(lab_dtype ct, const void *g, const void *x, const void *w, const void *rstd, void *dx,
                             void *dw, int64_t rows, int64_t D) {
  CPU->rms_norm_bwd(ct, K(g), K(x), K(w), K(rstd), K(dx), K(dw), rows, D);
}
static void sim_act_fwd(lab_dtype ct, lab_act_kind kind, const void *x, void *y, int64_t n) {
  CPU->act_fwd(ct, kind, K(x), K(y), n);
}
static void sim_act_bwd(lab_dtype ct, lab_act_kind kind, const void *g, const void *x, void *dx, int64_t n) {
  CPU->act_bwd(ct, kind, K(g), K(x), K(dx), n);
}

static int64_t sim_xent_fwd(lab_dtype ct, const void *logits, const int64_t *target, void *loss, void *lse,
                            int64_t N, int64_t C, int64_t ignore_index, double smoothing) {
  return CPU->xent_fwd(ct, K(logits), K(target), K(loss), K(lse), N, C, ignore_index, smoothing);
}
static void sim_xent_bwd(lab_dtype ct, const void *logits, const int64_t *target, const void *lse, void *dlogits,
                         int64_t N, int64_t C, int64_t ignore_index, double smoothing, double scale) {
  CPU->xent_bwd(ct, K(logits), K(target), K(lse), K(dlogits), N, C, ignore_index, smoothing, scale);
}
static void sim_embedding_fwd(lab_dtype ct, const void *weight, const int64_t *idx, void *out, int64_t n,
                              int64_t D) {
  CPU->embedding_fwd(ct, K(weight), K(idx), K(out), n, D);
}
static void sim_embedding_bwd(lab_dtype ct, const void *g, const int64_t *idx, void *dweight, int64_t n,
                              int64_t D) {
  CPU->embedding_bwd(ct, K(g), K(idx), K(dweight), n, D);
}
static void sim_causal_mask(lab_dtype ct, void *scores, int64_t batches, int64_t T, int64_t S) {
  CPU->causal_mask(ct, K(scores), batches, T, S);
}
static void sim_softmax_bwd_rows(lab_dtype ct, const void *P, void *dP, int64_t rows, int64_t S, double scale) {
  CPU->softmax_bwd_rows(ct, K(P), K(dP), rows, S, scale);
}
static void sim_adamw(lab_dtype ct, void *p, const void *g, void *m, void *v, int64_t n, double lr, double b1,
                      double b2, double eps, double wd, int64_t step) {
  CPU->adamw(ct, K(p), K(g), K(m), K(v), n, lr, b1, b2, eps, wd, step);
}

/* the argument block with every pointer on the kernel view */
static lab_flash_args flash_view(const lab_flash_args *a) {
  lab_flash_args k = *a;
  k.q = K(a->q), k.k = K(a->k), k.v = K(a->v), k.o = K(a->o), k.dout = K(a->dout);
  k.out = K(a->out), k.lse = K(a->lse), k.dq = K(a->dq), k.dk = K(a->dk), k.dv = K(a->dv), k.work = K(a->work);
  return k;
}
static int sim_flash_supports(lab_dtype dt, int64_t D, int64_t Dv) { return CPU->flash_supports(dt, D, Dv); }
static int sim_flash_fwd(const lab_flash_args *a) {
  lab_flash_args k = flash_view(a);
  return CPU->flash_fwd(&k);
}
static int sim_flash_bwd(const lab_flash_args *a) {
  lab_flash_args k = flash_view(a);
  return CPU->flash_bwd(&k);
}

static const char *sim_describe(void) {
#ifdef LLMLAB_HAVE_SIMT
  return "sim device: kernels/cuda under the SIMT interpreter (racecheck, synccheck, memcheck)";
#else
  return "sim device: the cpu kernels (built without the CUDA headers, so no SIMT interpreter)";
#endif
}

#ifdef LLMLAB_HAVE_SIMT
static const char *sim_describe_cpu(void) { return "sim device: the cpu kernels (LLMLAB_SIMT=0)"; }
#endif

static lab_device_ops sim_ops = {
    .name = "sim",
    .count = sim_count,
    .describe = sim_describe,
    .alloc = sim_alloc,
    .free = sim_free,
    .to_host = sim_to_host,
    .from_host = sim_move,
    .copy = sim_move,
    .memset = sim_memset,
    .synchronize = sim_synchronize,
    .ewise = sim_ewise,
    .reduce = sim_reduce,
    .sum_middle = sim_sum_middle,
    .softmax_rows = sim_softmax_rows,
    .gemm = sim_gemm,
    .rand = sim_rand,
    .layer_norm_fwd = sim_layer_norm_fwd,
    .layer_norm_bwd = sim_layer_norm_bwd,
    .rms_norm_fwd = sim_rms_norm_fwd,
    .rms_norm_bwd = sim_rms_norm_bwd,
    .act_fwd = sim_act_fwd,
    .act_bwd = sim_act_bwd,
    /* no act_bwd_bias nor adamw_multi: the sim lane runs the fallbacks cuda takes (act_bwd +
     * sum_middle, adamw per tensor) */
    .xent_fwd = sim_xent_fwd,
    .xent_bwd = sim_xent_bwd,
    .embedding_fwd = sim_embedding_fwd,
    .embedding_bwd = sim_embedding_bwd,
    .causal_mask = sim_causal_mask,
    .softmax_bwd_rows = sim_softmax_bwd_rows,
    .adamw = sim_adamw,
    .flash_supports = sim_flash_supports,
    .flash_fwd = sim_flash_fwd,
    .flash_bwd = sim_flash_bwd,
    .flash_strided = 1, /* the cpu kernels on the kernel view: strides are only numbers */
};

#ifdef LLMLAB_HAVE_SIMT
/* The sim's table by default: runtime/cuda/cuda_device.c itself (its allocator, streams,
 * launchers and cuBLASLt calls) over runtime/simrt's emulated CUDA runtime, named sim.
 * LLMLAB_SIMRT=0 keeps the direct table of this file with interpreted kernels. */
static lab_device_ops simrt_ops;
static const char *simrt_describe(void) {
  return "sim device: runtime/cuda's device over an emulated CUDA runtime (runtime/simrt: 2 devices, streams on "
         "worker threads, a reference GEMM for cuBLASLt), kernels/cuda under the SIMT interpreter (racecheck, "
         "synccheck, memcheck)";
}
/* Integer products: the cuda device refuses them (cuBLASLt has none the runtime uses), the cpu
 * and the Lua suite have them; here they stay the cpu's on the kernel view, after every queued
 * copy ran. A difference of the cuda device left as found (tests/lua/test_tensor.lua's
 * matmul would fail on a GPU). */
static int simrt_gemm(const lab_gemm_args *a) {
  if (lab_dtype_is_float(a->ct)) return lab_simrt_cuda_device_ops()->gemm(a);
  if (lab_simrt_sync_all() != 0) return lab_fail("matmul", "sim: a queued copy failed");
  return sim_gemm(a);
}
static int simrt_wanted(void) {
  const char *e = getenv("LLMLAB_SIMRT");
  return !e || strcmp(e, "0") != 0;
}
int lab_sim_is_simrt(void) { return lab_sim_device_ops() == &simrt_ops; }
#else
int lab_sim_is_simrt(void) { return 0; }
#endif

const lab_device_ops *lab_sim_device_ops(void) {
#ifdef LLMLAB_HAVE_SIMT
  /* LLMLAB_SIMT=0: the cpu kernels, as a build without the headers (tests too large for the
   * interpreter's budget in CI run that way: tests/CMakeLists.txt) */
  static int simt;
  if (!simt) {
    simt = 1;
    const char *e = getenv("LLMLAB_SIMT");
    if (!e || strcmp(e, "0") != 0) {
      lab_sim_use_simt(&sim_ops, K);
      if (simrt_wanted() && arena_init() == 0) {
        simrt_ops = *lab_simrt_cuda_device_ops();
        simrt_ops.name = "sim";
        simrt_ops.describe = simrt_describe;
        simrt_ops.gemm = simrt_gemm;
      }
    } else sim_ops.describe = sim_describe_cpu;
  }
  if (simrt_ops.name) return &simrt_ops;
#endif
  return &sim_ops;
}
