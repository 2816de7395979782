/* FlashAttention on the CPU (the algorithm of Dao et al., FlashAttention-2, written for caches
 * instead of shared memory). Attention softmax(scale Q K^T) V is computed tile by tile: a tile
 * of BR queries meets the keys BC at a time, and an online softmax keeps, per query, the
 * running maximum m and sum l of exp(score - m), rescaling the partial output when m grows.
 * Memory is O(T) per head (the tiles and the log-sum-exp lse = m + log l), never O(T x S).
 *
 * The backward recomputes each score tile from q, k and lse (P = exp(score - lse) needs no
 * second pass over the row) instead of storing P:
 *   dV += P^T dO,  dP = dO V^T,  dS = P * (dP - rowdot(dO, O)) * scale,
 *   dK += dS^T Q,  dQ += dS K.
 * Its outer loop walks key tiles (so dK and dV of a tile stay in cache), its inner loop the
 * query tiles that see them, dQ summing in f32 in the caller's work buffer.
 *
 * Causal masking skips the tiles that are fully masked (half the work at S = T); on tiles that
 * straddle the diagonal each product stops where the mask begins (a band per row block) and
 * the softmax never reads a masked score. Threads: the forward runs (head, query tile) tasks,
 * the backward one head per task (dQ of a head is summed by one thread). All products go
 * through mm_acc, a register-blocked loop (6 rows x 16 columns of accumulators) that the
 * compiler turns into FMA vector code.
 *
 * Operands are read and results written through their layouts (lab_flash_layout: a row of
 * problem bh at b sb + h sh + r st), so head views of a [B, T, 3C] projection and [B, T, H, D]
 * outputs need no copies; rows that are not adjacent f32 are gathered into f32 buffers, once
 * per head and thread where a head fits HEAD_CACHE_BYTES, else tile by tile. */
#include "flash_attention.h"

#include <math.h>
#include <stdlib.h>
#ifdef __AVX__
#include <immintrin.h>
#endif
#include <string.h>

#include "convert.h"
#include "fastmath.h"

enum { BR = 64, BC = 64 }; /* query and key rows per tile */

/* 8 floats in a vector register (GCC/Clang vector extension: ymm with AVX, two xmm without);
 * aligned(4) lets it load from any float address */
typedef float v8 __attribute__((vector_size(32), aligned(4)));

/* The part of a product a tile on the causal diagonal needs. Query r of the tile sees key c
 * iff c <= r + d (d: the tile's diagonal offset); what a query does not see is -inf in the
 * scores and 0 in P and dS, so a product's row block [i, i + rows) can stop early:
 *   BAND_COLS    C's rows are queries, its columns keys (scores, dP): columns c <= i + rows - 1 + d
 *   BAND_K_END   A's rows are queries, k runs over keys (P V, dS K): k <= i + rows - 1 + d
 *   BAND_K_BEGIN A's rows are keys, k runs over queries (P^T dO, dS^T Q): k >= i - d
 * On a 64 x 64 tile that halves the products; the tile then costs what its visible half holds. */
typedef enum { BAND_NONE, BAND_COLS, BAND_K_END, BAND_K_BEGIN } band_kind;
typedef struct {
  band_kind kind;
  int64_t d;
} band;
static const band no_band = {BAND_NONE, 0};

static inline int clampi(int64_t x, int hi) { return x < 0 ? 0 : (x > hi ? hi : (int)x); }

/* the columns [0, *n_end) and k range [*k_beg, *k_end) row block [i, i + rows) needs */
static inline void band_range(band b, int i, int rows, int n, int k, int *n_end, int *k_beg, int *k_end) {
  *n_end = n, *k_beg = 0, *k_end = k;
  if (b.kind == BAND_COLS) {
    int e = clampi(i + rows + b.d, n);
    *n_end = e + 15 < n ? (e + 15) / 16 * 16 : n; /* whole vector blocks: masked extras are harmless */
  } else if (b.kind == BAND_K_END) {
    *k_end = clampi(i + rows + b.d, k);
  } else if (b.kind == BAND_K_BEGIN) {
    *k_beg = clampi(i - b.d, k);
  }
}

/* C (m x n, row stride ldc) += A (m x k) B (k x n, row stride ldb), where A's element (i, p)
 * is A[i * sam + p * sak], so a transposed operand costs nothing, restricted to what band bd
 * needs. Blocks of 6 (then 4) rows x 16 columns keep 12 (8) vector accumulators in registers
 * across the whole k loop: per step of k, two loads of B and six broadcasts of A feed twelve
 * FMAs, enough in flight to cover their latency. */
