/* The cpu device's walk over a launch's geometry (cpu_rows.h): row by row, the rows split
 * across the OpenMP threads, Ctrl-C checked every 64 rows. */
#include "cpu_rows.h"

#include <omp.h>

#include "interrupt.h"
#include "threads.h"

int64_t lab_rows_numel(const lab_geometry *it) {
  int64_t n = 1;
  for (int d = 0; d < it->ndim; d++) n *= it->shape[d];
  return n;
}

/* Runs elements [begin, end) of the flattened iteration space. */
static void run_range(const lab_geometry *it, lab_row_fn fn, void *ctx, int64_t begin, int64_t end) {
  int nd = it->ndim;
  int64_t inner = it->shape[nd - 1];
  int64_t idx[LAB_DEV_MAX_DIMS];
  int64_t rem = begin;
  for (int d = nd - 1; d >= 0; d--) {
    idx[d] = rem % it->shape[d];
    rem /= it->shape[d];
  }
  int64_t inner_strides[LAB_DEV_MAX_OPS];
  for (int k = 0; k < it->nops; k++) inner_strides[k] = it->stride[k][nd - 1];
  int64_t pos = begin;
  int rows = 0;
  while (pos < end) {
    /* Ctrl-C: abandon the rest (the Lua hook raises "interrupted!" right after) */
    if ((++rows & 63) == 0 && lab_interrupt_requested()) return;
    char *ptrs[LAB_DEV_MAX_OPS];
    for (int k = 0; k < it->nops; k++) {
      char *p = it->data[k];
      for (int d = 0; d < nd; d++) p += idx[d] * it->stride[k][d];
      ptrs[k] = p;
    }
    int64_t n = inner - idx[nd - 1];
    if (n > end - pos) n = end - pos;
    fn(ctx, ptrs, inner_strides, n);
    pos += n;
    idx[nd - 1] += n;
    for (int d = nd - 1; d > 0 && idx[d] >= it->shape[d]; d--) {
      idx[d] = 0;
      idx[d - 1]++;
    }
  }
}

/* Below this many elements a thread team costs more than it saves. */
#define PARALLEL_GRAIN 32768

void lab_rows_run(const lab_geometry *it, lab_row_fn fn, void *ctx) {
  int64_t total = lab_rows_numel(it);
  int threads = lab_get_num_threads();
  if (total <= 0) return;
  if (threads <= 1 || total < PARALLEL_GRAIN) {
    run_range(it, fn, ctx, 0, total);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    int nt = omp_get_num_threads(), t = omp_get_thread_num();
    int64_t chunk = (total + nt - 1) / nt;
    int64_t b = (int64_t)t * chunk, e = b + chunk < total ? b + chunk : total;
    if (b < e) run_range(it, fn, ctx, b, e);
  }
}
