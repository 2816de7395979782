/* The warp-level instructions in software, from the PTX ISA's definitions: shfl.sync.bfly
 * (__shfl_xor_sync), bar.warp.sync (__syncwarp), and mma.sync.aligned.m16n8k16.row.col with
 * bf16 or f16 operands and f32 accumulators, whose per-lane register fragments are
 * ("Matrix Fragments for mma.m16n8k16", g = lane / 4, q = lane % 4, two 16-bit elements per
 * register, the lower column in the low half):
 *   A 16x16  a0 (g, 2q..2q+1)  a1 (g+8, 2q..2q+1)  a2 (g, 2q+8..2q+9)  a3 (g+8, 2q+8..2q+9)
 *   B 16x8   b0 (k 2q..2q+1, n g)  b1 (k 2q+8..2q+9, n g)
 *   C/D 16x8 c0 c1 (g, 2q..2q+1)  c2 c3 (g+8, 2q..2q+1)
 * The warp's fragments are gathered into whole matrices, multiplied in f32 (products exact,
 * sums in k order after the accumulator), and scattered back. Atomics are here too: they are
 * real atomic operations (blocks run on several OS threads) checked by memcheck. */
#include <stdatomic.h>
#include <string.h>

#include "../cpu/half.h"
#include "internal.h"

static void shfl_compute(simt_warp *w) {
  unsigned char v[32][8];
  for (int l = 0; l < 32; l++)
    if (w->mask >> l & 1u) memcpy(v[l], w->in[l], w->size);
  for (int l = 0; l < 32; l++) {
    if (!(w->mask >> l & 1u)) continue;
    int src = l ^ w->arg;
    /* a source lane outside the mask gives an undefined value on a GPU: the lane's own here */
    memcpy(w->out[l], (w->mask >> src & 1u) ? v[src] : v[l], w->size);
  }
}

void lab_simt_shfl_xor(unsigned mask, const void *in, void *out, size_t size, int lanemask) {
  simt_warp_op(W_SHFL, mask, in, out, size, lanemask & 31, __builtin_return_address(0), shfl_compute);
}

static void nothing(simt_warp *w) { (void)w; }

void lab_simt_syncwarp(unsigned mask) {
  simt_warp_op(W_SYNCWARP, mask, NULL, NULL, 0, 0, __builtin_return_address(0), nothing);
}

typedef struct {
  uint32_t a[4], b[2];
  float c[4];
} mma_in;

static float half_of(uint32_t r, int hi, int f16) {
  uint16_t h = (uint16_t)(hi ? r >> 16 : r);
  return f16 ? lab_f16_to_f32(h) : lab_bf16_to_f32(h);
}

static void mma_compute(simt_warp *w) {
  int f16 = w->op == W_MMA_F16;
  float A[16][16], B[16][8], C[16][8];
  for (int l = 0; l < 32; l++) {
    const mma_in *in = w->in[l];
    int g = l >> 2, q = l & 3;
    for (int h = 0; h < 2; h++) {
      A[g][2 * q + h] = half_of(in->a[0], h, f16);
      A[g + 8][2 * q + h] = half_of(in->a[1], h, f16);
      A[g][2 * q + 8 + h] = half_of(in->a[2], h, f16);
      A[g + 8][2 * q + 8 + h] = half_of(in->a[3], h, f16);
      B[2 * q + h][g] = half_of(in->b[0], h, f16);
      B[2 * q + 8 + h][g] = half_of(in->b[1], h, f16);
      C[g][2 * q + h] = in->c[h];
      C[g + 8][2 * q + h] = in->c[2 + h];
    }
  }
  float D[16][8];
  for (int i = 0; i < 16; i++)
    for (int j = 0; j < 8; j++) {
      float s = C[i][j];
      for (int k = 0; k < 16; k++) s += A[i][k] * B[k][j];
      D[i][j] = s;
    }
  for (int l = 0; l < 32; l++) {
    float *out = w->out[l];
    int g = l >> 2, q = l & 3;
    out[0] = D[g][2 * q], out[1] = D[g][2 * q + 1], out[2] = D[g + 8][2 * q], out[3] = D[g + 8][2 * q + 1];
  }
}

void lab_simt_mma_m16n8k16(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1, int kind) {
  mma_in in = {{a[0], a[1], a[2], a[3]}, {b0, b1}, {c[0], c[1], c[2], c[3]}};
  simt_warp_op(kind ? W_MMA_F16 : W_MMA_BF16, 0xffffffffu, &in, c, sizeof in, 0, __builtin_return_address(0),
               mma_compute);
}

/* ---- atomics: checked as accesses, performed atomically ---- */
void __tsan_read4(void *p);
void __tsan_write4(void *p);
void __tsan_read8(void *p);
void __tsan_write8(void *p);

/* C11 has no atomic add on floating point: a compare-and-swap loop on the bits (T's value in
 * an unsigned U of its size), one definition for float and double */
#define LAB_SIMT_CAS_ADD(name, T, U, tsan_read)              \
  T name(T *p, T v) {                                        \
    tsan_read(p);                                            \
    _Atomic U *u = (_Atomic U *)(void *)p;                   \
    U old = atomic_load(u), nw;                              \
    T f;                                                     \
    do {                                                     \
      memcpy(&f, &old, sizeof f);                            \
      T s = f + v;                                           \
      memcpy(&nw, &s, sizeof nw);                            \
    } while (!atomic_compare_exchange_weak(u, &old, nw));    \
    return f;                                                \
  }
LAB_SIMT_CAS_ADD(lab_simt_atomic_add_f32, float, uint32_t, __tsan_read4)
LAB_SIMT_CAS_ADD(lab_simt_atomic_add_f64, double, uint64_t, __tsan_read8)
#undef LAB_SIMT_CAS_ADD

unsigned long long lab_simt_atomic_add_u64(unsigned long long *p, unsigned long long v) {
  __tsan_read8(p);
  return atomic_fetch_add((_Atomic unsigned long long *)p, v);
}

int lab_simt_atomic_add_i32(int *p, int v) {
  __tsan_read4(p);
  return atomic_fetch_add((_Atomic int *)p, v);
}