static void mm_acc(int m, int n, int k, const float *A, int64_t sam, int64_t sak, const float *B, int64_t ldb,
                   float *C, int64_t ldc, band bd) {
  int i = 0, ne, kb, ke;
  for (; i + 6 <= m; i += 6) {
    band_range(bd, i, 6, n, k, &ne, &kb, &ke);
    const float *a0 = A + i * sam, *a1 = a0 + sam, *a2 = a1 + sam, *a3 = a2 + sam, *a4 = a3 + sam, *a5 = a4 + sam;
    float *c0 = C + i * ldc, *c1 = c0 + ldc, *c2 = c1 + ldc, *c3 = c2 + ldc, *c4 = c3 + ldc, *c5 = c4 + ldc;
    int j = 0;
    for (; j + 16 <= ne; j += 16) {
      v8 x0 = *(v8 *)(c0 + j), y0 = *(v8 *)(c0 + j + 8), x1 = *(v8 *)(c1 + j), y1 = *(v8 *)(c1 + j + 8);
      v8 x2 = *(v8 *)(c2 + j), y2 = *(v8 *)(c2 + j + 8), x3 = *(v8 *)(c3 + j), y3 = *(v8 *)(c3 + j + 8);
      v8 x4 = *(v8 *)(c4 + j), y4 = *(v8 *)(c4 + j + 8), x5 = *(v8 *)(c5 + j), y5 = *(v8 *)(c5 + j + 8);
      const float *b = B + kb * ldb + j;
      for (int p = kb; p < ke; p++, b += ldb) {
        v8 bl = *(const v8 *)b, bh = *(const v8 *)(b + 8);
        int64_t o = p * sak;
        x0 += a0[o] * bl, y0 += a0[o] * bh;
        x1 += a1[o] * bl, y1 += a1[o] * bh;
        x2 += a2[o] * bl, y2 += a2[o] * bh;
        x3 += a3[o] * bl, y3 += a3[o] * bh;
        x4 += a4[o] * bl, y4 += a4[o] * bh;
        x5 += a5[o] * bl, y5 += a5[o] * bh;
      }
      *(v8 *)(c0 + j) = x0, *(v8 *)(c0 + j + 8) = y0, *(v8 *)(c1 + j) = x1, *(v8 *)(c1 + j + 8) = y1;
      *(v8 *)(c2 + j) = x2, *(v8 *)(c2 + j + 8) = y2, *(v8 *)(c3 + j) = x3, *(v8 *)(c3 + j + 8) = y3;
      *(v8 *)(c4 + j) = x4, *(v8 *)(c4 + j + 8) = y4, *(v8 *)(c5 + j) = x5, *(v8 *)(c5 + j + 8) = y5;
    }
    for (; j < ne; j++) /* columns past the last block of 16 */
      for (int r = 0; r < 6; r++) {
        float sum = C[(i + r) * ldc + j];
        for (int p = kb; p < ke; p++) sum += A[(i + r) * sam + p * sak] * B[p * ldb + j];
        C[(i + r) * ldc + j] = sum;
      }
  }
  for (; i + 4 <= m; i += 4) {
    band_range(bd, i, 4, n, k, &ne, &kb, &ke);
    const float *a0 = A + i * sam, *a1 = a0 + sam, *a2 = a1 + sam, *a3 = a2 + sam;
    float *c0 = C + i * ldc, *c1 = c0 + ldc, *c2 = c1 + ldc, *c3 = c2 + ldc;
    int j = 0;
    for (; j + 16 <= ne; j += 16) {
      v8 x0 = *(v8 *)(c0 + j), y0 = *(v8 *)(c0 + j + 8), x1 = *(v8 *)(c1 + j), y1 = *(v8 *)(c1 + j + 8);
      v8 x2 = *(v8 *)(c2 + j), y2 = *(v8 *)(c2 + j + 8), x3 = *(v8 *)(c3 + j), y3 = *(v8 *)(c3 + j + 8);
      const float *b = B + kb * ldb + j;
      for (int p = kb; p < ke; p++, b += ldb) {
        v8 bl = *(const v8 *)b, bh = *(const v8 *)(b + 8);
        int64_t o = p * sak;
        x0 += a0[o] * bl, y0 += a0[o] * bh;
        x1 += a1[o] * bl, y1 += a1[o] * bh;
        x2 += a2[o] * bl, y2 += a2[o] * bh;
        x3 += a3[o] * bl, y3 += a3[o] * bh;
      }
      *(v8 *)(c0 + j) = x0, *(v8 *)(c0 + j + 8) = y0, *(v8 *)(c1 + j) = x1, *(v8 *)(c1 + j + 8) = y1;
      *(v8 *)(c2 + j) = x2, *(v8 *)(c2 + j + 8) = y2, *(v8 *)(c3 + j) = x3, *(v8 *)(c3 + j + 8) = y3;
    }
    for (; j < ne; j++) { /* columns past the last block of 16 */
      float s0 = c0[j], s1 = c1[j], s2 = c2[j], s3 = c3[j];
      for (int p = kb; p < ke; p++) {
        float bv = B[p * ldb + j];
        int64_t o = p * sak;
        s0 += a0[o] * bv, s1 += a1[o] * bv, s2 += a2[o] * bv, s3 += a3[o] * bv;
      }
      c0[j] = s0, c1[j] = s1, c2[j] = s2, c3[j] = s3;
    }
  }
  for (; i < m; i++) { /* rows past the last block of 4 */
    band_range(bd, i, 1, n, k, &ne, &kb, &ke);
    float *c = C + i * ldc;
    for (int p = kb; p < ke; p++) {
      float x = A[i * sam + p * sak];
      const float *b = B + p * ldb;
      for (int j = 0; j < ne; j++) c[j] += x * b[j];
    }
  }
}

