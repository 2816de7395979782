/* The SIMT interpreter (kernels/simt) on kernels written to test it (simt_kernels.cc,
 * simt_ptx_kernels.cc): each emulated warp-level instruction (mma, shfl, ldmatrix x1/x2/x4
 * plain and .trans) for every lane against a plain matrix product or gather, cp.async (16, 8
 * and 4 bytes, zero fill, two commit groups) against a plain copy and read before its wait,
 * and each rule (racecheck, synccheck, memcheck, bank conflicts and sectors, the seeded thread
 * order) shown failing where a kernel breaks it and silent where it does not; a race no rule
 * sees shown by its result changing with the seed; float and double atomicAdd contended. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kernels/cpu/half.h"
#include "kernels/simt/simt.h"

int simt_test_mma(int f16, const void *a, const void *b, const float *c, float *d);
int simt_test_shfl(const double *in, double *out);
int simt_test_sum(const float *x, float *out, int barrier);
int simt_test_diverge(float *out);
int simt_test_mask(float *out);
int simt_test_shift(const float *x, float *y, int n, int off);
int simt_test_stride(const float *x, float *y, int stride);
int simt_test_order(int *out);
int simt_test_last_writer(int *out);
int simt_test_atomic(int f64, void *acc, void *old, void *lanes, int blocks, int threads);
int simt_test_ldsm(int n, int trans, const uint16_t *src, uint32_t *out);
int simt_test_cp_async(const unsigned char *src, unsigned char *out, int threads);
int simt_test_cp_async_early(const uint32_t *src, uint32_t *out, int mode);

/* "device" memory: one registered range, allocations 256 bytes apart */
static char arena[1 << 20] __attribute__((aligned(256)));
static size_t used;

static void *dev_alloc(size_t n) {
  void *p = arena + used;
  used += (n + 255) / 256 * 256 + 256;
  assert_true(used <= sizeof arena);
  lab_simt_note_alloc(p, n);
  return p;
}

static int setup(void **state) {
  (void)state;
  lab_simt_global_range(arena, sizeof arena, 0x7f0000000000u);
  lab_simt_set_seed(1);
  lab_simt_set_perf(1);
  return 0;
}

static void mma_case(int f16) {
  uint16_t *a = dev_alloc(256 * 2), *b = dev_alloc(128 * 2);
  float *c = dev_alloc(128 * 4), *d = dev_alloc(128 * 4);
  float A[16][16], B[8][16];
  srand(7 + f16);
  for (int i = 0; i < 256; i++) { /* small multiples of 1/4: exact in bf16, f16 and their f32 products */
    A[i / 16][i % 16] = (float)(rand() % 17 - 8) / 4;
    a[i] = f16 ? lab_f32_to_f16(A[i / 16][i % 16]) : lab_f32_to_bf16(A[i / 16][i % 16]);
  }
  for (int i = 0; i < 128; i++) {
    B[i / 16][i % 16] = (float)(rand() % 17 - 8) / 4;
    b[i] = f16 ? lab_f32_to_f16(B[i / 16][i % 16]) : lab_f32_to_bf16(B[i / 16][i % 16]);
    c[i] = (float)(rand() % 9 - 4);
  }
  long hz = lab_simt_hazards();
  assert_int_equal(simt_test_mma(f16, a, b, c, d), 0);
  assert_int_equal(lab_simt_hazards(), hz);
  for (int i = 0; i < 16; i++) /* every element of D: each is one lane's register */
    for (int j = 0; j < 8; j++) {
      float s = c[i * 8 + j];
      for (int k = 0; k < 16; k++) s += A[i][k] * B[j][k];
      assert_float_equal(d[i * 8 + j], s, 0);
    }
}
static void test_mma_bf16(void **state) { (void)state, mma_case(0); }
static void test_mma_f16(void **state) { (void)state, mma_case(1); }

