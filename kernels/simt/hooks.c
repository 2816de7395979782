/* Every load and store of an interpreted kernel arrives here: kernels/cuda is compiled for the
 * interpreter with -fsanitize=thread, which makes the compiler call __tsan_readN/__tsan_writeN
 * before each access to memory that may be shared (locals kept in registers are not seen), and
 * this file, not the ThreadSanitizer runtime, defines those hooks (the Linux kernel's KCSAN
 * uses the same instrumentation this way). An access is classified by its address: the
 * thread's own stack (ignored), the block's shared memory (racecheck), the registered global
 * range (memcheck), anything else (host memory the kernel was handed: ignored). */
#define _GNU_SOURCE
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ---- global memory: the registered range and its live allocations ---- */

typedef struct {
  uintptr_t lo, hi;
} span;

static uintptr_t g_lo, g_n, g_shown;
static span *live;
static size_t nlive, caplive;
static span freed[256]; /* the most recent frees, to say "use after free" */
static unsigned nfreed;
static pthread_rwlock_t mem_lock = PTHREAD_RWLOCK_INITIALIZER;

void lab_simt_global_range(void *lo, size_t n, uintptr_t shown_base) {
  g_lo = (uintptr_t)lo, g_n = n, g_shown = shown_base;
}

static size_t find_at(uintptr_t a) { /* first span with lo > a */
  size_t l = 0, h = nlive;
  while (l < h) {
    size_t m = (l + h) / 2;
    if (live[m].lo <= a) l = m + 1;
    else h = m;
  }
  return l;
}

void lab_simt_note_alloc(const void *p, size_t n) {
  pthread_rwlock_wrlock(&mem_lock);
  if (nlive == caplive) {
    size_t cap = caplive ? 2 * caplive : 256;
    span *s = realloc(live, cap * sizeof *s);
    if (!s) {
      pthread_rwlock_unlock(&mem_lock);
      return;
    }
    live = s, caplive = cap;
  }
  size_t i = find_at((uintptr_t)p);
  memmove(live + i + 1, live + i, (nlive - i) * sizeof *live);
  live[i] = (span){(uintptr_t)p, (uintptr_t)p + n};
  nlive++;
  pthread_rwlock_unlock(&mem_lock);
}

void lab_simt_note_free(const void *p, size_t n) {
  pthread_rwlock_wrlock(&mem_lock);
  size_t i = find_at((uintptr_t)p);
  if (i > 0 && live[i - 1].lo == (uintptr_t)p) {
    memmove(live + i - 1, live + i, (nlive - i) * sizeof *live);
    nlive--;
  }
  freed[nfreed++ % 256] = (span){(uintptr_t)p, (uintptr_t)p + n};
  pthread_rwlock_unlock(&mem_lock);
}

/* the allocations the worker touched last (a kernel reads a few operands over and over);
 * emptied at each launch, since frees happen between launches */
static __thread span hit[4];
static __thread unsigned hit_next;

void simt_memcheck_forget(void) { memset(hit, 0, sizeof hit); }

static void memcheck(simt_thr *t, uintptr_t a, size_t n, int write, uintptr_t pc) {
  for (int k = 0; k < 4; k++)
    if (a >= hit[k].lo && a + n <= hit[k].hi) return;
  pthread_rwlock_rdlock(&mem_lock);
  size_t i = find_at(a);
  if (i > 0 && a + n <= live[i - 1].hi) {
    hit[hit_next++ & 3] = live[i - 1];
    pthread_rwlock_unlock(&mem_lock);
    return;
  }
  char why[160] = "outside any allocation";
  for (unsigned k = 0; k < 256 && k < nfreed; k++) {
    span f = freed[(nfreed - 1 - k) % 256];
    if (a >= f.lo && a < f.hi) {
      snprintf(why, sizeof why, "inside a freed allocation of %zu bytes at 0x%zx (use after free)",
               (size_t)(f.hi - f.lo), (size_t)(g_shown + f.lo - g_lo));
      break;
    }
  }
  if (why[0] == 'o' && i > 0 && a >= live[i - 1].lo)
    snprintf(why, sizeof why, "%zu bytes past the end of a %zu-byte allocation at 0x%zx",
             (size_t)(a + n - live[i - 1].hi), (size_t)(live[i - 1].hi - live[i - 1].lo),
             (size_t)(g_shown + live[i - 1].lo - g_lo));
  else if (why[0] == 'o' && i > 0)
    snprintf(why, sizeof why, "%zu bytes after the end of a %zu-byte allocation at 0x%zx", (size_t)(a - live[i - 1].hi),
             (size_t)(live[i - 1].hi - live[i - 1].lo), (size_t)(g_shown + live[i - 1].lo - g_lo));
  pthread_rwlock_unlock(&mem_lock);
  simt_hazard(t, "memcheck", pc, "invalid global %s of %zu bytes at 0x%zx: %s", write ? "write" : "read", n,
              (size_t)(g_shown + a - g_lo), why);
}

