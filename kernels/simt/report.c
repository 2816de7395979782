/* What the interpreter found, said once: hazard lines naming the kind, kernel, block, thread,
 * address and site (the first few of each site per launch, then a count), and the coverage
 * table (every kernel instantiation the code can launch, with its launches). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_long total, in_launch;
typedef struct {
  const char *name;
  long launches, blocks; /* coverage: since start */
  double seconds;
  lab_simt_kernel_stats r; /* since lab_simt_reset_stats */
  long ended;              /* blocks of r that ended (for the fewest barriers) */
} kstat;
static kstat kernels[256];
static int nkernels;
static char last[1024];
static uintptr_t seen_pc[64];
static int nseen, printed;

const char *simt_dim_str(lab_simt_dim v, char *buf) {
  snprintf(buf, 48, "(%u,%u,%u)", v.x, v.y, v.z);
  return buf;
}

lab_simt_dim simt_tidx(const simt_blk *b, int tid) {
  lab_simt_dim d = b->pub.bdim;
  return (lab_simt_dim){(unsigned)tid % d.x, (unsigned)tid / d.x % d.y, (unsigned)tid / (d.x * d.y)};
}

/* "kernels/cuda/flash_attention.cu:123" where the program has line tables and addr2line is
 * installed, otherwise the function and offset dladdr knows, otherwise the address */
static void site_name(uintptr_t pc, char *out, size_t n) {
  Dl_info di;
  snprintf(out, n, "pc 0x%zx", (size_t)pc);
  if (!dladdr((void *)pc, &di) || !di.dli_fname) return;
  uintptr_t rel = pc - (uintptr_t)di.dli_fbase - 1; /* the call instruction, not the next one */
  char cmd[512];
  snprintf(cmd, sizeof cmd, "addr2line -e '%s' 0x%zx 2>/dev/null", di.dli_fname, (size_t)rel);
  FILE *p = getenv("LLMLAB_SIMT_NO_LINES") ? NULL : popen(cmd, "r");
  if (p) {
    char line[400];
    if (fgets(line, sizeof line, p) && line[0] != '?') {
      line[strcspn(line, " \n")] = 0;
      const char *s = strstr(line, "kernels/");
      snprintf(out, n, "%s", s ? s : line);
    }
    pclose(p);
  }
}

void simt_site_name(uintptr_t pc, char *out, size_t n) { site_name(pc, out, n); }

void simt_launch_begin(void) {
  atomic_store(&in_launch, 0);
  pthread_mutex_lock(&mu);
  nseen = 0, printed = 0;
  pthread_mutex_unlock(&mu);
}

long simt_launch_hazards(void) {
  long n = atomic_load(&in_launch);
  if (n > printed && printed) fprintf(stderr, "simt: %ld hazards in this launch (%d shown)\n", n, printed);
  return n;
}

void simt_hazard(simt_thr *t, const char *kind, uintptr_t pc, const char *fmt, ...) {
  atomic_fetch_add(&total, 1);
  atomic_fetch_add(&in_launch, 1);
  pthread_mutex_lock(&mu);
  int id = simt_blk_of(t)->d->kernel_id;
  if (id >= 0 && id < nkernels) kernels[id].r.hazards++;
  int fresh = 1;
  for (int i = 0; i < nseen; i++) fresh &= seen_pc[i] != pc;
  if (!fresh || printed >= 8) {
    pthread_mutex_unlock(&mu);
    return;
  }
  if (nseen < 64) seen_pc[nseen++] = pc;
  printed++;
  simt_blk *b = simt_blk_of(t);
  char msg[300], site[200], bb[48], tb[48];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  site_name(pc, site, sizeof site);
  snprintf(last, sizeof last, "simt %s: %s block %s thread %s: %s [%s]", kind, b->d->kernel,
           simt_dim_str(b->pub.bidx, bb), simt_dim_str(t->pub.tidx, tb), msg, site);
  fprintf(stderr, "%s\n", last);
  pthread_mutex_unlock(&mu);
}

long lab_simt_hazards(void) {
  lab_simt_sync_queued();
  return atomic_load(&total);
}
const char *lab_simt_last_report(void) { return last; }

/* ---- coverage and per-kernel stats ---- */

int lab_simt_register_kernel(const char *name) {
  pthread_mutex_lock(&mu);
  int id = -1;
  for (int i = 0; i < nkernels; i++)
    if (!strcmp(kernels[i].name, name)) id = i;
  if (id < 0 && nkernels < 256) {
    id = nkernels++;
    kernels[id].name = strdup(name);
  }
  pthread_mutex_unlock(&mu);
  return id;
}

void simt_coverage_count(const lab_simt_launch_desc *d) {
  if (d->kernel_id < 0 || d->kernel_id >= nkernels) return;
  kernels[d->kernel_id].launches++;
  long nb = (long)d->grid.x * d->grid.y * d->grid.z;
  kernels[d->kernel_id].blocks += nb;
  lab_simt_kernel_stats *r = &kernels[d->kernel_id].r;
  r->launches++, r->blocks += nb;
  r->grid = d->grid, r->block = d->block, r->dyn_smem = d->dyn_smem;
}

/* a block of d ended having passed n barriers (blocks run on several workers at once) */
void simt_block_barriers(const lab_simt_launch_desc *d, long n) {
  if (d->kernel_id < 0 || d->kernel_id >= nkernels) return;
  pthread_mutex_lock(&mu);
  lab_simt_kernel_stats *r = &kernels[d->kernel_id].r;
  if (kernels[d->kernel_id].ended++ == 0) r->block_barriers_min = n;
  r->block_barriers_min = n < r->block_barriers_min ? n : r->block_barriers_min;
  r->block_barriers_max = n > r->block_barriers_max ? n : r->block_barriers_max;
  r->barriers += n;
  pthread_mutex_unlock(&mu);
}

void simt_coverage_time(const lab_simt_launch_desc *d, double seconds) {
  if (d->kernel_id < 0 || d->kernel_id >= nkernels) return;
  kernels[d->kernel_id].seconds += seconds;
  kernels[d->kernel_id].r.seconds += seconds;
}

int lab_simt_kernel_stat(int i, lab_simt_kernel_stats *out) {
  lab_simt_sync_queued();
  pthread_mutex_lock(&mu);
  int k = 0, found = -1;
  for (int j = 0; j < nkernels && found < 0; j++)
    if (kernels[j].r.launches && k++ == i) found = j;
  if (found >= 0) {
    *out = kernels[found].r;
    out->kernel = kernels[found].name;
  }
  pthread_mutex_unlock(&mu);
  return found >= 0 ? 0 : -1;
}

void simt_reset_kernel_stats(void) {
  pthread_mutex_lock(&mu);
  for (int j = 0; j < nkernels; j++) memset(&kernels[j].r, 0, sizeof kernels[j].r), kernels[j].ended = 0;
  pthread_mutex_unlock(&mu);
}

void lab_simt_coverage(FILE *f) {
  lab_simt_sync_queued();
  for (int i = 0; i < nkernels; i++)
    fprintf(f, "simt coverage: %s -> %ld launches, %ld blocks, %.3f s\n", kernels[i].name, kernels[i].launches,
            kernels[i].blocks, kernels[i].seconds);
}