static void test_shfl_xor(void **state) {
  (void)state;
  double *in = dev_alloc(32 * 8), *out = dev_alloc(32 * 32 * 8);
  for (int l = 0; l < 32; l++) in[l] = 1000.5 + l;
  assert_int_equal(simt_test_shfl(in, out), 0);
  for (int m = 0; m < 32; m++)
    for (int l = 0; l < 32; l++) assert_float_equal(out[m * 32 + l], in[l ^ m], 0);
}

static void test_racecheck(void **state) {
  (void)state;
  float *x = dev_alloc(256 * 4), *out = dev_alloc(4);
  for (int i = 0; i < 256; i++) x[i] = (float)i;
  long hz = lab_simt_hazards();
  assert_int_equal(simt_test_sum(x, out, 1), 0);
  assert_int_equal(lab_simt_hazards(), hz);
  assert_float_equal(out[0], 255 * 128, 0);
  assert_int_not_equal(simt_test_sum(x, out, 0), 0); /* the barrier left out */
  assert_true(lab_simt_hazards() > hz);
  const char *r = lab_simt_last_report();
  assert_non_null(strstr(r, "simt racecheck: sum_k block (0,0,0) thread"));
  assert_non_null(strstr(r, "with no __syncthreads between"));
}

static void test_synccheck(void **state) {
  (void)state;
  float *out = dev_alloc(32 * 4);
  assert_int_not_equal(simt_test_diverge(out), 0);
  assert_non_null(strstr(lab_simt_last_report(), "simt synccheck: diverge_k"));
  assert_non_null(strstr(lab_simt_last_report(), "__syncthreads reached by 16 of 32 threads"));
  assert_int_not_equal(simt_test_mask(out), 0);
  assert_non_null(strstr(lab_simt_last_report(), "simt synccheck: mask_k"));
  assert_non_null(strstr(lab_simt_last_report(), "which has ended"));
}

static void test_memcheck(void **state) {
  (void)state;
  int n = 100;
  float *x = dev_alloc((size_t)n * 4), *y = dev_alloc((size_t)n * 4);
  long hz = lab_simt_hazards();
  assert_int_equal(simt_test_shift(x, y, n, 0), 0);
  assert_int_equal(lab_simt_hazards(), hz);
  assert_int_not_equal(simt_test_shift(x, y, n, 1), 0); /* reads x[n] */
  assert_non_null(strstr(lab_simt_last_report(), "simt memcheck: shift_k block (1,0,0) thread (35,0,0)"));
  assert_non_null(strstr(lab_simt_last_report(), "invalid global read of 4 bytes"));
  assert_non_null(strstr(lab_simt_last_report(), "past the end of a 400-byte allocation"));
  lab_simt_note_free(x, (size_t)n * 4);
  assert_int_not_equal(simt_test_shift(x, y, n, 0), 0);
  assert_non_null(strstr(lab_simt_last_report(), "use after free"));
}

static void test_bank_conflicts_and_sectors(void **state) {
  (void)state;
  float *x = dev_alloc(32 * 32 * 4), *y = dev_alloc(32 * 4);
  long t[4];
  lab_simt_reset_stats();
  assert_int_equal(simt_test_stride(x, y, 1), 0);
  lab_simt_perf_totals("stride_k", t);
  assert_int_equal(t[0], t[1]); /* consecutive words: one wavefront per request */
  assert_int_equal(t[2], t[3]); /* 128 contiguous bytes: 4 sectors */
  lab_simt_reset_stats();
  assert_int_equal(simt_test_stride(x, y, 32), 0);
  lab_simt_perf_totals("stride_k", t);
  assert_int_equal(t[0] - t[1], 31); /* 32 words in one bank: 32 wavefronts where 1 would do */
  assert_int_equal(t[2] - t[3], 28); /* 32 sectors where 4 would do */
}

/* lab.sim.stats()'s records (lab_simt_kernel_stat): per kernel since the reset, its launches,
 * last grid/block/shared bytes, the barriers its blocks passed and the hazards found */
static const lab_simt_kernel_stats *stat_of(const char *kernel, lab_simt_kernel_stats *s) {
  for (int i = 0; lab_simt_kernel_stat(i, s) == 0; i++)
    if (!strcmp(s->kernel, kernel)) return s;
  return NULL;
}

