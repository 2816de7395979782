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
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <unistd.h>

#include "block_cache.h"
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
/* This process's coverage table appended to the file every test of the sim lane shares, as one
 * write under an exclusive lock: ctest runs them side by side, and stdio's appends split a table
 * at its buffer's size, so two processes' lines interleaved mid-line (a torn 'rms_norm_fwd_k<float>
 * -> 0' failed sim.coverage). */
static void append_coverage(const char *path) {
  char *text = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&text, &len);
  if (!mem) return;
  lab_simt_coverage(mem);
  fclose(mem);
  int fd = open(path, O_WRONLY | O_APPEND | O_CREAT, 0644);
  if (fd >= 0) {
    flock(fd, LOCK_EX);
    for (size_t done = 0; done < len;) {
      ssize_t n = write(fd, text + done, len - done);
      if (n <= 0) break;
      done += (size_t)n;
    }
    close(fd); /* the lock goes with it */
  }
  free(text);
}

static void simt_at_exit(void) {
  const char *cov = getenv("LLMLAB_SIMT_COVERAGE");
  if (cov && *cov) append_coverage(cov);
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

static void *arena_raw_alloc(size_t nbytes) { return arena_alloc(nbytes, 1); }
static void arena_raw_free(void *p, size_t nbytes) { arena_free(p, nbytes, 1); }
/* the direct table's freed blocks kept for reuse (up to 1 GiB), as the cpu's: the simrt table
 * caches in runtime/cuda's caching allocator instead */
static lab_block_cache cache = {.min = 1, .limit = (size_t)1 << 30, .raw_alloc = arena_raw_alloc,
                                .raw_free = arena_raw_free};

static void *sim_alloc(int index, size_t nbytes) { return (void)index, lab_bc_alloc(&cache, nbytes); }
static void sim_free(int index, void *p, size_t nbytes) { (void)index, lab_bc_free(&cache, p, nbytes); }
static size_t sim_cached_bytes(int index) { return (void)index, cache.bytes; }
static void sim_empty_cache(int index) { (void)index, lab_bc_empty(&cache); }

void *lab_sim_arena_alloc(size_t nbytes, int note) { return arena_alloc(nbytes, note); }
void lab_sim_arena_free(void *p, size_t nbytes, int note) { arena_free(p, nbytes, note); }
void *lab_sim_kview(const void *p) { return K(p); }
size_t lab_sim_arena_bytes(void) { return ARENA_RESERVE; }

/* ---- moving bytes: the only way in or out ---- */

/* both directions and device-to-device: one move on the kernel view */
#define sim_copy sim_move
static int sim_move(int index, void *dst, const void *src, size_t n) {
  (void)index;
#ifdef LLMLAB_HAVE_SIMT
  if (lab_sim_take_error()) return -1;
#endif
  memmove(K(dst), K(src), n);
  return 0;
}

/* host-to-device copies are counted (lab.cuda.sim_uploads), on either table: a Lua number in an
 * op on a device once cost one each (issue 23, defect 4) */
static _Atomic long uploads;
long lab_sim_uploads(void) { return uploads; }
static int sim_from_host(int index, void *dst, const void *src, size_t n) {
  uploads++;
  return sim_move(index, dst, src, n);
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

static int sim_ewise(const lab_ew_args *a) {
  lab_ew_args k = *a;
  for (int i = 0; i < k.g.nops; i++) k.g.data[i] = K(k.g.data[i]);
  return CPU->ewise(&k);
}
static int sim_reduce(const lab_red_args *a) {
  lab_red_args k = *a;
  for (int i = 0; i < k.g.nops; i++) k.g.data[i] = K(k.g.data[i]);
  return CPU->reduce(&k);
}
/* integer products are refused as the cuda device refuses them (cuBLASLt has none), also where
 * the sim runs the cpu kernels: what passes on the sim must pass on a GPU */
static int sim_gemm(const lab_gemm_args *a) {
  if (!lab_dtype_is_float(a->ct))
    return lab_fail("matmul", "integer matrix products are not supported on cuda (convert to f32 first)");
  lab_gemm_args k = *a;
  k.a = K(a->a);
  k.b = K(a->b);
  k.c = K(a->c);
  return CPU->gemm(&k);
}
static int sim_rand(const lab_rand_args *a) {
  lab_rand_args k = *a;
  k.out = K(a->out);
  return CPU->rand(&k);
}
/* the fused kernels (kernels/fused_ops.h): the cpu's, every pointer on the kernel view */
#define LAB_P(p) K(p)
#define SIM_(name, R, cpu, cat, op, anchor, work, params, args) \
  static LAB_FUSED_STATUS(R) sim_##name params { return CPU->name args; }
LAB_FUSED_REQUIRED(SIM_)
#undef SIM_
#undef LAB_P

/* the argument block with every pointer on the kernel view (device_sim.h) */
lab_flash_args lab_sim_flash_view(const lab_flash_args *a) {
  lab_flash_args k = *a;
  k.q = K(a->q), k.k = K(a->k), k.v = K(a->v), k.o = K(a->o), k.dout = K(a->dout);
  k.out = K(a->out), k.lse = K(a->lse), k.dq = K(a->dq), k.dk = K(a->dk), k.dv = K(a->dv), k.work = K(a->work);
  return k;
}
static int sim_flash_supports(lab_dtype dt, int64_t D, int64_t Dv) { return CPU->flash_supports(dt, D, Dv); }
static int sim_flash_fwd(const lab_flash_args *a) {
  lab_flash_args k = lab_sim_flash_view(a);
  return CPU->flash_fwd(&k);
}
static int sim_flash_bwd(const lab_flash_args *a) {
  lab_flash_args k = lab_sim_flash_view(a);
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
    .describe = sim_describe,
    LAB_DEVICE_MEMORY(sim) /* device.h */
    LAB_DEVICE_LAUNCHES(sim)
    /* kernels/fused_ops.h's required entries; no optional ones (act_bwd_bias, adamw_multi): the
     * sim lane runs the fallbacks cuda takes (act_bwd + sum_middle, adamw per tensor) */
#define ENTRY_(name, R, cpu, cat, op, anchor, work, params, args) .name = sim_##name,
    LAB_FUSED_REQUIRED(ENTRY_)
#undef ENTRY_
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
/* Every product goes to the cuda device's gemm, integer ones too: it refuses them (cuBLASLt has
 * none the runtime uses, and torch.matmul on CUDA has none either), and a sim that kept the
 * cpu's integer product passed what a GPU refuses (tests/lua/test_tensor.lua's matmul). */
static int simrt_gemm(const lab_gemm_args *a) { return lab_simrt_cuda_device_ops()->gemm(a); }
static int simrt_from_host(int index, void *dst, const void *src, size_t n) {
  uploads++;
  return lab_simrt_cuda_device_ops()->from_host(index, dst, src, n);
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
        simrt_ops.from_host = simrt_from_host;
      }
    } else sim_ops.describe = sim_describe_cpu;
  }
  if (simrt_ops.name) return &simrt_ops;
#endif
  return &sim_ops;
}

/* registered when the program is loaded (device.h); the table is made at the first use of the
 * sim, when its settings (LLMLAB_SIMT, LLMLAB_SIMRT) are read */
__attribute__((constructor)) static void sim_register(void) { lab_device_provide(LAB_DEV_SIM, lab_sim_device_ops, NULL); }