/* sum of a[i] b[i]: eight lanes of partial sums (GCC left the omp simd reduction this
 * replaces a scalar chain of dependent adds, 4 cycles an element) */
static float dot(const float *a, const float *b, int64_t n) {
  v8 acc = {0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) acc += *(const v8 *)(a + i) * *(const v8 *)(b + i);
  float s = 0;
  for (int l = 0; l < 8; l++) s += acc[l];
  for (; i < n; i++) s += a[i] * b[i];
  return s;
}

/* rows x cols of src (rows ld apart) into dst as cols x rows (rows ldd apart) */
static void transpose(const float *src, int64_t ld, int rows, int cols, float *dst, int64_t ldd) {
  int r0 = 0;
#ifdef __AVX__
  /* 8 x 8 blocks in registers: the element loop's stores land `rows` floats apart, a cache
   * line each, and took a quarter of the forward kernel's time */
  for (; r0 + 8 <= rows; r0 += 8) {
    int c = 0;
    for (; c + 8 <= cols; c += 8) {
      const float *s = src + r0 * ld + c;
      __m256 a0 = _mm256_loadu_ps(s), a1 = _mm256_loadu_ps(s + ld), a2 = _mm256_loadu_ps(s + 2 * ld),
             a3 = _mm256_loadu_ps(s + 3 * ld), a4 = _mm256_loadu_ps(s + 4 * ld), a5 = _mm256_loadu_ps(s + 5 * ld),
             a6 = _mm256_loadu_ps(s + 6 * ld), a7 = _mm256_loadu_ps(s + 7 * ld);
      __m256 t0 = _mm256_unpacklo_ps(a0, a1), t1 = _mm256_unpackhi_ps(a0, a1), t2 = _mm256_unpacklo_ps(a2, a3),
             t3 = _mm256_unpackhi_ps(a2, a3), t4 = _mm256_unpacklo_ps(a4, a5), t5 = _mm256_unpackhi_ps(a4, a5),
             t6 = _mm256_unpacklo_ps(a6, a7), t7 = _mm256_unpackhi_ps(a6, a7);
      __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE),
             u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE),
             u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE),
             u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
      float *d = dst + c * ldd + r0;
      _mm256_storeu_ps(d, _mm256_permute2f128_ps(u0, u4, 0x20));
      _mm256_storeu_ps(d + ldd, _mm256_permute2f128_ps(u1, u5, 0x20));
      _mm256_storeu_ps(d + 2 * ldd, _mm256_permute2f128_ps(u2, u6, 0x20));
      _mm256_storeu_ps(d + 3 * ldd, _mm256_permute2f128_ps(u3, u7, 0x20));
      _mm256_storeu_ps(d + 4 * ldd, _mm256_permute2f128_ps(u0, u4, 0x31));
      _mm256_storeu_ps(d + 5 * ldd, _mm256_permute2f128_ps(u1, u5, 0x31));
      _mm256_storeu_ps(d + 6 * ldd, _mm256_permute2f128_ps(u2, u6, 0x31));
      _mm256_storeu_ps(d + 7 * ldd, _mm256_permute2f128_ps(u3, u7, 0x31));
    }
    for (; c < cols; c++) /* columns past the last block of 8 */
      for (int r = r0; r < r0 + 8; r++) dst[c * ldd + r] = src[r * ld + c];
  }