static void test_kernel_stats(void **state) {
  (void)state;
  int n = 100;
  float *x = dev_alloc(256 * 4), *out = dev_alloc(4), *xs = dev_alloc((size_t)n * 4), *y = dev_alloc((size_t)n * 4);
  lab_simt_kernel_stats s;
  lab_simt_reset_stats();
  assert_int_equal(lab_simt_kernel_stat(0, &s), -1); /* nothing launched since the reset */
  assert_int_equal(simt_test_sum(x, out, 1), 0);
  assert_int_equal(simt_test_shift(xs, y, n, 0), 0);
  assert_int_not_equal(simt_test_shift(xs, y, n, 1), 0); /* memcheck: reads xs[n] */
  assert_non_null(stat_of("sum_k", &s));
  assert_int_equal(s.launches, 1);
  assert_int_equal(s.blocks, 1);
  assert_int_equal(s.block.x, 256);
  assert_int_equal(s.hazards, 0);
  assert_int_equal(s.barriers, 1); /* its one __syncthreads */
  assert_int_equal(s.block_barriers_min, 1);
  assert_int_equal(s.block_barriers_max, 1);
  assert_non_null(stat_of("shift_k", &s));
  assert_int_equal(s.launches, 2);
  assert_int_equal(s.blocks, 4); /* 2 blocks of 64 per launch */
  assert_int_equal(s.grid.x, 2);
  assert_int_equal(s.block.x, 64);
  assert_int_equal(s.dyn_smem, 0);
  assert_true(s.hazards >= 1);
  lab_simt_reset_stats();
  assert_int_equal(lab_simt_kernel_stat(0, &s), -1);
}

static void test_seeded_order(void **state) {
  (void)state;
  int *a = dev_alloc(64 * 4), *b = dev_alloc(64 * 4), *c = dev_alloc(64 * 4);
  lab_simt_set_seed(0);
  assert_int_equal(simt_test_order(a), 0);
  for (int i = 0; i < 64; i++) assert_int_equal(a[i], i); /* natural order */
  lab_simt_set_seed(1);
  assert_int_equal(simt_test_order(b), 0);
  lab_simt_set_seed(2);
  assert_int_equal(simt_test_order(c), 0);
  assert_memory_not_equal(a, b, 64 * 4);
  assert_memory_not_equal(b, c, 64 * 4);
  lab_simt_set_seed(1);
}

/* A planted race that no rule reports (256 threads write one global word; racecheck watches
 * shared memory): the word left differs across seeds, as a race-free kernel's result must not
 * (tests/sim/test_thread_order.lua checks that on the real kernels) */
static void test_racy_kernel_differs_across_seeds(void **state) {
  (void)state;
  int *out = dev_alloc(4);
  int seen[4];
  long hz = lab_simt_hazards();
  for (int k = 0; k < 4; k++) {
    lab_simt_set_seed((uint64_t)k);
    *out = -1;
    assert_int_equal(simt_test_last_writer(out), 0);
    seen[k] = *out;
    assert_true(seen[k] >= 0 && seen[k] < 256);
  }
  lab_simt_set_seed(1);
  assert_int_equal(lab_simt_hazards(), hz); /* unreported: only the result shows it */
  assert_int_equal(seen[0], 255);           /* natural order: the last thread writes last */
  assert_true(seen[1] != seen[2] || seen[2] != seen[3]);
  assert_true(seen[1] != 255 || seen[2] != 255 || seen[3] != 255);
}

/* atomicAdd on float and double (warp.c's compare-and-swap loop), contended: 32 blocks of 64
 * threads on 3 OS workers add into one word; every thread's old value is distinct (0 .. n-1:
 * no add lost or seen twice), the totals are exact (2,048,000 adds of 1 into one word among
 * them: a load-add-store in place of the compare-and-swap lost some in 10 runs of 10), and
 * each of the 32 lanes' own words got every block's add from both its warps. 8 times: blocks
 * meet on the workers only as the machine's load allows. */
