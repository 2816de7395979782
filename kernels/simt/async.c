/* ldmatrix and cp.async in software, from the PTX ISA's definitions (the asm versions sit
 * beside their calls in kernels/cuda/flash_ptx.cuh, behind its one #ifdef LAB_SIMT).
 *
 * ldmatrix.sync.aligned.m8n8.x{1,2,4}{.trans}.shared.b16: a warp loads 1, 2 or 4 8x8 matrices
 * of 16-bit elements; lanes 8i..8i+7 give the addresses of the 8 rows (16 bytes each) of
 * matrix i, and register i of lane l receives row l/4, elements 2(l%4) and 2(l%4)+1 of matrix
 * i ("Matrix fragments for ldmatrix"), the lower element in the low half; with .trans,
 * column l/4, rows 2(l%4) and 2(l%4)+1 (the fragment of the transposed matrix). Each row read
 * is an access of its lane (racecheck, and one 16-byte request per phase of 8 lanes for the
 * bank counter: as the hardware serves it).
 *
 * cp.async.{ca,cg}.shared.global [dst], [src], cp-size{, src-size}: 4, 8 or 16 bytes (cg: 16
 * only), bytes past src-size filled with zeros. The source is read at the issue (memcheck,
 * sectors); the destination is written when a cp.async.wait_group of the issuing thread lets
 * the copy's group complete: committed groups are numbered in order, and wait_group N lands
 * every group but the N most recent (copies not yet committed belong to no group and stay
 * in flight). Until then the destination bytes are marked in flight: any other access to
 * them is reported (kind "cp.async"), and a read sees the stale bytes, as on a GPU. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ---- ldmatrix ---- */

static void ldmatrix_compute(simt_warp *w) {
  int num = w->arg & 7, trans = w->arg >> 4 & 1;
  uint16_t m[4][8][8];
  for (int i = 0; i < num; i++)
    for (int r = 0; r < 8; r++) {
      const void *row = *(const void *const *)w->in[8 * i + r];
      memcpy(m[i][r], row, 16);
    }
  for (int l = 0; l < 32; l++) {
    uint32_t *out = w->out[l];
    int g = l >> 2, q = l & 3;
    for (int i = 0; i < num; i++) {
      uint16_t lo = trans ? m[i][2 * q][g] : m[i][g][2 * q], hi = trans ? m[i][2 * q + 1][g] : m[i][g][2 * q + 1];
      out[i] = (uint32_t)lo | (uint32_t)hi << 16;
    }
  }
}

void lab_simt_ldmatrix(uint32_t *r, const void *row, int num, int trans) {
  simt_thr *t = simt_cur();
  uintptr_t pc = (uintptr_t)__builtin_return_address(0);
  simt_blk *b = simt_blk_of(t);
  simt_worker *w = lab_simt_worker_self;
  static const char zero16[16];
  if (t->lane < 8 * num) {
    uintptr_t off = (uintptr_t)row - (uintptr_t)w->dyn;
    int in_shared = (b->dyn_n && off < b->dyn_n && off + 16 <= b->dyn_n) ||
                    ((uintptr_t)row - w->tls_lo < w->tls_n && (uintptr_t)row + 16 - w->tls_lo <= w->tls_n);
    if (!in_shared || ((uintptr_t)row & 15)) {
      simt_hazard(t, "memcheck", pc, "ldmatrix row address %p %s", row,
                  in_shared ? "is not 16-byte aligned" : "is not in the block's shared memory");
      b->aborted = 1;
      row = zero16; /* the warp still completes; the block is abandoned after it */
    } else {
      simt_access_at(row, 16, 0, pc);
    }
  }
  simt_warp_op(W_LDMATRIX, 0xffffffffu, &row, r, sizeof row, num | trans << 4, (const void *)pc, ldmatrix_compute);
}

/* ---- cp.async ---- */