#endif
  for (int r = r0; r < rows; r++)
    for (int c = 0; c < cols; c++) dst[c * ldd + r] = src[r * ld + c];
}

/* n elements of dtype dt at element offset `at` of p, as f32 (f32 itself by memcpy: the
 * generic strided row conversion is an element-at-a-time loop) */
static void load(lab_dtype dt, const void *p, int64_t at, int64_t n, float *dst) {
  if (dt == LAB_F32) {
    memcpy(dst, (const float *)p + at, (size_t)n * sizeof(float));
    return;
  }
  size_t es = lab_dtype_size(dt);
  lab_load_row(dt, (const char *)p + at * (int64_t)es, (int64_t)es, LAB_F32, dst, n);
}
static void store(lab_dtype dt, const float *src, void *p, int64_t at, int64_t n) {
  if (dt == LAB_F32) {
    memcpy((float *)p + at, src, (size_t)n * sizeof(float));
    return;
  }
  size_t es = lab_dtype_size(dt);
  lab_store_row(LAB_F32, src, dt, (char *)p + at * (int64_t)es, (int64_t)es, n);
}

/* The layout l of a tensor of `rows` x `width` per problem, st = 0 meaning contiguous */
static lab_flash_layout resolve(lab_flash_layout l, int64_t H, int64_t rows, int64_t width) {
  if (l.st) return l;
  return (lab_flash_layout){.sb = H * rows * width, .sh = rows * width, .st = width};
}
/* element offset of row r of problem bh */
static inline int64_t row_at(const lab_flash_layout *l, int64_t H, int64_t bh, int64_t r) {
  return bh / H * l->sb + bh % H * l->sh + r * l->st;
}
/* n rows of `width` from row r0 of problem bh into dst (n x width, f32) */
static void load_rows(lab_dtype dt, const void *p, const lab_flash_layout *l, int64_t H, int64_t bh, int64_t r0,
                      int64_t n, int64_t width, float *dst) {
  if (l->st == width) { /* the rows are adjacent: one run */
    load(dt, p, row_at(l, H, bh, r0), n * width, dst);
    return;
  }
  for (int64_t r = 0; r < n; r++) load(dt, p, row_at(l, H, bh, r0 + r), width, dst + r * width);
}
static void store_rows(lab_dtype dt, const float *src, void *p, const lab_flash_layout *l, int64_t H, int64_t bh,
                       int64_t r0, int64_t n, int64_t width) {
  if (l->st == width) {
    store(dt, src, p, row_at(l, H, bh, r0), n * width);
    return;
  }
  for (int64_t r = 0; r < n; r++) store(dt, src + r * width, p, row_at(l, H, bh, r0 + r), width);
}

/* n rows of `width` from row r0 of problem bh as f32 rows *ld apart: f32 rows that are
 * adjacent are read where they are (no copy); others are gathered (converted) into buf
 * (ld = width): rows a large, power-of-two-like stride apart (3C floats in a head view), read
 * again and again as a product's operand, would share a few L1 sets */
static const float *rows_f32(lab_dtype dt, const void *p, const lab_flash_layout *l, int64_t H, int64_t bh,
                             int64_t r0, int64_t n, int64_t width, float *buf, int64_t *ld) {
  if (dt == LAB_F32 && (l->st == width || n == 1)) {
    *ld = l->st;
    return (const float *)p + row_at(l, H, bh, r0);
  }
  load_rows(dt, p, l, H, bh, r0, n, width, buf);
  *ld = width;
  return buf;
}

/* A head's operands read again and again (the forward's keys by every query tile, the
 * backward's queries and dO by every key tile) are gathered once per head and thread into
 * buffers of at most HEAD_CACHE_BYTES each: at T = 1024 the per-tile gathers (memcpy of
 * rows a head view leaves 3C floats apart) were 4% of a GPT step. Longer heads take the
 * per-tile path, so memory stays O(tile) there. */
#define HEAD_CACHE_BYTES ((int64_t)8 << 20)