/* ---- shared memory: racecheck on a shadow byte per byte ---- */

static uintptr_t tls_size, tls_align;

static int phdr_cb(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size, (void)data;
  for (int i = 0; i < info->dlpi_phnum; i++)
    if (info->dlpi_phdr[i].p_type == PT_TLS) {
      tls_size = info->dlpi_phdr[i].p_memsz;
      tls_align = info->dlpi_phdr[i].p_align ? info->dlpi_phdr[i].p_align : 1;
    }
  return 1; /* the program itself comes first: its static TLS holds the kernels' __shared__ */
}

/* Static __shared__ variables are thread_local (one copy per worker, so per running block):
 * on x86-64 the program's TLS block ends at the thread pointer. Checked against a variable
 * known to be there; where the layout differs, static shared memory is not race-checked. */
static void tls_init(void) { dl_iterate_phdr(phdr_cb, NULL); }

void simt_worker_tls(simt_worker *w) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, tls_init);
#if defined(__x86_64__)
  uintptr_t tp = (uintptr_t)__builtin_thread_pointer();
  uintptr_t n = (tls_size + tls_align - 1) / tls_align * tls_align;
  uintptr_t me = (uintptr_t)&lab_simt_self;
  if (n && me >= tp - n && me < tp) {
    w->tls_lo = tp - n, w->tls_n = n;
    w->sh_tls = calloc(n, sizeof *w->sh_tls);
    if (!w->sh_tls) w->tls_n = 0;
  }
#else
  (void)w;
#endif
}

void simt_shadow_reserve(simt_worker *w, size_t dyn) {
  if (dyn <= w->sh_dyn_cap) return;
  free(w->sh_dyn);
  free(w->pend);
  w->sh_dyn = calloc(dyn, sizeof *w->sh_dyn);
  w->pend = calloc(dyn, sizeof *w->pend);
  if (!w->sh_dyn || !w->pend) {
    free(w->sh_dyn), free(w->pend);
    w->sh_dyn = NULL, w->pend = NULL;
  }
  w->sh_dyn_cap = w->sh_dyn ? dyn : 0;
  w->npend = 0;
}

static void racecheck(simt_thr *t, simt_shadow *sh, uintptr_t off, size_t n, int write, uintptr_t pc,
                      const char *where) {
  simt_worker *w = lab_simt_worker_self;
  uint32_t ep = w->epoch;
  int16_t me = (int16_t)t->tid;
  /* A static __shared__ variable is a thread_local here, and the C++ compiler guards its
   * (empty) initialization with a byte that the first thread of the worker's first block
   * sets: a 1-byte first write to static shared memory is not recorded. */
  if (n == 1 && write && where[0] == 's' && sh[off].wep == 0) return;
  for (size_t i = 0; i < n; i++) {
    simt_shadow *s = &sh[off + i];
    int other = -1;
    const char *kind = NULL;
    if (s->wep == ep && s->wt != me) other = s->wt, kind = write ? "write after write" : "read after write";
    else if (write && s->rep == ep && s->rt != me) other = s->rt, kind = "write after read";
    if (kind) {
      simt_blk *b = simt_blk_of(t);
      char ob[48];
      simt_hazard(t, "racecheck", pc,
                  "shared %s of %zu bytes at %s+0x%zx: %s by thread %s with no __syncthreads between", write ? "write" : "read",
                  n, where, (size_t)(off + i),
                  kind, other >= 0 ? simt_dim_str(simt_tidx(b, other), ob) : "(several)");
      break;
    }
    if (write) s->wep = ep, s->wt = me;
    else if (s->rep != ep) s->rep = ep, s->rt = me;
    else if (s->rt != me) s->rt = -2;
  }
  if (write)
    for (size_t i = 0; i < n; i++) sh[off + i].wep = ep, sh[off + i].wt = me;
}

/* A shared access to bytes a cp.async has not landed yet (no cp.async.wait_group of its
 * issuer since): on a GPU it reads stale data or is overwritten by the copy later. */