static void atomic_case(int f64) {
  enum { B = 32, N = 64, TOTAL = B * N };
  size_t sz = f64 ? 8 : 4;
  char *acc = dev_alloc(3 * sz), *old = dev_alloc(TOTAL * sz), *lanes = dev_alloc(32 * sz);
  static char hit[TOTAL];
#define AT(p, i) (f64 ? ((double *)(void *)(p))[i] : (double)((float *)(void *)(p))[i])
  lab_simt_set_workers(3);
  for (int rep = 0; rep < 8; rep++) {
    memset(acc, 0, 3 * sz);
    memset(lanes, 0, 32 * sz);
    long hz = lab_simt_hazards();
    assert_int_equal(simt_test_atomic(f64, acc, old, lanes, B, N), 0);
    assert_int_equal(lab_simt_hazards(), hz);
    assert_true(AT(acc, 0) == TOTAL);
    assert_true(AT(acc, 1) == (double)TOTAL * (TOTAL + 1) / 2);
    assert_true(AT(acc, 2) == 1000.0 * TOTAL);
    memset(hit, 0, sizeof hit);
    for (int g = 0; g < TOTAL; g++) {
      double o = AT(old, g);
      assert_true(o >= 0 && o < TOTAL && o == (double)(int)o);
      assert_int_equal(hit[(int)o], 0);
      hit[(int)o] = 1;
    }
    for (int l = 0; l < 32; l++) assert_true(AT(lanes, l) == 2.0 * B * (B + 1) / 2); /* 2 warps x (1 + .. + B) */
  }
  lab_simt_set_workers(1);
#undef AT
}
static void test_atomic_add_f32(void **state) { (void)state, atomic_case(0); }
static void test_atomic_add_f64(void **state) { (void)state, atomic_case(1); }

/* blocks spread over three OS workers: every block runs once, with its own shared memory */
static void test_workers(void **state) {
  (void)state;
  int n = 10000;
  float *x = dev_alloc((size_t)n * 4), *y = dev_alloc((size_t)n * 4), *s = dev_alloc(4);
  for (int i = 0; i < n; i++) x[i] = (float)i, y[i] = -1;
  lab_simt_set_workers(3);
  long hz = lab_simt_hazards();
  assert_int_equal(simt_test_shift(x, y, n, 0), 0); /* 157 blocks */
  for (int i = 0; i < n; i++) assert_float_equal(y[i], (float)i, 0);
  for (int k = 0; k < 8; k++) {
    assert_int_equal(simt_test_sum(x, s, 1), 0);
    assert_float_equal(s[0], 255 * 128, 0);
  }
  assert_int_equal(lab_simt_hazards(), hz);
  lab_simt_set_workers(1);
}

/* element (r, c) of matrix i, where simt_ptx_kernels.cc's ldsm_k stores it */
static uint16_t elem(const uint16_t *src, int i, int r, int c) { return src[((7 - r) * 4 + i) * 8 + c]; }

static void ldsm_case(int n, int trans) {
  uint16_t *src = dev_alloc(256 * 2);
  uint32_t *out = dev_alloc(32 * 4 * 4);
  for (int i = 0; i < 256; i++) src[i] = (uint16_t)(0x1000 + i * 7);
  memset(out, 0, 32 * 4 * 4);
  long hz = lab_simt_hazards();
  assert_int_equal(simt_test_ldsm(n, trans, src, out), 0);
  assert_int_equal(lab_simt_hazards(), hz);
  for (int l = 0; l < 32; l++)
    for (int i = 0; i < n; i++) {
      int g = l / 4, q = l % 4;
      uint16_t lo = trans ? elem(src, i, 2 * q, g) : elem(src, i, g, 2 * q);
      uint16_t hi = trans ? elem(src, i, 2 * q + 1, g) : elem(src, i, g, 2 * q + 1);
      assert_int_equal(out[l * 4 + i], (uint32_t)lo | (uint32_t)hi << 16);
    }
}