/* 1 when rows of width w of layout l are f32 and adjacent: read in place, never gathered */
static int in_place(lab_dtype dt, const lab_flash_layout *l, int64_t w) { return dt == LAB_F32 && l->st == w; }

/* the call's layouts with the contiguous defaults filled in, and H >= 1 */
typedef struct {
  int64_t H;
  lab_flash_layout q, k, v, o, dout, dq, dk, dv;
} layouts;

static layouts layouts_of(const lab_flash_args *a) {
  layouts L;
  L.H = a->H > 0 ? a->H : 1;
  L.q = resolve(a->lq, L.H, a->T, a->D), L.k = resolve(a->lk, L.H, a->S, a->D);
  L.v = resolve(a->lv, L.H, a->S, a->Dv), L.o = resolve(a->lo, L.H, a->T, a->Dv);
  L.dout = resolve(a->ldo, L.H, a->T, a->Dv), L.dq = resolve(a->ldq, L.H, a->T, a->D);
  L.dk = resolve(a->ldk, L.H, a->S, a->D), L.dv = resolve(a->ldv, L.H, a->S, a->Dv);
  return L;
}

static int supported(lab_dtype dt) { return dt == LAB_F32 || dt == LAB_BF16 || dt == LAB_F16; }

/* the last key query t sees, plus one (0: none) */
static int64_t key_end(const lab_flash_args *a, int64_t t) {
  if (!a->causal) return a->S;
  int64_t e = t + (a->S - a->T) + 1;
  return e < 0 ? 0 : (e > a->S ? a->S : e);
}

/* how many of the bc keys from s0 query t sees: the columns [0, visible) of its score row */
static inline int visible(const lab_flash_args *a, int64_t t, int64_t s0, int bc) {
  int64_t e = key_end(a, t) - s0;
  return e < 0 ? 0 : (e > bc ? bc : (int)e);
}

/* The band of a tile of bc keys (queries from t0, keys from s0): query t0 + r sees key s0 + c iff
 * c <= r + d, d = t0 - s0 + S - T; none when the mask is off or every query sees every key. */
static band diag_band(const lab_flash_args *a, band_kind kind, int bc, int64_t t0, int64_t s0) {
  int64_t d = t0 - s0 + a->S - a->T;
  if (!a->causal || d >= bc - 1) return no_band;
  return (band){kind, d};
}

/* ---- forward ---- */

typedef struct {
  float *q, *k, *kt, *v, *s, *o, *m, *l;
  /* the keys [0, kv_upto) of head kv_bh as K^T (D x S) and, unless read in place, V rows
   * (S x Dv); NULL when a head is over HEAD_CACHE_BYTES */
  float *kt_h, *v_h;
  int64_t kv_bh, kv_upto, kt_pitch;
} fwd_bufs;

/* K^T's row stride: S rounded up to an odd number of 16-float cache lines, so that the rows
 * one product walks down (a row of K^T per step of k) fall in different L1 sets; S = 1024
 * (4 KiB rows) put all 64 in one set */
static int64_t kt_pitch_of(int64_t S) {
  int64_t p = (S + 15) / 16 * 16;
  return (p / 16) % 2 ? p : p + 16;
}

/* A thread's scratch: one malloc'd block cut into the n buffers *slot[i] of size[i] floats
 * (the list gives both the total and the cut, so they cannot disagree; *slot[0] is the block
 * to free), and a head cache of `cache` floats into *cache_h when it fits HEAD_CACHE_BYTES
 * (NULL, or no memory for it: the per-tile path). 0, or -1 with nothing left allocated. */
static int scratch_alloc(float **slot[], const int64_t size[], int n, int64_t cache, float **cache_h) {
  int64_t total = 0;
  for (int i = 0; i < n; i++) total += size[i];
  *cache_h = cache * (int64_t)sizeof(float) <= HEAD_CACHE_BYTES ? malloc((size_t)cache * sizeof(float)) : NULL;
  float *p = malloc((size_t)total * sizeof(float));
  if (!p) {
    free(*cache_h);
    *cache_h = NULL;
    return -1;
  }
  for (int i = 0; i < n; i++) *slot[i] = p, p += size[i];
  return 0;
}

