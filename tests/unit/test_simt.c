/* The SIMT interpreter (kernels/simt) on kernels written to test it (simt_kernels.cc,
 * simt_ptx_kernels.cc): each emulated warp-level instruction (mma, shfl, ldmatrix x1/x2/x4
 * plain and .trans) for every lane against a plain matrix product or gather, cp.async (16, 8
 * and 4 bytes, zero fill, two commit groups) against a plain copy and read before its wait,
 * and each rule (racecheck, synccheck, memcheck, bank conflicts and sectors, the seeded thread
 * order) shown failing where a kernel breaks it and silent where it does not. */
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
      cmocka_unit_test(test_ldmatrix),     cmocka_unit_test(test_cp_async),
      cmocka_unit_test(test_cp_async_read_before_wait),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
