/* The device seam from C: host code that touches sim memory faults, data crosses only through
 * the copy functions, every device keeps its own account, and the sim arena reuses and merges
 * freed ranges. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "runtime/device_sim.h"
#include "runtime/error.h"
#include "runtime/kprof.h"
#include "runtime/ewise.h"
#include "runtime/transfer.h"

static const lab_device SIM = {LAB_DEV_SIM, 0};

/* Runs a read of p in a child process; returns the signal that ended it (0: none). */
static int read_in_child(const void *p) {
  pid_t pid = fork();
  if (pid == 0) {
    signal(SIGSEGV, SIG_DFL); /* cmocka's handler would catch it */
    volatile float v = *(const volatile float *)p;
    (void)v;
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFSIGNALED(status) ? WTERMSIG(status) : 0;
}

static void test_host_reads_of_sim_memory_fault(void **state) {
  (void)state;
  lab_tensor *c = lab_tensor_full(LAB_F32, 1, (int64_t[]){16}, 2.0);
  lab_tensor *s = lab_to_device(c, SIM);
  assert_non_null(s);
  assert_int_equal(read_in_child(lab_data(c)), 0);       /* the check can pass... */
  assert_int_equal(read_in_child(lab_data(s)), SIGSEGV); /* ...and fails for device memory */
  lab_tensor_release(c);
  lab_tensor_release(s);
}

static void test_values_cross_only_through_copies(void **state) {
  (void)state;
  float in[6] = {1, -2, 3.5f, 4, 5, -6}, out[6] = {0};
  lab_tensor *s = lab_tensor_from_host(SIM, LAB_F32, 2, (int64_t[]){2, 3}, in);
  lab_tensor *t = lab_transpose(s, 0, 1);
  lab_tensor *two = lab_tensor_scalar(LAB_F32, 2.0);
  lab_tensor *y = lab_binary(LAB_MUL, t, two, -1); /* a cpu scalar goes with a sim tensor */
  assert_non_null(y);
  assert_int_equal(lab_device_of(y).type, LAB_DEV_SIM);
  assert_int_equal(lab_copy_to_host(y, out), 0);
  float want[6] = {2, 8, -4, 10, 7, -12}; /* the transpose, doubled */
  assert_memory_equal(out, want, sizeof want);
  double v;
  lab_tensor *e = lab_select(y, 0, 2);
  lab_tensor *e1 = e ? lab_select(e, 0, 1) : NULL;
  assert_int_equal(lab_item_f64(e1, &v), 0);
  assert_true(v == -12.0);
  lab_tensor_release(e1);
  lab_tensor_release(e);
  lab_tensor_release(y);
  lab_tensor_release(two);
  lab_tensor_release(t);
  lab_tensor_release(s);
}

static void test_mixing_devices_names_both(void **state) {
  (void)state;
  lab_tensor *c = lab_tensor_zeros(LAB_F32, 1, (int64_t[]){3});
  lab_tensor *s = lab_tensor_zeros_on(SIM, LAB_F32, 1, (int64_t[]){3});
  assert_null(lab_binary(LAB_ADD, c, s, -1));
  assert_non_null(strstr(lab_last_error(), "cpu"));
  assert_non_null(strstr(lab_last_error(), "sim:0"));
  lab_tensor_release(c);
  lab_tensor_release(s);
}

static void test_each_device_keeps_its_account(void **state) {
  (void)state;
  int64_t cpu0 = lab_mem_get_device(lab_cpu())->current_total, sim0 = lab_mem_get_device(SIM)->current_total;
  lab_mem_mark();
  lab_tensor *s = lab_tensor_zeros_on(SIM, LAB_F64, 1, (int64_t[]){1000});
  assert_int_equal(lab_mem_get_device(SIM)->current_total - sim0, 8000);
  assert_int_equal(lab_mem_get_device(lab_cpu())->current_total, cpu0);
  /* charged to the sim alone, allocation counts too (the cpu's account counted every device's
   * bytes as allocated since the mark) */
  assert_int_equal(lab_mem_get_device(SIM)->allocated_since_mark, 8000);
  assert_int_equal(lab_mem_get_device(lab_cpu())->allocated_since_mark, 0);
  lab_storage_set_tag(s->storage, LAB_MEM_OPTIM);
  assert_true(lab_mem_get_device(SIM)->current[LAB_MEM_OPTIM] >= 8000);
  lab_tensor_release(s);
  assert_int_equal(lab_mem_get_device(SIM)->current_total, sim0);
  assert_true(lab_mem_cached_bytes_on(SIM) >= 8000); /* kept for reuse, off the account */
  lab_mem_empty_cache();
  assert_int_equal(lab_mem_cached_bytes_on(SIM), 0);
}

static void test_sim_arena_reuses_and_merges_ranges(void **state) {
  (void)state;
  /* the arena itself (device_sim.h), under every table's allocator: the direct table keeps a
   * block cache on top of it, the simrt one the caching allocator */
  char *a = lab_sim_arena_alloc(4096, 1), *b = lab_sim_arena_alloc(4096, 1), *c = lab_sim_arena_alloc(4096, 1);
  /* where the build has the SIMT interpreter, each allocation is followed by a guard gap
   * (memcheck's: an overrun lands in no allocation), so neighbours sit one stride apart */
  ptrdiff_t stride = b - a;
  assert_true(stride >= 4096 && stride <= 4096 + 512);
  assert_ptr_equal(c, b + stride);
  lab_sim_arena_free(b, 4096, 1);
  assert_ptr_equal(lab_sim_arena_alloc(4096, 1), b); /* first fit takes the hole back */
  lab_sim_arena_free(a, 4096, 1);
  lab_sim_arena_free(c, 4096, 1);
  lab_sim_arena_free(b, 4096, 1); /* the three merge into one range... */
  assert_ptr_equal(lab_sim_arena_alloc(3 * 4096, 1), a); /* ...that holds a block of all three */
  lab_sim_arena_free(a, 3 * 4096, 1);
}

/* Every table has every fused kernel its list in kernels/fused_ops.h promises (the tables are
 * generated from the lists; this catches an entry dropped or left NULL by one device), and while
 * the kernel profiler is on, each of the cpu's is its timing wrapper. */
static void check_table(const lab_device_ops *ops, const lab_device_ops *plain, int optional) {
  assert_non_null(ops);
  const char *table = ops->name;
  int missing = 0, unwrapped = 0;
#define CHECK_(name, R, cpu, cat, op, anchor, work, params, args)                                 \
  if (!ops->name) print_error("the %s table has no %s\n", table, #name), missing++;               \
  else if (plain && ops->name == plain->name) print_error("%s is not timed\n", #name), unwrapped++;
  LAB_FUSED_REQUIRED(CHECK_)
  if (optional) {
    LAB_FUSED_OPTIONAL(CHECK_)
  }
#undef CHECK_
  assert_int_equal(missing, 0);
  assert_int_equal(unwrapped, 0);
}

static void test_every_table_has_every_fused_kernel(void **state) {
  (void)state;
  check_table(lab_device_ops_of(LAB_DEV_CPU), NULL, 1);
  check_table(lab_device_ops_of(LAB_DEV_SIM), NULL, 0);
  const lab_device_ops *cuda = lab_device_ops_of(LAB_DEV_CUDA); /* the plugin, where it loads */
  if (cuda) check_table(cuda, NULL, 0);
  const lab_device_ops *plain = lab_device_ops_of(LAB_DEV_CPU);
  lab_kprof_enable(1);
  check_table(lab_device_ops_of(LAB_DEV_CPU), plain, 1);
  lab_kprof_enable(0);
  assert_ptr_equal(lab_device_ops_of(LAB_DEV_CPU), plain);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_host_reads_of_sim_memory_fault),
      cmocka_unit_test(test_values_cross_only_through_copies),
      cmocka_unit_test(test_mixing_devices_names_both),
      cmocka_unit_test(test_each_device_keeps_its_account),
      cmocka_unit_test(test_sim_arena_reuses_and_merges_ranges),
      cmocka_unit_test(test_every_table_has_every_fused_kernel),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
