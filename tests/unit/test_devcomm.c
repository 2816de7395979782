/* Which communicator a collective on device tensors takes (runtime/dist/devcomm.c), decided on
 * the CPU: NCCL only when it is built and every member drives a GPU no other member drives;
 * cuda tensors of one index under such a plan go to NCCL, cpu tensors to MPI, everything else
 * (sim, mixed devices, shared GPUs) stages through host memory. The cases are the situations of
 * a real job, written out by hand: 2 ranks on the one GPU of this kind of machine, 8 ranks on
 * the 8 GPUs of a node, 16 ranks on 2 such nodes, 4 ranks over 2 GPUs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "runtime/dist/devcomm.h"
#include "runtime/error.h"

static int plan(int n, const char *const *keys, int built, char *why) {
  static char k[16][LAB_GPU_KEY];
  int ranks[16];
  for (int i = 0; i < n; i++) {
    snprintf(k[i], LAB_GPU_KEY, "%s", keys[i]);
    ranks[i] = 10 + i; /* world ranks differ from group ranks, to see which the reason names */
  }
  return lab_devcomm_plan(n, (const char(*)[LAB_GPU_KEY])k, ranks, built, why, 200);
}

static void test_two_ranks_one_gpu_stage(void **state) {
  (void)state;
  char why[200];
  const char *keys[] = {"h200/0000:19:00.0", "h200/0000:19:00.0"};
  assert_int_equal(plan(2, keys, 1, why), LAB_DEVPLAN_STAGED);
  assert_non_null(strstr(why, "world ranks 10 and 11 share GPU h200/0000:19:00.0"));
  assert_non_null(strstr(why, "duplicate GPU"));
}

static void test_eight_gpus_of_a_node_take_nccl(void **state) {
  (void)state;
  char why[200] = "x";
  const char *keys[8] = {"n/0000:18:00.0", "n/0000:2a:00.0", "n/0000:3a:00.0", "n/0000:5d:00.0",
                         "n/0000:9a:00.0", "n/0000:ab:00.0", "n/0000:ba:00.0", "n/0000:db:00.0"};
  assert_int_equal(plan(8, keys, 1, why), LAB_DEVPLAN_NCCL);
  assert_string_equal(why, "");
}

/* the same bus id on two hosts is two GPUs */
static void test_same_bus_on_two_nodes_is_two_gpus(void **state) {
  (void)state;
  char why[200];
  const char *keys[] = {"node1/0000:18:00.0", "node2/0000:18:00.0"};
  assert_int_equal(plan(2, keys, 1, why), LAB_DEVPLAN_NCCL);
}

/* 4 ranks over 2 GPUs: the first pair found sharing is named (ranks 0 and 2 share GPU A) */
static void test_four_ranks_two_gpus_names_the_first_pair(void **state) {
  (void)state;
  char why[200];
  const char *keys[] = {"n/A", "n/B", "n/A", "n/B"};
  assert_int_equal(plan(4, keys, 1, why), LAB_DEVPLAN_STAGED);
  assert_non_null(strstr(why, "world ranks 10 and 12 share GPU n/A"));
}

static void test_no_gpu_or_no_nccl_stage(void **state) {
  (void)state;
  char why[200];
  const char *keys[] = {"n/A", ""};
  assert_int_equal(plan(2, keys, 1, why), LAB_DEVPLAN_STAGED);
  assert_string_equal(why, "world rank 11 has no GPU");
  const char *distinct[] = {"n/A", "n/B"};
  assert_int_equal(plan(2, distinct, 0, why), LAB_DEVPLAN_STAGED);
  assert_string_equal(why, "NCCL is not usable"); /* decide() adds the loader's reason */
}

/* a world of 1 with a GPU takes NCCL (the configuration tests/gpu runs it in) */
static void test_world_of_one(void **state) {
  (void)state;
  char why[200];
  const char *keys[] = {"n/A"};
  assert_int_equal(plan(1, keys, 1, why), LAB_DEVPLAN_NCCL);
}

