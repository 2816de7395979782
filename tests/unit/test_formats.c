/* The checkpoint file parsers on good and hostile input: JSON (nesting, numbers, strings,
 * duplicates, truncation) and safetensors headers (lengths, dtypes, shapes, offsets that
 * overlap, leave holes or leave the file, checksums). Every truncation and every single-bit
 * flip of a valid file must be refused or parsed without reading outside it (the sanitizer
 * build checks the "without"). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "runtime/json.h"
#include "runtime/safetensors.h"

static int parses(const char *s) {
  lab_json v;
  char err[256];
  int rc = lab_json_parse(s, strlen(s), &v, err, sizeof err);
  lab_json_free(&v);
  return rc == 0;
}

static void test_json_values(void **state) {
  (void)state;
  lab_json v;
  char err[256];
  const char *s = "{\"b\": [1, -2.5e3, \"x\\u00e9\\ud83d\\ude00\", true, null], \"a\": -9223372036854775808}";
  assert_int_equal(lab_json_parse(s, strlen(s), &v, err, sizeof err), 0);
  const lab_json *a = lab_json_get(&v, "a"), *b = lab_json_get(&v, "b");
  assert_non_null(a);
  assert_int_equal(a->kind, LAB_JSON_INT);
  assert_true(a->integer == INT64_MIN);
  assert_int_equal(b->kind, LAB_JSON_ARRAY);
  assert_int_equal(b->len, 5);
  assert_int_equal(b->items[1].kind, LAB_JSON_NUMBER);
  assert_true(b->items[1].number == -2500.0);
  assert_string_equal(b->items[2].str, "x\xc3\xa9\xf0\x9f\x98\x80");
  assert_null(lab_json_get(&v, "c"));
  lab_json_free(&v);
}

static void test_json_refused(void **state) {
  (void)state;
  const char *bad[] = {"", "while true do end", "return {}", "{", "[1,", "{\"a\":1,}", "[1 2]", "01", "1.", "-",
                       "1e", "\"abc", "\"\\x\"", "\"\\u12\"", "\"\\ud800\"", "\"\\u0000\"", "\"a\x01\"",
                       "{\"a\":1,\"a\":2}", "9223372036854775808", "1e400", "[1] x", "{1:2}", "nul", "tru"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    if (parses(bad[i])) fail_msg("accepted: %s", bad[i]);
  }
  /* nesting is bounded */
  char deep[2 * LAB_JSON_MAX_DEPTH + 8];
  size_t n = 0;
  for (int i = 0; i < LAB_JSON_MAX_DEPTH + 2; i++) deep[n++] = '[';
  for (int i = 0; i < LAB_JSON_MAX_DEPTH + 2; i++) deep[n++] = ']';
  deep[n] = 0;
  assert_false(parses(deep));
  /* reads stop at the given length: "[1]" followed by bytes outside it */
  lab_json v;
  char err[64];
  assert_int_equal(lab_json_parse("[1]garbage", 3, &v, err, sizeof err), 0);
  lab_json_free(&v);
  assert_int_not_equal(lab_json_parse("[12345", 3, &v, err, sizeof err), 0);
}

/* a valid file: two tensors, the header built by the writer */
static unsigned char *good_file(size_t *len) {
  static const float w[6] = {1, 2, 3, 4, 5, 6};
  static const int64_t ids[2] = {7, -8};
  lab_st_tensor ts[2] = {{.name = "w", .dtype = LAB_F32, .ndim = 2, .shape = {2, 3}, .data = w, .nbytes = sizeof w},
                         {.name = "ids", .dtype = LAB_I64, .ndim = 1, .shape = {2}, .data = ids, .nbytes = sizeof ids}};
  const char *k[] = {"step"}, *val[] = {"3"};
  char *h;
  size_t hl;
  assert_int_equal(lab_st_build_header(ts, 2, k, val, 1, &h, &hl), 0);
  assert_int_equal((hl - 8) % 8, 0);
  unsigned char *f = malloc(hl + sizeof w + sizeof ids);
  memcpy(f, h, hl);
  memcpy(f + hl, w, sizeof w);
  memcpy(f + hl + sizeof w, ids, sizeof ids);
  free(h);
  *len = hl + sizeof w + sizeof ids;
  return f;
}