static void pending_check(simt_thr *t, simt_worker *w, uintptr_t off, size_t n, int write, uintptr_t pc) {
  for (size_t i = 0; i < n; i++)
    if (w->pend[off + i]) {
      char ob[48];
      int who = w->pend[off + i] - 1;
      simt_hazard(t, "cp.async", pc,
                  "shared %s of %zu bytes at dynamic shared+0x%zx while thread %s's cp.async to it is in flight "
                  "(no cp.async.wait_group since its issue): %s",
                  write ? "write" : "read", n, (size_t)(off + i), simt_dim_str(simt_tidx(simt_blk_of(t), who), ob),
                  write ? "the copy overwrites it later" : "stale data");
      return;
    }
}

void simt_shared_write(simt_thr *t, uintptr_t off, size_t n, uintptr_t pc) {
  simt_worker *w = lab_simt_worker_self;
  racecheck(t, w->sh_dyn, off, n, 1, pc, "dynamic shared");
  simt_log(t, pc, off, (uint32_t)n, SP_SHARED, 1);
}

static inline void access(const void *p, size_t n, int write, void *ret) {
  simt_thr *t = simt_cur();
  if (!t) return;
  uintptr_t a = (uintptr_t)p;
  if (a - (uintptr_t)t->f.stack < t->f.stack_size) return; /* the thread's locals */
  if (a == (uintptr_t)&lab_simt_self) return;             /* threadIdx & co. read it */
  simt_worker *w = lab_simt_worker_self;
  uintptr_t pc = (uintptr_t)ret;
  simt_blk *b = simt_blk_of(t);
  if (b->dyn_n && a - (uintptr_t)w->dyn < b->dyn_n) {
    if (w->npend) pending_check(t, w, a - (uintptr_t)w->dyn, n, write, pc);
    racecheck(t, w->sh_dyn, a - (uintptr_t)w->dyn, n, write, pc, "dynamic shared");
    simt_log(t, pc, a - (uintptr_t)w->dyn, (uint32_t)n, SP_SHARED, write);
    return;
  }
  if (a - w->tls_lo < w->tls_n) {
    racecheck(t, w->sh_tls, a - w->tls_lo, n, write, pc, "static shared");
    simt_log(t, pc, a, (uint32_t)n, SP_SHARED, write);
    return;
  }
  if (a - g_lo < g_n) {
    memcheck(t, a, n, write, pc);
    simt_log(t, pc, a, (uint32_t)n, SP_GLOBAL, write);
  }
}

void simt_access_at(const void *p, size_t n, int write, uintptr_t pc) { access(p, n, write, (void *)pc); }

/* ---- the instrumentation's entry points ---- */
#define RW(N)                                                                                                        \
  void __tsan_read##N(void *p) { access(p, N, 0, __builtin_return_address(0)); }                                   \
  void __tsan_write##N(void *p) { access(p, N, 1, __builtin_return_address(0)); }                                  \
  void __tsan_unaligned_read##N(void *p) { access(p, N, 0, __builtin_return_address(0)); }                         \
  void __tsan_unaligned_write##N(void *p) { access(p, N, 1, __builtin_return_address(0)); }                        \
  void __tsan_volatile_read##N(void *p) { access(p, N, 0, __builtin_return_address(0)); }                          \
  void __tsan_volatile_write##N(void *p) { access(p, N, 1, __builtin_return_address(0)); }
RW(1)
RW(2)
RW(4)
RW(8)
RW(16)
void __tsan_read_range(void *p, unsigned long n) { access(p, n, 0, __builtin_return_address(0)); }
void __tsan_write_range(void *p, unsigned long n) { access(p, n, 1, __builtin_return_address(0)); }
void __tsan_init(void) {}
void __tsan_func_entry(void *p) { (void)p; }
void __tsan_func_exit(void) {}
void __tsan_vptr_update(void **p, void *v) { (void)p, (void)v; }
void __tsan_vptr_read(void **p) { (void)p; }

/* cudaMemsetAsync of the interpreted launchers: the range must lie in one live allocation */
int lab_simt_memset_async(void *p, int byte, size_t n) {
  uintptr_t a = (uintptr_t)p;
  if (n == 0) return 0;
  if (a - g_lo < g_n) {
    pthread_rwlock_rdlock(&mem_lock);
    size_t i = find_at(a);
    int ok = i > 0 && a + n <= live[i - 1].hi;
    pthread_rwlock_unlock(&mem_lock);
    if (!ok) {
      fprintf(stderr, "simt memcheck: cudaMemsetAsync of %zu bytes at 0x%zx is outside any live allocation\n", n,
              (size_t)(g_shown + a - g_lo));
      return 1; /* cudaErrorInvalidValue */
    }
  }
  memset(p, byte, n);
  return 0;
}