static void test_paths(void **state) {
  (void)state;
  lab_device cpu = {LAB_DEV_CPU, 0}, sim = {LAB_DEV_SIM, 0}, c0 = {LAB_DEV_CUDA, 0}, c1 = {LAB_DEV_CUDA, 1};
  int plans[] = {LAB_DEVPLAN_UNDECIDED, LAB_DEVPLAN_NCCL, LAB_DEVPLAN_STAGED};
  for (int i = 0; i < 3; i++) {
    assert_int_equal(lab_coll_path_of(cpu, cpu, plans[i]), LAB_PATH_HOST); /* whatever the plan */
    assert_int_equal(lab_coll_path_of(sim, sim, plans[i]), LAB_PATH_STAGED);
    assert_int_equal(lab_coll_path_of(cpu, c0, plans[i]), LAB_PATH_STAGED);
    assert_int_equal(lab_coll_path_of(c0, cpu, plans[i]), LAB_PATH_STAGED);
    assert_int_equal(lab_coll_path_of(c0, c1, plans[i]), LAB_PATH_STAGED);
  }
  assert_int_equal(lab_coll_path_of(c0, c0, LAB_DEVPLAN_NCCL), LAB_PATH_DEVICE);
  assert_int_equal(lab_coll_path_of(c1, c1, LAB_DEVPLAN_NCCL), LAB_PATH_DEVICE);
  assert_int_equal(lab_coll_path_of(c0, c0, LAB_DEVPLAN_STAGED), LAB_PATH_STAGED);
  assert_int_equal(lab_coll_path_of(c0, c0, LAB_DEVPLAN_UNDECIDED), LAB_PATH_STAGED);
}

/* routing on a group whose plan is known: the staging note is said once, a tensor on another
 * GPU than the group's communicator is refused naming both, and a send before any collective
 * stages (making the communicator needs every member) */
static void test_route(void **state) {
  (void)state;
  lab_group g;
  memset(&g, 0, sizeof g);
  snprintf(g.name, sizeof g.name, "world");
  g.rank = 1; /* rank 0 of the group prints the note; this test keeps stderr quiet */
  g.size = 2;
  g.device_plan = LAB_DEVPLAN_STAGED;
  snprintf(g.device_why, sizeof g.device_why, "world ranks 0 and 1 share GPU h/0000:19:00.0");
  lab_device c0 = {LAB_DEV_CUDA, 0}, c1 = {LAB_DEV_CUDA, 1}, cpu = {LAB_DEV_CPU, 0};
  lab_coll_path path = LAB_PATH_HOST;
  assert_int_equal(lab_devcomm_route("all_reduce", &g, c0, c0, 0, &path), 0);
  assert_int_equal(path, LAB_PATH_STAGED);
  assert_int_equal(g.device_said, 1);
  assert_int_equal(lab_devcomm_route("all_reduce", &g, cpu, cpu, 0, &path), 0);
  assert_int_equal(path, LAB_PATH_HOST);

  g.device_plan = LAB_DEVPLAN_NCCL;
  g.device_index = 0;
  assert_int_equal(lab_devcomm_route("all_reduce", &g, c0, c0, 0, &path), 0);
  assert_int_equal(path, LAB_PATH_DEVICE);
  assert_int_equal(lab_devcomm_route("send", &g, c0, c0, 1, &path), 0);
  assert_int_equal(path, LAB_PATH_STAGED); /* no communicator yet */
  lab_clear_error();
  assert_int_equal(lab_devcomm_route("all_reduce", &g, c1, c1, 0, &path), -1);
  assert_non_null(strstr(lab_last_error(), "the NCCL communicator of world is on cuda:0 but the tensor is on cuda:1"));

  char buf[320];
  assert_string_equal(lab_devcomm_describe(&g, c0, buf, sizeof buf), "nccl (cuda:0)");
  assert_string_equal(lab_devcomm_describe(&g, cpu, buf, sizeof buf), "mpi");
  g.device_plan = LAB_DEVPLAN_STAGED;
  assert_string_equal(lab_devcomm_describe(&g, c0, buf, sizeof buf),
                      "mpi, staged through host memory: world ranks 0 and 1 share GPU h/0000:19:00.0");
  g.rank = -1;
  assert_string_equal(lab_devcomm_describe(&g, c0, buf, sizeof buf), "none: this rank is not a member of world");
}