static void test_safetensors_roundtrip(void **state) {
  (void)state;
  size_t len;
  unsigned char *f = good_file(&len);
  lab_st_header h;
  assert_int_equal(lab_st_parse(f, len, "good", &h), 0);
  assert_int_equal(h.n, 2);
  const lab_st_entry *w = strcmp(h.entries[0].name, "w") == 0 ? &h.entries[0] : &h.entries[1];
  assert_int_equal(w->dtype, LAB_F32);
  assert_int_equal(w->ndim, 2);
  assert_int_equal(w->shape[1], 3);
  assert_true(w->has_crc);
  const lab_json *step = lab_json_get(h.metadata, "step");
  assert_string_equal(step->str, "3");
  lab_st_header_free(&h);
  /* one flipped data bit fails the checksum */
  f[len - 1] ^= 1;
  assert_int_not_equal(lab_st_parse(f, len, "flipped", &h), 0);
  free(f);
}

static int parse_text(const char *header, size_t data_len) {
  size_t n = strlen(header);
  unsigned char *f = calloc(8 + n + data_len + 1, 1);
  for (int i = 0; i < 8; i++) f[i] = (unsigned char)((uint64_t)n >> (8 * i));
  memcpy(f + 8, header, n);
  lab_st_header h;
  int rc = lab_st_parse(f, 8 + n + data_len, "test", &h);
  if (rc == 0) lab_st_header_free(&h);
  free(f);
  return rc;
}

static void test_safetensors_refused(void **state) {
  (void)state;
  assert_int_equal(parse_text("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8), 0);
  const char *bad[] = {
      "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}x",                  /* trailing */
      "{\"a\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[0,8]}}",                    /* dtype */
      "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}",                   /* size */
      "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,16]}}",                  /* outside */
      "{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}",                  /* negative */
      "{\"a\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904,4],\"data_offsets\":[0,8]}}", /* overflow */
      "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",                   /* a hole */
      "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
      "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", /* overlap */
      "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", /* unclaimed bytes */
      "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", /* reversed */
      "{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}",                        /* missing field */
      "{\"__metadata__\":{\"k\":1},\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
      "[1,2]",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    if (parse_text(bad[i], 8) == 0) fail_msg("accepted: %s", bad[i]);
  /* a header length larger than the file */
  unsigned char f[16] = {0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, '{', '}'};
  lab_st_header h;
  assert_int_not_equal(lab_st_parse(f, sizeof f, "huge", &h), 0);
  assert_int_not_equal(lab_st_parse(f, 3, "short", &h), 0);
}

/* every prefix and every single-bit flip of a valid file: refused, or parsed within bounds */
static void test_safetensors_mutations(void **state) {
  (void)state;
  size_t len;
  unsigned char *good = good_file(&len);
  lab_st_header h;
  for (size_t n = 0; n < len; n++) {
    unsigned char *p = malloc(n ? n : 1); /* exactly n bytes: reading past them is a sanitizer error */
    memcpy(p, good, n);
    assert_int_not_equal(lab_st_parse(p, n, "prefix", &h), 0);
    free(p);
  }
  assert_int_equal(lab_st_parse(good, len, "good", &h), 0);
  size_t data_start = (size_t)h.data_start;
  lab_st_header_free(&h);
  for (size_t i = 0; i < len; i++)
    for (int bit = 0; bit < 8; bit++) {
      unsigned char *p = malloc(len);
      memcpy(p, good, len);
      p[i] ^= (unsigned char)(1 << bit);
      int rc = lab_st_parse(p, len, "flip", &h);
      if (rc == 0) lab_st_header_free(&h);
      /* a flip in the data always fails its crc32; a header flip may keep it valid (a
       * padding space turned into another whitespace byte, say) */
      if (i >= data_start && rc == 0) fail_msg("a flip of bit %d at data byte %zu was accepted", bit, i);
      free(p);
    }
  free(good);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_json_values),           cmocka_unit_test(test_json_refused),
      cmocka_unit_test(test_safetensors_roundtrip), cmocka_unit_test(test_safetensors_refused),
      cmocka_unit_test(test_safetensors_mutations),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
