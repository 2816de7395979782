/* What makes a kernel slow, counted as Nsight Compute would: each thread logs its shared and
 * global accesses between synchronization points; when its warp meets (a warp operation, a
 * barrier, the end of the block) the lanes' k-th accesses at one site form one warp-wide
 * request. A shared request costs one wavefront per phase (32 lanes for accesses up to 4
 * bytes, 16 for 8, 8 for 16) times the most distinct 4-byte words any bank must serve; a
 * global request costs the distinct 32-byte sectors it touches. Counted per kernel and site.
 * (Lanes that diverge pair up by order of access, not by instruction instance: exact for
 * convergent code, an approximation inside divergent branches.) */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define MAX_LOG (1 << 16) /* per thread between sync points; more is not counted */

typedef struct {
  uintptr_t pc;
  const char *kernel;
  int space, write, size;
  long requests, wavefronts, ideal, sectors, ideal_sectors;
} site_stat;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static site_stat *sites;
static size_t nsites, capsites;
#define HASH 4096 /* open addressing over (pc, kernel): index + 1 into sites, 0 empty */
static uint32_t table[HASH];

static int perf_on;
void lab_simt_set_perf(int on) { perf_on = on; }

void simt_log(simt_thr *t, uintptr_t pc, uintptr_t addr, uint32_t size, int space, int write) {
  if (!perf_on) return; /* the counts cost about a third of the interpreter's time */
  /* The host compiler splits a 16-byte (uint4) copy into narrower accesses from neighbouring
   * instructions: an access that continues the previous one, from an instruction close by, is
   * folded into it while the whole stays naturally aligned and at most 16 bytes (the GPU's
   * vector widths), so the counts describe the CUDA code's access, not g++'s lowering. */
  if (t->nlog) {
    simt_access *p = &t->log[t->nlog - 1];
    uint32_t n = p->size + size;
    if (size && p->space == space && p->write == write && p->addr + p->size == addr && n <= 16 && !(n & (n - 1)) &&
        p->addr % n == 0 && pc - p->pc + 64 < 128) {
      p->size = n;
      return;
    }
  }
  if (t->nlog == t->caplog) {
    if (t->caplog >= MAX_LOG) return;
    int cap = t->caplog ? 2 * t->caplog : 64;
    simt_access *l = realloc(t->log, (size_t)cap * sizeof *l);
    if (!l) return;
    t->log = l, t->caplog = cap;
  }
  t->log[t->nlog++] = (simt_access){pc, addr, size, (uint8_t)space, (uint8_t)write};
}

static site_stat *site_of(uintptr_t pc, const char *kernel, const simt_access *a) {
  size_t h = (size_t)((pc ^ (uintptr_t)kernel * 31) * 0x9E3779B97F4A7C15ull >> 52) & (HASH - 1);
  for (size_t probe = 0; probe < HASH; probe++, h = (h + 1) & (HASH - 1)) {
    if (!table[h]) break;
    site_stat *s = &sites[table[h] - 1];
    if (s->pc == pc && s->kernel == kernel) return s;
  }
  if (nsites >= HASH / 2) return NULL; /* full: further sites are not counted */
  if (nsites == capsites) {
    size_t cap = capsites ? 2 * capsites : 64;
    site_stat *s = realloc(sites, cap * sizeof *s);
    if (!s) return NULL;
    sites = s, capsites = cap;
  }
  site_stat *s = &sites[nsites++];
  table[h] = (uint32_t)nsites;
  memset(s, 0, sizeof *s);
  s->pc = pc, s->kernel = kernel, s->space = a->space, s->write = a->write, s->size = (int)a->size;
  return s;
}

/* wavefronts of one shared request: per phase, the most distinct words in one bank */
static void shared_cost(const simt_access *const *acc, const int *lane, int n, long *wave, long *ideal) {
  int size = (int)acc[0]->size, per_phase = size <= 4 ? 32 : (size == 8 ? 16 : 8);
  for (int ph = 0; ph < 32 / per_phase; ph++) {
    uintptr_t words[32 * 4];
    int nw = 0, any = 0;
    for (int i = 0; i < n; i++) {
      if (lane[i] / per_phase != ph) continue;
      any = 1;
      for (uintptr_t wd = acc[i]->addr >> 2; wd <= (acc[i]->addr + acc[i]->size - 1) >> 2; wd++) {
        int dup = 0;
        for (int k = 0; k < nw; k++) dup |= words[k] == wd;
        if (!dup && nw < 128) words[nw++] = wd;
      }
    }
    if (!any) continue;
    int per_bank[32] = {0}, worst = 1;
    for (int k = 0; k < nw; k++)
      if (++per_bank[words[k] & 31] > worst) worst = per_bank[words[k] & 31];
    *wave += worst;
    *ideal += 1;
  }
}

