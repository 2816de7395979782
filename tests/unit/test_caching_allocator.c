/* The CUDA caching allocator's logic on a fake device (host malloc with a byte limit): reuse,
 * splitting, merging, stream ownership, best fit, and the out-of-memory path (empty the cache,
 * retry once, then an error naming requested, free and cached bytes). Runs on every machine;
 * tests/gpu runs the same allocator on a real GPU. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "runtime/cuda/caching_allocator.h"
#include "runtime/error.h"

typedef struct {
  size_t limit, used;
  int allocs;
} fake;

static void *fake_alloc(void *ctx, size_t n) {
  fake *f = ctx;
  if (f->used + n > f->limit) return NULL;
  f->used += n;
  f->allocs++;
  size_t *p = malloc(n + 16);
  p[0] = n;
  return p + 2;
}

static void fake_free(void *ctx, void *p) {
  fake *f = ctx;
  size_t *h = (size_t *)p - 2;
  f->used -= h[0];
  free(h);
}

static int fake_info(void *ctx, size_t *fr, size_t *total) {
  fake *f = ctx;
  *fr = f->limit - f->used;
  *total = f->limit;
  return 0;
}

static lab_caching_allocator *make(fake *f) {
  return lab_ca_new((lab_ca_backend){fake_alloc, fake_free, fake_info, f});
}

static void test_small_blocks_split_one_segment_and_are_reused(void **state) {
  (void)state;
  fake f = {.limit = (size_t)1 << 30};
  lab_caching_allocator *a = make(&f);
  char *x = lab_ca_malloc(a, 1000, NULL), *y = lab_ca_malloc(a, 3000, NULL);
  assert_int_equal(f.allocs, 1);                 /* one 2 MiB segment serves both */
  assert_ptr_equal(y, x + lab_ca_round(1000));   /* split off the same segment */
  lab_ca_free(a, x);
  assert_ptr_equal(lab_ca_malloc(a, 900, NULL), x); /* the freed block comes back */
  assert_int_equal(f.allocs, 1);
  lab_ca_stats s = lab_ca_get_stats(a);
  assert_int_equal(s.reserved, 2 << 20);
  assert_int_equal(s.allocated, 1024 + 3072);
  lab_ca_destroy(a);
  assert_int_equal(f.used, 0);
}

static void test_freed_neighbours_merge_and_empty_cache_releases(void **state) {
  (void)state;
  fake f = {.limit = (size_t)1 << 30};
  lab_caching_allocator *a = make(&f);
  void *x = lab_ca_malloc(a, 4096, NULL), *y = lab_ca_malloc(a, 4096, NULL), *z = lab_ca_malloc(a, 4096, NULL);
  lab_ca_free(a, x);
  lab_ca_free(a, z);
  lab_ca_free(a, y); /* joins both neighbours: the segment is one free block again */
  assert_true(lab_ca_get_stats(a).merges >= 2);
  lab_ca_empty_cache(a);
  assert_int_equal(lab_ca_get_stats(a).reserved, 0);
  assert_int_equal(f.used, 0);
  lab_ca_destroy(a);
}

static void test_blocks_belong_to_their_stream(void **state) {
  (void)state;
  fake f = {.limit = (size_t)1 << 30};
  lab_caching_allocator *a = make(&f);
  int s1, s2;
  void *x = lab_ca_malloc(a, 1 << 21, &s1); /* large pool */
  lab_ca_free(a, x);
  void *y = lab_ca_malloc(a, 1 << 21, &s2);
  assert_ptr_not_equal(x, y); /* another stream's free block is not taken */
  void *z = lab_ca_malloc(a, 1 << 21, &s1);
  assert_ptr_equal(x, z);
  lab_ca_destroy(a);
}

static void test_best_fit_takes_the_smallest_block_that_fits(void **state) {
  (void)state;
  fake f = {.limit = (size_t)1 << 30};
  lab_caching_allocator *a = make(&f);
  /* large blocks of 12 MiB and 30 MiB segments, both freed */
  void *big = lab_ca_malloc(a, (size_t)30 << 20, NULL), *mid = lab_ca_malloc(a, (size_t)12 << 20, NULL);
  lab_ca_free(a, big);
  lab_ca_free(a, mid);
  assert_ptr_equal(lab_ca_malloc(a, (size_t)11 << 20, NULL), mid);
  lab_ca_destroy(a);
}

static void test_out_of_memory_empties_the_cache_then_names_the_bytes(void **state) {
  (void)state;
  fake f = {.limit = (size_t)40 << 20};
  lab_caching_allocator *a = make(&f);
  void *x = lab_ca_malloc(a, (size_t)12 << 20, NULL), *y = lab_ca_malloc(a, (size_t)14 << 20, NULL);
  assert_non_null(x);
  assert_non_null(y);
  lab_ca_free(a, x); /* 12 MiB cached, 14 MiB in use: 26 of 40 MiB reserved */
  void *z = lab_ca_malloc(a, (size_t)20 << 20, NULL); /* needs the cache back */
  assert_non_null(z);
  assert_int_equal(lab_ca_get_stats(a).oom_retries, 1);
  assert_null(lab_ca_malloc(a, (size_t)30 << 20, NULL)); /* cannot fit at all */
  const char *msg = lab_last_error();
  assert_non_null(strstr(msg, "out of memory"));
  assert_non_null(strstr(msg, "31457280 bytes"));  /* requested */
  assert_non_null(strstr(msg, "free on the device")); /* and what is free and cached */
  assert_non_null(strstr(msg, "cached"));
  lab_ca_destroy(a);
  assert_int_equal(f.used, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_small_blocks_split_one_segment_and_are_reused),
      cmocka_unit_test(test_freed_neighbours_merge_and_empty_cache_releases),
      cmocka_unit_test(test_blocks_belong_to_their_stream),
      cmocka_unit_test(test_best_fit_takes_the_smallest_block_that_fits),
      cmocka_unit_test(test_out_of_memory_empties_the_cache_then_names_the_bytes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