static void test_ldmatrix(void **state) {
  (void)state;
  for (int n = 1; n <= 4; n *= 2)
    for (int trans = 0; trans < 2; trans++) ldsm_case(n, trans);
}

static void test_cp_async(void **state) {
  (void)state;
  int threads = 64;
  unsigned char *src = dev_alloc(16 * 64), *out = dev_alloc(29 * 64);
  for (int i = 0; i < 16 * threads; i++) src[i] = (unsigned char)(i * 13 + 1);
  long hz = lab_simt_hazards();
  assert_int_equal(simt_test_cp_async(src, out, threads), 0);
  assert_int_equal(lab_simt_hazards(), hz);
  for (int t = 0; t < threads; t++) {
    int sb = (t % 5) * 4;
    for (int b = 0; b < 16; b++) assert_int_equal(out[16 * t + b], b < sb ? src[16 * t + b] : 0);
    for (int b = 0; b < 8; b++) assert_int_equal(out[16 * threads + 8 * t + b], b < sb ? src[8 * t + b] : 0);
    for (int b = 0; b < 4; b++) assert_int_equal(out[24 * threads + 4 * t + b], b < sb ? src[4 * t + b] : 0);
    assert_int_equal(out[28 * threads + t], sb ? src[16 * t] : 0); /* after wait_group 1 */
  }
}

static void test_cp_async_read_before_wait(void **state) {
  (void)state;
  uint32_t *src = dev_alloc(64 * 4), *out = dev_alloc(64 * 4);
  for (int i = 0; i < 64; i++) src[i] = 100u + (uint32_t)i;
  long hz = lab_simt_hazards();
  assert_int_equal(simt_test_cp_async_early(src, out, 0), 0); /* wait, barrier, read */
  assert_int_equal(lab_simt_hazards(), hz);
  for (int t = 0; t < 64; t++) assert_int_equal(out[t], 100u + (uint32_t)((t + 1) % 64));
  assert_int_not_equal(simt_test_cp_async_early(src, out, 1), 0); /* read before the wait */
  assert_true(lab_simt_hazards() > hz);
  const char *r = lab_simt_last_report();
  assert_non_null(strstr(r, "simt cp.async: cp_async_early_k block (0,0,0) thread"));
  assert_non_null(strstr(r, "cp.async to it is in flight"));
  assert_non_null(strstr(r, "stale data"));
  for (int t = 0; t < 64; t++) assert_int_equal(out[t], 0xdeadbeefu); /* what a GPU may read */
  hz = lab_simt_hazards();
  assert_int_not_equal(simt_test_cp_async_early(src, out, 3), 0); /* wait_group 1 left the second group */
  assert_true(lab_simt_hazards() > hz);
  assert_non_null(strstr(lab_simt_last_report(), "stale data"));
  for (int t = 0; t < 64; t++) assert_int_equal(out[t], 0xdeadbeefu);
  hz = lab_simt_hazards();
  assert_int_not_equal(simt_test_cp_async_early(src, out, 2), 0); /* no barrier after the waits */
  assert_true(lab_simt_hazards() > hz);
  r = lab_simt_last_report();
  assert_true(strstr(r, "simt racecheck: cp_async_early_k") || strstr(r, "simt cp.async: cp_async_early_k"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_mma_bf16),     cmocka_unit_test(test_mma_f16),
      cmocka_unit_test(test_shfl_xor),     cmocka_unit_test(test_racecheck),
      cmocka_unit_test(test_synccheck),    cmocka_unit_test(test_memcheck),
      cmocka_unit_test(test_bank_conflicts_and_sectors), cmocka_unit_test(test_seeded_order),
      cmocka_unit_test(test_kernel_stats),
      cmocka_unit_test(test_workers),
      cmocka_unit_test(test_racy_kernel_differs_across_seeds),
      cmocka_unit_test(test_atomic_add_f32), cmocka_unit_test(test_atomic_add_f64),
      cmocka_unit_test(test_ldmatrix),     cmocka_unit_test(test_cp_async),
      cmocka_unit_test(test_cp_async_read_before_wait),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