static int fwd_alloc(fwd_bufs *b, int64_t S, int64_t D, int64_t Dv) {
  b->kv_bh = -1, b->kv_upto = 0, b->kt_pitch = kt_pitch_of(S);
  float **slot[] = {&b->q, &b->k, &b->kt, &b->v, &b->s, &b->o, &b->m, &b->l};
  const int64_t size[] = {BR * D, BC * D, BC * D, BC * Dv, BR * BC, BR * Dv, BR, BR};
  if (scratch_alloc(slot, size, (int)(sizeof size / sizeof size[0]), b->kt_pitch * D + S * Dv, &b->kt_h) < 0)
    return -1;
  b->v_h = b->kt_h ? b->kt_h + b->kt_pitch * D : NULL;
  return 0;
}

/* one tile of queries [t0, t0 + br) of head bh */
static void fwd_tile(const lab_flash_args *a, const layouts *L, fwd_bufs *b, int64_t bh, int64_t t0, int br) {
  int64_t T = a->T, S = a->S, D = a->D, Dv = a->Dv;
  int64_t ldq, ldk, ldv;
  float sc = (float)a->scale;
  const float *q = rows_f32(a->dt, a->q, &L->q, L->H, bh, t0, br, D, b->q, &ldq);
  memset(b->o, 0, (size_t)(br * Dv) * sizeof(float));
  for (int r = 0; r < br; r++) b->m[r] = -INFINITY, b->l[r] = 0;
  int64_t kend = key_end(a, t0 + br - 1); /* keys past the tile's last query's: skipped */
  for (int64_t s0 = 0; s0 < kend; s0 += BC) {
    int bc = (int)(S - s0 < BC ? S - s0 : BC);
    const float *kt, *v;
    int64_t ldkt;
    if (b->kt_h) { /* the head's keys: gathered and transposed once per thread */
      if (b->kv_bh != bh) b->kv_bh = bh, b->kv_upto = 0;
      if (s0 >= b->kv_upto) { /* tiles come in order from 0: s0 == kv_upto */
        const float *k = rows_f32(a->dt, a->k, &L->k, L->H, bh, s0, bc, D, b->k, &ldk);
        transpose(k, ldk, bc, (int)D, b->kt_h + s0, b->kt_pitch);
        if (!in_place(a->dt, &L->v, Dv)) load_rows(a->dt, a->v, &L->v, L->H, bh, s0, bc, Dv, b->v_h + s0 * Dv);
        b->kv_upto = s0 + bc;
      }
      kt = b->kt_h + s0, ldkt = b->kt_pitch;
      if (in_place(a->dt, &L->v, Dv)) v = (const float *)a->v + row_at(&L->v, L->H, bh, s0);
      else v = b->v_h + s0 * Dv;
      ldv = Dv;
    } else {
      const float *k = rows_f32(a->dt, a->k, &L->k, L->H, bh, s0, bc, D, b->k, &ldk);
      v = rows_f32(a->dt, a->v, &L->v, L->H, bh, s0, bc, Dv, b->v, &ldv);
      transpose(k, ldk, bc, (int)D, b->kt, bc);
      kt = b->kt, ldkt = bc;
    }
    band cols = diag_band(a, BAND_COLS, bc, t0, s0), kend = {cols.kind ? BAND_K_END : BAND_NONE, cols.d};
    memset(b->s, 0, (size_t)(br * bc) * sizeof(float));
    mm_acc(br, bc, (int)D, q, ldq, 1, kt, ldkt, b->s, bc, cols);
    for (int r = 0; r < br; r++) {
      /* the scale goes into the exponent (one FMA) and masked keys are never read: the scores
       * are not rewritten scaled and masked first */
      float *row = b->s + r * bc, mx = -INFINITY;
      int lim = visible(a, t0 + r, s0, bc);
      /* omp simd: vector max and sums (a serial float reduction keeps the compiler from
       * vectorising the loop, and lab_expf then runs one element at a time) */
#pragma omp simd reduction(max : mx)
      for (int c = 0; c < lim; c++) mx = row[c] * sc > mx ? row[c] * sc : mx;
      memset(row + lim, 0, (size_t)(bc - lim) * sizeof(float));
      if (lim == 0) continue; /* this query sees no key of the tile */
      float mnew = mx > b->m[r] ? mx : b->m[r], sum = 0;
      float alpha = lab_expf(b->m[r] - mnew); /* 0 on the first visible tile (m = -inf) */
#pragma omp simd reduction(+ : sum)
      for (int c = 0; c < lim; c++) {
        float p = lab_expf(row[c] * sc - mnew);
        row[c] = p;
        sum += p;
      }
      b->l[r] = b->l[r] * alpha + sum;
      b->m[r] = mnew;
      if (alpha != 1.0f) {
        float *o = b->o + r * Dv;
        for (int64_t d = 0; d < Dv; d++) o[d] *= alpha;
      }
    }
    mm_acc(br, (int)Dv, bc, b->s, bc, 1, v, ldv, b->o, Dv, kend);
  }
  float *lse = (float *)a->lse + bh * T + t0;
  for (int r = 0; r < br; r++) {
    float *o = b->o + r * Dv;
    if (b->l[r] > 0) {
      float inv = 1.0f / b->l[r];
      for (int64_t d = 0; d < Dv; d++) o[d] *= inv;
      lse[r] = b->m[r] + logf(b->l[r]);
    } else {
      lse[r] = -INFINITY;
    }
  }
  store_rows(a->dt, b->o, a->out, &L->o, L->H, bh, t0, br, Dv);
}