/* a new group's plan waits for its first collective on cuda tensors: cpu collectives and sends
 * decide nothing (no exchange, no NCCL loaded), lab.dist.backend says it is undecided; the first
 * cuda collective exchanges the members' GPUs once over the host backend (here, where NCCL
 * cannot load in a test binary or was not built, every member stages and says why) */
static int exchanges;
static int fake_exchange(lab_group *g, const void *mine, void *all, int nbytes) {
  exchanges++;
  for (int r = 0; r < g->size; r++) memcpy((char *)all + (size_t)r * (size_t)nbytes, mine, (size_t)nbytes);
  return 0;
}

static void test_plan_waits_for_a_cuda_collective(void **state) {
  (void)state;
  lab_comm_backend be;
  memset(&be, 0, sizeof be);
  be.exchange = fake_exchange;
  lab_group g;
  memset(&g, 0, sizeof g);
  snprintf(g.name, sizeof g.name, "world");
  g.rank = 1;
  g.size = 2;
  int ranks[2] = {0, 1};
  g.world_ranks = ranks;
  g.backend = &be;
  assert_int_equal(lab_devcomm_setup(&g), 0);
  assert_int_equal(g.device_plan, LAB_DEVPLAN_UNDECIDED);
  lab_device c0 = {LAB_DEV_CUDA, 0}, cpu = {LAB_DEV_CPU, 0};
  lab_coll_path path;
  exchanges = 0;
  assert_int_equal(lab_devcomm_route("all_reduce", &g, cpu, cpu, 0, &path), 0);
  assert_int_equal(path, LAB_PATH_HOST);
  assert_int_equal(lab_devcomm_route("send", &g, c0, c0, 1, &path), 0);
  assert_int_equal(path, LAB_PATH_STAGED);
  assert_int_equal(exchanges, 0);
  assert_int_equal(g.device_plan, LAB_DEVPLAN_UNDECIDED);
  char buf[320];
  assert_non_null(strstr(lab_devcomm_describe(&g, c0, buf, sizeof buf), "undecided: the first collective on cuda"));
  assert_int_equal(lab_devcomm_route("all_reduce", &g, c0, c0, 0, &path), 0);
  assert_int_equal(exchanges, 1);
  assert_int_equal(g.device_plan, LAB_DEVPLAN_STAGED);
  assert_int_equal(path, LAB_PATH_STAGED);
  assert_non_null(strstr(g.device_why, "NCCL is not usable: "));
  assert_int_equal(lab_devcomm_route("all_reduce", &g, c0, c0, 0, &path), 0);
  assert_int_equal(lab_devcomm_decide(&g, c0), 0);
  assert_int_equal(exchanges, 1); /* decided once */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_two_ranks_one_gpu_stage),  cmocka_unit_test(test_eight_gpus_of_a_node_take_nccl),
      cmocka_unit_test(test_same_bus_on_two_nodes_is_two_gpus),
      cmocka_unit_test(test_four_ranks_two_gpus_names_the_first_pair),
      cmocka_unit_test(test_no_gpu_or_no_nccl_stage), cmocka_unit_test(test_world_of_one),
      cmocka_unit_test(test_paths), cmocka_unit_test(test_route), cmocka_unit_test(test_plan_waits_for_a_cuda_collective),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
