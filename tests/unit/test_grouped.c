/* The REPL's grouping of per-rank output. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "shell/grouped.h"

static char *render(int n, const char *const *texts, int prefix) {
  int64_t lens[16];
  for (int i = 0; i < n; i++) lens[i] = (int64_t)strlen(texts[i]);
  char *buf = NULL;
  size_t size = 0;
  FILE *f = open_memstream(&buf, &size);
  print_grouped(f, n, texts, lens, prefix);
  fclose(f);
  return buf;
}

static void test_rank_sets(void **state) {
  (void)state;
  char b[64];
  rank_set_str((int[]){1, 1, 1, 1}, 4, b, sizeof b);
  assert_string_equal(b, "0-3");
  rank_set_str((int[]){1, 0, 1, 0}, 4, b, sizeof b);
  assert_string_equal(b, "0,2");
  rank_set_str((int[]){1, 1, 0, 1}, 4, b, sizeof b);
  assert_string_equal(b, "0-1,3");
}

static void test_identical_output_shown_once(void **state) {
  (void)state;
  const char *t[] = {"10.0\n", "10.0\n", "10.0\n", "10.0\n"};
  char *s = render(4, t, 1);
  assert_string_equal(s, "[0-3] 10.0\n");
  free(s);
}

static void test_differing_output_in_rank_order(void **state) {
  (void)state;
  const char *t[] = {"0\n", "1\n", "0\n", "3"};
  char *s = render(4, t, 1);
  assert_string_equal(s, "[0,2] 0\n[1] 1\n[3] 3\n");
  free(s);
}

static void test_multiline_and_silent_ranks(void **state) {
  (void)state;
  const char *t[] = {"a\nb\n", "", "a\nb\n"};
  char *s = render(3, t, 1);
  assert_string_equal(s, "[0,2] a\n[0,2] b\n");
  free(s);
  const char *one[] = {"plain\n"};
  s = render(1, one, 0);
  assert_string_equal(s, "plain\n");
  free(s);
}

/* texts that differ only where each rank names itself fold into one block, rank «N» marked;
 * a list naming every rank (a desync report) stays as it is */
static void test_own_rank_folds(void **state) {
  (void)state;
  const char *t[] = {"rank 0: bad\n", "rank 1: bad\n", "rank 2: bad\n"};
  char *s = render(3, t, 1);
  assert_string_equal(s, "[0-2] rank \xc2\xabN\xc2\xbb: bad\n");
  free(s);
  const char *list[] = {"x rank 0\n  rank 0: a\n  rank 1: b\n", "x rank 1\n  rank 0: a\n  rank 1: b\n"};
  s = render(2, list, 1);
  assert_string_equal(s, "[0-1] x rank \xc2\xabN\xc2\xbb\n[0-1]   rank 0: a\n[0-1]   rank 1: b\n");
  free(s);
  const char *ranked[] = {"franks 0\n", "franks 1\n"}; /* not the word "rank" */
  s = render(2, ranked, 1);
  assert_string_equal(s, "[0] franks 0\n[1] franks 1\n");
  free(s);
}

/* several lines, most alike: line by line, the differing part between « and » */
static void test_line_by_line(void **state) {
  (void)state;
  const char *t[] = {"head\nloss 2.31\ntail\n", "head\nloss 2.35\ntail\n", "head\nloss 2.31\ntail\n"};
  char *s = render(3, t, 1);
  assert_string_equal(s, "[0-2] head\n[0,2] loss 2.3\xc2\xab" "1\xc2\xbb\n[1] loss 2.3\xc2\xab" "5\xc2\xbb\n[0-2] tail\n");
  free(s);
  const char *apart[] = {"a\nb\nc\n", "x\ny\nc\n"}; /* mostly different: per rank, as before */
  s = render(2, apart, 1);
  assert_string_equal(s, "[0] a\n[0] b\n[0] c\n[1] x\n[1] y\n[1] c\n");
  free(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rank_sets),
      cmocka_unit_test(test_identical_output_shown_once),
      cmocka_unit_test(test_differing_output_in_rank_order),
      cmocka_unit_test(test_multiline_and_silent_ranks),
      cmocka_unit_test(test_own_rank_folds),
      cmocka_unit_test(test_line_by_line),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
