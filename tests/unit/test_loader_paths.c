/* Where the CUDA plugin loader looks for libcudart, libcublasLt and libnccl
 * (runtime/cuda/loader_paths.c), against a fake environment and a temporary tree shaped like
 * a toolkit, a virtualenv with the NVIDIA wheels (nvidia/<pkg>/lib/libX.so.N, no unversioned
 * link, CUDA 13's nvidia/cu13/lib layout too) and an override directory: the order loader.h
 * documents, and a library found in the first place that has it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "runtime/cuda/loader.h"

static char root[256];
static const char *fake_path, *fake_venv, *fake_override, *fake_cuda_home;

static const char *fake_env(const char *name) {
  if (strcmp(name, "PATH") == 0) return fake_path;
  if (strcmp(name, "VIRTUAL_ENV") == 0) return fake_venv;
  if (strcmp(name, "LLMLAB_CUDA_LIBS") == 0) return fake_override;
  if (strcmp(name, "CUDA_HOME") == 0) return fake_cuda_home;
  return NULL;
}

static void mkdirs(const char *rel) {
  char p[512], *s;
  snprintf(p, sizeof p, "%s/%s", root, rel);
  for (s = p + strlen(root) + 1; (s = strchr(s, '/')); s++) {
    *s = 0;
    mkdir(p, 0755);
    *s = '/';
  }
  mkdir(p, 0755);
}

static void touch(const char *rel) {
  char p[512];
  snprintf(p, sizeof p, "%s/%s", root, rel);
  FILE *f = fopen(p, "w");
  assert_non_null(f);
  fclose(f);
}

static int index_of(char (*dirs)[1024], int n, const char *rel) {
  char p[512];
  snprintf(p, sizeof p, "%s/%s", root, rel);
  for (int i = 0; i < n; i++)
    if (strcmp(dirs[i], p) == 0) return i;
  return -1;
}

static int setup(void **state) {
  (void)state;
  snprintf(root, sizeof root, "/tmp/llmlab_loader_XXXXXX");
  assert_non_null(mkdtemp(root));
  mkdirs("venv/bin");
  touch("venv/bin/python3");
  char p[512];
  snprintf(p, sizeof p, "%s/venv/bin/python3", root);
  chmod(p, 0755);
  mkdirs("venv/lib/python3.12/site-packages/nvidia/cu13/lib");
  mkdirs("venv/lib/python3.12/site-packages/nvidia/nccl/lib");
  mkdirs("venv/lib/python3.12/site-packages/nvidia/nccl/include");
  touch("venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcudart.so.13");
  touch("venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcublasLt.so.13");
  touch("venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2");
  mkdirs("toolkit/lib64");
  touch("toolkit/lib64/libcudart.so.13");
  mkdirs("override");
  touch("override/libnccl.so.2");
  return 0;
}

static int teardown(void **state) {
  (void)state;
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  return system(cmd);
}

/* the wheels of the python3 on PATH are found without running Python, and each library comes
 * from the first place that has it: cudart from CUDA_HOME, cuBLASLt and NCCL from the wheels */
static void test_wheels_found(void **state) {
  (void)state;
  char path[600], home[300];
  snprintf(path, sizeof path, "/nonexistent:%s/venv/bin:/usr/bin", root);
  snprintf(home, sizeof home, "%s/toolkit", root);
  fake_path = path;
  fake_venv = NULL;
  fake_override = NULL;
  fake_cuda_home = home;
  static char dirs[64][1024];
  int n = lab_cuda_search_dirs(fake_env, "", dirs, 64);
  int tk = index_of(dirs, n, "toolkit/lib64");
  int cu13 = index_of(dirs, n, "venv/bin/../lib/python3.12/site-packages/nvidia/cu13/lib");
  int nccl = index_of(dirs, n, "venv/bin/../lib/python3.12/site-packages/nvidia/nccl/lib");
  assert_true(tk >= 0 && cu13 >= 0 && nccl >= 0);
  assert_true(tk < cu13); /* CUDA_HOME before the wheels */
  char found[1100];
  assert_int_equal(lab_cuda_find("libcudart.so.13", dirs, n, found, sizeof found), 0);
  assert_non_null(strstr(found, "/toolkit/lib64/libcudart.so.13"));
  assert_int_equal(lab_cuda_find("libcublasLt.so.13", dirs, n, found, sizeof found), 0);
  assert_non_null(strstr(found, "/nvidia/cu13/lib/libcublasLt.so.13"));
  assert_int_equal(lab_cuda_find("libnccl.so.2", dirs, n, found, sizeof found), 0);
  assert_non_null(strstr(found, "/nvidia/nccl/lib/libnccl.so.2"));
  assert_int_equal(lab_cuda_find("libnothere.so.1", dirs, n, found, sizeof found), -1);
}

/* LLMLAB_CUDA_LIBS comes first; VIRTUAL_ENV finds the wheels without PATH; a directory that
 * does not exist is left out */
static void test_override_first(void **state) {
  (void)state;
  char venv[300], over[600];
  snprintf(venv, sizeof venv, "%s/venv", root);
  snprintf(over, sizeof over, "%s/missing:%s/override", root, root);
  fake_path = "/nonexistent";
  fake_venv = venv;
  fake_override = over;
  fake_cuda_home = NULL;
  static char dirs[64][1024];
  int n = lab_cuda_search_dirs(fake_env, "", dirs, 64);
  assert_int_equal(index_of(dirs, n, "override"), 0);
  assert_int_equal(index_of(dirs, n, "missing"), -1);
  assert_true(index_of(dirs, n, "venv/lib/python3.12/site-packages/nvidia/cu13/lib") > 0);
  char found[1100];
  assert_int_equal(lab_cuda_find("libnccl.so.2", dirs, n, found, sizeof found), 0);
  assert_non_null(strstr(found, "/override/libnccl.so.2"));
  /* max bounds the list */
  assert_int_equal(lab_cuda_search_dirs(fake_env, "", dirs, 1), 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_wheels_found),
      cmocka_unit_test(test_override_first),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