int lab_flash_attn_fwd(const lab_flash_args *a) {
  if (!supported(a->dt)) return -1;
  int64_t tiles = (a->T + BR - 1) / BR, tasks = a->BH * tiles;
  layouts L = layouts_of(a);
  int failed = 0;
#pragma omp parallel reduction(| : failed)
  {
    fwd_bufs b = {0};
    if (fwd_alloc(&b, a->S, a->D, a->Dv) < 0) failed = 1;
    /* dynamic: causal tiles near the end of a head hold more keys than those at its start */
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < tasks; task++) {
      if (failed) continue;
      int64_t bh = task / tiles, t0 = (task % tiles) * BR;
      fwd_tile(a, &L, &b, bh, t0, (int)(a->T - t0 < BR ? a->T - t0 : BR));
    }
    if (!failed) free(b.q), free(b.kt_h);
  }
  return failed ? -1 : 0;
}

/* ---- backward ---- */

typedef struct {
  float *q, *k, *kt, *v, *vt, *g, *s, *dp, *dk, *dv, *row;
  float *q_h, *g_h; /* a head's q and dO rows (T x D, T x Dv); NULL over HEAD_CACHE_BYTES */
} bwd_bufs;

static int bwd_alloc(bwd_bufs *b, int64_t T, int64_t D, int64_t Dv) {
  int64_t w = D > Dv ? D : Dv;
  float **slot[] = {&b->q, &b->k, &b->kt, &b->v, &b->vt, &b->g, &b->s, &b->dp, &b->dk, &b->dv, &b->row};
  const int64_t size[] = {BR * D,  BC * D,  BC * D, BC * Dv, BC * Dv, BR * Dv,
                          BR * BC, BR * BC, BC * D, BC * Dv, 2 * w};
  if (scratch_alloc(slot, size, (int)(sizeof size / sizeof size[0]), T * (D + Dv), &b->q_h) < 0) return -1;
  b->g_h = b->q_h ? b->q_h + T * D : NULL;
  return 0;
}