static void global_cost(const simt_access *const *acc, int n, long *sectors, long *ideal) {
  uintptr_t sec[32 * 2];
  int ns = 0;
  long bytes = 0;
  for (int i = 0; i < n; i++) {
    bytes += acc[i]->size;
    for (uintptr_t s = acc[i]->addr >> 5; s <= (acc[i]->addr + acc[i]->size - 1) >> 5; s++) {
      int dup = 0;
      for (int k = 0; k < ns; k++) dup |= sec[k] == s;
      if (!dup && ns < 64) sec[ns++] = s;
    }
  }
  *sectors += ns;
  *ideal += (bytes + 31) / 32;
}

void simt_perf_flush_warp(simt_blk *b, int warp) {
  simt_thr *t = b->t + warp * 32;
  int lanes = b->n - warp * 32 < 32 ? b->n - warp * 32 : 32, longest = 0;
  for (int l = 0; l < lanes; l++) longest = t[l].nlog > longest ? t[l].nlog : longest;
  if (!longest) return;
  pthread_mutex_lock(&mu);
  for (int k = 0; k < longest; k++) {
    unsigned left = 0;
    for (int l = 0; l < lanes; l++)
      if (k < t[l].nlog) left |= 1u << l;
    while (left) { /* one request per distinct site among the lanes' k-th accesses */
      const simt_access *acc[32];
      int lane[32], n = 0;
      const simt_access *first = &t[__builtin_ctz(left)].log[k];
      for (int l = 0; l < lanes; l++)
        if ((left >> l & 1u) && t[l].log[k].pc == first->pc && t[l].log[k].size == first->size) {
          acc[n] = &t[l].log[k], lane[n++] = l;
          left &= ~(1u << l);
        }
      if (!first->size) continue; /* a lane at an instruction that touched nothing (cp.async zero fill) */
      site_stat *s = site_of(first->pc, b->d->kernel, first);
      if (!s) continue;
      s->requests++;
      if (first->space == SP_SHARED) shared_cost(acc, lane, n, &s->wavefronts, &s->ideal);
      else global_cost(acc, n, &s->sectors, &s->ideal_sectors);
    }
  }
  pthread_mutex_unlock(&mu);
  for (int l = 0; l < lanes; l++) t[l].nlog = 0;
}

void lab_simt_perf_report(FILE *f) {
  lab_simt_sync_queued();
  pthread_mutex_lock(&mu);
  for (size_t i = 0; i < nsites; i++) {
    site_stat *s = &sites[i];
    char where[200];
    simt_site_name(s->pc, where, sizeof where);
    if (s->space == SP_SHARED)
      fprintf(f, "simt perf: %s %s shared %s %dB: %ld requests, %.2f wavefronts/request (ideal %.2f)\n", s->kernel,
              where, s->write ? "store" : "load", s->size, s->requests, (double)s->wavefronts / (double)s->requests,
              (double)s->ideal / (double)s->requests);
    else
      fprintf(f, "simt perf: %s %s global %s %dB: %ld requests, %.2f sectors/request (ideal %.2f)\n", s->kernel, where,
              s->write ? "store" : "load", s->size, s->requests, (double)s->sectors / (double)s->requests,
              (double)s->ideal_sectors / (double)s->requests);
  }
  pthread_mutex_unlock(&mu);
}

/* totals for one kernel (tests and lab 08 read these): shared wavefronts and their ideal,
 * global sectors and their ideal */
void lab_simt_perf_totals(const char *kernel, long out[4]) {
  lab_simt_sync_queued();
  memset(out, 0, 4 * sizeof *out);
  pthread_mutex_lock(&mu);
  for (size_t i = 0; i < nsites; i++)
    if (!kernel || !strcmp(sites[i].kernel, kernel)) {
      out[0] += sites[i].wavefronts, out[1] += sites[i].ideal;
      out[2] += sites[i].sectors, out[3] += sites[i].ideal_sectors;
    }
  pthread_mutex_unlock(&mu);
}

void lab_simt_reset_stats(void) {
  lab_simt_sync_queued();
  pthread_mutex_lock(&mu);
  nsites = 0;
  memset(table, 0, sizeof table);
  pthread_mutex_unlock(&mu);
  simt_reset_kernel_stats();
}