static void land(simt_thr *t, simt_worker *w, const simt_cpa *c) {
  for (int i = 0; i < c->size; i++) w->pend[c->dst + i] = 0;
  w->npend -= c->size;
  simt_shared_write(t, c->dst, c->size, c->pc);
  memcpy(w->dyn + c->dst, c->data, c->size);
}

void lab_simt_cp_async(void *dst, const void *src, int cp_size, int src_size) {
  simt_thr *t = simt_cur();
  simt_worker *w = lab_simt_worker_self;
  simt_blk *b = simt_blk_of(t);
  uintptr_t pc = (uintptr_t)__builtin_return_address(0);
  uintptr_t off = (uintptr_t)dst - (uintptr_t)w->dyn;
  if (cp_size != 4 && cp_size != 8 && cp_size != 16) {
    simt_hazard(t, "memcheck", pc, "cp.async of %d bytes (4, 8 or 16)", cp_size);
    b->aborted = 1;
    return;
  }
  if (!b->dyn_n || off >= b->dyn_n || off + (uintptr_t)cp_size > b->dyn_n || (off & (uintptr_t)(cp_size - 1)) ||
      ((uintptr_t)src & (uintptr_t)(cp_size - 1))) {
    simt_hazard(t, "memcheck", pc, "cp.async of %d bytes to %p from %p: %s", cp_size, dst, src,
                off >= b->dyn_n || off + (uintptr_t)cp_size > b->dyn_n
                    ? "the destination is not in the block's dynamic shared memory"
                    : "an address not aligned to the copy's size");
    b->aborted = 1;
    return;
  }
  if (src_size < 0 || src_size > cp_size) src_size = cp_size;
  if (t->ncpa == t->capcpa) {
    int cap = t->capcpa ? 2 * t->capcpa : 16;
    simt_cpa *c = realloc(t->cpa, (size_t)cap * sizeof *c);
    if (!c) abort();
    t->cpa = c, t->capcpa = cap;
  }
  simt_cpa *c = &t->cpa[t->ncpa++];
  memset(c, 0, sizeof *c);
  if (src_size) {
    simt_access_at(src, (size_t)src_size, 0, pc);
    memcpy(c->data, src, (size_t)src_size);
  } else {
    /* nothing is read, but the lane is at this instruction: an empty record keeps its later
     * accesses paired with its warp's for the sector and bank counts */
    simt_log(t, pc, (uintptr_t)src, 0, SP_GLOBAL, 0);
  }
  c->dst = (uint32_t)off, c->size = (uint8_t)cp_size, c->group = t->commits, c->pc = pc;
  for (int i = 0; i < cp_size; i++) {
    if (w->pend[off + i]) {
      char ob[48];
      simt_hazard(t, "cp.async", pc, "cp.async to dynamic shared+0x%zx while thread %s's copy to it is in flight",
                  (size_t)(off + i), simt_dim_str(simt_tidx(b, w->pend[off + i] - 1), ob));
      break;
    }
  }
  for (int i = 0; i < cp_size; i++) w->pend[off + i] = (int16_t)(t->tid + 1);
  w->npend += cp_size;
}

void lab_simt_cp_async_commit(void) { simt_cur()->commits++; }

void lab_simt_cp_async_wait(int n) {
  simt_thr *t = simt_cur();
  simt_worker *w = lab_simt_worker_self;
  int keep = 0;
  for (int i = 0; i < t->ncpa; i++) {
    if (t->cpa[i].group < t->commits - n) land(t, w, &t->cpa[i]);
    else t->cpa[keep++] = t->cpa[i];
  }
  t->ncpa = keep;
}

/* a thread that ends with copies in flight: they land nowhere anyone waits for (a GPU
 * completes them after the thread's last use); the marks go so the next block starts clean */
void simt_cpa_drop(simt_thr *t) {
  simt_worker *w = lab_simt_worker_self;
  for (int i = 0; i < t->ncpa; i++) {
    for (int k = 0; k < t->cpa[i].size; k++) w->pend[t->cpa[i].dst + k] = 0;
    w->npend -= t->cpa[i].size;
  }
  t->ncpa = 0;
  t->commits = 0;
}