/* every gradient of head bh; dq sums in work (T x D f32), delta (T) = rowdot(dO, O) */
static void bwd_head(const lab_flash_args *a, const layouts *L, bwd_bufs *b, int64_t bh) {
  int64_t T = a->T, S = a->S, D = a->D, Dv = a->Dv;
  float *dq = (float *)a->work + bh * T * D;
  float *delta = (float *)a->work + a->BH * T * D + bh * T;
  const float *lse = (const float *)a->lse + bh * T;
  float sc = (float)a->scale;
  memset(dq, 0, (size_t)(T * D) * sizeof(float));
  for (int64_t t = 0; t < T; t++) {
    int64_t ld;
    const float *go = rows_f32(a->dt, a->dout, &L->dout, L->H, bh, t, 1, Dv, b->row, &ld);
    const float *o = rows_f32(a->dt, a->o, &L->o, L->H, bh, t, 1, Dv, b->row + Dv, &ld);
    delta[t] = dot(go, o, Dv);
  }
  /* q and dO rows that would be gathered for every key tile: gathered once for the head */
  int gather_q = b->q_h && !in_place(a->dt, &L->q, D), gather_g = b->g_h && !in_place(a->dt, &L->dout, Dv);
  if (gather_q) load_rows(a->dt, a->q, &L->q, L->H, bh, 0, T, D, b->q_h);
  if (gather_g) load_rows(a->dt, a->dout, &L->dout, L->H, bh, 0, T, Dv, b->g_h);
  for (int64_t s0 = 0; s0 < S; s0 += BC) {
    int bc = (int)(S - s0 < BC ? S - s0 : BC);
    int64_t ldk, ldv, ldq, ldg;
    const float *k = rows_f32(a->dt, a->k, &L->k, L->H, bh, s0, bc, D, b->k, &ldk);
    const float *v = rows_f32(a->dt, a->v, &L->v, L->H, bh, s0, bc, Dv, b->v, &ldv);
    transpose(k, ldk, bc, (int)D, b->kt, bc);
    transpose(v, ldv, bc, (int)Dv, b->vt, bc);
    memset(b->dk, 0, (size_t)(bc * D) * sizeof(float));
    memset(b->dv, 0, (size_t)(bc * Dv) * sizeof(float));
    /* the first query that sees key s0: t + (S - T) >= s0 */
    int64_t tfirst = a->causal ? s0 - (S - T) : 0;
    if (tfirst < 0) tfirst = 0;
    for (int64_t t0 = tfirst / BR * BR; t0 < T; t0 += BR) {
      int br = (int)(T - t0 < BR ? T - t0 : BR);
      const float *q = gather_q ? (ldq = D, b->q_h + t0 * D) : rows_f32(a->dt, a->q, &L->q, L->H, bh, t0, br, D, b->q, &ldq);
      const float *go = gather_g ? (ldg = Dv, b->g_h + t0 * Dv)
                                 : rows_f32(a->dt, a->dout, &L->dout, L->H, bh, t0, br, Dv, b->g, &ldg);
      band cols = diag_band(a, BAND_COLS, bc, t0, s0);
      band kend = {cols.kind ? BAND_K_END : BAND_NONE, cols.d}, kbeg = {cols.kind ? BAND_K_BEGIN : BAND_NONE, cols.d};
      memset(b->s, 0, (size_t)(br * bc) * sizeof(float));
      mm_acc(br, bc, (int)D, q, ldq, 1, b->kt, bc, b->s, bc, cols);
      for (int r = 0; r < br; r++) { /* P = exp(scale score - lse) where seen, else 0 */
        float *row = b->s + r * bc, m = lse[t0 + r];
        int lim = m == -INFINITY ? 0 : visible(a, t0 + r, s0, bc);
#pragma omp simd
        for (int c = 0; c < lim; c++) row[c] = lab_expf(row[c] * sc - m);
        memset(row + lim, 0, (size_t)(bc - lim) * sizeof(float));
      }
      mm_acc(bc, (int)Dv, br, b->s, 1, bc, go, ldg, b->dv, Dv, kbeg); /* dV += P^T dO */
      memset(b->dp, 0, (size_t)(br * bc) * sizeof(float));
      mm_acc(br, bc, (int)Dv, go, ldg, 1, b->vt, bc, b->dp, bc, cols); /* dP = dO V^T */
      for (int r = 0; r < br; r++) {
        float *p = b->s + r * bc, *dp = b->dp + r * bc, dl = delta[t0 + r];
        for (int c = 0; c < bc; c++) dp[c] = p[c] * (dp[c] - dl) * sc; /* dS */
      }
      mm_acc(bc, (int)D, br, b->dp, 1, bc, q, ldq, b->dk, D, kbeg);       /* dK += dS^T Q */
      mm_acc(br, (int)D, bc, b->dp, bc, 1, k, ldk, dq + t0 * D, D, kend); /* dQ += dS K */
    }
    store_rows(a->dt, b->dk, a->dk, &L->dk, L->H, bh, s0, bc, D);
    store_rows(a->dt, b->dv, a->dv, &L->dv, L->H, bh, s0, bc, Dv);
  }
  store_rows(a->dt, dq, a->dq, &L->dq, L->H, bh, 0, T, D);
}

int lab_flash_attn_bwd(const lab_flash_args *a) {
  if (!supported(a->dt)) return -1;
  layouts L = layouts_of(a);
  int failed = 0;
#pragma omp parallel reduction(| : failed)
  {
    bwd_bufs b = {0};
    if (bwd_alloc(&b, a->T, a->D, a->Dv) < 0) failed = 1;
#pragma omp for schedule(dynamic, 1)
    for (int64_t bh = 0; bh < a->BH; bh++)
      if (!failed) bwd_head(a, &L, &b, bh);
    if (!failed) free(b.q), free(b.q_h);
  }
  return failed ? -1 : 0;
}
